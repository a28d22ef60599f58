"""Paper 004 (Seeger et al., "Auto-Differentiating Linear Algebra"): differentiable Cholesky, LQ and eigen operators and their four applications.

What the paper says
-------------------
§4 gives the backward (pullback) expression of each operator, "along with
details relevant for an efficient implementation":

* potrf, A = LLᵀ: "Ā = ½ L⁻ᵀ copyltu(LᵀL̄) L⁻¹" — computed in place by "the
  multiplication with Lᵀ and the backsubstitution operators", no inverse;
* trsm (four cases), e.g. B = L⁻¹A ⇒ Ā = L⁻ᵀB̄, L̄ = −tril(ĀBᵀ); trmm (four
  cases), e.g. B = LA ⇒ Ā = LᵀB̄, L̄ = tril(B̄Aᵀ); syrk, B = αAAᵀ ⇒
  Ā = 2α sym(B̄)A; gemm2; potri, B = A⁻¹ ⇒ L̄ = −2 tril(B sym(B̄) L⁻ᵀ);
* gelqf, A = LQ: "Ā = L⁻ᵀ(Q̄ + copyltu(M)Q), M = LᵀL̄ − Q̄Qᵀ ... This
  expression is novel to the best of our knowledge";
* syevd, A = Uᵀ diag(λ) U: Ā = Uᵀ(sym(ŪUᵀ ∘ F) + Λ̄)U with
  F_ij = [i ≠ j]/(λ_i − λ_j) (the extraction prints "λ_i − λ_i"; the text
  below it, y_ij = (x_ij − x_ji)/(2h(λ_i − λ_j)), fixes the sign).

§3 sketches four applications of "a small number of linear algebra
operators", whose gradients come automatically ("Using our handful of linalg
operators, gradients are obtained automatically"):

* §3.1 GP regression: φ = ½(‖z‖² + n log 2π) + log|L|, A = K + λ_y I = LLᵀ,
  z = L⁻¹y; "the Cholesky factor L is computed once, then used both to
  compute z and log|L|.  In fact, lmat represents a single node in the
  computation graph"; "the ϕ expression ... contains A⁻¹, but the code does
  not use potri"; hyperparameters are learned by maximizing the marginal
  likelihood.
* §3.2 the variational sparse GP (Titsias): φ_SGP is "an upper bound to the
  negative log marginal likelihood", minimized w.r.t. the kernel parameters,
  the noise and the inducing points; sparse approximations "scale as
  O(nU²)" against the exact GP's cubic cost.  §6.2 / Fig. 2 time the
  criterion and gradient on the "power" data set (n = 9568, d = 4): "For
  U=50, MXNet with GPU takes 0.015 seconds, MXNet CPU 0.035 seconds, and GPy
  1.070 seconds."
* §3.3 Bayesian linear regression: φ = log|L| + ½(n log(2πλ_y) +
  λ_y⁻¹(‖y‖² − α‖L⁻¹Xy‖²)) with M = I + αXXᵀ = LLᵀ; with B = [I, α^½X] = LQ,
  "M = BBᵀ = LLᵀ, so that L is equal to the Cholesky factor of M" (up to the
  signs of the diagonal), and "L is computed without first computing M, which
  has numerical advantages, since B can have a smaller condition number than
  M"; hyperparameters are learned by maximizing the marginal likelihood.
* §3.4 Kalman filtering: the negative log likelihood of a linear dynamical
  system by the filter (potrf of Σ_vv, the gain by two trsm, "instead of
  computing its inverse"), its parameters "learned by gradient-based
  optimization ... Neither do we need expectation maximization, nor the
  backward pass of Kalman smoothing."

§6.1 / Fig. 1: the operators run "more than three times faster" than
TensorFlow's on a 36-core CPU (Intel MKL); the in-place backward needs "no
extra memory".

What this script does
---------------------
Everything is computed through ``jacacc.linalg`` and differentiated by
``jacacc.tensor`` (``value_and_grad``, ``grad``, ``derivative_expression``); the
applications are the functions of ``experiments/linalg_examples.py``, imported,
not copied (each of its example functions asserts its own numbers too).
PyTorch (float64 autograd) is the independent reference where it is
installed; without it those comparisons are skipped and said so.

(a) §4 operators, n = 6, random well-conditioned inputs, random cotangents:
    for potrf, trsm (4 cases), trmm (4 cases), syrk (2), gemm2 (4, α ≠ 1),
    potri, gelqf and syevd, jacacc's gradient equals the paper's closed form
    written out in NumPy/SciPy (relative 1e-9), PyTorch's autograd of the
    same operator (1e-9; potrf/syevd compared on symmetric parts, trsm's,
    trmm's and potri's triangular argument on the lower triangle, gelqf and
    syevd with jacacc's sign conventions imposed on torch's factors) and a
    central difference along a random direction of the argument's kind
    (symmetric, lower triangular or general; 1e-6).  d log|A| = A⁻¹ through
    2·sumlogdiag(potrf(A)).  Structure: the derivative of ⟨W, potrf(A)⟩
    has exactly two triangular solves and no inverse (potri, getri, getrf,
    gesv); gelqf's has one solve and no inverse.
(b) §3.1 GP regression (1-D inputs drawn from an RBF GP with ℓ = 0.7,
    σ_f² = 1.5, σ_n² = 0.05; n = 300, QUICK: 120): ``gp_regression`` checks
    the NLL's gradient against central differences and fits the three
    hyperparameters with L-BFGS-B from ``value_and_grad``: the NLL decreases,
    the fit is at least as likely as the generating parameters, ℓ and σ_n²
    within a factor 1.5 of them, σ_f² within 3.  Here also: value and
    gradient equal PyTorch's dense −log N(y | 0, K + σ_n²I) (1e-9); the
    gradient's expression holds exactly one potrf node and no inverse; the
    posterior mean by two trsm equals K_*ᵀ A⁻¹ y by a dense solve.
(c) §3.2 sparse GP: ``sparse_gp_checks`` (gradient w.r.t. θ and the inducing
    inputs Z against central differences; φ_SGP ≥ the exact NLL for U = 4,
    8, 16; equal at Z = X); here also value and both gradients equal
    PyTorch's autograd of the paper's definition written densely,
    −log N(y | 0, K̂ + λI) + tr(K_ff − K̂)/(2λ) (1e-9).  O(nU²): the FLOPs
    of the gradient program w.r.t. Z (``derivative_expression(...).flops``)
    grow by 1.9× to 2.05× when n doubles (n = 1000 … 4000) and by at most 4×
    when U doubles (U = 10 … 40); FLOPs/(nU²) stays below 20, while the
    exact GP's gradient grows by at least 7× per doubling of n (250 … 1000).  The time
    of value + gradient at U = 50 on the power-sized set (n = 9568; QUICK:
    n = 2000) is printed beside the paper's, not asserted.
(d) §3.3 Bayesian linear regression (d = 5, n = 200):
    ``bayesian_linear_regression`` (potrf and gelqf routes and the dense
    density agree to 1e-10, gradients against central differences, the
    gelqf route's gradient equals potrf's); here also: the gradient equals
    PyTorch's autograd of the dense density; gelqf's L equals potrf(M) (the
    diagonal is non-negative in jacacc, so no sign freedom is left, 1e-12);
    cond(B)² = cond(M) (1e-6); in float32 with nearly collinear features
    (cond(M) ≈ 4·10⁴) ½ log|M| by gelqf of B is at least 10× more accurate
    than by potrf of M; L-BFGS-B on the log-precisions reaches an evidence
    at least as high as the generating precisions' (gradient ≤ 1e-4 there)
    and the noise precision within 25 %.
(e) §3.4 Kalman filter (p = 3 states, q = 2 observations, one input; T = 20,
    QUICK: 10): ``kalman_filter`` (NLL equal to the dense Gaussian density of
    all observations, gradient w.r.t. A, B, L_Q, log r against central
    differences, the one-expression filter's gradient equal to the step-wise
    one); here also: the gradient equals PyTorch's autograd of the filter
    written with ``(I − KC)P`` instead of the Joseph form (1e-9); the noise
    covariances Q = L_Q L_Qᵀ and R fitted from Q = R = I by L-BFGS-B on
    T = 50 steps (gradient only, no EM, no smoother) reach a likelihood at
    least as high as the generating parameters', each R entry within a
    factor 1.5.
(f) Information, not asserted (paper §6.1 compares MXNet with TensorFlow on
    a 36-core MKL machine): the time of potrf's forward + backward (the
    gradient of ⟨L̄, potrf(A)⟩) in jacacc and PyTorch at n = 512 (QUICK: 256),
    best of 11 interleaved warm calls, one thread each, and jacacc's peak
    memory in n × n arrays (tracemalloc).  ``experiments/linalg_benchmark.py`` measures each
    backward alone against PyTorch and JAX.

Run ``python paper_reproductions/004_differentiable_linalg.py``; ``main()``
returns 0 when every check passes (an ``AssertionError`` otherwise).
``QUICK=1`` in the environment uses the smaller sizes above (the tests do;
about 5 s on two shared cores, the full run about 10 s).  BLAS, LAPACK and
PyTorch run one thread each unless ``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` say otherwise.
"""

