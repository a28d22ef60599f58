"""Beyond vertex elimination on AlphaGrad's scalar tasks: edge elimination against the vertex optimum (issue 43, item 4).

For each scalar task (zoo entries ``graphax_<task>``) the large-neighbourhood search of
:mod:`jacacc.orders.edge_lns` starts from the certified vertex order (``results/alphagrad_certificates.json``,
written as edge steps) and rebuilds windows of it optimally by edge elimination.  Each sequence found is
turned into a Schedule, its multiplications are counted from the schedule's ops, and its Jacobian is
checked against the dense chain rule on random partials.  Beside it the record holds the bound every
vertex, edge and face elimination obeys (:func:`jacacc.orders.edge_lns.monotone_lower_bound`,
Σ κ(X, v)·κ(v, Y)), which the certified vertex orders of PropaneCombustion, HumanHeartDipole and
RobotArm_6DOF attain: on those three no edge or face order can be cheaper.

Run ``python experiments/alphagrad_edge.py`` (``--time-limit`` seconds of search per task, default 60;
the three attained tasks stop at once).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jacacc.bench import write_record  # noqa: E402
from jacacc.bounds import connectivity_terms  # noqa: E402
from jacacc.eliminate import eliminate_edges  # noqa: E402
from jacacc.orders.edge_lns import edge_lns, monotone_lower_bound, mults_at_vertices  # noqa: E402
from jacacc.orders.local_search import vertex_order_cost  # noqa: E402
from jacacc.problems import get  # noqa: E402
from jacacc.problems.alphagrad import SCALAR_TASKS  # noqa: E402
from jacacc.verify import check_schedule  # noqa: E402

EXPERIMENT = "alphagrad_edge"
CERTIFICATES = ROOT / "results" / "alphagrad_certificates.json"


def certified(task: str) -> dict:
    """The task's vertex certificate (order, cost, proven vertex lower bound)."""
    with open(CERTIFICATES, encoding="utf-8") as fh:
        return json.load(fh)["results"]["certificates"][task]


def verify(graph, steps, seed: int) -> dict:
    """Build the schedule of ``steps``, count its multiplications, check its Jacobian and the per-vertex terms."""
    schedule = eliminate_edges(graph, steps)
    rng = np.random.default_rng(seed)
    partials = rng.uniform(0.5, 2.0, size=(3, graph.n_edges))
    error = max(check_schedule(schedule, graph, p) for p in partials)
    at = mults_at_vertices(graph, steps)
    below = [t.vertex for t in connectivity_terms(graph) if at.get(t.vertex, 0) < t.value]
    return {"schedule_mults": schedule.mults, "jacobian_rel_error": error, "vertices_below_their_term": below}


def run_task(task: str, time_limit: float, window: int, max_states: int, seed: int) -> dict:
    graph = get(f"graphax_{task}").graph()
    cert = certified(task)
    order = cert["order"]
    vertex_cost = vertex_order_cost(graph, order)
    result = edge_lns(graph, seed=seed, time_limit=time_limit, start=order, window=window, max_states=max_states)
    steps = [[str(u), str(w), d] for (u, w), d in result.order]
    checks = verify(graph, result.order, seed)
    cost = checks["schedule_mults"]
    bound = monotone_lower_bound(graph)
    vertex_proven = cert["status"] == "optimal"
    return {
        "vertex_order_cost": vertex_cost,
        "vertex_lower_bound": cert["lower_bound"],
        "vertex_proven_optimal": vertex_proven,
        "monotone_lower_bound": bound,
        "edge_cost": cost,
        "edge_below_vertex_order": cost < vertex_cost,
        "edge_below_vertex_lower_bound": cost < cert["lower_bound"],
        "edge_optimal": cost == bound,
        "search": {"status": result.search.status, "objective": result.search.objective,
                   "wall_time": result.search.wall_time, "window": window,
                   "max_states": max_states},
        **checks,
        "edge_order": steps,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(SCALAR_TASKS), choices=SCALAR_TASKS)
    parser.add_argument("--time-limit", type=float, default=60.0, help="search seconds per task")
    parser.add_argument("--window", type=int, default=8, help="most intermediates per rebuilt window")
    parser.add_argument("--max-states", type=int, default=20_000, help="A* states per window")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "results" / f"{EXPERIMENT}.json"))
    args = parser.parse_args(argv)
    tasks = {}
    for task in args.tasks:
        row = tasks[task] = run_task(task, args.time_limit, args.window, args.max_states, args.seed)
        print(f"{task:20s} vertex {row['vertex_order_cost']:4d} (bound {row['vertex_lower_bound']:4d})  "
              f"edge {row['edge_cost']:4d}  every-mode bound {row['monotone_lower_bound']:4d}  "
              f"err {row['jacobian_rel_error']:.1e}  {row['search']['wall_time']:.1f} s", flush=True)
    write_record(args.out, EXPERIMENT, {"tasks": tasks}, seed=args.seed,
                 parameters={"time_limit": args.time_limit, "window": args.window, "max_states": args.max_states, "tasks": args.tasks,
                             "start": "certified vertex order (results/alphagrad_certificates.json)"})
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
