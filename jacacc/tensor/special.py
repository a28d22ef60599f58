"""SciPy's special functions on traced arrays: the log-gamma family, the gamma and beta functions,
Bessel functions, the inverse error functions, the incomplete gamma and beta functions and
``logit`` (issue 41).

``scipy.special``'s functions are ufuncs: a traced argument reaches them through NumPy's
``__array_ufunc__`` protocol, dispatched by the ufunc's name.  Each is a general function
(:mod:`jacacc.tensor.operators`) whose forward is SciPy's own, so values are SciPy's, and whose
pushforward and pullback multiply by its partial derivatives *written with traced operations* —
the same functions one order up, or the function's own output — so the derivative of a
derivative exists and derivatives of every order follow, in every mode.

Two operators carry them:

* ``polygamma`` of order ``n``: order −1 is ``gammaln`` (``log|Γ(x)|``, real at every real ``x``
  that is not a pole), 0 ``digamma`` (``psi``), ``n ≥ 1`` ``polygamma(n, x)``; its derivative is
  the same operator one order up (``d/dx ψ⁽ⁿ⁾ = ψ⁽ⁿ⁺¹⁾``, ``d/dx log Γ = ψ``).  ``betaln`` and
  ``multigammaln`` are sums of ``gammaln``.
* ``scipy_special``: any other function below, its SciPy name an option.  Its arguments are
  broadcast to one shape; an argument whose derivative has no closed form (an order, a shape
  parameter) must be constant, and a traced one is refused in one line naming the function and
  the argument (``scipy.special.jv with a traced order v is not supported by jacacc.tensor``;
  ``jacacc.tensor`` traces every float argument of the differentiated function, so such a
  constant is closed over, or passed as an integer array).  The partials (``x`` the differentiated argument, ``y`` SciPy's value):

  - ``gamma``: ``y·ψ(x)``; ``rgamma`` (``1/Γ``): ``−y·ψ(x)``; ``gammasgn``: 0;
  - ``beta(a, b)``: ``y·(ψ(a) − ψ(a + b))`` in ``a``, ``y·(ψ(b) − ψ(a + b))`` in ``b``;
  - Bessel functions of a constant real order ``v`` — ``jv`` (``jn``), ``yv``, ``yn`` (an integer
    order), ``iv``, ``kv``, the exponentially scaled ``ive`` and ``kve``, and the fixed orders
    ``j0 j1 y0 y1 i0 i1 i0e i1e k0 k1 k0e k1e`` — by the recurrences ``J'ᵥ = (Jᵥ₋₁ − Jᵥ₊₁)/2``
    (``Y`` likewise), ``I'ᵥ = (Iᵥ₋₁ + Iᵥ₊₁)/2``, ``K'ᵥ = −(Kᵥ₋₁ + Kᵥ₊₁)/2``,
    ``ive'ᵥ = (iveᵥ₋₁ + iveᵥ₊₁)/2 − sign(x)·iveᵥ``, ``kve'ᵥ = −(kveᵥ₋₁ + kveᵥ₊₁)/2 + kveᵥ``
    (``jv``/``yv``/``iv``/``kv``/``ive``/``kve`` at the neighbouring orders, whose own derivatives
    recur in turn);
  - inverses, through their value: ``erfinv``: ``(√π/2)·exp(y²)``; ``erfcinv``:
    ``−(√π/2)·exp(y²)``; ``ndtri``: ``√(2π)·exp(y²/2)``; the normal distribution ``ndtr``:
    ``φ(x) = exp(−x²/2)/√(2π)``, ``log_ndtr``: ``exp(−x²/2 − y)/√(2π)`` (as JAX's; for
    ``x ≪ 0`` the exponent, a difference of two numbers near ``−x²/2``, keeps about
    ``16 − log₁₀(x²)`` digits);
  - ``logit``: ``1/(x(1 − x))``;
  - the regularized incomplete gamma functions in ``x`` (the shape ``a`` constant):
    ``gammainc``: ``exp((a − 1)·log x − x − log Γ(a))``, ``gammaincc`` its negative; the
    regularized incomplete beta functions in ``x`` (``a`` and ``b`` constant): ``betainc``:
    ``exp((a − 1)·log x + (b − 1)·log(1 − x) − log B(a, b))``, ``betaincc`` its negative.
    ``(a − 1)·log x`` is ``xlogy``, and where ``a = 1`` it is 0 without reading ``x``
    (:func:`xlogy_constant`), so the derivative at ``x = 0`` is the one-sided limit: 1 for
    ``a = 1`` (every order there: ``P(1, x) = 1 − e^(−x)``), 0 for ``a > 1``, ``inf`` for
    ``a < 1`` (JAX's ``gammainc`` gives NaN at ``a = 1``, ``x = 0``); likewise at ``x = 1`` with
    ``b``.  Higher derivatives at ``x = 0`` for ``a ≠ 1`` are NaN or infinite, as JAX's.

:func:`elementwise_operator` and :func:`apply_elementwise` are the machinery of
``scipy_special``, shared with the cumulative distribution functions of
:mod:`jacacc.tensor.scipy_functions`.

Examples
--------
>>> import numpy as np, scipy.special
>>> import jacacc.tensor as jt
>>> x = np.array([0.5, 2.0, 7.5])
>>> np.allclose(jt.grad(lambda x: np.sum(scipy.special.gammaln(x)))(x), scipy.special.digamma(x))
True
>>> np.allclose(np.diag(jt.hessian(lambda x: np.sum(scipy.special.gammaln(x)))(x)), scipy.special.polygamma(1, x))
True
>>> g = jt.grad(lambda x: np.sum(scipy.special.jv(2.5, x)))(x)          # (J₁.₅ − J₃.₅)/2
>>> np.allclose(g, (scipy.special.jv(1.5, x) - scipy.special.jv(3.5, x)) / 2)
True
>>> y = np.array([-0.5, 0.1, 0.9])
>>> h = jt.hessian(lambda y: np.sum(scipy.special.erfinv(y)))(y)        # (π/2)·x·exp(2x²), x = erfinv(y)
>>> x = scipy.special.erfinv(y)
>>> np.allclose(np.diag(h), np.pi / 2 * x * np.exp(2 * x ** 2))
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc.errors import TraceError, UnsupportedOperationError
from jacacc.tensor import expr as E
from jacacc.tensor.arrays import _hadamard
from jacacc.tensor.expr import Tensor
from jacacc.tensor.library import register_library
from jacacc.tensor.operators import Operator, apply_operator, register_operator
from jacacc.tensor.trace import _UFUNCS, Traced, _broadcast_to, _node

__all__ = ["apply_elementwise", "elementwise_operator", "xlog1py_constant", "xlogy_constant"]


# ---------------------------------------------------------------------------- the log-gamma family
def _forward(x: np.ndarray, order: int) -> np.ndarray:
    import scipy.special

    if order == -1:
        return scipy.special.gammaln(x)
    if order == 0:
        return scipy.special.digamma(x)
    # SciPy's own formula, (-1)ⁿ⁺¹ Γ(n + 1) ζ(n + 1, x), without its Python wrapper's broadcasting
    # (5.2 against 0.75 µs for one value; trigamma is every Hessian of a gammaln)
    factor = (-1.0) ** (order + 1) * scipy.special.gamma(order + 1.0)
    value = scipy.special.zeta(order + 1.0, x)
    return value if factor == 1.0 else factor * value


def _next_order(args: tuple[Tensor, ...], order: int) -> Tensor:
    (derivative,) = apply_operator("polygamma", [args[0]], order=order + 1)
    return derivative


def _jvp(outputs: Any, args: tuple[Tensor, ...], tangents: tuple[Tensor, ...], order: int) -> tuple:
    return (_hadamard(_next_order(args, order), tangents[0]),)


# the pullback is the pushforward's transpose: the same elementwise product (jacacc.tensor.transpose)
register_operator(Operator("polygamma", _forward, lambda shape, **_: (shape,), _jvp,
                           flops=lambda shape, **_: 20 * math.prod(shape),  # a series per element
                           batch=lambda batch_shape, args, flags, **options: (args, options)))


def _polygamma_of(x: Any, order: int) -> Traced:
    (value,) = apply_operator("polygamma", [_node(x)], order=order)
    return Traced(value)


def _gammaln(x: Any) -> Traced:
    return _polygamma_of(x, -1)


def _digamma(x: Any) -> Traced:
    return _polygamma_of(x, 0)


def _betaln(a: Any, b: Any) -> Any:
    """``log|B(a, b)| = log Γ(a) + log Γ(b) − log Γ(a + b)``, as scipy.special.betaln."""
    return _gammaln(a) + _gammaln(b) - _gammaln(a + b)


_UFUNCS.update({"gammaln": _gammaln, "psi": _digamma, "betaln": _betaln})


@register_library("scipy.special:polygamma", "scipy.special._basic:polygamma")
def _polygamma(n: Any, x: Any) -> Traced:
    if isinstance(n, Traced) or np.ndim(n) != 0 or int(n) != n or n < 0:
        raise UnsupportedOperationError("scipy.special.polygamma(n, x) is supported by jacacc.tensor for a constant "
                                        f"integer order n >= 0, got {n!r}")
    return _polygamma_of(x, int(n))


@register_library("scipy.special:multigammaln", "scipy.special._spfun_stats:multigammaln")
def _multigammaln(a: Any, d: Any) -> Any:
    """``log Γ_d(a) = d(d−1)/4 · log π + Σ_{j<d} log Γ(a − j/2)``, as scipy.special.multigammaln."""
    if isinstance(d, Traced) or int(d) != d or d < 1:
        raise UnsupportedOperationError(f"scipy.special.multigammaln needs a constant integer d >= 1, got {d!r}")
    d = int(d)
    total = d * (d - 1) / 4.0 * math.log(math.pi)
    for j in range(d):
        total = total + _gammaln(a - j / 2.0)
    return total


# ---------------------------------------------------------------------------- elementwise general functions
#: operator name → its partial derivatives: ``partial(k, arguments, value, **options)``
_PARTIALS: dict[str, Callable[..., Any]] = {}


def elementwise_operator(name: str, forward: Callable[..., Any], partial: Callable[..., Any],
                         flops_per_element: int = 40) -> None:
    """Register the elementwise general function ``name`` of arguments of one shape.

    Parameters
    ----------
    name : str
        The operator's name (:func:`~jacacc.tensor.operators.apply_operator`).
    forward : callable
        ``forward(*arrays, **options)`` → the value, an array of the arguments' shape (NumPy).
    partial : callable
        ``partial(k, arguments, value, **options)`` → the derivative of the value in argument
        ``k``, elementwise, written with traced operations (``None``: zero).  ``arguments`` holds
        a :class:`~jacacc.tensor.trace.Traced` array for each argument that is not constant and
        the constant's array for each one that is; ``value`` is the operator's output, traced.
        Since the partial is itself traced, the derivative of the derivative follows.
    flops_per_element : int
        The forward's FLOPs per entry, for the cost reported by ``.flops``.

    Examples
    --------
    >>> import jacacc.tensor as jt
    >>> elementwise_operator("cube_example", lambda x: x ** 3, lambda k, args, y: 3 * args[0] ** 2)
    >>> jt.grad(lambda x: np.sum(apply_elementwise("cube_example", [x])))(np.array([1.0, 2.0])).tolist()
    [3.0, 12.0]
    """
    def jvp(outputs: tuple[Tensor, ...], args: tuple[Tensor, ...], tangents: tuple[Tensor, ...],
            **options: Any) -> tuple[Tensor]:
        derivatives = _partials(name, outputs, args, tangents, options)
        return (E.add(E.zeros(outputs[0].shape), *(_hadamard(d, t) for d, t in zip(derivatives, tangents, strict=True)
                                                 if d is not None)),)

    _PARTIALS[name] = partial
    # the pullback is the pushforward's transpose (jacacc.tensor.transpose): each partial times the cotangent
    register_operator(Operator(name, forward, _one_shape(name), jvp,
                               flops=lambda *shapes, **_: flops_per_element * math.prod(shapes[0]), batch=_batch))


def _one_shape(name: str) -> Callable[..., tuple[tuple[int, ...]]]:
    def shapes(*shapes: tuple[int, ...], **options: Any) -> tuple[tuple[int, ...]]:
        if any(s != shapes[0] for s in shapes):
            raise ValueError(f"{name}: arguments of shapes {shapes} (one shape expected: apply_elementwise broadcasts)")
        return (shapes[0],)

    return shapes


def _partials(name: str, outputs: tuple[Tensor, ...], args: tuple[Tensor, ...], wanted: Sequence[Any],
              options: dict[str, Any]) -> list[Tensor | None]:
    """The partial derivative in each argument for which ``wanted`` is not zero (and that is not
    constant), as nodes of the output's shape; ``None`` for the others."""
    partial = _PARTIALS[name]
    arguments = tuple(a.value if a.kind == "const" else Traced(a) for a in args)
    value = Traced(outputs[0])
    derivatives: list[Tensor | None] = []
    for k, a in enumerate(args):
        d = None if wanted[k].is_zero or a.kind == "const" else partial(k, arguments, value, **options)
        derivatives.append(None if d is None else _broadcast_to(_node(d), a.shape))
    return derivatives


