"""Evaluating tensor expressions: planned once, run many times (paths from opt_einsum).

A :class:`Program` takes the expression DAG of one or more outputs, fuses
einsum chains (:func:`~jacacc.tensor.expr.fuse_einsums`), orders its nodes,
plans every einsum once (:class:`Contraction`: opt_einsum's path, the same one
its FLOP count comes from, run as ``tensordot``/``einsum`` steps), evaluates
einsums that only spread values over δ diagonals as scatters into a zero array,
converts constants to the working dtype, and frees every intermediate after its
last use.  Calling it with arrays binds the ``var`` nodes by name.  CuPy arrays
are accepted where CuPy is installed: the program then runs on the GPU (the
steps and the elementwise functions come from CuPy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jacacc.errors import MissingExtraError, UnsupportedOperationError
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


def _scatter(xp: Any, shape: tuple[int, ...], dtype: np.dtype, class_axes: Sequence[tuple[int, ...]],
             core: Any) -> Any:
    """A zero array of ``shape`` with ``core`` written along its δ diagonals
    (:class:`~jacacc.tensor.expr.DeltaExpansion`): one strided view axis per class
    of tied axes, the core's classes first, the rest broadcast (``core`` None: 1)."""
    result = xp.zeros(shape, dtype=dtype)
    view = xp.lib.stride_tricks.as_strided(
        result, shape=tuple(shape[axes[0]] for axes in class_axes),
        strides=tuple(sum(result.strides[a] for a in axes) for axes in class_axes))
    if core is None:
        view[...] = 1
    else:
        view[...] = core.reshape(core.shape + (1,) * (len(class_axes) - core.ndim))
    return result


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

    Examples
    --------
    >>> from jacacc.tensor.expr import var, einsum, unary
    >>> X, w = var("X", (2, 2)), var("w", (2,))
    >>> p = Program([unary("exp", einsum("ij,j->i", X, w))], [X, w])
    >>> p(np.eye(2), np.zeros(2))[0].tolist(), p.flops
    ([1.0, 1.0], 10)
    """

    def __init__(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor], dtype: Any = np.float64,
                 fuse: bool = True) -> None:
        self.outputs = tuple(fuse_einsums(outputs) if fuse else outputs)
        self.inputs = tuple(inputs)
        self.dtype = np.dtype(dtype)
        nodes = nodes_of(self.outputs)
        slot = {id(n): k for k, n in enumerate(nodes)}
        unbound = [n.param for n in nodes if n.kind == "var" and all(n is not x for x in self.inputs)]
        if unbound:
            raise ValueError(f"the expression reads arguments {unbound} that the program is not given")
        self.nodes = nodes
        self._input_slots = [slot.get(id(x)) for x in self.inputs]
        self._output_slots = [slot[id(y)] for y in self.outputs]
        last_use: dict[int, int] = {}
        for k, n in enumerate(nodes):
            for a in n.args:
                last_use[slot[id(a)]] = k
        keep = set(self._output_slots)
        expansions = {k: e for k, n in enumerate(nodes)
                      if n.kind == "einsum" and (e := delta_expansion(n.param, n.args)) is not None}
        in_place = _in_place_arguments(nodes, slot, last_use, keep, set(expansions))
        self._steps: list[tuple[int, str, Any, tuple[int, ...], tuple[int, ...]]] = []
        read: set[int] = set(keep)  # slots some step reads the value of (δs a scatter spreads are not)
        for k, n in enumerate(nodes):
            args = tuple(slot[id(a)] for a in n.args)
            free = tuple(sorted({a for a in args if last_use.get(a) == k and a not in keep}))
            expansion = expansions.get(k)
            if expansion is not None:
                core = Contraction(expansion.core, [n.args[m].shape for m in expansion.core_args]) \
                    if expansion.core else None
                self._steps.append((k, "scatter", (expansion, core, n.shape), args, free))
                read.update(args[m] for m in expansion.core_args)
                continue
            read.update(args)
            if n.kind == "einsum":
                self._steps.append((k, "einsum", Contraction(n.param, [a.shape for a in n.args]), args, free))
            elif n.kind == "unary":
                name, p = n.param
                self._steps.append((k, "unary", (UNARY[name], p), args, free))
            elif n.kind == "add":
                self._steps.append((k, "add", None, args, free))
            elif n.kind == "op":
                name, options, index = n.param
                options = {**dict(options), **in_place.get(k, {})}
                self._steps.append((k, "op", (OPERATORS[name], options, index, (name, n.param[1], args)), args,
                                    free))
        self._constants: dict[int, np.ndarray] = {
            k: np.asarray(n.value, dtype=self.dtype) for k, n in enumerate(nodes) if n.kind == "const" and k in read}
        self._device_constants: dict[str, dict[int, Any]] = {}

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
        xp = array_module(arrays)
        values: dict[int, Any] = dict(self._constants_for(xp))
        groups: dict[tuple, tuple] = {}  # operator applications computed so far (all their outputs)
        for slot, a, x in zip(self._input_slots, arrays, self.inputs, strict=True):
            if slot is not None:
                if tuple(a.shape) != x.shape:
                    raise ValueError(f"argument {x.param!r} has shape {tuple(a.shape)}, the program was built for {x.shape}")
                values[slot] = a
        for k, kind, op, args, free in self._steps:
            if kind == "einsum":
                values[k] = op(*(values[a] for a in args), xp=xp)
            elif kind == "scatter":
                expansion, core, shape = op
                core_value = core(*(values[args[m]] for m in expansion.core_args), xp=xp) \
                    if core is not None else None
                values[k] = _scatter(xp, shape, self.dtype, expansion.class_axes, core_value)
            elif kind == "unary":
                fn, p = op
                values[k] = fn(xp, *(values[a] for a in args), p)
            elif kind == "op":
                values[k] = self._operator_output(op, [values.get(a) for a in args], groups, xp)
            else:
                total = values[args[0]] + values[args[1]]
                for a in args[2:]:
                    total += values[a]
                values[k] = total
            for a in free:
                values.pop(a, None)
        return [values[s] for s in self._output_slots]
