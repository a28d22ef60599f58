"""Eliminations as algebraic expressions with reference variables, and back (paper 003 §2, §4).

Paper 003 §2 observes that a differentiation graph and a differentiation
expression "can be converted to each other": along a path the partials are
*multiplied*, sibling paths are *added*, and factoring out a common factor
(the parentheses operator, "evaluate the inside as a whole before any
adjacent outside operation") is merging vertices of the graph.  §4 adds that a
single expression cannot share a subexpression, so it introduces **reference
variables** (Eq. 4.5: ``r = …`` used twice): "multiple algebraic expressions
connected by intermediate variables is effectively a DAG of references" —
that is, a straight-line program.

This module makes the correspondence executable:

* :func:`to_expressions` turns a :class:`~jacacc.schedule.Schedule` (vertex,
  edge or face elimination) into an :class:`ExpressionSet`: one expression per
  Jacobian entry over the edge partials, with every value the elimination
  uses more than once named by a reference variable ``r1, r2, …``.  The set is
  exactly the factored form the elimination computes: one ``*`` per
  multiplication of the schedule, one ``+`` per addition.
* :func:`expand_paths` writes Bauer's formula unfactored: each entry the sum
  over all paths of the product of the partials (paper 003's Eq. 4.2,
  "listing all root–terminal paths").
* :func:`from_expressions` goes back (§4: the DAG of references *is* a
  computational schedule), and :func:`parse_expressions` reads the printed
  form, so that ``print → parse → schedule`` round trips.

Notation
--------
* The partial of edge ``u → v`` (data flow; paper 003 draws the arrow
  ``v → u`` and writes ∂v/∂u) is the symbol ``d[v,u]`` — read ∂v/∂u.  Pass
  ``names=paper_symbol`` for the paper's compact ``v_u`` (``f_a`` = ∂f/∂a), or
  any callable ``(u, v) -> str`` or mapping ``(u, v) -> str``.
* Jacobian entry (output ``y``, input ``x``) is ``J[y,x]``.
* Products keep the elimination's factor order: ``left * right`` with
  ``left`` the later factor (∂k/∂j) — the noncommutativity restriction paper
  003 §4 imposes for the conversion to be reversible.  Products associate to
  the left; ``a*(b*c)`` keeps its parentheses because it is a different
  evaluation order.
* Sums are n-ary; a sum inside a product is parenthesised.

Costs, counted from the expression trees
----------------------------------------
``mults``
    one per binary ``*`` node; a reference variable's definition is counted
    once however often it is used.
``adds``
    ``k - 1`` for a sum of ``k`` terms.
``fmas``
    operations on a machine with a fused multiply-add, paper 003's unit
    ("it takes 12 fma's to compute Eq. 4.2 while only 5 fma's for Eq. 4.1").
    Every multiplication is one operation, and the addition that adds a
    *product term* of a sum into the running sum is fused into that product's
    multiplication (``a*b + c`` is one fma).  Only additions with no inlined
    product to fuse into cost an operation of their own: a sum whose ``q``
    terms that are not products (edge partials, reference variables,
    parenthesised sums) costs ``max(q - 1, 0)`` plain additions.  Hence
    ``fmas = mults + Σ_sums max(q - 1, 0)``; it equals ``mults`` for every
    vertex and edge elimination (each addition there is an absorption
    ``t += l*r``) and exceeds it only for face-elimination merges.

Limits
------
The trees are walked recursively, so an expression nested deeper than
Python's recursion limit (about 1000 levels: a chain of ~1000 intermediates
eliminated into one inlined product) raises ``RecursionError``.  Every graph
of the problem zoo converts and round trips.  ``expand_paths`` is
exponential in general (``max_paths``).

Examples
--------
>>> from jacacc import optimize
>>> from jacacc.graph import CompGraph
>>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("x", "b", 3.0), ("a", "c", 5.0),
...                                         ("b", "c", 7.0), ("c", "y", 11.0)])
>>> ex = to_expressions(optimize(g, method=["a", "b", "c"]).schedule)
>>> print(ex)
J[y,x] = d[y,c]*(d[c,a]*d[a,x] + d[c,b]*d[b,x])
>>> ex.mults, ex.adds, ex.fmas
(3, 1, 3)
>>> ex.evaluate(g.partial_array()).item()  # 11 (5·2 + 7·3)
341.0
>>> print(expand_paths(g))
J[y,x] = d[y,c]*d[c,a]*d[a,x] + d[y,c]*d[c,b]*d[b,x]
>>> s = from_expressions(parse_expressions(str(ex), g), g)
>>> s.mults, s.evaluate(g.partial_array()).item()
(3, 341.0)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc.errors import JacaccError
from jacacc.graph import CompGraph, as_graph
from jacacc.schedule import Add, Op, Schedule, SplitAdd

__all__ = [
    "Expr",
    "ExpressionError",
    "ExpressionSet",
    "Leaf",
    "Mul",
    "Ref",
    "Sum",
    "default_symbol",
    "expand_paths",
    "from_expressions",
    "paper_symbol",
    "parse_expressions",
    "to_expressions",
]

Node = Hashable
Edge = tuple[Node, Node]
Key = tuple[Node, Node]  # (output, input)
Names = Callable[[Node, Node], str] | Mapping[Edge, str] | None

_REF_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


class ExpressionError(JacaccError, ValueError):
    """An expression set is malformed, cannot be parsed, or is not a chain-rule computation."""


# ----------------------------------------------------------------------------- expression trees
class Expr:
    """Base class of the expression tree nodes :class:`Leaf`, :class:`Ref`, :class:`Mul`, :class:`Sum`."""

    __slots__ = ()


@dataclass(frozen=True)
class Leaf(Expr):
    """The partial of graph edge number ``index`` (slot ``index`` of every schedule)."""

    index: int


@dataclass(frozen=True)
class Ref(Expr):
    """A use of the reference variable ``name``."""

    name: str


@dataclass(frozen=True)
class Mul(Expr):
    """One multiplication ``left * right``; ``left`` is the later factor (∂k/∂j)."""

    left: Expr
    right: Expr


@dataclass(frozen=True)
class Sum(Expr):
    """A sum of two or more terms: ``len(terms) - 1`` additions."""

    terms: tuple[Expr, ...]

    def __post_init__(self) -> None:
        if len(self.terms) < 2:
            raise ExpressionError(f"a Sum needs at least two terms, got {len(self.terms)}")


def _walk(e: Expr) -> Iterator[Expr]:
    """Every node of ``e`` (references are not followed), iteratively."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Mul):
            stack.append(node.right)
            stack.append(node.left)
        elif isinstance(node, Sum):
            stack.extend(reversed(node.terms))


