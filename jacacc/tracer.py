"""Operator-overloading tracer: a Python function → a computational graph.

:func:`trace` runs a scalar numeric function once on *tracer* values.  Every
arithmetic operation, NumPy ufunc or :mod:`jacacc.tracer` function applied to a
tracer is looked up in the rules table (:mod:`jacacc.rules`) and recorded as a
vertex of the computational graph of paper 003 §2: one vertex per program
variable, an edge ``u → v`` for each operand ``u`` of ``v``, labelled with the
local partial ∂v/∂u as a symbolic :class:`~jacacc.partials.Expr` over node values.
The result, :class:`Traced`, evaluates the function, the partials (vectorized
over a batch of points) and the Jacobian.

Tracing is symbolic: no numbers flow during the trace, so the graph is valid at
every point, and anything that needs a value — ``if x > 0``, ``float(x)``,
``math.sin(x)`` — raises :class:`~jacacc.errors.UnsupportedOperationError`.
Write branches with ``np.maximum``/``np.minimum``/``np.abs`` instead, whose
partials are Iverson brackets.

Graph conventions (see also :mod:`jacacc.graph`):

* node names: inputs ``x0 … x{n-1}``, outputs ``y0 … y{m-1}`` in output order,
  intermediates ``v1, v2, …`` in creation (hence topological) order;
* node attributes ``op`` (rule name, or ``"input"``, ``"copy"``, ``"const"``)
  and ``args`` (operand node names or float constants, in operand order);
* constants are folded into partials and never become vertices;
* an operand used twice by one operation (``x*x``) gives one edge whose
  partial is the sum (``2*x``);
* an output is its own vertex when it is an intermediate that nothing else
  uses; otherwise (an input, a value used later, a value returned twice, a
  constant) it is a copy vertex with partial 1 (a constant output has no
  in-edge at all);
* only the live part (what reaches an output) is kept.

Examples
--------
>>> import numpy as np
>>> f = trace(lambda x: [x[0] * np.sin(x[1]), np.exp(x[0])], 2)
>>> f.graph
CompGraph(inputs=2, intermediates=1, outputs=2, edges=4, partials='symbolic')
>>> [(u, v, str(f.graph.partial(u, v))) for u, v in f.graph.edges]
[('x0', 'y0', 'v1'), ('x0', 'y1', 'y1'), ('x1', 'v1', 'cos(x1)'), ('v1', 'y0', 'x0')]
>>> f([0.0, 2.0])
array([0., 1.])
>>> f.reference_jacobian([1.0, 0.0])
array([[0.        , 1.        ],
       [2.71828183, 0.        ]])
"""

from __future__ import annotations

import inspect
import numbers
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from jacacc.errors import TraceError, UnsupportedOperationError
from jacacc.graph import CompGraph, _digraph, gc_paused, real_array, reference_jacobian
from jacacc.partials import Const, Expr, Var
from jacacc.rules import RULES, Rule, get_rule

__all__ = ["TraceError", "TraceSignatureError", "Traced", "Tracer", "apply_rule", "trace"]

Node = Hashable


# =========================================================================== the tape
class _Tape:
    """The operations recorded during one :func:`trace` call.

    Entry ``i`` is the vertex created ``i``-th: the first ``n_inputs`` are the
    inputs (rule ``None``), then one entry per operation, so creation order is
    a topological order.  ``args`` holds :class:`Tracer` objects (operands that
    are vertices) and floats (constants).
    """

    __slots__ = ("n_inputs", "rules", "args", "active")

    def __init__(self, n_inputs: int) -> None:
        self.n_inputs = n_inputs
        self.rules: list[Rule | None] = [None] * n_inputs
        self.args: list[tuple[Any, ...]] = [()] * n_inputs
        self.active = True

    def record(self, rule: Rule, args: tuple[Any, ...]) -> Tracer:
        self.rules.append(rule)
        self.args.append(args)
        return Tracer(self, len(self.rules) - 1)


