"""Compile time against schedule length: the numba backend's straight-line and table tiers, and JAX.

Issue 40: a straight-line Numba kernel of a scheduled Jacobian costs compile time (and LLVM
memory) that grows faster than its length, so a newcomer's first Jacobian of a long program
waits minutes.  The ``table`` tier (:mod:`jacacc.kernels.tables`) runs the program as an
instruction table through an interpreter compiled once per operation set and dtype: its compile
time should not grow with the program.  This script measures both tiers, and JAX, on one family
of programs of growing length: ``L`` layers of

    z <- sin(z) * roll(z, 1) + 0.5 * tanh(roll(z, -1))          (8 inputs, 8 outputs)

written for jacacc as a scalar function (:func:`layers`, ``jacacc.trace(f, 8)``, Markowitz
vertex elimination: L = 3 gives about 500 statements, L = 27 about 1.1e4, L = 270 about 1.2e5)
and for JAX as its users would write it (:data:`JAX_FUNCTION`: ``jnp.sin``, ``jnp.roll``,
float64), differentiated by ``jax.jit(jax.vmap(jax.jacfwd(g)))`` and the same with ``jacrev``.

Every measurement runs in a fresh child process (this script with ``--child SPEC``) whose caches
are a new empty temporary directory (``JACACC_CACHE_DIR``, ``NUMBA_CACHE_DIR``; JAX's persistent
compilation cache off): the empty kernel cache of a newcomer.  A child is pinned to ``--threads``
threads (``NUMBA_NUM_THREADS``, ``OMP/MKL/OPENBLAS_NUM_THREADS``, XLA's
``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`` for one thread), gets
``--timeout`` seconds (a child past it is recorded as ``{"timed_out": true}``; the same series
is then skipped at larger L) and prints one JSON line.  A jacacc child times, in order:

* ``import_s`` (``import jacacc``), ``numba_start_s`` (``import numba`` and its target
  initialisation, as in ``first_call.py``: paid once per process, whatever is compiled);
* ``trace_s`` (``jacacc.trace``), ``plan_lower_s`` (the ``jacacc.compile`` call: Markowitz
  order, schedule, lowering, and for the table tier building the table);
* ``compile_s`` (``kernel.compile()``, wall; the kernel's own ``compile_time`` beside it): the
  straight-line module through Numba and LLVM, or the table interpreter (compiled, or loaded from
  the disk cache);
* ``first_call_s`` (``kernel(X)`` at ``--points`` points, uniform in [-1, 1]^8 from the seed
  ``[seed, L]``) and ``warm_s`` (best of ``--repeats`` further calls);
* ``peak_rss_mib`` (``getrusage``'s maximum resident set after the warm calls);
* the check: values and Jacobians at ``CHECK_POINTS`` points against the numpy backend's kernel
  of the same schedule (``tier="straight"`` up to ``REFERENCE_STRAIGHT_MAX`` statements, its
  ``table`` tier above) and the values against the function evaluated directly; the error is
  per point normwise, ``max_p max|J_p - R_p| / max|R_p|`` (the Jacobians shrink geometrically
  with L, so elementwise relative errors of the smallest entries say nothing), and a child whose
  error passes ``TOLERANCE`` (1e-10) fails: its row is ``check_failed`` and the script exits 1;
* table tier only, ``second``: the same steps for another program with the same operations
  (L + 1 layers) in the same process, once the interpreter is compiled: what every further
  program costs.

The table tier runs a second time (variant ``warm_cache``) in a child whose cache directory the
first table child filled: the interpreter is then loaded from disk.  A JAX child times
``import_s``, ``backend_start_s`` (``jax.devices()``), ``first_call_s`` (the jitted function's
first call: trace, lowering, XLA compile and one run at the same points) and ``warm_s``, and
returns the Jacobians at the check points, compared here against the jacacc table child's at the
same L (``max_rel_error_vs_jacacc``).

Writes ``results/compile_scaling.json`` (``--out``) and ``figures/compile_scaling.png``
(``--figure``: compile seconds, and JAX's first call, against statements, log-log; warm seconds
against statements), and prints a table with the ratio of jacacc's table-tier warm call to the
best JAX warm call at each L both have (issue 40 asks for L = 27 and L = 270).

    python experiments/compile_scaling.py                 # the full grid: 10-20 minutes (L = 27 straight: its 300 s timeout)
    python experiments/compile_scaling.py --layers 1 3 9 --straight-layers 1 3 --jax-layers 3
    python experiments/compile_scaling.py --quick --out /tmp/cs.json --figure /tmp/cs.png
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

# Only the standard library above: the children (this script with --child) time their own
# imports of jacacc, Numba and JAX.

EXPERIMENT = "compile_scaling"
N_INPUTS = 8
LAYERS = (1, 3, 9, 27, 90, 270)  # the table tier (cold and warm cache) at every L
STRAIGHT_LAYERS = (1, 3, 9, 27)  # L = 27 (1.1e4 statements) is expected to time out
JAX_LAYERS = (3, 27, 270)
JAX_MODES = ("jacfwd", "jacrev")
N_POINTS = 10_000
REPEATS = 5
TIMEOUT_S = 300.0
THREADS = 1
QUICK = {"layers": (1, 2), "straight_layers": (1, 2), "jax_layers": (2,), "points": 200, "repeats": 2,
         "timeout": 120.0}
TOLERANCE = 1e-10  # the checks' per-point normwise relative error
CHECK_POINTS = 4
REFERENCE_STRAIGHT_MAX = 20_000  # statements: the numpy reference's straight tier up to here, its table above
#: the errors a jacacc child checks against TOLERANCE
CHECKS = ("max_rel_error", "values_max_rel_error", "values_rel_error_vs_direct")
SENTINEL = "COMPILE_SCALING_RESULT "  # prefix of the child's result line on stdout
PROGRESS = "COMPILE_SCALING_PROGRESS "  # prefix of its progress lines (kept from a child that times out)
SCRIPT = os.path.abspath(__file__)
SERIES = ("jacacc-table", "jacacc-table-warm-cache", "jacacc-straight", "jax-jacfwd", "jax-jacrev")
JAX_FUNCTION = "z = jnp.sin(z) * jnp.roll(z, 1) + 0.5 * jnp.tanh(jnp.roll(z, -1))  # L times, float64"


# =========================================================================== the functions
def layers(L: int, n: int = N_INPUTS) -> Any:
    """``L`` layers of ``z <- sin(z) * roll(z, 1) + 0.5 * tanh(roll(z, -1))`` on ``n`` scalars,
    written for jacacc's scalar tracer (and, on arrays of points, evaluated by NumPy directly).

    Examples
    --------
    >>> import numpy as np
    >>> z = layers(1, 3)(np.array([0.0, 1.0, 2.0]))
    >>> np.allclose(z, [0.5 * np.tanh(1.0), np.sin(1.0) * 0.0 + 0.5 * np.tanh(2.0),
    ...                 np.sin(2.0) * 1.0 + 0.5 * np.tanh(0.0)])
    True
    """
    import numpy as np

    def f(x: Any) -> list[Any]:
        z = [x[i] for i in range(n)]
        for _ in range(L):
            z = [np.sin(z[i]) * z[i - 1] + 0.5 * np.tanh(z[(i + 1) % n]) for i in range(n)]
        return z

    return f


def jax_layers(L: int) -> Any:
    """The same function as its JAX users write it: one array ``z`` of 8 (:data:`JAX_FUNCTION`)."""
    import jax.numpy as jnp

    def g(x: Any) -> Any:
        z = x
        for _ in range(L):
            z = jnp.sin(z) * jnp.roll(z, 1) + 0.5 * jnp.tanh(jnp.roll(z, -1))
        return z

    return g


def points(L: int, n_points: int, seed: int) -> Any:
    """The points of layer count ``L``: uniform in [-1, 1]^8, seeded by ``[seed, L]`` (the same in the
    jacacc and the JAX children, so that their Jacobians can be compared)."""
    import numpy as np

    return np.random.default_rng([seed, L]).uniform(-1.0, 1.0, (n_points, N_INPUTS))


def normwise_error(got: Any, reference: Any) -> float:
    """``max_p max|got_p - ref_p| / max|ref_p|`` over the points ``p`` (the first axis).

    Examples
    --------
    >>> import numpy as np
    >>> normwise_error(np.array([[1.0, 1e-20]]), np.array([[1.0, 2e-20]]))
    1e-20
    """
    import numpy as np

    got, reference = np.asarray(got, dtype=float), np.asarray(reference, dtype=float)
    P = reference.shape[0]
    difference = np.abs(got - reference).reshape(P, -1).max(axis=1)
    scale = np.abs(reference).reshape(P, -1).max(axis=1)
    return float(np.max(difference / np.where(scale > 0, scale, 1.0)))


# =========================================================================== the children
def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _cache_files(directory: str | None) -> int:
    """Files under ``directory`` (0 where it does not exist)."""
    if not directory or not os.path.isdir(directory):
        return 0
    return sum(len(files) for _, _, files in os.walk(directory))


def _progress(**fields: Any) -> None:
    """A progress line: the parent keeps the last ones of a child that times out (how far it got)."""
    print(PROGRESS + json.dumps(fields), flush=True)


def _timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def _best_of(fn: Any, repeats: int) -> tuple[float, list[float]]:
    samples = [_timed(fn)[1] for _ in range(max(1, repeats))]
    return min(samples), samples


def _jacacc_program(jacacc: Any, L: int, tier: str, spec: dict[str, Any], check: bool) -> dict[str, Any]:
    """Trace, plan, compile, call and check the numba kernel of ``layers(L)`` in tier ``tier``."""
    import numpy as np

    f = layers(L)
    traced, trace_s = _timed(lambda: jacacc.trace(f, N_INPUTS))
    kernel, plan_lower_s = _timed(lambda: jacacc.compile(traced, backend="numba", method="markowitz",
                                                         backend_options={"tier": tier}))
    _progress(layers=L, phase="compiling", statements=len(kernel.program.statements), trace_s=trace_s,
              plan_lower_s=plan_lower_s)
    _, compile_s = _timed(kernel.compile)
    _progress(layers=L, phase="calling", compile_s=compile_s)
    X = points(L, spec["n_points"], spec["seed"])
    _, first_call_s = _timed(lambda: kernel(X))
    warm_s, warm_samples = _best_of(lambda: kernel(X), spec["repeats"])
    out: dict[str, Any] = {
        "layers": L, "statements": len(kernel.program.statements), "kernel_tier": kernel.tier,
        "mults": kernel.mults, "trace_s": trace_s, "plan_lower_s": plan_lower_s, "compile_s": compile_s,
        "kernel_compile_time_s": kernel.compile_time, "first_call_s": first_call_s, "warm_s": warm_s,
        "warm_samples_s": warm_samples,
        "time_to_first_jacobian_s": trace_s + plan_lower_s + compile_s + first_call_s,
        "points_seed": [spec["seed"], L], "peak_rss_mib": _peak_rss_mib(),
    }
    if kernel.tier == "table":
        table = kernel.program.table()
        out.update(instructions=table.n_instructions, runs=len(table.runs), registers=table.n_registers)
    if kernel.tier != tier:
        raise RuntimeError(f"asked for the {tier} tier, got a {kernel.tier} kernel")
    if check:
        Xc = X[:spec["check_points"]]
        V, J = kernel.values_and_jacobians(Xc)
        reference_tier = "straight" if out["statements"] <= REFERENCE_STRAIGHT_MAX else "table"
        reference = jacacc.compile(traced, backend="numpy", method="markowitz",
                                   backend_options={"tier": reference_tier})
        Vr, Jr = reference.values_and_jacobians(Xc)
        direct = np.stack([np.asarray(v, dtype=float) for v in f(Xc.T)], axis=1)  # the function itself
        out.update(reference=f"numpy/{reference_tier}", check_points=len(Xc),
                   max_rel_error=normwise_error(J, Jr), values_max_rel_error=normwise_error(V, Vr),
                   values_rel_error_vs_direct=normwise_error(V, direct),
                   check_jacobians=J.tolist())
    return out


def _jacacc_child(spec: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"library": "jacacc", "tier": spec["tier"], "variant": spec["variant"]}
    cache = os.environ.get("JACACC_CACHE_DIR")
    result["cache_files_before"] = _cache_files(cache)
    start = time.perf_counter()
    import jacacc

    result["import_s"] = time.perf_counter() - start
    start = time.perf_counter()
    import numba
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()  # Numba's start-up, paid once per process (first_call.py)
    cpu_target.typing_context.refresh()
    result["numba_start_s"] = time.perf_counter() - start
    from jacacc.bench import limit_numba_threads

    result["numba_threads"] = limit_numba_threads(spec["threads"])
    result.update(_jacacc_program(jacacc, spec["layers"], spec["tier"], spec, check=True))
    if spec.get("second_layers"):
        second = _jacacc_program(jacacc, spec["second_layers"], spec["tier"], spec, check=True)
        second.pop("check_jacobians", None)
        second.pop("warm_samples_s", None)
        result["second"] = second
    result["peak_rss_mib_end"] = _peak_rss_mib()
    result["cache_files_after"] = _cache_files(cache)
    result["numba_version"] = numba.__version__
    return result


def _jax_child(spec: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    start = time.perf_counter()
    import jax

    result: dict[str, Any] = {"library": "jax", "mode": spec["mode"], "variant": "cold", "layers": spec["layers"]}
    result["import_s"] = time.perf_counter() - start
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)  # a newcomer's empty cache: compile every time
    devices, result["backend_start_s"] = _timed(jax.devices)
    result["devices"] = [str(d) for d in devices]
    L = spec["layers"]
    X = points(L, spec["n_points"], spec["seed"])
    g = jax_layers(L)
    derivative = jax.jacfwd(g) if spec["mode"] == "jacfwd" else jax.jacrev(g)
    jitted = jax.jit(jax.vmap(derivative))

    def call(x: Any = X) -> Any:
        return np.asarray(jitted(x).block_until_ready())

    J, result["first_call_s"] = _timed(call)
    result["warm_s"], result["warm_samples_s"] = _best_of(call, spec["repeats"])
    result["peak_rss_mib"] = _peak_rss_mib()
    result["points_seed"] = [spec["seed"], L]
    result["dtype"] = str(J.dtype)
    result["check_jacobians"] = J[:spec["check_points"]].tolist()
    result["jaxpr_equations"] = len(jax.make_jaxpr(jax.vmap(derivative))(X[:2]).jaxpr.eqns)
    result["peak_rss_mib_end"] = _peak_rss_mib()
    return result


def child_main(spec: dict[str, Any]) -> int:
    """Run one measurement (``spec``: see :func:`child_spec`), print its JSON line; exit 1 where a
    check fails (the line printed first, so the measurement is kept)."""
    result = _jacacc_child(spec) if spec["library"] == "jacacc" else _jax_child(spec)
    checked = [result, *([result["second"]] if result.get("second") else [])]
    errors = [part[key] for part in checked for key in CHECKS if part.get(key) is not None]
    failed = [e for e in errors if not e <= spec["tolerance"]]  # NaN fails too
    result["check_failed"] = bool(failed)
    print(SENTINEL + json.dumps(result), flush=True)
    if failed:
        print(f"compile_scaling: check failed: relative error {max(failed, key=abs)} > {spec['tolerance']}",
              file=sys.stderr)
        return 1
    return 0


# =========================================================================== the parent
def xla_flags(threads: int) -> list[str]:
    """XLA's CPU thread flags for ``threads`` threads."""
    flags = [f"intra_op_parallelism_threads={threads}"]
    return (["--xla_cpu_multi_thread_eigen=false"] if threads == 1 else []) + flags


