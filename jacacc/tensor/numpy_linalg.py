"""``np.linalg`` inside functions that :mod:`jacacc.tensor` differentiates (paper 004 §4).

Each function below is registered with :func:`~jacacc.tensor.trace.register_function`,
so a plain NumPy function that calls it traces into the operators of
:mod:`jacacc.linalg` — general functions whose pushforward and pullback are
tensor expressions written with the operators again, so ``grad``, ``jacobian``,
``vjp``, ``jvp`` and ``hessian`` (``compress=True`` included) work in every mode:

======================  ================================================================
NumPy                   operators
======================  ================================================================
``solve(a, b)``         ``getrf`` (LU with partial pivoting) + ``getrs``
``inv(a)``              ``getrf`` + ``getri``
``slogdet(a)``          ``getrf`` + ``slogdet_lu``: ``(sign, logabsdet)``
``det(a)``              ``sign · exp(logabsdet)`` of ``slogdet``
``cholesky(a)``         ``potrf`` (``upper=True``: the upper factor)
``eigh(a, UPLO)``       ``syevd`` (``eigenvalues``, ``eigenvectors`` = Uᵀ); ``eigvalsh``
``svd(a, ...)``         ``gesdd`` (thin SVD: ``U``, ``S``, ``Vh``); ``compute_uv=False`` and
                        ``svdvals`` (NumPy ≥ 2): its singular values alone
``qr(a, mode)``         ``qr`` (``Q``, ``R``; ``mode='r'``: ``R``); a wide ``a`` as
                        ``qr`` of its leading square block and ``Qᵀ`` times the rest
``pinv(a, rcond)``      ``pinv`` (NumPy's SVD with its cutoff; Golub–Pereyra derivative)
``norm(x, ord, axis)``  einsums, ``abs``, ``sqrt``, ``pow`` and a max/min weighting;
                        ``ord=2``, ``-2``, ``'nuc'`` of a matrix: of ``gesdd``'s singular values
``vector_norm``,        the same (NumPy ≥ 2's array-API spellings)
``matrix_norm``
======================  ================================================================

The operators ``gesdd``, ``qr`` and ``pinv`` are those of :mod:`jacacc.linalg.svd`.
A matrix argument is ``(..., n, n)`` (``(..., m, n)`` for ``svd``, ``qr``, ``pinv``
and the norms): leading axes are a batch, as in NumPy;
``solve`` broadcasts the batch axes of ``a`` and ``b`` (``b`` is a vector when
``b.ndim == 1`` — NumPy 2's rule — else a stack of ``n × k`` matrices).

Conventions (values are NumPy's, and derivatives those of NumPy's function; where that
function has none — repeated eigenvalues, singular matrices — each bullet says what is done):

* **Symmetric input** (``cholesky``, ``eigh``, ``eigvalsh``).  Value and
  derivative are those of NumPy's function: only the lower triangle is read
  (``UPLO='U'`` / ``upper=True``: the upper one), so the other triangle's
  entries have derivative 0 and each off-diagonal entry read counts for both
  places it fills (:func:`symmetric_from_triangle`; autograd's convention,
  and what central differences of NumPy's function give).  JAX's
  ``symmetrize_input=True`` differentiates ``f((A + Aᵀ)/2)`` instead (paper
  004's ``potrf`` and ``syevd`` likewise, and ``jacacc.linalg``'s operators
  keep that); the two agree on every perturbation that keeps ``A`` symmetric,
  so wherever ``A`` is built symmetric (``X Xᵀ``, a kernel matrix) the
  derivatives with respect to what it is built from are the same.
* **Eigenvectors** are NumPy's, bit for bit: LAPACK's signs, which are
  locally constant where the eigenvalues are distinct.  (``jacacc.linalg.syevd``
  itself follows paper 004's rule, each vector's largest-magnitude entry
  positive; ``signs="numpy"`` is what ``np.linalg.eigh`` uses.)  The
  derivative is JAX's (``v̇ = v·(F ∘ vᵀ sym(Ȧ) v)``, ``F_ij = 1/(λ_j − λ_i)``),
  which holds for any sign choice that does not jump.  **Repeated
  eigenvalues**: JAX's eigenvector derivative is inf/nan there; jacacc keeps
  paper 004 §4.4's eigengap clamp (``jacacc.linalg.factorizations``), which
  gives a finite, approximate derivative and a ``RuntimeWarning`` naming the
  smallest gap.  Derivatives of eigenvalues alone never involve the gaps
  (first order; second derivatives of eigenvalues do, and are clamped).
* **Singular matrices.**  ``solve`` and ``inv`` raise
  :class:`~jacacc.linalg.routines.SingularMatrixError` (a ``LinAlgError``, as
  NumPy's) when evaluated on an exactly singular matrix; ``slogdet`` returns
  NumPy's ``(0, -inf)`` and ``det`` returns 0, but their derivatives
  (``A⁻ᵀ``, ``det·A⁻ᵀ``) need the inverse and are refused the same way
  (JAX returns inf/nan for ``slogdet``'s and the adjugate for ``det``'s).
* **Singular vectors and QR factors** (``svd``, ``qr``) are unique only up to signs;
  the values are NumPy's, LAPACK's signs kept (``signs="numpy"`` of
  ``jacacc.linalg.svd``; its default normalizes them).  The derivatives are JAX's,
  which hold for any sign choice that does not jump.  Thin factors only: ``svd`` with ``full_matrices=True``
  (NumPy's default) of a non-square matrix, ``qr`` with ``mode='complete'`` of a tall
  one (their extra columns are not unique) and ``mode='raw'`` are refused in one
  line, as is ``hermitian=True``.  **Repeated singular values**: the singular-vector
  derivative (``F_ij = 1/(s_j² − s_i²)``) is clamped with a ``RuntimeWarning``, as
  ``eigh``'s; a first derivative of the singular values alone (``compute_uv=False``,
  ``svdvals``, ``ord='nuc'``) never involves the gaps.  For non-square input the
  singular vectors' derivative also divides by each singular value (inf/nan at a zero
  one, as JAX's).  ``qr``'s derivative needs ``a`` of full column rank (``R⁻¹``).
* **Pseudo-inverse.**  ``pinv``'s value is NumPy's (the same default ``rcond=1e-15``,
  NumPy 2's ``rtol``); its derivative is JAX's Golub–Pereyra formula in the computed
  ``P``, exact where ``a`` has full rank (repeated singular values included).  The
  rank the cutoff finds is a locally constant choice: where it cuts singular values
  off, the derivative is the one along perturbations that keep that rank.
* **The sign** of ``slogdet`` is locally constant: its derivative is zero.
* **Norms.**  ``ord=None``/``2`` of a vector and ``'fro'`` of a matrix are
  ``sqrt(Σ x²)`` (at ``x = 0`` the derivative is nan, as JAX's); ``ord=1`` is
  ``Σ|x|`` (at a zero entry the derivative is ``abs``'s, as JAX's); ``ord=±inf``
  (and a matrix's ``±1``/``±inf``) take the largest/smallest entry of ``|x|``
  (of the column/row sums), whose derivative on a tie is shared equally among
  the tied entries — JAX's rule for ``max``.  Other ``p`` give
  ``(Σ|x|^p)^(1/p)``.  ``ord=2`` and ``-2`` of a matrix are the largest and smallest
  singular value (on a tie the derivative is shared, as JAX's ``max``), ``'nuc'``
  their sum; ``ord=0`` counts nonzeros: refused by name.

Functions not registered here (``eig``, ``eigvals``, ``lstsq``, ``matrix_power``,
``matrix_rank``, …) are refused by the tracer with
``np.linalg.<name> is not supported by jacacc.tensor``.

Examples
--------
A Gaussian log-likelihood whose covariance is built from the parameters:

>>> import numpy as np, jacacc.tensor as jt
>>> def loglik(A, r):
...     K = A @ A.T + 0.5 * np.eye(3)
...     return -0.5 * (np.linalg.slogdet(K)[1] + r @ np.linalg.solve(K, r))
>>> A, r = np.array([[1.0, 0.2, 0.0], [0.1, 1.0, 0.3], [0.0, 0.4, 1.0]]), np.array([0.3, -0.2, 0.5])
>>> K = A @ A.T + 0.5 * np.eye(3)
>>> Ki_r = np.linalg.solve(K, r)
>>> g = jt.grad(loglik)(A, r)            # dℓ/dK = (K⁻¹ r rᵀ K⁻¹ − K⁻¹)/2, then through A Aᵀ
>>> np.allclose(g, (np.outer(Ki_r, Ki_r) - np.linalg.inv(K)) @ A)
True
>>> jt.hessian(loglik, compress=True)(A, r).dense().shape
(3, 3, 3, 3)
"""

