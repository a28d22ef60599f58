"""The operation table: every elementwise operation declared once.

Each :class:`Operation` holds what every representation of the project needs
to know about one elementwise function (in the manner of JAX's primitive and
rule tables, ``jax/_src/interpreters/ad.py``, and ATL's builtins):

* its name, arity and the other names it answers to (NumPy ufunc names);
* its spellings: NumPy/SciPy (evaluation and printed NumPy code), Numba, CUDA
  C++, JAX (the primitives :mod:`jacacc.jaxpr` maps, and ``jnp``) and PyTorch;
* its value, vectorized over NumPy or CuPy arrays;
* its **derivative, written once** against a small builder interface
  (:class:`Builder`): arithmetic on symbolic values and calls of other
  operations of this table.  Each representation — the scalar
  :class:`~jacacc.partials.Expr` of traced graphs (:mod:`jacacc.rules`), the tensor
  expression DAG (:mod:`jacacc.tensor.graph`), the Iverson language
  (:mod:`jacacc.iverson.derive`) and elementwise sources
  (:mod:`jacacc.elementwise.derive`) — implements the builder once and so
  receives every derivative of the table;
* its domain: where it is undefined or kinked, and the convention at a kink.

A partial that is zero is the symbolic :data:`ZERO`, never ``None``.

Conventions at kinks follow JAX: ``|x|'(0) = 1``, ``relu'(0) = 0``,
``maximum``/``minimum`` split a tie ½/½, and piecewise-constant functions
(``sign``, predicates) have derivative 0 everywhere.

Examples
--------
>>> op = get("tanh")
>>> op.name, op.arity, op.derivative_text
('tanh', 1, '1 - out**2')
>>> float(op.value(0.5)) == float(np.tanh(0.5))
True
>>> get("absolute").name, get("true_divide").name
('abs', 'div')
>>> partials("sin", TextBuilder(), ("x",), "y")
['cos(x)']
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from jacacc.errors import RegistryError, UnsupportedOperationError

__all__ = ["OPERATIONS", "ZERO", "Builder", "Operation", "Sym", "TextBuilder", "Zero", "array_module", "declare", "get", "names",
           "partials", "resolve", "spelling", "spellings"]

V = TypeVar("V")


# ---------------------------------------------------------------------------- the symbolic zero
class Zero:
    """The symbolic zero partial: absent from every sum, absorbing in every product.

    There is one instance, :data:`ZERO`.  It is falsy so that ``if partial:``
    reads naturally.

    Examples
    --------
    >>> ZERO, bool(ZERO), Zero() is ZERO
    (ZERO, False, True)
    """

    _instance: Zero | None = None

    def __new__(cls) -> Zero:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "ZERO"

    def __reduce__(self) -> str:
        return "ZERO"


ZERO = Zero()


# ---------------------------------------------------------------------------- the builder interface
class Builder(Protocol[V]):
    """What a representation implements to receive every derivative of the table.

    Values of type ``V`` are the representation's own (a scalar ``Expr``, a
    tensor node, an Iverson ``Expr``, an elementwise syntax node).  Constants
    arrive as Python floats only through :meth:`constant`; the table folds
    arithmetic between constants itself.
    """

    def constant(self, value: float) -> V:
        """The constant ``value``."""

    def add(self, a: V, b: V) -> V:
        """``a + b``."""

    def multiply(self, a: V, b: V) -> V:
        """``a · b`` (elementwise)."""

    def power(self, a: V, exponent: float) -> V:
        """``a ** exponent`` for a constant exponent."""

    def call(self, name: str, args: Sequence[V]) -> V:
        """The operation ``name`` of this table applied to ``args``."""

    # A builder may also define ``divide(a, b)`` and ``subtract(a, b)``; without them ``a / b`` is
    # built as ``a · b**-1`` and ``a - b`` as ``a + (-1)·b``.


class Sym(Generic[V]):
    """A builder value with Python's arithmetic, so derivatives read as formulas.

    ``Sym`` wraps either a number (folded in Python) or a value of the
    builder; ``+ - * / **`` with numbers and other ``Sym`` call the builder,
    dropping ``+ 0`` and ``· 1`` and absorbing ``· 0``.

    Examples
    --------
    >>> b = TextBuilder()
    >>> x = Sym(b, "x")
    >>> (1 - x**2).value, (2 * x * 1).value, (0 * x).number
    ('1 - x**2', '2*x', 0.0)
    """

    __slots__ = ("builder", "number", "value")

    def __init__(self, builder: Builder[V], value: V | None = None, number: float | None = None) -> None:
        self.builder = builder
        self.value = value
        self.number = number

    # -- conversions
    def _lift(self, other: Any) -> Sym[V]:
        if isinstance(other, Sym):
            return other
        return Sym(self.builder, number=float(other))

    def built(self) -> V:
        """The builder value (a constant becomes ``builder.constant``)."""
        return self.builder.constant(self.number) if self.number is not None else self.value

    # -- arithmetic
    def __add__(self, other: Any) -> Sym[V]:
        other = self._lift(other)
        if self.number is not None and other.number is not None:
            return Sym(self.builder, number=self.number + other.number)
        if self.number == 0.0:
            return other
        if other.number == 0.0:
            return self
        return Sym(self.builder, self.builder.add(self.built(), other.built()))

    __radd__ = __add__

    def __neg__(self) -> Sym[V]:
        return self * -1.0

    def __sub__(self, other: Any) -> Sym[V]:
        other = self._lift(other)
        subtract = getattr(self.builder, "subtract", None)
        if subtract is None or self.number is not None and other.number is not None or 0.0 in (self.number,
                                                                                               other.number):
            return self + (-other)
        return Sym(self.builder, subtract(self.built(), other.built()))

    def __rsub__(self, other: Any) -> Sym[V]:
        return self._lift(other) - self

    def __mul__(self, other: Any) -> Sym[V]:
        other = self._lift(other)
        if self.number is not None and other.number is not None:
            return Sym(self.builder, number=self.number * other.number)
        if self.number == 0.0 or other.number == 0.0:
            return Sym(self.builder, number=0.0)
        if self.number == 1.0:
            return other
        if other.number == 1.0:
            return self
        # constants first: ``2*x`` reads as a scaling in every representation
        first, second = (other, self) if other.number is not None else (self, other)
        return Sym(self.builder, self.builder.multiply(first.built(), second.built()))

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Sym[V]:
        other = self._lift(other)
        if other.number is not None:  # IEEE: 1/0 is inf, as the operation would give
            return self * float(np.float64(1.0) / np.float64(other.number))
        if self.number == 0.0:
            return self
        divide = getattr(self.builder, "divide", None)
        if divide is None:  # a builder without division: a · b⁻¹
            return self * other**-1.0
        return Sym(self.builder, divide(self.built(), other.built()))

    def __rtruediv__(self, other: Any) -> Sym[V]:
        return self._lift(other) / self

    def __pow__(self, exponent: Any) -> Sym[V]:
        exponent = self._lift(exponent)
        if exponent.number is None:  # a variable exponent is the table's pow
            return _call(self.builder, "pow", (self, exponent))
        p = exponent.number
        if self.number is not None:
            return Sym(self.builder, number=float(np.float64(self.number) ** p))
        if p == 1.0:
            return self
        if p == 0.0:
            return Sym(self.builder, number=1.0)
        return Sym(self.builder, self.builder.power(self.value, p))

    def __repr__(self) -> str:
        return f"Sym({self.number if self.number is not None else self.value!r})"


def _call(builder: Builder[V], name: str, args: Sequence[Sym[V]]) -> Sym[V]:
    """``name(*args)``, folded to a number when every argument is one."""
    op = get(name)
    if all(a.number is not None for a in args):
        with np.errstate(all="ignore"):
            return Sym(builder, number=float(op.value(*(a.number for a in args))))
    return Sym(builder, builder.call(op.name, [a.built() for a in args]))


class _Functions:
    """``f.cos(x)``: the table's operations as functions on :class:`Sym` values (derivatives use them)."""

    def __init__(self, builder: Builder[Any]) -> None:
        self._builder = builder

    def __getattr__(self, name: str) -> Callable[..., Sym[Any]]:
        get(name)  # unknown names fail here, by name

        def function(*args: Any) -> Sym[Any]:
            lifted = [a if isinstance(a, Sym) else Sym(self._builder, number=float(a)) for a in args]
            return _call(self._builder, name, lifted)

        return function


