"""Instruction tables: a straight-line program as data, run by one interpreter per backend and dtype.

A straight-line program compiled as one function costs LLVM time and memory that grow faster
than its length (a scheduled Jacobian of 3 000 statements: 14 s of Numba; 10⁴ statements:
minutes).  Past a measured size the scalar schedules' kernels (:mod:`jacacc.codegen`) run their
program as *data* instead: an :class:`InstructionTable` of three-address instructions over a
register file, executed by an interpreter that is generated once from the operation table
(:mod:`jacacc.ops`), compiled once per backend and dtype and cached on disk.  Compile time no
longer depends on the program; a program costs the seconds it takes to build its table.

The register file holds, for each register, one row of ``B`` points (points-minor, as the
straight-line Numba kernels lay out their blocks), so every instruction is a gather, an
operation and a scatter over a block of points: ``R[d, :] = f(R[a, :], R[b, :])``, a loop
LLVM vectorizes across points.  Consecutive instructions of one operation form a *run*, and
the interpreter dispatches once per run, not once per instruction; the table is ordered by
levels of independent instructions (:func:`group_by_operation`) so that runs are long.

Layout of an :class:`InstructionTable`:

* registers ``0 … k−1`` hold the program's constants (filled once per thread);
* the inputs are loaded into their registers at the start of every block;
* every other value gets a register when it is computed and gives it back after its last
  read (a register is never written by the instruction that reads it last, so no loop
  writes the row it reads: LLVM's runtime alias checks pass and the loop runs on SIMD lanes);
* the ``m`` values and ``m·n`` Jacobian entries are read from the registers named by
  :attr:`InstructionTable.outputs` at the end of each block.

Three interpreters run a table: :func:`numpy_table_kernel` (NumPy, one ufunc call per
instruction over all points: the reference), :func:`numba_table_kernel` (a ``prange`` over
blocks of points) and :func:`cuda_table_source` (one CUDA thread per point, the register file
in device memory, ``register * stride + point``; every thread runs the same instruction, so the
dispatch never diverges), whose source runs on the host through :func:`host_table_kernel`
where there is no GPU.

Examples
--------
>>> import numpy as np
>>> from jacacc.partials import Var, Const, Apply
>>> table = InstructionTable.build(
...     ["x0", "x1"],
...     [("v1", Apply("sin", (Var("x1"),))), ("v2", Apply("mul", (Var("x0"), Var("v1"))))],
...     [Var("v2"), Var("v1"), Apply("mul", (Var("x0"), Apply("cos", (Var("x1"),))))])
>>> table
InstructionTable(inputs=2, instructions=4, runs=3, registers=5, constants=0, outputs=3)
>>> X = np.array([[2.0, 0.0], [1.0, np.pi / 2]])
>>> V, J = np.empty((2, 1)), np.empty((2, 2))
>>> numpy_table_kernel(table)(X, V, J)
>>> V.tolist(), np.round(J, 12).tolist()
([[0.0], [1.0]], [[0.0, 2.0], [1.0, 0.0]])
"""

from __future__ import annotations

import functools
import math
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc import ops
from jacacc.kernels.functions import call_text, cuda_preamble, numba_preamble, spelling, vector_math_used
from jacacc.kernels.threads import run_blocks
from jacacc.partials import FUNCTIONS, Apply, Const, Expr, Var, numpy_function

__all__ = [
    "CUDA_TABLE_KERNEL",
    "MULADD",
    "OPERATIONS",
    "InstructionTable",
    "ValueNumbering",
    "cuda_table_source",
    "cupy_table_kernel",
    "fused_multiply_adds",
    "group_by_operation",
    "host_table_kernel",
    "numba_table_kernel",
    "numba_table_source",
    "numpy_table_kernel",
    "operation_text",
    "results_of",
]

#: operations whose value is their argument's: a table reads the argument's register instead
_IDENTITIES = frozenset({"pos", "stop_gradient"})


#: the interpreters' one instruction of their own, not an operation of :mod:`jacacc.ops`:
#: ``a·b + c``, a product read only by a sum fused into it (:func:`fused_multiply_adds`), rounded
#: twice as the two instructions it replaces
MULADD = "muladd"


def _operations() -> tuple[str, ...]:
    """The opcodes, in dispatch order: the schedule's arithmetic first (an interpreter tests them
    first), then every other operation of the table that has a Numba and a CUDA spelling."""
    hot = ("mul", "add", "sub", "neg", "div", "square", MULADD)
    rest = sorted(name for name, spec in FUNCTIONS.items()
                  if name not in hot and name not in _IDENTITIES and name != "tangent_seed"
                  and ops.get(name).numba and ops.get(name).cuda)
    return hot + tuple(rest)


def _arity(name: str) -> int:
    return 3 if name == MULADD else FUNCTIONS[name].arity


#: every operation an instruction may carry; an instruction's opcode is its index here
OPERATIONS: tuple[str, ...] = _operations()
_OPCODE = {name: k for k, name in enumerate(OPERATIONS)}
#: the CUDA kernel's name
CUDA_TABLE_KERNEL = "jacacc_table"