def _bad_value(what: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"{what} of a traced value is not supported: tracing is symbolic, so the value is not known "
        "and the graph must not depend on it (data-dependent control flow). Use np.maximum, "
        "np.minimum or np.abs for branches, and NumPy functions (or those of the module jacacc.tracer, "
        "`from jacacc.tracer import sin`) instead of the math module."
    )


def _comparison(symbol: str, name: str) -> Callable[[Tracer, Any], Any]:
    def compare(self: Tracer, other: Any) -> Any:
        if not isinstance(other, (Tracer, numbers.Number, np.ndarray)):
            return NotImplemented
        raise UnsupportedOperationError(
            f"comparison {symbol!r} ({name}) involving a traced value is not supported: tracing is "
            "symbolic, so branching on values (data-dependent control flow) cannot be recorded. "
            "Use np.maximum / np.minimum / np.abs, whose partials are Iverson brackets. "
            "(np.maximum and np.minimum on an object *array* of traced values compare elements; "
            "use `from jacacc.tracer import maximum, minimum` on arrays.)"
        )

    compare.__name__ = f"__{name}__"
    return compare


def _unsupported_binary(name: str) -> Callable[..., Any]:
    def method(self: Tracer, *other: Any) -> Any:
        raise UnsupportedOperationError(
            f"operation {name!r} on a traced value is not supported: it has no derivative rule "
            "(it is piecewise constant or not a real function)"
        )

    method.__name__ = name
    return method


