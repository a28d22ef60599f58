"""``np.linalg`` inside functions differentiated by jacacc.tensor (jacacc/tensor/numpy_linalg.py, paper 004 §4).

solve, inv, slogdet, det, cholesky, eigh, eigvalsh, norm, vector_norm and matrix_norm
against ``jax.grad`` / ``jax.hessian`` / ``jax.jacrev`` / ``jax.jvp`` / ``jax.vjp`` of the
same function written with ``jax.numpy`` (float64, rtol 1e-9): gradients and compressed
Hessians in every mode of ``jt.modes()``, Jacobians, pushforwards and pullbacks of
matrix-valued results, batches and broadcasting, hypothesis-drawn sizes, the Gaussian
log-likelihood ``-(log|K| + rᵀK⁻¹r)/2`` with K built from the parameters, and the errors
(non-square input, singular matrices, unsupported functions named).

Conventions checked (see the module's docstring): cholesky, eigh and eigvalsh are
differentiated as NumPy's functions of the triangle they read, so the JAX references
(:data:`JNP`) mirror that triangle before calling ``jnp.linalg`` (whose
``symmetrize_input=True`` would differentiate ``f((A + Aᵀ)/2)``); eigenvectors are NumPy's (LAPACK's signs) and are
compared after aligning JAX's column signs to NumPy's with a constant sign vector, whose
derivative is zero.
"""

from __future__ import annotations

import warnings

import jax_reference
import linalg_checks
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from linalg_checks import check_matrix_valued_against_jax

import jacacc.tensor as jt
from jacacc.errors import JacaccError, TraceError, UnsupportedOperationError
from jacacc.linalg.routines import SingularMatrixError
from jacacc.tensor.trace import trace

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

pytestmark = pytest.mark.usefixtures("float64_jax")

RTOL = 1e-9


def close(got, want, rtol=RTOL, what=""):
    linalg_checks.close(got, want, rtol, what)


def mirrored(a, lower=True):
    """The triangle of ``a`` NumPy's cholesky/eigh read (the diagonal included), mirrored: JAX."""
    n = a.shape[-1]
    read = jnp.tri(n, dtype=bool) if lower else ~jnp.tri(n, k=-1, dtype=bool)
    return jnp.where(read, a, jnp.swapaxes(a, -1, -2))


class _TriangleLinalg:
    """``jax.numpy.linalg`` whose ``cholesky``, ``eigh`` and ``eigvalsh`` read one triangle, as NumPy's do."""

    def __getattr__(self, name):
        return getattr(jnp.linalg, name)

    @staticmethod
    def cholesky(a, upper=False):
        return jnp.linalg.cholesky(mirrored(a, lower=not upper), upper=upper)

    @staticmethod
    def eigh(a, UPLO="L"):  # noqa: N803 - NumPy's name
        return jnp.linalg.eigh(mirrored(a, lower=UPLO == "L"))

    @staticmethod
    def eigvalsh(a, UPLO="L"):  # noqa: N803 - NumPy's name
        return jnp.linalg.eigvalsh(mirrored(a, lower=UPLO == "L"))


class _NumPysJax:
    """``jax.numpy`` with :class:`_TriangleLinalg`: the JAX spelling of the functions jacacc differentiates."""

    linalg = _TriangleLinalg()

    def __getattr__(self, name):
        return getattr(jnp, name)


JNP = _NumPysJax()


# ---------------------------------------------------------------------------- well-conditioned inputs
def general(rng, batch, n, negative=False):
    """A general square matrix (batch), condition number O(1): I·2√n plus Gaussian noise;
    ``negative`` flips the first row so that det < 0 (exercises slogdet's sign)."""
    A = rng.normal(size=(*batch, n, n)) + 2 * np.sqrt(n) * np.eye(n)
    if negative:
        A[..., 0, :] *= -1
    return A


def spd(rng, batch, n):
    """Symmetric positive definite with well-separated eigenvalues (1, 2, …, n, rotated),
    so eigenvector derivatives (1/(λ_i − λ_j)) are well conditioned too."""
    Q, _ = np.linalg.qr(rng.normal(size=(*batch, n, n)))
    return Q @ (np.arange(1.0, n + 1)[:, None] * np.swapaxes(Q, -1, -2))


def align_signs(A):
    """Per column of JAX's eigenvectors at A, the sign that makes it NumPy's: a constant, so
    ``v * s`` has JAX's derivative with NumPy's signs (the columns agree up to sign)."""
    v = np.asarray(jnp.linalg.eigh(jnp.asarray(A))[1])
    return np.sign(np.sum(v * np.linalg.eigh(A)[1], axis=-2, keepdims=True))


