"""JAX functions as a front end: a jaxpr interpreted on traced values.

:func:`from_jax` turns a function written with ``jax.numpy`` into the same
:class:`~jacacc.tracer.Traced` object that :func:`jacacc.trace` makes from a
NumPy function.  It does not build a graph itself: it asks JAX for the
function's jaxpr (:func:`jax.make_jaxpr`, in float64), then runs
:func:`jacacc.tracer.trace` on a function that *interprets* the jaxpr on NumPy
object arrays of tracers, so every array element becomes a vertex
(scalarized) and the tracer's own graph builder records the operations.

The interpreter is a table, :data:`HANDLERS`, from primitive name to a
handler (in the manner of JAX's rule tables).  Equations come in three kinds:

* **constant** — no operand depends on the input: evaluated by JAX itself
  (``eqn.primitive.bind`` on concrete arrays), so index arithmetic, ``iota``,
  constant comparisons … never become vertices;
* **elementwise** — mapped onto the rules of :mod:`jacacc.rules` (``sin``,
  ``pow``, ``maximum``, the predicates ``gt`` … and ``where``, ``logistic``,
  ``stop_gradient``);
* **data movement** (``reshape``, ``broadcast_in_dim``, ``slice``,
  ``gather``, ``pad``, ``concatenate``, ``dynamic_slice`` …) — executed by
  JAX on an integer *index array* in place of the values (each element holds
  its own flat position), and the result indexes the object array: exact to
  JAX's semantics, out-of-bounds modes included (a fill position takes the
  fill value as a constant).

Sums (``reduce_sum``, ``dot_general``) fold their terms from the first one,
so they add no constant vertex.  Call primitives (``jit``/``pjit``,
``custom_jvp_call``, ``custom_vjp_call``, ``closed_call``, ``remat``) are
inlined, custom derivative rules ignored: the primal is differentiated.  Any
other primitive with a traced operand is refused with an
:class:`~jacacc.errors.UnsupportedOperationError` naming it; equations whose
results are never used are skipped.

Float64 is enabled for the duration of the call with JAX's scoped
``jax.enable_x64(True)`` context manager (``jax.experimental.enable_x64()``
on older JAX); the global setting is left alone.

Examples
--------
>>> import numpy as np, pytest
>>> jnp = pytest.importorskip("jax.numpy")
>>> traced = from_jax(lambda x: jnp.sin(x[0]) * x[1:] ** 2, np.array([0.5, 2.0, 3.0]))
>>> traced.graph
CompGraph(inputs=3, intermediates=3, outputs=2, edges=7, partials='symbolic')
>>> traced.jacobian([0.5, 2.0, 3.0]).round(6)
array([[3.51033 , 1.917702, 0.      ],
       [7.898243, 0.      , 2.876553]])
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from jacacc.errors import TraceError, UnsupportedOperationError, require_extra
from jacacc.tracer import Traced, Tracer, apply_rule, trace

__all__ = ["HANDLERS", "from_jax", "handles", "supported_primitives"]

#: ``handler(interpreter, eqn, *operands) -> list of results``; operands are NumPy
#: arrays: ``dtype=object`` when traced (elements :class:`~jacacc.tracer.Tracer` or
#: float), numeric when constant.
Handler = Callable[..., list[Any]]

#: The interpreter's table: JAX primitive name -> handler.
HANDLERS: dict[str, Handler] = {}

#: Call-like primitives: always inlined (their inner equations fold on their own).
_INLINED: set[str] = set()


def handles(*names: str, inline: bool = False) -> Callable[[Handler], Handler]:
    """Register the decorated handler for the JAX primitives ``names``.

    Parameters
    ----------
    *names : str
        Primitive names (``eqn.primitive.name``).
    inline : bool
        A call-like primitive: its handler runs even when every operand is a
        constant (rather than JAX evaluating the whole call).

    Examples
    --------
    >>> @handles("my_identity")
    ... def _identity(interp, eqn, x):
    ...     return [x]
    >>> "my_identity" in supported_primitives()
    True
    >>> _ = HANDLERS.pop("my_identity")
    """

    def decorate(handler: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = handler
            if inline:
                _INLINED.add(name)
        return handler

    return decorate


def supported_primitives() -> list[str]:
    """The primitive names :func:`from_jax` handles with traced operands, sorted.

    Examples
    --------
    >>> {"dot_general", "gather", "select_n", "sin"} <= set(supported_primitives())
    True
    """
    return sorted(HANDLERS)


# =========================================================================== values
def _is_traced(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == object


def _objects(value: Any) -> np.ndarray:
    """``value`` as an object array whose constants are Python floats."""
    if isinstance(value, Tracer):
        out = np.empty((), dtype=object)
        out[()] = value
        return out
    arr = np.asarray(value)
    if arr.dtype == object:
        return arr
    return np.asarray(arr, dtype=float).astype(object)


def _operand(value: Any) -> Any:
    """An elementwise operand: traced arrays as they are, constants as float arrays."""
    return value if _is_traced(value) else np.asarray(value, dtype=float)


def _finish(value: Any, aval: Any) -> np.ndarray:
    """A handler's result in the interpreter's form: an object array holding at least
    one tracer (constants as floats), or a constant array of the jaxpr's dtype."""
    arr = _objects(value) if isinstance(value, Tracer) or _is_traced(value) else np.asarray(value)
    shape = tuple(aval.shape)
    if arr.shape != shape:
        try:
            arr = np.broadcast_to(arr, shape)
        except ValueError:
            raise TraceError(f"internal error: a result of shape {arr.shape} where the jaxpr has {shape}") from None
    if arr.dtype == object:
        flat = arr.ravel()
        if any(isinstance(e, Tracer) for e in flat):
            out = np.empty(flat.shape, dtype=object)
            out[:] = [e if isinstance(e, Tracer) else float(e) for e in flat]
            return out.reshape(shape)
        arr = np.array([float(e) for e in flat], dtype=float).reshape(shape)
    return np.asarray(arr, dtype=aval.dtype)


