"""SciPy's distributions and Cholesky/triangular solves traced by name (jacacc/tensor/scipy_functions.py).

Each case is an array-valued function of a parameter vector written with SciPy and with
``jax.scipy``: its traced value against SciPy's own on plain arrays (rtol 1e-12), and the
gradient and Hessian of a weighted sum of it against JAX's in forward, reverse and
cross-country mode (rtol 1e-10) — the distributions with shape parameters, the cdf family and
``allow_singular`` in one mode each in `make test` (rotating), in the other two under the
``exhaustive`` marker.  Then frozen distributions, the class-method places of
``register_library``, and each refusal's one-line message.
"""

from __future__ import annotations

import functools
import types

import jax_reference
import numpy as np
import pytest
import scipy.linalg
import scipy.special
import scipy.stats
from scipy.linalg import cho_solve as cho_solve_by_name

import jacacc.tensor as jt
import jacacc.tensor.scipy_functions  # noqa: F401 - registers the functions (until jacacc.tensor imports it)
from jacacc.errors import UnsupportedOperationError
from jacacc.tensor import library

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)
jstats = pytest.importorskip("jax.scipy.stats")
jlinalg = pytest.importorskip("jax.scipy.linalg")

MODES = ("forward", "reverse", "cross_country")
THETA = np.array([0.3, -0.2, 0.7, 0.5, -0.4, 0.1])


def _weights(shape):
    """Distinct weights, so that a wrong entry cannot hide in a symmetric sum."""
    size = int(np.prod(shape, dtype=int))
    return np.linspace(0.5, 1.5, size).reshape(shape) if size > 1 else np.ones(shape)


def _jax_derivatives(g, theta):
    """JAX's gradient and Hessian of ``g``, jitted as one function (one compilation, not two)."""
    grad, hess = jax_reference.jit(lambda t: (jax.grad(g)(t), jax.hessian(g)(t)))(theta)
    return np.asarray(grad), np.asarray(hess)


def _check(h, h_jax, theta=THETA, modes=MODES):
    """``h(θ)`` traced against SciPy's value; ``Σ W·h`` differentiated against JAX in ``modes`` (every mode)."""
    expected = np.asarray(h(theta))                          # plain arrays: SciPy itself
    value, _ = jt.vjp(h, theta)
    np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-300)
    W = _weights(expected.shape)

    def f(t):
        return np.sum(h(t) * W)

    def g(t):
        return jnp.sum(h_jax(t) * W)

    grad, hess = _jax_derivatives(g, theta)
    assert np.all(np.isfinite(grad)) and np.abs(grad).max() > 1e-3 and np.abs(hess).max() > 1e-3
    for mode in modes:
        np.testing.assert_allclose(jt.grad(f, mode=mode)(theta), grad, rtol=1e-10, atol=1e-13, err_msg=mode)
        np.testing.assert_allclose(jt.hessian(f, mode=mode)(theta), hess, rtol=1e-10, atol=1e-13, err_msg=mode)


def _rotated(names):
    """One mode per name in make test, the modes rotating across the names; the other two under the
    exhaustive marker."""
    return [pytest.param(name, mode, marks=() if j == k % 3 else pytest.mark.exhaustive, id=f"{name}-{mode}")
            for k, name in enumerate(names) for j, mode in enumerate(MODES)]


# ---------------------------------------------------------------------------- univariate densities
DATA = np.array([-1.0, 0.5, 2.8])        # x − loc of either sign
POSITIVE = np.array([0.4, 1.5, 2.8])     # within expon's and uniform's support


def _location_scale(data):
    """x, loc and scale all traced: x = data + θ[:3], loc = θ[3] − 0.5, scale = 4 + θ[4]²."""
    return lambda t: (data + t[:3], t[3] - 0.5, 4.0 + t[4] ** 2)


DISTRIBUTIONS = {"norm": DATA, "expon": POSITIVE, "laplace": DATA, "logistic": DATA, "cauchy": DATA,
                 "uniform": POSITIVE}


def test_logpdf():
    # the six side by side, one row each (one JAX compilation rather than six); uniform's row,
    # −log(scale) on its support, depends on the scale alone
    def h(t, np_=np):
        stats = jstats if np_ is jnp else scipy.stats
        return np_.stack([getattr(stats, name).logpdf(*_location_scale(data)(t)) for name, data in DISTRIBUTIONS.items()])

    _check(h, lambda t: h(t, jnp))


def test_off_the_support():
    x = np.array([-0.5, 0.0, 0.5, 1.0, 1.5])
    h = lambda x: np.stack([scipy.stats.expon.logpdf(x), scipy.stats.uniform.logpdf(x),   # noqa: E731
                            scipy.stats.uniform.pdf(x, loc=-1, scale=2), scipy.stats.expon.pdf(x, scale=0.5)])
    value, _ = jt.vjp(h, x)
    np.testing.assert_array_equal(np.isinf(value), np.isinf(h(x)))   # −inf off the support (boundaries in)
    np.testing.assert_allclose(value, h(x), rtol=1e-12)
    # the derivative is 0 off the support (expon: −1 on it; uniform: 0 everywhere)
    np.testing.assert_array_equal(jt.grad(lambda x: np.sum(h(x)[::2]))(x), [0.0, -1.0, -1.0, -1.0, -1.0])


