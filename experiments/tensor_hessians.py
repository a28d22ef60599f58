"""Function values, gradients and Hessians of paper 002's three problems: jacacc.tensor against JAX, PyTorch and NumPy closed forms.

Paper 002 (Laue, Mitterreiter, Giesen, AAAI 2020), §4 and Fig. 3: the time to
compute the Hessian of

* **logistic regression** f(w) = Σ_i log(exp(−y_i X_i·w) + 1), X ∈ R^{m×n},
  m = 2n, y ∈ {±1}^m, w.r.t. w;
* **logistic regression + L2**, the same plus 0.35·Σ_j w_j² (issue 25: an input
  read twice, ``w * w``, whose Hessian term 0.7·I must cost nothing next to
  XᵀDX — jacacc adds it along the dense Hessian's diagonal; listed last so the
  other problems keep their random data);
* **matrix factorization** f(U) = ‖Ω ⊙ (T − U Vᵀ)‖², T, Ω ∈ R^{n×n} (Ω a 0/1
  mask), U, V ∈ R^{n×k}, k = 5, w.r.t. U;
* a **neural net** of ten fully connected n × n ReLU layers with a softmax
  cross-entropy output, loss Σ_s [log Σ_c exp(z_cs) − Σ_c Y_cs z_cs] on a
  batch of n samples (Y one-hot over n classes), w.r.t. the first layer's
  weight matrix,
* the vectorized **Rosenbrock** function Σ_i 100(x_{i+1} − x_i²)² + (1 − x_i)²,
  written with slices ``x[1:]``, ``x[:-1]`` (general functions in jacacc.tensor:
  its Hessian is written out by one batched sweep, n² work for the dense
  tridiagonal result, no n³ step; listed last as well),

for a geometric range of n.  Methods, per quantity (function value, gradient,
Hessian):

* ``jacacc-reverse``, ``jacacc-cross_country``, ``jacacc-forward``
  (``jacacc.tensor.grad`` / ``hessian`` in that mode) and, for the Hessian,
  ``jacacc-compressed`` (``hessian(compress=True)``, cross-country; its time
  is that of computing the stored tensor, its bytes those of the stored
  tensor); the value row ``jacacc`` evaluates the traced expression with
  jacacc's planned evaluator (:class:`jacacc.tensor.evaluate.Program`);
* ``jax``: ``jax.jit(f)``, ``jax.jit(jax.grad(f))``, ``jax.jit(jax.hessian(f))``
  in float64 (compiled ahead of time; the compile is part of the first call);
* ``torch``: ``f``, ``torch.func.grad(f)``, ``torch.func.hessian(f)`` in float64 (eager);
* ``numpy``: the function itself, and the hand-written closed forms where one
  exists: ``closed_form`` (logistic regression: −Xᵀ(y ⊙ σ(z)) and
  Xᵀ diag(σ(z)(1 − σ(z))) X with z = −y ⊙ Xw, plus 0.7·w and 0.7·I with the
  L2 term; matrix factorization:
  −2 (Ω² ⊙ (T − UVᵀ)) V and the block-diagonal Hessian with blocks
  2 Vᵀ diag(Ω_i²) V written out densely) and ``closed_form_compressed`` (the
  n blocks k × k only).  The neural net has none.

Every result is checked against JAX's (the largest entry difference relative
to max(1, max|reference|) must be at most 1e-8; a compressed Hessian is
written out with ``.dense()`` for the check); where JAX was skipped the
reference is the closed form, else PyTorch, else jacacc's cross-country
result.  Where the dense matrix-factorization Hessian does not fit twice
under the memory cap, the compressed results are compared as their n
diagonal k × k blocks with the compressed closed form (:class:`Checks`; each
row names its reference and the form compared).  The first call's result is
the one checked; the timed calls follow.

Timing: the first call is timed on its own (``first_call_s``: JAX's lowering
and XLA compile, jacacc's trace, derivation and planning, plus one
evaluation; ``setup_s`` = first call minus the median); then the median of
up to seven warm calls (``seconds``; calls under 20 ms are looped for 20 ms
per sample).  A method stops at the first n where a call exceeds
``--time-budget`` or where its time extrapolated from the previous n
(× (n/n_prev)^p, p the quantity's nominal exponent, ``EXPONENTS``) would, and
is skipped where its estimated memory exceeds ``--memory-cap``: for JAX,
XLA's own memory analysis of the compiled program; for PyTorch (vmap
materializes the same batched intermediates) the same JAX figure; for
jacacc three times the largest node of the derivative expression; for the
closed forms twice the result.  Each skipped row says why.

A problem's sweep ends at the first n where every Hessian method was skipped
(``results["ended"]``): larger n would time only values and gradients.

Threads: ``--threads 1`` (the default) runs NumPy's OpenBLAS, jacacc's Numba
kernels (whose own default is every core), PyTorch and XLA with one thread
each (see :func:`limit_threads`: on two shared cores their
spinning thread pools slowed each other down by orders of magnitude), so the
comparison is of algorithms on one core.  XLA's float64 GEMM is about twice as
fast per core as the OpenBLAS build NumPy ships here (AVX-512 against
Haswell kernels), which favours JAX wherever a product dominates.

Memory (``peak_bytes``, ``memory_measure`` says which): for NumPy and
jacacc the tracemalloc peak of one warm call (NumPy registers its buffers
with tracemalloc; the arguments are excluded, the result included; measured
where the call takes under 2 s); for JAX XLA's compiled memory analysis
(temporaries + outputs); not measured for PyTorch.

Writes ``results/tensor_hessians.json`` and ``figures/tensor_hessians.png``
(paper 002 Fig. 3: Hessian time against n, one panel per problem).

    python experiments/tensor_hessians.py                  # the recorded run, about 10 minutes on 2 cores
    python experiments/tensor_hessians.py --quick --sizes 8 16 --out /tmp/th
    python experiments/tensor_hessians.py --problems logistic_regression_l2 --out /tmp/th   # one problem
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc.bench import limit_blas_threads, limit_numba_threads, time_call, write_record
from jacacc.progress import note, progress_bar

EXPERIMENT = "tensor_hessians"
PROBLEMS = ("logistic_regression", "matrix_factorization", "neural_net", "logistic_regression_l2", "rosenbrock")
SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
QUICK_SIZES = (8, 16)
K = 5  # matrix factorization rank
L2 = 0.35  # weight of the L2 term of logistic_regression_l2
LAYERS = 10  # neural net depth
MASK_DENSITY = 0.5  # fraction of observed entries of Ω
TIME_BUDGET = 10.0  # seconds per call
MEMORY_CAP_GIB = 3.0
TOLERANCE = 1e-8
QUANTITIES = ("value", "gradient", "hessian")
JACACC_MODES = ("reverse", "cross_country", "forward")
COMPRESSED_MODE = "cross_country"
# nominal growth exponents of the cost in n, used to skip a call that would exceed the budget
EXPONENTS = {
    "logistic_regression": {"value": 2, "gradient": 2, "hessian": 3},
    "matrix_factorization": {"value": 2, "gradient": 2, "hessian": 3},
    "neural_net": {"value": 3, "gradient": 3, "hessian": 5},
    "logistic_regression_l2": {"value": 2, "gradient": 2, "hessian": 3},
    "rosenbrock": {"value": 1, "gradient": 1, "hessian": 2},  # the dense Hessian: n² entries, no n³ step
}
MIN_SAMPLE_S = 0.02  # calls faster than this are looped for this long per sample


# =========================================================================== the problems
@dataclass(frozen=True)
class Ops:
    """The few operations the problems need, spelled by one library."""

    sum: Callable[[Any], Any]
    sum0: Callable[[Any], Any]  # the sum over axis 0
    exp: Callable[[Any], Any]
    log: Callable[[Any], Any]
    relu: Callable[[Any], Any]


NUMPY_OPS = Ops(np.sum, lambda a: np.sum(a, axis=0), np.exp, np.log, lambda a: np.maximum(a, 0))


def jax_ops() -> Ops:
    import jax.numpy as jnp

    return Ops(jnp.sum, lambda a: jnp.sum(a, axis=0), jnp.exp, jnp.log, lambda a: jnp.maximum(a, 0))


def torch_ops() -> Ops:
    import torch

    return Ops(torch.sum, lambda a: torch.sum(a, dim=0), torch.exp, torch.log, torch.relu)


def logistic_regression(ops: Ops) -> Callable:
    def logistic_regression(w, X, y):
        return ops.sum(ops.log(ops.exp(-y * (X @ w)) + 1))

    return logistic_regression


def logistic_regression_l2(ops: Ops) -> Callable:
    def logistic_regression_l2(w, X, y):
        return ops.sum(ops.log(ops.exp(-y * (X @ w)) + 1)) + L2 * ops.sum(w * w)

    return logistic_regression_l2


def matrix_factorization(ops: Ops) -> Callable:
    def matrix_factorization(U, V, T, Omega):
        return ops.sum((Omega * (T - U @ V.T)) ** 2)

    return matrix_factorization


def neural_net(ops: Ops) -> Callable:
    """Ten n × n ReLU layers, softmax cross-entropy: f(W1, W2, …, W10, X, Y)."""

    def neural_net(W1, *rest):
        *weights, X, Y = rest
        h = ops.relu(W1 @ X)
        for W in weights[:-1]:
            h = ops.relu(W @ h)
        z = weights[-1] @ h  # logits, classes × samples
        return ops.sum(ops.log(ops.sum0(ops.exp(z)))) - ops.sum(Y * z)

    return neural_net


def rosenbrock(ops: Ops) -> Callable:
    """The vectorized Rosenbrock function (slices of x: general functions in jacacc.tensor)."""

    def rosenbrock(x):
        return ops.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    return rosenbrock


def make_arguments(problem: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Dense random data (float64) for ``problem`` at size n; the first argument is differentiated."""
    if problem in ("logistic_regression", "logistic_regression_l2"):
        m = 2 * n
        return (rng.standard_normal(n) / math.sqrt(n), rng.standard_normal((m, n)), rng.choice([-1.0, 1.0], m))
    if problem == "matrix_factorization":
        omega = (rng.random((n, n)) < MASK_DENSITY).astype(float)
        return (rng.standard_normal((n, K)), rng.standard_normal((n, K)), rng.standard_normal((n, n)), omega)
    if problem == "neural_net":
        # He initialization keeps the ReLU activations O(1); the last layer's 1/n keeps the logits O(1)
        weights = [rng.standard_normal((n, n)) * math.sqrt(2.0 / n) for _ in range(LAYERS - 1)]
        weights.append(rng.standard_normal((n, n)) / math.sqrt(n))
        X = rng.standard_normal((n, n))
        Y = np.eye(n)[:, rng.integers(0, n, n)]
        return (*weights, X, Y)
    if problem == "rosenbrock":
        return (rng.uniform(-1.5, 1.5, n),)
    raise ValueError(f"unknown problem {problem!r}; valid: {', '.join(PROBLEMS)}")