# =========================================================================== the table
@dataclass(frozen=True, eq=False)
class InstructionTable:
    """A straight-line program as three-address instructions over a register file.

    Build with :meth:`build`.

    Attributes
    ----------
    n_inputs : int
    n_registers : int
        Rows of the register file.
    code : numpy.ndarray
        ``(instructions, 4)`` int32: opcode (an index into :data:`OPERATIONS`), destination
        register, first and second operand registers (a third operand, ``where``'s, is in
        :attr:`third`).
    third : numpy.ndarray
        ``(instructions,)`` int32: the third operand's register (``where``), else 0.
    runs : numpy.ndarray
        ``(runs, 3)`` int32: opcode, first and one-past-last instruction of each run of
        consecutive instructions of one operation.
    constants : numpy.ndarray
        float64 values of the constant registers ``0 … len(constants) − 1``.
    input_rows : numpy.ndarray
        int32 register of each input.
    outputs : numpy.ndarray
        int32 register of each result, in the order given to :meth:`build`.
    statements : int
        The assignments the table was built from.
    """

    n_inputs: int
    n_registers: int
    code: np.ndarray
    third: np.ndarray
    runs: np.ndarray
    constants: np.ndarray
    input_rows: np.ndarray
    outputs: np.ndarray
    statements: int

    @property
    def n_instructions(self) -> int:
        return int(self.code.shape[0])

    def __repr__(self) -> str:
        return (f"InstructionTable(inputs={self.n_inputs}, instructions={self.n_instructions}, "
                f"runs={len(self.runs)}, registers={self.n_registers}, constants={len(self.constants)}, "
                f"outputs={len(self.outputs)})")

    @classmethod
    def build(cls, inputs: Sequence[str], assignments: Sequence[tuple[str, Expr]],
              results: Sequence[Expr]) -> InstructionTable:
        """The table of a straight-line program.

        Parameters
        ----------
        inputs : sequence of str
            The input variables, in column order.
        assignments : sequence of (name, Expr)
            Single assignments in execution order, each over the inputs and earlier names;
            nested expressions become one instruction per operation.
        results : sequence of Expr
            What the program returns (names, constants — NaN for an unknown value — or
            expressions over them), in output order.

        Raises
        ------
        ValueError
            An operation the interpreters do not carry, or a name read before it is assigned.
        """
        flat = ValueNumbering(inputs)
        for name, expr in assignments:
            flat.assign(name, expr)
        return cls.from_values(flat, [flat.value(e) for e in results], len(assignments))

    @classmethod
    def from_values(cls, flat: ValueNumbering, results: Sequence[int], statements: int,
                    fused: bool = False) -> InstructionTable:
        """The table of the instructions ``flat`` holds (:class:`ValueNumbering`, filled by
        :meth:`ValueNumbering.operation`), returning the values numbered ``results``; ``fused``:
        products read only by a sum fused into it (:func:`fused_multiply_adds`)."""
        instructions = flat.instructions
        if fused:
            instructions = fused_multiply_adds(instructions, results)
        return _allocate(group_by_operation(instructions), flat, list(results), flat.n_inputs, statements)

    def listing(self, limit: int | None = 50) -> str:
        """The instructions as text (``r5 = mul r3 r4``), at most ``limit`` of them."""
        lines = [repr(self)]
        lines += [f"r{r} = {v!r}" for r, v in enumerate(self.constants.tolist())]
        lines += [f"r{r} = input {k}" for k, r in enumerate(self.input_rows.tolist())]
        shown = self.code if limit is None else self.code[:limit]
        for q, (op, d, a, b) in enumerate(shown.tolist()):
            arity = _arity(OPERATIONS[op])
            operands = [a, b, int(self.third[q])][:arity]
            lines.append(f"r{d} = {OPERATIONS[op]} " + " ".join(f"r{x}" for x in operands))
        if len(shown) < self.n_instructions:
            lines.append(f"… {self.n_instructions - len(shown)} more")
        lines.append("outputs: " + " ".join(f"r{r}" for r in self.outputs.tolist()))
        return "\n".join(lines)


