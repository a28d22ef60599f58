"""Moves of entries: nodes that only pick, reorder or reshape the entries of another, collapsed.

A derivative of a program that slices, stacks and indexes — a Hessian's directions, a mixture's
components stacked by :mod:`jacacc.tensor.isomorphic`, the cotangents of ``np.stack`` — is
full of *moves*: basic indices (``x[2, 0:4]``), gathers, reshapes and concatenations of such.
Each runs as a copy of its own (a basic index's view is copied: a LAPACK operator may later
overwrite its operand in place), so a chain of moves copies the same entries several times,
and a concatenation of slices of one tensor copies them twice.  What a chain of moves computes
is fixed by its shapes: the entries ``positions`` (flat indices) of the tensor at its root.
:class:`Views` follows the moves down to that tensor; :func:`collapse_views` replaces each
chain of moves, and each concatenation of moves of one tensor, by one step from it — a
reshape where the entries come in order, one basic index where they are one, else a gather —
where that step costs less than the copies it replaces.

Examples
--------
>>> from jacacc.tensor.arrays import BasicKey, concatenate_nodes, index_node
>>> from jacacc.tensor.expr import nodes_of, var
>>> x = var("x", (4, 3))
>>> def columns(*js):                                     # x[:, js] as slices and a concatenation
...     return concatenate_nodes([index_node(x, BasicKey((("s", 0, 1, 4), ("s", j, 1, 1)))) for j in js], 1)
>>> [[n.param for n in nodes_of(collapse_views([columns(*js)])) if n.kind == "op"] for js in ((2, 0), (2, 0, 1))]
[[('index', (('key', [0:4, 2::-2]),), 0)], [('gather', (('index', <12 indices>),), 0)]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jacacc.tensor.expr import Tensor, nodes_of, reader_counts, with_args

__all__ = ["MAX_ELEMENTS", "StridedTake", "Views", "collapse_views"]

#: Largest move collapsed: its gather's index array (8 bytes an entry) is kept in the plan.
MAX_ELEMENTS = 1 << 16

_MOVES = ("index", "gather", "reshape", "concatenate")


def _unit_axis(node: Tensor) -> int | None:
    """Where ``node`` puts one unit axis into its first operand (an einsum with ``ones((1,))``, as
    :func:`~jacacc.tensor.arrays.insert_unit_axes` writes it), or None for any other node."""
    if node.kind != "einsum" or len(node.args) != 2:
        return None
    ones = node.args[1]
    if ones.kind != "const" or ones.param[0] != "ones" or ones.shape != (1,):
        return None
    inputs, out = node.param.split("->")
    kept, new = inputs.split(",")
    if len(new) != 1 or out.replace(new, "") != kept:
        return None
    return out.index(new)


def _move(node: Tensor) -> str | None:
    """The kind of move ``node`` is (``"unit"`` for a unit axis put in by an einsum), or None."""
    if node.kind == "op" and node.param[0] in _MOVES and not dict(node.param[1]).get("lead"):
        return node.param[0]
    if _unit_axis(node) is not None:
        return "unit"
    return None


class Views:
    """Each node as entries of the tensor it reads through moves: ``of(node)`` is ``(base,
    positions)`` with ``node``'s value ``base.ravel()[positions]``; a node that is no move, or a
    concatenation of moves of different tensors, is its own base."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[Tensor, np.ndarray]] = {}

    def of(self, node: Tensor) -> tuple[Tensor, np.ndarray]:
        known = self.known.get(id(node))
        if known is None:
            known = self.known[id(node)] = self._followed(node) or (node, np.arange(node.size).reshape(node.shape))
        return known

    def _followed(self, node: Tensor) -> tuple[Tensor, np.ndarray] | None:
        kind = _move(node)
        # the positions are index arrays as large as what they index: moves of small tensors only
        if kind is None or max(node.size, *(a.size for a in node.args)) > MAX_ELEMENTS:
            return None
        if kind == "concatenate":
            views = [self.of(a) for a in node.args]
            base = views[0][0]
            if any(b is not base for b, _ in views):
                return None
            return base, np.concatenate([p for _, p in views], axis=dict(node.param[1])["axis"])
        base, positions = self.of(node.args[0])
        options = dict(node.param[1]) if node.kind == "op" else {}
        if kind == "index":
            return base, positions[options["key"].numpy()]
        if kind == "gather":
            return base, positions.reshape(-1)[options["index"].array]
        return base, positions.reshape(node.shape)  # a reshape, or a unit axis put in

    def gathered(self, base: Tensor, positions: np.ndarray) -> Tensor:
        """``base``'s entries ``positions`` as one node: ``base`` reshaped where they come in
        order, one basic index where they are one (:func:`basic_key`), else a gather."""
        from jacacc.tensor.arrays import IndexArray, index_node, reshape_node
        from jacacc.tensor.operators import apply_operator

        if positions.size == base.size and np.array_equal(positions.ravel(), np.arange(base.size)):
            return reshape_node(base, positions.shape)
        if (key := basic_key(positions, base.shape)) is not None:
            return index_node(base, key)
        return apply_operator("gather", [base], index=IndexArray(positions))[0]