FUNCTIONS = {"logistic_regression": logistic_regression, "matrix_factorization": matrix_factorization,
             "neural_net": neural_net, "logistic_regression_l2": logistic_regression_l2, "rosenbrock": rosenbrock}


# --------------------------------------------------------------------------- closed forms (NumPy)
def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def logistic_gradient(w, X, y):
    """∇f = −Xᵀ (y ⊙ σ(z)), z = −y ⊙ Xw."""
    return X.T @ (-y * _sigmoid(-y * (X @ w)))


def logistic_hessian(w, X, y):
    """∇²f = Xᵀ diag(s(1 − s)) X, s = σ(z) (y² = 1)."""
    s = _sigmoid(-y * (X @ w))
    return (X.T * (s * (1 - s))) @ X


def logistic_l2_gradient(w, X, y):
    """∇f = −Xᵀ (y ⊙ σ(z)) + 2λw."""
    return logistic_gradient(w, X, y) + 2 * L2 * w


def logistic_l2_hessian(w, X, y):
    """∇²f = Xᵀ diag(s(1 − s)) X + 2λI."""
    H = logistic_hessian(w, X, y)
    H[np.diag_indices_from(H)] += 2 * L2
    return H


def rosenbrock_gradient(x):
    """∂f/∂x_i = −400 x_i (x_{i+1} − x_i²) − 2(1 − x_i) + 200 (x_i − x_{i−1}²), each term where it exists."""
    g = np.zeros_like(x)
    r = x[1:] - x[:-1] ** 2
    g[:-1] += -400.0 * x[:-1] * r - 2.0 * (1.0 - x[:-1])
    g[1:] += 200.0 * r
    return g


