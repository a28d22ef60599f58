"""Loops of small steps through general functions: derivatives right, and their size linear in the steps.

The outside benchmark's Kalman filter: its covariance recurrence passes through ``np.linalg.solve`` and
``slogdet`` at every step.  Their derivatives are linear maps that the sweeps of
:func:`jacacc.tensor.linear.accumulate_by_sweeps` apply; eliminating the vertices
between them joined each step to every later one (the derivative's size grew as
T²).  These tests count the derivative expression's nodes and FLOPs at T and 2T
(structure, not time) and check the numbers against JAX.
"""

from __future__ import annotations

import functools

import jax_reference
import numpy as np
import pytest
from experiment_scripts import load_experiment

import jacacc.tensor as jt
from jacacc.tensor.api import _derive
from jacacc.tensor.expr import nodes_of
from jacacc.tensor.trace import trace

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

MODES = ["forward", "reverse", "cross_country"]


#: the outside benchmark's Kalman filter (experiments/outside.py), as its sources write it
OUTSIDE = load_experiment("outside")


def kalman_nll(theta, ys, xp=np):
    return OUTSIDE.kalman_filter(theta, ys, xp)


def inverse_recurrence(theta, steps, xp=np):
    """A recurrence through the inverse: X ← (X + A)⁻¹ B, summed."""
    A = xp.array([[2.0 + theta[0], theta[1]], [0.3, 2.5]])
    B = xp.array([[1.0, theta[2]], [0.2, 0.9]])
    X, total = xp.eye(2), 0.0
    for _ in range(steps):
        X = xp.linalg.inv(X + A) @ B
        total = total + xp.sum(X * X)
    return total


def observations(steps):
    return np.random.default_rng(steps).standard_normal((steps, 1))


def size(f, theta, order, mode):
    d = _derive(trace(f, [theta]), 0, order, mode)
    return len(nodes_of([d.expression])), d.flops


THETA = np.array([-1.0, -0.5, 0.8])


# make test: the gradient in every mode, the Hessian in cross-country mode (the others: exhaustive tier)
@pytest.mark.parametrize("order, mode", [pytest.param(o, m, marks=() if o == 1 or m == "cross_country"
                                                      else pytest.mark.exhaustive)
                                         for o in (1, 2) for m in MODES])
def test_kalman_derivative_grows_linearly_with_the_steps(order, mode):
    # T = 8 → 16 (an O(T²) derivative would grow 4×; a linear one 2× plus the fixed part's share)
    small = size(lambda t: kalman_nll(t, observations(8)), THETA, order, mode)
    large = size(lambda t: kalman_nll(t, observations(16)), THETA, order, mode)
    assert large[0] <= 2.2 * small[0], (small, large)
    assert large[1] <= 2.2 * small[1], (small, large)


@pytest.mark.parametrize("mode", [pytest.param(m, marks=() if m == "cross_country" else pytest.mark.exhaustive)
                                  for m in MODES])
def test_inverse_recurrence_derivative_grows_linearly(mode):
    small = size(lambda t: inverse_recurrence(t, 8), THETA, 2, mode)
    large = size(lambda t: inverse_recurrence(t, 16), THETA, 2, mode)
    assert large[0] <= 2.2 * small[0], (small, large)


@functools.cache
def jax_derivatives(name):
    """JAX's gradient and Hessian (jitted: JAX's eager Hessian of the loop takes 9 s), once per file."""
    if name == "kalman":
        ys = jnp.asarray(observations(4))
        g = lambda t: kalman_nll(t, ys, jnp)  # noqa: E731
    else:
        g = lambda t: inverse_recurrence(t, 6, jnp)  # noqa: E731
    return np.asarray(jax_reference.jit(jax.grad(g))(THETA)), np.asarray(jax_reference.jit(jax.hessian(g))(THETA))


@pytest.mark.parametrize("mode", [pytest.param(m, marks=() if m == "reverse" else pytest.mark.exhaustive)
                                  for m in MODES])
def test_kalman_gradient_and_hessian_match_jax(mode):
    ys = observations(4)
    f = lambda t: kalman_nll(t, ys)  # noqa: E731
    gradient, hessian = jax_derivatives("kalman")
    np.testing.assert_allclose(jt.grad(f, mode=mode)(THETA), gradient, rtol=1e-9)
    np.testing.assert_allclose(jt.hessian(f, mode=mode)(THETA), hessian, rtol=1e-8)


@pytest.mark.parametrize("mode", [pytest.param(m, marks=() if m == "reverse" else pytest.mark.exhaustive)
                                  for m in MODES])
def test_inverse_recurrence_hessian_matches_jax(mode):
    f = lambda t: inverse_recurrence(t, 6)  # noqa: E731
    gradient, hessian = jax_derivatives("inverse")
    np.testing.assert_allclose(jt.grad(f, mode=mode)(THETA), gradient, rtol=1e-9)
    np.testing.assert_allclose(jt.hessian(f, mode=mode)(THETA), hessian, rtol=1e-8)


def key_evaluations(f, theta, monkeypatch):
    """How many cross-country keys planning the Hessian of ``f`` evaluates (planning work, not time)."""
    import jacacc.tensor.derive as derive

    calls = []
    key = derive._cross_country_key
    monkeypatch.setattr(derive, "_cross_country_key", lambda state, j: calls.append(j) or key(state, j))
    _derive(trace(f, [theta]), 0, 2, "cross_country")
    return len(calls)


def test_kalman_hessian_planning_grows_linearly_with_the_steps(monkeypatch):
    # the greedy cross-country order re-keys the vertices an elimination touches; a key that
    # priced each absorption into an edge as the whole flattened sum grew at every absorption
    # and was found stale again and again (T = 25 → 50 → 100: 13.7 k → 38 k → 119 k keys)
    small = key_evaluations(lambda t: kalman_nll(t, observations(12)), THETA, monkeypatch)
    large = key_evaluations(lambda t: kalman_nll(t, observations(48)), THETA, monkeypatch)
    assert large <= 4.6 * small, (small, large)