def _count(e: Expr) -> tuple[int, int, int]:
    """(mults, adds, fmas) of one tree; see the module docstring for ``fmas``."""
    mults = adds = plain = 0
    for node in _walk(e):
        if isinstance(node, Mul):
            mults += 1
        elif isinstance(node, Sum):
            adds += len(node.terms) - 1
            q = sum(not isinstance(t, Mul) for t in node.terms)
            plain += max(q - 1, 0)
    return mults, adds, mults + plain


# ----------------------------------------------------------------------------- naming
def default_symbol(u: Node, v: Node) -> str:
    """The default symbol of edge ``u → v``: ``d[v,u]``, read ∂v/∂u.

    Examples
    --------
    >>> default_symbol("x", "a")
    'd[a,x]'
    """
    return f"d[{v},{u}]"


def paper_symbol(u: Node, v: Node) -> str:
    """Paper 003's compact symbol of edge ``u → v``: ``v_u`` (§4: ``f_a`` is ∂f/∂a).

    Examples
    --------
    >>> paper_symbol("a", "f")
    'f_a'
    """
    return f"{v}_{u}"


def _symbols(edges: Sequence[Edge], names: Names) -> tuple[tuple[str, ...], Callable[[Any], str]]:
    """The symbol of every edge and the node printer for ``J[y,x]`` labels.

    With the default names, node ids are printed with ``str``, or with
    ``repr`` when ``str`` would make two symbols equal (node ``1`` and ``"1"``).
    """
    nodes = {n for e in edges for n in e}
    node_text: Callable[[Any], str] = str
    if len({str(n) for n in nodes}) != len(nodes):
        node_text = repr
    if names is None:
        symbols = tuple(f"d[{node_text(v)},{node_text(u)}]" for u, v in edges)
    elif callable(names):
        symbols = tuple(str(names(u, v)) for u, v in edges)
    elif isinstance(names, Mapping):
        missing = [e for e in edges if e not in names]
        if missing:
            raise ExpressionError(f"names gives no symbol for edge(s) {missing[:5]}")
        symbols = tuple(str(names[e]) for e in edges)
    else:
        raise ExpressionError(
            f"names must be None, a callable (u, v) -> str or a mapping, not {type(names).__name__}"
        )
    if len(set(symbols)) != len(symbols):
        dupes = sorted({s for s in symbols if symbols.count(s) > 1})
        raise ExpressionError(f"edge symbols must be distinct; repeated: {', '.join(dupes[:5])}")
    bad = [s for s in symbols if not s or s != s.strip() or "\n" in s]
    if bad:
        raise ExpressionError(
            f"edge symbols must be non-empty, without surrounding blanks or newlines: {bad[:5]!r}"
        )
    return symbols, node_text


