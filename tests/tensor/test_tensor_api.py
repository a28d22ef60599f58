"""The public API of jacacc.tensor (paper 002): grad, jacobian, hessian (with compression),
vjp, jvp, derivative_expression and modes — shapes, argnum, caching, dtypes, compressed
Hessians of matrix factorization and of a neural-net layer, every mode (the search-based
ones on small graphs), and FLOP counts against opt_einsum's cost of each einsum.

References are JAX (float64) and formulas written with ``np.einsum``.
"""

from __future__ import annotations

import jax_reference
import numpy as np
import opt_einsum
import pytest

import jacacc
import jacacc.tensor as jt
from jacacc.tensor.evaluate import Program
from jacacc.tensor.expr import node_flops, nodes_of

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

TOL = {"rtol": 1e-10, "atol": 1e-12}


pytestmark = pytest.mark.usefixtures("float64_jax")


def _j(*arrays):
    return tuple(jnp.asarray(a, dtype=jnp.float64) for a in arrays)


def jacfwd(f, argnums=0):
    """``jax.jacfwd``, compiled (much faster than op-by-op for these small functions)."""
    return jax_reference.jit(jax.jacfwd(f, argnums=argnums))


def hessian(f, argnums=0):
    return jax_reference.jit(jax.hessian(f, argnums=argnums))


def grad(f, argnums=0):
    return jax_reference.jit(jax.grad(f, argnums=argnums))


rng0 = np.random.default_rng(2024)


def logistic(w, X, y, xp=np):
    """Logistic regression loss (paper 002's first experiment)."""
    return xp.sum(xp.log1p(xp.exp(-y * (X @ w))))


def matrix_factorization(U, V, T, xp=np):
    return xp.sum((T - U @ V.T) ** 2)


def layer(W, X, Y, xp=np):
    """One fully connected ReLU layer and a squared loss (no softmax)."""
    return xp.sum((xp.maximum(W @ X, 0) - Y) ** 2)


def two_layers(W1, W2, X, Y, xp=np):
    return xp.sum((xp.maximum(W2 @ xp.maximum(W1 @ X, 0), 0) - Y) ** 2)


def vector_valued(x, A, xp=np):
    """A vector-valued function: tanh(A x) ⊙ sin(x₀…)."""
    return xp.tanh(A @ x) * xp.sum(xp.sin(x))


def matrix_valued(X, xp=np):
    return xp.exp(X) @ X.T + xp.outer(xp.sum(X, axis=1), xp.diag(X @ X.T))


# ---------------------------------------------------------------------------- names and modes
def test_public_names():
    for name in ("grad", "jacobian", "hessian", "vjp", "jvp", "derivative_expression", "modes"):
        assert name in jt.__all__ and callable(getattr(jt, name))


def test_modes_are_the_builtin_ones_and_every_vertex_method():
    modes = jt.modes()
    assert modes[:3] == ["forward", "reverse", "cross_country"]
    assert set(modes) == {"forward", "reverse", "cross_country"} | set(jacacc.methods("vertex"))
    assert len(modes) == len(set(modes))


