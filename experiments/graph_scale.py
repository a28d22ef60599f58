"""Graph construction cost against graph size: JSON loading, validation, a Markowitz order, from_jax.

Issue 24: building a ``CompGraph`` was quadratic.  This script times, on seeded
layered random DAGs written to a temporary JSON file (10^4, 10^5 and 10^6
edges by default):

* ``parse``: the JSON text → Python objects (``json.loads``, outside jacacc),
* ``validate``: those objects → a validated ``CompGraph``
  (:meth:`jacacc.CompGraph.from_json` on the dict: id checks, duplicates,
  acyclicity, edge directions, pruning, topological order, indexes),
* ``load``: the file → a ``CompGraph`` (:meth:`~jacacc.CompGraph.from_json` on
  the path: parse and validate together),
* ``markowitz``: a Markowitz vertex order from the order registry
  (``find_order(graph, "vertex", "markowitz")``, the order only, no schedule),

and, with JAX installed, ``jacacc.from_jax(lambda x: jnp.sin(x) * 2, ones((n, n)))``
for several ``n``.  Each time is the best of ``--repeat`` runs.  Writes
``results/graph_scale.json`` and the log-log figure ``figures/graph_scale.png``
(seconds against edges, with a line of slope 1 for reference).

    python experiments/graph_scale.py                             # 10^4 … 10^6 edges, about a minute
    python experiments/graph_scale.py --edges 1000 3000 --jax-sizes 10 20 --out /tmp/r --figures /tmp/f
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from jacacc.bench import write_record
from jacacc.graph import CompGraph
from jacacc.orders import find_order
from jacacc.progress import note

DEFAULT_EDGES = (10_000, 100_000, 1_000_000)
DEFAULT_JAX_SIZES = (30, 100, 200, 300)  # from_jax on an n × n argument
DEPTH = 10  # layers of edges from the inputs to the outputs
WINDOW = 1  # a vertex's predecessors lie within ±WINDOW positions in the layer before (local data flow)
MAX_PREDS = 2
STAGES = ("parse", "validate", "load", "markowitz")


def layered_dag_json(n_edges: int, seed: int, *, depth: int = DEPTH, window: int = WINDOW,
                     max_preds: int = MAX_PREDS) -> dict[str, Any]:
    """A seeded layered random DAG in the JSON exchange format, with about ``n_edges`` edges.

    ``depth`` layers of edges join ``width`` inputs, ``depth − 1`` layers of
    ``width`` intermediates and ``width`` outputs; the width grows with the
    size, the depth does not (an array program applied to a larger array:
    what ``from_jax`` produces).  Vertex ``i`` of a layer draws 1 …
    ``max_preds`` distinct predecessors among positions ``i − window … i +
    window`` of the layer before (a stencil: local data flow); a vertex nobody
    drew gets an edge to a vertex of its window in the next layer, so every
    vertex lies on an input → output path.  Partials are uniform in [−1, −0.1]
    ∪ [0.1, 1].  Edges are listed layer by layer, as a program produces them.

    Fill-in stays local, so Markowitz's multiplications grow linearly with the
    size (about 3 per edge with the defaults): a graph whose elimination cost
    itself grew faster would measure the graph, not the code.

    Examples
    --------
    >>> data = layered_dag_json(1000, seed=0)
    >>> len(data["inputs"]), len(data["outputs"]), 900 < len(data["edges"]) < 1200
    (67, 67, True)
    """
    rng = np.random.default_rng(seed)
    width = max(2, round(n_edges / (depth * (max_preds + 1) / 2)))
    names = [[f"x{i}" for i in range(width)]]
    names += [[f"v{layer}_{i}" for i in range(width)] for layer in range(1, depth)]
    names.append([f"y{i}" for i in range(width)])
    edges: list[list[Any]] = []
    offsets = np.arange(-window, window + 1)
    for layer in range(1, depth + 1):
        k = rng.integers(1, max_preds + 1, size=width)
        # distinct offsets per vertex: a random permutation of the window, the first k taken
        perm = np.argsort(rng.random((width, offsets.size)), axis=1)
        preds = np.clip(np.arange(width)[:, None] + offsets[perm], 0, width - 1)
        drawn: dict[tuple[int, int], None] = {}  # (pred position, vertex position), insertion-ordered
        for i in range(width):
            drawn.update(dict.fromkeys((p, i) for p in preds[i, :k[i]].tolist()))  # clipping can repeat one
        used = {p for p, _ in drawn}
        for p in range(width):  # repair: a vertex nobody drew feeds one vertex of its window
            if p not in used:
                drawn[(p, int(np.clip(p + rng.integers(-window, window + 1), 0, width - 1)))] = None
        edges.extend([names[layer - 1][p], names[layer][i]] for p, i in drawn)
    values = rng.uniform(0.1, 1.0, size=len(edges)) * rng.choice([-1.0, 1.0], size=len(edges))
    for edge, value in zip(edges, values.tolist(), strict=True):
        edge.append(value)
    return {"inputs": names[0], "outputs": names[-1], "edges": edges}


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Best wall-clock and best CPU seconds of ``repeat`` calls of ``fn``, and the last result.

    CPU time (``time.process_time``) is recorded beside wall time because the
    machine may be shared: waiting for a core inflates the wall time only.
    """
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        result = None  # the previous result is freed before the next call, not during it
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu, result


