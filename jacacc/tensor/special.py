"""SciPy's log-gamma family on traced arrays: ``gammaln``, ``digamma`` (``psi``), ``polygamma``,
``betaln`` and ``multigammaln`` (issue 41).

One general function (:mod:`jacacc.tensor.operators`), ``polygamma`` of order ``n``, carries
the family: order −1 is ``gammaln``, order 0 ``digamma``, order ``n ≥ 1`` SciPy's
``polygamma(n, x)``.  Its pushforward and pullback multiply by the same operator one order
up (``d/dx ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁺¹⁾(x)``, and ``d/dx log Γ(x) = ψ(x)``), so derivatives of any order
exist, in every mode, as ``jax.scipy.special`` gives them.  Values are SciPy's; ``gammaln``
is ``log|Γ(x)|``, real for every real ``x`` that is not a pole, as SciPy's.

Examples
--------
>>> import numpy as np, scipy.special
>>> import jacacc.tensor as jt
>>> x = np.array([0.5, 2.0, 7.5])
>>> np.allclose(jt.grad(lambda x: np.sum(scipy.special.gammaln(x)))(x), scipy.special.digamma(x))
True
>>> np.allclose(np.diag(jt.hessian(lambda x: np.sum(scipy.special.gammaln(x)))(x)), scipy.special.polygamma(1, x))
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jacacc.errors import UnsupportedOperationError
from jacacc.tensor.arrays import _hadamard
from jacacc.tensor.expr import Tensor
from jacacc.tensor.library import register_library
from jacacc.tensor.operators import Operator, apply_operator, register_operator
from jacacc.tensor.trace import _UFUNCS, Traced, _node

__all__: list[str] = []


def _forward(x: np.ndarray, order: int) -> np.ndarray:
    import scipy.special

    if order == -1:
        return scipy.special.gammaln(x)
    if order == 0:
        return scipy.special.digamma(x)
    return scipy.special.polygamma(order, x)


def _times(derivative: Tensor, direction: Tensor | None) -> Tensor | None:
    """The elementwise product of two arrays of one shape (``None``: a zero direction)."""
    return None if direction is None else _hadamard(derivative, direction)


def _next_order(args: tuple[Tensor, ...], order: int) -> Tensor:
    (derivative,) = apply_operator("polygamma", [args[0]], order=order + 1)
    return derivative


def _jvp(outputs: Any, args: tuple[Tensor, ...], tangents: tuple[Tensor | None, ...], order: int) -> tuple:
    return (_times(_next_order(args, order), tangents[0]),)


def _vjp(outputs: Any, args: tuple[Tensor, ...], cotangents: tuple[Tensor | None, ...], order: int) -> tuple:
    return (_times(_next_order(args, order), cotangents[0]),)


register_operator(Operator("polygamma", _forward, lambda shape, **_: (shape,), _jvp, _vjp,
                           lambda shape, **_: 20 * math.prod(shape),  # a series per element
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