# ---------------------------------------------------------------------------- the operation record
Derivative = Callable[..., Sequence[Any]]


@dataclass(frozen=True)
class Operation:
    """One elementwise operation.

    Attributes
    ----------
    name : str
        Canonical name (the ``op`` of scalar graph nodes, the function of
        tensor, Iverson and elementwise nodes).
    arity : int
    derivative : callable
        ``derivative(f, *args, out)`` with :class:`Sym` arguments and ``f`` the
        table's functions (``f.cos(x)``); returns one partial per argument (a
        ``Sym``, a number, or :data:`ZERO`).
    numpy : str
        The NumPy/SciPy function that evaluates it (``"np.exp"``,
        ``"scipy.special.erf"``); also its name in printed NumPy code.
    aliases : tuple of str
        NumPy ufunc names and other spellings (``"absolute"``, ``"true_divide"``).
    infix : str
        The operator symbol for infix operations and predicates (``"+"``,
        ``">="``), empty for calls.
    numba : str
        The function in Numba source (default: the NumPy spelling), or a
        template with ``{0}``, ``{1}`` … for the printed arguments where no
        function compiles (``"(1.0 if {0} > 0.0 else 0.0)"``).  A template
        calls another operation of the table as ``{name}`` (``{exp}``): each
        code generator puts its own spelling of that operation there
        (:func:`spelling`), so a vectorized helper reaches the call too.
    cuda : str
        The CUDA C++ function (a libm name or a helper in :data:`CUDA_HELPERS`).
    jax : tuple of str
        The JAX primitives that are this operation (:mod:`jacacc.jaxpr`).
    jnp : str
        The JAX function users call (default: ``jnp.`` or ``jax.scipy.special.``
        with the NumPy name; empty where JAX has none).
    torch : str
        The PyTorch function (benchmark peers, :mod:`jacacc.iverson.arrays`).
    domain : str
        Where the operation is undefined or kinked and the convention there.
    derivative_text : str
        The derivative in words (listings, docs).
    piecewise_constant : bool
        Its derivative is zero wherever it exists.
    costly : bool
        A library call (a square root, an exponential, a trigonometric or
        special function: tens of cycles), not a few instructions: worth
        computing once and storing where it would otherwise be recomputed —
        the tensor evaluator's fused regions materialize it rather than
        recompute it per broadcast element, elementwise derivatives tabulate it
        per argument element (those defined on all reals).
    vector_math : str
        ``"small"`` or ``"large"`` where the loop-kernel layer
        (:mod:`jacacc.kernels`) has a generated arithmetic helper for it
        (``_exp``: inlined, a few ulp) that LLVM vectorizes with the loop
        around it, where a libm call runs one element at a time; empty where
        Numba code calls libm.  A small helper (a polynomial: ``exp``, ``log``,
        ``tanh``) is called by every Numba kernel; a large one (``erf``: a
        Chebyshev recurrence, about 2 s more of Numba compilation per kernel)
        only by the scalar schedules' kernels, one large program whose compile
        time it shares, not by the many small loop kernels of elementwise
        functions and fused regions.
    identity : bool
        Its value is its argument's (``+x``; ``stop_gradient``, whose derivative is not): an
        evaluator that no longer needs the derivative reads the argument instead
        (:func:`jacacc.tensor.evaluate.without_identities`), where NumPy would copy it.
    slow_in_kernels : bool
        NumPy computes it faster than a loop kernel (SIMD implementations of
        the function where a kernel calls libm once per element, which also
        keeps LLVM from vectorizing the rest of the loop): the tensor
        evaluator's fusion leaves it out of its regions.  Measured by
        ``experiments/fusion_threshold.py`` (its kernel of ``f(x) * exp(x)``
        took more than 1.5 times NumPy's three calls on 10⁵ elements).
    """

    name: str
    arity: int
    derivative: Derivative = field(repr=False)
    numpy: str
    aliases: tuple[str, ...] = ()
    infix: str = ""
    numba: str = ""
    cuda: str = ""
    jax: tuple[str, ...] = ()
    jnp: str = ""
    torch: str = ""
    domain: str = "all reals"
    derivative_text: str = ""
    piecewise_constant: bool = False
    costly: bool = False
    vector_math: str = ""
    identity: bool = False
    slow_in_kernels: bool = False

    @property
    def function(self) -> Callable[..., Any]:
        """The NumPy/SciPy callable (imported on first use: SciPy only when needed)."""
        return _import(self.numpy)

    def value(self, *args: Any) -> Any:
        """The operation on numbers or NumPy arrays."""
        return self.function(*args)

    def array_value(self, xp: Any, *args: Any) -> Any:
        """The operation on arrays of the array module ``xp`` (NumPy or CuPy)."""
        if xp is np:
            return self.function(*args)
        module, _, attr = self.numpy.rpartition(".")
        if module == "np" and hasattr(xp, attr):
            return getattr(xp, attr)(*args)
        if module == __name__:  # this module's functions take the arrays of any array module
            return self.function(*args)
        if module == "scipy.special":
            return getattr(importlib.import_module("cupyx.scipy.special"), attr)(*args)
        return getattr(xp, attr)(*args)


