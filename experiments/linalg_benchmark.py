"""Paper 004's benchmarks: jacacc.linalg's operators and the sparse-GP bound against PyTorch, JAX and GPyTorch.

Paper 004 (Seeger et al., "Auto-Differentiating Linear Algebra"), §6:

**Operators** (Fig. 1): the forward and backward time of each operator on
n × n float64 matrices (batch 1), normalized by n³, for a geometric range of
n.  Operators: ``potrf``, ``trsm``, ``gelqf``, ``syevd`` (the paper's), and
``potri``, ``syrk``, ``gemm2``.  Libraries:

* ``jacacc`` — forward: the operator called on arrays (``jacacc.linalg.<op>``,
  LAPACK/BLAS through SciPy).  Backward: the pullback alone, as jacacc.tensor
  evaluates it inside ``grad``: for an operator registered with the tensor
  calculus (potrf, trsm, potri, gelqf, syevd) its pullback expression
  (declared, or its pushforward's transpose), with the forward outputs and the cotangents bound as arguments,
  planned once (:class:`jacacc.tensor.evaluate.Program`) and then timed
  (:func:`jacacc_pullback`); for ``syrk`` and ``gemm2``, which are einsums and
  differentiated by the tensor calculus itself, the pullback returned by one
  ``jacacc.tensor.vjp`` call (its program needs no forward value, so it is
  the backward alone; the tracing of that one ``vjp`` call is not timed).  As
  a cross-check the phase ``grad`` times ``jacacc.tensor.grad`` of
  f(X, …) = Σ_k ⟨W_k, op(X, …)_k⟩ w.r.t. the first argument (the derivative
  program is built on the first call and cached, so the warm calls time
  forward + backward); ``grad − forward`` should match ``backward`` (both are
  recorded; for trsm and gemm2 ``grad`` computes only the first argument's
  gradient).
* ``torch`` — forward: the ``torch.linalg`` function under ``no_grad``;
  backward: ``torch.autograd.grad(outputs, inputs, cotangents,
  retain_graph=True)`` on a graph built once (eager, float64).
* ``jax`` — forward: ``jax.jit`` of the function; backward: ``jax.jit`` of
  the pullback returned by ``jax.vjp`` (its residuals are arguments),
  compiled ahead of time (x64).

The peers: potrf ↔ ``cholesky``; trsm ↔ ``solve_triangular`` (lower,
left); gelqf ↔ ``qr`` of Aᵀ (A = L·Q ⇔ Aᵀ = Qᵀ·Lᵀ) with the signs normalized
as jacacc's (non-negative diagonal of L); syevd ↔ ``eigh`` with U = Vᵀ and each
row's largest-magnitude entry made positive (jacacc's convention; the sign
factors are constants of the differentiation); potri ↔ ``cholesky_inverse``
(JAX: ``cho_solve`` with the identity); syrk ↔ A·Aᵀ; gemm2 ↔ A·B.  Inputs:
potrf: A = M·Mᵀ/n + I (eigenvalues in [1, 5]); trsm and potri: the Cholesky
factor of such a matrix (B standard normal); gelqf: M/√n + 3I (singular
values about 1 to 5); syevd: Oᵀ·diag(λ)·O, O a random orthogonal matrix and
λ_i = 1 + i/n (every eigengap 1/n, no clamp).  Cotangents are standard
normal, the same arrays for every library.

**Checks before timing**: at every n each library's forward outputs and
gradients are compared with PyTorch's (largest entry difference relative to
max(1, max|reference|), at most ``TOLERANCE``); gradients w.r.t. a symmetric
argument (potrf, syevd) are compared as their symmetric parts
(``(G + Gᵀ)/2``: jacacc and PyTorch return a symmetric gradient, a library that
returns the lower-triangle fold agrees on it too), gradients w.r.t. a
triangular argument (trsm's A, potri's L) as their lower triangles.  A
library that disagrees is not timed at that n (the row says why).

**Timing**: the first call alone (``first_call_s``; for JAX the compile, for
jacacc's backward the planning, are part of it), then the median of five
warm calls (three above 50 ms; calls under 20 ms looped for 20 ms per
sample).  A (operator, library, phase) stops at the
first n where a call exceeds ``--time-budget`` or where its time
extrapolated from the previous n by (n/n_prev)³ would.  A jacacc derivative
whose largest intermediate, times three, exceeds ``--memory-cap`` is not
planned or run (``estimated_bytes``) — a guard against derivatives that
write a Jacobian out (``syrk``'s pullback wrote ∂(A·Aᵀ)/∂A as an n⁴ tensor
of δs until jacacc.tensor kept such partials as sums of maps).

**Memory of each backward** (``peak_bytes``, ``memory_measure`` names the
measure): jacacc — tracemalloc's peak over one warm call (NumPy and SciPy's
LAPACK wrappers allocate through it; the arguments excluded, the result
included); torch — the peak of the running sum of the allocation and free
events ``torch.profiler`` records (``profile_memory=True``) during one
backward call (CPU allocator, the result included); jax — XLA's compiled
memory analysis of the pullback (temporaries + outputs).  Not measured for
calls over 2 s.

**Profile** at the largest n where both jacacc's and PyTorch's backward were
timed: jacacc's backward under cProfile (self time per function: the LAPACK
and BLAS kernels, NumPy's tensordot/einsum, the evaluator's own loop) with
the FLOPs of each node of the pullback expression
(:func:`jacacc.tensor.expr.node_flops`), the FLOPs of the derivative
expression of ``grad`` (``jacacc.tensor.derivative_expression(...).flops``,
forward included), and PyTorch's backward under ``torch.profiler`` (self time
per ATen operator and the FLOPs of its matrix products and triangular solves,
counted from the recorded shapes).

**Sparse GP** (Fig. 2): the variational bound of Titsias (paper §3.2) and its
gradient w.r.t. the kernel hyperparameters, the noise variance and the
inducing points, on the synthetic data set of the "power" size (n = 9568,
d = 4) of ``experiments/linalg_examples.py`` (``power_like_data``, its
``SPARSE_PARAMS`` and ``JITTER``) for U = 50 … 800 inducing points (a random
subset of the inputs): jacacc — that module's ``sparse_gp_bound`` (θ = log
[ℓ, σ_f², σ_n²], Z) through ``jacacc.tensor.value_and_grad`` w.r.t. θ and Z
(value and both gradients from one cached program); GPyTorch's SGPR (``InducingPointKernel`` around
``ScaleKernel(RBFKernel)`` with an ``ExactMarginalLogLikelihood``: −n·mll is
the bound; ``torch.autograd.grad`` of it w.r.t. the raw lengthscale,
outputscale, noise and the inducing points); a hand-derived NumPy gradient
only where the examples module provides one (it does not: the column is
skipped with that reason).  Before timing, every method's value is compared
with a NumPy/SciPy evaluation of the bound (:func:`titsias_bound_numpy`) and
its gradient with GPyTorch's, converted to the constrained parameters
(GPyTorch's softplus raw parameters and jacacc's log-parameters by the chain
rule).  Timing, budget (``--sgp-time-budget``, extrapolated by (U/U_prev)²) and memory
(tracemalloc; torch.profiler for GPyTorch) as above; the profile at the
largest U adds the FLOPs and operator applications of jacacc's program.  See
:func:`sparse_gp`.

**Threads**: ``--threads 1`` (the default) pins every BLAS library — NumPy's
OpenBLAS and SciPy's own (a second library, which jacacc.linalg's LAPACK and
BLAS calls use) — through threadpoolctl, and Numba's parallel loops (jacacc's
fused kernels), PyTorch and XLA, with
``experiments/tensor_hessians.py``'s ``limit_threads``: one thread each on two
cores shared with other work.  PyTorch's LAPACK is MKL; NumPy's and
SciPy's are OpenBLAS.

Writes ``results/linalg_benchmark.json`` and ``figures/linalg_benchmark.png``
(Fig. 1 style: per operator, forward and backward time / n³ against n, one
line per library; and the sparse-GP time against U).

    python experiments/linalg_benchmark.py                  # the recorded run, about 6 minutes on 2 shared cores
    python experiments/linalg_benchmark.py --quick --sizes 8 16 --sgp-n 200 --sgp-inducing 5 10 --out /tmp/lb
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib.metadata
import importlib.util
import math
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc.bench import sibling_script, time_call, write_record
from jacacc.progress import note, progress_bar

EXPERIMENT = "linalg_benchmark"
OPERATORS = ("potrf", "trsm", "gelqf", "syevd", "potri", "syrk", "gemm2")
LIBRARIES = ("jacacc", "torch", "jax")
PHASES = ("forward", "backward", "grad")
SIZES = (64, 128, 256, 512, 1024, 2048)
QUICK_SIZES = (8, 16)
TIME_BUDGET = 3.0  # seconds per call
SGP_TIME_BUDGET = 20.0  # seconds per sparse-GP call: jacacc's reaches U = 800 (about 14 s there)
TOLERANCE = 1e-8
MEMORY_MAX_CALL_S = 2.0  # memory is measured with one extra call where a call takes less
MEMORY_CAP_GIB = 3.0  # a jacacc derivative whose largest intermediate (× 3) is estimated above this is skipped
MIN_SAMPLE_S = 0.02
SGP_N, SGP_D = 9568, 4  # the "power" data set's size (paper 004 §6.2)
SGP_INDUCING = (50, 100, 200, 400, 800)
QUICK_SGP_N = 300
QUICK_SGP_INDUCING = (5, 10)
SGP_TOLERANCE = 1e-7
HERE = os.path.dirname(os.path.abspath(__file__))


# =========================================================================== sibling scripts, threads
def sibling(name: str) -> Any:
    """The module ``experiments/<name>.py`` (loaded once), or None where the file does not exist."""
    return sibling_script(HERE, name, "_linalg_benchmark")


# =========================================================================== inputs and the operators per library
def _spd(n: int, rng: np.random.Generator) -> np.ndarray:
    M = rng.standard_normal((n, n))
    return M @ M.T / n + np.eye(n)


def _orthogonal(n: int, rng: np.random.Generator) -> np.ndarray:
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def _sym(G: np.ndarray) -> np.ndarray:
    return (G + G.T) / 2


def _outputs(result: Any) -> tuple:
    return tuple(result) if isinstance(result, tuple | list) else (result,)


def _torch_signs(U: Any) -> Any:
    """+1/−1 per row of U making the row's largest-magnitude entry positive (a constant: detached)."""
    import torch

    k = U.detach().abs().argmax(dim=-1, keepdim=True)
    return torch.where(U.detach().gather(-1, k) < 0, -1.0, 1.0).to(U.dtype)