def child_environment(cache_dir: str, threads: int) -> dict[str, str]:
    """The parent's environment with the caches in ``cache_dir`` (empty when new) and ``threads``
    threads for Numba, the BLAS, OpenMP and XLA."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as first_call.py: the installation's bytecode is reused
    for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
        env.pop(name, None)  # the tests' persistent XLA cache would make JAX's first call warm
    env["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    env["JAX_PLATFORMS"] = "cpu"
    env["JACACC_CACHE_DIR"] = cache_dir
    env["NUMBA_CACHE_DIR"] = os.path.join(cache_dir, "numba")
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = str(threads)
    kept = [flag for flag in env.get("XLA_FLAGS", "").split()
            if not flag.lstrip("-").startswith(("xla_cpu_multi_thread_eigen", "intra_op_parallelism_threads"))]
    env["XLA_FLAGS"] = " ".join([*kept, *xla_flags(threads)])
    return env


def run_child(spec: dict[str, Any], cache_dir: str, threads: int, timeout: float) -> dict[str, Any]:
    """One fresh child: its result, ``{"timed_out": True}``, or its error; with its wall time."""
    env = child_environment(cache_dir, threads)
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, SCRIPT, "--child", json.dumps(spec)], env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        row = {"status": "timed_out", "timed_out": True, "timeout_s": timeout,
               "child_wall_s": time.perf_counter() - start}
        stdout = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        progress: dict[str, Any] = {}
        for line in stdout.splitlines():
            if line.startswith(PROGRESS):
                update = json.loads(line[len(PROGRESS):])
                if update.get("layers") != spec["layers"]:
                    break  # the table child's second program: the first one's measurements are complete
                progress.update(update)
        if progress:
            row["progress"] = progress  # e.g. {"phase": "compiling", "statements": ..., "plan_lower_s": ...}
            row.update({k: progress[k] for k in ("statements", "trace_s", "plan_lower_s") if k in progress})
        return row
    wall = time.perf_counter() - start
    lines = [line[len(SENTINEL):] for line in done.stdout.splitlines() if line.startswith(SENTINEL)]
    if not lines:
        return {"status": "error", "timed_out": False, "child_wall_s": wall,
                "error": f"exit status {done.returncode}: {done.stderr.strip()[-3000:]}"}
    result = json.loads(lines[-1])
    result["child_wall_s"] = wall
    result["timed_out"] = False
    if result.pop("check_failed", False) or done.returncode != 0:
        result["status"] = "check_failed"
        result["error"] = done.stderr.strip()[-3000:]
    else:
        result["status"] = "ok"
    return result


def child_spec(series: str, L: int, args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"layers": L, "n_points": args.points, "seed": args.seed, "repeats": args.repeats,
                            "check_points": CHECK_POINTS, "threads": args.threads, "tolerance": TOLERANCE}
    if series.startswith("jax-"):
        return {**spec, "library": "jax", "mode": series[4:]}
    tier = "straight" if series == "jacacc-straight" else "table"
    variant = "warm_cache" if series == "jacacc-table-warm-cache" else "cold"
    second = L + 1 if series == "jacacc-table" else None  # the warm-cache child skips it
    return {**spec, "library": "jacacc", "tier": tier, "variant": variant, "second_layers": second}


def plan_runs(args: argparse.Namespace) -> list[tuple[int, str]]:
    """(L, series) in the order they run: by L, and per L the cold table child first (whose cache
    the warm-cache child reuses), then the straight-line tier and JAX."""
    runs = []
    for L in sorted({*args.layers, *args.straight_layers, *args.jax_layers}):
        if L in args.layers and "table" in args.tiers:
            runs.append((L, "jacacc-table"))
            if not args.no_warm_cache:
                runs.append((L, "jacacc-table-warm-cache"))
        if L in args.straight_layers and "straight" in args.tiers:
            runs.append((L, "jacacc-straight"))
        if L in args.jax_layers and args.jax:
            runs += [(L, f"jax-{mode}") for mode in JAX_MODES]
    return runs


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every child of the grid, in :func:`plan_runs`' order; a series that timed out (or failed) at
    some L is skipped at the larger ones."""
    rows: list[dict[str, Any]] = []
    stopped: dict[str, str] = {}
    caches: dict[int, str] = {}  # L -> the cache directory the cold table child filled
    root = args.cache_root
    if root:
        os.makedirs(root, exist_ok=True)
    try:
        for L, series in plan_runs(args):
            base = {"series": series, "layers": L}
            if series in stopped:
                rows.append({**base, "status": "skipped", "timed_out": False, "reason": stopped[series]})
                print(f"  L={L:>4} {series:<24} skipped ({stopped[series]})", flush=True)
                continue
            spec = child_spec(series, L, args)
            if series == "jacacc-table-warm-cache":
                if L not in caches:
                    rows.append({**base, "status": "skipped", "timed_out": False,
                                 "reason": "the cold table child left no cache"})
                    continue
                cache = caches.pop(L)
            else:
                cache = tempfile.mkdtemp(prefix="jacacc_compile_scaling_", dir=root)
            try:
                row = {**base, **run_child(spec, cache, args.threads, args.timeout)}
            finally:
                if series == "jacacc-table" and not args.no_warm_cache:
                    caches[L] = cache  # kept for the warm-cache child
                else:
                    shutil.rmtree(cache, ignore_errors=True)
            rows.append(row)
            if row["status"] == "timed_out":
                stopped[series] = f"timed out at L={L} after {args.timeout:g} s"
            elif row["status"] == "error":
                stopped[series] = f"failed at L={L}"
            print(f"  L={L:>4} {series:<24} {_describe(row)}", flush=True)
    finally:
        for cache in caches.values():
            shutil.rmtree(cache, ignore_errors=True)
    return rows