def rosenbrock_hessian(x):
    """The tridiagonal Hessian: diagonal 1200x_i² − 400x_{i+1} + 2 (+200 from the term before), off −400x_i."""
    n = x.size
    H = np.zeros((n, n))
    i = np.arange(n - 1)
    H[i, i] += 1200.0 * x[:-1] ** 2 - 400.0 * x[1:] + 2.0
    H[i + 1, i + 1] += 200.0
    H[i, i + 1] = H[i + 1, i] = -400.0 * x[:-1]
    return H


def mf_gradient(U, V, T, Omega):
    """∇_U f = −2 (Ω² ⊙ (T − UVᵀ)) V."""
    return -2.0 * ((Omega * Omega) * (T - U @ V.T)) @ V


def mf_hessian_blocks(U, V, T, Omega):
    """The n diagonal blocks 2 Vᵀ diag(Ω_i²) V (shape n × k × k): the compressed closed form."""
    return 2.0 * np.einsum("ij,ja,jb->iab", Omega * Omega, V, V, optimize=True)


def mf_hessian(U, V, T, Omega):
    """The dense Hessian (n, k, n, k): H[i, a, i′, b] = δ(i, i′) · blocks[i, a, b]."""
    blocks = mf_hessian_blocks(U, V, T, Omega)
    n, k = U.shape
    H = np.zeros((n, k, n, k))
    idx = np.arange(n)
    H[idx, :, idx, :] = blocks
    return H


CLOSED_FORMS: dict[str, dict[str, Callable]] = {
    "logistic_regression": {"gradient": logistic_gradient, "hessian": logistic_hessian},
    "matrix_factorization": {"gradient": mf_gradient, "hessian": mf_hessian,
                             "hessian_compressed": mf_hessian_blocks},
    "neural_net": {},
    "logistic_regression_l2": {"gradient": logistic_l2_gradient, "hessian": logistic_l2_hessian},
    "rosenbrock": {"gradient": rosenbrock_gradient, "hessian": rosenbrock_hessian},
}


def _expand_mf_blocks(blocks: np.ndarray) -> np.ndarray:
    n, k, _ = blocks.shape
    H = np.zeros((n, k, n, k))
    idx = np.arange(n)
    H[idx, :, idx, :] = blocks
    return H


# =========================================================================== methods
@dataclass
class Method:
    """One way to compute one quantity: ``prepare(args)`` returns (call, memory estimate, facts)."""

    name: str
    library: str
    mode: str | None
    prepare: Callable[[tuple], tuple[Callable[[], Any], int | None, dict]]
    dense: Callable[[Any], np.ndarray] = np.asarray
    # the matrix-factorization Hessian's n diagonal k × k blocks, for checks where the dense form is too big
    blocks: Callable[[Any], np.ndarray] | None = None


def _nbytes(shape: tuple[int, ...]) -> int:
    return 8 * math.prod(shape)


def _largest_node_bytes(roots: list) -> int:
    from jacacc.tensor.expr import nodes_of

    return max((_nbytes(node.shape) for node in nodes_of(roots)), default=8)


def _jacacc_plan_flops(transformed: Callable) -> int | None:
    plans = list(getattr(transformed, "plans", {}).values())
    if not plans:
        return None
    plan = plans[0]
    program = getattr(plan, "program", plan)
    return None if program is None else int(program.flops)


