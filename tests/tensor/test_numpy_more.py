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
from collections.abc import Callable, Sequence
from typing import Any

import jax_reference
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
    both = jax_reference.jit(lambda v: (jax.grad(g)(v), jax.hessian(g)(v)))
    lowered = both.lower(jax.ShapeDtypeStruct(x.shape, jnp.float64))
    try:
        compiled = lowered.compile(compiler_options=_QUICK_XLA)
    except Exception:  # noqa: BLE001 - an XLA without these options: compile as usual
        compiled = lowered.compile()
    grad, hess = compiled(jnp.asarray(x, dtype=jnp.float64))
    return np.asarray(grad), np.asarray(hess)


def _traced_value(f: Callable[..., Any], x: np.ndarray) -> np.ndarray:
    return np.asarray(jt.vjp(functools.partial(f, xp=np), x)[0])


def check(f: Callable[..., Any], x: np.ndarray, reference_at: np.ndarray | None = None,
          modes: Sequence[str] = MODES, value_atol: float = 1e-300) -> None:
    """Value against NumPy, gradient and Hessian against JAX in ``modes`` (every main mode).

    The value of a composite case is compared at 1e-14: the tracer sums terms in an order of its own
    (each function alone is compared bit for bit in :func:`test_values_exactly`); ``value_atol``
    where sums of products round otherwise (a convolution's entries near 0).

    ``reference_at``: where JAX's derivatives are taken (a cast's rounded input), if not at ``x``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # np.cross of 2-vectors
        expected = f(x, np)
    value = _traced_value(f, x)
    assert value.shape == np.shape(expected)
    np.testing.assert_allclose(value, expected, rtol=1e-14, atol=value_atol)
    s = _scalar(f, _weights(f, x))
    grad, hess = _jax_reference(s, x if reference_at is None else reference_at)
    for mode in modes:
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


@pytest.mark.parametrize(("f", "x", "mode"), [pytest.param(f, x, MODES[k % len(MODES)], id=name)
                                               for k, (name, f, x) in enumerate(CASES)])
def test_against_numpy_and_jax(f: Callable[..., Any], x: np.ndarray, mode: str) -> None:
    """Each family in one mode (the modes rotate over the cases); every mode:
    :func:`test_against_numpy_and_jax_in_every_mode`."""
    check(f, x, modes=(mode,))


@pytest.mark.exhaustive
@pytest.mark.parametrize(("f", "x"), [pytest.param(f, x, id=name) for name, f, x in CASES])
def test_against_numpy_and_jax_in_every_mode(f: Callable[..., Any], x: np.ndarray) -> None:
    check(f, x)


# ---------------------------------------------------------------------------- more: autograd's operation suite
def _listed(xp: Any, items: Any) -> Any:
    """Values in a list as the function is written for NumPy (traced: stacked by the handler);
    ``jax.numpy`` refuses lists, its reference gets the array."""
    return items if xp is np else xp.array(items)


def _real_if_close(x: Any, xp: Any) -> Any:
    return np.real_if_close(x) if xp is np else x  # jax.numpy has none: the identity on real input


def _signal(xp: Any) -> Any:
    import scipy.signal

    return scipy.signal if xp is np else jax.scipy.signal


def _sylvester(a: Any, b: Any, q: Any, xp: Any) -> Any:
    if xp is np:
        import scipy.linalg

        return scipy.linalg.solve_sylvester(a, b, q)
    # JAX cannot differentiate its own (a Schur decomposition): the Kronecker form, row-major vec
    m, n = q.shape
    k = jnp.kron(a, jnp.eye(n)) + jnp.kron(jnp.eye(m), b.T)
    return jnp.linalg.solve(k, q.ravel()).reshape(m, n)


def _banded(lu: tuple[int, int], ab: Any, b: Any, xp: Any) -> Any:
    if xp is np:
        import scipy.linalg

        return scipy.linalg.solve_banded(lu, ab, b)
    lower, upper = lu
    n = ab.shape[1]
    i, j = np.indices((n, n))
    row = upper + i - j
    inside = (row >= 0) & (row <= lower + upper)
    return jnp.linalg.solve(jnp.where(inside, ab[np.where(inside, row, 0), j], 0.0), b)


TIES = np.array([0.3, -1.2, 0.7, 0.7, 2.5, -0.4])  # x against x[::-1] ties at 2, 3; 0.3 and -1.2 tie constants
KERNEL = np.array([0.5, -1.0, 2.0])
KERNEL_2D = np.array([[1.0, -0.5], [0.25, 2.0], [-1.0, 0.5]])
BAND = np.array([[0.0], [4.0], [0.0]])  # a dominant diagonal
x2 = np.array([1.2, 3.4])
x9 = rng.normal(size=9)
x16 = rng.normal(size=16)
x39 = rng.normal(size=39)
CONVOLVE_MODES = ("full", "same", "valid")

def _joined(terms: Sequence[Callable[..., Any]]) -> Callable[..., Any]:
    """One function of the terms' values, raveled and concatenated (one XLA compile for all)."""

    def f(x: Any, xp: Any) -> Any:
        return _ravel_all(xp, *(term(x, xp) for term in terms))

    return f


