"""Forward kernels of jacacc.linalg (paper 004, §4) against NumPy/SciPy dense references,
MXNet's documented values and conventions, and their error messages."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.linalg import solve_triangular

from jacacc.errors import JacaccError, NotPositiveDefiniteError
from jacacc.linalg import routines as K

BATCHES = [(), (3,), (2, 3)]
DTYPES = [np.float32, np.float64]
TOL = {np.float32: {"rtol": 2e-3, "atol": 2e-4}, np.float64: {"rtol": 1e-10, "atol": 1e-10}}


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def normal(shape, dtype=np.float64, seed=0) -> np.ndarray:
    return rng(seed).standard_normal(shape).astype(dtype)


def spd(batch, n, dtype=np.float64, seed=0) -> np.ndarray:
    """Well-conditioned symmetric positive definite matrices."""
    X = rng(seed).standard_normal(batch + (n, n))
    return (X @ X.swapaxes(-1, -2) / n + np.eye(n)).astype(dtype)


def triangular(batch, n, lower, dtype=np.float64, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """(clean, dirty): a well-conditioned triangular matrix, and the same with NaN
    in the other (strict) triangle, which the operators must never read."""
    r = rng(seed)
    T = r.uniform(-0.5, 0.5, batch + (n, n)) + np.eye(n) * r.uniform(1.0, 2.0, batch + (n,))[..., None, :]
    clean = (np.tril(T) if lower else np.triu(T)).astype(dtype)
    other = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
    dirty = np.where(other, np.nan, clean).astype(dtype)
    return clean, dirty


def t(X: np.ndarray, flag: bool = True) -> np.ndarray:
    return X.swapaxes(-1, -2) if flag else X


def per_matrix(fn, *arrays):
    """Apply a 2-D reference ``fn`` to each matrix of the batch."""
    batch = arrays[0].shape[:-2]
    first = fn(*(a[(0,) * len(batch)] for a in arrays)) if np.prod(batch, dtype=int) else None
    out = np.empty(batch + (first.shape if first is not None else (0, 0)))
    for index in np.ndindex(*batch):
        out[index] = fn(*(a[index] for a in arrays))
    return out


def close(actual, expected, dtype) -> None:
    assert actual.dtype == dtype
    np.testing.assert_allclose(actual, expected, **TOL[dtype])


# ---------------------------------------------------------------------------
# gemm, gemm2, syrk
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_gemm_and_gemm2_match_matmul(batch, dtype, ta, tb):
    m, k, n = 3, 4, 2
    A = normal(batch + ((k, m) if ta else (m, k)), dtype, 1)
    B = normal(batch + ((n, k) if tb else (k, n)), dtype, 2)
    C = normal(batch + (m, n), dtype, 3)
    product = t(A.astype(float), ta) @ t(B.astype(float), tb)
    close(K.gemm(A, B, C, alpha=0.7, beta=-1.3, transpose_a=ta, transpose_b=tb), 0.7 * product - 1.3 * C, dtype)
    close(K.gemm2(A, B, alpha=-2.0, transpose_a=ta, transpose_b=tb), -2.0 * product, dtype)
    close(K.gemm2(A, B, transpose_a=ta, transpose_b=tb), product, dtype)


def test_gemm_does_not_read_c_when_beta_is_zero_and_handles_empty_inner_dimension():
    A, B = normal((2, 3)), normal((3, 4), seed=1)
    np.testing.assert_allclose(K.gemm(A, B, np.full((2, 4), np.nan), beta=0.0), A @ B)
    C = normal((2, 4), seed=2)
    np.testing.assert_array_equal(K.gemm(np.ones((2, 0)), np.ones((0, 4)), C, beta=2.0), 2 * C)
    np.testing.assert_array_equal(K.gemm(np.ones((2, 0)), np.ones((0, 4)), np.full((2, 4), np.nan), beta=0.0), 0)
    np.testing.assert_array_equal(K.gemm2(np.ones((2, 0)), np.ones((0, 4))), np.zeros((2, 4)))


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transpose", [False, True])
def test_syrk_matches_matmul_and_is_exactly_symmetric(batch, dtype, transpose):
    A = normal(batch + (4, 3), dtype)
    expected = 1.5 * (t(A.astype(float), transpose) @ t(A.astype(float), not transpose))
    B = K.syrk(A, alpha=1.5, transpose=transpose)
    close(B, expected, dtype)
    np.testing.assert_array_equal(B, t(B))


def test_syrk_with_an_empty_inner_dimension_is_zero():
    np.testing.assert_array_equal(K.syrk(np.ones((2, 3, 0))), np.zeros((2, 3, 3)))
    np.testing.assert_array_equal(K.syrk(np.ones((3, 0)), transpose=True), np.zeros((0, 0)))


# ---------------------------------------------------------------------------
# trmm, trsm
# ---------------------------------------------------------------------------

TRIANGULAR_CASES = [
    (batch, dtype, lower, transpose, rightside)
    for batch in BATCHES
    for dtype in DTYPES
    for lower in (True, False)
    for transpose in (False, True)
    for rightside in (False, True)
]


def _triangular_case(batch, dtype, lower, rightside, n=4, k=3):
    clean, dirty = triangular(batch, n, lower, dtype, seed=5)
    B = normal(batch + ((k, n) if rightside else (n, k)), dtype, 6)
    return clean, dirty, B


@pytest.mark.parametrize("batch, dtype, lower, transpose, rightside", TRIANGULAR_CASES)
def test_trmm_matches_matmul_and_never_reads_the_other_triangle(batch, dtype, lower, transpose, rightside):
    clean, dirty, B = _triangular_case(batch, dtype, lower, rightside)
    opA = t(clean.astype(float), transpose)
    expected = -0.5 * (B.astype(float) @ opA if rightside else opA @ B.astype(float))
    result = K.trmm(dirty, B, alpha=-0.5, transpose=transpose, rightside=rightside, lower=lower)
    close(result, expected, dtype)


def _solve_reference(A, B, alpha, transpose, rightside, lower):
    """alpha·op(A)⁻¹·B or alpha·B·op(A)⁻¹ with scipy's solve_triangular, matrix by matrix."""

    def solve(a, b):
        if rightside:  # X op(A) = αB  <=>  op(A)ᵀ Xᵀ = αBᵀ
            return solve_triangular(a, alpha * b.T, trans=0 if transpose else 1, lower=lower).T
        return solve_triangular(a, alpha * b, trans=1 if transpose else 0, lower=lower)

    return per_matrix(solve, A, B)