rng0 = np.random.default_rng(25)
N = 3
W = rng0.normal(size=(N, N))
B2 = rng0.normal(size=(N, 2))
b3 = rng0.normal(size=N)
C3 = np.arange(1.0, N + 1)


# Each case: id, f(*args, xp) written once for NumPy and jax.numpy, its arguments, the argument
# differentiated.  SIMPLE has one small function per np.linalg function and runs in every mode (the
# search-based modes — anneal, exhaustive — stay quick only on small graphs); VARIANTS sums the
# remaining options of several functions into one scalar function each (one JAX compilation per case)
# and runs in the default modes.
def _cases():
    rng = np.random.default_rng(26)
    G, Gneg, S = general(rng, (), N), general(rng, (), N, negative=True), spd(rng, (), N)
    Gb, Sb = general(rng, (2,), N), spd(rng, (2,), N)
    Bb = rng.normal(size=(2, N, 2))
    eig_signs = align_signs(S)
    x = rng.normal(size=(2, 4))
    x[0, 1] = x[0, 3] = -2.5  # ties for ord=±inf in each row (JAX shares the derivative equally)
    x[1, 0] = x[1, 2] = 0.125
    simple = [
        ("solve", lambda A, B, xp: xp.sum(xp.sin(xp.linalg.solve(A, B))), (G, B2), 0),
        ("inv", lambda A, xp: xp.sum(W * xp.tanh(xp.linalg.inv(A))), (G,), 0),
        ("slogdet, det < 0",
         lambda A, xp: xp.linalg.slogdet(A)[0] * xp.linalg.slogdet(A)[1] + xp.linalg.slogdet(A)[1] ** 2, (Gneg,), 0),
        ("det, det < 0", lambda A, xp: xp.linalg.det(A) ** 2 + xp.linalg.det(A), (Gneg,), 0),
        ("cholesky", lambda A, xp: xp.sum(W * xp.linalg.cholesky(A) ** 2), (S,), 0),
        ("eigh eigenvalues", lambda A, xp: xp.sum(C3 * xp.linalg.eigh(A)[0] ** 2), (S,), 0),
        ("eigh eigenvectors", lambda A, xp: xp.sum(W * xp.linalg.eigh(A)[1] * (1 if xp is np else eig_signs)),
         (S,), 0),
        ("eigvalsh UPLO=U", lambda A, xp: xp.sum(xp.exp(xp.linalg.eigvalsh(A, UPLO="U") / 4)), (S,), 0),
        ("norm ord=inf", lambda A, xp: xp.linalg.norm(A @ b3, np.inf) ** 2, (G,), 0),
        ("vector_norm ord=3", lambda A, xp: xp.linalg.vector_norm(A, ord=3) ** 2, (G,), 0),
        ("matrix_norm ord=1", lambda A, xp: xp.sum(xp.linalg.matrix_norm(A, ord=1) ** 2), (Gb,), 0),
    ]
    variants = [
        ("solve wrt b", lambda A, B, xp: xp.sum(xp.sin(xp.linalg.solve(A, B))), (G, B2), 1),
        ("solve: vector b, a broadcast to b's batch, a traced twice",
         lambda A, xp: (xp.sum(xp.linalg.solve(A, b3) ** 2) + xp.sum(xp.tanh(xp.linalg.solve(A, Bb)))
                        + xp.sum(xp.linalg.solve(A, A @ A.T))), (G,), 0),
        ("batched: solve with vector b and with b broadcast to a's batch, inv, slogdet, det",
         lambda A, xp: (xp.sum(xp.linalg.solve(A, b3) ** 2) + xp.sum(xp.tanh(xp.linalg.solve(A, B2)))
                        + xp.sum(xp.linalg.inv(A) ** 3) + xp.sum(xp.linalg.slogdet(A)[1] * C3[:2])
                        + xp.sum(xp.linalg.det(A) ** 2)), (Gb,), 0),
        ("symmetric batched: cholesky upper and lower, eigh UPLO=U, eigenvectors squared",
         lambda A, xp: (xp.sum(xp.sin(xp.linalg.cholesky(A, upper=True))) + xp.sum(xp.log(xp.linalg.cholesky(A) ** 2
                                                                                          + 1))
                        + xp.sum(xp.linalg.eigh(A, UPLO="U")[0] ** 3) + xp.sum(xp.linalg.eigh(A)[1] ** 4)), (Sb,), 0),
        ("solve with Cholesky factors (triangular solves), batched, upper, a matrix b",
         lambda A, xp: (xp.sum(xp.linalg.solve(xp.linalg.cholesky(A).swapaxes(-1, -2),
                                               xp.linalg.solve(xp.linalg.cholesky(A), Bb)) ** 2)
                        + xp.sum(xp.sin(xp.linalg.solve(xp.linalg.cholesky(A, upper=True), Bb[0])))), (Sb,), 0),
        ("norm of vectors: ord None, 1, ±inf, 3, 0.5",
         lambda A, xp: (xp.linalg.norm(A @ b3) + xp.linalg.norm(A @ b3, 1) ** 2 + xp.linalg.norm(A @ b3, np.inf) ** 2
                        + xp.linalg.norm(A @ b3, -np.inf) ** 2 + xp.linalg.norm(A @ b3, 3)
                        + xp.linalg.norm(A @ b3 + 10, 0.5)), (G,), 0),
        ("norm of matrices: Frobenius, 'fro', ord ±1, ±inf, axis, keepdims",
         lambda A, xp: (xp.linalg.norm(xp.sin(A)) + xp.linalg.norm(xp.sin(A), "fro") ** 3 + xp.linalg.norm(A, 1) ** 2
                        + xp.linalg.norm(A, -1) ** 2 + xp.linalg.norm(A @ A, np.inf) ** 2
                        + xp.linalg.norm(A, -np.inf) ** 2
                        + xp.sum(W * xp.linalg.norm(A @ A.T, axis=0, keepdims=True) ** 3)
                        + xp.sum(C3 * xp.linalg.norm(xp.sin(A), 1, axis=-1) ** 2)), (G,), 0),
        ("norms of batches: 3-d arrays, axis pairs, keepdims, vector_norm and matrix_norm",
         lambda A, xp: (xp.linalg.norm(xp.sin(A)) + xp.sum(xp.linalg.norm(A, np.inf, axis=(2, 0), keepdims=True) ** 2)
                        + xp.sum(C3[:2] * xp.linalg.norm(A, axis=(1, 2)) ** 3)
                        + xp.sum(xp.linalg.vector_norm(A, axis=(0, 2), keepdims=True, ord=np.inf) ** 2)
                        + xp.sum(xp.linalg.matrix_norm(xp.sin(A), keepdims=True) * C3)), (Gb,), 0),
        ("norm ±inf with ties",
         lambda x, xp: xp.sum(xp.linalg.norm(x, np.inf, axis=1) ** 2) + xp.sum(xp.linalg.norm(x, -np.inf, axis=1)),
         (x,), 0),
    ]
    return simple, variants


