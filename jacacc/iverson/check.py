"""Well-formedness of whole programs: every index bound, every read in range (paper 001 §4.1).

Types are checked as nodes are built (:mod:`~jacacc.iverson.syntax`); what can
only be decided for a whole program is checked here, once, by every entry point
(evaluate, compile, cost, derivatives, normal forms):

* every index variable is read inside its binder (``gen`` / ``sum``);
* every read ``x[a]`` stays in ``0 ≤ a < extent`` for all index values its
  binders and the enclosing index brackets allow — exactly, over the integers
  (:func:`jacacc.intlin.integer_feasible`).  A bracket guards a read: ``[i ≥ 1]·x[i - 1]``
  is fine, ``x[i - 1]`` alone is refused.  Data predicates (``[x[i] > 0]``) guard nothing.

Examples
--------
>>> import jacacc.iverson as iv
>>> x = iv.var("x", (4,)); i = iv.index("i")
>>> check(iv.gen(i, 4, iv.bracket(i >= 1) * x[i - 1]))
{'x': (4,)}
>>> check(iv.gen(i, 4, x[i - 1]))
Traceback (most recent call last):
...
jacacc.iverson.syntax.IvTypeError: read out of range: x[i - 1] with extent 4 can read index -1 (i < 4)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from jacacc.intlin import Form, range_escape
from jacacc.iverson._stack import Step, drive
from jacacc.iverson.syntax import (
    Access,
    Affine,
    And,
    BoolConst,
    Bracket,
    Cmp,
    Expr,
    Gen,
    IvTypeError,
    Or,
    Pred,
    Sum,
    Type,
    index,
    index_part,
    leading_extent,
    pred_children_exprs,
    substitute_indices,
    unshadowed,
)

__all__ = ["check", "dnf", "form_of"]

MAX_CASES = 64  # disjunctive guards split into at most this many cases


def form_of(a: Affine) -> Form:
    """An affine index expression as an :mod:`jacacc.intlin` linear form."""
    return dict(a.coeffs), a.const


def dnf(p: Pred) -> list[list[Cmp]]:
    """``p`` as a disjunction of conjunctions of index comparisons; data comparisons are dropped
    (read as *true*), so the result is implied by ``p`` — what a guard may assume."""
    if isinstance(p, Cmp):
        return [[p]]
    if isinstance(p, BoolConst):
        return [[]] if p.value else []
    if isinstance(p, And):
        out = [a + b for a in dnf(p.a) for b in dnf(p.b)]
        return out if len(out) <= MAX_CASES else [[]]  # too many cases: assume nothing
    if isinstance(p, Or):
        out = dnf(p.a) + dnf(p.b)
        return out if len(out) <= MAX_CASES else [[]]
    return [[]]  # a data comparison guards nothing


def case_constraints(case: Iterable[Cmp]) -> tuple[list[Form], list[Form]]:
    """Inequalities (``≥ 0``) and equalities (``= 0``) of one conjunction of comparisons."""
    ineqs, eqs = [], []
    for c in case:
        rel, a = c.normal()
        (eqs if rel == "==" else ineqs).append(form_of(a))
    return ineqs, eqs


@dataclass
class _Context:
    binders: dict[str, int] = field(default_factory=dict)  # index -> extent
    guards: list[Pred] = field(default_factory=list)
    shown: dict[str, str] = field(default_factory=dict)  # renamed shadowing index -> the user's name


def check(expr: Expr) -> dict[str, Type]:
    """Validate a whole program; return its free (input) variables, name → type.

    Raises :class:`~jacacc.iverson.syntax.IvTypeError` naming the construct for an
    index used outside its binder or a read that can go out of range.
    """
    if not isinstance(expr, Expr):
        raise IvTypeError(f"expected an iverson expression, got {type(expr).__name__}")
    unbound = expr.free_indices
    if unbound:
        name = sorted(unbound)[0]
        raise IvTypeError(f"index {name} is used outside its binder (no enclosing gen or sum binds it) in "
                          f"{_short(_first_use(expr, name))}")
    drive(_walk(expr, _Context(), {}))
    return dict(expr.free_vars)


def _short(e: Expr | Pred, limit: int = 160) -> str:
    text = str(e).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_use(expr: Expr, name: str) -> Expr:
    """The smallest subexpression that reads index ``name`` freely (for the message)."""
    node = expr
    while True:
        inner = [c for c in node.children if name in c.free_indices]
        if isinstance(node, Bracket):
            inner += [c for c in pred_children_exprs(node.pred) if name in c.free_indices]
        if not inner:
            return node
        node = inner[0]


def _walk(e: Expr, ctx: _Context, cache: dict) -> Step:
    """Check every read of ``e`` in context; a step of :func:`~jacacc.iverson._stack.drive`."""
    if isinstance(e, (Gen, Sum)):
        # shadowing: the inner binder gets its own name (messages show the user's)
        name, body = unshadowed(e, ctx.binders)
        shown = ctx.shown if name == e.index else {**ctx.shown, name: ctx.shown.get(e.index, e.index)}
        inner = _Context({**ctx.binders, name: e.extent}, ctx.guards, shown)
        yield _walk(body, inner, cache)
        return
    if isinstance(e, Bracket):
        # a bracket's data comparisons are evaluated only where its index comparisons hold
        guarded = _Context(ctx.binders, ctx.guards + [index_part(e.pred)], ctx.shown)
        for operand in pred_children_exprs(e.pred):
            yield _walk(operand, guarded, cache)
        yield _walk(e.body, _Context(ctx.binders, ctx.guards + [e.pred], ctx.shown), cache)
        return
    if isinstance(e, Access):
        yield _walk(e.target, ctx, cache)
        extent = leading_extent(e.target.type)
        assert extent is not None  # Access refuses scalars when built
        _check_range(e, extent, ctx, cache)
        return
    for c in e.children:  # a let's value, then its body
        yield _walk(c, ctx, cache)


def _check_range(e: Access, extent: int, ctx: _Context, cache: dict) -> None:
    names = e.idx.names
    key = (e.idx.key, extent, tuple(sorted(ctx.binders.items())), tuple(g.key for g in ctx.guards))
    if key in cache:
        return
    box = {v: (0, n - 1) for v, n in ctx.binders.items()}
    form = form_of(e.idx)
    for case in _cases(ctx):
        ineqs, eqs = case_constraints(case)
        relevant = {v for c, _ in ineqs + eqs for v in c} | set(form[0])
        where = range_escape(form, extent, ineqs, eqs, {v: box[v] for v in relevant})
        if where is not None:
            rename = {new: index(old) for new, old in ctx.shown.items()}
            read = substitute_indices(e, rename) if rename else e
            bounds = ", ".join(f"{ctx.shown.get(v, v)} < {ctx.binders[v]}" for v in sorted(names))
            guard = f" under [{' ∧ '.join(str(c) for c in case)}]" if case else ""
            scope = f" ({bounds})" if bounds else ""
            raise IvTypeError(f"read out of range: {_short(read)} with extent {extent} can read index {where}"
                              f"{'' if where == -1 else ' or beyond'}{scope}{guard}")
    cache[key] = True


def _cases(ctx: _Context) -> list[list[Cmp]]:
    cases: list[list[Cmp]] = [[]]
    for g in ctx.guards:
        cases = [a + b for a in cases for b in dnf(g)]
        if len(cases) > MAX_CASES:
            cases = [[]]
    return cases
