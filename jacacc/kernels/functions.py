"""The loop kernels' functions, all read from the operation table (:mod:`jacacc.ops`).

What every code generator of jacacc prints for a call of one of the table's
operations comes from here, so that no generator keeps a function list of its
own:

* :func:`spelling` / :func:`spellings`: the table's spelling of an operation
  for a backend (``numba``: a function or a template with ``{0}``; ``cuda``: a
  libm name or a helper of ``ops.CUDA_HELPERS``), with the operations that have
  a vectorizable helper (:attr:`~jacacc.ops.Operation.vector_math`) spelled as
  that helper where asked — also inside templates that call them
  (``logistic``'s ``{exp}``); :func:`call_text` prints a call of a spelling;
* :func:`vector_math_source`: the generated helpers ``_exp``, ``_log``,
  ``_logaddexp``, ``_tanh``, ``_erf`` in plain arithmetic (inlined by Numba, vectorized by
  LLVM); :func:`vector_math_used` says which a set of operations needs; the
  small ones (:data:`SMALL_VECTOR_MATH`) serve every loop kernel, the large
  ``_erf`` only the scalar schedules' kernels (its compilation is shared by a
  whole program there);
* :func:`numba_preamble` and :func:`cuda_preamble`: the start of every
  generated Numba module (imports, helpers) and CUDA source (``real``,
  integer helpers, the table's C helpers);
* :func:`modules`: the modules the spellings call, for ``exec`` namespaces;
* :func:`slow_in_kernels`: the operations NumPy computes faster than a loop
  kernel (:attr:`~jacacc.ops.Operation.slow_in_kernels`).

Nothing here imports Numba or CuPy.

Examples
--------
>>> spelling("exp", "numba"), spelling("exp", "numba", vector_math=True), spelling("exp", "cuda")
('np.exp', '_exp', 'exp')
>>> call_text(spelling("logistic", "numba", vector_math=True), ["x"])
'(1.0 / (1.0 + _exp(-(x))))'
"""

from __future__ import annotations

import functools
import importlib
import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from jacacc import ops

__all__ = ["CUDA_PRELUDE", "HELPER_NAMES", "KERNEL_OPERATIONS", "kernel_spelling", "SMALL_VECTOR_MATH", "VECTOR_MATH", "call_text", "calls", "cuda_preamble", "fastmath_text", "modules",
           "helper_set", "numba_preamble", "slow_in_kernels", "spelling", "spellings", "vector_math_source", "vector_math_used"]

#: operations with a generated vectorizable Numba helper ``_name`` (:attr:`jacacc.ops.Operation.vector_math`)
VECTOR_MATH = frozenset(op.name for op in ops.iterate() if op.vector_math)
#: those whose helper is small (a polynomial): the ones every Numba loop kernel calls
SMALL_VECTOR_MATH = frozenset(op.name for op in ops.iterate() if op.vector_math == "small")
#: the names of the helpers in generated Numba source (what :func:`~jacacc.kernels.inline.inline_helpers` replaces)
HELPER_NAMES = frozenset(f"_{name}" for name in ops.NUMBA_HELPERS)
_REFERENCE = re.compile(r"\{([A-Za-z_][A-Za-z_0-9]*)\}")


# ------------------------------------------------------------------------ spellings
def helper_set(vector_math: bool | Iterable[str]) -> frozenset[str]:
    """The operations spelled as helpers for ``vector_math``: all of :data:`VECTOR_MATH` (True), none
    (False), or those named.

    Examples
    --------
    >>> sorted(helper_set(SMALL_VECTOR_MATH)), sorted(helper_set(["erf", "sin"])), helper_set(False)
    (['exp', 'log', 'logaddexp', 'tanh'], ['erf'], frozenset())
    """
    if vector_math is True:
        return VECTOR_MATH
    if vector_math is False:
        return frozenset()
    return VECTOR_MATH & frozenset(vector_math)


def _helpers(vector_math: bool | Iterable[str]) -> dict[str, str]:
    return {name: f"_{name}" for name in helper_set(vector_math)}


def spelling(name: str, backend: str, vector_math: bool | Iterable[str] = False) -> str:
    """The spelling of the table's operation ``name`` for ``backend`` (``"numpy"``, ``"numba"``,
    ``"cuda"``): :func:`jacacc.ops.spelling`, with the Numba helpers ``_exp`` … of the
    :data:`VECTOR_MATH` operations (all with ``vector_math=True``, or those named:
    :func:`helper_set`) in place of the table's calls of them."""
    if backend != "numba" or not vector_math:
        return ops.spelling(name, backend)
    return ops.spelling(name, backend, _helpers(vector_math))


