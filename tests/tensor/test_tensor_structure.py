"""Derivatives keep their structure (issue 25, item 3; DESIGN.md "Structure kept in derivatives").

An input read twice — ``w * w``, ``w @ w``, ``np.inner(x, x)``, ``np.outer(x, x)``,
``t + t`` in a gradient — gives a vertex two partials.  Their sum is added as
structure (:func:`jacacc.tensor.factor.add_factors`): ``δ + δ`` is ``2·δ``, two
diagonals one diagonal, and terms whose δs tie different axes (∂(x ⊗ x)/∂x) a
:class:`~jacacc.tensor.factor.FactorSum` whose products distribute over its
terms — never a linear map accumulated by one sweep per gradient entry from
``n`` one-hot constants (which made the Hessian of ``w @ w`` hold ``n³`` numbers
and the Jacobian of ``np.outer(x, x)`` ``n⁴``).  The evaluator accumulates a sum
in one buffer, adding a δ term along its diagonal view.

Stated bound (:data:`PEAK_FACTOR`): computing one of these derivatives — the
first call (trace, derivation, plan, evaluation) and every later call — holds at
most ``PEAK_FACTOR × (result bytes + input bytes)`` at its tracemalloc peak.

Correctness is checked against ``jax.hessian`` / ``jax.jacfwd`` in float64 at
rtol 1e-9 in every mode of :func:`jacacc.tensor.modes` and with ``compress=True``.
"""

from __future__ import annotations

import math
import tracemalloc

import jax_reference
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jacacc.tensor as jt
from jacacc.tensor.api import derivative_expression, jacobian_expression
from jacacc.tensor.evaluate import Program
from jacacc.tensor.expr import add, const, einsum, nodes_of, var
from jacacc.tensor.factor import Factor, FactorSum
from jacacc.tensor.graph import tensor_graph
from jacacc.tensor.linear import LinearPartial
from jacacc.tensor.trace import trace

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

pytestmark = pytest.mark.usefixtures("float64_jax")

#: A derivative's tracemalloc peak is at most this many times its result's bytes plus its inputs' bytes.
PEAK_FACTOR = 2.0
RTOL = 1e-9
MODES = tuple(jt.modes())
SLOW_MODES = ("anneal", "cpsat", "exhaustive", "optimal")


def _close(got, want, what=""):
    want = np.asarray(want, dtype=float)
    assert np.shape(got) == want.shape, f"{what}: shape {np.shape(got)}, expected {want.shape}"
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale, err_msg=what)


def _logistic(xp, l2):
    def f(w, X, y):
        loss = xp.sum(xp.log(xp.exp(-y * (X @ w)) + 1))
        return loss + 0.35 * xp.sum(w * w) if l2 else loss

    return f


# ---------------------------------------------------------------------------- the partials themselves
@pytest.mark.parametrize("f", [lambda w: w * w, lambda w: w @ w, lambda w: np.inner(w, w), lambda w: w + w],
                         ids=["w*w", "w@w", "inner", "w+w"])
def test_a_self_product_has_one_structured_factor(f):
    """The vertex read twice gets one Factor (a diagonal, a vector, 2·δ), no linear map."""
    traced = trace(f, [np.ones(5)])
    graph = tensor_graph(traced.outputs, traced.inputs)
    (partial,) = graph.factors.values()
    assert isinstance(partial, Factor), partial
    assert partial.tensor is None or partial.tensor.size <= 5


def test_the_gradient_of_w_at_w_differentiates_to_two_delta():
    """The gradient ``w + w`` has the partial 2·δ: a scalar on a δ, stored as one number."""
    traced = trace(lambda w: w @ w, [np.ones(6)])
    graph = tensor_graph([jacobian_expression(traced.outputs[0], traced.inputs[0], "reverse")], traced.inputs)
    (partial,) = graph.factors.values()
    assert isinstance(partial, Factor) and partial.layout() == "T[] -> [i|i]"
    assert float(partial.tensor.value) == 2.0


