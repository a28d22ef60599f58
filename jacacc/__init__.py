"""jacacc — Jacobian accumulation on computational graphs.

Build a linearized computational graph (from a traced function, JSON or
NetworkX), choose an elimination order (vertex or edge elimination by
heuristics, later face elimination, D* and exact search), turn it into a
straight-line :class:`Schedule` of multiplications and evaluate it.

``import jacacc`` imports NumPy and NetworkX only; heavy optional
dependencies are imported by the functions that need them.  Subpackages that
are not needed by the core (the problem zoo, the references in ``verify``,
the benchmark tools, plotting, the CLI) are imported on first attribute access
(PEP 562), so ``import jacacc`` followed by ``jacacc.problems.get(...)`` works
without importing them up front.

Examples
--------
>>> import numpy as np, jacacc
>>> f = jacacc.trace(lambda x: [x[0] * np.sin(x[1]), np.exp(x[0])], 2)
>>> plan = jacacc.optimize(f.graph, mode="vertex", method="markowitz")
>>> np.allclose(f.jacobian([1.0, 2.0]), [[np.sin(2.0), np.cos(2.0)], [np.e, 0.0]])
True
"""

import importlib
from typing import Any

from jacacc.api import Plan, optimize
from jacacc.bounds import structural_lower_bound
from jacacc.bracketing import expand_paths, to_expressions
from jacacc.codegen import compile
from jacacc.eliminate import EdgeStep, eliminate, modes
from jacacc.errors import (
    DTypeError,
    GraphError,
    JacaccError,
    MissingExtraError,
    OrderError,
    RegistryError,
    SizeLimitError,
    TraceError,
    UnsupportedOperationError,
)
from jacacc.graph import CompGraph, PrunedVerticesWarning, as_graph, reference_jacobian
from jacacc.jaxpr import from_jax
from jacacc.linegraph import line_graph
from jacacc.orders import OrderResult, get_method, methods, register_method
from jacacc.schedule import Op, Schedule
from jacacc.tracer import Traced, trace

__version__ = "0.1.0"

#: Submodules imported on first access as ``jacacc.<name>`` (PEP 562): the
#: ones ``import jacacc`` does not need itself.  Each is imported through
#: importlib, so a missing optional dependency surfaces as that module's own
#: clear error, not here.
LAZY_SUBMODULES: tuple[str, ...] = (
    "bench",
    "cli",
    "demo",
    "elementwise",
    "iverson",
    "linalg",
    "plot",
    "problems",
    "relations",
    "sweep",
    "tensor",
    "verify",
)


def __getattr__(name: str) -> Any:
    """Import a lazily loaded submodule on first access (PEP 562).

    Examples
    --------
    >>> import jacacc
    >>> jacacc.problems.get("RoeFlux_1d").sample(seed=1).shape
    (6,)
    """
    if name in LAZY_SUBMODULES:
        # import_module binds the submodule as an attribute of the package,
        # so this hook runs once per name.
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(LAZY_SUBMODULES))

__all__ = [
    "CompGraph",
    "DTypeError",
    "EdgeStep",
    "GraphError",
    "LAZY_SUBMODULES",
    "JacaccError",
    "MissingExtraError",
    "Op",
    "OrderError",
    "OrderResult",
    "Plan",
    "PrunedVerticesWarning",
    "RegistryError",
    "Schedule",
    "SizeLimitError",
    "TraceError",
    "Traced",
    "UnsupportedOperationError",
    "as_graph",
    "compile",
    "eliminate",
    "expand_paths",
    "from_jax",
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
