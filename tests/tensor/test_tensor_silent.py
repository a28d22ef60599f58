"""Cases that once gave a silently wrong answer (issue 41): each checked against JAX in forward,
reverse and cross-country mode."""

from __future__ import annotations

import jax_reference
import numpy as np
import pytest

import jacacc.tensor as jt

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

MODES = ("forward", "reverse", "cross_country")


def _against_jax(f, g, *args, argnum=0):
    """Value, gradient and Hessian of ``f`` against ``g``'s under JAX, in every built-in mode."""
    want_value = float(g(*args))
    try:  # one XLA compile each, not one per operation
        want_grad = np.asarray(jax_reference.jit(jax.grad(g, argnums=argnum))(*args))
        want_hessian = np.asarray(jax_reference.jit(jax.hessian(g, argnums=argnum))(*args))
    except (TypeError, IndexError):  # a boolean mask's selection has no static shape under jit: eagerly
        want_grad = np.asarray(jax.grad(g, argnums=argnum)(*args))
        want_hessian = np.asarray(jax.hessian(g, argnums=argnum)(*args))
    for mode in MODES:
        value, grad = jt.value_and_grad(f, argnum=argnum, mode=mode)(*args)
        np.testing.assert_allclose(value, want_value, rtol=1e-12, err_msg=mode)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-12, atol=1e-14, err_msg=mode)
        np.testing.assert_allclose(jt.hessian(f, argnum=argnum, mode=mode)(*args), want_hessian, rtol=1e-12,
                                   atol=1e-14, err_msg=mode)


# ---------------------------------------------------------------------------- x ** y, y an array
NEGATIVE_BASES = np.array([-1.5, 2.0, -0.7, 0.9])
INTEGER_EXPONENTS = np.array([2.0, 3.0, 4.0, -1.0])


@pytest.mark.parametrize("spelling", ["**", "np.power", "np.float_power"])
def test_an_array_exponent_keeps_numpy_s_value_at_negative_bases(spelling):
    """x ** k with k a data array of integers: real for negative x, and so are its derivatives
    (once computed as exp(k log x): NaN in value, gradient and Hessian)."""
    power = {"**": lambda x, k: x**k, "np.power": np.power, "np.float_power": np.float_power}[spelling]
    _against_jax(lambda x, k: np.sum(np.sin(x) * power(x, k)),
                 lambda x, k: jnp.sum(jnp.sin(x) * x**k), NEGATIVE_BASES, INTEGER_EXPONENTS)


def test_a_traced_exponent_is_differentiated_as_jax_does():
    """Both operands traced (positive bases): ∂/∂x = y x^(y−1), ∂/∂y = log(x) x^y, and their
    second derivatives, the mixed ones included."""
    x = np.array([0.7, 1.3, 2.1])
    y = np.array([0.5, -1.2, 2.5])
    for argnum in (0, 1):
        _against_jax(lambda x, y: np.sum(x**y) + np.sum(x) * np.sum(y**x), lambda x, y: jnp.sum(x**y) +
                     jnp.sum(x) * jnp.sum(y**x), x, np.abs(y), argnum=argnum)
    _against_jax(lambda v: np.sum(v[:2] ** v[2]), lambda v: jnp.sum(v[:2] ** v[2]), x)


@pytest.mark.filterwarnings("ignore:invalid value encountered in log")  # ∂/∂n = log(x) xⁿ: NaN at x < 0, as JAX
def test_a_scalar_traced_exponent_broadcasts_over_negative_bases_at_integers():
    """x ** n with n = x[0] an integer-valued traced scalar: the gradient in the bases is
    n x^(n−1), real for negative bases."""
    x = np.array([2.0, -3.0, -0.5])
    want = jax.grad(lambda x: jnp.sum(x[1:] ** jax.lax.stop_gradient(x[0])))(x)
    for mode in MODES:
        got = jt.grad(lambda x: np.sum(x[1:] ** x[0]), mode=mode)(x)
        np.testing.assert_allclose(got[1:], np.asarray(want)[1:], rtol=1e-12, err_msg=mode)
        assert np.all(np.isfinite(got[1:]))


