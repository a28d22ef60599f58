"""Elementwise-defined tensor functions and their derivatives (paper 000, Urban & van der Smagt).

:func:`define` reads ``f[i, j] = …`` (:mod:`~jacacc.elementwise.parse`);
``f.derivative(x)`` is the gather-form derivative of §5 with its new sums,
Fourier–Motzkin bounds and integrality/solvability brackets
(:mod:`~jacacc.elementwise.derive`, on :mod:`jacacc.intlin`), again an
elementwise function and derivable again; ``f.vjp`` evaluates all of them and
``f.compile("numba" | "cupy")`` builds one lock-free kernel per derivative
(:mod:`~jacacc.elementwise.compiled`, through the loop-kernel layer :mod:`jacacc.kernels`).

The functions and compiled kernels are imported on first access (PEP 562), so
that the kernel IR (:mod:`~jacacc.elementwise.parse`) loads without the
derivation machinery: the kernel layer (:mod:`jacacc.kernels`) and the tensor
evaluator's fusion pass (:mod:`jacacc.tensor.fusion`) build on it.
"""

from __future__ import annotations

# the language itself is light; importing it also makes ``parse`` the function, not the submodule
from jacacc.elementwise.parse import SourceError, parse, unparse
from jacacc.lazy import lazy_attributes

__all__ = ["CompiledFunction", "ElementwiseFunction", "SourceError", "define", "parse", "unparse"]

#: public name → the submodule defining it
_LAZY = {"CompiledFunction": "compiled", "ElementwiseFunction": "function", "define": "function"}


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