_IMPORTED: dict[str, Callable[..., Any]] = {}
_MODULES = {"np": "numpy"}


def _import(spelling: str) -> Callable[..., Any]:
    function = _IMPORTED.get(spelling)
    if function is None:
        module, _, attr = spelling.rpartition(".")
        if module == "jacacc.ops":
            function = globals()[attr]
        else:
            function = getattr(importlib.import_module(_MODULES.get(module, module)), attr)
        _IMPORTED[spelling] = function
    return function


# ---------------------------------------------------------------------------- the registry
#: canonical name -> :class:`Operation`
OPERATIONS: dict[str, Operation] = {}
_NAMES: dict[str, str] = {}  # every name and alias -> canonical name


def declare(name: str, arity: int, numpy: str, derivative: Derivative, **fields: Any) -> Operation:
    """Add an operation to the table (see :class:`Operation` for ``fields``).

    Raises
    ------
    RegistryError
        When ``name`` or an alias is already declared.

    Examples
    --------
    >>> op = declare("example_twice", 1, "np.positive", lambda f, x, out: [2.0], derivative_text="2")
    >>> get("example_twice").name
    'example_twice'
    >>> _ = OPERATIONS.pop("example_twice"), _NAMES.pop("example_twice")
    """
    fields.setdefault("numba", numpy)
    module, _, attr = numpy.rpartition(".")
    fields.setdefault("jnp", {"np": f"jnp.{attr}", "scipy.special": f"jax.scipy.special.{attr}"}.get(module, ""))
    op = Operation(name, arity, derivative, numpy, **fields)
    taken = [n for n in (name, *op.aliases) if n in _NAMES]
    if taken:
        raise RegistryError(f"operation name(s) {', '.join(map(repr, taken))} already declared")
    OPERATIONS[name] = op
    for n in (name, *op.aliases):
        _NAMES[n] = name
    return op


def resolve(name: str) -> str | None:
    """The canonical name of ``name`` (an alias or ufunc name), ``None`` when undeclared.

    Examples
    --------
    >>> resolve("fabs"), resolve("floor")
    ('abs', None)
    """
    return _NAMES.get(name)


def get(name: str) -> Operation:
    """The operation called ``name`` (canonical or alias).

    Raises
    ------
    UnsupportedOperationError
        Naming ``name`` when the table has no such operation.
    """
    canonical = _NAMES.get(name)
    if canonical is None:
        raise UnsupportedOperationError(f"the operation {name!r} is not in jacacc's operation table")
    return OPERATIONS[canonical]


def names(*, arity: int | None = None) -> list[str]:
    """Canonical names, sorted; only those of ``arity`` when given.

    Examples
    --------
    >>> "tanh" in names(arity=1), "tanh" in names(arity=2)
    (True, False)
    """
    return sorted(n for n, op in OPERATIONS.items() if arity is None or op.arity == arity)


def partials(name: str, builder: Builder[V], args: Sequence[V | float], out: V | None,
             active: Sequence[bool] | None = None) -> list[V | Zero]:
    """The local partials ∂out/∂arg of operation ``name``, built by ``builder``.

    Parameters
    ----------
    name : str
    builder : Builder
    args : sequence
        The operands as builder values, or plain numbers for constant operands
        (they fold: ``x**3`` gives ``3*x**2``).
    out : value or None
        The result, reused by derivatives that are cheaper written with it
        (``exp' = out``); ``None`` when the representation has no name for it,
        in which case the operation is applied again.
    active : sequence of bool, optional
        Which operands need a partial; the others get :data:`ZERO`.  Default:
        the operands that are not numbers.

    Returns
    -------
    list
        One builder value or :data:`ZERO` per operand.

    Examples
    --------
    >>> partials("pow", TextBuilder(), ("x", 3.0), "y")
    ['3*x**2', ZERO]
    >>> partials("maximum", TextBuilder(), ("a", "b"), "y")
    ['[a > b] + 0.5*[a == b]', '[a < b] + 0.5*[a == b]']
    """
    op = get(name)
    if len(args) != op.arity:
        raise ValueError(f"{op.name} takes {op.arity} operand(s), got {len(args)}")
    if active is None:
        active = [not isinstance(a, int | float) for a in args]
    if op.piecewise_constant or not any(active):
        return [ZERO] * op.arity
    syms = [Sym(builder, number=float(a)) if isinstance(a, int | float) else Sym(builder, a) for a in args]
    out_sym = Sym(builder, out) if out is not None else _call(builder, op.name, syms)
    with np.errstate(all="ignore"):  # folding a discarded partial may divide by zero
        result = list(op.derivative(_Functions(builder), *syms, out_sym))
    if len(result) != op.arity:  # pragma: no cover - a table entry's own error
        raise ValueError(f"the derivative of {op.name} returned {len(result)} partials for {op.arity} operands")
    return [_finish(builder, p) if on else ZERO for p, on in zip(result, active, strict=True)]


def _finish(builder: Builder[V], partial: Any) -> V | Zero:
    if partial is ZERO:
        return ZERO
    if not isinstance(partial, Sym):
        partial = Sym(builder, number=float(partial))
    if partial.number == 0.0:
        return ZERO
    return partial.built()


class TextBuilder:
    """A builder whose values are formula text: the table's derivatives written out (docs, tests).

    Examples
    --------
    >>> partials("tanh", TextBuilder(), ("x",), "out")
    ['1 - out**2']
    """

    def constant(self, value: float) -> str:
        return f"{value:g}"

    def add(self, a: str, b: str) -> str:
        if b.startswith("-"):
            return f"{a} - {b[1:]}"
        return f"{a} + {b}"

    def multiply(self, a: str, b: str) -> str:
        if a == "-1":
            return f"-{_wrap(b)}"
        return f"{_wrap(a)}*{_wrap(b)}"

    def power(self, a: str, exponent: float) -> str:
        return f"{_wrap(a)}**{exponent:g}"

    def call(self, name: str, args: Sequence[str]) -> str:
        op = get(name)
        if op.piecewise_constant and op.infix:  # a predicate as an Iverson bracket
            return f"[{args[0]} {op.infix} {args[1]}]"
        if op.infix and len(args) == 2:
            return f"{_wrap(args[0])} {op.infix} {_wrap(args[1])}"
        return f"{name}({', '.join(args)})"


def _wrap(text: str) -> str:
    depth = 0
    for ch in text:
        depth += ch in "(["
        depth -= ch in ")]"
        if depth == 0 and ch in " +-" and text[0] != "-":
            return f"({text})"
    return text


# ---------------------------------------------------------------------------- values NumPy lacks
def relu(x: Any) -> Any:
    """``max(x, 0)``, NaN propagating (the JAX ``nn.relu`` value)."""
    return np.maximum(x, 0.0)


