"""Evaluating tensor expressions: planned once, run many times (paths from opt_einsum).

A :class:`Program` takes the expression DAG of one or more outputs, fuses
einsum chains (:func:`~jacacc.tensor.expr.fuse_einsums`), orders its nodes,
plans every einsum once (:class:`Contraction`: opt_einsum's path, the same one
its FLOP count comes from, run as ``tensordot``/``einsum`` steps), evaluates
einsums that only spread values over δ diagonals as scatters into a zero array,
converts constants to the working dtype, and frees every intermediate after its
last use.  A sum is accumulated into one buffer as its terms are computed (a
term read by nothing else is added and freed at once, into its own buffer
where the term owns it), and a term that only spreads values over δs is
added along its diagonal view of that buffer instead of being written out:
``dense + c·δ`` costs ``n`` additions and no second dense array, so a sum's
peak memory is its result plus one term.  Calling it with arrays binds the
``var`` nodes by name.  CuPy arrays
are accepted where CuPy is installed: the program then runs on the GPU (the
steps and the elementwise functions come from CuPy).  Where Numba is
installed, each region of elementwise nodes (with the memory-bound sum that
ends it) is first replaced by one node run as a loop kernel
(:mod:`jacacc.tensor.fusion`; ``fuse_kernels=False`` keeps every node a NumPy
call): Numba's on NumPy arrays, the same region's CUDA kernel on CuPy arrays.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jacacc import ops
from jacacc.errors import UnsupportedOperationError
from jacacc.tensor import fusion, isomorphic, scalarize
from jacacc.tensor.allocator import keep_freed_memory
from jacacc.tensor.dynamic_index import combined_scatters
from jacacc.tensor.expr import (
    OPERATORS,
    UNARY,
    Tensor,
    const,
    delta_expansion,
    fuse_einsums,
    node_flops,
    nodes_of,
    rebuild,
)
from jacacc.tensor.steps import (
    Contraction,
    Diagonals,
    array_module,
    operand,
    scatter,
    scatter_add,
    shape_error,
    without_unit_ones,
)
from jacacc.tensor.straightline import SINGLE_THREAD_GEMM, compile_program
from jacacc.tensor.views import collapse_views

__all__ = ["Contraction", "Program", "array_module"]


def _accumulate(values: dict[int, Any], owned: set[int], k: int, term: Any, term_owned: bool) -> None:
    """Add ``term`` into the running sum ``values[k]``: in place where the sum's buffer is
    owned (no other slot holds it), else into ``term``'s buffer where that is owned,
    else into a fresh array, which the sum then owns."""
    total = values.get(k)
    if total is None:
        values[k] = term
        if term_owned:
            owned.add(k)
    elif k in owned:
        total += term
        values[k] = total  # a 0-d result is a NumPy scalar, which += replaces rather than updates
    elif term_owned:
        term += total
        values[k] = term
        owned.add(k)
    else:
        values[k] = total + term
        owned.add(k)


def _operands_read(node: Tensor) -> int:
    """How many operands an einsum's step reads: unit ones are not (:func:`without_unit_ones`).  A
    step of one operand may return a view of it (a transposition, a unit axis put in); a step of
    several writes a new array."""
    reduced = without_unit_ones(node.param, node.args)
    return len(node.args) if reduced is None else len(reduced[1])


def _in_place_arguments(nodes: Sequence[Tensor], slot: dict[int, int], last_use: dict[int, int],
                        keep: set[int], scatters: set[int]) -> dict[int, dict[str, bool]]:
    """Per operator step, the ``overwrite_*`` keywords it may pass: paper 004's operators
    work in place, and an argument may be overwritten when nothing reads its memory later.

    An argument qualifies when a step of this program computed it (not an input
    or a constant), it is no output, this step is its last use and reads it once,
    and no view of it is read at or after this step (single-operand einsums —
    transposes, diagonals — return views of their operand; ``scatters``, the
    einsums run as δ scatters, write fresh arrays).
    """
    views = {k for k, n in enumerate(nodes) if n.kind == "einsum" and _operands_read(n) == 1 and k not in scatters}
    children: dict[int, list[int]] = {}
    for k in views:
        children.setdefault(slot[id(nodes[k].args[0])], []).append(k)

    def viewed_later(a: int, k: int) -> bool:
        stack = list(children.get(a, ()))
        while stack:
            v = stack.pop()
            if last_use.get(v, v) >= k:
                return True
            stack.extend(children.get(v, ()))
        return False

    found: dict[int, dict[str, bool]] = {}
    for k, n in enumerate(nodes):
        if n.kind != "op":
            continue
        args = [slot[id(a)] for a in n.args]
        for position, keyword in OPERATORS[n.param[0]].in_place:
            a = args[position]
            computed = nodes[a].kind not in ("var", "const") and a not in views
            if computed and a not in keep and last_use.get(a) == k and args.count(a) == 1 \
                    and not viewed_later(a, k):
                found.setdefault(k, {})[keyword] = True
    return found


#: constant subexpressions up to this many entries are computed once when a program is planned
FOLD_MAX_SIZE = 1 << 24


def fold_constants(outputs: Sequence[Tensor], dtype: Any = np.float64,
                   keep: Callable[[Tensor], bool] | None = None) -> tuple[Tensor, ...]:
    """``outputs`` with every largest subexpression that reads no variable computed now (in
    ``dtype``, by a program of its own) and made a constant, so a program does not recompute it
    on every call: a Hessian's slices of δ (``x[1:] - x[:-1]`` differentiated twice) were copied
    and combined anew on each call.

    Folded are operator applications, elementwise functions and sums without a δ scatter among
    their terms, read by a node that does read a variable or an output (returned as a copy: a
    constant Hessian of a stencil, a sum of five δ slices of 40⁴ entries, was 30 ms of NumPy passes a
    call and is a 0.7 ms copy).  Not folded: einsums (the constructor
    folds small constant ones; a product with δ or ones stays symbolic, a scatter or a broadcast,
    where folding would make it a dense product), subexpressions over :data:`FOLD_MAX_SIZE` entries, and those ``keep``
    says to keep: a program that fuses keeps the structural ones
    (:func:`jacacc.tensor.fusion.is_structural`: ``δ[:, 1:] - δ[:, :-1]``) for its regions to
    write as brackets, and folds what no region took afterwards.

    >>> from jacacc.tensor.arrays import BasicKey, index_node
    >>> from jacacc.tensor.expr import const, einsum, var
    >>> x = var("x", (100,))
    >>> y = einsum("i,i->i", index_node(const(np.arange(200.0)), BasicKey((("s", 0, 2, 100),))), x)
    >>> [a.kind for a in y.args], [a.kind for a in fold_constants([y])[0].args]
    (['op', 'var'], ['const', 'var'])
    """
    order = nodes_of(outputs)
    constant: dict[int, bool] = {}
    for n in order:
        constant[id(n)] = n.kind != "var" and all(constant[id(a)] for a in n.args)
    read_by_variable = {id(a) for n in order if not constant[id(n)] for a in n.args}
    output_ids = {id(y) for y in outputs}
    targets = [n for n in order if constant[id(n)] and _foldable(n) and n.size <= FOLD_MAX_SIZE
               and (id(n) in read_by_variable or id(n) in output_ids) and not (keep is not None and keep(n))]
    if not targets:
        return tuple(outputs)
    values = Program(targets, [], dtype, fuse=False, fuse_kernels=False, fold=False)()
    folded: dict[int, Tensor] = {id(t): const(v) for t, v in zip(targets, values, strict=True)}
    return tuple(rebuild(outputs, lambda old, new: folded.get(id(old), new)))


#: elementwise functions whose value is their argument's (the table's :attr:`~jacacc.ops.Operation.identity`:
#: ``stop_gradient`` matters to the derivative, which is built by then; ``+x``)
IDENTITIES = frozenset(op.name for op in ops.iterate() if op.identity)


def without_identities(outputs: Sequence[Tensor]) -> tuple[Tensor, ...]:
    """``outputs`` with every :data:`IDENTITIES` function that is no output read as its argument:
    NumPy would copy the array (``np.positive``), 1 µs for softmax's 128 × 8 row-maximum weights,
    and a copy ends a fused region.

    >>> from jacacc.tensor.expr import einsum, unary, var
    >>> x = var("x", (3,))
    >>> y = einsum("i,i->", unary("stop_gradient", unary("exp", x)), x)
    >>> [a.kind for a in without_identities([y])[0].args]
    ['unary', 'var']
    """
    output_ids = {id(y) for y in outputs}

    def read_through(old: Tensor, new: Tensor) -> Tensor:
        identity = new.kind == "unary" and new.param[0] in IDENTITIES and id(old) not in output_ids
        return new.args[0] if identity else new

    return tuple(rebuild(outputs, read_through))


def _foldable(node: Tensor) -> bool:
    """An operator application, an elementwise function, or a sum none of whose terms is a δ
    scatter (a running sum adds a scatter along its diagonal; folded, it would be a dense array)."""
    if node.kind in ("op", "unary"):
        return True
    return node.kind == "add" and not any(a.kind == "einsum" and delta_expansion(a.param, a.args) is not None
                                          for a in node.args)


class Program:
    """A planned evaluation of ``outputs`` given values of the ``var`` nodes in ``inputs``.

    Parameters
    ----------
    outputs : sequence of Tensor
    inputs : sequence of Tensor
        The ``var`` nodes, in the order the call takes their values.
    dtype : numpy dtype, default float64
    fuse : bool, default True
        Inline einsums that feed a single einsum (:func:`~jacacc.tensor.expr.fuse_einsums`)
        so each contraction is planned whole; ``flops`` counts what runs.
    fuse_kernels : bool, optional
        Run regions of elementwise nodes and the memory-bound reductions that consume
        them as one Numba kernel each (:mod:`jacacc.tensor.fusion`); default
        :data:`jacacc.tensor.fusion.ENABLED`.  Off, or without Numba, every node is
        one NumPy call.
    fold : bool, default True
        Compute the subexpressions that read no variable once, here (:func:`fold_constants`).

    Examples
    --------
    >>> from jacacc.tensor.expr import var, einsum, unary
    >>> X, w = var("X", (2, 2)), var("w", (2,))
    >>> p = Program([unary("exp", einsum("ij,j->i", X, w))], [X, w])
    >>> p(np.eye(2), np.zeros(2))[0].tolist(), p.flops
    ([1.0, 1.0], 10)
    """

    def __init__(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor], dtype: Any = np.float64,
                 fuse: bool = True, fuse_kernels: bool | None = None, fold: bool = True) -> None:
        self.inputs = tuple(inputs)
        self.dtype = np.dtype(dtype)
        outputs = without_identities(outputs)
        outputs = tuple(fuse_einsums(outputs) if fuse else outputs)
        fusing = fusion.ENABLED if fuse_kernels is None else fuse_kernels
        if fusing:
            outputs = tuple(fusion.scales_into_regions(outputs))
        structural: dict[int, bool] = {}
        kept: list[Tensor] = []  # structural constants left to the regions

        def keep(node: Tensor) -> bool:
            if fusion.is_structural(node, structural):
                kept.append(node)
                return True
            return False

        self.outputs = fold_constants(outputs, self.dtype, keep if fusing else None) if fold else outputs
        # one scatter of every computed-index scatter a sum adds into one shape (an interpolation's pullback)
        planned = tuple(combined_scatters(self.outputs))
        if isomorphic.ENABLED:  # the NumPy steps batched; ``outputs`` (what the scalar tier writes out) not
            planned = tuple(isomorphic.batch_isomorphic(planned))
        planned = tuple(collapse_views(planned, fusion.read_in_place(planned) if fusing else frozenset()))
        if fusing:
            planned = fusion.fused_outputs(planned, self.dtype)
            if kept:  # fold those no region wrote as brackets (one more pass only where some were kept)
                planned = fold_constants(planned, self.dtype)
        nodes = nodes_of(planned)
        slot = {id(n): k for k, n in enumerate(nodes)}
        unbound = [n.param for n in nodes if n.kind == "var" and all(n is not x for x in self.inputs)]
        if unbound:
            raise ValueError(f"the expression reads arguments {unbound} that the program is not given")
        self.nodes = nodes
        self._input_slots = [slot.get(id(x)) for x in self.inputs]
        self._output_slots = [slot[id(y)] for y in planned]
        keep = set(self._output_slots)
        consumers: dict[int, list[int]] = {}
        for k, n in enumerate(nodes):
            for a in n.args:
                consumers.setdefault(slot[id(a)], []).append(k)
        expansions = {k: e for k, n in enumerate(nodes)
                      if n.kind == "einsum" and (e := delta_expansion(n.param, n.args)) is not None}
        streamed, into = self._sum_plan(nodes, slot, consumers, keep, expansions)
        # where a δ scatter added into a sum runs: at the sum's step (its core read there)
        runs_at = {s: k for k, scatters in into.items() for s in scatters}
        last_use: dict[int, int] = {}
        for k, n in enumerate(nodes):
            for a in n.args:
                a = slot[id(a)]
                last_use[a] = max(last_use.get(a, -1), runs_at.get(k, k))
        in_place = _in_place_arguments(nodes, slot, last_use, keep, set(expansions))
        # (slot, kind, how, argument slots, slots freed after it)
        self._steps: list[tuple[int, str, Any, tuple[int, ...], tuple[int, ...]]] = []
        read: set[int] = set(keep)  # slots some step reads the value of (δs a scatter spreads are not)
        for k, n in enumerate(nodes):
            args = tuple(slot[id(a)] for a in n.args)
            expansion = expansions.get(k)
            free = tuple(sorted({a for a in args if last_use.get(a) == k and a not in keep}))
            if k in runs_at:  # added along its diagonals by the sum's step
                read.update(args[m] for m in expansion.core_args)
            elif n.kind == "add":
                rest = tuple(a for a in args if a not in streamed and a not in runs_at)
                scatters = tuple((expansions[s], self._core(expansions[s], nodes[s]),
                                  tuple(slot[id(a)] for a in nodes[s].args), self._diagonals(expansions[s], n.shape))
                                 for s in into.get(k, ()))
                reads = rest + tuple(c[m] for e, _, c, _ in scatters for m in e.core_args)
                read.update(reads)
                free = tuple(sorted({a for a in reads if last_use.get(a) == k and a not in keep}))
                if rest or scatters or k in streamed:  # else the streamed terms made the whole sum
                    self._steps.append((k, "add", (rest, scatters, n.shape), args, free))
            elif expansion is not None:
                self._steps.append((k, "scatter", (expansion, self._core(expansion, n),
                                                   (n.shape, self._diagonals(expansion, n.shape))), args, free))
                read.update(args[m] for m in expansion.core_args)
            elif n.kind == "einsum":
                reduced = without_unit_ones(n.param, n.args)
                if reduced is None:
                    contraction = Contraction(n.param, [a.shape for a in n.args])
                else:
                    subscripts, kept = reduced
                    contraction = Contraction(subscripts, [n.args[m].shape for m in kept], n.shape)
                    args = tuple(args[m] for m in kept)
                read.update(args)
                self._steps.append((k, "einsum", contraction, args, free))
            elif n.kind == "unary":
                read.update(args)
                name, p = n.param
                self._steps.append((k, "unary", (UNARY[name], p, name), args, free))
            elif n.kind == "fused":
                read.update(args)
                self._steps.append((k, "fused", n.param, args, free))
            elif n.kind == "op":
                read.update(args)
                name, options, index = n.param
                options = {**dict(options), **in_place.get(k, {})}
                self._steps.append((k, "op", (OPERATORS[name], options, index, (name, n.param[1], args)), args, free))
        if self._threads_blas():
            # OpenBLAS's threads spin for a while after a product they shared, and a kernel's
            # thread pool then waits for a core: a network's Hessian (220 × 220, products of
            # 220 × 200 by 200 × 200) took 7.9 ms a call with a parallel kernel after them on two
            # cores, 0.6 ms with the kernels on the calling thread
            for kernel in self.fused_kernels:
                kernel.parallel = False
        # per step, the sum its value is added into at once and then freed: (sum slot, whether the
        # sum may write into the value's buffer), or None
        self._into: list[tuple[int, bool] | None] = [streamed.get(step[0]) for step in self._steps]
        self._constants: dict[int, np.ndarray] = {
            k: np.asarray(n.value, dtype=self.dtype) for k, n in enumerate(nodes) if n.kind == "const" and k in read}
        self._device_constants: dict[str, dict[int, Any]] = {}
        # an output that is a constant (a Hessian of w @ w at small n folds to one) is handed out
        # as a copy: the program's own array would let a caller's write change later calls
        self._copied_outputs = {k for k in self._output_slots if k in self._constants}
        self._straight_line: Any = None  # compiled on the first NumPy call
        self._numpy_calls = 0
        self._numpy_seconds = 0.0  # spent in NumPy calls: the scalar tier is tried once it would pay off
        #: the scalar tier (:mod:`jacacc.tensor.scalarize`): None until tried, False where declined
        self._scalar: Any = None

    @staticmethod
    def _diagonals(expansion: Any, shape: tuple[int, ...]) -> Diagonals:
        core_ndim = len(expansion.core.partition("->")[2]) if expansion.core else 0
        return Diagonals(shape, expansion.class_axes, core_ndim)

    @staticmethod
    def _core(expansion: Any, node: Tensor) -> Any:
        """What computes a scatter's core: a planned contraction, ``None`` (the core is 1), or,
        where the core is one operand as it is (``c·δ``: ``"->"``), that operand."""
        if not expansion.core:
            return None
        inputs, _, out = expansion.core.partition("->")
        if inputs == out:
            return operand
        return Contraction(expansion.core, [node.args[m].shape for m in expansion.core_args])

    @staticmethod
    def _sum_plan(nodes: Sequence[Tensor], slot: dict[int, int], consumers: dict[int, list[int]], keep: set[int],
                  expansions: dict[int, Any]) -> tuple[dict[int, tuple[int, bool]], dict[int, list[int]]]:
        """How each sum is accumulated.  Returns ``streamed`` (term slot → (sum slot, whether
        the sum may add into the term's buffer)): terms read by that sum alone, added right
        after they are computed and freed; and ``into`` (sum slot → δ scatters read by it
        alone, added along their diagonals at the sum's step, never written out).

        A term's buffer is the sum's to write into only where its step made a fresh array
        nothing else holds: a δ scatter, a sum, a fused kernel's output, or a product of two
        or more operands (a one-operand einsum can be a view of its operand; an elementwise
        function or a general function's output is not assumed fresh).
        """
        streamed: dict[int, tuple[int, bool]] = {}
        into: dict[int, list[int]] = {}
        for k, n in enumerate(nodes):
            if n.kind != "add":
                continue
            for a in dict.fromkeys(slot[id(t)] for t in n.args):
                term = nodes[a]
                if consumers[a] != [k] or a in keep or term.kind in ("var", "const"):
                    continue
                if a in expansions:
                    into.setdefault(k, []).append(a)
                else:
                    fresh = term.kind in ("add", "fused") or (term.kind == "einsum" and _operands_read(term) > 1)
                    streamed[a] = (k, fresh)
        return streamed, into

    @property
    def flops(self) -> int:
        """FLOPs of one evaluation: the einsums' planned costs, one per element of a
        sum term and of an elementwise function.  With kernel fusion, a contraction's scalar
        factor may have moved to an elementwise step a kernel multiplies by at no cost
        (:func:`~jacacc.tensor.fusion.scales_into_regions`); it is counted where it runs."""
        return sum(node_flops(n) for n in self.nodes)

    def _threads_blas(self) -> bool:
        """Whether a step calls BLAS or LAPACK on operands large enough for OpenBLAS to share among
        its threads: a matrix product past :data:`~jacacc.tensor.straightline.SINGLE_THREAD_GEMM`
        multiply-adds, or an operator that calls SciPy's BLAS or LAPACK."""
        def threaded(contraction: Any) -> bool:
            return isinstance(contraction, Contraction) and any(
                kind == "matmul" and math.prod(how[1]) * how[3][-1] > SINGLE_THREAD_GEMM
                for _, kind, how, _ in contraction._steps)

        for _, kind, op, _, _ in self._steps:
            if kind == "einsum" and threaded(op) or kind == "scatter" and threaded(op[1]):
                return True
            if kind == "add" and any(threaded(core) for _, core, _, _ in op[1]):
                return True
            if kind == "op" and op[0].scipy_blas:
                return True
        return False

    @property
    def fused_kernels(self) -> tuple[fusion.FusedKernel, ...]:
        """The fused regions this plan runs as kernels, in evaluation order (empty when fusion is
        off); each reports its compile — or its load from the on-disk cache — in
        ``first_call_seconds`` once the program has run."""
        return tuple(op for _, kind, op, _, _ in self._steps if kind == "fused")

    @staticmethod
    def _operator_output(op: tuple, arrays: list[Any], groups: dict[tuple, tuple], xp: Any) -> Any:
        """One output of a general function; the function runs once per application."""
        operator, options, index, group = op
        result = groups.get(group)
        if result is None:
            if xp is not np and not operator.device:
                raise UnsupportedOperationError(f"the operator {operator.name} runs on NumPy arrays only")
            result = operator.forward(*arrays, **options)
            groups[group] = result = result if isinstance(result, tuple) else (result,)
        return result[index]

    def _constants_for(self, xp: Any) -> dict[int, Any]:
        if xp is np:
            return self._constants
        cached = self._device_constants.get(xp.__name__)
        if cached is None:
            cached = {k: xp.asarray(v) for k, v in self._constants.items()}
            self._device_constants[xp.__name__] = cached
        return cached

    def __call__(self, *arrays: Any) -> list[Any]:
        if len(arrays) != len(self.inputs):
            raise TypeError(f"the program takes {len(self.inputs)} arrays, got {len(arrays)}")
        for a in arrays:  # a plain loop, not ``all`` over a generator: this runs at every call
            if type(a) is not np.ndarray:
                break
        else:
            return self._numpy(arrays)
        if array_module(arrays) is np:
            return self._numpy(arrays)
        return self.interpret(array_module(arrays), arrays)

    def _numpy(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        if self._scalar:
            results = self._scalar(*arrays)
            # a written-out LU meets a singular matrix as ∞/NaN: LAPACK's steps raise NumPy's error
            if self._scalar.factorized and not all(np.isfinite(r).all() for r in results):
                return self._straight_line(*arrays)
            return results
        if self._straight_line is None:
            keep_freed_memory()  # once per process: temporaries are not faulted in afresh every call
            self._straight_line = compile_program(self)
        self._numpy_calls += 1
        if self._scalar is None and self._numpy_calls > scalarize.SCALAR_AFTER \
                and self._numpy_seconds >= scalarize.time_before_trying(self):
            self._scalar = scalarize.faster_table(self, arrays)
            if self._scalar:
                return self._scalar(*arrays)
        start = time.perf_counter()
        results = self._straight_line(*arrays)
        self._numpy_seconds += time.perf_counter() - start
        return results

    @property
    def scalar_tier(self) -> bool:
        """Whether calls on NumPy arrays run as a scalar instruction table (:mod:`jacacc.tensor.scalarize`)."""
        return bool(self._scalar)

    @property
    def settled(self) -> bool:
        """Whether calls on NumPy arrays have reached their steady state: the scalar tier tried
        (kept or declined), or past its reach and never to be tried.  A benchmark of warm calls
        warms up until then (the tier is tried once the NumPy steps have cost what writing the
        table would: seconds, for a large program)."""
        return self._scalar is not None or not scalarize.ENABLED or scalarize.time_before_trying(self) == math.inf

    def interpret(self, xp: Any, arrays: Sequence[Any]) -> list[Any]:
        """The steps run one by one on the arrays of ``xp`` (NumPy or CuPy): what the
        straight-line function (:mod:`jacacc.tensor.straightline`) does on NumPy."""
        values: dict[int, Any] = dict(self._constants_for(xp))
        groups: dict[tuple, tuple] = {}  # operator applications computed so far (all their outputs)
        for slot, a, x in zip(self._input_slots, arrays, self.inputs, strict=True):
            if slot is not None:
                if tuple(a.shape) != x.shape:
                    shape_error(x.param, a.shape, x.shape)
                values[slot] = a
        owned: set[int] = set()  # running sums whose buffer no other slot holds
        for (k, kind, op, args, free), into in zip(self._steps, self._into, strict=True):
            if kind == "einsum":
                values[k] = op(*(values[a] for a in args), xp=xp)
            elif kind == "scatter":
                expansion, core, (shape, diagonals) = op
                core_value = core(*(values[args[m]] for m in expansion.core_args), xp=xp) \
                    if core is not None else None
                values[k] = scatter(xp, shape, self.dtype, diagonals, core_value)
            elif kind == "unary":
                fn, p, _ = op
                values[k] = fn(xp, *(values[a] for a in args), p)
            elif kind == "fused":  # CuPy: the region's CUDA kernel; NumPy: node by node (the reference)
                values[k] = op.evaluate(xp, [values[a] for a in args])
            elif kind == "op":
                values[k] = self._operator_output(op, [values.get(a) for a in args], groups, xp)
            else:
                rest, scatters, shape = op
                for a in rest:
                    _accumulate(values, owned, k, values[a], False)
                for expansion, core, core_slots, diagonals in scatters:
                    core_value = core(*(values[core_slots[m]] for m in expansion.core_args), xp=xp) \
                        if core is not None else None
                    if k not in values:
                        values[k] = scatter(xp, shape, self.dtype, diagonals, core_value)
                        owned.add(k)
                        continue
                    if k not in owned:
                        values[k] = values[k].copy()
                        owned.add(k)
                    scatter_add(xp, values[k], diagonals, core_value)
                owned.discard(k)
            for a in free:
                values.pop(a, None)
            if into is not None:  # the only term of a sum, read by nothing else: added now and freed
                _accumulate(values, owned, into[0], values.pop(k), into[1])
        return [values[s].copy() if s in self._copied_outputs else values[s] for s in self._output_slots]
