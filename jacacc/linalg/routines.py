"""Forward kernels of the linear algebra operators of paper 004 (Seeger et al.,
"Auto-Differentiating Linear Algebra", §4), on BLAS/LAPACK.

These are the plain array computations under :mod:`jacacc.linalg`: no tracing,
no derivatives.  Names, arguments and conventions follow MXNet's ``linalg``
operators, which the paper contributed:

* **Batches.**  Every operator takes matrices in the last two axes and any
  number of leading (batch) axes; operands of one call must have *the same*
  batch shape (no broadcasting, as in MXNet).  BLAS/LAPACK is called once per
  matrix of the batch from a Python loop over the batch index (:func:`gemm2`
  leaves that loop to :func:`numpy.matmul`); nothing loops over matrix entries
  in Python.
* **Row-major storage without copies** (§4.1, §5).  A C-ordered matrix seen by
  Fortran is its transpose, so each operator calls BLAS/LAPACK on transposed
  views with flipped ``lower``/``side``/``trans`` flags (LQ becomes QR of the
  transpose, as in the paper's MXNet code); no hidden transpositions or copies
  (one exception, inside SciPy, is noted under :func:`gelqf`).
* **Dtypes.**  float32 and float64 run in their own precision (``s``/``d``
  routines picked by :func:`scipy.linalg.get_lapack_funcs` /
  :func:`~scipy.linalg.get_blas_funcs`); operands of mixed dtypes are promoted
  with :func:`numpy.result_type`; integer and boolean input becomes float64,
  float16 becomes float32; complex and other dtypes raise :class:`TypeError`.
* **Which entries are read.**  Operators on triangular or symmetric input read
  only one triangle (the one ``lower`` names; :func:`syevd` the lower one);
  the other triangle may hold anything, NaN included.  Input is checked for
  NaN/inf in exactly the entries the operator reads, before any work, and a
  non-finite entry raises :class:`ValueError` naming the operator, the operand,
  the batch index and the position.  The data movement helpers
  (:func:`extractdiag`, :func:`makediag`, :func:`extracttrian`,
  :func:`maketrian`) do no arithmetic and pass NaN through unchecked.
* **Memory.**  Results are written into one freshly allocated output per
  result.  Where LAPACK/BLAS works in place, an ``overwrite_*`` keyword
  (default ``False``, as in SciPy) lets the result take the input's memory:
  it does so when that input is a writeable, C-contiguous array of the result
  dtype, and the operator then returns that very array; otherwise a copy is
  made as without the keyword.  Read-only operands are converted
  (:func:`numpy.ascontiguousarray`) only when they are not C-contiguous arrays
  of the result dtype.  Each docstring lists the temporaries beyond this.
  SciPy's wrappers allocate LAPACK's workspace on every call (the paper's
  MXNet code allocates it once per batch); the optimal size is queried once.

Examples
--------
>>> import numpy as np
>>> from jacacc.linalg.routines import potrf, trsm, sumlogdiag
>>> A = np.array([[4.0, 1.0], [1.0, 4.25]])
>>> L = potrf(A)                                  # A = L Lᵀ
>>> z = trsm(L, np.array([[2.0], [1.0]]))         # z = L⁻¹ y
>>> half_logdet = sumlogdiag(L)                   # log |A| / 2
>>> bool(np.isclose(2 * half_logdet, np.log(np.linalg.det(A))))
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import get_blas_funcs, get_lapack_funcs

from jacacc.errors import JacaccError, NotPositiveDefiniteError

__all__ = [
    "extractdiag",
    "extracttrian",
    "SingularMatrixError",
    "gelqf",
    "gemm",
    "gemm2",
    "getrf",
    "getri",
    "getrs",
    "makediag",
    "maketrian",
    "potrf",
    "potri",
    "slogdet_lu",
    "sumlogdiag",
    "syevd",
    "syrk",
    "trmm",
    "trsm",
]

Part = Literal["all", "lower", "upper", "diag"]


# ---------------------------------------------------------------------------
# Shared helpers: dtypes, shapes, finiteness, buffers, the batch loop
# ---------------------------------------------------------------------------


def _dtype(op: str, *arrays: np.ndarray) -> np.dtype:
    """The dtype ``op`` computes in: float32/float64 kept, mixed promoted,
    integers and booleans to float64, float16 to float32, anything else refused."""
    dtype = np.result_type(*arrays)
    if dtype in (np.float32, np.float64):
        return dtype
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    if dtype == np.float16:
        return np.dtype(np.float32)
    raise TypeError(f"{op}: unsupported dtype {dtype}; {op} computes in float32 or float64 (real input only)")


def _matrices(op: str, name: str, x: ArrayLike, *, square: bool = False) -> np.ndarray:
    """``x`` as an array of matrices (ndim >= 2), square ones if asked."""
    a = np.asarray(x)
    if a.ndim < 2:
        raise ValueError(f"{op}: {name} must be a matrix or a batch of matrices (ndim >= 2), got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{op}: {name} must be square (or a batch of square matrices), got shape {a.shape}")
    return a


def _same_batch(op: str, **operands: np.ndarray) -> tuple[int, ...]:
    """The batch shape (leading axes) common to all operands; refuses a mismatch."""
    (first, a), *rest = operands.items()
    for name, b in rest:
        if a.shape[:-2] != b.shape[:-2]:
            raise ValueError(
                f"{op}: {first} and {name} must have the same batch shape (leading axes); "
                f"got {first} shape {a.shape} and {name} shape {b.shape}"
            )
    return a.shape[:-2]


def real_scalar(op: str, name: str, value: float) -> float:
    """A finite real scalar parameter as a Python float."""
    if isinstance(value, complex | np.complexfloating):
        raise TypeError(f"{op}: {name} must be a real number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {name} must be a real number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{op}: {name} must be finite, got {x}")
    return x


def _at(index: tuple[int, ...]) -> str:
    """' at batch index (i, j)' for a batch member, '' for an unbatched matrix."""
    return f" at batch index {index}" if index else ""


def _part_mask(part: Part, rows: int, cols: int) -> np.ndarray | None:
    """Boolean mask of the entries of a ``rows x cols`` matrix in ``part``."""
    if part == "lower":
        return np.tri(rows, cols, 0, dtype=bool)
    if part == "upper":
        return ~np.tri(rows, cols, -1, dtype=bool)
    if part == "diag":
        return np.eye(rows, cols, dtype=bool)
    return None


def _check_finite(op: str, name: str, a: np.ndarray, part: Part = "all") -> None:
    """Refuse NaN/inf among the entries of ``a`` that ``op`` reads (``part``).

    Temporaries: one boolean array of ``a``'s shape; a second one and the mask
    only when a non-finite entry is found.
    """
    finite = np.isfinite(a)
    if finite.all():
        return
    bad = ~finite
    mask = _part_mask(part, *a.shape[-2:])
    if mask is not None:
        bad &= mask
    hits = np.argwhere(bad)
    if len(hits) == 0:
        return
    *batch, i, j = (int(k) for k in hits[0])
    where = f"{_at(tuple(batch))}, row {i}, column {j}" if batch else f" at row {i}, column {j}"
    raise ValueError(f"{op}: {name} has a non-finite entry ({a[tuple(hits[0])]}){where}; {op} needs finite input")


def _operand(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A read-only operand as a C-contiguous array of ``dtype`` (a copy only if needed)."""
    return np.ascontiguousarray(a, dtype=dtype)


def _result_buffer(a: np.ndarray, dtype: np.dtype, overwrite: bool) -> np.ndarray:
    """The array the result is computed in: ``a`` itself when ``overwrite`` and it
    is a writeable C-contiguous array of ``dtype``, else a C-ordered copy."""
    if overwrite and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable:
        return a
    return np.array(a, dtype=dtype, order="C")


def _each(batch: tuple[int, ...], *arrays: np.ndarray) -> Iterator[tuple]:
    """Yield ``(index, matrix of each array at index)`` over the batch: one
    item for an unbatched call, none for an empty batch."""
    if not batch:  # one matrix: no index to walk (np.ndindex costs a microsecond or two)
        yield ((), *arrays)
        return
    for index in np.ndindex(*batch):
        yield (index, *(a[index] for a in arrays))


def _keep(result: np.ndarray, target: np.ndarray) -> None:
    """Make sure a Fortran routine's result landed in ``target`` (the transposed
    view passed with ``overwrite=1``); copy it there if the wrapper made a copy.

    SciPy's wrappers work in place on the F-contiguous views passed here, with
    one known exception: ``?geqrf`` asks for 8-byte alignment, which float32
    matrices of a batch miss when they start 4 bytes off."""
    if not np.may_share_memory(result, target):
        target[...] = result.T