def _fold(values: np.ndarray, op: Callable[[Any, Any], Any], axis: int) -> np.ndarray:
    """Left fold of ``op`` along ``axis`` of an object array (starting at the first term)."""
    values = np.moveaxis(values, axis, -1)
    acc = values[..., 0]
    for k in range(1, values.shape[-1]):
        acc = op(acc, values[..., k])
    return acc


def _rule(name: str) -> Callable[..., Any]:
    def op(*operands: Any) -> Any:
        return apply_rule(name, *operands)

    return op


def _unsupported(eqn: Any, why: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(f"JAX primitive {eqn.primitive.name!r} {why}")


# =========================================================================== the interpreter
class _Interpreter:
    """Evaluates jaxprs on traced and constant arrays (see the module notes)."""

    def __init__(self, jax: Any) -> None:
        self.jax = jax
        self.literal = require_extra("jax.extend.core", "bench").Literal

    def bind(self, eqn: Any, operands: Sequence[Any], params: dict[str, Any] | None = None) -> list[np.ndarray]:
        """Evaluate ``eqn``'s primitive with JAX on concrete ``operands``."""
        prim = eqn.primitive
        bind_params = prim.get_bind_params(eqn.params if params is None else params)
        subfuns: Sequence[Any] = ()
        if isinstance(bind_params, tuple):  # older JAX: (subfuns, params)
            subfuns, bind_params = bind_params
        out = prim.bind(*subfuns, *operands, **bind_params)
        return [np.asarray(o) for o in (out if prim.multiple_results else [out])]

    def run(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list[np.ndarray]:
        """The outputs of ``jaxpr`` (an open Jaxpr) on ``consts`` and ``args``."""
        env: dict[Any, np.ndarray] = {}

        def read(v: Any) -> np.ndarray:
            if isinstance(v, self.literal):
                return np.asarray(v.val, dtype=v.aval.dtype)
            return env[v]

        for var, value in zip(jaxpr.constvars, consts, strict=True):
            env[var] = np.asarray(value)
        for var, value in zip(jaxpr.invars, args, strict=True):
            env[var] = _objects(value) if isinstance(value, Tracer) else value
        for eqn in _live_equations(jaxpr, self.literal):
            operands = [read(v) for v in eqn.invars]
            name = eqn.primitive.name
            if name in _INLINED or any(_is_traced(v) for v in operands):
                handler = HANDLERS.get(name)
                if handler is None:
                    raise _unsupported(
                        eqn,
                        "is not supported by jacacc.from_jax with an operand that depends on the input "
                        f"(supported: {', '.join(supported_primitives())})",
                    )
                results = handler(self, eqn, *operands)
            else:
                results = self.bind(eqn, operands)
            for var, value in zip(eqn.outvars, results, strict=True):
                env[var] = _finish(value, var.aval)
        return [read(v) for v in jaxpr.outvars]

    def inline(self, inner: Any, args: Sequence[Any]) -> list[np.ndarray]:
        """Run a closed or open jaxpr found in an equation's parameters."""
        if hasattr(inner, "consts"):  # ClosedJaxpr
            return self.run(inner.jaxpr, inner.consts, args)
        return self.run(inner, (), args)


def _live_equations(jaxpr: Any, literal: type) -> list[Any]:
    """The equations some output depends on, in order (JAX leaves dead ones in, e.g. the
    dropped ``sign`` of ``logsumexp``)."""
    needed = {v for v in jaxpr.outvars if not isinstance(v, literal)}
    live = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in needed for v in eqn.outvars if type(v).__name__ != "DropVar"):
            live.append(eqn)
            needed.update(v for v in eqn.invars if not isinstance(v, literal))
    live.reverse()
    return live


# =========================================================================== elementwise
_ELEMENTWISE = {
    "add": "add", "add_any": "add", "sub": "sub", "mul": "mul", "div": "div", "neg": "neg",
    "pow": "pow", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log1p": "log1p",
    "sqrt": "sqrt", "cbrt": "cbrt", "square": "square",
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "arcsin", "acos": "arccos", "atan": "arctan",
    "atan2": "arctan2", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh", "abs": "abs", "max": "maximum", "min": "minimum",
    "logistic": "logistic", "erf": "erf", "erfc": "erfc", "stop_gradient": "stop_gradient",
    # predicates: 1.0 / 0.0 with zero partials (jacacc.rules)
    "gt": "gt", "ge": "ge", "lt": "lt", "le": "le", "eq": "eq", "ne": "ne",
}


def _elementwise(rule: str) -> Handler:
    def handler(interp: _Interpreter, eqn: Any, *operands: Any) -> list[Any]:
        return [apply_rule(rule, *map(_operand, operands))]

    handler.__name__ = f"_{rule}"
    return handler


for _name, _rule_name in _ELEMENTWISE.items():
    handles(_name)(_elementwise(_rule_name))


@handles("integer_pow")
def _integer_pow(interp: _Interpreter, eqn: Any, x: Any) -> list[Any]:
    # x**n is the pow rule with a constant exponent: partial n*x**(n-1)
    return [apply_rule("pow", x, float(eqn.params["y"]))]


@handles("rsqrt")
def _rsqrt(interp: _Interpreter, eqn: Any, x: Any) -> list[Any]:
    # one vertex x**-0.5 (partial -0.5*x**-1.5) rather than sqrt and a division
    return [apply_rule("pow", x, -0.5)]


@handles("is_finite")
def _is_finite(interp: _Interpreter, eqn: Any, x: Any) -> list[Any]:
    # [|x| < inf]: false for ±inf and NaN
    return [apply_rule("lt", apply_rule("abs", x), math.inf)]


@handles("clamp")
def _clamp(interp: _Interpreter, eqn: Any, lo: Any, x: Any, hi: Any) -> list[Any]:
    return [apply_rule("minimum", apply_rule("maximum", _operand(x), _operand(lo)), _operand(hi))]


def _boolean(eqn: Any) -> None:
    if any(np.dtype(v.aval.dtype) != np.bool_ for v in eqn.invars):
        raise _unsupported(eqn, "on traced integers is not supported (bitwise operations are not differentiable)")


@handles("not")
def _not(interp: _Interpreter, eqn: Any, p: Any) -> list[Any]:
    _boolean(eqn)
    return [apply_rule("sub", 1.0, p)]


@handles("and")
def _and(interp: _Interpreter, eqn: Any, p: Any, q: Any) -> list[Any]:
    _boolean(eqn)
    return [apply_rule("mul", _operand(p), _operand(q))]


@handles("or")
def _or(interp: _Interpreter, eqn: Any, p: Any, q: Any) -> list[Any]:
    _boolean(eqn)
    return [apply_rule("maximum", _operand(p), _operand(q))]


@handles("xor")
def _xor(interp: _Interpreter, eqn: Any, p: Any, q: Any) -> list[Any]:
    _boolean(eqn)
    return [apply_rule("ne", _operand(p), _operand(q))]


@handles("convert_element_type")
def _convert_element_type(interp: _Interpreter, eqn: Any, x: Any) -> list[Any]:
    new_dtype = np.dtype(eqn.params["new_dtype"])
    if not np.issubdtype(new_dtype, np.floating):
        raise _unsupported(
            eqn,
            f"to {new_dtype} of a value that depends on the input is not supported: the result is "
            "piecewise constant (not differentiable) and jacacc traces real values only",
        )
    return [x]  # a traced predicate is already 1.0 / 0.0


@handles("copy", "copy_p", "device_put", "sharding_constraint", "optimization_barrier")
def _identity(interp: _Interpreter, eqn: Any, *operands: Any) -> list[Any]:
    # placement and scheduling hints: the values pass unchanged
    return list(operands[: len(eqn.outvars)])


# =========================================================================== select
def _pick(p: Any, a: Any, b: Any) -> Any:
    if a is b:
        return a
    if isinstance(p, Tracer):
        return apply_rule("where", p, a, b)
    return a if p else b


_PICK = np.frompyfunc(_pick, 3, 1)


@handles("select_n")
def _select_n(interp: _Interpreter, eqn: Any, which: Any, *cases: Any) -> list[Any]:
    if not _is_traced(which):  # data movement on the cases
        return _move(interp, eqn, (which, *cases), data=range(1, len(cases) + 1))
    if len(cases) != 2:
        raise _unsupported(eqn, f"with {len(cases)} cases and a traced selector is not supported (two cases are)")
    # select_n(p, case0, case1) is case1 where p holds
    return [_PICK(which, _objects(cases[1]), _objects(cases[0]))]


# =========================================================================== reductions
@handles("reduce_sum")
def _reduce_sum(interp: _Interpreter, eqn: Any, x: Any) -> list[Any]:
    axes = tuple(eqn.params["axes"])
    if any(x.shape[a] == 0 for a in axes):
        return [np.zeros(tuple(eqn.outvars[0].aval.shape))]
    # np.add.reduce on an object array starts from the first term: no 0.0 vertex
    return [np.add.reduce(x, axis=axes)] if axes else [x]


def _reduce_by(rule: str, empty: float) -> Handler:
    def handler(interp: _Interpreter, eqn: Any, x: Any) -> list[Any]:
        axes = tuple(eqn.params["axes"])
        if any(x.shape[a] == 0 for a in axes):
            return [np.full(tuple(eqn.outvars[0].aval.shape), empty)]
        kept = [d for d in range(x.ndim) if d not in axes]
        flat = np.transpose(x, kept + list(axes)).reshape([x.shape[d] for d in kept] + [-1])
        return [_fold(flat, _rule(rule), -1)]

    return handler


handles("reduce_max")(_reduce_by("maximum", -math.inf))
handles("reduce_min")(_reduce_by("minimum", math.inf))
handles("reduce_prod")(_reduce_by("mul", 1.0))


def _cumulative(rule: str) -> Handler:
    def handler(interp: _Interpreter, eqn: Any, x: Any) -> list[Any]:
        axis, reverse = eqn.params["axis"], eqn.params.get("reverse", False)
        values = np.moveaxis(x, axis, -1)
        if reverse:
            values = values[..., ::-1]
        out = np.empty(values.shape, dtype=object)
        if values.shape[-1]:
            acc = values[..., 0]
            out[..., 0] = acc
            for k in range(1, values.shape[-1]):
                acc = apply_rule(rule, acc, values[..., k])
                out[..., k] = acc
        if reverse:
            out = out[..., ::-1]
        return [np.moveaxis(out, -1, axis)]

    return handler


handles("cumsum")(_cumulative("add"))
handles("cumprod")(_cumulative("mul"))
handles("cummax")(_cumulative("maximum"))
handles("cummin")(_cumulative("minimum"))


@handles("dot_general")
def _dot_general(interp: _Interpreter, eqn: Any, lhs: Any, rhs: Any) -> list[Any]:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = _objects(lhs), _objects(rhs)
    lf = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    batch = [lhs.shape[d] for d in lb]
    b, k = math.prod(batch), math.prod(lhs.shape[d] for d in lc)
    m, n = math.prod(lhs.shape[d] for d in lf), math.prod(rhs.shape[d] for d in rf)
    left = np.transpose(lhs, [*lb, *lf, *lc]).reshape(b, m, k)
    right = np.transpose(rhs, [*rb, *rc, *rf]).reshape(b, k, n)
    shape = batch + [lhs.shape[d] for d in lf] + [rhs.shape[d] for d in rf]
    if k == 0:
        return [np.zeros(shape)]
    # products (b, m, k, n), summed over k from the first term on
    products = left[:, :, :, None] * right[:, None, :, :]
    return [np.add.reduce(products, axis=2).reshape(shape)]


# =========================================================================== data movement
def _move(interp: _Interpreter, eqn: Any, operands: Sequence[Any], data: Iterable[int]) -> list[Any]:
    """Run a data-movement primitive on index arrays: each data operand is replaced by
    the flat positions of its elements in one pool, the others (indices, selectors)
    must be constants; JAX's result says which pool element lands where."""
    data = set(data)
    pool: list[np.ndarray] = []
    index_operands = []
    offset = 0
    for k, value in enumerate(operands):
        if k in data:
            arr = _objects(value)
            index_operands.append(np.arange(offset, offset + arr.size, dtype=np.int64).reshape(arr.shape))
            pool.append(arr.ravel())
            offset += arr.size
        elif _is_traced(value):
            raise _unsupported(
                eqn,
                f"with a traced operand {k} (an index or selector) is not supported: the data movement would "
                "depend on the input values",
            )
        else:
            index_operands.append(value)
    params = dict(eqn.params)
    fill = math.nan
    if "fill_value" in params:  # gather: out-of-bounds positions get -1, then the fill value
        if params["fill_value"] is not None:
            fill = float(params["fill_value"])
        params["fill_value"] = -1
    flat = np.concatenate(pool) if pool else np.empty(0, dtype=object)
    results = []
    for positions in interp.bind(eqn, index_operands, params):
        out = np.empty(positions.shape, dtype=object)
        inside = positions >= 0
        out[inside] = flat[positions[inside]]
        out[~inside] = fill
        results.append(out)
    return results


def _movement(*data: int, all_data: bool = False) -> Handler:
    def handler(interp: _Interpreter, eqn: Any, *operands: Any) -> list[Any]:
        return _move(interp, eqn, operands, range(len(operands)) if all_data else data)

    return handler


for _names, _handler in (
    (("broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "rev", "slice",
      "dynamic_slice", "gather", "tile", "split", "unstack"), _movement(0)),
    (("pad", "dynamic_update_slice"), _movement(0, 1)),
    (("scatter",), _movement(0, 2)),
    (("concatenate", "stack"), _movement(all_data=True)),
):
    handles(*_names)(_handler)
del _names, _handler, _name, _rule_name


# =========================================================================== calls
@handles("jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
         "custom_vjp_call_jaxpr", "remat", "remat2", "checkpoint", inline=True)
def _call(interp: _Interpreter, eqn: Any, *operands: Any) -> list[Any]:
    # the primal is inlined; custom derivative rules are not used
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        if key in eqn.params:
            return interp.inline(eqn.params[key], operands)
    raise _unsupported(eqn, f"has no inner jaxpr among its parameters ({', '.join(eqn.params)})")


@handles("cond", inline=True)
def _cond(interp: _Interpreter, eqn: Any, index: Any, *operands: Any) -> list[Any]:
    if _is_traced(index):
        raise _unsupported(eqn, "(lax.cond / lax.switch) on a predicate that depends on the input is not "
                                "supported: data-dependent control flow; use jnp.where")
    branches = eqn.params["branches"]
    chosen = branches[int(np.clip(int(index), 0, len(branches) - 1))]
    return interp.inline(chosen, operands)


@handles("scan")
def _scan(interp: _Interpreter, eqn: Any, *operands: Any) -> list[Any]:
    # a fixed number of steps: unrolled, one inlined body per step
    p = eqn.params
    n_consts, n_carry, length = p["num_consts"], p["num_carry"], p["length"]
    consts, carry = list(operands[:n_consts]), list(operands[n_consts : n_consts + n_carry])
    xs = operands[n_consts + n_carry :]
    steps = range(length - 1, -1, -1) if p.get("reverse", False) else range(length)
    ys: list[list[Any]] = [[None] * length for _ in range(len(eqn.outvars) - n_carry)]
    for t in steps:
        out = interp.inline(p["jaxpr"], [*consts, *carry, *(x[t, ...] for x in xs)])
        carry = out[:n_carry]
        for k, y in enumerate(out[n_carry:]):
            ys[k][t] = y
    stacked = [
        np.stack([_objects(y) for y in column]) if any(_is_traced(y) for y in column) else np.stack(column)
        for column in ys
    ]
    return [*carry, *stacked]


@handles("while")
def _while(interp: _Interpreter, eqn: Any, *operands: Any) -> list[Any]:
    # unrolled while the loop condition is a constant (fori_loop, counters); a condition
    # that depends on the input is data-dependent control flow
    p = eqn.params
    n_cond, n_body = p["cond_nconsts"], p["body_nconsts"]
    cond_consts, body_consts = operands[:n_cond], operands[n_cond : n_cond + n_body]
    carry = list(operands[n_cond + n_body :])
    while True:
        (go,) = interp.inline(p["cond_jaxpr"], [*cond_consts, *carry])
        if _is_traced(go):
            raise _unsupported(eqn, "(lax.while_loop) with a condition that depends on the input is not "
                                    "supported: data-dependent control flow")
        if not bool(go):
            return carry
        carry = interp.inline(p["body_jaxpr"], [*body_consts, *carry])


# =========================================================================== the front end
def _x64(jax: Any) -> contextlib.AbstractContextManager[Any]:
    """JAX's scoped float64 switch (``jax.enable_x64(True)``; older JAX:
    ``jax.experimental.enable_x64()``)."""
    enable = getattr(jax, "enable_x64", None)
    if enable is not None:
        return enable(True)
    from jax.experimental import enable_x64  # pragma: no cover - older JAX

    return enable_x64()  # pragma: no cover


def from_jax(f: Callable[[Any], Any], x: Any) -> Traced:
    """Trace a JAX function of one array argument into a computational graph.

    The function's jaxpr (in float64) is interpreted on traced values by
    :func:`jacacc.tracer.trace`, scalarized: every element of every array is
    a vertex, as if the function had been written with scalar NumPy
    operations.  See the module notes for how primitives are handled.

    Parameters
    ----------
    f : callable
        ``f(x)`` written with ``jax.numpy`` / ``jax.lax``; it may return an
        array, a scalar or a pytree (tuple, list, dict) of them.
    x : array_like
        An example argument: a float, a list or an array of any shape.  Only
        its shape matters (the graph is valid at every point).

    Returns
    -------
    Traced
        Inputs are the elements of ``x`` in C order (``x0 … x{n-1}``),
        outputs the elements of the returned leaves in ``jax.tree_util`` order,
        each raveled in C order.  So ``traced.jacobian(x.ravel())`` is
        ``jax.jacfwd(f)(x)`` reshaped to ``(outputs, inputs)``.

    Raises
    ------
    UnsupportedOperationError
        A primitive with an input-dependent operand that has no handler (the
        message names it), an input-dependent index or predicate of control
        flow, or a conversion of an input-dependent value to an integer type.
    MissingExtraError
        JAX is not installed.

    Examples
    --------
    >>> import numpy as np, pytest
    >>> jax = pytest.importorskip("jax")
    >>> import jax.numpy as jnp
    >>> def f(x):
    ...     return jnp.where(x > 0.0, jnp.exp(x), 1.0 + x), jnp.sum(x ** 2)
    >>> traced = from_jax(f, np.zeros(2))
    >>> traced.n_inputs, traced.n_outputs
    (2, 3)
    >>> x = np.array([0.5, -1.0])
    >>> traced.jacobian(x).round(6)
    array([[ 1.648721,  0.      ],
           [ 0.      ,  1.      ],
           [ 1.      , -2.      ]])
    >>> with jax.enable_x64(True):
    ...     reference = np.vstack([np.asarray(j) for j in jax.jacfwd(f)(x)])
    >>> bool(np.allclose(traced.jacobian(x), reference))
    True
    """
    jax = require_extra("jax", "bench")
    point = np.asarray(x, dtype=float)
    if point.size == 0:
        raise TraceError(f"x has no elements (shape {point.shape}): there is nothing to differentiate")
    interp = _Interpreter(jax)
    with _x64(jax):
        closed = jax.make_jaxpr(f)(point)

    def interpreted(flat: np.ndarray) -> list[Any]:
        with _x64(jax):
            outputs = interp.run(closed.jaxpr, closed.consts, [flat.reshape(point.shape)])
        return [o if _is_traced(o) else np.asarray(o, dtype=float) for o in outputs]

    traced = trace(interpreted, point.size, unpack=False)
    traced.fun = f
    return traced
