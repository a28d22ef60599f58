"""Derivatives of tensor expressions by vertex elimination on the tensor graph (paper 002 §3).

Forward mode eliminates the graph's vertices from the inputs on (each vertex's
pushforward, Theorems 5-7), reverse mode from the outputs back (pullbacks,
Theorems 8-10), and cross-country mode in any other order.  Paper 002's rule
(:func:`cross_country_order`) multiplies the factors of lowest tensor order
first — vectors before matrices — so chains of elementwise functions collapse
to vector products before they meet a matrix.  Every vertex method of
jacacc's registry (``markowitz`` with FLOP costs, ``min_fill``,
``exhaustive``, ``cpsat``, …) is also an order: :func:`elimination_order`.

Whatever the order, the result is a sum of the same products: the derivative
is the same, only its cost differs.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Any

import networkx as nx

from jacacc.eliminate.state import EliminationGraph
from jacacc.errors import RegistryError
from jacacc.tensor.graph import TensorGraph
from jacacc.tensor.linear import LinearPartial, Partial, accumulate_by_sweeps

__all__ = ["BUILTIN_MODES", "cross_country_order", "derivative_factors", "elimination_order", "tensor_modes"]

BUILTIN_MODES = ("forward", "reverse", "cross_country")


def tensor_modes() -> list[str]:
    """Every ``mode=`` the tensor API takes: forward, reverse, cross_country and
    the vertex methods of :func:`jacacc.methods`.

    >>> tensor_modes()[:3]
    ['forward', 'reverse', 'cross_country']
    """
    from jacacc.orders import methods

    return [*BUILTIN_MODES, *(m for m in methods("vertex") if m not in BUILTIN_MODES)]


def _cross_country_key(state: EliminationGraph, j: Hashable) -> tuple:
    """Lowest tensor order of the products first, fewest FLOPs next, the latest vertex last."""
    algebra = state.algebra
    highest = max((algebra.max_order(i, j, k) for i in state.preds[j] for k in state.succs[j]), default=0)
    return (highest, state.markowitz(j), -state.rank[j])


def cross_country_order(graph: TensorGraph) -> list[Hashable]:
    """Paper 002's cross-country rule: eliminate, at each step, the vertex whose
    products have the lowest tensor order (vectors first, then matrices, …),
    fewest FLOPs next, the latest vertex last."""
    from jacacc.orders.heuristics import greedy_vertex_order

    return greedy_vertex_order(graph, _cross_country_key)


def elimination_order(graph: TensorGraph, mode: str, seed: int | None = 0) -> list[Hashable]:
    """The order of the intermediates that ``mode`` eliminates.

    Raises
    ------
    RegistryError
        For an unknown mode, listing the valid ones.
    """
    if mode == "forward":
        return list(graph.intermediates)
    if mode == "reverse":
        return list(reversed(graph.intermediates))
    if mode == "cross_country":
        return cross_country_order(graph)
    valid = tensor_modes()
    if not isinstance(mode, str) or mode not in valid:
        raise RegistryError(f"unknown mode {mode!r}; valid modes: {', '.join(valid)}")
    from jacacc.orders.registry import find_order

    return list(find_order(graph, "vertex", mode, seed, {}).order)


def _next_to_a_map(algebra: Any) -> set[Hashable]:
    """The vertices at either end of a general function's edge (a linear map).

    The set holds for the whole elimination: these vertices are never eliminated, so
    their maps are never composed away, and a product or sum of factors is a factor,
    so no new map appears (an absorption into a map's edge keeps its ends)."""
    return {v for edge, p in algebra.factors.items() if isinstance(p, LinearPartial) for v in edge}


def _adds_edges(state: EliminationGraph, j: Hashable) -> bool:
    """Whether eliminating ``j`` now leaves more edges than it removes (its fill-in exceeds its degree)."""
    return state.vertex_fill_in(j) > len(state.preds[j]) + len(state.succs[j])


def derivative_factors(graph: TensorGraph, mode: str = "reverse", order: Any = None) -> tuple[dict, int, list]:
    """Eliminate every intermediate of ``graph``: returns the factors left on the
    input → output edges (``{(input, output): Factor or FactorSum}``), the FLOPs
    of the products built, and the order used (``order`` overrides ``mode``).

    Vertices next to a general function's edge (:mod:`jacacc.tensor.operators`)
    are not eliminated: the order eliminates the others, and the rest is
    accumulated by sweeps of pullbacks or pushforwards
    (:func:`~jacacc.tensor.linear.accumulate_by_sweeps`).  Where such edges exist, a vertex whose
    elimination would add more edges than it removes stays for the sweeps too: the kept vertices
    cut the graph, and eliminating past them joins each vertex of a recurrence (a Kalman filter's
    covariance) to every kept vertex downstream, O(T²) products for T steps, where the sweeps pay
    O(T)."""
    from jacacc.eliminate.vertex import validate_vertex_order

    algebra = graph.edge_algebra()
    state = EliminationGraph(graph, algebra)
    # Vertices touching a general function's edge (a linear map) stay: eliminating them
    # would compose maps along every path; the residual graph is accumulated by sweeps.
    operators = algebra.lazy_sums
    kept = _next_to_a_map(algebra)

    def eliminable(j: Hashable) -> bool:
        return j not in kept and not _adds_edges(state, j)

    if operators and order is None and mode == "cross_country":
        # the rule run on the graph itself, among the vertices it may eliminate: simulating the
        # elimination of all of them first fills in the whole recurrence (O(T²) keys)
        order = _greedy_among(state, _cross_country_key, eliminable)
    else:
        order = elimination_order(graph, mode) if order is None else list(validate_vertex_order(graph, order))
        for j in order:
            if not operators or eliminable(j):
                state.eliminate_vertex(j)
    factors: dict[tuple[Hashable, Hashable], Partial] = dict(algebra.factors)
    if operators:
        topological = [v for v in nx.topological_sort(nx.DiGraph(list(factors)))]
        factors = accumulate_by_sweeps(factors, list(graph.inputs), list(graph.outputs), topological)
    return factors, algebra.flops, order


def _greedy_among(state: EliminationGraph, key: Any, eliminable: Any) -> list[Hashable]:
    """Eliminate on ``state``, at each step, the vertex ``eliminable`` allows with the lowest ``key``,
    until none is allowed; returns the vertices eliminated, in order.

    Keys and eligibility are refreshed on the vertices an elimination touches.  A vertex's
    fill-in also falls when an edge appears between two of its neighbours; it is not
    refreshed for that (refreshing the neighbours' neighbours revisits the high-degree
    vertices of a recurrence at every step), so such a vertex may stay for the sweeps."""
    # one live heap entry per vertex: ``pushed[j]`` is the key of the newest; older entries of
    # ``j`` are dropped when popped (re-keying them would multiply the entries of a vertex
    # touched often, a recurrence's, and with them the key evaluations: O(T²) for T steps)
    pushed: dict[Hashable, tuple] = {}

    def push(j: Hashable) -> None:
        pushed[j] = k = key(state, j)
        heapq.heappush(heap, (k, state.rank[j], j))

    heap: list[tuple] = []
    for j in state.intermediates:
        if eliminable(j):
            push(j)
    order: list[Hashable] = []
    while heap:
        k, rank, j = heapq.heappop(heap)
        if j not in state.intermediates or pushed.get(j) != k:
            continue
        del pushed[j]
        if not eliminable(j):
            continue
        if key(state, j) != k:  # stale: its fill-in changed by an elimination not next to it
            push(j)
            continue
        order.append(j)
        for t in state.eliminate_vertex(j):
            if t in state.intermediates and eliminable(t):
                push(t)
    return order
