"""Vertex elimination: apply an order of the intermediates, emit a Schedule.

Eliminating intermediate ``j`` connects each predecessor ``i`` to each
successor ``k`` with ``(i, k) += (j, k)·(i, j)`` and removes ``j``; its cost is
the Markowitz degree ``|P(j)|·|S(j)|`` at that moment (Griewank & Walther 2008,
§9.2; paper 003 §1).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from jacacc.eliminate.state import EliminationGraph, Recorder
from jacacc.errors import OrderError
from jacacc.graph import CompGraph, _show
from jacacc.schedule import Schedule, ScheduleBuilder

Node = Hashable


def validate_vertex_order(graph: CompGraph, order: Any) -> tuple[Node, ...]:
    """Check that ``order`` is a permutation of ``graph.intermediates``.

    Raises
    ------
    OrderError
        Naming the unknown, non-intermediate, repeated and missing vertices.
    """
    if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
        raise OrderError(f"a vertex elimination order is a list of intermediates, got {type(order).__name__}")
    order = tuple(order)
    intermediates = set(graph.intermediates)
    problems = []
    unknown = [v for v in order if not _is_node(graph, v)]
    if unknown:
        problems.append(f"unknown vertices {_show(unknown)}")
    endpoints = [v for v in order if _is_node(graph, v) and v not in intermediates]
    if endpoints:
        problems.append(f"not intermediates {_show(endpoints)}")
    seen: set[Node] = set()
    repeated = [v for v in order if _hashable(v) and (v in seen or seen.add(v))]
    if repeated:
        problems.append(f"repeated {_show(repeated)}")
    missing = [v for v in graph.intermediates if v not in seen]
    if missing:
        problems.append(f"missing {_show(missing)}")
    if problems:
        raise OrderError("the order is not a permutation of the intermediates: " + "; ".join(problems))
    return order


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _is_node(graph: CompGraph, v: Any) -> bool:
    return _hashable(v) and v in graph.digraph


def replay_vertices(graph: CompGraph, order: Sequence[Node], recorder: Recorder) -> tuple[Node, ...]:
    """Validate ``order`` and vertex-eliminate it, telling ``recorder`` every multiplication."""
    order = validate_vertex_order(graph, order)
    state = EliminationGraph(graph, recorder)
    for j in order:
        state.eliminate_vertex(j)
    return order


def eliminate_vertices(graph: CompGraph, order: Sequence[Node]) -> Schedule:
    """Vertex-eliminate ``order`` (a permutation of the intermediates) into a Schedule.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "v", 2.0), ("v", "y", 3.0), ("v", "z", 5.0)])
    >>> s = eliminate_vertices(g, ["v"])
    >>> s.mults, s.evaluate(g.partial_array()).ravel().tolist()
    (2, [6.0, 10.0])
    """
    builder = ScheduleBuilder(graph.inputs, graph.outputs, graph.edges)
    order = replay_vertices(graph, order, builder)
    return builder.build(mode="vertex", order=order)
