"""Random programs of the tensor language, for property tests and the cheap-gradient experiment.

Every generated program is well-typed, closed (every index read inside its
binder) and in range (every read ``x[a]`` stays inside its axis), so
:func:`jacacc.iverson.check` accepts it and the interpreter runs it.  Reads
are kept in range in two ways, both on purpose: by construction (a binder's
extent is often an input's extent, so ``x[i]`` fits) and by an explicit
guarding bracket (``[i + 1 < n]·x[i + 1]``, ``[i ≥ 1]·x[i - 1]``) computed from
the index expression's exact range over its binders' boxes.

Programs use every construct of the language: input reads at affine indices
(coefficients 0, 1, 2, −1, offsets, sums of two indices), ``gen`` nested up to
three deep, ``sum`` (directly nested sums over a bracket body such as
``[i = j]``, ``[i < j]``, ``[2*i + 1 = j]``, ``∧``, ``∨``), brackets over
scalars and over tensors, data predicates (``[x[i] > 1]``, also guarded inside
the same bracket: ``[i + 1 < n ∧ x[i + 1] > 1]``), ``+ - * /``, unary minus,
constants, every black-box function, ``let`` (scalar, tensor and pair values,
inside gens and sums, bodies reading the bound tensor at affine indices,
shadowing earlier names), pairs and projections (let-bound pairs, gens over
pair bodies, reading a pair of arrays at an index), reads of generated tensors
``(⊞_{i<n} e)[j]`` and shadowed index names.

Values stay finite: inputs are drawn in [0.5, 1.5]; ``log``, ``sqrt``,
``recip`` and divisions only see expressions positive by construction
(``a·a + 0.5``, ``exp(…)``, unguarded input reads, sums of positives, ...), and
``exp`` only sees bounded arguments (``tanh``, ``sin``, input reads).

Decisions are drawn one integer at a time through a ``choose(lo, hi)``
callable (:func:`build`): the tests draw them from hypothesis (so failures
shrink; 0 is always the simplest choice, ``tests/iverson_programs.py``), and
:func:`random_program` from a seeded NumPy generator (the experiment).  The recorded decisions
replay the same program with other index names (:meth:`GeneratedProgram.renamed`), an
alpha-equivalent copy.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jacacc.iverson import syntax as iv
from jacacc.iverson.syntax import (
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
    Let,
    Mul,
    Or,
    Pair,
    PairType,
    Pred,
    Proj,
    Sum,
    Var,
    leading_extent,
    pred_children_exprs,
    recip,
)

__all__ = ["FEATURES", "MAX_EXTENT", "GeneratedProgram", "build", "features", "random_program", "recurrence"]

MAX_EXTENT = 5
#: binders (gen and sum) nested at most this deep: the interpreter runs one scalar at a time
MAX_BINDERS = 4
#: gens nested at most this deep
MAX_GENS = 3

Choose = Callable[[int, int], int]

# What a variable in scope is known to hold, which decides where it may be read:
# inputs are in [0.5, 1.5] (positive and bounded), POSITIVE lets are positive everywhere.
INPUT, POSITIVE, ANY = "input", "positive", "any"


@dataclass(frozen=True)
class GeneratedProgram:
    """A generated program, the shapes of its free (input) variables, and how to replay it."""

    expr: Expr
    inputs: dict[str, tuple[int, ...]]
    scalar_output: bool
    choices: tuple[int, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)

    def arrays(self, rng: np.random.Generator) -> dict[str, Any]:
        """Random inputs in [0.5, 1.5] (a scalar input as a Python float)."""
        out: dict[str, Any] = {}
        for name, shape in sorted(self.inputs.items()):
            value = rng.uniform(0.5, 1.5, size=shape)
            out[name] = float(value) if shape == () else value
        return out

    def renamed(self, index_prefix: str) -> GeneratedProgram:
        """The same program with every index variable renamed (replaying the recorded decisions)."""
        replay = iter(self.choices)
        return build(lambda lo, hi: next(replay), **{**self.options, "index_prefix": index_prefix})

    def __repr__(self) -> str:  # hypothesis prints this for a failing example: show the program
        return f"GeneratedProgram(inputs={self.inputs}, scalar_output={self.scalar_output}, expr=\n{self.expr}\n)"


@dataclass(frozen=True)
class _Scope:
    """What a subexpression being generated may refer to."""

    indices: tuple[tuple[str, int], ...] = ()  # enclosing binders, outermost first
    variables: tuple[tuple[Var, str], ...] = ()  # readable variables, each with INPUT / POSITIVE / ANY
    gens: int = 0  # enclosing gens

    def visible(self) -> list[tuple[str, int]]:
        """Index names in scope with the extent of their innermost binder (a shadowed one is gone)."""
        seen: dict[str, int] = {}
        for name, n in self.indices:
            seen.pop(name, None)
            seen[name] = n
        return list(seen.items())

    def bind(self, name: str, n: int, is_gen: bool) -> _Scope:
        return _Scope(self.indices + ((name, n),), self.variables, self.gens + is_gen)

    def with_var(self, v: Var, kind: str) -> _Scope:
        kept = tuple((w, k) for w, k in self.variables if w.name != v.name)  # a let shadows the name
        return _Scope(self.indices, kept + ((v, kind),), self.gens)

    def vars_of(self, kinds: Sequence[str], scalar: bool | None = None) -> list[Var]:
        return [v for v, k in self.variables if k in kinds and (scalar is None or (v.type == ()) == scalar)]


class _Builder:
    """One program's generator: every random decision goes through ``choose``."""

    def __init__(self, choose: Choose, max_depth: int, max_extent: int, index_prefix: str,
                 input_extents: Sequence[int]) -> None:
        self.choose = choose
        self.max_depth = max_depth
        self.max_extent = max_extent
        self.index_prefix = index_prefix
        self.input_extents = list(input_extents)
        self.index_names: Iterator[int] = itertools.count()
        self.let_names: Iterator[int] = itertools.count()

    # ------------------------------------------------------------------ decisions
    def pick(self, items: Sequence[Any]) -> Any:
        return items[self.choose(0, len(items) - 1)]

    def rare(self, k: int) -> bool:
        """True once in ``k`` (the largest value, so that shrinking makes it False)."""
        return self.choose(0, k - 1) == k - 1

    def extent(self) -> int:
        # half the time an input's extent, so that plain reads x[i] are in range by construction
        k = self.choose(0, 2 * self.max_extent - 1)
        if k < self.max_extent:
            return k + 1
        return self.input_extents[k % len(self.input_extents)]

    def binder(self, scope: _Scope) -> tuple[str, int]:
        visible = scope.visible()
        if visible and self.rare(6):  # shadow an enclosing binder's name
            name = self.pick(visible)[0]
        else:
            name = f"{self.index_prefix}{next(self.index_names)}"
        return name, self.extent()

    def let_name(self, scope: _Scope) -> str:
        if scope.variables and self.rare(8):  # shadow an input or an enclosing let
            return self.pick(scope.variables)[0].name
        return f"t{next(self.let_names)}"

    # ------------------------------------------------------------------ reads
    def index_into(self, m: int, scope: _Scope, guarded: bool) -> tuple[Affine, list[Pred]]:
        """An index expression for an axis of extent ``m`` and the guards that keep it in range
        (none when ``guarded`` is False: then it is in range by construction)."""
        visible = scope.visible()
        kind = self.choose(0, 7) if visible else 0
        if kind == 0:  # a constant: coefficient 0
            return Affine((), self.choose(0, m - 1)), []
        name, n = self.pick(visible)
        i = iv.index(name)
        if kind == 1:
            a = i
        elif kind == 2:
            a = i + self.choose(1, 2)
        elif kind == 3:
            a = 2 * i + self.choose(0, 1)
        elif kind == 4:
            a = m - 1 - i  # coefficient -1: a reversal
        elif kind == 5:
            a = i - 1
        elif kind == 6:
            a = i + iv.index(self.pick(visible)[0])
        else:
            other, n2 = self.pick(visible)
            a = i - iv.index(other) + (n2 - 1)  # 0 ≤ a when both are in range; i - i is a constant
        extents = dict(visible)
        lo = a.const + sum(min(0, c * (extents[v] - 1)) for v, c in a.coeffs)
        hi = a.const + sum(max(0, c * (extents[v] - 1)) for v, c in a.coeffs)
        guards: list[Pred] = []
        if lo < 0:
            guards.append(self.pick([a >= 0, 0 <= a, a > -1]))
        if hi > m - 1:
            guards.append(self.pick([a < m, a <= m - 1, m > a]))
        if guards and not guarded:
            return Affine((), self.choose(0, m - 1)), []
        return a, guards

    def parts(self, e: Expr, scope: _Scope, guarded: bool = True) -> tuple[Expr, list[Pred]]:
        """A scalar read out of ``e`` (tensor, pair or scalar) and the guards it needs."""
        guards: list[Pred] = []
        while e.type != ():
            t = e.type
            if isinstance(t, PairType):
                # index the pair of arrays first, but only where both sides share their leading extent and the
                # first side is an array (the interpreter cannot index other pairs: see the xfail tests)
                extent = leading_extent(t)
                if _leading_extents(t) == {extent} and extent is not None and not isinstance(t.fst, PairType) \
                        and self.rare(3):
                    a, g = self.index_into(extent, scope, guarded)
                    e, guards = e[a], guards + g
                else:
                    e = e.fst if self.choose(0, 1) == 0 else e.snd
                continue
            indices = []
            for m in t:
                a, g = self.index_into(m, scope, guarded)
                indices.append(a)
                guards += g
            e = e[tuple(indices)] if len(indices) > 1 and self.choose(0, 1) else _read(e, indices)
        return e, guards

    def guard(self, e: Expr, guards: list[Pred]) -> Expr:
        """``e`` under brackets for ``guards``, in one of the equivalent spellings."""
        if not guards:
            return e
        style = self.choose(0, 2)
        if style == 0:
            for g in guards:
                e = iv.bracket(g) * e
            return e
        if style == 1:
            conj = guards[0]
            for g in guards[1:]:
                conj = conj & g
            return iv.bracket(conj) * e
        for g in guards:
            e = e * iv.bracket(g)  # a unit bracket on the right guards the other factor too
        return e

    def to_scalar(self, e: Expr, scope: _Scope, guarded: bool = True) -> Expr:
        return self.guard(*self.parts(e, scope, guarded))

    def read(self, scope: _Scope, kinds: Sequence[str] = (INPUT, POSITIVE, ANY), guarded: bool = True) -> Expr:
        candidates = scope.vars_of(kinds)
        if not candidates:
            return iv.const(self.pick([0.5, 1.0, 1.5]))
        return self.to_scalar(self.pick(candidates), scope, guarded)

    # ------------------------------------------------------------------ predicates
    def index_pred(self, scope: _Scope, name: str | None = None) -> Pred:
        """A comparison of index expressions, about ``name`` (default: a visible index)."""
        visible = scope.visible()
        if not visible:
            return _true_pred(self.choose(0, 1))
        i = iv.index(name if name is not None else self.pick(visible)[0])
        others = [iv.index(v) for v, _ in visible if v != name]
        j: Affine = self.pick(others) if others and self.choose(0, 2) else Affine((), self.choose(0, 3))
        kind = self.choose(0, 11)
        p: Pred = [
            i == j, i < j, i <= j, i > j, i >= j, 2 * i + 1 == j, i != j,
            (i >= 1) & (i <= j), (i == 0) | (i > j), i + j >= 2, (i - j == 1) | (j - i == 1),
            (i < j) | True,  # a BoolConst operand: true everywhere
        ][kind]
        if self.rare(5):
            q = self.index_pred(scope)
            p = p & q if self.choose(0, 1) else p | q
        return p

    def data_pred(self, scope: _Scope) -> Pred:
        """A comparison of scalar data: reads of inputs, exact in every evaluation order."""
        op = self.pick(["gt", "lt", "ge", "le"])
        c = self.pick([0.8, 1.0, 1.2])
        kind = self.choose(0, 4)
        tensors = scope.vars_of([INPUT], scalar=False)
        if kind == 3 or not tensors:
            scalars = scope.vars_of([INPUT], scalar=True)
            lhs: Expr = scalars[0] if scalars else iv.const(1.0)
            return _compare(op, lhs, iv.const(c))
        if kind == 2:  # a read guarded inside the same bracket: [i + 1 < n ∧ x[i + 1] > 1]
            a, guards = self.parts(self.pick(tensors), scope, guarded=True)
            p: Pred = _compare(op, a, iv.const(c))
            for g in guards:
                p = g & p
            return p
        lhs = self.to_scalar(self.pick(tensors), scope, guarded=False)
        if kind == 1:
            return _compare(op, lhs, self.to_scalar(self.pick(tensors), scope, guarded=False))
        if kind == 4:
            lhs = lhs * lhs
        return _compare(op, lhs, iv.const(c))

    # ------------------------------------------------------------------ scalars
    def leaf(self, scope: _Scope) -> Expr:
        kind = self.choose(0, 4)
        if kind <= 1:
            return self.read(scope)
        if kind == 2:
            return iv.const(self.pick([0.5, 1.0, 2.0, -1.5, 0.25]))
        if kind == 3:
            scalars = scope.vars_of([INPUT, POSITIVE, ANY], scalar=True)
            return self.pick(scalars) if scalars else self.read(scope)
        if scope.visible():  # an indicator: [p] is 0 or 1
            return iv.bracket(self.index_pred(scope))
        return self.read(scope)

    def scalar(self, scope: _Scope, depth: int) -> Expr:
        if depth >= self.max_depth:
            return self.leaf(scope)
        d = depth + 1
        kind = self.choose(0, 16)
        if kind <= 1:
            return self.leaf(scope)
        if kind == 2:
            variant = self.choose(0, 2)
            a = self.scalar(scope, d)
            return [a + self.scalar(scope, d), a + 1.5, 2 + a][variant]  # Python numbers mix in
        if kind == 3:
            variant = self.choose(0, 2)
            a = self.scalar(scope, d)
            return [a - self.scalar(scope, d), a - 0.5, 1 - a][variant]
        if kind == 4:
            variant = self.choose(0, 2)
            a = self.scalar(scope, d)
            return [a * self.scalar(scope, d), 0.25 * a, a * 3][variant]
        if kind == 5:  # division by positive expressions only
            variant = self.choose(0, 3)
            positive = self.positive(scope, d)
            if variant == 0:
                return self.scalar(scope, d) / positive
            if variant == 1:
                return 2.0 / positive
            if variant == 2:
                return recip(positive) * self.scalar(scope, d)
            return self.scalar(scope, d) / 4
        if kind == 6:
            return -self.scalar(scope, d)
        if kind == 7:
            return self.function(scope, d)
        if kind == 8:
            return self.summation(scope, d)
        if kind == 9:
            if not scope.visible():
                return self.summation(scope, d)
            body = self.scalar(scope, d)
            return iv.bracket(self.index_pred(scope)) * body if self.choose(0, 1) else body * iv.bracket(
                self.index_pred(scope))
        if kind == 10:
            return iv.bracket(self.data_pred(scope)) * self.scalar(scope, d)
        if kind == 11:
            return self.let(scope, d, lambda inner: self.scalar(inner, d))
        if kind == 12:  # a pair built and projected on the spot
            a, b = self.scalar(scope, d), self.any_value(scope, d)
            return pair_then_project(a, b, self.choose(0, 1))
        if kind == 13:  # read a generated tensor directly: (⊞_{i<n} e)[j]
            return self.to_scalar(self.tensor(scope, d), scope)
        if kind == 14:  # a bracket over a tensor, then read
            pred = self.index_pred(scope) if scope.visible() and self.choose(0, 1) else self.data_pred(scope)
            return self.to_scalar(iv.bracket(pred) * self.tensor(scope, d), scope)
        if kind == 15:  # an indicator added to a value
            return iv.bracket(self.index_pred(scope)) + self.scalar(scope, d) if scope.visible() else \
                self.scalar(scope, d)
        return self.positive(scope, d)

    def function(self, scope: _Scope, d: int) -> Expr:
        name = self.pick(["sin", "cos", "tanh", "relu", "exp", "log", "sqrt", "recip"])
        if name == "relu":  # shifted, so that both sides of the kink are taken
            return iv.relu(self.scalar(scope, d) - self.pick([0.5, 1.0, 1.5]))
        if name in ("sin", "cos", "tanh"):
            return getattr(iv, name)(self.scalar(scope, d))
        if name == "exp":
            return iv.exp(self.bounded(scope, d))
        return {"log": iv.log, "sqrt": iv.sqrt, "recip": recip}[name](self.positive(scope, d))

    def bounded(self, scope: _Scope, d: int) -> Expr:
        """An expression in [-2, 2] (an argument exp cannot overflow on)."""
        kind = self.choose(0, 4) if d < self.max_depth else 0
        if kind == 0:
            return self.read(scope, [INPUT])
        if kind == 1:
            return -self.read(scope, [INPUT])
        if kind == 2:
            return iv.tanh(self.scalar(scope, d + 1))
        if kind == 3:
            return iv.sin(self.scalar(scope, d + 1))
        return iv.bracket(self.index_pred(scope)) * self.bounded(scope, d + 1) if scope.visible() else \
            iv.cos(self.scalar(scope, d + 1))

    def positive(self, scope: _Scope, depth: int) -> Expr:
        """An expression positive (and finite) for inputs in [0.5, 1.5]."""
        kind = self.choose(0, 8) if depth < self.max_depth else 0
        d = depth + 1
        if kind == 0:
            if self.choose(0, 3) == 0:
                return iv.const(self.pick([0.5, 1.0, 2.0]))
            return self.read(scope, [INPUT, POSITIVE], guarded=False)  # unguarded: never a zero
        if kind == 1:
            a = self.scalar(scope, d)
            return a * a + self.pick([0.5, 1.0])
        if kind == 2:
            return iv.exp(self.bounded(scope, d))
        if kind == 3:
            return self.positive(scope, d) + self.positive(scope, d)
        if kind == 4:
            return self.positive(scope, d) * self.positive(scope, d)
        if kind == 5:
            variant = self.choose(0, 3)
            a = self.positive(scope, d)
            return [iv.sqrt(a), recip(a), 1.0 / a, a / self.positive(scope, d)][variant]
        if kind == 6 and len(scope.indices) < MAX_BINDERS:  # a sum of positive terms (no bracket)
            name, n = self.binder(scope)
            return iv.sum(name, n, self.positive(scope.bind(name, n, False), d))
        if kind == 7 and len(scope.indices) < MAX_BINDERS and scope.gens < MAX_GENS:
            # a positive tensor let-bound, read at affine indices by a positive body
            name, n = self.binder(scope)
            value = iv.gen(name, n, self.positive(scope.bind(name, n, True), d))
            t = self.let_name(scope)
            inner = scope.with_var(Var(t, value.type), POSITIVE)
            body = self.positive(inner, d)
            if t not in body.free_vars:
                body = body * self.to_scalar(Var(t, value.type), inner, guarded=False)
            return iv.let(t, value, body)
        return iv.relu(self.scalar(scope, d)) + 0.5

    def summation(self, scope: _Scope, depth: int) -> Expr:
        if len(scope.indices) >= MAX_BINDERS:
            return self.leaf(scope)
        d = depth + 1
        name, n = self.binder(scope)
        inner = scope.bind(name, n, False)
        kind = self.choose(0, 3)
        if kind == 0:
            body = self.scalar(inner, d)
        elif kind == 1:
            body = iv.bracket(self.index_pred(inner, name)) * self.scalar(inner, d)
        elif kind == 2 and len(inner.indices) < MAX_BINDERS:
            # directly nested sums over one bracket: Σ_i Σ_j [i = j]·e (the composite sum of the cost model)
            name2, n2 = self.binder(inner)
            inner2 = inner.bind(name2, n2, False)
            body = iv.sum(name2, n2, iv.bracket(self.index_pred(inner2, name2)) * self.scalar(inner2, d))
        else:
            body = self.scalar(inner, d) * iv.bracket(self.index_pred(inner, name))
        return iv.sum(name, n, body)

    def let(self, scope: _Scope, depth: int, body_of: Callable[[_Scope], Expr]) -> Expr:
        """``let t = value in body``: a scalar, tensor, positive-tensor or pair value."""
        d = depth + 1
        kind = self.choose(0, 3)
        if kind == 0:
            value, what = self.scalar(scope, d), ANY
        elif kind == 1:
            value, what = self.tensor(scope, d), ANY
        elif kind == 2 and len(scope.indices) < MAX_BINDERS and scope.gens < MAX_GENS:
            name, n = self.binder(scope)
            value, what = iv.gen(name, n, self.positive(scope.bind(name, n, True), d)), POSITIVE
        else:
            value, what = self.pair_value(scope, d), ANY
        t = self.let_name(scope)
        inner = scope.with_var(Var(t, value.type), what)
        body = body_of(inner)
        if t not in body.free_vars and body.type == ():  # make the body read the bound value
            body = body + self.to_scalar(Var(t, value.type), inner)
        if self.choose(0, 1):
            return iv.let(t, value, body)
        return iv.let(t, value, lambda _: body)  # the callable form of the constructor

    # ------------------------------------------------------------------ tensors and pairs
    def tensor(self, scope: _Scope, depth: int, output: bool = False) -> Expr:
        """A gen-built tensor, or a pair of tensors (a gen over a pair body)."""
        if len(scope.indices) >= MAX_BINDERS or scope.gens >= MAX_GENS:
            name, n = self.binder(scope)
            return iv.gen(name, n, self.leaf(scope.bind(name, n, True)))
        d = depth + 1
        name, n = self.binder(scope)
        inner = scope.bind(name, n, True)
        kind = self.choose(0, 6) if depth < self.max_depth else 0
        if kind == 0:
            body = self.scalar(inner, d)
        elif kind == 1:  # nested gens
            body = self.tensor(inner, d, output)
        elif kind == 2:  # a gen over a pair body: a pair of arrays
            a = self.scalar(inner, d)
            b = self.scalar(inner, d) if not output or self.choose(0, 1) else iv.pair(self.scalar(inner, d),
                                                                                self.scalar(inner, d))
            body = iv.pair(a, b) if self.choose(0, 1) else iv.pair(b, a)
            if self.rare(3):  # a bracket over a pair
                body = iv.bracket(self.index_pred(inner, name)) * body
        elif kind == 3:  # a bracket over a tensor-valued body
            body = iv.bracket(self.index_pred(inner, name)) * self.tensor(inner, d, output)
        elif kind == 4:  # a let inside a gen, the body reading it
            body = self.let(inner, d, lambda s: self.scalar(s, d))
        elif kind == 5:
            body = iv.bracket(self.data_pred(inner)) * self.scalar(inner, d)
        else:
            body = iv.bracket(self.index_pred(inner, name)) * self.scalar(inner, d)
        return iv.gen(name, n, body)

    def pair_value(self, scope: _Scope, depth: int) -> Expr:
        kind = self.choose(0, 3)
        if kind == 0:
            return iv.pair(self.scalar(scope, depth), self.tensor(scope, depth))
        if kind == 1:
            return iv.pair(self.tensor(scope, depth), self.scalar(scope, depth))
        if kind == 2:
            return iv.pair(self.tensor(scope, depth), self.tensor(scope, depth))
        return iv.pair(iv.pair(self.scalar(scope, depth), self.tensor(scope, depth)), self.scalar(scope, depth))

    def any_value(self, scope: _Scope, depth: int) -> Expr:
        kind = self.choose(0, 2)
        if kind == 0:
            return self.scalar(scope, depth)
        if kind == 1:
            return self.tensor(scope, depth)
        return self.pair_value(scope, depth)