_FLOATS = (np.dtype(np.float64), np.dtype(np.float32))


def _one_matrix(*arrays: object) -> bool:
    """Whether every argument is one C-contiguous, non-empty float32/float64 matrix of a single dtype:
    what a loop of small solves passes, which the LU routines then take without their batch and
    conversion machinery (12–18 µs a call against LAPACK's 1–2 µs for a 2 × 2 matrix)."""
    first = arrays[0]
    return (type(first) is np.ndarray and first.dtype in _FLOATS
            and all(type(a) is np.ndarray and a.ndim == 2 and a.size and a.dtype == first.dtype
                    and a.flags.c_contiguous for a in arrays))


def _lu_pivots(LU: np.ndarray, piv: object) -> bool:
    """Whether ``piv`` is the int32 vector :func:`getrf` gives for the one square matrix ``LU``."""
    n = LU.shape[0]
    return (LU.shape == (n, n) and type(piv) is np.ndarray and piv.dtype == np.int32
            and piv.shape == (n,))


def _mirror(m: np.ndarray, from_lower: bool, strict: tuple[np.ndarray, np.ndarray]) -> None:
    """Copy the strict lower (``from_lower``) or upper triangle of square ``m``
    onto the other one; ``strict`` is ``np.tril_indices(n, -1)``.
    Temporary: n(n-1)/2 entries."""
    rows, cols = strict
    if from_lower:
        m[cols, rows] = m[rows, cols]
    else:
        m[rows, cols] = m[cols, rows]


def _lapack_info(op: str, info: int, index: tuple[int, ...]) -> None:
    """Turn an illegal-argument report of LAPACK into an error (a bug here, not bad input)."""
    if info < 0:  # pragma: no cover - arguments are built by this module
        raise RuntimeError(f"{op}: LAPACK reported an illegal value in argument {-info}{_at(index)}")


# ---------------------------------------------------------------------------
# Matrix products: gemm, gemm2, syrk
# ---------------------------------------------------------------------------


def _product_shape(op: str, A: np.ndarray, B: np.ndarray, transpose_a: bool, transpose_b: bool) -> tuple[int, int, int]:
    """(m, k, n) of op(A) (m x k) times op(B) (k x n); refuses unequal inner dimensions."""
    m, k = A.shape[-1:-3:-1] if transpose_a else A.shape[-2:]
    k2, n = B.shape[-1:-3:-1] if transpose_b else B.shape[-2:]
    if k != k2:
        raise ValueError(
            f"{op}: inner dimensions differ: op(A) is {m} x {k} and op(B) is {k2} x {n} "
            f"(A shape {A.shape}, transpose_a={transpose_a}; B shape {B.shape}, transpose_b={transpose_b})"
        )
    return m, k, n


def gemm(
    A: ArrayLike,
    B: ArrayLike,
    C: ArrayLike,
    alpha: float = 1.0,
    beta: float = 1.0,
    transpose_a: bool = False,
    transpose_b: bool = False,
    *,
    overwrite_c: bool = False,
) -> np.ndarray:
    """General matrix multiply-accumulate ``alpha·op(A)·op(B) + beta·C`` (BLAS ``?gemm``).

    Parameters
    ----------
    A, B : array_like, shapes (..., m, k) and (..., k, n) after the optional transposes
        Factors with the same batch shape; ``op(X)`` is ``Xᵀ`` if the matching
        ``transpose_*`` flag is set, else ``X``.
    C : array_like, shape (..., m, n)
        Addend, same batch shape.  Not read when ``beta == 0`` (BLAS semantics),
        so it may then hold anything.
    alpha, beta : float
        Finite real scale factors.
    transpose_a, transpose_b : bool
        Use the transpose of ``A`` / ``B``.
    overwrite_c : bool, default False
        Compute the result in ``C``'s memory when possible (see Notes).

    Returns
    -------
    numpy.ndarray, shape (..., m, n)
        ``alpha·op(A)·op(B) + beta·C`` in the promoted dtype.

    Raises
    ------
    ValueError
        ndim < 2, batch shapes or matrix dimensions that do not match (both
        shapes are named), non-finite entries or scale factors.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.2 (``gemm2`` is the case ``beta = 0``).  One BLAS ``?gemm``
    call per batch member on transposed views, accumulating into the result in
    place: no temporaries.  The result is a copy of ``C`` in the promoted dtype,
    or ``C`` itself with ``overwrite_c=True`` when ``C`` is a writeable
    C-contiguous array of that dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import gemm
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> gemm(A, np.eye(2), np.ones((2, 2)), alpha=2.0, beta=-1.0, transpose_a=True)
    array([[1., 5.],
           [3., 7.]])
    """
    op = "gemm"
    A, B, C = (_matrices(op, name, x) for name, x in (("A", A), ("B", B), ("C", C)))
    batch = _same_batch(op, A=A, B=B, C=C)
    m, k, n = _product_shape(op, A, B, transpose_a, transpose_b)
    if C.shape[-2:] != (m, n):
        raise ValueError(
            f"{op}: C must be {m} x {n} to match op(A)·op(B), got C shape {C.shape} (A shape {A.shape}, B shape {B.shape})"
        )
    alpha, beta = real_scalar(op, "alpha", alpha), real_scalar(op, "beta", beta)
    dtype = _dtype(op, A, B, C)
    A, B = _operand(A, dtype), _operand(B, dtype)
    out = _result_buffer(C, dtype, overwrite_c)
    _check_finite(op, "A", A)
    _check_finite(op, "B", B)
    if beta != 0:
        _check_finite(op, "C", out)
    _gemm_into(out, A, B, alpha, beta, bool(transpose_a), bool(transpose_b), batch, k)
    return out


def _gemm_into(
    out: np.ndarray, A: np.ndarray, B: np.ndarray, alpha: float, beta: float, ta: bool, tb: bool, batch: tuple, k: int
) -> None:
    """``out <- alpha·op(A)·op(B) + beta·out`` in place, one ``?gemm`` per batch member.

    Fortran sees each C-ordered matrix transposed, so ``outᵀ = alpha·op(B)ᵀ·op(A)ᵀ
    + beta·outᵀ`` is computed with the operands swapped and the same flags."""
    if out.size == 0:
        return
    if k == 0:  # empty inner dimension: the product is zero
        if beta == 0:
            out[...] = 0
        else:
            out *= beta
        return
    fn = get_blas_funcs("gemm", dtype=out.dtype)
    for _, a, b, o in _each(batch, A, B, out):
        _keep(fn(alpha, b.T, a.T, beta=beta, c=o.T, trans_a=tb, trans_b=ta, overwrite_c=1), o)


def gemm2(
    A: ArrayLike, B: ArrayLike, alpha: float = 1.0, transpose_a: bool = False, transpose_b: bool = False
) -> np.ndarray:
    """General matrix multiply ``alpha·op(A)·op(B)``.

    Parameters
    ----------
    A, B : array_like, shapes (..., m, k) and (..., k, n) after the optional transposes
        Factors with the same batch shape.
    alpha : float
        Finite real scale factor.
    transpose_a, transpose_b : bool
        Use the transpose of ``A`` / ``B``.

    Returns
    -------
    numpy.ndarray, shape (..., m, n)

    Raises
    ------
    ValueError
        ndim < 2, batch shapes or inner dimensions that do not match (both
        shapes are named), non-finite entries or ``alpha``.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.2.  Computed by :func:`numpy.matmul` on (transposed) views
    into the freshly allocated result, then scaled in place by ``alpha`` (if
    ``alpha != 1``): no temporaries.  ``matmul`` hands each float32/float64
    matrix of the batch to the same BLAS ``?gemm`` (with ``beta = 0``) that a
    per-matrix loop would call, but loops over the batch in C, which matters
    for large batches of small matrices; there is no ``C`` to accumulate into,
    so BLAS's in-place accumulation (why :func:`gemm` calls ``?gemm`` itself)
    saves nothing here.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import gemm2
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> gemm2(A, A, alpha=0.5, transpose_b=True)
    array([[ 2.5,  5.5],
           [ 5.5, 12.5]])
    """
    op = "gemm2"
    A, B = _matrices(op, "A", A), _matrices(op, "B", B)
    batch = _same_batch(op, A=A, B=B)
    m, _, n = _product_shape(op, A, B, transpose_a, transpose_b)
    alpha = real_scalar(op, "alpha", alpha)
    dtype = _dtype(op, A, B)
    A, B = _operand(A, dtype), _operand(B, dtype)
    _check_finite(op, "A", A)
    _check_finite(op, "B", B)
    out = np.empty(batch + (m, n), dtype=dtype)
    np.matmul(A.swapaxes(-1, -2) if transpose_a else A, B.swapaxes(-1, -2) if transpose_b else B, out=out)
    if alpha != 1.0:
        out *= alpha
    return out


