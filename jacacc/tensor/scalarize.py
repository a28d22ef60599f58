"""Small tensor programs as scalar instruction tables: a loop of 2 × 2 steps at the speed of compiled code.

A program whose tensors are small — a Kalman filter's 2 × 2 covariances, the six residuals of
Wood's function, a handful of scalars — spends its time in Python and NumPy's dispatch: one call
of a microsecond or more per planned node, where the node's arithmetic is a few nanoseconds.
:func:`scalar_program` writes such a program out entry by entry: every tensor becomes an array of
scalar values, every einsum, sum and elementwise function the scalar operations it stands for,
every slice, reshape, concatenation or scatter a renaming of entries (no operation at all).  The
result is a straight-line scalar program, run as an :class:`~jacacc.kernels.tables.InstructionTable`
by the Numba interpreter of the scalar kernels (:mod:`jacacc.kernels.tables`): its compile cost
does not depend on the program (one interpreter per set of operations and dtype, cached on disk),
and each instruction costs nanoseconds.

The program is written out by evaluating it once on NumPy *object* arrays whose entries are the
symbols of a scalar program: the einsums run as NumPy's own ``einsum`` over them, the structural
operators (:data:`STRUCTURAL_OPERATORS`) as their own NumPy ``forward``.  The unit tensors and
the structural zeros of the tensor level (``ones``, ``δ``, ``zeros``) are exact integers there,
so a product with a structural zero is no instruction, as the tensor level's δs are no
multiplications; any other constant, a zero that constants cancel to included
(:func:`~jacacc.tensor.expr.cancelled`), is a number and multiplies as one (∞·0 is NaN, as on
NumPy).

``np.max``/``np.min``'s derivative weights (``extremum_weights``) are written out as a running
``maximum`` (``minimum``), each entry's ``eq`` with it, and a division by the ties' count; the
shift of ``logsumexp`` and ``softmax`` (``shift_extremum``) as the running maximum alone; ``np.prod``'s zero masks, signs and zero counts (``prod_masks``) as comparisons; small LU factorizations as branch-free pivoting (:data:`FACTORIZATIONS`).

Where it is not used: a program with a general function other than these (the other LAPACK
operators, sorting), or with more than :data:`MAX_INSTRUCTIONS` scalar operations (its
FLOPs), is left to the NumPy program, and so is one where the table does not run faster
(:class:`~jacacc.tensor.evaluate.Program` times both).

Examples
--------
>>> import numpy as np
>>> from jacacc.tensor.expr import einsum, unary, var
>>> A, x = var("A", (2, 2)), var("x", (2,))
>>> y = unary("tanh", einsum("ij,j->i", A, x))
>>> s = scalar_program([y], [A, x])
>>> s.table.n_instructions        # per row a product, a product added (muladd), a tanh
6
>>> np.allclose(s.reference(np.eye(2), np.ones(2))[0], np.tanh(np.ones(2)))
True
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from functools import reduce
from typing import Any

import numpy as np

from jacacc.errors import UnsupportedOperationError
from jacacc.tensor.expr import OPERATORS, Tensor, flops_of, nodes_of

__all__ = ["ENABLED", "KEEP_BELOW", "MAX_INSTRUCTIONS", "SCALAR_AFTER", "STRUCTURAL_OPERATORS", "TRY_AFTER_SECONDS",
           "WRITE_SECONDS_PER_OPERATION", "ScalarProgram", "faster_table", "scalar_program", "time_before_trying"]

def _calls_before(text: str | None) -> int:
    from jacacc.tensor.fusion import call_count_setting

    return call_count_setting("JACACC_SCALAR_AFTER", text, 8)


#: calls of a program on NumPy arrays before the tier is tried (``JACACC_SCALAR_AFTER``): a program
#: called a few times does not pay for writing its table and compiling its interpreter
SCALAR_AFTER = _calls_before(os.environ.get("JACACC_SCALAR_AFTER"))
#: whether programs try the tier at all (``JACACC_SCALAR=0`` turns it off)
ENABLED = os.environ.get("JACACC_SCALAR", "1") != "0"
#: the NumPy time a program spends before the tier is tried: at least :data:`TRY_AFTER_SECONDS`, and at
#: least what writing its table costs (:data:`WRITE_SECONDS_PER_OPERATION` per FLOP, measured: a Kalman
#: gradient of 37 000 operations took 1.1 s), as a tracing JIT compiles code once it has run long
#: enough to pay for it; a program differentiated a few times (a test) never writes one
TRY_AFTER_SECONDS = 0.05
WRITE_SECONDS_PER_OPERATION = 8e-6
#: the tier is kept when its call takes at most this share of the NumPy program's
KEEP_BELOW = 0.8
#: the most scalar operations (the program's FLOPs) written out as a table: past it the table's
#: building (microseconds of Python per operation, and the table's memory) costs more than it can
#: save.  A Kalman filter's Hessian over 300 steps (1.1 M operations) wrote its table in 7.4 s and
#: 84 MB and ran 1.3 ms a call against its NumPy steps' 190 ms
MAX_INSTRUCTIONS = 4_000_000
#: general functions that only move entries (their NumPy ``forward`` runs on object arrays)
STRUCTURAL_OPERATORS = frozenset({"reshape", "index", "index_scatter", "concatenate", "pad", "gather",
                                  "scatter_add", "cumsum"})
#: the LU operators written out entry by entry (:func:`_lu_factors`), for matrices of at most
#: :data:`SMALL_FACTORIZATION` rows: their instructions grow as n³
FACTORIZATIONS = frozenset({"getrf", "getrs", "getri", "slogdet_lu"})
SMALL_FACTORIZATION = 6
#: elementwise functions of the tensor level that are the identity on values
_IDENTITIES = frozenset({"pos", "stop_gradient"})


class _Writer:
    """The scalar program being written, straight into value-numbered instructions
    (:class:`~jacacc.kernels.tables.ValueNumbering`): each operation of the same operands once, and
    no expression objects in between (building one per operation cost 20 µs of the 30 µs each
    operation took to write)."""

    def __init__(self, inputs: Sequence[str]) -> None:
        from jacacc.kernels.tables import ValueNumbering

        self.flat = ValueNumbering(inputs)

    def number(self, a: Any) -> int:
        """The value number of a symbol, or of a number (a constant)."""
        return a.number if isinstance(a, _Symbol) else self.flat.constant(float(a))

    def constant(self, value: float) -> _Symbol:
        return _Symbol(self, self.flat.constant(float(value)))

    def apply(self, fn: str, *args: Any) -> _Symbol:
        operands = [self.number(a) for a in args]
        # x ** 2 with the exponent a constant: one multiplication (ValueNumbering.operation)
        squared = fn == "pow" and self.flat.constant_values.get(operands[1]) == 2.0
        return _Symbol(self, self.flat.operation(fn, operands, squared))


class _Symbol:
    """One scalar of the program being written (an input, a constant or an operation's result), by
    its value number.

    Exact integers stand for the tensor level's structural values (a δ's 0 and 1): a product with
    0 is 0 and no instruction, a product with 1 and a sum with 0 are the other operand."""

    __slots__ = ("number", "writer")

    def __init__(self, writer: _Writer, number: int) -> None:
        self.writer, self.number = writer, number

    def __add__(self, other: Any) -> Any:
        return _arithmetic("add", self, other)

    def __radd__(self, other: Any) -> Any:
        return _arithmetic("add", other, self)

    def __mul__(self, other: Any) -> Any:
        return _arithmetic("mul", self, other)

    def __rmul__(self, other: Any) -> Any:
        return _arithmetic("mul", other, self)

    def __sub__(self, other: Any) -> Any:
        return _arithmetic("sub", self, other)

    def __rsub__(self, other: Any) -> Any:
        return _arithmetic("sub", other, self)

    def __neg__(self) -> Any:
        return self.writer.apply("neg", self)


def _arithmetic(fn: str, a: Any, b: Any) -> Any:
    """``a fn b`` with one of them a symbol: exact integers fold (0 + x, 1 · x, 0 · x, x − 0); an array
    of entries is NumPy's to apply entry by entry."""
    if type(a) is _Symbol and type(b) is _Symbol:  # the common case, first: two values
        writer = a.writer
        return _Symbol(writer, writer.flat.operation(fn, (a.number, b.number)))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return NotImplemented
    symbol = a if isinstance(a, _Symbol) else b
    other, other_first = (b, False) if symbol is a else (a, True)
    if isinstance(other, int):
        if fn == "mul" and other in (0, 1):
            return 0 if other == 0 else symbol
        if other == 0 and (fn == "add" or (fn == "sub" and not other_first)):
            return symbol
    return symbol.writer.apply(fn, a, b)