class ValueNumbering:
    """Assignments → SSA instructions ``(opcode, dest, operands)`` over value numbers; values
    ``0 … n−1`` are the inputs, constants get numbers of their own (recorded in ``constants``).

    A writer that computes its operations' operands itself (:mod:`jacacc.tensor.scalarize`) calls
    :meth:`operation` and :meth:`constant` directly and builds the table with
    :meth:`InstructionTable.from_values`, with no expression objects in between.
    """

    def __init__(self, inputs: Sequence[str]) -> None:
        self.names: dict[str, int] = {name: k for k, name in enumerate(inputs)}
        self.n_inputs = self.n_values = len(self.names)
        self.constants: dict[bytes, int] = {}  # by bit pattern: -0.0 and NaNs kept apart
        self.constant_values: dict[int, float] = {}
        self.computed: dict[tuple, int] = {}
        self.instructions: list[tuple[int, int, tuple[int, ...]]] = []

    def new_value(self) -> int:
        self.n_values += 1
        return self.n_values - 1

    def constant(self, value: float) -> int:
        key = struct.pack("<d", value)
        number = self.constants.get(key)
        if number is None:
            number = self.constants[key] = self.new_value()
            self.constant_values[number] = float(value)
        return number

    def assign(self, name: str, expr: Expr) -> None:
        self.names[name] = self.value(expr)

    def leaf(self, e: Expr) -> int:
        """The value number of a variable or a constant."""
        if isinstance(e, Const):
            return self.constant(e.value)
        number = self.names.get(e.name) if isinstance(e, Var) else None
        if number is None:
            if isinstance(e, Var):
                raise ValueError(f"instruction table: {e.name!r} is read before it is assigned")
            raise TypeError(f"instruction table: cannot read {e!r}")
        return number

    def value(self, expr: Expr) -> int:
        """The value number of ``expr``, emitting its operations (iteratively: programs nest deep)."""
        if isinstance(expr, Apply) and not any(isinstance(a, Apply) for a in expr.args):
            return self.apply(expr, [self.leaf(a) for a in expr.args])  # the common case: one operation
        if not isinstance(expr, Apply):
            return self.leaf(expr)
        stack: list[tuple[Expr, bool]] = [(expr, False)]
        done: dict[int, int] = {}
        while stack:
            e, expanded = stack.pop()
            if id(e) in done:
                continue
            if not isinstance(e, Apply):
                done[id(e)] = self.leaf(e)
            elif not expanded:
                stack.append((e, True))
                stack.extend((a, False) for a in e.args)
            else:
                done[id(e)] = self.apply(e, [done[id(a)] for a in e.args])
        return done[id(expr)]

    def apply(self, e: Apply, operands: list[int]) -> int:
        squared = e.fn == "pow" and isinstance(e.args[1], Const) and e.args[1].value == 2.0
        return self.operation(e.fn, operands, squared)

    def operation(self, fn: str, operands: Sequence[int], squared: bool = False) -> int:
        """The value number of ``fn`` of the values ``operands`` (``squared``: a ``pow`` whose
        exponent is the constant 2), emitting its instruction unless the same was computed."""
        if fn in _IDENTITIES:
            return operands[0]
        if fn == "tangent_seed":  # the value 0 whatever the operand (jacacc.rules)
            return self.constant(0.0)
        if squared:
            fn, operands = "square", operands[:1]  # x**2 is x*x, as LLVM computes it in straight-line code
        opcode = _OPCODE.get(fn)
        if opcode is None:
            raise ValueError(f"instruction table: operation {fn!r} has no interpreter instruction")
        key = (opcode, *operands)
        number = self.computed.get(key)
        if number is None:  # the same operation of the same operands is computed once
            number = self.computed[key] = self.new_value()
            self.instructions.append((opcode, number, tuple(operands)))
        return number


def fused_multiply_adds(instructions: Sequence[tuple[int, int, tuple[int, ...]]],
                        results: Sequence[int]) -> list[tuple[int, int, tuple[int, ...]]]:
    """The SSA instructions with each ``add`` of a product that nothing else reads (no other
    instruction, no result) replaced by one :data:`MULADD` of the product's operands and the
    other addend, and the product dropped: a dot product's ``2k`` instructions become ``k``.
    The value is the same to the last bit (``a·b + c`` is rounded twice, as the two were; the
    interpreters spell it without contraction into a fused multiply-add).

    >>> mul, add = _OPCODE["mul"], _OPCODE["add"]
    >>> prog = [(mul, 2, (0, 1)), (add, 3, (2, 0)), (mul, 4, (0, 0)), (add, 5, (3, 4)), (add, 6, (4, 5))]
    >>> [(OPERATIONS[op], d, operands) for op, d, operands in fused_multiply_adds(prog, [6])]
    [('muladd', 3, (0, 1, 0)), ('mul', 4, (0, 0)), ('add', 5, (3, 4)), ('add', 6, (4, 5))]
    """
    mul, add, muladd = _OPCODE["mul"], _OPCODE["add"], _OPCODE[MULADD]
    reads: dict[int, int] = {}
    for _, _, operands in instructions:
        for a in operands:
            reads[a] = reads.get(a, 0) + 1
    for r in results:
        reads[r] = reads.get(r, 0) + 2  # a result is never fused away
    product = {dest: operands for opcode, dest, operands in instructions if opcode == mul}
    fused: set[int] = set()
    out: list[tuple[int, int, tuple[int, ...]]] = []
    for opcode, dest, operands in instructions:
        if opcode == add:
            for k in (0, 1):
                x, other = operands[k], operands[1 - k]
                if x in product and reads.get(x) == 1 and x not in fused:
                    fused.add(x)
                    opcode, operands = muladd, (*product[x], other)
                    break
        out.append((opcode, dest, operands))
    return [instruction for instruction in out if not (instruction[0] == mul and instruction[1] in fused)]


