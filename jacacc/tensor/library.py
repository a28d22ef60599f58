"""Library functions that convert their arguments to ndarrays, traced by name (issue 41).

SciPy's ``logsumexp``, ``softmax`` and ``log_softmax``, and NumPy's own
``np.asarray`` / ``np.array``, start by converting their argument to an
ndarray.  NumPy's dispatch protocols never see those calls, so a traced
argument cannot tell them apart from any other conversion — and has no values
to convert to.  While :func:`~jacacc.tensor.trace.trace` runs ``f``, each
function registered here is replaced, in its modules and in every user module
that imported it by name (``from scipy.special import logsumexp``), by a
wrapper that calls the traced implementation when an argument is traced and
the original otherwise; the originals are put back when the trace ends.

A place may also name a method, ``"module:Class.method"`` (``"scipy.stats:rv_continuous.logpdf"``):
the wrapper is set on the class itself while the trace runs, so that every instance — and every
object that calls the method through an instance, as SciPy's frozen distributions call
``self.dist.logpdf`` — reaches it; the implementation receives ``self`` first.  The method must
be defined on that class (not inherited), so that putting the original back restores the class
exactly; ``staticmethod`` and ``classmethod`` keep their kind.

The implementations are written with the traced operations, so their
derivatives follow: ``logsumexp`` as ``m + log Σ b·exp(a − m)`` with the
maximum ``m`` behind a stop-gradient (as ``jax.nn.logsumexp``), ``softmax``
and ``log_softmax`` likewise.

Examples
--------
>>> import numpy as np
>>> import scipy.special
>>> import jacacc.tensor as jt
>>> g = jt.grad(lambda x: scipy.special.logsumexp(x))(np.zeros(4))
>>> g.tolist()                                    # the softmax: 1/4 each
[0.25, 0.25, 0.25, 0.25]
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from jacacc.errors import UnsupportedOperationError
from jacacc.tensor.arrays import _axes
from jacacc.tensor.captured import _is_library_module
from jacacc.tensor.operators import apply_operator
from jacacc.tensor.trace import _UFUNCS, Traced, _elementwise, _where, register_function

__all__ = ["intercepting", "register_library"]

#: (module, attribute) -> the traced implementation (same signature as the original)
_LIBRARY: dict[tuple[str, str], Callable[..., Any]] = {}


def register_library(*places: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the traced implementation of the function at each ``"module:attribute"`` place
    (``"module:Class.method"``: a method, swapped on the class; the implementation takes ``self``
    first).

    >>> @register_library("numpy:example_not_in_numpy")
    ... def _example(x):
    ...     return x
    >>> ("numpy", "example_not_in_numpy") in _LIBRARY
    True
    >>> del _LIBRARY[("numpy", "example_not_in_numpy")]
    """

    def register(impl: Callable[..., Any]) -> Callable[..., Any]:
        for place in places:
            module, _, attribute = place.partition(":")
            _LIBRARY[(module, attribute)] = impl
        return impl

    return register


def _traced_inside(value: Any, depth: int = 0) -> bool:
    if isinstance(value, Traced):
        return True
    if isinstance(value, list | tuple) and depth < 8:
        return any(_traced_inside(v, depth + 1) for v in value)
    return False


#: the dispatching wrapper of each original function, built once (functools.wraps costs microseconds)
_WRAPPERS: dict[tuple[Callable[..., Any], Callable[..., Any]], Callable[..., Any]] = {}


def _wrapper(original: Callable[..., Any], impl: Callable[..., Any]) -> Callable[..., Any]:
    wrapper = _WRAPPERS.get((original, impl))
    if wrapper is None:
        wrapper = _WRAPPERS[(original, impl)] = _new_wrapper(original, impl)
    return wrapper


def _new_wrapper(original: Callable[..., Any], impl: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if any(_traced_inside(a) for a in args) or any(_traced_inside(v) for v in kwargs.values()):
            return impl(*args, **kwargs)
        return original(*args, **kwargs)

    dispatch.__jacacc_original__ = original  # type: ignore[attr-defined]
    return dispatch


def _owner(module: Any, attribute: str) -> tuple[Any, str] | None:
    """The object holding the place's last name — the module, or the class of ``"Class.method"`` —
    and that name; None when a class on the way is missing."""
    *path, name = attribute.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part, None)
        if not isinstance(owner, type):
            return None
    return owner, name


def _swap_method(cls: type, name: str, impl: Callable[..., Any]) -> Callable[[], None] | None:
    """Set the dispatching wrapper of ``cls.name`` on ``cls``; the function that restores it (None when
    ``cls`` does not define ``name`` itself or it is already swapped)."""
    # vars(): only a method the class defines — a wrapper set over an inherited one would shadow
    # the base class's for this class alone, and restoring it would leave a copy behind
    original = vars(cls).get(name)
    kind = type(original) if isinstance(original, staticmethod | classmethod) else None
    function = original.__func__ if kind is not None else original
    if not callable(function) or hasattr(function, "__jacacc_original__"):
        return None
    wrapper = _wrapper(function, impl)
    setattr(cls, name, kind(wrapper) if kind is not None else wrapper)
    return functools.partial(setattr, cls, name, original)