def _batch(batch_shape: tuple[int, ...], args: tuple[Tensor, ...], flags: tuple[bool, ...],
           **options: Any) -> tuple[list[Tensor], dict[str, Any]]:
    """Elementwise: every argument with the leading batch axes (a constant stays a constant, its
    values repeated, so that the partials still read it)."""
    from jacacc.tensor.batching import spread

    new = []
    for a, batched in zip(args, flags, strict=True):
        if batched:
            new.append(a)
        elif a.kind == "const":
            new.append(E.const(np.broadcast_to(a.value, tuple(batch_shape) + a.shape)))
        else:
            new.append(spread(a, tuple(batch_shape)))
    return new, options


def apply_elementwise(name: str, inputs: Sequence[Any], **options: Any) -> Traced:
    """The elementwise general function ``name`` (see :func:`elementwise_operator`) of ``inputs``,
    traced arrays or constants, broadcast to one shape by NumPy's rules (a constant stays a constant
    node, which the partials receive as its array)."""
    nodes = [_node(x) for x in inputs]
    try:
        shape = tuple(np.broadcast_shapes(*(n.shape for n in nodes)))
    except ValueError:
        raise TraceError(f"{name}: arguments of shapes {[n.shape for n in nodes]} do not broadcast") from None
    nodes = [E.const(np.broadcast_to(n.value, shape)) if n.kind == "const" else _broadcast_to(n, shape)
             for n in nodes]
    (value,) = apply_operator(name, nodes, **options)
    return Traced(value)


