"""The Numba backend: points-minor blocks, a vectorizable loop over the points of a block.

The generated module is ordinary Python.  Its driver ``kernel(X, V, J, first,
last)`` runs over *blocks* of ``B`` points (``B`` a power of two, 8 … 256, see
:func:`block_size`) of the points ``first … last − 1``, with the GIL released:
:func:`jacacc.kernels.threads.run_blocks` gives each thread a share of whole
blocks (Numba's ``parallel=True`` would cost 1.5–2 s more of every kernel's
compilation for the same ``prange``).  Each block is copied, transposed, into a small scratch
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

import time
from typing import Any, ClassVar

import numpy as np

from jacacc import kernels
from jacacc.codegen.base import (
    TABLE_THRESHOLD,
    Backend,
    CodePrinter,
    JacobianProgram,
    Statement,
    host_runner,
    register_source,
)
from jacacc.errors import RegistryError, require_extra
from jacacc.kernels import tables
from jacacc.kernels.threads import run_blocks
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


def _functions_used(prog: JacobianProgram) -> set[str]:
    """The operations the program applies (each printed by the table's spelling, which may call others)."""
    used: set[str] = set()
    stack: list[Expr] = [s.expr for s in prog.statements]
    while stack:
        e = stack.pop()
        fn = getattr(e, "fn", None)
        if fn is not None:
            used.add(fn)
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
    vector_math : bool, default True
        Call the kernel layer's vectorizable helpers rather than libm.
    cache : bool, default False
        Numba's ``cache``, printed into every decorator: for a module imported from a file
        (:func:`jacacc.kernels.cached_module`).
    """

    function_names: ClassVar[dict[str, str]] = kernels.spellings("numba")

    def __init__(self, dtype: str = "float64", fastmath: bool | frozenset[str] = False,
                 vector_math: bool = True, cache: bool = False) -> None:
        super().__init__(dtype)
        self.fastmath = fastmath
        self.vector_math = vector_math
        self.cache = cache
        if vector_math:  # the helpers, in templates that call them too (logistic's exp)
            self.function_names = kernels.spellings("numba", vector_math=True)
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
        return kernels.fastmath_text(self.fastmath)

    def _decorator(self) -> str:
        # nogil: the driver's shares of points run on threads (jacacc.kernels.threads), not in a prange
        return f"@njit(nogil=True, error_model='numpy', fastmath={self._fastmath_text()}, cache={self.cache})"

    def _statement(self, s: Statement) -> str:
        line = self.assign(s.name, self.doprint(s.expr))
        return f"{line}  # {s.comment}" if s.comment else line

    # ---------------------------------------------------------------- the module
    def block_program(self, prog: JacobianProgram, name: str, max_statements: int, block: int | None = None) -> str:
        """The source of ``prog``: block parts of at most ``max_statements`` statements
        and the driver ``name(X, V, J, first, last)`` over points ``first … last − 1`` (``J`` as
        ``(N, m*n)``), which :func:`jacacc.kernels.threads.run_blocks` calls per thread."""
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

        used = kernels.vector_math_used(_functions_used(prog)) if self.vector_math else set()
        lines = kernels.numba_preamble(
            f"generated by jacacc.codegen (numba backend): blocks of {B} points stored points-minor "
            f"in buf ({n_rows} rows: {n} inputs, {m} values, {m * n} Jacobian entries, {len(kept)} kept "
            f"between parts); {len(chunks)} part(s), each a vectorizable loop over the block",
            used, self._fastmath_text())
        lines += ["", f"BLOCK = {B}  # points per block: the driver's shares are whole blocks"]
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
            self._decorator(),
            f"def {name}(X, V, J, first, last):",
            ind + f"buf = np.empty({n_rows * B}, dtype=X.dtype)",
            ind + f"for start in range(first, last, {B}):",
            ind * 2 + f"L = min({B}, last - start)",
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
    """``@njit(nogil=True)`` over blocks of points shared between threads, each block
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
        Print ``exp``, ``log``, ``tanh`` and ``erf`` (the table's
        ``vector_math`` operations, also where a template calls one: ``logistic``)
        as calls of the kernel layer's generated arithmetic helpers (``_exp`` …,
        :func:`jacacc.kernels.vector_math_source`; inlined, a few ulp) that
        vectorize with the loop;
        ``False`` calls libm, one call per point.  ``"auto"``: the helpers for
        programs of at most ``VECTOR_MATH_MAX_STATEMENTS`` statements, libm
        above — every inlined helper multiplies LLVM's work, and on large
        programs compile time dominates (GaussianDataFitting, 2 275 edges:
        more than 5 minutes with the helpers, about 1 minute without).
    disk_cache : bool, default True
        Import the module from a file under :func:`jacacc.kernels.kernel_cache_dir` with
        Numba's ``cache=True``, so a kernel compiled once on a machine is loaded by every later
        process (then :attr:`~jacacc.codegen.compile.Kernel.compile_time` is the load);
        ``False`` compiles anew, as a measurement of compile time wants (straight-line tier).
    tier : {"auto", "straight", "table"}, default "auto"
        ``straight``: the program as one generated module (above); ``table``: an
        :class:`~jacacc.kernels.tables.InstructionTable` run by the interpreter of
        :mod:`jacacc.kernels.tables`, compiled once per set of operations and dtype, whose
        compile time does not depend on the program (``block`` is its points per block, by
        default ``tables.NUMBA_BLOCK``); ``auto``: straight-line up to ``table_threshold``
        statements, a table above.
    table_threshold : int, default TABLE_THRESHOLD (1000)

    Examples
    --------
    >>> NumbaBackend(block=128).block
    128
    """

    name = "numba"
    extra = "cpu"

    def __init__(self, max_statements: int = 1500, fastmath: bool | Any = False, block: int | None = None,
                 vector_math: bool | str = "auto", disk_cache: bool = True, tier: str = "auto",
                 table_threshold: int = TABLE_THRESHOLD) -> None:
        if not _positive_int(max_statements):
            raise RegistryError(f"numba backend: max_statements must be a positive integer, got {max_statements!r}")
        if block is not None and not _positive_int(block):
            raise RegistryError(f"numba backend: block must be a positive integer, got {block!r}")
        self.max_statements = int(max_statements)
        self.fastmath = fastmath if isinstance(fastmath, bool) else frozenset(fastmath)
        self.block = None if block is None else int(block)
        if vector_math != "auto" and not isinstance(vector_math, bool):
            raise RegistryError(f"numba backend: vector_math must be True, False or 'auto', got {vector_math!r}")
        if not isinstance(disk_cache, bool):
            raise RegistryError(f"numba backend: disk_cache must be True or False, got {disk_cache!r}")
        self.vector_math = vector_math
        self.disk_cache = disk_cache
        self.set_tier(tier, table_threshold)

    def generate(self, prog: JacobianProgram, dtype: str) -> str:
        if self.uses_table(prog):
            return prog.table().listing(limit=None)
        return self._source(prog, dtype, self.disk_cache)

    def _source(self, prog: JacobianProgram, dtype: str, cache: bool) -> str:
        vector_math = self.vector_math
        if vector_math == "auto":
            vector_math = len(prog.statements) <= VECTOR_MATH_MAX_STATEMENTS
        printer = NumbaPrinter(dtype, self.fastmath, bool(vector_math), cache)
        return printer.block_program(prog, "kernel", self.max_statements, self.block)

    def load(self, source: str, prog: JacobianProgram, dtype: str) -> Any:
        if self.uses_table(prog):
            return self._load_table(prog, dtype)
        numba = require_extra("numba", "cpu")
        # the helpers written into their callers' statements (Numba's own inlining costs a copy of
        # the helper's IR per call); ``source`` stays the readable text
        text = kernels.inline_helpers(source, kernels.HELPER_NAMES)
        module = kernels.cached_module(text) if self.disk_cache else None
        if module is not None:
            namespace = vars(module)
        else:  # no cache directory: run from memory, where Numba cannot cache
            if self.disk_cache:
                text = kernels.inline_helpers(self._source(prog, dtype, False), kernels.HELPER_NAMES)
            filename = register_source(text, self.name)
            namespace = {"__name__": f"jacacc_numba_{filename[-13:-1]}"}
            exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - our own generated code
        dispatcher = namespace["kernel"]
        nb_type = getattr(numba.types, dtype)
        signature = (nb_type[:, ::1], nb_type[:, ::1], nb_type[:, ::1], numba.types.int64, numba.types.int64)
        block = int(namespace["BLOCK"])
        work = max(len(prog.statements), 1)

        def build() -> float:
            start = time.perf_counter()
            dispatcher.compile(signature)
            return time.perf_counter() - start

        def fill(X: np.ndarray, V: np.ndarray, J2: np.ndarray) -> None:  # every entry, structural zeros too
            run_blocks(lambda first, last: dispatcher(X, V, J2, first, last), X.shape[0], block, work)

        run = host_runner(prog, fill)
        run.build = build  # type: ignore[attr-defined]
        return run

    def _load_table(self, prog: JacobianProgram, dtype: str) -> Any:
        """The table tier: the program's instruction table run by the Numba interpreter."""
        kernel = tables.numba_table_kernel(prog.table(), dtype, self.block or tables.NUMBA_BLOCK,
                                           fastmath=bool(self.fastmath))
        run = host_runner(prog, kernel)
        run.build = kernel.build  # type: ignore[attr-defined]
        return run