SIMPLE, VARIANTS = _cases()
CASES = SIMPLE + VARIANTS
_REFERENCES: dict[str, tuple] = {}


def _function(case):
    return case[0].split()[0].rstrip(",:")


def reference(case):
    """JAX's value, gradient and Hessian of the case (one jit compilation per case, cached)."""
    name, f, args, argnum = case
    if name not in _REFERENCES:
        g = lambda *a: f(*a, xp=JNP)  # noqa: E731
        both = jax_reference.jit(lambda *a: (g(*a), jax.grad(g, argnums=argnum)(*a), jax.hessian(g, argnums=argnum)(*a)))
        _REFERENCES[name] = tuple(np.asarray(r) for r in both(*(jnp.asarray(a) for a in args)))
    return _REFERENCES[name]


def ours(f):
    return lambda *a: f(*a, xp=np)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_value_gradient_and_hessian_match_jax(case):
    name, f, args, argnum = case
    value, gradient, hessian = reference(case)
    close(ours(f)(*args), value, rtol=1e-12, what="NumPy's own value")
    got_value, got_grad = jt.value_and_grad(ours(f), argnum=argnum)(*args)
    close(got_value, value, rtol=1e-12, what="value")
    close(got_grad, gradient, what="gradient")
    close(jt.hessian(ours(f), argnum=argnum)(*args), hessian, what="hessian")


# The Hessian graph of syevd's eigenvectors has 18 intermediates: exhaustive refuses more than 16
# (OrderError, by design); anneal runs to its 10 s limit past 12 (its exact DP's size), as on the
# Hessians of cholesky and eigvalsh, whose triangle NumPy reads is mirrored first.  Their gradients
# are still checked in these modes, their Hessians in every other.
_LARGE_HESSIAN = {("eigh eigenvectors", "exhaustive"), ("eigh eigenvectors", "anneal"), ("cholesky", "anneal"),
                  ("eigvalsh UPLO=U", "anneal")}


def _sampled(modes):
    """The modes, the preaccumulation variants (``preaccumulation``'s own halves and its chain
    rule, one code path with it) in the exhaustive tier only."""
    variants = ("forward_preaccumulation", "reverse_preaccumulation", "chain_preaccumulation")
    return [pytest.param(m, marks=pytest.mark.exhaustive) if m in variants else m for m in modes]


# CP-SAT proving its order on eigh's 18-intermediate Hessian graph takes 40 s: in the exhaustive tier
_SLOW_PAIRS = {("eigh eigenvectors", "optimal")}


