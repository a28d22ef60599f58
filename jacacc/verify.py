"""Independent reference checks: Bauer's path formula, finite differences, schedule checks.

These are deliberately written differently from the code they check:
:func:`bauer_jacobian` enumerates paths explicitly instead of propagating
tangents, :func:`central_differences` never looks at a graph.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from jacacc.errors import JacaccError
from jacacc.graph import CompGraph, as_graph, reference_jacobian
from jacacc.schedule import Schedule

__all__ = ["bauer_jacobian", "central_differences", "check_schedule", "count_paths"]

Node = Hashable


def count_paths(graph: CompGraph) -> int:
    """Number of input→output paths (the number of terms in Bauer's formula)."""
    graph = as_graph(graph)
    paths: dict[Node, int] = {}
    for node in graph.topological_order:
        preds = graph.predecessors(node)
        paths[node] = 1 if node in graph.inputs else sum(paths[p] for p in preds)
    return sum(paths[o] for o in graph.outputs)


def bauer_jacobian(graph: Any, max_paths: int = 200_000) -> np.ndarray:
    """The Jacobian by Bauer's formula: for each (output, input) pair, the sum
    over all paths of the product of the partials along the path (paper 003 §3).

    Exponential in general; refuses graphs with more than ``max_paths`` paths.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("x", "b", 3.0), ("a", "y", 5.0), ("b", "y", 7.0)])
    >>> bauer_jacobian(g)
    array([[31.]])
    """
    graph = as_graph(graph)
    n_paths = count_paths(graph)
    if n_paths > max_paths:
        raise JacaccError(f"graph has {n_paths} input→output paths, more than max_paths={max_paths}")
    values = graph.partial_array()
    col = {v: c for c, v in enumerate(graph.inputs)}
    row = {v: r for r, v in enumerate(graph.outputs)}
    jac = np.zeros((len(graph.outputs), len(graph.inputs)))
    # depth-first enumeration of every path, carrying the running product
    stack: list[tuple[Node, Node, float]] = [(x, x, 1.0) for x in graph.inputs]
    while stack:
        origin, node, product = stack.pop()
        if node in row:
            jac[row[node], col[origin]] += product
            continue
        for succ in graph.successors(node):
            stack.append((origin, succ, product * values[graph.edge_index(node, succ)]))
    return jac


def central_differences(f: Callable[[np.ndarray], Any], x: Any, step: float = 1e-6) -> np.ndarray:
    """Jacobian of ``f`` at ``x`` by central differences, shape ``(m, n)``.

    ``f`` maps a vector of length n to anything ``numpy.ravel`` turns into a
    vector of length m.  The step is scaled by ``max(1, |x_j|)``.
    """
    x = np.asarray(x, dtype=float).ravel()
    cols = []
    for j in range(x.size):
        h = step * max(1.0, abs(x[j]))
        up, down = x.copy(), x.copy()
        up[j] += h
        down[j] -= h
        diff = np.ravel(np.asarray(f(up), dtype=float)) - np.ravel(np.asarray(f(down), dtype=float))
        cols.append(diff / (2 * h))
    return np.stack(cols, axis=-1) if cols else np.zeros((0, 0))


def check_schedule(schedule: Schedule, graph: Any, partials: Any = None, rtol: float = 1e-10) -> float:
    """Evaluate ``schedule`` and compare with :func:`~jacacc.graph.reference_jacobian`.

    Returns the largest relative error; raises ``AssertionError`` above ``rtol``.
    The error is measured relative to ``max(1, max |J|)`` of the reference.
    """
    graph = as_graph(graph)
    values = graph.partial_array() if partials is None else np.asarray(partials, dtype=float)
    got = schedule.evaluate(values)
    want = reference_jacobian(graph, values)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    err = float(np.max(np.abs(got - want), initial=0.0)) / scale
    if not err <= rtol:
        raise AssertionError(f"schedule Jacobian differs from the reference: relative error {err:.3e} > {rtol:.1e}")
    return err
