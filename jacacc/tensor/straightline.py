"""A planned :class:`~jacacc.tensor.evaluate.Program` as straight-line Python: no interpreter per call.

The evaluator's loop dispatches each step through a dictionary of values, a
``kind`` test and a tuple unpack, and each planned einsum through its own
loop over pairwise steps; for a small derivative (a gradient of 16
parameters: six steps of a few hundred FLOPs) that bookkeeping, not NumPy,
was most of the ~20 µs a call took.  :func:`compile_program` writes the same
steps once as the source of one Python function — every value a local
variable, every pairwise contraction the NumPy call it runs (a ``@`` of
reshaped operands, a broadcast ``*``, an ``einsum`` with literal
subscripts), every running sum's ownership decided while generating (it only
depends on the order of the steps), every intermediate deleted after its
last use — and compiles it with :func:`compile`.  What is not worth
inlining (a δ scatter, a general function, an elementwise function of the
operation table, a fused region's kernel: :mod:`jacacc.tensor.fusion`) is
called through a name bound in the function's globals.

Where the program calls SciPy's BLAS or LAPACK (an operator with
:attr:`~jacacc.tensor.operators.Operator.scipy_blas`), its matrix products go
through SciPy's BLAS too (:func:`scipy_matmul`): NumPy and SciPy each load an
OpenBLAS, and their two thread pools, alternating, ran potrf's backward on two
threads no faster than on one.

NumPy only: CuPy arrays go through the interpreter
(:meth:`~jacacc.tensor.evaluate.Program.__call__`), which the straight-line
function reproduces step for step.

Examples
--------
>>> from jacacc.tensor.evaluate import Program
>>> from jacacc.tensor.expr import einsum, unary, var
>>> x, A = var("x", (3,)), var("A", (2, 3))
>>> program = Program([unary("exp", einsum("ij,j->i", A, x))], [x, A])
>>> run = compile_program(program)
>>> np.allclose(run(np.ones(3), np.ones((2, 3)))[0], np.exp(3.0))
True
>>> print(run.source.splitlines()[0])
def straight_line(a0, a1):
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from jacacc import ops
from jacacc.tensor import steps

__all__ = ["compile_program", "scipy_matmul"]


def _c_einsum() -> Callable[..., Any]:
    """NumPy's einsum without its Python wrapper: ``np.einsum`` only dispatches ``optimize``
    (which the planned contractions never pass) to the C function, and that dispatch cost 0.7 µs
    a call (2.5 against 1.7 µs for ``ij,ij->i`` on 128 × 8) — several einsums a small gradient.
    ``np.einsum`` itself where a NumPy version keeps the C function elsewhere."""
    import importlib

    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return importlib.import_module(module).c_einsum
        except (ImportError, AttributeError):
            continue
    return np.einsum  # pragma: no cover - every NumPy from 1.21 on has one of the two


#: the most multiply-adds (m·k·n) of a matrix product that OpenBLAS runs on one thread (its
#: threshold is 65 536 × GEMM_MULTITHREAD_THRESHOLD, 4 by default): the pools cannot contend there,
#: and ``a @ b`` costs 1 µs where :func:`scipy_matmul`'s wrapper costs 3 µs (a Kalman filter's
#: derivative makes 34 products of 2 × 2 matrices per step)
SINGLE_THREAD_GEMM = 65536

# what the straight-line source calls for an einsum step (_c_einsum)
EINSUM = _c_einsum()


def scipy_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` through SciPy's BLAS ``?gemm`` for two float32 or float64 matrices of one dtype
    (C-ordered, as ``@`` gives it), ``a @ b`` itself otherwise.  The straight-line program calls
    it for its matrix products when one of its operators calls SciPy's BLAS or LAPACK
    (:attr:`~jacacc.tensor.operators.Operator.scipy_blas`): one OpenBLAS thread pool instead of
    NumPy's and SciPy's contending.

    >>> a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    >>> bool(np.array_equal(scipy_matmul(a, b), a @ b)), scipy_matmul(a, b).flags.c_contiguous
    (True, True)
    """
    if (a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype not in (np.float64, np.float32)
            or 0 in a.shape or 0 in b.shape):
        return a @ b
    from scipy.linalg import blas

    gemm = blas.dgemm if a.dtype == np.float64 else blas.sgemm
    # C = a b in C order is Cᵀ = bᵀ aᵀ in Fortran order: each factor passed as the Fortran
    # matrix it is, transposed by the flag, so that nothing is copied
    x, transpose_x = (b.T, False) if b.flags.c_contiguous else (b, True)
    y, transpose_y = (a.T, False) if a.flags.c_contiguous else (a, True)
    return gemm(1.0, x, y, trans_a=transpose_x, trans_b=transpose_y).T


