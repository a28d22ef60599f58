"""Programs as whole-array functions of NumPy, JAX or PyTorch (the peers' view of the same program).

:func:`array_function` turns a program into a function of arrays written with
one array library's operations: every ⊞ and Σ index becomes an axis of a
broadcast grid, a read ``x[a]`` a gather at the integer array ``a``, a bracket
a ``where``, a sum a reduction over its axis.  With ``"jax"`` or ``"torch"`` the
result can be differentiated by those libraries' own automatic
differentiation — which is how ``experiments/cheap_gradients.py`` runs JAX and
PyTorch on exactly the programs jacacc differentiates.  The grids are dense
(a sum over ``k`` inside ``⊞_i ⊞_j`` materializes an ``i × j × k`` array),
which is what those libraries would do with the same program written
with broadcasting.

Reads guarded by a bracket are clipped into range before gathering (the
bracket's ``where`` discards them), so no read goes out of bounds.  The
black-box functions are the operation table's spellings (:mod:`jacacc.ops`:
``numpy``, ``jnp``, ``torch``); a function a library has no spelling of (PyTorch's
``cbrt``) is refused by name when a program calls it.

Examples
--------
>>> import numpy as np, jacacc.iverson as iv
>>> A = iv.var("A", (3, 3)); i, j = iv.index("i"), iv.index("j")
>>> f = array_function(iv.gen(i, 3, iv.sum(j, 3, A[i, j] * A[j, i])), "numpy")
>>> X = np.arange(9.0).reshape(3, 3)
>>> np.allclose(f(A=X), np.diag(X @ X))
True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc import ops
from jacacc.errors import DTypeError, RegistryError, require_extra, require_real_dtype
from jacacc.iverson._stack import Step, drive
from jacacc.iverson.check import check
from jacacc.iverson.interpret import COMPARE, variable_array
from jacacc.iverson.normalize import bindings_of, gen_pushout
from jacacc.iverson.syntax import (
    FUNCTIONS,
    Access,
    Add,
    And,
    BoolConst,
    Bracket,
    Cmp,
    Const,
    DataCmp,
    Expr,
    Func,
    Gen,
    IvTypeError,
    Mul,
    Or,
    Pair,
    Pred,
    Proj,
    Sum,
    Var,
    operation_name,
)

__all__ = ["ARRAY_LIBRARIES", "array_function"]


@dataclass(frozen=True)
class _Lib:
    """The handful of array operations the translation needs, per library."""

    asarray: Callable[[Any], Any]
    arange: Callable[[int], Any]
    where: Callable[[Any, Any, Any], Any]
    reduce_sum: Callable[[Any, int], Any]
    clip: Callable[[Any, int, int], Any]
    functions: dict[str, Callable[[Any], Any]]
    logical_and: Callable[[Any, Any], Any]
    logical_or: Callable[[Any, Any], Any]
    broadcast_to: Callable[[Any, tuple[int, ...]], Any]
    name: str = "numpy"


def _functions(spelling: Callable[[ops.Operation], str], modules: dict[str, str]) -> dict[str, Callable[[Any], Any]]:
    """The language's functions (:data:`~jacacc.iverson.syntax.FUNCTIONS`) as one library's
    callables, from their spellings in :mod:`jacacc.ops` (``modules`` maps the spellings'
    module aliases, ``jnp`` → ``jax.numpy``); a function the library cannot spell is left out."""
    out = {}
    for name in FUNCTIONS:
        text = spelling(ops.get(operation_name(name)))
        if text:
            module, _, attr = text.rpartition(".")
            out[name] = getattr(importlib.import_module(modules.get(module, module)), attr)
    return out


def _numpy() -> _Lib:
    import numpy as np

    return _Lib(lambda x: np.asarray(x, dtype=np.float64), lambda n: np.arange(n), np.where,
                lambda x, axis: np.sum(x, axis=axis), np.clip, dict(FUNCTIONS),
                np.logical_and, np.logical_or, np.broadcast_to)


def _jax() -> _Lib:
    jax = require_extra("jax", "jax")
    jnp = jax.numpy
    return _Lib(lambda x: jnp.asarray(x), lambda n: jnp.arange(n), jnp.where,
                lambda x, axis: jnp.sum(x, axis=axis), jnp.clip,
                _functions(lambda op: op.jnp, {"jnp": "jax.numpy"}),
                jnp.logical_and, jnp.logical_or, jnp.broadcast_to, "jax")


def _torch() -> _Lib:
    torch = require_extra("torch", "torch")

    def asarray(x: Any) -> Any:
        return x if isinstance(x, torch.Tensor) else torch.as_tensor(x, dtype=torch.float64)

    return _Lib(asarray, lambda n: torch.arange(n), torch.where, lambda x, axis: torch.sum(x, dim=axis),
                lambda x, lo, hi: torch.clamp(x, lo, hi), _functions(lambda op: op.torch, {}),
                torch.logical_and, torch.logical_or, torch.broadcast_to, "torch")


#: library name -> loader of its operations
ARRAY_LIBRARIES: dict[str, Callable[[], _Lib]] = {"numpy": _numpy, "jax": _jax, "torch": _torch}


def array_function(expr: Expr, library: str = "numpy") -> Callable[..., Any]:
    """``expr`` as a function of keyword arrays written with ``library``'s operations."""
    if library not in ARRAY_LIBRARIES:
        raise RegistryError(f"unknown array library {library!r}; known: {', '.join(ARRAY_LIBRARIES)}")
    check(expr)
    lib = ARRAY_LIBRARIES[library]()
    bindings, out = bindings_of(gen_pushout(expr))
    free = sorted(expr.free_vars)

    def run(**arrays: Any) -> Any:
        for name in free:
            if name not in arrays:
                raise IvTypeError(f"no value given for the variable {name!r}")
            _check_dtype(name, arrays[name])
        env = {name: lib.asarray(arrays[name]) for name in free}
        for name, value in bindings:
            env[name] = _value(value, env, lib)
        return _value(out, env, lib)

    run.__name__ = f"iverson_{library}"
    return run


