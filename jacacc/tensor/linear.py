"""Partials that are linear maps: general functions' derivatives, applied rather than stored.

The partial ∂C/∂A of a general function ``C = f(A)`` (paper 002, Theorems 6
and 9) is a tensor of order ``ord(C) + ord(A)``; for the linear-algebra
operators of paper 004 it is dense (``n⁴`` entries for a Cholesky factor) and
nothing needs it written out: the chain rule only applies it to a tangent
(pushforward) or applies its transpose to a cotangent (pullback).  An edge of
the tensor graph whose partial is such a map carries a :class:`LinearPartial`
instead of a :class:`~jacacc.tensor.factor.Factor`.

Elimination never multiplies through such an edge: the vertices next to a
linear map are left out of the elimination order, and the graph left over is
accumulated by sweeps (:func:`accumulate_by_sweeps`): one pullback sweep per
output element (one for a scalar function) or one pushforward sweep per input
element, whichever are fewer, each vertex's cotangents summed before they are
pulled back once.  :func:`chain` and :func:`add_partials` still accept maps —
the heuristics price candidate eliminations through them (a composition costs
0: it is applied, and priced in the derivative expression's FLOPs, by the
sweeps).  A sum of factors stays a
:class:`~jacacc.tensor.factor.FactorSum` (:func:`~jacacc.tensor.factor.add_factors`)
and is never a reason to sweep: only general functions' maps are.

Examples
--------
>>> from jacacc.tensor.expr import var, unary
>>> from jacacc.tensor.factor import Factor
>>> a = var("a", (2,))
>>> e = Factor.from_letters(unary("exp", a), "i", "i", "i", (2,), (2,))
>>> chain(e, e)[0].layout()          # two factors: an ordinary product
'T[i] -> [i|i]'
"""

from __future__ import annotations

import math

import numpy as np

from jacacc.errors import UnsupportedOperationError
from jacacc.tensor.expr import Tensor, add, const, einsum, symbol, zeros
from jacacc.tensor.factor import Factor, FactorSum, add_factors, materialize, product, product_of

__all__ = ["Composed", "FactorMap", "LinearPartial", "OperatorPartial", "Summed", "UNROLL_LIMIT",
           "accumulate_by_sweeps", "add_partials", "chain"]

#: Most sweeps :func:`accumulate_by_sweeps` builds to write a Jacobian out.
UNROLL_LIMIT = 4096

Shape = tuple[int, ...]


def _letters(n: int, start: int = 0) -> str:
    return "".join(symbol(k) for k in range(start, start + n))


def _sum(x: Tensor | None, y: Tensor | None) -> Tensor | None:
    if x is None:
        return y
    return x if y is None else add(x, y)


class LinearPartial:
    """A partial ∂v/∂u given by its action: ``pushforward`` (tangent of u → tangent
    of v) and ``pullback`` (cotangent of v → cotangent of u); ``None`` is zero."""

    out_shape: Shape
    inp_shape: Shape

    @property
    def shape(self) -> Shape:
        return self.out_shape + self.inp_shape

    @property
    def labels(self) -> tuple[int, ...]:
        # its tensor order if written out: cross-country's key puts it last
        return tuple(range(len(self.shape)))

    is_zero = False

    def pushforward(self, tangent: Tensor | None) -> Tensor | None:
        raise NotImplementedError

    def pullback(self, cotangent: Tensor | None) -> Tensor | None:
        raise NotImplementedError

    def layout(self) -> str:
        return f"linear map {self.inp_shape} -> {self.out_shape}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.layout()})"


class OperatorPartial(LinearPartial):
    """∂(output ``node``)/∂(argument ``k``) of a general function: its operator's
    declared ``jvp`` and ``vjp`` (:class:`~jacacc.tensor.operators.Operator`)."""

    def __init__(self, node: Tensor, k: int) -> None:
        from jacacc.tensor.operators import get_operator, outputs_of

        self.node, self.k = node, k
        self.operator = get_operator(node.param[0])
        self.options = dict(node.param[1])
        self.index = node.param[2]
        self.outputs = outputs_of(node)
        self.out_shape, self.inp_shape = node.shape, node.args[k].shape

    def pushforward(self, tangent: Tensor | None) -> Tensor | None:
        if tangent is None:
            return None
        tangents = [None] * len(self.node.args)
        tangents[self.k] = tangent
        return self.operator.jvp(self.outputs, self.node.args, tuple(tangents), **self.options)[self.index]

    def pullback(self, cotangent: Tensor | None) -> Tensor | None:
        return None if cotangent is None else self.joint_pullback({self.index: cotangent})

    def joint_pullback(self, cotangents: dict[int, Tensor]) -> Tensor | None:
        """Argument ``k``'s cotangent from the cotangents of several outputs of the
        application (output index → cotangent), through one call of the ``vjp``."""
        given = tuple(cotangents.get(i) for i in range(len(self.outputs)))
        return self.operator.vjp(self.outputs, self.node.args, given, **self.options)[self.k]


