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
``closed_call``, ``remat``) are inlined.  Any other primitive with a traced
operand is refused with an :class:`~jacacc.errors.UnsupportedOperationError`
naming it; equations whose results are never used are skipped.  Constants
JAX cannot hand to NumPy (PRNG keys of ``jax.random``) stay JAX arrays, so
random numbers drawn from a constant key are constants.

**Custom derivative rules** (``jax.custom_jvp`` / ``jax.custom_vjp``: ``relu``,
``softplus``, ``logaddexp``, ``log_sigmoid`` …) are honoured, as ``jax.jacfwd``
honours them: the primal code may have a kink (``max``, ``abs``) where the rule
says otherwise (``softplus'(0) = 1/2``).  JAX builds the rule's JVP jaxpr
(``jax.jvp`` of the call; for ``custom_vjp`` the transpose of its VJP), which
is interpreted on the *stopped* primals ``p = stop_gradient(x)`` and the
tangents ``t = tangent_seed(x)`` (value 0, partial 1); each output is
``primal + tangent``.  Every derivative path then runs through ``t``, and the
JVP is linear in ``t``, so the local partials are the rule's ``∂y/∂x`` as
symbolic expressions of the traced values, and the value is the primal's (the
stop_gradient edges are structural zeros, skipped by every evaluation).  (Where
the rule's derivative is not finite, ``0 * inf`` makes that output's value
NaN.)

**Size**: every element of every array is a vertex, so the graph grows with
the products a ``dot_general`` scalarizes (``x @ x.T`` of a 120×120 ``x``:
1.7 M multiplications).  The jaxpr is walked before anything is built and
the estimated edge count refused past ``max_edges`` (see :func:`from_jax`); the
count is checked again while interpreting (loops whose trip count the jaxpr
does not state).

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
import numbers
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from jacacc import ops
from jacacc.errors import DTypeError, SizeLimitError, TraceError, UnsupportedOperationError, require_extra
from jacacc.tracer import Traced, Tracer, apply_rule, trace

__all__ = ["DEFAULT_MAX_EDGES", "HANDLERS", "estimate_edges", "from_jax", "handles", "supported_primitives"]

#: :func:`from_jax`'s default edge budget.  A scalarized graph costs about 1.5 kB of
#: memory per edge while it is built (tape, networkx graph, symbolic partials; measured
#: on ``x @ x.T``), so 5 M edges is about 7 GB: a machine with 16-24 GiB builds it.
DEFAULT_MAX_EDGES = 5_000_000

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


def _is_extended(dtype: Any) -> bool:
    """A JAX dtype NumPy has no counterpart for (``key<fry>`` of ``jax.random.key``)."""
    import jax

    return bool(jax.dtypes.issubdtype(dtype, jax.dtypes.extended))


def _constant(value: Any, dtype: Any) -> Any:
    """A constant in the interpreter's form: a NumPy array, except that a PRNG key stays
    the JAX array it is (NumPy cannot hold one; JAX evaluates what uses it)."""
    return value if _is_extended(dtype) else np.asarray(value)