# ---------------------------------------------------------------------------- scipy.special's ufuncs
@dataclass(frozen=True)
class _Member:
    """A scipy.special ufunc of the ``scipy_special`` operator."""

    parameters: tuple[str, ...]
    #: ``partial(k, arguments, value)`` (see :func:`elementwise_operator`)
    partial: Callable[..., Any]
    #: position → (what it is, why its derivative is not given): a traced argument there is refused
    constant: tuple[tuple[int, str, str], ...] = ()


_MEMBERS: dict[str, _Member] = {}


def _special(function: str) -> Any:
    import scipy.special

    return getattr(scipy.special, function)


def _scipy_special_forward(*arrays: np.ndarray, function: str) -> np.ndarray:
    return np.asarray(_special(function)(*arrays))


def _scipy_special_partial(k: int, arguments: tuple[Any, ...], value: Traced, function: str) -> Any:
    return _MEMBERS[function].partial(k, arguments, value)


elementwise_operator("scipy_special", _scipy_special_forward, _scipy_special_partial, 60)


def _handler(function: str) -> Callable[..., Traced]:
    member = _MEMBERS[function]

    def handle(*inputs: Any) -> Traced:
        if len(inputs) != len(member.parameters):
            raise TraceError(f"scipy.special.{function} takes {len(member.parameters)} arguments "
                             f"({', '.join(member.parameters)}), got {len(inputs)}")
        for position, what, why in member.constant:
            if isinstance(inputs[position], Traced):
                raise UnsupportedOperationError(
                    f"scipy.special.{function} with a traced {what} {member.parameters[position]} is not supported by "
                    f"jacacc.tensor ({why}); pass it as a constant")
        return apply_elementwise("scipy_special", inputs, function=function)

    handle.__name__ = handle.__qualname__ = f"_{function}"
    return handle