class FactorMap(LinearPartial):
    """A :class:`~jacacc.tensor.factor.Factor` seen as a linear map (its δs stay symbolic)."""

    def __init__(self, factor: Factor) -> None:
        self.factor = factor
        shape = factor.shape
        self.out_shape, self.inp_shape = shape[: len(factor.out)], shape[len(factor.out):]

    def pushforward(self, tangent: Tensor | None) -> Tensor | None:
        if tangent is None or self.factor.is_zero:
            return None
        letters = _letters(len(self.inp_shape))
        column = Factor.from_letters(tangent, letters, letters, "", self.inp_shape, ())
        return materialize(product(self.factor, column)[0])

    def pullback(self, cotangent: Tensor | None) -> Tensor | None:
        if cotangent is None or self.factor.is_zero:
            return None
        letters = _letters(len(self.out_shape))
        row = Factor.from_letters(cotangent, letters, "", letters, (), self.out_shape)
        return materialize(product(row, self.factor)[0])


class Composed(LinearPartial):
    """``left ∘ right``: ∂w/∂v · ∂v/∂u."""

    def __init__(self, left: LinearPartial, right: LinearPartial) -> None:
        self.left, self.right = left, right
        self.out_shape, self.inp_shape = left.out_shape, right.inp_shape

    def pushforward(self, tangent: Tensor | None) -> Tensor | None:
        return self.left.pushforward(self.right.pushforward(tangent))

    def pullback(self, cotangent: Tensor | None) -> Tensor | None:
        return self.right.pullback(self.left.pullback(cotangent))


class Summed(LinearPartial):
    """``a + b``: two partials of the same edge (absorption), one of them a general function's map."""

    def __init__(self, a: LinearPartial, b: LinearPartial) -> None:
        self.a, self.b = a, b
        self.out_shape, self.inp_shape = a.out_shape, a.inp_shape

    def pushforward(self, tangent: Tensor | None) -> Tensor | None:
        return _sum(self.a.pushforward(tangent), self.b.pushforward(tangent))

    def pullback(self, cotangent: Tensor | None) -> Tensor | None:
        return _sum(self.a.pullback(cotangent), self.b.pullback(cotangent))


Partial = Factor | FactorSum | LinearPartial


def _as_map(p: Partial) -> LinearPartial:
    if isinstance(p, LinearPartial):
        return p
    if isinstance(p, FactorSum):
        total: LinearPartial = FactorMap(p.terms[0])
        for t in p.terms[1:]:
            total = Summed(total, FactorMap(t))
        return total
    return FactorMap(p)


def chain(left: Partial, right: Partial) -> tuple[Partial, int]:
    """The chain rule ∂w/∂v · ∂v/∂u on any two partials, with the FLOPs built
    (a composition with a linear map is deferred: 0 now, priced when written out)."""
    if not isinstance(left, LinearPartial) and not isinstance(right, LinearPartial):
        return product_of(left, right)
    return Composed(_as_map(left), _as_map(right)), 0


def add_partials(old: Partial, new: Partial) -> tuple[Partial, int]:
    """``old + new`` on any two partials of the same edge, with the FLOPs built: factors by
    :func:`~jacacc.tensor.factor.add_factors` (one factor where that stores no more than
    the terms apart, else a :class:`~jacacc.tensor.factor.FactorSum`), a general
    function's map and anything as a :class:`Summed`."""
    if not isinstance(old, LinearPartial) and not isinstance(new, LinearPartial):
        return add_factors(old, new)
    if old.shape != new.shape:
        raise ValueError(f"cannot add partials of shapes {old.shape} and {new.shape}")
    return Summed(_as_map(old), _as_map(new)), 0


def _one_hot(shape: Shape, flat: int) -> Tensor:
    e = np.zeros(math.prod(shape))
    e[flat] = 1.0
    return const(e.reshape(shape))


# ---------------------------------------------------------------------------- sweeps over operator edges
def _shapes(p: Partial) -> tuple[Shape, Shape]:
    """(shape of the edge's head, shape of its tail) of a partial ∂head/∂tail."""
    if isinstance(p, LinearPartial):
        return p.out_shape, p.inp_shape
    return p.shape[: len(p.out)], p.shape[len(p.out):]  # a FactorSum's out: its first term's