class _Source:
    """Lines of the function being written, and the objects its globals bind."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {"np": np, "einsum": EINSUM, "dot": np.dot}
        self.constants: set[str] = set()
        self._temporaries = 0
        #: the name matrix products call (:func:`scipy_matmul`), or "" for NumPy's ``@``
        self.matmul = ""
        #: the fused kernels the source calls, by global name (rebound to the compiled kernel once hot)
        self.kernels: dict[str, Any] = {}

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def bind(self, prefix: str, value: Any) -> str:
        """A global name for ``value`` (an object the source calls or reads)."""
        name = f"{prefix}{len(self.env)}"
        self.env[name] = value
        return name

    def constant(self, value: Any) -> str:
        """A global name for a constant array (a name the contractions may fold into)."""
        name = self.bind("c", value)
        self.constants.add(name)
        return name

    def temporary(self) -> str:
        self._temporaries += 1
        return f"t{self._temporaries}"

    @staticmethod
    def is_temporary(name: str) -> bool:
        return name.startswith("t") and name[1:].isdigit()


def _shape_of(letters: str, extent: dict[str, int]) -> tuple[int, ...]:
    return tuple(extent[c] for c in letters)


def _contraction(src: _Source, contraction: Any, operands: list[str], target: str) -> None:
    """The source of one planned einsum (:class:`~jacacc.tensor.steps.Contraction`) on the
    named operands, its result assigned to ``target``.  Mirrors ``Contraction.__call__``;
    each pairwise step's temporary is deleted once the next step has read it."""
    extent = contraction._extent
    stack = list(operands)
    letters = list(contraction.subscripts.split("->")[0].split(","))
    last = len(contraction._steps) - 1
    for step, ((positions, kind, how, presums), entry) in enumerate(zip(contraction._steps,
                                                                        contraction.contraction_list, strict=True)):
        taken = [stack.pop(p) for p in positions]
        taken_letters = [letters.pop(p) for p in positions]
        taken, taken_letters = _presummed(src, taken, taken_letters, presums, extent)
        out = entry[2].partition("->")[2]
        name = target if step == last else src.temporary()
        if kind == "multiply":
            parts = []
            *broadcasts, final = how
            for operand, term, (perm, shape, copied) in zip(taken, taken_letters, broadcasts, strict=True):
                if operand in src.constants:  # transposed and reshaped once, here
                    value = src.env[operand]
                    value = (value if perm is None else value.transpose(perm)).reshape(shape)
                    parts.append(src.constant(value.copy() if copied else value))
                    continue
                text = operand if perm is None else f"{operand}.transpose({perm!r})"
                if copied:  # a strided inner axis is slower to broadcast than to copy (Contraction._broadcast)
                    text = f"np.ascontiguousarray({text})"
                ordered = term if perm is None else "".join(term[p] for p in perm)
                if _shape_of(ordered, extent) != shape:
                    text = f"{text}.reshape({shape!r})"
                parts.append(text)
            if final is None:
                src.line(f"{name} = {parts[0]} * {parts[1]}")
            else:  # written in its memory order (Contraction._memory_order), read through a transposition
                src.line(f"{name} = np.multiply({parts[0]}, {parts[1]}, order='C').transpose({final!r})")
        elif kind == "matmul":
            pa, sa, pb, sb, shape, final, swap = how
            pairs = list(zip(taken, taken_letters, strict=True))
            operands = pairs[::-1] if swap else pairs
            a, b = (_folded(operand, term, perm, matrix, extent)
                    for (operand, term), perm, matrix in zip(operands, (pa, pb), (sa, sb), strict=True))
            # a small product runs on one thread in either library: NumPy's call skips SciPy's wrapper
            small = sa[0] * sa[1] * sb[1] <= SINGLE_THREAD_GEMM
            if src.matmul and not small:
                text = f"{src.matmul}({a}, {b})"
            elif len(sa) == 2:  # ``np.dot`` of two matrices skips the ufunc machinery of ``@`` (0.56 against 0.82 µs, 4 × 19 by 19 × 10)
                text = f"dot({a}, {b})"
            else:
                text = f"({a} @ {b})"
            if shape != (*sa[:-1], sb[-1]):
                text = f"{text}.reshape({shape!r})"
            if final is not None:
                text = f"{text}.transpose({final!r})"
            src.line(f"{name} = {text}")
        else:
            src.line(f"{name} = einsum({how!r}, {', '.join(taken)})")
        for operand in dict.fromkeys(taken):
            if src.is_temporary(operand):
                src.line(f"del {operand}")
        stack.append(name)
        letters.append(out)
    if last < 0:  # nothing to contract: the one operand as it is
        src.line(f"{target} = {stack[0]}")
    if contraction.shape is not None:  # the unit axes of the ones left out put back
        src.line(f"{target} = {target}.reshape({contraction.shape!r})")


