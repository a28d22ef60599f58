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
output carrying all its cotangents as a batch (the identity seed; one row for a
scalar function) or one pushforward sweep per input, whichever side is smaller,
each vertex's Jacobian summed before it is pulled back once.  :func:`chain` and :func:`add_partials` still accept maps —
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
from collections import OrderedDict
from typing import Any

from jacacc.tensor.batching import batched
from jacacc.tensor.expr import Tensor, einsum, index_letters, zeros
from jacacc.tensor.factor import Factor, FactorSum, add_factors, materialize, product_of
from jacacc.tensor.operators import placeholder

__all__ = ["Composed", "FactorMap", "LinearPartial", "OperatorPartial", "Summed",
           "accumulate_by_sweeps", "add_partials", "chain"]

Shape = tuple[int, ...]


Jacobian = Factor | FactorSum


def _plus(x: Jacobian | None, y: Jacobian | None) -> Jacobian | None:
    if x is None:
        return y
    return x if y is None else add_factors(x, y)[0]


def _jacobian(tensor: Tensor, batch_shape: Shape, shape: Shape, reverse: bool) -> Factor:
    """A tensor of shape ``batch_shape + shape`` as the factor ∂start/∂v (``reverse``: the
    batch axes are ``start``'s, its ``out``) or ∂v/∂start (the batch axes its ``inp``)."""
    b, v = index_letters(len(batch_shape)), index_letters(len(shape), len(batch_shape))
    if reverse:
        return Factor.from_letters(tensor, b + v, b, v, batch_shape, shape)
    return Factor.from_letters(tensor, b + v, v, b, shape, batch_shape)


def _batch_first(jac: Jacobian, batch_shape: Shape, reverse: bool) -> Tensor:
    """A sweep's Jacobian written out with the batch axes in front (the seeds' axes)."""
    dense = materialize(jac)
    if reverse:
        return dense
    nv = dense.ndim - len(batch_shape)
    letters = index_letters(dense.ndim)
    return einsum(f"{letters}->{letters[nv:]}{letters[:nv]}", dense)


class LinearPartial:
    """A partial ∂v/∂u given by its action on a sweep's Jacobian (a factor; ``None`` is zero):
    ``pushforward`` takes ∂u/∂start to ∂v/∂start, ``pullback`` takes ∂start/∂v to ∂start/∂u.
    The axes of ``start`` (the seeds) are a batch that general functions carry along
    (:mod:`jacacc.tensor.batching`)."""

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

    def pushforward(self, jac: Jacobian | None, batch_shape: Shape) -> Jacobian | None:
        raise NotImplementedError

    def pullback(self, jac: Jacobian | None, batch_shape: Shape) -> Jacobian | None:
        raise NotImplementedError

    def layout(self) -> str:
        return f"linear map {self.inp_shape} -> {self.out_shape}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.layout()})"


class OperatorPartial(LinearPartial):
    """∂(output ``node``)/∂(argument ``k``) of a general function: its operator's
    pushforward and pullback (:class:`~jacacc.tensor.operators.Operator`), batched."""

    def __init__(self, node: Tensor, k: int) -> None:
        from jacacc.tensor.operators import get_operator, outputs_of

        self.node, self.k = node, k
        self.operator = get_operator(node.param[0])
        self.options = dict(node.param[1])
        self.index = node.param[2]
        self.outputs = outputs_of(node)
        self.out_shape, self.inp_shape = node.shape, node.args[k].shape

    def pushforward(self, jac: Jacobian | None, batch_shape: Shape) -> Jacobian | None:
        if jac is None:
            return None
        tangent = placeholder(self.inp_shape)
        tangents = [tangent if m == self.k else zeros(a.shape) for m, a in enumerate(self.node.args)]
        pushed = self.operator.pushforward(self.outputs, self.node.args, tangents, **self.options)[self.index]
        if pushed.is_zero:
            return None
        (b,) = batched([pushed], {tangent: _batch_first(jac, batch_shape, False)}, batch_shape)
        return _jacobian(b, batch_shape, self.out_shape, False)

    def pullback(self, jac: Jacobian | None, batch_shape: Shape) -> Jacobian | None:
        return None if jac is None else self.joint_pullback({self.index: jac}, batch_shape)

    def joint_pullback(self, jacobians: dict[int, Jacobian], batch_shape: Shape) -> Jacobian | None:
        """Argument ``k``'s pullback from those of several outputs of the application
        (output index → ∂start/∂output), through one call of the pullback."""
        seeds, pulled_all = _symbolic_pullback(self.operator, self.outputs, self.node.args, self.options,
                                               tuple(sorted(jacobians)))
        pulled = pulled_all[self.k]
        if pulled.is_zero:
            return None
        bound = {seeds[i]: _batch_first(jac, batch_shape, True) for i, jac in jacobians.items()}
        (b,) = batched([pulled], bound, batch_shape)
        return _jacobian(b, batch_shape, self.inp_shape, True)