def _constant(writer: _Writer, node: Tensor) -> np.ndarray:
    """A constant's entries: exact integers for the symbolic unit tensors and structural zeros, numbers else."""
    name = node.param[0]
    if name == "zeros":
        return np.zeros(node.shape, dtype=object)
    if name == "ones":
        return np.ones(node.shape, dtype=object)
    if name == "delta":
        return np.eye(node.shape[0], dtype=int).astype(object)
    values = np.asarray(node.value, dtype=float)
    out = np.empty(values.shape, dtype=object)
    for index, v in np.ndenumerate(values):
        out[index] = writer.constant(v)
    return out


def _elementwise(writer: _Writer, name: str, p: float | None, args: list[np.ndarray]) -> np.ndarray:
    """An elementwise function of the tensor level's table as one scalar operation per entry."""
    if name in _IDENTITIES:
        return args[0]
    if name == "tangent_seed":
        return np.zeros(args[0].shape, dtype=object)

    def one(*xs: Any) -> Any:
        xs = tuple(x if isinstance(x, _Symbol) else writer.constant(x) for x in xs)
        if name == "pow" and p is not None:  # x ** p; without p, x ** y of two operands
            return writer.apply("pow", xs[0], p)
        if name == "shift":
            return writer.apply("add", xs[0], p)
        return writer.apply(name, *xs)

    return np.frompyfunc(one, len(args), 1)(*args)