def test_the_outer_product_partial_is_a_sum_of_two_vectors():
    """∂(x ⊗ x)/∂x = x[j] δ[ii'] + x[i] δ[jj']: two stored vectors, not an n³ tensor."""
    traced = trace(lambda x: np.outer(x, x), [np.ones(7)])
    graph = tensor_graph(traced.outputs, traced.inputs)
    (partial,) = graph.factors.values()
    assert isinstance(partial, FactorSum) and not isinstance(partial, LinearPartial)
    assert [t.tensor.size for t in partial.terms] == [7, 7]


def test_no_one_hot_constants_in_the_l2_hessian():
    """Logistic regression + L2: the Hessian is the plain one plus one δ term — no sum of
    n terms, no constant of size n (today's code built n one-hot applications)."""
    n, m = 70, 140  # n² above the constant-folding limit: the δ term stays a δ
    rng = np.random.default_rng(0)
    args = (rng.standard_normal(n), rng.standard_normal((m, n)), rng.choice([-1.0, 1.0], m))
    plain = derivative_expression(_logistic(np, False), *args)
    l2 = derivative_expression(_logistic(np, True), *args)
    assert l2.expression.kind == "add" and len(l2.expression.args) == 2
    assert plain.expression in l2.expression.args
    big_constants = [t for t in nodes_of([l2.expression]) if t.kind == "const" and t.size >= n and t.value is not None
                     and t.param[0] not in ("delta", "ones")]
    assert not big_constants
    assert l2.flops <= plain.flops + n * n


def test_l2_hessian_program_adds_the_delta_along_the_diagonal():
    """The evaluator adds ``c·δ`` into the dense Hessian's buffer along its diagonal: the
    plan has the plain Hessian's steps plus one sum step and no δ scatter of its own."""
    n, m = 70, 140
    rng = np.random.default_rng(1)
    args = (rng.standard_normal(n), rng.standard_normal((m, n)), rng.choice([-1.0, 1.0], m))
    plain = derivative_expression(_logistic(np, False), *args)
    l2 = derivative_expression(_logistic(np, True), *args)
    p_plain = Program([plain.expression], plain.inputs)
    p_l2 = Program([l2.expression], l2.inputs)
    kinds = [kind for _, kind, *_ in p_l2._steps]
    assert "scatter" not in kinds
    assert kinds.count("add") == [kind for _, kind, *_ in p_plain._steps].count("add") + 1
    assert p_l2.flops <= 1.01 * p_plain.flops


# ---------------------------------------------------------------------------- peak memory
def _peak(call):
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _memory_cases():
    rng = np.random.default_rng(2)
    n = 800
    w = rng.standard_normal(n) / math.sqrt(n)
    X, y = rng.standard_normal((2 * n, n)), rng.choice([-1.0, 1.0], 2 * n)
    return {
        "hessian w @ w": (jt.hessian(lambda w: w @ w), (w,)),
        "hessian sum(w * w)": (jt.hessian(lambda w: np.sum(w * w)), (w,)),
        "hessian logistic + L2": (jt.hessian(_logistic(np, True)), (w, X, y)),
        "jacobian outer(x, x)": (jt.jacobian(lambda x: np.outer(x, x)), (rng.standard_normal(140),)),
    }


@pytest.mark.parametrize("name", list(_memory_cases()))
def test_peak_memory_is_a_small_multiple_of_result_plus_inputs(name):
    """tracemalloc peak ≤ PEAK_FACTOR × (result + inputs), first call and warm call
    (today's code: > 4 GB for the 5 MB Hessian of w @ w at n = 800).  Numba's compile of the
    fused kernels is not the plan's memory: the same derivative runs once before, so the measured
    first call (a new transformation: traced and planned again) finds its kernels compiled."""
    warm_up, args = _memory_cases()[name]
    warm_up(*args)
    derivative, args = _memory_cases()[name]
    result, first = _peak(lambda: derivative(*args))
    bound = PEAK_FACTOR * (result.nbytes + sum(a.nbytes for a in args))
    assert first <= bound, f"{name}: first call peak {first / 1e6:.1f} MB > {bound / 1e6:.1f} MB"
    del result
    _, warm = _peak(lambda: derivative(*args))
    assert warm <= bound, f"{name}: warm call peak {warm / 1e6:.1f} MB > {bound / 1e6:.1f} MB"


