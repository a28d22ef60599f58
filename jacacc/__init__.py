"""jacacc — Jacobian accumulation on computational graphs.

Build a linearized computational graph (from a traced function, JSON or
NetworkX), choose an elimination order (vertex or edge elimination by
heuristics, later face elimination, D* and exact search), turn it into a
straight-line :class:`Schedule` of multiplications and evaluate it.

``import jacacc`` imports NumPy and NetworkX only; heavy optional
dependencies are imported by the functions that need them.

Examples
--------
>>> import numpy as np, jacacc
>>> f = jacacc.trace(lambda x: [x[0] * np.sin(x[1]), np.exp(x[0])], 2)
>>> plan = jacacc.optimize(f.graph, mode="vertex", method="markowitz")
>>> np.allclose(f.jacobian([1.0, 2.0]), [[np.sin(2.0), np.cos(2.0)], [np.e, 0.0]])
True
"""

from jacacc.api import Plan, optimize, structural_lower_bound
from jacacc.codegen import compile
from jacacc.eliminate import EdgeStep, eliminate, modes
from jacacc.errors import (
    GraphError,
    JacaccError,
    MissingExtraError,
    OrderError,
    RegistryError,
    TraceError,
    UnsupportedOperationError,
)
from jacacc.expressions import expand_paths, to_expressions
from jacacc.graph import CompGraph, PrunedVerticesWarning, as_graph, reference_jacobian
from jacacc.linegraph import line_graph
from jacacc.orders import OrderResult, get_method, methods, register_method
from jacacc.schedule import Op, Schedule
from jacacc.tracer import Traced, trace

__version__ = "0.1.0"

__all__ = [
    "CompGraph",
    "EdgeStep",
    "GraphError",
    "JacaccError",
    "MissingExtraError",
    "Op",
    "OrderError",
    "OrderResult",
    "Plan",
    "PrunedVerticesWarning",
    "RegistryError",
    "Schedule",
    "TraceError",
    "Traced",
    "UnsupportedOperationError",
    "as_graph",
    "compile",
    "eliminate",
    "expand_paths",
    "get_method",
    "line_graph",
    "methods",
    "modes",
    "optimize",
    "reference_jacobian",
    "register_method",
    "structural_lower_bound",
    "to_expressions",
    "trace",
]