# ---------------------------------------------------------------------------- shapes and argnum
@pytest.mark.parametrize("x_shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("out", ["scalar", "same", "vector", "matrix"])
def test_shapes_of_jacobian_and_hessian(x_shape, out):
    rng = np.random.default_rng(0)
    x = rng.normal(size=x_shape)
    C = rng.normal(size=(2, 2) + x_shape)
    xs = "xyz"[: len(x_shape)]

    def f(x, xp=np):
        s = xp.sin(x) * x
        if out == "scalar":
            return xp.sum(s)
        if out == "same":
            return s
        if out == "vector":
            return xp.einsum(f"ab{xs},{xs}->a", C, s)
        return xp.einsum(f"ab{xs},{xs}->ab", C, s)

    y = f(x)
    J, H = jt.jacobian(f)(x), jt.hessian(f)(x)
    assert J.shape == np.shape(y) + x.shape
    assert H.shape == np.shape(y) + x.shape + x.shape
    np.testing.assert_allclose(J, jacfwd(lambda x: f(x, jnp))(*_j(x)), **TOL)
    np.testing.assert_allclose(H, hessian(lambda x: f(x, jnp))(*_j(x)), **TOL)
    if out == "scalar":
        g = jt.grad(f)(x)
        assert g.shape == x.shape
        np.testing.assert_allclose(g, grad(lambda x: f(x, jnp))(*_j(x)), **TOL)


def test_scalar_hessian_is_symmetric_and_matches_jax():
    rng = np.random.default_rng(1)
    w, X, y = rng.normal(size=4), rng.normal(size=(7, 4)), np.sign(rng.normal(size=7))
    H = jt.hessian(logistic)(w, X, y)
    assert H.shape == (4, 4)
    np.testing.assert_allclose(H, H.T, **TOL)
    np.testing.assert_allclose(H, hessian(lambda *a: logistic(*a, xp=jnp))(*_j(w, X, y)), **TOL)


@pytest.mark.parametrize("argnum", [0, 1, 2, -1, -2])
def test_argnum_picks_the_differentiated_argument(argnum):
    rng = np.random.default_rng(2)
    args = (rng.normal(size=3), rng.normal(size=(3, 2)), rng.normal(size=2))

    def f(a, B, c, xp=np):
        return xp.sum(xp.tanh(a @ B) * xp.cos(c)) + xp.sum(xp.sin(B) ** 2) * xp.sum(a * a)

    k = argnum % 3
    for transform, reference in ((jt.grad, grad), (jt.jacobian, jacfwd), (jt.hessian, hessian)):
        got = transform(f, argnum=argnum)(*args)
        assert got.shape == args[k].shape * (2 if transform is jt.hessian else 1)
        np.testing.assert_allclose(got, reference(lambda *a: f(*a, xp=jnp), argnums=k)(*_j(*args)), **TOL)


def test_returned_function_takes_the_same_positional_arguments():
    def f(x, A):
        return np.sum(np.exp(A @ x))

    g = jt.grad(f)
    assert callable(g) and g.__name__ == "grad_f"
    rng = np.random.default_rng(3)
    x, A = rng.normal(size=3), rng.normal(size=(2, 3))
    np.testing.assert_allclose(g(x, A), A.T @ np.exp(A @ x), **TOL)
    # a list is a container, as in JAX and autograd: its gradient is a list (tests/tensor/test_tensor_pytree.py);
    # a scalar python float is an array
    got = g(list(x), A)
    assert isinstance(got, list)
    np.testing.assert_allclose(got, A.T @ np.exp(A @ x), **TOL)
    np.testing.assert_allclose(jt.grad(lambda t: np.sin(t) * t)(0.5), np.cos(0.5) * 0.5 + np.sin(0.5), **TOL)


def test_integer_data_argument_is_accepted():
    """Only the differentiated argument must be float: integer data is converted."""
    x = np.array([0.3, -0.2, 0.5])
    n = np.array([1, 2, 3])
    got = jt.grad(lambda x, n: np.sum(np.sin(x * n)))(x, n)
    np.testing.assert_allclose(got, n * np.cos(x * n), **TOL)


def test_derivative_of_a_function_of_the_data_only_part_is_zero():
    x, z = np.array([0.4, 0.1]), np.array([1.0, 2.0, 3.0])
    got = jt.jacobian(lambda x, z: np.sin(z) * np.sum(np.cos(x)), argnum=0)(x, z)
    np.testing.assert_allclose(got, -np.outer(np.sin(z), np.sin(x)), **TOL)


# ---------------------------------------------------------------------------- caching
@pytest.mark.filterwarnings("ignore::jacacc.tensor.captured.SideEffectWarning")  # counting calls is one
def test_plans_are_cached_per_argument_shapes():
    calls = []

    def f(x, A):
        calls.append(x.shape)
        return np.sum(np.tanh(A @ x) ** 2)

    h = jt.hessian(f)
    rng = np.random.default_rng(4)
    x3, A3 = rng.normal(size=3), rng.normal(size=(2, 3))
    first = h(x3, A3)
    assert len(h.plans) == 1 and len(calls) == 1
    again = h(x3 + 1, A3)  # same shapes: no new trace, a new value
    assert len(h.plans) == 1 and len(calls) == 1
    np.testing.assert_allclose(again, hessian(lambda x, A: jnp.sum(jnp.tanh(A @ x) ** 2))(*_j(x3 + 1, A3)), **TOL)
    assert not np.allclose(first, again)
    x4, A4 = rng.normal(size=4), rng.normal(size=(2, 4))
    h(x4, A4)
    assert len(h.plans) == 2 and len(calls) == 2
    h(x3, A3)
    h(x4, A4)
    assert len(h.plans) == 2 and len(calls) == 2
    for transform in (jt.grad, jt.jacobian):
        g = transform(f)
        g(x3, A3)
        g(x3, A3)
        assert len(g.plans) == 1


# ---------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("transform", [jt.grad, jt.jacobian, jt.hessian])
def test_float32_in_float32_out(transform):
    rng = np.random.default_rng(5)
    w, X, y = rng.normal(size=4), rng.normal(size=(6, 4)), np.sign(rng.normal(size=6))
    f = transform(logistic)
    r64 = f(w, X, y)
    r32 = f(w.astype(np.float32), X.astype(np.float32), y.astype(np.float32))
    assert r64.dtype == np.float64 and r32.dtype == np.float32
    np.testing.assert_allclose(r32, r64, rtol=1e-4, atol=1e-5)
    assert len(f.plans) == 2  # one plan per dtype


def test_vjp_and_jvp_keep_float32():
    x = np.linspace(-1, 1, 4).astype(np.float32)
    value, back = jt.vjp(lambda x: np.tanh(x) * x, x)
    (g,) = back(np.ones(4, dtype=np.float32))
    _, t = jt.jvp(lambda x: np.tanh(x) * x, (x,), (np.ones(4, dtype=np.float32),))
    assert value.dtype == g.dtype == t.dtype == np.float32
    np.testing.assert_allclose(g, np.tanh(x) + x * (1 - np.tanh(x) ** 2), rtol=1e-5)


# ---------------------------------------------------------------------------- compression
def test_compressed_matrix_factorization_hessian_is_two_VtV():
    n, k = 8, 3
    rng = np.random.default_rng(6)
    U, V, T = rng.normal(size=(n, k)), rng.normal(size=(n, k)), rng.normal(size=(n, n))
    dense = jt.hessian(matrix_factorization)(U, V, T)
    compressed = jt.hessian(matrix_factorization, compress=True)(U, V, T)
    np.testing.assert_allclose(dense, hessian(lambda *a: matrix_factorization(*a, xp=jnp))(*_j(U, V, T)), **TOL)
    np.testing.assert_array_equal(compressed.dense(), dense)
    assert compressed.shape == dense.shape == (n, k, n, k)
    assert compressed.stored.shape == (k, k)
    np.testing.assert_allclose(compressed.stored, 2 * V.T @ V, **TOL)
    assert compressed.nbytes == k * k * 8
    assert compressed.nbytes < compressed.dense_nbytes == dense.nbytes
    assert "->" in compressed.layout and "CompressedHessian" in repr(compressed)


def test_compressed_layer_hessian_is_third_order():
    """A ReLU layer's Hessian is A *(ijl,ik,ijkl) δ (paper 002 §3): a third-order stored tensor."""
    rng = np.random.default_rng(7)
    W, X, Y = rng.normal(size=(4, 3)), rng.normal(size=(3, 5)), rng.normal(size=(4, 5))
    dense = jt.hessian(layer)(W, X, Y)
    np.testing.assert_allclose(dense, hessian(lambda *a: layer(*a, xp=jnp))(*_j(W, X, Y)), **TOL)
    compressed = jt.hessian(layer, compress=True)(W, X, Y)
    np.testing.assert_array_equal(compressed.dense(), dense)
    assert compressed.stored.ndim == 3 < dense.ndim
    assert compressed.nbytes < compressed.dense_nbytes
    # the δ: rows i ≠ k of W do not interact, and the stored tensor holds the diagonal blocks
    for i in range(4):
        for k in range(4):
            if i != k:
                assert not np.any(dense[i, :, k, :])
    blocks = np.stack([dense[i, :, i, :] for i in range(4)])
    np.testing.assert_array_equal(np.sort(compressed.stored.ravel()), np.sort(blocks.ravel()))


def test_compressed_two_layer_hessian_is_the_hessian():
    """The first layer of two: W2 mixes the rows of W1, so the Hessian has no δ left; compression
    must still give the Hessian."""
    rng = np.random.default_rng(8)
    W1, W2 = rng.normal(size=(4, 3)), rng.normal(size=(2, 4))
    X, Y = rng.normal(size=(3, 5)), rng.normal(size=(2, 5))
    dense = jt.hessian(two_layers)(W1, W2, X, Y)
    np.testing.assert_allclose(dense, hessian(lambda *a: two_layers(*a, xp=jnp))(*_j(W1, W2, X, Y)), **TOL)
    compressed = jt.hessian(two_layers, compress=True)(W1, W2, X, Y)
    np.testing.assert_array_equal(compressed.dense(), dense)
    assert compressed.nbytes <= compressed.dense_nbytes


def test_compressed_hessian_of_a_vector_valued_function():
    rng = np.random.default_rng(9)
    x, A = rng.normal(size=3), rng.normal(size=(2, 3))
    compressed = jt.hessian(vector_valued, compress=True)(x, A)
    dense = jt.hessian(vector_valued)(x, A)
    np.testing.assert_array_equal(compressed.dense(), dense)
    np.testing.assert_allclose(dense, hessian(lambda *a: vector_valued(*a, xp=jnp))(*_j(x, A)), **TOL)


# ---------------------------------------------------------------------------- vjp and jvp
def test_vjp_returns_the_value_and_a_pullback_over_all_arguments():
    rng = np.random.default_rng(10)
    x, A = rng.normal(size=3), rng.normal(size=(2, 3))
    value, pullback = jt.vjp(vector_valued, x, A)
    ref_value, ref_pullback = jax.vjp(lambda *a: vector_valued(*a, xp=jnp), *_j(x, A))
    np.testing.assert_allclose(value, ref_value, **TOL)
    ct1, ct2 = rng.normal(size=2), rng.normal(size=2)
    grads = pullback(ct1)
    assert isinstance(grads, tuple) and [g.shape for g in grads] == [(3,), (2, 3)]
    for g, r in zip(grads, ref_pullback(jnp.asarray(ct1)), strict=True):
        np.testing.assert_allclose(g, r, **TOL)
    # the pullback is linear and can be called again
    combined = pullback(2 * ct1 - 3 * ct2)
    for c, a, b in zip(combined, grads, pullback(ct2), strict=True):
        np.testing.assert_allclose(c, 2 * a - 3 * b, **TOL)


def test_jvp_matches_jax():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(3, 3))
    tangent = rng.normal(size=(3, 3))
    value, out = jt.jvp(matrix_valued, [X], [tangent])
    ref_value, ref_out = jax.jvp(lambda X: matrix_valued(X, xp=jnp), _j(X), _j(tangent))
    np.testing.assert_allclose(value, ref_value, **TOL)
    np.testing.assert_allclose(out, ref_out, **TOL)