def _case_modes() -> list:
    variants = {p.values[0] for p in _sampled(jt.modes()) if not isinstance(p, str)}
    return [pytest.param(case, mode, id=f"{case[0]}-{mode}",
                         marks=[pytest.mark.exhaustive] if mode in variants or (case[0], mode) in _SLOW_PAIRS else [])
            for mode in jt.modes() for case in SIMPLE]


@pytest.mark.parametrize("case, mode", _case_modes())
def test_every_mode_gives_jax_gradient_and_compressed_hessian(case, mode):
    name, f, args, argnum = case
    _, gradient, hessian = reference(case)
    close(jt.grad(ours(f), argnum=argnum, mode=mode)(*args), gradient, what=f"{name} gradient, {mode}")
    if (name, mode) in _LARGE_HESSIAN:
        return
    compressed = jt.hessian(ours(f), argnum=argnum, mode=mode, compress=True)(*args)
    close(compressed.dense(), hessian, what=f"{name} compressed hessian, {mode}")


def test_every_function_runs_in_every_mode():
    assert {_function(c) for c in SIMPLE} == {"solve", "inv", "slogdet", "det", "cholesky", "eigh", "eigvalsh",
                                              "norm", "vector_norm", "matrix_norm"}


# ---------------------------------------------------------------------------- matrix-valued results
def _matrix_valued():
    rng = np.random.default_rng(27)
    G, Gb, S, Sb = general(rng, (), N), general(rng, (2,), N), spd(rng, (), N), spd(rng, (2,), N)
    signs = align_signs(S)
    return [
        ("solve", lambda A, xp: xp.linalg.solve(A, B2), G),
        ("solve vector", lambda A, xp: xp.linalg.solve(A, b3), Gb),
        ("inv", lambda A, xp: xp.linalg.inv(A), Gb),
        ("slogdet sign", lambda A, xp: xp.linalg.slogdet(A)[0] * xp.ones(2), Gb),
        ("slogdet logabsdet", lambda A, xp: xp.linalg.slogdet(A)[1], Gb),
        ("det", lambda A, xp: xp.linalg.det(A), Gb),
        ("cholesky", lambda A, xp: xp.linalg.cholesky(A), Sb),
        ("eigh eigenvalues", lambda A, xp: xp.linalg.eigh(A)[0], Sb),
        ("eigh eigenvectors", lambda A, xp: xp.linalg.eigh(A)[1] * (1 if xp is np else signs), S),
        ("norm axis keepdims", lambda A, xp: xp.linalg.norm(A, axis=1, keepdims=True), G),
        ("matrix_norm ord=inf", lambda A, xp: xp.linalg.matrix_norm(A, ord=np.inf), Gb),
    ]


MATRIX_VALUED = _matrix_valued()


def matrix_reference(case):
    """A symmetric tangent (the directions cholesky/eigh are defined on), a cotangent, and JAX's
    Jacobian, value, pushforward and pullback (one jit compilation per case, cached)."""
    name, f, A = case
    key = "matrix-valued " + name
    if key not in _REFERENCES:
        rng = np.random.default_rng(28)
        tangent = rng.normal(size=A.shape)
        tangent = tangent + np.swapaxes(tangent, -1, -2)
        g = lambda A: f(A, xp=JNP)  # noqa: E731
        cotangent = rng.normal(size=jax.eval_shape(g, jnp.asarray(A)).shape)
        refs = jax_reference.jit(lambda A, t, c: (jax.jacrev(g)(A), *jax.jvp(g, (A,), (t,)), jax.vjp(g, A)[1](c)[0]))
        _REFERENCES[key] = tangent, cotangent, *(np.asarray(r) for r in refs(A, tangent, cotangent))
    return _REFERENCES[key]


@pytest.mark.parametrize("mode", ["forward", "reverse", "cross_country"])
@pytest.mark.parametrize("case", MATRIX_VALUED, ids=[c[0] for c in MATRIX_VALUED])
def test_jacobian_jvp_and_vjp_match_jax(case, mode):
    _, f, A = case
    check_matrix_valued_against_jax(ours(f), A, matrix_reference(case), mode, close)


# ---------------------------------------------------------------------------- hypothesis-drawn sizes
def every_function(G, S, B, xp):
    """One scalar function through every np.linalg function: general G (solve, inv, slogdet, det,
    norm), symmetric positive definite S (cholesky, eigh), constant B."""
    return (xp.sum(xp.sin(xp.linalg.solve(G, B))) + xp.sum(B[..., :1] * xp.linalg.inv(G) ** 2)
            + xp.sum(xp.linalg.slogdet(G)[1] ** 2) + xp.sum(xp.linalg.det(G) ** 2)
            + xp.sum(xp.linalg.norm(xp.sin(G), 1, axis=-2) ** 2) + xp.sum(xp.linalg.norm(G, axis=-1) ** 3)
            + xp.sum(xp.linalg.cholesky(S) ** 3)
            + xp.sum(xp.linalg.eigh(S)[0] ** 3) + xp.sum(xp.linalg.eigh(S)[1] ** 4))


