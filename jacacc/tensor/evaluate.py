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
from collections.abc import Sequence
from typing import Any

import numpy as np

from jacacc.errors import MissingExtraError, UnsupportedOperationError
from jacacc.tensor import fusion
from jacacc.tensor.expr import (
    OPERATORS,
    UNARY,
    Tensor,
    contraction_path,
    delta_expansion,
    fuse_einsums,
    node_flops,
    nodes_of,
)
from jacacc.tensor.straightline import compile_program

__all__ = ["Contraction", "Program", "array_module"]


def array_module(arrays: Sequence[Any]) -> Any:
    """``cupy`` if any argument is a CuPy array, else ``numpy``."""
    for a in arrays:
        if type(a).__module__.startswith("cupy"):
            import cupy

            return cupy
    return np


class Contraction:
    """One einsum, planned: the pairwise steps of :func:`~jacacc.tensor.expr.contraction_path`
    run directly as matrix products (BLAS), broadcast multiplies or ``einsum`` calls.

    opt_einsum plans the path and costs it; running the few steps here avoids its
    per-call dispatch (tens of µs, which dominated small derivatives).  The steps
    are opt_einsum's ``contraction_list`` (kept as that attribute): a step it
    marks as BLAS-able is one matrix product of the operands folded to matrices
    (``tensordot``'s permutations and shapes, computed once), a step that sums
    nothing a broadcast multiply, anything else ``einsum``.

    >>> c = Contraction("ij,jk,k->i", [(2, 3), (3, 4), (4,)])
    >>> c(np.ones((2, 3)), np.ones((3, 4)), np.ones(4), xp=np).tolist()
    [12.0, 12.0]
    """

    def __init__(self, subscripts: str, shapes: Sequence[tuple[int, ...]]) -> None:
        try:
            import opt_einsum
        except ImportError as exc:  # pragma: no cover - opt_einsum ships with the tensor extra
            raise MissingExtraError("jacacc.tensor needs opt_einsum: pip install 'jacacc[tensor]'") from exc
        path, _ = contraction_path(subscripts, tuple(tuple(s) for s in shapes))
        _, info = opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize=[list(step) for step in path])
        self.subscripts = subscripts
        self.contraction_list = info.contraction_list
        inputs = subscripts.split("->")[0].split(",")
        self._extent = {c: n for labels, shape in zip(inputs, shapes, strict=True)
                        for c, n in zip(labels, shape, strict=True)}
        self._steps = [self._step(entry) for entry in info.contraction_list]

    def _step(self, entry: tuple) -> tuple[tuple[int, ...], str, Any]:
        """How one pairwise step runs: a broadcast ``multiply`` (no index summed),
        a ``matmul`` of the operands folded to matrices (what ``tensordot`` does,
        with its permutations and shapes worked out once here), or ``einsum``."""
        positions, removed, subscripts, _, blas = entry
        inputs, _, out = subscripts.partition("->")
        terms = inputs.split(",")
        plain = len(terms) == 2 and all(len(set(t)) == len(t) for t in terms)
        if plain and not removed and set(out) == set(terms[0]) | set(terms[1]):
            return tuple(positions), "multiply", tuple(self._broadcast(t, out) for t in terms)
        if plain and blas and "EINSUM" not in blas:
            return tuple(positions), "matmul", self._matmul(terms[0], terms[1], [c for c in terms[0] if c in removed],
                                                             out)
        return tuple(positions), "einsum", subscripts

    def _broadcast(self, term: str, out: str) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
        """The transpose putting ``term``'s axes in ``out``'s order and the shape that
        broadcasts it against ``out`` (1 where it lacks an axis)."""
        order = [c for c in out if c in term]
        perm = None if "".join(order) == term else tuple(term.index(c) for c in order)
        return perm, tuple(self._extent[c] if c in term else 1 for c in out)

    def _matmul(self, left: str, right: str, summed: list[str], out: str) -> tuple:
        free_l = [c for c in left if c not in summed]
        free_r = [c for c in right if c not in summed]

        def perm(term: str, order: list[str]) -> tuple[int, ...] | None:
            p = tuple(term.index(c) for c in order)
            return None if p == tuple(range(len(term))) else p

        size = lambda letters: math.prod(self._extent[c] for c in letters)  # noqa: E731
        produced = free_l + free_r
        final = None if "".join(produced) == out else tuple(produced.index(c) for c in out)
        return (perm(left, free_l + summed), (size(free_l), size(summed)),
                perm(right, summed + free_r), (size(summed), size(free_r)),
                tuple(self._extent[c] for c in produced), final)

    def __call__(self, *operands: Any, xp: Any = np) -> Any:
        stack = list(operands)
        for positions, kind, how in self._steps:
            taken = [stack.pop(p) for p in positions]
            if kind == "multiply":
                (pa, sa), (pb, sb) = how
                a, b = taken
                a = a if pa is None else a.transpose(pa)
                b = b if pb is None else b.transpose(pb)
                stack.append(a.reshape(sa) * b.reshape(sb))
            elif kind == "matmul":
                pa, sa, pb, sb, shape, final = how
                a, b = taken
                a = (a if pa is None else a.transpose(pa)).reshape(sa)
                b = (b if pb is None else b.transpose(pb)).reshape(sb)
                result = (a @ b).reshape(shape)
                stack.append(result if final is None else result.transpose(final))
            else:
                stack.append(xp.einsum(how, *taken))
        return stack[0]


