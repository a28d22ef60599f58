"""Batching isomorphic nodes (jacacc/tensor/isomorphic.py): many small independent steps of one
kind run as one step on a stack.  Every batched program computes what the unbatched one does;
chains of groups read each other's batches without a stack between them; groups read out of
order take a slice or a gather; a group that does not pay is left alone; a Python loop over
mixture components (solve, slogdet) differentiates to JAX's Hessian with its per-component
LAPACK calls batched."""

from __future__ import annotations

from collections import Counter

import jax_reference
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jacacc.tensor as jt
from jacacc.tensor import isomorphic
from jacacc.tensor.evaluate import Program
from jacacc.tensor.expr import add, einsum, elementwise, nodes_of, unary, var
from jacacc.tensor.isomorphic import batch_isomorphic

RNG = np.random.default_rng(41)


def _operations(roots) -> Counter:
    return Counter(n.param[0] if n.kind == "op" else n.kind for n in nodes_of(roots))


def _both(roots, inputs, values):
    """The program's outputs with and without the pass (Program applies it when enabled)."""
    batched = Program(roots, inputs)(*values)
    previous = isomorphic.ENABLED
    isomorphic.ENABLED = False
    try:
        plain = Program(roots, inputs)(*values)
    finally:
        isomorphic.ENABLED = previous
    return batched, plain


def _matrices(count: int, shape=(3, 3)):
    return [var(f"m{k}", shape) for k in range(count)]


def test_a_chain_of_groups_reads_its_batches_without_stacks():
    """Eight matrix products, each then exponentiated and summed: one stack of the operands at the
    start, then each group reads the batch before it as it is."""
    ms = _matrices(8)
    w = var("w", (3, 3))
    y = add(*(einsum("ij->", unary("exp", einsum("ij,jk->ik", m, w))) for m in ms))
    (z,) = batch_isomorphic([y])
    before, after = _operations([y]), _operations([z])
    assert before["einsum"] == 16 and after["concatenate"] == 1
    assert after["einsum"] < before["einsum"] and after["unary"] == 1
    values = [RNG.standard_normal(m.shape) for m in [*ms, w]]
    batched, plain = _both([y], [*ms, w], values)
    np.testing.assert_allclose(batched[0], plain[0], rtol=1e-14)


def test_a_shared_operand_is_not_stacked():
    """``w`` is read by every member: it stays one operand, the einsum gains a batch letter on the
    stacked side only."""
    ms = _matrices(6)
    w = var("w", (3, 3))
    y = add(*(einsum("ij,jk->", m, w) for m in ms))
    (z,) = batch_isomorphic([y])
    batched_einsums = [n for n in nodes_of([z]) if n.kind == "einsum" and w in n.args]
    assert len(batched_einsums) == 1 and batched_einsums[0].args[0].shape == (6, 3, 3)


@pytest.mark.parametrize("order", ["reversed", "halves"])
def test_members_read_out_of_order_take_a_slice_or_a_gather(order):
    """A second group reading the first's members in another order takes them from the batch by
    one gather (reversed) or slices (the first half with the second); the values are the same."""
    ms = _matrices(8, (4,))
    firsts = [unary("exp", einsum("i,i->i", m, m)) for m in ms]
    pairs = list(zip(firsts, reversed(firsts), strict=True)) if order == "reversed" else \
        list(zip(firsts[:4], firsts[4:], strict=True))
    y = add(*(einsum("i,j->", a, b) for a, b in pairs))
    values = [RNG.standard_normal(m.shape) for m in ms]
    batched, plain = _both([y], ms, values)
    np.testing.assert_allclose(batched[0], plain[0], rtol=1e-14)
    before, after = _operations([y]), _operations(batch_isomorphic([y]))
    assert after["gather" if order == "reversed" else "index"] >= 1 and after["einsum"] < before["einsum"]


@pytest.mark.parametrize("axis", [0, 1])
def test_a_stack_of_a_batch_in_order_is_the_batch(axis):
    """``np.stack`` of a loop's results, where the results are one batch's entries in order, is
    that batch (its axis moved): the only stack left is the one of the loop's inputs."""
    from jacacc.tensor.arrays import concatenate_nodes, insert_unit_axes

    ms = _matrices(6)
    w = var("w", (3, 3))
    results = [unary("exp", einsum("ij,jk->ik", m, w)) for m in ms]
    y = concatenate_nodes([insert_unit_axes(r, (axis,)) for r in results], axis)
    (z,) = batch_isomorphic([y])
    assert _operations([y])["concatenate"] == 1 and _operations([z])["concatenate"] == 1
    assert not any(n.kind == "op" and n.param[0] == "index" for n in nodes_of([z]))
    values = [RNG.standard_normal(m.shape) for m in [*ms, w]]
    batched, plain = _both([y], [*ms, w], values)
    np.testing.assert_allclose(batched[0], plain[0], rtol=1e-14)


