"""The steps a planned tensor program runs: pairwise contractions and δ-scatters.

Below both the interpreter (:mod:`jacacc.tensor.evaluate`) and the
straight-line generator (:mod:`jacacc.tensor.straightline`), which print and
run the same steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from jacacc.errors import MissingExtraError
from jacacc.ops import array_module
from jacacc.tensor.expr import (
    contraction_path,
)

__all__ = ["MATVEC_MIN_ENTRIES", "REORDERED_MIN_SIZE", "SHORT_AXIS", "Contraction", "Diagonals", "array_module", "operand", "scatter", "scatter_add", "shape_error",
           "without_unit_ones"]

#: a broadcast product whose last output axis is shorter than this (and that has an axis at least
#: four times as long, and at least :data:`REORDERED_MIN_SIZE` entries) is written in the memory
#: order with its longest axis last and returned as a transposed view (:meth:`Contraction._memory_order`)
SHORT_AXIS = 16
REORDERED_MIN_SIZE = 4096
#: a batch of matrix-vector products runs as one stacked ``matmul`` where each matrix has this many
#: entries or more, as ``einsum`` below (:meth:`Contraction._batched_product`)
MATVEC_MIN_ENTRIES = 128


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

    def __init__(self, subscripts: str, shapes: Sequence[tuple[int, ...]], shape: tuple[int, ...] | None = None) -> None:
        try:
            import opt_einsum
        except ImportError as exc:  # pragma: no cover - opt_einsum ships with the tensor extra
            raise MissingExtraError("jacacc.tensor needs opt_einsum: pip install 'jacacc[tensor]'") from exc
        path, _ = contraction_path(subscripts, tuple(tuple(s) for s in shapes))
        _, info = opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize=[list(step) for step in path])
        self.subscripts = subscripts
        #: the result reshaped to this where given: unit axes put back (:func:`without_unit_ones`)
        self.shape = shape
        self.contraction_list = info.contraction_list
        inputs = subscripts.split("->")[0].split(",")
        self._extent = {c: n for labels, shape in zip(inputs, shapes, strict=True)
                        for c, n in zip(labels, shape, strict=True)}
        self._steps = [self._step(entry) for entry in info.contraction_list]

    def _step(self, entry: tuple) -> tuple[tuple[int, ...], str, Any, tuple]:
        """How one pairwise step runs: a broadcast ``multiply`` (no index summed),
        a ``matmul`` of the operands folded to matrices (what ``tensordot`` does,
        with its permutations and shapes worked out once here), or ``einsum``; and
        the axes of each operand summed before it (:meth:`_own_sums`)."""
        positions, removed, subscripts, _, blas = entry
        inputs, _, out = subscripts.partition("->")
        terms = inputs.split(",")
        plain = len(terms) == 2 and all(len(set(t)) == len(t) for t in terms)
        presums: tuple = (None,) * len(terms)
        if plain:
            presums, terms = self._own_sums(terms, out)
            removed = set(removed) - {c for t, axes in zip(inputs.split(","), presums, strict=True) if axes
                                      for c in (t[a] for a in axes)}
            if presums != (None, None):
                from opt_einsum.blas import can_blas

                subscripts = f"{','.join(terms)}->{out}"
                blas = can_blas(terms, out, removed)
        return (tuple(positions), *self._kind(terms, out, removed, subscripts, plain, blas), presums)

    def _own_sums(self, terms: list[str], out: str) -> tuple[tuple, list[str]]:
        """The axes each operand of a pairwise step sums on its own (a letter in it alone and not
        in the output), and the terms left.  Summed first, the product that remains is a
        broadcast multiply or a matrix product, not ``einsum``'s generic loop: a Hessian's
        ``nlk,nijml->nijkl`` over ``(8, 160, 2)`` and ``(8, 4, 2, 2, 160)`` took 92 µs as
        ``einsum``, 24 µs as a sum over ``m`` and a broadcast multiply (one core)."""
        presums, left = [], []
        for term, other in zip(terms, terms[::-1], strict=True):
            axes = tuple(k for k, c in enumerate(term) if c not in other and c not in out)
            presums.append(axes or None)
            left.append("".join(c for k, c in enumerate(term) if k not in axes))
        return tuple(presums), left

    def _kind(self, terms: list[str], out: str, removed: set, subscripts: str, plain: bool,
              blas: Any) -> tuple[str, Any]:
        if plain and not removed and set(out) == set(terms[0]) | set(terms[1]):
            memory = self._memory_order(terms, out)
            final = None if memory == out else tuple(memory.index(c) for c in out)
            return "multiply", (*(self._broadcast(t, memory) for t in terms), final)
        batched = plain and self._batched_product(terms[0], terms[1], out)
        if batched or (plain and blas and "EINSUM" not in blas):
            summed = [c for c in terms[0] if c in removed]
            plan = self._matmul(terms[0], terms[1], summed, out)
            swapped = self._matmul(terms[1], terms[0], summed, out)
            # the product in the output's order (a C-ordered result, not a transposed view of one): the
            # loops that read it next — a fused kernel's, say — run along its rows (mlp's X @ W1 came
            # out Fortran-ordered and the tanh kernel reading it ran 5× slower)
            if plan[-1] is not None and swapped[-1] is None:
                return "matmul", (*swapped, True)
            return "matmul", (*plan, False)
        return "einsum", subscripts

    def _batched_product(self, left: str, right: str, out: str) -> bool:
        """Whether ``left,right->out`` runs faster as one stacked ``matmul`` (a BLAS product per
        batch entry) than as ``einsum``: a product with batch letters (in both operands and the
        output), summed ones (in both, not the output) and free ones on each side, each matrix at
        least 2 × 2 × 2.  ``einsum`` keeps the products of tiny matrices (under 512 multiply-adds)
        whose batch letters trail both operands, which it vectorizes along the batch.

        Measured on one core (NumPy 2.4, OpenBLAS): ``kni,jik->jin`` at 32 per letter takes 81 µs as
        ``matmul`` and 780 µs as ``einsum``; ``bij,bjk->bik`` for 1000 2 × 2 products 28 against
        139 µs; ``ijb,jkb->ikb`` for the same products 36 against 6 µs (the trailing-batch case).
        A batch of matrix-vector products (one side free of letters) runs as ``matmul`` where each
        matrix has :data:`MATVEC_MIN_ENTRIES` entries or more: 100 products of 100 × 100 took 126
        against 296 µs (a Gaussian process's Hessian), 1000 of 16 × 16 69 against 113 µs, 100 of
        8 × 8 6 against 7 µs, while 1000 of 2 × 2 took 31 against 13 µs.
        """
        letters = set(left) | set(right)
        batch = [c for c in out if c in left and c in right]
        summed = [c for c in left if c in right and c not in out]
        if not batch or not summed or any(c not in out and c not in summed for c in letters):
            return False
        size = lambda chosen: math.prod(self._extent[c] for c in chosen)  # noqa: E731
        rows, columns = size(c for c in left if c in out and c not in right), size(c for c in right if c in out
                                                                                       and c not in left)
        inner = size(summed)
        if inner < 2:
            return False
        if min(rows, columns) < 2:  # a batch of matrix-vector products: BLAS where the matrices are not tiny
            return max(rows, columns) * inner >= MATVEC_MIN_ENTRIES
        trailing = all(set(term[-len(batch):]) == set(batch) for term in (left, right))
        return not (trailing and rows * columns * inner < 512)

    def _memory_order(self, terms: list[str], out: str) -> str:
        """The order in which a broadcast product ``terms -> out`` is written: ``out``, or — where
        its last axis is short (under :data:`SHORT_AXIS`) and another at least four times as long
        — ``out`` with its longest axis moved last (of equal ones, one that ends an operand's term).

        NumPy's loops run along the result's last axis in memory, one call of the inner loop per
        row: a Hessian's ``(8, 6, 128, 6)`` product of an ``(6, 128)`` and a ``(128, 8, 6)``
        array took 56–58 µs in 6144 rows of 6 (one core), 24–31 µs written as ``(8, 6, 6, 128)``
        (whatever the operands' own layouts), and the matrix product that read it next along the
        128 axis no longer copied it first.
        """
        extent = self._extent
        size = math.prod(extent[c] for c in out)
        if len(out) < 2 or extent[out[-1]] >= SHORT_AXIS or size < REORDERED_MIN_SIZE:
            return out
        if any(set(t) == set(out) for t in terms):
            # an operand as large as the product (a scaling, a row scaled): NumPy runs it in that
            # operand's layout, and what reads the product next expects it in C order
            return out
        ends = {t[-1] for t in terms}  # neither is empty: the other alone would be the product's letters
        longest = max(out, key=lambda c: (extent[c], c in ends))
        if extent[longest] < 4 * extent[out[-1]]:
            return out
        return out.replace(longest, "") + longest

    def _broadcast(self, term: str, out: str) -> tuple[tuple[int, ...] | None, tuple[int, ...], bool]:
        """The transpose putting ``term``'s axes in ``out``'s order, the shape that broadcasts it
        against ``out`` (1 where it lacks an axis), and whether to copy it to C order first.

        A transposed operand whose last axis moves, at most half the product's size, is copied:
        NumPy's broadcast loop over a strided inner axis is several times slower than the copy
        (``(8, 4, 2, 1, 160) * (8, 1, 1, 2, 160)`` with the second a transposed view took 89 µs,
        with it copied 1.3 + 12.5 µs, one core)."""
        order = [c for c in out if c in term]
        perm = None if "".join(order) == term else tuple(term.index(c) for c in order)
        shape = tuple(self._extent[c] if c in term else 1 for c in out)
        size = math.prod(self._extent[c] for c in term)
        copied = perm is not None and perm[-1] != len(term) - 1 and 2 * size <= math.prod(self._extent[c] for c in out)
        return perm, shape, copied

    @staticmethod
    def _presummed(a: Any, axes: tuple[int, ...] | None) -> Any:
        if axes is None:
            return a
        if all(a.shape[k] == 1 for k in axes):  # unit axes (keepdims): a reshape, not a reduction
            return a.reshape(tuple(n for k, n in enumerate(a.shape) if k not in axes))
        return a.sum(axis=axes)

    @staticmethod
    def _arranged(a: Any, perm: tuple[int, ...] | None, shape: tuple[int, ...], copied: bool, xp: Any) -> Any:
        """A broadcast operand of a ``multiply`` step (see :meth:`_broadcast`)."""
        if perm is not None:
            a = a.transpose(perm)
            if copied:
                a = xp.ascontiguousarray(a)
        return a.reshape(shape)

    def _matmul(self, left: str, right: str, summed: list[str], out: str) -> tuple:
        """How ``left,right->out`` runs as ``matmul``: each operand's transpose and the (stack of)
        matrices it folds to, the product's shape and the transpose putting it in ``out``'s order.
        Letters in both operands and the output are batch letters: the stack's leading axis."""
        batch = [c for c in left if c in right and c in out]
        free_l = [c for c in left if c not in summed and c not in batch]
        free_r = [c for c in right if c not in summed and c not in batch]

        def perm(term: str, order: list[str]) -> tuple[int, ...] | None:
            p = tuple(term.index(c) for c in order)
            return None if p == tuple(range(len(term))) else p

        size = lambda letters: math.prod(self._extent[c] for c in letters)  # noqa: E731
        stack = (size(batch),) if batch else ()
        produced = batch + free_l + free_r
        final = None if "".join(produced) == out else tuple(produced.index(c) for c in out)
        return (perm(left, batch + free_l + summed), (*stack, size(free_l), size(summed)),
                perm(right, batch + summed + free_r), (*stack, size(summed), size(free_r)),
                tuple(self._extent[c] for c in produced), final)

    def __call__(self, *operands: Any, xp: Any = np) -> Any:
        stack = list(operands)
        for positions, kind, how, presums in self._steps:
            taken = [self._presummed(stack.pop(p), axes) for p, axes in zip(positions, presums, strict=True)]
            if kind == "multiply":
                ha, hb, final = how
                a, b = self._arranged(taken[0], *ha, xp), self._arranged(taken[1], *hb, xp)
                if final is None:
                    stack.append(a * b)
                elif xp is np:  # in its memory order, in C order (NumPy's default follows the operands' layout)
                    stack.append(np.multiply(a, b, order="C").transpose(final))
                else:
                    stack.append((a * b).transpose(final))
            elif kind == "matmul":
                pa, sa, pb, sb, shape, final, swap = how
                a, b = taken[::-1] if swap else taken
                a = (a if pa is None else a.transpose(pa)).reshape(sa)
                b = (b if pb is None else b.transpose(pb)).reshape(sb)
                result = (xp.dot(a, b) if len(sa) == 2 else a @ b).reshape(shape)  # as the straight-line source
                stack.append(result if final is None else result.transpose(final))
            else:
                stack.append(xp.einsum(how, *taken))
        return stack[0] if self.shape is None else stack[0].reshape(self.shape)


def without_unit_ones(subscripts: str, args: Sequence[Any]) -> tuple[str, tuple[int, ...]] | None:
    """The einsum ``subscripts`` of the tensors ``args`` without its operands that are constants of
    ones with one entry — what ``keepdims`` and ``x[:, None]`` multiply in to put unit axes in
    (:func:`~jacacc.tensor.arrays.insert_unit_axes`) — as the subscripts of the rest and the
    positions kept; the result reshaped to the einsum's shape is its value.  None where there is no
    such operand, or nothing else.  Run without them, a ``keepdims`` sum is one ``einsum`` of its
    operand rather than a product with a ones array (1.7 against 3.1 µs on 128 × 8, one core).

    >>> from jacacc.tensor.expr import einsum, ones, var
    >>> kept = einsum("ik,j->ij", var("x", (4, 3)), ones((1,)))
    >>> without_unit_ones(kept.param, kept.args)
    ('ik->i', (0,))
    """
    inputs = subscripts.partition("->")[0].split(",")
    unit = [a.kind == "const" and a.param[0] == "ones" and math.prod(a.shape) == 1 for a in args]
    if not any(unit) or all(unit):
        return None
    kept = tuple(k for k, flag in enumerate(unit) if not flag)
    present = set("".join(inputs[k] for k in kept))
    out = "".join(c for c in subscripts.partition("->")[2] if c in present)
    return ",".join(inputs[k] for k in kept) + "->" + out, kept


def _diagonal_view(xp: Any, a: Any, class_axes: Sequence[tuple[int, ...]]) -> Any:
    """A writable view of ``a`` with one axis per class of tied axes (its strides summed):
    the entries a δ scatter writes."""
    shape = tuple(a.shape[axes[0]] for axes in class_axes)
    strides = tuple(sum(a.strides[x] for x in axes) for axes in class_axes)
    return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)


class Diagonals:
    """Where a δ scatter (:class:`~jacacc.tensor.expr.DeltaExpansion`) writes in an array:
    one view axis per class of tied axes (their strides summed), the core broadcast along
    the classes it lacks.  For a NumPy array whose entries fill one block of memory (C or
    Fortran order, or a transposition of either: a product's result may be one) the view is a
    slice of the flat array for one class (``c·δ``: every ``n + 1``-th entry) or the ndarray
    constructor over the buffer — ``as_strided`` takes ~5 µs of Python, which a small Hessian
    (tens of µs) would feel; other arrays fall back to :func:`_diagonal_view`.
    """

    __slots__ = ("class_axes", "view_shape", "pad", "_layouts")

    def __init__(self, shape: tuple[int, ...], class_axes: Sequence[tuple[int, ...]], core_ndim: int) -> None:
        self.class_axes = tuple(class_axes)
        self.view_shape = tuple(shape[axes[0]] for axes in class_axes)
        self.pad = (1,) * (len(class_axes) - core_ndim)
        # per strides of an array of the shape: how to view it (see _layout); at a given shape the
        # strides tell the layout, and working it out each call cost more than the view itself
        self._layouts: dict[tuple[int, ...], tuple[tuple[int, ...] | None, tuple[int, ...]] | None] = {}

    def _layout(self, a: np.ndarray) -> tuple[tuple[int, ...] | None, tuple[int, ...]] | None:
        """For an array whose entries fill one block of memory in some order of its axes (C or
        Fortran order, or a transposition of either, as a broadcast product of transposed
        operands returns): the axis order that makes it C-contiguous (None: it is) and the view's
        strides; None for any other array."""
        key = a.strides
        if key in self._layouts:
            return self._layouts[key]
        order = sorted(range(a.ndim), key=lambda k: -a.strides[k])
        dense = a.transpose(order).flags.c_contiguous
        perm = None if order == list(range(a.ndim)) else tuple(order)
        layout = (perm, tuple(sum(a.strides[x] for x in axes) for axes in self.class_axes)) if dense else None
        if len(self._layouts) < 8:
            self._layouts[key] = layout
        return layout

    def view(self, xp: Any, a: Any) -> Any:
        layout = self._layout(a) if xp is np and a.size else None
        if layout is None:
            return _diagonal_view(xp, a, self.class_axes)
        perm, strides = layout
        if len(strides) == 1:
            step = strides[0] // a.itemsize
            return a.ravel(order="K")[: self.view_shape[0] * step: step]
        # the buffer of the C-contiguous transposition starts where a's data does
        return np.ndarray(self.view_shape, a.dtype, a if perm is None else a.transpose(perm), 0, strides)

    def core(self, core: Any) -> Any:
        return core.reshape(core.shape + self.pad) if self.pad and core.ndim else core


def operand(a: Any, xp: Any = np) -> Any:
    """A scatter's core that is its one operand unchanged."""
    return a


def scatter(xp: Any, shape: tuple[int, ...], dtype: np.dtype, diagonals: Diagonals, core: Any) -> Any:
    """A zero array of ``shape`` with ``core`` written along its δ diagonals
    (:class:`~jacacc.tensor.expr.DeltaExpansion`): one strided view axis per class
    of tied axes, the core's classes first, the rest broadcast (``core`` None: 1)."""
    result = xp.zeros(shape, dtype=dtype)
    diagonals.view(xp, result)[...] = 1 if core is None else diagonals.core(core)
    return result


def scatter_add(xp: Any, total: Any, diagonals: Diagonals, core: Any) -> None:
    """Add a δ scatter (:func:`scatter`) into ``total`` in place, through the same view:
    only the entries on its diagonals are touched."""
    view = diagonals.view(xp, total)
    view += 1 if core is None else diagonals.core(core)


def shape_error(name: str, got: tuple[int, ...], expected: tuple[int, ...]) -> None:
    """Refuse an argument of another shape than the program was planned for."""
    raise ValueError(f"argument {name!r} has shape {tuple(got)}, the program was built for {expected}")
