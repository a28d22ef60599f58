"""Proven optimal elimination orders: a CP-SAT model for vertex mode, best-first search for edge and face mode.

Two methods are registered for the three modes:

``cpsat``
    The best order found within ``time_limit`` (default 10 s), with the
    proven lower bound at that point.
``optimal``
    The same search without a default time limit: it runs until the order is
    proven optimal.  Given a ``time_limit`` that runs out first, it reports
    the best order, the bound and the gap honestly.

Both return an :class:`~jacacc.orders.registry.OrderResult` whose ``optimal``
is True only when the search proved it (CP-SAT status ``OPTIMAL``, or the
best-first search closed), whose ``lower_bound`` is the proven bound, and
whose ``search`` (:class:`~jacacc.orders.registry.SearchInfo`) carries
status (``"optimal"`` / ``"feasible"``), objective, best bound and wall time.
Options: ``time_limit`` (seconds), ``workers`` (CP-SAT search workers),
``seed``, ``hint_time`` (seconds of :mod:`~jacacc.orders.local_search` for
the starting order), ``progress`` (a callable receiving
:class:`~jacacc.orders.local_search.Progress` reports: current best, bound,
elapsed).

**Vertex mode: the CP-SAT model.**  Eliminating intermediate ``j`` costs
``|P(j)|·|S(j)|`` (paper 003 §1), where ``P(j)`` are the vertices, not yet
eliminated, joined to ``j`` by a path whose interior was eliminated before
``j`` (likewise ``S(j)`` forward).  Only the relative order of *comparable*
intermediates (one an ancestor of the other) matters, so the model has

* ``before[a, b]`` for each comparable pair, ``a`` an ancestor of ``b``: a is
  eliminated first; linked to integer positions ``pos[a] < pos[b]`` (resp.
  ``>``), which makes the pairs a consistent linear order;
* ``reach[j, u]`` for each ancestor ``u`` of ``j``: ``u`` is joined to ``j``
  through vertices eliminated before ``j`` — true for a predecessor, and
  implied by ``before[w, j] ∧ reach[j, w]`` for each edge ``u → w``;
* ``pred[j, u] ≥ reach[j, u] ∧ ¬before[u, j]`` (an input is never
  eliminated): ``u ∈ P(j)``; the mirror image ``succ[j, w]`` for descendants;
* ``p_j = Σ_u pred[j, u]``, ``s_j = Σ_w succ[j, w]``, ``c_j = p_j·s_j``
  (``AddMultiplicationEquality``), objective ``min Σ_j c_j``.

The implications only bound the sets from below, so every order has a
solution whose objective is its exact cost and no solution's objective is
below the cost of its order: the minimum is the optimum and the solver's
bound is a bound on it.  The decoded order is re-costed exactly.  The model is
hinted with the best of the greedy heuristics improved by ``anneal`` (all of
its variables filled from a replay of that order), and the objective is capped
by the hint's cost.

**Edge and face mode: best-first branch-and-bound.**  The states, moves and
consistent (admissible) bounds of the exact oracle
(:mod:`jacacc.orders.exhaustive`: edge sets, labelled dual graphs, the
cover bound) searched best-first under a time limit and a cap from the best
heuristic order (every vertex order is an edge and a face order, so the
``anneal`` vertex order serves too).  The smallest estimate left in the open
list is a proven lower bound; when the search closes, the order is optimal.
This proves optimality on more graphs than a time-indexed CP-SAT model of
edge elimination would (its horizon and fill-in variables grow with the number
of steps), so ``cpsat`` in these modes runs the same search; ``SearchInfo.solver``
says which one ran.

References
----------
U. Naumann, *Optimal Jacobian accumulation is NP-complete*, Math. Program.
112 (2008) — OJA; paper 003 §1 for the elimination costs; the OR-Tools CP-SAT
solver (Perron & Didier).

Examples
--------
>>> import jacacc
>>> g = jacacc.CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [
...     ("x0", "v0"), ("x0", "v2"), ("x1", "v1"), ("v0", "v1"), ("v0", "v2"), ("v1", "v2"),
...     ("v0", "y0"), ("v0", "y1"), ("v1", "y0"), ("v1", "y1"), ("v2", "y0"), ("v2", "y1")])
>>> plan = jacacc.optimize(g, method="optimal", workers=1, seed=0)
>>> plan.mults, plan.optimal, plan.search.status
(12, True, 'optimal')
>>> [jacacc.optimize(g, mode=m, method="optimal", time_limit=5).mults for m in ("edge", "face")]
[11, 11]
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Hashable, Sequence
from typing import Any

from jacacc.bounds import (
    Structure,
    block_partition_bound,
    connectivity_terms,
    safe_prefix,
    structural_lower_bound,
    twin_classes,
)
from jacacc.eliminate.state import EdgeStep, EliminationGraph
from jacacc.eliminate.vertex import validate_vertex_order
from jacacc.errors import OrderError, require_extra
from jacacc.graph import CompGraph
from jacacc.orders.exhaustive import EdgeSpace, FaceNames, FaceState, face_lower_bound, replay_named_faces
from jacacc.orders.local_search import (
    DEFAULT_STARTS,
    DEFAULT_TIME_LIMIT,
    BitsetVertexCost,
    Progress,
    ProgressCallback,
    anneal_vertex,
    check_time_limit,
    elapsed,
    start_order,
)
from jacacc.orders.registry import OrderResult, SearchInfo, register_method

__all__ = ["branch_and_bound", "cpsat_vertex", "edge_steps_from_vertex_order", "vertex_model"]

Node = Hashable


def _check_workers(workers: Any) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise OrderError(f"workers must be a positive integer, got {workers!r}")
    return workers


def _check_hint_time(hint_time: Any) -> float | None:
    if hint_time is None:
        return None
    if isinstance(hint_time, bool) or not isinstance(hint_time, (int, float)) or hint_time < 0 \
            or math.isinf(hint_time):
        raise OrderError(f"hint_time must be a non-negative number of seconds, got {hint_time!r}")
    return float(hint_time)


def _hint_seconds(hint_time: float | None, time_limit: float | None, n: int) -> float:
    """Seconds of local search for the starting order: by default a fifth of the
    time limit, at most 2 s, and only a little on small graphs."""
    if hint_time is not None:
        return hint_time
    share = 2.0 if time_limit is None else min(2.0, 0.2 * time_limit)
    return min(share, 0.02 * n)


def _hint_order(graph: CompGraph, seed: int | None, seconds: float) -> list[Node]:
    """The best heuristic vertex order, improved by ``anneal`` for ``seconds``."""
    n = len(graph.intermediates)
    if seconds <= 0 or n < 2:
        model = BitsetVertexCost(graph)
        orders = [start_order(graph, name) for name in DEFAULT_STARTS]
        return min(orders, key=model.cost)
    return list(anneal_vertex(graph, seed=seed, time_limit=seconds, iterations=3000 * n).order)


# ============================================================================ vertex mode: CP-SAT
class _VertexModel:
    """The CP-SAT model of vertex elimination (see the module docstring)."""

    def __init__(self, graph: CompGraph, cp_model: Any, *, strengthen: bool = True,
                 block_sizes: Sequence[int] = (12, 16)) -> None:
        self.graph = graph
        self.model = model = cp_model.CpModel()
        mids = list(graph.intermediates)
        self.mids = mids
        inter = set(mids)
        n = len(mids)
        topo = graph.topological_order
        rank = {v: i for i, v in enumerate(topo)}
        succs = {v: graph.successors(v) for v in topo}
        preds = {v: graph.predecessors(v) for v in topo}
        anc: dict[Node, set[Node]] = {}
        for v in topo:
            anc[v] = set()
            for u in preds[v]:
                anc[v] |= anc[u] | {u}
        desc: dict[Node, set[Node]] = {}
        for v in reversed(topo):
            desc[v] = set()
            for w in succs[v]:
                desc[v] |= desc[w] | {w}
        self.anc, self.desc = anc, desc

        # the order: a position per intermediate, and one literal per comparable pair
        self.pos = {j: model.NewIntVar(0, max(n - 1, 0), f"pos[{j}]") for j in mids}
        self.before: dict[tuple[Node, Node], Any] = {}
        for b in mids:
            for a in sorted(anc[b] & inter, key=rank.__getitem__):
                lit = model.NewBoolVar(f"before[{a},{b}]")
                model.Add(self.pos[a] < self.pos[b]).OnlyEnforceIf(lit)
                model.Add(self.pos[a] > self.pos[b]).OnlyEnforceIf(lit.Not())
                self.before[a, b] = lit

        self.reach_p: dict[tuple[Node, Node], Any] = {}
        self.reach_s: dict[tuple[Node, Node], Any] = {}
        self.in_p: dict[tuple[Node, Node], Any] = {}
        self.in_s: dict[tuple[Node, Node], Any] = {}
        self.p: dict[Node, Any] = {}
        self.s: dict[Node, Any] = {}
        self.c: dict[Node, Any] = {}
        # κ(X, j), κ(v, Y): |P(j)| and |S(j)| are at least these in every order (jacacc.bounds)
        kappa = {t.vertex: (t.kappa_in, t.kappa_out) for t in connectivity_terms(graph)} if strengthen else {}
        for j in mids:
            self._neighbourhood(j, anc[j], preds, succs, inter, self.reach_p, self.in_p, forward=False)
            self._neighbourhood(j, desc[j], succs, preds, inter, self.reach_s, self.in_s, forward=True)
            # the cost of j: |P(j)|·|S(j)|, each factor at least 1 (a pruned graph keeps j on a path)
            n_anc, n_desc = len(anc[j]), len(desc[j])
            k_in, k_out = kappa.get(j, (1, 1))  # κ ≤ the number of ancestors (descendants)
            self.p[j] = model.NewIntVar(k_in, max(n_anc, 1), f"p[{j}]")
            self.s[j] = model.NewIntVar(k_out, max(n_desc, 1), f"s[{j}]")
            model.Add(self.p[j] == sum(self.in_p[j, u] for u in anc[j]))
            model.Add(self.s[j] == sum(self.in_s[j, w] for w in desc[j]))
            self.c[j] = model.NewIntVar(k_in * k_out, max(n_anc * n_desc, 1), f"c[{j}]")
            model.AddMultiplicationEquality(self.c[j], [self.p[j], self.s[j]])
            # c ≥ p and c ≥ s: the linear relaxation of the product is weak without them
            model.Add(self.c[j] >= self.p[j])
            model.Add(self.c[j] >= self.s[j])
            if strengthen:  # McCormick: (p − κ_in)(s − κ_out) ≥ 0
                model.Add(self.c[j] >= k_in * self.s[j] + k_out * self.p[j] - k_in * k_out)
        self.objective = sum(self.c.values())
        self.floor = 0
        if mids:
            floor = structural_lower_bound(graph, "vertex")
            if strengthen:
                floor = max(floor, sum(a * b for a, b in kappa.values()))
                # block bounds (jacacc.bounds.block_lower_bound) as cuts on the sums of costs
                state = Structure.from_graph(graph)
                for size, reverse in itertools.product(block_sizes, (False, True)):
                    total, blocks = block_partition_bound(state, size, reverse=reverse)
                    floor = max(floor, total)
                    for block, value in blocks:
                        if len(block) > 1:
                            model.Add(sum(self.c[w] for w in block) >= value)
            model.Add(self.objective >= floor)
            self.floor = floor
        self.twins = twin_classes(graph) if strengthen else []
        for twins in self.twins:
            self._together(twins[0], twins[1:])
        model.Minimize(self.objective)

    def _together(self, first: Node, others: list[Node]) -> None:
        """False twins are eliminated consecutively (:func:`jacacc.bounds.twin_classes`): every
        vertex comparable to them goes before all or after all; they cost the same."""
        model = self.model
        comparable = (self.anc[first] | self.desc[first]) & set(self.mids)
        for b in others:
            for w in comparable:
                x, y = self.eliminated_before(w, first), self.eliminated_before(w, b)
                model.AddImplication(x, y)
                model.AddImplication(y, x)
            model.Add(self.p[b] == self.p[first])
            model.Add(self.s[b] == self.s[first])
            model.Add(self.c[b] == self.c[first])

    def eliminated_before(self, w: Node, j: Node) -> Any:
        """The literal "intermediate ``w`` is eliminated before ``j``" (comparable pair)."""
        lit = self.before.get((w, j))
        return lit if lit is not None else self.before[j, w].Not()

    def _neighbourhood(self, j: Node, side: set[Node], toward: dict, away: dict, inter: set[Node],
                       reach: dict, member: dict, *, forward: bool) -> None:
        """reach[j, u] and member[j, u] for every u on one side of j (ancestors when
        ``forward`` is False, descendants when True); ``toward[u]`` are u's
        neighbours on j's side, ``away[u]`` the neighbours closer to j."""
        model = self.model
        for u in side:
            reach[j, u] = model.NewBoolVar(f"reach[{j},{u}]")
            member[j, u] = model.NewBoolVar(f"member[{j},{u}]")
        for u in side:
            # u is joined to j through vertices eliminated before j: directly, or via a
            # neighbour w (closer to j) that is eliminated before j and joined to j
            for w in away[u]:
                if w == j:
                    model.Add(reach[j, u] == 1)
                elif w in side and w in inter:
                    model.AddBoolOr([self.eliminated_before(w, j).Not(), reach[j, w].Not(), reach[j, u]])
            # u counts in P(j) (resp. S(j)) if joined and not eliminated before j
            if u in inter:
                model.AddBoolOr([reach[j, u].Not(), self.eliminated_before(u, j), member[j, u]])
            else:
                model.AddImplication(reach[j, u], member[j, u])

    def hint(self, order: Sequence[Node]) -> int:
        """Hint every variable from a replay of ``order``; return its cost."""
        model = self.model
        position = {v: i for i, v in enumerate(order)}
        for j, var in self.pos.items():
            model.AddHint(var, position[j])
        for (a, b), lit in self.before.items():
            model.AddHint(lit, position[a] < position[b])
        total = 0
        inter = set(self.mids)
        for j in self.mids:
            earlier = {v for v in inter if position[v] < position[j]}
            p = self._hint_side(j, self.graph.predecessors, earlier, self.reach_p, self.in_p, self.anc[j])
            s = self._hint_side(j, self.graph.successors, earlier, self.reach_s, self.in_s, self.desc[j])
            model.AddHint(self.p[j], p)
            model.AddHint(self.s[j], s)
            model.AddHint(self.c[j], p * s)
            total += p * s
        return total

    def _hint_side(self, j: Node, step: Any, earlier: set[Node], reach: dict, member: dict,
                   side: set[Node]) -> int:
        found: set[Node] = set()
        stack = list(step(j))
        while stack:
            u = stack.pop()
            if u in found:
                continue
            found.add(u)
            if u in earlier:
                stack.extend(step(u))
        count = 0
        for u in side:
            joined = u in found
            inside = joined and u not in earlier
            count += inside
            self.model.AddHint(reach[j, u], joined)
            self.model.AddHint(member[j, u], inside)
        return count

    def decode(self, solver: Any) -> list[Node]:
        """The order of a solution: intermediates by position (ties between
        incomparable vertices broken by topological rank — any order of them costs the same)."""
        rank = {v: i for i, v in enumerate(self.mids)}
        return sorted(self.mids, key=lambda j: (solver.Value(self.pos[j]), rank[j]))


