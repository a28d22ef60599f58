"""Large-neighbourhood search over edge elimination sequences, and the bound it cannot pass.

Every vertex elimination is a sequence of edge eliminations (front-eliminate
each in-edge of the vertex), so the optimum of edge elimination is at most the
vertex optimum, and on some graphs strictly less (Naumann 2004, §3: eliminating
part of a vertex's edges early, an absorption saves a multiplication; the
three-intermediate graph of :mod:`jacacc.orders.exhaustive` costs 12 by vertex
and 11 by edge elimination).  Method ``lns`` (edge mode) starts from a vertex
order written as edge steps and improves it by large-neighbourhood search
(Shaw, CP 1998): destroy a window of the sequence, rebuild it optimally.

**Why windows can be solved alone.**  Write the sequence as consecutive
*segments*: each eliminates a set ``W`` of intermediates completely.  The
graph after a set of intermediates is eliminated completely does not depend
on how (an edge ``(u, w)`` is left exactly where the original graph has a
path ``u ⇝ w`` with interior in the set), so a segment can be replaced by any
other edge sequence that eliminates the same ``W`` without changing what any
later segment costs.  The cheapest replacement is an edge elimination problem
on a small graph: ``W``, its predecessors outside ``W`` as inputs, its
successors outside ``W`` as outputs (a vertex on both sides is split in two;
a path out of ``W`` and back would be a cycle), costed step for step as in
the whole graph (front elimination of ``(i, j)`` costs ``|S(j)|``, back
elimination of ``(j, k)`` costs ``|P(j)|``; Griewank & Walther 2008, §9.3).
That problem is solved exactly by the A* search of
:func:`jacacc.orders.exhaustive.optimum`.  A move joins a few consecutive
segments (at most ``window`` intermediates), solves their union, and keeps the
result when it is strictly cheaper; the union's optimum covers every
permutation of its vertices and every interleaving of their edge steps, so
the search never costs more than its start.

**The bound.**  :func:`monotone_lower_bound` is Σ over intermediates ``v`` of
κ(X, v)·κ(v, Y) (:func:`jacacc.bounds.connectivity_lower_bound`), and it holds
for edge and face elimination too, not only for vertex elimination:
see :func:`monotone_lower_bound` for the proof.  Where a vertex order attains
it (AlphaGrad's PropaneCombustion, HumanHeartDipole and RobotArm_6DOF: 88,
148 and 221), no edge or face elimination is cheaper.

References
----------
U. Naumann, *Optimal accumulation of Jacobian matrices by elimination methods
on the dual computational graph*, Math. Program. 99 (2004), §2–3 (edge and
face elimination); A. Griewank and A. Walther, *Evaluating Derivatives*, 2nd
ed., SIAM 2008, §9.3; P. Shaw, *Using constraint programming and local search
methods to solve vehicle routing problems*, CP 1998 (large-neighbourhood
search); paper 003 §1 for the elimination costs.

Examples
--------
>>> import jacacc
>>> g = jacacc.CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [
...     ("x0", "v0"), ("x0", "v2"), ("x1", "v1"), ("v0", "v1"), ("v0", "v2"), ("v1", "v2"),
...     ("v0", "y0"), ("v0", "y1"), ("v1", "y0"), ("v1", "y1"), ("v2", "y0"), ("v2", "y1")])
>>> jacacc.optimize(g, method="optimal", workers=1).mults
12
>>> plan = jacacc.optimize(g, mode="edge", method="lns", seed=0, iterations=20)
>>> plan.mults, plan.search.solver
(11, 'lns')
"""

from __future__ import annotations

import random
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.bounds import connectivity_lower_bound
from jacacc.eliminate.state import EdgeStep, EliminationGraph
from jacacc.errors import OrderError
from jacacc.graph import CompGraph
from jacacc.orders.exhaustive import optimum
from jacacc.orders.local_search import (
    DEFAULT_STARTS,
    Progress,
    ProgressCallback,
    check_time_limit,
    elapsed,
    start_order,
)
from jacacc.orders.registry import OrderResult, SearchInfo, register_method