@pytest.mark.parametrize("mode", ["forward", "reverse", "cross_country", "markowitz"])
def test_dot_product_test(mode):
    """⟨J u, v⟩ = ⟨u, Jᵀ v⟩ with u a tangent of every argument (jvp) and v a cotangent (vjp)."""
    rng = np.random.default_rng(12)
    args = (rng.normal(size=3), rng.normal(size=(2, 3)))
    u = [rng.normal(size=a.shape) for a in args]
    value, Ju = jt.jvp(vector_valued, args, u, mode=mode)
    v = rng.normal(size=value.shape)
    _, pullback = jt.vjp(vector_valued, *args, mode=mode)
    JTv = pullback(v)
    lhs = float(np.sum(Ju * v))
    rhs = sum(float(np.sum(a * b)) for a, b in zip(u, JTv, strict=True))
    assert lhs == pytest.approx(rhs, rel=1e-12, abs=1e-12)
    assert abs(lhs) > 1e-3  # not vacuous


def test_jacobian_rows_are_pullbacks_and_columns_pushforwards():
    rng = np.random.default_rng(13)
    x, A = rng.normal(size=3), rng.normal(size=(2, 3))
    J = jt.jacobian(vector_valued)(x, A)
    _, pullback = jt.vjp(vector_valued, x, A)
    for i in range(2):
        np.testing.assert_allclose(pullback(np.eye(2)[i])[0], J[i], **TOL)
    for j in range(3):
        np.testing.assert_allclose(jt.jvp(vector_valued, (x, A), (np.eye(3)[j], np.zeros((2, 3))))[1], J[:, j], **TOL)


# ---------------------------------------------------------------------------- every mode
SMALL = [  # small graphs, so the search-based orders stay quick
    ("chain", lambda x, A, xp=np: xp.sum(xp.tanh(A @ x) ** 2), (np.array([0.3, -0.5, 0.8]), rng0.normal(size=(2, 3)))),
    ("sin-cos", lambda x, A, xp=np: xp.sin(xp.cos(A @ x)), (np.array([0.3, -0.5, 0.8]), rng0.normal(size=(2, 3)))),
    ("quadratic", lambda x, A, xp=np: xp.exp(x @ A.T @ A @ x / 10), (np.array([0.3, -0.5, 0.8]), rng0.normal(size=(2, 3)))),
]


_REFERENCES: dict[str, tuple] = {}


@pytest.mark.parametrize("mode", jt.modes())
@pytest.mark.parametrize("case", SMALL, ids=[c[0] for c in SMALL])
def test_every_mode_gives_the_same_derivative(mode, case):
    name, f, args = case
    if name not in _REFERENCES:
        _REFERENCES[name] = (jacfwd(lambda *a: f(*a, xp=jnp))(*_j(*args)), hessian(lambda *a: f(*a, xp=jnp))(*_j(*args)))
    ref = _REFERENCES[name]
    np.testing.assert_allclose(jt.jacobian(f, mode=mode)(*args), ref[0], **TOL)
    np.testing.assert_allclose(jt.hessian(f, mode=mode)(*args), ref[1], **TOL)


