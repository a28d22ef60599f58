"""SciPy's distributions and Cholesky/triangular solves on traced arrays (issue 41).

``scipy.stats`` and ``scipy.linalg`` convert their arguments with ``np.asarray``, which a traced
array cannot serve; each function below is swapped in by name while a trace runs
(:func:`~jacacc.tensor.library.register_library`) and written with the traced operations and the
operators of :mod:`jacacc.linalg`, so derivatives of every order follow, in every mode.

SciPy, and how each is traced:

* ``scipy.stats.<d>.logpdf(x, *shapes, loc, scale)`` and ``pdf``: the closed form of the log
  density of ``z = (x − loc)/scale``, minus ``log(scale)`` (``pdf = exp(logpdf)``), for ``norm``,
  ``expon``, ``laplace``, ``logistic``, ``cauchy``, ``uniform`` and, with shape parameters,
  ``beta(a, b)``: ``(a − 1)·log z + (b − 1)·log(1 − z) − log B(a, b)`` on ``[0, 1]``;
  ``chi2(df)``: ``(df/2 − 1)·log z − z/2 − log Γ(df/2) − (df/2)·log 2`` and ``gamma(a)``:
  ``(a − 1)·log z − z − log Γ(a)`` on ``[0, ∞)``; ``t(df)``: ``log Γ((ν+1)/2) − log Γ(ν/2) −
  ½·log(νπ) − (ν+1)/2 · log(1 + z²/ν)`` (the normal's at a constant ``ν = ∞``), with
  ``gammaln``/``betaln`` (:mod:`jacacc.tensor.special`); ``x``, ``loc``, ``scale`` and the shape
  parameters traced or constant; NaN where a shape parameter is not positive, as SciPy;
* ``cdf``, ``sf``, ``logcdf`` and ``logsf`` of the same distributions: the normal's from ``erfc``
  (see below); the others' value is SciPy's own (``scipy.stats.<d>.cdf(z, *shapes)``, a general
  function built with :func:`~jacacc.tensor.special.elementwise_operator`), its derivative in ``z``
  the density (``±exp(logpdf)``; over the value for the logarithms, ``±exp(logpdf − value)``, 0
  where the value is −inf), so derivatives of every order follow; ``x``, ``loc`` and ``scale``
  traced or constant, a traced shape parameter refused in one line (``scipy.stats.t.cdf with a
  traced df is not supported``: the derivative in it has no closed form);
* ``scipy.stats.poisson.logpmf(k, mu, loc)`` and ``pmf``: ``xlogy(k, mu) − mu − gammaln(k + 1)``;
  ``cdf``, ``sf``, ``logcdf``, ``logsf``: SciPy's value, its derivative in ``mu`` from
  ``d/dμ P(X ≤ k) = −pmf(⌊k⌋, μ)``; ``k`` and ``loc`` constant data, ``mu`` traced;
* ``scipy.stats.multivariate_normal.logpdf`` and ``pdf`` (also frozen with constant
  ``mean``/``cov``): ``np.linalg.cholesky`` (``potrf``), ``trsm`` and ``sumlogdiag``; with
  ``allow_singular=True`` and a constant ``cov`` (and frozen with a singular one), SciPy's own
  construction from ``cov``'s eigendecomposition (see the notes);
  ``entropy(mean, cov)``: ``½ (n (log 2π + 1) + log det cov)`` by the Cholesky factor;
* ``scipy.stats.dirichlet.logpdf(x, alpha)`` and ``pdf``: ``−log B(α) + Σₖ xlogy(αₖ − 1, xₖ)``,
  ``x`` and ``alpha`` traced or constant (SciPy's checks of the simplex run on constant values only);
* ``scipy.linalg.cholesky(a, lower)``: ``potrf``; ``scipy.linalg.cho_factor(a, lower)``:
  ``(potrf(a), lower)``; ``scipy.linalg.cho_solve((c, lower), b)``: two ``trsm``;
* ``scipy.linalg.solve_triangular(a, b, trans, lower, unit_diagonal)``: ``trsm``
  (``unit_diagonal``: on the strict triangle plus the identity).

The methods of ``scipy.stats`` distributions are swapped on their base classes
(``rv_continuous``, ``rv_discrete``, ``multivariate_normal_gen``), so ``scipy.stats.norm.logpdf(x)``
and a frozen ``scipy.stats.norm(loc, scale).logpdf(x)`` (which calls ``self.dist.logpdf``) both
arrive here.  A distribution or method not listed, called with a traced argument, is refused in
one line naming it (``scipy.stats.lognorm.logpdf is not supported by jacacc.tensor``) rather than
failing deep inside SciPy.  Called on plain arrays, inside a trace or not, every function is
SciPy's own.  (``jacacc.tensor`` traces every float argument of the differentiated function: a
shape parameter that must be constant is closed over, or passed as an integer array.)

Notes
-----
* **Values off the support** are SciPy's: ``-inf`` outside ``expon``'s ``[loc, ∞)``,
  ``uniform``'s and ``beta``'s ``[loc, loc + scale]`` and ``chi2``'s and ``gamma``'s
  ``[loc, ∞)``, where the derivative is 0 (the log density is evaluated at a point of the
  support there, so the branch not taken puts no infinite derivative into the result).  A
  non-positive traced ``scale`` cannot be checked while tracing: the result is ``log`` of it
  (NaN), where SciPy returns NaN too.  Where a constant shape parameter makes ``(a − 1)·log z``
  vanish (``a = 1``, ``df = 2``), ``z`` is not read in that term
  (:func:`~jacacc.tensor.special.xlogy_constant`), so the log density is smooth at ``z = 0``.
* **The normal's tails.**  ``logcdf(z)`` is ``log(erfc(−z/√2)/2)`` for ``z < 0`` and
  ``log1p(−erfc(z/√2)/2)`` for ``z ≥ 0`` (each branch evaluated only on its side, so the branch
  not taken never puts an infinite derivative into the result).  Against SciPy's
  ``log_ndtr`` it agrees to a relative 1e-15 for ``z ≥ −37.6`` (``logcdf ≈ −713``); below,
  SciPy's ``erfc`` underflows to 0 and ``logcdf`` is ``-inf`` where ``log_ndtr`` stays finite
  (it uses an asymptotic series).  In the upper tail the value is ``−Φ(−z)`` to full relative
  accuracy until ``Φ(−z)`` underflows (``z ≳ 37.5``), where it is 0 (SciPy: ``−Φ(−z)``,
  below 1e-308).  ``logsf(z) = logcdf(−z)``, ``cdf`` and ``sf`` are ``erfc(∓z/√2)/2``.
* **Cholesky** follows :mod:`jacacc.tensor.numpy_linalg`: only the requested triangle of
  ``a`` is read, and the derivative is that of SciPy's function of that triangle (the other
  triangle's entries get none; JAX's ``symmetrize_input`` differs off symmetric directions).
  ``scipy.linalg.cholesky`` and ``cho_factor`` return zeros in the other triangle; SciPy's
  ``cho_factor`` leaves arbitrary values (what ``a`` held) there — ``cho_solve`` reads only the
  factor's triangle, so either works with it.  ``multivariate_normal`` reads the lower
  triangle of ``cov`` (SciPy: its eigendecomposition; equal for a symmetric ``cov``).
* **allow_singular=True** is supported for a constant ``cov``: SciPy's construction is repeated
  step by step (``scipy.linalg.eigh`` of the lower triangle, eigenvalues above ``10⁶·ε·max|s|``
  kept; the rank, ``log pdet`` and the whitening ``W = U_kept/√s_kept`` constants), the density
  ``−½(rank·log 2π + log pdet + |Wᵀ(x − μ)|²)`` traced in ``x`` and ``mean``, −inf where the
  component of ``x − μ`` in ``cov``'s null space reaches ``10³`` times the cutoff, as SciPy.  Its
  derivative is the density's along the support (off it the density jumps to −inf).  A traced
  ``cov`` with ``allow_singular=True`` is refused in one line: the rank is decided by a cutoff on
  values not known while tracing, and the pseudo-determinant has no derivative across a change
  of rank.
* ``overwrite_a``, ``overwrite_b`` and ``check_finite`` are accepted and ignored (traced
  values cannot be checked); any other keyword is refused in one line.  ``cho_solve`` and
  ``solve_triangular`` take one matrix (no batch) and ``b`` of shape ``(n,)`` or ``(n, k)``;
  ``cholesky`` and ``cho_factor`` take a stack of matrices too.

Examples
--------
>>> import numpy as np, scipy.stats
>>> import jacacc.tensor as jt
>>> import jacacc.tensor.scipy_functions  # registers the functions (once: jacacc.tensor imports it)
>>> x = np.array([0.5, -1.0, 2.0])
>>> g = jt.grad(lambda mu: np.sum(scipy.stats.norm.logpdf(x, loc=mu)))(np.zeros(3))
>>> g.tolist()                                    # (x − μ) / σ²
[0.5, -1.0, 2.0]
>>> H = jt.hessian(lambda s: np.sum(scipy.stats.norm(0.0, s).logpdf(x)))(np.ones(3))
>>> np.allclose(np.diag(H), 1 - 3 * x ** 2)       # d²/dσ² (−x²/2σ² − log σ) at σ = 1
True
>>> g = jt.grad(lambda x: np.sum(scipy.stats.t.cdf(x, 3.0)))(x)
>>> np.allclose(g, scipy.stats.t.pdf(x, 3.0))      # the density
True
>>> g = jt.grad(lambda a: np.sum(scipy.stats.gamma.logpdf(2.0, a)))(np.array([1.5, 3.0]))
>>> np.allclose(g, np.log(2.0) - scipy.special.digamma([1.5, 3.0]))
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc.errors import TraceError, UnsupportedOperationError
from jacacc.tensor.library import _as_traced, _traced_inside, register_library
from jacacc.tensor.special import apply_elementwise, elementwise_operator, xlog1py_constant, xlogy_constant
from jacacc.tensor.trace import Traced, _where

__all__: list[str] = []

_LOG_2PI = math.log(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)
#: keywords SciPy's linear-algebra functions take for memory and input checks: no effect on the value
_HARMLESS = frozenset({"overwrite_a", "overwrite_b", "check_finite"})


# ---------------------------------------------------------------------------- helpers
def _unsupported(what: str, why: str = "") -> UnsupportedOperationError:
    return UnsupportedOperationError(f"{what} is not supported by jacacc.tensor" + (f" ({why})" if why else ""))


def _array(value: Any) -> Any:
    """A traced array (nested lists holding traced values stacked), or a float ndarray."""
    return _as_traced(value, None) if _traced_inside(value) else np.asarray(value, dtype=float)


def _bind(name: str, names: Sequence[str], defaults: Sequence[Any], args: tuple[Any, ...],
          kwds: dict[str, Any]) -> list[Any]:
    """SciPy's ``*args, **kwds`` of a distribution method bound to its parameters ``names``,
    refusing what SciPy's ``_parse_args`` would refuse, in one line naming the method."""
    if len(args) > len(names):
        raise UnsupportedOperationError(f"{name} takes the parameters {', '.join(names)}; got {len(args)} "
                                        "positional ones")
    values = dict(zip(names, args, strict=False))
    for key, value in kwds.items():
        if key not in names:
            raise _unsupported(f"{name} with the keyword {key}")
        if key in values:
            raise UnsupportedOperationError(f"{name}: {key} given both by position and by keyword")
        values[key] = value
    return [_array(values[n]) if n in values else d for n, d in zip(names, defaults, strict=True)]