def blocks_of_compressed(hessian: Any) -> np.ndarray:
    """The n diagonal blocks B[i, a, b] = H[i, a, i, b] of a compressed block-diagonal Hessian, read
    off its layout (``T[jik] -> [ij|ik]``: stored axes j, i, k; dense axes i, j | i, k) without
    writing the dense Hessian out."""
    stored_letters, dense = hessian.layout.split(" -> ")
    stored_letters = stored_letters[stored_letters.index("[") + 1:-1]
    first, second = dense.strip("[]").split("|")
    if len(first) != 2 or len(second) != 2 or first[0] != second[0]:
        raise ValueError(f"not a block-diagonal layout: {hessian.layout}")
    target = first[0] + first[1] + second[1]
    kept = "".join(c for c in target if c in stored_letters)
    blocks = np.einsum(f"{stored_letters}->{kept}", hessian.stored)
    n, k = hessian.shape[0], hessian.shape[1]
    if kept != target:  # a letter the stored tensor lacks is a broadcast (Ω all ones: one block for all rows)
        blocks = np.broadcast_to(blocks, (n, k, k))
    return np.asarray(blocks)


def jacacc_methods(problem: str, quantity: str) -> list[Method]:
    import jacacc.tensor as jt
    from jacacc.tensor.evaluate import Program
    from jacacc.tensor.trace import trace

    f = FUNCTIONS[problem](NUMPY_OPS)
    if quantity == "value":
        def prepare_value(args: tuple) -> tuple[Callable, int, dict]:
            traced = trace(f, args)
            estimate = 3 * _largest_node_bytes(list(traced.outputs))
            state: dict[str, Any] = {}

            def call() -> Any:
                if "program" not in state:  # the first call traces and plans, as jacacc's transformations do
                    t = trace(f, args)
                    state["program"] = Program(t.outputs, t.inputs, np.float64)
                return state["program"](*args)[0]

            return call, estimate, {"facts": lambda: {"flops": int(state["program"].flops)}}

        return [Method("jacacc", "jacacc", None, prepare_value)]

    methods = []
    order = 1 if quantity == "gradient" else 2
    variants = [(m, False) for m in JACACC_MODES]
    if quantity == "hessian":
        variants.append((COMPRESSED_MODE, True))

    for mode, compress in variants:
        def prepare(args: tuple, mode: str = mode, compress: bool = compress) -> tuple[Callable, int, dict]:
            d = jt.derivative_expression(f, *args, order=order, mode=mode)
            factor = d.factor
            if hasattr(factor, "collapsed"):  # a FactorSum: compression stores its terms added into one factor
                factor, _ = factor.collapsed()
            roots = [factor.tensor] if compress and factor.tensor is not None else [d.expression]
            estimate = 3 * _largest_node_bytes(roots)
            if quantity == "gradient":
                transformed = jt.grad(f, mode=mode)
            else:
                transformed = jt.hessian(f, mode=mode, compress=compress)
            return (lambda: transformed(*args)), estimate, {"facts": lambda: {"flops": _jacacc_plan_flops(transformed)}}

        name = "jacacc-compressed" if compress else f"jacacc-{mode}"
        methods.append(Method(name, "jacacc", mode, prepare,
                              dense=(lambda r: r.dense()) if compress else np.asarray,
                              blocks=blocks_of_compressed if compress and problem == "matrix_factorization" else None))
    return methods


def jax_method(problem: str, quantity: str) -> Method:
    def prepare(args: tuple) -> tuple[Callable, int | None, dict]:
        import jax
        import jax.numpy as jnp

        f = FUNCTIONS[problem](jax_ops())
        fn = {"value": f, "gradient": jax.grad(f), "hessian": jax.hessian(f)}[quantity]
        jargs = [jnp.asarray(a) for a in args]
        state: dict[str, Any] = {}
        start = time.perf_counter()
        compiled = jax.jit(fn).lower(*jargs).compile()
        compile_s = time.perf_counter() - start
        try:
            analysis = compiled.memory_analysis()
            estimate = int(analysis.temp_size_in_bytes + analysis.output_size_in_bytes)
        except Exception:  # noqa: BLE001 - not every backend reports it
            estimate = None

        def call() -> Any:
            if "compiled" not in state:  # the AOT compile above belongs to the first call
                state["compiled"] = compiled
                state["compile_s"] = compile_s
            return state["compiled"](*jargs).block_until_ready()

        return call, estimate, {"compile_s": compile_s, "xla_bytes": estimate}

    return Method("jax", "jax", None, prepare)


def torch_method(problem: str, quantity: str) -> Method:
    def prepare(args: tuple) -> tuple[Callable, None, dict]:
        import torch
        import torch.func

        f = FUNCTIONS[problem](torch_ops())
        fn = {"value": f, "gradient": torch.func.grad(f), "hessian": torch.func.hessian(f)}[quantity]
        targs = [torch.from_numpy(np.ascontiguousarray(a)) for a in args]
        return (lambda: fn(*targs)), None, {}

    return Method("torch", "torch", None, prepare, dense=lambda r: r.detach().numpy())


