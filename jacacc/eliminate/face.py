"""Face elimination on the dual c-graph: one multiplication per step.

Naumann's rule (paper 003 §1, quoting Naumann 2004), for an intermediate face
``(a, b)`` of the dual c-graph (:mod:`jacacc.linegraph`), ``a`` standing for a
path piece ``i → j`` and ``b`` for ``j → k``:

1. if a vertex ``c`` has ``P(c) = P(a)`` and ``S(c) = S(b)``, **absorption**:
   ``c += b·a``; otherwise **fill-in**: a new vertex ``c`` with those
   predecessors and successors and the value ``b·a``;
2. remove the face ``(a, b)``;
3. a vertex left without predecessors or without successors lies on no
   source→sink path any more and is removed with its faces (the text's
   "remove if isolated", read so that every vertex keeps contributing — the
   same invariant :class:`~jacacc.graph.CompGraph` keeps by pruning);
   otherwise, if another vertex ``c`` has the same predecessors and
   successors, **merge**: ``c += a`` (an addition, no multiplication), remove
   ``a``;
4. the same for ``b``, and for every vertex whose neighbourhood step 3 changed.

Elimination is complete when no intermediate face is left; every remaining
vertex then joins one source to one sink and holds one Jacobian entry.

Fill-in vertices are :class:`FillIn` ``(src, dst, index)``, numbered in
creation order, so a face sequence that names them can be replayed.  A face
is a :class:`FaceStep` ``(left, right)`` of two dual-graph vertex ids; its
path in the LCG is ``(i, j, k)``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from typing import Any, NamedTuple

from jacacc.eliminate.state import apply_checked, read_sequence
from jacacc.errors import OrderError
from jacacc.graph import CompGraph
from jacacc.linegraph import Terminal
from jacacc.schedule import Schedule, ScheduleBuilder

Node = Hashable
Vertex = Hashable  # (u, v) for an LCG edge, a FillIn, or a Terminal


class FillIn(NamedTuple):
    """A vertex created by a fill-in: the path piece ``src → dst``, number ``index``."""

    src: Node
    dst: Node
    index: int

    def __str__(self) -> str:
        return f"{self.src}→{self.dst}#{self.index}"


class FaceStep(NamedTuple):
    """One face elimination: the face from vertex ``left`` to vertex ``right``."""

    left: Vertex
    right: Vertex

    @property
    def path(self) -> tuple[Node, Node, Node]:
        """``(i, j, k)``: the two consecutive LCG path pieces ``i → j → k`` the face joins."""
        return (_src(self.left), _dst(self.left), _dst(self.right))

    def __str__(self) -> str:
        return f"{_name(self.left)}|{_name(self.right)}"


def _src(v: Vertex) -> Node:
    return v.node if isinstance(v, Terminal) else v[0]


def _dst(v: Vertex) -> Node:
    return v.node if isinstance(v, Terminal) else v[1]


def _name(v: Vertex) -> str:
    if isinstance(v, (FillIn, Terminal)):
        return str(v)
    return f"{v[0]}→{v[1]}"


class FaceGraph:
    """The dual c-graph during face elimination (dict-of-ordered-sets, no NetworkX).

    ``recorder`` (a :class:`~jacacc.schedule.ScheduleBuilder` or
    :class:`~jacacc.schedule.OpCounter`) is told every multiplication
    (``multiply``), merge (``add``) and removal (``remove``); the dual-graph
    vertex ids serve as its slot names.
    """

    def __init__(self, graph: CompGraph, recorder: Any = None, observer: Any = None) -> None:
        self.recorder = recorder
        # optional: told of every face added and removed (linked(a, b) / unlinked(a, b)),
        # so a method can keep its own index of faces without rescanning the graph
        self.observer = observer
        self.intermediate_nodes = set(graph.intermediates)
        self.rank = {v: i for i, v in enumerate(graph.topological_order)}
        self.preds: dict[Vertex, dict[Vertex, None]] = {}
        self.succs: dict[Vertex, dict[Vertex, None]] = {}
        self.by_dst: dict[Node, dict[Vertex, None]] = {v: {} for v in graph.topological_order}
        self.fill_ins = 0
        out_of: dict[Node, list[Vertex]] = {v: [] for v in graph.topological_order}
        for x in graph.inputs:
            self._add_vertex(Terminal("source", x))
        for u, v in graph.edges:
            self._add_vertex((u, v))
            out_of[u].append((u, v))
        for y in graph.outputs:
            self._add_vertex(Terminal("sink", y))
            out_of[y].append(Terminal("sink", y))
        # a face joins each vertex ending at j to each vertex starting at j
        for a in list(self.preds):
            if not (isinstance(a, Terminal) and a.side == "sink"):
                for b in out_of[_dst(a)]:
                    self._link(a, b)

    # ------------------------------------------------------------------ structure
    def _add_vertex(self, v: Vertex) -> None:
        self.preds[v], self.succs[v] = {}, {}
        if not isinstance(v, Terminal):
            self.by_dst[_dst(v)][v] = None

    def _link(self, a: Vertex, b: Vertex) -> None:
        self.succs[a][b] = None
        self.preds[b][a] = None
        if self.observer is not None:
            self.observer.linked(a, b)

    def _unlink(self, a: Vertex, b: Vertex) -> None:
        del self.succs[a][b]
        del self.preds[b][a]
        if self.observer is not None:
            self.observer.unlinked(a, b)

    def is_intermediate_face(self, a: Vertex, b: Vertex) -> bool:
        return _dst(a) in self.intermediate_nodes and not isinstance(a, Terminal) and not isinstance(b, Terminal)

    def intermediate_faces(self) -> Iterator[FaceStep]:
        """Every face that can be eliminated now."""
        for a, out in self.succs.items():
            if isinstance(a, Terminal) or _dst(a) not in self.intermediate_nodes:
                continue
            for b in out:
                yield FaceStep(a, b)

    def faces_via(self, j: Node) -> list[FaceStep]:
        """The intermediate faces through LCG vertex ``j`` (the biclique of ``j``)."""
        return [FaceStep(a, b) for a in self.by_dst[j] for b in self.succs[a]]

    def vertex(self, src: Node, dst: Node) -> Vertex | None:
        """The live vertex for the path piece ``src → dst``, when there is exactly one."""
        found = [v for v in self.by_dst.get(dst, ()) if _src(v) == src]
        return found[0] if len(found) == 1 else None

    @property
    def done(self) -> bool:
        return next(self.intermediate_faces(), None) is None

    def check_face(self, step: FaceStep) -> str | None:
        """Why ``step`` cannot be eliminated now, or None."""
        a, b = step
        if a not in self.succs or b not in self.succs:
            return f"vertex {_name(a) if a not in self.succs else _name(b)} is not in the dual graph at this point"
        if b not in self.succs[a]:
            return f"there is no face from {_name(a)} to {_name(b)} at this point"
        if not self.is_intermediate_face(a, b):
            return f"the face {_name(a)}|{_name(b)} is not intermediate"
        return None

    # ------------------------------------------------------------------ elimination
    def _twin(self, preds: dict, succs: dict, exclude: Vertex | None = None) -> Vertex | None:
        """A live vertex other than ``exclude`` with exactly these predecessors and successors."""
        if not preds:
            return None
        for c in self.succs[next(iter(preds))]:
            if c != exclude and self.preds[c].keys() == preds.keys() and self.succs[c].keys() == succs.keys():
                return c
        return None

    def eliminate(self, a: Vertex, b: Vertex) -> None:
        """Eliminate the intermediate face ``(a, b)`` by Naumann's rule."""
        target = self._twin(self.preds[a], self.succs[b])
        if target is not None:  # absorption
            self._record("multiply", target, b, a, new=False)
        else:  # fill-in
            target = FillIn(_src(a), _dst(b), self.fill_ins)
            self.fill_ins += 1
            self._add_vertex(target)
            for p in self.preds[a]:
                self._link(p, target)
            for s in self.succs[b]:
                self._link(target, s)
            self._record("multiply", target, b, a, new=True)
        self._unlink(a, b)
        self._settle([a, b])

    def _settle(self, worklist: list[Vertex]) -> None:
        """Remove vertices on no source→sink path and merge twins, until nothing changes."""
        while worklist:
            v = worklist.pop()
            if v not in self.succs or isinstance(v, Terminal):
                continue
            neighbours = [*self.preds[v], *self.succs[v]]
            if not self.preds[v] or not self.succs[v]:
                self._remove_vertex(v)
            else:
                twin = self._twin(self.preds[v], self.succs[v], exclude=v)
                if twin is None:
                    continue
                self._record("add", twin, v)
                self._remove_vertex(v)
            worklist.extend(neighbours)

    def _remove_vertex(self, v: Vertex) -> None:
        for p in list(self.preds[v]):
            self._unlink(p, v)
        for s in list(self.succs[v]):
            self._unlink(v, s)
        del self.preds[v], self.succs[v], self.by_dst[_dst(v)][v]
        if self.recorder is not None:
            self.recorder.remove(v)

    def _record(self, what: str, *args: Any, **kwargs: Any) -> None:
        if self.recorder is not None:
            getattr(self.recorder, what)(*args, **kwargs)


