"""How often the Proposition 1 construction realizes an expression set by face elimination.

Paper 003 §5: a face elimination sequence can reach the count of an optimal
expression set when its elimination dependencies are not circular.  For each
method and each random DAG, the plan's expression set
(:func:`jacacc.to_expressions`) goes through :func:`jacacc.relations.realize`;
a realized sequence is replayed by the face engine and its count and Jacobian
compared with the plan's.  Writes ``results/realize_expressions.json``.

    python experiments/realize_expressions.py                   # 30 graphs, ~minutes
    python experiments/realize_expressions.py --graphs 3 --out /tmp/r
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict

import numpy as np

from jacacc import optimize
from jacacc.bench import write_record
from jacacc.eliminate import eliminate_faces
from jacacc.expressions import to_expressions
from jacacc.problems.generators import random_dag
from jacacc.relations import circular_dependencies, realize

METHODS = (
    ("vertex", "forward"), ("vertex", "reverse"), ("vertex", "markowitz"), ("vertex", "random"),
    ("edge", "markowitz"), ("edge", "random"), ("face", "greedy"), ("face", "random"),
    ("structure", "dstar"), ("structure", "blocks"), ("structure", "levels"),
)


def measure(n_graphs: int, max_steps: int) -> list[dict]:
    rows = []
    for seed in range(n_graphs):
        graph = random_dag(3, 12, 3, seed=seed)
        for mode, method in METHODS:
            plan = optimize(graph, mode=mode, method=method, seed=seed)
            exprs = to_expressions(plan)
            start = time.perf_counter()
            result = realize(exprs, max_steps=max_steps)
            row = {"seed": seed, "mode": mode, "method": method, "plan_mults": plan.mults,
                   "realized": result.realized, "face_mults": result.mults if result.realized else None,
                   "circular": len(circular_dependencies(exprs, limit=5)), "reason": result.reason,
                   "seconds": time.perf_counter() - start}
            if result.realized:  # an independent check: replay the faces
                replay = eliminate_faces(graph, result.order)
                if replay.mults != result.mults or replay.mults > plan.mults or not np.allclose(
                        replay.evaluate(graph.partial_array()), plan.jacobian()):
                    raise AssertionError(f"realized sequence does not replay: {row}")
            rows.append(row)
    return rows


def summary(rows: list[dict]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = defaultdict(lambda: {"graphs": 0, "realized": 0, "same_count": 0})
    for r in rows:
        entry = table[f"{r['mode']}:{r['method']}"]
        entry["graphs"] += 1
        entry["realized"] += r["realized"]
        entry["same_count"] += r["realized"] and r["face_mults"] == r["plan_mults"]
    return dict(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=30, help="random DAGs (seeds 0 .. N-1)")
    parser.add_argument("--max-steps", type=int, default=20_000, help="search budget per expression set")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    rows = measure(args.graphs, args.max_steps)
    table = summary(rows)
    write_record(os.path.join(args.out, "realize_expressions.json"), "realize_expressions",
                 {"rows": rows, "summary": table},
                 parameters={"graphs": args.graphs, "generator": "random_dag(3, 12, 3)",
                             "max_steps": args.max_steps}, seed=0)
    for name, entry in table.items():
        print(f"{name:<22} realized {entry['realized']:>3}/{entry['graphs']}  same count {entry['same_count']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
