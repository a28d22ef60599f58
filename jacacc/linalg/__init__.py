"""Differentiable linear algebra (paper 004, Seeger et al., "Auto-Differentiating Linear Algebra", §4).

The operators take MXNet's arguments and conventions.  Called on arrays they
compute (:mod:`jacacc.linalg.kernels`: BLAS/LAPACK, batched over leading
axes, float32/float64); called inside a function that ``jacacc.tensor``
differentiates they become tensor expressions
(:mod:`jacacc.linalg.expressions`) with their derivatives, so that
``jacacc.tensor.grad``, ``vjp``, ``jvp``, ``jacobian`` and ``hessian`` work on
plain NumPy code that calls them.

Examples
--------
>>> import numpy as np, jacacc.tensor as jt
>>> from jacacc import linalg
>>> A = np.array([[4.0, 1.0], [1.0, 4.25]])
>>> linalg.potrf(A).tolist()
[[2.0, 0.0], [0.5, 2.0]]
>>> half_logdet = lambda A: linalg.sumlogdiag(linalg.potrf(A))     # log det(A) / 2
>>> np.allclose(jt.grad(half_logdet)(A), np.linalg.inv(A) / 2)
True
"""

from __future__ import annotations

from typing import Any

from jacacc.linalg import kernels
from jacacc.linalg.kernels import extractdiag, extracttrian, gelqf, makediag, maketrian, syevd

__all__ = ["extractdiag", "extracttrian", "gelqf", "gemm", "gemm2", "makediag", "maketrian", "potrf", "potri",
           "sumlogdiag", "syevd", "syrk", "trmm", "trsm"]


def _traced(*operands: Any) -> bool:
    from jacacc.tensor.trace import Traced

    return any(isinstance(x, Traced) for x in operands)


def _symbolic(name: str, operands: tuple[Any, ...], **options: Any) -> Any:
    """Operator ``name`` on traced operands: the expression of
    :mod:`jacacc.linalg.expressions`, wrapped for further tracing."""
    from jacacc.linalg import expressions
    from jacacc.tensor.trace import Traced, _node

    return Traced(getattr(expressions, name)(*(_node(x) for x in operands), **options))


def gemm(A: Any, B: Any, C: Any, alpha: float = 1.0, beta: float = 1.0, transpose_a: bool = False,
         transpose_b: bool = False) -> Any:
    """``alpha·op(A)·op(B) + beta·C`` (see :func:`jacacc.linalg.kernels.gemm`)."""
    options = {"alpha": alpha, "beta": beta, "transpose_a": transpose_a, "transpose_b": transpose_b}
    if _traced(A, B, C):
        return _symbolic("gemm", (A, B, C), **options)
    return kernels.gemm(A, B, C, **options)


def gemm2(A: Any, B: Any, alpha: float = 1.0, transpose_a: bool = False, transpose_b: bool = False) -> Any:
    """``alpha·op(A)·op(B)`` (see :func:`jacacc.linalg.kernels.gemm2`)."""
    options = {"alpha": alpha, "transpose_a": transpose_a, "transpose_b": transpose_b}
    if _traced(A, B):
        return _symbolic("gemm2", (A, B), **options)
    return kernels.gemm2(A, B, **options)


def syrk(A: Any, alpha: float = 1.0, transpose: bool = False) -> Any:
    """``alpha·A·Aᵀ`` (``transpose``: ``alpha·Aᵀ·A``) (see :func:`jacacc.linalg.kernels.syrk`)."""
    if _traced(A):
        return _symbolic("syrk", (A,), alpha=alpha, transpose=transpose)
    return kernels.syrk(A, alpha=alpha, transpose=transpose)


def trmm(A: Any, B: Any, alpha: float = 1.0, transpose: bool = False, rightside: bool = False,
         lower: bool = True) -> Any:
    """``alpha·op(A)·B`` with A triangular (see :func:`jacacc.linalg.kernels.trmm`)."""
    options = {"alpha": alpha, "transpose": transpose, "rightside": rightside, "lower": lower}
    if _traced(A, B):
        return _symbolic("trmm", (A, B), **options)
    return kernels.trmm(A, B, **options)


def trsm(A: Any, B: Any, alpha: float = 1.0, transpose: bool = False, rightside: bool = False,
         lower: bool = True) -> Any:
    """``X`` with ``op(A)·X = alpha·B`` (see :func:`jacacc.linalg.kernels.trsm`)."""
    options = {"alpha": alpha, "transpose": transpose, "rightside": rightside, "lower": lower}
    if _traced(A, B):
        return _symbolic("trsm", (A, B), **options)
    return kernels.trsm(A, B, **options)


def potrf(A: Any, lower: bool = True) -> Any:
    """The Cholesky factor (see :func:`jacacc.linalg.kernels.potrf`); differentiated
    along symmetric directions (:mod:`jacacc.linalg.expressions`)."""
    if _traced(A):
        return _symbolic("potrf", (A,), lower=lower)
    return kernels.potrf(A, lower=lower)


def potri(L: Any, lower: bool = True) -> Any:
    """``A⁻¹`` from A's Cholesky factor (see :func:`jacacc.linalg.kernels.potri`)."""
    if _traced(L):
        return _symbolic("potri", (L,), lower=lower)
    return kernels.potri(L, lower=lower)


def sumlogdiag(A: Any) -> Any:
    """``Σ log A_ii`` per matrix (see :func:`jacacc.linalg.kernels.sumlogdiag`)."""
    if _traced(A):
        return _symbolic("sumlogdiag", (A,))
    return kernels.sumlogdiag(A)
