"""Loops of small steps: a Kalman filter's derivatives at T = 10 … 1000 steps, jacacc.tensor against jax.jit.

Issue 41 asks that planning and running a Python loop of small operations grow linearly with the
number of steps.  The objective is the outside benchmark's Kalman filter
(``experiments/outside.py``: a two-state constant-velocity model, its negative log-likelihood by
the prediction-error decomposition, ``np.linalg.solve`` and ``slogdet`` at every step), its
gradient and Hessian in the three parameters.

Every sample is a fresh child process (:func:`jacacc.bench.fresh_child`: a new empty
``JACACC_CACHE_DIR``, JAX's persistent cache off) that records

* ``first_s``: the first call — trace, plan, compile what compiles, evaluate;
* ``warm_s``: the best of the later calls, after at least eight warm-up calls and :data:`WARM_SECONDS`
  of them (``warm_up_calls``, ``warm_up_s``), and for jacacc on until its plan has reached its steady
  state (``Program.settled``: the scalar tier tried, at most :data:`SETTLE_MAX_S`; ``settled``): the
  state of a function called in a loop;
* for jacacc, ``nodes`` and ``flops``: the planned derivative expression's size (linear in T
  when the plan is), from :func:`jacacc.tensor.derivative_expression`;
* ``max_abs_error`` against JAX where both ran (float64).

``jax`` is ``jax.jit(jax.grad / jax.hessian)`` on the same function written with ``jax.numpy``.
A child past :data:`TIMEOUT_S` is recorded as timed out.  ``--keep-from RECORD`` takes the rows of the
libraries not run this time from an earlier record (each row keeps its values, so jacacc's are still
checked against JAX's): jacacc remeasured against a kept JAX run, which takes most of an hour.

    python experiments/loop_scaling.py                 # results/loop_scaling.json
    python experiments/loop_scaling.py --quick --out /tmp/loops.json
    python experiments/loop_scaling.py --libraries jacacc --keep-from results/loop_scaling.json
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from jacacc.bench import fresh_child, load_average, write_record

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "loop_scaling"
STEPS = (10, 30, 100, 300, 1000)
QUICK_STEPS = (5, 10)
DERIVATIVES = ("grad", "hessian")
LIBRARIES = ("jacacc", "jax")
TIMEOUT_S = 900
WARM_CALLS = 8
#: seconds of calls before the warm time is taken: a program switches to the scalar tier once its NumPy
#: calls have taken what writing its table costs (jacacc.tensor.scalarize), as a JIT compiles hot code
WARM_SECONDS = 10.0
#: longest warm-up of a jacacc plan that has not reached its steady state (the scalar tier of a long
#: loop's Hessian is tried after what writing its table costs: 30 s of calls at T = 1000)
SETTLE_MAX_S = 120.0

CHILD_CODE = r'''
import json, sys, time
began = time.perf_counter()
import numpy as np
sys.path.insert(0, sys.argv[4])
import outside
library, derivative, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
theta, ys = outside.kalman_args(steps, np.random.default_rng(0))
result = {}
if library == "jax":
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    data = [jnp.asarray(y) for y in ys]  # a list: JAX iterates an array of more than 100 rows by traced index
    f = lambda t: outside.kalman_filter(t, data, jnp)
    d = jax.jit(jax.grad(f) if derivative == "grad" else jax.hessian(f))
    run = lambda: np.asarray(d(theta).block_until_ready())
else:
    import jacacc.tensor as jt
    f = lambda t: outside.kalman_filter(t, ys)
    d = jt.grad(f) if derivative == "grad" else jt.hessian(f)
    run = lambda: d(theta)
imported = time.perf_counter()
start = time.perf_counter()
value = run()
result["first_s"] = time.perf_counter() - start
result["import_s"] = imported - began
warm_calls, warm_start = 0, time.perf_counter()
settled = lambda: library == "jax" or all(getattr(p, "settled", True) for p in d.plans.values())
while warm_calls < ''' + str(WARM_CALLS) + r''' or time.perf_counter() - warm_start < float(sys.argv[5]) \
        or (not settled() and time.perf_counter() - warm_start < float(sys.argv[6])):
    run()
    warm_calls += 1
result["warm_up_calls"], result["warm_up_s"] = warm_calls, time.perf_counter() - warm_start
result["settled"] = settled()
best = float("inf")
for _ in range(5):
    calls, start = 0, time.perf_counter()
    while True:
        run()
        calls += 1
        if time.perf_counter() - start > 0.05:
            break
    best = min(best, (time.perf_counter() - start) / calls)
result["warm_s"] = best
if library == "jacacc":
    expression = jt.derivative_expression(f, theta, order=1 if derivative == "grad" else 2)
    from jacacc.tensor.expr import nodes_of
    result["nodes"] = len(nodes_of([expression.expression]))
    result["flops"] = expression.flops
result["value"] = np.asarray(value).ravel().tolist()
print(json.dumps(result))
'''


def measure(library: str, derivative: str, steps: int, timeout: float, warm_seconds: float = WARM_SECONDS) -> dict[str, Any]:
    """One fresh child's measurement of ``library``'s ``derivative`` of the filter over ``steps``."""
    here = str(ROOT / "experiments")
    row = fresh_child(CHILD_CODE, [library, derivative, str(steps), here, str(warm_seconds), str(SETTLE_MAX_S)],
                      timeout, path=ROOT)
    return {"library": library, "derivative": derivative, "steps": steps, **row}


def compare(rows: list[dict[str, Any]]) -> None:
    """Add ``max_abs_error`` (against JAX) and ``warm_ratio`` (JAX's warm time / jacacc's) to jacacc's rows."""
    import numpy as np

    jax_rows = {(r["derivative"], r["steps"]): r for r in rows if r["library"] == "jax" and r["status"] == "ok"}
    for r in rows:
        peer = jax_rows.get((r["derivative"], r["steps"]))
        if r["library"] != "jacacc" or r["status"] != "ok" or peer is None:
            continue
        got, want = np.array(r["value"]), np.array(peer["value"])
        r["max_abs_error"] = float(np.max(np.abs(got - want)))
        r["relative_error"] = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))
        r["warm_ratio"] = peer["warm_s"] / r["warm_s"]
        r["first_ratio"] = peer["first_s"] / r["first_s"]


