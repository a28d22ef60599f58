"""Structure strategies against the classic modes: forward, reverse, Markowitz, D*, blocks, levels.

Paper 003's question (§1, §3–5): do strategies that read the graph's
structure — D*'s factor subgraphs, the chains/blocks/pages factorization, the
local Jacobians between depth levels — need fewer multiplications than vertex
elimination in forward, reverse or Markowitz order?  Every count comes from
the schedule each method builds, whose Jacobian is checked against the
chain rule on random partials before it is recorded.  Writes
``results/structure_methods.json`` and ``figures/structure_methods.png``.

    python experiments/structure_methods.py                       # all families and the zoo, ~minutes
    python experiments/structure_methods.py --sizes 10 --seeds 1 --problems RoeFlux_1d --out /tmp/r
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from jacacc import optimize, reference_jacobian
from jacacc.bench import write_record
from jacacc.graph import CompGraph
from jacacc.problems import get, names
from jacacc.problems.generators import ladder, layered, random_dag
from jacacc.progress import note, progress_bar

METHODS = (
    ("vertex", "forward"),
    ("vertex", "reverse"),
    ("vertex", "markowitz"),
    ("structure", "dstar"),
    ("structure", "blocks"),
    ("structure", "levels"),
)
DEFAULT_SIZES = (10, 20, 40, 80)
DEFAULT_SEEDS = 3

# each family: a graph of "size" (about that many intermediates) from a seed
FAMILIES: dict[str, Callable[[int, int], CompGraph]] = {
    "random_dag": lambda n, seed: random_dag(4, n, 4, max_preds=3, window=8, seed=seed),
    "layered": lambda n, seed: layered([4, n // 2, n - n // 2, 4], density=0.4, seed=seed),
    "ladder": lambda n, seed: ladder(max(2, n // 2 + 1), 2, seed=seed),
}


def measure_graph(graph: CompGraph, row: dict, seed: int) -> list[dict]:
    """One row per method; each schedule's Jacobian is checked before its count is kept."""
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(2, graph.n_edges))
    reference = reference_jacobian(graph, values)
    rows = []
    for mode, method in METHODS:
        start = time.perf_counter()
        plan = optimize(graph, mode=mode, method=method, seed=seed)
        seconds = time.perf_counter() - start
        error = float(np.max(np.abs(plan.jacobian(values) - reference)) / max(1.0, np.max(np.abs(reference))))
        if error > 1e-9:
            raise AssertionError(f"{method} on {row}: Jacobian off by {error:.1e}")
        rows.append({**row, "mode": mode, "method": method, "mults": plan.mults, "adds": plan.adds,
                     "seconds": seconds, "max_rel_error": error})
        note(f"{row.get('family', row.get('problem')):<22} {row.get('size', ''):>4} "
             f"{method:<10} {plan.mults:>7} mults {seconds:7.2f} s")
    return rows


def measure(sizes: list[int], seeds: int, problems: list[str]) -> list[dict]:
    rows = []
    bar = progress_bar(total=len(FAMILIES) * len(sizes) * seeds + len(problems), desc="structure_methods",
                       unit="graph")
    for family, make in FAMILIES.items():
        for size in sizes:
            for seed in range(seeds):
                graph = make(size, seed)
                row = {"family": family, "size": size, "seed": seed,
                       "intermediates": len(graph.intermediates), "edges": graph.n_edges}
                rows += measure_graph(graph, row, seed)
                bar.update()
    for name in problems:
        graph = get(name).graph()  # structure only: the checks use random partials
        rows += measure_graph(graph, {"problem": name, "intermediates": len(graph.intermediates),
                                      "edges": graph.n_edges}, 0)
        bar.update()
    bar.close()
    return rows