def _finish(value: Any, aval: Any) -> Any:
    """A handler's result in the interpreter's form: an object array holding at least
    one tracer (constants as floats), or a constant array of the jaxpr's dtype."""
    if not (isinstance(value, Tracer) or _is_traced(value)) and _is_extended(aval.dtype):
        return value
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
    """Evaluates jaxprs on traced and constant arrays (see the module notes).

    Parameters
    ----------
    jax : module
        The imported ``jax``.
    max_edges : int or None
        The edge budget checked while interpreting (``None``: none).
    """

    def __init__(self, jax: Any, max_edges: int | None = None) -> None:
        self.jax = jax
        self.literal = require_extra("jax.extend.core", "bench").Literal
        self.max_edges = max_edges
        #: estimated edges recorded so far (the running check of ``max_edges``)
        self.edges = 0
        #: tracers whose derivative is identically zero (stop_gradient and what is computed
        #: from such values only), by id; the dict keeps them alive so ids are not reused
        self.stopped: dict[int, Tracer] = {}
        #: the JVP jaxprs of custom-derivative calls, by (id of the equation, differentiated
        #: operands); the equation is kept so that its id stays its own (scan bodies repeat it)
        self.jvp_jaxprs: dict[tuple[int, tuple[int, ...]], tuple[Any, Any]] = {}

    def bind(self, eqn: Any, operands: Sequence[Any], params: dict[str, Any] | None = None) -> list[Any]:
        """Evaluate ``eqn``'s primitive with JAX on concrete ``operands``."""
        out = _bind(eqn, operands, params)
        return [_constant(o, v.aval.dtype) for o, v in zip(out, eqn.outvars, strict=True)]

    def run(self, jaxpr: Any, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        """The outputs of ``jaxpr`` (an open Jaxpr) on ``consts`` and ``args``."""
        env: dict[Any, Any] = {}

        def read(v: Any) -> Any:
            if isinstance(v, self.literal):
                return v.val if _is_extended(v.aval.dtype) else np.asarray(v.val, dtype=v.aval.dtype)
            return env[v]

        for var, value in zip(jaxpr.constvars, consts, strict=True):
            env[var] = _constant(value, var.aval.dtype)
        for var, value in zip(jaxpr.invars, args, strict=True):
            env[var] = _objects(value) if isinstance(value, Tracer) else value
        for eqn in _live_equations(jaxpr, self.literal):
            operands = [read(v) for v in eqn.invars]
            name = eqn.primitive.name
            traced = [_is_traced(v) for v in operands]
            if name in _INLINED or any(traced):
                handler = HANDLERS.get(name)
                if handler is None:
                    raise _unsupported(
                        eqn,
                        "is not supported by jacacc.from_jax with an operand that depends on the input "
                        f"(supported: {', '.join(supported_primitives())})",
                    )
                if name not in _INLINED:
                    # checked before the handler scalarizes: a dot_general too large to build
                    # is refused, not attempted
                    self.spend(_equation_edges(eqn, traced))
                results = handler(self, eqn, *operands)
                if self.stopped and name not in _INLINED and self.all_stopped(operands):
                    for value in results:
                        self.mark_stopped(value)
            else:
                results = self.bind(eqn, operands)
            for var, value in zip(eqn.outvars, results, strict=True):
                env[var] = _finish(value, var.aval)
        return [read(v) for v in jaxpr.outvars]

    def inline(self, inner: Any, args: Sequence[Any]) -> list[Any]:
        """Run a closed or open jaxpr found in an equation's parameters."""
        if hasattr(inner, "consts"):  # ClosedJaxpr
            return self.run(inner.jaxpr, inner.consts, args)
        return self.run(inner, (), args)

    # ---------------------------------------------------------------- the edge budget
    def spend(self, edges: int) -> None:
        """Count ``edges`` more; past ``max_edges`` raise :class:`SizeLimitError`."""
        self.edges += edges
        if self.max_edges is not None and self.edges > self.max_edges:
            raise _too_large(self.edges, self.max_edges, "while interpreting")

    # ---------------------------------------------------------------- zero derivatives
    def mark_stopped(self, value: Any) -> None:
        """Record the tracers in ``value`` as having a zero derivative."""
        if isinstance(value, Tracer):
            self.stopped[id(value)] = value
        elif _is_traced(value):
            for e in value.flat:
                if isinstance(e, Tracer):
                    self.stopped[id(e)] = e

    def all_stopped(self, operands: Sequence[Any]) -> bool:
        """Whether no tracer in ``operands`` carries a derivative (constants carry none)."""
        for value in operands:
            if _is_traced(value):
                for e in value.flat:
                    if isinstance(e, Tracer) and id(e) not in self.stopped:
                        return False
        return True

    def split(self, value: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(stop_gradient(x), tangent_seed(x))`` of a traced array, elementwise.

        The first has the value of ``x`` and no derivative, the second is 0 with
        derivative 1: the primal and tangent a custom rule's JVP is run on.  Constant
        elements (and those already without derivative) get tangent 0.0 and no vertex:
        a ``-inf`` mask entry must not become ``-inf - -inf``.
        """
        arr = _objects(value)
        primal = np.empty(arr.shape, dtype=object)
        tangent = np.empty(arr.shape, dtype=object)
        p_flat, t_flat = primal.reshape(-1), tangent.reshape(-1)
        for k, e in enumerate(arr.flat):
            if isinstance(e, Tracer) and id(e) not in self.stopped:
                p = apply_rule("stop_gradient", e)
                self.stopped[id(p)] = p
                p_flat[k], t_flat[k] = p, apply_rule("tangent_seed", e)
            else:
                p_flat[k], t_flat[k] = e, 0.0
        return primal, tangent


def _bind(eqn: Any, operands: Sequence[Any], params: dict[str, Any] | None = None) -> list[Any]:
    """``eqn``'s primitive bound by JAX to ``operands`` (arrays or JAX tracers): its
    results as a list, as JAX's own ``eval_jaxpr`` binds it."""
    prim = eqn.primitive
    bind_params = prim.get_bind_params(eqn.params if params is None else params)
    subfuns: Sequence[Any] = ()
    if isinstance(bind_params, tuple):  # older JAX: (subfuns, params)
        subfuns, bind_params = bind_params
    out = prim.bind(*subfuns, *operands, **bind_params)
    return list(out) if prim.multiple_results else [out]


def _too_large(edges: int, budget: int, when: str) -> SizeLimitError:
    return SizeLimitError(
        f"jacacc.from_jax: the scalarized graph would have about {edges:,} edges ({when}), over the budget "
        f"max_edges={budget:,} (about {1.5e-6 * edges:.1f} GB to build); every array element becomes a vertex "
        "here: for array-level derivatives use jacacc.tensor, or pass a larger max_edges"
    )


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
#: JAX primitive -> operation of the table (jacacc.ops), for the primitives that are one
#: elementwise operation; the handlers below take precedence over these
_ELEMENTWISE = {prim: name for prim, name in ops.jax_primitives().items() if prim not in ("select_n",)}


def _elementwise(rule: str) -> Handler:
    def handler(interp: _Interpreter, eqn: Any, *operands: Any) -> list[Any]:
        return [apply_rule(rule, *map(_operand, operands))]

    handler.__name__ = f"_{rule}"
    return handler


for _name, _rule_name in _ELEMENTWISE.items():
    handles(_name)(_elementwise(_rule_name))


@handles("stop_gradient")
def _stop_gradient(interp: _Interpreter, eqn: Any, x: Any) -> list[Any]:
    # the rule's vertex (value passes, partial 0), remembered as derivative-free: a custom
    # rule applied to it needs no JVP
    out = apply_rule("stop_gradient", _operand(x))
    interp.mark_stopped(out)
    return [out]


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
    # JAX's clamp has derivative [lo < x < hi] (0 at either bound): maximum(lo, x) has
    # partial [x > lo] in x, minimum(hi, m) partial [m < hi] in m
    return [apply_rule("minimum", _operand(hi), apply_rule("maximum", _operand(lo), _operand(x)))]


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


@handles("sort")
def _sort(interp: _Interpreter, eqn: Any, *operands: Any) -> list[Any]:
    # sorting by constant keys (jax.random.permutation: random bits) is a fixed
    # permutation of the operands carried along: data movement on index arrays
    n_keys = eqn.params.get("num_keys", 1)
    if any(_is_traced(v) for v in operands[:n_keys]):
        raise _unsupported(eqn, "with sort keys that depend on the input is not supported: the order would "
                                "depend on the input values (jnp.sort, argsort, median …)")
    carried = [_objects(v) if _is_traced(v) else None for v in operands]
    index_operands = [
        np.arange(v.size, dtype=np.int64).reshape(v.shape) if v is not None else operands[k]
        for k, v in enumerate(carried)
    ]
    results = interp.bind(eqn, index_operands)
    return [r if v is None else v.ravel()[r] for v, r in zip(carried, results, strict=True)]


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
_CUSTOM = ("custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr")


def _inner_jaxpr(eqn: Any) -> Any:
    """The (closed or open) jaxpr a call-like equation runs: its primal for a custom rule."""
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        if key in eqn.params:
            return eqn.params[key]
    raise _unsupported(eqn, f"has no inner jaxpr among its parameters ({', '.join(eqn.params)})")


@handles("jit", "pjit", "closed_call", "core_call", "remat", "remat2", "checkpoint", inline=True)
def _call(interp: _Interpreter, eqn: Any, *operands: Any) -> list[Any]:
    return interp.inline(_inner_jaxpr(eqn), operands)


def _custom_jvp_jaxpr(interp: _Interpreter, eqn: Any, diff: tuple[int, ...]) -> Any:
    """The JVP of a ``custom_jvp_call`` / ``custom_vjp_call`` equation as a closed jaxpr,
    built by JAX with the user's rule: inputs ``(*others, *primals, *tangents)`` (the
    operands at positions ``diff`` are differentiated, the others passed through),
    outputs ``(*primal outputs, *tangent outputs)``."""
    key = (id(eqn), diff)
    cached = interp.jvp_jaxprs.get(key)
    if cached is not None:
        return cached[1]
    jax = interp.jax
    avals = [jax.ShapeDtypeStruct(tuple(v.aval.shape), v.aval.dtype) for v in eqn.invars]
    others = [k for k in range(len(avals)) if k not in diff]

    def jvp(other_values: list[Any], primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
        def call(*differentiated: Any) -> list[Any]:
            args: list[Any] = [None] * len(avals)
            for k, value in zip(others, other_values, strict=True):
                args[k] = value
            for k, value in zip(diff, differentiated, strict=True):
                args[k] = value
            return _bind(eqn, args)

        if eqn.primitive.name == "custom_jvp_call":
            out, tangent_out = jax.jvp(call, tuple(primals), tuple(tangents))
            return list(out), list(tangent_out)
        # custom_vjp: forward mode is refused by JAX, so the tangent is the transpose of the
        # user's VJP (linear in the cotangent): J t = (v -> J^T v)^T t
        out, vjp = jax.vjp(call, *primals)
        out_avals = [jax.ShapeDtypeStruct(o.shape, o.dtype) for o in out]
        try:
            (tangent_out,) = jax.linear_transpose(vjp, out_avals)(tuple(tangents))
        except Exception:  # noqa: BLE001 - a bwd rule JAX cannot transpose (nonlinear primitives)
            # the Jacobian by reverse mode (one VJP per output element), contracted with t
            jac = jax.jacrev(call, argnums=tuple(range(len(primals))))(*primals)
            tangent_out = [
                sum(jax.numpy.tensordot(jac[i][k], t, axes=np.ndim(t)) for k, t in enumerate(tangents))
                for i in range(len(out))
            ]
        return list(out), list(tangent_out)

    closed = jax.make_jaxpr(jvp)([avals[k] for k in others], [avals[k] for k in diff], [avals[k] for k in diff])
    interp.jvp_jaxprs[key] = (eqn, closed)
    return closed


@handles(*_CUSTOM, inline=True)
def _custom_call(interp: _Interpreter, eqn: Any, *operands: Any) -> list[Any]:
    # JAX's custom rule gives the derivative, as jax.jacfwd would use it (module notes):
    # softplus'(0) is 1/2 by its rule, while its primal max(x, 0) + log1p(exp(-|x|)) would
    # give the kink's one-sided 1
    diff = tuple(
        k for k, (value, var) in enumerate(zip(operands, eqn.invars, strict=True))
        if _is_traced(value) and np.issubdtype(np.dtype(var.aval.dtype), np.floating)
        and not interp.all_stopped([value])
    )
    if not diff:  # no derivative flows in (constants, or the primal inside another rule's JVP)
        results = interp.inline(_inner_jaxpr(eqn), operands)
        if interp.stopped:
            for value in results:
                interp.mark_stopped(value)
        return results
    closed = _custom_jvp_jaxpr(interp, eqn, diff)
    split = {k: interp.split(operands[k]) for k in diff}
    others = [operands[k] for k in range(len(operands)) if k not in split]
    outs = interp.inline(closed, [*others, *(split[k][0] for k in diff), *(split[k][1] for k in diff)])
    n = len(eqn.outvars)
    results = []
    for value, tangent in zip(outs[:n], outs[n:], strict=True):
        if _is_traced(tangent):
            # value + (a tangent that is 0 with the rule's partials): one add vertex
            value = apply_rule("add", _operand(value), tangent)
        results.append(value)
    return results


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


# =========================================================================== size estimate
def _size(var: Any) -> int:
    return math.prod(getattr(var.aval, "shape", ()))


#: primitives that make no vertex of their own (data movement, conversions, hints)
_FREE = {
    "broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose", "rev", "slice", "dynamic_slice",
    "gather", "tile", "split", "unstack", "pad", "dynamic_update_slice", "scatter", "concatenate", "stack",
    "convert_element_type", "copy", "copy_p", "device_put", "sharding_constraint", "optimization_barrier",
    "sort",  # by constant keys only (a traced key is refused): a permutation
}


def _equation_edges(eqn: Any, traced: Sequence[bool]) -> int:
    """About how many edges the interpreter records for one non-call equation whose
    operands are traced where ``traced`` says (the tracer's one vertex per element, one
    edge per traced operand)."""
    name = eqn.primitive.name
    if not any(traced) or name in _FREE:
        return 0
    out = sum(_size(v) for v in eqn.outvars)
    if name == "dot_general":
        (lc, _), (lb, _) = eqn.params["dimension_numbers"]
        lhs = eqn.invars[0].aval.shape
        k = math.prod(lhs[d] for d in lc)
        # out * k products (an edge per traced factor), out * (k - 1) additions (two edges)
        return out * (k * sum(traced[:2]) + 2 * max(k - 1, 0))
    if name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod"):
        return 2 * _size(eqn.invars[0])  # a fold: one binary vertex per term
    if name in ("cumsum", "cumprod", "cummax", "cummin"):
        return 2 * _size(eqn.invars[0])
    if name == "select_n":
        return 3 * out if traced[0] else 0  # a where vertex, or data movement
    if name == "clamp":
        return 4 * out  # maximum, then minimum
    if name in ("max", "min"):
        return out * (2 * sum(traced) + 4)  # both orders, halved, added (_balanced)
    if name == "is_finite":
        return 2 * out  # abs, then a comparison
    return out * max(1, sum(traced))


def _jaxpr_edges(jaxpr: Any, traced_in: Sequence[bool], literal: type) -> tuple[int, list[bool]]:
    """Estimated edges of interpreting the open ``jaxpr`` with inputs traced where
    ``traced_in`` says, and which of its outputs are traced.

    A forward pass over the equations: an equation with no traced operand is evaluated
    by JAX and costs nothing; calls are estimated from their inner jaxpr, scan bodies
    times their length, a while body once (its trip count is checked while running).
    """
    traced: set[Any] = {v for v, t in zip(jaxpr.invars, traced_in, strict=True) if t}
    total = 0

    def is_traced(v: Any) -> bool:
        return not isinstance(v, literal) and v in traced

    for eqn in _live_equations(jaxpr, literal):
        flags = [is_traced(v) for v in eqn.invars]
        if not any(flags):
            continue
        edges, out_flags = _equation_estimate(eqn, flags, literal)
        total += edges
        traced.update(v for v, t in zip(eqn.outvars, out_flags, strict=True) if t)
    return total, [is_traced(v) for v in jaxpr.outvars]


def _open(inner: Any) -> Any:
    return inner.jaxpr if hasattr(inner, "consts") else inner


def _loop_estimate(body: Any, before: list[bool], carry: list[bool], after: list[bool],
                   literal: type) -> tuple[int, list[bool]]:
    """One loop body's edges and its outputs' tracedness (inputs ``before + carry +
    after``), with the carry's tracedness at its fixed point: a carry is traced once
    some step makes it so."""
    while True:
        edges, out = _jaxpr_edges(body, [*before, *carry, *after], literal)
        grown = [c or o for c, o in zip(carry, out[: len(carry)], strict=True)]
        if grown == carry:
            return edges, out
        carry = grown


def _equation_estimate(eqn: Any, flags: list[bool], literal: type) -> tuple[int, list[bool]]:
    """Edges of one equation with some traced operand, and its outputs' tracedness."""
    name, p = eqn.primitive.name, eqn.params
    n_out = len(eqn.outvars)
    if name == "scan":
        n_consts, n_carry = p["num_consts"], p["num_carry"]
        consts, carry, xs = flags[:n_consts], flags[n_consts:n_consts + n_carry], flags[n_consts + n_carry:]
        edges, out = _loop_estimate(_open(p["jaxpr"]), consts, carry, xs, literal)
        return edges * p["length"], out
    if name == "while":
        n_cond, n_body = p["cond_nconsts"], p["body_nconsts"]
        body_consts, carry = flags[n_cond:n_cond + n_body], flags[n_cond + n_body:]
        # the trip count is not in the jaxpr: one step here, the rest counted while running
        return _loop_estimate(_open(p["body_jaxpr"]), body_consts, carry, [], literal)
    if name == "cond":
        results = [_jaxpr_edges(_open(b), flags[1:], literal) for b in p["branches"]]
        return max(e for e, _ in results), [any(col) for col in zip(*(o for _, o in results), strict=True)]
    if name in _CUSTOM:
        edges, out = _jaxpr_edges(_open(_inner_jaxpr(eqn)), flags, literal)
        # the rule's JVP: the primal, a tangent about as large, the stop_gradient and seed vertices
        return 3 * edges + 3 * sum(_size(v) for v, f in zip(eqn.invars, flags, strict=True) if f), out
    if name in _INLINED:
        return _jaxpr_edges(_open(_inner_jaxpr(eqn)), flags, literal)
    return _equation_edges(eqn, flags), [True] * n_out


def estimate_edges(f: Callable[[Any], Any], x: Any) -> int:
    """Estimate the edge count of ``from_jax(f, x)``'s graph without building it.

    Walks the jaxpr (:func:`jax.make_jaxpr`, float64): each equation that
    depends on the input costs about one edge per traced operand and result
    element; a ``dot_general`` its multiply-adds; calls their inner jaxprs,
    scans their body times the length.  Constant parts cost nothing.

    Parameters
    ----------
    f : callable
        As for :func:`from_jax`.
    x : array_like
        As for :func:`from_jax`.

    Returns
    -------
    int

    Examples
    --------
    >>> import numpy as np, pytest
    >>> _ = pytest.importorskip("jax")
    >>> estimate_edges(lambda x: x @ x.T, np.ones((120, 120))) > 6_000_000
    True
    >>> from_jax(lambda x: x @ x.T, np.ones((3, 3))).graph.n_edges <= estimate_edges(lambda x: x @ x.T, np.ones((3, 3)))
    True
    """
    jax = require_extra("jax", "bench")
    point = _real_point(x)
    with _x64(jax):
        closed = jax.make_jaxpr(f)(point)
    return _closed_estimate(closed)


def _closed_estimate(closed: Any) -> int:
    literal = require_extra("jax.extend.core", "bench").Literal
    edges, out = _jaxpr_edges(closed.jaxpr, [True], literal)
    # an output copy vertex per traced output element at most
    return edges + sum(_size(v) for v, t in zip(closed.jaxpr.outvars, out, strict=True) if t)


# =========================================================================== the front end
def _x64(jax: Any) -> contextlib.AbstractContextManager[Any]:
    """JAX's scoped float64 switch (``jax.enable_x64(True)``; older JAX:
    ``jax.experimental.enable_x64()``)."""
    enable = getattr(jax, "enable_x64", None)
    if enable is not None:
        return enable(True)
    from jax.experimental import enable_x64  # pragma: no cover - older JAX

    return enable_x64()  # pragma: no cover


def _real_point(x: Any) -> np.ndarray:
    """``x`` as a float64 array; a non-real dtype is refused naming it (a string would
    otherwise reach JAX, or ``'1.5'`` be read as a number)."""
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise DTypeError(f"jacacc.from_jax: x must be an array of real numbers: {exc}") from None
    kind = arr.dtype.kind
    if kind == "c":
        raise DTypeError(f"jacacc.from_jax: x has dtype {arr.dtype} (complex); jacacc computes real Jacobians: "
                         "pass real numbers (e.g. the real part)")
    if kind == "O" and all(isinstance(e, numbers.Real) for e in arr.flat):
        kind = "f"  # an object array of Python numbers
    if kind not in "biuf":
        held = f" holding e.g. {arr.flat[0]!r:.40}" if arr.size else ""
        raise DTypeError(f"jacacc.from_jax: x has dtype {arr.dtype}{held}; x must hold real numbers "
                         "(bool, integer or floating dtype)")
    point = arr.astype(float)
    if point.size == 0:
        raise TraceError(f"x has no elements (shape {point.shape}): there is nothing to differentiate")
    return point


def from_jax(f: Callable[[Any], Any], x: Any, *, max_edges: int | None = DEFAULT_MAX_EDGES) -> Traced:
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
        An example argument: a float, a list or an array of any shape of real
        numbers (bool, integer or floating dtype).  Only its shape matters
        (the graph is valid at every point).
    max_edges : int or None, optional
        The budget on the graph's size, in edges (default
        :data:`DEFAULT_MAX_EDGES`, 5 000 000: about 7 GB while it is built, at
        about 1.5 kB per edge).  The jaxpr is walked first and the estimated
        edge count (:func:`estimate_edges`: a ``dot_general`` of ``m×k`` by
        ``k×n`` costs about ``4mkn``) compared with it before any vertex is
        made; the count is checked again while interpreting, for loops whose
        trip count is known only then.  ``None`` disables the check.

    Returns
    -------
    Traced
        Inputs are the elements of ``x`` in C order (``x0 … x{n-1}``),
        outputs the elements of the returned leaves in ``jax.tree_util`` order,
        each raveled in C order.  So ``traced.jacobian(x.ravel())`` is
        ``jax.jacfwd(f)(x)`` reshaped to ``(outputs, inputs)``, custom
        derivative rules (``jax.custom_jvp`` / ``jax.custom_vjp``) included.

    Raises
    ------
    SizeLimitError
        The graph would exceed ``max_edges`` (the message gives both); for
        array-level derivatives use :mod:`jacacc.tensor`.
    DTypeError
        ``x`` is not real: complex, strings, objects other than numbers (the
        message names the dtype).
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
    if max_edges is not None and (isinstance(max_edges, bool) or not isinstance(max_edges, numbers.Integral)
                                  or max_edges < 0):
        raise TraceError(f"max_edges must be a non-negative integer or None, got {max_edges!r}")
    point = _real_point(x)
    interp = _Interpreter(jax, None if max_edges is None else int(max_edges))
    with _x64(jax):
        closed = jax.make_jaxpr(f)(point)
    if max_edges is not None:
        estimate = _closed_estimate(closed)
        if estimate > max_edges:
            raise _too_large(estimate, int(max_edges), "estimated from the jaxpr")

    def interpreted(flat: np.ndarray) -> list[Any]:
        with _x64(jax):
            outputs = interp.run(closed.jaxpr, closed.consts, [flat.reshape(point.shape)])
        return [o if _is_traced(o) else np.asarray(o, dtype=float) for o in outputs]

    traced = trace(interpreted, point.size, unpack=False)
    traced.fun = f
    return traced
