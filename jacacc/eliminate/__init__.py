"""Elimination engines: apply an order, emit a :class:`~jacacc.schedule.Schedule`.

Engines are registered by mode name (``"vertex"``, ``"edge"``; later
``"face"``).  An engine never chooses an order, it only applies one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jacacc.eliminate.edge import eliminate_edges, replay_edges
from jacacc.eliminate.face import (
    FACE_RULES,
    FaceRule,
    FaceStep,
    FillIn,
    eliminate_faces,
    face_rule,
    replay_faces,
)
from jacacc.eliminate.state import EdgeStep, EliminationGraph, Recorder
from jacacc.eliminate.vertex import eliminate_vertices, replay_vertices
from jacacc.errors import OrderError, RegistryError
from jacacc.graph import CompGraph, as_graph
from jacacc.schedule import OpCounter, Schedule

__all__ = ["FACE_RULES", "FaceRule", "face_rule", "EdgeStep", "EliminationGraph", "FaceStep", "FillIn", "count_ops", "eliminate", "eliminate_edges",
           "eliminate_faces", "eliminate_vertices", "get_engine", "modes", "register_engine"]

Engine = Callable[[CompGraph, Sequence[Any]], Schedule]
Replay = Callable[[CompGraph, Sequence[Any], Recorder], Any]


def _no_explicit_structure_order(graph: CompGraph, order: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
    """The ``"structure"`` mode's engine: its strategies (D*, blocks, levels)
    build their own schedules, so there is no order to apply."""
    raise OrderError(
        "mode 'structure' takes no explicit order: its methods (D*, blocks, levels) build their own "
        "schedules; call optimize(graph, method=NAME) with a method from jacacc.methods('structure')"
    )


_ENGINES: dict[str, Engine] = {"vertex": eliminate_vertices, "edge": eliminate_edges, "face": eliminate_faces,
                               "structure": _no_explicit_structure_order}
_REPLAYS: dict[str, Replay] = {"vertex": replay_vertices, "edge": replay_edges, "face": replay_faces,
                               "structure": _no_explicit_structure_order}


def register_engine(mode: str, engine: Engine, replay: Replay) -> None:
    """Register an elimination engine under a mode name.

    ``engine(graph, order) -> Schedule``; ``replay(graph, order, recorder)``
    validates and applies the order, telling ``recorder`` each multiplication
    (:func:`count_ops` uses it to cost an order without building a Schedule).
    """
    _ENGINES[mode] = engine
    _REPLAYS[mode] = replay


def modes() -> list[str]:
    """The registered elimination modes."""
    return list(_ENGINES)


def get_engine(mode: str) -> Engine:
    """The engine for ``mode``; an unknown mode is refused with the valid ones."""
    try:
        return _ENGINES[mode]
    except (KeyError, TypeError):
        raise RegistryError(f"unknown mode {mode!r}; valid modes: {', '.join(_ENGINES)}") from None


def eliminate(graph: Any, order: Sequence[Any], mode: str = "vertex", **engine_options: Any) -> Schedule:
    """Apply ``order`` to ``graph`` with the engine of ``mode`` and return the Schedule
    (``engine_options``: face mode's ``rule``).

    Examples
    --------
    >>> s = eliminate({"inputs": ["x"], "outputs": ["y"], "edges": [["x", "v", 2], ["v", "y", 3]]}, ["v"])
    >>> s.mults
    1
    """
    engine = get_engine(mode)
    return engine(as_graph(graph), order, **engine_options)


def count_ops(graph: Any, order: Sequence[Any], mode: str = "vertex", **engine_options: Any) -> OpCounter:
    """Multiplications, additions and fill-ins of ``order`` without building a Schedule
    (``engine_options``: face mode's ``rule``).

    Examples
    --------
    >>> c = count_ops({"inputs": ["x"], "outputs": ["y", "z"],
    ...                "edges": [["x", "v"], ["v", "y"], ["v", "z"]]}, ["v"])
    >>> c.mults, c.adds, c.fill_ins
    (2, 0, 2)
    """
    get_engine(mode)
    counter = OpCounter()
    _REPLAYS[mode](as_graph(graph), order, counter, **engine_options)
    return counter