def _jax_signs(U: Any) -> Any:
    import jax
    import jax.numpy as jnp

    k = jnp.argmax(jnp.abs(U), axis=-1)[:, None]
    return jax.lax.stop_gradient(jnp.where(jnp.take_along_axis(U, k, axis=-1) < 0, -1.0, 1.0))


def torch_lq(A: Any) -> tuple[Any, Any]:
    """(Q, L) with A = L·Q from ``torch.linalg.qr(Aᵀ)``, L's diagonal made non-negative as jacacc's."""
    import torch

    Qt, R = torch.linalg.qr(A.mT)
    s = torch.where(torch.diagonal(R).detach() < 0, -1.0, 1.0).to(A.dtype)
    return (Qt * s).mT, (R * s[:, None]).mT


def jax_lq(A: Any) -> tuple[Any, Any]:
    import jax
    import jax.numpy as jnp

    Qt, R = jnp.linalg.qr(A.T)
    s = jax.lax.stop_gradient(jnp.where(jnp.diagonal(R) < 0, -1.0, 1.0))
    return (Qt * s).T, (R * s[:, None]).T


def torch_eig(A: Any) -> tuple[Any, Any]:
    """(U, lam) as jacacc's syevd: rows of U the eigenvectors, each row's largest-magnitude entry positive."""
    import torch

    lam, V = torch.linalg.eigh(A)
    U = V.mT
    return U * _torch_signs(U), lam


def jax_eig(A: Any) -> tuple[Any, Any]:
    import jax.numpy as jnp

    lam, V = jnp.linalg.eigh(A)
    U = V.T
    return U * _jax_signs(U), lam