def summary(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Geometric mean of each method's mults relative to Markowitz, per family and over the zoo."""
    ratios: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    markowitz = {_key(r): r["mults"] for r in rows if r["method"] == "markowitz"}
    for r in rows:
        group = r.get("family", "zoo")
        ratios[group][r["method"]].append(r["mults"] / markowitz[_key(r)])
    return {g: {m: float(np.exp(np.mean(np.log(v)))) for m, v in by.items()} for g, by in ratios.items()}


def _key(r: dict) -> tuple:
    return (r.get("family"), r.get("size"), r.get("seed"), r.get("problem"))


def plot(record: dict, path: str) -> None:
    """Per family, each method's mults relative to Markowitz against size (mean over seeds);
    the zoo as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = record["results"]["rows"]
    markowitz = {_key(r): r["mults"] for r in rows if r["method"] == "markowitz"}
    families = [f for f in FAMILIES if any(r.get("family") == f for r in rows)]
    zoo = [r for r in rows if "problem" in r]
    panels = len(families) + (1 if zoo else 0)
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.6), squeeze=False)
    methods = [m for _, m in METHODS]
    for ax, family in zip(axes[0], families, strict=False):
        for method in methods:
            by_size: dict[int, list[float]] = defaultdict(list)
            for r in rows:
                if r.get("family") == family and r["method"] == method:
                    by_size[r["size"]].append(r["mults"] / markowitz[_key(r)])
            sizes = sorted(by_size)
            ax.plot(sizes, [np.mean(by_size[s]) for s in sizes], marker="o", label=method)
        ax.set_title(family)
        ax.set_xlabel("intermediates (requested)")
        ax.set_ylabel("mults / Markowitz")
        ax.axhline(1.0, color="grey", lw=0.5)
    if zoo:
        ax = axes[0][-1]
        problems = sorted({r["problem"] for r in zoo})
        width = 0.8 / len(methods)
        for i, method in enumerate(methods):
            vals = [next(r["mults"] / markowitz[_key(r)] for r in zoo if r["problem"] == p and r["method"] == method)
                    for p in problems]
            ax.bar(np.arange(len(problems)) + i * width, vals, width, label=method)
        ax.set_xticks(np.arange(len(problems)) + 0.4, problems, rotation=60, ha="right", fontsize=7)
        ax.set_title("function zoo")
        ax.axhline(1.0, color="grey", lw=0.5)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def default_problems() -> list[str]:
    """The zoo's functions (AlphaGrad and MINPACK-2 tasks, not the scale-sized ones)."""
    scale = set(names("scale"))
    return [n for n in names() if n not in scale and {"alphagrad", "minpack2"} & set(get(n).tags)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=list(DEFAULT_SIZES))
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="seeds 0 .. N-1 per family and size")
    parser.add_argument("--problems", nargs="*", default=None, help="zoo problems (default: the functions)")
    parser.add_argument("--out", default="results")
    parser.add_argument("--figures", default="figures")
    parser.add_argument("--no-figure", action="store_true")
    args = parser.parse_args(argv)
    problems = default_problems() if args.problems is None else args.problems
    rows = measure(args.sizes, args.seeds, problems)
    record = write_record(
        os.path.join(args.out, "structure_methods.json"),
        "structure_methods",
        {"rows": rows, "geomean_vs_markowitz": summary(rows)},
        parameters={"sizes": args.sizes, "seeds": args.seeds, "problems": problems,
                    "methods": [f"{mode}:{m}" for mode, m in METHODS],
                    "families": {"random_dag": "random_dag(4, n, 4, max_preds=3, window=8)",
                                 "layered": "layered([4, n//2, n - n//2, 4], density=0.4)",
                                 "ladder": "ladder(n//2 + 1, 2)"}},
        seed=0,
    )
    for group, by in record["results"]["geomean_vs_markowitz"].items():
        print(group, "  ".join(f"{m} {v:.3f}" for m, v in by.items()))
    if not args.no_figure:
        plot(record, os.path.join(args.figures, "structure_methods.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