def syrk(A: ArrayLike, alpha: float = 1.0, transpose: bool = False) -> np.ndarray:
    """Symmetric rank-k product ``alpha·A·Aᵀ`` (``transpose=True``: ``alpha·Aᵀ·A``), BLAS ``?syrk``.

    Parameters
    ----------
    A : array_like, shape (..., n, k)
        Matrix or batch of matrices.
    alpha : float
        Finite real scale factor.
    transpose : bool
        Compute ``alpha·Aᵀ·A`` (shape (..., k, k)) instead.

    Returns
    -------
    numpy.ndarray, shape (..., n, n) (or (..., k, k))
        The full symmetric matrix (both triangles set, exactly symmetric).

    Raises
    ------
    ValueError
        ndim < 2, non-finite entries or ``alpha``.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.2.  ``?syrk`` computes one triangle into the freshly
    allocated result (half the flops of ``gemm``); it is then copied onto the
    other triangle, one matrix at a time through a temporary of n(n-1)/2
    entries.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import syrk
    >>> syrk(np.array([[1.0, 2.0], [3.0, 4.0]]), alpha=2.0)
    array([[10., 22.],
           [22., 50.]])
    """
    op = "syrk"
    A = _matrices(op, "A", A)
    alpha = real_scalar(op, "alpha", alpha)
    dtype = _dtype(op, A)
    A = _operand(A, dtype)
    _check_finite(op, "A", A)
    n, k = (A.shape[-1], A.shape[-2]) if transpose else A.shape[-2:]
    out = np.zeros(A.shape[:-2] + (n, n), dtype=dtype)
    if out.size == 0 or k == 0:  # BLAS refuses k = 0 (lda < 1); the product is zero
        return out
    fn = get_blas_funcs("syrk", dtype=dtype)
    strict = np.tril_indices(n, -1)
    # Fortran sees A as Aᵀ: A·Aᵀ is trans=1 there.  lower=1 there fills the C upper triangle.
    for _, a, o in _each(A.shape[:-2], A, out):
        _keep(fn(alpha, a.T, beta=0.0, c=o.T, trans=int(not transpose), lower=1, overwrite_c=1), o)
        _mirror(o, from_lower=False, strict=strict)
    return out


# ---------------------------------------------------------------------------
# Triangular products and solves: trmm, trsm
# ---------------------------------------------------------------------------


