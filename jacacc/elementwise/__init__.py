"""Elementwise-defined tensor functions (paper 000): parsing, evaluation and gradients.

Work in progress (issue 16): :mod:`~jacacc.elementwise.parse` reads the
source language with positions; :func:`define` builds the function on the
tensor language of paper 001 (:mod:`jacacc.iverson`), which evaluates it and
derives its vector-Jacobian products.  The gather-form derivative functions of
§5, their kernels and the reproductions are not written yet.
"""

from jacacc.elementwise.function import ElementwiseFunction, define
from jacacc.elementwise.parse import SourceError, parse

__all__ = ["ElementwiseFunction", "SourceError", "define", "parse"]
