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
from typing import TYPE_CHECKING, Any

from jacacc.errors import RegistryError
from jacacc.graph import CompGraph

if TYPE_CHECKING:
    from jacacc.schedule import Schedule

__all__ = ["OrderResult", "SearchInfo", "explicit_order", "find_order", "get_method", "methods", "modes_of", "register_explicit_order",
           "register_method"]

Finder = Callable[..., Any]
_METHODS: dict[str, dict[str, Finder]] = {"vertex": {}, "edge": {}, "face": {}, "structure": {}}


@dataclass(frozen=True)
class SearchInfo:
    """What a search (CP-SAT, branch-and-bound, local search) reports beside its order.

    ``status`` is ``"optimal"`` (proven), ``"feasible"`` (an order, no proof)
    or ``"unknown"``; ``objective`` the multiplications of the order found;
    ``best_bound`` the proven lower bound at the end; ``wall_time`` seconds.
    """

    status: str
    objective: int | None
    best_bound: int | None
    wall_time: float
    solver: str = ""

    @property
    def gap(self) -> float | None:
        """Relative optimality gap ``(objective - bound) / objective``, None when unknown."""
        if self.objective is None or self.best_bound is None or self.objective == 0:
            return None
        return (self.objective - self.best_bound) / self.objective


@dataclass(frozen=True)
class OrderResult:
    """What an order method returns when it knows more than the order.

    ``optimal`` is True when the method proves the order optimal for its mode,
    False when it knows it is not, None when it cannot tell; ``lower_bound``
    is a proven lower bound on the multiplications of any order of the mode;
    ``search`` what a search reports (status, objective, bound, time).
    Methods of the ``"structure"`` mode (D*, blocks, levels: strategies that
    choose their own granularity) build their Schedule themselves and return
    it as ``schedule``; ``order`` then describes the factoring sequence.
    """

    order: Sequence[Any]
    optimal: bool | None = None
    lower_bound: int | None = None
    search: SearchInfo | None = None
    schedule: Schedule | None = None


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


def modes_of(name: str) -> list[str]:
    """The modes for which a method called ``name`` is registered.

    Examples
    --------
    >>> modes_of("markowitz")
    ['vertex', 'edge']
    """
    return [mode for mode, table in _METHODS.items() if name in table]


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


_EXPLICIT: dict[str, Callable[..., Any]] = {}


def register_explicit_order(mode: str, adapter: Callable[..., Any]) -> None:
    """Register how ``mode`` reads an explicit order given in another form
    (face mode replays vertex orders and edge sequences as faces);
    ``adapter(graph, order, **engine_options)``."""
    _EXPLICIT[mode] = adapter


def explicit_order(graph: CompGraph, mode: str, order: Any, **engine_options: Any) -> Any:
    """An explicit order as ``mode``'s engine takes it."""
    adapter = _EXPLICIT.get(mode)
    return order if adapter is None else adapter(graph, order, **engine_options)
