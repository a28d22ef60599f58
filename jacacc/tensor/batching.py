"""Batching a tensor expression: the same expression over a leading batch of inputs (``vmap``).

Writing out a Jacobian through general functions (:mod:`jacacc.tensor.linear`)
pulls back one cotangent per output element.  Done one by one, the sweeps
repeat the whole derivative graph per element, and a Jacobian of ``m × n``
entries costs ``m`` expressions of size ``n`` plus their assembly.  Batched,
the cotangents are the rows of one tensor with a leading batch axis per output
axis, and one sweep carries them all: each operation of a pullback becomes the
same operation on a batch (JAX's ``vmap`` of a ``vjp``; paper 002 §4's
Jacobian accumulation by sweeps with the seed matrix the identity).

:func:`batched` rebuilds the part of an expression that depends on some
placeholder variables, each bound to a tensor with ``batch_shape`` prepended:

* an einsum gets the batch letters on its batched operands and its output,
* a sum or an elementwise function gets its unbatched operands spread along
  the batch (a scalar one stays a scalar),
* a general function (:class:`~jacacc.tensor.operators.Operator`) is applied
  to the batch through its ``batch`` rule (new options for arguments with the
  leading axes: an index with full slices in front, a reshape to
  ``batch_shape + shape``), and where it has none, once per batch element
  (:func:`unrolled`), the results stacked.

Examples
--------
>>> from jacacc.tensor.expr import einsum, var
>>> ct, a = var("ct_example", (3,)), var("a", (3, 2))
>>> pulled = einsum("i,ij->j", ct, a)              # a pullback: ct · a
>>> rows = var("rows", (4, 3))                     # four cotangents at once
>>> (b,) = batched([pulled], {ct: rows}, (4,))
>>> b.shape, b.param
((4, 2), 'ki,ij->kj')
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jacacc.errors import UnsupportedOperationError
from jacacc.tensor.expr import (
    Tensor,
    add,
    einsum,
    elementwise,
    index_letters,
    nodes_of,
    ones,
    symbol,
    unary,
    zeros,
)

__all__ = ["UNROLL_LIMIT", "batched", "leading_batch", "spread", "unrolled"]

#: Most batch elements a general function without a batching rule is applied to one by one.
UNROLL_LIMIT = 4096

Shape = tuple[int, ...]


def spread(t: Tensor, batch_shape: Shape) -> Tensor:
    """``t`` repeated along leading ``batch_shape`` axes (an einsum with ones, kept symbolic).

    >>> from jacacc.tensor.expr import var
    >>> spread(var("x", (3,)), (2,)).shape
    (2, 3)
    """
    if not batch_shape:
        return t
    b, own = index_letters(len(batch_shape)), index_letters(t.ndim, len(batch_shape))
    return einsum(f"{b},{own}->{b}{own}", ones(batch_shape), t)


def leading_batch(integer_positions: tuple[int, ...] = ()) -> Any:
    """The batching rule of an operator that solves a batch of problems stacked along the same
    leading axes of every operand (the LAPACK-style routines of :mod:`jacacc.linalg`).

    An operand shared by the whole batch is spread along it; one at ``integer_positions``
    (pivot indices) holds integers that a spread, an einsum with ones, would turn to floats, so
    there the rule declines (returns None) unless that operand is batched already.

    >>> from jacacc.tensor.expr import var
    >>> rule = leading_batch(integer_positions=(1,))
    >>> args, options = rule((4,), (var("A", (4, 2, 2)), var("piv", (4, 2))), (True, True), transpose=False)
    >>> [a.shape for a in args], options
    ([(4, 2, 2), (4, 2)], {'transpose': False})
    >>> rule((4,), (var("A", (4, 2, 2)), var("piv", (2,))), (True, False)) is None
    True
    """
    def rule(batch_shape: Shape, args: Sequence[Tensor], flags: Sequence[bool],
             **options: Any) -> tuple[list[Tensor], dict[str, Any]] | None:
        if any(not flags[p] for p in integer_positions if p < len(args)):
            return None
        return [a if f else spread(a, batch_shape) for a, f in zip(args, flags, strict=True)], options
    return rule


def _batched_einsum(node: Tensor, args: list[Tensor], is_batched: list[bool], batch_shape: Shape) -> Tensor:
    inputs, out = node.param.split("->")
    used = set(node.param) - {",", "-", ">"}
    # batch letters that no subscript of the node uses
    fresh, k = [], 0
    while len(fresh) < len(batch_shape):
        c = symbol(k)
        if c not in used:
            fresh.append(c)
        k += 1
    b = "".join(fresh)
    subs = [b + s if flag else s for s, flag in zip(inputs.split(","), is_batched, strict=True)]
    return einsum(",".join(subs) + "->" + b + out, *args)


def _batched_operator(node: Tensor, args: list[Tensor], is_batched: list[bool], batch_shape: Shape) -> Tensor:
    from jacacc.tensor.operators import apply_operator, get_operator

    name, key, index = node.param
    if not batch_shape:  # no batch: the same application on the new arguments
        return apply_operator(name, args, **dict(key))[index]
    operator = get_operator(name)
    rule = operator.batch
    if rule is not None:
        made = rule(batch_shape, tuple(args), tuple(is_batched), **dict(key))
        if made is not None:
            new_args, options = made
            return apply_operator(name, list(new_args), **options)[index]
    return unrolled(lambda *xs: apply_operator(name, list(xs), **dict(key))[index], args, is_batched, batch_shape,
                    node.shape, name)


def unrolled(apply: Any, args: Sequence[Tensor], is_batched: Sequence[bool], batch_shape: Shape, shape: Shape,
             name: str) -> Tensor:
    """``apply`` once per batch element (each batched argument indexed there), the results
    (of ``shape``) stacked along the leading ``batch_shape`` axes: the batching of any function.

    Raises
    ------
    UnsupportedOperationError
        More than :data:`UNROLL_LIMIT` batch elements.
    """
    from jacacc.tensor.arrays import BasicKey, concatenate_nodes, index_node, insert_unit_axes, reshape_node

    count = math.prod(batch_shape)
    if count > UNROLL_LIMIT:
        raise UnsupportedOperationError(
            f"writing out a Jacobian through {name} takes {count} applications of its derivative, more than "
            f"{UNROLL_LIMIT}; use vjp or jvp, or a scalar function")
    if count == 0:
        return zeros(tuple(batch_shape) + tuple(shape))
    pieces = []
    for element in np.ndindex(*batch_shape):
        def at(t: Tensor, element: tuple[int, ...] = element) -> Tensor:
            rest = tuple(("s", 0, 1, n) for n in t.shape[len(element):])
            return index_node(t, BasicKey(tuple(("i", k) for k in element) + rest))

        piece = apply(*(at(a) if flag else a for a, flag in zip(args, is_batched, strict=True)))
        pieces.append(insert_unit_axes(piece, (0,)))
    stacked = pieces[0] if len(pieces) == 1 else concatenate_nodes(pieces, 0)
    return reshape_node(stacked, batch_shape + stacked.shape[1:])


def batched(roots: Sequence[Tensor], bound: Mapping[Tensor, Tensor], batch_shape: Shape) -> list[Tensor]:
    """``roots`` with each key of ``bound`` (a placeholder) replaced by its value, a tensor
    of shape ``batch_shape + placeholder.shape``: every node that depends on a placeholder
    gains the leading batch axes; the others are shared unchanged (see the module docstring).

    Returns one tensor per root, of shape ``batch_shape + root.shape`` (a root that depends
    on no placeholder is spread along the batch).
    """
    for p, v in bound.items():
        if v.shape != tuple(batch_shape) + p.shape:
            raise ValueError(f"batched: a value of shape {v.shape} for a placeholder of shape {p.shape} "
                             f"and batch {tuple(batch_shape)}")
    new: dict[int, Tensor] = {id(p): v for p, v in bound.items()}
    # A node is created after its operands, so one older than every placeholder depends on none:
    # the walk stops there instead of visiting the whole function the rule reads (a Kalman
    # filter's pullbacks, one per step, each walking every earlier step, were O(T²)).
    oldest = min((p.serial for p in bound), default=0)
    for node in _nodes_since(roots, oldest):
        if id(node) in new or not node.args:
            continue
        is_batched = [id(a) in new for a in node.args]
        if not any(is_batched):
            continue
        args = [new.get(id(a), a) for a in node.args]
        new[id(node)] = _batched_node(node, args, is_batched, tuple(batch_shape))
    return [new[id(r)] if id(r) in new else spread(r, tuple(batch_shape)) for r in roots]


def _nodes_since(roots: Sequence[Tensor], serial: int) -> list[Tensor]:
    """The nodes reachable from ``roots`` through nodes created at ``serial`` or later, operands first."""
    return nodes_of(roots, lambda node: node.serial >= serial)


def _batched_node(node: Tensor, args: list[Tensor], is_batched: list[bool], batch_shape: Shape) -> Tensor:
    if node.kind == "einsum":
        return _batched_einsum(node, args, is_batched, batch_shape)
    if node.kind == "op":
        return _batched_operator(node, args, is_batched, batch_shape)
    # a sum or an elementwise function: every operand of the node's shape, with the batch
    args = [a if flag else spread(a, batch_shape) for a, flag in zip(args, is_batched, strict=True)]
    if node.kind == "add":
        return add(*args)
    if node.kind == "unary":
        name, p = node.param
        return unary(name, args[0], p) if len(args) == 1 else elementwise(name, *args)
    raise ValueError(f"batched: no batching for nodes of kind {node.kind!r}")