__all__ = ["DEFAULT_MAX_STATES", "DEFAULT_WINDOW", "Segment", "edge_lns", "mults_at_vertices",
           "monotone_lower_bound", "solve_window", "vertex_segments", "window_graph"]

Node = Hashable
DEFAULT_WINDOW = 6
DEFAULT_MAX_STATES = 5_000


@dataclass(frozen=True)
class Segment:
    """Edge steps that eliminate the intermediates ``vertices`` completely, and their cost.

    ``exact`` is True when ``steps`` is the cheapest way to do so from the
    state the segment starts in (a solved window).
    """

    vertices: tuple[Node, ...]
    steps: tuple[EdgeStep, ...]
    cost: int
    exact: bool = False


def monotone_lower_bound(graph: CompGraph) -> int:
    """Σ_v κ(X, v)·κ(v, Y): a lower bound on vertex, edge *and* face elimination.

    Proof.  Every elimination step is a combination ``(i, k) += (j, k)·(i, j)``
    at an intermediate ``j``, one multiplication.  With structural (generic)
    partials the value on an edge ``(u, w)`` is a sum, with coefficients 1, of
    the products of the partials along some paths ``u ⇝ w``, and nothing is
    ever subtracted; so each input→output path through ``j`` contributes its
    monomial to the final Jacobian only if some combination *at* ``j`` joins an
    edge carrying its part up to ``j`` with an edge carrying its part after
    ``j``.  Take κ(X, v) input→``j`` paths α sharing only ``j`` and κ(v, Y)
    ``j``→output paths β sharing only ``j``.  A combination at ``j`` joins
    edge ``(i, j)``, whose paths all pass ``i ≠ j``, so it serves at most one α
    (two would share ``i``), and likewise at most one β: the κ(X, j)·κ(j, Y)
    pairs ``(α, β)`` need as many different combinations at ``j``, and
    combinations at different vertices are different multiplications.  Face
    elimination is a sequence of such combinations too (its dual vertices carry
    path sets the same way), so the bound holds there as well.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y"], [("x0", "a"), ("x1", "a"), ("a", "y")])
    >>> monotone_lower_bound(g)
    2
    """
    return connectivity_lower_bound(graph)


class _CountAtMiddle:
    """A recorder counting the multiplications made at each intermediate."""

    def __init__(self) -> None:
        self.counts: dict[Node, int] = {}

    def multiply(self, target: Any, left: Any, right: Any, *, new: bool) -> None:
        middle = left[0]  # (i, k) += (j, k)·(i, j): the step is at j
        self.counts[middle] = self.counts.get(middle, 0) + 1

    def remove(self, edge: Any) -> None:
        pass


def mults_at_vertices(graph: CompGraph, sequence: Sequence[Any]) -> dict[Node, int]:
    """Multiplications of an edge elimination sequence, per intermediate they are made at.

    Each count is at least that vertex's term κ(X, v)·κ(v, Y) of
    :func:`monotone_lower_bound` (the proof counts them per vertex).

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "a"), ("a", "y"), ("a", "z")])
    >>> mults_at_vertices(g, [(("x", "a"), "front")])
    {'a': 2}
    """
    from jacacc.eliminate.edge import replay_edges

    counter = _CountAtMiddle()
    replay_edges(graph, sequence, counter)
    return counter.counts


