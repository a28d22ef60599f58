"""Tiny immutable symbolic expressions for local partial derivatives.

A traced computational graph (paper 003 §2: a vertex per program variable, an
edge ``u → v`` carrying ∂v/∂u) stores on each edge the *formula* of its local
partial, written in terms of the values of graph nodes: the partial of
``v = sin(u)`` is ``cos(u)``, the partial of ``v = exp(u)`` is ``v`` itself.
:class:`Expr` is that formula.  It is deliberately small:

* three node types: :class:`Var` (the value of a graph node), :class:`Const`
  (a float) and :class:`Apply` (an operation from :data:`FUNCTIONS` applied to
  sub-expressions);
* immutable, compared and hashed by structure;
* light simplification in the smart constructors (``1*x -> x``, ``0*x -> 0``,
  ``x + 0 -> x``, constant folding), enough to keep traced partials readable
  without pretending to be a computer-algebra system;
* vectorized NumPy evaluation (:meth:`Expr.evaluate`) over any batch shape;
* printing through :class:`ExprPrinter`, one method per construct, so that the
  code-generation backends (NumPy, Numba, CuPy) subclass it and change only what
  they spell differently.

Every operation an expression may contain is an operation of the table
:mod:`jacacc.ops`: :data:`FUNCTIONS` says how each prints, :data:`NUMPY_NAMES`
which NumPy (or SciPy) function evaluates it; both are read from the table.

Examples
--------
>>> x, y = Var("x"), Var("y")
>>> e = 2 * x * cos(y)
>>> str(e)
'2*x*cos(y)'
>>> float(e.evaluate({"x": 1.5, "y": 0.0}))
3.0
>>> sorted(e.variables)
['x', 'y']
"""

from __future__ import annotations

import ast
import math
import numbers
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from jacacc import ops

__all__ = [
    "FUNCTIONS",
    "NUMPY_NAMES",
    "Apply",
    "Const",
    "Expr",
    "ExprPrinter",
    "FunctionSpec",
    "NumpyPrinter",
    "Var",
    "apply",
    "as_expr",
    "parse_expr",
]

Node = Hashable
ArrayLike = Any  # numpy arrays or Python / NumPy scalars


# --------------------------------------------------------------------------- the one table
@dataclass(frozen=True)
class FunctionSpec:
    """How one operation looks inside an expression.

    Attributes
    ----------
    name : str
        The operation's name in :class:`Apply` (``"mul"``, ``"cos"``, ``"ge"``).
    arity : int
        Number of arguments.
    form : str
        The construct the printer uses: ``"infix"`` (``a + b``), ``"prefix"``
        (``-a``), ``"call"`` (``cos(a)``) or ``"iverson"`` (``(a >= b)``, which
        is 1.0 where the comparison holds and 0.0 elsewhere).
    symbol : str
        The operator symbol for infix, prefix and Iverson forms.
    precedence : int
        Binding strength used to decide where parentheses are needed.
    """

    name: str
    arity: int
    form: str
    symbol: str = ""
    precedence: int = 100


# Precedence levels follow Python's grammar, so the printed text is also valid
# Python/NumPy source that a backend can compile.
PREC_ADD, PREC_MUL, PREC_NEG, PREC_POW, PREC_ATOM = 10, 20, 30, 40, 100

_PRECEDENCE = {"+": PREC_ADD, "-": PREC_ADD, "*": PREC_MUL, "/": PREC_MUL, "**": PREC_POW}


def _spec(op: ops.Operation) -> FunctionSpec:
    """How an operation of the table (:mod:`jacacc.ops`) prints in an expression."""
    if op.name == "neg":
        return FunctionSpec("neg", 1, "prefix", "-", PREC_NEG)
    if op.piecewise_constant and op.infix:  # a predicate: an Iverson bracket
        return FunctionSpec(op.name, 2, "iverson", op.infix)
    if op.infix in _PRECEDENCE and op.arity == 2:
        return FunctionSpec(op.name, 2, "infix", op.infix, _PRECEDENCE[op.infix])
    return FunctionSpec(op.name, op.arity, "call")


