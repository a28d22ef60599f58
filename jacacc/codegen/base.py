"""Lowering a traced graph and a Schedule to one straight-line program, and the printer base.

:func:`lower` turns a traced :class:`~jacacc.graph.CompGraph` (nodes carry ``op``
and ``args``, edges symbolic partials) and a :class:`~jacacc.schedule.Schedule`
into a :class:`JacobianProgram`: a backend-neutral list of single assignments
``name = expr`` (each ``expr`` an :class:`~jacacc.partials.Expr` over earlier names)
that computes, for *one* point,

1. the value of every vertex (the primal program, in topological order),
2. each edge's local partial, just before the schedule first reads it
   (identical partial formulas are computed once),
3. the schedule's multiplications and additions,

followed by the output values and the Jacobian entries.  The backends only
decide how to print it (a vectorized NumPy function, a Numba loop over points,
a CUDA thread per point): *what* is computed is decided here, once.

Structural constants
--------------------
Lowering propagates constants through the schedule.  Every slot is a constant
(an edge whose partial is a number, or a product/sum of constants) or a signed
name ``±t``.  A product with a factor that is structurally ``0`` or ``±1`` is not
emitted (``t * 1`` is ``t``, ``t * -1`` is ``-t`` with the sign kept symbolic and
folded into a later addition or the final store), a product of two other
constants is folded; both are counted (:attr:`JacobianProgram.skipped`,
:attr:`JacobianProgram.folded`) beside the schedule's ``mults``, never instead of it.
Signs never cost an instruction: ``a + (-b)`` is printed ``a - b``, ``(-a)*(-b)``
is ``a*b``, a negative constant factor is folded into the constant.

Examples
--------
>>> import numpy as np, jacacc
>>> f = jacacc.trace(lambda x: [x[0] * np.sin(x[1]) - x[1]], 2)
>>> plan = jacacc.optimize(f.graph, method="markowitz")
>>> prog = lower(f.graph, plan.schedule)
>>> prog.mults, prog.skipped, prog.emitted_mults
(3, 2, 1)
>>> print(prog.listing())
v1 = sin(x1)
v2 = x0*v1
y0 = v2 - x1
d1 = cos(x1)
t1 = x0*d1  # (x1 → v2) = (v1 → v2) * (x1 → v1)
t2 = t1 - 1  # (x1 → y0) += (v2 → y0) * (x1 → v2)
<BLANKLINE>
values: y0
J[0, 0] = v1
J[0, 1] = t2
"""

from __future__ import annotations

import hashlib
import keyword
import linecache
import math
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from jacacc.errors import GraphError, RegistryError, UnsupportedOperationError
from jacacc.graph import CompGraph, gc_paused, real_array
from jacacc.kernels.tables import InstructionTable, results_of
from jacacc.partials import FUNCTIONS, Apply, Const, Expr, ExprPrinter, Var, parse_expr
from jacacc.schedule import Add, Op, Schedule, SplitAdd

__all__ = ["TABLE_THRESHOLD", "TIERS", "Backend", "CodePrinter", "JacobianProgram", "Statement", "fingerprint", "lower", "register_source"]

Node = Hashable

#: operations counted as one flop in the arithmetic estimate (hardware instructions); every
#: other function (exp, sin, log, pow with a non-integer exponent, ...) is one libm *call*
ARITHMETIC = frozenset({
    "add", "sub", "mul", "div", "neg", "sqrt", "abs", "sign", "square", "reciprocal",
    "maximum", "minimum", "fmax", "fmin", "ge", "gt", "le", "lt", "eq", "ne",
})


@dataclass(frozen=True)
class Statement:
    """One single assignment ``name = expr`` of a :class:`JacobianProgram`.

    Attributes
    ----------
    name : str
        A new local variable (never assigned twice).
    expr : Expr
        Over names assigned before (or the inputs).
    phase : str
        ``"primal"`` (a vertex value), ``"partial"`` (a local partial) or
        ``"accumulate"`` (a schedule product or sum).
    comment : str
        What the statement computes, in graph terms (for accumulation steps).
    """

    name: str
    expr: Expr
    phase: str
    comment: str = ""