def test_pdf_and_keywords():
    parts = _location_scale(DATA)

    def h(t):
        x, loc, scale = parts(t)
        return scipy.stats.norm.pdf(x, loc=loc, scale=scale) + scipy.stats.logistic.pdf(x, loc, scale=scale) \
            + scipy.stats.cauchy.pdf(x, scale=scale) + scipy.stats.laplace.logpdf(x, loc=1.5)

    def h_jax(t):
        x, loc, scale = parts(t)
        return jstats.norm.pdf(x, loc, scale) + jstats.logistic.pdf(x, loc, scale) \
            + jstats.cauchy.pdf(x, 0.0, scale) + jstats.laplace.logpdf(x, 1.5)

    _check(h, h_jax)


def test_norm_cdf_family():
    # z from −6 to 7: both branches of log Φ, far enough out that 1 − Φ would lose digits
    spread = np.array([-6.0, -1.5, 0.2, 7.0])

    def parts(t):
        return spread + t[:4], t[4], 1.0 + t[5] ** 2

    _check(lambda t: np.stack([scipy.stats.norm.logcdf(*parts(t)), scipy.stats.norm.cdf(*parts(t)),
                               scipy.stats.norm.logsf(*parts(t)), scipy.stats.norm.sf(*parts(t))]),
           lambda t: jnp.stack([jstats.norm.logcdf(*parts(t)), jstats.norm.cdf(*parts(t)),
                                jstats.norm.logsf(*parts(t)), jstats.norm.sf(*parts(t))]))


def test_logcdf_tail_matches_log_ndtr_to_37_sigma():
    z = np.array([-37.0, -30.0, -12.0, 10.0, 30.0])
    value, _ = jt.vjp(lambda x: scipy.stats.norm.logcdf(x), z)
    np.testing.assert_allclose(value, scipy.special.log_ndtr(z), rtol=1e-14)
    # d log Φ/dz = φ(z)/Φ(z) ≈ −z − 1/z for z ≪ 0 (Mills' ratio); ≈ φ(z) for z ≫ 0
    gradient = jt.grad(lambda x: np.sum(scipy.stats.norm.logcdf(x)))(z)
    np.testing.assert_allclose(gradient[:2], -z[:2] - 1 / z[:2] + 2 / z[:2] ** 3, rtol=1e-5)
    np.testing.assert_allclose(gradient[3:], scipy.stats.norm.pdf(z[3:]), rtol=1e-10)


# ---------------------------------------------------------------------------- distributions with shape parameters
# beta, chi2, gamma and t (their shape parameters, x, loc and scale all traced), the cdf family of every
# distribution whose log density is traced, and poisson's in μ.  In make test each case in one mode (the
# modes rotate) against mpmath's derivatives of the same formulas (20 digits; the values are checked
# against SciPy's, so the formulas are SciPy's functions): JAX compiles these Hessians for seconds.  Under
# `exhaustive`, every case in the other two modes and against JAX in all three.
def _mp():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 20
    return mpmath


def _shape_parts(t):
    """x, y, u = [0.25, 0.5, 0.7] + θ[:3]/10 (z in (0, 1): beta's support), loc, scale, and shapes a, b."""
    return [0.25 + 0.1 * t[0], 0.5 + 0.1 * t[1], 0.7 + 0.1 * t[2]], 0.1 * t[3], 1.2 + t[4] ** 2, 1.5 + t[5] ** 2, 2.0 + t[0]


def _densities(t, xp=np):
    """Eight log densities and densities of beta, chi2, gamma, t: ``xp`` is NumPy (SciPy), jax.numpy or mpmath."""
    (x, y, u), loc, scale, a, b = _shape_parts(t)
    stats = scipy.stats if xp is np else jstats if xp is jnp else _MpStats
    rows = [stats.beta.logpdf(x, a, b, loc, scale), stats.beta.pdf(y, b, a, loc=loc, scale=scale),
            stats.chi2.logpdf(u, 2 * a, loc, scale), stats.chi2.pdf(3 * x, b, scale=scale),
            stats.gamma.logpdf(y, a, loc, scale), stats.gamma.pdf(3 * u, b, loc=loc),
            stats.t.logpdf(x - 0.5, b, loc, scale), stats.t.pdf(3 * y, a, loc=loc, scale=scale)]
    return rows if xp is _MP else xp.stack(rows)


#: constant shape parameters of the cdf family (a derivative in them has no closed form)
CDF_SHAPES = {"beta": (2.0, 3.5), "chi2": (3.0,), "gamma": (1.7,), "t": (4.5,)}
TAILS = ("cdf", "logcdf", "sf", "logsf")


def _shape_tails(t, xp=np):
    """The cdf family of beta, chi2, gamma and t at one point each, x, loc and scale traced."""
    x, loc, scale = 0.45 + 0.1 * t[0], 0.1 * t[3], 1.2 + t[4] ** 2
    stats = scipy.stats if xp is np else _JaxTails if xp is jnp else _MpStats
    rows = [getattr(getattr(stats, name), method)(x * {"beta": 1.0, "t": 4.0}.get(name, 3.0) - (name == "t") * 1.5,
                                                  *shapes, loc, scale)
            for name, shapes in CDF_SHAPES.items() for method in TAILS]
    return rows if xp is _MP else xp.stack(rows)


#: the distributions without shape parameters, with the methods JAX has
STANDARD_TAILS = {"expon": TAILS, "cauchy": TAILS, "laplace": ("cdf",), "logistic": ("cdf", "sf"),
                  "uniform": ("cdf",)}