def accumulate_by_sweeps(partials: dict[tuple, Partial], inputs: list, outputs: list, order: list) -> dict[tuple, Factor]:
    """∂output/∂input for every pair, from a graph whose edges carry factors and linear
    maps, by reverse sweeps (one per output element) or forward sweeps (one per input
    element), whichever are fewer — reverse-mode accumulation over the DAG, each
    vertex's cotangents summed before they are pulled back once, so the work is
    linear in the graph per sweep (composing the maps edge by edge instead would
    enumerate paths).

    ``order`` is a topological order of the vertices; the results are written-out
    factors (all axes stored).

    Raises
    ------
    UnsupportedOperationError
        When both sides need more than :data:`UNROLL_LIMIT` sweeps.
    """
    shape: dict = {}
    preds: dict = {}
    succs: dict = {}
    for (u, v), p in partials.items():
        shape[v], shape[u] = _shapes(p)
        preds.setdefault(v, []).append(u)
        succs.setdefault(u, []).append(v)
    out_size = sum(math.prod(shape.get(o, ())) for o in outputs)
    in_size = sum(math.prod(shape.get(i, ())) for i in inputs)
    if min(out_size, in_size) > UNROLL_LIMIT:
        raise UnsupportedOperationError(
            f"writing out a Jacobian with {out_size} outputs and {in_size} inputs through a general function "
            f"(a linear-algebra operator) takes min({out_size}, {in_size}) applications of its derivative, more "
            f"than {UNROLL_LIMIT}; use vjp or jvp, or a scalar function")
    reverse = out_size <= in_size
    result: dict[tuple, Factor] = {}
    for start in (outputs if reverse else inputs):
        if start not in shape:
            continue
        ends = inputs if reverse else outputs
        side = shape[start]
        columns: dict = {e: [] for e in ends}
        for flat in range(math.prod(side)):
            seed = const(1.0) if not side else _one_hot(side, flat)
            reached = _sweep(partials, preds if reverse else succs, order if not reverse else order[::-1],
                             start, seed, reverse)
            for e in ends:
                columns[e].append((seed, reached.get(e)))
        for e in ends:
            if e not in shape:
                continue
            pair = (e, start) if reverse else (start, e)
            result[pair] = _assembled(columns[e], shape[pair[1]], shape[pair[0]], reverse)
    return result


def _sweep(partials: dict, neighbours: dict, order: list, start, seed: Tensor, reverse: bool) -> dict:
    """Cotangents (``reverse``) or tangents reached from ``start`` seeded with ``seed``.

    In a reverse sweep the cotangents of all outputs of one operator application
    (gelqf's Q and L) are pulled back through its ``vjp`` together, once, when the
    sweep reaches the argument: calling it per output would repeat the shared work.
    """
    value = {start: seed}
    # argument vertex -> (application's outputs, argument position) -> (a partial, {output index: cotangent})
    pending: dict = {}
    for v in order:
        for p, cotangents in pending.pop(v, {}).values():
            value[v] = _sum(value.get(v), p.joint_pullback(cotangents))
        x = value.get(v)
        if x is None:
            continue
        for w in neighbours.get(v, ()):
            p = partials[(w, v)] if reverse else partials[(v, w)]
            if reverse and isinstance(p, OperatorPartial):
                key = (tuple(id(o) for o in p.outputs), p.k)  # the partial held below keeps the ids live
                _, cotangents = pending.setdefault(w, {}).setdefault(key, (p, {}))
                cotangents[p.index] = _sum(cotangents.get(p.index), x)
                continue
            m = _as_map(p)
            value[w] = _sum(value.get(w), m.pullback(x) if reverse else m.pushforward(x))
    return value


def _assembled(columns: list, out_shape: Shape, inp_shape: Shape, reverse: bool) -> Factor:
    """The partial ∂out/∂inp from one sweep per seed element: Σ seed ⊗ reached."""
    out_l, inp_l = _letters(len(out_shape)), _letters(len(inp_shape), len(out_shape))
    if reverse and not out_shape or not reverse and not inp_shape:
        (_, reached), = columns
        tensor = zeros(out_shape + inp_shape) if reached is None else reached
    else:
        terms = [einsum(f"{out_l},{inp_l}->{out_l}{inp_l}", *((seed, r) if reverse else (r, seed)))
                 for seed, r in columns if r is not None]
        tensor = add(*terms) if terms else zeros(out_shape + inp_shape)
    return Factor.from_letters(tensor, out_l + inp_l, out_l, inp_l, out_shape, inp_shape)
