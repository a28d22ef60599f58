"""Computational graphs: the CompGraph / LCG schema, validation, IO, reference Jacobian.

A *computational graph* (paper 003 §2–3) is a DAG whose vertices are the
variables of a program and whose edge ``u → v`` carries the local partial
derivative ∂v/∂u.  Edges follow the **data flow** (paper 003 draws the
dependence arrows the other way round).  When every partial is a number the
graph is a *linearized computational graph* (LCG); a traced graph carries
symbolic partials (:mod:`jacacc.expr`) and becomes an LCG through
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
topological sort adds O(V log V) only when the vertices were not inserted in a
topological order), so graphs of 10^6 edges load in seconds;
``experiments/graph_scale.py`` measures it.

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
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from jacacc.errors import GraphError
from jacacc.expr import Const, Expr

__all__ = [
    "CompGraph",
    "PrunedVerticesWarning",
    "as_graph",
    "reference_jacobian",
]

Node = Hashable
Edge = tuple[Node, Node]
KINDS = ("input", "intermediate", "output")


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
    ``evaluate`` method (:class:`jacacc.expr.Expr`) are kept as symbolic
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

        For jacacc's own builders (:meth:`from_edges`, the tracer), which
        create ``g`` and never touch it again: at 10^5–10^6 edges the copy
        costs as much as all of the validation.  ``g`` is modified (pruned,
        ``kind`` attributes, normalized partials) and owned by the result.
        ``live=True`` promises that every vertex lies on an input→output path
        (the tracer keeps only those), so the two reachability sweeps are skipped;
        ``normalized=True`` that every partial is stored in normal form already.
        """
        if type(g) is not nx.DiGraph:
            raise GraphError(f"expected a networkx.DiGraph, got {type(g).__name__}")
        graph = cls.__new__(cls)
        graph._setup(g, inputs, outputs, prune=prune, edge_order=edge_order, exact_order=exact_order, live=live,
                     normalized=normalized)
        return graph

    def _setup(
        self,
        g: nx.DiGraph,
        inputs: Sequence[Node],
        outputs: Sequence[Node],
        *,
        prune: bool,
        edge_order: Sequence[Edge] | None,
        exact_order: bool = False,
        live: bool = False,
        normalized: bool = False,
    ) -> None:
        """Validate ``g`` (owned by this graph from now on) and build the indexes.

        O(V + E), but for the topological sort's heap, O(V log V), needed only
        when the insertion order is not topological already.  ``exact_order``:
        ``edge_order`` lists every edge of ``g`` exactly once (checked by the
        caller).  ``live``: every vertex is known to lie on an input→output
        path (see :meth:`_adopt`).
        """
        self._inputs = _node_list(inputs, "inputs")
        self._outputs = _node_list(outputs, "outputs")
        self._check_endpoints(g)
        # Built once (the ids are known hashable now): membership tests run once
        # per vertex, and a set rebuilt per test made construction
        # O(V · (inputs + outputs)) (issue 24).
        self._input_set: frozenset[Node] = frozenset(self._inputs)
        self._output_set: frozenset[Node] = frozenset(self._outputs)
        # One topological sort proves acyclicity and, unless pruning removes
        # vertices, is the order kept.
        topo = _topological_order(g)
        if topo is None:
            self._raise_cycle(g)
        self._check_edge_directions(g)
        if not normalized:
            _normalize_partials(g)
        # Kinds, and in the same pass whether any intermediate is a source or a sink.
        # In a DAG every vertex descends from a source and leads to a sink; inputs
        # have no in-edges and outputs no out-edges, so unless an intermediate is a
        # source or a sink, every one lies on an input→output path and _prune's two
        # reachability sweeps are not needed.
        ins, outs = self._input_set, self._output_set
        succ, pred = g._succ, g._pred
        suspect = False
        for node, data in g._node.items():
            if node in ins:
                data["kind"] = "input"
            elif node in outs:
                data["kind"] = "output"
            else:
                data["kind"] = "intermediate"
                if not (pred[node] and succ[node]):
                    suspect = True
        if suspect and not live and self._prune(g, prune):
            topo = _topological_order(g)  # pruning can change which tie comes first
            exact_order = False  # edge_order names pruned edges
        self._g = g
        self._topo: tuple[Node, ...] = topo  # type: ignore[assignment]
        endpoints = ins | outs
        self._intermediates = tuple(n for n in self._topo if n not in endpoints)
        self._edges = self._ordered_edges(g, edge_order, exact=exact_order)

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
    def _check_endpoints(self, g: nx.DiGraph) -> None:
        for name, seq in (("inputs", self._inputs), ("outputs", self._outputs)):
            for node in seq:
                _check_node_id(node, name)
            # one pass with a set (seq.count per node was quadratic in the number of inputs)
            seen: set[Node] = set()
            repeated = {n for n in seq if n in seen or seen.add(n)}
            dupes = sorted({repr(n) for n in repeated})
            if dupes:
                raise GraphError(f"{name} lists a node more than once: {', '.join(dupes)}")
        output_set = set(self._outputs)
        both = [n for n in self._inputs if n in output_set]
        if both:
            raise GraphError(
                f"node(s) {_show(both)} listed both as input and output; an output equal to an input "
                "(an identity row) needs its own copy node: an edge [input, output, 1]"
            )
        for node in g._node:
            if type(node) not in _PLAIN_IDS:  # the common str / int ids skip the call
                _check_node_id(node, "the graph")
        # A node named as input or output is a node: one no edge touches is a zero
        # Jacobian column (an unused input) or row (a constant output).
        g.add_nodes_from(n for n in self._inputs + self._outputs if n not in g)

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

    def _prune(self, g: nx.DiGraph, prune: bool) -> bool:
        """Remove the intermediates on no input→output path (warning); True when there were some."""
        endpoints = self._input_set | self._output_set
        reached = _reachable(g._succ, self._inputs)  # the raw dicts: no view object per lookup
        reaching = _reachable(g._pred, self._outputs)
        dead = [n for n in g._node if n not in endpoints and not (n in reached and n in reaching)]
        if not dead:
            return False
        if not prune:
            raise GraphError(f"intermediate(s) on no input→output path: {_show(dead)}")
        warnings.warn(
            f"pruned {len(dead)} intermediate(s) on no input→output path: {_show(dead)}",
            PrunedVerticesWarning,
            stacklevel=_caller_stacklevel(),
        )
        g.remove_nodes_from(dead)
        return True

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
            g = nx.DiGraph()
            for node in _node_list(nodes, "nodes"):
                _check_node_id(node, "nodes")
                g.add_node(node)
            if isinstance(edges, (str, bytes, Mapping)) or not isinstance(edges, Iterable):
                raise GraphError(f"edges must be a list of [src, dst] or [src, dst, partial], got "
                                 f"{type(edges).__name__} {_clip(edges)}")
            # The edges go straight into the DiGraph's dict-of-dicts (the storage
            # NetworkX documents for subclasses: _succ, _pred, _node): add_edge per
            # edge, or add_edges_from, cost several times as much at 10^6 edges.
            # The graph is new and no view of it exists yet, so no cache goes stale.
            succ, pred, attributes = g._succ, g._pred, g._node
            isfinite = math.isfinite
            order: list[Edge] = []  # the edges in the order given: the edge order kept
            append = order.append
            # the hot loop of loading a file: each test is written to cost one lookup at most
            for pos, item in enumerate(edges):
                size = len(item) if type(item) is list else -1  # JSON's lists skip the generic test
                if not 2 <= size <= 3:
                    if isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) not in (2, 3):
                        raise GraphError(
                            f"edge #{pos} is {_clip(item)}; an edge is [src, dst] or [src, dst, partial]"
                        )
                    size = len(item)
                u, v = item[0], item[1]
                if type(u) not in _PLAIN_IDS:
                    _check_node_id(u, f"edge #{pos}")
                if type(v) not in _PLAIN_IDS:
                    _check_node_id(v, f"edge #{pos}")
                if u == v:
                    raise GraphError(f"the graph has a cycle: self-loop on {_clip(u)} (edge #{pos})")
                out = succ.get(u)
                if out is None:
                    out = succ[u] = {}
                    pred[u], attributes[u] = {}, {}
                elif v in out:
                    first = order.index((u, v))  # only on the error path: a scan is fine
                    raise GraphError(f"duplicate edge ({_clip(u)} → {_clip(v)}) at edge #{first} and #{pos}")
                into = pred.get(v)
                if into is None:
                    into = pred[v] = {}
                    succ[v], attributes[v] = {}, {}
                partial = item[2] if size == 3 else None
                if type(partial) is not float or not isfinite(partial):  # floats, the common case, are stored as they are
                    partial = _normalize_partial(partial, (u, v))
                out[v] = into[u] = {"partial": partial}
                append((u, v))
            return cls._adopt(g, inputs, outputs, prune=prune, edge_order=order, exact_order=True, normalized=True)

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
        edge; ``partial`` is a number, an expression string, or omitted.

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
        unknown = sorted(set(data) - {"inputs", "outputs", "edges", "nodes", "name", "meta"})
        if unknown:
            raise GraphError(f"graph JSON has unknown key(s): {', '.join(unknown)}")
        for key in ("inputs", "outputs", "edges", "nodes"):
            if key in data and not isinstance(data[key], list):
                raise GraphError(f"graph JSON key {key!r} must be a list, got {type(data[key]).__name__}")
        if data.get("name") is not None and not isinstance(data["name"], str):
            raise GraphError(f"graph JSON key 'name' must be a string, got {type(data['name']).__name__}")
        g = cls.from_edges(data["inputs"], data["outputs"], data["edges"], nodes=data.get("nodes", ()), prune=prune)
        if data.get("name") is not None:
            g._g.graph["name"] = data["name"]
        return g

    # ------------------------------------------------------------------ export
    def to_json(self, path: str | os.PathLike | None = None) -> dict[str, Any]:
        """Return the JSON exchange form (and write it to ``path`` if given).

        Symbolic partials are written as their expression text.  A partial
        that is a non-finite constant (a traced ``x / 0.0``) cannot be written:
        graph files hold finite numbers only (see the module docstring).
        """
        isolated = [n for n in self._g.nodes if self._g.degree(n) == 0]
        data: dict[str, Any] = {"inputs": [_plain(n) for n in self._inputs], "outputs": [_plain(n) for n in self._outputs]}
        if isolated:
            data["nodes"] = [_plain(n) for n in isolated]
        data["edges"] = [self._json_edge(u, v) for u, v in self._edges]
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
        rank = self.rank
        with gc_paused():  # two sets per vertex, no garbage
            preds: list[set[int]] = [set() for _ in self._topo]
            succs: list[set[int]] = [set() for _ in self._topo]
            # one pass over the edges (a comprehension per vertex was slower: two small sets each)
            for u, v in self._edges:
                ru, rv = rank[u], rank[v]
                succs[ru].add(rv)
                preds[rv].add(ru)
        return preds, succs

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
        kinds = {_partial_kind(p) for _, _, p in self._g.edges(data="partial")}
        if not kinds:
            return "numeric"
        return kinds.pop() if len(kinds) == 1 else "mixed"

    @property
    def is_numeric(self) -> bool:
        """True when every partial is a number: the graph is an LCG."""
        return self.partials_kind == "numeric"

    def require_numeric(self) -> None:
        """Raise :class:`GraphError` naming the edges whose partials are not numbers."""
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

    def _partials_in_order(self) -> list[Any]:
        """The stored partials in :attr:`edges` order (raw adjacency lookups: linear, small constant)."""
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


