"""Bounds that follow from a graph's structure alone (no order, no search).

They sit below both :mod:`jacacc.api` and :mod:`jacacc.orders`: the search
methods cap and prove their results with them, and :func:`jacacc.optimize`
reports them on every :class:`~jacacc.api.Plan`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.graph import CompGraph, _reachable

__all__ = [
    "SafeStep",
    "Structure",
    "block_lower_bound",
    "block_partition",
    "block_partition_bound",
    "VertexTerm",
    "connectivity_lower_bound",
    "connectivity_terms",
    "disjoint_paths",
    "safe_prefix",
    "structural_lower_bound",
    "twin_classes",
]

Node = Hashable


def structural_lower_bound(graph: CompGraph, mode: str = "vertex") -> int:
    """A proven lower bound on the multiplications of any ``mode`` elimination.

    Every (input, output) pair joined by a path of length ≥ 2 needs at least
    one multiplication targeting its Jacobian entry (a fill-in creating it or
    an absorption into it), and distinct entries are distinct targets.  In
    vertex and edge mode every intermediate also needs at least one step of
    cost ≥ 1 (a pruned graph keeps every intermediate on a path), and each
    step removes at most one intermediate.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "v"), ("v", "y"), ("v", "z")])
    >>> structural_lower_bound(g)
    2
    """
    domain = graph.index_domain()
    inputs = set(graph.inputs)
    long_pairs = 0
    for out in graph.outputs:
        reach: set[Node] = set()
        for p in graph.predecessors(out):
            if p not in inputs:
                reach |= domain[p]
        long_pairs += len(reach)
    if mode in ("vertex", "edge"):
        return max(long_pairs, len(graph.intermediates))
    return long_pairs



# ============================================================================ vertex mode: connectivity bound
class Structure:
    """A vertex elimination in progress, as predecessor and successor sets (no partials).

    The small, dependency-free state the bounds and reductions below work on:
    ``preds[v]`` / ``succs[v]`` are sets, ``inputs`` and ``outputs`` tuples in
    the graph's order, ``intermediates`` lists the vertices not yet
    eliminated in topological order.  After eliminating a set E the
    state has an edge u → w exactly when the original graph has a path from u
    to w whose interior lies in E (induction over the eliminations: each adds
    an edge from every predecessor to every successor and removes the vertex).

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "a"), ("a", "b"), ("b", "y"), ("b", "z")])
    >>> s = Structure.from_graph(g)
    >>> s.eliminate("a"), sorted(s.succs["x"]), s.eliminate("b")
    (1, ['b'], 2)
    """

    def __init__(self, preds: dict[Node, set[Node]], succs: dict[Node, set[Node]], inputs: tuple[Node, ...],
                 outputs: tuple[Node, ...], intermediates: list[Node]) -> None:
        self.preds, self.succs = preds, succs
        self.inputs, self.outputs = inputs, outputs
        self.intermediates = intermediates

    @classmethod
    def from_graph(cls, graph: CompGraph) -> Structure:
        topo = graph.topological_order
        return cls({v: set(graph.predecessors(v)) for v in topo}, {v: set(graph.successors(v)) for v in topo},
                   tuple(graph.inputs), tuple(graph.outputs), list(graph.intermediates))

    def copy(self) -> Structure:
        return Structure({v: set(p) for v, p in self.preds.items()}, {v: set(s) for v, s in self.succs.items()},
                         self.inputs, self.outputs, list(self.intermediates))

    def eliminate(self, v: Node) -> int:
        """Eliminate intermediate ``v``; return its cost ``|P(v)|``·``|S(v)|``."""
        p, s = self.preds.pop(v), self.succs.pop(v)
        for u in p:
            self.succs[u].discard(v)
            self.succs[u] |= s
        for w in s:
            self.preds[w].discard(v)
            self.preds[w] |= p
        self.intermediates.remove(v)
        return len(p) * len(s)


def _as_structure(graph: CompGraph | Structure) -> Structure:
    return graph if isinstance(graph, Structure) else Structure.from_graph(graph)


def _flow(step: dict[Node, set[Node]], sources: tuple[Node, ...], vertex: Node,
          free: frozenset = frozenset()) -> tuple[int, dict[Any, dict[Any, int]], dict[Node, list[Node]], list[Node]]:
    """Maximum flow from ``sources`` to ``vertex`` in the vertex-split network of
    :func:`disjoint_paths` (``step[w]``: w's neighbours toward the sources); the
    vertices in ``free`` have unbounded capacity (a separator may not use them).
    Returns the value, the residual capacities, the arcs and the sources used."""
    region = _reachable(step, [vertex])
    toward: dict[Node, list[Node]] = {u: [] for u in region}  # arcs u → w run toward vertex
    for w in region:
        for u in step[w]:
            toward[u].append(w)
    starts = [x for x in dict.fromkeys(sources) if x in region and x != vertex]
    cap: dict[Any, dict[Any, int]] = {}
    unbounded = len(region)

    def arc(a: Any, b: Any, c: int = 1) -> None:
        cap.setdefault(a, {})[b] = c
        cap.setdefault(b, {}).setdefault(a, 0)

    source, sink = ("s",), (vertex, 0)  # (u, 0) = u⁻, (u, 1) = u⁺
    cap[source] = {}
    for x in starts:
        arc(source, (x, 0))
    for u in region:
        if u != vertex:
            arc((u, 0), (u, 1), unbounded if u in free else 1)
            for w in toward[u]:
                arc((u, 1), (w, 0), unbounded)
    value = 0
    while True:  # breadth-first augmenting paths (Edmonds–Karp)
        parent: dict[Any, Any] = {source: None}
        queue = deque([source])
        while queue and sink not in parent:
            a = queue.popleft()
            for b, c in cap[a].items():
                if c > 0 and b not in parent:
                    parent[b] = a
                    queue.append(b)
        if sink not in parent:
            return value, cap, toward, starts
        value += 1  # every augmenting path passes a unit arc s → x⁻
        b = sink
        while parent[b] is not None:
            a = parent[b]
            cap[a][b] -= 1
            cap[b][a] += 1
            b = a


def _menger(step: dict[Node, set[Node]], sources: tuple[Node, ...], vertex: Node) -> list[tuple[Node, ...]]:
    """Most source→``vertex`` paths sharing no vertex but ``vertex``, each listed from
    ``vertex`` back to its source; ``step[w]`` are w's neighbours toward the sources."""
    _, cap, toward, starts = _flow(step, sources, vertex)
    source = ("s",)
    paths = []
    for x in starts:  # decompose the flow: follow the arcs that carry flow from each used source
        if cap[source][(x, 0)]:
            continue
        path = [x]
        while path[-1] != vertex:
            u = path[-1]
            # a unit of flow on u⁺ → w⁻ shows as residual capacity on the reverse arc w⁻ → u⁺
            path.append(next(w for w in toward[u] if cap[(w, 0)][(u, 1)] > 0))
        paths.append(tuple(reversed(path)))
    return paths


def disjoint_paths(graph: CompGraph | Structure, vertex: Node, side: str = "in") -> list[tuple[Node, ...]]:
    """A largest set of input→``vertex`` (``side="in"``) or ``vertex``→output
    (``side="out"``) paths that pairwise share no vertex but ``vertex``.

    A maximum flow (augmenting paths) in the vertex-split network: a
    super-source ``s`` with an arc to ``x⁻`` for every input ``x`` (every
    output on the ``"out"`` side, edges reversed), an arc ``u⁻ → u⁺`` of
    capacity 1 for every vertex ``u ≠ vertex`` — inputs included, since an
    input is a vertex a separator may contain — an arc ``u⁺ → w⁻`` for every
    edge ``u → w``, and the sink ``vertex⁻``.  An integral flow of value k is
    exactly k input→``vertex`` paths disjoint except at ``vertex`` (each
    vertex passes at most one unit; the graph is acyclic, so the flow has no
    cycle and decomposes into paths).  By Menger's theorem (``s`` and
    ``vertex⁻`` are not adjacent: ``vertex`` is an intermediate) the maximum
    is the fewest vertices other than ``vertex`` that meet every
    input→``vertex`` path; a bound needs only the easy half: k disjoint paths
    need k distinct vertices to meet them.  A path starts at its input (it
    ends there on the ``"out"`` side) and runs along the edges.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y"], [("x0", "a"), ("x1", "a"), ("a", "v"),
    ...                                                 ("x1", "v"), ("v", "y")])
    >>> sorted(disjoint_paths(g, "v"))
    [('x0', 'a', 'v'), ('x1', 'v')]
    >>> disjoint_paths(g, "v", "out")
    [('v', 'y')]
    """
    s = _as_structure(graph)
    if side == "in":
        return [path[::-1] for path in _menger(s.preds, s.inputs, vertex)]
    if side == "out":
        return _menger(s.succs, s.outputs, vertex)
    raise ValueError(f"side is 'in' or 'out', not {side!r}")


@dataclass(frozen=True)
class VertexTerm:
    """One intermediate's share of :func:`vertex_lower_bound`, with its witnesses.

    Attributes
    ----------
    vertex : node id
        The intermediate ``v``.
    in_paths : tuple of tuples
        Input→``v`` paths (input first, ``v`` last) that share no vertex but
        ``v``: every set of vertices other than ``v`` meeting all input→``v``
        paths has at least ``len(in_paths)`` members, so ``|P(v)| ≥
        len(in_paths)`` whenever ``v`` is eliminated.
    out_paths : tuple of tuples
        ``v``→output paths (``v`` first) sharing no vertex but ``v``: ``|S(v)| ≥
        len(out_paths)``.
    """

    vertex: Node
    in_paths: tuple[tuple[Node, ...], ...]
    out_paths: tuple[tuple[Node, ...], ...]

    @property
    def kappa_in(self) -> int:
        """κ(X, v): the number of disjoint input→v paths."""
        return len(self.in_paths)

    @property
    def kappa_out(self) -> int:
        """κ(v, Y): the number of disjoint v→output paths."""
        return len(self.out_paths)

    @property
    def value(self) -> int:
        """κ(X, v)·κ(v, Y): no order eliminates ``v`` for less."""
        return self.kappa_in * self.kappa_out


def connectivity_terms(graph: CompGraph | Structure) -> list[VertexTerm]:
    """Each intermediate's :class:`VertexTerm` (disjoint-path witnesses), in topological order.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [("x0", "v"), ("x1", "v"), ("v", "y0"),
    ...                                                       ("v", "y1")])
    >>> [(t.vertex, t.kappa_in, t.kappa_out, t.value) for t in connectivity_terms(g)]
    [('v', 2, 2, 4)]
    """
    s = _as_structure(graph)
    return [VertexTerm(v, tuple(p[::-1] for p in _menger(s.preds, s.inputs, v)),
                       tuple(_menger(s.succs, s.outputs, v))) for v in s.intermediates]


def connectivity_lower_bound(graph: CompGraph | Structure) -> int:
    """Σ over intermediates v of κ(X, v)·κ(v, Y): a lower bound on any vertex elimination.

    κ(X, v) is the largest number of input→v paths that pairwise share no
    vertex but v (:func:`disjoint_paths`), κ(v, Y) the same towards the
    outputs.

    Proof.  Let v be eliminated after the set E of intermediates (v ∉ E).
    The graph then has an edge u → v exactly when the original graph has a
    path from u to v whose interior lies in E (:class:`Structure`), so P(v)
    is the set of vertices u ∉ E with such a path.  Follow any input→v path
    backwards from v to its first vertex not in E: it exists, since inputs
    are never eliminated, and it lies in P(v).  So P(v) meets every input→v
    path without containing v, and holds a distinct vertex of each of the
    κ(X, v) witness paths, which share no vertex but v: ``|P(v)|`` ≥ κ(X, v).
    An input on a path counts as one of its vertices — it may be the member
    of P(v) that meets it — which is why the flow network caps inputs too.
    Mirror-wise ``|S(v)|`` ≥ κ(v, Y), so v costs ``|P(v)|``·``|S(v)|`` ≥ κ(X, v)·κ(v, Y)
    in every order, and the sum bounds the total.  The graph conventions make
    the corner cases vacuous: inputs have no in-edges and outputs no
    out-edges (an output used later has a copy node), no vertex is both, and
    every intermediate lies on an input→output path (pruning), so both
    factors are ≥ 1 and the bound is ≥ the number of intermediates.

    Each term is v's least possible cost, not just a bound on it: the two
    factors depend on disjoint parts of E (v's ancestors, v's descendants),
    and eliminating exactly the ancestors that reach v avoiding a minimum
    separator C leaves P(v) = C.  The bound is Σ_v min over orders of v's
    cost; what it misses is that one order cannot give every vertex its best
    moment.  It neither contains nor is contained in the Jacobian-entry bound
    of :func:`structural_lower_bound`; take the larger.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [("x0", "a"), ("x1", "a"), ("a", "b"),
    ...                                                       ("b", "y0"), ("b", "y1")])
    >>> connectivity_lower_bound(g), structural_lower_bound(g)
    (4, 4)
    """
    return sum(term.value for term in connectivity_terms(graph))


# ============================================================================ vertex mode: safe reductions
@dataclass(frozen=True)
class SafeStep:
    """One elimination :func:`safe_prefix` proved can come first.

    Attributes
    ----------
    vertex : node id
    rule : {"input", "output"}
        ``"input"``: ``P(v)`` is one input and ``|S(v)| = κ(v, Y)``;
        ``"output"``: ``S(v)`` is one output and ``|P(v)| = κ(X, v)``
        (in the graph left by the steps before).
    cost : int
        ``|P(v)|·|S(v)|`` at this step.
    paths : tuple of tuples
        The witnesses of the equality: ``|S(v)|`` disjoint ``v``→output paths
        (rule ``"input"``) or ``|P(v)|`` disjoint input→``v`` paths
        (``"output"``), in the graph left by the steps before.
    """

    vertex: Node
    rule: str
    cost: int
    paths: tuple[tuple[Node, ...], ...]


def _safe_rule(s: Structure, v: Node) -> tuple[str, tuple[tuple[Node, ...], ...]] | None:
    """The rule that makes eliminating ``v`` now safe, with its witness paths; None if none does."""
    p, q = s.preds[v], s.succs[v]
    if len(p) == 1 and not s.preds[next(iter(p))]:  # an input: no predecessors
        paths = _menger(s.succs, s.outputs, v)
        if len(paths) == len(q):
            return "input", tuple(paths)
    if len(q) == 1 and not s.succs[next(iter(q))]:  # an output: no successors
        paths = [path[::-1] for path in _menger(s.preds, s.inputs, v)]
        if len(paths) == len(p):
            return "output", tuple(paths)
    return None


def safe_prefix(graph: CompGraph | Structure) -> tuple[list[SafeStep], Structure]:
    """Eliminations that some optimal vertex order begins with, and the graph they leave.

    An intermediate v is *safe* when either (rule ``"input"``) its only
    predecessor is an input x and its out-degree equals κ(v, Y) (the most
    v→output paths sharing only v; e.g. a single successor), or (rule
    ``"output"``) mirror-wise its only successor is an output and its
    in-degree equals κ(X, v).  Rounds of safe vertices (each checked again in
    the graph the earlier ones leave) are eliminated until none is left.

    Theorem: if v is safe, every order π has a rearrangement π' = (v, π
    without v) that costs no more; so some optimal order begins with v, and
    opt(G) = cost(v) + opt(G after v).  Proof for rule ``"input"`` (the other
    is the mirror image).  Let z ≠ v be eliminated after the set E in π; in
    π' it is eliminated after E ∪ {v}.  If v ∈ E nothing changed.  Else, by
    the path characterisation of :class:`Structure`, a path into z whose
    interior may use v runs u ⇝ v ⇝ z with u ∈ P_E(v) = {x} (x is an input,
    never eliminated, and v's only predecessor): so P_{E∪{v}}(z) is P_E(z)
    with v replaced by x when v ∈ P_E(z) — no larger — and S(z) changes only
    if z is an ancestor of v, i.e. never (x is v's only ancestor and is no
    intermediate).  And v itself costs 1·``|S(v)|`` = κ(v, Y) first, the least it
    can cost at any time (``|P|`` ≥ 1, ``|S|`` ≥ κ(v, Y) by
    :func:`connectivity_lower_bound`).  Each safe vertex of a round stays
    safe after the others of the round: their eliminations never touch a
    rule-``"input"`` vertex's predecessor (an input), may only replace a
    successor (rule ``"output"`` vertex u ∈ S(v): S(v) loses u, gains u's
    output) so that ``|S(v)|`` does not grow, while κ(v, Y) cannot shrink (a set
    meeting every v→output path after an elimination meets every such path
    before it); since κ ≤ ``|S|`` always, both stay equal.  Rule ``"output"`` is
    the mirror image, and two rule-``"input"`` (or two ``"output"``) vertices
    are never adjacent.  Returns the steps in order and the graph left.

    The reduction shrinks the search, not :func:`connectivity_lower_bound`:
    a step's cost is its term, and the terms of the vertices left do not
    change (after a rule-``"input"`` step a separator that used v can use x
    instead, and no other vertex has v as a descendant).

    Examples
    --------
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y"], [("x0", "a"), ("x1", "b"), ("a", "c"), ("b", "c"),
    ...                                                 ("c", "y")])
    >>> steps, left = safe_prefix(g)
    >>> [(s.vertex, s.rule, s.cost) for s in steps], left.intermediates
    ([('a', 'input', 1), ('b', 'input', 1), ('c', 'output', 2)], [])
    """
    s = _as_structure(graph).copy()
    steps: list[SafeStep] = []
    while True:
        found = [(v, rule) for v in s.intermediates if (rule := _safe_rule(s, v)) is not None]
        if not found:
            return steps, s
        for v, _ in found:
            rule = _safe_rule(s, v)  # again, in the graph the round's earlier steps left
            if rule is None:  # cannot happen (see the proof); recheck keeps every step sound anyway
                continue
            steps.append(SafeStep(v, rule[0], s.eliminate(v), rule[1]))


def twin_classes(graph: CompGraph | Structure) -> list[list[Node]]:
    """Classes (of two or more) of intermediates with the same predecessors and successors.

    Theorem (false twins; cf. Crane et al., arXiv 2506.17521): some optimal
    vertex order eliminates each class consecutively, in any order within it.
    Proof sketch for one class T of k twins.  Twins are never adjacent and
    none is an ancestor of another (a twin's successor would be its twin's
    successor), and they stay twins while uneliminated.  Fix the order of the
    other vertices w_1 … w_m and let twin t be eliminated at *slot* s_t (after
    s_t of them).  Each twin costs τ(s) = ``|P(t)|``·``|S(t)|`` there, the same for all
    twins, and does not depend on the other twins.  A vertex w_i joined to the
    twins through eliminated vertices on (say) its predecessor side has
    ``|P(w_i)|`` = a + (twins not yet eliminated) + [some twin eliminated]·d, and
    an S(w_i) the twins cannot touch, so it costs A_i + B_i·(k − j) + C_i·[j > 0]
    with j the twins eliminated before it and A_i, B_i, C_i ≥ 0 fixed by the
    others.  Summing, the order costs const + Σ_t φ(s_t) + ψ(min_t s_t) with
    φ(s) = τ(s) + Σ_{i ≤ s} B_i and ψ(s) = Σ_{i > s} C_i non-increasing.
    Moving every twin to the used slot u with the least φ(u) changes Σ_t φ
    to k·φ(u) ≤ Σ_t φ(s_t) and ψ to ψ(u) ≤ ψ(min s_t): no dearer.  Classes
    are made consecutive one after another (moving one class never splits
    another), and twins are interchangeable (swapping two is an automorphism).

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("x", "b"), ("a", "y"), ("b", "y")])
    >>> twin_classes(g)
    [['a', 'b']]
    """
    s = _as_structure(graph)
    classes: dict[tuple[frozenset, frozenset], list[Node]] = {}
    for v in s.intermediates:
        classes.setdefault((frozenset(s.preds[v]), frozenset(s.succs[v])), []).append(v)
    return [c for c in classes.values() if len(c) > 1]


# ============================================================================ vertex mode: block bounds
def block_lower_bound(graph: CompGraph | Structure, block: Sequence[Node]) -> int:
    """A lower bound on the total cost of the intermediates in ``block``, in any vertex order.

    For an order in which ``block``'s members go in the order w₁, w₂, …: when
    w_k is eliminated, the earlier members S = {w₁ … w_{k−1}} are eliminated
    and the later ones are not.  So P(w_k) contains no member of S, and it
    meets every path into w_k from an input *or from a later member* (walk
    such a path back from w_k to its first vertex not eliminated).  Hence
    ``|P(w_k)|`` is at least the maximum flow from the inputs and the later
    ancestors in ``block`` to w_k in the vertex-split network of
    :func:`disjoint_paths` where the members of S have unbounded capacity:
    P(w_k) is a cut of that network of capacity ``|P(w_k)|`` (weak duality).
    Mirror-wise for ``|S(w_k)|``, and w_k costs at least the product.  The bound
    is the least, over the orders of ``block``, of the sum of these products:
    a dynamic program over the subsets of ``block`` (2^``|block|`` states; each
    product depends only on the members comparable to w_k, and is cached).
    With ``block`` all intermediates it is the optimum itself; with single
    members it is their κ(X, v)·κ(v, Y).  Disjoint blocks bound disjoint sets
    of costs, so their bounds add (:func:`block_partition_bound`).

    Examples
    --------
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [("x0", "a"), ("x1", "a"), ("a", "b"),
    ...                                                       ("b", "y0"), ("b", "y1")])
    >>> block_lower_bound(g, ["a"]) + block_lower_bound(g, ["b"]), block_lower_bound(g, ["a", "b"])
    (4, 6)
    """
    s = _as_structure(graph)
    members = list(dict.fromkeys(block))
    n = len(members)
    if not n:
        return 0
    bit = {v: 1 << i for i, v in enumerate(members)}
    anc_mask, desc_mask = [], []
    for v in members:
        anc, desc = _reachable(s.preds, s.preds[v]), _reachable(s.succs, s.succs[v])  # v itself not: a DAG
        anc_mask.append(sum(b for u, b in bit.items() if u in anc))
        desc_mask.append(sum(b for u, b in bit.items() if u in desc))
    cache: dict[tuple[int, int], int] = {}

    def price(i: int, done: int) -> int:
        key = (i, done & (anc_mask[i] | desc_mask[i]))
        value = cache.get(key)
        if value is None:
            w = members[i]
            alive_a = tuple(members[j] for j in range(n) if anc_mask[i] >> j & 1 and not done >> j & 1)
            dead_a = frozenset(members[j] for j in range(n) if anc_mask[i] >> j & 1 and done >> j & 1)
            alive_d = tuple(members[j] for j in range(n) if desc_mask[i] >> j & 1 and not done >> j & 1)
            dead_d = frozenset(members[j] for j in range(n) if desc_mask[i] >> j & 1 and done >> j & 1)
            value = (_flow(s.preds, s.inputs + alive_a, w, dead_a)[0]
                     * _flow(s.succs, s.outputs + alive_d, w, dead_d)[0])
            cache[key] = value
        return value

    full = (1 << n) - 1
    best = [0] * (full + 1)  # best[done]: the least cost of the members not in done
    for done in range(full - 1, -1, -1):
        low = None
        rest = full & ~done
        while rest:
            b = rest & -rest
            rest ^= b
            i = b.bit_length() - 1
            total = price(i, done) + best[done | b]
            if low is None or total < low:
                low = total
        best[done] = low
    return best[0]


def block_partition(graph: CompGraph | Structure, size: int, *, reverse: bool = False) -> list[list[Node]]:
    """Intermediates grouped into blocks of at most ``size`` neighbouring vertices.

    Greedy: from the first vertex (topological order, the last with
    ``reverse``) not yet placed, a breadth-first search over edges between
    intermediates fills the block.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "b"), ("b", "c"), ("c", "y")])
    >>> block_partition(g, 2)
    [['a', 'b'], ['c']]
    """
    s = _as_structure(graph)
    placed: set[Node] = set()
    blocks = []
    for start in (s.intermediates[::-1] if reverse else s.intermediates):
        if start in placed:
            continue
        block = [start]
        placed.add(start)
        queue = deque([start])
        while queue and len(block) < size:
            u = queue.popleft()
            for w in [w for w in s.intermediates if w in s.preds[u] or w in s.succs[u]]:
                if w not in placed and len(block) < size:
                    block.append(w)
                    placed.add(w)
                    queue.append(w)
        blocks.append(block)
    return blocks


def block_partition_bound(graph: CompGraph | Structure, size: int = 10, *,
                          reverse: bool = False) -> tuple[int, list[tuple[list[Node], int]]]:
    """Σ of :func:`block_lower_bound` over :func:`block_partition` (``size``): a lower bound
    on any vertex elimination, and the blocks with their bounds.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [("x0", "a"), ("x1", "a"), ("a", "b"),
    ...                                                       ("b", "y0"), ("b", "y1")])
    >>> block_partition_bound(g, 2)
    (6, [(['a', 'b'], 6)])
    """
    s = _as_structure(graph)
    blocks = [(block, block_lower_bound(s, block)) for block in block_partition(s, size, reverse=reverse)]
    return sum(value for _, value in blocks), blocks