def basic_key(positions: np.ndarray, shape: tuple[int, ...]) -> object | None:
    """The basic index (:class:`~jacacc.tensor.arrays.BasicKey`) that takes the entries
    ``positions`` (flat indices, in the result's shape) of an array of ``shape``, or None
    where no basic index does: each axis of the array held at one entry, or walked evenly by
    the next axis of the result.

    >>> positions = np.arange(24).reshape(4, 6)[1:4:2, 5]
    >>> basic_key(positions, (4, 6)), basic_key(positions[::-1], (4, 6)), basic_key(np.array([0, 1, 3]), (4,))
    ([1:5:2, 5], [3::-2, 5], None)
    """
    from jacacc.tensor.arrays import BasicKey

    if positions.size == 0 or not shape:  # nothing taken, or entries of a scalar (a repeat: a gather)
        return None
    coordinates = np.unravel_index(positions, shape)

    def walk(c: np.ndarray, axis: int) -> tuple | None:
        """``("s", start, step, n)`` where ``c`` runs evenly along result axis ``axis`` only."""
        n = positions.shape[axis]
        first = int(c.flat[0])
        step = int(np.take(c, 1, axis=axis).flat[0]) - first if n > 1 else 1
        along = (1,) * axis + (n,) + (1,) * (positions.ndim - axis - 1)
        if step == 0 or not (c == first + step * np.arange(n).reshape(along)).all():
            return None
        return ("s", first, step, n)

    def assign(k: int, axis: int) -> list[tuple] | None:
        if k == len(shape):
            return [] if axis == positions.ndim else None
        c = coordinates[k]
        held = ("i", int(c.flat[0])) if (c == c.flat[0]).all() else None
        walked = walk(c, axis) if axis < positions.ndim else None
        for item, next_axis in ((held, axis), (walked, axis + 1)):
            if item is not None and (rest := assign(k + 1, next_axis)) is not None:
                return [item, *rest]
        return None

    items = assign(0, 0)
    return None if items is None else BasicKey(tuple(items))


class StridedTake:
    """A gather that is a strided view of the array it reads, copied: a basic index of that
    array (each axis held at one entry or walked evenly), its walked axes transposed into the
    result's order, unit axes put in, and axes along which the entries only repeat broadcast.

    :func:`~jacacc.tensor.arrays._gather` runs a gather with this form as those views and one
    copy: NumPy's ``take`` reads a C-ordered array, so on a transposed operand — what a matrix
    product or an earlier step hands out — it copied the whole operand first (a Hessian's
    gathers of 5 120 entries from a transposed ``(3, 4, 2, 4, 160)`` array took 17 µs; its
    strided copy 4 µs), and a permutation of whole blocks copies them as blocks.  Build with
    :meth:`of`.

    >>> x = np.arange(24.0).reshape(2, 3, 4)
    >>> positions = np.arange(24).reshape(2, 3, 4)[::-1, 1, ::2].T[:, None, :]   # (2, 1, 2)
    >>> take = StridedTake.of(positions, x.shape)
    >>> take, np.array_equal(take(x, np), x.reshape(-1)[positions])
    (StridedTake([1::-1, 1, 0:4:2] → (1, 0), (2, 1, 2)), True)
    """

    __slots__ = ("key", "order", "units", "shape", "repeats", "select", "_basic", "_copies")

    def __init__(self, key: tuple, order: tuple[int, ...] | None, units: tuple[int, ...] | None,
                 shape: tuple[int, ...]) -> None:
        self.key = key  #: per axis of the array read: its one entry (int) or its walk (slice)
        self.order = order  #: the transposition putting the walked axes in the result's order (None: in order)
        self.units = units  #: the shape with unit axes where the result only repeats (None: the walked shape is it)
        self.shape = shape  #: the result's shape
        self.repeats = units is not None and units != shape
        #: one axis taken by an index array (whole blocks selected), as (its position among the
        #: axes the basic index leaves, the indices); the selection is a copy already
        self.select: tuple[int, np.ndarray] | None = None
        for j, k in enumerate(key):
            if isinstance(k, np.ndarray):
                self.select = (sum(not isinstance(h, int) for h in key[:j]), k)
        self._basic = tuple(slice(None) if isinstance(k, np.ndarray) else k for k in key)
        self._copies: dict[str, object] = {}

    @classmethod
    def of(cls, positions: np.ndarray, shape: tuple[int, ...]) -> StridedTake | None:
        """The strided form of taking the flat entries ``positions`` of an array of ``shape``,
        or None where they are no strided view of it (a diagonal, an irregular selection)."""
        if positions.size == 0 or not shape:
            return None
        coordinates = np.unravel_index(positions, shape)
        key, walked_by = [], []  # per axis of the array: its index, the result axis walking it (or None)
        for c in coordinates:
            first = int(c.flat[0])
            varying = [d for d in range(positions.ndim) if positions.shape[d] > 1 and (np.diff(c, axis=d) != 0).any()]
            if not varying:
                key.append(first)
                walked_by.append(None)
                continue
            if len(varying) > 1:
                return None
            (d,) = varying
            n = positions.shape[d]
            line = c[(0,) * d + (slice(None),) + (0,) * (positions.ndim - d - 1)]
            along = (1,) * d + (n,) + (1,) * (positions.ndim - d - 1)
            if not (c == line.reshape(along)).all():
                return None
            step = int(line[1]) - first
            if (line == first + step * np.arange(n)).all():
                stop = first + step * n
                key.append(slice(first, None if stop < 0 else stop, step))
            else:  # irregular along d: a selection of whole blocks, by one index array
                key.append(line.astype(np.intp))
            walked_by.append(d)
        walks = [d for d in walked_by if d is not None]
        if len(set(walks)) < len(walks) or sum(isinstance(k, np.ndarray) for k in key) > 1:
            return None
        order = tuple(sorted(range(len(walks)), key=walks.__getitem__))
        units = tuple(n if d in walks else 1 for d, n in enumerate(positions.shape))
        return cls(tuple(key), None if order == tuple(range(len(walks))) else order,
                   None if units == tuple(n for d, n in enumerate(positions.shape) if d in walks) else units,
                   positions.shape)

    def __call__(self, x: object, xp: object, lead: int = 0) -> object:
        """The entries taken from ``x`` (its first ``lead`` axes kept whole), as a new array."""
        y = x[(slice(None),) * lead + self._basic]
        if self.select is not None:
            axis, indices = self.select[0] + lead, self._indices(xp)
            # along an axis, ``take`` copies whole blocks of a C-ordered array; of a strided one it
            # would copy all of it first, where NumPy's advanced index reads it in place
            y = y.take(indices, axis=axis) if y.flags.c_contiguous else y[(slice(None),) * axis + (indices,)]
        if self.order is not None:
            y = y.transpose(tuple(range(lead)) + tuple(lead + k for k in self.order))
        if self.units is not None:
            y = y.reshape(x.shape[:lead] + self.units)
            if self.repeats:
                y = xp.broadcast_to(y, x.shape[:lead] + self.shape)
        return y if self.select is not None and self.order is None and not self.repeats else y.copy()

    def _indices(self, xp: object) -> object:
        """The selecting indices as an array of ``xp`` (a CuPy copy made once and kept)."""
        indices = self.select[1]
        if xp is np:
            return indices
        if xp.__name__ not in self._copies:
            self._copies[xp.__name__] = xp.asarray(indices)
        return self._copies[xp.__name__]

    def __repr__(self) -> str:
        def item(k: int | slice | np.ndarray) -> str:
            if isinstance(k, np.ndarray):
                return f"<{k.size} indices>"
            if isinstance(k, int):
                return str(k)
            return f"{k.start}:{'' if k.stop is None else k.stop}:{k.step}"

        return f"StridedTake([{', '.join(map(item, self.key))}] → {self.order}, {self.shape})"