@dataclass(frozen=True)
class Case:
    """One operator: its inputs and cotangents, its spelling in each library, and how gradients are compared.

    ``make(n, rng)`` returns ``(arguments, cotangents)``; ``jacacc``, ``torch`` and ``jax`` take the
    arguments and return the outputs (an array or a tuple); ``grad_forms`` names, per argument, the form
    its gradient is compared in: ``"sym"`` (symmetric part), ``"tril"`` (lower triangle) or ``"full"``.
    """

    name: str
    make: Callable[[int, np.random.Generator], tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]]
    jacacc: Callable[..., Any]
    torch: Callable[..., Any]
    jax: Callable[..., Any]
    grad_forms: tuple[str, ...]
    peers: str

    def grad_form(self, grads: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The first ``len(grads)`` gradients in the forms compared."""
        forms = {"sym": _sym, "tril": np.tril, "full": np.asarray}
        return [forms[f](np.asarray(g)) for f, g in zip(self.grad_forms, grads, strict=False)]


def _linalg() -> Any:
    from jacacc import linalg

    return linalg


def _make_potrf(n: int, rng: np.random.Generator) -> tuple[tuple, tuple]:
    return (_spd(n, rng),), (rng.standard_normal((n, n)),)


def _make_trsm(n: int, rng: np.random.Generator) -> tuple[tuple, tuple]:
    return (np.linalg.cholesky(_spd(n, rng)), rng.standard_normal((n, n))), (rng.standard_normal((n, n)),)


def _make_gelqf(n: int, rng: np.random.Generator) -> tuple[tuple, tuple]:
    A = rng.standard_normal((n, n)) / math.sqrt(n) + 3 * np.eye(n)
    return (A,), (rng.standard_normal((n, n)), rng.standard_normal((n, n)))


def _make_syevd(n: int, rng: np.random.Generator) -> tuple[tuple, tuple]:
    O = _orthogonal(n, rng)  # noqa: E741 - the paper's name
    A = (O.T * (1.0 + np.arange(1, n + 1) / n)) @ O
    return (_sym(A),), (rng.standard_normal((n, n)), rng.standard_normal(n))


def _make_potri(n: int, rng: np.random.Generator) -> tuple[tuple, tuple]:
    return (np.linalg.cholesky(_spd(n, rng)),), (rng.standard_normal((n, n)),)


def _make_syrk(n: int, rng: np.random.Generator) -> tuple[tuple, tuple]:
    return (rng.standard_normal((n, n)),), (rng.standard_normal((n, n)),)


def _make_gemm2(n: int, rng: np.random.Generator) -> tuple[tuple, tuple]:
    return (rng.standard_normal((n, n)), rng.standard_normal((n, n))), (rng.standard_normal((n, n)),)


def _torch_linalg() -> Any:
    import torch

    return torch


def _jnp() -> Any:
    import jax.numpy as jnp

    return jnp


def _jax_solve_triangular(L: Any, B: Any) -> Any:
    import jax.scipy.linalg

    return jax.scipy.linalg.solve_triangular(L, B, lower=True)


def _jax_cholesky_inverse(L: Any) -> Any:
    import jax.scipy.linalg

    return jax.scipy.linalg.cho_solve((L, True), _jnp().eye(L.shape[-1], dtype=L.dtype))


CASES: dict[str, Case] = {
    "potrf": Case("potrf", _make_potrf, lambda A: _linalg().potrf(A),
                  lambda A: _torch_linalg().linalg.cholesky(A), lambda A: _jnp().linalg.cholesky(A),
                  ("sym",), "torch.linalg.cholesky, jnp.linalg.cholesky"),
    "trsm": Case("trsm", _make_trsm, lambda L, B: _linalg().trsm(L, B),
                 lambda L, B: _torch_linalg().linalg.solve_triangular(L, B, upper=False), _jax_solve_triangular,
                 ("tril", "full"), "torch.linalg.solve_triangular, jax.scipy.linalg.solve_triangular"),
    "gelqf": Case("gelqf", _make_gelqf, lambda A: _linalg().gelqf(A), torch_lq, jax_lq,
                  ("full",), "torch.linalg.qr(Aᵀ), jnp.linalg.qr(Aᵀ), signs normalized"),
    "syevd": Case("syevd", _make_syevd, lambda A: _linalg().syevd(A), torch_eig, jax_eig,
                  ("sym",), "torch.linalg.eigh, jnp.linalg.eigh, U = Vᵀ with jacacc's signs"),
    "potri": Case("potri", _make_potri, lambda L: _linalg().potri(L),
                  lambda L: _torch_linalg().cholesky_inverse(L), _jax_cholesky_inverse,
                  ("tril",), "torch.cholesky_inverse, jax.scipy.linalg.cho_solve(L, I)"),
    "syrk": Case("syrk", _make_syrk, lambda A: _linalg().syrk(A), lambda A: A @ A.mT, lambda A: A @ A.T,
                 ("full",), "A @ Aᵀ"),
    "gemm2": Case("gemm2", _make_gemm2, lambda A, B: _linalg().gemm2(A, B), lambda A, B: A @ B,
                  lambda A, B: A @ B, ("full", "full"), "A @ B"),
}


# =========================================================================== the measured calls
@dataclass
class Prepared:
    """A call ready to time, its result as NumPy arrays, and what is known about it."""

    call: Callable[[], Any]
    arrays: Callable[[Any], list[np.ndarray]]
    setup_s: float = 0.0
    info: dict[str, Any] | None = None
    memory: Callable[[], tuple[int | None, str]] | None = None
    estimated_bytes: int | None = None


def largest_node_bytes(roots: Sequence[Any]) -> int:
    """Bytes of the largest node of an expression (float64)."""
    from jacacc.tensor.expr import nodes_of

    return max((8 * math.prod(node.shape) for node in nodes_of(roots)), default=8)


def _weighted(case: Case, k: int) -> Callable[..., Any]:
    """Σ_j ⟨W_j, op(x_1 … x_k)_j⟩ as a function of the k arguments and the cotangents W_j."""

    def weighted(*xs: Any) -> Any:
        outs = _outputs(case.jacacc(*xs[:k]))
        total = None
        for w, o in zip(xs[k:], outs, strict=True):
            term = np.sum(w * o)
            total = term if total is None else total + term
        return total

    return weighted


def grad_estimate(case: Case, args: tuple, cts: tuple) -> int:
    """Three times the largest node of ``grad``'s derivative expression (of Σ⟨W, op⟩ w.r.t. the first argument)."""
    import jacacc.tensor as jt

    derived = jt.derivative_expression(_weighted(case, len(args)), *args, *cts, argnum=0, order=1)
    return 3 * largest_node_bytes([derived.expression])


def registered_operators() -> dict[str, str | None]:
    """Import jacacc.linalg's derivative modules; per module, None or why it could not be imported."""
    status: dict[str, str | None] = {}
    for module in ("jacacc.linalg.blas_cholesky", "jacacc.linalg.factorizations"):
        try:
            importlib.import_module(module)
            status[module] = None
        except Exception as exc:  # noqa: BLE001 - recorded: the operator's backward is then skipped
            status[module] = f"{type(exc).__name__}: {exc}"
    return status


def jacacc_pullback(case: Case, args: tuple, cts: tuple, memory_cap: float = math.inf) -> Prepared:
    """jacacc's backward of ``case`` alone (see the module docstring), planned here, timed by the caller.

    The traced function's single operator application is found in its expression; the operator's
    declared pullback is built on ``var`` nodes standing for the arguments, the forward outputs and the
    cotangents, and planned once.  An operator written as einsums (no application in the trace) goes
    through one ``jacacc.tensor.vjp`` call instead.  Where three times the largest intermediate exceeds
    ``memory_cap`` bytes, nothing is planned: the result's ``estimated_bytes`` says why.
    """
    import jacacc.tensor as jt
    from jacacc.tensor.evaluate import Program
    from jacacc.tensor.expr import nodes_of, var
    from jacacc.tensor.operators import get_operator, outputs_of
    from jacacc.tensor.trace import trace

    start = time.perf_counter()

    def first_output(*xs: Any) -> Any:
        return _outputs(case.jacacc(*xs))[0]

    traced = trace(first_output, args)
    applications = [node for node in nodes_of(traced.outputs)
                    if node.kind == "op" and node.args == traced.inputs]
    if not applications:
        estimate = grad_estimate(case, args, cts)
        if estimate > memory_cap:
            return Prepared(lambda: None, list, estimated_bytes=estimate)
        _, pullback = jt.vjp(case.jacacc, *args)
        return Prepared(lambda: pullback(cts[0]), lambda grads: [np.asarray(g) for g in grads],
                        time.perf_counter() - start,
                        {"backward_how": "pullback of one jacacc.tensor.vjp call (einsums; no forward value read)"},
                        estimated_bytes=estimate)
    node = applications[0]
    name, options, _ = node.param
    operator = get_operator(name)
    x = tuple(var(f"x{k}", a.shape) for k, a in enumerate(args))
    y = tuple(var(f"y{k}", o.shape) for k, o in enumerate(outputs_of(node)))
    c = tuple(var(f"c{k}", o.shape) for k, o in enumerate(cts))
    grads = operator.pullback(y, x, c, **dict(options))
    kept = [k for k, g in enumerate(grads) if not g.is_zero]
    estimate = 3 * largest_node_bytes([grads[k] for k in kept])
    if estimate > memory_cap:
        return Prepared(lambda: None, list, estimated_bytes=estimate)
    program = Program([grads[k] for k in kept], [*x, *y, *c], np.float64)
    forward = _outputs(case.jacacc(*args))  # what the forward pass left for the backward

    def arrays(result: list) -> list[np.ndarray]:
        full = [np.zeros(a.shape) for a in args]
        for k, value in zip(kept, result, strict=True):
            full[k] = np.asarray(value)
        return full

    return Prepared(lambda: program(*args, *forward, *cts), arrays, time.perf_counter() - start,
                    {"backward_how": f"the declared pullback of operator {name!r} planned once, forward outputs "
                                     "bound", "backward_flops": int(program.flops), "program": program},
                    estimated_bytes=estimate)


def jacacc_grad(case: Case, args: tuple, cts: tuple, memory_cap: float = math.inf) -> Prepared:
    """``jacacc.tensor.grad`` of Σ_k ⟨W_k, op(args)_k⟩ w.r.t. the first argument (forward + backward)."""
    import jacacc.tensor as jt

    estimate = grad_estimate(case, args, cts)
    if estimate > memory_cap:
        return Prepared(lambda: None, list, estimated_bytes=estimate)
    g = jt.grad(_weighted(case, len(args)), argnum=0)
    return Prepared(lambda: g(*args, *cts), lambda r: [np.asarray(r)], estimated_bytes=estimate)


def prepare(library: str, phase: str, case: Case, args: tuple, cts: tuple,
            memory_cap: float = math.inf) -> Prepared:
    """The call of ``library`` for ``phase`` of ``case`` at ``args`` (JAX compiled ahead of time here)."""
    if library == "jacacc":
        if phase == "forward":
            return Prepared(lambda: case.jacacc(*args), lambda r: [np.asarray(o) for o in _outputs(r)])
        if phase == "backward":
            prepared = jacacc_pullback(case, args, cts, memory_cap)
            prepared.memory = lambda: (traced_peak(prepared.call), "tracemalloc peak of one warm call")
            return prepared
        return jacacc_grad(case, args, cts, memory_cap)
    if library == "torch":
        return _torch_prepare(phase, case, args, cts)
    return _jax_prepare(phase, case, args, cts)


def _torch_prepare(phase: str, case: Case, args: tuple, cts: tuple) -> Prepared:
    import torch

    if phase == "forward":
        targs = [torch.from_numpy(np.array(a)) for a in args]

        def forward() -> Any:
            with torch.no_grad():
                return case.torch(*targs)

        return Prepared(forward, lambda r: [o.numpy() for o in _outputs(r)])
    targs = [torch.from_numpy(np.array(a)).requires_grad_() for a in args]
    outs = _outputs(case.torch(*targs))
    tcts = [torch.from_numpy(np.array(c)) for c in cts]

    def backward() -> Any:
        return torch.autograd.grad(outs, targs, tcts, retain_graph=True)

    return Prepared(backward, lambda r: [g.numpy() for g in r], memory=lambda: (torch_peak(backward),
                    "torch.profiler: peak of the running sum of CPU allocations and frees during one call"))


def _jax_prepare(phase: str, case: Case, args: tuple, cts: tuple) -> Prepared:
    import jax
    import jax.numpy as jnp

    jargs = [jnp.asarray(a) for a in args]

    def fn(*xs: Any) -> tuple:
        return _outputs(case.jax(*xs))

    start = time.perf_counter()
    if phase == "forward":
        compiled = jax.jit(fn).lower(*jargs).compile()
        return Prepared(lambda: jax.block_until_ready(compiled(*jargs)), lambda r: [np.asarray(o) for o in r],
                        time.perf_counter() - start)
    _, pullback = jax.vjp(fn, *jargs)
    jcts = tuple(jnp.asarray(c) for c in cts)
    compiled = jax.jit(lambda p, c: p(c)).lower(pullback, jcts).compile()
    setup = time.perf_counter() - start
    try:
        analysis = compiled.memory_analysis()
        xla_bytes = int(analysis.temp_size_in_bytes + analysis.output_size_in_bytes)
    except Exception:  # noqa: BLE001 - not every backend reports it
        xla_bytes = None
    return Prepared(lambda: jax.block_until_ready(compiled(pullback, jcts)), lambda r: [np.asarray(g) for g in r],
                    setup, memory=lambda: (xla_bytes, "XLA memory analysis of the compiled pullback: temporaries "
                                                      "+ outputs"))


# =========================================================================== measuring
def traced_peak(call: Callable[[], Any]) -> int:
    """tracemalloc's peak over one call (bytes allocated during it, the result included)."""
    return int(sibling("tensor_hessians").traced_peak(call))


def torch_peak(call: Callable[[], Any]) -> int:
    """The peak of the running sum of the CPU allocation events torch.profiler records during one call."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = call()
    del result
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    total = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        total += e.nbytes()
        peak = max(peak, total)
    return int(peak)


@contextlib.contextmanager
def _quiet_stderr() -> Any:
    """Silence the profiler's start/stop lines, which Kineto writes to file descriptor 2."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def median_seconds(call: Callable[[], Any], warm: float, budget: float, quick: bool) -> list[float]:
    """Warm-call samples: five, three above 50 ms or with ``quick`` (``warm``, the call after the first,
    among them), only ``warm`` above the budget; a call under ``MIN_SAMPLE_S`` is looped for that long per
    sample (and ``warm``, a single call, is not kept).  Fewer samples than tensor_hessians takes: the
    large calls dominate the run, and their spread on two shared cores is a few percent."""
    if warm > budget:
        return [warm]
    samples = 3 if quick or warm > 0.05 else 5
    if warm < MIN_SAMPLE_S:
        return [time_call(call, repeat=1, min_time=MIN_SAMPLE_S) for _ in range(samples)]
    return [warm] + [time_call(call, repeat=1) for _ in range(samples - 1)]


def max_relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    return float(sibling("tensor_hessians").max_relative_error(result, reference))


def compare(arrays: list[np.ndarray], reference: list[np.ndarray]) -> float:
    """The largest relative entry error over a list of arrays (inf on a shape mismatch)."""
    if len(arrays) != len(reference):
        return math.inf
    return max((max_relative_error(a, r) for a, r in zip(arrays, reference, strict=True)), default=0.0)


class OperatorRunner:
    """Measures every (operator, library, phase) at growing n, remembering which ran out of time."""

    def __init__(self, time_budget: float, quick: bool, memory_cap: float = MEMORY_CAP_GIB * 2**30) -> None:
        self.time_budget = time_budget
        self.quick = quick
        self.memory_cap = memory_cap
        self.last: dict[tuple[str, str, str], tuple[int, float]] = {}
        self.stopped: dict[tuple[str, str, str], str] = {}
        self.unavailable: dict[tuple[str, str], str] = {}  # (operator, library) -> why its backward cannot run

    def skip_reason(self, key: tuple[str, str, str], n: int) -> str | None:
        if key in self.stopped:
            return self.stopped[key]
        if key in self.last:
            n_prev, seconds = self.last[key]
            predicted = seconds * (n / n_prev) ** 3
            if predicted > self.time_budget:
                return (f"time budget: {seconds:.3g} s at n={n_prev} extrapolates to {predicted:.3g} s "
                        f"> {self.time_budget:g} s")
        return None

    def measure(self, name: str, n: int, rng: np.random.Generator) -> tuple[list[dict], dict]:
        """Rows of every library and phase of operator ``name`` at size n, and the check record."""
        case = CASES[name]
        args, cts = case.make(n, rng)
        rows: list[dict] = []
        prepared: dict[tuple[str, str], Prepared] = {}
        results: dict[tuple[str, str], list[np.ndarray]] = {}
        for library in LIBRARIES:
            for phase in PHASES:
                if phase == "grad" and library != "jacacc":
                    continue
                key = (name, library, phase)
                row: dict[str, Any] = {"operator": name, "n": n, "library": library, "phase": phase,
                                       "skipped": self.skip_reason(key, n)}
                rows.append(row)
                if row["skipped"] is None and phase != "forward" and (name, library) in self.unavailable:
                    row["skipped"] = self.unavailable[(name, library)]
                if row["skipped"]:
                    continue
                try:
                    p = prepare(library, phase, case, args, cts, self.memory_cap)
                    row["estimated_bytes"] = p.estimated_bytes
                    if p.estimated_bytes is not None and p.estimated_bytes > self.memory_cap:
                        row["skipped"] = self.stopped[key] = (
                            f"memory cap: the largest intermediate of jacacc's derivative × 3 is "
                            f"{p.estimated_bytes / 2**30:.3g} GiB at n={n} > {self.memory_cap / 2**30:.3g} GiB")
                        note(f"{name:<6} n={n:<5} {library:<6} {phase:<8} {row['skipped']}")
                        continue
                    start = time.perf_counter()
                    result = p.call()
                    row["first_call_s"] = time.perf_counter() - start + p.setup_s
                except Exception as exc:  # noqa: BLE001 - recorded; the rest of the benchmark goes on
                    why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                    if library == "jacacc" and phase != "forward":
                        self.unavailable[(name, library)] = f"jacacc's derivative failed: {why}"
                    row["skipped"] = f"failed: {why}"
                    note(f"{name:<6} n={n:<5} {library:<6} {phase:<8} {row['skipped']}")
                    continue
                prepared[(library, phase)] = p
                results[(library, phase)] = p.arrays(result)
                del result
        check = self._check(name, n, case, rows, results)
        for row in rows:
            if row["skipped"]:
                continue
            self._time(row, prepared[(row["library"], row["phase"])])
        return rows, check

    def _check(self, name: str, n: int, case: Case, rows: list[dict],
               results: dict[tuple[str, str], list[np.ndarray]]) -> dict:
        """Each library's outputs and gradients against PyTorch's (else JAX's); a mismatch is not timed.

        jacacc's ``grad`` (the first argument's gradient) is compared with the reference's first gradient.
        """
        check: dict[str, Any] = {"operator": name, "n": n, "errors": {}, "reference": {}}
        for phase in PHASES:
            forms = {lib: (arrays if phase == "forward" else case.grad_form(arrays))
                     for (lib, p), arrays in results.items() if p == phase}
            source = "forward" if phase == "forward" else "backward"
            references = {lib: (arrays if source == "forward" else case.grad_form(arrays))
                          for (lib, p), arrays in results.items() if p == source}
            reference = next((lib for lib in ("torch", "jax", "jacacc") if lib in references), None)
            check["reference"][phase] = reference
            for library, arrays in forms.items():
                expected = references[reference][:len(arrays)] if reference else arrays
                error = compare(arrays, expected)
                check["errors"][f"{library}/{phase}"] = error
                row = next(r for r in rows if r["library"] == library and r["phase"] == phase)
                row.update(reference=reference, max_rel_error=error, matches=bool(error <= TOLERANCE))
                if not row["matches"]:
                    row["skipped"] = f"result differs from {reference}'s by {error:.2e} (relative)"
                    note(f"{name:<6} n={n:<5} {library:<6} {phase:<8} MISMATCH: {row['skipped']}")
        return check

    def _time(self, row: dict, p: Prepared) -> None:
        key = (row["operator"], row["library"], row["phase"])
        n = row["n"]
        warm = time_call(p.call, repeat=1)
        samples = median_seconds(p.call, warm, self.time_budget, self.quick)
        seconds = statistics.median(samples)
        row.update(seconds=seconds, per_n3=seconds / n**3, samples=samples,
                   setup_s=max(0.0, row["first_call_s"] - seconds))
        if p.info:
            row.update({k: v for k, v in p.info.items() if k in ("backward_how", "backward_flops")})
        if p.memory is not None:
            if seconds < MEMORY_MAX_CALL_S:
                row["peak_bytes"], row["memory_measure"] = p.memory()
            else:
                row["peak_bytes"], row["memory_measure"] = None, f"not measured (call over {MEMORY_MAX_CALL_S:g} s)"
        self.last[key] = (n, seconds)
        if seconds > self.time_budget or row["first_call_s"] - p.setup_s > self.time_budget:
            self.stopped[key] = f"time budget: {seconds:.3g} s at n={n} > {self.time_budget:g} s"
            row["over_budget"] = True
        peak = row.get("peak_bytes")
        note(f"{row['operator']:<6} n={n:<5} {row['library']:<6} {row['phase']:<8} {seconds:10.4g} s "
             f"({seconds / n**3 * 1e9:.3g} ns/n³){'' if peak is None else f'  peak {peak / 2**20:.3g} MiB'}"
             f"  err {row['max_rel_error']:.1e} vs {row['reference']}")


def run_operators(operators: Sequence[str], sizes: Sequence[int], seed: int, time_budget: float,
                  quick: bool, memory_cap: float = MEMORY_CAP_GIB * 2**30) -> dict[str, Any]:
    """The operator sweep: rows, checks, the backward profiles at the largest n, the summary."""
    runner = OperatorRunner(time_budget, quick, memory_cap)
    rows: list[dict] = []
    checks: list[dict] = []
    with progress_bar(total=len(operators) * len(sizes), desc=f"{EXPERIMENT} operators", unit="size") as bar:
        for k, name in enumerate(operators):
            for n in sizes:
                measured, check = runner.measure(name, n, np.random.default_rng([seed, k, n]))
                rows += measured
                checks.append(check)
                bar.update()
    profiles = {}
    for k, name in enumerate(operators):
        timed = [r["n"] for r in rows if r["operator"] == name and r["phase"] == "backward"
                 and r["library"] in ("jacacc", "torch") and r.get("seconds") is not None]
        both = [n for n in set(timed) if timed.count(n) == 2]
        if both:
            n = max(both)
            profiles[name] = profile_backward(name, n, np.random.default_rng([seed, k, n]))
    return {"rows": rows, "checks": checks, "profiles": profiles, "summary": summarize_operators(rows),
            "unavailable": {f"{op}/{lib}": why for (op, lib), why in runner.unavailable.items()}}


# =========================================================================== profiles of the backward
def _function_label(key: tuple[str, int, str]) -> str:
    """``module.Class.method`` of a cProfile key (the code object found by file and first line), else
    ``file:line(function)``; built-ins as cProfile names them."""
    filename, line, function = key
    if filename == "~":
        return function
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) != filename:
            continue
        for owner in [module, *(v for v in vars(module).values() if isinstance(v, type))]:
            for value in vars(owner).values():
                code = getattr(value, "__code__", None)
                if code is not None and code.co_firstlineno == line and code.co_name == function:
                    return f"{module.__name__}.{getattr(value, '__qualname__', function)}"
    parts = filename.replace(os.sep, "/").split("/")
    return f"{'/'.join(parts[-2:])}:{line}({function})"


