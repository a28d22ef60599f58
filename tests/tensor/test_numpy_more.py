"""The NumPy functions of jacacc/tensor/numpy_more.py against NumPy's values and JAX's derivatives.

Each case is a function ``f(x, xp)`` written once for NumPy and ``jax.numpy``: its traced value
must equal NumPy's bit for bit, and the gradient and Hessian of ``Σ w·sin(f(x))`` (curvature of
its own, so a wrong first derivative of ``f`` shows in both) must match ``jax.grad`` and
``jax.hessian`` in float64 at rtol 1e-10 in forward, reverse and cross-country mode.  Inputs
avoid the kinks of the piecewise functions (JAX and jacacc agree there too, but by convention).
Refused forms raise one line naming the function and the argument.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import jacacc.tensor as jt
import jacacc.tensor.numpy_more as numpy_more
from jacacc.errors import RegistryError, TraceError, UnsupportedOperationError
from jacacc.tensor.trace import Traced

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

pytestmark = [pytest.mark.usefixtures("float64_jax"),
              # NumPy 2 deprecates np.cross of 2-vectors (and so does the traced version, as NumPy)
              pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")]

MODES = ["forward", "reverse", "cross_country"]
RTOL, ATOL = 1e-10, 1e-12

rng = np.random.default_rng(7)
x6 = rng.normal(size=6)
x34 = rng.normal(size=(3, 4))
x43 = rng.normal(size=(4, 3))
x46 = rng.normal(size=(4, 6))
x234 = rng.normal(size=(2, 3, 4))
SINC_AT = np.array([0.0, 0.3, -1.2, 2.5, 1.0, -0.45])
SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, 0.0, 0.0])

#: XLA options that cut the references' compile time (each is compiled once)
_QUICK_XLA = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


# ---------------------------------------------------------------------------- the checks
def _weights(f: Callable[..., Any], x: np.ndarray) -> np.ndarray:
    shape = np.shape(f(x, np))
    return np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape)


def _scalar(f: Callable[..., Any], w: np.ndarray) -> Callable[..., Any]:
    """``Σ w·sin(f(x))``: a scalar function of ``f``'s value with curvature of its own."""

    def s(x: Any, xp: Any = np) -> Any:
        return xp.sum(w * xp.sin(f(x, xp)))

    return s


def _jax_reference(s: Callable[..., Any], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``jax.grad`` and ``jax.hessian`` of ``s`` at ``x``, compiled together once."""
    g = functools.partial(s, xp=jnp)
    both = jax.jit(lambda v: (jax.grad(g)(v), jax.hessian(g)(v)))
    lowered = both.lower(jax.ShapeDtypeStruct(x.shape, jnp.float64))
    try:
        compiled = lowered.compile(compiler_options=_QUICK_XLA)
    except Exception:  # noqa: BLE001 - an XLA without these options: compile as usual
        compiled = lowered.compile()
    grad, hess = compiled(jnp.asarray(x, dtype=jnp.float64))
    return np.asarray(grad), np.asarray(hess)


def _traced_value(f: Callable[..., Any], x: np.ndarray) -> np.ndarray:
    return np.asarray(jt.vjp(functools.partial(f, xp=np), x)[0])


def check(f: Callable[..., Any], x: np.ndarray, reference_at: np.ndarray | None = None) -> None:
    """Value against NumPy, gradient and Hessian against JAX in every main mode.

    The value of a composite case is compared at 1e-14: the tracer sums terms in an order of its own
    (each function alone is compared bit for bit in :func:`test_values_exactly`).

    ``reference_at``: where JAX's derivatives are taken (a cast's rounded input), if not at ``x``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # np.cross of 2-vectors
        expected = f(x, np)
    value = _traced_value(f, x)
    assert value.shape == np.shape(expected)
    np.testing.assert_allclose(value, expected, rtol=1e-14, atol=1e-300)
    s = _scalar(f, _weights(f, x))
    grad, hess = _jax_reference(s, x if reference_at is None else reference_at)
    for mode in MODES:
        np.testing.assert_allclose(jt.grad(s, mode=mode)(x), grad, rtol=RTOL, atol=ATOL, err_msg=mode)
        np.testing.assert_allclose(jt.hessian(s, mode=mode)(x), hess, rtol=RTOL, atol=ATOL, err_msg=mode)


def _ravel_all(xp: Any, *parts: Any) -> Any:
    return xp.concatenate([xp.ravel(p) for p in parts])


