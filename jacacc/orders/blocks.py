"""Method ``blocks``: paper 003's chains, blocks, factorization and pages as one strategy.

Paper 003 (§4, §5) computes a Jacobian by turning the graph into nested
algebraic expressions: simple chains and simple blocks are replaced by
*reference edges* innermost first, complex blocks are *factorized* (split
until they are simple), and graphs with several roots and terminals are cut
into *pages* that are processed separately and merged.  This module does
each of those steps as eliminations on a work graph whose edges hold
schedule slots, so the strategy emits a :class:`~jacacc.schedule.Schedule`
whose ops are exactly the multiplications and additions performed.

The strategy (``optimize(graph, method="blocks")``), and how the paper is read
------------------------------------------------------------------------------
1. **Reference edges, innermost first** (§4, §5 step 1; Def. 3.2, 3.3).
   Every maximal direct simple chain ``s → v1 → … → vk → t`` is replaced by
   one edge ``s → t`` holding the chain's product: its interior vertices are
   eliminated from ``s`` onwards, ``k`` multiplications.  When ``s → t``
   already exists the product is added to it (one fused multiply-add): the
   chains of a simple block collapse into one reference edge.  Repeating
   until no vertex of in- and out-degree 1 is left reduces the indirect
   chains and blocks once their nested ones are gone, i.e. innermost first.
   Each such step costs one multiplication per removed vertex, which no
   method can beat.
2. **Complex blocks** (Def. 3.1, §4) that remain are factorized, smallest
   first.  *Backward factorization* splits, from the terminals upward, every
   vertex that more than one path reaches "from behind", each copy keeping one
   out-edge (data flow) and a copy of the vertex's reference edge; each copy
   is then the interior of a simple chain and folds into a reference edge.
   The multiplications of splitting ``j`` and folding its copies are exactly
   those of eliminating ``j`` (``|P(j)|·|S(j)|``), so backward factorization is
   performed as: repeatedly eliminate the block vertex nearest the inputs
   among those of out-degree > 1 (nearest the inputs overall if there is
   none), replacing the chains and blocks this creates by reference edges
   after every step (the paper: "adjust the in-degrees … and continue";
   a simple block that appears "we regard as one edge").  *Forward
   factorization* is the mirror image (nearest the outputs, in-degree > 1).
   §4 also allows factorizing "from both sides or from the middle": the
   variant ``"both"`` takes, at every step, whichever of the two candidates
   is cheaper to eliminate, and ``"middle"`` the vertex of the block that is
   cheapest to split anywhere (least ``|P(j)|·|S(j)|``, ties toward the outputs).
   Each complex block is factorized by the variant that costs least on it
   (§4: "our goal is to find an algebraic expression
   that requires less fma's"), found by a dry run.
3. **Pages** (§5) when no block with real endpoints is left (several roots
   and terminals intertwined).  Step 2 of §5 picks ``v``, a vertex of largest
   r-degree (the number of outputs it reaches) nearest the roots, and ``w``,
   a vertex it depends on of largest t-degree (the number of inputs that
   reach it) nearest the terminals; the common sub-block ``G(w, v)`` between
   them serves r-degree × t-degree root–terminal pairs.  If one of the
   degrees exceeds 1 (§5 step 3; the exact condition is lost in our copy of
   the text), the graph is split into two pages sharing the roots and
   terminals: page A holds exactly the root–terminal paths through ``w`` and
   ``v`` (vertices copied, edges copied with their slots: a copy costs
   nothing), in which ``G(w, v)`` is a block computed once; page B holds all
   other paths (a vertex after ``w`` is copied once for paths that have
   passed ``w`` and once for those that have not, so that no path through
   both survives).  Pages are then processed by the same steps (§5 step 6)
   and merged: their contributions to the same (root, terminal) pair meet as
   parallel edges and are added.
4. **Separation of root–terminal pairs** (§5 step 4).  The paper separates,
   from the current page, the pairs reached through the edges out of the
   roots (or into the terminals) that cross the most depth levels, and
   without cross-level edges a chosen set of roots or terminals.  Read in
   data-flow direction: the input → output paths whose first edge (out of an
   input) or last edge (into an output) is one of the edges crossing the most
   levels move to a page of their own (:func:`separate`; the vertices they
   pass are copied, the old page keeps every other path), and without such
   edges the paths of one output (the one reached from the fewest inputs) or
   of one input (reaching the fewest outputs).
5. **Local factorization of G(w, v)** (§5 step 5): the intermediates strictly
   between ``w`` and ``v`` are factorized as a block (cheapest direction),
   which turns the common sub-block into reference edges shared by all the
   pairs through it.
6. Steps 3–5 are *candidates*: where no block is left, each is tried in a
   dry run followed by the rest of the strategy (with one split fewer), and
   the cheapest is kept if it beats factorizing the page as it is ("a
   solution that requires as less fma's as possible"); otherwise the whole
   page is factorized as in step 2, as one block between virtual root and
   terminal.  ``page_splits`` bounds how many moves are taken along one
   branch.  The paper's conditions for when each step applies are lost with
   its formulas; trying all three and keeping what pays replaces them.

The paper counts fused multiply-adds; jacacc counts multiplications and,
separately, additions (a reference edge added into an existing edge is one
of each).

Examples
--------
>>> from jacacc import optimize
>>> from jacacc.problems.paper003 import fig4_1a, fig4_1b
>>> plan = optimize(fig4_1a(), method="blocks")
>>> plan.mults, plan.jacobian().item()  # Eq. 4.1: 5 fma
(5, 13454.0)
>>> optimize(fig4_1b(), method="blocks").mults  # Eq. 4.5: 8 fma
8
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.errors import OrderError
from jacacc.graph import CompGraph, _reachable, as_graph
from jacacc.orders.registry import OrderResult, register_method
from jacacc.schedule import Add, Op, Schedule, SplitAdd
from jacacc.structure import Block, Chain, blocks, depth_levels, r_degrees, t_degrees

__all__ = ["DIRECTIONS", "Factorization", "PageSplit", "ScheduleEmitter", "Separation", "WorkGraph",
           "blocks_method", "replace_chains", "separate", "separation_candidates"]

Node = Hashable
DIRECTIONS = ("backward", "forward", "both", "middle")


# ------------------------------------------------------------------------------------ schedule emission
class ScheduleEmitter:
    """Builds a :class:`~jacacc.schedule.Schedule` slot by slot (or, ``count_only``, just counts).

    Slots ``0 .. n_edges-1`` are the graph's edges; every product or sum
    gets a new slot.  ``label`` names the edge a new slot stands for (shown
    by ``Schedule.listing``).
    """

    def __init__(self, graph: CompGraph, *, count_only: bool = False, first_slot: int | None = None) -> None:
        self.graph = graph
        self.count_only = count_only
        self.slot_edges: list[Any] = list(graph.edges)
        self.ops: list[Op | Add | SplitAdd] = []
        self.n_slots = len(self.slot_edges) if first_slot is None else first_slot
        self.mults = 0
        self.adds = 0

    def _new(self, label: Any) -> int:
        if not self.count_only:
            self.slot_edges.append(label)
        self.n_slots += 1
        return self.n_slots - 1

    def product(self, left: int, right: int, label: Any) -> int:
        """A new slot ``left * right`` (``left`` the later factor)."""
        target = self._new(label)
        self.mults += 1
        if not self.count_only:
            self.ops.append(Op(target, left, right, accumulate=False))
        return target

    def accumulate(self, target: int, left: int, right: int) -> None:
        """``slot[target] += left * right``."""
        self.mults += 1
        self.adds += 1
        if not self.count_only:
            self.ops.append(Op(target, left, right, accumulate=True))

    def add(self, target: int, source: int) -> None:
        """``slot[target] += slot[source]``."""
        self.adds += 1
        if not self.count_only:
            self.ops.append(Add(target, source))

    def sum(self, first: int, second: int, label: Any) -> int:
        """A new slot ``first + second``."""
        target = self._new(label)
        self.adds += 1
        if not self.count_only:
            self.ops.append(SplitAdd(target, first, second))
        return target

    def schedule(self, result: dict[tuple[Node, Node], int], order: Sequence[Any]) -> Schedule:
        g = self.graph
        return Schedule(g.inputs, g.outputs, g.edges, self.slot_edges, self.ops, result,
                        mode="structure", order=order)


# ------------------------------------------------------------------------------------ work graph
@dataclass(frozen=True)
class PageVertex:
    """A copy of ``vertex`` made when a page was split (§5); ``page`` numbers the copy."""

    vertex: Node
    page: int

    def __str__(self) -> str:
        return f"{self.vertex}@{self.page}"


class WorkGraph:
    """A DAG whose edges hold schedule slots, eliminated in place.

    ``succs[u][v]`` / ``preds[v][u]`` is the slot holding edge ``u → v``.
    Page copies share the slots of the edges they copy (a copy is free), so
    an addition into a shared slot writes a fresh slot instead (``refs``
    counts the edges using each slot).  ``origin`` maps a copy to the graph
    vertex it copies; ``rank`` orders vertices topologically.

    Examples
    --------
    >>> from jacacc.graph import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "v", 2.0), ("v", "y", 3.0)])
    >>> em = ScheduleEmitter(g)
    >>> w = WorkGraph(g, em)
    >>> w.eliminate("v")
    >>> w.succs["x"], em.mults
    ({'y': 2}, 1)
    """

    def __init__(self, graph: CompGraph, emitter: ScheduleEmitter) -> None:
        self.graph = graph
        self.inputs = tuple(graph.inputs)
        self.outputs = tuple(graph.outputs)
        self.fixed = set(self.inputs) | set(self.outputs)
        self.em = emitter
        self.succs: dict[Node, dict[Node, int]] = {v: {} for v in graph.topological_order}
        self.preds: dict[Node, dict[Node, int]] = {v: {} for v in graph.topological_order}
        self.rank: dict[Node, tuple[int, int]] = {v: (i, 0) for i, v in enumerate(graph.topological_order)}
        self.origin: dict[Node, Node] = {v: v for v in graph.topological_order}
        self.refs: Counter[int] = Counter()
        self.serial = itertools.count(1)
        self.steps: list[Any] = []
        for slot, (u, v) in enumerate(graph.edges):
            self._set(u, v, slot)

    def copy(self, emitter: ScheduleEmitter) -> WorkGraph:
        """An independent copy that reports to ``emitter`` (a dry run)."""
        new = object.__new__(WorkGraph)
        new.__dict__.update(self.__dict__)
        new.em = emitter
        new.succs = {v: dict(out) for v, out in self.succs.items()}
        new.preds = {v: dict(inc) for v, inc in self.preds.items()}
        new.rank, new.origin, new.refs = dict(self.rank), dict(self.origin), Counter(self.refs)
        new.serial = itertools.count(next(self.serial))
        new.steps = []
        return new

    def dry_run(self) -> WorkGraph:
        """A copy that only counts operations."""
        return self.copy(ScheduleEmitter(self.graph, count_only=True, first_slot=self.em.n_slots))

    # -------------------------------------------------------------- queries
    @property
    def intermediates(self) -> list[Node]:
        return [v for v in self.succs if v not in self.fixed]

    def is_chain_vertex(self, v: Node) -> bool:
        """In- and out-degree 1: the interior of a direct simple chain."""
        return v in self.succs and v not in self.fixed and len(self.preds[v]) == 1 and len(self.succs[v]) == 1

    def markowitz(self, v: Node) -> int:
        return len(self.preds[v]) * len(self.succs[v])

    def name(self, v: Node) -> Node:
        return self.origin[v]

    # -------------------------------------------------------------- edits
    def _set(self, u: Node, v: Node, slot: int) -> None:
        self.succs[u][v] = slot
        self.preds[v][u] = slot
        self.refs[slot] += 1

    def _drop(self, u: Node, v: Node) -> None:
        slot = self.succs[u].pop(v)
        del self.preds[v][u]
        self.refs[slot] -= 1

    def _combine(self, i: Node, j: Node, k: Node) -> None:
        """Edge (i, k) (+)= (j, k) · (i, j)."""
        left, right = self.succs[j][k], self.succs[i][j]
        label = (self.origin[i], self.origin[k])
        old = self.succs[i].get(k)
        if old is None:
            self._set(i, k, self.em.product(left, right, label))
        elif self.refs[old] == 1:
            self.em.accumulate(old, left, right)
        else:  # the slot is shared with a page copy: write the sum to a fresh slot
            fresh = self.em.product(left, right, label)
            self.em.add(fresh, old)
            self._drop(i, k)
            self._set(i, k, fresh)

    def eliminate(self, j: Node) -> None:
        """Vertex elimination of intermediate ``j``: ``|P(j)|·|S(j)|`` multiplications."""
        for i in list(self.preds[j]):
            for k in list(self.succs[j]):
                self._combine(i, j, k)
        for i in list(self.preds[j]):
            self._drop(i, j)
        for k in list(self.succs[j]):
            self._drop(j, k)
        del self.succs[j], self.preds[j], self.rank[j]

    def add_vertex(self, copy_of: Node) -> Node:
        """A new page copy of ``copy_of`` (no edges yet)."""
        v = PageVertex(self.origin[copy_of], next(self.serial))
        self.succs[v], self.preds[v] = {}, {}
        self.rank[v] = (self.rank[copy_of][0], v.page)
        self.origin[v] = self.origin[copy_of]
        return v

    def result(self) -> dict[tuple[Node, Node], int]:
        """Once no intermediate is left: the slot of each Jacobian entry (output, input)."""
        if self.intermediates:  # a strategy bug, not a user error
            raise AssertionError(f"intermediates left: {self.intermediates[:5]}")
        return {(y, x): slot for x in self.inputs for y, slot in self.succs[x].items()}


# ------------------------------------------------------------------------------------ step records
@dataclass(frozen=True)
class Factorization:
    """A complex block (or a whole page) factorized (§4): direction, endpoints, vertices removed."""

    direction: str
    source: Node | None
    sink: Node | None
    vertices: int
    mults: int

    def __str__(self) -> str:
        where = f"B({self.source}, {self.sink})" if self.source is not None else "page"
        return f"{self.direction}-factorize {where} [{self.vertices} vertices, {self.mults} mults]"


@dataclass(frozen=True)
class PageSplit:
    """A page split at the common sub-block G(w, v) (§5 steps 2–3)."""

    w: Node
    v: Node
    t_degree: int
    r_degree: int

    def __str__(self) -> str:
        return f"page split G({self.w}, {self.v}) [t-degree {self.t_degree}, r-degree {self.r_degree}]"


@dataclass(frozen=True)
class Separation:
    """Root–terminal pairs separated into a page of their own (§5 step 4): the paths whose
    ``side`` ("first" from an input, "last" into an output) edge is one of ``edges``."""

    side: str
    edges: tuple[tuple[Node, Node], ...]
    reason: str

    def __str__(self) -> str:
        shown = ", ".join(f"{a}→{b}" for a, b in self.edges[:4]) + (" …" if len(self.edges) > 4 else "")
        return f"separate paths by {self.side} edge [{shown}] ({self.reason})"


# ------------------------------------------------------------------------------------ step 1: reference edges
def replace_chains(work: WorkGraph, record: bool = True) -> None:
    """Replace every simple chain and simple block by a reference edge, innermost first (§4, §5 step 1).

    Eliminates vertices of in- and out-degree 1 until none is left, one
    maximal chain at a time from its source; a chain whose reference edge
    lands on an existing edge completes a simple block.
    """
    heap = [(work.rank[v], next(_tick), v) for v in work.intermediates if work.is_chain_vertex(v)]
    heapq.heapify(heap)
    while heap:
        _, _, v = heapq.heappop(heap)
        if not work.is_chain_vertex(v):
            continue
        first = v
        while work.is_chain_vertex(_only(work.preds[first])):
            first = _only(work.preds[first])
        interior = [first]
        while work.is_chain_vertex(_only(work.succs[interior[-1]])):
            interior.append(_only(work.succs[interior[-1]]))
        s, t = _only(work.preds[first]), _only(work.succs[interior[-1]])
        merged = t in work.succs[s]
        for x in interior:
            work.eliminate(x)
        if record:
            work.steps.append(Chain(work.name(s), tuple(work.name(x) for x in interior), work.name(t)))
            if merged:
                work.steps.append(Block(work.name(s), work.name(t)))
        for x in (s, t):
            if work.is_chain_vertex(x):
                heapq.heappush(heap, (work.rank[x], next(_tick), x))


_tick = itertools.count()


def _only(d: dict[Node, Any]) -> Node:
    return next(iter(d))


# ------------------------------------------------------------------------------------ step 2: factorization
def _pick(work: WorkGraph, remaining: Iterable[Node], direction: str) -> Node:
    remaining = list(remaining)
    if direction == "backward":
        cands = [v for v in remaining if len(work.succs[v]) > 1] or remaining
        return min(cands, key=work.rank.__getitem__)
    if direction == "forward":
        cands = [v for v in remaining if len(work.preds[v]) > 1] or remaining
        return max(cands, key=work.rank.__getitem__)
    if direction == "middle":
        return min(remaining, key=lambda v: (work.markowitz(v), _neg(work.rank[v])))
    back, front = _pick(work, remaining, "backward"), _pick(work, remaining, "forward")
    return front if work.markowitz(front) < work.markowitz(back) else back


def _factorize(work: WorkGraph, interior: Iterable[Node], direction: str) -> None:
    remaining = set(interior)
    while True:
        replace_chains(work)
        remaining = {v for v in remaining if v in work.succs}
        if not remaining:
            return
        work.eliminate(_pick(work, remaining, direction))


def _factorize_best(work: WorkGraph, interior: Sequence[Node], directions: Sequence[str],
                    ends: tuple[Node, Node] | None) -> None:
    """Factorize ``interior`` (between the vertices ``ends``, or a whole page) by the
    cheapest of ``directions`` (dry runs), then for real."""
    costs = {}
    for direction in directions:
        trial = work.dry_run()
        _factorize(trial, interior, direction)
        costs[direction] = trial.em.mults
    best = min(directions, key=costs.__getitem__)
    before = work.em.mults
    steps = len(work.steps)
    _factorize(work, interior, best)
    src, snk = (None, None) if ends is None else (work.name(ends[0]), work.name(ends[1]))
    work.steps.insert(steps, Factorization(best, src, snk, len(interior), work.em.mults - before))


# ------------------------------------------------------------------------------------ step 3: pages
def _ancestors(work: WorkGraph, v: Node) -> set[Node]:
    seen, stack = set(), [v]
    while stack:
        for p in work.preds[stack.pop()]:
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def _descendants(work: WorkGraph, v: Node) -> set[Node]:
    seen, stack = set(), [v]
    while stack:
        for s in work.succs[stack.pop()]:
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return seen


def choose_pair(work: WorkGraph) -> tuple[Node, Node, int, int] | None:
    """§5 step 2: ``v`` of largest r-degree nearest the roots, ``w`` among the intermediates it
    depends on of largest t-degree nearest the terminals; None when no such pair has a
    degree above 1 (§5 step 3)."""
    rdeg, tdeg = r_degrees(work), t_degrees(work)
    from_out, from_in = depth_levels(work, side="outputs"), depth_levels(work, side="inputs")
    for v in sorted(work.intermediates, key=lambda n: (-rdeg[n], -from_out[n], work.rank[n])):
        below = [n for n in _ancestors(work, v) if n not in work.fixed]
        if not below:
            continue
        w = min(below, key=lambda n: (-tdeg[n], from_in[n], work.rank[n]))
        if rdeg[v] > 1 or tdeg[w] > 1:
            return w, v, tdeg[w], rdeg[v]
    return None


def split_pages(work: WorkGraph, w: Node, v: Node) -> None:
    """Split the work graph into page A (paths through ``w`` and ``v``) and page B (the rest)."""
    fixed = work.fixed
    before_w = {n for n in _ancestors(work, w) if n not in fixed} | {w}
    between = set(_between(work, w, v))
    after_v = {n for n in _descendants(work, v) if n not in fixed} | {v}
    old_edges = [(a, b, s) for a, out in work.succs.items() for b, s in out.items()]
    old_mids = work.intermediates
    # page A: one copy of each vertex; paths x ⇝ w ⇝ v ⇝ y only
    a_copy = {n: work.add_vertex(n) for n in before_w | between | after_v}
    new_edges = []
    for a, b, s in old_edges:
        ok = ((a in before_w or a in fixed) and b in before_w) or \
             ((a == w or a in between) and (b in between or b == v)) or \
             (a in after_v and (b in after_v or b in fixed))
        if ok:
            new_edges.append((a_copy.get(a, a), a_copy.get(b, b), s))
    # page B: copies (n, passed w); a path that has passed w may not enter v
    b_copy: dict[tuple[Node, bool], Node] = {}
    b_edges = []
    for a, b, s in old_edges:
        for passed in (False, True):
            if a in fixed and passed:
                continue
            if b == v and (passed or a == w):
                continue
            after = passed or b == w
            if b in fixed:
                b_edges.append(((a, passed), b, s))
            else:
                b_edges.append(((a, passed), (b, after), s))
    # prune page B to states on an input → output path
    nodes_b = {e[0] for e in b_edges} | {e[1] for e in b_edges}
    succ_b: dict[Any, list] = {n: [] for n in nodes_b}
    pred_b: dict[Any, list] = {n: [] for n in nodes_b}
    for a, b, _ in b_edges:
        succ_b[a].append(b)
        pred_b[b].append(a)
    start = [(x, False) for x in work.inputs if (x, False) in nodes_b]
    live = _reachable(succ_b, start) & _reachable(pred_b, [y for y in work.outputs if y in nodes_b])
    for a, b, s in b_edges:
        if a in live and b in live:
            new_edges.append((_b_vertex(work, a, b_copy), _b_vertex(work, b, b_copy), s))
    for n in old_mids:
        for a in list(work.preds[n]):
            work._drop(a, n)
        for b in list(work.succs[n]):
            work._drop(n, b)
        del work.succs[n], work.preds[n]
    for x in work.inputs:
        for y in list(work.succs[x]):
            work._drop(x, y)
    for a, b, s in new_edges:
        work._set(a, b, s)


def _b_vertex(work: WorkGraph, state: Any, table: dict) -> Node:
    if not isinstance(state, tuple) or state in work.fixed:
        return state
    node, passed = state
    if node in work.fixed:
        return node
    if state not in table:
        table[state] = work.add_vertex(node)
    return table[state]


# ------------------------------------------------------------------------------------ step 4: separation
def separate(work: WorkGraph, edges: Iterable[tuple[Node, Node]], side: str) -> None:
    """Move every input → output path whose first (``side="first"``) or last (``"last"``)
    edge is one of ``edges`` to a page of its own (§5 step 4).

    The new page copies the vertices those paths pass (a copy costs nothing:
    copied edges share their slots); the current page keeps every other path,
    and its vertices left on no input → output path are dropped.
    """
    chosen = set(edges)
    fixed = work.fixed
    heads = {b if side == "first" else a for a, b in chosen} - fixed
    spread = _descendants if side == "first" else _ancestors
    page = heads | {n for h in heads for n in spread(work, h) if n not in fixed}
    copy = {n: work.add_vertex(n) for n in page}
    moved = []
    for a, out in work.succs.items():
        for b, slot in out.items():
            inside = (a in page) if side == "first" else (b in page)
            if inside or (a, b) in chosen:
                moved.append((copy.get(a, a), copy.get(b, b), slot))
    for a, b in chosen:
        work._drop(a, b)
    for a, b, slot in moved:
        work._set(a, b, slot)
    _drop_dead(work)


def _drop_dead(work: WorkGraph) -> None:
    """Remove the intermediates that lie on no input → output path (with their edges)."""
    live = _reachable(work.succs, work.inputs) & _reachable(work.preds, work.outputs)
    for n in [n for n in work.intermediates if n not in live]:
        for a in list(work.preds[n]):
            work._drop(a, n)
        for b in list(work.succs[n]):
            work._drop(n, b)
        del work.succs[n], work.preds[n], work.rank[n]


def separation_candidates(work: WorkGraph) -> list[tuple[str, tuple[tuple[Node, Node], ...], str]]:
    """§5 step 4: the root–terminal separations to try, as ``(side, edges, reason)``.

    The edges into outputs that cross the most depth levels (when some cross
    more than one), likewise the edges out of inputs; without cross-level
    edges, the paths of one output (the one reached from the fewest inputs)
    and those of one input (reaching the fewest outputs).  A separation that
    would move every edge of its side is no separation and is not offered.
    """
    levels = depth_levels(work, side="inputs")
    found = []
    into = [(a, y) for y in work.outputs for a in work.preds[y]]
    out_of = [(x, b) for x in work.inputs for b in work.succs[x]]
    for side, edges in (("last", into), ("first", out_of)):
        span = {e: levels[e[1]] - levels[e[0]] for e in edges}
        widest = max(span.values(), default=0)
        if widest > 1:
            chosen = tuple(e for e in edges if span[e] == widest)
            if len(chosen) < len(edges):
                found.append((side, chosen, f"edges crossing {widest} levels"))
    if found:
        return found
    rdeg, tdeg = r_degrees(work), t_degrees(work)
    groups = (("last", work.outputs, lambda y: (tdeg[y], work.rank[y]), work.preds, "output"),
              ("first", work.inputs, lambda x: (rdeg[x], work.rank[x]), work.succs, "input"))
    for side, ends, key, adj, what in groups:
        ends = [e for e in ends if adj[e]]
        if len(ends) > 1:
            end = min(ends, key=key)
            edges = tuple((a, end) for a in adj[end]) if side == "last" else tuple((end, b) for b in adj[end])
            found.append((side, edges, f"the paths of {what} {work.name(end)}"))
    return found


# ------------------------------------------------------------------------------------ the strategy
def _between(work: WorkGraph, w: Node, v: Node) -> list[Node]:
    """The intermediates of G(w, v), strictly between ``w`` and ``v``."""
    inner = (_descendants(work, w) & _ancestors(work, v)) - work.fixed
    return sorted(inner, key=work.rank.__getitem__)


def _candidates(work: WorkGraph, directions: Sequence[str]) -> list[tuple[Any, Any]]:
    """The §5 moves that may pay where no block is left: ``(step record, action)``."""
    moves: list[tuple[Any, Any]] = []
    pair = choose_pair(work)
    if pair is not None:
        w, v, tdeg, rdeg = pair
        moves.append((PageSplit(work.name(w), work.name(v), tdeg, rdeg),
                      lambda wk, w=w, v=v: split_pages(wk, w, v)))
        inner = _between(work, w, v)
        if inner:  # step 5: factorize G(w, v) locally, its chains and blocks replaced on the way
            moves.append((None, lambda wk, inner=inner, w=w, v=v: _factorize_best(wk, inner, directions, (w, v))))
    for side, edges, reason in separation_candidates(work):
        names = tuple((work.name(a), work.name(b)) for a, b in edges)
        moves.append((Separation(side, names, reason), lambda wk, side=side, edges=edges: separate(wk, edges, side)))
    return moves


def _process(work: WorkGraph, directions: Sequence[str], page_splits: int) -> None:
    replace_chains(work)
    while work.intermediates:
        found = blocks(work, classify=False)
        if found:
            block = found[0]
            _factorize_best(work, block.interior, directions, (block.source, block.sink))
            continue
        moves = _candidates(work, directions) if page_splits > 0 else []
        if moves:
            # §5 steps 3-5: a page split at G(w, v), a local factorization of G(w, v), or a
            # separation of root-terminal pairs; each is kept only when a dry run of the
            # rest of the strategy after it beats factorizing the page as it is
            plain = work.dry_run()
            _factorize_best(plain, plain.intermediates, directions, None)
            best, best_cost = None, plain.em.mults
            for record, action in moves:
                trial = work.dry_run()
                action(trial)
                _process(trial, directions, page_splits - 1)
                if trial.em.mults < best_cost:
                    best, best_cost = (record, action), trial.em.mults
            if best is not None:
                record, action = best
                if record is not None:
                    work.steps.append(record)
                action(work)
                page_splits -= 1
                replace_chains(work)
                continue
        _factorize_best(work, work.intermediates, directions, None)


def blocks_method(
    graph: Any,
    *,
    seed: int | None = None,
    directions: Sequence[str] = DIRECTIONS,
    page_splits: int = 2,
) -> OrderResult:
    """Paper 003's structure strategy: reference edges, factorization, pages (§4, §5).

    Registered as method ``"blocks"`` of mode ``"structure"``:
    ``jacacc.optimize(graph, method="blocks")``.  See the module docstring
    for the steps and how the paper is read.

    Parameters
    ----------
    graph : CompGraph or anything :func:`jacacc.graph.as_graph` reads
    seed : ignored (the strategy is deterministic)
    directions : sequence of {"backward", "forward", "both", "middle"}
        The factorization variants tried on every complex block; the
        cheapest is kept.
    page_splits : int, default 2
        How many §5 moves (page split, local factorization, separation) may
        be taken along one branch (each one only when a dry run shows it pays).

    Returns
    -------
    OrderResult
        ``schedule`` the Schedule; ``order`` the steps (chains and blocks
        replaced, factorizations, page splits) in the order performed.

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig4_4a
    >>> from jacacc.verify import check_schedule
    >>> result = blocks_method(fig4_4a())
    >>> result.schedule.mults, check_schedule(result.schedule, fig4_4a())
    (6, 0.0)
    """
    g = as_graph(graph)
    directions = tuple(directions) if not isinstance(directions, str) else (directions,)
    bad = [d for d in directions if d not in DIRECTIONS]
    if not directions or bad:
        raise OrderError(f"directions must be a non-empty subset of {DIRECTIONS}, got {list(directions)}")
    if isinstance(page_splits, bool) or not isinstance(page_splits, int) or page_splits < 0:
        raise OrderError(f"page_splits must be a non-negative integer, got {page_splits!r}")
    work = WorkGraph(g, ScheduleEmitter(g))
    _process(work, directions, page_splits)
    schedule = work.em.schedule(work.result(), work.steps)
    return OrderResult(tuple(work.steps), schedule=schedule)


register_method("blocks", blocks_method, modes=["structure"])


def _neg(rank: tuple[int, int]) -> tuple[int, int]:
    return (-rank[0], -rank[1])
