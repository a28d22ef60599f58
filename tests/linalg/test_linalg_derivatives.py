"""Derivatives of jacacc.linalg's operators through jacacc.tensor (paper 004 §4).

For every operator and option: the dot-product test (⟨J·ẋ, ȳ⟩ = ⟨ẋ, Jᵀ·ȳ⟩ between
``jvp`` and ``vjp``), central differences of the forward kernels against ``jvp``,
and ``vjp`` against ``torch.autograd`` on the same inputs — for several shapes,
batch shapes, both triangles and 1 × 1 matrices, in float64.  Second derivatives
of potrf, trsm and sumlogdiag compositions against ``torch.func.hessian``.

potrf's argument is a symmetric matrix: its tangents are symmetric (finite
differences perturb symmetrically) and Hessians are compared on symmetric
directions, where PyTorch's convention and jacacc's agree.
"""

from __future__ import annotations

import numpy as np
import pytest
from linalg_checks import check_against_torch, check_central_differences, check_dot_product, sym, tangents_for

import jacacc.tensor as jt
from jacacc import linalg
from jacacc.errors import NotPositiveDefiniteError

torch = pytest.importorskip("torch")

RTOL = 1e-9


def spd(rng, batch, n):
    M = rng.normal(size=(*batch, n, n))
    return M @ np.swapaxes(M, -1, -2) + n * np.eye(n)


def tri(rng, batch, n, lower):
    T = rng.normal(size=(*batch, n, n)) + 3 * np.eye(n)
    return np.tril(T) if lower else np.triu(T)


def t(x):
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


def tmask(x, lower):
    return torch.tril(x) if lower else torch.triu(x)


def ttri(x, transpose):
    return x.mT if transpose else x


# Each case: name, jacacc function, torch function (the same map), arguments,
# indices of arguments whose tangents are symmetric.
def cases(rng):
    out = []
    for batch in [(), (2,), (2, 3)]:
        for n in [1, 3]:
            for lower in [True, False]:
                out.append((f"potrf lower={lower} n={n} batch={batch}",
                            lambda A, lower=lower: linalg.potrf(A, lower=lower),
                            lambda A, lower=lower: torch.linalg.cholesky(A, upper=not lower),
                            (spd(rng, batch, n),), (0,)))
                out.append((f"potri lower={lower} n={n} batch={batch}",
                            lambda L, lower=lower: linalg.potri(L, lower=lower),
                            lambda L, lower=lower: torch.cholesky_inverse(tmask(L, lower), upper=not lower),
                            (tri(rng, batch, n, lower),), ()))
                for transpose in [False, True]:
                    for rightside in [False, True]:
                        B = rng.normal(size=(*batch, 2, n) if rightside else (*batch, n, 2))
                        out.append((f"trsm lower={lower} transpose={transpose} rightside={rightside} n={n} "
                                    f"batch={batch}",
                                    lambda A, B, o=(transpose, rightside, lower): linalg.trsm(
                                        A, B, alpha=1.5, transpose=o[0], rightside=o[1], lower=o[2]),
                                    lambda A, B, o=(transpose, rightside, lower): torch.linalg.solve_triangular(
                                        ttri(tmask(A, o[2]), o[0]), 1.5 * B, upper=(not o[2]) != o[0],
                                        left=not o[1]),
                                    (tri(rng, batch, n, lower), B), ()))
                        out.append((f"trmm lower={lower} transpose={transpose} rightside={rightside} n={n} "
                                    f"batch={batch}",
                                    lambda A, B, o=(transpose, rightside, lower): linalg.trmm(
                                        A, B, alpha=0.5, transpose=o[0], rightside=o[1], lower=o[2]),
                                    lambda A, B, o=(transpose, rightside, lower): 0.5 * (
                                        B @ ttri(tmask(A, o[2]), o[0]) if o[1] else ttri(tmask(A, o[2]), o[0]) @ B),
                                    (rng.normal(size=(*batch, n, n)), B), ()))
            A, B, C = rng.normal(size=(*batch, 3, 4)), rng.normal(size=(*batch, 5, 4)), rng.normal(size=(*batch, 3, 5))
            out.append((f"gemm batch={batch}",
                        lambda A, B, C: linalg.gemm(A, B, C, alpha=2.0, beta=-0.5, transpose_b=True),
                        lambda A, B, C: 2.0 * A @ B.mT - 0.5 * C, (A, B, C), ()))
            out.append((f"gemm2 batch={batch}",
                        lambda A, B: linalg.gemm2(A, B, alpha=0.5, transpose_a=True),
                        lambda A, B: 0.5 * A.mT @ B, (rng.normal(size=(*batch, 4, 3)), rng.normal(size=(*batch, 4, 2))),
                        ()))
            for transpose in [False, True]:
                out.append((f"syrk transpose={transpose} batch={batch}",
                            lambda A, tr=transpose: linalg.syrk(A, alpha=3.0, transpose=tr),
                            lambda A, tr=transpose: 3.0 * (A.mT @ A if tr else A @ A.mT),
                            (rng.normal(size=(*batch, 3, 4)),), ()))
            out.append((f"sumlogdiag batch={batch}", linalg.sumlogdiag,
                        lambda A: torch.log(torch.diagonal(A, dim1=-2, dim2=-1)).sum(-1),
                        (spd(rng, batch, 3),), ()))
    return out