@pytest.mark.parametrize("batch, dtype, lower, transpose, rightside", TRIANGULAR_CASES)
def test_trsm_matches_solve_triangular_and_never_reads_the_other_triangle(batch, dtype, lower, transpose, rightside):
    clean, dirty, B = _triangular_case(batch, dtype, lower, rightside)
    expected = _solve_reference(clean.astype(float), B.astype(float), 1.7, transpose, rightside, lower)
    result = K.trsm(dirty, B, alpha=1.7, transpose=transpose, rightside=rightside, lower=lower)
    close(result, expected, dtype)
    # and it is a solve: op(A)·X = alpha·B
    back = K.trmm(dirty, result, transpose=transpose, rightside=rightside, lower=lower)
    close(back, 1.7 * B.astype(float), dtype)


# ---------------------------------------------------------------------------
# potrf, potri
# ---------------------------------------------------------------------------


def test_potrf_reproduces_mxnets_documented_value():
    np.testing.assert_allclose(K.potrf([[4.0, 1.0], [1.0, 4.25]]), [[2.0, 0.0], [0.5, 2.0]], rtol=1e-15)


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
def test_potrf_matches_cholesky_zeroes_the_other_triangle_and_never_reads_it(batch, dtype, lower):
    A = spd(batch, 5, dtype)
    keep = np.tril if lower else np.triu
    dirty = np.where(keep(np.ones((5, 5), bool)), A, np.nan).astype(dtype)
    L = np.linalg.cholesky(A.astype(float))
    result = K.potrf(dirty, lower=lower)
    close(result, L if lower else t(L), dtype)
    assert not (np.tril(result, -1) if not lower else np.triu(result, 1)).any()


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
def test_potri_is_the_inverse_from_the_factor_and_never_reads_the_other_triangle(batch, dtype, lower):
    clean, dirty = triangular(batch, 4, lower, dtype, seed=7)
    c = clean.astype(float)
    A = c @ t(c) if lower else t(c) @ c
    inverse = K.potri(dirty, lower=lower)
    close(inverse, np.linalg.inv(A), dtype)
    np.testing.assert_array_equal(inverse, t(inverse))


@pytest.mark.parametrize("lower", [True, False])
def test_potri_of_potrf_is_the_inverse(lower):
    A = spd((2,), 6, seed=3)
    np.testing.assert_allclose(K.potri(K.potrf(A, lower=lower), lower=lower), np.linalg.inv(A), rtol=1e-10, atol=1e-12)


def test_potrf_names_the_batch_index_and_the_failing_minor():
    A = spd((2, 2), 4)
    A[1, 0, 2, 2] = -10.0  # the leading 3 x 3 minor is the first one that is not positive
    message = "potrf: the matrix at batch index (1, 0) is not positive definite (leading minor of order 3 is not positive)"
    with pytest.raises(NotPositiveDefiniteError, match=re.escape(message)) as caught:
        K.potrf(A)
    assert isinstance(caught.value, np.linalg.LinAlgError)
    assert isinstance(caught.value, JacaccError)
    assert isinstance(caught.value, ValueError)


def test_potrf_of_a_single_matrix_names_no_batch_index():
    message = "potrf: the matrix is not positive definite (leading minor of order 2 is not positive)"
    with pytest.raises(NotPositiveDefiniteError, match=re.escape(message)):
        K.potrf([[1.0, 2.0], [2.0, 1.0]], lower=False)