def vertex_model(graph: CompGraph) -> Any:
    """The CP-SAT model of optimal vertex elimination for ``graph`` (for inspection).

    Returns the ``CpModel``; see the module docstring for its variables.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "b"), ("b", "y")])
    >>> model = vertex_model(g)
    >>> len(model.Proto().variables) > 0
    True
    """
    cp_model = require_extra("ortools.sat.python.cp_model", "ortools")
    return _VertexModel(graph, cp_model).model


_STATUS = {"OPTIMAL": "optimal", "FEASIBLE": "feasible"}


def cpsat_vertex(
    graph: CompGraph,
    *,
    seed: int | None = None,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
    workers: int = 8,
    hint_time: float | None = None,
    progress: ProgressCallback | None = None,
    strengthen: bool = True,
    hint: Sequence[Node] | None = None,
) -> OrderResult:
    """The cheapest vertex elimination order CP-SAT finds within ``time_limit``.

    Parameters
    ----------
    graph : CompGraph
    seed : int, optional
        CP-SAT's ``random_seed`` and the seed of the hint's local search.
    time_limit : float or None, default 10
        Seconds for the whole search, the hint included; ``None``: until
        proven optimal.
    workers : int, default 8
        CP-SAT search workers (``num_workers``).
    hint_time : float, optional
        Seconds of ``anneal`` for the hint (default: a fifth of the limit, at
        most 2 s, less on small graphs).
    progress : callable, optional
        Receives a :class:`~jacacc.orders.local_search.Progress` per improving
        solution and per improved bound.
    strengthen : bool, default True
        Use the proven reductions and bounds of :mod:`jacacc.bounds`: the safe
        prefix (:func:`~jacacc.bounds.safe_prefix`) is eliminated first and
        the model covers only the graph it leaves; each vertex's ``p``, ``s``
        and ``c`` start at κ(X, j), κ(j, Y) and their product, with the
        McCormick cut ``c ≥ κ_in·s + κ_out·p − κ_in·κ_out``; false twins are
        eliminated consecutively.  Each keeps some optimal order feasible.
        False gives the plain model.
    hint : sequence, optional
        An order to start from besides the heuristic one (the cheaper is used).

    Returns
    -------
    OrderResult
        ``optimal`` True only with CP-SAT status OPTIMAL (or the order meets
        a proven bound), else None; ``lower_bound`` the proven bound.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "a"), ("a", "b"), ("b", "y"), ("b", "z")])
    >>> result = cpsat_vertex(g, time_limit=2, workers=1)
    >>> result.order, result.optimal, result.lower_bound, result.search.status
    (['a', 'b'], True, 3, 'optimal')
    """
    limit = check_time_limit(time_limit, allow_none=True)
    workers = _check_workers(workers)
    hint_seconds = _check_hint_time(hint_time)
    began = time.perf_counter()
    mids = graph.intermediates
    structural = structural_lower_bound(graph, "vertex")
    costing = BitsetVertexCost(graph)
    best_order = _hint_order(graph, seed, _hint_seconds(hint_seconds, limit, len(mids)))
    best_cost = costing.cost(best_order)
    if hint is not None:
        given = list(hint)
        validate_vertex_order(graph, given)
        if costing.cost(given) < best_cost:
            best_order, best_cost = given, costing.cost(given)
    prefix: list[Node] = []
    offset = 0  # the prefix's cost
    solved = graph  # the graph the model covers
    if strengthen:
        steps, left = safe_prefix(graph)
        prefix = [step.vertex for step in steps]
        offset = sum(step.cost for step in steps)
        structural = max(structural, offset + sum(t.value for t in connectivity_terms(left)))
        # the prefix first costs no more (jacacc.bounds.safe_prefix), twins together neither
        placed = set(prefix)
        solved = _structure_graph(left)
        arranged = prefix + _twins_together(solved, [v for v in best_order if v not in placed])
        if costing.cost(arranged) <= best_cost:  # always, by the two theorems
            best_order, best_cost = arranged, costing.cost(arranged)

    def report(best: int | None, bound: int | None) -> None:
        if progress is not None:
            progress(Progress("cpsat", best, bound, time.perf_counter() - began))

    report(best_cost, structural)
    if best_cost <= structural:  # the bound is met: nothing left to prove
        info = SearchInfo("optimal", best_cost, best_cost, elapsed(began), "heuristic")
        return OrderResult(best_order, optimal=True, lower_bound=best_cost, search=info)
    if strengthen and not solved.intermediates:  # the safe prefix is an optimal order
        info = SearchInfo("optimal", offset, offset, elapsed(began), "reduction")
        return OrderResult(prefix, optimal=True, lower_bound=offset, search=info)

    cp_model = require_extra("ortools.sat.python.cp_model", "ortools")
    # block cuts: blocks of 16 take seconds to bound, worth it only in a long search
    sizes = (12, 16) if limit is None or limit >= 60 else (10,)
    built = _VertexModel(solved, cp_model, strengthen=strengthen, block_sizes=sizes)
    structural = max(structural, offset + built.floor)
    if best_cost <= structural:  # the block bounds are met
        info = SearchInfo("optimal", best_cost, best_cost, elapsed(began), "bounds")
        return OrderResult(best_order, optimal=True, lower_bound=best_cost, search=info)
    built.hint(best_order[len(prefix):])
    built.model.Add(built.objective <= best_cost - offset)
    solver = cp_model.CpSolver()
    params = solver.parameters
    if limit is not None:
        params.max_time_in_seconds = max(0.05, limit - (time.perf_counter() - began))
    params.num_workers = workers
    params.random_seed = 0 if seed is None else int(seed) % (2 ** 31)

    def shifted(best: int | None, bound: int | None) -> None:
        report(None if best is None else best + offset, None if bound is None else max(structural, bound + offset))

    if progress is not None:
        solver.best_bound_callback = lambda bound: shifted(None, math.ceil(bound - 1e-6))
        callback = _SolutionReporter(cp_model, shifted)
    else:
        callback = None
    status = solver.Solve(built.model, callback)
    name = solver.StatusName(status)
    bound = structural
    if name in _STATUS:
        order = prefix + built.decode(solver)
        cost = costing.cost(order)
        if cost < best_cost:
            best_order, best_cost = order, cost
        bound = max(bound, offset + math.ceil(solver.BestObjectiveBound() - 1e-6))
    elif name == "INFEASIBLE":  # the cap excludes every cheaper order: the hint is optimal
        bound = best_cost
    proven = name == "OPTIMAL" or bound >= best_cost
    if proven:
        bound = best_cost
    report(best_cost, bound)
    info = SearchInfo("optimal" if proven else "feasible", best_cost, bound, elapsed(began), "cp-sat")
    return OrderResult(list(best_order), optimal=True if proven else None, lower_bound=bound, search=info)