def test_modes_differ_in_cost_not_in_value():
    """Paper 002: cross-country mode is not costlier than reverse on logistic regression's Hessian,
    and the orders give the same expression value."""
    rng = np.random.default_rng(14)
    w, X, y = rng.normal(size=5), rng.normal(size=(10, 5)), np.sign(rng.normal(size=10))
    exprs = {m: jt.derivative_expression(logistic, w, X, y, mode=m) for m in ("forward", "reverse", "cross_country")}
    values = {m: d.evaluate(w, X, y) for m, d in exprs.items()}
    for m in exprs:
        np.testing.assert_allclose(values[m], values["reverse"], **TOL)
    assert exprs["cross_country"].flops <= exprs["reverse"].flops


# ---------------------------------------------------------------------------- derivative expressions
def test_derivative_expression_prints_and_evaluates():
    rng = np.random.default_rng(15)
    w, X, y = rng.normal(size=4), rng.normal(size=(6, 4)), np.sign(rng.normal(size=6))
    d = jt.derivative_expression(logistic, w, X, y)
    text = str(d)
    assert isinstance(text, str) and "X" in text and "w" in text
    assert d.expression.shape == (4, 4) and d.mode == "cross_country"
    assert isinstance(d.flops, int) and d.flops > 0
    assert len(d.elimination_flops) == 2  # one elimination per derivative order
    np.testing.assert_allclose(d.evaluate(w, X, y), jt.hessian(logistic)(w, X, y), **TOL)
    g = jt.derivative_expression(logistic, w, X, y, order=1, mode="reverse")
    assert g.expression.shape == (4,) and len(g.elimination_flops) == 1
    np.testing.assert_allclose(g.evaluate(w, X, y), grad(lambda *a: logistic(*a, xp=jnp))(*_j(w, X, y)), **TOL)


def test_third_derivative_is_a_derivative_of_the_hessian():
    rng = np.random.default_rng(16)
    x, A = rng.normal(size=3), rng.normal(size=(2, 3))
    d = jt.derivative_expression(vector_valued, x, A, order=3)
    assert d.expression.shape == (2, 3, 3, 3)
    ref = jax.jacfwd(hessian(lambda *a: vector_valued(*a, xp=jnp)))(*_j(x, A))
    np.testing.assert_allclose(d.evaluate(x, A), ref, **TOL)


def test_derivative_expression_argnum():
    rng = np.random.default_rng(17)
    w, X, y = rng.normal(size=4), rng.normal(size=(6, 4)), np.sign(rng.normal(size=6))
    d = jt.derivative_expression(logistic, w, X, y, argnum=1, order=1)
    assert d.expression.shape == (6, 4)
    np.testing.assert_allclose(d.evaluate(w, X, y),
                               grad(lambda *a: logistic(*a, xp=jnp), argnums=1)(*_j(w, X, y)), **TOL)


# ---------------------------------------------------------------------------- pairwise steps
@pytest.mark.parametrize(("subscripts", "shapes", "kind"), [
    ("kni,jik->jin", [(5, 4, 6), (3, 6, 5)], "matmul"),  # batch i between the free and summed letters
    ("bij,bjk->bik", [(7, 2, 3), (7, 3, 2)], "matmul"),
    ("abij,bjk->kiab", [(2, 3, 4, 5), (3, 5, 6)], "matmul"),  # batch b, free a and i on one side
    ("ijb,jkb->ikb", [(20, 30, 7), (30, 20, 7)], "matmul"),
    ("ijb,jkb->ikb", [(2, 3, 7), (3, 2, 7)], "einsum"),  # tiny products along a trailing batch
    ("ijk,ik->ij", [(9, 4, 5), (9, 5)], "einsum"),  # matrix-vector products of small matrices
    ("kjn,ijk->ijn", [(20, 9, 1), (16, 9, 20)], "matmul"),  # of 16 × 20 matrices, batch j in the middle
    ("ijk,ik->ij", [(9, 4, 32), (9, 32)], "matmul"),
])
def test_batched_products_run_as_stacked_matrix_products(subscripts, shapes, kind):
    """A product with batch letters runs as one stacked ``matmul`` (BLAS per batch entry) where its
    matrices are at least 2 × 2 × 2, unless they are tiny and the batch trails both operands, and a
    batch of matrix-vector products where its matrices have 128 entries or more; the interpreter
    and the straight-line program give the einsum's result."""
    from jacacc.tensor.expr import einsum, var
    from jacacc.tensor.steps import Contraction

    rng = np.random.default_rng(8)
    values = [rng.normal(size=s) for s in shapes]
    contraction = Contraction(subscripts, shapes)
    assert [step[1] for step in contraction._steps] == [kind]
    want = np.einsum(subscripts, *values)
    np.testing.assert_allclose(contraction(*values), want, **TOL)
    operands = [var(f"x{k}", s) for k, s in enumerate(shapes)]
    program = Program([einsum(subscripts, *operands)], operands, fuse_kernels=False)
    np.testing.assert_allclose(program(*values)[0], want, **TOL)
    source = program._straight_line.source
    assert (kind == "matmul") == ("@" in source or "dot(" in source)  # matrices by np.dot, stacks by @


@pytest.mark.parametrize(("subscripts", "shapes", "memory"), [
    ("ck,kab->abkc", [(6, 128), (128, 8, 6)], "abck"),  # mlp_flat's Hessian: 6144 rows of 6 otherwise
    ("i,j->ij", [(2000,), (5,)], "ji"),
    ("i,j->ij", [(200,), (5,)], "ij"),  # under REORDERED_MIN_SIZE entries
    ("ij,i->ij", [(1024, 8), (1024,)], "ij"),  # an operand as large as the product: its layout
    (",ij->ij", [(), (1024, 8)], "ij"),  # a scaling
    ("ck,kab->abkc", [(20, 128), (128, 8, 6)], "abkc"),  # the last axis long enough
])
def test_broadcast_products_are_written_with_a_long_last_axis(subscripts, shapes, memory):
    """A broadcast product whose last axis is short is written in the order with its longest axis
    last (NumPy's loops run along it) and read through a transposition; its value, from the
    interpreter and from the straight-line program, is the einsum's whatever the operands' layouts."""
    from jacacc.tensor.expr import einsum, var
    from jacacc.tensor.steps import Contraction

    contraction = Contraction(subscripts, shapes)
    [(_, kind, (*_, final), _)] = contraction._steps
    out = subscripts.partition("->")[2]
    assert kind == "multiply"
    assert (final is None) == (memory == out)
    if final is not None:
        assert "".join(memory[p] for p in final) == out
    rng = np.random.default_rng(9)
    values = [rng.normal(size=s) for s in shapes]
    fortran = [np.asfortranarray(v) if v.ndim else v for v in values]  # a transposed view, as earlier steps hand out
    want = np.einsum(subscripts, *values)
    operands = [var(f"x{k}", s) for k, s in enumerate(shapes)]
    program = Program([einsum(subscripts, *operands)], operands, fuse_kernels=False)
    for given in (values, fortran):
        np.testing.assert_array_equal(contraction(*given), want)
        np.testing.assert_array_equal(program(*given)[0], want)