def group_by_operation(instructions: Sequence[tuple[int, int, tuple[int, ...]]]) -> list[tuple[int, int, tuple[int, ...]]]:
    """Reorder SSA instructions so that instructions of one operation follow each other.

    Each instruction is placed at its *level* (one more than the deepest instruction it reads;
    all instructions of a level are independent), and within a level the instructions are
    sorted by operation, keeping the program order among equals.  An interpreter that
    dispatches once per run of one operation then dispatches about once per (level, operation)
    pair instead of once per instruction.  Levels are bounded to windows of the program
    (``WINDOW`` instructions) so that a value is not computed long before it is read, which
    would keep its register, and its row of points, alive meanwhile.

    Examples
    --------
    >>> mul, add = _OPCODE["mul"], _OPCODE["add"]
    >>> prog = [(mul, 2, (0, 1)), (add, 3, (2, 0)), (mul, 4, (0, 0)), (add, 5, (4, 1))]
    >>> [(OPERATIONS[op], d) for op, d, _ in group_by_operation(prog)]
    [('mul', 2), ('mul', 4), ('add', 3), ('add', 5)]
    """
    out: list[tuple[int, int, tuple[int, ...]]] = []
    for start in range(0, len(instructions), WINDOW):
        window = instructions[start:start + WINDOW]
        level: dict[int, int] = {}  # within the window; values of earlier windows are at level 0
        keys = []
        for position, (opcode, dest, operands) in enumerate(window):
            depth = 1 + max((level.get(a, 0) for a in operands), default=0)
            level[dest] = depth
            keys.append((depth, opcode, position))
        out.extend(window[position] for _, _, position in sorted(keys))
    return out


#: instructions regrouped together by :func:`group_by_operation`
WINDOW = 512


def _allocate(instructions: list[tuple[int, int, tuple[int, ...]]], flat: ValueNumbering, results: list[int],
              n_inputs: int, n_statements: int) -> InstructionTable:
    """Registers for the values: constants first (fixed), inputs next (reloaded every block), then
    each value a register from its instruction to its last read (results: to the end)."""
    last_read = np.full(flat.n_values, -1, dtype=np.int64)
    for position, (_, _, operands) in enumerate(instructions):
        last_read[list(operands)] = position
    forever = len(instructions)
    last_read[results] = forever
    constant_numbers = sorted(flat.constant_values)
    register = np.full(flat.n_values, -1, dtype=np.int64)
    register[constant_numbers] = np.arange(len(constant_numbers))
    register[:n_inputs] = np.arange(len(constant_numbers), len(constant_numbers) + n_inputs)
    n_registers = len(constant_numbers) + n_inputs
    permanent = len(constant_numbers)  # constants are filled once per thread: never reused
    free: list[int] = [int(register[k]) for k in range(n_inputs) if last_read[k] < 0][::-1]
    # plain lists in the loop (an entry of a NumPy array costs a boxed integer on each access)
    register_of, last = register.tolist(), last_read.tolist()
    code: list[tuple[int, int, int, int]] = []
    third = np.zeros(len(instructions), dtype=np.int32)
    for position, (opcode, dest, operands) in enumerate(instructions):
        if free:
            row = register_of[dest] = free.pop()
        else:
            row = register_of[dest] = n_registers
            n_registers += 1
        rows = [register_of[a] for a in operands]
        code.append((opcode, row, rows[0], rows[1] if len(rows) > 1 else 0))
        if len(rows) > 2:
            third[position] = rows[2]
        # operands read for the last time give their registers back, after the destination is
        # chosen: an instruction never writes a row it reads
        distinct = len(operands) == 1 or (len(operands) == 2 and operands[0] != operands[1])
        for a in operands if distinct else set(operands):
            if last[a] == position and register_of[a] >= permanent:
                free.append(register_of[a])
        if last[dest] < 0:  # computed and never read (dead code the lowering left): reuse at once
            free.append(row)
    register = np.array(register_of, dtype=np.int64)
    table = np.array(code, dtype=np.int32).reshape(len(instructions), 4)
    return InstructionTable(
        n_inputs=n_inputs,
        n_registers=max(n_registers, 1),
        code=table,
        third=third,
        runs=_runs(table[:, 0]),
        constants=np.array([flat.constant_values[k] for k in constant_numbers], dtype=np.float64),
        input_rows=register[:n_inputs].astype(np.int32),
        outputs=register[results].astype(np.int32) if results else np.zeros(0, dtype=np.int32),
        statements=n_statements,
    )


def _runs(opcodes: np.ndarray) -> np.ndarray:
    """``(opcode, start, end)`` of each run of equal opcodes."""
    if len(opcodes) == 0:
        return np.zeros((0, 3), dtype=np.int32)
    starts = np.flatnonzero(np.concatenate(([True], opcodes[1:] != opcodes[:-1])))
    ends = np.append(starts[1:], len(opcodes))
    return np.stack([opcodes[starts], starts, ends], axis=1).astype(np.int32)