@dataclass
class JacobianProgram:
    """A straight-line program for one point: inputs → values and Jacobian.

    Attributes
    ----------
    inputs : list of str
        Local names of the inputs, in column order (``x0 …``).
    statements : list of Statement
        In execution order, dead ones removed.
    values : list of Expr
        One per output (row order): a name or a constant; ``None`` where the
        graph carries no primal program (a numeric LCG), whose values are NaN.
    jacobian : dict (row, col) -> Expr
        Structurally nonzero entries: a name, ``-name`` or a constant.
    mults, adds : int
        The schedule's counts (``Schedule.mults``, ``Schedule.adds``).
    skipped : int
        Schedule multiplications not emitted because a factor is a structural
        ``0`` or ``±1``.
    folded : int
        Schedule multiplications of two other constants, folded at compile time.
    emitted_mults, emitted_adds : int
        Schedule multiplications and additions that remain in the code.
    """

    inputs: list[str]
    statements: list[Statement]
    values: list[Expr | None]
    jacobian: dict[tuple[int, int], Expr]
    n_outputs: int
    mults: int = 0
    adds: int = 0
    skipped: int = 0
    folded: int = 0
    emitted_mults: int = 0
    emitted_adds: int = 0
    fingerprint: str = ""
    _counts: dict[str, int] = field(default_factory=dict, repr=False)
    _table: Any = field(default=None, repr=False)

    @property
    def n_inputs(self) -> int:
        return len(self.inputs)

    def operation_counts(self) -> dict[str, int]:
        """Per point: ``flops`` (operations that are hardware instructions: ``+ - * /``,
        negation, ``sqrt``, ``abs``, comparisons, ``max``/``min``, small integer
        powers; primal, partials and schedule together), ``calls`` (every other
        function: ``exp``, ``sin``, ``log``, general ``**`` ...), ``loads``
        (inputs) and ``stores`` (values and Jacobian entries, structural zeros
        included)."""
        if not self._counts:
            flops = calls = 0
            stack = [s.expr for s in self.statements]
            while stack:
                e = stack.pop()
                if isinstance(e, Apply):
                    small_power = (e.fn == "pow" and isinstance(e.args[1], Const)
                                   and e.args[1].value in (-2.0, -1.0, 0.5, 2.0, 3.0))
                    if e.fn in ARITHMETIC or small_power:
                        flops += 1
                    else:
                        calls += 1
                    stack.extend(e.args)
            self._counts = {
                "flops": flops,
                "calls": calls,
                "loads": self.n_inputs,
                "stores": self.n_outputs * (1 + self.n_inputs),
            }
        return dict(self._counts)

    def table(self) -> InstructionTable:
        """The program as an :class:`~jacacc.kernels.tables.InstructionTable` (built once): the
        ``m`` values, then the ``m·n`` Jacobian entries row by row, as its results."""
        if self._table is None:
            results = results_of(self.values, self.jacobian, self.n_inputs)
            with gc_paused():
                self._table = InstructionTable.build(self.inputs, [(s.name, s.expr) for s in self.statements],
                                                     results)
        return self._table

    def listing(self) -> str:
        """The program as plain text (the printers' common ancestor)."""
        printer = ExprPrinter()
        lines = []
        for s in self.statements:
            text = f"{s.name} = {printer.doprint(s.expr)}"
            lines.append(f"{text}  # {s.comment}" if s.comment else text)
        lines.append("")
        lines.append("values: " + ", ".join("nan" if v is None else printer.doprint(v) for v in self.values))
        for (r, c), e in sorted(self.jacobian.items()):
            lines.append(f"J[{r}, {c}] = {printer.doprint(e)}")
        return "\n".join(lines)


# =========================================================================== lowering
class _Slot:
    """The value of a schedule slot during lowering: a constant or ``sign * name``;
    an edge slot starts *pending* (its partial not yet emitted)."""

    __slots__ = ("const", "sign", "name", "pending")

    def __init__(self, const: float | None = None, sign: int = 1, name: str | None = None,
                 pending: Expr | None = None) -> None:
        self.const = const
        self.sign = sign
        self.name = name
        self.pending = pending