def _check_dtype(name: str, value: Any) -> None:
    """Refuse a complex or non-numeric input by name (a conversion to float would drop the
    imaginary part with only a warning, or fail obscurely): NumPy, JAX and PyTorch arrays alike."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:  # lists, Python numbers
        variable_array(name, value)
    elif isinstance(dtype, np.dtype):  # NumPy and JAX (also tracers: the dtype, never the values)
        require_real_dtype(dtype, f"the variable {name!r}", "jacacc.iverson")
    elif getattr(dtype, "is_complex", False):  # torch.dtype
        raise DTypeError(f"the variable {name!r} is complex ({dtype}); jacacc.iverson computes with real numbers")


def _value(e: Expr, env: dict[str, Any], lib: _Lib) -> Any:
    """A closed value (after gen push-out: ⊞s outermost over a scalar body, or a pair)."""
    if isinstance(e, Pair):
        return (_value(e.a, env, lib), _value(e.b, env, lib))
    axes: list[tuple[str, int]] = []
    body = e
    while isinstance(body, Gen):
        axes.append((body.index, body.extent))
        body = body.body
    if body.type != ():  # a tensor read whole: x, x[0], π(x) …
        return _read_tensor(body, env)
    out = _scalar(body, axes, env, lib)
    return lib.broadcast_to(out, tuple(n for _, n in axes)) if axes else out


def _read_tensor(e: Expr, env: dict[str, Any]) -> Any:
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Access):
        return _read_tensor(e.target, env)[e.idx.const]
    if isinstance(e, Proj):
        return _read_tensor(e.arg, env)[e.which]
    raise AssertionError(f"not in gen push-out form: {type(e).__name__}")  # pragma: no cover


def _axis(values: Any, position: int, ndim: int) -> Any:
    """A 1-D array shaped to lie along ``position`` of an ``ndim``-axis grid."""
    shape = [1] * ndim
    shape[position] = -1
    return values.reshape(shape)


def _index_value(a: Any, axes: list[tuple[str, int]], lib: _Lib) -> Any:
    total: Any = a.const
    names = [n for n, _ in axes]
    for name, c in a.coeffs:
        position = len(names) - 1 - names[::-1].index(name)  # the innermost binder of that name
        total = total + c * _axis(lib.arange(axes[position][1]), position, len(axes))
    return total


def _scalar(e: Expr, axes: list[tuple[str, int]], env: dict[str, Any], lib: _Lib) -> Any:
    """The value of a scalar body on the grid of ``axes`` (broadcastable to it)."""
    return drive(_scalar_step(e, axes, env, lib))


def _scalar_step(e: Expr, axes: list[tuple[str, int]], env: dict[str, Any], lib: _Lib) -> Step:
    if isinstance(e, Const):
        return lib.asarray(e.value).reshape((1,) * len(axes)) if axes else lib.asarray(e.value)
    if isinstance(e, (Var, Access)):
        return _gather(e, axes, env, lib)
    if isinstance(e, Add):
        return (yield _scalar_step(e.a, axes, env, lib)) + (yield _scalar_step(e.b, axes, env, lib))
    if isinstance(e, Mul):
        return (yield _scalar_step(e.a, axes, env, lib)) * (yield _scalar_step(e.b, axes, env, lib))
    if isinstance(e, Func):
        function = lib.functions.get(e.name)
        if function is None:
            raise IvTypeError(f"{lib.name} has no spelling of the function {e.name} (jacacc.ops lists none)")
        return function((yield _scalar_step(e.arg, axes, env, lib)))
    if isinstance(e, Bracket):
        mask = yield _pred(e.pred, axes, env, lib)
        if isinstance(mask, bool):  # a constant predicate: no where (torch wants a tensor condition)
            return (yield _scalar_step(e.body if mask else Const(0.0), axes, env, lib))
        return lib.where(mask, (yield _scalar_step(e.body, axes, env, lib)), lib.asarray(0.0))
    if isinstance(e, Sum):
        inner = axes + [(e.index, e.extent)]
        value = yield _scalar_step(e.body, inner, env, lib)
        shape = tuple(value.shape[:len(axes)]) + (e.extent,)  # keep axes the body does not depend on at 1
        return lib.reduce_sum(lib.broadcast_to(value, shape), len(axes))
    raise AssertionError(f"not in gen push-out form: {type(e).__name__}")  # pragma: no cover


def _gather(e: Expr, axes: list[tuple[str, int]], env: dict[str, Any], lib: _Lib) -> Any:
    indices = []
    target = e
    while isinstance(target, Access):
        indices.append(target.idx)
        target = target.target
    indices.reverse()
    if isinstance(target, Proj):
        base = _read_tensor(target, env)
        shape = target.type
    else:
        assert isinstance(target, Var)
        base = env[target.name]
        shape = target.type
    if not indices:
        return base.reshape((1,) * len(axes)) if axes else base
    positions = []
    for a, extent in zip(indices, shape, strict=False):
        value = _index_value(a, axes, lib)
        # guarded reads (also constant ones, after substitution): the bracket discards clipped values
        if isinstance(value, int):
            value = min(max(value, 0), extent - 1)
        else:
            value = lib.clip(value, 0, extent - 1)
        positions.append(value)
    if all(isinstance(p, int) for p in positions):
        out = base[tuple(positions)]
        return out.reshape((1,) * len(axes)) if axes else out
    out = base[tuple(positions)]
    return out.reshape(out.shape + (1,) * (len(axes) - out.ndim)) if out.ndim < len(axes) else out


def _pred(p: Pred, axes: list[tuple[str, int]], env: dict[str, Any], lib: _Lib) -> Step:
    if isinstance(p, Cmp):
        lhs, rhs = _index_value(p.lhs, axes, lib), _index_value(p.rhs, axes, lib)
        out = COMPARE[p.op](lhs, rhs)
        return bool(out) if isinstance(lhs, int) and isinstance(rhs, int) else out
    if isinstance(p, DataCmp):
        lhs = yield _scalar_step(p.lhs, axes, env, lib)
        return COMPARE[p.op](lhs, (yield _scalar_step(p.rhs, axes, env, lib)))
    if isinstance(p, (And, Or)):
        a, b = (yield _pred(p.a, axes, env, lib)), (yield _pred(p.b, axes, env, lib))
        conjunction = isinstance(p, And)
        for x, y in ((a, b), (b, a)):
            if isinstance(x, bool):  # constant sides fold here (torch wants tensors in logical_and)
                return (y if x else False) if conjunction else (True if x else y)
        return lib.logical_and(a, b) if conjunction else lib.logical_or(a, b)
    assert isinstance(p, BoolConst)
    return p.value