def test_potri_of_a_singular_factor_names_the_zero_diagonal_entry():
    L = np.tile(np.eye(3), (2, 1, 1))
    L[1, 1, 1] = 0.0
    with pytest.raises(NotPositiveDefiniteError, match=re.escape("potri: the Cholesky factor at batch index (1,) is singular (L[1, 1] = 0)")):
        K.potri(L)


# ---------------------------------------------------------------------------
# gelqf
# ---------------------------------------------------------------------------


def _lq_reference(A):
    """L and Q from NumPy's QR of Aᵀ, normalized to a non-negative diagonal of L."""
    Qt, R = np.linalg.qr(t(A))
    signs = np.where(np.diagonal(R, axis1=-2, axis2=-1) < 0, -1.0, 1.0)
    return t(Qt * signs[..., None, :]), t(R) * signs[..., None, :]


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m, n", [(1, 1), (3, 3), (2, 5), (4, 7)])
def test_gelqf_matches_qr_of_the_transpose_with_non_negative_diagonal(batch, dtype, m, n):
    A = normal(batch + (m, n), dtype, seed=m + n)
    Q, L = K.gelqf(A)
    Q_ref, L_ref = _lq_reference(A.astype(float))
    assert Q.shape == A.shape and L.shape == batch + (m, m)
    close(Q, Q_ref, dtype)
    close(L, L_ref, dtype)
    close(L @ Q, A.astype(float), dtype)
    close(Q @ t(Q), np.broadcast_to(np.eye(m), batch + (m, m)), dtype)
    assert (np.diagonal(L, axis1=-2, axis2=-1) >= 0).all()
    assert not np.triu(L, 1).any()
    assert not np.signbit(np.triu(L, 1)).any()  # +0, not -0, above the diagonal


def test_gelqf_of_a_rank_deficient_matrix_still_factorizes():
    A = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
    Q, L = K.gelqf(A)
    np.testing.assert_allclose(L @ Q, A, atol=1e-12)
    np.testing.assert_allclose(Q @ Q.T, np.eye(2), atol=1e-12)
    assert (np.diagonal(L) >= 0).all()


# ---------------------------------------------------------------------------
# syevd
# ---------------------------------------------------------------------------


def test_syevd_reproduces_mxnets_documented_value():
    U, lam = K.syevd([[1.0, 2.0], [2.0, 4.0]])
    np.testing.assert_allclose(lam, [0.0, 5.0], atol=1e-12)
    np.testing.assert_array_equal(np.round(U, 3), [[0.894, -0.447], [0.447, 0.894]])


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 5])
def test_syevd_matches_eigh_with_the_sign_convention_and_reads_only_the_lower_triangle(batch, dtype, n):
    S = normal(batch + (n, n), dtype, seed=n)
    A = (S + t(S)).astype(dtype)
    dirty = np.where(np.tril(np.ones((n, n), bool)), A, np.nan).astype(dtype)
    U, lam = K.syevd(dirty)
    lam_ref, V = np.linalg.eigh(A.astype(float))
    rows = t(V)
    k = np.argmax(np.abs(rows), axis=-1)
    rows = rows * np.sign(np.take_along_axis(rows, k[..., None], axis=-1))
    close(lam, lam_ref, dtype)
    close(U, rows, dtype)
    close(t(U) @ (lam[..., :, None] * U), A.astype(float), dtype)
    top = np.take_along_axis(U, np.argmax(np.abs(U), axis=-1)[..., None], axis=-1)
    assert (top > 0).all()


def test_sign_rule_takes_the_first_entry_of_largest_magnitude_on_a_tie():
    U = np.array([[-0.5, 0.5, 0.1], [0.6, -0.6, 0.0], [0.1, -0.2, -0.9]])
    K._fix_signs(U)
    np.testing.assert_array_equal(U, [[0.5, -0.5, -0.1], [0.6, -0.6, 0.0], [-0.1, 0.2, 0.9]])


# ---------------------------------------------------------------------------
# sumlogdiag and the data movement helpers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sumlogdiag_matches_the_log_determinant_and_reads_only_the_diagonal(batch, dtype):
    A = spd(batch, 4, dtype)
    L = K.potrf(A)
    close(2 * K.sumlogdiag(L), np.linalg.slogdet(A.astype(float))[1], dtype)
    dirty = np.where(np.eye(4, dtype=bool), A, np.nan).astype(dtype)
    result = K.sumlogdiag(dirty)
    assert result.shape == batch
    close(result, np.log(np.diagonal(A.astype(float), axis1=-2, axis2=-1)).sum(-1), dtype)


def test_extractdiag_and_makediag_follow_mxnets_offsets():
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(K.extractdiag(A), [1.0, 4.0])
    np.testing.assert_array_equal(K.extractdiag(A, 1), [2.0])
    np.testing.assert_array_equal(K.extractdiag(A, -1), [3.0])
    np.testing.assert_array_equal(K.extractdiag(np.stack([A, A + 4])), [[1.0, 4.0], [5.0, 8.0]])
    np.testing.assert_array_equal(K.makediag([1.0, 2.0]), [[1.0, 0.0], [0.0, 2.0]])
    np.testing.assert_array_equal(K.makediag([1.0, 2.0], 1), [[0, 1, 0], [0, 0, 2], [0, 0, 0]])
    np.testing.assert_array_equal(K.makediag([[1.0, 2.0], [3.0, 4.0]], -1)[1], [[0, 0, 0], [3, 0, 0], [0, 4, 0]])


