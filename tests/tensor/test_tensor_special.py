"""scipy.special on traced arrays (jacacc/tensor/special.py): the log-gamma family against JAX in every
built-in mode; the gamma and beta functions, the inverse error functions, the incomplete gamma and beta
functions and the Bessel functions against mpmath (one mode each in `make test`, rotating; the others and
JAX's derivatives under `exhaustive`); their values SciPy's own, and each refusal's one-line message."""

from __future__ import annotations

import functools

import jax_reference
import numpy as np
import pytest
import scipy.special as sp

import jacacc.tensor as jt
from jacacc.errors import UnsupportedOperationError

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)
jsp = pytest.importorskip("jax.scipy.special")

X = np.array([0.7, 2.5, 4.0])


def f(x):
    return (np.sum(sp.gammaln(x * x + 0.5) * x) + np.sum(sp.digamma(x + 1) ** 2) + np.sum(sp.polygamma(1, x))
            + np.sum(sp.betaln(x, x + 1)) + sp.multigammaln(x[2] + 1, 3))


def g(x):
    return (jnp.sum(jsp.gammaln(x * x + 0.5) * x) + jnp.sum(jsp.digamma(x + 1) ** 2) + jnp.sum(jsp.polygamma(1, x))
            + jnp.sum(jsp.betaln(x, x + 1)) + jsp.multigammaln(x[2] + 1, 3))


@pytest.mark.parametrize("mode", ["forward", "reverse", "cross_country"])
def test_the_log_gamma_family_against_jax(mode):
    value, grad = jt.value_and_grad(f, mode=mode)(X)
    np.testing.assert_allclose(value, f(X), rtol=1e-14)  # SciPy's own value
    np.testing.assert_allclose(grad, jax_reference.jit(jax.grad(g))(X), rtol=1e-10)
    np.testing.assert_allclose(jt.hessian(f, mode=mode)(X), jax_reference.jit(jax.hessian(g))(X), rtol=1e-9)


def test_third_derivatives_climb_the_polygamma_orders():
    """The Hessian of digamma's gradient: ψ'' on the diagonal, one order past what gammaln's Hessian reads."""
    hessian = jt.hessian(lambda x: np.sum(sp.digamma(x)))(X)
    np.testing.assert_allclose(np.diag(hessian), sp.polygamma(2, X), rtol=1e-12)


def test_a_traced_or_negative_order_is_refused():
    with pytest.raises(UnsupportedOperationError, match="constant integer order n >= 0"):
        jt.grad(lambda x: np.sum(sp.polygamma(-1, x)))(X)
    with pytest.raises(UnsupportedOperationError, match="multigammaln needs a constant integer d >= 1"):
        jt.grad(lambda x: sp.multigammaln(x[0] + 3, 0))(X)



# ---------------------------------------------------------------------------- the scipy_special operator
# Each group of functions is Σ W·F(x) over its members F, elementwise in x: its gradient is Σ W·F'(x) and
# its Hessian diag(Σ W·F''(x)), with F' and F'' from mpmath (30 digits; JAX compiles some of these
# functions' Hessians for seconds): mpmath's numerical derivatives, and for the Bessel functions the
# identities F'ᵥ = Fᵥ₋₁ − (v/x)·Fᵥ (K: −Kᵥ₋₁ − (v/x)·Kᵥ) and Bessel's equation for F'' (the
# implementation uses the recurrence (Fᵥ₋₁ ∓ Fᵥ₊₁)/2 at every order instead).  `make test` checks each
# group in one mode, the modes rotating across the groups; the other two modes, and JAX's derivatives of
# the functions composed, in every mode, are `exhaustive`.
MODES = ("forward", "reverse", "cross_country")
W = np.array([0.7, -1.1, 1.3])         # distinct weights per entry
A = np.array([1.0, 2.5, 0.6])          # constant shapes per entry: a = 1 (the exponential) included
B = np.array([3.0, 1.0, 0.8])
NU = np.array([0.0, 1.5, 2.7])         # a constant Bessel order per entry
Y = np.array([0.15, 0.4, 0.8])         # in (0, 1): the inverses' and logit's domain
BESSEL_X = np.array([0.6, 2.2, 7.5])


