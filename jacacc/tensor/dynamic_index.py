"""Indices computed from traced values: integer arrays as data, and gathers at them.

Programs that interpolate, advect or look up (autograd's fluid simulation,
``f[np.floor(x).astype(int)]``, a nearest-neighbour table, clamped indices
``np.clip(i, 0, n - 1)``) index with integers made from the function's own
values.  The selection is piecewise constant in those values: the derivative
flows through the values gathered, not through the indices (JAX's gather with
a computed index does the same).  Here:

* ``x.astype(int)`` (any integer type) is NumPy's cast, computed in the plan's
  float type — exact for the integers an index holds (``|n| < 2⁵³``) — behind a
  zero derivative; the result reports its integer ``dtype``, and integer
  arithmetic on it (``+``, ``-``, ``*``, ``//``, ``%``, ``abs``, ``np.minimum``,
  ``np.maximum``, ``np.clip``) stays an integer array, as in NumPy
  (:func:`jacacc.tensor.trace.integer_result`);
* ``np.argmax``/``np.argmin`` (an axis, ``keepdims``) and ``np.argsort`` (stable: ties in index
  order) of traced values are integer arrays too, and ``np.take``/``np.take_along_axis`` take
  them (a NumPy array taken from is a constant of the trace);
* indexing with such arrays — alone, in lists (``x[[np.argmax(x), 0]]``, made one
  array as NumPy makes it) or with constant integer arrays, ints and
  slices, by NumPy's rules for advanced indexing — is the operator
  ``flat_positions`` (the index arrays' row-major positions in the axes they
  index: one node per set of indices, so every take at them and every scatter
  of a pullback computes them once) and the operator ``take_dynamic`` at those
  positions: linear in the array indexed, its transpose ``scatter_dynamic``
  (the cotangents added at the positions, repeated ones accumulating), and the
  positions data.  Negative indices wrap once and an index out of range raises
  ``IndexError`` naming the axis, as in NumPy, when the program runs.

Examples
--------
>>> import numpy as np, jacacc.tensor as jt
>>> def lerp(x, table):                # linear interpolation in a table, at computed cells
...     cell = np.floor(x).astype(int)
...     w = x - cell
...     return np.sum((1 - w) * table[cell] + w * table[cell + 1])
>>> x, table = np.array([0.5, 2.25]), np.array([0.0, 10.0, 40.0, 90.0])
>>> jt.grad(lerp)(x, table).tolist()                 # the slopes of the cells x falls in
[10.0, 50.0]
>>> jt.grad(lerp, argnum=1)(x, table).tolist()       # each table entry's weight
[0.5, 0.5, 0.75, 0.25]

A NumPy array indexed by a traced integer array is not traced (NumPy converts the index
itself, before jacacc.tensor can see it): pass the indexed array as an argument, as
``table`` above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jacacc.errors import UnsupportedOperationError
from jacacc.ops import array_module
from jacacc.tensor import expr as E
from jacacc.tensor.arrays import (
    _axis,
    _basic_index,
    added_at,
    concatenate_nodes,
    reshape_node,
    transpose_node,
)
from jacacc.tensor.expr import Tensor
from jacacc.tensor.numpy_more import _piecewise
from jacacc.tensor.operators import Operator, apply_operator, register_operator
from jacacc.tensor.trace import Traced, _broadcast_to, _node, as_integer, integer_dtype

__all__ = ["astype_integer", "combined_scatters", "dynamic_getitem", "holds_integer_array", "is_integer_array"]

Shape = tuple[int, ...]


def is_integer_array(x: Any) -> bool:
    """Whether ``x`` is a traced integer array (made by ``astype(int)`` from traced values)."""
    return isinstance(x, Traced) and integer_dtype(x) is not None


def holds_integer_array(items: tuple[Any, ...]) -> bool:
    """Whether an indexing key holds a traced integer array, alone or in a list (``x[[i, 0]]``), and so
    selects by computed values."""
    return any(is_integer_array(item) or (isinstance(item, list | tuple) and holds_integer_array(tuple(item)))
               for item in items)


def _as_index(item: Any) -> Any:
    """A list of ints and traced integers (``[np.argmax(x), 0]``) as one traced integer array, as NumPy
    makes an array of a list; anything else as it is."""
    if isinstance(item, list | tuple) and holds_integer_array(tuple(item)):
        return np.stack([_as_index(entry) for entry in item])
    return item


def astype_integer(a: Traced, target: np.dtype) -> Traced:
    """``a.astype(target)`` for an integer ``target``: NumPy's cast (truncation toward zero), held in
    the plan's float type behind a zero derivative, typed ``target``."""
    if integer_dtype(a) is not None:  # already integers: the values stay, the type changes
        return as_integer(Traced(E.unary("pos", a.node)), target)
    return as_integer(_piecewise("cast", a, target.name), target)


