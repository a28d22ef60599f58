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
  ``_tanh``, ``_erf`` in plain arithmetic (inlined by Numba, vectorized by
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

__all__ = ["CUDA_PRELUDE", "HELPER_NAMES", "SMALL_VECTOR_MATH", "VECTOR_MATH", "call_text", "calls", "cuda_preamble", "fastmath_text", "modules",
           "helper_set", "numba_preamble", "slow_in_kernels", "spelling", "spellings", "vector_math_source", "vector_math_used"]

#: operations with a generated vectorizable Numba helper ``_name`` (:attr:`jacacc.ops.Operation.vector_math`)
VECTOR_MATH = frozenset(op.name for op in ops.iterate() if op.vector_math)
#: those whose helper is small (a polynomial): the ones every Numba loop kernel calls
SMALL_VECTOR_MATH = frozenset(op.name for op in ops.iterate() if op.vector_math == "small")
#: the helpers this module can write (a table entry flagged ``vector_math`` must be one of them)
_HELPERS = ("exp", "log", "tanh", "erf")
#: the names of the helpers in generated Numba source (what :func:`~jacacc.kernels.inline.inline_helpers` replaces)
HELPER_NAMES = frozenset(f"_{name}" for name in _HELPERS)
if not VECTOR_MATH <= set(_HELPERS) or {op.vector_math for op in ops.iterate()} - {"", "small", "large"}:
    raise RuntimeError(  # pragma: no cover - a table entry this module has no helper for
        "jacacc.ops flags vector_math (small or large) on an operation jacacc.kernels.functions writes no helper "
        f"for: {sorted(VECTOR_MATH - set(_HELPERS))}")
_REFERENCE = re.compile(r"\{([A-Za-z_][A-Za-z_0-9]*)\}")


# ------------------------------------------------------------------------ spellings
def helper_set(vector_math: bool | Iterable[str]) -> frozenset[str]:
    """The operations spelled as helpers for ``vector_math``: all of :data:`VECTOR_MATH` (True), none
    (False), or those named.

    Examples
    --------
    >>> sorted(helper_set(SMALL_VECTOR_MATH)), sorted(helper_set(["erf", "sin"])), helper_set(False)
    (['exp', 'log', 'tanh'], ['erf'], frozenset())
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
# exp, log and erf in plain arithmetic (no library call), so that LLVM vectorizes the block loop
# through them: a libm call inside a vectorized loop is made once per lane, and every vector
# register live across it is spilled and reloaded.  exp: x = k ln2 + r (Cody-Waite), Taylor
# polynomial of degree 13 on |r| <= ln2/2 (truncation < 5e-18), 2^k as two exponent-bit factors
# (subnormal results, no overflow of the scale).  log: x = m 2^e with m in [1/sqrt2, sqrt2),
# log m = 2 atanh(f), f = (m-1)/(m+1), |f| <= 0.172, odd series to f^23 (truncation < 1e-18).
# erf: erf(x)/x on [0, 1] and erfc(x) exp(x^2) on [1, 3] and [3, 6] as Chebyshev series of
# degree 24 (interpolation at 25 Chebyshev nodes in 40-digit mpmath arithmetic; the last
# coefficients are < 1e-18 of the first), summed by Clenshaw's recurrence with the interval's
# coefficients chosen per lane; erf = 1 beyond 6.  Accuracy: a few ulp (tests: 1e-14 relative).

_ERF_0_1 = (
    1.013017938436931, -0.14750420530926206, -0.027729634080096602, 0.004752966284637892,
    0.00025196196008550934, -8.912601846903248e-05, -2.543514614684977e-07, 1.1901332279884313e-06,
    -3.256505357133642e-08, -1.2263965511606946e-08, 6.297474950250667e-10, 1.0161866833434493e-10,
    -7.609212205474058e-12, -6.906471246826706e-13, 7.089623326506998e-14, 3.854359549737529e-15,
    -5.4734799562779915e-16, -1.7154881555112374e-17, 3.6317872592241404e-18, 5.3894778242634077e-20,
    -2.1178570827314786e-20, -4.0168199781994815e-23, 1.101960179759119e-22, -9.942166294197988e-25,
    -5.193807059951604e-25,
)
_ERFCX_1_3 = (
    0.2785389365977923, -0.11964641832736307, 0.02392588774648554, -0.004503974067265867,
    0.0008045451692536015, -0.00013720361484011932, 2.244458275373349e-05, -3.535572865202117e-06,
    5.380083091307861e-07, -7.92969488788695e-08, 1.1346142347924916e-08, -1.579118251021591e-09,
    2.1413966089607892e-10, -2.8336608279151752e-11, 3.6639154492636035e-12, -4.634539763843172e-13,
    5.741110562829963e-14, -6.971613081019351e-15, 8.306159448233229e-16, -9.717289575388913e-17,
    1.1170873596296705e-17, -1.2627574442788551e-18, 1.4044753779626395e-19, -1.537689736443607e-20,
    1.6402561792868998e-21,
)
_ERFCX_3_6 = (
    0.12902689965474168, -0.0420426781395118, 0.006698487121092753, -0.0010450916791743758,
    0.00015985899884949414, -2.3998261587238652e-05, 3.53906410506357e-06, -5.131303200649095e-07,
    7.320268611264974e-08, -1.0282193129248155e-08, 1.4229088707596404e-09, -1.9411157958365732e-10,
    2.611796346594898e-11, -3.4677962235781513e-12, 4.5456029570973385e-13, -5.884864531875017e-14,
    7.527649782554211e-15, -9.51743765070784e-16, 1.189783691087231e-16, -1.471105478536267e-17,
    1.799615101685757e-18, -2.1787131631333446e-19, 2.6110895843210425e-20, -3.097995840397878e-21,
    3.5928700001861414e-22,
)

_LN2_HI, _LN2_LO = 0.6931471803691238, 1.9082149292705877e-10


def _horner(var: str, coefficients: list[float]) -> str:
    text = repr(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        text = f"({text})*{var} + {c!r}"
    return text


def vector_math_source(used: Iterable[str], fastmath: bool | Iterable[str] | str = False) -> list[str]:
    """Source lines of the ``@njit(inline='always')`` helpers ``_exp``, ``_log``, ``_erf``,
    ``_tanh`` that the operations ``used`` need (those of :data:`VECTOR_MATH` among them; the
    helpers they call themselves come along), jitted with Numba's ``fastmath`` (flags, a bool, or
    its text: :func:`fastmath_text`).  The generators compile their modules through
    :func:`~jacacc.kernels.inline.inline_helpers`, which writes each call into the statement
    that makes it; Numba inlines only the calls left under a guard.

    Examples
    --------
    >>> [line for line in vector_math_source({"tanh", "erf"}) if line.startswith("def")]
    ['def _exp(x):', 'def _tanh(x):', 'def _erf(x):']
    >>> vector_math_source({"sin"})
    []
    """
    used = set(used) & VECTOR_MATH
    decorator = (f"@njit(inline='always', error_model='numpy', fastmath={fastmath_text(fastmath)}, "
                 "cache=False)")
    exp_taylor = [1.0 / math.factorial(k) for k in range(14)]
    log_series = [2.0 / (2 * j + 1) for j in range(12)]
    lines: list[str] = []
    if "exp" in used or "erf" in used:
        lines += [
            "", "", decorator, "def _exp(x):",
            "    k = np.floor(x * 1.4426950408889634 + 0.5)",
            "    k = k if k < 1100.0 else 1100.0",
            "    k = k if k > -1100.0 else -1100.0",
            f"    r = (x - k * {_LN2_HI!r}) - k * {_LN2_LO!r}",
            f"    p = {_horner('r', exp_taylor)}",
            "    ki = np.int64(k)",
            "    h = ki >> 1",
            "    y = p * np.int64((h + 1023) << 52).view(np.float64) * np.int64((ki - h + 1023) << 52).view(np.float64)",
            "    y = y if x < 709.782712893384 else np.inf",
            "    y = y if x > -745.1332191019412 else 0.0",
            "    return y if x == x else x",
        ]
    if "log" in used:
        lines += [
            "", "", decorator, "def _log(x):",
            "    tiny = x < 2.2250738585072014e-308",
            "    b = np.float64(x * 18014398509481984.0 if tiny else x).view(np.int64)",
            "    e = (b >> 52) - (1077 if tiny else 1023)",
            "    m = np.int64((b & 4503599627370495) | 4607182418800017408).view(np.float64)",
            "    big = m > 1.4142135623730951",
            "    m = m * 0.5 if big else m",
            "    ef = np.float64(e + 1 if big else e)",
            "    f = (m - 1.0) / (m + 1.0)",
            "    s = f * f",
            f"    y = ef * {_LN2_HI!r} + (f * ({_horner('s', log_series)}) + ef * {_LN2_LO!r})",
            "    y = y if x > 0.0 else (-np.inf if x == 0.0 else np.nan)",
            "    return y if x < np.inf else x",
        ]
    if "tanh" in used:
        # tanh |x| = e / (e + 2), e = expm1(2|x|) = 2^k (expm1(r) + 1) − 1 with 2|x| = k ln2 + r and
        # expm1(r) = r + r²·q(r), q the Taylor series of degree 12 (exact at k = 0: no cancellation
        # for small x); ±1 from |x| = 20 on (tanh rounds to 1 from 19.06).  Measured: 3 ulp at most
        # against NumPy, 1.8× the speed of the former series-or-exp form (one polynomial, not two).
        q_taylor = [1.0 / math.factorial(j) for j in range(2, 15)]
        lines += [
            "", "", decorator, "def _tanh(x):",
            "    a = abs(x)",
            "    y = 2.0 * (a if a < 20.0 else 20.0)",
            "    k = np.floor(y * 1.4426950408889634 + 0.5)",
            f"    r = (y - k * {_LN2_HI!r}) - k * {_LN2_LO!r}",
            f"    p = r + r * r * ({_horner('r', q_taylor)})",
            "    scale = np.int64((np.int64(k) + 1023) << 52).view(np.float64)",
            "    e = scale * p + (scale - 1.0)",
            "    t = e / (e + 2.0)",
            "    t = 1.0 if a >= 20.0 else t",
            "    t = -t if x < 0.0 else t",
            "    t = x if x == 0.0 else t",
            "    return t if x == x else x",
        ]
    if "erf" in used:
        intervals = [("_ERF_0_1", 0.0, 1.0), ("_ERFCX_1_3", 1.0, 3.0), ("_ERFCX_3_6", 3.0, 6.0)]
        lines += [
            "", "", decorator, "def _erf(x):",
            "    a = abs(x)",
            "    r0 = a < 1.0",
            "    r1 = a < 3.0",
            "    t = 2.0 * a - 1.0 if r0 else (a - 2.0 if r1 else (2.0 * a - 9.0) / 3.0)",
            "    t2 = 2.0 * t",
            "    b1 = 0.0",
            "    b2 = 0.0",
        ]
        tables = {"_ERF_0_1": _ERF_0_1, "_ERFCX_1_3": _ERFCX_1_3, "_ERFCX_3_6": _ERFCX_3_6}
        degree = len(tables["_ERF_0_1"]) - 1
        for j in range(degree, 0, -1):
            c0, c1, c2 = (repr(tables[name][j]) for name, _, _ in intervals)
            lines.append(f"    b1, b2 = t2 * b1 - b2 + ({c0} if r0 else ({c1} if r1 else {c2})), b1")
        c0, c1, c2 = (repr(tables[name][0]) for name, _, _ in intervals)
        lines += [
            f"    y = t * b1 - b2 + ({c0} if r0 else ({c1} if r1 else {c2}))",
            "    g = _exp(-a * a)",  # out of the conditional: inline_helpers writes it into the statements
            "    e = a * y if r0 else 1.0 - g * y",
            "    e = 1.0 if a >= 6.0 else e",
            "    return -e if x < 0.0 else e",
        ]
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