def _standard_tails(t, xp=np):
    x, loc, scale = 1.3 + 0.1 * t[1], -0.2 + 0.1 * t[3], 1.2 + t[4] ** 2
    stats = scipy.stats if xp is np else jstats if xp is jnp else _MpStats
    rows = [getattr(getattr(stats, name), method)(x, loc=loc, scale=scale * (2.0 if name == "uniform" else 1.0))
            for name, methods in STANDARD_TAILS.items() for method in methods]
    return rows if xp is _MP else xp.stack(rows)


COUNTS_DATA = np.array([0.0, 2.0, 3.7, 9.0])     # a non-integer count: the cdf at its floor


def _poisson_tails(t, xp=np):
    if xp is _MP:
        mu = [_MP.exp(v) for v in t[:4]]
        k = [int(np.floor(c)) + 1 for c in COUNTS_DATA]
        cdf = [_MP.gammainc(kk, m, _MP.inf, regularized=True) for kk, m in zip(k, mu, strict=True)]
        sf = [_MP.gammainc(kk, 0, m, regularized=True) for kk, m in zip(k, mu, strict=True)]
        return cdf + [_MP.log(c) for c in cdf] + sf + [_MP.log(c) for c in sf]
    mu = xp.exp(t[:4])
    if xp is jnp:     # JAX has poisson's cdf alone: its sf is P(⌊k⌋ + 1, μ)
        from jax.scipy.special import gammainc

        cdf, sf = jstats.poisson.cdf(COUNTS_DATA, mu), gammainc(np.floor(COUNTS_DATA) + 1, mu)
        return xp.stack([cdf, xp.log(cdf), sf, xp.log(sf)])
    return xp.stack([getattr(scipy.stats.poisson, m)(COUNTS_DATA, mu) for m in TAILS])


#: each case's function of θ, and the entries of θ it reads (mpmath differentiates in those alone)
SHAPE_CASES = {"poisson_tails": _poisson_tails, "densities": _densities, "shape_tails": _shape_tails,
               "standard_tails": _standard_tails}
READS = {"densities": range(6), "shape_tails": (0, 3, 4), "standard_tails": (1, 3, 4), "poisson_tails": range(4)}


# ---- mpmath's spelling of the distributions (scalars)
#: mpmath's functions these spellings use (filled on first use: mpmath is an optional dependency)
_MP = types.SimpleNamespace()


class _MpDistribution:
    """One distribution in mpmath: its log density, cdf and sf of z and the shape parameters, called
    with SciPy's signature (``x`` a scalar or a list of them)."""

    def __init__(self, log_density, cdf=None, sf=None):
        self.log_density, self.cdf_of_z, self.sf_of_z = log_density, cdf, sf
        self.n_shapes = log_density.__code__.co_argcount - 1

    def _call(self, x, args, loc, scale, of_z):
        shapes, rest = args[:self.n_shapes], list(args[self.n_shapes:])
        loc, scale = (rest + [loc, scale][len(rest):])[:2]
        return [of_z((v - loc) / scale, shapes, scale) for v in x] if isinstance(x, list) else \
            of_z((x - loc) / scale, shapes, scale)

    def logpdf(self, x, *args, loc=0.0, scale=1.0):
        return self._call(x, args, loc, scale, lambda z, shapes, s: self.log_density(z, *shapes) - _MP.log(s))

    def pdf(self, x, *args, loc=0.0, scale=1.0):
        return self._call(x, args, loc, scale, lambda z, shapes, s: _MP.exp(self.log_density(z, *shapes)) / s)

    def tail(self, method, x, args, loc, scale):
        of = self.cdf_of_z if method in ("cdf", "logcdf") else self.sf_of_z
        value = self._call(x, args, loc, scale, lambda z, shapes, s: of(z, *shapes))
        return _MP.log(value) if method.startswith("log") else value


for _method in TAILS:
    setattr(_MpDistribution, _method, lambda self, x, *args, loc=0.0, scale=1.0, _m=_method:
            self.tail(_m, x, args, loc, scale))


def _mp_distributions():
    mp = _MP
    lg = mp.loggamma

    def reg(f):
        return lambda *args: f(*args, regularized=True)

    def t_lower(z, df):      # ½·I_{ν/(ν + z²)}(ν/2, ½): the tail beyond |z|
        return reg(mp.betainc)(df / 2, mp.mpf(0.5), 0, df / (df + z * z)) / 2

    return {
        "beta": _MpDistribution(lambda z, a, b: (a - 1) * mp.log(z) + (b - 1) * mp.log(1 - z) - lg(a) - lg(b) + lg(a + b),
                                lambda z, a, b: reg(mp.betainc)(a, b, 0, z), lambda z, a, b: reg(mp.betainc)(a, b, z, 1)),
        "chi2": _MpDistribution(lambda z, df: (df / 2 - 1) * mp.log(z) - z / 2 - lg(df / 2) - df / 2 * mp.log(2),
                                lambda z, df: reg(mp.gammainc)(df / 2, 0, z / 2),
                                lambda z, df: reg(mp.gammainc)(df / 2, z / 2, mp.inf)),
        "gamma": _MpDistribution(lambda z, a: (a - 1) * mp.log(z) - z - lg(a), lambda z, a: reg(mp.gammainc)(a, 0, z),
                                 lambda z, a: reg(mp.gammainc)(a, z, mp.inf)),
        "t": _MpDistribution(lambda z, df: lg((df + 1) / 2) - lg(df / 2) - mp.log(df * mp.pi) / 2
                             - (df + 1) / 2 * mp.log(1 + z * z / df),
                             lambda z, df: t_lower(z, df) if z < 0 else 1 - t_lower(z, df),
                             lambda z, df: 1 - t_lower(z, df) if z < 0 else t_lower(z, df)),
        "expon": _MpDistribution(lambda z: -z, lambda z: 1 - mp.exp(-z), lambda z: mp.exp(-z)),
        "cauchy": _MpDistribution(lambda z: -mp.log(mp.pi * (1 + z * z)), lambda z: 0.5 + mp.atan(z) / mp.pi,
                                  lambda z: 0.5 - mp.atan(z) / mp.pi),
        "laplace": _MpDistribution(lambda z: -abs(z) - mp.log(2),
                                   lambda z: mp.exp(z) / 2 if z < 0 else 1 - mp.exp(-z) / 2),
        "logistic": _MpDistribution(lambda z: -z - 2 * mp.log(1 + mp.exp(-z)), lambda z: 1 / (1 + mp.exp(-z)),
                                    lambda z: 1 / (1 + mp.exp(z))),
        "uniform": _MpDistribution(lambda z: mp.mpf(0), lambda z: z),
    }


