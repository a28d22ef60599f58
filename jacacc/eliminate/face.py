r"""Face elimination on the dual c-graph: one multiplication per step.

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

**Griewank–Walther variants** (paper 003 §1, after Griewank & Walther 2008,
p. 205).  Griewank and Walther add the *interior vertex split*: a copy of a
vertex with the same value and the same predecessor (or successor) set takes
over part of the other set.  Split followed by Naumann's merge yields
operations Naumann's rule does not have; paper 003 lists them, but its
extracted text lost their set notation, so the statements below are our
reconstruction from the split/merge semantics (each preserves every
source→sink path product, hence the Jacobian).  Let ``a|b`` be the face, its
product vertex ``n`` with ``P(n) = P(a)``, ``S(n) = S(b)``, and ``c`` a vertex
with ``P(c) = P(a)`` whose successors overlap ``S(b)`` (or, symmetrically,
``S(c) = S(b)`` and overlapping predecessors):

* **absorption without removal** (``S(b) ⊊ S(c)``): split ``c`` so that a copy
  ``c'`` has exactly ``S(b)``, and absorb into the copy: ``c' = c + b·a``;
  ``c`` keeps ``S(c) \ S(b)``.  One multiplication, one addition
  (:class:`~jacacc.schedule.SplitAdd`);
* **split fill-in** (``S(c) ⊊ S(b)``, or the sets overlap without either
  containing the other): the fill-in ``n = b·a`` is split along ``S(c)``;
  the part over ``S(c) ∩ S(b)`` is absorbed into ``c`` (``c += n`` when
  ``S(c) ⊆ S(b)``; otherwise into a copy ``c' = c + n`` while ``c`` keeps
  ``S(c) \ S(b)``), and ``n`` keeps ``S(b) \ S(c)``.  One multiplication,
  one addition;
* **partial merges** (step 3): a vertex ``v`` and a vertex ``c`` with
  ``P(c) = P(v)`` and ``S(c) ⊊ S(v)`` (or ``S(c) = S(v)`` and
  ``P(c) ⊊ P(v)``): ``c += v`` and ``v`` drops the faces to ``S(c)`` (from
  ``P(c)``); one addition, and faces that will never be eliminated.

These variants never cost more multiplications for the step itself; whether
they pay off depends on the rest of the sequence (a copy has its own faces).
Select them with a :class:`FaceRule` — by name (:data:`FACE_RULES`:
``"naumann"``, the default, ``"griewank_walther"`` for all three, or one
variant at a time) or as an object with the three flags.  Among several
candidate vertices ``c`` the one sharing the most neighbours is taken, the
first in creation order on ties, so a face sequence replays identically.

Fill-in vertices are :class:`FillIn` ``(src, dst, index)``, numbered in
creation order, so a face sequence that names them can be replayed.  A face
is a :class:`FaceStep` ``(left, right)`` of two dual-graph vertex ids; its
path in the LCG is ``(i, j, k)``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from jacacc.eliminate.state import apply_checked, read_sequence
from jacacc.errors import OrderError, RegistryError
from jacacc.graph import CompGraph
from jacacc.linegraph import Terminal
from jacacc.schedule import Schedule, ScheduleBuilder

Node = Hashable
Vertex = Hashable  # (u, v) for an LCG edge, a FillIn, or a Terminal


@dataclass(frozen=True)
class FaceRule:
    """Which face-elimination operations the engine may use (see the module docstring).

    Naumann's absorption, fill-in, removal and merge are always on; the three
    flags switch on the Griewank–Walther variants.

    Examples
    --------
    >>> face_rule("griewank_walther").split_fill_in, face_rule("naumann").split_fill_in
    (True, False)
    """

    name: str = "naumann"
    absorption_without_removal: bool = False
    split_fill_in: bool = False
    partial_merge: bool = False

    @property
    def splits(self) -> bool:
        return self.absorption_without_removal or self.split_fill_in


FACE_RULES: dict[str, FaceRule] = {
    "naumann": FaceRule("naumann"),
    "griewank_walther": FaceRule("griewank_walther", True, True, True),
    "absorption_without_removal": FaceRule("absorption_without_removal", absorption_without_removal=True),
    "split_fill_in": FaceRule("split_fill_in", split_fill_in=True),
    "partial_merge": FaceRule("partial_merge", partial_merge=True),
}


def face_rule(rule: str | FaceRule | None) -> FaceRule:
    """A :class:`FaceRule` from its name (see :data:`FACE_RULES`), or the rule itself."""
    if rule is None:
        return FACE_RULES["naumann"]
    if isinstance(rule, FaceRule):
        return rule
    try:
        return FACE_RULES[rule]
    except (KeyError, TypeError):
        raise RegistryError(f"unknown face rule {rule!r}; valid rules: {', '.join(FACE_RULES)}") from None


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
    (``multiply``), merge (``add``), split absorption (``sum``) and removal
    (``remove``); the dual-graph vertex ids serve as its slot names.
    ``rule`` selects the operations (:func:`face_rule`).
    """

    def __init__(
        self, graph: CompGraph, recorder: Any = None, observer: Any = None, rule: str | FaceRule | None = None
    ) -> None:
        self.rule = face_rule(rule)
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

    def copy(self, recorder: Any = None) -> FaceGraph:
        """An independent copy (adjacency in the same insertion order, the same fill-in
        counter, so it names new vertices as the original would), with ``recorder``
        and no observer; the parts no elimination changes are shared."""
        new = object.__new__(FaceGraph)
        new.__dict__.update(self.__dict__)
        new.preds = {v: dict(p) for v, p in self.preds.items()}
        new.succs = {v: dict(s) for v, s in self.succs.items()}
        new.by_dst = {n: dict(d) for n, d in self.by_dst.items()}
        new.recorder, new.observer = recorder, None
        return new

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

    def _unlink_pair(self, v: Vertex, other: Vertex, *, forward: bool) -> None:
        """Remove the face ``v → other`` (``forward``) or ``other → v``."""
        if forward:
            self._unlink(v, other)
        else:
            self._unlink(other, v)

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

    def vertices(self, src: Node, dst: Node) -> list[Vertex]:
        """The live vertices for the path piece ``src → dst`` (one under Naumann's rule;
        split copies add more under the Griewank–Walther variants)."""
        return [v for v in self.by_dst.get(dst, ()) if _src(v) == src]

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
        """Eliminate the intermediate face ``(a, b)`` by the engine's rule."""
        touched = [a, b]
        target = self._twin(self.preds[a], self.succs[b])
        partner = None if target is not None or not self.rule.splits else self._split_partner(a, b)
        if target is not None:  # absorption
            self._record("multiply", target, b, a, new=False)
        elif partner is not None:  # a Griewank–Walther split absorption or split fill-in
            touched += self._split_eliminate(a, b, *partner)
        else:  # fill-in
            target = self._new_vertex(_src(a), _dst(b), self.preds[a], self.succs[b])
            self._record("multiply", target, b, a, new=True)
            touched.append(target)  # no twin by construction, but partial merges may apply
        self._unlink(a, b)
        self._settle(touched)

    def _new_vertex(self, src: Node, dst: Node, preds: Any, succs: Any) -> FillIn:
        v = FillIn(src, dst, self.fill_ins)
        self.fill_ins += 1
        self._add_vertex(v)
        for p in list(preds):
            self._link(p, v)
        for s in list(succs):
            self._link(v, s)
        return v

    def _split_partner(self, a: Vertex, b: Vertex) -> tuple[Vertex, str] | None:
        """The vertex ``c`` a split variant of the rule combines the product ``b·a`` with:
        ``(c, "succs")`` when ``P(c) = P(a)`` and successors overlap ``S(b)``,
        ``(c, "preds")`` when ``S(c) = S(b)`` and predecessors overlap ``P(a)``;
        the most shared neighbours win, then creation order."""
        best, best_shared = None, 0
        sides = (("succs", self.preds[a], self.succs[b]), ("preds", self.succs[b], self.preds[a]))
        for side, fixed, varying in sides:
            varying_of = self.succs if side == "succs" else self.preds
            for c in self._sharing(fixed, by_succs=side == "succs", exclude=(a, b)):
                theirs = varying_of[c]
                shared = sum(1 for v in varying if v in theirs)
                if not shared or not self._split_allowed(len(varying), len(theirs), shared):
                    continue
                if shared > best_shared:
                    best, best_shared = (c, side), shared
        return best

    def _sharing(self, fixed: dict, *, by_succs: bool, exclude: tuple[Vertex, ...]) -> Iterator[Vertex]:
        """Live non-terminal vertices, other than ``exclude``, whose predecessors
        (``by_succs``) or successors are exactly ``fixed`` (non-empty): the
        candidates for a split or a partial merge, in creation order."""
        fixed_of, neighbours = (self.preds, self.succs) if by_succs else (self.succs, self.preds)
        for c in neighbours[next(iter(fixed))]:
            if c not in exclude and not isinstance(c, Terminal) and fixed_of[c].keys() == fixed.keys():
                yield c

    def _split_allowed(self, n_product: int, n_partner: int, shared: int) -> bool:
        if shared == n_product and shared == n_partner:  # a twin: Naumann's absorption handles it
            return False
        if shared == n_product:  # S(b) ⊊ S(c)
            return self.rule.absorption_without_removal
        return self.rule.split_fill_in  # S(c) ⊊ S(b), or a proper overlap

    def _split_eliminate(self, a: Vertex, b: Vertex, c: Vertex, side: str) -> list[Vertex]:
        """Eliminate face ``(a, b)`` combining its product with ``c`` (module docstring);
        returns the vertices whose neighbourhood changed."""
        by_succs = side == "succs"
        fixed = list(self.preds[a] if by_succs else self.succs[b])
        varying = self.succs[b] if by_succs else self.preds[a]
        theirs = self.succs[c] if by_succs else self.preds[c]
        shared = [v for v in varying if v in theirs]
        only_product = [v for v in varying if v not in theirs]
        only_partner = [v for v in theirs if v not in varying]

        def vertex_over(part: list[Vertex]) -> FillIn:
            return self._new_vertex(_src(a), _dst(b), fixed if by_succs else part, part if by_succs else fixed)

        product = vertex_over(only_product)  # with no neighbours of its own, a temporary
        self._record("multiply", product, b, a, new=True)
        touched: list[Vertex] = [c]
        if not only_partner:  # S(c) ⊊ S(b): c absorbs the product over its whole set
            self._record("add", c, product)
        else:  # c keeps its other neighbours; a copy takes the shared ones, c + product
            copy = vertex_over(shared)
            self._record("sum", copy, c, product)
            for v in shared:
                self._unlink_pair(c, v, forward=by_succs)
            touched.append(copy)
        if only_product:
            touched.append(product)
        else:
            self._remove_vertex(product)
        return touched

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
                if twin is not None:
                    self._record("add", twin, v)
                    self._remove_vertex(v)
                elif not self.rule.partial_merge or not self._partial_merge(v):
                    continue
                else:
                    worklist.append(v)
            worklist.extend(neighbours)

    def _partial_merge(self, v: Vertex) -> bool:
        """One partial merge involving ``v``, if any applies: of two vertices with the same
        predecessors (successors) whose successor (predecessor) sets are nested, the
        smaller absorbs the larger's value and the larger drops the shared faces."""
        for by_succs in (True, False):
            fixed, varying_of = (self.preds[v], self.succs) if by_succs else (self.succs[v], self.preds)
            for c in self._sharing(fixed, by_succs=by_succs, exclude=(v,)):
                mine, theirs = varying_of[v].keys(), varying_of[c].keys()
                if not theirs:  # c is dead, waiting in the worklist to be removed
                    continue
                if mine < theirs:
                    small, large = v, c
                elif theirs < mine:
                    small, large = c, v
                else:
                    continue
                self._record("add", small, large)
                for u in list(varying_of[small]):
                    self._unlink_pair(large, u, forward=by_succs)
                return True
        return False

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