#: name, terms, x, the mode of `make test`, the value's atol, how many terms `make test` checks (the
#: rest, and every mode, under -m exhaustive: JAX's compile of the reference is most of the time)
MORE = [
    ("imag angle real_if_close copy", [
        lambda x, xp: xp.imag(x) * x + xp.angle(x) * x + xp.angle(x, deg=True) / 90.0 + _real_if_close(x, xp) ** 2,
        lambda x, xp: xp.copy(x) * x.copy()], x6, "forward", 1e-14, 2),
    ("logaddexp2", [
        lambda x, xp: xp.logaddexp2(x, x[::-1]) * x + xp.logaddexp2(-1.2, x) ** 2,
        lambda x, xp: xp.logaddexp2(x, 0.3)], TIES, "reverse", 1e-300, 1),
    ("rollaxis column_stack einsum(interleaved)", [
        lambda x, xp: xp.rollaxis(x, 2) ** 2,
        lambda x, xp: xp.column_stack((x[0], x[1, :, 0], x[1, :, 1] ** 2)),
        lambda x, xp: xp.einsum(x, [0, 1, 2], x, [0, 3, 2], [1, 3]),
        lambda x, xp: xp.rollaxis(x, 0, 3).transpose(2, 0, 1) + xp.rollaxis(x, -1, 1).transpose(0, 2, 1) * 2.0
        + xp.rollaxis(x, 1, 1),
        lambda x, xp: xp.column_stack(x[0, 0]) * x[1, 1],
        lambda x, xp: xp.einsum(x[0], [Ellipsis, 1], x[1, 0], [1], [Ellipsis]),
        lambda x, xp: xp.einsum(x, [2, 0, 1]) * x[0, 0, 0],
        lambda x, xp: xp.einsum(x[0], [30, 2], x[1], [30, 2], [2, 30]),
        lambda x, xp: xp.einsum(x[0], [0, 1], x[1], [0, 1], x[0, 0], [1])], x234, "cross_country", 1e-14, 3),
    ("linspace", [
        lambda x, xp: xp.linspace(x[0], x[1], 5) * x[0],
        lambda x, xp: xp.linspace(x[0], x[0], 3) * x[1],
        lambda x, xp: xp.linspace(x[1], x[0], 4, endpoint=False),
        lambda x, xp: xp.linspace(x, x[::-1] * 2.0, 3, axis=1),
        lambda x, xp: xp.linspace(x[0], x[1], 1) + xp.linspace(x[0], x[1], 4, retstep=True)[1],
        lambda x, xp: xp.linspace(x[0], 2.0, 6)[::2] + xp.sum(xp.linspace(x[0], x[1], 0))], x2, "forward", 1e-300, 2),
    ("convolve", [
        lambda x, xp: xp.convolve(x[:6], x[6:], "full"),
        lambda x, xp: xp.convolve(x[6:], x[:6], "same"),
        lambda x, xp: xp.convolve(x[:6], KERNEL, "valid") * x[0],
        lambda x, xp: xp.convolve(x[:6], x[6:], "same") + xp.convolve(x[:6], KERNEL, "same"),
        lambda x, xp: xp.convolve(x[:6], x[6:], "valid") * xp.convolve(x[6:], x[:6], "valid"),
        lambda x, xp: xp.convolve(x[6:], x[:6], "full") * xp.convolve(x[:6], KERNEL, "full"),
        lambda x, xp: xp.convolve(KERNEL, x[6:8], "same") + xp.convolve(x[:4], x[4:6], "same")[1:],
        lambda x, xp: xp.convolve(x[0:1], x[1:3])], x9, "reverse", 1e-14, 3),
    ("scipy.signal.convolve", [
        lambda x, xp: _signal(xp).convolve(x[:12].reshape(4, 3), x[12:].reshape(2, 2), mode="same"),
        lambda x, xp: _signal(xp).convolve(x[:12].reshape(4, 3), KERNEL_2D, mode="valid"),
        lambda x, xp: _signal(xp).convolve(x[:12].reshape(4, 3), x[12:].reshape(2, 2), mode="full"),
        lambda x, xp: _signal(xp).convolve(x[:12].reshape(4, 3), x[12:].reshape(2, 2), mode="valid"),
        lambda x, xp: _signal(xp).convolve(x[12:].reshape(2, 2), x[:12].reshape(4, 3), mode="full"),
        lambda x, xp: _signal(xp).convolve(x[12:].reshape(2, 2), x[:12].reshape(4, 3), mode="same"),
        lambda x, xp: _signal(xp).convolve(x[12:].reshape(2, 2), x[:12].reshape(4, 3), mode="valid"),
        lambda x, xp: _signal(xp).convolve(x[:12].reshape(4, 3), KERNEL_2D, mode="full"),
        lambda x, xp: _signal(xp).convolve(KERNEL_2D, x[:12].reshape(4, 3), mode="same"),
        lambda x, xp: _signal(xp).convolve(x[:12].reshape(2, 3, 2), x[12:].reshape(1, 2, 2), mode="same"),
        lambda x, xp: _signal(xp).convolve(x[:5], x[5:7], mode="valid")], x16, "cross_country", 1e-14, 2),
    ("solve_sylvester solve_banded", [
        lambda x, xp: _sylvester(x[:4].reshape(2, 2) + 3.0 * np.eye(2), x[9:13].reshape(2, 2) + 3.0 * np.eye(2),
                                 x[13:17].reshape(2, 2), xp),
        lambda x, xp: _banded((1, 1), x[19:34].reshape(3, 5) + BAND, x[34:39], xp),
        lambda x, xp: _sylvester(x[:9].reshape(3, 3) + 3.0 * np.eye(3), x[9:13].reshape(2, 2) + 3.0 * np.eye(2),
                                 x[13:19].reshape(3, 2), xp),
        lambda x, xp: _banded((0, 1), np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]), x[34:37], xp)],
     x39, "forward", 1e-14, 2),
    ("lists of traced values", [
        lambda x, xp: xp.mean(_listed(xp, [x, x + 2.0])) * xp.std(_listed(xp, (x, x ** 2)), axis=0),
        lambda x, xp: xp.var(_listed(xp, [x[0], x[1] * 2.0, x[2]])) * xp.linalg.norm(_listed(xp, [x, x + 2.0])),
        lambda x, xp: xp.append(_listed(xp, [[x[0], x[1]]]), _listed(xp, [[x[2], 1.0]]), axis=0),
        lambda x, xp: xp.sum(_listed(xp, [x, x * x]), axis=0) + xp.prod(_listed(xp, [x[0], x[1], 2.0])),
        lambda x, xp: xp.max(_listed(xp, [x, -x]), axis=0) * xp.min(_listed(xp, (x[0], x[1])))],
     x6, "reverse", 1e-14, 3),
]


