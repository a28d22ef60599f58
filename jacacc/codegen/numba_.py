"""The Numba backend: points-minor blocks, a vectorizable loop over the points of a block.

The generated module is ordinary Python.  Its driver ``kernel(X, V, J)`` runs a
``prange`` over *blocks* of ``B`` points (``B`` a power of two, 8 … 256, see
:func:`block_size`).  Each block is copied, transposed, into a small scratch
vector ``buf`` of ``R × B`` numbers laid out points-minor (structure of
arrays): row ``k`` holds coordinate ``k`` of the block's points, at
``buf[k*B : (k+1)*B]``.  The :class:`~jacacc.codegen.base.JacobianProgram` then runs as
one loop ``for i in range(L)`` over the block's points whose body is the
straight-line program on scalars, reading its inputs from the input rows and
writing the values and Jacobian entries to output rows.  Every access is
``buf[c*B + i]`` with a literal ``c*B``: unit stride in ``i`` and one base
pointer, so LLVM's loop vectorizer proves the rows independent without runtime
alias checks and runs the body on SIMD lanes across points (``exp``/``log``
calls stay scalar libm calls, one per lane).  Finally the output rows are
transposed back into the caller's row-major ``V[p, :]`` and ``J[p, :, :]``
while the block is still in cache.  Numba is imported only when a kernel is
loaded, never by :mod:`jacacc.codegen`.

Layout of ``buf`` (rows of ``B`` numbers): the ``n`` inputs, the ``m`` values,
the ``m·n`` Jacobian entries (row-major), then the values that cross from one
part to a later one (below).

Large graphs
------------
LLVM's compile time grows faster than linearly with the size of one basic
block, so a program with more than ``max_statements`` statements is split into
*parts*: each part is its own ``@njit`` function with its own loop over the
block, and the values that a later part reads are kept in extra rows of
``buf``.

Examples
--------
>>> import numpy as np, jacacc
>>> from jacacc.codegen.base import lower
>>> f = jacacc.trace(lambda x: [x[0] * np.exp(x[1])], 2)
>>> prog = lower(f.graph, jacacc.optimize(f.graph).schedule)
>>> src = NumbaBackend(block=64).generate(prog, "float64")
>>> [line.strip() for line in src.splitlines() if line.strip().startswith("x") and "= buf[" in line]
['x0 = buf[i]', 'x1 = buf[64 + i]']
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from jacacc import ops
from jacacc.codegen.base import Backend, CodePrinter, JacobianProgram, Statement, register_source
from jacacc.errors import RegistryError, require_extra
from jacacc.partials import Expr

__all__ = ["NumbaBackend", "NumbaPrinter", "block_size"]

#: bytes of the per-block scratch vector the automatic block size aims at (a 32 KiB L1 data cache;
#: measured on RoeFlux_1d, 27 rows: blocks of 64-128 points beat 256-512 by about 1.3x)
BLOCK_BYTES = 1 << 15
#: largest program (statements) that gets the inlined vectorizable exp/log/erf by default
VECTOR_MATH_MAX_STATEMENTS = 1500

#: smallest and largest automatic block (points); powers of two, multiples of any SIMD width
MIN_BLOCK, MAX_BLOCK = 8, 256


def block_size(rows: int, itemsize: int = 8, budget: int = BLOCK_BYTES) -> int:
    """The automatic block size: the largest power of two in [8, 256] points whose
    scratch vector (``rows × B`` numbers of ``itemsize`` bytes) fits in ``budget`` bytes.

    Examples
    --------
    >>> block_size(9), block_size(30), block_size(2_000)
    (256, 128, 8)
    """
    b = MAX_BLOCK
    while b > MIN_BLOCK and rows * b * itemsize > budget:
        b //= 2
    return b


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


def _tanh_series(terms: int) -> list[float]:
    """Taylor coefficients of ``tanh(x) / x`` in powers of ``x²``, from ``tanh' = 1 - tanh²``:
    with ``tanh x = Σ a_k x^(2k+1)``, ``(2k+1) a_k = -Σ_{i+j=k-1} a_i a_j`` (exact fractions)."""
    a = [Fraction(1)]
    for k in range(1, terms):
        a.append(-sum((a[i] * a[k - 1 - i] for i in range(k)), Fraction(0)) / (2 * k + 1))
    return [float(c) for c in a]


#: below this |x|, ``_tanh`` sums the series (its terms shrink by (2x/π)² ≈ 0.12 per power of x²);
#: above it, ``1 - 2/(e^{2|x|} + 1)`` loses at most a factor 2 to cancellation
_TANH_SERIES_BELOW = 0.55
_TANH_TERMS = 21


def _vector_math_source(used: set[str], fastmath: str) -> list[str]:
    """Source of the ``@njit(inline='always')`` helpers ``_exp``, ``_log``, ``_erf``, ``_tanh``
    that ``used`` needs."""
    decorator = f"@njit(inline='always', error_model='numpy', fastmath={fastmath}, cache=False)"
    exp_taylor = [1.0 / math.factorial(k) for k in range(14)]
    log_series = [2.0 / (2 * j + 1) for j in range(12)]
    lines: list[str] = []
    if "exp" in used or "erf" in used or "tanh" in used:
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
        lines += [
            "", "", decorator, "def _tanh(x):",
            "    a = abs(x)",
            "    s = x * x",
            f"    small = x * ({_horner('s', _tanh_series(_TANH_TERMS))})",
            "    big = 1.0 - 2.0 / (_exp(2.0 * a) + 1.0)",
            "    big = -big if x < 0.0 else big",
            f"    y = small if a < {_TANH_SERIES_BELOW!r} else big",
            "    return y if x == x else x",
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
        tables = {name: globals()[name] for name, _, _ in intervals}
        degree = len(tables["_ERF_0_1"]) - 1
        for j in range(degree, 0, -1):
            c0, c1, c2 = (repr(tables[name][j]) for name, _, _ in intervals)
            lines.append(f"    b1, b2 = t2 * b1 - b2 + ({c0} if r0 else ({c1} if r1 else {c2})), b1")
        c0, c1, c2 = (repr(tables[name][0]) for name, _, _ in intervals)
        lines += [
            f"    y = t * b1 - b2 + ({c0} if r0 else ({c1} if r1 else {c2}))",
            "    e = a * y if r0 else 1.0 - _exp(-a * a) * y",
            "    e = 1.0 if a >= 6.0 else e",
            "    return -e if x < 0.0 else e",
        ]
    return lines


#: operations printed as calls of the generated vectorizable helpers when ``vector_math`` is on
VECTOR_MATH = frozenset({"exp", "log", "erf", "tanh"})


def _functions_used(prog: JacobianProgram) -> set[str]:
    used: set[str] = set()
    stack: list[Expr] = [s.expr for s in prog.statements]
    while stack:
        e = stack.pop()
        fn = getattr(e, "fn", None)
        if fn is not None:
            used.add(fn)
            if fn == "logistic":  # printed through exp (NumbaPrinter.print_call)
                used.add("exp")
        stack.extend(e.args)
    return used


class NumbaPrinter(CodePrinter):
    """Print a JacobianProgram as points-minor block code for Numba's nopython mode.

    Parameters
    ----------
    dtype : str
        ``"float64"`` or ``"float32"``.
    fastmath : bool or set of str, default False
        Numba's ``fastmath`` argument, printed into every decorator.
    """

    function_names: ClassVar[dict[str, str]] = ops.spellings("numba")

    def __init__(self, dtype: str = "float64", fastmath: bool | frozenset[str] = False,
                 vector_math: bool = True) -> None:
        super().__init__(dtype)
        self.fastmath = fastmath
        self.vector_math = vector_math
        if vector_math:
            self.function_names = {**self.function_names, **{f: f"_{f}" for f in VECTOR_MATH}}
        self.block = MAX_BLOCK
        self.rows: dict[str, int] = {}

    # ---------------------------------------------------------------- buffer rows
    def row(self, k: int) -> str:
        """``buf[k*B + i]``: point ``i`` of row ``k`` of the block."""
        offset = k * self.block
        return f"buf[{offset} + i]" if offset else "buf[i]"

    def load(self, name: str, col: int, prog: JacobianProgram) -> str:
        return f"{name} = {self.row(self.rows[name])}"

    def store_value(self, row: int, value: Expr | None, prog: JacobianProgram) -> str:
        return f"{self.row(prog.n_inputs + row)} = {'np.nan' if value is None else self.doprint(value)}"

    def store_jacobian(self, row: int, col: int, value: Expr | None, prog: JacobianProgram) -> str:
        k = prog.n_inputs + prog.n_outputs + row * prog.n_inputs + col
        return f"{self.row(k)} = {'0.0' if value is None else self.doprint(value)}"

    def _fastmath_text(self) -> str:
        if isinstance(self.fastmath, bool):
            return repr(self.fastmath)
        return "{" + ", ".join(repr(f) for f in sorted(self.fastmath)) + "}" if self.fastmath else "False"

    def _decorator(self, parallel: bool = False) -> str:
        return (f"@njit({'parallel=True, ' if parallel else ''}error_model='numpy', "
                f"fastmath={self._fastmath_text()}, cache=False)")

    def _statement(self, s: Statement) -> str:
        line = self.assign(s.name, self.doprint(s.expr))
        return f"{line}  # {s.comment}" if s.comment else line

    # ---------------------------------------------------------------- the module
    def block_program(self, prog: JacobianProgram, name: str, max_statements: int, block: int | None = None) -> str:
        """The source of ``prog``: block parts of at most ``max_statements`` statements
        and the parallel driver ``name(X, V, J)`` (``J`` as ``(N, m*n)``)."""
        n, m = prog.n_inputs, prog.n_outputs
        stmts = prog.statements
        chunks = [stmts[k : k + max_statements] for k in range(0, len(stmts), max_statements)] or [[]]
        defined_in: dict[str, int] = {v: -1 for v in prog.inputs}
        for k, chunk in enumerate(chunks):
            for s in chunk:
                defined_in[s.name] = k
        final_used: set[str] = set()
        for e in [*prog.values, *prog.jacobian.values()]:
            if e is not None:
                final_used |= {str(v) for v in e.variables}
        # names each part reads from buf (inputs, or values of earlier parts)
        needs: list[set[str]] = []
        for k, chunk in enumerate(chunks):
            local = {s.name for s in chunk}
            used = set().union(*({str(v) for v in s.expr.variables} for s in chunk))
            if k == len(chunks) - 1:
                used |= final_used
            needs.append(used - local)
        kept = sorted({v for used in needs for v in used if defined_in[v] >= 0}, key=lambda v: (defined_in[v], v))
        first_kept = n + m + m * n
        self.rows = {v: c for c, v in enumerate(prog.inputs)}
        self.rows.update({v: first_kept + j for j, v in enumerate(kept)})
        n_rows = first_kept + len(kept)
        itemsize = np.dtype(self.dtype).itemsize
        self.block = int(block) if block else block_size(n_rows, itemsize)
        B, ind = self.block, self.indent

        lines = [
            f"# generated by jacacc.codegen (numba backend): blocks of {B} points stored points-minor "
            f"in buf ({n_rows} rows: {n} inputs, {m} values, {m * n} Jacobian entries, {len(kept)} kept "
            f"between parts); {len(chunks)} part(s), each a vectorizable loop over the block",
            "import math",
            "",
            "import numpy as np",
            "from numba import njit, prange",
        ]
        if self.vector_math:
            lines += _vector_math_source(_functions_used(prog) & VECTOR_MATH, self._fastmath_text())
        lines.append("")
        for k, chunk in enumerate(chunks):
            lines += ["", self._decorator(), f"def {name}_part{k}(buf, L):", ind + "for i in range(L):"]
            body = [self.load(v, 0, prog) for v in sorted(needs[k], key=lambda v: (self.rows[v], v))]
            body += [self._statement(s) for s in chunk]
            body += [f"{self.row(self.rows[s.name])} = {s.name}" for s in chunk if s.name in self.rows]
            if k == len(chunks) - 1:
                body += [self.store_value(r, v, prog) for r, v in enumerate(prog.values)]
                body += [self.store_jacobian(r, c, prog.jacobian.get((r, c)), prog)
                         for r in range(m) for c in range(n)]
            lines += [ind * 2 + line for line in body]
        lines += [
            "",
            "",
            self._decorator(parallel=True),
            f"def {name}(X, V, J):",
            ind + "N = X.shape[0]",
            ind + f"for b in prange((N + {B - 1}) // {B}):",
            ind * 2 + f"start = b * {B}",
            ind * 2 + f"L = min({B}, N - start)",
            ind * 2 + f"buf = np.empty({n_rows * B}, dtype=X.dtype)",
            ind * 2 + "for i in range(L):",
            ind * 3 + f"for k in range({n}):",
            ind * 4 + f"buf[k * {B} + i] = X[start + i, k]",
        ]
        lines += [ind * 2 + f"{name}_part{k}(buf, L)" for k in range(len(chunks))]
        lines += [
            ind * 2 + "for i in range(L):",
            ind * 3 + f"for r in range({m}):",
            ind * 4 + f"V[start + i, r] = buf[({n} + r) * {B} + i]",
            ind * 3 + f"for e in range({m * n}):",
            ind * 4 + f"J[start + i, e] = buf[({n + m} + e) * {B} + i]",
        ]
        return "\n".join(lines) + "\n"


def _positive_int(value: Any) -> bool:
    """An integer ≥ 1 (NumPy integers too; not a bool, a float or a numeric string)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1