class _MpStats:
    """``scipy.stats``' spelling for mpmath scalars (filled on first use)."""


class _JaxTails:
    """jax.scipy.stats' cdf family, with t's (JAX has only its densities) from betainc."""

    beta, chi2, gamma = jstats.beta, jstats.chi2, jstats.gamma

    class t:  # noqa: N801 - scipy.stats' name
        pass


def _jax_t_tail(method):
    def tail(x, df, loc=0.0, scale=1.0):
        from jax.scipy.special import betainc

        z = (x - loc) / scale
        lower = 0.5 * betainc(df / 2, 0.5, df / (df + z * z))
        value = jnp.where(z < 0, lower, 1 - lower) if method in ("cdf", "logcdf") else jnp.where(z < 0, 1 - lower, lower)
        return jnp.log(value) if method.startswith("log") else value

    return staticmethod(tail)


for _method in TAILS:
    setattr(_JaxTails.t, _method, _jax_t_tail(_method))
del _method


@functools.cache
def _mpmath_reference(case):
    """Σ W·h(θ)'s gradient and Hessian at THETA, h spelled in mpmath (its numerical derivatives)."""
    mp = _mp()
    if not hasattr(_MP, "mpf"):
        for name in ("mpf", "log", "exp", "gammainc", "betainc", "loggamma", "inf", "pi", "atan"):
            setattr(_MP, name, getattr(mp, name))
        for name, distribution in _mp_distributions().items():
            setattr(_MpStats, name, distribution)
    h = SHAPE_CASES[case]
    weights = _weights(np.shape(h(THETA))).ravel()

    def f(*t):
        rows = h(list(t), _MP)
        flat = [v for row in rows for v in (row if isinstance(row, list) else [row])]
        return sum(w * v for w, v in zip(weights, flat, strict=True))

    n, reads = THETA.size, list(READS[case])
    unit = lambda *ks: tuple(sum(k == i for k in ks) for i in range(n))   # noqa: E731
    grad, hess = np.zeros(n), np.zeros((n, n))
    for i in reads:
        grad[i] = float(mp.diff(f, THETA.tolist(), unit(i)))
        for j in reads[reads.index(i):]:
            hess[i, j] = hess[j, i] = float(mp.diff(f, THETA.tolist(), unit(i, j)))
    return grad, hess


@pytest.mark.parametrize(("case", "mode"), _rotated(SHAPE_CASES))
def test_distributions_with_shapes_and_tails(case, mode):
    h = SHAPE_CASES[case]
    value, _ = jt.vjp(h, THETA)
    np.testing.assert_allclose(value, h(THETA), rtol=1e-13, atol=1e-300)     # SciPy's own values
    W = _weights(value.shape)
    f = lambda t: np.sum(h(t) * W)    # noqa: E731
    grad, hess = _mpmath_reference(case)
    np.testing.assert_allclose(jt.grad(f, mode=mode)(THETA), grad, rtol=1e-10, atol=1e-13, err_msg=mode)
    np.testing.assert_allclose(jt.hessian(f, mode=mode)(THETA), hess, rtol=1e-9, atol=1e-12, err_msg=mode)


@pytest.mark.exhaustive
@pytest.mark.parametrize("case", list(SHAPE_CASES))
def test_distributions_with_shapes_and_tails_against_jax(case):
    h = SHAPE_CASES[case]
    _check(h, lambda t: h(t, jnp))


