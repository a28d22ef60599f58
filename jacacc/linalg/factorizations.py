"""LQ, the symmetric eigendecomposition, LU (general solves, inverse, log-determinant)
and the diagonal/triangle helpers as differentiable tensor expressions (paper 004,
Seeger et al., "Auto-Differentiating Linear Algebra", §4.3, §4.4 and the appendix).

Like ``trsm``, ``potrf`` and ``potri`` in :mod:`jacacc.linalg.blas_cholesky`,
each operator here is a general function of :mod:`jacacc.tensor`
(:class:`~jacacc.tensor.operators.Operator`): its forward pass is the LAPACK
kernel of :mod:`jacacc.linalg.routines`, its pushforward (``jvp``) and
pullback (``vjp``) are tensor expressions written with the operators
themselves (``trsm`` instead of any inverse) and einsums, so derivatives of
derivatives (Hessians) work.

``gelqf(A) -> (Q, L)``, ``A = L·Q`` (paper 004 §4.3; A is m × n, m <= n, of full rank m)
    Pushforward (from the appendix's derivation): with ``W = L⁻¹Ȧ``,
    ``C = W·Qᵀ`` and ``X = Φ(C + Cᵀ)`` (Φ keeps the strict lower triangle and
    half the diagonal, so ``X = sym(C) ∘ E`` in the paper's notation),
    ``L̇ = L·X`` and ``Q̇ = W − X·Q``.  Pullback (§4.3):
    ``Ā = L⁻ᵀ(Q̄ + copyltu(M)·Q)`` with ``M = Lᵀ·L̄ − Q̄·Qᵀ``; ``copyltu``
    mirrors the lower triangle onto the upper one.  Both use one triangular
    solve (``trsm``) with L.
``syevd(A) -> (U, lam)``, ``A = Uᵀ·diag(lam)·U`` (paper 004 §4.4; rows of U are eigenvectors)
    Pushforward (appendix, after Giles): ``M = U·sym(Ȧ)·Uᵀ``,
    ``λ̇ = diag(M)``, ``U̇ = (M ∘ F)·U`` with ``F_ij = 1/(λ_i − λ_j)`` for
    ``i ≠ j`` and ``F_ii = 0``.  Pullback (§4.4):
    ``Ā = Uᵀ(sym(Ū·Uᵀ ∘ F) + diag(λ̄))·U``.  The sign rule of the forward
    kernel (each row's largest entry positive) is locally constant, so these
    are the derivatives of the sign-normalized U.
``gesv(A, B)``, ``inverse(A)``, ``slogdet(A)`` (general square A; LU with partial pivoting)
    Not in the paper, which factors symmetric matrices only; the derivatives
    are those of ``trsm`` and ``potri`` (§4.2) without the triangle masks:
    ``d(A⁻¹B) = A⁻¹(dB − dA·A⁻¹B)``, ``d(A⁻¹) = −A⁻¹·dA·A⁻¹``,
    ``d log|det A| = tr(A⁻¹·dA)``.  ``A`` is factored once per expression
    (``getrf``, a node whose derivative is declared zero because its only
    readers — ``getrs``, ``getri``, ``slogdet_lu`` — take ``A`` itself as an
    argument and carry the whole derivative), so a solve and its pullback's
    transposed solve share one factorization.
``extractdiag``, ``makediag``, ``extracttrian``, ``maketrian``
    Linear maps: the pushforward is the operator itself applied to the
    tangent, the pullback its adjoint — ``extractdiag`` and ``makediag`` with
    the same ``offset`` are each other's adjoints, as are ``extracttrian`` and
    ``maketrian`` with the same ``offset`` and ``lower`` (they gather from and
    scatter to the same positions in MXNet's packing order).

**Symmetric argument.**  ``syevd`` follows ``potrf`` (and PyTorch): A is a
symmetric matrix, of which the kernel reads the lower triangle; the
derivative is taken along symmetric directions — the pushforward uses
``sym(Ȧ) = (Ȧ + Ȧᵀ)/2`` and the pullback returns a symmetric ``Ā`` — so finite
differences must perturb A symmetrically.

**The eigengap clamp.**  F is undefined where two eigenvalues coincide and
huge where they nearly do.  As in paper 004 §4.4 (and MXNet's
``syevd_backward``), the denominator is clamped: for ``i > j`` (so
``λ_i >= λ_j``, the eigenvalues being ascending)
``F_ij = 1/max(λ_i − λ_j, ε)`` and ``F_ji = −F_ij``.  MXNet's ε (1e-30 in
float32, 1e-100 in float64) only prevents a division by zero; here ε is
:func:`eigengap_threshold`: ``sqrt(eps_dtype)·max_i |λ_i|`` per matrix (at
least the dtype's smallest normal number).  Computed eigenvalues carry
absolute errors of order ``eps_dtype·‖A‖₂``, so below that gap ``1/(λ_i − λ_j)``
has lost more than half its digits: the derivative there is numerically
meaningless, and mathematically undefined in the limit of a repeated
eigenvalue.  The gaps are only known when the derivative is evaluated, so
the check runs then: F is built from the outputs of a small operator,
``syevd_eigengaps`` (:func:`eigengaps`), whose forward pass computes the
clamp from the eigenvalues and issues a :class:`RuntimeWarning` (naming the
batch index and the smallest gap) whenever it clamps.  Its outputs are a 0/1
mask of the unclamped pairs and the clamped denominators, both locally
constant (zero derivative), so ``F = 1/(K ∘ (λ_i − λ_j) + C)`` stays an
ordinary expression in λ that the tensor calculus differentiates to any order;
in the clamped entries F is constant, as in MXNet.  A derivative that does
not involve F (the gradient of a function of the eigenvalues alone) needs no
clamp and never warns.

**Memory.**  The paper's MXNet code works in place (``Ā`` overwrites ``Q̄``
with one m × m temporary for gelqf; ``Ā`` overwrites ``Ū`` with one n × n
temporary for syevd).  Here each derivative is a tensor expression whose
evaluator frees every intermediate after its last use; the live temporaries
of one pullback are, per matrix, gelqf's ``M``, ``copyltu(M)`` (m × m) and
``Q̄ + copyltu(M)·Q`` (m × n) before the solve, and syevd's ``Ū·Uᵀ``, F,
the mask and clamp (n × n each) and two n × n products.

Examples
--------
>>> import numpy as np, jacacc.tensor as jt
>>> from jacacc import linalg
>>> A = np.array([[2.0, 1.0], [1.0, 3.0]])
>>> U, lam = linalg.syevd(A)
>>> g = jt.grad(lambda A: np.sum(linalg.syevd(A)[1] ** 2))(A)     # Σ λ² = ‖A‖_F²
>>> np.allclose(g, 2 * A)
True
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from jacacc.linalg.blas_cholesky import (
    masked,
    matmul,
    off_diagonal_mask,
    symmetrized,
    transposed,
    triangle_mask,
    trsm,
)
from jacacc.tensor import expr as E
from jacacc.tensor.expr import Tensor
from jacacc.tensor.operators import Operator, apply_operator, register_operator, unary_linear

__all__ = ["eigengap_threshold", "eigengaps", "extractdiag", "extracttrian", "gelqf", "gesv", "inverse", "makediag",
           "maketrian", "slogdet", "syevd"]

Shape = tuple[int, ...]


# ---------------------------------------------------------------------------- expression helpers
def _labels(batch: int, count: int) -> tuple[str, list[str]]:
    """Einsum letters: ``batch`` leading ones (as a string) and ``count`` further ones."""
    letters = [E.symbol(k) for k in range(batch + count)]
    return "".join(letters[:batch]), letters[batch:]


def _negated(x: Tensor) -> Tensor:
    return E.scale(-1.0, x)


def _hadamard(x: Tensor, y: Tensor) -> Tensor:
    """``x ∘ y`` for two tensors of one shape."""
    s, _ = _labels(x.ndim, 0)
    return E.einsum(f"{s},{s}->{s}", x, y)


def _half_lower(x: Tensor) -> Tensor:
    """Φ(x): the strict lower triangle of ``x`` and half its diagonal."""
    return masked(x, triangle_mask(x.shape[-1], True, 0.5))


def _copyltu(x: Tensor) -> Tensor:
    """The paper's copyltu(x): the lower triangle (diagonal included) mirrored onto the upper one."""
    half = _half_lower(x)
    return E.add(half, transposed(half))


