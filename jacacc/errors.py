"""Exception types raised by jacacc.

Every error a user can provoke with bad input derives from :class:`JacaccError`,
so callers can catch one type; each subclass also derives from the builtin
exception a Python user would expect (``ValueError``, ``TypeError``,
``ImportError``, ``numpy.linalg.LinAlgError``).
"""

from __future__ import annotations

from numpy.linalg import LinAlgError  # numpy is a core dependency; numpy.linalg loads with numpy


class JacaccError(Exception):
    """Base class of every error jacacc raises on purpose."""


class GraphError(JacaccError, ValueError):
    """A computational graph is malformed: cycle, bad edge, unknown node, ..."""


class OrderError(JacaccError, ValueError):
    """An elimination order is invalid for the graph it is applied to."""


class RegistryError(JacaccError, ValueError):
    """An unknown mode, method or backend name was requested."""


class UnsupportedOperationError(JacaccError, TypeError):
    """The tracer met an operation it has no derivative rule for."""


class TraceError(JacaccError, ValueError):
    """A function cannot be traced as called: bad ``n_inputs``, an output that is
    not a number or traced value, a tracer used outside its trace."""


class DTypeError(JacaccError, TypeError):
    """An argument's dtype is not one jacacc computes with: complex, string,
    object or another non-real dtype (the message names the argument)."""


class SizeLimitError(JacaccError, ValueError):
    """A problem would exceed a size budget (``from_jax``'s ``max_edges``, a
    nesting depth): the message names the size and the budget, and where to go
    instead."""


class NotPositiveDefiniteError(JacaccError, LinAlgError):
    """A matrix that must be symmetric positive definite is not: its Cholesky
    factorization (``jacacc.linalg.potrf``) or the inverse from a singular
    Cholesky factor (``potri``) failed; the message names the operator and the
    batch index."""


class GridError(JacaccError, ValueError):
    """A sweep's grid (``jacacc sweep GRID.json``) is malformed: not JSON, an
    unknown key, problem, mode, method or option, a bad seed; the message names
    the entry."""


class MissingExtraError(JacaccError, ImportError):
    """An optional dependency (an *extra*) is needed but not installed."""


def require_real_dtype(dtype, what: str, package: str) -> None:
    """Raise :class:`DTypeError` naming ``what`` unless ``dtype`` is real numeric.

    Floats, signed and unsigned integers and booleans pass; complex (whose
    imaginary part a float conversion would drop with only a warning),
    strings, bytes, objects, dates and every other kind are refused.  One
    check for every package that takes arrays (``package`` names it in the
    message).

    >>> import numpy as np
    >>> require_real_dtype(np.dtype("int32"), "the argument 'x'", "jacacc.tensor")
    >>> require_real_dtype(np.dtype("complex64"), "the argument 'x'", "jacacc.tensor")
    Traceback (most recent call last):
    ...
    jacacc.errors.DTypeError: the argument 'x' is complex (complex64); jacacc.tensor computes with real numbers (pass the real and imaginary parts separately)
    """
    if dtype.kind == "c":
        raise DTypeError(f"{what} is complex ({dtype}); {package} computes with real numbers "
                         "(pass the real and imaginary parts separately)")
    if dtype.kind not in "fiub":
        raise DTypeError(f"{what} has dtype {dtype}; {package} takes arrays of real numbers "
                         "(floats, integers or booleans)")


def require_extra(module: str, extra: str):
    """Import ``module`` or raise :class:`MissingExtraError` naming ``extra``.

    Heavy dependencies (ortools, numba, cupy, matplotlib, jax, torch) are
    imported only inside the functions that need them; this keeps
    ``import jacacc`` cheap and gives one clear message when one is missing.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(
            f"{module!r} is not installed; install it with "
            f"`pip install 'jacacc[{extra}]'`"
        ) from exc
