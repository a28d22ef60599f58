"""The outside benchmark: gradients and Hessians of objectives written as their sources write them (issue 41, item 5).

The breadth benchmark (``tensor_breadth.py``) times objectives this project wrote.  This one takes
them from outside — test sets, library examples, textbooks — each written the way its source writes
it: NumPy and SciPy idioms (``scipy.special.logsumexp``, ``np.linalg.solve``/``slogdet``/``cholesky``),
parameters held in lists of ``(W, b)`` tuples or in dicts, Python loops over time steps and mixture
components, shifted slices for stencils and convolutions.  Nothing is rewritten for jacacc: what it
refuses is recorded as ``refused`` with its message.  Each objective is written once against an array
namespace ``xp`` (NumPy for ``jacacc.tensor``, ``jax.numpy`` for JAX, :class:`TorchNumPy` — PyTorch
under the NumPy spellings the objectives use — for ``torch.func``); SciPy's modules are reached
through :func:`special` and :func:`stats`, which give ``scipy.special``/``scipy.stats`` for NumPy and
``jax.scipy.special``/``jax.scipy.stats`` for JAX, so the two spellings read the same.  The objectives
are written here from their mathematical definitions; the sources:

==========================  ====================================================================================
objective                   source
==========================  ====================================================================================
extended_rosenbrock         Moré, Garbow, Hillstrom (1981), ACM TOMS 7(1) 17-41, problem 21
powell_singular             Moré, Garbow, Hillstrom (1981), problem 22 (extended Powell singular)
broyden_tridiagonal         Moré, Garbow, Hillstrom (1981), problem 30
discrete_boundary_value     Moré, Garbow, Hillstrom (1981), problem 28
wood                        Moré, Garbow, Hillstrom (1981), problem 14
trigonometric               Moré, Garbow, Hillstrom (1981), problem 26
variably_dimensioned        Moré, Garbow, Hillstrom (1981), problem 25
brown_almost_linear         Moré, Garbow, Hillstrom (1981), problem 27
arwhead                     CUTEst ARWHEAD (Conn, Gould, Lescrenier, Toint 1994; SIF collection)
fletchcr                    CUTEst FLETCHCR (Fletcher's chained Rosenbrock; SIF collection)
autograd_logistic           autograd, README / examples/logistic_regression.py (sigmoid through tanh)
autograd_neural_net         autograd, examples/neural_net.py (list of (W, b), logsumexp, L2 prior)
autograd_gmm                autograd, examples/gmm.py (dict of parameters, per-component solve and slogdet)
autograd_gp                 autograd, examples/gaussian_process.py (RBF kernel, log marginal likelihood by
                            cholesky and solve)
autograd_rnn                autograd, examples/rnn.py (Python loop over time, dict of parameters, logsumexp)
autograd_bbsvi              autograd, examples/black_box_svi.py (reparameterized ELBO; the target here is a
                            Bayesian logistic regression; the noise is drawn outside and passed in)
autograd_lstm               autograd, examples/lstm.py (four gates by ``np.hstack`` and ``np.dot`` in a Python
                            loop over time, dict of parameters, logsumexp)
autograd_hmm                autograd, examples/hmm_em.py (``log_partition_function``: the forward algorithm in
                            log space over a list of integer sequences, ``log_B[:, y]``)
autograd_ica                autograd, examples/ica.py (``logprob``: ``scipy.stats.t.logpdf`` of the
                            observations around ``latents · weights``)
autograd_negative_binomial  autograd, examples/negative_binomial_maxlike.py (``negbin_loglike`` by gammaln)
autograd_fluidsim           autograd, examples/fluidsim/fluidsim.py (advection by bilinear interpolation at
                            cells ``np.floor(…).astype(int)``, projection by ``np.roll`` sweeps, three steps;
                            the initial smoke an argument instead of a global NumPy array)
jax_mnist_mlp               JAX, examples/mnist_classifier_fromscratch.py (list of (w, b), batch tuple)
jax_advi_funnel             JAX, examples/advi.py (Neal's funnel, scipy.stats.norm.logpdf, batch of samples)
jax_convolve                JAX documentation, "Thinking in JAX" / just-in-time compilation: ``convolve``
                            as a Python loop of ``dot`` over windows, stacked with ``array``
kalman_filter               Kalman filter negative log-likelihood by the prediction-error decomposition as a
                            Python loop (Särkkä 2013, "Bayesian Filtering and Smoothing", alg. 4.3;
                            Harvey 1989)
conv1d_slices               direct-form FIR filter (valid cross-correlation) written with shifted slices;
                            Tikhonov-regularized deconvolution w.r.t. the signal
laplacian_stencil           the 5-point finite-difference Laplacian (LeVeque 2007, "Finite Difference Methods
                            for ODEs and PDEs", §3.2): least-squares residual of −Δu = f by slicing
bratu                       MINPACK-2's solid fuel ignition (Bratu) functional (Averick, Carter, Moré, Xue
                            1992), ½‖∇v‖² − λ eᵛ by forward differences on a zero-padded grid (``np.pad``)
softmax_attention           scaled dot-product attention (Vaswani et al. 2017) with ``scipy.special.softmax``;
                            dict of Wq, Wk, Wv
huber_regression            optax's ``huber_loss`` spelling of Huber's loss (Huber 1964): minimum and abs
poisson_glm                 statsmodels' ``Poisson`` family log-likelihood, y log μ − μ − gammaln(y + 1)
==========================  ====================================================================================

For every objective and derivative — the gradient, and the Hessian where the parameters number at
most :data:`HESSIAN_MAX_PARAMS` — the record keeps:

* correctness: jacacc's result against JAX's (float64, ``jax_enable_x64``), the largest entry
  difference over the largest reference entry (``max_rel_error``) and ``right`` (at most
  :data:`RTOL`); an exception of jacacc is recorded as ``refused`` with its one-line message (and
  ``status: refused``), never raised; PyTorch's result is checked against JAX's too;
* the first call (``first_call_s``: trace, plan or compile, and one evaluation made concrete) of
  ``jacacc.tensor.grad``/``hessian``, ``jax.jit(jax.grad/hessian)`` and ``torch.func.grad/hessian``,
  in this one process: every cache (jacacc's plans and its on-disk kernel cache, JAX's and
  Numba's) is whatever the process and the machine had (``first_call_outside.py`` measures the
  empty-cache first call in fresh processes);
* the warm time per call: warm-up calls first, at least :data:`WARM_UP_CALLS` and for at least
  :data:`WARM_UP_SECONDS` (jacacc's fused kernels compile on the third call, and its scalar tier is
  tried once a program has spent enough time in NumPy steps: the steady state of a function called in
  an optimizer's loop; JAX and PyTorch get the same warm-up), and jacacc's calls on until its plans
  have reached that steady state (``Program.settled``, at most :data:`STEADY_STATE_MAX_S`: a tier
  tried in the middle of the timed rounds made a row's ratio depend on the machine's load), then ``--repeats`` samples (each a call looped for at least ``min_sample_s`` and averaged),
  taken in rounds that time every library once each; the best and the median sample;
* ``jax_over_jacacc`` = JAX's best time / jacacc's (> 1: jacacc faster), ``torch_over_jacacc`` the
  same for PyTorch; the summary gives their geometric means over the objectives per derivative.

One thread: the process is pinned to one CPU (``os.sched_setaffinity``), BLAS gets one thread
(threadpoolctl, :func:`jacacc.bench.blas_threads`), Numba one (:func:`jacacc.bench.limit_numba_threads`),
PyTorch one, XLA ``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`` (effective
only where JAX's CPU backend had not started; the record says).

    python experiments/outside.py                          # results/outside.json, a few minutes
    python experiments/outside.py --quick --out /tmp/outside.json
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special
import scipy.stats

from jacacc.bench import (
    blas_threads,
    limit_numba_threads,
    load_average,
    sibling_script,
    time_call,
    write_record,
)

EXPERIMENT = "outside"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DERIVATIVES = ("gradient", "hessian")
LIBRARIES = ("jax", "jacacc", "torch")  # JAX first: its result is the reference
HESSIAN_MAX_PARAMS = 300
RTOL = 1e-8
WARM_UP_CALLS = 8
WARM_UP_SECONDS = 2.0
#: Longest warm-up of a jacacc call that has not reached its steady state (``Program.settled``: its
#: scalar tier tried, which it is once its NumPy steps have cost what writing the table would)
STEADY_STATE_MAX_S = 30.0
REPEATS = 7
QUICK_REPEATS = 2
MIN_SAMPLE_S = 0.02
LOG_2PI = math.log(2 * math.pi)

Array = Any  # a NumPy, JAX or PyTorch array
Tree = Any  # an array, or a list / tuple / dict of trees


# =========================================================================== namespaces
def _is_jax(xp: Any) -> bool:
    return getattr(xp, "__name__", "") == "jax.numpy"


def special(xp: Any) -> Any:
    """``scipy.special`` for NumPy, ``jax.scipy.special`` for ``jax.numpy``, the torch twin's own."""
    if xp is np:
        return scipy.special
    if _is_jax(xp):
        import jax.scipy.special

        return jax.scipy.special
    return xp.special