# ---------------------------------------------------------------------------- shape checks
def _matrix(op: str, name: str, shape: Shape, *, square: bool = False) -> None:
    if len(shape) < 2:
        raise ValueError(f"{op}: {name} must be a matrix or a batch of matrices (ndim >= 2), got shape {shape}")
    if square and shape[-1] != shape[-2]:
        raise ValueError(f"{op}: {name} must be square (or a batch of square matrices), got shape {shape}")


def _vector(op: str, shape: Shape) -> None:
    if len(shape) < 1:
        raise ValueError(f"{op}: v must be a vector or a batch of vectors (ndim >= 1), got shape {shape}")


def _diagonal_length(op: str, n: int, offset: int) -> int:
    """Length ``n − |offset|`` of diagonal ``offset`` of an n × n matrix (refusing an out-of-range offset)."""
    m = n - abs(offset)
    if m < 0 or (m == 0 and offset != 0):
        raise ValueError(f"{op}: offset {offset} is out of range for {n} x {n} matrices (|offset| < {n} needed)")
    return m


# ---------------------------------------------------------------------------- gelqf
def gelqf(A: Tensor) -> tuple[Tensor, Tensor]:
    """The LQ factorization ``A = L·Q`` as two expression nodes (paper 004 §4.3).

    Parameters
    ----------
    A : Tensor, shape (..., m, n) with m <= n
        Of full rank m (L is then invertible; the derivative needs it).

    Returns
    -------
    Q : Tensor, shape (..., m, n)
        Orthonormal rows.
    L : Tensor, shape (..., m, m)
        Lower triangular with a non-negative diagonal (the kernel's normalization).

    Notes
    -----
    Pushforward ``L̇ = L·Φ(C + Cᵀ)``, ``Q̇ = L⁻¹Ȧ − Φ(C + Cᵀ)·Q`` with
    ``C = L⁻¹ȦQᵀ``; pullback ``Ā = L⁻ᵀ(Q̄ + copyltu(Lᵀ L̄ − Q̄ Qᵀ)·Q)``
    (paper 004 §4.3 and appendix); ``L⁻¹`` and ``L⁻ᵀ`` are triangular solves.

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc import linalg
    >>> A = np.array([[3.0, 0.0, 4.0], [3.0, 2.0, 4.0]])
    >>> Q, L = linalg.gelqf(A)
    >>> g = jt.grad(lambda A: 2 * linalg.sumlogdiag(linalg.gelqf(A)[1]))(A)   # log det(A Aᵀ)
    >>> np.allclose(g, 2 * np.linalg.solve(A @ A.T, A))
    True
    """
    Q, L = apply_operator("gelqf", [A])
    return Q, L