from __future__ import annotations

import math
import numbers
from collections import namedtuple
from typing import Any

import numpy as np

from jacacc.errors import TraceError, UnsupportedOperationError
from jacacc.tensor import expr as E
from jacacc.tensor.expr import Tensor, index_letters
from jacacc.tensor.operators import apply_operator
from jacacc.tensor.trace import Traced, _broadcast_to, _elementwise_product, _node, _where, register_function

__all__ = ["EighResult", "QRResult", "SVDResult", "SlogdetResult"]

#: what ``np.linalg.slogdet`` / ``eigh`` / ``svd`` / ``qr`` return, with NumPy 2's field names (plain
#: tuples unpack the same way)
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
QRResult = namedtuple("QRResult", ["Q", "R"])


def _square(name: str, argument: str, node: Tensor) -> None:
    """Refuse anything but a square matrix or a stack of them, in one line naming the NumPy function."""
    if node.ndim < 2 or node.shape[-1] != node.shape[-2]:
        raise TraceError(f"{name}: {argument} must be a square matrix or a stack of them (last two axes "
                         f"equal), got shape {node.shape}")


def _matrices(name: str, argument: str, node: Tensor) -> None:
    """Refuse anything but a matrix or a stack of them, in one line naming the NumPy function."""
    if node.ndim < 2:
        raise TraceError(f"{name}: {argument} must be a matrix or a stack of them (ndim >= 2), got shape {node.shape}")


