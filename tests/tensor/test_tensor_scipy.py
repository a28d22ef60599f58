"""SciPy's distributions and Cholesky/triangular solves traced by name (jacacc/tensor/scipy_functions.py).

Each case is an array-valued function of a parameter vector written with SciPy and with
``jax.scipy``: its traced value against SciPy's own on plain arrays (rtol 1e-12), and the
gradient and Hessian of a weighted sum of it against JAX's in forward, reverse and
cross-country mode (rtol 1e-10).  Then frozen distributions, the class-method places of
``register_library``, and each refusal's one-line message.
"""

from __future__ import annotations

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
    grad, hess = jax.jit(lambda t: (jax.grad(g)(t), jax.hessian(g)(t)))(theta)
    return np.asarray(grad), np.asarray(hess)


def _check(h, h_jax, theta=THETA):
    """``h(θ)`` traced against SciPy's value; ``Σ W·h`` differentiated against JAX in every mode."""
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
    for mode in MODES:
        np.testing.assert_allclose(jt.grad(f, mode=mode)(theta), grad, rtol=1e-10, atol=1e-13, err_msg=mode)
        np.testing.assert_allclose(jt.hessian(f, mode=mode)(theta), hess, rtol=1e-10, atol=1e-13, err_msg=mode)


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
    "scipy.stats.gamma.logpdf is not supported by jacacc.tensor": lambda x: scipy.stats.gamma.logpdf(x, 2.0),
    "scipy.stats.beta.pdf is not supported by jacacc.tensor": lambda x: scipy.stats.beta(2.0, 3.0).pdf(x),
    "scipy.stats.expon.cdf is not supported by jacacc.tensor": lambda x: scipy.stats.expon.cdf(x),
    "scipy.stats.norm.ppf is not supported by jacacc.tensor": lambda x: scipy.stats.norm.ppf(x),
    "scipy.stats.norm.logpdf with the keyword df is not supported": lambda x: scipy.stats.norm.logpdf(x, df=3),
    "scipy.stats.poisson.logpmf with a traced k is not supported": lambda x: scipy.stats.poisson.logpmf(x, 2.0),
    "scipy.stats.poisson.logpmf with a traced loc is not supported":
        lambda x: scipy.stats.poisson.logpmf(COUNTS[:3], 2.0, loc=x),
    "scipy.stats.binom.logpmf is not supported by jacacc.tensor": lambda x: scipy.stats.binom.logpmf(2, 5, x),
    "scipy.stats.poisson.cdf is not supported by jacacc.tensor": lambda x: scipy.stats.poisson.cdf(2, x),
    "scipy.stats.multivariate_normal.logpdf with allow_singular=True is not supported":
        lambda x: scipy.stats.multivariate_normal.logpdf(x, allow_singular=True),
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