# Every trace runs intercepting(), and a process (a test worker above all) can hold thousands of
# modules: the user modules are listed again only when sys.modules grows or shrinks, and a module's
# names holding registered functions are looked for again only when its namespace changes size
_USER_MODULES: tuple[int, list[dict]] = (-1, [])
_FOUND: dict[int, tuple[int, tuple[str, ...]]] = {}


def _user_namespaces() -> list[dict]:
    """The namespaces of the imported modules that are no library's (see captured._is_library_module)."""
    global _USER_MODULES
    count, namespaces = _USER_MODULES
    if count != len(sys.modules):
        namespaces = [vars(m) for name, m in list(sys.modules.items())
                      if m is not None and not _is_library_module(name) and isinstance(getattr(m, "__dict__", None), dict)]
        _USER_MODULES = (len(sys.modules), namespaces)
    return namespaces


def _names_of_originals(namespace: dict, originals: dict[int, Callable[..., Any]]) -> tuple[str, ...]:
    """The names in ``namespace`` bound to a registered function (looked for again when it changes size)."""
    size, names = _FOUND.get(id(namespace), (-1, ()))
    if size != len(namespace):
        names = tuple(k for k, v in list(namespace.items()) if id(v) in originals)
        _FOUND[id(namespace)] = (len(namespace), names)
    return names


@contextlib.contextmanager
def intercepting() -> Iterator[set[str]]:
    """Replace every registered function by its dispatching wrapper while the block runs (see
    the module notes); a module not imported yet is skipped (nothing can have called it) and its
    name is in the set the block gets: one that ``f`` imports while traced (``import scipy.special``
    inside ``f``) was not intercepted, and :func:`~jacacc.tensor.trace.trace` traces again."""
    restores: list[Callable[[], None]] = []
    originals: dict[int, Callable[..., Any]] = {}
    skipped: set[str] = set()
    try:
        for (module_name, attribute), impl in _LIBRARY.items():
            module = sys.modules.get(module_name)
            if module is None:
                skipped.add(module_name)
                continue
            if "." in attribute:  # a method: swapped on its class, which every caller looks it up on
                place = _owner(module, attribute)
                restore = _swap_method(*place, impl) if place is not None else None
                if restore is not None:
                    restores.append(restore)
                continue
            original = getattr(module, attribute, None)
            if original is None or hasattr(original, "__jacacc_original__"):
                continue
            wrapper = _wrapper(original, impl)
            originals[id(original)] = wrapper
            restores.append(functools.partial(vars(module).__setitem__, attribute, original))
            vars(module)[attribute] = wrapper
        # user modules that imported a function by name hold the original object
        for namespace in _user_namespaces():
            for attribute in _names_of_originals(namespace, originals):
                value = namespace.get(attribute)
                wrapper = originals.get(id(value))
                if wrapper is not None and callable(value):
                    restores.append(functools.partial(namespace.__setitem__, attribute, value))
                    namespace[attribute] = wrapper
        yield skipped
    finally:
        for restore in reversed(restores):
            restore()


# ---------------------------------------------------------------------------- NumPy's conversions
def _as_traced(value: Any, dtype: Any) -> Any:
    """``np.asarray``/``np.array`` of a traced value, or of nested lists holding some: the traced
    array (a stack of the items)."""
    if dtype is not None and np.dtype(dtype).kind != "f":
        raise UnsupportedOperationError(f"np.asarray / np.array of a traced value with dtype {np.dtype(dtype)}: "
                                        "jacacc.tensor computes in float32 or float64")
    if isinstance(value, Traced):
        return value
    return np.stack([_as_traced(v, None) if _traced_inside(v) else np.asarray(v, dtype=float) for v in value])


@register_library("numpy:asarray", "numpy:asanyarray", "numpy:ascontiguousarray")
def _asarray(a: Any, dtype: Any = None, order: Any = None, **kwargs: Any) -> Any:
    return _as_traced(a, dtype)


@register_library("numpy:array", "numpy.lib._index_tricks_impl:array")  # the second: np.r_ and np.c_
def _array(obj: Any, dtype: Any = None, *, copy: Any = True, order: Any = "K", subok: bool = False,
           ndmin: int = 0, **kwargs: Any) -> Any:
    result = _as_traced(obj, dtype)
    while result.ndim < ndmin:
        result = result[None]
    return result


# ---------------------------------------------------------------------------- scipy.special
def _stable_max(name: str, a: Any, axis: Any) -> Any:
    """The maximum over ``axis`` (kept) with a zero derivative: the shift that keeps exp finite
    (:func:`~jacacc.tensor.arrays.shift_extremum`; a constant's own maximum for a constant)."""
    if not isinstance(a, Traced):
        return np.max(a, axis=axis, keepdims=True)
    node = a.node
    axes = _axes(name, axis, node.shape)
    if not node.ndim or any(node.shape[k] == 0 for k in axes):
        return _elementwise("stop_gradient", np.max(a, axis=axis, keepdims=True))  # np.max's own checks
    return Traced(apply_operator("shift_extremum", [node], axes=axes, largest=True)[0])


