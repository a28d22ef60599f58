"""Sweep executors: speed-up of local workers (and a Dask cluster) over in-process, and the coordinator's cost.

A CPU-bound grid — simulated annealing with a fixed iteration count (so every
cell does the same work on every executor) on seeded random DAGs, one graph
per seed — runs in-process, on ``--workers`` local processes and, with
``--dask``, on a Dask cluster of as many single-threaded worker processes
whose scheduler runs in its own process (``dask scheduler`` and ``dask
worker``, as on a real cluster, so that this process is only the
coordinator).  Each run starts from an empty store, its wall time includes
starting the local workers, and each executor's best of ``--repeat`` runs
counts (a shared machine's other load only ever slows a run down; in-process
and local runs take turns).  The
coordinator's overhead per cell is its own CPU time during a run
(scheduling, pipes or Dask messages, the store write, the progress bar)
divided by the cells, with the store write timed apart.  ``--many N`` then
runs N cheap cells (heuristics on small graphs) on the Dask cluster and
records the coordinator's resident memory after a tenth of them and at the
end: it should not grow with the number of cells.  Writes
``results/sweep_benchmark.json``.

    python experiments/sweep_benchmark.py                        # ~1 minute on 2 cores
    python experiments/sweep_benchmark.py --dask --many 10000    # + Dask, + the 10 000-cell memory check
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from jacacc.bench import write_record
from jacacc.sweep import read_records, run

HEURISTICS = ("markowitz", "min_fill", "relative_markowitz", "reverse")


def cpu_grid(cells: int, intermediates: int, iterations: int) -> dict:
    """``cells`` annealing cells, one seeded random DAG each."""
    return {"name": "sweep_benchmark cpu", "problems": [f"random_dag(3, {intermediates}, 3, max_preds=3)"],
            "methods": ["anneal"], "seeds": list(range(cells)),
            "options": {"iterations": iterations, "time_limit": 600}}


def cheap_grid(cells: int) -> dict:
    """About ``cells`` heuristic cells on small seeded random DAGs."""
    seeds = -(-cells // len(HEURISTICS))
    return {"name": "sweep_benchmark many", "problems": ["random_dag(3, 8, 3)"], "methods": list(HEURISTICS),
            "seeds": list(range(seeds)), "verify": False}


def one_run(grid: dict, folder: str, label: str, attempt: int, **executor) -> dict:
    """One run into a fresh store: wall time, the coordinator's CPU and store time per cell."""
    store = os.path.join(folder, f"{label}-{attempt}.sqlite")
    summary = run(grid, store, desc=label, **executor)
    assert summary.statuses == {"ok": summary.computed}, summary.statuses
    cells = max(1, summary.computed)
    return {"executor": summary.executor, "cells": summary.computed, "seconds": summary.seconds,
            "coordinator_cpu_ms_per_cell": 1e3 * summary.coordinator_cpu_seconds / cells,
            "store_write_ms_per_cell": 1e3 * summary.store_seconds / cells, "store": store}


def best_runs(grid: dict, folder: str, executors: dict[str, dict], repeat: int) -> dict[str, dict]:
    """Each executor's fastest of ``repeat`` runs, the executors taking turns (so a burst of
    other load on a shared machine does not fall on one executor's runs only); every
    run's wall time is kept in ``all_seconds``."""
    runs: dict[str, list[dict]] = {name: [] for name in executors}
    for attempt in range(repeat):
        for name, executor in executors.items():
            runs[name].append(one_run(grid, folder, name, attempt, **executor))
    best = {}
    for name, results in runs.items():
        best[name] = min(results, key=lambda r: r["seconds"])
        best[name]["all_seconds"] = [r["seconds"] for r in results]
    return best


@contextlib.contextmanager
def dask_cluster(workers: int, folder: str) -> Iterator[str]:
    """``dask scheduler`` and ``dask worker`` (``workers`` single-threaded processes) in
    processes of their own; yields the scheduler's address."""
    from distributed import Client

    info = os.path.join(folder, "scheduler.json")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--port", "0",
                                  "--no-dashboard", "--scheduler-file", info], **quiet)
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(info) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)  # the file is written in one go, but give it a moment
        with open(info, encoding="utf-8") as fh:
            address = json.load(fh)["address"]
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers",
                                   str(workers), "--nthreads", "1", "--no-dashboard", "--memory-limit", "2GiB"],
                                  **quiet)
        with Client(address) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address
    finally:
        for process in (worker, scheduler):
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def same_results(a: str, b: str) -> bool:
    """Whether two stores hold the same mults for the same keys."""
    def mults(store: str) -> dict:
        return {r["key"]: r["result"]["mults"] for r in read_records(store)}

    return mults(a) == mults(b)