@pytest.mark.parametrize("offset", [-2, -1, 0, 1, 2])
def test_makediag_inverts_extractdiag(offset):
    v = normal((2, 3, 4))
    M = K.makediag(v, offset)
    assert M.shape == (2, 3, 4 + abs(offset), 4 + abs(offset))
    np.testing.assert_array_equal(K.extractdiag(M, offset), v)
    np.testing.assert_array_equal(M, np.vectorize(np.diag, signature="(n)->(m,m)", excluded={1})(v, offset))


def test_extracttrian_and_maketrian_reproduce_mxnets_documented_values():
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(K.extracttrian(A), [1.0, 3.0, 4.0])
    np.testing.assert_array_equal(K.extracttrian(A, lower=False), [1.0, 2.0, 4.0])
    np.testing.assert_array_equal(K.extracttrian(A, 1), [2.0])
    np.testing.assert_array_equal(K.extracttrian(A, -1), [3.0])
    np.testing.assert_array_equal(K.extracttrian(np.stack([A, A + 4])), [[1.0, 3.0, 4.0], [5.0, 7.0, 8.0]])
    v = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(K.maketrian(v), [[1, 0], [2, 3]])
    np.testing.assert_array_equal(K.maketrian(v, lower=False), [[1, 2], [0, 3]])
    np.testing.assert_array_equal(K.maketrian(v, offset=1), [[0, 1, 2], [0, 0, 3], [0, 0, 0]])
    np.testing.assert_array_equal(K.maketrian(v, offset=-1), [[0, 0, 0], [1, 0, 0], [2, 3, 0]])
    np.testing.assert_array_equal(
        K.maketrian([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], offset=1),
        [[[0, 1, 2], [0, 0, 3], [0, 0, 0]], [[0, 4, 5], [0, 0, 6], [0, 0, 0]]],
    )


def test_packing_order_lower_by_rows_upper_by_columns():
    A = np.arange(16.0).reshape(4, 4)
    np.testing.assert_array_equal(K.extracttrian(A), [0, 4, 5, 8, 9, 10, 12, 13, 14, 15])
    np.testing.assert_array_equal(K.extracttrian(A, lower=False), [0, 1, 5, 2, 6, 10, 3, 7, 11, 15])
    np.testing.assert_array_equal(K.extracttrian(A, -2), [8, 12, 13])
    np.testing.assert_array_equal(K.extracttrian(A, 2), [2, 3, 7])