@pytest.mark.exhaustive  # drawn sizes again: the fixed-size tests above cover every function in make test
@settings(max_examples=3, deadline=None, derandomize=True)
@given(n=st.integers(1, 4), batch=st.sampled_from([(), (2,), (1, 2)]), seed=st.integers(0, 2**16))
def test_drawn_sizes_match_jax(n, batch, seed):
    rng = np.random.default_rng(seed)
    G, S, B = general(rng, batch, n, negative=bool(seed % 2)), spd(rng, batch, n), rng.normal(size=(*batch, n, 2))
    g = lambda G, S: every_function(G, S, B, JNP)  # noqa: E731
    want = jax_reference.jit(lambda G, S: (jax.grad(g, argnums=(0, 1))(G, S), jax.hessian(g, argnums=0)(G, S),
                                 jax.hessian(g, argnums=1)(G, S)))(jnp.asarray(G), jnp.asarray(S))
    f = lambda G, S: every_function(G, S, B, np)  # noqa: E731
    value, grads = jt.value_and_grad(f, argnum=(0, 1))(G, S)
    close(value, every_function(G, S, B, np), rtol=1e-12, what="value")
    close(grads[0], want[0][0], what="gradient in G")
    close(grads[1], want[0][1], what="gradient in S")
    close(jt.hessian(f, argnum=0, compress=True)(G, S).dense(), want[1], what="hessian in G")
    close(jt.hessian(f, argnum=1, compress=True)(G, S).dense(), want[2], what="hessian in S")


# ---------------------------------------------------------------------------- the Gaussian log-likelihood
def loglik_from_factor(A, r, xp=np):
    """-(log|K| + rᵀK⁻¹r)/2 with K = A·Aᵀ + εI (the README example of issue 25)."""
    K = A @ A.T + 0.5 * xp.eye(A.shape[0])
    return -0.5 * (xp.linalg.slogdet(K)[1] + r @ xp.linalg.solve(K, r))


_X = np.random.default_rng(29).uniform(-2, 2, size=(6, 2))
_D2 = np.sum((_X[:, None, :] - _X[None, :, :]) ** 2, axis=-1)   # squared distances: data, a constant
_E = np.eye(3)


def loglik_of_kernel(theta, r, xp=np):
    """A GP marginal log-likelihood (paper 004 §3.1) in θ = (log length scale, log signal sd, log noise sd):
    K = σ_f² exp(−D²/(2ℓ²)) + σ_n² I."""
    log_ell, log_sf, log_sn = theta @ _E[0], theta @ _E[1], theta @ _E[2]
    K = xp.exp(2 * log_sf) * xp.exp(-0.5 * _D2 * xp.exp(-2 * log_ell)) + xp.exp(2 * log_sn) * xp.eye(len(r))
    return -0.5 * (xp.linalg.slogdet(K)[1] + r @ xp.linalg.solve(K, r))


# anneal runs to its time limit (10 s and more per derivative here) and exhaustive refuses graphs of
# more than 16 intermediates (the kernel matrix's has 21), cpsat and optimal take ~5 s on it: the
# search modes run on the per-function cases above; here the rest
_FAST = [m for m in jt.modes() if m not in ("anneal", "cpsat", "exhaustive", "optimal")]
GAUSSIAN = [
    ("K = A Aᵀ + εI", loglik_from_factor, (np.random.default_rng(30).normal(size=(4, 4)),
                                             np.random.default_rng(31).normal(size=4)),
     [m for m in jt.modes() if m != "anneal"]),
    ("kernel matrix", loglik_of_kernel, (np.array([0.2, 0.1, -1.0]), np.random.default_rng(32).normal(size=6)), _FAST),
]


@pytest.mark.parametrize("case, mode", [(c, m) for c in GAUSSIAN for m in c[3]],
                         ids=[f"{c[0]}-{m}" for c in GAUSSIAN for m in c[3]])
def test_gaussian_log_likelihood_gradient_and_hessian_match_jax(case, mode):
    name, f, args, _ = case
    key = "gaussian " + name
    if key not in _REFERENCES:
        g = lambda *a: f(*a, xp=JNP)  # noqa: E731
        _REFERENCES[key] = tuple(np.asarray(r) for r in jax_reference.jit(lambda *a: (
            jax.grad(g)(*a), jax.hessian(g)(*a), jax.hessian(g, argnums=1)(*a)))(*args))
    gradient, hessian, hessian_r = _REFERENCES[key]
    close(jt.grad(f, mode=mode)(*args), gradient, what="gradient")
    close(jt.hessian(f, mode=mode, compress=True)(*args).dense(), hessian, what="hessian")
    close(jt.hessian(f, argnum=1, mode=mode)(*args), hessian_r, what="hessian in r")


