"""Differentiable linear algebra (paper 004, Seeger et al., "Auto-Differentiating Linear Algebra", §4).

The operators take MXNet's arguments and conventions.  Called on arrays they
compute (:mod:`jacacc.linalg.routines`: BLAS/LAPACK, batched over leading
axes, float32/float64); called inside a function that ``jacacc.tensor``
differentiates they become tensor expressions
(:mod:`jacacc.linalg.blas_cholesky`; ``gelqf``, ``syevd`` and the diagonal and
triangle helpers in :mod:`jacacc.linalg.factorizations`) with their
derivatives, so that
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

import numpy as np

from jacacc.linalg import routines

__all__ = ["extractdiag", "extracttrian", "gelqf", "gemm", "gemm2", "gesv", "inverse", "makediag", "maketrian",
           "potrf", "potri", "slogdet", "sumlogdiag", "syevd", "syrk", "trmm", "trsm"]


def _traced(*operands: Any) -> bool:
    from jacacc.tensor.trace import Traced

    return any(isinstance(x, Traced) for x in operands)


def _checked_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` validated as the LAPACK/BLAS kernels validate them, so a traced
    call refuses a bad ``alpha`` with the kernels' one-line message instead of
    failing deep inside the expression builder."""
    checked = dict(options)
    for key in ("alpha", "beta"):
        if key in checked:
            checked[key] = routines.real_scalar(name, key, checked[key])
    if "offset" in checked:
        offset = checked["offset"]
        if isinstance(offset, bool) or not isinstance(offset, int | np.integer):
            raise TypeError(f"{name}: offset must be an int, got {offset!r}")
        checked["offset"] = int(offset)
    return checked


def _symbolic(name: str, operands: tuple[Any, ...], **options: Any) -> Any:
    """Operator ``name`` on traced operands: the expression of
    :mod:`jacacc.linalg.factorizations` or :mod:`jacacc.linalg.blas_cholesky`,
    wrapped for further tracing (one Traced per output of a multi-output operator)."""
    from jacacc.linalg import blas_cholesky, factorizations
    from jacacc.tensor.trace import Traced, _node

    module = factorizations if name in factorizations.__all__ else blas_cholesky
    result = getattr(module, name)(*(_node(x) for x in operands), **_checked_options(name, options))
    return tuple(Traced(r) for r in result) if isinstance(result, tuple) else Traced(result)


def gemm(A: Any, B: Any, C: Any, alpha: float = 1.0, beta: float = 1.0, transpose_a: bool = False,
         transpose_b: bool = False) -> Any:
    """``alpha·op(A)·op(B) + beta·C`` (see :func:`jacacc.linalg.routines.gemm`)."""
    options = {"alpha": alpha, "beta": beta, "transpose_a": transpose_a, "transpose_b": transpose_b}
    if _traced(A, B, C):
        return _symbolic("gemm", (A, B, C), **options)
    return routines.gemm(A, B, C, **options)


def gemm2(A: Any, B: Any, alpha: float = 1.0, transpose_a: bool = False, transpose_b: bool = False) -> Any:
    """``alpha·op(A)·op(B)`` (see :func:`jacacc.linalg.routines.gemm2`)."""
    options = {"alpha": alpha, "transpose_a": transpose_a, "transpose_b": transpose_b}
    if _traced(A, B):
        return _symbolic("gemm2", (A, B), **options)
    return routines.gemm2(A, B, **options)


def syrk(A: Any, alpha: float = 1.0, transpose: bool = False) -> Any:
    """``alpha·A·Aᵀ`` (``transpose``: ``alpha·Aᵀ·A``) (see :func:`jacacc.linalg.routines.syrk`)."""
    if _traced(A):
        return _symbolic("syrk", (A,), alpha=alpha, transpose=transpose)
    return routines.syrk(A, alpha=alpha, transpose=transpose)


def trmm(A: Any, B: Any, alpha: float = 1.0, transpose: bool = False, rightside: bool = False,
         lower: bool = True) -> Any:
    """``alpha·op(A)·B`` with A triangular (see :func:`jacacc.linalg.routines.trmm`)."""
    options = {"alpha": alpha, "transpose": transpose, "rightside": rightside, "lower": lower}
    if _traced(A, B):
        return _symbolic("trmm", (A, B), **options)
    return routines.trmm(A, B, **options)


def trsm(A: Any, B: Any, alpha: float = 1.0, transpose: bool = False, rightside: bool = False,
         lower: bool = True) -> Any:
    """``X`` with ``op(A)·X = alpha·B`` (see :func:`jacacc.linalg.routines.trsm`)."""
    options = {"alpha": alpha, "transpose": transpose, "rightside": rightside, "lower": lower}
    if _traced(A, B):
        return _symbolic("trsm", (A, B), **options)
    return routines.trsm(A, B, **options)