class Tracer:
    """A value in a function being traced: one vertex of the graph.

    Supports ``+ - * / **``, unary ``-``/``+``, ``abs()`` with Python and
    NumPy numbers on either side, NumPy ufuncs with a rule in
    :data:`jacacc.rules.RULES` (``np.sin(t)``, ``np.maximum(t, 0.0)``,
    ``scipy.special.erf(t)``) and methods named after them (``t.sin()``) —
    which NumPy calls on the elements of object arrays, so ``np.sin(x)``,
    ``np.sum(x)`` and ``x @ w`` work on the object array ``x`` of tracers.

    Anything that needs a value raises
    :class:`~jacacc.errors.UnsupportedOperationError`: ``bool(t)``,
    comparisons, ``int(t)``, ``float(t)``.

    Examples
    --------
    >>> f = trace(lambda x: (2 * x[0] + 1).exp(), 1)
    >>> [str(f.graph.partial(u, v)) for u, v in f.graph.edges]
    ['2', '1', 'y0']
    """

    __slots__ = ("_tape", "_index")

    def __init__(self, tape: _Tape, index: int) -> None:
        self._tape = tape
        self._index = index

    # ---------------------------------------------------------------- arithmetic
    def __add__(self, other: Any) -> Any:
        return _binary(_ADD, self, other)

    def __radd__(self, other: Any) -> Any:
        return _binary(_ADD, other, self)

    def __sub__(self, other: Any) -> Any:
        return _binary(_SUB, self, other)

    def __rsub__(self, other: Any) -> Any:
        return _binary(_SUB, other, self)

    def __mul__(self, other: Any) -> Any:
        return _binary(_MUL, self, other)

    def __rmul__(self, other: Any) -> Any:
        return _binary(_MUL, other, self)

    def __truediv__(self, other: Any) -> Any:
        return _binary(_DIV, self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _binary(_DIV, other, self)

    def __pow__(self, other: Any, modulo: Any = None) -> Any:
        if modulo is not None:
            raise UnsupportedOperationError(
                "operation 'pow' with a modulus on a traced value is not supported"
            )
        return _binary(_POW, self, other)

    def __rpow__(self, other: Any) -> Any:
        return _binary(_POW, other, self)

    def __neg__(self) -> Tracer:
        return _record(_NEG, (self,))

    def __pos__(self) -> Tracer:
        return _record(_POS, (self,))

    def __abs__(self) -> Tracer:
        return _record(_ABS, (self,))

    def conjugate(self) -> Tracer:
        """The value itself: traced values are real (NumPy's object loops of
        ``np.conj``/``np.vdot`` call this)."""
        return self

    # ---------------------------------------------------------------- NumPy protocol
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """Dispatch ``np.sin(t)``, ``np.maximum(t, 0.0)``, ``float_array * t``
        (elementwise) ... to the rules table by the ufunc's name."""
        name = getattr(ufunc, "__name__", repr(ufunc))
        if method != "__call__":
            raise UnsupportedOperationError(
                f"ufunc method {name}.{method} with a traced operand is not supported; "
                f"apply {name} elementwise, or reduce an object array of traced values "
                "(np.sum(x) on an object array works)"
            )
        if kwargs:
            raise UnsupportedOperationError(
                f"ufunc {name} with keyword argument(s) {', '.join(sorted(kwargs))} on a traced operand "
                "is not supported"
            )
        rule = get_rule(name)  # raises UnsupportedOperationError naming the ufunc
        if len(inputs) != rule.arity:
            raise UnsupportedOperationError(
                f"ufunc {name} with {len(inputs)} operands does not match rule {rule.name}"
            )
        return _apply(rule, inputs)

    # ---------------------------------------------------------------- values are unknown
    def __bool__(self) -> bool:
        raise _bad_value("bool() (truth value, as in `if`/`while`/`and`/`or`)")

    def __float__(self) -> float:
        raise _bad_value("float()")

    def __int__(self) -> int:
        raise _bad_value("int()")

    def __index__(self) -> int:
        raise _bad_value("index (int conversion)")

    def __complex__(self) -> complex:
        raise _bad_value("complex()")

    def __round__(self, ndigits: Any = None) -> Any:
        raise _bad_value("round()")

    def __trunc__(self) -> Any:
        raise _bad_value("trunc()")

    def __floor__(self) -> Any:
        raise _bad_value("floor()")

    def __ceil__(self) -> Any:
        raise _bad_value("ceil()")

    __lt__ = _comparison("<", "lt")
    __le__ = _comparison("<=", "le")
    __gt__ = _comparison(">", "gt")
    __ge__ = _comparison(">=", "ge")
    __eq__ = _comparison("==", "eq")  # type: ignore[assignment]
    __ne__ = _comparison("!=", "ne")  # type: ignore[assignment]
    __hash__ = object.__hash__  # by identity, so tracers may still be dict keys

    __floordiv__ = __rfloordiv__ = _unsupported_binary("floor_divide")
    __mod__ = __rmod__ = _unsupported_binary("remainder")
    __divmod__ = __rdivmod__ = _unsupported_binary("divmod")

    def __repr__(self) -> str:
        rule = self._tape.rules[self._index]
        what = "input" if rule is None else rule.name
        return f"<Tracer #{self._index} ({what})>"


def _unary_method(rule: Rule, name: str) -> Callable[..., Any]:
    def method(self: Tracer, *others: Any) -> Any:
        return _apply(rule, (self, *others))

    method.__name__ = name
    method.__doc__ = f"``{rule.name}`` of this traced value (NumPy's object loops call ``x.{name}()``)."
    return method


# =========================================================================== recording
def _operand(value: Any) -> Tracer | float | None:
    """A tracer or a constant float; ``None`` when ``value`` is neither."""
    if isinstance(value, Tracer):
        if not value._tape.active:
            raise TraceError(
                "a traced value was used after its trace finished (it leaked out of the traced "
                "function, e.g. through a global or a closure)"
            )
        return value
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, np.ndarray) and value.shape == ():
        return _operand(value.item()) if value.dtype == object else float(value)
    if isinstance(value, numbers.Number):  # complex
        raise UnsupportedOperationError(f"complex constant {value!r} in a traced function is not supported")
    return None


def _record(rule: Rule, operands: tuple[Any, ...]) -> Any:
    """Record ``rule(*operands)``; fold it to a float when no operand is traced."""
    args = []
    for value in operands:
        op = _operand(value)
        if op is None:
            raise UnsupportedOperationError(
                f"operation {rule.name!r} on a {type(value).__name__} ({value!r}) is not supported in a "
                "traced function; operands are traced values and real numbers"
            )
        args.append(op)
    tapes = {id(a._tape): a._tape for a in args if isinstance(a, Tracer)}
    if not tapes:
        return float(rule.forward(*args))  # a constant: no vertex
    if len(tapes) > 1:
        raise TraceError(f"operation {rule.name!r} mixes values of different traces")
    (tape,) = tapes.values()
    return tape.record(rule, tuple(args))