def array_module(arrays: Any) -> Any:
    """``cupy`` if any of ``arrays`` is a CuPy array, else ``numpy`` (CuPy is imported only then).

    >>> array_module([np.ones(2), 1.0]) is np
    True
    """
    for a in arrays:
        if type(a).__module__.startswith("cupy"):
            import cupy

            return cupy
    return np


#: Python number types: with float64 arrays they give float64 in every NumPy (NEP 50 or not)
_PYTHON_NUMBERS = (float, int)


def _indicator(condition: Any, *like: Any) -> Any:
    """``condition`` as 1.0 / 0.0 in the floating type of ``like`` (float32 stays float32), an
    array of ``condition``'s array module (NumPy or CuPy)."""
    if type(condition) is np.ndarray and all(type(a) in _PYTHON_NUMBERS or
                                             (type(a) is np.ndarray and a.dtype == np.float64) for a in like):
        # float64 arrays and Python numbers, the common case: float64 without np.result_type and
        # the module lookup (4.0 -> 2.1 µs for [a != 0] on 128 x 8, a step of every max's gradient)
        return condition.astype(np.float64)
    dtype = np.result_type(*(getattr(a, "dtype", a) for a in like))
    xp = array_module((condition, *like))
    return xp.asarray(condition).astype(dtype if np.issubdtype(dtype, np.floating) else np.float64)


def heaviside(x: Any) -> Any:
    """``[x > 0]`` as 1.0 or 0.0: ``relu``'s derivative (0 at 0, as JAX)."""
    return _indicator(array_module((x,)).asarray(x) > 0, x)


def predicate(compare: Callable[..., Any]) -> Callable[..., Any]:
    """``[compare(a, b)]`` as 1.0 or 0.0."""

    def value(a: Any, b: Any) -> Any:
        return _indicator(compare(a, b), a, b)

    value.__name__ = compare.__name__
    return value


gt, ge, lt, le, eq, ne = (predicate(c) for c in (np.greater, np.greater_equal, np.less, np.less_equal, np.equal,
                                                 np.not_equal))


def where(condition: Any, a: Any, b: Any) -> Any:
    """``a`` where ``condition`` is nonzero, else ``b``."""
    return np.where(np.not_equal(condition, 0.0), a, b)


def zero_value(x: Any) -> Any:
    """0 of ``x``'s shape (``tangent_seed``'s value)."""
    return _indicator(array_module((x,)).zeros(np.shape(x), dtype=bool), x)


# ---------------------------------------------------------------------------- the table
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _unary(name: str, numpy: str, derivative: Callable[..., Any], text: str, **fields: Any) -> None:
    """A unary entry; ``derivative(f, x, out)`` returns the one partial."""
    declare(name, 1, numpy, lambda f, x, out: [derivative(f, x, out)], derivative_text=text, **fields)


# -- arithmetic
declare("add", 2, "np.add", lambda f, a, b, out: [1.0, 1.0], infix="+", cuda="+", jax=("add", "add_any"),
        torch="torch.add", derivative_text="1, 1")
declare("sub", 2, "np.subtract", lambda f, a, b, out: [1.0, -1.0], aliases=("subtract",), infix="-", cuda="-",
        jax=("sub",), torch="torch.sub", derivative_text="1, -1")
declare("mul", 2, "np.multiply", lambda f, a, b, out: [b, a], aliases=("multiply",), infix="*", cuda="*",
        jax=("mul",), torch="torch.mul", derivative_text="b, a")
# -a/b**2 written as -out/b reuses the quotient already computed
declare("div", 2, "np.true_divide", lambda f, a, b, out: [1.0 / b, -out / b],
        aliases=("divide", "true_divide", "truediv"), infix="/", cuda="/", jax=("div",), torch="torch.div",
        domain="b ≠ 0", derivative_text="1/b, -out/b")
# y*x**(y-1) rather than y*out/x, which fails at x = 0; constant folding specializes
# both partials (x**3 gives 3*x**2, 2**y gives 0.693...*out)
declare("pow", 2, "np.power", lambda f, x, y, out: [y * x ** (y - 1.0), f.log(x) * out],
        aliases=("power", "float_power"), infix="**", cuda="pow", jax=("pow",), torch="torch.pow",
        domain="x > 0 for a non-integer y; at x = 0 the partial in y is NaN (log 0 · 0)",
        derivative_text="y*x**(y-1), log(x)*out",
        costly=True)
_unary("neg", "np.negative", lambda f, x, out: -1.0, "-1", aliases=("negative",), infix="-", cuda="-",
       jax=("neg",), torch="torch.neg")
_unary("pos", "np.positive", lambda f, x, out: 1.0, "1", aliases=("positive",), cuda="jc_positive",
       torch="torch.positive", identity=True)
_unary("square", "np.square", lambda f, x, out: 2.0 * x, "2*x", cuda="jc_square", jax=("square",),
       torch="torch.square")
_unary("reciprocal", "np.reciprocal", lambda f, x, out: -(out**2), "-out**2", cuda="jc_reciprocal",
       torch="torch.reciprocal", domain="x ≠ 0")

# -- roots, exponentials, logarithms
_unary("sqrt", "np.sqrt", lambda f, x, out: 0.5 / out, "0.5/out", cuda="sqrt", jax=("sqrt",), torch="torch.sqrt",
       domain="x ≥ 0; the derivative is +inf at 0",
       costly=True)
_unary("cbrt", "np.cbrt", lambda f, x, out: (1.0 / 3.0) / out**2, "1/(3*out**2)", cuda="cbrt", jax=("cbrt",),
       domain="all reals; the derivative is +inf at 0",
       costly=True, slow_in_kernels=True)
_unary("exp", "np.exp", lambda f, x, out: out, "out", cuda="exp", jax=("exp",), torch="torch.exp",
       costly=True, vector_math="small")
_unary("exp2", "np.exp2", lambda f, x, out: _LN2 * out, "log(2)*out", cuda="exp2", jax=("exp2",),
       torch="torch.exp2",
       costly=True, slow_in_kernels=True)
_unary("expm1", "np.expm1", lambda f, x, out: out + 1.0, "out + 1", cuda="expm1", jax=("expm1",),
       torch="torch.expm1",
       costly=True, slow_in_kernels=True)
_unary("log", "np.log", lambda f, x, out: 1.0 / x, "1/x", cuda="log", jax=("log",), torch="torch.log",
       domain="x > 0 (NaN below, -inf at 0)",
       costly=True, vector_math="small")
_unary("log2", "np.log2", lambda f, x, out: (1.0 / _LN2) / x, "1/(log(2)*x)", cuda="log2", torch="torch.log2",
       domain="x > 0",
       costly=True, slow_in_kernels=True)
_unary("log10", "np.log10", lambda f, x, out: (1.0 / _LN10) / x, "1/(log(10)*x)", cuda="log10",
       torch="torch.log10", domain="x > 0",
       costly=True, slow_in_kernels=True)