def _transposed(node: Tensor) -> Tensor:
    s = index_letters(node.ndim)
    return E.einsum(f"{s}->{s[:-2]}{s[-1]}{s[-2]}", node)


# ---------------------------------------------------------------------------- solve, inv, slogdet, det
@register_function(np.linalg.solve)
def _solve(a: Any, b: Any) -> Traced:
    from jacacc.linalg.blas_cholesky import trsm
    from jacacc.linalg.factorizations import gesv

    A, B = _node(a), _node(b)
    _square("np.linalg.solve", "a", A)
    n = A.shape[-1]
    # NumPy 2: b is a vector only when 1-D (NumPy 1: when it has one axis fewer than a)
    vector = B.ndim == 1 if int(np.__version__.split(".")[0]) >= 2 else B.ndim == A.ndim - 1
    rows = B.shape[-1] if vector else (B.shape[-2] if B.ndim >= 2 else None)
    if rows != n:
        raise TraceError(f"np.linalg.solve: b of shape {B.shape} does not match a of shape {A.shape} (b needs "
                         f"{n} rows: shape ({n},) or (..., {n}, k))")
    if vector:  # a column of one right-hand side, the size-1 axis dropped again after the solve
        s = index_letters(B.ndim)
        B = E.einsum(f"{s},{index_letters(1, B.ndim)}->{s}{index_letters(1, B.ndim)}", B, E.ones((1,)))
    try:
        batch = tuple(np.broadcast_shapes(A.shape[:-2], B.shape[:-2]))
    except ValueError:
        raise TraceError(f"np.linalg.solve: the batch axes of a {A.shape} and b {B.shape} do not broadcast") \
            from None
    triangular = _cholesky_factor(A)
    if triangular is not None and triangular[0].shape[:-2] == batch == B.shape[:-2]:
        factor, lower, transposed = triangular
        X = trsm(factor, B, transpose=transposed, lower=lower)
    else:
        X = gesv(_broadcast_to(A, batch + A.shape[-2:]), _broadcast_to(B, batch + B.shape[-2:]))
    if vector:
        s = index_letters(X.ndim)
        X = E.einsum(f"{s}->{s[:-1]}", X)
    return Traced(X)