# ----------------------------------------------------------------------------- the expression set
class ExpressionSet:
    """Algebraic expressions for the Jacobian entries, connected by reference variables.

    Parameters
    ----------
    inputs, outputs : sequence of node ids
        Jacobian columns and rows.
    edges : sequence of (u, v)
        The graph's edges; :class:`Leaf` ``i`` is the partial of ``edges[i]``.
    references : mapping name -> Expr
        Reference variable definitions, in an order where each uses only
        earlier ones.
    entries : mapping (output, input) -> Expr
        One expression per structurally nonzero Jacobian entry.
    symbols : sequence of str, optional
        The printed symbol of every edge; by default made by ``names``.
    graph : CompGraph, optional
        The graph, for :meth:`evaluate` without partials.
    names : callable (u, v) -> str, mapping, or None
        Edge symbols when ``symbols`` is not given: :func:`default_symbol`
        (``d[v,u]``) by default, or e.g. :func:`paper_symbol` (``v_u``).

    Attributes
    ----------
    references : dict
        Ordered ``name -> Expr``.
    entries : dict
        ``(output, input) -> Expr``, in row-major (outputs, inputs) order.
    mults, adds, fmas : int
        Counted from the trees (module docstring).

    Examples
    --------
    >>> from jacacc.graph import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "v", 2.0), ("v", "y", 3.0), ("v", "z", 5.0)])
    >>> ex = ExpressionSet.from_graph(g, {"r1": Leaf(0)}, {("y", "x"): Mul(Leaf(1), Ref("r1")),
    ...                                                    ("z", "x"): Mul(Leaf(2), Ref("r1"))})
    >>> print(ex)
    r1 = d[v,x]
    J[y,x] = d[y,v]*r1
    J[z,x] = d[z,v]*r1
    >>> ex.evaluate().ravel().tolist()
    [6.0, 10.0]
    """

    def __init__(
        self,
        inputs: Sequence[Node],
        outputs: Sequence[Node],
        edges: Sequence[Edge],
        references: Mapping[str, Expr],
        entries: Mapping[Key, Expr],
        *,
        symbols: Sequence[str] | None = None,
        graph: CompGraph | None = None,
        names: Names = None,
    ) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.edges = tuple(edges)
        self.graph = graph
        default_symbols, self._node_text = _symbols(self.edges, names)
        self.symbols = tuple(symbols) if symbols is not None else default_symbols
        if len(self.symbols) != len(self.edges):
            raise ExpressionError(f"{len(self.symbols)} symbols for {len(self.edges)} edges")
        self.references: dict[str, Expr] = dict(references)
        row = {o: r for r, o in enumerate(self.outputs)}
        col = {i: c for c, i in enumerate(self.inputs)}
        bad = [
            k for k in entries if not (isinstance(k, tuple) and len(k) == 2 and k[0] in row and k[1] in col)
        ]
        if bad:
            raise ExpressionError(f"entry key(s) {bad[:5]} are not (output, input) pairs of this graph")
        self.entries: dict[Key, Expr] = {
            k: entries[k] for k in sorted(entries, key=lambda k: (row[k[0]], col[k[1]]))
        }
        self._validate()

    @classmethod
    def from_graph(
        cls,
        graph: Any,
        references: Mapping[str, Expr],
        entries: Mapping[Key, Expr],
        *,
        names: Names = None,
    ) -> ExpressionSet:
        """An expression set over ``graph``'s edges (any form :func:`~jacacc.graph.as_graph` accepts)."""
        g = as_graph(graph)
        return cls(g.inputs, g.outputs, g.edges, references, entries, graph=g, names=names)

    def _validate(self) -> None:
        n = len(self.edges)
        defined: set[str] = set()
        symbol_set = set(self.symbols)
        for label, e in [*self.references.items(), *((None, e) for e in self.entries.values())]:
            if label is not None:
                if not isinstance(label, str) or not _REF_NAME.fullmatch(label) or label in symbol_set:
                    raise ExpressionError(
                        f"reference name {label!r} must be an identifier different from every edge symbol"
                    )
            for node in _walk(e):
                if isinstance(node, Leaf):
                    if not (isinstance(node.index, (int, np.integer)) and 0 <= node.index < n):
                        raise ExpressionError(f"Leaf({node.index!r}) is not an edge index (0..{n - 1})")
                elif isinstance(node, Ref):
                    if node.name not in defined:
                        what = f"the definition of {label}" if label is not None else "an entry"
                        raise ExpressionError(f"{what} uses reference {node.name!r} before it is defined")
                elif not isinstance(node, (Mul, Sum)):
                    raise ExpressionError(f"not an expression node: {node!r}")
            if label is not None:
                defined.add(label)

    # ------------------------------------------------------------------ costs
    def _trees(self) -> Iterator[Expr]:
        yield from self.references.values()
        yield from self.entries.values()

    def _totals(self) -> tuple[int, int, int]:
        totals = [0, 0, 0]
        for e in self._trees():
            for k, c in enumerate(_count(e)):
                totals[k] += c
        return totals[0], totals[1], totals[2]

    @property
    def mults(self) -> int:
        """Multiplications: binary ``*`` nodes, each reference definition counted once."""
        return self._totals()[0]

    @property
    def adds(self) -> int:
        """Additions: ``k - 1`` per sum of ``k`` terms."""
        return self._totals()[1]

    @property
    def fmas(self) -> int:
        """Fused multiply-adds: ``mults`` plus the additions that have no product to fuse into
        (``max(q - 1, 0)`` per sum with ``q`` non-product terms); ``a*b + c`` is one."""
        return self._totals()[2]

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, partials: Any = None) -> np.ndarray:
        """Evaluate the expressions directly (no schedule), vectorized over a batch.

        Parameters
        ----------
        partials : array_like of shape ``(..., n_edges)``, optional
            Edge values in :attr:`edges` order; defaults to the graph's partials.

        Returns
        -------
        numpy.ndarray of shape ``(..., len(outputs), len(inputs))``
        """
        if partials is None:
            if self.graph is None:
                raise ExpressionError("no graph attached: pass partials of shape (..., n_edges)")
            partials = self.graph.partial_array()
        values = np.asarray(partials, dtype=float)
        if values.ndim == 0 or values.shape[-1] != len(self.edges):
            raise ExpressionError(
                f"partials must have shape (..., {len(self.edges)}) (one value per edge), got {values.shape}"
            )
        batch = values.shape[:-1]
        refs: dict[str, np.ndarray] = {}
        for name, e in self.references.items():
            refs[name] = _evaluate(e, values, refs)
        jac = np.zeros(batch + (len(self.outputs), len(self.inputs)))
        row = {o: r for r, o in enumerate(self.outputs)}
        col = {i: c for c, i in enumerate(self.inputs)}
        for (o, i), e in self.entries.items():
            jac[..., row[o], col[i]] = _evaluate(e, values, refs)
        return jac

    def to_schedule(self, graph: Any = None, *, check: bool = True) -> Schedule:
        """:func:`from_expressions` of this set."""
        return from_expressions(self, graph, check=check)

    # ------------------------------------------------------------------ printing
    def label(self, key: Key) -> str:
        """The printed name ``J[y,x]`` of entry ``key = (y, x)``."""
        return f"J[{self._node_text(key[0])},{self._node_text(key[1])}]"

    def format(self, e: Expr) -> str:
        """One expression with minimal parentheses: sums inside products (or
        inside sums) and right-nested products are parenthesised."""
        return _format(e, "top", self.symbols)

    def lines(self) -> list[str]:
        """Reference definitions, then one ``J[y,x] = …`` line per entry."""
        out = [f"{name} = {self.format(e)}" for name, e in self.references.items()]
        out += [f"{self.label(k)} = {self.format(e)}" for k, e in self.entries.items()]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return (
            f"ExpressionSet(references={len(self.references)}, entries={len(self.entries)}, "
            f"mults={self.mults}, adds={self.adds}, fmas={self.fmas})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExpressionSet):
            return NotImplemented
        return (
            self.inputs == other.inputs
            and self.outputs == other.outputs
            and self.edges == other.edges
            and list(self.references.items()) == list(other.references.items())
            and self.entries == other.entries
        )

    __hash__ = None  # type: ignore[assignment]


def _evaluate(e: Expr, values: np.ndarray, refs: Mapping[str, np.ndarray]) -> np.ndarray:
    if isinstance(e, Leaf):
        return values[..., e.index]
    if isinstance(e, Ref):
        return refs[e.name]
    if isinstance(e, Mul):
        return _evaluate(e.left, values, refs) * _evaluate(e.right, values, refs)
    total = _evaluate(e.terms[0], values, refs)
    for t in e.terms[1:]:
        total = total + _evaluate(t, values, refs)
    return total


def _format(e: Expr, position: str, symbols: Sequence[str]) -> str:
    if isinstance(e, Leaf):
        return symbols[e.index]
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, Mul):
        text = f"{_format(e.left, 'left', symbols)}*{_format(e.right, 'right', symbols)}"
        return f"({text})" if position == "right" else text
    text = " + ".join(_format(t, "term", symbols) for t in e.terms)
    return text if position == "top" else f"({text})"