from __future__ import annotations

import math
import os
import re
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# One thread per library, as experiments/linalg_benchmark.py's default: on two shared cores NumPy's and SciPy's
# OpenBLAS and PyTorch's OpenMP pools, each two threads, wait on one another (potrf's gradient at n = 256 took
# 0.3 s instead of 4 ms) — the script runs three times faster and its printed timings mean something.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import scipy.linalg as sl  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

import jacacc.tensor as jt  # noqa: E402
from jacacc import linalg  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import linalg_examples as le  # noqa: E402  (experiments/ is not a package)

try:
    import torch
except ImportError:  # pragma: no cover - torch is in the dev environment
    torch = None

QUICK = bool(os.environ.get("QUICK"))
SEED = 0
OP_N = 6
CLOSED_FORM_RTOL = 1e-9   # jacacc against the paper's formula and PyTorch: rounding only
FD_RTOL = 1e-6            # central differences, h = 1e-6
GP_N = 120 if QUICK else 300
FLOP_NS, FLOP_US = (1000, 2000, 4000), (10, 20, 40)
SPARSE_TIMING_N = 2000 if QUICK else le.SPARSE_N
PAPER_SPARSE_U50 = {"MXNet GPU": 0.015, "MXNet CPU": 0.035, "GPy": 1.070}  # seconds, paper 004 Fig. 2
BLR_N, BLR_D = 200, 5
KALMAN_T = 10 if QUICK else 20
KALMAN_FIT_T = 50
TIMING_N = 256 if QUICK else 512
FORBIDDEN = {"potri", "getri", "getrf", "gesv", "inverse", "inv"}  # inverses and general solves

if torch is not None:
    torch.set_default_dtype(torch.float64)


# =========================================================================== helpers
def sym(X: np.ndarray) -> np.ndarray:
    return 0.5 * (X + X.T)


def copyltu(X: np.ndarray) -> np.ndarray:
    """The paper's copyltu: the lower triangle copied to the upper."""
    return np.tril(X) + np.tril(X, -1).T


def rel(computed: Any, reference: Any) -> float:
    """Largest entry difference relative to max(max|reference|, 1e-300)."""
    computed, reference = np.asarray(computed, dtype=float), np.asarray(reference, dtype=float)
    return float(np.max(np.abs(computed - reference))) / max(float(np.max(np.abs(reference))), 1e-300)


def lower_solve(L: np.ndarray, X: np.ndarray, transpose: bool = False) -> np.ndarray:
    """L⁻¹X (``transpose``: L⁻ᵀX), L lower triangular."""
    return sl.solve_triangular(L, X, lower=True, trans="T" if transpose else "N")


def operator_names(expression: Any) -> list[str]:
    """The operator and function names in a rendered derivative expression, in order of appearance."""
    return re.findall(r"\b([a-z_][a-z0-9_]*)[\[(]", str(expression))


def t(x: np.ndarray) -> Any:
    """A float64 torch leaf that requires its gradient."""
    return torch.tensor(np.asarray(x, dtype=float), requires_grad=True)


def torch_grads(value: Any, leaves: Sequence[Any]) -> tuple[float, list[np.ndarray]]:
    grads = torch.autograd.grad(value, list(leaves))
    return float(value.detach()), [g.detach().numpy() for g in grads]


