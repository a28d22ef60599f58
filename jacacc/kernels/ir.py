"""The kernel IR: loop definitions ``f[i, j] = body`` over integer-affine index spaces (paper 000 §4–§5).

One IR for every front end that generates loops: a :class:`Definition` names a
tensor, its indices and a scalar body of :class:`Node` — numbers, reads of an
argument at affine indices (:class:`Read`), arithmetic, calls of the
:mod:`jacacc.ops` functions (:class:`Call`), sums over affine ranges
(:class:`Summation`, bounds as :class:`Limit`) and Iverson brackets of index
conditions (:class:`Guard`).  The elementwise language parses into it
(:mod:`jacacc.elementwise.parse`), the tensor evaluator's fused regions are
built in it (:mod:`jacacc.tensor.fusion`), the Iverson language lowers onto it
(:mod:`jacacc.iverson.codegen`), and the emitters of this package print it as
Python/Numba loops (:mod:`~jacacc.kernels.loops`) and CUDA
(:mod:`~jacacc.kernels.cuda`).

Every node knows the column of the source it came from (0 where it was built
in code), so a front end's errors can point into its text.  Nodes are frozen
dataclasses: equal subtrees hash alike, which the emitters use to compute a
repeated subexpression once.

Examples
--------
>>> body = Binary(0, "*", Read(0, "x", (Affine.of("i"),)), Number(0, 2.0))
>>> d = Definition("f", ("i",), body, "")
>>> unparse(d)
'f[i] = x[i] * 2'
>>> print(substitute(body, {"i": Affine.make({"j": 2}, 1)}) == Binary(0, "*", Read(0, "x", (Affine.make({"j": 2}, 1),)), Number(0, 2.0)))
True
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from jacacc import ops

__all__ = ["CHAIN_FOLD", "CHILDREN", "FUNCTIONS", "LEFT_OUT", "OPERANDS", "Affine", "Binary", "Call", "Condition", "Definition",
           "Guard", "Limit", "Node", "Number", "Power", "Quotient", "Read", "Summation", "Unary",
           "chain", "children", "expression_text", "free_indices", "fresh_name", "names_in", "rebuild", "rename_binders", "substitute", "unparse",
           "walk"]

#: the unary operations of :mod:`jacacc.ops` the language leaves out, and why
LEFT_OUT = {
    "neg": "the language's own -x",
    "pos": "the identity",
    "stop_gradient": "a front end's device for custom derivative rules, not a function",
    "tangent_seed": "a front end's device for custom derivative rules, not a function",
}
#: the scalar functions the language knows: the unary operations of :mod:`jacacc.ops` (their
#: derivatives and their Numba and CUDA spellings are the table's) but those in :data:`LEFT_OUT`.
#: The piecewise-constant ``sign`` and ``heaviside`` are among them, so the derivatives of ``abs``
#: and ``relu`` stay in the language.
FUNCTIONS = tuple(name for name in ops.names(arity=1) if name not in LEFT_OUT)


@dataclass(frozen=True)
class Affine:
    """``Σ coeffs[v]·v + const``: ``v`` an index name or a :class:`Quotient` ``⌊n / m⌋`` of another Affine."""

    coeffs: tuple[tuple[str | Quotient, int], ...]
    const: int

    @staticmethod
    def make(coeffs: Mapping[str | Quotient, int], const: int) -> Affine:
        return Affine(tuple(sorted(((v, int(c)) for v, c in coeffs.items() if c), key=lambda t: str(t[0]))),
                      int(const))

    @staticmethod
    def of(name: str | Quotient) -> Affine:
        return Affine(((name, 1),), 0)

    def __add__(self, other: Affine) -> Affine:
        merged = dict(self.coeffs)
        for v, c in other.coeffs:
            merged[v] = merged.get(v, 0) + c
        return Affine.make(merged, self.const + other.const)

    def __sub__(self, other: Affine) -> Affine:
        return self + other.scale(-1)

    def scale(self, k: int) -> Affine:
        return Affine.make({v: c * k for v, c in self.coeffs}, self.const * k)

    @property
    def names(self) -> set[str]:
        """Every index name in the form, inside quotients too."""
        out: set[str] = set()
        for v, _ in self.coeffs:
            out |= v.numerator.names if isinstance(v, Quotient) else {v}
        return out

    def quotients(self) -> list[Quotient]:
        """The quotients of the form, innermost first."""
        out: list[Quotient] = []
        for v, _ in self.coeffs:
            if isinstance(v, Quotient):
                out += [q for q in v.numerator.quotients() if q not in out]
                if v not in out:
                    out.append(v)
        return out

    def substitute(self, env: Mapping[str, Affine]) -> Affine:
        """The form with each index ``v`` in ``env`` replaced by ``env[v]`` (inside quotients too)."""
        total = Affine.make({}, self.const)
        for v, c in self.coeffs:
            if isinstance(v, Quotient):
                total = total + Affine.of(Quotient(v.numerator.substitute(env), v.divisor)).scale(c)
            else:
                total = total + (env[v] if v in env else Affine.of(v)).scale(c)
        return total.folded()

    def folded(self) -> Affine:
        """The form with each quotient whose divisor divides every coefficient of its numerator evaluated."""
        total = Affine.make({}, self.const)
        for v, c in self.coeffs:
            if isinstance(v, Quotient):
                n = v.numerator.folded()
                if all(k % v.divisor == 0 for _, k in n.coeffs):
                    whole = Affine.make({w: k // v.divisor for w, k in n.coeffs}, n.const // v.divisor)
                    total = total + whole.scale(c)
                    continue
                total = total + Affine.of(Quotient(n, v.divisor)).scale(c)
            else:
                total = total + Affine.of(v).scale(c)
        return total

    def value(self, env: Mapping[str, int]) -> int:
        return self.const + sum(c * (v.value(env) if isinstance(v, Quotient) else env[v]) for v, c in self.coeffs)

    def __str__(self) -> str:
        # positive terms first ("2 - i", "j - i + 1"), the constant last unless it leads the positives
        terms = [(c, f"{abs(c)}*{_atom(v)}" if abs(c) != 1 else str(v)) for v, c in self.coeffs]
        positive = [t for c, t in terms if c > 0]
        negative = [t for c, t in terms if c < 0]
        if self.const > 0 and not positive:
            positive = [str(self.const)]
        elif self.const > 0:
            positive.append(str(self.const))
        elif self.const < 0:
            negative.append(str(-self.const))
        if not positive and not negative:
            return "0"
        if positive:
            head = positive[0]
        else:  # unary minus binds tighter than //: -(n // m) needs its parentheses
            first = negative.pop(0)
            head = f"-({first})" if "//" in first else f"-{first}"
        return " ".join([head, *(f"+ {t}" for t in positive[1:]), *(f"- {t}" for t in negative)])


@dataclass(frozen=True)
class Quotient:
    """``⌊numerator / divisor⌋`` (floor division, ``divisor ≥ 2``): an index of a derivative where an
    integer system has an elementary divisor above 1, guarded there by ``numerator % divisor == 0``."""

    numerator: Affine
    divisor: int

    def value(self, env: Mapping[str, int]) -> int:
        return self.numerator.value(env) // self.divisor

    def __str__(self) -> str:
        return f"{_atom(self.numerator)} // {self.divisor}"


def _atom(x: Affine | Quotient | str) -> str:
    """``x`` as an operand of ``*``, ``//`` or ``%``: parenthesized unless a name or a number."""
    text = str(x)
    return text if text.isidentifier() or text.lstrip("-").isdigit() else f"({text})"