def _structure_graph(state: Structure) -> CompGraph:
    """The graph a :class:`~jacacc.bounds.Structure` holds, as a structural CompGraph."""
    edges = [(u, w) for u, out in state.succs.items() for w in out]
    return CompGraph.from_edges(state.inputs, state.outputs, edges)


def _twins_together(graph: CompGraph, order: Sequence[Node]) -> list[Node]:
    """``order`` with each class of false twins of ``graph`` moved to one place, no dearer.

    For each class, the whole class is tried at the place of each of its
    members (among the other vertices); by the proof of
    :func:`jacacc.bounds.twin_classes` one of these costs no more than
    ``order``, and the cheapest is kept.
    """
    order = list(order)
    classes = twin_classes(graph)
    if not classes:
        return order
    costing = BitsetVertexCost(graph)
    for twins in classes:
        members = set(twins)
        others = [v for v in order if v not in members]
        slots = sorted({sum(1 for v in order[:i] if v not in members) for i, v in enumerate(order) if v in members})
        candidates = [others[:k] + twins + others[k:] for k in slots]
        order = min(candidates, key=costing.cost)
    return order


def _solution_reporter_class(cp_model: Any) -> type:
    class Reporter(cp_model.CpSolverSolutionCallback):
        def __init__(self, report: Any) -> None:
            super().__init__()
            self.report = report

        def on_solution_callback(self) -> None:
            self.report(round(self.ObjectiveValue()), math.ceil(self.BestObjectiveBound() - 1e-6))

    return Reporter


