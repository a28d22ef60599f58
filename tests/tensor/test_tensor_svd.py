"""``np.linalg.svd``, ``svdvals``, ``qr``, ``pinv`` and the singular-value norms inside functions
differentiated by jacacc.tensor (jacacc/linalg/svd.py, jacacc/tensor/numpy_linalg.py).

Values against NumPy's (bit for bit for the SVD and tall or square QR: LAPACK's signs are kept;
``jacacc.linalg.svd``'s own default normalizes them), and gradients, Hessians (dense and compressed),
Jacobians, pushforwards and pullbacks against ``jax.grad`` / ``jax.hessian`` / ``jax.jacrev`` /
``jax.jvp`` / ``jax.vjp`` of the same function written with ``jax.numpy`` (float64, rtol 1e-8) on
tall, wide, square and batched matrices, in the forward, reverse and cross-country modes; the
clamp at repeated singular values and the gap-free derivative of the singular values alone; the
refused forms, each in one line.

JAX's factors carry the signs of its own LAPACK calls, which may differ from NumPy's column by
column; its references are aligned to NumPy's by a constant sign per column, computed at the point
of evaluation, whose derivative is zero (as in test_tensor_numpy_linalg.py for eigenvectors).  The JAX references are compiled with XLA's backend
optimizations off: the values are the same and the compilations, which dominate this file's time,
take half as long.
"""

from __future__ import annotations

import warnings

import jax_reference
import linalg_checks
import numpy as np
import pytest
from linalg_checks import check_matrix_valued_against_jax

import jacacc.tensor as jt
from jacacc.errors import TraceError, UnsupportedOperationError
from jacacc.tensor.expr import nodes_of

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

pytestmark = pytest.mark.usefixtures("float64_jax")

RTOL = 1e-8
MODES = ["forward", "reverse", "cross_country"]


def close(got, want, rtol=RTOL, what=""):
    linalg_checks.close(got, want, rtol, what)


# ---------------------------------------------------------------------------- inputs and signs
def with_singular_values(rng, batch, m, n, values=None):
    """``U₀·diag(values)·V₀ᵀ`` with random orthonormal U₀, V₀: singular values 3, 2, 1, … by
    default, well separated (so the singular vectors' derivatives are well conditioned) and away
    from zero (so is R⁻¹ of QR)."""
    k = min(m, n)
    values = np.linspace(3.0, 1.0, k) if values is None else np.asarray(values, dtype=float)
    U0 = np.linalg.qr(rng.normal(size=(*batch, m, k)))[0]
    V0 = np.linalg.qr(rng.normal(size=(*batch, n, k)))[0]
    return (U0 * values) @ np.swapaxes(V0, -1, -2)


def svd_signs(A):
    """Per column of JAX's U at A, the sign that makes it NumPy's, shape (..., 1, k): ``U * d`` and
    ``Vh * dᵀ`` are NumPy's factors (the columns agree up to sign, so ``Σ U_jax·U_np`` is ±1)."""
    U = np.asarray(jnp.linalg.svd(jnp.asarray(A), full_matrices=False)[0])
    U_np = np.linalg.svd(A, full_matrices=False)[0]
    return np.sign(np.sum(U * U_np, axis=-2, keepdims=True))


def qr_signs(A):
    """Per column of JAX's Q at A, the sign that makes it NumPy's, shape (..., k): NumPy's
    factors are ``Q * d[..., None, :]`` and ``R * d[..., :, None]``."""
    R = np.asarray(jnp.linalg.qr(jnp.asarray(A))[1])
    R_np = np.linalg.qr(A)[1]
    return np.sign(np.diagonal(R, axis1=-2, axis2=-1) * np.diagonal(R_np, axis1=-2, axis2=-1))


def svd_of(A, xp, d):
    """The thin SVD with NumPy's signs, in NumPy (traced: jacacc's) or JAX (aligned by ``d``)."""
    U, s, Vh = xp.linalg.svd(A, full_matrices=False)
    if xp is np:
        return U, s, Vh
    return U * d, s, Vh * np.swapaxes(d, -1, -2)