# ---------------------------------------------------------------------------- every function against JAX
CASES = [  # several functions of one family per case: each case costs one XLA compile
    ("roll", lambda x, xp: xp.roll(x, 1) * x + xp.roll(x, (1, -2), axis=(0, 1)) ** 2
     + xp.roll(x, -5, axis=None) * xp.roll(x, (1, 2), axis=(1, 1)) + xp.roll(x, 7, axis=-1), x34),
    ("tile", lambda x, xp: xp.tile(x, (2, 1, 3)) * xp.tile(x[:, :1], 12) + xp.tile(x, (1, 3)) ** 2, x34),
    ("repeat", lambda x, xp: xp.repeat(x, 2, axis=1) * xp.repeat(x, np.array([3, 1, 0, 4]), axis=1)
     + xp.repeat(x, 2).reshape(3, 8) + xp.repeat(x[0], np.array([1, 2, 3, 2])), x34),
    ("flip flipud fliplr", lambda x, xp: xp.flip(x, 0) * x + xp.flip(x) ** 2 + xp.flipud(x) * xp.fliplr(x)
     + xp.flip(x, axis=(0, 2)), x234),
    ("rot90", lambda x, xp: xp.rot90(x) * xp.rot90(x, -1) + xp.rot90(xp.rot90(x, 2), 3)
     + xp.transpose(xp.rot90(x, 1, axes=(2, 1)), (2, 0, 1)) ** 2 + xp.rot90(x, 4, axes=(1, 0)).transpose(1, 0, 2),
     x234),
    ("tril triu", lambda x, xp: xp.tril(x) * x + xp.triu(x, 1) ** 2 + xp.tril(x, -1) * xp.triu(x, -1)
     + xp.triu(x[0], 2), x234),
    ("cross of 3-vectors", lambda x, xp: xp.cross(x[..., :3], x[..., 1:]) * xp.cross(x[..., :3], x[0, :, 1:])
     + xp.cross(x[:, :, :3], x[:, :, 1:], axisc=1) + xp.cross(x[:, :3, :3], x[:, :3, 1:], axis=1), x234),
    ("cross of 2-vectors", lambda x, xp: xp.cross(x[:, :2], x) * xp.cross(x, x[::-1, 1:])
     + xp.cross(x[:, :2], x[:, 1:])[:, None] + xp.cross(x[:, :2], x[0, 1:])[:, None], x43),
    ("atleast_nd", lambda x, xp: xp.atleast_3d(x) + xp.atleast_2d(x)[:, :, None] * xp.atleast_1d(x[0])
     + xp.atleast_2d(x[1], x)[1][..., None] * xp.atleast_3d(x[2]) + xp.atleast_1d(x) ** 2, x6),
    ("append", lambda x, xp: _ravel_all(xp, xp.append(x, x[:2] ** 2), xp.append(x, x[:1] * 2, axis=0),
                                        xp.append(x, np.array([1.0, 2.0])), xp.append(x[0], x[1]) * x[2, 0]), x34),
    ("split array_split vsplit hsplit", lambda x, xp: _ravel_all(
        xp, xp.split(x, 2)[0] * xp.split(x, 2)[1], xp.array_split(x, 4, axis=1)[0] * xp.array_split(x, 4, axis=1)[1],
        xp.array_split(x, 4, axis=1)[3] ** 2, xp.vsplit(x, [1, 3])[0] * xp.vsplit(x, [1, 3])[2],
        xp.vsplit(x, [1, 3])[1], xp.hsplit(x, 3)[0] * xp.hsplit(x, 3)[2], xp.hsplit(x[0], [2])[1]), x46),
    ("gradient", lambda x, xp: xp.gradient(x, axis=1) * x + xp.stack(xp.gradient(x, 0.1))
     + xp.gradient(x, 0.5, 3.0)[1] ** 2 + xp.gradient(x[0]) + xp.gradient(x[:2], axis=0).sum(axis=0)
     + xp.gradient(x, 0.3, axis=-1), x34),
    ("rad2deg deg2rad", lambda x, xp: xp.rad2deg(x) * xp.deg2rad(x) + xp.degrees(x) ** 2 / 1e4 + xp.radians(x),
     x6),
    ("sinc", lambda x, xp: xp.sinc(x) * x + xp.sinc(2.0 * x) + xp.sinc(x) ** 2, SINC_AT),
    ("nan_to_num", lambda x, xp: xp.nan_to_num(x + SPECIAL, nan=0.5, posinf=4.0, neginf=-3.0) * x
     + xp.nan_to_num(x) ** 2 + xp.nan_to_num(x + SPECIAL[::-1], nan=x[0], posinf=x[1]), x6),
    ("floor ceil trunc rint round", lambda x, xp: x * xp.floor(3 * x) + xp.ceil(2 * x) * x ** 2
     + xp.trunc(3 * x) * xp.sin(x) + xp.rint(4 * x) * x + xp.round(x, 1) * x + xp.around(x * 10) * x
     + x.round(2) * x + xp.round(x * 100, -1) * x, x34),
    ("conj real select", lambda x, xp: xp.conj(x) * xp.real(x) + xp.conjugate(x) ** 2 + x.conj() * x.conjugate()
     + xp.select([x > 0.5, x < -0.5], [x ** 2, xp.sin(x)], default=x) + xp.select([x > 0], [x])
     + xp.select([x > 0, np.array([True, False] * 3)], [x, 2.0], 3.0), x6),
    ("mod remainder fmod", lambda x, xp: xp.mod(x, 0.7) * x + xp.remainder(1.3, x) + xp.fmod(x, -0.7) ** 2
     + xp.fmod(2.1, x) + xp.mod(x, x[::-1]) * x + xp.fmod(x, x[::-1]) + xp.mod(x, -0.4), x6),
    ("diag with offsets", lambda x, xp: _ravel_all(xp, xp.diag(x, 1), xp.diag(x, -1) ** 2, xp.diag(x[0], 2),
                                                   xp.diag(x[1], -1) * 3.0, xp.diag(x), xp.diag(x[2]),
                                                   xp.diag(x, 5)), x34),
    ("trace diagonal", lambda x, xp: _ravel_all(xp, xp.trace(x), xp.trace(x, 1, 1, 2) ** 2, xp.trace(x, -1, 2, 0),
                                                xp.diagonal(x, 1, 0, 2), xp.diagonal(x) * x.diagonal(),
                                                x.trace(offset=1), x.diagonal(-1, 2, 1), xp.trace(x[0, :, :3]),
                                                xp.diagonal(x, 7)), x234),
]