def potrf(A: Any, lower: bool = True) -> Any:
    """The Cholesky factor (see :func:`jacacc.linalg.routines.potrf`); differentiated
    along symmetric directions (:mod:`jacacc.linalg.blas_cholesky`)."""
    if _traced(A):
        return _symbolic("potrf", (A,), lower=lower)
    return routines.potrf(A, lower=lower)


def potri(L: Any, lower: bool = True) -> Any:
    """``A⁻¹`` from A's Cholesky factor (see :func:`jacacc.linalg.routines.potri`)."""
    if _traced(L):
        return _symbolic("potri", (L,), lower=lower)
    return routines.potri(L, lower=lower)


def sumlogdiag(A: Any) -> Any:
    """``Σ log A_ii`` per matrix (see :func:`jacacc.linalg.routines.sumlogdiag`)."""
    if _traced(A):
        return _symbolic("sumlogdiag", (A,))
    return routines.sumlogdiag(A)


def gelqf(A: Any, *, overwrite_a: bool = False) -> tuple[Any, Any]:
    """The LQ factorization ``(Q, L)``, ``A = L·Q`` (see :func:`jacacc.linalg.routines.gelqf`);
    differentiable (:mod:`jacacc.linalg.factorizations`)."""
    if _traced(A):
        return _symbolic("gelqf", (A,))
    return routines.gelqf(A, overwrite_a=overwrite_a)


def syevd(A: Any, *, overwrite_a: bool = False) -> tuple[Any, Any]:
    """The symmetric eigendecomposition ``(U, lam)``, ``A = Uᵀ·diag(lam)·U`` (see
    :func:`jacacc.linalg.routines.syevd`); differentiated along symmetric directions,
    with the eigengap clamp and warning of :mod:`jacacc.linalg.factorizations`."""
    if _traced(A):
        return _symbolic("syevd", (A,))
    return routines.syevd(A, overwrite_a=overwrite_a)


def gesv(A: Any, B: Any, transpose: bool = False) -> Any:
    """``A⁻¹·B`` (``transpose``: ``A⁻ᵀ·B``) for general square ``A`` by LU (see
    :func:`jacacc.linalg.routines.getrf` and :func:`~jacacc.linalg.routines.getrs`);
    differentiable (:func:`jacacc.linalg.factorizations.gesv`)."""
    if _traced(A, B):
        return _symbolic("gesv", (A, B), transpose=transpose)
    return routines.getrs(*routines.getrf(A), B, transpose=bool(transpose))


def inverse(A: Any) -> Any:
    """``A⁻¹`` for general square ``A`` by LU (see :func:`jacacc.linalg.routines.getri`);
    differentiable (:func:`jacacc.linalg.factorizations.inverse`)."""
    if _traced(A):
        return _symbolic("inverse", (A,))
    return routines.getri(*routines.getrf(A))


def slogdet(A: Any) -> tuple[Any, Any]:
    """``(sign, log|det A|)`` by LU (see :func:`jacacc.linalg.routines.slogdet_lu`);
    differentiable (:func:`jacacc.linalg.factorizations.slogdet`)."""
    if _traced(A):
        return _symbolic("slogdet", (A,))
    return routines.slogdet_lu(*routines.getrf(A))


def extractdiag(A: Any, offset: int = 0) -> Any:
    """Diagonal ``offset`` of each matrix (see :func:`jacacc.linalg.routines.extractdiag`)."""
    if _traced(A):
        return _symbolic("extractdiag", (A,), offset=offset)
    return routines.extractdiag(A, offset=offset)


def makediag(v: Any, offset: int = 0) -> Any:
    """Matrices with ``v`` on diagonal ``offset`` (see :func:`jacacc.linalg.routines.makediag`)."""
    if _traced(v):
        return _symbolic("makediag", (v,), offset=offset)
    return routines.makediag(v, offset=offset)


def extracttrian(A: Any, offset: int = 0, lower: bool = True) -> Any:
    """A triangle of each matrix, packed (see :func:`jacacc.linalg.routines.extracttrian`)."""
    if _traced(A):
        return _symbolic("extracttrian", (A,), offset=offset, lower=lower)
    return routines.extracttrian(A, offset=offset, lower=lower)


def maketrian(v: Any, offset: int = 0, lower: bool = True) -> Any:
    """Matrices from packed triangles (see :func:`jacacc.linalg.routines.maketrian`)."""
    if _traced(v):
        return _symbolic("maketrian", (v,), offset=offset, lower=lower)
    return routines.maketrian(v, offset=offset, lower=lower)