# ---------------------------------------------------------------------------- correctness against JAX
def _hessian_cases(n, rng):
    """(name, numpy f, jax f, argument, extra arguments)"""
    A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    X, y = rng.standard_normal((2 * n, n)), rng.choice([-1.0, 1.0], 2 * n)
    return [
        ("w @ w", lambda w: w @ w, lambda w: w @ w, ()),
        ("sum(w * w)", lambda w: np.sum(w * w), lambda w: jnp.sum(w * w), ()),
        ("inner", lambda w: np.inner(w, w) * np.sum(w), lambda w: jnp.inner(w, w) * jnp.sum(w), ()),
        ("logistic + L2", _logistic(np, True), _logistic(jnp, True), (X, y)),
        ("logistic + w @ w", lambda w, X, y: _logistic(np, False)(w, X, y) + 0.35 * (w @ w),
         lambda w, X, y: _logistic(jnp, False)(w, X, y) + 0.35 * (w @ w), (X, y)),
        ("sum(x*x*x)", lambda x: np.sum(x * x * x), lambda x: jnp.sum(x * x * x), ()),
        ("x @ A @ x", lambda x, A: x @ A @ x, lambda x, A: x @ A @ x, (A,)),
        ("sum(outer * B)", lambda x, B: np.sum(np.outer(x, x) * B), lambda x, B: jnp.sum(jnp.outer(x, x) * B), (B,)),
        ("tanh² + w @ w", lambda w, X: np.sum(np.tanh(X @ w) ** 2) + w @ w,
         lambda w, X: jnp.sum(jnp.tanh(X @ w) ** 2) + w @ w, (X,)),
        ("three uses", lambda x: np.sum(np.exp(x) * x) + x @ np.sin(x) + np.sum(x),
         lambda x: jnp.sum(jnp.exp(x) * x) + x @ jnp.sin(x) + jnp.sum(x), ()),
        ("outer ∘ outer", lambda x: np.sum(np.outer(x, x) * np.outer(x, x)),
         lambda x: jnp.sum(jnp.outer(x, x) * jnp.outer(x, x)), ()),
    ]


def _jacobian_cases(n, rng):
    M = rng.standard_normal((n, 3))
    return [
        ("outer", lambda x: np.outer(x, x), lambda x: jnp.outer(x, x), rng.standard_normal(n)),
        ("x * x", lambda x: x * x, lambda x: x * x, rng.standard_normal(n)),
        ("x ⊗ x ⊗ x", lambda x: np.einsum("i,j,k->ijk", x, x, x), lambda x: jnp.einsum("i,j,k->ijk", x, x, x),
         rng.standard_normal(n)),
        ("M Mᵀ", lambda M: M @ M.T, lambda M: M @ M.T, M),
        ("x ⊗ x + x ⊗ 1 + x * x", lambda x: np.outer(x, x) + np.outer(x, np.ones(n)) + x * x,
         lambda x: jnp.outer(x, x) + jnp.outer(x, jnp.ones(n)) + x * x, rng.standard_normal(n)),
    ]