@pytest.mark.parametrize("offset, lower", [(0, True), (0, False), (-1, True), (1, True), (-3, False), (3, False)])
def test_maketrian_inverts_extracttrian(offset, lower):
    A = normal((2, 3, 5, 5))
    v = K.extracttrian(A, offset, lower)
    m = 5 - abs(offset)
    assert v.shape == (2, 3, m * (m + 1) // 2)
    M = K.maketrian(v, offset, lower)
    keep = np.tril(A, offset) if offset < 0 or (offset == 0 and lower) else np.triu(A, offset)
    np.testing.assert_array_equal(M, keep)
    np.testing.assert_array_equal(K.extracttrian(A, offset, lower), K.extracttrian(t(A), -offset, not lower))


# ---------------------------------------------------------------------------
# dtypes, 1 x 1, empty batches, memory
# ---------------------------------------------------------------------------


def _every_operator(dtype_a=np.float64, dtype_b=np.float64, batch=(2,), n=3):
    """(name, call) for each operator on inputs of the given dtypes and batch."""
    A = spd(batch, n).astype(dtype_a)
    B = normal(batch + (n, n), seed=1).astype(dtype_b)
    L = np.tril(A).astype(dtype_a)
    return {
        "gemm": lambda: K.gemm(A, B, B),
        "gemm2": lambda: K.gemm2(A, B),
        "syrk": lambda: K.syrk(A),
        "trmm": lambda: K.trmm(L, B),
        "trsm": lambda: K.trsm(L, B),
        "potrf": lambda: K.potrf(A),
        "potri": lambda: K.potri(L),
        "gelqf": lambda: K.gelqf(A),
        "syevd": lambda: K.syevd(A),
        "sumlogdiag": lambda: K.sumlogdiag(A),
        "extractdiag": lambda: K.extractdiag(A),
        "makediag": lambda: K.makediag(A[..., 0]),
        "extracttrian": lambda: K.extracttrian(A),
        "maketrian": lambda: K.maketrian(A[..., :3, 0]),
    }


def _outputs(result):
    return result if isinstance(result, tuple) else (result,)


TWO_OPERANDS = {"gemm", "gemm2", "trmm", "trsm"}


@pytest.mark.parametrize("dtypes, single, pair", [
    ((np.float32, np.float32), np.float32, np.float32),
    ((np.float32, np.float64), np.float32, np.float64),
    ((np.int64, np.float32), np.float64, np.float64),
    ((np.float16, np.float16), np.float32, np.float32),
])
def test_result_dtype_is_the_promoted_float_dtype(dtypes, single, pair):
    for name, call in _every_operator(*dtypes).items():
        for out in _outputs(call()):
            assert out.dtype == (pair if name in TWO_OPERANDS else single), name


def test_boolean_input_computes_in_float64():
    M = np.array([[True, False], [True, True]])
    assert K.gemm2(M, M).dtype == np.float64
    np.testing.assert_array_equal(K.trsm(M, M), np.eye(2))


def test_a_single_1x1_matrix():
    a = np.array([[4.0]])
    np.testing.assert_allclose(K.gemm(a, a, a, beta=2.0), [[24.0]])
    np.testing.assert_allclose(K.gemm2(a, a, alpha=0.5), [[8.0]])
    np.testing.assert_allclose(K.syrk(a), [[16.0]])
    np.testing.assert_allclose(K.trmm(a, a, rightside=True), [[16.0]])
    np.testing.assert_allclose(K.trsm(a, a, lower=False), [[1.0]])
    np.testing.assert_allclose(K.potrf(a), [[2.0]])
    np.testing.assert_allclose(K.potri([[2.0]]), [[0.25]])
    Q, L = K.gelqf([[-3.0]])
    np.testing.assert_allclose((Q, L), ([[-1.0]], [[3.0]]))
    U, lam = K.syevd([[-2.0]])
    np.testing.assert_allclose(U, [[1.0]])
    np.testing.assert_allclose(lam, [-2.0])
    np.testing.assert_allclose(K.sumlogdiag(a), np.log(4.0))


@pytest.mark.parametrize("batch", [(0,), (2, 0)])
def test_empty_batches_give_empty_results_of_the_right_shape(batch):
    for name, call in _every_operator(batch=batch).items():
        for out in _outputs(call()):
            assert out.shape[: len(batch)] == batch and out.size == 0, name


def test_empty_matrices():
    assert K.potrf(np.zeros((2, 0, 0))).shape == (2, 0, 0)
    assert K.syevd(np.zeros((0, 0)))[1].shape == (0,)
    Q, L = K.gelqf(np.zeros((3, 0, 4)))
    assert Q.shape == (3, 0, 4) and L.shape == (3, 0, 0)
    assert K.trsm(np.eye(2), np.zeros((2, 0))).shape == (2, 0)


def test_overwrite_computes_in_the_input_and_the_default_leaves_it_alone():
    A, L, B = spd((2,), 3), np.tril(spd((2,), 3, seed=1)), normal((2, 3, 3), seed=2)
    cases = [
        (lambda x: K.potrf(x, overwrite_a=True), lambda x: K.potrf(x), A),
        (lambda x: K.potri(x, overwrite_l=True), lambda x: K.potri(x), L),
        (lambda x: K.trsm(L, x, overwrite_b=True), lambda x: K.trsm(L, x), B),
        (lambda x: K.trmm(L, x, rightside=True, overwrite_b=True), lambda x: K.trmm(L, x, rightside=True), B),
        (lambda x: K.gemm(A, B, x, beta=0.5, overwrite_c=True), lambda x: K.gemm(A, B, x, beta=0.5), B),
        (lambda x: K.gelqf(x, overwrite_a=True)[0], lambda x: K.gelqf(x)[0], B),
        (lambda x: K.syevd(x, overwrite_a=True)[0], lambda x: K.syevd(x)[0], A),
    ]
    for in_place, plain, x in cases:
        before = x.copy()
        expected = plain(x)
        np.testing.assert_array_equal(x, before)  # default: input untouched
        work = x.copy()
        result = in_place(work)
        assert result is work
        np.testing.assert_array_equal(result, expected)
        # not possible (not C-contiguous, read-only): a copy, input untouched
        read_only = x.copy()
        read_only.flags.writeable = False
        for other in (np.asfortranarray(x), read_only):
            keep = other.copy()
            result = in_place(other)
            assert result is not other
            np.testing.assert_allclose(result, expected, rtol=1e-12, atol=1e-12)
            np.testing.assert_array_equal(other, keep)
    # nor when the result dtype differs from C's
    C = normal((2, 3, 3)).astype(np.float32)
    assert K.gemm(A, B, C, overwrite_c=True) is not C


def test_non_contiguous_and_list_input():
    A = spd((), 4)
    F = np.asfortranarray(A)
    np.testing.assert_allclose(K.potrf(F), np.linalg.cholesky(A), rtol=1e-12)
    X = normal((4, 6))[:, ::2]  # strided view
    np.testing.assert_allclose(K.gemm2(X, X, transpose_b=True), X @ X.T, rtol=1e-12)
    np.testing.assert_allclose(K.trsm(np.tril(A).T, X, lower=False), solve_triangular(np.tril(A).T, X), rtol=1e-12)
    np.testing.assert_allclose(K.syrk(X.tolist()), X @ X.T, rtol=1e-12)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name, call", [
    ("gemm", lambda: K.gemm(np.ones(3), np.ones((3, 3)), np.ones((3, 3)))),
    ("gemm2", lambda: K.gemm2(np.ones((3, 3)), np.ones(3))),
    ("syrk", lambda: K.syrk(np.ones(3))),
    ("trmm", lambda: K.trmm(np.ones(3), np.ones((3, 3)))),
    ("trsm", lambda: K.trsm(np.eye(3), np.ones(3))),
    ("potrf", lambda: K.potrf(np.float64(2.0))),
    ("potri", lambda: K.potri(np.ones(2))),
    ("gelqf", lambda: K.gelqf([1.0, 2.0])),
    ("syevd", lambda: K.syevd([1.0])),
    ("sumlogdiag", lambda: K.sumlogdiag([1.0, 2.0])),
    ("extractdiag", lambda: K.extractdiag([1.0])),
    ("extracttrian", lambda: K.extracttrian([1.0])),
])
def test_fewer_than_two_dimensions_is_refused(name, call):
    with pytest.raises(ValueError, match=rf"^{name}: \w+ must be a matrix or a batch of matrices \(ndim >= 2\), got shape"):
        call()


