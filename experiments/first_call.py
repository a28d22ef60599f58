"""First call of a transformation in a fresh process: jacacc.tensor against JAX, caches warm.

Issue 26 sets a target for the first call of a transformation — trace, plan
and compile, then one evaluation — of under 0.2 s when the on-disk caches are
warm.  A fresh process pays two different things before its first result:

* a library's one-time start-up, paid once per process whatever it
  differentiates: importing it and, for jacacc, starting Numba — importing it
  and its target initialisation (the first load of any cached kernel makes
  Numba register its typing and lowering tables, and importing SciPy's
  ``linalg`` for its BLAS check); for JAX, importing it and starting its CPU
  backend;
* the transformation's own cost, paid by every new transformation: for
  ``jacacc.tensor.grad(f)`` / ``hessian(f)`` the trace, the plan, the load of
  the fused kernels from the disk cache (``$JACACC_CACHE_DIR``) and one
  evaluation; for ``jax.jit(jax.grad(f))`` / ``jax.jit(jax.hessian(f))`` the
  trace, the lowering, the load of the executable from JAX's persistent
  compilation cache and one evaluation.

Measuring this needs fresh processes, so every sample is a child process
(``python -c``, :data:`CHILD_CODE`) that times its phases with
``time.perf_counter`` and prints them as one JSON line.  The objectives are
``tensor_breadth.py``'s (:data:`tensor_breadth.OBJECTIVES`, each at its larger
size ``sizes[1]``, the same data for the same seed), differentiated w.r.t.
their first argument.  Phases of a child, in order:

* ``numpy_import_s``: ``import numpy`` (a peer's cost as much as jacacc's: not
  reported as either's);
* ``import_s``: ``import jacacc.tensor``, or ``import jax`` and ``jax.numpy``;
  ``configure_s`` (JAX only): float64 and the persistent cache (directory,
  no minimum compile time or entry size, so every executable is cached);
* ``setup_s``: loading ``tensor_breadth.py`` and making the objective's data;
* variant ``started`` only — the library's start-up, timed apart:
  ``numba_import_s`` + ``numba_init_s`` = ``numba_start_s`` (``import numba``,
  then ``cpu_target.target_context.refresh()``, which is what Numba's cache
  runs before its first load, and the typing context's); JAX's
  ``backend_start_s`` (``jax.devices()``: the CPU client);
* ``first_call_s``: the first call of the transformation, made concrete (JAX's
  result through ``np.asarray``).  In the variant ``cold`` it includes the
  start-up: it is what a user's first call in a process costs.
* ``second_call_s``: the same call again (the plan or executable reused).

The children also report which modules the phases imported and, for jacacc,
the fused kernels the plan ran and the seconds their first calls took
(``FusedKernel.first_call_seconds``: the loads from the disk cache), and the
cache hits and misses (jacacc: its kernels' Numba dispatchers; JAX: its
compilation-cache events), so that a cold cache shows in the record.  The
difference of the medians of the two variants' first calls checks the
start-up split: it should be about ``numba_start_s`` (``backend_start_s``).

The caches: a directory (``--cache-dir``, default a temporary one removed at
the end) holds jacacc's (``JACACC_CACHE_DIR``) and JAX's; right before the
timed children of an objective and quantity, one untimed child per library
computes it there (jacacc's with ``JACACC_COMPILE_AFTER=0``, so that its fused
kernels compile on that first call), so every timed child finds its kernels and
executables on disk, and recently read (in the OS page cache, as in a user's edit-run loop).
The children run without ``PYTHONDONTWRITEBYTECODE``: with it set, every process compiles
Numba's and SciPy's modules from source (about 1.5 s), which is a property of
the installation, not of either library.  Each child runs on one pinned CPU
(``--core``, default the last one allowed), with one BLAS thread and XLA's
single-thread flags (``tensor_breadth.XLA_FLAGS``).  ``--repeats`` children
(default 3) per objective, quantity, library and variant, taken in rounds;
each row keeps the samples, the best (minimum) and the median of every phase.
Without JAX its rows are recorded as skipped.

The summary gives, per library and quantity, the largest median first call
over the objectives per variant (jacacc's ``started`` one is the figure the
0.2 s target is about), the median start-up and import, and the median of the
cold-minus-started differences.  Writes ``results/first_call.json`` and prints
the Markdown table; no figure.

    python experiments/first_call.py                      # the recorded run, about 10 minutes on two cores
    python experiments/first_call.py --objectives ridge --n 64 --repeats 1 --out /tmp/fc
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from jacacc.bench import load_average, sibling_script, write_record
from jacacc.progress import progress_bar

EXPERIMENT = "first_call"
QUANTITIES = ("grad", "hessian")
LIBRARIES = ("jacacc", "jax")
VARIANTS = ("started", "cold")  # the library's start-up timed apart from the first call, or inside it
START_PHASE = {"jacacc": "numba_start_s", "jax": "backend_start_s"}
REPEATS = 3
TARGET_S = 0.2  # issue 26: the first call under 0.2 s with warm caches
CHILD_TIMEOUT_S = 600.0  # a warm-up child compiles every kernel of a Hessian: seconds, not minutes
HERE = os.path.dirname(os.path.abspath(__file__))
DESCRIPTIONS = {
    "jacacc": {"grad": "jacacc.tensor.grad(f)(*args)", "hessian": "jacacc.tensor.hessian(f)(*args)"},
    "jax": {"grad": "np.asarray(jax.jit(jax.grad(f))(*args))",
            "hessian": "np.asarray(jax.jit(jax.hessian(f))(*args))"},
}

# The child program: argv[1] is a JSON spec (library, variant, objective, n, seed, quantities,
# experiments directory, JAX cache directory, core).  It imports nothing before its clock starts but
# json, os, sys and time (which the interpreter has loaded anyway), pins itself to the core before
# any thread exists (every thread it starts inherits the mask; pinned from the parent instead, by a
# preexec_fn, the parent forks where JAX's threads run), and prints one JSON line last.
CHILD_CODE = r'''
import json, os, sys, time
clock = time.perf_counter
spec = json.loads(sys.argv[1])
if spec["core"] is not None:
    os.sched_setaffinity(0, {spec["core"]})
library, variant = spec["library"], spec["variant"]
phases, info = {}, {}

def timed(name, start):
    phases[name] = clock() - start

start = clock()
import numpy as np
timed("numpy_import_s", start)
start = clock()
if library == "jacacc":
    import jacacc.tensor as jt
    timed("import_s", start)
else:
    import jax
    import jax.numpy as jnp
    timed("import_s", start)
    start = clock()
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_compilation_cache_dir", spec["jax_cache_dir"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    timed("configure_s", start)
    hits = []
    jax.monitoring.register_event_listener(
        lambda event, **kw: hits.append(event) if event.startswith("/jax/compilation_cache/") else None)
info["numba_after_import"] = "numba" in sys.modules

start = clock()
sys.path.insert(0, spec["experiments"])
import tensor_breadth as tb
objective = tb.BY_NAME[spec["objective"]]
args = objective.arguments(spec["n"], np.random.default_rng(spec["seed"]))
timed("setup_s", start)

if variant == "started" and library == "jacacc":
    start = clock()
    import numba
    timed("numba_import_s", start)
    info["scipy_linalg_before_init"] = "scipy.linalg" in sys.modules
    start = clock()
    from numba.core.registry import cpu_target
    cpu_target.target_context.refresh()  # what Numba's cache runs before it loads a kernel
    cpu_target.typing_context.refresh()
    timed("numba_init_s", start)
    info["scipy_linalg_after_init"] = "scipy.linalg" in sys.modules
    phases["numba_start_s"] = phases["numba_import_s"] + phases["numba_init_s"]
elif variant == "started":
    start = clock()
    info["devices"] = [str(d) for d in jax.devices()]
    timed("backend_start_s", start)

def transformation(quantity):
    if library == "jacacc":
        f = tb.bind(objective, np)
        return (jt.grad if quantity == "grad" else jt.hessian)(f)
    f = tb.bind(objective, jnp)
    return jax.jit(jax.grad(f) if quantity == "grad" else jax.hessian(f))

results = []
for quantity in spec["quantities"]:
    start = clock()
    transformed = transformation(quantity)
    result = np.asarray(transformed(*args))
    timed("first_call_s", start)
    start = clock()
    np.asarray(transformed(*args))
    timed("second_call_s", start)
    results.append(result.shape)
    if library == "jacacc":
        kernels = [k for program in transformed.plans.values() for k in program.fused_kernels]
        info["kernels"] = len(kernels)
        info["kernel_first_calls_s"] = sum(k.first_call_seconds or 0.0 for k in kernels)
        dispatchers = {id(k._kernel): k._kernel for k in kernels if k._kernel is not None}  # regions may share one
        stats = [d.stats for d in dispatchers.values()]
        info["cache_hits"] = sum(sum(s.cache_hits.values()) for s in stats)
        info["cache_misses"] = sum(sum(s.cache_misses.values()) for s in stats)
info["numba_after_first_call"] = "numba" in sys.modules
info["scipy_linalg_after_first_call"] = "scipy.linalg" in sys.modules
if library == "jax":
    info["cache_hits"] = hits.count("/jax/compilation_cache/cache_hits")
    info["cache_misses"] = hits.count("/jax/compilation_cache/cache_misses")
info["shape"] = list(results[-1])
print(json.dumps({"phases": phases, "info": info}))
'''


# =========================================================================== children
def tensor_breadth() -> Any:
    """The sibling script ``tensor_breadth.py``: its objectives, XLA flags and source state."""
    return sibling_script(HERE, "tensor_breadth", "_first_call")


def child_environment(cache_dir: str) -> dict[str, str]:
    """The parent's environment for a child, with the caches in ``cache_dir`` and one thread each."""
    env = dict(os.environ)
    # With PYTHONDONTWRITEBYTECODE set no .pyc is ever written, so every process compiles Numba's
    # and SciPy's (and jacacc's, and JAX's) modules from source: about 1.5 s that belongs to the
    # installation, not to either library.  The children write and then reuse bytecode.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["JACACC_CACHE_DIR"] = os.path.join(cache_dir, "jacacc")
    env["JAX_COMPILATION_CACHE_DIR"] = os.path.join(cache_dir, "xla")  # the child sets it in jax.config too
    flags = env.get("XLA_FLAGS", "")
    missing = [flag for flag in tensor_breadth().XLA_FLAGS if flag.split("=")[0] not in flags]
    env["XLA_FLAGS"] = " ".join([flags, *missing]).strip()  # read when JAX starts its CPU backend
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"  # NumPy's and SciPy's BLAS: one thread, as in tensor_breadth.py
    return env