def test_shape_distributions_off_the_support_and_at_zero():
    x = np.array([-0.5, 0.0, 0.5, 1.0, 1.5])
    h = lambda x: np.stack([scipy.stats.beta.logpdf(x, 2.0, 3.0), scipy.stats.gamma.logpdf(x, 1.0),   # noqa: E731
                            scipy.stats.chi2.logpdf(x, 2), scipy.stats.beta.cdf(x, 2.0, 3.0)])
    exponentials = lambda x: scipy.stats.gamma.logpdf(x, 1.0) + 2 * scipy.stats.chi2.logpdf(x, 2)   # noqa: E731
    with np.errstate(divide="ignore", invalid="ignore"):
        value, _ = jt.vjp(h, x)
        np.testing.assert_array_equal(value, h(x))
        # gamma(1) and chi2(2) are exponentials: smooth at 0 (log z is not read where a − 1 = 0), −inf below
        np.testing.assert_array_equal(jt.grad(lambda x: np.sum(exponentials(x)))(x), [0.0, -2.0, -2.0, -2.0, -2.0])
        assert np.all(jt.hessian(lambda x: np.sum(exponentials(x)))(x) == 0.0)
        # beta: derivative 0 off [0, 1], where its cdf is constant too
        np.testing.assert_array_equal(jt.grad(lambda x: np.sum(scipy.stats.beta.logpdf(x, 2.0, 3.0)))(x)[[0, 4]],
                                      [0.0, 0.0])
        np.testing.assert_array_equal(jt.grad(lambda x: np.sum(scipy.stats.beta.cdf(x, 2.0, 3.0)))(x)[[0, 4]],
                                      [0.0, 0.0])
        # a shape parameter off its domain: NaN, as SciPy
        value, _ = jt.vjp(lambda a: scipy.stats.gamma.logpdf(0.5, a), np.array([0.3, -1.0]))
    np.testing.assert_array_equal(np.isnan(value), [False, True])


# ---------------------------------------------------------------------------- poisson
COUNTS = np.array([0, 1, 3, 7])


def test_poisson():
    _check(lambda t: scipy.stats.poisson.logpmf(COUNTS, np.exp(t[:4])) + scipy.stats.poisson.pmf(COUNTS, mu=1 + t[:4] ** 2),
           lambda t: jstats.poisson.logpmf(COUNTS, jnp.exp(t[:4])) + jstats.poisson.pmf(COUNTS, 1 + t[:4] ** 2))


def test_poisson_counts_as_an_argument_and_off_support():
    mu = np.array([0.5, 2.0, 3.0, 1.0])
    f = lambda m, k: np.sum(scipy.stats.poisson.logpmf(k, m, loc=1)[1:])   # noqa: E731 - the first term left out
    np.testing.assert_allclose(jt.grad(f)(mu, COUNTS + 1), [0.0, 1 / 2 - 1, 3 / 3 - 1, 7 / 1 - 1])  # k/μ − 1
    value, _ = jt.vjp(lambda m: scipy.stats.poisson.logpmf(np.array([-1, 2.5, 2]), m), mu[:3])
    np.testing.assert_allclose(value, scipy.stats.poisson.logpmf([-1, 2.5, 2], mu[:3]), rtol=1e-12)
    assert value[0] == value[1] == -np.inf


# ---------------------------------------------------------------------------- multivariate normal
POINTS = np.array([[0.3, -1.0], [1.2, 0.4], [-0.5, 0.8]])


def _gaussian(t, np_):
    M = np_.reshape(t[:4], (2, 2))
    return t[4:6], M @ M.T + np_.eye(2)


def test_multivariate_normal():
    def h(t, np_=np):
        # looked up at each call, as in test_solve_triangular; x of shape (n, k) and (k,) (a scalar result)
        mvn = jstats.multivariate_normal if np_ is jnp else scipy.stats.multivariate_normal
        mean, cov = _gaussian(t, np_)
        fixed = np_.array([[2.0, 0.3], [0.3, 1.0]])
        return np_.concatenate([mvn.logpdf(POINTS + t[:2], mean, cov), np_.reshape(mvn.logpdf(POINTS[0], mean, cov), (1,)),
                                mvn.pdf(POINTS, np_.zeros(2), cov) if np_ is jnp else mvn.pdf(POINTS, cov=cov),
                                mvn.logpdf(POINTS * t[5], mean=POINTS[1], cov=fixed)])

    _check(h, lambda t: h(t, jnp))


def _singular_cov():
    """A rank-2 covariance in four dimensions, A Aᵀ, its support the column space of A."""
    factor = np.array([[1.0, 0.3], [0.2, -0.8], [0.5, 0.5], [-0.4, 1.1]])
    return factor, factor @ factor.T


SINGULAR_POINTS = np.array([[0.3, -0.5], [1.2, 0.4], [-0.7, 0.9]])   # coefficients of three points of the support
SIGNS = np.array([1.0, -1.0])


def _singular_density(t, xp=np):
    """x = A(P + θ[4:6]) and mean = A(θ[:2] ⊙ (1, −1)), both traced and on the support: the log densities
    of the three points and the density of the first, SciPy's (``xp`` NumPy) or the rank-2 normal's
    −½(2·log 2π + log det(AᵀA) + (x − μ)ᵀ cov⁺ (x − μ)) in JAX."""
    factor, cov = _singular_cov()
    mean = factor @ (t[:2] * SIGNS)
    x = (SINGULAR_POINTS + t[4:6]) @ factor.T
    if xp is jnp:
        dev = x - mean
        log_density = -0.5 * (2 * np.log(2 * np.pi) + np.log(np.linalg.det(factor.T @ factor))
                              + jnp.sum((dev @ np.linalg.pinv(cov)) * dev, axis=-1))
        return jnp.concatenate([log_density, jnp.exp(log_density[:1])])
    mvn = scipy.stats.multivariate_normal
    return np.concatenate([mvn.logpdf(x, mean, cov, allow_singular=True),
                           np.reshape(mvn.pdf(x[0], mean=mean, cov=cov, allow_singular=True), (1,))])