def _gelqf_shapes(a: Shape, **_: Any) -> tuple[Shape, Shape]:
    _matrix("gelqf", "A", a)
    m, n = a[-2:]
    if m > n:
        raise ValueError(f"gelqf: A must have no more rows than columns (m <= n), got {m} x {n} (A shape {a})")
    return a, a[:-1] + (m,)


def _gelqf_jvp(outputs, args, tangents):  # noqa: ANN001, ANN202
    (Q, L), (dA,) = outputs, tangents
    W = trsm(L, dA)                                       # L⁻¹ Ȧ
    C = matmul(W, Q, transpose_b=True)                    # L⁻¹ Ȧ Qᵀ
    # L⁻¹L̇ is lower triangular and (Q̇Qᵀ skew) its symmetric part is sym(C): it is Φ(C + Cᵀ)
    X = _half_lower(E.add(C, transposed(C)))
    return (E.add(W, E.scale(-1.0, matmul(X, Q))), matmul(L, X))


def _gelqf_vjp(outputs, args, cotangents):  # noqa: ANN001, ANN202
    (Q, L), (Qbar, Lbar) = outputs, cotangents
    M = E.add(matmul(L, Lbar, transpose_a=True), _negated(matmul(Qbar, Q, transpose_b=True)))
    R = E.add(Qbar, matmul(_copyltu(M), Q))               # Q̄ + copyltu(M)·Q
    return (trsm(L, R, transpose=True),)                  # L⁻ᵀ(...)


def _gelqf_flops(a: Shape, **_: Any) -> int:
    # Householder QR of the n × m transpose (2nm² − 2m³/3) and forming its Q (as much again)
    m, n = a[-2:]
    return math.prod(a[:-2]) * int(4 * n * m * m - 4 * m**3 / 3)


# ---------------------------------------------------------------------------- syevd and its eigengaps
def syevd(A: Tensor, signs: str = "largest_positive", uplo: str = "L") -> tuple[Tensor, Tensor]:
    """The symmetric eigendecomposition ``A = Uᵀ·diag(lam)·U`` as two expression nodes (paper 004 §4.4).

    Parameters
    ----------
    A : Tensor, shape (..., n, n)
        Symmetric (the kernel reads the triangle ``uplo`` names); differentiated along
        symmetric directions.
    signs : {"largest_positive", "numpy"}
        ``"largest_positive"`` (the paper's rule): each row of U has its largest-magnitude
        entry positive.  ``"numpy"``: U is ``np.linalg.eigh(A, UPLO=uplo)``'s eigenvectors
        bit for bit, with LAPACK's signs (what :mod:`jacacc.tensor.numpy_linalg` gives for
        ``np.linalg.eigh``).  Either sign choice is locally constant where the eigenvalues
        are distinct, so the derivatives below hold for both.
    uplo : {"L", "U"}
        The triangle read: ``"U"`` only with ``signs="numpy"`` (NumPy's ``UPLO``).

    Returns
    -------
    U : Tensor, shape (..., n, n)
        Rows are the eigenvectors, signed as ``signs`` says.
    lam : Tensor, shape (..., n)
        The eigenvalues, ascending.

    Notes
    -----
    Pushforward ``λ̇ = diag(M)``, ``U̇ = (M ∘ F)·U`` with ``M = U sym(Ȧ) Uᵀ``;
    pullback ``Ā = Uᵀ(sym(ŪUᵀ ∘ F) + diag(λ̄))U``, where
    ``F_ij = 1/(λ_i − λ_j)`` off the diagonal, clamped at near-repeated
    eigenvalues with a :class:`RuntimeWarning` (see the module docstring and
    :func:`eigengaps`).

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc import linalg
    >>> A = np.array([[2.0, 1.0], [1.0, 3.0]])
    >>> g = jt.grad(lambda A: np.sum(linalg.syevd(A)[1] * np.array([0.0, 1.0])))(A)   # largest eigenvalue
    >>> u = linalg.syevd(A)[0][1]
    >>> np.allclose(g, np.outer(u, u))
    True
    """
    if signs not in _SYEVD_SIGNS:
        raise ValueError(f"syevd: signs must be one of {_SYEVD_SIGNS}, got {signs!r}")
    if uplo not in ("L", "U") or (uplo == "U" and signs != "numpy"):
        raise ValueError(f"syevd: uplo must be 'L' (or 'U' with signs='numpy'), got {uplo!r}")
    options = {} if signs == "largest_positive" else {"signs": signs, "uplo": uplo}
    U, lam = apply_operator("syevd", [A], **options)
    return U, lam