def run_child(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """One fresh child process: its phases and info, its wall time seen from here, or its error."""
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", CHILD_CODE, json.dumps(spec)], env=env, capture_output=True,
                              text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {CHILD_TIMEOUT_S:.0f} s"}
    wall = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": f"exit status {done.returncode}: {done.stderr.strip()[-2000:]}"}
    sample = json.loads(lines[-1])
    sample["child_wall_s"] = wall
    return sample


def child_spec(library: str, variant: str, objective: Any, n: int, seed: list[int], quantities: tuple[str, ...],
               cache_dir: str, core: int | None) -> dict[str, Any]:
    return {"library": library, "variant": variant, "objective": objective.name, "n": n, "seed": seed,
            "quantities": list(quantities), "experiments": HERE, "jax_cache_dir": os.path.join(cache_dir, "xla"),
            "core": core}


# =========================================================================== rows
def phase_statistics(samples: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """The best (minimum) and the median of every phase (and of the child's wall time) over the samples."""
    names = dict.fromkeys(name for s in samples for name in [*s["phases"], "child_wall_s"])
    values = {name: [s["phases"][name] if name in s["phases"] else s[name] for s in samples] for name in names}
    return ({name: min(v) for name, v in values.items()},
            {name: statistics.median(v) for name, v in values.items()})


def make_row(objective: Any, n: int, quantity: str, library: str, variant: str,
             outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """A row from the children's outcomes (samples and errors)."""
    samples = [o for o in outcomes if "error" not in o]
    errors = [o["error"] for o in outcomes if "error" in o]
    best, median = phase_statistics(samples) if samples else ({}, {})
    return {"objective": objective.name, "family": objective.family, "n": n, "quantity": quantity,
            "library": library, "variant": variant, "call": DESCRIPTIONS[library][quantity],
            "status": "ok" if samples else "error", "errors": errors, "samples": samples,
            "best": best, "median": median}


def skipped_row(objective: Any, n: int, quantity: str, library: str, variant: str, reason: str) -> dict[str, Any]:
    return {"objective": objective.name, "family": objective.family, "n": n, "quantity": quantity,
            "library": library, "variant": variant, "call": DESCRIPTIONS[library][quantity],
            "status": "skipped", "reason": reason, "errors": [], "samples": [], "best": {}, "median": {}}


def warm_up(objective: Any, n: int, seed: list[int], quantity: str, libraries: list[str], env: dict[str, str],
            core: int | None, cache_dir: str) -> list[dict[str, Any]]:
    """One untimed child per library computing ``quantity``: every kernel and executable the timed
    children need is then on disk, and in the OS page cache (see the module's docstring).  Returns
    the failures."""
    failures = []
    # a region's kernel is compiled on its first call here (JACACC_COMPILE_AFTER=0): the warm-up is there to
    # put it on disk, where a timed child's first call finds it and loads it
    env = {**env, "JACACC_COMPILE_AFTER": "0"}
    for library in libraries:
        outcome = run_child(child_spec(library, "cold", objective, n, seed, (quantity,), cache_dir, core), env)
        if "error" in outcome:
            failures.append({"objective": objective.name, "quantity": quantity, "library": library,
                             "error": outcome["error"]})
    return failures


def measure(objectives: list[Any], sizes: dict[str, int], seeds: dict[str, list[int]], libraries: list[str],
            repeats: int, env: dict[str, str], core: int | None,
            cache_dir: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows and the warm-up failures: per objective and quantity, the warm-up children, then
    ``repeats`` rounds of one child per library and variant (a slow stretch of the machine then costs
    every library and variant one sample, not one all of them)."""
    rows, failures = [], []
    cases = [(library, variant) for library in libraries for variant in VARIANTS]
    with progress_bar(total=len(objectives) * len(QUANTITIES), desc=EXPERIMENT, unit="case") as bar:
        for objective in objectives:
            n, seed = sizes[objective.name], seeds[objective.name]
            for quantity in QUANTITIES:
                failures += warm_up(objective, n, seed, quantity, libraries, env, core, cache_dir)
                outcomes: dict[tuple[str, str], list[dict[str, Any]]] = {case: [] for case in cases}
                for _ in range(repeats):
                    for library, variant in cases:
                        spec = child_spec(library, variant, objective, n, seed, (quantity,), cache_dir, core)
                        outcomes[library, variant].append(run_child(spec, env))
                rows += [make_row(objective, n, quantity, library, variant, outcomes[library, variant])
                         for library, variant in cases]
                bar.update()
    return rows, failures


# =========================================================================== summary
def _largest(rows: list[dict[str, Any]], phase: str) -> dict[str, Any] | None:
    """The row with the largest median ``phase``: its value and objective (None without rows)."""
    timed = [r for r in rows if phase in r["median"]]
    if not timed:
        return None
    worst = max(timed, key=lambda r: r["median"][phase])
    return {"seconds": worst["median"][phase], "best_seconds": worst["best"][phase], "objective": worst["objective"],
            "n": worst["n"]}


def _median_of(rows: list[dict[str, Any]], phase: str) -> float | None:
    values = [r["median"][phase] for r in rows if phase in r["median"]]
    return statistics.median(values) if values else None


def _cold_minus_started(rows: list[dict[str, Any]]) -> float | None:
    """The median over objectives of (cold first call − started first call), both row medians: the
    start-up the cold first call pays, to set against the start-up phase timed apart."""
    started = {r["objective"]: r["median"]["first_call_s"] for r in rows
               if r["variant"] == "started" and "first_call_s" in r["median"]}
    differences = [r["median"]["first_call_s"] - started[r["objective"]] for r in rows
                   if r["variant"] == "cold" and "first_call_s" in r["median"] and r["objective"] in started]
    return statistics.median(differences) if differences else None


def summarize(rows: list[dict[str, Any]], libraries: list[str]) -> dict[str, Any]:
    """Per library and quantity: the largest median first call over the objectives per variant, the
    median start-up, import and cold-minus-started difference; whether jacacc met the target."""
    summary: dict[str, Any] = {"target_s": TARGET_S}
    for library in LIBRARIES:
        summary[library] = {}
        for quantity in QUANTITIES:
            mine = [r for r in rows if r["library"] == library and r["quantity"] == quantity]
            if library not in libraries or not any(r["status"] == "ok" for r in mine):
                summary[library][quantity] = None
                continue
            by_variant = {v: [r for r in mine if r["variant"] == v] for v in VARIANTS}
            summary[library][quantity] = {
                "largest_first_call_s": {v: _largest(by_variant[v], "first_call_s") for v in VARIANTS},
                "start_phase": START_PHASE[library],
                "median_start_s": _median_of(by_variant["started"], START_PHASE[library]),
                "median_cold_minus_started_s": _cold_minus_started(mine),
                "median_import_s": _median_of(mine, "import_s"),
            }
    summary["jacacc_under_target"] = {
        q: s["largest_first_call_s"]["started"]["seconds"] < TARGET_S
        for q, s in summary["jacacc"].items() if s and s["largest_first_call_s"]["started"]}
    return summary


# =========================================================================== table
def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.0f} ms"


def readme_table(record: dict[str, Any]) -> str:
    """Per objective and quantity, the medians: jacacc's import, Numba's start and first calls after it
    and cold; JAX's import, backend start and first calls; then the summary."""
    results = record["results"]
    by_key = {(r["objective"], r["quantity"], r["library"], r["variant"]): r for r in results["rows"]}

    def cell(objective: str, quantity: str, library: str, variant: str, phase: str) -> str:
        row = by_key.get((objective, quantity, library, variant))
        return _ms(row["median"].get(phase)) if row else "–"

    lines = ["| objective | n | quantity | jacacc import | Numba start | jacacc first call | jacacc cold | "
             "JAX import | JAX backend | JAX first call | JAX cold |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for objective, n, quantity in dict.fromkeys((r["objective"], r["n"], r["quantity"]) for r in results["rows"]):
        cells = [cell(objective, quantity, "jacacc", "cold", "import_s"),
                 cell(objective, quantity, "jacacc", "started", "numba_start_s"),
                 cell(objective, quantity, "jacacc", "started", "first_call_s"),
                 cell(objective, quantity, "jacacc", "cold", "first_call_s"),
                 cell(objective, quantity, "jax", "cold", "import_s"),
                 cell(objective, quantity, "jax", "started", "backend_start_s"),
                 cell(objective, quantity, "jax", "started", "first_call_s"),
                 cell(objective, quantity, "jax", "cold", "first_call_s")]
        lines.append(f"| {objective} | {n} | {quantity} | " + " | ".join(cells) + " |")
    lines += ["", "| library | quantity | largest first call (started) | largest cold | median start | "
                  "median cold − started | median import |", "|---|---|---|---|---|---|---|"]
    for library in LIBRARIES:
        for quantity in QUANTITIES:
            s = results["summary"][library][quantity]
            if s is None:
                lines.append(f"| {library} | {quantity} | – | – | – | – | – |")
                continue
            largest = s["largest_first_call_s"]
            worst = [f"{_ms(x['seconds'])} ({x['objective']})" if x else "–" for x in (largest["started"],
                                                                                        largest["cold"])]
            lines.append(f"| {library} | {quantity} | {worst[0]} | {worst[1]} | {_ms(s['median_start_s'])} "
                         f"({s['start_phase']}) | {_ms(s['median_cold_minus_started_s'])} | "
                         f"{_ms(s['median_import_s'])} |")
    return "\n".join(lines)


# =========================================================================== main
@contextlib.contextmanager
def cache_directory(path: str | None) -> Iterator[str]:
    """``path`` (created, kept), or a temporary directory removed afterwards."""
    if path is not None:
        os.makedirs(path, exist_ok=True)
        yield os.path.abspath(path)
        return
    temporary = tempfile.mkdtemp(prefix="jacacc_first_call_")
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    names = [o.name for o in tensor_breadth().OBJECTIVES]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objectives", nargs="*", default=names, choices=names, metavar="NAME",
                        help="tensor_breadth.py's objectives to run (default all)")
    parser.add_argument("--n", type=int, default=None, help="size of every objective (default each one's larger size)")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="fresh children per row (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--core", type=int, default=None, help="CPU the children run on (default the last one allowed)")
    parser.add_argument("--cache-dir", default=None,
                        help="directory of jacacc's and JAX's on-disk caches (default a temporary one)")
    parser.add_argument("--out", default="results", help="directory for the JSON record (default %(default)s)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Warm the caches, run the children, write the record, print the table.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (see ``--help``); ``sys.argv`` when None.

    Returns
    -------
    int
        0.  A child's failure is recorded in its row, not raised.
    """
    args = parse_arguments(argv)
    tb = tensor_breadth()
    objectives = [tb.BY_NAME[name] for name in args.objectives]
    index = {o.name: i for i, o in enumerate(tb.OBJECTIVES)}
    sizes = {o.name: args.n or o.sizes[1] for o in objectives}
    seeds = {o.name: [args.seed, index[o.name], sizes[o.name]] for o in objectives}  # tensor_breadth.py's data
    jax_available = importlib.util.find_spec("jax") is not None
    libraries = [library for library in LIBRARIES if library != "jax" or jax_available]
    core = tb.core_to_pin(args.core)
    record_path = os.path.join(args.out, f"{EXPERIMENT}.json")
    params: dict[str, Any] = {
        "objectives": args.objectives, "n": sizes, "repeats": args.repeats, "quantities": list(QUANTITIES),
        "variants": {"started": "the library's start-up (numba_start_s, backend_start_s) timed before the first call",
                     "cold": "the first call of a fresh process, start-up included"},
        "calls": DESCRIPTIONS, "target_s": TARGET_S, "pinned_core": core, "python": sys.executable,
        "cache_dir": args.cache_dir or "temporary", "xla_flags": None, "jax_available": jax_available,
        "dtype": "float64", "load_average_before": load_average(), "source": tb.source_state(),
    }
    start = time.perf_counter()
    with cache_directory(args.cache_dir) as cache_dir:
        env = child_environment(cache_dir)
        params["xla_flags"] = env["XLA_FLAGS"]
        rows, params["warm_up_failures"] = measure(objectives, sizes, seeds, libraries, args.repeats, env, core,
                                                   cache_dir)
    if not jax_available:
        rows += [skipped_row(o, sizes[o.name], q, "jax", v, "jax is not installed")
                 for o in objectives for q in QUANTITIES for v in VARIANTS]
    params["wall_s"] = time.perf_counter() - start
    params["load_average_after"] = load_average()
    record = write_record(record_path, EXPERIMENT, {"rows": rows, "summary": summarize(rows, libraries)},
                          parameters=params, seed=args.seed)
    print()
    print(readme_table(record))
    print(f"\n{len(rows)} rows in {params['wall_s']:.0f} s -> {record_path}")
    return 0



if __name__ == "__main__":
    sys.exit(main())