def _is_vertex_id(v: Any) -> bool:
    """An LCG edge ``(u, v)``, a :class:`FillIn` or a :class:`Terminal`."""
    return isinstance(v, (FillIn, Terminal)) or (isinstance(v, tuple) and len(v) == 2)


def as_face_step(item: Any, position: int) -> FaceStep:
    """Normalise ``(left, right)`` vertex ids, or an ``(i, j, k)`` path of original edges."""
    if isinstance(item, (list, tuple)) and len(item) == 3 and not isinstance(item, FillIn):
        i, j, k = item
        return FaceStep((i, j), (j, k))
    if isinstance(item, (list, tuple)) and len(item) == 2:
        left, right = (tuple(v) if isinstance(v, list) else v for v in item)
        if all(_is_vertex_id(v) for v in (left, right)):
            return FaceStep(left, right)
    raise OrderError(
        f"step #{position} of the face sequence is {item!r}; a face is (left_vertex, right_vertex) "
        "or the path (i, j, k) of two original edges"
    )


def replay_faces(graph: CompGraph, sequence: Sequence[Any], recorder: Any) -> tuple[FaceStep, ...]:
    """Validate and apply a face elimination sequence, telling ``recorder`` every operation.

    Raises
    ------
    OrderError
        If a face is not present or not intermediate at its turn, or the
        sequence leaves intermediate faces.
    """
    steps = read_sequence(sequence, "face", as_face_step)
    state = FaceGraph(graph, recorder)
    apply_checked(steps, state.check_face, lambda step: state.eliminate(*step))
    left = list(state.intermediate_faces())
    if left:
        shown = ", ".join(str(f) for f in left[:6]) + (f", ... ({len(left)} in all)" if len(left) > 6 else "")
        raise OrderError(f"the face elimination sequence ends with intermediate faces left: {shown}")
    return steps


def eliminate_faces(graph: CompGraph, sequence: Sequence[Any]) -> Schedule:
    """Apply a face elimination sequence and return its Schedule (see :func:`replay_faces`).

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "v", 2.0), ("v", "y", 3.0), ("v", "z", 5.0)])
    >>> s = eliminate_faces(g, [("x", "v", "y"), ("x", "v", "z")])
    >>> s.mults, s.evaluate(g.partial_array()).ravel().tolist()
    (2, [6.0, 10.0])
    """
    builder = ScheduleBuilder(graph.inputs, graph.outputs, graph.edges)
    steps = replay_faces(graph, sequence, builder)
    return builder.build(mode="face", order=steps)
