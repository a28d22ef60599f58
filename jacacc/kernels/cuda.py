"""CUDA loop kernels: the kernel layer's CUDA emitter, one thread per output element.

:func:`cuda_source` prints a :class:`~jacacc.kernels.ir.Definition` as
CUDA C++ for ``cupy.RawKernel``: ``jacacc_elementwise(out, *arrays,
*extents)`` over contiguous row-major arrays of ``real`` (``double`` or
``float``), the output's extents first, then each argument's.  Thread ``t``
computes element ``t`` of the flattened output; the body is the one
:class:`~jacacc.kernels.emit.Emitter` prints for Python, in C.  The source is
written without CuPy, so it can be compile-checked with ``nvcc --ptx`` and,
since the body is plain C++ over CUDA's math overloads, run thread by thread
on the host (:func:`host_kernel`, with g++) on a machine without a GPU.
:func:`cuda_ptx` is that check: the PTX ``nvcc --ptx`` makes of a source, or
:class:`CudaCompileError` with nvcc's messages.  Both keep what they build in
the kernel cache directory under the hash of source and compiler version.

:func:`cupy_kernel` compiles a definition with CuPy (NVRTC, cached per source)
and returns a launcher ``kernel(out, *arrays)`` that passes the extents.

Examples
--------
>>> from jacacc.elementwise.parse import parse
>>> src = cuda_source(parse("f[i] = exp(x[i]) * 2"), ["x"], {"x": 1}, "float32")
>>> "typedef float real;" in src
True
>>> print(src.splitlines()[-2])
    _out[_t] = (exp(_a_x[(_i_i)]) * ((real)2.0));
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jacacc.errors import JacaccError
from jacacc.kernels.emit import Calls, Emitter
from jacacc.kernels.functions import cuda_preamble
from jacacc.kernels.ir import Definition

__all__ = ["CUDA_KERNEL_NAME", "THREADS_PER_BLOCK", "CudaCompileError", "cuda_ptx", "cuda_ptx_many", "cuda_source", "cupy_kernel",
           "host_kernel", "host_launcher"]

CUDA_KERNEL_NAME = "jacacc_elementwise"
#: threads per block of a launch
THREADS_PER_BLOCK = 256


def _code_names(definition: Definition, arguments: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    return {a: f"_a_{a}" for a in arguments}, {n: f"_i_{n}" for n in definition.indices}


def cuda_source(definition: Definition, arguments: Sequence[str], ranks: Mapping[str, int],
                dtype: Any = "float64", accumulate: bool = False) -> str:
    """CUDA C++ for ``cupy.RawKernel``: ``jacacc_elementwise(out, *arrays, *extents)`` with the
    output's extents then each argument's (``ranks[a]`` of them; row-major, contiguous ``dtype``:
    float64 or float32), one thread per element; with ``accumulate`` the value is added to
    ``out`` (``+=``: several terms of one result, each its own kernel)."""
    if not definition.indices:
        raise ValueError(f"{definition.name}: a CUDA kernel needs at least one output index")
    arrays, env = _code_names(definition, arguments)
    shapes = {a: [f"{arrays[a]}_n{k}" for k in range(ranks[a])] for a in arguments}
    em = Emitter("c", arrays, shapes, Calls("cuda"))
    em.indent = 1
    value = em.value(definition.body, env)
    dims = [f"_n{k}" for k in range(len(definition.indices))]
    params = ["real* __restrict__ _out", *(f"const real* __restrict__ {arrays[a]}" for a in arguments),
              *(f"long long {d}" for d in dims), *(f"long long {s}" for a in arguments for s in shapes[a])]
    lines = [f"// {definition.source}", *cuda_preamble(dtype),
             f'extern "C" __global__ void {CUDA_KERNEL_NAME}({", ".join(params)}) {{',
             "    long long _t = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
             f"    if (_t >= {' * '.join(dims)}) return;"]
    rest = "_t"
    unravel = []
    for name, n in reversed(list(zip(definition.indices, dims, strict=True))):
        unravel.append(f"    long long {env[name]} = {rest} % {n};")
        rest = f"({rest} / {n})"
    store = f"    _out[_t] {'+=' if accumulate else '='} {value};"
    return "\n".join([*lines, *reversed(unravel), *em.lines, store, "}", ""])


def _extents(out: Any, arrays: Sequence[Any]) -> list[int]:
    return [*out.shape, *(n for a in arrays for n in a.shape)]


#: CuPy kernels compiled in this process: source → ``cupy.RawKernel`` (CuPy keeps the binaries on disk)
_RAW: dict[str, Any] = {}


def cupy_kernel(source: str) -> Callable[..., None]:
    """A launcher for CUDA ``source`` (from :func:`cuda_source`) compiled by CuPy: ``kernel(out,
    *arrays)`` with contiguous CuPy arrays of the source's ``real``, one thread per element of
    ``out``.  The ``cupy.RawKernel`` is made once per source; it compiles on its first launch."""
    from jacacc.errors import require_extra

    cp = require_extra("cupy", "gpu")
    raw = _RAW.get(source)
    if raw is None:
        raw = _RAW[source] = cp.RawKernel(source, CUDA_KERNEL_NAME)

    def launch(out: Any, *arrays: Any) -> None:
        total = math.prod(out.shape)
        if total:
            blocks = (total + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
            raw((blocks,), (THREADS_PER_BLOCK,), (out, *arrays, *(np.int64(n) for n in _extents(out, arrays))))

    launch.raw = raw  # type: ignore[attr-defined]
    return launch


# The CUDA kernel body is plain C++ over CUDA's math overloads: as host C++, with the CUDA keywords
# defined away and the thread indices globals, a loop over blocks and threads runs it.
_HOST_SHIM = """\
#include <cmath>
using namespace std;
#define __device__
#define __forceinline__ inline
#define __global__
#define __restrict__ __restrict
struct jc_dim {{ long long x; }};
static jc_dim blockIdx, blockDim, threadIdx;
static inline double __longlong_as_double(unsigned long long bits) {{ double d; memcpy(&d, &bits, 8); return d; }}
#include "kernel.cu"
extern "C" void run_threads(void** p, long long* n, long long total) {{
    blockDim.x = 32;  // a partial last block: threads past the end must return without writing
    for (long long b = 0; b * blockDim.x < total; ++b)
        for (long long t = 0; t < blockDim.x; ++t) {{
            blockIdx.x = b;
            threadIdx.x = t;
            {kernel}({arguments});
        }}
}}
"""


@functools.lru_cache(maxsize=8)
def _compiler_version(compiler: str) -> str:
    """What ``compiler --version`` prints, with the compiler's path: part of a build's key."""
    done = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False)
    return f"{shutil.which(compiler)}\n{done.stdout}"


class CudaCompileError(JacaccError, RuntimeError):
    """nvcc refused a CUDA source: its messages and the source's first lines."""