def test_a_column_of_a_tensor_s_rows_reads_the_tensor_reshaped():
    """Members reading ``x[i, j]`` for every ``(i, j)`` in order (a Hessian's directions, a
    broadcast's rows) take ``x`` reshaped, not a stack of one slice per member."""
    from jacacc.tensor.arrays import BasicKey, index_node

    x, w = var("x", (3, 2, 4)), var("w", (4, 4))
    rows = [index_node(x, BasicKey((("i", i), ("i", j), ("s", 0, 1, 4)))) for i in range(3) for j in range(2)]
    y = add(*(einsum("i->", unary("exp", einsum("i,ij->j", r, w))) for r in rows))
    (z,) = batch_isomorphic([y])
    after = _operations([z])
    assert after["concatenate"] == 0 and after["gather"] == 0 and after["index"] == 0 and after["reshape"] == 1
    values = [RNG.standard_normal(x.shape), RNG.standard_normal(w.shape)]
    batched, plain = _both([y], [x, w], values)
    np.testing.assert_allclose(batched[0], plain[0], rtol=1e-14)


@pytest.mark.parametrize("order", ["rows", "columns"])
def test_entries_of_several_batches_are_one_reshape_or_one_gather(order):
    """A group reading the entries of three batches that are slices ``x[:, j]`` of one tensor
    takes them from that tensor in one step, not a stack of one slice per member: read row by
    row, ``x[0, 0], x[0, 1], x[0, 2], x[1, 0], …``, the entries are ``x`` reshaped; column by
    column, ``x[0, 0], x[1, 0], …``, one gather."""
    from jacacc.tensor.arrays import BasicKey, index_node

    x, w = var("x", (4, 3, 5)), var("w", (5, 5))
    batches = [index_node(x, BasicKey((("s", 0, 1, 4), ("i", j), ("s", 0, 1, 5)))) for j in range(3)]
    pairs = [(i, b) for i in range(4) for b in batches] if order == "rows" else \
        [(i, b) for b in batches for i in range(4)]
    entries = [index_node(b, BasicKey((("i", i), ("s", 0, 1, 5)))) for i, b in pairs]
    y = add(*(einsum("i->", unary("tanh", einsum("i,ij->j", e, w))) for e in entries))
    (z,) = batch_isomorphic([y])
    after = _operations([z])
    assert after["concatenate"] == 0 and after["index"] == 0
    assert (after["reshape"], after["gather"]) == ((1, 0) if order == "rows" else (0, 1))
    values = [RNG.standard_normal(x.shape), RNG.standard_normal(w.shape)]
    batched, plain = _both([y], [x, w], values)
    np.testing.assert_allclose(batched[0], plain[0], rtol=1e-14)


def test_a_group_that_does_not_pay_is_left_alone():
    """Two elementwise steps on two different inputs: stacking them costs more than the one call
    saved, so the expression comes back as it was."""
    a, b = var("a", (5,)), var("b", (5,))
    y = add(unary("exp", a), unary("exp", b))
    assert batch_isomorphic([y])[0] is y


def test_entries_read_outside_the_chain_keep_their_values():
    """Members whose values are also outputs of their own: each is an entry of the batch."""
    ms = _matrices(5)
    w = var("w", (3, 3))
    products = [einsum("ij,jk->ik", m, w) for m in ms]
    roots = [*products, add(*(einsum("ij->", p) for p in products))]
    values = [RNG.standard_normal(m.shape) for m in [*ms, w]]
    batched, plain = _both(roots, [*ms, w], values)
    for x, y in zip(batched, plain, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-14)


@st.composite
def _repeated_programs(draw):
    """A random step applied to several inputs: unary functions, products with a shared matrix,
    sums with another member's value, reductions; a final sum over the members."""
    count = draw(st.integers(2, 7))
    n = draw(st.integers(1, 4))
    xs = [var(f"x{k}", (n, n)) for k in range(count)]
    shared = var("s", (n, n))
    values = list(xs)
    for _ in range(draw(st.integers(1, 5))):
        step = draw(st.sampled_from(["tanh", "sin", "shared", "neighbour", "square"]))
        if step in ("tanh", "sin"):
            values = [unary(step, v) for v in values]
        elif step == "shared":
            values = [einsum("ij,jk->ik", v, shared) for v in values]
        elif step == "neighbour":
            shift = draw(st.integers(1, count))
            values = [add(v, values[(k + shift) % count]) for k, v in enumerate(values)]
        else:
            values = [elementwise("mul", v, v) for v in values]
    y = add(*(einsum("ij->", v) for v in values))
    arrays = [RNG.uniform(-1, 1, (n, n)) for _ in range(count + 1)]
    return y, [*xs, shared], arrays


@settings(max_examples=40, deadline=None)
@given(_repeated_programs())
def test_batched_programs_compute_what_unbatched_ones_do(case):
    y, inputs, values = case
    batched, plain = _both([y], inputs, values)
    np.testing.assert_allclose(batched[0], plain[0], rtol=1e-12, atol=1e-12)