def numpy_methods(problem: str, quantity: str) -> list[Method]:
    if quantity == "value":
        f = FUNCTIONS[problem](NUMPY_OPS)
        return [Method("numpy", "numpy", None, lambda args: ((lambda: f(*args)), 0, {}))]
    forms = CLOSED_FORMS[problem]
    methods = []
    # memory estimates: twice the result (the dense Hessian; the n k × k blocks)
    if quantity in forms:
        form = forms[quantity]
        methods.append(Method("closed_form", "numpy", None, lambda args, form=form: (
            (lambda: form(*args)), 2 * 8 * args[0].size ** (2 if quantity == "hessian" else 1), {})))
    if quantity == "hessian" and "hessian_compressed" in forms:
        form = forms["hessian_compressed"]
        methods.append(Method("closed_form_compressed", "numpy", None, lambda args, form=form: (
            (lambda: form(*args)), 2 * 8 * args[0].size * args[0].shape[-1], {}), dense=_expand_mf_blocks,
            blocks=np.asarray))
    return methods


def methods_for(problem: str, quantity: str) -> list[Method]:
    """JAX first (the reference), then the closed forms, PyTorch and jacacc."""
    return [jax_method(problem, quantity), *numpy_methods(problem, quantity), torch_method(problem, quantity),
            *jacacc_methods(problem, quantity)]


# =========================================================================== measuring
def result_nbytes(result: Any) -> int:
    if hasattr(result, "stored"):  # a CompressedHessian
        return int(result.nbytes)
    if hasattr(result, "element_size"):  # a torch tensor
        return int(result.element_size() * result.nelement())
    return int(np.asarray(result).nbytes)


def median_seconds(call: Callable[[], Any], warm: float, budget: float, quick: bool) -> list[float]:
    """Warm-call samples: seven for fast calls, five above 0.1 s, three above a second (``warm``, the
    call after the first, among them), only ``warm`` above the budget; a call under ``MIN_SAMPLE_S``
    is looped for that long per sample (and ``warm``, a single call, is not kept)."""
    if warm > budget:
        return [warm]
    samples = 3 if quick or warm > 1.0 else 5 if warm > 0.1 else 7
    if warm < MIN_SAMPLE_S:
        return [time_call(call, repeat=1, min_time=MIN_SAMPLE_S) for _ in range(samples)]
    return [warm] + [time_call(call, repeat=1) for _ in range(samples - 1)]