def _build_folder(kind: str, directory: str | os.PathLike[str] | None, *key: str) -> Path:
    """The folder of one build: under ``directory``, or else the kernel cache directory's ``kind``
    folder (a temporary one where there is none), named by the hash of ``key``."""
    from jacacc.kernels.loops import kernel_cache_dir

    if directory is None:
        cache = kernel_cache_dir()
        directory = cache / kind if cache is not None else tempfile.mkdtemp(prefix=f"jacacc-{kind}-")
    work = Path(directory) / f"k{hashlib.sha256(chr(0).join(key).encode()).hexdigest()[:16]}"
    work.mkdir(parents=True, exist_ok=True)
    return work


def _build_once(work: Path, product: str, sources: dict[str, str], command: list[str]) -> subprocess.CompletedProcess | None:
    """Unless ``product`` is in ``work``: write ``sources`` (file name → text) there and run
    ``command`` in it, its output file given as ``{out}``.  That file is written under a name of
    this process and renamed to ``product`` only when the command succeeded, since another process
    may be reading the folder.  The finished command, or None where ``product`` was built before."""
    if (work / product).is_file():
        return None
    for name, text in sources.items():
        (work / name).write_text(text)
    partial = f"{product}.{os.getpid()}.tmp"
    done = subprocess.run([partial if a == "{out}" else a for a in command], cwd=work, capture_output=True,
                          text=True, check=False)
    if done.returncode == 0:
        os.replace(work / partial, work / product)
    return done


def cuda_ptx(source: str, directory: str | os.PathLike[str] | None = None, compiler: str = "nvcc") -> str:
    """The PTX ``compiler --ptx`` makes of CUDA ``source``: the compile check of generated CUDA on a
    machine without a GPU (nvcc needs none).

    The PTX is kept in a folder of ``directory`` named by the hash of the source and the compiler's
    version (by default the kernel cache directory's ``ptx`` folder), so the same source is compiled
    once per compiler: a later call, in this process or another, reads it back.

    Raises
    ------
    FileNotFoundError
        Where ``compiler`` is not installed.
    CudaCompileError
        Where it refuses the source, with its messages.
    """
    if shutil.which(compiler) is None:
        raise FileNotFoundError(f"{compiler} is not installed: CUDA source cannot be compile-checked")
    work = _build_folder("ptx", directory, source, _compiler_version(compiler))
    done = _build_once(work, "kernel.ptx", {"kernel.cu": source}, [compiler, "--ptx", "-o", "{out}", "kernel.cu"])
    if done is not None and done.returncode != 0:
        head = "\n".join(source.splitlines()[:20])
        raise CudaCompileError(f"{compiler} --ptx failed (status {done.returncode}):\n"
                               f"{done.stderr[-4000:]}\nthe source begins:\n{head}")
    return (work / "kernel.ptx").read_text()


_GLOBAL = re.compile(r'extern "C" __global__ void (\w+)\(')