def pair_then_project(a: Expr, b: Expr, a_first: int) -> Expr:
    """``(a, b).fst`` or ``(b, a).snd``: ``a`` out of a pair."""
    return iv.pair(a, b).fst if a_first else iv.pair(b, a).snd


def _leading_extents(t: Any) -> set[int | None]:
    if isinstance(t, PairType):
        return _leading_extents(t.fst) | _leading_extents(t.snd)
    return {t[0] if t else None}


def _read(e: Expr, indices: list[Affine]) -> Expr:
    for a in indices:
        e = e[a]
    return e


def _compare(op: str, a: Expr, b: Expr) -> Pred:
    return {"gt": a > b, "lt": a < b, "ge": a >= b, "le": a <= b}[op]


def _true_pred(which: int) -> Pred:
    return BoolConst(True) if which == 0 else BoolConst(True) | BoolConst(False)


def build(choose: Choose, scalar: bool = True, max_depth: int = 5, max_extent: int = MAX_EXTENT,
          index_prefix: str = "i") -> GeneratedProgram:
    """A program from a stream of decisions (see :func:`programs`)."""
    recorded: list[int] = []

    def recording(lo: int, hi: int) -> int:
        value = choose(lo, hi)
        assert lo <= value <= hi
        recorded.append(value)
        return value

    shapes = {"x": (recording(1, max_extent),), "w": (recording(1, max_extent),),
              "A": (recording(1, max_extent), recording(1, max_extent)), "s": ()}
    extents = sorted({n for shape in shapes.values() for n in shape})
    g = _Builder(recording, max_depth, max_extent, index_prefix, extents)
    scope = _Scope(variables=tuple((iv.var(name, shape), INPUT) for name, shape in shapes.items()))
    if scalar:
        kind = recording(0, 3)
        if kind == 0:
            expr = g.scalar(scope, 0)
        elif kind == 1:
            expr = g.summation(scope, 0)
        elif kind == 2:
            expr = g.let(scope, 0, lambda inner: g.scalar(inner, 1))
        else:
            expr = g.summation(scope, 0) * iv.var("s")
    else:
        kind = recording(0, 5)
        if kind == 0:
            expr = g.tensor(scope, 0, output=True)
        elif kind == 1:
            expr = iv.pair(g.tensor(scope, 1, output=True), g.scalar(scope, 1))
        elif kind == 2:
            expr = iv.pair(g.scalar(scope, 1), iv.pair(g.tensor(scope, 1, output=True), g.tensor(scope, 1)))
        elif kind == 3:
            expr = g.let(scope, 0, lambda inner: g.tensor(inner, 1, output=True))
        elif kind == 4:  # a data bracket over a whole tensor
            expr = iv.bracket(g.data_pred(scope)) * g.tensor(scope, 1, output=True)
        else:
            expr = pair_then_project(g.tensor(scope, 1), g.any_value(scope, 1), recording(0, 1))
            if expr.type == ():
                expr = iv.gen(f"{index_prefix}_out", 2, expr)
    options = {"scalar": scalar, "max_depth": max_depth, "max_extent": max_extent, "index_prefix": index_prefix}
    return GeneratedProgram(expr, {n: t for n, t in expr.free_vars.items()}, expr.type == (), tuple(recorded), options)


