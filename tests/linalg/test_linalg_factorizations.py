"""Derivatives of gelqf, syevd and the diagonal/triangle helpers through jacacc.tensor (paper 004 §4).

For every operator and option, over shapes (gelqf with m < n, m == n and 1 × 1),
batch shapes (), (2,), (2, 3), in float64: the dot-product test between ``jvp``
and ``vjp``, central differences of the forward kernels against ``jvp`` and
``vjp`` against ``torch.autograd``; Hessians of scalar compositions against
``torch.func.hessian``; syevd's eigengap clamp and its warning; MXNet's
documented syevd value.

Conventions matched in torch: LQ is the QR factorization of Aᵀ with the signs
made to give L a positive diagonal; ``torch.linalg.eigh`` returns
eigenvectors as columns, whose signs are aligned with syevd's rule (each row's
largest-magnitude entry positive) — the sign flips are locally constant, so
the aligned factors have the same derivatives.  syevd's argument is a
symmetric matrix: finite differences perturb it symmetrically, torch's
gradient is compared after symmetrization and Hessians on symmetric
directions, as for potrf in ``test_linalg_derivatives.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from linalg_checks import check_against_torch, check_central_differences, check_dot_product, sym, tangents_for

import jacacc.tensor as jt
from jacacc import linalg
from jacacc.linalg.factorizations import eigengap_threshold
from jacacc.tensor.trace import Traced, trace

torch = pytest.importorskip("torch")

RTOL = 1e-9
BATCHES = [(), (2,), (2, 3)]


def t(x):
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


def orthogonal(rng, batch, n):
    Q, R = np.linalg.qr(rng.normal(size=(*batch, n, n)))
    return Q * np.sign(np.diagonal(R, axis1=-2, axis2=-1))[..., None, :]


def separated_symmetric(rng, batch, n):
    """A symmetric matrix with eigenvalues at least 1 apart (the derivative is well conditioned)."""
    lam = np.arange(n) * 1.5 - 1.0 + rng.uniform(-0.25, 0.25, size=(*batch, n))
    R = orthogonal(rng, batch, n)
    return sym(np.einsum("...ji,...j,...jk->...ik", R, lam, R))


def full_rank(rng, batch, m, n):
    return rng.normal(size=(*batch, m, n)) + 2 * np.eye(m, n)


# ---------------------------------------------------------------------------- the torch counterparts
def t_gelqf(A):
    """LQ by torch's QR of Aᵀ, signs aligned to a positive diagonal of L."""
    Qt, R = torch.linalg.qr(A.mT)
    s = torch.sign(torch.diagonal(R, dim1=-2, dim2=-1)).detach()
    return Qt.mT * s[..., :, None], R.mT * s[..., None, :]


def t_syevd(A):
    """torch's eigh as syevd: eigenvectors as rows, each row's largest-magnitude entry positive."""
    lam, V = torch.linalg.eigh(A)
    U = V.mT
    with torch.no_grad():
        k = U.abs().argmax(-1, keepdim=True)
        s = torch.sign(torch.gather(U, -1, k))
    return U * s, lam


def trian_positions(n, offset, lower):
    """MXNet's packing written out independently of the kernels: the lower triangle
    row by row, the upper one column by column."""
    if offset < 0 or (offset == 0 and lower):
        pos = [(i, j) for i in range(n) for j in range(n) if j - i <= offset]
    else:
        pos = [(i, j) for j in range(n) for i in range(n) if j - i >= offset]
    return [p[0] for p in pos], [p[1] for p in pos]


def t_extracttrian(A, offset, lower):
    rows, cols = trian_positions(A.shape[-1], offset, lower)
    return A[..., rows, cols]


def t_maketrian(v, offset, lower):
    m = (int(np.sqrt(8 * v.shape[-1] + 1)) - 1) // 2
    n = m + abs(offset)
    rows, cols = trian_positions(n, offset, lower)
    out = torch.zeros(v.shape[:-1] + (n, n), dtype=v.dtype)
    out[..., rows, cols] = v
    return out