@pytest.mark.parametrize(("terms", "x", "mode", "atol"), [
    pytest.param(terms[:quick], x, mode, atol, id=f"{name}-{mode}") for name, terms, x, mode, atol, quick in MORE])
def test_more_against_numpy_and_jax(terms: list[Callable[..., Any]], x: np.ndarray, mode: str, atol: float) -> None:
    """Each operation of autograd's suite in one mode (the modes rotate over the cases); the other
    forms and every mode: :func:`test_more_in_every_mode`."""
    check(_joined(terms), x, modes=(mode,), value_atol=atol)


@pytest.mark.exhaustive
@pytest.mark.parametrize(("terms", "x", "atol"), [pytest.param(terms, x, atol, id=name)
                                                  for name, terms, x, _, atol, _ in MORE])
def test_more_in_every_mode(terms: list[Callable[..., Any]], x: np.ndarray, atol: float) -> None:
    check(_joined(terms), x, value_atol=atol)


def test_logaddexp2_values() -> None:
    """NumPy's value: to an ulp or two in general (its scalar exp2/log1p against the vectorized
    loops), exactly at ties (x + 1), infinities and NaN."""
    a = np.linspace(-40.0, 40.0, 41)
    b = a[::-1] * 0.37
    np.testing.assert_array_max_ulp(np.asarray(jt.vjp(lambda x: np.logaddexp2(x, b), a)[0]), np.logaddexp2(a, b), 2)
    special = np.array([np.inf, -np.inf, np.inf, -np.inf, np.nan, 1.5, 0.0, -1e300])
    other = np.array([np.inf, -np.inf, 1.0, 2.0, 1.0, 1.5, 0.0, -1e300])
    with np.errstate(invalid="ignore"):
        value = np.asarray(jt.vjp(lambda x: np.logaddexp2(x, other), special)[0])
        np.testing.assert_array_equal(value, np.logaddexp2(special, other))


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
    lambda x: np.imag(x) - x, lambda x: np.angle(x), lambda x: np.angle(-x, deg=True), lambda x: np.real_if_close(x),
    lambda x: np.rollaxis(x, 1), lambda x: np.column_stack((x[0], x[1:3].T)), lambda x: np.copy(x[::-1]),
    lambda x: np.linspace(x[0], x[1], 7), lambda x: np.linspace(x[0, 0], x[1, 1], 9, endpoint=False),
    lambda x: np.linspace(x[0, 0], x[0, 0], 3),
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
    ("np.int64()", lambda x: x[np.int64(x)], UnsupportedOperationError),
    ("int() of a traced tensor", lambda x: x * int(x[0]), UnsupportedOperationError),
    ("np.linspace with dtype=int64", lambda x: np.linspace(x[0], x[1], 3, dtype=np.int64), UnsupportedOperationError),
    ("np.einsum", lambda x: np.einsum(x, [0.5]), TraceError),
    ("np.convolve", lambda x: np.convolve(x, x, mode="middle"), TraceError),
    ("np.convolve", lambda x: np.convolve(x.reshape(2, 3), x), TraceError),
    ("scipy.signal.convolve", lambda x: _signal(np).convolve(x.reshape(2, 3), x.reshape(3, 2), mode="valid"),
     TraceError),
    ("scipy.integrate.odeint", lambda x: __import__("scipy.integrate").integrate.odeint(lambda y, t: -y, x, [0.0, 1.0]),
     UnsupportedOperationError),
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