# ---------------------------------------------------------------------------- the operators
def _checked_indices(index: Any, n: int, axis: int, xp: Any) -> Any:
    """Float-held integer indices as ``intp``, a negative one wrapped once; out of range raises as
    NumPy does."""
    ints = index.astype(xp.intp)
    if ints.size and (int(ints.min()) < -n or int(ints.max()) >= n):
        bad = int(ints.max()) if int(ints.max()) >= n else int(ints.min())
        raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n} (an index computed "
                         f"from traced values)")
    return xp.where(ints < 0, ints + n, ints)


def _flat_positions(*indices: Any, extents: Shape) -> Any:
    """The row-major flat positions of the index arrays (held in the plan's float type, or integers) in a
    block of ``extents``, as ``intp``: a negative index wrapped once, one out of range raising
    ``IndexError`` as NumPy does."""
    xp = array_module(indices)
    if xp is np:
        # the common case in one C call: indices in range (ravel_multi_index checks them)
        try:
            return np.ravel_multi_index(tuple(i.astype(np.intp, copy=False) for i in indices), extents)
        except ValueError:
            pass  # a negative index to wrap, or one out of range to name: the careful way below
    checked = [_checked_indices(i, n, axis, xp) for axis, (i, n) in enumerate(zip(indices, extents, strict=True))]
    flat = checked[0]
    for i, n in zip(checked[1:], extents[1:], strict=True):  # row-major: ravel_multi_index
        flat = flat * n + i
    return flat


def _flat_shapes(*indices: Shape, extents: Shape) -> tuple[Shape]:
    if len(indices) != len(extents):
        raise ValueError(f"flat_positions: {len(indices)} index arrays for {len(extents)} extents")
    return (_index_shape(indices),)


def _merged(shape: Shape, lead: int, axes: int) -> tuple[Shape, Shape, Shape]:
    """An array's leading batch axes, the ``axes`` a flat position addresses, and the rest."""
    return tuple(shape[:lead]), tuple(shape[lead:lead + axes]), tuple(shape[lead + axes:])


def _take_dynamic(x: np.ndarray, flat: np.ndarray, lead: int = 0, axes: int = 1) -> np.ndarray:
    """``x`` at the flat positions ``flat`` (:func:`_flat_positions`, in range) of its ``axes`` axes after ``lead``."""
    batch, extents, rest = _merged(x.shape, lead, axes)
    return x.reshape(batch + (math.prod(extents),) + rest).take(flat.astype(np.intp, copy=False), axis=lead)


def _scatter_dynamic(t: np.ndarray, flat: np.ndarray, shape: Shape, lead: int = 0, axes: int = 1) -> np.ndarray:
    """Zeros of ``shape`` with the entries of ``t`` added at the flat positions ``flat`` (repeated ones accumulating)."""
    xp = array_module((t, flat))
    batch, extents, rest = _merged(tuple(shape), lead, axes)
    positions = flat.astype(xp.intp, copy=False).reshape(-1)
    width = math.prod(rest)
    if width > 1:  # each trailing entry its own position, the trailing axes innermost
        positions = (positions[:, None] * width + xp.arange(width)[None, :]).reshape(-1)
    return added_at(t.reshape(math.prod(batch), positions.size), positions, math.prod(extents) * width,
                    xp).reshape(shape)


def _index_shape(indices: tuple[Shape, ...]) -> Shape:
    if any(s != indices[0] for s in indices):
        raise ValueError(f"take_dynamic: index arrays of shapes {list(indices)} (broadcast them to one shape)")
    return indices[0]


def _take_shapes(x: Shape, flat: Shape, lead: int = 0, axes: int = 1) -> tuple[Shape]:
    if len(x) < lead + axes:
        raise ValueError(f"take_dynamic: positions in {axes} axes of an array of shape {x[lead:]}")
    batch, _, rest = _merged(x, lead, axes)
    return (batch + tuple(flat) + rest,)