def _register(function: str, member: _Member) -> None:
    _MEMBERS[function] = member
    _UFUNCS[function] = _handler(function)


def _last(derivative: Callable[..., Any]) -> Callable[..., Any]:
    """A partial in the last argument only (the others are constants)."""
    def partial(k: int, arguments: tuple[Any, ...], value: Traced) -> Any:
        return derivative(arguments, value) if k == len(arguments) - 1 else None

    return partial


# -- the gamma function: Γ' = Γψ, (1/Γ)' = −ψ/Γ, the sign piecewise constant
for _name, _sign in (("gamma", 1.0), ("rgamma", -1.0), ("gammasgn", 0.0)):
    _register(_name, _Member(("x",), _last(lambda args, y, s=_sign: None if s == 0 else s * y * _special("psi")(args[0]))))


def _beta_partial(k: int, arguments: tuple[Any, ...], value: Traced) -> Any:
    """``∂B/∂a = B·(ψ(a) − ψ(a + b))``, and likewise in ``b``."""
    psi = _special("psi")
    a, b = arguments
    return value * (psi(arguments[k]) - psi(a + b))


_register("beta", _Member(("a", "b"), _beta_partial))

# -- Bessel functions: the general function of each kind, and the recurrence of its derivative
# from the neighbouring orders (lower = order v − 1, upper = v + 1, y the value at v)
_BESSEL: dict[str, tuple[str, Callable[[Any, Any, Any, Any], Any]]] = {
    "J": ("jv", lambda lower, upper, y, x: 0.5 * (lower - upper)),
    "Y": ("yv", lambda lower, upper, y, x: 0.5 * (lower - upper)),
    "I": ("iv", lambda lower, upper, y, x: 0.5 * (lower + upper)),
    "K": ("kv", lambda lower, upper, y, x: -0.5 * (lower + upper)),
    "Ie": ("ive", lambda lower, upper, y, x: 0.5 * (lower + upper) - np.sign(x) * y),   # iv(v, x)·e^(−|x|)
    "Ke": ("kve", lambda lower, upper, y, x: -0.5 * (lower + upper) + y),               # kv(v, x)·e^x
}
_ORDER_WHY = "its derivative in the order has no closed form"


