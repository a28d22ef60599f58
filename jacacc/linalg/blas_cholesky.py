"""The linear-algebra operators as tensor expressions, with their derivatives (paper 004 §4).

Two kinds, by what their derivative needs:

* **Multilinear maps** — ``gemm``, ``gemm2``, ``syrk``, ``trmm`` (a product
  with the masked triangle), ``sumlogdiag`` (diagonal, log, sum) — are
  written as einsums, masks and elementwise functions of
  :mod:`jacacc.tensor.expr`: the tensor calculus differentiates them itself
  (Theorems 5, 7, 8, 10), to any order, and the evaluator runs them on BLAS
  through ``tensordot``.
* **Solves and factorizations** — ``trsm``, ``potrf``, ``potri`` — are general
  functions (:class:`~jacacc.tensor.operators.Operator`): their forward pass is
  the BLAS/LAPACK kernel of :mod:`jacacc.linalg.routines`, and their pushforward
  and pullback are the formulas of paper 004 §4 written with the same
  operators (two triangular solves for potrf's backward, no inverse), so that
  a derivative of a derivative works.

Conventions.  Matrices are the last two axes; every operand of one call has
the same batch shape.  An operator that reads one triangle (``lower``) has no
derivative w.r.t. the other (the masks below).  ``potrf`` follows paper 004
and PyTorch: its argument is a symmetric matrix, and its derivative is taken
along symmetric directions — the pushforward uses ``sym(Ȧ) = (Ȧ + Ȧᵀ)/2`` and
the pullback returns a symmetric ``Ā`` — so finite differences must perturb A
symmetrically.

Memory of each backward (per matrix, beyond the cotangent and the forward
outputs it reads; the evaluator frees every intermediate after its last use
and lets the solves overwrite dead right-hand sides, as paper 004's in-place
MXNet code does): ``trsm`` one n × k solve result plus the n × n product
``−Y·Xᵀ`` for Ā; ``potrf`` one n × n array (Φ(LᵀL̄), solved twice in place)
plus the symmetrized result; ``potri`` three n × n products (C·C̄·C, its
transpose sum, times L).  Measured peaks are in ``results/linalg_benchmark.json``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from jacacc.tensor import expr as E
from jacacc.tensor.expr import Tensor
from jacacc.tensor.operators import Operator, apply_operator, register_operator

__all__ = ["gemm", "gemm2", "potrf", "potri", "sumlogdiag", "syrk", "trmm", "trsm"]


# ---------------------------------------------------------------------------- expression helpers
def _letters(n: int, start: int = 0) -> str:
    return "".join(E.symbol(k) for k in range(start, start + n))


def transposed(x: Tensor) -> Tensor:
    """``x`` with its last two axes swapped."""
    s = _letters(x.ndim)
    return E.einsum(f"{s}->{s[:-2]}{s[-1]}{s[-2]}", x)


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False,
           alpha: float = 1.0) -> Tensor:
    """``alpha·op(a)·op(b)`` over the batch axes, as one einsum."""
    batch = _letters(a.ndim - 2)
    i, j, k = _letters(3, a.ndim - 2)
    sa = batch + (j + i if transpose_a else i + j)
    sb = batch + (k + j if transpose_b else j + k)
    product = E.einsum(f"{sa},{sb}->{batch}{i}{k}", a, b)
    return product if alpha == 1.0 else E.scale(alpha, product)


@functools.lru_cache(maxsize=256)
def triangle_mask(n: int, lower: bool, diagonal: float = 1.0) -> np.ndarray:
    """The 0/1 mask of a triangle (diagonal entries ``diagonal``); cached and read-only,
    so that every expression using it shares one constant node (:func:`masked`)."""
    mask = np.tril(np.ones((n, n))) if lower else np.triu(np.ones((n, n)))
    np.fill_diagonal(mask, diagonal)
    mask.setflags(write=False)
    return mask


@functools.lru_cache(maxsize=256)
def off_diagonal_mask(n: int) -> np.ndarray:
    """``1 − I`` (cached, read-only, like :func:`triangle_mask`)."""
    mask = 1.0 - np.eye(n)
    mask.setflags(write=False)
    return mask


# Constant nodes of the cached masks.  Large constants are not hash-consed by value,
# so without this every pullback would get its own copy of the mask and the
# expressions built on it would not be shared (a potrf pullback per path).
_MASK_NODES: dict[int, tuple[np.ndarray, Tensor]] = {}


def _mask_node(mask: np.ndarray) -> Tensor:
    if mask.flags.writeable:  # not one of the cached masks: a constant of its own
        return E.const(mask)
    entry = _MASK_NODES.get(id(mask))
    if entry is None or entry[0] is not mask:
        entry = _MASK_NODES[id(mask)] = (mask, E.const(mask))
    return entry[1]


def masked(x: Tensor, mask: np.ndarray) -> Tensor:
    """``x ⊙ mask`` on the last two axes."""
    s = _letters(x.ndim)
    return E.einsum(f"{s},{s[-2:]}->{s}", x, _mask_node(mask))


def triangle(x: Tensor, lower: bool) -> Tensor:
    return masked(x, triangle_mask(x.shape[-1], lower))


def symmetrized(x: Tensor) -> Tensor:
    """``(x + xᵀ)/2``."""
    return E.scale(0.5, E.add(x, transposed(x)))


def _minus(a: Tensor, b: Tensor) -> Tensor:
    """``a − b`` (a symbolic zero on either side drops out)."""
    return E.add(a, E.scale(-1.0, b))


# ---------------------------------------------------------------------------- multilinear maps
def _matrix(op: str, name: str, shape: tuple[int, ...], square: bool = False) -> None:
    if len(shape) < 2:
        raise ValueError(f"{op}: {name} must be a matrix or a batch of matrices (ndim >= 2), got shape {shape}")
    if square:
        _square(op, name, shape)


def _product_shapes(op: str, a: tuple[int, ...], b: tuple[int, ...], transpose_a: bool,
                    transpose_b: bool) -> tuple[int, int]:
    """The (rows, columns) of ``op(A)·op(B)``; refuses shapes that do not multiply, naming ``op``."""
    _matrix(op, "A", a)
    _matrix(op, "B", b)
    _same_batch(op, a, b)
    (m, k) = (a[-1], a[-2]) if transpose_a else (a[-2], a[-1])
    (k2, n) = (b[-1], b[-2]) if transpose_b else (b[-2], b[-1])
    if k != k2:
        raise ValueError(f"{op}: op(A) is {m} x {k} and op(B) is {k2} x {n}, which do not multiply "
                         f"(A shape {a}, B shape {b}, transpose_a={transpose_a}, transpose_b={transpose_b})")
    return m, n


def gemm2(A: Tensor, B: Tensor, alpha: float = 1.0, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    _product_shapes("gemm2", A.shape, B.shape, transpose_a, transpose_b)
    return matmul(A, B, transpose_a, transpose_b, alpha)


def gemm(A: Tensor, B: Tensor, C: Tensor, alpha: float = 1.0, beta: float = 1.0, transpose_a: bool = False,
         transpose_b: bool = False) -> Tensor:
    m, n = _product_shapes("gemm", A.shape, B.shape, transpose_a, transpose_b)
    if C.shape != A.shape[:-2] + (m, n):
        raise ValueError(f"gemm: C must have shape {A.shape[:-2] + (m, n)} (the product's), got {C.shape}")
    product = matmul(A, B, transpose_a, transpose_b, alpha)
    return product if beta == 0.0 else E.add(product, E.scale(beta, C))


def syrk(A: Tensor, alpha: float = 1.0, transpose: bool = False) -> Tensor:
    _matrix("syrk", "A", A.shape)
    return matmul(A, A, transpose, not transpose, alpha)


def trmm(A: Tensor, B: Tensor, alpha: float = 1.0, transpose: bool = False, rightside: bool = False,
         lower: bool = True) -> Tensor:
    _matrix("trmm", "A", A.shape, square=True)
    _product_shapes("trmm", B.shape if rightside else A.shape, A.shape if rightside else B.shape, False, False)
    tri = triangle(A, lower)
    return matmul(B, tri, False, transpose, alpha) if rightside else matmul(tri, B, transpose, False, alpha)


def sumlogdiag(A: Tensor) -> Tensor:
    _matrix("sumlogdiag", "A", A.shape, square=True)
    s = _letters(A.ndim)
    diagonal = E.einsum(f"{s[:-1]}{s[-2]}->{s[:-1]}", A)
    return E.einsum(f"{s[:-1]}->{s[:-2]}", E.unary("log", diagonal))


# ---------------------------------------------------------------------------- trsm
def trsm(A: Tensor, B: Tensor, alpha: float = 1.0, transpose: bool = False, rightside: bool = False,
               lower: bool = True) -> Tensor:
    return apply_operator("trsm", [A, B], alpha=float(alpha), transpose=bool(transpose),
                          rightside=bool(rightside), lower=bool(lower))[0]


def _trsm_shapes(a: tuple[int, ...], b: tuple[int, ...], alpha: float, transpose: bool, rightside: bool,
                 lower: bool) -> tuple[tuple[int, ...]]:
    _square("trsm", "A", a)
    _same_batch("trsm", a, b)
    side = b[-1] if rightside else b[-2]
    if side != a[-1]:
        raise ValueError(f"trsm: B must have {a[-1]} {'columns' if rightside else 'rows'} to match the "
                         f"{a[-1]} x {a[-1]} triangular A; got A shape {a} and B shape {b}")
    return (b,)


def _trsm_jvp(outputs, args, tangents, alpha, transpose, rightside, lower):  # noqa: ANN001, ANN202
    (X,), (A, _), (dA, dB) = outputs, args, tangents
    # X·op(A) = αB or op(A)·X = αB: d op(A) moves to the right-hand side
    dop = triangle(dA, lower)
    dop = transposed(dop) if transpose else dop
    rhs = _minus(E.scale(alpha, dB), matmul(X, dop) if rightside else matmul(dop, X))
    return (trsm(A, rhs, 1.0, transpose, rightside, lower),)


def _trsm_transpose(args, cotangents, alpha, transpose, rightside, lower):  # noqa: ANN001, ANN202
    # linear in B: B ↦ α op(A)⁻¹ B (or α B op(A)⁻¹), whose adjoint solves with op(A)ᵀ
    return (E.scale(alpha, trsm(args[0], cotangents[0], 1.0, not transpose, rightside, lower)),)


def _trsm_flops(a: tuple[int, ...], b: tuple[int, ...], **_: Any) -> int:
    return int(np.prod(b)) * a[-1]


# ---------------------------------------------------------------------------- potrf
def potrf(A: Tensor, lower: bool = True) -> Tensor:
    return apply_operator("potrf", [A], lower=bool(lower))[0]


def _lower_factor(F: Tensor, lower: bool) -> Tensor:
    return F if lower else transposed(F)


def _potrf_jvp(outputs, args, tangents, lower):  # noqa: ANN001, ANN202
    (F,), (dA,) = outputs, tangents
    L = _lower_factor(F, lower)
    W = trsm(L, symmetrized(dA))                                   # L⁻¹ sym(Ȧ)
    V = trsm(L, W, transpose=True, rightside=True)                  # L⁻¹ sym(Ȧ) L⁻ᵀ
    dL = matmul(L, masked(V, triangle_mask(L.shape[-1], True, 0.5)))      # L Φ(·)
    return (_lower_factor(dL, lower),)


def _cube_flops(a: tuple[int, ...], **_: Any) -> int:
    return int(np.prod(a[:-2], dtype=np.int64)) * a[-1] ** 3 // 3


# ---------------------------------------------------------------------------- potri
def potri(L: Tensor, lower: bool = True) -> Tensor:
    return apply_operator("potri", [L], lower=bool(lower))[0]


def _potri_jvp(outputs, args, tangents, lower):  # noqa: ANN001, ANN202
    (C,), (F,), (dF,) = outputs, args, tangents
    dF = triangle(dF, lower)
    # A = F Fᵀ (lower) or Fᵀ F (upper); Ċ = −C Ȧ C
    dA = matmul(dF, F, transpose_b=True) if lower else matmul(dF, F, transpose_a=True)
    dA = E.add(dA, transposed(dA))
    return (E.scale(-1.0, matmul(matmul(C, dA), C)),)


# ---------------------------------------------------------------------------- shape checks and registration
def _square(op: str, name: str, shape: tuple[int, ...]) -> None:
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"{op}: {name} must be a square matrix or a batch of them, got shape {shape}")


def _same_batch(op: str, a: tuple[int, ...], b: tuple[int, ...]) -> None:
    if len(b) < 2 or a[:-2] != b[:-2]:
        raise ValueError(f"{op}: A and B must be matrices with the same batch shape; got A shape {a} "
                         f"and B shape {b}")


def _square_shapes(op: str) -> Any:
    def shapes(a: tuple[int, ...], **_: Any) -> tuple[tuple[int, ...]]:
        _square(op, "A", a)
        return (a,)
    return shapes


def _register() -> None:
    from jacacc.linalg import routines
    from jacacc.tensor.batching import leading_batch

    register_operator(Operator("trsm", routines.trsm, _trsm_shapes, _trsm_jvp, flops=_trsm_flops,
                               in_place=((1, "overwrite_b"),), scipy_blas=True, batch=leading_batch(),
                               linear_in=(1,), transpose=_trsm_transpose))
    register_operator(Operator("potrf", routines.potrf, _square_shapes("potrf"), _potrf_jvp,
                               flops=_cube_flops, in_place=((0, "overwrite_a"),), scipy_blas=True, batch=leading_batch()))
    register_operator(Operator("potri", routines.potri, _square_shapes("potri"), _potri_jvp,
                               flops=lambda a, **_: 2 * _cube_flops(a), in_place=((0, "overwrite_l"),), scipy_blas=True,
                               batch=leading_batch()))


_register()