# =========================================================================== operation text
def operation_text(name: str, backend: str, operands: Sequence[str]) -> str:
    """One operation on operand texts, as the interpreters of ``backend`` (``numba``, ``cuda``)
    compute it: the operation table's spelling, NumPy's semantics (a predicate is 1 or 0).

    Examples
    --------
    >>> operation_text("mul", "numba", ["a", "b"]), operation_text("ge", "cuda", ["a", "b"])
    ('a * b', '((a >= b) ? (real)1 : (real)0)')
    >>> operation_text("exp", "numba", ["a"]), operation_text("pow", "cuda", ["a", "b"])
    ('_exp(a)', 'pow(a, b)')
    """
    if name == MULADD:  # never contracted into one rounding: the two instructions' value exactly
        a, b, c = operands
        return f"{a} * {b} + {c}" if backend == "numba" else f"jacacc_mul_rn({a}, {b}) + {c}"
    spec = FUNCTIONS[name]
    if spec.form == "prefix":
        return f"-{operands[0]}"
    if spec.form == "iverson":
        if backend == "numba":
            return f"(1.0 if {operands[0]} {spec.symbol} {operands[1]} else 0.0)"
        return f"(({operands[0]} {spec.symbol} {operands[1]}) ? (real)1 : (real)0)"
    if spec.form == "infix":
        if name == "pow" and backend == "cuda":
            return f"pow({operands[0]}, {operands[1]})"
        return f"{operands[0]} {spec.symbol} {operands[1]}"
    if name == "square":  # x*x, as the straight-line kernels compute it
        return f"{operands[0]} * {operands[0]}"
    text = spelling(name, backend, vector_math=(backend == "numba"))
    return call_text(text, [f"({o})" if "{" in text else o for o in operands])


# =========================================================================== NumPy
def numpy_table_kernel(table: InstructionTable) -> Callable[[np.ndarray, np.ndarray], None]:
    """The table run by NumPy: one ufunc call per instruction over all points (the reference).

    Returns ``run(X, V, J)``: ``X`` of shape ``(N, n_inputs)``; the first ``m = V.shape[1]``
    results are written to ``V``, the others to ``J`` (``(N, len(outputs) − m)``).
    """
    functions = [(lambda a, b, c: a * b + c) if name == MULADD else numpy_function(name) for name in OPERATIONS]
    arity = [_arity(name) for name in OPERATIONS]
    code, third = table.code.tolist(), table.third.tolist()

    def run(X: np.ndarray, V: np.ndarray, J: np.ndarray) -> None:
        N = X.shape[0]
        R = np.empty((table.n_registers, N), dtype=X.dtype)
        R[:len(table.constants)] = table.constants.astype(X.dtype)[:, None]
        R[table.input_rows] = X.T
        with np.errstate(all="ignore"):
            for q, (op, d, a, b) in enumerate(code):
                k = arity[op]
                args = (R[a],) if k == 1 else (R[a], R[b]) if k == 2 else (R[a], R[b], R[third[q]])
                R[d] = functions[op](*args)
        m = V.shape[1]
        V[...] = R[table.outputs[:m]].T
        J[...] = R[table.outputs[m:]].T

    return run


# =========================================================================== Numba
def numba_table_source(fastmath: bool = False, operations: Sequence[str] = OPERATIONS) -> str:
    """The Numba interpreter module of ``operations``: ``table_kernel(X, V, J, code, third, runs,
    constants, input_rows, outputs, n_registers, block, first, last)`` runs points ``first …
    last − 1`` in blocks of ``block`` points, each block one loop over its points per instruction
    (see the module notes), and writes the first ``V.shape[1]`` results to ``V``, the others to
    ``J``; it releases the GIL, so threads can share the points.  ``table_kernel_one(X, V, J, code,
    third, runs, constants, input_rows, outputs, n_registers)`` runs one point (a tensor program's
    call) with ``interpret_one`` on one vector of registers: 2.2 ns an instruction instead of 4.1
    (an RNN gradient's 57 866 instructions), and about 0.6 ns with the indices unsigned
    (:func:`numba_table_kernel`; the RNN gradient's call 71 → 36 µs)."""
    used = vector_math_used(name for name in operations if name != MULADD)
    fm = repr(bool(fastmath))
    lines = numba_preamble(
        "generated by jacacc.kernels.tables: the instruction-table interpreter, one branch per "
        "operation of jacacc.ops, each a loop over a block of points", used, fm)
    lines += _interpreter("interpret(R, L, B, code, third, runs)", operations, fm, _block_loop)
    # one point (a tensor program's call): registers in one vector, no loop over points per
    # instruction (its bookkeeping was most of the 4 ns an instruction took)
    lines += _interpreter("interpret_one(R, code, third, runs)", operations, fm, _one_point)
    lines += [
        "", "",
        f"@njit(nogil=True, error_model='numpy', fastmath={fm}, cache=True)",
        "def table_kernel(X, V, J, code, third, runs, constants, input_rows, outputs, n_registers, B, first, last):",
        "    m = V.shape[1]",
        "    R = np.empty((n_registers, B), dtype=X.dtype)",
        "    for k in range(constants.shape[0]):",
        "        for i in range(B):",
        "            R[k, i] = constants[k]",
        "    for start in range(first, last, B):",
        "        L = min(B, last - start)",
        "        for k in range(input_rows.shape[0]):",
        "            Rk = R[input_rows[k]]",
        "            for i in range(L):",
        "                Rk[i] = X[start + i, k]",
        "        interpret(R, L, B, code, third, runs)",
        "        for i in range(L):",
        "            for k in range(m):",
        "                V[start + i, k] = R[outputs[k], i]",
        "            for k in range(J.shape[1]):",
        "                J[start + i, k] = R[outputs[m + k], i]",
        "", "",
        # its own entry point: Numba compiles a function at its first call, so a table run only on
        # blocks of points never compiles the one-point interpreter, nor one run only at one point
        # the blocked one (each is about 40 % of an interpreter's compile)
        f"@njit(nogil=True, error_model='numpy', fastmath={fm}, cache=True)",
        "def table_kernel_one(X, V, J, code, third, runs, constants, input_rows, outputs, n_registers):",
        "    m = V.shape[1]",
        "    R = np.empty(n_registers, dtype=X.dtype)",
        "    for k in range(constants.shape[0]):",
        "        R[k] = constants[k]",
        "    for k in range(input_rows.shape[0]):",
        "        R[input_rows[k]] = X[0, k]",
        "    interpret_one(R, code, third, runs)",
        "    for k in range(m):",
        "        V[0, k] = R[outputs[k]]",
        "    for k in range(J.shape[1]):",
        "        J[0, k] = R[outputs[m + k]]",
    ]
    return "\n".join(lines) + "\n"


