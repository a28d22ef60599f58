"""Exact and local search against graph size: time to proven optimality, gap at the limit, gain over heuristics.

For seeded random DAGs of growing size (3 inputs, 3 outputs, ``max_preds=3``)
runs ``cpsat`` in vertex, edge and face mode under a time limit and records
the time to a proof, or the gap ``(objective − bound) / objective`` when the
limit runs out first; a mode stops growing after its first unproven size.
On the AlphaGrad functions of the zoo it compares markowitz, ``anneal`` and
``cpsat`` (vertex mode).  Writes ``results/search_benchmark.json`` (with the
largest graph proven optimal per mode) and ``figures/search_benchmark.png``.

    python experiments/search_benchmark.py                        # minutes
    python experiments/search_benchmark.py --sizes 4 6 --time-limit 2 --zoo BlackScholes --out /tmp/r
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from jacacc import optimize, problems
from jacacc.bench import write_record
from jacacc.problems.generators import random_dag
from jacacc.progress import note, progress_bar

MODES = ("vertex", "edge", "face")
DEFAULT_SIZES = (4, 6, 8, 10, 12, 16, 20, 25, 30, 40, 50, 60)
HEURISTICS = {"vertex": ("markowitz", "min_fill", "relative_markowitz"),
              "edge": ("markowitz", "min_fill", "relative_markowitz"),
              "face": ("greedy", "edge_markowitz", "vertex_markowitz")}


def best_heuristic(graph, mode: str) -> tuple[str, int]:
    """The cheapest of the mode's greedy heuristics: (name, mults)."""
    found = [(optimize(graph, mode=mode, method=name, seed=0).mults, name) for name in HEURISTICS[mode]]
    mults, name = min(found)
    return name, mults


def search_row(graph, mode: str, method: str, time_limit: float, workers: int, seed: int, **extra) -> dict:
    start = time.perf_counter()
    options = {"time_limit": time_limit}
    if method != "anneal":
        options["workers"] = workers
    plan = optimize(graph, mode=mode, method=method, seed=seed, **options)
    seconds = time.perf_counter() - start
    heuristic, heuristic_mults = best_heuristic(graph, mode)
    info = plan.search
    return {
        **extra, "mode": mode, "method": method, "intermediates": len(graph.intermediates),
        "edges": graph.n_edges, "mults": plan.mults, "lower_bound": plan.lower_bound,
        "optimal": bool(plan.optimal), "status": info.status if info else None,
        "gap": (plan.mults - plan.lower_bound) / plan.mults if plan.mults else 0.0,
        "seconds": seconds, "solver": info.solver if info else None,
        "heuristic": heuristic, "heuristic_mults": heuristic_mults,
    }


def random_family(sizes: list[int], time_limit: float, workers: int, seed: int) -> list[dict]:
    rows = []
    for mode in progress_bar(MODES, desc="search_benchmark random DAGs", unit="mode"):
        for size in sizes:
            graph = random_dag(3, size, 3, max_preds=3, seed=seed + size)
            row = search_row(graph, mode, "cpsat", time_limit, workers, seed, family="random_dag",
                             problem=f"random_dag(3, {size}, 3, seed={seed + size})", size=size)
            rows.append(row)
            note(f"{mode:<6} n={size:<4} {row['mults']:>6} mults  bound {row['lower_bound']:>6}  "
                 f"{'optimal' if row['optimal'] else 'gap %.1f %%' % (100 * row['gap'])}  "
                 f"{row['seconds']:7.2f} s  (best heuristic {row['heuristic_mults']})")
            if not row["optimal"]:
                break  # larger graphs of this mode would not be proven either
    return rows


def zoo(names: list[str], time_limit: float, workers: int, seed: int) -> list[dict]:
    rows = []
    for name in progress_bar(names, desc="search_benchmark zoo", unit="problem"):
        graph = problems.get(name).graph()
        for method in ("anneal", "cpsat"):
            row = search_row(graph, "vertex", method, time_limit, workers, seed, family="zoo", problem=name,
                             size=len(graph.intermediates))
            row["markowitz"] = optimize(graph, method="markowitz").mults
            rows.append(row)
            note(f"{name:<24} {method:<7} {row['mults']:>6} mults  (markowitz {row['markowitz']}, bound "
                 f"{row['lower_bound']}, {row['status']}, {row['seconds']:.1f} s)")
    return rows


