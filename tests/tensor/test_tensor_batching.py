"""Batched sweeps (jacacc/tensor/batching.py): an expression over a leading batch equals the
expression evaluated once per batch element, for every general function with a batching rule
and for those without one (applied element by element); Jacobians through general functions
are written out by one batched sweep, never assembled from one-hot seeds — the Rosenbrock
Hessian (issue 25, item 4) is built without an n³ step."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import jacacc.tensor as jt
from jacacc.linalg import blas_cholesky
from jacacc.tensor import arrays, fusion
from jacacc.tensor.batching import batched
from jacacc.tensor.evaluate import Program
from jacacc.tensor.expr import nodes_of, var
from jacacc.tensor.operators import apply_operator

RNG = np.random.default_rng(2025)


def _key(*items):
    return arrays.BasicKey(tuple(items))


# (name, placeholder shape, build(placeholder, data) -> expression, data shapes)
CASES = [
    ("reshape", (2, 6), lambda p, d: arrays.reshape_node(p, (3, 4)), ()),
    ("cumsum", (3, 4), lambda p, d: apply_operator("cumsum", [p], axis=1, reverse=False)[0], ()),
    ("cumsum reversed", (3, 4), lambda p, d: apply_operator("cumsum", [p], axis=0, reverse=True)[0], ()),
    ("index", (5, 3), lambda p, d: arrays.index_node(p, _key(("s", 4, -2, 3), ("i", 1))), ()),
    ("index_scatter", (3,), lambda p, d: apply_operator("index_scatter", [p], key=_key(("s", 1, 2, 3)),
                                                        shape=(7,))[0], ()),
    ("gather with repeats", (2, 3), lambda p, d: apply_operator(
        "gather", [p], index=arrays.IndexArray(np.array([[0, 5, 5], [2, 0, 1]])))[0], ()),
    ("scatter_add with repeats", (4,), lambda p, d: apply_operator(
        "scatter_add", [p], index=arrays.IndexArray(np.array([1, 1, 3, 0])), shape=(2, 2))[0], ()),
    ("pad", (2, 3), lambda p, d: apply_operator("pad", [p], widths=((1, 0), (2, 1)))[0], ()),
    ("concatenate with data", (2, 3), lambda p, d: arrays.concatenate_nodes([d[0], p, d[0]], 0), ((1, 3),)),
    ("take_along", (3, 4), lambda p, d: apply_operator(
        "take_along", [p, apply_operator("argsort", [d[0]], axis=1)[0]], axis=1)[0], ((3, 4),)),
    ("put_along", (3, 4), lambda p, d: apply_operator(
        "put_along", [p, apply_operator("argsort", [d[0]], axis=0)[0]], axis=0)[0], ((3, 4),)),
    ("einsum, sum and a function of data", (3,), lambda p, d: jt_expr_mix(p, d), ((3,), (3, 3))),
    # no batching rule: element by element
    ("trsm (no rule)", (3, 2), lambda p, d: blas_cholesky.trsm(d[0], p), ((3, 3),)),
]


def jt_expr_mix(p, d):
    from jacacc.tensor import expr as E

    x, m = d
    return E.add(E.einsum("i,ij->j", p, m), E.elementwise("multiply", E.unary("sin", x), p), x)


def _values(data_shapes):
    # square data well conditioned (trsm solves with its lower triangle)
    return [RNG.normal(size=s) + (4 * np.eye(s[0]) if len(s) == 2 and s[0] == s[1] else 0) for s in data_shapes]


@pytest.mark.parametrize("batch_shape", [(4,), (2, 3), (0,)])
@pytest.mark.parametrize("name, shape, build, data_shapes", CASES, ids=[c[0] for c in CASES])
def test_a_batched_expression_equals_one_evaluation_per_batch_element(name, shape, build, data_shapes, batch_shape):
    placeholder = var(f"p {name}", shape)
    data = [var(f"d{k} {name}", s) for k, s in enumerate(data_shapes)]
    y = build(placeholder, data)
    rows = var(f"rows {name} {batch_shape}", batch_shape + shape)
    (b,) = batched([y], {placeholder: rows}, batch_shape)
    assert b.shape == batch_shape + y.shape
    data_values = _values(data_shapes)
    row_values = RNG.normal(size=batch_shape + shape)
    (got,) = Program([b], [rows, *data])(row_values, *data_values)
    one = Program([y], [placeholder, *data])
    expected = np.zeros(batch_shape + y.shape)
    for element in np.ndindex(*batch_shape):
        expected[element] = one(row_values[element], *data_values)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_an_expression_free_of_the_placeholder_is_spread_along_the_batch():
    p, x = var("p free", (2,)), var("x free", (3,))
    rows = var("rows free", (4, 2))
    (b,) = batched([x], {p: rows}, (4,))
    (got,) = Program([b], [rows, x])(np.zeros((4, 2)), np.arange(3.0))
    np.testing.assert_array_equal(got, np.tile(np.arange(3.0), (4, 1)))


def test_a_value_of_the_wrong_shape_is_refused():
    p = var("p wrong", (2,))
    with pytest.raises(ValueError, match=r"placeholder of shape \(2,\)"):
        batched([p], {p: var("rows wrong", (4, 3))}, (4,))


def rosenbrock(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rosenbrock_hessian(x):
    """The tridiagonal Hessian written out by hand (an independent reference: the tensor
    benchmark's closed form)."""
    from experiment_scripts import load_experiment

    return load_experiment("tensor_hessians").rosenbrock_hessian(x)


@pytest.mark.parametrize("mode", ["cross_country", "reverse", "forward", "markowitz"])
def test_rosenbrock_hessian_against_the_hand_written_one(mode):
    x = np.linspace(-1.2, 1.4, 9)
    np.testing.assert_allclose(jt.hessian(rosenbrock, mode=mode)(x), rosenbrock_hessian(x), rtol=1e-12, atol=1e-9)


def test_rosenbrock_dense_hessian_has_no_cubic_step():
    """FLOPs of the Hessian expression grow as n² (×4 per doubling, not ×8), the expression's size
    does not grow with n (one batched sweep, not n of them), and no constant is a one-hot seed."""
    flops, sizes = [], []
    for n in (50, 100, 200):
        d = jt.derivative_expression(rosenbrock, np.linspace(0.1, 0.9, n))
        flops.append(d.flops)
        sizes.append(len(nodes_of([d.expression])))
        for node in nodes_of([d.expression]):
            if node.kind == "const" and node.param[0] == "array":
                assert np.count_nonzero(node.value) != 1, "a one-hot seed in the Hessian"
    assert sizes[0] == sizes[1] == sizes[2]
    assert flops[2] / flops[1] < 4.5 and flops[1] / flops[0] < 4.5


def test_rosenbrock_dense_hessian_memory_is_a_small_multiple_of_its_result():
    n = 800
    x = np.linspace(0.1, 0.9, n)
    h = jt.hessian(rosenbrock)
    for _ in range(fusion.COMPILE_AFTER + 1):  # plan once, then until the fused kernels run: the steady state
        h(x)
    tracemalloc.start()
    H = h(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    np.testing.assert_allclose(H, rosenbrock_hessian(x), rtol=1e-12, atol=1e-9)
    # each live intermediate of the batched sweep is one batch of the result's size (4.0× measured:
    # the identity seed, a shifted slice of it, a scatter and the sum)
    assert peak <= 5 * H.nbytes, f"peak {peak / H.nbytes:.2f}× the result"


def test_jacobian_through_index_and_cumsum_in_both_directions():
    """A wide and a tall Jacobian (reverse and forward batched sweeps) against finite differences."""
    def wide(x):
        return np.cumsum(x[::2] * x[1::2])[1:]

    def tall(x):
        return np.concatenate([np.cumsum(np.sin(x)), x[::-1] ** 2, np.pad(x, 1)])

    for f, n in ((wide, 12), (tall, 3)):
        x = RNG.normal(size=n)
        for mode in ("reverse", "forward", "cross_country"):
            J = jt.jacobian(f, mode=mode)(x)
            eps = 1e-6
            fd = np.stack([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(n)], axis=-1)
            np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8)