def window_graph(state: EliminationGraph, window: Sequence[Node]) -> tuple[CompGraph, list[Node]]:
    """The edge elimination problem of eliminating ``window`` from ``state``.

    Vertices are numbered ``0, 1, …``; ``names[i]`` is the vertex of ``state``
    that number ``i`` stands for.  Predecessors of the window outside it become
    inputs, successors outside it outputs (a vertex that is both appears
    twice).  Edges between vertices outside the window cost nothing in this
    subproblem and are left out.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "b"), ("b", "y")])
    >>> sub, names = window_graph(EliminationGraph(g), ["a"])
    >>> sub.edges, [names[v] for v in sub.inputs + sub.outputs]
    (((1, 0), (0, 2)), ['x', 'b'])
    """
    members = set(window)
    number: dict[tuple[str, Node], int] = {}
    names: list[Node] = []
    inputs: list[int] = []
    outputs: list[int] = []

    def vertex(role: str, v: Node, terminals: list[int] | None = None) -> int:
        key = (role, v)
        if key not in number:
            number[key] = len(names)
            names.append(v)
            if terminals is not None:
                terminals.append(number[key])
        return number[key]

    for w in window:
        vertex("in", w)
    edges = []
    for w in window:
        for p in state.preds[w]:
            src = vertex("in", p) if p in members else vertex("source", p, inputs)
            edges.append((src, number[("in", w)]))
        for s in state.succs[w]:
            if s not in members:
                edges.append((number[("in", w)], vertex("sink", s, outputs)))
    return CompGraph.from_edges(inputs, outputs, edges, prune=False), names


def solve_window(state: EliminationGraph, window: Sequence[Node], *,
                 max_states: int = DEFAULT_MAX_STATES) -> tuple[int, tuple[EdgeStep, ...]] | None:
    """The cheapest edge steps eliminating ``window`` from ``state`` (not changed), or None
    when the A* search needs more than ``max_states`` states.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [("x0", "a"), ("x1", "a"), ("a", "b"),
    ...                                                       ("b", "y0"), ("b", "y1")])
    >>> cost, steps = solve_window(EliminationGraph(g), ["a", "b"])
    >>> cost, [str(s) for s in steps]
    (6, ['front(a→b)', 'front(x0→a)', 'front(x1→a)'])
    """
    sub, names = window_graph(state, window)
    try:
        best = optimum(sub, "edge", max_states=max_states)
    except OrderError:
        return None
    steps = tuple(EdgeStep((names[u], names[w]), d) for (u, w), d in best.order)
    return best.cost, steps


def vertex_segments(graph: CompGraph, order: Sequence[Node]) -> list[Segment]:
    """A vertex order as one segment per vertex (its in-edges front-eliminated).

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "b"), ("b", "y")])
    >>> [(s.vertices, s.cost) for s in vertex_segments(g, ["b", "a"])]
    [(('b',), 1), (('a',), 1)]
    """
    state = EliminationGraph(graph)
    segments = []
    for j in order:
        cost = state.markowitz(j)
        steps = tuple(EdgeStep((i, j), "front") for i in state.preds[j])
        state.eliminate_vertex(j)
        segments.append(Segment((j,), steps, cost))
    return segments


def _states(graph: CompGraph, segments: Sequence[Segment]) -> list[EliminationGraph]:
    """The state at the start of each segment."""
    state = EliminationGraph(graph)
    out = []
    for segment in segments:
        out.append(state.copy())
        for step in segment.steps:
            state.apply(step)
    return out


def _windows(rng: random.Random, segments: Sequence[Segment], window: int) -> list[tuple[int, int]]:
    """Every run of consecutive segments ``lo … hi`` (inclusive) of two or more segments holding at
    most ``window`` intermediates in all, shuffled by ``rng``."""
    out = []
    for lo in range(len(segments)):
        hi, total = lo, len(segments[lo].vertices)
        while hi + 1 < len(segments) and total + len(segments[hi + 1].vertices) <= window:
            hi += 1
            total += len(segments[hi].vertices)
            out.append((lo, hi))
    rng.shuffle(out)
    return out