#: Every operation an :class:`Apply` node may carry, by name: the operation table's
#: (:mod:`jacacc.ops`), with the printing form of each.
FUNCTIONS: dict[str, FunctionSpec] = {op.name: _spec(op) for op in ops.iterate()}

#: The function that evaluates each operation, as ``module.attribute`` text (the
#: operation table's NumPy spelling; used by :meth:`Expr.evaluate` and by
#: :class:`NumpyPrinter`).  SciPy is imported only when an ``erf``/``erfc`` is
#: actually evaluated.
NUMPY_NAMES: dict[str, str] = ops.spellings("numpy")



def numpy_function(op: str) -> Callable[..., Any]:
    """The NumPy/SciPy callable that evaluates operation ``op`` (imported lazily).

    Examples
    --------
    >>> numpy_function("cos") is np.cos
    True
    """
    return ops.get(op).function


# --------------------------------------------------------------------------- node types
class Expr:
    """Base class of symbolic expressions; build them with :class:`Var`,
    :class:`Const`, the arithmetic operators and :func:`apply` (or the
    module-level functions such as :func:`cos` and :func:`ge`).

    Expressions are immutable and compared by structure: ``Var("x") + 1 ==
    Var("x") + 1``.  The comparison operators ``<``, ``>=``, ... are *not*
    overloaded (``==`` is structural equality); use :func:`ge` and friends for
    Iverson brackets.

    Examples
    --------
    >>> e = Var("v") * Var("v") + 1
    >>> e.evaluate({"v": np.array([1.0, 2.0])})
    array([2., 5.])
    """

    __slots__ = ()
    # NumPy scalars and arrays defer to Expr's reflected operators, so
    # ``np.float64(2) * x`` is an Expr rather than a 0-d object array.
    __array_ufunc__ = None

    # ---------------------------------------------------------------- structure
    @property
    def variables(self) -> frozenset[Node]:
        """The node names the expression reads."""
        raise NotImplementedError

    @property
    def args(self) -> tuple[Expr, ...]:
        """Sub-expressions (empty for leaves)."""
        return ()

    def evaluate(self, values: Mapping[Node, ArrayLike]) -> ArrayLike:
        """Evaluate with NumPy, vectorized over whatever shapes ``values`` hold.

        Parameters
        ----------
        values : mapping node -> float or numpy.ndarray
            The value of every variable in :attr:`variables`; arrays broadcast
            against each other as in NumPy.

        Returns
        -------
        float or numpy.ndarray
            A float for an expression without variables, otherwise an array
            (or NumPy scalar) of the broadcast shape.

        Examples
        --------
        >>> (Var(0) * 3).evaluate({0: np.arange(3.0)})
        array([0., 3., 6.])
        """
        raise NotImplementedError

    def rename(self, mapping: Mapping[Node, Node]) -> Expr:
        """The same expression with variables renamed (names not in ``mapping`` stay).

        Examples
        --------
        >>> str(cos(Var("a")).rename({"a": "v3"}))
        'cos(v3)'
        """
        raise NotImplementedError

    def to_string(self, printer: ExprPrinter | None = None) -> str:
        """Render with ``printer`` (default :class:`ExprPrinter`)."""
        return (printer or ExprPrinter()).doprint(self)

    def __str__(self) -> str:
        return ExprPrinter().doprint(self)

    # ---------------------------------------------------------------- arithmetic
    def __add__(self, other: Any) -> Expr:
        return _binary("add", self, other)

    def __radd__(self, other: Any) -> Expr:
        return _binary("add", other, self)

    def __sub__(self, other: Any) -> Expr:
        return _binary("sub", self, other)

    def __rsub__(self, other: Any) -> Expr:
        return _binary("sub", other, self)

    def __mul__(self, other: Any) -> Expr:
        return _binary("mul", self, other)

    def __rmul__(self, other: Any) -> Expr:
        return _binary("mul", other, self)

    def __truediv__(self, other: Any) -> Expr:
        return _binary("div", self, other)

    def __rtruediv__(self, other: Any) -> Expr:
        return _binary("div", other, self)

    def __pow__(self, other: Any) -> Expr:
        return _binary("pow", self, other)

    def __rpow__(self, other: Any) -> Expr:
        return _binary("pow", other, self)

    def __neg__(self) -> Expr:
        return apply("neg", self)

    def __pos__(self) -> Expr:
        return self