def _interpreter(signature: str, operations: Sequence[str], fm: str,
                 body: Callable[[str, int], list[str]]) -> list[str]:
    """An interpreter function: one branch per operation, dispatched once per run, each running
    ``body(name, arity)`` for every instruction ``q`` of the run."""
    lines = ["", "", f"@njit(error_model='numpy', fastmath={fm}, cache=True)", f"def {signature}:",
             "    for r in range(runs.shape[0]):",
             "        op = runs[r, 0]"]
    for k, name in enumerate(sorted(operations, key=_OPCODE.__getitem__)):
        lines += [f"        {'if' if k == 0 else 'elif'} op == {_OPCODE[name]}:  # {name}",
                  "            for q in range(runs[r, 1], runs[r, 2]):",
                  *(f"                {line}" for line in body(name, _arity(name)))]
    return lines


def _block_loop(name: str, arity: int) -> list[str]:
    """One instruction over a block of ``L`` points: rows of a ``(registers, block)`` file."""
    rows = ["Rd = R[code[q, 1]]", "Ra = R[code[q, 2]]", "Rb = R[code[q, 3]]", "Rc = R[third[q]]"][:arity + 1]
    operands = ["Ra[i]", "Rb[i]", "Rc[i]"][:arity]
    return [*rows, "for i in range(L):", f"    Rd[i] = {operation_text(name, 'numba', operands)}"]


def _one_point(name: str, arity: int) -> list[str]:
    """One instruction at one point: entries of a vector of registers."""
    operands = ["R[code[q, 2]]", "R[code[q, 3]]", "R[third[q]]"][:arity]
    return [f"R[code[q, 1]] = {operation_text(name, 'numba', operands)}"]


#: the operations every Numba interpreter carries (a schedule's own arithmetic); the others only
#: where a table uses them, since each adds about half a second to the interpreter's compilation
CORE_OPERATIONS = ("mul", "add", "sub", "neg", "div", "square")


@functools.cache
def _numba_module(fastmath: bool, operations: frozenset[str]) -> Any:
    """The interpreter of ``operations`` (compiled on first call, from the disk cache where it is)."""
    from jacacc.errors import require_extra
    from jacacc.kernels.functions import HELPER_NAMES
    from jacacc.kernels.inline import inline_helpers
    from jacacc.kernels.loops import cached_module

    require_extra("numba", "cpu")
    text = inline_helpers(numba_table_source(fastmath, sorted(operations)), HELPER_NAMES)
    module = cached_module(text)
    if module is None:  # no cache directory: compiled in memory (Numba cannot cache it)
        namespace: dict[str, Any] = {"__name__": "jacacc_table_interpreter"}
        exec(compile(text.replace("cache=True", "cache=False"), "<jacacc-table-interpreter>", "exec"),  # noqa: S102
             namespace)
        return type("Module", (), namespace)
    return module


def table_operations(table: InstructionTable) -> frozenset[str]:
    """The operations an interpreter of ``table`` carries: :data:`CORE_OPERATIONS` and the table's."""
    return frozenset(CORE_OPERATIONS) | {OPERATIONS[op] for op in np.unique(table.runs[:, 0]).tolist()}


