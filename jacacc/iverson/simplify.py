"""Algebraic simplification of programs (paper 001 §2 and §6, ATL's bracket reasoning).

:func:`simplify` rewrites bottom-up, and no rule increases
:func:`~jacacc.iverson.cost`:

* **sums removed through bracket equalities**: ``Σ_i [i = e ∧ q]·b`` becomes
  ``[0 ≤ e < n ∧ q]·b[i := e]`` when ``i`` has coefficient ±1 in the equality —
  directly nested sums are one composite sum, so any of their indices can be
  the one removed; comparisons that mention no remaining summation index move
  out of the sum (``Σ_i [p]·e = [p]·Σ_i e``), and ``Σ_K a·b(K) = a·Σ_K b(K)``;
* **loop-invariant code motion**: a computation inside ⊞/Σ that reads none of
  their indices is bound once outside them;
* **brackets merged and decided**: ``[p]·[q]·e = [p ∧ q]·e``; a comparison
  implied by the binders' ranges and the enclosing brackets is dropped, one
  they contradict makes the bracket false (exact integer reasoning,
  :mod:`jacacc.intlin`);
* **zeros and empty ranges dropped**: ``[false]·e = 0``, ``0 + e = e``,
  ``0 · e = 0``, ``Σ_i 0 = 0``, a sum whose bracket no index satisfies is 0;
* **constant folding**: ``2 · 3 = 6``, ``1 · e = e``, ``exp(0) = 1``;
  ``Σ_i e`` with ``e`` free of ``i`` is ``n · e``;
* reads of generated tensors substituted (``(⊞_i b)[a] = b[i := a]``), unused
  ``let`` bindings and aliases ``let x = y`` removed.

Examples
--------
>>> import jacacc.iverson as iv
>>> x, w = iv.var("x", (8,)), iv.var("w", (3,)); i, j, k = iv.index("i"), iv.index("j"), iv.index("k")
>>> e = iv.gen(j, 8, iv.sum(i, 6, iv.sum(k, 3, iv.bracket(i + k == j) * w[k])))
>>> print(simplify(e))
⊞_{i<8} Σ_{j<3} [i - j ≥ 0 ∧ i - j ≤ 5]·w[j]
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from jacacc.intlin import integer_feasible, smith_normal_form
from jacacc.iverson._stack import Step, drive
from jacacc.iverson.check import case_constraints, check
from jacacc.iverson.cost import has_arithmetic
from jacacc.iverson.interpret import COMPARE
from jacacc.iverson.syntax import (
    FUNCTIONS,
    Access,
    Add,
    Affine,
    And,
    BoolConst,
    Bracket,
    Cmp,
    Const,
    DataCmp,
    Expr,
    Func,
    Gen,
    Key,
    Let,
    Mul,
    Or,
    Pair,
    PairType,
    Pred,
    Proj,
    Sum,
    Type,
    Var,
    conjoin,
    conjuncts,
    fresh,
    has_data_atoms,
    index,
    map_pred,
    pred_indices,
    substitute_indices,
    substitute_var,
    unshadowed,
)

__all__ = ["is_zero", "simplify", "zero_of"]


def zero_of(t: Type) -> Expr:
    """The zero program of type ``t``: ``0``, ``⊞…⊞ 0`` or a pair of zeros."""
    if isinstance(t, PairType):
        return Pair(zero_of(t.fst), zero_of(t.snd))
    out: Expr = Const(0.0)
    for k, n in enumerate(reversed(t)):
        out = Gen(f"z{len(t) - 1 - k}", n, out)
    return out


def is_zero(e: Expr) -> bool:
    """Whether ``e`` is syntactically a zero (``0``, ``⊞ 0``, ``[p]·0``, a pair of zeros)."""
    stack = [e]
    while stack:
        node = stack.pop()
        while isinstance(node, (Gen, Bracket)):
            node = node.body
        if isinstance(node, Pair):
            stack += [node.a, node.b]
        elif not (isinstance(node, Const) and node.value == 0.0):
            return False
    return True


@dataclass(frozen=True)
class _Ctx:
    binders: tuple[tuple[str, int], ...] = ()
    known: tuple[Cmp, ...] = ()  # comparisons the enclosing brackets guarantee

    def bind(self, name: str, n: int) -> _Ctx:
        return _Ctx(self.binders + ((name, n),), self.known)

    def assume(self, atoms: tuple[Cmp, ...]) -> _Ctx:
        return _Ctx(self.binders, self.known + atoms)

    @property
    def names(self) -> set[str]:
        return {b for b, _ in self.binders}


def simplify(e: Expr) -> Expr:
    """Simplify a program (see the module docstring); values are preserved, cost never grows."""
    check(e)
    out = _simp(e, _Ctx())
    out = hoist_invariants(out)
    if out.key != e.key:
        out = _simp(out, _Ctx())
    return canonical_indices(out)


def hoist_invariants(e: Expr) -> Expr:
    """Bind each computation inside ⊞/Σ that reads none of their indices once, outside them.

    Loop-invariant code motion: ``⊞_i [p]·(a_i · Σ_j x[j])`` computes the sum once
    instead of ``n`` times.  Never increases cost: the hoisted value was computed
    at least once (its guards are satisfiable after simplification).
    """
    return drive(_hoist(e))


def _hoist(e: Expr) -> Step:
    if isinstance(e, (Gen, Sum)):
        found: dict[Key, tuple[str, Expr]] = {}
        body = yield _replace_invariants(e.body, found, frozenset())
        if not found:
            return e
        out: Expr = type(e)(e.index, e.extent, body)
        for name, value in reversed(list(found.values())):
            out = Let(name, (yield _hoist(value)), out)
        return out
    if isinstance(e, Bracket):
        pred = map_pred(e.pred, lambda c: c, hoist_invariants)
        return Bracket(pred, (yield _hoist(e.body)))
    if not e.children:
        return e
    children = []
    for c in e.children:
        children.append((yield _hoist(c)))
    return e.rebuild(tuple(children))


def _replace_invariants(e: Expr, found: dict[Key, tuple[str, Expr]], inner_lets: frozenset[str]) -> Step:
    if (not e.free_indices and has_arithmetic(e) and not (set(e.free_vars) & inner_lets)
            and not isinstance(e, (Var, Const))):
        key = e.key
        if key not in found:
            found[key] = (fresh("h"), e)
        return Var(found[key][0], e.type)
    if isinstance(e, Let):
        value = yield _replace_invariants(e.value, found, inner_lets)
        return Let(e.name, value, (yield _replace_invariants(e.body, found, inner_lets | {e.name})))
    if isinstance(e, Bracket):
        pred = map_pred(e.pred, lambda c: c, lambda x: drive(_replace_invariants(x, found, inner_lets)))
        return Bracket(pred, (yield _replace_invariants(e.body, found, inner_lets)))
    if not e.children:
        return e
    children = []
    for c in e.children:
        children.append((yield _replace_invariants(c, found, inner_lets)))
    return e.rebuild(tuple(children))


INDEX_NAMES = ("i", "j", "k", "l", "m", "p", "q", "r", "s", "u", "v", "w")


def canonical_indices(e: Expr, outer: tuple[str, ...] = ()) -> Expr:
    """Rename ⊞/Σ binders to ``i, j, k, …`` by nesting depth (§5.4's canonical naming), never to a
    name an enclosing binder uses."""
    return drive(_canonical(e, outer))


def _canonical(e: Expr, outer: tuple[str, ...]) -> Step:
    if isinstance(e, (Gen, Sum)):
        taken = set(outer) | (e.body.free_indices - {e.index})
        name = next((n for n in INDEX_NAMES if n not in taken), None) or fresh("i")
        body = substitute_indices(e.body, {e.index: index(name)}) if name != e.index else e.body
        return type(e)(name, e.extent, (yield _canonical(body, outer + (name,))))
    if isinstance(e, Bracket):
        pred = map_pred(e.pred, lambda c: c, lambda x: canonical_indices(x, outer))
        return Bracket(pred, (yield _canonical(e.body, outer)))
    if not e.children:
        return e
    children = []
    for c in e.children:
        children.append((yield _canonical(c, outer)))
    return e.rebuild(tuple(children))


# ----------------------------------------------------------------------------- predicates


@functools.lru_cache(maxsize=100_000)
def _feasible(key: tuple) -> bool:
    ineqs, eqs, box = key
    return integer_feasible([(dict(c), k) for c, k in ineqs], [(dict(c), k) for c, k in eqs], dict(box))


def _satisfiable(atoms: list[Cmp], ctx: _Ctx) -> bool:
    """Whether the comparisons can hold together with the context (exact over the integers)."""
    ineqs, eqs = case_constraints(list(ctx.known) + atoms)
    names = {v for c, _ in ineqs + eqs for v in c}
    ranges = dict(ctx.binders)
    if names - set(ranges):  # an index the context does not bound: cannot decide, assume it can
        return True
    box = tuple(sorted((v, (0, ranges[v] - 1)) for v in names))
    freeze = lambda fs: tuple((tuple(sorted(c.items())), k) for c, k in fs)  # noqa: E731
    return _feasible((freeze(ineqs), freeze(eqs), box))


def _negations(c: Cmp) -> list[Cmp]:
    """Comparisons whose disjunction is ¬c."""
    rel, a = c.normal()
    if rel == ">=":
        return [Cmp("<", a, Affine())]
    return [Cmp(">", a, Affine()), Cmp("<", a, Affine())]


def _decide(c: Cmp, ctx: _Ctx) -> bool | None:
    """True / False when the context decides ``c``, else None."""
    rel, a = c.normal()
    if a.is_constant:
        return bool(a.const == 0) if rel == "==" else bool(a.const >= 0)
    if not _satisfiable([c], ctx):
        return False
    if not any(_satisfiable([n], ctx) for n in _negations(c)):
        return True
    return None


def _simp_pred(p: Pred, ctx: _Ctx) -> Pred:
    if isinstance(p, Cmp):
        decided = _decide(p, ctx)
        return p if decided is None else BoolConst(decided)
    if isinstance(p, DataCmp):
        lhs, rhs = _simp(p.lhs, ctx), _simp(p.rhs, ctx)
        if isinstance(lhs, Const) and isinstance(rhs, Const):
            return BoolConst(bool(COMPARE[p.op](lhs.value, rhs.value)))
        return DataCmp(p.op, lhs, rhs)
    if isinstance(p, And):
        atoms: list[Pred] = []
        for part in conjuncts(p):
            q = _simp_pred(part, ctx.assume(tuple(a for a in atoms if isinstance(a, Cmp))))
            if isinstance(q, BoolConst):
                if not q.value:
                    return q
                continue
            atoms.extend(conjuncts(q))
        cmps = [a for a in atoms if isinstance(a, Cmp)]
        if cmps and not _satisfiable(cmps, ctx):
            return BoolConst(False)
        return conjoin(_dedupe(_equalities_from_bounds(atoms)))
    if isinstance(p, Or):
        a, b = _simp_pred(p.a, ctx), _simp_pred(p.b, ctx)
        for x, y in ((a, b), (b, a)):
            if isinstance(x, BoolConst):
                return x if x.value else y
        return Or(a, b)
    return p


def _equalities_from_bounds(atoms: list[Pred]) -> list[Pred]:
    """``a ≥ 0 ∧ -a ≥ 0`` is ``a = 0`` (an equality can then remove a sum)."""
    lower = {}
    for k, atom in enumerate(atoms):
        if isinstance(atom, Cmp) and atom.normal()[0] == ">=":
            lower[atom.normal()[1].key] = k
    out: list[Pred] = []
    dropped: set[int] = set()
    for k, atom in enumerate(atoms):
        if k in dropped:
            continue
        if isinstance(atom, Cmp) and atom.normal()[0] == ">=":
            a = atom.normal()[1]
            twin = lower.get((-a).key)
            if twin is not None and twin != k and twin not in dropped:
                dropped.add(twin)
                out.append(Cmp("==", a, Affine()))
                continue
        out.append(atom)
    return out


def _dedupe(atoms: list[Pred]) -> list[Pred]:
    seen: set = set()
    out = []
    for a in atoms:
        if a.key not in seen:
            seen.add(a.key)
            out.append(a)
    return out


# ----------------------------------------------------------------------------- expressions


def _times(a: Expr, b: Expr) -> Expr:
    """``a · b`` folded: constants multiplied, units and zeros dropped, brackets hoisted."""
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value * b.value)
    if isinstance(b, Const) and not isinstance(a, Const):
        a, b = b, a
    if isinstance(a, Const):
        if a.value == 0.0:
            return Const(0.0)
        if a.value == 1.0:
            return b
        if isinstance(b, Mul) and isinstance(b.a, Const):
            return _times(Const(a.value * b.a.value), b.b)
        if isinstance(b, Bracket):
            return Bracket(b.pred, _times(a, b.body))
    if is_zero(a) or is_zero(b):
        return Const(0.0)
    return a * b  # the operator hoists brackets out of products


def _plus(a: Expr, b: Expr) -> Expr:
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value + b.value)
    if isinstance(a, Bracket) and isinstance(b, Bracket) and a.pred.key == b.pred.key:
        return Bracket(a.pred, _plus(a.body, b.body))
    return Add(a, b)


def _guard(pred: Pred, body: Expr) -> Expr:
    if isinstance(pred, BoolConst):
        return body if pred.value else zero_of(body.type)
    if is_zero(body):
        return zero_of(body.type)
    if isinstance(body, Bracket):
        return Bracket(conjoin(_dedupe(conjuncts(pred) + conjuncts(body.pred))), body.body)
    return Bracket(pred, body)


def _simp(e: Expr, ctx: _Ctx) -> Expr:
    return drive(_simp_step(e, ctx))


def _simp_step(e: Expr, ctx: _Ctx) -> Step:
    """``e`` simplified in context; a step of :func:`~jacacc.iverson._stack.drive` (programs and
    their let chains nest deeper than Python's recursion limit)."""
    if isinstance(e, (Var, Const)):
        return e
    if isinstance(e, Add):
        return _plus((yield _simp_step(e.a, ctx)), (yield _simp_step(e.b, ctx)))
    if isinstance(e, Mul):
        return _times((yield _simp_step(e.a, ctx)), (yield _simp_step(e.b, ctx)))
    if isinstance(e, Func):
        arg = yield _simp_step(e.arg, ctx)
        if isinstance(arg, Const):
            with np.errstate(all="ignore"):
                value = float(FUNCTIONS[e.name](arg.value))
            if np.isfinite(value):
                return Const(value)
        return Func(e.name, arg)
    if isinstance(e, Access):
        target = yield _simp_step(e.target, ctx)
        if isinstance(target, Gen):
            return (yield _simp_step(substitute_indices(target.body, {target.index: e.idx}), ctx))
        if isinstance(target, Bracket):
            return (yield _simp_step(Bracket(target.pred, Access(target.body, e.idx)), ctx))
        if isinstance(target, Pair):
            return (yield _simp_step(Pair(Access(target.a, e.idx), Access(target.b, e.idx)), ctx))
        return Access(target, e.idx)
    if isinstance(e, Bracket):
        return (yield _simp_bracket(e, ctx))
    if isinstance(e, Gen):
        i, body = unshadowed(e, ctx.names)
        return Gen(i, e.extent, (yield _simp_step(body, ctx.bind(i, e.extent))))
    if isinstance(e, Sum):
        return (yield _simp_sum(e, ctx))
    if isinstance(e, Let):
        value = yield _simp_step(e.value, ctx)
        if isinstance(value, Let):  # let x = (let h = v in b) in c  ⇒  let h = v in let x = b in c
            inner, inner_body = value.name, value.body
            if inner in e.body.free_vars:  # c reads an outer h: rename the floated binder apart
                inner = fresh(inner)
                inner_body = substitute_var(inner_body, value.name, Var(inner, value.value.type))
            return (yield _simp_step(Let(inner, value.value, Let(e.name, inner_body, e.body)), ctx))
        if _is_copy(value):  # an alias, a constant or a (bracketed) copy: read it in place, fold what follows
            return (yield _simp_step(substitute_var(e.body, e.name, value), ctx))
        body = yield _simp_step(e.body, ctx)
        if e.name not in body.free_vars:
            return body
        if isinstance(body, Var):  # let x = v in x
            return value
        return Let(e.name, value, body)
    if isinstance(e, Pair):
        return Pair((yield _simp_step(e.a, ctx)), (yield _simp_step(e.b, ctx)))
    if isinstance(e, Proj):
        arg = yield _simp_step(e.arg, ctx)
        if isinstance(arg, Pair):
            return arg.a if e.which == 0 else arg.b
        return Proj(e.which, arg)
    raise TypeError(f"cannot simplify {type(e).__name__}")  # pragma: no cover


def _is_copy(value: Expr) -> bool:
    """Whether ``value`` computes nothing: ``⊞…⊞`` over a constant or a read, possibly under index
    brackets.  Reading it in place costs nothing and lets constants fold where it is used."""
    while isinstance(value, Gen):
        value = value.body
    while isinstance(value, Bracket) and not has_data_atoms(value.pred):
        value = value.body
    while isinstance(value, Access):
        value = value.target
    return isinstance(value, (Var, Const))


def _simp_bracket(e: Bracket, ctx: _Ctx) -> Step:
    pred = _simp_pred(e.pred, ctx)
    if isinstance(pred, BoolConst):
        return (yield _simp_step(e.body, ctx)) if pred.value else zero_of(e.type)
    atoms = tuple(a for a in conjuncts(pred) if isinstance(a, Cmp))
    body = yield _simp_step(e.body, ctx.assume(atoms))
    return _guard(pred, body)


def _simp_sum(e: Sum, ctx: _Ctx) -> Step:
    binders: list[tuple[str, int]] = []
    inner: Expr = e
    inner_ctx = ctx
    while isinstance(inner, Sum):
        i, body = unshadowed(inner, inner_ctx.names)
        binders.append((i, inner.extent))
        inner_ctx = inner_ctx.bind(i, inner.extent)
        inner = body
    inner = yield _simp_step(inner, inner_ctx)
    while True:
        step = _eliminate_one(binders, inner) or _eliminate_system(binders, inner)
        if step is None:
            break
        binders, inner = step
        inner_ctx = ctx
        for i, n in binders:
            inner_ctx = inner_ctx.bind(i, n)
        inner = yield _simp_step(inner, inner_ctx)
    if is_zero(inner):
        return Const(0.0)
    # indices the body does not read: Σ_i e = n·e (n - 1 additions become one multiplication)
    factor = 1
    kept = []
    for i, n in binders:
        if i in inner.free_indices:
            kept.append((i, n))
        else:
            factor *= n
    out = inner if factor == 1 else _times(Const(float(factor)), inner)
    names = {i for i, _ in kept}
    # Σ_K a·b(K) = a·Σ_K b(K) when a reads no summation index: one multiplication instead of |K|
    if kept and isinstance(out, Mul):
        for a, b in ((out.a, out.b), (out.b, out.a)):
            if not (a.free_indices & names):
                rest = b
                for i, n in reversed(kept):
                    rest = Sum(i, n, rest)
                return _times(a, (yield _simp_sum(rest, ctx)))
    # comparisons that no remaining summation index appears in guard the whole sum
    outside: list[Pred] = []
    if kept and isinstance(out, Bracket):
        atoms = conjuncts(out.pred)
        outside = [a for a in atoms if not (pred_indices(a) & names)]
        if outside:
            inside = [a for a in atoms if pred_indices(a) & names]
            out = _guard(conjoin(inside), out.body) if inside else out.body
    for i, n in reversed(kept):
        out = Sum(i, n, out)
    return _guard(conjoin(outside), out) if outside else out


def _eliminate_one(binders: list[tuple[str, int]], inner: Expr) -> tuple[list[tuple[str, int]], Expr] | None:
    """Remove one summation index pinned by a unit-coefficient equality of the inner bracket."""
    if not isinstance(inner, Bracket):
        return None
    atoms = conjuncts(inner.pred)
    for pos, atom in enumerate(atoms):
        if not isinstance(atom, Cmp):
            continue
        rel, a = atom.normal()
        if rel != "==":
            continue
        for k, (i, n) in enumerate(binders):
            c = a.coeff(i)
            if c not in (1, -1):
                continue
            # c·i + rest = 0  ⇒  i = -rest / c
            value = (-a.without(i)) * c
            rest_atoms = atoms[:pos] + atoms[pos + 1:]
            mapping: Mapping[str, Affine] = {i: value}
            new_atoms = [_sub_pred(x, mapping) for x in rest_atoms] + [value >= 0, value <= n - 1]
            body = substitute_indices(inner.body, mapping)
            new_binders = binders[:k] + binders[k + 1:]
            return new_binders, _guard(conjoin(new_atoms), body)
    return None


def _eliminate_system(binders: list[tuple[str, int]], inner: Expr) -> tuple[list[tuple[str, int]], Expr] | None:
    """Remove the summation indices pinned by a system of bracket equalities that no single
    equality solves (no unit coefficient, as in ``[2i + 3j = a ∧ i + 2j = b]``): with the Smith
    normal form ``S = U·M·V`` of their coefficients (paper 000 §4.1, :mod:`jacacc.intlin`), when
    ``M`` has full column rank and every elementary divisor is 1 the solution ``V·(U·rhs)`` is
    integral and affine in the outer indices; the rows of ``U·rhs`` past the rank become bracket
    equalities (the cokernel condition).  Larger divisors would need a divisibility bracket, which
    the language has not, and kernels a change of summation variables: both are left alone."""
    if not isinstance(inner, Bracket):
        return None
    atoms = conjuncts(inner.pred)
    equalities = [(pos, a) for pos, atom in enumerate(atoms) if isinstance(atom, Cmp)
                  for rel, a in [atom.normal()] if rel == "=="]
    names = [i for i, _ in binders if any(a.coeff(i) for _, a in equalities)]
    if not names or len(equalities) < len(names):
        return None
    rows = [a for _, a in equalities]
    snf = smith_normal_form([[a.coeff(i) for i in names] for a in rows])
    if snf.rank < len(names) or any(abs(d) != 1 for d in snf.diagonal):
        return None
    # M·v = rhs with rhs = -(the rest of each equality)
    rhs = [-Affine([(n, c) for n, c in a.coeffs if n not in names], a.const) for a in rows]
    y = [_combination(rhs, row) for row in snf.U]
    values = [y[k] * snf.S[k][k] for k in range(snf.rank)]  # 1/±1 = ±1
    mapping: dict[str, Affine] = {i: _combination(values, snf.V[r][:snf.rank]) for r, i in enumerate(names)}
    cokernel = [y[k] == 0 for k in range(snf.rank, len(y))]
    solved = {pos for pos, _ in equalities}
    rest = [_sub_pred(a, mapping) for pos, a in enumerate(atoms) if pos not in solved]
    extents = dict(binders)
    ranges = [c for i in names for c in (mapping[i] >= 0, mapping[i] <= extents[i] - 1)]
    body = substitute_indices(inner.body, mapping)
    return [(i, n) for i, n in binders if i not in mapping], _guard(conjoin(rest + cokernel + ranges), body)


def _combination(items: list[Affine], coefficients: list[int]) -> Affine:
    total = Affine()
    for c, a in zip(coefficients, items, strict=True):
        if c:
            total = total + c * a
    return total


def _sub_pred(p: Pred, mapping: Mapping[str, Affine]) -> Pred:
    return map_pred(p, lambda c: Cmp(c.op, c.lhs.substitute(mapping), c.rhs.substitute(mapping)),
                    lambda x: substitute_indices(x, mapping))