def cprofile_shares(call: Callable[[], Any], top: int = 8) -> dict[str, Any]:
    """One call under cProfile: total seconds and the ``top`` functions by self time (with their calls)."""
    profiler = cProfile.Profile()
    profiler.enable()
    start = time.perf_counter()
    call()
    total = time.perf_counter() - start
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    entries = sorted(((key, value[1], value[2]) for key, value in stats.items()), key=lambda e: -e[2])
    functions = [{"function": _function_label(key), "calls": int(calls), "self_s": self_s,
                  "share": self_s / total if total else None} for key, calls, self_s in entries[:top]]
    return {"seconds": total, "functions": functions}


def _expression_label(node: Any) -> str:
    if node.kind == "op":
        name, options, _ = node.param
        shown = ", ".join(f"{k}={v}" for k, v in options if k in ("transpose", "rightside", "lower"))
        return f"op {name}({shown})"
    if node.kind == "einsum":
        return f"einsum {node.param} {'×'.join(str(a.shape) for a in node.args)}"
    if node.kind == "unary":
        return f"unary {node.param[0]}"
    return node.kind


def torch_profile(call: Callable[[], Any], top: int = 8) -> dict[str, Any]:
    """One call under torch.profiler: self time per ATen operator, FLOPs of its products and solves."""
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        start = time.perf_counter()
        call()
        total = time.perf_counter() - start
    flops = 0
    counted: dict[str, int] = {}
    for e in prof.events():
        shapes = [list(s) for s in (e.input_shapes or []) if isinstance(s, list | tuple)]
        f = _aten_flops(e.name, shapes)
        if f:
            flops += f
            counted[e.name] = counted.get(e.name, 0) + f
    ops = sorted(prof.key_averages(), key=lambda a: -a.self_cpu_time_total)
    functions = [{"function": a.key, "calls": int(a.count), "self_s": a.self_cpu_time_total * 1e-6,
                  "share": a.self_cpu_time_total * 1e-6 / total if total else None} for a in ops[:top]]
    return {"seconds": total, "functions": functions, "flops": flops, "flops_by_op": counted,
            "flops_counted": "aten::mm/bmm/addmm 2mkn, aten::linalg_solve_triangular n²k, aten::linalg_cholesky_ex "
                             "n³/3; elementwise operators not counted"}


