"""Printing programs in the notation of paper 001 (⊞ for gen, Σ for sums, [p]·e for brackets).

Examples
--------
>>> import jacacc.iverson as iv
>>> x = iv.var("x", (4,)); i = iv.index("i")
>>> print(iv.gen(i, 3, iv.bracket(i < 2) * (x[i] - 2 * x[i + 1])))
⊞_{i<3} [i < 2]·(x[i] - 2 · x[i + 1])
>>> print(iv.let("y", iv.gen(i, 4, iv.exp(x[i])), lambda y: y[0] / y[1]))
let y = ⊞_{i<4} exp(x[i]) in
y[0] / y[1]
"""

from __future__ import annotations

from jacacc.iverson._stack import Step, drive
from jacacc.iverson.syntax import (
    Access,
    Add,
    Bracket,
    Const,
    Expr,
    Func,
    Gen,
    Let,
    Mul,
    Pair,
    Proj,
    Sum,
    Var,
)

# precedence: prefix forms (let, ⊞, Σ, guarded bracket) extend to the right and bind loosest
PREFIX, ADD, MUL, UNARY, ATOM = range(5)


def number_text(v: float) -> str:
    """``2`` for 2.0, ``0.25`` for 0.25, ``1e-07`` for 1e-07 (shortest round-trip)."""
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def to_text(e: Expr) -> str:
    """``e`` in the paper's notation (lets one per line)."""
    return drive(_text(e))[0]


def _wrap(e: Expr, level: int) -> Step:
    text, own = yield _text(e)
    return f"({text})" if own < level else text


def _is_negation(e: Expr) -> bool:
    return isinstance(e, Mul) and isinstance(e.a, Const) and e.a.value == -1.0


def _text(e: Expr) -> Step:
    """(text, precedence) of ``e``; a step of :func:`~jacacc.iverson._stack.drive` (programs may be
    deeper than Python's recursion limit)."""
    if isinstance(e, Var):
        return e.name, ATOM
    if isinstance(e, Const):
        return (number_text(e.value), ATOM) if e.value >= 0 else (f"-{number_text(-e.value)}", UNARY)
    if isinstance(e, Add):
        if _is_negation(e.b):
            return f"{(yield _wrap(e.a, ADD))} - {(yield _wrap(e.b.b, MUL))}", ADD
        return f"{(yield _wrap(e.a, ADD))} + {(yield _wrap(e.b, ADD + 1))}", ADD
    if isinstance(e, Mul):
        if _is_negation(e):
            return f"-{(yield _wrap(e.b, UNARY))}", UNARY
        if isinstance(e.b, Func) and e.b.name == "recip":
            return f"{(yield _wrap(e.a, MUL))} / {(yield _wrap(e.b.arg, MUL + 1))}", MUL
        return f"{(yield _wrap(e.a, MUL))} · {(yield _wrap(e.b, MUL + 1))}", MUL
    if isinstance(e, Func):
        if e.name == "recip":
            return f"1 / {(yield _wrap(e.arg, MUL + 1))}", MUL
        return f"{e.name}({(yield _text(e.arg))[0]})", ATOM
    if isinstance(e, Gen):
        return f"⊞_{{{e.index}<{e.extent}}} {(yield _text(e.body))[0]}", PREFIX
    if isinstance(e, Sum):
        return f"Σ_{{{e.index}<{e.extent}}} {(yield _text(e.body))[0]}", PREFIX
    if isinstance(e, Access):
        indices = [e.idx]
        target = e.target
        while isinstance(target, Access):
            indices.append(target.idx)
            target = target.target
        inner = ", ".join(str(a) for a in reversed(indices))
        return f"{(yield _wrap(target, ATOM))}[{inner}]", ATOM
    if isinstance(e, Bracket):
        if isinstance(e.body, Const) and e.body.value == 1.0:
            return f"[{e.pred}]", ATOM
        return f"[{e.pred}]·{(yield _wrap(e.body, UNARY))}", PREFIX
    if isinstance(e, Let):
        lines = []
        while isinstance(e, Let):  # a let chain is a loop: one line per binding
            lines.append(f"let {e.name} = {(yield _text(e.value))[0]} in")
            e = e.body
        lines.append((yield _text(e))[0])
        return "\n".join(lines), PREFIX
    if isinstance(e, Pair):
        return f"({(yield _text(e.a))[0]}, {(yield _text(e.b))[0]})", ATOM
    if isinstance(e, Proj):
        return f"π{'₁' if e.which == 0 else '₂'}({(yield _text(e.arg))[0]})", ATOM
    raise TypeError(f"cannot print {type(e).__name__}")  # pragma: no cover - every node kind is above