CASES = cases(np.random.default_rng(0))
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_dot_product_test(case):
    check_dot_product(case, tangents_for(case, np.random.default_rng(1)))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_pushforward_matches_central_differences(case):
    check_central_differences(case, tangents_for(case, np.random.default_rng(2)))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_value_and_pullback_agree_with_torch(case):
    check_against_torch(case, torch)


# ---------------------------------------------------------------------------- second derivatives
def symmetric_directions(H, n):
    """A Hessian over n × n matrices restricted to symmetric directions on both sides."""
    H = H.reshape(n, n, n, n)
    H = (H + H.transpose(1, 0, 2, 3)) / 2
    return (H + H.transpose(0, 1, 3, 2)) / 2


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("mode", ["reverse", "cross_country", "forward"])
def test_hessian_of_a_cholesky_composition_matches_torch(lower, mode):
    rng = np.random.default_rng(4)
    n = 4
    A, W = spd(rng, (), n), rng.normal(size=(n, n))

    def f(A, W):
        F = linalg.potrf(A, lower=lower)
        return np.sum(W * F * F) + 2 * linalg.sumlogdiag(F)

    def f_torch(A):
        F = torch.linalg.cholesky(A, upper=not lower)
        return (torch.tensor(W) * F * F).sum() + 2 * torch.log(torch.diagonal(F)).sum()

    H = jt.hessian(f, mode=mode)(A, W)
    H_torch = torch.func.hessian(f_torch)(torch.tensor(A)).numpy()
    np.testing.assert_allclose(H, symmetric_directions(H, n), atol=1e-12)
    np.testing.assert_allclose(H, symmetric_directions(H_torch, n), rtol=1e-9, atol=1e-10)


def test_hessian_of_the_log_determinant_is_minus_the_inverse_kronecker_product():
    """d²/dA² of log det A = 2·sumlogdiag(potrf(A)) is −A⁻¹ ⊗ A⁻¹ on symmetric directions (closed form)."""
    rng = np.random.default_rng(5)
    n = 3
    A = spd(rng, (), n)
    H = jt.hessian(lambda A: 2 * linalg.sumlogdiag(linalg.potrf(A)))(A)
    inv = np.linalg.inv(A)
    np.testing.assert_allclose(H, symmetric_directions(-np.einsum("il,kj->ijkl", inv, inv), n), rtol=1e-10)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("lower", [True, False])
def test_hessian_of_a_triangular_solve_matches_torch(transpose, lower):
    rng = np.random.default_rng(6)
    n = 3
    L, b = tri(rng, (), n, lower), rng.normal(size=(n, 2))

    def f(L, b):
        return np.sum(linalg.trsm(L, b, transpose=transpose, lower=lower) ** 2)

    def f_torch(L):
        return (torch.linalg.solve_triangular(ttri(tmask(L, lower), transpose), torch.tensor(b),
                                              upper=(not lower) != transpose) ** 2).sum()

    H = jt.hessian(f)(L, b)
    H_torch = torch.func.hessian(f_torch)(torch.tensor(L)).numpy()
    mask = np.tril(np.ones((n, n))) if lower else np.triu(np.ones((n, n)))
    both = np.einsum("ij,kl->ijkl", mask, mask)  # the other triangle is never read
    np.testing.assert_allclose(H, H_torch * both, rtol=1e-9, atol=1e-10)


def test_hessian_of_sumlogdiag_matches_torch():
    rng = np.random.default_rng(7)
    A = spd(rng, (), 3)
    H = jt.hessian(linalg.sumlogdiag)(A)
    H_torch = torch.func.hessian(lambda A: torch.log(torch.diagonal(A)).sum())(torch.tensor(A)).numpy()
    np.testing.assert_allclose(H, H_torch, rtol=1e-12)