def traced_peak(call: Callable[[], Any]) -> int:
    """tracemalloc's peak over one call (bytes allocated during it, the result included)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = call()
        peak = tracemalloc.get_traced_memory()[1] - base
        del result
    finally:
        tracemalloc.stop()
    return int(peak)


def max_relative_error(result: np.ndarray, reference: np.ndarray) -> float:
    result, reference = np.asarray(result, dtype=float), np.asarray(reference, dtype=float)
    if result.shape != reference.shape:
        return math.inf
    scale = max(1.0, float(np.max(np.abs(reference))) if reference.size else 1.0)
    return float(np.max(np.abs(result - reference))) / scale if reference.size else 0.0


class Checks:
    """Checks of one (problem, n, quantity): each result against the first reference of its form.

    Dense results are compared with JAX's (else the closed form's, PyTorch's, jacacc cross-country's;
    the function value with NumPy's); the matrix-factorization Hessian's diagonal blocks, used where
    the dense form is too big to write out, with the compressed closed form's (else jacacc's).  A row
    computed before its reference is checked once the reference exists; a row left with no reference
    at all is recorded as compared with itself (``reference`` says so).
    """

    REFERENCES = {"dense": ("jax", "closed_form", "torch", "jacacc-cross_country", "numpy", "jacacc"),
                  "blocks": ("closed_form_compressed", "jacacc-compressed")}

    def __init__(self) -> None:
        self.references: dict[str, tuple[np.ndarray, str]] = {}
        self.pending: dict[str, list[tuple[dict, np.ndarray]]] = {"dense": [], "blocks": []}

    def add(self, row: dict, form: str, array: np.ndarray) -> None:
        if form not in self.references and row["method"] in self.REFERENCES[form]:
            self.references[form] = (array, row["method"])
            for earlier, earlier_array in self.pending[form]:
                self.check(earlier, earlier_array, array, row["method"], form)
            self.pending[form] = []
        if form in self.references:
            self.check(row, array, *self.references[form], form)
        else:
            self.pending[form].append((row, array))

    def finish(self) -> None:
        for form, items in self.pending.items():
            for row, array in items:
                self.check(row, array, array, f"{row['method']} (itself: no reference computed)", form)
        self.pending = {"dense": [], "blocks": []}

    @staticmethod
    def check(row: dict, array: np.ndarray, reference: np.ndarray, name: str, form: str) -> None:
        error = max_relative_error(array, reference)
        row.update(reference=name, compared=form, max_rel_error=error, matches=bool(error <= TOLERANCE))
        if not row["matches"]:
            raise AssertionError(f"{row['problem']} n={row['n']} {row['quantity']} {row['method']}: "
                                 f"off from {name} by {error:.2e} (relative, {form})")


class Runner:
    """Measures every method at growing n, remembering which ones ran out of time."""

    def __init__(self, time_budget: float, memory_cap: int, quick: bool) -> None:
        self.time_budget = time_budget
        self.memory_cap = memory_cap
        self.quick = quick
        self.last: dict[tuple[str, str, str], tuple[int, float]] = {}  # (problem, quantity, method) -> (n, s)
        self.stopped: dict[tuple[str, str, str], str] = {}
        self.jax_estimate: dict[tuple[str, str], int | None] = {}  # XLA's figure, PyTorch's estimate too

    def skip_reason(self, key: tuple[str, str, str], n: int) -> str | None:
        if key in self.stopped:
            return self.stopped[key]
        if key in self.last:
            n_prev, seconds = self.last[key]
            predicted = seconds * (n / n_prev) ** EXPONENTS[key[0]][key[1]]
            if predicted > self.time_budget:
                return (f"time budget: {seconds:.3g} s at n={n_prev} extrapolates to {predicted:.3g} s "
                        f"> {self.time_budget:g} s")
        return None

    def measure(self, problem: str, n: int, args: tuple) -> list[dict]:
        rows = []
        dense_bytes = 8 * args[0].size ** 2
        for quantity in QUANTITIES:
            checks = Checks()
            # a compressed Hessian is written out for its check only where that fits twice under the cap
            dense_fits = quantity != "hessian" or 2 * dense_bytes <= self.memory_cap
            for method in methods_for(problem, quantity):
                key = (problem, quantity, method.name)
                row: dict[str, Any] = {"problem": problem, "n": n, "quantity": quantity, "method": method.name,
                                       "library": method.library, "mode": method.mode,
                                       "dense_hessian_bytes": dense_bytes, "skipped": self.skip_reason(key, n)}
                rows.append(row)
                if row["skipped"]:
                    note(f"{problem:<23} n={n:<5} {quantity:<8} {method.name:<23} skipped: {row['skipped']}")
                    continue
                try:
                    result = self._run(method, key, n, args, row)
                except MemoryError:
                    row["skipped"] = f"MemoryError at n={n}"
                    self.stopped[key] = row["skipped"]
                    result = None
                if result is None:
                    note(f"{problem:<23} n={n:<5} {quantity:<8} {method.name:<23} skipped: {row['skipped']}")
                    continue
                if method.blocks is not None and not dense_fits:
                    checks.add(row, "blocks", method.blocks(result))
                else:
                    checks.add(row, "dense", method.dense(result))
                del result
                checked = (f"err {row['max_rel_error']:.1e} vs {row['reference']}" if "reference" in row
                           else "checked once a reference is computed")
                note(f"{problem:<23} n={n:<5} {quantity:<8} {method.name:<23} {row['seconds']:10.3g} s "
                     f"(first {row['first_call_s']:.3g} s) {checked}")
            checks.finish()
        return rows

    def _run(self, method: Method, key: tuple[str, str, str], n: int, args: tuple, row: dict) -> Any:
        call, estimate, facts = method.prepare(args)
        if estimate is None and method.name == "torch":
            estimate = self.jax_estimate.get(key[:2])
        row["estimated_bytes"] = estimate
        if method.name == "jax":
            self.jax_estimate[key[:2]] = estimate
        if estimate is not None and estimate > self.memory_cap:
            row["skipped"] = (f"memory cap: estimated {estimate / 2**30:.3g} GiB at n={n} > "
                              f"{self.memory_cap / 2**30:.3g} GiB"
                              + (" (XLA memory analysis)" if method.name in ("jax", "torch") else ""))
            self.stopped[key] = row["skipped"]
            return None
        start = time.perf_counter()
        result = call()
        first = time.perf_counter() - start
        if "compile_s" in facts:  # the AOT compile ran in prepare()
            first += facts["compile_s"]
        if method.name not in ("jax", "torch"):  # jacacc's fused regions compile on their third call
            for _ in range(fusion_compile_after()):
                call()
        warm = time_call(call, repeat=1)
        samples = median_seconds(call, warm, self.time_budget, self.quick)
        seconds = statistics.median(samples)
        row.update(seconds=seconds, samples=samples, first_call_s=first, setup_s=max(0.0, first - seconds),
                   result_nbytes=result_nbytes(result))
        if "facts" in facts:
            row.update(facts["facts"]())
        if method.library in ("numpy", "jacacc"):
            measurable = seconds < 2.0
            row["peak_bytes"] = traced_peak(call) if measurable else None
            row["memory_measure"] = "tracemalloc peak of one warm call" if measurable else "not measured (slow call)"
        elif method.library == "jax":
            row["peak_bytes"] = facts.get("xla_bytes")
            row["memory_measure"] = "XLA memory analysis: temporaries + outputs"
        else:
            row["peak_bytes"] = None
            row["memory_measure"] = "not measured"
        self.last[key] = (n, seconds)
        if seconds > self.time_budget or first > self.time_budget:
            self.stopped[key] = (f"time budget: {max(seconds, first):.3g} s at n={n} > {self.time_budget:g} s")
            row["over_budget"] = True
        return result


# =========================================================================== summary, figure
def summarize(rows: list[dict]) -> list[dict]:
    """Per (problem, n, quantity): each method's time relative to the best peer and to the closed form."""
    groups: dict[tuple[str, int, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["problem"], r["n"], r["quantity"]), []).append(r)
    summary = []
    for (problem, n, quantity), group in groups.items():
        timed = {r["method"]: r["seconds"] for r in group if r.get("seconds") is not None}
        peers = {m: s for m, s in timed.items() if m in ("jax", "torch")}
        best_peer = min(peers, key=peers.get) if peers else None
        hand = timed.get("closed_form", timed.get("numpy"))
        for r in group:
            if r.get("seconds") is None:
                continue
            r["over_best_peer"] = r["seconds"] / peers[best_peer] if best_peer else None
            r["over_closed_form"] = r["seconds"] / hand if hand else None
        summary.append({"problem": problem, "n": n, "quantity": quantity, "best_peer": best_peer,
                        "best_peer_s": peers.get(best_peer) if best_peer else None, "closed_form_s": hand,
                        "seconds": timed})
    return summary