def replay_faces(
    graph: CompGraph, sequence: Sequence[Any], recorder: Any, rule: str | FaceRule | None = None
) -> tuple[FaceStep, ...]:
    """Validate and apply a face elimination sequence, telling ``recorder`` every operation.

    ``rule`` selects Naumann's rule (default) or Griewank–Walther variants
    (:func:`face_rule`); a sequence names fill-in vertices, so it replays
    under the rule it was made for.

    Raises
    ------
    OrderError
        If a face is not present or not intermediate at its turn, or the
        sequence leaves intermediate faces.
    """
    steps = read_sequence(sequence, "face", as_face_step)
    state = FaceGraph(graph, recorder, rule=rule)
    apply_checked(steps, state.check_face, lambda step: state.eliminate(*step))
    left = list(state.intermediate_faces())
    if left:
        shown = ", ".join(str(f) for f in left[:6]) + (f", ... ({len(left)} in all)" if len(left) > 6 else "")
        raise OrderError(f"the face elimination sequence ends with intermediate faces left: {shown}")
    return steps


def eliminate_faces(graph: CompGraph, sequence: Sequence[Any], rule: str | FaceRule | None = None) -> Schedule:
    """Apply a face elimination sequence and return its Schedule (see :func:`replay_faces`).

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "v", 2.0), ("v", "y", 3.0), ("v", "z", 5.0)])
    >>> s = eliminate_faces(g, [("x", "v", "y"), ("x", "v", "z")])
    >>> s.mults, s.evaluate(g.partial_array()).ravel().tolist()
    (2, [6.0, 10.0])
    """
    builder = ScheduleBuilder(graph.inputs, graph.outputs, graph.edges)
    steps = replay_faces(graph, sequence, builder, rule)
    return builder.build(mode="face", order=steps)
