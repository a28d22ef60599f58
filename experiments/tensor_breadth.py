"""Breadth benchmark: value, gradient and Hessian of twenty ordinary objectives, jacacc.tensor against JAX and PyTorch.

Issue 26 (item 4): the tensor benchmark (``tensor_hessians.py``) times three
problems that paper 002 chose; this one times objectives representative of
what people differentiate, written the way a user would write them and not
tuned for jacacc:

* regularized GLMs: logistic regression + L2, ridge, softmax regression + L2,
  Poisson regression + L2;
* robust regression: pseudo-Huber, Student-t;
* small networks: a one-hidden-layer tanh MLP with all parameters in one flat
  vector (unpacked by slicing and ``reshape``), a two-hidden-layer tanh MLP with
  separate parameters (Hessian w.r.t. the first layer);
* a likelihood: the Gaussian NLL of data with per-sample log-variances, w.r.t.
  the mean;
* factorization: matrix factorization + L2 (w.r.t. U);
* pairwise kernels: an RBF MMD² between particles and data (w.r.t. the
  particles), kernel ridge regression (w.r.t. the dual coefficients, the
  kernel matrix computed from the data at every call);
* a quadratic form, log-sum-exp of an affine map, a PCA trace objective with an
  orthogonality penalty, sigmoid least squares, a smooth elastic net, a cubic
  score (the cubic-regularized Newton model), an LP log barrier, smooth
  total-variation denoising.

Each objective is written once, as ``f(x, *data, xp=np)`` against an array
namespace ``xp``: NumPy for jacacc's tracer (``jacacc.tensor``), ``jax.numpy``
for JAX, and :class:`TorchNumPy` (PyTorch under the few NumPy spellings the
objectives use: ``sum``/``mean``/``max`` with ``axis``/``keepdims``,
``logaddexp`` of a number, ``eye`` in float64) for PyTorch.  Derivatives are
taken w.r.t. the first argument.  Where jacacc refuses an operation
(``UnsupportedOperationError``) the row says ``refused`` with the message: the
objective stays in the benchmark.

Methods, per quantity:

* ``jacacc``: the value through :class:`jacacc.tensor.evaluate.Program` on the
  traced function (as ``tensor_hessians.py`` does), ``jacacc.tensor.grad(f)``
  and ``jacacc.tensor.hessian(f)`` in their default modes (reverse;
  cross-country);
* ``jax``: ``jax.jit(f)``, ``jax.jit(jax.grad(f))``, ``jax.jit(jax.hessian(f))``
  in float64, compiled ahead of time (the compile is part of the first call);
* ``torch``: ``f``, ``torch.func.grad(f)``, ``torch.func.hessian(f)`` in float64, eager.

Every result is checked against JAX's (PyTorch's where JAX failed) before it
is timed: the largest entry difference relative to the largest reference
entry must be at most 1e-8; a mismatch is recorded (``status: mismatch``) and
never timed.  Timing: the first call alone (``first_call_s``: trace, plan or
compile, and one evaluation), three warm-up calls (jacacc's fused regions compile on their third), then ``--repeats`` samples
(default 7), each a call looped for at least 20 ms and averaged, taken in rounds
that time every library once each (a slow stretch of the shared host then
costs each library one sample, not one library all of them); the row keeps
the best and the median sample.  Results are dropped after each call.  The
ratio of a row is jacacc's best time over the best peer's (JAX or PyTorch,
whichever is faster; < 1: jacacc faster); the summary gives per quantity the
geometric mean and the worst ratio over every objective and size.

Threads: one per library on one core — the process (every thread of it) is
pinned to one CPU with ``os.sched_setaffinity`` where it exists; OpenBLAS
(NumPy's and SciPy's) gets one thread through threadpoolctl
(:func:`jacacc.bench.blas_threads`); PyTorch through ``torch.set_num_threads(1)``; XLA through
``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1``,
set before JAX starts its CPU backend (the record says whether it could be).
Everything is restored when :func:`main` returns.  Other work on the machine's
cores still skews timings: the record keeps the load average.

Writes ``results/tensor_breadth.json`` and ``figures/tensor_breadth.png``
(jacacc's speed relative to the best peer per objective and quantity, log
scale) and prints the Markdown table.

    python experiments/tensor_breadth.py                   # the recorded run, several minutes on one core
    python experiments/tensor_breadth.py --quick --out /tmp/tb
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc.bench import blas_threads, load_average, sibling_script, time_call, write_record
from jacacc.progress import note, progress_bar

EXPERIMENT = "tensor_breadth"
QUANTITIES = ("value", "gradient", "hessian")
LIBRARIES = ("jax", "torch", "jacacc")  # JAX first: its result is the reference
PEERS = ("jax", "torch")
SMALL = 64
LARGE = 512
QUICK_SIZES = (8, 16)
REPEATS = 7
QUICK_REPEATS = 2
MIN_SAMPLE_S = 0.02  # a sample loops a call for at least this long (0 in --quick)
TOLERANCE = 1e-8
XLA_FLAGS = ("--xla_cpu_multi_thread_eigen=false", "intra_op_parallelism_threads=1")
HERE = os.path.dirname(os.path.abspath(__file__))

# hyperparameters of the objectives (fixed numbers a user would type)
LAM = 1e-2  # L2 weight
DELTA = 1.0  # pseudo-Huber scale
NU = 3.0  # Student-t degrees of freedom
GAMMA = 0.5  # RBF kernel: exp(-GAMMA ‖a − b‖²)
RHO = 1.0  # PCA orthogonality penalty
L1 = 0.1  # elastic net: L1 weight (smoothed)
EPS = 1e-3  # smoothing of |·| in the elastic net and total variation
SIGMA = 1.0  # cubic regularization weight
TV = 0.5  # total-variation weight
LOG_2PI = math.log(2 * math.pi)


# =========================================================================== the objectives
def logistic_l2(w, X, y, xp=np):
    """Σᵢ log(1 + exp(−yᵢ xᵢ·w)) + ½λ‖w‖², labels ±1."""
    return xp.sum(xp.logaddexp(0.0, -y * (X @ w))) + 0.5 * LAM * xp.sum(w ** 2)


def ridge(w, X, y, xp=np):
    """½‖Xw − y‖² + ½λ wᵀw."""
    r = X @ w - y
    return 0.5 * xp.sum(r ** 2) + 0.5 * LAM * (w @ w)


def softmax_l2(W, X, Y, xp=np):
    """Mean softmax cross-entropy of the logits XW against one-hot Y (row maximum taken out) + ½λ‖W‖²."""
    Z = X @ W
    Z = Z - xp.max(Z, axis=1, keepdims=True)
    logp = Z - xp.log(xp.sum(xp.exp(Z), axis=1, keepdims=True))
    return -xp.mean(xp.sum(Y * logp, axis=1)) + 0.5 * LAM * xp.sum(W * W)


def poisson_l2(w, X, y, xp=np):
    """Poisson NLL with the log link, Σᵢ exp(ηᵢ) − yᵢηᵢ, η = Xw, + ½λ‖w‖²."""
    eta = X @ w
    return xp.sum(xp.exp(eta) - y * eta) + 0.5 * LAM * xp.sum(w ** 2)


def pseudo_huber(w, X, y, xp=np):
    """δ² Σᵢ (√(1 + (rᵢ/δ)²) − 1), r = Xw − y."""
    r = X @ w - y
    return DELTA ** 2 * xp.sum(xp.sqrt(1 + (r / DELTA) ** 2) - 1)


def student_t(w, X, y, xp=np):
    """Student-t regression NLL: (ν + 1)/2 Σᵢ log(1 + rᵢ²/ν), r = Xw − y."""
    r = X @ w - y
    return 0.5 * (NU + 1) * xp.sum(xp.log1p(r ** 2 / NU))


def mlp_flat(theta, X, y, xp=np):
    """Mean squared error of a one-hidden-layer tanh MLP whose parameters are one flat vector."""
    d = X.shape[1]
    h = (theta.shape[0] - 1) // (d + 2)
    W1 = theta[:d * h].reshape(d, h)
    b1 = theta[d * h:d * h + h]
    w2 = theta[d * h + h:d * h + 2 * h]
    b2 = theta[-1]
    hidden = xp.tanh(X @ W1 + b1)
    return xp.mean((hidden @ w2 + b2 - y) ** 2)


def mlp_layers(W1, b1, W2, b2, w3, X, y, xp=np):
    """Mean squared error of a two-hidden-layer tanh MLP, differentiated w.r.t. its first weight matrix."""
    h1 = xp.tanh(X @ W1 + b1)
    h2 = xp.tanh(h1 @ W2 + b2)
    return xp.mean((h2 @ w3 - y) ** 2)


def gaussian_nll(mu, X, logvar, xp=np):
    """½ Σᵢⱼ ((Xᵢⱼ − μⱼ)² e^(−sᵢ) + sᵢ + log 2π): per-sample log-variances s, w.r.t. the mean μ."""
    return 0.5 * xp.sum((X - mu) ** 2 * xp.exp(-logvar)[:, None] + logvar[:, None] + LOG_2PI)


def matrix_factorization_l2(U, V, T, xp=np):
    """‖T − UVᵀ‖² + λ(‖U‖² + ‖V‖²), w.r.t. U."""
    return xp.sum((T - U @ V.T) ** 2) + LAM * (xp.sum(U ** 2) + xp.sum(V ** 2))


def _rbf(A, B, xp=np):
    """The RBF kernel matrix exp(−γ‖aᵢ − bⱼ‖²) through ‖a‖² + ‖b‖² − 2a·b."""
    sq = xp.sum(A ** 2, axis=1)[:, None] + xp.sum(B ** 2, axis=1)[None, :] - 2 * A @ B.T
    return xp.exp(-GAMMA * sq)


def rbf_mmd(Z, X, xp=np):
    """MMD² between particles Z and data X (RBF kernel) up to the data-only term, w.r.t. Z."""
    return xp.mean(_rbf(Z, Z, xp)) - 2 * xp.mean(_rbf(Z, X, xp))


def kernel_ridge(alpha, X, y, xp=np):
    """½‖Kα − y‖² + ½λ αᵀKα with K the RBF kernel matrix of the data X (computed in the call)."""
    K = _rbf(X, X, xp)
    return 0.5 * xp.sum((K @ alpha - y) ** 2) + 0.5 * LAM * alpha @ K @ alpha


def quadratic_form(x, A, b, xp=np):
    """½ xᵀAx − bᵀx."""
    return 0.5 * x @ A @ x - b @ x


def log_sum_exp(x, A, b, xp=np):
    """log Σᵢ exp((Ax + b)ᵢ), the maximum taken out first."""
    z = A @ x + b
    m = xp.max(z)
    return m + xp.log(xp.sum(xp.exp(z - m)))


def pca_trace(W, C, xp=np):
    """−tr(WᵀCW) + ρ‖WᵀW − I‖²: PCA as trace maximization with an orthogonality penalty."""
    k = W.shape[1]
    return -xp.trace(W.T @ C @ W) + RHO * xp.sum((W.T @ W - xp.eye(k)) ** 2)


def sigmoid_least_squares(w, X, y, xp=np):
    """½ Σᵢ (σ(xᵢ·w) − yᵢ)², σ the logistic function written out."""
    p = 1 / (1 + xp.exp(-(X @ w)))
    return 0.5 * xp.sum((p - y) ** 2)


def elastic_net_smooth(w, X, y, xp=np):
    """½ mean((Xw − y)²) + λ₁ Σ √(wⱼ² + ε) + ½λ₂‖w‖²: the elastic net with a smoothed |·|."""
    return (0.5 * xp.mean((X @ w - y) ** 2) + L1 * xp.sum(xp.sqrt(w ** 2 + EPS))
            + 0.5 * LAM * xp.sum(w ** 2))


def cubic_score(x, g, A, xp=np):
    """The cubic-regularized Newton model gᵀx + ½ xᵀAx + σ/3 ‖x‖³."""
    return g @ x + 0.5 * x @ (A @ x) + SIGMA / 3 * xp.sqrt(x @ x) ** 3


def log_barrier(x, A, b, c, xp=np):
    """cᵀx − Σᵢ log(bᵢ − aᵢ·x): the barrier of an LP's interior."""
    return c @ x - xp.sum(xp.log(b - A @ x))