def _entries(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` as an object array of ``shape``: NumPy gives a 0-d result as the entry itself."""
    if isinstance(value, np.ndarray):
        return value.reshape(shape)
    out = np.empty((), dtype=object)
    out[()] = value
    return out.reshape(shape)


class _Factors:
    """An LU factorization with partial pivoting of small matrices, written out (:func:`_lu_factors`):
    per matrix of the batch, the rows' conditional swaps ``(k, i, swapped)``, the unit lower factor's
    multipliers ``L[i][k]`` and the upper factor ``U`` — what getrs, getri and slogdet_lu read in
    place of LAPACK's packed factors and pivots, which no other node reads."""

    def __init__(self, batch: tuple[int, ...]) -> None:
        self.batch = batch
        self.matrices: dict[tuple[int, ...], tuple[list, list, list]] = {}


def _lu_factors(writer: _Writer, A: np.ndarray) -> _Factors:
    """Gaussian elimination with partial pivoting, branch-free: at column k each row below is swapped
    in where its entry is larger in magnitude than the pivot so far (``gt`` and ``where``), so the
    pivot is LAPACK's (the first largest); an exact zero pivot gives ∞ or NaN, which the program
    then recomputes with LAPACK to raise NumPy's error (:meth:`ScalarProgram.__call__`)."""
    n = A.shape[-1]
    factors = _Factors(A.shape[:-2])
    for index in np.ndindex(*factors.batch):
        a = [list(row) for row in A[index]]
        swaps, lower = [], [[None] * n for _ in range(n)]
        for k in range(n):
            for i in range(k + 1, n):
                larger = writer.apply("gt", writer.apply("abs", _symbol(writer, a[i][k])),
                                      writer.apply("abs", _symbol(writer, a[k][k])))
                for j in range(n):
                    a[k][j], a[i][j] = (writer.apply("where", larger, _symbol(writer, a[i][j]), _symbol(writer, a[k][j])),
                                        writer.apply("where", larger, _symbol(writer, a[k][j]), _symbol(writer, a[i][j])))
                for j in range(k):  # the multipliers found so far travel with their rows
                    lower[k][j], lower[i][j] = (writer.apply("where", larger, lower[i][j], lower[k][j]),
                                                writer.apply("where", larger, lower[k][j], lower[i][j]))
                swaps.append((k, i, larger))
            for i in range(k + 1, n):
                lower[i][k] = writer.apply("div", _symbol(writer, a[i][k]), _symbol(writer, a[k][k]))
                for j in range(k + 1, n):
                    a[i][j] = a[i][j] - lower[i][k] * a[k][j]
        factors.matrices[index] = (swaps, lower, a)
    return factors


def _symbol(writer: _Writer, entry: Any) -> Any:
    return entry if isinstance(entry, _Symbol) else writer.constant(entry)


def _permuted(writer: _Writer, rows: list, swaps: list, inverse: bool) -> list:
    rows = list(rows)
    for k, i, larger in (reversed(swaps) if inverse else swaps):
        rows[k], rows[i] = ([writer.apply("where", larger, _symbol(writer, b), _symbol(writer, c))
                             for b, c in zip(rows[i], rows[k], strict=True)],
                            [writer.apply("where", larger, _symbol(writer, c), _symbol(writer, b))
                             for b, c in zip(rows[i], rows[k], strict=True)])
    return rows


def _solve(writer: _Writer, factors: _Factors, index: tuple[int, ...], B: np.ndarray, transpose: bool) -> list:
    """op(A)·X = B from the written-out factors: P·A = L·U, so A⁻¹ = U⁻¹ L⁻¹ P and A⁻ᵀ = Pᵀ L⁻ᵀ U⁻ᵀ."""
    swaps, lower, upper = factors.matrices[index]
    n = len(upper)
    rows = [list(r) for r in B]
    if not transpose:
        rows = _permuted(writer, rows, swaps, inverse=False)
        for i in range(n):  # L y = P b, unit diagonal
            for k in range(i):
                rows[i] = [r - lower[i][k] * y for r, y in zip(rows[i], rows[k], strict=True)]
        for i in reversed(range(n)):  # U x = y
            for k in range(i + 1, n):
                rows[i] = [r - upper[i][k] * x for r, x in zip(rows[i], rows[k], strict=True)]
            rows[i] = [writer.apply("div", _symbol(writer, r), _symbol(writer, upper[i][i])) for r in rows[i]]
        return rows
    for i in range(n):  # Uᵀ y = b
        for k in range(i):
            rows[i] = [r - upper[k][i] * y for r, y in zip(rows[i], rows[k], strict=True)]
        rows[i] = [writer.apply("div", _symbol(writer, r), _symbol(writer, upper[i][i])) for r in rows[i]]
    for i in reversed(range(n)):  # Lᵀ z = y
        for k in range(i + 1, n):
            rows[i] = [r - lower[k][i] * z for r, z in zip(rows[i], rows[k], strict=True)]
    return _permuted(writer, rows, swaps, inverse=True)


def _factorization(writer: _Writer, node: Tensor, args: list[Any], factored: dict) -> Any:
    """The written-out value of an LU operator's output (getrf, getrs, getri, slogdet_lu)."""
    name, options, index = node.param
    options = dict(options)
    if name == "getrf":
        A = args[0]
        if A.shape[-1] > SMALL_FACTORIZATION:
            raise UnsupportedOperationError(f"the scalar tier writes out LU factorizations of at most "
                                            f"{SMALL_FACTORIZATION} × {SMALL_FACTORIZATION} matrices")
        key = id(node.args[0])
        if key not in factored:
            factored[key] = _lu_factors(writer, A)
        return factored[key]
    factors = args[1]
    if not isinstance(factors, _Factors):
        raise UnsupportedOperationError(f"the scalar tier reads {name}'s factors from getrf only")
    out = np.empty(node.shape, dtype=object)
    for batch in np.ndindex(*factors.batch):
        if name == "getrs":
            out[batch] = np.array(_solve(writer, factors, batch, args[3][batch], options["transpose"]), dtype=object)
        elif name == "getri":
            n = node.shape[-1]
            out[batch] = np.array(_solve(writer, factors, batch, np.eye(n, dtype=int).astype(object), False),
                                  dtype=object)
        else:  # slogdet_lu: the swaps' sign times the pivots', and Σ log|u_kk|
            swaps, _, upper = factors.matrices[batch]
            diagonal = [_symbol(writer, upper[k][k]) for k in range(len(upper))]
            if index == 0:
                sign = reduce(lambda s, d: s * writer.apply("sign", d), diagonal, 1)
                for _, _, larger in swaps:
                    sign = sign * writer.apply("where", larger, -1.0, 1.0)
                out[batch] = writer.apply("add", _symbol(writer, sign), 0.0)  # no -0.0, as NumPy's
            else:
                out[batch] = reduce(lambda t, d: t + writer.apply("log", writer.apply("abs", d)), diagonal, 0)
    return out


def _extrema(writer: _Writer, x: np.ndarray, axes: tuple[int, ...], largest: bool) -> Iterator[tuple]:
    """Per group of ``x`` over ``axes``: its index among the kept axes, its entries, and their running
    ``maximum`` (``minimum``), through which a NaN propagates as through NumPy's ``max``."""
    kept = [k for k in range(x.ndim) if k not in axes]
    grouped = x.transpose(kept + list(axes))
    pick = "maximum" if largest else "minimum"
    for outer in np.ndindex(*grouped.shape[:len(kept)]):
        entries = [_symbol(writer, e) for e in grouped[outer].reshape(-1)]
        yield outer, entries, reduce(lambda a, b: writer.apply(pick, a, b), entries)


def _shift_extremum(writer: _Writer, x: np.ndarray, axes: tuple[int, ...], largest: bool) -> np.ndarray:
    """The operator ``shift_extremum`` (:func:`jacacc.tensor.arrays.shift_extremum`) entry by entry."""
    kept = [k for k in range(x.ndim) if k not in axes]
    out = np.empty(tuple(x.shape[k] for k in kept), dtype=object)
    for outer, _, best in _extrema(writer, x, axes, largest):
        out[outer] = best
    return out.reshape(tuple(1 if k in axes else n for k, n in enumerate(x.shape)))


def _extremum_weights(writer: _Writer, x: np.ndarray, axes: tuple[int, ...], largest: bool) -> np.ndarray:
    """The operator ``extremum_weights`` (:func:`jacacc.tensor.arrays.extremum_weights`) entry by entry:
    per group over ``axes`` the running extremum (:func:`_extrema`); each entry's ``eq`` with it; and
    that over their count: ``1/ties`` at the extremal entries, 0 elsewhere, and ``0/0`` (NaN)
    throughout a group holding a NaN, as the operator."""
    kept = [k for k in range(x.ndim) if k not in axes]
    order = kept + list(axes)
    grouped = x.transpose(order)
    out = np.empty(grouped.shape, dtype=object)
    for outer, entries, best in _extrema(writer, x, axes, largest):
        ties = [writer.apply("eq", e, best) for e in entries]
        count = reduce(lambda a, b: a + b, ties)
        weights = np.empty(len(ties), dtype=object)
        weights[:] = [writer.apply("div", t, count) for t in ties]
        out[outer] = weights.reshape(grouped.shape[len(kept):])
    return out.transpose(np.argsort(order))


def _contract(node: Tensor, args: list[np.ndarray]) -> Any:
    """An einsum of object arrays, pair by pair along the steps the NumPy program runs
    (:class:`~jacacc.tensor.steps.Contraction`, the path its FLOPs are counted on): NumPy's einsum
    of three or more object operands loops over every letter at once, one product per combination
    (attention's ``QKᵀ`` chains: 366 264 instructions for 47 916 FLOPs)."""
    if len(args) <= 2:
        return np.einsum(node.param, *args, dtype=object)
    from jacacc.tensor.steps import Contraction

    contraction = Contraction(node.param, [a.shape for a in node.args])
    stack = list(args)
    for positions, _, subscripts, *_ in contraction.contraction_list:
        taken = [stack.pop(p) for p in positions]
        out = subscripts.partition("->")[2]
        stack.append(_entries(np.einsum(subscripts, *taken, dtype=object),
                              tuple(contraction._extent[c] for c in out)))
    (value,) = stack
    return value


def _prod_masks(writer: _Writer, x: np.ndarray, axes: tuple[int, ...], index: int) -> np.ndarray:
    """Output ``index`` of the operator ``prod_masks`` (:func:`jacacc.tensor.arrays._prod_masks`: the
    data behind ``np.prod``'s exact derivatives) entry by entry: the zero mask ``eq(x, 0)`` and its
    complement ``ne(x, 0)``; per group over ``axes`` the sign, a product of ``where(x < 0, −1, 1)``
    (exact), and the coefficients ``[count = c]`` (½ for c = 2) of the zero count, a sum of exact 0s and 1s."""
    if index in (0, 1):
        return _elementwise(writer, "eq" if index == 0 else "ne", None, [x, np.zeros(x.shape, dtype=object)])
    kept = [k for k in range(x.ndim) if k not in axes]
    grouped = x.transpose(kept + list(axes))
    out = np.empty(grouped.shape[:len(kept)], dtype=object)
    for outer in np.ndindex(*out.shape):
        entries = [_symbol(writer, e) for e in grouped[outer].reshape(-1)]
        if index == 2:
            signs = [writer.apply("where", writer.apply("lt", e, 0.0), -1.0, 1.0) for e in entries]
            out[outer] = reduce(lambda a, b: writer.apply("mul", a, b), signs)
        else:
            c = index - 3
            count = reduce(lambda a, b: writer.apply("add", a, b), [writer.apply("eq", e, 0.0) for e in entries])
            exactly = writer.apply("eq", count, float(c))
            out[outer] = writer.apply("mul", exactly, 0.5) if c == 2 else exactly
    return out


def _operator(node: Tensor, args: list[Any]) -> np.ndarray:
    name, options, index = node.param
    if any(isinstance(a, _Factors) for a in args):
        raise UnsupportedOperationError(f"the scalar tier reads written-out LU factors in {name}")
    if name not in STRUCTURAL_OPERATORS:
        raise UnsupportedOperationError(f"the scalar tier does not write out the general function {name}")
    result = OPERATORS[name].forward(*args, **dict(options))
    result = result[index] if isinstance(result, tuple) else result
    if not isinstance(result, np.ndarray) and node.shape == ():  # one entry read: NumPy gives the object
        result = _entries(result, ())
    if not isinstance(result, np.ndarray) or result.dtype != object or result.shape != node.shape:
        raise UnsupportedOperationError(f"the scalar tier cannot write out {name} on these entries")
    return result


class ScalarProgram:
    """A tensor program written out as a scalar instruction table (:func:`scalar_program`).

    Calling it evaluates the table with the Numba interpreter (:func:`reference`: with NumPy, one
    ufunc call per instruction — the slow check); it takes and returns what the program does.
    """

    def __init__(self, table: Any, input_shapes: list[tuple[int, ...]], output_shapes: list[tuple[int, ...]],
                 dtype: Any, factorized: bool = False) -> None:
        self.table = table
        #: whether it solves with written-out LU factors: a non-finite result may be a singular
        #: matrix, which the NumPy program reports (SingularMatrixError) and the table cannot
        self.factorized = factorized
        self.input_shapes, self.output_shapes = input_shapes, output_shapes
        self.dtype = np.dtype(dtype)
        ends = np.cumsum([0] + [math.prod(s) for s in output_shapes]).tolist()
        # each output a view of the one row of results, cut where it lies (np.split costs microseconds)
        self._parts = [(slice(a, b), shape) for a, b, shape in zip(ends[:-1], ends[1:], output_shapes, strict=True)]
        self._kernel: Callable[..., None] | None = None

    def _row(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
        if len(arrays) == 1:  # one argument in C order of the dtype: its memory is the row
            a = arrays[0]
            if a.dtype == self.dtype and a.flags.c_contiguous:
                return a.reshape(1, -1)
        return np.concatenate([np.asarray(a, dtype=self.dtype).reshape(-1) for a in arrays]).reshape(1, -1)

    def _split(self, values: np.ndarray) -> list[np.ndarray]:
        row = values[0]
        return [row[cut].reshape(shape) for cut, shape in self._parts]

    def build(self) -> float:
        """Compile (or load) the interpreter; the seconds it took."""
        from jacacc.kernels.tables import numba_table_kernel

        self._kernel = numba_table_kernel(self.table, self.dtype.name)
        seconds = self._kernel.build(one_point=True)  # a program's call is one point
        self._run = self._kernel.on_this_thread
        self._no_jacobian = np.empty((1, 0), dtype=self.dtype)
        self._results = (1, len(self.table.outputs))
        return seconds

    def __call__(self, *arrays: np.ndarray) -> list[np.ndarray]:
        # every lookup done once in build: a call of a small table costs a few microseconds
        if self._kernel is None:
            self.build()
        V = np.empty(self._results, dtype=self.dtype)
        self._run(self._row(arrays), V, self._no_jacobian)
        row = V[0]
        return [row[cut].reshape(shape) for cut, shape in self._parts]

    def reference(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """The table run by NumPy's interpreter (:func:`~jacacc.kernels.tables.numpy_table_kernel`)."""
        from jacacc.kernels.tables import numpy_table_kernel

        X = self._row(arrays)
        V = np.empty((1, len(self.table.outputs)), dtype=self.dtype)
        numpy_table_kernel(self.table)(X, V, np.empty((1, 0), dtype=self.dtype))
        return self._split(V)


def scalar_program(outputs: Sequence[Tensor], inputs: Sequence[Tensor], dtype: Any = np.float64) -> ScalarProgram:
    """The tensor program ``outputs`` of ``inputs`` written out as a scalar instruction table.

    Raises
    ------
    UnsupportedOperationError
        A general function that is not structural (:data:`STRUCTURAL_OPERATORS`), or more than
        :data:`MAX_INSTRUCTIONS` scalar operations.
    """
    from jacacc.kernels.tables import InstructionTable

    flops = flops_of(list(outputs))
    if flops > MAX_INSTRUCTIONS:
        raise UnsupportedOperationError(f"the scalar tier writes out at most {MAX_INSTRUCTIONS} operations; "
                                        f"this program has {flops}")
    sizes = [math.prod(x.shape) for x in inputs]
    writer = _Writer([f"a{k}" for k in range(sum(sizes))])  # input entries are values 0 … n − 1
    factored: dict[int, _Factors] = {}  # getrf's two outputs, one factorization
    factorized = False
    values: dict[int, np.ndarray] = {}
    start = 0
    for x, size in zip(inputs, sizes, strict=True):
        entries = np.empty(size, dtype=object)
        entries[:] = [_Symbol(writer, start + k) for k in range(size)]
        values[id(x)] = entries.reshape(x.shape)
        start += size
    for node in nodes_of(outputs):
        if id(node) in values:
            continue
        args = [values[id(a)] for a in node.args]
        if node.kind != "op" and any(isinstance(a, _Factors) for a in args):
            raise UnsupportedOperationError("the scalar tier reads written-out LU factors in getrs, getri and "
                                            "slogdet_lu only")
        if node.kind == "const":
            values[id(node)] = _constant(writer, node)
        elif node.kind == "var":
            raise ValueError(f"the expression reads {node.param!r}, which the program is not given")
        elif node.kind == "einsum":
            values[id(node)] = _entries(_contract(node, args), node.shape)
        elif node.kind == "add":  # entry by entry (a 0-d sum of two arrays is an entry, not an array)
            values[id(node)] = _entries(reduce(lambda a, b: _entries(a + b, node.shape), args), node.shape)
        elif node.kind == "unary":
            values[id(node)] = _entries(_elementwise(writer, *node.param, args), node.shape)
        elif node.kind == "op" and node.param[0] == "extremum_weights":
            values[id(node)] = _extremum_weights(writer, args[0], **dict(node.param[1]))
        elif node.kind == "op" and node.param[0] == "shift_extremum":
            values[id(node)] = _shift_extremum(writer, args[0], **dict(node.param[1]))
        elif node.kind == "op" and node.param[0] == "prod_masks":
            values[id(node)] = _entries(_prod_masks(writer, args[0], dict(node.param[1])["axes"], node.param[2]),
                                        node.shape)
        elif node.kind == "op" and node.param[0] in FACTORIZATIONS:
            values[id(node)] = _factorization(writer, node, args, factored)
            factorized = True
        elif node.kind == "op":
            values[id(node)] = _operator(node, args)
        else:
            raise UnsupportedOperationError(f"the scalar tier does not write out nodes of kind {node.kind!r}")
    results = [writer.number(e) for y in outputs for e in np.asarray(values[id(y)], dtype=object).reshape(-1)]
    table = InstructionTable.from_values(writer.flat, results, len(writer.flat.instructions), fused=True)
    return ScalarProgram(table, [x.shape for x in inputs], [y.shape for y in outputs], dtype, factorized)


def _best_of(fn: Callable[[], Any], repeat: int = 3) -> float:
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _agree(got: Sequence[np.ndarray], want: Sequence[Any], dtype: np.dtype) -> bool:
    rtol = 1e-4 if dtype == np.float32 else 1e-9
    return all(np.shape(g) == np.shape(w) and np.allclose(g, w, rtol=rtol, atol=rtol * 1e-3, equal_nan=True)
               for g, w in zip(got, want, strict=True))


def time_before_trying(program: Any) -> float:
    """Seconds of NumPy calls after which ``program`` tries the tier (infinite past :data:`MAX_INSTRUCTIONS`)."""
    threshold = getattr(program, "_scalar_threshold", None)
    if threshold is None:
        flops = flops_of(list(program.outputs))
        threshold = math.inf if flops > MAX_INSTRUCTIONS else max(TRY_AFTER_SECONDS, WRITE_SECONDS_PER_OPERATION * flops)
        program._scalar_threshold = threshold
    return threshold


def faster_table(program: Any, arrays: Sequence[np.ndarray]) -> ScalarProgram | bool:
    """The scalar tier of ``program`` (a :class:`~jacacc.tensor.evaluate.Program`) where it can be
    written out, gives the NumPy program's results on ``arrays`` and runs in at most
    :data:`KEEP_BELOW` of its time; ``False`` otherwise (the program keeps its NumPy steps)."""
    if not ENABLED or program.dtype not in (np.float64, np.float32) or importlib.util.find_spec("numba") is None:
        return False
    try:
        table = scalar_program(program.outputs, program.inputs, program.dtype)
    except UnsupportedOperationError:
        return False
    table.build()
    numpy_run = program._straight_line
    if not _agree(table(*arrays), numpy_run(*arrays), program.dtype):  # rounding apart, a bug here: never kept
        return False
    keep = _best_of(lambda: table(*arrays)) <= KEEP_BELOW * _best_of(lambda: numpy_run(*arrays))
    return table if keep else False