def _presummed(src: _Source, taken: list[str], letters: list[str], presums: tuple,
               extent: dict[str, int]) -> tuple[list[str], list[str]]:
    """The operands of a pairwise step with the axes that each sums on its own summed first
    (:meth:`~jacacc.tensor.steps.Contraction._own_sums`; unit axes reshaped away), and their
    letters left."""
    operands, terms = [], []
    for operand, term, axes in zip(taken, letters, presums, strict=True):
        if axes is not None:
            summed = src.temporary()
            if all(extent[term[k]] == 1 for k in axes):
                kept = tuple(extent[c] for k, c in enumerate(term) if k not in axes)
                src.line(f"{summed} = {operand}.reshape({kept!r})")
            else:
                src.line(f"{summed} = {operand}.sum(axis={axes!r})")
            if src.is_temporary(operand) and taken.count(operand) == 1:
                src.line(f"del {operand}")
            operand, term = summed, "".join(c for k, c in enumerate(term) if k not in axes)
        operands.append(operand)
        terms.append(term)
    return operands, terms


def _folded(operand: str, term: str, perm: tuple[int, ...] | None, matrix: tuple[int, int],
            extent: dict[str, int]) -> str:
    """An operand of a matrix product: transposed, then reshaped to ``matrix`` unless it is one."""
    text = operand if perm is None else f"{operand}.transpose({perm!r})"
    ordered = term if perm is None else "".join(term[p] for p in perm)
    return text if _shape_of(ordered, extent) == matrix else f"{text}.reshape({matrix!r})"