#: the symbolic pullbacks of the applications met last (:func:`_symbolic_pullback`)
_PULLBACKS: OrderedDict[tuple, tuple[dict[int, Tensor], tuple[Tensor, ...]]] = OrderedDict()
PULLBACKS_KEPT = 16


def _symbolic_pullback(operator: Any, outputs: tuple[Tensor, ...], args: tuple[Tensor, ...], options: dict,
                       seeded: tuple[int, ...]) -> tuple[dict[int, Tensor], tuple[Tensor, ...]]:
    """An application's pullback to every argument from placeholder cotangents of its ``seeded``
    outputs (the placeholders by output index, and the arguments' cotangents), built once for all
    its arguments' edges: each edge of ``np.array`` of n traced scalars (a concatenation of n pieces)
    built the whole transpose, n slices, to keep one — n² nodes, 78 s to differentiate a loop of
    998 windows twice.  The last :data:`PULLBACKS_KEPT` are kept (the key holds its tensors, so
    an entry never answers for another application)."""
    key = (outputs, args, tuple(sorted(options.items(), key=lambda kv: kv[0])), seeded)
    try:
        hit = _PULLBACKS.get(key)
    except TypeError:  # an option that does not hash: built afresh
        key, hit = None, None
    if hit is not None:
        _PULLBACKS.move_to_end(key)
        return hit
    seeds = {i: placeholder(outputs[i].shape) for i in seeded}
    given = tuple(seeds.get(i, zeros(o.shape)) for i, o in enumerate(outputs))
    result = (seeds, tuple(operator.pullback(outputs, args, given, **options)))
    if key is not None:
        _PULLBACKS[key] = result
        while len(_PULLBACKS) > PULLBACKS_KEPT:
            _PULLBACKS.popitem(last=False)
    return result


class FactorMap(LinearPartial):
    """A :class:`~jacacc.tensor.factor.Factor` (or a sum of them) seen as a linear map:
    applied by the chain rule's product, its δs kept symbolic."""

    def __init__(self, factor: Factor | FactorSum) -> None:
        self.factor = factor
        shape = factor.shape
        self.out_shape, self.inp_shape = shape[: len(factor.out)], shape[len(factor.out):]

    def pushforward(self, jac: Jacobian | None, batch_shape: Shape) -> Jacobian | None:
        return None if jac is None or self.factor.is_zero else product_of(self.factor, jac)[0]

    def pullback(self, jac: Jacobian | None, batch_shape: Shape) -> Jacobian | None:
        return None if jac is None or self.factor.is_zero else product_of(jac, self.factor)[0]


class Composed(LinearPartial):
    """``left ∘ right``: ∂w/∂v · ∂v/∂u."""

    def __init__(self, left: LinearPartial, right: LinearPartial) -> None:
        self.left, self.right = left, right
        self.out_shape, self.inp_shape = left.out_shape, right.inp_shape

    def pushforward(self, jac: Jacobian | None, batch_shape: Shape) -> Jacobian | None:
        return self.left.pushforward(self.right.pushforward(jac, batch_shape), batch_shape)

    def pullback(self, jac: Jacobian | None, batch_shape: Shape) -> Jacobian | None:
        return self.right.pullback(self.left.pullback(jac, batch_shape), batch_shape)


class Summed(LinearPartial):
    """``a + b``: two partials of the same edge (absorption), one of them a general function's map."""

    def __init__(self, a: LinearPartial, b: LinearPartial) -> None:
        self.a, self.b = a, b
        self.out_shape, self.inp_shape = a.out_shape, a.inp_shape

    def pushforward(self, jac: Jacobian | None, batch_shape: Shape) -> Jacobian | None:
        return _plus(self.a.pushforward(jac, batch_shape), self.b.pushforward(jac, batch_shape))

    def pullback(self, jac: Jacobian | None, batch_shape: Shape) -> Jacobian | None:
        return _plus(self.a.pullback(jac, batch_shape), self.b.pullback(jac, batch_shape))