def measure_graphs(sizes: list[int], seed: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    for n_edges in sizes:
        data = layered_dag_json(n_edges, seed)
        row: dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "graph.json")
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            del data
            row["json_bytes"] = os.path.getsize(path)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            row["parse"], row["parse_cpu"], parsed = best_of(repeat, lambda: json.loads(text))  # noqa: B023
            text = ""  # freed before the next stage
            row["validate"], row["validate_cpu"], _ = best_of(
                repeat, lambda: CompGraph.from_json(parsed))  # noqa: B023
            parsed = None
            row["load"], row["load_cpu"], graph = best_of(repeat, lambda: CompGraph.from_json(path))  # noqa: B023
        row["markowitz"], row["markowitz_cpu"], result = best_of(
            repeat, lambda: find_order(graph, "vertex", "markowitz", None, {}))  # noqa: B023
        row["load_and_markowitz"] = row["load"] + row["markowitz"]
        row["load_and_markowitz_cpu"] = row["load_cpu"] + row["markowitz_cpu"]
        row.update({"edges": graph.n_edges, "vertices": len(graph.topological_order), "inputs": len(graph.inputs),
                    "intermediates": len(graph.intermediates), "outputs": len(graph.outputs),
                    "order_length": len(result.order)})
        rows.append(row)
        note(f"{row['edges']:>9} edges  " + "  ".join(f"{s} {row[s]:6.2f} s (cpu {row[s + '_cpu']:6.2f})"
                                                   for s in STAGES))
    return rows


def measure_from_jax(sizes: list[int], repeat: int) -> list[dict[str, Any]]:
    try:
        import jax.numpy as jnp
    except ImportError:
        note("JAX is not installed: from_jax not measured")
        return []
    import jacacc

    def f(x):
        return jnp.sin(x) * 2

    jacacc.from_jax(f, np.ones((2, 2)))  # JAX's own first-call setup is not what is measured
    rows = []
    for n in sizes:
        seconds, cpu, traced = best_of(repeat, lambda: jacacc.from_jax(f, np.ones((n, n))))  # noqa: B023
        rows.append({"n": n, "elements": n * n, "edges": traced.graph.n_edges, "seconds": seconds, "cpu": cpu})
        note(f"from_jax {n:>4} x {n:<4} ({traced.graph.n_edges:>7} edges)  {seconds:6.2f} s (cpu {cpu:6.2f})")
    return rows


def plot(record: dict[str, Any], path: str) -> None:
    """Log-log seconds against edges per stage, and from_jax, with a slope-1 guide."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, jax_rows = record["results"]["graphs"], record["results"]["from_jax"]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for stage in STAGES:
        ax.plot([r["edges"] for r in rows], [r[stage] for r in rows], marker="o", label=f"JSON graph: {stage}")
    if jax_rows:
        ax.plot([r["edges"] for r in jax_rows], [r["seconds"] for r in jax_rows], marker="s", linestyle="--",
                label="from_jax(sin(x) * 2)")
    points = [(r["edges"], r["load"]) for r in rows] or [(r["edges"], r["seconds"]) for r in jax_rows]
    if points:
        x0, y0 = points[0]
        xs = np.array([min(p[0] for p in points), max(r["edges"] for r in rows + jax_rows)])
        ax.plot(xs, y0 * xs / x0, color="gray", linestyle=":", label="linear (slope 1)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("edges in the graph")
    ax.set_ylabel(f"seconds (best of {record['parameters']['repeat']})")
    ax.set_title("CompGraph construction and Markowitz order against size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", nargs="*", type=int, default=list(DEFAULT_EDGES),
                        help="JSON graph sizes (edges, approximately)")
    parser.add_argument("--jax-sizes", nargs="*", type=int, default=list(DEFAULT_JAX_SIZES),
                        help="from_jax argument sizes n (an n x n array); none: --jax-sizes")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results")
    parser.add_argument("--figures", default="figures")
    parser.add_argument("--no-figure", action="store_true")
    args = parser.parse_args(argv)
    results = {"graphs": measure_graphs(args.edges, args.seed, args.repeat),
               "from_jax": measure_from_jax(args.jax_sizes, args.repeat)}
    record = write_record(
        os.path.join(args.out, "graph_scale.json"),
        "graph_scale",
        results,
        parameters={"edges": args.edges, "jax_sizes": args.jax_sizes, "repeat": args.repeat,
                    "generator": f"layered_dag_json(depth={DEPTH}, window={WINDOW}, max_preds={MAX_PREDS})",
                    "from_jax_function": "lambda x: jnp.sin(x) * 2"},
        seed=args.seed,
    )
    if not args.no_figure:
        plot(record, os.path.join(args.figures, "graph_scale.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