# ----------------------------------------------------------------------------- schedule -> expressions
def to_expressions(schedule: Any, graph: Any = None, *, names: Names = None) -> ExpressionSet:
    """The algebraic expressions a schedule computes, with reference variables.

    Every slot *value* (a slot changes value at each absorption or merge) is a
    node of a DAG: an edge partial, a product ``l * r`` (a fill-in, or the
    product an absorption adds), or a sum (absorption ``t += l*r``: ``t``'s
    previous value ``+ l*r``; merge ``t += s``).  A computed value used more
    than once — by several later ops, or by an op and the result — is named by
    a reference variable ``r1, r2, …`` (numbered in the order the schedule
    computes them) and defined once; every other value is inlined in its one
    user, and sums inlined into sums are flattened.  So the set is exactly the
    factored form the elimination computes (paper 003 §4, Eq. 4.5): its
    ``mults`` and ``adds`` equal the schedule's.  A computed value nothing
    uses (possible only in hand-made schedules) is still defined as a
    reference, so that its cost is counted.

    Parameters
    ----------
    schedule : Schedule or Plan
        Any mode; a :class:`~jacacc.api.Plan` contributes its schedule and graph.
    graph : CompGraph, optional
        Attached for :meth:`ExpressionSet.evaluate` without arguments; must
        have the schedule's edges, inputs and outputs.
    names : callable (u, v) -> str, mapping, or None
        Edge symbols; default :func:`default_symbol` (``d[v,u]``), or
        :func:`paper_symbol` (``v_u``).

    Returns
    -------
    ExpressionSet

    Raises
    ------
    ExpressionError
        If an op reads a slot that holds no value yet, or ``graph`` does not match.

    Examples
    --------
    >>> from jacacc import optimize
    >>> from jacacc.problems.paper003 import fig4_1b
    >>> ex = to_expressions(optimize(fig4_1b(), method="markowitz"), names=paper_symbol)
    >>> print(ex)  # paper 003 Eq. 4.4 with the reference variable r1 = s
    r1 = f_b*b_v + f_a*a_v
    J[f,x] = (f_b*b_q + r1*v_q)*q_x + (f_a*a_p + r1*v_p)*p_x
    >>> ex.mults, ex.adds, ex.fmas
    (8, 4, 8)
    """
    if not isinstance(schedule, Schedule) and isinstance(getattr(schedule, "schedule", None), Schedule):
        graph = schedule.graph if graph is None else graph
        schedule = schedule.schedule
    if not isinstance(schedule, Schedule):
        raise ExpressionError(f"expected a Schedule or a Plan, got {type(schedule).__name__}")
    g = None if graph is None else as_graph(graph)
    if g is not None and (g.edges, g.inputs, g.outputs) != (
        schedule.edges,
        schedule.inputs,
        schedule.outputs,
    ):
        raise ExpressionError("the graph's edges, inputs or outputs differ from the schedule's")

    # pass 1: the value DAG.  kind[v] in {"leaf", "mul", "sum"}; args[v] = (edge index,) or (a, b)
    kind: list[str] = []
    args: list[tuple[int, ...]] = []
    uses: list[int] = []

    def new(k: str, *a: int) -> int:
        kind.append(k)
        args.append(a)
        uses.append(0)
        if k != "leaf":
            for x in a:
                uses[x] += 1
        return len(kind) - 1

    slot: list[int | None] = [None] * schedule.n_slots
    for i in range(len(schedule.edges)):
        slot[i] = new("leaf", i)

    def read(s: int, pos: int | None) -> int:
        if not 0 <= s < len(slot) or slot[s] is None:
            who = "the result" if pos is None else f"op #{pos}"
            raise ExpressionError(f"{who} reads slot {s}, which holds no value at that point")
        return slot[s]  # type: ignore[return-value]

    for pos, op in enumerate(schedule.ops):
        if isinstance(op, Add):
            slot[op.target] = new("sum", read(op.target, pos), read(op.source, pos))
        elif isinstance(op, SplitAdd):
            first, second = read(op.first, pos), read(op.second, pos)
            if not 0 <= op.target < len(slot):
                raise ExpressionError(f"op #{pos} writes slot {op.target}, outside the schedule's slots")
            slot[op.target] = new("sum", first, second)
        elif isinstance(op, Op) and op.accumulate:
            old = read(op.target, pos)
            product = new("mul", read(op.left, pos), read(op.right, pos))
            slot[op.target] = new("sum", old, product)
        elif isinstance(op, Op):
            left, right = read(op.left, pos), read(op.right, pos)
            if not 0 <= op.target < len(slot):
                raise ExpressionError(f"op #{pos} writes slot {op.target}, outside the schedule's slots")
            slot[op.target] = new("mul", left, right)
        else:
            raise ExpressionError(f"op #{pos} is a {type(op).__name__}, not an Op, Add or SplitAdd")
    result_values = {key: read(s, None) for key, s in schedule.result.items()}
    for v in result_values.values():
        uses[v] += 1

    # pass 2: expression trees; a non-leaf value used != 1 times is a reference
    ref_name: dict[int, str] = {}
    for v in range(len(kind)):
        if kind[v] != "leaf" and uses[v] != 1:
            ref_name[v] = f"r{len(ref_name) + 1}"

    def expr(v: int) -> Expr:
        if kind[v] == "leaf":
            return Leaf(args[v][0])
        if v in ref_name:
            return Ref(ref_name[v])
        return build(v)

    def build(v: int) -> Expr:
        if kind[v] == "mul":
            return Mul(expr(args[v][0]), expr(args[v][1]))
        # walk down a chain of absorptions into one slot iteratively (it can be long)
        chain = [args[v][1]]
        cur = args[v][0]
        while kind[cur] == "sum" and cur not in ref_name:
            chain.append(args[cur][1])
            cur = args[cur][0]
        chain.append(cur)
        terms: list[Expr] = []
        for t in reversed(chain):
            e = expr(t)
            terms.extend(e.terms if isinstance(e, Sum) else (e,))
        return Sum(tuple(terms))

    references = {ref_name[v]: build(v) for v in sorted(ref_name)}
    entries = {key: expr(v) for key, v in result_values.items()}
    symbols, _ = _symbols(schedule.edges, names)
    return ExpressionSet(
        schedule.inputs,
        schedule.outputs,
        schedule.edges,
        references,
        entries,
        symbols=symbols,
        graph=g,
        names=names,
    )