def _is_unit_or_zero(value: float) -> bool:
    return value in (0.0, 1.0, -1.0)


class _Lowering:
    def __init__(self, graph: CompGraph, schedule: Schedule) -> None:
        self.graph = graph
        self.schedule = schedule
        self.statements: list[Statement] = []
        self.names: dict[Node, str] = {}
        self.partial_names: dict[Expr, str] = {}
        self.counter = {"d": 0, "t": 0}
        self.skipped = self.folded = self.emitted_mults = self.emitted_adds = 0

    # ------------------------------------------------------------------ names
    def new(self, prefix: str) -> str:
        self.counter[prefix] += 1
        return f"{prefix}{self.counter[prefix]}"

    def local_names(self) -> None:
        used: set[str] = set()
        pattern = re.compile(r"^[xvy]\d+$")  # the tracer's names are kept: x0, v12, y3
        order = list(self.graph.inputs) + [n for n in self.graph.topological_order if n not in self.graph.inputs]
        for k, node in enumerate(order):
            name = node if isinstance(node, str) and pattern.match(node) else f"n{k}"
            if name in used or keyword.iskeyword(name):
                name = f"n{k}"
            used.add(name)
            self.names[node] = name

    # ------------------------------------------------------------------ primal
    def primal(self) -> bool:
        """Emit the vertex values; False when the graph has no primal program."""
        nodes = self.graph.digraph.nodes
        # inputs too: the loop below reads every vertex's op, and a graph of inputs only
        # (no outputs, say) built by hand has no primal program either
        if any("op" not in nodes[n] for n in self.graph.topological_order):
            return False
        # common subexpressions: a tracer records ``exp(x0)`` once per call in the user's code;
        # the same operation of the same operands is computed once and its vertices share the name
        # (every operation is a pure function, so the values are bitwise the same)
        computed: dict[Apply, str] = {}
        for node in self.graph.topological_order:
            op, args = nodes[node]["op"], nodes[node].get("args", ())
            if op == "input":
                continue
            if op == "const":
                continue  # a constant output: its value is printed at the store
            operands = tuple(Var(self.names[a]) if not isinstance(a, float) else Const(a) for a in args)
            if op in ("copy", "pos", "stop_gradient"):  # the operand's value under another name
                self.names[node] = operands[0].name if isinstance(operands[0], Var) else self.names[node]
                continue
            if op == "tangent_seed":  # the value 0 whatever the operand (jacacc.rules)
                self.statements.append(Statement(self.names[node], Const(0.0), "primal"))
                continue
            spec = FUNCTIONS.get(op)
            if spec is None or spec.arity != len(operands):
                raise UnsupportedOperationError(
                    f"operation {op!r} (vertex {node!r}) has no code-generation rule: only operations listed "
                    "in jacacc.partials.FUNCTIONS can be compiled"
                )
            expr = Apply(op, operands)
            if expr in computed:
                self.names[node] = computed[expr]
                continue
            computed[expr] = self.names[node]
            self.statements.append(Statement(self.names[node], expr, "primal"))
        return True

    def value_of(self, node: Node, have_primal: bool) -> Expr | None:
        attrs = self.graph.digraph.nodes[node]
        if attrs.get("op") == "const":
            return Const(float(attrs["args"][0]))
        return Var(self.names[node]) if have_primal else None

    # ------------------------------------------------------------------ slots
    def edge_slot(self, u: Node, v: Node, have_primal: bool) -> _Slot:
        p = self.graph.partial(u, v)
        if isinstance(p, str) and have_primal:  # an expression read from JSON, its names checked when loaded
            p = parse_expr(p)
        if isinstance(p, Expr):
            p = p.rename(self.names) if p.variables else p
        elif isinstance(p, (int, float, np.number)) and not isinstance(p, bool):
            p = Const(float(p))
        elif not have_primal:
            raise GraphError(
                f"the partial of edge ({u!r} → {v!r}) is {p!r}, not a number, and the graph has no primal "
                "program (node attributes op/args): compile a traced function (jacacc.trace) or a numeric graph"
            )
        else:
            raise GraphError(f"the partial of edge ({u!r} → {v!r}) is neither a number nor an Expr: {p!r}")
        if isinstance(p, Const):
            return _Slot(const=p.value)
        if not have_primal:
            raise GraphError(
                f"the partial of edge ({u!r} → {v!r}) is the formula {p} but the graph has no primal program "
                "(node attributes op/args): compile a traced function (jacacc.trace) or a numeric graph"
            )
        sign = 1
        if isinstance(p, Apply) and p.fn == "neg":
            sign, p = -1, p.args[0]
        if isinstance(p, Var):
            return _Slot(sign=sign, name=p.name)
        return _Slot(sign=sign, pending=p)

    def read(self, slot: _Slot) -> _Slot:
        if slot.pending is not None:
            name = self.partial_names.get(slot.pending)
            if name is None:
                name = self.new("d")
                self.partial_names[slot.pending] = name
                self.statements.append(Statement(name, slot.pending, "partial"))
            slot.name, slot.pending = name, None
        return slot

    def emit(self, expr: Expr, comment: str) -> str:
        name = self.new("t")
        self.statements.append(Statement(name, expr, "accumulate", comment))
        return name

    def product(self, a: _Slot, b: _Slot, comment: str) -> _Slot:
        a, b = self.read(a), self.read(b)
        if a.const is not None and b.const is not None:
            if _is_unit_or_zero(a.const) or _is_unit_or_zero(b.const):
                self.skipped += 1
            else:
                self.folded += 1
            return _Slot(const=a.const * b.const)
        if b.const is not None:
            a, b = b, a
        if a.const is not None:  # constant * name
            if _is_unit_or_zero(a.const):
                self.skipped += 1
                return _Slot(const=0.0) if a.const == 0.0 else _Slot(sign=int(a.const) * b.sign, name=b.name)
            self.emitted_mults += 1
            return _Slot(name=self.emit(Apply("mul", (Const(a.const * b.sign), Var(b.name))), comment))
        self.emitted_mults += 1
        return _Slot(sign=a.sign * b.sign, name=self.emit(Apply("mul", (Var(a.name), Var(b.name))), comment))

    def sum(self, a: _Slot, b: _Slot, comment: str) -> _Slot:
        a, b = self.read(a), self.read(b)
        if a.const is not None and b.const is not None:
            return _Slot(const=a.const + b.const)
        if b.const is not None:
            a, b = b, a
        if a.const is not None:  # constant + sign*name
            if a.const == 0.0:
                return b
            self.emitted_adds += 1
            if b.sign < 0:  # c - name
                return _Slot(name=self.emit(Apply("sub", (Const(a.const), Var(b.name))), comment))
            fn = "add" if a.const > 0 else "sub"  # name + c, name - |c|
            return _Slot(name=self.emit(Apply(fn, (Var(b.name), Const(abs(a.const)))), comment))
        self.emitted_adds += 1
        fn = "add" if a.sign == b.sign else "sub"
        return _Slot(sign=a.sign, name=self.emit(Apply(fn, (Var(a.name), Var(b.name))), comment))

    # ------------------------------------------------------------------ schedule
    def run(self) -> JacobianProgram:
        graph, schedule = self.graph, self.schedule
        if tuple(schedule.edges) != tuple(graph.edges):
            raise GraphError("the schedule was made for another graph (its edges differ from the graph's)")
        self.local_names()
        have_primal = self.primal()
        slots: list[_Slot | None] = [self.edge_slot(u, v, have_primal) for u, v in graph.edges]
        slots.extend([None] * (schedule.n_slots - len(slots)))
        labels = schedule.slot_edges

        def label(i: int) -> str:
            e = labels[i]
            return f"({e[0]} → {e[1]})"

        for op in schedule.ops:
            if isinstance(op, Op):
                comment = f"{label(op.target)} {'+=' if op.accumulate else '='} {label(op.left)} * {label(op.right)}"
                prod = self.product(slots[op.left], slots[op.right], comment)
                slots[op.target] = self.sum(slots[op.target], prod, comment) if op.accumulate else prod
            elif isinstance(op, Add):
                comment = f"{label(op.target)} += {label(op.source)}"
                slots[op.target] = self.sum(slots[op.target], slots[op.source], comment)
            elif isinstance(op, SplitAdd):
                comment = f"{label(op.target)} = {label(op.first)} + {label(op.second)}"
                slots[op.target] = self.sum(slots[op.first], slots[op.second], comment)
            else:  # pragma: no cover - the IR has three op types
                raise TypeError(f"unknown schedule op {op!r}")

        row = {o: r for r, o in enumerate(graph.outputs)}
        col = {i: c for c, i in enumerate(graph.inputs)}
        jacobian: dict[tuple[int, int], Expr] = {}
        for (o, i), s in schedule.result.items():
            slot = self.read(slots[s])
            if slot.const is not None:
                if slot.const != 0.0:
                    jacobian[row[o], col[i]] = Const(slot.const)
            else:
                e: Expr = Var(slot.name)
                jacobian[row[o], col[i]] = e if slot.sign > 0 else Apply("neg", (e,))
        values = [self.value_of(o, have_primal) for o in graph.outputs]
        statements = _dead_code(self.statements, values, jacobian)
        return JacobianProgram(
            inputs=[self.names[i] for i in graph.inputs],
            statements=statements,
            values=values,
            jacobian=jacobian,
            n_outputs=len(graph.outputs),
            mults=schedule.mults,
            adds=schedule.adds,
            skipped=self.skipped,
            folded=self.folded,
            emitted_mults=self.emitted_mults,
            emitted_adds=self.emitted_adds,
            fingerprint=fingerprint(graph, schedule),
        )