def _describe(row: dict[str, Any]) -> str:
    if row["status"] == "timed_out":
        return f"timed out after {row['timeout_s']:g} s"
    if row["status"] == "error":
        return "error: " + row["error"].splitlines()[-1] if row["error"] else "error"
    if row.get("library") == "jax":
        return f"first call {_s(row['first_call_s'])}, warm {_s(row['warm_s'])}"
    return (f"{row['statements']} statements, compile {_s(row['compile_s'])}, "
            f"first call {_s(row['first_call_s'])}, warm {_s(row['warm_s'])}, "
            f"error {row['max_rel_error']:.1e}" + (" CHECK FAILED" if row["status"] == "check_failed" else ""))


# =========================================================================== results
def cross_check(rows: list[dict[str, Any]]) -> None:
    """JAX's Jacobians at the check points against the jacacc table child's of the same L
    (``max_rel_error_vs_jacacc``); the Jacobians themselves are then dropped from the rows.  Rows
    without a measured statement count (JAX's, timed-out ones) get the count of a jacacc row of
    the same L."""
    import numpy as np

    jacacc_rows = {r["layers"]: r for r in rows if r.get("library") == "jacacc" and "check_jacobians" in r
                   and r["series"] == "jacacc-table"}
    statements = {r["layers"]: r["statements"] for r in rows if "statements" in r}
    for r in rows:
        if r.get("library") == "jax" and "check_jacobians" in r and r["layers"] in jacacc_rows:
            theirs = np.asarray(jacacc_rows[r["layers"]]["check_jacobians"])
            r["max_rel_error_vs_jacacc"] = error = normwise_error(np.asarray(r["check_jacobians"]), theirs)
            if not error <= TOLERANCE:  # not the same function: the comparison would mean nothing
                r["status"] = "check_failed"
                r["error"] = f"JAX's Jacobians differ from jacacc's by {error:.2e} (normwise)"
        if "statements" not in r and r["layers"] in statements:
            r["statements"] = statements[r["layers"]]
            r["statements_from"] = "a jacacc row of the same L"
    for r in rows:
        r.pop("check_jacobians", None)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Ratios of the table tier's warm call to the best JAX warm call per L, the interpreter's
    compile (the table tier's cold compile at the smallest L) and the straight tier's timeouts."""
    ok = [r for r in rows if r["status"] == "ok"]
    by = {(r["series"], r["layers"]): r for r in ok}
    ratios = []
    for L in sorted({r["layers"] for r in ok}):
        table = by.get(("jacacc-table", L))
        peers = [by[(f"jax-{m}", L)] for m in JAX_MODES if (f"jax-{m}", L) in by]
        if table is None or not peers:
            continue
        best = min(peers, key=lambda r: r["warm_s"])
        ratios.append({"layers": L, "statements": table["statements"], "table_warm_s": table["warm_s"],
                       "best_jax": best["series"], "best_jax_warm_s": best["warm_s"],
                       "table_over_best_jax_warm": table["warm_s"] / best["warm_s"],
                       "table_time_to_first_jacobian_s": table["time_to_first_jacobian_s"],
                       "best_jax_first_call_s": min(p["first_call_s"] for p in peers)})
    tables = sorted((r for r in ok if r["series"] == "jacacc-table"), key=lambda r: r["layers"])
    return {
        "ratios": ratios,
        "interpreter_compile_s": tables[0]["compile_s"] if tables else None,
        "table_second_program_compile_s": {r["layers"] + 1: r["second"]["compile_s"] for r in tables
                                           if r.get("second")},
        "warm_cache_compile_s": {r["layers"]: r["compile_s"] for r in ok if r["series"] == "jacacc-table-warm-cache"},
        "straight_timed_out_at": sorted(r["layers"] for r in rows
                                        if r["series"] == "jacacc-straight" and r["status"] == "timed_out"),
        "max_rel_error": max((r["max_rel_error"] for r in ok if "max_rel_error" in r), default=None),
        "failures": [{"series": r["series"], "layers": r["layers"], "status": r["status"]} for r in rows
                     if r["status"] in ("error", "check_failed")],
    }


def _s(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3g} s" if value >= 1e-3 else f"{value * 1e3:.3g} ms"


def table_text(record: dict[str, Any]) -> str:
    """The rows as a Markdown table, then the ratios."""
    results = record["results"]
    lines = ["| series | L | statements | status | trace | plan+lower | compile | first call | warm | "
             "2nd program compile | peak RSS | error |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        second = r.get("second") or {}
        rss = f"{r['peak_rss_mib']:.0f} MiB" if "peak_rss_mib" in r else "–"
        error = r.get("max_rel_error", r.get("max_rel_error_vs_jacacc"))
        lines.append(f"| {r['series']} | {r['layers']} | {r.get('statements', '–')} | {r['status']} | "
                     f"{_s(r.get('trace_s'))} | {_s(r.get('plan_lower_s'))} | {_s(r.get('compile_s'))} | "
                     f"{_s(r.get('first_call_s'))} | {_s(r.get('warm_s'))} | {_s(second.get('compile_s'))} | "
                     f"{rss} | {'–' if error is None else f'{error:.1e}'} |")
    lines += ["", "| L | statements | table warm | best JAX warm | table / best JAX | "
                  "table: trace to first Jacobian | best JAX first call |", "|---|---|---|---|---|---|---|"]
    for q in results["summary"]["ratios"]:
        lines.append(f"| {q['layers']} | {q['statements']} | {_s(q['table_warm_s'])} | {_s(q['best_jax_warm_s'])} "
                     f"({q['best_jax']}) | {q['table_over_best_jax_warm']:.2f} | "
                     f"{_s(q['table_time_to_first_jacobian_s'])} | {_s(q['best_jax_first_call_s'])} |")
    return "\n".join(lines)


# =========================================================================== the figure
STYLE = {
    "jacacc-straight": {"color": "tab:red", "marker": "o", "label": "jacacc straight-line: compile"},
    "jacacc-table": {"color": "tab:blue", "marker": "s", "label": "jacacc table, empty cache: compile"},
    "jacacc-table-second": {"color": "tab:cyan", "marker": "D", "label": "jacacc table, next program: compile"},
    "jacacc-table-warm-cache": {"color": "tab:green", "marker": "v", "label": "jacacc table, warm cache: compile"},
    "jax-jacfwd": {"color": "tab:purple", "marker": "^", "label": "JAX jit(vmap(jacfwd)): first call"},
    "jax-jacrev": {"color": "tab:orange", "marker": "<", "label": "JAX jit(vmap(jacrev)): first call"},
}

WARM_LABELS = {"jacacc-straight": "jacacc straight-line", "jacacc-table": "jacacc table",
               "jax-jacfwd": "JAX jit(vmap(jacfwd))", "jax-jacrev": "JAX jit(vmap(jacrev))"}


def plot(record: dict[str, Any], path: str | os.PathLike | None = None) -> Any:
    """Left: compile seconds (JAX: first call) against statements, log-log, timed-out children as
    hollow markers at the timeout; right: warm seconds at the record's points against statements."""
    from jacacc.plot import _pyplot, _save

    plt = _pyplot()
    rows = [r for r in record["results"]["rows"] if "statements" in r]
    params = record["parameters"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))

    def line(ax: Any, key: str, pts: list[tuple[float, float]], label: str | None = None) -> None:
        pts.sort()
        if pts:
            style = STYLE[key]
            ax.plot([p[0] for p in pts], [max(p[1], 1e-6) for p in pts], marker=style["marker"],
                    color=style["color"], label=label or style["label"])

    for key in SERIES:
        mine = [r for r in rows if r["series"] == key]
        quantity = "first_call_s" if key.startswith("jax-") else "compile_s"
        line(left, key, [(r["statements"], r[quantity]) for r in mine if r["status"] == "ok"])
        timed_out = [r for r in mine if r["status"] == "timed_out"]
        if timed_out:
            left.plot([r["statements"] for r in timed_out], [r["timeout_s"] for r in timed_out],
                      marker=STYLE[key]["marker"], markerfacecolor="none", markersize=10, linestyle="none",
                      color=STYLE[key]["color"], label=f"{key}: timed out ({params['timeout_s']:g} s)")
        if key == "jacacc-table":
            line(left, "jacacc-table-second", [(r["second"]["statements"], r["second"]["compile_s"])
                                               for r in mine if r["status"] == "ok" and r.get("second")])
        if key in WARM_LABELS:
            line(right, key, [(r["statements"], r["warm_s"]) for r in mine if r["status"] == "ok"], WARM_LABELS[key])
    left.set_ylabel("seconds (jacacc: kernel.compile(); JAX: first call)")
    left.set_title("compile time against program length (empty caches)")
    right.set_ylabel(f"seconds per call at {params['points']} points (best of {params['repeats']})")
    right.set_title("warm call")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("statements of the scheduled Jacobian (Markowitz)")
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(f"{params['function']}: numba tiers against JAX, float64, {params['threads']} thread(s)",
                 fontsize=9)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return fig