def _mixture(params, data, xp):
    """autograd's GMM negative log-likelihood (examples/gmm.py): a Python loop over components,
    each a solve and a slogdet of a 2 × 2 covariance."""
    log_weights, means, roots = params
    total = []
    for k in range(means.shape[0]):
        cov = xp.dot(roots[k].T, roots[k])
        diff = data - means[k]
        mahalanobis = xp.sum(diff * xp.linalg.solve(cov, diff.T).T, axis=1)
        total.append(log_weights[k] - 0.5 * (mahalanobis + xp.linalg.slogdet(cov)[1]))
    stacked = xp.stack(total)
    top = xp.max(stacked, axis=0)
    return -xp.sum(top + xp.log(xp.sum(xp.exp(stacked - top), axis=0)))


def test_a_loop_of_small_solves_batches_its_lapack_calls_and_matches_jax():
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    K, D = 4, 2
    params = (0.1 * RNG.standard_normal(K), 2 * RNG.standard_normal((K, D)),
              np.eye(D) + 0.2 * RNG.standard_normal((K, D, D)))
    data = RNG.standard_normal((30, D))
    flat = np.concatenate([p.ravel() for p in params])
    sizes = [p.size for p in params]

    def unflatten(x, xp):
        pieces, start = [], 0
        for p, size in zip(params, sizes, strict=True):
            pieces.append(x[start:start + size].reshape(p.shape))
            start += size
        return pieces

    hessian = jt.hessian(lambda x: _mixture(unflatten(x, np), data, np))
    H = hessian(flat)
    expected = jax_reference.jit(jax.hessian(lambda x: _mixture(unflatten(x, jnp), data, jnp)))(flat)
    np.testing.assert_allclose(H, np.asarray(expected), rtol=1e-9, atol=1e-9)
    (program,) = hessian.plans.values()
    solves = sum(n.kind == "op" and n.param[0] == "getrs" for n in program.nodes)
    previous = isomorphic.ENABLED
    isomorphic.ENABLED = False
    try:
        unbatched = jt.hessian(lambda x: _mixture(unflatten(x, np), data, np))
        np.testing.assert_allclose(unbatched(flat), H, rtol=1e-12, atol=1e-12)
        (plain,) = unbatched.plans.values()
    finally:
        isomorphic.ENABLED = previous
    plain_solves = sum(n.kind == "op" and n.param[0] == "getrs" for n in plain.nodes)
    assert solves * 4 <= plain_solves, (solves, plain_solves)


def test_a_sum_of_alike_products_is_one_product_of_stacked_operands():
    """``Σₜ Aₜ Bₜ`` — a loop's backward pass accumulating a weight's gradient one rank-k update
    per step — is one einsum over the stacked ``Aₜ`` and ``Bₜ``, the steps' letter summed: one
    product and no T-term sum; a shared operand is not stacked."""
    steps = 9
    As = [var(f"a{t}", (40, 3)) for t in range(steps)]
    Bs = [var(f"b{t}", (3, 30)) for t in range(steps)]
    shared = var("s", (30, 30))
    y = add(*(einsum("ik,kj->ij", a, b) for a, b in zip(As, Bs, strict=True)),
            *(einsum("ik,kj,jl->il", a, b, shared) for a, b in zip(As, Bs, strict=True)))
    (z,) = batch_isomorphic([y])
    einsums = [n for n in nodes_of([z]) if n.kind == "einsum" and isomorphic._unit_axis(n) is None]
    assert len(einsums) == 2 and _operations([z])["add"] == 1
    assert all(n.args[0].shape == (steps, 40, 3) and n.args[1].shape == (steps, 3, 30) for n in einsums)
    assert any(n.args[-1] is shared for n in einsums)
    values = [RNG.standard_normal(v.shape) for v in [*As, *Bs, shared]]
    batched, plain = _both([y], [*As, *Bs, shared], values)
    # the same products, summed in another order: equal to rounding (relative to the largest entry)
    np.testing.assert_allclose(batched[0], plain[0], rtol=1e-12, atol=1e-13 * np.abs(plain[0]).max())


def test_products_read_elsewhere_or_too_small_to_pay_stay_apart():
    """A product another step also reads stays (its value is needed anyway), and so do products
    whose stacked operands would cost more to copy than the sum they save."""
    As = [var(f"a{t}", (40, 3)) for t in range(5)]
    Bs = [var(f"b{t}", (3, 30)) for t in range(5)]
    products = [einsum("ik,kj->ij", a, b) for a, b in zip(As, Bs, strict=True)]
    y = add(*products)
    read_twice = [y, unary("exp", products[0])]
    groups = [g for gs in isomorphic._summed_products(nodes_of(read_twice), read_twice).values() for g in gs]
    assert groups and all(all(t is not products[0] for t in g) for g in groups)
    big = [var(f"c{t}", (300, 300)) for t in range(3)]
    v = var("v", (300,))
    sums = add(*(einsum("ij,j->i", c, v) for c in big))  # stacking three 300 x 300 matrices to save two sums of 300
    assert isomorphic._summed_products(nodes_of([sums]), [sums]) == {}