# ---------------------------------------------------------------------------- dtype branches
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_dtype_branch_takes_the_side_numpy_takes(dtype):
    """``x.dtype`` inside f is the arguments' dtype (once float64 always), so the branch
    differentiated is the branch NumPy runs."""

    def f(x):
        scale = 3.0 if x.dtype == np.float32 else 5.0
        return np.sum(scale * x**2)

    x = np.array([0.5, -1.0, 2.0], dtype=dtype)
    scale = 3.0 if dtype == np.float32 else 5.0
    grad = jt.grad(f)(x)
    assert grad.dtype == dtype
    np.testing.assert_allclose(grad, 2 * scale * x, rtol=1e-6)


# ---------------------------------------------------------------------------- fmax / fmin at NaN
@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_and_fmin_pass_the_derivative_of_the_operand_they_pick_over_a_nan(name):
    """Where the data operand is NaN, np.fmax / np.fmin return the traced one: its partial is 1
    there, in every mode (once 0)."""
    fn = getattr(np, name)
    d = np.array([np.nan, 0.3, -2.0, np.nan])
    x = np.array([1.5, -0.2, 0.7, -3.0])
    picked = fn(x, d) == x  # NumPy's own choice: x where d is NaN, else the larger (smaller)
    for mode in MODES:
        np.testing.assert_array_equal(jt.grad(lambda x, d: np.sum(fn(x, d) * x), mode=mode)(x, d),
                                      np.where(picked, 2 * x, d), err_msg=mode)
        np.testing.assert_array_equal(jt.grad(lambda x, d: np.sum(fn(d, x) ** 2), mode=mode)(x, d),
                                      np.where(picked, 2 * x, 0.0), err_msg=mode)


# ---------------------------------------------------------------------------- np.heaviside
def test_heaviside_of_two_operands_is_numpy_s():
    """np.heaviside(x, h0): NumPy's value (NaN kept), zero derivative in x, linear in h0 (it once
    raised an internal TypeError)."""
    x = np.array([1.5, -1.0, 0.0, 0.0, np.nan, np.inf, -np.inf])
    h0 = np.array([0.25, 0.5, 0.75, -1.0, 2.0, 3.0, 4.0])
    for mode in MODES:
        value, grad = jt.value_and_grad(lambda h, x: np.sum(np.heaviside(x, h) * h), mode=mode)(h0, x)
        np.testing.assert_array_equal(value, np.sum(np.heaviside(x, h0) * h0))
        with np.errstate(invalid="ignore"):
            want = np.where(x == 0, 2 * h0, np.heaviside(x, 0.0))  # d/dh of heaviside(x, h)·h
        np.testing.assert_array_equal(grad[~np.isnan(x)], want[~np.isnan(x)], err_msg=mode)
        jacobian = jt.jacobian(lambda x: np.heaviside(x, 0.5), mode=mode)(x)
        np.testing.assert_array_equal(jacobian, np.zeros((x.size, x.size)), err_msg=mode)


# ---------------------------------------------------------------------------- integer and boolean data
def test_integer_labels_and_a_boolean_mask_index_as_numpy_does():
    """Integer and boolean arguments not differentiated are constants of the plan, keyed by
    value: ``logp[arange, labels]`` and ``z[mask]`` work (once refused as traced indices)."""
    rng = np.random.default_rng(0)
    W, X = rng.normal(size=(3, 4)), rng.normal(size=(5, 3))

    def cross_entropy(W, X, labels, xp=np):
        z = X @ W
        logp = z - xp.log(xp.sum(xp.exp(z), axis=1, keepdims=True))
        return -xp.sum(logp[xp.arange(5), labels])

    for labels in (np.array([0, 3, 1, 2, 0]), np.array([1, 1, 1, 1, 1])):  # a new value: a new plan
        _against_jax(cross_entropy, lambda W, X, labels: cross_entropy(W, X, labels, jnp), W, X, labels)
    mask = np.array([True, False, True, True, False])
    _against_jax(lambda W, X, m: np.sum(np.tanh(X @ W)[m] ** 2), lambda W, X, m: jnp.sum(jnp.tanh(X @ W)[m] ** 2),
                 W, X, mask)


