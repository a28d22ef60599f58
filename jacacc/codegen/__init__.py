"""Code generation: a traced graph and a Schedule → a batched Jacobian kernel.

``jacacc.compile(traced, backend=..., method=..., mode=...)`` lowers the graph's
primal program, its local partials and the schedule to one straight-line
:class:`~jacacc.codegen.base.JacobianProgram` (:mod:`jacacc.codegen.base`), prints it
with the backend's printer and compiles it; the result is a
:class:`~jacacc.codegen.compile.Kernel`.

Backends live in one registry (opt_einsum style): :func:`register_backend`,
:func:`get_backend`, :func:`backends`.  Built in:

========  =======================================================  =========
name      what                                                     extra
========  =======================================================  =========
numpy     vectorized NumPy, the reference                          (none)
numba     ``@njit(parallel=True)``, prange over point blocks       ``cpu``
cupy      CUDA C++ through ``cupy.RawKernel``, a thread per point  ``gpu``
========  =======================================================  =========

Examples
--------
>>> backends()
['cupy', 'numba', 'numpy']
>>> get_backend("fortran")
Traceback (most recent call last):
...
jacacc.errors.RegistryError: unknown backend 'fortran'; valid backends: cupy, numba, numpy
"""

from __future__ import annotations

from jacacc.codegen.base import Backend, CodePrinter, JacobianProgram, lower
from jacacc.codegen.compile import Kernel, clear_cache, compile_kernel
from jacacc.codegen.registry import backends, get_backend, register_backend, unregister_backend

__all__ = [
    "Backend",
    "CodePrinter",
    "Kernel",
    "JacobianProgram",
    "backends",
    "clear_cache",
    "compile",
    "get_backend",
    "lower",
    "register_backend",
    "unregister_backend",
]

#: ``jacacc.compile``
compile = compile_kernel  # noqa: A001 - the public name the issue asks for