def compile_program(program: Any) -> Callable[..., list[Any]]:
    """The straight-line Python function evaluating ``program`` on NumPy arrays (see the
    module docstring); its source is the ``source`` attribute."""
    src = _Source()
    if any(kind == "op" and op[0].scipy_blas for _, kind, op, _, _ in program._steps):
        src.matmul = src.bind("matmul", scipy_matmul)
    constants = {k: src.constant(v) for k, v in program._constants.items()}
    defined: set[int] = set()
    name_of: dict[int, str] = {}

    def value(slot: int) -> str:
        if slot in name_of:
            return name_of[slot]
        return constants.get(slot, "None")

    def assign_name(slot: int) -> None:
        name_of[slot] = f"v{slot}"
        defined.add(slot)

    def assign(slot: int, text: str) -> None:
        src.line(f"v{slot} = {text}")
        assign_name(slot)

    shape_error = src.bind("shape_error", steps.shape_error)
    for i, (slot, x) in enumerate(zip(program._input_slots, program.inputs, strict=True)):
        src.line(f"if a{i}.shape != {x.shape!r}: {shape_error}({x.param!r}, a{i}.shape, {x.shape!r})")
        if slot is not None:
            name_of[slot] = f"a{i}"
    dtype = src.bind("dtype", program.dtype)
    scatter_name, scatter_add = src.bind("scatter", steps.scatter), src.bind("scatter_add", steps.scatter_add)

    def scatter(shape: tuple[int, ...], diagonals: Any, core_text: str) -> str:
        """A δ scatter into a fresh zero array (:func:`~jacacc.tensor.steps.scatter`)."""
        return f"{scatter_name}(np, {shape!r}, {dtype}, {src.bind('diagonals', diagonals)}, {core_text})"
    owned: set[int] = set()
    present: set[int] = set()  # running sums begun

    def accumulate(k: int, term: str, term_owned: bool) -> None:
        """Static :func:`~jacacc.tensor.evaluate._accumulate`: ownership is known here."""
        if k not in present:
            assign(k, term)
            present.add(k)
            if term_owned:
                owned.add(k)
        elif k in owned:
            src.line(f"v{k} += {term}")
        elif term_owned:
            src.line(f"{term} += v{k}")
            assign(k, term)
            owned.add(k)
        else:
            assign(k, f"v{k} + {term}")
            owned.add(k)

    groups: dict[tuple, str] = {}
    # outputs still to be taken per operator application: its tuple of results is deleted after the last
    untaken: dict[tuple, int] = {}
    for _, kind, op, _, _ in program._steps:
        if kind == "op":
            untaken[op[3]] = untaken.get(op[3], 0) + 1
    for (k, kind, op, args, free), into in zip(program._steps, program._into, strict=True):
        if kind == "einsum":
            _contraction(src, op, [value(a) for a in args], f"v{k}")
            assign_name(k)
        elif kind == "scatter":
            expansion, core, (shape, diagonals) = op
            core_text = _core(src, core, [value(args[m]) for m in expansion.core_args])
            assign(k, scatter(shape, diagonals, core_text))
            _drop(src, core_text)
        elif kind == "unary":
            assign(k, _elementwise(src, op[2], op[1], [value(a) for a in args]))
        elif kind == "fused":
            _fused(src, op, f"v{k}", dtype, [value(a) for a in args])
            assign_name(k)
        elif kind == "op":
            operator, options, index, group = op
            if into is not None and operator.name == "index_scatter":
                # a slice scattered into zeros, only to be added into a sum: added into the sum's
                # array where it lies (a convolution's Hessian by windows: 98 blocks of 3 × 3, each
                # once a 100 × 100 array of zeros and a 100 × 100 addition)
                total, _ = into
                if total not in present:
                    assign(total, f"np.zeros({options['shape']!r}, {dtype})")
                    present.add(total)
                    owned.add(total)
                elif total not in owned:
                    assign(total, f"v{total}.copy()")
                    owned.add(total)
                src.line(f"v{total}[{repr(options['key'])[1:-1]}] += {value(args[0])}")  # BasicKey prints as NumPy's
                into = None
            elif operator.spelling is not None and untaken[group] == 1 and group not in groups:
                # a one-output operator that spells itself: its expression inline, no call
                assign(k, operator.spelling([value(a) for a in args], **options))
                untaken[group] = 0
            else:
                if group not in groups:
                    groups[group] = g = src.temporary()
                    src.line(f"{g} = {src.bind('op', operator.forward)}({', '.join(value(a) for a in args)}, "
                             f"**{src.bind('options', options)})")
                    src.line(f"{g} = {g} if type({g}) is tuple else ({g},)")
                assign(k, f"{groups[group]}[{index}]")
                untaken[group] -= 1
                if not untaken[group]:
                    src.line(f"del {groups[group]}")
        else:
            rest, scatters, shape = op
            for a in rest:
                accumulate(k, value(a), False)
            for expansion, core, core_slots, diagonals in scatters:
                core_text = _core(src, core, [value(core_slots[m]) for m in expansion.core_args])
                if k not in present:
                    assign(k, scatter(shape, diagonals, core_text))
                    present.add(k)
                    owned.add(k)
                else:
                    if k not in owned:
                        assign(k, f"v{k}.copy()")
                        owned.add(k)
                    src.line(f"{scatter_add}(np, v{k}, {src.bind('diagonals', diagonals)}, {core_text})")
                _drop(src, core_text)
            owned.discard(k)
        for a in free:
            if a in defined:
                src.line(f"del v{a}")
                defined.discard(a)
                name_of.pop(a, None)
        if into is not None:  # the only term of a sum, read by nothing else: added now and freed
            total, term_owned = into
            accumulate(total, f"v{k}", term_owned)
            if name_of.get(k) == f"v{k}" and name_of.get(total) != f"v{k}":
                src.line(f"del v{k}")
                defined.discard(k)
                name_of.pop(k, None)
    outputs = [f"{value(s)}.copy()" if s in program._copied_outputs else value(s) for s in program._output_slots]
    src.line(f"return [{', '.join(outputs)}]")
    arguments = ", ".join(f"a{i}" for i in range(len(program.inputs)))
    text = f"def straight_line({arguments}):\n" + "\n".join(src.lines) + "\n"
    namespace = dict(src.env)
    exec(compile(text, "<jacacc straight-line program>", "exec"), namespace)  # noqa: S102 - our own source
    run = namespace["straight_line"]
    run.source = text
    for name, kernel in src.kernels.items():  # past its first compiled call, the source calls the kernel itself
        kernel.bind_when_hot(namespace, name)
    return run


