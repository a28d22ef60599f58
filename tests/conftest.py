"""Fixtures shared by several test modules."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def float64_jax():
    """JAX in float64 for one module (restored afterwards): references at rtol 1e-10
    need it.  A module opts in with ``pytestmark = pytest.mark.usefixtures("float64_jax")``."""
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)