_unary("log1p", "np.log1p", lambda f, x, out: 1.0 / (1.0 + x), "1/(1 + x)", cuda="log1p", jax=("log1p",),
       torch="torch.log1p", domain="x > -1",
       costly=True, slow_in_kernels=True)

# -- trigonometric
_unary("sin", "np.sin", lambda f, x, out: f.cos(x), "cos(x)", cuda="sin", jax=("sin",), torch="torch.sin",
       costly=True)
_unary("cos", "np.cos", lambda f, x, out: -f.sin(x), "-sin(x)", cuda="cos", jax=("cos",), torch="torch.cos",
       costly=True)
_unary("tan", "np.tan", lambda f, x, out: 1.0 + out**2, "1 + out**2", cuda="tan", jax=("tan",), torch="torch.tan",
       domain="x ≠ π/2 + kπ",
       costly=True, slow_in_kernels=True)
_unary("arcsin", "np.arcsin", lambda f, x, out: 1.0 / f.sqrt(1.0 - x**2), "1/sqrt(1 - x**2)", cuda="asin",
       jax=("asin",), torch="torch.asin", domain="|x| ≤ 1; the derivative is +inf at ±1",
       costly=True, slow_in_kernels=True)
_unary("arccos", "np.arccos", lambda f, x, out: -1.0 / f.sqrt(1.0 - x**2), "-1/sqrt(1 - x**2)", cuda="acos",
       jax=("acos",), torch="torch.acos", domain="|x| ≤ 1; the derivative is -inf at ±1",
       costly=True, slow_in_kernels=True)
_unary("arctan", "np.arctan", lambda f, x, out: 1.0 / (1.0 + x**2), "1/(1 + x**2)", cuda="atan", jax=("atan",),
       torch="torch.atan",
       costly=True, slow_in_kernels=True)
declare("arctan2", 2, "np.arctan2", lambda f, y, x, out: [x / (x**2 + y**2), -y / (x**2 + y**2)], cuda="atan2",
        jax=("atan2",), torch="torch.atan2", domain="(y, x) ≠ (0, 0)",
        derivative_text="x/(x**2 + y**2), -y/(x**2 + y**2) for arctan2(y, x)",
        costly=True)
declare("hypot", 2, "np.hypot", lambda f, a, b, out: [a / out, b / out], cuda="hypot", torch="torch.hypot",
        domain="(a, b) ≠ (0, 0)", derivative_text="a/out, b/out",
        costly=True)

# -- hyperbolic
_unary("sinh", "np.sinh", lambda f, x, out: f.cosh(x), "cosh(x)", cuda="sinh", jax=("sinh",), torch="torch.sinh",
       costly=True, slow_in_kernels=True)
_unary("cosh", "np.cosh", lambda f, x, out: f.sinh(x), "sinh(x)", cuda="cosh", jax=("cosh",), torch="torch.cosh",
       costly=True, slow_in_kernels=True)
_unary("tanh", "np.tanh", lambda f, x, out: 1.0 - out**2, "1 - out**2", cuda="tanh", jax=("tanh",),
       torch="torch.tanh",
       costly=True, vector_math="small")
_unary("arcsinh", "np.arcsinh", lambda f, x, out: 1.0 / f.sqrt(x**2 + 1.0), "1/sqrt(x**2 + 1)", cuda="asinh",
       jax=("asinh",), torch="torch.asinh",
       costly=True, slow_in_kernels=True)
_unary("arccosh", "np.arccosh", lambda f, x, out: 1.0 / f.sqrt(x**2 - 1.0), "1/sqrt(x**2 - 1)", cuda="acosh",
       jax=("acosh",), torch="torch.acosh", domain="x ≥ 1; the derivative is +inf at 1",
       costly=True, slow_in_kernels=True)
_unary("arctanh", "np.arctanh", lambda f, x, out: 1.0 / (1.0 - x**2), "1/(1 - x**2)", cuda="atanh",
       jax=("atanh",), torch="torch.atanh", domain="|x| < 1",
       costly=True, slow_in_kernels=True)

# -- piecewise: Iverson brackets, conventions at the kinks as JAX
# JAX's abs JVP is select(x >= 0, t, -t): the derivative at the kink is +1
_unary("abs", "np.absolute", lambda f, x, out: 2.0 * f.ge(x, 0.0) - 1.0, "2*[x >= 0] - 1",
       aliases=("absolute", "fabs"), cuda="fabs", jax=("abs",), torch="torch.abs",
       domain="kink at 0, where the derivative is +1 (as JAX)")
_unary("sign", "np.sign", lambda f, x, out: ZERO, "0", cuda="jc_sign", jax=("sign",), torch="torch.sign",
       piecewise_constant=True, domain="jump at 0; derivative 0 everywhere (as JAX)")
_unary("relu", "jacacc.ops.relu", lambda f, x, out: f.heaviside(x), "heaviside(x)", cuda="jc_relu", jnp="jax.nn.relu",
       numba="({0} if {0} > 0.0 or {0} != {0} else 0.0)",
       torch="torch.relu", domain="kink at 0, where the derivative is 0 (as jax.nn.relu)")
_unary("heaviside", "jacacc.ops.heaviside", lambda f, x, out: ZERO, "0", cuda="jc_heaviside",
       numba="(1.0 if {0} > 0.0 else 0.0)",
       piecewise_constant=True, domain="[x > 0]: jump at 0, derivative 0 everywhere")
# at a tie each operand takes half, as jax.numpy.maximum and autograd: the partials sum to 1
declare("maximum", 2, "np.maximum", lambda f, a, b, out: [f.gt(a, b) + 0.5 * f.eq(a, b),
                                                          f.lt(a, b) + 0.5 * f.eq(a, b)],
        cuda="jc_maximum", jax=("max",), torch="torch.maximum",
        domain="kink where a = b: each partial is 1/2 there (as JAX); NaN propagates",
        derivative_text="[a > b] + [a = b]/2, [a < b] + [a = b]/2")
declare("minimum", 2, "np.minimum", lambda f, a, b, out: [f.lt(a, b) + 0.5 * f.eq(a, b),
                                                          f.gt(a, b) + 0.5 * f.eq(a, b)],
        cuda="jc_minimum", jax=("min",), torch="torch.minimum",
        domain="kink where a = b: each partial is 1/2 there (as JAX); NaN propagates",
        derivative_text="[a < b] + [a = b]/2, [a > b] + [a = b]/2")
# fmax / fmin return the other operand where one is NaN, so that operand's partial is 1 there
# ([b ≠ b] is 1 exactly where b is NaN)
declare("fmax", 2, "np.fmax", lambda f, a, b, out: [f.gt(a, b) + 0.5 * f.eq(a, b) + f.ne(b, b),
                                                    f.lt(a, b) + 0.5 * f.eq(a, b) + f.ne(a, a)],
        cuda="fmax", torch="torch.fmax", domain="as maximum, ignoring a NaN operand",
        derivative_text="[a > b] + [a = b]/2 + [b is NaN], [a < b] + [a = b]/2 + [a is NaN]")
