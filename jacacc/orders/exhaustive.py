"""Exact optima on small graphs: exhaustive search for vertex, edge and face elimination.

An oracle, not a production method: it proves what the heuristics can only
approach, on graphs small enough to enumerate.  One method, ``exhaustive``,
is registered for the three modes; each returns an
:class:`~jacacc.orders.registry.OrderResult` with ``optimal=True`` and
``lower_bound`` equal to the optimal number of multiplications, so that
``jacacc.optimize(g, mode=m, method="exhaustive")`` reports a plan whose
cost meets its bound.

How each mode is searched, and why that search is exact:

* **vertex** — the graph after eliminating a set ``S`` of intermediates does
  not depend on the order within ``S``: an edge ``(u, w)`` of that graph
  joins two vertices outside ``S`` linked by a path whose interior lies in
  ``S``.  So the state is the set ``S`` (a bitmask), and the optimum is a
  dynamic programme over the ``2^n`` subsets, each step costing the
  Markowitz degree ``|P_S(j)|·|S_S(j)|`` read off those paths.
* **edge** — the graph after a sequence is *not* determined by the set of
  steps taken, but it is determined by its edge set (an edge elimination
  keeps at most one edge per vertex pair, and an intermediate is alive iff an
  edge touches it).  The state is that edge set (a bitmask over the vertex
  pairs ``u ⇝ w``); steps cost ``|S(j)|`` or ``|P(j)|`` ≥ 1, so A* over
  states finds the cheapest sequence.  The heuristic is the structural bound
  of the *current* graph — max(pairs still joined by a path of length ≥ 2,
  intermediates left) — which is consistent: a step of cost ``c`` removes at
  most one intermediate and targets at most ``c`` Jacobian entries.
* **face** — the dual graph after some face eliminations is not a set of
  vertex pairs: several dual vertices can stand for the same ``src → dst``
  piece with different neighbours.  A state is therefore identified without
  vertex ids (which depend on the order fill-ins were made): every dual vertex
  is labelled by the set of LCG paths its value sums (tracked through every
  multiplication and merge), and the state key is the set of
  ``(label, labels of successors)``.  Naumann's rule preserves the Jacobian,
  so every input→output path is covered exactly once by a source→sink path of
  the dual graph; labels are then distinct in practice, and the key describes
  the state completely.  Where two live vertices do share a label the key
  falls back to the real vertex ids — still exact, just less sharing.  Every
  face costs one multiplication, so the optimum is the fewest faces that
  leave none intermediate: A* with the number of input/output pairs still
  joined through an intermediate face as the (consistent) heuristic — each
  face's product lands in one vertex, of one ``src → dst`` pair.

The limits (``max_intermediates`` for vertex mode, ``max_states`` for edge and
face mode) are refused with an :class:`~jacacc.errors.OrderError` naming the
limit and how to raise it.

Examples
--------
>>> from jacacc import CompGraph, optimize
>>> g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [
...     ("x0", "a", 2.0), ("x1", "a", 3.0), ("a", "b", 5.0), ("b", "y0", 7.0), ("b", "y1", 11.0)])
>>> [optimize(g, mode=m, method="exhaustive").mults for m in ("vertex", "edge", "face")]
[6, 5, 5]
>>> plan = optimize(g, mode="edge", method="exhaustive")
>>> plan.optimal, plan.lower_bound == plan.mults
(True, True)
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.eliminate.face import FaceGraph, FaceStep
from jacacc.eliminate.state import EdgeStep
from jacacc.errors import OrderError
from jacacc.graph import CompGraph
from jacacc.linegraph import Terminal
from jacacc.orders.registry import OrderResult, register_method

__all__ = [
    "DEFAULT_MAX_INTERMEDIATES",
    "DEFAULT_MAX_STATES",
    "Optimum",
    "copy_face_graph",
    "exhaustive_edge",
    "exhaustive_face",
    "exhaustive_vertex",
    "face_state_key",
    "optimum",
]

Node = Hashable
DEFAULT_MAX_INTERMEDIATES = 16
DEFAULT_MAX_STATES = 200_000


@dataclass(frozen=True)
class Optimum:
    """An exact optimum: its cost, one optimal order, and the search effort.

    Attributes
    ----------
    mode : str
    cost : int
        The fewest multiplications of any order of the mode.
    order : tuple
        One optimal order: intermediates (vertex), :class:`~jacacc.eliminate.EdgeStep`
        (edge) or :class:`~jacacc.eliminate.FaceStep` (face, with the real
        :class:`~jacacc.eliminate.FillIn` ids of a fresh replay).
    states : int
        Distinct states the search generated (subsets for vertex mode).
    """

    mode: str
    cost: int
    order: tuple
    states: int


def optimum(graph: CompGraph, mode: str = "vertex", **limits: int) -> Optimum:
    """The exact optimum of ``mode`` for ``graph`` (see the module docstring).

    Parameters
    ----------
    graph : CompGraph
    mode : {"vertex", "edge", "face"}
    **limits
        ``max_intermediates`` (vertex, default 16) or ``max_states`` (edge and
        face, default 200 000).

    Raises
    ------
    OrderError
        If the graph is beyond the limit, or ``mode`` is not one of the three.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "a", 2.0), ("a", "b", 3.0),
    ...                                              ("b", "y", 5.0), ("b", "z", 7.0)])
    >>> best = optimum(g, "vertex")
    >>> best.cost, best.order
    (3, ('a', 'b'))
    """
    searches = {"vertex": _vertex_optimum, "edge": _edge_optimum, "face": _face_optimum}
    if mode not in searches:
        raise OrderError(f"exhaustive search knows the modes vertex, edge and face, not {mode!r}")
    return searches[mode](graph, **limits)


# ============================================================================ vertex mode
def _closure(start: int, eliminated: int, adjacency: Sequence[int]) -> int:
    """Vertices outside ``eliminated`` reached from ``start``'s neighbours through
    eliminated vertices only: the neighbourhood after eliminating that set."""
    found = start
    frontier = start & eliminated
    while frontier:
        low = frontier & -frontier
        frontier ^= low
        step = adjacency[low.bit_length() - 1]
        frontier |= step & eliminated & ~found
        found |= step
    return found & ~eliminated


def _vertex_optimum(graph: CompGraph, *, max_intermediates: int = DEFAULT_MAX_INTERMEDIATES) -> Optimum:
    mids = graph.intermediates
    if len(mids) > max_intermediates:
        raise OrderError(
            f"exhaustive vertex elimination is limited to max_intermediates={max_intermediates} "
            f"(2^n subsets); this graph has {len(mids)} intermediates — pass max_intermediates=... "
            "to raise the limit"
        )
    index = {v: i for i, v in enumerate(graph.topological_order)}
    preds = [0] * len(index)
    succs = [0] * len(index)
    for u, w in graph.edges:
        succs[index[u]] |= 1 << index[w]
        preds[index[w]] |= 1 << index[u]
    bits = [index[v] for v in mids]  # topological order: ties go to the earliest vertex
    full = sum(1 << b for b in bits)
    memo: dict[int, int] = {full: 0}
    choice: dict[int, int] = {}

    def cost_to_go(eliminated: int) -> int:
        # depth ≤ number of intermediates ≤ max_intermediates: plain recursion is fine
        if eliminated in memo:
            return memo[eliminated]
        best, best_bit = None, -1
        for b in bits:
            if eliminated >> b & 1:
                continue
            here = _closure(preds[b], eliminated, preds).bit_count() * _closure(
                succs[b], eliminated, succs
            ).bit_count()
            if best is not None and here >= best:
                continue  # the rest costs ≥ 0, so this branch cannot beat the best found
            total = here + cost_to_go(eliminated | 1 << b)
            if best is None or total < best:
                best, best_bit = total, b
        memo[eliminated], choice[eliminated] = best, best_bit
        return best

    total = cost_to_go(0)
    order, state = [], 0
    while state != full:
        b = choice[state]
        order.append(graph.topological_order[b])
        state |= 1 << b
    return Optimum("vertex", total, tuple(order), len(memo))


def exhaustive_vertex(graph: CompGraph, *, seed: int | None = None,
                      max_intermediates: int = DEFAULT_MAX_INTERMEDIATES) -> OrderResult:
    """The cheapest vertex elimination order, by dynamic programming over subsets.

    ``seed`` is accepted for the registry's calling convention and ignored.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "b", 3.0), ("b", "y", 5.0)])
    >>> exhaustive_vertex(g)
    OrderResult(order=('a', 'b'), optimal=True, lower_bound=2)
    """
    best = _vertex_optimum(graph, max_intermediates=max_intermediates)
    return OrderResult(best.order, optimal=True, lower_bound=best.cost)


# ============================================================================ edge mode
class _EdgeSpace:
    """Edge sets as bitmasks over the vertex pairs an edge elimination can ever join
    (``u`` reaches ``w`` in the original graph), numbered in topological order so
    that decoding a state lists its edges deterministically."""

    def __init__(self, graph: CompGraph) -> None:
        topo = graph.topological_order
        self.inputs, self.outputs = graph.inputs, graph.outputs
        self.inter = frozenset(graph.intermediates)
        reach: dict[Node, set[Node]] = {v: set() for v in topo}
        for v in reversed(topo):
            for w in graph.successors(v):
                reach[v] |= {w} | reach[w]
        rank = {v: i for i, v in enumerate(topo)}
        self.pairs = [(u, w) for u in topo for w in sorted(reach[u], key=rank.__getitem__)]
        self.bit = {p: 1 << i for i, p in enumerate(self.pairs)}
        # pairs with an intermediate end: the state is final once none is left
        self.inner = sum(b for (u, w), b in self.bit.items() if u in self.inter or w in self.inter)
        self.start = sum(self.bit[e] for e in graph.edges)

    def edges(self, state: int) -> list[tuple[Node, Node]]:
        out, pairs = [], self.pairs
        while state:
            low = state & -state
            state ^= low
            out.append(pairs[low.bit_length() - 1])
        return out

    def bound(self, edges: list[tuple[Node, Node]]) -> int:
        """Structural lower bound of the current graph (consistent: see the module docstring)."""
        preds: dict[Node, list[Node]] = {}
        for u, w in edges:
            preds.setdefault(w, []).append(u)
        alive = {v for e in edges for v in e if v in self.inter}
        inputs: dict[Node, frozenset] = {}

        def sources(v: Node) -> frozenset:
            # inputs reaching v (v itself for an input); edges are few, recursion shallow
            if v not in inputs:
                found: set[Node] = {v} if v in self.inputs else set()
                for u in preds.get(v, ()):
                    found |= sources(u)
                inputs[v] = frozenset(found)
            return inputs[v]

        long_pairs = 0
        for y in self.outputs:
            reach: set[Node] = set()
            for u in preds.get(y, ()):
                if u in self.inter:
                    reach |= sources(u)
            long_pairs += len(reach)
        return max(long_pairs, len(alive))

    def moves(self, state: int, edges: list[tuple[Node, Node]]):
        """Every valid step: (step, cost, next state), in a deterministic order."""
        preds: dict[Node, list[Node]] = {}
        succs: dict[Node, list[Node]] = {}
        for u, w in edges:
            succs.setdefault(u, []).append(w)
            preds.setdefault(w, []).append(u)
        bit = self.bit
        for u, w in edges:
            if w in self.inter:  # front: (u, w) combined with every out-edge of w
                nxt = state & ~bit[(u, w)]
                for k in succs[w]:
                    nxt |= bit[(u, k)]
                if len(preds[w]) == 1:  # w loses its last in-edge: removed with its out-edges
                    for k in succs[w]:
                        nxt &= ~bit[(w, k)]
                yield EdgeStep((u, w), "front"), len(succs[w]), nxt
            if u in self.inter:  # back: (u, w) combined with every in-edge of u
                nxt = state & ~bit[(u, w)]
                for i in preds[u]:
                    nxt |= bit[(i, w)]
                if len(succs[u]) == 1:
                    for i in preds[u]:
                        nxt &= ~bit[(i, u)]
                yield EdgeStep((u, w), "back"), len(preds[u]), nxt


def _too_many_states(mode: str, max_states: int) -> OrderError:
    return OrderError(
        f"exhaustive {mode} elimination explored more than max_states={max_states} distinct states "
        "without finishing; pass max_states=... to raise the limit, or use a heuristic method"
    )


def _edge_optimum(graph: CompGraph, *, max_states: int = DEFAULT_MAX_STATES) -> Optimum:
    space = _EdgeSpace(graph)
    start = space.start
    best_cost = {start: 0}
    parent: dict[int, tuple[int, EdgeStep] | None] = {start: None}
    tie = itertools.count()
    # (estimate, -cost so far: deeper first among equal estimates, insertion order, state)
    heap = [(space.bound(space.edges(start)), 0, next(tie), start)]
    closed: set[int] = set()
    while heap:
        _, neg_cost, _, state = heapq.heappop(heap)
        if state in closed:
            continue
        cost = -neg_cost
        if not state & space.inner:
            steps = []
            while parent[state] is not None:
                state, step = parent[state]
                steps.append(step)
            return Optimum("edge", cost, tuple(reversed(steps)), len(best_cost))
        closed.add(state)
        for step, price, nxt in space.moves(state, space.edges(state)):
            total = cost + price
            if nxt in closed or total >= best_cost.get(nxt, total + 1):
                continue
            if nxt not in best_cost and len(best_cost) >= max_states:
                raise _too_many_states("edge", max_states)
            best_cost[nxt], parent[nxt] = total, (state, step)
            heapq.heappush(heap, (total + space.bound(space.edges(nxt)), -total, next(tie), nxt))
    raise AssertionError("edge elimination always terminates")  # pragma: no cover


def exhaustive_edge(graph: CompGraph, *, seed: int | None = None,
                    max_states: int = DEFAULT_MAX_STATES) -> OrderResult:
    """The cheapest edge elimination sequence, by A* over edge sets.

    ``seed`` is accepted for the registry's calling convention and ignored.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [("x0", "a", 2.0), ("x1", "a", 3.0),
    ...     ("a", "b", 5.0), ("b", "y0", 7.0), ("b", "y1", 11.0)])
    >>> result = exhaustive_edge(g)
    >>> result.lower_bound, [str(s) for s in result.order]
    (5, ['front(a→b)', 'front(x0→b)', 'front(x1→b)'])
    """
    best = _edge_optimum(graph, max_states=max_states)
    return OrderResult(best.order, optimal=True, lower_bound=best.cost)


# ============================================================================ face mode
def copy_face_graph(state: FaceGraph, recorder: Any = None) -> FaceGraph:
    """An independent copy of a :class:`~jacacc.eliminate.face.FaceGraph` in progress.

    Copies the adjacency dicts (keeping their insertion order, so the copy
    lists faces exactly as the original would) and the fill-in counter, so
    that eliminating on the copy names new vertices as the original would;
    shares the immutable parts (``intermediate_nodes``, ``rank``).

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "b", 3.0), ("b", "y", 5.0)])
    >>> s = FaceGraph(g)
    >>> t = copy_face_graph(s)
    >>> t.eliminate(("a", "b"), ("b", "y"))
    >>> len(list(s.intermediate_faces())), [str(f) for f in t.intermediate_faces()]
    (2, ['x→a|a→y#0'])
    """
    new = object.__new__(FaceGraph)
    new.__dict__.update(state.__dict__)
    new.preds = {v: dict(p) for v, p in state.preds.items()}
    new.succs = {v: dict(s) for v, s in state.succs.items()}
    new.by_dst = {n: dict(d) for n, d in state.by_dst.items()}
    new.recorder = recorder
    return new


class _PathTracker:
    """A FaceGraph recorder that keeps, for every dual vertex, the set of LCG paths
    (node tuples) its value sums: the id-free name of the vertex."""

    def __init__(self, paths: dict[Any, frozenset]) -> None:
        self.paths = paths

    def multiply(self, target: Any, left: Any, right: Any, *, new: bool) -> None:
        # left is the later factor (dst side), right the earlier one (src side)
        made = frozenset(p + q[1:] for p in self.paths[right] for q in self.paths[left])
        self.paths[target] = made if new else self.paths[target] | made

    def add(self, target: Any, source: Any) -> None:
        self.paths[target] = self.paths[target] | self.paths[source]

    def remove(self, v: Any) -> None:
        del self.paths[v]


class _FaceState:
    """A FaceGraph with its path labels; ``advance`` returns the state after one face."""

    __slots__ = ("graph", "paths")

    def __init__(self, graph: FaceGraph, paths: dict[Any, frozenset]) -> None:
        self.graph, self.paths = graph, paths

    @classmethod
    def start(cls, graph: CompGraph) -> _FaceState:
        state = FaceGraph(graph)
        paths = {v: frozenset([v]) if isinstance(v, Terminal) else frozenset([tuple(v)]) for v in state.succs}
        return cls(state, paths)

    def advance(self, step: FaceStep) -> _FaceState:
        paths = dict(self.paths)
        graph = copy_face_graph(self.graph, _PathTracker(paths))
        graph.eliminate(*step)
        graph.recorder = None
        return _FaceState(graph, paths)

    def labels(self, names: dict[frozenset, int]) -> tuple[dict[Any, Hashable], bool]:
        """Vertex → id-free label (an interned path set), and whether labels are distinct.

        Where two live vertices sum the same paths the labels fall back to the
        vertex ids themselves, which identify the state exactly.
        """
        labels = {v: names.setdefault(p, len(names)) for v, p in self.paths.items()}
        if len(set(labels.values())) == len(labels):
            return labels, True
        return {v: ("id", v) for v in self.paths}, False


def face_state_key(state: FaceGraph, paths: dict[Any, frozenset], names: dict[frozenset, int]) -> Hashable:
    """The canonical key of a face-elimination state (see the module docstring).

    ``paths`` maps every live dual vertex to the set of LCG paths (node tuples)
    its value sums; ``names`` interns those sets to small integers and is
    shared by every state of one search.  States with equal keys have the
    same dual graph up to renaming of fill-in vertices, hence the same
    remaining optimum.
    """
    labels, distinct = _FaceState(state, paths).labels(names)
    return _key(state, labels, distinct)


def _key(state: FaceGraph, labels: dict[Any, Hashable], distinct: bool) -> Hashable:
    body = frozenset((labels[v], frozenset(labels[s] for s in out)) for v, out in state.succs.items())
    return body if distinct else ("ids", body)


def _face_bound(state: FaceGraph) -> int:
    """Input/output pairs still joined through an intermediate face (consistent heuristic:
    a face's product lands in one vertex, so one step closes at most one pair)."""
    sources: dict[Any, frozenset] = {}
    sinks: dict[Any, frozenset] = {}

    def up(v: Any) -> frozenset:
        if v not in sources:
            found: set = {v.node} if isinstance(v, Terminal) else set()
            for p in state.preds[v]:
                found |= up(p)
            sources[v] = frozenset(found)
        return sources[v]

    def down(v: Any) -> frozenset:
        if v not in sinks:
            found: set = {v.node} if isinstance(v, Terminal) else set()
            for s in state.succs[v]:
                found |= down(s)
            sinks[v] = frozenset(found)
        return sinks[v]

    open_pairs: set = set()
    for a, b in state.intermediate_faces():
        open_pairs.update(itertools.product(up(a), down(b)))
    return len(open_pairs)


def _face_optimum(graph: CompGraph, *, max_states: int = DEFAULT_MAX_STATES) -> Optimum:
    names: dict[frozenset, int] = {}
    first = _FaceState.start(graph)
    labels, distinct = first.labels(names)
    start = _key(first.graph, labels, distinct)
    best_cost = {start: 0}
    # key → (parent key, the face as labels of the parent state): id-free, replayable
    parent: dict[Hashable, tuple[Hashable, tuple[Hashable, Hashable]] | None] = {start: None}
    states = {start: first}
    tie = itertools.count()
    heap = [(_face_bound(first.graph), 0, next(tie), start)]
    closed: set = set()
    while heap:
        _, neg_cost, _, key = heapq.heappop(heap)
        if key in closed:
            continue
        cost = -neg_cost
        current = states.pop(key)
        if current.graph.done:
            labelled = []
            while parent[key] is not None:
                key, face = parent[key]
                labelled.append(face)
            order = _replay_labelled(graph, labelled[::-1], names)
            assert len(order) == cost
            return Optimum("face", cost, order, len(best_cost))
        closed.add(key)
        labels, _ = current.labels(names)
        for step in list(current.graph.intermediate_faces()):
            nxt = current.advance(step)
            nxt_labels, nxt_distinct = nxt.labels(names)
            nxt_key = _key(nxt.graph, nxt_labels, nxt_distinct)
            if nxt_key in closed or cost + 1 >= best_cost.get(nxt_key, cost + 2):
                continue
            if nxt_key not in best_cost and len(best_cost) >= max_states:
                raise _too_many_states("face", max_states)
            best_cost[nxt_key] = cost + 1
            parent[nxt_key] = (key, (labels[step.left], labels[step.right]))
            states[nxt_key] = nxt
            heapq.heappush(heap, (cost + 1 + _face_bound(nxt.graph), -(cost + 1), next(tie), nxt_key))
    raise AssertionError("face elimination always terminates")  # pragma: no cover


def _replay_labelled(graph: CompGraph, faces: list[tuple[Hashable, Hashable]],
                     names: dict[frozenset, int]) -> tuple[FaceStep, ...]:
    """Turn faces named by labels into faces named by the vertex ids of one fresh replay.

    Each state on the optimal path has the same key as the replay's state at
    that point, hence the same labels: every label names exactly one vertex.
    """
    state = _FaceState.start(graph)
    order = []
    for left, right in faces:
        labels, _ = state.labels(names)
        vertex = {label: v for v, label in labels.items()}
        step = FaceStep(vertex[left], vertex[right])
        problem = state.graph.check_face(step)
        if problem is not None:  # pragma: no cover - would mean the key is not canonical
            raise AssertionError(f"replay of the optimal face sequence failed at {step}: {problem}")
        paths = state.paths
        state.graph.recorder = _PathTracker(paths)
        state.graph.eliminate(*step)  # in place: nothing else holds this state
        state.graph.recorder = None
        order.append(step)
    return tuple(order)


def exhaustive_face(graph: CompGraph, *, seed: int | None = None,
                    max_states: int = DEFAULT_MAX_STATES) -> OrderResult:
    """The shortest face elimination sequence (one multiplication per face), by A*.

    ``seed`` is accepted for the registry's calling convention and ignored.
    The order names fill-in vertices as a fresh replay numbers them, so
    ``optimize(graph, mode="face", method=list(result.order))`` reproduces it.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "b", 3.0), ("b", "y", 5.0)])
    >>> result = exhaustive_face(g)
    >>> result.lower_bound, [str(f) for f in result.order]
    (2, ['x→a|a→b', 'x→b#0|b→y'])
    """
    best = _face_optimum(graph, max_states=max_states)
    return OrderResult(best.order, optimal=True, lower_bound=best.cost)


register_method("exhaustive", exhaustive_vertex, modes=["vertex"])
register_method("exhaustive", exhaustive_edge, modes=["edge"])
register_method("exhaustive", exhaustive_face, modes=["face"])