@pytest.mark.parametrize(("f", "x"), [pytest.param(f, x, id=name) for name, f, x in CASES])
def test_against_numpy_and_jax(f: Callable[..., Any], x: np.ndarray) -> None:
    check(f, x)


EXACT = [  # each function alone: NumPy's value bit for bit
    lambda x: np.roll(x, (1, -2), axis=(0, 1)), lambda x: np.tile(x, (2, 1, 3)), lambda x: np.repeat(x, [3, 1, 0, 4, 1, 2], axis=1),
    lambda x: np.rot90(x, 3), lambda x: np.flip(x), lambda x: np.triu(x, 1),
    lambda x: np.cross(x[:, :3], x[::-1, 3:]), lambda x: np.cross(x[:, :2], x[:, 1:4]),
    lambda x: np.cross(x[:, 1:4], x[:, :2]), lambda x: np.cross(x[:, :2], x[:, 4:]), lambda x: np.append(x, x[0]), lambda x: np.atleast_3d(x[0]),
    lambda x: np.gradient(x, axis=1), lambda x: np.gradient(x, 0.1, axis=1), lambda x: np.gradient(x, 0.3)[0],
    lambda x: np.rad2deg(x), lambda x: np.deg2rad(x), lambda x: np.sinc(x), lambda x: np.sinc(x * 0.0),
    lambda x: np.nan_to_num(np.log(x)), lambda x: np.floor(x * 3), lambda x: np.ceil(x * 3), lambda x: np.trunc(x * 3),
    lambda x: np.rint(x * 3), lambda x: np.round(x, 3), lambda x: np.around(x * 100, -1), lambda x: np.mod(x, 0.7),
    lambda x: np.remainder(0.7, x), lambda x: np.fmod(x, x[::-1]), lambda x: np.fmod(-0.7, x),
    lambda x: np.select([x > 0.2, x < 0], [x, x ** 2], 0.5), lambda x: np.diag(x, -2), lambda x: np.diag(x[0], 1),
    lambda x: np.trace(x, -1), lambda x: np.diagonal(x, 1), lambda x: x.astype(np.float32),
    lambda x: x.astype(np.float16), lambda x: np.tril(x, -1), lambda x: np.vsplit(x, 2)[1],
]


@pytest.mark.parametrize("f", EXACT)
def test_values_exactly(f: Callable[..., Any]) -> None:
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):  # log of negatives
        warnings.simplefilter("ignore", DeprecationWarning)
        expected = f(x46)
        value = np.asarray(jt.vjp(f, x46)[0])
    assert value.shape == expected.shape
    np.testing.assert_array_equal(value, expected)


