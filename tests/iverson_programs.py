"""Hypothesis strategies for random programs of the tensor language (the generator is
:mod:`jacacc.iverson.generate`; every decision drawn by hypothesis, so failures shrink)."""

from __future__ import annotations

from hypothesis import strategies as st

from jacacc.iverson.generate import FEATURES, MAX_EXTENT, GeneratedProgram, build, features, random_program

__all__ = ["FEATURES", "MAX_EXTENT", "GeneratedProgram", "features", "programs", "random_program"]


@st.composite
def programs(draw: st.DrawFn, scalar: bool = True, max_depth: int = 5, max_extent: int = MAX_EXTENT) -> GeneratedProgram:
    """Random well-typed, closed, in-range programs: scalar-valued (``scalar=True``, for gradients)
    or tensor/pair-valued, at most ``max_depth`` constructs deep, extents in ``1..max_extent``."""
    return build(lambda lo, hi: draw(st.integers(lo, hi)), scalar=scalar, max_depth=max_depth,
                 max_extent=max_extent)