def best_times(calls: dict[str, Callable[[], Any]], samples: int = 7) -> dict[str, float]:
    """The fastest of ``samples`` warm calls of each entry, sampled in turn (load on shared cores hits all alike;
    the minimum is the least disturbed call)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()
    for _ in range(samples):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: min(ts) for name, ts in times.items()}


# =========================================================================== (a) §4 operators
def well_conditioned(n: int, rng: np.random.Generator) -> np.ndarray:
    M = rng.standard_normal((n, n))
    return M @ M.T / n + np.eye(n)


def distinct_spectrum(n: int, rng: np.random.Generator) -> np.ndarray:
    rotation = np.linalg.qr(rng.standard_normal((n, n)))[0]
    return rotation.T @ np.diag(1.0 + np.arange(n)) @ rotation


class Case:
    """One operator call: its jacacc form, the paper's backward and the PyTorch peer.

    ``kinds`` says, per argument, in which space its gradient lives and its
    central difference moves: ``"general"``, ``"lower"`` (a triangular
    argument: compared on the lower triangle) or ``"symmetric"`` (compared on
    the symmetric part).
    """

    def __init__(self, name: str, op: Callable[..., Any], args: Sequence[np.ndarray], kinds: Sequence[str],
                 paper: Callable[..., list[np.ndarray]], peer: Callable[..., Any] | None) -> None:
        self.name, self.op, self.args, self.kinds, self.paper, self.peer = name, op, list(args), list(kinds), paper, peer


def project(G: np.ndarray, kind: str) -> np.ndarray:
    if kind == "lower":
        return np.tril(G)
    return sym(G) if kind == "symmetric" else G


def direction(shape: tuple[int, ...], kind: str, rng: np.random.Generator) -> np.ndarray:
    D = rng.standard_normal(shape)
    return project(D, kind) if kind != "symmetric" else D + D.T


def operator_cases(rng: np.random.Generator) -> list[Case]:
    n = OP_N
    A = well_conditioned(n, rng)
    L = np.linalg.cholesky(well_conditioned(n, rng))
    G = rng.standard_normal((n, 3))          # a general right-hand side
    H = rng.standard_normal((3, n))          # ... for the right-side cases
    cases: list[Case] = []

    # potrf, A = LLᵀ: Ā = ½ L⁻ᵀ copyltu(LᵀL̄) L⁻¹
    def potrf_paper(A: np.ndarray, Lb: np.ndarray) -> list[np.ndarray]:
        F = np.linalg.cholesky(A)
        return [0.5 * lower_solve(F, lower_solve(F, copyltu(F.T @ Lb), transpose=True).T, transpose=True).T]

    cases.append(Case("potrf", linalg.potrf, [A], ["symmetric"], potrf_paper,
                      lambda A: torch.linalg.cholesky(A)))

    # trsm, the four cases of §4.2 (lower L; transpose, rightside)
    def trsm_paper(transpose: bool, rightside: bool) -> Callable[..., list[np.ndarray]]:
        def back(L: np.ndarray, X: np.ndarray, Bb: np.ndarray) -> list[np.ndarray]:
            if not rightside and not transpose:      # B = L⁻¹A: Ā = L⁻ᵀB̄, L̄ = −tril(ĀBᵀ)
                B = lower_solve(L, X)
                Ab = lower_solve(L, Bb, transpose=True)
                return [-np.tril(Ab @ B.T), Ab]
            if not rightside and transpose:          # B = L⁻ᵀA: Ā = L⁻¹B̄, L̄ = −tril(BĀᵀ)
                B = lower_solve(L, X, transpose=True)
                Ab = lower_solve(L, Bb)
                return [-np.tril(B @ Ab.T), Ab]
            if rightside and not transpose:          # B = AL⁻¹: Ā = B̄L⁻ᵀ, L̄ = −tril(BᵀĀ)
                B = lower_solve(L, X.T, transpose=True).T
                Ab = lower_solve(L, Bb.T).T
                return [-np.tril(B.T @ Ab), Ab]
            B = lower_solve(L, X.T).T                # B = AL⁻ᵀ: Ā = B̄L⁻¹, L̄ = −tril(ĀᵀB)
            Ab = lower_solve(L, Bb.T, transpose=True).T
            return [-np.tril(Ab.T @ B), Ab]
        return back

    def trsm_peer(transpose: bool, rightside: bool) -> Callable[..., Any]:
        def peer(L: Any, X: Any) -> Any:
            T = torch.tril(L)
            op = T.mT if transpose else T
            return torch.linalg.solve_triangular(op, X, upper=transpose, left=not rightside)
        return peer

    # trmm, the four cases: B = LA ⇒ Ā = LᵀB̄, L̄ = tril(B̄Aᵀ); B = LᵀA ⇒ Ā = LB̄, L̄ = tril(AB̄ᵀ);
    # B = AL ⇒ Ā = B̄Lᵀ, L̄ = tril(AᵀB̄); B = ALᵀ ⇒ Ā = B̄L, L̄ = tril(B̄ᵀA)
    def trmm_paper(transpose: bool, rightside: bool) -> Callable[..., list[np.ndarray]]:
        def back(L: np.ndarray, X: np.ndarray, Bb: np.ndarray) -> list[np.ndarray]:
            L = np.tril(L)
            if not rightside and not transpose:
                return [np.tril(Bb @ X.T), L.T @ Bb]
            if not rightside and transpose:
                return [np.tril(X @ Bb.T), L @ Bb]
            if rightside and not transpose:
                return [np.tril(X.T @ Bb), Bb @ L.T]
            return [np.tril(Bb.T @ X), Bb @ L]
        return back

    def trmm_peer(transpose: bool, rightside: bool) -> Callable[..., Any]:
        def peer(L: Any, X: Any) -> Any:
            T = torch.tril(L)
            op = T.mT if transpose else T
            return X @ op if rightside else op @ X
        return peer

    for transpose in (False, True):
        for rightside in (False, True):
            X = H if rightside else G
            label = f"(transpose={transpose}, rightside={rightside})"
            cases.append(Case(f"trsm{label}",
                              lambda L, X, tr=transpose, rs=rightside: linalg.trsm(L, X, transpose=tr, rightside=rs),
                              [L, X], ["lower", "general"], trsm_paper(transpose, rightside),
                              trsm_peer(transpose, rightside)))
            cases.append(Case(f"trmm{label}",
                              lambda L, X, tr=transpose, rs=rightside: linalg.trmm(L, X, transpose=tr, rightside=rs),
                              [L, X], ["lower", "general"], trmm_paper(transpose, rightside),
                              trmm_peer(transpose, rightside)))

    # syrk: B = αAAᵀ ⇒ Ā = 2α sym(B̄)A; B = αAᵀA ⇒ Ā = 2α A sym(B̄)
    alpha = 0.7
    cases.append(Case("syrk", lambda X: linalg.syrk(X, alpha=alpha), [G], ["general"],
                      lambda X, Bb: [2 * alpha * sym(Bb) @ X], lambda X: alpha * X @ X.mT))
    cases.append(Case("syrk(transpose=True)", lambda X: linalg.syrk(X, alpha=alpha, transpose=True), [G],
                      ["general"], lambda X, Bb: [2 * alpha * X @ sym(Bb)], lambda X: alpha * X.mT @ X))

    # gemm2: C = α t_a(A) t_b(B)
    for ta in (False, True):
        for tb in (False, True):
            P = rng.standard_normal((4, n) if ta else (n, 4))
            Q = rng.standard_normal((3, 4) if tb else (4, 3))

            def gemm2_paper(P: np.ndarray, Q: np.ndarray, Cb: np.ndarray, ta: bool = ta, tb: bool = tb
                            ) -> list[np.ndarray]:
                opP, opQ = (P.T if ta else P), (Q.T if tb else Q)
                dP, dQ = alpha * Cb @ opQ.T, alpha * opP.T @ Cb   # gradients w.r.t. op(P), op(Q)
                return [dP.T if ta else dP, dQ.T if tb else dQ]

            cases.append(Case(f"gemm2(transpose_a={ta}, transpose_b={tb})",
                              lambda P, Q, ta=ta, tb=tb: linalg.gemm2(P, Q, alpha=alpha, transpose_a=ta,
                                                                      transpose_b=tb),
                              [P, Q], ["general", "general"], gemm2_paper,
                              lambda P, Q, ta=ta, tb=tb: alpha * (P.mT if ta else P) @ (Q.mT if tb else Q)))

    # potri, B = A⁻¹ from L: L̄ = −2 tril(B sym(B̄) L⁻ᵀ)
    def potri_paper(L: np.ndarray, Bb: np.ndarray) -> list[np.ndarray]:
        L = np.tril(L)
        B = np.linalg.inv(L @ L.T)
        return [-2 * np.tril(lower_solve(L, (B @ sym(Bb)).T).T)]  # (B sym(B̄)) L⁻ᵀ = (L⁻¹ (B sym(B̄))ᵀ)ᵀ

    cases.append(Case("potri", linalg.potri, [L], ["lower"], potri_paper,
                      lambda L: torch.cholesky_inverse(torch.tril(L))))

    # gelqf, A = LQ (m ≤ n): Ā = L⁻ᵀ(Q̄ + copyltu(M)Q), M = LᵀL̄ − Q̄Qᵀ
    W = rng.standard_normal((4, n)) + 2 * np.eye(4, n)

    def gelqf_paper(A: np.ndarray, Qb: np.ndarray, Lb: np.ndarray) -> list[np.ndarray]:
        Q, L = linalg.gelqf(A)
        M = L.T @ Lb - Qb @ Q.T
        return [lower_solve(L, Qb + copyltu(M) @ Q, transpose=True)]

    def gelqf_peer(A: Any) -> tuple[Any, Any]:
        Qt, R = torch.linalg.qr(A.mT)                       # Aᵀ = Qt R  ⇔  A = Rᵀ Qtᵀ = L Q
        s = torch.sign(torch.diagonal(R)).detach()          # jacacc's L has a non-negative diagonal
        return (Qt * s).mT, R.mT * s

    cases.append(Case("gelqf", linalg.gelqf, [W], ["general"], gelqf_paper, gelqf_peer))

    # syevd, A = Uᵀ diag(λ) U: Ā = Uᵀ(sym(ŪUᵀ ∘ F) + diag(λ̄))U, F_ij = [i ≠ j]/(λ_i − λ_j)
    S = distinct_spectrum(n, rng)

    def syevd_paper(A: np.ndarray, Ub: np.ndarray, lb: np.ndarray) -> list[np.ndarray]:
        U, lam = linalg.syevd(A)
        gaps = lam[:, None] - lam[None, :]
        F = np.where(np.eye(len(lam), dtype=bool), 0.0, 1.0 / np.where(gaps == 0, 1.0, gaps))
        return [U.T @ (sym((Ub @ U.T) * F) + np.diag(lb)) @ U]

    def syevd_peer(A: Any) -> tuple[Any, Any]:
        lam, V = torch.linalg.eigh(A)
        U = V.mT
        big = torch.argmax(torch.abs(U), dim=1, keepdim=True)
        s = torch.sign(torch.gather(U, 1, big)).detach()    # each row's largest-magnitude entry positive
        return U * s, lam

    cases.append(Case("syevd", linalg.syevd, [S], ["symmetric"], syevd_paper, syevd_peer))
    return cases


def check_operators(rng: np.random.Generator) -> None:
    print(f"(a) §4: each operator's gradient (n = {OP_N}) against the paper's closed form, PyTorch and central "
          "differences (largest relative difference)")
    print(f"{'operator':<44} {'vs paper':>10} {'vs torch':>10} {'vs central diff.':>17}")
    for case in operator_cases(rng):
        outputs = case.op(*case.args)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        cotangents = [rng.standard_normal(np.shape(o)) for o in outputs]

        def phi(*args: Any, case: Case = case, cotangents: list[np.ndarray] = cotangents) -> Any:
            out = case.op(*args)
            out = out if isinstance(out, tuple) else (out,)
            return sum(np.sum(w * o) for w, o in zip(cotangents, out, strict=True))

        argnums = tuple(range(len(case.args)))
        _, grads = jt.value_and_grad(phi, argnum=argnums)(*case.args)
        paper = case.paper(*case.args, *cotangents)
        vs_paper = max(rel(project(g, k), project(p, k)) for g, p, k in zip(grads, paper, case.kinds, strict=True))
        assert vs_paper <= CLOSED_FORM_RTOL, (case.name, "paper", vs_paper)

        vs_torch = float("nan")
        if torch is not None and case.peer is not None:
            leaves = [t(a) for a in case.args]
            out = case.peer(*leaves)
            out = out if isinstance(out, tuple) else (out,)
            for mine, theirs in zip(outputs, out, strict=True):  # the same factors (sign conventions imposed)
                assert rel(theirs.detach().numpy(), mine) <= CLOSED_FORM_RTOL, (case.name, "forward")
            value = sum(torch.sum(torch.tensor(w) * o) for w, o in zip(cotangents, out, strict=True))
            _, peer_grads = torch_grads(value, leaves)
            vs_torch = max(rel(project(g, k), project(p, k))
                           for g, p, k in zip(grads, peer_grads, case.kinds, strict=True))
            assert vs_torch <= CLOSED_FORM_RTOL, (case.name, "torch", vs_torch)

        vs_fd = 0.0
        h = 1e-6
        for k, kind in enumerate(case.kinds):
            D = direction(np.shape(case.args[k]), kind, rng)
            plus, minus = list(case.args), list(case.args)
            plus[k], minus[k] = case.args[k] + h * D, case.args[k] - h * D
            fd = (float(phi(*plus)) - float(phi(*minus))) / (2 * h)
            ad = float(np.sum(grads[k] * D))
            vs_fd = max(vs_fd, abs(ad - fd) / max(abs(fd), 1e-12))
        assert vs_fd <= FD_RTOL, (case.name, "central differences", vs_fd)
        print(f"{case.name:<44} {vs_paper:>10.1e} {vs_torch:>10.1e} {vs_fd:>17.1e}")

    # §3.1: log|A| = 2 log|L| = 2 Σ log l_ii, and d log|A| / dA = A⁻¹
    A = well_conditioned(OP_N, rng)
    logdet = jt.grad(lambda A: 2 * linalg.sumlogdiag(linalg.potrf(A)))(A)
    assert rel(logdet, np.linalg.inv(A)) <= CLOSED_FORM_RTOL
    print(f"d log|A| by 2·sumlogdiag(potrf(A)) equals A⁻¹ (relative difference {rel(logdet, np.linalg.inv(A)):.1e})")

    # structure: potrf's backward is two triangular solves, gelqf's one; no inverse anywhere
    W = rng.standard_normal((OP_N, OP_N))
    names = operator_names(jt.derivative_expression(lambda A: np.sum(W * linalg.potrf(A)), A, order=1,
                                                    mode="reverse"))
    assert names.count("trsm") == 2 and not FORBIDDEN & set(names), names
    B = rng.standard_normal((4, OP_N)) + 2 * np.eye(4, OP_N)
    Wq, Wl = rng.standard_normal((4, OP_N)), rng.standard_normal((4, 4))
    names_lq = operator_names(jt.derivative_expression(
        lambda B: np.sum(Wq * linalg.gelqf(B)[0]) + np.sum(Wl * linalg.gelqf(B)[1]), B, order=1, mode="reverse"))
    assert names_lq.count("trsm") == 1 and not FORBIDDEN & set(names_lq), names_lq
    print("potrf's backward: 2 triangular solves, gelqf's: 1; no inverse (potri/getri/gesv) in either")


# =========================================================================== (b) §3.1 GP regression
def rbf_torch(theta: Any, P: Any, R: Any) -> Any:
    """σ_f² exp(−|p − r|²/(2ℓ²)) between the rows of P and R (squared distances expanded: no sqrt, whose
    derivative at a zero distance is undefined)."""
    D = torch.sum(P * P, 1)[:, None] + torch.sum(R * R, 1)[None, :] - 2 * P @ R.mT
    return torch.exp(theta[1] - 0.5 * torch.exp(-2 * theta[0]) * D)


def gp_nll_torch(theta: Any, X: Any, y: Any) -> Any:
    """−log N(y | 0, K + σ_n² I), the RBF kernel from the definition (dense, PyTorch)."""
    n = X.shape[0]
    A = rbf_torch(theta, X, X) + torch.exp(theta[2]) * torch.eye(n)
    return 0.5 * (y.mT @ torch.linalg.solve(A, y)).squeeze() + 0.5 * torch.logdet(A) + 0.5 * n * math.log(2 * math.pi)


def check_gp_regression() -> None:
    print(f"\n(b) §3.1 GP regression, n = {GP_N}: gradient by potrf/trsm, hyperparameters by L-BFGS-B")
    start = time.perf_counter()
    result = le.gp_regression(GP_N, SEED)
    fit, check = result["fit"], result["gradient_check"]
    print(f"gradient at n = {check['n']} against central differences: {check['max_rel_error']:.1e}")
    print(f"NLL {fit['nll_init']:.4f} -> {fit['nll_fit']:.4f} in {fit['iterations']} iterations "
          f"(generating parameters: {fit['nll_true']:.4f}); max |gradient| at the fit {fit['grad_max_abs_at_fit']:.1e}")
    for key in ("lengthscale", "signal_variance", "noise_variance"):
        print(f"  {key:<16} fitted {fit['fitted'][key]:.4f}   generating {fit['true'][key]:.4f}   "
              f"ratio {fit['ratio_fitted_over_true'][key]:.3f}")
    assert fit["recovery_checked"] and fit["nll_fit"] <= fit["nll_true"] + 1e-9 * abs(fit["nll_true"])
    ratios = fit["ratio_fitted_over_true"]
    assert 1 / 1.5 <= ratios["lengthscale"] <= 1.5 and 1 / 1.5 <= ratios["noise_variance"] <= 1.5, ratios
    assert 1 / 3 <= ratios["signal_variance"] <= 3, ratios

    data = le.gp_data(40, SEED + 7)
    X, y = data["X"], data["y"]
    theta = np.log([1.1, 0.9, 0.2])
    value, (grad,) = le.value_and_grad(le.gp_nll, (0,))(theta, X, y)
    if torch is not None:
        leaf = t(theta)
        t_value, (t_grad,) = torch_grads(gp_nll_torch(leaf, torch.tensor(X), torch.tensor(y)), [leaf])
        assert abs(value - t_value) <= CLOSED_FORM_RTOL * abs(t_value), (value, t_value)
        assert rel(grad, t_grad) <= CLOSED_FORM_RTOL, (grad, t_grad)
        print(f"value and gradient (n = 40) equal PyTorch's dense −log N(y | 0, K + σ_n²I): "
              f"{abs(value - t_value) / abs(t_value):.1e}, {rel(grad, t_grad):.1e}")
    else:
        print("PyTorch not installed: the comparison with its autograd is skipped")

    names = operator_names(jt.derivative_expression(le.gp_nll, theta, X, y, order=1, mode="reverse"))
    assert names.count("potrf") == 1, names                  # L is one node, shared by z and log|L|
    assert "trsm" in names and not FORBIDDEN & set(names), names
    print(f"the gradient's expression: potrf ×{names.count('potrf')}, trsm ×{names.count('trsm')}, "
          "no inverse (potri/getri/gesv)")

    # prediction: the posterior mean by two triangular solves equals K_*ᵀ A⁻¹ y
    Xs = np.linspace(0.0, 8.0, 25)[:, None]
    mean, sd = le.gp_posterior(theta, X, y, Xs)
    K = le.rbf_kernel(le.squared_distances_self(X), *theta[:2])
    Ks = le.rbf_kernel(le.squared_distances(X, Xs), *theta[:2])
    dense_mean = Ks.T @ np.linalg.solve(K + math.exp(theta[2]) * np.eye(len(X)), y)
    assert rel(mean, dense_mean[:, 0]) <= 1e-9 and np.all(sd >= 0)
    print(f"posterior mean by trsm equals the dense solve ({rel(mean, dense_mean[:, 0]):.1e}); "
          f"claim (b) holds ({time.perf_counter() - start:.1f} s)")



# =========================================================================== (c) §3.2 sparse GP
def sparse_bound_torch(theta: Any, Z: Any, X: Any, y: Any, jitter: float) -> Any:
    """The paper's definition, densely: −log N(y | 0, K̂ + λI) + tr(K_ff − K̂)/(2λ), K̂ = K_ufᵀ K_uu⁻¹ K_uf."""
    n, U = X.shape[0], Z.shape[0]
    sf2, sn2 = torch.exp(theta[1]), torch.exp(theta[2])
    Kuu = rbf_torch(theta, Z, Z) + jitter * sf2 * torch.eye(U)
    Kuf = rbf_torch(theta, Z, X)
    Khat = Kuf.mT @ torch.linalg.solve(Kuu, Kuf)
    S = Khat + sn2 * torch.eye(n)
    nll = 0.5 * (y.mT @ torch.linalg.solve(S, y)).squeeze() + 0.5 * torch.logdet(S) + 0.5 * n * math.log(2 * math.pi)
    return nll + 0.5 * (n * sf2 - torch.trace(Khat)) / sn2    # the RBF kernel's diagonal is σ_f²


