"""SciPy's distributions and Cholesky/triangular solves on traced arrays (issue 41).

``scipy.stats`` and ``scipy.linalg`` convert their arguments with ``np.asarray``, which a traced
array cannot serve; each function below is swapped in by name while a trace runs
(:func:`~jacacc.tensor.library.register_library`) and written with the traced operations and the
operators of :mod:`jacacc.linalg`, so derivatives of every order follow, in every mode.

SciPy, and how each is traced:

* ``scipy.stats.<d>.logpdf(x, loc, scale)`` and ``pdf``: the closed form of
  ``z = (x − loc)/scale``, minus ``log(scale)`` (``pdf = exp(logpdf)``), for ``norm``, ``expon``,
  ``laplace``, ``logistic``, ``cauchy``, ``uniform``; ``loc``/``scale`` traced or constant;
* ``scipy.stats.norm.logcdf``, ``cdf``, ``logsf``, ``sf``: ``erfc`` (see below);
* ``scipy.stats.poisson.logpmf(k, mu, loc)`` and ``pmf``: ``xlogy(k, mu) − mu − gammaln(k + 1)``;
  ``k`` and ``loc`` constant data, ``mu`` traced;
* ``scipy.stats.multivariate_normal.logpdf`` and ``pdf`` (also frozen with constant
  ``mean``/``cov``): ``np.linalg.cholesky`` (``potrf``), ``trsm`` and ``sumlogdiag``;
* ``scipy.linalg.cholesky(a, lower)``: ``potrf``; ``scipy.linalg.cho_factor(a, lower)``:
  ``(potrf(a), lower)``; ``scipy.linalg.cho_solve((c, lower), b)``: two ``trsm``;
* ``scipy.linalg.solve_triangular(a, b, trans, lower, unit_diagonal)``: ``trsm``
  (``unit_diagonal``: on the strict triangle plus the identity).

The methods of ``scipy.stats`` distributions are swapped on their base classes
(``rv_continuous``, ``rv_discrete``, ``multivariate_normal_gen``), so ``scipy.stats.norm.logpdf(x)``
and a frozen ``scipy.stats.norm(loc, scale).logpdf(x)`` (which calls ``self.dist.logpdf``) both
arrive here.  A distribution or method not listed, called with a traced argument, is refused in
one line naming it (``scipy.stats.gamma.logpdf is not supported by jacacc.tensor``) rather than
failing deep inside SciPy.  Called on plain arrays, inside a trace or not, every function is
SciPy's own.

Notes
-----
* **Values off the support** are SciPy's: ``-inf`` outside ``expon``'s ``[loc, ∞)`` and
  ``uniform``'s ``[loc, loc + scale]``, where the derivative is 0.  A non-positive traced
  ``scale`` cannot be checked while tracing: the result is ``log`` of it (NaN), where SciPy
  returns NaN too.
* **The normal's tails.**  ``logcdf(z)`` is ``log(erfc(−z/√2)/2)`` for ``z < 0`` and
  ``log1p(−erfc(z/√2)/2)`` for ``z ≥ 0`` (each branch evaluated only on its side, so the branch
  not taken never puts an infinite derivative into the result).  Against SciPy's
  ``log_ndtr`` it agrees to a relative 1e-15 for ``z ≥ −37.6`` (``logcdf ≈ −713``); below,
  SciPy's ``erfc`` underflows to 0 and ``logcdf`` is ``-inf`` where ``log_ndtr`` stays finite
  (it uses an asymptotic series).  In the upper tail the value is ``−Φ(−z)`` to full relative
  accuracy until ``Φ(−z)`` underflows (``z ≳ 37.5``), where it is 0 (SciPy: ``−Φ(−z)``,
  below 1e-308).  ``logsf(z) = logcdf(−z)``, ``cdf`` and ``sf`` are ``erfc(∓z/√2)/2``.
* **Cholesky** follows :mod:`jacacc.tensor.numpy_linalg`: only the requested triangle of
  ``a`` is read, and the derivative is taken along symmetric directions (JAX's convention).
  ``scipy.linalg.cholesky`` and ``cho_factor`` return zeros in the other triangle; SciPy's
  ``cho_factor`` leaves arbitrary values (what ``a`` held) there — ``cho_solve`` reads only the
  factor's triangle, so either works with it.  ``multivariate_normal`` reads the lower
  triangle of ``cov`` (SciPy: its eigendecomposition; equal for a symmetric ``cov``);
  ``allow_singular=True`` is refused.
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
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jacacc.errors import TraceError, UnsupportedOperationError
from jacacc.tensor.library import _as_traced, _traced_inside, _xlogy, register_library
from jacacc.tensor.trace import _where

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


@functools.cache
def _standard_log_densities() -> dict[type, Callable[[Any], Any]]:
    import scipy.stats

    return {type(scipy.stats.norm): _norm, type(scipy.stats.expon): _expon, type(scipy.stats.laplace): _laplace,
            type(scipy.stats.logistic): _logistic, type(scipy.stats.cauchy): _cauchy,
            type(scipy.stats.uniform): _uniform}


def _location_scale(self: Any, method: str, x: Any, args: tuple[Any, ...], kwds: dict[str, Any]) -> tuple[Any, Any]:
    """``(z, scale)`` for a location-scale distribution's ``method``."""
    loc, scale = _bind(f"scipy.stats.{_distribution(self)}.{method}", ("loc", "scale"), (0.0, 1.0), args, kwds)
    return (_array(x) - loc) / scale, scale