_SYEVD_SIGNS = ("largest_positive", "numpy")


def _syevd_forward(A: np.ndarray, overwrite_a: bool = False, signs: str = "largest_positive",
                   uplo: str = "L") -> tuple[np.ndarray, np.ndarray]:
    """The paper's kernel (:func:`jacacc.linalg.routines.syevd`), or NumPy's ``eigh`` with its signs."""
    from jacacc.linalg import routines

    if signs == "largest_positive":
        return routines.syevd(A, overwrite_a=overwrite_a)
    A = np.asarray(A)
    routines._check_finite("syevd", "A", A, "lower" if uplo == "L" else "upper")
    lam, V = np.linalg.eigh(A, UPLO=uplo)
    return np.ascontiguousarray(np.swapaxes(V, -1, -2)), lam          # NumPy's columns are U's rows


def eigengap_threshold(lam: np.ndarray) -> np.ndarray:
    """The clamp ε of each matrix's eigengaps: ``sqrt(eps)·max_i |λ_i|``, at least the smallest normal number.

    Parameters
    ----------
    lam : numpy.ndarray, shape (..., n), float32 or float64
        Eigenvalues; ``eps`` and the floor are those of its dtype.

    Returns
    -------
    numpy.ndarray, shape (...)
        One threshold per matrix.

    Notes
    -----
    Paper 004 §4.4 clamps ``|λ_i − λ_j|`` at a "small scalar" ε.  The scale
    ``max |λ_i| = ‖A‖₂`` makes ε invariant under scaling A; ``sqrt(eps)`` is
    where ``1/(λ_i − λ_j)`` computed from eigenvalues accurate to
    ``eps·‖A‖₂`` keeps half its digits (1.5e-8 relative in float64, 3.5e-4 in
    float32).

    Examples
    --------
    >>> import numpy as np
    >>> bool(eigengap_threshold(np.array([-4.0, 1.0])) == 4 * np.sqrt(np.finfo(np.float64).eps))
    True
    """
    finfo = np.finfo(lam.dtype)
    scale = np.max(np.abs(lam), axis=-1) if lam.shape[-1] else np.zeros(lam.shape[:-1], lam.dtype)
    return np.maximum(np.sqrt(finfo.eps) * scale, finfo.tiny).astype(lam.dtype)