# ---------------------------------------------------------------------------- cancellation past an infinity
CANCELLING = {
    # x₀ − x₀ has the partials 1 and −1: their sum is the number 0, and ∞·0 is NaN in every order
    "log_of_a_difference": (lambda x, xp: xp.log(x[0] - x[0]) * x[1], [1.5, 2.0]),
    "quotient_past_a_log": (lambda x, xp: x[1] * ((x[0] + x[1]) * (x[1] * x[0]) + x[1])
                            + x[1] / (x[1] + xp.log(x[0] - x[0])), [800.0, -800.0]),
    "underflowed_exp": (lambda x, xp: xp.log(xp.exp(x[0])) * xp.tanh(xp.exp(xp.log(x[1] - x[1]))), [-700.0, 1.0]),
    "quotient_by_a_difference": (lambda x, xp: xp.tanh((xp.sin(x[0]) / (x[1] - x[1])) ** 2) / xp.sin(x[0]),
                                 [-800.0, 2.0]),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(CANCELLING))
def test_a_cancelled_partial_meets_an_infinite_one_as_jax_does_in_every_order(name):
    # a structural zero here gave NaN in the orders that multiply first and 0 in those that add first
    f, x = CANCELLING[name]
    x = np.array(x)
    with np.errstate(all="ignore"):
        want_grad = np.asarray(jax.grad(lambda x: f(x, jnp))(x))
        want_hessian = np.asarray(jax.hessian(lambda x: f(x, jnp))(x))
    for mode in (*MODES, "min_fill", "markowitz"):
        np.testing.assert_array_equal(np.isnan(jt.grad(lambda x: f(x, np), mode=mode)(x)), np.isnan(want_grad),
                                      err_msg=mode)
        np.testing.assert_allclose(jt.grad(lambda x: f(x, np), mode=mode)(x), want_grad, rtol=1e-12, err_msg=mode)
        np.testing.assert_array_equal(np.isnan(jt.hessian(lambda x: f(x, np), mode=mode)(x)),
                                      np.isnan(want_hessian), err_msg=mode)


def test_constants_that_cancel_are_a_number_not_a_structural_zero():
    from jacacc.tensor.expr import add, const, einsum, var

    zero = add(const(1.0), const(-1.0))
    assert not zero.is_zero and float(zero.value) == 0.0
    product = einsum(",i->i", zero, var("x", (3,)))
    assert not product.is_zero  # ∞·0 must stay NaN when x is infinite
    assert einsum(",i->i", const(0.0), var("x", (3,))).is_zero  # a written 0 still annihilates


@pytest.mark.parametrize("spelling", ["np.std", "np.var"])
def test_the_moments_of_one_entry_are_constant_zero_with_zero_derivatives(spelling):
    # std(x) of a single entry is 0 whatever x: its derivative is 0 (autograd's); written out, sqrt's ∞
    # at 0 times the centred entry's 0 gave NaN (JAX gives NaN too)
    moment = {"np.std": np.std, "np.var": np.var}[spelling]
    for mode in MODES:
        assert jt.grad(lambda x: moment(x), mode=mode)(3.5) == 0.0
        assert jt.hessian(lambda x: moment(x), mode=mode)(3.5) == 0.0
        g = jt.grad(lambda x: np.sum(moment(x, axis=0) * x[0]), mode=mode)(np.array([[1.0, 2.0, 3.0]]))
        np.testing.assert_array_equal(g, np.zeros((1, 3)))