declare("fmin", 2, "np.fmin", lambda f, a, b, out: [f.lt(a, b) + 0.5 * f.eq(a, b) + f.ne(b, b),
                                                    f.gt(a, b) + 0.5 * f.eq(a, b) + f.ne(a, a)],
        cuda="fmin", torch="torch.fmin", domain="as minimum, ignoring a NaN operand",
        derivative_text="[a < b] + [a = b]/2 + [b is NaN], [a > b] + [a = b]/2 + [a is NaN]")
# log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)); the partials are logistic(a - b) and
# logistic(b - a), written with out so that large operands do not overflow
declare("logaddexp", 2, "np.logaddexp", lambda f, a, b, out: [f.exp(a - out), f.exp(b - out)],
        cuda="jc_logaddexp", torch="torch.logaddexp",
        derivative_text="exp(a - out), exp(b - out)",
        costly=True, vector_math="small")

# -- special functions
_unary("erf", "scipy.special.erf", lambda f, x, out: _TWO_OVER_SQRT_PI * f.exp(-(x**2)), "2/sqrt(pi)*exp(-x**2)",
       numba="math.erf", cuda="erf", jax=("erf",), torch="torch.erf",
       costly=True, vector_math="large", slow_in_kernels=True)
_unary("erfc", "scipy.special.erfc", lambda f, x, out: -_TWO_OVER_SQRT_PI * f.exp(-(x**2)),
       "-2/sqrt(pi)*exp(-x**2)", numba="math.erfc", cuda="erfc", jax=("erfc",), torch="torch.erfc",
       costly=True, slow_in_kernels=True)
_unary("logistic", "scipy.special.expit", lambda f, x, out: out * (1.0 - out), "out*(1 - out)",
       aliases=("expit",), cuda="jc_logistic", jnp="jax.nn.sigmoid", numba="(1.0 / (1.0 + {exp}(-({0}))))",
       jax=("logistic",),
       torch="torch.sigmoid",
       costly=True)

# -- predicates: [a > b] etc. as 1.0 or 0.0, piecewise constant
for _name, _symbol, _ufunc in (("gt", ">", "greater"), ("ge", ">=", "greater_equal"), ("lt", "<", "less"),
                               ("le", "<=", "less_equal"), ("eq", "==", "equal"), ("ne", "!=", "not_equal")):
    declare(_name, 2, f"jacacc.ops.{_name}", lambda f, a, b, out: [ZERO, ZERO], aliases=(_ufunc,), infix=_symbol,
            jnp=f"jnp.{_ufunc}", torch=f"torch.{_name}", cuda=_symbol,
            jax=(_name,), piecewise_constant=True, derivative_text="0, 0",
            domain=f"the predicate [a {_symbol} b] as 1.0 or 0.0: derivative 0 everywhere")
del _name, _symbol, _ufunc

# -- front ends (jacacc.jaxpr): a two-way select, stop_gradient and its complement
declare("where", 3, "jacacc.ops.where", lambda f, c, a, b, out: [ZERO, f.ne(c, 0.0), f.eq(c, 0.0)],
        cuda="jc_where", numba="({1} if {0} != 0.0 else {2})", jnp="jnp.where", jax=("select_n",), torch="torch.where",
        domain="the branch not taken has derivative 0", derivative_text="0, [c != 0], [c == 0]")
_unary("stop_gradient", "np.positive", lambda f, x, out: ZERO, "0 (the value passes, the derivative does not)",
       cuda="jc_positive", jnp="jax.lax.stop_gradient", jax=("stop_gradient",), identity=True)
# A custom JVP rule is run on the primal stop_gradient(x) and the tangent tangent_seed(x), so
# its partials are the rule's; x − stop_gradient(x) would have the derivative but be NaN at ±inf.
_unary("tangent_seed", "jacacc.ops.zero_value", lambda f, x, out: 1.0, "1 (the value is 0, the derivative passes)",
       cuda="jc_zero", jnp="")


#: CUDA C++ device helpers for the operations C spells differently (``real`` is the kernel's float type)
CUDA_HELPERS = """\
// NumPy's semantics for the operations C spells differently
__device__ __forceinline__ real jc_sign(real a) { return a > 0 ? (real)1 : (a < 0 ? (real)-1 : a); }
__device__ __forceinline__ real jc_square(real a) { return a * a; }
__device__ __forceinline__ real jc_reciprocal(real a) { return (real)1 / a; }
__device__ __forceinline__ real jc_positive(real a) { return a; }
__device__ __forceinline__ real jc_zero(real a) { return (real)0; }
__device__ __forceinline__ real jc_relu(real a) { return (a > 0 || a != a) ? a : (real)0; }
__device__ __forceinline__ real jc_heaviside(real a) { return a > 0 ? (real)1 : (real)0; }
// np.maximum / np.minimum propagate NaN (fmax / fmin ignore it)
__device__ __forceinline__ real jc_maximum(real a, real b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ real jc_minimum(real a, real b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ real jc_logaddexp(real a, real b) {
    real m = (a > b || a != a) ? a : b;
    return isinf(m) ? m : m + log1p(exp(-fabs(a - b)));  // both infinite: no NaN from a - b
}
// the front ends' rules: where(c, a, b) picks a where c is nonzero; logistic
__device__ __forceinline__ real jc_where(real c, real a, real b) { return c != (real)0 ? a : b; }
__device__ __forceinline__ real jc_logistic(real a) { return (real)1 / ((real)1 + exp(-a)); }
"""


# -- the Numba helpers of the vector_math operations
# exp, log and erf in plain arithmetic (no library call), so that LLVM vectorizes the block loop
# through them: a libm call inside a vectorized loop is made once per lane, and every vector
# register live across it is spilled and reloaded.  exp: x = k ln2 + r (Cody-Waite), Taylor
# polynomial of degree 13 on |r| <= ln2/2 (truncation < 5e-18), 2^k as two exponent-bit factors
# (subnormal results, no overflow of the scale).  log: x = m 2^e with m in [1/sqrt2, sqrt2),
# log m = 2 atanh(f), f = (m-1)/(m+1), |f| <= 0.172, odd series to f^23 (truncation < 1e-18).
# erf: erf(x)/x on [0, 1] and erfc(x) exp(x^2) on [1, 3] and [3, 6] as Chebyshev series of
# degree 24 (interpolation at 25 Chebyshev nodes in 40-digit mpmath arithmetic; the last
# coefficients are < 1e-18 of the first), summed by Clenshaw's recurrence with the interval's
# coefficients chosen per lane; erf = 1 beyond 6.  Accuracy: a few ulp (tests: 1e-14 relative).