@pytest.mark.parametrize("name, call", [
    ("makediag", lambda: K.makediag(1.0)),
    ("maketrian", lambda: K.maketrian(1.0)),
])
def test_helpers_refuse_scalars(name, call):
    with pytest.raises(ValueError, match=rf"^{name}: v must be a vector or a batch of vectors \(ndim >= 1\), got shape \(\)"):
        call()


@pytest.mark.parametrize("name, call", [
    ("trmm", lambda: K.trmm(np.ones((3, 2)), np.ones((3, 3)))),
    ("trsm", lambda: K.trsm(np.ones((2, 3)), np.ones((3, 3)))),
    ("potrf", lambda: K.potrf(np.ones((2, 3, 2)))),
    ("potri", lambda: K.potri(np.ones((3, 2)))),
    ("syevd", lambda: K.syevd(np.ones((3, 2)))),
    ("sumlogdiag", lambda: K.sumlogdiag(np.ones((3, 2)))),
    ("extractdiag", lambda: K.extractdiag(np.ones((3, 2)))),
    ("extracttrian", lambda: K.extracttrian(np.ones((3, 2)))),
])
def test_non_square_input_is_refused(name, call):
    with pytest.raises(ValueError, match=rf"^{name}: \w+ must be square \(or a batch of square matrices\), got shape \("):
        call()


def test_mismatched_batch_shapes_name_both_shapes():
    message = "trsm: A and B must have the same batch shape (leading axes); got A shape (2, 3, 3) and B shape (3, 3, 4)"
    with pytest.raises(ValueError, match=re.escape(message)):
        K.trsm(np.tile(np.eye(3), (2, 1, 1)), np.ones((3, 3, 4)))
    with pytest.raises(ValueError, match=re.escape("gemm: A and C must have the same batch shape")):
        K.gemm(np.ones((2, 2, 2)), np.ones((2, 2, 2)), np.ones((2, 2)))


def test_mismatched_matrix_dimensions_name_both_shapes():
    message = ("gemm2: inner dimensions differ: op(A) is 3 x 2 and op(B) is 3 x 4 "
               "(A shape (2, 3), transpose_a=True; B shape (3, 4), transpose_b=False)")
    with pytest.raises(ValueError, match=re.escape(message)):
        K.gemm2(np.ones((2, 3)), np.ones((3, 4)), transpose_a=True)
    with pytest.raises(ValueError, match=re.escape("gemm: inner dimensions differ: op(A) is 2 x 3 and op(B) is 4 x 3")):
        K.gemm(np.ones((2, 3)), np.ones((3, 4)), np.ones((2, 3)), transpose_b=True)
    with pytest.raises(ValueError, match=re.escape("gemm: C must be 2 x 4 to match op(A)·op(B), got C shape (4, 2) (A shape (2, 3), B shape (3, 4))")):
        K.gemm(np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 2)))
    message = ("trmm: B must have 3 columns to match the 3 x 3 triangular A (rightside=True); "
               "got A shape (3, 3) and B shape (3, 2)")
    with pytest.raises(ValueError, match=re.escape(message)):
        K.trmm(np.eye(3), np.ones((3, 2)), rightside=True)
    with pytest.raises(ValueError, match=re.escape("trsm: B must have 3 rows to match the 3 x 3 triangular A (rightside=False)")):
        K.trsm(np.eye(3), np.ones((2, 3)))


def test_gelqf_refuses_more_rows_than_columns():
    with pytest.raises(ValueError, match=re.escape("gelqf: A must have no more rows than columns (m <= n), got 3 x 2 (A shape (4, 3, 2))")):
        K.gelqf(np.ones((4, 3, 2)))


I3 = np.tile(np.eye(3), (2, 1, 1))