# ---------------------------------------------------------------------------- use and misuse
def test_operators_compute_on_arrays_and_trace_in_float32():
    rng = np.random.default_rng(8)
    A = spd(rng, (2,), 3).astype(np.float32)
    g = jt.grad(lambda A: np.sum(linalg.sumlogdiag(linalg.potrf(A))))(A)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, np.linalg.inv(A.astype(np.float64)) / 2, rtol=1e-4)


def test_not_positive_definite_names_the_operator_and_batch_index():
    A = np.stack([np.eye(2), -np.eye(2)])
    with pytest.raises(NotPositiveDefiniteError, match=r"potrf.*\(1,?\)"):
        jt.grad(lambda A: np.sum(linalg.sumlogdiag(linalg.potrf(A))))(A)


def test_mismatched_shapes_are_refused_while_tracing():
    with pytest.raises(ValueError, match=r"trsm.*\(3, 3\).*\(4, 2\)"):
        jt.grad(lambda L, B: np.sum(linalg.trsm(L, B)))(np.eye(3), np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"potrf.*square.*\(2, 3\)"):
        jt.grad(lambda A: np.sum(linalg.potrf(A)))(np.ones((2, 3)))


def test_jacobian_through_an_operator_is_written_out_by_applications():
    """A Jacobian through potrf: one pullback per output element (n² = 9 here)."""
    rng = np.random.default_rng(9)
    A = spd(rng, (), 3)
    J = jt.jacobian(linalg.potrf)(A)
    J_torch = torch.func.jacrev(torch.linalg.cholesky)(torch.tensor(A)).numpy()
    sym_in = (J_torch + J_torch.transpose(0, 1, 3, 2)) / 2
    np.testing.assert_allclose(J, sym_in, rtol=1e-9, atol=1e-12)


def test_jacobian_with_few_inputs_is_written_out_by_pushforwards():
    """Three inputs, nine outputs: three pushforwards (one-hot tangents), checked against torch."""
    rng = np.random.default_rng(10)
    A, V = spd(rng, (), 3), rng.normal(size=(3, 3))

    def f(x, A, V):
        return linalg.potrf(A + np.outer(V @ x, V @ x))

    x = rng.normal(size=3) * 0.1
    J = jt.jacobian(f)(x, A, V)
    J_torch = torch.func.jacfwd(lambda x: torch.linalg.cholesky(
        torch.tensor(A) + torch.outer(torch.tensor(V) @ x, torch.tensor(V) @ x)))(torch.tensor(x)).numpy()
    np.testing.assert_allclose(J, J_torch, rtol=1e-9, atol=1e-12)


def test_jacobian_too_large_to_write_out_is_refused_with_advice():
    """getrs's pivots are integers: shared by a batch of cotangents they cannot be spread along
    it, so its pullback is applied once per cotangent, and past UNROLL_LIMIT that is refused."""
    from jacacc.errors import UnsupportedOperationError

    rng = np.random.default_rng(11)
    A, B = spd(rng, (), 70), rng.standard_normal((70, 70))
    with pytest.raises(UnsupportedOperationError, match="through getrs takes 4900 applications.*use vjp or jvp"):
        jt.jacobian(lambda B: linalg.gesv(A, B))(B)


def test_jacobian_through_a_batched_operator_past_the_unroll_limit(monkeypatch):
    """potrf's pullback (trsm) has a batching rule: the 36 cotangents of a 6 × 6 factor's Jacobian,
    more than UNROLL_LIMIT (lowered to 16 here), go through it as one batch — with getrs's shared
    pivots the same Jacobian is refused; entries checked by central differences."""
    from jacacc.tensor import batching

    monkeypatch.setattr(batching, "UNROLL_LIMIT", 16)
    n = 6
    A = spd(np.random.default_rng(12), (), n)
    J = jt.jacobian(linalg.potrf)(A)
    for i in range(n):
        for j in range(i + 1):  # a symmetric change of A: entries (i, j) and (j, i)
            E = np.zeros((n, n))
            E[i, j] = E[j, i] = 1e-6
            central = (np.linalg.cholesky(A + E) - np.linalg.cholesky(A - E)) / 2e-6
            directional = J[:, :, i, j] + (J[:, :, j, i] if i != j else 0)
            np.testing.assert_allclose(directional, central, atol=1e-8)