def _mp():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    return mpmath


def _by_diff(mp, F):
    """``(F', F'')`` of ``F(i, x)`` (entry ``i``) by mpmath's numerical differentiation."""
    return lambda i, x: tuple(mp.diff(lambda t: F(i, t), x, n) for n in (1, 2))


def _gamma_group(mp):
    return Y, [(lambda y: sp.gamma(4 * y + 0.3), lambda i, y: mp.gamma(4 * y + 0.3)),
               (lambda y: sp.rgamma(4 * y + 0.3) * y, lambda i, y: mp.rgamma(4 * y + 0.3) * y),
               (lambda y: sp.gammasgn(4 * y - 1.7) * y, lambda i, y: mp.sign(mp.gamma(4 * y - 1.7)) * y),
               (lambda y: sp.beta(y + 0.2, 1.5 - y), lambda i, y: mp.beta(y + 0.2, 1.5 - y)),
               (lambda y: sp.logit(y), lambda i, y: mp.log(y / (1 - y)))]


def _inverse_group(mp):
    return Y, [(lambda y: sp.erfinv(2 * y - 1), lambda i, y: mp.erfinv(2 * y - 1)),
               (lambda y: sp.erfcinv(y), lambda i, y: mp.erfinv(1 - y)),
               (lambda y: sp.ndtri(y), lambda i, y: mp.sqrt(2) * mp.erfinv(2 * y - 1)),
               (lambda y: sp.ndtr(4 * y - 1.7), lambda i, y: mp.ncdf(4 * y - 1.7)),
               (lambda y: sp.log_ndtr(12 * y - 8.1), lambda i, y: mp.log(mp.ncdf(12 * y - 8.1)))]


def _incomplete_group(mp):
    def p(i, x):
        return mp.gammainc(A[i], 0, x, regularized=True)

    return np.array([0.4, 1.7, 3.0]), [
        (lambda x: sp.gammainc(A, x), p),
        (lambda x: sp.gammaincc(A, 2 * x), lambda i, x: 1 - p(i, 2 * x)),
        (lambda x: sp.betainc(A, B, x * 0.25), lambda i, x: mp.betainc(A[i], B[i], 0, x * 0.25, regularized=True)),
        (lambda x: sp.betaincc(B, A, x * 0.28), lambda i, x: mp.betainc(B[i], A[i], x * 0.28, 1, regularized=True))]


def _bessel(mp, general, order, inner=1.0):
    """``(F', F'')`` of SciPy's ``general`` Bessel function of ``order`` (one per entry where an array)
    at ``inner·x``, in x: the identities of the comment above, and the product rule for the scaled ones."""
    def derivatives(i, x):
        v, t = mp.mpf(float(np.broadcast_to(order, 3)[i])), inner * x
        f = getattr(mp, {"jv": "besselj", "yv": "bessely", "iv": "besseli", "kv": "besselk", "ive": "besseli",
                         "kve": "besselk"}[general])
        value, lower = f(v, t), f(v - 1, t)
        if general in ("jv", "yv"):
            first = lower - v / t * value
            second = -first / t - (1 - v ** 2 / t ** 2) * value
        else:
            first = (-lower if general in ("kv", "kve") else lower) - v / t * value
            second = -first / t + (1 + v ** 2 / t ** 2) * value
        if general == "ive":   # I·e^(−|t|)
            s = mp.sign(t)
            first, second = (first - s * value) * mp.exp(-abs(t)), (second - 2 * s * first + value) * mp.exp(-abs(t))
        if general == "kve":   # K·e^t
            first, second = (first + value) * mp.exp(t), (second + 2 * first + value) * mp.exp(t)
        return inner * first, inner ** 2 * second

    return derivatives


def _bessel_general_group(mp):
    members = [(lambda x, g=g: getattr(sp, g)(NU, x), _bessel(mp, g, NU)) for g in ("jv", "yv", "iv", "kv", "ive", "kve")]
    return BESSEL_X, [*members, (lambda x: sp.yn(2, x), _bessel(mp, "yv", 2)),
                      (lambda x: sp.jv(3, x * 0.5), _bessel(mp, "jv", 3, inner=0.5))]


