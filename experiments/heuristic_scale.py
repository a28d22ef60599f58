"""Greedy vertex orders against forward and reverse mode as graphs grow (issue 43, item 5).

On a long program in which every step reads the step before it and one value from anywhere
earlier (:func:`jacacc.problems.generators.recent_plus_random`, ten inputs and ten outputs), the
greedy heuristics' own orders cost several times what forward or reverse mode costs, and the gap
widens with the size; the preaccumulation orders of :mod:`jacacc.orders.scale` cost less than
either mode at every size.  This script records, per size and method, the multiplications of the
method's own order (``optimize(..., baselines=False)``: counted by replaying the order on the
graph's structure, :func:`jacacc.orders.local_search.vertex_order_cost` up to 10^5 steps and
:func:`jacacc.orders.scale.replay_cost`, the same count on sets, past that), the time to find
it, forward and reverse mode's costs (degree counts,
:func:`jacacc.orders.heuristics.forward_reverse_costs`) and what ``optimize`` returns with its
baseline check (the cheapest of the three).  A method that takes longer than ``--budget`` seconds
at one size is not run at the larger ones.  Writes ``results/heuristic_scale.json`` and
``figures/heuristic_scale.png`` (cost over the better baseline, and seconds, against vertices).

    taskset -c 1 python experiments/heuristic_scale.py             # 10^3 … 10^6 steps, ~15 minutes
    python experiments/heuristic_scale.py --sizes 300 1000 --out /tmp/r --figures /tmp/f
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from jacacc.bench import write_record
from jacacc.orders import find_order
from jacacc.orders.heuristics import forward_reverse_costs
from jacacc.orders.local_search import vertex_order_cost
from jacacc.orders.scale import replay_cost
from jacacc.problems.generators import recent_plus_random
from jacacc.progress import note, progress_bar

METHODS = ("markowitz", "markowitz_lowest_index", "relative_markowitz", "min_fill",
           "reverse_preaccumulation", "chain_preaccumulation", "preaccumulation")
DEFAULT_SIZES = (1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000)
N_INPUTS_OUTPUTS = 10
BUDGET_S = 30.0  # a method slower than this at one size is not run at larger ones
BITSET_REPLAY_MAX = 100_000  # past this many steps vertex_order_cost's graph-wide bitsets are too slow


def graph_of_size(intermediates: int, seed: int):
    """Issue 43's family: ten inputs, ``intermediates`` steps, ten outputs, structure only."""
    return recent_plus_random(N_INPUTS_OUTPUTS, intermediates, N_INPUTS_OUTPUTS, seed=seed, partials="none")


def measure(sizes: list[int], seed: int, budget: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    too_slow: set[str] = set()
    for size in progress_bar(sizes, desc="heuristic_scale", unit="size"):
        graph = graph_of_size(size, seed)
        start = time.perf_counter()
        forward, reverse = forward_reverse_costs(graph)
        baseline_seconds = time.perf_counter() - start
        best = min(forward, reverse)
        common = {"size": size, "vertices": len(graph.inputs) + len(graph.intermediates) + len(graph.outputs),
                  "edges": graph.n_edges, "forward": forward, "reverse": reverse}
        rows.append({**common, "method": "forward/reverse (degree counts)", "seconds": baseline_seconds,
                     "mults": best, "checked_mults": best, "over_best_baseline": 1.0})
        for method in METHODS:
            if method in too_slow:
                continue
            start = time.perf_counter()
            order = find_order(graph, "vertex", method, seed, {}).order
            seconds = time.perf_counter() - start
            replay = "bitsets" if size <= BITSET_REPLAY_MAX else "sets"
            mults = (vertex_order_cost if replay == "bitsets" else replay_cost)(graph, order)
            rows.append({**common, "method": method, "seconds": seconds, "mults": mults, "replay": replay,
                         "checked_mults": min(mults, best), "over_best_baseline": mults / best})
            note(f"{size:>7} steps  {method:<24} {seconds:8.2f} s  {mults:>10} mults  "
                 f"({mults / best:.2f}× the better of forward {forward} and reverse {reverse})")
            if seconds > budget:
                too_slow.add(method)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=list(DEFAULT_SIZES), help="steps (intermediates)")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds per order past which a method stops")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results")
    parser.add_argument("--figures", default="figures")
    parser.add_argument("--no-figure", action="store_true")
    args = parser.parse_args(argv)
    rows = measure(args.sizes, args.seed, args.budget)
    record = write_record(
        os.path.join(args.out, "heuristic_scale.json"), "heuristic_scale", {"rows": rows},
        parameters={"sizes": args.sizes, "budget_s": args.budget, "methods": list(METHODS),
                    "generator": f"recent_plus_random({N_INPUTS_OUTPUTS}, size, {N_INPUTS_OUTPUTS}, partials='none')"},
        seed=args.seed,
    )
    if not args.no_figure:
        from jacacc.plot import plot_heuristic_scale

        figure = plot_heuristic_scale(record)
        figure.axes[0].set_yscale("log")  # Markowitz's 100× and preaccumulation's 0.85× on one axis
        path = os.path.join(args.figures, "heuristic_scale.png")
        os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
        figure.savefig(path, dpi=120, bbox_inches="tight")
    return 0


if __name__ == "__main__":
    sys.exit(main())
