"""The backend registry of :mod:`jacacc.codegen`: names → :class:`~jacacc.codegen.base.Backend` subclasses.

Below both the package and :mod:`jacacc.codegen.compile`, which looks its
backend up here (so neither imports the other back).
"""

from __future__ import annotations

import inspect
from typing import Any

from jacacc.codegen.base import Backend
from jacacc.codegen.cupy_ import CupyBackend
from jacacc.codegen.numba_ import NumbaBackend
from jacacc.codegen.numpy_ import NumpyBackend
from jacacc.errors import RegistryError

__all__ = ["backends", "get_backend", "register_backend", "unregister_backend"]

_BACKENDS: dict[str, type[Backend]] = {}


def register_backend(name: str, backend: type[Backend], *, replace: bool = False) -> type[Backend]:
    """Register a :class:`Backend` subclass under ``name``.

    Examples
    --------
    >>> class Mine(NumpyBackend):
    ...     name = "mine"
    >>> _ = register_backend("mine", Mine)
    >>> "mine" in backends()
    True
    >>> _ = unregister_backend("mine")
    """
    if not (isinstance(backend, type) and issubclass(backend, Backend)):
        raise TypeError(f"a backend is a Backend subclass, got {backend!r}")
    if name in _BACKENDS and not replace:
        raise RegistryError(f"backend {name!r} is already registered; pass replace=True to override")
    _BACKENDS[name] = backend
    return backend


def unregister_backend(name: str) -> type[Backend]:
    """Remove a backend from the registry and return it."""
    get_backend(name)
    return _BACKENDS.pop(name)


def get_backend(backend: str | type[Backend] | Backend, **options: Any) -> Backend:
    """A backend instance: by registered name, from a Backend subclass, or as given.

    ``options`` go to the backend's constructor (numba: ``max_statements``, ``fastmath``).
    """
    if isinstance(backend, Backend):
        if options:
            raise TypeError("backend options are given to a backend name or class, not to an instance")
        return backend
    if isinstance(backend, type) and issubclass(backend, Backend):
        cls = backend
    else:
        cls = _BACKENDS.get(backend) if isinstance(backend, str) else None
        if cls is None:
            raise RegistryError(f"unknown backend {backend!r}; valid backends: {', '.join(backends())}")
    _check_options(cls, options)
    return cls(**options)


def _check_options(cls: type[Backend], options: dict[str, Any]) -> None:
    """Refuse options the backend's constructor does not take, naming the ones it does."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # no signature to check against: let the constructor decide
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    unknown = sorted(set(options) - set(params))
    if unknown:
        takes = ", ".join(params) or "no options"
        raise RegistryError(f"backend {getattr(cls, 'name', cls.__name__)!r} does not accept option(s) "
                            f"{', '.join(unknown)}; it takes: {takes}")


def backends() -> list[str]:
    """Registered backend names, sorted."""
    return sorted(_BACKENDS)


register_backend("numpy", NumpyBackend)
register_backend("numba", NumbaBackend)
register_backend("cupy", CupyBackend)