def _bessel_fixed_group(mp):
    kinds = {"j": "jv", "y": "yv", "i": "iv", "k": "kv", "ie": "ive", "ke": "kve"}
    return BESSEL_X, [(lambda x, name=f"{k[0]}{n}{k[1:]}": getattr(sp, name)(x), _bessel(mp, kinds[k], n))
                      for k in kinds for n in (0, 1)]


#: group → (points, [(SciPy's F, mpmath's F(i, x) or (F', F'')(i, x))], whether mpmath gives the derivatives)
GROUPS = {"gamma": (_gamma_group, False), "inverses": (_inverse_group, False), "incomplete": (_incomplete_group, False),
          "bessel": (_bessel_general_group, True), "bessel_fixed_orders": (_bessel_fixed_group, True)}


@functools.cache
def _mpmath_reference(group):
    """The group's points, its SciPy members, and Σ W·F' and Σ W·F'' at the points (mpmath)."""
    mp = _mp()
    build, analytic = GROUPS[group]
    points, members = build(mp)
    rules = [rule if analytic else _by_diff(mp, rule) for _, rule in members]
    pairs = [[rule(i, mp.mpf(float(x))) for rule in rules] for i, x in enumerate(points)]
    derivatives = [W * np.array([float(sum(p[n] for p in entry)) for entry in pairs]) for n in (0, 1)]
    return points, [f for f, _ in members], derivatives


def _rotated(names):
    """One mode per name in make test, rotating; the other two under the exhaustive marker."""
    return [pytest.param(name, mode, marks=() if j == k % 3 else pytest.mark.exhaustive, id=f"{name}-{mode}")
            for k, name in enumerate(names) for j, mode in enumerate(MODES)]


@pytest.mark.parametrize(("group", "mode"), _rotated(GROUPS))
def test_special_functions_against_mpmath(group, mode):
    points, members, (first, second) = _mpmath_reference(group)
    stacked = lambda x: np.stack([F(x) for F in members])     # noqa: E731
    np.testing.assert_array_equal(jt.vjp(stacked, points)[0], stacked(points))    # SciPy's own values
    f = lambda x: sum(np.sum(W * F(x)) for F in members)     # noqa: E731
    np.testing.assert_allclose(jt.grad(f, mode=mode)(points), first, rtol=1e-10, err_msg=mode)
    np.testing.assert_allclose(jt.hessian(f, mode=mode)(points), np.diag(second), rtol=1e-9, atol=1e-12, err_msg=mode)


def _jax_derivatives(g, x):
    grad, hess = jax_reference.jit(lambda t: (jax.grad(g)(t), jax.hessian(g)(t)))(x)
    return np.asarray(grad), np.asarray(hess)


def gamma_family(y, sp=sp, np=np, jax_=False):
    """The gamma and beta functions, the inverse error functions, the normal's and logit, composed."""
    x = 4.0 * y + 0.3
    rgamma = (lambda t: 1.0 / sp.gamma(t)) if jax_ else sp.rgamma          # JAX lacks rgamma and erfcinv
    erfcinv = (lambda t: sp.erfinv(1.0 - t)) if jax_ else sp.erfcinv
    terms = [sp.gamma(x), rgamma(x) * y, sp.gammasgn(x - 2.0) * y, sp.beta(x, 1.5 - y) + sp.beta(2.0, x),
             sp.erfinv(2.0 * y - 1.0) * sp.logit(y), erfcinv(y) * y, sp.ndtri(y), sp.ndtr(x - 2.0),
             sp.log_ndtr(3.0 * x - 9.0)]
    return sum(np.sum(W * t) for t in terms)


def incomplete(x, sp=sp, np=np, jax_=False):
    """The regularized incomplete gamma and beta functions in x (the shapes constant)."""
    betaincc = (lambda a, b, t: 1.0 - sp.betainc(a, b, t)) if jax_ else sp.betaincc
    u = x / (1.0 + x)
    return np.sum(W * (sp.gammainc(A, x) * sp.gammaincc(A, 2.0 * x) + sp.betainc(A, B, u) + betaincc(B, A, u * u)))


