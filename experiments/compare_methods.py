
"""Method comparison: multiplications of every registered order method on every zoo problem.

Writes ``results/compare_methods.json`` (a jacacc record: machine, versions,
seed), ``results/compare_methods.md`` (the tables the README shows, best per
row in bold) and ``figures/compare_methods.png``.  Costs are counted by
replaying each order (:func:`jacacc.eliminate.count_ops`), the same count the
Schedule reports.

    python experiments/compare_methods.py                 # default zoo, minutes
    python experiments/compare_methods.py --problems RoeFlux_1d chain_50 --out /tmp/r
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict

from jacacc import methods, modes, problems
from jacacc.api import structural_lower_bound
from jacacc.bench import write_record
from jacacc.eliminate import count_ops
from jacacc.errors import JacaccError
from jacacc.orders import find_order
from jacacc.progress import progress_bar

# Random edge elimination can multiply the work by orders of magnitude on large
# graphs (Griewank & Naumann's warning); above this many edges it is skipped
# and the record says so.
RANDOM_EDGE_MAX_EDGES = 600
# Face methods that scan every face at every step (greedy, random) cost
# O(faces x steps); above this many intermediate faces they are skipped and the record says so.
FACE_SCAN_MAX_FACES = 400
FACE_SCAN_METHODS = ("greedy", "random")
# Exact (exhaustive) methods are exponential: run only on graphs this small.
EXACT_MAX_FACES = 30
DEFAULT_EXCLUDED_TAGS = ("scale",)


def default_problems() -> list[str]:
    return [
        name for name in problems.names() if not set(problems.get(name).tags) & set(DEFAULT_EXCLUDED_TAGS)
    ]


def measure(problem_names: list[str], seed: int) -> list[dict]:
    rows = []
    exact_methods = {mode: set(methods(mode, exact=True)) for mode in modes()}
    for name in progress_bar(problem_names, desc="compare_methods", unit="problem"):
        graph = problems.get(name).graph()
        size = {
            "n_inputs": len(graph.inputs),
            "n_intermediates": len(graph.intermediates),
            "n_outputs": len(graph.outputs),
            "n_edges": graph.n_edges,
        }
        faces = sum(len(graph.predecessors(j)) * len(graph.successors(j)) for j in graph.intermediates)
        size["n_faces"] = faces
        for mode in modes():
            bound = structural_lower_bound(graph, mode)
            for method in methods(mode):
                row = {"problem": name, **size, "mode": mode, "method": method, "lower_bound": bound}
                if mode == "edge" and method == "random" and graph.n_edges > RANDOM_EDGE_MAX_EDGES:
                    rows.append({**row, "mults": None, "skipped": f"more than {RANDOM_EDGE_MAX_EDGES} edges"})
                    continue
                if method in exact_methods[mode] and faces > EXACT_MAX_FACES:
                    rows.append({**row, "mults": None, "skipped": f"exact search; more than {EXACT_MAX_FACES} faces"})
                    continue
                if mode == "face" and method in FACE_SCAN_METHODS and faces > FACE_SCAN_MAX_FACES:
                    rows.append({**row, "mults": None, "skipped": f"more than {FACE_SCAN_MAX_FACES} faces"})
                    continue
                start = time.perf_counter()
                try:
                    result = find_order(graph, mode, method, seed, {})
                except JacaccError as exc:  # e.g. an exact method refusing a graph above its size limit
                    rows.append({**row, "mults": None, "skipped": str(exc)})
                    continue
                seconds = time.perf_counter() - start
                # structure strategies (D*, blocks, levels) build their own schedule
                counted = result.schedule if result.schedule is not None else count_ops(graph, result.order, mode)
                rows.append({
                    **row, "mults": counted.mults, "adds": counted.adds, "fill_ins": counted.fill_ins,
                    "seconds": seconds,
                })
    return rows


def best_per_row(rows: list[dict]) -> dict[tuple[str, str], int]:
    best: dict[tuple[str, str], int] = {}
    for r in rows:
        if r["mults"] is not None:
            key = (r["problem"], r["mode"])
            best[key] = min(best.get(key, r["mults"]), r["mults"])
    return best


def markdown_tables(rows: list[dict]) -> str:
    """One table per mode: problems down, methods across, the best in bold."""
    best = best_per_row(rows)
    parts = []
    for mode in modes():
        mode_rows = [r for r in rows if r["mode"] == mode]
        if not mode_rows:
            continue
        names = sorted({r["method"] for r in mode_rows}, key=lambda m: (m not in ("forward", "reverse"), m))
        table: dict[str, dict[str, str]] = defaultdict(dict)
        sizes = {}
        for r in mode_rows:
            sizes[r["problem"]] = f"{r['n_inputs']}/{r['n_intermediates']}/{r['n_outputs']}"
            if r["mults"] is None:
                table[r["problem"]][r["method"]] = "–"
            elif r["mults"] == best[(r["problem"], mode)]:
                table[r["problem"]][r["method"]] = f"**{r['mults']}**"
            else:
                table[r["problem"]][r["method"]] = str(r["mults"])
        parts.append(f"**{mode} elimination** (multiplications; best in bold; – skipped)\n")
        parts.append("| problem | in/mid/out | " + " | ".join(names) + " |")
        parts.append("|---|---|" + "---|" * len(names))
        for problem, cells in table.items():
            parts.append(f"| {problem} | {sizes[problem]} | " + " | ".join(cells.get(m, "") for m in names) + " |")
        parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="*", default=None, help="zoo names (default: all but 'scale' ones)")
    parser.add_argument("--seed", type=int, default=0, help="seed for randomized methods")
    parser.add_argument("--out", default="results", help="directory for the JSON and markdown results")
    parser.add_argument("--figures", default="figures", help="directory for the figure")
    parser.add_argument("--no-figure", action="store_true", help="skip the figure (no matplotlib needed)")
    args = parser.parse_args(argv)
    names = args.problems if args.problems else default_problems()
    rows = measure(names, args.seed)
    best = best_per_row(rows)
    record = write_record(
        os.path.join(args.out, "compare_methods.json"),
        "compare_methods",
        {"rows": rows, "best": [{"problem": p, "mode": m, "mults": v} for (p, m), v in best.items()]},
        parameters={"problems": names, "random_edge_max_edges": RANDOM_EDGE_MAX_EDGES,
                    "face_scan_max_faces": FACE_SCAN_MAX_FACES, "exact_max_faces": EXACT_MAX_FACES},
        seed=args.seed,
    )
    with open(os.path.join(args.out, "compare_methods.md"), "w", encoding="utf-8") as fh:
        fh.write(markdown_tables(rows))
    if not args.no_figure:
        from jacacc.plot import plot_method_comparison

        plot_method_comparison(record, os.path.join(args.figures, "compare_methods.png"))
    print(markdown_tables(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