MISSHAPEN = [
    ("gemm2", lambda A, B: np.sum(linalg.gemm2(A, B)), (np.ones((2, 3)), np.ones((4, 2))),
     r"gemm2: op\(A\) is 2 x 3 and op\(B\) is 4 x 2"),
    ("gemm C", lambda A, B, C: np.sum(linalg.gemm(A, B, C)), (np.ones((2, 3)), np.ones((3, 2)), np.ones((3, 3))),
     r"gemm: C must have shape \(2, 2\)"),
    ("gemm batch", lambda A, B, C: np.sum(linalg.gemm(A, B, C)),
     (np.ones((2, 2, 3)), np.ones((3, 3, 2)), np.ones((2, 2, 2))), r"gemm: A and B .* same batch"),
    ("syrk vector", lambda A: np.sum(linalg.syrk(A)), (np.ones(3),), r"syrk: A must be a matrix"),
    ("trmm non-square", lambda A, B: np.sum(linalg.trmm(A, B)), (np.ones((2, 3)), np.ones((3, 2))),
     r"trmm: A must be a square"),
    ("trmm rows", lambda A, B: np.sum(linalg.trmm(A, B)), (np.ones((3, 3)), np.ones((2, 2))), r"trmm: op\(A\)"),
    ("sumlogdiag", lambda A: np.sum(linalg.sumlogdiag(A)), (np.ones((2, 3)),), r"sumlogdiag: A must be a square"),
    ("potri", lambda L: np.sum(linalg.potri(L)), (np.ones((2, 3)),), r"potri: A must be a square"),
]


@pytest.mark.parametrize("case", MISSHAPEN, ids=[c[0] for c in MISSHAPEN])
def test_misshapen_operands_are_refused_naming_the_operator(case):
    _, f, args, message = case
    with pytest.raises(ValueError, match=message):
        jt.grad(f)(*args)


# ---------------------------------------------------------------------------- in place
def _overwrites(program):
    return [(step[2][0].name, sorted(k for k in step[2][1] if k.startswith("overwrite")))
            for step in program._steps if step[1] == "op"]


def test_potrf_pullback_solves_in_place():
    """Paper 004 works in place: both triangular solves of potrf's pullback overwrite their
    right-hand side, which nothing reads afterwards — and the gradient is unchanged."""
    from jacacc.tensor.evaluate import Program

    rng = np.random.default_rng(12)
    A, W = spd(rng, (2,), 4), rng.normal(size=(2, 4, 4))
    f = lambda A, W: np.sum(W * linalg.potrf(A))  # noqa: E731
    d = jt.derivative_expression(f, A, W, order=1, mode="reverse")
    program = Program([d.expression], d.inputs)
    assert ("trsm", ["overwrite_b"]) in _overwrites(program)
    want = torch.tensor(A, requires_grad=True)
    (torch.tensor(W) * torch.linalg.cholesky(want)).sum().backward()
    np.testing.assert_allclose(program(A, W)[0], sym(want.grad.numpy()), rtol=1e-10)


def test_an_argument_still_viewed_later_is_not_overwritten():
    """M feeds a solve and, through a transposed view created before it, a function evaluated
    after it: the solve must not overwrite M."""
    from jacacc.linalg.blas_cholesky import transposed, trsm
    from jacacc.tensor.evaluate import Program
    from jacacc.tensor.expr import einsum, unary, var

    rng = np.random.default_rng(13)
    L, C = tri(rng, (), 3, True), rng.normal(size=(3, 3))
    Lv, Cv = var("L", (3, 3)), var("C", (3, 3))
    M = einsum("ij,kj->ik", Cv, Cv)
    Mt = transposed(M)
    later = Program([unary("exp", Mt), trsm(Lv, M), unary("sin", Mt)], [Lv, Cv], fuse=False)
    assert _overwrites(later) == [("trsm", [])]
    e, x, s = later(L, C)
    Mn = C @ C.T
    np.testing.assert_allclose(s, np.sin(Mn.T), rtol=1e-14)
    np.testing.assert_allclose(x, np.linalg.solve(L, Mn), rtol=1e-10)
    earlier = Program([unary("exp", Mt), trsm(Lv, M)], [Lv, Cv], fuse=False)
    assert _overwrites(earlier) == [("trsm", ["overwrite_b"])]
    np.testing.assert_allclose(earlier(L, C)[1], np.linalg.solve(L, Mn), rtol=1e-10)