Partial = Factor | FactorSum | LinearPartial


def _as_map(p: Partial) -> LinearPartial:
    if isinstance(p, LinearPartial):
        return p
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


# ---------------------------------------------------------------------------- sweeps over operator edges
def _shapes(p: Partial) -> tuple[Shape, Shape]:
    """(shape of the edge's head, shape of its tail) of a partial ∂head/∂tail."""
    if isinstance(p, LinearPartial):
        return p.out_shape, p.inp_shape
    return p.shape[: len(p.out)], p.shape[len(p.out):]  # a FactorSum's out: its first term's


def accumulate_by_sweeps(partials: dict[tuple, Partial], inputs: list, outputs: list, order: list) -> dict[tuple, Jacobian]:
    """∂output/∂input for every pair, from a graph whose edges carry factors and linear
    maps, by one batched reverse sweep per output (seeded with the identity on its
    axes: all its cotangents at once) or one batched forward sweep per input, whichever
    side has fewer elements — reverse-mode accumulation over the DAG, each vertex's
    Jacobian summed before it is pulled back once, so the work is linear in the graph
    per sweep (composing the maps edge by edge instead would enumerate paths), and
    the result is never assembled from one-hot pieces.

    A sweep's Jacobians are factors: across the factors' edges the chain rule's
    products keep their δs (the identity seed through diagonals stays a diagonal);
    a general function writes its argument out and applies its derivative to the
    whole batch (:mod:`jacacc.tensor.batching`).  ``order`` is a topological order of
    the vertices.

    Raises
    ------
    UnsupportedOperationError
        A general function without a batching rule on the way, and more than
        :data:`~jacacc.tensor.batching.UNROLL_LIMIT` seeds.
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
    reverse = out_size <= in_size
    result: dict[tuple, Jacobian] = {}
    for start in (outputs if reverse else inputs):
        if start not in shape:
            continue
        side = shape[start]
        letters = index_letters(len(side))
        seed = Factor.from_letters(None, "", letters, letters, side, side)  # the identity: every seed at once
        reached = _sweep(partials, preds if reverse else succs, order[::-1] if reverse else order,
                         start, seed, side, reverse)
        for e in (inputs if reverse else outputs):
            if e not in shape:
                continue
            jac = reached.get(e)
            if jac is None:
                out_shape, inp_shape = (side, shape[e]) if reverse else (shape[e], side)
                out_l, inp_l = index_letters(len(out_shape)), index_letters(len(inp_shape), len(out_shape))
                jac = Factor.from_letters(zeros(out_shape + inp_shape), out_l + inp_l, out_l, inp_l,
                                          out_shape, inp_shape)
            result[(e, start) if reverse else (start, e)] = jac
    return result


def _sweep(partials: dict, neighbours: dict, order: list, start, seed: Factor, batch_shape: Shape,
           reverse: bool) -> dict:
    """The Jacobians ∂start/∂v (``reverse``) or ∂v/∂start reached from ``start``.

    In a reverse sweep the Jacobians of all outputs of one operator application
    (gelqf's Q and L) are pulled back through its ``vjp`` together, once, when the
    sweep reaches the argument: calling it per output would repeat the shared work.
    """
    value: dict = {start: seed}
    # argument vertex -> (application's outputs, argument position) -> (a partial, {output index: Jacobian})
    pending: dict = {}
    for v in order:
        for p, jacobians in pending.pop(v, {}).values():
            value[v] = _plus(value.get(v), p.joint_pullback(jacobians, batch_shape))
        jac = value.get(v)
        if jac is None:
            continue
        for w in neighbours.get(v, ()):
            p = partials[(w, v)] if reverse else partials[(v, w)]
            if reverse and isinstance(p, OperatorPartial):
                key = (tuple(id(o) for o in p.outputs), p.k)  # the partial held below keeps the ids live
                _, jacobians = pending.setdefault(w, {}).setdefault(key, (p, {}))
                jacobians[p.index] = _plus(jacobians.get(p.index), jac)
                continue
            m = _as_map(p)
            value[w] = _plus(value.get(w), m.pullback(jac, batch_shape) if reverse else m.pushforward(jac, batch_shape))
    return value