def _eigengaps_forward(lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mask of unclamped pairs and the clamped denominators (see :func:`eigengaps`); warns when clamping."""
    return clamped_gaps(lam, "syevd: (near-)repeated eigenvalues", "", "eigenvectors")


def clamped_gaps(lam: np.ndarray, subject: str, gap_name: str, vectors: str) -> tuple[np.ndarray, np.ndarray]:
    """For ascending ``lam`` (a batch of them): the mask of the pairs whose gap ``λ_i − λ_j`` is at least
    :func:`eigengap_threshold`, and the denominators with the others clamped to ±that threshold
    (paper 004 §4.4); a :class:`RuntimeWarning` (``subject``, ``gap_name``, ``vectors`` name what
    was clamped) where any is.  The SVD's gaps ``s_j² − s_i²`` are those of ``λ = −s²``."""
    lam = np.asarray(lam)
    n = lam.shape[-1]
    threshold = eigengap_threshold(lam)
    if np.all(np.diff(lam, axis=-1) >= threshold[..., None]):
        # ascending and every neighbouring gap at least ε: so is every gap, nothing is clamped (one
        # O(n) test; the general path below makes a dozen passes over n × n arrays, 0.34 ms at n = 256)
        diagonal = np.arange(n)
        keep, clamped = np.ones(lam.shape + (n,), lam.dtype), np.zeros(lam.shape + (n,), lam.dtype)
        keep[..., diagonal, diagonal] = 0.0
        clamped[..., diagonal, diagonal] = 1.0
        return keep, clamped
    diff = lam[..., :, None] - lam[..., None, :]                         # λ_i − λ_j
    eps = threshold[..., None, None]
    off = ~np.eye(n, dtype=bool)
    small = (np.abs(diff) < eps) & off
    keep = (off & ~small).astype(lam.dtype)
    # MXNet's h for ascending eigenvalues: +ε below the diagonal (λ_i >= λ_j), −ε above, so F stays antisymmetric
    below = np.tri(n, k=-1, dtype=bool)
    clamped = np.where(small, np.where(below, eps, -eps), 0.0) + np.eye(n)  # 1 on the diagonal: F_ii is masked
    if small.any():
        index = tuple(int(k) for k in np.argwhere(small)[0][:-2])
        gap = float(np.min(np.where(small, np.abs(diff), np.inf)))
        where = f" at batch index {index}" if index else ""
        warnings.warn(
            f"{subject}{where} (smallest gap {gap_name}{gap:.3g} below the threshold {float(np.max(eps)):.3g}): the "
            f"derivative of the {vectors} is undefined there; the eigengap clamp of paper 004 §4.4 was applied, so "
            "this derivative is approximate",
            RuntimeWarning, stacklevel=5)
    return keep.astype(lam.dtype), clamped.astype(lam.dtype)


def eigengaps(lam: Tensor) -> tuple[Tensor, Tensor]:
    """The eigengap clamp of ``syevd``'s derivative as two locally constant nodes ``(K, C)``.

    Parameters
    ----------
    lam : Tensor, shape (..., n)
        Ascending eigenvalues (``syevd``'s second output).

    Returns
    -------
    K : Tensor, shape (..., n, n)
        1 where ``i ≠ j`` and ``|λ_i − λ_j| >= ε`` (:func:`eigengap_threshold`), else 0.
    C : Tensor, shape (..., n, n)
        ``+ε`` (``i > j``) or ``−ε`` (``i < j``) where a pair is clamped, 1 on
        the diagonal, 0 elsewhere; so ``K ∘ (λ_i − λ_j) + C`` is the clamped
        denominator ``h(λ_i − λ_j)`` of paper 004 §4.4 (1 on the diagonal).

    Notes
    -----
    The operator ``syevd_eigengaps`` is evaluated with the derivative (the
    eigenvalues are unknown while tracing); its forward pass warns
    (:class:`RuntimeWarning`) whenever it clamps.  Both outputs are piecewise
    constant in λ: their derivative is zero, so the clamped entries of F are
    constants, as in MXNet.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.tensor.expr import var
    >>> from jacacc.tensor.evaluate import Program
    >>> lam = var("lam", (2,))
    >>> K, C = eigengaps(lam)
    >>> [x.tolist() for x in Program([K, C], [lam])(np.array([1.0, 3.0]))]
    [[[0.0, 1.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]]
    """
    K, C = apply_operator("syevd_eigengaps", [lam])
    return K, C


def _eigengaps_shapes(lam: Shape, **_: Any) -> tuple[Shape, Shape]:
    _vector("syevd_eigengaps", lam)
    square = lam + lam[-1:]
    return square, square


def _inverse_gaps(lam: Tensor) -> Tensor:
    """F: ``1/h(λ_i − λ_j)`` off the diagonal, 0 on it (paper 004 §4.4)."""
    n = lam.shape[-1]
    b, (i, j) = _labels(lam.ndim - 1, 2)
    ones = E.ones((n,))
    diff = E.add(E.einsum(f"{b}{i},{j}->{b}{i}{j}", lam, ones),
                 E.scale(-1.0, E.einsum(f"{b}{j},{i}->{b}{i}{j}", lam, ones)))
    K, C = eigengaps(lam)
    return masked(E.unary("reciprocal", E.add(_hadamard(K, diff), C)), off_diagonal_mask(n))


def _syevd_shapes(a: Shape, **_: Any) -> tuple[Shape, Shape]:
    _matrix("syevd", "A", a, square=True)
    return a, a[:-1]


def _syevd_jvp(outputs, args, tangents, **_):  # noqa: ANN001, ANN202, ANN003
    (U, lam), (dA,) = outputs, tangents
    M = matmul(matmul(U, symmetrized(dA)), U, transpose_b=True)          # U sym(Ȧ) Uᵀ
    b, (i,) = _labels(lam.ndim - 1, 1)
    dlam = E.einsum(f"{b}{i}{i}->{b}{i}", M)
    dU = matmul(_hadamard(M, _inverse_gaps(lam)), U)
    return (dU, dlam)


def _syevd_flops(a: Shape, **_: Any) -> int:
    # tridiagonal reduction (4n³/3), divide and conquer and back-transformation: about 9n³ in all
    return math.prod(a[:-2]) * 9 * a[-1] ** 3


# ---------------------------------------------------------------------------- LU: gesv, inverse, slogdet
def _lu_factors(A: Tensor) -> tuple[Tensor, Tensor]:
    """``getrf(A)``: the packed LU factors and pivots, one node pair per ``A`` (hash-consed), so every
    solve, inverse and determinant of one matrix — and of its derivatives — shares one factorization."""
    LU, piv = apply_operator("getrf", [A])
    return LU, piv


def gesv(A: Tensor, B: Tensor, transpose: bool = False) -> Tensor:
    """``X = A⁻¹·B`` (``transpose``: ``A⁻ᵀ·B``) for general square ``A``, as an expression node (LU).

    Parameters
    ----------
    A : Tensor, shape (..., n, n)
        Invertible (a singular matrix is refused when the solve is evaluated:
        :class:`~jacacc.linalg.routines.SingularMatrixError`).
    B : Tensor, shape (..., n, k)
        Same batch shape as ``A``.
    transpose : bool
        Solve with ``Aᵀ``.

    Returns
    -------
    Tensor, shape (..., n, k)

    Notes
    -----
    ``A`` is factored once (``getrf``) and the factors are read by the solve
    (``getrs``).  The derivative is that of ``trsm`` in paper 004 §4.2 without
    the triangle mask (Giles [8] in the paper): pushforward
    ``Ẋ = op(A)⁻¹(Ḃ − op(Ȧ)·X)``, pullback ``B̄ = op(A)⁻ᵀ·X̄``,
    ``Ā = −B̄·Xᵀ`` (``transpose``: ``−X·B̄ᵀ``); the solves reuse the forward's
    factors.  The factorization is a node of its own whose derivative is
    declared zero: it only feeds ``getrs``/``getri``/``slogdet_lu``, whose
    derivatives with respect to ``A`` already account for all of ``A``'s
    influence (the factors are a cache, not a separate function of ``A``).

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc import linalg
    >>> A, b = np.array([[2.0, 1.0], [0.0, 3.0]]), np.array([[1.0], [3.0]])
    >>> g = jt.grad(lambda b: np.sum(linalg.gesv(A, b)))(b)        # A⁻ᵀ·1
    >>> np.allclose(g, np.linalg.solve(A.T, np.ones((2, 1))))
    True
    """
    LU, piv = _lu_factors(A)
    return apply_operator("getrs", [A, LU, piv, B], transpose=bool(transpose))[0]


def inverse(A: Tensor) -> Tensor:
    """``A⁻¹`` for general square ``A``, as an expression node (LU: ``getrf`` then ``getri``).

    Parameters
    ----------
    A : Tensor, shape (..., n, n)
        Invertible (refused when evaluated otherwise).

    Returns
    -------
    Tensor, shape (..., n, n)

    Notes
    -----
    Pushforward ``Ẋ = −X·Ȧ·X``, pullback ``Ā = −Xᵀ·X̄·Xᵀ`` with ``X = A⁻¹``
    (paper 004 §4.2, ``potri``'s derivation for a general matrix), written
    with the output node itself, so Hessians differentiate it again.

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc import linalg
    >>> A = np.array([[2.0, 1.0], [0.0, 3.0]])
    >>> g = jt.grad(lambda A: np.trace(linalg.inverse(A)))(A)       # −A⁻ᵀA⁻ᵀ
    >>> Ai = np.linalg.inv(A)
    >>> np.allclose(g, -(Ai @ Ai).T)
    True
    """
    LU, piv = _lu_factors(A)
    return apply_operator("getri", [A, LU, piv])[0]


def slogdet(A: Tensor) -> tuple[Tensor, Tensor]:
    """``(sign, log|det A|)`` of general square matrices, as two expression nodes (LU).

    Parameters
    ----------
    A : Tensor, shape (..., n, n)

    Returns
    -------
    sign : Tensor, shape (...)
        ``±1`` (``0`` for a singular matrix); locally constant, its derivative is zero.
    logabsdet : Tensor, shape (...)
        ``log|det A|`` (``-inf`` for a singular matrix, as NumPy).

    Notes
    -----
    ``d log|det A| = tr(A⁻¹·Ȧ)`` (the ``log|A|`` of paper 004 §3.1 for a
    general matrix): pushforward ``Σ_ij (A⁻¹)_ji Ȧ_ij``, pullback
    ``Ā = ℓ̄·A⁻ᵀ``, both through :func:`inverse` of the same factors (one
    ``getri`` serves every pushforward of a forward-mode Hessian).  At a
    singular matrix the derivative is refused when evaluated (the inverse
    does not exist).

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc import linalg
    >>> A = np.array([[2.0, 1.0], [4.0, 1.0]])                     # det = -2
    >>> g = jt.grad(lambda A: linalg.slogdet(A)[1])(A)
    >>> np.allclose(g, np.linalg.inv(A).T)
    True
    """
    LU, piv = _lu_factors(A)
    sign, logabsdet = apply_operator("slogdet_lu", [A, LU, piv])
    return sign, logabsdet


def _getrf_shapes(a: Shape, **_: Any) -> tuple[Shape, Shape]:
    _matrix("getrf", "A", a, square=True)
    return a, a[:-1]


def _getrf_forward(A: np.ndarray, overwrite_a: bool = False) -> tuple[np.ndarray, np.ndarray]:
    from jacacc.linalg import routines

    return routines.getrf(A, overwrite_a=overwrite_a)


def _getrs_shapes(a: Shape, lu: Shape, piv: Shape, b: Shape, transpose: bool) -> tuple[Shape]:
    _matrix("getrs", "A", a, square=True)
    _matrix("getrs", "B", b)
    if a[:-2] != b[:-2] or b[-2] != a[-1]:
        raise ValueError(f"getrs: B must have shape (..., {a[-1]}, k) with A's batch shape {a[:-2]}; "
                         f"got A shape {a} and B shape {b}")
    return (b,)


def _getrs_forward(A: np.ndarray, LU: np.ndarray, piv: np.ndarray, B: np.ndarray, transpose: bool) -> np.ndarray:
    from jacacc.linalg import routines

    return routines.getrs(LU, piv, B, transpose=transpose)


def _getrs(A: Tensor, LU: Tensor, piv: Tensor, B: Tensor, transpose: bool) -> Tensor:
    return apply_operator("getrs", [A, LU, piv, B], transpose=transpose)[0]


def _getrs_jvp(outputs, args, tangents, transpose):  # noqa: ANN001, ANN202
    (X,), (A, LU, piv, _), (dA, _, _, dB) = outputs, args, tangents
    # op(A)·X = B: d op(A) moves to the right-hand side; the factors' tangents are not used
    rhs = E.add(dB, _negated(matmul(dA, X, transpose_a=transpose)))
    return (_getrs(A, LU, piv, rhs, transpose),)


def _getrs_transpose(args, cotangents, transpose):  # noqa: ANN001, ANN202
    (A, LU, piv, _), (Xbar,) = args, cotangents
    return (_getrs(A, LU, piv, Xbar, not transpose),)                      # linear in B: op(A)⁻ᵀ X̄


def _getri_shapes(a: Shape, lu: Shape, piv: Shape) -> tuple[Shape]:
    _matrix("getri", "A", a, square=True)
    return (a,)


def _getri_forward(A: np.ndarray, LU: np.ndarray, piv: np.ndarray, overwrite_lu: bool = False) -> np.ndarray:
    from jacacc.linalg import routines

    return routines.getri(LU, piv, overwrite_lu=overwrite_lu)


def _getri_jvp(outputs, args, tangents):  # noqa: ANN001, ANN202
    (X,), (dA, _, _) = outputs, tangents
    return (E.scale(-1.0, matmul(matmul(X, dA), X)),)                     # −X Ȧ X


def _slogdet_shapes(a: Shape, lu: Shape, piv: Shape) -> tuple[Shape, Shape]:
    _matrix("slogdet_lu", "A", a, square=True)
    return a[:-2], a[:-2]


def _slogdet_forward(A: np.ndarray, LU: np.ndarray, piv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from jacacc.linalg import routines

    return routines.slogdet_lu(LU, piv)


def _slogdet_jvp(outputs, args, tangents):  # noqa: ANN001, ANN202
    (sign, _), (A, LU, piv), (dA, _, _) = outputs, args, tangents
    X = apply_operator("getri", [A, LU, piv])[0]
    b, (i, j) = _labels(A.ndim - 2, 2)
    return (E.zeros(sign.shape), E.einsum(f"{b}{j}{i},{b}{i}{j}->{b}", X, dA))           # tr(A⁻¹ Ȧ); the sign is constant


def _lu_flops(a: Shape, **_: Any) -> int:
    return math.prod(a[:-2]) * 2 * a[-1] ** 3 // 3


def _register_lu() -> None:
    from jacacc.tensor.batching import leading_batch

    pivots = leading_batch(integer_positions=(2,))  # (A, LU, piv, …): the pivots are integers
    # the factors are read by getrs, getri and slogdet_lu only, whose derivatives take A's tangent
    register_operator(Operator("getrf", _getrf_forward, _getrf_shapes, flops=_lu_flops, in_place=((0, "overwrite_a"),),
                               scipy_blas=True, batch=leading_batch(), zero_derivative=True))
    register_operator(Operator("getrs", _getrs_forward, _getrs_shapes, _getrs_jvp,
                               flops=lambda a, lu, piv, b, **_: 2 * math.prod(b) * a[-1], scipy_blas=True,
                               batch=pivots, linear_in=(3,), transpose=_getrs_transpose))
    register_operator(Operator("getri", _getri_forward, _getri_shapes, _getri_jvp,
                               flops=lambda a, *_, **__: 2 * _lu_flops(a), in_place=((1, "overwrite_lu"),), scipy_blas=True,
                               batch=pivots))
    register_operator(Operator("slogdet_lu", _slogdet_forward, _slogdet_shapes, _slogdet_jvp,
                               flops=lambda a, *_, **__: math.prod(a[:-1]), batch=pivots))


# ---------------------------------------------------------------------------- the diagonal and triangle helpers
def extractdiag(A: Tensor, offset: int = 0) -> Tensor:
    """Diagonal ``offset`` of each square matrix, as an expression node (paper 004 §4; MXNet's helper).

    A linear map: its pushforward is itself, its pullback :func:`makediag`
    with the same ``offset``.

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc import linalg
    >>> jt.grad(lambda A: np.sum(linalg.extractdiag(A, 1) ** 2))(np.arange(9.0).reshape(3, 3)).tolist()
    [[0.0, 2.0, 0.0], [0.0, 0.0, 10.0], [0.0, 0.0, 0.0]]
    """
    return apply_operator("extractdiag", [A], offset=int(offset))[0]


def makediag(v: Tensor, offset: int = 0) -> Tensor:
    """Square matrices with ``v`` on diagonal ``offset``, as an expression node (paper 004 §4).

    A linear map: its pushforward is itself, its pullback :func:`extractdiag`.

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc import linalg
    >>> W = np.arange(9.0).reshape(3, 3)
    >>> jt.grad(lambda v: np.sum(W * linalg.makediag(v, -1)))(np.ones(2)).tolist()
    [3.0, 7.0]
    """
    return apply_operator("makediag", [v], offset=int(offset))[0]


def extracttrian(A: Tensor, offset: int = 0, lower: bool = True) -> Tensor:
    """A triangle of each square matrix packed into a vector, as an expression node (paper 004 §4).

    MXNet's packing (:func:`jacacc.linalg.routines.extracttrian`); a linear map
    whose pullback is :func:`maketrian` with the same options.

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc import linalg
    >>> jt.grad(lambda A: np.sum(linalg.extracttrian(A, lower=False) * np.arange(1.0, 4.0)))(np.eye(2)).tolist()
    [[1.0, 2.0], [0.0, 3.0]]
    """
    return apply_operator("extracttrian", [A], offset=int(offset), lower=bool(lower))[0]


def maketrian(v: Tensor, offset: int = 0, lower: bool = True) -> Tensor:
    """Square matrices from packed triangles, as an expression node (paper 004 §4).

    The inverse of :func:`extracttrian` on its triangle; a linear map whose
    pullback is :func:`extracttrian` with the same options.

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc import linalg
    >>> W = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> jt.grad(lambda v: np.sum(W * linalg.maketrian(v)))(np.ones(3)).tolist()
    [1.0, 3.0, 4.0]
    """
    return apply_operator("maketrian", [v], offset=int(offset), lower=bool(lower))[0]


def _extractdiag_shapes(a: Shape, offset: int) -> tuple[Shape]:
    _matrix("extractdiag", "A", a, square=True)
    return (a[:-2] + (_diagonal_length("extractdiag", a[-1], offset),),)


def _makediag_shapes(v: Shape, offset: int) -> tuple[Shape]:
    _vector("makediag", v)
    n = v[-1] + abs(offset)
    return (v[:-1] + (n, n),)


def _extracttrian_shapes(a: Shape, offset: int, lower: bool) -> tuple[Shape]:
    _matrix("extracttrian", "A", a, square=True)
    m = _diagonal_length("extracttrian", a[-1], offset)
    return (a[:-2] + (m * (m + 1) // 2,),)


def _maketrian_shapes(v: Shape, offset: int, lower: bool) -> tuple[Shape]:
    _vector("maketrian", v)
    size = v[-1]
    m = (math.isqrt(8 * size + 1) - 1) // 2
    if m * (m + 1) // 2 != size:
        raise ValueError(f"maketrian: the last axis of v has length {size}, not a triangular number m(m+1)/2 "
                         f"(v shape {v})")
    n = m + abs(offset)
    return (v[:-1] + (n, n),)


def _adjoint_reading_options(adjoint: Any) -> Any:
    """``adjoint(cotangent, **options)`` as :func:`~jacacc.tensor.operators.unary_linear` calls it."""
    return lambda ct, x, **options: adjoint(ct, **options)


def _register() -> None:
    from jacacc.linalg import routines

    register_operator(Operator("gelqf", routines.gelqf, _gelqf_shapes, _gelqf_jvp, _gelqf_vjp, _gelqf_flops,
                               in_place=((0, "overwrite_a"),), scipy_blas=True))
    register_operator(Operator("syevd", _syevd_forward, _syevd_shapes, _syevd_jvp, flops=_syevd_flops,
                               in_place=((0, "overwrite_a"),), scipy_blas=True))
    register_operator(Operator("syevd_eigengaps", _eigengaps_forward, _eigengaps_shapes,
                               flops=lambda lam, **_: math.prod(lam) * lam[-1], zero_derivative=True))
    for name, kernel, shapes, adjoint in [
        ("extractdiag", routines.extractdiag, _extractdiag_shapes, makediag),
        ("makediag", routines.makediag, _makediag_shapes, extractdiag),
        ("extracttrian", routines.extracttrian, _extracttrian_shapes, maketrian),
        ("maketrian", routines.maketrian, _maketrian_shapes, extracttrian),
    ]:
        register_operator(unary_linear(name, kernel, shapes, _adjoint_reading_options(adjoint)))
    _register_lu()


_register()