def test_gaussian_log_likelihood_hessian_in_r_is_minus_the_inverse_covariance():
    A, r = GAUSSIAN[0][2]
    K = A @ A.T + 0.5 * np.eye(4)
    close(jt.hessian(loglik_from_factor, argnum=1)(A, r), -np.linalg.inv(K), rtol=1e-12)


# ---------------------------------------------------------------------------- conventions
def test_solve_with_a_cholesky_factor_is_a_triangular_solve():
    """np.linalg.solve of potrf's output or its transpose runs trsm, not an LU factorization (values
    and derivatives against JAX: the "solve with Cholesky factors" case)."""
    from jacacc.tensor.expr import nodes_of

    S = spd(np.random.default_rng(3), (), N)
    r = np.arange(1.0, N + 1)

    def gp_like(A):
        L = np.linalg.cholesky(A)
        return r @ np.linalg.solve(L.T, np.linalg.solve(L, r))

    traced = trace(gp_like, [S])
    ops = {n.param[0] for n in nodes_of(list(traced.outputs)) if n.kind == "op"}
    assert "trsm" in ops and "getrf" not in ops
    close(jt.vjp(gp_like, S)[0], gp_like(S), rtol=1e-12, what="value")


def test_cholesky_and_eigh_read_one_triangle_and_differentiate_numpys_function():
    """NumPy's value (the lower triangle of a non-symmetric input) and the derivative of NumPy's
    function: zero above the diagonal, as central differences of np.linalg.cholesky/eigh give."""
    rng = np.random.default_rng(33)
    S = spd(rng, (), 4)
    A = S + np.triu(rng.normal(size=(4, 4)), 1)  # junk above the diagonal
    W4 = rng.normal(size=(4, 4))
    value, _ = jt.vjp(np.linalg.cholesky, A)
    close(value, np.linalg.cholesky(A), rtol=1e-14)
    for f in (lambda A: np.sum(W4 * np.linalg.cholesky(A) ** 3),
              lambda A: np.sum(np.linalg.eigh(A)[0] ** 3) + np.sum(W4 * np.linalg.eigh(A)[1] ** 2)):
        g = jt.grad(f)(A)
        assert np.all(np.triu(g, 1) == 0)
        numeric = np.zeros_like(A)                # central differences in the entries NumPy reads
        for i, j in zip(*np.tril_indices(4), strict=True):
            step = np.zeros_like(A)
            step[i, j] = 1e-6
            numeric[i, j] = (f(A + step) - f(A - step)) / 2e-6
        close(g, numeric, rtol=1e-6)
    A[0, 3] = np.inf                              # never read: changes nothing, as in NumPy
    close(jt.vjp(np.linalg.cholesky, A)[0], value, rtol=0)
    upper = jt.vjp(lambda A: np.linalg.cholesky(A, upper=True), A.T)[0]
    close(upper, np.linalg.cholesky(A.T, upper=True), rtol=1e-14)


def test_eigh_values_are_numpys():
    rng = np.random.default_rng(34)
    S = spd(rng, (2,), 4)
    S_upper = np.triu(S) + np.tril(np.ones((4, 4)), -1)   # NumPy reads only the triangle UPLO names
    for A, uplo in [(S, "L"), (S_upper, "U")]:
        w = jt.vjp(lambda A, u=uplo: np.linalg.eigh(A, UPLO=u)[0], A)[0]
        v = jt.vjp(lambda A, u=uplo: np.linalg.eigh(A, UPLO=u)[1], A)[0]
        w_np, v_np = np.linalg.eigh(A, UPLO=uplo)
        assert np.array_equal(w, w_np) and np.array_equal(v, v_np)      # bit for bit, LAPACK's signs
    w_np = np.linalg.eigh(S)[0]
    upper = jt.vjp(lambda A: np.linalg.eigvalsh(A, UPLO="U"), np.triu(S) + np.tril(np.ones((4, 4)), -1))[0]
    close(upper, w_np, rtol=1e-12)


