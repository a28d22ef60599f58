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
  dynamic programme over the subsets, each step costing the Markowitz
  degree ``|P_S(j)|·|S_S(j)|`` read off those paths.
* **edge** — the graph after a sequence is *not* determined by the set of
  steps taken, but it is determined by its edge set (an edge elimination
  keeps at most one edge per vertex pair, and an intermediate is alive iff an
  edge touches it).  The state is that edge set (a bitmask over the vertex
  pairs ``u ⇝ w``); steps cost ``|S(j)|`` or ``|P(j)|`` ≥ 1, so A* over
  states finds the cheapest sequence.
* **face** — the dual graph after some face eliminations is not a set of
  vertex pairs: several dual vertices can stand for the same ``src → dst``
  piece with different neighbours, and fill-in ids depend on the order the
  fill-ins were made.  A state is therefore keyed without ids: every dual
  vertex is labelled by the set of LCG paths its value sums (tracked through
  every multiplication and merge), and the key is the set of faces as pairs
  of labels.  Naumann's rule preserves the Jacobian, so every input→output
  path is carried by exactly one source→sink path of the dual graph; labels
  are then distinct in practice and the key describes the state completely.
  Where two live vertices do share a label the key falls back to the vertex
  ids — still exact, just less sharing.  Every face costs one
  multiplication, so the optimum is the fewest faces that leave none
  intermediate: A* again.  The optimal sequence is found as labels and
  replayed on a fresh dual graph, so it names the fill-ins as the face
  engine numbers them.

The A* heuristic (:func:`_cover_bound`, consistent, so each state is expanded
once) counts, for every intermediate ``j``, the fewest faces that must still
be eliminated *at* ``j``: each dual path still meeting at ``j`` needs a face
there whose factors start at its input or an earlier meeting point and end
at a later one or its output — a small set cover — and faces at different
vertices are different faces.  An edge step of cost ``c`` is ``c`` faces, so
the same bound serves edge mode.  States whose estimate exceeds the cost of
a quick order (the vertex optimum for ≤ 12 intermediates, a Markowitz or
greedy order) are dropped.  The bound is what makes graphs of a dozen edges
take milliseconds instead of minutes.

The limits (``max_intermediates`` for vertex mode, ``max_states`` for edge and
face mode) are refused with an :class:`~jacacc.errors.OrderError` naming the
limit and how to raise it.

Examples
--------
Vertex elimination must take all faces of a vertex at once; on this graph
eliminating part of ``v2`` first (the faces through ``v1 → v2``) saves one
multiplication (``paper_reproductions/003_face_beats_vertex.py``):

>>> from jacacc import CompGraph, optimize
>>> g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [
...     ("x0", "v0"), ("x0", "v2"), ("x1", "v1"), ("v0", "v1"), ("v0", "v2"), ("v1", "v2"),
...     ("v0", "y0"), ("v0", "y1"), ("v1", "y0"), ("v1", "y1"), ("v2", "y0"), ("v2", "y1")])
>>> [optimize(g, mode=m, method="exhaustive").mults for m in ("vertex", "edge", "face")]
[12, 11, 11]
>>> plan = optimize(g, mode="face", method="exhaustive")
>>> plan.optimal, plan.lower_bound == plan.mults
(True, True)
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.eliminate.face import FaceGraph, FaceStep, face_rule
from jacacc.eliminate.state import EdgeStep
from jacacc.errors import OrderError
from jacacc.graph import CompGraph
from jacacc.linegraph import Terminal
from jacacc.orders.registry import OrderResult, register_method