def _binary(rule: Rule, a: Any, b: Any) -> Any:
    # Arrays and unknown types answer NotImplemented so that Python asks the
    # other operand: an ndarray then calls the ufunc, which comes back through
    # Tracer.__array_ufunc__ and is applied elementwise.
    if not (_is_scalar_operand(a) and _is_scalar_operand(b)):
        return NotImplemented
    return _record(rule, (a, b))


def _is_scalar_operand(value: Any) -> bool:
    return isinstance(value, (Tracer, numbers.Number)) or (
        isinstance(value, np.ndarray) and value.shape == ()
    )


def _is_array(value: Any) -> bool:
    return isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.shape != ())


def _apply(rule: Rule, operands: Sequence[Any]) -> Any:
    """Apply ``rule`` to tracers, numbers or arrays of them (elementwise, broadcast)."""
    if not any(_is_array(v) for v in operands):
        return _record(rule, tuple(operands))
    arrays = [np.asarray(v) if _is_array(v) else v for v in operands]
    if not any(isinstance(v, Tracer) or (isinstance(v, np.ndarray) and v.dtype == object) for v in arrays):
        return rule.forward(*arrays)  # plain numeric arrays: no tracing involved
    elementwise = np.frompyfunc(lambda *xs: _record(rule, xs), rule.arity, 1)
    return elementwise(*[_object_array(v) for v in arrays])


def _object_array(value: Any) -> np.ndarray:
    # A bare Tracer handed to the frompyfunc ufunc would dispatch right back to
    # Tracer.__array_ufunc__; inside an object array it is just an element.
    if isinstance(value, np.ndarray):
        return value.astype(object, copy=False)
    wrapped = np.empty((), dtype=object)
    wrapped[()] = value
    return wrapped


def apply_rule(name: str, *operands: Any) -> Any:
    """Apply the rule called ``name`` (any name :func:`jacacc.rules.get_rule`
    accepts) to tracers, numbers, or arrays of them.

    This is how rules registered after import are used; the built-in ones also
    have module-level functions (:func:`sin`, :func:`maximum`, ...).

    Examples
    --------
    >>> apply_rule("hypot", 3.0, 4.0)
    5.0
    """
    rule = get_rule(name)
    if len(operands) != rule.arity:
        raise TypeError(f"{rule.name} takes {rule.arity} operand(s), got {len(operands)}")
    return _apply(rule, operands)


_ADD, _SUB, _MUL, _DIV = get_rule("add"), get_rule("sub"), get_rule("mul"), get_rule("div")
_POW, _NEG, _POS, _ABS = get_rule("pow"), get_rule("neg"), get_rule("pos"), get_rule("abs")

# Builtins that a module-level function must not shadow inside this module.
_BUILTIN_NAMES = {"abs", "pow"}


def _make_function(rule: Rule, name: str) -> Callable[..., Any]:
    def function(*operands: Any) -> Any:
        if len(operands) != rule.arity:
            raise TypeError(f"{name} takes {rule.arity} operand(s), got {len(operands)}")
        return _apply(rule, operands)

    function.__name__ = function.__qualname__ = name
    function.__module__ = __name__
    function.__doc__ = (
        f"``{rule.name}`` on traced values, numbers or arrays of them (elementwise).\n\n"
        f"Partial(s): {rule.doc}."
    )
    return function


def _install_rule_functions() -> None:
    """Module functions ``sin``, ``maximum``, ... and Tracer methods ``t.sin()``
    for every rule in the table, under its name and aliases."""
    for rule in RULES.values():
        for name in (rule.name, *rule.aliases):
            if not name.isidentifier():
                continue
            if name not in _BUILTIN_NAMES and name not in globals():
                globals()[name] = _make_function(rule, name)
                __all__.append(name)
            if not hasattr(Tracer, name):
                setattr(Tracer, name, _unary_method(rule, name))


_install_rule_functions()


