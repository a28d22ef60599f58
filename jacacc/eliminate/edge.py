"""Edge elimination: apply a sequence of front/back eliminations, emit a Schedule.

Front elimination of ``(i, j)`` multiplies it into every out-edge of ``j``
(cost ``|S(j)|``); back elimination of ``(j, k)`` multiplies it into every
in-edge of ``j`` (cost ``|P(j)|``).  An intermediate left without in- or
out-edges is removed.  The sequence is complete when no intermediate is left
(Griewank & Walther 2008, §9.3; paper 003 §1).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from jacacc.eliminate.state import EdgeStep, EliminationGraph, Recorder, apply_checked, read_sequence
from jacacc.errors import OrderError
from jacacc.graph import CompGraph, _show
from jacacc.schedule import Schedule, ScheduleBuilder

Node = Hashable
DIRECTIONS = ("front", "back")


def as_edge_step(item: Any, position: int) -> EdgeStep:
    """Normalize ``((u, v), dir)``, ``(u, v, dir)`` or ``{"edge": [u, v], "direction": dir}``."""
    if isinstance(item, dict):
        item = (item.get("edge"), item.get("direction"))
    if isinstance(item, (list, tuple)) and len(item) == 3:
        item = ((item[0], item[1]), item[2])
    if not (
        isinstance(item, (list, tuple))
        and len(item) == 2
        and isinstance(item[0], (list, tuple))
        and len(item[0]) == 2
    ):
        raise OrderError(
            f"step #{position} of the edge elimination sequence is {item!r}; "
            "a step is ((src, dst), 'front' | 'back')"
        )
    (u, v), direction = item
    if direction not in DIRECTIONS:
        raise OrderError(f"step #{position} has direction {direction!r}; use 'front' or 'back'")
    return EdgeStep((u, v), direction)


def replay_edges(graph: CompGraph, sequence: Sequence[Any], recorder: Recorder) -> tuple[EdgeStep, ...]:
    """Validate and apply an edge elimination sequence, telling ``recorder`` every multiplication.

    Raises
    ------
    OrderError
        If a step names an edge not present at that point, eliminates toward a
        non-intermediate, or the sequence ends with intermediates left.
    """
    steps = read_sequence(sequence, "edge", as_edge_step)
    state = EliminationGraph(graph, recorder)
    apply_checked(steps, state.check_step, state.apply)
    if not state.done:
        raise OrderError(
            f"the edge elimination sequence ends with intermediates left: {_show(state.intermediates)}"
        )
    return steps


def eliminate_edges(graph: CompGraph, sequence: Sequence[Any]) -> Schedule:
    """Apply an edge elimination sequence and return its Schedule (see :func:`replay_edges`).

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "v", 2.0), ("v", "y", 3.0)])
    >>> s = eliminate_edges(g, [(("x", "v"), "front")])
    >>> s.mults, s.evaluate(g.partial_array()).item()
    (1, 6.0)
    """
    builder = ScheduleBuilder(graph.inputs, graph.outputs, graph.edges)
    steps = replay_edges(graph, sequence, builder)
    return builder.build(mode="edge", order=steps)