def _scatter_shapes(t: Shape, flat: Shape, shape: Shape, lead: int = 0, axes: int = 1) -> tuple[Shape]:
    return (tuple(shape),)


def _take_transpose(args: tuple[Tensor, ...], cotangents: tuple[Tensor, ...], lead: int = 0,
                    axes: int = 1) -> tuple[Tensor]:
    return (apply_operator("scatter_dynamic", [cotangents[0], args[1]], shape=args[0].shape, lead=lead, axes=axes)[0],)


def _scatter_transpose(args: tuple[Tensor, ...], cotangents: tuple[Tensor, ...], shape: Shape,
                       lead: int = 0, axes: int = 1) -> tuple[Tensor]:
    return (apply_operator("take_dynamic", [cotangents[0], args[1]], lead=lead, axes=axes)[0],)


def _batch(batch_shape: Shape, args: Any, flags: Any, **options: Any) -> Any:
    """Leading batch axes of the array indexed (or scattered into); a batch of positions is
    applied element by element."""
    if any(flags[1:]):
        return None
    lead = options.pop("lead", 0)
    if "shape" in options:
        options["shape"] = tuple(batch_shape) + tuple(options["shape"])
    return args, {**options, "lead": lead + len(batch_shape)}


# the positions are a node of their own: the takes at one set of indices (an advection's four
# corners of each of its fields) and the scatters of their pullbacks compute them once
register_operator(Operator("flat_positions", _flat_positions, _flat_shapes, device=True, zero_derivative=True,
                           flops=lambda *indices, extents: math.prod(indices[0]) * len(indices)))
register_operator(Operator("take_dynamic", _take_dynamic, _take_shapes, batch=_batch, linear_in=(0,),
                           transpose=_take_transpose))
register_operator(Operator("scatter_dynamic", _scatter_dynamic, _scatter_shapes, batch=_batch, linear_in=(0,),
                           transpose=_scatter_transpose,
                           flops=lambda t, flat, shape, lead=0, axes=1: math.prod(t)))


def combined_scatters(outputs: Sequence[Tensor]) -> list[Tensor]:
    """``outputs`` with each sum of two or more ``scatter_dynamic`` terms into one shape (one ``lead``
    and ``axes``) rewritten as one scatter of their values, concatenated, at their positions,
    concatenated: one ``bincount`` for all of them, and no additions.  The pullback of an
    interpolation reads one field at four corners (``f[l, t]``, ``f[l, b]``, ``f[r, t]``,
    ``f[r, b]``): four scatters of the same field's cotangent, summed.  The bincount adds the
    entries in the order they come, so a position that several terms reach sums them in another
    order than the sum of the terms did: the same value within rounding.

    >>> import numpy as np
    >>> from jacacc.tensor.evaluate import Program
    >>> t, u, i, j = E.var("t", (3,)), E.var("u", (3,)), E.var("i", (3,)), E.var("j", (3,))
    >>> scatter = lambda v, k: apply_operator("scatter_dynamic", [v, k], shape=(4,))[0]
    >>> (y,) = combined_scatters([E.add(scatter(t, i), scatter(u, j))])
    >>> y.param[0], [a.shape for a in y.args]
    ('scatter_dynamic', [(6,), (6,)])
    >>> Program([y], [t, u, i, j])(np.ones(3), np.full(3, 2.0), np.array([0.0, 1, 1]), np.array([3.0, 1, 0]))[0].tolist()
    [3.0, 4.0, 0.0, 2.0]
    """
    return E.rebuild(outputs, lambda _, node: _one_scatter(node))


def _scatter_group(node: Tensor) -> tuple | None:
    if node.kind != "op" or node.param[0] != "scatter_dynamic" or node.param[2] != 0:
        return None
    options = dict(node.param[1])
    return tuple(options["shape"]), options.get("lead", 0), options.get("axes", 1)