def _refuse_keywords(name: str, kwargs: dict[str, Any]) -> None:
    unknown = [key for key in kwargs if key not in _HARMLESS]
    if unknown:
        raise _unsupported(f"{name} with {', '.join(unknown)}")


def _distribution(self: Any) -> str:
    return getattr(self, "name", None) or type(self).__name__


def _squeezed(value: Any) -> Any:
    """``value`` without its size-1 axes, as SciPy's multivariate results."""
    shape = tuple(n for n in value.shape if n != 1)
    return value if shape == tuple(value.shape) else np.reshape(value, shape)


# ---------------------------------------------------------------------------- continuous, log densities of z
def _norm(z: Any) -> Any:
    return -0.5 * z ** 2 - 0.5 * _LOG_2PI


def _expon(z: Any) -> Any:
    return _where(z < 0, -np.inf, -z)   # −z is finite everywhere: no NaN through the branch not taken


def _laplace(z: Any) -> Any:
    return -np.abs(z) - math.log(2.0)


def _logistic(z: Any) -> Any:
    # −z − 2·log(1 + e^−z) with logaddexp: no overflow for z ≪ 0, and smooth at 0 (SciPy's −|z|
    # form would give a zero second derivative there)
    return -z - 2.0 * np.logaddexp(0.0, -z)