def _SolutionReporter(cp_model: Any, report: Any) -> Any:  # noqa: N802 - a class factory
    return _solution_reporter_class(cp_model)(report)


def optimal_vertex(graph: CompGraph, *, seed: int | None = None, time_limit: float | None = None,
                   workers: int = 8, hint_time: float | None = None,
                   progress: ProgressCallback | None = None) -> OrderResult:
    """:func:`cpsat_vertex` run until proven optimal (no default time limit)."""
    return cpsat_vertex(graph, seed=seed, time_limit=time_limit, workers=workers, hint_time=hint_time,
                        progress=progress)


# ============================================================================ edge and face mode
def edge_steps_from_vertex_order(graph: CompGraph, order: Sequence[Node]) -> list[EdgeStep]:
    """A vertex order as edge steps of the same cost: each vertex's in-edges front-eliminated.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "b"), ("b", "y")])
    >>> [str(s) for s in edge_steps_from_vertex_order(g, ["b", "a"])]
    ['front(a→b)', 'front(x→a)']
    """
    state = EliminationGraph(graph)
    steps = []
    for j in order:
        for i in list(state.preds[j]):
            step = EdgeStep((i, j), "front")
            steps.append(step)
            state.apply(step)
    return steps


def _incumbent(graph: CompGraph, mode: str, seed: int | None, hint_seconds: float) -> tuple[list, int]:
    """The cheapest quick order of ``mode``: its heuristics and the annealed vertex order."""
    from jacacc.eliminate import count_ops
    from jacacc.orders.faces import faces_from_vertex_order
    from jacacc.orders.registry import get_method, methods

    vertex = _hint_order(graph, seed, hint_seconds)
    candidates = [edge_steps_from_vertex_order(graph, vertex) if mode == "edge"
                  else faces_from_vertex_order(graph, vertex)]
    quick = {"edge": ("markowitz", "min_fill", "relative_markowitz"), "face": ("greedy", "edge_markowitz")}[mode]
    for name in quick:
        if name in methods(mode):
            candidates.append(list(get_method(name, mode)(graph, seed=0)))
    scored = [(count_ops(graph, order, mode).mults, i) for i, order in enumerate(candidates)]
    cost, index = min(scored)
    return candidates[index], cost


