"""Fusion in the tensor evaluator: regions of elementwise nodes run as one loop kernel each.

NumPy runs an expression node by node: ``(X - mu)**2 / exp(logvar)`` summed
over rows is a broadcast copy of ``mu`` (a product with a tensor of ones), an
addition, a power, an exponential, a product and a sum — six passes over
memory and six calls of Python dispatch.  :func:`find_regions` groups such
nodes into *regions*, each one kernel of the loop-kernel layer
(:mod:`jacacc.kernels`): its :class:`~jacacc.kernels.ir.Definition`
is built here in code — the kernel IR — and compiled by
:func:`~jacacc.kernels.numba_kernel` (on NumPy arrays) or printed by
:func:`~jacacc.kernels.cuda_source` and run by CuPy (on CuPy arrays), so the
region above is one loop that reads ``X``, ``mu`` and ``logvar`` once and
writes one vector.

What a region holds:

* elementwise nodes: the table's functions of one operand
  (:data:`~jacacc.kernels.ir.FUNCTIONS`, but those NumPy computes faster:
  :data:`SLOW_IN_KERNELS`, the table's
  :attr:`~jacacc.ops.Operation.slow_in_kernels`), ``pow`` and ``shift``, the
  table's ``add``/``sub``/``mul``/``div`` of two operands (the kernel
  language's arithmetic), its other operations of two or three operands
  (:data:`~jacacc.kernels.KERNEL_OPERATIONS`: ``maximum``, ``logaddexp``,
  ``hypot``, ``where``, the predicates ``gt`` … as 1 or 0), sums (``add``
  without δ-scatter terms: a sum with some is split first into the sum of its
  other terms, a region, and its scatters added after, :func:`scatter_terms_apart`) and einsums that multiply elementwise with
  broadcasting or transposition (each operand's letters distinct and among the
  output's, nothing summed: a scalar constant becomes a number, the unit
  tensors ``ones`` and δ a number and a bracket — never an array);
* basic indexing (``x[1:]``, ``x[::-2]``, ``A[:, 0]``: a read of its operand at
  shifted, strided or fixed indices, never a copy) and its scatter back
  (``index_scatter``, the adjoint: a bracket of where the slice lies around the
  read; a quotient where its step is above 1), zero padding (``np.pad``) and
  concatenation (``np.concatenate``, ``np.roll``: each piece read at its shifted
  indices under the bracket of where it lies) — so a stencil of shifted copies,
  a Gauss–Seidel sweep by ``np.roll``, is one loop;
* a contraction of at most :data:`INLINE_SUM_MAX` terms per entry and at least
  :data:`INLINE_MIN_SIZE` entries (``U @ V.T`` of rank 5 at n = 2048) that the
  region reads at every loop index: its terms written out where they are read,
  never the product in memory;
* as its root only, one einsum that sums (``ij->i``, ``ij,ij->``, a
  matrix-vector product) when it is memory-bound — the product of the extents
  of all its letters is at most :data:`REDUCTION_FACTOR` times the size of its
  largest operand, or it multiplies that operand by a thin one along the
  output's last letter, ``Σ_j F[i, j]·V[j, m]`` with at most :data:`LOW_RANK_MAX`
  values of m (a low-rank model's gradient: the kernel computes each entry of
  ``F`` once and adds it into one accumulator per m, in one pass) — and that
  largest operand is computed in the region (a matrix-vector product of an
  input matrix is one BLAS call, which a loop kernel does not beat).  A matrix
  product is not memory-bound, and stays BLAS.

A kernel's loops assume its inputs in C order; an input it reads at least
:data:`REREAD_MIN` times per entry (a broadcast, a thin factor) is passed in C
order where it is a view in another.

Nodes that read no array (:func:`is_structural`: δ, ones, scalars, and slices,
scatters, sums and products of them — the ``δ[:, 1:] - δ[:, :-1]`` of a
differenced vector's Hessian) are no members: every region that reads one
writes it into its body as brackets and numbers, so a Hessian of differences is
written from vectors where a folded dense ``n × (n − 1)`` constant was read;
constant folding leaves them to the regions and folds, after fusion, those no
region took (``Program``).

A node joins its consumer's region only if that consumer reads it once and
nothing else does (no value is computed twice, and no exponential blow-up of a
shared subexpression), it is no output of the program, and — when it is an
expensive function (``exp``, ``tanh`` …: the table's
:attr:`~jacacc.ops.Operation.costly`) — the region reads it at every loop
index (a broadcast operand would recompute it once per broadcast element; such
a node is materialized instead).  Whatever a region reads from outside is a
kernel argument, read at the letters of its axes: transposes and broadcasts
are index maps.

A region becomes a kernel when it replaces at least :data:`MIN_OPERATIONS`
NumPy calls and its loop runs at least :data:`FUSION_MIN_SIZE` iterations (the
root's elements, times the extents it sums over), a size per kind of region
(elementwise, or ending in a sum) and number of calls replaced.  Measured by
``experiments/fusion_threshold.py`` (``results/fusion_threshold.json``; one
thread, chains of 2–8 operations and the same chains summed, 10–10⁶ elements,
the program's straight-line function fused against unfused): the sizes are the
crossovers, from which the kernel was not slower at any larger size.  A kernel
call (one Numba dispatch with its output's allocation, about 1.6 µs) was not
slower than NumPy's calls at any size in the recorded run, so every region of 10
elements or more is fused: two operations gain 1.07–1.3× below 10³ elements and
1.3–1.9× above, chains of four to eight 1.7–2.9×, sums of them 1.8–4×.  A region
costs its compile on the program's first call (0.1–0.5 s, a few milliseconds
from the disk cache), as ``jax.jit`` compiles on the first call; the first call
of every objective of the breadth benchmark stays under 1 s.

Kernels compile on first use and are cached in memory by their source (and per
argument type by Numba) and on disk under
:func:`~jacacc.kernels.kernel_cache_dir` (``$JACACC_CACHE_DIR``),
so another process loads them without compiling.  Fusion needs Numba; without
it, or with :data:`ENABLED` false (``JACACC_FUSION=0`` in the environment), or
with ``Program(..., fuse_kernels=False)``, the evaluator runs node by node as
before.  On CuPy arrays the interpreter runs each region as the CUDA kernel of
the same definition (:meth:`FusedKernel.evaluate`: one thread per element of
the root, compiled by CuPy once per source), unless its threads would each sum
more than :data:`CUDA_MAX_SERIAL` terms (:attr:`FusedKernel.cuda_worthwhile`:
CuPy's own reductions are parallel), :data:`CUDA_ENABLED` is false
(``JACACC_FUSION_CUDA=0``) or CuPy cannot compile it — then node by node
(:meth:`FusedKernel.reference`).

Examples
--------
>>> from jacacc.tensor.expr import add, const, einsum, ones, unary, var
>>> X, mu = var("X", (3, 4)), var("mu", (4,))
>>> centered = add(X, einsum("j,i,->ij", mu, ones((3,)), const(-1.0)))
>>> y = einsum("ij->j", unary("pow", centered, 2.0))
>>> [region] = find_regions([y], min_size=0)
>>> [n.kind for n in region.members], [n.param for n in region.inputs]
(['einsum', 'add', 'unary', 'einsum'], ['X', 'mu'])
>>> print(FusedKernel(region, np.float64).definition)
fused[i0] = sum(s0, 0, 2, (x0[s0, i0] + -1 * x1[i0])**2)
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from jacacc import kernels, ops
from jacacc.kernels.ir import (
    FUNCTIONS,
    Affine,
    Binary,
    Call,
    Condition,
    Definition,
    Guard,
    Limit,
    Node,
    Number,
    Power,
    Quotient,
    Read,
    Summation,
    chain,
    substitute,
    walk,
)
from jacacc.progress import slow_work
from jacacc.tensor.expr import (
    OPERATORS,
    UNARY,
    Tensor,
    delta_expansion,
    einsum,
    grouped_sum,
    node_flops,
    nodes_of,
    rebuild,
    sums_a_letter,
    with_args,
)

__all__ = ["COMPILE_AFTER", "COMPILE_BUDGET", "CompileBudget", "CUDA_ENABLED", "CUDA_MAX_SERIAL", "ENABLED", "fusable", "FUSION_MIN_SIZE", "INLINE_MIN_SIZE", "INLINE_SUM_MAX", "LOW_RANK_MAX",
           "MIN_OPERATIONS",
           "REDUCTION_FACTOR", "REREAD_MIN", "SLOW_IN_KERNELS", "SMALL_SCALED_SIZE", "FusedKernel", "Region", "find_regions",
           "read_in_place",
           "fused_outputs", "inline_operands_in_loop_order", "is_structural", "min_size_of", "numba_available", "scales_into_regions"]

#: fuse at all (``JACACC_FUSION=0`` in the environment turns it off); read when a program is planned
ENABLED = os.environ.get("JACACC_FUSION", "1").strip().lower() not in ("0", "false", "no", "off")


def call_count_setting(name: str, text: str | None, default: int) -> int:
    """The environment setting ``name`` (its text, ``None`` where unset) as a count of calls >= 0."""
    try:
        value = int(text) if text is not None else default
    except ValueError:
        raise ValueError(f"{name} must be an integer >= 0, got {text!r}") from None
    if value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {text!r}")
    return value


def _compile_after(text: str | None) -> int:
    return call_count_setting("JACACC_COMPILE_AFTER", text, 2)


#: calls of a region that run node by node before its kernel is compiled (``JACACC_COMPILE_AFTER`` in
#: the environment; 0: compiled on the first call).  A kernel found in the on-disk cache runs at once.
#: A first call then waits on no compile: a function differentiated once (a Hessian at one point) never
#: compiles, one called in a loop compiles on its third call, as a tracing JIT compiles hot code only
COMPILE_AFTER = _compile_after(os.environ.get("JACACC_COMPILE_AFTER"))


def _compile_budget(text: str | None) -> float:
    try:
        value = float(text) if text is not None else 10.0
    except ValueError:
        raise ValueError(f"JACACC_COMPILE_BUDGET must be a number of seconds >= 0, got {text!r}") from None
    if not value >= 0:
        raise ValueError(f"JACACC_COMPILE_BUDGET must be a number of seconds >= 0, got {text!r}")
    return value


#: seconds of Numba compiles one program may spend on its regions (``JACACC_COMPILE_BUDGET``): past
#: it, regions not compiled yet run node by node for good.  A Python loop of small steps (a Kalman
#: filter) makes regions that differ step by step — a sum of k adjoint terms at step k — and compiling
#: each cost 0.3–1 s: 80 kernels and two minutes on the third call at 40 steps (issue 41).  A kernel
#: found in the on-disk cache is a load and spends nothing
COMPILE_BUDGET = _compile_budget(os.environ.get("JACACC_COMPILE_BUDGET"))


class CompileBudget:
    """The compile seconds left to the regions of one program (:data:`COMPILE_BUDGET` at first).

    >>> budget = CompileBudget(1.0)
    >>> budget.spend(0.75); budget.left()
    True
    >>> budget.spend(0.5); budget.left()
    False
    """

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = COMPILE_BUDGET if seconds is None else float(seconds)

    def spend(self, seconds: float) -> None:
        self.seconds -= seconds

    def left(self) -> bool:
        return self.seconds > 0
#: the fewest loop iterations a region needs to become a kernel, by what its root does
#: (``"elementwise"`` or ``"reduction"``) and how many NumPy operations it replaces: the crossovers
#: measured by ``experiments/fusion_threshold.py`` (from that size on the kernel was not slower at
#: any size measured; module docstring); more operations than listed take the last entry.  An int
#: instead applies to every region (0: fuse every region).
FUSION_MIN_SIZE: int | dict[str, dict[int, int]] = {"elementwise": {2: 10}, "reduction": {2: 10}}
#: the fewest NumPy operations a region needs to become a kernel (one alone gains nothing)
MIN_OPERATIONS = 2
#: a summing einsum is memory-bound, and fusable as a region's root, when the product of the
#: extents of all its letters is at most this times the size of its largest operand
REDUCTION_FACTOR = 1
#: a fused kernel's input of two or more axes read at least this many times per entry (its
#: size times this at most the region's loop iterations) is passed in C order
#: (:attr:`FusedKernel.contiguous_inputs`): matrix factorization's value at n = 1024, its
#: ``Vᵀ`` read along rows, took 0.70-0.92 ms instead of 1.30-1.41 ms
REREAD_MIN = 8
#: the most values of the output's last letter for which a summing einsum over a computed operand
#: ``Σ_j F[i, j]·V[j, m]`` is a region's root (:func:`_low_rank`): matrix factorization's gradient
#: at n = 1024 took 1.46 against 3.37 ms (BLAS and NumPy) at rank 2, 2.0 against 3.6 at 5, 3.2
#: against 4.1 at 16; at n = 256, 57 against 83 µs at rank 2 and 153 against 169 µs at 16
LOW_RANK_MAX = 16
#: functions left out of regions: those NumPy computes faster than a kernel, the table's
#: :attr:`~jacacc.ops.Operation.slow_in_kernels` (:func:`jacacc.kernels.slow_in_kernels`)
SLOW_IN_KERNELS = kernels.slow_in_kernels()
#: on CuPy arrays, run regions as CUDA kernels (``JACACC_FUSION_CUDA=0`` in the environment: node by node)
CUDA_ENABLED = os.environ.get("JACACC_FUSION_CUDA", "1").strip().lower() not in ("0", "false", "no", "off")
#: a region runs as a CUDA kernel (one thread per element of its root) when each thread sums at most
#: this many terms.  Measured on an H200 (experiments/gpu_tensor.py, results/gpu_tensor.json): a chain
#: of 2–8 elementwise operations runs 1.5–4.8× faster as one kernel than node by node at every size
#: from 10³ to 10⁷ (the kernel's floor is ~21 µs a call); row sums of 2²² entries gain 2–3.9× up to
#: 64 terms a thread, 0.83–1.31× at 256 and lose 3–16× from 1024; a chain summed to one scalar
#: (one thread) loses from 10⁴ terms — CuPy's reductions are parallel, a thread's sum is serial.
CUDA_MAX_SERIAL = 64
#: a contraction whose summed extents multiply to at most this many terms (``U @ V.T`` of rank 5)
#: and whose result has at least :data:`INLINE_MIN_SIZE` entries joins the region that reads it at
#: every loop index, its terms written out where it is read, instead of going to memory and back
#: (:func:`_inline_sum`).  Measured on matrix factorization, value Σ(Ω ⊙ (T − UVᵀ))² and gradient
#: (one core, the thin factor passed in C order: :data:`REREAD_MIN`): at n = 1024 the value took
#: 0.34 against 1.07 ms at rank 2, 1.10 against 1.16 ms at rank 8 and 2.7 against 1.3 ms at 12;
#: the gradient 0.61 against 1.63, 2.08 against 2.34 and 2.93 against 2.87 ms.
INLINE_SUM_MAX = 8
#: the fewest entries of a short contraction's result for it to be written into a region: 2¹⁶.
#: Matrix factorization's rank-5 product written out was faster at every n from 32 to 2048 (value
#: 31 against 47 µs at n = 256, 0.85 against 1.15 ms at 1024, 5.4 against 12.2 ms at 2048), but
#: where the product stays in cache and the region's loop does not vectorize the written-out sum
#: loses: the breadth benchmark's MLP ``tanh(X W1 + b)`` at 256 × 51 of rank 8 took 34 against
#: 27 µs (value) and 60 against 54 µs (gradient) at 2¹⁰
INLINE_MIN_SIZE = 1 << 16
#: the most places at which a region computes one cheap node (no costly function, no sum) read
#: there more than once, each time at every loop index and in one order of its axes -- ``J[i, j - 1]`` and ``J[i, j]`` of a banded
#: Jacobian -- rather than writing it to memory and reading it back (XLA duplicates such producers
#: into each consumer too); a node read broadcast (at fewer indices than the loops) is computed once
MAX_COPIES = 4
#: the table's operations of two operands that are the kernel language's arithmetic
_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_ZERO = Affine.make({}, 0)


@dataclass(frozen=True, eq=False)
class Region:
    """Nodes of an expression DAG evaluated by one kernel.

    Attributes
    ----------
    root : Tensor
        The node the kernel writes.
    members : tuple of Tensor
        The region's nodes, operands before users (``root`` last).
    inputs : tuple of Tensor
        What the kernel reads from outside, in the order of its arguments (scalar
        constants and the unit tensors ``ones`` and δ are numbers in the kernel, not inputs).
    work : int
        The kernel's loop iterations: the root's elements times the extents it sums over.
    operations : int
        The NumPy operations the region replaces (:func:`_operations`).
    transposed : bool
        Whether the kernel reads an input of two or more axes in another order than its own
        loops (a transpose).  Such a region is not fused: NumPy's result of a transposed
        operand keeps the operand's memory order, which the contractions after it were
        planned for, while a kernel writes C order — measured on the ten-layer net's
        reverse-mode Hessian, its einsums then took twice as long as the whole kernel saved.
    """

    root: Tensor
    members: tuple[Tensor, ...]
    inputs: tuple[Tensor, ...]
    work: int
    operations: int
    transposed: bool = False

    def __repr__(self) -> str:
        return (f"Region(root={self.root.describe()}, {len(self.members)} nodes, {self.operations} operations, "
                f"inputs={[x.describe() for x in self.inputs]}, work={self.work})")


@dataclass(frozen=True)
class _Place:
    """Where a region's node is evaluated: its root's slot, the kernel indices it is read at (one
    per axis) and the loop indices around it (the root's, and the sums it is inside)."""

    root: int
    names: tuple[Affine, ...]
    context: frozenset[str]
    #: inside a short sum written into the region (:data:`INLINE_SUM_MAX`): a node joins only if it is
    #: read at every loop index around it, or each output element would recompute it per term
    strict: bool = False
    #: how many times per element the region computes the node: above 1 for a cheap node read at
    #: several places (:data:`MAX_COPIES`), whose costly operands are then computed once, outside
    copies: int = 1

    @property
    def variables(self) -> frozenset[str]:
        """The loop indices the node is read at (fewer than :attr:`context` where it is broadcast)."""
        return frozenset().union(*(name.names for name in self.names))


# ----------------------------------------------------------------------------- what may be fused
def _einsum_parts(node: Tensor) -> tuple[list[str], str]:
    inputs, _, out = node.param.partition("->")
    return inputs.split(","), out


def _is_delta(node: Tensor) -> bool:
    return node.kind == "const" and node.param[0] == "delta"


def _einsum_kind(node: Tensor) -> str | None:
    """``"elementwise"``, ``"reduction"`` (memory-bound: :data:`REDUCTION_FACTOR`) or None."""
    inputs, out = _einsum_parts(node)
    if _is_scatter_or_diagonal(node):
        return None  # a δ scatter, or a diagonal read or written
    letters = set("".join(inputs))
    if letters <= set(out):
        return "elementwise"
    extent = _extents(node)
    largest = max(a.size for a in node.args)
    if math.prod(extent[c] for c in letters | set(out)) <= REDUCTION_FACTOR * max(largest, 1) or _low_rank(node):
        return "reduction"
    return None


def _low_rank(node: Tensor) -> bool:
    """Whether a summing einsum multiplies its largest operand by a thin one along the output's
    last letter: ``Σ_j F[i, j]·V[j, m]`` with m of at most :data:`LOW_RANK_MAX` values and j the
    largest operand's last axis (a low-rank model's gradient).  Each entry of ``F`` then serves
    only a few terms: memory-bound, and a kernel with the sum's loop outside the thin letter's
    (:func:`_interchange`) computes ``F`` once, adding each entry into one accumulator per m."""
    inputs, out = _einsum_parts(node)
    if not out or _is_scatter_or_diagonal(node):
        return False
    big = inputs[max(range(len(node.args)), key=lambda k: node.args[k].size)]
    extra = set(out) - set(big)
    return (bool(big) and extra == {out[-1]} and _extents(node)[out[-1]] <= LOW_RANK_MAX
            and big[-1] not in out and set("".join(inputs)) <= set(big) | extra)


def _inline_sum(node: Tensor) -> bool:
    """A summing einsum short enough to compute inside the region that reads it: at most
    :data:`INLINE_SUM_MAX` terms per entry, a result of at least :data:`INLINE_MIN_SIZE`
    entries, no diagonal, no δ."""
    if node.kind != "einsum" or node.size < INLINE_MIN_SIZE or _elementwise_einsum(node) \
            or _is_scatter_or_diagonal(node):
        return False
    inputs, out = _einsum_parts(node)
    extent = _extents(node)
    return math.prod(extent[c] for c in set("".join(inputs)) - set(out)) <= INLINE_SUM_MAX


def _is_scatter_or_diagonal(node: Tensor) -> bool:
    inputs, out = _einsum_parts(node)
    return (any(_is_delta(a) for a in node.args) or delta_expansion(node.param, node.args) is not None
            or len(set(out)) != len(out) or any(len(set(t)) != len(t) for t in inputs))


def _extents(node: Tensor) -> dict[str, int]:
    inputs, out = _einsum_parts(node)
    extent = {c: n for labels, a in zip(inputs, node.args, strict=True) for c, n in zip(labels, a.shape, strict=True)}
    extent.update(zip(out, node.shape, strict=True))
    return extent


def _kind(node: Tensor, scatters: set[int]) -> str | None:
    """How ``node`` may take part in a region: ``"elementwise"``, ``"reduction"`` (as a root
    only) or None."""
    if node.kind == "unary":
        name, _ = node.param
        if (name in ("pow", "shift") and len(node.args) == 1) or (name in FUNCTIONS and name not in SLOW_IN_KERNELS and len(node.args) == 1):
            return "elementwise"
        if ops.resolve(name) in _BINARY and len(node.args) == 2:
            return "elementwise"
        if ops.resolve(name) in kernels.KERNEL_OPERATIONS and len(node.args) == ops.get(name).arity:
            return "elementwise"
        return None
    if node.kind == "add":
        return None if any(id(a) in scatters for a in node.args) else "elementwise"
    if node.kind == "einsum" and id(node) not in scatters:
        return _einsum_kind(node)
    if _places_operands(node):
        return "elementwise"
    return None


def fusable(node: Tensor) -> bool:
    """Whether a region may take ``node`` in anywhere (:func:`find_regions`; δ scatters aside): an
    elementwise function or sum, an elementwise einsum, a basic index.  Such a node costs no call
    of its own inside a region; a memory-bound summing einsum joins one only as its root.

    >>> from jacacc.tensor.expr import var, unary, einsum
    >>> x = var("x", (3, 3))
    >>> fusable(unary("exp", x)), fusable(einsum("ij,ij->ij", x, x)), fusable(einsum("ij,jk->ik", x, x))
    (True, True, False)
    """
    return _kind(node, set()) == "elementwise"


def _elementwise_einsum(node: Tensor) -> bool:
    """An einsum that sums nothing and reads no diagonal: a product with broadcasting."""
    inputs, out = _einsum_parts(node)
    return len(set(out)) == len(out) and all(len(set(t)) == len(t) for t in inputs) and not sums_a_letter(node)


def is_structural(node: Tensor, memo: dict[int, bool] | None = None) -> bool:
    """Whether ``node`` reads no array: the unit tensors δ, ones and zeros, scalar constants, and
    basic indexing, scatters, pads, concatenations (:func:`_operand_reads`), sums and elementwise products of them — a
    function of the loop indices alone (``δ[:, 1:] - δ[:, :-1]``: ``[i == j + 1] - [i == j]``).
    A region writes such a node into its body wherever it reads it, as brackets and numbers,
    instead of reading it from memory; constant folding leaves it to the regions
    (:func:`jacacc.tensor.evaluate.fold_constants`), where a dense array would be read instead.

    >>> from jacacc.tensor.arrays import BasicKey, index_node
    >>> from jacacc.tensor.expr import add, delta, var
    >>> shifted = index_node(delta(4), BasicKey((("s", 0, 1, 4), ("s", 1, 1, 3))))
    >>> is_structural(add(shifted, shifted)), is_structural(index_node(var("x", (4,)), BasicKey((("s", 1, 1, 3),))))
    (True, False)
    """
    memo = {} if memo is None else memo
    found = memo.get(id(node))
    if found is None:
        if node.kind == "const":
            found = node.shape == () or node.param[0] in ("delta", "ones", "zeros")
        elif node.kind == "add" or (node.kind == "einsum" and _elementwise_einsum(node)) \
                or _places_operands(node):
            found = all(is_structural(a, memo) for a in node.args)
        else:
            found = False
        memo[id(node)] = found
    return found


#: operators a region reads through rather than calls: basic indexing, its scatter back, zero
#: padding and concatenation (``np.roll``, shifted stencils): each operand read at shifted indices,
#: under brackets where it lies
_PLACING = frozenset({"index", "index_scatter", "pad", "concatenate"})


def _places_operands(node: Tensor) -> bool:
    return node.kind == "op" and node.param[2] == 0 and node.param[0] in _PLACING


def _operand_reads(node: Tensor, names: tuple[Affine, ...]) -> list[tuple[int, tuple[Affine, ...], tuple[Condition, ...]]]:
    """Where each operand of a placing node (:data:`_PLACING`) is read when the node is read at
    ``names``: ``(position, indices, conditions)``, the value the sum of the operands read there
    under their conditions.  A zero pad of ``x`` by ``(b, c)`` along an axis reads ``x[i − b]`` where
    ``b ≤ i < b + n``; piece ``k`` of a concatenation along an axis, starting at ``s_k``, is read at
    ``i − s_k`` where ``s_k ≤ i < s_k + n_k``."""
    name, options = node.param[0], dict(node.param[1])
    if name in ("index", "index_scatter"):
        read, conditions = _indexed_names(node, names)
        return [(0, read, conditions)]
    if name == "pad":
        shifted, conditions = list(names), []
        for axis, ((before, after), n) in enumerate(zip(options["widths"], node.args[0].shape, strict=True)):
            if before or after:
                shifted[axis], inside = _within(names[axis], before, n)
                conditions += inside
        return [(0, tuple(shifted), tuple(conditions))]
    axis, start, reads = options["axis"], 0, []
    for position, piece in enumerate(node.args):
        n = piece.shape[axis]
        at, conditions = _within(names[axis], start, n)
        reads.append((position, names[:axis] + (at,) + names[axis + 1:], tuple(conditions)))
        start += n
    return reads


def _within(at: Affine, start: int, length: int, step: int = 1) -> tuple[Affine, list[Condition]]:
    """Index ``at`` of a block of ``length`` entries placed at ``start`` every ``step`` positions (a
    slice's entries, a piece of a concatenation) as the block's own index, and the brackets of its
    lying inside the block (and on one of its positions, a divisibility bracket, where ``|step| > 1``)."""
    distance = (at - Affine.make({}, start)).scale(1 if step > 0 else -1)  # |step| times the entry
    conditions = [Condition(distance, ">="), Condition(Affine.make({}, (length - 1) * abs(step)) - distance, ">=")]
    if abs(step) > 1:
        conditions.append(Condition(distance, "%", abs(step)))
        distance = Affine.of(Quotient(distance, abs(step)))
    return distance, conditions


def read_in_place(roots: Sequence[Tensor]) -> frozenset[int]:
    """The placing nodes (:data:`_PLACING`) every reader of which is fused elementwise work: a region
    reads such a node's operands at shifted indices, so it is better left a concatenation of slices
    (``np.roll``) than gathered into one copy first (:func:`jacacc.tensor.views.collapse_views`)."""
    nodes = nodes_of(roots)
    readers: dict[int, list[Tensor]] = {}
    for node in nodes:
        for a in node.args:
            readers.setdefault(id(a), []).append(node)
    outputs = {id(r) for r in roots}
    return frozenset(id(n) for n in nodes if _places_operands(n) and id(n) not in outputs
                     and all(_kind(r, set()) == "elementwise" for r in readers.get(id(n), ())))


def _index_map(node: Tensor) -> tuple[str, Any] | None:
    """For a basic-indexing node (the ``index`` operator) or the scatter back (``index_scatter``),
    ``(name, key)``; else None."""
    if node.kind != "op" or node.param[2] != 0 or node.param[0] not in ("index", "index_scatter"):
        return None
    name, options, _ = node.param
    return name, dict(options)["key"]


def _indexed_names(node: Tensor, names: tuple[Affine, ...]) -> tuple[tuple[Affine, ...], tuple[Condition, ...]]:
    """Where the operand of the indexing node ``node`` (:func:`_index_map`) is read when ``node`` is
    read at ``names``, and the conditions under which it is read at all (an ``index_scatter`` is
    zero outside its slices).  ``x[a:b:s]`` at ``i`` reads ``x`` at ``a + s·i``; the scatter of
    ``t`` into ``[a:b:s, k]`` at ``(i, j)`` reads ``t[(i − a) / s]`` where ``i`` is one of ``a,
    a + s, …`` (a quotient under a divisibility bracket where ``|s| > 1``) and ``j = k``."""
    name, key = _index_map(node)
    position = iter(names)
    if name == "index":
        read = tuple(Affine.make({}, item[1]) if item[0] == "i" else next(position).scale(item[2])
                     + Affine.make({}, item[1]) for item in key.items)
        return read, ()
    read_list: list[Affine] = []
    conditions: list[Condition] = []
    for item, at in zip(key.items, names, strict=True):
        if item[0] == "i":
            conditions.append(Condition(at - Affine.make({}, item[1]), "=="))
            continue
        _, start, step, length = item
        read, inside = _within(at, start, length, step)
        conditions += inside
        read_list.append(read)
    return tuple(read_list), tuple(conditions)


def _expensive(node: Tensor) -> bool:
    """A function worth computing once per element rather than once per broadcast element."""
    if node.kind != "unary":
        return False
    name, p = node.param
    if name == "pow":
        return p is None or not float(p).is_integer() or abs(p) > 4
    return name != "shift" and ops.get(name).costly


def _operations(node: Tensor) -> int:
    """The NumPy calls of ``node`` run node by node: one per function, one per term of a sum after
    the first, one per pairwise step of an einsum (a matrix-vector product is one BLAS call; a
    transposition none)."""
    if node.kind == "add":
        return len(node.args) - 1
    if node.kind == "einsum":
        return max(len(node.args) - 1, int(sums_a_letter(node)))
    return 1  # a function, or basic indexing (a copy) and its scatter back


# ----------------------------------------------------------------------------- index layout
def _sum_order(node: Tensor) -> list[str]:
    """The letters a summing einsum sums over, outermost loop first: those its largest operand
    lacks, then the largest operand's in the order of its axes (the last one innermost, contiguous)."""
    inputs, out = _einsum_parts(node)
    summed = [c for c in dict.fromkeys("".join(inputs)) if c not in out]
    big = inputs[max(range(len(node.args)), key=lambda k: node.args[k].size)]
    return sorted(summed, key=lambda c: big.index(c) if c in big else -1)


def _sum_names(node: Tensor, place: _Place | None = None) -> dict[str, str]:
    """The loop index of each letter a summing einsum sums over: ``s0``, ``s1`` … at a region's
    root; inside the region (:data:`INLINE_SUM_MAX`), ``s{depth}_0`` … with ``depth`` the number of
    loops around it, so a sum nested in another's terms never reuses its index."""
    prefix = "s" if place is None else f"s{len(place.context)}_"
    return {c: f"{prefix}{k}" for k, c in enumerate(_sum_order(node))}


def _output_names(node: Tensor) -> tuple[str, ...]:
    return tuple(f"i{k}" for k in range(node.ndim))


def _operand_place(consumer: Tensor, place: _Place, position: int, root: bool) -> _Place:
    """Where operand ``position`` of ``consumer`` (at ``place``; ``root``: the region's root) is read."""
    operand = consumer.args[position]
    if consumer.kind == "op":  # basic indexing, its scatter, padding or concatenation (_operand_reads)
        read = next(names for k, names, _ in _operand_reads(consumer, place.names) if k == position)
        return _Place(place.root, read, place.context, place.strict, place.copies)
    if consumer.kind != "einsum":
        names = place.names if operand.shape == consumer.shape else ()
        return _Place(place.root, names, place.context, place.strict, place.copies)
    inputs, out = _einsum_parts(consumer)
    letter = dict(zip(out, place.names, strict=True))
    context = place.context
    summing = sums_a_letter(consumer)
    if summing:  # read inside the sums over the letters it has
        order = _sum_order(consumer)
        sums = _sum_names(consumer, None if root else place)
        letter.update({c: Affine.of(name) for c, name in sums.items()})
        level = max((order.index(c) + 1 for c in inputs[position] if c in sums), default=0)
        # the root's place counts its own sums among its loops: its operands' start from its indices
        context = (place.variables if root else place.context) | {sums[c] for c in order[:level]}
        if root and out and out[-1] not in inputs[position] and _low_rank(consumer):
            # computed once per row of the stored factor, outside the loop of the thin letter
            context -= letter[out[-1]].names
    strict = place.strict or (summing and not root)
    return _Place(place.root, tuple(letter[c] for c in inputs[position]), context, strict, place.copies)


def _axes_variables(place: _Place) -> tuple[frozenset[str], ...]:
    """The loop indices each axis of a node is read at (shifts and strides aside)."""
    return tuple(frozenset(name.names) for name in place.names)


def _root_place(slot: int, node: Tensor) -> _Place:
    names = _output_names(node)
    context = frozenset(names)
    if node.kind == "einsum" and _einsum_kind(node) == "reduction":
        context |= set(_sum_names(node).values())
    return _Place(slot, tuple(Affine.of(name) for name in names), context)


# ----------------------------------------------------------------------------- regions
def min_size_of(kind: str, operations: int, min_size: int | dict[str, dict[int, int]] | None = None) -> int:
    """The fewest loop iterations a region of ``kind`` (``"elementwise"``, ``"reduction"``)
    replacing ``operations`` NumPy calls needs to become a kernel under ``min_size`` (default
    :data:`FUSION_MIN_SIZE`: an int for every region, or per kind the sizes by operations).

    Examples
    --------
    >>> table = {"elementwise": {2: 300, 3: 100, 4: 10}, "reduction": {2: 10}}
    >>> min_size_of("elementwise", 2, table), min_size_of("elementwise", 9, table), min_size_of("reduction", 3, 50)
    (300, 10, 50)
    """
    table = FUSION_MIN_SIZE if min_size is None else min_size
    if isinstance(table, int):
        return table
    sizes = table[kind]
    listed = [k for k in sorted(sizes) if k <= operations]
    return sizes[listed[-1]] if listed else sizes[min(sizes)]


def find_regions(outputs: Sequence[Tensor], min_size: int | dict[str, dict[int, int]] | None = None,
                 min_operations: int | None = None) -> list[Region]:
    """The regions of the DAG of ``outputs`` worth a kernel (see the module docstring).

    Parameters
    ----------
    outputs : sequence of Tensor
        A program's outputs (never a member of a region; a region's root may be one).
    min_size : int or dict, optional
        The fewest loop iterations of a region: one number, or per kind and number of
        operations as :data:`FUSION_MIN_SIZE` (the default; :func:`min_size_of`).
    min_operations : int, optional
        The fewest NumPy operations of a region (default :data:`MIN_OPERATIONS`).

    Returns
    -------
    list of Region
        In the order of their roots in the DAG (operands first).

    Examples
    --------
    >>> from jacacc.tensor.expr import einsum, unary, var
    >>> A, x = var("A", (50, 50)), var("x", (50,))
    >>> y = unary("tanh", unary("shift", einsum("ij,j->i", A, x), 1.0))
    >>> [([n.kind for n in r.members], r.operations) for r in find_regions([y], min_size=0)]
    [(['unary', 'unary'], 2)]
    """
    min_operations = MIN_OPERATIONS if min_operations is None else min_operations
    nodes = nodes_of(outputs)
    slot = {id(n): k for k, n in enumerate(nodes)}
    consumers: dict[int, list[int]] = {}
    for k, n in enumerate(nodes):
        for a in n.args:
            consumers.setdefault(slot[id(a)], []).append(k)
    keep = {slot[id(y)] for y in outputs}
    scatters = {id(n) for n in nodes if n.kind == "einsum" and delta_expansion(n.param, n.args) is not None}
    structural: dict[int, bool] = {}  # written into the regions that read them, never members
    kinds = {k: kind for k, n in enumerate(nodes)
             if not is_structural(n, structural) and (kind := _kind(n, scatters)) is not None}
    inline_sums = {k for k, n in enumerate(nodes) if id(n) not in scatters and _inline_sum(n)}

    def joins(k: int, user: int, here: _Place) -> _Place | None:
        """Where node ``k``, read only by ``user``, is read in the region of ``user`` (at ``here``), if it
        joins it."""
        if consumers.get(k) != [user]:
            return None
        return joins_at(k, [(user, here, nodes[user].args.index(nodes[k]))])

    def joins_at(k: int, reads: list[tuple[int, _Place, int]]) -> _Place | None:
        """Where node ``k`` is read in one region, if it joins it: ``reads`` are its users, their places
        and the operand positions at which they read it (more than one: a cheap node, computed anew
        at each read rather than written to memory and read back)."""
        node = nodes[k]
        inline = k in inline_sums
        if (kinds.get(k) != "elementwise" and not inline) or k in keep:
            return None
        places = [_operand_place(nodes[user], here, position, here.root == user) for user, here, position in reads]
        copies = sum(place.copies for place in places)  # bounded: nodes copied under copies multiply
        if len(reads) > 1 and (inline or _expensive(node) or copies > MAX_COPIES
                               or any(place.variables != place.context for place in places)
                               or len({_axes_variables(place) for place in places}) > 1):
            # copies only of a node read at every loop index (broadcast, it is computed once) and in
            # one order of its axes (read transposed as well, X + Xᵀ, it is one pass of its own)
            return None
        for place in places:
            if (inline or place.strict or _expensive(node)) and place.variables != place.context:
                return None  # read at fewer indices than the loops around it: computed once, outside
            if copies > 1 and _expensive(node):
                return None  # a costly function under a node computed at several reads: once, outside
        return replace(places[0], copies=copies)

    def reads_of(k: int) -> list[tuple[int, _Place, int]] | None:
        """Each read of node ``k`` (user, its place, operand position) where all its users are in one
        region; None otherwise."""
        users = sorted(set(consumers.get(k, [])))
        if not users or any(u not in places for u in users) or len({places[u].root for u in users}) > 1:
            return None
        return [(u, places[u], position) for u in users for position, a in enumerate(nodes[u].args) if a is nodes[k]]

    places: dict[int, _Place] = {}
    for k in reversed(range(len(nodes))):
        node = nodes[k]
        if k not in kinds and k not in inline_sums:
            continue
        reads = reads_of(k)
        place = joins_at(k, reads) if reads is not None else None
        if place is None and k not in kinds:
            continue  # a short contraction no region reads at every index: one BLAS call
        if place is None and kinds[k] == "reduction":
            # a reduction reading only inputs at full size is one BLAS or NumPy call already
            root = _root_place(k, node)
            largest = max(a.size for a in node.args)
            if not any(a.size == largest and joins(slot[id(a)], k, root) for a in node.args):
                continue
        places[k] = place or _root_place(k, node)
    groups: dict[int, list[int]] = {}
    for k, place in places.items():
        groups.setdefault(place.root, []).append(k)
    regions = []
    for root, members in sorted(groups.items()):
        region = _region(nodes, sorted(members))
        least = min_size_of(kinds[root], region.operations, min_size)
        if region.operations >= min_operations and region.work >= least and not region.transposed \
                and not _scattered_cheaper(region):
            regions.append(region)
    return regions


#: the cost of one NumPy call in element operations (about a microsecond: a thousand additions)
CALL_ELEMENTS = 1000
#: a kernel's brackets for k slices cost ``BRACKET_TEST_ELEMENTS · k ** BRACKET_GROWTH`` element
#: operations per entry (more than linear in k: a body of many bracketed terms branches
#: unpredictably), an entry of a slice scattered back where it lies ``SCATTERED_ENTRY_ELEMENTS`` (its
#: term computed into memory, then added into the sum), and a scattered slice takes
#: ``SCATTERED_SLICE_CALLS`` NumPy statements.  Fitted to ``experiments/scattered_slices.py``
#: (``results/scattered_slices.json``, one core): sums of 7 to 300 slices, 40 × 40 to 2000 × 2000
BRACKET_TEST_ELEMENTS = 0.02
BRACKET_GROWTH = 1.6
SCATTERED_ENTRY_ELEMENTS = 2
SCATTERED_SLICE_CALLS = 2


def _scattered_cheaper(region: Region) -> bool:
    """Whether the slices a region scatters back (``index_scatter`` members) cost less added into
    their sum where they lie, a few NumPy statements each (:mod:`jacacc.tensor.straightline`), than
    as the region's brackets, which the kernel tests at every entry for every slice.  Many small
    slices are cheaper scattered (298 windows of 300 × 3 summed into 300 × 300: 1.4 against
    11 ms as a kernel); a few wide ones, a convolution's Hessian by shifted slices, are cheaper as
    one kernel (7 slices of 2000 × 1994: 4.9 against 32 ms scattered)."""
    boxes = [a.size for m in region.members if m.kind == "op" and m.param[0] in ("index_scatter", "concatenate")
             for a in m.args]
    if len(boxes) < 2:
        return False
    kernel = region.work * (1 + BRACKET_TEST_ELEMENTS * len(boxes) ** BRACKET_GROWTH)
    scattered = SCATTERED_ENTRY_ELEMENTS * sum(boxes) + SCATTERED_SLICE_CALLS * CALL_ELEMENTS * len(boxes)
    return kernel > scattered


def _region(nodes: list[Tensor], members: list[int]) -> Region:
    root = nodes[members[-1]]
    work = math.prod(_extents(root).values()) if root.kind == "einsum" else root.size
    # the inputs in the order the kernel first reads them (its argument order)
    order = _Builder(root, {id(nodes[k]) for k in members})
    body = order.body()
    return Region(root, tuple(nodes[k] for k in members), tuple(order.inputs), work,
                  sum(_operations(nodes[k]) for k in members), _reads_transposed(body))


def _reads_transposed(body: Node) -> bool:
    """Whether a read of two or more output loop indices takes them out of loop order."""
    for node in walk(body):
        if not isinstance(node, Read):
            continue
        loops = []
        for index in node.indices:
            if len(index.coeffs) != 1 or not isinstance(index.coeffs[0][0], str):
                continue
            name = index.coeffs[0][0]
            if name.startswith("i") and name[1:].isdigit():
                loops.append(int(name[1:]))
        if len(loops) >= 2 and loops != sorted(loops):
            return True
    return False


# ----------------------------------------------------------------------------- the kernel IR
class _Builder:
    """A region's body as the elementwise language's tree (:mod:`jacacc.kernels.ir`)."""

    def __init__(self, root: Tensor, inside: set[int]) -> None:
        self.root = root
        self.inside = inside
        self.arguments: dict[int, str] = {}
        self.inputs: list[Tensor] = []
        self.structural: dict[int, bool] = {}

    def body(self) -> Node:
        place = _root_place(0, self.root)
        return self.value(self.root, place, root=True)

    def value(self, node: Tensor, place: _Place, root: bool = False) -> Node:
        if id(node) not in self.inside and (node.kind == "const" or not is_structural(node, self.structural)):
            return self.read(node, place.names)
        if node.kind == "unary":
            return self.function(node, place)
        if node.kind == "op":  # indexing (a read elsewhere), a scatter, pad or concatenation (brackets)
            terms = []
            for position, names, conditions in _operand_reads(node, place.names):
                operand = self.value(node.args[position], _Place(place.root, names, place.context, place.strict))
                terms.append(Guard(0, conditions, operand) if conditions else operand)
            return terms[0] if len(terms) == 1 else chain([("+", t) for t in terms])
        operands = [self.value(a, _operand_place(node, place, k, root), root=False)
                    for k, a in enumerate(node.args)]
        if node.kind == "add":
            return chain([("+", x) for x in operands])
        inputs, _ = _einsum_parts(node)
        if not sums_a_letter(node):
            return _product([x for _, x in sorted(zip((len(t) for t in inputs), operands, strict=True),
                                                  key=lambda pair: pair[0])])
        return self.reduction(node, inputs, operands, _sum_names(node, None if root else place), unroll=not root)

    def function(self, node: Tensor, place: _Place) -> Node:
        name, p = node.param
        operands = [self.value(a, _operand_place(node, place, k, False)) for k, a in enumerate(node.args)]
        if name == "pow":
            return Power(0, operands[0], float(p))
        if name == "shift":
            return Binary(0, "+", operands[0], Number(0, float(p)))
        if name in FUNCTIONS:
            return Call(0, name, operands[0])
        if ops.resolve(name) in _BINARY:
            return Binary(0, _BINARY[ops.resolve(name)], operands[0], operands[1])
        return Call(0, ops.resolve(name), *operands)  # maximum, logaddexp, where, a predicate …

    def reduction(self, node: Tensor, inputs: list[str], operands: list[Node], names: dict[str, str],
                  unroll: bool = False) -> Node:
        """``factors · sum(s0, …, factors · sum(s1, …))``: each operand inside the innermost sum
        over a letter it has, the sums outermost first (:func:`_sum_order`), their indices ``names``;
        ``unroll`` (a short sum inside the region: :data:`INLINE_SUM_MAX`) writes each sum's terms out."""
        order = _sum_order(node)
        extent = _extents(node)
        levels: list[list[tuple[int, Node]]] = [[] for _ in range(len(order) + 1)]
        for labels, operand in zip(inputs, operands, strict=True):
            level = max((order.index(c) + 1 for c in labels if c in order), default=0)
            levels[level].append((len(labels), operand))
        body: Node | None = None
        for level in reversed(range(len(order) + 1)):
            factors = [x for _, x in sorted(levels[level], key=lambda pair: pair[0])]
            if body is not None:
                c = order[level]
                if unroll:  # a short sum inside the region: its terms written out, so the loop
                    # around it (contiguous, the output's last index) vectorizes rather than the sum
                    factors.append(chain([("+", substitute(body, {names[c]: Affine.make({}, v)}))
                                          for v in range(extent[c])]))
                else:
                    factors.append(Summation(0, names[c], (Limit(_ZERO),),
                                             (Limit(Affine.make({}, extent[c] - 1)),), body))
            body = _product(factors)
        assert body is not None
        return body

    def read(self, node: Tensor, names: tuple[Affine, ...]) -> Node:
        """An operand from outside the region read at ``names``; constants that are numbers inlined."""
        if node.kind == "const" and node.shape == ():
            return Number(0, float(node.value))
        if node.kind == "const" and node.param[0] in ("ones", "zeros"):
            return Number(0, 1.0 if node.param[0] == "ones" else 0.0)
        if _is_delta(node):
            return Guard(0, (Condition(names[0] - names[1], "=="),), Number(0, 1.0))
        if id(node) not in self.arguments:
            self.arguments[id(node)] = f"x{len(self.inputs)}"
            self.inputs.append(node)
        # a 0-d operand is passed as a vector of one element
        return Read(0, self.arguments[id(node)], names or (_ZERO,))


def _product(factors: list[Node]) -> Node:
    """The product of ``factors`` (factors 1 dropped; 1 for none)."""
    kept = [f for f in factors if not (isinstance(f, Number) and f.value == 1.0)]
    if not kept:
        return Number(0, 1.0)
    return chain([("*", f) for f in kept])


# ----------------------------------------------------------------------------- kernels
class FusedKernel:
    """A :class:`Region` compiled: the parameter of the ``fused`` node that replaces it in a program.

    ``kernel(out, *inputs)`` (the Numba dispatcher, compiled on first use) fills ``out`` of
    shape :attr:`kernel_shape` — the root's shape, or ``(1,)`` for a scalar root; a 0-d input
    is passed as a vector of one element (:attr:`scalar_inputs`).  :attr:`cuda_source` is the
    same definition as CUDA C++ (one thread per element of ``out``), which :meth:`evaluate`
    runs on CuPy arrays.

    Parameters
    ----------
    region : Region
    dtype : numpy dtype
        The program's working dtype (the kernel's output).

    Attributes
    ----------
    definition : Definition
        The kernel IR: ``fused[i0, …] = …`` reading the inputs as ``x0, x1, …``.
    interchange : bool
        For a summing root: whether the sum's loop runs outside the last output index's
        (:func:`~jacacc.kernels.python_source`), chosen by the largest operand's layout.
    parallel : bool
        Whether the loop runs in parallel (``prange``): from
        :data:`~jacacc.kernels.PARALLEL_MIN_ELEMENTS` iterations.
    ranks : dict
        The number of axes the kernel reads of each argument (a 0-d input as a vector of one).
    contiguous_inputs : tuple of bool
        Per input: whether the straight-line program passes it in C order
        (``np.ascontiguousarray``): inputs of two or more axes the kernel reads on average at
        least :data:`REREAD_MIN` times per entry.
    cuda_worthwhile : bool
        Whether the CUDA kernel beats the region node by node on CuPy arrays: each element of its
        root (one thread) sums at most :data:`CUDA_MAX_SERIAL` terms.
    flops : int
        The region's FLOPs as the unfused program counts them.

    Examples
    --------
    >>> from jacacc.tensor.expr import unary, var
    >>> x = var("x", (4,))
    >>> [region] = find_regions([unary("exp", unary("shift", x, 1.0))], min_size=0)
    >>> kernel = FusedKernel(region, np.float64)
    >>> print(kernel.definition)
    fused[i0] = exp(x0[i0] + 1)
    >>> np.allclose(kernel(np.zeros(4)), np.e)
    True
    >>> print(kernel.cuda_source.splitlines()[-2])
        _out[_t] = exp((_a_x0[(_i_i0)] + ((real)1.0)));
    """

    def __init__(self, region: Region, dtype: Any, budget: CompileBudget | None = None) -> None:
        self.region = region
        self.dtype = np.dtype(dtype)
        self.budget = CompileBudget(math.inf) if budget is None else budget
        root = region.root
        builder = _Builder(root, {id(n) for n in region.members})
        body = builder.body()
        assert builder.inputs == list(region.inputs)
        indices = _output_names(root) or ("z",)
        self.definition = Definition.printed("fused", indices, body)
        self.arguments = [f"x{k}" for k in range(len(region.inputs))]
        self.shape = root.shape
        self.kernel_shape = root.shape or (1,)
        self.scalar_inputs = tuple(x.shape == () for x in region.inputs)
        # the kernel's loop order assumes C order (kernels.emit.contiguity): an input it reads
        # again and again (a broadcast, the thin factor of a low-rank sum) is copied into C order
        # when it is a view in another, which costs little beside the reads it saves
        self.contiguous_inputs = tuple(x.ndim >= 2 and x.size * REREAD_MIN <= region.work for x in region.inputs)
        self.interchange = _interchange(root)
        self.parallel = region.work >= kernels.PARALLEL_MIN_ELEMENTS and root.ndim > 0 and not (
            self.interchange and root.ndim == 1)
        self.ranks = {name: max(x.ndim, 1) for name, x in zip(self.arguments, region.inputs, strict=True)}
        elements = math.prod(self.kernel_shape)
        self.cuda_worthwhile = region.work <= CUDA_MAX_SERIAL * elements
        self.flops = sum(node_flops(n) for n in region.members)
        self._kernel: Callable | None = None
        self._failed = False
        #: whether :meth:`run` calls the kernel (compiled, found on disk, or past COMPILE_AFTER calls)
        self._hot = False
        self._on_disk: bool | None = None
        #: how often :meth:`run` was called (a generated program calls a compiled kernel itself
        #: once it has run: :meth:`bind_when_hot`)
        self.calls = 0
        #: wall seconds of the first Numba call: the compile (or the load from the on-disk cache)
        #: plus one run; None before it
        self.first_call_seconds: float | None = None
        self._cuda_kernel: Callable | None = None
        self._cuda_failed = False
        #: (namespace, name) pairs that call :meth:`run`, to bind to the compiled kernel once hot
        self._bindings: list[tuple[dict[str, Any], str]] = []

    def __repr__(self) -> str:
        return f"<FusedKernel {self.definition.source}>"

    def bind_when_hot(self, namespace: dict[str, Any], name: str) -> None:
        """Bind ``namespace[name]`` (a generated program's global that calls :meth:`run`) to the
        compiled kernel itself once it has run: from then on :meth:`run` only adds its checks and
        counting to each call (half a microsecond of a small kernel's one or two)."""
        if self.first_call_seconds is not None and not self._failed:
            namespace[name] = self._kernel
        else:
            self._bindings.append((namespace, name))

    @property
    def kernel(self) -> Callable:
        """The Numba kernel (through :func:`~jacacc.kernels.numba_kernel`, cached)."""
        if self._kernel is None:
            self._kernel = kernels.numba_kernel(self.definition, self.arguments, parallel=self.parallel,
                                                interchange=self.interchange, cache=True,
                                                last_extent=self.kernel_shape[-1])
        return self._kernel

    @property
    def cuda_source(self) -> str:
        """The region as CUDA C++ (:func:`~jacacc.kernels.cuda_source` of :attr:`definition`, in the
        program's dtype): ``jacacc_elementwise(out, *inputs, *extents)``, one thread per element of
        :attr:`kernel_shape`, 0-d inputs as vectors of one element."""
        return kernels.cuda_source(self.definition, self.arguments, self.ranks, self.dtype)

    @property
    def cuda_kernel(self) -> Callable:
        """The CUDA kernel launched by CuPy (:func:`~jacacc.kernels.cupy_kernel`; compiled on first
        launch, once per source in a process): ``kernel(out, *inputs)`` on contiguous CuPy arrays."""
        if self._cuda_kernel is None:
            self._cuda_kernel = kernels.cupy_kernel(self.cuda_source)
        return self._cuda_kernel

    def evaluate(self, xp: Any, arrays: Sequence[Any]) -> Any:
        """The root's value from the inputs' on the arrays of ``xp`` — the interpreter's step
        (:meth:`jacacc.tensor.evaluate.Program.interpret`).  On NumPy arrays: node by node
        (:meth:`reference`: the interpreter stays the independent check of the kernels).  On
        CuPy arrays: the CUDA kernel where :attr:`cuda_worthwhile` (and :data:`CUDA_ENABLED`, a
        float64 or float32 program), else node by node; a kernel CuPy cannot compile or launch
        is reported once (a warning) and the region runs node by node from then on."""
        if xp is np or not (CUDA_ENABLED and self.cuda_worthwhile) or self._cuda_failed \
                or self.dtype not in (np.float64, np.float32):
            return self.reference(xp, arrays)
        try:
            return self.run_cuda(xp, arrays)
        except Exception as exc:
            if not type(exc).__module__.startswith("cupy"):
                raise
            self._cuda_failed = True
            warnings.warn(f"jacacc.tensor could not run the fused CUDA kernel {self.definition.source} "
                          f"({type(exc).__name__}: {exc}); it runs node by node", RuntimeWarning, stacklevel=2)
            return self.reference(xp, arrays)

    def run_cuda(self, cp: Any, arrays: Sequence[Any]) -> Any:
        """The root's value computed by :attr:`cuda_kernel` on the CuPy arrays ``arrays`` (in
        :attr:`Region.inputs` order; converted to the program's dtype and made contiguous where
        they are not, 0-d ones viewed as vectors of one element)."""
        inputs = []
        for a, scalar in zip(arrays, self.scalar_inputs, strict=True):
            a = cp.ascontiguousarray(cp.asarray(a, dtype=self.dtype))
            inputs.append(a.reshape(1) if scalar else a)
        out = cp.empty(self.kernel_shape, dtype=self.dtype)
        self.cuda_kernel(out, *inputs)
        return out.reshape(self.shape)

    def compiled_now(self) -> bool:
        """Whether :meth:`run` calls the kernel: once the region has run :data:`COMPILE_AFTER` times
        node by node, while the program's :class:`CompileBudget` lasts, or at once where the kernel
        is in the on-disk cache (a load, not a compile)."""
        if not self._hot:
            if self._on_disk is None:  # looked up once: a kernel another process compiles meanwhile waits
                self._on_disk = self._hot = kernels.numba_kernel_on_disk(
                    self.definition, self.arguments, interchange=self.interchange, last_extent=self.kernel_shape[-1])
            if not self._hot and self.calls > COMPILE_AFTER:
                # a compile: only while the program's budget lasts (a load from disk is not one)
                self._hot = self.budget.left()
                self._failed = not self._hot  # past the budget: node by node from now on
        return self._hot

    def run(self, out: np.ndarray, *arrays: Any) -> None:
        """Fill ``out`` (:attr:`kernel_shape`) from the inputs (0-d ones as vectors of one element):
        node by node for the first :data:`COMPILE_AFTER` calls (unless the kernel is on disk), by
        the kernel from then on.  Where Numba cannot compile the kernel, the region is evaluated
        node by node instead (with a warning, once)."""
        self.calls += 1
        if not self._failed and (self._hot or self.compiled_now()):
            try:
                if self.first_call_seconds is None:
                    start = time.perf_counter()
                    with slow_work(f"compiling the fused kernel {_clip(self.definition.source)}"):
                        self.kernel(out, *arrays)
                    self.first_call_seconds = time.perf_counter() - start
                    if not self._on_disk:
                        self.budget.spend(self.first_call_seconds)
                    for namespace, name in self._bindings:
                        namespace[name] = self._kernel
                    self._bindings.clear()
                else:
                    self.kernel(out, *arrays)
                return
            except Exception as exc:
                if not _numba_failure(exc):
                    raise
                self._failed = True
                warnings.warn(f"jacacc.tensor could not compile the fused kernel {self.definition.source} "
                              f"({type(exc).__name__}); it runs node by node", RuntimeWarning, stacklevel=2)
        values = [a.reshape(()) if scalar else a for a, scalar in zip(arrays, self.scalar_inputs, strict=True)]
        out[...] = np.reshape(self.reference(np, values), self.kernel_shape)

    def __call__(self, *arrays: Any) -> np.ndarray:
        """The root's value from the inputs' (NumPy arrays, in :attr:`Region.inputs` order)."""
        out = np.empty(self.kernel_shape, dtype=self.dtype)
        self.run(out, *(np.reshape(a, (1,)) if scalar else a
                        for a, scalar in zip(arrays, self.scalar_inputs, strict=True)))
        return out.reshape(self.shape)

    def reference(self, xp: Any, arrays: Sequence[Any]) -> Any:
        """The region evaluated node by node on the arrays of ``xp`` (NumPy or CuPy), as the
        unfused program would: the interpreter's path, and the fallback."""
        values: dict[int, Any] = {id(x): a for x, a in zip(self.region.inputs, arrays, strict=True)}
        for node in self.region.members:  # operands first
            values[id(node)] = _node_value(xp, node, [self._reference_value(xp, a, values) for a in node.args])
        return xp.asarray(values[id(self.region.root)], dtype=self.dtype)

    def _reference_value(self, xp: Any, node: Tensor, values: dict[int, Any]) -> Any:
        """An operand's value: an input's or a member's as computed, a constant's, or a structural
        node's (:func:`is_structural`: shallow) computed from its operands'."""
        if id(node) not in values:
            if node.kind == "const":
                values[id(node)] = xp.asarray(node.value, dtype=self.dtype)
            else:
                args = [self._reference_value(xp, a, values) for a in node.args]
                values[id(node)] = _node_value(xp, node, args)
        return values[id(node)]


def _node_value(xp: Any, node: Tensor, args: list[Any]) -> Any:
    """One node of a region evaluated on the arrays of ``xp``, as the unfused program would."""
    if node.kind == "unary":
        name, p = node.param
        return UNARY[name](xp, *args, p)
    if node.kind == "add":
        total = args[0]
        for term in args[1:]:
            total = total + term
        return total
    if node.kind == "op":
        name, options, _ = node.param
        return OPERATORS[name].forward(*args, **dict(options))
    return xp.einsum(node.param, *args)


def _interchange(root: Tensor) -> bool:
    """Whether a summing root's sum loop goes outside its last output index's: where that index is
    the last axis of the largest operand (the rows of a matrix-vector product ``x·A`` are then
    read contiguously)."""
    if root.kind != "einsum" or root.ndim == 0:
        return False
    if not sums_a_letter(root):
        return False
    if _low_rank(root):
        return True
    inputs, out = _einsum_parts(root)
    big = inputs[max(range(len(root.args)), key=lambda k: root.args[k].size)]
    return bool(big) and big[-1] == out[-1]


def numba_available() -> bool:
    """Whether Numba is installed (fusion is off without it): found, not imported, so that a
    program with no region to compile does not pay Numba's import (about 0.11 s of a fresh
    process's first call, ``experiments/first_call.py``).  An installation that cannot be imported
    fails the first kernel, which then runs node by node (:meth:`FusedKernel.run`)."""
    if "numba" in sys.modules:
        return sys.modules["numba"] is not None
    return importlib.util.find_spec("numba") is not None


def _numba_failure(exc: BaseException) -> bool:
    """Whether ``exc`` says Numba could not compile a kernel, or could not be imported at all."""
    if isinstance(exc, ImportError):
        return True
    from numba.core.errors import NumbaError

    return isinstance(exc, NumbaError)


#: a scalar factor moves out of a contraction (:func:`scales_into_regions`) onto an array of at
#: most this many entries even where the contraction's path multiplied a smaller one by it: below
#: it a NumPy call costs about the same whatever the size, and in a region the factor is free
SMALL_SCALED_SIZE = 4096


def _elementwise_producer(node: Tensor) -> bool:
    """Whether ``node`` is computed by an elementwise step that a region can take in (a
    function, a sum of terms, a product with broadcasting; not a δ scatter)."""
    if node.kind in ("var", "const") or (node.kind == "einsum" and delta_expansion(node.param, node.args) is not None):
        return False
    return _kind(node, set()) == "elementwise"


def _pure_scale(node: Tensor) -> Tensor | None:
    """The operand of ``node`` where ``node`` is that operand times a scalar constant (``ij,->ij``)."""
    if node.kind != "einsum" or len(node.args) != 2:
        return None
    inputs, out = _einsum_parts(node)
    for k in (0, 1):
        if node.args[1 - k].is_scalar_const() and inputs[k] == out and len(set(out)) == len(out):
            return node.args[k]
    return None


def _scales_absorbed(node: Tensor, once: Callable[[Tensor], bool]) -> Tensor:
    """``node`` (a contraction) reading, for each operand that is a scaled array only it reads,
    that array, its factor one more scalar operand (which the einsum multiplies into one)."""
    inputs, out = _einsum_parts(node)
    terms, scalars = [], []
    for labels, a in zip(inputs, node.args, strict=True):
        inner = _pure_scale(a) if once(a) else None
        if inner is None:
            terms.append((labels, a))
        else:
            terms.append((labels, inner))
            scalars.append(next(b for b in a.args if b.is_scalar_const()))
    if not scalars or sum(1 for _, a in terms if not a.is_scalar_const()) < 2:
        return node
    subscripts = ",".join([*(labels for labels, _ in terms), *("" for _ in scalars)]) + "->" + out
    return einsum(subscripts, *(a for _, a in terms), *scalars)


def _scale_moved(node: Tensor, once: Callable[[Tensor], bool], consumer: Tensor | None) -> Tensor:
    """``node`` (an einsum) with its scalar factor moved out of the contraction where an
    elementwise step can take it: into an operand only it reads (``once``), computed
    elementwise (a factor of that operand's region), else to its output when one elementwise
    step, ``consumer``, reads it (a factor of that step); ``node`` itself otherwise."""
    inputs, out = _einsum_parts(node)
    scalars = [k for k, a in enumerate(node.args) if a.is_scalar_const()]
    rest = [k for k in range(len(node.args)) if k not in scalars]
    if len(scalars) != 1 or len(rest) < 2 or delta_expansion(node.param, node.args) is not None:
        return node
    (s,) = scalars
    scale = node.args[s]
    subscripts = ",".join(inputs[k] for k in rest) + "->" + out
    # the multiplications the contraction's path spends on the factor, and at most what the
    # moved factor may cost: as many, or a few thousand where a call costs the same at any size
    budget = max(node_flops(node) - node_flops(einsum(subscripts, *(node.args[k] for k in rest))),
                 SMALL_SCALED_SIZE)
    for k in rest:
        labels, a = inputs[k], node.args[k]
        if a.size <= budget and len(set(labels)) == len(labels) and once(a) and _elementwise_producer(a):
            scaled = einsum(f"{labels},->{labels}", a, scale)
            return einsum(subscripts, *(scaled if m == k else node.args[m] for m in rest))
    if node.size > budget or consumer is None or not _elementwise_producer(consumer):
        return node
    return einsum(f"{out},->{out}", einsum(subscripts, *(node.args[k] for k in rest)), scale)


def scales_into_regions(outputs: Sequence[Tensor]) -> list[Tensor]:
    """``outputs`` with each contraction's scalar factor (``-1 · X @ w``, ``0.5 · Aᵀ x``) moved to
    where a fused region multiplies by it at no cost: an elementwise operand only that
    contraction reads, or its output when one elementwise step reads it — where that array has
    no more entries than the one the contraction's path multiplied, or at most
    :data:`SMALL_SCALED_SIZE`.  Left in the contraction, it is a pass of its own (a NumPy call,
    ~1 µs at small sizes); in a region, one more factor of a loop the kernel runs anyway.  The
    program counts the multiplications where they run: a few more FLOPs where the array is
    larger than the one the path chose.

    Examples
    --------
    >>> from jacacc.tensor.expr import const, unary, var
    >>> X, w = var("X", (128, 64)), var("w", (64,))
    >>> y = unary("exp", einsum("ij,j,->i", X, w, const(-1.0)))
    >>> (moved,) = scales_into_regions([y])
    >>> moved.args[0].param, moved.args[0].args[0].param
    ('i,->i', 'ij,j->i')
    """
    order = nodes_of(outputs)
    uses: dict[int, int] = {id(r): 1 for r in outputs}
    consumer: dict[int, Tensor] = {}
    for node in order:
        for a in dict.fromkeys(node.args):
            uses[id(a)] = uses.get(id(a), 0) + 1
            consumer[id(a)] = node
    new: dict[int, Tensor] = {}
    single: set[int] = set()  # the rebuilt nodes that one node reads once (and no root)

    def once(t: Tensor) -> bool:
        return id(t) in single

    for node in order:
        rebuilt = with_args(node, tuple(new[id(a)] for a in node.args))
        if node.kind == "einsum":
            reader = consumer.get(id(node)) if uses.get(id(node)) == 1 else None
            # a scaled operand's factor is taken in too (a scaling kept apart from its contraction,
            # a tie in FLOPs, joins no region when the contraction is a BLAS call)
            absorbed = _scales_absorbed(rebuilt, once)
            moved = _scale_moved(absorbed, once, reader)
            rebuilt = moved if moved is not absorbed else rebuilt
        new[id(node)] = rebuilt
        if uses.get(id(node)) == 1:
            single.add(id(rebuilt))
    return [new[id(r)] for r in outputs]


def inline_operands_in_loop_order(outputs: Sequence[Tensor]) -> list[Tensor]:
    """``outputs`` with each short contraction a region may write out (:func:`_inline_sum`) reading
    its operands along their last axis at its own last letter: an operand with that letter on
    another axis is read through its transposition (``X Xᵀ`` as ``ik,kj->ij`` of ``X`` and
    ``Xᵀ``), which the straight-line program passes to the kernel in C order
    (:attr:`FusedKernel.contiguous_inputs`), so the kernel's innermost loop reads it contiguously.
    A contraction that no region takes stays one BLAS call, of a transposed view.

    Examples
    --------
    >>> from jacacc.tensor.expr import var
    >>> X = var("X", (1000, 4))
    >>> (y,) = inline_operands_in_loop_order([einsum("ik,jk->ij", X, X)])
    >>> y.param, [a.param for a in y.args]
    ('ik,kj->ij', ['X', 'jk->kj'])
    """
    return rebuild(outputs, lambda _, node: _last_letter_last(node) if _inline_sum(node) else node)


def _last_letter_last(node: Tensor) -> Tensor:
    """A short contraction with each operand that has its output's last letter on another axis
    read through the transposition that moves it last (:func:`inline_operands_in_loop_order`)."""
    inputs, out = _einsum_parts(node)
    if not out:
        return node
    last = out[-1]
    terms, args = [], []
    for term, operand in zip(inputs, node.args, strict=True):
        if last in term and term[-1] != last:
            moved = term.replace(last, "") + last
            terms.append(moved)
            args.append(einsum(f"{term}->{moved}", operand))
        else:
            terms.append(term)
            args.append(operand)
    if terms == inputs:
        return node
    return einsum(f"{','.join(terms)}->{out}", *args)


def scatter_terms_apart(outputs: Sequence[Tensor]) -> list[Tensor]:
    """``outputs`` with each sum of two or more plain terms and δ scatters (``H = Σⱼ wⱼ·Jⱼ + λ·I``:
    a regularized Hessian) rewritten as the sum of the plain terms, then the scatters added to it.
    A region takes no sum with a scatter term (its diagonals are added in place, never a bracket at
    every entry), and so took none of the terms' sum either: each term was a kernel of its own and
    a pass over memory (a convolution's Hessian at n = 2000: seven kernels and six additions of
    2000 × 2000).  Apart, the plain terms' sum is one region.

    Examples
    --------
    >>> from jacacc.tensor.expr import add, delta, unary, var
    >>> a, b = var("a", (3, 3)), var("b", (3, 3))
    >>> (y,) = scatter_terms_apart([add(unary("exp", a), unary("exp", b), einsum("ij,->ij", delta(3), var("s", ())))])
    >>> [t.kind for t in y.args]
    ['add', 'einsum']
    """
    return rebuild(outputs, lambda _, node: _plain_terms_apart(node))


def _plain_terms_apart(node: Tensor) -> Tensor:
    if node.kind != "add":
        return node
    scatters = [t for t in node.args if t.kind == "einsum" and delta_expansion(t.param, t.args) is not None]
    scattered = {id(t) for t in scatters}
    plain = [t for t in node.args if id(t) not in scattered]
    if not scatters or len(plain) < 2:
        return node
    return grouped_sum(grouped_sum(*plain), *scatters)


def fused_outputs(outputs: Sequence[Tensor], dtype: Any, min_size: int | dict[str, dict[int, int]] | None = None) -> tuple[Tensor, ...]:
    """``outputs`` with each region of :func:`find_regions` replaced by one node of kind
    ``"fused"`` (its parameter a :class:`FusedKernel`, its operands the region's inputs);
    ``outputs`` unchanged where there is none or Numba is missing.

    Examples
    --------
    >>> from jacacc.tensor.expr import unary, var
    >>> y = unary("exp", unary("shift", var("x", (1000,)), 1.0))
    >>> [node.kind for node in fused_outputs([y], np.float64)] == (["fused"] if numba_available() else ["unary"])
    True
    """
    if not numba_available():
        return tuple(outputs)
    rewritten = scatter_terms_apart(inline_operands_in_loop_order(outputs))
    regions = find_regions(rewritten, min_size)
    if not regions:
        return tuple(outputs)
    outputs = rewritten
    replaced = {id(r.root): r for r in regions}
    budget = CompileBudget()  # shared by the program's regions
    new: dict[int, Tensor] = {}
    for node in nodes_of(outputs):
        region = replaced.get(id(node))
        if region is not None:
            args = tuple(new[id(x)] for x in region.inputs)
            new[id(node)] = Tensor("fused", node.shape, args, FusedKernel(region, dtype, budget))
        else:
            new[id(node)] = with_args(node, tuple(new[id(a)] for a in node.args))
    return tuple(new[id(y)] for y in outputs)


def _clip(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters (a long kernel definition in a progress line)."""
    return text if len(text) <= limit else text[:limit - 1] + "…"
