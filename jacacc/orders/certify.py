"""Certified vertex elimination orders: an order, its cost and a lower bound anyone can check.

:func:`certify` searches for a cheap vertex elimination order and a proof of
how far from optimal it can be; :func:`check_certificate` re-verifies that
proof from the graph alone, with code of its own (a replay of the order,
path checks, and a dynamic program over NetworkX maximum flows), none of it
shared with the search.

A :class:`Certificate` holds

* ``order`` and its ``cost`` (Σ ``|P(v)|``·``|S(v)|``, replayed from scratch);
* ``terms``: for every intermediate v, disjoint input→v and v→output paths
  (Menger witnesses: ``|P(v)|`` ≥ κ(X, v), ``|S(v)|`` ≥ κ(v, Y) in any order; see
  :func:`jacacc.bounds.connectivity_lower_bound`);
* ``prefix``: eliminations some optimal order begins with, each with the rule
  that allows it and its witness paths (:func:`jacacc.bounds.safe_prefix`);
* ``blocks``: disjoint sets of the intermediates the prefix leaves, each with a
  lower bound on its members' total cost (:func:`jacacc.bounds.block_lower_bound`,
  recomputed by the checker); a block holding every vertex left is an exact
  optimum;
* ``certified_bound`` = max(Σ terms, prefix cost + Σ blocks + the terms of
  vertices in no block), checkable, and ``lower_bound`` ≥ it, the best bound
  proven, which may come from the CP-SAT search (``proof="cp-sat"``, the
  solver's word, not re-checkable) or equal the certified bound
  (``proof="witness"`` or ``"blocks"``);
* ``status``: ``"optimal"`` when ``lower_bound == cost``, else ``"gap"``.

Examples
--------
>>> from jacacc import CompGraph
>>> g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [("x0", "a"), ("x1", "a"), ("a", "b"),
...                                                       ("b", "y0"), ("b", "y1")])
>>> cert = certify(g, time_limit=5, seed=0)
>>> cert.order, cert.cost, cert.lower_bound, cert.status, cert.proof
(('a', 'b'), 6, 6, 'optimal', 'blocks')
>>> check_certificate(g, Certificate.from_json(cert.to_json()))
>>> print(cert)  # doctest: +NORMALIZE_WHITESPACE, +ELLIPSIS
Certificate: vertex elimination, 2 intermediates
  order cost           6
  lower bound          6  (blocks)
  status         optimal
  Menger terms         4  (2 terms)
  safe prefix          0  (0 steps)
  blocks               6  (1 block, largest 2)
  seconds            ...
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jacacc.bounds import (
    SafeStep,
    VertexTerm,
    block_lower_bound,
    block_partition,
    connectivity_terms,
    safe_prefix,
)
from jacacc.errors import JacaccError
from jacacc.graph import CompGraph, as_graph

__all__ = ["Certificate", "CertificateError", "certify", "check_certificate"]

Node = Hashable
EXACT_BLOCK = 12  # up to this many intermediates left, one block: an exact optimum


class CertificateError(JacaccError, ValueError):
    """A certificate that does not prove what it claims."""


@dataclass(frozen=True)
class Certificate:
    """A vertex elimination order with a checkable lower bound (see the module docstring)."""

    order: tuple[Node, ...]
    cost: int
    lower_bound: int
    certified_bound: int
    status: str
    proof: str
    terms: tuple[VertexTerm, ...]
    prefix: tuple[SafeStep, ...] = ()
    blocks: tuple[tuple[tuple[Node, ...], int], ...] = ()
    seconds: float = 0.0
    search: dict[str, Any] = field(default_factory=dict)

    @property
    def terms_bound(self) -> int:
        """Σ κ(X, v)·κ(v, Y) over the terms."""
        return sum(t.value for t in self.terms)

    @property
    def prefix_cost(self) -> int:
        return sum(step.cost for step in self.prefix)

    @property
    def blocks_bound(self) -> int:
        """The prefix cost, the block bounds and the terms of vertices left in no block."""
        covered = {v for block, _ in self.blocks for v in block}
        prefix = {step.vertex for step in self.prefix}
        loose = sum(t.value for t in self.terms if t.vertex not in covered and t.vertex not in prefix)
        return self.prefix_cost + sum(value for _, value in self.blocks) + loose

    @property
    def gap(self) -> int:
        return self.cost - self.lower_bound

    def __str__(self) -> str:
        largest = max((len(b) for b, _ in self.blocks), default=0)
        rows = [
            ("order cost", f"{self.cost}"),
            ("lower bound", f"{self.lower_bound}  ({self.proof})"),
            ("status", self.status if self.status == "optimal" else f"gap {self.gap}"),
            ("Menger terms", f"{self.terms_bound}  ({len(self.terms)} terms)"),
            ("safe prefix", f"{self.prefix_cost}  ({len(self.prefix)} steps)"),
            ("blocks", f"{self.blocks_bound}  ({len(self.blocks)} block{'s' * (len(self.blocks) != 1)}, "
                       f"largest {largest})"),
            ("seconds", f"{self.seconds:.1f}"),
        ]
        head = f"Certificate: vertex elimination, {len(self.order)} intermediates"
        lines = [head]
        for name, value in rows:
            number, _, rest = value.partition(" ")
            lines.append(f"  {name:<14} {number:>7}" + (f" {rest}" if rest else ""))
        return "\n".join(lines)

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> str:
        """The certificate as JSON text (node ids stay strings or integers)."""
        data = {
            "order": list(self.order), "cost": self.cost, "lower_bound": self.lower_bound,
            "certified_bound": self.certified_bound, "status": self.status, "proof": self.proof,
            "terms": [{"vertex": t.vertex, "in_paths": [list(p) for p in t.in_paths],
                       "out_paths": [list(p) for p in t.out_paths]} for t in self.terms],
            "prefix": [{"vertex": s.vertex, "rule": s.rule, "cost": s.cost, "paths": [list(p) for p in s.paths]}
                       for s in self.prefix],
            "blocks": [{"vertices": list(b), "bound": value} for b, value in self.blocks],
            "seconds": self.seconds, "search": self.search,
        }
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str | dict) -> Certificate:
        """Read what :meth:`to_json` wrote."""
        data = json.loads(text) if isinstance(text, str) else text
        try:
            return cls(
                order=tuple(data["order"]), cost=data["cost"], lower_bound=data["lower_bound"],
                certified_bound=data["certified_bound"], status=data["status"], proof=data["proof"],
                terms=tuple(VertexTerm(t["vertex"], tuple(map(tuple, t["in_paths"])), tuple(map(tuple, t["out_paths"])))
                            for t in data["terms"]),
                prefix=tuple(SafeStep(s["vertex"], s["rule"], s["cost"], tuple(map(tuple, s["paths"])))
                             for s in data.get("prefix", ())),
                blocks=tuple((tuple(b["vertices"]), b["bound"]) for b in data.get("blocks", ())),
                seconds=data.get("seconds", 0.0), search=data.get("search", {}),
            )
        except (KeyError, TypeError) as exc:
            raise CertificateError(f"malformed certificate JSON: {exc!r}") from None


# ============================================================================ search
def certify(graph: Any, *, time_limit: float = 60.0, seed: int = 0, workers: int = 1,
            block_sizes: Sequence[int] = (12, 16), hint_time: float | None = None,
            hint: Sequence[Node] | None = None) -> Certificate:
    """Search for a cheap vertex order and certify a lower bound on every order's cost.

    Parameters
    ----------
    graph : CompGraph or anything :func:`~jacacc.graph.as_graph` accepts
    time_limit : float, default 60
        Seconds for the CP-SAT search (:func:`~jacacc.orders.cpsat.cpsat_vertex`
        with its proven reductions and cuts); it is skipped when the bounds
        already meet the heuristic order.
    seed : int, default 0
    workers : int, default 1
        CP-SAT workers.
    block_sizes : sequence of int
        Block sizes tried for the block bound (the best partition is kept);
        when at most 12 intermediates are left after the safe prefix, one
        block holds them all and the bound is exact.
    hint_time, hint
        Passed to :func:`~jacacc.orders.cpsat.cpsat_vertex`.

    Returns
    -------
    Certificate

    Examples
    --------
    >>> from jacacc import problems
    >>> cert = certify(problems.get("graphax_PropaneCombustion").graph(), time_limit=10)
    >>> cert.cost, cert.status, cert.proof
    (88, 'optimal', 'witness')
    """
    from jacacc.orders.cpsat import cpsat_vertex

    graph = as_graph(graph)
    began = time.perf_counter()
    terms = tuple(connectivity_terms(graph))
    steps, left = safe_prefix(graph)
    if len(left.intermediates) <= EXACT_BLOCK:
        blocks = [list(left.intermediates)] if left.intermediates else []
        scored = [(block, block_lower_bound(left, block)) for block in blocks]
    else:
        options = []
        for size, reverse in itertools.product(block_sizes, (False, True)):
            scored_option = [(b, block_lower_bound(left, b)) for b in block_partition(left, size, reverse=reverse)]
            options.append((sum(v for _, v in scored_option), scored_option))
        scored = max(options, key=lambda o: o[0])[1]
    draft = Certificate((), 0, 0, 0, "gap", "witness", terms, tuple(steps),
                        tuple((tuple(b), v) for b, v in scored))
    certified = max(draft.terms_bound, draft.blocks_bound)
    proof = "witness" if draft.terms_bound >= draft.blocks_bound else "blocks"
    spent = time.perf_counter() - began
    result = cpsat_vertex(graph, seed=seed, time_limit=max(0.1, time_limit), workers=workers,
                          hint_time=hint_time, hint=hint)
    order = tuple(result.order)
    cost = _replay(graph, order)
    bound = certified
    if result.lower_bound is not None and result.lower_bound > certified:
        bound, proof = result.lower_bound, "cp-sat"
    bound = min(bound, cost)
    info = result.search
    search = {"solver": info.solver if info else "", "status": info.status if info else "",
              "best_bound": info.best_bound if info else None, "seconds": round(info.wall_time, 3) if info else None,
              "time_limit": time_limit, "seed": seed, "workers": workers}
    return Certificate(order, cost, bound, certified, "optimal" if bound == cost else "gap", proof, terms,
                       tuple(steps), draft.blocks, round(spent + (info.wall_time if info else 0.0), 3), search)


# ============================================================================ the checker
def _replay(graph: CompGraph, order: Sequence[Node]) -> int:
    """Σ ``|P(v)|``·``|S(v)|`` of ``order``, on plain dict-of-set adjacency built from the edges."""
    preds: dict[Node, set[Node]] = {v: set() for v in graph.digraph}
    succs: dict[Node, set[Node]] = {v: set() for v in graph.digraph}
    for u, w in graph.edges:
        succs[u].add(w)
        preds[w].add(u)
    return _eliminate_all(preds, succs, order)


def _eliminate_all(preds: dict, succs: dict, order: Sequence[Node]) -> int:
    total = 0
    for v in order:
        p, s = preds.pop(v), succs.pop(v)
        total += len(p) * len(s)
        for u in p:
            succs[u].discard(v)
            succs[u].update(s)
        for w in s:
            preds[w].discard(v)
            preds[w].update(p)
    return total


def _fail(message: str) -> None:
    raise CertificateError(message)


def _check_paths(paths: Sequence[Sequence[Node]], vertex: Node, ends: set[Node], succs: dict, side: str,
                 what: str) -> None:
    """``paths`` run along edges between ``ends`` and ``vertex`` and share only ``vertex``."""
    seen: set[Node] = set()
    for path in paths:
        path = list(path)
        if len(path) < 2:
            _fail(f"{what}: path {path} is too short")
        start, end = (path[0], path[-1]) if side == "in" else (path[-1], path[0])
        if end != vertex or start not in ends:
            kind = "an input" if side == "in" else "an output"
            _fail(f"{what}: path {path} does not join {kind} and {vertex!r}")
        for u, w in itertools.pairwise(path):
            if w not in succs.get(u, ()):
                _fail(f"{what}: path {path} uses {u!r} → {w!r}, which is not an edge")
        inner = [u for u in path if u != vertex]
        if len(set(inner)) != len(inner) or seen & set(inner):
            _fail(f"{what}: path {path} shares a vertex other than {vertex!r} with another path")
        seen |= set(inner)


def _unit_flow(preds: dict, succs: dict, sources: set[Node], vertex: Node, free: set[Node], side: str) -> int:
    """Max flow from ``sources`` to ``vertex`` with unit vertex capacities except ``free`` (unbounded):
    depth-first augmenting paths on a vertex-split residual network, written apart from
    :mod:`jacacc.bounds` so that the checker shares no flow code with the search."""
    step = preds if side == "in" else succs
    region, stack = {vertex}, [vertex]
    while stack:
        for u in step[stack.pop()]:
            if u not in region:
                region.add(u)
                stack.append(u)
    big = len(region) + 1
    residual: dict[Any, dict[Any, int]] = {"s": {}}

    def add(a: Any, b: Any, capacity: int) -> None:
        residual.setdefault(a, {})[b] = residual.get(a, {}).get(b, 0) + capacity
        residual.setdefault(b, {}).setdefault(a, 0)

    for u in region:
        if u != vertex:
            add(("i", u), ("o", u), big if u in free else 1)
        for w in step[u]:  # the arc runs from w toward vertex
            add(("o", w), ("i", u), big)
    for x in (sources & region) - {vertex}:
        add("s", ("i", x), 1)
    target = ("i", vertex)
    flow = 0
    while True:
        seen, path = {"s"}, ["s"]
        while path and path[-1] != target:
            here = path[-1]
            nxt = next((b for b, c in residual[here].items() if c > 0 and b not in seen), None)
            if nxt is None:
                path.pop()
            else:
                seen.add(nxt)
                path.append(nxt)
        if not path:
            return flow
        for a, b in itertools.pairwise(path):
            residual[a][b] -= 1
            residual[b][a] += 1
        flow += 1


def _block_bound(preds: dict, succs: dict, inputs: set, outputs: set, block: Sequence[Node]) -> int:
    """:func:`jacacc.bounds.block_lower_bound` again, written independently (its own flows,
    a memoized recursion from the empty set instead of a sweep over all subsets)."""
    members = list(block)
    index = {v: i for i, v in enumerate(members)}

    def closure(step: dict, v: Node) -> int:
        found, stack = set(), [v]
        while stack:
            for u in step[stack.pop()]:
                if u not in found:
                    found.add(u)
                    stack.append(u)
        return sum(1 << index[u] for u in found if u in index)

    anc = [closure(preds, v) for v in members]
    desc = [closure(succs, v) for v in members]
    pick = lambda mask: {members[i] for i in range(len(members)) if mask >> i & 1}  # noqa: E731
    prices: dict[tuple[int, int], int] = {}
    rest: dict[int, int] = {}
    full = (1 << len(members)) - 1

    def price(i: int, done: int) -> int:
        key = (i, done & (anc[i] | desc[i]))
        if key not in prices:
            w = members[i]
            p = _unit_flow(preds, succs, inputs | pick(anc[i] & ~done), w, pick(anc[i] & done), "in")
            s = _unit_flow(preds, succs, outputs | pick(desc[i] & ~done), w, pick(desc[i] & done), "out")
            prices[key] = p * s
        return prices[key]

    def least(done: int) -> int:
        if done == full:
            return 0
        if done not in rest:
            rest[done] = min(price(i, done) + least(done | 1 << i) for i in range(len(members)) if not done >> i & 1)
        return rest[done]

    return least(0)


def check_certificate(graph: Any, certificate: Certificate, *, recompute_blocks: bool = True) -> None:
    """Re-verify ``certificate`` for ``graph``; raise :class:`CertificateError` on any flaw.

    Checks that the order is a permutation of the intermediates and costs
    ``cost`` (replayed from scratch); that there is one term per intermediate,
    whose paths run along edges from inputs (to outputs) and share no vertex
    but the term's; that each prefix step is allowed by its rule in the graph
    the steps before leave, with ``|S(v)|`` (``|P(v)|``) disjoint witness paths
    there, and costs what it says; that the blocks are disjoint sets of the
    vertices the prefix leaves and (``recompute_blocks``) that each bound is
    what an independent dynamic program over NetworkX maximum flows gives;
    that ``certified_bound`` is the larger of the two sums; and that
    ``lower_bound``, ``status`` and ``proof`` agree with all this (a
    ``"cp-sat"`` bound above the certified one is the solver's word, and is
    only checked to lie between the certified bound and the cost).

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "a"), ("a", "b"), ("b", "y"), ("b", "z")])
    >>> cert = certify(g, time_limit=2)
    >>> check_certificate(g, cert)
    >>> import dataclasses
    >>> check_certificate(g, dataclasses.replace(cert, cost=2))
    Traceback (most recent call last):
    ...
    jacacc.orders.certify.CertificateError: the order costs 3 multiplications when replayed, not 2
    """
    graph = as_graph(graph)
    c = certificate
    mids = list(graph.intermediates)
    inputs, outputs = set(graph.inputs), set(graph.outputs)
    # the order
    order = list(c.order)
    if len(order) != len(mids) or set(order) != set(mids) or len(set(order)) != len(order):
        _fail("the order is not a permutation of the intermediates")
    cost = _replay(graph, order)
    if cost != c.cost:
        _fail(f"the order costs {cost} multiplications when replayed, not {c.cost}")
    # the Menger terms, in the original graph
    succs = {v: set(graph.successors(v)) for v in graph.digraph}
    preds = {v: set(graph.predecessors(v)) for v in graph.digraph}
    if sorted(map(repr, (t.vertex for t in c.terms))) != sorted(map(repr, mids)) \
            or len({t.vertex for t in c.terms}) != len(mids):
        _fail("the terms do not name every intermediate exactly once")
    for t in c.terms:
        _check_paths(t.in_paths, t.vertex, inputs, succs, "in", f"term {t.vertex!r}")
        _check_paths(t.out_paths, t.vertex, outputs, succs, "out", f"term {t.vertex!r}")
    terms_bound = sum(t.value for t in c.terms)
    # the safe prefix, replayed
    p2 = {v: set(s) for v, s in preds.items()}
    s2 = {v: set(s) for v, s in succs.items()}
    alive = set(mids)
    for step in c.prefix:
        v = step.vertex
        if v not in alive:
            _fail(f"prefix step {v!r} is not an intermediate left at that point")
        what = f"prefix step {v!r}"
        if step.rule == "input":
            if len(p2[v]) != 1 or not p2[v] <= inputs:
                _fail(f"{what}: rule 'input' needs exactly one predecessor, an input")
            _check_paths(step.paths, v, outputs, s2, "out", what)
            if len(step.paths) != len(s2[v]):
                _fail(f"{what}: {len(step.paths)} disjoint paths to the outputs, but {len(s2[v])} successors")
        elif step.rule == "output":
            if len(s2[v]) != 1 or not s2[v] <= outputs:
                _fail(f"{what}: rule 'output' needs exactly one successor, an output")
            _check_paths(step.paths, v, inputs, s2, "in", what)
            if len(step.paths) != len(p2[v]):
                _fail(f"{what}: {len(step.paths)} disjoint paths from the inputs, but {len(p2[v])} predecessors")
        else:
            _fail(f"{what}: unknown rule {step.rule!r}")
        price = _eliminate_all(p2, s2, [v])
        if price != step.cost:
            _fail(f"{what} costs {price}, not {step.cost}")
        alive.discard(v)
    # the blocks, on the graph the prefix leaves
    covered: set[Node] = set()
    for block, value in c.blocks:
        members = set(block)
        if len(members) != len(block) or not members <= alive or members & covered:
            _fail(f"block {list(block)} is not a set of intermediates left by the prefix, disjoint from the others")
        covered |= members
        if recompute_blocks:
            found = _block_bound(p2, s2, inputs, outputs, block)
            if found != value:
                _fail(f"block {list(block)} bounds its cost by {found}, not {value}")
    blocks_bound = c.blocks_bound
    certified = max(terms_bound, blocks_bound)
    if c.certified_bound != certified:
        _fail(f"the certified bound is {certified} (terms {terms_bound}, blocks {blocks_bound}), "
              f"not {c.certified_bound}")
    if certified > cost:
        _fail(f"the certified bound {certified} exceeds the cost {cost} of an order: a bound is wrong")
    expected = {"witness": terms_bound, "blocks": blocks_bound}
    if c.proof in expected:
        if c.lower_bound != min(expected[c.proof], cost) or c.lower_bound != min(certified, cost):
            _fail(f"proof {c.proof!r} gives the lower bound {min(expected[c.proof], cost)}, not {c.lower_bound}")
    elif c.proof == "cp-sat":
        if not certified < c.lower_bound <= cost:
            _fail(f"a CP-SAT bound must lie above the certified bound {certified} and at most the cost {cost}")
    else:
        _fail(f"unknown proof {c.proof!r}")
    if c.status != ("optimal" if c.lower_bound == cost else "gap"):
        _fail(f"status {c.status!r} does not match cost {cost} and lower bound {c.lower_bound}")
