"""Experiment records, timing, benchmark peers and the kernel benchmark.

A *record* is a JSON object ``{"experiment", "created", "seed", "environment",
"parameters", "results"}``; :func:`environment` captures the machine and the
versions of everything that can change a number.  Experiment scripts write
records under ``results/``; notebooks and :mod:`jacacc.plot` read them.

Kernel benchmark
----------------
:func:`bench_kernels` measures Jacobians per second of compiled kernels
(:func:`jacacc.compile`, every method × backend) next to *peers*: JAX
(``jit(vmap(jacfwd(f)))``, ``jit(vmap(jacrev(f)))``) and PyTorch
(``vmap(jacfwd(f))``, ``vmap(jacrev(f))`` of ``torch.func``), all producing
per-point Jacobians ``(N, m, n)``.  The peers run :func:`peer_function`: the
traced graph's own primal program replayed op by op with ``jax.numpy`` or
``torch`` (the same elementary operations the kernels compute, so the
comparison is of differentiation strategy and code generation, not of
different formulas).  Peers live in a registry (:func:`register_peer`,
:func:`peers`).  :func:`machine_peaks` measures this machine's peak
arithmetic rate, libm call rate and memory bandwidth; :func:`roofline_seconds`
turns a kernel's per-point counts into the time those peaks need.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from jacacc.errors import RegistryError, require_extra
from jacacc.progress import progress_bar

__all__ = [
    "bench_kernels",
    "blas_threads",
    "environment",
    "fresh_child",
    "get_peer",
    "limit_blas_threads",
    "limit_numba_threads",
    "machine_peaks",
    "peer_function",
    "peers",
    "plot_kernel_benchmark",
    "read_record",
    "register_peer",
    "roofline_seconds",
    "thread_pools",
    "time_call",
    "write_record",
]

# packages whose versions can change a result; absent ones are recorded as None
TRACKED_PACKAGES = ("jacacc", "numpy", "scipy", "networkx", "ortools", "numba", "cupy", "jax", "torch",
                    "threadpoolctl")


def environment() -> dict[str, Any]:
    """Machine and software versions.

    Examples
    --------
    >>> env = environment()
    >>> sorted(env)[:3]
    ['cpu_count', 'cpu_model', 'machine']
    >>> env["versions"]["numpy"] is not None
    True
    """
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "versions": versions,
        "thread_pools": thread_pools(),
    }


def cpu_model() -> str | None:
    """The processor's model name (``/proc/cpuinfo`` on Linux; ``None`` where it cannot be read): ratios
    against peers differ between machines of one platform string (vector units, caches), so a record
    names the processor it was measured on."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def thread_pools() -> list[dict[str, Any]]:
    """The native thread pools loaded in this process and their sizes, as threadpoolctl reports them.

    One entry per library — each BLAS (NumPy's and SciPy's wheels bundle separate OpenBLAS
    builds) and each OpenMP runtime — with its ``user_api``, ``internal_api``, ``version`` and
    ``num_threads``; empty where threadpoolctl (the ``bench`` extra) is not installed, so every
    record says how many threads its BLAS calls had.

    Examples
    --------
    >>> all({"user_api", "num_threads"} <= set(pool) for pool in thread_pools())
    True
    """
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keys = ("user_api", "internal_api", "version", "num_threads")
    return [{k: pool.get(k) for k in keys} for pool in threadpool_info()]


def _load_blas_libraries() -> None:
    # SciPy's OpenBLAS is a library of its own, loaded with scipy.linalg: a limit set before
    # that import would not reach the BLAS jacacc.linalg calls.
    import scipy.linalg  # noqa: F401


def limit_blas_threads(threads: int) -> list[dict[str, Any]]:
    """Set every BLAS library of the process (NumPy's and SciPy's) to ``threads`` threads, for good.

    Done through threadpoolctl (the ``bench`` extra), which calls each library's own runtime
    setter.  ``threads <= 0`` leaves the libraries' defaults.  Returns :func:`thread_pools`.

    Examples
    --------
    >>> pools = limit_blas_threads(0)  # defaults kept; reports what is loaded
    >>> isinstance(pools, list)
    True
    """
    threadpoolctl = require_extra("threadpoolctl", "bench")
    _load_blas_libraries()
    if threads > 0:
        threadpoolctl.threadpool_limits(limits=threads, user_api="blas")
    return thread_pools()


