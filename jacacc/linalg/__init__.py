"""Linear algebra operators of paper 004 (Seeger et al., "Auto-Differentiating
Linear Algebra", §4) with MXNet's conventions: for now the forward kernels of
:mod:`jacacc.linalg.kernels` (BLAS/LAPACK, batched, float32/float64)."""

from jacacc.linalg.kernels import *  # noqa: F403
from jacacc.linalg.kernels import __all__ as __all__