def spellings(backend: str, vector_math: bool | Iterable[str] = False) -> dict[str, str]:
    """:func:`spelling` of every operation that has one for ``backend``.

    Examples
    --------
    >>> spellings("numba", vector_math=True)["tanh"], spellings("numba")["tanh"], spellings("cuda")["arcsin"]
    ('_tanh', 'np.tanh', 'asin')
    """
    if backend != "numba" or not vector_math:
        return ops.spellings(backend)
    return ops.spellings(backend, _helpers(vector_math))


def _kernel_operations() -> frozenset[str]:
    """The table's operations of two or three operands a loop kernel calls as functions: all but the
    arithmetic operators (``+ - * / **``: the kernel language's own), those without a Numba or a CUDA
    spelling, and those slow in kernels."""
    return frozenset(op.name for op in ops.iterate() if op.arity in (2, 3) and op.numba and op.cuda
                     and not op.slow_in_kernels and not (op.infix and not op.piecewise_constant))


#: operations of two or three operands loop kernels call (``maximum``, ``logaddexp``, ``where``, the
#: predicates ``eq`` …): what the tensor evaluator's fused regions may hold besides arithmetic
KERNEL_OPERATIONS = _kernel_operations()


def kernel_spelling(name: str, backend: str, vector_math: bool | Iterable[str] = False) -> str:
    """How a loop kernel spells the :data:`KERNEL_OPERATIONS` operation ``name`` for ``backend``
    (``numba``, ``cuda``): the table's spelling (Numba: its helper where ``vector_math`` names it,
    as :func:`spelling`), but a predicate as a number (1 or 0) from its infix comparison, which both
    languages evaluate with NumPy's semantics (NaN compares unequal).

    Examples
    --------
    >>> kernel_spelling("ne", "numba"), kernel_spelling("ge", "cuda"), kernel_spelling("maximum", "cuda")
    ('(1.0 if {0} != {1} else 0.0)', '((real)(({0}) >= ({1})))', 'jc_maximum')
    >>> kernel_spelling("logaddexp", "numba"), kernel_spelling("logaddexp", "numba", vector_math=True)
    ('np.logaddexp', '_logaddexp')
    """
    op = ops.get(name)
    if op.piecewise_constant and op.infix:
        return f"(1.0 if {{0}} {op.infix} {{1}} else 0.0)" if backend == "numba" else f"((real)(({{0}}) {op.infix} ({{1}})))"
    return spelling(name, backend, vector_math)


def call_text(spelling: str, arguments: Iterable[str]) -> str:
    """The code of a call of ``spelling`` (a function, or a template with ``{0}`` …) on ``arguments``."""
    arguments = list(arguments)
    return spelling.format(*arguments) if "{" in spelling else f"{spelling}({', '.join(arguments)})"


@functools.cache
def calls(name: str, backend: str = "numba") -> frozenset[str]:
    """The table's operations a call of ``name`` makes in ``backend``'s code: ``name`` itself when it
    is spelled as a function, and those its template calls (``logistic``: ``exp``).

    Examples
    --------
    >>> sorted(calls("logistic")), sorted(calls("tanh")), sorted(calls("relu"))
    (['exp'], ['tanh'], [])
    """
    text = getattr(ops.get(name), backend)
    if "{" not in text:
        return frozenset({ops.get(name).name})
    return frozenset().union(*(calls(other, backend) for other in _REFERENCE.findall(text)))


def vector_math_used(names: Iterable[str]) -> set[str]:
    """The :data:`VECTOR_MATH` operations that calls of the operations ``names`` make in Numba code
    (their helpers are what :func:`vector_math_source` must write)."""
    return {called for name in names for called in calls(name) if called in VECTOR_MATH}


def slow_in_kernels() -> frozenset[str]:
    """The operations NumPy computes faster than a loop kernel (:attr:`jacacc.ops.Operation.slow_in_kernels`).

    Examples
    --------
    >>> "erf" in slow_in_kernels(), "exp" in slow_in_kernels()
    (True, False)
    """
    return frozenset(op.name for op in ops.iterate() if op.slow_in_kernels)