def check_sparse_gp(rng: np.random.Generator) -> None:
    print("\n(c) §3.2 variational sparse GP (Titsias' bound): gradient w.r.t. θ and the inducing inputs Z")
    start = time.perf_counter()
    checks = le.sparse_gp_checks(SEED)
    gradient = checks["gradient"]
    print(f"gradient (n = {gradient['n']}, U = {gradient['U']}) against central differences: θ "
          f"{gradient['max_rel_error_theta']:.1e}, Z {gradient['max_rel_error_Z']:.1e}")
    gaps = ", ".join(f"U = {row['U']}: {row['bound_minus_nll']:.4f}" for row in checks["bound_above_nll"])
    print(f"φ_SGP − exact NLL (n = 40) ≥ 0: {gaps}; at Z = X: relative gap {checks['z_equals_x']['rel_gap']:.1e}")
    assert all(row["bound_minus_nll"] >= 0 for row in checks["bound_above_nll"])
    assert checks["z_equals_x"]["rel_gap"] <= 1e-6

    data = le.power_like_data(50, le.SPARSE_D, SEED + 11)
    X, y = data["X"], data["y"]
    Z = X[rng.choice(len(X), 7, replace=False)] + 0.1 * rng.standard_normal((7, le.SPARSE_D))
    theta = np.log([1.2, 0.8, 0.15])
    value, (g_theta, g_z) = le.value_and_grad(le.sparse_gp_bound, (0, 1))(theta, Z, X, y)
    if torch is not None:
        leaves = [t(theta), t(Z)]
        t_value, (t_theta, t_z) = torch_grads(
            sparse_bound_torch(leaves[0], leaves[1], torch.tensor(X), torch.tensor(y), le.JITTER), leaves)
        errors = (abs(value - t_value) / abs(t_value), rel(g_theta, t_theta), rel(g_z, t_z))
        assert max(errors) <= CLOSED_FORM_RTOL, errors
        print("value and gradients (n = 50, U = 7) equal PyTorch's autograd of the dense definition: "
              f"value {errors[0]:.1e}, θ {errors[1]:.1e}, Z {errors[2]:.1e}")
    else:
        print("PyTorch not installed: the comparison with its autograd is skipped")

    # O(nU²): FLOPs of the gradient program w.r.t. Z
    flops: dict[tuple[int, int], int] = {}
    for n in FLOP_NS:
        Xn, yn = rng.standard_normal((n, le.SPARSE_D)), rng.standard_normal((n, 1))
        for U in FLOP_US:
            Zu = Xn[:U].copy()
            flops[n, U] = jt.derivative_expression(le.sparse_gp_bound, theta, Zu, Xn, yn, argnum=1, order=1,
                                                   mode="reverse").flops
    print(f"FLOPs of the gradient w.r.t. Z, divided by nU²:\n{'n':>6} " + " ".join(f"{'U = ' + str(U):>9}"
                                                                                 for U in FLOP_US))
    for n in FLOP_NS:
        print(f"{n:>6} " + " ".join(f"{flops[n, U] / (n * U * U):>9.2f}" for U in FLOP_US))
    for (n, U), f in flops.items():
        assert f / (n * U * U) < 20, (n, U, f)
        if (2 * n, U) in flops:
            assert 1.9 <= flops[2 * n, U] / f <= 2.05, ("linear in n", n, U, flops[2 * n, U] / f)
        if (n, 2 * U) in flops:
            assert flops[n, 2 * U] / f <= 4.0, ("at most quadratic in U", n, U, flops[n, 2 * U] / f)
    exact = {}
    for n in (250, 500, 1000):
        Xn, yn = rng.standard_normal((n, 1)), rng.standard_normal((n, 1))
        exact[n] = jt.derivative_expression(le.gp_nll, theta, Xn, yn, order=1, mode="reverse").flops
    growth = [exact[2 * n] / exact[n] for n in (250, 500)]
    assert min(growth) >= 7, growth
    n, U = FLOP_NS[-1], FLOP_US[-1]
    print(f"the exact GP's gradient: ×{growth[0]:.2f}, ×{growth[1]:.2f} per doubling of n (cubic); the sparse "
          f"one ×{flops[n, U] / flops[n // 2, U]:.2f} (linear), ×{flops[n, U] / flops[n, U // 2]:.2f} per doubling "
          "of U (at most quadratic)")

    # the paper's Fig. 2 point: U = 50 on the power-sized set (timing printed, not asserted)
    tdata = le.power_like_data(SPARSE_TIMING_N, le.SPARSE_D, SEED)
    Zt = tdata["X"][rng.choice(SPARSE_TIMING_N, 50, replace=False)].copy()
    theta_t = np.log([le.SPARSE_PARAMS[k] for k in ("lengthscale", "signal_variance", "noise_variance")])
    vg = le.value_and_grad(le.sparse_gp_bound, (0, 1))
    first = time.perf_counter()
    vg(theta_t, Zt, tdata["X"], tdata["y"])
    first = time.perf_counter() - first
    warm = best_times({"vg": lambda: vg(theta_t, Zt, tdata["X"], tdata["y"])}, samples=3)["vg"]
    paper = ", ".join(f"{k} {v:.3f} s" for k, v in PAPER_SPARSE_U50.items())
    print(f"bound + gradient at n = {SPARSE_TIMING_N}, d = {le.SPARSE_D}, U = 50: {warm:.3f} s per warm call "
          f"(first call, with tracing and planning, {first:.2f} s); paper 004 Fig. 2 at n = 9568: {paper} "
          "(not asserted: other hardware)")
    print(f"claim (c) holds ({time.perf_counter() - start:.1f} s)")