def cuda_ptx_many(sources: Sequence[str], directory: str | os.PathLike[str] | None = None,
                  compiler: str = "nvcc") -> list[str]:
    """The compile check of several generated CUDA sources in one ``compiler --ptx`` run: each source
    in a namespace of its own and its ``__global__`` kernels renamed ``<name>_<k>``, so that the
    compiler starts once (it costs about a second per run).  Returns, per source, the PTX entries
    of its kernels (``.entry <name>_<k>(`` …) — the check that each one compiled; raises as
    :func:`cuda_ptx` does.

    Examples
    --------
    >>> import shutil
    >>> from jacacc.elementwise.parse import parse
    >>> sources = [cuda_source(parse(f"f[i] = exp(x[i]) * {k}"), ["x"], {"x": 1}) for k in (2, 3)]
    >>> shutil.which("nvcc") is None or all(len(e) == 1 for e in cuda_ptx_many(sources))
    True
    """
    parts, names = [], []
    for k, source in enumerate(sources):
        kernels_here = _GLOBAL.findall(source)
        renamed = _GLOBAL.sub(lambda m, k=k: f'extern "C" __global__ void {m.group(1)}_{k}(', source)
        names.append([f"{name}_{k}" for name in kernels_here])
        parts.append(f"namespace jc_source_{k} {{\n{renamed}\n}}")
    ptx = cuda_ptx("\n".join(parts), directory, compiler)
    entries = re.findall(r"\.entry (\w+)\(", ptx)
    return [[e for e in entries if e in own] for own in names]


def host_launcher(source: str, kernel: str, arguments: str, directory: str | os.PathLike[str] | None = None,
                  compiler: str = "g++") -> Callable[[Sequence[np.ndarray], Sequence[int], int], None]:
    """CUDA ``source`` compiled as host C++ by ``compiler`` behind a launch shim and loaded with
    :mod:`ctypes`: ``launch(arrays, integers, threads)`` runs the ``__global__`` function ``kernel``
    for ``threads`` threads, one after another, each called with ``arguments`` — C text over the
    shim's ``void** p`` (the arrays' data pointers, in order) and ``long long* n`` (the integers),
    casts included (``(const double*)p[1], n[0]``).

    Each build goes to a folder of ``directory`` named by the hash of the shim, the source and the
    compiler's version; by default that of :func:`~jacacc.kernels.loops.kernel_cache_dir` (a temporary
    one where it is not writable), where a later process finds the library built and loads it.

    Raises
    ------
    FileNotFoundError
        Where ``compiler`` is not installed.
    """
    import ctypes

    if shutil.which(compiler) is None:
        raise FileNotFoundError(f"{compiler} is not installed: CUDA source cannot run on the host")
    shim = "#include <cstring>\n" + _HOST_SHIM.format(kernel=kernel, arguments=arguments)
    work = _build_folder("host", directory, shim, source, _compiler_version(compiler))
    done = _build_once(work, "kernel.so", {"kernel.cu": source, "shim.cpp": shim},
                       [compiler, "-O1", "-shared", "-fPIC", "-o", "{out}", "shim.cpp"])
    if done is not None:
        done.check_returncode()
    library = ctypes.CDLL(str(work / "kernel.so"))

    def launch(arrays: Sequence[np.ndarray], integers: Sequence[int], threads: int) -> None:
        pointers = (ctypes.c_void_p * max(len(arrays), 1))(*(a.ctypes.data for a in arrays))
        dims = (ctypes.c_longlong * max(len(integers), 1))(*integers)
        library.run_threads(pointers, dims, ctypes.c_longlong(threads))

    return launch


def host_kernel(source: str, arrays: int, extents: int, directory: str | os.PathLike[str] | None = None,
                compiler: str = "g++") -> Callable[..., None]:
    """CUDA ``source`` (from :func:`cuda_source`) run thread by thread on the host: compiled as C++
    by ``compiler`` behind a launch shim, and loaded with :mod:`ctypes` — for checking generated
    CUDA on a machine without a GPU (tests, debugging).  ``arrays`` is the number of input arrays
    and ``extents`` the number of extents the kernel takes; returns ``kernel(out, *arrays)`` with
    contiguous NumPy arrays of the source's ``real``.  Built and kept as :func:`host_launcher` builds
    (``directory``, ``compiler``; FileNotFoundError where the compiler is not installed).
    """
    real = "float" if "typedef float real;" in source else "double"
    arguments = ", ".join([f"({real}*)p[0]", *(f"(const {real}*)p[{k + 1}]" for k in range(arrays)),
                           *(f"n[{k}]" for k in range(extents))])
    launch = host_launcher(source, CUDA_KERNEL_NAME, arguments, directory, compiler)

    def run(out: np.ndarray, *inputs: np.ndarray) -> None:
        if len(inputs) != arrays:
            raise TypeError(f"the kernel takes {arrays} input arrays, got {len(inputs)}")
        buffers = [out, *inputs]
        if any(not b.flags.c_contiguous for b in buffers):
            raise ValueError("the host kernel reads and writes contiguous arrays only")
        sizes = _extents(out, inputs)
        if len(sizes) != extents:
            raise TypeError(f"the kernel takes {extents} extents, the arrays have {len(sizes)}")
        launch(buffers, sizes, out.size)

    return run
