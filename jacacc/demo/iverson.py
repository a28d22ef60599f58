"""Demo part ``iverson`` (paper 001): the gradient of the trace in Iverson notation, at no cost.

Paper 001 §1: naive reverse mode writes the n² − n zeros of the trace's
gradient; with Iverson brackets the gradient of ``Σ_i A[i, i]`` is the
program ``⊞_i ⊞_j [i = j]`` (diag) and costs no arithmetic under the §4.3
model, while the trace costs n − 1 additions.  Printed with its cost beside
the function's, checked numerically (the compiled NumPy program at n = 1000
against the identity; the interpreter against central differences at small
n) and the cost model against the instrumented interpreter.  ``tr(AB)``,
whose gradient w.r.t. ``A`` is ``Bᵀ`` (a pure read), is shown beside.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from jacacc.demo.registry import register_part
from jacacc.demo.report import Report, central_differences

if TYPE_CHECKING:
    from jacacc.iverson import Expr

__all__ = ["FD_RTOL", "N", "SMALL_N", "run", "trace_product_program", "trace_program"]

N = 1000
SMALL_N = 4  # the interpreter, central differences and the instrumented count run at this size
FD_RTOL = 1e-8


def _operations(cost: dict[str, int]) -> int:
    return sum(cost.values())


def trace_program(n: int) -> Expr:
    """``Σ_{i<n} A[i, i]`` for an n × n input ``A``."""
    import jacacc.iverson as iv

    A, i = iv.var("A", (n, n)), iv.index("i")
    return iv.sum(i, n, A[i, i])


def trace_product_program(n: int) -> Expr:
    """``tr(AB) = Σ_i Σ_j A[i, j]·B[j, i]`` for n × n inputs ``A`` and ``B``."""
    import jacacc.iverson as iv

    A, B, i, j = iv.var("A", (n, n)), iv.var("B", (n, n)), iv.index("i"), iv.index("j")
    return iv.sum(i, n, iv.sum(j, n, A[i, j] * B[j, i]))


@register_part("iverson", "paper 001: the trace's gradient in Iverson notation, diag at zero cost")
def run(report: Report) -> None:
    """Print the trace's gradient with its cost and check it numerically."""
    import jacacc.iverson as iv

    f = trace_program(N)
    g = iv.grad(f, iv.var("A", (N, N)))
    cost_f, cost_g = iv.cost(f), iv.cost(g)
    report.line(f"f(A) = {f}")
    report.line(f"grad f = {g}")
    report.line(f"cost f = {cost_f}, cost grad f = {cost_g}")
    report.headline(f"grad tr(A) = {g}: {_operations(cost_g)} operations against the trace's "
                    f"{_operations(cost_f)} ({N} × {N}; a dense reverse mode writes {N * N:,} entries)")
    report.require(f"cost(grad f) = 0 and cost(f) = n − 1 = {N - 1} additions (paper 001 §1)",
                   _operations(cost_g) == 0 and cost_f == {"add": N - 1, "mul": 0, "nonlinear": 0})
    A = np.random.default_rng(0).random((N, N))
    G = iv.compile(g, backend="numpy")(A=A)
    report.require(f"the compiled (NumPy) gradient at n = {N} equals the identity exactly", np.array_equal(G, np.eye(N)))

    n = SMALL_N
    small_f, A_small = trace_program(n), iv.var("A", (n, n))
    small_g = iv.grad(small_f, A_small)
    X = np.random.default_rng(1).random((n, n))
    fd = central_differences(lambda a: iv.evaluate(small_f, A=a), X)
    report.close(f"interpreted gradient vs central differences (n = {n})", iv.evaluate(small_g, A=X), fd, FD_RTOL)
    report.require(f"the cost model equals the instrumented interpreter's count (n = {n})",
                   iv.cost(small_f) == iv.count_operations(small_f, A=X)
                   and iv.cost(small_g) == iv.count_operations(small_g, A=X))

    p = trace_product_program(n)
    gp = iv.grad(p, A_small)
    B = np.random.default_rng(2).random((n, n))
    report.line(f"beside it, tr(AB) (n = {n}): ∂/∂A = {gp}, cost {_operations(iv.cost(gp))} against "
                f"{_operations(iv.cost(p))}")
    gradient = iv.evaluate(gp, A=X, B=B)
    report.require(f"∂tr(AB)/∂A equals Bᵀ exactly (n = {n})", np.array_equal(gradient, B.T))
    report.close(f"∂tr(AB)/∂A vs central differences (n = {n})", gradient,
                 central_differences(lambda a: iv.evaluate(p, A=a, B=B), X), FD_RTOL)
