"""More of SciPy on traced arrays: N-D convolution, Sylvester and banded solves, ODE solvers refused.

Each function is swapped in by name while a trace runs
(:func:`~jacacc.tensor.library.register_library`: SciPy converts its arguments with
``np.asarray``, which a traced array cannot serve) and written with the tracer's building
blocks, so its derivatives of every order, in every mode, follow from the calculus:

* ``scipy.signal.convolve(in1, in2, mode, method)`` of arrays of one rank (traced or constant,
  modes ``full``, ``same`` — ``in1``'s shape — and ``valid``; ``method`` has no effect on the
  value computed): one operand gathered into its Toeplitz arrangement and contracted with
  the other by an einsum (:func:`jacacc.tensor.numpy_more.convolve_nodes`, which ``np.convolve``
  uses too).  SciPy's ``direct`` method sums in another order and its ``fft`` method rounds
  otherwise: the values agree to rounding;
* ``scipy.linalg.solve_sylvester(a, b, q)`` (``AX + XB = Q``): the Kronecker form
  ``(A ⊗ I + I ⊗ Bᵀ) vec X = vec Q`` (``vec`` row by row) solved by ``np.linalg.solve``: the
  same solution as SciPy's Bartels–Stewart algorithm to rounding, at ``O(m³n³)`` cost: for small
  matrices;
* ``scipy.linalg.solve_banded((l, u), ab, b)``: the dense matrix gathered from the banded storage
  (``A[i, j] = ab[u + i − j, j]`` on the band, 0 off it: the entries of ``ab`` outside the band
  are not read, as LAPACK's ``gbsv``) and solved by ``np.linalg.solve``; ``overwrite_ab``,
  ``overwrite_b`` and ``check_finite`` have no effect.

Refused in one line naming the function: ``scipy.integrate.odeint`` and ``solve_ivp`` with
traced arguments (their adaptive solvers choose steps and methods from the values:
data-dependent control flow), a traced ``(l, u)``, and a ``mode`` or ``method`` SciPy does not know.
Called on plain arrays, inside a trace or not, every function is SciPy's own.

Examples
--------
>>> import numpy as np, scipy.signal
>>> import jacacc.tensor as jt
>>> kernel = np.array([1.0, -1.0])
>>> jt.grad(lambda x: np.sum(scipy.signal.convolve(x, kernel) ** 2))(np.array([1.0, 2.0, 4.0])).tolist()
[0.0, -2.0, 12.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jacacc.errors import TraceError, UnsupportedOperationError
from jacacc.tensor import expr as E
from jacacc.tensor.arrays import _advanced_index, reshape_node
from jacacc.tensor.library import _as_traced, _traced_inside, register_library
from jacacc.tensor.numpy_more import _window, convolve_nodes
from jacacc.tensor.operators import apply_operator
from jacacc.tensor.trace import Traced, _node

__all__: list[str] = []


def _array(value: Any) -> Any:
    """A traced array (nested lists holding traced values stacked), or a float ndarray."""
    return _as_traced(value, None) if _traced_inside(value) else np.asarray(value, dtype=float)


def _square(name: str, what: str, t: E.Tensor) -> int:
    if t.ndim != 2 or t.shape[0] != t.shape[1]:
        raise TraceError(f"{name}: {what} must be a square matrix, got shape {t.shape}")
    return t.shape[0]


# ---------------------------------------------------------------------------- scipy.signal
@register_library("scipy.signal:convolve", "scipy.signal._signaltools:convolve")
def _convolve(in1: Any, in2: Any, mode: Any = "full", method: Any = "auto") -> Any:
    """``scipy.signal.convolve`` of two arrays of one rank, any number of axes."""
    name = "scipy.signal.convolve"
    if _traced_inside(method) or method not in ("auto", "direct", "fft"):
        raise TraceError(f"{name}: method must be 'auto', 'direct' or 'fft', got {method!r}")
    a, b = _array(in1), _array(in2)
    x, y = _node(a), _node(b)
    if x.ndim != y.ndim:
        raise TraceError(f"{name}: in1 and in2 should have the same dimensionality, got shapes {x.shape} and {y.shape}")
    if x.ndim == 0:  # SciPy: the product of two scalars
        return a * b
    if x.size == 0 or y.size == 0:
        raise TraceError(f"{name}: empty operands (shapes {x.shape} and {y.shape}) are not supported")
    if mode == "valid" and not (all(p >= q for p, q in zip(x.shape, y.shape, strict=True))
                                or all(q >= p for p, q in zip(x.shape, y.shape, strict=True))):
        raise TraceError(f"{name}: for 'valid' mode, one must be at least as large as the other in every dimension "
                         f"(shapes {x.shape} and {y.shape})")
    return Traced(convolve_nodes(x, y, _window(name, mode, x.shape, y.shape, x.shape)))


# ---------------------------------------------------------------------------- scipy.integrate
def _refused_solver(name: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperationError(f"{name} with traced arguments is not supported by jacacc.tensor: its "
                                        "adaptive solver chooses steps and methods from the values (data-dependent "
                                        "control flow)")

    refuse.__name__ = f"refused_{name.rsplit('.', 1)[-1]}"
    return refuse


register_library("scipy.integrate:odeint", "scipy.integrate._odepack_py:odeint")(
    _refused_solver("scipy.integrate.odeint"))
register_library("scipy.integrate:solve_ivp", "scipy.integrate._ivp.ivp:solve_ivp")(
    _refused_solver("scipy.integrate.solve_ivp"))


# ---------------------------------------------------------------------------- scipy.linalg
@register_library("scipy.linalg:solve_sylvester", "scipy.linalg._solvers:solve_sylvester")
def _solve_sylvester(a: Any, b: Any, q: Any) -> Any:
    """``X`` with ``AX + XB = Q``: ``(A ⊗ I_n + I_m ⊗ Bᵀ) vec X = vec Q``, ``vec`` row by row."""
    name = "scipy.linalg.solve_sylvester"
    A, B, Q = (_node(_array(v)) for v in (a, b, q))  # noqa: N806 - the matrices' names
    m, n = _square(name, "a", A), _square(name, "b", B)
    if Q.shape != (m, n):
        raise TraceError(f"{name}: q of shape {Q.shape} does not match a {A.shape} and b {B.shape} (shape ({m}, {n}))")
    # K[(i, j), (k, l)] = A[i, k] δ[j, l] + δ[i, k] B[l, j]
    K = E.add(E.einsum("ik,jl->ijkl", A, E.delta(n)), E.einsum("ik,lj->ijkl", E.delta(m), B))  # noqa: N806
    x = np.linalg.solve(Traced(reshape_node(K, (m * n, m * n))), Traced(reshape_node(Q, (m * n,))))
    return np.reshape(x, (m, n))


@register_library("scipy.linalg:solve_banded", "scipy.linalg._basic:solve_banded")
def _solve_banded(l_and_u: Any, ab: Any, b: Any, overwrite_ab: Any = False, overwrite_b: Any = False,
                  check_finite: Any = True) -> Any:
    """``A x = b`` for ``A`` given by its diagonals ``ab`` (LAPACK's banded storage)."""
    name = "scipy.linalg.solve_banded"
    if _traced_inside(l_and_u):
        raise UnsupportedOperationError(f"{name} with a traced (l, u) is not supported by jacacc.tensor")
    lower, upper = (int(k) for k in l_and_u)
    band = _node(_array(ab))
    if band.ndim != 2:
        raise TraceError(f"{name}: ab must be a matrix of diagonals, got shape {band.shape}")
    rows, n = band.shape
    if rows != lower + upper + 1:
        raise TraceError(f"{name}: invalid values for the number of lower and upper diagonals: l+u+1 "
                         f"({lower + upper + 1}) does not equal ab.shape[0] ({rows})")
    i, j = np.indices((n, n))
    diagonal = upper + i - j  # the row of ab holding A[i, j]
    diagonal = np.where((diagonal >= 0) & (diagonal < rows), diagonal, rows)  # rows: a zero row padded below
    widths = ((0, 1), (0, 0))
    if band.kind == "const":
        dense = E.const(np.pad(band.value, widths)[diagonal, j])
    else:
        dense = _advanced_index(apply_operator("pad", [band], widths=widths)[0], (diagonal, j))
    rhs = _array(b)
    if np.ndim(rhs) not in (1, 2) or np.shape(rhs)[0] != n:
        raise TraceError(f"{name}: b of shape {np.shape(rhs)} does not match the {n} x {n} matrix")
    return np.linalg.solve(Traced(dense), rhs)
