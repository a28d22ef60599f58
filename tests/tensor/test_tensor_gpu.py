"""jacacc.tensor on CuPy arrays (a CUDA GPU): the same derivatives as on NumPy arrays.

Skipped without CuPy or a GPU; run on a lent GPU machine with ``pytest -m gpu``.
"""

from __future__ import annotations

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