def _dead_code(statements: list[Statement], values: list[Expr | None], jacobian: Mapping) -> list[Statement]:
    live: set[str] = set()
    for e in [*values, *jacobian.values()]:
        if e is not None:
            live |= {str(v) for v in e.variables}
    kept = []
    for s in reversed(statements):
        if s.name in live:
            kept.append(s)
            live |= {str(v) for v in s.expr.variables}
    kept.reverse()
    return kept


def lower(graph: CompGraph, schedule: Schedule) -> JacobianProgram:
    """The straight-line :class:`JacobianProgram` of ``graph`` (traced, or numeric) and ``schedule``.

    Parameters
    ----------
    graph : CompGraph
        A traced graph (nodes with ``op``/``args``); a graph without them is
        accepted when every partial is a number (the Jacobian is then constant
        and the values unknown).
    schedule : Schedule
        Made for ``graph`` (same edges in the same order).

    Returns
    -------
    JacobianProgram

    Raises
    ------
    GraphError
        The schedule belongs to another graph, or a symbolic partial has no
        primal program to evaluate it.
    UnsupportedOperationError
        A vertex's operation has no expression form (a custom rule).

    Examples
    --------
    >>> import jacacc
    >>> f = jacacc.trace(lambda a, b: (a + b) * (a - b), 2)
    >>> prog = lower(f.graph, jacacc.optimize(f.graph, method="forward").schedule)
    >>> prog.mults, prog.skipped, prog.folded
    (4, 4, 0)
    """
    with gc_paused():  # hundreds of thousands of expressions and no garbage: see graph.gc_paused
        return _Lowering(graph, schedule).run()


