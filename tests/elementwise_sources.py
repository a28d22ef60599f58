"""Random elementwise-defined functions (paper 000 §5) for the property tests of :mod:`jacacc.elementwise`.

:func:`elementwise_functions` is a hypothesis strategy and :func:`random_function` a
seeded plain generator of the same :class:`Case`: a source ``f[i, j] = …``, the
extents of its indices and one array per argument.  Every decision goes through
one ``choose(lo, hi)`` callable (:class:`_Builder`), drawn from hypothesis (so
failures shrink; 0 is always the simplest choice: a plain read) or from NumPy.

The sources cover the reads the paper's derivation has to invert: non-unimodular
maps ``x[2*i]``, constant offsets ``x[i + 3]``, zero coefficients ``x[0*i + 1]``
and constant indices ``x[2]``, flattened indices ``x[3*s + t]`` (the coefficient
is the other index's extent), diagonals ``y[j, j]``, negative coefficients
``x[5 - i]``, sums of two indices ``x[i + k]``; sums with constant and
index-dependent bounds (``sum(k, 0, i, …)``, ``sum(k, i, i + 2, …)``,
``sum(k, 2, i, …)``, ``sum(k, 0, 3 - i, …)``, empty for some or all elements),
nested sums; one argument read under several maps; one to three function
indices of extents 1 to 4; ``+ - * / **`` (exponents 2, 3, -1, -2), unary
minus, ``exp tanh sin cos`` and ``log sqrt abs`` of expressions kept away from
0.  Values stay well-conditioned for central differences: arrays are uniform in
[-1, 1], divisors and the arguments of ``log``, ``sqrt``, ``abs`` and negative
powers are ``c + e`` with ``c`` above a bound of ``|e|`` (or ``1 + e**2``), and ``exp`` sees only
arguments bounded by 2 (otherwise ``exp(tanh(e))``).

Each argument's shape is its largest index read (found by enumerating every
element and every sum's range) plus 1 plus a random slack of 0 to 2 per axis, so
every read is in range and some elements may never be read: :attr:`Case.read`
marks the elements that are, and :meth:`Case.reference` evaluates the function
by the generator's own tree, independently of the package.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

__all__ = ["FEATURES", "Case", "build", "elementwise_functions", "random_function"]

#: what the generator records about a source (every one appears within a few hundred seeded cases)
FEATURES = frozenset({
    "stride", "offset", "zero coefficient", "constant index", "flattened", "diagonal", "negative coefficient",
    "two indices", "several maps", "sum", "nested sum", "index-dependent bound", "empty range", "+", "-", "*", "/",
    "**2", "**3", "**-1", "**-2", "unary minus", "exp", "tanh", "sin", "cos", "log", "sqrt", "abs", "constant",
    "rank 2", "three indices",
})

Choose = Callable[[int, int], int]
Env = Mapping[str, int]
Arrays = Mapping[str, np.ndarray]

FUNCTION_INDICES = ("i", "j", "s")
SUM_INDICES = ("k", "m")
ARGUMENTS = ("x", "y", "w")
NUMBERS = ("2", "0.5", "1.5", "3", "0.25")


@dataclass
class Case:
    """A random elementwise function: ``define(case.source, case.sizes)`` with ``case.arrays``."""

    source: str
    sizes: dict[str, int]
    arrays: dict[str, np.ndarray]
    #: per argument, True where some element of the function (for some value of its sums' indices) reads it
    read: dict[str, np.ndarray]
    features: frozenset[str]
    evaluate: Callable[[Env, Arrays], float] = field(repr=False)

    def reference(self, arrays: Arrays | None = None) -> np.ndarray:
        """The function's values computed from the generator's own expression tree, point by point."""
        arrays = self.arrays if arrays is None else arrays
        names = list(self.sizes)
        out = np.empty(tuple(self.sizes.values()))
        for point in np.ndindex(out.shape):
            out[point] = self.evaluate(dict(zip(names, point, strict=True)), arrays)
        return out


@dataclass(frozen=True)
class _Expr:
    text: str
    atom: bool  # needs no parentheses as an operand
    bound: float  # a bound of |value| over the arrays' range [-1, 1]
    value: Callable[[Env, Arrays], float]


@dataclass(frozen=True)
class _Scope:
    indices: tuple[str, ...]
    points: tuple[dict[str, int], ...]  # every binding of the indices in scope that is reached
    extents: Mapping[str, int]  # the function's indices
    sums: int = 0


def _paren(e: _Expr) -> str:
    return e.text if e.atom else f"({e.text})"


def _term(c: int, v: str, first: bool) -> str:
    size = "" if abs(c) == 1 else f"{abs(c)}*"
    if first:
        return f"{'-' if c < 0 else ''}{size}{v}"
    return f" {'-' if c < 0 else '+'} {size}{v}"


def affine_text(coeffs: Mapping[str, int], const: int) -> str:
    """``2*i - k + 3``; a leading negative term with a positive constant reads ``3 - i``."""
    terms = [(v, c) for v, c in coeffs.items() if c]
    if not terms:
        return str(const)
    if terms[0][1] < 0 < const:
        return str(const) + "".join(_term(c, v, False) for v, c in terms)
    text = "".join(_term(c, v, n == 0) for n, (v, c) in enumerate(terms))
    if const:
        text += f" {'-' if const < 0 else '+'} {abs(const)}"
    return text


def _affine(coeffs: Mapping[str, int], const: int) -> Callable[[Env], int]:
    items = [(v, c) for v, c in coeffs.items() if c]
    return lambda env: const + sum(c * env[v] for v, c in items)


class _Builder:
    """One source: every decision through ``choose``."""

    def __init__(self, choose: Choose, max_depth: int) -> None:
        self.choose = choose
        self.max_depth = max_depth
        self.features: set[str] = set()
        self.reads: dict[str, set[tuple[int, ...]]] = {}
        self.maps: dict[str, set[str]] = {}

    def pick(self, items):
        return items[self.choose(0, len(items) - 1)]

    def build(self) -> tuple[str, dict[str, int], dict[str, int], _Expr]:
        indices = FUNCTION_INDICES[:self.choose(1, 3)]
        sizes = {v: self.choose(1, 4) for v in indices}
        self.ranks = {a: self.choose(1, 2) for a in ARGUMENTS[:self.choose(1, 3)]}
        if len(indices) == 3:
            self.features.add("three indices")
        grid = itertools.product(*(range(sizes[v]) for v in indices))
        points = tuple(dict(zip(indices, p, strict=True)) for p in grid)
        body = self.expr(_Scope(indices, points, sizes), self.choose(1, self.max_depth))
        if any(len(maps) > 1 for maps in self.maps.values()):
            self.features.add("several maps")
        return f"f[{', '.join(indices)}] = {body.text}", sizes, {a: r for a, r in self.ranks.items()
                                                               if a in self.reads}, body

    # ------------------------------------------------------------------ reads
    def index(self, scope: _Scope) -> tuple[str, Callable[[Env], int]]:
        """One axis of a read: its text and its value, never below 0 where the read is reached."""
        v = self.pick(scope.indices)
        kind = self.choose(0, 6)
        coeffs: dict[str, int] = {v: 1}
        extra = 0
        if kind == 1:
            coeffs = {v: self.choose(2, 3)}
            self.features.add("stride")
        elif kind == 2:
            extra = self.choose(1, 3)
            self.features.add("offset")
        elif kind == 3:
            const = self.choose(0, 3)
            if self.choose(0, 1):
                self.features.add("zero coefficient")
                return f"0*{v} + {const}", lambda env: const
            self.features.add("constant index")
            return str(const), lambda env: const
        elif kind == 4:
            coeffs = {v: -self.choose(1, 2)}
            self.features.add("negative coefficient")
        elif kind in (5, 6):
            others = [w for w in scope.indices if w != v]
            function_others = [w for w in others if w in scope.extents]
            if kind == 5 and v in scope.extents and function_others:
                w = self.pick(function_others)
                coeffs = {v: scope.extents[w], w: 1}  # x[E*s + t], E the extent of t: a flattened index
                self.features.add("flattened")
            elif others:
                coeffs = {v: 1, self.pick(others): 1}
                self.features.add("two indices")
        linear = _affine(coeffs, 0)
        low = min((linear(p) for p in scope.points), default=0)
        const = max(-low, 0) + extra
        return affine_text(coeffs, const), _affine(coeffs, const)

    def read(self, scope: _Scope) -> _Expr:
        name = self.pick(list(self.ranks))
        axes = [self.index(scope)]
        for _ in range(self.ranks[name] - 1):
            if self.choose(0, 3) == 3:
                axes.append(axes[0])  # y[j, j]: a diagonal
                self.features.add("diagonal")
            else:
                axes.append(self.index(scope))
        if len(axes) == 2:
            self.features.add("rank 2")
        text = f"{name}[{', '.join(t for t, _ in axes)}]"
        self.maps.setdefault(name, set()).add(text)
        seen = self.reads.setdefault(name, set())
        for p in scope.points:
            seen.add(tuple(f(p) for _, f in axes))
        functions = [f for _, f in axes]
        return _Expr(text, True, 1.0, lambda env, arrays: float(arrays[name][tuple(f(env) for f in functions)]))

    # ------------------------------------------------------------------ expressions
    def leaf(self, scope: _Scope) -> _Expr:
        if self.choose(0, 5) < 5:
            return self.read(scope)
        text = self.pick(NUMBERS)
        self.features.add("constant")
        return _Expr(text, True, float(text), lambda env, arrays: float(text))

    def expr(self, scope: _Scope, depth: int) -> _Expr:
        kind = self.choose(0, 14) if depth > 0 else 0
        if kind == 0:
            return self.leaf(scope)
        if kind >= 12:
            return self.summation(scope, depth) if scope.sums < len(SUM_INDICES) else self.leaf(scope)
        a = self.expr(scope, depth - 1)
        if kind in (1, 2, 3, 4):
            b = self.expr(scope, depth - 1)
            return self.binary("+-*/"[kind - 1], a, b)
        if kind == 5:
            return self.power(a)
        if kind == 6:
            self.features.add("unary minus")
            return _Expr(f"-{_paren(a)}", False, a.bound, lambda env, arrays: -a.value(env, arrays))
        if kind == 7:
            return self.exp(a)
        if kind in (8, 9, 10):
            name = ("tanh", "sin", "cos")[kind - 8]
            self.features.add(name)
            fun = getattr(math, name)
            return _Expr(f"{name}({a.text})", True, 1.0, lambda env, arrays: fun(a.value(env, arrays)))
        return self.positive(a)

    def binary(self, op: str, a: _Expr, b: _Expr) -> _Expr:
        self.features.add(op)
        left, right = a.value, b.value
        if op == "+":
            return _Expr(f"{a.text} + {_paren(b)}", False, a.bound + b.bound,
                         lambda env, arrays: left(env, arrays) + right(env, arrays))
        if op == "-":
            return _Expr(f"{a.text} - {_paren(b)}", False, a.bound + b.bound,
                         lambda env, arrays: left(env, arrays) - right(env, arrays))
        if op == "*":
            return _Expr(f"{_paren(a)} * {_paren(b)}", False, a.bound * b.bound,
                         lambda env, arrays: left(env, arrays) * right(env, arrays))
        c = math.floor(b.bound) + 1  # the divisor c + b is at least 1 away from 0
        return _Expr(f"{_paren(a)} / ({c} + {_paren(b)})", False, a.bound,
                     lambda env, arrays: left(env, arrays) / (c + right(env, arrays)))

    def power(self, a: _Expr) -> _Expr:
        p = (2, 3, -1, -2)[self.choose(0, 3)]
        self.features.add(f"**{p}")
        if p > 0 and a.bound > 2:
            inner = a.value
            a = _Expr(f"tanh({a.text})", True, 1.0, lambda env, arrays: math.tanh(inner(env, arrays)))
        base = a.value
        if p > 0:
            return _Expr(f"{_paren(a)}**{p}", False, a.bound ** p, lambda env, arrays: base(env, arrays) ** p)
        c = math.floor(a.bound) + 1
        return _Expr(f"({c} + {_paren(a)})**{p}", False, 1.0, lambda env, arrays: (c + base(env, arrays)) ** p)

    def exp(self, a: _Expr) -> _Expr:
        self.features.add("exp")
        inner = a.value
        if a.bound > 2:
            return _Expr(f"exp(tanh({a.text}))", True, math.e,
                         lambda env, arrays: math.exp(math.tanh(inner(env, arrays))))
        return _Expr(f"exp({a.text})", True, math.exp(a.bound), lambda env, arrays: math.exp(inner(env, arrays)))

    def positive(self, a: _Expr) -> _Expr:
        """``log``, ``sqrt`` or ``abs`` of an expression at least 1 away from 0."""
        name = ("log", "sqrt", "abs")[self.choose(0, 2)]
        self.features.add(name)
        inner = a.value
        c = math.floor(a.bound) + 1
        if name == "abs" and self.choose(0, 1):  # the negative branch: abs(a - c)
            return _Expr(f"abs({a.text} - {c})", True, a.bound + c, lambda env, arrays: abs(inner(env, arrays) - c))
        if name != "abs" and self.choose(0, 1):  # log(1 + a**2)
            fun = getattr(math, name)
            return _Expr(f"{name}(1 + {_paren(a)}**2)", True, 1 + a.bound ** 2,
                         lambda env, arrays: fun(1 + inner(env, arrays) ** 2))
        fun = {"log": math.log, "sqrt": math.sqrt, "abs": abs}[name]
        return _Expr(f"{name}({c} + {_paren(a)})", True, 2 * c, lambda env, arrays: fun(c + inner(env, arrays)))

    def summation(self, scope: _Scope, depth: int) -> _Expr:
        k = SUM_INDICES[scope.sums]
        v = self.pick(scope.indices)
        kind = self.choose(0, 5)
        c = self.choose(0, 3)
        lo, hi = ({}, 0), ({}, c)  # sum(k, 0, c, …)
        if kind == 1:
            hi = ({v: 1}, 0)  # sum(k, 0, i, …)
        elif kind == 2:
            lo, hi = ({v: 1}, 0), ({v: 1}, min(c, 2))  # sum(k, i, i + c, …)
        elif kind == 3:
            lo, hi = ({}, max(c, 1)), ({v: 1}, 0)  # sum(k, c, i, …): empty for i < c
        elif kind == 4:
            lo, hi = ({v: 1}, 0), ({}, min(c, 2))  # sum(k, i, c, …): empty for i > c
        elif kind == 5:
            hi = ({v: -1}, c)  # sum(k, 0, c - i, …)
        if kind:
            self.features.add("index-dependent bound")
        low, high = _affine(*lo), _affine(*hi)
        ranges = [(p, low(p), high(p)) for p in scope.points]
        if any(a > b for _, a, b in ranges):
            self.features.add("empty range")
        self.features.add("nested sum" if scope.sums else "sum")
        inner = _Scope((*scope.indices, k), tuple({**p, k: n} for p, a, b in ranges for n in range(a, b + 1)),
                       scope.extents, scope.sums + 1)
        if depth > 1 and inner.sums < len(SUM_INDICES) and self.choose(0, 2) == 2:
            body = self.summation(inner, depth - 1)  # sum(k, …, sum(m, …, …)): directly nested
        else:
            body = self.expr(inner, depth - 1)
        count = max((b - a + 1 for _, a, b in ranges), default=0)
        value = body.value

        def total(env: Env, arrays: Arrays) -> float:
            return sum(value({**env, k: n}, arrays) for n in range(low(env), high(env) + 1))

        text = f"sum({k}, {affine_text(*lo)}, {affine_text(*hi)}, {body.text})"
        return _Expr(text, True, max(count, 0) * body.bound, total)


def build(choose: Choose, values: np.random.Generator, max_depth: int = 4) -> Case:
    """One :class:`Case`: the source's decisions from ``choose``, the arrays' values from ``values``."""
    builder = _Builder(choose, max_depth)
    source, sizes, ranks, body = builder.build()
    arrays, read = {}, {}
    for name, rank in ranks.items():
        seen = builder.reads[name]
        shape = tuple((max((p[axis] for p in seen), default=0) + 1) + choose(0, 2) for axis in range(rank))
        mask = np.zeros(shape, dtype=bool)
        for p in seen:
            mask[p] = True
        arrays[name] = values.uniform(-1.0, 1.0, shape)
        read[name] = mask
    return Case(source, sizes, arrays, read, frozenset(builder.features), body.value)


@st.composite
def elementwise_functions(draw: st.DrawFn, max_depth: int = 4) -> Case:
    """Random elementwise functions with their arrays (:mod:`this module <tests.elementwise_sources>`)."""
    seed = draw(st.integers(0, 2**32 - 1))
    return build(lambda lo, hi: draw(st.integers(lo, hi)), np.random.default_rng(seed), max_depth)


def random_function(seed: int, max_depth: int = 4) -> Case:
    """The same generator driven by a seeded NumPy generator (reproducible without hypothesis)."""
    rng = np.random.default_rng(seed)
    return build(lambda lo, hi: int(rng.integers(lo, hi + 1)), rng, max_depth)