def branch_and_bound(
    graph: CompGraph,
    mode: str,
    *,
    seed: int | None = None,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
    hint_time: float | None = None,
    max_states: int = 2_000_000,
    progress: ProgressCallback | None = None,
) -> OrderResult:
    """Best-first branch-and-bound for ``mode`` ``"edge"`` or ``"face"`` under a time limit.

    States, moves and the consistent bound are those of the exact oracle
    (:mod:`jacacc.orders.exhaustive`); the cap is the best quick order.  At the
    time limit (or ``max_states`` distinct states) the search stops and reports
    the best order known with the smallest estimate left open as lower bound.

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [("x0", "a"), ("x1", "a"),
    ...     ("a", "b"), ("b", "y0"), ("b", "y1")])
    >>> result = branch_and_bound(g, "edge", time_limit=5)
    >>> result.search.objective, result.optimal, result.search.status
    (6, True, 'optimal')
    """
    if mode not in ("edge", "face"):
        raise OrderError(f"branch_and_bound searches edge or face mode, not {mode!r}")
    limit = check_time_limit(time_limit, allow_none=True)
    hint_seconds = _check_hint_time(hint_time)
    if isinstance(max_states, bool) or not isinstance(max_states, int) or max_states < 1:
        raise OrderError(f"max_states must be a positive integer, got {max_states!r}")
    began = time.perf_counter()
    deadline = None if limit is None else began + limit
    n = len(graph.intermediates)
    order, cap = _incumbent(graph, mode, seed, _hint_seconds(hint_seconds, limit, n))
    structural = structural_lower_bound(graph, mode)
    name = f"{mode} b&b"

    def report(bound: int | None) -> None:
        if progress is not None:
            progress(Progress(name, cap, bound, time.perf_counter() - began))

    report(structural)
    if cap <= structural:
        info = SearchInfo("optimal", cap, cap, elapsed(began), "heuristic")
        return OrderResult(order, optimal=True, lower_bound=cap, search=info)
    search = _EdgeSearch(graph, cap) if mode == "edge" else _FaceSearch(graph, cap)
    found, bound = search.run(deadline, max_states, report)
    if found is not None:
        order, cap, bound = found[0], found[1], found[1]
    bound = max(bound, structural)
    proven = bound >= cap
    if proven:
        bound = cap
    report(bound)
    info = SearchInfo("optimal" if proven else "feasible", cap, bound, elapsed(began), "best-first")
    return OrderResult(list(order), optimal=True if proven else None, lower_bound=bound, search=info)