def qr_of(A, xp, d):
    Q, R = xp.linalg.qr(A)
    if xp is np:
        return Q, R
    return Q * d[..., None, :], R * d[..., :, None]


# ---------------------------------------------------------------------------- scalar functions, one per factorization and shape
SHAPES = {"tall": (), "wide": (), "square": (), "batched": (2,)}
SIZES = {"tall": (4, 3), "wide": (3, 4), "square": (3, 3), "batched": (4, 3)}


def _cases():
    rng = np.random.default_rng(40)
    cases = []
    for label, batch in SHAPES.items():
        m, n = SIZES[label]
        k = min(m, n)
        A = with_singular_values(rng, batch, m, n)
        Wu, Wv = rng.normal(size=(*batch, m, k)), rng.normal(size=(*batch, k, n))
        Wp, C = rng.normal(size=(*batch, n, m)), rng.normal(size=(*batch, k))
        ds, dq = svd_signs(A), qr_signs(A)

        def svd_loss(A, xp, ds=ds, Wu=Wu, Wv=Wv, C=C):
            U, s, Vh = svd_of(A, xp, ds)
            return (xp.sum(C * s ** 3) + xp.sum(Wu * U) + xp.sum(Wv * Vh) + xp.sum((U * Wu) ** 2)
                    + xp.sum(xp.sin((U * s[..., None, :]) @ Vh)))       # U·diag(s)·Vh = A

        def qr_loss(A, xp, dq=dq, Wu=Wu, Wv=Wv):
            Q, R = qr_of(A, xp, dq)
            diagonal = xp.diagonal(R, axis1=-2, axis2=-1)                # nonzero: A has full rank
            return (xp.sum(Wu * Q) + xp.sum(Wv * R) + xp.sum(xp.log(xp.abs(diagonal)))
                    + xp.sum(xp.linalg.qr(A, mode="r") ** 2) + xp.sum(xp.tanh(Q @ R)))

        def pinv_loss(A, xp, Wp=Wp):
            P = xp.linalg.pinv(A)
            return xp.sum(Wp * P) + xp.sum(xp.sin(P) ** 2)

        cases += [(f"svd {label}", svd_loss, A), (f"qr {label}", qr_loss, A), (f"pinv {label}", pinv_loss, A)]

    G = with_singular_values(rng, (), 4, 3, [2.5, 1.5, 0.5])
    Gb = with_singular_values(rng, (2,), 3, 4, [3.0, 1.5, 0.5])
    Cb = rng.normal(size=(2, 3))

    def norms(A, xp):
        return (xp.linalg.norm(A, 2) + xp.linalg.norm(A, -2) ** 2 + xp.linalg.norm(A, "nuc") ** 2
                + xp.sum(xp.linalg.svdvals(A) ** 3) + xp.sum(xp.exp(xp.linalg.svd(A, compute_uv=False)))
                + xp.linalg.matrix_norm(A, ord="nuc") + xp.linalg.norm(xp.sin(A), 2, axis=(1, 0)) ** 2)

    def batched_norms(A, xp):
        return (xp.sum(xp.linalg.norm(A, "nuc", axis=(-2, -1)) ** 2)
                + xp.sum(Cb * xp.linalg.norm(A, 2, axis=(2, 0), keepdims=True)[0, :, 0])
                + xp.sum(xp.linalg.matrix_norm(A, ord=-2, keepdims=True) ** 3)
                + xp.sum(Cb[:, :1] * xp.linalg.svdvals(A) ** 2))

    cases += [("norms ord 2, -2, nuc, svdvals, compute_uv=False", norms, G),
              ("norms of batches: axis pairs, keepdims, matrix_norm", batched_norms, Gb)]
    return cases


CASES = _cases()
_REFERENCES: dict[str, tuple] = {}


def reference(case):
    """JAX's value, gradient and Hessian of the case (one compilation per case, cached)."""
    name, f, A = case
    if name not in _REFERENCES:
        g = lambda A: f(A, xp=jnp)  # noqa: E731
        both = jax_reference.jit(lambda A: (g(A), jax.grad(g)(A), jax.hessian(g)(A)))
        _REFERENCES[name] = tuple(np.asarray(r) for r in both(jnp.asarray(A)))
    return _REFERENCES[name]


