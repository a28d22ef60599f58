"""Simulated annealing over vertex elimination orders: the method for graphs too large to prove.

Exact search (:mod:`jacacc.orders.exhaustive`, :mod:`jacacc.orders.cpsat`)
proves optima on graphs of a few dozen intermediates; the functions of the
AlphaGrad study (Lohoff & Neftci, NeurIPS 2024) have about a hundred.  There
the best orders come from a local search over permutations, as ANGEL and
xaifBooster offer: start from the greedy heuristics, perturb the order by
random insertion and swap moves, accept by the Metropolis rule at a falling
temperature, restart from several starting points.

Method ``anneal`` (vertex mode) returns an
:class:`~jacacc.orders.registry.OrderResult` with ``search`` filled
(status ``"feasible"``: a local search proves nothing, except where its order
meets the structural lower bound, which :func:`jacacc.optimize` notices).

Costing an order fast (paper 003 §1: eliminating vertex ``j`` costs
``|P(j)|·|S(j)|``).  Two facts make a move cheap to evaluate:

* the graph after eliminating a *set* of intermediates does not depend on the
  order within the set, so a move that only permutes positions ``lo … hi``
  leaves the state after ``hi`` — and every cost after it — unchanged;
* the state is kept as bitsets (one Python ``int`` of predecessors and one of
  successors per vertex), copied cheaply at *checkpoints* every ``√n``
  positions.

A move is evaluated by restoring the checkpoint at or before ``lo``,
replaying to ``lo`` and costing the new positions ``lo … hi`` only; the
replay stops as soon as the partial sum exceeds what the Metropolis draw
would accept.  Most moves are local (a window of a dozen positions), some
span the whole order.

References
----------
U. Naumann, *Optimal accumulation of Jacobian matrices by elimination
methods on the dual computational graph*, Math. Program. 99 (2004) — OJA and
the vertex elimination cost; paper 003 §1.  J. Lohoff and E. Neftci,
*Optimizing automatic differentiation with deep reinforcement learning*,
NeurIPS 2024 (the AlphaGrad task set, ``jacacc.problems.names("alphagrad")``).

Examples
--------
>>> import jacacc
>>> from jacacc import problems
>>> g = problems.get("BlackScholes").graph()
>>> plan = jacacc.optimize(g, method="anneal", seed=0, time_limit=0.5)
>>> plan.mults <= jacacc.optimize(g, method="markowitz").mults
True
>>> plan.search.status, plan.search.solver
('feasible', 'anneal')
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.errors import OrderError
from jacacc.graph import CompGraph
from jacacc.orders.registry import OrderResult, SearchInfo, register_method

__all__ = ["DEFAULT_STARTS", "DEFAULT_TIME_LIMIT", "BitsetVertexCost", "Progress", "anneal_vertex",
           "check_time_limit", "elapsed", "start_order", "vertex_order_cost"]

Node = Hashable
DEFAULT_TIME_LIMIT = 10.0
EXACT_BELOW = 12  # graphs with at most this many intermediates are solved exactly instead
DEFAULT_STARTS = ("markowitz", "min_fill", "relative_markowitz", "reverse", "markowitz_lowest_index", "forward")


@dataclass(frozen=True)
class Progress:
    """One progress report of a running search, passed to a ``progress`` callback.

    ``best`` is the multiplications of the best order found so far (None
    before the first), ``bound`` the best proven lower bound (None when the
    search proves none), ``elapsed`` seconds since the search began.
    """

    method: str
    best: int | None
    bound: int | None
    elapsed: float

    def __str__(self) -> str:
        bound = "-" if self.bound is None else self.bound
        return f"[{self.method}] {self.elapsed:7.2f} s  best {self.best}  bound {bound}"


ProgressCallback = Callable[[Progress], Any]


def elapsed(began: float) -> float:
    """Seconds since ``began``, to the centisecond (a record of a quick search stays reproducible)."""
    return round(time.perf_counter() - began, 2)


def check_time_limit(time_limit: Any, *, allow_none: bool = False) -> float | None:
    """A validated time limit in seconds (``None`` only where ``allow_none``).

    Examples
    --------
    >>> check_time_limit(2)
    2.0
    >>> check_time_limit(-1)
    Traceback (most recent call last):
    ...
    jacacc.errors.OrderError: time_limit must be a positive number of seconds, got -1
    """
    if time_limit is None and allow_none:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit > 0 \
            or math.isinf(time_limit) and not allow_none:
        raise OrderError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    return None if math.isinf(time_limit) else float(time_limit)


def _check_int_option(name: str, value: Any, minimum: int, *, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise OrderError(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    return value


class BitsetVertexCost:
    """Vertex elimination on bitsets: the cost of an order, fast enough for a local search.

    Vertices are numbered in topological order; ``preds[v]`` / ``succs[v]``
    are ints with bit ``u`` set for every current predecessor / successor.
    Only the predecessor sets of intermediates and the successor sets of
    intermediates are ever read, so eliminations update only those.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "a"), ("a", "b"), ("b", "y"), ("b", "z")])
    >>> model = BitsetVertexCost(g)
    >>> model.cost(["a", "b"]), model.cost(["b", "a"])
    (3, 4)
    """

    def __init__(self, graph: CompGraph) -> None:
        self.graph = graph
        topo = graph.topological_order
        self.index = {v: i for i, v in enumerate(topo)}
        self.nodes = topo
        self.intermediates = [self.index[v] for v in graph.intermediates]
        self.inter_mask = sum(1 << i for i in self.intermediates)
        preds = [0] * len(topo)
        succs = [0] * len(topo)
        for u, w in graph.edges:
            succs[self.index[u]] |= 1 << self.index[w]
            preds[self.index[w]] |= 1 << self.index[u]
        self.preds0, self.succs0 = preds, succs

    def start(self) -> tuple[list[int], list[int]]:
        """A fresh state (copies of the original adjacency)."""
        return list(self.preds0), list(self.succs0)

    def eliminate(self, preds: list[int], succs: list[int], j: int) -> int:
        """Eliminate vertex index ``j`` in place; return its cost ``|P(j)|·|S(j)|``."""
        p, s = preds[j], succs[j]
        keep = ~(1 << j)
        inter = self.inter_mask
        x = p & inter
        while x:
            low = x & -x
            x ^= low
            i = low.bit_length() - 1
            succs[i] = (succs[i] | s) & keep
        x = s & inter
        while x:
            low = x & -x
            x ^= low
            k = low.bit_length() - 1
            preds[k] = (preds[k] | p) & keep
        return p.bit_count() * s.bit_count()

    def costs(self, order: Sequence[int]) -> list[int]:
        """The cost of each step of ``order`` (vertex indices)."""
        preds, succs = self.start()
        return [self.eliminate(preds, succs, j) for j in order]

    def cost(self, order: Sequence[Node]) -> int:
        """Multiplications of the vertex order ``order`` (vertex ids)."""
        return sum(self.costs([self.index[v] for v in order]))


def vertex_order_cost(graph: CompGraph, order: Sequence[Node]) -> int:
    """Multiplications of a vertex elimination order (fast, structure only).

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "b"), ("b", "y")])
    >>> vertex_order_cost(g, ["b", "a"])
    2
    """
    return BitsetVertexCost(graph).cost(order)


class _Annealer:
    """Simulated annealing on one graph with checkpointed incremental costing."""

    def __init__(self, model: BitsetVertexCost, rng: random.Random) -> None:
        self.model = model
        self.rng = rng
        self.n = len(model.intermediates)
        self.stride = max(2, int(math.isqrt(self.n)))

    def load(self, order: list[int]) -> int:
        """Make ``order`` current: costs per position and checkpoints."""
        self.order = list(order)
        preds, succs = self.model.start()
        self.costs = []
        self.checkpoints = []
        for pos, j in enumerate(self.order):
            if pos % self.stride == 0:
                self.checkpoints.append((list(preds), list(succs)))
            self.costs.append(self.model.eliminate(preds, succs, j))
        self.total = sum(self.costs)
        return self.total

    def try_move(self, lo: int, hi: int, segment: list[int], threshold: float) -> bool:
        """Replace positions ``lo … hi`` by ``segment`` if the cost rises by at most ``threshold``."""
        stride, model = self.stride, self.model
        c = lo // stride
        preds, succs = self.checkpoints[c]
        preds, succs = list(preds), list(succs)
        order = self.order
        for pos in range(c * stride, lo):
            model.eliminate(preds, succs, order[pos])
        old = sum(self.costs[lo:hi + 1])
        limit = old + threshold
        new_costs = []
        spent = 0
        saved = []
        eliminate = model.eliminate
        for offset, j in enumerate(segment):
            pos = lo + offset
            if pos % stride == 0 and pos != lo:
                saved.append((pos // stride, (list(preds), list(succs))))
            here = eliminate(preds, succs, j)
            spent += here
            if spent > limit:
                return False
            new_costs.append(here)
        if lo % stride == 0:
            pass  # the checkpoint at lo is the state before lo: unchanged
        order[lo:hi + 1] = segment
        self.costs[lo:hi + 1] = new_costs
        for index, state in saved:
            self.checkpoints[index] = state
        self.total += spent - old
        return True

    def propose(self, window: int) -> tuple[int, int, list[int]]:
        """A random insertion or swap move: (lo, hi, new segment)."""
        rng, n, order = self.rng, self.n, self.order
        a = rng.randrange(n)
        if rng.random() < 0.8:
            b = a + rng.randint(-window, window)
            b = min(max(b, 0), n - 1)
        else:
            b = rng.randrange(n)
        if a == b:
            b = a + 1 if a + 1 < n else a - 1
        lo, hi = (a, b) if a < b else (b, a)
        segment = order[lo:hi + 1]
        kind = rng.random()
        if kind < 0.45:  # move the element at a to b
            if a < b:
                segment = segment[1:] + segment[:1]
            else:
                segment = segment[-1:] + segment[:-1]
        elif kind < 0.9:  # swap a and b
            segment[0], segment[-1] = segment[-1], segment[0]
        else:  # reverse a short block
            segment.reverse()
        return lo, hi, segment


def anneal_vertex(
    graph: CompGraph,
    *,
    seed: int | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
    iterations: int | None = None,
    starts: Sequence[str | Sequence[Node]] = DEFAULT_STARTS,
    restarts: int | None = None,
    temperature: float = 2.0,
    progress: ProgressCallback | None = None,
) -> OrderResult:
    """A cheap vertex elimination order by simulated annealing (see the module docstring).

    Parameters
    ----------
    graph : CompGraph
    seed : int, optional
        Seed of the moves and acceptance draws (``None``: 0).  With
        ``iterations`` given the result is a function of the seed; with only
        a time limit it also depends on how many moves fit in the time.
    time_limit : float, default 10
        Seconds for the whole search (the starting heuristics included).
    iterations : int, optional
        Stop after this many proposed moves in all (whichever of the two
        limits comes first).
    starts : sequence of method names or explicit orders
        Starting points: vertex heuristics by name, or orders.  Rounds cycle
        through them (the first rounds start from each, later ones from the
        best order so far).
    restarts : int, optional
        Number of annealing rounds (default: ``2 * len(starts)``); the time
        (and the iteration budget) is split evenly among them.
    temperature : float, default 2
        Initial temperature, in multiplications; it falls geometrically to
        1 % of that over each round.
    progress : callable, optional
        Called with a :class:`Progress` whenever the best order improves.

    Returns
    -------
    OrderResult
        ``optimal`` None, ``search`` with status ``"feasible"`` (no proof)
        and the objective of the order.  A graph of at most
        ``EXACT_BELOW = 12`` intermediates is solved exactly by the subset
        dynamic programme of :mod:`jacacc.orders.exhaustive` instead (status
        ``"optimal"``, solver ``"subset DP"``): milliseconds, and proven.

    Examples
    --------
    >>> from jacacc import problems
    >>> g = problems.get("PropaneCombustion").graph()
    >>> result = anneal_vertex(g, seed=1, time_limit=1, iterations=3000)
    >>> result.search.objective <= 88     # markowitz: 88
    True
    """
    limit = check_time_limit(time_limit)
    _check_int_option("iterations", iterations, 0)
    _check_int_option("restarts", restarts, 1)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise OrderError(f"temperature must be a positive number, got {temperature!r}")
    if not starts:
        raise OrderError("anneal needs at least one starting order (starts=...)")
    began = time.perf_counter()
    deadline = began + limit
    rng = random.Random(0 if seed is None else seed)
    model = BitsetVertexCost(graph)
    n = len(model.intermediates)
    if n <= EXACT_BELOW:  # the subset DP is exact and takes milliseconds here
        from jacacc.orders.exhaustive import optimum

        best = optimum(graph, "vertex")
        if progress is not None:
            progress(Progress("anneal", best.cost, best.cost, time.perf_counter() - began))
        info = SearchInfo("optimal", best.cost, best.cost, elapsed(began), "subset DP")
        return OrderResult(list(best.order), optimal=True, lower_bound=best.cost, search=info)

    start_orders: list[list[int]] = []
    for item in starts:
        start_orders.append([model.index[v] for v in start_order(graph, item)])
    best_cost, best_order = None, None
    for order in start_orders:
        c = sum(model.costs(order))
        if best_cost is None or c < best_cost:
            best_cost, best_order = c, order

    def report() -> None:
        if progress is not None:
            progress(Progress("anneal", best_cost, None, time.perf_counter() - began))

    report()
    rounds = restarts if restarts is not None else 2 * len(start_orders)
    if n >= 2:
        annealer = _Annealer(model, rng)
        window = max(2, min(12, n // 4))
        per_round_iters = None if iterations is None else max(1, iterations // rounds)
        for r in range(rounds):
            now = time.perf_counter()
            if now >= deadline:
                break
            round_end = now + (deadline - now) / (rounds - r)
            initial = start_orders[r] if r < len(start_orders) else best_order
            current = annealer.load(initial)
            t0 = temperature
            t_end = temperature * 0.01
            round_start = now
            step = 0
            fraction = 0.0
            while True:
                if step % 64 == 0:
                    now = time.perf_counter()
                    if now >= round_end:
                        break
                    fraction = (now - round_start) / (round_end - round_start)
                if per_round_iters is not None:
                    if step >= per_round_iters:
                        break
                    fraction = max(fraction, step / per_round_iters)
                step += 1
                temp = t0 * (t_end / t0) ** fraction
                lo, hi, segment = annealer.propose(window)
                u = rng.random()
                threshold = -temp * math.log(u) if u > 0 else math.inf
                if annealer.try_move(lo, hi, segment, threshold):
                    current = annealer.total
                    if current < best_cost:
                        best_cost, best_order = current, list(annealer.order)
                        report()
    order = [model.nodes[j] for j in best_order]
    info = SearchInfo("feasible", best_cost, None, elapsed(began), "anneal")
    return OrderResult(order, optimal=None, lower_bound=None, search=info)


def start_order(graph: CompGraph, item: str | Sequence[Node]) -> list[Node]:
    """A starting order: a vertex method by name, or an explicit permutation (checked)."""
    if isinstance(item, str):
        from jacacc.orders.registry import find_order

        return list(find_order(graph, "vertex", item, 0, {}).order)
    order = list(item)
    if sorted(map(repr, order)) != sorted(map(repr, graph.intermediates)) or len(set(order)) != len(order):
        raise OrderError("a starting order must be a permutation of the graph's intermediates")
    return order


register_method("anneal", anneal_vertex, modes=["vertex"])
