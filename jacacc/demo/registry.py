"""The registry of demo parts: name → (description, function), in tour order.

A part is a function ``run(report)`` that prints what it computes and records
its checks in the :class:`~jacacc.demo.report.Report` it is given.  Parts
register themselves with :func:`register_part` when their module is imported;
:func:`parts` lists them in registration order, which is the tour's order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jacacc.demo.report import Report
from jacacc.errors import RegistryError

__all__ = ["Part", "get_part", "parts", "register_part"]

PartFunction = Callable[[Report], None]


@dataclass(frozen=True)
class Part:
    """One stop of the tour: its ``name``, a one-line ``description`` and the function that runs it."""

    name: str
    description: str
    run: PartFunction


_PARTS: dict[str, Part] = {}


def register_part(name: str, description: str) -> Callable[[PartFunction], PartFunction]:
    """Register the decorated function ``run(report)`` as demo part ``name``.

    Registering a name again replaces the part in its place in the tour.

    Examples
    --------
    >>> @register_part("example", "prints one check")
    ... def _example(report):
    ...     report.require("1 + 1 == 2", 1 + 1 == 2)
    >>> get_part("example").description
    'prints one check'
    >>> _ = _PARTS.pop("example")
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise RegistryError(f"a demo part's name must be an identifier, got {name!r}")

    def decorate(fn: PartFunction) -> PartFunction:
        _PARTS[name] = Part(name, description, fn)
        return fn

    return decorate


def parts() -> list[str]:
    """The names of the registered parts, in tour order.

    Examples
    --------
    >>> import jacacc.demo
    >>> parts()
    ['graph', 'tensor', 'linalg', 'iverson', 'elementwise']
    """
    return list(_PARTS)


def get_part(name: str) -> Part:
    """The part called ``name``; a :class:`~jacacc.errors.RegistryError` naming the valid parts otherwise.

    Examples
    --------
    >>> import jacacc.demo
    >>> get_part("tensor").name
    'tensor'
    >>> get_part("tensors")
    Traceback (most recent call last):
    ...
    jacacc.errors.RegistryError: unknown demo part 'tensors'; valid parts: graph, tensor, linalg, iverson, elementwise
    """
    try:
        return _PARTS[name]
    except (KeyError, TypeError):
        raise RegistryError(f"unknown demo part {name!r}; valid parts: {', '.join(_PARTS)}") from None