def _cauchy(z: Any) -> Any:
    return -math.log(math.pi) - np.log1p(z ** 2)


def _uniform(z: Any) -> Any:
    return _where(z < 0, -np.inf, _where(z > 1, -np.inf, 0.0))


def _special(name: str) -> Any:
    import scipy.special

    return getattr(scipy.special, name)   # a ufunc: traced arguments dispatch to jacacc.tensor.special


def _off(outside: Any, z: Any, inside: float, log_density: Callable[[Any], Any]) -> Any:
    """``log_density(z)`` on the support, −inf ``outside`` it; the density is evaluated at ``inside``
    off the support, so that the branch not taken puts no infinite derivative into the result."""
    outside = outside if isinstance(outside, Traced) else np.asarray(outside)   # the trace takes no NumPy bool scalar
    return np.where(outside, -np.inf, log_density(np.where(outside, inside, z)))


def _beta(z: Any, a: Any, b: Any) -> Any:
    """``(a − 1)·log z + (b − 1)·log(1 − z) − log B(a, b)`` on ``[0, 1]``, as SciPy's beta."""
    return _off((z < 0) + (z > 1), z, 0.5, lambda z: xlogy_constant(a - 1.0, z) + xlog1py_constant(b - 1.0, -z)
                - _special("betaln")(a, b))


def _chi2(z: Any, df: Any) -> Any:
    """``(df/2 − 1)·log z − z/2 − log Γ(df/2) − (df/2)·log 2`` on ``[0, ∞)``, as SciPy's chi2."""
    return _off(z < 0, z, 1.0, lambda z: xlogy_constant(df / 2.0 - 1.0, z) - z / 2.0 - _special("gammaln")(df / 2.0)
                - math.log(2.0) * df / 2.0)


def _gamma(z: Any, a: Any) -> Any:
    """``(a − 1)·log z − z − log Γ(a)`` on ``[0, ∞)``, as SciPy's gamma."""
    return _off(z < 0, z, 1.0, lambda z: xlogy_constant(a - 1.0, z) - z - _special("gammaln")(a))


def _t(z: Any, df: Any) -> Any:
    """``log Γ((ν+1)/2) − log Γ(ν/2) − ½·log(νπ) − (ν+1)/2 · log(1 + z²/ν)``; the normal's at a
    constant ``ν = ∞``, as SciPy's t."""
    gammaln = _special("gammaln")
    infinite = None if isinstance(df, Traced) or not np.any(np.isinf(df)) else np.asarray(np.isinf(df))
    nu = df if infinite is None else np.where(infinite, 1.0, df)
    log_density = (gammaln((nu + 1.0) / 2.0) - gammaln(nu / 2.0) - 0.5 * np.log(nu * math.pi)
                   - (nu + 1.0) / 2.0 * np.log1p(z * z / nu))
    return log_density if infinite is None else np.where(infinite, _norm(z), log_density)