def ours(f):
    return lambda A: f(A, xp=np)


@pytest.mark.parametrize("case", [pytest.param(c, id=c[0], marks=() if k % 2 == 0 else pytest.mark.exhaustive)
                                  for k, c in enumerate(CASES)])
def test_value_gradient_and_compressed_hessian_match_jax(case):  # every other case here; each in some mode below
    name, f, A = case
    value, gradient, hessian = reference(case)
    got_value, got_grad = jt.value_and_grad(ours(f))(A)
    close(got_value, value, rtol=1e-12, what="value")
    close(got_grad, gradient, what="gradient")
    close(jt.hessian(ours(f), compress=True)(A).dense(), hessian, what="compressed hessian")


def sampled_modes(cases):
    """Every (case, mode) pair: one mode per case, in turn, in ``make test``; the others in the
    ``exhaustive`` tier (the compressed Hessian above checks every case in the default mode too)."""
    return [pytest.param(case, mode, id=f"{case[0]}-{mode}",
                         marks=() if k % len(MODES) == m else pytest.mark.exhaustive)
            for k, case in enumerate(cases) for m, mode in enumerate(MODES)]


@pytest.mark.parametrize("case, mode", sampled_modes(CASES))
def test_every_mode_gives_jax_gradient_and_hessian(case, mode):
    name, f, A = case
    _, gradient, hessian = reference(case)
    close(jt.grad(ours(f), mode=mode)(A), gradient, what=f"{name} gradient, {mode}")
    close(jt.hessian(ours(f), mode=mode)(A), hessian, what=f"{name} hessian, {mode}")


def test_the_cases_cover_every_function_and_shape():
    names = [c[0] for c in CASES]
    for kind in ("svd", "qr", "pinv"):
        assert {n.split()[1] for n in names if n.startswith(kind + " ")} == set(SHAPES)


# ---------------------------------------------------------------------------- matrix-valued results
def _matrix_valued():
    rng = np.random.default_rng(41)
    T, Wd, S = (with_singular_values(rng, (), 4, 3), with_singular_values(rng, (), 3, 4),
                with_singular_values(rng, (), 3, 3))
    Tb, Wb = with_singular_values(rng, (2,), 4, 3), with_singular_values(rng, (2,), 3, 4)
    dT, dWd, dS, dTb = svd_signs(T), svd_signs(Wd), svd_signs(S), svd_signs(Tb)
    qT, qWd, qWb = qr_signs(T), qr_signs(Wd), qr_signs(Wb)
    return [
        ("svd U tall", lambda A, xp: svd_of(A, xp, dT)[0], T),
        ("svd Vh wide", lambda A, xp: svd_of(A, xp, dWd)[2], Wd),
        ("svd S square", lambda A, xp: xp.linalg.svd(A)[1], S),
        ("svd U·Vh square (full_matrices default)", lambda A, xp: svd_of(A, xp, dS)[0] @ svd_of(A, xp, dS)[2], S),
        ("svd U batched", lambda A, xp: svd_of(A, xp, dTb)[0], Tb),
        ("qr Q tall", lambda A, xp: qr_of(A, xp, qT)[0], T),
        ("qr R wide", lambda A, xp: qr_of(A, xp, qWd)[1], Wd),
        ("qr Q batched wide", lambda A, xp: qr_of(A, xp, qWb)[0], Wb),
        ("pinv batched", lambda A, xp: xp.linalg.pinv(A), Tb),
    ]


MATRIX_VALUED = _matrix_valued()