def _continuous_logpdf(self: Any, x: Any, *args: Any, **kwds: Any) -> Any:
    log_density = _standard_log_densities().get(type(self))
    if log_density is None:
        raise _unsupported(f"scipy.stats.{_distribution(self)}.logpdf")
    z, scale = _location_scale(self, "logpdf", x, args, kwds)
    return log_density(z) - np.log(scale)


@register_library("scipy.stats:rv_continuous.logpdf")
def _logpdf(self: Any, x: Any, *args: Any, **kwds: Any) -> Any:
    return _continuous_logpdf(self, x, *args, **kwds)


@register_library("scipy.stats:rv_continuous.pdf")
def _pdf(self: Any, x: Any, *args: Any, **kwds: Any) -> Any:
    if type(self) not in _standard_log_densities():
        raise _unsupported(f"scipy.stats.{_distribution(self)}.pdf")
    return np.exp(_continuous_logpdf(self, x, *args, **kwds))


# ---------------------------------------------------------------------------- the normal's cdf and sf
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


def _norm_only(self: Any, method: str) -> None:
    import scipy.stats

    if type(self) is not type(scipy.stats.norm):
        raise _unsupported(f"scipy.stats.{_distribution(self)}.{method}", "of the cdf family only norm's is")


def _norm_tail(method: str, of_z: Callable[[Any], Any]) -> Callable[..., Any]:
    def implementation(self: Any, x: Any, *args: Any, **kwds: Any) -> Any:
        _norm_only(self, method)
        z, _ = _location_scale(self, method, x, args, kwds)
        return of_z(z)

    implementation.__name__ = implementation.__qualname__ = f"_{method}"
    return implementation


register_library("scipy.stats:rv_continuous.logcdf")(_norm_tail("logcdf", _log_ndtr))
register_library("scipy.stats:rv_continuous.logsf")(_norm_tail("logsf", lambda z: _log_ndtr(-z)))
register_library("scipy.stats:rv_continuous.cdf")(_norm_tail("cdf", lambda z: 0.5 * _erfc(-_SQRT_HALF * z)))
register_library("scipy.stats:rv_continuous.sf")(_norm_tail("sf", lambda z: 0.5 * _erfc(_SQRT_HALF * z)))


def _refused_method(kind: str, method: str) -> Callable[..., Any]:
    def refuse(self: Any, *args: Any, **kwds: Any) -> Any:
        raise _unsupported(f"scipy.stats.{_distribution(self)}.{method}")

    refuse.__name__ = refuse.__qualname__ = f"_refused_{kind}_{method}"
    return refuse


for _method in ("ppf", "isf"):
    register_library(f"scipy.stats:rv_continuous.{_method}")(_refused_method("continuous", _method))
for _method in ("cdf", "logcdf", "sf", "logsf", "ppf", "isf"):
    register_library(f"scipy.stats:rv_discrete.{_method}")(_refused_method("discrete", _method))