def stats(xp: Any) -> Any:
    """``scipy.stats`` for NumPy, ``jax.scipy.stats`` for ``jax.numpy``, the torch twin's own."""
    if xp is np:
        return scipy.stats
    if _is_jax(xp):
        import jax.scipy.stats

        return jax.scipy.stats
    return xp.stats


class TorchNumPy:
    """PyTorch under the NumPy (and SciPy) spellings the objectives use; other names are ``torch``'s.

    Examples
    --------
    >>> import torch
    >>> xp = TorchNumPy()
    >>> xp.sum(torch.ones(2, 3), axis=1, keepdims=True).shape
    torch.Size([2, 1])
    >>> float(xp.special.logsumexp(torch.zeros(2, dtype=torch.float64)))
    0.6931471805599453
    """

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.special = _TorchSpecial(torch)
        self.stats = _TorchStats(torch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["torch"], name)

    def _tensor(self, a: Any) -> Any:
        t = self.torch
        return a if isinstance(a, t.Tensor) else t.as_tensor(a, dtype=t.float64)

    def sum(self, a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        return self.torch.sum(a) if axis is None else self.torch.sum(a, dim=axis, keepdim=keepdims)

    def mean(self, a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        return self.torch.mean(a) if axis is None else self.torch.mean(a, dim=axis, keepdim=keepdims)

    def max(self, a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        return self.torch.amax(a) if axis is None else self.torch.amax(a, dim=axis, keepdim=keepdims)

    def prod(self, a: Any) -> Any:
        return self.torch.prod(a)

    def concatenate(self, arrays: Any, axis: int = 0) -> Any:
        return self.torch.cat([self._tensor(a) for a in arrays], dim=axis)

    def stack(self, arrays: Any, axis: int = 0) -> Any:
        return self.torch.stack([self._tensor(a) for a in arrays], dim=axis)

    def array(self, values: Any) -> Any:
        if isinstance(values, list | tuple):
            return self.torch.stack([self.array(v) for v in values])
        return self._tensor(values)

    def zeros(self, shape: Any) -> Any:
        return self.torch.zeros(shape, dtype=self.torch.float64)

    def ones(self, shape: Any) -> Any:
        return self.torch.ones(shape, dtype=self.torch.float64)

    def eye(self, n: int) -> Any:
        return self.torch.eye(n, dtype=self.torch.float64)

    def arange(self, start: float, stop: float) -> Any:
        return self.torch.arange(start, stop, dtype=self.torch.float64)

    def dot(self, a: Any, b: Any) -> Any:
        return self.torch.matmul(a, b)

    def maximum(self, a: Any, b: Any) -> Any:
        return self.torch.maximum(self._tensor(a), self._tensor(b))

    def minimum(self, a: Any, b: Any) -> Any:
        return self.torch.minimum(self._tensor(a), self._tensor(b))

    def logaddexp(self, a: Any, b: Any) -> Any:
        return self.torch.logaddexp(self._tensor(a), self._tensor(b))

    def sqrt(self, a: Any) -> Any:
        return self.torch.sqrt(self._tensor(a))

    def pad(self, a: Any, width: int) -> Any:
        return self.torch.nn.functional.pad(a, (width,) * (2 * a.dim()))

    def repeat(self, a: Any, repeats: int, axis: int) -> Any:
        return self.torch.repeat_interleave(a, repeats, dim=axis)

    def expand_dims(self, a: Any, axis: int) -> Any:
        return self.torch.unsqueeze(a, axis)

    def hstack(self, arrays: Any) -> Any:
        tensors = [self._tensor(a) for a in arrays]
        return self.torch.cat(tensors, dim=1 if tensors[0].dim() > 1 else 0)

    def log(self, a: Any) -> Any:
        return self.torch.log(self._tensor(a))


class _TorchSpecial:
    """``scipy.special``'s spellings on PyTorch."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def logsumexp(self, a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        if axis is None:
            return self.torch.logsumexp(a.reshape(-1), dim=0)
        return self.torch.logsumexp(a, dim=axis, keepdim=keepdims)

    def softmax(self, a: Any, axis: int) -> Any:
        return self.torch.softmax(a, dim=axis)

    def gammaln(self, a: Any) -> Any:
        return self.torch.special.gammaln(a)


class _TorchStats:
    """``scipy.stats.norm`` on PyTorch: ``torch.distributions.Normal`` (argument checks off, as
    ``torch.func`` needs)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.norm = self

    def logpdf(self, x: Any, loc: Any = 0.0, scale: Any = 1.0) -> Any:
        t = self.torch
        scale = scale if isinstance(scale, t.Tensor) else t.as_tensor(scale, dtype=t.float64)
        loc = loc if isinstance(loc, t.Tensor) else t.as_tensor(loc, dtype=t.float64)
        return t.distributions.Normal(loc, scale, validate_args=False).log_prob(x)


# =========================================================================== the objectives
# ---------------------------------------------------------------- Moré, Garbow, Hillstrom (1981)
def extended_rosenbrock(x: Array, xp: Any = np) -> Array:
    """MGH 21: Σᵢ (10 (x₂ᵢ − x₂ᵢ₋₁²))² + (1 − x₂ᵢ₋₁)²."""
    odd, even = x[::2], x[1::2]
    return xp.sum((10.0 * (even - odd ** 2)) ** 2 + (1.0 - odd) ** 2)


def powell_singular(x: Array, xp: Any = np) -> Array:
    """MGH 22: Σ over blocks of four (x₁ + 10x₂)² + 5(x₃ − x₄)² + (x₂ − 2x₃)⁴ + 10(x₁ − x₄)⁴."""
    x1, x2, x3, x4 = x[0::4], x[1::4], x[2::4], x[3::4]
    return xp.sum((x1 + 10 * x2) ** 2 + 5 * (x3 - x4) ** 2 + (x2 - 2 * x3) ** 4 + 10 * (x1 - x4) ** 4)


def broyden_tridiagonal(x: Array, xp: Any = np) -> Array:
    """MGH 30: Σᵢ ((3 − 2xᵢ)xᵢ − xᵢ₋₁ − 2xᵢ₊₁ + 1)², x₀ = xₙ₊₁ = 0."""
    left = xp.concatenate((xp.zeros(1), x[:-1]))
    right = xp.concatenate((x[1:], xp.zeros(1)))
    f = (3 - 2 * x) * x - left - 2 * right + 1
    return xp.sum(f ** 2)


def discrete_boundary_value(x: Array, xp: Any = np) -> Array:
    """MGH 28: Σᵢ (2xᵢ − xᵢ₋₁ − xᵢ₊₁ + h²(xᵢ + tᵢ + 1)³/2)², h = 1/(n + 1), tᵢ = ih, x₀ = xₙ₊₁ = 0."""
    n = x.shape[0]
    h = 1.0 / (n + 1)
    t = xp.arange(1, n + 1) * h
    left = xp.concatenate((xp.zeros(1), x[:-1]))
    right = xp.concatenate((x[1:], xp.zeros(1)))
    f = 2 * x - left - right + h ** 2 * (x + t + 1) ** 3 / 2
    return xp.sum(f ** 2)


def wood(x: Array, xp: Any = np) -> Array:
    """MGH 14: the sum of squares of the six residuals of Wood's function, by scalar indexing."""
    f = xp.array([10 * (x[1] - x[0] ** 2), 1 - x[0], math.sqrt(90) * (x[3] - x[2] ** 2), 1 - x[2],
                  math.sqrt(10) * (x[1] + x[3] - 2), (x[1] - x[3]) / math.sqrt(10)])
    return xp.sum(f ** 2)


def trigonometric(x: Array, xp: Any = np) -> Array:
    """MGH 26: Σᵢ (n − Σⱼ cos xⱼ + i(1 − cos xᵢ) − sin xᵢ)²."""
    n = x.shape[0]
    i = xp.arange(1, n + 1)
    f = n - xp.sum(xp.cos(x)) + i * (1 - xp.cos(x)) - xp.sin(x)
    return xp.sum(f ** 2)


def variably_dimensioned(x: Array, xp: Any = np) -> Array:
    """MGH 25: Σⱼ (xⱼ − 1)² + s² + s⁴, s = Σⱼ j(xⱼ − 1)."""
    n = x.shape[0]
    j = xp.arange(1, n + 1)
    s = xp.sum(j * (x - 1))
    return xp.sum((x - 1) ** 2) + s ** 2 + s ** 4


def brown_almost_linear(x: Array, xp: Any = np) -> Array:
    """MGH 27: Σᵢ₍ᵢ<ₙ₎ (xᵢ + Σⱼ xⱼ − (n + 1))² + (Πⱼ xⱼ − 1)²."""
    n = x.shape[0]
    f = x[:-1] + xp.sum(x) - (n + 1)
    return xp.sum(f ** 2) + (xp.prod(x) - 1) ** 2


# ---------------------------------------------------------------- CUTEst
def arwhead(x: Array, xp: Any = np) -> Array:
    """ARWHEAD: Σᵢ₍ᵢ<ₙ₎ (−4xᵢ + 3) + (xᵢ² + xₙ²)²."""
    return xp.sum(-4 * x[:-1] + 3) + xp.sum((x[:-1] ** 2 + x[-1] ** 2) ** 2)


def fletchcr(x: Array, xp: Any = np) -> Array:
    """FLETCHCR: Σᵢ 100 (xᵢ₊₁ − xᵢ + 1 − xᵢ²)²."""
    return xp.sum(100 * (x[1:] - x[:-1] + 1 - x[:-1] ** 2) ** 2)


# ---------------------------------------------------------------- autograd's examples
def _sigmoid(x: Array, xp: Any = np) -> Array:
    return 0.5 * (xp.tanh(x / 2.0) + 1)


def autograd_logistic(weights: Array, inputs: Array, targets: Array, xp: Any = np) -> Array:
    """Negative log-likelihood of logistic predictions σ(inputs·w) of 0/1 targets."""
    preds = _sigmoid(xp.dot(inputs, weights), xp)
    label_probabilities = preds * targets + (1 - preds) * (1 - targets)
    return -xp.sum(xp.log(label_probabilities))


L2_REG = 1.0


def autograd_neural_net(params: Tree, inputs: Array, targets: Array, xp: Any = np) -> Array:
    """A tanh network over a list of (W, b) layers, log-softmax outputs, minus the log posterior with an
    L2 prior."""
    sp = special(xp)
    for W, b in params:
        outputs = xp.dot(inputs, W) + b
        inputs = xp.tanh(outputs)
    log_probs = outputs - sp.logsumexp(outputs, axis=1, keepdims=True)
    log_prior = -L2_REG * sum(xp.sum(W ** 2) + xp.sum(b ** 2) for W, b in params)
    log_lik = xp.sum(log_probs * targets)
    return -(log_prior + log_lik)


def autograd_gmm(params: Tree, data: Array, xp: Any = np) -> Array:
    """Negative log-likelihood of a Gaussian mixture: per component a covariance ``LᵀL`` from its
    square root, the Mahalanobis term by ``solve`` and the log-determinant by ``slogdet``."""
    sp = special(xp)
    log_weights = params["log proportions"] - sp.logsumexp(params["log proportions"])
    cluster_lls = []
    for log_weight, mean, cov_sqrt in zip(log_weights, params["means"], params["lower triangles"], strict=True):
        cov = xp.dot(cov_sqrt.T, cov_sqrt)
        diff = data - mean
        mahalanobis = xp.sum(diff * xp.linalg.solve(cov, diff.T).T, axis=1)
        logdet = xp.linalg.slogdet(cov)[1]
        cluster_lls.append(log_weight - 0.5 * (mahalanobis + logdet + data.shape[1] * LOG_2PI))
    return -xp.sum(sp.logsumexp(xp.stack(cluster_lls), axis=0))


def autograd_gp(params: Tree, x: Array, y: Array, xp: Any = np) -> Array:
    """Negative log marginal likelihood of a GP (RBF kernel with per-dimension length scales); params:
    (mean, log noise, log output scale, log length scales…); through ``cholesky`` and ``solve``."""
    mean, noise, output_scale = params[0], xp.exp(params[1]) + 1e-4, xp.exp(params[2])
    lengthscales = xp.exp(params[3:])
    diffs = xp.expand_dims(x / lengthscales, 1) - xp.expand_dims(x / lengthscales, 0)
    cov = output_scale * xp.exp(-0.5 * xp.sum(diffs ** 2, axis=2)) + noise * xp.eye(y.shape[0])
    L = xp.linalg.cholesky(cov)
    r = y - mean
    alpha = xp.linalg.solve(L.T, xp.linalg.solve(L, r))
    return 0.5 * xp.dot(r, alpha) + xp.sum(xp.log(xp.diag(L))) + 0.5 * y.shape[0] * LOG_2PI


def autograd_rnn(params: Tree, inputs: Array, xp: Any = np) -> Array:
    """Mean negative log-likelihood of one-hot sequences (T, B, D) under a tanh RNN run as a Python loop;
    the inputs are the targets, as the example's training loss."""
    sp = special(xp)

    def concat_and_multiply(weights: Array, *args: Array) -> Array:
        cat_state = xp.concatenate(args + (xp.ones((args[0].shape[0], 1)),), axis=1)
        return xp.dot(cat_state, weights)

    num_steps, num_sequences = inputs.shape[0], inputs.shape[1]
    hiddens = xp.repeat(params["init hiddens"], num_sequences, axis=0)
    loglik = 0.0
    for t in range(num_steps):
        hiddens = xp.tanh(concat_and_multiply(params["change"], inputs[t], hiddens))
        output = concat_and_multiply(params["predict"], hiddens)
        logprobs = output - sp.logsumexp(output, axis=1, keepdims=True)
        loglik = loglik + xp.sum(logprobs * inputs[t])
    return -loglik / (num_steps * num_sequences)


def autograd_lstm(params: Tree, inputs: Array, targets: Array, xp: Any = np) -> Array:
    """Negative mean log-likelihood of one-hot sequences (T, B, D) under an LSTM run as a Python loop
    (four gates, each ``np.dot`` of ``np.hstack``'ed input, hiddens and a column of ones), as
    ``lstm_log_likelihood`` of the example."""
    sp = special(xp)

    def sigmoid(x: Array) -> Array:
        return 0.5 * (xp.tanh(x) + 1.0)

    def concat_and_multiply(weights: Array, *args: Array) -> Array:
        cat_state = xp.hstack(args + (xp.ones((args[0].shape[0], 1)),))
        return xp.dot(cat_state, weights)

    def update_lstm(input: Array, hiddens: Array, cells: Array, forget_weights: Array, change_weights: Array,
                    ingate_weights: Array, outgate_weights: Array) -> tuple[Array, Array]:
        change = xp.tanh(concat_and_multiply(change_weights, input, hiddens))
        forget = sigmoid(concat_and_multiply(forget_weights, input, hiddens))
        ingate = sigmoid(concat_and_multiply(ingate_weights, input, hiddens))
        outgate = sigmoid(concat_and_multiply(outgate_weights, input, hiddens))
        cells = cells * forget + ingate * change
        hiddens = outgate * xp.tanh(cells)
        return hiddens, cells

    def hiddens_to_output_probs(hiddens: Array) -> Array:
        output = concat_and_multiply(params["predict"], hiddens)
        return output - sp.logsumexp(output, axis=1, keepdims=True)

    num_sequences = inputs.shape[1]
    hiddens = xp.repeat(params["init hiddens"], num_sequences, axis=0)
    cells = xp.repeat(params["init cells"], num_sequences, axis=0)
    output = [hiddens_to_output_probs(hiddens)]
    for input in inputs:
        hiddens, cells = update_lstm(input, hiddens, cells, params["forget"], params["change"], params["ingate"],
                                     params["outgate"])
        output.append(hiddens_to_output_probs(hiddens))
    loglik = 0.0
    num_time_steps, num_examples, _ = inputs.shape
    for t in range(num_time_steps):
        loglik += xp.sum(output[t] * targets[t])
    return -loglik / (num_time_steps * num_examples)


def autograd_hmm(natural_params: Tree, data: Tree, xp: Any = np) -> Array:
    """The log partition function of an HMM (the forward algorithm in log space, a Python loop over
    each sequence's observations, ``log_B[:, y]`` by an integer observation), summed over a list of
    sequences, as ``log_partition_function`` of the example (whose gradient is EM's E-step)."""
    sp = special(xp)
    if isinstance(data, list):
        return sum(autograd_hmm(natural_params, sequence, xp) for sequence in data)
    log_pi, log_A, log_B = natural_params
    log_alpha = log_pi
    for y in data:
        log_alpha = sp.logsumexp(log_alpha[:, None] + log_A, axis=0) + log_B[:, y]
    return sp.logsumexp(log_alpha)


def autograd_ica(weights: Array, latents: Array, noise_std: Array, observed: Array, xp: Any = np) -> Array:
    """Negative log-likelihood of ICA's observation model: Student-t noise (2.4 degrees of freedom)
    around ``latents · weights``, by ``scipy.stats.t.logpdf``, as ``logprob`` of the example."""
    preds = xp.dot(latents, weights)
    return -xp.sum(stats(xp).t.logpdf(preds, 2.4, observed, noise_std))


def autograd_negative_binomial(rp: Array, x: Array, xp: Any = np) -> Array:
    """Negative log-likelihood of negative-binomial counts in (r, p) through ``gammaln``, as
    ``negbin_loglike`` of the example, summed over the data."""
    gammaln = special(xp).gammaln
    r, p = rp[0], rp[1]
    return -xp.sum(gammaln(r + x) - gammaln(r) - gammaln(x + 1) + x * xp.log(p) + r * xp.log(1 - p))


def autograd_fluidsim(params: Array, init_smoke: Array, target: Array, xp: Any = np) -> Array:
    """Distance to a target image after a smoke simulation (semi-Lagrangian advection by bilinear
    interpolation at cells computed from the velocities, ``np.floor(…).astype(int)`` and ``np.mod``,
    then projection by Gauss-Seidel sweeps of ``np.roll``), as ``objective`` of the example; the
    initial smoke is an argument, not a global (a NumPy array indexed by traced integers is not traced)."""

    def project(vx: Array, vy: Array) -> tuple[Array, Array]:
        p = xp.zeros(vx.shape)
        h = 1.0 / vx.shape[0]
        div = -0.5 * h * (xp.roll(vx, -1, axis=0) - xp.roll(vx, 1, axis=0)
                          + xp.roll(vy, -1, axis=1) - xp.roll(vy, 1, axis=1))
        for _ in range(10):
            p = (div + xp.roll(p, 1, axis=0) + xp.roll(p, -1, axis=0)
                 + xp.roll(p, 1, axis=1) + xp.roll(p, -1, axis=1)) / 4.0
        vx -= 0.5 * (xp.roll(p, -1, axis=0) - xp.roll(p, 1, axis=0)) / h
        vy -= 0.5 * (xp.roll(p, -1, axis=1) - xp.roll(p, 1, axis=1)) / h
        return vx, vy

    def advect(f: Array, vx: Array, vy: Array) -> Array:
        rows, cols = f.shape
        cell_ys, cell_xs = xp.meshgrid(xp.arange(rows), xp.arange(cols))
        center_xs = (cell_xs - vx).ravel()
        center_ys = (cell_ys - vy).ravel()
        left_ix = xp.floor(center_xs).astype(int)
        top_ix = xp.floor(center_ys).astype(int)
        rw = center_xs - left_ix
        bw = center_ys - top_ix
        left_ix = xp.mod(left_ix, rows)
        right_ix = xp.mod(left_ix + 1, rows)
        top_ix = xp.mod(top_ix, cols)
        bot_ix = xp.mod(top_ix + 1, cols)
        flat_f = (1 - rw) * ((1 - bw) * f[left_ix, top_ix] + bw * f[left_ix, bot_ix]) \
            + rw * ((1 - bw) * f[right_ix, top_ix] + bw * f[right_ix, bot_ix])
        return xp.reshape(flat_f, (rows, cols))

    vx, vy, smoke = params[:, :, 0], params[:, :, 1], init_smoke
    for _ in range(FLUID_STEPS):
        vx_updated = advect(vx, vx, vy)
        vy_updated = advect(vy, vx, vy)
        vx, vy = project(vx_updated, vy_updated)
        smoke = advect(smoke, vx, vy)
    return xp.mean((target - smoke) ** 2)


FLUID_STEPS = 3


def autograd_bbsvi(params: Tree, noise: Array, X: Array, y: Array, xp: Any = np) -> Array:
    """Negative ELBO of a diagonal Gaussian q(w) = N(mean, exp(log_std)²) for a Bayesian logistic
    regression (N(0, 1) prior, ±1 labels), by reparameterized samples from fixed noise."""
    D = noise.shape[1]
    mean, log_std = params[:D], params[D:]
    samples = noise * xp.exp(log_std) + mean
    log_prior = -0.5 * xp.sum(samples ** 2, axis=1)
    log_lik = -xp.sum(xp.logaddexp(0.0, -y * xp.dot(samples, X.T)), axis=1)
    gaussian_entropy = 0.5 * D * (1.0 + LOG_2PI) + xp.sum(log_std)
    return -(gaussian_entropy + xp.mean(log_prior + log_lik))


# ---------------------------------------------------------------- JAX's examples and documentation
def jax_mnist_mlp(params: Tree, batch: Tree, xp: Any = np) -> Array:
    """Mean cross-entropy of a tanh MLP over a list of (w, b) layers, the data a batch tuple."""
    sp = special(xp)
    inputs, targets = batch
    activations = inputs
    for w, b in params[:-1]:
        outputs = xp.dot(activations, w) + b
        activations = xp.tanh(outputs)
    final_w, final_b = params[-1]
    logits = xp.dot(activations, final_w) + final_b
    preds = logits - sp.logsumexp(logits, axis=1, keepdims=True)
    return -xp.mean(xp.sum(preds * targets, axis=1))


def jax_advi_funnel(params: Tree, eps: Array, xp: Any = np) -> Array:
    """Negative ELBO of a diagonal Gaussian for Neal's funnel, log p(x) = N(x₀; 0, exp(x₁)) +
    N(x₁; 0, 1.35), by reparameterized samples from fixed noise (S, 2)."""
    norm = stats(xp).norm
    mean, log_std = params[:2], params[2:]
    samples = mean + xp.exp(log_std) * eps
    log_p = norm.logpdf(samples[:, 0], 0, xp.exp(samples[:, 1])) + norm.logpdf(samples[:, 1], 0, 1.35)
    log_q = xp.sum(norm.logpdf(samples, mean, xp.exp(log_std)), axis=1)
    return -xp.mean(log_p - log_q)


def _convolve(x: Array, w: Array, xp: Any = np) -> Array:
    output = []
    for i in range(1, len(x) - 1):
        output.append(xp.dot(x[i - 1:i + 2], w))
    return xp.array(output)


def jax_convolve(x: Array, w: Array, y: Array, xp: Any = np) -> Array:
    """½‖convolve(x, w) − y‖² w.r.t. the signal x, ``convolve`` the documentation's loop of windows."""
    return 0.5 * xp.sum((_convolve(x, w, xp) - y) ** 2)


# ---------------------------------------------------------------- textbook objectives
KALMAN_DT = 0.1


def kalman_filter(theta: Array, ys: Array, xp: Any = np) -> Array:
    """Negative log-likelihood of a constant-velocity model with a damped velocity (transition
    [[1, dt], [0, φ]], process noise e^{θ₀} I, observation of the position with noise e^{θ₁}),
    θ = (θ₀, θ₁, φ), by the Kalman filter's prediction-error decomposition, a Python loop."""
    F = xp.array([[1.0, KALMAN_DT], [0.0, theta[2]]])
    Q = xp.exp(theta[0]) * xp.eye(2)
    R = xp.exp(theta[1]) * xp.eye(1)
    H = xp.array([[1.0, 0.0]])
    m = xp.zeros(2)
    P = xp.eye(2)
    nll = 0.0
    for y in ys:
        m = F @ m
        P = F @ P @ F.T + Q
        v = y - H @ m
        S = H @ P @ H.T + R
        K = xp.linalg.solve(S, H @ P).T
        m = m + K @ v
        P = P - K @ S @ K.T
        nll = nll + 0.5 * (v @ xp.linalg.solve(S, v) + xp.linalg.slogdet(S)[1] + LOG_2PI)
    return nll


TIKHONOV = 0.1


def conv1d_slices(x: Array, w: Array, y: Array, xp: Any = np) -> Array:
    """½‖w ⋆ x − y‖² + ½λ‖x‖², the valid cross-correlation written as Σⱼ wⱼ x[j : n − k + 1 + j]."""
    k, n = w.shape[0], x.shape[0]
    blurred = sum(w[j] * x[j:n - k + 1 + j] for j in range(k))
    return 0.5 * xp.sum((blurred - y) ** 2) + 0.5 * TIKHONOV * xp.sum(x ** 2)


def laplacian_stencil(u: Array, f: Array, xp: Any = np) -> Array:
    """½h² Σ (Δₕu + f)² over the interior, Δₕ the 5-point Laplacian by slices, h = 1/(n − 1)."""
    h = 1.0 / (u.shape[0] - 1)
    lap = (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]) / h ** 2
    return 0.5 * h ** 2 * xp.sum((lap + f[1:-1, 1:-1]) ** 2)


BRATU_LAMBDA = 5.0


def bratu(v: Array, xp: Any = np) -> Array:
    """hₓh_y (½ Σ (∂v)² − λ Σ eᵛ): the Bratu functional on the interior unknowns, zero boundary."""
    nx, ny = v.shape
    hx, hy = 1.0 / (nx + 1), 1.0 / (ny + 1)
    u = xp.pad(v, 1)
    dvdx = (u[1:, 1:-1] - u[:-1, 1:-1]) / hx
    dvdy = (u[1:-1, 1:] - u[1:-1, :-1]) / hy
    return hx * hy * (0.5 * xp.sum(dvdx ** 2) + 0.5 * xp.sum(dvdy ** 2) - BRATU_LAMBDA * xp.sum(xp.exp(v)))


def softmax_attention(params: Tree, X: Array, Y: Array, xp: Any = np) -> Array:
    """½ mean((softmax(QKᵀ/√d) V − Y)²), Q, K, V = X Wq, X Wk, X Wv."""
    sp = special(xp)
    Q, K, V = X @ params["Wq"], X @ params["Wk"], X @ params["Wv"]
    weights = sp.softmax(Q @ K.T / xp.sqrt(Q.shape[-1]), axis=-1)
    return 0.5 * xp.mean((weights @ V - Y) ** 2)


HUBER_DELTA = 1.0


def huber_regression(w: Array, X: Array, y: Array, xp: Any = np) -> Array:
    """Σ Huber(Xw − y) in optax's spelling: ½ min(|e|, δ)² + δ(|e| − min(|e|, δ))."""
    errors = X @ w - y
    abs_errors = xp.abs(errors)
    quadratic = xp.minimum(abs_errors, HUBER_DELTA)
    linear = abs_errors - quadratic
    return xp.sum(0.5 * quadratic ** 2 + HUBER_DELTA * linear)


def poisson_glm(beta: Array, X: Array, y: Array, xp: Any = np) -> Array:
    """Negative Poisson log-likelihood with the log link: −Σ (y log μ − μ − gammaln(y + 1)), μ = exp(Xβ)."""
    sp = special(xp)
    mu = xp.exp(X @ beta)
    return -xp.sum(y * xp.log(mu) - mu - sp.gammaln(y + 1))


# =========================================================================== their arguments
Arguments = tuple[Any, ...]


def _vector(start: float | np.ndarray, n: int, rng: np.random.Generator, scale: float = 0.1) -> np.ndarray:
    """The source's starting point, perturbed (where an optimizer would evaluate)."""
    return np.broadcast_to(np.asarray(start, dtype=float), (n,)) + scale * rng.standard_normal(n)


def rosenbrock_args(n: int, rng: np.random.Generator) -> Arguments:
    return (_vector(np.tile([-1.2, 1.0], n // 2), n, rng),)


def powell_args(n: int, rng: np.random.Generator) -> Arguments:
    return (_vector(np.tile([3.0, -1.0, 0.0, 1.0], n // 4), n, rng),)


def broyden_args(n: int, rng: np.random.Generator) -> Arguments:
    return (_vector(-1.0, n, rng),)


def boundary_args(n: int, rng: np.random.Generator) -> Arguments:
    t = np.arange(1, n + 1) / (n + 1)
    return (_vector(t * (t - 1), n, rng, 0.01),)


def wood_args(n: int, rng: np.random.Generator) -> Arguments:
    return (_vector([-3.0, -1.0, -3.0, -1.0], 4, rng),)


def trigonometric_args(n: int, rng: np.random.Generator) -> Arguments:
    return (_vector(1.0 / n, n, rng, 0.01),)


def variably_args(n: int, rng: np.random.Generator) -> Arguments:
    return (_vector(1 - np.arange(1, n + 1) / n, n, rng, 0.01),)


def brown_args(n: int, rng: np.random.Generator) -> Arguments:
    return (_vector(1.0, n, rng, 0.05),)


def arwhead_args(n: int, rng: np.random.Generator) -> Arguments:
    return (_vector(1.0, n, rng),)


def fletchcr_args(n: int, rng: np.random.Generator) -> Arguments:
    return (_vector(0.0, n, rng),)


def logistic_args(n: int, rng: np.random.Generator) -> Arguments:
    X = rng.standard_normal((4 * n, n)) / math.sqrt(n)
    w = rng.standard_normal(n)
    targets = (X @ w + 0.3 * rng.standard_normal(4 * n) > 0).astype(float)
    return 0.5 * w + 0.1 * rng.standard_normal(n), X, targets


def _layers(sizes: list[int], rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(rng.standard_normal((m, n)) / math.sqrt(m), 0.1 * rng.standard_normal(n))
            for m, n in zip(sizes[:-1], sizes[1:], strict=True)]


def _one_hot(labels: np.ndarray, classes: int) -> np.ndarray:
    return np.eye(classes)[labels]


def neural_net_args(n: int, rng: np.random.Generator) -> Arguments:
    sizes = [6, n, n, 3]
    inputs = rng.standard_normal((64, sizes[0]))
    return _layers(sizes, rng), inputs, _one_hot(rng.integers(0, sizes[-1], 64), sizes[-1])


def gmm_args(n: int, rng: np.random.Generator) -> Arguments:
    K, D = n, 2
    centers = 3 * rng.standard_normal((K, D))
    data = (centers[rng.integers(0, K, 40 * K)] + rng.standard_normal((40 * K, D)))
    params = {"log proportions": 0.1 * rng.standard_normal(K), "means": centers + 0.3 * rng.standard_normal((K, D)),
              "lower triangles": np.eye(D) + 0.2 * rng.standard_normal((K, D, D))}
    return params, data


def gp_args(n: int, rng: np.random.Generator) -> Arguments:
    D = 2
    x = rng.uniform(-2, 2, (n, D))
    y = np.sin(x[:, 0]) + np.cos(2 * x[:, 1]) + 0.1 * rng.standard_normal(n)
    return np.array([0.1, -2.0, 0.2, 0.1, -0.1]) + 0.05 * rng.standard_normal(3 + D), x, y


def rnn_args(n: int, rng: np.random.Generator) -> Arguments:
    D, H, B = 5, 10, 4
    inputs = _one_hot(rng.integers(0, D, (n, B)), D)
    params = {"init hiddens": 0.1 * rng.standard_normal((1, H)),
              "change": rng.standard_normal((D + H + 1, H)) / math.sqrt(D + H),
              "predict": rng.standard_normal((H + 1, D)) / math.sqrt(H)}
    return params, inputs


def lstm_args(n: int, rng: np.random.Generator) -> Arguments:
    D, H, B = 8, 10, 4
    params = {gate: rng.standard_normal((D + H + 1, H)) / math.sqrt(D + H) for gate in
              ("forget", "change", "ingate", "outgate")}
    params.update({"init hiddens": 0.1 * rng.standard_normal((1, H)), "init cells": 0.1 * rng.standard_normal((1, H)),
                   "predict": rng.standard_normal((H + 1, D)) / math.sqrt(H)})
    return params, _one_hot(rng.integers(0, D, (n, B)), D), _one_hot(rng.integers(0, D, (n, B)), D)


def hmm_args(n: int, rng: np.random.Generator) -> Arguments:
    K, D = 3, 5
    params = [np.log(rng.dirichlet(np.ones(K))), np.log(rng.dirichlet(np.ones(K), size=K)),
              np.log(rng.dirichlet(np.ones(D), size=K))]
    return params, [rng.integers(0, D, n) for _ in range(3)]


def ica_args(n: int, rng: np.random.Generator) -> Arguments:
    latent, observed = 2, 6
    latents = rng.standard_t(2.4, (n, latent))
    weights = rng.standard_normal((latent, observed))
    data = latents @ weights + 0.5 * rng.standard_t(2.4, (n, observed))
    return weights + 0.1 * rng.standard_normal(weights.shape), latents, np.array(0.5), data


def negative_binomial_args(n: int, rng: np.random.Generator) -> Arguments:
    return np.array([3.0, 0.4]), rng.negative_binomial(5, 0.3, n).astype(float)


def fluidsim_args(n: int, rng: np.random.Generator) -> Arguments:
    grid = np.arange(n) / n
    smoke = np.outer(np.sin(np.pi * grid), np.sin(np.pi * grid))
    target = np.roll(smoke, n // 4, axis=0)
    return 0.5 * rng.standard_normal((n, n, 2)), smoke, target


def bbsvi_args(n: int, rng: np.random.Generator) -> Arguments:
    D, samples, data = n, 32, 100
    X = rng.standard_normal((data, D)) / math.sqrt(D)
    w = rng.standard_normal(D)
    y = np.where(X @ w + 0.3 * rng.standard_normal(data) > 0, 1.0, -1.0)
    params = np.concatenate([0.5 * w, -1.0 + 0.1 * rng.standard_normal(D)])
    return params, rng.standard_normal((samples, D)), X, y


def mnist_args(n: int, rng: np.random.Generator) -> Arguments:
    sizes = [10, n, 8, 4]
    inputs = rng.standard_normal((64, sizes[0]))
    return _layers(sizes, rng), (inputs, _one_hot(rng.integers(0, sizes[-1], 64), sizes[-1]))


def funnel_args(n: int, rng: np.random.Generator) -> Arguments:
    return np.array([0.1, -0.2, -0.5, -0.8]) + 0.05 * rng.standard_normal(4), rng.standard_normal((n, 2))


def convolve_args(n: int, rng: np.random.Generator) -> Arguments:
    return rng.standard_normal(n), np.array([0.25, 0.5, 0.25]), rng.standard_normal(n - 2)


def kalman_args(n: int, rng: np.random.Generator) -> Arguments:
    position, velocity, ys = 0.0, 1.0, []
    for _ in range(n):
        velocity = 0.9 * velocity + 0.1 * rng.standard_normal()
        position = position + KALMAN_DT * velocity
        ys.append([position + 0.2 * rng.standard_normal()])
    return np.array([-4.0, -3.0, 0.85]) + 0.05 * rng.standard_normal(3), np.array(ys)


def conv1d_args(n: int, rng: np.random.Generator) -> Arguments:
    w = np.exp(-0.5 * np.linspace(-2, 2, 7) ** 2)
    w /= w.sum()
    return rng.standard_normal(n), w, rng.standard_normal(n - w.shape[0] + 1)


def laplacian_args(n: int, rng: np.random.Generator) -> Arguments:
    s = np.linspace(0, 1, n)
    f = 2 * np.pi ** 2 * np.outer(np.sin(np.pi * s), np.sin(np.pi * s))
    return 0.1 * rng.standard_normal((n, n)), f


def bratu_args(n: int, rng: np.random.Generator) -> Arguments:
    s = np.arange(1, n + 1) / (n + 1)
    return (np.outer(s * (1 - s), s * (1 - s)) + 0.01 * rng.standard_normal((n, n)),)


def attention_args(n: int, rng: np.random.Generator) -> Arguments:
    d, length = n, 12
    X = rng.standard_normal((length, d))
    params = {name: rng.standard_normal((d, d)) / math.sqrt(d) for name in ("Wq", "Wk", "Wv")}
    return params, X, rng.standard_normal((length, d))


def huber_args(n: int, rng: np.random.Generator) -> Arguments:
    X = rng.standard_normal((4 * n, n)) / math.sqrt(n)
    w = rng.standard_normal(n)
    return w + 0.1 * rng.standard_normal(n), X, X @ w + rng.standard_t(2.0, 4 * n)


def poisson_args(n: int, rng: np.random.Generator) -> Arguments:
    X = rng.standard_normal((4 * n, n)) / math.sqrt(n)
    beta = 0.5 * rng.standard_normal(n)
    return beta + 0.1 * rng.standard_normal(n), X, rng.poisson(np.exp(X @ beta)).astype(float)


@dataclass(frozen=True)
class Objective:
    """One outside objective: ``function(x, *data, xp=np)`` differentiated w.r.t. ``x`` (an array or a
    list / tuple / dict of arrays), its source, and its arguments at size ``n`` (``sizes``: quick, full;
    what n means is the objective's own: a vector's length, a grid's side, a layer's width, time steps).
    ``torch``: whether :class:`TorchNumPy` runs it (a twin written with PyTorch's spellings)."""

    name: str
    source: str
    function: Callable[..., Any]
    arguments: Callable[[int, np.random.Generator], Arguments]
    sizes: tuple[int, int]
    torch: bool = True


MGH = "Moré, Garbow, Hillstrom (1981), ACM TOMS 7(1), problem"
OBJECTIVES: tuple[Objective, ...] = (
    Objective("extended_rosenbrock", f"{MGH} 21", extended_rosenbrock, rosenbrock_args, (8, 200)),
    Objective("powell_singular", f"{MGH} 22", powell_singular, powell_args, (8, 200)),
    Objective("broyden_tridiagonal", f"{MGH} 30", broyden_tridiagonal, broyden_args, (8, 200)),
    Objective("discrete_boundary_value", f"{MGH} 28", discrete_boundary_value, boundary_args, (8, 200)),
    Objective("wood", f"{MGH} 14", wood, wood_args, (4, 4)),
    Objective("trigonometric", f"{MGH} 26", trigonometric, trigonometric_args, (8, 200)),
    Objective("variably_dimensioned", f"{MGH} 25", variably_dimensioned, variably_args, (8, 100)),
    Objective("brown_almost_linear", f"{MGH} 27", brown_almost_linear, brown_args, (8, 50)),
    Objective("arwhead", "CUTEst ARWHEAD (SIF collection)", arwhead, arwhead_args, (8, 300)),
    Objective("fletchcr", "CUTEst FLETCHCR (SIF collection)", fletchcr, fletchcr_args, (8, 300)),
    Objective("autograd_logistic", "autograd README, examples/logistic_regression.py", autograd_logistic,
              logistic_args, (4, 100)),
    Objective("autograd_neural_net", "autograd examples/neural_net.py", autograd_neural_net, neural_net_args,
              (4, 12)),
    Objective("autograd_gmm", "autograd examples/gmm.py", autograd_gmm, gmm_args, (2, 4)),
    Objective("autograd_gp", "autograd examples/gaussian_process.py", autograd_gp, gp_args, (8, 100)),
    Objective("autograd_rnn", "autograd examples/rnn.py", autograd_rnn, rnn_args, (3, 12)),
    Objective("autograd_bbsvi", "autograd examples/black_box_svi.py", autograd_bbsvi, bbsvi_args, (3, 20)),
    Objective("autograd_lstm", "autograd examples/lstm.py", autograd_lstm, lstm_args, (3, 12)),
    Objective("autograd_hmm", "autograd examples/hmm_em.py (log_partition_function)", autograd_hmm, hmm_args,
              (4, 20)),
    Objective("autograd_ica", "autograd examples/ica.py (logprob)", autograd_ica, ica_args, (10, 50), torch=False),
    Objective("autograd_negative_binomial", "autograd examples/negative_binomial_maxlike.py",
              autograd_negative_binomial, negative_binomial_args, (10, 100)),
    Objective("autograd_fluidsim", "autograd examples/fluidsim/fluidsim.py", autograd_fluidsim, fluidsim_args,
              (6, 16), torch=False),
    Objective("jax_mnist_mlp", "JAX examples/mnist_classifier_fromscratch.py", jax_mnist_mlp, mnist_args, (4, 12)),
    Objective("jax_advi_funnel", "JAX examples/advi.py", jax_advi_funnel, funnel_args, (8, 128)),
    Objective("jax_convolve", "JAX documentation, Thinking in JAX (convolve)", jax_convolve, convolve_args,
              (8, 100)),
    Objective("kalman_filter", "Särkkä (2013) alg. 4.3; Harvey (1989) prediction-error decomposition",
              kalman_filter, kalman_args, (3, 20)),
    Objective("conv1d_slices", "direct-form FIR filter by shifted slices (valid cross-correlation)", conv1d_slices,
              conv1d_args, (12, 300)),
    Objective("laplacian_stencil", "5-point Laplacian, LeVeque (2007) §3.2", laplacian_stencil, laplacian_args,
              (5, 17)),
    Objective("bratu", "MINPACK-2 solid fuel ignition (Averick, Carter, Moré, Xue 1992)", bratu, bratu_args, (3, 16)),
    Objective("softmax_attention", "scaled dot-product attention, Vaswani et al. (2017)", softmax_attention,
              attention_args, (3, 8)),
    Objective("huber_regression", "optax huber_loss (Huber 1964)", huber_regression, huber_args, (4, 100)),
    Objective("poisson_glm", "statsmodels genmod families.Poisson loglike", poisson_glm, poisson_args, (4, 100)),
)
BY_NAME = {o.name: o for o in OBJECTIVES}


# =========================================================================== trees
def tree_map(fn: Callable[[Any], Any], tree: Tree) -> Tree:
    """``fn`` on every array of a list / tuple / dict tree (a dict's keys kept)."""
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(tree_map(fn, v) for v in tree)
    return fn(tree)


def tree_leaves(tree: Tree) -> list[Any]:
    """The arrays of a tree in JAX's order (a dict's keys sorted), nested trees depth first."""
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in tree_leaves(tree[k])]
    if isinstance(tree, list | tuple):
        return [leaf for v in tree for leaf in tree_leaves(v)]
    return [tree]


def as_numpy(value: Any) -> np.ndarray:
    """A library's array as a float64 NumPy array."""
    if hasattr(value, "detach"):
        value = value.detach().numpy()
    return np.asarray(value, dtype=np.float64)


def flatten(tree: Tree) -> np.ndarray:
    """Every entry of a result tree in one vector (the same order for every library's nesting)."""
    leaves = [as_numpy(leaf).ravel() for leaf in tree_leaves(tree)]
    return np.concatenate(leaves) if leaves else np.zeros(0)


def parameter_count(x: Tree) -> int:
    return int(sum(np.asarray(leaf).size for leaf in tree_leaves(x)))


def relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    """The largest entry difference over the largest reference entry (inf on a size mismatch)."""
    if result.shape != reference.shape:
        return math.inf
    if reference.size == 0:
        return 0.0
    scale = float(np.max(np.abs(reference)))
    difference = float(np.max(np.abs(result - reference)))
    return difference / scale if scale > 0 else difference


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")[:400]


# =========================================================================== the libraries
def bind(objective: Objective, xp: Any) -> Callable[..., Any]:
    """``objective.function`` with the namespace fixed: a function of the arrays only."""
    function = objective.function

    def bound(*args: Any) -> Any:
        return function(*args, xp=xp)

    bound.__name__ = objective.name
    return bound


def jacacc_call(objective: Objective, derivative: str, args: Arguments) -> Callable[[], Any]:
    """``jacacc.tensor.grad(f)`` / ``hessian(f)`` (default modes) called on the NumPy arguments."""
    import jacacc.tensor as jt

    f = bind(objective, np)
    transformed = jt.grad(f) if derivative == "gradient" else jt.hessian(f)

    def call() -> Any:
        return transformed(*args)

    call.settled = lambda: all(getattr(getattr(p, "plan", p), "settled", True) for p in transformed.plans.values())
    return call


def jax_call(objective: Objective, derivative: str, args: Arguments) -> Callable[[], Any]:
    """``jax.jit(jax.grad(f))`` / ``jax.jit(jax.hessian(f))``; the first call traces and compiles."""
    import jax
    import jax.numpy as jnp

    f = bind(objective, jnp)
    transformed = jax.jit(jax.grad(f) if derivative == "gradient" else jax.hessian(f))
    jargs = tree_map(jnp.asarray, args)
    return lambda: jax.block_until_ready(transformed(*jargs))


def torch_call(objective: Objective, derivative: str, args: Arguments) -> Callable[[], Any]:
    """``torch.func.grad(f)`` / ``torch.func.hessian(f)`` on float64 tensors, eager."""
    import torch
    import torch.func

    if not objective.torch:
        raise NotImplementedError("no torch twin")
    f = bind(objective, TorchNumPy())
    transformed = torch.func.grad(f) if derivative == "gradient" else torch.func.hessian(f)
    targs = tree_map(lambda a: torch.from_numpy(np.array(a, dtype=np.float64)), args)
    return lambda: transformed(*targs)


CALLS = {"jacacc": jacacc_call, "jax": jax_call, "torch": torch_call}
METHODS = {"jacacc": "jacacc.tensor.grad / hessian (default modes)", "jax": "jax.jit(jax.grad / jax.hessian)",
           "torch": "torch.func.grad / hessian (eager)"}


# =========================================================================== measuring
def first_call(library: str, objective: Objective, derivative: str,
               args: Arguments) -> tuple[dict[str, Any], np.ndarray | None, Callable[[], Any] | None]:
    """The library's transformation built and called once: (its part of the row, the flat result, the call);
    an exception gives ``status: failed`` with its one-line message and no call."""
    part: dict[str, Any] = {}
    try:
        start = time.perf_counter()
        call = CALLS[library](objective, derivative, args)
        result = flatten(call())
        part["first_call_s"] = time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001 - a failure is data: the row records it
        part.update(status="failed", message=one_line(exc))
        return part, None, None
    part["status"] = "ok"
    return part, result, call


def interleaved_samples(calls: list[Callable[[], Any]], repeats: int, min_time: float,
                        warm_seconds: float = WARM_UP_SECONDS) -> list[list[float]]:
    """Warm-up calls of each (at least :data:`WARM_UP_CALLS`, for at least ``warm_seconds``), then
    ``repeats`` rounds timing each call once (looped for ``min_time`` and averaged): a slow stretch of the
    machine costs each library one sample."""
    for call in calls:
        start, done = time.perf_counter(), 0
        settled = getattr(call, "settled", lambda: True)
        while done < WARM_UP_CALLS or time.perf_counter() - start < warm_seconds or (
                warm_seconds and not settled() and time.perf_counter() - start < STEADY_STATE_MAX_S):
            call()
            done += 1
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for call, mine in zip(calls, samples, strict=True):
            mine.append(time_call(call, repeat=1, min_time=min_time))
    return samples


def measure_row(objective: Objective, n: int, derivative: str, args: Arguments, repeats: int,
                min_time: float, warm_seconds: float = WARM_UP_SECONDS) -> dict[str, Any]:
    """One (objective, derivative): every library's first call, jacacc's and PyTorch's results checked
    against JAX's, then the libraries that ran (and were right) timed warm in interleaved rounds."""
    row: dict[str, Any] = {"objective": objective.name, "source": objective.source, "n": n,
                           "derivative": derivative, "params": parameter_count(args[0]),
                           "torch_twin": objective.torch}
    parts: dict[str, dict[str, Any]] = {}
    calls: dict[str, Callable[[], Any]] = {}
    reference: np.ndarray | None = None
    for library in LIBRARIES:
        if library == "torch" and not objective.torch:
            parts[library] = {"status": "no twin"}
            continue
        part, result, call = first_call(library, objective, derivative, args)
        if library == "jax":
            reference = result
        elif result is not None and reference is not None:
            part["max_rel_error"] = relative_error(result, reference)
            part["right"] = bool(part["max_rel_error"] <= RTOL)
            if not part["right"]:
                part["status"] = "wrong"
        if call is not None and part["status"] == "ok":
            calls[library] = call
        parts[library] = part
        del result
    timed = list(calls)
    for library, samples in zip(timed, interleaved_samples([calls[lib] for lib in timed], repeats, min_time,
                                                                   warm_seconds),
                                strict=True):
        parts[library].update(best_s=min(samples), median_s=statistics.median(samples), samples=samples)
    jacacc = parts["jacacc"]
    row["status"] = ("refused" if jacacc["status"] == "failed" else
                     "no reference" if reference is None else "right" if jacacc.get("right") else "wrong")
    row["right"] = jacacc.get("right")
    row["max_rel_error"] = jacacc.get("max_rel_error")
    row["refused"] = jacacc.get("message") if jacacc["status"] == "failed" else None
    row["libraries"] = parts
    row["first_call_s"] = {lib: parts[lib].get("first_call_s") for lib in LIBRARIES}
    row["warm_s"] = {lib: parts[lib].get("best_s") for lib in LIBRARIES}
    best = row["warm_s"]
    row["jax_over_jacacc"] = best["jax"] / best["jacacc"] if best["jax"] and best["jacacc"] else None
    row["torch_over_jacacc"] = best["torch"] / best["jacacc"] if best["torch"] and best["jacacc"] else None
    return row


def measure_objective(objective: Objective, n: int, args: Arguments, repeats: int, min_time: float,
                      warm_seconds: float = WARM_UP_SECONDS) -> list[dict]:
    """The gradient, and the Hessian where the parameters number at most :data:`HESSIAN_MAX_PARAMS`."""
    derivatives = DERIVATIVES if parameter_count(args[0]) <= HESSIAN_MAX_PARAMS else DERIVATIVES[:1]
    return [measure_row(objective, n, d, args, repeats, min_time, warm_seconds) for d in derivatives]


# =========================================================================== summary and table
def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(rows: list[dict]) -> dict[str, dict]:
    """Per derivative: counts of right / wrong / refused, the geometric means of JAX's and PyTorch's time
    over jacacc's (> 1: jacacc faster) and the rows that were not right."""
    summary = {}
    for derivative in DERIVATIVES:
        mine = [r for r in rows if r["derivative"] == derivative]
        jax_ratios = [r["jax_over_jacacc"] for r in mine if r["jax_over_jacacc"]]
        torch_ratios = [r["torch_over_jacacc"] for r in mine if r["torch_over_jacacc"]]
        summary[derivative] = {
            "objectives": len(mine),
            "right": sum(r["status"] == "right" for r in mine),
            "wrong": sum(r["status"] == "wrong" for r in mine),
            "refused": sum(r["status"] == "refused" for r in mine),
            "compared_with_jax": len(jax_ratios),
            "geomean_jax_over_jacacc": geometric_mean(jax_ratios),
            "jacacc_faster_than_jax": sum(v > 1 for v in jax_ratios),
            "compared_with_torch": len(torch_ratios),
            "geomean_torch_over_jacacc": geometric_mean(torch_ratios),
            "jacacc_faster_than_torch": sum(v > 1 for v in torch_ratios),
            "not_right": [{"objective": r["objective"], "status": r["status"],
                           "message": r["refused"] or (f"max relative error {r['max_rel_error']:.3g}"
                                                       if r["max_rel_error"] is not None else None)}
                          for r in mine if r["status"] != "right"],
        }
    return summary


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def table_text(record: dict) -> str:
    """The Markdown table of the rows, then the summary per derivative."""
    results = record["results"]
    lines = ["| objective | derivative | params | jacacc | first jacacc | first jax | warm jacacc | warm jax | "
             "warm torch | jax/jacacc | torch/jacacc |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        first, warm = r["first_call_s"], r["warm_s"]
        lines.append(f"| {r['objective']} | {r['derivative']} | {r['params']} | {r['status']} | "
                     f"{_time(first['jacacc'])} | {_time(first['jax'])} | {_time(warm['jacacc'])} | "
                     f"{_time(warm['jax'])} | {_time(warm['torch'])} | {_ratio(r['jax_over_jacacc'])} | "
                     f"{_ratio(r['torch_over_jacacc'])} |")
    lines += ["", "| derivative | right | wrong | refused | geomean jax/jacacc | faster than jax | "
              "geomean torch/jacacc | faster than torch |", "|---|---|---|---|---|---|---|---|"]
    for derivative, s in results["summary"].items():
        lines.append(f"| {derivative} | {s['right']} of {s['objectives']} | {s['wrong']} | {s['refused']} | "
                     f"{_ratio(s['geomean_jax_over_jacacc'])} | {s['jacacc_faster_than_jax']} of "
                     f"{s['compared_with_jax']} | {_ratio(s['geomean_torch_over_jacacc'])} | "
                     f"{s['jacacc_faster_than_torch']} of {s['compared_with_torch']} |")
    failures = [f for s in results["summary"].values() for f in s["not_right"]]
    for derivative, s in results["summary"].items():
        for f in s["not_right"]:
            lines.append(f"- {f['objective']} ({derivative}): {f['status']}: {f['message']}")
    if not failures:
        lines.append("\nevery jacacc result right")
    return "\n".join(lines)


# =========================================================================== main
def sibling(name: str) -> Any:
    """``experiments/<name>.py`` (its thread and pinning helpers)."""
    return sibling_script(HERE, name, "_outside")


def source_state(breadth: Any) -> dict[str, Any]:
    """The commit this checkout is at and what differs under ``jacacc/`` (``tensor_breadth.source_state``:
    the jacacc that was measured), read without git's optional index refresh."""
    before = os.environ.get("GIT_OPTIONAL_LOCKS")
    os.environ["GIT_OPTIONAL_LOCKS"] = "0"
    try:
        return breadth.source_state()
    finally:
        if before is None:
            del os.environ["GIT_OPTIONAL_LOCKS"]
        else:
            os.environ["GIT_OPTIONAL_LOCKS"] = before


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [o.name for o in OBJECTIVES]
    parser.add_argument("--objectives", nargs="*", default=names, choices=names, metavar="NAME",
                        help="objectives to run (default all)")
    parser.add_argument("--quick", action="store_true", help=f"tiny sizes, {QUICK_REPEATS} repeats, no looping")
    parser.add_argument("--repeats", type=int, default=None, help=f"timed samples (default {REPEATS})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--core", type=int, default=None, help="CPU to pin to (default the last one allowed)")
    parser.add_argument("--out", default=os.path.join(ROOT, "results", f"{EXPERIMENT}.json"),
                        help="the record's path (default results/outside.json)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, write the record, print the table.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (see ``--help``); ``sys.argv`` when None.

    Returns
    -------
    int
        0.  A refusal or a wrong result of jacacc is recorded in its row, not raised.
    """
    args = parse_arguments(argv)
    objectives = [BY_NAME[name] for name in args.objectives]
    repeats = args.repeats or (QUICK_REPEATS if args.quick else REPEATS)
    min_time = 0.0 if args.quick else MIN_SAMPLE_S
    warm_seconds = 0.0 if args.quick else WARM_UP_SECONDS
    size = 0 if args.quick else 1
    breadth = sibling("tensor_breadth")
    params: dict[str, Any] = {
        "objectives": {o.name: {"source": o.source, "n": o.sizes[size], "torch_twin": o.torch} for o in objectives},
        "quick": args.quick, "repeats": repeats, "warm_up_calls": WARM_UP_CALLS,
        "warm_up_seconds": warm_seconds, "min_sample_s": min_time,
        "dtype": "float64", "rtol": RTOL, "hessian_max_params": HESSIAN_MAX_PARAMS, "reference": "jax",
        "methods": METHODS,
        "error": "max |result − reference| / max |reference| over every entry",
        "first_call": "trace + plan (or compile) + one evaluation, in this process; caches (jacacc's plans and "
                      "on-disk kernel cache, JAX's and Numba's) were whatever the process and machine had",
        "timing": f"warm-up calls (at least {WARM_UP_CALLS}, for at least {warm_seconds} s), then `repeats` rounds timing every library once (a call looped "
                  "for at least `min_sample_s` and averaged); best and median sample",
        "ratio": "jax (torch) best warm time / jacacc best warm time (> 1: jacacc faster)",
        "threads": 1, "load_average_before": load_average(), "source": source_state(breadth),
    }
    start = time.perf_counter()
    rows: list[dict] = []
    with contextlib.ExitStack() as stack:
        params["xla_flags_effective"] = stack.enter_context(breadth.xla_flags())  # before JAX starts its backend
        params["xla_flags"] = os.environ["XLA_FLAGS"]
        import jax

        stack.enter_context(jax.enable_x64(True))  # jax_enable_x64 while the benchmark runs
        params["jax_enable_x64"] = bool(jax.config.jax_enable_x64)
        params["pinned_core"] = stack.enter_context(breadth.pinned_to_one_core(args.core))
        params["blas_threads"] = stack.enter_context(blas_threads(1))
        params["torch_threads"] = stack.enter_context(breadth.one_torch_thread())
        numba_before = limit_numba_threads(0)
        params["numba_threads"] = limit_numba_threads(1)
        stack.callback(limit_numba_threads, numba_before or 0)
        params["jax_devices"] = [str(d) for d in jax.devices()]
        for i, objective in enumerate(objectives):
            n = objective.sizes[size]
            data = objective.arguments(n, np.random.default_rng([args.seed, i]))
            began = time.perf_counter()
            new = measure_objective(objective, n, data, repeats, min_time, warm_seconds)
            for row in new:
                row["objective_wall_s"] = time.perf_counter() - began
                print(f"{objective.name:<24} {row['derivative']:<8} {row['status']:<8} "
                      f"jacacc {_time(row['warm_s']['jacacc'])}, jax {_time(row['warm_s']['jax'])}"
                      f"{'  ' + row['refused'] if row['refused'] else ''}", file=sys.stderr, flush=True)
            rows += new
            write_record(args.out, EXPERIMENT, {"rows": rows, "partial": True}, parameters=params, seed=args.seed)
    params["wall_s"] = time.perf_counter() - start
    params["load_average_after"] = load_average()
    record = write_record(args.out, EXPERIMENT, {"rows": rows, "summary": summarize(rows)}, parameters=params,
                          seed=args.seed)
    print(table_text(record))
    print(f"\n{len(rows)} rows in {params['wall_s']:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
