"""More of NumPy on traced tensors: rolls, tilings, flips, triangles, cross products, splits,
finite differences, rounding, remainders, selections, offset diagonals, casts, convolutions,
``linspace``, einsum's interleaved form and NumPy functions given lists of traced values.

Every function is written with the tracer's existing building blocks, so its derivatives (of
any order, in every mode) come from the calculus and keep their structure:

* **data movement** — ``roll`` (two slices concatenated), ``tile`` and ``repeat`` with an integer
  count (an einsum with ones, then a reshape), ``repeat`` with per-entry counts (a gather),
  ``flip``/``flipud``/``fliplr`` (slices of step −1), ``rot90`` (flips and a transposition),
  ``atleast_1d/2d/3d`` (unit axes), ``append`` (a concatenation), ``vsplit``/``hsplit``/``dsplit``
  (slices), ``diag(v, k)`` (a δ padded by ``|k|``), ``diagonal``/``trace`` with an offset and any
  pair of axes (a transposition, a slice and the einsum ``…ii->…i``), ``rollaxis`` (a
  transposition), ``column_stack`` (unit axes and a concatenation; a traced array given alone
  is iterated along its first axis, as NumPy does), ``copy``/``ndarray.copy`` (the same node);
* **arithmetic** — ``cross`` (products of components), ``gradient`` (differences of slices,
  divided as NumPy divides), ``rad2deg``/``deg2rad`` (a scaling), ``sinc`` (``sin(y)/y``
  with NumPy's guard at 0, where a second-order Maclaurin polynomial gives JAX's derivatives),
  ``logaddexp2`` (NumPy's two-sided form ``max + LOG2E·log1p(exp2(−|x − y|))`` with the side
  chosen by a selection, smooth through ties: JAX's ½/½ and curvature there; within an ulp
  or two of NumPy's value, whose scalar ``exp2``/``log1p`` round otherwise than the vectorized
  loops), ``linspace`` of traced ``start``/``stop`` (NumPy's ``k·step + start``, the last
  entry ``stop``; ``retstep``, ``endpoint``, ``axis``), ``convolve`` of 1-D arrays in the modes
  ``full``/``same``/``valid`` (:func:`convolve_nodes`: one operand gathered into its Toeplitz
  arrangement — the constant one where one is, so the traced one meets only an einsum —
  and contracted with the other by an einsum; the same sums as NumPy's in another order);
* **einsum's interleaved form** — ``np.einsum(a, [0, 1], b, [1, 2], [0, 2])`` (``Ellipsis``
  allowed) is translated to subscripts with NumPy's letters (0–25 ``A``–``Z``, 26–51
  ``a``–``z``, so an implicit output comes in the integers' order);
* **real input** — ``imag`` is zeros (a constant), ``angle`` 0 or π (180 with ``deg``) by the
  sign bit (−0.0 gives π, as NumPy), piecewise constant, ``real_if_close`` the identity;
* **lists of traced values** — NumPy's dispatch never looks inside a list, so ``np.sum``,
  ``prod``, ``mean``, ``std``, ``var``, ``max``, ``min``, ``append`` and ``np.linalg.norm`` are
  also traced by name (:func:`~jacacc.tensor.library.register_library`): a list or tuple
  holding traced values (``np.mean([x, x + 2])``) is stacked, as ``np.array`` stacks it,
  and the function called on the stack;
* **selections** — ``tril``/``triu``, ``nan_to_num`` and ``select`` as the table's ``where``,
  whose untaken branch has derivative 0;
* **piecewise-constant values** — ``floor``, ``ceil``, ``trunc``, ``rint``, ``round`` and the
  rounding of a narrowing ``astype`` are computed at evaluation time by the operator
  ``piecewise_constant`` and passed through the table's ``stop_gradient``; ``mod``/``remainder``/
  ``fmod`` (and ``%`` once :class:`~jacacc.tensor.trace.Traced` has ``__mod__``) add the
  table's ``tangent_seed`` of each operand (value 0, derivative 1) times the locally constant
  slopes JAX uses: 1 in ``x``, and in ``y`` ``−trunc(x/y)`` plus 1 where JAX's ``remainder``
  adds ``y`` back (``−floor(x/y)`` away from rounding ties), ``−trunc(x/y)`` for ``fmod``.
  ``astype`` to a narrower float is its rounded value with the identity derivative (JAX's
  ``convert_element_type``).

Values are NumPy's own, bit for bit: divisions are the table's ``div`` (not a product with a
reciprocal), and a constant is applied in the order NumPy applies it — except where said
(``logaddexp2``; a convolution's and an interleaved einsum's sums of products, rounded in the
order of the einsum's evaluation).

Refused in one line naming the function and the argument: ``np.partition`` (its arrangement
of the entries around ``kth`` is NumPy's selection algorithm, not a sort; ``np.sort`` is
supported), ``astype`` to an integer, boolean or complex type (and ``np.int64(x)``,
``int(x)`` — the tracer's own refusals: an integer made from traced values indexes by the
values), ``np.gradient`` with coordinate arrays or ``edge_order=2``, ``out=``,
``nan_to_num(copy=False)`` (in place), traced shifts, counts and ``num``, a
``linspace`` to a non-float ``dtype``, ``convolve`` modes NumPy does not know and operands that
are not 1-D, and conditions that are not comparisons.  ``ndarray.all``/``any`` stay refused by
name (the truth of traced values is data-dependent).

Registration never replaces a handler silently: :func:`_register` raises a
:class:`~jacacc.errors.RegistryError` when a function already has one, unless the handler it
replaces is named (``np.diag`` keeps the tracer's own for ``k = 0``; ``np.trace`` is the
general form of the tracer's square-matrix one).

Examples
--------
>>> import numpy as np
>>> import jacacc.tensor as jt
>>> import jacacc.tensor.numpy_more
>>> jt.grad(lambda x: np.sum(np.roll(x, 1) * np.arange(3.0)))(np.ones(3)).tolist()
[1.0, 2.0, 0.0]
>>> jt.grad(lambda x: np.sum(np.mod(x, 1.5)))(np.array([2.0, -1.0])).tolist()
[1.0, 1.0]
>>> jt.grad(lambda x: np.sum(np.linspace(x[0], x[1], 5)))(np.array([0.0, 1.0])).tolist()
[2.5, 2.5]
>>> jt.grad(lambda x: np.mean([x[0], x[1] ** 2]))(np.array([3.0, 2.0])).tolist()
[0.5, 2.0]
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jacacc.errors import RegistryError, TraceError, UnsupportedOperationError
from jacacc.ops import array_module
from jacacc.tensor import expr as E
from jacacc.tensor.arrays import (
    _advanced_index,
    _at_least,
    _axes,
    _axis,
    _basic_index,
    _locally_constant,
    _options,
    _size_flops,
    _split,
    concatenate_nodes,
    insert_unit_axes,
    reshape_node,
    transpose_node,
)
from jacacc.tensor.expr import Tensor, index_letters
from jacacc.tensor.library import _as_traced, _traced_inside, register_library
from jacacc.tensor.operators import Operator, apply_operator, register_operator
from jacacc.tensor.trace import (
    _FUNCTIONS,
    _METHODS,
    _TRACE_DTYPE,
    _UFUNCS,
    Traced,
    _binary_elementwise,
    _broadcast_pair,
    _broadcast_to,
    _diag,
    _einsum,
    _is_mask,
    _node,
    _result_shape,
    _trace,
    _where,
    integer_dtype,
    integer_result,
    qualified_name,
)

__all__: list[str] = []

Shape = tuple[int, ...]


# ---------------------------------------------------------------------------- registration
def _check_free(table: dict[Any, Callable[..., Any]], key: Any, name: str, replaces: Callable[..., Any] | None) -> None:
    """Refuse to file a handler over another one, unless it is the one named in ``replaces`` or one
    of this module's (a reload of this module files its handlers again)."""
    current = table.get(key)
    if current is None or current is replaces or getattr(current, "__module__", None) == __name__:
        return
    owner = f"{getattr(current, '__module__', '?')}.{getattr(current, '__qualname__', repr(current))}"
    raise RegistryError(f"{name} already has a tracing handler ({owner}); jacacc.tensor.numpy_more does not "
                        "replace it silently")


