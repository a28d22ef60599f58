"""scipy.special's log-gamma family on traced arrays (issue 41), against JAX in every built-in mode."""

from __future__ import annotations

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
    np.testing.assert_allclose(grad, jax.jit(jax.grad(g))(X), rtol=1e-10)
    np.testing.assert_allclose(jt.hessian(f, mode=mode)(X), jax.jit(jax.hessian(g))(X), rtol=1e-9)


def test_third_derivatives_climb_the_polygamma_orders():
    """The Hessian of digamma's gradient: ψ'' on the diagonal, one order past what gammaln's Hessian reads."""
    hessian = jt.hessian(lambda x: np.sum(sp.digamma(x)))(X)
    np.testing.assert_allclose(np.diag(hessian), sp.polygamma(2, X), rtol=1e-12)


def test_a_traced_or_negative_order_is_refused():
    with pytest.raises(UnsupportedOperationError, match="constant integer order n >= 0"):
        jt.grad(lambda x: np.sum(sp.polygamma(-1, x)))(X)
    with pytest.raises(UnsupportedOperationError, match="multigammaln needs a constant integer d >= 1"):
        jt.grad(lambda x: sp.multigammaln(x[0] + 3, 0))(X)
