"""Structure strategies against the classic modes: forward, reverse, Markowitz, D*, blocks, levels.

Paper 003's question (§1, §3–5): do strategies that read the graph's
structure — D*'s factor subgraphs, the chains/blocks/pages factorization, the
local Jacobians between depth levels — need fewer multiplications than vertex
elimination in forward, reverse or Markowitz order?  Every count comes from
the schedule each method builds, whose Jacobian is checked against the
chain rule on random partials before it is recorded.  Writes
``results/structure_methods.json`` and ``figures/structure_methods.png``.
The measurements are one sweep (:mod:`jacacc.sweep`) of two grids: the
families (generator calls × seeds, each seed another graph) and the zoo.

    python experiments/structure_methods.py                       # all families and the zoo, ~minutes
    python experiments/structure_methods.py --sizes 10 --seeds 1 --problems RoeFlux_1d --out /tmp/r
    python experiments/structure_methods.py --workers 2           # or --scheduler tcp://host:8786
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

import numpy as np

from jacacc.bench import write_record
from jacacc.problems import get, names
from jacacc.progress import note
from jacacc.sweep import read_records, run
from jacacc.sweep.arguments import add_executor_arguments, executor_options, store_path

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
MAX_REL_ERROR = 1e-9

# each family: the generator call of a graph of "size" (about that many intermediates); the
# call names no seed, so the sweep passes each cell's seed
FAMILIES = {
    "random_dag": lambda n: f"random_dag(4, {n}, 4, max_preds=3, window=8)",
    "layered": lambda n: f"layered([4, {n // 2}, {n - n // 2}, 4], density=0.4)",
    "ladder": lambda n: f"ladder({max(2, n // 2 + 1)}, 2)",
}


def build_grids(sizes: list[int], seeds: int, problems: list[str]) -> tuple[list[dict], dict[str, tuple]]:
    """The families' grid (calls × seeds) and the zoo's (seed 0), and each family call's (family, size)."""
    methods = [f"{mode}:{method}" for mode, method in METHODS]
    calls = {FAMILIES[family](size): (family, size) for family in FAMILIES for size in sizes}
    grids = []
    if calls:
        grids.append({"name": "structure_methods families", "problems": list(calls), "methods": methods,
                      "seeds": list(range(seeds))})
    if problems:
        grids.append({"name": "structure_methods zoo", "problems": problems, "methods": methods, "seeds": [0]})
    return grids, calls


def to_row(record: dict, calls: dict[str, tuple]) -> dict:
    """A stored cell as the record's row; a schedule that fails the chain-rule check stops the experiment."""
    if record["status"] != "ok":
        raise RuntimeError(f"{record['method']} on {record['problem']} (seed {record['seed']}): "
                           f"{record['status']}: {record['error']}")
    result = record["result"]
    size = result["graph"]
    if record["problem"] in calls:
        family, requested = calls[record["problem"]]
        row = {"family": family, "size": requested, "seed": record["seed"]}
    else:
        row = {"problem": record["problem"]}
    if not result["max_rel_error"] <= MAX_REL_ERROR:
        raise AssertionError(f"{record['method']} on {row}: Jacobian off by {result['max_rel_error']:.1e}")
    return {**row, "intermediates": size["intermediates"], "edges": size["edges"], "mode": record["mode"],
            "method": record["method"], "mults": result["mults"], "adds": result["adds"],
            "seconds": result["optimize_seconds"], "max_rel_error": result["max_rel_error"]}


def _note(record: dict) -> None:
    result = record["result"] or {}
    note(f"{record['problem']:<48} {record['method']:<10} {result.get('mults', '-'):>7} mults "
         f"{result.get('optimize_seconds', 0.0):7.2f} s")


def measure(sizes: list[int], seeds: int, problems: list[str], store: str | None = None, **executor) -> list[dict]:
    """Every method on every family graph and zoo problem, as one sweep; rows in grid order."""
    grids, calls = build_grids(sizes, seeds, problems)
    if not grids:
        return []
    with store_path(store, "structure_methods") as path:
        run(grids, path, desc="structure_methods", on_record=_note, **executor)
        records = read_records(path, grids)
    return [to_row(r, calls) for r in records]


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
    add_executor_arguments(parser)
    args = parser.parse_args(argv)
    problems = default_problems() if args.problems is None else args.problems
    rows = measure(args.sizes, args.seeds, problems, args.store, **executor_options(args))
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