def _register(*funcs: Any, replaces: Callable[..., Any] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the handler of the NumPy functions ``funcs`` (``__array_function__``), refusing to
    replace an existing handler other than ``replaces``."""

    def register(handler: Callable[..., Any]) -> Callable[..., Any]:
        for func in funcs:
            _check_free(_FUNCTIONS, func, qualified_name(func), replaces)
        for func in funcs:
            _FUNCTIONS[func] = handler
        return handler

    return register


def _register_ufuncs(handler: Callable[..., Any], *names: str) -> None:
    for name in names:
        _check_free(_UFUNCS, name, f"np.{name}", None)
    for name in names:
        _UFUNCS[name] = handler


def _register_methods(handler: Callable[..., Any], *names: str) -> None:
    for name in names:
        _check_free(_METHODS, name, f"ndarray.{name}", None)
    for name in names:
        _METHODS[name] = handler


# ---------------------------------------------------------------------------- argument checks
def _integer(name: str, what: str, value: Any) -> int:
    """A Python int from an integer argument; a traced one is refused (shapes are fixed while tracing)."""
    if isinstance(value, Traced):
        raise UnsupportedOperationError(f"{name} with a traced {what} is not supported by jacacc.tensor "
                                        "(the result's shape would depend on the values)")
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise TraceError(f"{name}: {what} must be an integer, got {value!r}")
    return int(value)


def _integers(name: str, what: str, value: Any) -> tuple[int, ...]:
    if isinstance(value, Traced):
        _integer(name, what, value)
    items = np.atleast_1d(np.asarray(value))
    if items.ndim != 1 or not (items.size == 0 or np.issubdtype(items.dtype, np.integer)):
        raise TraceError(f"{name}: {what} must be an integer or a sequence of integers, got {value!r}")
    return tuple(int(k) for k in items)


def _slices_along(axis: int, item: Any) -> tuple[Any, ...]:
    """A basic index taking ``item`` along ``axis`` and everything along the axes before it."""
    return (slice(None),) * axis + (item,)


def _subtract(a: Tensor, b: Tensor) -> Tensor:
    """``a − b`` as a sum with ``−1·b`` (rounded as NumPy's subtraction: negation is exact)."""
    return E.add(a, E.scale(-1.0, b))


def _divide(t: Tensor, divisor: float) -> Tensor:
    """``t / divisor`` rounded as NumPy's division: a scaling where the reciprocal is exact (a power
    of two), else the table's ``div`` (a product with a rounded reciprocal may differ in the last bit)."""
    mantissa, _ = math.frexp(divisor)
    if abs(mantissa) == 0.5:
        return E.scale(1.0 / divisor, t)
    return E.elementwise("div", t, E.const(divisor))


# ---------------------------------------------------------------------------- roll, tile, repeat
def _roll_axis(x: Tensor, shift: int, axis: int) -> Tensor:
    n = x.shape[axis]
    if n == 0 or shift % n == 0:
        return x
    cut = n - shift % n  # the last shift entries come first
    return concatenate_nodes([_basic_index(x, _slices_along(axis, slice(cut, None))),
                              _basic_index(x, _slices_along(axis, slice(None, cut)))], axis, "np.roll")


@_register(np.roll)
def _np_roll(a: Any, shift: Any, axis: Any = None) -> Traced:
    """``np.roll``: along each axis, the last ``shift`` entries moved to the front (a concatenation
    of two slices); shifts and axes broadcast together and add up per axis, as NumPy."""
    x = _node(a)
    shifts = _integers("np.roll", "shift", shift)
    if axis is None:  # NumPy rolls the flattened array by every shift given
        flat = _roll_axis(reshape_node(x, (x.size,)), sum(shifts), 0)
        return Traced(reshape_node(flat, x.shape))
    _integers("np.roll", "axis", axis)
    try:
        pairs = np.broadcast(np.asarray(shift), np.asarray(axis))
    except ValueError:
        raise TraceError(f"np.roll: shift {shift!r} and axis {axis!r} do not broadcast") from None
    if pairs.ndim > 1:
        raise TraceError("np.roll: 'shift' and 'axis' should be scalars or 1D sequences")
    total: dict[int, int] = {}
    for s, k in pairs:
        k = _axis("np.roll", int(k), x.shape)
        total[k] = total.get(k, 0) + int(s)
    for k, s in total.items():
        x = _roll_axis(x, s, k)
    return Traced(x)


@_register(np.tile)
def _np_tile(A: Any, reps: Any) -> Traced:  # noqa: N803 - NumPy's name
    """``np.tile``: each axis ``a`` of length ``n`` becomes ``(r, n)`` by an einsum with ones, then
    merged into ``r·n`` (C order puts the copies one after another)."""
    x = _node(A)
    counts = _integers("np.tile", "reps", reps)
    if any(r < 0 for r in counts):
        raise TraceError(f"np.tile: reps must be non-negative, got {reps!r}")
    counts = (1,) * (x.ndim - len(counts)) + counts  # NumPy pads the shorter of the two with ones in front
    x = insert_unit_axes(x, tuple(range(len(counts) - x.ndim)))
    if all(r == 1 for r in counts):
        return Traced(x)
    own, copies = index_letters(x.ndim), index_letters(x.ndim, x.ndim)
    spread = E.einsum(f"{own},{copies}->" + "".join(c + o for c, o in zip(copies, own, strict=True)),
                      x, E.ones(counts))
    return Traced(reshape_node(spread, tuple(r * n for r, n in zip(counts, x.shape, strict=True))))


@_register(np.repeat)
def _np_repeat(a: Any, repeats: Any, axis: Any = None) -> Traced:
    """``np.repeat``: one count for every entry is an einsum with ones and a reshape; a count per
    entry is a gather of each index repeated (its transpose adds the copies back up)."""
    x = _node(a)
    if isinstance(repeats, Traced):
        _integer("np.repeat", "repeats", repeats)
    counts = np.asarray(repeats)
    if not (counts.size == 0 or np.issubdtype(counts.dtype, np.integer)) or counts.ndim > 1:
        raise TraceError(f"np.repeat: repeats must be an integer or a 1-D array of integers, got {repeats!r}")
    if np.any(counts < 0):
        raise TraceError("np.repeat: repeats may not contain negative values")
    if axis is None:
        x, axis = reshape_node(x, (x.size,)), 0
    axis = _axis("np.repeat", axis, x.shape)
    n = x.shape[axis]
    if counts.size == 1:
        count = int(counts.reshape(-1)[0])
        own, copy = index_letters(x.ndim), index_letters(1, x.ndim)
        spread = E.einsum(f"{own},{copy}->{own[:axis + 1]}{copy}{own[axis + 1:]}", x, E.ones((count,)))
        return Traced(reshape_node(spread, x.shape[:axis] + (n * count,) + x.shape[axis + 1:]))
    if counts.shape != (n,):
        raise TraceError(f"np.repeat: {counts.size} counts for an axis of length {n}")
    return Traced(_advanced_index(x, _slices_along(axis, np.repeat(np.arange(n), counts))))


# ---------------------------------------------------------------------------- flips and rotations
def _flip_node(x: Tensor, axes: Sequence[int]) -> Tensor:
    if not axes:
        return x
    return _basic_index(x, tuple(slice(None, None, -1) if k in axes else slice(None) for k in range(x.ndim)))


@_register(np.flip)
def _np_flip(m: Any, axis: Any = None) -> Traced:
    """``np.flip``: a slice of step −1 along each axis named (all of them for ``None``)."""
    x = _node(m)
    return Traced(_flip_node(x, _axes("np.flip", axis, x.shape)))


@_register(np.flipud)
def _np_flipud(m: Any) -> Traced:
    x = _node(m)
    if x.ndim < 1:
        raise TraceError("np.flipud: input must be >= 1-d")
    return Traced(_flip_node(x, (0,)))


@_register(np.fliplr)
def _np_fliplr(m: Any) -> Traced:
    x = _node(m)
    if x.ndim < 2:
        raise TraceError("np.fliplr: input must be >= 2-d")
    return Traced(_flip_node(x, (1,)))


@_register(np.rot90)
def _np_rot90(m: Any, k: Any = 1, axes: Any = (0, 1)) -> Traced:
    """``np.rot90``: NumPy's own composition of flips and the transposition swapping ``axes``."""
    x = _node(m)
    turns = _integer("np.rot90", "k", k) % 4
    pair = tuple(axes)
    if len(pair) != 2:
        raise TraceError("np.rot90: len(axes) must be 2")
    first, second = (_axis("np.rot90", p, x.shape) for p in pair)
    if first == second:
        raise TraceError("np.rot90: axes must be different")
    if turns == 0:
        return Traced(x)
    if turns == 2:
        return Traced(_flip_node(x, (first, second)))
    order = list(range(x.ndim))
    order[first], order[second] = order[second], order[first]
    if turns == 1:
        return Traced(transpose_node(_flip_node(x, (second,)), order))
    return Traced(_flip_node(transpose_node(x, order), (second,)))


# ---------------------------------------------------------------------------- triangles
def _triangle(name: str, m: Any, k: Any, lower: bool) -> Traced:
    x = _node(m)
    offset = _integer(name, "k", k)
    if x.ndim == 0:
        raise TraceError(f"{name}: the input must be at least one-dimensional")
    # np.where against a constant mask, as NumPy (and JAX): an infinite entry off the triangle
    # gives 0, where a product with the mask would give NaN; the entries masked out have derivative 0
    rows, cols = x.shape[-2:] if x.ndim >= 2 else (x.shape[0], x.shape[0])
    mask = np.tri(rows, cols, offset, dtype=bool) if lower else ~np.tri(rows, cols, offset - 1, dtype=bool)
    return _where(mask, Traced(x), 0.0)


@_register(np.tril)
def _np_tril(m: Any, k: Any = 0) -> Traced:
    return _triangle("np.tril", m, k, True)


@_register(np.triu)
def _np_triu(m: Any, k: Any = 0) -> Traced:
    return _triangle("np.triu", m, k, False)


# ---------------------------------------------------------------------------- cross product
def _to_last(name: str, x: Tensor, axis: Any) -> Tensor:
    if x.ndim == 0:
        raise TraceError(f"{name}: the operands must be at least one-dimensional")
    k = _axis(name, axis, x.shape)
    return transpose_node(x, [j for j in range(x.ndim) if j != k] + [k])


@_register(np.cross)
def _np_cross(a: Any, b: Any, axisa: Any = -1, axisb: Any = -1, axisc: Any = -1, axis: Any = None) -> Traced:
    """``np.cross`` of 2- and 3-vectors: each component a difference of products of components (in
    NumPy's order of operations), batch axes broadcast; a 2-vector has a zero third component."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = _to_last("np.cross", _node(a), axisa), _to_last("np.cross", _node(b), axisb)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        raise TraceError(f"np.cross: incompatible dimensions for cross product (dimension must be 2 or 3), got "
                         f"{x.shape[-1]} and {y.shape[-1]}")
    _result_shape("cross", E.zeros(x.shape[:-1]), E.zeros(y.shape[:-1]))  # batch axes that do not broadcast
    p = [Traced(_basic_index(x, (Ellipsis, i))) for i in range(x.shape[-1])]
    q = [Traced(_basic_index(y, (Ellipsis, i))) for i in range(y.shape[-1])]
    if len(p) == 2 or len(q) == 2:
        warnings.warn("Arrays of 2-dimensional vectors are deprecated. Use arrays of 3-dimensional vectors "
                      "instead. (deprecated in NumPy 2.0)", DeprecationWarning, stacklevel=3)  # as NumPy warns
    third = p[0] * q[1] - p[1] * q[0]
    if len(p) == 2 and len(q) == 2:
        return third
    if len(p) == 2:  # a = (a0, a1, 0)
        parts = [p[1] * q[2], -(p[0] * q[2]), third]
    elif len(q) == 2:  # b = (b0, b1, 0)
        parts = [-(p[2] * q[1]), p[2] * q[0], third]
    else:
        parts = [p[1] * q[2] - p[2] * q[1], p[2] * q[0] - p[0] * q[2], third]
    stacked = concatenate_nodes([insert_unit_axes(t.node, (t.ndim,)) for t in parts], -1, "np.cross")
    out = _axis("np.cross", axisc, stacked.shape)
    order = list(range(stacked.ndim - 1))
    order.insert(out, stacked.ndim - 1)
    return Traced(transpose_node(stacked, order))


# ---------------------------------------------------------------------------- atleast_nd, append, splits
def _at_least_3d(x: Tensor) -> Tensor:
    if x.ndim == 0:
        return insert_unit_axes(x, (0, 1, 2))
    if x.ndim == 1:  # NumPy: (N,) -> (1, N, 1)
        return insert_unit_axes(x, (0, 2))
    if x.ndim == 2:  # (M, N) -> (M, N, 1)
        return insert_unit_axes(x, (2,))
    return x


def _at_least_nd(ndim: int, func: Callable[..., Any], arys: Sequence[Any]) -> Any:
    results = []
    for a in arys:
        if not isinstance(a, Traced):  # a constant among traced arrays stays NumPy's
            results.append(func(a))
        else:
            results.append(Traced(_at_least_3d(a.node) if ndim == 3 else _at_least(a.node, ndim)))
    return results[0] if len(results) == 1 else tuple(results)


@_register(np.atleast_1d)
def _np_atleast_1d(*arys: Any) -> Any:
    return _at_least_nd(1, np.atleast_1d, arys)


@_register(np.atleast_2d)
def _np_atleast_2d(*arys: Any) -> Any:
    return _at_least_nd(2, np.atleast_2d, arys)


@_register(np.atleast_3d)
def _np_atleast_3d(*arys: Any) -> Any:
    return _at_least_nd(3, np.atleast_3d, arys)


@_register(np.append)
def _np_append(arr: Any, values: Any, axis: Any = None) -> Traced:
    """``np.append``: a concatenation (of the flattened operands for ``axis=None``)."""
    x, v = _node(arr), _node(values)
    if axis is None:
        x, v, axis = reshape_node(x, (x.size,)), reshape_node(v, (v.size,)), 0
    return Traced(concatenate_nodes([x, v], axis, "np.append"))


@_register(np.vsplit)
def _np_vsplit(ary: Any, indices_or_sections: Any) -> list[Traced]:
    if _node(ary).ndim < 2:
        raise TraceError("np.vsplit only works on arrays of 2 or more dimensions")
    return _split("np.vsplit", True, ary, indices_or_sections, 0)


@_register(np.hsplit)
def _np_hsplit(ary: Any, indices_or_sections: Any) -> list[Traced]:
    ndim = _node(ary).ndim
    if ndim == 0:
        raise TraceError("np.hsplit only works on arrays of 1 or more dimensions")
    return _split("np.hsplit", True, ary, indices_or_sections, 1 if ndim > 1 else 0)


@_register(np.dsplit)
def _np_dsplit(ary: Any, indices_or_sections: Any) -> list[Traced]:
    if _node(ary).ndim < 3:
        raise TraceError("np.dsplit only works on arrays of 3 or more dimensions")
    return _split("np.dsplit", True, ary, indices_or_sections, 2)


# ---------------------------------------------------------------------------- gradient
def _spacing(varargs: Sequence[Any], count: int) -> list[float]:
    if any(isinstance(h, Traced) for h in varargs):
        raise UnsupportedOperationError("np.gradient with a traced spacing is not supported by jacacc.tensor")
    if not varargs:
        return [1.0] * count
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        return [float(varargs[0])] * count
    if len(varargs) != count:
        raise TraceError(f"np.gradient: {len(varargs)} spacings for {count} axes")
    if any(np.ndim(h) != 0 for h in varargs):
        raise UnsupportedOperationError("np.gradient with coordinate arrays (non-uniform spacing) is not "
                                        "supported by jacacc.tensor; give scalar spacings")
    return [float(h) for h in varargs]


@_register(np.gradient)
def _np_gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: Any = 1) -> Any:
    """``np.gradient`` with uniform spacing and ``edge_order=1``: central differences inside,
    one-sided ones at the two ends, each divided by the spacing as NumPy divides."""
    if edge_order != 1:
        raise UnsupportedOperationError(f"np.gradient with edge_order={edge_order!r} is not supported by "
                                        "jacacc.tensor (edge_order=1 is)")
    x = _node(f)
    if axis is None:
        axes: tuple[int, ...] = tuple(range(x.ndim))
    else:
        items = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
        axes = tuple(_axis("np.gradient", k, x.shape) for k in items)
        if len(set(axes)) != len(axes):
            raise TraceError(f"np.gradient: repeated axis in {axis!r}")
    spacings = _spacing(varargs, len(axes))
    results = []
    for k, h in zip(axes, spacings, strict=True):
        n = x.shape[k]
        if n < 2:
            raise TraceError("np.gradient: shape of array too small to calculate a numerical gradient, at least "
                             "(edge_order + 1) elements are required")

        def part(start: int | None, stop: int | None, k: int = k) -> Tensor:
            return _basic_index(x, _slices_along(k, slice(start, stop)))

        pieces = [_divide(_subtract(part(1, 2), part(0, 1)), h)]
        if n > 2:
            pieces.append(_divide(_subtract(part(2, None), part(None, -2)), 2.0 * h))
        pieces.append(_divide(_subtract(part(-1, None), part(-2, -1)), h))
        results.append(Traced(concatenate_nodes(pieces, k, "np.gradient")))
    return results[0] if len(results) == 1 else tuple(results)


# ---------------------------------------------------------------------------- angles, sinc
def _scaled(factor: float) -> Callable[[Any], Traced]:
    def handler(x: Any) -> Traced:
        return Traced(E.scale(factor, _node(x)))  # x · c, as NumPy's loop: a product is commutative

    return handler


_register_ufuncs(_scaled(180.0 / math.pi), "rad2deg", "degrees")
_register_ufuncs(_scaled(math.pi / 180.0), "deg2rad", "radians")


@_register(np.sinc)
def _np_sinc(x: Any) -> Traced:
    """``np.sinc`` as NumPy computes it, ``sin(y)/y`` with ``y = πx`` (``eps`` where ``y = 0``), and
    at ``y = 0`` the Maclaurin polynomial ``1 − y²/6``: the value 1 and JAX's derivatives there
    (0, then −π²/3; those of order four and up are not JAX's)."""
    t = Traced(_node(x))
    y = t * np.pi
    at_zero = y == 0.0
    guarded = _where(at_zero, float(np.finfo(t.dtype).eps), y)
    ratio = _binary_elementwise("div", np.sin(guarded), guarded)
    return _where(at_zero, 1.0 - y ** 2 / 6.0, ratio)


# ---------------------------------------------------------------------------- nan_to_num, select
@_register(np.nan_to_num)
def _np_nan_to_num(x: Any, copy: Any = True, nan: Any = 0.0, posinf: Any = None, neginf: Any = None) -> Traced:
    """``np.nan_to_num``: three selections; a replaced entry has derivative 0, the others 1."""
    if not copy:
        raise UnsupportedOperationError("np.nan_to_num with copy=False (in place) is not supported by jacacc.tensor")
    t = Traced(_node(x))
    info = np.finfo(t.dtype)
    result = _where(t != t, nan, t)
    result = _where(t == np.inf, info.max if posinf is None else posinf, result)
    return _where(t == -np.inf, info.min if neginf is None else neginf, result)


@_register(np.select)
def _np_select(condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    """``np.select``: nested selections, the first condition that holds winning (as NumPy)."""
    conditions, choices = list(condlist), list(choicelist)
    if len(conditions) != len(choices):
        raise TraceError("np.select: list of cases must be same length as list of conditions")
    if not conditions:
        raise TraceError("np.select: select with an empty condition list is not possible")
    for k, c in enumerate(conditions):
        if isinstance(c, Traced):
            if not _is_mask(c.node):
                raise UnsupportedOperationError(f"np.select: condition {k} is a traced array that is not a "
                                                "comparison; NumPy requires boolean conditions")
        elif np.asarray(c).dtype != bool:
            raise TraceError(f"np.select: invalid entry {k} in condlist: should be boolean ndarray")
    result = default
    for c, choice in reversed(list(zip(conditions, choices, strict=True))):
        result = _where(c, choice, result)
    return result


# ---------------------------------------------------------------------------- piecewise-constant values
def _cast(x: np.ndarray, dtype: str) -> np.ndarray:
    return x.astype(dtype).astype(x.dtype)


#: the values ``piecewise_constant`` computes (``decimals`` for ``round``, the target for ``cast``):
#: by ``how``, the function of ``(xp, x, option)`` and its spelling in the straight-line program
#: (``(x, option)`` → NumPy source: no Python call around the ufunc, 1.2 µs a call of 256 entries;
#: an advection rounds and casts each of its cells)
_PIECEWISE: dict[str, tuple[Callable[..., Any], Callable[[str, Any], str]]] = {
    "floor": (lambda xp, x, option: xp.floor(x), lambda x, option: f"np.floor({x})"),
    "ceil": (lambda xp, x, option: xp.ceil(x), lambda x, option: f"np.ceil({x})"),
    "trunc": (lambda xp, x, option: xp.trunc(x), lambda x, option: f"np.trunc({x})"),
    "rint": (lambda xp, x, option: xp.rint(x), lambda x, option: f"np.rint({x})"),
    "round": (lambda xp, x, option: xp.round(x, option), lambda x, option: f"np.round({x}, {option!r})"),
    "cast": (lambda xp, x, option: _cast(x, option), lambda x, option: f"{x}.astype({option!r}).astype({x}.dtype)"),
}


def _piecewise_forward(x: np.ndarray, how: str, option: Any = None) -> np.ndarray:
    return _PIECEWISE[how][0](array_module((x,)), x, option)


def _piecewise_spelling(args: list[str], how: str, option: Any = None) -> str:
    (x,) = args
    return _PIECEWISE[how][1](x, option)


register_operator(Operator("piecewise_constant", _piecewise_forward, lambda a, **_: (a,), flops=_size_flops,
                           batch=lambda batch_shape, args, flags, **options: (args, options), device=True,
                           zero_derivative=True, spelling=_piecewise_spelling))


def _piecewise(how: str, x: Any, option: Any = None) -> Traced:
    """The value ``how`` computes, behind a stop-gradient: data to every derivative (JAX's rounding
    functions have derivative 0)."""
    (value,) = apply_operator("piecewise_constant", [_node(x)], how=how, option=option)
    return Traced(_locally_constant(value))


for _how in ("floor", "ceil", "trunc", "rint"):
    _register_ufuncs(lambda x, _how=_how: _piecewise(_how, x), _how)
del _how


@_register(np.round, np.around)
def _np_round(a: Any, decimals: Any = 0, out: Any = None) -> Traced:
    """``np.round``/``np.around``: NumPy's value (half to even, ``decimals`` places), derivative 0."""
    if out is not None:
        raise UnsupportedOperationError("np.round with out= is not supported by jacacc.tensor")
    return _piecewise("round", a, _integer("np.round", "decimals", decimals))


def _identity(x: Any, *args: Any, **kwargs: Any) -> Traced:
    return Traced(_node(x))  # real input: conj, conjugate and real are the identity


_register_ufuncs(_identity, "conjugate")
_register(np.real)(_identity)
_register_methods(lambda a, decimals=0, out=None: _np_round(a, decimals, out), "round")
_register_methods(lambda a: Traced(a.node), "conj", "conjugate")


@_register(np.partition)
def _np_partition(a: Any, kth: Any, axis: Any = -1, kind: Any = "introselect", order: Any = None) -> Traced:
    raise UnsupportedOperationError("np.partition is not supported by jacacc.tensor: where the entries land "
                                    "around kth is decided by NumPy's selection algorithm from the values, not "
                                    "by a constant permutation; use np.sort")


# ---------------------------------------------------------------------------- remainders
def _remainder_forward(x: np.ndarray, y: np.ndarray, truncated: bool) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's remainder (``fmod`` if ``truncated``) and JAX's partial in ``y``: ``−trunc(x/y)``,
    plus 1 where ``remainder`` adds ``y`` to the truncated remainder (its sign differs from y's)."""
    xp = array_module((x, y))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        value = xp.fmod(x, y) if truncated else xp.remainder(x, y)
        slope = -xp.trunc(x / y)
        if not truncated:
            rem = xp.fmod(x, y)
            slope = slope + ((rem != 0) & ((rem < 0) != (y < 0)))
    # an overflowing x/y would make slope·0 NaN in the value: only there, the slope is dropped
    return value, xp.where(xp.isfinite(slope) | ~xp.isfinite(value), slope, 0.0).astype(value.dtype)


def _remainder_batch(batch_shape, args, flags, **options):  # noqa: ANN001, ANN202, ANN003
    from jacacc.tensor.batching import spread

    return [a if f else spread(a, tuple(batch_shape)) for a, f in zip(args, flags, strict=True)], options


def _remainder_shapes(a: Shape, b: Shape, **_: Any) -> tuple[Shape, Shape]:
    if a != b:
        raise ValueError(f"remainder_parts: shapes {a} and {b} differ")
    return (a, a)


register_operator(Operator("remainder_parts", _remainder_forward, _remainder_shapes,
                           flops=lambda a, b, **_: 4 * math.prod(a), batch=_remainder_batch, device=True,
                           zero_derivative=True))


def _integer_remainder(x: np.ndarray, y: np.ndarray, truncated: bool) -> np.ndarray:
    xp = array_module((x, y))
    return xp.fmod(x, y) if truncated else xp.remainder(x, y)


register_operator(Operator("integer_remainder", _integer_remainder, lambda a, b, **_: (a,),
                           flops=lambda a, b, **_: math.prod(a), batch=_remainder_batch, device=True,
                           zero_derivative=True,
                           spelling=lambda args, truncated: f"np.{'fmod' if truncated else 'remainder'}({', '.join(args)})"))


def _remainder(name: str, truncated: bool, x: Any, y: Any) -> Traced:
    """NumPy's value behind a stop-gradient, plus ``tangent_seed(x) + slope·tangent_seed(y)``: the
    seeds are 0 in value and 1 in derivative, so the partials are JAX's (1 and the slope).  Of two
    integer arrays (indices computed from traced values), the value alone: integers have no
    derivative, and the slope would cost most of the call."""
    a, b = _broadcast_pair(name, _node(x), _node(y))
    if integer_dtype(x) is not None and integer_dtype(y) is not None:
        (value,) = apply_operator("integer_remainder", [a, b], truncated=truncated)
        return integer_result(Traced(value), x, y)
    value, slope = apply_operator("remainder_parts", [a, b], truncated=truncated)
    terms = [_locally_constant(value)]
    if isinstance(x, Traced):
        terms.append(E.unary("tangent_seed", a))
    if isinstance(y, Traced):
        labels = index_letters(a.ndim)
        terms.append(E.einsum(f"{labels},{labels}->{labels}", _locally_constant(slope), E.unary("tangent_seed", b)))
    return integer_result(Traced(E.add(*terms)), x, y)


_register_ufuncs(lambda x, y: _remainder("np.remainder", False, x, y), "remainder")
_register_ufuncs(lambda x, y: _remainder("np.fmod", True, x, y), "fmod")


def _floor_divide(x: Any, y: Any) -> Traced:
    """``x // y`` as NumPy defines it, ``(x − x mod y) / y`` (exact for integers), behind a zero
    derivative (piecewise constant, as JAX's)."""
    a, b = _broadcast_pair("np.floor_divide", _node(x), _node(y))
    (remainder,) = apply_operator("integer_remainder", [a, b], truncated=False)
    quotient = E.elementwise("div", E.add(a, E.scale(-1.0, remainder)), b)
    return integer_result(Traced(_locally_constant(quotient)), x, y)


_register_ufuncs(_floor_divide, "floor_divide")


# ---------------------------------------------------------------------------- diagonals and traces
def _diagonal_block(name: str, x: Tensor, offset: Any, axis1: Any, axis2: Any) -> Tensor | None:
    """The square block whose main diagonal is ``x``'s diagonal ``offset`` in the plane of ``axis1``
    and ``axis2``, those two axes moved last (None when the diagonal is empty)."""
    k = _integer(name, "offset", offset)
    if x.ndim < 2:
        raise TraceError(f"{name}: the array must be at least two-dimensional, got shape {x.shape}")
    i, j = _axis(name, axis1, x.shape), _axis(name, axis2, x.shape)
    if i == j:
        raise TraceError(f"{name}: axis1 and axis2 cannot be the same")
    x = transpose_node(x, [m for m in range(x.ndim) if m not in (i, j)] + [i, j])
    rows, cols = x.shape[-2:]
    length = max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))
    if length == 0:
        return None
    first, second = (0, k) if k >= 0 else (-k, 0)
    return _basic_index(x, (Ellipsis, slice(first, first + length), slice(second, second + length)))


def _diagonal_node(name: str, x: Tensor, offset: Any, axis1: Any, axis2: Any) -> Tensor:
    block = _diagonal_block(name, x, offset, axis1, axis2)
    if block is None:
        rest = tuple(n for m, n in enumerate(x.shape) if m not in {_axis(name, axis1, x.shape),
                                                                   _axis(name, axis2, x.shape)})
        return E.const(np.zeros((*rest, 0)))
    lead, d = index_letters(block.ndim - 2), index_letters(1, block.ndim - 2)
    return E.einsum(f"{lead}{d}{d}->{lead}{d}", block)


@_register(np.diagonal)
def _np_diagonal(a: Any, offset: Any = 0, axis1: Any = 0, axis2: Any = 1) -> Traced:
    """``np.diagonal``: the other axes first, the diagonal last (a slice and ``…ii->…i``)."""
    return Traced(_diagonal_node("np.diagonal", _node(a), offset, axis1, axis2))


@_register(np.trace, replaces=_trace)
def _np_trace(a: Any, offset: Any = 0, axis1: Any = 0, axis2: Any = 1, dtype: Any = None, out: Any = None) -> Traced:
    """``np.trace`` with any offset and pair of axes (batched): the sum ``…ii->…`` of the block."""
    _options("np.trace", out, dtype)
    x = _node(a)
    block = _diagonal_block("np.trace", x, offset, axis1, axis2)
    if block is None:
        return Traced(E.const(np.zeros(tuple(n for m, n in enumerate(x.shape) if m not in {
            _axis("np.trace", axis1, x.shape), _axis("np.trace", axis2, x.shape)}))))
    lead, d = index_letters(block.ndim - 2), index_letters(1, block.ndim - 2)
    return Traced(E.einsum(f"{lead}{d}{d}->{lead}", block))


_diag_main = _FUNCTIONS.get(np.diag, _diag)  # the tracer's own: k = 0


@_register(np.diag, replaces=_diag)
def _np_diag(v: Any, k: Any = 0) -> Traced:
    """``np.diag`` with an offset: a vector placed on diagonal ``k`` (its δ matrix padded by ``|k|``
    rows and columns), or diagonal ``k`` of a matrix; ``k = 0`` is the tracer's own handler."""
    offset = _integer("np.diag", "k", k)
    if offset == 0:
        return _diag_main(v)
    x = _node(v)
    if x.ndim == 1:
        square = E.einsum("i,ij->ij", x, E.delta(x.shape[0]))
        widths = ((0, offset), (offset, 0)) if offset > 0 else ((-offset, 0), (0, -offset))
        return Traced(apply_operator("pad", [square], widths=widths)[0])
    if x.ndim == 2:
        return Traced(_diagonal_node("np.diag", x, offset, 0, 1))
    raise TraceError(f"np.diag: input must be 1- or 2-d, got shape {x.shape}")


_register_methods(lambda a, offset=0, axis1=0, axis2=1: _np_diagonal(a, offset, axis1, axis2), "diagonal")
_register_methods(lambda a, offset=0, axis1=0, axis2=1, dtype=None, out=None:
                  _np_trace(a, offset, axis1, axis2, dtype, out), "trace")


# ---------------------------------------------------------------------------- astype
def _method_astype(a: Traced, dtype: Any, order: Any = "K", casting: Any = "unsafe", subok: Any = True,
                   copy: Any = True) -> Traced:
    """``ndarray.astype`` to a float type: the value rounded to it where it is narrower than the
    plan's (computation continues in the plan's type), the derivative the identity (as JAX's
    ``convert_element_type``); to an integer type, NumPy's cast behind a zero derivative, an
    integer array that may index (:mod:`jacacc.tensor.dynamic_index`); to bool, ``a != 0`` (a mask);
    complex targets are refused."""
    from jacacc.tensor.dynamic_index import astype_integer

    target = np.dtype(dtype)
    if target.kind in "iu":
        return astype_integer(a, target)
    if target.kind == "b":
        return a != 0
    if target.kind != "f" or target.itemsize > 8:
        raise UnsupportedOperationError(f"ndarray.astype({target}) of a traced array is not supported by "
                                        "jacacc.tensor: float, integer and boolean casts are")
    if integer_dtype(a) is not None:  # integers to floats: the same values, a float array again
        return Traced(E.unary("pos", a.node))
    if target.itemsize >= a.dtype.itemsize:  # widening (or no change): every value is kept exactly
        return Traced(a.node)
    (value,) = apply_operator("piecewise_constant", [a.node], how="cast", option=target.name)
    return Traced(E.add(_locally_constant(value), E.unary("tangent_seed", a.node)))


_register_methods(_method_astype, "astype")


# ---------------------------------------------------------------------------- real input: imag, angle, real_if_close
@_register(np.imag)
def _np_imag(val: Any) -> Traced:
    """``np.imag`` of a real array: zeros of its shape (a constant: derivative 0)."""
    return Traced(E.zeros(_node(val).shape))


@_register(np.angle)
def _np_angle(z: Any, deg: Any = False) -> Traced:
    """``np.angle`` of a real array: 0 where the sign bit is clear, π (180 with ``deg``) where it is
    set (−0.0 included), NaN at NaN — NumPy's value, piecewise constant (derivative 0)."""
    return _piecewise("angle", z, bool(deg))


@_register(np.real_if_close)
def _np_real_if_close(a: Any, tol: Any = 100) -> Traced:
    """``np.real_if_close`` of a real array: the array itself."""
    return Traced(_node(a))


_PIECEWISE["angle"] = (lambda xp, x, option: xp.angle(x, deg=option), lambda x, option: f"np.angle({x}, deg={option!r})")

_LOG2E = float(np.log2(np.e))


def _logaddexp2(x: Any, y: Any) -> Traced:
    """``np.logaddexp2`` as NumPy computes it: ``x + log2(1 + 2^(y − x))`` on the side where
    ``x > y``, ``y + log2(1 + 2^(x − y))`` elsewhere, each logarithm ``LOG2E · log1p(…)``; the
    exponent is selected before ``exp2`` (never positive, so never overflowing) and the
    branch-free form on either side is smooth, so ties get JAX's ½/½ and its curvature.  Two
    equal infinities give ``x + 1``, as NumPy.  NumPy's value within an ulp or two (its scalar
    ``exp2``/``log1p`` against the vectorized loops here)."""
    a, b = Traced(_node(x)), Traced(_node(y))
    diff = a - b
    ahead = diff > 0
    low = _where(ahead, -diff, diff)  # −|x − y| with the derivative of the side taken
    value = _where(ahead, a, b) + Traced(E.scale(_LOG2E, E.unary("log1p", E.unary("exp2", low.node))))
    infinite_tie = (a == b) & (np.abs(a) == np.inf)
    return _where(infinite_tie, a + 1.0, value)


_register_ufuncs(_logaddexp2, "logaddexp2")


# ---------------------------------------------------------------------------- rollaxis, column_stack, copy
@_register(np.rollaxis)
def _np_rollaxis(a: Any, axis: Any, start: Any = 0) -> Traced:
    """``np.rollaxis``: ``axis`` moved to position ``start`` (NumPy's rule), a transposition."""
    x = _node(a)
    n = x.ndim
    k = _axis("np.rollaxis", _integer("np.rollaxis", "axis", axis), x.shape)
    s = _integer("np.rollaxis", "start", start)
    if s < 0:
        s += n
    if not 0 <= s < n + 1:
        raise TraceError(f"np.rollaxis: 'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in")
    if k < s:
        s -= 1
    order = [m for m in range(n) if m != k]
    order.insert(s, k)
    return Traced(transpose_node(x, order))


@_register(np.column_stack)
def _np_column_stack(tup: Any) -> Traced:
    """``np.column_stack``: 0-d and 1-D entries become columns, 2-D ones stay; a concatenation along
    axis 1 (a traced array given alone is iterated along its first axis, as NumPy does)."""
    items = [tup[i] for i in range(len(tup))] if isinstance(tup, Traced) else list(tup)
    columns = []
    for item in items:
        t = _node(item)
        if t.ndim < 2:  # NumPy: array(t, ndmin=2).T
            t = insert_unit_axes(t, tuple(range(t.ndim, 2)))
        columns.append(t)
    return Traced(concatenate_nodes(columns, 1, "np.column_stack"))


@_register(np.copy)
def _np_copy(a: Any, order: Any = "K", subok: Any = False) -> Traced:
    """``np.copy`` and ``ndarray.copy``: the same values (traced arrays are never written in place)."""
    return Traced(_node(a))


_register_methods(lambda a, order="C": Traced(a.node), "copy")


# ---------------------------------------------------------------------------- einsum's interleaved form
def _sublist_letters(sublist: Any) -> str:
    """Subscripts of one sublist of ``np.einsum``'s interleaved form: NumPy's letters (0–25 are
    ``A``–``Z``, 26–51 ``a``–``z``, so the implicit output's alphabetical order is the integers'),
    ``Ellipsis`` as ``...``."""
    letters = []
    for s in sublist:
        if s is Ellipsis:
            letters.append("...")
        elif isinstance(s, numbers.Integral) and not isinstance(s, bool | np.bool_) and 0 <= s < 52:
            letters.append(chr(ord("A") + int(s)) if s < 26 else chr(ord("a") + int(s) - 26))
        else:
            raise TraceError(f"np.einsum: subscript {s!r} of the interleaved form must be an integer in [0, 52) "
                             "or Ellipsis")
    return "".join(letters)


@_register(np.einsum, replaces=_einsum)
def _np_einsum(*operands: Any, **kwargs: Any) -> Traced:
    """``np.einsum`` with subscripts (the tracer's own) or in the interleaved form ``einsum(a, [0, 1],
    b, [1, 2], [0, 2])``, translated to subscripts."""
    if operands and isinstance(operands[0], str):
        return _einsum(*operands, **kwargs)
    items = list(operands)
    output = items.pop() if len(items) % 2 else None
    arrays, sublists = items[0::2], items[1::2]
    subscripts = ",".join(_sublist_letters(s) for s in sublists)
    if output is not None:
        subscripts += "->" + _sublist_letters(output)
    return _einsum(subscripts, *arrays, **kwargs)


# ---------------------------------------------------------------------------- linspace
@_register(np.linspace)
def _np_linspace(start: Any, stop: Any, num: Any = 50, endpoint: Any = True, retstep: Any = False,
                 dtype: Any = None, axis: Any = 0, *, device: Any = None) -> Any:
    """``np.linspace`` of traced ``start``/``stop`` (arrays broadcast), in NumPy's arithmetic:
    ``k · step + start`` with ``step = (stop − start)/div`` (``k/div · (stop − start)`` where a
    step is 0, as NumPy), the last entry ``stop`` itself when ``endpoint``."""
    count = _integer("np.linspace", "num", num)
    if count < 0:
        raise TraceError(f"np.linspace: Number of samples, {count}, must be non-negative.")
    if dtype is not None and np.dtype(dtype) not in (np.dtype(np.float64), _TRACE_DTYPE.get()):
        raise UnsupportedOperationError(f"np.linspace with dtype={np.dtype(dtype)} is not supported by "
                                        "jacacc.tensor (the plan's float type is)")
    if device not in (None, "cpu"):
        raise UnsupportedOperationError(f"np.linspace with device={device!r} is not supported by jacacc.tensor")
    a, b = Traced(_node(start)), Traced(_node(stop))
    div = count - 1 if endpoint else count
    delta = b - a
    ramp = np.arange(count, dtype=float).reshape((-1,) + (1,) * delta.ndim)
    if div > 0:
        step: Any = Traced(_divide(delta.node, float(div)))
        zero = step == 0.0
        if delta.ndim:  # NumPy takes the other form for every entry when any step is 0
            zero = np.sum(zero) > 0.0
        y = _where(zero, (ramp / div) * delta, ramp * step)
    else:
        step = np.nan
        y = ramp * delta
    y = y + a
    if endpoint and count > 1:
        last = insert_unit_axes(_broadcast_to(b.node, delta.shape), (0,))
        y = Traced(concatenate_nodes([_basic_index(y.node, (slice(None, -1),)), last], 0, "np.linspace"))
    k = _axis("np.linspace", axis, (0,) * y.ndim)
    if k != 0:
        order = list(range(1, y.ndim))
        order.insert(k, 0)
        y = Traced(transpose_node(y.node, order))
    return (y, step) if retstep else y


# ---------------------------------------------------------------------------- convolution
def _window(name: str, mode: Any, n: Shape, m: Shape, same: Shape) -> list[tuple[int, int]]:
    """Per axis, the first entry and the length of the full convolution's part that ``mode`` keeps
    (centred as NumPy and SciPy centre it); ``same``: the shape ``"same"`` keeps."""
    full = [p + q - 1 for p, q in zip(n, m, strict=True)]
    if mode == "full":
        lengths = full
    elif mode == "same":
        lengths = list(same)
    elif mode == "valid":
        lengths = [max(p, q) - min(p, q) + 1 for p, q in zip(n, m, strict=True)]
    else:
        raise TraceError(f"{name}: mode must be 'full', 'valid' or 'same', got {mode!r}")
    return [((f - k) // 2, k) for f, k in zip(full, lengths, strict=True)]


def convolve_nodes(x: Tensor, y: Tensor, window: Sequence[tuple[int, int]]) -> Tensor:
    """The N-D convolution ``out[k] = Σ_j x[k − j]·y[j]`` of two tensors of one rank at the output
    positions ``start ≤ k < start + length`` of each axis (``window``).

    One operand is gathered into its Toeplitz arrangement ``T[j, k] = g[k − j]`` (0 off its
    extent: the gather reads one zero padded after each axis) and contracted with the other by
    an einsum.  The gathered one is the constant where one is (the traced one then reaches the
    result through an einsum only, whose derivatives keep their structure), else the larger,
    so that ``T`` holds ``size(other) · size(out)`` entries.
    """
    x_const, y_const = x.kind == "const", y.kind == "const"
    if x_const != y_const:
        g, c = (x, y) if x_const else (y, x)
    else:
        g, c = (x, y) if x.size >= y.size else (y, x)
    d = g.ndim
    index = []
    for a, ((start, length), n, m) in enumerate(zip(window, g.shape, c.shape, strict=True)):
        offsets = np.arange(start, start + length)[None, :] - np.arange(m)[:, None]  # k − j
        offsets = np.where((offsets >= 0) & (offsets < n), offsets, n)  # n: the padded zero
        shape = [1] * (2 * d)
        shape[a], shape[d + a] = m, length
        index.append(offsets.reshape(shape))
    key = tuple(index)
    widths = ((0, 1),) * d
    if g.kind == "const":
        toeplitz = E.const(np.pad(g.value, widths)[key])
    else:
        toeplitz = _advanced_index(apply_operator("pad", [g], widths=widths)[0], key)
    j, k = index_letters(d), index_letters(d, d)
    return E.einsum(f"{j},{j}{k}->{k}", c, toeplitz)


@_register(np.convolve)
def _np_convolve(a: Any, v: Any, mode: Any = "full") -> Traced:
    """``np.convolve`` of 1-D arrays (traced or constant), modes ``full``, ``same`` (the longer
    one's length) and ``valid``: :func:`convolve_nodes`."""
    x, y = _at_least(_node(a), 1), _at_least(_node(v), 1)
    if x.ndim > 1 or y.ndim > 1:
        raise TraceError(f"np.convolve: the operands must be 1-D, got shapes {x.shape} and {y.shape}")
    if x.size == 0 or y.size == 0:
        raise TraceError(f"np.convolve: {'a' if x.size == 0 else 'v'} cannot be empty")
    same = (max(x.shape[0], y.shape[0]),)
    return Traced(convolve_nodes(x, y, _window("np.convolve", mode, x.shape, y.shape, same)))


# ---------------------------------------------------------------------------- lists of traced values
def _stacked(original: Callable[..., Any]) -> Callable[..., Any]:
    """A NumPy function called with a list or tuple holding traced values (``np.mean([x, x + 2])``):
    NumPy's dispatch never looks inside a list, so each such argument is stacked first (as
    ``np.array`` stacks it) and the function called again, now dispatching to its handler."""

    def stack_then_call(*args: Any, **kwargs: Any) -> Any:
        args = tuple(_as_traced(v, None) if isinstance(v, list | tuple) and _traced_inside(v) else v for v in args)
        kwargs = {k: _as_traced(v, None) if isinstance(v, list | tuple) and _traced_inside(v) else v
                  for k, v in kwargs.items()}
        return original(*args, **kwargs)

    stack_then_call.__name__ = f"stacked_{original.__name__}"
    return stack_then_call


#: NumPy functions given lists of traced values, traced by name (jacacc.tensor.library)
_TAKING_LISTS = {"numpy:sum": np.sum, "numpy:prod": np.prod, "numpy:mean": np.mean, "numpy:std": np.std,
                 "numpy:var": np.var, "numpy:max": np.max, "numpy:min": np.min, "numpy:append": np.append,
                 "numpy.linalg:norm": np.linalg.norm}
for _place, _function in _TAKING_LISTS.items():
    register_library(_place)(_stacked(getattr(_function, "__jacacc_original__", _function)))
del _place, _function