class Var(Expr):
    """The value of graph node ``name`` (a string or an integer).

    Examples
    --------
    >>> Var("v3"), Var(7).variables
    (Var('v3'), frozenset({7}))
    """

    __slots__ = ("name",)
    name: Node

    def __init__(self, name: Node) -> None:
        if isinstance(name, bool) or not isinstance(name, (str, int, np.integer)):
            raise TypeError(f"a variable name is a string or an integer, got {name!r}")
        object.__setattr__(self, "name", name)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("expressions are immutable")

    @property
    def variables(self) -> frozenset[Node]:
        return frozenset([self.name])

    def evaluate(self, values: Mapping[Node, ArrayLike]) -> ArrayLike:
        try:
            return values[self.name]
        except KeyError:
            raise KeyError(f"no value given for variable {self.name!r}") from None

    def rename(self, mapping: Mapping[Node, Node]) -> Expr:
        return Var(mapping.get(self.name, self.name))

    def __eq__(self, other: object) -> bool:
        return type(other) is Var and other.name == self.name  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(("Var", self.name))

    def __repr__(self) -> str:
        return f"Var({self.name!r})"


class Const(Expr):
    """A real constant (stored as a Python float).

    Examples
    --------
    >>> Const(2) == Const(2.0), str(Const(2)), str(Const(0.5))
    (True, '2', '0.5')
    """

    __slots__ = ("value",)
    value: float

    def __init__(self, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            if not (isinstance(value, np.ndarray) and value.shape == ()):
                raise TypeError(f"a constant is a real number, got {value!r}")
        object.__setattr__(self, "value", float(value))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("expressions are immutable")

    @property
    def variables(self) -> frozenset[Node]:
        return frozenset()

    def evaluate(self, values: Mapping[Node, ArrayLike]) -> ArrayLike:
        return self.value

    def rename(self, mapping: Mapping[Node, Node]) -> Expr:
        return self

    def __eq__(self, other: object) -> bool:
        if type(other) is not Const:
            return False
        a, b = self.value, other.value  # type: ignore[attr-defined]
        return a == b or (math.isnan(a) and math.isnan(b))

    def __hash__(self) -> int:
        return hash(("Const", self.value))

    def __repr__(self) -> str:
        return f"Const({self.value!r})"


class Apply(Expr):
    """Operation ``fn`` (a key of :data:`FUNCTIONS`) applied to ``args``.

    Constructing ``Apply`` directly never simplifies; :func:`apply` and the
    arithmetic operators do.

    Examples
    --------
    >>> Apply("mul", (Const(1.0), Var("x")))
    Apply('mul', (Const(1.0), Var('x')))
    >>> apply("mul", Const(1.0), Var("x"))
    Var('x')
    """

    __slots__ = ("fn", "args_", "_vars", "_hash")
    fn: str

    def __init__(self, fn: str, args: tuple[Expr, ...]) -> None:
        spec = FUNCTIONS.get(fn)
        if spec is None:
            raise ValueError(f"unknown expression function {fn!r}; known: {', '.join(sorted(FUNCTIONS))}")
        args = tuple(args)
        if len(args) != spec.arity:
            raise ValueError(f"{fn} takes {spec.arity} argument(s), got {len(args)}")
        if not all(isinstance(a, Expr) for a in args):
            raise TypeError(f"arguments of {fn} must be Expr instances, got {args!r}")
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "args_", args)
        object.__setattr__(self, "_vars", frozenset().union(*(a.variables for a in args)))
        object.__setattr__(self, "_hash", hash(("Apply", fn, args)))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("expressions are immutable")

    @property
    def args(self) -> tuple[Expr, ...]:
        return self.args_

    @property
    def variables(self) -> frozenset[Node]:
        return self._vars

    def evaluate(self, values: Mapping[Node, ArrayLike]) -> ArrayLike:
        evaluated = [a.evaluate(values) for a in self.args_]
        result = numpy_function(self.fn)(*evaluated)
        if FUNCTIONS[self.fn].form == "iverson":
            # An Iverson bracket is a number (1.0 or 0.0), not a boolean, so it
            # can be multiplied and summed like any other partial.
            return np.where(result, 1.0, 0.0) if np.ndim(result) else float(result)
        return result

    def rename(self, mapping: Mapping[Node, Node]) -> Expr:
        return Apply(self.fn, tuple(a.rename(mapping) for a in self.args_))

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Apply
            and self._hash == other._hash  # type: ignore[attr-defined]
            and self.fn == other.fn  # type: ignore[attr-defined]
            and self.args_ == other.args_  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Apply({self.fn!r}, {self.args_!r})"