def resident_mb() -> float:
    """This process's resident memory now, in MB (psutil comes with dask.distributed)."""
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def memory_check(cells: int, address: str, folder: str) -> dict:
    """``cells`` cheap cells on the Dask cluster; the coordinator's resident memory after 10 % and at the end."""
    grid = cheap_grid(cells)
    marks: dict[str, float] = {}
    done = [0]

    def sample(record: dict) -> None:
        done[0] += 1
        if done[0] == max(1, cells // 10):
            marks["after_10_percent_mb"] = resident_mb()

    summary = run(grid, os.path.join(folder, "many.sqlite"), scheduler=address, desc="many", on_record=sample)
    marks["at_end_mb"] = resident_mb()
    return {"cells": summary.computed, "seconds": summary.seconds, **marks,
            "coordinator_cpu_ms_per_cell": 1e3 * summary.coordinator_cpu_seconds / max(1, summary.computed),
            "store_write_ms_per_cell": 1e3 * summary.store_seconds / max(1, summary.computed)}


def measure(args: argparse.Namespace) -> dict:
    grid = cpu_grid(args.cells, args.intermediates, args.iterations)
    many = None
    with tempfile.TemporaryDirectory(prefix="jacacc-sweep-benchmark-") as folder:
        runs = best_runs(grid, folder, {"in_process": {}, "local": {"workers": args.workers}}, args.repeat)
        if args.dask or args.many:
            with dask_cluster(args.workers, folder) as address:
                if args.dask:
                    runs.update(best_runs(grid, folder, {"dask": {"scheduler": address}}, args.repeat))
                if args.many:
                    many = memory_check(args.many, address, folder)
        reference = runs["in_process"]["store"]
        for result in runs.values():
            result["same_results_as_in_process"] = same_results(reference, result.pop("store"))
            result["speedup"] = runs["in_process"]["seconds"] / result["seconds"]
    return {"runs": runs, "many": many}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200, help="annealing cells (one graph per seed)")
    parser.add_argument("--intermediates", type=int, default=40)
    parser.add_argument("--iterations", type=int, default=10000, help="annealing moves per cell")
    parser.add_argument("--workers", type=int, default=2, help="local processes (and Dask workers)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per executor; the fastest counts")
    parser.add_argument("--dask", action="store_true", help="also on a Dask cluster (scheduler in its own process)")
    parser.add_argument("--many", type=int, default=0, metavar="N",
                        help="then N cheap cells on the Dask cluster: the coordinator's memory")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    results = measure(args)
    write_record(os.path.join(args.out, "sweep_benchmark.json"), "sweep_benchmark", results,
                 parameters={"cells": args.cells, "intermediates": args.intermediates, "iterations": args.iterations,
                             "workers": args.workers, "repeat": args.repeat, "dask": args.dask,
                             "many": args.many,
                             "grid": cpu_grid(args.cells, args.intermediates, args.iterations)},
                 seed=0)
    for name, r in results["runs"].items():
        print(f"{name:<11} {r['executor']:<28} {r['cells']} cells {r['seconds']:7.2f} s  speed-up {r['speedup']:.2f}x  "
              f"coordinator {r['coordinator_cpu_ms_per_cell']:.2f} ms/cell (store write "
              f"{r['store_write_ms_per_cell']:.2f} ms)  same results: {r['same_results_as_in_process']}")
    if results["many"]:
        m = results["many"]
        print(f"many        {m['cells']} cheap cells on the Dask cluster in {m['seconds']:.1f} s; coordinator "
              f"memory {m['after_10_percent_mb']:.0f} MB after 10 %, {m['at_end_mb']:.0f} MB at the end; "
              f"{m['coordinator_cpu_ms_per_cell']:.2f} ms CPU per cell")
    return 0


if __name__ == "__main__":
    sys.exit(main())