def limit_numba_threads(threads: int) -> int | None:
    """Run Numba's parallel loops (jacacc's fused kernels, the numba backend's kernels) launched
    from the calling thread on at most ``threads`` threads; ``threads <= 0`` leaves Numba's default,
    every core.  Returns the count now in force, or None without Numba.  A benchmark that gives its
    peers one thread gives jacacc's kernels one too: left alone, matrix factorization's gradient at
    n = 1024 ran on both cores of the project's machine (0.67 against 1.8 ms on one).

    Examples
    --------
    >>> limit_numba_threads(0) is None or limit_numba_threads(0) >= 1
    True
    """
    try:
        import numba
    except ImportError:
        return None
    if threads > 0:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    return numba.get_num_threads()


@contextlib.contextmanager
def blas_threads(threads: int) -> Iterator[list[dict[str, Any]]]:
    """Every BLAS library of the process on ``threads`` threads while the block runs.

    Yields :func:`thread_pools` as set inside the block; the previous counts come back after it.

    Examples
    --------
    >>> with blas_threads(1) as pools:
    ...     all(p["num_threads"] == 1 for p in pools if p["user_api"] == "blas")
    True
    """
    threadpoolctl = require_extra("threadpoolctl", "bench")
    _load_blas_libraries()
    with threadpoolctl.threadpool_limits(limits=threads, user_api="blas"):
        yield thread_pools()


