"""jacacc.iverson: normal forms, simplification, cost model and derivatives on random programs.

Every program comes from ``jacacc.iverson.generate`` driven by hypothesis (so
failures shrink).  Independent references: the reference interpreter for
values, the instrumented interpreter for operation counts, central
differences for derivatives, and the dot-product test ⟨D f·u, v⟩ = ⟨u, Dᵀf·v⟩
linking the forward and the adjoint transform.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jacacc.iverson as iv
from jacacc.iverson.generate import GeneratedProgram, random_program

#: the documented cheap-gradient constant (README, "Cheap gradients"): cost(grad f) ≤ C·cost(f)
CHEAP_GRADIENT_CONSTANT = 5

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def programs(draw: st.DrawFn, scalar: bool = True, max_extent: int = 4, max_depth: int = 5) -> GeneratedProgram:
    """A random program from a hypothesis-drawn seed.  (Driving every decision of the generator
    through hypothesis shrinks well but favours tiny programs; seeds give the generator's own,
    richer distribution, and a failure is reproduced from its seed.)"""
    seed = draw(st.integers(0, 2**32 - 1))
    return random_program(np.random.default_rng(seed), scalar=scalar, max_extent=max_extent,
                          max_depth=max_depth)


seeds = st.integers(0, 2**32 - 1)


def close(a: object, b: object, **kw: float) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and all(close(x, y, **kw) for x, y in zip(a, b, strict=True))
    return bool(np.allclose(a, b, **kw))


def flat(value: object) -> np.ndarray:
    if isinstance(value, tuple):
        return np.concatenate([flat(v) for v in value])
    return np.ravel(np.asarray(value, dtype=np.float64))


def total(cost: dict[str, int]) -> int:
    return cost["add"] + cost["mul"] + cost["nonlinear"]


PASSES = [iv.let_lift, iv.pair_eliminate, iv.gen_pushout, iv.tensor_ssa, iv.normalize, iv.simplify]


@pytest.mark.parametrize("transform", PASSES, ids=lambda f: f.__name__)
@SETTINGS
@given(program=programs(scalar=False), seed=seeds)
def test_passes_preserve_values_and_never_increase_cost(transform, program: GeneratedProgram, seed: int) -> None:
    arrays = program.arrays(np.random.default_rng(seed))
    out = transform(program.expr)
    assert out.type == program.expr.type
    assert close(iv.evaluate(out, **arrays), iv.evaluate(program.expr, **arrays), rtol=1e-12, atol=1e-12)
    before, after = iv.cost(program.expr), iv.cost(out)
    assert total(after) <= total(before), (str(program.expr), str(out), before, after)


@SETTINGS
@given(program=programs(scalar=False), seed=seeds)
def test_cost_model_equals_the_instrumented_interpreter(program: GeneratedProgram, seed: int) -> None:
    arrays = program.arrays(np.random.default_rng(seed))
    for expr in (program.expr, iv.normalize(program.expr), iv.simplify(program.expr)):
        assert iv.cost(expr) == iv.count_operations(expr, **arrays), str(expr)


def central_differences(expr: iv.Expr, name: str, arrays: dict, h: float = 1e-6) -> np.ndarray:
    base = np.asarray(arrays[name], dtype=np.float64)
    grad = np.zeros(base.shape)
    for ix in np.ndindex(base.shape):
        plus, minus = base.copy(), base.copy()
        plus[ix] += h
        minus[ix] -= h
        fp = iv.evaluate(expr, **{**arrays, name: plus if base.shape else float(plus)})
        fm = iv.evaluate(expr, **{**arrays, name: minus if base.shape else float(minus)})
        grad[ix] = (fp - fm) / (2 * h)
    return grad


@SETTINGS
@given(program=programs(scalar=True), seed=seeds)
def test_gradient_matches_central_differences_and_is_cheap(program: GeneratedProgram, seed: int) -> None:
    arrays = program.arrays(np.random.default_rng(seed))
    cost_f = total(iv.cost(program.expr))
    for name, shape in program.inputs.items():
        wrt = iv.var(name, shape)
        g = iv.grad(program.expr, wrt)
        assert g.type == shape
        got = iv.evaluate(g, **arrays)
        assert np.allclose(got, central_differences(program.expr, name, arrays), rtol=1e-5, atol=1e-6), str(g)
        # the cheap-gradient guarantee, after normalize + simplify
        cost_g = total(iv.cost(iv.simplify(iv.normalize(g))))
        assert cost_g <= CHEAP_GRADIENT_CONSTANT * cost_f, (str(program.expr), str(g), cost_g, cost_f)


@SETTINGS
@given(program=programs(scalar=False), seed=seeds)
def test_forward_and_adjoint_pass_the_dot_product_test(program: GeneratedProgram, seed: int) -> None:
    rng = np.random.default_rng(seed)
    arrays = program.arrays(rng)
    out_type = program.expr.type
    cotangent = _pair_var("v", out_type)
    for name, shape in program.inputs.items():
        wrt = iv.var(name, shape)
        u = rng.standard_normal(shape)
        v = _random_value(out_type, rng)
        bound = {**arrays, "u_": float(u) if shape == () else u, **_bind("v", v)}
        jvp = iv.evaluate(iv.forward(program.expr, wrt, iv.var("u_", shape)), **bound)
        vjp = iv.evaluate(iv.adjoint(program.expr, wrt, cotangent), **bound)
        assert np.isclose(np.dot(flat(jvp), flat(v)), np.dot(flat(u), flat(vjp)), rtol=1e-9, atol=1e-9)
        # and the forward derivative is the directional derivative
        h = 1e-6
        plus = iv.evaluate(program.expr, **{**arrays, name: arrays[name] + h * u})
        minus = iv.evaluate(program.expr, **{**arrays, name: arrays[name] - h * u})
        assert np.allclose(flat(jvp), (flat(plus) - flat(minus)) / (2 * h), rtol=1e-5, atol=1e-6)


def _pair_var(name: str, t: object) -> iv.Expr:
    """A cotangent of type ``t``: one variable per leaf, paired up like ``t``."""
    if isinstance(t, iv.PairType):
        return iv.pair(_pair_var(name + "0", t.fst), _pair_var(name + "1", t.snd))
    return iv.var(name, t)


def _random_value(t: object, rng: np.random.Generator) -> object:
    if isinstance(t, iv.PairType):
        return (_random_value(t.fst, rng), _random_value(t.snd, rng))
    return float(rng.standard_normal()) if t == () else rng.standard_normal(t)


def _bind(name: str, value: object) -> dict:
    if isinstance(value, tuple):
        return {**_bind(name + "0", value[0]), **_bind(name + "1", value[1])}
    return {name: value}


# ----------------------------------------------------------------------------- hand-written cases


def test_gradient_of_trace_is_diag_and_costs_nothing() -> None:
    n = 7
    A = iv.var("A", (n, n))
    i = iv.index("i")
    g = iv.grad(iv.sum(i, n, A[i, i]), A)
    assert str(g) == f"⊞_{{i<{n}}} ⊞_{{j<{n}}} [i = j]"
    assert total(iv.cost(g)) == 0
    assert np.array_equal(iv.evaluate(g), np.eye(n))  # reads no array at all


def test_adjoint_of_convolution_is_a_correlation() -> None:
    n, k = 9, 3
    x, w, ybar = iv.var("x", (n + k - 1,)), iv.var("w", (k,)), iv.var("yb", (n,))
    i, j = iv.index("i"), iv.index("j")
    adj = iv.adjoint(iv.gen(i, n, iv.sum(j, k, x[i + j] * w[j])), x, ybar)
    assert str(adj) == f"⊞_{{i<{n + k - 1}}} Σ_{{j<{k}}} [i - j ≥ 0 ∧ i - j ≤ {n - 1}]·(yb[i - j] · w[j])"
    rng = np.random.default_rng(0)
    Y, W = rng.standard_normal(n), rng.standard_normal(k)
    assert np.allclose(iv.evaluate(adj, yb=Y, w=W), np.convolve(Y, W, "full"))


def test_exp_derivative_reuses_the_primal_value() -> None:
    x = iv.var("x", (4,))
    i = iv.index("i")
    f = iv.sum(i, 4, iv.exp(x[i]))
    g = iv.grad(f, x)
    assert iv.cost(g)["nonlinear"] == 4  # exp computed once per entry, its derivative is itself
    assert np.allclose(iv.evaluate(g, x=np.arange(4.0)), np.exp(np.arange(4.0)))


def test_relu_derivative_is_a_data_bracket() -> None:
    x = iv.var("x", (5,))
    i = iv.index("i")
    g = iv.grad(iv.sum(i, 5, iv.relu(x[i])), x)
    assert "[x[i] > 0]" in str(g)
    assert np.array_equal(iv.evaluate(g, x=np.array([-1.0, 2.0, -3.0, 4.0, 0.5])), [0, 1, 0, 1, 1])


def test_gradient_with_respect_to_an_unused_input_is_zero() -> None:
    x, y = iv.var("x", (3,)), iv.var("y", (2,))
    i = iv.index("i")
    g = iv.grad(iv.sum(i, 3, x[i] * x[i]), y)
    assert np.array_equal(iv.evaluate(g), np.zeros(2))


def test_pair_output_adjoint() -> None:
    x = iv.var("x", (3,))
    i = iv.index("i")
    f = iv.pair(iv.gen(i, 3, x[i] * x[i]), iv.sum(i, 3, x[i]))
    ct = iv.pair(iv.var("a", (3,)), iv.var("b", ()))
    adj = iv.adjoint(f, x, ct)
    X, A, B = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0]), 3.0
    assert np.allclose(iv.evaluate(adj, x=X, a=A, b=B), 2 * X * A + B)


def test_derivatives_refuse_bad_requests() -> None:
    x = iv.var("x", (3,))
    i = iv.index("i")
    vector = iv.gen(i, 3, x[i] * 2)
    with pytest.raises(iv.IvTypeError, match="grad needs a scalar program"):
        iv.grad(vector, x)
    with pytest.raises(iv.IvTypeError, match="wrt must be the iv.var"):
        iv.grad(iv.sum(i, 3, x[i]), "x")
    with pytest.raises(iv.IvTypeError, match="wrt 'x' has type"):
        iv.grad(iv.sum(i, 3, x[i]), iv.var("x", (4,)))
    with pytest.raises(iv.IvTypeError, match="direction has type"):
        iv.forward(vector, x, iv.var("u", (2,)))
    with pytest.raises(iv.IvTypeError, match="cotangent has type"):
        iv.adjoint(vector, x, iv.var("v", ()))
