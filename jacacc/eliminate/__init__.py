"""Elimination engines: apply an order, emit a :class:`~jacacc.schedule.Schedule`.

Engines are registered by mode name (``"vertex"``, ``"edge"``; later
``"face"``).  An engine never chooses an order, it only applies one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jacacc.eliminate.edge import eliminate_edges
from jacacc.eliminate.state import EdgeStep, EliminationGraph
from jacacc.eliminate.vertex import eliminate_vertices
from jacacc.errors import RegistryError
from jacacc.graph import CompGraph, as_graph
from jacacc.schedule import Schedule

__all__ = ["EdgeStep", "EliminationGraph", "eliminate", "eliminate_edges", "eliminate_vertices",
           "get_engine", "modes", "register_engine"]

Engine = Callable[[CompGraph, Sequence[Any]], Schedule]
_ENGINES: dict[str, Engine] = {"vertex": eliminate_vertices, "edge": eliminate_edges}


def register_engine(mode: str, engine: Engine) -> None:
    """Register an elimination engine under a mode name."""
    _ENGINES[mode] = engine


def modes() -> list[str]:
    """The registered elimination modes."""
    return list(_ENGINES)


def get_engine(mode: str) -> Engine:
    """The engine for ``mode``; an unknown mode is refused with the valid ones."""
    try:
        return _ENGINES[mode]
    except (KeyError, TypeError):
        raise RegistryError(f"unknown mode {mode!r}; valid modes: {', '.join(_ENGINES)}") from None


def eliminate(graph: Any, order: Sequence[Any], mode: str = "vertex") -> Schedule:
    """Apply ``order`` to ``graph`` with the engine of ``mode`` and return the Schedule.

    Examples
    --------
    >>> s = eliminate({"inputs": ["x"], "outputs": ["y"], "edges": [["x", "v", 2], ["v", "y", 3]]}, ["v"])
    >>> s.mults
    1
    """
    engine = get_engine(mode)
    return engine(as_graph(graph), order)
