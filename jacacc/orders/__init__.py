"""Elimination-order methods behind one registry.

Importing this package registers the built-in heuristics; later modules
(D*, exact search) register themselves the same way.
"""

from jacacc.orders import cpsat as _cpsat  # noqa: F401  (registers cpsat and optimal)
from jacacc.orders import dstar as _dstar  # noqa: F401  (registers D*, mode 'structure')
from jacacc.orders import edge_lns as _edge_lns  # noqa: F401  (registers lns, mode 'edge')
from jacacc.orders import exhaustive as _exhaustive  # noqa: F401  (registers the exact oracle)
from jacacc.orders import faces as _faces  # noqa: F401  (registers the face methods)
from jacacc.orders import heuristics as _heuristics  # noqa: F401  (registers the built-ins)
from jacacc.orders import levels as _levels  # noqa: F401  (registers blocks and levels, mode 'structure')
from jacacc.orders import local_search as _local_search  # noqa: F401  (registers anneal)
from jacacc.orders import scale as _scale  # noqa: F401  (registers the preaccumulation orders)
from jacacc.orders.registry import OrderResult, find_order, get_method, methods, register_method

__all__ = ["OrderResult", "find_order", "get_method", "methods", "register_method"]