@functools.cache
def modules(backend: str) -> dict[str, Any]:
    """The modules the spellings of ``backend`` call, under the names they call them by (``np``,
    ``math``, ``scipy``, ``jacacc``): a namespace to ``exec`` generated code in (copy it).

    Examples
    --------
    >>> sorted(modules("numba"))
    ['jacacc', 'math', 'np']
    """
    out: dict[str, Any] = {"np": np, "math": math}
    for text in ops.spellings(backend).values():
        module = text.rpartition(".")[0]
        if "{" not in text and module and module.split(".")[0] not in out:  # templates use np, math
            importlib.import_module(module)  # ``scipy.special``: the submodule must be loaded
            out[module.split(".")[0]] = importlib.import_module(module.split(".")[0])
    return out


def fastmath_text(fastmath: bool | Iterable[str] | str) -> str:
    """Numba's ``fastmath`` argument as source text (``False``, ``True``, ``{'contract', 'reassoc'}``).

    Examples
    --------
    >>> fastmath_text(False), fastmath_text({"reassoc", "contract"}), fastmath_text(frozenset())
    ('False', "{'contract', 'reassoc'}", 'False')
    """
    if isinstance(fastmath, str):
        return fastmath
    if isinstance(fastmath, bool):
        return repr(fastmath)
    flags = sorted(fastmath)
    return "{" + ", ".join(repr(f) for f in flags) + "}" if flags else "False"


# ------------------------------------------------------------------------ vector math
def vector_math_source(used: Iterable[str], fastmath: bool | Iterable[str] | str = False) -> list[str]:
    """Source lines of the ``@njit(inline='always')`` helpers ``_exp``, ``_log``, ``_logaddexp``,
    ``_erf``, ``_tanh`` (``jacacc.ops.NUMBA_HELPERS``) that the operations ``used`` need (those of
    :data:`VECTOR_MATH` among them; the helpers they call themselves come along), jitted with
    Numba's ``fastmath`` (flags, a bool, or its text: :func:`fastmath_text`).  The generators
    compile their modules through :func:`~jacacc.kernels.inline.inline_helpers`, which writes
    each call into the statement that makes it; Numba inlines only the calls left under a guard.

    Examples
    --------
    >>> [line for line in vector_math_source({"tanh", "erf"}) if line.startswith("def")]
    ['def _exp(x):', 'def _tanh(x):', 'def _erf(x):']
    >>> vector_math_source({"sin"})
    []
    """
    needed = set(used) & VECTOR_MATH
    needed |= {callee for name in needed for callee in ops.NUMBA_HELPERS
               if callee != name and f"_{callee}(" in ops.NUMBA_HELPERS[name]}
    decorator = (f"@njit(inline='always', error_model='numpy', fastmath={fastmath_text(fastmath)}, "
                 "cache=False)")
    lines: list[str] = []
    for name, source in ops.NUMBA_HELPERS.items():  # callees first: the table lists exp before erf
        if name in needed:
            lines += ["", "", decorator, *source.splitlines()]
    return lines


# ------------------------------------------------------------------------ preambles
def numba_preamble(comment: str, used: Iterable[str] = (), fastmath: bool | Iterable[str] | str = False) -> list[str]:
    """The first lines of a generated Numba module: ``comment`` (a ``#`` line), the imports every
    spelling needs, and the :func:`vector_math_source` helpers of the operations ``used``."""
    return [f"# {comment}", "import math", "", "import numpy as np", "from numba import njit, prange",
            *vector_math_source(used, fastmath)]


#: integer helpers of the loop kernels (floor division, bounds) and ``x**2``, ``x**3`` as products
CUDA_PRELUDE = """\
__device__ __forceinline__ long long jc_floordiv(long long a, long long b) {
    long long q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long jc_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long jc_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ real jc_pow2(real x) { return x * x; }
__device__ __forceinline__ real jc_pow3(real x) { return x * x * x; }
"""


def cuda_preamble(dtype: Any = "float64") -> list[str]:
    """The first lines of generated CUDA C++: ``real`` (``double`` or ``float``), the integer helpers
    of :data:`CUDA_PRELUDE` and the table's helpers for what C spells differently
    (``jacacc.ops.CUDA_HELPERS``).

    Examples
    --------
    >>> cuda_preamble("float32")[0]
    'typedef float real;'
    """
    kind = np.dtype(dtype)
    if kind not in (np.float64, np.float32):
        raise ValueError(f"CUDA kernels compute in float64 or float32, not {kind}")
    ctype = "double" if kind == np.float64 else "float"
    return [f"typedef {ctype} real;", *CUDA_PRELUDE.splitlines(), *ops.CUDA_HELPERS.splitlines()]