COLORS = {"jacacc-reverse": "tab:blue", "jacacc-cross_country": "tab:green", "jacacc-forward": "tab:cyan",
          "jacacc-compressed": "tab:olive", "jacacc": "tab:green", "jax": "tab:red", "torch": "tab:orange",
          "closed_form": "black", "closed_form_compressed": "gray", "numpy": "black"}
TITLES = {"logistic_regression": "logistic regression", "matrix_factorization": "matrix factorization",
          "neural_net": "neural net (first layer)", "logistic_regression_l2": "logistic regression + L2",
          "rosenbrock": "Rosenbrock"}


def plot_tensor_hessians(record: dict, path: str | os.PathLike | None = None, quantity: str = "hessian"):
    """Paper 002 Fig. 3: time of ``quantity`` against n, log-log, one panel per problem, one line per method."""
    from jacacc.plot import _pyplot, _save

    plt = _pyplot()
    rows = [r for r in record["results"]["rows"] if r["quantity"] == quantity]
    problems = [p for p in PROBLEMS if any(r["problem"] == p for r in rows)]
    fig, axes = plt.subplots(1, max(1, len(problems)), figsize=(5.2 * max(1, len(problems)), 4.2), squeeze=False)
    for ax, problem in zip(axes[0], problems, strict=False):
        mine = [r for r in rows if r["problem"] == problem]
        methods = list(dict.fromkeys(r["method"] for r in mine))
        for method in methods:
            points = sorted((r["n"], r["seconds"]) for r in mine if r["method"] == method and r.get("seconds"))
            if not points:
                continue
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", markersize=3.5, label=method, color=COLORS.get(method),
                    linestyle="--" if not method.startswith("jacacc") else "-")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n")
        ax.set_ylabel("seconds (median)")
        ax.set_title(TITLES.get(problem, problem))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    threads = record["parameters"].get("threads")
    fig.suptitle(f"{quantity}: jacacc.tensor against JAX, PyTorch and closed forms (float64, CPU, "
                 f"{'threads: ' + str(threads) if threads else 'default threads'}; median of warm calls)",
                 fontsize=10)
    fig.tight_layout()
    _save(fig, path)
    return fig


def _cell(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or b is None else f"{a / b:.2f}"


def readme_table(record: dict) -> str:
    """The README's table of Hessian times (median, warm) per problem and n: jacacc in
    cross-country mode and compressed, the peers, the closed form, and the ratios
    of cross-country to the best peer and to the closed form."""
    lines = ["| problem | n | jacacc cross_country | jacacc compressed | jax | torch | closed form | "
             "/ best peer | / closed form |", "|---|---|---|---|---|---|---|---|---|"]
    for s in record["results"]["summary"]:
        if s["quantity"] != "hessian":
            continue
        t = s["seconds"]
        cc = t.get("jacacc-cross_country")
        if cc is None and t.get("jacacc-compressed") is None:
            continue  # every jacacc method over the budget: nothing to show
        lines.append(f"| {TITLES.get(s['problem'], s['problem'])} | {s['n']} | {_cell(cc)} | "
                     f"{_cell(t.get('jacacc-compressed'))} | {_cell(t.get('jax'))} | {_cell(t.get('torch'))} | "
                     f"{_cell(s['closed_form_s'])} | {_ratio(cc, s['best_peer_s'])} | "
                     f"{_ratio(cc, s['closed_form_s'])} |")
    return "\n".join(lines)


def print_table(rows: list[dict]) -> None:
    print(f"\n{'problem':<23} {'n':>5} {'quantity':<8} {'method':<23} {'seconds':>10} {'first':>9} "
          f"{'/peer':>7} {'/closed':>8}")
    for r in rows:
        if r.get("seconds") is None:
            continue
        peer = r.get("over_best_peer")
        hand = r.get("over_closed_form")
        print(f"{r['problem']:<23} {r['n']:>5} {r['quantity']:<8} {r['method']:<23} {r['seconds']:>10.3g} "
              f"{r['first_call_s']:>9.3g} {'' if peer is None else f'{peer:.3g}':>7} "
              f"{'' if hand is None else f'{hand:.3g}':>8}")


# =========================================================================== main
def limit_threads(threads: int) -> dict[str, Any]:
    """Run NumPy's OpenBLAS, Numba's parallel loops, PyTorch and XLA with ``threads`` threads each (0: the libraries' defaults).

    On two cores shared with other work, three thread pools (OpenBLAS, PyTorch's OpenMP/MKL, XLA's)
    that each spin for both cores slow each other down by orders of magnitude on small calls (a
    32 × 32 PyTorch matmul took 12 ms instead of 5 µs after NumPy had run); one thread each keeps
    the comparison one of algorithms on one core.  Every BLAS library (NumPy's and SciPy's OpenBLAS)
    is set through threadpoolctl (:func:`jacacc.bench.limit_blas_threads`), Numba through
    :func:`jacacc.bench.limit_numba_threads`, PyTorch through ``torch.set_num_threads``, and XLA, which sizes its pool from
    the CPU affinity mask when its backend starts, by starting the backend under a mask of
    ``threads`` CPUs and then giving every thread of the process the full mask back (only where the
    JAX backend was not started before).
    """
    import jax
    import torch

    info: dict[str, Any] = {"threads": threads or "library defaults"}
    if threads <= 0:
        info.update(blas_threads=limit_blas_threads(0), torch_threads=torch.get_num_threads(),
                    xla_threads="default")
        return info
    info["blas_threads"] = limit_blas_threads(threads)
    info["numba_threads"] = limit_numba_threads(threads)
    torch.set_num_threads(threads)
    info["torch_threads"] = torch.get_num_threads()
    from jax._src import xla_bridge

    started = bool(getattr(xla_bridge, "_backends", None))
    if started or not hasattr(os, "sched_setaffinity"):
        info["xla_threads"] = "default (backend already started)" if started else "default"
        return info
    mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(sorted(mask)[:threads]))
    try:
        jax.numpy.zeros(2).block_until_ready()  # starts the CPU backend and its thread pool
    finally:
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), mask)
            except OSError:
                pass
    info["xla_threads"] = threads
    return info