def matrix_reference(case):
    """A tangent, a cotangent, and JAX's Jacobian, value, pushforward and pullback (cached)."""
    name, f, A = case
    key = "matrix-valued " + name
    if key not in _REFERENCES:
        rng = np.random.default_rng(42)
        tangent = rng.normal(size=A.shape)
        g = lambda A: f(A, xp=jnp)  # noqa: E731
        cotangent = rng.normal(size=jax.eval_shape(g, jnp.asarray(A)).shape)
        refs = jax_reference.jit(lambda A, t, c: (jax.jacrev(g)(A), *jax.jvp(g, (A,), (t,)), jax.vjp(g, A)[1](c)[0]))
        _REFERENCES[key] = tangent, cotangent, *(np.asarray(r) for r in refs(A, tangent, cotangent))
    return _REFERENCES[key]


@pytest.mark.parametrize("case, mode", sampled_modes(MATRIX_VALUED))
def test_jacobian_jvp_and_vjp_match_jax(case, mode):
    _, f, A = case
    check_matrix_valued_against_jax(ours(f), A, matrix_reference(case), mode, close)


# ---------------------------------------------------------------------------- values: NumPy's, up to the sign rules
def traced(f, A):
    """``f(A)`` evaluated by jacacc (the value of a vjp), not by NumPy."""
    return jt.vjp(f, A)[0]


VALUE_SHAPES = [(4, 3), (3, 4), (3, 3), (2, 4, 3), (2, 1, 3, 5)]


@pytest.mark.parametrize("shape", VALUE_SHAPES, ids=str)
def test_svd_values_are_numpys(shape):
    A = np.random.default_rng(43).normal(size=shape)
    full = shape[-1] == shape[-2]    # NumPy's default full_matrices=True is the thin SVD for square matrices
    U = traced(lambda A: np.linalg.svd(A, full_matrices=full).U, A)
    s = traced(lambda A: np.linalg.svd(A, full_matrices=full).S, A)
    Vh = traced(lambda A: np.linalg.svd(A, full_matrices=full).Vh, A)
    U_np, s_np, Vh_np = np.linalg.svd(A, full_matrices=False)
    # NumPy's factors bit for bit, LAPACK's signs kept
    assert np.array_equal(U, U_np) and np.array_equal(s, s_np) and np.array_equal(Vh, Vh_np)
    close(traced(lambda A: np.linalg.svd(A, compute_uv=False), A), s_np, rtol=1e-13)
    close(traced(np.linalg.svdvals, A), s_np, rtol=1e-13)


@pytest.mark.parametrize("shape", VALUE_SHAPES, ids=str)
def test_qr_values_are_numpys(shape):
    A = np.random.default_rng(44).normal(size=shape)
    Q, R = traced(lambda A: np.linalg.qr(A).Q, A), traced(lambda A: np.linalg.qr(A).R, A)
    Q_np, R_np = np.linalg.qr(A)
    if shape[-2] >= shape[-1]:
        assert np.array_equal(Q, Q_np) and np.array_equal(R, R_np)        # NumPy's, LAPACK's signs kept
    else:  # a wide A: QR of its leading block, R's other columns Qᵀ times A's (rounding differs)
        close(Q, Q_np, rtol=1e-12)
        close(R, R_np, rtol=1e-12)
    assert np.all(np.tril(R[..., :, :R.shape[-2]], -1) == 0)
    close(traced(lambda A: np.linalg.qr(A, mode="r"), A), R, rtol=1e-15)
    if shape[-2] <= shape[-1]:   # 'complete' is 'reduced' unless A is tall
        close(traced(lambda A: np.linalg.qr(A, mode="complete").Q, A), Q, rtol=1e-15)


def test_pinv_and_norm_values_are_numpys():
    rng = np.random.default_rng(45)
    for shape in [(4, 3), (3, 4), (2, 3, 5)]:
        A = rng.normal(size=shape)
        close(traced(np.linalg.pinv, A), np.linalg.pinv(A), rtol=1e-12)
        for order in (2, -2, "nuc"):
            close(traced(lambda A, order=order: np.linalg.norm(A, order, axis=(-2, -1)), A),
                  np.linalg.norm(A, order, axis=(-2, -1)), rtol=1e-13)
    B = rng.normal(size=(2, 3, 4))
    close(traced(lambda B: np.linalg.norm(B, "nuc", axis=(2, 0), keepdims=True), B),
          np.linalg.norm(B, "nuc", axis=(2, 0), keepdims=True), rtol=1e-13)
    close(traced(lambda B: np.linalg.matrix_norm(B, ord=-2), B), np.linalg.matrix_norm(B, ord=-2), rtol=1e-13)
    # a rank-one matrix plus noise below the cutoff: the cutoff (rcond, rtol, NumPy 2's default) is NumPy's
    L = np.outer([1.0, 2.0, 3.0], [1.0, -1.0]) + 1e-9 * rng.normal(size=(3, 2))
    for options in ({}, {"rcond": 1e-6}, {"rtol": 1e-6}, {"rtol": None}):
        close(traced(lambda L, options=options: np.linalg.pinv(L, **options), L), np.linalg.pinv(L, **options),
              rtol=1e-12, what=str(options))