#: points per block of the Numba interpreter (measured: experiments/compile_scaling.py)
NUMBA_BLOCK = 128
def numba_table_kernel(table: InstructionTable, dtype: str = "float64", block: int = NUMBA_BLOCK,
                       fastmath: bool = False) -> Callable[..., None]:
    """The table run by a Numba interpreter of its operations (compiled once per operation set
    and dtype, and cached on disk).

    The points are split into one contiguous share per thread (:func:`~jacacc.kernels.threads.run_blocks`),
    each run by the interpreter with the GIL released; small calls run on the calling thread.

    Returns ``run(X, V, J)`` (C-contiguous ``dtype`` arrays of shapes ``(N, n_inputs)``, ``(N, m)``
    and ``(N, len(outputs) − m)``: the first ``m`` results go to ``V``, the rest to ``J``) with
    ``run.build(one_point=False)`` (compile or load the interpreter of blocks of points, or of one
    point; seconds) and ``run.on_this_thread(X, V, J)`` (the same on the calling thread, without the
    thread pool's bookkeeping: a call of a few points, or of one by the one-point interpreter).
    """
    module = _numba_module(bool(fastmath), table_operations(table))
    kind = np.dtype(dtype)
    constants = table.constants.astype(kind)
    # the indices unsigned: Numba then reads R[i] without the test for a negative index that wraps
    # around (every register number is one), 1.1 → 0.6 ns an instruction
    code, third, runs, input_rows, outputs = (np.ascontiguousarray(a, dtype=np.uint32) for a in (
        table.code, table.third, table.runs, table.input_rows, table.outputs))
    args = (code, third, runs, constants, input_rows, outputs, table.n_registers, block)
    work_per_point = max(table.n_instructions, 1)

    def build(one_point: bool = False) -> float:
        import numba

        start = time.perf_counter()
        item = getattr(numba.types, kind.name)
        index, integer = numba.types.uint32, numba.types.int64
        table_types = (item[:, ::1], item[:, ::1], item[:, ::1], index[:, ::1], index[::1], index[:, ::1],
                       item[::1], index[::1], index[::1], integer)
        if one_point:
            module.table_kernel_one.compile(table_types)
        else:
            module.table_kernel.compile((*table_types, integer, integer, integer))
        return time.perf_counter() - start

    def run(X: np.ndarray, V: np.ndarray, J: np.ndarray) -> None:
        run_blocks(lambda first, last: module.table_kernel(X, V, J, *args, first, last), X.shape[0], block,
                   work_per_point)

    one_point = args[:-1]  # table_kernel_one's arguments: no block

    def on_this_thread(X: np.ndarray, V: np.ndarray, J: np.ndarray) -> None:
        if X.shape[0] == 1:
            module.table_kernel_one(X, V, J, *one_point)
        else:
            module.table_kernel(X, V, J, *args, 0, X.shape[0])

    run.build = build  # type: ignore[attr-defined]
    run.on_this_thread = on_this_thread  # type: ignore[attr-defined]  # one point: no thread pool to ask
    return run


# =========================================================================== CUDA
def cuda_table_source(dtype: Any = "float64") -> str:
    """CUDA C++ of the interpreter: ``jacacc_table(X, V, J, R, code, third, runs, constants,
    input_rows, outputs, N, n, m, e, n_runs, n_constants, stride)``, one thread per point ``p < N``,
    register ``r`` of point ``p`` at ``R[r * stride + p]`` (coalesced); ``X`` is ``(N, n)``, ``V``
    ``(N, m)`` (the first ``m`` results) and ``J`` ``(N, e)`` (the others), row-major.  Every thread runs the same instructions: the ``switch`` on a
    run's opcode never diverges."""
    lines = [
        "// generated by jacacc.kernels.tables: the instruction-table interpreter, one thread per point",
        *cuda_preamble(dtype),
        "",
        # muladd's product rounded on its own, as the mul it replaces (nvcc contracts a * b + c)
        "#ifdef __CUDACC__",
        "__device__ __forceinline__ double jacacc_mul_rn(double a, double b) { return __dmul_rn(a, b); }",
        "__device__ __forceinline__ float jacacc_mul_rn(float a, float b) { return __fmul_rn(a, b); }",
        "#else",
        "static inline double jacacc_mul_rn(double a, double b) { volatile double p = a * b; return p; }",
        "static inline float jacacc_mul_rn(float a, float b) { volatile float p = a * b; return p; }",
        "#endif",
        "",
        f'extern "C" __global__ void {CUDA_TABLE_KERNEL}(',
        "    const real* __restrict__ X, real* __restrict__ V, real* __restrict__ J, real* __restrict__ R,",
        "    const int* __restrict__ code, const int* __restrict__ third, const int* __restrict__ runs,",
        "    const real* __restrict__ constants, const int* __restrict__ input_rows,",
        "    const int* __restrict__ outputs, long long N, long long n, long long m, long long e, long long n_runs,",
        "    long long n_constants, long long stride)",
        "{",
        "    const long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
        "    if (p >= N) return;",
        "    real* r = R + p;",
        "    for (long long k = 0; k < n_constants; ++k) r[k * stride] = constants[k];",
        "    for (long long k = 0; k < n; ++k) r[(long long)input_rows[k] * stride] = X[p * n + k];",
        "    for (long long u = 0; u < n_runs; ++u) {",
        "        const int op = runs[3 * u], first = runs[3 * u + 1], last = runs[3 * u + 2];",
        "        switch (op) {",
    ]
    for opcode, name in enumerate(OPERATIONS):
        arity = _arity(name)
        operands = ["r[(long long)code[4 * q + 2] * stride]", "r[(long long)code[4 * q + 3] * stride]",
                    "r[(long long)third[q] * stride]"][:arity]
        lines += [f"        case {opcode}:  // {name}",
                  "            for (int q = first; q < last; ++q)",
                  f"                r[(long long)code[4 * q + 1] * stride] = {operation_text(name, 'cuda', operands)};",
                  "            break;"]
    lines += [
        "        }",
        "    }",
        "    for (long long k = 0; k < m; ++k) V[p * m + k] = r[(long long)outputs[k] * stride];",
        "    for (long long k = 0; k < e; ++k) J[p * e + k] = r[(long long)outputs[m + k] * stride];",
        "}",
        "",
    ]
    return "\n".join(lines)