@pytest.mark.parametrize("name, operand, call", [
    ("gemm", "A", lambda bad: K.gemm(bad, I3, I3)),
    ("gemm", "C", lambda bad: K.gemm(I3, I3, bad, beta=0.5)),
    ("gemm2", "B", lambda bad: K.gemm2(I3, bad)),
    ("syrk", "A", lambda bad: K.syrk(bad)),
    ("trmm", "B", lambda bad: K.trmm(I3, bad)),
    ("trsm", "A", lambda bad: K.trsm(bad + np.eye(3), I3)),
    ("potrf", "A", lambda bad: K.potrf(bad + 3 * np.eye(3))),
    ("potri", "L", lambda bad: K.potri(bad + np.eye(3))),
    ("gelqf", "A", lambda bad: K.gelqf(bad)),
    ("syevd", "A", lambda bad: K.syevd(bad)),
])
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_input_is_refused_with_its_position(name, operand, call, value):
    bad = np.zeros((2, 3, 3))
    bad[1, 2, 0] = value
    message = f"{name}: {operand} has a non-finite entry ({value}) at batch index (1,), row 2, column 0; {name} needs finite input"
    with pytest.raises(ValueError, match=re.escape(message)):
        call(bad)


def test_non_finite_input_of_a_single_matrix_and_in_the_triangle_read():
    with pytest.raises(ValueError, match=re.escape("potrf: A has a non-finite entry (nan) at row 0, column 1; potrf needs finite input")):
        K.potrf([[1.0, np.nan], [0.0, 1.0]], lower=False)
    with pytest.raises(ValueError, match=re.escape("trmm: A has a non-finite entry (-inf) at row 1, column 0")):
        K.trmm([[1.0, 0.0], [-np.inf, 1.0]], np.eye(2))


def test_sumlogdiag_refuses_a_non_positive_or_non_finite_diagonal():
    A = np.tile(np.eye(3), (2, 2, 1, 1))
    A[0, 1, 2, 2] = -1.5
    with pytest.raises(ValueError, match=re.escape("sumlogdiag: A at batch index (0, 1) has a non-positive diagonal entry (A[2, 2] = -1.5)")):
        K.sumlogdiag(A)
    with pytest.raises(ValueError, match=re.escape("sumlogdiag: A has a non-finite diagonal entry (A[1, 1] = nan)")):
        K.sumlogdiag([[1.0, 0.0], [0.0, np.nan]])


def test_trsm_refuses_a_zero_on_the_diagonal():
    A = np.tile(np.eye(3), (2, 1, 1))
    A[1, 2, 2] = 0.0
    with pytest.raises(ValueError, match=re.escape("trsm: the triangular matrix A at batch index (1,) is singular (A[2, 2] = 0)")):
        K.trsm(A, np.ones((2, 3, 1)))


@pytest.mark.parametrize("call", [
    lambda: K.potrf(np.eye(2) * (1 + 1j)),
    lambda: K.gemm2(np.eye(2), np.eye(2).astype(complex)),
    lambda: K.syevd(np.array([["a", "b"], ["c", "d"]])),
])
def test_complex_and_non_numeric_input_is_refused(call):
    with pytest.raises(TypeError, match=r"^\w+: unsupported dtype \S+; \w+ computes in float32 or float64 \(real input only\)$"):
        call()


def test_scale_factors_must_be_finite_reals():
    with pytest.raises(ValueError, match=re.escape("gemm: beta must be finite, got nan")):
        K.gemm(np.eye(2), np.eye(2), np.eye(2), beta=np.nan)
    with pytest.raises(ValueError, match=re.escape("trsm: alpha must be finite, got inf")):
        K.trsm(np.eye(2), np.eye(2), alpha=np.inf)
    with pytest.raises(TypeError, match=re.escape("syrk: alpha must be a real number, got 1j")):
        K.syrk(np.eye(2), alpha=1j)
    with pytest.raises(TypeError, match=re.escape("gemm2: alpha must be a real number, got 'two'")):
        K.gemm2(np.eye(2), np.eye(2), alpha="two")


def test_offsets_and_packed_lengths_are_checked():
    with pytest.raises(ValueError, match=re.escape("extractdiag: offset 2 is out of range for 2 x 2 matrices (|offset| < 2 needed)")):
        K.extractdiag(np.eye(2), 2)
    with pytest.raises(ValueError, match=re.escape("extracttrian: offset -3 is out of range for 3 x 3 matrices")):
        K.extracttrian(np.eye(3), -3)
    with pytest.raises(ValueError, match=re.escape("maketrian: the last axis of v has length 4, not a triangular number m(m+1)/2 (v shape (2, 4))")):
        K.maketrian(np.ones((2, 4)))


