"""Property tests of jacacc.tensor (paper 002): random tensor expressions built from
every supported NumPy operation are differentiated in every mode and compared with
``jax.jacfwd`` / ``jax.hessian`` in float64 (rtol 1e-10) and with central differences.

A random expression is a list of steps; each step applies one supported operation
(with random constants) to earlier values, so values are reused (a DAG, not a tree).
The same expression is a Python function of the array module (``np`` or
``jax.numpy``): jacacc traces the NumPy version, JAX differentiates the other.
Each supported operation is also checked on its own (``test_each_operation``), so
coverage does not depend on what hypothesis happens to draw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax_reference
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jacacc.tensor as jt

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

# the search-based orders are slow on larger graphs: tested on small graphs in test_tensor_api.py
SLOW_MODES = ("anneal", "cpsat", "exhaustive", "optimal")
FAST_MODES = tuple(m for m in jt.modes() if m not in SLOW_MODES)
RTOL = 1e-10
MAX_SIZE = 12  # largest intermediate (elements)


def _close(got, want, rtol=RTOL, what=""):
    want = np.asarray(want, dtype=float)
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)


pytestmark = pytest.mark.usefixtures("float64_jax")


def jax_derivatives(f_jax, args, argnum):
    """(∂f/∂x, ∂²f/∂x²) with x = args[argnum] by ``jax.jacfwd`` and ``jax.hessian`` (float64, one jit)."""

    def both(*xs):
        return jax.jacfwd(f_jax, argnums=argnum)(*xs), jax.hessian(f_jax, argnums=argnum)(*xs)

    jac, hess = jax_reference.jit(both)(*(jnp.asarray(a, dtype=jnp.float64) for a in args))
    return np.asarray(jac, dtype=float), np.asarray(hess, dtype=float)


def central_jacobian(g, args, argnum, h=1e-6):
    """Central differences of ``g`` w.r.t. ``args[argnum]``: shape g.shape + x.shape."""
    args = [np.array(a, dtype=float) for a in args]
    x = args[argnum]
    y0 = np.asarray(g(*args))
    out = np.zeros(y0.shape + x.shape)
    for index in np.ndindex(*x.shape):
        plus = [a.copy() for a in args]
        minus = [a.copy() for a in args]
        plus[argnum][index] += h
        minus[argnum][index] -= h
        out[(...,) + index] = (np.asarray(g(*plus)) - np.asarray(g(*minus))) / (2 * h)
    return out


# ---------------------------------------------------------------------------- operations
# One entry per supported operation: (name, arity, applicable(shapes), make(rng, shapes) -> fn(xp, *values)).
# Arguments of log/sqrt/division are kept positive or away from zero.

def _vec(rng, n):
    return rng.normal(size=n) * 0.7


def _mat(rng, m, n):
    return rng.normal(size=(m, n)) * 0.7


def _k(rng):
    return int(rng.integers(1, 4))


def _letters(n):
    return "ijkl"[:n]


def _broadcast_shape(rng, shape):
    """A random shape that broadcasts against ``shape`` (NumPy's rules, maybe one axis more)."""
    dims = [1 if rng.random() < 0.4 else (int(rng.integers(1, 4)) if n == 1 else n) for n in shape]
    if len(shape) < 3 and rng.random() < 0.3:
        dims = [int(rng.integers(1, 3))] + dims
    return tuple(dims)


def _perm(rng, n):
    return tuple(int(k) for k in rng.permutation(n))


UNARY_OPS: list[tuple[str, Callable, Callable]] = [
    # products and contractions
    ("v @ M", lambda s: len(s) in (1, 2), lambda r, s: (lambda M: lambda xp, v: v @ M)(_mat(r, s[-1], _k(r)))),
    ("np.matmul(M, v)", lambda s: len(s) in (1, 2),
     lambda r, s: (lambda M: lambda xp, v: xp.matmul(M, v))(_mat(r, _k(r), s[0]))),
    ("np.dot(v, M)", lambda s: len(s) in (1, 2),
     lambda r, s: (lambda M: lambda xp, v: xp.dot(v, M))(_mat(r, s[-1], _k(r)))),
    ("np.dot(M, v)", lambda s: len(s) == 1, lambda r, s: (lambda M: lambda xp, v: xp.dot(M, v))(_mat(r, _k(r), s[0]))),
    ("einsum ij->ji", lambda s: len(s) == 2, lambda r, s: lambda xp, v: xp.einsum("ij->ji", v)),
    ("einsum ii->i", lambda s: len(s) == 2 and s[0] == s[1], lambda r, s: lambda xp, v: xp.einsum("ii->i", v)),
    ("einsum ii (implicit trace)", lambda s: len(s) == 2 and s[0] == s[1], lambda r, s: lambda xp, v: xp.einsum("ii", v)),
    ("einsum ij,jk (implicit)", lambda s: len(s) == 2,
     lambda r, s: (lambda M: lambda xp, v: xp.einsum("ij,jk", v, M))(_mat(r, s[1], _k(r)))),
    ("einsum ji,jk (implicit, transposed)", lambda s: len(s) == 2,
     lambda r, s: (lambda M: lambda xp, v: xp.einsum("ji,jk", v, M))(_mat(r, s[0], _k(r)))),
    ("einsum ...i,i->...", lambda s: len(s) >= 1, lambda r, s: (lambda c: lambda xp, v: xp.einsum("...i,i->...", v, c))(_vec(r, s[-1]))),
    ("einsum i...->...i", lambda s: len(s) >= 1, lambda r, s: lambda xp, v: xp.einsum("i...->...i", v)),
    ("einsum i,ij,j-> (3 operands, v twice)", lambda s: len(s) == 1,
     lambda r, s: (lambda M: lambda xp, v: xp.einsum("i,ij,j->", v, M, v))(_mat(r, s[0], s[0]))),
    ("einsum ij,kj,k->i (3 operands)", lambda s: len(s) == 2,
     lambda r, s: (lambda M, c: lambda xp, v: xp.einsum("ij,kj,k->i", v, M, c))(_mat(r, 2, s[1]), _vec(r, 2))),
    ("einsum ij,jk,kl->il (3 operands)", lambda s: len(s) == 2,
     lambda r, s: (lambda M, N: lambda xp, v: xp.einsum("ij,jk,kl->il", v, M, N))(_mat(r, s[1], 2), _mat(r, 2, 2))),
    ("einsum elementwise with a constant", lambda s: len(s) >= 1,
     lambda r, s: (lambda C: lambda xp, v: xp.einsum(f"{_letters(len(s))},{_letters(len(s))}->{_letters(len(s))}", v, C))(
         r.normal(size=s))),
    ("einsum elementwise v*v", lambda s: len(s) >= 1,
     lambda r, s: lambda xp, v: xp.einsum(f"{_letters(len(s))},{_letters(len(s))}->{_letters(len(s))}", v, v)),
    ("einsum sum all", lambda s: True, lambda r, s: lambda xp, v: xp.einsum(f"{_letters(len(s))}->", v)),
    # arithmetic with constants, broadcasting
    ("v + c", lambda s: True, lambda r, s: (lambda c: lambda xp, v: v + c)(float(r.normal()))),
    ("c - v", lambda s: True, lambda r, s: (lambda c: lambda xp, v: c - v)(float(r.normal()))),
    ("c * v", lambda s: True, lambda r, s: (lambda c: lambda xp, v: c * v)(float(r.normal()))),
    ("v / c", lambda s: True, lambda r, s: (lambda c: lambda xp, v: v / c)(float(r.uniform(1, 2)))),
    ("c / (v*v + 1)", lambda s: True, lambda r, s: (lambda c: lambda xp, v: c / (v * v + 1))(float(r.normal()))),
    ("v + C", lambda s: True, lambda r, s: (lambda C: lambda xp, v: v + C)(r.normal(size=s))),
    ("C - v", lambda s: True, lambda r, s: (lambda C: lambda xp, v: C - v)(r.normal(size=s))),
    ("v * C", lambda s: True, lambda r, s: (lambda C: lambda xp, v: v * C)(r.normal(size=s))),
    ("v / C", lambda s: True, lambda r, s: (lambda C: lambda xp, v: v / C)(r.uniform(1, 2, size=s))),
    ("C / (v*v + 0.5)", lambda s: True, lambda r, s: (lambda C: lambda xp, v: C / (v * v + 0.5))(r.normal(size=s))),
    ("v + C broadcast", lambda s: True, lambda r, s: (lambda C: lambda xp, v: v + C)(r.normal(size=_broadcast_shape(r, s)))),
    ("C * v broadcast", lambda s: True, lambda r, s: (lambda C: lambda xp, v: C * v)(r.normal(size=_broadcast_shape(r, s)))),
    ("v - ndarray scalar", lambda s: True, lambda r, s: (lambda c: lambda xp, v: v - c)(np.array(r.normal()))),
    ("v ** 2", lambda s: True, lambda r, s: lambda xp, v: v**2),
    ("v ** 3", lambda s: True, lambda r, s: lambda xp, v: v**3),
    ("(v*v + 1) ** 0.5", lambda s: True, lambda r, s: lambda xp, v: (v * v + 1) ** 0.5),
    ("(v*v + 1) ** -1.5", lambda s: True, lambda r, s: lambda xp, v: (v * v + 1) ** -1.5),
    ("(v*v + 1) ** v", lambda s: True, lambda r, s: lambda xp, v: (v * v + 1) ** v),
    ("2 ** v", lambda s: True, lambda r, s: lambda xp, v: 2.0**v),
    ("-v", lambda s: True, lambda r, s: lambda xp, v: -v),
    ("np.negative(v)", lambda s: True, lambda r, s: lambda xp, v: xp.negative(v)),
    # reductions and transposes
    ("np.sum(v)", lambda s: True, lambda r, s: lambda xp, v: xp.sum(v)),
    ("np.sum(v, axis=k)", lambda s: len(s) >= 1, lambda r, s: (lambda a: lambda xp, v: xp.sum(v, axis=a))(
        int(r.integers(-len(s), len(s))))),
    ("np.sum(v, axis=tuple)", lambda s: len(s) >= 2, lambda r, s: (lambda a: lambda xp, v: xp.sum(v, axis=a))(
        tuple(int(k) for k in r.choice(len(s), size=2, replace=False)))),
    ("v.sum(axis=0)", lambda s: len(s) >= 1, lambda r, s: lambda xp, v: v.sum(axis=0)),
    ("v.T", lambda s: len(s) >= 2, lambda r, s: lambda xp, v: v.T),
    ("np.transpose(v)", lambda s: len(s) >= 1, lambda r, s: lambda xp, v: xp.transpose(v)),
    ("np.transpose(v, axes)", lambda s: len(s) >= 2, lambda r, s: (lambda p: lambda xp, v: xp.transpose(v, p))(_perm(r, len(s)))),
    # elementwise functions
    ("np.exp(v)", lambda s: True, lambda r, s: lambda xp, v: xp.exp(v)),
    ("np.log(v*v + 1)", lambda s: True, lambda r, s: lambda xp, v: xp.log(v * v + 1)),
    ("np.log1p(v*v)", lambda s: True, lambda r, s: lambda xp, v: xp.log1p(v * v)),
    ("np.sqrt(np.exp(v))", lambda s: True, lambda r, s: lambda xp, v: xp.sqrt(xp.exp(v))),
    ("np.sqrt(v*v + 1)", lambda s: True, lambda r, s: lambda xp, v: xp.sqrt(v * v + 1)),
    ("np.sin(v)", lambda s: True, lambda r, s: lambda xp, v: xp.sin(v)),
    ("np.cos(v)", lambda s: True, lambda r, s: lambda xp, v: xp.cos(v)),
    ("np.tanh(v)", lambda s: True, lambda r, s: lambda xp, v: xp.tanh(v)),
    ("np.abs(v)", lambda s: True, lambda r, s: lambda xp, v: xp.abs(v)),
    ("abs(v)", lambda s: True, lambda r, s: lambda xp, v: abs(v)),
    ("np.maximum(v, 0)", lambda s: True, lambda r, s: lambda xp, v: xp.maximum(v, 0)),
    ("np.maximum(0.0, v)", lambda s: True, lambda r, s: lambda xp, v: xp.maximum(0.0, v)),
    ("np.maximum(v, c)", lambda s: True, lambda r, s: (lambda c: lambda xp, v: xp.maximum(v, c))(float(r.normal()) * 0.3)),
    # structured products
    ("np.diag(vector)", lambda s: len(s) == 1, lambda r, s: lambda xp, v: xp.diag(v)),
    ("np.diag(matrix)", lambda s: len(s) == 2, lambda r, s: lambda xp, v: xp.diag(v)),
    ("np.trace(v)", lambda s: len(s) == 2 and s[0] == s[1], lambda r, s: lambda xp, v: xp.trace(v)),
    ("np.outer(v, c)", lambda s: len(s) == 1, lambda r, s: (lambda c: lambda xp, v: xp.outer(v, c))(_vec(r, _k(r)))),
    ("np.outer(v, v)", lambda s: len(s) == 1, lambda r, s: lambda xp, v: xp.outer(v, v)),
    ("np.inner(v, C)", lambda s: len(s) >= 1, lambda r, s: (lambda C: lambda xp, v: xp.inner(v, C))(_mat(r, _k(r), s[-1]))),
    ("np.inner(v, v)", lambda s: len(s) == 1, lambda r, s: lambda xp, v: xp.inner(v, v)),
]

NONSMOOTH = frozenset({"np.abs(v)", "abs(v)", "np.maximum(v, 0)", "np.maximum(0.0, v)", "np.maximum(v, c)"})


def _broadcasts(a, b):
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


# binary operations of two earlier values (possibly the same one: repeated use)
BINARY_OPS: list[tuple[str, Callable, Callable]] = [
    ("v + w", lambda a, b: _broadcasts(a, b), lambda xp, v, w: v + w),
    ("v - w", lambda a, b: _broadcasts(a, b), lambda xp, v, w: v - w),
    ("v * w", lambda a, b: _broadcasts(a, b), lambda xp, v, w: v * w),
    ("v / (w*w + 1)", lambda a, b: _broadcasts(a, b), lambda xp, v, w: v / (w * w + 1)),
    ("(v*v + 1) ** w", lambda a, b: _broadcasts(a, b), lambda xp, v, w: (v * v + 1) ** w),
    ("v @ w", lambda a, b: 1 <= len(a) <= 2 and 1 <= len(b) <= 2 and a[-1] == b[0], lambda xp, v, w: v @ w),
    ("np.dot(v, w)", lambda a, b: 1 <= len(a) <= 2 and 1 <= len(b) <= 2 and a[-1] == b[0], lambda xp, v, w: xp.dot(v, w)),
    ("np.outer(v, w)", lambda a, b: len(a) == 1 and len(b) == 1, lambda xp, v, w: xp.outer(v, w)),
    ("np.inner(v, w)", lambda a, b: len(a) >= 1 and len(b) >= 1 and a[-1] == b[-1], lambda xp, v, w: xp.inner(v, w)),
    ("einsum i,j->ij", lambda a, b: len(a) == 1 and len(b) == 1, lambda xp, v, w: xp.einsum("i,j->ij", v, w)),
    ("einsum ij,ik->jk", lambda a, b: len(a) == 2 and len(b) == 2 and a[0] == b[0],
     lambda xp, v, w: xp.einsum("ij,ik->jk", v, w)),
    ("einsum ...,... (elementwise)", lambda a, b: a == b and len(a) >= 1, lambda xp, v, w: xp.einsum("...,...->...", v, w)),
]


def DEPEND_ON_BOTH(xp, v, x, z):  # noqa: N802 - a constant-like name for a fixed step
    return v + xp.sum(xp.sin(x)) * xp.sum(xp.cos(z))


@dataclass
class Step:
    name: str
    args: tuple[int, ...]
    fn: Callable


@dataclass
class RandomExpression:
    """A random tensor expression of two arguments ``x``, ``z``; ``function(xp)`` is it under ``xp``."""

    steps: list[Step]
    args: tuple[np.ndarray, np.ndarray]
    argnum: int
    shapes: list[tuple[int, ...]]

    def function(self, xp):
        steps = self.steps

        def f(x, z):
            values = [x, z]
            for step in steps:
                values.append(step.fn(xp, *(values[k] for k in step.args)))
            return values[-1]

        return f

    def __repr__(self) -> str:
        lines = [f"x{self.shapes[0]}, z{self.shapes[1]}; argnum={self.argnum}"]
        for n, step in enumerate(self.steps, start=2):
            args = ", ".join(f"v{k}" for k in step.args)
            lines.append(f"v{n}{self.shapes[n]} = {step.name} [{args}]")
        return "RandomExpression(" + "; ".join(lines) + ")"


def _usable(value):
    value = np.asarray(value)
    if value.ndim > 3 or value.size > MAX_SIZE or not np.all(np.isfinite(value)):
        return False
    return float(np.max(np.abs(value), initial=0.0)) < 1e3


def _random_shape(rng):
    while True:
        shape = tuple(int(n) for n in rng.integers(1, 5, size=int(rng.choice([0, 1, 1, 2, 2, 2]))))
        if int(np.prod(shape)) <= 8:
            return shape


@st.composite
def expressions(draw, smooth=False, max_steps=6):
    """A random expression: 1..max_steps supported operations over ``x``, ``z`` and earlier values.

    Hypothesis draws a seed and the differentiated argument; the length, operations, shapes and
    constants come from the seeded generator (uniform over the operations that apply, where
    hypothesis's own choices would favour the first ones)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    argnum = draw(st.integers(0, 1))
    length = int(rng.integers(1, max_steps + 1))
    args = (rng.normal(size=_random_shape(rng)) * 0.8, rng.normal(size=_random_shape(rng)) * 0.8)
    values = list(args)
    steps: list[Step] = []
    for _ in range(4 * length):
        if len(steps) == length:
            break
        n = len(values)
        first = n - 1 if rng.random() < 0.6 else int(rng.integers(n))  # mostly the latest: deep expressions
        if rng.random() < 0.65:
            ops = [op for op in UNARY_OPS if op[1](values[first].shape) and not (smooth and op[0] in NONSMOOTH)]
            name, _, make = ops[rng.integers(len(ops))]
            fn = make(rng, values[first].shape)
            step_args: tuple[int, ...] = (first,)
        else:
            second = int(rng.integers(n))  # may be ``first``: a value used twice
            ops = [op for op in BINARY_OPS if op[1](values[first].shape, values[second].shape)]
            if not ops:
                continue
            name, _, fn = ops[rng.integers(len(ops))]
            step_args = (first, second)
        if name in NONSMOOTH and float(np.min(np.abs(values[first]), initial=1.0)) < 1e-3:
            continue  # the kink: NumPy, jacacc and JAX pick different one-sided derivatives there
        try:
            value = np.asarray(fn(np, *(values[k] for k in step_args)), dtype=float)
        except (ValueError, ZeroDivisionError, FloatingPointError):
            continue
        if not _usable(value):
            continue
        steps.append(Step(name, step_args, fn))
        values.append(value)
    if not steps or values[-1].size > 6:  # keep Hessians small: sum the result
        steps.append(Step("np.sum(v)", (len(values) - 1,), lambda xp, v: xp.sum(v)))
        values.append(np.asarray(np.sum(values[-1])))
    # the result depends on both arguments nonlinearly (a traced scalar broadcast in a sum): jacacc.tensor
    # cannot yet differentiate w.r.t. an argument the result does not depend on (nor a linear function twice)
    steps.append(Step("v + sum(sin(x)) * sum(cos(z))", (len(values) - 1, 0, 1), DEPEND_ON_BOTH))
    values.append(np.asarray(DEPEND_ON_BOTH(np, values[-1], *args)))
    return RandomExpression(steps, args, argnum, [np.shape(v) for v in values])


_settings = settings(max_examples=40, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
# make test draws fewer expressions; the exhaustive tier's twins draw the full count in every mode
_few = settings(_settings, max_examples=16)


def check_against_jax(expr: RandomExpression, jacobian_modes=FAST_MODES, hessian_modes=FAST_MODES):
    """jacacc's Jacobian and Hessian of ``expr`` in each mode equal JAX's (rtol 1e-10)."""
    f_np = expr.function(np)
    jac, hess = jax_derivatives(expr.function(jnp), expr.args, expr.argnum)
    for mode in jacobian_modes:
        _close(jt.jacobian(f_np, argnum=expr.argnum, mode=mode)(*expr.args), jac, what=f"jacobian, mode={mode}")
    for mode in hessian_modes:
        _close(jt.hessian(f_np, argnum=expr.argnum, mode=mode)(*expr.args), hess, what=f"hessian, mode={mode}")


# ---------------------------------------------------------------------------- derivatives against JAX
@_few
@given(expressions(), st.sampled_from(FAST_MODES))
def test_jacobian_and_hessian_match_jax(expr, mode):
    """Each drawn expression in one drawn mode (every mode of more expressions: the exhaustive
    test below)."""
    check_against_jax(expr, (mode,), (mode,))


@pytest.mark.exhaustive  # 40 expressions × 8 modes × 2 derivatives: 12 s
@_settings
@given(expressions())
def test_jacobian_and_hessian_every_mode_match_jax(expr):
    check_against_jax(expr)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(expressions(), st.integers(0, 2**32 - 1))
def test_value_vjp_and_jvp_match_jax(expr, seed):
    """The traced value is NumPy's and JAX's; the pullback (a tuple over both arguments) is
    ``jax.vjp``'s, the pushforward ``jax.jvp``'s."""
    f_np, f_jax = expr.function(np), expr.function(jnp)
    rng = np.random.default_rng(seed)
    tangents = [rng.normal(size=np.shape(a)) for a in expr.args]
    value, pullback = jt.vjp(f_np, *expr.args)
    cotangent = rng.normal(size=np.shape(value))
    grads = pullback(cotangent)
    value2, tangent_out = jt.jvp(f_np, expr.args, tangents)

    @jax.jit
    def reference(xs, ct, ts):
        y, back = jax.vjp(f_jax, *xs)
        return y, back(ct), jax.jvp(f_jax, xs, ts)[1]

    ref_value, ref_grads, ref_tangent = reference(tuple(jnp.asarray(a) for a in expr.args), jnp.asarray(cotangent),
                                                  tuple(jnp.asarray(t) for t in tangents))
    _close(value, expr.function(np)(*expr.args), what="value against NumPy")
    _close(value, ref_value, what="vjp value")
    _close(value2, ref_value, what="jvp value")
    assert isinstance(grads, tuple) and len(grads) == 2
    for g, r in zip(grads, ref_grads, strict=True):
        _close(g, r, what="pullback")
    _close(tangent_out, ref_tangent, what="pushforward")


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(expressions())
def test_compressed_hessian_dense_is_the_hessian(expr):
    f_np = expr.function(np)
    compressed = jt.hessian(f_np, argnum=expr.argnum, compress=True)(*expr.args)
    dense = jt.hessian(f_np, argnum=expr.argnum)(*expr.args)
    np.testing.assert_array_equal(compressed.dense(), dense)
    assert compressed.shape == dense.shape
    assert compressed.nbytes <= compressed.dense_nbytes


# ---------------------------------------------------------------------------- against central differences
@settings(_few, max_examples=10)
@given(expressions(smooth=True), st.sampled_from(FAST_MODES))
def test_jacobian_and_hessian_match_central_differences(expr, mode):
    check_against_central_differences(expr, mode)


@pytest.mark.exhaustive  # the make-test twin above draws 10 expressions
@settings(_settings, max_examples=25)
@given(expressions(smooth=True), st.sampled_from(FAST_MODES))
def test_more_jacobians_and_hessians_match_central_differences(expr, mode):
    check_against_central_differences(expr, mode)


def check_against_central_differences(expr: RandomExpression, mode: str) -> None:
    """jacacc's Jacobian against central differences of the function, its Hessian against central
    differences of the Jacobian (rtol 1e-5)."""
    f_np = expr.function(np)
    jac = jt.jacobian(f_np, argnum=expr.argnum, mode=mode)
    numeric = central_jacobian(f_np, expr.args, expr.argnum)
    _close(jac(*expr.args), numeric, rtol=1e-5, what=f"jacobian vs differences ({mode})")
    # the Hessian against central differences of the (checked) Jacobian
    hess = jt.hessian(f_np, argnum=expr.argnum, mode=mode)(*expr.args)
    _close(hess, central_jacobian(jac, expr.args, expr.argnum), rtol=1e-5, what=f"hessian vs differences ({mode})")


# ---------------------------------------------------------------------------- every operation on its own
# a shape each operation applies to, where the first that applies would make it an identity
_PREFERRED_SHAPE = {"np.transpose(v)": (2, 3), "einsum i...->...i": (2, 3), "np.transpose(v, axes)": (2, 3)}


def _sin(xp, v):
    return xp.sin(v)


def _single_cases():
    """Each operation applied to ``sin`` of the arguments (nonlinear in them, so its Hessian is not constant)."""
    cases = []
    for n, (name, applies, make) in enumerate(UNARY_OPS):
        shape = _PREFERRED_SHAPE.get(name) or next(s for s in [(3,), (3, 3), (2, 3), ()] if applies(s))
        rng = np.random.default_rng(n)
        x = rng.normal(size=shape)
        if name in NONSMOOTH:  # sin(x) away from the kink
            x = np.where(np.abs(np.sin(x)) < 0.2, 0.7, x)
        steps = [Step("sin", (0,), _sin), Step(name, (2,), make(rng, shape))]
        cases.append(pytest.param(RandomExpression(steps, (x, rng.normal(size=2)), 0, []), id=name))
    for n, (name, applies, fn) in enumerate(BINARY_OPS):
        pair = next(p for p in [((3,), (3,)), ((2, 3), (3, 2)), ((2, 3), (2, 2)), ((3, 3), (3, 3))] if applies(*p))
        rng = np.random.default_rng(100 + n)
        args = (rng.normal(size=pair[0]), rng.normal(size=pair[1]))
        steps = [Step("sin", (0,), _sin), Step("sin", (1,), _sin), Step(name, (2, 3), fn)]
        for argnum in (0, 1):
            cases.append(pytest.param(RandomExpression(steps, args, argnum, []), id=f"{name} d/d{'xz'[argnum]}"))
    return cases


@pytest.mark.parametrize("expr", _single_cases())
def test_each_operation(expr):
    """Every supported operation on its own: Jacobian in every fast mode, Hessian in three, against JAX."""
    check_against_jax(expr, hessian_modes=("forward", "reverse", "cross_country"))


def test_every_operation_has_a_case():
    names = {op[0] for op in UNARY_OPS} | {op[0] for op in BINARY_OPS}
    assert len(_single_cases()) == len(UNARY_OPS) + 2 * len(BINARY_OPS)
    # the operations of the ISSUE's list, each by at least one entry
    for needle in ["@", "np.matmul", "np.dot", "einsum", "+", "-", "*", "/", "**", "-v", "np.sum", ".T",
                   "np.transpose", "np.exp", "np.log(", "np.log1p", "np.sqrt", "np.sin", "np.cos", "np.tanh",
                   "np.abs", "np.maximum(v, 0)", "np.diag(vector)", "np.diag(matrix)", "np.trace", "np.outer",
                   "np.inner", "broadcast", "(3 operands", "implicit", "...", "v*v"]:
        assert any(needle in name for name in names), needle


def test_general_broadcasting():
    """NumPy's broadcasting between two traced arrays with size-1 axes, both ways, and a 3rd axis."""

    def f(xp):
        return lambda a, b: xp.sum(xp.sin(a * b + a) * (b - a) / (a * a + 1), axis=0)

    a = np.random.default_rng(1).normal(size=(3, 1))
    b = np.random.default_rng(2).normal(size=(2, 1, 4))
    for argnum in (0, 1):
        check_against_jax(RandomExpression([Step("f", (0, 1), lambda xp, a, b: f(xp)(a, b))], (a, b), argnum, []),
                          jacobian_modes=("forward", "reverse", "cross_country"),
                          hessian_modes=("forward", "reverse", "cross_country"))
