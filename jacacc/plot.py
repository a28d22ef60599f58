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
from jacacc.structure import depth_levels  # paper 003 Def. 3.4; re-exported for the figure code

__all__ = ["depth_levels", "plot_heuristic_scale", "plot_method_comparison", "plot_runtime"]


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
    modes = sorted({r["mode"] for r in rows}, key=lambda m: (["vertex", "edge", "face", "structure"] + [m]).index(m))
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


def plot_heuristic_scale(record: dict[str, Any], path: str | os.PathLike | None = None):
    """Two log-x panels of ``experiments/heuristic_scale.py``'s record: each method's own cost over the
    better of forward and reverse mode, and its time to find the order, against vertices."""
    plt = _pyplot()
    methods = record["parameters"]["methods"]
    rows = [r for r in record["results"]["rows"] if r["method"] in methods]
    fig, (cost, seconds) = plt.subplots(1, 2, figsize=(11, 4.2))
    for method in methods:
        points = sorted((r["vertices"], r["over_best_baseline"], r["seconds"]) for r in rows if r["method"] == method)
        if points:
            cost.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=method)
            seconds.plot([p[0] for p in points], [p[2] for p in points], marker="o", label=method)
    cost.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="better of forward and reverse")
    for ax, label in ((cost, "multiplications / better of forward and reverse"), (seconds, "seconds to find the order")):
        ax.set_xscale("log")
        ax.set_xlabel("vertices")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    seconds.set_yscale("log")
    cost.legend(fontsize=8)
    fig.suptitle(f"Greedy vertex orders on {record['parameters']['generator']}")
    fig.tight_layout()
    _save(fig, path)
    return fig


def _layered_positions(level: dict[Any, int]) -> dict[Any, tuple[float, float]]:
    by_level: dict[int, list[Any]] = defaultdict(list)
    for v, lv in level.items():
        by_level[lv].append(v)
    pos = {}
    for lv, nodes in by_level.items():
        for i, v in enumerate(nodes):
            pos[v] = (i - (len(nodes) - 1) / 2, -lv)
    return pos


def plot_dual_graph(graph: Any, path: str | os.PathLike | None = None, title: str = ""):
    """An LCG (left) and its dual c-graph (right), both laid out by depth level.

    Data flows downward.  In the dual graph each vertex sits at the midpoint of
    the LCG edge it stands for, sources above the inputs and sinks below the
    outputs; intermediate faces are drawn solid, faces at terminals dashed.
    """
    import networkx as nx

    from jacacc.graph import as_graph
    from jacacc.linegraph import Terminal, line_graph

    plt = _pyplot()
    graph = as_graph(graph)
    pos = _layered_positions(depth_levels(graph))
    dual = line_graph(graph)
    dual_pos = {}
    for v, data in dual.nodes(data=True):
        if isinstance(v, Terminal):
            x, y = pos[v.node]
            dual_pos[v] = (x, y + (0.6 if v.side == "source" else -0.6))
        else:
            (x0, y0), (x1, y1) = pos[data["src"]], pos[data["dst"]]
            dual_pos[v] = ((x0 + x1) / 2, (y0 + y1) / 2)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5))
    colors = ["#9ecae1" if graph.kind(v) == "input" else "#fdae6b" if graph.kind(v) == "output" else "#d9d9d9"
              for v in graph.digraph.nodes]
    nx.draw_networkx(graph.digraph, pos, ax=left, node_color=colors, node_size=500, font_size=9, arrowsize=12)
    edge_labels = {(u, v): f"{p:g}" for u, v, p in graph.digraph.edges(data="partial") if isinstance(p, float)}
    nx.draw_networkx_edge_labels(graph.digraph, pos, edge_labels=edge_labels, ax=left, font_size=7)
    left.set_title("linearized computational graph")
    names = {v: (str(v) if isinstance(v, Terminal) else f"{v[0]}{v[1]}") for v in dual.nodes}
    inner = [(a, b) for a, b, d in dual.edges(data=True) if d["intermediate"]]
    outer = [(a, b) for a, b, d in dual.edges(data=True) if not d["intermediate"]]
    dual_colors = ["#ffffff" if isinstance(v, Terminal) else "#c7e9c0" for v in dual.nodes]
    nx.draw_networkx_nodes(dual, dual_pos, ax=right, node_color=dual_colors, edgecolors="#555555", node_size=600)
    nx.draw_networkx_labels(dual, dual_pos, labels=names, ax=right, font_size=8)
    nx.draw_networkx_edges(dual, dual_pos, edgelist=inner, ax=right, arrowsize=12, node_size=600)
    nx.draw_networkx_edges(dual, dual_pos, edgelist=outer, ax=right, style="dashed", alpha=0.5, node_size=600)
    right.set_title("dual c-graph: vertices = edges, edges = faces")
    for ax in (left, right):
        ax.set_axis_off()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)
    return fig