#: Model of a move's cost (seconds): a copy of ``s`` entries (a basic index, a concatenation's
#: part) and a gather of ``s`` entries (``ndarray.take``), fitted on one core at 10²-10⁴ entries
COPY_SECONDS = (0.5e-6, 0.35e-9)
GATHER_SECONDS = (1.0e-6, 1.2e-9)


def _seconds(model: tuple[float, float], entries: int) -> float:
    return model[0] + model[1] * entries


def collapse_views(roots: Sequence[Tensor], kept: frozenset[int] = frozenset()) -> list[Tensor]:
    """``roots`` with each chain of moves (a move reading moves that nothing else reads, no root), and
    each concatenation of moves of one tensor, replaced by one step from the tensor they read
    (:class:`Views`: a reshape, one basic index, or a gather) where that step costs less than
    the copies it replaces.  The values are the same entries.  The moves whose ids are in ``kept``
    stay as they are (a fused region reads them in place: :func:`jacacc.tensor.fusion.read_in_place`)."""
    views = Views()
    nodes = nodes_of(roots)
    readers = reader_counts(nodes, roots)
    new: dict[int, Tensor] = {}
    changed = False
    for node in nodes:
        args = tuple(new[id(a)] for a in node.args)
        rewritten = node if all(a is b for a, b in zip(args, node.args, strict=True)) else with_args(node, args)
        if _move(node) is not None and id(node) not in kept and any(_move(a) is not None for a in node.args):
            base, positions = views.of(node)
            if base is not node:
                # the copies made now: this move's and those of the moves only it reads
                copies = _seconds(COPY_SECONDS, node.size) + sum(
                    _seconds(COPY_SECONDS, a.size) for a in node.args if _move(a) is not None and readers[id(a)] == 1)
                one = views.gathered(new[id(base)], positions)
                kind = one.param[0] if one.kind == "op" else "reshape"
                cost = _seconds(GATHER_SECONDS, node.size) if kind == "gather" else _seconds(COPY_SECONDS, node.size)
                if cost < copies:
                    rewritten = one
        changed |= rewritten is not node
        new[id(node)] = rewritten
    return [new[id(r)] for r in roots] if changed else list(roots)