# ----------------------------------------------------------------------------- Bauer's formula, unfactored
def expand_paths(graph: Any, *, names: Names = None, max_paths: int = 100_000) -> ExpressionSet:
    """Bauer's formula written out: each entry the sum over all paths of the product of partials.

    The unfactored form paper 003 §4 compares against (Fig. 4.1 (c), Eq. 4.2,
    "lists all paths from root to terminal").  A path of ``k`` edges is the
    left-associated product of its partials, later factor first — ``k - 1``
    multiplications — and an entry with ``p`` paths has ``p - 1`` additions;
    there are no reference variables.  Exponential in general.

    Parameters
    ----------
    graph : CompGraph or anything :func:`~jacacc.graph.as_graph` accepts
    names : edge symbols, see :func:`to_expressions`
    max_paths : int
        Refuse graphs with more input→output paths than this.

    Returns
    -------
    ExpressionSet

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig4_1a
    >>> ex = expand_paths(fig4_1a(), names=paper_symbol)
    >>> print(ex)
    J[f,x] = f_a*a_c*c_d*d_x + f_a*a_c*c_e*e_x + f_b*b_c*c_d*d_x + f_b*b_c*c_e*e_x
    >>> ex.mults, ex.adds, ex.fmas
    (12, 3, 12)
    """
    g = as_graph(graph)
    index = {e: i for i, e in enumerate(g.edges)}
    inputs = set(g.inputs)
    pred = {v: g.predecessors(v) for v in g.topological_order}
    terms: dict[Key, list[Expr]] = {}
    n_paths = 0
    for y in g.outputs:
        # depth-first over the paths into y, from the root as paper 003 lists them; each stack
        # item carries the product of the partials from y down to the node (later factor first)
        stack: list[tuple[Node, Expr | None]] = [(y, None)]
        while stack:
            node, product = stack.pop()
            if node in inputs:
                n_paths += 1
                if n_paths > max_paths:
                    raise ExpressionError(f"the graph has more than max_paths={max_paths} input→output paths")
                terms.setdefault((y, node), []).append(product)  # type: ignore[arg-type]
                continue
            for p in reversed(pred[node]):
                leaf = Leaf(index[(p, node)])
                stack.append((p, leaf if product is None else Mul(product, leaf)))
    entries = {k: t[0] if len(t) == 1 else Sum(tuple(t)) for k, t in terms.items()}
    return ExpressionSet(g.inputs, g.outputs, g.edges, {}, entries, graph=g, names=names)


