"""Kernels of sparse structure: a body that is a sum of terms, each living on a thin part of the output.

A Hessian of arrowhead, banded or diagonal structure comes out of the tensor
level as one fused region whose body is a sum of bracketed terms —
``[i0 == i1]·d[i1] + [i1 == n − 1]·c[i0] + [i0 == n − 1]·r[i1]`` — and the
element-by-element layout (:func:`~jacacc.kernels.loops.python_source`) tests
every bracket at every one of the n² entries.  Where every term is pinned to one
value of the last index by an equality (``i1 == i0 + 2``: a diagonal, a band, a
column) or confined to rows by an equality free of it (``i0 == n − 1``), the
kernel here zeroes each row and adds every term only where it lives: n² stores of
zero, which vectorize, and O(n) terms.  ARWHEAD's Hessian at n = 900 took
1.1 ms element by element (``jax.jit``: 0.49 ms).

:func:`guarded_terms` flattens a body into terms (a bracket's conditions, a
sign, a factor), distributing a product over a sum of bracketed terms;
:func:`terms_source` writes the kernel where every term is thin, None otherwise.
Distributing rounds ``(a + b)·c`` as ``a·c + b·c`` where two terms meet at one
entry: the sum's value, within an ulp.

Examples
--------
>>> from jacacc.kernels.ir import Affine, Binary, Condition, Definition, Guard, Read
>>> i, j = Affine.of("i0"), Affine.of("i1")
>>> diagonal = Guard(0, (Condition(i - j, "=="),), Read(0, "d", (j,)))
>>> last_column = Guard(0, (Condition(j - Affine.make({}, 3), "=="),), Read(0, "c", (i,)))
>>> [len(t.conditions) for t in guarded_terms(Binary(0, "+", diagonal, last_column))]
[1, 1]
>>> print(terms_source(Definition.printed("f", ("i0", "i1"), Binary(0, "+", diagonal, last_column)), ["c", "d"]).strip())
# f[i0, i1] = [i0 == i1] * d[i1] + [i1 == 3] * c[i0]
def kernel(_out, _a_c, _a_d):
    _n0, _n1, = _out.shape
    for _i_i0 in range(_n0):
        for _i_i1 in range(_n1):
            _out[_i_i0, _i_i1] = 0.0
        _i_i1 = (_i_i0)
        if 0 <= _i_i1 < _n1:
            _out[_i_i0, _i_i1] += _a_d[(_i_i1)]
        _i_i1 = (3)
        if 0 <= _i_i1 < _n1:
            _out[_i_i0, _i_i1] += _a_c[(_i_i0)]
"""

from __future__ import annotations

from dataclasses import dataclass

from jacacc.kernels.emit import Calls, Emitter, fold
from jacacc.kernels.ir import Affine, Binary, Condition, Definition, Guard, Node, Number, Quotient, Unary
from jacacc.kernels.loops import _code_names, _output_loops, _signature

__all__ = ["MAX_TERMS", "Term", "guarded_terms", "terms_source"]

#: the most terms a body is flattened into (distributing products over sums multiplies them)
MAX_TERMS = 32


@dataclass(frozen=True)
class Term:
    """``sign · [conditions] · factor``, one term of a body."""

    conditions: tuple[Condition, ...]
    sign: int
    factor: Node


def guarded_terms(body: Node) -> list[Term] | None:
    """``body`` as a sum of :class:`Term` (brackets gathered from the sums and products around each
    factor), or None past :data:`MAX_TERMS` terms.  A product is distributed over a sum only where
    one side is a single term."""
    return _terms(body, (), 1)


def _terms(node: Node, conditions: tuple[Condition, ...], sign: int) -> list[Term] | None:
    if isinstance(node, Number) and node.value == 0:
        return []
    if isinstance(node, Guard):
        return _terms(node.body, conditions + tuple(node.conditions), sign)
    if isinstance(node, Unary):
        return _terms(node.operand, conditions, -sign)
    if isinstance(node, Binary) and node.op in "+-":
        left = _terms(node.left, conditions, sign)
        right = _terms(node.right, conditions, sign if node.op == "+" else -sign)
        if left is None or right is None or len(left) + len(right) > MAX_TERMS:
            return None
        return left + right
    if isinstance(node, Binary) and node.op == "*":
        left, right = _terms(node.left, (), 1), _terms(node.right, (), 1)
        if left is None or right is None or (len(left) > 1 and len(right) > 1):
            return [Term(conditions, sign, node)]
        return [Term(conditions + a.conditions + b.conditions, sign * a.sign * b.sign, _times(a.factor, b.factor))
                for a in left for b in right]
    return [Term(conditions, sign, node)]


def _times(a: Node, b: Node) -> Node:
    if isinstance(a, Number) and a.value == 1:
        return b
    if isinstance(b, Number) and b.value == 1:
        return a
    return Binary(0, "*", a, b)