def test_float32_stays_float32():
    A = with_singular_values(np.random.default_rng(46), (), 4, 3).astype(np.float32)
    g = jt.grad(lambda A: np.sum(np.linalg.svd(A, full_matrices=False)[0] ** 4) + np.linalg.norm(A, "nuc")
                + np.sum(np.linalg.qr(A)[1] ** 2) + np.sum(np.linalg.pinv(A) ** 2))(A)
    assert g.dtype == np.float32
    A64 = A.astype(np.float64)
    want = jt.grad(lambda A: np.sum(np.linalg.svd(A, full_matrices=False)[0] ** 4) + np.linalg.norm(A, "nuc")
                   + np.sum(np.linalg.qr(A)[1] ** 2) + np.sum(np.linalg.pinv(A) ** 2))(A64)
    close(g, want, rtol=1e-4)


# ---------------------------------------------------------------------------- repeated singular values
def test_repeated_singular_values_clamp_singular_vector_derivatives_with_a_warning():
    """JAX's singular-vector derivative is inf/nan at a repeated singular value; jacacc clamps the
    gap (as syevd's eigengap) and warns.  The singular values' own derivative needs no gap."""
    A = np.diag([2.0, 2.0, 1.0])
    W = np.arange(9.0).reshape(3, 3)
    with pytest.warns(RuntimeWarning, match="repeated singular values"):
        g = jt.grad(lambda A: np.sum(W * np.linalg.svd(A)[0]))(A)
    assert np.all(np.isfinite(g))
    for mode in MODES:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            f = lambda A: np.sum(np.linalg.svdvals(A) ** 3) + np.linalg.norm(A, "nuc")  # noqa: E731
            close(jt.grad(f, mode=mode)(A), 3 * A @ A + np.eye(3), rtol=1e-14, what=mode)   # Σs³ = tr((AᵀA)^{3/2})


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_derivatives_of_singular_values_alone_never_build_the_gaps(mode):
    A = with_singular_values(np.random.default_rng(47), (2,), 4, 3)
    d = jt.derivative_expression(lambda A: np.sum(np.linalg.svd(A, compute_uv=False) ** 2), A, order=1, mode=mode)
    ops = {n.param[0] for n in nodes_of([d.expression]) if n.kind == "op"}
    assert "gesdd" in ops and "gesdd_gaps" not in ops, ops