def _check_positive_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise OrderError(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    return value


def _start_segments(graph: CompGraph, start: str | Sequence[Node] | None) -> list[Segment]:
    """Segments of the starting vertex order: ``start`` (a method name or an order), or the
    cheapest of the quick vertex heuristics."""
    candidates = DEFAULT_STARTS if start is None else (start,)
    best = None
    for item in candidates:
        segments = vertex_segments(graph, start_order(graph, item))
        if best is None or sum(s.cost for s in segments) < sum(s.cost for s in best):
            best = segments
    return best


def edge_lns(
    graph: CompGraph,
    *,
    seed: int | None = None,
    time_limit: float = 10.0,
    iterations: int | None = None,
    start: str | Sequence[Node] | None = None,
    window: int = DEFAULT_WINDOW,
    max_states: int = DEFAULT_MAX_STATES,
    progress: ProgressCallback | None = None,
) -> OrderResult:
    """An edge elimination sequence by large-neighbourhood search from a vertex order.

    Parameters
    ----------
    graph : CompGraph
        A graph of scalar edges.
    seed : int, optional
        Seed of the window choices (``None``: 0).
    time_limit : float, default 10
        Seconds for the search.
    iterations : int, optional
        Stop after this many windows solved (with ``time_limit``, whichever
        first); with it the result depends on the seed only.
    start : str or sequence, optional
        The starting vertex order: a vertex method's name or an explicit
        order (a certified optimum, say); default the cheapest of the quick
        vertex heuristics.
    window : int, default 6
        The most intermediates a rebuilt window holds.
    max_states : int, default 5 000
        States the A* search of one window may use; a window that needs more
        is left as it is.
    progress : callable, optional
        Called with a :class:`~jacacc.orders.local_search.Progress` whenever
        the sequence improves.

    Returns
    -------
    OrderResult
        The edge steps; ``lower_bound`` is :func:`monotone_lower_bound`,
        ``optimal`` True when the sequence attains it; ``search.solver`` is
        ``"lns"``.  The search stops early, with a sequence no single
        window can improve, once a pass over every window finds nothing.

    Examples
    --------
    >>> from jacacc import problems
    >>> from jacacc.eliminate import count_ops
    >>> g = problems.get("graphax_PropaneCombustion").graph()
    >>> result = edge_lns(g, iterations=30, window=4)
    >>> cost = count_ops(g, result.order, "edge").mults
    >>> cost == result.search.objective and cost >= result.lower_bound == 88
    True
    """
    if hasattr(graph, "edge_algebra"):
        raise OrderError("lns costs scalar edges (one multiplication per combination); this graph's edges are not")
    limit = check_time_limit(time_limit)
    _check_positive_int("window", window, 2)
    _check_positive_int("max_states", max_states, 1)
    if iterations is not None:
        _check_positive_int("iterations", iterations, 0)
    began = time.perf_counter()
    rng = random.Random(0 if seed is None else seed)
    segments = _start_segments(graph, start)
    bound = monotone_lower_bound(graph)
    total = sum(s.cost for s in segments)
    if progress is not None:
        progress(Progress("lns", total, bound, time.perf_counter() - began))
    states = _states(graph, segments)
    tried: set[tuple[frozenset, frozenset]] = set()
    moves = 0
    improved = True
    while improved and total > bound:  # passes over every window, until one finds nothing
        improved = False
        for lo, hi in _windows(rng, segments, window):
            if time.perf_counter() - began >= limit or (iterations is not None and moves >= iterations):
                break
            chosen = [v for s in segments[lo:hi + 1] for v in s.vertices]
            key = (frozenset(v for s in segments[:lo] for v in s.vertices), frozenset(chosen))
            if key in tried:
                continue
            tried.add(key)
            moves += 1
            solved = solve_window(states[lo], chosen, max_states=max_states)
            old = sum(s.cost for s in segments[lo:hi + 1])
            if solved is None or solved[0] >= old:
                continue
            segments[lo:hi + 1] = [Segment(tuple(chosen), solved[1], solved[0], exact=True)]
            del states[lo + 1:hi + 1]  # the states at the other boundaries do not change
            total -= old - solved[0]
            improved = True
            if progress is not None:
                progress(Progress("lns", total, bound, time.perf_counter() - began))
            break  # the segments changed: enumerate the windows again
    order = [step for s in segments for step in s.steps]
    status = "optimal" if total == bound else "feasible"
    info = SearchInfo(status, total, bound, elapsed(began), "lns")
    return OrderResult(order, optimal=True if total == bound else None, lower_bound=bound, search=info)


register_method("lns", edge_lns, modes=["edge"])