# =========================================================================== trace
def _positional_parameters(f: Callable[..., Any]) -> int | None:
    """Number of positional parameters of ``f``; None when unknown or variadic."""
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in kinds for p in params)


class TraceSignatureError(TraceError, TypeError):
    """``f``'s signature does not take the arguments :func:`trace` passes.

    A :class:`~jacacc.errors.TraceError` that is also the ``TypeError`` Python
    itself would raise on calling ``f`` with the wrong number of arguments.
    """


def _check_arity(f: Callable[..., Any], n_args: int, n_inputs: int, unpack: bool) -> None:
    """Refuse, before calling it, an ``f`` that cannot take the arguments ``trace`` passes."""
    try:
        inspect.signature(f).bind(*range(n_args))
    except TypeError as exc:
        call = f"f(x0, ..., x{n_inputs - 1})" if unpack else "f(x) with x a vector of the inputs"
        raise TraceSignatureError(
            f"f cannot be called as {call} (n_inputs={n_inputs}): {exc}; trace calls f(x), or "
            f"f(x0, x1, ...) when f has exactly n_inputs positional parameters"
        ) from None
    except ValueError:  # builtins without a signature: let the call decide
        pass


def trace(f: Callable[..., Any], n_inputs: int, *, unpack: bool | None = None) -> Traced:
    """Trace ``f`` of ``n_inputs`` real inputs into a computational graph.

    Parameters
    ----------
    f : callable
        A straight-line numeric function.  It may return a traced value, a
        number, a list/tuple (nested allowed) or an array of them; outputs are
        flattened in order (arrays in C order).
    n_inputs : int
        Number of scalar inputs, at least 1.
    unpack : bool, optional
        ``True``: call ``f(x0, x1, ...)``.  ``False``: call ``f(x)`` with ``x``
        a NumPy object array of the ``n_inputs`` traced values (``x[0]``,
        ``a, b = x``, ``np.sin(x)``, ``x @ w`` all work).  Default: unpacked
        when ``n_inputs > 1`` and ``f`` has exactly ``n_inputs`` positional
        parameters, otherwise the array form.

    Returns
    -------
    Traced

    Raises
    ------
    TraceError
        ``n_inputs`` is not a positive integer, or ``f`` returned something
        that is neither a number nor a traced value.
    UnsupportedOperationError
        ``f`` used an operation without a derivative rule, or one that needs a
        value (``if x > 0``, ``float(x)``); the message names it.

    Examples
    --------
    >>> import numpy as np
    >>> f = trace(lambda a, b: a * b + np.sin(a), 2)
    >>> f.n_inputs, f.n_outputs
    (2, 1)
    >>> f.reference_jacobian([0.0, 3.0])
    array([[4., 0.]])
    >>> g = trace(lambda x: np.sum(x ** 2), 3)
    >>> g.reference_jacobian([1.0, 2.0, 3.0])
    array([[2., 4., 6.]])
    """
    if isinstance(n_inputs, bool) or not isinstance(n_inputs, numbers.Integral) or n_inputs < 1:
        raise TraceError(f"n_inputs must be a positive integer, got {n_inputs!r}")
    if not callable(f):
        raise TraceError(f"f must be callable, got a {type(f).__name__}")
    n_inputs = int(n_inputs)
    if unpack is None:
        unpack = n_inputs > 1 and _positional_parameters(f) == n_inputs
    _check_arity(f, n_inputs if unpack else 1, n_inputs, unpack)
    tape = _Tape(n_inputs)
    inputs = [Tracer(tape, i) for i in range(n_inputs)]
    # The tape and the graph grow by a few objects per operation and free none:
    # the collector would walk them again and again for no garbage (see gc_paused).
    with gc_paused():
        try:
            if unpack:
                result = f(*inputs)
            else:
                x = np.empty(n_inputs, dtype=object)
                x[:] = inputs
                result = f(x)
        finally:
            # Tracers that escape (globals, closures) must not keep recording.
            tape.active = False
        outputs: list[Tracer | float] = []
        _flatten(result, tape, outputs)
        return Traced(_build_graph(tape, outputs), fun=f)