def _singular_derivatives():
    """The gradient and Hessian of Σ W·h for :func:`_singular_density` in closed form: x − μ = A u with
    u = P + θ[4:6] − θ[:2] ⊙ (1, −1), and Aᵀ(AAᵀ)⁺A = I, so each log density is c − |u|²/2."""
    factor, _ = _singular_cov()
    u = SINGULAR_POINTS + THETA[4:6] - THETA[:2] * SIGNS
    jacobian = np.zeros((2, 6))
    jacobian[:, :2], jacobian[:, 4:] = -np.diag(SIGNS), np.eye(2)          # ∂u/∂θ, the same for every point
    *w, w_pdf = _weights((4,))
    density = np.exp(-0.5 * (2 * np.log(2 * np.pi) + np.log(np.linalg.det(factor.T @ factor)) + u[0] @ u[0]))
    du = -(np.asarray(w)[:, None] * u).sum(axis=0) - w_pdf * density * u[0]
    d2u = -sum(w) * np.eye(2) + w_pdf * density * (np.outer(u[0], u[0]) - np.eye(2))
    return jacobian.T @ du, jacobian.T @ d2u @ jacobian


@pytest.mark.parametrize("mode", [pytest.param(m, marks=() if m == "reverse" else pytest.mark.exhaustive) for m in MODES])
def test_multivariate_normal_allow_singular(mode):
    """SciPy's pseudo-inverse density of a constant singular cov, traced in x and mean on the support."""
    value, _ = jt.vjp(_singular_density, THETA)
    np.testing.assert_allclose(value, _singular_density(THETA), rtol=1e-12)
    f = lambda t: np.sum(_singular_density(t) * _weights((4,)))    # noqa: E731
    grad, hess = _singular_derivatives()
    np.testing.assert_allclose(jt.grad(f, mode=mode)(THETA), grad, rtol=1e-10, atol=1e-13, err_msg=mode)
    np.testing.assert_allclose(jt.hessian(f, mode=mode)(THETA), hess, rtol=1e-10, atol=1e-13, err_msg=mode)


@pytest.mark.exhaustive
def test_multivariate_normal_allow_singular_against_jax():
    _check(_singular_density, lambda t: _singular_density(t, jnp))


def test_multivariate_normal_allow_singular_off_the_support_and_frozen():
    factor, cov = _singular_cov()
    null = np.linalg.svd(factor.T)[2][-1]                       # a direction off the support
    x = np.stack([factor @ np.array([0.4, -0.3]), factor @ np.array([0.4, -0.3]) + 1e-3 * null])
    f = lambda x: scipy.stats.multivariate_normal.logpdf(x, cov=cov, allow_singular=True)   # noqa: E731
    value, _ = jt.vjp(f, x)
    np.testing.assert_allclose(value, f(x), rtol=1e-12)
    assert np.isfinite(value[0]) and value[1] == -np.inf
    assert np.all(jt.grad(lambda x: f(x)[1])(x) == 0.0)
    frozen = scipy.stats.multivariate_normal(np.zeros(4), cov, allow_singular=True)
    np.testing.assert_allclose(jt.grad(lambda x: frozen.logpdf(x))(x[0]), -np.linalg.pinv(cov) @ x[0], rtol=1e-10)


# ---------------------------------------------------------------------------- scipy.linalg
RHS = np.array([[1.0, -0.5], [0.3, 2.0], [-1.2, 0.7]])


def _spd(t, np_):
    M = np_.reshape(t[:6], (2, 3))
    return np_.eye(3) * 2.0 + M.T @ M


def _general(t, np_):
    """A full matrix: the triangle not named must not be read (nor differentiated)."""
    return np_.reshape(np_.concatenate([t, t[::-1] * 0.5, t[:3] ** 2]), (3, 5))[:, :3] + 3.0 * np_.eye(3)


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_and_cho_solve(lower):
    def h(t):
        A = _spd(t, np)
        return np.concatenate([scipy.linalg.cholesky(A, lower=lower).ravel(),
                               scipy.linalg.cho_solve(scipy.linalg.cho_factor(A, lower=lower), RHS + t[0]).ravel(),
                               cho_solve_by_name(scipy.linalg.cho_factor(A, lower), RHS[:, 0] * t[1])])

    def h_jax(t):
        A = _spd(t, jnp)
        return jnp.concatenate([jlinalg.cholesky(A, lower=lower).ravel(),
                                jlinalg.cho_solve(jlinalg.cho_factor(A, lower=lower), RHS + t[0]).ravel(),
                                jlinalg.cho_solve(jlinalg.cho_factor(A, lower), RHS[:, 0] * t[1])])

    _check(h, h_jax)


def test_cho_factor_value_and_constant_factor():
    A = _spd(THETA, np)
    for lower in (True, False):
        c, flag = jt.vjp(lambda a, lower=lower: scipy.linalg.cho_factor(a, lower=lower)[0], A)[0], lower
        triangle = np.tril if flag else np.triu
        np.testing.assert_allclose(triangle(c), triangle(scipy.linalg.cho_factor(A, lower=lower)[0]), rtol=1e-12)
        assert np.all(c == triangle(c))    # zeros in the other triangle
    # SciPy's own factor, garbage triangle and all, with a traced right-hand side
    factor = scipy.linalg.cho_factor(A)
    np.testing.assert_allclose(jt.grad(lambda b: np.sum(scipy.linalg.cho_solve(factor, b)))(RHS[:, 0]),
                               np.linalg.solve(A, np.ones(3)), rtol=1e-12)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_solve_triangular(lower, unit_diagonal):
    def h(t, np_=np):
        # looked up at each call (a default argument would keep the function the trace cannot swap)
        solve = jlinalg.solve_triangular if np_ is jnp else scipy.linalg.solve_triangular
        # trans 0, 'T' and 2 ('C', the same as 'T' for real matrices) side by side
        return np_.stack([solve(_general(t, np_), RHS * t[2], trans=trans, lower=lower, unit_diagonal=unit_diagonal)
                          for trans in (0, "T", 2)])

    _check(h, lambda t: h(t, jnp))