def bessel_family(x, sp=sp, np=np, jax_=False):
    """JAX's Bessel functions: i0, i1, i0e, i1e, and J of integer orders (bessel_jn; jv here)."""
    jn = (lambda n, t: sp.bessel_jn(t, v=3)[n]) if jax_ else sp.jv   # its default n_iter: more is unstable
    return np.sum(W * (sp.i0(x) * sp.i1(x) + sp.i0e(x) + sp.i1e(x) * x + jn(3, x) + jn(2, x + 1.0) * jn(0, x)))


JAX_CASES = {"gamma_family": (gamma_family, Y), "incomplete": (incomplete, np.array([0.4, 1.7, 3.0])),
             "bessel_family": (bessel_family, BESSEL_X)}


@pytest.mark.exhaustive
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(JAX_CASES))
def test_special_functions_composed_against_jax(case, mode):
    f, x = JAX_CASES[case]
    value, grad = jt.value_and_grad(f, mode=mode)(x)
    np.testing.assert_allclose(value, f(x), rtol=1e-14)
    grad_jax, hess_jax = _jax_derivatives(lambda t: f(t, jsp, jnp, jax_=True), x)
    np.testing.assert_allclose(grad, grad_jax, rtol=1e-10, atol=1e-13, err_msg=mode)
    np.testing.assert_allclose(jt.hessian(f, mode=mode)(x), hess_jax, rtol=1e-9, atol=1e-12, err_msg=mode)


def test_incomplete_gamma_at_zero_is_the_one_sided_limit():
    """d/dx P(a, x) at x = 0: inf, 1, 0 for a = 0.5, 1, 2 (JAX: NaN at a = 1); P(1, x) = 1 − e^(−x) to
    every order there."""
    a = np.array([0.5, 1.0, 2.0])
    f = lambda x: np.sum(sp.gammainc(a, x))   # noqa: E731
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(jt.grad(f)(np.zeros(3)), [np.inf, 1.0, 0.0])
        assert jt.hessian(f)(np.zeros(3))[1, 1] == -1.0


def test_a_jacobian_batches_the_operator():
    """jacobian pulls back one row per output entry at once: the operator's batching rule."""
    f = lambda x: sp.iv(NU, x * x[::-1]) + sp.erfinv(x / 10.0) * sp.gammainc(A, x)    # noqa: E731
    eps = 1e-6
    numeric = np.stack([(f(BESSEL_X + eps * e) - f(BESSEL_X - eps * e)) / (2 * eps) for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(jt.jacobian(f)(BESSEL_X), numeric, rtol=1e-7)


SPECIAL_REFUSALS = {
    "scipy.special.jv with a traced order v is not supported": lambda x: sp.jv(x, 2.0),
    "scipy.special.yn with a traced order n is not supported": lambda x: sp.yn(x, 2.0),
    "scipy.special.ive with a traced order v is not supported": lambda x: sp.ive(x, x),
    "scipy.special.gammainc with a traced shape a is not supported": lambda x: sp.gammainc(x, 1.0),
    "scipy.special.gammaincc with a traced shape a is not supported": lambda x: sp.gammaincc(x, x),
    "scipy.special.betainc with a traced shape b is not supported": lambda x: sp.betainc(2.0, x, 0.5),
}


@pytest.mark.parametrize("message", list(SPECIAL_REFUSALS))
def test_a_traced_order_or_shape_is_refused_by_name(message):
    with pytest.raises(UnsupportedOperationError) as caught:
        jt.grad(lambda x: np.sum(SPECIAL_REFUSALS[message](x)))(X)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_polygamma_values_are_scipys_bit_for_bit():
    """The operator computes polygamma(n, x) by SciPy's formula without SciPy's Python wrapper: the
    same bits at every order, sign of x, pole and shape."""
    import scipy.special

    from jacacc.tensor.special import _forward

    rng = np.random.default_rng(1)
    points = [rng.uniform(-6, 6, 500), np.array([0.0, -1.0, -2.0, 1.0, 1e-300, 1e6]), np.array(2.5),
              rng.uniform(0, 40, (3, 4))]
    for x in points:
        for order in range(1, 6):
            got, want = _forward(x, order), scipy.special.polygamma(order, x)
            assert np.shape(got) == np.shape(want)
            np.testing.assert_array_equal(got, want)
