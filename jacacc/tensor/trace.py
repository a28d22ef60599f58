"""Tracing plain NumPy tensor code into an expression DAG (paper 002 §2).

A :class:`Traced` array stands in for each argument; it implements NumPy's
``__array_ufunc__`` and ``__array_function__`` protocols, so the user's
function runs unchanged and every operation becomes a node: products of any
kind (``@``, ``np.dot``, ``np.einsum``, ``*``, ``np.outer``, ``np.inner``,
``np.sum``, ``.T``, ``np.diag``, ``np.trace``) become generic multiplications
``A *(s1,s2,s3) B`` — an einsum of three or more operands is split into binary
ones along opt_einsum's path — and ``+ - / ** exp log log1p sqrt sin cos tanh
abs maximum(x, 0)`` become sums and elementwise functions.  Broadcasting
follows NumPy's rules, written with labels (a product) or with a tensor of
ones (a sum).
Anything else is refused with an :class:`~jacacc.errors.UnsupportedOperationError`
naming the operation.

Examples
--------
>>> import numpy as np
>>> from jacacc.tensor.trace import trace
>>> t = trace(lambda X, w: np.exp(X @ w), [np.ones((4, 3)), np.ones(3)])
>>> print(t.outputs[0])
exp(X *(ij,j,i) w)
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import itertools
import numbers
import sys
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc import ops
from jacacc.errors import TraceError, UnsupportedOperationError
from jacacc.tensor import expr as E
from jacacc.tensor.expr import Tensor, index_letters

__all__ = ["Traced", "TracedFunction", "trace"]


class Traced:
    """A tensor being traced: wraps an expression node, behaves like an ndarray."""

    __array_priority__ = 1000

    def __init__(self, node: Tensor) -> None:
        self.node = node

    # ------------------------------------------------------------------ array-like surface
    @property
    def shape(self) -> tuple[int, ...]:
        return self.node.shape

    @property
    def ndim(self) -> int:
        return self.node.ndim

    @property
    def size(self) -> int:
        return self.node.size

    @property
    def dtype(self) -> np.dtype:
        # the dtype the plan computes in (float32 or float64: one per plan, a key of its cache), so
        # that ``if x.dtype == np.float32`` takes the branch the arguments' dtype takes in NumPy; an
        # integer array made from traced values (``astype(int)``) reports its integer type
        return _INTEGERS.get(self.node) or _TRACE_DTYPE.get()

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a traced scalar")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"Traced({self.node.describe()}, shape={self.shape})"

    @property
    def T(self) -> Traced:  # noqa: N802 - NumPy's name
        return integer_result(_transpose(self, None), self)

    def transpose(self, *axes: Any) -> Traced:
        moved = _transpose(self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None))
        return integer_result(moved, self)

    def sum(self, axis: Any = None, **kwargs: Any) -> Traced:
        return _sum(self, axis, **kwargs)

    def dot(self, other: Any) -> Traced:
        return _dot(self, other)

    # ------------------------------------------------------------------ operators
    def __add__(self, other: Any) -> Traced:
        return _binary("add", self, other)

    def __radd__(self, other: Any) -> Traced:
        return _binary("add", other, self)

    def __sub__(self, other: Any) -> Traced:
        return _binary("subtract", self, other)

    def __rsub__(self, other: Any) -> Traced:
        return _binary("subtract", other, self)

    def __mul__(self, other: Any) -> Traced:
        return _binary("multiply", self, other)

    def __rmul__(self, other: Any) -> Traced:
        return _binary("multiply", other, self)

    def __truediv__(self, other: Any) -> Traced:
        return _binary("divide", self, other)

    def __rtruediv__(self, other: Any) -> Traced:
        return _binary("divide", other, self)

    def __pow__(self, other: Any) -> Traced:
        return _power(self, other)

    def __rpow__(self, other: Any) -> Traced:
        return _power(other, self)

    def __mod__(self, other: Any) -> Traced:
        return np.remainder(self, other)

    def __rmod__(self, other: Any) -> Traced:
        return np.remainder(other, self)

    def __matmul__(self, other: Any) -> Traced:
        return _matmul(self, other)

    def __rmatmul__(self, other: Any) -> Traced:
        return _matmul(other, self)

    def __floordiv__(self, other: Any) -> Traced:
        return np.floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> Traced:
        return np.floor_divide(other, self)

    def __neg__(self) -> Traced:
        return _ufunc_negative(self)

    def __pos__(self) -> Traced:
        return self

    def __abs__(self) -> Traced:
        return _elementwise("abs", self)

    def _compare(self, other: Any, symbol: str) -> Any:
        # a comparison is a piecewise-constant elementwise function (1.0 / 0.0, derivative 0): it
        # may select (np.where) or mask, never steer Python control flow (__bool__ refuses)
        return _mask(_binary_elementwise(_PREDICATES[symbol], self, other))

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, "<")

    def __le__(self, other: Any) -> Any:
        return self._compare(other, "<=")

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, ">")

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, ">=")

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "==")

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "!=")

    __hash__ = object.__hash__  # identity: == builds a predicate

    def __and__(self, other: Any) -> Traced:
        return _logical("logical_and", self, other)

    __rand__ = __and__

    def __or__(self, other: Any) -> Traced:
        return _logical("logical_or", self, other)

    __ror__ = __or__

    def __invert__(self) -> Traced:
        return _logical("logical_not", self)

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes Traced lacks: name the ndarray method the
        # function used instead of a bare AttributeError.
        method = _METHODS.get(name)
        if method is not None and not name.startswith("_"):
            if name in _ENTRY_MOVING_METHODS and self.node in _INTEGERS:  # an integer array's entries, moved
                return lambda *args, **kwargs: integer_result(method(self, *args, **kwargs), self)
            return functools.partial(method, self)
        if not name.startswith("_") and hasattr(np.ndarray, name):
            raise UnsupportedOperationError(f"ndarray.{name} is not supported by jacacc.tensor")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getitem__(self, key: Any) -> Any:
        handler = _METHODS.get("__getitem__")
        if handler is None:
            raise UnsupportedOperationError(f"indexing a traced tensor ({key!r}) is not supported by jacacc.tensor")
        return integer_result(handler(self, key), self)

    def __array__(self, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        kind = np.dtype(dtype) if dtype is not None else None
        if kind is not None and kind.kind in "iub":  # np.int64(x), np.bool_(x): NumPy asks for that dtype
            raise UnsupportedOperationError(
                f"np.{kind.name}() of a traced tensor is not supported by jacacc.tensor: an integer or boolean made "
                "from traced values is data-dependent (piecewise constant; what it indexes depends on the values)")
        if self.node in _INTEGERS:  # most likely a NumPy array indexed with it: NumPy converts its index itself
            raise UnsupportedOperationError(
                "an integer array computed from traced values has no concrete values: indexing a NumPy array with "
                "it (or another NumPy call on it) is not supported by jacacc.tensor; index a traced array instead "
                "(pass the indexed array as an argument of the function)")
        raise UnsupportedOperationError(
            "a traced tensor has no concrete values: an operation jacacc.tensor does not support tried to convert it "
            "to an ndarray"
        )

    def __bool__(self) -> bool:
        raise UnsupportedOperationError("the truth value of a traced tensor is data-dependent control flow, not supported")

    def __float__(self) -> float:
        raise UnsupportedOperationError("float() of a traced tensor: its value is not known while tracing")

    def __int__(self) -> int:
        raise UnsupportedOperationError("int() of a traced tensor: its value is not known while tracing")

    # ------------------------------------------------------------------ NumPy protocols
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name = ufunc.__name__
        if method != "__call__" or kwargs:
            raise UnsupportedOperationError(f"np.{name}.{method}{' with ' + ', '.join(kwargs) if kwargs else ''} "
                                            "is not supported by jacacc.tensor")
        handler = _UFUNCS.get(name)
        if handler is None:
            raise UnsupportedOperationError(f"{qualified_name(ufunc)} is not supported by jacacc.tensor")
        return handler(*inputs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        handler = _FUNCTIONS.get(func)
        if handler is None:
            raise UnsupportedOperationError(f"{qualified_name(func)} is not supported by jacacc.tensor")
        result = handler(*args, **kwargs)
        if getattr(func, "__name__", None) in _ENTRY_MOVING_FUNCTIONS and isinstance(result, Traced):
            # integers moved about stay integers (NumPy's dtype of a reshape, a concatenation, …)
            arrays = args[0] if func.__name__ in _JOINING_FUNCTIONS and isinstance(args[0], list | tuple) else args[:1]
            return integer_result(result, *arrays)
        return result


# ---------------------------------------------------------------------------- registries
#: NumPy ufunc name (``ufunc.__name__``) -> handler on the ufunc's operands
_UFUNCS: dict[str, Callable[..., Any]] = {}
#: NumPy function object (``np.sum``, ``np.linalg.solve``) -> handler with the function's signature
_FUNCTIONS: dict[Any, Callable[..., Any]] = {}
#: ndarray method name (and ``"__getitem__"``) -> handler taking the traced array first
_METHODS: dict[str, Callable[..., Any]] = {}

_MODULE_PREFIX = {"numpy.linalg": "np.linalg", "numpy.fft": "np.fft", "numpy.random": "np.random"}


def qualified_name(func: Any) -> str:
    """How a user spells ``func``: ``np.linalg.svd``, ``np.sum``, ``scipy.special.expit``.

    Examples
    --------
    >>> qualified_name(np.linalg.svd), qualified_name(np.sum), qualified_name(np.exp)
    ('np.linalg.svd', 'np.sum', 'np.exp')
    """
    name = getattr(func, "__name__", repr(func))
    if isinstance(func, np.ufunc):
        # ufuncs carry no module; scipy.special's are listed there
        import sys

        special = sys.modules.get("scipy.special")
        if special is not None and getattr(special, name, None) is func and getattr(np, name, None) is not func:
            return f"scipy.special.{name}"
        return f"np.{name}"
    module = getattr(func, "__module__", None) or "numpy"
    if module.startswith("numpy"):
        # NumPy sets __module__ to its public namespace ("numpy", "numpy.linalg")
        module = next((short for long, short in _MODULE_PREFIX.items() if module.startswith(long + ".")
                       or module == long), "np")
    else:  # scipy.special._logsumexp -> scipy.special: the public package above private modules
        module = ".".join(itertools.takewhile(lambda part: not part.startswith("_"), module.split(".")))
    return f"{module}.{name}"


def _registrar(table: dict[Any, Callable[..., Any]], doc: str) -> Callable[..., Any]:
    """A decorator factory filing its handler in ``table`` under every key it is given."""

    def decorator(*keys: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            for key in keys:
                table[key] = handler
            return handler

        return register

    decorator.__doc__ = doc
    return decorator


register_ufunc = _registrar(_UFUNCS, "Decorator: the handler of the NumPy ufuncs ``names`` on traced operands.")
register_function = _registrar(
    _FUNCTIONS, "Decorator: the handler of the NumPy functions given (``np.mean``, ``np.linalg.solve``) when an "
    "argument is traced (NumPy's ``__array_function__`` protocol).")
register_method = _registrar(
    _METHODS, "Decorator: the handler of the ndarray methods named (``x.reshape(…)``; ``\"__getitem__\"`` for "
    "``x[key]``), called with the traced array first.")


# ---------------------------------------------------------------------------- operands
def _node(x: Any) -> Tensor:
    """The expression node of a traced tensor, a constant for anything numeric."""
    if isinstance(x, Traced):
        return x.node
    if isinstance(x, bool | np.bool_) or (isinstance(x, np.ndarray) and x.dtype == bool):
        return E.const(np.asarray(x, dtype=float))
    if isinstance(x, numbers.Number) or isinstance(x, np.ndarray | np.generic):
        array = np.asarray(x)
        if np.iscomplexobj(array):
            raise UnsupportedOperationError("complex constants are not supported by jacacc.tensor")
        if not np.issubdtype(array.dtype, np.number):
            raise UnsupportedOperationError(f"a constant of dtype {array.dtype} in a traced expression")
        return E.const(array.astype(float))
    if isinstance(x, list | tuple):
        return _node(np.asarray(x, dtype=float))
    raise UnsupportedOperationError(f"an operand of type {type(x).__name__} in a traced expression")


def _scalar_value(node: Tensor) -> float | None:
    return float(node.value) if node.is_scalar_const() else None


def _aligned(node: Tensor, shape: tuple[int, ...], what: str) -> tuple[Tensor, str]:
    """``node`` squeezed of the size-1 axes that broadcast, with its axes' letters
    in the result ``shape`` (NumPy's rules: trailing axes align)."""
    offset = len(shape) - node.ndim
    letters = index_letters(len(shape))
    mine = letters[offset:]
    kept = "".join(c for c, n, m in zip(mine, node.shape, shape[offset:], strict=True) if n == m)
    if kept != mine:  # a size-1 axis against a longer one: drop it (a sum of one term)
        node = E.einsum(f"{mine}->{kept}", node)
    return node, kept


def _result_shape(op: str, a: Tensor, b: Tensor) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise UnsupportedOperationError(f"np.{op}: shapes {a.shape} and {b.shape} do not broadcast") from None


def _broadcast_to(node: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``node`` broadcast to ``shape``: the generic multiplication with a tensor of ones."""
    if node.shape == shape:
        return node
    node, kept = _aligned(node, shape, "broadcast")
    letters = index_letters(len(shape))
    missing = "".join(c for c in letters if c not in kept)
    return E.einsum(f"{kept},{missing}->{letters}", node, E.ones(tuple(shape[letters.index(c)] for c in missing)))


def _broadcast_pair(op: str, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """Both operands broadcast to their common shape (NumPy's rules)."""
    shape = _result_shape(op, a, b)
    return _broadcast_to(a, shape), _broadcast_to(b, shape)


def _elementwise_product(a: Tensor, b: Tensor, op: str = "multiply") -> Tensor:
    """``a ⊙ b`` as the generic multiplication ``a *(s1,s2,s3) b``, broadcasting by
    labels alone (``op`` names the NumPy operation in errors)."""
    shape = _result_shape(op, a, b)
    a, la = _aligned(a, shape, "multiply")
    b, lb = _aligned(b, shape, "multiply")
    letters = index_letters(len(shape))
    if set(la) | set(lb) != set(letters):  # an axis both operands lack (both size 1 against nothing)
        return _broadcast_to(E.einsum(f"{la},{lb}->{''.join(c for c in letters if c in la + lb)}", a, b), shape)
    return E.einsum(f"{la},{lb}->{letters}", a, b)


def _binary(op: str, x: Any, y: Any) -> Traced:
    result = _arithmetic(op, x, y)
    return integer_result(result, x, y) if op != "divide" else result


def _arithmetic(op: str, x: Any, y: Any) -> Traced:
    a, b = _node(x), _node(y)
    if op == "multiply":
        return Traced(_elementwise_product(a, b))
    if op == "divide":
        sb = _scalar_value(b)
        if sb is not None:
            with np.errstate(divide="ignore"):
                inverse = float(np.float64(1.0) / np.float64(sb))
            if np.isfinite(inverse):
                return Traced(E.scale(inverse, a))
            # x / 0.0 is ±inf (nan at x = 0) elementwise, as in NumPy: a full constant keeps
            # the product elementwise, where a scalar factor would be moved out of later sums
            return Traced(_elementwise_product(a, E.const(np.full(a.shape, inverse)), "divide"))
        return Traced(_elementwise_product(a, E.unary("reciprocal", b), "divide"))
    if op == "subtract":
        b = E.scale(-1.0, b)
    # add: a constant scalar is an elementwise shift, anything else a sum of equal shapes
    sa, sb = _scalar_value(a), _scalar_value(b)
    if sb is not None and a.shape != ():
        return Traced(E.unary("shift", a, sb))
    if sa is not None and b.shape != ():
        return Traced(E.unary("shift", b, sa))
    a, b = _broadcast_pair(op, a, b)
    return Traced(E.add(a, b))


def _power(x: Any, y: Any) -> Traced:
    a, b = _node(x), _node(y)
    p = _scalar_value(b)
    if p is not None:
        return Traced(E.unary("pow", a, p))
    base = _scalar_value(a)
    if base is not None and base > 0:  # c ** y = exp(y log c)
        return Traced(E.unary("exp", E.scale(float(np.log(base)), b)))
    if base is not None:
        # c ** y for c <= 0 is real only at integer y (NumPy gives NaN elsewhere) and
        # has no real derivative in y anywhere: refuse rather than return NaNs.
        raise UnsupportedOperationError(f"np.power: the constant base {base:g} is not positive; c ** x is "
                                        "differentiable in x only for c > 0")
    # x ** y with the exponent an array: the table's pow of two operands, so that a negative base
    # keeps NumPy's value at integer exponents (exp(y · log x) would be NaN there); its partials
    # are y · x ** (y − 1) and log(x) · x ** y, as jax.lax.pow's
    _result_shape("power", a, b)  # shapes that do not broadcast are refused under NumPy's name
    return _binary_elementwise("pow", x, y)


#: table operations that map integers to integers (NumPy keeps an integer dtype through them)
_INTEGER_PRESERVING = frozenset({"abs", "maximum", "minimum", "fmax", "fmin", "sign"})


def _elementwise(name: str, x: Any) -> Traced:
    result = Traced(E.unary(name, _node(x)))
    return integer_result(result, x) if name in _INTEGER_PRESERVING else result


def _binary_elementwise(name: str, x: Any, y: Any) -> Traced:
    """The table operation ``name`` of two operands, broadcast by NumPy's rules (a constant scalar stays one)."""
    a, b = _node(x), _node(y)
    shape = _result_shape(name, a, b)
    a, b = (n if n.is_scalar_const() else _broadcast_to(n, shape) for n in (a, b))
    result = Traced(E.elementwise(name, a, b))
    return integer_result(result, x, y) if name in _INTEGER_PRESERVING else result


#: NumPy functions and ndarray methods that only move entries (of their first argument, or of every
#: array of the sequence a joining function takes): an integer array's result is one too
_ENTRY_MOVING_FUNCTIONS = frozenset({
    "reshape", "ravel", "transpose", "squeeze", "expand_dims", "moveaxis", "swapaxes", "broadcast_to", "flip",
    "fliplr", "flipud", "roll", "rot90", "atleast_1d", "atleast_2d", "atleast_3d", "tile", "repeat", "copy",
    "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "sort", "take", "take_along_axis",
    "diagonal", "tril", "triu"})
_JOINING_FUNCTIONS = frozenset({"concatenate", "stack", "hstack", "vstack", "dstack", "column_stack"})
_ENTRY_MOVING_METHODS = frozenset({"reshape", "ravel", "flatten", "transpose", "squeeze", "swapaxes", "copy",
                                   "repeat", "take", "diagonal"})

#: nodes holding integers that NumPy would type as integers (``astype(int)`` of traced values, and
#: integer arithmetic on them): computed in the plan's float type, exactly (|n| < 2⁵³), their type
#: what ``Traced.dtype`` reports and what lets them index (jacacc.tensor.dynamic_index)
_INTEGERS: weakref.WeakKeyDictionary[Tensor, np.dtype] = weakref.WeakKeyDictionary()


def integer_dtype(x: Any) -> np.dtype | None:
    """The integer type of ``x`` as NumPy would have it: a traced integer array's, an integer
    array's or NumPy scalar's own, ``int64`` for a Python int (``None``: not an integer)."""
    if isinstance(x, Traced):
        return _INTEGERS.get(x.node)
    if isinstance(x, bool | np.bool_):
        return None
    if isinstance(x, int):
        return np.dtype(np.int64)
    kind = getattr(x, "dtype", None)
    return np.dtype(kind) if kind is not None and np.dtype(kind).kind in "iu" else None


def as_integer(result: Traced, dtype: Any) -> Traced:
    """``result`` (integer-valued) marked as an integer array of ``dtype``."""
    if result.node.kind != "const":  # a constant is typed by its own array
        _INTEGERS[result.node] = np.dtype(dtype)
    return result


def integer_result(result: Traced, *operands: Any) -> Traced:
    """``result`` marked an integer array where every operand is an integer (NumPy's promotion;
    a Python int takes the other operand's type)."""
    if not any(isinstance(x, Traced) and x.node in _INTEGERS for x in operands):
        return result
    kinds = [integer_dtype(x) for x in operands]
    if any(k is None for k in kinds):
        return result
    arrays = [k for x, k in zip(operands, kinds, strict=True) if not isinstance(x, int)]
    return as_integer(result, np.result_type(*arrays))


_PREDICATES = {">": "gt", ">=": "ge", "<": "lt", "<=": "le", "==": "eq", "!=": "ne"}


#: nodes whose entries are 1.0 or 0.0: comparisons and logical combinations of them
_MASKS: weakref.WeakSet[Tensor] = weakref.WeakSet()


def _is_mask(node: Tensor) -> bool:
    if node.kind == "const":
        return bool(np.all((node.value == 0) | (node.value == 1)))
    return node in _MASKS


def _mask(result: Traced) -> Traced:
    _MASKS.add(result.node)
    return result


def _logical(name: str, *operands: Any) -> Traced:
    """``&``, ``|``, ``~`` of masks (comparisons of traced arrays): product, maximum, 1 − m."""
    nodes = [_node(x) for x in operands]
    if not all(map(_is_mask, nodes)):
        raise UnsupportedOperationError(f"np.{name} of a traced array that is not a comparison result is not "
                                        "supported by jacacc.tensor")
    if name == "logical_not":
        return _mask(Traced(E.unary("shift", E.scale(-1.0, nodes[0]), 1.0)))
    if name == "logical_and":
        return _mask(Traced(_elementwise_product(*nodes, "logical_and")))
    return _mask(_binary_elementwise("maximum", *(Traced(n) for n in nodes)))


@register_function(np.where)
def _where(condition: Any, x: Any = None, y: Any = None) -> Traced:
    """``np.where(c, x, y)``: the table's ``where``; the branch not taken has derivative 0."""
    if x is None or y is None:
        raise UnsupportedOperationError("np.where with one argument (the indices of nonzeros) has a data-dependent "
                                        "shape; jacacc.tensor supports np.where(condition, x, y)")
    c, a, b = _node(condition), _node(x), _node(y)
    shape = tuple(np.broadcast_shapes(c.shape, a.shape, b.shape))
    c, a, b = (n if n.is_scalar_const() else _broadcast_to(n, shape) for n in (c, a, b))
    return Traced(E.elementwise("where", c, a, b))


@register_function(np.clip)
def _clip(x: Any, a_min: Any = None, a_max: Any = None, out: Any = None, **kwargs: Any) -> Traced:
    """``np.clip`` as ``minimum(maximum(x, lo), hi)``, as jax.numpy.clip (ties at a bound split ½/½)."""
    lo, hi = kwargs.pop("min", a_min), kwargs.pop("max", a_max)
    if out is not None or kwargs:
        raise UnsupportedOperationError(f"np.clip with {', '.join(['out'] * (out is not None) + list(kwargs))} is "
                                        "not supported by jacacc.tensor")
    result = Traced(_node(x))
    if lo is not None:
        result = _binary_elementwise("maximum", result, lo)
    if hi is not None:
        result = _binary_elementwise("minimum", result, hi)
    return result


register_method("clip")(lambda self, *args, **kwargs: _clip(self, *args, **kwargs))


def _ufunc_negative(x: Any) -> Traced:
    return integer_result(Traced(E.scale(-1.0, _node(x))), x)


def _ufunc_square(x: Any) -> Traced:
    return Traced(E.unary("pow", _node(x), 2.0))


def _ufunc_heaviside(x: Any, h0: Any) -> Traced:
    """``np.heaviside(x, h0)``: 1 where x > 0, ``h0`` where x = 0, 0 where x < 0 and NaN where x is
    NaN, as NumPy; piecewise constant in x (derivative 0), linear in ``h0``."""
    step = _binary_elementwise("gt", x, 0.0) + _binary_elementwise("eq", x, 0.0) * h0
    return _where(_binary_elementwise("ne", x, x), np.nan, step)


_UFUNCS.update({
    "add": lambda x, y: _binary("add", x, y),
    "subtract": lambda x, y: _binary("subtract", x, y),
    "multiply": lambda x, y: _binary("multiply", x, y),
    "divide": lambda x, y: _binary("divide", x, y),
    "true_divide": lambda x, y: _binary("divide", x, y),
    "power": _power,
    "float_power": _power,
    "negative": _ufunc_negative,
    "positive": lambda x: Traced(_node(x)),
    "square": _ufunc_square,
    "heaviside": _ufunc_heaviside,
    "matmul": lambda x, y: _matmul(x, y),
})


def _register_table_ufuncs() -> None:
    """Every operation of the table (jacacc.ops) under its NumPy (and SciPy) ufunc names, except the
    arithmetic above, which builds products, sums and scalings rather than elementwise nodes."""
    for op in ops.iterate():
        if op.arity not in (1, 2) or op.name == "pow":  # pow: _power (a constant exponent is a parameter)
            continue
        for name in (op.name, *op.aliases):
            if name in _UFUNCS:  # keys are ufunc names (NumPy's and scipy.special's): others are never looked up
                continue
            _UFUNCS[name] = functools.partial(_elementwise, op.name) if op.arity == 1 else \
                functools.partial(_binary_elementwise, op.name)


_register_table_ufuncs()


# ---------------------------------------------------------------------------- products and contractions
def _einsum_nodes(subscripts: str, nodes: Sequence[Tensor]) -> Tensor:
    """An einsum of any number of operands as a tree of binary generic multiplications."""
    inputs, output = _explicit(subscripts, nodes)
    if len(nodes) <= 2:
        return E.einsum(",".join(inputs) + "->" + output, *nodes)
    import opt_einsum

    path, _ = opt_einsum.contract_path(",".join(inputs) + "->" + output, *(n.shape for n in nodes), shapes=True,
                                       optimize="greedy")
    items = list(zip(inputs, nodes, strict=True))
    for pair in path:
        picked = [items[k] for k in sorted(pair, reverse=True)]
        for k in sorted(pair, reverse=True):
            items.pop(k)
        rest = set(output) | {c for labels, _ in items for c in labels}
        labels = "".join(dict.fromkeys(c for ls, _ in picked for c in ls if c in rest))
        node = E.einsum(",".join(ls for ls, _ in picked) + "->" + labels, *(n for _, n in picked))
        items.append((labels, node))
    (labels, node), = items
    return E.einsum(f"{labels}->{output}", node)


def _explicit(subscripts: str, nodes: Sequence[Tensor]) -> tuple[list[str], str]:
    """Subscripts with the output made explicit and ``...`` expanded (NumPy's rules)."""
    text = subscripts.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(nodes):
        raise TraceError(f"np.einsum {subscripts!r} names {len(inputs)} operands, got {len(nodes)}")
    used = {c for c in text if c.isalpha()}
    spare = [c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in used]
    ell_rank = max((n.ndim - (len(ls) - 3) for ls, n in zip(inputs, nodes, strict=True) if "..." in ls), default=0)
    ell = "".join(spare[:ell_rank])[::-1]
    expanded = []
    for ls, n in zip(inputs, nodes, strict=True):
        if "..." in ls:
            k = n.ndim - (len(ls) - 3)
            ls = ls.replace("...", ell[len(ell) - k:] if k else "")
        if len(ls) != n.ndim or not all(c.isalpha() for c in ls):
            raise TraceError(f"np.einsum {subscripts!r}: operand of shape {n.shape} does not match {ls!r}")
        expanded.append(ls)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for c in "".join(expanded):
            counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    return expanded, out


def _einsum(subscripts: Any, *operands: Any, **kwargs: Any) -> Traced:
    if not isinstance(subscripts, str):
        raise UnsupportedOperationError("np.einsum in the interleaved (operand, axes) form is not supported; use subscripts")
    extra = set(kwargs) - {"optimize"}
    if extra:
        raise UnsupportedOperationError(f"np.einsum with {', '.join(sorted(extra))} is not supported by jacacc.tensor")
    return Traced(_einsum_nodes(subscripts, [_node(x) for x in operands]))


def _matmul(x: Any, y: Any) -> Traced:
    # NumPy's rules (broadcast batch axes, 1-D operands) live with the other array functions
    from jacacc.tensor.arrays import matmul_nodes

    return Traced(matmul_nodes(_node(x), _node(y)))


def _dot(x: Any, y: Any) -> Traced:
    from jacacc.tensor.arrays import dot_nodes

    return Traced(dot_nodes(_node(x), _node(y)))


def _transpose(x: Any, axes: Any = None) -> Traced:
    from jacacc.tensor.arrays import transpose_

    return transpose_(x, axes)


def _sum(x: Any, axis: Any = None, **kwargs: Any) -> Traced:
    # ndarray.sum and np.sum: axes, keepdims and the refused keywords in jacacc.tensor.arrays
    from jacacc.tensor.arrays import sum_

    return sum_(x, axis, **kwargs)


def _diag(x: Any, k: int = 0) -> Traced:
    if k != 0:
        raise UnsupportedOperationError("np.diag with an offset k != 0 is not supported by jacacc.tensor")
    a = _node(x)
    if a.ndim == 1:
        return Traced(E.einsum("i,ij->ij", a, E.delta(a.shape[0])))
    if a.ndim == 2 and a.shape[0] == a.shape[1]:
        return Traced(E.einsum("ii->i", a))
    if a.ndim == 2:  # the main diagonal of a rectangular matrix: a mask of its min(m, n) entries
        m, n = a.shape
        return Traced(E.einsum("ij,ij->" + ("i" if m <= n else "j"), a, E.const(np.eye(m, n))))
    raise UnsupportedOperationError(f"np.diag of shape {a.shape} (a vector or a matrix is supported)")


def _trace(x: Any, *args: Any, **kwargs: Any) -> Traced:
    if args or kwargs:
        raise UnsupportedOperationError("np.trace with offset/axes is not supported by jacacc.tensor")
    a = _node(x)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise UnsupportedOperationError(f"np.trace of shape {a.shape} (a square matrix is supported)")
    return Traced(E.einsum("ii->", a))


def _outer(x: Any, y: Any, out: Any = None) -> Traced:
    a, b = _node(x), _node(y)
    if a.ndim != 1 or b.ndim != 1:
        raise UnsupportedOperationError(f"np.outer of shapes {a.shape} and {b.shape} (vectors are supported)")
    return Traced(E.einsum("i,j->ij", a, b))


def _inner(x: Any, y: Any) -> Traced:
    a, b = _node(x), _node(y)
    if a.ndim == 0 or b.ndim == 0:
        return Traced(_elementwise_product(a, b))
    la, lb = index_letters(a.ndim), index_letters(b.ndim, a.ndim)
    lb = lb[:-1] + la[-1]
    if a.shape[-1] != b.shape[-1]:
        raise UnsupportedOperationError(f"np.inner: last axes of {a.shape} and {b.shape} differ")
    return Traced(E.einsum(f"{la},{lb}->{la[:-1]}{lb[:-1]}", a, b))


_FUNCTIONS.update({
    np.einsum: _einsum,
    np.matmul: _matmul,
    np.dot: _dot,
    np.sum: _sum,
    np.transpose: _transpose,
    np.diag: _diag,
    np.trace: _trace,
    np.outer: _outer,
    np.inner: _inner,
})


# ---------------------------------------------------------------------------- tracing a function
@dataclass(frozen=True)
class TracedFunction:
    """A function traced at argument shapes: its ``var`` nodes and output node."""

    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]

    def __str__(self) -> str:
        return "\n".join(str(y) for y in self.outputs)


def argument_names(f: Callable, n: int) -> list[str]:
    """Names for ``f``'s first ``n`` positional arguments (its parameters, else ``x0, x1, …``)."""
    try:
        params = [p.name for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = params[:n] if len(params) >= n else [f"x{k}" for k in range(n)]
    return names if len(set(names)) == n else [f"x{k}" for k in range(n)]


#: the dtype of the trace under way (:attr:`Traced.dtype`)
_FLOAT64 = np.dtype(np.float64)
_TRACE_DTYPE: contextvars.ContextVar[np.dtype] = contextvars.ContextVar("jacacc_trace_dtype", default=_FLOAT64)


def trace(f: Callable, args: Sequence[Any], parameters: Sequence[Tensor] = ()) -> TracedFunction:
    """Trace ``f`` at arrays shaped like ``args`` into an expression DAG.

    Every argument becomes a ``var`` named after ``f``'s parameter; ``f`` must
    return one traced tensor (a constant result is allowed: it does not depend
    on the arguments).  Traced values report the arguments' float dtype
    (float32 where every float argument is float32, else float64).
    ``parameters`` are scalar ``var`` nodes that ``f`` reads besides its
    arguments (the caller has put them where ``f`` reads them): they follow
    the arguments among the inputs.  An integer or boolean argument (labels,
    indices, a mask) reaches ``f`` as the array it is, a constant of the
    trace; its ``var`` stays among the inputs, unread.

    Raises
    ------
    UnsupportedOperationError
        Naming an operation jacacc.tensor does not support.
    TraceError
        When ``f`` returns something that is not a tensor.
    """
    names = argument_names(f, len(args))
    inputs = tuple(E.var(name, np.shape(a)) for name, a in zip(names, args, strict=True))
    floats = [np.asarray(a).dtype for a in args if np.asarray(a).dtype.kind == "f"]
    single = bool(floats) and all(d == np.float32 for d in floats)
    token = _TRACE_DTYPE.set(np.dtype(np.float32 if single else np.float64))
    from jacacc.tensor.library import intercepting  # it imports this module

    passed = [a if np.asarray(a).dtype.kind in "iub" else Traced(x) for x, a in zip(inputs, args, strict=True)]
    try:
        for attempt in (1, 2):
            try:
                with intercepting() as skipped:
                    result = f(*passed)
                break
            except Exception:
                # f imported a library whose functions are traced by name (scipy.special inside f):
                # the second trace finds it imported and intercepts it.  Whatever the library's own
                # function raised on a traced array (SciPy checks shapes before converting) is moot
                if attempt == 2 or not any(name in sys.modules for name in skipped):
                    raise
    finally:
        _TRACE_DTYPE.reset(token)
    if isinstance(result, tuple | list):
        raise TraceError("jacacc.tensor differentiates functions returning one array; this one returned a "
                         f"{type(result).__name__} of {len(result)}")
    try:
        output = _node(result)
    except UnsupportedOperationError:
        raise TraceError(f"the traced function returned a {type(result).__name__}, not an array") from None
    return TracedFunction((*inputs, *parameters), (output,))