# =========================================================================== (d) §3.3 Bayesian linear regression
def blr_potrf(log_prec: Any, X: Any, y: Any) -> Any:
    return le.blr_neg_log_evidence(log_prec, X, y, "potrf")


def blr_dense_torch(log_prec: Any, X: Any, y: Any) -> Any:
    """−log N(y | 0, λ_w XᵀX + λ_y I) (PyTorch, dense): the paper's definition of the criterion."""
    noise_var, prior_var = torch.exp(-log_prec[0]), torch.exp(-log_prec[1])
    n = X.shape[1]
    S = prior_var * X.mT @ X + noise_var * torch.eye(n)
    return 0.5 * (y.mT @ torch.linalg.solve(S, y)).squeeze() + 0.5 * torch.logdet(S) + 0.5 * n * math.log(2 * math.pi)


def check_bayesian_linear_regression(rng: np.random.Generator) -> None:
    print(f"\n(d) §3.3 Bayesian linear regression, d = {BLR_D}, n = {BLR_N}: potrf of M against gelqf of B")
    start = time.perf_counter()
    out = le.bayesian_linear_regression(BLR_N, BLR_D, SEED)
    print(f"−log P(y): potrf {out['value_potrf']:.10f}, gelqf {out['value_gelqf']:.10f}, dense "
          f"{out['value_dense']:.10f}; gradient against central differences: log-precisions "
          f"{out['potrf_gradient']['max_rel_error_log_prec']:.1e}, X {out['potrf_gradient']['max_rel_error_X']:.1e}")
    lq = out["gelqf_gradient"]
    assert "skipped" not in lq, lq   # gelqf is differentiable: its route's gradient is checked by the example
    print(f"the gelqf route's gradient equals potrf's: {lq['vs_potrf_rel_log_prec']:.1e}, {lq['vs_potrf_rel_X']:.1e}")

    X = rng.standard_normal((BLR_D, BLR_N))
    w = rng.standard_normal(BLR_D) / math.sqrt(le.BLR_PRIOR_PRECISION)
    y = (X.T @ w + rng.standard_normal(BLR_N) / math.sqrt(le.BLR_NOISE_PRECISION))[:, None]
    log_true = np.log([le.BLR_NOISE_PRECISION, le.BLR_PRIOR_PRECISION])
    log_prec = log_true + np.array([0.3, -0.4])
    vg = le.value_and_grad(blr_potrf, (0, 1))
    value, (g_prec, g_x) = vg(log_prec, X, y)
    if torch is not None:
        leaves = [t(log_prec), t(X)]
        t_value, (t_prec, t_x) = torch_grads(blr_dense_torch(leaves[0], leaves[1], torch.tensor(y)), leaves)
        errors = (abs(value - t_value) / abs(t_value), rel(g_prec, t_prec), rel(g_x, t_x))
        assert max(errors) <= CLOSED_FORM_RTOL, errors
        print(f"value and gradients equal PyTorch's autograd of the dense density: value {errors[0]:.1e}, "
              f"log-precisions {errors[1]:.1e}, X {errors[2]:.1e}")
    else:
        print("PyTorch not installed: the comparison with its autograd is skipped")

    # M = BBᵀ = LLᵀ: gelqf's L is potrf(M) (jacacc's L has a non-negative diagonal: no sign freedom left)
    alpha = math.exp(log_prec[0] - log_prec[1])
    M = np.eye(BLR_D) + alpha * X @ X.T
    B = np.hstack([np.eye(BLR_D), math.sqrt(alpha) * X])
    _, L_lq = linalg.gelqf(B)
    assert rel(L_lq, linalg.potrf(M)) <= 1e-12, rel(L_lq, linalg.potrf(M))
    cond_b, cond_m = np.linalg.cond(B), np.linalg.cond(M)
    assert abs(cond_b**2 / cond_m - 1) <= 1e-6, (cond_b, cond_m)
    print(f"gelqf(B)'s L equals potrf(M) ({rel(L_lq, linalg.potrf(M)):.1e}); cond(B) = {cond_b:.4g}, "
          f"cond(M) = {cond_m:.4g} = cond(B)²")

    # the numerical advantage, in float32: nearly collinear features
    X32 = (rng.standard_normal((1, BLR_N)) + 1e-2 * rng.standard_normal((BLR_D, BLR_N))).astype(np.float32)
    a32 = np.float32(100.0)
    X64 = X32.astype(np.float64)
    M64 = np.eye(BLR_D) + 100.0 * X64 @ X64.T
    half_logdet = 0.5 * np.linalg.slogdet(M64)[1]
    by_potrf = float(linalg.sumlogdiag(linalg.potrf(np.eye(BLR_D, dtype=np.float32) + a32 * linalg.syrk(X32))))
    _, L32 = linalg.gelqf(np.hstack([np.eye(BLR_D, dtype=np.float32), np.sqrt(a32) * X32]))
    assert L32.dtype == np.float32
    by_gelqf = float(linalg.sumlogdiag(L32))
    err_potrf, err_gelqf = abs(by_potrf - half_logdet) / half_logdet, abs(by_gelqf - half_logdet) / half_logdet
    print(f"float32, cond(M) = {np.linalg.cond(M64):.3g} (cond(B) = {np.linalg.cond(np.hstack([np.eye(BLR_D), 10 * X64])):.3g}): "
          f"½ log|M| relative error by potrf {err_potrf:.1e}, by gelqf {err_gelqf:.1e}")
    assert err_gelqf * 10 <= err_potrf, (err_potrf, err_gelqf)

    # hyperparameter learning: maximize the evidence over the log-precisions
    vg_prec = le.value_and_grad(blr_potrf, (0,))

    def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
        value, (g,) = vg_prec(v, X, y)
        return value, g

    fit = minimize(objective, np.zeros(2), jac=True, method="L-BFGS-B", options={"gtol": 1e-8, "ftol": 1e-14})
    nll_true = objective(log_true)[0]
    fitted = np.exp(fit.x)
    print(f"evidence fit (L-BFGS-B, {fit.nit} iterations): −log P(y) {objective(np.zeros(2))[0]:.4f} -> {fit.fun:.4f} "
          f"(generating precisions: {nll_true:.4f}); noise precision {fitted[0]:.3f} (generating "
          f"{le.BLR_NOISE_PRECISION}), prior precision {fitted[1]:.3f} ({le.BLR_PRIOR_PRECISION})")
    assert fit.fun <= nll_true + 1e-9 * abs(nll_true) and np.max(np.abs(fit.jac)) <= 1e-4, fit
    assert abs(fitted[0] / le.BLR_NOISE_PRECISION - 1) <= 0.25, fitted
    print(f"claim (d) holds ({time.perf_counter() - start:.1f} s)")