def _aten_flops(name: str, shapes: list[list[int]]) -> int:
    """FLOPs of the ATen calls that dominate a backward, from their input shapes (0 for the rest)."""
    try:
        if name in ("aten::mm", "aten::bmm") and len(shapes) >= 2:
            a, b = shapes[0], shapes[1]
            return 2 * math.prod(a[:-1]) * a[-1] * b[-1]
        if name == "aten::addmm" and len(shapes) >= 3:
            a, b = shapes[1], shapes[2]
            return 2 * math.prod(a[:-1]) * a[-1] * b[-1]
        if name == "aten::linalg_solve_triangular" and len(shapes) >= 2:
            a, b = shapes[0], shapes[1]
            return math.prod(b) * a[-1]
        if name == "aten::linalg_cholesky_ex" and shapes:
            return shapes[0][-1] ** 3 // 3
    except (IndexError, TypeError):
        return 0
    return 0


def profile_backward(name: str, n: int, rng: np.random.Generator) -> dict[str, Any]:
    """jacacc's and PyTorch's backward of ``name`` at size n, profiled (see the module docstring)."""
    import jacacc.tensor as jt
    from jacacc.tensor.expr import node_flops

    case = CASES[name]
    args, cts = case.make(n, rng)
    out: dict[str, Any] = {"n": n}
    mine = prepare("jacacc", "backward", case, args, cts)
    mine.call()  # warm: the first LAPACK calls of a size allocate and page in
    out["jacacc"] = cprofile_shares(mine.call)
    program = (mine.info or {}).get("program")
    if program is not None:
        nodes = [{"node": _expression_label(node), "flops": int(node_flops(node))}
                 for node in program.nodes if node.kind not in ("var", "const")]
        out["jacacc"].update(flops=int(program.flops), nodes=nodes)
    try:
        derived = jt.derivative_expression(_weighted(case, len(args)), *args, *cts, argnum=0, order=1)
        out["jacacc"]["grad_expression_flops"] = int(derived.flops)
        out["jacacc"]["grad_expression"] = str(derived)
    except Exception as exc:  # noqa: BLE001 - recorded
        out["jacacc"]["grad_expression_flops"] = f"failed: {type(exc).__name__}: {exc}"
    theirs = prepare("torch", "backward", case, args, cts)
    theirs.call()
    out["torch"] = torch_profile(theirs.call)
    mine_flops, their_flops = out["jacacc"].get("flops"), out["torch"]["flops"]
    if isinstance(mine_flops, int) and their_flops:
        out["flops_ratio_jacacc_over_torch"] = mine_flops / their_flops
    return out


# =========================================================================== summary
def summarize_operators(rows: list[dict]) -> list[dict]:
    """Per (operator, n): every library's forward and backward seconds, jacacc's ratios to the peers."""
    groups: dict[tuple[str, int], dict[str, float]] = {}
    for r in rows:
        if r.get("seconds") is not None and not r.get("skipped"):
            groups.setdefault((r["operator"], r["n"]), {})[f"{r['library']}_{r['phase']}"] = r["seconds"]
    summary = []
    for (operator, n), t in groups.items():
        entry: dict[str, Any] = {"operator": operator, "n": n, "seconds": t}
        for phase in ("forward", "backward"):
            for peer in ("torch", "jax"):
                a, b = t.get(f"jacacc_{phase}"), t.get(f"{peer}_{phase}")
                entry[f"{phase}_jacacc_over_{peer}"] = a / b if a is not None and b else None
        grad, forward = t.get("jacacc_grad"), t.get("jacacc_forward")
        entry["jacacc_grad_minus_forward"] = grad - forward if grad is not None and forward is not None else None
        summary.append(entry)
    return summary


def _fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _fmt_ratio(ratio: float | None) -> str:
    return "–" if ratio is None else f"{ratio:.2f}"


def ratio_table(summary: list[dict], peer: str = "torch", phase: str = "backward") -> str:
    """Markdown table for the README: per operator (rows) and n (columns), jacacc's
    ``phase`` time over the peer's (< 1: jacacc faster)."""
    sizes = sorted({s["n"] for s in summary})
    operators = [op for op in OPERATORS if any(s["operator"] == op for s in summary)]
    ratio = {(s["operator"], s["n"]): s.get(f"{phase}_jacacc_over_{peer}") for s in summary}
    lines = ["| operator | " + " | ".join(f"n = {n}" for n in sizes) + " |", "|---" * (len(sizes) + 1) + "|"]
    for op in operators:
        lines.append(f"| {op} | " + " | ".join(_fmt_ratio(ratio.get((op, n))) for n in sizes) + " |")
    return "\n".join(lines)