def _bessel(kind: str, order: float | None = None, integer: bool = False) -> _Member:
    """A Bessel function of ``kind`` (``_BESSEL``) and a fixed ``order``, or (None) the order given
    as the first argument, constant (``integer``: truncated to an integer, as SciPy's ``yn``)."""
    general, recurrence = _BESSEL[kind]

    def derivative(arguments: tuple[Any, ...], value: Traced) -> Any:
        x = arguments[-1]
        v = order if order is not None else np.asarray(arguments[0], dtype=float)
        if integer:
            v = np.trunc(v)
        f = _special(general)
        return recurrence(f(v - 1.0, x), f(v + 1.0, x), value, x)

    if order is not None:
        return _Member(("x",), _last(derivative))
    return _Member(("n" if integer else "v", "x"), _last(derivative), ((0, "order", _ORDER_WHY),))


for _name, _kind in (("jv", "J"), ("yv", "Y"), ("iv", "I"), ("kv", "K"), ("ive", "Ie"), ("kve", "Ke")):
    _register(_name, _bessel(_kind))
_register("yn", _bessel("Y", integer=True))
for _kind, _stem in (("J", "j"), ("Y", "y"), ("I", "i"), ("K", "k"), ("Ie", "i"), ("Ke", "k")):
    for _order in (0, 1):
        _register(f"{_stem}{_order}{'e' if _kind.endswith('e') else ''}", _bessel(_kind, float(_order)))

# -- inverses and the normal distribution, through the value y
_HALF_SQRT_PI = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
# (the value is the inverse's x: erfinv(y)' = 1/erf'(x), and so on)
_register("erfinv", _Member(("y",), _last(lambda args, x: _HALF_SQRT_PI * np.exp(x * x))))
_register("erfcinv", _Member(("y",), _last(lambda args, x: -_HALF_SQRT_PI * np.exp(x * x))))
_register("ndtri", _Member(("y",), _last(lambda args, x: _SQRT_2PI * np.exp(0.5 * x * x))))
_register("ndtr", _Member(("x",), _last(lambda args, y: np.exp(-0.5 * args[0] ** 2) / _SQRT_2PI)))
_register("log_ndtr", _Member(("x",), _last(lambda args, y: np.exp(-0.5 * args[0] ** 2 - y) / _SQRT_2PI)))
_register("logit", _Member(("x",), _last(lambda args, y: 1.0 / (args[0] * (1.0 - args[0])))))


