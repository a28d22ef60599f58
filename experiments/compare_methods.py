
"""Method comparison: multiplications of every registered order method on every zoo problem.

Writes ``results/compare_methods.json`` (a jacacc record: machine, versions,
seed), ``results/compare_methods.md`` (the tables the README shows, best per
row in bold) and ``figures/compare_methods.png``.  The comparison is one
sweep (:mod:`jacacc.sweep`): problems × every (mode, method) pair, each cell's
schedule costed and checked against the chain rule; the size limits below are
the grid's ``limits``, so skipped cells are recorded with their reason.

    python experiments/compare_methods.py                 # default zoo, minutes
    python experiments/compare_methods.py --problems RoeFlux_1d chain_50 --out /tmp/r
    python experiments/compare_methods.py --workers 2     # on local processes
    python experiments/compare_methods.py --scheduler tcp://host:8786 --store runs/compare.sqlite
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

from jacacc import methods, modes, problems
from jacacc.bench import write_record
from jacacc.progress import note
from jacacc.sweep import read_records, run
from jacacc.sweep.arguments import add_executor_arguments, executor_options, store_path

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


def build_grid(problem_names: list[str], seed: int, time_limit: float | None = None) -> dict:
    """Every registered (mode, method) pair on every problem, with the size limits as the grid's limits;
    ``time_limit`` (seconds) goes to the methods that take one (anneal, the searches), else their default."""
    exact = sorted({m for mode in modes() for m in methods(mode, exact=True)})
    grid = {
        "name": "compare_methods",
        "problems": problem_names,
        "methods": [f"{mode}:{method}" for mode in modes() for method in methods(mode)],
        "seeds": [seed],
        "limits": [
            {"modes": ["edge"], "methods": ["random"], "max_edges": RANDOM_EDGE_MAX_EDGES},
            {"methods": exact, "max_faces": EXACT_MAX_FACES, "reason": "exact search"},
            {"modes": ["face"], "methods": list(FACE_SCAN_METHODS), "max_faces": FACE_SCAN_MAX_FACES},
        ],
    }
    if time_limit is not None:
        grid["options"] = {"time_limit": time_limit}  # each cell keeps the options its method takes
    return grid


def to_row(record: dict) -> dict:
    """A stored cell as the table's row: sizes, structural bound, and mults/adds/fill-ins or why not."""
    result = record["result"] or {}
    size = result.get("graph", {})
    row = {"problem": record["problem"], "n_inputs": size.get("inputs"), "n_intermediates": size.get("intermediates"),
           "n_outputs": size.get("outputs"), "n_edges": size.get("edges"), "n_faces": size.get("faces"),
           "mode": record["mode"], "method": record["method"], "lower_bound": result.get("structural_lower_bound")}
    if record["status"] == "ok":
        # where optimize kept forward or reverse mode over the method's own order, what that order cost
        return {**row, "mults": result["mults"], "adds": result["adds"], "fill_ins": result["fill_ins"],
                "seconds": result["optimize_seconds"], "verified": result.get("verified"),
                "baseline": result.get("baseline"), "method_mults": result.get("method_mults")}
    # skipped by a limit, or the method refused / failed (e.g. an exact method above its size limit)
    return {**row, "mults": None, "skipped": result.get("skipped") or record["error"] or record["status"]}


def measure(problem_names: list[str], seed: int, store: str | None = None, time_limit: float | None = None,
            **executor) -> list[dict]:
    """Run the comparison as one sweep (``executor``: ``workers``, ``scheduler``, ``cell_timeout``)."""
    grid = build_grid(problem_names, seed, time_limit)
    with store_path(store, "compare_methods") as path:
        run(grid, path, desc="compare_methods", **executor)
        records = read_records(path, grid)
    failed = [r for r in records if r["status"] in ("error", "timeout")]
    for r in failed:
        note(f"{r['problem']} {r['mode']}:{r['method']}: {r['status']}: {r['error']}")
    return [to_row(r) for r in records]


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
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="time limit of the methods that take one (anneal, the searches; default: theirs)")
    add_executor_arguments(parser)
    args = parser.parse_args(argv)
    names = args.problems if args.problems else default_problems()
    rows = measure(names, args.seed, args.store, args.time_limit, **executor_options(args))
    best = best_per_row(rows)
    record = write_record(
        os.path.join(args.out, "compare_methods.json"),
        "compare_methods",
        {"rows": rows, "best": [{"problem": p, "mode": m, "mults": v} for (p, m), v in best.items()]},
        parameters={"problems": names, "time_limit": args.time_limit, "random_edge_max_edges": RANDOM_EDGE_MAX_EDGES,
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
