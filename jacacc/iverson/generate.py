"""Random well-typed programs of the tensor language, for property tests and the cheap-gradient experiment.

One generator, two drivers: :class:`Chooser` is the source of every random
decision — :class:`RandomChooser` draws from a seeded NumPy generator (the
experiment), and a test wraps hypothesis' ``data.draw`` in the same interface
(so failures shrink).  Programs use every construct: affine reads with
coefficients 0, 1, 2, −1 and offsets (kept in range by their binders' extents
or by a guarding bracket), nested ⊞ and Σ, index brackets with ``= < ≤ > ≥``,
``&`` and ``|``, data brackets, ``+ − · /``, every black-box function (``log``
and ``sqrt`` of positive arguments, ``exp`` of bounded ones), ``let`` inside
and outside loops, pairs, reads of generated tensors, and shadowed indices.
Inputs are drawn in [0.5, 1.5].

Examples
--------
>>> import numpy as np, jacacc.iverson as iv
>>> program = random_program(RandomChooser(np.random.default_rng(0)), scalar=True)
>>> value = iv.evaluate(program.expr, **program.arrays(np.random.default_rng(1)))
>>> isinstance(value, float)
True
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from jacacc.iverson.syntax import (
    Affine,
    Expr,
    Pred,
    Var,
    bracket,
    cos,
    exp,
    gen,
    index,
    let,
    log,
    pair,
    relu,
    sin,
    sqrt,
    tanh,
    var,
)
from jacacc.iverson.syntax import sum as iv_sum

__all__ = ["Chooser", "Program", "RandomChooser", "random_program"]


class Chooser(Protocol):
    """Where a generator's random decisions come from."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``."""