# --------------------------------------------------------------------------- smart constructors
def as_expr(value: Any) -> Expr:
    """``value`` as an expression: an :class:`Expr` is returned unchanged, a real
    number becomes a :class:`Const`.

    Examples
    --------
    >>> as_expr(3), as_expr(Var("x"))
    (Const(3.0), Var('x'))
    """
    if isinstance(value, Expr):
        return value
    return Const(value)


def _is_const(e: Expr, value: float | None = None) -> bool:
    return isinstance(e, Const) and (value is None or e.value == value)


def _fold(fn: str, args: tuple[Expr, ...]) -> Const:
    # Folding may meet a domain error (log of a negative constant) in a partial
    # that is never used; NaN is the honest answer and the warning is noise.
    with np.errstate(all="ignore"):
        return Const(float(Apply(fn, args).evaluate({})))


def apply(fn: str, *args: Any) -> Expr:
    """Build ``fn(*args)`` with light simplification.

    Simplifications: constant folding when every argument is a constant;
    ``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``, ``x / 1``, ``x ** 1``
    give ``x``; ``0 * x``, ``x * 0``, ``0 / x`` and ``x - x`` give ``0``;
    ``x ** 0`` gives ``1``; ``x + x`` gives ``2*x``; ``c1 * (c2 * x)`` gives
    ``(c1*c2) * x``; constants move to the left of a product; ``-(-x)`` gives
    ``x``; ``0 - x`` gives ``-x``.  Nothing else: in particular ``0 * x`` is
    ``0`` even where ``x`` would be infinite, as in every AD tool that uses
    symbolic zeros.

    Examples
    --------
    >>> x = Var("x")
    >>> apply("add", x, 0), apply("mul", 0, x), apply("cos", Const(0))
    (Var('x'), Const(0.0), Const(1.0))
    >>> str(apply("add", x, x)), str(apply("mul", x, 3))
    ('2*x', '3*x')
    """
    spec = FUNCTIONS.get(fn)
    if spec is None:
        raise ValueError(f"unknown expression function {fn!r}; known: {', '.join(sorted(FUNCTIONS))}")
    exprs = tuple(as_expr(a) for a in args)
    if len(exprs) != spec.arity:
        raise ValueError(f"{fn} takes {spec.arity} argument(s), got {len(exprs)}")
    if all(isinstance(a, Const) for a in exprs):
        return _fold(fn, exprs)
    simplify = _SIMPLIFY.get(fn)
    if simplify is not None:
        result = simplify(*exprs)
        if result is not None:
            return result
    return Apply(fn, exprs)


def _simplify_add(a: Expr, b: Expr) -> Expr | None:
    if _is_const(a, 0.0):
        return b
    if _is_const(b, 0.0):
        return a
    if a == b:
        return apply("mul", Const(2.0), a)
    return None


def _simplify_sub(a: Expr, b: Expr) -> Expr | None:
    if _is_const(b, 0.0):
        return a
    if _is_const(a, 0.0):
        return apply("neg", b)
    if a == b:
        return Const(0.0)
    return None