# ---------------------------------------------------------------------------- FLOPs

@pytest.mark.parametrize(("subscripts", "shapes", "kind", "presums"), [
    # opt_einsum folds a sum over a unit or scalar-scaled axis into the pairwise step
    ("nlk,nijml->nijkl", [(8, 160, 2), (8, 4, 2, 1, 160)], "multiply", ((3,), None)),  # GMM's Hessian
    ("lijk,lkn->lin", [(4, 4, 1, 160), (4, 160, 2)], "matmul", (None, (2,))),  # a matrix product once j is summed
    ("lijk,->li", [(4, 4, 3, 160), ()], "multiply", (None, (2, 3))),  # summed, then scaled
    ("iab,jba->ij", [(2, 3, 4), (5, 4, 3)], "matmul", (None, None)),  # nothing summed on its own
])
def test_letters_of_one_operand_are_summed_before_the_product(subscripts, shapes, kind, presums):
    """A letter in one operand alone and not in the output is summed out of it first, so the rest
    runs as a broadcast multiply or a matrix product instead of ``einsum``'s generic loop; the
    interpreter and the straight-line program give the einsum's result, whatever the layouts."""
    from jacacc.tensor.expr import einsum, var
    from jacacc.tensor.steps import Contraction

    contraction = Contraction(subscripts, shapes)
    [(_, got_kind, _, got_presums)] = contraction._steps
    assert (got_kind, got_presums) == (kind, presums)
    rng = np.random.default_rng(10)
    values = [rng.normal(size=s) for s in shapes]
    want = np.einsum(subscripts, *values)
    operands = [var(f"x{k}", s) for k, s in enumerate(shapes)]
    program = Program([einsum(subscripts, *operands)], operands, fuse_kernels=False)
    for given in (values, [np.asfortranarray(v) if v.ndim else v for v in values]):
        np.testing.assert_allclose(contraction(*given), want, **TOL)
        np.testing.assert_allclose(program(*given)[0], want, **TOL)
    # a sum over unit axes (keepdims) is a reshape; a real one a reduction of its own
    assert (".sum(axis=" in program._straight_line.source) == (subscripts == "lijk,->li")

def _einsum_cost(node) -> int:
    """FLOPs of the contraction the evaluator runs for an einsum node, counted step by
    step from its planned ``contraction_list`` with opt_einsum's per-step count; 0 for a
    pure transpose.  Also checked: never more than opt_einsum's default path costs."""
    lhs, out = node.param.split("->")
    inputs = lhs.split(",")
    if len(inputs) == 1 and sorted(inputs[0]) == sorted(out) and len(set(out)) == len(out):
        return 0
    shapes = [a.shape for a in node.args]
    sizes = {c: n for labels, shape in zip(inputs, shapes, strict=True) for c, n in zip(labels, shape, strict=True)}
    _, kind, planned, _, _ = Program([node], [n for n in nodes_of([node]) if n.kind == "var"], fuse=False,
                                     fuse_kernels=False)._steps[-1]
    if kind == "scatter":  # a δ scatter: only its core contraction computes
        expansion, planned, _ = planned
        core_inputs, _, core_out = expansion.core.partition("->")
        if planned is None or (core_inputs.count(",") == 0 and sorted(core_inputs) == sorted(core_out)):
            return 0  # no core, or a core that only relabels its operand (a view)
    total = 0
    for _, removed, step, _, _ in planned.contraction_list:
        step_inputs = step.split("->")[0].split(",")
        total += opt_einsum.helpers.flop_count(set("".join(step_inputs)), bool(removed), len(step_inputs), sizes)
    assert total <= opt_einsum.contract_path(node.param, *shapes, shapes=True)[1].opt_cost
    return total


def _independent_flops(root) -> int:
    total = 0
    for node in nodes_of([root]):
        if node.kind == "einsum":
            total += _einsum_cost(node)
        elif node.kind == "add":
            total += node.size * (len(node.args) - 1)
        elif node.kind == "unary":
            total += node.size
    return total


FLOP_CASES = [
    ("logistic", logistic, lambda r: (r.normal(size=4), r.normal(size=(6, 4)), np.sign(r.normal(size=6)))),
    ("matrix factorization", matrix_factorization, lambda r: (r.normal(size=(5, 2)), r.normal(size=(5, 2)),
                                                             r.normal(size=(5, 5)))),
    ("layer", layer, lambda r: (r.normal(size=(3, 2)), r.normal(size=(2, 4)), r.normal(size=(3, 4)))),
    ("vector valued", vector_valued, lambda r: (r.normal(size=3), r.normal(size=(2, 3)))),
    ("matrix valued", matrix_valued, lambda r: (r.normal(size=(3, 3)),)),
]


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("mode", ["forward", "reverse", "cross_country", "min_fill"])
@pytest.mark.parametrize("case", FLOP_CASES, ids=[c[0] for c in FLOP_CASES])
def test_reported_flops_are_those_of_the_einsums_evaluated(case, mode, order):
    _, f, make = case
    args = make(np.random.default_rng(18))
    d = jt.derivative_expression(f, *args, order=order, mode=mode)
    nodes = nodes_of([d.expression])
    assert d.flops == sum(node_flops(n) for n in nodes)
    # without kernels: fusion may move a scalar factor onto a larger array (counted where it runs)
    program = Program([d.expression], d.inputs, fuse_kernels=False)
    assert program.flops == d.flops
    assert d.flops == _independent_flops(d.expression)
    fused = Program([d.expression], d.inputs)
    assert fused.flops == _independent_flops(fused.outputs[0]) >= d.flops
    einsums = [n for n in nodes if n.kind == "einsum"]
    assert einsums
    for n in einsums:
        assert node_flops(n) == _einsum_cost(n), n.param
    # the program computes the derivative whose FLOPs it reports
    np.testing.assert_allclose(program(*args)[0], d.evaluate(*args), **TOL)