def _flatten(value: Any, tape: _Tape, out: list[Tracer | float]) -> None:
    if isinstance(value, Tracer):
        if value._tape is not tape:
            raise TraceError("the traced function returned a traced value of another trace")
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _flatten(item, tape, out)
    elif isinstance(value, np.ndarray):
        if value.dtype != object and not np.issubdtype(value.dtype, np.number):
            raise TraceError(f"the traced function returned an array of dtype {value.dtype}")
        for item in value.ravel(order="C"):
            _flatten(item, tape, out)
    elif isinstance(value, numbers.Real):
        out.append(float(value))
    else:
        raise TraceError(
            f"the traced function returned a {type(value).__name__} ({value!r}); return traced values, "
            "numbers, or lists/tuples/arrays of them"
        )


def _build_graph(tape: _Tape, outputs: list[Tracer | float]) -> CompGraph:
    """The live part of the tape as a CompGraph with symbolic partials."""
    n = tape.n_inputs
    # Liveness: only what some output depends on becomes a vertex, so the graph
    # never needs CompGraph's pruning (which would warn).
    live: set[int] = set()
    stack = [o._index for o in outputs if isinstance(o, Tracer)]
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        stack.extend(a._index for a in tape.args[i] if isinstance(a, Tracer))
    ops = sorted(i for i in live if i >= n)  # creation order is topological
    consumed = {a._index for i in ops for a in tape.args[i] if isinstance(a, Tracer)}
    returned = Counter(o._index for o in outputs if isinstance(o, Tracer))

    names: dict[int, str] = {i: f"x{i}" for i in range(n)}
    own_output: dict[int, int] = {}  # vertex -> output position, when the output is the vertex itself
    for k, o in enumerate(outputs):
        if isinstance(o, Tracer) and o._index >= n and o._index not in consumed and returned[o._index] == 1:
            own_output[o._index] = k
            names[o._index] = f"y{k}"
    count = 0
    for i in ops:
        if i not in own_output:
            count += 1
            names[i] = f"v{count}"

    # Nodes and edges are collected in lists and added in bulk, and the graph is
    # handed to CompGraph without its defensive copy: at 10^5 operations
    # (from_jax on a 300 x 300 array) per-call NetworkX overhead dominated.
    node_list: list[tuple[str, dict[str, Any]]] = [
        (names[i], {"kind": "input", "op": "input", "args": ()}) for i in range(n)
    ]
    edge_list: list[tuple[str, str, dict[str, Any]]] = []
    for i in ops:
        rule, args = tape.rules[i], tape.args[i]
        assert rule is not None
        node = names[i]
        node_list.append((node, {
            "kind": "output" if i in own_output else "intermediate",
            "op": rule.name,
            "args": tuple(names[a._index] if isinstance(a, Tracer) else a for a in args),
        }))
        operands = [Var(names[a._index]) if isinstance(a, Tracer) else Const(a) for a in args]
        # An operand used twice (x*x) gives one edge carrying the sum of its partials.
        summed: dict[str, Expr] = {}
        for a, p in zip(args, rule.partials(operands, Var(node)), strict=True):
            if isinstance(a, Tracer):
                src = names[a._index]
                summed[src] = p if src not in summed else summed[src] + p
        edge_list.extend((src, node, {"partial": p}) for src, p in summed.items())
    output_names = []
    for k, o in enumerate(outputs):
        name = f"y{k}"
        output_names.append(name)
        if isinstance(o, Tracer):
            if own_output.get(o._index) == k:
                continue
            node_list.append((name, {"kind": "output", "op": "copy", "args": (names[o._index],)}))
            edge_list.append((names[o._index], name, {"partial": Const(1.0)}))
        else:
            node_list.append((name, {"kind": "output", "op": "const", "args": (o,)}))
    # Every vertex is live (reached from an input: an operation with no traced
    # operand is folded to a constant; reaching an output: the liveness sweep
    # above), so CompGraph skips its reachability sweeps.
    g = _digraph(node_list, edge_list)
    return CompGraph._adopt(g, [names[i] for i in range(n)], output_names, live=True)


