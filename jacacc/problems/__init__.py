"""The problem zoo: benchmark functions from the Jacobian-accumulation literature.

Each entry is a scalar NumPy-style function of a vector ``x`` together with
its input count and a valid evaluation point, ready for :func:`jacacc.trace` (module :mod:`jacacc.tracer`).
"""

from jacacc.problems.functions import PROBLEMS, Problem, get_problem, roe_flux_1d

__all__ = ["PROBLEMS", "Problem", "get_problem", "roe_flux_1d"]