# ---------------------------------------------------------------------------- poisson
def _discrete_logpmf(self: Any, method: str, k: Any, args: tuple[Any, ...], kwds: dict[str, Any]) -> Any:
    import scipy.special
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
    k = np.asarray(k, dtype=float) - np.asarray(loc, dtype=float)
    # a constant per entry: −log k! on the support, −inf off it (a negative or non-integer k), as SciPy
    on_support = (k >= 0) & (k == np.floor(k))
    safe_k = np.where(on_support, k, 0.0)
    constant = np.where(on_support, -scipy.special.gammaln(safe_k + 1.0), -np.inf)
    return _xlogy(safe_k, mu) - mu + constant


@register_library("scipy.stats:rv_discrete.logpmf")
def _logpmf(self: Any, k: Any, *args: Any, **kwds: Any) -> Any:
    return _discrete_logpmf(self, "logpmf", k, args, kwds)


@register_library("scipy.stats:rv_discrete.pmf")
def _pmf(self: Any, k: Any, *args: Any, **kwds: Any) -> Any:
    return np.exp(_discrete_logpmf(self, "pmf", k, args, kwds))


# ---------------------------------------------------------------------------- multivariate normal
def _mvn_logpdf(name: str, x: Any, mean: Any, cov: Any) -> Any:
    from jacacc import linalg

    x, cov = _array(x), _array(cov)
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
    mean = np.zeros(dim) if mean is None else np.reshape(mean, (dim,))
    # SciPy's quantiles: the last axis holds the components, except that a vector is n points
    # when the dimension is 1
    if x.ndim == 0 or (x.ndim == 1 and dim == 1):
        x = np.reshape(x, (-1, 1) if x.ndim else (1, 1))
    if x.shape[-1] != dim:
        raise TraceError(f"{name}: x of shape {x.shape} does not have {dim} components on its last axis")
    batch = tuple(x.shape[:-1])
    points = np.reshape(x, (math.prod(batch), dim)) - mean
    factor = np.linalg.cholesky(cov)                          # L with cov = L Lᵀ (lower triangle read)
    whitened = linalg.trsm(factor, points.T)                  # L⁻¹ (x − μ), one column per point
    mahalanobis = np.sum(whitened * whitened, axis=0)
    log_density = -0.5 * (mahalanobis + dim * _LOG_2PI) - linalg.sumlogdiag(factor)   # ½ log det = Σ log Lᵢᵢ
    return _squeezed(np.reshape(log_density, batch))


def _mvn_arguments(name: str, mean: Any, cov: Any, allow_singular: Any, kwargs: dict[str, Any]) -> None:
    if allow_singular:
        raise _unsupported(f"{name} with allow_singular=True")
    if kwargs:
        raise _unsupported(f"{name} with {', '.join(kwargs)}")


@register_library("scipy.stats._multivariate:multivariate_normal_gen.logpdf")
def _mvn_gen_logpdf(self: Any, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False,
                    **kwargs: Any) -> Any:
    name = "scipy.stats.multivariate_normal.logpdf"
    _mvn_arguments(name, mean, cov, allow_singular, kwargs)
    return _mvn_logpdf(name, x, mean, cov)


@register_library("scipy.stats._multivariate:multivariate_normal_gen.pdf")
def _mvn_gen_pdf(self: Any, x: Any, mean: Any = None, cov: Any = 1, allow_singular: bool = False,
                 **kwargs: Any) -> Any:
    name = "scipy.stats.multivariate_normal.pdf"
    _mvn_arguments(name, mean, cov, allow_singular, kwargs)
    return np.exp(_mvn_logpdf(name, x, mean, cov))


def _frozen_mvn(self: Any, method: str, x: Any) -> Any:
    name = f"scipy.stats.multivariate_normal(mean, cov).{method}"
    if np.any(self.cov_object.rank < self.dim):
        raise _unsupported(f"{name} with a singular cov")
    return _mvn_logpdf(name, x, self.mean, self.cov_object.covariance)


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


for _method in ("cdf", "logcdf"):
    register_library(f"scipy.stats._multivariate:multivariate_normal_gen.{_method}")(
        _refused_method("multivariate_normal", _method))


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
    from jacacc import linalg

    return linalg.potrf(_matrix(name, a, batch=True), lower=_flag(name, "lower", lower))


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
