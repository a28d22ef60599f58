"""Computational graphs: the CompGraph / LCG schema, validation, IO, reference Jacobian.

A *computational graph* (paper 003 §2–3) is a DAG whose vertices are the
variables of a program and whose edge ``u → v`` carries the local partial
derivative ∂v/∂u.  Edges follow the **data flow** (paper 003 draws the
dependence arrows the other way round).  When every partial is a number the
graph is a *linearized computational graph* (LCG); a traced graph carries
symbolic partials (:mod:`jacacc.partials`) and becomes an LCG through
``linearize``.

Conventions enforced on construction:

* inputs have no in-edges, outputs have no out-edges, no vertex is both;
* the graph is acyclic and has no duplicate edge;
* inputs and outputs are ordered: Jacobian rows follow ``outputs``, columns
  follow ``inputs``;
* a node named in ``inputs`` or ``outputs`` is a node of the graph even when
  no edge touches it: an input nothing depends on is a zero Jacobian column,
  an output that depends on nothing (a constant) a zero row.  Every
  constructor (JSON, :meth:`CompGraph.from_edges`, NetworkX, the plain
  constructor) adds such nodes; the JSON ``nodes`` list is optional for them;
* a node cannot be both an input and an output, even an isolated one: an
  output equal to an input is an identity row, and it needs its own copy node
  (``[x, "y", 1]``), as does an output that later operations use (the tracer
  inserts both copies itself).  Accepting the node as both would break the
  convention the engines rely on (inputs have no in-edges, outputs no
  out-edges) and make the Jacobian's row and column the same vertex;
* intermediates that cannot be reached from an input, or cannot reach an
  output, contribute nothing to the Jacobian; they are **pruned with a
  warning** (:class:`PrunedVerticesWarning`) so that every remaining edge lies
  on an input→output path, which the elimination engines rely on.

Node ids are strings or integers (the JSON exchange format allows nothing
else).

Cost.  Construction, validation and JSON loading are O(V + E) (the
topological sort adds a sort's O(V log V) only when the vertices were not
inserted in a topological order), so graphs of 10^6 edges load in seconds;
``experiments/graph_scale.py`` measures it.  Validation works on integer
positions (each vertex numbered once, edges as two NumPy arrays), and a
graph read from edges (:meth:`CompGraph.from_edges`, JSON) builds its
``networkx.DiGraph`` on first use: loading a file and finding a Markowitz
order need none.

Non-finite partials.  A partial stored as a *number* must be finite: NaN or
±inf given as a number (a JSON ``NaN``/``Infinity`` token, a ``"nan"`` or
``"inf"`` string, a float passed to :meth:`CompGraph.from_edges`, NetworkX or
:meth:`CompGraph.with_partials`) is refused with a :class:`GraphError` naming
the edge.  A graph file with a NaN partial is most likely an exporter bug, and
RFC 8259 JSON has no NaN or Infinity at all; :meth:`CompGraph.to_json`
refuses to write one for the same reason.  *Values at points* are another
matter: partials arrays given to :func:`reference_jacobian`,
``Plan.jacobian(partials)``, ``Schedule.evaluate``, a traced function's
``jacobian``/``partials`` and compiled kernels follow IEEE arithmetic, so a
NaN or infinite point or partial propagates into the result.  A traced
graph's symbolic partials follow IEEE arithmetic too (``x / 0.0`` has the
constant partial ``inf``).  A string that looks like a number but does not
parse as one (``"2,5"``, ``"1.2.3"``) and an expression string with
unbalanced parentheses are refused as well.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import json
import math
import numbers
import os
import re
import sys
import warnings
from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import eq, itemgetter
from typing import Any

import networkx as nx
import numpy as np

from jacacc.errors import GraphError
from jacacc.partials import FUNCTIONS, Const, Expr, parse_expr

__all__ = [
    "CompGraph",
    "PrunedVerticesWarning",
    "as_graph",
    "reference_jacobian",
]

Node = Hashable
Edge = tuple[Node, Node]
KINDS = ("input", "intermediate", "output")
# The kinds as the integer structure codes them (indexes into KINDS).
_INPUT, _INTERMEDIATE, _OUTPUT = 0, 1, 2
# What the edge readers give: the vertices in insertion order, vertex → position, each
# edge's source and target positions, partials in normal form and the edges, in the order given.
_ReadEdges = tuple[list[Hashable], dict[Hashable, int], np.ndarray, np.ndarray, list[Any], list[tuple[Hashable, Hashable]]]
# Edge item types the column-wise reader takes (anything else goes the one-by-one way).
_EDGE_TYPES = frozenset({list, tuple})


class PrunedVerticesWarning(UserWarning):
    """Intermediates that lie on no input→output path were removed."""


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large graph is built.

    Building a graph allocates a few container objects per edge and frees
    none, so the collector's generation-0 threshold fires every few hundred
    edges and each older-generation pass walks everything built so far, all
    for no garbage: at 10^5–10^6 edges that was a large share of the build
    time.  Reference counting still frees memory; the collector resumes (if
    it was on) when the block ends, so cycles made meanwhile are collected then.

    On the way out, what was built moves straight to the oldest generation
    (``gc.freeze()`` then ``gc.unfreeze()``: two list splices), where the
    generational hypothesis would have put it after a few passes: otherwise
    the next allocation runs one generation-0 pass over everything built (a
    10^6-edge graph holds 2.4 M tracked dicts and tuples: 1 s).  The objects
    stay collectable by full collections.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():  # never thaw what a caller froze on purpose
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _caller_stacklevel() -> int:
    """The ``warnings.warn`` stacklevel of the first frame outside the jacacc package,
    so a warning points at the user's line whichever constructor they called."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package_dir + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def _show(nodes: Iterable[Node], limit: int = 8) -> str:
    """Render a few node ids (or edges) for an error message."""
    items = list(nodes)
    text = ", ".join(_show_one(x) for x in items[:limit])
    if len(items) > limit:
        text += f", ... ({len(items)} in all)"
    return text


def _show_one(x: Any) -> str:
    if isinstance(x, tuple) and len(x) == 2:
        return f"({_clip(x[0])} → {_clip(x[1])})"
    return _clip(x)


