"""The problem zoo: benchmark functions and graphs from the Jacobian-accumulation literature.

``names()`` lists the entries, ``get(name)`` returns a :class:`Problem`.
Function entries (``problem.fn``) are NumPy-style scalar functions ready for
:func:`jacacc.trace`; graph entries are built directly.  Every entry gives a
:class:`~jacacc.graph.CompGraph` through ``problem.graph()``.

Examples
--------
>>> from jacacc import problems
>>> "RoeFlux_1d" in problems.names()
True
>>> problems.get("RoeFlux_1d").sample(seed=1).shape
(6,)
"""

# importing the modules registers their entries, in this order
from jacacc.problems import functions as _functions  # noqa: F401
from jacacc.problems import generators as _generators  # noqa: F401
from jacacc.problems import networks as _networks  # noqa: F401
from jacacc.problems import paper003 as _paper003  # noqa: F401
from jacacc.problems.base import Problem, get, names, register
from jacacc.problems.functions import roe_flux_1d

__all__ = ["Problem", "get", "names", "register", "roe_flux_1d"]

# registered last, so that the older entries keep their places in names()
from jacacc.problems import alphagrad as _alphagrad  # noqa: E402, F401
