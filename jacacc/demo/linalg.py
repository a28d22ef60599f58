"""Demo part ``linalg`` (paper 004): a Gaussian-process likelihood's gradient through potrf and trsm.

The negative log marginal likelihood of GP regression with an RBF kernel
(paper 004 §3.1), ``½‖z‖² + Σ log Lᵢᵢ + (n/2) log 2π`` with
``K + σ_n²I = LLᵀ`` (``potrf``) and ``z = L⁻¹y`` (``trsm``), differentiated
w.r.t. its log hyperparameters by :func:`jacacc.tensor.value_and_grad`; checked
against PyTorch's autograd of the same function (float64) and against
central differences.  n = 30 keeps the kernel matrix below the evaluator's
fusion threshold (nothing is compiled by Numba).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jacacc.demo.registry import register_part
from jacacc.demo.report import Report, best_time, central_differences, format_time

__all__ = ["FD_RTOL", "N", "THETA", "TORCH_RTOL", "gp_data", "gp_nll", "gp_nll_torch", "run"]

N = 30
THETA = np.log([1.1, 0.9, 0.2])  # log [lengthscale ℓ, signal variance σ_f², noise variance σ_n²]
TORCH_RTOL = 1e-10
FD_RTOL = 1e-6


def gp_nll(theta: Any, X: Any, y: Any) -> Any:
    """−log N(y | 0, K + σ_n²I) by ``potrf``, ``trsm`` and ``sumlogdiag`` (paper 004 §3.1).

    ``theta = log [ℓ, σ_f², σ_n²]``, ``X`` of shape (n, d), ``y`` a column (n, 1); the
    kernel ``σ_f² exp(−|xᵢ − xⱼ|² / 2ℓ²)`` from squared distances with ``syrk``.

    Examples
    --------
    >>> X, y = gp_data()
    >>> bool(np.isfinite(gp_nll(THETA, X, y)))
    True
    """
    from jacacc import linalg

    unit = np.eye(3)
    log_ell, log_sf2, log_sn2 = (theta @ unit[k] for k in range(3))
    n = X.shape[0]
    sq, ones = np.sum(X * X, axis=1), np.ones(n)
    D = np.outer(sq, ones) + np.outer(ones, sq) - 2.0 * linalg.syrk(X)
    K = np.exp(log_sf2 - 0.5 * np.exp(-2.0 * log_ell) * D)
    L = linalg.potrf(K + np.exp(log_sn2) * np.eye(n))
    z = linalg.trsm(L, y)
    return 0.5 * np.sum(z * z) + linalg.sumlogdiag(L) + 0.5 * n * math.log(2 * math.pi)


def gp_nll_torch(theta: Any, X: Any, y: Any) -> Any:
    """:func:`gp_nll` in PyTorch (``torch.linalg.cholesky``, ``solve_triangular``)."""
    import torch

    n = X.shape[0]
    sq = torch.sum(X * X, 1)
    D = sq[:, None] + sq[None, :] - 2 * X @ X.mT
    K = torch.exp(theta[1] - 0.5 * torch.exp(-2 * theta[0]) * D)
    L = torch.linalg.cholesky(K + torch.exp(theta[2]) * torch.eye(n, dtype=X.dtype))
    z = torch.linalg.solve_triangular(L, y, upper=False)
    return 0.5 * torch.sum(z * z) + torch.sum(torch.log(torch.diagonal(L))) + 0.5 * n * math.log(2 * math.pi)


def gp_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)``: N sorted inputs on [0, 8] and noisy targets sin(x) + 0.2·ε, as columns."""
    rng = np.random.default_rng(seed)
    X = np.sort(rng.uniform(0.0, 8.0, N))[:, None]
    return X, np.sin(X) + 0.2 * rng.standard_normal((N, 1))


def _vector(values: Any) -> str:
    return "[" + ", ".join(f"{float(v):.10f}" for v in np.ravel(values)) + "]"


@register_part("linalg", "paper 004: a Gaussian-process likelihood gradient through potrf/trsm vs PyTorch autograd")
def run(report: Report) -> None:
    """The GP likelihood's gradient by jacacc.linalg, beside PyTorch's autograd and central differences."""
    import jacacc.tensor as jt

    X, y = gp_data()
    report.line(f"GP regression, RBF kernel, n = {N}: NLL(θ) = ½‖L⁻¹y‖² + Σ log Lᵢᵢ + (n/2) log 2π, "
                "LLᵀ = K + σ_n²I (potrf), L⁻¹y (trsm)")
    report.line(f"θ = log [ℓ, σ_f², σ_n²] = {_vector(THETA)}")
    value_and_grad = jt.value_and_grad(gp_nll)
    value, grad = value_and_grad(THETA, X, y)
    ours = best_time(lambda: value_and_grad(THETA, X, y))
    report.line(f"jacacc: NLL {float(value):.12f}, ∂NLL/∂θ = {_vector(grad)}")
    fd = central_differences(lambda t: gp_nll(t, X, y), THETA)
    timing = f"jacacc.tensor.value_and_grad {format_time(ours)}"
    torch_grad = None
    try:
        import torch
    except ImportError as exc:
        report.skip("the comparison with PyTorch", f"PyTorch is not importable: {exc}")
    else:
        X_t, y_t = torch.tensor(X), torch.tensor(y)
        theta_t = torch.tensor(THETA, requires_grad=True)

        def torch_value_and_grad() -> tuple[Any, Any]:
            theta_t.grad = None
            nll = gp_nll_torch(theta_t, X_t, y_t)
            nll.backward()
            return nll, theta_t.grad

        torch_value, torch_grad = (t.detach().numpy().copy() for t in torch_value_and_grad())
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as fast at this size, and immune to a busy neighbour core stalling its pool
        try:
            theirs = best_time(torch_value_and_grad)
        finally:
            torch.set_num_threads(threads)
        report.line(f"torch:  NLL {float(torch_value):.12f}, ∂NLL/∂θ = {_vector(torch_grad)}")
        timing += (f", PyTorch forward + backward (one thread) {format_time(theirs)} "
                   f"(ratio jacacc/PyTorch {ours / theirs:.2f})")
    report.line(f"central differences:    ∂NLL/∂θ = {_vector(fd)}")
    report.line(f"value and gradient per warm call, best of 5 rounds: {timing}")
    reference = "PyTorch's autograd" if torch_grad is not None else "central differences"
    difference = np.max(np.abs(grad - (torch_grad if torch_grad is not None else fd)))
    report.headline(f"∂NLL/∂θ through potrf/trsm = {_vector(grad)}; largest difference from {reference} "
                    f"{difference:.1e}")
    if torch_grad is not None:
        report.close("value vs PyTorch (float64)", value, torch_value, TORCH_RTOL)
        report.close("gradient vs PyTorch's autograd (float64)", grad, torch_grad, TORCH_RTOL)
    report.close("gradient vs central differences", grad, fd, FD_RTOL)