# ----------------------------------------------------------------------------- expressions -> schedule
def _spans(ex: ExpressionSet, check: bool) -> Callable[[Expr], Edge]:
    """The path piece ``(i, k)`` each expression is a partial of: a product ``left * right`` of
    ``∂k/∂j`` and ``∂j/∂i`` is ``∂k/∂i``; a sum adds partials of one piece."""
    ref_span: dict[str, Edge] = {}
    memo: dict[int, Edge] = {}

    def span(e: Expr) -> Edge:
        if isinstance(e, Leaf):
            return ex.edges[e.index]
        if isinstance(e, Ref):
            return ref_span[e.name]
        if id(e) in memo:
            return memo[id(e)]
        if isinstance(e, Mul):
            left, right = span(e.left), span(e.right)
            if check and right[1] != left[0]:
                raise ExpressionError(
                    f"{ex.format(e)!r} multiplies ∂{left[1]}/∂{left[0]} by ∂{right[1]}/∂{right[0]}: "
                    "not a chain-rule product (the later factor goes on the left)"
                )
            result = (right[0], left[1])
        else:
            spans = [span(t) for t in e.terms]
            if check and any(s != spans[0] for s in spans):
                raise ExpressionError(f"{ex.format(e)!r} adds partials of different pairs of variables")
            result = spans[0]
        memo[id(e)] = result
        return result

    for name, e in ex.references.items():
        ref_span[name] = span(e)
    if check:
        for (o, i), e in ex.entries.items():
            s = span(e)
            if s != (i, o):
                raise ExpressionError(
                    f"{ex.label((o, i))} = {ex.format(e)} is ∂{s[1]}/∂{s[0]}, not ∂{o}/∂{i}"
                )
    return span


class _SumState:
    """A sum being accumulated: its slot (once it has one) and the ops still to emit."""

    __slots__ = ("expr", "slot", "left", "has_product", "terms")

    def __init__(self, expr: Sum, terms: list[Any]) -> None:
        self.expr = expr
        self.slot: int | None = None
        self.left = len(expr.terms)  # ops still to emit (the accumulator term of a product-free sum counts)
        self.has_product = any(isinstance(t, Mul) for t in expr.terms)
        self.terms = terms  # per term: its value id, or None for a product term


class _PendingOp:
    """One op to emit: a product (``mul``) or the addition of a sum's term (``add``)."""

    __slots__ = ("kind", "expr", "reads", "sum", "position", "value", "done")

    def __init__(
        self, kind: str, expr: Expr, reads: tuple, sum_state: _SumState | None, position: int, value: Any
    ) -> None:
        self.kind = kind
        self.expr = expr
        self.reads = reads
        self.sum = sum_state
        self.position = position
        self.value = value  # the value id a standalone product defines
        self.done = False