def _clip(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, so that a huge node id does
    not turn an error message into a page."""
    try:
        text = repr(value)
    except RecursionError:  # a list nested thousands of levels deep, as a hostile dict may hold
        return f"<a {type(value).__name__} nested too deeply to show>"
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


# Node id types accepted without further checks (np.integer ids go through _check_node_id).
_PLAIN_IDS = frozenset({str, int})


def _check_node_id(node: Any, where: str) -> None:
    # bool is an int subclass but a JSON true/false is never meant as a node id
    if isinstance(node, bool) or not isinstance(node, (str, int, np.integer)):
        raise GraphError(
            f"node id {_clip(node)} in {where} is a {type(node).__name__}; node ids must be strings or integers"
        )


# A string of digits, separators and an exponent only: meant as a number, so one
# that float() refuses ("2,5", "1.2.3", "1e") is a malformed number, not an expression.
_NUMBER_LIKE = re.compile(r"\s*[+-]?[\d.,_]+(?:[eE][+-]?[\d.,_]*)?\s*")


def _finite(value: float, edge: Edge, given: Any) -> float:
    """``value``, refused when NaN or infinite (see the module docstring)."""
    if not math.isfinite(value):
        raise GraphError(
            f"edge {_show_one(edge)} has a non-finite partial {given!r}; a graph's numeric partials must be "
            "finite (a NaN or infinite partial in a graph file is most likely an exporter bug). To propagate "
            "NaN/inf as IEEE values, pass them as partials at evaluation time, e.g. plan.jacobian(partials)"
        )
    return value


def _check_expression_text(text: str, edge: Edge) -> None:
    """Refuse partial strings that cannot be an expression: a malformed number,
    unbalanced parentheses."""
    if _NUMBER_LIKE.fullmatch(text):
        raise GraphError(f"edge {_show_one(edge)} has a partial {_clip(text)} that is neither a number nor an expression "
                         "(a malformed number?)")
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            break
    if depth != 0:
        raise GraphError(f"edge {_show_one(edge)} has a partial expression {_clip(text)} with unbalanced parentheses")


def _normalize_partial(value: Any, edge: Edge) -> Any:
    """Return the stored form of a partial: float, symbolic object, string or None.

    Numbers (also numeric strings such as ``"2.5"``) become floats and must be
    finite; other strings are kept as expression text; objects with an
    ``evaluate`` method (:class:`jacacc.partials.Expr`) are kept as symbolic
    partials; ``None`` marks a structural edge whose value is not known.
    """
    if value is None:
        return None
    if type(value) is float:  # the common case first: skips the numbers.Real ABC check
        return _finite(value, edge, value)
    if isinstance(value, Expr):  # a traced graph's partials (an ABC check would fail slowly)
        return value
    if isinstance(value, bool):
        raise GraphError(f"edge {_show_one(edge)} has a non-numeric partial {value!r} (a boolean)")
    if isinstance(value, numbers.Real):
        return _finite(float(value), edge, value)
    if (isinstance(value, np.ndarray) and value.shape == () and np.issubdtype(value.dtype, np.number)
            and not np.issubdtype(value.dtype, np.complexfloating)):
        return _finite(float(value), edge, value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            if not value.strip():
                raise GraphError(f"edge {_show_one(edge)} has an empty partial string") from None
            _check_expression_text(value, edge)
            return value
        return _finite(number, edge, value)
    if hasattr(value, "evaluate") and hasattr(value, "variables"):
        return value
    raise GraphError(
        f"edge {_show_one(edge)} has a non-numeric partial {_clip(value)} (type {type(value).__name__}); "
        "a partial is a number, an expression string, or null"
    )


class CompGraph:
    """A validated computational graph with ordered inputs and outputs.

    Parameters
    ----------
    digraph : networkx.DiGraph
        The graph; edge attribute ``partial`` holds ∂v/∂u (a number, an
        expression, or absent for a structure-only graph).  Other node and edge
        attributes are kept.
    inputs, outputs : sequence of node ids
        The independent and dependent variables, in Jacobian column / row
        order.  Every other vertex is an intermediate.  A node named here that
        ``digraph`` lacks is added as an isolated vertex: a zero Jacobian
        column (input) or row (output).  No node may be both.
    prune : bool, default True
        Remove (with a :class:`PrunedVerticesWarning`) intermediates that lie on
        no input→output path.  With ``prune=False`` such vertices are an error.
    edge_order : sequence of (u, v), optional
        The order of :attr:`edges` (slot numbering, partials arrays); defaults
        to NetworkX's edge order.  :meth:`from_edges` and :meth:`from_json`
        keep the order the edges were given in.

    Examples
    --------
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "v", 2.0), ("v", "y", 3.0)])
    >>> g
    CompGraph(inputs=1, intermediates=1, outputs=1, edges=2, partials='numeric')
    >>> reference_jacobian(g)
    array([[6.]])
    """

    def __init__(
        self,
        digraph: nx.DiGraph,
        inputs: Sequence[Node],
        outputs: Sequence[Node],
        *,
        prune: bool = True,
        edge_order: Sequence[Edge] | None = None,
    ) -> None:
        if not isinstance(digraph, nx.DiGraph) or digraph.is_multigraph():
            raise GraphError(
                f"expected a networkx.DiGraph, got {type(digraph).__name__}; "
                "duplicate (parallel) edges are not allowed"
            )
        with gc_paused():
            g = nx.DiGraph()
            g.add_nodes_from(digraph.nodes(data=True))
            g.add_edges_from(digraph.edges(data=True))
            self._setup(g, inputs, outputs, prune=prune, edge_order=edge_order)

    @classmethod
    def _adopt(
        cls,
        g: nx.DiGraph,
        inputs: Sequence[Node],
        outputs: Sequence[Node],
        *,
        prune: bool = True,
        edge_order: Sequence[Edge] | None = None,
        exact_order: bool = False,
        live: bool = False,
        normalized: bool = False,
    ) -> CompGraph:
        """Validate and wrap ``g`` itself, without the defensive copy the constructor makes.

        For jacacc's own builders (the tracer), which create ``g`` and never
        touch it again: at 10^5–10^6 edges the copy costs as much as all of the
        validation.  ``g`` is modified (pruned, ``kind`` attributes, normalized
        partials) and owned by the result.  ``live=True`` promises that every
        vertex lies on an input→output path (the tracer keeps only those), so
        the two reachability sweeps are skipped; ``normalized=True`` that every
        partial is stored in normal form already.
        """
        if type(g) is not nx.DiGraph:
            raise GraphError(f"expected a networkx.DiGraph, got {type(g).__name__}")
        graph = cls.__new__(cls)
        graph._setup(g, inputs, outputs, prune=prune, edge_order=edge_order, exact_order=exact_order, live=live,
                     normalized=normalized)
        return graph

    def _setup(
        self,
        g: nx.DiGraph | None,
        inputs: Sequence[Node],
        outputs: Sequence[Node],
        *,
        prune: bool,
        edge_order: Sequence[Edge] | None,
        exact_order: bool = False,
        live: bool = False,
        normalized: bool = False,
        read: _ReadEdges | None = None,
    ) -> None:
        """Validate the graph (``g``, owned by this graph from now on, or ``read``) and build the indexes.

        Validation, pruning and the topological sort run on integer positions
        (a vertex's insertion position, edges as two arrays of them): NumPy
        passes instead of a dict lookup per edge.  With ``g`` given, its
        structure is read into positions first.  With ``read`` (edges as
        :meth:`from_edges` read them) there is no ``g``: the DiGraph is built
        on first use (:attr:`_g`), since loading a file and finding an order
        need none, and at 10^6 edges building NetworkX's dict of dicts cost as
        much as all of the rest of the validation.

        O(V + E), but for the topological sort when the insertion order is
        not topological (see :func:`_topological_positions`).  ``exact_order``:
        ``edge_order`` lists every edge of ``g`` exactly once (checked by the
        caller).  ``live``: every vertex is known to lie on an input→output
        path (see :meth:`_adopt`).
        """
        self._inputs = _node_list(inputs, "inputs")
        self._outputs = _node_list(outputs, "outputs")
        if read is None:
            assert g is not None
            nodes = list(g._succ)  # insertion order (_node, _succ and _pred share it)
            index = dict(zip(nodes, range(len(nodes)), strict=True))
            src, dst = _edge_positions(g._succ, index)
            partials = edges = None
        else:
            nodes, index, src, dst, partials, edges = read
        input_positions, output_positions = self._check_endpoints(g, nodes, index)
        # Built once (the ids are known hashable now): membership tests run once
        # per vertex, and a set rebuilt per test made construction
        # O(V · (inputs + outputs)) (issue 24).
        self._input_set: frozenset[Node] = frozenset(self._inputs)
        self._output_set: frozenset[Node] = frozenset(self._outputs)
        # One topological sort proves acyclicity and, unless pruning removes
        # vertices, is the order kept.
        topo = _topological_positions(len(nodes), src, dst)
        if topo is None:
            self._raise_cycle(g if g is not None else _networkx(nodes, src, dst, partials))
        # each position's kind: _INPUT, _INTERMEDIATE or _OUTPUT
        kind = np.full(len(nodes), _INTERMEDIATE, dtype=np.int8)
        kind[input_positions] = _INPUT
        kind[output_positions] = _OUTPUT
        if (kind[dst] == _INPUT).any() or (kind[src] == _OUTPUT).any():
            self._check_edge_directions(g if g is not None else _networkx(nodes, src, dst, partials))
        if g is not None:
            if not normalized:
                _normalize_partials(g)
            attributes = g._node
            for node, code in zip(nodes, kind.tolist(), strict=True):
                attributes[node]["kind"] = KINDS[code]
        # In a DAG every vertex descends from a source and leads to a sink; inputs
        # have no in-edges and outputs no out-edges, so unless an intermediate is a
        # source or a sink, every one lies on an input→output path and _prune's two
        # reachability sweeps are not needed.
        if not live and _source_or_sink(len(nodes), src, dst)[kind == _INTERMEDIATE].any():
            keep = self._prune(g, nodes, src, dst, kind, prune)
            if keep is not None:
                kept_edges = keep[src] & keep[dst]
                position = np.cumsum(keep) - 1  # old position → new one
                src, dst = position[src[kept_edges]], position[dst[kept_edges]]
                nodes = list(compress(nodes, keep.tolist()))
                kind = kind[keep]
                if partials is not None:
                    mask = kept_edges.tolist()
                    partials, edges = list(compress(partials, mask)), list(compress(edges, mask))
                topo = _topological_positions(len(nodes), src, dst)  # pruning can change which tie comes first
                exact_order = False  # edge_order names pruned edges
        self._networkx: nx.DiGraph | None = g
        self._unbuilt_partials = partials  # what _g needs to build the DiGraph (None once built)
        self._graph_attributes: dict[str, Any] = {}
        # The integer structure the order finders read (rank_adjacency): positions of
        # vertices, edges as position arrays (in the order of edges when read is given,
        # else in g's), each position's kind, the topological order as positions.
        self._nodes, self._edge_src, self._edge_dst, self._kind_codes = nodes, src, dst, kind
        self._topo_positions: np.ndarray = topo  # type: ignore[assignment]
        self._topo: tuple[Node, ...] = tuple(map(nodes.__getitem__, topo.tolist()))  # type: ignore[union-attr]
        inner_topo = topo[kind[topo] == _INTERMEDIATE]  # type: ignore[index]
        self._intermediates = tuple(map(nodes.__getitem__, inner_topo.tolist()))
        if read is not None:
            self._edges: tuple[Edge, ...] = tuple(edges)  # type: ignore[arg-type]
        else:
            assert g is not None
            self._edges = self._ordered_edges(g, edge_order, exact=exact_order)

    @property
    def _g(self) -> nx.DiGraph:
        """The ``networkx.DiGraph`` (owned by this graph), built on first use when
        the graph was read from edges (:meth:`from_edges`, JSON)."""
        g = self._networkx
        if g is None:
            with gc_paused():  # a few dicts per vertex and edge, no garbage
                g = _networkx(self._nodes, self._edge_src, self._edge_dst, self._unbuilt_partials,
                              self._kind_codes)
            g.graph.update(self._graph_attributes)
            self._networkx, self._unbuilt_partials = g, None
        return g

    def _set_graph_attribute(self, key: str, value: Any) -> None:
        """Set ``g.graph[key]`` without building the DiGraph for it."""
        if self._networkx is None:
            self._graph_attributes[key] = value
        else:
            self._networkx.graph[key] = value

    @staticmethod
    def _ordered_edges(g: nx.DiGraph, edge_order: Sequence[Edge] | None, *, exact: bool = False) -> tuple[Edge, ...]:
        """The edges in the given order (pruned edges dropped), else NetworkX's order.

        ``exact``: ``edge_order`` is known to list every edge once (the
        builders' own order, nothing pruned), so it is not checked again.
        """
        if edge_order is None:
            return tuple(g.edges)
        if exact:
            return tuple(edge_order)
        adj = g._adj  # plain dict lookups: has_edge's per-call overhead dominates at 10^6 edges
        ordered = tuple((u, v) for u, v in edge_order if u in adj and v in adj[u])
        if len(ordered) != g.number_of_edges() or len(set(ordered)) != len(ordered):
            raise GraphError("edge_order must list every edge of the graph exactly once")
        return ordered

    # ------------------------------------------------------------------ validation
    def _check_endpoints(self, g: nx.DiGraph | None, nodes: list[Node], index: dict[Node, int]
                         ) -> tuple[np.ndarray, np.ndarray]:
        """Check the inputs, outputs and node ids, add the inputs and outputs no edge
        touches to ``nodes``, ``index`` (and ``g``), and return the positions of the inputs and
        of the outputs."""
        for name, seq in (("inputs", self._inputs), ("outputs", self._outputs)):
            for node in seq:
                if type(node) not in _PLAIN_IDS:  # the common str / int ids skip the call
                    _check_node_id(node, name)
            # one pass with a set (seq.count per node was quadratic in the number of inputs)
            if len(set(seq)) != len(seq):
                seen: set[Node] = set()
                repeated = {n for n in seq if n in seen or seen.add(n)}
                dupes = sorted({repr(n) for n in repeated})
                raise GraphError(f"{name} lists a node more than once: {', '.join(dupes)}")
        output_set = set(self._outputs)
        both = [n for n in self._inputs if n in output_set]
        if both:
            raise GraphError(
                f"node(s) {_show(both)} listed both as input and output; an output equal to an input "
                "(an identity row) needs its own copy node: an edge [input, output, 1]"
            )
        if g is not None and not set(map(type, nodes)) <= _PLAIN_IDS:  # ids read from edges are checked already
            for node in nodes:
                if type(node) not in _PLAIN_IDS:
                    _check_node_id(node, "the graph")
        # A node named as input or output is a node: one no edge touches is a zero
        # Jacobian column (an unused input) or row (a constant output).
        endpoints = self._inputs + self._outputs
        found = list(map(index.get, endpoints))  # one lookup each: a file's ids are new str objects, slow to find
        missing = [n for n, position in zip(endpoints, found, strict=True) if position is None]
        for node in missing:
            index[node] = len(nodes)
            nodes.append(node)
        if g is not None:
            g.add_nodes_from(missing)
        if missing:
            found = list(map(index.__getitem__, endpoints))
        return np.array(found[:len(self._inputs)], dtype=np.intp), np.array(found[len(self._inputs):], dtype=np.intp)

    @staticmethod
    def _raise_cycle(g: nx.DiGraph) -> None:
        """Raise the GraphError naming a cycle of ``g`` (which has one)."""
        try:
            cycle = nx.find_cycle(g)
        except nx.NetworkXNoCycle:  # pragma: no cover - called only when the sort found a cycle
            raise GraphError("the graph has a cycle") from None
        path = " → ".join(_clip(u) for u, _ in cycle) + f" → {_clip(cycle[0][0])}"
        raise GraphError(f"the graph has a cycle: {path}")

    def _check_edge_directions(self, g: nx.DiGraph) -> None:
        into_inputs = [(u, v) for v in self._inputs for u in g.predecessors(v)]
        if into_inputs:
            raise GraphError(f"edge(s) into an input: {_show(into_inputs)}; inputs have no in-edges")
        out_of_outputs = [(u, v) for u in self._outputs for v in g.successors(u)]
        if out_of_outputs:
            raise GraphError(
                f"edge(s) out of an output: {_show(out_of_outputs)}; outputs have no out-edges "
                "(an output that is used later needs a copy node)"
            )

    def _prune(self, g: nx.DiGraph | None, nodes: list[Node], src: np.ndarray, dst: np.ndarray, kind: np.ndarray,
               prune: bool) -> np.ndarray | None:
        """Find the intermediates on no input→output path and remove them from ``g`` (warning).

        Returns the mask of the positions kept, or None when every
        intermediate lies on such a path.
        """
        reached = _reachable_positions(len(nodes), src, dst, np.flatnonzero(kind == _INPUT))
        reaching = _reachable_positions(len(nodes), dst, src, np.flatnonzero(kind == _OUTPUT))
        dead_mask = (kind == _INTERMEDIATE) & ~(reached & reaching)
        dead = list(map(nodes.__getitem__, np.flatnonzero(dead_mask).tolist()))  # in insertion order
        if not dead:
            return None
        if not prune:
            raise GraphError(f"intermediate(s) on no input→output path: {_show(dead)}")
        warnings.warn(
            f"pruned {len(dead)} intermediate(s) on no input→output path: {_show(dead)}",
            PrunedVerticesWarning,
            stacklevel=_caller_stacklevel(),
        )
        if g is not None:
            g.remove_nodes_from(dead)
        return ~dead_mask

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_edges(
        cls,
        inputs: Sequence[Node],
        outputs: Sequence[Node],
        edges: Iterable[Sequence[Any]],
        *,
        nodes: Iterable[Node] = (),
        prune: bool = True,
    ) -> CompGraph:
        """Build a graph from ``(src, dst[, partial])`` triples.

        ``nodes`` (optional) declares vertices that occur in no edge.  Inputs
        and outputs need not be declared there: a node named in ``inputs`` or
        ``outputs`` is a node even when no edge touches it (a zero Jacobian
        column / row).  A repeated edge is an error.

        Examples
        --------
        >>> CompGraph.from_edges([0], [2], [(0, 1, 0.5), (1, 2, 4)]).intermediates
        (1,)
        """
        with gc_paused():  # a few objects per edge, no garbage (see gc_paused)
            declared = _node_list(nodes, "nodes")
            for node in declared:
                _check_node_id(node, "nodes")
            if isinstance(edges, (str, bytes, Mapping)) or not isinstance(edges, Iterable):
                raise GraphError(f"edges must be a list of [src, dst] or [src, dst, partial], got "
                                 f"{type(edges).__name__} {_clip(edges)}")
            read = _read_edge_lists(edges, declared) if type(edges) in (list, tuple) else None
            if read is None:
                read = _read_edges(edges, declared)
            graph = cls.__new__(cls)
            graph._setup(None, inputs, outputs, prune=prune, edge_order=None, read=read)
            return graph

    @classmethod
    def from_networkx(cls, digraph: nx.DiGraph, *, prune: bool = True) -> CompGraph:
        """Build a graph from a ``networkx.DiGraph`` whose nodes carry ``kind``.

        Input and output order is taken from ``digraph.graph["inputs"]`` /
        ``["outputs"]`` when present, otherwise from node insertion order.  When
        *no* node has a ``kind`` attribute, sources are taken as inputs and
        sinks as outputs.

        Examples
        --------
        >>> import networkx as nx
        >>> G = nx.DiGraph()
        >>> G.add_edge("a", "b", partial=2.0); G.add_edge("b", "c", partial=-1.0)
        >>> CompGraph.from_networkx(G).inputs
        ('a',)
        """
        if not isinstance(digraph, nx.DiGraph) or digraph.is_multigraph():
            raise GraphError(f"expected a networkx.DiGraph, got {type(digraph).__name__}")
        kinds = nx.get_node_attributes(digraph, "kind")
        if not kinds:
            inputs = [n for n in digraph.nodes if digraph.in_degree(n) == 0]
            outputs = [n for n in digraph.nodes if digraph.out_degree(n) == 0 and digraph.in_degree(n) > 0]
        else:
            missing = [n for n in digraph.nodes if n not in kinds]
            if missing:
                raise GraphError(f"node(s) without a 'kind' attribute: {_show(missing)}")
            bad = [n for n, k in kinds.items() if k not in KINDS]
            if bad:
                raise GraphError(
                    f"node(s) with an unknown kind: {_show(bad)}; kind is one of {', '.join(KINDS)}"
                )
            inputs = [n for n in digraph.nodes if kinds[n] == "input"]
            outputs = [n for n in digraph.nodes if kinds[n] == "output"]
        inputs = cls._declared_order(digraph, "inputs", inputs)
        outputs = cls._declared_order(digraph, "outputs", outputs)
        return cls(digraph, inputs, outputs, prune=prune)

    @staticmethod
    def _declared_order(digraph: nx.DiGraph, key: str, found: list[Node]) -> list[Node]:
        declared = digraph.graph.get(key)
        if declared is None:
            return found
        declared = list(declared)
        if set(declared) != set(found) and nx.get_node_attributes(digraph, "kind"):
            raise GraphError(
                f"graph attribute {key!r} = {declared!r} disagrees with the nodes whose kind "
                f"is {key[:-1]!r}: {found!r}"
            )
        return declared

    @classmethod
    def from_json(cls, source: Mapping[str, Any] | str | os.PathLike, *, prune: bool = True) -> CompGraph:
        """Read the JSON exchange format from a dict or a file path.

        The format is ``{"inputs": [...], "outputs": [...], "edges": [[src, dst,
        partial], ...]}`` with an optional ``"nodes"`` list for vertices in no
        edge; ``partial`` is a number, an expression string, or omitted.  An
        expression may name only vertices of the graph (and operations of
        :data:`jacacc.partials.FUNCTIONS`); another name is refused here, where
        the graph is loaded.  An optional ``"program"`` gives the primal program
        that such expressions need to be evaluated (and the graph compiled,
        :func:`jacacc.compile`): ``[[node, op, [arg, ...]], ...]``, one entry per
        vertex but the inputs, ``op`` an operation of the table, ``"const"`` (one
        number argument) or ``"copy"``, each ``arg`` a vertex id or a number
        (a JSON float; an integer is a vertex id).  :meth:`to_json` writes it for
        a traced graph.

        Examples
        --------
        >>> g = CompGraph.from_json({"inputs": ["x"], "outputs": ["y"],
        ...                          "edges": [["x", "t", 2], ["t", "y", 0.5]]})
        >>> g.to_json()["edges"]
        [['x', 't', 2.0], ['t', 'y', 0.5]]
        """
        with gc_paused():
            return cls._from_json(source, prune=prune)

    @classmethod
    def _from_json(cls, source: Mapping[str, Any] | str | os.PathLike, *, prune: bool) -> CompGraph:
        data = _load_json(source)
        if not isinstance(data, Mapping):
            raise GraphError(f"graph JSON must be an object, got {type(data).__name__}")
        missing = [k for k in ("inputs", "outputs", "edges") if k not in data]
        if missing:
            raise GraphError(f"graph JSON is missing key(s): {', '.join(missing)}")
        unknown = sorted(set(data) - {"inputs", "outputs", "edges", "nodes", "name", "meta", "program"})
        if unknown:
            raise GraphError(f"graph JSON has unknown key(s): {', '.join(unknown)}")
        for key in ("inputs", "outputs", "edges", "nodes", "program"):
            if key in data and not isinstance(data[key], list):
                raise GraphError(f"graph JSON key {key!r} must be a list, got {type(data[key]).__name__}")
        if data.get("name") is not None and not isinstance(data["name"], str):
            raise GraphError(f"graph JSON key 'name' must be a string, got {type(data['name']).__name__}")
        g = cls.from_edges(data["inputs"], data["outputs"], data["edges"], nodes=data.get("nodes", ()), prune=prune)
        g._check_expression_names()
        if "program" in data:
            g._set_program(data["program"])
        if data.get("name") is not None:
            g._set_graph_attribute("name", data["name"])
        return g

    def _check_expression_names(self) -> None:
        """Refuse an expression partial that does not parse, or that names a vertex the graph lacks."""
        nodes = None
        for (u, v), p in zip(self._edges, self._partials_in_order(), strict=True):
            if not isinstance(p, str):
                continue
            try:
                expr = parse_expr(p)
            except ValueError as err:
                raise GraphError(f"edge {_show_one((u, v))}: its partial {_clip(p)} cannot be read: {err}") from None
            if nodes is None:
                nodes = set(self._networkx) if self._networkx is not None else set(self._nodes)
            unknown = sorted(str(name) for name in expr.variables if name not in nodes)
            if unknown:
                raise GraphError(f"edge {_show_one((u, v))}: its partial {_clip(p)} names {', '.join(map(repr, unknown))}, "
                                 "which is not a vertex of the graph")

    def _set_program(self, program: list[Any]) -> None:
        """Give the vertices the operations of a JSON ``program`` (see :meth:`from_json`)."""
        g = self._g
        given: dict[Node, tuple[str, tuple[Any, ...]]] = {}
        for k, entry in enumerate(program):
            if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[1], str)
                    and isinstance(entry[2], list)):
                raise GraphError(f"graph JSON program entry {k} must be [node, op, [args]], got {_clip(entry)}")
            node, op, args = entry
            if node not in g or node in self._inputs:
                what = "an input" if node in self._inputs else "not a vertex of the graph"
                raise GraphError(f"graph JSON program entry {k}: node {node!r} is {what}")
            if node in given:
                raise GraphError(f"graph JSON program gives node {node!r} twice")
            arity = 1 if op in ("const", "copy") else FUNCTIONS[op].arity if op in FUNCTIONS else None
            if arity is None:
                raise GraphError(f"graph JSON program entry {k}: unknown operation {op!r}")
            if len(args) != arity:
                raise GraphError(f"graph JSON program entry {k}: {op} takes {arity} argument(s), got {len(args)}")
            for a in args:
                number = isinstance(a, float)
                if not number and a not in g:
                    raise GraphError(f"graph JSON program entry {k}: argument {a!r} is not a vertex of the graph")
                if op == "const" and not number:
                    raise GraphError(f"graph JSON program entry {k}: const takes a number, got {a!r}")
            given[node] = (op, tuple(args))
        missing = [n for n in self.topological_order if n not in given and n not in self._inputs]
        if missing:
            raise GraphError(f"graph JSON program gives no operation for {_show(missing)}")
        for node in self._inputs:
            g.nodes[node].update(op="input", args=())
        for node, (op, args) in given.items():
            g.nodes[node].update(op=op, args=args)

    def _program(self) -> list[list[Any]] | None:
        """The JSON ``program`` of a graph whose every vertex carries ``op``/``args`` (a traced one)."""
        nodes = self._g.nodes
        if not self._g or any("op" not in nodes[n] for n in self.topological_order):
            return None
        return [[_plain(n), nodes[n]["op"], [_plain(a) if not isinstance(a, float) else a for a in nodes[n]["args"]]]
                for n in self.topological_order if n not in self._inputs]

    # ------------------------------------------------------------------ export
    def to_json(self, path: str | os.PathLike | None = None) -> dict[str, Any]:
        """Return the JSON exchange form (and write it to ``path`` if given).

        Symbolic partials are written as their expression text, and a traced
        graph's primal program as ``"program"`` (see :meth:`from_json`).  A partial
        that is a non-finite constant (a traced ``x / 0.0``) cannot be written:
        graph files hold finite numbers only (see the module docstring).
        """
        isolated = [n for n in self._g.nodes if self._g.degree(n) == 0]
        data: dict[str, Any] = {"inputs": [_plain(n) for n in self._inputs], "outputs": [_plain(n) for n in self._outputs]}
        if isolated:
            data["nodes"] = [_plain(n) for n in isolated]
        data["edges"] = [self._json_edge(u, v) for u, v in self._edges]
        program = self._program()
        if program is not None:
            data["program"] = program
        if self._g.graph.get("name") is not None:
            data["name"] = self._g.graph["name"]
        if path is not None:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(_format_json(data))
        return data

    def _json_edge(self, u: Node, v: Node) -> list[Any]:
        p = self._g.edges[u, v]["partial"]
        if p is None:
            return [_plain(u), _plain(v)]
        if isinstance(p, Const):  # a constant partial is written as the number it is
            p = p.value
        if isinstance(p, float) and not math.isfinite(p):
            raise GraphError(f"cannot write edge {_show_one((u, v))} to JSON: its partial is the constant {p!r}, "
                             "and graph files hold finite partials only")
        return [_plain(u), _plain(v), p if isinstance(p, (float, str)) else str(p)]

    def to_networkx(self) -> nx.DiGraph:
        """A copy as ``networkx.DiGraph`` with ``kind`` node attributes and
        ``graph["inputs"]`` / ``graph["outputs"]`` giving the order."""
        g = self._g.copy()
        g.graph["inputs"] = list(self._inputs)
        g.graph["outputs"] = list(self._outputs)
        return g

    # ------------------------------------------------------------------ structure
    @property
    def digraph(self) -> nx.DiGraph:
        """A read-only view of the underlying ``networkx.DiGraph``."""
        # Made once: callers test membership per vertex (``v in graph.digraph``), and
        # a new view per call cost more than the test itself.  The graph never changes.
        view = self.__dict__.get("_view")
        if view is None:
            view = self._view = nx.graphviews.generic_graph_view(self._g)
        return view

    @property
    def inputs(self) -> tuple[Node, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[Node, ...]:
        return self._outputs

    @property
    def intermediates(self) -> tuple[Node, ...]:
        """Intermediate vertices in a deterministic topological order."""
        return self._intermediates

    @property
    def topological_order(self) -> tuple[Node, ...]:
        """All vertices, topologically sorted (ties broken by insertion order)."""
        return self._topo

    @property
    def rank(self) -> dict[Node, int]:
        """Each vertex's position in :attr:`topological_order` (built once)."""
        rank = self.__dict__.get("_rank")
        if rank is None:
            rank = self._rank = dict(zip(self._topo, range(len(self._topo)), strict=True))
        return rank

    def rank_adjacency(self) -> tuple[list[set[int]], list[set[int]]]:
        """Every vertex's predecessors and successors as sets of topological ranks,
        indexed by rank: a fresh structure for an elimination to change.

        >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "y"), ("x", "y")])
        >>> g.rank_adjacency()
        ([set(), {0}, {0, 1}], [{1, 2}, {2}, set()])
        """
        n = len(self._topo)
        rank = np.empty(n, dtype=np.intp)
        rank[self._topo_positions] = np.arange(n)
        head, tail = rank[self._edge_src].tolist(), rank[self._edge_dst].tolist()
        with gc_paused():  # two sets per vertex, no garbage
            preds: list[set[int]] = list(map(set, repeat((), n)))
            succs: list[set[int]] = list(map(set, repeat((), n)))
            # C-level loops (map) over the edges: a Python step per edge cost three times as much
            deque(map(set.add, map(preds.__getitem__, tail), head), maxlen=0)
            deque(map(set.add, map(succs.__getitem__, head), tail), maxlen=0)
        return preds, succs

    def _intermediate_ranks(self) -> list[int]:
        """The topological ranks of the intermediates, increasing."""
        return np.flatnonzero(self._kind_codes[self._topo_positions] == _INTERMEDIATE).tolist()

    @property
    def edges(self) -> tuple[Edge, ...]:
        """The edges; position ``i`` is slot ``i`` of every schedule and the
        last axis of every partials array."""
        return self._edges

    @property
    def n_edges(self) -> int:
        return len(self._edges)

    @property
    def _edge_index(self) -> dict[Edge, int]:
        # built on first use: an order finder never needs it, and at 10^6 edges it costs a quarter second
        index = self.__dict__.get("_edge_positions")
        if index is None:
            index = self._edge_positions = dict(zip(self._edges, range(len(self._edges)), strict=True))
        return index

    def edge_index(self, u: Node, v: Node) -> int:
        """Position of edge ``u → v`` in :attr:`edges`."""
        try:
            return self._edge_index[(u, v)]
        except KeyError:
            raise GraphError(f"no edge {_show_one((u, v))} in the graph") from None

    def kind(self, node: Node) -> str:
        self._require_node(node)
        return self._g.nodes[node]["kind"]

    def predecessors(self, node: Node) -> list[Node]:
        self._require_node(node)
        return list(self._g.predecessors(node))

    def successors(self, node: Node) -> list[Node]:
        self._require_node(node)
        return list(self._g.successors(node))

    def _require_node(self, node: Node) -> None:
        if node not in self._g:
            raise GraphError(f"unknown node {_clip(node)}")

    def partial(self, u: Node, v: Node) -> Any:
        """The partial stored on edge ``u → v``."""
        self.edge_index(u, v)
        return self._g.edges[u, v]["partial"]

    def index_domain(self) -> dict[Node, frozenset[Node]]:
        """X(j): the inputs from which each vertex can be reached (Griewank–Walther)."""
        dom: dict[Node, frozenset[Node]] = {}
        for node in self._topo:
            if node in self._input_set:
                dom[node] = frozenset([node])
            else:
                dom[node] = frozenset().union(*(dom[p] for p in self._g.predecessors(node)))
        return dom

    def index_range(self) -> dict[Node, frozenset[Node]]:
        """Y(j): the outputs each vertex can reach (Griewank–Walther)."""
        rng: dict[Node, frozenset[Node]] = {}
        for node in reversed(self._topo):
            if node in self._output_set:
                rng[node] = frozenset([node])
            else:
                rng[node] = frozenset().union(*(rng[s] for s in self._g.successors(node)))
        return rng

    # ------------------------------------------------------------------ partials
    @property
    def partials_kind(self) -> str:
        """``'numeric'`` (an LCG), ``'symbolic'``, ``'structural'`` (no partials) or ``'mixed'``."""
        kinds = set(map(_partial_kind, self._stored_partials()))
        if not kinds:
            return "numeric"
        return kinds.pop() if len(kinds) == 1 else "mixed"

    @property
    def is_numeric(self) -> bool:
        """True when every partial is a number: the graph is an LCG."""
        return self.partials_kind == "numeric"

    def require_numeric(self) -> None:
        """Raise :class:`GraphError` naming the edges whose partials are not numbers."""
        if all(isinstance(p, float) for p in self._stored_partials()):
            return
        bad = [(u, v) for u, v, p in self._g.edges(data="partial") if not isinstance(p, float)]
        if bad:
            u, v = bad[0]
            raise GraphError(
                f"not a linearized graph: {len(bad)} edge(s) have non-numeric partials, e.g. "
                f"({u!r} → {v!r}) = {self._g.edges[u, v]['partial']!r}; "
                "linearize a traced graph at a point first"
            )

    def partial_array(self) -> np.ndarray:
        """The numeric partials as an array of shape ``(n_edges,)`` in :attr:`edges` order."""
        self.require_numeric()
        return np.array(self._partials_in_order(), dtype=float)

    def _stored_partials(self) -> list[Any]:
        """The stored partials in some order, without building the DiGraph for them."""
        if self._networkx is None:
            return self._unbuilt_partials  # type: ignore[return-value]
        return [p for _, _, p in self._networkx.edges(data="partial")]

    def _partials_in_order(self) -> list[Any]:
        """The stored partials in :attr:`edges` order (raw adjacency lookups: linear, small constant)."""
        if self._networkx is None:  # read from edges: the partials are kept in that order until the DiGraph is built
            return list(self._unbuilt_partials)  # type: ignore[arg-type]
        adj = self._g._adj
        return [adj[u][v]["partial"] for u, v in self._edges]

    def with_partials(self, partials: Mapping[Edge, Any] | Sequence[Any] | np.ndarray) -> CompGraph:
        """A copy of this graph with new edge partials.

        ``partials`` is a mapping ``(u, v) -> value`` covering every edge, or a
        sequence of length ``n_edges`` in :attr:`edges` order.
        """
        if isinstance(partials, Mapping):
            missing = [e for e in self._edges if e not in partials]
            extra = [e for e in partials if e not in self._edge_index]
            if missing or extra:
                raise GraphError(
                    f"partials must cover exactly the graph's edges; missing {_show(missing)}, unknown {_show(extra)}"
                )
            values = [partials[e] for e in self._edges]
        else:
            values = list(partials)
            if len(values) != len(self._edges):
                raise GraphError(f"expected {len(self._edges)} partials, got {len(values)}")
        g = self._g.copy()
        for e, value in zip(self._edges, values, strict=False):
            g.edges[e]["partial"] = value
        return CompGraph(g, self._inputs, self._outputs, edge_order=self._edges)

    # ------------------------------------------------------------------ misc
    def __repr__(self) -> str:
        return (
            f"CompGraph(inputs={len(self._inputs)}, intermediates={len(self.intermediates)}, "
            f"outputs={len(self._outputs)}, edges={len(self._edges)}, partials={self.partials_kind!r})"
        )

    def __eq__(self, other: object) -> bool:
        """Same inputs and outputs (in order), vertices, edges and partials; the
        order of :attr:`edges` does not matter."""
        if not isinstance(other, CompGraph):
            return NotImplemented
        return (
            self._inputs == other._inputs
            and self._outputs == other._outputs
            and set(self._g.nodes) == set(other._g.nodes)
            and self._partial_map() == other._partial_map()
        )

    def _partial_map(self) -> dict[Edge, Any]:
        return {(u, v): str(p) for u, v, p in self._g.edges(data="partial")}

    __hash__ = None  # type: ignore[assignment]


def _node_list(nodes: Any, name: str) -> tuple[Node, ...]:
    """``inputs`` / ``outputs`` as a tuple; a string or a non-iterable is refused
    (a string would otherwise be read as one node per character)."""
    if isinstance(nodes, (str, bytes)) or not isinstance(nodes, Iterable) or isinstance(nodes, Mapping):
        raise GraphError(f"{name} must be a list of node ids, got {type(nodes).__name__} {_clip(nodes)}")
    return tuple(nodes)


def _positions(declared: Sequence[Node], sources: list[Node], targets: list[Node]
               ) -> tuple[list[Node], dict[Node, int], np.ndarray, np.ndarray]:
    """Number the vertices in insertion order (declared nodes, then each edge's source and
    target as first met) and give each edge's endpoints as positions."""
    index: dict[Node, int] = {}
    number = index.setdefault  # a new vertex gets the next position, a known one keeps its own
    for node in declared:
        number(node, len(index))
    # One dict probe per endpoint, numbering and looking up at once: a JSON file's ids are
    # distinct str objects, so each probe compares strings, and numbering the vertices
    # first and looking the endpoints up after (two probes each) took half again as long.
    both = np.array([number(node, len(index)) for node in chain.from_iterable(zip(sources, targets, strict=True))],
                    dtype=np.intp)
    return list(index), index, both[0::2].copy(), both[1::2].copy()


def _read_edge_lists(edges: list[Any] | tuple[Any, ...], declared: Sequence[Node]) -> _ReadEdges | None:
    """Read a list of ``[src, dst(, partial)]`` lists or tuples a column at a time; None
    when it holds anything but the common case.

    The common case — plain ``str`` / ``int`` ids, no self-loop, no repeated
    edge — is checked with C-level passes (``map``, sets, one NumPy sort for
    repeats) instead of a Python step per edge: at 10^6 edges that step was
    most of the cost of loading a file.  On anything else (an error to name,
    or items that are valid but unusual: NumPy integer ids, edges of another
    sequence type) the answer is None and :func:`_read_edges` reads the edges
    one by one, so the first bad edge in order is the one refused, as always.
    The partials are checked here only once nothing else can be wrong.
    """
    sizes = set(map(len, edges)) if set(map(type, edges)) <= _EDGE_TYPES else None
    if sizes is None or not sizes <= {2, 3}:
        return None
    sources, targets = list(map(itemgetter(0), edges)), list(map(itemgetter(1), edges))
    if not set(map(type, sources)) | set(map(type, targets)) <= _PLAIN_IDS or any(map(eq, sources, targets)):
        return None
    nodes, index, src, dst = _positions(declared, sources, targets)
    key = src.astype(np.int64) * len(nodes) + dst  # one number per edge: a repeated edge repeats it
    key.sort()
    if (key[1:] == key[:-1]).any():
        return None
    if sizes == {2}:
        partials: list[Any] = [None] * len(edges)
    else:
        partials = list(map(itemgetter(2), edges)) if sizes == {3} else [
            item[2] if len(item) == 3 else None for item in edges]
        isfinite = math.isfinite
        if not (set(map(type, partials)) <= {float} and all(map(isfinite, partials))):
            partials = [p if type(p) is float and isfinite(p) else _normalize_partial(p, (u, v))
                        for p, u, v in zip(partials, sources, targets, strict=True)]
    return nodes, index, src, dst, partials, list(zip(sources, targets, strict=True))


def _read_edges(edges: Iterable[Any], declared: Sequence[Node]) -> _ReadEdges:
    """Read ``(src, dst[, partial])`` items one by one, refusing the first bad one in order."""
    sources: list[Node] = []
    targets: list[Node] = []
    partials: list[Any] = []
    seen: set[Edge] = set()
    isfinite = math.isfinite
    for pos, item in enumerate(edges):
        size = len(item) if type(item) is list else -1  # JSON's lists skip the generic test
        if not 2 <= size <= 3:
            if isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) not in (2, 3):
                raise GraphError(f"edge #{pos} is {_clip(item)}; an edge is [src, dst] or [src, dst, partial]")
            size = len(item)
        u, v = item[0], item[1]
        if type(u) not in _PLAIN_IDS:
            _check_node_id(u, f"edge #{pos}")
        if type(v) not in _PLAIN_IDS:
            _check_node_id(v, f"edge #{pos}")
        if u == v:
            raise GraphError(f"the graph has a cycle: self-loop on {_clip(u)} (edge #{pos})")
        edge = (u, v)
        if edge in seen:
            first = list(zip(sources, targets, strict=True)).index(edge)  # only on the error path: a scan is fine
            raise GraphError(f"duplicate edge ({_clip(u)} → {_clip(v)}) at edge #{first} and #{pos}")
        seen.add(edge)
        partial = item[2] if size == 3 else None
        if type(partial) is not float or not isfinite(partial):  # floats, the common case, are stored as they are
            partial = _normalize_partial(partial, edge)
        sources.append(u)
        targets.append(v)
        partials.append(partial)
    nodes, index, src, dst = _positions(declared, sources, targets)
    return nodes, index, src, dst, partials, list(zip(sources, targets, strict=True))


def _source_or_sink(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Which of the positions ``0 … n−1`` have no in-edge or no out-edge."""
    return (np.bincount(dst, minlength=n) == 0) | (np.bincount(src, minlength=n) == 0)


def _edge_positions(succ: Mapping[Node, Mapping[Node, Any]], index: Mapping[Node, int]) -> tuple[np.ndarray, np.ndarray]:
    """The edges of a dict of dicts (a DiGraph's ``_succ``) as source and target position
    arrays, in its iteration order."""
    counts = np.fromiter(map(len, succ.values()), dtype=np.intp, count=len(succ))
    src = np.repeat(np.arange(len(succ), dtype=np.intp), counts)
    dst = np.fromiter(map(index.__getitem__, chain.from_iterable(succ.values())), dtype=np.intp, count=len(src))
    return src, dst


def _grouped(n: int, keys: np.ndarray) -> tuple[np.ndarray, list[int], list[int]]:
    """The edges grouped by ``keys`` (a position per edge), each group in edge order:
    the edge indexes and, per position, where its group starts and ends."""
    order = np.argsort(keys, kind="stable")
    ends = np.cumsum(np.bincount(keys, minlength=n)).tolist()
    return order, [0, *ends][:n], ends


def _networkx(nodes: list[Node], src: np.ndarray, dst: np.ndarray, partials: list[Any],
              kind: np.ndarray | None = None) -> nx.DiGraph:
    """The DiGraph of a graph read from edges, with ``kind`` attributes when ``kind`` is given.

    The same dict of dicts as adding the edges one at a time would make (nodes
    in insertion order, each vertex's successors and predecessors in edge
    order, one ``{"partial": p}`` dict shared by both directions of an edge),
    filled through the storage NetworkX documents for subclasses (``_node``,
    ``_succ``, ``_pred``): ``add_edges_from`` copies and merges attribute
    dicts per edge and cost several times as much at 10^6 edges.  Each edge
    reaches its two adjacency dicts by position, so the one loop over the
    edges makes no lookup by node id.  The graph is new and no view of it
    exists yet, so no cache goes stale.

    Examples
    --------
    >>> g = _networkx(["a", "b", "c"], np.array([0, 0]), np.array([2, 1]), [1.0, 2.0])
    >>> list(g.edges(data=True)), list(g.predecessors("c"))
    ([('a', 'c', {'partial': 1.0}), ('a', 'b', {'partial': 2.0})], ['a'])
    """
    heads, tails = src.tolist(), dst.tolist()
    successors: list[dict[Node, dict[str, Any]]] = [{} for _ in nodes]
    predecessors: list[dict[Node, dict[str, Any]]] = [{} for _ in nodes]
    for out, into, u, v, p in zip(map(successors.__getitem__, heads), map(predecessors.__getitem__, tails),
                                  map(nodes.__getitem__, heads), map(nodes.__getitem__, tails), partials, strict=True):
        out[v] = into[u] = {"partial": p}
    g = nx.DiGraph()
    g._node.update(zip(nodes, [{} for _ in nodes] if kind is None else [{"kind": KINDS[c]} for c in kind.tolist()],
                       strict=True))
    g._succ.update(zip(nodes, successors, strict=True))
    g._pred.update(zip(nodes, predecessors, strict=True))
    return g


def _reachable(adjacency: Mapping[Node, Iterable[Node]], sources: Iterable[Node]) -> set[Node]:
    """All vertices reachable from ``sources`` (included) along ``adjacency``: one traversal for all
    (a dict of neighbours per vertex; :func:`_reachable_positions` is the same on positions)."""
    seen = set(sources)
    stack = list(seen)
    while stack:
        for nxt in adjacency[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _reachable_positions(n: int, heads: np.ndarray, tails: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """Which of the positions ``0 … n−1`` are reachable from ``sources`` (included) along
    the edges ``heads[e] → tails[e]``: one traversal for all, as a boolean mask."""
    order, starts, ends = _grouped(n, heads)
    neighbours = tails[order].tolist()
    seen = bytearray(n)
    stack = sources.tolist()
    for s in stack:
        seen[s] = 1
    while stack:
        u = stack.pop()
        for v in neighbours[starts[u]:ends[u]]:
            if not seen[v]:
                seen[v] = 1
                stack.append(v)
    return np.frombuffer(seen, dtype=np.uint8).astype(bool)


def _digraph(nodes: Iterable[tuple[Node, dict[str, Any]]], edges: Iterable[tuple[Node, Node, dict[str, Any]]]) -> nx.DiGraph:
    """A new DiGraph holding ``nodes`` (with their attribute dicts, not copied) and ``edges``.

    The dict-of-dicts storage NetworkX documents for subclasses (``_node``,
    ``_succ``, ``_pred``) is filled directly, for jacacc's own builders whose
    nodes are distinct and whose edges join listed nodes, each pair once:
    ``add_nodes_from`` / ``add_edges_from`` copy and merge attribute dicts per
    item, which cost more than all of the graph's validation at 10^5 edges.

    Examples
    --------
    >>> g = _digraph([("a", {"kind": "input"}), ("b", {})], [("a", "b", {"partial": 2.0})])
    >>> list(g.edges(data=True)), g.nodes["a"]
    ([('a', 'b', {'partial': 2.0})], {'kind': 'input'})
    """
    g = nx.DiGraph()
    node_attributes, succ, pred = g._node, g._succ, g._pred
    for node, attributes in nodes:
        node_attributes[node] = attributes
        succ[node] = {}
        pred[node] = {}
    for u, v, data in edges:
        succ[u][v] = data
        pred[v][u] = data
    return g


def _topological_order(g: nx.DiGraph) -> tuple[Node, ...] | None:
    """The vertices of ``g`` in topological order, ties broken by insertion order; None if ``g`` has a cycle.

    The same order as ``nx.lexicographical_topological_sort(g, key=insertion
    position)``, computed on positions by :func:`_topological_positions`.

    Examples
    --------
    >>> _topological_order(nx.DiGraph([("b", "c"), ("a", "c")]))
    ('b', 'a', 'c')
    >>> _topological_order(nx.DiGraph([("c", "b"), ("a", "c")]))
    ('a', 'c', 'b')
    >>> _topological_order(nx.DiGraph([("a", "b"), ("b", "a")])) is None
    True
    """
    nodes = list(g._succ)
    order = _topological_positions(len(nodes), *_edge_positions(g._succ, dict(zip(nodes, range(len(nodes)), strict=True))))
    return None if order is None else tuple(map(nodes.__getitem__, order.tolist()))


def _topological_positions(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
    """The positions ``0 … n−1`` in topological order of the edges ``src[e] → dst[e]``, ties
    broken toward the lower position; None if there is a cycle.

    This is Kahn's algorithm taking, among the ready vertices, the lowest
    position (``nx.lexicographical_topological_sort`` keyed by position).
    When every edge goes from a lower position to a higher one (the tracer's
    graphs, files whose edges follow the data flow) that is ``0 … n−1`` itself,
    found by one vectorized test.  Otherwise the order is computed with NumPy
    from its structure, and checked:

    Kahn's algorithm with that tie-break is a scan over the positions: at
    position ``p`` it places ``p`` if all its predecessors are placed, then
    (lowest first) the vertices below or at ``p`` that were passed over and
    have become ready.  A vertex ``v`` is therefore placed at scan position
    ``t(v) = max(v, max over predecessors u of t(u))``, the first of its
    position if ``t(u) < v`` for all its predecessors, else after it
    ("late").  ``t`` is a fixed point computed by propagation along the edges
    that raise it (NumPy, a round per edge of the longest chain of raises);
    sorting by ``(t, late, v)`` is the order as long as the late vertices
    placed at one scan position are ready in increasing position, which holds
    exactly when the sorted order is topological — one vectorized test.  If
    it is not, if ``t`` takes many rounds, or on a cycle, the heap version
    (:func:`_kahn_positions`) decides.  NetworkX's generic version, keyed
    through a Python callable, took several times as long at 10^6 edges.
    """
    positions = np.arange(n, dtype=np.intp)
    back = src >= dst
    if not back.any():
        return positions
    t = positions.copy()  # the scan position each vertex is placed at
    by_source = first = None  # vertex i's out-edges: by_source[first[i]:first[i + 1]], made when needed
    active = np.flatnonzero(back)  # edges u → v that may raise t[v]: at first only those with u ≥ v
    budget = 4 * (len(src) + n)  # propagation work before the heap version is cheaper
    while active.size:
        budget -= active.size
        if budget < 0:
            return _kahn_positions(n, src, dst)
        raised = t[src[active]]
        targets = dst[active]
        grows = raised > t[targets]
        if not grows.any():
            break
        targets = targets[grows]
        np.maximum.at(t, targets, raised[grows])
        changed = np.unique(targets)
        if by_source is None:
            by_source = np.argsort(src, kind="stable")
            first = np.zeros(n + 1, dtype=np.intp)
            np.cumsum(np.bincount(src, minlength=n), out=first[1:])
        active = by_source[_concatenated_ranges(first[changed], first[changed + 1])]
    latest = np.full(n, -1, dtype=np.intp)  # the largest t among each vertex's predecessors
    np.maximum.at(latest, dst, t[src])
    late = latest >= positions
    key = (t.astype(np.int64) * 2 + late) * n + positions  # (t, late, position) as one number
    order = np.argsort(key, kind="stable")  # the keys are distinct; a merge sort is fastest on the nearly sorted
    rank = np.empty(n, dtype=np.intp)
    rank[order] = positions
    if (rank[src] < rank[dst]).all():
        return order
    return _kahn_positions(n, src, dst)


def _concatenated_ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``concatenate([arange(a, b) for a, b in zip(lo, hi)])`` without a Python loop."""
    lengths = hi - lo
    ends = np.cumsum(lengths)
    return np.repeat(lo - ends + lengths, lengths) + np.arange(ends[-1] if len(ends) else 0)


def _kahn_positions(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray | None:
    """:func:`_topological_positions` by Kahn's algorithm with a heap of ready positions."""
    by_source, starts, ends = _grouped(n, src)
    targets = dst[by_source].tolist()
    indegree = np.bincount(dst, minlength=n).tolist()
    ready = [i for i, d in enumerate(indegree) if d == 0]  # increasing: already a heap
    order: list[int] = []
    pop, push, append = heapq.heappop, heapq.heappush, order.append
    while ready:
        i = pop(ready)
        append(i)
        for child in targets[starts[i]:ends[i]]:
            indegree[child] -= 1
            if not indegree[child]:
                push(ready, child)
    return np.array(order, dtype=np.intp) if len(order) == n else None


def _normalize_partials(g: nx.DiGraph) -> None:
    """Store every edge's partial in normal form (see :func:`_normalize_partial`)."""
    isfinite = math.isfinite
    for u, out in g._succ.items():
        for v, data in out.items():
            p = data.get("partial")
            if type(p) is float and isfinite(p):  # already normal: the common case skips the call
                continue
            data["partial"] = _normalize_partial(p, (u, v))


def _partial_kind(p: Any) -> str:
    if isinstance(p, float):
        return "numeric"
    if p is None:
        return "structural"
    return "symbolic"


def _plain(node: Node) -> Any:
    """JSON-serialisable node id (NumPy integers become ``int``)."""
    return int(node) if isinstance(node, np.integer) else node


def _format_json(data: dict[str, Any]) -> str:
    """JSON text with one key per line and one edge per line (diff- and grep-friendly)."""
    lines = []
    for key, value in data.items():
        if key in ("edges", "program") and value:
            body = ",\n  ".join(json.dumps(entry) for entry in value)
            lines.append(f' "{key}": [\n  {body}\n ]')
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _load_json(source: Any) -> Any:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            raise GraphError(f"graph file {path} is a directory")
        if not os.path.isfile(path):
            raise GraphError(f"no such graph file: {path}")
        try:
            with open(path, encoding="utf-8-sig") as fh:  # UTF-8, with or without a byte-order mark
                text = fh.read()
        except UnicodeDecodeError as exc:
            raise GraphError(f"malformed JSON in {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise GraphError(f"malformed JSON in {path}: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        except RecursionError:
            # The json decoder recurses once per nesting level: '[' * 10**5 exhausts
            # the interpreter's stack.  No graph file nests more than three levels.
            raise GraphError(f"cannot read {path}: its JSON nests arrays or objects too deeply for the parser "
                             f"(a graph file nests 3 levels: {{\"edges\": [[src, dst, partial]]}})") from None
    raise GraphError(f"cannot read a graph from a {type(source).__name__}; give a dict or a file path")


def as_graph(obj: Any) -> CompGraph:
    """Coerce what users pass as a graph into a :class:`CompGraph`.

    Accepts a :class:`CompGraph`, a ``networkx.DiGraph`` with ``kind``
    attributes, a JSON dict, a path to a JSON file, or anything with a
    ``.graph`` attribute that is a CompGraph (a traced function).
    """
    if isinstance(obj, CompGraph):
        return obj
    if isinstance(getattr(obj, "graph", None), CompGraph):
        return obj.graph
    if isinstance(obj, nx.DiGraph):
        return CompGraph.from_networkx(obj)
    if isinstance(obj, (Mapping, str, os.PathLike)):
        return CompGraph.from_json(obj)
    raise GraphError(
        f"cannot use a {type(obj).__name__} as a graph; pass a CompGraph, a networkx.DiGraph, "
        "a JSON dict or a JSON file path"
    )


def reference_jacobian(graph: Any, partials: np.ndarray | None = None, zero_edges: Iterable[int] = ()) -> np.ndarray:
    """Dense Jacobian by forward propagation of the chain rule (Bauer's formula).

    Each vertex's row of derivatives with respect to all inputs is the sum over
    its in-edges of partial × the predecessor's row — Bauer's sum over paths of
    products of partials, accumulated in topological order (paper 003 §3).
    A vertex's row is kept only over its index domain X(j) (the inputs that
    reach it), so an entry sums over its own paths and nothing else: a
    structural zero stays an exact 0 and a NaN or infinite partial reaches
    exactly the entries with a path through its edge (IEEE values at points
    propagate as they do through every elimination schedule; a dense row would
    turn ``nan * 0`` into NaN across the row).

    Parameters
    ----------
    graph : CompGraph or anything :func:`as_graph` accepts
    partials : array of shape ``(..., n_edges)``, optional
        Edge values in ``graph.edges`` order, with any leading batch shape.
        Defaults to the graph's own numeric partials.
    zero_edges : iterable of int, optional
        Positions of structurally zero edges (see
        :meth:`jacacc.schedule.Schedule.evaluate`): no path runs through them.

    Returns
    -------
    numpy.ndarray of shape ``(..., len(outputs), len(inputs))``

    Examples
    --------
    >>> g = CompGraph.from_edges(["a", "b"], ["y"], [("a", "y", 2.0), ("b", "y", 3.0)])
    >>> reference_jacobian(g)
    array([[2., 3.]])
    >>> reference_jacobian(g, zero_edges=[1])
    array([[2., 0.]])
    """
    graph = as_graph(graph)
    values = graph.partial_array() if partials is None else _check_partials(graph, partials)
    batch = values.shape[:-1]
    n = len(graph.inputs)
    column = {node: i for i, node in enumerate(graph.inputs)}
    # per vertex: the sorted input columns of its index domain, and its tangent over them
    cols: dict[Node, np.ndarray] = {}
    tangent: dict[Node, np.ndarray] = {}
    g = graph._g
    zero = set(zero_edges)
    for node in graph.topological_order:
        if node in graph._input_set:
            cols[node] = np.array([column[node]])
            tangent[node] = np.ones(batch + (1,))
            continue
        # (predecessor, edge position) of the edges a path may run through
        preds = [(p, k) for p in g.predecessors(node) if (k := graph.edge_index(p, node)) not in zero]
        cols[node] = np.unique(np.concatenate([cols[p] for p, _ in preds])) if preds else np.zeros(0, dtype=int)
        acc = np.zeros(batch + (len(cols[node]),))
        for pred, k in preds:
            where = np.searchsorted(cols[node], cols[pred])
            acc[..., where] += values[..., k, None] * tangent[pred]
        tangent[node] = acc
    jac = np.zeros(batch + (len(graph.outputs), n))
    for row, out in enumerate(graph.outputs):
        jac[..., row, cols[out]] = tangent[out]
    return jac


def real_array(values: Any, what: str, error: type[Exception] = GraphError) -> np.ndarray:
    """``values`` as a float64 array; complex and non-numeric data are refused with ``error``.

    Integers, booleans, float32 and object arrays of real numbers are
    converted; NaN and inf are kept (values at points follow IEEE arithmetic).
    A complex array is refused rather than cast, which would silently drop its
    imaginary part: jacacc computes real Jacobians.

    Examples
    --------
    >>> real_array([1, 2], "points")
    array([1., 2.])
    >>> real_array([1j], "points")
    Traceback (most recent call last):
    ...
    jacacc.errors.GraphError: points are complex (dtype complex128); jacacc computes real Jacobians: pass real numbers (e.g. the real part)
    """
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise error(f"{what} must be an array of real numbers: {exc}") from None
    if arr.dtype.kind == "c":
        raise error(f"{what} are complex (dtype {arr.dtype}); jacacc computes real Jacobians: pass real numbers "
                    "(e.g. the real part)")
    if arr.dtype.kind in "biuf":
        return arr.astype(float, copy=False)
    if arr.dtype.kind in "USV":  # numeric text would convert, but points and partials are numbers
        raise error(f"{what} must be real numbers, got an array of dtype {arr.dtype}")
    try:
        return arr.astype(float)
    except (TypeError, ValueError):
        raise error(f"{what} must be real numbers, got an array of dtype {arr.dtype}"
                    + (f" holding e.g. {_clip(arr.flat[0])}" if arr.size else "")) from None


def _check_partials(graph: CompGraph, partials: Any) -> np.ndarray:
    values = real_array(partials, "partials")
    if values.ndim == 0 or values.shape[-1] != graph.n_edges:
        raise GraphError(
            f"partials must have shape (..., {graph.n_edges}) (one value per edge), got {values.shape}"
        )
    return values