def largest_proven(rows: list[dict], within: float) -> dict:
    """Per mode, the random graph with the most intermediates proven optimal within ``within`` seconds."""
    out = {}
    for mode in MODES:
        proven = [r for r in rows if r["family"] == "random_dag" and r["mode"] == mode and r["optimal"]
                  and r["seconds"] <= within]
        best = max(proven, key=lambda r: r["intermediates"], default=None)
        out[mode] = None if best is None else {k: best[k] for k in ("problem", "intermediates", "edges",
                                                                     "mults", "seconds")}
    return out


def plot(record: dict, path: str) -> None:
    from jacacc.plot import _pyplot

    plt = _pyplot()
    rows = record["results"]["rows"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    markers = {"vertex": "o", "edge": "s", "face": "^"}
    for mode in MODES:
        mine = [r for r in rows if r["family"] == "random_dag" and r["mode"] == mode]
        proven = [r for r in mine if r["optimal"]]
        open_ = [r for r in mine if not r["optimal"]]
        line, = left.plot([r["intermediates"] for r in proven], [r["seconds"] for r in proven],
                          marker=markers[mode], label=f"{mode}: proven optimal")
        for r in open_:
            left.plot(r["intermediates"], r["seconds"], marker=markers[mode], color=line.get_color(),
                      fillstyle="none", linestyle="none", label=f"{mode}: limit, gap {100 * r['gap']:.0f} %")
    left.set_yscale("log")
    left.set_xlabel("intermediates (random DAG, 3 in, 3 out)")
    left.set_ylabel("seconds (cpsat)")
    left.set_title("time to proven optimality")
    left.legend(fontsize=7)
    zoo_rows = [r for r in rows if r["family"] == "zoo"]
    names = list(dict.fromkeys(r["problem"] for r in zoo_rows))
    width = 0.27
    for k, (label, get) in enumerate((
            ("markowitz", lambda n: next(r["markowitz"] for r in zoo_rows if r["problem"] == n)),
            ("anneal", lambda n: next(r["mults"] for r in zoo_rows if r["problem"] == n and r["method"] == "anneal")),
            ("cpsat", lambda n: next(r["mults"] for r in zoo_rows if r["problem"] == n and r["method"] == "cpsat")))):
        right.bar([i + (k - 1) * width for i in range(len(names))], [get(n) for n in names], width, label=label)
    right.set_xticks(range(len(names)))
    right.set_xticklabels(names, rotation=30, ha="right", fontsize=7)
    right.set_ylabel("multiplications (vertex elimination)")
    right.set_title("AlphaGrad functions")
    right.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=list(DEFAULT_SIZES),
                        help="intermediates of the random DAGs")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per search")
    parser.add_argument("--zoo-time-limit", type=float, default=None,
                        help="seconds per search on the zoo (default: --time-limit)")
    parser.add_argument("--zoo", nargs="*", default=None, help="zoo problems (default: the AlphaGrad functions)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results")
    parser.add_argument("--figures", default="figures")
    parser.add_argument("--no-figure", action="store_true")
    args = parser.parse_args(argv)
    zoo_names = args.zoo if args.zoo is not None else [
        n for n in problems.names("alphagrad") if "matrix" not in problems.get(n).tags
        and len(problems.get(n).graph().intermediates) <= 200]
    zoo_limit = args.zoo_time_limit or args.time_limit
    rows = random_family(args.sizes, args.time_limit, args.workers, args.seed)
    rows += zoo(zoo_names, zoo_limit, args.workers, args.seed)
    record = write_record(
        os.path.join(args.out, "search_benchmark.json"),
        "search_benchmark",
        {"rows": rows, "largest_proven": largest_proven(rows, args.time_limit)},
        parameters={"sizes": args.sizes, "time_limit": args.time_limit, "zoo_time_limit": zoo_limit,
                    "workers": args.workers, "generator": "random_dag(3, n, 3, max_preds=3, seed=seed+n)",
                    "zoo": zoo_names},
        seed=args.seed,
    )
    print("largest proven optimal within the limit:", record["results"]["largest_proven"])
    if not args.no_figure:
        plot(record, os.path.join(args.figures, "search_benchmark.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