def from_expressions(expr_set: ExpressionSet, graph: Any = None, *, check: bool = True) -> Schedule:
    """A schedule computing exactly the expression set (paper 003 §4: a DAG of references is a
    computational schedule).

    Every ``*`` becomes one :class:`~jacacc.schedule.Op`: a product on its
    own is a fill-in (a new slot); the products of a sum are a fill-in for the
    first one emitted followed by absorptions ``t += l*r`` for the others; each
    term of a sum that is not a product is added by an
    :class:`~jacacc.schedule.Add`.  A sum without any product has no fresh
    slot to accumulate in (the schedule has no copy operation), so it
    accumulates in place into one of its terms' slots: a sum computed for it
    alone, or an edge partial or reference variable once every other use of
    that value has been emitted.  Ops are emitted in the order of the
    definitions and entries, operands first; an op that must wait (for such a
    slot) is emitted as soon as it can.  So ``mults`` and ``adds`` equal the
    expression set's.

    Parameters
    ----------
    expr_set : ExpressionSet
    graph : CompGraph, optional
        When given, must have the set's edges, inputs and outputs.
    check : bool, default True
        Require a chain-rule computation: every product multiplies ∂k/∂j (left)
        by ∂j/∂i (right), every sum adds partials of one pair of variables,
        and entry ``J[y,x]`` is a partial ∂y/∂x — the noncommutativity
        restriction paper 003 §4 puts on expressions converted from graphs.

    Returns
    -------
    Schedule
        ``mode="expressions"``; a new slot is labelled with the path piece
        whose partial it holds.

    Raises
    ------
    ExpressionError
        If ``check`` fails, the graph does not match, or a sum without
        products could only be formed by copying a value that is used again.

    Examples
    --------
    >>> from jacacc.graph import CompGraph
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "y", 3.0), ("x", "y", 5.0)])
    >>> s = from_expressions(parse_expressions("J[y,x] = d[y,a]*d[a,x] + d[y,x]", g))
    >>> print(s.listing())
    s3 = s1 * s0    # (x → y) = (a → y) * (x → a)
    s3 += s2        # (x → y) += (x → y)
    >>> s.evaluate(g.partial_array()).item()
    11.0
    """
    ex = expr_set
    if not isinstance(ex, ExpressionSet):
        raise ExpressionError(f"expected an ExpressionSet, got {type(ex).__name__}")
    if graph is not None:
        g = as_graph(graph)
        if (g.edges, g.inputs, g.outputs) != (ex.edges, ex.inputs, ex.outputs):
            raise ExpressionError("the graph's edges, inputs or outputs differ from the expression set's")
    span = _spans(ex, check)

    # values: ("leaf", i) is always ready in slot i; ("node", n) once its ops are emitted
    slot_of: dict[Any, int] = {("leaf", i): i for i in range(len(ex.edges))}
    outstanding: dict[Any, int] = {}  # reads of each value not yet emitted (+1 forever if an entry)
    ref_value: dict[str, Any] = {}
    pending: list[_PendingOp] = []
    counter = [0]

    def read(value: Any) -> Any:
        outstanding[value] = outstanding.get(value, 0) + 1
        return value

    def value_of(e: Expr) -> Any:
        """Register the ops computing ``e`` (operands first) and return its value id."""
        if isinstance(e, Leaf):
            return ("leaf", e.index)
        if isinstance(e, Ref):
            return ref_value[e.name]
        counter[0] += 1
        vid = ("node", counter[0])
        if isinstance(e, Mul):
            reads = (read(value_of(e.left)), read(value_of(e.right)))
            pending.append(_PendingOp("mul", e, reads, None, 0, vid))
            return vid
        state = _SumState(e, [])
        ops = []
        for pos, t in enumerate(e.terms):
            if isinstance(t, Mul):
                state.terms.append(None)
                reads = (read(value_of(t.left)), read(value_of(t.right)))
                ops.append(_PendingOp("mul", t, reads, state, pos, None))
            else:
                term = read(value_of(t))
                state.terms.append(term)
                ops.append(_PendingOp("add", t, (term,), state, pos, None))
        pending.extend(ops)
        sums[vid] = state
        return vid

    sums: dict[Any, _SumState] = {}
    for name, e in ex.references.items():
        ref_value[name] = value_of(e)
    entry_value = {key: value_of(e) for key, e in ex.entries.items()}
    for value in entry_value.values():
        read(value)  # held: an entry's slot is never accumulated into

    slot_edges: list[Edge] = list(ex.edges)
    ops: list[Op | Add] = []
    state_of_op: dict[int, list[_PendingOp]] = {}
    for op in pending:
        if op.sum is not None:
            state_of_op.setdefault(id(op.sum), []).append(op)
    value_of_state = {id(state): vid for vid, state in sums.items()}

    def ready(value: Any) -> bool:
        return value in slot_of

    def fresh(e: Expr) -> int:
        slot_edges.append(span(e))
        return len(slot_edges) - 1

    def finish(op: _PendingOp) -> None:
        op.done = True
        for value in op.reads:
            outstanding[value] -= 1
        state = op.sum
        if state is not None:
            state.left -= 1
            if state.left == 0:
                slot_of[value_of_state[id(state)]] = state.slot  # type: ignore[assignment]

    def try_emit(op: _PendingOp) -> bool:
        if not all(ready(v) for v in op.reads):
            return False
        state = op.sum
        if op.kind == "mul":
            left, right = (slot_of[v] for v in op.reads)
            if state is None:
                slot_of[op.value] = target = fresh(op.expr)
                ops.append(Op(target, left, right, accumulate=False))
            elif state.slot is None:
                state.slot = fresh(state.expr)
                ops.append(Op(state.slot, left, right, accumulate=False))
            else:
                ops.append(Op(state.slot, left, right, accumulate=True))
            finish(op)
            return True
        assert state is not None
        source = op.reads[0]
        if state.slot is None:
            if state.has_product:
                return False  # the first product of the sum creates its slot
            # a product-free sum: accumulate in place into another term's value, when nothing else reads it
            for other in state_of_op[id(state)]:
                acc = other.reads[0]
                if other is op or other.done or not ready(acc):
                    continue
                if outstanding[acc] - 1 - (acc == source) == 0:
                    state.slot = slot_of[acc]
                    finish(other)
                    break
            else:
                return False
        ops.append(Add(state.slot, slot_of[source]))
        finish(op)
        return True

    while pending:
        rest = []
        for op in pending:
            if not op.done and not try_emit(op):
                rest.append(op)
        rest = [op for op in rest if not op.done]
        if len(rest) == len(pending):
            op = rest[0]
            raise ExpressionError(
                f"cannot schedule the sum {ex.format(op.sum.expr if op.sum else op.expr)} without copying a "
                "value: each of its terms is used again later (name the sum by a reference variable, or "
                "reorder the uses)"
            )
        pending = rest
    result = {key: slot_of[value] for key, value in entry_value.items()}
    return Schedule(ex.inputs, ex.outputs, ex.edges, slot_edges, ops, result, mode="expressions")


