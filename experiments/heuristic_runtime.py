"""Heuristic run time against graph size, on seeded random DAGs up to 10^5 vertices.

Times order finding only (what a heuristic costs), and records each order's
multiplications counted by replay.  Writes ``results/heuristic_runtime.json``
and ``figures/heuristic_runtime.png``.

    python experiments/heuristic_runtime.py                       # 10^2 … 10^5 vertices, minutes
    python experiments/heuristic_runtime.py --sizes 100 300 --out /tmp/r
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from jacacc.bench import write_record
from jacacc.eliminate import count_ops
from jacacc.orders import find_order
from jacacc.problems.generators import random_dag
from jacacc.progress import note, progress_bar

VERTEX_METHODS = ("forward", "reverse", "markowitz", "relative_markowitz", "min_fill")
EDGE_METHODS = ("markowitz", "min_fill")
DEFAULT_SIZES = (100, 1_000, 10_000, 100_000)
EDGE_MAX_SIZE = 10_000  # edge-mode heuristics beyond this take more than the experiment's budget
N_INPUTS_OUTPUTS = 10
WINDOW = 8  # predecessors within the last 8 vertices: bounded fill-in, so cost is about the heuristic itself


def graph_of_size(vertices: int, seed: int):
    """A random DAG with ``vertices`` vertices, ten of them inputs and ten outputs."""
    n_io = N_INPUTS_OUTPUTS
    return random_dag(n_io, vertices - 2 * n_io, n_io, max_preds=3, window=WINDOW, seed=seed, partials="none")


def measure(sizes: list[int], seed: int, edge_max_size: int) -> list[dict]:
    rows = []
    for size in progress_bar(sizes, desc="heuristic_runtime", unit="size"):
        graph = graph_of_size(size, seed)
        vertices = len(graph.inputs) + len(graph.intermediates) + len(graph.outputs)
        plan = [("vertex", m) for m in VERTEX_METHODS]
        if size <= edge_max_size:
            plan += [("edge", m) for m in EDGE_METHODS]
        for mode, method in plan:
            start = time.perf_counter()
            result = find_order(graph, mode, method, seed, {})
            seconds = time.perf_counter() - start
            counted = count_ops(graph, result.order, mode)
            rows.append({
                "size": size, "vertices": vertices, "edges": graph.n_edges, "mode": mode, "method": method,
                "seconds": seconds, "mults": counted.mults,
            })
            note(f"{vertices:>7} vertices  {mode:<6} {method:<20} {seconds:8.3f} s  {counted.mults} mults")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=list(DEFAULT_SIZES), help="graph sizes (vertices)")
    parser.add_argument("--edge-max-size", type=int, default=EDGE_MAX_SIZE, help="largest size timed in edge mode")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results")
    parser.add_argument("--figures", default="figures")
    parser.add_argument("--no-figure", action="store_true")
    args = parser.parse_args(argv)
    rows = measure(args.sizes, args.seed, args.edge_max_size)
    record = write_record(
        os.path.join(args.out, "heuristic_runtime.json"),
        "heuristic_runtime",
        {"rows": rows},
        parameters={"sizes": args.sizes, "generator": f"random_dag(max_preds=3, window={WINDOW})",
                    "edge_max_size": args.edge_max_size},
        seed=args.seed,
    )
    if not args.no_figure:
        from jacacc.plot import plot_runtime

        plot_runtime(record, os.path.join(args.figures, "heuristic_runtime.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