class _BestFirst:
    """A best-first search over states with a consistent bound and a cap (the incumbent's
    cost): returns (order, cost) when it finds a cheaper order or proves nothing is
    cheaper, else None, and the proven lower bound."""

    def __init__(self, cap: int) -> None:
        self.cap = cap

    def run(self, deadline: float | None, max_states: int, report: Any) -> tuple[tuple[list, int] | None, int]:
        start, start_estimate = self.start()
        heap = [(start_estimate, 0, 0, start)]
        best_cost = {start: 0}
        closed: set = set()
        tie = itertools.count(1)
        reported = start_estimate
        while heap:
            estimate, neg_cost, _, key = heap[0]
            if key in closed:
                heapq.heappop(heap)
                continue
            if estimate >= self.cap:
                return None, self.cap  # nothing open can beat the incumbent: it is optimal
            if deadline is not None and time.perf_counter() >= deadline:
                break
            heapq.heappop(heap)
            cost = -neg_cost
            if self.is_goal(key):
                return (self.path(key), cost), cost
            closed.add(key)
            if estimate > reported:
                reported = estimate
                report(estimate)
            for move, price, nxt, nxt_bound in self.expand(key):
                if deadline is not None and time.perf_counter() >= deadline:
                    break  # bounds can be slow on big states: stop inside an expansion too
                total = cost + price
                if nxt in closed or total >= best_cost.get(nxt, total + 1):
                    continue
                if total + nxt_bound >= self.cap:
                    continue  # cannot beat the incumbent
                if nxt not in best_cost and len(best_cost) >= max_states:
                    deadline = 0.0  # out of room: stop at the next pop and report the bound
                    break
                best_cost[nxt] = total
                self.link(nxt, key, move)
                heapq.heappush(heap, (total + nxt_bound, -total, next(tie), nxt))
            else:
                continue
            # left the expansion early: the state goes back on the open list to keep the bound valid
            closed.discard(key)
            heapq.heappush(heap, (estimate, neg_cost, next(tie), key))
            self.reopen(key)
            break
        if not heap:
            return None, self.cap  # every cheaper state explored: the incumbent is optimal
        # the cheapest estimate still open bounds every order not yet ruled out
        return None, min(heap[0][0], self.cap)

    def reopen(self, key: Any) -> None:
        """Undo what expanding ``key`` consumed (the face search's pending state)."""


