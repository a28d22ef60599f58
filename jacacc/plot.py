"""Figures from experiment records (matplotlib is imported lazily, extra ``plot``).

Each function takes a record as written by :func:`jacacc.bench.write_record`
and a path, draws one figure and saves it; the same functions serve the
experiment scripts and the notebooks.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from jacacc.errors import require_extra

__all__ = ["plot_method_comparison", "plot_runtime"]


def _pyplot():
    matplotlib = require_extra("matplotlib", "plot")
    if os.environ.get("MPLBACKEND") is None:
        matplotlib.use("Agg")  # files only: experiments run headless
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | os.PathLike | None) -> None:
    if path is not None:
        os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
        fig.savefig(path, dpi=120, bbox_inches="tight")


def plot_method_comparison(record: dict[str, Any], path: str | os.PathLike | None = None):
    """Grouped bars: each method's multiplications relative to the best method, per problem and mode."""
    plt = _pyplot()
    rows = [r for r in record["results"]["rows"] if r.get("mults") is not None]
    modes = sorted({r["mode"] for r in rows}, key=["vertex", "edge", "face"].index)
    fig, axes = plt.subplots(len(modes), 1, figsize=(11, 3.2 * len(modes)), squeeze=False)
    for ax, mode in zip(axes[:, 0], modes, strict=True):
        by_problem: dict[str, dict[str, int]] = defaultdict(dict)
        for r in rows:
            if r["mode"] == mode:
                by_problem[r["problem"]][r["method"]] = r["mults"]
        problems = list(by_problem)
        methods = sorted({m for costs in by_problem.values() for m in costs})
        width = 0.8 / max(1, len(methods))
        for k, method in enumerate(methods):
            ratios = [
                by_problem[p][method] / max(1, min(by_problem[p].values())) if method in by_problem[p] else 0
                for p in problems
            ]
            ax.bar([i + k * width for i in range(len(problems))], ratios, width, label=method)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(problems))])
        ax.set_xticklabels(problems, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("mults / best")
        ax.set_title(f"{mode} elimination: multiplications relative to the best method")
        ax.set_yscale("log")
    axes[0, 0].legend(fontsize=7, ncol=4, loc="upper left")
    fig.tight_layout()
    _save(fig, path)
    return fig


def plot_runtime(record: dict[str, Any], path: str | os.PathLike | None = None):
    """Log-log heuristic run time against graph size, one line per (mode, method)."""
    plt = _pyplot()
    series: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in record["results"]["rows"]:
        series[f"{r['mode']} {r['method']}"].append((r["vertices"], r["seconds"]))
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for label, points in sorted(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("vertices in the graph")
    ax.set_ylabel("seconds to find the order")
    ax.set_title("Heuristic run time on random DAGs")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    return fig