def _cholesky_factor(A: Tensor) -> tuple[Tensor, bool, bool] | None:
    """``(factor, lower, transposed)`` where ``A`` is a Cholesky factor (``potrf``'s output) or its
    transpose, else ``None``.

    Such a matrix is triangular, zeros included, and so is its every derivative (``potrf``'s is
    too): ``np.linalg.solve`` of it is a triangular solve (``trsm``, n² FLOPs a column) instead of
    an LU factorization (⅔n³) and its solve.  The solution is the same to rounding; a GP's
    ``solve(L.T, solve(L, r))`` written as autograd's example writes it then costs what
    ``scipy.linalg.solve_triangular`` does.
    """
    transposed = False
    if A.kind == "einsum" and len(A.args) == 1:
        (labels,), out = A.param.split("->")[0].split(","), A.param.split("->")[1]
        n = len(labels)
        if n >= 2 and len(set(labels)) == n and out == labels[:-2] + labels[-1] + labels[-2]:
            A, transposed = A.args[0], True
    if A.kind == "op" and A.param[0] == "potrf" and A.param[2] == 0:
        return A, bool(dict(A.param[1])["lower"]), transposed
    return None


@register_function(np.linalg.inv)
def _inv(a: Any) -> Traced:
    from jacacc.linalg.factorizations import inverse

    A = _node(a)
    _square("np.linalg.inv", "a", A)
    return Traced(inverse(A))


@register_function(np.linalg.slogdet)
def _slogdet(a: Any) -> SlogdetResult:
    from jacacc.linalg.factorizations import slogdet

    A = _node(a)
    _square("np.linalg.slogdet", "a", A)
    sign, logabsdet = slogdet(A)
    return SlogdetResult(Traced(sign), Traced(logabsdet))


@register_function(np.linalg.det)
def _det(a: Any) -> Traced:
    from jacacc.linalg.factorizations import slogdet

    A = _node(a)
    _square("np.linalg.det", "a", A)
    sign, logabsdet = slogdet(A)
    # det = sign·exp(log|det|): its derivative det·A⁻ᵀ comes from log|det|'s (the sign's is zero)
    return Traced(_elementwise_product(sign, E.unary("exp", logabsdet)))


# ---------------------------------------------------------------------------- cholesky, eigh
@register_function(np.linalg.cholesky)
def _cholesky(a: Any, upper: bool = False) -> Traced:
    from jacacc.linalg.blas_cholesky import potrf

    A = _node(a)
    _square("np.linalg.cholesky", "a", A)
    return Traced(potrf(symmetric_from_triangle(A, lower=not upper), lower=not upper))


def symmetric_from_triangle(A: Tensor, lower: bool) -> Tensor:
    """The symmetric matrix a LAPACK routine that reads one triangle of ``A`` sees: that triangle
    (the diagonal included), mirrored across the diagonal.

    Its value is what NumPy's ``cholesky``/``eigh`` compute with; through it, the derivative is
    that of NumPy's function: the entries of the other triangle get none, and each off-diagonal
    entry read gets the derivative of both places it fills.  A ``where`` against a constant mask
    (not a product with it), so a non-finite entry in the triangle not read changes nothing, as
    in NumPy.

    Parameters
    ----------
    A : Tensor, shape (..., n, n)
    lower : bool
        Read the lower triangle (else the upper one).

    Returns
    -------
    Tensor, shape (..., n, n)

    Examples
    --------
    >>> import numpy as np, jacacc.tensor as jt
    >>> A = np.array([[4.0, 7.0], [1.0, 3.0]])               # NumPy reads 4, 1, 3
    >>> g = jt.grad(lambda A: np.sum(np.linalg.cholesky(A)))(A)   # the upper 7 is never read
    >>> np.round(g, 4).tolist()
    [[0.2063, 0.0], [0.3492, 0.3015]]
    """
    n = A.shape[-1]
    read = np.tri(n, n, 0, dtype=bool) if lower else ~np.tri(n, n, -1, dtype=bool)
    return _node(_where(read, Traced(A), Traced(_transposed(A))))


