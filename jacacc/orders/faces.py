"""Face-elimination orders: replays of vertex and edge orders, and a face-level greedy.

Every vertex or edge elimination is a chunking of face eliminations
(Griewank & Naumann 2002, quoted in paper 003 §1): eliminating vertex ``j``
is eliminating every face of its biclique; front-eliminating edge ``(i, j)``
is eliminating every face leaving the dual vertex of ``(i, j)``; back
elimination every face entering it.  Replaying an order face by face costs
exactly the same multiplications — the property the tests check — and is the
starting point from which face elimination can only improve.

``greedy`` is a face-level heuristic: it eliminates the face whose
elimination *grows the dual graph least*.  Each face costs one
multiplication, so the total cost is the number of faces ever eliminated:
the initial intermediate faces plus those every fill-in vertex brings.  The
key is therefore the net change in the number of intermediate faces —
faces a fill-in creates (``|P(a)| + |S(b)|``, counting only intermediate ones;
none for an absorption) minus the faces removed (the face itself, plus the
faces of ``a`` or ``b`` when the elimination leaves them dead).  Ties go
toward reverse mode (latest vertex first), as for Markowitz.  It scans all
faces at each step: O(faces) per step, meant for graphs up to a few thousand
faces.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from jacacc.eliminate.edge import as_edge_step, replay_edges
from jacacc.eliminate.face import FaceGraph, FaceRule, FaceStep
from jacacc.eliminate.vertex import validate_vertex_order
from jacacc.graph import CompGraph
from jacacc.linegraph import Terminal
from jacacc.orders.registry import get_method, register_explicit_order, register_method
from jacacc.schedule import OpCounter

__all__ = ["as_face_order", "faces_from_edge_order", "faces_from_vertex_order"]

Node = Hashable


def faces_from_vertex_order(
    graph: CompGraph, order: Sequence[Node], rule: str | FaceRule | None = None
) -> list[FaceStep]:
    """The face sequence that replays vertex elimination in ``order``: the faces
    through each vertex in turn, applied under ``rule`` (Naumann's by default).

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "b", 3.0), ("b", "y", 5.0)])
    >>> [str(f) for f in faces_from_vertex_order(g, ["b", "a"])]
    ['a→b|b→y', 'x→a|a→y#0']
    """
    order = validate_vertex_order(graph, order)
    state, steps = FaceGraph(graph, rule=rule), []
    for j in order:
        for step in state.faces_via(j):
            if state.check_face(step) is None:  # a merge may have removed it meanwhile
                state.eliminate(*step)
                steps.append(step)
    return steps


def faces_from_edge_order(
    graph: CompGraph, sequence: Sequence[Any], rule: str | FaceRule | None = None
) -> list[FaceStep]:
    """The face sequence that replays an edge elimination sequence.

    A front elimination of ``(i, j)`` becomes the faces leaving the dual
    vertex of the path piece ``i → j``; a back elimination of ``(j, k)`` the
    faces entering the vertex of ``j → k``.  Under Naumann's rule each path
    piece has one vertex; under a Griewank–Walther ``rule`` split copies may
    share a piece, and the step takes the faces of all of them.
    """
    edge_steps = [as_edge_step(item, pos) for pos, item in enumerate(sequence)]
    replay_edges(graph, edge_steps, OpCounter())  # validates the sequence with its own messages
    state, steps = FaceGraph(graph, rule=rule), []
    for (u, v), direction in edge_steps:
        vertices = state.vertices(u, v)
        if not vertices:  # every face-graph operation keeps the path pieces of edge elimination
            raise AssertionError(f"no dual vertex for edge ({u!r} → {v!r})")
        if direction == "front":
            faces = [FaceStep(x, b) for x in vertices for b in state.succs[x]]
        else:
            faces = [FaceStep(a, x) for x in vertices for a in state.preds[x]]
        for step in faces:
            if state.check_face(step) is None:
                state.eliminate(*step)
                steps.append(step)
    return steps


# ---------------------------------------------------------------------------- registered face methods
def _vertex_replay(name: str):
    def finder(graph: CompGraph, *, seed: int | None = None, rule: str | FaceRule | None = None) -> list[FaceStep]:
        return faces_from_vertex_order(graph, get_method(name, "vertex")(graph, seed=seed), rule)

    finder.__doc__ = f"Vertex elimination by the vertex method {name!r}, replayed face by face."
    return finder


register_method("forward", _vertex_replay("forward"), modes=["face"])
register_method("reverse", _vertex_replay("reverse"), modes=["face"])
register_method("vertex_markowitz", _vertex_replay("markowitz"), modes=["face"])


@register_method("edge_markowitz", modes=["face"])
def edge_markowitz_faces(
    graph: CompGraph, *, seed: int | None = None, rule: str | FaceRule | None = None
) -> list[FaceStep]:
    """Edge elimination by lowest Markowitz step, replayed face by face."""
    return faces_from_edge_order(graph, get_method("markowitz", "edge")(graph, seed=seed), rule)


def as_face_order(graph: CompGraph, order: Sequence[Any], rule: str | FaceRule | None = None) -> Sequence[Any]:
    """An explicit order given in face mode: a vertex order (node ids) or an edge
    sequence (steps with ``"front"``/``"back"``) is replayed as faces; anything
    else is taken as a face sequence.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "y", 3.0)])
    >>> [str(f) for f in as_face_order(g, ["a"])]
    ['x→a|a→y']
    """
    items = list(order) if isinstance(order, Sequence) and not isinstance(order, (str, bytes)) else None
    if not items:
        return order
    if all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in items):
        return faces_from_vertex_order(graph, items, rule)
    if all(_is_edge_step(item) for item in items):
        return faces_from_edge_order(graph, items, rule)
    return order


def _is_edge_step(item: Any) -> bool:
    if isinstance(item, dict):
        return item.get("direction") in ("front", "back")
    return isinstance(item, (list, tuple)) and len(item) in (2, 3) and item[-1] in ("front", "back")


register_explicit_order("face", as_face_order)


def _growth(state: FaceGraph, step: FaceStep) -> int:
    """Net change in intermediate faces if ``step`` is eliminated now (see the module docstring)."""
    a, b = step
    inter = state.intermediate_nodes

    def faces_in(v) -> int:
        return sum(1 for p in state.preds[v] if not isinstance(p, Terminal)) if v[0] in inter else 0

    def faces_out(v) -> int:
        return sum(1 for s in state.succs[v] if not isinstance(s, Terminal)) if v[1] in inter else 0

    created = 0 if state._twin(state.preds[a], state.succs[b]) is not None else faces_in(a) + faces_out(b)
    destroyed = 1
    if len(state.succs[a]) == 1:
        destroyed += faces_in(a)
    if len(state.preds[b]) == 1:
        destroyed += faces_out(b)
    return created - destroyed


@register_method("greedy", modes=["face"])
def greedy_faces(graph: CompGraph, *, seed: int | None = None, rule: str | FaceRule | None = None) -> list[FaceStep]:
    """Eliminate the face that grows the dual graph least, ties toward reverse mode
    (the growth is estimated by Naumann's rule whatever ``rule`` applies the step)."""
    state, steps = FaceGraph(graph, rule=rule), []
    rank = state.rank
    while True:
        best, best_key = None, None
        for step in state.intermediate_faces():
            i, j, k = step.path
            key = (_growth(state, step), -rank[j], -rank[k], -rank[i])
            if best_key is None or key < best_key:
                best, best_key = step, key
        if best is None:
            return steps
        state.eliminate(*best)
        steps.append(best)


class _IntermediateFaces:
    """An observer keeping the intermediate faces in an indexed set, for O(1)
    uniform sampling (swap-with-last removal)."""

    def __init__(self) -> None:
        self.state: FaceGraph | None = None
        self.items: list[FaceStep] = []
        self.position: dict[FaceStep, int] = {}

    def linked(self, a, b) -> None:
        if self.state is not None and self.state.is_intermediate_face(a, b):
            self.position[FaceStep(a, b)] = len(self.items)
            self.items.append(FaceStep(a, b))

    def unlinked(self, a, b) -> None:
        pos = self.position.pop(FaceStep(a, b), None)
        if pos is None:
            return
        last = self.items.pop()
        if last != (a, b):
            self.items[pos] = last
            self.position[last] = pos


@register_method("random", modes=["face"])
def random_faces(graph: CompGraph, *, seed: int | None = None, rule: str | FaceRule | None = None) -> list[FaceStep]:
    """A uniformly random intermediate face at each point (seeded)."""
    rng = np.random.default_rng(seed)
    pool = _IntermediateFaces()
    state = FaceGraph(graph, observer=pool, rule=rule)
    pool.state = state
    for step in state.intermediate_faces():
        pool.linked(*step)
    steps = []
    while pool.items:
        step = pool.items[int(rng.integers(len(pool.items)))]
        state.eliminate(*step)
        steps.append(step)
    return steps