class RandomChooser:
    """Decisions drawn from a NumPy random generator."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))


@dataclass
class Program:
    """A generated program and the shapes of its inputs."""

    expr: Expr
    inputs: dict[str, tuple[int, ...]]

    def arrays(self, rng: np.random.Generator) -> dict[str, Any]:
        """Random inputs in [0.5, 1.5] (scalars as floats)."""
        out: dict[str, Any] = {}
        for name, shape in self.inputs.items():
            value = rng.uniform(0.5, 1.5, size=shape)
            out[name] = float(value) if shape == () else value
        return out


@dataclass
class _Scope:
    indices: list[tuple[str, int]] = field(default_factory=list)  # innermost last
    tensors: list[Var] = field(default_factory=list)  # inputs and let-bound variables


class _Generator:
    def __init__(self, choose: Chooser, max_extent: int, max_depth: int) -> None:
        self.c = choose
        self.max_extent = max_extent
        self.max_depth = max_depth
        self.names = itertools.count()

    def pick(self, items: Sequence[Any]) -> Any:
        return items[self.c.integer(0, len(items) - 1)]

    def extent(self) -> int:
        return self.c.integer(1, self.max_extent)

    def index_name(self, scope: _Scope) -> str:
        # now and then reuse a name already bound: the inner binder shadows it
        if scope.indices and self.c.integer(0, 7) == 0:
            return scope.indices[0][0]
        return f"i{next(self.names)}"

    # ---------------------------------------------------------------- reads
    def index_into(self, extent: int, scope: _Scope) -> tuple[Affine, list[Pred]]:
        """An index expression for an axis of ``extent`` and the guards that keep it in range."""
        visible = _visible(scope)
        kind = self.c.integer(0, 6) if visible else 0
        if kind == 0:
            return Affine((), self.c.integer(0, extent - 1)), []
        v, n = self.pick(visible)
        i = index(v)
        if kind == 1:  # i, guarded where the binder is longer than the axis
            return i, ([i <= extent - 1] if n > extent else [])
        if kind == 2:  # i + c
            c = self.c.integer(1, 2)
            return i + c, ([i + c <= extent - 1] if n - 1 + c > extent - 1 else [])
        if kind == 3:  # 2 i
            return 2 * i, ([2 * i < extent] if 2 * (n - 1) > extent - 1 else [])
        if kind == 4:  # extent - 1 - i  (coefficient -1)
            return extent - 1 - i, ([i <= extent - 1] if n > extent else [])
        if kind == 5:  # i - 1, guarded below
            return i - 1, ([i >= 1] + ([i - 1 <= extent - 1] if n - 2 > extent - 1 else []))
        # i + j of two visible indices
        w, m = self.pick(visible)
        j = index(w)
        return i + j, ([i + j <= extent - 1] if (n - 1) + (m - 1) > extent - 1 else [])

    def read(self, scope: _Scope) -> Expr:
        t = self.pick(scope.tensors)
        guards: list[Pred] = []
        out: Expr = t
        for extent in t.shape:
            a, g = self.index_into(extent, scope)
            guards += g
            out = out[a]
        for g in guards:
            out = bracket(g) * out
        return out

    # ---------------------------------------------------------------- scalars
    def scalar(self, scope: _Scope, depth: int) -> Expr:
        if depth >= self.max_depth:
            return self.read(scope) if self.c.integer(0, 4) else self.pick([0.5, 1.0, 2.0, -1.5]) * self.read(scope)
        kind = self.c.integer(0, 13)
        d = depth + 1
        if kind <= 1:
            return self.read(scope)
        if kind == 2:
            return self.scalar(scope, d) + self.scalar(scope, d)
        if kind == 3:
            return self.scalar(scope, d) - self.scalar(scope, d)
        if kind == 4:
            return self.scalar(scope, d) * self.scalar(scope, d)
        if kind == 5:
            a = self.scalar(scope, d)
            return self.scalar(scope, d) / (a * a + 1.0)
        if kind == 6:
            return self.function(self.scalar(scope, d))
        if kind == 7:
            return self.summation(scope, d)
        if kind == 8:
            return self.guarded(scope, d)
        if kind == 9:
            return self.scalar_let(scope, d)
        if kind == 10:
            p = pair(self.scalar(scope, d), self.tensor(scope, d))
            return p.fst * self.read_whole(p.snd, scope) if self.c.integer(0, 1) else -p.fst
        if kind == 11:  # read a generated tensor directly
            t = self.tensor(scope, d)
            a, g = self.index_into(t.shape[0], scope)
            out = self.read_whole(t[a], scope)
            for guard in g:
                out = bracket(guard) * out
            return out
        if kind == 12:
            gate = self.read(scope)
            return bracket(gate > 0.9) * self.scalar(scope, d)  # a data bracket
        return -self.scalar(scope, d)

    def read_whole(self, t: Expr, scope: _Scope) -> Expr:
        """A scalar from a tensor expression by indexing every remaining axis in range."""
        out = t
        while out.type != ():
            a, g = self.index_into(out.shape[0], scope)
            out = out[a]
            for guard in g:
                out = bracket(guard) * out
        return out

    def function(self, a: Expr) -> Expr:
        name = self.pick(["exp", "log", "sin", "cos", "sqrt", "tanh", "relu"])
        if name == "exp":
            return exp(tanh(a))  # bounded argument: no overflow in finite differences
        if name == "log":
            return log(a * a + 0.5)
        if name == "sqrt":
            return sqrt(a * a + 0.5)
        return {"sin": sin, "cos": cos, "tanh": tanh, "relu": relu}[name](a)

    def summation(self, scope: _Scope, depth: int) -> Expr:
        name, n = self.index_name(scope), self.extent()
        inner = _Scope(scope.indices + [(name, n)], scope.tensors)
        body = self.scalar(inner, depth)
        if self.c.integer(0, 2) == 0:
            body = bracket(self.predicate(inner, name)) * body
        return iv_sum(name, n, body)

    def predicate(self, scope: _Scope, name: str) -> Pred:
        """An index comparison involving ``name`` (and possibly an outer index)."""
        k = index(name)
        others = [v for v, _ in _visible(scope) if v != name]
        other = index(self.pick(others)) if others else Affine((), 1)
        kind = self.c.integer(0, 6)
        if kind == 0:
            return k == other
        if kind == 1:
            return k < other
        if kind == 2:
            return 2 * k + 1 == other
        if kind == 3:
            return (k >= 1) & (k <= other)
        if kind == 4:
            return (k == 0) | (k > other)
        if kind == 5:
            return k + other >= 2
        return k != other

    def guarded(self, scope: _Scope, depth: int) -> Expr:
        visible = _visible(scope)
        if not visible:
            return self.scalar(scope, depth)
        v, _ = self.pick(visible)
        return bracket(self.predicate(scope, v)) * self.scalar(scope, depth)

    def scalar_let(self, scope: _Scope, depth: int) -> Expr:
        name = f"y{next(self.names)}"
        value = self.tensor(scope, depth) if self.c.integer(0, 2) else self.scalar(scope, depth)
        bound = Var(name, value.type)
        inner = _Scope(scope.indices, scope.tensors + ([bound] if value.type != () else []))
        body = self.scalar(inner, depth)
        if value.type == ():
            body = body * bound
        return let(name, value, body)

    # ---------------------------------------------------------------- tensors
    def tensor(self, scope: _Scope, depth: int) -> Expr:
        name, n = self.index_name(scope), self.extent()
        inner = _Scope(scope.indices + [(name, n)], scope.tensors)
        if depth < self.max_depth and self.c.integer(0, 3) == 0:
            body = self.tensor(inner, depth + 1)
        else:
            body = self.scalar(inner, depth + 1)
        if self.c.integer(0, 4) == 0:
            body = bracket(self.predicate(inner, name)) * body  # a bracket over a tensor-valued body too
        return gen(name, n, body)


def _visible(scope: _Scope) -> list[tuple[str, int]]:
    """Index names in scope, each with the extent of its innermost binder."""
    seen: dict[str, int] = {}
    for name, n in scope.indices:
        seen[name] = n
    return list(seen.items())


def random_program(choose: Chooser, scalar: bool = True, max_extent: int = 4, max_depth: int = 3) -> Program:
    """A random closed, well-typed program whose reads are in range (``check`` accepts it).

    ``scalar=True`` gives a scalar program (for gradients); otherwise a tensor or
    a pair.  Extents are drawn in ``[1, max_extent]``.
    """
    g = _Generator(choose, max_extent, max_depth)
    inputs = {"x": (g.extent(),), "A": (g.extent(), g.extent()), "s": ()}
    tensors = [var(name, shape) for name, shape in inputs.items() if shape != ()]
    scope = _Scope([], tensors)
    s = var("s", ())
    if scalar:
        body = g.summation(scope, 0) if choose.integer(0, 3) else g.scalar(scope, 0)
        if choose.integer(0, 3) == 0:
            body = body * s
        expr = body
    else:
        kind = choose.integer(0, 2)
        if kind == 0:
            expr = g.tensor(scope, 0)
        elif kind == 1:
            expr = pair(g.tensor(scope, 1), g.scalar(scope, 1))
        else:
            expr = g.tensor(scope, 0) if choose.integer(0, 1) else g.summation(scope, 0) * s
    used = set(expr.free_vars)
    return Program(expr, {k: v for k, v in inputs.items() if k in used})