def _symmetric_eigen(name: str, a: Any, UPLO: str, vectors: bool) -> tuple[Tensor, Tensor]:  # noqa: N803
    from jacacc.linalg.factorizations import syevd

    if UPLO not in ("L", "U"):
        raise TraceError(f"{name}: UPLO must be 'L' or 'U', got {UPLO!r}")
    A = _node(a)
    _square(name, "a", A)
    S = symmetric_from_triangle(A, lower=UPLO == "L")
    if vectors:
        # NumPy's eigenvectors, LAPACK's signs and all, computed from the triangle NumPy reads
        return syevd(S, signs="numpy", uplo=UPLO)
    return syevd(S)  # the eigenvalues alone: the paper's kernel (reading S's lower triangle)


@register_function(np.linalg.eigh)
def _eigh(a: Any, UPLO: str = "L") -> EighResult:  # noqa: N803 - NumPy's name
    U, lam = _symmetric_eigen("np.linalg.eigh", a, UPLO, vectors=True)
    return EighResult(Traced(lam), Traced(_transposed(U)))  # syevd's rows are NumPy's columns


@register_function(np.linalg.eigvalsh)
def _eigvalsh(a: Any, UPLO: str = "L") -> Traced:  # noqa: N803 - NumPy's name
    _, lam = _symmetric_eigen("np.linalg.eigvalsh", a, UPLO, vectors=False)
    return Traced(lam)


# ---------------------------------------------------------------------------- svd, svdvals, qr, pinv
def _refuse_hermitian(name: str, hermitian: Any) -> None:
    # NumPy's hermitian=True reads one triangle and returns |eigenvalues| with eigenvectors:
    # other values and signs than the general path for a non-symmetric a
    if hermitian:
        raise UnsupportedOperationError(f"{name} with hermitian=True is not supported by jacacc.tensor; use "
                                        "hermitian=False (the same singular values for a symmetric a)")


@register_function(np.linalg.svd)
def _svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
    from jacacc.linalg.svd import gesdd

    name = "np.linalg.svd"
    A = _node(a)
    _matrices(name, "a", A)
    _refuse_hermitian(name, hermitian)
    m, n = A.shape[-2:]
    if compute_uv and full_matrices and m != n:
        # the last |m − n| columns of U (rows of Vh) are any orthonormal completion: not a function of a
        raise UnsupportedOperationError(f"{name} with full_matrices=True of a non-square matrix (shape {A.shape}) "
                                        "is not supported by jacacc.tensor (its extra singular vectors are not "
                                        "unique); pass full_matrices=False")
    U, s, Vh = gesdd(A, signs="numpy" if compute_uv else "normalized")
    if not compute_uv:
        return Traced(s)
    return SVDResult(Traced(U), Traced(s), Traced(Vh))


if hasattr(np.linalg, "svdvals"):  # NumPy >= 2
    @register_function(np.linalg.svdvals)
    def _svdvals(x: Any) -> Traced:
        from jacacc.linalg.svd import gesdd

        X = _node(x)
        _matrices("np.linalg.svdvals", "x", X)
        return Traced(gesdd(X)[1])


@register_function(np.linalg.qr)
def _qr(a: Any, mode: str = "reduced") -> Any:
    from jacacc.linalg.svd import qr

    name = "np.linalg.qr"
    A = _node(a)
    _matrices(name, "a", A)
    m, n = A.shape[-2:]
    if mode == "raw":
        raise UnsupportedOperationError(f"{name} with mode='raw' (LAPACK's Householder reflectors) is not supported "
                                        "by jacacc.tensor; use mode='reduced'")
    if mode == "complete" and m > n:
        # the last m − n columns of Q are any orthonormal completion: not a function of a
        raise UnsupportedOperationError(f"{name} with mode='complete' of a tall matrix (shape {A.shape}) is not "
                                        "supported by jacacc.tensor (the last m - n columns of Q are not unique); "
                                        "use mode='reduced'")
    if mode not in ("reduced", "complete", "r"):
        raise TraceError(f"{name}: unrecognized mode {mode!r}; use 'reduced', 'complete', 'r' or 'raw'")
    Q, R = qr(A, signs="numpy")
    return Traced(R) if mode == "r" else QRResult(Traced(Q), Traced(R))