def fingerprint(graph: CompGraph, schedule: Schedule | None = None) -> str:
    """A stable hash of the graph's program and partials (and the schedule's ops):
    the kernel cache's key.

    Examples
    --------
    >>> import jacacc
    >>> f = jacacc.trace(lambda a: a * a, 1)
    >>> fingerprint(f.graph) == fingerprint(jacacc.trace(lambda b: b * b, 1).graph)
    True
    """
    h = hashlib.sha256()
    nodes = graph.digraph.nodes
    h.update(repr((tuple(graph.inputs), tuple(graph.outputs))).encode())
    for n in graph.topological_order:
        h.update(repr((n, nodes[n].get("op"), nodes[n].get("args"))).encode())
    for u, v in graph.edges:
        h.update(repr((u, v, str(graph.partial(u, v)))).encode())
    if schedule is not None:
        h.update(repr((schedule.ops, sorted(schedule.result.items(), key=repr))).encode())
    return h.hexdigest()[:20]


def register_source(source: str, tag: str) -> str:
    """Register generated ``source`` with :mod:`linecache` under a made-up file
    name, so tracebacks and debuggers show the generated lines; returns the name.

    Examples
    --------
    >>> name = register_source("x = 1\\n", "demo")
    >>> import linecache; linecache.getline(name, 1)
    'x = 1\\n'
    """
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    filename = f"<jacacc-kernel-{tag}-{digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return filename