def _elementwise(src: _Source, name: str, p: float | None, operands: list[str]) -> str:
    """An elementwise function as source: the tensor level's ``pow`` and ``shift`` as
    operators, the table's operations (:mod:`jacacc.ops`) by their NumPy callable."""
    if name == "pow" and p is not None:
        return f"{operands[0]} ** {_number(src, p)}"
    if name == "shift":
        return f"{operands[0]} + {_number(src, p)}"
    return f"{src.bind('f', ops.get(name).function)}({', '.join(operands)})"


def _number(src: _Source, p: float) -> str:
    """A constant operand as source: its ``repr``, or a bound name for ±inf and NaN (whose ``repr``
    is no Python expression)."""
    return repr(p) if math.isfinite(p) else src.bind("k", float(p))


def _fused(src: _Source, kernel: Any, target: str, dtype: str, operands: list[str]) -> None:
    """A fused region (:class:`~jacacc.tensor.fusion.FusedKernel`): its output allocated, filled
    by the kernel (its re-read inputs in C order: ``contiguous_inputs``), and viewed in the root's
    shape where the kernel writes a vector of one element."""
    inputs = [f"{x}.reshape(1)" if scalar else f"np.ascontiguousarray({x})" if contiguous else x
              for x, scalar, contiguous in zip(operands, kernel.scalar_inputs, kernel.contiguous_inputs, strict=True)]
    src.line(f"{target} = np.empty({kernel.kernel_shape!r}, {dtype})")
    name = src.bind('kernel', kernel.run)
    src.kernels[name] = kernel
    src.line(f"{name}({', '.join([target, *inputs])})")
    if kernel.kernel_shape != kernel.shape:
        src.line(f"{target} = {target}.reshape({kernel.shape!r})")


def _drop(src: _Source, name: str) -> None:
    """Delete a temporary once read (its array freed as the interpreter frees it)."""
    if src.is_temporary(name):
        src.line(f"del {name}")


def _core(src: _Source, core: Any, operands: list[str]) -> str:
    """The source computing a δ scatter's core (``None``: the core is 1)."""
    if core is None:
        return "None"
    if isinstance(core, steps.Contraction):
        name = src.temporary()
        _contraction(src, core, operands, name)
        return name
    return operands[0]  # the core is its one operand as it is