@pytest.mark.parametrize("op", ["trsm", "trmm", "potri"])
@pytest.mark.parametrize("lower", [True, False])
def test_a_triangle_of_the_other_kind_is_refused(op, lower):
    """An upper factor passed as lower (or vice versa) would silently be read as its diagonal."""
    from jacacc.linalg import routines

    F = np.array([[2.0, 1.0], [0.0, 3.0]])
    F = F if lower else F.T  # the wrong kind for `lower`
    batch = np.stack([np.tril(F.T) if lower else np.triu(F.T), F])
    call = {"trsm": lambda A: routines.trsm(A, np.ones(A.shape[:-1] + (1,)), lower=lower),
            "trmm": lambda A: routines.trmm(A, np.ones(A.shape[:-1] + (1,)), lower=lower),
            "potri": lambda A: routines.potri(A, lower=lower)}[op]
    flag = "lower=False" if lower else "lower=True"
    with pytest.raises(ValueError, match=rf"{op}: .* zero off the diagonal .* needs {flag}"):
        call(F)
    with pytest.raises(ValueError, match=r"at batch index \(1,\)"):
        call(batch)
    call(np.diag([2.0, 3.0]))  # diagonal: either kind, accepted


# ---------------------------------------------------------------------------- one small matrix: the lean path
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_lu_routines_on_one_matrix_give_the_batched_path_s_bits(n, dtype):
    # a single C-contiguous matrix skips the batch machinery; a batch of one goes through it
    rng = np.random.default_rng(n)
    A = (rng.standard_normal((n, n)) + n * np.eye(n)).astype(dtype)
    B = rng.standard_normal((n, 3)).astype(dtype)
    A0, B0 = A.copy(), B.copy()
    LU, piv = K.getrf(A)
    LU1, piv1 = K.getrf(A[None])
    np.testing.assert_array_equal(LU, LU1[0])
    np.testing.assert_array_equal(piv, piv1[0])
    assert piv.dtype == np.int32 and LU.flags.c_contiguous
    for transpose in (False, True):
        np.testing.assert_array_equal(K.getrs(LU, piv, B, transpose=transpose),
                                      K.getrs(LU1, piv1, B[None], transpose=transpose)[0])
    np.testing.assert_array_equal(K.getri(LU, piv), K.getri(LU1, piv1)[0])
    np.testing.assert_allclose(K.getrs(LU, piv, B), np.linalg.solve(A, B), rtol=1e-4 if dtype == np.float32 else 1e-12)
    np.testing.assert_array_equal(A, A0)  # the inputs are left as they were
    np.testing.assert_array_equal(B, B0)


def test_lu_routines_on_one_matrix_refuse_as_the_batched_path_does():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    LU, piv = K.getrf(singular)
    with pytest.raises(K.SingularMatrixError, match=r"getrs: the matrix is singular"):
        K.getrs(LU, piv, np.ones((2, 1)))
    with pytest.raises(K.SingularMatrixError, match=r"getri: the matrix is singular"):
        K.getri(LU, piv)
    with pytest.raises(ValueError, match="getrf"):
        K.getrf(np.array([[1.0, np.nan], [0.0, 1.0]]))


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("batch, n, k", [((9,), 3, 4), ((2, 8), 2, 5), ((64,), 1, 3), ((16,), 4, 1)])
def test_getrs_across_a_batch_of_small_systems_matches_lapack_per_matrix(batch, n, k, dtype, compiled, monkeypatch):
    # a batch of small systems is solved in one loop over the batch (compiled by Numba, or n² or more
    # of them by NumPy substitution across the batch), not one LAPACK call each: the same solution as
    # the lean one-matrix path (LAPACK) for each matrix, in both senses
    if compiled:
        assert K._getrs_kernel() is not None
    else:
        monkeypatch.setattr(K, "_getrs_kernel", lambda: None)
    rng = np.random.default_rng(n * k)
    A = rng.standard_normal(batch + (n, n)).astype(dtype)  # no diagonal shift: row interchanges happen
    B = rng.standard_normal(batch + (n, k)).astype(dtype)
    LU, piv = K.getrf(A)
    assert K._solved_across(batch, n) and (n == 1 or (piv != np.arange(n)).any())
    tol = 1e-4 if dtype == np.float32 else 1e-12
    for transpose in (False, True):
        X = K.getrs(LU, piv, B, transpose=transpose)
        assert X.shape == B.shape and X.dtype == dtype
        for index in np.ndindex(*batch):
            one = K.getrs(np.ascontiguousarray(LU[index]), np.ascontiguousarray(piv[index]),
                          np.ascontiguousarray(B[index]), transpose=transpose)
            np.testing.assert_allclose(X[index], one, rtol=tol, atol=tol)
        M = np.swapaxes(A, -1, -2) if transpose else A
        np.testing.assert_allclose(M @ X, B, rtol=10 * tol, atol=10 * tol)


def test_getrs_across_a_batch_names_a_singular_matrix():
    A = np.tile(np.eye(2), (6, 1, 1))
    A[4] = [[1.0, 2.0], [2.0, 4.0]]
    LU, piv = K.getrf(A)
    with pytest.raises(K.SingularMatrixError, match=r"getrs: the matrix at batch index \(4,\) is singular"):
        K.getrs(LU, piv, np.ones((6, 2, 3)))