__all__ = [
    "DEFAULT_MAX_INTERMEDIATES",
    "DEFAULT_MAX_STATES",
    "EdgeSpace",
    "FaceNames",
    "FaceState",
    "Optimum",
    "copy_face_graph",
    "exhaustive_edge",
    "exhaustive_face",
    "exhaustive_vertex",
    "face_lower_bound",
    "face_state",
    "face_state_key",
    "optimum",
    "replay_named_faces",
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
    allowed = "max_intermediates" if mode == "vertex" else "max_states"
    unknown = sorted(set(limits) - {allowed})
    if unknown:
        raise TypeError(f"exhaustive {mode} search takes the limit {allowed}, not {', '.join(unknown)}")
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
    OrderResult(order=('a', 'b'), optimal=True, lower_bound=2, search=None, schedule=None)
    """
    if hasattr(graph, "edge_algebra"):
        best = _weighted_vertex_optimum(graph, max_intermediates=max_intermediates)
    else:
        best = _vertex_optimum(graph, max_intermediates=max_intermediates)
    return OrderResult(best.order, optimal=True, lower_bound=best.cost)


def _weighted_vertex_optimum(graph: CompGraph, *, max_intermediates: int = DEFAULT_MAX_INTERMEDIATES) -> Optimum:
    """The vertex optimum where edges carry values with their own costs (a tensor
    graph's FLOPs, :class:`~jacacc.eliminate.state.EdgeAlgebra`).

    The same dynamic programme over subsets: after eliminating a set ``S`` the
    edges, and the *structure* of the values on them (which axes a stored
    tensor keeps, which are δs), do not depend on the order within ``S`` — an
    edge's value is the sum over the paths through ``S`` — so neither does the
    cost of what comes next.  The state of each subset is kept as a copy of the
    elimination graph reached by the first order found to it.
    """
    mids = graph.intermediates
    if len(mids) > max_intermediates:
        raise OrderError(
            f"exhaustive vertex elimination is limited to max_intermediates={max_intermediates} "
            f"(2^n subsets); this graph has {len(mids)} intermediates — pass max_intermediates=... "
            "to raise the limit"
        )
    from jacacc.eliminate.state import EliminationGraph

    bit = {v: 1 << k for k, v in enumerate(mids)}
    full = (1 << len(mids)) - 1
    memo: dict[int, int] = {full: 0}
    choice: dict[int, Node] = {}

    def cost_to_go(eliminated: int, state: EliminationGraph) -> int:
        if eliminated in memo:
            return memo[eliminated]
        best, best_vertex = None, None
        for j in mids:  # topological order: ties go to the earliest vertex
            if eliminated & bit[j]:
                continue
            here = state.markowitz(j)
            if best is not None and here >= best:
                continue
            after = eliminated | bit[j]
            if after in memo:
                rest = memo[after]
            else:
                child = state.copy()
                child.eliminate_vertex(j)
                rest = cost_to_go(after, child)
            if best is None or here + rest < best:
                best, best_vertex = here + rest, j
        memo[eliminated], choice[eliminated] = best, best_vertex
        return best

    total = cost_to_go(0, EliminationGraph(graph))
    order, state = [], 0
    while state != full:
        j = choice[state]
        order.append(j)
        state |= bit[j]
    return Optimum("vertex", total, tuple(order), len(memo))


# ============================================================================ edge mode
class EdgeSpace:
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

    def bound(self, edges: list[tuple[Node, Node]], cache: dict[frozenset, int]) -> int:
        """A consistent lower bound on the multiplications still needed.

        The larger of the structural bound of the current graph (pairs still
        joined by a path of length ≥ 2, intermediates left; a step of cost
        ``c`` serves at most ``c`` pairs and removes at most one intermediate)
        and the face bound of its dual graph (:func:`face_lower_bound`): an edge
        step of cost ``c`` is ``c`` face eliminations, each lowering that bound
        by at most one.
        """
        succs: dict[Node, list[Node]] = {}
        for u, w in edges:
            succs.setdefault(u, []).append(w)
        inter = self.inter
        memo: dict[Node, frozenset] = {}

        def tails(v: Node) -> frozenset:
            # (intermediates after v, output) for every path from intermediate v to an output
            found = memo.get(v)
            if found is None:
                found = memo[v] = frozenset(
                    ((w, *rest), y) for w in succs.get(v, ()) if w in inter for rest, y in tails(w)
                ) | frozenset(((), w) for w in succs.get(v, ()) if w not in inter)
            return found

        sequences = {(x, (w, *rest), y) for x in self.inputs for w in succs.get(x, ()) if w in inter
                     for rest, y in tails(w)}
        alive = {v for e in edges for v in e if v in inter}
        long_pairs = len({(x, y) for x, _, y in sequences})
        return max(long_pairs, len(alive), _cover_bound(sequences, cache))

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
    space = EdgeSpace(graph)
    start = space.start
    cap = _upper_bound(graph, "edge")
    best_cost = {start: 0}
    parent: dict[int, tuple[int, EdgeStep] | None] = {start: None}
    tie = itertools.count()
    # (estimate, -cost so far: deeper first among equal estimates, insertion order, state)
    bounds: dict[frozenset, int] = {}
    heap = [(space.bound(space.edges(start), bounds), 0, next(tie), start)]
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
            estimate = total + space.bound(space.edges(nxt), bounds)
            if estimate > cap:
                continue  # cannot beat an order already known
            if nxt not in best_cost and len(best_cost) >= max_states:
                raise _too_many_states("edge", max_states)
            best_cost[nxt], parent[nxt] = total, (state, step)
            heapq.heappush(heap, (estimate, -total, next(tie), nxt))
    raise AssertionError("the upper bound is attained by an edge order")  # pragma: no cover


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
    (6, ['front(a→b)', 'front(x0→a)', 'front(x1→a)'])
    """
    best = _edge_optimum(graph, max_states=max_states)
    return OrderResult(best.order, optimal=True, lower_bound=best.cost)


# ============================================================================ face mode
def copy_face_graph(state: FaceGraph, recorder: Any = None) -> FaceGraph:
    """An independent copy of a :class:`~jacacc.eliminate.face.FaceGraph` in progress.

    Copies the adjacency dicts (keeping their insertion order, so the copy
    lists faces exactly as the original would) and the fill-in counter, so
    that eliminating on the copy names new vertices as the original would;
    shares the parts no elimination changes (``intermediate_nodes``, ``rank``).

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
    return state.copy(recorder)


class FaceNames:
    """Path sets interned to small integers, shared by every state of one search."""

    def __init__(self) -> None:
        self.paths: list[frozenset] = []
        self.index: dict[frozenset, int] = {}

    def __call__(self, paths: frozenset) -> int:
        found = self.index.get(paths)
        if found is None:
            found = self.index[paths] = len(self.paths)
            self.paths.append(paths)
        return found


class _LabelTracker:
    """A FaceGraph recorder that keeps every dual vertex's label: the (interned) set
    of LCG paths, as node tuples, that its value sums — a name free of fill-in ids."""

    def __init__(self, labels: dict[Any, int], names: FaceNames) -> None:
        self.labels, self.names = labels, names

    def multiply(self, target: Any, left: Any, right: Any, *, new: bool) -> None:
        paths, labels = self.names.paths, self.labels
        # right is the earlier factor (src side), left the later one (dst side)
        made = frozenset(p + q[1:] for p in paths[labels[right]] for q in paths[labels[left]])
        self.labels[target] = self.names(made if new else made | paths[labels[target]])

    def add(self, target: Any, source: Any) -> None:
        paths, labels = self.names.paths, self.labels
        labels[target] = self.names(paths[labels[target]] | paths[labels[source]])

    def remove(self, v: Any) -> None:
        del self.labels[v]


_SHIFT = 1 << 32  # packs a face (label, label) into one int; a search never makes 2^32 path sets


class FaceState:
    """A FaceGraph in progress with the labels of its vertices."""

    __slots__ = ("distinct", "graph", "labels")

    def __init__(self, graph: FaceGraph, labels: dict[Any, int]) -> None:
        self.graph, self.labels = graph, labels
        self.distinct = len(set(labels.values())) == len(labels)

    @classmethod
    def start(cls, graph: CompGraph, names: FaceNames) -> FaceState:
        state = FaceGraph(graph)
        labels = {v: names(frozenset([v if isinstance(v, Terminal) else tuple(v)])) for v in state.succs}
        return cls(state, labels)

    def advance(self, step: FaceStep, names: FaceNames) -> FaceState:
        labels = dict(self.labels)
        graph = copy_face_graph(self.graph, _LabelTracker(labels, names))
        graph.eliminate(*step)
        graph.recorder = None
        return FaceState(graph, labels)

    def name(self, v: Any) -> Hashable:
        """The id-free name of vertex ``v`` (its label), or ``("id", v)`` where labels
        collide and the state falls back to vertex ids."""
        return self.labels[v] if self.distinct else ("id", v)

    def key(self) -> Hashable:
        """The state's canonical key: its faces, each as the pair of its vertices' names.

        Every live vertex lies on a face (it has predecessors and successors),
        so the faces list the vertices too; with distinct labels the key is
        the whole labelled dual graph, without fill-in ids.
        """
        succs = self.graph.succs
        if self.distinct:
            labels = self.labels
            return frozenset(labels[a] * _SHIFT + labels[b] for a, out in succs.items() for b in out)
        return ("ids", frozenset((a, b) for a, out in succs.items() for b in out))


def face_state(graph: CompGraph, faces: Sequence[Any] = ()) -> tuple[FaceGraph, dict[Any, frozenset]]:
    """The dual graph after eliminating ``faces``, and the LCG paths each live vertex sums.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "b", 3.0), ("b", "y", 5.0)])
    >>> state, paths = face_state(g, [("a", "b", "y")])
    >>> [(v, sorted(p)) for v, p in paths.items() if not isinstance(v, Terminal)]
    [(('x', 'a'), [('x', 'a')]), (FillIn(src='a', dst='y', index=0), [('a', 'b', 'y')])]
    """
    from jacacc.eliminate.face import as_face_step

    names = FaceNames()
    state = FaceState.start(graph, names)
    for pos, item in enumerate(faces):
        step = as_face_step(item, pos)
        problem = state.graph.check_face(step)
        if problem is not None:
            raise OrderError(f"step #{pos} ({step}): {problem}")
        state = state.advance(step, names)
    return state.graph, {v: names.paths[label] for v, label in state.labels.items()}


def face_state_key(state: FaceGraph, paths: dict[Any, frozenset]) -> Hashable:
    """The canonical key of a face-elimination state (see the module docstring).

    ``paths`` maps every live dual vertex to the set of LCG paths its value
    sums (as :func:`face_state` returns).  States with equal keys have the
    same dual graph up to renaming of fill-in vertices, hence the same
    remaining optimum; the search itself uses an equivalent key with the path
    sets interned to integers.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y"], [("x0", "v", 2.0), ("x1", "v", 3.0), ("v", "y", 5.0)])
    >>> f0, f1 = ("x0", "v", "y"), ("x1", "v", "y")
    >>> face_state_key(*face_state(g, [f0, f1])) == face_state_key(*face_state(g, [f1, f0]))
    True
    """
    names = FaceNames()
    labelled = FaceState(state, {v: names(p) for v, p in paths.items()})
    if labelled.distinct:
        return frozenset((paths[a], paths[b]) for a, out in state.succs.items() for b in out)
    return labelled.key()


def _junction_sequences(state: FaceGraph) -> set[tuple[Node, tuple[Node, ...], Node]]:
    """``(input, junctions, output)`` for every source→sink path of the dual graph with
    at least one junction: the LCG vertices where consecutive dual vertices meet,
    i.e. where the LCG paths that dual path carries still wait for a face."""
    succs = state.succs
    memo: dict[Any, frozenset] = {}

    def tails(v: Any) -> frozenset:
        # (junctions after v's start, output) for every dual path from v to a sink
        found = memo.get(v)
        if found is None:
            out = set()
            for s in succs[v]:
                if isinstance(s, Terminal):
                    out.add(((), s.node))
                else:
                    out.update(((v[1], *rest), y) for rest, y in tails(s))
            found = memo[v] = frozenset(out)
        return found

    sequences = set()
    for v in succs:
        if isinstance(v, Terminal) and v.side == "source":
            for first in succs[v]:
                sequences.update((v.node, rest, y) for rest, y in tails(first) if rest)
    return sequences


def face_lower_bound(state: FaceGraph, cache: dict[frozenset, int]) -> int:
    """A consistent lower bound on the faces still to eliminate (see :func:`_cover_bound`)."""
    return _cover_bound(_junction_sequences(state), cache)


def _cover_bound(sequences: set[tuple[Node, tuple[Node, ...], Node]], cache: dict[frozenset, int]) -> int:
    """A lower bound on the faces still to eliminate, from the junction sequences of the
    dual graph's source→sink paths (:func:`_junction_sequences`).

    Take a dual source→sink path and one of its junctions ``j`` (an LCG
    vertex where two of its dual vertices meet).  The junction goes away only
    when the face there is eliminated: a product *at* ``j`` whose left factor
    starts at the path's input or at one of its junctions before ``j``, and
    whose right factor ends at a later junction or the output (junctions only
    ever disappear).  So the faces still to be eliminated at ``j`` number at
    least the fewest ``(start, end)`` pairs that offer every such path an
    allowed pair — a small set cover, solved exactly — and faces at
    different vertices are different faces: the bound is the sum over ``j``.

    Consistent (A* expands each state once): a step at ``j`` with pair ``t``
    turns a cover of the new state's paths at ``j`` plus ``t`` into one of the
    old, and elsewhere it only removes allowed choices, so the bound drops by
    at most one per face.
    """
    at: dict[Node, set[tuple[frozenset, frozenset]]] = {}
    for x, junctions, y in sequences:
        for i, j in enumerate(junctions):
            at.setdefault(j, set()).add((frozenset((x, *junctions[:i])), frozenset((*junctions[i + 1:], y))))
    total = 0
    for options in at.values():
        key = frozenset(options)
        found = cache.get(key)
        if found is None:
            found = cache[key] = _min_cover(list(options))
        total += found
    return total


def _min_cover(paths: list[tuple[frozenset, frozenset]]) -> int:
    """Fewest pairs ``(s, d)`` such that every ``(L, R)`` has ``s ∈ L`` and ``d ∈ R``
    (exact: depth-first with the best found as a cap; the instances are tiny)."""
    # a path whose choices include all of another's is covered whenever that one is
    paths = [p for p in paths
             if not any(q != p and q[0] <= p[0] and q[1] <= p[1] for q in paths)]
    best = [len(paths)]

    def solve(left: list[tuple[frozenset, frozenset]], used: int) -> None:
        if used >= best[0]:
            return
        if not left:
            best[0] = used
            return
        lefts, rights = min(left, key=lambda p: len(p[0]) * len(p[1]))
        for s in lefts:
            for d in rights:
                solve([p for p in left if s not in p[0] or d not in p[1]], used + 1)

    solve(paths, 0)
    return best[0]


def _upper_bound(graph: CompGraph, mode: str) -> int:
    """The cheapest of a few quick orders: a cap that lets the search drop states
    whose estimate exceeds it (every vertex order is also an edge and a face order)."""
    from jacacc.eliminate import count_ops
    from jacacc.orders.registry import get_method

    best = []
    if len(graph.intermediates) <= 12:  # 2^12 subsets: milliseconds
        vertex = _vertex_optimum(graph)
        best.append(vertex.cost)
    quick = {"vertex": (), "edge": ("markowitz",), "face": ("greedy", "edge_markowitz")}[mode]
    for name in quick:
        best.append(count_ops(graph, get_method(name, mode)(graph, seed=0), mode).mults)
    return min(best) if best else _vertex_optimum(graph).cost


def _face_optimum(graph: CompGraph, *, max_states: int = DEFAULT_MAX_STATES) -> Optimum:
    names = FaceNames()
    first = FaceState.start(graph, names)
    cap = _upper_bound(graph, "face")
    start = first.key()
    best_cost = {start: 0}
    # key → (parent key, the face as names in the parent state): id-free, replayable
    parent: dict[Hashable, tuple[Hashable, tuple[Hashable, Hashable]] | None] = {start: None}
    pending = {start: first}
    tie = itertools.count()
    bounds: dict[frozenset, int] = {}
    heap = [(face_lower_bound(first.graph, bounds), 0, next(tie), start)]
    closed: set = set()
    while heap:
        _, neg_cost, _, key = heapq.heappop(heap)
        if key in closed:
            continue
        cost = -neg_cost
        current = pending.pop(key)
        if current.graph.done:
            named = []
            while parent[key] is not None:
                key, face = parent[key]
                named.append(face)
            order = replay_named_faces(graph, named[::-1], names)
            return Optimum("face", cost, order, len(best_cost))
        closed.add(key)
        for step in list(current.graph.intermediate_faces()):
            nxt = current.advance(step, names)
            nxt_key = nxt.key()
            if nxt_key in closed or cost + 1 >= best_cost.get(nxt_key, cost + 2):
                continue
            estimate = cost + 1 + face_lower_bound(nxt.graph, bounds)
            if estimate > cap:
                continue  # cannot beat an order already known
            if nxt_key not in best_cost and len(best_cost) >= max_states:
                raise _too_many_states("face", max_states)
            best_cost[nxt_key] = cost + 1
            parent[nxt_key] = (key, (current.name(step.left), current.name(step.right)))
            pending[nxt_key] = nxt
            heapq.heappush(heap, (estimate, -(cost + 1), next(tie), nxt_key))
    raise AssertionError("the upper bound is attained by a face order")  # pragma: no cover


def replay_named_faces(graph: CompGraph, faces: list[tuple[Hashable, Hashable]], names: FaceNames) -> tuple[FaceStep, ...]:
    """Turn faces named by labels into faces named by the vertex ids of one fresh replay.

    Each state on the optimal path has the same key as the replay's state at
    that point, hence the same names: every name picks out exactly one vertex.
    """
    state = FaceState.start(graph, names)  # the search's table, so labels compare as integers
    order = []
    for left, right in faces:
        vertex = {state.name(v): v for v in state.labels}
        step = FaceStep(vertex[left], vertex[right])
        problem = state.graph.check_face(step)
        if problem is not None:  # pragma: no cover - would mean the key is not canonical
            raise AssertionError(f"replay of the optimal face sequence failed at {step}: {problem}")
        state = state.advance(step, names)
        order.append(step)
    return tuple(order)


def exhaustive_face(graph: CompGraph, *, seed: int | None = None,
                    max_states: int = DEFAULT_MAX_STATES, rule: Any = None) -> OrderResult:
    """The shortest face elimination sequence (one multiplication per face), by A*.

    ``seed`` is accepted for the registry's calling convention and ignored.
    The search is over Naumann's rule; ``rule`` may only name it (the
    Griewank–Walther variants create split copies its state keys do not cover).
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
    if face_rule(rule) != face_rule("naumann"):
        raise OrderError(f"the exhaustive face search covers Naumann's rule only, not {face_rule(rule).name!r}")
    best = _face_optimum(graph, max_states=max_states)
    return OrderResult(best.order, optimal=True, lower_bound=best.cost)


register_method("exhaustive", exhaustive_vertex, modes=["vertex"], exact=True)
register_method("exhaustive", exhaustive_edge, modes=["edge"], exact=True)
register_method("exhaustive", exhaustive_face, modes=["face"], exact=True)