@dataclass(frozen=True)
class _Continuous:
    """A continuous distribution: the log density of its standard form (``loc = 0``, ``scale = 1``)
    as a function of ``z`` and the shape parameters, and the shape parameters' domain (SciPy's
    ``_argcheck``; NaN outside it, as SciPy)."""

    log_density: Callable[..., Any]
    shapes: tuple[str, ...] = ()
    valid: Callable[..., Any] | None = None


def _positive(*parameters: Any) -> Any:
    """Where every parameter is positive: a traced mask, or an array (a comparison of a constant of
    shape () is a NumPy bool scalar, which the trace does not take)."""
    masks = [p > 0 if isinstance(p, Traced) else np.asarray(p > 0) for p in parameters]
    return functools.reduce(lambda a, b: a * b, masks)


@functools.cache
def _continuous() -> dict[type, _Continuous]:
    import scipy.stats

    table = {scipy.stats.norm: _Continuous(_norm), scipy.stats.expon: _Continuous(_expon),
             scipy.stats.laplace: _Continuous(_laplace), scipy.stats.logistic: _Continuous(_logistic),
             scipy.stats.cauchy: _Continuous(_cauchy), scipy.stats.uniform: _Continuous(_uniform),
             scipy.stats.beta: _Continuous(_beta, ("a", "b"), _positive),
             scipy.stats.chi2: _Continuous(_chi2, ("df",), _positive),
             scipy.stats.gamma: _Continuous(_gamma, ("a",), _positive),
             scipy.stats.t: _Continuous(_t, ("df",), _positive)}
    return {type(d): spec for d, spec in table.items()}


def _spec(self: Any, method: str) -> _Continuous:
    spec = _continuous().get(type(self))
    if spec is None:
        raise _unsupported(f"scipy.stats.{_distribution(self)}.{method}")
    return spec


_MISSING = object()