# ---------------------------------------------------------------------------- cases
# Each case: name, jacacc function, torch function (the same map), arguments,
# indices of arguments that are symmetric matrices.
def cases(rng):
    out = []
    for batch in BATCHES:
        for m, n in [(1, 1), (3, 3), (1, 3), (2, 4)]:
            A, B = full_rank(rng, batch, m, n), rng.normal(size=(*batch, m, n))
            tag = f"{m}x{n} batch={batch}"
            out.append((f"gelqf Q {tag}", lambda A: linalg.gelqf(A)[0], lambda A: t_gelqf(A)[0], (A,), ()))
            out.append((f"gelqf L {tag}", lambda A: linalg.gelqf(A)[1], lambda A: t_gelqf(A)[1], (A,), ()))
            out.append((f"gelqf Q+LB {tag}",
                        lambda A, B=B: linalg.gelqf(A)[0] + linalg.gelqf(A)[1] @ B,
                        lambda A, B=B: t_gelqf(A)[0] + t_gelqf(A)[1] @ torch.tensor(B), (A,), ()))
        for n in [1, 2, 4]:
            A, W = separated_symmetric(rng, batch, n), rng.normal(size=(*batch, n, n))
            tag = f"n={n} batch={batch}"
            out.append((f"syevd U {tag}", lambda A: linalg.syevd(A)[0], lambda A: t_syevd(A)[0], (A,), (0,)))
            out.append((f"syevd lam {tag}", lambda A: linalg.syevd(A)[1], lambda A: t_syevd(A)[1], (A,), (0,)))
            out.append((f"syevd U+W*lam {tag}",
                        lambda A, W=W: linalg.syevd(A)[0] + np.einsum("...ij,...i->...ij", W, linalg.syevd(A)[1]),
                        lambda A, W=W: t_syevd(A)[0] + torch.einsum("...ij,...i->...ij", torch.tensor(W),
                                                                     t_syevd(A)[1]), (A,), (0,)))
        for n, offset in [(1, 0), (3, 0), (3, 1), (3, -2)]:
            out.append((f"extractdiag n={n} offset={offset} batch={batch}",
                        lambda A, k=offset: linalg.extractdiag(A, k),
                        lambda A, k=offset: torch.diagonal(A, k, dim1=-2, dim2=-1),
                        (rng.normal(size=(*batch, n, n)),), ()))
            m = n - abs(offset)
            out.append((f"makediag m={m} offset={offset} batch={batch}",
                        lambda v, k=offset: linalg.makediag(v, k),
                        lambda v, k=offset: torch.diag_embed(v, k),
                        (rng.normal(size=(*batch, m)),), ()))
        for n, offset, lower in [(1, 0, True), (3, 0, True), (3, 0, False), (3, 1, True), (3, -1, False)]:
            m = n - abs(offset)
            o = (offset, lower)
            out.append((f"extracttrian n={n} offset={offset} lower={lower} batch={batch}",
                        lambda A, o=o: linalg.extracttrian(A, *o), lambda A, o=o: t_extracttrian(A, *o),
                        (rng.normal(size=(*batch, n, n)),), ()))
            out.append((f"maketrian m={m} offset={offset} lower={lower} batch={batch}",
                        lambda v, o=o: linalg.maketrian(v, *o), lambda v, o=o: t_maketrian(v, *o),
                        (rng.normal(size=(*batch, m * (m + 1) // 2)),), ()))
    return out


CASES = cases(np.random.default_rng(0))
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_dot_product_test(case):
    """With general (also non-symmetric) tangents: for syevd this also checks that the
    pushforward symmetrizes ẋ exactly as the symmetric pullback implies."""
    check_dot_product(case, tangents_for(case, np.random.default_rng(1), symmetric_tangents=False))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_pushforward_matches_central_differences(case):
    check_central_differences(case, tangents_for(case, np.random.default_rng(2)))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_value_and_pullback_agree_with_torch(case):
    check_against_torch(case, torch, value_rtol=1e-10, grad_rtol=1e-8)


# ---------------------------------------------------------------------------- second derivatives
def symmetric_directions(H, shape):
    """A Hessian over matrices of ``shape`` restricted to symmetric directions on both sides."""
    H = H.reshape(shape + shape)
    r = len(shape)
    left = list(range(2 * r))
    left[r - 2], left[r - 1] = r - 1, r - 2
    right = list(range(2 * r))
    right[-2], right[-1] = 2 * r - 1, 2 * r - 2
    H = (H + H.transpose(left)) / 2
    return (H + H.transpose(right)) / 2


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("mode", ["reverse", "cross_country", "forward"])
def test_hessian_of_an_eigen_composition_matches_torch(mode, batch):
    """Σ sin(λ) + ⟨W, U ∘ U⟩: the second derivative goes through F (the eigengaps) and through U's pullback."""
    rng = np.random.default_rng(4)
    n = 4 if not batch else 3
    A, W = separated_symmetric(rng, batch, n), rng.normal(size=(*batch, n, n))

    def f(A, W):
        U, lam = linalg.syevd(A)
        return np.sum(np.sin(lam)) + np.sum(W * U * U)

    def f_torch(A):
        U, lam = t_syevd(A)
        return torch.sin(lam).sum() + (torch.tensor(W) * U * U).sum()

    H = jt.hessian(f, mode=mode)(A, W)
    H_torch = torch.func.hessian(f_torch)(torch.tensor(A)).numpy()
    np.testing.assert_allclose(H, symmetric_directions(H, A.shape), atol=1e-11)
    np.testing.assert_allclose(H, symmetric_directions(H_torch, A.shape), rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("shape", [(2, 4), (3, 3), (1, 1)])
@pytest.mark.parametrize("mode", ["reverse", "cross_country"])
def test_hessian_of_an_lq_composition_matches_torch(shape, mode):
    """⟨Wq, Q⟩ + ⟨Wl, L ∘ L⟩ + log det(A Aᵀ) through gelqf's Q and L."""
    rng = np.random.default_rng(5)
    m, n = shape
    A, Wq, Wl = full_rank(rng, (), m, n), rng.normal(size=(m, n)), rng.normal(size=(m, m))

    def f(A):
        Q, L = linalg.gelqf(A)
        return np.sum(Wq * Q) + np.sum(Wl * L * L) + 2 * linalg.sumlogdiag(L)

    def f_torch(A):
        Q, L = t_gelqf(A)
        return (torch.tensor(Wq) * Q).sum() + (torch.tensor(Wl) * L * L).sum() + 2 * torch.log(
            torch.diagonal(L)).sum()

    H = jt.hessian(f, mode=mode)(A)
    H_torch = torch.func.hessian(f_torch)(torch.tensor(A)).numpy()
    np.testing.assert_allclose(H, H_torch, rtol=1e-8, atol=1e-9)


def test_hessian_through_the_diagonal_and_triangle_helpers_matches_torch():
    """The gradient of a composition of the helpers holds their adjoints; its derivative their pushforwards."""
    rng = np.random.default_rng(6)
    n = 4
    A, W = rng.normal(size=(2, n, n)), rng.normal(size=(2, n, n))

    def f(A, W):
        d = linalg.extractdiag(A, 1)
        low = linalg.extracttrian(A, -1)
        up = linalg.extracttrian(A, 0, lower=False)
        return (np.sum(d**3) + np.sum(W * linalg.maketrian(low**2, -1))
                + np.sum(W * linalg.makediag(linalg.extractdiag(A) ** 2) * A) + np.sum(np.sin(up)))

    def f_torch(A):
        Wt = torch.tensor(W)
        d = torch.diagonal(A, 1, dim1=-2, dim2=-1)
        low, up = t_extracttrian(A, -1, True), t_extracttrian(A, 0, False)
        return ((d**3).sum() + (Wt * t_maketrian(low**2, -1, True)).sum()
                + (Wt * torch.diag_embed(torch.diagonal(A, dim1=-2, dim2=-1) ** 2) * A).sum() + torch.sin(up).sum())

    H = jt.hessian(f)(A, W)
    H_torch = torch.func.hessian(f_torch)(torch.tensor(A)).numpy()
    np.testing.assert_allclose(H, H_torch, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------- the eigengap clamp
def rotated(lam, rng):
    R = orthogonal(rng, (), len(lam))
    return sym(R.T @ np.diag(lam) @ R)


def test_repeated_eigenvalues_warn_and_apply_the_documented_clamp():
    """At a repeated eigenvalue (I + x xᵀ, the paper's warning example) the pullback warns, stays
    finite and equals paper 004's formula with F's entry clamped to ±1/ε."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=3)
    A = np.eye(3) + np.outer(x, x)
    W = rng.normal(size=(3, 3))
    with pytest.warns(RuntimeWarning, match=r"syevd: \(near-\)repeated eigenvalues.*derivative.*undefined.*clamp"):
        g = jt.grad(lambda A: np.sum(W * linalg.syevd(A)[0]))(A)
    U, lam = linalg.syevd(A)
    eps = eigengap_threshold(lam)
    diff = lam[:, None] - lam[None, :]
    h = np.where(np.abs(diff) < eps, np.where(np.tri(3, k=-1, dtype=bool), eps, -eps), diff)
    F = np.where(np.eye(3, dtype=bool), 0.0, 1 / np.where(np.eye(3, dtype=bool), 1.0, h))
    assert np.isclose(abs(F[1, 0]), 1 / eps) and np.isclose(F[0, 1], -F[1, 0])
    np.testing.assert_allclose(g, U.T @ sym((W @ U.T) * F) @ U, rtol=1e-10)


def test_the_warning_names_the_batch_index_and_is_issued_at_each_evaluation():
    rng = np.random.default_rng(8)
    A = np.stack([rotated(np.array([0.0, 1.0, 2.0]), rng), rotated(np.array([1.0, 1.0 + 1e-10, 3.0]), rng)])
    g = jt.grad(lambda A: np.sum(linalg.syevd(A)[0] ** 3))
    for _ in range(2):  # traced and planned once, checked on every evaluation
        with pytest.warns(RuntimeWarning, match=r"batch index \(1,\)"):
            g(A)


def test_separated_eigenvalues_and_eigenvalue_only_derivatives_do_not_warn():
    rng = np.random.default_rng(9)
    x = rng.normal(size=3)
    A = np.eye(3) + np.outer(x, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # Σ λ² = ‖A‖_F² needs no 1/(λ_i − λ_j): no clamp, no warning, even at a repeated eigenvalue
        np.testing.assert_allclose(jt.grad(lambda A: np.sum(linalg.syevd(A)[1] ** 2))(A), 2 * A, rtol=1e-12)
        jt.grad(lambda A: np.sum(linalg.syevd(A)[0] ** 3))(separated_symmetric(rng, (), 3))


def test_the_clamp_threshold_is_relative_to_the_spectrum_and_per_dtype():
    lam = np.array([[-3.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    eps = eigengap_threshold(lam)
    np.testing.assert_allclose(eps, [3 * np.sqrt(np.finfo(np.float64).eps), np.finfo(np.float64).tiny])
    assert eigengap_threshold(lam.astype(np.float32)).dtype == np.float32
    assert eigengap_threshold(lam.astype(np.float32))[0] == pytest.approx(3 * np.sqrt(np.finfo(np.float32).eps))


@pytest.mark.parametrize("lam", [
    np.array([-2.0, 0.5, 3.0]),                      # ascending, well separated: the O(n) test's shortcut
    np.array([[-1.0, 0.0, 4.0], [1.0, 1.0, 2.0]]),   # a batch where one matrix has a repeated value
    np.array([3.0, -1.0, 2.0]),                      # not ascending: the general path
    np.array([1.0, 1.0 + 1e-9, 5.0]),                # a gap under the threshold
])
def test_eigengap_masks_are_the_pairwise_definition(lam):
    """``K`` (1 where a pair is not clamped) and ``C`` (±ε where it is, 1 on the diagonal) as paper
    004 §4.4 defines them pair by pair, whichever path computes them."""
    from jacacc.linalg.factorizations import _eigengaps_forward

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        keep, clamped = _eigengaps_forward(lam)
    eps = eigengap_threshold(lam)
    for index in np.ndindex(lam.shape[:-1]):
        values, e = lam[index], eps[index]
        for i in range(len(values)):
            for j in range(len(values)):
                small = i != j and abs(values[i] - values[j]) < e
                assert keep[index + (i, j)] == float(i != j and not small)
                want = 1.0 if i == j else (e if i > j else -e) if small else 0.0
                assert clamped[index + (i, j)] == want


# ---------------------------------------------------------------------------- values, dtypes, misuse
def test_mxnet_documented_syevd_value_through_the_public_api():
    A = np.array([[1.0, 2.0], [2.0, 4.0]])
    U, lam = linalg.syevd(A)
    np.testing.assert_allclose(lam, [0.0, 5.0], atol=1e-12)
    np.testing.assert_allclose(U, [[0.894, -0.447], [0.447, 0.894]], atol=1e-3)
    value, _ = jt.vjp(lambda A: linalg.syevd(A)[0], A)   # the same value when traced
    np.testing.assert_allclose(value, U, rtol=1e-12)
    value, _ = jt.vjp(lambda A: linalg.syevd(A)[1], A)
    np.testing.assert_allclose(value, lam, atol=1e-12)


def test_traced_factorizations_return_a_tuple_of_traced_outputs():
    seen = {}

    def f(A):
        seen["gelqf"], seen["syevd"] = linalg.gelqf(A), linalg.syevd(A)
        return seen["gelqf"][1] + seen["syevd"][0]

    trace(f, [np.eye(3)])
    for name in ("gelqf", "syevd"):
        out = seen[name]
        assert isinstance(out, tuple) and len(out) == 2 and all(isinstance(x, Traced) for x in out)
    assert [x.shape for x in seen["syevd"]] == [(3, 3), (3,)]


@pytest.mark.parametrize("op", ["gelqf", "syevd"])
def test_float32_gradients(op):
    rng = np.random.default_rng(10)
    if op == "gelqf":
        A, W = full_rank(rng, (2,), 2, 3), rng.normal(size=(2, 2, 3))
        f = lambda A: np.sum(W * linalg.gelqf(A)[0]) + np.sum(linalg.gelqf(A)[1] ** 2)  # noqa: E731
    else:
        A, W = separated_symmetric(rng, (2,), 3), rng.normal(size=(2, 3, 3))
        f = lambda A: np.sum(W * linalg.syevd(A)[0]) + np.sum(linalg.syevd(A)[1] ** 3)  # noqa: E731
    g32 = jt.grad(f)(A.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, jt.grad(f)(A), rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize(("f", "args", "message"), [
    (lambda A: linalg.gelqf(A)[0], (np.ones((3, 2)),), r"gelqf.*m <= n.*3 x 2"),
    (lambda A: linalg.syevd(A)[0], (np.ones((2, 3)),), r"syevd.*square.*\(2, 3\)"),
    (lambda A: linalg.extractdiag(A, 3), (np.ones((3, 3)),), r"extractdiag.*offset 3"),
    (lambda A: linalg.extracttrian(A, -3), (np.ones((3, 3)),), r"extracttrian.*offset -3"),
    (lambda v: linalg.maketrian(v), (np.ones(4),), r"maketrian.*length 4.*triangular"),
    (lambda v: linalg.makediag(v), (np.ones(()),), r"makediag.*ndim >= 1"),
])
def test_bad_shapes_are_refused_while_tracing(f, args, message):
    with pytest.raises(ValueError, match=message):
        jt.vjp(f, *args)


def test_both_outputs_are_pulled_back_through_one_vjp_call(monkeypatch):
    """Q's and L's cotangents meet in one call of gelqf's pullback (calling it per output
    would repeat the shared solve)."""
    import dataclasses

    from jacacc.tensor.expr import OPERATORS

    calls = []
    operator = OPERATORS["gelqf"]

    def spy(outputs, args, cotangents, **options):
        calls.append(tuple(c is not None for c in cotangents))
        return operator.vjp(outputs, args, cotangents, **options)

    monkeypatch.setitem(OPERATORS, "gelqf", dataclasses.replace(operator, vjp=spy))
    rng = np.random.default_rng(31)
    A, Wq, Wl = rng.normal(size=(3, 5)), rng.normal(size=(3, 5)), rng.normal(size=(3, 3))

    def f(A, Wq, Wl):
        Q, L = linalg.gelqf(A)
        return np.sum(Wq * Q) + np.sum(Wl * L)

    g = jt.grad(f)(A, Wq, Wl)
    assert calls == [(True, True)]
    At = torch.tensor(A, requires_grad=True)
    Qt, Rt = torch.linalg.qr(At.T)
    signs = torch.sign(torch.diagonal(Rt))
    Q_t, L_t = (Qt * signs).T, (Rt.T * signs)
    ((torch.tensor(Wq) * Q_t).sum() + (torch.tensor(Wl) * L_t).sum()).backward()
    np.testing.assert_allclose(g, At.grad.numpy(), rtol=1e-9, atol=1e-12)