def operator_table(summary: list[dict]) -> str:
    """Markdown table: per operator and n, the backward times and jacacc's ratios to torch and JAX."""
    lines = ["| operator | n | jacacc fwd | torch fwd | jax fwd | jacacc bwd | torch bwd | jax bwd | "
             "bwd jacacc/torch | bwd jacacc/jax | jacacc grad − fwd |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        t = s["seconds"]
        lines.append(f"| {s['operator']} | {s['n']} | {_fmt_s(t.get('jacacc_forward'))} | "
                     f"{_fmt_s(t.get('torch_forward'))} | {_fmt_s(t.get('jax_forward'))} | "
                     f"{_fmt_s(t.get('jacacc_backward'))} | {_fmt_s(t.get('torch_backward'))} | "
                     f"{_fmt_s(t.get('jax_backward'))} | {_fmt_ratio(s['backward_jacacc_over_torch'])} | "
                     f"{_fmt_ratio(s['backward_jacacc_over_jax'])} | {_fmt_s(s['jacacc_grad_minus_forward'])} |")
    return "\n".join(lines)


# =========================================================================== sparse GP (paper §3.2, Fig. 2)
SGP_PARAMETERS = ("lengthscale", "variance", "noise", "Z")
SGP_JITTER = 1e-6  # relative to the signal variance, added to K_uu's diagonal (the examples module's JITTER)
SGP_PARAMS = {"lengthscale": 1.0, "variance": 1.0, "noise": 0.05}  # the examples module's SPARSE_PARAMS


@dataclass
class SparseGPProblem:
    """A regression data set and the parameters the bound is evaluated at (constrained values).

    Attributes
    ----------
    X : (n, d) array
    y : (n,) array
    params : dict
        ``lengthscale`` (0-d: one for every input dimension), ``variance`` (), ``noise`` (), ``Z`` (U, d): the
        RBF kernel k(x, x') = variance · exp(−‖x − x'‖² / (2 lengthscale²)), the Gaussian noise variance and
        the inducing inputs.
    jitter : float
        ``jitter · variance`` is added to K_uu's diagonal.
    """

    X: np.ndarray
    y: np.ndarray
    params: dict[str, np.ndarray]
    jitter: float = SGP_JITTER


def sparse_gp_data(n: int, d: int, seed: int, examples: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The examples module's synthetic "power"-sized data set (``power_like_data``), else a stand-in of the
    same kind: standardized Gaussian inputs, a smooth target plus noise, standardized."""
    if examples is not None and hasattr(examples, "power_like_data"):
        data = examples.power_like_data(n, d, seed)
        return np.asarray(data["X"], dtype=float), np.asarray(data["y"], dtype=float).reshape(-1)
    rng = np.random.default_rng([seed, 7])
    X = rng.standard_normal((n, d))
    y = np.sin(X @ rng.standard_normal(d) / math.sqrt(d)) + 0.2 * rng.standard_normal(n)
    return X, (y - y.mean()) / y.std()


def sparse_gp_problem(X: np.ndarray, y: np.ndarray, U: int, seed: int, examples: Any = None) -> SparseGPProblem:
    """Inducing inputs: U distinct data points (seeded); hyperparameters and jitter the examples module's."""
    rng = np.random.default_rng([seed, 11, U])
    base = getattr(examples, "SPARSE_PARAMS", None)
    values = SGP_PARAMS if base is None else {"lengthscale": base["lengthscale"],
                                              "variance": base["signal_variance"], "noise": base["noise_variance"]}
    params = {k: np.array(float(v)) for k, v in values.items()}
    params["Z"] = X[rng.choice(X.shape[0], U, replace=False)].copy()
    return SparseGPProblem(X, y, params, float(getattr(examples, "JITTER", SGP_JITTER)))


def rbf_numpy(A: np.ndarray, B: np.ndarray, lengthscale: np.ndarray, variance: float) -> np.ndarray:
    """The RBF kernel matrix k(A, B) (``lengthscale`` a scalar or one per dimension)."""
    a, b = A / lengthscale, B / lengthscale
    sq = np.sum(a * a, axis=1)[:, None] + np.sum(b * b, axis=1)[None, :] - 2 * a @ b.T
    return variance * np.exp(-0.5 * np.maximum(sq, 0.0))


def titsias_bound_numpy(problem: SparseGPProblem) -> float:
    """φ = −log N(y | 0, Q + σ²I) + tr(K_ff − Q)/(2σ²), Q = K_fu K_uu⁻¹ K_uf, with NumPy/SciPy (the reference value).

    Computed as in paper 004 §3.2: K_uu = L Lᵀ, B = L⁻¹K_uf, A = I + σ⁻²BBᵀ = L_A L_Aᵀ, c = σ⁻¹L_A⁻¹By:
    φ = n/2·log 2π + n/2·log σ² + Σ log diag L_A + (yᵀy − cᵀc)/(2σ²) + (n·variance − ‖B‖²_F)/(2σ²).
    """
    import scipy.linalg

    p, X, y = problem.params, problem.X, problem.y
    n, U = X.shape[0], p["Z"].shape[0]
    s, noise = float(p["variance"]), float(p["noise"])
    Kuu = rbf_numpy(p["Z"], p["Z"], p["lengthscale"], s) + problem.jitter * s * np.eye(U)
    Kuf = rbf_numpy(p["Z"], X, p["lengthscale"], s)
    L = np.linalg.cholesky(Kuu)
    B = scipy.linalg.solve_triangular(L, Kuf, lower=True)
    LA = np.linalg.cholesky(np.eye(U) + B @ B.T / noise)
    c = scipy.linalg.solve_triangular(LA, B @ y, lower=True) / math.sqrt(noise)
    return float(0.5 * n * math.log(2 * math.pi) + 0.5 * n * math.log(noise) + np.sum(np.log(np.diag(LA)))
                 + 0.5 * (y @ y - c @ c) / noise + 0.5 * (n * s - np.sum(B * B)) / noise)


@dataclass
class SparseGPMethod:
    """One way to compute the bound and its gradient: ``prepare(problem)`` → a call returning
    ``(value, {parameter: gradient})`` (gradients w.r.t. the constrained values); ``describe(problem)``
    (optional) → facts about what the call evaluates, for the profile."""

    name: str
    prepare: Callable[[SparseGPProblem], Callable[[], tuple[float, dict[str, np.ndarray]]]]
    source: str
    describe: Callable[[SparseGPProblem], dict[str, Any]] | None = None


def _operator_applications(nodes: Sequence[Any]) -> dict[str, int]:
    """How often each general function (potrf, trsm, …) is applied among expression nodes."""
    counts: dict[str, int] = {}
    for node in nodes:
        if node.kind == "op" and node.param[2] == 0:  # one count per application, on its first output
            counts[node.param[0]] = counts.get(node.param[0], 0) + 1
    return counts


def jacacc_sparse_gp(examples: Any) -> tuple[SparseGPMethod | None, str]:
    """jacacc's bound + gradient: experiments/linalg_examples.py's ``sparse_gp_bound`` (θ = log [ℓ, σ_f², σ_n²],
    Z) through ``jacacc.tensor.value_and_grad`` w.r.t. θ and Z (value and both gradients from one cached
    program), or None and why not."""
    if examples is None or not hasattr(examples, "sparse_gp_bound"):
        return None, ("experiments/linalg_examples.py not found" if examples is None
                      else "experiments/linalg_examples.py has no sparse_gp_bound")
    import jacacc.tensor as jt

    def arguments(problem: SparseGPProblem) -> tuple[np.ndarray, ...]:
        p = problem.params
        theta = np.log([float(p["lengthscale"]), float(p["variance"]), float(p["noise"])])
        return theta, p["Z"], problem.X, problem.y[:, None]

    def bound_of(problem: SparseGPProblem) -> Callable[..., Any]:
        jitter = problem.jitter

        def sparse_gp_bound(theta: Any, Z: Any, X: Any, y: Any) -> Any:
            return examples.sparse_gp_bound(theta, Z, X, y, jitter=jitter)

        return sparse_gp_bound

    transformed: dict[int, Any] = {}

    def prepare(problem: SparseGPProblem) -> Callable[[], tuple[float, dict[str, np.ndarray]]]:
        vg = transformed[id(problem)] = jt.value_and_grad(bound_of(problem), argnum=(0, 1))
        args = arguments(problem)
        p = problem.params

        def call() -> tuple[float, dict[str, np.ndarray]]:
            value, (g_theta, g_z) = vg(*args)
            # θ holds log-parameters: dφ/dθ_k = dφ/dlog θ_k / θ_k
            return float(value), {"lengthscale": np.array(g_theta[0] / float(p["lengthscale"])),
                                  "variance": np.array(g_theta[1] / float(p["variance"])),
                                  "noise": np.array(g_theta[2] / float(p["noise"])), "Z": np.asarray(g_z)}

        return call

    def describe(problem: SparseGPProblem) -> dict[str, Any]:
        from jacacc.tensor.expr import flops_of, nodes_of
        from jacacc.tensor.trace import trace

        args = arguments(problem)
        vg = transformed.get(id(problem))
        if vg is None:
            prepare(problem)()
            vg = transformed[id(problem)]
        program = next(iter(vg.plans.values()))
        traced = trace(bound_of(problem), list(args))
        return {"function_flops": int(flops_of(traced.outputs)),
                "function_operators": _operator_applications(nodes_of(traced.outputs)),
                "program_flops": int(program.flops), "program_operators": _operator_applications(program.nodes),
                "program_largest_node_bytes": largest_node_bytes(program.outputs)}

    source = ("jacacc.tensor.value_and_grad(linalg_examples.sparse_gp_bound, argnum=(0, 1)): value and gradients "
              "w.r.t. θ = log [ℓ, σ_f², σ_n²] and Z from one cached program")
    return SparseGPMethod("jacacc", prepare, source, describe), ""


def hand_sparse_gp(examples: Any) -> tuple[SparseGPMethod | None, str]:
    """A hand-derived NumPy gradient of the bound, where the examples module provides one."""
    for name in ("sparse_gp_bound_and_grad_numpy", "sparse_gp_hand_gradient"):
        if hasattr(examples, name):  # pragma: no cover - no such function in the examples module today
            return None, f"experiments/linalg_examples.py has {name}, which this script does not call yet"
    return None, ("experiments/linalg_examples.py provides no hand-derived NumPy gradient of the bound (it checks "
                  "jacacc's against central differences)")


def gpytorch_sparse_gp() -> SparseGPMethod:
    """GPyTorch's SGPR: ExactGP with an InducingPointKernel around ScaleKernel(RBFKernel), Gaussian
    likelihood, ExactMarginalLogLikelihood; −n·mll is the bound.  K_uu gets the same jitter as elsewhere
    (a subclass adds it in ``_inducing_mat``; GPyTorch itself adds jitter only when a Cholesky fails)."""

    def prepare(problem: SparseGPProblem) -> Callable[[], tuple[float, dict[str, np.ndarray]]]:
        import gpytorch
        import torch

        p = problem.params
        jitter = problem.jitter
        ard = np.ndim(p["lengthscale"]) > 0

        class JitteredInducingPointKernel(gpytorch.kernels.InducingPointKernel):
            @property
            def _inducing_mat(self) -> Any:
                K = super()._inducing_mat
                return K + jitter * self.base_kernel.outputscale * torch.eye(K.shape[-1], dtype=K.dtype)

        class SGPR(gpytorch.models.ExactGP):
            def __init__(self, X: Any, y: Any, likelihood: Any, Z: Any) -> None:
                super().__init__(X, y, likelihood)
                self.mean_module = gpytorch.means.ZeroMean()
                rbf = gpytorch.kernels.RBFKernel(ard_num_dims=Z.shape[-1] if ard else None)
                self.base = gpytorch.kernels.ScaleKernel(rbf)
                self.covar_module = JitteredInducingPointKernel(self.base, inducing_points=Z, likelihood=likelihood)

            def forward(self, x: Any) -> Any:
                return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

        X, y = torch.from_numpy(problem.X), torch.from_numpy(problem.y)
        likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
        model = SGPR(X, y, likelihood, torch.from_numpy(p["Z"].copy())).double()
        # float64 tensors: GPyTorch's setters round a Python float through float32 (outputscale 1.3 came
        # out 4.8e-8 low, which moved the bound by 4e-8 relative)
        f64 = torch.float64
        model.base.base_kernel.lengthscale = torch.tensor(np.reshape(p["lengthscale"], (1, -1)), dtype=f64)
        model.base.outputscale = torch.tensor(float(p["variance"]), dtype=f64)
        likelihood.noise = torch.tensor(float(p["noise"]), dtype=f64)
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        model.train()
        likelihood.train()
        raw = [model.base.base_kernel.raw_lengthscale, model.base.raw_outputscale, likelihood.noise_covar.raw_noise]
        params = [*raw, model.covar_module.inducing_points]
        n = problem.X.shape[0]
        shape = np.shape(p["lengthscale"])

        def call() -> tuple[float, dict[str, np.ndarray]]:
            loss = -mll(model(X), y) * n
            grads = torch.autograd.grad(loss, params)
            # softplus constraints: θ = softplus(raw) (+ a lower bound), dθ/draw = sigmoid(raw)
            scaled = [(g / torch.sigmoid(r.detach())).numpy() for g, r in zip(grads[:3], raw, strict=True)]
            return float(loss.detach()), {"lengthscale": scaled[0].reshape(shape), "variance": scaled[1].reshape(()),
                                          "noise": scaled[2].reshape(()), "Z": grads[3].numpy()}

        return call

    return SparseGPMethod("gpytorch", prepare, "gpytorch SGPR (InducingPointKernel + ExactMarginalLogLikelihood)")


def _gradient_error(grads: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> float:
    """The largest over parameters of the relative entry error (per parameter, relative to max(1, max|ref|))."""
    return max(max_relative_error(np.asarray(grads[k]), np.asarray(reference[k])) for k in SGP_PARAMETERS)


def sparse_gp(sizes: Sequence[int], n: int, d: int, seed: int, time_budget: float, quick: bool,
              examples: Any) -> dict[str, Any]:
    """The bound + gradient of every method at every U (see the module docstring), checked, then timed.

    The value of each method is compared with :func:`titsias_bound_numpy`, its gradient with GPyTorch's
    (else jacacc's), both within ``SGP_TOLERANCE`` relative: K_uu + jitter is ill-conditioned at large U
    (``condition_Kuu`` is recorded) and the implementations round differently (GPyTorch forms L⁻¹
    explicitly), so agreement to 1e-8 is not to be expected.  A method that disagrees is not timed at that U.
    """
    mine, mine_why = jacacc_sparse_gp(examples)
    hand, hand_why = hand_sparse_gp(examples)
    theirs = gpytorch_sparse_gp()
    methods = [m for m in (mine, theirs, hand) if m is not None]
    X, y = sparse_gp_data(n, d, seed, examples)
    rows: list[dict] = []
    last: dict[str, tuple[int, float]] = {}
    stopped: dict[str, str] = {}
    with progress_bar(total=len(sizes), desc=f"{EXPERIMENT} sparse GP", unit="U") as bar:
        for U in sizes:
            problem = sparse_gp_problem(X, y, U, seed, examples)
            p = problem.params
            reference_value = titsias_bound_numpy(problem)
            s = float(p["variance"])
            condition = float(np.linalg.cond(rbf_numpy(p["Z"], p["Z"], p["lengthscale"], s)
                                             + problem.jitter * s * np.eye(U)))
            results: dict[str, tuple[float, dict[str, np.ndarray]]] = {}
            calls: dict[str, Callable] = {}
            here = []
            for method in methods:
                row: dict[str, Any] = {"U": U, "n": n, "d": d, "method": method.name, "source": method.source,
                                       "condition_Kuu": condition, "skipped": stopped.get(method.name)}
                here.append(row)
                if row["skipped"] is None and method.name in last:
                    U_prev, seconds = last[method.name]
                    predicted = seconds * (U / U_prev) ** 2
                    if predicted > time_budget:
                        row["skipped"] = (f"time budget: {seconds:.3g} s at U={U_prev} extrapolates to "
                                          f"{predicted:.3g} s > {time_budget:g} s")
                if row["skipped"]:
                    note(f"sparse GP U={U:<4} {method.name:<9} skipped: {row['skipped']}")
                    continue
                try:
                    start = time.perf_counter()
                    call = method.prepare(problem)
                    results[method.name] = call()
                    row["first_call_s"] = time.perf_counter() - start
                    calls[method.name] = call
                except Exception as exc:  # noqa: BLE001 - recorded; the other methods go on
                    row["skipped"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                    note(f"sparse GP U={U:<4} {method.name:<9} {row['skipped']}")
            reference = next((m for m in ("gpytorch", "jacacc", "numpy") if m in results), None)
            for row in here:
                if row["method"] not in results:
                    continue
                value, grads = results[row["method"]]
                row.update(value=value, value_rel_error=abs(value - reference_value) / abs(reference_value),
                           gradient_reference=reference,
                           gradient_rel_error=_gradient_error(grads, results[reference][1]))
                row["matches"] = bool(row["value_rel_error"] <= SGP_TOLERANCE
                                      and row["gradient_rel_error"] <= SGP_TOLERANCE)
                if not row["matches"]:
                    row["skipped"] = (f"disagrees: value {row['value_rel_error']:.1e} from NumPy's, gradient "
                                      f"{row['gradient_rel_error']:.1e} from {reference}'s (relative)")
                    note(f"sparse GP U={U:<4} {row['method']:<9} MISMATCH {row['skipped']}")
                    continue
                self_timed = _time_sparse_gp(row, calls[row["method"]], time_budget, quick)
                last[row["method"]] = (U, self_timed)
                if self_timed > time_budget:
                    stopped[row["method"]] = f"time budget: {self_timed:.3g} s at U={U} > {time_budget:g} s"
                note(f"sparse GP U={U:<4} {row['method']:<9} {self_timed:10.4g} s  value err "
                     f"{row['value_rel_error']:.1e}, gradient err {row['gradient_rel_error']:.1e} vs {reference}"
                     f"  cond(K_uu) {condition:.1e}")
            rows += here
            bar.update()
    profile = None
    both = [r["U"] for r in rows if r["method"] in ("jacacc", "gpytorch") and r.get("seconds") is not None]
    both = [U for U in set(both) if both.count(U) == 2]
    if mine is not None and both:
        profile = profile_sparse_gp(mine, theirs, sparse_gp_problem(X, y, max(both), seed, examples))
    summary = []
    for U in sizes:
        t = {r["method"]: r["seconds"] for r in rows if r["U"] == U and r.get("seconds") is not None}
        summary.append({"U": U, "seconds": t, "jacacc_over_gpytorch":
                        t["jacacc"] / t["gpytorch"] if "jacacc" in t and "gpytorch" in t else None})
    return {"rows": rows, "summary": summary, "profile": profile, "n": n, "d": d,
            "params": {k: v.tolist() for k, v in sparse_gp_problem(X, y, 1, seed, examples).params.items()
                       if k != "Z"},
            "jacacc_source": mine.source if mine is not None else f"skipped: {mine_why}",
            "hand_gradient": hand.source if hand is not None else f"skipped: {hand_why}"}


def _time_sparse_gp(row: dict, call: Callable[[], Any], time_budget: float, quick: bool) -> float:
    """Median warm seconds of one bound + gradient call, and its peak memory, into ``row``."""
    warm = time_call(call, repeat=1)
    samples = median_seconds(call, warm, time_budget, quick)
    seconds = statistics.median(samples)
    row.update(seconds=seconds, samples=samples, setup_s=max(0.0, row["first_call_s"] - seconds))
    if seconds >= MEMORY_MAX_CALL_S:
        row["peak_bytes"], row["memory_measure"] = None, f"not measured (call over {MEMORY_MAX_CALL_S:g} s)"
    elif row["method"] == "gpytorch":
        row["peak_bytes"] = torch_peak(call)
        row["memory_measure"] = "torch.profiler: peak of the running sum of CPU allocations and frees during one call"
    else:
        row["peak_bytes"], row["memory_measure"] = traced_peak(call), "tracemalloc peak of one warm call"
    return seconds


def profile_sparse_gp(mine: SparseGPMethod, theirs: SparseGPMethod, problem: SparseGPProblem) -> dict[str, Any]:
    """jacacc's bound + gradient under cProfile with its program's FLOPs and operator applications, and
    GPyTorch's under torch.profiler, at one U."""
    out: dict[str, Any] = {"U": problem.params["Z"].shape[0]}
    call = mine.prepare(problem)
    call()
    out["jacacc"] = cprofile_shares(call, top=10)
    if mine.describe is not None:
        try:
            out["jacacc"].update(mine.describe(problem))
        except Exception as exc:  # noqa: BLE001 - recorded
            out["jacacc"]["describe"] = f"failed: {type(exc).__name__}: {exc}"
    call = theirs.prepare(problem)
    call()
    out["gpytorch"] = torch_profile(call, top=10)
    return out


def sparse_gp_table(result: dict[str, Any]) -> str:
    """Markdown table: per U, the bound + gradient time of each method and jacacc's ratio to GPyTorch."""
    lines = ["| U | jacacc | gpytorch | numpy (hand) | jacacc / gpytorch |", "|---|---|---|---|---|"]
    for s in result["summary"]:
        t = s["seconds"]
        lines.append(f"| {s['U']} | {_fmt_s(t.get('jacacc'))} | {_fmt_s(t.get('gpytorch'))} | "
                     f"{_fmt_s(t.get('numpy'))} | {_fmt_ratio(s['jacacc_over_gpytorch'])} |")
    return "\n".join(lines)


# =========================================================================== figure
COLORS = {"jacacc": "tab:blue", "torch": "tab:orange", "jax": "tab:red", "gpytorch": "tab:orange", "numpy": "black"}


def plot_linalg_benchmark(record: dict, path: str | os.PathLike | None = None) -> Any:
    """Paper 004 Fig. 1 and 2: per operator, forward (solid) and backward (dashed) time / n³ against n, one
    color per library; the last panel the sparse-GP bound + gradient time against U."""
    from jacacc.plot import _pyplot, _save

    plt = _pyplot()
    results = record["results"]
    rows = results["operators"]["rows"]
    operators = [op for op in OPERATORS if any(r["operator"] == op for r in rows)]
    panels = len(operators) + 1
    columns = 4
    lines = math.ceil(panels / columns)
    fig, axes = plt.subplots(lines, columns, figsize=(4.4 * columns, 3.6 * lines), squeeze=False)
    flat = list(axes.ravel())
    for ax, op in zip(flat, operators, strict=False):
        for library in LIBRARIES:
            for phase, style in (("forward", "-"), ("backward", "--")):
                points = sorted((r["n"], r["per_n3"]) for r in rows if r["operator"] == op and r["library"] == library
                                and r["phase"] == phase and r.get("per_n3") is not None and not r.get("skipped"))
                if points:
                    xs, ys = zip(*points, strict=True)
                    ax.plot(xs, ys, style, marker="o", markersize=3, color=COLORS[library], label=f"{library} {phase}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(op)
        ax.set_xlabel("n")
        ax.set_ylabel("seconds / n³")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    ax = flat[len(operators)]
    sgp = results.get("sparse_gp")
    if sgp:
        for method in ("jacacc", "gpytorch", "numpy"):
            points = sorted((r["U"], r["seconds"]) for r in sgp["rows"] if r["method"] == method
                            and r.get("seconds") is not None and not r.get("skipped"))
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", markersize=3, color=COLORS[method], label=method)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"sparse GP bound + gradient (n={sgp['n']}, d={sgp['d']})")
        ax.set_xlabel("U (inducing points)")
        ax.set_ylabel("seconds")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for extra in flat[len(operators) + (1 if sgp else 0):]:
        extra.axis("off")
    threads = record["parameters"].get("threads")
    fig.suptitle(f"jacacc.linalg against PyTorch and JAX (float64, CPU, threads: {threads}; median of warm calls)",
                 fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    return fig


# =========================================================================== main
def versions() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("gpytorch", "linear_operator", "opt_einsum", "scipy"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operators", nargs="*", default=list(OPERATORS), choices=OPERATORS)
    parser.add_argument("--sizes", nargs="*", type=int, default=None,
                        help=f"n values (default {' '.join(map(str, SIZES))}; --quick: "
                             f"{' '.join(map(str, QUICK_SIZES))})")
    parser.add_argument("--sgp-n", type=int, default=None, help=f"data points of the sparse GP (default {SGP_N}; "
                                                                 f"--quick: {QUICK_SGP_N}; 0: no sparse GP)")
    parser.add_argument("--sgp-inducing", nargs="*", type=int, default=None,
                        help=f"U values (default {' '.join(map(str, SGP_INDUCING))})")
    parser.add_argument("--time-budget", type=float, default=TIME_BUDGET, help="seconds per call (default %(default)s)")
    parser.add_argument("--sgp-time-budget", type=float, default=SGP_TIME_BUDGET,
                        help="seconds per sparse-GP call (default %(default)s)")
    parser.add_argument("--memory-cap", type=float, default=MEMORY_CAP_GIB,
                        help="GiB: jacacc derivatives whose largest intermediate × 3 exceeds it are skipped "
                             "(default %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="threads of each library's BLAS/LAPACK (0: library defaults; default %(default)s)")
    parser.add_argument("--quick", action="store_true", help="small sizes, three samples per timing")
    parser.add_argument("--out", default=".", help="directory holding results/ and figures/ (default the repo root)")
    parser.add_argument("--no-figure", action="store_true")
    args = parser.parse_args(argv)
    sizes = args.sizes or list(QUICK_SIZES if args.quick else SIZES)
    sgp_n = args.sgp_n if args.sgp_n is not None else (QUICK_SGP_N if args.quick else SGP_N)
    inducing = args.sgp_inducing or list(QUICK_SGP_INDUCING if args.quick else SGP_INDUCING)
    memory_cap = args.memory_cap * 2**30

    import jax

    threads = sibling("tensor_hessians").limit_threads(args.threads)  # BLAS (NumPy's, SciPy's), PyTorch, XLA
    derivatives = registered_operators()
    examples = sibling("linalg_examples")
    params = {
        "operators": args.operators, "sizes": sizes, "time_budget_s": args.time_budget,
        "sgp_time_budget_s": args.sgp_time_budget, "quick": args.quick,
        "memory_cap_bytes": memory_cap,
        "dtype": "float64", "batch": 1, "tolerance": TOLERANCE, "sgp_tolerance": SGP_TOLERANCE,
        "sgp": {"n": sgp_n, "d": SGP_D, "inducing": inducing, "jitter": SGP_JITTER},
        "timing": f"first call alone, then the median of 5 warm calls (3 above 50 ms; looped to {MIN_SAMPLE_S} s "
                  "when faster)",
        "peers": {name: CASES[name].peers for name in args.operators},
        "derivative_modules": derivatives, **threads, "versions": versions(),
    }
    record_path = os.path.join(args.out, "results", f"{EXPERIMENT}.json")
    start = time.perf_counter()
    with jax.enable_x64(True):
        operators = run_operators(args.operators, sizes, args.seed, args.time_budget, args.quick, memory_cap)
        results: dict[str, Any] = {"operators": operators}
        write_record(record_path, EXPERIMENT, {**results, "partial": True}, parameters=params, seed=args.seed)
        if sgp_n > 0:
            results["sparse_gp"] = sparse_gp(inducing, sgp_n, SGP_D, args.seed, args.sgp_time_budget, args.quick,
                                             examples)
    params["wall_s"] = time.perf_counter() - start
    record = write_record(record_path, EXPERIMENT, results, parameters=params, seed=args.seed)
    print("\nBackward (and forward) per operator and n; ratios < 1: jacacc faster\n")
    print(operator_table(operators["summary"]))
    if "sparse_gp" in results:
        print(f"\nSparse GP bound + gradient (n={sgp_n}, d={SGP_D}); jacacc: {results['sparse_gp']['jacacc_source']}; "
              f"hand-derived NumPy: {results['sparse_gp']['hand_gradient']}\n")
        print(sparse_gp_table(results["sparse_gp"]))
    if not args.no_figure:
        plot_linalg_benchmark(record, os.path.join(args.out, "figures", f"{EXPERIMENT}.png"))
    print(f"\n{len(operators['rows'])} operator rows in {params['wall_s']:.0f} s -> {record_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
