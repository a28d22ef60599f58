"""Greedy elimination heuristics for vertex and edge mode.

Every heuristic here is one *key*: the greedy driver eliminates, at each step,
the vertex (or front/back edge step) with the lowest key, recomputing keys
only where the last elimination changed a neighbourhood.

Vertex mode (Griewank & Walther 2008, §9.2; Naumann 2004):

``forward`` / ``reverse``
    Topological / reverse topological order.  They cost
    ``Σ|X(j)|·|S(j)|`` and ``Σ|P(j)|·|Y(j)|`` (X, Y: index domain and range).
``markowitz``
    Lowest Markowitz degree ``|P(j)|·|S(j)|`` first, ties broken toward reverse
    mode (the latest vertex) — the pairing ANGEL and OpenAD use by default.
``markowitz_lowest_index``
    Lowest Markowitz degree, ties broken toward the lowest index (forward).
``relative_markowitz``
    Lowest ``|P(j)|·|S(j)| − |X(j)|·|Y(j)|``: the Markowitz degree relative to
    the least it can ever be (ANGEL's lowest relative Markowitz), ties toward
    reverse.
``min_fill``
    Fewest fill-in edges created, ties toward reverse.
``random``
    A seeded uniformly random permutation.

Edge mode uses the same names with the edge-step costs: a front elimination
of (i, j) costs ``|S(j)|``, a back elimination of (j, k) costs ``|P(j)|``; relative
Markowitz subtracts ``|Y(j)|`` resp. ``|X(j)|``; ``forward`` front-eliminates the in-edges of
the first remaining intermediate, ``reverse`` back-eliminates the out-edges of
the last one; ``random`` picks a uniformly random valid step.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from jacacc.eliminate.state import EdgeStep, EliminationGraph
from jacacc.graph import CompGraph, gc_paused
from jacacc.orders.registry import register_method

Node = Hashable
VertexKey = Callable[[EliminationGraph, Node], tuple]
StepKey = Callable[[EliminationGraph, EdgeStep], tuple]


# ---------------------------------------------------------------------------- drivers
def greedy_vertex_order(graph: CompGraph, key: VertexKey, *, radius: int = 0) -> list[Node]:
    """Eliminate the intermediate with the lowest ``key`` until none is left.

    ``key(state, j)`` may depend on the neighbourhood of ``j``
    (``radius=0``) or also on the neighbourhoods of its neighbours
    (``radius=1``, e.g. fill-in counts); keys are refreshed accordingly.
    """
    state = EliminationGraph(graph)
    heap = [(key(state, j), state.rank[j], j) for j in state.intermediates]
    heapq.heapify(heap)
    order: list[Node] = []
    while heap:
        k, rank, j = heapq.heappop(heap)
        if j not in state.intermediates:
            continue
        current = key(state, j)
        if current != k:  # stale entry: the neighbourhood changed since it was pushed
            heapq.heappush(heap, (current, rank, j))
            continue
        order.append(j)
        touched = state.eliminate_vertex(j)
        if radius:
            touched |= {n for t in touched for n in (*state.preds[t], *state.succs[t])}
        for t in touched:
            if t in state.intermediates:
                heapq.heappush(heap, (key(state, t), state.rank[t], t))
    return order


_ELIMINATED: frozenset[int] = frozenset()
_INT64_CODES = 2**63  # Markowitz codes below this bound are computed in NumPy's int64


def _coded_vertex_order(graph: CompGraph, tie: str) -> list[Node]:
    """:func:`greedy_vertex_order` for the Markowitz key ``(|P(j)|·|S(j)|, ∓rank)``, on integer codes.

    The same order as the generic driver with ``key = (markowitz, -rank)``
    (``tie="reverse"``) or ``(markowitz, rank)`` (``tie="forward"``): each
    heap entry is the single integer ``markowitz · n + r`` with ``r`` the
    vertex's tie-break position (``n − 1 − rank`` or ``rank``), so entries
    order exactly as the key tuples do and decode back to their vertex.
    Tuples of tuples on the heap cost a comparison chain and an allocation per
    entry; at 10^5–10^6 vertices the heap was most of the run time.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "b"), ("b", "y"), ("a", "y")])
    >>> _coded_vertex_order(g, "reverse") == greedy_vertex_order(g, lambda s, j: (s.markowitz(j), -s.rank[j]))
    True
    """
    if hasattr(graph, "edge_algebra"):  # tensor edges: costs come from the algebra, keep the generic path
        sign = -1 if tie == "reverse" else 1
        return greedy_vertex_order(graph, lambda s, j: (s.markowitz(j), sign * s.rank[j]))
    with gc_paused():  # ~2 sets per vertex and no garbage: the collector would only walk them
        return _integer_markowitz_order(graph, tie)


def _integer_markowitz_order(graph: CompGraph, tie: str) -> list[Node]:
    by_rank = graph.topological_order
    n = len(by_rank)
    # The structure alone, on vertex ranks: sets of ints, so that a vertex
    # elimination is two C-level set unions per neighbour (P(j) into each
    # successor's predecessors, S(j) into each predecessor's successors)
    # instead of |P(j)|·|S(j)| Python steps through EliminationGraph.
    preds, succs = graph.rank_adjacency()
    inner = np.array(graph._intermediate_ranks(), dtype=np.int64)
    # code(r) = |P(r)|·|S(r)| · n + flip + sign·r, the tie-break position last: codes
    # order as the keys do, and r is read back from the code.  All codes at once by NumPy.
    flip = n - 1 if tie == "reverse" else 0
    sign = -1 if tie == "reverse" else 1
    degree = np.fromiter(map(len, preds), dtype=np.int64, count=n) * np.fromiter(map(len, succs), dtype=np.int64,
                                                                                 count=n)
    wide = (int(degree.max(initial=0)) + 1) * n >= _INT64_CODES  # huge degrees: codes as Python ints
    codes = np.full(n, -1, dtype=object if wide else np.int64)
    codes[inner] = degree[inner].astype(codes.dtype) * n + flip + sign * inner.astype(codes.dtype)
    # latest[r]: r's current code (-1 once eliminated, or not an intermediate).  Keys
    # change only for the vertices an elimination touches, recomputed at once, so an
    # entry is current exactly when it equals latest[r].  Every remaining vertex has an
    # entry at or below its code: a key that decreased is pushed at once, one that grew
    # is not (its old entry is a lower bound) until that entry comes up, and then only
    # if the vertex still waits.  So the smallest entry, when current, is the smallest
    # key, and a key that grows several times is pushed once (four pushes in ten saved).
    latest = codes.tolist()
    live = np.zeros(n, dtype=np.uint8)  # 1 for an intermediate not yet eliminated: a byte, not an int object,
    live[inner] = 1  # is read for each neighbour (most are inputs and outputs, skipped)
    live = bytearray(live.tobytes())
    # The first codes wait in a list sorted once, popped from its end; only codes that
    # change go through the heap, and each step takes the smaller of the two heads.
    # Half the vertices are eliminated with the key they started with, and a heap's
    # sift per pop walks int objects scattered in memory.  The sentinel `end` (above
    # every code) heads both while they are empty.
    end = n * n * n + n
    waiting = [end, *np.sort(codes[inner])[::-1].tolist()]
    heap = [end]
    push, pop, take = heapq.heappush, heapq.heappop, waiting.pop
    order: list[int] = []
    while True:
        c = pop(heap) if heap[0] < waiting[-1] else take()
        if c == end:
            break
        j = flip + sign * (c % n)
        current = latest[j]
        if current != c:
            if current > c:  # a lower bound: j's key grew since, and j waits with it
                push(heap, current)
            continue  # else stale: j has a lower entry, or is eliminated already
        order.append(j)
        latest[j] = -1
        live[j] = 0
        p, s = preds[j], succs[j]
        preds[j] = succs[j] = _ELIMINATED  # j is nobody's neighbour now: its sets are freed
        # Only i's successors and k's predecessors change (no vertex is both a predecessor
        # and a successor of j in a DAG), so each new key is final once its own set is updated.
        # Keys are read for intermediates only, and an input's successors or an output's
        # predecessors never enter one: their sets are left as they are.  The key changes
        # by the change of the one set's size times the other's, read back from the code
        # (|P(i)| = code // n // |S(i)|): the other set is not touched, and a key that did
        # not change (six updates in ten at 10^6 edges) costs no arithmetic at all.
        for i in p:
            if not live[i]:
                continue
            out = succs[i]
            before = len(out)
            out.discard(j)
            out |= s  # absorption where (i, k) exists, fill-in where not
            grown = len(out) - before
            if grown:
                old = latest[i]
                latest[i] = current = old + old // n // before * grown * n
                if grown < 0:
                    push(heap, current)
        for k in s:
            if not live[k]:
                continue
            into = preds[k]
            before = len(into)
            into.discard(j)
            into |= p
            grown = len(into) - before
            if grown:
                old = latest[k]
                latest[k] = current = old + old // n // before * grown * n
                if grown < 0:
                    push(heap, current)
    return list(map(by_rank.__getitem__, order))


def _step_rank(state: EliminationGraph, step: EdgeStep) -> tuple[int, int, int]:
    """A numeric identity for a step, ordered toward reverse mode: back
    eliminations from the latest source vertex come first."""
    (u, v), direction = step
    if direction == "back":
        return (0, -state.rank[u], -state.rank[v])
    return (1, -state.rank[v], -state.rank[u])


def greedy_edge_order(graph: CompGraph, key: StepKey, *, scope: str = "pivot") -> list[EdgeStep]:
    """Apply the valid front/back step with the lowest ``key`` until no intermediate is left.

    ``scope`` says what a key may depend on besides static vertex data:
    ``"pivot"`` — only S(j) for a front step on (i, j) and P(j) for a back
    step on (j, k) (Markowitz-type costs); ``"endpoints"`` — also S(i) for a
    front step and P(k) for a back step (fill-in counts).  After each step
    only the keys that can have changed are refreshed: the state reports
    which vertices' predecessor and successor sets changed.
    """
    if scope not in ("pivot", "endpoints"):
        raise ValueError(f"scope must be 'pivot' or 'endpoints', got {scope!r}")
    state = EliminationGraph(graph)
    inter, preds, succs = state.intermediates, state.preds, state.succs
    heap: list[tuple[tuple, tuple, tuple]] = []

    def push(u: Node, v: Node, direction: str) -> None:
        step = ((u, v), direction)  # a plain tuple: EdgeSteps are built only for the result
        heapq.heappush(heap, (key(state, step), _step_rank(state, step), step))

    for u, v in list(state.edges()):
        if v in inter:
            push(u, v, "front")
        if u in inter:
            push(u, v, "back")
    order: list[EdgeStep] = []
    while not state.done:
        k, rank, step = heapq.heappop(heap)
        if state.check_step(step) is not None:
            continue
        current = key(state, step)
        if current != k:
            heapq.heappush(heap, (current, rank, step))
            continue
        order.append(EdgeStep(*step))
        state.changed_preds.clear()
        state.changed_succs.clear()
        state.created_edges.clear()
        state.apply(step)
        for v in state.changed_succs:
            if v in inter:  # front steps into v cost |S(v)|
                for u in preds[v]:
                    push(u, v, "front")
            if scope == "endpoints" and v in succs:  # front steps out of v count fill against S(v)
                for w in succs[v]:
                    if w in inter:
                        push(v, w, "front")
        for v in state.changed_preds:
            if v in inter:  # back steps out of v cost |P(v)|
                for w in succs[v]:
                    push(v, w, "back")
            if scope == "endpoints" and v in preds:  # back steps into v count fill against P(v)
                for u in preds[v]:
                    if u in inter:
                        push(u, v, "back")
        # steps on newly created edges
        for u, v in state.created_edges:
            if v in inter:
                push(u, v, "front")
            if u in inter:
                push(u, v, "back")
    return order


# ---------------------------------------------------------------------------- heuristic objects
@dataclass(frozen=True)
class GreedyVertexHeuristic:
    """A vertex-elimination heuristic: the key a greedy driver minimises.

    ``make_key(graph)`` returns ``key(state, j)``; ``radius`` is 0 when the key
    depends on j's own neighbourhood only, 1 when it also depends on its
    neighbours' neighbourhoods.  Calling the object runs the driver.
    """

    name: str
    make_key: Callable[[CompGraph], VertexKey]
    radius: int = 0
    doc: str = ""
    #: "reverse" / "forward" when the key is exactly (Markowitz degree, ∓rank):
    #: then the same order is found by the faster integer-coded driver
    coded_tie: str | None = None

    def __call__(self, graph: CompGraph, *, seed: int | None = None) -> list[Node]:
        if self.coded_tie is not None:
            return _coded_vertex_order(graph, self.coded_tie)
        return greedy_vertex_order(graph, self.make_key(graph), radius=self.radius)


@dataclass(frozen=True)
class GreedyEdgeHeuristic:
    """An edge-elimination heuristic: the key over front/back steps a greedy driver minimises.

    ``scope`` is ``"pivot"`` or ``"endpoints"`` (see :func:`greedy_edge_order`).
    Ties left by the key are broken toward reverse mode.
    """

    name: str
    make_key: Callable[[CompGraph], StepKey]
    scope: str = "pivot"
    doc: str = ""

    def __call__(self, graph: CompGraph, *, seed: int | None = None) -> list[EdgeStep]:
        return greedy_edge_order(graph, self.make_key(graph), scope=self.scope)


def _register(heuristic: GreedyVertexHeuristic | GreedyEdgeHeuristic) -> None:
    mode = "vertex" if isinstance(heuristic, GreedyVertexHeuristic) else "edge"
    register_method(heuristic.name, heuristic, modes=[mode])


def _least_vertex_markowitz(graph: CompGraph) -> dict[Node, int]:
    """|X(j)|·|Y(j)|: the Markowitz degree j would have if every other intermediate were gone."""
    dom, rng = graph.index_domain(), graph.index_range()
    return {j: len(dom[j]) * len(rng[j]) for j in graph.intermediates}


def forward_reverse_costs(graph: CompGraph) -> tuple[int, int]:
    """Multiplications of forward and of reverse vertex elimination, from degree counts alone.

    Forward mode eliminates the intermediates in topological order.  When ``j`` goes, every
    intermediate before it is gone, so its predecessors are the vertices that stay (inputs, and
    outputs with successors) from which ``j`` is reached through intermediates only; and fill-in
    only ever joins such vertices to successors, so ``j`` keeps its own successors.  Its step
    costs ``|X(j)|·|S(j)|``, and reverse mode's symmetrically ``|P(j)|·|Y(j)|`` (Griewank &
    Walther 2008, §9.2, with X and Y taken up to the first vertex that stays).  One sweep each
    way over the graph, with sets as integer bitmasks: no elimination is replayed.

    Parameters
    ----------
    graph : CompGraph

    Returns
    -------
    (int, int)
        The forward and the reverse cost: what ``optimize(graph, method="forward")`` and
        ``method="reverse"`` report as ``mults``.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x1", "x2"], ["y"], [("x1", "a"), ("x2", "a"), ("a", "b"), ("b", "y")])
    >>> forward_reverse_costs(g)                    # forward: a 2·1, b 2·1; reverse: b 1·1, a 2·1
    (4, 3)
    """
    inner = set(graph.intermediates)
    bit: dict[Node, int] = {}
    for node in graph.topological_order:
        if node not in inner:
            bit[node] = 1 << len(bit)
    reached_from: dict[Node, int] = {}
    forward = 0
    for j in graph.intermediates:
        mask = 0
        for p in graph.predecessors(j):
            mask |= reached_from[p] if p in inner else bit[p]
        reached_from[j] = mask
        forward += mask.bit_count() * len(graph.successors(j))
    reaches: dict[Node, int] = {}
    reverse = 0
    for j in reversed(graph.intermediates):
        mask = 0
        for s in graph.successors(j):
            mask |= reaches[s] if s in inner else bit[s]
        reaches[j] = mask
        reverse += mask.bit_count() * len(graph.predecessors(j))
    return forward, reverse


# ---------------------------------------------------------------------------- vertex mode
@register_method("forward", modes=["vertex"])
def forward_vertex(graph: CompGraph, *, seed: int | None = None) -> list[Node]:
    """Forward mode: intermediates in topological order."""
    return list(graph.intermediates)


@register_method("reverse", modes=["vertex"])
def reverse_vertex(graph: CompGraph, *, seed: int | None = None) -> list[Node]:
    """Reverse mode: intermediates in reverse topological order."""
    return list(reversed(graph.intermediates))


def _relative_markowitz_vertex_key(graph: CompGraph) -> VertexKey:
    least = _least_vertex_markowitz(graph)
    return lambda s, j: (s.markowitz(j) - least[j], -s.rank[j])


VERTEX_HEURISTICS = (
    GreedyVertexHeuristic(
        "markowitz", lambda g: lambda s, j: (s.markowitz(j), -s.rank[j]),
        doc="lowest Markowitz degree |P(j)|·|S(j)|, ties toward reverse mode", coded_tie="reverse",
    ),
    GreedyVertexHeuristic(
        "markowitz_lowest_index", lambda g: lambda s, j: (s.markowitz(j), s.rank[j]),
        doc="lowest Markowitz degree, ties toward the lowest index (forward)", coded_tie="forward",
    ),
    GreedyVertexHeuristic(
        "relative_markowitz", _relative_markowitz_vertex_key,
        doc="lowest |P(j)|·|S(j)| − |X(j)|·|Y(j)|, ties toward reverse",
    ),
    GreedyVertexHeuristic(
        "min_fill", lambda g: lambda s, j: (s.vertex_fill_in(j), -s.rank[j]), radius=1,
        doc="fewest fill-in edges, ties toward reverse",
    ),
)


@register_method("random", modes=["vertex"])
def random_vertex(graph: CompGraph, *, seed: int | None = None) -> list[Node]:
    """A uniformly random permutation of the intermediates (seeded)."""
    rng = np.random.default_rng(seed)
    nodes = list(graph.intermediates)
    return [nodes[i] for i in rng.permutation(len(nodes))]


# ---------------------------------------------------------------------------- edge mode
def _forward_step_key(graph: CompGraph) -> StepKey:
    def key(s: EliminationGraph, step: EdgeStep) -> tuple:
        (u, v), direction = step
        return (direction != "front", s.rank[v], s.rank[u])

    return key


def _reverse_step_key(graph: CompGraph) -> StepKey:
    def key(s: EliminationGraph, step: EdgeStep) -> tuple:
        (u, v), direction = step
        return (direction != "back", -s.rank[u], -s.rank[v])

    return key


def _markowitz_lowest_index_step_key(graph: CompGraph) -> StepKey:
    def key(s: EliminationGraph, step: EdgeStep) -> tuple:
        (u, v), direction = step
        return (s.step_cost(step), direction != "front", s.rank[v], s.rank[u])

    return key


def _relative_markowitz_step_key(graph: CompGraph) -> StepKey:
    dom, rng = graph.index_domain(), graph.index_range()

    def key(s: EliminationGraph, step: EdgeStep) -> tuple:
        (u, v), direction = step
        least = len(rng[v]) if direction == "front" else len(dom[u])
        return (s.step_cost(step) - least,)

    return key


EDGE_HEURISTICS = (
    GreedyEdgeHeuristic("forward", _forward_step_key,
                        doc="front-eliminate the in-edges of the first remaining intermediate"),
    GreedyEdgeHeuristic("reverse", _reverse_step_key,
                        doc="back-eliminate the out-edges of the last remaining intermediate"),
    GreedyEdgeHeuristic("markowitz", lambda g: lambda s, step: (s.step_cost(step),),
                        doc="lowest Markowitz step (front |S(j)|, back |P(j)|), ties toward reverse"),
    GreedyEdgeHeuristic("markowitz_lowest_index", _markowitz_lowest_index_step_key,
                        doc="lowest Markowitz step, ties toward forward"),
    GreedyEdgeHeuristic("relative_markowitz", _relative_markowitz_step_key,
                        doc="lowest front |S(j)| − |Y(j)| / back |P(j)| − |X(j)|, ties toward reverse"),
    GreedyEdgeHeuristic("min_fill", lambda g: lambda s, step: (s.step_fill_in(step),), scope="endpoints",
                        doc="fewest fill-in edges per step, ties toward reverse"),
)

for _heuristic in VERTEX_HEURISTICS + EDGE_HEURISTICS:
    _register(_heuristic)


class _EliminableEdges:
    """A recorder keeping the set of edges with an intermediate endpoint,
    indexed for O(1) uniform sampling (swap-with-last removal)."""

    def __init__(self, state: EliminationGraph) -> None:
        self.state = state
        self.items: list[tuple[Node, Node]] = []
        self.position: dict[tuple[Node, Node], int] = {}
        for edge in state.edges():
            self._add(edge)

    def _add(self, edge: tuple[Node, Node]) -> None:
        u, v = edge
        if u in self.state.intermediates or v in self.state.intermediates:
            self.position[edge] = len(self.items)
            self.items.append(edge)

    def multiply(self, target, left, right, *, new: bool) -> None:
        if new:
            self._add(target)

    def remove(self, edge) -> None:
        pos = self.position.pop(edge, None)
        if pos is None:
            return
        last = self.items.pop()
        if last != edge:
            self.items[pos] = last
            self.position[last] = pos


@register_method("random", modes=["edge"])
def random_edge(graph: CompGraph, *, seed: int | None = None) -> list[EdgeStep]:
    """A seeded random edge elimination sequence: at each point a uniformly random
    edge with an intermediate endpoint, then a uniformly random valid direction."""
    rng = np.random.default_rng(seed)
    state = EliminationGraph(graph)
    pool = _EliminableEdges(state)
    state.recorder = pool
    order: list[EdgeStep] = []
    while not state.done:
        u, v = pool.items[int(rng.integers(len(pool.items)))]
        directions = [d for d, ok in (("front", v in state.intermediates), ("back", u in state.intermediates)) if ok]
        step = EdgeStep((u, v), directions[int(rng.integers(len(directions)))])
        order.append(step)
        state.apply(step)
    return order
