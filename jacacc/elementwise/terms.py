"""Long sums of like terms as one sum over a table of their constants (issue 40 item 2).

A source such as ``f[i] = tanh(a[i]*0.1 + b[i])*a[i] - tanh(a[i]*0.2 + b[i])*a[i] - …`` with
hundreds of terms that differ only in their numbers is, as written, an expression of hundreds of
operations: its kernel's compile time, its derivative's size and every walk over it grow with the
number of terms.  :func:`tabulate_terms` finds the terms of the body's top-level sum that share a
*template* — the same tree once every number is replaced by a slot — and, for a group of at least
:data:`TERM_TABLE_MIN` terms, writes them as one :class:`~jacacc.kernels.ir.Summation` over a new
index ``t``, reading each number that varies between the terms from a constant table
(``f_c0_1[t]``) and the terms' signs from another where they differ:

    f[i] = sum(t, 0, 749, f_s0[t] * (tanh(a[i] * f_c0_0[t] + b[i]) * a[i])) + …

The result is again a definition of the language, so it is derived, printed and compiled as any
other; the tables are arguments that the function supplies itself
(:class:`~jacacc.elementwise.function.ElementwiseFunction` ``constants``).  The sum is
reassociated — its terms are added group by group — which changes the rounding only, as the
kernels' ``reassoc`` flag already allows.

Examples
--------
>>> from jacacc.elementwise.parse import parse
>>> source = "f[i] = " + " + ".join(f"x[i]*{k + 1}" for k in range(10)) + " - y[i]"
>>> tabulated = tabulate_terms(parse(source))
>>> print(tabulated.definition)
f[i] = sum(t, 0, 9, x[i] * f_c0_0[t]) - y[i]
>>> tabulated.constants["f_c0_0"].tolist()
[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from jacacc.kernels.ir import (
    Affine,
    Binary,
    Definition,
    Limit,
    Node,
    Number,
    Read,
    Summation,
    Unary,
    chain,
    expression_text,
    fresh_name,
    rebuild,
)

__all__ = ["TERM_TABLE_MIN", "TabulatedTerms", "tabulate_terms"]

#: a group of at least this many like terms becomes one sum over a table of their constants
TERM_TABLE_MIN = 8


@dataclass(frozen=True)
class TabulatedTerms:
    """The rewritten definition and its constant tables (name → 1-D float64 array)."""

    definition: Definition
    constants: dict[str, np.ndarray] = field(default_factory=dict)


def tabulate_terms(definition: Definition, min_terms: int = TERM_TABLE_MIN) -> TabulatedTerms:
    """``definition`` with each group of at least ``min_terms`` like terms of its top-level sum
    written as one sum over a table of their constants (see the module notes); unchanged where no
    group is that large."""
    terms = _signed_terms(definition.body)
    groups: dict[str, list[int]] = {}
    templates: list[tuple[Node, list[float]]] = []
    for k, (_, term) in enumerate(terms):
        template, numbers = _template(term)
        templates.append((template, numbers))
        groups.setdefault(expression_text(template), []).append(k)
    large = [members for members in groups.values() if len(members) >= min_terms]
    if not large:
        return TabulatedTerms(definition)
    taken = definition.names()
    constants: dict[str, np.ndarray] = {}
    replaced: dict[int, tuple[int, Node] | None] = {}
    for g, members in enumerate(large):
        index = fresh_name("t", taken)
        rows = np.array([templates[k][1] for k in members], dtype=np.float64).reshape(len(members), -1)
        signs = np.array([terms[k][0] for k in members], dtype=np.float64)
        slots: dict[int, Node] = {}
        for j in range(rows.shape[1]):
            column = rows[:, j]
            if np.all(column == column[0]) and not np.isnan(column[0]):
                slots[j] = Number(0, float(column[0]))
            else:
                name = fresh_name(f"{definition.name}_c{g}_{j}", taken)
                constants[name] = np.ascontiguousarray(column)
                slots[j] = Read(0, name, (Affine.of(index),))
        body = _filled(templates[members[0]][0], slots)
        sign = 1
        if np.all(signs == signs[0]):
            sign = int(signs[0])
        else:
            name = fresh_name(f"{definition.name}_s{g}", taken)
            constants[name] = signs
            body = Binary(0, "*", Read(0, name, (Affine.of(index),)), body)
        zero, last = Limit(Affine.make({}, 0)), Limit(Affine.make({}, len(members) - 1))
        replaced[members[0]] = (sign, Summation(0, index, (zero,), (last,), body))
        for k in members[1:]:
            replaced[k] = None
    items: list[tuple[int, Node]] = []
    for k, term in enumerate(terms):
        if k in replaced:
            if replaced[k] is not None:
                items.append(replaced[k])
        else:
            items.append(term)
    body = _signed_chain(items)
    return TabulatedTerms(Definition.printed(definition.name, definition.indices, body), constants)


def _signed_terms(node: Node) -> list[tuple[int, Node]]:
    """The terms of ``node``'s top-level chain of ``+``, ``-`` and unary minus, with their signs, in
    source order (no recursion: a chain may be long)."""
    out: list[tuple[int, Node]] = []
    stack: list[tuple[int, Node]] = [(1, node)]
    while stack:
        sign, here = stack.pop()
        if isinstance(here, Binary) and here.op in "+-":
            stack.append((sign if here.op == "+" else -sign, here.right))
            stack.append((sign, here.left))
        elif isinstance(here, Unary):
            stack.append((-sign, here.operand))
        else:
            out.append((sign, here))
    return out


def _signed_chain(items: list[tuple[int, Node]]) -> Node:
    """``±x₀ ± x₁ …`` as a balanced chain (:func:`~jacacc.kernels.ir.chain`)."""
    sign, first = items[0]
    head = first if sign > 0 else Unary(0, first)
    return chain([("+", head), *(("+" if s > 0 else "-", n) for s, n in items[1:])])


_SLOT = "\N{SECTION SIGN}"


def _template(term: Node) -> tuple[Node, list[float]]:
    """``term`` with its k-th number (in walk order) replaced by the slot read ``§[k]``, and the numbers."""
    numbers: list[float] = []

    def slot(node: Node) -> Node | None:
        if isinstance(node, Number):
            numbers.append(float(node.value))
            return Read(0, _SLOT, (Affine.make({}, len(numbers) - 1),))
        return None

    return rebuild(term, slot), numbers


def _filled(template: Node, slots: dict[int, Node]) -> Node:
    def fill(node: Node) -> Node | None:
        if isinstance(node, Read) and node.argument == _SLOT:
            return slots[node.indices[0].const]
        return None

    return rebuild(template, fill)