def test_repeated_eigenvalues_clamp_eigenvector_derivatives_with_a_warning():
    """JAX's eigenvector derivative is nan at a repeated eigenvalue; jacacc keeps paper 004 §4.4's
    eigengap clamp: finite, with a RuntimeWarning.  Eigenvalue derivatives need no gaps."""
    A = np.diag([1.0, 1.0, 3.0])
    with pytest.warns(RuntimeWarning, match="repeated eigenvalues"):
        g = jt.grad(lambda A: np.sum(W * np.linalg.eigh(A)[1]))(A)
    assert np.all(np.isfinite(g))
    assert np.all(np.isnan(jax.grad(lambda A: jnp.sum(W * jnp.linalg.eigh(A)[1]))(jnp.asarray(A))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = jt.grad(lambda A: np.sum(np.linalg.eigvalsh(A) ** 3))(A)   # tr(A³): smooth across the tie
    close(g, 3 * A @ A, rtol=1e-12)


def test_norm_ties_share_the_derivative_and_a_zero_entry_follows_jax():
    x = np.array([[-2.0, 1.0, 2.0], [0.0, 0.5, -0.5]])
    g = jt.grad(lambda x: np.sum(np.linalg.norm(x, np.inf, axis=1)))(x)
    close(g, [[-0.5, 0.0, 0.5], [0.0, 0.5, -0.5]], rtol=1e-15)
    g = jt.grad(lambda x: np.linalg.norm(np.sum(x, axis=0), 1))(x)  # |−2| + |1.5| + |1.5|
    close(g, [[-1.0, 1.0, 1.0], [-1.0, 1.0, 1.0]], rtol=1e-15)
    v = np.array([1.0, 0.0, -1.0])  # |x| at 0: the derivative of jacacc's abs, which is JAX's
    for order in (1, 3, np.inf):
        close(jt.grad(lambda v, order=order: np.linalg.norm(v, order))(v),
              jax.grad(lambda v, order=order: jnp.linalg.norm(v, order))(jnp.asarray(v)), rtol=1e-15)


def test_slogdet_and_det_of_a_singular_matrix_are_numpys_and_their_derivative_is_refused():
    S = np.array([[1.0, 2.0], [2.0, 4.0]])   # exactly singular: an exact zero pivot
    sign, pullback = jt.vjp(lambda A: np.linalg.slogdet(A)[0], S)
    assert float(sign) == 0.0
    assert float(jt.vjp(lambda A: np.linalg.slogdet(A)[1], S)[0]) == -np.inf
    assert float(jt.vjp(np.linalg.det, S)[0]) == 0.0
    with pytest.raises(SingularMatrixError, match=r"singular.*U\[1, 1\] = 0"):
        jt.grad(np.linalg.det)(S)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        jt.grad(lambda A: np.linalg.slogdet(A)[1])(S)


@pytest.mark.parametrize("f", [lambda A: np.sum(np.linalg.solve(A, np.ones(2))), lambda A: np.sum(np.linalg.inv(A))],
                         ids=["solve", "inv"])
def test_solve_and_inv_of_a_singular_matrix_raise_linalg_errors(f):
    S = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(np.linalg.LinAlgError, match=r"the matrix is singular"):
        jt.grad(f)(S)
    with pytest.raises(SingularMatrixError, match=r"at batch index \(1,\)"):
        jt.grad(lambda A: np.sum(np.linalg.inv(A)))(np.stack([np.eye(2), S]))


def test_float32_stays_float32():
    rng = np.random.default_rng(35)
    A = general(rng, (2,), 3).astype(np.float32)
    g = jt.grad(lambda A: np.sum(np.linalg.slogdet(A)[1]) + np.sum(np.linalg.solve(A, np.ones(3))))(A)
    assert g.dtype == np.float32
    A64 = A.astype(np.float64)
    want = np.swapaxes(np.linalg.inv(A64), -1, -2) - np.swapaxes(np.linalg.inv(A64), -1, -2) @ np.ones(
        (2, 3, 1)) @ np.linalg.solve(A64, np.ones(3))[:, None, :]
    close(g, want, rtol=1e-4)


def test_the_lu_factorization_is_shared_by_the_solve_its_pullback_and_slogdet():
    """One getrf per matrix in the gradient of the log-likelihood: the forward solve, the
    pullback's transposed solve and slogdet's inverse all read the same factors."""
    from jacacc.tensor.expr import nodes_of

    A, r = GAUSSIAN[0][2]
    d = jt.derivative_expression(loglik_from_factor, A, r, order=1, mode="reverse")
    ops = [n.param[0] for n in nodes_of([d.expression]) if n.kind == "op" and n.param[2] == 0]  # one per application
    assert ops.count("getrf") == 1, ops
    assert {"getrs", "getri"} <= set(ops)


# ---------------------------------------------------------------------------- errors
NON_SQUARE = [
    ("np.linalg.solve", lambda A: np.sum(np.linalg.solve(A, np.ones(2)))),
    ("np.linalg.inv", lambda A: np.sum(np.linalg.inv(A))),
    ("np.linalg.slogdet", lambda A: np.linalg.slogdet(A)[1]),
    ("np.linalg.det", lambda A: np.linalg.det(A)),
    ("np.linalg.cholesky", lambda A: np.sum(np.linalg.cholesky(A))),
    ("np.linalg.eigh", lambda A: np.sum(np.linalg.eigh(A)[0])),
    ("np.linalg.eigvalsh", lambda A: np.sum(np.linalg.eigvalsh(A))),
]


@pytest.mark.parametrize("name, f", NON_SQUARE, ids=[c[0] for c in NON_SQUARE])
@pytest.mark.parametrize("shape", [(2, 3), (3,)])
def test_non_square_input_is_refused_in_one_line(name, f, shape):
    with pytest.raises(TraceError) as info:
        jt.grad(f)(np.ones(shape))
    message = str(info.value)
    assert message.startswith(f"{name}: a must be a square matrix") and str(shape) in message
    assert "\n" not in message


@pytest.mark.parametrize("f, shape, words", [
    (lambda A: np.sum(np.linalg.solve(A, np.ones(4))), (3, 3), ["np.linalg.solve", "(4,)", "(3, 3)"]),
    (lambda A: np.sum(np.linalg.solve(A, np.ones((4, 2)))), (3, 3), ["np.linalg.solve", "(4, 2)"]),
    (lambda A: np.sum(np.linalg.solve(A, np.ones((3, 3, 1)))), (2, 3, 3), ["batch", "(2, 3, 3)", "(3, 3, 1)"]),
    (lambda A: np.sum(np.linalg.eigh(A, UPLO="X")[0]), (3, 3), ["np.linalg.eigh", "UPLO", "'X'"]),
    (lambda A: np.sum(np.linalg.norm(A, "fro", axis=0)), (3, 3), ["np.linalg.norm", "'fro'", "vectors"]),
    (lambda A: np.linalg.norm(A, "bad"), (3, 3), ["np.linalg.norm", "'bad'", "matrices"]),
    (lambda A: np.linalg.norm(A, 1), (2, 3, 3), ["np.linalg.norm", "(2, 3, 3)"]),
    (lambda A: np.sum(np.linalg.norm(A, axis=(0, 0))), (3, 3), ["np.linalg.norm", "repeats"]),
    (lambda A: np.sum(np.linalg.norm(A, axis=3)), (3, 3), ["np.linalg.norm", "out of range"]),
    (lambda A: np.sum(np.linalg.norm(A, axis=(0, 1, 2))), (2, 3, 3), ["np.linalg.norm", "3 axes"]),
    (lambda A: np.sum(np.linalg.matrix_norm(A)), (3,), ["np.linalg.matrix_norm", "(3,)"]),
], ids=["b rows", "b matrix rows", "batches", "UPLO", "fro of a vector", "unknown ord", "ord of a 3-d array",
        "repeated axis", "axis out of range", "three axes", "matrix_norm of a vector"])
def test_misused_functions_are_refused_in_one_line(f, shape, words):
    with pytest.raises(TraceError) as info:
        jt.grad(f)(np.ones(shape) + (np.eye(shape[-1]) if len(shape) > 1 else 0.0))
    message = str(info.value)
    assert all(w in message for w in words), message
    assert "\n" not in message


UNSUPPORTED = [
    ("np.linalg.cond", lambda A: np.linalg.cond(A) * np.sum(A)),
    ("np.linalg.eig", lambda A: np.sum(np.linalg.eig(A)[0])),
    ("np.linalg.eigvals", lambda A: np.sum(np.linalg.eigvals(A))),
    ("np.linalg.lstsq", lambda A: np.sum(np.linalg.lstsq(A, np.ones(3))[0])),
    ("np.linalg.matrix_power", lambda A: np.sum(np.linalg.matrix_power(A, 3))),
    ("np.linalg.matrix_rank", lambda A: np.linalg.matrix_rank(A) * np.sum(A)),
    ("np.linalg.tensorsolve", lambda A: np.sum(np.linalg.tensorsolve(A, np.ones(3)))),
]


@pytest.mark.parametrize("name, f", UNSUPPORTED, ids=[c[0] for c in UNSUPPORTED])
def test_unsupported_linalg_functions_are_refused_by_name(name, f):
    with pytest.raises(UnsupportedOperationError) as info:
        jt.grad(f)(np.eye(3) + 0.1)
    assert str(info.value) == f"{name} is not supported by jacacc.tensor"


@pytest.mark.parametrize("f, words", [
    (lambda A: np.linalg.norm(A @ np.ones(3), 0), ["ord=0", "nonzero"]),
], ids=["vector ord=0"])  # the singular-value norms (ord=±2, 'nuc') are tested in test_tensor_svd.py
def test_norms_that_count_are_refused_by_name(f, words):
    with pytest.raises(UnsupportedOperationError) as info:
        jt.grad(f)(np.eye(3))
    message = str(info.value)
    assert all(w in message for w in words) and "\n" not in message, message
    assert isinstance(info.value, JacaccError)