# =========================================================================== the result
def _forward_of(op: str) -> Callable[..., Any] | None:
    return None if op in ("input", "const", "copy") else get_rule(op).forward


class Traced:
    """A traced function: its computational graph with symbolic partials, and
    vectorized evaluation of values, partials and Jacobians.

    Parameters
    ----------
    graph : CompGraph
        A graph built by :func:`trace` (nodes carry ``op`` and ``args``).
    fun : callable, optional
        The traced function, kept for reference.

    Attributes
    ----------
    graph : CompGraph
    n_inputs, n_outputs : int

    Examples
    --------
    >>> import numpy as np
    >>> f = trace(lambda x: [x[0] * x[1], np.tanh(x[0])], 2)
    >>> f.values(np.array([[1.0, 2.0], [0.0, 3.0]]))
    array([[2.        , 0.76159416],
           [0.        , 0.        ]])
    >>> f.partials([1.0, 2.0]).shape == (f.graph.n_edges,)
    True
    >>> f.linearize([1.0, 2.0]).is_numeric
    True
    """

    def __init__(self, graph: CompGraph, *, fun: Callable[..., Any] | None = None) -> None:
        self.graph = graph
        self.fun = fun
        self.n_inputs = len(graph.inputs)
        self.n_outputs = len(graph.outputs)
        self._edge_exprs: list[Expr] = graph._partials_in_order()
        # edges whose partial is the constant 0 (stop_gradient, predicates): structural
        # zeros, skipped by every evaluation as the compiled kernels skip them
        self.zero_edges: tuple[int, ...] = tuple(
            k for k, e in enumerate(self._edge_exprs) if isinstance(e, Const) and e.value == 0.0)
        nodes = graph._g._node  # the raw attribute dicts: a NodeView lookup per vertex cost more
        # (node, op, args, forward) in topological order: the forward sweep
        # reads the recorded program from the node attributes, never the tape.
        self._program = [
            (node, nodes[node]["op"], nodes[node]["args"], _forward_of(nodes[node]["op"]))
            for node in graph.topological_order
        ]
        self._plans: dict[Any, Any] = {}

    # ---------------------------------------------------------------- evaluation
    def _points(self, x: Any) -> np.ndarray:
        # ints, float32, strided or read-only arrays are converted; complex is refused, not cast
        arr = real_array(x, "points", TraceError)
        if arr.ndim == 0 and self.n_inputs == 1:
            arr = arr.reshape(1)
        if arr.ndim == 0 or arr.shape[-1] != self.n_inputs:
            raise TraceError(f"x must have shape (..., {self.n_inputs}), got {arr.shape}")
        return arr

    def node_values(self, x: Any) -> dict[Node, np.ndarray]:
        """The value of every vertex at ``x`` (shape ``(n,)`` or ``(..., n)``).

        Returns
        -------
        dict node -> numpy.ndarray of the batch shape ``x.shape[:-1]``

        Examples
        --------
        >>> f = trace(lambda a, b: a * b + 1, 2)
        >>> {k: float(v) for k, v in f.node_values([2.0, 3.0]).items()}
        {'x0': 2.0, 'x1': 3.0, 'v1': 6.0, 'y0': 7.0}
        """
        pts = self._points(x)
        batch = pts.shape[:-1]
        values: dict[Node, np.ndarray] = {}
        for i, node in enumerate(self.graph.inputs):
            values[node] = pts[..., i]
        for node, op, args, forward in self._program:
            if op == "input":
                continue
            if op == "const":
                values[node] = np.full(batch, args[0])
            elif op == "copy":
                values[node] = values[args[0]]
            else:
                # args hold node names (str) and folded constants (float)
                operands = [values[a] if isinstance(a, str) else a for a in args]
                values[node] = np.asarray(forward(*operands))
        return values

    def values(self, x: Any) -> np.ndarray:
        """The outputs at ``x``: shape ``(n,)`` → ``(m,)``, ``(..., n)`` → ``(..., m)``."""
        vals = self.node_values(x)
        batch = self._points(x).shape[:-1]
        if not self.graph.outputs:
            return np.zeros(batch + (0,))
        return np.stack([np.broadcast_to(vals[o], batch) for o in self.graph.outputs], axis=-1)

    __call__ = values

    def partials(self, x: Any) -> np.ndarray:
        """The edge partials at ``x``, shape ``(..., n_edges)`` in ``graph.edges`` order.

        Examples
        --------
        >>> f = trace(lambda x: x[0] ** 3, 1)
        >>> f.partials([[1.0], [2.0]])
        array([[ 3.],
               [12.]])
        """
        vals = self.node_values(x)
        batch = self._points(x).shape[:-1]
        if not self._edge_exprs:
            return np.zeros(batch + (0,))
        return np.stack([np.broadcast_to(e.evaluate(vals), batch) for e in self._edge_exprs], axis=-1)

    def linearize(self, x: Any) -> CompGraph:
        """The linearized computational graph (numeric partials) at one point ``x``.

        Examples
        --------
        >>> f = trace(lambda x: np.exp(2 * x[0]), 1)
        >>> f.linearize([0.0]).partial_array()
        array([2., 1.])
        """
        pts = self._points(x)
        if pts.ndim != 1:
            raise TraceError(f"linearize takes one point of shape ({self.n_inputs},), got {pts.shape}")
        values = self.partials(pts)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:  # a CompGraph holds finite partials only (jacacc.graph)
            u, v = self.graph.edges[bad[0]]
            raise TraceError(
                f"linearize: at this point {bad.size} partial(s) are not finite, e.g. ({u!r} → {v!r}) = "
                f"{float(values[bad[0]])!r}; a linearized graph holds finite partials only. jacobian(x) and partials(x) "
                "evaluate at the point and propagate NaN/inf"
            )
        return self.graph.with_partials([float(p) for p in values])

    def jacobian(self, x: Any, method: Any = "markowitz", mode: str = "vertex", **options: Any) -> np.ndarray:
        """The Jacobian at ``x`` through an elimination plan: shape ``(..., m, n)``.

        The plan (order and schedule) depends only on the graph, so it is found
        once per ``(mode, method, options)`` and reused for every point.

        Parameters
        ----------
        x : array_like of shape ``(n,)`` or ``(..., n)``
        method : str or callable
            Order finder, see :func:`jacacc.optimize`.
        mode : str
            Elimination mode (``"vertex"``, ``"edge"``, ...).
        **options
            Passed on to :func:`jacacc.optimize`.

        Examples
        --------
        >>> f = trace(lambda a, b: a * np.sin(b), 2)
        >>> f.jacobian([2.0, 0.0])
        array([[0., 2.]])
        """
        # Imported here: jacacc.api pulls in the order finders and engines,
        # which the tracer itself does not need.
        from jacacc.api import optimize

        key: Any = None
        if isinstance(method, str):
            key = (mode, method, tuple(sorted(options.items())))
            try:
                hash(key)
            except TypeError:
                key = None
        plan = self._plans.get(key) if key is not None else None
        if plan is None:
            plan = optimize(self.graph, mode=mode, method=method, **options)
            if key is not None:
                self._plans[key] = plan
        return plan.schedule.evaluate(self.partials(x), zero_edges=self.zero_edges)

    def reference_jacobian(self, x: Any) -> np.ndarray:
        """The Jacobian at ``x`` by the dense chain rule
        (:func:`jacacc.graph.reference_jacobian`), shape ``(..., m, n)``.

        Examples
        --------
        >>> trace(lambda x: [x[0] ** 2, 3.0], 1).reference_jacobian([5.0])
        array([[10.],
               [ 0.]])
        """
        return reference_jacobian(self.graph, partials=self.partials(x), zero_edges=self.zero_edges)

    def __repr__(self) -> str:
        name = getattr(self.fun, "__name__", None)
        what = f" of {name}" if name else ""
        g = self.graph
        return (
            f"Traced{what}(inputs={self.n_inputs}, outputs={self.n_outputs}, "
            f"intermediates={len(g.intermediates)}, edges={g.n_edges})"
        )