# =========================================================================== (e) §3.4 Kalman filter
def kalman_nll_torch(A: Any, B: Any, Lq: Any, log_r: Any, C: Any, Y: Any, Uin: Any, m0: Any, P0: Any) -> Any:
    """The filter with the update P ← (I − KC)P and the gain by a dense solve (PyTorch)."""
    p, q = A.shape[0], C.shape[0]
    T = torch.tril(Lq)
    Q, R = T @ T.mT, torch.diag(torch.exp(log_r))
    m, P, total = m0, P0, 0.0
    for step in range(Y.shape[0]):
        S = C @ P @ C.mT + R
        Ls = torch.linalg.cholesky(S)
        e = Y[step][:, None] - C @ m
        z = torch.linalg.solve_triangular(Ls, e, upper=False)
        total = total + 0.5 * torch.sum(z * z) + torch.sum(torch.log(torch.diagonal(Ls))) + 0.5 * q * math.log(
            2 * math.pi)
        K = torch.linalg.solve(S, C @ P).mT                   # P Cᵀ S⁻¹ (P and S symmetric)
        m = A @ (m + K @ e) + B @ Uin[step][:, None]
        P = A @ ((torch.eye(p) - K @ C) @ P) @ A.mT + Q
    return total


def check_kalman(rng: np.random.Generator) -> None:
    print(f"\n(e) §3.4 Kalman filter, p = {le.KALMAN_P}, q = {le.KALMAN_Q}, T = {KALMAN_T}: the NLL by potrf/trsm and "
          "its gradient")
    start = time.perf_counter()
    out = le.kalman_filter(KALMAN_T, SEED)
    errors = ", ".join(f"{k} {v:.1e}" for k, v in out["gradient_max_rel_error"].items())
    print(f"NLL {out['value']:.10f} against the dense Gaussian's {out['value_dense']:.10f} "
          f"({out['value_vs_dense_rel']:.1e}); gradient against central differences: {errors}")
    one = out["one_expression"]
    print(f"the whole filter as one expression (T = {one['T']}): gradient equal to the step-wise one "
          f"({max(one['gradient_vs_stepwise_rel'].values()):.1e})")

    names = ("A", "B", "Lq", "log_r")
    data = le.kalman_data(KALMAN_T, SEED + 1)
    params = {k: data[k] + 0.05 * rng.standard_normal(data[k].shape) for k in names}
    params["Lq"] = np.tril(params["Lq"])
    rest = [data[k] for k in ("C", "Y", "Uin", "m0", "P0")]
    args = [params[k] for k in names] + rest
    value, grads = le.kalman_nll_and_grad(*args)
    if torch is not None:
        leaves = [t(params[k]) for k in names]
        t_value, t_grads = torch_grads(kalman_nll_torch(*leaves, *(torch.tensor(a) for a in rest)), leaves)
        errors_t = {k: rel(grads[k], g) for k, g in zip(names, t_grads, strict=True)}
        assert abs(value - t_value) <= CLOSED_FORM_RTOL * abs(t_value), (value, t_value)
        assert max(errors_t.values()) <= CLOSED_FORM_RTOL, errors_t
        print(f"value and gradient equal PyTorch's autograd of the filter written with (I − KC)P: value "
              f"{abs(value - t_value) / abs(t_value):.1e}, " + ", ".join(f"{k} {v:.1e}" for k, v in errors_t.items()))
    else:
        print("PyTorch not installed: the comparison with its autograd is skipped")

    # learning the noise covariances by gradient descent on the filter's NLL (no EM, no smoother)
    data = le.kalman_data(KALMAN_FIT_T, SEED)
    A, B = data["A"], data["B"]
    rest = [data[k] for k in ("C", "Y", "Uin", "m0", "P0")]
    p = le.KALMAN_P

    def objective(v: np.ndarray) -> tuple[float, np.ndarray]:
        value, g = le.kalman_nll_and_grad(A, B, v[:p * p].reshape(p, p), v[p * p:], *rest)
        return value, np.concatenate([g["Lq"].ravel(), g["log_r"]])

    truth = np.concatenate([data["Lq"].ravel(), data["log_r"]])
    start_v = np.concatenate([np.eye(p).ravel(), np.zeros(le.KALMAN_Q)])     # Q = I, R = I
    fit = minimize(objective, start_v, jac=True, method="L-BFGS-B", options={"maxiter": 200})
    nll_true = objective(truth)[0]
    r_fit, r_true = np.exp(fit.x[p * p:]), np.exp(data["log_r"])
    Lq_fit = np.tril(fit.x[:p * p].reshape(p, p))
    print(f"Q and R fitted by L-BFGS-B (T = {KALMAN_FIT_T}, {fit.nit} iterations): NLL {objective(start_v)[0]:.4f} "
          f"-> {fit.fun:.4f} (generating parameters: {nll_true:.4f}); R = {np.round(r_fit, 4).tolist()} (generating "
          f"{np.round(r_true, 4).tolist()}), tr Q = {np.trace(Lq_fit @ Lq_fit.T):.4f} (generating "
          f"{np.trace(np.tril(data['Lq']) @ np.tril(data['Lq']).T):.4f})")
    assert fit.fun <= nll_true + 1e-9 * abs(nll_true), (fit.fun, nll_true)
    assert np.all(np.abs(np.log(r_fit / r_true)) <= math.log(1.5)), (r_fit, r_true)
    print(f"claim (e) holds ({time.perf_counter() - start:.1f} s)")