_UNSET = object()


@register_function(np.linalg.pinv)
def _pinv(a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = _UNSET) -> Traced:
    from jacacc.linalg.svd import pinv

    name = "np.linalg.pinv"
    A = _node(a)
    _matrices(name, "a", A)
    _refuse_hermitian(name, hermitian)
    # NumPy 2's cutoff: rcond (default 1e-15), or rtol (None: max(m, n)·eps of the dtype), not both
    if rcond is not None and rtol is not _UNSET:
        raise TraceError(f"{name}: rtol and rcond cannot both be set")
    if rcond is None:
        if rtol is _UNSET:
            rcond = 1e-15
        elif rtol is None:
            dtype = a.dtype if isinstance(a, Traced) else np.dtype(np.float64)
            rcond = max(A.shape[-2:]) * float(np.finfo(dtype).eps)
        else:
            rcond = rtol
    if isinstance(rcond, np.ndarray) and rcond.ndim == 0:
        rcond = rcond.item()
    if isinstance(rcond, bool) or not isinstance(rcond, numbers.Real):
        raise TraceError(f"{name}: the cutoff (rcond or rtol) must be a real number (one for every matrix), "
                         f"got {rcond!r}")
    return Traced(pinv(A, rcond=float(rcond)))


# ---------------------------------------------------------------------------- norms
def _reduce(node: Tensor, axes: tuple[int, ...], weights: Tensor | None = None) -> Tensor:
    """Σ over ``axes`` of ``node`` (of ``weights ∘ node``)."""
    s = index_letters(node.ndim)
    kept = "".join(c for k, c in enumerate(s) if k not in axes)
    return E.einsum(f"{s}->{kept}", node) if weights is None else E.einsum(f"{s},{s}->{kept}", weights, node)


def _extremum(node: Tensor, axes: tuple[int, ...], minimum: bool) -> Tensor:
    # the weights of np.max/np.min (jacacc.tensor.arrays): piecewise constant in x (zero derivative),
    # so max(x) = Σ w ∘ x is an ordinary expression whose derivative is w, a tie shared equally (JAX's
    # reduce_max rule)
    (weights,) = apply_operator("extremum_weights", [node], axes=axes, largest=not minimum)
    return _reduce(node, axes, weights)


def _root_sum_of_squares(node: Tensor, axes: tuple[int, ...]) -> Tensor:
    s = index_letters(node.ndim)
    kept = "".join(c for k, c in enumerate(s) if k not in axes)
    return E.unary("sqrt", E.einsum(f"{s},{s}->{kept}", node, node))


def _is(ord: Any, value: float) -> bool:  # noqa: A002 - NumPy's name
    return isinstance(ord, numbers.Real) and not isinstance(ord, bool) and float(ord) == value


def _vector_norm(name: str, x: Tensor, axes: tuple[int, ...], ord: Any) -> Tensor:  # noqa: A002
    if ord is None or _is(ord, 2.0):
        return _root_sum_of_squares(x, axes)
    if isinstance(ord, str) or not isinstance(ord, numbers.Real):
        raise TraceError(f"{name}: invalid norm order {ord!r} for vectors")
    if _is(ord, math.inf) or _is(ord, -math.inf):
        return _extremum(E.unary("abs", x), axes, minimum=float(ord) < 0)
    if _is(ord, 1.0):
        return _reduce(E.unary("abs", x), axes)
    if _is(ord, 0.0):
        raise UnsupportedOperationError(f"{name} with ord=0 (a count of nonzero entries) is not supported by "
                                        "jacacc.tensor")
    p = float(ord)
    return E.unary("pow", _reduce(E.unary("pow", E.unary("abs", x), p), axes), 1.0 / p)