def test_solve_triangular_vector_and_constant_matrix():
    T = _general(THETA, np)
    _check(lambda t: scipy.linalg.solve_triangular(T, (RHS[:, 1] + t[:3]) ** 2, lower=True, check_finite=False),
           lambda t: jlinalg.solve_triangular(T, (RHS[:, 1] + t[:3]) ** 2, lower=True))


# ---------------------------------------------------------------------------- frozen distributions
def test_frozen_distributions():
    x = np.array([-0.4, 0.9, 2.1])

    def f(t):
        frozen = scipy.stats.norm(t[0], scale=1 + t[1] ** 2)
        return np.sum(frozen.logpdf(x * t[2]) + frozen.logcdf(x) + scipy.stats.cauchy(loc=t[3]).pdf(x)) \
            + np.sum(scipy.stats.multivariate_normal(POINTS[0], np.eye(2) * 2).logpdf(POINTS + t[4]))

    def g(t):
        scale = 1 + t[1] ** 2
        return jnp.sum(jstats.norm.logpdf(x * t[2], t[0], scale) + jstats.norm.logcdf(x, t[0], scale)
                       + jstats.cauchy.pdf(x, t[3])) \
            + jnp.sum(jstats.multivariate_normal.logpdf(POINTS + t[4], POINTS[0], np.eye(2) * 2))

    theta = THETA[:5]
    np.testing.assert_allclose(jt.value_and_grad(f)(theta)[0], f(theta), rtol=1e-12)
    grad, hess = _jax_derivatives(g, theta)
    for mode in MODES:
        np.testing.assert_allclose(jt.grad(f, mode=mode)(theta), grad, rtol=1e-10, err_msg=mode)
        np.testing.assert_allclose(jt.hessian(f, mode=mode)(theta), hess, rtol=1e-10, atol=1e-13, err_msg=mode)


# ---------------------------------------------------------------------------- class-method places
class Scaler:
    factor = 3.0

    def method(self, x):
        return self.factor * np.asarray(x)

    @staticmethod
    def static(x):
        return np.asarray(x) ** 2

    @classmethod
    def klass(cls, x):
        return cls.factor + np.asarray(x)


def test_class_method_places_are_swapped_on_the_class_and_restored():
    originals = {name: vars(Scaler)[name] for name in ("method", "static", "klass")}
    seen = []
    places = {f"{__name__}:Scaler.method": lambda self, x: seen.append(type(self)) or self.factor * x * x,
              f"{__name__}:Scaler.static": lambda x: -x,
              f"{__name__}:Scaler.klass": lambda cls, x: seen.append(cls) or cls.factor * x}
    for place, impl in places.items():
        library.register_library(place)(impl)
    try:
        x = np.array([1.0, 2.0])
        f = lambda t: np.sum(Scaler().method(t) + Scaler.static(t) + Scaler().klass(t))   # noqa: E731
        np.testing.assert_allclose(jt.grad(f)(x), 6 * x - 1 + 3)
        assert seen == [Scaler, Scaler]
        # outside the trace, and on plain arrays inside it, the originals
        assert {name: vars(Scaler)[name] for name in originals} == originals
        np.testing.assert_allclose(Scaler().method(x) + Scaler.static(x) + Scaler.klass(x), 3 * x + x ** 2 + 3 + x)
    finally:
        for place in places:
            module, _, attribute = place.partition(":")
            del library._LIBRARY[(module, attribute)]


def test_scipy_classes_are_restored_and_serve_plain_arrays_inside_a_trace():
    base = scipy.stats.rv_continuous
    logpdf, cdf = vars(base)["logpdf"], vars(base)["cdf"]
    constant = scipy.stats.gamma.logpdf(1.5, 2.0)   # a distribution not traced, on plain arrays: SciPy's
    g = jt.grad(lambda x: np.sum(scipy.stats.norm.logpdf(x)) * scipy.stats.gamma.logpdf(1.5, 2.0))(DATA)
    np.testing.assert_allclose(g, -DATA * constant, rtol=1e-12)
    assert vars(base)["logpdf"] is logpdf and vars(base)["cdf"] is cdf
    assert "logpdf" not in vars(type(scipy.stats.norm)) and scipy.linalg.cho_solve is cho_solve_by_name
    assert not hasattr(scipy.linalg.cholesky, "__jacacc_original__")