def test_mod_operator() -> None:
    """``%`` on a traced array, either side: ``np.remainder``."""
    assert "__mod__" in vars(Traced) and "__rmod__" in vars(Traced)
    check(lambda x, xp: x % 0.7 + 1.3 % x + (x % x[::-1]) * x + np.array([2.5, -1.0, 0.3, 4.0, -2.2, 1.0]) % x, x6)


def test_astype_float32() -> None:
    """``astype(float32)``: the value NumPy rounds to, the derivative the identity (JAX's
    ``convert_element_type``): the derivatives are those of the function without the cast, taken
    at the rounded point (JAX itself would go on in float32)."""
    rounded = x6.astype(np.float32).astype(np.float64)
    assert not np.array_equal(rounded, x6)  # the cast does round here

    def cast_then(x: Any, xp: Any) -> Any:
        # the traced value goes on in float64 from the rounded values (NumPy would go on in float32);
        # JAX's reference: the function without the cast, at the rounded point
        y = x.astype(np.float32).astype(np.float64) if xp is np else x
        return xp.sin(y) * y ** 2 + y.astype(np.float64) * y[::-1]

    check(cast_then, x6, reference_at=rounded)
    # a float32 program: a cast to float32 or float64 changes nothing
    x32 = x6.astype(np.float32)
    value = _traced_value(lambda x, xp: x.astype(np.float32) * x.astype(np.float64), x32)
    np.testing.assert_array_equal(value, x32 * x32)


def test_nan_to_num_defaults_and_round_half_even() -> None:
    """Defaults of nan_to_num (the float64 extremes) and NumPy's half-to-even rounding, exactly."""
    f = lambda x, xp: xp.nan_to_num(x * SPECIAL) + xp.rint(x) + xp.round(x * 0.25, 1)  # noqa: E731
    halves = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.25])
    np.testing.assert_array_equal(_traced_value(f, halves), f(halves, np))
    assert np.all(jt.grad(lambda x: np.sum(np.rint(x) + np.floor(x) + np.ceil(x) + np.trunc(x)))(halves) == 0)


# ---------------------------------------------------------------------------- refusals and registration
REFUSED = [
    ("np.partition", lambda x: np.partition(x, 2), UnsupportedOperationError),
    ("astype(int64)", lambda x: x.astype(np.int64), UnsupportedOperationError),
    ("astype(bool)", lambda x: x.astype(bool), UnsupportedOperationError),
    ("astype(complex128)", lambda x: x.astype(np.complex128), UnsupportedOperationError),
    ("edge_order=2", lambda x: np.gradient(x, edge_order=2), UnsupportedOperationError),
    ("coordinate arrays", lambda x: np.gradient(x, np.arange(6.0) ** 2), UnsupportedOperationError),
    ("copy=False", lambda x: np.nan_to_num(x, copy=False), UnsupportedOperationError),
    ("out=", lambda x: np.round(x, 1, out=np.empty(6)), UnsupportedOperationError),
    ("traced shift", lambda x: np.roll(x, x), UnsupportedOperationError),
    ("traced repeats", lambda x: np.repeat(x, x), UnsupportedOperationError),
    ("np.select", lambda x: np.select([x], [x]), UnsupportedOperationError),
    ("np.diag", lambda x: np.diag(x.reshape(1, 2, 3), 1), TraceError),
    ("np.rot90", lambda x: np.rot90(x.reshape(2, 3), axes=(1, 1)), TraceError),
    ("np.tile", lambda x: np.tile(x, -1), TraceError),
]


@pytest.mark.parametrize(("words", "f", "error"), [pytest.param(*case, id=case[0]) for case in REFUSED])
def test_refused_in_one_line(words: str, f: Callable[..., Any], error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        jt.grad(lambda x: np.sum(f(x)))(x6)
    message = str(caught.value)
    assert "\n" not in message
    assert words in message


def test_registration_never_overrides_silently() -> None:
    with pytest.raises(RegistryError, match="np.sum already has a tracing handler"):
        numpy_more._register(np.sum)(lambda a: a)
    with pytest.raises(RegistryError, match="np.exp already has"):
        numpy_more._register_ufuncs(lambda a: a, "exp")
    from jacacc.tensor.trace import _FUNCTIONS, _UFUNCS

    assert _FUNCTIONS[np.sum].__module__ == "jacacc.tensor.arrays"
    assert _UFUNCS["exp"].__module__ != numpy_more.__name__
