"""Elementwise-defined tensor functions and their derivatives (paper 000, Urban & van der Smagt).

:func:`define` reads ``f[i, j] = …`` (:mod:`~jacacc.elementwise.parse`);
``f.derivative(x)`` is the gather-form derivative of §5 with its new sums,
Fourier–Motzkin bounds and integrality/solvability brackets
(:mod:`~jacacc.elementwise.derive`, on :mod:`jacacc.intlin`), again an
elementwise function and derivable again; ``f.vjp`` evaluates all of them and
``f.compile("numba" | "cupy")`` builds one lock-free kernel per derivative
(:mod:`~jacacc.elementwise.kernels`, :mod:`~jacacc.elementwise.compiled`).
"""

from jacacc.elementwise.compiled import CompiledFunction
from jacacc.elementwise.function import ElementwiseFunction, define
from jacacc.elementwise.parse import SourceError, parse, unparse

__all__ = ["CompiledFunction", "ElementwiseFunction", "SourceError", "define", "parse", "unparse"]