# ----------------------------------------------------------------------------- parsing
def parse_expressions(text: str, graph: Any, *, names: Names = None) -> ExpressionSet:
    """Read the printed form of an :class:`ExpressionSet` back.

    Grammar (one definition per line; blank lines and lines starting with
    ``#`` are skipped)::

        line    := name "=" sum  |  "J[" output "," input "]" "=" sum
        sum     := product ("+" product)*
        product := atom ("*" atom)*          (left-associative)
        atom    := symbol | name | "(" sum ")"

    ``symbol`` is an edge symbol (the same ``names`` as when printing);
    ``name`` a reference variable (an identifier, conventionally ``r1``…),
    which must be defined on an earlier line.  Parentheses are kept where they
    change the tree: ``a*(b*c)`` is a different product from ``a*b*c``, and a
    parenthesised sum inside a sum stays a nested sum.

    Parameters
    ----------
    text : str
    graph : CompGraph or anything :func:`~jacacc.graph.as_graph` accepts
    names : edge symbols, see :func:`to_expressions`

    Returns
    -------
    ExpressionSet

    Raises
    ------
    ExpressionError
        On a syntax error, an unknown symbol, or a reference used before its definition.

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig4_1a
    >>> ex = parse_expressions("r1 = f_a*a_c + f_b*b_c\\nJ[f,x] = r1*(c_d*d_x + c_e*e_x)", fig4_1a(),
    ...                        names=paper_symbol)
    >>> ex.references["r1"] == Sum((Mul(Leaf(0), Leaf(2)), Mul(Leaf(1), Leaf(3))))
    True
    >>> ex.fmas, ex.evaluate().item()
    (5, 13454.0)
    """
    g = as_graph(graph)
    probe = ExpressionSet(g.inputs, g.outputs, g.edges, {}, {}, names=names)
    symbols = {s: i for i, s in enumerate(probe.symbols)}
    lengths = sorted({len(s) for s in symbols}, reverse=True)
    labels = {probe.label((o, i)): (o, i) for o in g.outputs for i in g.inputs}
    references: dict[str, Expr] = {}
    entries: dict[Key, Expr] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        lhs, rhs = _split_definition(line, labels, lineno)
        tokens = _tokenize(rhs, symbols, lengths, lineno)
        e = _Parser(tokens, references, lineno, rhs).parse()
        if lhs in labels:
            key = labels[lhs]
            if key in entries:
                raise ExpressionError(f"line {lineno}: {lhs} is defined twice")
            entries[key] = e
        else:
            if lhs in references:
                raise ExpressionError(f"line {lineno}: reference {lhs} is defined twice")
            if lhs in symbols:
                raise ExpressionError(f"line {lineno}: {lhs} is an edge symbol, not a reference name")
            references[lhs] = e
    return ExpressionSet(g.inputs, g.outputs, g.edges, references, entries, graph=g, names=names)


def _split_definition(line: str, labels: Mapping[str, Key], lineno: int) -> tuple[str, str]:
    match = re.match(r"([A-Za-z_][A-Za-z_0-9]*)\s*=(?!=)", line)
    if match and not line.startswith("J["):
        return match.group(1), line[match.end() :]
    for pos in (m.start() for m in re.finditer("=", line)):
        lhs = line[:pos].rstrip()
        if lhs in labels:
            return lhs, line[pos + 1 :]
    raise ExpressionError(
        f"line {lineno}: expected 'name = …' or 'J[output,input] = …' for an (output, input) pair "
        f"of the graph, got {line!r}"
    )


def _tokenize(
    text: str, symbols: Mapping[str, int], lengths: Sequence[int], lineno: int
) -> list[tuple[str, Any]]:
    """Tokens ``("op", c)``, ``("leaf", index)``, ``("name", str)``; the longest match wins."""
    tokens: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        symbol = next((text[pos : pos + n] for n in lengths if text[pos : pos + n] in symbols), None)
        name = _REF_NAME.match(text, pos)
        name_len = name.end() - pos if name else 0
        if symbol is not None and len(symbol) >= name_len:
            tokens.append(("leaf", symbols[symbol]))
            pos += len(symbol)
        elif name is not None:
            tokens.append(("name", name.group()))
            pos = name.end()
        elif text[pos] in "()+*":
            tokens.append(("op", text[pos]))
            pos += 1
        else:
            raise ExpressionError(f"line {lineno}: unknown symbol at {text[pos : pos + 20]!r}")
    return tokens


class _Parser:
    """Recursive descent over the tokens of one right-hand side."""

    def __init__(self, tokens: list[tuple[str, Any]], references: Mapping[str, Expr], lineno: int, text: str):
        self.tokens = tokens
        self.pos = 0
        self.references = references
        self.lineno = lineno
        self.text = text

    def error(self, what: str) -> ExpressionError:
        return ExpressionError(f"line {self.lineno}: {what} in {self.text.strip()!r}")

    def peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def parse(self) -> Expr:
        e = self.sum()
        if self.peek() is not None:
            raise self.error(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return e

    def sum(self) -> Expr:
        terms = [self.product()]
        while self.peek() == ("op", "+"):
            self.pos += 1
            terms.append(self.product())
        return terms[0] if len(terms) == 1 else Sum(tuple(terms))

    def product(self) -> Expr:
        e = self.atom()
        while self.peek() == ("op", "*"):
            self.pos += 1
            e = Mul(e, self.atom())
        return e

    def atom(self) -> Expr:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end")
        self.pos += 1
        kind, value = token
        if kind == "leaf":
            return Leaf(value)
        if kind == "name":
            if value not in self.references:
                raise self.error(f"reference {value!r} is not defined on an earlier line")
            return Ref(value)
        if value == "(":
            e = self.sum()
            if self.peek() != ("op", ")"):
                raise self.error("missing ')'")
            self.pos += 1
            return e
        raise self.error(f"unexpected {value!r}")