# =========================================================================== (f) operator time and memory
def report_potrf_backward(rng: np.random.Generator) -> None:
    n = TIMING_N
    A = well_conditioned(n, rng)
    Lb = rng.standard_normal((n, n))
    vg = jt.value_and_grad(lambda A: np.sum(Lb * linalg.potrf(A)))
    calls = {"jacacc": lambda: vg(A)}
    if torch is not None:
        At, Lbt = t(A), torch.tensor(Lb)
        calls["torch"] = lambda: torch.autograd.grad(torch.sum(Lbt * torch.linalg.cholesky(At)), At)
    best = best_times(calls, samples=11)
    tracemalloc.start()
    vg(A)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    line = (f"\n(f) potrf forward + backward (the gradient of ⟨L̄, potrf(A)⟩) at n = {n}, best of 11 warm calls: "
            f"jacacc {best['jacacc'] * 1e3:.2f} ms, peak memory {peak / (8 * n * n):.1f} n × n arrays (L and Ā "
            "included)")
    if torch is not None:
        line += f"; PyTorch {best['torch'] * 1e3:.2f} ms (jacacc / PyTorch {best['jacacc'] / best['torch']:.2f})"
    print(line + ".  Information only: paper 004 §6.1 compares MXNet with TensorFlow on 36 cores (> 3× faster); "
          "experiments/linalg_benchmark.py measures each backward alone.")


def main() -> int:
    rng = np.random.default_rng(SEED)
    start = time.perf_counter()
    check_operators(rng)
    check_gp_regression()
    check_sparse_gp(rng)
    check_bayesian_linear_regression(rng)
    check_kalman(rng)
    report_potrf_backward(rng)
    print(f"\nall paper 004 checks passed ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
