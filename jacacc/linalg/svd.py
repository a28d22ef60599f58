"""QR, the thin singular value decomposition and the pseudo-inverse as differentiable tensor expressions.

Like the operators of :mod:`jacacc.linalg.factorizations`, each operator here is a general
function of :mod:`jacacc.tensor` (:class:`~jacacc.tensor.operators.Operator`): its forward
pass is LAPACK through NumPy (``np.linalg.qr``, ``np.linalg.svd``, both batched over leading
axes), its pushforward (``jvp``) and pullback (``vjp``) are tensor expressions written with
the operators themselves (``trsm`` instead of any inverse) and einsums, so derivatives of
derivatives (Hessians) work.  Paper 004 has none of these factorizations; the derivative
rules are JAX's (``jax.lax.linalg``'s QR and SVD rules, ``jnp.linalg.pinv``'s), with the
pullbacks derived here as the adjoints of those pushforwards.

``qr(A) -> (Q, R)``, ``A = Q·R`` (A is m × n of full column rank; reduced: Q is m × k, R is k × n, k = min(m, n))
    The operator ``qr`` takes m >= n; a wide A (m < n) is ``A = [A₁ A₂]`` with ``A₁`` square:
    ``Q, R₁ = qr(A₁)``, ``R₂ = Qᵀ·A₂`` (JAX's partition).  With ``X = Ȧ·R⁻¹``,
    ``C = Qᵀ·X`` and ``T = triu(C) + tril(C, −1)ᵀ`` (so ``Ṙ·R⁻¹ = T`` is upper triangular and
    ``Qᵀ·Q̇ = C − T`` skew), the pushforward is ``Q̇ = X − Q·T``, ``Ṙ = T·R`` (JAX's
    ``dq = Q(Ω − C) + X``, ``dr = (C − Ω)R`` with ``Ω = tril(C, −1) − tril(C, −1)ᵀ``, since
    ``C − Ω = T``).  Its adjoint, the pullback, is
    ``Ā = (Q̄ + Q·copyutl(R̄·Rᵀ − Qᵀ·Q̄))·R⁻ᵀ``, where ``copyutl`` mirrors the upper triangle
    onto the lower one (gelqf's ``copyltu`` of paper 004 §4.3 for the transposed factorization).
    Both use one triangular solve (``trsm``) with R.
``gesdd(A) -> (U, s, Vh)``, ``A = U·diag(s)·Vh`` (thin: U is m × k, s has k entries, Vh is k × n)
    With ``dS = Uᵀ·Ȧ·V`` (k × k) and ``F_ij = 1/(s_j² − s_i²)`` off the diagonal, 0 on it:
    ``ṡ = diag(dS)``, ``U̇ = U·(F ∘ (dS·S + S·dSᵀ)) + [m > n] (Ȧ·V − U·dS)·S⁻¹`` and
    ``V̇h = −(F ∘ (S·dS + dSᵀ·S))·Vh + [n > m] S⁻¹·(Uᵀ·Ȧ − dS·Vh)`` (JAX's rule; the
    bracketed terms are the parts of U̇, V̇ outside the span of U, V, present only for
    non-square A).  The pullback is ``Ā = U·Z·Vh`` plus ``(Ū − U·G_U)·S⁻¹·Vh`` (m > n) or
    ``U·S⁻¹·(V̄h − G_Vᵀ·Vh)`` (n > m), with ``G_U = Uᵀ·Ū``, ``G_V = Vh·V̄hᵀ`` and
    ``Z = (F ∘ (G_U − G_Uᵀ))·S + S·(F ∘ (G_V − G_Vᵀ)) + diag(s̄)``.  A derivative of the
    singular values alone (``s̄`` only, or the ``ṡ`` of a pushforward) is ``U·diag(s̄)·Vh``
    and ``diag(Uᵀ·Ȧ·V)``: F never enters it.
``pinv(A, rcond) -> P`` (m × n A, n × m P)
    The forward pass is NumPy's: the thin SVD with the singular values at or below
    ``rcond·s_max`` cut off.  The derivative is JAX's (Golub and Pereyra 1973):
    ``Ṗ = −P·Ȧ·P + P·Pᵀ·Ȧᵀ·(I − A·P) + (I − P·A)·Ȧᵀ·Pᵀ·P``, pullback
    ``Ā = −Pᵀ·P̄·Pᵀ + (I − A·P)·P̄ᵀ·P·Pᵀ + Pᵀ·P·P̄ᵀ·(I − P·A)``, written with P, so no
    singular vectors (and no gaps between singular values) enter it: it is exact at every A
    of full rank, repeated singular values included (P of an orthogonal matrix).  The cutoff
    is a locally constant choice of the rank r: where it cuts singular values off, the
    derivative is that of the pseudo-inverse along perturbations that keep the rank r
    (exact for A of rank r, Golub and Pereyra's theorem), as JAX's.

**Signs.**  QR and the SVD are unique only up to signs: column j of Q with row j of R,
and column j of U with row j of Vh, may change sign together.  By default the forward passes
fix them, so that each is a function of A that is smooth wherever it is differentiable:
``qr`` makes the diagonal of R non-negative (as ``gelqf`` does for L; NumPy's signs are
LAPACK's Householder signs, which may differ column by column, and JAX's are
LAPACK's too); ``gesdd`` makes the largest-magnitude entry of each column of U positive
(the first of them on an exact tie; ``syevd``'s rule for its eigenvectors).  The rules
are locally constant in A, so the derivatives above (JAX's, derived for any sign choice
that does not jump) are those of the sign-normalized factors.  With ``signs="numpy"`` the
factors are NumPy's own, LAPACK's signs kept (``np.linalg.svd`` and ``np.linalg.qr`` in a
traced function): LAPACK's Householder signs are locally constant too (they follow the
signs of entries of A's reductions), so the same derivatives hold wherever those do not change.

**Repeated singular values.**  F is undefined where two singular values coincide (and
for non-square A, ``S⁻¹`` where one is zero).  As for ``syevd``'s eigenvalues (the
eigengap clamp of paper 004 §4.4, see :mod:`jacacc.linalg.factorizations`), the
denominator is clamped: the ``s_j² − s_i²`` are the eigenvalue gaps of ``AᵀA``, and a gap
below ``sqrt(eps)·s_max²`` (:func:`~jacacc.linalg.factorizations.eigengap_threshold` of
``s²``) is replaced by ``±`` that threshold, keeping F antisymmetric, with a
:class:`RuntimeWarning` naming the batch index and the smallest gap.  The clamp is built
when the derivative is evaluated, by a small operator ``gesdd_gaps``
(:func:`singular_value_gaps`) whose outputs are locally constant, so F stays an
expression in s that the tensor calculus differentiates to any order.  JAX returns inf
or nan there.  A first derivative of the singular values alone never involves F, so it
never warns; second derivatives of singular values do (``s̈`` reads ``U̇`` and ``V̇``),
as for eigenvalues.

**Batches.**  A is ``(..., m, n)``: the leading axes are a batch, factored matrix by
matrix by NumPy's LAPACK loop, as ``potrf`` and ``syevd`` take theirs; the derivatives
carry the batch letters through every einsum and solve.  Each operator also has a
batching rule (:mod:`jacacc.tensor.batching`) that hands a batch of arguments straight
to the same operator.

Examples
--------
>>> import numpy as np, jacacc.tensor as jt
>>> A = np.array([[3.0, 0.0], [4.0, 5.0], [0.0, 0.0]])
>>> nuclear = lambda A: np.sum(np.linalg.svd(A, full_matrices=False)[1])    # Σ s = ‖A‖_*
>>> U, s, Vh = np.linalg.svd(A, full_matrices=False)
>>> np.allclose(jt.grad(nuclear)(A), U @ Vh)                                # ∂‖A‖_*/∂A = U·Vh
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from jacacc.linalg.blas_cholesky import masked, matmul, off_diagonal_mask, transposed, triangle_mask, trsm
from jacacc.linalg.factorizations import clamped_gaps
from jacacc.tensor import expr as E
from jacacc.tensor.expr import Tensor
from jacacc.tensor.operators import Operator, apply_operator, register_operator

__all__ = ["gesdd", "pinv", "qr", "singular_value_gaps"]

Shape = tuple[int, ...]


# ---------------------------------------------------------------------------- expression helpers
def _labels(batch: int, count: int) -> tuple[str, list[str]]:
    """Einsum letters: ``batch`` leading ones (as a string) and ``count`` further ones."""
    letters = [E.symbol(k) for k in range(batch + count)]
    return "".join(letters[:batch]), letters[batch:]


def _minus(a: Tensor, b: Tensor) -> Tensor:
    return E.add(a, E.scale(-1.0, b))


def _hadamard(x: Tensor, y: Tensor) -> Tensor:
    """``x ∘ y`` for two tensors of one shape."""
    s, _ = _labels(x.ndim, 0)
    return E.einsum(f"{s},{s}->{s}", x, y)


def _scale_columns(x: Tensor, d: Tensor) -> Tensor:
    """``x·diag(d)``: column j of each matrix times ``d_j``."""
    b, (i, j) = _labels(x.ndim - 2, 2)
    return E.einsum(f"{b}{i}{j},{b}{j}->{b}{i}{j}", x, d)


def _scale_rows(x: Tensor, d: Tensor) -> Tensor:
    """``diag(d)·x``: row i of each matrix times ``d_i``."""
    b, (i, j) = _labels(x.ndim - 2, 2)
    return E.einsum(f"{b}{i}{j},{b}{i}->{b}{i}{j}", x, d)


def _skew(x: Tensor) -> Tensor:
    """``x − xᵀ``."""
    return _minus(x, transposed(x))


def _copyutl(x: Tensor) -> Tensor:
    """The upper triangle of ``x`` (diagonal included) mirrored onto the lower one: half the
    diagonal and the strict upper triangle, plus its transpose."""
    half = masked(x, triangle_mask(x.shape[-1], False, 0.5))
    return E.add(half, transposed(half))


# ---------------------------------------------------------------------------- shape checks and forward helpers
def _matrix(op: str, shape: Shape) -> tuple[int, int]:
    if len(shape) < 2:
        raise ValueError(f"{op}: A must be a matrix or a batch of matrices (ndim >= 2), got shape {shape}")
    return shape[-2], shape[-1]


def _finite(op: str, A: np.ndarray) -> None:
    """Refuse NaN/inf, naming the first one: LAPACK would return garbage or fail to converge."""
    bad = np.argwhere(~np.isfinite(A))
    if len(bad):
        where = tuple(int(k) for k in bad[0])
        raise ValueError(f"{op}: A has a non-finite entry ({A[where]}) at index {where}; {op} needs finite input")


def _batch_rule(batch_shape: Shape, args: tuple[Tensor, ...], batched: tuple[bool, ...],
                **options: Any) -> tuple[tuple[Tensor, ...], dict[str, Any]] | None:
    """The batching rule of the one-argument operators here: the batch axes lead, and the
    operator takes leading axes as a batch already (NumPy's LAPACK loop), so the batched
    argument is passed as it is."""
    return (args, options) if all(batched) else None


# ---------------------------------------------------------------------------- qr
def qr(A: Tensor, signs: str = "normalized") -> tuple[Tensor, Tensor]:
    """The reduced QR factorization ``A = Q·R`` as two expression nodes.

    Parameters
    ----------
    A : Tensor, shape (..., m, n)
        Of full rank ``k = min(m, n)`` (for a wide A, its leading ``m × m`` block must be
        invertible: R's first ``k`` columns are then invertible, which the derivative needs).
    signs : {"normalized", "numpy"}
        ``"normalized"``: R's diagonal is non-negative.  ``"numpy"``: the factors are
        ``np.linalg.qr``'s, with LAPACK's Householder signs (what
        :mod:`jacacc.tensor.numpy_linalg` gives for ``np.linalg.qr``).

    Returns
    -------
    Q : Tensor, shape (..., m, k)
        Orthonormal columns.
    R : Tensor, shape (..., k, n)
        Upper triangular (trapezoidal for a wide A), with a non-negative diagonal for
        ``signs="normalized"``; either sign rule makes the factors unique for A of full rank,
        and so a smooth function of A.

    Notes
    -----
    Pushforward ``Q̇ = X − Q·T``, ``Ṙ = T·R`` with ``X = Ȧ·R⁻¹`` and
    ``T = triu(Qᵀ·X) + tril(Qᵀ·X, −1)ᵀ``; pullback
    ``Ā = (Q̄ + Q·copyutl(R̄·Rᵀ − Qᵀ·Q̄))·R⁻ᵀ`` (JAX's rule and its adjoint; see the module
    docstring).  A wide A is partitioned as JAX does: ``Q, R₁ = qr(A₁)`` of its leading
    square block and ``R₂ = Qᵀ·A₂``, joined along the columns.

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc.linalg.svd import qr
    >>> A = np.array([[3.0, 3.0], [4.0, 4.0], [0.0, 5.0]])
    >>> log_volume = lambda A: np.sum(np.log(np.diagonal(np.linalg.qr(A)[1])))   # log det(AᵀA) / 2
    >>> np.allclose(jt.grad(log_volume)(A), A @ np.linalg.inv(A.T @ A))
    True
    >>> from jacacc.tensor.expr import var
    >>> from jacacc.tensor.evaluate import Program
    >>> x = var("A", (3, 2))
    >>> Q, R = Program(list(qr(x)), [x])(A)
    >>> R                                       # NumPy's (LAPACK's) R is −1 times this
    array([[5., 5.],
           [0., 5.]])
    >>> bool(np.allclose(Q @ R, A))
    True
    """
    m, n = _matrix("qr", A.shape)
    options = _sign_options("qr", signs)
    if m >= n:
        Q, R = apply_operator("qr", [A], **options)
        return Q, R
    # wide: the leading m × m block carries the factorization, the rest of R is Qᵀ times the rest of A
    from jacacc.tensor.arrays import BasicKey, concatenate_nodes, index_node

    lead = tuple(("s", 0, 1, size) for size in A.shape[:-1])
    A1 = index_node(A, BasicKey((*lead, ("s", 0, 1, m))))
    A2 = index_node(A, BasicKey((*lead, ("s", m, 1, n - m))))
    Q, R1 = apply_operator("qr", [A1], **options)
    R2 = matmul(Q, A2, transpose_a=True)
    return Q, concatenate_nodes([R1, R2], axis=-1)


def _qr_shapes(a: Shape, **_: Any) -> tuple[Shape, Shape]:
    m, n = _matrix("qr", a)
    if m < n:
        raise ValueError(f"qr: the operator takes no more columns than rows (m >= n), got {m} x {n} (A shape {a}); "
                         "jacacc.linalg.svd.qr partitions a wide A")
    return a, a[:-2] + (n, n)


_SIGNS = ("normalized", "numpy")


def _sign_options(op: str, signs: str) -> dict[str, str]:
    """The operator options for a sign convention (none for the default, so plans keep their keys)."""
    if signs not in _SIGNS:
        raise ValueError(f"{op}: signs must be one of {_SIGNS}, got {signs!r}")
    return {} if signs == "normalized" else {"signs": signs}


def _qr_forward(A: np.ndarray, signs: str = "normalized") -> tuple[np.ndarray, np.ndarray]:
    """NumPy's reduced QR (LAPACK geqrf + orgqr), normalized to a non-negative diagonal of R
    unless NumPy's signs are asked for."""
    _finite("qr", A)
    Q, R = np.linalg.qr(A, mode="reduced")
    if R.size and signs == "normalized":
        # column j of Q and row j of R change sign together; np.triu keeps R's zeros +0 (not −0)
        signs = np.where(np.diagonal(R, axis1=-2, axis2=-1) < 0, -1, 1).astype(R.dtype)
        Q *= signs[..., None, :]
        R = np.triu(R * signs[..., :, None])
    return Q, R


def _qr_jvp(outputs, args, tangents, **_):  # noqa: ANN001, ANN202, ANN003
    (Q, R), (dA,) = outputs, tangents
    n = R.shape[-1]
    X = trsm(R, dA, rightside=True, lower=False)                          # Ȧ R⁻¹
    C = matmul(Q, X, transpose_a=True)                                   # Qᵀ Ȧ R⁻¹
    # Ṙ R⁻¹ is upper triangular and Qᵀ Q̇ = C − Ṙ R⁻¹ skew: Ṙ R⁻¹ = triu(C) + tril(C, −1)ᵀ
    T = E.add(masked(C, triangle_mask(n, False)), transposed(masked(C, triangle_mask(n, True, 0.0))))
    return (_minus(X, matmul(Q, T)), matmul(T, R))


def _qr_vjp(outputs, args, cotangents, **_):  # noqa: ANN001, ANN202, ANN003
    (Q, R), (Qbar, Rbar) = outputs, cotangents
    M = _minus(matmul(Rbar, R, transpose_b=True), matmul(Q, Qbar, transpose_a=True))
    B = E.add(Qbar, matmul(Q, _copyutl(M)))                              # Q̄ + Q copyutl(M)
    return (trsm(R, B, transpose=True, rightside=True, lower=False),)     # (...) R⁻ᵀ


def _qr_flops(a: Shape, **_: Any) -> int:
    # Householder QR (2mn² − 2n³/3) and forming the thin Q (as much again)
    m, n = a[-2:]
    return math.prod(a[:-2]) * int(4 * m * n * n - 4 * n**3 / 3)


# ---------------------------------------------------------------------------- gesdd and its gaps
def gesdd(A: Tensor, signs: str = "normalized") -> tuple[Tensor, Tensor, Tensor]:
    """The thin singular value decomposition ``A = U·diag(s)·Vh`` as three expression nodes.

    Parameters
    ----------
    A : Tensor, shape (..., m, n)
        Any real matrix; the derivative of the singular vectors needs distinct singular
        values (and, for m ≠ n, nonzero ones), else it is clamped (see the module docstring).
    signs : {"normalized", "numpy"}
        ``"normalized"``: each column of U has its largest-magnitude entry positive.
        ``"numpy"``: the factors are ``np.linalg.svd(A, full_matrices=False)``'s bit for bit,
        with LAPACK's signs (what :mod:`jacacc.tensor.numpy_linalg` gives for ``np.linalg.svd``).

    Returns
    -------
    U : Tensor, shape (..., m, k)
        Orthonormal columns, k = min(m, n), signed as ``signs`` says.
    s : Tensor, shape (..., k)
        The singular values, descending.
    Vh : Tensor, shape (..., k, n)
        Orthonormal rows (row j changes sign with column j of U).

    Notes
    -----
    JAX's pushforward ``ṡ = diag(Uᵀ·Ȧ·V)``, ``U̇ = U·(F ∘ (dS·S + S·dSᵀ)) + …`` with
    ``F_ij = 1/(s_j² − s_i²)`` and its adjoint (module docstring); F is clamped at
    near-repeated singular values with a :class:`RuntimeWarning`
    (:func:`singular_value_gaps`).

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> from jacacc.linalg.svd import gesdd
    >>> A = np.array([[2.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    >>> largest = lambda A: np.linalg.svdvals(A)[0]                        # ‖A‖₂ = s₁
    >>> U, s, Vh = np.linalg.svd(A, full_matrices=False)
    >>> np.allclose(jt.grad(largest)(A), np.outer(U[:, 0], Vh[0]))        # ∂s₁/∂A = u₁v₁ᵀ
    True
    >>> from jacacc.tensor.expr import var
    >>> from jacacc.tensor.evaluate import Program
    >>> x = var("A", (2, 3))
    >>> U, s, Vh = Program(list(gesdd(x)), [x])(A)
    >>> np.round(s ** 2, 12).tolist(), U.tolist()
    ([5.0, 1.0], [[1.0, 0.0], [0.0, 1.0]])
    """
    U, s, Vh = apply_operator("gesdd", [A], **_sign_options("gesdd", signs))
    return U, s, Vh


def _gesdd_shapes(a: Shape, **_: Any) -> tuple[Shape, Shape, Shape]:
    m, n = _matrix("gesdd", a)
    k = min(m, n)
    return a[:-2] + (m, k), a[:-2] + (k,), a[:-2] + (k, n)


def _gesdd_forward(A: np.ndarray, signs: str = "normalized") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NumPy's thin SVD (LAPACK gesdd), each column of U made to have a positive largest-magnitude
    entry unless NumPy's signs are asked for."""
    _finite("gesdd", A)
    U, s, Vh = np.linalg.svd(A, full_matrices=False)
    if U.size and signs == "normalized":
        k = np.argmax(np.abs(U), axis=-2)                                  # first on ties, per column
        signs = np.where(np.take_along_axis(U, k[..., None, :], axis=-2) < 0, -1, 1).astype(U.dtype)
        U *= signs                                                          # (..., 1, k): columns of U
        Vh *= np.swapaxes(signs, -1, -2)                                    # (..., k, 1): rows of Vh
    return U, s, Vh


def _gesdd_jvp(outputs, args, tangents, **_):  # noqa: ANN001, ANN202, ANN003
    (U, s, Vh), (A,), (dA,) = outputs, args, tangents
    m, n = A.shape[-2:]
    b, (i, j) = _labels(A.ndim - 2, 2)
    dS = matmul(matmul(U, dA, transpose_a=True), Vh, transpose_b=True)    # Uᵀ Ȧ V
    ds = E.einsum(f"{b}{i}{i}->{b}{i}", dS)
    # The singular vectors' tangents (the linear map reads only the output it is asked for, so
    # a pushforward of s never evaluates F or its clamp).  dS·S + S·dSᵀ and S·dS + dSᵀ·S are
    # symmetric and F antisymmetric, which gives V̇h = V̇ᵀ = −(F ∘ (S·dS + dSᵀ·S))·Vh.
    F = _inverse_gaps(s)
    XU = E.add(_scale_columns(dS, s), _scale_rows(transposed(dS), s))
    XV = E.add(_scale_rows(dS, s), _scale_columns(transposed(dS), s))
    dU = matmul(U, _hadamard(F, XU))
    dVh = E.scale(-1.0, matmul(_hadamard(F, XV), Vh))
    inverse = E.unary("reciprocal", s)
    if m > n:  # U̇'s part outside span(U): (I − UUᵀ) Ȧ V S⁻¹ = (Ȧ V − U dS) S⁻¹
        dU = E.add(dU, _scale_columns(_minus(matmul(dA, Vh, transpose_b=True), matmul(U, dS)), inverse))
    if n > m:  # V̇h's part outside the row space of Vh: S⁻¹ Uᵀ Ȧ (I − VVᵀ) = S⁻¹ (Uᵀ Ȧ − dS Vh)
        dVh = E.add(dVh, _scale_rows(_minus(matmul(U, dA, transpose_a=True), matmul(dS, Vh)), inverse))
    return (dU, ds, dVh)


def _gesdd_vjp(outputs, args, cotangents, **_):  # noqa: ANN001, ANN202, ANN003
    (U, s, Vh), (A,), (Ubar, sbar, Vhbar) = outputs, args, cotangents
    m, n = A.shape[-2:]
    b, (i, j) = _labels(s.ndim - 1, 2)
    Z = E.einsum(f"{b}{i},{i}{j}->{b}{i}{j}", sbar, E.delta(s.shape[-1]))  # diag(s̄)
    # F and its clamp only where a singular vector's cotangent reads them
    F = _inverse_gaps(s) if not (Ubar.is_zero and Vhbar.is_zero) else E.zeros(s.shape + s.shape[-1:])
    GU = matmul(U, Ubar, transpose_a=True)                                   # Uᵀ Ū
    GV = matmul(Vh, Vhbar, transpose_b=True)                                 # Vᵀ V̄ = Vh V̄hᵀ
    Z = E.add(Z, _scale_columns(_hadamard(F, _skew(GU)), s),                 # (F ∘ (G_U − G_Uᵀ)) S
              _scale_rows(_hadamard(F, _skew(GV)), s))                       # S (F ∘ (G_V − G_Vᵀ))
    left = matmul(U, Z)
    if m > n:  # (Ū − U G_U) S⁻¹, the pullback of U̇'s part outside span(U)
        left = E.add(left, _scale_columns(_minus(Ubar, matmul(U, GU)), E.unary("reciprocal", s)))
    Abar = matmul(left, Vh)
    if n > m:  # S⁻¹ (V̄h − G_Vᵀ Vh)
        right_extra = _scale_rows(_minus(Vhbar, matmul(GV, Vh, transpose_a=True)), E.unary("reciprocal", s))
        Abar = E.add(Abar, matmul(U, right_extra))
    return (Abar,)


def _gesdd_flops(a: Shape, **_: Any) -> int:
    # Golub and Van Loan's count for the R-SVD with U and V (4 l k² + 22 k³, l = max(m, n), k = min(m, n))
    m, n = a[-2:]
    low, high = min(m, n), max(m, n)
    return math.prod(a[:-2]) * (4 * high * low * low + 22 * low**3)


def singular_value_gaps(s: Tensor) -> tuple[Tensor, Tensor]:
    """The clamp of ``gesdd``'s derivative as two locally constant nodes ``(K, C)``.

    Parameters
    ----------
    s : Tensor, shape (..., k)
        Descending singular values (``gesdd``'s second output).

    Returns
    -------
    K : Tensor, shape (..., k, k)
        1 where ``i ≠ j`` and ``|s_j² − s_i²| >= ε``, else 0; ε is
        :func:`~jacacc.linalg.factorizations.eigengap_threshold` of ``s²``
        (``sqrt(eps)·s_max²``, the eigengap clamp of ``AᵀA``).
    C : Tensor, shape (..., k, k)
        ``+ε`` (``i > j``) or ``−ε`` (``i < j``) where a pair is clamped, 1 on the
        diagonal, 0 elsewhere; so ``K ∘ (s_j² − s_i²) + C`` is the clamped denominator of F.

    Notes
    -----
    The operator ``gesdd_gaps`` is evaluated with the derivative (the singular values are
    unknown while tracing); its forward pass warns (:class:`RuntimeWarning`) whenever it
    clamps.  Both outputs are piecewise constant in s: their derivative is zero.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.tensor.expr import var
    >>> from jacacc.tensor.evaluate import Program
    >>> s = var("s", (2,))
    >>> K, C = singular_value_gaps(s)
    >>> [x.tolist() for x in Program([K, C], [s])(np.array([3.0, 1.0]))]
    [[[0.0, 1.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]]
    """
    K, C = apply_operator("gesdd_gaps", [s])
    return K, C


def _gaps_shapes(s: Shape, **_: Any) -> tuple[Shape, Shape]:
    if len(s) < 1:
        raise ValueError(f"gesdd_gaps: s must be a vector or a batch of vectors (ndim >= 1), got shape {s}")
    square = s + s[-1:]
    return square, square


def _gaps_forward(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mask of unclamped pairs and the clamped denominators; warns when clamping."""
    s = np.asarray(s)
    # s descending: λ = −s² ascends, and its gaps λ_i − λ_j are the s_j² − s_i² of F
    return clamped_gaps(-(s * s), "svd: (near-)repeated singular values", "s_j² − s_i² ", "singular vectors")


def _inverse_gaps(s: Tensor) -> Tensor:
    """F: ``1/(s_j² − s_i²)`` off the diagonal (clamped), 0 on it."""
    k = s.shape[-1]
    b, (i, j) = _labels(s.ndim - 1, 2)
    squares = _hadamard(s, s)
    ones = E.ones((k,))
    diff = _minus(E.einsum(f"{b}{j},{i}->{b}{i}{j}", squares, ones), E.einsum(f"{b}{i},{j}->{b}{i}{j}", squares, ones))
    K, C = singular_value_gaps(s)
    return masked(E.unary("reciprocal", E.add(_hadamard(K, diff), C)), off_diagonal_mask(k))


# ---------------------------------------------------------------------------- pinv
def pinv(A: Tensor, rcond: float = 1e-15) -> Tensor:
    """The Moore–Penrose pseudo-inverse as an expression node (NumPy's ``pinv``).

    Parameters
    ----------
    A : Tensor, shape (..., m, n)
    rcond : float
        Singular values at or below ``rcond·s_max`` count as zero (NumPy's default 1e-15).

    Returns
    -------
    Tensor, shape (..., n, m)

    Notes
    -----
    Pushforward ``Ṗ = −P·Ȧ·P + P·Pᵀ·Ȧᵀ·(I − A·P) + (I − P·A)·Ȧᵀ·Pᵀ·P`` (Golub and Pereyra,
    JAX's) and its adjoint, written with the output P: no singular vectors, so no gaps;
    exact for A of full rank, and along rank-preserving directions where the cutoff finds
    a lower rank (module docstring).

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> A = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    >>> np.linalg.pinv(A).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.5, 0.0]]
    >>> g = jt.grad(lambda A: np.linalg.pinv(A)[1, 1])(A)        # ∂(1/a₁₁)/∂a₁₁ = −1/4, and the row space
    >>> g.tolist()
    [[0.0, 0.0], [0.0, -0.25], [0.0, 0.0]]
    """
    return apply_operator("pinv", [A], rcond=float(rcond))[0]


def _pinv_shapes(a: Shape, rcond: float) -> tuple[Shape]:
    m, n = _matrix("pinv", a)
    return (a[:-2] + (n, m),)


def _pinv_forward(A: np.ndarray, rcond: float) -> np.ndarray:
    """``V·diag(1/s)·Uᵀ`` over the singular values above ``rcond·s_max`` (NumPy's algorithm)."""
    _finite("pinv", A)
    m, n = A.shape[-2:]
    if m == 0 or n == 0:
        return np.zeros(A.shape[:-2] + (n, m), dtype=A.dtype)
    U, s, Vh = np.linalg.svd(A, full_matrices=False)
    large = s > rcond * np.max(s, axis=-1, keepdims=True)
    inverse = np.divide(1.0, s, out=np.zeros_like(s), where=large)
    return np.matmul(np.swapaxes(Vh, -1, -2), inverse[..., :, None] * np.swapaxes(U, -1, -2))


def _pinv_jvp(outputs, args, tangents, rcond):  # noqa: ANN001, ANN202
    (P,), (A,), (dA,) = outputs, args, tangents
    minus_P_dA_P = E.scale(-1.0, matmul(matmul(P, dA), P))
    S = matmul(matmul(P, P, transpose_b=True), dA, transpose_b=True)      # P Pᵀ Ȧᵀ
    T = matmul(dA, matmul(P, P, transpose_a=True), transpose_a=True)      # Ȧᵀ Pᵀ P
    # S (I − A P) + (I − P A) T, without forming the projections
    return (E.add(minus_P_dA_P, S, E.scale(-1.0, matmul(matmul(S, A), P)), T, E.scale(-1.0, matmul(P, matmul(A, T)))),)


def _pinv_flops(a: Shape, **_: Any) -> int:
    m, n = a[-2:]
    return _gesdd_flops(a) + math.prod(a[:-2]) * 2 * m * n * min(m, n)


# ---------------------------------------------------------------------------- registration
def _register() -> None:
    register_operator(Operator("qr", _qr_forward, _qr_shapes, _qr_jvp, _qr_vjp, _qr_flops, batch=_batch_rule))
    register_operator(Operator("gesdd", _gesdd_forward, _gesdd_shapes, _gesdd_jvp, _gesdd_vjp, _gesdd_flops,
                               batch=_batch_rule))
    register_operator(Operator("gesdd_gaps", _gaps_forward, _gaps_shapes, flops=lambda s, **_: math.prod(s) * s[-1],
                               batch=_batch_rule, zero_derivative=True))
    register_operator(Operator("pinv", _pinv_forward, _pinv_shapes, _pinv_jvp, flops=_pinv_flops,
                               batch=_batch_rule))


_register()
