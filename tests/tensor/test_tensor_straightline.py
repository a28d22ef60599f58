"""Straight-line programs (jacacc/tensor/straightline.py): the generated function gives exactly the
interpreter's results — bit for bit, since it runs the same NumPy calls in the same order — on
programs with every kind of step (contractions, δ scatters, sums with in-place accumulation and
δ terms added along diagonals, elementwise functions, general functions with several outputs),
and it never writes into its arguments or hands out its constants."""

from __future__ import annotations

import numpy as np
import pytest

import jacacc.tensor as jt
from jacacc import linalg
from jacacc.tensor import fusion

RNG = np.random.default_rng(7)


def _spd(n):
    a = RNG.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


CASES = {
    "logistic regression hessian": (lambda w, X, y: np.sum(np.log1p(np.exp(-y * (X @ w)))) + 0.3 * (w @ w),
                                    (RNG.normal(size=5), RNG.normal(size=(9, 5)), np.sign(RNG.normal(size=9)))),
    "outer product jacobian": (lambda x: np.outer(x, x) + np.diag(np.sin(x)), (RNG.normal(size=4),)),
    "self products": (lambda x: x * x * x + np.sum(x * x) * x, (RNG.normal(size=6),)),
    "slices and reductions": (lambda x: np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
                              + np.max(np.cumsum(x)), (RNG.normal(size=7),)),
    "cholesky log-determinant": (lambda A: 2 * linalg.sumlogdiag(linalg.potrf(A)), (_spd(3),)),
    "solve and slogdet": (lambda p, B: np.linalg.slogdet(B + np.diag(np.exp(p)))[1]
                          + np.sum(np.linalg.solve(B + np.eye(3), np.exp(p))),
                          (RNG.normal(size=3), _spd(3))),
    "scalar argument": (lambda x: x * x * x + np.sin(x), (np.float64(0.3),)),
}


def _programs(f, args):
    """The plans of the gradient (or Jacobian) and of the Hessian (or its first slice)."""
    scalar = np.shape(f(*args)) == ()
    transforms = [jt.grad(f), jt.hessian(f)] if scalar else [jt.jacobian(f)]
    for t in transforms:
        t(*args)
        yield from t.plans.values()


@pytest.mark.parametrize("name", list(CASES))
def test_straight_line_equals_the_interpreter_bit_for_bit(name, monkeypatch):
    # the same NumPy steps on both paths: a fused region's kernel sums in its own order, and the
    # interpreter runs the region node by node (fused against unfused: test_tensor_fusion, rtol 1e-12)
    monkeypatch.setattr(fusion, "ENABLED", False)
    f, args = CASES[name]
    arrays = [np.asarray(a, dtype=float) for a in args]
    for program in _programs(f, args):
        before = [a.copy() for a in arrays]
        fast = program(*arrays)
        slow = program.interpret(np, arrays)
        for got, expected in zip(fast, slow, strict=True):
            np.testing.assert_array_equal(got, expected)
        for a, b in zip(arrays, before, strict=True):  # arguments unchanged
            np.testing.assert_array_equal(a, b)
        assert "def straight_line(" in program._straight_line.source


def test_results_do_not_alias_constants_between_calls():
    """A Hessian that folds to a constant is handed out as a copy: writing into one result
    does not change the next."""
    h = jt.hessian(lambda w: w @ w)
    x = np.ones(3)
    first = h(x)
    first[...] = 99.0
    np.testing.assert_array_equal(h(x), 2 * np.eye(3))


def test_a_wrong_shape_is_refused_by_name():
    g = jt.grad(lambda x: np.sum(x ** 2))
    g(np.ones(3))
    program = next(iter(g.plans.values()))
    with pytest.raises(ValueError, match=r"argument 'x0?'? has shape \(4,\).*\(3,\)|has shape \(4,\)"):
        program(np.ones(4))


# ----------------------------------------------------------------------------- SciPy's BLAS for products
def test_scipy_matmul_equals_numpy_on_every_layout():
    from jacacc.tensor.straightline import scipy_matmul

    a, b = RNG.normal(size=(5, 7)), RNG.normal(size=(7, 4))
    layouts = {"C": lambda m: np.ascontiguousarray(m), "F": lambda m: np.asfortranarray(m),
               "strided": lambda m: np.repeat(m, 2, axis=1)[:, ::2]}
    for la, fa in layouts.items():
        for lb, fb in layouts.items():
            x, y = fa(a), fb(b)
            got = scipy_matmul(x, y)
            np.testing.assert_allclose(got, x @ y, rtol=1e-14, atol=1e-14, err_msg=f"{la} @ {lb}")
            assert got.flags.c_contiguous and got.dtype == np.float64
    got32 = scipy_matmul(a.astype(np.float32), b.astype(np.float32))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, a @ b, rtol=1e-5, atol=1e-5)
    # what ?gemm does not take goes to @: batches, vectors, mixed dtypes, empty factors
    batch = RNG.normal(size=(2, 5, 7))
    np.testing.assert_array_equal(scipy_matmul(batch, b), batch @ b)
    np.testing.assert_array_equal(scipy_matmul(a, b[:, 0]), a @ b[:, 0])
    assert scipy_matmul(a, b.astype(np.float32)).dtype == np.float64
    assert scipy_matmul(np.ones((3, 0)), np.ones((0, 2))).tolist() == [[0.0, 0.0]] * 3


def test_programs_calling_scipy_lapack_multiply_through_scipy_blas():
    """potrf's backward multiplies Lᵀ L̄ between SciPy's potrf and trsm calls: through SciPy's BLAS,
    so one OpenBLAS thread pool runs the program; a program of NumPy steps only keeps ``@``."""
    from jacacc.tensor.evaluate import Program

    # 48 × 48: products above OpenBLAS's one-thread size (smaller ones are NumPy's @ in any program)
    A, ct = _spd(48), np.tril(RNG.normal(size=(48, 48)))
    _, pullback = jt.vjp(lambda A: linalg.potrf(A), A)
    (got,) = pullback(ct)
    # the pullback's program, from the closure jt.vjp returns
    [program] = [c.cell_contents for c in pullback.__closure__ if isinstance(c.cell_contents, Program)]
    source = program._straight_line.source
    assert "matmul" in source and " @ " not in source
    L = np.linalg.cholesky(A)
    Lbar = ct
    phi = np.tril(L.T @ Lbar) - 0.5 * np.diag(np.diag(L.T @ Lbar))
    P = np.linalg.solve(L.T, np.linalg.solve(L.T, phi.T).T)
    np.testing.assert_allclose(got, 0.5 * (P + P.T), rtol=1e-10, atol=1e-12)
    plain = jt.grad(lambda x, M: np.sum(np.tanh(M @ x)))
    plain(RNG.normal(size=3), RNG.normal(size=(4, 3)))
    (only,) = plain.plans.values()
    assert "matmul" not in only._straight_line.source