def random_program(rng: np.random.Generator, scalar: bool = True, max_depth: int = 5,
                   max_extent: int = MAX_EXTENT) -> GeneratedProgram:
    """The same generator driven by a NumPy generator (decisions uniform, no shrinking)."""
    return build(lambda lo, hi: int(rng.integers(lo, hi + 1)), scalar=scalar, max_depth=max_depth,
                 max_extent=max_extent)


# ----------------------------------------------------------------------------- coverage

#: every construct the generator is meant to produce (see :func:`features`)
FEATURES = frozenset({
    "gen", "gen-in-gen", "gen-in-gen-in-gen", "gen-of-pair", "sum", "sum-in-sum-bracket", "bracket-index",
    "bracket-data", "bracket-tensor", "bracket-pair", "bracket-true", "data-guarded-in-bracket", "and", "or", "cmp ==", "cmp <",
    "cmp <=", "cmp >", "cmp >=", "index-coeff-2", "index-coeff--1", "index-constant", "index-offset",
    "index-two-vars", "index-var", "guarded-read", "add", "mul", "neg", "div", "const", "exp", "log", "sin", "cos", "sqrt",
    "tanh", "relu", "recip", "let-scalar", "let-tensor", "let-pair", "let-in-binder", "let-read-affine",
    "let-shadow", "pair", "pair-nested", "proj", "access-gen", "access-pair", "shadowed-index", "scalar-input",
})


