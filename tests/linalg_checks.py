"""Checks shared by the linear-algebra derivative tests (paper 004 §4).

A *case* is ``(name, f, f_torch, args, symmetric)``: a function of arrays that
calls ``jacacc.linalg``, the same map in PyTorch, its arguments, and the
positions of arguments that are symmetric matrices (their tangents are
symmetric; jacacc's gradients w.r.t. them are the symmetric ones).
"""

from __future__ import annotations

import numpy as np
import pytest

import jacacc.tensor as jt


def sym(X):
    return (X + np.swapaxes(X, -1, -2)) / 2


def tangents_for(case, rng, symmetric_tangents=True):
    _, _, _, args, symmetric = case
    return [sym(rng.normal(size=a.shape)) if symmetric_tangents and k in symmetric else rng.normal(size=a.shape)
            for k, a in enumerate(args)]


def check_dot_product(case, tangents, rtol=1e-9):
    """⟨jvp(ẋ), ȳ⟩ = ⟨ẋ, vjp(ȳ)⟩: the pushforward and the pullback are each other's transposes."""
    _, f, _, args, _ = case
    value, tangent_out = jt.jvp(f, args, tangents)
    cotangent = np.random.default_rng(1).normal(size=np.shape(value))
    _, pullback = jt.vjp(f, *args)
    left = float(np.sum(tangent_out * cotangent))
    right = sum(float(np.sum(a * b)) for a, b in zip(tangents, pullback(cotangent), strict=True))
    assert left == pytest.approx(right, rel=rtol, abs=1e-12)


def check_central_differences(case, tangents, h=1e-6):
    """The pushforward against central differences of the forward kernels."""
    _, f, _, args, _ = case
    plus = f(*(a + h * d for a, d in zip(args, tangents, strict=True)))
    minus = f(*(a - h * d for a, d in zip(args, tangents, strict=True)))
    _, tangent_out = jt.jvp(f, args, tangents)
    np.testing.assert_allclose(tangent_out, (plus - minus) / (2 * h), rtol=1e-6, atol=1e-7)


def check_against_torch(case, torch, value_rtol=1e-12, grad_rtol=1e-9):
    """The value and the pullback of one random cotangent against ``torch.autograd``."""
    _, f, f_torch, args, symmetric = case
    value, pullback = jt.vjp(f, *args)
    cotangent = np.random.default_rng(3).normal(size=np.shape(value))
    inputs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in args]
    out = f_torch(*inputs)
    np.testing.assert_allclose(value, out.detach().numpy(), rtol=value_rtol, atol=1e-12)
    (out * torch.tensor(cotangent)).sum().backward()
    for k, (got, x) in enumerate(zip(pullback(cotangent), inputs, strict=True)):
        want = x.grad.numpy()
        if k in symmetric:  # jacacc's gradient is the symmetric one; torch's agrees on symmetric directions
            np.testing.assert_allclose(got, sym(got), atol=1e-12)
            want = sym(want)
        np.testing.assert_allclose(got, want, rtol=grad_rtol, atol=1e-10)


def check_matrix_valued_against_jax(f, A, reference, mode, close):
    """``jt.jacobian``, ``jt.jvp`` and ``jt.vjp`` of a matrix-valued ``f`` in ``mode`` against JAX's
    ``(tangent, cotangent, jacobian, value, pushed, pulled)`` at ``A`` (``close(got, want, rtol=…, what=…)``)."""
    tangent, cotangent, jacobian, value, pushed, pulled = reference
    close(jt.jacobian(f, mode=mode)(A), jacobian, what="jacobian")
    got_value, got_pushed = jt.jvp(f, (A,), (tangent,), mode=mode)
    close(got_value, value, rtol=1e-12, what="jvp value")
    close(got_pushed, pushed, what="jvp")
    got_value, pullback = jt.vjp(f, A, mode=mode)
    close(got_value, value, rtol=1e-12, what="vjp value")
    close(pullback(cotangent)[0], pulled, what="vjp")


def close(got, want, rtol=1e-9, what=""):
    """``got`` ≈ ``want`` relative to the largest entry of ``want`` (entries near zero
    compare absolutely at that scale)."""
    want = np.asarray(want, dtype=float)
    got = np.asarray(got, dtype=float)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)
