"""The problem record and the zoo's registry.

A zoo entry is either a *function* (a NumPy-style scalar function, traced on
demand) or a *graph* (built directly: paper figures, random families).  Both
give a :class:`~jacacc.graph.CompGraph` through :meth:`Problem.graph`, so
experiments can treat them alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jacacc.errors import JacaccError, RegistryError
from jacacc.graph import CompGraph

__all__ = ["Problem", "get", "names", "register"]

Sampler = Callable[[np.random.Generator], Any]


@dataclass(frozen=True)
class Problem:
    """One zoo entry.

    Attributes
    ----------
    name, description : str
    source : str
        Where it comes from (paper, collection).
    n_inputs, n_outputs : int
    fn : callable or None
        For function problems: ``fn(x) -> sequence of outputs``, written with
        NumPy operations so that it runs on floats, arrays and tracers.
    sampler : callable or None
        ``sampler(rng) -> x``: a valid input point drawn with ``rng``.
    builder : callable or None
        For graph problems: ``builder() -> CompGraph``.
    tags : tuple of str
        Family labels used to select problems in experiments: ``"alphagrad"``,
        ``"minpack2"``, ``"paper003"``, ``"random"``; ``"scale"`` for entries
        too large for the default method comparison; ``"matrix"`` for
        functions built on matrix products, whose ``fn`` takes one point at a
        time (the others also broadcast over arrays of points).

    Examples
    --------
    >>> p = get("RoeFlux_1d")
    >>> p.n_inputs, p.n_outputs, p.kind
    (6, 3, 'function')
    >>> p.graph()
    CompGraph(inputs=6, intermediates=94, outputs=3, edges=175, partials='symbolic')
    """

    name: str
    description: str
    source: str
    n_inputs: int
    n_outputs: int
    fn: Callable[..., Any] | None = None
    sampler: Sampler | None = None
    builder: Callable[[], CompGraph] | None = None
    tags: tuple[str, ...] = ()
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def kind(self) -> str:
        """``"function"`` (traced from ``fn``) or ``"graph"`` (built directly)."""
        return "function" if self.fn is not None else "graph"

    def sample(self, seed: int | None = 0) -> np.ndarray:
        """A valid input point, reproducible per ``seed``."""
        if self.sampler is None:
            raise JacaccError(f"problem {self.name!r} is a graph; it has no input points to sample")
        x = np.asarray(self.sampler(np.random.default_rng(seed)), dtype=float)
        if x.shape != (self.n_inputs,):
            raise AssertionError(f"sampler of {self.name!r} returned shape {x.shape}")
        return x

    def __call__(self, x: Any) -> np.ndarray:
        """Evaluate ``fn`` at ``x`` (floats), returning the flat output vector."""
        if self.fn is None:
            raise JacaccError(f"problem {self.name!r} is a graph; it has no function to evaluate")
        return np.ravel(np.asarray(self.fn(np.asarray(x, dtype=float)), dtype=float))

    def trace(self):
        """The traced function (cached): a :class:`~jacacc.tracer.Traced`."""
        if self.fn is None:
            raise JacaccError(f"problem {self.name!r} is a graph; there is no function to trace")
        if "traced" not in self._cache:
            from jacacc.tracer import trace

            self._cache["traced"] = trace(self.fn, self.n_inputs, unpack=False)
        return self._cache["traced"]

    def graph(self) -> CompGraph:
        """The computational graph: traced (symbolic partials) or built (numeric)."""
        if self.builder is not None:
            if "graph" not in self._cache:
                self._cache["graph"] = self.builder()
            return self._cache["graph"]
        return self.trace().graph


_REGISTRY: dict[str, Problem] = {}


def register(problem: Problem, *, replace: bool = False) -> Problem:
    """Add ``problem`` to the zoo under its name."""
    if problem.name in _REGISTRY and not replace:
        raise RegistryError(f"a problem named {problem.name!r} is already registered")
    if (problem.fn is None) == (problem.builder is None):
        raise ValueError(f"problem {problem.name!r} needs exactly one of fn and builder")
    _REGISTRY[problem.name] = problem
    return problem


def names(tag: str | None = None) -> list[str]:
    """Registered problem names (in registration order), optionally those with ``tag``."""
    return [n for n, p in _REGISTRY.items() if tag is None or tag in p.tags]


def get(name: str) -> Problem:
    """The problem ``name``; an unknown name is refused with the valid ones."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise RegistryError(f"unknown problem {name!r}; valid problems: {', '.join(_REGISTRY)}") from None
