"""The loop-kernel layer: one IR, one Numba emitter, one CUDA emitter.

The IR is :mod:`~jacacc.kernels.ir`'s :class:`~jacacc.kernels.ir.Definition` — a ⊞
over an output box of a body with affine reads, sums with affine bounds,
brackets and calls of the operation table's functions — parsed from text
(:mod:`jacacc.elementwise.parse`) or built in code (the tensor evaluator's fused
regions, :mod:`jacacc.tensor.fusion`).  Every output element is computed on
its own, so no element is written twice: no atomics, no scatter.

* :mod:`~jacacc.kernels.ir`: the IR itself (nodes, walks, substitution, printing);
* :mod:`~jacacc.kernels.emit`: the body of one element, in Python or C
  (:class:`~jacacc.kernels.emit.Emitter`);
* :mod:`~jacacc.kernels.support`: loops over a definition's top-level bracket's
  support only (Fourier–Motzkin bounds, equalities solved), sums in order;
* :mod:`~jacacc.kernels.loops`: the loops around it, run by the Python
  interpreter (:func:`python_kernel`, the reference) or compiled by Numba
  (:func:`numba_kernel`, cached in memory and on disk under
  :func:`kernel_cache_dir`);
* :mod:`~jacacc.kernels.cuda`: CUDA C++, one thread per element
  (:func:`cuda_source`; :func:`cupy_kernel` runs it with CuPy,
  :func:`host_kernel` thread by thread on the host, :func:`cuda_ptx` the
  compile check with nvcc);
* :mod:`~jacacc.kernels.functions`: what every code generator of jacacc
  prints for the table's functions, read from :mod:`jacacc.ops` — their
  spellings, the vectorizable Numba helpers (``_exp``, ``_log``, ``_logaddexp``,
  ``_tanh``, ``_erf``) and the Numba and CUDA preambles;
* :mod:`~jacacc.kernels.inline`: the helpers written into the statements that
  call them (:func:`inline_helpers`) before Numba compiles a module;
* :mod:`~jacacc.kernels.tables`: straight-line programs as instruction tables,
  run by interpreters compiled once per backend, operation set and dtype (the
  scalar schedules' ``table`` tier, whose compile time does not grow with the
  program);
* :mod:`~jacacc.kernels.threads`: a ``nogil`` kernel of a range of points run on
  shares of whole blocks, one per thread (the scalar schedules' parallelism).

Who emits through the layer: elementwise functions and their derivatives
(:mod:`jacacc.elementwise.compiled`), the tensor evaluator's fused regions
(:mod:`jacacc.tensor.fusion`, Numba and CUDA) and the Iverson language
(:mod:`jacacc.iverson.lower`: a ``Definition`` per term of each ``let``
binding, compiled as :mod:`~jacacc.kernels.support` kernels, which loop over a
bracket's support only and add sums in order) are ``Definition`` objects and
emit through it.  The scalar schedules' kernels (:mod:`jacacc.codegen`) share
its pieces — the spellings, the helpers, the preambles — and keep their own
program shape: a scheduled Jacobian is one straight-line program per point
whose ``m + m·n`` outputs share their intermediates (as a ``Definition`` per
output, each would recompute them), laid out points-minor in blocks for LLVM,
or an instruction table (:mod:`~jacacc.kernels.tables`) past a size.

Examples
--------
>>> import numpy as np
>>> from jacacc.elementwise.parse import parse
>>> f = parse("f[i] = sum(k, 0, i, exp(x[k]))")
>>> out = np.empty(3)
>>> python_kernel(f, ["x"])(out, np.zeros(3)); out.tolist()
[1.0, 2.0, 3.0]
>>> print(cuda_source(f, ["x"], {"x": 1}).splitlines()[0])
// f[i] = sum(k, 0, i, exp(x[k]))
"""

from __future__ import annotations

# the functions' spellings, helpers and preambles load with the scalar core (jacacc.codegen prints
# through them); the emitters, which read the elementwise IR, load on first access (PEP 562)
from jacacc.kernels.functions import (
    HELPER_NAMES,
    KERNEL_OPERATIONS,
    SMALL_VECTOR_MATH,
    VECTOR_MATH,
    call_text,
    cuda_preamble,
    fastmath_text,
    helper_set,
    kernel_spelling,
    modules,
    numba_preamble,
    slow_in_kernels,
    spelling,
    spellings,
    vector_math_source,
    vector_math_used,
)
from jacacc.kernels.inline import inline_helpers
from jacacc.lazy import lazy_attributes

#: public name → the submodule defining it (imported on first access)
_LAZY = {
    **dict.fromkeys(["CUDA_KERNEL_NAME", "THREADS_PER_BLOCK", "CudaCompileError", "cuda_ptx", "cuda_ptx_many", "cuda_source",
                     "cupy_kernel", "host_kernel"], "cuda"),
    **dict.fromkeys(["NUMBA_PARALLEL_MAX_CHARS", "PARALLEL_MIN_ELEMENTS", "VECTOR_MATH_MAX_CALLS", "InteriorSplit",
                     "cache_root", "cached_module", "compiled_loop", "interior_split", "kernel_cache_dir", "last_factor", "numba_kernel", "numba_kernel_on_disk", "numba_source",
                     "python_kernel", "python_source"], "loops"),
    **dict.fromkeys(["numba_support_kernel", "python_support_kernel", "support_source"], "support"),
}

__all__ = [
    "CUDA_KERNEL_NAME",
    "HELPER_NAMES",
    "KERNEL_OPERATIONS",
    "NUMBA_PARALLEL_MAX_CHARS",
    "PARALLEL_MIN_ELEMENTS",
    "SMALL_VECTOR_MATH",
    "THREADS_PER_BLOCK",
    "CudaCompileError",
    "VECTOR_MATH",
    "VECTOR_MATH_MAX_CALLS",
    "InteriorSplit",
    "cache_root",
    "cached_module",
    "compiled_loop",
    "call_text",
    "cuda_preamble",
    "cuda_ptx",
    "cuda_ptx_many",
    "cuda_source",
    "cupy_kernel",
    "fastmath_text",
    "helper_set",
    "kernel_spelling",
    "host_kernel",
    "inline_helpers",
    "interior_split",
    "kernel_cache_dir",
    "last_factor",
    "modules",
    "numba_kernel",
    "numba_kernel_on_disk",
    "numba_preamble",
    "numba_source",
    "numba_support_kernel",
    "python_kernel",
    "python_source",
    "python_support_kernel",
    "slow_in_kernels",
    "spelling",
    "spellings",
    "support_source",
    "vector_math_source",
    "vector_math_used",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