#: bytes of register file a CUDA launch may take (points are run in chunks that fit)
CUDA_REGISTER_BYTES = 1 << 30


def _chunk(table: InstructionTable, N: int, itemsize: int) -> int:
    """Points per launch: the register file of a chunk fits in :data:`CUDA_REGISTER_BYTES`."""
    return max(1, min(N, CUDA_REGISTER_BYTES // (table.n_registers * itemsize)))


def cupy_table_kernel(table: InstructionTable, dtype: str = "float64") -> Callable[..., None]:
    """The table run on the GPU by the CUDA interpreter (compiled once per dtype by CuPy, which
    keeps the binary on disk).  Returns ``run(X, V, J)`` for CuPy arrays (as
    :func:`numba_table_kernel`'s), with ``run.build()``."""
    from jacacc.errors import require_extra

    cp = require_extra("cupy", "gpu")
    kind = np.dtype(dtype)
    raw = _cupy_raw(kind.name)
    device = {name: cp.asarray(getattr(table, name)) for name in ("code", "third", "runs", "input_rows", "outputs")}
    constants = cp.asarray(table.constants.astype(kind))
    threads = 128

    def build() -> float:
        start = time.perf_counter()
        raw.compile()
        return time.perf_counter() - start

    def run(X: Any, V: Any, J: Any) -> None:
        N = X.shape[0]
        if N == 0:
            return
        chunk = _chunk(table, N, kind.itemsize)
        R = cp.empty(table.n_registers * chunk, dtype=kind)
        for start in range(0, N, chunk):
            count = min(chunk, N - start)
            raw(((count + threads - 1) // threads,), (threads,),
                (X[start:start + count], V[start:start + count], J[start:start + count], R, device["code"],
                 device["third"], device["runs"], constants, device["input_rows"], device["outputs"],
                 np.int64(count), np.int64(table.n_inputs), np.int64(V.shape[1]), np.int64(J.shape[1]),
                 np.int64(len(table.runs)),
                 np.int64(len(table.constants)), np.int64(chunk)))

    run.build = build  # type: ignore[attr-defined]
    return run


@functools.cache
def _cupy_raw(dtype: str) -> Any:
    import cupy as cp

    return cp.RawKernel(cuda_table_source(dtype), CUDA_TABLE_KERNEL)


def host_table_kernel(table: InstructionTable, dtype: str = "float64", directory: Any = None,
                      compiler: str = "g++") -> Callable[[np.ndarray, np.ndarray], None]:
    """The CUDA interpreter's source run thread by thread on the host (g++ behind a launch shim,
    :func:`jacacc.kernels.cuda.host_launcher`): the check of the CUDA tier without a GPU.
    Returns ``run(X, V, J)`` for NumPy arrays (as :func:`numba_table_kernel`'s)."""
    from jacacc.kernels.cuda import host_launcher

    kind = np.dtype(dtype)
    real = "double" if kind == np.float64 else "float"
    arguments = ", ".join([f"(const {real}*)p[0]", f"({real}*)p[1]", f"({real}*)p[2]", f"({real}*)p[3]",
                           "(const int*)p[4]", "(const int*)p[5]", "(const int*)p[6]", f"(const {real}*)p[7]",
                           "(const int*)p[8]", "(const int*)p[9]", *(f"n[{k}]" for k in range(7))])
    launch = host_launcher(cuda_table_source(kind.name), CUDA_TABLE_KERNEL, arguments, directory, compiler)
    tables = [np.ascontiguousarray(a, dtype=np.int32) for a in (table.code, table.third, table.runs)]
    constants = np.ascontiguousarray(table.constants, dtype=kind)
    rows = [np.ascontiguousarray(a, dtype=np.int32) for a in (table.input_rows, table.outputs)]

    def run(X: np.ndarray, V: np.ndarray, J: np.ndarray) -> None:
        N = X.shape[0]
        if N == 0:
            return
        R = np.empty(table.n_registers * N, dtype=kind)
        launch([X, V, J, R, *tables, constants, *rows],
               [N, table.n_inputs, V.shape[1], J.shape[1], len(table.runs), len(table.constants), N], N)

    return run


def results_of(values: Sequence[Expr | None], jacobian: Mapping[tuple[int, int], Expr],
               n_inputs: int) -> list[Expr]:
    """The results of a scheduled Jacobian program in a table's output order: the ``m`` values
    (NaN where unknown), then the ``m·n`` Jacobian entries row by row (0 where structurally zero)."""
    m = len(values)
    out: list[Expr] = [Const(math.nan) if v is None else v for v in values]
    out += [jacobian.get((r, c), Const(0.0)) for r in range(m) for c in range(n_inputs)]
    return out