def features(expr: Expr) -> set[str]:
    """The constructs (names in :data:`FEATURES`) a program contains."""
    found: set[str] = set()

    def pred(p: Pred, binders: tuple[str, ...], lets: tuple[str, ...]) -> None:
        if isinstance(p, Cmp):
            found.add(f"cmp {p.op}")
        elif isinstance(p, BoolConst):
            found.add("bracket-true")
        elif isinstance(p, (And, Or)):
            found.add("and" if isinstance(p, And) else "or")
            if isinstance(p, And) and any(isinstance(q, DataCmp) for q in (p.a, p.b)) and any(
                    isinstance(q, Cmp) for q in (p.a, p.b)):
                found.add("data-guarded-in-bracket")
            pred(p.a, binders, lets)
            pred(p.b, binders, lets)
        for operand in pred_children_exprs(p) if isinstance(p, DataCmp) else []:
            visit(operand, binders, lets, 0)

    def visit(e: Expr, binders: tuple[str, ...], lets: tuple[str, ...], gens: int) -> None:
        if isinstance(e, Gen):
            found.add("gen")
            found.update({2: {"gen-in-gen"}, 3: {"gen-in-gen", "gen-in-gen-in-gen"}}.get(min(gens + 1, 3), set()))
            if isinstance(e.type, PairType):
                found.add("gen-of-pair")
        if isinstance(e, Sum):
            found.add("sum")
            if isinstance(e.body, Sum) and isinstance(e.body.body, Bracket):
                found.add("sum-in-sum-bracket")
        if isinstance(e, (Gen, Sum)):
            if e.index in binders:
                found.add("shadowed-index")
            visit(e.body, binders + (e.index,), lets, gens + isinstance(e, Gen))
            return
        if isinstance(e, Bracket):
            found.add("bracket-data" if any(isinstance(q, DataCmp) for q in _atoms(e.pred)) else "bracket-index")
            if isinstance(e.type, PairType):
                found.add("bracket-pair")
            elif e.type != ():
                found.add("bracket-tensor")
            if isinstance(e.body, Access) or isinstance(e.body, Bracket) and isinstance(e.body.body, Access):
                found.add("guarded-read")
            pred(e.pred, binders, lets)
        elif isinstance(e, Access):
            a = e.idx
            coeffs = [c for _, c in a.coeffs]
            found.add("index-constant" if not coeffs else "index-offset" if a.const else "index-var")
            found.update({2: "index-coeff-2", -1: "index-coeff--1"}[c] for c in coeffs if c in (2, -1))
            if len(coeffs) >= 2:
                found.add("index-two-vars")
            if isinstance(e.target, Gen):
                found.add("access-gen")
            if isinstance(e.target.type, PairType):
                found.add("access-pair")
            root = e.target
            while isinstance(root, (Access, Proj)):
                root = root.target if isinstance(root, Access) else root.arg
            if isinstance(root, Var) and root.name in lets and (coeffs or a.const):
                found.add("let-read-affine")
        elif isinstance(e, Let):
            t = e.value.type
            found.add("let-pair" if isinstance(t, PairType) else "let-scalar" if t == () else "let-tensor")
            if binders:
                found.add("let-in-binder")
            if e.name in lets or e.name in ("x", "w", "A", "s"):
                found.add("let-shadow")
            visit(e.value, binders, lets, gens)
            visit(e.body, binders, lets + (e.name,), gens)
            return
        elif isinstance(e, Add):
            found.add("add")
        elif isinstance(e, Mul):
            if isinstance(e.a, Const) and e.a.value == -1.0:
                found.add("neg")
            elif isinstance(e.b, Func) and e.b.name == "recip":
                found.add("div")
            else:
                found.add("mul")
        elif isinstance(e, Func):
            found.add(e.name)
        elif isinstance(e, Const):
            found.add("const")
        elif isinstance(e, Pair):
            found.add("pair")
            if isinstance(e.a.type, PairType) or isinstance(e.b.type, PairType):
                found.add("pair-nested")
        elif isinstance(e, Proj):
            found.add("proj")
        elif isinstance(e, Var) and e.type == () and e.name == "s" and "s" not in lets:
            found.add("scalar-input")
        for c in e.children:
            visit(c, binders, lets, gens)

    visit(expr, (), (), 0)
    return found