# ---------------------------------------------------------------------------- refusals
A = _spd(THETA, np)
REFUSALS = {
    "scipy.stats.lognorm.logpdf is not supported by jacacc.tensor": lambda x: scipy.stats.lognorm.logpdf(x, 2.0),
    "scipy.stats.weibull_min.pdf is not supported by jacacc.tensor": lambda x: scipy.stats.weibull_min(2.0).pdf(x),
    "scipy.stats.lognorm.cdf is not supported by jacacc.tensor": lambda x: scipy.stats.lognorm.cdf(x, 2.0),
    "scipy.stats.t.cdf with a traced df is not supported by jacacc.tensor": lambda x: scipy.stats.t.cdf(0.5, x),
    "scipy.stats.beta.logsf with a traced b is not supported": lambda x: scipy.stats.beta.logsf(0.5, 2.0, b=x),
    "scipy.stats.t.logpdf: the parameter df is missing": lambda x: scipy.stats.t.logpdf(x),
    "scipy.stats.norm.ppf is not supported by jacacc.tensor": lambda x: scipy.stats.norm.ppf(x),
    "scipy.stats.gamma.isf is not supported by jacacc.tensor": lambda x: scipy.stats.gamma.isf(x, 2.0),
    "scipy.stats.norm.logpdf with the keyword df is not supported": lambda x: scipy.stats.norm.logpdf(x, df=3),
    "scipy.stats.poisson.logpmf with a traced k is not supported": lambda x: scipy.stats.poisson.logpmf(x, 2.0),
    "scipy.stats.poisson.logpmf with a traced loc is not supported":
        lambda x: scipy.stats.poisson.logpmf(COUNTS[:3], 2.0, loc=x),
    "scipy.stats.binom.logpmf is not supported by jacacc.tensor": lambda x: scipy.stats.binom.logpmf(2, 5, x),
    "scipy.stats.binom.cdf is not supported by jacacc.tensor": lambda x: scipy.stats.binom.cdf(2, 5, x),
    "scipy.stats.poisson.logcdf with a traced k is not supported": lambda x: scipy.stats.poisson.logcdf(x, 2.0),
    "scipy.stats.poisson.ppf is not supported by jacacc.tensor": lambda x: scipy.stats.poisson.ppf(x, 2.0),
    "scipy.stats.multivariate_normal.logpdf with allow_singular=True and a traced cov is not supported":
        lambda x: scipy.stats.multivariate_normal.logpdf(x, cov=np.diag(x), allow_singular=True),
    "scipy.stats.multivariate_normal(mean, cov) frozen with traced parameters is not supported":
        lambda x: scipy.stats.multivariate_normal(x).logpdf(x),
    "scipy.linalg.cho_factor with bogus is not supported by jacacc.tensor":
        lambda x: scipy.linalg.cho_factor(A * x[0], bogus=1)[0],
    "scipy.linalg.solve_triangular of a stack of matrices": lambda x: scipy.linalg.solve_triangular(
        np.stack([A, A]) * x[0], RHS),
    "scipy.linalg.cho_solve with a traced lower is not supported":
        lambda x: scipy.linalg.cho_solve((A * x[0], x[1] > 0), RHS),
}


@pytest.mark.parametrize("message", list(REFUSALS))
def test_refusals_name_themselves_in_one_line(message):
    with pytest.raises(UnsupportedOperationError) as caught:
        jt.grad(lambda x: np.sum(REFUSALS[message](x)))(np.array([0.3, 0.6, 0.9]))
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_dirichlet_and_multivariate_normal_entropy():
    """dirichlet.logpdf/pdf in x (on the simplex, its last component implied) and in alpha, and
    multivariate_normal.entropy in mean and cov, against JAX (entropy: ½(n(log 2π + 1) + log det))."""
    def h(t, np_=np):
        dirichlet = jstats.dirichlet if np_ is jnp else scipy.stats.dirichlet
        x = np_.exp(t[:4]) / np_.sum(np_.exp(t[:4]))
        alpha = np_.exp(t[2:6]) + 0.5
        X = np_.stack([x, x[::-1]], axis=1)                       # two points, components on axis 0
        mean, cov = _gaussian(t, np_)
        if np_ is jnp:
            entropy = 0.5 * (2 * (np.log(2 * np.pi) + 1) + jnp.linalg.slogdet(cov)[1])
        else:
            entropy = scipy.stats.multivariate_normal.entropy(mean, cov)
        return np_.concatenate([np_.reshape(dirichlet.logpdf(x, alpha), (1,)), dirichlet.logpdf(X, alpha),
                                np_.reshape(dirichlet.pdf(x, alpha), (1,)), np_.reshape(entropy, (1,))])

    _check(h, lambda t: h(t, jnp), modes=("cross_country",))
    with pytest.raises(ValueError, match="simplex"):
        jt.grad(lambda a: scipy.stats.dirichlet.logpdf(np.array([0.5, 0.6]), a))(np.ones(2))


def test_scipy_cholesky_differentiates_the_triangle_it_reads():
    """scipy.linalg.cholesky(a) reads a's upper triangle (lower=True: the lower one): the derivative
    is that of SciPy's function, zero in the other triangle, as central differences give."""
    A = np.array([[4.0, 1.0, 0.5], [9.0, 3.0, 0.2], [-7.0, 5.0, 2.0]])    # junk below the diagonal
    W = _weights((3, 3))
    for lower, M in ((False, A), (True, A.T)):
        def f(M, lower=lower):
            return np.sum(W * scipy.linalg.cholesky(M, lower=lower) ** 2)

        g = jt.grad(f)(M)
        numeric = np.zeros_like(M)
        for i, j in np.ndindex(3, 3):
            step = np.zeros_like(M)
            step[i, j] = 1e-6
            numeric[i, j] = (f(M + step) - f(M - step)) / 2e-6
        np.testing.assert_allclose(g, numeric, rtol=1e-6, atol=1e-8)
        assert np.all((np.triu(g, 1) if lower else np.tril(g, -1)) == 0)