def _squeezed(value: Any, axis: Any, ndim: int, keepdims: bool) -> Any:
    if keepdims:
        return value
    if axis is None:
        return value.reshape(())
    axes = {a % ndim for a in (axis if isinstance(axis, tuple | list) else (axis,))}
    return value.reshape(tuple(n for k, n in enumerate(value.shape) if k not in axes))


@register_library("scipy.special:logsumexp", "scipy.special._logsumexp:logsumexp")
def _logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False) -> Any:
    if return_sign:
        raise UnsupportedOperationError("scipy.special.logsumexp with return_sign=True is not supported by "
                                        "jacacc.tensor (the sign is piecewise constant: compute it apart)")
    a = _as_traced(a, None) if _traced_inside(a) else np.asarray(a, dtype=float)
    m = _stable_max("scipy.special.logsumexp", a, axis)
    terms = np.exp(a - m) if b is None else b * np.exp(a - m)
    total = np.log(np.sum(terms, axis=axis, keepdims=True)) + m
    return _squeezed(total, axis, a.ndim, keepdims)


@register_library("scipy.special:softmax", "scipy.special._logsumexp:softmax")
def _softmax(x: Any, axis: Any = None) -> Any:
    x = _as_traced(x, None)
    shifted = np.exp(x - _stable_max("scipy.special.softmax", x, axis))
    return shifted / np.sum(shifted, axis=axis, keepdims=True)


@register_library("scipy.special:log_softmax", "scipy.special._logsumexp:log_softmax")
def _log_softmax(x: Any, axis: Any = None) -> Any:
    x = _as_traced(x, None)
    shifted = x - _stable_max("scipy.special.log_softmax", x, axis)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))



# ---------------------------------------------------------------------------- constructors *_like
def _like_shape(a: Any, shape: Any) -> tuple[int, ...]:
    return tuple(a.shape if isinstance(a, Traced) else np.shape(a)) if shape is None else \
        tuple(np.atleast_1d(shape).tolist())


# shapes are known while tracing
register_function(np.shape)(lambda a: tuple(a.shape))
register_function(np.ndim)(lambda a: len(a.shape))
register_function(np.size)(lambda a, axis=None: a.size if axis is None else a.shape[axis])


def _like_dtype(a: Any, dtype: Any) -> Any:
    return (a.dtype if isinstance(a, Traced) else np.asarray(a).dtype) if dtype is None else dtype


# np.ones_like, np.zeros_like and np.full_like of a traced array: constants of its shape and dtype
# (a traced fill_value broadcast), as NumPy gives them
@register_function(np.ones_like)
def _ones_like(a: Any, dtype: Any = None, order: Any = "K", subok: bool = True, shape: Any = None) -> Any:
    return np.ones(_like_shape(a, shape), dtype=_like_dtype(a, dtype))


@register_function(np.zeros_like)
def _zeros_like(a: Any, dtype: Any = None, order: Any = "K", subok: bool = True, shape: Any = None) -> Any:
    return np.zeros(_like_shape(a, shape), dtype=_like_dtype(a, dtype))


@register_function(np.full_like)
def _full_like(a: Any, fill_value: Any, dtype: Any = None, order: Any = "K", subok: bool = True,
               shape: Any = None) -> Any:
    ones = np.ones(_like_shape(a, shape), dtype=_like_dtype(a, dtype))
    return fill_value * ones if _traced_inside(fill_value) else np.full_like(ones, fill_value)


# ---------------------------------------------------------------------------- scipy.special's ufuncs
def _xlogy(x: Any, y: Any) -> Any:
    """``x · log(y)``, 0 where x = 0 (y = 0 and y = ∞ included), as scipy.special.xlogy; its
    derivative is JAX's, ``log(y)`` in x (at x = 0 too) and ``x / y`` in y."""
    return _zero_where_x_is(x, x * np.log(y), (y == 0) + (np.abs(y) == np.inf))


def _xlog1py(x: Any, y: Any) -> Any:
    """``x · log1p(y)``, 0 where x = 0 (y = −1 and y = ∞ included), as scipy.special.xlog1py."""
    return _zero_where_x_is(x, x * np.log1p(y), (y == -1) + (np.abs(y) == np.inf))


def _zero_where_x_is(x: Any, product: Any, singular: Any) -> Any:
    # x · log(…) is already 0 at x = 0 except where the logarithm is infinite (0 · ∞ = NaN): only
    # those entries are replaced, so that the derivative in x stays log(…) at x = 0, as JAX's
    return _where((x == 0) * singular, 0.0, product)


def _log_expit(x: Any) -> Any:
    """``log(expit(x)) = −log(1 + e^−x)``, without overflow, as scipy.special.log_expit."""
    return -np.logaddexp(0.0, -x)


_UFUNCS.update({"xlogy": _xlogy, "xlog1py": _xlog1py, "log_expit": _log_expit})
