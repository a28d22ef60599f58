"""The registry of elimination-order methods, one namespace per mode (opt_einsum style).

A method is a callable ``finder(graph, *, seed=None, **options) -> order``
that looks at structure only and returns an order for its mode (a list of
intermediates for ``"vertex"``, a list of :class:`~jacacc.eliminate.EdgeStep`
for ``"edge"``), or an :class:`OrderResult` when it also knows a bound or
proves optimality.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.errors import RegistryError
from jacacc.graph import CompGraph

__all__ = ["OrderResult", "explicit_order", "find_order", "get_method", "methods", "register_explicit_order",
           "register_method"]

Finder = Callable[..., Any]
_METHODS: dict[str, dict[str, Finder]] = {"vertex": {}, "edge": {}, "face": {}}


@dataclass(frozen=True)
class OrderResult:
    """What an order method returns when it knows more than the order.

    ``optimal`` is True when the method proves the order optimal for its mode,
    False when it knows it is not, None when it cannot tell; ``lower_bound``
    is a proven lower bound on the multiplications of any order of the mode.
    """

    order: Sequence[Any]
    optimal: bool | None = None
    lower_bound: int | None = None


_EXACT: set[tuple[str, str]] = set()


def register_method(
    name: str, finder: Finder | None = None, *, modes: Sequence[str] = ("vertex", "edge"), exact: bool = False
):
    """Register ``finder`` as method ``name`` for each of ``modes``.

    Usable as a decorator: ``@register_method("mine", modes=["vertex"])``.
    A new mode name creates that mode's namespace.  ``exact=True`` marks an
    exact (exponential-time) search: it is listed by :func:`methods` but left
    out of ``methods(mode, exact=False)``, which sweeps over random graphs use.
    """

    def decorate(fn: Finder) -> Finder:
        for mode in modes:
            _METHODS.setdefault(mode, {})[name] = fn
            if exact:
                _EXACT.add((mode, name))
            else:
                _EXACT.discard((mode, name))
        return fn

    return decorate(finder) if finder is not None else decorate


def _check_mode(mode: str) -> dict[str, Finder]:
    try:
        return _METHODS[mode]
    except (KeyError, TypeError):
        raise RegistryError(f"unknown mode {mode!r}; valid modes: {', '.join(_METHODS)}") from None


def methods(mode: str = "vertex", *, exact: bool | None = None) -> list[str]:
    """The method names registered for ``mode``; ``exact=False`` / ``True`` keeps
    only the heuristic / only the exact (exhaustive-search) ones.

    Examples
    --------
    >>> "markowitz" in methods("vertex") and "markowitz" in methods("edge")
    True
    """
    names = sorted(_check_mode(mode))
    if exact is None:
        return names
    return [n for n in names if ((mode, n) in _EXACT) == exact]


def get_method(name: str, mode: str = "vertex") -> Finder:
    """The finder registered as ``name`` for ``mode``; unknown names list the valid ones."""
    table = _check_mode(mode)
    try:
        return table[name]
    except (KeyError, TypeError):
        raise RegistryError(
            f"unknown method {name!r} for mode {mode!r}; valid methods: {', '.join(sorted(table))}"
        ) from None


def find_order(graph: CompGraph, mode: str, method: str | Finder, seed: int | None, options: dict) -> OrderResult:
    """Run a registered or callable method and normalise what it returns."""
    finder = get_method(method, mode) if isinstance(method, str) else method
    name = method if isinstance(method, str) else getattr(method, "__name__", "callable")
    try:
        inspect.signature(finder).bind(graph, seed=seed, **options)
    except TypeError as exc:
        raise RegistryError(f"method {name!r} does not accept options {sorted(options)}: {exc}") from None
    except ValueError:  # builtins without a signature: let the call decide
        pass
    result = finder(graph, seed=seed, **options)
    return result if isinstance(result, OrderResult) else OrderResult(result)


_EXPLICIT: dict[str, Callable[[CompGraph, Any], Any]] = {}


def register_explicit_order(mode: str, adapter: Callable[[CompGraph, Any], Any]) -> None:
    """Register how ``mode`` reads an explicit order given in another form
    (face mode replays vertex orders and edge sequences as faces)."""
    _EXPLICIT[mode] = adapter


def explicit_order(graph: CompGraph, mode: str, order: Any) -> Any:
    """An explicit order as ``mode``'s engine takes it."""
    adapter = _EXPLICIT.get(mode)
    return order if adapter is None else adapter(graph, order)