def _matrix_norm(name: str, x: Tensor, axes: tuple[int, int], ord: Any) -> Tensor:  # noqa: A002
    row, col = axes
    if ord is None or ord == "fro":
        return _root_sum_of_squares(x, axes)
    if (isinstance(ord, str) and ord == "nuc") or _is(ord, 2.0) or _is(ord, -2.0):
        from jacacc.linalg.svd import gesdd

        # the singular values of the matrices on (row, col), the other axes kept in order in front
        s = index_letters(x.ndim)
        kept = "".join(c for k, c in enumerate(s) if k not in axes)
        moved = E.einsum(f"{s}->{kept}{s[row]}{s[col]}", x)
        values = gesdd(moved)[1]
        last = (values.ndim - 1,)
        if ord == "nuc":
            return _reduce(values, last)
        # the largest (smallest) singular value, a tie shared equally as JAX's max (min) of them
        return _extremum(values, last, minimum=float(ord) < 0)
    for value, summed, over in ((1.0, row, col), (math.inf, col, row)):
        if _is(ord, value) or _is(ord, -value):
            # the largest (smallest) column sum (ord ±1) or row sum (ord ±inf) of |x|
            sums = _reduce(E.unary("abs", x), (summed,))
            return _extremum(sums, (over - (over > summed),), minimum=float(ord) < 0)
    raise TraceError(f"{name}: invalid norm order {ord!r} for matrices")


def _axes(name: str, axis: Any, ndim: int) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    if not all(isinstance(k, numbers.Integral) and -ndim <= k < ndim for k in axes):
        raise TraceError(f"{name}: axis {axis} is out of range for an array of {ndim} axes")
    normalized = tuple(int(k) % ndim for k in axes)
    if len(set(normalized)) != len(normalized):
        raise TraceError(f"{name}: axis {axis} repeats an axis")
    return normalized


def _kept_dims(result: Tensor, ndim: int, axes: tuple[int, ...]) -> Tensor:
    """``keepdims=True``: the reduced ``axes`` back as size-1 axes."""
    s = index_letters(ndim)
    kept = "".join(c for k, c in enumerate(s) if k not in axes)
    removed = "".join(s[k] for k in sorted(axes))
    return E.einsum(f"{kept},{removed}->{s}", result, E.ones((1,) * len(axes)))


@register_function(np.linalg.norm)
def _norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Traced:  # noqa: A002
    name = "np.linalg.norm"
    X = _node(x)
    if axis is None:
        if ord is None:  # the 2-norm of x flattened, whatever its number of axes
            axes = tuple(range(X.ndim))
            result = _root_sum_of_squares(X, axes)
            return Traced(_kept_dims(result, X.ndim, axes) if keepdims else result)
        if X.ndim not in (1, 2):
            raise TraceError(f"{name}: ord={ord!r} without axis needs a vector or a matrix, got shape {X.shape}")
        axes = tuple(range(X.ndim))
    else:
        axes = _axes(name, axis, X.ndim)
    if len(axes) == 1:
        result = _vector_norm(name, X, axes, ord)
    elif len(axes) == 2:
        result = _matrix_norm(name, X, (axes[0], axes[1]), ord)
    else:
        raise TraceError(f"{name}: axis {axis} names {len(axes)} axes; a vector norm takes one, a matrix norm two")
    return Traced(_kept_dims(result, X.ndim, axes) if keepdims else result)


if hasattr(np.linalg, "vector_norm"):  # NumPy >= 2
    @register_function(np.linalg.vector_norm)
    def _vector_norm_function(x: Any, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Traced:  # noqa: A002
        name = "np.linalg.vector_norm"
        X = _node(x)
        # NumPy's vector_norm treats several axes (or all, for axis=None) as one flattened vector
        axes = tuple(range(X.ndim)) if axis is None else _axes(name, axis, X.ndim)
        result = _vector_norm(name, X, axes, ord)
        return Traced(_kept_dims(result, X.ndim, axes) if keepdims else result)

    @register_function(np.linalg.matrix_norm)
    def _matrix_norm_function(x: Any, *, keepdims: bool = False, ord: Any = "fro") -> Traced:  # noqa: A002
        name = "np.linalg.matrix_norm"
        X = _node(x)
        if X.ndim < 2:
            raise TraceError(f"{name}: x must be a matrix or a stack of them, got shape {X.shape}")
        axes = (X.ndim - 2, X.ndim - 1)
        result = _matrix_norm(name, X, axes, ord)
        return Traced(_kept_dims(result, X.ndim, axes) if keepdims else result)
