"""Tensor calculus in Einstein notation on the elimination engines (paper 002).

Plain NumPy functions of arrays are traced into an expression DAG of generic
multiplications ``A *(s1,s2,s3) B``, sums and elementwise functions
(:mod:`~jacacc.tensor.trace`); the DAG becomes a computational graph whose
edges carry local partials as Einstein factors with symbolic Kronecker deltas
(:mod:`~jacacc.tensor.graph`, :mod:`~jacacc.tensor.factor`); the scalar core's
vertex elimination engine and order methods eliminate it — forward, reverse,
paper 002's cross-country rule or any vertex method of the registry — into a
derivative that is itself a tensor expression (:mod:`~jacacc.tensor.derive`),
so Hessians are derivatives of derivatives; expressions are planned once with
opt_einsum and evaluated many times (:mod:`~jacacc.tensor.evaluate`).

Examples
--------
>>> import numpy as np
>>> import jacacc.tensor as jt
>>> f = lambda w, X: np.sum(np.log1p(np.exp(X @ w)))
>>> X = np.arange(6.0).reshape(3, 2) / 10
>>> H = jt.hessian(f)(np.zeros(2), X)              # Xᵀ diag(s(1-s)) X at w = 0: Xᵀ X / 4
>>> np.allclose(H, X.T @ X / 4)
True
"""

from jacacc.tensor import arrays as _arrays  # noqa: F401 - registers NumPy's array functions
from jacacc.tensor import dynamic_index as _dynamic_index  # noqa: F401 - registers take_dynamic, scatter_dynamic
from jacacc.tensor import library as _library  # noqa: F401 - registers the library functions traced by name
from jacacc.tensor import numpy_linalg as _numpy_linalg  # noqa: F401 - registers the np.linalg handlers
from jacacc.tensor import numpy_more as _numpy_more  # noqa: F401 - registers more NumPy functions (roll, tile, mod, …)
from jacacc.tensor import scipy_functions as _scipy_functions  # noqa: F401 - registers scipy.stats/linalg
from jacacc.tensor import scipy_more as _scipy_more  # noqa: F401 - registers scipy.signal.convolve, solve_sylvester, …
from jacacc.tensor import special as _special  # noqa: F401 - registers scipy.special's log-gamma family
from jacacc.tensor.api import (
    CompressedHessian,
    DerivativeExpression,
    derivative_expression,
    grad,
    hessian,
    jacobian,
    jvp,
    value_and_grad,
    vjp,
)
from jacacc.tensor.derive import tensor_modes as modes
from jacacc.tensor.trace import trace

__all__ = ["CompressedHessian", "DerivativeExpression", "derivative_expression", "grad", "hessian", "jacobian",
           "jvp", "modes", "trace", "value_and_grad", "vjp"]