def _simplify_mul(a: Expr, b: Expr) -> Expr | None:
    if isinstance(b, Const):  # keep constants on the left: 2*x, never x*2
        a, b = b, a
    if isinstance(a, Const):
        if a.value == 0.0:
            return Const(0.0)
        if a.value == 1.0:
            return b
        if a.value == -1.0:
            return apply("neg", b)
        if isinstance(b, Apply) and b.fn == "mul" and isinstance(b.args[0], Const):
            return apply("mul", Const(a.value * b.args[0].value), b.args[1])
        return Apply("mul", (a, b))
    return None


def _simplify_div(a: Expr, b: Expr) -> Expr | None:
    if _is_const(b, 1.0):
        return a
    if _is_const(a, 0.0):
        return Const(0.0)
    return None


def _simplify_pow(a: Expr, b: Expr) -> Expr | None:
    if _is_const(b, 1.0):
        return a
    if _is_const(b, 0.0):
        return Const(1.0)
    return None


def _simplify_neg(a: Expr) -> Expr | None:
    if isinstance(a, Apply) and a.fn == "neg":
        return a.args[0]
    return None


_SIMPLIFY: dict[str, Callable[..., Expr | None]] = {
    "add": _simplify_add,
    "sub": _simplify_sub,
    "mul": _simplify_mul,
    "div": _simplify_div,
    "pow": _simplify_pow,
    "neg": _simplify_neg,
}


def _binary(fn: str, a: Any, b: Any) -> Expr:
    if not (isinstance(a, (Expr, numbers.Real)) and isinstance(b, (Expr, numbers.Real))):
        return NotImplemented
    return apply(fn, a, b)


#: the names of the builders :func:`_make_function` made (exported: one list, kept by the maker)
_EXPR_FUNCTIONS: list[str] = []


def _make_function(name: str) -> Callable[..., Expr]:
    spec = FUNCTIONS[name]

    def function(*args: Any) -> Expr:
        return apply(name, *args)

    function.__name__ = function.__qualname__ = "absolute" if name == "abs" else name
    kind = "Iverson bracket" if spec.form == "iverson" else "expression"
    function.__doc__ = f"The {kind} ``{name}`` of {spec.arity} argument(s), simplified by :func:`apply`."
    _EXPR_FUNCTIONS.append(function.__name__)
    return function


# Expression-building functions for every operation that is not an arithmetic
# operator; rules.py writes partials with them.  Spelled out (not generated in a
# loop) so that readers and static tools see them.  ``abs`` is ``absolute`` so
# the builtin is not shadowed.
sqrt = _make_function("sqrt")
cbrt = _make_function("cbrt")
exp = _make_function("exp")
exp2 = _make_function("exp2")
expm1 = _make_function("expm1")
log = _make_function("log")
log2 = _make_function("log2")
log10 = _make_function("log10")
log1p = _make_function("log1p")
sin = _make_function("sin")
cos = _make_function("cos")
tan = _make_function("tan")
arcsin = _make_function("arcsin")
arccos = _make_function("arccos")
arctan = _make_function("arctan")
sinh = _make_function("sinh")
cosh = _make_function("cosh")
tanh = _make_function("tanh")
arcsinh = _make_function("arcsinh")
arccosh = _make_function("arccosh")
arctanh = _make_function("arctanh")
absolute = _make_function("abs")
sign = _make_function("sign")
square = _make_function("square")
reciprocal = _make_function("reciprocal")
erf = _make_function("erf")
erfc = _make_function("erfc")
arctan2 = _make_function("arctan2")
hypot = _make_function("hypot")
maximum = _make_function("maximum")
minimum = _make_function("minimum")
fmax = _make_function("fmax")
fmin = _make_function("fmin")
ge = _make_function("ge")
gt = _make_function("gt")
le = _make_function("le")
lt = _make_function("lt")
eq = _make_function("eq")
ne = _make_function("ne")

__all__ += _EXPR_FUNCTIONS