def versions_of_peers() -> dict[str, Any]:
    import jax

    return {"jax_devices": [str(d) for d in jax.devices()],
            "numpy_blas": (np.show_config(mode="dicts") or {}).get("Build Dependencies", {}).get("blas", {})
            .get("name")}


def run(problems: list[str], sizes: list[int], seed: int, time_budget: float, memory_cap: int,
        quick: bool, record_path: str, params: dict) -> tuple[list[dict], dict[str, dict]]:
    """Every problem at growing n; a problem ends at the first n where every Hessian method was skipped."""
    runner = Runner(time_budget, memory_cap, quick)
    rows: list[dict] = []
    ended: dict[str, dict] = {}
    with progress_bar(total=len(problems) * len(sizes), desc=EXPERIMENT, unit="size") as bar:
        for p, problem in enumerate(problems):
            for n in sizes:
                rng = np.random.default_rng([seed, p, n])
                measured = runner.measure(problem, n, make_arguments(problem, n, rng))
                rows += measured
                bar.update()
                # written after each size, so an interrupted run keeps what it measured
                write_record(record_path, EXPERIMENT, {"rows": rows, "ended": ended, "partial": True},
                             parameters=params, seed=seed)
                if all(r["skipped"] for r in measured if r["quantity"] == "hessian"):
                    # the figure is about Hessians: larger n would time only values and gradients
                    ended[problem] = {"n": n, "why": "every Hessian method was skipped at this n"}
                    note(f"{problem}: every Hessian method skipped at n={n}; larger sizes not run")
                    bar.update(len(sizes) - sizes.index(n) - 1)
                    break
    return rows, ended


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="*", default=list(PROBLEMS), choices=PROBLEMS)
    parser.add_argument("--sizes", nargs="*", type=int, default=None,
                        help=f"n values (default {' '.join(map(str, SIZES))}; --quick: "
                             f"{' '.join(map(str, QUICK_SIZES))})")
    parser.add_argument("--time-budget", type=float, default=TIME_BUDGET, help="seconds per call (default %(default)s)")
    parser.add_argument("--memory-cap", type=float, default=MEMORY_CAP_GIB,
                        help="GiB of estimated memory per call (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="threads of OpenBLAS, PyTorch and XLA each (0: library defaults; default %(default)s)")
    parser.add_argument("--quick", action="store_true", help="small sizes, three samples per timing")
    parser.add_argument("--out", default=".", help="directory holding results/ and figures/ (default the repo root)")
    args = parser.parse_args(argv)
    sizes = args.sizes or list(QUICK_SIZES if args.quick else SIZES)
    memory_cap = int(args.memory_cap * 2**30)

    import jax

    threads = limit_threads(args.threads)
    params = {
        "problems": args.problems, "sizes": sizes, "time_budget_s": args.time_budget,
        "memory_cap_bytes": memory_cap, "quick": args.quick, "dtype": "float64", "k": K, "layers": LAYERS,
        "logistic_m": "2n", "mf_mask_density": MASK_DENSITY, "net_batch": "n samples, n classes",
        "tolerance": TOLERANCE, "exponents": EXPONENTS, "compressed_mode": COMPRESSED_MODE,
        "timing": f"first call alone, then the median of up to 7 warm calls (looped to {MIN_SAMPLE_S} s "
                  "when faster)",
        "peers": {"jax": "jax.jit(f / jax.grad(f) / jax.hessian(f)), ahead-of-time compiled, x64",
                  "torch": "f / torch.func.grad(f) / torch.func.hessian(f), eager, float64"},
        **threads, **versions_of_peers(),
    }
    record_path = os.path.join(args.out, "results", f"{EXPERIMENT}.json")
    start = time.perf_counter()
    with jax.enable_x64(True):
        rows, ended = run(args.problems, sizes, args.seed, args.time_budget, memory_cap, args.quick, record_path,
                          params)
    summary = summarize(rows)
    print_table(rows)
    params["wall_s"] = time.perf_counter() - start
    record = write_record(record_path, EXPERIMENT, {"rows": rows, "summary": summary, "ended": ended}, parameters=params,
                          seed=args.seed)
    plot_tensor_hessians(record, os.path.join(args.out, "figures", f"{EXPERIMENT}.png"))
    print(f"\n{len(rows)} rows in {params['wall_s']:.0f} s -> {record_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def fusion_compile_after() -> int:
    """How many calls jacacc's fused regions run node by node before compiling (the warm-up before a
    warm call: :data:`jacacc.tensor.fusion.COMPILE_AFTER`)."""
    from jacacc.tensor import fusion

    return fusion.COMPILE_AFTER
