"""Evaluating tensor expressions: planned once, run many times (opt_einsum ``contract_expression``).

A :class:`Program` takes the expression DAG of one or more outputs, orders its
nodes, plans every einsum once with :func:`opt_einsum.contract_expression`
(the contraction path and its FLOP count come from the same plan that runs),
converts constants to the working dtype, and frees every intermediate after
its last use.  Calling it with arrays binds the ``var`` nodes by name.  CuPy
arrays are accepted where CuPy is installed: the program then runs on the GPU
(opt_einsum dispatches to CuPy, the elementwise functions come from CuPy).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jacacc.errors import MissingExtraError
from jacacc.tensor.expr import (
    UNARY,
    Tensor,
    contraction_path,
    delta_expansion,
    fuse_einsums,
    node_flops,
    nodes_of,
)

__all__ = ["Program", "array_module"]


def array_module(arrays: Sequence[Any]) -> Any:
    """``cupy`` if any argument is a CuPy array, else ``numpy``."""
    for a in arrays:
        if type(a).__module__.startswith("cupy"):
            import cupy

            return cupy
    return np


def _contract_expression(subscripts: str, shapes: Sequence[tuple[int, ...]]) -> Any:
    try:
        import opt_einsum
    except ImportError as exc:  # pragma: no cover - opt_einsum ships with the tensor extra
        raise MissingExtraError("jacacc.tensor needs opt_einsum: pip install 'jacacc[tensor]'") from exc
    path, _ = contraction_path(subscripts, tuple(tuple(s) for s in shapes))
    return opt_einsum.contract_expression(subscripts, *shapes, optimize=[list(step) for step in path])


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
        self._steps: list[tuple[int, str, Any, tuple[int, ...], tuple[int, ...]]] = []
        read: set[int] = set(keep)  # slots some step reads the value of (δs a scatter spreads are not)
        for k, n in enumerate(nodes):
            args = tuple(slot[id(a)] for a in n.args)
            free = tuple(sorted({a for a in args if last_use.get(a) == k and a not in keep}))
            expansion = delta_expansion(n.param, n.args) if n.kind == "einsum" else None
            if expansion is not None:
                core = _contract_expression(expansion.core, [n.args[m].shape for m in expansion.core_args]) \
                    if expansion.core else None
                self._steps.append((k, "scatter", (expansion, core, n.shape), args, free))
                read.update(args[m] for m in expansion.core_args)
                continue
            read.update(args)
            if n.kind == "einsum":
                self._steps.append((k, "einsum", _contract_expression(n.param, [a.shape for a in n.args]), args, free))
            elif n.kind == "unary":
                name, p = n.param
                self._steps.append((k, "unary", (UNARY[name], p), args, free))
            elif n.kind == "add":
                self._steps.append((k, "add", None, args, free))
        self._constants: dict[int, np.ndarray] = {
            k: np.asarray(n.value, dtype=self.dtype) for k, n in enumerate(nodes) if n.kind == "const" and k in read}
        self._device_constants: dict[str, dict[int, Any]] = {}

    @property
    def flops(self) -> int:
        """FLOPs of one evaluation: the einsums' planned costs, one per element of a
        sum term and of an elementwise function."""
        return sum(node_flops(n) for n in self.nodes)

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
        for slot, a, x in zip(self._input_slots, arrays, self.inputs, strict=True):
            if slot is not None:
                if tuple(a.shape) != x.shape:
                    raise ValueError(f"argument {x.param!r} has shape {tuple(a.shape)}, the program was built for {x.shape}")
                values[slot] = a
        for k, kind, op, args, free in self._steps:
            if kind == "einsum":
                values[k] = op(*(values[a] for a in args), backend=xp.__name__)
            elif kind == "scatter":
                expansion, core, shape = op
                core_value = core(*(values[args[m]] for m in expansion.core_args), backend=xp.__name__) \
                    if core is not None else None
                values[k] = _scatter(xp, shape, self.dtype, expansion.class_axes, core_value)
            elif kind == "unary":
                fn, p = op
                values[k] = fn(xp, values[args[0]], p)
            else:
                total = values[args[0]] + values[args[1]]
                for a in args[2:]:
                    total += values[a]
                values[k] = total
            for a in free:
                values.pop(a, None)
        return [values[s] for s in self._output_slots]