# --------------------------------------------------------------------------- printing
class ExprPrinter:
    """Render an :class:`Expr` as readable infix/call text.

    One method per construct (:meth:`print_var`, :meth:`print_const`,
    :meth:`print_infix`, :meth:`print_prefix`, :meth:`print_call`,
    :meth:`print_iverson`); code-generation backends subclass this and
    override what they spell differently (variable access, function names,
    Iverson brackets).  The default output is valid Python for the arithmetic
    constructs, with parentheses only where Python's precedence needs them.

    Examples
    --------
    >>> x, y = Var("x"), Var("y")
    >>> ExprPrinter().doprint((x + y) * sin(x) ** 2 / -y)
    '(x + y)*sin(x)**2/-y'
    >>> str(ge(x, y) - 1)
    '(x >= y) - 1'
    """

    #: How calls are spelled, operation name -> text; subclasses replace it.
    function_names: ClassVar[Mapping[str, str]] = {}

    def doprint(self, expr: Expr) -> str:
        """The text of ``expr``."""
        if isinstance(expr, Var):
            return self.print_var(expr)
        if isinstance(expr, Const):
            return self.print_const(expr)
        if isinstance(expr, Apply):
            return self.print_apply(expr)
        raise TypeError(f"cannot print {expr!r}")

    def print_var(self, expr: Var) -> str:
        """A variable: its name (``v3``, or ``7`` for an integer node id)."""
        return str(expr.name)

    def print_const(self, expr: Const) -> str:
        """A constant: integers without a trailing ``.0``, otherwise ``repr``
        (the shortest text that round-trips)."""
        v = expr.value
        if math.isfinite(v) and v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return repr(v)

    def print_apply(self, expr: Apply) -> str:
        """Dispatch on the operation's form in :data:`FUNCTIONS`."""
        form = FUNCTIONS[expr.fn].form
        return getattr(self, f"print_{form}")(expr)

    def print_infix(self, expr: Apply) -> str:
        """``a + b``, ``a*b``, ``a/b``, ``a**b`` (products without spaces)."""
        spec = FUNCTIONS[expr.fn]
        left, right = expr.args
        if expr.fn == "pow":
            # Python's ** binds right to left and its base must be a primary.
            lhs, rhs = self.parenthesize(left, PREC_POW + 1), self.parenthesize(right, PREC_NEG)
        else:
            lhs, rhs = self.parenthesize(left, spec.precedence), self.parenthesize(right, spec.precedence + 1)
        joiner = f" {spec.symbol} " if spec.precedence == PREC_ADD else spec.symbol
        return f"{lhs}{joiner}{rhs}"

    def print_prefix(self, expr: Apply) -> str:
        """``-a``."""
        return f"{FUNCTIONS[expr.fn].symbol}{self.parenthesize(expr.args[0], PREC_NEG + 1)}"

    def print_call(self, expr: Apply) -> str:
        """``cos(a)``, ``arctan2(a, b)``; a spelling with ``{0}`` … is a template for the arguments."""
        name = self.function_names.get(expr.fn, expr.fn)
        if "{" in name:
            return name.format(*(self.parenthesize(a, PREC_POW) for a in expr.args))
        return f"{name}({', '.join(self.doprint(a) for a in expr.args)})"

    def print_iverson(self, expr: Apply) -> str:
        """``(a >= b)``: 1 where the comparison holds, 0 elsewhere."""
        a, b = (self.parenthesize(x, PREC_ADD) for x in expr.args)
        return f"({a} {FUNCTIONS[expr.fn].symbol} {b})"

    def parenthesize(self, expr: Expr, min_precedence: int) -> str:
        """Print ``expr``, in parentheses if it binds less tightly than ``min_precedence``."""
        text = self.doprint(expr)
        return f"({text})" if self.precedence(expr) < min_precedence else text

    @staticmethod
    def precedence(expr: Expr) -> int:
        """How tightly the printed ``expr`` binds (a negative constant binds like ``-x``)."""
        if isinstance(expr, Const):
            return PREC_NEG if expr.value < 0 else PREC_ATOM
        if isinstance(expr, Apply):
            return FUNCTIONS[expr.fn].precedence
        return PREC_ATOM


