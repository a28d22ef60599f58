"""Hypothesis strategies for random programs of the tensor language (the generator is
:mod:`jacacc.iverson.generate`; every decision drawn by hypothesis, so failures shrink), and the
seeded programs and result flattening the code-generation tests share."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import jacacc.iverson as iv
from jacacc.iverson.generate import FEATURES, MAX_EXTENT, GeneratedProgram, build, features, random_program

__all__ = ["FEATURES", "MAX_EXTENT", "GeneratedProgram", "features", "flat", "program_and_gradients",
           "programs", "random_program"]


@st.composite
def programs(draw: st.DrawFn, scalar: bool = True, max_depth: int = 5, max_extent: int = MAX_EXTENT) -> GeneratedProgram:
    """Random well-typed, closed, in-range programs: scalar-valued (``scalar=True``, for gradients)
    or tensor/pair-valued, at most ``max_depth`` constructs deep, extents in ``1..max_extent``."""
    return build(lambda lo, hi: draw(st.integers(lo, hi)), scalar=scalar, max_depth=max_depth,
                 max_extent=max_extent)


def flat(value: object) -> np.ndarray:
    """A result (a number, an array or a pair of them) as one flat float64 array."""
    if isinstance(value, tuple):
        return np.concatenate([flat(v) for v in value])
    return np.ravel(np.asarray(value, dtype=np.float64))


def program_and_gradients(seed: int, scalar: bool, max_depth: int = 5) -> tuple[list[iv.Expr], dict]:
    """A seeded random program (and, scalar, its gradient w.r.t. each input) with arrays to run it on."""
    program = random_program(np.random.default_rng(seed), scalar=scalar, max_extent=4, max_depth=max_depth)
    exprs = [program.expr]
    if scalar:
        exprs += [iv.grad(program.expr, iv.var(n, s)) for n, s in program.inputs.items()]
    return exprs, program.arrays(np.random.default_rng(seed + 1))