def _one_scatter(node: Tensor) -> Tensor:
    if node.kind != "add":
        return node
    groups: dict[tuple, list[Tensor]] = {}
    for term in node.args:
        if (key := _scatter_group(term)) is not None:
            groups.setdefault(key, []).append(term)
    combined = {key: terms for key, terms in groups.items() if len(terms) > 1}
    if not combined:
        return node
    merged = {id(term) for terms in combined.values() for term in terms}
    kept = [term for term in node.args if id(term) not in merged]
    for (shape, lead, axes), terms in combined.items():
        values, positions = [], []
        for term in terms:
            value, flat = term.args
            values.append(reshape_node(value, value.shape[:lead] + (flat.size,) + value.shape[lead + flat.ndim:]))
            positions.append(reshape_node(flat, (flat.size,)))
        (scatter,) = apply_operator("scatter_dynamic", [concatenate_nodes(values, axis=lead),
                                                        concatenate_nodes(positions, axis=0)],
                                    shape=shape, lead=lead, axes=axes)
        kept.append(scatter)
    return E.add(*kept)


# ---------------------------------------------------------------------------- indexing
def _expanded(key: tuple[Any, ...], ndim: int) -> list[Any]:
    if sum(item is Ellipsis for item in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if any(item is None for item in key):
        raise UnsupportedOperationError("indexing with a traced integer array and np.newaxis together is not "
                                        "supported by jacacc.tensor; insert the axis after indexing")
    items = list(key)  # searched by identity: == on a traced item builds a comparison
    if not any(item is Ellipsis for item in items):
        items.append(Ellipsis)
    at = next(k for k, item in enumerate(items) if item is Ellipsis)
    fill = ndim - (len(items) - 1)
    if fill < 0:
        raise IndexError(f"too many indices for an array of {ndim} dimension(s)")
    return items[:at] + [slice(None)] * fill + items[at + 1:]


def _is_advanced(item: Any) -> bool:
    if isinstance(item, slice):
        return False
    if is_integer_array(item) or isinstance(item, int | np.integer) and not isinstance(item, bool | np.bool_):
        return True
    array = np.asarray(item) if not isinstance(item, Traced) else None
    if array is None or array.dtype.kind not in "iu":
        raise UnsupportedOperationError(
            f"indexing with a traced integer array beside {type(item).__name__} {item!r} is not supported by "
            "jacacc.tensor: the other entries may be ints, integer arrays and slices")
    return True


def dynamic_getitem(a: Traced, key: Any) -> Traced:
    """``a[key]`` where ``key`` holds traced integer arrays: NumPy's advanced indexing, as
    ``take_dynamic`` (slices applied first; the index arrays broadcast together; their axes in place
    of the indexed ones where those are adjacent, in front otherwise)."""
    x = _node(a)
    items = [_as_index(item) for item in _expanded(key if isinstance(key, tuple) else (key,), x.ndim)]
    advanced = [k for k, item in enumerate(items) if _is_advanced(item)]
    # the slices select first: they keep their axes, so the advanced positions do not move
    sliced = tuple(slice(None) if k in advanced else item for k, item in enumerate(items))
    if any(item != slice(None) for item in sliced):
        x = _basic_index(x, sliced)
    others = [k for k in range(x.ndim) if k not in advanced]
    moved = transpose_node(x, tuple(advanced + others))
    nodes = [_node(items[k]) for k in advanced]
    shape = tuple(np.broadcast_shapes(*(n.shape for n in nodes)))
    indices = [_broadcast_to(n, shape) if n.shape != shape else n for n in nodes]
    (flat,) = apply_operator("flat_positions", indices, extents=tuple(moved.shape[:len(indices)]))
    (taken,) = apply_operator("take_dynamic", [moved, flat], axes=len(indices))
    adjacent = advanced == list(range(advanced[0], advanced[0] + len(advanced)))
    if adjacent and advanced[0] > 0:  # NumPy puts the index axes where the indexed ones were
        b, p = len(shape), advanced[0]
        order = tuple(range(b, b + p)) + tuple(range(b)) + tuple(range(b + p, taken.ndim))
        taken = transpose_node(taken, order)
    return Traced(taken)


# ---------------------------------------------------------------------------- integers NumPy computes
def _arg_extremum(x: np.ndarray, axis: int | None, largest: bool, keepdims: bool) -> np.ndarray:
    xp = array_module((x,))
    found = (xp.argmax if largest else xp.argmin)(x, axis=axis, keepdims=keepdims)
    return xp.asarray(found).astype(x.dtype)  # held in the plan's float type, exactly


def _arg_extremum_shapes(x: Shape, axis: int | None, largest: bool, keepdims: bool) -> tuple[Shape]:
    if axis is None:
        return ((1,) * len(x) if keepdims else (),)
    return (tuple(1 if k == axis else n for k, n in enumerate(x)) if keepdims else x[:axis] + x[axis + 1:],)


def _stable_argsort(x: np.ndarray, axis: int) -> np.ndarray:
    xp = array_module((x,))
    order = np.argsort(x, axis=axis, kind="stable") if xp is np else xp.argsort(x, axis=axis)
    return order.astype(x.dtype)


register_operator(Operator("arg_extremum", _arg_extremum, _arg_extremum_shapes, device=True, zero_derivative=True,
                           flops=lambda x, **_: math.prod(x)))
register_operator(Operator("argsort_values", _stable_argsort, lambda x, axis: (x,), device=True, zero_derivative=True,
                           flops=lambda x, axis: math.prod(x) * max(1, math.ceil(math.log2(max(x[axis], 2))))))


def _integers_of(name: str, x: Any, **options: Any) -> Traced:
    (node,) = apply_operator(name, [_node(x)], **options)
    return as_integer(Traced(node), np.intp)


def _arg(largest: bool) -> Any:
    name = "np.argmax" if largest else "np.argmin"

    def arg(a: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Traced:
        if out is not None:
            raise UnsupportedOperationError(f"{name} with out= is not supported by jacacc.tensor")
        x = _node(a)
        k = None if axis is None else _axis(name, axis, x.shape)
        if x.size == 0:
            raise ValueError(f"attempt to get {name[3:]} of an empty sequence")
        return _integers_of("arg_extremum", a, axis=k, largest=largest, keepdims=bool(keepdims))

    return arg


def _argsort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *, stable: Any = None) -> Traced:
    """``np.argsort``: the stable order (ties in index order, as ``kind="stable"``), an integer array."""
    if order is not None:
        raise UnsupportedOperationError("np.argsort with order= (structured arrays) is not supported by jacacc.tensor")
    x = _node(a)
    if axis is None:
        a, axis = Traced(reshape_node(x, (x.size,))), 0
    return _integers_of("argsort_values", a, axis=_axis("np.argsort", axis, _node(a).shape))


def _lifted(a: Any) -> Traced:
    """``a`` as a traced array: a NumPy array indexed by traced integers becomes a constant of the trace."""
    return a if isinstance(a, Traced) else Traced(E.const(np.asarray(a, dtype=float)))


def _take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Traced:
    """``np.take_along_axis``: every other axis indexed by its own position, broadcast against ``indices``."""
    x = _lifted(arr)
    if axis is None:
        x, axis = Traced(reshape_node(x.node, (x.size,))), 0
    k = _axis("np.take_along_axis", axis, x.shape)
    if np.ndim(indices) != x.ndim:
        raise ValueError(f"np.take_along_axis: indices of {np.ndim(indices)} dimension(s) for an array of {x.ndim}")
    key = tuple(indices if m == k else np.arange(n).reshape((-1,) + (1,) * (x.ndim - 1 - m))
                for m, n in enumerate(x.shape))
    return x[key]


def _take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Traced:
    """``np.take`` (``mode="raise"``): the flattened array, or one axis, indexed."""
    if out is not None or mode != "raise":
        raise UnsupportedOperationError("np.take with out= or a mode other than 'raise' is not supported by "
                                        "jacacc.tensor")
    x = _lifted(a)
    if axis is None:
        return Traced(reshape_node(x.node, (x.size,)))[indices]
    return x[(slice(None),) * _axis("np.take", axis, x.shape) + (indices,)]


def _register_functions() -> None:
    from jacacc.tensor.trace import register_function, register_method

    register_function(np.argmax)(_arg(True))
    register_function(np.argmin)(_arg(False))
    register_function(np.argsort)(_argsort)
    register_function(np.take_along_axis)(_take_along_axis)
    register_function(np.take)(_take)
    register_method("argmax")(lambda self, axis=None, out=None, *, keepdims=False: _arg(True)(self, axis, out,
                                                                                              keepdims=keepdims))
    register_method("argmin")(lambda self, axis=None, out=None, *, keepdims=False: _arg(False)(self, axis, out,
                                                                                               keepdims=keepdims))
    register_method("argsort")(lambda self, axis=-1, kind=None, order=None: _argsort(self, axis, kind, order))
    register_method("take")(lambda self, indices, axis=None, out=None, mode="raise": _take(self, indices, axis, out,
                                                                                          mode))


_register_functions()