class _EdgeSearch(_BestFirst):
    def __init__(self, graph: CompGraph, cap: int) -> None:
        super().__init__(cap)
        self.space = EdgeSpace(graph)
        self.bounds: dict = {}
        self.parent: dict = {}

    def start(self) -> tuple[int, int]:
        space = self.space
        self.parent[space.start] = None
        return space.start, space.bound(space.edges(space.start), self.bounds)

    def is_goal(self, state: int) -> bool:
        return not state & self.space.inner

    def expand(self, state: int):
        space = self.space
        for step, price, nxt in space.moves(state, space.edges(state)):
            yield step, price, nxt, space.bound(space.edges(nxt), self.bounds)

    def link(self, nxt: int, state: int, step: EdgeStep) -> None:
        self.parent[nxt] = (state, step)

    def path(self, state: int) -> list[EdgeStep]:
        steps = []
        while self.parent[state] is not None:
            state, step = self.parent[state]
            steps.append(step)
        return steps[::-1]


class _FaceSearch(_BestFirst):
    def __init__(self, graph: CompGraph, cap: int) -> None:
        super().__init__(cap)
        self.graph = graph
        self.names = FaceNames()
        self.bounds: dict = {}
        self.parent: dict = {}
        self.pending: dict = {}

    def start(self) -> tuple[Hashable, int]:
        first = FaceState.start(self.graph, self.names)
        key = first.key()
        self.pending[key] = first
        self.parent[key] = None
        return key, face_lower_bound(first.graph, self.bounds)

    def is_goal(self, key: Hashable) -> bool:
        return self.pending[key].graph.done

    def expand(self, key: Hashable):
        current = self.pending.pop(key)
        self.current = current
        for step in list(current.graph.intermediate_faces()):
            nxt = current.advance(step, self.names)
            nxt_key = nxt.key()
            self.candidate = nxt
            yield (current.name(step.left), current.name(step.right)), 1, nxt_key, \
                face_lower_bound(nxt.graph, self.bounds)

    def reopen(self, key: Hashable) -> None:
        self.pending[key] = self.current

    def link(self, nxt: Hashable, key: Hashable, face: tuple) -> None:
        self.parent[nxt] = (key, face)
        self.pending[nxt] = self.candidate

    def path(self, key: Hashable) -> list:
        named = []
        while self.parent[key] is not None:
            key, face = self.parent[key]
            named.append(face)
        return list(replay_named_faces(self.graph, named[::-1], self.names))