def test_transposes_cost_nothing_and_contractions_cost_opt_einsums_count():
    from jacacc.tensor.expr import einsum, var

    A, B = var("A", (3, 4)), var("B", (4, 5))
    assert node_flops(einsum("ij->ji", A)) == 0
    product = einsum("ij,jk->ik", A, B)
    assert node_flops(product) == opt_einsum.contract_path("ij,jk->ik", (3, 4), (4, 5), shapes=True)[1].opt_cost > 0
    assert Program([product], [A, B]).flops == node_flops(product)


# ---------------------------------------------------------------------------- zero and identity derivatives
# Derivatives with no path from the argument to the value, or a value that is the
# argument itself: the tensor graph then has an input or output no edge touches.
ZERO_AND_IDENTITY = [
    ("identity", lambda x, A: x, lambda x, A: np.eye(3)),
    ("transpose of a vector", lambda x, A: x.T, lambda x, A: np.eye(3)),
    ("constant in x", lambda x, A: A @ np.ones(3), lambda x, A: np.zeros((2, 3))),
    ("scaled identity", lambda x, A: 3.0 * x, lambda x, A: 3.0 * np.eye(3)),
]


@pytest.mark.parametrize("mode", ["forward", "reverse", "cross_country", "markowitz"])
@pytest.mark.parametrize("case", ZERO_AND_IDENTITY, ids=[c[0] for c in ZERO_AND_IDENTITY])
def test_jacobians_without_paths_or_with_the_argument_as_value(case, mode):
    _, f, expected = case
    x, A = np.array([0.3, -0.2, 0.5]), np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(jt.jacobian(f, mode=mode)(x, A), expected(x, A))


@pytest.mark.parametrize("mode", ["forward", "reverse", "cross_country"])
def test_gradient_of_an_unused_argument_is_zero(mode):
    x, z = np.array([0.3, -0.2, 0.5]), np.array([1.0, 2.0])
    np.testing.assert_array_equal(jt.grad(lambda x, z: np.sum(np.exp(x)), argnum=1, mode=mode)(x, z), np.zeros(2))


@pytest.mark.parametrize("f", [lambda x: np.sum(2.0 * x), lambda x: np.sum(x @ np.ones((3, 4)))],
                         ids=["sum", "linear map"])
def test_hessian_of_a_linear_function_is_zero_and_compresses_to_one_number(f):
    x = np.array([0.3, -0.2, 0.5])
    np.testing.assert_array_equal(jt.hessian(f)(x), np.zeros((3, 3)))
    compressed = jt.hessian(f, compress=True)(x)
    np.testing.assert_array_equal(compressed.dense(), np.zeros((3, 3)))
    assert compressed.nbytes == 8 < compressed.dense_nbytes == 72