_settings = settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.exhaustive  # 860 plans: test_matrix_argument_hessians_match_jax covers every mode in make test
@_settings
@given(st.integers(1, 6), st.integers(0, 2**16))
def test_hessians_match_jax_in_every_mode(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 0.5
    for name, f, g, extra in _hessian_cases(n, rng):
        want = np.asarray(jax_reference.jit(jax.hessian(g))(jnp.asarray(x), *extra))  # jit: one compile, not one per op
        for mode in MODES:
            _close(jt.hessian(f, mode=mode)(x, *extra), want, f"{name}, n={n}, {mode}")
        _close(jt.hessian(f, compress=True)(x, *extra).dense(), want, f"{name}, n={n}, compressed")


@pytest.mark.exhaustive  # every mode of drawn sizes: test_matrix_argument_hessians_match_jax runs every mode in make test
@_settings
@given(st.integers(1, 6), st.integers(0, 2**16))
def test_jacobians_match_jax_in_every_mode(n, seed):
    rng = np.random.default_rng(seed)
    for name, f, g, x in _jacobian_cases(n, rng):
        want = np.asarray(jax_reference.jit(jax.jacfwd(g))(jnp.asarray(x)))
        for mode in MODES:
            _close(jt.jacobian(f, mode=mode)(x), want, f"{name}, n={n}, {mode}")


@pytest.mark.parametrize("mode", MODES)
def test_matrix_argument_hessians_match_jax(mode):
    """Matrix arguments read twice: δs on pairs of axes (``M * M``: δδ), sums whose terms
    tie different axes (``M Mᵀ``), compressed Hessians of them."""
    rng = np.random.default_rng(5)
    M, C = rng.standard_normal((3, 2)), rng.standard_normal((3, 3))
    cases = [
        ("sum(M * M)", lambda M: np.sum(M * M), lambda M: jnp.sum(M * M)),
        ("sum((M Mᵀ)²)", lambda M: np.sum((M @ M.T) ** 2), lambda M: jnp.sum((M @ M.T) ** 2)),
        ("sum(M Mᵀ * C)", lambda M: np.sum((M @ M.T) * C), lambda M: jnp.sum((M @ M.T) * C)),
        ("sum(M) * sum(M * M)", lambda M: np.sum(M) * np.sum(M * M), lambda M: jnp.sum(M) * jnp.sum(M * M)),
    ]
    for name, f, g in cases:
        want = np.asarray(jax_reference.jit(jax.hessian(g))(jnp.asarray(M)))
        _close(jt.hessian(f, mode=mode)(M), want, f"{name}, {mode}")
        _close(jt.hessian(f, mode=mode, compress=True)(M).dense(), want, f"{name}, {mode}, compressed")


@pytest.mark.parametrize("mode", [m for m in MODES if m not in SLOW_MODES])
def test_l2_hessian_at_a_size_where_constants_do_not_fold(mode):
    """n² above the constant-folding limit: the δ term is a scatter added into the sum."""
    n = 70
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((2 * n, n)), rng.choice([-1.0, 1.0], 2 * n)
    w = rng.standard_normal(n) / math.sqrt(n)
    want = np.asarray(jax_reference.jit(jax.hessian(_logistic(jnp, True)))(jnp.asarray(w), X, y))
    _close(jt.hessian(_logistic(np, True), mode=mode)(w, X, y), want, mode)
    compressed = jt.hessian(_logistic(np, True), mode=mode, compress=True)(w, X, y)
    _close(compressed.dense(), want, f"{mode}, compressed")


# ---------------------------------------------------------------------------- the evaluator's sums
def test_sums_never_write_into_arguments_constants_or_views():
    """A sum accumulates into a buffer only it holds: arguments, constants, transposes
    (views of an operand) and terms read elsewhere stay as they were."""
    A, b = var("A", (4, 4)), var("b", (4, 4))
    At = einsum("ij->ji", A)                     # a view of the argument
    Ab = einsum("ij,jk->ik", A, b)               # fresh, read by two sums
    scaled = einsum("ij,->ij", b, const(2.0))    # fresh, read by this sum only
    total = add(At, Ab, scaled, A)
    other = add(Ab, b)
    program = Program([total, other], [A, b])
    rng = np.random.default_rng(4)
    a_val, b_val = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    a_copy, b_copy = a_val.copy(), b_val.copy()
    for _ in range(2):
        got_total, got_other = program(a_val, b_val)
        _close(got_total, a_val.T + a_val @ b_val + 2 * b_val + a_val, "sum")
        _close(got_other, a_val @ b_val + b_val, "other sum")
    np.testing.assert_array_equal(a_val, a_copy)
    np.testing.assert_array_equal(b_val, b_copy)


def test_a_scalar_sum_with_a_repeated_term():
    """A 0-d sum: NumPy returns scalars there, which ``+=`` replaces instead of updating
    (∂²(x sin x)/∂x² = cos x + cos x − x sin x)."""
    x = np.array(0.3)
    _close(jt.hessian(lambda x: np.sum(np.sin(x) * x))(x), 2 * np.cos(0.3) - 0.3 * np.sin(0.3), "0-d")


def test_a_constant_result_is_handed_out_as_a_copy():
    """At small n the Hessian of w @ w folds to a constant; writing into one result must
    not change the next (the plan's own array was handed out)."""
    h = jt.hessian(lambda w: w @ w)
    first = h(np.ones(3))
    first[0, 0] = 99.0
    _close(h(np.ones(3)), 2 * np.eye(3), "second call")


@pytest.mark.parametrize("terms", [2, 5, 17])
def test_absorbing_terms_costs_one_sum_per_term(terms):
    # a sum flattens the sums among its operands into one node: absorbing n dense partials into
    # one edge costs (n - 1) additions in all, the FLOPs of the sum that runs, not Σ k
    from jacacc.tensor.expr import node_flops
    from jacacc.tensor.factor import add_factors

    dense = [Factor.from_letters(var(f"p{k}", (3, 4)), "ij", "i", "j", (3,), (4,)) for k in range(terms)]
    total, reported = dense[0], 0
    for term in dense[1:]:
        total, cost = add_factors(total, term)
        reported += cost
    assert total.tensor.kind == "add" and len(total.tensor.args) == terms
    assert reported == node_flops(total.tensor) == (terms - 1) * 12


@pytest.mark.parametrize("subscripts, kinds", [
    ("ijk,jk,nk->in", "vdv"),        # a δ tying two summed letters: renamed away
    ("ij,jk->ik", "dv"),              # the identity applied: the operand itself
    ("ij,ij->", "dv"),                # a trace
    ("ij->", "d"),                    # Σ δ = n
    ("ij->i", "d"),                   # row sums of the identity: ones
    ("ij,jk,kl->il", "ddv"),          # two δs in a chain
    ("ij,ji,i->", "ddv"),             # two δs on one pair: δ(i, i) then ones
    ("ij,kl,jk->il", "dvv"),          # a δ with one letter kept in the output
    ("ij,j->ij", "dv"),               # both letters in the output: a scatter, kept
])
def test_an_einsum_against_identities_is_the_einsum_of_the_renamed_letters(subscripts, kinds):
    # a δ with a summed letter is a renaming (k = j): gone from the einsum, the value unchanged
    from jacacc.tensor.expr import delta

    inputs = subscripts.split("->")[0].split(",")
    operands, arrays, variables = [], [], []
    for labels, kind in zip(inputs, kinds, strict=True):
        if kind == "d":
            operands.append(delta(3))
            arrays.append(np.eye(3))
        else:
            x = var(f"x{len(variables)}", (3,) * len(labels))
            variables.append(x)
            operands.append(x)
            arrays.append(RNG_STRUCTURE.standard_normal(x.shape))
    y = einsum(subscripts, *operands)
    out = subscripts.split("->")[1]
    deltas_left = sum(n.kind == "const" and n.param[0] == "delta" for n in nodes_of([y]))
    both_kept = [labels for labels, kind in zip(inputs, kinds, strict=True) if kind == "d" and set(labels) <= set(out)]
    assert deltas_left == len(both_kept)
    values = [a for a, kind in zip(arrays, kinds, strict=True) if kind != "d"]
    got = Program([y], variables)(*values)[0] if variables else y.value
    np.testing.assert_allclose(got, np.einsum(subscripts, *arrays), rtol=1e-13)


RNG_STRUCTURE = np.random.default_rng(25)


def test_a_constant_hessian_is_computed_once_and_handed_out_as_copies():
    """A quadratic stencil's Hessian (the 5-point Laplacian's normal matrix, by slices of u) reads no
    variable: it is folded when the plan is made (an output too, not only what outputs read), each
    call hands out a copy (a caller's write does not reach the next call), and it equals LᵀL."""
    n = 9

    def objective(u):
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
        return 0.5 * np.sum(lap ** 2)

    L = np.zeros(((n - 2) ** 2, n * n))
    for i in range(1, n - 1):
        for j in range(1, n - 1):
            row = (i - 1) * (n - 2) + (j - 1)
            for di, dj, c in ((-1, 0, 1), (1, 0, 1), (0, -1, 1), (0, 1, 1), (0, 0, -4)):
                L[row, (i + di) * n + (j + dj)] += c
    hessian = jt.hessian(objective)
    u = np.random.default_rng(5).standard_normal((n, n))
    first = hessian(u)
    np.testing.assert_array_equal(first.reshape(n * n, n * n), L.T @ L)
    [plan] = [getattr(p, "plan", p) for p in hessian.plans.values()]
    assert [plan.nodes[s].kind for s in plan._output_slots] == ["const"]
    first[...] = 7.0
    np.testing.assert_array_equal(hessian(2 * u).reshape(n * n, n * n), L.T @ L)