def _triangular_operands(
    op: str, A: ArrayLike, B: ArrayLike, rightside: bool, lower: bool, overwrite_b: bool
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Validate trmm/trsm operands; return (A, result buffer holding B, batch)."""
    A = _matrices(op, "A", A, square=True)
    B = _matrices(op, "B", B)
    batch = _same_batch(op, A=A, B=B)
    n = A.shape[-1]
    side, axis = ("columns", -1) if rightside else ("rows", -2)
    if B.shape[axis] != n:
        raise ValueError(
            f"{op}: B must have {n} {side} to match the {n} x {n} triangular A "
            f"(rightside={rightside}); got A shape {A.shape} and B shape {B.shape}"
        )
    dtype = _dtype(op, A, B)
    A = _operand(A, dtype)
    _check_finite(op, "A", A, "lower" if lower else "upper")
    _named_triangle(op, "A", A, lower)
    out = _result_buffer(B, dtype, overwrite_b)
    _check_finite(op, "B", out)
    return A, out, batch


def _triangular_blas(
    name: str, A: np.ndarray, out: np.ndarray, alpha: float, transpose: bool, rightside: bool, lower: bool, batch: tuple
) -> None:
    """``?trmm`` / ``?trsm`` in place on ``out``, one call per batch member.

    Fortran sees ``A`` as ``Aᵀ`` (upper if ``A`` is lower) and ``B`` as ``Bᵀ``:
    ``op(A)·B`` becomes ``Bᵀ·op(A)ᵀ``, a right-side product with the same
    ``trans`` flag, and vice versa.  BLAS reads only the triangle of ``Aᵀ``
    that is the named triangle of ``A``."""
    if out.size == 0:
        return
    fn = get_blas_funcs(name, dtype=out.dtype)
    flags = {"side": int(not rightside), "lower": int(not lower), "trans_a": int(transpose)}
    for _, a, o in _each(batch, A, out):
        _keep(fn(alpha, a.T, o.T, overwrite_b=1, **flags), o)


def trmm(
    A: ArrayLike,
    B: ArrayLike,
    alpha: float = 1.0,
    transpose: bool = False,
    rightside: bool = False,
    lower: bool = True,
    *,
    overwrite_b: bool = False,
) -> np.ndarray:
    """Triangular matrix product ``alpha·op(A)·B`` (``rightside``: ``alpha·B·op(A)``), BLAS ``?trmm``.

    Parameters
    ----------
    A : array_like, shape (..., n, n)
        Triangular factor; only the triangle named by ``lower`` (diagonal
        included) is read, the other one is ignored.
    B : array_like, shape (..., n, k) (``rightside``: (..., k, n))
        Same batch shape as ``A``.
    alpha : float
        Finite real scale factor.
    transpose : bool
        ``op(A) = Aᵀ`` instead of ``A``.
    rightside : bool
        Multiply ``A`` from the right.
    lower : bool
        ``A`` is lower (default) or upper triangular.
    overwrite_b : bool, default False
        Compute the result in ``B``'s memory when possible.

    Returns
    -------
    numpy.ndarray, the shape of ``B``

    Raises
    ------
    ValueError
        ndim < 2, non-square ``A``, batch shapes or dimensions that do not
        match (both shapes named), non-finite entries (in ``A``'s triangle or
        ``B``) or ``alpha``.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.2 (``trmm``).  In place on the result (a copy of ``B``, or
    ``B`` itself with ``overwrite_b=True`` when ``B`` is a writeable
    C-contiguous array of the result dtype): no temporaries.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import trmm
    >>> L = np.array([[1.0, np.nan], [2.0, 3.0]])      # the upper triangle is never read
    >>> trmm(L, np.array([[1.0], [1.0]]))
    array([[1.],
           [5.]])
    """
    op = "trmm"
    alpha = real_scalar(op, "alpha", alpha)
    A, out, batch = _triangular_operands(op, A, B, rightside, lower, overwrite_b)
    _triangular_blas("trmm", A, out, alpha, bool(transpose), bool(rightside), bool(lower), batch)
    return out


def _named_triangle(op: str, name: str, A: np.ndarray, lower: bool) -> None:
    """Refuse a triangular operand passed with the wrong ``lower``: nothing below (above)
    the diagonal of the triangle named, but something in the other one — an upper
    factor read as a lower one would silently be its diagonal."""
    n = A.shape[-1]
    if n < 2 or A.size == 0:
        return
    # fast path: a nonzero on the first sub- (super-)diagonal settles it for the usual factor
    # (one NumPy call for one matrix: the checks cost a 100 × 100 solve of one vector as much as BLAS)
    first = np.diagonal(A, offset=-1 if lower else 1, axis1=-2, axis2=-1)
    if first.any() if first.ndim == 1 else first.any(axis=-1).all():
        return
    below, above = np.tril_indices(n, -1), np.triu_indices(n, 1)
    named, other = (below, above) if lower else (above, below)
    empty = ~np.any(A[..., named[0], named[1]] != 0, axis=-1)
    filled = np.any(A[..., other[0], other[1]] != 0, axis=-1)
    wrong = empty & filled
    if np.any(wrong):
        index = tuple(int(k) for k in np.argwhere(wrong)[0])
        side, flag = ("lower", "lower=False") if lower else ("upper", "lower=True")
        raise ValueError(f"{op}: {name}{_at(index)} is zero off the diagonal in its {side} triangle, the one "
                         f"read, but not in the other: a triangular {name} of the other kind needs {flag}")


def _nonsingular_triangle(op: str, A: np.ndarray) -> None:
    """Refuse a triangular matrix with an exact zero on its diagonal."""
    diagonal = np.diagonal(A, axis1=-2, axis2=-1)
    if not diagonal.all():
        *batch, i = (int(k) for k in np.argwhere(diagonal == 0)[0])
        raise ValueError(f"{op}: the triangular matrix A{_at(tuple(batch))} is singular (A[{i}, {i}] = 0)")


def trsm(
    A: ArrayLike,
    B: ArrayLike,
    alpha: float = 1.0,
    transpose: bool = False,
    rightside: bool = False,
    lower: bool = True,
    *,
    overwrite_b: bool = False,
) -> np.ndarray:
    """Triangular solve: ``X`` with ``op(A)·X = alpha·B`` (``rightside``: ``X·op(A) = alpha·B``), BLAS ``?trsm``.

    Parameters
    ----------
    A : array_like, shape (..., n, n)
        Triangular matrix; only the triangle named by ``lower`` (diagonal
        included) is read.
    B : array_like, shape (..., n, k) (``rightside``: (..., k, n))
        Right-hand sides, same batch shape as ``A``.
    alpha : float
        Finite real scale factor.
    transpose : bool
        Solve with ``op(A) = Aᵀ``.
    rightside : bool
        Solve ``X·op(A) = alpha·B``.
    lower : bool
        ``A`` is lower (default) or upper triangular.
    overwrite_b : bool, default False
        Compute the solution in ``B``'s memory when possible.

    Returns
    -------
    numpy.ndarray, the shape of ``B``
        ``alpha·op(A)⁻¹·B`` (``rightside``: ``alpha·B·op(A)⁻¹``).

    Raises
    ------
    ValueError
        As :func:`trmm`, and a zero on the diagonal of ``A`` (singular; the
        batch index and position are named).
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.2 (``trsm``).  Backsubstitution in place on the result (a
    copy of ``B``, or ``B`` itself with ``overwrite_b=True``): no
    temporaries, no inverse.  Only an exact zero on the diagonal is refused;
    an ill-conditioned ``A`` gives large results, as in BLAS.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import trsm
    >>> L = np.array([[2.0, 0.0], [1.0, 4.0]])
    >>> trsm(L, np.array([[2.0], [9.0]]))               # L x = b
    array([[1.],
           [2.]])
    >>> trsm(L, np.array([[2.0, 9.0]]), rightside=True, transpose=True)   # x Lᵀ = b
    array([[1., 2.]])
    """
    op = "trsm"
    alpha = real_scalar(op, "alpha", alpha)
    A, out, batch = _triangular_operands(op, A, B, rightside, lower, overwrite_b)
    _nonsingular_triangle(op, A)
    _triangular_blas("trsm", A, out, alpha, bool(transpose), bool(rightside), bool(lower), batch)
    return out


# ---------------------------------------------------------------------------
# Cholesky: potrf, potri
# ---------------------------------------------------------------------------


def potrf(A: ArrayLike, lower: bool = True, *, overwrite_a: bool = False) -> np.ndarray:
    """Cholesky factorization (LAPACK ``?potrf``): ``A = L·Lᵀ`` (``lower=False``: ``A = Uᵀ·U``).

    Parameters
    ----------
    A : array_like, shape (..., n, n)
        Symmetric positive definite matrices; only the triangle named by
        ``lower`` (diagonal included) is read, the other one is ignored.
    lower : bool
        Return the lower factor ``L`` (default) or the upper factor ``U = Lᵀ``.
    overwrite_a : bool, default False
        Compute the factor in ``A``'s memory when possible.

    Returns
    -------
    numpy.ndarray, shape (..., n, n)
        The triangular factor with positive diagonal; its other triangle is zero.

    Raises
    ------
    NotPositiveDefiniteError
        A matrix is not positive definite; the message names ``potrf``, the
        batch index and the order of the first leading minor that is not
        positive.  A ``numpy.linalg.LinAlgError`` (and ``ValueError``).  With
        ``overwrite_a=True``, ``A``'s contents are then unspecified.
    ValueError
        ndim < 2, non-square input, non-finite entries in the triangle read.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.2.  In place on the result (a copy of ``A``, or ``A``
    itself with ``overwrite_a=True`` when ``A`` is a writeable C-contiguous
    array of the result dtype), which LAPACK also zeroes in the other
    triangle: no temporaries.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import potrf
    >>> potrf([[4.0, 1.0], [1.0, 4.25]])              # MXNet's documented example
    array([[2. , 0. ],
           [0.5, 2. ]])
    >>> potrf([[4.0, 1.0], [1.0, 4.25]], lower=False)
    array([[2. , 0.5],
           [0. , 2. ]])
    """
    op = "potrf"
    A = _matrices(op, "A", A, square=True)
    dtype = _dtype(op, A)
    out = _result_buffer(A, dtype, overwrite_a)
    _check_finite(op, "A", out, "lower" if lower else "upper")
    if out.size == 0:
        return out
    fn = get_lapack_funcs("potrf", dtype=dtype)
    # Fortran sees Aᵀ: C's lower triangle is its upper one, so lower=True asks for Fortran's U.
    for index, o in _each(A.shape[:-2], out):
        c, info = fn(o.T, lower=int(not lower), clean=1, overwrite_a=1)
        _lapack_info(op, info, index)
        if info > 0:
            raise NotPositiveDefiniteError(
                f"{op}: the matrix{_at(index)} is not positive definite "
                f"(leading minor of order {info} is not positive)"
            )
        _keep(c, o)
    return out


def potri(L: ArrayLike, lower: bool = True, *, overwrite_l: bool = False) -> np.ndarray:
    """Inverse of ``A = L·Lᵀ`` (``lower=False``: ``A = Uᵀ·U``) from its Cholesky factor, LAPACK ``?potri``.

    Parameters
    ----------
    L : array_like, shape (..., n, n)
        Cholesky factors (as returned by :func:`potrf` with the same
        ``lower``); only the triangle named by ``lower`` is read.
    lower : bool
        ``L`` is lower (default) or upper triangular.
    overwrite_l : bool, default False
        Compute the inverse in ``L``'s memory when possible.

    Returns
    -------
    numpy.ndarray, shape (..., n, n)
        ``A⁻¹``, full and exactly symmetric.

    Raises
    ------
    NotPositiveDefiniteError
        A factor has a zero on its diagonal, so ``A`` is singular; the message
        names ``potri`` and the batch index.
    ValueError
        ndim < 2, non-square input, non-finite entries in the triangle read.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.2 (``potri``; prefer :func:`trsm` with the factor where
    possible).  In place on the result (a copy of ``L``, or ``L`` itself with
    ``overwrite_l=True``); LAPACK fills one triangle, which is then copied onto
    the other one matrix at a time through a temporary of n(n-1)/2 entries.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import potri
    >>> potri([[2.0, 0.0], [1.0, 1.0]])               # inverse of [[4, 2], [2, 2]]
    array([[ 0.5, -0.5],
           [-0.5,  1. ]])
    """
    op = "potri"
    L = _matrices(op, "L", L, square=True)
    dtype = _dtype(op, L)
    out = _result_buffer(L, dtype, overwrite_l)
    _check_finite(op, "L", out, "lower" if lower else "upper")
    _named_triangle(op, "L", out, lower)
    if out.size == 0:
        return out
    fn = get_lapack_funcs("potri", dtype=dtype)
    strict = np.tril_indices(out.shape[-1], -1)
    for index, o in _each(L.shape[:-2], out):
        c, info = fn(o.T, lower=int(not lower), overwrite_c=1)
        _lapack_info(op, info, index)
        if info > 0:
            raise NotPositiveDefiniteError(
                f"{op}: the Cholesky factor{_at(index)} is singular (L[{info - 1}, {info - 1}] = 0), "
                "so L·Lᵀ is not positive definite"
            )
        _keep(c, o)
        _mirror(o, from_lower=bool(lower), strict=strict)
    return out


# ---------------------------------------------------------------------------
# Factorizations with workspace: gelqf, syevd
# ---------------------------------------------------------------------------


def _workspace(fn: Callable, *args: object) -> int:
    """The optimal LAPACK workspace size reported by a query call (lwork = -1)."""
    work, info = fn(*args, lwork=-1, overwrite_a=1)[-2:]
    return max(1, int(np.real(work[0])))


def gelqf(A: ArrayLike, *, overwrite_a: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """LQ factorization ``A = L·Q`` of a wide matrix (LAPACK ``?geqrf`` + ``?orgqr`` on ``Aᵀ``).

    Parameters
    ----------
    A : array_like, shape (..., m, n) with m <= n
        Matrices with no more rows than columns.
    overwrite_a : bool, default False
        Compute ``Q`` in ``A``'s memory when possible.

    Returns
    -------
    Q : numpy.ndarray, shape (..., m, n)
        Orthonormal rows: ``Q·Qᵀ = I``.
    L : numpy.ndarray, shape (..., m, m)
        Lower triangular, **normalized to a non-negative diagonal** (row ``i``
        of ``Q`` and column ``i`` of ``L`` change sign together).  For ``A`` of
        full rank ``m`` this makes the factorization unique (and the diagonal
        positive); for rank-deficient ``A``, ``A = L·Q`` still holds but the
        factors are not unique.

    Raises
    ------
    ValueError
        ndim < 2, ``m > n`` (both dimensions named), non-finite entries.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.3.  SciPy wraps no ``?gelqf``/``?orglq``; as in the paper's
    MXNet code, Fortran sees the C-ordered ``A`` as ``Aᵀ``, whose QR
    factorization ``Aᵀ = Q'·R`` gives ``A = Rᵀ·Q'ᵀ = L·Q`` with no transposed
    copies.  ``Q`` is computed in place in the result (a copy of ``A``, or
    ``A`` itself with ``overwrite_a=True``); ``L`` is allocated zeroed and its
    triangle copied out of the intermediate ``R``.  Temporaries per matrix:
    ``tau`` (m entries), a sign vector (m entries) and the LAPACK workspace
    (queried once per call, allocated by SciPy on every LAPACK call); in
    float32, a matrix of a batch that is not 8-byte aligned (odd ``m·n``) is
    also copied once by SciPy's ``?geqrf`` wrapper.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import gelqf
    >>> A = np.array([[3.0, 0.0, 4.0], [3.0, 2.0, 4.0]])
    >>> Q, L = gelqf(A)
    >>> L
    array([[5., 0.],
           [5., 2.]])
    >>> bool(np.allclose(L @ Q, A) and np.allclose(Q @ Q.T, np.eye(2)))
    True
    """
    op = "gelqf"
    A = _matrices(op, "A", A)
    m, n = A.shape[-2:]
    if m > n:
        raise ValueError(f"{op}: A must have no more rows than columns (m <= n), got {m} x {n} (A shape {A.shape})")
    dtype = _dtype(op, A)
    Q = _result_buffer(A, dtype, overwrite_a)
    _check_finite(op, "A", Q)
    L = np.zeros(A.shape[:-1] + (m,), dtype=dtype)
    if Q.size == 0:
        return Q, L
    _lq_in_place(Q, L, A.shape[:-2])
    return Q, L


def _lq_in_place(Q: np.ndarray, L: np.ndarray, batch: tuple[int, ...]) -> None:
    """Overwrite each ``Q[i]`` (holding ``A[i]``) by its LQ factor Q and fill ``L[i]``."""
    m = Q.shape[-2]
    geqrf, orgqr = get_lapack_funcs(("geqrf", "orgqr"), dtype=Q.dtype)
    first = Q[(0,) * len(batch)]
    lwork = max(_workspace(geqrf, first.T), _workspace(orgqr, first.T, np.zeros(m, Q.dtype)))
    lower = np.tri(m, dtype=bool)
    for index, q, lmat in _each(batch, Q, L):
        qr, tau, _, info = geqrf(q.T, lwork=lwork, overwrite_a=1)
        _lapack_info("gelqf", info, index)
        _keep(qr, q)
        # Rᵀ sits in C's lower triangle of q[:, :m]; column i of L and row i of Q
        # change sign together where R's diagonal is negative (only the triangle
        # is written, so L's zero upper triangle stays +0).
        signs = np.where(np.diagonal(q) < 0, -1, 1).astype(Q.dtype)
        np.multiply(q[:, :m], signs, out=lmat, where=lower)
        qq, _, info = orgqr(q.T, tau, lwork=lwork, overwrite_a=1)
        _lapack_info("gelqf", info, index)
        _keep(qq, q)
        q *= signs[:, None]


def syevd(A: ArrayLike, *, overwrite_a: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric eigendecomposition ``A = Uᵀ·diag(lam)·U`` (LAPACK ``?syevd``).

    Parameters
    ----------
    A : array_like, shape (..., n, n)
        Symmetric matrices; only the lower triangle (diagonal included) is
        read, as in MXNet.
    overwrite_a : bool, default False
        Compute ``U`` in ``A``'s memory when possible.

    Returns
    -------
    U : numpy.ndarray, shape (..., n, n)
        Orthogonal; its **rows** are the eigenvectors, normalized so that each
        row's entry of largest magnitude is positive (on an exact tie in
        magnitude, the first of them).
    lam : numpy.ndarray, shape (..., n)
        Eigenvalues in ascending order.

    Raises
    ------
    ValueError
        ndim < 2, non-square input, non-finite entries in the lower triangle.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.4.  Fortran sees the C-ordered lower triangle as the upper
    triangle of ``A`` and returns eigenvectors as columns, which are rows of
    the C-ordered result: ``U`` is computed in place in the result (a copy of
    ``A``, or ``A`` itself with ``overwrite_a=True``).  The sign rule (the
    paper's: ``k = argmax |u_k|``, flip if ``u_k < 0``) makes ``U`` a function
    of ``A`` wherever the eigenvalues are distinct.  Temporaries per matrix:
    ``|u|`` (n x n), the eigenvalue vector and the LAPACK workspaces (queried
    once per call, allocated by SciPy on every call).

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import syevd
    >>> U, lam = syevd([[1.0, 2.0], [2.0, 4.0]])      # MXNet's documented example
    >>> np.round(U, 3)
    array([[ 0.894, -0.447],
           [ 0.447,  0.894]])
    >>> bool(np.allclose(lam, [0.0, 5.0]))
    True
    """
    op = "syevd"
    A = _matrices(op, "A", A, square=True)
    dtype = _dtype(op, A)
    U = _result_buffer(A, dtype, overwrite_a)
    _check_finite(op, "A", U, "lower")
    lam = np.empty(A.shape[:-1], dtype=dtype)
    if U.size == 0:
        return U, lam
    n = A.shape[-1]
    fn, query = get_lapack_funcs(("syevd", "syevd_lwork"), dtype=dtype)
    work, iwork, _ = query(n, compute_v=1, lower=0)
    sizes = {"lwork": max(1, int(work)), "liwork": max(1, int(iwork))}
    for index, u, lvec in _each(A.shape[:-2], U, lam):
        w, v, info = fn(u.T, compute_v=1, lower=0, overwrite_a=1, **sizes)
        _lapack_info(op, info, index)
        if info > 0:  # pragma: no cover - convergence failure on finite input
            raise np.linalg.LinAlgError(f"{op}: the eigensolver did not converge{_at(index)} (info={info})")
        _keep(v, u)
        lvec[...] = w
        _fix_signs(u)
    return U, lam


def _fix_signs(U: np.ndarray) -> None:
    """Flip rows of ``U`` in place so that each row's largest-magnitude entry
    (the first one on ties) is positive."""
    k = np.argmax(np.abs(U), axis=-1)
    flip = np.take_along_axis(U, k[:, None], axis=-1)[:, 0] < 0
    U[flip] *= -1


# ---------------------------------------------------------------------------
# LU: getrf, getrs, getri, slogdet_lu (general square matrices)
# ---------------------------------------------------------------------------


class SingularMatrixError(JacaccError, np.linalg.LinAlgError):
    """A general square matrix that must be invertible has an exact zero pivot in
    its LU factorization (:func:`getrs`, :func:`getri`); the message names the
    operator, the batch index and the pivot.  ``np.linalg.solve`` and
    ``np.linalg.inv`` raise ``LinAlgError("Singular matrix")`` there."""


def getrf(A: ArrayLike, *, overwrite_a: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """LU factorization with partial pivoting of general square matrices (LAPACK ``?getrf``).

    Parameters
    ----------
    A : array_like, shape (..., n, n)
        Square matrices (all entries read).
    overwrite_a : bool, default False
        Compute the factors in ``A``'s memory when possible.

    Returns
    -------
    LU : numpy.ndarray, shape (..., n, n)
        The packed factors, to be read by :func:`getrs`, :func:`getri` and
        :func:`slogdet_lu` only.  As everywhere in this module Fortran sees
        the C-ordered matrix transposed, so ``LU.T`` holds LAPACK's factors of
        ``Aᵀ = P·L·U`` (unit lower ``L``); the diagonal of ``LU`` is ``U``'s.
    piv : numpy.ndarray of int32, shape (..., n)
        LAPACK's row interchanges, 0-based (row ``i`` swapped with ``piv[i]``).

    Raises
    ------
    ValueError
        ndim < 2, non-square input, non-finite entries.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    A singular matrix is not an error here: its factorization completes with
    an exact zero on ``U``'s diagonal, :func:`slogdet_lu` reports it as
    ``(0, -inf)`` (NumPy's convention) and :func:`getrs` / :func:`getri`
    refuse it.  In place on the result (a copy of ``A``, or ``A`` itself with
    ``overwrite_a=True``); no other temporaries.  About ``2n³/3`` FLOPs.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import getrf, getrs
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> LU, piv = getrf(A)
    >>> getrs(LU, piv, np.array([[5.0], [6.0]]))       # A x = b
    array([[-4. ],
           [ 4.5]])
    """
    op = "getrf"
    if _one_matrix(A) and A.shape[0] == A.shape[1] and np.isfinite(A).all():
        LU = A if overwrite_a and A.flags.writeable else A.copy()
        f, ipiv, info = get_lapack_funcs("getrf", dtype=LU.dtype)(LU.T, overwrite_a=1)
        _lapack_info(op, info, ())
        _keep(f, LU)
        return LU, ipiv.astype(np.int32, copy=False)
    A = _matrices(op, "A", A, square=True)
    dtype = _dtype(op, A)
    LU = _result_buffer(A, dtype, overwrite_a)
    _check_finite(op, "A", LU)
    piv = np.zeros(A.shape[:-1], dtype=np.int32)
    if LU.size == 0:
        return LU, piv
    fn = get_lapack_funcs("getrf", dtype=dtype)
    for index, lu, p in _each(A.shape[:-2], LU, piv):
        f, ipiv, info = fn(lu.T, overwrite_a=1)
        _lapack_info(op, info, index)  # info > 0 (a zero pivot) is left to the readers of the factors
        _keep(f, lu)
        p[...] = ipiv
    return LU, piv


def _lu_operands(op: str, LU: ArrayLike, piv: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    LU = _matrices(op, "LU", LU, square=True)
    piv = np.asarray(piv)
    if piv.shape != LU.shape[:-1]:
        raise ValueError(f"{op}: piv must have shape {LU.shape[:-1]} (LU's without its last axis), got {piv.shape}")
    return LU, piv.astype(np.int32, copy=False)


def _nonsingular_lu(op: str, LU: np.ndarray) -> None:
    """Refuse factors with an exact zero on ``U``'s diagonal (a singular matrix)."""
    diagonal = LU.diagonal(0, -2, -1)
    if not diagonal.all():  # one pass, no mask (1.0 against 2.2 µs: every solve from factors checks)
        *batch, k = (int(i) for i in np.argwhere(diagonal == 0)[0])
        raise SingularMatrixError(
            f"{op}: the matrix{_at(tuple(batch))} is singular (its LU factorization has U[{k}, {k}] = 0)"
        )


def getrs(LU: ArrayLike, piv: ArrayLike, B: ArrayLike, transpose: bool = False) -> np.ndarray:
    """Solve ``A·X = B`` (``transpose``: ``Aᵀ·X = B``) from :func:`getrf`'s factors (LAPACK ``?getrs``).

    Parameters
    ----------
    LU, piv : numpy.ndarray, shapes (..., n, n) and (..., n)
        :func:`getrf` of ``A``.
    B : array_like, shape (..., n, k)
        Right-hand sides, same batch shape as ``LU``.
    transpose : bool
        Solve with ``Aᵀ``.

    Returns
    -------
    numpy.ndarray, shape (..., n, k)
        ``A⁻¹·B`` (``A⁻ᵀ·B``).  Solved by LAPACK, each matrix is stored
        column-major (the transposed view of a C-ordered ``(..., k, n)`` array),
        the layout LAPACK solves in, so ``B`` is copied once and solved in place;
        a batch of at least ``n²`` small systems is solved by substitution across
        the batch instead (fewer calls), in C order.

    Raises
    ------
    SingularMatrixError
        An exact zero pivot (the batch index and position are named).
    ValueError
        Mismatched shapes or batch shapes.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Two triangular solves and the row interchanges per matrix, ``2n²k`` FLOPs;
    no inverse.  Temporaries: none beyond the result.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import getrf, getrs
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> getrs(*getrf(A), np.array([[1.0], [1.0]]), transpose=True)   # Aᵀ x = b
    array([[-0.5],
           [ 0.5]])
    """
    op = "getrs"
    if _one_matrix(LU, B) and _lu_pivots(LU, piv) and B.shape[0] == LU.shape[0]:
        _nonsingular_lu(op, LU)
        X = np.empty(B.shape[::-1], dtype=B.dtype).T
        X[...] = B
        r, info = get_lapack_funcs("getrs", dtype=B.dtype)(LU.T, piv, X, trans=0 if transpose else 1, overwrite_b=1)
        _lapack_info(op, info, ())
        if not np.may_share_memory(r, X):  # pragma: no cover - X is Fortran-contiguous, solved in place
            X[...] = r
        return X
    LU, piv = _lu_operands(op, LU, piv)
    B = _matrices(op, "B", B)
    batch = _same_batch(op, LU=LU, B=B)
    n, k = LU.shape[-1], B.shape[-1]
    if B.shape[-2] != n:
        raise ValueError(f"{op}: B must have {n} rows to match the {n} x {n} matrix A; got B shape {B.shape}")
    dtype = _dtype(op, LU, B)
    _nonsingular_lu(op, LU)
    if B.size and _solved_across(batch, n):
        if (kernel := _getrs_kernel()) is not None:
            X = np.array(B, dtype=dtype, order="C")
            kernel(np.ascontiguousarray(_operand(LU, dtype).reshape(-1, n, n)),
                   np.ascontiguousarray(piv.reshape(-1, n), dtype=np.int32), X.reshape(-1, n, k), transpose)
            return X
        return _getrs_across(_operand(LU, dtype), piv, B, dtype, transpose)
    X = np.swapaxes(np.empty(batch + (k, n), dtype=dtype), -1, -2)
    X[...] = B
    if X.size == 0:
        return X
    LU = _operand(LU, dtype)
    fn = get_lapack_funcs("getrs", dtype=dtype)
    # LAPACK factored Aᵀ (see getrf): A·X = B is a solve with the transpose of what it factored
    trans = 0 if transpose else 1
    for index, lu, p, x in _each(batch, LU, piv, X):
        r, info = fn(lu.T, p, x, trans=trans, overwrite_b=1)
        _lapack_info(op, info, index)
        if not np.may_share_memory(r, x):  # pragma: no cover - x is Fortran-contiguous, solved in place
            x[...] = r
    return X


def _solved_across(batch: tuple[int, ...], n: int) -> bool:
    """Whether a batch of ``n × n`` solves runs faster in one loop over the batch than as one
    LAPACK call per matrix.

    With Numba (:func:`_getrs_kernel`) every batch of two or more systems up to
    :data:`ACROSS_MAX_ORDER` does: a LAPACK call costs a few microseconds of dispatch, the loop
    nanoseconds per entry (64 systems of 2 × 2 with 160 right-hand sides: 348 µs by LAPACK,
    88 µs by NumPy across the batch, 9 µs compiled).  Without it, substitution across the
    batch takes ``n² + 2n`` NumPy calls, and pays where the batch has at least ``n²`` systems."""
    count = math.prod(batch)
    if _getrs_kernel() is not None:
        return count >= 2 and n <= ACROSS_MAX_ORDER
    return count >= 2 and count >= n * n


#: Largest order of the systems :func:`getrs` solves in one compiled loop over a batch; past it
#: LAPACK's blocked solves per matrix win.
ACROSS_MAX_ORDER = 16


def _getrs_loop(lu: np.ndarray, piv: np.ndarray, X: np.ndarray, transpose: bool) -> None:  # compiled by _getrs_kernel
    """Solve every system of the batch in place in ``X`` (shape (batch, n, k), C order) from
    :func:`getrf`'s factors: the row-by-row substitution of :func:`_getrs_across`.  Its two
    cases differ in which triangle holds the unit diagonal and in where the interchanges go;
    ``M`` reads the factors so that both substitute with ``M[b, i, j]``."""
    batch, n, k = X.shape
    M = lu.transpose(0, 2, 1) if transpose else lu
    for b in range(batch):
        if transpose:  # Aᵀ·X = B: the rows of B interchanged first
            for i in range(n):
                p = piv[b, i]
                if p != i:
                    for c in range(k):
                        X[b, i, c], X[b, p, c] = X[b, p, c], X[b, i, c]
        for i in range(n):  # forward: a unit diagonal (transpose) or divided by the diagonal
            for j in range(i):
                f = M[b, i, j]
                for c in range(k):
                    X[b, i, c] -= f * X[b, j, c]
            if not transpose:
                d = M[b, i, i]
                for c in range(k):
                    X[b, i, c] /= d
        for i in range(n - 1, -1, -1):  # backward: divided by the diagonal (transpose) or a unit one
            for j in range(i + 1, n):
                f = M[b, i, j]
                for c in range(k):
                    X[b, i, c] -= f * X[b, j, c]
            if transpose:
                d = M[b, i, i]
                for c in range(k):
                    X[b, i, c] /= d
        if not transpose:  # A·X = B: the interchanges undone last, backwards
            for i in range(n - 1, -1, -1):
                p = piv[b, i]
                if p != i:
                    for c in range(k):
                        X[b, i, c], X[b, p, c] = X[b, p, c], X[b, i, c]


@functools.cache
def _getrs_kernel() -> Callable[..., None] | None:
    """:func:`_getrs_loop` compiled by Numba (cached on disk), or None without Numba."""
    from jacacc.kernels.loops import compiled_loop

    return compiled_loop(_getrs_loop, nogil=True)


def _getrs_across(LU: np.ndarray, piv: np.ndarray, B: np.ndarray, dtype: np.dtype, transpose: bool) -> np.ndarray:
    """:func:`getrs` as forward and back substitution over every matrix of the batch at once.

    :func:`getrf` leaves LAPACK's factors of ``Aᵀ = P·L·U`` transposed in C order: ``L[i, j]``
    and ``U[i, j]`` are ``LU[j, i]``.  So ``Aᵀ·X = B`` interchanges the rows of ``B``, then
    solves with ``L`` (unit lower) and ``U``; ``A·X = B``, that is ``Uᵀ·Lᵀ·Pᵀ·X = B``, solves
    with the lower triangle of ``LU``, then its unit upper one, then interchanges backwards
    (LAPACK ``?getrs``'s two cases, row by row)."""
    n, k = LU.shape[-1], B.shape[-1]
    lu = LU.reshape(-1, n, n)
    pivots = piv.reshape(-1, n)
    X = np.array(B, dtype=dtype, order="C").reshape(-1, n, k)
    every = np.arange(X.shape[0])

    def interchange(i: int) -> None:
        p = pivots[:, i]
        if (p != i).any():
            row = X[every, i].copy()
            X[every, i] = X[every, p]
            X[every, p] = row

    def subtract(i: int, coefficients: np.ndarray, rows: slice) -> None:
        X[:, i] -= np.einsum("bj,bjk->bk", coefficients, X[:, rows])

    if transpose:
        for i in range(n):
            interchange(i)
        for i in range(1, n):
            subtract(i, lu[:, :i, i], slice(0, i))
        for i in range(n - 1, -1, -1):
            if i < n - 1:
                subtract(i, lu[:, i + 1:, i], slice(i + 1, n))
            X[:, i] /= lu[:, i, i, None]
    else:
        for i in range(n):
            if i:
                subtract(i, lu[:, i, :i], slice(0, i))
            X[:, i] /= lu[:, i, i, None]
        for i in range(n - 2, -1, -1):
            subtract(i, lu[:, i, i + 1:], slice(i + 1, n))
        for i in range(n - 1, -1, -1):
            interchange(i)
    return X.reshape(B.shape)


def getri(LU: ArrayLike, piv: ArrayLike, *, overwrite_lu: bool = False) -> np.ndarray:
    """The inverse ``A⁻¹`` from :func:`getrf`'s factors (LAPACK ``?getri``).

    Parameters
    ----------
    LU, piv : numpy.ndarray, shapes (..., n, n) and (..., n)
        :func:`getrf` of ``A``.
    overwrite_lu : bool, default False
        Compute the inverse in ``LU``'s memory when possible.

    Returns
    -------
    numpy.ndarray, shape (..., n, n)

    Raises
    ------
    SingularMatrixError
        An exact zero pivot (the batch index and position are named).
    ValueError
        Mismatched shapes.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    In place on the result (a copy of ``LU``, or ``LU`` itself with
    ``overwrite_lu=True``): LAPACK inverts the factors of ``Aᵀ``, whose
    inverse ``A⁻ᵀ`` seen row-major is ``A⁻¹``.  About ``4n³/3`` FLOPs;
    temporaries: LAPACK's workspace (queried once per call).

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import getrf, getri
    >>> getri(*getrf(np.array([[1.0, 2.0], [3.0, 4.0]])))
    array([[-2. ,  1. ],
           [ 1.5, -0.5]])
    """
    op = "getri"
    if _one_matrix(LU) and _lu_pivots(LU, piv):
        out = LU if overwrite_lu and LU.flags.writeable else LU.copy()
        _nonsingular_lu(op, out)
        fn, query = get_lapack_funcs(("getri", "getri_lwork"), dtype=out.dtype)
        work, info = query(out.shape[0])
        inv, info = fn(out.T, piv, lwork=max(1, int(work)), overwrite_lu=1)
        _lapack_info(op, info, ())
        _keep(inv, out)
        return out
    LU, piv = _lu_operands(op, LU, piv)
    dtype = _dtype(op, LU)
    out = _result_buffer(LU, dtype, overwrite_lu)
    _nonsingular_lu(op, out)
    if out.size == 0:
        return out
    fn, query = get_lapack_funcs(("getri", "getri_lwork"), dtype=dtype)
    work, info = query(out.shape[-1])
    lwork = max(1, int(work))
    for index, lu, p in _each(out.shape[:-2], out, piv):
        inv, info = fn(lu.T, p, lwork=lwork, overwrite_lu=1)
        _lapack_info(op, info, index)
        _keep(inv, lu)
    return out


def slogdet_lu(LU: ArrayLike, piv: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``(sign, log|det A|)`` from :func:`getrf`'s factors (NumPy's ``slogdet``).

    Parameters
    ----------
    LU, piv : numpy.ndarray, shapes (..., n, n) and (..., n)
        :func:`getrf` of ``A``.

    Returns
    -------
    sign : numpy.ndarray, shape (...)
        ``±1``, and ``0`` for a singular matrix (an exact zero pivot).
    logabsdet : numpy.ndarray, shape (...)
        ``Σ log|U_ii|``; ``-inf`` for a singular matrix (NumPy's convention).

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import getrf, slogdet_lu
    >>> sign, logabsdet = slogdet_lu(*getrf(np.array([[1.0, 2.0], [3.0, 4.0]])))   # det = -2
    >>> float(sign), bool(np.isclose(logabsdet, np.log(2.0)))
    (-1.0, True)
    """
    op = "slogdet_lu"
    LU, piv = _lu_operands(op, LU, piv)
    dtype = _dtype(op, LU)
    d = np.diagonal(LU, axis1=-2, axis2=-1).astype(dtype, copy=False)
    swaps = np.count_nonzero(piv != np.arange(LU.shape[-1], dtype=piv.dtype), axis=-1)
    sign = np.where(swaps % 2 == 1, -1.0, 1.0).astype(dtype) * np.prod(np.sign(d), axis=-1) + 0.0  # no -0.0
    with np.errstate(divide="ignore"):  # log 0 = -inf: a singular matrix
        logabsdet = np.sum(np.log(np.abs(d)), axis=-1)
    return np.asarray(sign, dtype=dtype), np.asarray(logabsdet, dtype=dtype)


# ---------------------------------------------------------------------------
# sumlogdiag and the data movement helpers
# ---------------------------------------------------------------------------


def sumlogdiag(A: ArrayLike) -> np.ndarray:
    """Sum of the logarithms of the diagonal, ``Σᵢ log A_ii``, per matrix.

    Parameters
    ----------
    A : array_like, shape (..., n, n)
        Square matrices with positive diagonal (typically Cholesky factors, for
        which ``2·sumlogdiag(L) = log det A``); only the diagonal is read.

    Returns
    -------
    numpy.ndarray, shape (...)
        One sum per matrix: a 0-d array for a single matrix (MXNet returns
        shape (1,) there).

    Raises
    ------
    ValueError
        ndim < 2, non-square input, a non-finite or non-positive diagonal entry
        (its batch index and position are named).
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §3.1 and §4.  Temporaries: the logarithms of the diagonals
    (one vector per matrix).

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import sumlogdiag
    >>> float(sumlogdiag([[np.e, 7.0], [7.0, np.e ** 2]]))
    3.0
    """
    op = "sumlogdiag"
    A = _matrices(op, "A", A, square=True)
    dtype = _dtype(op, A)
    d = np.diagonal(A, axis1=-2, axis2=-1).astype(dtype, copy=False)
    _positive_diagonal(op, d)
    return np.asarray(np.log(d).sum(axis=-1))


def _positive_diagonal(op: str, d: np.ndarray) -> None:
    """Refuse a diagonal (batch of diagonals ``d``) with a non-finite or non-positive entry."""
    bad = ~(np.isfinite(d) & (d > 0))
    if bad.any():
        *batch, i = (int(k) for k in np.argwhere(bad)[0])
        value = d[(*batch, i)]
        what = "non-finite" if not np.isfinite(value) else "non-positive"
        raise ValueError(
            f"{op}: A{_at(tuple(batch))} has a {what} diagonal entry (A[{i}, {i}] = {value}); "
            f"{op} needs a finite, positive diagonal"
        )


def _offset_size(op: str, A: np.ndarray, offset: int) -> int:
    """Length ``n - |offset|`` of the diagonal ``offset`` of the square matrices in ``A``."""
    n = A.shape[-1]
    m = n - abs(offset)
    if m < 0 or (m == 0 and offset != 0):
        raise ValueError(f"{op}: offset {offset} is out of range for {n} x {n} matrices (|offset| < {n} needed)")
    return m


def extractdiag(A: ArrayLike, offset: int = 0) -> np.ndarray:
    """The diagonal ``offset`` of each square matrix (MXNet ``linalg.extractdiag``).

    Parameters
    ----------
    A : array_like, shape (..., n, n)
    offset : int
        0 is the main diagonal, ``k > 0`` the k-th diagonal above it, ``k < 0``
        the k-th below it; ``|offset| < n``.

    Returns
    -------
    numpy.ndarray, shape (..., n - abs(offset))
        A new array (not a view).

    Raises
    ------
    ValueError
        ndim < 2, non-square input, ``offset`` out of range.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4 (MXNet's helper operators).  Data movement only: no
    temporaries, no finiteness check.

    Examples
    --------
    >>> from jacacc.linalg.routines import extractdiag
    >>> extractdiag([[1.0, 2.0], [3.0, 4.0]]), extractdiag([[1.0, 2.0], [3.0, 4.0]], offset=1)
    (array([1., 4.]), array([2.]))
    """
    op = "extractdiag"
    A = _matrices(op, "A", A, square=True)
    _offset_size(op, A, int(offset))
    return np.diagonal(A, int(offset), axis1=-2, axis2=-1).astype(_dtype(op, A), copy=True)


def _diag_positions(m: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the ``m`` entries of diagonal ``offset``."""
    i = np.arange(m)
    return i + max(-offset, 0), i + max(offset, 0)


def makediag(v: ArrayLike, offset: int = 0) -> np.ndarray:
    """Square matrices with ``v`` on diagonal ``offset`` and zeros elsewhere (MXNet ``linalg.makediag``).

    Parameters
    ----------
    v : array_like, shape (..., m)
        Diagonal entries (a vector or a batch of them).
    offset : int
        Diagonal to fill: 0 main, ``k > 0`` above, ``k < 0`` below.

    Returns
    -------
    numpy.ndarray, shape (..., m + abs(offset), m + abs(offset))

    Raises
    ------
    ValueError
        ``v`` with ndim < 1.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.  Inverse of :func:`extractdiag`; data movement only.
    Temporaries: two index vectors of length m.

    Examples
    --------
    >>> from jacacc.linalg.routines import makediag
    >>> makediag([1.0, 2.0], offset=-1)
    array([[0., 0., 0.],
           [1., 0., 0.],
           [0., 2., 0.]])
    """
    op = "makediag"
    v = np.asarray(v)
    if v.ndim < 1:
        raise ValueError(f"{op}: v must be a vector or a batch of vectors (ndim >= 1), got shape {v.shape}")
    offset = int(offset)
    m = v.shape[-1]
    n = m + abs(offset)
    out = np.zeros(v.shape[:-1] + (n, n), dtype=_dtype(op, v))
    rows, cols = _diag_positions(m, offset)
    out[..., rows, cols] = v
    return out


def _trian_positions(m: int, offset: int, lower: bool) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices, in MXNet's packing order, of the triangle that
    :func:`extracttrian` takes from square matrices of size ``m + |offset|``.

    The lower triangle (``offset < 0``, or ``offset == 0`` and ``lower``) is
    packed row by row; the upper one (``offset > 0``, or ``offset == 0`` and not
    ``lower``) column by column, i.e. as the lower triangle of the transpose.
    """
    rows, cols = np.tril_indices(m)
    if offset < 0 or (offset == 0 and lower):
        return rows - offset, cols
    return cols, rows + offset


def extracttrian(A: ArrayLike, offset: int = 0, lower: bool = True) -> np.ndarray:
    """A triangle of each square matrix, packed into a vector (MXNet ``linalg.extracttrian``).

    Parameters
    ----------
    A : array_like, shape (..., n, n)
    offset : int
        ``0``: the lower (``lower=True``) or upper triangle including the main
        diagonal.  ``k > 0``: the upper triangle on and above the k-th
        diagonal above the main one; ``k < 0``: the lower triangle on and
        below the ``|k|``-th diagonal below it (``lower`` is ignored then).
        ``|offset| < n``.
    lower : bool
        Which triangle when ``offset == 0``.

    Returns
    -------
    numpy.ndarray, shape (..., m(m+1)/2) with m = n - abs(offset)
        The lower triangle packed row by row (``A[0,0], A[1,0], A[1,1],
        A[2,0], ...`` for ``offset = 0``); the upper one column by column
        (``A[0,0], A[0,1], A[1,1], A[0,2], ...``), so that
        ``extracttrian(A, k, lower=False) == extracttrian(Aᵀ, -k)``, as in
        MXNet's implementation.

    Raises
    ------
    ValueError
        ndim < 2, non-square input, ``offset`` out of range.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.  Data movement only (no finiteness check); temporaries: the
    two index vectors of length m(m+1)/2.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.linalg.routines import extracttrian
    >>> A = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> extracttrian(A), extracttrian(A, lower=False), extracttrian(A, 1), extracttrian(A, -1)
    (array([1., 3., 4.]), array([1., 2., 4.]), array([2.]), array([3.]))
    >>> extracttrian(np.arange(9.0).reshape(3, 3), lower=False)
    array([0., 1., 4., 2., 5., 8.])
    """
    op = "extracttrian"
    A = _matrices(op, "A", A, square=True)
    offset = int(offset)
    m = _offset_size(op, A, offset)
    rows, cols = _trian_positions(m, offset, bool(lower))
    return A[..., rows, cols].astype(_dtype(op, A), copy=False)


def maketrian(v: ArrayLike, offset: int = 0, lower: bool = True) -> np.ndarray:
    """Square matrices from packed triangles (MXNet ``linalg.maketrian``, inverse of :func:`extracttrian`).

    Parameters
    ----------
    v : array_like, shape (..., m(m+1)/2)
        Packed triangles in :func:`extracttrian`'s order.
    offset, lower : int, bool
        As in :func:`extracttrian`; the result has size ``m + |offset|``.

    Returns
    -------
    numpy.ndarray, shape (..., m + abs(offset), m + abs(offset))
        Zero outside the triangle.

    Raises
    ------
    ValueError
        ``v`` with ndim < 1 or a last axis whose length is not a triangular
        number m(m+1)/2.
    TypeError
        Complex or non-numeric input.

    Notes
    -----
    Paper 004, §4.  Data movement only; temporaries: the two index vectors.

    Examples
    --------
    >>> from jacacc.linalg.routines import maketrian
    >>> maketrian([1.0, 2.0, 3.0])
    array([[1., 0.],
           [2., 3.]])
    >>> maketrian([1.0, 2.0, 3.0], offset=1)
    array([[0., 1., 2.],
           [0., 0., 3.],
           [0., 0., 0.]])
    """
    op = "maketrian"
    v = np.asarray(v)
    if v.ndim < 1:
        raise ValueError(f"{op}: v must be a vector or a batch of vectors (ndim >= 1), got shape {v.shape}")
    size = v.shape[-1]
    m = (math.isqrt(8 * size + 1) - 1) // 2
    if m * (m + 1) // 2 != size:
        raise ValueError(
            f"{op}: the last axis of v has length {size}, not a triangular number m(m+1)/2 (v shape {v.shape})"
        )
    offset = int(offset)
    n = m + abs(offset)
    out = np.zeros(v.shape[:-1] + (n, n), dtype=_dtype(op, v))
    rows, cols = _trian_positions(m, offset, bool(lower))
    out[..., rows, cols] = v
    return out