def tv_denoise(x, y, xp=np):
    """½‖x − y‖² + τ Σᵢ √((xᵢ₊₁ − xᵢ)² + ε): smooth total-variation denoising of a signal y."""
    return 0.5 * xp.sum((x - y) ** 2) + TV * xp.sum(xp.sqrt((x[1:] - x[:-1]) ** 2 + EPS))


# --------------------------------------------------------------------------- their arguments
def _split(n: int, columns: int) -> tuple[int, int]:
    """(rows, columns) with rows · columns ≈ n: fewer columns for tiny n, at least one row."""
    columns = min(columns, max(1, n // 4))
    return max(1, n // columns), columns


def _regression_data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A design X (2n × n, entries N(0, 1/n)) and a coefficient vector w_true (N(0, 1))."""
    return rng.standard_normal((2 * n, n)) / math.sqrt(n), rng.standard_normal(n)


def _near(w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A point near ``w``: where an optimizer would evaluate."""
    return w + 0.3 * rng.standard_normal(w.shape)


def logistic_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    X, w = _regression_data(n, rng)
    y = np.where(X @ w + 0.5 * rng.standard_normal(2 * n) > 0, 1.0, -1.0)
    return _near(w, rng), X, y


def linear_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    X, w = _regression_data(n, rng)
    return _near(w, rng), X, X @ w + 0.1 * rng.standard_normal(2 * n)


def heavy_tailed_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    X, w = _regression_data(n, rng)
    return _near(w, rng), X, X @ w + rng.standard_t(NU, 2 * n)


def softmax_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    d, c = _split(n, 8)
    m = 2 * n
    X = rng.standard_normal((m, d))
    W = rng.standard_normal((d, c)) / math.sqrt(d)
    Y = np.eye(c)[np.argmax(X @ W + rng.gumbel(size=(m, c)), axis=1)]
    return _near(W, rng), X, Y


def poisson_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    X, w = _regression_data(n, rng)
    w = 0.5 * w
    return 0.5 * _near(w, rng), X, rng.poisson(np.exp(X @ w)).astype(float)


def _mlp_data(n: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    m = max(8, min(256, 2 * n))
    X = rng.standard_normal((m, d))
    return X, np.sin(X @ rng.standard_normal(d))


def mlp_flat_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    d = max(2, min(8, n // 8))
    h = max(1, (n - 1) // (d + 2))
    X, y = _mlp_data(n, d, rng)
    return rng.standard_normal(h * (d + 2) + 1) / math.sqrt(d), X, y


def mlp_layers_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    d = max(2, min(8, n // 8))
    h = max(1, n // d)
    X, y = _mlp_data(n, d, rng)
    return (rng.standard_normal((d, h)) / math.sqrt(d), 0.1 * rng.standard_normal(h),
            rng.standard_normal((h, h)) / math.sqrt(h), 0.1 * rng.standard_normal(h),
            rng.standard_normal(h) / math.sqrt(h), X, y)


def gaussian_nll_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    m = min(64, 4 * n)
    logvar = 0.5 * rng.standard_normal(m)
    X = 1.0 + np.exp(0.5 * logvar)[:, None] * rng.standard_normal((m, n))
    return 1.0 + 0.1 * rng.standard_normal(n), X, logvar


def matrix_factorization_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    m, k = _split(n, 8)
    p = 2 * m
    U, V = rng.standard_normal((m, k)), rng.standard_normal((p, k))
    T = U @ V.T + 0.1 * rng.standard_normal((m, p))
    return _near(U, rng), V, T


def mmd_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    p, d = _split(n, 4)
    return rng.standard_normal((p, d)), 1.0 + rng.standard_normal((p, d))


def kernel_ridge_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    X = rng.standard_normal((n, 4))
    return 0.1 * rng.standard_normal(n), X, np.sin(X.sum(axis=1))


def quadratic_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    M = rng.standard_normal((n, n))
    return rng.standard_normal(n), M @ M.T / n + np.eye(n), rng.standard_normal(n)


def log_sum_exp_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    X, x = _regression_data(n, rng)
    return x, X, rng.standard_normal(2 * n)


def pca_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    d, k = _split(n, 8)
    X = rng.standard_normal((4 * d, d)) * np.linspace(2.0, 0.5, d)
    W, _ = np.linalg.qr(rng.standard_normal((d, k)))
    return _near(W, rng) / 2, X.T @ X / (4 * d)


def cubic_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    M = rng.standard_normal((n, n)) / math.sqrt(n)
    return rng.standard_normal(n) / math.sqrt(n), rng.standard_normal(n), (M + M.T) / 2


def log_barrier_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    A, _ = _regression_data(n, rng)
    x = 0.1 * rng.standard_normal(n)
    b = A @ x + 1.0 + rng.random(2 * n)  # x strictly inside: b − Ax ≥ 1
    return x, A, b, rng.standard_normal(n)


def tv_arguments(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    y = np.sign(np.sin(np.linspace(0, 6 * math.pi, n))) + 0.2 * rng.standard_normal(n)
    return y + 0.1 * rng.standard_normal(n), y


@dataclass(frozen=True)
class Objective:
    """One benchmark objective: ``function(x, *data, xp=np)``, its family and its arguments at size n.

    ``arguments(n, rng)`` returns float64 arrays whose first (the differentiated one) has about n
    entries; ``sizes`` are the small and large n of the recorded run.
    """

    name: str
    family: str
    function: Callable[..., Any]
    arguments: Callable[[int, np.random.Generator], tuple[np.ndarray, ...]]
    sizes: tuple[int, int] = (SMALL, LARGE)


OBJECTIVES: tuple[Objective, ...] = (
    Objective("logistic_l2", "GLM", logistic_l2, logistic_arguments),
    Objective("ridge", "GLM", ridge, linear_arguments),
    Objective("softmax_l2", "GLM", softmax_l2, softmax_arguments),
    Objective("poisson_l2", "GLM", poisson_l2, poisson_arguments),
    Objective("pseudo_huber", "robust", pseudo_huber, heavy_tailed_arguments),
    Objective("student_t", "robust", student_t, heavy_tailed_arguments),
    Objective("mlp_flat", "network", mlp_flat, mlp_flat_arguments),
    Objective("mlp_layers", "network", mlp_layers, mlp_layers_arguments),
    Objective("gaussian_nll", "likelihood", gaussian_nll, gaussian_nll_arguments, (SMALL, 1000)),
    Objective("matrix_factorization_l2", "factorization", matrix_factorization_l2, matrix_factorization_arguments),
    Objective("rbf_mmd", "kernel", rbf_mmd, mmd_arguments),
    Objective("kernel_ridge", "kernel", kernel_ridge, kernel_ridge_arguments, (SMALL, 1000)),
    Objective("quadratic_form", "quadratic", quadratic_form, quadratic_arguments, (SMALL, 1000)),
    Objective("log_sum_exp", "smooth max", log_sum_exp, log_sum_exp_arguments),
    Objective("pca_trace", "factorization", pca_trace, pca_arguments, (SMALL, 1000)),
    Objective("sigmoid_least_squares", "regression", sigmoid_least_squares, linear_arguments),
    Objective("elastic_net_smooth", "regression", elastic_net_smooth, linear_arguments),
    Objective("cubic_score", "optimization", cubic_score, cubic_arguments, (SMALL, 1000)),
    Objective("log_barrier", "optimization", log_barrier, log_barrier_arguments),
    Objective("tv_denoise", "signal", tv_denoise, tv_arguments, (SMALL, 1000)),
)
BY_NAME = {o.name: o for o in OBJECTIVES}


# =========================================================================== array namespaces
class TorchNumPy:
    """PyTorch under the NumPy spellings the objectives use; every other name is ``torch``'s own.

    Examples
    --------
    >>> import torch
    >>> xp = TorchNumPy()
    >>> xp.sum(torch.ones(2, 3), axis=1, keepdims=True).shape
    torch.Size([2, 1])
    >>> float(xp.logaddexp(0.0, torch.zeros((), dtype=torch.float64)))
    0.6931471805599453
    """

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["torch"], name)

    def sum(self, a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        return self.torch.sum(a) if axis is None else self.torch.sum(a, dim=axis, keepdim=keepdims)

    def mean(self, a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        return self.torch.mean(a) if axis is None else self.torch.mean(a, dim=axis, keepdim=keepdims)

    def max(self, a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        return self.torch.amax(a) if axis is None else self.torch.amax(a, dim=axis, keepdim=keepdims)

    def logaddexp(self, a: Any, b: Any) -> Any:
        like = b if isinstance(b, self.torch.Tensor) else a
        return self.torch.logaddexp(self.torch.as_tensor(a, dtype=like.dtype),
                                    self.torch.as_tensor(b, dtype=like.dtype))

    def eye(self, n: int) -> Any:
        return self.torch.eye(n, dtype=self.torch.float64)


def bind(objective: Objective, xp: Any) -> Callable[..., Any]:
    """``objective.function`` with the namespace ``xp`` fixed: a function of the arrays only."""
    function = objective.function

    def bound(*args: Any) -> Any:
        return function(*args, xp=xp)

    bound.__name__ = objective.name
    return bound


# =========================================================================== methods
Prepared = tuple[Callable[[], Any], float]  # (call, seconds spent preparing outside the first call)


def jacacc_prepare(objective: Objective, quantity: str, args: tuple[np.ndarray, ...]) -> Prepared:
    """jacacc's call: the value through a planned :class:`Program` (traced on the first call),
    the gradient and the Hessian through ``jacacc.tensor.grad``/``hessian`` in their default modes."""
    import jacacc.tensor as jt
    from jacacc.tensor.evaluate import Program
    from jacacc.tensor.trace import trace

    f = bind(objective, np)
    if quantity == "value":
        state: dict[str, Any] = {}

        def value() -> Any:
            if "program" not in state:  # the first call traces and plans, as the transformations do
                traced = trace(f, list(args))
                state["program"] = Program(traced.outputs, traced.inputs, np.float64)
            return state["program"](*args)[0]

        return value, 0.0
    transformed = jt.grad(f) if quantity == "gradient" else jt.hessian(f)
    return (lambda: transformed(*args)), 0.0


def jax_prepare(objective: Objective, quantity: str, args: tuple[np.ndarray, ...]) -> Prepared:
    """``jax.jit`` of f, ``jax.grad(f)`` or ``jax.hessian(f)``, compiled ahead of time for these arguments."""
    import jax
    import jax.numpy as jnp

    f = bind(objective, jnp)
    fn = {"value": f, "gradient": jax.grad(f), "hessian": jax.hessian(f)}[quantity]
    jargs = [jnp.asarray(a) for a in args]
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*jargs).compile()
    compile_s = time.perf_counter() - start
    return (lambda: compiled(*jargs).block_until_ready()), compile_s


def torch_prepare(objective: Objective, quantity: str, args: tuple[np.ndarray, ...]) -> Prepared:
    """f, ``torch.func.grad(f)`` or ``torch.func.hessian(f)`` on float64 tensors, eager."""
    import torch
    import torch.func

    f = bind(objective, TorchNumPy())
    fn = {"value": f, "gradient": torch.func.grad(f), "hessian": torch.func.hessian(f)}[quantity]
    targs = [torch.from_numpy(np.ascontiguousarray(a)) for a in args]
    return (lambda: fn(*targs)), 0.0


PREPARE = {"jacacc": jacacc_prepare, "jax": jax_prepare, "torch": torch_prepare}
DESCRIPTIONS = {
    "jacacc": {"value": "Program(trace(f))", "gradient": "jacacc.tensor.grad(f)",
               "hessian": "jacacc.tensor.hessian(f)"},
    "jax": {"value": "jax.jit(f)", "gradient": "jax.jit(jax.grad(f))", "hessian": "jax.jit(jax.hessian(f))"},
    "torch": {"value": "f", "gradient": "torch.func.grad(f)", "hessian": "torch.func.hessian(f)"},
}


def as_numpy(result: Any) -> np.ndarray:
    """A result of any library as a float64 NumPy array."""
    if hasattr(result, "detach"):
        result = result.detach().numpy()
    return np.asarray(result, dtype=np.float64)


def relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    """The largest entry difference over the largest reference entry (inf on a shape mismatch)."""
    if result.shape != reference.shape:
        return math.inf
    if reference.size == 0:
        return 0.0
    scale = float(np.max(np.abs(reference)))
    difference = float(np.max(np.abs(result - reference)))
    return difference / scale if scale > 0 else difference


# =========================================================================== measuring
#: warm-up calls before the samples: enough for jacacc's fused regions to have compiled (they run node by
#: node for their first ``fusion.COMPILE_AFTER`` calls), so that every sample is a warm call
WARM_UP_CALLS = 3


def timed_samples(call: Callable[[], Any], repeats: int, min_time: float) -> list[float]:
    """:data:`WARM_UP_CALLS` warm-up calls, then ``repeats`` samples (each ``call`` looped for ``min_time``
    and averaged)."""
    return interleaved_samples([call], repeats, min_time)[0]


def interleaved_samples(calls: list[Callable[[], Any]], repeats: int, min_time: float) -> list[list[float]]:
    """``repeats`` samples of each call (looped for ``min_time`` and averaged), taken in rounds -- one
    sample of every call per round -- after the warm-up calls.  A stretch in which the machine runs
    slow (seconds of it were seen on this shared host, doubling every time measured in them) then
    slows one sample of each library, not all the samples of one, and the ratios of best times hold.
    Each call is warmed up :data:`WARM_UP_CALLS` times first (jacacc's regions compile on their third)."""
    for call in calls:
        for _ in range(WARM_UP_CALLS):
            call()
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for call, mine in zip(calls, samples, strict=True):
            mine.append(time_call(call, repeat=1, min_time=min_time))
    return samples


def _failure(exc: BaseException) -> tuple[str, str]:
    """(status, message) of an exception: ``refused`` for jacacc's UnsupportedOperationError."""
    from jacacc.errors import UnsupportedOperationError

    status = "refused" if isinstance(exc, UnsupportedOperationError) else "error"
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return status, f"{type(exc).__name__}: {message}"[:500]


def checked_call(objective: Objective, quantity: str, library: str, args: tuple[np.ndarray, ...],
                 reference: tuple[np.ndarray, str] | None) -> tuple[dict, np.ndarray | None, Callable[[], Any] | None]:
    """One row's first call, checked against ``reference``: the row so far, the call's result (None
    where the call failed) and the call to time (None where it failed or did not match)."""
    row: dict[str, Any] = {"library": library, "method": DESCRIPTIONS[library][quantity]}
    try:
        call, prepare_s = PREPARE[library](objective, quantity, args)
        start = time.perf_counter()
        result = as_numpy(call())
        row["first_call_s"] = prepare_s + time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001 - a failure is data: the row records it
        row["status"], row["error"] = _failure(exc)
        return row, None, None
    if reference is not None:
        error = relative_error(result, reference[0])
        row.update(reference=reference[1], max_rel_error=error, matches=bool(error <= TOLERANCE))
        if not row["matches"]:
            row["status"] = "mismatch"
            row["error"] = f"off from {reference[1]} by {error:.3g} (relative to its largest entry)"
            return row, result, None
    else:
        row.update(reference=None, max_rel_error=None, matches=None)
    return row, result, call


def _timed(row: dict, samples: list[float]) -> None:
    row.update(status="ok", best_s=min(samples), median_s=statistics.median(samples), samples=samples)


def measure(objective: Objective, quantity: str, library: str, args: tuple[np.ndarray, ...],
            reference: tuple[np.ndarray, str] | None, repeats: int, min_time: float) -> tuple[dict, np.ndarray | None]:
    """One row on its own: the first call (checked against ``reference``), then the timed samples if
    it matched.  Returns the row and the first call's result (None where the call failed)."""
    row, result, call = checked_call(objective, quantity, library, args, reference)
    if call is not None:
        _timed(row, timed_samples(call, repeats, min_time))
    return row, result


def measure_objective(objective: Objective, n: int, args: tuple[np.ndarray, ...], repeats: int,
                      min_time: float) -> list[dict]:
    """Every quantity of one objective at one size, each library checked against JAX (else PyTorch),
    then the libraries that matched timed in interleaved rounds (:func:`interleaved_samples`)."""
    rows = []
    for quantity in QUANTITIES:
        reference: tuple[np.ndarray, str] | None = None
        checked: list[tuple[dict, Callable[[], Any] | None]] = []
        for library in LIBRARIES:
            row, result, call = checked_call(objective, quantity, library, args, reference)
            if reference is None and library in PEERS and call is not None:
                reference = (result, library)  # JAX's result, or PyTorch's where JAX failed
            del result
            checked.append((row, call))
        timed = [(row, call) for row, call in checked if call is not None]
        for (row, _), samples in zip(timed, interleaved_samples([call for _, call in timed], repeats, min_time),
                                     strict=True):
            _timed(row, samples)
        for row, _ in checked:
            row = {"objective": objective.name, "family": objective.family, "n": n, "params": int(args[0].size),
                   "shape": list(args[0].shape), "quantity": quantity, **row}
            rows.append(row)
            timing = (f"best {row['best_s']:.3g} s, median {row['median_s']:.3g} s" if row["status"] == "ok"
                      else row["error"])
            note(f"{objective.name:<24} n={n:<5} {quantity:<8} {row['library']:<6} {row['status']:<8} {timing}")
    return rows


# =========================================================================== summary
def ratio_rows(rows: list[dict]) -> list[dict]:
    """Per (objective, n, quantity): each library's best time, the best peer and jacacc's ratio to it."""
    groups: dict[tuple[str, int, str], dict[str, dict]] = {}
    for r in rows:
        groups.setdefault((r["objective"], r["n"], r["quantity"]), {})[r["library"]] = r
    out = []
    for (objective, n, quantity), by_library in groups.items():
        best = {lib: r["best_s"] for lib, r in by_library.items() if r["status"] == "ok"}
        peers = {lib: s for lib, s in best.items() if lib in PEERS}
        best_peer = min(peers, key=peers.get) if peers else None
        jacacc = by_library.get("jacacc", {})
        ratio = best["jacacc"] / peers[best_peer] if "jacacc" in best and best_peer else None
        out.append({"objective": objective, "n": n, "params": jacacc.get("params"), "quantity": quantity,
                    "seconds": best, "best_peer": best_peer, "best_peer_s": peers.get(best_peer),
                    "jacacc_status": jacacc.get("status"), "jacacc_error": jacacc.get("error"),
                    "ratio": ratio})
    return out


def geometric_mean(values: list[float]) -> float | None:
    """The geometric mean of positive numbers (None for none)."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(ratios: list[dict]) -> dict[str, dict]:
    """Per quantity: geometric mean, worst and best of jacacc's time over the best peer's, and the failures."""
    summary = {}
    for quantity in QUANTITIES:
        mine = [r for r in ratios if r["quantity"] == quantity]
        rated = [r for r in mine if r["ratio"] is not None]
        worst = max(rated, key=lambda r: r["ratio"], default=None)
        best = min(rated, key=lambda r: r["ratio"], default=None)
        mean = geometric_mean([r["ratio"] for r in rated])
        summary[quantity] = {
            "compared": len(rated),
            "geomean_ratio": mean,
            "geomean_speedup": None if mean is None else 1 / mean,
            "worst_ratio": worst and worst["ratio"],
            "worst": worst and {"objective": worst["objective"], "n": worst["n"]},
            "best_ratio": best and best["ratio"],
            "best": best and {"objective": best["objective"], "n": best["n"]},
            "jacacc_faster": sum(r["ratio"] < 1 for r in rated),
            "jacacc_failed": [{"objective": r["objective"], "n": r["n"], "status": r["jacacc_status"],
                               "error": r["jacacc_error"]} for r in mine if r["jacacc_status"] not in ("ok", None)],
        }
    return summary


# =========================================================================== table, figure
def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _ratio(ratio: float) -> str:
    """Two decimals, two significant digits below 0.1 (0.0026, not 0.00)."""
    return f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.2g}"


def _ratio_cell(r: dict) -> str:
    if r["ratio"] is not None:
        return _ratio(r["ratio"])
    return r["jacacc_status"] or "–"


def readme_table(record: dict) -> str:
    """The Markdown tables: jacacc's best time, the best peer's and the ratio per objective, size and
    quantity; then per quantity the geometric mean, the worst and the best ratio."""
    results = record["results"]
    head = "| objective | params |" + "".join(f" {q} jacacc | best peer | ratio |" for q in QUANTITIES)
    lines = [head, "|---|---|" + "---|---|---|" * len(QUANTITIES)]
    by_key = {(r["objective"], r["n"], r["quantity"]): r for r in results["ratios"]}
    for objective, n in dict.fromkeys((r["objective"], r["n"]) for r in results["ratios"]):
        cells = []
        params = None
        for quantity in QUANTITIES:
            r = by_key.get((objective, n, quantity))
            if r is None:
                cells.append(" – | – | – |")
                continue
            params = params or r["params"]
            peer = f"{_ms(r['best_peer_s'])} ({r['best_peer']})" if r["best_peer"] else "–"
            cells.append(f" {_ms(r['seconds'].get('jacacc'))} | {peer} | {_ratio_cell(r)} |")
        lines.append(f"| {objective} | {params if params is not None else n} |" + "".join(cells))
    lines += ["", "| quantity | compared | geometric mean | worst | best | jacacc faster | jacacc failed |",
              "|---|---|---|---|---|---|---|"]
    for quantity, s in results["summary"].items():
        worst = f"{_ratio(s['worst_ratio'])} ({s['worst']['objective']}, n={s['worst']['n']})" if s["worst"] else "–"
        best = f"{_ratio(s['best_ratio'])} ({s['best']['objective']}, n={s['best']['n']})" if s["best"] else "–"
        mean = "–" if s["geomean_ratio"] is None else _ratio(s["geomean_ratio"])
        failed = ", ".join(f"{f['objective']} n={f['n']} ({f['status']})" for f in s["jacacc_failed"]) or "none"
        lines.append(f"| {quantity} | {s['compared']} | {mean} | {worst} | {best} | "
                     f"{s['jacacc_faster']} of {s['compared']} | {failed} |")
    return "\n".join(lines)


QUANTITY_COLORS = {"value": "tab:gray", "gradient": "tab:blue", "hessian": "tab:green"}


def plot_tensor_breadth(record: dict, path: str | os.PathLike | None = None):
    """Bars of jacacc's speed relative to the best peer (best-peer time / jacacc time, log scale, > 1:
    jacacc faster) per objective and quantity, one panel per size; a cross where jacacc has no time."""
    from jacacc.plot import _pyplot, _save

    plt = _pyplot()
    ratios = record["results"]["ratios"]
    panels = [("small", [r for r in ratios if _is_small(r, ratios)]),
              ("large", [r for r in ratios if not _is_small(r, ratios)])]
    panels = [(label, rs) for label, rs in panels if rs]
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, 3.6 * len(panels)), squeeze=False)
    width = 0.8 / len(QUANTITIES)
    for ax, (label, rs) in zip(axes[:, 0], panels, strict=True):
        objectives = list(dict.fromkeys(r["objective"] for r in rs))
        for k, quantity in enumerate(QUANTITIES):
            by_objective = {r["objective"]: r for r in rs if r["quantity"] == quantity}
            xs = [i + (k - 1) * width for i in range(len(objectives))]
            speed = [1 / by_objective[o]["ratio"] if o in by_objective and by_objective[o]["ratio"] else 1.0
                     for o in objectives]
            ax.bar(xs, [s - 1 for s in speed], width, bottom=1.0, label=quantity, color=QUANTITY_COLORS[quantity])
            missing = [x for x, o in zip(xs, objectives, strict=True)
                       if o not in by_objective or by_objective[o]["ratio"] is None]
            ax.plot(missing, [1.0] * len(missing), "x", color="red", markersize=8)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(objectives)))
        ns = {r["objective"]: r["params"] for r in rs}
        ax.set_xticklabels([f"{o}\n({ns[o]})" for o in objectives], rotation=35, ha="right", fontsize=7)
        ax.set_ylabel("best peer time / jacacc time")
        ax.set_title(f"{label} size (parameters in parentheses): > 1 jacacc faster, red x: jacacc refused or failed",
                     fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("jacacc.tensor against the best of jax.jit and torch.func (float64, one core; best of warm calls)",
                 fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    return fig


def _is_small(r: dict, ratios: list[dict]) -> bool:
    """Whether ``r`` is its objective's smallest size."""
    return r["n"] == min(q["n"] for q in ratios if q["objective"] == r["objective"])


def print_table(record: dict) -> None:
    """The Markdown tables on stdout."""
    print()
    print(readme_table(record))


# =========================================================================== threads
def sibling(name: str) -> Any:
    """The module ``experiments/<name>.py`` (loaded once), or None where the file does not exist."""
    return sibling_script(HERE, name, "_tensor_breadth")


@contextlib.contextmanager
def xla_flags() -> Iterator[bool]:
    """:data:`XLA_FLAGS` added to the environment while the block runs; yields True where JAX's CPU
    backend has not started yet (XLA reads the flags when it starts, so only then do they take
    effect; a backend started inside the block keeps them for the life of the process)."""
    before = os.environ.get("XLA_FLAGS")
    current = before or ""
    missing = [flag for flag in XLA_FLAGS if flag.split("=")[0] not in current]
    os.environ["XLA_FLAGS"] = " ".join([current, *missing]).strip()
    started = False
    if "jax" in sys.modules:
        from jax._src import xla_bridge

        started = bool(getattr(xla_bridge, "_backends", None))
    try:
        yield not started
    finally:
        if before is None:
            del os.environ["XLA_FLAGS"]
        else:
            os.environ["XLA_FLAGS"] = before


def _thread_ids() -> list[int]:
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def core_to_pin(core: int | None) -> int | None:
    """The CPU a benchmark runs on: ``core``, else the last one the process may use (None where the
    platform cannot pin a process)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    return max(os.sched_getaffinity(0)) if core is None else core


@contextlib.contextmanager
def pinned_to_one_core(core: int | None) -> Iterator[int | None]:
    """Every thread of the process on one CPU (:func:`core_to_pin` of ``core``) while the block
    runs, the previous masks restored afterwards; yields the core (None where the platform has no
    ``sched_setaffinity``)."""
    core = core_to_pin(core)
    if core is None:
        yield None
        return
    allowed = sorted(os.sched_getaffinity(0))
    previous = {}
    for tid in _thread_ids():
        with contextlib.suppress(OSError):
            previous[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {core})
    try:
        yield core
    finally:
        for tid in _thread_ids():  # threads started meanwhile inherited the one core
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, previous.get(tid, set(allowed)))


@contextlib.contextmanager
def one_torch_thread() -> Iterator[int]:
    """``torch.set_num_threads(1)`` while the block runs."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)


# =========================================================================== main
def sizes_of(objective: Objective, quick: bool, sizes: list[int] | None) -> tuple[int, ...]:
    """The n values to run ``objective`` at: ``--sizes``, the quick sizes, or its own two."""
    if sizes:
        return tuple(sizes)
    return QUICK_SIZES if quick else objective.sizes


def run(objectives: list[Objective], quick: bool, sizes: list[int] | None, seed: int, repeats: int,
        min_time: float, record_path: str, params: dict) -> list[dict]:
    """Every objective at its sizes; the record is rewritten after each (objective, size)."""
    rows: list[dict] = []
    work = [(i, o, n) for i, o in enumerate(objectives) for n in sizes_of(o, quick, sizes)]
    with progress_bar(total=len(work), desc=EXPERIMENT, unit="case") as bar:
        for i, objective, n in work:
            rng = np.random.default_rng([seed, i, n])
            rows += measure_objective(objective, n, objective.arguments(n, rng), repeats, min_time)
            bar.update()
            write_record(record_path, EXPERIMENT, {"rows": rows, "partial": True}, parameters=params, seed=seed)
    return rows


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [o.name for o in OBJECTIVES]
    parser.add_argument("--objectives", nargs="*", default=names, choices=names, metavar="NAME",
                        help="objectives to run (default all)")
    parser.add_argument("--sizes", nargs="*", type=int, default=None,
                        help=f"n values for every objective (default each objective's own, {SMALL} and "
                             f"{LARGE} or 1000; --quick: {' '.join(map(str, QUICK_SIZES))})")
    parser.add_argument("--repeats", type=int, default=None,
                        help=f"timed samples per row (default {REPEATS}; --quick: {QUICK_REPEATS})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--core", type=int, default=None, help="CPU to pin to (default the last one allowed)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repeats, no looping of calls")
    parser.add_argument("--out", default=".", help="directory holding results/ and figures/ (default the repo root)")
    parser.add_argument("--no-figure", action="store_true", help="write the record and the table only")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, write the record and the figure, print the table.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (see ``--help``); ``sys.argv`` when None.

    Returns
    -------
    int
        0.  A failure of a library on an objective is recorded in its row, not raised.
    """
    args = parse_arguments(argv)
    objectives = [BY_NAME[name] for name in args.objectives]
    repeats = args.repeats or (QUICK_REPEATS if args.quick else REPEATS)
    min_time = 0.0 if args.quick else MIN_SAMPLE_S
    record_path = os.path.join(args.out, "results", f"{EXPERIMENT}.json")
    params: dict[str, Any] = {
        "objectives": args.objectives, "sizes": {o.name: list(sizes_of(o, args.quick, args.sizes)) for o in objectives},
        "quick": args.quick, "repeats": repeats, "min_sample_s": min_time, "dtype": "float64",
        "tolerance": TOLERANCE, "reference": "jax (torch where jax failed)",
        "hyperparameters": {"lam": LAM, "delta": DELTA, "nu": NU, "gamma": GAMMA, "rho": RHO, "l1": L1, "eps": EPS,
                            "sigma": SIGMA, "tv": TV},
        "timing": "first call alone; three warm-up calls; then `repeats` samples, each a call looped for at least "
                  "`min_sample_s` and averaged; best and median sample",
        "ratio": "jacacc best time / best peer's best time (< 1: jacacc faster)",
        "methods": DESCRIPTIONS, "threads": 1, "load_average_before": load_average(), "source": source_state(),
    }
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        params["xla_flags_effective"] = stack.enter_context(xla_flags())  # before JAX starts its backend
        params["xla_flags"] = os.environ["XLA_FLAGS"]
        import jax

        params["pinned_core"] = stack.enter_context(pinned_to_one_core(args.core))
        params["blas_threads"] = stack.enter_context(blas_threads(1))  # NumPy's and SciPy's BLAS
        params["torch_threads"] = stack.enter_context(one_torch_thread())
        params["jax_devices"] = [str(d) for d in jax.devices()]
        stack.enter_context(jax.enable_x64(True))
        rows = run(objectives, args.quick, args.sizes, args.seed, repeats, min_time, record_path, params)
    params["wall_s"] = time.perf_counter() - start
    params["load_average_after"] = load_average()
    ratios = ratio_rows(rows)
    record = write_record(record_path, EXPERIMENT, {"rows": rows, "ratios": ratios, "summary": summarize(ratios)},
                          parameters=params, seed=args.seed)
    if not args.no_figure:
        plot_tensor_breadth(record, os.path.join(args.out, "figures", f"{EXPERIMENT}.png"))
    print_table(record)
    print(f"\n{len(rows)} rows in {params['wall_s']:.0f} s -> {record_path}")
    return 0


def source_state() -> dict[str, Any]:
    """The commit of the checkout this script runs in and what differs from it under ``jacacc/``
    (modified and untracked files, and a SHA-1 of the diff): the jacacc that was measured."""
    import hashlib
    import subprocess

    def git(*command: str) -> str:
        return subprocess.run(["git", *command], cwd=HERE, capture_output=True, text=True, check=True,
                              timeout=30).stdout

    try:
        changed = [line[3:] for line in git("status", "--porcelain", "--", "../jacacc").splitlines()]
        digest = hashlib.sha1(git("diff", "HEAD", "--", "../jacacc").encode())
        root = git("rev-parse", "--show-toplevel").strip()
        for path in sorted(git("ls-files", "--others", "--exclude-standard", "--full-name", "--",
                               "../jacacc").splitlines()):
            with open(os.path.join(root, path), "rb") as fh:  # untracked files count too
                digest.update(path.encode() + fh.read())
        return {"commit": git("rev-parse", "HEAD").strip(), "jacacc_changed": changed,
                "jacacc_diff_sha1": digest.hexdigest() if changed else None}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}



if __name__ == "__main__":
    sys.exit(main())