def _atoms(p: Pred) -> list[Pred]:
    if isinstance(p, (And, Or)):
        return _atoms(p.a) + _atoms(p.b)
    return [p]


def recurrence(steps: int, n: int) -> tuple[Expr, Var, Var]:
    """The benchmark recurrence of the compile-cost experiments (``experiments/iverson_recurrence.py``):
    ``z₀ = x``, ``z_{t+1}[i] = tanh(Σ_j A[i, j]·z_t[j]) + 0.5·z_t[i]``, ``f = Σ_i z_T[i]``, one ``let``
    per step; returns ``(f, A, x)``.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.iverson import evaluate
    >>> f, A, x = recurrence(2, 3)
    >>> z = np.ones(3)
    >>> for _ in range(2):
    ...     z = np.tanh(np.eye(3) @ z) + 0.5 * z
    >>> bool(np.isclose(evaluate(f, A=np.eye(3), x=np.ones(3)), z.sum()))
    True
    """
    A, x = Var("A", (n, n)), Var("x", (n,))
    i, j = iv.index("i"), iv.index("j")
    previous: Expr = x
    values = []
    for t in range(steps):
        values.append((f"z{t}", iv.gen(i, n, iv.tanh(iv.sum(j, n, A[i, j] * previous[j])) + 0.5 * previous[i])))
        previous = Var(f"z{t}", (n,))
    f: Expr = iv.sum(i, n, previous[i])
    for name, value in reversed(values):
        f = iv.let(name, value, f)
    return f, A, x