@dataclass(frozen=True)
class Condition:
    """``form == 0``, ``form >= 0`` or ``form % modulus == 0`` (relation ``"=="``, ``">="``, ``"%"``)."""

    form: Affine
    relation: str
    modulus: int = 0

    def holds(self, env: Mapping[str, int]) -> bool:
        v = self.form.value(env)
        return v == 0 if self.relation == "==" else v >= 0 if self.relation == ">=" else v % self.modulus == 0

    def __str__(self) -> str:
        if self.relation == "%":
            return f"{_atom(self.form)} % {self.modulus} == 0"
        left = Affine.make({v: c for v, c in self.form.coeffs if c > 0}, max(self.form.const, 0))
        right = Affine.make({v: -c for v, c in self.form.coeffs if c < 0}, max(-self.form.const, 0))
        if self.relation == ">=" and not left.coeffs:
            return f"{right} <= {left}"
        return f"{left} {self.relation} {right}"


@dataclass(frozen=True)
class Limit:
    """``⌈numerator / divisor⌉`` as a lower bound, ``⌊numerator / divisor⌋`` as an upper bound."""

    numerator: Affine
    divisor: int = 1

    def text(self, lower: bool) -> str:
        if self.divisor == 1:
            return str(self.numerator)
        return f"{'ceil' if lower else 'floor'}({_atom(self.numerator)} / {self.divisor})"

    def value(self, env: Mapping[str, int], lower: bool) -> int:
        n = self.numerator.value(env)
        return -((-n) // self.divisor) if lower else n // self.divisor


@dataclass(frozen=True)
class Node:
    column: int


@dataclass(frozen=True)
class Number(Node):
    value: float


@dataclass(frozen=True)
class Read(Node):
    argument: str
    indices: tuple[Affine, ...]


@dataclass(frozen=True)
class Unary(Node):
    operand: Node  # unary minus


@dataclass(frozen=True)
class Binary(Node):
    op: str  # + - * /
    left: Node
    right: Node


@dataclass(frozen=True)
class Power(Node):
    base: Node
    exponent: float  # a constant


@dataclass(frozen=True)
class Call(Node):
    """``function(argument)``; a table operation of two or three operands (``maximum``,
    ``logaddexp``, ``where``: built in code by the tensor evaluator's fused regions, not parsed)
    has them in ``second`` and ``third``."""

    function: str
    argument: Node
    second: Node | None = None
    third: Node | None = None

    def arguments(self) -> list[Node]:
        """The operands, in order."""
        return [a for a in (self.argument, self.second, self.third) if a is not None]


@dataclass(frozen=True)
class Summation(Node):
    """``Σ_{max(lower) ≤ index ≤ min(upper)} body`` (a lower bound rounds up, an upper bound down)."""

    index: str
    lower: tuple[Limit, ...]
    upper: tuple[Limit, ...]
    body: Node


@dataclass(frozen=True)
class Guard(Node):
    """``[c₁ and c₂ …] * body``: an Iverson bracket of index conditions (0 where one fails)."""

    conditions: tuple[Condition, ...]
    body: Node


@dataclass(frozen=True)
class Definition:
    """``name[indices] = body``."""

    name: str
    indices: tuple[str, ...]
    body: Node
    source: str

    def __str__(self) -> str:
        return self.source

    @classmethod
    def printed(cls, name: str, indices: tuple[str, ...], body: Node) -> Definition:
        """The definition of a tree built in code, its source the tree printed (:func:`unparse`)."""
        return cls(name, tuple(indices), body, f"{name}[{', '.join(indices)}] = {expression_text(body)}")

    def names(self) -> set[str]:
        """Every name the definition uses: its own, its indices and :func:`names_in` its body."""
        return {self.name, *self.indices} | names_in(self.body)

    def arguments(self) -> dict[str, int]:
        """Argument name → number of indices it is read with."""
        return dict(self._arguments)

    @functools.cached_property
    def _arguments(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for node in walk(self.body):
            if isinstance(node, Read):
                out.setdefault(node.argument, len(node.indices))
        return out


#: the fields of a node that hold its operands (a sum's or a bracket's body apart), in source order
OPERANDS = ("operand", "left", "right", "base", "argument", "second", "third")
#: the fields of a node that hold its operands and its body, in source order
CHILDREN = (*OPERANDS, "body")


def children(node: Node) -> list[Node]:
    """The operands of ``node`` in source order (none for a number or a read)."""
    return [sub for f in CHILDREN if isinstance(sub := getattr(node, f, None), Node)]


def walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (itself first), depth first in source order.

    An explicit stack, not a recursion: the depth of a tree is bounded by
    :func:`chain` and by Python's parser, but generators nested once per level
    would still cost a frame each, for every caller."""
    stack = [node]
    while stack:
        here = stack.pop()
        yield here
        stack.extend(reversed(children(here)))


def free_indices(node: Node) -> set[str]:
    """The index names ``node`` reads that no sum inside it binds."""
    if isinstance(node, Read):
        return set().union(*(a.names for a in node.indices))
    if isinstance(node, Summation):
        limits = set().union(*(lim.numerator.names for lim in (*node.lower, *node.upper)))
        return limits | (free_indices(node.body) - {node.index})
    out: set[str] = set()
    if isinstance(node, Guard):
        out = set().union(*(c.form.names for c in node.conditions))
    for child in CHILDREN:
        sub = getattr(node, child, None)
        if isinstance(sub, Node):
            out |= free_indices(sub)
    return out


def names_in(node: Node) -> set[str]:
    """Every name under ``node``: the arguments read, the indices of reads, sums' bounds and brackets,
    and the sums' own indices."""
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, Read):
            out |= {n.argument}.union(*(a.names for a in n.indices))
        elif isinstance(n, Summation):
            out |= {n.index}.union(*(lim.numerator.names for lim in (*n.lower, *n.upper)))
        elif isinstance(n, Guard):
            out |= set().union(*(c.form.names for c in n.conditions))
    return out


def fresh_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base1``, ``base2`` … the first not in ``taken``; added to ``taken``."""
    name = base
    k = 1
    while name in taken:
        name = f"{base}{k}"
        k += 1
    taken.add(name)
    return name


#: a chain of up to this many ``+``/``-`` (or ``*``/``/``) operands is folded to the left, as Python
#: evaluates it; a longer one is split in halves (:func:`chain`)
CHAIN_FOLD = 32

_INVERSE = {"+": "-", "-": "+", "*": "/", "/": "*"}


def chain(items: Sequence[tuple[str, Node]], column: int = 0) -> Node:
    """``x₀ op₁ x₁ op₂ x₂ …`` from ``[(op₀, x₀), (op₁, x₁), …]`` (``op₀`` ignored), the operators all
    additive (``+ -``) or all multiplicative (``* /``).

    Up to :data:`CHAIN_FOLD` operands fold to the left, exactly as Python reads the text.  A longer
    chain is cut in halves, ``left op (right with its operators inverted)`` — ``a − b − c − d`` is
    ``(a − b) − (c + d)`` — so the tree is ``CHAIN_FOLD + log₂ n`` deep rather than ``n``: every walk
    over it (derivation, printing, code generation, hashing a node) then stays far from Python's
    recursion limit and the generated code from its parser's nesting limit.  The sum is reassociated,
    which changes its rounding only, as the kernels' ``reassoc`` flag already allows.

    Examples
    --------
    >>> x = [("+", Number(0, float(k))) for k in range(40)]
    >>> tree = chain(x)
    >>> tree.op, expression_text(tree.left).count("+"), expression_text(tree.right).count("+")
    ('+', 19, 19)
    """
    if len(items) <= CHAIN_FOLD:
        out = items[0][1]
        for op, node in items[1:]:
            out = Binary(column, op, out, node)
        return out
    half = len(items) // 2
    left, right = list(items[:half]), list(items[half:])
    op = right[0][0]
    if op in ("-", "/"):  # l − (r₀ ∓ r₁ …) = l − r₀ ± r₁ …: invert the right half's operators
        right = [(_INVERSE[o], n) for o, n in right]
    return Binary(column, op, chain(left, column), chain(right, right[0][1].column))


def rebuild(node: Node, replace: Callable[[Node], Node | None]) -> Node:
    """``node`` with each subtree for which ``replace`` gives a node replaced by it (outermost
    first; a replacement is not searched again)."""
    new = replace(node)
    if new is not None:
        return new
    fields = {}
    for child in CHILDREN:
        sub = getattr(node, child, None)
        if isinstance(sub, Node):
            rebuilt = rebuild(sub, replace)
            if rebuilt is not sub:
                fields[child] = rebuilt
    return type(node)(**{**node.__dict__, **fields}) if fields else node


# ----------------------------------------------------------------------------- printing

_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


def unparse(definition: Definition) -> str:
    """The source text of a definition: :func:`parse` reads it back to the same tree (up to columns).

    Examples
    --------
    >>> from jacacc.elementwise.parse import parse
    >>> unparse(parse("f[i] = -x[i]**2 * sum(k, 0, i, y[k] / (1 + y[k]))"))
    'f[i] = -x[i]**2 * sum(k, 0, i, y[k] / (1 + y[k]))'
    """
    return f"{definition.name}[{', '.join(definition.indices)}] = {expression_text(definition.body)}"


def expression_text(node: Node, context: int = 0) -> str:
    """``node`` in the source language, parenthesized where its precedence is below ``context``."""
    if isinstance(node, Number):
        text = repr(node.value) if not float(node.value).is_integer() else str(int(node.value))
        return f"({text})" if node.value < 0 and context > 2 else text
    if isinstance(node, Read):
        return f"{node.argument}[{', '.join(str(a) for a in node.indices)}]"
    if isinstance(node, Call):
        return f"{node.function}({', '.join(expression_text(a) for a in node.arguments())})"
    if isinstance(node, Summation):
        lo = _limits_text(node.lower, lower=True)
        hi = _limits_text(node.upper, lower=False)
        return f"sum({node.index}, {lo}, {hi}, {expression_text(node.body)})"
    if isinstance(node, Power):
        exponent = int(node.exponent) if float(node.exponent).is_integer() else node.exponent
        text = f"{expression_text(node.base, 5)}**{exponent if exponent >= 0 else f'({exponent})'}"
        return f"({text})" if context > 4 else text
    if isinstance(node, Unary):
        text = f"-{expression_text(node.operand, 3)}"
        return f"({text})" if context > 3 else text
    if isinstance(node, Guard):
        text = f"[{' and '.join(str(c) for c in node.conditions)}] * {expression_text(node.body, 3)}"
        return f"({text})" if context > 2 else text
    if isinstance(node, Binary):
        prec = _PREC[node.op]
        right_context = prec + 1  # a right-nested a * (b * c) keeps its parentheses: the same rounding
        text = f"{expression_text(node.left, prec)} {node.op} {expression_text(node.right, right_context)}"
        return f"({text})" if context > prec else text
    raise TypeError(f"unknown node {type(node).__name__}")  # pragma: no cover


def _limits_text(limits: tuple[Limit, ...], lower: bool) -> str:
    texts = [limit.text(lower) for limit in limits]
    return texts[0] if len(texts) == 1 else f"{'max' if lower else 'min'}({', '.join(texts)})"


# ----------------------------------------------------------------------------- substitution


def substitute(node: Node, env: Mapping[str, Affine]) -> Node:
    """``node`` with the indices in ``env`` replaced by affine forms (reads, limits, brackets)."""
    if isinstance(node, Read):
        return Read(node.column, node.argument, tuple(a.substitute(env) for a in node.indices))
    if isinstance(node, Number):
        return node
    if isinstance(node, Unary):
        return Unary(node.column, substitute(node.operand, env))
    if isinstance(node, Binary):
        return Binary(node.column, node.op, substitute(node.left, env), substitute(node.right, env))
    if isinstance(node, Power):
        return Power(node.column, substitute(node.base, env), node.exponent)
    if isinstance(node, Call):
        return Call(node.column, node.function, *(substitute(a, env) for a in node.arguments()))
    if isinstance(node, Summation):
        inner = {k: v for k, v in env.items() if k != node.index}
        return Summation(node.column, node.index, tuple(_limit(lim, env) for lim in node.lower),
                         tuple(_limit(lim, env) for lim in node.upper), substitute(node.body, inner))
    if isinstance(node, Guard):
        conditions = tuple(Condition(c.form.substitute(env), c.relation, c.modulus) for c in node.conditions)
        return Guard(node.column, conditions, substitute(node.body, env))
    raise TypeError(f"unknown node {type(node).__name__}")  # pragma: no cover


def _limit(limit: Limit, env: Mapping[str, Affine]) -> Limit:
    return Limit(limit.numerator.substitute(env), limit.divisor)


def rename_binders(node: Node, taken: set[str], scope: frozenset[str] = frozenset()) -> Node:
    """Rename summation indices that clash with ``taken`` (updated with the names given) when
    ``scope`` is empty at the top, or that shadow an enclosing binder in ``scope`` — so
    substitutions cannot capture and the printed text parses back."""
    if isinstance(node, Summation):
        name = node.index
        if name in taken or name in scope:
            while name in taken or name in scope:
                name += "_"
        taken.add(name)
        body = substitute(node.body, {node.index: Affine.of(name)}) if name != node.index else node.body
        inner = rename_binders(body, taken, scope | {name})
        if name == node.index and inner is node.body:
            return node
        return Summation(node.column, name, node.lower, node.upper, inner)
    fields = {}
    for child in CHILDREN:
        sub = getattr(node, child, None)
        if isinstance(sub, Node):
            new = rename_binders(sub, taken, scope)
            if new is not sub:
                fields[child] = new
    return type(node)(**{**node.__dict__, **fields}) if fields else node