def _location_scale(self: Any, spec: _Continuous, method: str, x: Any, args: tuple[Any, ...],
                    kwds: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    """``(z, scale, shape parameters)`` for a location-scale distribution's ``method``."""
    name = f"scipy.stats.{_distribution(self)}.{method}"
    *shapes, loc, scale = _bind(name, (*spec.shapes, "loc", "scale"), (*(_MISSING,) * len(spec.shapes), 0.0, 1.0),
                                args, kwds)
    missing = [n for n, v in zip(spec.shapes, shapes, strict=True) if v is _MISSING]
    if missing:
        raise UnsupportedOperationError(f"{name}: the parameter {', '.join(missing)} is missing")
    return (_array(x) - loc) / scale, scale, shapes


def _with_domain(spec: _Continuous, shapes: list[Any], value: Any) -> Any:
    """NaN where the shape parameters are off their domain (only where some are, or may be: traced)."""
    if spec.valid is None:
        return value
    valid = spec.valid(*shapes)
    if not isinstance(valid, Traced):
        if np.all(valid):
            return value
        valid = np.asarray(valid)
    return np.where(valid, value, np.nan)


def _continuous_logpdf(self: Any, method: str, x: Any, args: tuple[Any, ...], kwds: dict[str, Any]) -> Any:
    spec = _spec(self, method)
    z, scale, shapes = _location_scale(self, spec, method, x, args, kwds)
    return _with_domain(spec, shapes, spec.log_density(z, *shapes) - np.log(scale))


@register_library("scipy.stats:rv_continuous.logpdf")
def _logpdf(self: Any, x: Any, *args: Any, **kwds: Any) -> Any:
    return _continuous_logpdf(self, "logpdf", x, args, kwds)


@register_library("scipy.stats:rv_continuous.pdf")
def _pdf(self: Any, x: Any, *args: Any, **kwds: Any) -> Any:
    return np.exp(_continuous_logpdf(self, "pdf", x, args, kwds))


# ---------------------------------------------------------------------------- cdf, sf and their logarithms
def _erfc(t: Any) -> Any:
    import scipy.special

    return scipy.special.erfc(t)  # a ufunc: the traced erfc through __array_ufunc__


def _log_ndtr(z: Any) -> Any:
    """``log Φ(z)`` from erfc, each branch on its own side (see the module notes on accuracy)."""
    below = z < 0
    # the branch not taken is evaluated at 0, not at z: at z ≪ 0 the upper branch is log(0) and its
    # derivative infinite, which the where would turn into 0·∞ = NaN
    lower_z, upper_z = _where(below, z, 0.0), _where(below, 0.0, z)
    lower = np.log(0.5 * _erfc(-_SQRT_HALF * lower_z))      # Φ(z) to full relative accuracy for z < 0
    upper = np.log1p(-0.5 * _erfc(_SQRT_HALF * upper_z))    # log(1 − Φ(−z)) without the cancellation
    return _where(below, lower, upper)


#: the normal's cdf family of z, written with erfc
_NORM_TAILS: dict[str, Callable[[Any], Any]] = {
    "logcdf": _log_ndtr, "logsf": lambda z: _log_ndtr(-z), "cdf": lambda z: 0.5 * _erfc(-_SQRT_HALF * z),
    "sf": lambda z: 0.5 * _erfc(_SQRT_HALF * z)}


def _tail_partial(method: str, log_density: Any, value: Traced, sign: float) -> Any:
    """The derivative of ``method`` (cdf, sf, logcdf, logsf) in the variable whose derivative of the
    cdf is ``sign · exp(log_density)``: the density itself for cdf and sf, the density over the value
    for the logarithms (``exp(log_density − value)``, 0 where the value is −inf)."""
    if method in ("sf", "logsf"):
        sign = -sign
    if method in ("cdf", "sf"):
        return sign * np.exp(log_density)
    finite = value != -np.inf
    return sign * np.where(finite, np.exp(log_density - np.where(finite, value, 0.0)), 0.0)


def _stats_cdf_forward(*arrays: np.ndarray, distribution: str, method: str) -> np.ndarray:
    import scipy.stats

    return np.asarray(getattr(getattr(scipy.stats, distribution), method)(*arrays), dtype=arrays[0].dtype)


def _stats_cdf_partial(k: int, arguments: tuple[Any, ...], value: Traced, distribution: str, method: str) -> Any:
    import scipy.stats

    if distribution == "poisson":   # (k, mu): d/dμ P(X ≤ k) = −pmf(⌊k⌋, μ)
        return None if k != 1 else _tail_partial(method, _poisson_log_mass(np.floor(arguments[0]), arguments[1]),
                                                 value, -1.0)
    if k != 0:    # (z, shape parameters): the shape parameters are constants
        return None
    spec = _continuous()[type(getattr(scipy.stats, distribution))]
    return _tail_partial(method, spec.log_density(*arguments), value, 1.0)


elementwise_operator("scipy_stats_cdf", _stats_cdf_forward, _stats_cdf_partial, 200)


def _continuous_tail(method: str) -> Callable[..., Any]:
    """``scipy.stats.<d>.<method>`` (cdf, sf, logcdf, logsf): the normal's from erfc, the others'
    SciPy's own of ``z``, whose derivative is the density (over the value, for the logarithms)."""

    def implementation(self: Any, x: Any, *args: Any, **kwds: Any) -> Any:
        import scipy.stats

        spec = _spec(self, method)
        z, _, shapes = _location_scale(self, spec, method, x, args, kwds)
        if type(self) is type(scipy.stats.norm):
            return _NORM_TAILS[method](z)
        name = f"scipy.stats.{_distribution(self)}.{method}"
        for shape, value in zip(spec.shapes, shapes, strict=True):
            if isinstance(value, Traced):
                raise _unsupported(f"{name} with a traced {shape}", f"its derivative in {shape} has no closed form")
        return apply_elementwise("scipy_stats_cdf", [z, *shapes], distribution=_distribution(self), method=method)

    implementation.__name__ = implementation.__qualname__ = f"_{method}"
    return implementation


def _refused_method(kind: str, method: str) -> Callable[..., Any]:
    def refuse(self: Any, *args: Any, **kwds: Any) -> Any:
        raise _unsupported(f"scipy.stats.{_distribution(self)}.{method}")

    refuse.__name__ = refuse.__qualname__ = f"_refused_{kind}_{method}"
    return refuse


for _method in ("cdf", "logcdf", "sf", "logsf"):
    register_library(f"scipy.stats:rv_continuous.{_method}")(_continuous_tail(_method))
for _method in ("ppf", "isf"):
    register_library(f"scipy.stats:rv_continuous.{_method}")(_refused_method("continuous", _method))
    register_library(f"scipy.stats:rv_discrete.{_method}")(_refused_method("discrete", _method))


# ---------------------------------------------------------------------------- poisson
def _poisson_log_mass(k: np.ndarray, mu: Any) -> Any:
    """``k·log μ − μ − log k!`` for constant counts ``k``: −inf off the support (a negative or
    non-integer ``k``), as SciPy."""
    import scipy.special

    on_support = (k >= 0) & (k == np.floor(k))
    safe_k = np.where(on_support, k, 0.0)
    constant = np.where(on_support, -scipy.special.gammaln(safe_k + 1.0), -np.inf)
    return xlogy_constant(safe_k, mu) - mu + constant


def _poisson_arguments(self: Any, method: str, k: Any, args: tuple[Any, ...], kwds: dict[str, Any]) -> tuple[Any, Any]:
    """``(k − loc, mu)`` of a poisson method, refusing other distributions and traced data."""
    import scipy.stats

    name = f"scipy.stats.{_distribution(self)}.{method}"
    if type(self) is not type(scipy.stats.poisson):
        raise _unsupported(name)
    if _traced_inside(k):
        raise _unsupported(f"{name} with a traced k", "k is data: pass it as a constant integer array")
    mu, loc = _bind(name, ("mu", "loc"), (None, 0.0), args, kwds)
    if mu is None:
        raise UnsupportedOperationError(f"{name}: the parameter mu is missing")
    if _traced_inside(loc):
        raise _unsupported(f"{name} with a traced loc", "it shifts the data k")
    return np.asarray(k, dtype=float) - np.asarray(loc, dtype=float), mu


@register_library("scipy.stats:rv_discrete.logpmf")
def _logpmf(self: Any, k: Any, *args: Any, **kwds: Any) -> Any:
    return _poisson_log_mass(*_poisson_arguments(self, "logpmf", k, args, kwds))


@register_library("scipy.stats:rv_discrete.pmf")
def _pmf(self: Any, k: Any, *args: Any, **kwds: Any) -> Any:
    return np.exp(_poisson_log_mass(*_poisson_arguments(self, "pmf", k, args, kwds)))


def _discrete_tail(method: str) -> Callable[..., Any]:
    """``scipy.stats.poisson.<method>`` (cdf, sf, logcdf, logsf) in μ: SciPy's value, whose
    derivative is ∓pmf(⌊k⌋, μ) (over the value, for the logarithms)."""

    def implementation(self: Any, k: Any, *args: Any, **kwds: Any) -> Any:
        return apply_elementwise("scipy_stats_cdf", list(_poisson_arguments(self, method, k, args, kwds)),
                                 distribution="poisson", method=method)

    implementation.__name__ = implementation.__qualname__ = f"_discrete_{method}"
    return implementation


for _method in ("cdf", "logcdf", "sf", "logsf"):
    register_library(f"scipy.stats:rv_discrete.{_method}")(_discrete_tail(_method))


# ---------------------------------------------------------------------------- multivariate normal
def _mvn_parameters(name: str, mean: Any, cov: Any) -> tuple[int, Any, Any]:
    """SciPy's ``_process_parameters``: the dimension, the mean as a vector and the covariance as a
    matrix (a scalar ``cov`` times the identity, a vector on the diagonal)."""
    cov = _array(cov)
    mean = None if mean is None else _array(mean)
    if mean is not None and mean.ndim > 1:
        raise TraceError(f"{name}: mean must be a vector, got shape {mean.shape}")
    dim = mean.size if mean is not None else cov.shape[0] if cov.ndim == 2 else cov.size if cov.ndim == 1 else 1
    if cov.ndim == 0:
        cov = cov * np.eye(dim)
    elif cov.ndim == 1:
        cov = np.diag(cov)
    if cov.shape != (dim, dim):
        raise TraceError(f"{name}: cov of shape {cov.shape} does not match the dimension {dim}")
    return dim, (np.zeros(dim) if mean is None else np.reshape(mean, (dim,))), cov


def _mvn_logpdf(name: str, x: Any, mean: Any, cov: Any, allow_singular: bool = False) -> Any:
    dim, mean, cov = _mvn_parameters(name, mean, cov)
    x = _array(x)
    # SciPy's quantiles: the last axis holds the components, except that a vector is n points
    # when the dimension is 1
    if x.ndim == 0 or (x.ndim == 1 and dim == 1):
        x = np.reshape(x, (-1, 1) if x.ndim else (1, 1))
    if x.shape[-1] != dim:
        raise TraceError(f"{name}: x of shape {x.shape} does not have {dim} components on its last axis")
    batch = tuple(x.shape[:-1])
    points = np.reshape(x, (math.prod(batch), dim)) - mean
    if allow_singular:
        log_density = _mvn_pseudo_logpdf(name, points, cov)
    else:
        log_density = _mvn_cholesky_logpdf(points, cov)
    return _squeezed(np.reshape(log_density, batch))


def _mvn_cholesky_logpdf(points: Any, cov: Any) -> Any:
    from jacacc import linalg

    factor = np.linalg.cholesky(cov)                          # L with cov = L Lᵀ (lower triangle read)
    whitened = linalg.trsm(factor, points.T)                  # L⁻¹ (x − μ), one column per point
    mahalanobis = np.sum(whitened * whitened, axis=0)
    return -0.5 * (mahalanobis + cov.shape[0] * _LOG_2PI) - linalg.sumlogdiag(factor)   # ½ log det = Σ log Lᵢᵢ


def _mvn_pseudo_logpdf(name: str, points: Any, cov: Any) -> Any:
    """SciPy's density for ``allow_singular=True`` of a constant ``cov``: its eigendecomposition
    (``scipy.linalg.eigh``, lower triangle), eigenvalues above SciPy's cutoff ``10⁶·ε·max|s|`` kept,
    ``−½(rank·log 2π + log pdet + |Wᵀ(x − μ)|²)`` with the pseudo-inverse's factor ``W``, and −inf
    where ``x − μ`` leaves the support (its component in the null space at least ``10³`` times the
    cutoff), as ``scipy.stats._multivariate._PSD``.  The derivative is the density's along the
    support, where it is finite; the support's indicator has derivative 0."""
    import scipy.linalg

    if isinstance(cov, Traced):
        raise _unsupported(f"{name} with allow_singular=True and a traced cov",
                           "the pseudo-determinant's derivative depends on the numerical rank")
    s, u = scipy.linalg.eigh(cov, lower=True)
    eps = 1e6 * np.finfo(np.float64).eps * np.max(np.abs(s))
    if np.min(s) < -eps:
        raise TraceError(f"{name}: cov must be symmetric positive semidefinite")
    kept = s > eps
    whitening = u[:, kept] / np.sqrt(s[kept])
    whitened = points @ whitening
    log_density = -0.5 * (int(kept.sum()) * _LOG_2PI + float(np.sum(np.log(s[kept])))
                          + np.sum(whitened * whitened, axis=-1))
    if kept.all():
        return log_density
    residual = points @ u[:, ~kept]                           # the component in cov's null space
    outside = np.sum(residual * residual, axis=-1) >= (1e3 * eps) ** 2
    return np.where(outside, -np.inf, log_density)


def _mvn_arguments(name: str, allow_singular: Any, kwargs: dict[str, Any]) -> bool:
    if _traced_inside(allow_singular):
        raise _unsupported(f"{name} with a traced allow_singular")
    if kwargs:
        raise _unsupported(f"{name} with {', '.join(kwargs)}")
    return bool(allow_singular)


@register_library("scipy.stats._multivariate:multivariate_normal_gen.logpdf")
def _mvn_gen_logpdf(self: Any, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False,
                    **kwargs: Any) -> Any:
    name = "scipy.stats.multivariate_normal.logpdf"
    return _mvn_logpdf(name, x, mean, cov, _mvn_arguments(name, allow_singular, kwargs))


@register_library("scipy.stats._multivariate:multivariate_normal_gen.pdf")
def _mvn_gen_pdf(self: Any, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False,
                 **kwargs: Any) -> Any:
    name = "scipy.stats.multivariate_normal.pdf"
    return np.exp(_mvn_logpdf(name, x, mean, cov, _mvn_arguments(name, allow_singular, kwargs)))


def _frozen_mvn(self: Any, method: str, x: Any) -> Any:
    name = f"scipy.stats.multivariate_normal(mean, cov).{method}"
    singular = bool(np.any(self.cov_object.rank < self.dim))    # frozen with allow_singular=True
    return _mvn_logpdf(name, x, self.mean, self.cov_object.covariance, allow_singular=singular)


@register_library("scipy.stats._multivariate:multivariate_normal_frozen.logpdf")
def _mvn_frozen_logpdf(self: Any, x: Any) -> Any:
    return _frozen_mvn(self, "logpdf", x)


@register_library("scipy.stats._multivariate:multivariate_normal_frozen.pdf")
def _mvn_frozen_pdf(self: Any, x: Any) -> Any:
    return np.exp(_frozen_mvn(self, "pdf", x))


@register_library("scipy.stats._multivariate:multivariate_normal_gen.__call__")
def _mvn_freeze(self: Any, *args: Any, **kwargs: Any) -> Any:
    # freezing factors cov by eigendecomposition at once, which a traced cov cannot serve
    raise _unsupported("scipy.stats.multivariate_normal(mean, cov) frozen with traced parameters",
                       "call scipy.stats.multivariate_normal.logpdf(x, mean, cov)")


@register_library("scipy.stats._multivariate:multivariate_normal_gen.entropy")
def _mvn_entropy(self: Any, mean: Any = None, cov: Any = 1) -> Any:
    """``½ (n (log 2π + 1) + log det cov)``, the log-determinant ``2 Σ log Lᵢᵢ`` of the Cholesky factor
    of cov's lower triangle (SciPy: of its eigendecomposition's eigenvalues, equal for a positive
    definite cov; a singular one is NaN here, where SciPy raises)."""
    from jacacc import linalg

    dim, _, cov = _mvn_parameters("scipy.stats.multivariate_normal.entropy", mean, cov)
    return 0.5 * dim * (_LOG_2PI + 1.0) + linalg.sumlogdiag(np.linalg.cholesky(cov))


for _method in ("cdf", "logcdf"):
    register_library(f"scipy.stats._multivariate:multivariate_normal_gen.{_method}")(
        _refused_method("multivariate_normal", _method))


# ---------------------------------------------------------------------------- dirichlet
def _dirichlet_logpdf(name: str, x: Any, alpha: Any) -> Any:
    """SciPy's ``−log B(α) + Σₖ xlogy(αₖ − 1, xₖ)``, the components along ``x``'s first axis (its last
    entry ``1 − Σ`` the others where ``x`` has one fewer than ``α``).  SciPy's checks of the values
    (``α > 0``, ``x`` on the simplex) run where the values are constant; traced values cannot be
    checked while tracing, and off the simplex the formula's value is returned."""
    import scipy.special

    alpha, x = _array(alpha), _array(x)
    if alpha.ndim != 1:
        raise TraceError(f"{name}: alpha must be one-dimensional, got shape {alpha.shape}")
    if x.ndim not in (1, 2) or x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise TraceError(f"{name}: x of shape {x.shape} needs {alpha.shape[0]} or {alpha.shape[0] - 1} entries on "
                         "its first axis (one per component of alpha)")
    if not _traced_inside(alpha) and np.min(alpha) <= 0:
        raise ValueError(f"{name}: all parameters alpha must be greater than 0")
    if x.shape[0] != alpha.shape[0]:
        x = np.concatenate([x, 1.0 - np.sum(x, axis=0, keepdims=True)], axis=0)
    if not _traced_inside(x) and (np.min(x) < 0 or np.max(x) > 1 or np.any(np.abs(np.sum(x, 0) - 1) > 1e-9)):
        raise ValueError(f"{name}: x must lie in the simplex (entries in [0, 1] summing to 1)")
    log_beta = np.sum(scipy.special.gammaln(alpha)) - scipy.special.gammaln(np.sum(alpha))
    shape = (-1,) + (1,) * (x.ndim - 1)
    return _squeezed(-log_beta + np.sum(scipy.special.xlogy(np.reshape(alpha, shape) - 1.0, x), axis=0))


@register_library("scipy.stats._multivariate:dirichlet_gen.logpdf")
def _dirichlet_gen_logpdf(self: Any, x: Any, alpha: Any) -> Any:
    return _dirichlet_logpdf("scipy.stats.dirichlet.logpdf", x, alpha)


@register_library("scipy.stats._multivariate:dirichlet_gen.pdf")
def _dirichlet_gen_pdf(self: Any, x: Any, alpha: Any) -> Any:
    return np.exp(_dirichlet_logpdf("scipy.stats.dirichlet.pdf", x, alpha))


# ---------------------------------------------------------------------------- scipy.linalg
def _matrix(name: str, a: Any, batch: bool) -> Any:
    a = _array(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise TraceError(f"{name}: the matrix must be square, got shape {a.shape}")
    if a.ndim > 2 and not batch:
        raise _unsupported(f"{name} of a stack of matrices (shape {a.shape})")
    return a


def _right_hand_side(name: str, b: Any, n: int) -> tuple[Any, bool]:
    """``b`` as an ``n × k`` matrix, and whether it was a vector."""
    b = _array(b)
    if b.ndim not in (1, 2) or b.shape[0] != n:
        raise TraceError(f"{name}: b of shape {b.shape} does not match the {n} x {n} matrix (shape ({n},) or "
                         f"({n}, k))")
    return (np.reshape(b, (n, 1)), True) if b.ndim == 1 else (b, False)


def _flag(name: str, key: str, value: Any) -> bool:
    if _traced_inside(value):
        raise _unsupported(f"{name} with a traced {key}")
    return bool(value)


def _factor(name: str, a: Any, lower: Any) -> Any:
    # np.linalg.cholesky's: only the triangle SciPy reads enters, value and derivative alike
    return np.linalg.cholesky(_matrix(name, a, batch=True), upper=not _flag(name, "lower", lower))


@register_library("scipy.linalg:cholesky", "scipy.linalg._decomp_cholesky:cholesky")
def _cholesky(a: Any, lower: bool = False, **kwargs: Any) -> Any:
    _refuse_keywords("scipy.linalg.cholesky", kwargs)
    return _factor("scipy.linalg.cholesky", a, lower)


@register_library("scipy.linalg:cho_factor", "scipy.linalg._decomp_cholesky:cho_factor")
def _cho_factor(a: Any, lower: bool = False, **kwargs: Any) -> tuple[Any, bool]:
    _refuse_keywords("scipy.linalg.cho_factor", kwargs)
    return _factor("scipy.linalg.cho_factor", a, lower), bool(lower)


@register_library("scipy.linalg:cho_solve", "scipy.linalg._decomp_cholesky:cho_solve")
def _cho_solve(c_and_lower: tuple[Any, Any], b: Any, **kwargs: Any) -> Any:
    from jacacc import linalg

    name = "scipy.linalg.cho_solve"
    _refuse_keywords(name, kwargs)
    c, lower = c_and_lower
    c, lower = _matrix(name, c, batch=False), _flag(name, "lower", lower)
    rhs, vector = _right_hand_side(name, b, c.shape[-1])
    # A = L Lᵀ: L y = b, then Lᵀ x = y; A = Uᵀ U: Uᵀ y = b, then U x = y (only c's triangle is read)
    y = linalg.trsm(c, rhs, transpose=not lower, lower=lower)
    x = linalg.trsm(c, y, transpose=lower, lower=lower)
    return np.reshape(x, (c.shape[-1],)) if vector else x


_TRANSPOSE = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}  # 'C' = 'T' for real matrices


@register_library("scipy.linalg:solve_triangular", "scipy.linalg._basic:solve_triangular")
def _solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False, unit_diagonal: bool = False,
                      **kwargs: Any) -> Any:
    from jacacc import linalg

    name = "scipy.linalg.solve_triangular"
    _refuse_keywords(name, kwargs)
    if _traced_inside(trans) or not isinstance(trans, int | str) or trans not in _TRANSPOSE:
        raise TraceError(f"{name}: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    a, lower = _matrix(name, a, batch=False), _flag(name, "lower", lower)
    n = a.shape[-1]
    rhs, vector = _right_hand_side(name, b, n)
    if _flag(name, "unit_diagonal", unit_diagonal):
        # the diagonal is not read (its derivative is 0): the strict triangle plus the identity
        strict = np.tril(np.ones((n, n)), -1) if lower else np.triu(np.ones((n, n)), 1)
        a = a * strict + np.eye(n)
    x = linalg.trsm(a, rhs, transpose=_TRANSPOSE[trans], lower=lower)
    return np.reshape(x, (n,)) if vector else x


del _method