# -- regularized incomplete gamma and beta functions, in x
_SHAPE_WHY = "its derivative in the shape parameters has no closed form"


def xlogy_constant(c: Any, x: Any) -> Any:
    """``c · log x``, 0 where ``c = 0``, as ``scipy.special.xlogy``.  Where the coefficient ``c``
    is a constant array and 0, ``x`` is not read at all, so every derivative there is 0
    (``xlogy``'s own derivative in ``x``, ``c/x``, is 0/0 at ``x = 0``); a traced ``c`` is
    ``xlogy``'s.

    >>> import jacacc.tensor as jt
    >>> c = np.array([0.0, 2.0])
    >>> h = jt.hessian(lambda x: np.sum(xlogy_constant(c, x)))(np.array([0.0, 0.5]))
    >>> bool(np.all(h == [[0.0, 0.0], [0.0, -8.0]]))   # 0 at c = 0 (x = 0 included), −c/x² at c = 2
    True
    """
    if isinstance(c, Traced):   # a constant x as a traced constant: the trace takes no NumPy bool scalar
        return _special("xlogy")(c, x if isinstance(x, Traced) else Traced(_node(x)))
    c = np.asarray(c, dtype=float)
    zero = np.asarray(c == 0)   # an array, also of shape (): the trace takes no NumPy bool scalar
    return c * np.log(np.where(zero, 1.0, x) if np.any(zero) else x)


def xlog1py_constant(c: Any, x: Any) -> Any:
    """``c · log(1 + x)``, 0 where ``c = 0`` (``x`` not read there when ``c`` is constant), as
    ``scipy.special.xlog1py``."""
    if isinstance(c, Traced):   # a constant x as a traced constant: the trace takes no NumPy bool scalar
        return _special("xlog1py")(c, x if isinstance(x, Traced) else Traced(_node(x)))
    c = np.asarray(c, dtype=float)
    zero = np.asarray(c == 0)   # an array, also of shape (): the trace takes no NumPy bool scalar
    return c * np.log1p(np.where(zero, 0.0, x) if np.any(zero) else x)


def _incomplete_gamma_density(arguments: tuple[Any, ...], value: Traced) -> Any:
    """``d/dx P(a, x) = x^(a−1) e^(−x) / Γ(a)`` with ``(a − 1)·log x`` as ``xlogy`` (0 where ``a = 1``)."""
    a, x = arguments
    return np.exp(xlogy_constant(a - 1.0, x) - x - _special("gammaln")(a))


def _incomplete_beta_density(arguments: tuple[Any, ...], value: Traced) -> Any:
    """``d/dx I_x(a, b) = x^(a−1) (1 − x)^(b−1) / B(a, b)``, as ``xlogy`` and ``xlog1py``."""
    a, b, x = arguments
    return np.exp(xlogy_constant(a - 1.0, x) + xlog1py_constant(b - 1.0, -x) - _special("betaln")(a, b))


_register("gammainc", _Member(("a", "x"), _last(_incomplete_gamma_density), ((0, "shape", _SHAPE_WHY),)))
_register("gammaincc", _Member(("a", "x"), _last(lambda args, y: -_incomplete_gamma_density(args, y)),
                               ((0, "shape", _SHAPE_WHY),)))
_register("betainc", _Member(("a", "b", "x"), _last(_incomplete_beta_density),
                             ((0, "shape", _SHAPE_WHY), (1, "shape", _SHAPE_WHY))))
_register("betaincc", _Member(("a", "b", "x"), _last(lambda args, y: -_incomplete_beta_density(args, y)),
                              ((0, "shape", _SHAPE_WHY), (1, "shape", _SHAPE_WHY))))

del _name, _sign, _kind, _stem, _order
