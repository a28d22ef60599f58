"""Structure of a computational graph in the terms of paper 003 §3–§5 (pure analysis, no schedules).

Paper 003 (*Notes on Computational Graph and Jacobian Accumulation*) names
the shapes a differentiation graph is made of: simple chains (Def. 3.2),
blocks and simple blocks (Def. 3.1, 3.3), depth levels and cross-level
edges (Def. 3.4), r-degree and t-degree (§3, used by the page strategy of
§5).  This module finds them; :mod:`jacacc.orders.blocks` and
:mod:`jacacc.orders.levels` turn them into schedules.

Direction
---------
The paper draws *dependence* arrows, root → … → terminal; jacacc's edges
follow the data flow, input → … → output.  Everything here is phrased in the
data-flow direction: a :class:`Chain` or :class:`Block` runs from its
``source`` (nearer the inputs) to its ``sink`` (nearer the outputs), so the
paper's source of a block is our ``sink``.  The paper's *roots* are our
outputs and its *terminals* our inputs; the paper's r-degree of a vertex (the
number of roots with a path to it) is the number of outputs the vertex
reaches, its t-degree the number of inputs that reach it.

How the definitions are read
----------------------------
* **Direct simple chain** (Def. 3.2): a path with at least one intermediate
  vertex, each of in- and out-degree 1.  :func:`simple_chains` returns the
  maximal ones.
* **Direct simple block** (Def. 3.3, mirrored to data flow): every in-edge of
  the sink comes from the source directly or through a direct simple chain
  from the source, and at least two of them are not in the same chain.
* **Indirect** chains and blocks (Def. 3.2, 3.3) are direct ones once the
  blocks nested in them are replaced by substitute edges.
  :func:`nested_structure` performs that replacement innermost first
  (§4: "the optimal calculation order is from inside out") and reports every
  chain and block with its ``direct`` flag.  When it replaces parallel
  substitute edges by one edge it does so whether or not the sink has other
  in-edges: Def. 3.3 asks every edge of the paper's source to be in the
  block, which matters for naming the block but not for computing it.
* **Block** (Def. 3.1): vertices ``s`` and ``t`` with at least two paths
  between them, such that no vertex strictly between them has an edge to or
  from outside the block.  "Separate paths that do not share any intermediate
  vertex at the same graph location" is read as "at least two distinct
  paths".  A block is *simple* when replacing its chains and nested blocks
  reduces it to one edge, *complex* otherwise (:func:`blocks`).
* **Depth levels** (Def. 3.4): :func:`depth_levels`; ``side="outputs"`` is
  the paper's definition (longest path from the roots), ``side="inputs"`` its
  mirror (longest path from the inputs).  Levels are numbered from the inputs
  (level 0) to the outputs (the last level) either way, so that the global
  Jacobian is ``J_L ⋯ J_2 J_1``.
* **Segmentation** of a cross-level edge (Def. 3.4):
  :func:`segment_cross_level_edges` fills each crossed level with a copy of
  the edge's source or target vertex, joined by unit edges.

Functions accept a :class:`~jacacc.graph.CompGraph` or anything with
``succs`` / ``preds`` adjacency mappings and ``inputs`` / ``outputs``
sequences (the elimination work graphs of :mod:`jacacc.orders.blocks`).

Examples
--------
>>> from jacacc.graph import CompGraph
>>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "b"), ("b", "y"), ("x", "y")])
>>> simple_chains(g)
[Chain(source='x', interior=('a', 'b'), sink='y', direct=True)]
>>> [str(s) for s in nested_structure(g)]
['chain x→a→b→y', 'block B(x, y)']
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jacacc.errors import GraphError

__all__ = [
    "Block",
    "Chain",
    "blocks",
    "complex_blocks",
    "cross_level_edges",
    "depth_levels",
    "nested_structure",
    "r_degrees",
    "segment_cross_level_edges",
    "simple_blocks",
    "simple_chains",
    "t_degrees",
]

Node = Hashable


@dataclass(frozen=True)
class Chain:
    """A simple chain (paper 003 Def. 3.2) from ``source`` through ``interior`` to ``sink``.

    ``direct`` is False for an indirect simple chain: one of its edges was a
    substitute edge for a nested block when it was found.
    """

    source: Node
    interior: tuple[Node, ...]
    sink: Node
    direct: bool = True

    def __str__(self) -> str:
        return "chain " + "→".join(str(v) for v in (self.source, *self.interior, self.sink))


@dataclass(frozen=True)
class Block:
    """A block (paper 003 Def. 3.1) between ``source`` and ``sink`` (data-flow direction).

    ``interior`` lists the vertices strictly inside (empty for a block found
    after its chains were already replaced); ``paths`` the number of
    source→sink paths in it; ``simple`` whether chain and block replacement
    reduces it to one edge (Def. 3.3); ``direct`` whether it is simple without
    nested blocks.
    """

    source: Node
    sink: Node
    interior: tuple[Node, ...] = ()
    paths: int = 2
    simple: bool = True
    direct: bool = True

    def __str__(self) -> str:
        kind = "block" if self.simple else "complex block"
        return f"{kind} B({self.source}, {self.sink})"


# ------------------------------------------------------------------------------------ adjacency views
@dataclass
class _View:
    succs: dict[Node, list[Node]]
    preds: dict[Node, list[Node]]
    inputs: tuple[Node, ...]
    outputs: tuple[Node, ...]
    topo: list[Node]

    @property
    def fixed(self) -> set[Node]:
        return set(self.inputs) | set(self.outputs)


def _view(graph: Any) -> _View:
    """Adjacency lists, inputs, outputs and a topological order of ``graph``."""
    from jacacc.graph import CompGraph

    if isinstance(graph, CompGraph):
        topo = list(graph.topological_order)
        succs = {v: graph.successors(v) for v in topo}
        preds = {v: graph.predecessors(v) for v in topo}
        return _View(succs, preds, tuple(graph.inputs), tuple(graph.outputs), topo)
    if not all(hasattr(graph, a) for a in ("succs", "preds", "inputs", "outputs")):
        raise GraphError(
            "expected a CompGraph or a work graph with succs/preds/inputs/outputs, "
            f"got {type(graph).__name__}"
        )
    succs = {v: list(out) for v, out in graph.succs.items()}
    preds = {v: list(inc) for v, inc in graph.preds.items()}
    return _View(succs, preds, tuple(graph.inputs), tuple(graph.outputs), _topological(succs, preds))


def _topological(succs: Mapping[Node, Iterable[Node]], preds: Mapping[Node, Iterable[Node]]) -> list[Node]:
    indegree = {v: len(list(preds[v])) for v in succs}
    ready = [v for v, d in indegree.items() if d == 0]
    order = []
    while ready:
        v = ready.pop()
        order.append(v)
        for w in succs[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    if len(order) != len(indegree):
        raise GraphError("the graph has a cycle")
    return order


# ------------------------------------------------------------------------------------ depth levels
def depth_levels(graph: Any, side: str = "inputs") -> dict[Node, int]:
    """Depth level of every vertex (paper 003 Def. 3.4).

    Parameters
    ----------
    graph : CompGraph (or anything :func:`jacacc.graph.as_graph` reads, or a work graph)
    side : {"inputs", "outputs"}
        ``"inputs"``: a vertex's level is its longest path from an input, and
        every output is put on the last level.  ``"outputs"``: the paper's
        definition, the longest path from the roots (our outputs), numbered
        so that the outputs are on the last level and every input on level 0.

    Returns
    -------
    dict mapping every vertex to its level (inputs 0, outputs the last level)

    Examples
    --------
    >>> from jacacc.graph import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "b"), ("b", "y"), ("x", "c"), ("c", "y")])
    >>> depth_levels(g)["c"], depth_levels(g, side="outputs")["c"]
    (1, 2)
    """
    if side not in ("inputs", "outputs"):
        raise GraphError(f"side must be 'inputs' or 'outputs', got {side!r}")
    if not hasattr(graph, "succs"):
        from jacacc.graph import as_graph

        graph = as_graph(graph)
    view = _view(graph)
    if not view.topo:
        return {}
    if side == "inputs":
        level: dict[Node, int] = {}
        for v in view.topo:
            level[v] = 1 + max((level[p] for p in view.preds[v]), default=-1)
        last = max(level.values())
        for y in view.outputs:
            level[y] = last
        return level
    height: dict[Node, int] = {}
    for v in reversed(view.topo):
        height[v] = 1 + max((height[s] for s in view.succs[v]), default=-1)
    last = max(height.values())
    for x in view.inputs:
        height[x] = last
    for y in view.outputs:
        height[y] = 0
    return {v: last - h for v, h in height.items()}


def cross_level_edges(graph: Any, levels: Mapping[Node, int] | None = None) -> list[tuple[Node, Node]]:
    """The edges whose endpoints' depth levels differ by more than one (paper 003 Def. 3.4).

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig3_1a
    >>> cross_level_edges(fig3_1a())
    [('x', 'f')]
    """
    view = _view(graph if hasattr(graph, "succs") else _as_graph(graph))
    level = depth_levels(graph) if levels is None else levels
    return [(u, v) for u in view.topo for v in view.succs[u] if level[v] - level[u] > 1]


def _as_graph(graph: Any) -> Any:
    from jacacc.graph import as_graph

    return as_graph(graph)


def segment_cross_level_edges(
    graph: Any, levels: Mapping[Node, int] | None = None, copy: str = "source"
) -> Any:
    """Segment every cross-level edge into a direct simple chain (paper 003 Def. 3.4, Fig. 3.1).

    Each level crossed by an edge ``u → v`` gets a vertex *derived from* ``u``
    (``copy="source"``) or from ``v`` (``copy="target"``), named by appending
    primes (``"u'"``, ``"u''"``, …; a name already taken gets more).  The edges
    between a vertex and its copies have partial 1 and the segment next to the
    other endpoint carries the old partial, so the Jacobian is unchanged; a
    copy is shared by all cross-level edges of its vertex that cross its level.

    Returns
    -------
    CompGraph
        A graph with no cross-level edge under ``levels``.

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig3_1a, fig3_1b
    >>> seg = segment_cross_level_edges(fig3_1a(), copy="target")  # the paper's Fig. 3.1 (b)
    >>> sorted(seg.edges) == sorted(fig3_1b().edges)
    True
    """
    from jacacc.graph import CompGraph

    g = _as_graph(graph)
    if copy not in ("source", "target"):
        raise GraphError(f"copy must be 'source' or 'target', got {copy!r}")
    level = depth_levels(g) if levels is None else dict(levels)
    taken = {str(v) for v in g.topological_order}
    names: dict[tuple[Node, int], Node] = {}

    def copy_at(node: Node, lv: int) -> Node:
        key = (node, lv)
        if key not in names:
            primes = abs(lv - level[node])
            name = f"{node}" + "'" * primes
            while name in taken:
                name += "'"
            taken.add(name)
            names[key] = name
        return names[key]

    edges = []
    for u, v in g.edges:
        p = g.partial(u, v)
        lu, lv = level[u], level[v]
        if lv - lu <= 1:
            edges.append((u, v, p))
            continue
        if copy == "source":
            chain = [u] + [copy_at(u, k) for k in range(lu + 1, lv)]
            edges.extend((a, b, 1.0) for a, b in itertools.pairwise(chain) if (a, b, 1.0) not in edges)
            edges.append((chain[-1], v, p))
        else:
            chain = [copy_at(v, k) for k in range(lu + 1, lv)] + [v]
            edges.append((u, chain[0], p))
            edges.extend((a, b, 1.0) for a, b in itertools.pairwise(chain) if (a, b, 1.0) not in edges)
    return CompGraph.from_edges(g.inputs, g.outputs, edges, nodes=list(g.inputs) + list(g.outputs))


# ------------------------------------------------------------------------------------ degrees
def _reach_masks(view: _View) -> tuple[dict[Node, int], dict[Node, int]]:
    """Bit masks: the inputs reaching each vertex, and the outputs each vertex reaches."""
    in_bit = {x: 1 << i for i, x in enumerate(view.inputs)}
    out_bit = {y: 1 << i for i, y in enumerate(view.outputs)}
    down: dict[Node, int] = {}
    for v in view.topo:
        mask = in_bit.get(v, 0)
        for p in view.preds[v]:
            mask |= down[p]
        down[v] = mask
    up: dict[Node, int] = {}
    for v in reversed(view.topo):
        mask = out_bit.get(v, 0)
        for s in view.succs[v]:
            mask |= up[s]
        up[v] = mask
    return down, up


def r_degrees(graph: Any) -> dict[Node, int]:
    """The r-degree of every vertex (paper 003 §3): the number of roots with a path to it,
    i.e. in data flow the number of outputs it reaches.

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig5_2b
    >>> r_degrees(fig5_2b())["v"]
    2
    """
    _, up = _reach_masks(_view(graph if hasattr(graph, "succs") else _as_graph(graph)))
    return {v: m.bit_count() for v, m in up.items()}


def t_degrees(graph: Any) -> dict[Node, int]:
    """The t-degree of every vertex (paper 003 §3): the number of terminals it has a path to,
    i.e. in data flow the number of inputs that reach it.

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig5_2b
    >>> t_degrees(fig5_2b())["w"]
    2
    """
    down, _ = _reach_masks(_view(graph if hasattr(graph, "succs") else _as_graph(graph)))
    return {v: m.bit_count() for v, m in down.items()}


# ------------------------------------------------------------------------------------ chains
def simple_chains(graph: Any) -> list[Chain]:
    """The maximal direct simple chains (paper 003 Def. 3.2), in topological order of their sources.

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig5_2a
    >>> simple_chains(fig5_2a())
    [Chain(source='w', interior=('c',), sink='v', direct=True)]
    """
    view = _view(graph if hasattr(graph, "succs") else _as_graph(graph))
    fixed = view.fixed

    def inner(v: Node) -> bool:
        return v not in fixed and len(view.preds[v]) == 1 and len(view.succs[v]) == 1

    rank = {v: i for i, v in enumerate(view.topo)}
    chains = []
    for v in view.topo:
        if not inner(v) or inner(view.preds[v][0]):
            continue  # not the first interior vertex of a chain
        interior = [v]
        while inner(view.succs[interior[-1]][0]):
            interior.append(view.succs[interior[-1]][0])
        chains.append(Chain(view.preds[v][0], tuple(interior), view.succs[interior[-1]][0]))
    chains.sort(key=lambda c: (rank[c.source], rank[c.interior[0]]))
    return chains


def simple_blocks(graph: Any) -> list[Block]:
    """The direct simple blocks (paper 003 Def. 3.3, in data-flow direction).

    A pair (source, sink) is a direct simple block when every in-edge of the
    sink comes from the source directly or through a direct simple chain
    from the source, and at least two of them do (the paper's source is our
    sink; "every outgoing edge of the source" becomes every in-edge of the
    sink).

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig4_1a
    >>> [str(b) for b in simple_blocks(fig4_1a())]
    ['block B(x, c)', 'block B(c, f)']
    """
    view = _view(graph if hasattr(graph, "succs") else _as_graph(graph))
    fixed = view.fixed
    chain_of = {c.interior[-1]: c for c in simple_chains(graph)}
    found = []
    for t in view.topo:
        sources, interior = set(), []
        for p in view.preds[t]:
            if p in chain_of and p not in fixed:
                sources.add(chain_of[p].source)
                interior.extend(chain_of[p].interior)
            else:
                sources.add(p)
        if len(sources) == 1 and len(view.preds[t]) >= 2:
            (s,) = sources
            found.append(Block(s, t, tuple(interior), paths=len(view.preds[t])))
    return found


# ------------------------------------------------------------------------------------ nesting
class _Multi:
    """A structural multigraph for series-parallel reduction (edge multiplicities)."""

    def __init__(self, view: _View) -> None:
        self.succs: dict[Node, dict[Node, int]] = {v: {} for v in view.topo}
        self.preds: dict[Node, dict[Node, int]] = {v: {} for v in view.topo}
        # edges standing for something that contains a block (Def. 3.2: makes a chain indirect)
        self.nested: dict[tuple[Node, Node], bool] = {}
        for u in view.topo:
            for v in view.succs[u]:
                self.succs[u][v] = 1
                self.preds[v][u] = 1
        self.fixed = view.fixed

    def inner(self, v: Node) -> bool:
        return (
            v in self.succs and v not in self.fixed
            and len(self.preds[v]) == 1 and len(self.succs[v]) == 1
            and next(iter(self.preds[v].values())) == 1 and next(iter(self.succs[v].values())) == 1
        )


def nested_structure(graph: Any) -> list[Chain | Block]:
    """Replace simple chains and simple blocks by substitute edges, innermost first (paper 003 §4).

    Each round replaces every maximal direct simple chain by one edge, then
    every bundle of parallel edges by one edge (a simple block, Def. 3.3).
    A chain or block counts as indirect (``direct=False``) when one of its
    edges was itself a substitute edge.  What cannot be reduced this way lies
    in complex blocks or in the intertwined multi-root/multi-terminal
    structure of §5.

    Returns
    -------
    list of Chain and Block, in the order they are replaced

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig4_1a
    >>> [str(s) for s in nested_structure(fig4_1a())]  # doctest: +NORMALIZE_WHITESPACE
    ['chain x→d→c', 'chain x→e→c', 'chain c→a→f', 'chain c→b→f',
     'block B(x, c)', 'block B(c, f)', 'chain x→c→f']
    """
    view = _view(graph if hasattr(graph, "succs") else _as_graph(graph))
    m = _Multi(view)
    rank = {v: i for i, v in enumerate(view.topo)}
    found: list[Chain | Block] = []
    while True:
        progress = False
        # 1. every maximal direct simple chain becomes one substitute edge
        for v in sorted((v for v in m.succs if m.inner(v)), key=rank.__getitem__):
            if v not in m.succs or not m.inner(v):
                continue
            first = v
            while m.inner(next(iter(m.preds[first]))):
                first = next(iter(m.preds[first]))
            interior = [first]
            while m.inner(next(iter(m.succs[interior[-1]]))):
                interior.append(next(iter(m.succs[interior[-1]])))
            s, t = next(iter(m.preds[first])), next(iter(m.succs[interior[-1]]))
            path = [s, *interior, t]
            direct = not any([m.nested.pop(e, False) for e in itertools.pairwise(path)])
            for x in interior:
                del m.succs[x], m.preds[x]
            del m.succs[s][interior[0]], m.preds[t][interior[-1]]
            m.succs[s][t] = m.succs[s].get(t, 0) + 1
            m.preds[t][s] = m.succs[s][t]
            m.nested[(s, t)] = m.nested.get((s, t), False) or not direct
            found.append(Chain(s, tuple(interior), t, direct))
            progress = True
        # 2. parallel substitute edges (a simple block) become one edge
        for s in sorted(m.succs, key=rank.__getitem__):
            for t, count in list(m.succs[s].items()):
                if count > 1:
                    m.succs[s][t] = m.preds[t][s] = 1
                    found.append(Block(s, t, paths=count, direct=not m.nested.get((s, t), False)))
                    m.nested[(s, t)] = True
                    progress = True
        if not progress:
            return found


# ------------------------------------------------------------------------------------ blocks
def blocks(graph: Any, *, classify: bool = True) -> list[Block]:
    """Every block of Def. 3.1 with a non-empty interior, smallest interior first.

    A block B(s, t) (data flow: ``s`` nearer the inputs) is the set of
    vertices strictly between ``s`` and ``t`` (on an s→t path) provided none
    of them has an edge to or from a vertex outside the block, and there are
    at least two s→t paths.  Its ``simple`` flag tells whether chain and block
    replacement reduces it to a single edge; ``classify=False`` skips that
    test (every block is then reported complex: right after all chains and
    simple blocks were replaced, as :mod:`jacacc.orders.blocks` calls it).

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig4_1b
    >>> [(str(b), len(b.interior)) for b in blocks(fig4_1b())]
    [('complex block B(x, f)', 5)]
    """
    view = _view(graph if hasattr(graph, "succs") else _as_graph(graph))
    index = {v: i for i, v in enumerate(view.topo)}
    bit = {v: 1 << i for v, i in index.items()}
    pred_mask = {v: sum(bit[p] for p in view.preds[v]) for v in view.topo}
    succ_mask = {v: sum(bit[s] for s in view.succs[v]) for v in view.topo}
    below: dict[Node, int] = {}  # ancestors
    for v in view.topo:
        mask = 0
        for p in view.preds[v]:
            mask |= below[p] | bit[p]
        below[v] = mask
    above: dict[Node, int] = {}  # descendants
    for v in reversed(view.topo):
        mask = 0
        for s in view.succs[v]:
            mask |= above[s] | bit[s]
        above[v] = mask
    found = []
    for s in view.topo:
        if len(view.succs[s]) < 2:
            continue
        for t in view.topo[index[s] + 1:]:
            if not above[s] & bit[t] or len(view.preds[t]) < 2:
                continue
            interior = above[s] & below[t]
            if not interior:
                continue
            inside_in, inside_out = interior | bit[s], interior | bit[t]
            ok, k, mask = True, 0, interior
            members = []
            while mask:
                low = mask & -mask
                v = view.topo[low.bit_length() - 1]
                if pred_mask[v] & ~inside_in or succ_mask[v] & ~inside_out:
                    ok = False
                    break
                members.append(v)
                mask ^= low
                k += 1
            if not ok:
                continue
            paths = _count_paths(view, s, t, set(members))
            if paths >= 2:
                found.append((s, t, tuple(members), paths))
    result = []
    for s, t, members, paths in sorted(found, key=lambda b: (len(b[2]), index[b[0]], index[b[1]])):
        simple = classify and _reduces_to_edge(view, s, t, members)
        result.append(Block(s, t, members, paths, simple, direct=simple and _direct(view, s, t, members)))
    return result


def complex_blocks(graph: Any) -> list[Block]:
    """The blocks of Def. 3.1 that are not simple (Def. 3.3), smallest interior first.

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig4_1a, fig4_1b
    >>> complex_blocks(fig4_1a()), [str(b) for b in complex_blocks(fig4_1b())]
    ([], ['complex block B(x, f)'])
    """
    return [b for b in blocks(graph) if not b.simple]


def _count_paths(view: _View, s: Node, t: Node, interior: set[Node]) -> int:
    count = {s: 1}
    order = [v for v in view.topo if v in interior] + [t]
    for v in order:
        count[v] = sum(count.get(p, 0) for p in view.preds[v] if p == s or p in interior)
    return count[t]


def _region_view(view: _View, s: Node, t: Node, members: tuple[Node, ...]) -> _View:
    keep = {s, t, *members}
    succs = {v: [w for w in view.succs[v] if w in keep and (v, w) != (s, t)] for v in view.topo if v in keep}
    if t in view.succs[s]:
        succs[s].append(t)
    succs[t] = []
    preds = {v: [] for v in succs}
    for v, out in succs.items():
        for w in out:
            preds[w].append(v)
    return _View(succs, preds, (s,), (t,), [v for v in view.topo if v in keep])


def _reduces_to_edge(view: _View, s: Node, t: Node, members: tuple[Node, ...]) -> bool:
    reductions = nested_structure(_AsWork(_region_view(view, s, t, members)))
    consumed = {v for item in reductions if isinstance(item, Chain) for v in item.interior}
    return consumed == set(members)


def _direct(view: _View, s: Node, t: Node, members: tuple[Node, ...]) -> bool:
    return all(item.direct for item in nested_structure(_AsWork(_region_view(view, s, t, members))))


@dataclass
class _AsWork:
    """A _View dressed as a work graph (``succs``/``preds``/``inputs``/``outputs``)."""

    view: _View

    @property
    def succs(self) -> dict[Node, list[Node]]:
        return self.view.succs

    @property
    def preds(self) -> dict[Node, list[Node]]:
        return self.view.preds

    @property
    def inputs(self) -> tuple[Node, ...]:
        return self.view.inputs

    @property
    def outputs(self) -> tuple[Node, ...]:
        return self.view.outputs