def test_vjp_and_jvp_of_the_identity_and_of_an_unused_argument():
    x, z = np.array([0.3, -0.2, 0.5]), np.array([1.0, 2.0])
    value, back = jt.vjp(lambda x, z: x, x, z)
    np.testing.assert_array_equal(value, x)
    gx, gz = back(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(gx, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(gz, np.zeros(2))
    value, tangent = jt.jvp(lambda x, z: x, (x, z), (np.array([1.0, 0.0, -1.0]), np.ones(2)))
    np.testing.assert_array_equal(tangent, [1.0, 0.0, -1.0])


# ---------------------------------------------------------------------------- planning: fusion and δ scatters
def test_dense_hessian_scatters_its_deltas_instead_of_multiplying_by_them():
    """The dense matrix-factorization Hessian δ(i,i')·2VᵀV is written along the diagonal
    of a zero array; no n × n identity is materialized and no FLOP is spent on it."""
    rng = np.random.default_rng(3)
    U, V, T = rng.normal(size=(40, 3)), rng.normal(size=(40, 3)), rng.normal(size=(40, 40))
    d = jt.derivative_expression(matrix_factorization, U, V, T, order=2)
    program = Program([d.expression], d.inputs)
    assert "scatter" in [step[1] for step in program._steps]
    assert all(c.size < 40 * 40 for c in program._constants.values())
    np.testing.assert_allclose(program(U, V, T)[0], np.einsum("ik,jl->ijkl", np.eye(40), 2 * V.T @ V), **TOL)
    assert d.flops < 40 * 40 * 3 * 3  # far below one FLOP per Hessian entry


def test_fused_contraction_is_planned_whole():
    """The compressed MF Hessian's three-operand chain gets the n·k² bracketing (V⊗V first)."""
    from jacacc.tensor.expr import fuse_einsums

    rng = np.random.default_rng(4)
    n, k = 60, 3
    U, V, T = rng.normal(size=(n, k)), rng.normal(size=(n, k)), rng.normal(size=(n, n))
    mask = (rng.random((n, n)) < 0.5).astype(float)
    f = lambda U, V, T, M: np.sum((M * (T - U @ V.T)) ** 2)  # noqa: E731
    d = jt.derivative_expression(f, U, V, T, mask, order=2)
    stored = d.factor.tensor
    (fused,) = fuse_einsums([stored])
    assert flops_total(fused) < flops_total(stored)
    compressed = jt.hessian(f, compress=True)(U, V, T, mask)
    blocks = 2 * np.einsum("ij,jk,jl->ikl", mask**2, V, V)
    np.testing.assert_allclose(np.sort(compressed.stored.ravel()), np.sort(blocks.ravel()), **TOL)


def flops_total(root):
    return sum(node_flops(n) for n in nodes_of([root]))


def test_a_chain_cheaper_only_as_a_whole_is_fused_whole():
    """The ten-layer net's first-layer Hessian ends in a ⊗ b, times c, summed against a: each
    pair kept apart costs as much as inlined (so neither is inlined alone), the whole chain
    costs fewer FLOPs and writes no n⁴ intermediate: it becomes one einsum."""
    from jacacc.tensor.expr import einsum, fuse_einsums, var

    n = 12
    a, b, c = var("a", (n, n)), var("b", (n, n)), var("c", (n, n, n))
    ab = einsum("sp,pq->spq", a, b)
    abc = einsum("spq,pqr->spqr", ab, c)
    root = einsum("spqr,lp->sqrl", abc, a)
    (fused,) = fuse_einsums([root])
    assert fused.kind == "einsum" and len(fused.args) == 4 and not any(x.kind == "einsum" for x in fused.args)
    assert flops_total(fused) < flops_total(root)
    rng = np.random.default_rng(5)
    values = {"a": rng.normal(size=(n, n)), "b": rng.normal(size=(n, n)), "c": rng.normal(size=(n, n, n))}
    (got,) = Program([fused], [a, b, c])(values["a"], values["b"], values["c"])
    np.testing.assert_allclose(got, np.einsum("sp,pq,pqr,lp->sqrl", values["a"], values["b"], values["c"],
                                              values["a"]), **TOL)


def test_an_elementwise_product_before_a_matrix_product_is_kept_apart():
    """Inlining ``u[i]·w[j]·M[i,j]`` into ``… @ Wᵀ`` saves FLOPs (w scales W, u the product) but
    writes larger intermediates than the one product, which a fused kernel computes in a pass:
    the product stays apart."""
    from jacacc.tensor.expr import einsum, fuse_einsums, var

    u, w, M, W = var("u", (256,)), var("w", (64,)), var("M", (256, 64)), var("W", (64, 64))
    product = einsum("i,ij->ij", u, einsum("j,ij->ij", w, M))
    root = einsum("ij,mj->im", product, W)
    whole = einsum("i,j,ij,mj->im", u, w, M, W)
    assert flops_total(whole) < flops_total(root)  # what inlining everything would save
    (fused,) = fuse_einsums([root])
    assert fused.args[1] is W and fused.args[0].shape == (256, 64) and fused.args[0].kind == "einsum"


def test_a_transposed_product_is_one_einsum():
    """``(Gᵀ X)ᵀ`` — a gradient with respect to a matrix, taken as ``ij,im->jm`` and then
    transposed — is one einsum ``ij,im->mj``: the same FLOPs (a tie, which keeps other operands
    apart), one step fewer, and it runs as ``Xᵀ @ G``."""
    from jacacc.tensor.expr import einsum, fuse_einsums, var

    G, X = var("G", (128, 8)), var("X", (128, 6))
    root = einsum("ji->ij", einsum("ij,im->jm", G, X))
    (fused,) = fuse_einsums([root])
    assert fused.kind == "einsum" and [a.param for a in fused.args] == ["G", "X"]
    assert flops_total(fused) == flops_total(root)
    rng = np.random.default_rng(6)
    g, x = rng.normal(size=(128, 8)), rng.normal(size=(128, 6))
    (got,) = Program([fused], [G, X])(g, x)
    np.testing.assert_allclose(got, x.T @ g, **TOL)


def test_unit_axes_run_without_their_ones_and_never_write_an_input():
    """``x[:, None]`` and ``keepdims`` are einsums with a ones array of one entry; their steps read
    only the other operands and reshape.  A unit axis put into an input is a view of it, so a sum
    that takes it as its first term must not add into it."""
    from jacacc.tensor.arrays import insert_unit_axes
    from jacacc.tensor.expr import add, einsum, var

    X, Y = var("X", (4, 3)), var("Y", (4, 1, 3))
    kept = insert_unit_axes(einsum("ij->i", X), (1,))
    root = add(insert_unit_axes(X, (1,)), Y)
    program = Program([root, kept], [X, Y], fuse_kernels=False)  # the sum a step of its own
    steps = [op for _, kind, op, _, _ in program._steps if kind == "einsum"]
    assert sorted(s.subscripts for s in steps) == ["ik->i", "ik->ik"]
    assert {s.shape for s in steps} == {(4, 1, 3), (4, 1)}
    rng = np.random.default_rng(7)
    x, y = rng.normal(size=(4, 3)), rng.normal(size=(4, 1, 3))
    before = x.copy()
    for run in (program, lambda *a: program.interpret(np, a), Program([root, kept], [X, Y])):
        total, sums = run(x, y)
        np.testing.assert_array_equal(x, before)
        np.testing.assert_allclose(total, x[:, None, :] + y, **TOL)
        np.testing.assert_allclose(sums, x.sum(1, keepdims=True), **TOL)


@pytest.mark.parametrize("layout", ["C", "F", "transposed", "sliced"])
@pytest.mark.parametrize("class_axes", [((0,), (2,), (1, 3)), ((1, 3), (0,), (2,)), ((0, 1, 2, 3),)])
def test_diagonal_views_of_every_layout_write_where_as_strided_does(layout, class_axes):
    """A δ scatter's view of its array — through the buffer for an array filling one block of
    memory in any order of its axes (a broadcast product of transposed operands gives such a
    sum), through ``as_strided`` for the others — adds at the same entries, call after call."""
    from jacacc.tensor.steps import Diagonals, _diagonal_view, scatter_add

    shape = (3, 4, 3, 4) if len(class_axes) == 3 else (3, 3, 3, 3)

    def make() -> np.ndarray:
        wide = np.arange(float(np.prod(shape) * 2)).reshape(shape[:-1] + (2 * shape[-1],))
        dense = wide[..., :shape[-1]].copy()
        return {"C": dense, "F": np.asfortranarray(dense), "sliced": wide[..., ::2],
                "transposed": dense.transpose(2, 0, 3, 1).copy().transpose(1, 3, 0, 2)}[layout]

    core_ndim = 2 if len(class_axes) == 3 else 1
    diagonals = Diagonals(shape, class_axes, core_ndim)
    core = np.random.default_rng(8).normal(size=tuple(shape[a[0]] for a in class_axes[:core_ndim]))
    want = make()
    _diagonal_view(np, want, class_axes)[...] += diagonals.core(core)
    for _ in range(2):  # the second call reads the layout worked out by the first
        got = make()
        assert got.shape == shape and (layout != "transposed" or not (got.flags.c_contiguous or got.flags.f_contiguous))
        scatter_add(np, got, diagonals, core)
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------- value_and_grad
@pytest.mark.parametrize("mode", ["reverse", "cross_country", "forward"])
def test_value_and_grad_matches_jax(mode):
    rng = np.random.default_rng(21)
    U, V, T = rng.normal(size=(5, 2)), rng.normal(size=(5, 2)), rng.normal(size=(5, 5))
    vg = jt.value_and_grad(matrix_factorization, argnum=(0, 1), mode=mode)
    value, (gU, gV) = vg(U, V, T)
    want_value, (wU, wV) = jax.value_and_grad(lambda *a: matrix_factorization(*a, xp=jnp), argnums=(0, 1))(
        *_j(U, V, T))
    np.testing.assert_allclose(value, want_value, **TOL)
    np.testing.assert_allclose(gU, wU, **TOL)
    np.testing.assert_allclose(gV, wV, **TOL)
    single_value, gU_only = jt.value_and_grad(matrix_factorization, argnum=0, mode=mode)(U, V, T)
    np.testing.assert_allclose(gU_only, wU, **TOL)
    assert len(vg.plans) == 1
    vg(U + 1, V, T)
    assert len(vg.plans) == 1  # same shapes: the same plan


@pytest.mark.parametrize("mode", ["forward", "reverse", "cross_country"])
def test_tuple_argnums_in_grad_jacobian_and_hessian_nest_as_jax(mode):
    """argnum=(i, j): a tuple of gradients or Jacobians, and the Hessian's blocks nested
    ``H[a][b] = ∂²f/∂x_a∂x_b`` (once a TypeError for everything but value_and_grad)."""
    rng = np.random.default_rng(1)
    x, A = rng.normal(size=3), rng.normal(size=(3, 2))

    def f(x, A, xp=np):
        return xp.sum(xp.tanh(x @ A) ** 2) * xp.sum(x)

    def g(x, A):
        return f(x, A, jnp)

    for got, want in zip(jt.grad(f, argnum=(0, 1), mode=mode)(x, A), jax.grad(g, argnums=(0, 1))(x, A), strict=True):
        np.testing.assert_allclose(got, want, **TOL)
    jacobians = jt.jacobian(lambda x, A: np.tanh(x @ A), argnum=(1, 0), mode=mode)(x, A)
    for got, want in zip(jacobians, jax.jacobian(lambda x, A: jnp.tanh(x @ A), argnums=(1, 0))(x, A), strict=True):
        np.testing.assert_allclose(got, want, **TOL)
    H, HJ = jt.hessian(f, argnum=(0, 1), mode=mode)(x, A), jax.hessian(g, argnums=(0, 1))(x, A)
    assert len(H) == 2 and all(len(row) == 2 for row in H)
    for a in range(2):
        for b in range(2):
            np.testing.assert_allclose(H[a][b], HJ[a][b], **TOL)
    with pytest.raises(ValueError, match="compress=True"):
        jt.hessian(f, argnum=(0, 1), compress=True)


@pytest.mark.parametrize("mode", ["forward", "reverse", "cross_country"])
def test_the_gradients_of_several_arguments_compute_the_function_once(mode):
    """grad with several argnums is one elimination: attention's scores ``X Wq Wkᵀ Xᵀ`` and their
    softmax are computed once for the gradients of Wq, Wk and Wv (they were computed once per
    argument, each folded into products its own way), an argument named twice included."""
    import scipy.special

    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    Ws = [rng.normal(size=(4, 4)) / 2 for _ in range(3)]

    def f(Wq, Wk, Wv, xp=np):
        softmax = scipy.special.softmax if xp is np else jax.nn.softmax
        return 0.5 * xp.mean((softmax((X @ Wq) @ (X @ Wk).T, axis=-1) @ (X @ Wv) - Y) ** 2)

    def g(Wq, Wk, Wv):
        return f(Wq, Wk, Wv, jnp)

    transformed = jt.grad(f, argnum=(0, 1, 2, 0), mode=mode)
    got = transformed(*Ws)
    want = jax.grad(g, argnums=(0, 1, 2))(*Ws)
    for a, b in zip(got, (*want, want[0]), strict=True):
        np.testing.assert_allclose(a, b, **TOL)
    (program,) = transformed.plans.values()
    shifts = [n for n in nodes_of(program.outputs) if n.kind == "op" and n.param[0] == "shift_extremum"]
    assert len(shifts) == 1


@pytest.mark.parametrize("joint", [True, False], ids=["joint rows", "by blocks"])
def test_hessian_blocks_of_several_arguments_in_joint_rows_or_by_blocks(joint, monkeypatch):
    """The Hessian's blocks come from the first derivatives of one elimination, then rows of blocks
    from one elimination each or every block from its own, whichever costs fewer FLOPs: each arm
    (forced here through the FLOP count) gives JAX's blocks, an argument named twice included."""
    import jacacc.tensor.api as api

    counts = iter([0, 1] if joint else [1, 0])
    monkeypatch.setattr(api, "flops_of", lambda roots: next(counts))
    rng = np.random.default_rng(3)
    W, b, x = rng.normal(size=(3, 2)), rng.normal(size=2), rng.normal(size=(5, 3))

    def f(W, b, xp=np):
        return xp.sum(xp.tanh(x @ W + b) ** 3) + xp.sum(W ** 2) * xp.sum(b)

    H = jt.hessian(f, argnum=(0, 1, 0), mode="cross_country")(W, b)
    HJ = jax.hessian(lambda W, b: f(W, b, jnp), argnums=(0, 1))(W, b)
    for a, ja in enumerate((0, 1, 0)):
        for c, jc in enumerate((0, 1, 0)):
            np.testing.assert_allclose(H[a][c], HJ[ja][jc], **TOL)
    with pytest.raises(StopIteration):  # both arms were costed
        next(counts)


def test_value_and_grad_of_an_unused_argument_and_of_a_vector_function():
    x, z = np.array([0.5, -0.2]), np.array([1.0, 2.0, 3.0])
    value, (gx, gz) = jt.value_and_grad(lambda x, z: np.sum(np.sin(x)), argnum=(0, 1))(x, z)
    np.testing.assert_allclose(gx, np.cos(x), **TOL)
    np.testing.assert_array_equal(gz, np.zeros(3))
    with pytest.raises(jacacc.TraceError, match="scalar-valued"):
        jt.value_and_grad(np.sin)(x)
    with pytest.raises(ValueError, match="out of range"):
        jt.value_and_grad(lambda x: np.sum(x), argnum=(0, 3))(x)
