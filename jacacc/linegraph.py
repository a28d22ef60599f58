"""Naumann's dual c-graph: the directed line graph of an LCG, extended at inputs and outputs.

Face elimination (paper 003 §1, quoting Naumann 2004 and Griewank & Walther
2008 §9.4) works on the *dual c-graph* of an LCG ``G``:

* every edge ``(u, v)`` of ``G`` becomes a vertex labelled with its partial;
* every input ``x`` gets a **source** vertex (the edge from a virtual
  minimal vertex into ``x``) and every output ``y`` a **sink** vertex (the
  edge from ``y`` to a virtual maximal vertex) — the extension that makes each
  edge of ``G`` an intermediate vertex of the dual graph;
* every pair of consecutive edges ``u → j → w`` becomes an edge of the dual
  graph, a **face**; it is *intermediate* when ``j`` is an intermediate of
  ``G`` (the faces at sources and sinks are never eliminated).

The vertices of the in-edges and out-edges of an intermediate ``j`` form a
complete bipartite subgraph (biclique) of the dual graph; eliminating all its
faces is vertex elimination of ``j``.  ``networkx.line_graph`` builds the
plain line graph but does not carry the partials over; this module copies
them as vertex labels.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import networkx as nx

from jacacc.graph import as_graph

__all__ = ["Terminal", "line_graph"]

Node = Hashable


@dataclass(frozen=True)
class Terminal:
    """A source (``side="source"``, at an input) or sink (``side="sink"``, at an
    output) vertex of the dual c-graph.  Not a tuple, so it never equals an
    edge ``(u, v)`` of the original graph."""

    side: str
    node: Node

    def __str__(self) -> str:
        return f"{'⊥' if self.side == 'source' else '⊤'}{self.node}"


def line_graph(graph: Any) -> nx.DiGraph:
    """The dual c-graph of ``graph`` as a ``networkx.DiGraph``.

    Vertex ids: ``(u, v)`` for an edge of ``graph``; :class:`Terminal` for the
    source and sink vertices.  Vertex attributes: ``kind`` (``"source"``,
    ``"edge"``, ``"sink"``), ``src`` and ``dst`` (the endpoints in ``graph``;
    a terminal has both equal to its node), ``partial`` (the edge's partial,
    None for terminals).  Edge (face) attributes: ``via`` (the vertex of
    ``graph`` the two edges share) and ``intermediate`` (whether ``via`` is an
    intermediate, i.e. the face can be eliminated).

    Examples
    --------
    >>> from jacacc import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "v", 2.0), ("v", "y", 3.0), ("v", "z", 5.0)])
    >>> L = line_graph(g)
    >>> L.nodes[("v", "y")]["partial"]
    3.0
    >>> sorted((str(a), str(b)) for a, b, d in L.edges(data=True) if d["intermediate"])
    [("('x', 'v')", "('v', 'y')"), ("('x', 'v')", "('v', 'z')")]
    >>> L.number_of_nodes(), L.number_of_edges()
    (6, 5)
    """
    graph = as_graph(graph)
    dual = nx.DiGraph()
    intermediates = set(graph.intermediates)
    into: dict[Node, list[Any]] = {v: [] for v in graph.topological_order}
    out_of: dict[Node, list[Any]] = {v: [] for v in graph.topological_order}
    for x in graph.inputs:
        source = Terminal("source", x)
        dual.add_node(source, kind="source", src=x, dst=x, partial=None)
        into[x].append(source)
    for u, v in graph.edges:
        dual.add_node((u, v), kind="edge", src=u, dst=v, partial=graph.partial(u, v))
        out_of[u].append((u, v))
        into[v].append((u, v))
    for y in graph.outputs:
        sink = Terminal("sink", y)
        dual.add_node(sink, kind="sink", src=y, dst=y, partial=None)
        out_of[y].append(sink)
    for j in graph.topological_order:
        for a in into[j]:
            for b in out_of[j]:
                dual.add_edge(a, b, via=j, intermediate=j in intermediates)
    return dual