# =========================================================================== printers
class CodePrinter(ExprPrinter):
    """The shared base of the backends' printers (sympy's printer style): one
    method per construct, and one :meth:`program` template that a backend fills
    through :meth:`header`, :meth:`load`, :meth:`assign`, :meth:`store_value`,
    :meth:`store_jacobian` and :meth:`footer`.

    Parameters
    ----------
    dtype : str
        ``"float64"`` or ``"float32"``: how constants are spelled.
    """

    comment_prefix: ClassVar[str] = "#"
    indent: ClassVar[str] = "    "

    def __init__(self, dtype: str = "float64") -> None:
        self.dtype = dtype

    # ---------------------------------------------------------------- the template
    def program(self, prog: JacobianProgram, name: str) -> str:
        """Full source of a kernel named ``name`` for ``prog``."""
        lines = list(self.header(prog, name))
        body: list[str] = []
        for k, v in enumerate(prog.inputs):
            body.append(self.load(v, k, prog))
        for s in prog.statements:
            line = self.assign(s.name, self.doprint(s.expr))
            body.append(f"{line}  {self.comment_prefix} {s.comment}" if s.comment else line)
        for r, v in enumerate(prog.values):
            body.append(self.store_value(r, v, prog))
        for r in range(prog.n_outputs):
            for c in range(prog.n_inputs):
                body.append(self.store_jacobian(r, c, prog.jacobian.get((r, c)), prog))
        lines.extend(self.body(body, prog))
        lines.extend(self.footer(prog, name))
        return "\n".join(lines) + "\n"

    def header(self, prog: JacobianProgram, name: str) -> list[str]:
        raise NotImplementedError

    def body(self, lines: list[str], prog: JacobianProgram) -> list[str]:
        return [self.indent * 2 + line for line in lines]

    def footer(self, prog: JacobianProgram, name: str) -> list[str]:
        return []

    def load(self, name: str, col: int, prog: JacobianProgram) -> str:
        raise NotImplementedError

    def assign(self, name: str, text: str) -> str:
        return f"{name} = {text}"

    def store_value(self, row: int, value: Expr | None, prog: JacobianProgram) -> str:
        raise NotImplementedError

    def store_jacobian(self, row: int, col: int, value: Expr | None, prog: JacobianProgram) -> str:
        raise NotImplementedError

    # ---------------------------------------------------------------- constructs
    def print_const(self, expr: Const) -> str:
        v = expr.value
        if not math.isfinite(v):
            return self.non_finite(v)
        return super().print_const(expr)

    def non_finite(self, value: float) -> str:
        return "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "(-np.inf)")

    def print_iverson(self, expr: Apply) -> str:
        a, b = (self.parenthesize(x, 10) for x in expr.args)
        return f"(1.0 if {a} {FUNCTIONS[expr.fn].symbol} {b} else 0.0)"


#: how a backend runs a program: ``straight`` (one straight-line function, compiled per program),
#: ``table`` (an instruction table run by an interpreter compiled once, :mod:`jacacc.kernels.tables`)
#: or ``auto`` (straight-line up to the backend's ``table_threshold`` statements, a table above)
TIERS = ("auto", "straight", "table")
#: programs longer than this (statements) run as instruction tables under tier "auto" (the numba and
#: cupy backends); measured by experiments/compile_scaling.py: from about 3 000 statements the table
#: runs as fast as the straight-line kernel, which by then takes over 10 s to compile
TABLE_THRESHOLD = 1000