def _diagonal_view(xp: Any, a: Any, class_axes: Sequence[tuple[int, ...]]) -> Any:
    """A writable view of ``a`` with one axis per class of tied axes (its strides summed):
    the entries a δ scatter writes."""
    shape = tuple(a.shape[axes[0]] for axes in class_axes)
    strides = tuple(sum(a.strides[x] for x in axes) for axes in class_axes)
    return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)


class _Diagonals:
    """Where a δ scatter (:class:`~jacacc.tensor.expr.DeltaExpansion`) writes in an array:
    one view axis per class of tied axes (their strides summed), the core broadcast along
    the classes it lacks.  For a contiguous NumPy array (C or Fortran order: a product's
    result may be a transpose) the view is a slice of the flat array for one class
    (``c·δ``: every ``n + 1``-th entry) or the ndarray constructor over the buffer —
    ``as_strided`` takes ~8 µs of Python, which a small Hessian (tens of µs) would feel;
    other arrays fall back to :func:`_diagonal_view`.
    """

    __slots__ = ("class_axes", "view_shape", "pad")

    def __init__(self, shape: tuple[int, ...], class_axes: Sequence[tuple[int, ...]], core_ndim: int) -> None:
        self.class_axes = tuple(class_axes)
        self.view_shape = tuple(shape[axes[0]] for axes in class_axes)
        self.pad = (1,) * (len(class_axes) - core_ndim)

    def view(self, xp: Any, a: Any) -> Any:
        if xp is np and a.size and (a.flags.c_contiguous or a.flags.f_contiguous):
            strides = tuple(sum(a.strides[x] for x in axes) for axes in self.class_axes)
            if len(strides) == 1:
                step = strides[0] // a.itemsize
                return a.ravel(order="K")[: self.view_shape[0] * step: step]
            return np.ndarray(self.view_shape, a.dtype, a, 0, strides)
        return _diagonal_view(xp, a, self.class_axes)

    def core(self, core: Any) -> Any:
        return core.reshape(core.shape + self.pad) if self.pad and core.ndim else core


def _operand(a: Any, xp: Any = np) -> Any:
    """A scatter's core that is its one operand unchanged."""
    return a


def _scatter(xp: Any, shape: tuple[int, ...], dtype: np.dtype, diagonals: _Diagonals, core: Any) -> Any:
    """A zero array of ``shape`` with ``core`` written along its δ diagonals
    (:class:`~jacacc.tensor.expr.DeltaExpansion`): one strided view axis per class
    of tied axes, the core's classes first, the rest broadcast (``core`` None: 1)."""
    result = xp.zeros(shape, dtype=dtype)
    diagonals.view(xp, result)[...] = 1 if core is None else diagonals.core(core)
    return result


def _scatter_add(xp: Any, total: Any, diagonals: _Diagonals, core: Any) -> None:
    """Add a δ scatter (:func:`_scatter`) into ``total`` in place, through the same view:
    only the entries on its diagonals are touched."""
    view = diagonals.view(xp, total)
    view += 1 if core is None else diagonals.core(core)