def _kept_rows(path: str, run: list[str], steps: tuple[int, ...]) -> dict[str, Any]:
    """The rows of the libraries not in ``run`` from the record at ``path`` (at the same steps), and
    where they come from (the record's date, commit and machine)."""
    from jacacc.bench import read_record

    record = read_record(path)
    rows = [r for r in record["results"] if r["library"] not in run and r["steps"] in steps]
    if any("value" not in r for r in rows if r.get("status") == "ok"):
        raise SystemExit(f"{path}: its rows hold no values to check against; rerun every library")
    environment = record.get("environment", {})
    return {"rows": rows, "provenance": {"path": path, "created": record.get("created"),
                                         "libraries": sorted({r["library"] for r in rows}),
                                         "commit": environment.get("git_commit") or environment.get("commit"),
                                         "machine": environment.get("machine") or environment.get("platform")}}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| derivative | T | jacacc first | jacacc warm | nodes | JAX first | JAX warm | warm ratio |",
             "|---|---|---|---|---|---|---|---|"]
    jax_rows = {(r["derivative"], r["steps"]): r for r in rows if r["library"] == "jax"}

    def seconds(r: dict[str, Any] | None, key: str) -> str:
        if r is None:
            return "—"
        return f"{r[key]:.3g} s" if r.get("status") == "ok" else r.get("status", "—")

    for r in rows:
        if r["library"] != "jacacc":
            continue
        peer = jax_rows.get((r["derivative"], r["steps"]))
        ratio = f"{r['warm_ratio']:.2f}×" if "warm_ratio" in r else "—"
        lines.append(f"| {r['derivative']} | {r['steps']} | {seconds(r, 'first_s')} | {seconds(r, 'warm_s')} | "
                     f"{r.get('nodes', '—')} | {seconds(peer, 'first_s')} | {seconds(peer, 'warm_s')} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"T in {QUICK_STEPS} only")
    parser.add_argument("--steps", type=int, nargs="+", help="the numbers of steps (default: %(default)s)")
    parser.add_argument("--libraries", nargs="+", choices=LIBRARIES, default=list(LIBRARIES))
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per child")
    parser.add_argument("--warm-seconds", type=float, default=WARM_SECONDS, help="seconds of warm-up calls")
    parser.add_argument("--out", default=str(ROOT / "results" / f"{EXPERIMENT}.json"))
    parser.add_argument("--keep-from", help="an earlier record whose rows of the other libraries are kept")
    args = parser.parse_args(argv)
    steps = args.steps or (QUICK_STEPS if args.quick else STEPS)
    load_before = load_average()
    rows = []
    for derivative in DERIVATIVES:
        for library in args.libraries:
            timed_out = False
            for t in steps:
                if timed_out:  # a longer loop would time out too
                    rows.append({"library": library, "derivative": derivative, "steps": t, "status": "skipped"})
                    continue
                row = measure(library, derivative, t, args.timeout, args.warm_seconds)
                timed_out = row["status"] != "ok"
                rows.append(row)
                print(f"{library:7s} {derivative:8s} T={t:5d} {row['status']:9s} "
                      f"first {row.get('first_s', float('nan')):8.3f} s  warm {row.get('warm_s', float('nan')):.3g} s",
                      flush=True)
    kept = _kept_rows(args.keep_from, args.libraries, steps) if args.keep_from else None
    if kept is not None:
        rows = kept["rows"] + rows
    compare(rows)  # each row keeps its ``value`` (three or nine numbers): a later run can be checked against it
    write_record(args.out, EXPERIMENT, rows, seed=0,
                 parameters={"steps": list(steps), "timeout_s": args.timeout, "warm_calls": WARM_CALLS,
                             "warm_seconds": args.warm_seconds,
                             "settle_max_s": SETTLE_MAX_S,
                             "load_average_before": load_before, "load_average_after": load_average(),
                             "cpu_count": os.cpu_count(),
                             **({"kept_rows": kept["provenance"]} if kept is not None else {})})
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
