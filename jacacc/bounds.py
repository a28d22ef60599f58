"""Bounds that follow from a graph's structure alone (no order, no search).

They sit below both :mod:`jacacc.api` and :mod:`jacacc.orders`: the search
methods cap and prove their results with them, and :func:`jacacc.optimize`
reports them on every :class:`~jacacc.api.Plan`.
"""

from __future__ import annotations

from collections.abc import Hashable

from jacacc.graph import CompGraph

__all__ = ["structural_lower_bound"]

Node = Hashable


def structural_lower_bound(graph: CompGraph, mode: str = "vertex") -> int:
    """A proven lower bound on the multiplications of any ``mode`` elimination.

    Every (input, output) pair joined by a path of length ≥ 2 needs at least
    one multiplication targeting its Jacobian entry (a fill-in creating it or
    an absorption into it), and distinct entries are distinct targets.  In
    vertex and edge mode every intermediate also needs at least one step of
    cost ≥ 1 (a pruned graph keeps every intermediate on a path), and each
    step removes at most one intermediate.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "v"), ("v", "y"), ("v", "z")])
    >>> structural_lower_bound(g)
    2
    """
    domain = graph.index_domain()
    inputs = set(graph.inputs)
    long_pairs = 0
    for out in graph.outputs:
        reach: set[Node] = set()
        for p in graph.predecessors(out):
            if p not in inputs:
                reach |= domain[p]
        long_pairs += len(reach)
    if mode in ("vertex", "edge"):
        return max(long_pairs, len(graph.intermediates))
    return long_pairs