_ERF_0_1 = (
    1.013017938436931, -0.14750420530926206, -0.027729634080096602, 0.004752966284637892,
    0.00025196196008550934, -8.912601846903248e-05, -2.543514614684977e-07, 1.1901332279884313e-06,
    -3.256505357133642e-08, -1.2263965511606946e-08, 6.297474950250667e-10, 1.0161866833434493e-10,
    -7.609212205474058e-12, -6.906471246826706e-13, 7.089623326506998e-14, 3.854359549737529e-15,
    -5.4734799562779915e-16, -1.7154881555112374e-17, 3.6317872592241404e-18, 5.3894778242634077e-20,
    -2.1178570827314786e-20, -4.0168199781994815e-23, 1.101960179759119e-22, -9.942166294197988e-25,
    -5.193807059951604e-25,
)
_ERFCX_1_3 = (
    0.2785389365977923, -0.11964641832736307, 0.02392588774648554, -0.004503974067265867,
    0.0008045451692536015, -0.00013720361484011932, 2.244458275373349e-05, -3.535572865202117e-06,
    5.380083091307861e-07, -7.92969488788695e-08, 1.1346142347924916e-08, -1.579118251021591e-09,
    2.1413966089607892e-10, -2.8336608279151752e-11, 3.6639154492636035e-12, -4.634539763843172e-13,
    5.741110562829963e-14, -6.971613081019351e-15, 8.306159448233229e-16, -9.717289575388913e-17,
    1.1170873596296705e-17, -1.2627574442788551e-18, 1.4044753779626395e-19, -1.537689736443607e-20,
    1.6402561792868998e-21,
)
_ERFCX_3_6 = (
    0.12902689965474168, -0.0420426781395118, 0.006698487121092753, -0.0010450916791743758,
    0.00015985899884949414, -2.3998261587238652e-05, 3.53906410506357e-06, -5.131303200649095e-07,
    7.320268611264974e-08, -1.0282193129248155e-08, 1.4229088707596404e-09, -1.9411157958365732e-10,
    2.611796346594898e-11, -3.4677962235781513e-12, 4.5456029570973385e-13, -5.884864531875017e-14,
    7.527649782554211e-15, -9.51743765070784e-16, 1.189783691087231e-16, -1.471105478536267e-17,
    1.799615101685757e-18, -2.1787131631333446e-19, 2.6110895843210425e-20, -3.097995840397878e-21,
    3.5928700001861414e-22,
)

_LN2_HI, _LN2_LO = 0.6931471803691238, 1.9082149292705877e-10