class NumbaBackend(Backend):
    """``@njit(parallel=True)``: a ``prange`` over blocks of points, each block
    computed points-minor by a loop LLVM vectorizes; float64 and float32.

    Parameters
    ----------
    max_statements : int, default 1500
        Programs longer than this are split into parts of at most this many
        statements (see the module notes).
    fastmath : bool or iterable of str, default False
        Numba's ``fastmath``: ``True`` for all LLVM fast-math flags, or a set of
        them (``{"contract", "afn"}`` …).  Off by default: results then match
        the NumPy reference to rounding.
    block : int, optional
        Points per block; by default :func:`block_size` of the scratch rows.
    vector_math : bool or "auto", default "auto"
        Print ``exp``, ``log`` and ``erf`` as calls of generated arithmetic
        helpers (``_exp`` …, inlined, a few ulp) that vectorize with the loop;
        ``False`` calls libm, one call per point.  ``"auto"``: the helpers for
        programs of at most ``VECTOR_MATH_MAX_STATEMENTS`` statements, libm
        above — every inlined helper multiplies LLVM's work, and on large
        programs compile time dominates (GaussianDataFitting, 2 275 edges:
        more than 5 minutes with the helpers, about 1 minute without).

    Examples
    --------
    >>> NumbaBackend(block=128).block
    128
    """

    name = "numba"
    extra = "cpu"

    def __init__(self, max_statements: int = 1500, fastmath: bool | Any = False, block: int | None = None,
                 vector_math: bool | str = "auto") -> None:
        if not _positive_int(max_statements):
            raise RegistryError(f"numba backend: max_statements must be a positive integer, got {max_statements!r}")
        if block is not None and not _positive_int(block):
            raise RegistryError(f"numba backend: block must be a positive integer, got {block!r}")
        self.max_statements = int(max_statements)
        self.fastmath = fastmath if isinstance(fastmath, bool) else frozenset(fastmath)
        self.block = None if block is None else int(block)
        if vector_math != "auto" and not isinstance(vector_math, bool):
            raise RegistryError(f"numba backend: vector_math must be True, False or 'auto', got {vector_math!r}")
        self.vector_math = vector_math

    def generate(self, prog: JacobianProgram, dtype: str) -> str:
        vector_math = self.vector_math
        if vector_math == "auto":
            vector_math = len(prog.statements) <= VECTOR_MATH_MAX_STATEMENTS
        printer = NumbaPrinter(dtype, self.fastmath, bool(vector_math))
        return printer.block_program(prog, "kernel", self.max_statements, self.block)

    def load(self, source: str, prog: JacobianProgram, dtype: str) -> Any:
        numba = require_extra("numba", "cpu")
        filename = register_source(source, self.name)
        namespace: dict[str, Any] = {"__name__": f"jacacc_numba_{filename[-13:-1]}"}
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
        dispatcher = namespace["kernel"]
        nb_type = getattr(numba.types, dtype)
        signature = (nb_type[:, ::1], nb_type[:, ::1], nb_type[:, ::1])
        m, n = prog.n_outputs, prog.n_inputs

        def build() -> float:
            start = time.perf_counter()
            dispatcher.compile(signature)
            return time.perf_counter() - start

        def run(X: np.ndarray, V: np.ndarray | None = None, J: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
            N = X.shape[0]
            V = np.empty((N, m), dtype=X.dtype) if V is None else V
            J = np.empty((N, m, n), dtype=X.dtype) if J is None else J
            dispatcher(X, V, J.reshape(N, m * n))  # every entry is written, structural zeros too
            return V, J

        run.build = build  # type: ignore[attr-defined]
        return run