def _shape_error(name: str, got: tuple[int, ...], expected: tuple[int, ...]) -> None:
    """Refuse an argument of another shape than the program was planned for."""
    raise ValueError(f"argument {name!r} has shape {tuple(got)}, the program was built for {expected}")


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
    views = {k for k, n in enumerate(nodes) if n.kind == "einsum" and len(n.args) == 1 and k not in scatters}
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

    Examples
    --------
    >>> from jacacc.tensor.expr import var, einsum, unary
    >>> X, w = var("X", (2, 2)), var("w", (2,))
    >>> p = Program([unary("exp", einsum("ij,j->i", X, w))], [X, w])
    >>> p(np.eye(2), np.zeros(2))[0].tolist(), p.flops
    ([1.0, 1.0], 10)
    """

    def __init__(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor], dtype: Any = np.float64,
                 fuse: bool = True, fuse_kernels: bool | None = None) -> None:
        self.outputs = tuple(fuse_einsums(outputs) if fuse else outputs)
        self.inputs = tuple(inputs)
        self.dtype = np.dtype(dtype)
        planned = self.outputs
        if fusion.ENABLED if fuse_kernels is None else fuse_kernels:
            planned = fusion.fused_outputs(self.outputs, self.dtype)
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
                read.update(args)
                self._steps.append((k, "einsum", Contraction(n.param, [a.shape for a in n.args]), args, free))
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

    @staticmethod
    def _diagonals(expansion: Any, shape: tuple[int, ...]) -> _Diagonals:
        core_ndim = len(expansion.core.partition("->")[2]) if expansion.core else 0
        return _Diagonals(shape, expansion.class_axes, core_ndim)

    @staticmethod
    def _core(expansion: Any, node: Tensor) -> Any:
        """What computes a scatter's core: a planned contraction, ``None`` (the core is 1), or,
        where the core is one operand as it is (``c·δ``: ``"->"``), that operand."""
        if not expansion.core:
            return None
        inputs, _, out = expansion.core.partition("->")
        if inputs == out:
            return _operand
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
                    fresh = term.kind in ("add", "fused") or (term.kind == "einsum" and len(term.args) > 1)
                    streamed[a] = (k, fresh)
        return streamed, into

    @property
    def flops(self) -> int:
        """FLOPs of one evaluation: the einsums' planned costs, one per element of a
        sum term and of an elementwise function."""
        return sum(node_flops(n) for n in self.nodes)

    @staticmethod
    def _operator_output(op: tuple, arrays: list[Any], groups: dict[tuple, tuple], xp: Any) -> Any:
        """One output of a general function; the function runs once per application."""
        operator, options, index, group = op
        result = groups.get(group)
        if result is None:
            if xp is not np:
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
        if all(type(a) is np.ndarray for a in arrays) or array_module(arrays) is np:
            if self._straight_line is None:
                self._straight_line = compile_program(self)
            return self._straight_line(*arrays)
        return self.interpret(array_module(arrays), arrays)

    def interpret(self, xp: Any, arrays: Sequence[Any]) -> list[Any]:
        """The steps run one by one on the arrays of ``xp`` (NumPy or CuPy): what the
        straight-line function (:mod:`jacacc.tensor.straightline`) does on NumPy."""
        values: dict[int, Any] = dict(self._constants_for(xp))
        groups: dict[tuple, tuple] = {}  # operator applications computed so far (all their outputs)
        for slot, a, x in zip(self._input_slots, arrays, self.inputs, strict=True):
            if slot is not None:
                if tuple(a.shape) != x.shape:
                    _shape_error(x.param, a.shape, x.shape)
                values[slot] = a
        owned: set[int] = set()  # running sums whose buffer no other slot holds
        for (k, kind, op, args, free), into in zip(self._steps, self._into, strict=True):
            if kind == "einsum":
                values[k] = op(*(values[a] for a in args), xp=xp)
            elif kind == "scatter":
                expansion, core, (shape, diagonals) = op
                core_value = core(*(values[args[m]] for m in expansion.core_args), xp=xp) \
                    if core is not None else None
                values[k] = _scatter(xp, shape, self.dtype, diagonals, core_value)
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
                        values[k] = _scatter(xp, shape, self.dtype, diagonals, core_value)
                        owned.add(k)
                        continue
                    if k not in owned:
                        values[k] = values[k].copy()
                        owned.add(k)
                    _scatter_add(xp, values[k], diagonals, core_value)
                owned.discard(k)
            for a in free:
                values.pop(a, None)
            if into is not None:  # the only term of a sum, read by nothing else: added now and freed
                _accumulate(values, owned, into[0], values.pop(k), into[1])
        return [values[s].copy() if s in self._copied_outputs else values[s] for s in self._output_slots]
