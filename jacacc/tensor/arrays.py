"""NumPy's array functions on traced tensors: reductions, shape changes, indexing, joins, sort, pad, diff.

Every function here takes the arguments NumPy's does and returns a
:class:`~jacacc.tensor.trace.Traced` (a list of them for ``split``); the
tracer finds them through its registries (``register_function``,
``register_method``, ``"__getitem__"``).  What each becomes:

**Einsums** wherever one is exact: ``sum``/``mean`` (a scaled sum) over any
axes with ``keepdims``, ``transpose``/``moveaxis``/``swapaxes``, ``squeeze``,
``expand_dims``, ``x[None]``, a ``reshape`` that only adds or drops axes of
length 1, ``broadcast_to``, ``tensordot``, ``matmul`` with broadcast batch
axes and 1-D operands, ``dot``, and the outer product inside ``kron``.  The
tensor calculus differentiates these itself and keeps their δs (compressed
Hessians stay compressed).

**Linear operators** (:class:`~jacacc.tensor.operators.Operator`) for data
movement an einsum cannot say without a dense 0/1 matrix: ``reshape``,
basic indexing (``index``: integers, slices with any step, ``...``),
advanced indexing (``gather``: integer arrays, constant boolean masks,
mixed forms — the index map is NumPy's own, taken from indexing an
``arange``), ``concatenate`` (``stack``, ``hstack``, ``vstack``), ``pad``,
``cumsum`` and the permutation of ``sort``.  Each one's pushforward is the
operator itself on the tangent and its pullback the transpose operator:
``index`` ↔ ``index_scatter``, ``gather`` ↔ ``scatter_add`` (which
accumulates repeated indices), ``pad`` ↔ a slice, ``concatenate`` ↔ slices,
``cumsum`` ↔ the reversed cumulative sum, ``reshape`` ↔ ``reshape`` back,
``take_along`` ↔ ``put_along``.  ``split`` is slices, ``diff`` a difference
of two slices.

**Nonlinear reductions** as expressions whose data-dependent parts are
*locally constant*: an operator computes weights or masks from the values at
evaluation time and they pass through the table's ``stop_gradient`` (the
identity, derivative zero), so the tensor graph has no edge into them and
they are data to every derivative — Hessians come out of the ordinary
calculus and compress:

* ``max``/``min``: ``Σ x·W`` with ``W = M / Σ M``, ``M`` the mask of the
  extremal entries — ties share the derivative equally (JAX's ``reduce_max``
  rule);
* ``prod``: with ``Z`` the mask of exact zeros, ``y = x`` off ``Z`` and 1 on
  it, the product is ``σ·exp(Σ log|y|) · P₂`` (``σ`` the sign, from a parity
  mask) where ``P₂`` is the product of the entries under ``Z``; near the
  point that product is the elementary symmetric polynomial ``e_c`` of
  ``Z∘x`` for ``c`` zeros, written for ``c <= 2``
  (``P₂ = [c=0] + [c=1]·e₁ + [c=2]·e₂``).  Value, gradient and Hessian are
  exact at any number of zeros (JAX's values); third and higher derivatives
  are exact where no reduced group holds three or more zeros;
* ``var``/``std``: ``Σ (x − mean)² / (N − ddof)`` (and its square root);
* ``sort``: ``take_along(x, argsort(x))`` with a stable argsort computed at
  evaluation time: the derivative is the same gather (JAX's convention, ties
  in index order).

**Cost.**  The gradient of a scalar function through these operators is one
reverse sweep, linear in the graph (Rosenbrock at n = 1600: microseconds per
call).  A dense Jacobian or Hessian through an operator is accumulated by
one sweep per output (or input) element (:mod:`jacacc.tensor.linear`) and
assembled from one outer product per sweep, ``n³`` in all: the dense
Rosenbrock Hessian takes 0.008 s at n = 100, 0.16 s at 400 and 12.5 s at
1600 per call (JAX: 0.02 s at 1600).  Einsum-only functions keep the
calculus's δ structure and do not sweep.

Refused, each by name in one line: ``out=``, ``where=``, ``initial=``,
non-float ``dtype=``, ``order='A'``/``'K'``, ``np.pad`` modes other than
``'constant'``, an index computed from traced values (a data-dependent
mask has a data-dependent shape), ``ndarray.sort`` (in place).

Examples
--------
>>> import numpy as np
>>> import jacacc.tensor as jt
>>> rosen = lambda x: np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
>>> jt.grad(rosen)(np.ones(4)).tolist()            # the minimum
[0.0, 0.0, 0.0, 0.0]
>>> jt.grad(lambda x: np.max(x.reshape(2, 2), axis=1).sum())(np.array([1.0, 1.0, 0.0, 3.0])).tolist()
[0.5, 0.5, 0.0, 1.0]
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc.errors import JacaccError, TraceError, UnsupportedOperationError
from jacacc.ops import array_module
from jacacc.tensor import expr as E
from jacacc.tensor.expr import Tensor, index_letters
from jacacc.tensor.operators import Operator, apply_operator, no_flops, register_operator, unary_linear
from jacacc.tensor.trace import Traced, _elementwise_product, _node, register_function, register_method

__all__ = ["BasicKey", "IndexArray", "IndexOutOfBoundsError", "broadcast_node", "concatenate_nodes", "dot_nodes", "drop_unit_axes",
           "index_node", "insert_unit_axes", "matmul_nodes", "reduce_sum", "reshape_node", "sum_", "transpose_",
           "transpose_node"]

Shape = tuple[int, ...]

#: NumPy's marker for an argument that was not passed (``initial=``, ``where=``)
_NO_VALUE = getattr(np, "_NoValue", object())


# ---------------------------------------------------------------------------- argument checks
def _axis(name: str, axis: Any, shape: Shape) -> int:
    """One axis of an array of ``shape``, negative counted from the end."""
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TraceError(f"{name}: axis must be an integer, got {axis!r}")
    if not -len(shape) <= axis < len(shape):
        raise TraceError(f"{name}: axis {axis} is out of bounds for an array of shape {shape}")
    return int(axis) % len(shape)


def _axes(name: str, axis: Any, shape: Shape) -> tuple[int, ...]:
    """Sorted distinct axes (``None``: all of them)."""
    if axis is None:
        return tuple(range(len(shape)))
    items = (axis,) if isinstance(axis, numbers.Integral) else axis
    try:
        axes = [_axis(name, a, shape) for a in items]
    except TypeError:
        raise TraceError(f"{name}: axis must be an integer or a tuple of integers, got {axis!r}") from None
    if len(set(axes)) != len(axes):
        raise TraceError(f"{name}: repeated axis in {axis!r}")
    return tuple(sorted(axes))


def _options(name: str, out: Any = None, dtype: Any = None, **options: Any) -> None:
    """Refuse, by name, the keywords whose meaning tracing cannot keep (``out=``, ``where=``, ...)."""
    if out is not None:
        raise UnsupportedOperationError(f"{name} with out= is not supported by jacacc.tensor")
    if dtype is not None and not np.issubdtype(np.dtype(dtype), np.floating):
        raise UnsupportedOperationError(f"{name} with dtype={np.dtype(dtype)} is not supported by jacacc.tensor "
                                        "(traced values are floats)")
    for key, value in options.items():
        if value is not _NO_VALUE and value is not None and not (key == "where" and value is True):
            raise UnsupportedOperationError(f"{name} with {key}= is not supported by jacacc.tensor")


def _order(name: str, order: Any) -> str:
    if order not in ("C", "F"):
        raise UnsupportedOperationError(f"{name} with order={order!r} is not supported by jacacc.tensor "
                                        "(a traced array has no memory layout; use 'C' or 'F')")
    return order


# ---------------------------------------------------------------------------- einsum building blocks
def insert_unit_axes(t: Tensor, positions: Sequence[int]) -> Tensor:
    """``t`` with axes of length 1 at ``positions`` of the result (an einsum with a tensor of ones).

    >>> insert_unit_axes(E.var("x", (3,)), (0, 2)).shape
    (1, 3, 1)
    """
    positions = sorted(positions)
    if not positions:
        return t
    letters = index_letters(t.ndim + len(positions))
    kept = "".join(c for k, c in enumerate(letters) if k not in positions)
    new = "".join(letters[k] for k in positions)
    return E.einsum(f"{kept},{new}->{letters}", t, E.ones((1,) * len(positions)))


def drop_unit_axes(t: Tensor, positions: Sequence[int]) -> Tensor:
    """``t`` without its axes of length 1 at ``positions`` (a sum over one entry).

    >>> drop_unit_axes(E.var("x", (1, 3, 1)), (0, 2)).shape
    (3,)
    """
    if not positions:
        return t
    letters = index_letters(t.ndim)
    return E.einsum(f"{letters}->" + "".join(c for k, c in enumerate(letters) if k not in positions), t)


def reduce_sum(t: Tensor, axes: Sequence[int], keepdims: bool = False) -> Tensor:
    """The sum of ``t`` over ``axes`` (an einsum), the axes kept with length 1 if ``keepdims``.

    >>> reduce_sum(E.var("x", (2, 3)), (1,), keepdims=True).shape
    (2, 1)
    """
    letters = index_letters(t.ndim)
    total = E.einsum(f"{letters}->" + "".join(c for k, c in enumerate(letters) if k not in axes), t)
    return insert_unit_axes(total, axes) if keepdims else total


def _spread(t: Tensor, axes: Sequence[int], shape: Shape) -> Tensor:
    """A reduced ``t`` (``axes`` of ``shape`` removed) broadcast back along those axes."""
    if not axes:
        return t
    letters = index_letters(len(shape))
    kept = "".join(c for k, c in enumerate(letters) if k not in axes)
    new = "".join(letters[k] for k in axes)
    return E.einsum(f"{kept},{new}->{letters}", t, E.ones(tuple(shape[k] for k in axes)))


def _hadamard(a: Tensor, b: Tensor) -> Tensor:
    s = index_letters(a.ndim)
    return E.einsum(f"{s},{s}->{s}", a, b)


def _locally_constant(t: Tensor) -> Tensor:
    """``t`` through the table's ``stop_gradient`` (the identity, derivative zero): the tensor graph
    has no edge into the result, so every derivative treats it as data."""
    return E.unary("stop_gradient", t)


def transpose_node(t: Tensor, order: Sequence[int]) -> Tensor:
    """The axes of ``t`` permuted (``order[k]`` is the input axis of output axis ``k``): an einsum.

    >>> transpose_node(E.var("x", (2, 3, 4)), (2, 0, 1)).shape
    (4, 2, 3)
    """
    letters = index_letters(t.ndim)
    return E.einsum(f"{letters}->" + "".join(letters[k] for k in order), t)


def broadcast_node(t: Tensor, shape: Shape, name: str = "np.broadcast_to") -> Tensor:
    """``t`` broadcast to ``shape`` by NumPy's rules (an einsum with a tensor of ones).

    >>> broadcast_node(E.var("x", (3, 1)), (2, 3, 4)).shape
    (2, 3, 4)
    """
    shape = tuple(int(n) for n in shape)
    try:
        if np.broadcast_shapes(t.shape, shape) != shape:
            raise ValueError
    except ValueError:
        raise TraceError(f"{name}: an array of shape {t.shape} does not broadcast to shape {shape}") from None
    if t.shape == shape:
        return t
    offset = len(shape) - t.ndim
    letters = index_letters(len(shape))
    mine = letters[offset:]
    kept = "".join(c for c, n, m in zip(mine, t.shape, shape[offset:], strict=True) if n == m)
    if kept != mine:  # a length-1 axis against a longer one: drop it, the ones below spread it
        t = E.einsum(f"{mine}->{kept}", t)
    missing = "".join(c for c in letters if c not in kept)
    return E.einsum(f"{kept},{missing}->{letters}", t, E.ones(tuple(shape[letters.index(c)] for c in missing)))


# ---------------------------------------------------------------------------- operator helpers
def _fresh(result: np.ndarray, source: np.ndarray) -> np.ndarray:
    """``result`` as an array of its own: an operator's output may be overwritten in place later
    (paper 004's LAPACK operators), which must not reach the array it was a view of."""
    if type(result) is np.ndarray:  # a view has a base; NumPy's own check costs a microsecond a call
        return result.copy() if result.base is not None and np.may_share_memory(result, source) else result
    return result.copy() if array_module((source,)).may_share_memory(result, source) else result


def _size_flops(shape: Shape, *_: Any, **__: Any) -> int:
    return math.prod(shape)


def _linear(name: str, forward: Any, shapes: Any, adjoint: Any, flops: Any = no_flops,
            batch: Any = None, device: bool = True, spelling: Any = None) -> None:
    """Register a linear operator of one argument by its transpose ``adjoint(cotangent, arg, **options)``
    (its pushforward is itself), and the options for an argument with leading batch axes
    ``batch(batch_shape, **options)`` (:mod:`jacacc.tensor.batching`)."""

    def batched(batch_shape, args, flags, **options):  # noqa: ANN001, ANN202, ANN003
        return args, batch(tuple(batch_shape), **options)

    register_operator(unary_linear(name, forward, shapes, adjoint, flops=flops,
                                   batch=None if batch is None else batched, device=device, spelling=spelling))


def _full_slices(shape: Shape) -> tuple[tuple[Any, ...], ...]:
    return tuple(("s", 0, 1, n) for n in shape)


# ---------------------------------------------------------------------------- reshape
def _new_shape(name: str, shape: Any, size: int) -> Shape:
    """The target shape of a reshape of ``size`` entries (one ``-1`` allowed, NumPy's rules)."""
    items = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    if any(isinstance(n, bool) or not isinstance(n, numbers.Integral) for n in items):
        raise TraceError(f"{name}: the new shape must be integers, got {shape!r}")
    items = tuple(int(n) for n in items)
    unknown = [k for k, n in enumerate(items) if n == -1]
    if len(unknown) > 1 or any(n < -1 for n in items):
        raise TraceError(f"{name}: cannot reshape an array of size {size} into shape {items} "
                         "(one -1 at most, no other negative length)")
    if unknown:
        known = math.prod(n for n in items if n != -1)
        if known == 0 or size % known:
            raise TraceError(f"{name}: cannot reshape an array of size {size} into shape {items}")
        items = tuple(size // known if n == -1 else n for n in items)
    if math.prod(items) != size:
        raise TraceError(f"{name}: cannot reshape an array of size {size} into shape {items}")
    return items


def reshape_node(t: Tensor, shape: Shape) -> Tensor:
    """``t`` reshaped (C order) to ``shape``: an einsum when only axes of length 1 come or go,
    else the ``reshape`` operator.

    >>> reshape_node(E.var("x", (3,)), (1, 3)).kind, reshape_node(E.var("x", (6,)), (2, 3)).kind
    ('einsum', 'op')
    """
    shape = tuple(int(n) for n in shape)
    if shape == t.shape:
        return t
    if [n for n in t.shape if n != 1] == [n for n in shape if n != 1]:
        # in C order, axes of length 1 do not change which entry comes where
        core = drop_unit_axes(t, [k for k, n in enumerate(t.shape) if n == 1])
        return insert_unit_axes(core, [k for k, n in enumerate(shape) if n == 1])
    return apply_operator("reshape", [t], shape=shape)[0]


def _reshape_in_order(t: Tensor, shape: Shape, order: str) -> Tensor:
    if order == "F":  # Fortran order is C order on the reversed axes
        back = tuple(range(t.ndim))[::-1]
        return transpose_node(reshape_node(transpose_node(t, back), shape[::-1]), tuple(range(len(shape)))[::-1])
    return reshape_node(t, shape)


def _reshape_shapes(a: Shape, shape: Shape) -> tuple[Shape]:
    if math.prod(a) != math.prod(shape):
        raise ValueError(f"reshape: cannot reshape an array of shape {a} into shape {shape}")
    return (tuple(shape),)


@register_function(np.reshape)
def _np_reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None) -> Traced:
    x = _node(a)
    target = newshape if shape is None else shape
    if target is None:
        raise TraceError("np.reshape: no shape given")
    return Traced(_reshape_in_order(x, _new_shape("np.reshape", target, x.size), _order("np.reshape", order)))


@register_method("reshape")
def _method_reshape(a: Traced, *shape: Any, order: str = "C", copy: Any = None) -> Traced:
    target = shape[0] if len(shape) == 1 and not isinstance(shape[0], numbers.Integral) else shape
    return _np_reshape(a, target, order)


@register_function(np.ravel)
def _np_ravel(a: Any, order: str = "C") -> Traced:
    x = _node(a)
    return Traced(_reshape_in_order(x, (x.size,), _order("np.ravel", order)))


@register_method("ravel", "flatten")
def _method_ravel(a: Traced, order: str = "C") -> Traced:
    return _np_ravel(a, order)


@register_function(np.squeeze)
def _np_squeeze(a: Any, axis: Any = None) -> Traced:
    x = _node(a)
    if axis is None:
        axes = tuple(k for k, n in enumerate(x.shape) if n == 1)
    else:
        axes = _axes("np.squeeze", axis, x.shape)
        if any(x.shape[k] != 1 for k in axes):
            raise TraceError(f"np.squeeze: cannot squeeze out axis {axis} of shape {x.shape}: its length is not one")
    return Traced(drop_unit_axes(x, axes))


register_method("squeeze")(_np_squeeze)


@register_function(np.expand_dims)
def _np_expand_dims(a: Any, axis: Any) -> Traced:
    x = _node(a)
    items = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    axes = _axes("np.expand_dims", items, (1,) * (x.ndim + len(items)))
    return Traced(insert_unit_axes(x, axes))


@register_function(np.transpose)
def transpose_(a: Any, axes: Any = None) -> Traced:
    """``np.transpose``, ``ndarray.transpose`` and ``.T`` (negative axes allowed): an einsum.

    Examples
    --------
    >>> import jacacc.tensor as jt
    >>> jt.jacobian(lambda x: np.transpose(x, (1, -2)))(np.ones((2, 1))).shape
    (1, 2, 2, 1)
    """
    x = _node(a)
    if axes is None:
        return Traced(transpose_node(x, tuple(range(x.ndim))[::-1]))
    try:
        order = [_axis("np.transpose", k, x.shape) for k in axes]
    except TypeError:
        raise TraceError(f"np.transpose: axes must be a sequence of integers, got {axes!r}") from None
    if sorted(order) != list(range(x.ndim)):
        raise TraceError(f"np.transpose: axes {tuple(axes)} are not a permutation of the {x.ndim} axes of shape {x.shape}")
    return Traced(transpose_node(x, order))


@register_function(np.swapaxes)
def _np_swapaxes(a: Any, axis1: Any, axis2: Any) -> Traced:
    x = _node(a)
    i, j = _axis("np.swapaxes", axis1, x.shape), _axis("np.swapaxes", axis2, x.shape)
    order = list(range(x.ndim))
    order[i], order[j] = j, i
    return Traced(transpose_node(x, order))


register_method("swapaxes")(_np_swapaxes)


@register_function(np.moveaxis)
def _np_moveaxis(a: Any, source: Any, destination: Any) -> Traced:
    x = _node(a)
    src = [_axis("np.moveaxis", k, x.shape) for k in ((source,) if isinstance(source, numbers.Integral) else source)]
    dst = [_axis("np.moveaxis", k, x.shape)
           for k in ((destination,) if isinstance(destination, numbers.Integral) else destination)]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise TraceError(f"np.moveaxis: source {source!r} and destination {destination!r} must be distinct axes "
                         "of one count")
    order = [k for k in range(x.ndim) if k not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return Traced(transpose_node(x, order))


@register_function(np.broadcast_to)
def _np_broadcast_to(array: Any, shape: Any, subok: bool = False) -> Traced:
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    return Traced(broadcast_node(_node(array), shape))


def _reshape_forward(x: np.ndarray, shape: Shape) -> np.ndarray:
    return _fresh(x.reshape(shape), x)


_linear("reshape", _reshape_forward, _reshape_shapes, lambda ct, x, shape: reshape_node(ct, x.shape),
        batch=lambda batch_shape, shape: {"shape": batch_shape + tuple(shape)},
        # a copy of its own, as _fresh gives: the program may write into the result
        spelling=lambda args, shape: f"{args[0]}.reshape({tuple(shape)!r}).copy()")


# ---------------------------------------------------------------------------- reductions
@register_function(np.sum)
def sum_(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = _NO_VALUE, where: Any = _NO_VALUE) -> Traced:
    """``np.sum`` and ``ndarray.sum``: an einsum over ``axis`` (``keepdims`` keeps them with length 1).

    Examples
    --------
    >>> import jacacc.tensor as jt
    >>> jt.jacobian(lambda x: np.sum(x, axis=-1, keepdims=True))(np.ones((2, 2))).shape
    (2, 1, 2, 2)
    """
    _options("np.sum", out, dtype, initial=initial, where=where)
    x = _node(a)
    return Traced(reduce_sum(x, _axes("np.sum", axis, x.shape), bool(keepdims)))


@register_function(np.mean)
def _np_mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, *,
             where: Any = _NO_VALUE) -> Traced:
    _options("np.mean", out, dtype, where=where)
    x = _node(a)
    axes = _axes("np.mean", axis, x.shape)
    count = math.prod(x.shape[k] for k in axes)
    total = reduce_sum(x, axes, bool(keepdims))
    if count == 0:  # NumPy: the mean of an empty slice is NaN (the Jacobian is empty anyway)
        return Traced(E.const(np.full(total.shape, np.nan)))
    return Traced(E.scale(1.0 / count, total))


register_method("mean")(_np_mean)


def _extremum(name: str, largest: bool, a: Any, axis: Any, out: Any, keepdims: bool, initial: Any,
              where: Any) -> Traced:
    _options(name, out, None, initial=initial, where=where)
    x = _node(a)
    axes = _axes(name, axis, x.shape)
    if any(x.shape[k] == 0 for k in axes):
        raise TraceError(f"{name}: zero-size array (shape {x.shape}) to a reduction that has no identity")
    if all(x.shape[k] == 1 for k in axes):  # one entry per group: the entry itself
        return Traced(x if keepdims else drop_unit_axes(x, axes))
    # W = M / Σ M, M the mask of the extremal entries: Σ x·W is the extremum and W its derivative,
    # the subgradient split equally among ties (JAX's reduce_max rule).  x enters through
    # where(W, x, 0) so an infinite entry off the extremum is never multiplied by its weight 0.
    (weights,) = apply_operator("extremum_weights", [x], axes=axes, largest=largest)
    weights = _locally_constant(weights)
    value = reduce_sum(_hadamard(E.elementwise("where", weights, x, E.const(0.0)), weights), axes)
    return Traced(insert_unit_axes(value, axes) if keepdims else value)


@register_function(np.max, np.amax)
def _np_max(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = _NO_VALUE,
            where: Any = _NO_VALUE) -> Traced:
    return _extremum("np.max", True, a, axis, out, keepdims, initial, where)


@register_function(np.min, np.amin)
def _np_min(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = _NO_VALUE,
            where: Any = _NO_VALUE) -> Traced:
    return _extremum("np.min", False, a, axis, out, keepdims, initial, where)


register_method("max")(_np_max)
register_method("min")(_np_min)


def extremum_weights(x: np.ndarray, axes: tuple[int, ...], largest: bool) -> np.ndarray:
    """1/(number of ties) at the largest (smallest) entries of each group over ``axes``, 0
    elsewhere; NaN for a group holding a NaN (its maximum is NaN, as NumPy's, and no entry equals it).

    On NumPy float arrays it runs as one compiled loop over the groups where Numba is installed
    (:func:`_group_weights`): NumPy's reductions over a short axis cost about 40 ns a group
    (softmax's row maximum over 8 classes and 1024 rows: 43 µs for ``max``, 80 µs for the weights).

    >>> extremum_weights(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]]), (1,), True)
    array([[0. , 0.5, 0.5],
           [1. , 0. , 0. ]])
    """
    loop = _group_weights() if type(x) is np.ndarray and x.dtype.char in "fd" else None
    if loop is not None and x.size:
        rows, back = _group_rows(x, axes)
        return back(loop(rows, largest))
    best = x.max(axis=axes, keepdims=True) if largest else x.min(axis=axes, keepdims=True)
    mask = (x == best).astype(x.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        return mask / mask.sum(axis=axes, keepdims=True)


def _group_rows(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """``x``'s groups over ``axes`` as the rows of a C-ordered matrix, and the function putting an
    array of the rows' shape back in ``x``'s layout (for the compiled loops over groups)."""
    if len(axes) == 1 and axes[0] == x.ndim - 1 and x.flags.c_contiguous:
        # the groups are rows already (softmax's row maximum): no transposition to work out,
        # which was most of the 1.9 µs beside the loop's 1.6 that a 128 × 8 call took
        return x.reshape(-1, x.shape[-1]), lambda rows: rows.reshape(x.shape)
    kept = [k for k in range(x.ndim) if k not in axes]
    order = kept + list(axes)
    grouped = x.transpose(order) if order != list(range(x.ndim)) else x
    rows = np.ascontiguousarray(grouped).reshape(-1, math.prod(x.shape[k] for k in axes))
    if grouped is x:
        return rows, lambda out: out.reshape(x.shape)
    return rows, lambda out: np.ascontiguousarray(out.reshape(grouped.shape).transpose(np.argsort(order)))


def _group_weights_loop(rows: np.ndarray, largest: bool) -> np.ndarray:  # compiled by _group_weights
    out = np.empty_like(rows)
    groups, n = rows.shape
    for g in range(groups):
        best = rows[g, 0]
        nan = best != best
        for k in range(1, n):
            v = rows[g, k]
            if v != v:
                nan = True
            elif (v > best) if largest else (v < best):
                best = v
        if nan:
            out[g, :] = np.nan
            continue
        count = 0
        for k in range(n):
            count += rows[g, k] == best
        weight = 1.0 / count
        for k in range(n):
            out[g, k] = weight if rows[g, k] == best else 0.0
    return out


@functools.cache
def _group_weights() -> Callable[[np.ndarray, bool], np.ndarray] | None:
    """:func:`_group_weights_loop` compiled by Numba (cached on disk), or None without Numba."""
    from jacacc.kernels.loops import compiled_loop

    return compiled_loop(_group_weights_loop)


register_operator(Operator("extremum_weights", extremum_weights, lambda a, **_: (a,), flops=_size_flops,
                           device=True, zero_derivative=True))


def shift_extremum(x: np.ndarray, axes: tuple[int, ...], largest: bool) -> np.ndarray:
    """The largest (smallest) entry of each group over ``axes``, the axes kept, as a *shift*:
    its derivative is zero.  Where a function does not depend on the shift — ``exp(x − m)``
    over its sum, ``log Σ exp(x − m) + m`` — the zero is exact, and the value is one NumPy
    reduction instead of :func:`extremum_weights` and a weighted sum (``np.max``'s derivative).

    >>> shift_extremum(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]]), (1,), True)
    array([[3.],
           [2.]])
    """
    loop = _group_extrema() if type(x) is np.ndarray and x.dtype.char in "fd" else None
    if loop is not None and x.size:
        # NumPy's reduction along a short axis costs microseconds of setup: a (64, 3) row maximum took
        # 5 µs as np.max, 1.5 as this loop
        rows, _ = _group_rows(x, axes)
        return loop(rows, largest).reshape(tuple(1 if k in axes else n for k, n in enumerate(x.shape)))
    xp = array_module((x,))
    return (xp.max if largest else xp.min)(x, axis=axes, keepdims=True)


def _group_extrema_loop(rows: np.ndarray, largest: bool) -> np.ndarray:  # compiled by _group_extrema
    out = np.empty(rows.shape[0], dtype=rows.dtype)
    for g in range(rows.shape[0]):
        best = rows[g, 0]
        for k in range(1, rows.shape[1]):
            v = rows[g, k]
            if best != best:
                break
            if v != v or ((v > best) if largest else (v < best)):
                best = v
        out[g] = best
    return out


@functools.cache
def _group_extrema() -> Callable[[np.ndarray, bool], np.ndarray] | None:
    """:func:`_group_extrema_loop` compiled by Numba (cached on disk), or None without Numba:
    each row's maximum (minimum), a NaN in it propagating as through NumPy's ``max``."""
    from jacacc.kernels.loops import compiled_loop

    return compiled_loop(_group_extrema_loop)


register_operator(Operator("shift_extremum", shift_extremum,
                           lambda a, axes, **_: (tuple(1 if k in axes else n for k, n in enumerate(a)),),
                           flops=_size_flops, device=True, zero_derivative=True))

#: Zeros per reduced group up to which ``prod``'s expression is exact to every order (see the module notes).
PROD_ZEROS = 2


@register_function(np.prod)
def _np_prod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
             initial: Any = _NO_VALUE, where: Any = _NO_VALUE) -> Traced:
    _options("np.prod", out, dtype, initial=initial, where=where)
    x = _node(a)
    axes = _axes("np.prod", axis, x.shape)
    reduced = tuple(n for k, n in enumerate(x.shape) if k not in axes)
    if any(x.shape[k] == 0 for k in axes):  # the empty product
        value = E.ones(reduced)
    elif all(x.shape[k] == 1 for k in axes):
        value = drop_unit_axes(x, axes)
    else:
        value = _product(x, axes)
    return Traced(insert_unit_axes(value, axes) if keepdims else value)


register_method("prod")(_np_prod)


def _product(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """Π over ``axes`` as ``σ·exp(Σ log|y|)·P₂`` (module notes): exact with zeros, no division.

    Written with few nodes (the search-based orders grow with them): the masks and their
    scaled copies are data, the sums of the zero entries single einsums with the mask.
    """
    zero, nonzero, sign, *exactly = (_locally_constant(m) for m in apply_operator("prod_masks", [x], axes=axes))
    y = E.add(_hadamard(x, nonzero), zero)                               # x, with 1 where x is 0
    logs = reduce_sum(E.unary("log", E.unary("abs", y)), axes)
    full = index_letters(x.ndim)
    part = "".join(c for k, c in enumerate(full) if k not in axes)
    # P₂ = [c=0] + [c=1]·e₁ + [c=2]·e₂ of u = x∘Z:  e₁ = Σu,  e₂ = (e₁² − Σu²)/2 and u² = x²∘Z
    e1 = E.einsum(f"{full},{full}->{part}", x, zero)
    zeros_part = E.add(exactly[0], _hadamard(exactly[1], e1), _hadamard(exactly[2], E.unary("pow", e1, 2.0)),
                       E.einsum(f"{full},{full},{part}->{part}", E.unary("pow", x, 2.0), zero, E.scale(-1.0, exactly[2])))
    return E.einsum(f"{part},{part},{part}->{part}", sign, E.unary("exp", logs), zeros_part)


def _prod_masks(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """The zero mask Z, 1 − Z, the sign (−1)^(negative entries) per group and the coefficients of
    ``e_c`` for c = 0, 1, 2 zeros per group: 1, 1 and ½ where the group has that many, else 0.

    On NumPy float arrays one compiled loop over the groups where Numba is installed
    (:func:`_prod_masks_compiled`): the fourteen NumPy calls took 14 µs for 50 entries, the loop 2."""
    loop = _prod_masks_compiled() if type(x) is np.ndarray and x.dtype.char in "fd" else None
    if loop is not None and x.size:
        rows, back = _group_rows(x, axes)
        zero, nonzero, per_group = loop(rows, PROD_ZEROS)
        reduced = tuple(n for k, n in enumerate(x.shape) if k not in axes)
        return (back(zero), back(nonzero), *(per_group[k].reshape(reduced) for k in range(PROD_ZEROS + 2)))
    zero = x == 0
    sign = 1 - 2 * ((x < 0).sum(axis=axes) % 2)
    count = zero.sum(axis=axes)
    return (zero.astype(x.dtype), (~zero).astype(x.dtype), sign.astype(x.dtype),
            *(((count == c) * (0.5 if c == 2 else 1.0)).astype(x.dtype) for c in range(PROD_ZEROS + 1)))


def _prod_masks_loop(rows: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # compiled below
    """:func:`_prod_masks` of each row: Z and 1 − Z, and per row its sign and the coefficients for
    0 … ``most`` zeros."""
    groups, n = rows.shape
    zero = np.empty_like(rows)
    nonzero = np.empty_like(rows)
    per_group = np.zeros((most + 2, groups), dtype=rows.dtype)
    for g in range(groups):
        zeros = 0
        negatives = 0
        for k in range(n):
            v = rows[g, k]
            is_zero = v == 0
            zeros += is_zero
            negatives += v < 0
            zero[g, k] = 1.0 if is_zero else 0.0
            nonzero[g, k] = 0.0 if is_zero else 1.0
        per_group[0, g] = 1.0 - 2.0 * (negatives % 2)
        if zeros <= most:
            per_group[1 + zeros, g] = 0.5 if zeros == 2 else 1.0
    return zero, nonzero, per_group


@functools.cache
def _prod_masks_compiled() -> Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
    """:func:`_prod_masks_loop` compiled by Numba (cached on disk), or None without Numba."""
    from jacacc.kernels.loops import compiled_loop

    return compiled_loop(_prod_masks_loop)


def _prod_masks_shapes(a: Shape, axes: tuple[int, ...]) -> tuple[Shape, ...]:
    reduced = tuple(n for k, n in enumerate(a) if k not in axes)
    return (a, a, reduced, *(reduced,) * (PROD_ZEROS + 1))


register_operator(Operator("prod_masks", _prod_masks, _prod_masks_shapes, flops=_size_flops, device=True,
                           zero_derivative=True))


def _moment(name: str, root: bool, a: Any, axis: Any, dtype: Any, out: Any, ddof: Any, keepdims: bool,
            where: Any, mean: Any, correction: Any) -> Traced:
    _options(name, out, dtype, where=where, mean=mean)
    if correction is not _NO_VALUE and correction is not None:
        if ddof:
            raise TraceError(f"{name}: ddof and correction are the same option; give one")
        ddof = correction
    if isinstance(ddof, bool) or not isinstance(ddof, numbers.Real):
        raise TraceError(f"{name}: ddof must be a number, got {ddof!r}")
    x = _node(a)
    axes = _axes(name, axis, x.shape)
    count = math.prod(x.shape[k] for k in axes)
    shape = tuple(1 if k in axes else n for k, n in enumerate(x.shape)) if keepdims else \
        tuple(n for k, n in enumerate(x.shape) if k not in axes)
    if count == 0:  # NumPy: NaN for an empty slice
        return Traced(E.const(np.full(shape, np.nan)))
    if count == 1 and ddof < 1:
        # one entry is its own mean: the moment is the constant 0, whose derivative is 0 (written out,
        # sqrt's ∞ at 0 times the centred entry's 0 would give NaN, as JAX's does; autograd's is 0)
        return Traced(E.zeros(shape))
    centred = E.add(x, _spread(E.scale(-1.0 / count, reduce_sum(x, axes)), axes, x.shape))
    with np.errstate(divide="ignore"):  # N - ddof <= 0 gives inf (NaN for 0/0), as NumPy
        scale = float(np.float64(1.0) / np.float64(max(count - ddof, 0)))
    var = E.scale(scale, reduce_sum(E.unary("pow", centred, 2.0), axes, bool(keepdims)))
    return Traced(E.unary("sqrt", var) if root else var)


@register_function(np.var)
def _np_var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: bool = False,
            *, where: Any = _NO_VALUE, mean: Any = _NO_VALUE, correction: Any = _NO_VALUE) -> Traced:
    return _moment("np.var", False, a, axis, dtype, out, ddof, keepdims, where, mean, correction)


@register_function(np.std)
def _np_std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: bool = False,
            *, where: Any = _NO_VALUE, mean: Any = _NO_VALUE, correction: Any = _NO_VALUE) -> Traced:
    return _moment("np.std", True, a, axis, dtype, out, ddof, keepdims, where, mean, correction)


register_method("var")(_np_var)
register_method("std")(_np_std)


# ---------------------------------------------------------------------------- cumsum
@register_function(np.cumsum)
def _np_cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Traced:
    _options("np.cumsum", out, dtype)
    x = _node(a)
    if axis is None:
        x, axis = reshape_node(x, (x.size,)), 0
    axis = _axis("np.cumsum", axis, x.shape)
    if x.shape[axis] <= 1:
        return Traced(x)
    return Traced(apply_operator("cumsum", [x], axis=axis, reverse=False)[0])


register_method("cumsum")(_np_cumsum)


def _cumsum(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    xp = array_module((x,))
    if reverse:
        return xp.flip(xp.cumsum(xp.flip(x, axis), axis), axis)
    return xp.cumsum(x, axis)


_linear("cumsum", _cumsum, lambda a, **_: (a,),
        # the transpose of a running sum is the running sum from the other end
        lambda ct, x, axis, reverse: apply_operator("cumsum", [ct], axis=axis, reverse=not reverse)[0],
        _size_flops, lambda batch_shape, axis, reverse: {"axis": axis + len(batch_shape), "reverse": reverse})


# ---------------------------------------------------------------------------- basic indexing
class IndexOutOfBoundsError(TraceError, IndexError):
    """An integer index beyond its axis.  Also an ``IndexError``, as in NumPy: Python's iteration
    over a traced array (``for row in x``, ``a, b = x``) indexes until one is raised.

    >>> import jacacc.tensor as jt
    >>> jt.grad(lambda x: sum(row @ row for row in x))(np.ones((2, 2))).tolist()
    [[2.0, 2.0], [2.0, 2.0]]
    """


@dataclass(frozen=True)
class BasicKey:
    """A basic index in canonical form, one entry per axis of the indexed array: ``("i", k)``
    takes entry ``k`` (the axis goes), ``("s", start, step, length)`` a slice (any step).

    Hashable (operator options must be) and printed as NumPy writes it.

    >>> key = BasicKey((("s", 1, 1, 3), ("i", 0), ("s", 3, -1, 4)))
    >>> key, key.numpy()
    ([1:4, 0, 3::-1], (slice(1, 4, 1), 0, slice(3, None, -1)))
    """

    items: tuple[tuple[Any, ...], ...]

    def numpy(self) -> tuple[Any, ...]:
        """The key NumPy indexes with (built once: a program indexes with it on every call)."""
        key = self.__dict__.get("_numpy")
        if key is None:
            key = tuple(item[1] if item[0] == "i" else _slice(*item[1:]) for item in self.items)
            object.__setattr__(self, "_numpy", key)
        return key

    @property
    def shape(self) -> Shape:
        """The shape of the selection (one axis per slice)."""
        return tuple(item[3] for item in self.items if item[0] == "s")

    def __repr__(self) -> str:
        def text(item: tuple[Any, ...]) -> str:
            if item[0] == "i":
                return str(item[1])
            s = _slice(*item[1:])
            return (f"{'' if s.start is None else s.start}:{'' if s.stop is None else s.stop}"
                    + ("" if s.step == 1 else f":{s.step}"))

        return "[" + ", ".join(text(item) for item in self.items) + "]"


def _subscript(key: BasicKey) -> str:
    """``key`` as Python subscript source: what its ``repr`` writes between the brackets.

    >>> _subscript(BasicKey((("s", 4, -2, 3), ("i", 1))))
    '4::-2, 1'
    """
    return repr(key)[1:-1]


def _slice(start: int, step: int, length: int) -> slice:
    stop = start + step * length
    return slice(start, None if stop < 0 else stop, step)


def _canonical_slice(s: slice, n: int) -> tuple[Any, ...]:
    start, stop, step = s.indices(n)
    length = len(range(start, stop, step))
    return ("s", start, step, length) if length else ("s", 0, 1, 0)


def _is_basic(item: Any) -> bool:
    return item is None or item is Ellipsis or isinstance(item, slice) or (
        isinstance(item, numbers.Integral) and not isinstance(item, bool | np.bool_))


def _basic_index(x: Tensor, items: tuple[Any, ...]) -> Tensor:
    """``x[items]`` for a key of integers, slices, ``None`` and one ``...`` (NumPy's basic indexing)."""
    if sum(item is Ellipsis for item in items) > 1:
        raise TraceError("indexing: an index can only have a single ellipsis ('...')")
    used = sum(1 for item in items if item is not None and item is not Ellipsis)
    if used > x.ndim:
        raise TraceError(f"indexing: too many indices for an array of shape {x.shape}: {used} were indexed")
    if Ellipsis not in items:
        items = (*items, Ellipsis)
    at = items.index(Ellipsis)
    items = items[:at] + (slice(None),) * (x.ndim - used) + items[at + 1:]
    entries: list[tuple[Any, ...]] = []
    new_axes: list[int] = []
    out = 0
    for item in items:
        if item is None:
            new_axes.append(out)
            out += 1
            continue
        axis, n = len(entries), x.shape[len(entries)]
        if isinstance(item, slice):
            try:
                entries.append(_canonical_slice(item, n))
            except TypeError:
                raise TraceError(f"indexing: slice {item} has a bound or step that is not an integer") from None
            except ValueError as exc:
                raise TraceError(f"indexing: slice {item}: {exc}") from None
            out += 1
        else:
            if not -n <= item < n:
                raise IndexOutOfBoundsError(f"indexing: index {item} is out of bounds for axis {axis} with size {n}")
            entries.append(("i", int(item) % n))
    key = BasicKey(tuple(entries))
    full = all(e[0] == "s" and e[1:] == (0, 1, n) for e, n in zip(entries, x.shape, strict=True))
    core = x if full else index_node(x, key)
    return insert_unit_axes(core, new_axes)


def index_node(t: Tensor, key: BasicKey) -> Tensor:
    """``t[key]`` for a :class:`BasicKey`: the ``index`` operator (its transpose: ``index_scatter``).

    >>> index_node(E.var("x", (5, 2)), BasicKey((("s", 4, -2, 3), ("i", 1)))).shape
    (3,)
    """
    return apply_operator("index", [t], key=key)[0]


def _index_forward(x: np.ndarray, key: BasicKey) -> np.ndarray:
    return _fresh(x[key.numpy()], x)


def _index_scatter(t: np.ndarray, key: BasicKey, shape: Shape) -> np.ndarray:
    out = array_module((t,)).zeros(shape, dtype=t.dtype)
    out[key.numpy()] = t  # a basic index selects each entry once: no accumulation needed
    return out


def _index_shapes(a: Shape, key: BasicKey) -> tuple[Shape]:
    if len(key.items) != len(a):
        raise ValueError(f"index: key {key} for an array of shape {a}")
    return (key.shape,)


def _batched_key(batch_shape: Shape, key: BasicKey) -> BasicKey:
    return BasicKey(_full_slices(batch_shape) + key.items)


_linear("index", _index_forward, _index_shapes,
        lambda ct, x, key: apply_operator("index_scatter", [ct], key=key, shape=x.shape)[0],
        batch=lambda batch_shape, key: {"key": _batched_key(batch_shape, key)},
        spelling=lambda args, key: f"{args[0]}[{_subscript(key)}].copy()")
_linear("index_scatter", _index_scatter, lambda a, key, shape: (tuple(shape),),
        lambda ct, t, key, shape: index_node(ct, key),
        batch=lambda batch_shape, key, shape: {"key": _batched_key(batch_shape, key),
                                               "shape": batch_shape + tuple(shape)})


# ---------------------------------------------------------------------------- advanced indexing
class IndexArray:
    """A constant array of flat indices as an operator option: hashable, compared by content,
    printed short (the evaluator reads ``.array``).

    >>> IndexArray(np.array([0, 2, 2])), IndexArray([1, 2]) == IndexArray(np.array([1, 2]))
    (<3 indices, repeated>, True)
    """

    __slots__ = ("array", "repeats", "_key", "_hash", "_copies", "_strided")

    def __init__(self, array: np.ndarray) -> None:
        array = np.array(array, dtype=np.intp)
        array.flags.writeable = False
        self.array = array
        self.repeats = bool(array.size) and np.unique(array).size < array.size
        self._key = (array.shape, array.tobytes())
        self._hash = hash(self._key)
        self._copies: dict[str, Any] = {}
        self._strided: dict[tuple[int, ...], Any] = {}

    def strided(self, shape: tuple[int, ...]) -> Any:
        """The gather of these entries from an array of ``shape`` as a strided view
        (:class:`~jacacc.tensor.views.StridedTake`), or None; worked out once per shape."""
        if shape not in self._strided:
            from jacacc.tensor.views import StridedTake

            self._strided[shape] = StridedTake.of(self.array, shape)
        return self._strided[shape]

    def on(self, xp: Any) -> Any:
        """The indices as an array of the array module ``xp`` (a CuPy copy made once and kept)."""
        if xp is np:
            return self.array
        copy = self._copies.get(xp.__name__)
        if copy is None:
            copy = self._copies[xp.__name__] = xp.asarray(self.array)
        return copy

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexArray) and self._key == other._key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"<{self.array.size} indices{', repeated' if self.repeats else ''}>"


def _advanced_index(x: Tensor, key: Any) -> Tensor:
    """``x[key]`` for any key with arrays or masks: NumPy indexes an ``arange`` of the flat
    positions with it, so the gather follows NumPy's rules exactly (mixed forms included)."""
    positions = np.arange(x.size).reshape(x.shape)
    try:
        flat = positions[key]
    except JacaccError:
        raise  # a traced value inside the key (a list holding one): refused by name already
    except (IndexError, ValueError, TypeError) as exc:
        raise TraceError(f"indexing an array of shape {x.shape}: {str(exc).splitlines()[0]}") from None
    return apply_operator("gather", [x], index=IndexArray(flat))[0]


# ``lead``: leading (batch) axes the flat indices do not reach, each gathered or scattered alike
def _gather(x: np.ndarray, index: IndexArray, lead: int = 0) -> np.ndarray:
    xp = array_module((x,))
    if (strided := index.strided(x.shape[lead:])) is not None:
        return strided(x, xp, lead)
    flat = x.reshape(x.shape[:lead] + (math.prod(x.shape[lead:]),))  # not -1: a batch may be empty
    # ``take``, not ``flat[..., index]``: the same entries, 2-3x faster (no general fancy indexing)
    return flat.take(index.on(xp), axis=lead)


def _scatter_add(t: np.ndarray, index: IndexArray, shape: Shape, lead: int = 0) -> np.ndarray:
    batch = math.prod(shape[:lead])
    size = math.prod(shape[lead:])
    flat_t = t.reshape(batch, math.prod(t.shape[lead:]))
    xp = array_module((t,))
    if not index.repeats:
        out = xp.zeros((batch, size), dtype=t.dtype)
        out[:, index.on(xp).reshape(-1)] = flat_t
        return out.reshape(shape)
    return added_at(flat_t, index.on(xp).reshape(-1), size, xp).reshape(shape)


def added_at(rows: Any, positions: Any, size: int, xp: Any) -> Any:
    """Each row of ``rows`` (batch × n) added into a row of ``size`` zeros at the flat ``positions``
    (n of them): repeated positions accumulate (``x[[0, 0]]`` pulls back twice onto ``x[0]``); a
    batch row's positions are offset by its row, so one bincount serves every row."""
    batch = rows.shape[0]
    if batch != 1:
        positions = (xp.arange(batch)[:, None] * size + positions.reshape(1, -1)).reshape(-1)
    total = xp.bincount(positions, weights=rows.reshape(-1), minlength=batch * size)
    return total.reshape(batch, size).astype(rows.dtype, copy=False)


def _gather_shapes(a: Shape, index: IndexArray, lead: int = 0) -> tuple[Shape]:
    if index.array.size and int(index.array.max()) >= math.prod(a[lead:]):
        raise ValueError(f"gather: indices beyond an array of shape {a[lead:]}")
    return (a[:lead] + index.array.shape,)


def _lead(batch_shape: Shape, **options: Any) -> dict[str, Any]:
    """Options for leading batch axes in front of the ones a flat index reaches."""
    lead = options.pop("lead", 0)
    if "shape" in options:
        options["shape"] = batch_shape + tuple(options["shape"])
    return {**options, "lead": lead + len(batch_shape)}


_linear("gather", _gather, _gather_shapes,
        lambda ct, x, index, lead=0: apply_operator("scatter_add", [ct], index=index, shape=x.shape, lead=lead)[0],
        batch=_lead)
_linear("scatter_add", _scatter_add, lambda a, index, shape, lead=0: (tuple(shape),),
        lambda ct, t, index, shape, lead=0: apply_operator("gather", [ct], index=index, lead=lead)[0],
        batch=_lead)


def _holds_traced(items: Any) -> bool:
    """Whether a key (or a list inside it) holds a traced value."""
    if isinstance(items, Traced):
        return True
    return isinstance(items, list | tuple) and any(_holds_traced(item) for item in items)


@register_method("__getitem__")
def _getitem(a: Traced, key: Any) -> Traced:
    items = key if isinstance(key, tuple) else (key,)
    from jacacc.tensor.dynamic_index import dynamic_getitem, holds_integer_array

    if holds_integer_array(items):
        return dynamic_getitem(a, key)
    if _holds_traced(items):
        raise UnsupportedOperationError(
            "indexing with a traced float array or mask (computed from the function's arguments) is not supported by "
            "jacacc.tensor: a mask selects a number of entries that depends on the values; index with constants "
            "or with integers made from the values (x.astype(int))")
    x = _node(a)
    if all(_is_basic(item) for item in items):
        return Traced(_basic_index(x, items))
    return Traced(_advanced_index(x, key))


# ---------------------------------------------------------------------------- joining and splitting
def concatenate_nodes(nodes: Sequence[Tensor], axis: int, name: str = "np.concatenate") -> Tensor:
    """The ``concatenate`` operator on expression nodes of equal shapes but along ``axis``
    (its pullback cuts the cotangent into the same pieces).

    >>> concatenate_nodes([E.var("a", (2, 3)), E.var("b", (2, 1))], axis=-1).shape
    (2, 4)
    """
    if not nodes:
        raise TraceError(f"{name}: need at least one array to concatenate")
    first = nodes[0]
    if first.ndim == 0:
        raise TraceError(f"{name}: zero-dimensional arrays cannot be concatenated")
    axis = _axis(name, axis, first.shape)
    for t in nodes:
        if t.ndim != first.ndim or any(m != n for k, (m, n) in enumerate(zip(t.shape, first.shape, strict=True))
                                       if k != axis):
            raise TraceError(f"{name}: shapes {first.shape} and {t.shape} differ outside the concatenation axis {axis}")
    if len(nodes) == 1:
        return first
    return apply_operator("concatenate", list(nodes), axis=axis)[0]


def _concatenate_shapes(*shapes: Shape, axis: int) -> tuple[Shape]:
    first = shapes[0]
    return (first[:axis] + (sum(s[axis] for s in shapes),) + first[axis + 1:],)


def _concatenate_transpose(args, cotangents, axis):  # noqa: ANN001, ANN202
    (ct,) = cotangents
    pieces, start = [], 0
    for x in args:  # the transpose of a concatenation cuts the cotangent into the same pieces
        n = x.shape[axis]
        pieces.append(_basic_index(ct, (slice(None),) * axis + (slice(start, start + n),)))
        start += n
    return tuple(pieces)


def _concatenate_batch(batch_shape, args, flags, axis):  # noqa: ANN001, ANN202
    from jacacc.tensor.batching import spread

    # an unbatched piece is the same for every batch element
    return [a if f else spread(a, batch_shape) for a, f in zip(args, flags, strict=True)], \
        {"axis": axis + len(batch_shape)}


register_operator(Operator("concatenate", lambda *xs, axis: array_module(xs).concatenate(xs, axis=axis),
                           _concatenate_shapes, batch=_concatenate_batch, device=True,
                           spelling=lambda args, axis: f"np.concatenate(({', '.join(args)},), axis={axis})",
                           linear_in="all", transpose=_concatenate_transpose))


@register_function(np.concatenate)
def _np_concatenate(arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: Any = None) -> Traced:
    _options("np.concatenate", out, dtype)
    nodes = [_node(t) for t in arrays]
    if axis is None:
        nodes, axis = [reshape_node(t, (t.size,)) for t in nodes], 0
    return Traced(concatenate_nodes(nodes, axis))


@register_function(np.stack)
def _np_stack(arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: Any = None) -> Traced:
    _options("np.stack", out, dtype)
    nodes = [_node(t) for t in arrays]
    if not nodes:
        raise TraceError("np.stack: need at least one array to stack")
    if any(t.shape != nodes[0].shape for t in nodes):
        raise TraceError(f"np.stack: all input arrays must have the same shape, got {[t.shape for t in nodes]}")
    axis = _axis("np.stack", axis, (1,) * (nodes[0].ndim + 1))
    return Traced(concatenate_nodes([insert_unit_axes(t, (axis,)) for t in nodes], axis, "np.stack"))


def _at_least(t: Tensor, ndim: int) -> Tensor:
    """NumPy's atleast_1d/atleast_2d: a vector becomes a row."""
    if t.ndim >= ndim:
        return t
    return insert_unit_axes(t, tuple(range(ndim - t.ndim)))


@register_function(np.vstack)
def _np_vstack(tup: Any, *, dtype: Any = None, casting: Any = None) -> Traced:
    _options("np.vstack", None, dtype)
    return Traced(concatenate_nodes([_at_least(_node(t), 2) for t in tup], 0, "np.vstack"))


@register_function(np.hstack)
def _np_hstack(tup: Any, *, dtype: Any = None, casting: Any = None) -> Traced:
    _options("np.hstack", None, dtype)
    nodes = [_at_least(_node(t), 1) for t in tup]
    return Traced(concatenate_nodes(nodes, 0 if nodes and nodes[0].ndim == 1 else 1, "np.hstack"))


def _split(name: str, equal: bool, ary: Any, indices_or_sections: Any, axis: Any) -> list[Traced]:
    x = _node(ary)
    axis = _axis(name, axis, x.shape)
    n = x.shape[axis]
    if isinstance(indices_or_sections, numbers.Integral):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise TraceError(f"{name}: the number of sections must be positive, got {sections}")
        if equal and n % sections:
            raise TraceError(f"{name}: an axis of length {n} does not split into {sections} equal sections")
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    else:
        bounds = [0, *(int(k) for k in indices_or_sections), n]
    head = (slice(None),) * axis
    return [Traced(_basic_index(x, (*head, slice(start, stop)))) for start, stop in zip(bounds[:-1], bounds[1:], strict=True)]


@register_function(np.split)
def _np_split(ary: Any, indices_or_sections: Any, axis: Any = 0) -> list[Traced]:
    return _split("np.split", True, ary, indices_or_sections, axis)


@register_function(np.array_split)
def _np_array_split(ary: Any, indices_or_sections: Any, axis: Any = 0) -> list[Traced]:
    return _split("np.array_split", False, ary, indices_or_sections, axis)


# ---------------------------------------------------------------------------- pad and diff
@register_function(np.pad)
def _np_pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Traced:
    if mode != "constant":
        raise UnsupportedOperationError(f"np.pad with mode={mode!r} is not supported by jacacc.tensor")
    values = kwargs.pop("constant_values", 0)
    if kwargs:
        raise UnsupportedOperationError(f"np.pad with {', '.join(kwargs)}= is not supported by jacacc.tensor")
    if isinstance(values, Traced):
        raise UnsupportedOperationError("np.pad with traced constant_values is not supported by jacacc.tensor")
    x = _node(array)
    try:
        widths = np.broadcast_to(np.asarray(pad_width), (x.ndim, 2))
    except ValueError:
        raise TraceError(f"np.pad: pad_width {pad_width!r} does not fit an array of shape {x.shape}") from None
    if widths.size and (not np.issubdtype(widths.dtype, np.integer) or widths.min() < 0):
        raise TraceError(f"np.pad: pad_width {pad_width!r} must be non-negative integers")
    widths = tuple((int(b), int(c)) for b, c in widths)
    padded = x if not any(b or c for b, c in widths) else apply_operator("pad", [x], widths=widths)[0]
    if np.any(np.asarray(values, dtype=float) != 0):  # the border's constants are data added to it
        border = np.pad(np.zeros(x.shape), widths, constant_values=values)
        padded = E.add(padded, E.const(border))
    return Traced(padded)


def _unpad(ct: Tensor, x: Tensor, widths: tuple[tuple[int, int], ...]) -> Tensor:
    """The transpose of padding: the middle of the cotangent."""
    return _basic_index(ct, tuple(slice(b, b + n) for (b, _), n in zip(widths, x.shape, strict=True)))


_linear("pad", lambda x, widths: array_module((x,)).pad(x, widths),
        lambda a, widths: (tuple(n + b + c for n, (b, c) in zip(a, widths, strict=True)),), _unpad,
        batch=lambda batch_shape, widths: {"widths": ((0, 0),) * len(batch_shape) + tuple(widths)})


@register_function(np.diff)
def _np_diff(a: Any, n: Any = 1, axis: Any = -1, prepend: Any = _NO_VALUE, append: Any = _NO_VALUE) -> Traced:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise TraceError(f"np.diff: the order n must be a non-negative integer, got {n!r}")
    x = _node(a)
    if x.ndim == 0:
        raise TraceError("np.diff: the input must be at least one-dimensional")
    axis = _axis("np.diff", axis, x.shape)
    if n == 0:
        return Traced(x)
    parts = []
    for extra in (prepend, append):
        if extra is _NO_VALUE:
            parts.append(None)
            continue
        e = _node(extra)
        if e.ndim == 0:  # a scalar is broadcast to a slab of length 1 along the axis
            e = broadcast_node(e, x.shape[:axis] + (1,) + x.shape[axis + 1:], "np.diff")
        parts.append(e)
    if parts[0] is not None or parts[1] is not None:
        x = concatenate_nodes([t for t in (parts[0], x, parts[1]) if t is not None], axis, "np.diff")
    head = (slice(None),) * axis
    for _ in range(n):  # a difference of two shifted slices
        upper, lower = _basic_index(x, (*head, slice(1, None))), _basic_index(x, (*head, slice(None, -1)))
        x = E.add(upper, E.scale(-1.0, lower))
    return Traced(x)


# ---------------------------------------------------------------------------- sort
@register_function(np.sort)
def _np_sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *, stable: Any = None) -> Traced:
    if order is not None:
        raise UnsupportedOperationError("np.sort with order= (structured arrays) is not supported by jacacc.tensor")
    x = _node(a)
    if axis is None:
        x, axis = reshape_node(x, (x.size,)), 0
    if x.ndim == 0:
        raise TraceError("np.sort: a 0-d array cannot be sorted along an axis (use axis=None)")
    axis = _axis("np.sort", axis, x.shape)
    if x.shape[axis] <= 1:
        return Traced(x)
    # the permutation is computed from the values when the program runs; the derivative is the
    # same gather of the tangent (locally the permutation does not change), ties in index order
    (perm,) = apply_operator("argsort", [x], axis=axis)
    return Traced(apply_operator("take_along", [x, perm], axis=axis)[0])


@register_method("sort")
def _method_sort(a: Traced, *args: Any, **kwargs: Any) -> Any:
    raise UnsupportedOperationError("ndarray.sort sorts in place, which jacacc.tensor does not support; "
                                    "use y = np.sort(x)")


# ``lead``: leading (batch) axes of the values that the permutation lacks (it is the same for each);
# linear in the values, the permutation (an argsort's) held fixed
def _permutation_transpose(transpose: str) -> Any:
    def adjoint(args, cotangents, axis, lead=0):  # noqa: ANN001, ANN202
        return (apply_operator(transpose, [cotangents[0], args[1]], axis=axis, lead=lead)[0],)

    return adjoint


def _permutation_batch(batch_shape, args, flags, axis, lead=0):  # noqa: ANN001, ANN202
    if flags[1]:  # a batch of permutations: element by element
        return None
    return args, {"axis": axis + len(batch_shape), "lead": lead + len(batch_shape)}


def _take_along(t: np.ndarray, perm: np.ndarray, axis: int, lead: int = 0) -> np.ndarray:
    return array_module((t,)).take_along_axis(t, perm.reshape((1,) * lead + perm.shape), axis)


def _put_along(t: np.ndarray, perm: np.ndarray, axis: int, lead: int = 0) -> np.ndarray:
    xp = array_module((t, perm))
    if xp is not np:  # the inverse permutation taken along: CuPy has no put_along_axis
        return _take_along(t, xp.argsort(perm, axis=axis - lead), axis, lead)
    out = np.empty_like(t)
    # a permutation: every entry written once (broadcast along the batch axes)
    np.put_along_axis(out, np.broadcast_to(perm.reshape((1,) * lead + perm.shape), t.shape), t, axis)
    return out


def _same_shape(a: Shape, *rest: Shape, **_: Any) -> tuple[Shape]:
    return (a,)


def _argsort(x: np.ndarray, axis: int) -> np.ndarray:
    """A stable argsort (ties keep their order, as NumPy's ``kind="stable"``; CuPy's sort is stable)."""
    xp = array_module((x,))
    return np.argsort(x, axis=axis, kind="stable") if xp is np else xp.argsort(x, axis=axis)


register_operator(Operator("argsort", _argsort, _same_shape,
                           flops=lambda a, axis: math.prod(a) * max(1, math.ceil(math.log2(max(a[axis], 2)))),
                           device=True, zero_derivative=True))
register_operator(Operator("take_along", _take_along, _same_shape, batch=_permutation_batch, device=True,
                           linear_in=(0,), transpose=_permutation_transpose("put_along")))
register_operator(Operator("put_along", _put_along, _same_shape, batch=_permutation_batch, device=True,
                           linear_in=(0,), transpose=_permutation_transpose("take_along")))


# ---------------------------------------------------------------------------- products
def matmul_nodes(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` by NumPy's rules as one einsum: batch axes broadcast (a length-1 batch axis is
    summed away from its operand), a 1-D operand is a vector on that side.

    >>> matmul_nodes(E.var("a", (2, 1, 3, 4)), E.var("b", (3, 4, 5))).shape
    (2, 3, 3, 5)
    """
    if a.ndim == 0 or b.ndim == 0:
        raise UnsupportedOperationError(f"np.matmul with a scalar operand (shapes {a.shape} and {b.shape}) is not "
                                        "supported by jacacc.tensor; use *")
    inner_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if a.shape[-1] != inner_b:
        raise UnsupportedOperationError(f"np.matmul: shapes {a.shape} and {b.shape} do not align")
    batch_a, batch_b = a.shape[:-2], b.shape[:-2]
    try:
        batch = tuple(np.broadcast_shapes(batch_a, batch_b))
    except ValueError:
        raise UnsupportedOperationError(f"np.matmul: the batch axes of shapes {a.shape} and {b.shape} do not "
                                        "broadcast") from None
    letters = index_letters(len(batch))
    i, j, k = index_letters(3, len(batch))

    def batch_labels(t: Tensor, own: Shape) -> tuple[Tensor, str]:
        mine = letters[len(batch) - len(own):]
        drop = [m for m, (n, full) in enumerate(zip(own, batch[len(batch) - len(own):], strict=True)) if n != full]
        return drop_unit_axes(t, drop), "".join(c for m, c in enumerate(mine) if m not in drop)

    a, la = batch_labels(a, batch_a)
    b, lb = batch_labels(b, batch_b)
    la += (i if a.ndim - len(la) == 2 else "") + j
    lb += j + (k if b.ndim - len(lb) == 2 else "")
    out = letters + (i if i in la else "") + (k if k in lb else "")
    return E.einsum(f"{la},{lb}->{out}", a, b)


def dot_nodes(a: Tensor, b: Tensor) -> Tensor:
    """``np.dot``: a product with a scalar, else the last axis of ``a`` against the second-to-last of
    ``b`` (its only one for a vector), as one einsum.

    >>> dot_nodes(E.var("a", (2, 3, 4)), E.var("b", (5, 4, 6))).shape
    (2, 3, 5, 6)
    """
    if a.ndim == 0 or b.ndim == 0:
        return _elementwise_product(a, b, "dot")
    summed_b = 0 if b.ndim == 1 else b.ndim - 2
    if a.shape[-1] != b.shape[summed_b]:
        raise UnsupportedOperationError(f"np.dot: shapes {a.shape} and {b.shape} are not aligned")
    la, lb = index_letters(a.ndim), list(index_letters(b.ndim, a.ndim))
    lb[summed_b] = la[-1]
    lb = "".join(lb)
    return E.einsum(f"{la},{lb}->{la[:-1]}{lb.replace(la[-1], '')}", a, b)


@register_function(np.tensordot)
def _np_tensordot(a: Any, b: Any, axes: Any = 2) -> Traced:
    x, y = _node(a), _node(b)
    if isinstance(axes, numbers.Integral):
        if not 0 <= axes <= min(x.ndim, y.ndim):
            raise TraceError(f"np.tensordot: cannot sum {axes} axes of shapes {x.shape} and {y.shape}")
        ax, ay = list(range(x.ndim - axes, x.ndim)), list(range(axes))
    else:
        try:
            first, second = axes
        except (TypeError, ValueError):
            raise TraceError(f"np.tensordot: axes must be an integer or a pair of axis lists, got {axes!r}") from None
        first = [first] if isinstance(first, numbers.Integral) else list(first)
        second = [second] if isinstance(second, numbers.Integral) else list(second)
        ax = [_axis("np.tensordot", k, x.shape) for k in first]
        ay = [_axis("np.tensordot", k, y.shape) for k in second]
    if len(ax) != len(ay) or len(set(ax)) != len(ax) or len(set(ay)) != len(ay) \
            or any(x.shape[p] != y.shape[q] for p, q in zip(ax, ay, strict=True)):
        raise TraceError(f"np.tensordot: axes {axes!r} do not pair up axes of equal length in shapes "
                         f"{x.shape} and {y.shape}")
    lx, ly = index_letters(x.ndim), list(index_letters(y.ndim, x.ndim))
    for p, q in zip(ax, ay, strict=True):
        ly[q] = lx[p]
    ly = "".join(ly)
    out = "".join(c for k, c in enumerate(lx) if k not in ax) + "".join(c for k, c in enumerate(ly) if k not in ay)
    return Traced(E.einsum(f"{lx},{ly}->{out}", x, y))


@register_function(np.kron)
def _np_kron(a: Any, b: Any) -> Traced:
    x, y = _node(a), _node(b)
    nd = max(x.ndim, y.ndim)
    x, y = _at_least(x, nd), _at_least(y, nd)
    lx, ly = index_letters(nd), index_letters(nd, nd)
    # the outer product with each pair of axes side by side, then each pair merged (C order)
    outer = E.einsum(f"{lx},{ly}->" + "".join(p + q for p, q in zip(lx, ly, strict=True)), x, y)
    return Traced(reshape_node(outer, tuple(m * n for m, n in zip(x.shape, y.shape, strict=True))))