def test_pinv_of_an_orthogonal_matrix_needs_no_gaps():
    """All singular values equal: the SVD's vectors are not unique, but pinv is smooth there and its
    derivative (Golub–Pereyra, in P alone) is exact, with no warning: the inverse's."""
    Q = np.linalg.qr(np.random.default_rng(48).normal(size=(3, 3)))[0]
    W = np.arange(9.0).reshape(3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = jt.grad(lambda A: np.sum(W * np.linalg.pinv(A)))(Q)
        h = jt.hessian(lambda A: np.sum(W * np.linalg.pinv(A)))(Q)
    close(g, jt.grad(lambda A: np.sum(W * np.linalg.inv(A)))(Q), rtol=1e-13)
    close(h, jt.hessian(lambda A: np.sum(W * np.linalg.inv(A)))(Q), rtol=1e-12)


# ---------------------------------------------------------------------------- batching rule
def test_the_operators_take_a_batch_whole():
    from jacacc.linalg.svd import gesdd, pinv, qr
    from jacacc.tensor.batching import batched
    from jacacc.tensor.evaluate import Program
    from jacacc.tensor.expr import var

    A, As = var("A", (4, 3)), var("A_batch", (2, 4, 3))
    roots = [*gesdd(A), *qr(A), pinv(A)]
    out = batched(roots, {A: As}, (2,))
    names = [n.param[0] for n in nodes_of(out) if n.kind == "op"]
    assert sorted(set(names)) == ["gesdd", "pinv", "qr"] and len(names) == 6, names   # no per-element unrolling
    x = np.random.default_rng(49).normal(size=(2, 4, 3))
    got = Program(out, [As])(x)
    for element in range(2):
        want = Program(roots, [A])(x[element])
        for g, w in zip(got, want, strict=True):
            close(g[element], w, rtol=1e-15)


# ---------------------------------------------------------------------------- refused forms
REFUSED = [
    (UnsupportedOperationError, lambda A: np.sum(np.linalg.svd(A)[1]), (4, 3),
     ["np.linalg.svd", "full_matrices=True", "(4, 3)", "full_matrices=False"]),
    (UnsupportedOperationError, lambda A: np.sum(np.linalg.svd(A, full_matrices=True)[0]), (3, 4),
     ["np.linalg.svd", "full_matrices=True", "(3, 4)"]),
    (UnsupportedOperationError, lambda A: np.sum(np.linalg.svd(A, hermitian=True)[1]), (3, 3),
     ["np.linalg.svd", "hermitian=True", "hermitian=False"]),
    (UnsupportedOperationError, lambda A: np.sum(np.linalg.pinv(A, hermitian=True)), (3, 3),
     ["np.linalg.pinv", "hermitian=True"]),
    (UnsupportedOperationError, lambda A: np.sum(np.linalg.qr(A, mode="complete")[0]), (4, 3),
     ["np.linalg.qr", "mode='complete'", "(4, 3)", "mode='reduced'"]),
    (UnsupportedOperationError, lambda A: np.sum(np.linalg.qr(A, mode="raw")[0]), (4, 3),
     ["np.linalg.qr", "mode='raw'", "mode='reduced'"]),
    (TraceError, lambda A: np.sum(np.linalg.qr(A, mode="thin")[0]), (4, 3), ["np.linalg.qr", "'thin'"]),
    (TraceError, lambda A: np.sum(np.linalg.svd(A, full_matrices=False)[1]), (3,),
     ["np.linalg.svd", "matrix", "(3,)"]),
    (TraceError, lambda A: np.sum(np.linalg.svdvals(A)), (3,), ["np.linalg.svdvals", "(3,)"]),
    (TraceError, lambda A: np.sum(np.linalg.qr(A)[1]), (3,), ["np.linalg.qr", "(3,)"]),
    (TraceError, lambda A: np.sum(np.linalg.pinv(A)), (3,), ["np.linalg.pinv", "(3,)"]),
    (TraceError, lambda A: np.sum(np.linalg.pinv(A, rcond=np.array([1e-3, 1e-3]))), (2, 3, 3),
     ["np.linalg.pinv", "real number"]),
    (TraceError, lambda A: np.sum(np.linalg.pinv(A, rcond=1e-3, rtol=1e-3)), (3, 3),
     ["np.linalg.pinv", "rtol", "rcond"]),
]


@pytest.mark.parametrize("error, f, shape, words", REFUSED, ids=[
    "svd full_matrices default, tall", "svd full_matrices, wide", "svd hermitian", "pinv hermitian",
    "qr complete, tall", "qr raw", "qr unknown mode", "svd of a vector", "svdvals of a vector", "qr of a vector",
    "pinv of a vector", "pinv array rcond", "pinv rcond and rtol"])
def test_refused_forms_are_named_in_one_line(error, f, shape, words):
    with pytest.raises(error) as info:
        jt.grad(f)(np.ones(shape) + (np.eye(*shape[-2:]) if len(shape) > 1 else 0.0))
    message = str(info.value)
    assert all(w in message for w in words), message
    assert "\n" not in message