# =========================================================================== main
def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="*", default=None,
                        help=f"L of the table tier's children (default {' '.join(map(str, LAYERS))})")
    parser.add_argument("--straight-layers", type=int, nargs="*", default=None,
                        help=f"L of the straight-line tier's (default {' '.join(map(str, STRAIGHT_LAYERS))})")
    parser.add_argument("--jax-layers", type=int, nargs="*", default=None,
                        help=f"L of JAX's (default {' '.join(map(str, JAX_LAYERS))})")
    parser.add_argument("--tiers", nargs="*", default=["straight", "table"], choices=["straight", "table"])
    parser.add_argument("--no-jax", dest="jax", action="store_false", help="leave JAX out")
    parser.add_argument("--no-warm-cache", action="store_true", help="leave the warm-cache table children out")
    parser.add_argument("--points", type=int, default=None, help=f"points per call (default {N_POINTS})")
    parser.add_argument("--repeats", type=int, default=None, help=f"warm calls, the best kept (default {REPEATS})")
    parser.add_argument("--timeout", type=float, default=None, help=f"seconds per child (default {TIMEOUT_S:.0f})")
    parser.add_argument("--threads", type=int, default=THREADS, help="threads of every child (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="tests: L = 1, 2 (JAX at 2), 200 points, 2 repeats, 120 s per child")
    parser.add_argument("--cache-root", default=None,
                        help="where the children's fresh cache directories are made (default the system's temp)")
    parser.add_argument("--out", default=os.path.join("results", f"{EXPERIMENT}.json"), help="the record's path")
    parser.add_argument("--figure", default=os.path.join("figures", f"{EXPERIMENT}.png"), help="the figure's path")
    parser.add_argument("--no-figure", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else {"layers": LAYERS, "straight_layers": STRAIGHT_LAYERS,
                                         "jax_layers": JAX_LAYERS, "points": N_POINTS, "repeats": REPEATS,
                                         "timeout": TIMEOUT_S}
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, list(value) if isinstance(value, tuple) else value)
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the grid in fresh children, write the record and the figure, print the table.

    Returns
    -------
    int
        0, or 1 where a child's check failed or a child failed (the record is written either way;
        a timed-out child is not a failure).
    """
    args = parse_arguments(argv)
    if args.child is not None:
        return child_main(json.loads(args.child))
    import importlib.util

    from jacacc.bench import load_average, write_record

    if args.jax and importlib.util.find_spec("jax") is None:
        print("jax is not installed: its children are left out", flush=True)
        args.jax = False
    env = child_environment("<fresh temporary directory per child>", args.threads)
    params: dict[str, Any] = {
        "function": "L layers of z <- sin(z) * roll(z, 1) + 0.5 * tanh(roll(z, -1)), 8 inputs",
        "jax_function": JAX_FUNCTION, "jax_peers": [f"jax.jit(jax.vmap(jax.{m}(g)))" for m in JAX_MODES],
        "layers": args.layers, "straight_layers": args.straight_layers,
        "jax_layers": args.jax_layers if args.jax else [], "jax_available": args.jax, "tiers": args.tiers,
        "warm_cache": not args.no_warm_cache, "method": "markowitz", "backend": "numba", "dtype": "float64",
        "backend_options": "{'tier': tier}; the others at their defaults (disk_cache True, max_statements 1500, "
                           "vector_math 'auto')",
        "points": args.points, "points_distribution": "uniform in [-1, 1]^8, seed [seed, L]",
        "repeats": args.repeats, "timeout_s": args.timeout, "threads": args.threads, "quick": args.quick,
        "tolerance": TOLERANCE, "check_points": CHECK_POINTS, "reference_straight_max": REFERENCE_STRAIGHT_MAX,
        "error_measure": "per point normwise: max_p max|J_p - R_p| / max|R_p|",
        "cache": "a new empty JACACC_CACHE_DIR and NUMBA_CACHE_DIR per child (warm_cache: the cold table "
                 "child's); JAX's persistent compilation cache off",
        "child_environment": {k: env[k] for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                  "OPENBLAS_NUM_THREADS", "XLA_FLAGS", "JAX_PLATFORMS")},
        "python": sys.executable, "load_average_before": load_average(),
    }
    print(f"{EXPERIMENT}: {len(plan_runs(args))} children, {args.timeout:.0f} s each at most, "
          f"{args.threads} thread(s)", flush=True)
    start = time.perf_counter()
    rows = measure(args)
    cross_check(rows)
    params["wall_s"] = time.perf_counter() - start
    params["load_average_after"] = load_average()
    summary = summarize(rows)
    record = write_record(args.out, EXPERIMENT, {"rows": rows, "summary": summary}, parameters=params,
                          seed=args.seed)
    if not args.no_figure:
        plot(record, args.figure)
    print()
    print(table_text(record))
    print(f"\n{len(rows)} rows in {params['wall_s']:.0f} s -> {args.out}"
          + ("" if args.no_figure else f", {args.figure}"))
    if summary["failures"]:
        print(f"FAILED: {summary['failures']}", file=sys.stderr)
        return 1
    return 0



if __name__ == "__main__":
    sys.exit(main())
