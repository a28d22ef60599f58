"""jacacc.tensor on CuPy arrays (a CUDA GPU): the same derivatives as on NumPy arrays, fused regions
run as the kernel layer's CUDA kernels.

Skipped without CuPy or a GPU; run on a lent GPU machine with ``pytest -m gpu``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jacacc.tensor as jt

pytestmark = pytest.mark.gpu


def logistic(w, X, y):
    return np.sum(np.log1p(np.exp(-y * (X @ w))))


def matrix_factorization(U, V, T):
    return np.sum((T - U @ V.T) ** 2)


def layer(W, X, Y):
    return np.sum((np.maximum(W @ X, 0) - Y) ** 2)


PROBLEMS = [
    ("logistic", logistic, lambda r: (r.normal(size=6), r.normal(size=(12, 6)), np.sign(r.normal(size=12)))),
    ("matrix factorization", matrix_factorization,
     lambda r: (r.normal(size=(7, 3)), r.normal(size=(7, 3)), r.normal(size=(7, 7)))),
    ("layer", layer, lambda r: (r.normal(size=(4, 3)), r.normal(size=(3, 5)), r.normal(size=(4, 5)))),
]


@pytest.mark.parametrize("mode", ["reverse", "cross_country"])
@pytest.mark.parametrize("problem", PROBLEMS, ids=[p[0] for p in PROBLEMS])
def test_cupy_arrays_give_the_numpy_derivatives(cupy_gpu, problem, mode):
    cp = cupy_gpu
    _, f, make = problem
    args = make(np.random.default_rng(0))
    device = [cp.asarray(a) for a in args]
    for transform in (jt.grad(f, mode=mode), jt.hessian(f, mode=mode)):
        want = transform(*args)
        got = transform(*device)
        assert isinstance(got, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(got), want, rtol=1e-10, atol=1e-12)
    compressed = jt.hessian(f, mode=mode, compress=True)
    np.testing.assert_allclose(cp.asnumpy(compressed(*device).dense()), compressed(*args).dense(), rtol=1e-10,
                               atol=1e-12)


# ----------------------------------------------------------------------------- fused regions as CUDA kernels
def logistic_l2(w, X, y):
    return np.sum(np.log1p(np.exp(-y * (X @ w)))) + 0.35 * np.sum(w * w)


def tanh_mlp(W1, X, w2, y):
    return np.sum((np.tanh(X @ W1.T) @ w2 - y) ** 2)


def softmax(W, X, Y):
    logits = X @ W.T
    z = logits - np.max(logits, axis=1, keepdims=True)
    return -np.sum(Y * (z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))))


def gaussian_nll(mu, logvar, X):
    return 0.5 * np.sum((X - mu) ** 2 / np.exp(logvar) + logvar)


FUSED = [
    ("logistic + L2", logistic_l2, lambda r: (r.normal(size=5), r.normal(size=(40, 5)), np.sign(r.normal(size=40)))),
    ("tanh MLP", tanh_mlp, lambda r: (r.normal(size=(6, 4)), r.normal(size=(30, 4)), r.normal(size=6),
                                      r.normal(size=30))),
    ("softmax", softmax, lambda r: (r.normal(size=(3, 4)), r.normal(size=(25, 4)), np.eye(3)[r.integers(0, 3, 25)])),
    ("Gaussian NLL", gaussian_nll, lambda r: (r.normal(size=6), r.normal(size=6), r.normal(size=(50, 6)))),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("problem", FUSED, ids=[p[0] for p in FUSED])
def test_fused_regions_run_as_cuda_kernels_on_cupy_arrays(cupy_gpu, monkeypatch, tmp_path, problem, dtype):
    """Every region fused (whatever its size); on CuPy arrays the interpreter runs each region's CUDA
    kernel (jacacc.kernels.cuda_source through CuPy) where it pays, with the NumPy program's values."""
    pytest.importorskip("numba")
    from jacacc.tensor import fusion

    cp = cupy_gpu
    monkeypatch.setattr(fusion, "FUSION_MIN_SIZE", 0)
    monkeypatch.setattr(fusion, "ENABLED", True)
    monkeypatch.setenv("JACACC_CACHE_DIR", str(tmp_path))
    _, f, make = problem
    args = [np.asarray(a, dtype=dtype) for a in make(np.random.default_rng(1))]
    tolerance = {"rtol": 1e-10, "atol": 1e-12} if dtype == "float64" else {"rtol": 2e-4, "atol": 2e-5}
    for transform in (jt.grad(f), jt.hessian(f)):
        want = transform(*args)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="jacacc.tensor could not run the fused CUDA kernel")
            got = transform(*(cp.asarray(a) for a in args))
        assert isinstance(got, cp.ndarray) and got.dtype == want.dtype
        np.testing.assert_allclose(cp.asnumpy(got), want, **tolerance)
        kernels = [n.param for program in transform.plans.values() for n in program.nodes if n.kind == "fused"]
        ran = [k for k in kernels if k._cuda_kernel is not None]
        assert kernels and ran, "no fused region ran as a CUDA kernel"
        assert all(k.cuda_worthwhile for k in ran)


# ----------------------------------------------------------------------------- array operators on CuPy arrays
def slices_and_max(x, A):
    """Basic indexing, np.max over an axis, reshape, concatenate and cumsum."""
    head, tail = x[:3], x[3:]
    z = A @ np.concatenate([tail, head]) - np.max(A, axis=1)
    return np.sum(np.cumsum(z.reshape(2, -1), axis=1) ** 2) + np.sum(x[::2] * x[1::2])


def gathers_and_sorts(x, A):
    """Advanced indexing with repeats, np.sort (argsort, take_along, put_along), np.pad, np.prod, a norm."""
    y = np.sort(A @ x)
    picked = x[np.array([0, 2, 2, 5])]
    return (np.sum(np.pad(y, 1) ** 2) + np.prod(np.tanh(picked)) + np.linalg.norm(x, np.inf)
            + np.sum(np.maximum(x, 0.1) * (x > 0)))


OPERATOR_PROBLEMS = [("slices and max", slices_and_max), ("gathers and sorts", gathers_and_sorts)]


@pytest.mark.parametrize("mode", ["reverse", "cross_country"])
@pytest.mark.parametrize("problem", OPERATOR_PROBLEMS, ids=[p[0] for p in OPERATOR_PROBLEMS])
def test_array_operators_run_on_cupy_arrays(cupy_gpu, problem, mode):
    """The array operators (indexing, max, sort, pad, ...) and the predicates run on the device: the
    CuPy result equals the NumPy one."""
    cp = cupy_gpu
    _, f = problem
    rng = np.random.default_rng(3)
    args = (rng.normal(size=6), rng.normal(size=(4, 6)))
    for transform in (jt.grad(f, mode=mode), jt.hessian(f, mode=mode)):
        want = transform(*args)
        got = transform(*(cp.asarray(a) for a in args))
        assert isinstance(got, cp.ndarray)
        np.testing.assert_allclose(cp.asnumpy(got), want, rtol=1e-10, atol=1e-12)


def test_lapack_operators_refuse_cupy_arrays_by_name(cupy_gpu):
    cp = cupy_gpu
    from jacacc.errors import UnsupportedOperationError

    def logdet(A):
        return np.linalg.slogdet(A @ A.T + np.eye(3))[1]

    A = np.random.default_rng(0).normal(size=(3, 3))
    with pytest.raises(UnsupportedOperationError, match="runs on NumPy arrays only"):
        jt.grad(logdet)(cp.asarray(A))