class Backend:
    """A code-generation backend: a printer plus a loader.

    Subclasses set :attr:`name`, :attr:`extra` (the optional dependency needed
    to *run*, or ``None``), :attr:`dtypes`, and implement :meth:`generate`
    (source text; must work without the extra) and :meth:`load` (source →
    ``run(X) -> (values, jacobians)``).  A backend with an instruction-table tier sets
    :attr:`tier` and :attr:`table_threshold` (:meth:`uses_table`).
    """

    name: ClassVar[str] = ""
    extra: ClassVar[str | None] = None
    dtypes: ClassVar[tuple[str, ...]] = ("float64", "float32")
    tier: str = "straight"
    table_threshold: int = 0

    def set_tier(self, tier: str, table_threshold: Any) -> None:
        """Check and keep the ``tier`` and ``table_threshold`` options."""
        if tier not in TIERS:
            raise RegistryError(f"{self.name} backend: tier must be one of {', '.join(map(repr, TIERS))}, got {tier!r}")
        if not (isinstance(table_threshold, (int, np.integer)) and not isinstance(table_threshold, bool)
                and table_threshold >= 0):
            raise RegistryError(f"{self.name} backend: table_threshold must be an integer >= 0, got {table_threshold!r}")
        self.tier = tier
        self.table_threshold = int(table_threshold)

    def uses_table(self, prog: JacobianProgram) -> bool:
        """Whether ``prog`` runs as an instruction table (the ``table`` tier, or ``auto`` past
        ``table_threshold`` statements)."""
        return self.tier == "table" or (self.tier == "auto" and len(prog.statements) > self.table_threshold)

    def generate(self, prog: JacobianProgram, dtype: str) -> str:
        raise NotImplementedError

    def load(self, source: str, prog: JacobianProgram, dtype: str) -> Any:
        raise NotImplementedError

    def compile_time_note(self) -> str:
        return ""


def host_runner(prog: JacobianProgram, fill: Any) -> Any:
    """``run(X, V=None, J=None) -> (V, J)`` around ``fill(X, V, J2)``, which writes every entry of
    the values ``V`` ``(N, m)`` and of the Jacobians viewed as ``J2`` ``(N, m·n)``: the buffers
    allocated where not given.  The host backends' loaders share it."""
    m, n = prog.n_outputs, prog.n_inputs

    def run(X: np.ndarray, V: np.ndarray | None = None, J: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        N = X.shape[0]
        V = np.empty((N, m), dtype=X.dtype) if V is None else V
        J = np.empty((N, m, n), dtype=X.dtype) if J is None else J
        fill(X, V, J.reshape(N, m * n))
        return V, J

    return run


def as_points(X: Any, n_inputs: int, dtype: str) -> tuple[np.ndarray, bool]:
    """``X`` as a C-contiguous, writeable ``(N, n)`` array of ``dtype``; the flag says a
    single point was given.

    Integer, boolean and other-precision float points are converted to the
    kernel's ``dtype`` (float64 points to a float32 kernel are rounded); strided,
    transposed, Fortran-order and read-only arrays are copied.  Complex points
    are refused (casting would drop the imaginary part), as are strings.
    """
    arr = np.asarray(X) if isinstance(X, np.ndarray) else real_array(X, "points")
    if arr.dtype.kind not in "biuf":
        arr = real_array(arr, "points")  # complex and strings refused, object arrays of reals converted
    single = arr.ndim == 1
    if single:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != n_inputs:
        raise GraphError(f"points must have shape (N, {n_inputs}) or ({n_inputs},), got {np.shape(X)}")
    pts = np.ascontiguousarray(arr, dtype=dtype)
    if not pts.flags.writeable:
        # the kernels only read X, but Numba compiles a separate specialization for a
        # read-only array (seconds); a copy costs far less
        pts = pts.copy()
    return pts, single
