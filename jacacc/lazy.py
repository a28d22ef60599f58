"""Names a package exports but imports only on first access (PEP 562).

A subpackage whose heavy parts (emitters, compiled kernels) should not load
with it declares which submodule defines each such name, and takes its
module-level ``__getattr__`` and ``__dir__`` from :func:`lazy_attributes`.

Examples
--------
>>> import sys, types
>>> package = types.ModuleType("demo_package")
>>> sys.modules["demo_package"] = package
>>> sys.modules["demo_package.sub"] = types.SimpleNamespace(answer=42)
>>> package.__getattr__, package.__dir__ = lazy_attributes("demo_package", {"answer": "sub"})
>>> package.answer, "answer" in dir(package)
(42, True)
>>> del sys.modules["demo_package"], sys.modules["demo_package.sub"]
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, defined_in: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for the names of ``defined_in``
    (public name → the submodule defining it): the submodule is imported on the name's first
    access, and the value kept in the package's namespace so the next access is plain."""
    module = sys.modules[package]

    def __getattr__(name: str) -> Any:
        if name in defined_in:
            value = getattr(importlib.import_module(f"{package}.{defined_in[name]}"), name)
            setattr(module, name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted([*vars(module), *defined_in])

    return __getattr__, __dir__