def _mode_search(mode: str, default_limit: float | None):
    def finder(graph: CompGraph, *, seed: int | None = None, time_limit: float | None = default_limit,
               workers: int = 8, hint_time: float | None = None, max_states: int = 2_000_000,
               progress: ProgressCallback | None = None) -> OrderResult:
        _check_workers(workers)  # accepted for a uniform interface; the search is single-threaded
        return branch_and_bound(graph, mode, seed=seed, time_limit=time_limit, hint_time=hint_time,
                                max_states=max_states, progress=progress)

    if mode == "face":
        search = finder

        def finder(graph: CompGraph, *, seed: int | None = None, time_limit: float | None = default_limit,
                   workers: int = 8, hint_time: float | None = None, max_states: int = 2_000_000,
                   progress: ProgressCallback | None = None, rule: Any = None) -> OrderResult:
            # optimize passes face mode's `rule` to the method too; the search's states
            # follow Naumann's rule, so any other is refused as the exhaustive search does
            from jacacc.eliminate.face import face_rule

            if face_rule(rule) != face_rule("naumann"):
                raise OrderError(f"the face branch-and-bound search covers Naumann's rule only, "
                                 f"not {face_rule(rule).name!r}")
            return search(graph, seed=seed, time_limit=time_limit, workers=workers, hint_time=hint_time,
                          max_states=max_states, progress=progress)

    finder.__name__ = f"{'optimal' if default_limit is None else 'cpsat'}_{mode}"
    finder.__doc__ = (f"Best-first branch-and-bound for {mode} mode (see :func:`branch_and_bound`); "
                      f"time_limit default {default_limit}."
                      + (" ``rule`` may only name Naumann's rule." if mode == "face" else ""))
    return finder


register_method("cpsat", cpsat_vertex, modes=["vertex"], exact=True)
register_method("optimal", optimal_vertex, modes=["vertex"], exact=True)
for _mode in ("edge", "face"):
    register_method("cpsat", _mode_search(_mode, DEFAULT_TIME_LIMIT), modes=[_mode], exact=True)
    register_method("optimal", _mode_search(_mode, None), modes=[_mode], exact=True)
