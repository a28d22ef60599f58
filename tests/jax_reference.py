"""JAX references compiled quickly: ``jit`` is ``jax.jit`` with XLA's backend optimizations off.

The tests compare against JAX derivatives each compiled and run once or a few times, on arrays of
a few dozen entries: XLA's optimization passes then cost more than they save (a Cholesky
composition's value, gradient and Hessian compile in 0.37 s instead of 0.86 s).  Off, XLA still
evaluates the same operations in float64; only fusion and scheduling change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: XLA's compiler options for references run once: no backend optimization, no expensive LLVM passes
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def jit(fun: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    """``jax.jit(fun, **options)`` compiled with :data:`FAST_COMPILE`."""
    import jax

    return jax.jit(fun, compiler_options=FAST_COMPILE, **options)
