"""Transposition of linear tensor expressions: a pullback from a pushforward.

A pushforward ``Ċ = f'(A)·Ȧ`` is an expression *linear* in the tangent
placeholders ``Ȧ``; its transpose applied to a cotangent ``C̄`` is the pullback
``Ā = f'(A)ᵀ·C̄``.  As in JAX (Frostig, Johnson, Maclaurin, Paszke & Radul,
"Decomposing reverse-mode automatic differentiation", 2021), an operator then
declares one direction, its ``jvp``, and gets the other by walking the
expression backwards, each linear node handing its cotangent to the operand
that depends on the tangent:

``einsum``
    the paper's generic multiplication (paper 002 §2) with one operand
    depending on the tangent: the product of the cotangent with the other
    operands, written to that operand's indices — a repeated index (a
    diagonal read) becomes a Kronecker δ, an index summed by that operand
    alone (a reduction) a vector of ones (a broadcast);
``add``
    the cotangent to every term (fan-out);
``unary``
    the linear elementwise functions: ``add``, ``sub``, ``neg``, ``pos``,
    ``mul`` and ``div`` by a factor that does not depend on the tangent,
    ``where`` with a fixed condition;
``op``
    an operator linear in the arguments that depend on the tangent
    (:attr:`~jacacc.tensor.operators.Operator.linear_in`): its declared
    ``transpose``, once per application for all its outputs.

Anything else that depends on the tangent is not linear in it, and is refused
by name.  Cotangents reaching a node are summed once, before it hands them on.

Examples
--------
>>> from jacacc.tensor.expr import einsum, var
>>> A, t, c = var("A", (2, 3)), var("t", (3,)), var("c", (2,))
>>> (tbar,) = transpose_linear([einsum("ij,j->i", A, t)], [t], [c])
>>> print(tbar)
c *(i,ij,j) A
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jacacc.errors import TraceError
from jacacc.tensor.expr import (
    Tensor,
    add,
    const,
    delta,
    einsum,
    elementwise,
    nodes_of,
    ones,
    scale,
    symbol,
    zeros,
)
from jacacc.tensor.operators import Operator, get_operator, outputs_of

__all__ = ["transpose_linear"]

Dependent = Callable[[Tensor], bool]


def transpose_linear(roots: Sequence[Tensor], inputs: Sequence[Tensor],
                     cotangents: Sequence[Tensor]) -> list[Tensor]:
    """The cotangents of ``inputs`` of the linear map ``inputs ↦ roots``, applied to ``cotangents``.

    Parameters
    ----------
    roots : sequence of Tensor
        Expressions linear in ``inputs`` (a pushforward: the tangents of an operator's outputs).
    inputs : sequence of Tensor
        The variables the map is linear in (tangent placeholders).
    cotangents : sequence of Tensor
        One per root, of its shape (the symbolic zero where a root has none).

    Returns
    -------
    list of Tensor
        One cotangent per input, of its shape: ``Σ_r (∂root_r/∂input)ᵀ · cotangent_r``.

    Raises
    ------
    TraceError
        A root is not linear in ``inputs`` (a product of two tangents, a non-linear
        function of one, an operator applied to one outside its ``linear_in``).
    """

    order = nodes_of(roots)
    linear = {id(x) for x in inputs}
    for node in order:
        if id(node) not in linear and any(id(a) in linear for a in node.args):
            linear.add(id(node))
    arrived: dict[int, list[Tensor]] = {}
    for root, ct in zip(roots, cotangents, strict=True):
        if root.shape != ct.shape:
            raise ValueError(f"transpose_linear: a cotangent of shape {ct.shape} for a root of shape {root.shape}")
        if id(root) in linear and not ct.is_zero:
            arrived.setdefault(id(root), []).append(ct)
    position = {id(n): k for k, n in enumerate(order)}
    inputs_ids = {id(x) for x in inputs}

    def total(node: Tensor) -> Tensor:
        return add(*arrived.pop(id(node), []), zeros(node.shape))

    def dependent(node: Tensor) -> bool:
        return id(node) in linear

    for node in reversed(order):
        if id(node) not in linear or id(node) in inputs_ids:
            continue
        if node.kind == "op":
            outputs = outputs_of(node)
            # one application, all its outputs at once: at the earliest of them in ``order``, every
            # reader of every output has handed on its cotangent
            if min(position.get(id(o), len(order)) for o in outputs) != position[id(node)]:
                continue
            cts = [total(o) if id(o) in position else zeros(o.shape) for o in outputs]
            if all(c.is_zero for c in cts):
                continue
            pulled = _operator_transpose(get_operator(node.param[0]), node, cts, dependent)
        else:
            ct = total(node)
            if ct.is_zero:
                continue
            rule = _RULES.get(node.kind)
            if rule is None:
                raise TraceError(f"transpose: a {node.kind} node ({node.describe()}) is not linear in the tangent")
            pulled = rule(node, ct, dependent)
        for a, c in zip(node.args, pulled, strict=True):
            if dependent(a) and not c.is_zero:
                arrived.setdefault(id(a), []).append(c)
    return [total(x) for x in inputs]


def _operator_transpose(operator: Operator, node: Tensor, cts: list[Tensor], dependent: Dependent) -> tuple[Tensor, ...]:
    linear = operator.linear_positions(len(node.args))
    outside = [k for k, a in enumerate(node.args) if dependent(a) and k not in linear]
    if outside:
        raise TraceError(f"transpose: operator {operator.name!r} is not linear in its argument {outside[0]}, which "
                         f"depends on the tangent")
    return operator.transposed(node.args, cts, **dict(node.param[1]))


def _einsum_transpose(node: Tensor, ct: Tensor, dependent: Dependent) -> tuple[Tensor, ...]:
    """The cotangent of the one operand that depends on the tangent: the product of ``ct`` with
    the others, written to that operand's indices."""
    lhs, out = node.param.split("->")
    inputs = lhs.split(",")
    moving = [k for k, a in enumerate(node.args) if dependent(a)]
    if len(moving) != 1:
        raise TraceError(f"transpose: einsum {node.param!r} multiplies {len(moving)} operands that depend on the "
                         f"tangent; it is not linear in it")
    (k,) = moving
    used = set(node.param)
    fresh = (c for c in map(symbol, range(len(used) + 2 * len(inputs[k]) + 1)) if c not in used)
    elsewhere = set(out).union(*(inputs[m] for m in range(len(inputs)) if m != k))
    terms = [out] + [inputs[m] for m in range(len(inputs)) if m != k]
    operands = [ct] + [a for m, a in enumerate(node.args) if m != k]
    target, seen = "", set()
    for c, n in zip(inputs[k], node.args[k].shape, strict=True):
        if c in seen:  # a diagonal read: written back along the diagonal
            new = next(fresh)
            terms.append(c + new)
            operands.append(delta(n))
            target += new
            continue
        seen.add(c)
        target += c
        if c not in elsewhere:  # summed by this operand alone: broadcast back
            terms.append(c)
            operands.append(ones((n,)))
    pulled = einsum(",".join(terms) + "->" + target, *operands)
    return tuple(pulled if m == k else zeros(a.shape) for m, a in enumerate(node.args))


def _add_transpose(node: Tensor, ct: Tensor, dependent: Dependent) -> tuple[Tensor, ...]:
    return tuple(ct for _ in node.args)


def _elementwise_transpose(node: Tensor, ct: Tensor, dependent: Dependent) -> tuple[Tensor, ...]:
    name, p = node.param
    flags = [dependent(a) for a in node.args]
    if name in ("pos", "stop_gradient"):  # the identity on values
        return (ct,)
    if name == "neg":
        return (scale(-1.0, ct),)
    if name == "tangent_seed":  # value 0: the zero map
        return (zeros(ct.shape),)
    if name == "add":
        return (ct, ct)
    if name == "sub":
        return (ct, scale(-1.0, ct))
    if name == "mul" and not all(flags):
        other = node.args[1] if flags[0] else node.args[0]
        c = elementwise("mul", ct, other)
        return (c, zeros(ct.shape)) if flags[0] else (zeros(ct.shape), c)
    if name == "div" and not flags[1]:
        return (elementwise("div", ct, node.args[1]), zeros(ct.shape))
    if name == "where" and not flags[0]:
        cond, nothing = node.args[0], const(0.0)
        return (zeros(ct.shape), elementwise("where", cond, ct, nothing), elementwise("where", cond, nothing, ct))
    described = name if p is None else f"{name} with parameter {p}"
    raise TraceError(f"transpose: the elementwise {described} of a tangent is not linear in it")


_RULES = {"einsum": _einsum_transpose, "add": _add_transpose, "unary": _elementwise_transpose}