class NumpyPrinter(ExprPrinter):
    """Print NumPy source: calls through :data:`NUMPY_NAMES`, Iverson brackets
    as ``np.where(cond, 1.0, 0.0)``, variables through ``var_format``.

    Parameters
    ----------
    var_format : str, default ``"{}"``
        Format applied to ``repr`` of a node name, e.g. ``"values[{}]"``.

    Examples
    --------
    >>> p = NumpyPrinter("values[{}]")
    >>> p.doprint(cos(Var("v3")) * ge(Var("a"), 0))
    "np.cos(values['v3'])*np.where(values['a'] >= 0, 1.0, 0.0)"
    >>> values = {"v3": np.array([0.0]), "a": np.array([1.0])}
    >>> eval(p.doprint(cos(Var("v3")) * ge(Var("a"), 0)))
    array([1.])
    """

    function_names: ClassVar[Mapping[str, str]] = NUMPY_NAMES

    def __init__(self, var_format: str = "{}") -> None:
        self.var_format = var_format

    def print_var(self, expr: Var) -> str:
        return self.var_format.format(repr(expr.name))

    def print_const(self, expr: Const) -> str:
        v = expr.value
        if math.isfinite(v):
            return super().print_const(expr)
        return "np.nan" if math.isnan(v) else ("np.inf" if v > 0 else "(-np.inf)")

    def print_iverson(self, expr: Apply) -> str:
        a, b = (self.parenthesize(x, PREC_ADD) for x in expr.args)
        return f"np.where({a} {FUNCTIONS[expr.fn].symbol} {b}, 1.0, 0.0)"


# --------------------------------------------------------------------------- parsing
_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow"}
_COMPARE = {ast.Gt: "gt", ast.GtE: "ge", ast.Lt: "lt", ast.LtE: "le", ast.Eq: "eq", ast.NotEq: "ne"}
_NON_FINITE = {"nan": math.nan, "inf": math.inf}


def parse_expr(text: str) -> Expr:
    """The expression ``text`` as :class:`ExprPrinter` prints it (and the JSON exchange format holds
    partials): numbers, variable names, ``+ - * / **``, unary minus, one comparison (an Iverson
    bracket, 1 or 0) and calls of the operations of :data:`FUNCTIONS` by name.  The tree is built
    as written (no simplification), so printing it gives equivalent text.

    Raises
    ------
    ValueError
        Text that is not such an expression: the message names what is not allowed.

    Examples
    --------
    >>> e = parse_expr("-v20/x0 + cos(x1)**2 * (a >= 0.5)")
    >>> sorted(e.variables)
    ['a', 'v20', 'x0', 'x1']
    >>> float(e.evaluate({"v20": 1.0, "x0": 2.0, "x1": 0.0, "a": 1.0}))
    0.5
    >>> parse_expr("floor(x)")
    Traceback (most recent call last):
    ...
    ValueError: 'floor' is not an operation of jacacc.ops
    """
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as err:
        raise ValueError(f"not an expression: {text!r} ({err.msg})") from None
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    built: dict[int, Expr] = {}
    while stack:  # iteratively: a long sum nests as deep as it has terms
        node, expanded = stack.pop()
        children = _children(node)
        if children and not expanded:
            stack.append((node, True))
            stack.extend((c, False) for c in children)
            continue
        built[id(node)] = _build(node, [built[id(c)] for c in children])
    return built[id(tree)]


def _children(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, ast.Call):
        return list(node.args)
    return []


def _build(node: ast.AST, args: list[Expr]) -> Expr:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return Const(float(node.value))
    if isinstance(node, ast.Name):
        return Const(_NON_FINITE[node.id]) if node.id in _NON_FINITE else Var(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return Apply(_BINARY[type(node.op)], tuple(args))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        if isinstance(node.op, ast.USub) and isinstance(args[0], Const):
            return Const(-args[0].value)
        return Apply("neg", tuple(args)) if isinstance(node.op, ast.USub) else args[0]
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return Apply(_COMPARE[type(node.ops[0])], tuple(args))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        spec = FUNCTIONS.get(node.func.id)
        if spec is None:
            raise ValueError(f"{node.func.id!r} is not an operation of jacacc.ops")
        if spec.arity != len(args):
            raise ValueError(f"{node.func.id} takes {spec.arity} argument(s), got {len(args)}")
        return Apply(spec.name, tuple(args))
    raise ValueError(f"{ast.unparse(node)!r} is not allowed in a partial expression")