def _horner(var: str, coefficients: Sequence[float]) -> str:
    """Horner's form of the polynomial with ``coefficients`` (constant first) in ``var``, as source."""
    text = repr(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        text = f"({text})*{var} + {c!r}"
    return text


#: exp(r) on |r| ≤ 1.0005·ln2/2 as a polynomial of degree 11, constant first: Chebyshev
#: interpolation at 12 nodes in 50-digit arithmetic (mpmath), rounded to doubles — within 1.4 ulp
#: of exp(r) at 20001 points of the interval, where the Taylor series needs degree 13 (a 256 × 64
#: kernel of exp(A + b) 9 % faster; 1 ulp at most against NumPy either way)
_EXP_P = (
    1.0, 1.0, 0.5000000000000019, 0.1666666666666668, 0.04166666666648738, 0.008333333333319546,
    0.0013888888952505406, 0.00019841269890193705, 2.4801485278370062e-05, 2.7557240761739257e-06,
    2.7632715071632255e-07, 2.5110095611886237e-08,
)


def _exp_helper() -> list[str]:
    return [
        "def _exp(x):",
        "    k = np.floor(x * 1.4426950408889634 + 0.5)",
        "    k = k if k < 1100.0 else 1100.0",
        "    k = k if k > -1100.0 else -1100.0",
        f"    r = (x - k * {_LN2_HI!r}) - k * {_LN2_LO!r}",
        f"    p = {_horner('r', _EXP_P)}",
        "    ki = np.int64(k)",
        "    h = ki >> 1",
        "    y = p * np.int64((h + 1023) << 52).view(np.float64) * np.int64((ki - h + 1023) << 52).view(np.float64)",
        "    y = y if x < 709.782712893384 else np.inf",
        "    y = y if x > -745.1332191019412 else 0.0",
        "    return y if x == x else x",
    ]


def _log_helper() -> list[str]:
    log_series = [2.0 / (2 * j + 1) for j in range(12)]
    return [
        "def _log(x):",
        "    tiny = x < 2.2250738585072014e-308",
        "    b = np.float64(x * 18014398509481984.0 if tiny else x).view(np.int64)",
        "    e = (b >> 52) - (1077 if tiny else 1023)",
        "    m = np.int64((b & 4503599627370495) | 4607182418800017408).view(np.float64)",
        "    big = m > 1.4142135623730951",
        "    m = m * 0.5 if big else m",
        "    ef = np.float64(e + 1 if big else e)",
        "    f = (m - 1.0) / (m + 1.0)",
        "    s = f * f",
        f"    y = ef * {_LN2_HI!r} + (f * ({_horner('s', log_series)}) + ef * {_LN2_LO!r})",
        "    y = y if x > 0.0 else (-np.inf if x == 0.0 else np.nan)",
        "    return y if x < np.inf else x",
    ]


def _logaddexp_helper() -> list[str]:
    # max(a, b) + log1p(e), e = exp(-|a - b|) in (0, 1], as NumPy computes it; log1p(e) as
    # log(u)·e/(u − 1) with u = 1 + e rounded (exact to a few ulp where e is tiny and log(u) alone
    # would lose it, Goldberg's theorem 4).  Infinities of one sign twice: a − b is NaN, the sum is a.
    return [
        "def _logaddexp(a, b):",
        "    m = a if a > b else b",
        "    d = a - b",
        "    e = _exp(-abs(d))",
        "    u = 1.0 + e",
        "    v = u - 1.0",
        "    s = _log(u) * (e / (v if v != 0.0 else 1.0))",  # no division by zero under Python's error model
        "    s = e if v == 0.0 else s",
        "    y = m + s",
        "    return a if (a == b) & (d != d) else y",
    ]


#: q(r) = (expm1(r) − r)/r² on |r| ≤ 1.0005·ln2/2 as a polynomial of degree 9, constant first:
#: Chebyshev interpolation at 10 nodes in 50-digit arithmetic (mpmath), rounded to doubles.  With
#: it, r + r²·q(r) is within 1.42 ulp of expm1(r) at 20001 points of the interval; the Taylor
#: series needs degree 12 for the same (three more multiply-adds per element)
_EXPM1_Q = (
    0.5000000000000001, 0.16666666666666669, 0.04166666666662399, 0.008333333333330051,
    0.0013888888917281794, 0.00019841269863105968, 2.480152119021773e-05, 2.7557268378684192e-06,
    2.7620138719733994e-07, 2.5100424157005067e-08,
)


def _tanh_helper() -> list[str]:
    # tanh |x| = e / (e + 2), e = expm1(2|x|) = 2^k (expm1(r) + 1) − 1 with 2|x| = k ln2 + r and
    # expm1(r) = r + r²·q(r) (exact at k = 0: no cancellation for small x); ±1 from |x| = 20 on
    # (tanh rounds to 1 from 19.06); the sign, that of -0.0 included, copied from x.  Measured: 3 ulp
    # at most against NumPy; a 256 × 64 kernel of tanh(A + b) 21 % faster than with the Taylor
    # polynomial of degree 12 and two selects for the sign.
    return [
        "def _tanh(x):",
        "    a = abs(x)",
        "    y = 2.0 * (a if a < 20.0 else 20.0)",
        "    k = np.floor(y * 1.4426950408889634 + 0.5)",
        f"    r = (y - k * {_LN2_HI!r}) - k * {_LN2_LO!r}",
        f"    p = r + r * r * ({_horner('r', _EXPM1_Q)})",
        "    scale = np.int64((np.int64(k) + 1023) << 52).view(np.float64)",
        "    e = scale * p + (scale - 1.0)",
        "    t = e / (e + 2.0)",
        "    t = np.copysign(1.0 if a >= 20.0 else t, x)",
        "    return t if x == x else x",
    ]


def _erf_helper() -> list[str]:
    tables = (_ERF_0_1, _ERFCX_1_3, _ERFCX_3_6)  # on [0, 1], [1, 3], [3, 6]
    lines = [
        "def _erf(x):",
        "    a = abs(x)",
        "    r0 = a < 1.0",
        "    r1 = a < 3.0",
        "    t = 2.0 * a - 1.0 if r0 else (a - 2.0 if r1 else (2.0 * a - 9.0) / 3.0)",
        "    t2 = 2.0 * t",
        "    b1 = 0.0",
        "    b2 = 0.0",
    ]
    for j in range(len(_ERF_0_1) - 1, 0, -1):
        c0, c1, c2 = (repr(table[j]) for table in tables)
        lines.append(f"    b1, b2 = t2 * b1 - b2 + ({c0} if r0 else ({c1} if r1 else {c2})), b1")
    c0, c1, c2 = (repr(table[0]) for table in tables)
    lines += [
        f"    y = t * b1 - b2 + ({c0} if r0 else ({c1} if r1 else {c2}))",
        "    g = _exp(-a * a)",  # out of the conditional: inline_helpers writes it into the statements
        "    e = a * y if r0 else 1.0 - g * y",
        "    e = 1.0 if a >= 6.0 else e",
        "    return -e if x < 0.0 else e",
    ]
    return lines


#: Numba source of the helper ``_name`` of each operation flagged :attr:`Operation.vector_math` (no
#: decorator): plain arithmetic that LLVM vectorizes with the loop around it, a few ulp from libm.  A
#: helper may call another (``_erf`` calls ``_exp``; ``_logaddexp``, of two arguments, ``_exp`` and ``_log``); :mod:`jacacc.kernels.functions` writes the ones a
#: module needs, :mod:`jacacc.kernels.inline` writes their calls into the statements that make them.
NUMBA_HELPERS: dict[str, str] = {name: "\n".join(make()) for name, make in
                                 (("exp", _exp_helper), ("log", _log_helper), ("logaddexp", _logaddexp_helper),
                                  ("tanh", _tanh_helper), ("erf", _erf_helper))}
_unhelped = {op.name for op in OPERATIONS.values() if op.vector_math} - set(NUMBA_HELPERS)
if _unhelped or {op.vector_math for op in OPERATIONS.values()} - {"", "small", "large"}:
    raise RegistryError(f"vector_math is 'small' or 'large' on operations with a NUMBA_HELPERS entry; "
                        f"no helper for {sorted(_unhelped)}")
del _unhelped


def jax_primitives() -> Mapping[str, str]:
    """JAX primitive name -> canonical operation name, for :mod:`jacacc.jaxpr`.

    Examples
    --------
    >>> jax_primitives()["asin"], jax_primitives()["max"]
    ('arcsin', 'maximum')
    """
    return {prim: op.name for op in OPERATIONS.values() for prim in op.jax}


#: the code generators whose spellings :func:`spelling` knows: the attribute of :class:`Operation`
_SPELLINGS = ("numpy", "numba", "cuda", "torch")
#: ``{name}`` in a template: a call of another operation of the table
_REFERENCE = re.compile(r"\{([A-Za-z_][A-Za-z_0-9]*)\}")


def spelling(name: str, backend: str, functions: Mapping[str, str] | None = None) -> str:
    """How ``backend`` (``numpy``, ``numba``, ``cuda``, ``torch``) spells the operation ``name``: a
    function, or a template with ``{0}``, ``{1}`` … for the arguments, in which a call of another
    operation of the table (``{exp}``) is that operation's spelling.  ``functions`` (canonical name
    -> spelling: a code generator's own helpers, ``{"exp": "_exp"}``) replaces the table's
    spelling of the operations it names, wherever they are called.  Empty where the backend has none.

    Examples
    --------
    >>> spelling("logistic", "numba")
    '(1.0 / (1.0 + np.exp(-({0}))))'
    >>> spelling("logistic", "numba", {"exp": "_exp"}), spelling("exp", "numba", {"exp": "_exp"})
    ('(1.0 / (1.0 + _exp(-({0}))))', '_exp')
    """
    if backend not in _SPELLINGS:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(_SPELLINGS)}")
    op = get(name)
    if functions is not None and op.name in functions:
        return functions[op.name]
    text = getattr(op, backend)
    if "{" not in text:
        return text

    return _REFERENCE.sub(lambda match: spelling(match.group(1), backend, functions), text)


def spellings(backend: str, functions: Mapping[str, str] | None = None) -> dict[str, str]:
    """Canonical name -> function spelling for ``backend`` (``numpy``, ``numba``, ``cuda``, ``torch``):
    :func:`spelling` of every operation (``functions`` as there).

    Operations without a spelling for the backend are left out.

    Examples
    --------
    >>> spellings("cuda")["arcsin"], spellings("numba")["erf"], spellings("numpy")["abs"]
    ('asin', 'math.erf', 'np.absolute')
    """
    if backend not in _SPELLINGS:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(_SPELLINGS)}")
    return {name: spelling(name, backend, functions) for name, op in OPERATIONS.items() if getattr(op, backend)}


def iterate() -> Iterator[Operation]:
    """Every operation, in declaration order."""
    return iter(OPERATIONS.values())
