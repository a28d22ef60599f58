"""Normal forms of paper 001 §5: let-lifting, pair elimination, gen push-out, tensor SSA.

Each pass is a function from programs to programs that preserves values and
does not increase :func:`~jacacc.iverson.cost` (the passes' correctness and
cost-neutrality arguments are the paper's; the tests check both on random
programs).  The paper's rule figures (5.1–5.34) did not survive text
extraction; the rules below follow its prose:

``let_lift`` (§5.1)
    moves every ``let`` to the top: ``⊞_i (let x = v in b)`` becomes
    ``let x' = ⊞_i v in ⊞_i b[x := x'[i]]`` (loop fission; the same through
    ``Σ``), and ``[p]·(let x = v in b)`` becomes ``let x' = [p]·v in [p]·b`` —
    ``p`` is duplicated around ``v`` so that ``v`` is still only computed where
    ``p`` holds (rule 5.9's reason: cost neutrality).
``pair_eliminate`` (§5.2)
    distributes ⊞, reads and brackets over pairs (an array of pairs is a pair
    of arrays), splits pair-valued bindings in two and cancels ``π(a, b)``;
    pairs remain only in the output.
``gen_pushout`` (§5.3)
    substitutes reads of generated tensors (``(⊞_i b)[a] = b[i := a]``) and
    moves brackets inside ⊞, so that every ⊞ is outermost in a binding.
``tensor_ssa`` (§5.4)
    names every intermediate: each binding becomes ``⊞_I [g]·r`` with ``r`` one
    primitive — a sum of (bracketed) atoms, a binary product of atoms, a
    black-box function of an atom, or a contraction ``Σ_K [q]·a·b`` /
    ``Σ_K [q]·a`` — where an atom is a constant or a read ``x[…]`` of a variable.
    Equal right-hand sides are bound once (structural memoization = CSE).
    This is the form on which derivatives keep their cost bound (§6).

Examples
--------
>>> import jacacc.iverson as iv
>>> x = iv.var("x", (3,)); i, k = iv.index("i"), iv.index("k")
>>> e = iv.sum(i, 3, iv.exp(iv.sum(k, 3, x[k] * x[i])))
>>> print(normalize(e))  # doctest: +ELLIPSIS
let t'... = ⊞_{i<3} Σ_{k<3} x[k] · x[i] in
let t'... = ⊞_{i<3} exp(t'...[i]) in
let t'... = Σ_{i<3} t'...[i] in
t'...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from jacacc.iverson._stack import Step, drive
from jacacc.iverson.check import check
from jacacc.iverson.cost import has_arithmetic
from jacacc.iverson.syntax import (
    Access,
    Add,
    And,
    Bracket,
    Const,
    Expr,
    Func,
    Gen,
    Let,
    Mul,
    Pair,
    PairType,
    Pred,
    Proj,
    Sum,
    Var,
    fresh,
    index,
    index_part,
    map_pred,
    pred_children_exprs,
    pred_indices,
    substitute_indices,
    substitute_vars,
    unshadowed,
)

__all__ = ["Binding", "bindings_of", "gen_pushout", "let_chain", "let_lift", "normalize", "pair_eliminate",
           "read_at", "tensor_ssa"]

Binding = tuple[str, Expr]


def let_chain(bindings: Sequence[Binding], body: Expr) -> Expr:
    """``let x1 = v1 in … let xn = vn in body``."""
    out = body
    for name, value in reversed(bindings):
        out = Let(name, value, out)
    return out


def bindings_of(e: Expr) -> tuple[list[Binding], Expr]:
    """The top-level ``let`` chain of ``e`` and its body."""
    out: list[Binding] = []
    while isinstance(e, Let):
        out.append((e.name, e.value))
        e = e.body
    return out, e


# ----------------------------------------------------------------------------- let-lifting


def let_lift(e: Expr) -> Expr:
    """Move every ``let`` to the top level (§5.1); bound names are renamed apart."""
    check(e)
    bindings, core = drive(_lift(e, {}))
    return let_chain(bindings, core)


def _wrap_bindings(bindings: list[Binding], core: Expr, wrap: Callable[[Expr], Expr],
                   read: Callable[[Var], Expr], needs: Callable[[Expr], bool]) -> tuple[list[Binding], Expr]:
    """Wrap each binding value that ``needs`` it with ``wrap`` (⊞ or a bracket) and replace its reads
    by ``read(new variable)``; later values and the core see the replacement."""
    out: list[Binding] = []
    renamed: dict[str, Expr] = {}
    for name, value in bindings:
        value = substitute_vars(value, renamed)
        if needs(value):
            wrapped = wrap(value)
            new = fresh(name)
            out.append((new, wrapped))
            renamed[name] = read(Var(new, wrapped.type))
        else:
            out.append((name, value))
    return out, substitute_vars(core, renamed)


def _lift(e: Expr, names: dict[str, Var]) -> Step:
    """(bindings, core) of ``e`` with its lets lifted; ``names`` renames the reads of enclosing
    lets (renaming as the walk goes, not by a substitution per let: a let chain thousands long
    would take quadratic time).  A step of :func:`~jacacc.iverson._stack.drive`."""
    if isinstance(e, Var):
        return [], names.get(e.name, e)
    if isinstance(e, Const):
        return [], e
    if isinstance(e, Let):
        bindings: list[Binding] = []
        while isinstance(e, Let):  # a chain of lets is a loop, not a recursion
            bv, v = yield _lift(e.value, names)
            name = fresh(e.name)
            names = {**names, e.name: Var(name, v.type)}
            bindings += bv + [(name, v)]
            e = e.body
        bb, b = yield _lift(e, names)
        return bindings + bb, b
    if isinstance(e, (Gen, Sum)):
        bindings, body = yield _lift(e.body, names)
        i, n = e.index, e.extent
        bindings, body = _wrap_bindings(bindings, body, lambda v: Gen(i, n, v), lambda var: Access(var, index(i)),
                                        lambda v: i in v.free_indices)
        return bindings, type(e)(i, n, body)
    if isinstance(e, Bracket):
        operand_bindings: list[Binding] = []
        operands: dict[int, Expr] = {}
        for x in pred_children_exprs(e.pred):
            bx, cx = yield _lift(x, names)
            operand_bindings += bx
            if has_arithmetic(cx):  # computed once: the duplicated predicate then only reads it
                name = fresh("c")
                operand_bindings.append((name, cx))
                cx = Var(name, cx.type)
            operands[id(x)] = cx
        pred = map_pred(e.pred, lambda c: c, lambda x: operands.get(id(x), x))
        # the predicate's data operands are computed where its index part holds (its cost-truth)
        guard = index_part(e.pred)
        ob, pred_core = _wrap_bindings(operand_bindings, Bracket(pred, Const(1.0)), lambda v: Bracket(guard, v),
                                       lambda var: var, lambda v: True)
        assert isinstance(pred_core, Bracket)
        bindings, body = yield _lift(e.body, names)
        bindings, body = _wrap_bindings(bindings, body, lambda v: Bracket(pred_core.pred, v), lambda var: var,
                                        lambda v: True)
        return ob + bindings, Bracket(pred_core.pred, body)
    if isinstance(e, Access):
        bindings, target = yield _lift(e.target, names)
        return bindings, Access(target, e.idx)
    bindings = []
    children = []
    for c in e.children:
        bc, cc = yield _lift(c, names)
        bindings += bc
        children.append(cc)
    return bindings, e.rebuild(tuple(children))


# ----------------------------------------------------------------------------- pair elimination


def pair_eliminate(e: Expr) -> Expr:
    """Split pair-valued bindings and cancel projections (§5.2); the program is let-lifted first."""
    bindings, core = bindings_of(let_lift(e))
    out: list[Binding] = []
    renamed: dict[str, Expr] = {}
    for name, value in bindings:
        value = _push_pairs(substitute_vars(value, renamed))
        if isinstance(value.type, PairType):
            renamed[name] = _split(name, value, out)
        else:
            out.append((name, value))
    return let_chain(out, _push_pairs(substitute_vars(core, renamed)))


def _split(name: str, value: Expr, out: list[Binding]) -> Expr:
    """Bind the leaves of a pair-valued ``value`` separately; return the pair of their variables."""
    if not isinstance(value.type, PairType):
        new = fresh(name)
        out.append((new, value))
        return Var(new, value.type)
    return Pair(_split(name, _push_pairs(Proj(0, value)), out), _split(name, _push_pairs(Proj(1, value)), out))


def _push_pairs(e: Expr) -> Expr:
    """Distribute ⊞, reads and brackets over pairs and cancel ``π(a, b)`` (bottom-up)."""
    return drive(_push_pairs_step(e))


def _push_pairs_step(e: Expr) -> Step:
    if not e.children and not isinstance(e, Bracket):
        return e
    if isinstance(e, Bracket):
        pred = map_pred(e.pred, lambda c: c, _push_pairs)
        body = yield _push_pairs_step(e.body)
        if isinstance(body, Pair):
            return Pair((yield _push_pairs_step(Bracket(pred, body.a))), (yield _push_pairs_step(Bracket(pred, body.b))))
        return Bracket(pred, body)
    children = []
    for c in e.children:
        children.append((yield _push_pairs_step(c)))
    e = e.rebuild(tuple(children))
    if isinstance(e, Proj) and isinstance(e.arg, Pair):
        return e.arg.a if e.which == 0 else e.arg.b
    if isinstance(e, Gen) and isinstance(e.body, Pair):
        return Pair((yield _push_pairs_step(Gen(e.index, e.extent, e.body.a))),
                    (yield _push_pairs_step(Gen(e.index, e.extent, e.body.b))))
    if isinstance(e, Access) and isinstance(e.target, Pair):
        return Pair((yield _push_pairs_step(Access(e.target.a, e.idx))),
                    (yield _push_pairs_step(Access(e.target.b, e.idx))))
    if isinstance(e, Proj) and isinstance(e.arg, (Gen, Access, Bracket)):
        inner = e.arg
        if isinstance(inner, Gen):
            return (yield _push_pairs_step(Gen(inner.index, inner.extent, Proj(e.which, inner.body))))
        if isinstance(inner, Access):
            return (yield _push_pairs_step(Access(Proj(e.which, inner.target), inner.idx)))
        return (yield _push_pairs_step(Bracket(inner.pred, Proj(e.which, inner.body))))
    return e


# ----------------------------------------------------------------------------- gen push-out


def gen_pushout(e: Expr) -> Expr:
    """Substitute reads of generated tensors and move brackets inside ⊞ (§5.3), after pair elimination."""
    bindings, core = bindings_of(pair_eliminate(e))
    return let_chain([(n, _pushout(v)) for n, v in bindings], _pushout(core))


def _pushout(e: Expr) -> Expr:
    """``e`` with reads of generated tensors substituted and brackets moved inside ⊞."""
    return drive(_pushout_step(e))


def _pushout_step(e: Expr) -> Step:
    if isinstance(e, Bracket):
        pred = map_pred(e.pred, lambda c: c, _pushout)
        body = yield _pushout_step(e.body)
        if isinstance(body, Gen):  # [p]·⊞_i b = ⊞_i [p]·b (i renamed if p mentions it)
            i, inner = body.index, body.body
            if i in pred_indices(pred):
                new = fresh(i)
                inner = substitute_indices(inner, {i: index(new)})
                i = new
            return Gen(i, body.extent, (yield _pushout_step(Bracket(pred, inner))))
        if isinstance(body, Pair):
            return Pair((yield _pushout_step(Bracket(pred, body.a))), (yield _pushout_step(Bracket(pred, body.b))))
        return Bracket(pred, body)
    if isinstance(e, Access):
        target = yield _pushout_step(e.target)
        if isinstance(target, Gen):  # (⊞_i b)[a] = b[i := a]
            return (yield _pushout_step(substitute_indices(target.body, {target.index: e.idx})))
        if isinstance(target, Bracket):
            return (yield _pushout_step(Bracket(target.pred, Access(target.body, e.idx))))
        return Access(target, e.idx)
    if not e.children:
        return e
    children = []
    for c in e.children:
        children.append((yield _pushout_step(c)))
    return e.rebuild(tuple(children))


# ----------------------------------------------------------------------------- tensor SSA


@dataclass
class _SSA:
    bindings: list[Binding] = field(default_factory=list)
    memo: dict[tuple, str] = field(default_factory=dict)

    def bind(self, value: Expr, base: str = "t") -> Var:
        """Bind ``value`` once (structural memoization) and return its variable."""
        key = value.key
        name = self.memo.get(key)
        if name is None:
            name = fresh(base)
            self.memo[key] = name
            self.bindings.append((name, value))
        return Var(name, value.type)


Scope = tuple[tuple[str, int], ...]


def _gen_over(scope: Scope, body: Expr) -> Expr:
    for name, n in reversed(scope):
        body = Gen(name, n, body)
    return body


def read_at(var: Expr, scope: Sequence[tuple[str, int]]) -> Expr:
    """``var[i, j, …]`` at the indices of ``scope``."""
    out: Expr = var
    for name, _ in scope:
        out = Access(out, index(name))
    return out


def _is_atom(e: Expr) -> bool:
    while isinstance(e, Access):
        e = e.target
    return isinstance(e, (Var, Const))


class _Converter:
    """Tensor SSA conversion; its methods are steps of :func:`~jacacc.iverson._stack.drive`
    (operands nest as deep as the program)."""

    def __init__(self, ssa: _SSA) -> None:
        self.ssa = ssa

    def atom(self, e: Expr, scope: Scope, guard: Pred | None) -> Step:
        """``e`` as an atom: itself when it is one, else a read of a new binding over ``scope``."""
        if _is_atom(e):
            return e
        if isinstance(e, Bracket) and _is_atom(e.body) and not pred_children_exprs(e.pred):
            return e
        rhs = yield self.primitive(e, scope, guard)
        if guard is not None:
            rhs = Bracket(guard, rhs)
        return read_at(self.ssa.bind(_gen_over(scope, rhs)), scope)

    def primitive(self, e: Expr, scope: Scope, guard: Pred | None) -> Step:
        """``e`` as one primitive whose operands are atoms (new bindings for compound operands)."""
        if _is_atom(e):
            return e
        if isinstance(e, Add):
            return Add((yield self.addend(e.a, scope, guard)), (yield self.addend(e.b, scope, guard)))
        if isinstance(e, Mul):
            return Mul((yield self.atom(e.a, scope, guard)), (yield self.atom(e.b, scope, guard)))
        if isinstance(e, Func):
            return Func(e.name, (yield self.atom(e.arg, scope, guard)))
        if isinstance(e, Bracket):
            pred = self.predicate(e.pred, scope, guard)
            return Bracket(pred, (yield self.primitive(e.body, scope, _and(guard, pred))))
        if isinstance(e, Sum):
            return (yield self.contraction(e, scope, guard))
        raise AssertionError(f"not in gen-pushout form: {type(e).__name__}")  # pragma: no cover

    def addend(self, e: Expr, scope: Scope, guard: Pred | None) -> Step:
        # keep the tree of additions and the brackets immediately under them (the cost model sees them)
        if isinstance(e, Add):
            return Add((yield self.addend(e.a, scope, guard)), (yield self.addend(e.b, scope, guard)))
        if isinstance(e, Bracket):
            pred = self.predicate(e.pred, scope, guard)
            return Bracket(pred, (yield self.addend(e.body, scope, _and(guard, pred))))
        return (yield self.atom(e, scope, guard))

    def predicate(self, p: Pred, scope: Scope, guard: Pred | None) -> Pred:
        return map_pred(p, lambda c: c, lambda x: drive(self.atom(x, scope, guard)))

    def contraction(self, e: Sum, scope: Scope, guard: Pred | None) -> Step:
        binders: list[tuple[str, int]] = []
        inner: Expr = e
        inner_scope = scope
        while isinstance(inner, Sum):
            name, body = unshadowed(inner, {n for n, _ in inner_scope})
            binders.append((name, inner.extent))
            inner_scope = inner_scope + ((name, inner.extent),)
            inner = body
        pred: Pred | None = None
        if isinstance(inner, Bracket):
            pred = self.predicate(inner.pred, inner_scope, guard)
            inner = inner.body
        g = _and(guard, pred)
        if isinstance(inner, Mul):
            term: Expr = Mul((yield self.atom(inner.a, inner_scope, g)), (yield self.atom(inner.b, inner_scope, g)))
        else:
            term = yield self.atom(inner, inner_scope, g)
        if pred is not None:
            term = Bracket(pred, term)
        for name, n in reversed(binders):
            term = Sum(name, n, term)
        return term

    def binding(self, value: Expr, base: str) -> Expr:
        """Convert a binding value or output (gens outermost after push-out); return its atom."""
        if isinstance(value, Pair):
            return Pair(self.binding(value.a, base), self.binding(value.b, base))
        scope: Scope = ()
        body = value
        while isinstance(body, Gen):
            name, inner = unshadowed(body, {n for n, _ in scope})
            scope = scope + ((name, body.extent),)
            body = inner
        if _is_atom(value):
            return value
        while body.type != ():  # a whole tensor under ⊞ (⊞_i x): read it entry by entry
            assert not isinstance(body.type, PairType), "pair elimination leaves no pairs under ⊞"
            name = fresh("i")
            scope = scope + ((name, body.type[0]),)
            body = _pushout(Access(body, index(name)))
        rhs = drive(self.primitive(body, scope, None))
        return self.ssa.bind(_gen_over(scope, rhs), base)


def _and(a: Pred | None, b: Pred | None) -> Pred | None:
    if a is None:
        return b
    if b is None:
        return a
    return And(a, b)


def tensor_ssa(e: Expr) -> Expr:
    """Convert to tensor SSA form (§5.4): every binding one primitive over atoms, bound once."""
    pending, core = bindings_of(gen_pushout(e))
    conv = _Converter(_SSA())
    atoms: dict[str, Expr] = {}  # binding name -> its atom, substituted into each later value once
    for name, value in pending:
        atoms[name] = conv.binding(substitute_vars(value, atoms), "t")
    out = conv.binding(substitute_vars(core, atoms), "t")
    return let_chain(conv.ssa.bindings, out)


def normalize(e: Expr) -> Expr:
    """All four passes: let-lifting, pair elimination, gen push-out, tensor SSA (§5)."""
    return tensor_ssa(e)