def write_record(
    path: str | os.PathLike,
    experiment: str,
    results: Any,
    *,
    parameters: dict[str, Any] | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """Write an experiment record as JSON (creating the directory) and return it."""
    record = {
        "experiment": experiment,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "seed": seed,
        "environment": environment(),
        "parameters": parameters or {},
        "results": results,
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=1)
        fh.write("\n")
    return record


def read_record(path: str | os.PathLike) -> dict[str, Any]:
    """Read a record written by :func:`write_record`."""
    with open(path, encoding="utf-8") as fh:
        record = json.load(fh)
    missing = {"experiment", "environment", "results"} - set(record)
    if missing:
        raise ValueError(f"{path} is not a jacacc record: missing {sorted(missing)}")
    return record


def sibling_script(directory: str | os.PathLike, name: str, prefix: str) -> Any:
    """The script ``directory/<name>.py`` loaded once as the module ``<prefix>_<name>`` (an
    experiment reusing another's helpers), or None where the file does not exist.

    Examples
    --------
    >>> sibling_script(".", "no_such_script", "doc") is None
    True
    """
    import importlib.util
    import sys

    key = f"{prefix}_{name}"
    if key in sys.modules:
        return sys.modules[key]
    path = os.path.join(directory, f"{name}.py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location(key, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none): what a record
    notes of the machine's other work before and after its measurements."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def fresh_child(code: str, argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None,
                path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Run ``python -c code *argv`` as a newcomer would: a fresh process with a new, empty
    ``JACACC_CACHE_DIR`` and JAX's persistent compilation cache off (``env`` added on top; ``path``
    put on ``PYTHONPATH``).  The child prints one JSON object as its last line of output.

    Returns ``{"status": "ok", **that object}``, or ``{"status": "timed_out"}``, ``"killed"`` (signal 9:
    on these machines the out-of-memory killer) or ``"error"`` with the last line of its error output.

    Examples
    --------
    >>> fresh_child("import json, os; print(json.dumps({'empty': os.listdir(os.environ['JACACC_CACHE_DIR'])}))", [], 60)
    {'status': 'ok', 'empty': []}
    """
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="jacacc-fresh-") as cache:
        child_env = {**os.environ, "JACACC_CACHE_DIR": cache, "JAX_ENABLE_COMPILATION_CACHE": "false"}
        for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
            child_env.pop(name, None)
        if path is not None:
            child_env["PYTHONPATH"] = str(path)
        child_env.update(env or {})
        began = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-c", code, *argv], env=child_env, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"status": "timed_out", "timeout_s": timeout}
    if done.returncode in (-9, 137):
        return {"status": "killed", "error": f"killed by signal 9 (out of memory) after {time.perf_counter() - began:.0f} s"}
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return {"status": "error", "error": lines[-1] if lines else f"exit status {done.returncode}"}
    return {"status": "ok", **json.loads(done.stdout.strip().splitlines()[-1])}


def time_call(fn: Callable[[], Any], *, repeat: int = 3, min_time: float = 0.0) -> float:
    """Best wall-clock seconds of ``repeat`` calls of ``fn()`` (each call repeated
    until it has run ``min_time`` seconds, then averaged)."""
    best = float("inf")
    for _ in range(repeat):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best


# =========================================================================== peers
# How the peers spell each rule of jacacc.rules; operators where both libraries
# accept Python floats on either side, functions otherwise.
_OPERATORS: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "neg": lambda a: -a,
    "pos": lambda a: a,
}


def _namespace_function(lib: Any, spelled: str) -> Callable[..., Any]:
    """``lib.a.b`` for ``spelled = "a.b"``."""
    obj = lib
    for part in spelled.split("."):
        obj = getattr(obj, part)
    return obj


def _peer_ops(library: str) -> tuple[Any, dict[str, Callable[..., Any]], Callable[..., Any], Callable[..., Any]]:
    """(module, rule -> callable, as_constant(c, like), stack(list)) for ``library``: each operation
    as the operation table (:mod:`jacacc.ops`) spells it for JAX (``jnp``) or PyTorch (``torch``)."""
    from jacacc import ops as table

    ops: dict[str, Callable[..., Any]] = dict(_OPERATORS)
    if library == "jax":
        jax = require_extra("jax", "bench")
        jnp = require_extra("jax.numpy", "bench")
        require_extra("jax.scipy.special", "bench")  # erf, erfc
        for op in table.iterate():
            if op.name not in ops and op.jnp:
                root, _, rest = op.jnp.partition(".")
                ops[op.name] = _namespace_function(jnp if root == "jnp" else jax, rest)
        return jnp, ops, lambda c, like: jnp.asarray(c, dtype=like.dtype), jnp.stack
    if library == "torch":
        torch = require_extra("torch", "bench")
        for op in table.iterate():
            if op.name not in ops and op.torch:
                ops[op.name] = _namespace_function(torch, op.torch.partition(".")[2])
        # torch has no cbrt: the real cube root through |x|^(1/3)
        ops.setdefault("cbrt", lambda a: torch.sign(a) * torch.abs(a) ** (1.0 / 3.0))
        return torch, ops, lambda c, like: torch.tensor(c, dtype=like.dtype), torch.stack
    raise RegistryError(f"unknown peer library {library!r}; valid: jax, torch")


def peer_function(traced: Any, library: str) -> Callable[[Any], Any]:
    """The traced function rebuilt with ``library`` (``"jax"`` or ``"torch"``): ``f(x) -> y``
    for one point ``x`` of shape ``(n,)``, ``y`` of shape ``(m,)``.

    The graph's primal program (node attributes ``op``/``args``, in topological
    order) is replayed with the library's elementary functions, so the peer
    computes exactly the operations the jacacc kernel computes.

    Examples
    --------
    >>> import jacacc, torch
    >>> f = jacacc.trace(lambda x: [x[0] * np.sin(x[1])], 2)
    >>> g = peer_function(f, "torch")
    >>> g(torch.tensor([2.0, 0.0], dtype=torch.float64))
    tensor([0.], dtype=torch.float64)
    """
    graph = getattr(traced, "graph", traced)
    _, ops, as_constant, stack = _peer_ops(library)
    nodes = graph.digraph.nodes
    program = []
    for node in graph.topological_order:
        op = nodes[node].get("op")
        if op is None:
            raise RegistryError(f"vertex {node!r} has no primal operation: peers need a traced function")
        if op in ("input",):
            continue
        if op not in ("copy", "const") and op not in ops:
            raise RegistryError(f"operation {op!r} has no {library} spelling")
        program.append((node, op, tuple(nodes[node].get("args", ()))))
    inputs = list(graph.inputs)
    outputs = list(graph.outputs)
    binary_functions = {"arctan2", "hypot", "maximum", "minimum", "fmax", "fmin"}

    def f(x: Any) -> Any:
        values: dict[Any, Any] = {node: x[k] for k, node in enumerate(inputs)}
        for node, op, args in program:
            if op == "copy":
                values[node] = values[args[0]]
            elif op == "const":
                values[node] = as_constant(float(args[0]), x)
            else:
                operands = [values[a] if not isinstance(a, float) else a for a in args]
                if op in binary_functions:
                    operands = [as_constant(a, x) if isinstance(a, float) else a for a in operands]
                values[node] = ops[op](*operands)
        return stack([values[o] for o in outputs])

    return f


def _jax_peer(mode: str) -> Callable[[Any, str], Callable[[np.ndarray], Any]]:
    def make(traced: Any, dtype: str) -> Callable[[np.ndarray], Any]:
        jax = require_extra("jax", "bench")
        if dtype == "float64":
            jax.config.update("jax_enable_x64", True)  # a process-wide switch; needed for float64
        f = peer_function(traced, "jax")
        jac = jax.jacfwd(f) if mode == "fwd" else jax.jacrev(f)
        compiled = jax.jit(jax.vmap(jac))

        def run(X: np.ndarray) -> Any:
            return np.asarray(compiled(jax.numpy.asarray(X)).block_until_ready())

        return run

    return make


def _torch_peer(mode: str) -> Callable[[Any, str], Callable[[np.ndarray], Any]]:
    def make(traced: Any, dtype: str) -> Callable[[np.ndarray], Any]:
        torch = require_extra("torch", "bench")
        f = peer_function(traced, "torch")
        jac = torch.func.jacfwd(f) if mode == "fwd" else torch.func.jacrev(f)
        batched = torch.func.vmap(jac)

        def run(X: np.ndarray) -> Any:
            with torch.no_grad():
                return batched(torch.from_numpy(np.ascontiguousarray(X))).numpy()

        return run

    return make


#: benchmark peers: name -> factory(traced, dtype) -> run(X (N, n)) -> Jacobians (N, m, n)
_PEERS: dict[str, tuple[Callable[[Any, str], Callable[[np.ndarray], Any]], str]] = {}


def register_peer(name: str, factory: Callable[[Any, str], Callable[[np.ndarray], Any]], extra: str,
                  *, replace: bool = False) -> None:
    """Register a benchmark peer: ``factory(traced, dtype)`` returns ``run(X) -> (N, m, n)``;
    ``extra`` names the optional dependency it needs.

    Examples
    --------
    >>> register_peer("numpy-reference", lambda t, dtype: t.reference_jacobian, "core")
    >>> "numpy-reference" in peers()
    True
    >>> _ = _PEERS.pop("numpy-reference")
    """
    if name in _PEERS and not replace:
        raise RegistryError(f"peer {name!r} is already registered; pass replace=True to override")
    _PEERS[name] = (factory, extra)


def get_peer(name: str) -> Callable[[Any, str], Callable[[np.ndarray], Any]]:
    """The factory of peer ``name``; an unknown name is answered with the valid ones."""
    if name not in _PEERS:
        raise RegistryError(f"unknown peer {name!r}; valid peers: {', '.join(peers())}")
    return _PEERS[name][0]


def peers() -> list[str]:
    """Registered peer names."""
    return list(_PEERS)


register_peer("jax-jacfwd", _jax_peer("fwd"), "bench")
register_peer("jax-jacrev", _jax_peer("rev"), "bench")
register_peer("torch-jacfwd", _torch_peer("fwd"), "bench")
register_peer("torch-jacrev", _torch_peer("rev"), "bench")


# =========================================================================== roofline
_PEAKS: dict[str, dict[str, float]] = {}


def machine_peaks(*, quick: bool = False) -> dict[str, float]:
    """This machine's measured peaks (cached per process).

    Each peak is the *fastest* way this machine was measured to do that kind of
    work, so that :func:`roofline_seconds` is a lower bound on the time of any
    kernel, whichever backend and code path it takes:

    * ``flops``: float64 operations per second of a BLAS matrix product
      (``2·n³`` flops on all cores, vectorized fused multiply-adds: the
      arithmetic ceiling; a kernel's ``+``/``*`` each count one);
    * ``calls``: elementary-function calls per second, the larger of
      ``libm_calls`` (libm's ``exp``, ``log``, ``sin``: the fastest of the
      three) and ``vector_calls`` (the inlined ``_exp``, ``_log`` helpers that
      the numba backend generates: the faster of the two), each measured with
      8 independent calls per point in the kernels' own loop shape — blocks of
      points in a Numba ``prange`` on all cores, the inner loop vectorized by
      LLVM.  A call is counted as one whatever its function, so the fastest
      function sets the peak.  Without Numba both are estimated as
      ``flops / 20``;
    * ``bandwidth``: bytes per second of a large array copy (read + write),
      the larger of NumPy's (one core) and a Numba ``prange`` copy (all cores).

    Parameters
    ----------
    quick : bool
        Small problem sizes (for tests; less accurate).

    Returns
    -------
    dict
        ``flops``, ``calls``, ``libm_calls``, ``vector_calls``, ``bandwidth``.
    """
    key = "quick" if quick else "full"
    if key in _PEAKS:
        return dict(_PEAKS[key])
    n = 256 if quick else 2048
    a = np.random.default_rng(0).standard_normal((n, n))
    seconds = time_call(lambda: a @ a, repeat=3)
    flops = 2.0 * n**3 / seconds
    size = (1 << 20) if quick else (1 << 26)  # 8 MiB or 512 MiB of float64
    src = np.ones(size // 8)
    dst = np.empty_like(src)
    seconds = time_call(lambda: np.copyto(dst, src), repeat=3)
    bandwidth = 2.0 * src.nbytes / seconds
    peaks = {"flops": flops, "libm_calls": flops / 20.0, "vector_calls": flops / 20.0}
    try:
        peaks["libm_calls"] = _call_rate(quick, vector=False)
        peaks["vector_calls"] = _call_rate(quick, vector=True)
        bandwidth = max(bandwidth, _parallel_copy_bandwidth(src, dst))
    except ImportError:
        pass
    peaks["calls"] = max(peaks["libm_calls"], peaks["vector_calls"])
    peaks["bandwidth"] = bandwidth
    _PEAKS[key] = peaks
    return dict(peaks)


#: points per block in the peak measurements: the numba kernels' own block size
_PEAK_BLOCK = 256


def _blocked_loop(name: str, arguments: str, body: str) -> str:
    """Source of ``name(arguments)`` looping over blocks of points in a prange, as
    the numba kernels do (the inner loop is what LLVM vectorizes)."""
    return (
        f"def {name}({arguments}):\n"
        "    n = x.shape[0]\n"
        f"    for b in prange((n + {_PEAK_BLOCK - 1}) // {_PEAK_BLOCK}):\n"
        f"        for i in range(b * {_PEAK_BLOCK}, min(n, (b + 1) * {_PEAK_BLOCK})):\n"
        f"            {body}\n"
    )


def _compile_numba(source: str, name: str, preamble: list[str] | None = None) -> Any:
    numba = require_extra("numba", "cpu")
    namespace: dict[str, Any] = {"math": math, "np": np, "prange": numba.prange, "njit": numba.njit}
    exec("\n".join([*(preamble or []), "", source]), namespace)  # noqa: S102
    return numba.njit(parallel=True, error_model="numpy")(namespace[name])


#: independent calls per point in the call-rate measurements: enough for the
#: out-of-order core and the vectorizer to overlap them, as in real kernels
_CALLS_PER_POINT = 8


def _call_rate(quick: bool, *, vector: bool) -> float:
    """Elementary-function calls per second on all cores, the fastest of a few
    functions: libm's ``exp``, ``log``, ``sin`` (``vector=False``) or the numba
    backend's generated vectorizable ``_exp``, ``_log`` helpers (``vector=True``),
    ``_CALLS_PER_POINT`` independent calls per point."""
    from jacacc.kernels import VECTOR_MATH, vector_math_source

    preamble = vector_math_source(VECTOR_MATH, False) if vector else []
    functions = ("_exp", "_log") if vector else ("math.exp", "math.log", "math.sin")
    x = np.random.default_rng(0).uniform(0.0, 1.0, 1 << (16 if quick else 20))
    out = np.empty_like(x)
    rates = []
    for fn in functions:
        terms = " + ".join(f"{fn}(v + {j / 64!r})" for j in range(_CALLS_PER_POINT))
        kernel = _compile_numba(_blocked_loop("calls", "x, out", f"v = x[i]; out[i] = {terms}"), "calls", preamble)
        kernel(x, out)
        rates.append(_CALLS_PER_POINT * x.size / time_call(lambda k=kernel: k(x, out), repeat=3))
    return max(rates)


def _parallel_copy_bandwidth(src: np.ndarray, dst: np.ndarray) -> float:
    """Bytes per second (read + write) of a copy on all cores."""
    kernel = _compile_numba(_blocked_loop("copy", "x, out", "out[i] = x[i]"), "copy")
    kernel(src, dst)
    seconds = time_call(lambda: kernel(src, dst), repeat=3)
    return 2.0 * src.nbytes / seconds


def roofline_seconds(counts: dict[str, int], n_points: int, peaks: dict[str, float]) -> float:
    """The least time a kernel's work can take at the machine's peaks, for
    ``n_points`` points: the largest of its flop time (``flops / peak flops``),
    its call time (``calls / peak call rate``) and its memory time
    (``bytes / bandwidth``).

    Each of the three is a lower bound on its own; their maximum is the
    roofline.  Their sum is not a bound: an out-of-order core runs a kernel's
    arithmetic alongside the polynomial chains of its ``exp`` helpers (the
    2026-11-22 benchmark measured SteadyStateCombustion's reverse kernel at
    0.91 of the summed estimate), so the sum would let a kernel beat its own
    "roofline".

    Examples
    --------
    >>> roofline_seconds({"flops": 10, "calls": 0, "bytes": 80}, 1000, {"flops": 1e9, "calls": 1e8, "bandwidth": 1e9})
    8e-05
    >>> roofline_seconds({"flops": 40, "calls": 4, "bytes": 8}, 1000, {"flops": 1e9, "calls": 5e7, "bandwidth": 1e9})
    8e-05
    """
    flops = counts["flops"] / peaks["flops"]
    calls = counts["calls"] / peaks["calls"]
    memory = counts["bytes"] / peaks["bandwidth"]
    return n_points * max(flops, calls, memory)


# =========================================================================== the benchmark
def _points(problem: Any, n: int, seed: int) -> np.ndarray:
    """``n`` valid points: the problem's sample at ``seed`` times N(1, 0.01²)
    factors, which keeps them in the sampler's domain."""
    base = problem.sample(seed)
    rng = np.random.default_rng(seed)
    return base * rng.normal(1.0, 0.01, (n, base.size))


def bench_kernels(
    problem: str | Any,
    *,
    methods: Sequence[str] = ("forward", "reverse", "markowitz"),
    backends: Sequence[str] = ("numpy", "numba"),
    peers: Sequence[str] = ("jax-jacfwd", "jax-jacrev", "torch-jacfwd", "torch-jacrev"),
    sizes: Sequence[int] = (1_000, 100_000),
    mode: str = "vertex",
    dtype: str = "float64",
    repeat: int = 3,
    seed: int = 0,
    progress: bool | None = None,
    check_points: int = 8,
    memory_limit: float = 4e9,
    peaks: dict[str, float] | None = None,
    min_time: float = 0.0,
) -> list[dict[str, Any]]:
    """Jacobians per second of every method × backend and every peer at each size.

    A backend may carry flags for its options: ``"numba+fastmath"`` is the numba
    backend with ``fastmath=True``.

    Each implementation is built once (compile time recorded separately, not
    timed; a numba kernel compiled before on the machine is loaded from Numba's
    on-disk cache instead), checked against the numpy kernel on ``check_points`` points (the
    largest absolute deviation is recorded), then timed: best of ``repeat``
    calls on all ``N`` points.  A missing optional dependency skips its rows
    (recorded with ``"skipped"``), as does the numpy backend where its
    columns would pass ``memory_limit`` bytes.

    Returns
    -------
    list of dict
        One row per (implementation, size): ``problem``, ``impl`` (``"numba/markowitz"``,
        ``"jax-jacfwd"`` ...), ``kind`` (``"kernel"``/``"peer"``), ``backend``, ``method``,
        ``N``, ``seconds``, ``jacobians_per_s``, ``build_s``, ``max_error``, and for
        kernels ``mults``, ``skipped``, ``emitted_mults``, ``flops``, ``calls``,
        ``bytes`` (per point), ``roofline_s``, ``roofline_fraction``, and
        ``seconds_reused``/``jacobians_per_s_reused``: the kernel writing into
        result buffers reused between calls (``out=``), which leaves out the
        page faults of fresh result memory that every other row pays.
    """
    from jacacc.codegen import compile as compile_kernel
    from jacacc.problems import get

    prob = get(problem) if isinstance(problem, str) else problem
    traced = prob.trace()
    sizes = [int(s) for s in sizes]
    points = {n: _points(prob, n, seed).astype(dtype) for n in sizes}
    check = _points(prob, check_points, seed + 1).astype(dtype)
    reference = compile_kernel(traced, backend="numpy", method="forward", mode=mode, dtype=dtype)(check)
    scale = max(1.0, float(np.max(np.abs(reference))))
    if peaks is None:
        peaks = machine_peaks()
    jobs: list[tuple[str, str, str | None]] = [("kernel", b, m) for b in backends for m in methods]
    jobs += [("peer", p, None) for p in peers]
    bar = progress_bar(total=len(jobs) * len(sizes), desc=prob.name, unit="run", enabled=progress)
    rows: list[dict[str, Any]] = []
    for kind, name, method in jobs:
        impl = f"{name}/{method}" if kind == "kernel" else name
        base = {"problem": prob.name, "impl": impl, "kind": kind, "backend": name if kind == "kernel" else None,
                "method": method, "dtype": dtype}
        extra: dict[str, Any] = {}
        try:
            start = time.perf_counter()
            if kind == "kernel":
                backend, *flags = name.split("+")  # "numba+fastmath": backend options given as flags
                kernel = compile_kernel(traced, backend=backend, method=method, mode=mode, dtype=dtype,
                                        backend_options={flag: True for flag in flags}).compile()
                run = kernel.jacobians
                counts = kernel.operation_counts()
                extra = {"mults": kernel.mults, "skipped": kernel.skipped, "folded": kernel.folded,
                         "emitted_mults": kernel.emitted_mults, "flops": counts["flops"],
                         "calls": counts["calls"], "bytes": counts["bytes"],
                         "statements": len(kernel.program.statements)}
                per_point_columns = len(kernel.program.statements) if name == "numpy" else 0
            else:
                run = get_peer(name)(traced, dtype)
                per_point_columns = 0
            got = np.asarray(run(check))  # also the JIT compile of the peers
            build = time.perf_counter() - start
            error = float(np.max(np.abs(got - reference))) / scale if got.size else 0.0
        except ImportError as exc:
            for n in sizes:
                rows.append({**base, "N": n, "skipped": f"missing dependency: {exc}"})
                bar.set_postfix_str(f"{impl} skipped")
                bar.update()
            continue
        for n in sizes:
            bar.set_postfix_str(f"{impl} N={n}")
            bar.update()
            row = {**base, "N": n, "build_s": build, "max_error": error, **extra}
            if per_point_columns * n * np.dtype(dtype).itemsize > memory_limit:
                rows.append({**row, "skipped": "numpy columns would exceed the memory limit"})
                continue
            X = points[n]
            run(X)  # warm-up: a JIT peer compiles once per shape
            seconds = time_call(lambda X=X, run=run: run(X), repeat=repeat, min_time=min_time)
            row.update(seconds=seconds, jacobians_per_s=n / seconds)
            if kind == "kernel":
                row["roofline_s"] = roofline_seconds(extra, n, peaks)
                row["roofline_fraction"] = row["roofline_s"] / seconds
                # the same kernel writing into buffers reused from call to call: without the
                # page faults of first touching fresh result memory (the peers allocate theirs)
                buffers = (np.empty((n, kernel.n_outputs), dtype), np.empty((n, kernel.n_outputs, kernel.n_inputs), dtype))
                reused = time_call(lambda X=X, out=buffers, k=kernel: k.values_and_jacobians(X, out=out),
                                   repeat=repeat, min_time=min_time)
                row.update(seconds_reused=reused, jacobians_per_s_reused=n / reused)
            rows.append(row)
    bar.close()
    return rows


def summarize_kernel_benchmark(rows: list[dict[str, Any]], n: int | None = None) -> list[dict[str, Any]]:
    """Per problem at size ``n`` (default: the largest): the best kernel per backend,
    the best JAX and torch peer, and the speed-up of the best numba kernel over
    the best JAX mode.

    Examples
    --------
    >>> rows = [{"problem": "p", "impl": "numba/forward", "kind": "kernel", "backend": "numba", "N": 10,
    ...          "jacobians_per_s": 100.0}, {"problem": "p", "impl": "jax-jacfwd", "kind": "peer",
    ...          "backend": None, "N": 10, "jacobians_per_s": 20.0}]
    >>> summarize_kernel_benchmark(rows)[0]["numba_over_jax"]
    5.0
    """
    timed = [r for r in rows if "jacobians_per_s" in r]
    if n is None:
        n = max((r["N"] for r in timed), default=0)
    out = []
    for problem in dict.fromkeys(r["problem"] for r in timed):
        mine = [r for r in timed if r["problem"] == problem and r["N"] == n]
        best: dict[str, dict[str, Any]] = {}
        for r in mine:
            group = r["backend"] if r["kind"] == "kernel" else r["impl"].split("-")[0]
            if group not in best or r["jacobians_per_s"] > best[group]["jacobians_per_s"]:
                best[group] = r
        summary: dict[str, Any] = {"problem": problem, "N": n}
        for group, r in best.items():
            summary[group] = {"impl": r["impl"], "jacobians_per_s": r["jacobians_per_s"]}
        if "numba" in best and "jax" in best:
            summary["numba_over_jax"] = best["numba"]["jacobians_per_s"] / best["jax"]["jacobians_per_s"]
            reused = max((r.get("jacobians_per_s_reused", 0.0) for r in mine if r["backend"] == "numba"), default=0.0)
            if reused:
                summary["numba"]["jacobians_per_s_reused"] = reused
                summary["numba_reused_over_jax"] = reused / best["jax"]["jacobians_per_s"]
        out.append(summary)
    return out


def plot_kernel_benchmark(rows: list[dict[str, Any]], path: str | os.PathLike, n: int | None = None) -> None:
    """Bar chart: Jacobians per second per problem at size ``n`` for the best kernel
    per backend and every peer (log scale); matplotlib is imported here (extra ``plot``)."""
    matplotlib = require_extra("matplotlib", "plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in rows if "jacobians_per_s" in r]
    if n is None:
        n = max((r["N"] for r in timed), default=0)
    problems = list(dict.fromkeys(r["problem"] for r in timed))
    groups: dict[str, dict[str, float]] = {}
    for r in timed:
        if r["N"] != n:
            continue
        label = f"{r['backend']} (best order)" if r["kind"] == "kernel" else r["impl"]
        cell = groups.setdefault(label, {})
        cell[r["problem"]] = max(cell.get(r["problem"], 0.0), r["jacobians_per_s"])
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(problems) + 2), 4.5))
    width = 0.8 / max(len(groups), 1)
    for k, (label, cell) in enumerate(groups.items()):
        xs = [i + k * width for i in range(len(problems))]
        ax.bar(xs, [cell.get(p, 0.0) for p in problems], width, label=label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(problems))])
    ax.set_xticklabels(problems, rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(f"Jacobians per second at N = {n}")
    ax.set_title("jacacc kernels vs JAX and PyTorch (per-point Jacobians)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