@dataclass(frozen=True)
class _Placement:
    """Where a term lives along the last index ``v``: at ``pin`` (an affine function of the other
    indices), or over the range its ``lower``/``upper`` limits leave; ``outer`` its conditions free of
    ``v`` (tested once per row), ``checks`` the rest (tested where it is added)."""

    pin: Affine | None
    lower: tuple[Affine, ...]
    upper: tuple[Affine, ...]
    outer: tuple[Condition, ...]
    checks: tuple[Condition, ...]

    @property
    def thin(self) -> bool:
        """A point of each row, or only rows an equality free of ``v`` picks."""
        return self.pin is not None or any(c.relation == "==" and c.form.names for c in self.outer)


def _along(c: Condition, v: str) -> tuple[int, Affine]:
    """A condition's form as ``coefficient · v + rest``: the coefficient and the rest."""
    rest = Affine.make({name: k for name, k in c.form.coeffs if name != v}, c.form.const)
    return dict(c.form.coeffs).get(v, 0), rest


def _placement(term: Term, v: str) -> _Placement | None:
    if any(isinstance(name, Quotient) for c in term.conditions for name, _ in c.form.coeffs):
        return None
    split = [(c, *_along(c, v)) for c in term.conditions]
    outer = tuple(c for c, coefficient, _ in split if coefficient == 0)
    pins = [(c, coefficient, rest) for c, coefficient, rest in split if c.relation == "==" and coefficient in (1, -1)]
    if pins:  # v + rest == 0 or rest − v == 0 pins v; every other condition on v is tested there
        pinned, coefficient, rest = pins[0]
        checks = tuple(c for c, k, _ in split if k != 0 and c is not pinned)
        return _Placement(rest.scale(-1) if coefficient == 1 else rest, (), (), outer, checks)
    # no pin: the bounds on v are its loop's limits, the other conditions on v tested in it
    bounds = [(c, coefficient, rest) for c, coefficient, rest in split if c.relation == ">=" and coefficient in (1, -1)]
    lower = tuple(rest.scale(-1) for _, coefficient, rest in bounds if coefficient == 1)
    upper = tuple(rest for _, coefficient, rest in bounds if coefficient == -1)
    bounded = {id(c) for c, _, _ in bounds}
    checks = tuple(c for c, k, _ in split if k != 0 and id(c) not in bounded)
    return _Placement(None, lower, upper, outer, checks)


def terms_source(definition: Definition, arguments: list[str], parallel: bool = False,
                 calls: Calls | None = None) -> str | None:
    """A Python function ``kernel(out, *arrays)`` that zeroes each row of ``out`` along the last index
    and adds each term of the body where it lives (the module docstring), or None where some term is
    not thin (a dense term is cheaper tested in the one pass of the element-by-element layout) or
    the body does not flatten.  ``parallel`` runs the outermost index with ``prange``."""
    if not definition.indices:
        return None
    terms = guarded_terms(definition.body)
    v = definition.indices[-1]
    placements = [_placement(t, v) for t in terms] if terms else None
    if not placements or any(p is None or not p.thin for p in placements):
        return None
    calls = Calls.of(calls, "py")
    arrays, env = _code_names(definition, arguments)
    depth = len(definition.indices) - 1
    last = f"_n{depth}"
    out = f"_out[{', '.join(env[n] for n in definition.indices)}]"
    # the output's loops, the last zeroing its row; a prange over the first unless it is the last
    lines = [*_signature(definition, arguments, arrays),
             *_output_loops(definition, env, 1, "prange" if parallel and depth else "range"),
             "    " * (2 + depth) + f"{out} = 0.0"]
    for term, place in zip(terms, placements, strict=True):
        em = Emitter("py", arrays, calls=calls)
        em.unsigned_reads = parallel
        em.indent = 1 + depth
        if place.outer:
            em.line(f"if {' and '.join(em.condition(c, env) for c in place.outer)}:")
            em.indent += 1
        if place.pin is not None:
            em.line(f"{env[v]} = {em.index(place.pin, env)}")
            em.line(f"if 0 <= {env[v]} < {last}:")
        else:
            low = fold("max", ["0", *(em.index(a, env) for a in place.lower)])
            high = fold("min", [f"{last} - 1", *(em.index(a, env) for a in place.upper)])
            em.line(f"for {env[v]} in range({low}, {high} + 1):")
        em.indent += 1
        if place.checks:
            em.line(f"if {' and '.join(em.condition(c, env) for c in place.checks)}:")
            em.indent += 1
        value = em.value(term.factor, env)
        em.line(f"{out} {'+=' if term.sign > 0 else '-='} {value}")
        lines += em.lines
    return "\n".join([*lines, ""])
