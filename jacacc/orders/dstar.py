"""D*: Jacobian accumulation by factoring dominator subgraphs (Guenter 2007; paper 003 §1).

Paper 003 §1 quotes Guenter's *The D\\* symbolic differentiation algorithm*
(published as "Efficient symbolic differentiation for graphics
applications", SIGGRAPH 2007): every Jacobian entry ∂t/∂r is the sum over the
paths of its *derivative graph* — the vertices on r→t paths — of the product
of the edge partials along each path.  D* shrinks each derivative graph by
*factoring*: a subgraph between two vertices whose paths can be summed once
is replaced by one edge carrying that sum; the subgraph that occurs in the
most derivative graphs is factored first, so that the work is shared.

Directions
----------
jacacc's edges follow the data flow (``u → v``: v is computed from u, the
edge carries ∂v/∂u); Guenter, like paper 003, draws dependence arrows from a
function value (his *root*, our output t) down to the variables (his
*leaves*, our input r).  His *dominator* (on the root side) is therefore, in
our direction, a vertex that **postdominates** toward the output t, and his
*postdominator* one that **dominates** from the input r.  This module speaks
in data-flow terms throughout: in the derivative graph D(r, t),

* E *dominates* L when every r→L path passes through E
  (``networkx.immediate_dominators(D, r)``);
* L *postdominates* E when every E→t path passes through L
  (``networkx.immediate_dominators`` on the reversed D, from t).

Factor subgraphs
----------------
Guenter's definition, transcribed: E is a *factor node* when it has more
than one successor in D; L is a *factor base* of E when it has more than one
predecessor and E dominates L, or L postdominates E (his "dominator with
more than one child / postdominator with more than one parent").  The factor
subgraph [E, L] is E, L and every vertex on an E→L path; it holds at least
two E→L paths.  Every dominator of L (not only the immediate one) and every
postdominator of E is considered.  A subgraph is identified by its pair
(E, L): all E→L paths of the graph lie in every derivative graph that holds
both E and L, which is what makes one factor serve several derivative graphs.

Factoring [E, L] in D replaces the E→L paths by one edge E→L whose value is
their sum, and deletes the edges only those paths used:

* when E dominates L, every edge (u, v) of the subgraph with v = L or v
  postdominated by L (each path through it reaches t through L, and,
  because E dominates it, reached it through E);
* when L postdominates E, every edge (u, v) of the subgraph with u = E or u
  dominated by E (symmetrically).

The vertices left without edges leave D.  Every remaining vertex still lies
on an r→t path and the sum over D's paths is unchanged.  The counts of how
many derivative graphs hold each subgraph are kept in a lazy priority queue
(a heap of ``(−count, ±size, position of E, position of L)``; an entry whose
count is out of date is skipped when popped, a fresh one is pushed whenever a
count changes).

When no factor subgraph is left, D is a single r→t path.  (Proof: if D held
two paths, let d be the first vertex with two successors on the chain out of
r and m the first vertex with two predecessors on the chain back from t; d
dominates m, so [d, m] would be a factor subgraph.)  Each Jacobian entry is
then the product of that chain of original and factor edges.

Implementation choices where Guenter is silent, and deviations
--------------------------------------------------------------
* **The value of a factor edge** is computed by forward accumulation through
  the subgraph (the sum of E→v paths for each v in topological order, the
  edges out of E entering as they are) or by reverse accumulation (sums of
  v→L paths), whichever makes fewer new multiplications given what has
  already been computed (both are tried on a scratch copy of the caches);
  ties go to forward.  The subgraph is summed as it stands in D, i.e. with
  the factor edges already made.  ``inner="forward" | "reverse"`` fixes the
  direction for every subgraph instead, which often shares more in the end
  (sums into a common sink, or out of a common source, are reused by the
  subgraphs that follow).
* **Ties** between subgraphs held by equally many derivative graphs go to
  the smaller one (fewer vertices on E→L paths in the original graph:
  ``ties="inner"``, an inner subgraph summed first is cheaper than the same
  paths summed inside an enclosing one) or to the larger (``ties="outer"``).
  Remaining ties: topological positions of E, then L.
* **Variants.** By default (``inner="auto"``, ``ties="auto"``) D* runs once
  per combination of the three summing rules and the two tie rules and keeps
  the schedule with the fewest multiplications (then additions).  Guenter's
  greedy count order is the same in all of them; they differ only where he
  is silent.  On the function zoo the winner is most often
  ``inner="reverse"``, and the six runs take about a second for RoeFlux_1d.
* **Sharing.** D* executes the expression graph symbolically and so
  computes every common subexpression once.  Here the schedule is built
  directly, with four caches standing in for that: products by their
  ``(left, right)`` slots, sums by the multiset of their terms, factor values
  by the subgraph's content (E, L and its edges with their slots: the same
  content in two derivative graphs is summed once) and chain segments by the
  slots they multiply.  A product is always made as an op of its own and then
  added (one multiplication and one addition per term, exactly what a fused
  multiply-add costs), so that it can be reused.
* **Chain products.** A chain is covered by the fewest pieces already
  computed (single edges or cached segments), and the pieces are multiplied
  either from the input side (caching every prefix: shared by chains from
  the same input) or from the output side (caching suffixes: shared by
  chains into the same output).  Both directions are tried for all chains on
  a scratch copy and the cheaper is kept (ties: from the input side);
  ``chains="forward" | "reverse"`` fixes it.
* **Count updates.** Guenter updates the counts incrementally by watching
  whether a deleted edge touches a factor node or base; here the dominator
  trees and factor subgraphs of each derivative graph changed by a factoring
  are recomputed with NetworkX and the counts adjusted by the difference.
  Simpler, and exact; it costs time on large graphs.
* A graph without factor subgraphs (a tree, a chain) goes straight to the
  chain products.

Cost: each factoring recomputes two dominator trees of one derivative graph,
and there is one derivative graph per connected (input, output) pair, so the
method suits graphs of a few hundred vertices and a few dozen pairs (each
function of the zoo takes about a second or less for all six variants; the
dense ``layered_8x16x16x8``, 64 pairs, about 7 s).

References
----------
B. Guenter, "Efficient symbolic differentiation for graphics applications",
ACM Trans. Graph. 26(3), 2007 (SIGGRAPH), quoted in paper 003 §1.

Examples
--------
>>> import jacacc
>>> g = {"inputs": ["x"], "outputs": ["y"],
...      "edges": [["x", "c", 2], ["c", "s", 3], ["c", "k", 5], ["s", "y", 7], ["k", "y", 11]]}
>>> plan = jacacc.optimize(g, method="dstar")
>>> plan.mode, plan.mults, [str(step) for step in plan.order]
('structure', 3, ['[c→y]×1', 'chains×1'])
>>> plan.jacobian().tolist()
[[152.0]]
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from jacacc.errors import OrderError
from jacacc.graph import CompGraph, as_graph
from jacacc.orders.registry import OrderResult, register_method
from jacacc.schedule import Add, Op, Schedule, SplitAdd

__all__ = ["ChainProducts", "Factoring", "dstar", "factor_subgraphs"]

Node = Hashable
Key = tuple[Node, Node]

_DIRECTIONS = ("best", "forward", "reverse")
_TIES = ("inner", "outer")


@dataclass(frozen=True)
class Factoring:
    """One D* step: the factor subgraph [source, sink] summed into one edge.

    ``n_graphs`` is the number of derivative graphs that held the subgraph
    when it was factored (the priority it was chosen by); ``mults`` and
    ``adds`` are the operations the step added to the schedule (0 when the
    sums were already there).
    """

    source: Node
    sink: Node
    n_graphs: int
    mults: int = 0
    adds: int = 0

    def __str__(self) -> str:
        return f"[{self.source}→{self.sink}]×{self.n_graphs}"


@dataclass(frozen=True)
class ChainProducts:
    """The last D* step: each derivative graph, now a single path, multiplied out.

    ``direction`` is the side the chain products started from, ``mults`` the
    multiplications they took; ``inner`` and ``ties`` record the variant of
    the run (how factor subgraphs were summed, which of equally counted
    subgraphs went first).
    """

    n_chains: int
    direction: str
    mults: int = 0
    inner: str = "best"
    ties: str = "inner"

    def __str__(self) -> str:
        return f"chains×{self.n_chains}"


# ---------------------------------------------------------------------------- op emission
class _Emitter:
    """Slot bookkeeping and common-subexpression caches for the schedule being built.

    ``fork()`` gives a scratch emitter that reads its parent's caches and
    counts what it would add, without touching the parent: strategies are
    compared by running them on a fork.
    """

    def __init__(self, edges: Sequence[Any] = (), parent: _Emitter | None = None) -> None:
        self.parent = parent
        self.products: dict[tuple[int, int], int] = {}
        self.sums: dict[tuple[int, ...], int] = {}
        self.segments: dict[tuple[int, ...], int] = {}
        self.ops: list[Op | Add | SplitAdd] = []
        self.slot_edges: list[Any] = list(edges) if parent is None else []
        self.n_slots = len(edges) if parent is None else parent.n_slots
        self.mults = 0
        self.adds = 0

    def fork(self) -> _Emitter:
        return _Emitter(parent=self)

    def _lookup(self, table: str, key: tuple) -> int | None:
        emitter: _Emitter | None = self
        while emitter is not None:
            hit = getattr(emitter, table).get(key)
            if hit is not None:
                return hit
            emitter = emitter.parent
        return None

    def segment(self, key: tuple[int, ...]) -> int | None:
        return self._lookup("segments", key)

    def _new_slot(self, label: Any) -> int:
        slot = self.n_slots
        self.n_slots += 1
        if self.parent is None:
            self.slot_edges.append(label)
        return slot

    def product(self, left: int, right: int, label: Any) -> int:
        """The slot of ``left * right`` (``left`` the later factor), made once."""
        hit = self._lookup("products", (left, right))
        if hit is not None:
            return hit
        slot = self._new_slot(label)
        self.ops.append(Op(slot, left, right, accumulate=False))
        self.mults += 1
        self.products[(left, right)] = slot
        return slot

    def total(self, terms: Sequence[int], label: Any) -> int:
        """The slot of the sum of ``terms`` (slots), made once."""
        if len(terms) == 1:
            return terms[0]
        key = tuple(sorted(terms))
        hit = self._lookup("sums", key)
        if hit is not None:
            return hit
        slot = self._new_slot(label)
        self.ops.append(SplitAdd(slot, key[0], key[1]))
        self.ops.extend(Add(slot, s) for s in key[2:])
        self.adds += len(key) - 1
        self.sums[key] = slot
        return slot


# ---------------------------------------------------------------------------- derivative graphs
class _DerivativeGraph:
    """The derivative graph D(root, terminal): dict-of-dicts adjacency whose
    values are slots, its dominator trees and its current factor subgraphs."""

    def __init__(self, root: Node, terminal: Node, succ: dict[Node, dict[Node, int]],
                 pos: dict[Node, int]) -> None:
        self.root = root
        self.terminal = terminal
        self.pos = pos
        self.succ = succ
        self.pred: dict[Node, dict[Node, int]] = {v: {} for v in succ}
        for u, targets in succ.items():
            for v, slot in targets.items():
                self.pred[v][u] = slot
        self.idom: dict[Node, Node] = {}
        self.ipdom: dict[Node, Node] = {}
        self.factors: dict[Key, str] = {}
        self.refresh()

    def refresh(self) -> None:
        """Recompute the dominator trees and the factor subgraphs."""
        g = nx.DiGraph()
        g.add_nodes_from(self.succ)
        g.add_edges_from((u, v) for u, targets in self.succ.items() for v in targets)
        self.idom = dict(nx.immediate_dominators(g, self.root))
        self.ipdom = dict(nx.immediate_dominators(g.reverse(copy=False), self.terminal))
        self.idom.pop(self.root, None)  # NetworkX < 3.5 maps the start to itself
        self.ipdom.pop(self.terminal, None)
        found: dict[Key, str] = {}
        for late, preds in self.pred.items():
            if len(preds) < 2:
                continue
            early = self.idom.get(late)
            while early is not None:
                if len(self.succ[early]) >= 2:
                    found[(early, late)] = "dominator"
                early = self.idom.get(early)
        for early, succs in self.succ.items():
            if len(succs) < 2:
                continue
            late = self.ipdom.get(early)
            while late is not None:
                if len(self.pred[late]) >= 2:
                    found.setdefault((early, late), "postdominator")
                late = self.ipdom.get(late)
        self.factors = found

    def _dominated(self, node: Node, by: Node) -> bool:
        limit = self.pos[by]
        while node is not None and self.pos[node] >= limit:
            if node == by:
                return True
            node = self.idom.get(node)
        return False

    def _postdominated(self, node: Node, by: Node) -> bool:
        limit = self.pos[by]
        while node is not None and self.pos[node] <= limit:
            if node == by:
                return True
            node = self.ipdom.get(node)
        return False

    def subgraph(self, source: Node, sink: Node) -> tuple[list[Node], list[tuple[Node, Node, int]]]:
        """The vertices on source→sink paths (topologically sorted) and the edges among them."""
        inside = _between(self.succ, self.pred, self.pos, source, sink)
        nodes = sorted(inside, key=self.pos.__getitem__)
        edges = [(u, v, slot) for u in nodes for v, slot in self.succ[u].items() if v in inside]
        return nodes, edges

    def replace(self, key: Key, edges: Sequence[tuple[Node, Node, int]], value: int) -> None:
        """Factor ``key``: delete the edges only its paths use, add the factor edge."""
        source, sink = key
        if self.factors[key] == "dominator":
            doomed = [(u, v) for u, v, _ in edges if self._postdominated(v, sink)]
        else:
            doomed = [(u, v) for u, v, _ in edges if self._dominated(u, source)]
        touched = set()
        for u, v in doomed:
            del self.succ[u][v]
            del self.pred[v][u]
            touched.update((u, v))
        for node in touched - {source, sink}:
            if not self.succ[node] and not self.pred[node]:
                del self.succ[node], self.pred[node]
            elif not self.succ[node] or not self.pred[node]:  # would break every-vertex-on-a-path
                raise AssertionError(f"D* left vertex {node!r} dangling while factoring {key!r}")
        self.succ[source][sink] = value
        self.pred[sink][source] = value
        self.refresh()

    def chain(self) -> list[tuple[int, Node, Node]]:
        """The single root→terminal path left when no factor subgraph remains."""
        links, node = [], self.root
        while node != self.terminal:
            (nxt, slot), *rest = self.succ[node].items()
            if rest:
                raise AssertionError(f"D* derivative graph {self.root!r}→{self.terminal!r} is not a chain")
            links.append((slot, node, nxt))
            node = nxt
        if len(links) + 1 != len(self.succ):
            raise AssertionError(f"D* derivative graph {self.root!r}→{self.terminal!r} is not a chain")
        return links


def _between(succ: Any, pred: Any, pos: dict[Node, int], source: Node, sink: Node) -> set[Node]:
    """The vertices on source→sink paths: reachable from ``source`` (no further than
    ``sink`` in topological position) and reaching ``sink``."""
    limit = pos[sink]
    ahead, stack = {source}, [source]
    while stack:
        for v in succ[stack.pop()]:
            if v not in ahead and pos[v] <= limit:
                ahead.add(v)
                stack.append(v)
    inside, stack = {sink}, [sink]
    while stack:
        for u in pred[stack.pop()]:
            if u in ahead and u not in inside:
                inside.add(u)
                stack.append(u)
    return inside


def _derivative_graphs(graph: CompGraph, pos: dict[Node, int]) -> list[_DerivativeGraph]:
    """One derivative graph per (input, output) pair joined by a path, outputs-major order."""
    domain, reach = graph.index_domain(), graph.index_range()
    slot_of = {edge: i for i, edge in enumerate(graph.edges)}
    succ_all = {v: graph.successors(v) for v in graph.topological_order}
    found = []
    for t in graph.outputs:
        for r in graph.inputs:
            if r not in domain[t]:
                continue
            nodes = [v for v in graph.topological_order if r in domain[v] and t in reach[v]]
            members = set(nodes)
            succ = {u: {v: slot_of[(u, v)] for v in succ_all[u] if v in members} for u in nodes}
            found.append(_DerivativeGraph(r, t, succ, pos))
    return found


# ---------------------------------------------------------------------------- the algorithm
def _accumulate(emitter: _Emitter, nodes: list[Node], edges: Sequence[tuple[Node, Node, int]],
                direction: str) -> int:
    """The sum over the source→sink paths of a factor subgraph (``nodes`` topologically
    sorted, source first, sink last), accumulated forward or in reverse."""
    source, sink = nodes[0], nodes[-1]
    value: dict[Node, int | None]
    if direction == "forward":
        into: dict[Node, list[tuple[Node, int]]] = {v: [] for v in nodes}
        for u, v, slot in edges:
            into[v].append((u, slot))
        value = {source: None}  # the empty product: edges out of the source enter as they are
        for v in nodes[1:]:
            terms = [slot if value[u] is None else emitter.product(slot, value[u], (source, v))
                     for u, slot in into[v]]
            value[v] = emitter.total(terms, (source, v))
        result = value[sink]
    else:
        out: dict[Node, list[tuple[Node, int]]] = {v: [] for v in nodes}
        for u, v, slot in edges:
            out[u].append((v, slot))
        value = {sink: None}
        for v in reversed(nodes[:-1]):
            terms = [slot if value[w] is None else emitter.product(value[w], slot, (v, sink))
                     for w, slot in out[v]]
            value[v] = emitter.total(terms, (v, sink))
        result = value[source]
    assert result is not None  # a factor subgraph holds two paths at least
    return result


def _multiply_chain(emitter: _Emitter, links: Sequence[tuple[int, Node, Node]], direction: str) -> int:
    """The product of a chain of slots (input side first), reusing cached segments."""
    slots = tuple(slot for slot, _, _ in links)
    k = len(slots)
    if k == 1:
        return slots[0]
    # the fewest pieces (single edges or cached segments) covering the chain
    best = [0] + [k + 1] * k
    cut = [0] * (k + 1)
    for end in range(1, k + 1):
        for start in range(end - 1, -1, -1):
            if best[start] + 1 < best[end] and (end - start == 1 or emitter.segment(slots[start:end]) is not None):
                best[end], cut[end] = best[start] + 1, start
    pieces, end = [], k
    while end:
        pieces.append((cut[end], end))
        end = cut[end]
    pieces.reverse()

    def piece(start: int, end: int) -> int:
        return slots[start] if end - start == 1 else emitter.segment(slots[start:end])  # type: ignore[return-value]

    if direction == "forward":
        acc = piece(*pieces[0])
        for start, end in pieces[1:]:
            acc = emitter.product(piece(start, end), acc, (links[0][1], links[end - 1][2]))
            emitter.segments[slots[:end]] = acc
    else:
        acc = piece(*pieces[-1])
        for start, end in reversed(pieces[:-1]):
            acc = emitter.product(acc, piece(start, end), (links[start][1], links[-1][2]))
            emitter.segments[slots[start:]] = acc
    return acc


def _cheapest(emitter: _Emitter, choice: str, run: Callable[[_Emitter, str], Any]) -> str:
    """``choice``, or for ``"best"`` the direction whose trial run on a fork adds the
    fewest multiplications (then additions); ties go to ``"forward"``."""
    if choice != "best":
        return choice
    costs = {}
    for direction in ("forward", "reverse"):
        trial = emitter.fork()
        run(trial, direction)
        costs[direction] = (trial.mults, trial.adds)
    return min(("forward", "reverse"), key=costs.__getitem__)


class _DStar:
    """One run of D* on a graph: derivative graphs, counts, priority queue, emitter."""

    def __init__(self, graph: CompGraph, inner: str, ties: str, chains: str) -> None:
        self.graph = graph
        self.inner = inner
        self.sign = 1 if ties == "inner" else -1  # smaller or larger subgraphs first among equal counts
        self.ties = ties
        self.chains = chains
        self.pos = {v: i for i, v in enumerate(graph.topological_order)}
        self.succ_all = {v: graph.successors(v) for v in graph.topological_order}
        self.pred_all = {v: graph.predecessors(v) for v in graph.topological_order}
        self.emitter = _Emitter(graph.edges)
        self.graphs = _derivative_graphs(graph, self.pos)
        self.holders: dict[Key, set[int]] = {}
        self.sizes: dict[Key, int] = {}
        self.values: dict[tuple, int] = {}  # factor values by subgraph content
        self.heap: list[tuple[int, int, int, int, Key]] = []
        for index, d in enumerate(self.graphs):
            for key in d.factors:
                self.holders.setdefault(key, set()).add(index)
        for key in self.holders:
            self._push(key)

    def _size(self, key: Key) -> int:
        """Vertices on source→sink paths in the original graph (the tie-break)."""
        if key not in self.sizes:
            source, sink = key
            self.sizes[key] = len(_between(self.succ_all, self.pred_all, self.pos, source, sink))
        return self.sizes[key]

    def _push(self, key: Key) -> None:
        count = len(self.holders[key])
        if count:
            heapq.heappush(self.heap, (-count, self.sign * self._size(key), self.pos[key[0]], self.pos[key[1]], key))

    def _factor_in(self, index: int, key: Key) -> None:
        d = self.graphs[index]
        nodes, edges = d.subgraph(*key)
        content = (key, frozenset(edges))
        value = self.values.get(content)
        if value is None:
            direction = _cheapest(self.emitter, self.inner, lambda em, how: _accumulate(em, nodes, edges, how))
            value = self.values[content] = _accumulate(self.emitter, nodes, edges, direction)
        before = d.factors
        d.replace(key, edges, value)
        changed = []
        for gone in before.keys() - d.factors.keys():
            self.holders[gone].discard(index)
            changed.append(gone)
        for new in d.factors.keys() - before.keys():
            self.holders.setdefault(new, set()).add(index)
            changed.append(new)
        for k in changed:
            self._push(k)

    def run(self) -> OrderResult:
        emitter = self.emitter
        steps: list[Factoring | ChainProducts] = []
        while self.heap:
            negative, _, _, _, key = heapq.heappop(self.heap)
            members = self.holders.get(key)
            if not members or len(members) != -negative:
                continue  # out of date: a fresh entry was pushed when the count changed
            mults, adds = emitter.mults, emitter.adds
            for index in sorted(members):
                self._factor_in(index, key)
            steps.append(Factoring(key[0], key[1], -negative, emitter.mults - mults, emitter.adds - adds))
        chains = [d.chain() for d in self.graphs]

        def multiply_all(em: _Emitter, direction: str) -> list[int]:
            return [_multiply_chain(em, links, direction) for links in chains]

        direction = _cheapest(emitter, self.chains, multiply_all)
        mults = emitter.mults
        entries = multiply_all(emitter, direction)
        steps.append(ChainProducts(len(chains), direction, emitter.mults - mults, self.inner, self.ties))
        result = {(d.terminal, d.root): slot for d, slot in zip(self.graphs, entries, strict=True)}
        g = self.graph
        schedule = Schedule(g.inputs, g.outputs, g.edges, emitter.slot_edges, emitter.ops, result,
                            mode="structure", order=steps)
        return OrderResult(tuple(steps), schedule=schedule)


def _choices(name: str, value: Any, allowed: Sequence[str], auto: str = "auto") -> tuple[str, ...]:
    """The variants an option value asks for: ``auto`` means all of ``allowed``."""
    if isinstance(value, str) and value == auto:
        return tuple(allowed)
    if isinstance(value, str) and value in allowed:
        return (value,)
    valid = ", ".join(repr(v) for v in (auto, *allowed))
    raise OrderError(f"dstar option {name}={value!r}: expected one of {valid}")


@register_method("dstar", modes=["structure"])
def dstar(graph: Any, *, seed: int | None = None, inner: str = "auto", ties: str = "auto",
          chains: str = "best") -> OrderResult:
    """Guenter's D*: factor the subgraphs shared by most derivative graphs first.

    See the module docstring for the algorithm, the direction conventions and
    the choices made where Guenter (2007, quoted in paper 003 §1) is silent.

    Parameters
    ----------
    graph : CompGraph or anything :func:`~jacacc.graph.as_graph` accepts
        Only the structure is used.
    seed : int, optional
        Ignored (D* is deterministic); accepted like every method's.
    inner : {"auto", "best", "forward", "reverse"}
        How a factor subgraph's path sum is accumulated: ``"best"`` the
        cheaper of the two given what is already computed, or always one;
        ``"auto"`` (default) runs D* with each and keeps the cheapest schedule.
    ties : {"auto", "inner", "outer"}
        Among subgraphs held by equally many derivative graphs, the smaller
        (``"inner"``) or the larger (``"outer"``) first; ``"auto"`` (default)
        runs both and keeps the cheaper schedule.
    chains : {"best", "forward", "reverse"}
        Which side the final chain products start from (prefixes shared per
        input, or suffixes shared per output); ``"best"`` tries both.

    Returns
    -------
    OrderResult
        ``order``: the :class:`Factoring` steps in the order made, then one
        :class:`ChainProducts`; ``schedule``: the Schedule (mode
        ``"structure"``), whose ops are exactly the multiplications and
        additions performed.

    Raises
    ------
    OrderError
        For an unknown ``inner``, ``ties`` or ``chains`` choice.

    Examples
    --------
    Two inputs share a diamond that feeds two outputs: its factor subgraph
    lies in all four derivative graphs and is summed once.

    >>> from jacacc.graph import CompGraph
    >>> edges = [("x1", "a"), ("x2", "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"),
    ...          ("d", "y1"), ("d", "y2")]
    >>> g = CompGraph.from_edges(["x1", "x2"], ["y1", "y2"], [(u, v, 2.0) for u, v in edges])
    >>> result = dstar(g)
    >>> [str(step) for step in result.order], result.schedule.mults
    (['[a→d]×4', 'chains×4'], 8)
    """
    g = as_graph(graph)
    inners = _choices("inner", inner, _DIRECTIONS)
    tie_rules = _choices("ties", ties, _TIES)
    _choices("chains", chains, _DIRECTIONS[1:], auto="best")
    best: OrderResult | None = None
    for how in inners:
        for rule in tie_rules:
            result = _DStar(g, how, rule, chains).run()
            assert result.schedule is not None
            if best is None or (result.schedule.mults, result.schedule.adds) < (
                    best.schedule.mults, best.schedule.adds):  # type: ignore[union-attr]
                best = result
    assert best is not None
    return best


def factor_subgraphs(graph: Any) -> dict[Key, int]:
    """The factor subgraphs [E, L] of the original graph and in how many
    derivative graphs each occurs (the priorities D* starts from).

    Examples
    --------
    >>> g = {"inputs": ["x"], "outputs": ["y"],
    ...      "edges": [["x", "a", 1], ["x", "b", 1], ["a", "y", 1], ["b", "y", 1]]}
    >>> factor_subgraphs(g)
    {('x', 'y'): 1}
    """
    g = as_graph(graph)
    pos = {v: i for i, v in enumerate(g.topological_order)}
    counts: dict[Key, int] = {}
    for d in _derivative_graphs(g, pos):
        for key in d.factors:
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (pos[item[0][0]], pos[item[0][1]])))