def _reachable(adjacency: Mapping[Node, Iterable[Node]], sources: Iterable[Node]) -> set[Node]:
    """All vertices reachable from ``sources`` (included) along ``adjacency``: one traversal for all."""
    seen = set(sources)
    stack = list(seen)
    while stack:
        for nxt in adjacency[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


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
    position)``: Kahn's algorithm taking, among the ready vertices, the one
    inserted first, on integer positions.  When every edge goes from an
    earlier-inserted vertex to a later one (the tracer's graphs, files whose
    edges follow the data flow) that is the insertion order itself — each
    time, the first remaining vertex has all its predecessors placed — and one
    O(V + E) pass finds it; otherwise the heap makes it O(E + V log V).
    NetworkX's generic version, keyed through a Python callable, took several
    times as long at 10^6 edges.

    Examples
    --------
    >>> _topological_order(nx.DiGraph([("b", "c"), ("a", "c")]))
    ('b', 'a', 'c')
    >>> _topological_order(nx.DiGraph([("c", "b"), ("a", "c")]))
    ('a', 'c', 'b')
    >>> _topological_order(nx.DiGraph([("a", "b"), ("b", "a")])) is None
    True
    """
    succ = g._succ  # the raw dict of dicts: no view objects in the loops
    nodes = list(succ)
    position = dict(zip(nodes, range(len(nodes)), strict=True))
    if all(position[v] > i for i, out in enumerate(succ.values()) for v in out):
        return tuple(succ)
    outs = list(succ.values())
    indegree = list(map(len, map(g._pred.__getitem__, nodes)))
    ready = [i for i, d in enumerate(indegree) if d == 0]  # increasing: already a heap
    order: list[int] = []
    pop, push, append = heapq.heappop, heapq.heappush, order.append
    while ready:
        i = pop(ready)
        append(i)
        for child in outs[i]:
            c = position[child]
            indegree[c] -= 1
            if not indegree[c]:
                push(ready, c)
    return tuple(map(nodes.__getitem__, order)) if len(order) == len(nodes) else None


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
        if key == "edges" and value:
            body = ",\n  ".join(json.dumps(edge) for edge in value)
            lines.append(f' "edges": [\n  {body}\n ]')
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
