"""Batching isomorphic nodes: many small independent steps of the same kind run as one step on a stack.

A program written as a Python loop over components or time steps — a Gaussian mixture's
per-component solve and log-determinant, the directions of a Hessian, the layers of the
same width — traces into many nodes that do the same thing to different operands of the
same shapes.  Run one by one, each costs a NumPy (or LAPACK) call of a microsecond or more
for a few dozen FLOPs; ``jax.jit`` compiles them into one executable.  This pass finds
*isomorphic* nodes — the same kind, parameter and operand shapes, at the same depth of the
DAG (the longest path from a leaf), so that none can depend on another — and replaces each
such group by one node on stacked operands (a leading batch axis, :mod:`jacacc.tensor.batching`'s
rules), each member then being one entry of that node.  Where the operands of a group are
the entries of an earlier batched node in the same order, the stack is that node itself: a
chain of batched steps runs on batches from end to end, and only its ends are stacked or
split.  This is superword-level parallelism (Larsen & Amarasinghe, PLDI 2000) on the
expression DAG, and what ``vmap`` does for a loop the user did not write as one.

Groups are batched only where a model of the calls saved against the stacks, gathers and
entries added says it pays (:func:`_worthwhile`), weighing a chain of groups whole: many
members, few operands to stack, small arrays.  Nothing about the values changes: each member's entry of the batched node is the
member's value, computed by the same operation.

Examples
--------
>>> from jacacc.tensor.expr import var, unary, add, einsum, nodes_of
>>> xs, w = [var(f"x{k}", (3, 3)) for k in range(8)], var("w", (3, 3))
>>> y = add(*(einsum("ij->", unary("exp", einsum("ij,jk->ik", x, w))) for x in xs))
>>> (z,) = batch_isomorphic([y])
>>> [sum(n.kind == "unary" for n in nodes_of([e])) for e in (y, z)]   # eight exps, then one
[8, 1]
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from jacacc.tensor.expr import Tensor, add, const, einsum, index_letters, nodes_of, reader_counts, with_args
from jacacc.tensor.views import Views, _unit_axis

__all__ = ["ADD_SECONDS_PER_ELEMENT", "CALL_SECONDS", "COPY_SECONDS_PER_ELEMENT", "ENABLED", "ENTRY_SECONDS", "FUSED_CALL_SECONDS", "MAX_ELEMENTS", "PIECE_SECONDS", "SLICE_SECONDS", "STACK_SECONDS", "UNFUSED_SECONDS",
           "batch_isomorphic"]

#: Whether programs batch isomorphic nodes (:class:`~jacacc.tensor.evaluate.Program`); ``JACACC_ISOMORPHIC=0`` turns it off.
ENABLED = os.environ.get("JACACC_ISOMORPHIC", "1").strip().lower() not in ("0", "false", "no", "off")
#: Seconds of one step's call on small arrays (NumPy's dispatch, an operator's checks), by kind.
CALL_SECONDS = {"einsum": 1.5e-6, "op": 2.0e-6, "unary": 0.8e-6, "add": 0.8e-6}
#: Seconds a step saves that a fused region would take in (:func:`jacacc.tensor.fusion.fusable`):
#: the region is one kernel call for all its steps.
FUSED_CALL_SECONDS = 0.6e-6
#: Seconds an operand a fused region would take in costs as a piece of a stack: written out by a
#: kernel of its own where it would have been computed inside its reader's region.
UNFUSED_SECONDS = 1.5e-6
#: Seconds of one call that stacks a group's operands, or gathers them from a batch, beyond the copy.
STACK_SECONDS = 2.0e-6
#: Seconds per operand stacked (each given its unit batch axis first, a step of its own).
PIECE_SECONDS = 0.3e-6
#: Seconds of taking an evenly strided part of a batch (a slice, copied).
SLICE_SECONDS = 0.6e-6
#: Seconds per element copied into a stack.
COPY_SECONDS_PER_ELEMENT = 1.0e-9
#: Seconds of taking one member's entry out of a batched node for a reader outside the chain.
ENTRY_SECONDS = 0.5e-6
#: Largest operand or result (elements) of a member: past it a call's own work dwarfs its dispatch.
MAX_ELEMENTS = 1 << 14
#: Seconds per element of one more term in a sum (:func:`_summed_products`)
ADD_SECONDS_PER_ELEMENT = 1.0e-9


def _depths(nodes: Sequence[Tensor]) -> dict[int, int]:
    """Each node's longest path from a leaf (``nodes`` operands first)."""
    depth: dict[int, int] = {}
    for node in nodes:
        depth[id(node)] = 1 + max((depth[id(a)] for a in node.args), default=-1)
    return depth


def _reads_variable(nodes: Sequence[Tensor]) -> set[int]:
    """The nodes that depend on a ``var`` (the others are constants, folded later)."""
    variable: set[int] = set()
    for node in nodes:
        if node.kind == "var" or any(id(a) in variable for a in node.args):
            variable.add(id(node))
    return variable


def _signature(node: Tensor) -> tuple | None:
    """What members of one group share, or None for a node that is never batched."""
    if node.kind not in CALL_SECONDS or node.size > MAX_ELEMENTS or any(a.size > MAX_ELEMENTS for a in node.args):
        return None
    if node.kind == "op":
        from jacacc.tensor.operators import get_operator

        if get_operator(node.param[0]).batch is None:
            return None
    return node.kind, node.param, tuple(a.shape for a in node.args)


def _groups(nodes: Sequence[Tensor], depth: dict[int, int]) -> list[list[Tensor]]:
    """Groups of two or more isomorphic nodes at one depth (:func:`_depths`), members in ``nodes``' order."""
    variable = _reads_variable(nodes)
    found: dict[tuple, list[Tensor]] = defaultdict(list)
    for node in nodes:
        if id(node) in variable and (signature := _signature(node)) is not None:
            found[(depth[id(node)], signature)].append(node)
    return [members for members in found.values() if len(members) > 1]


def _runs(sources: Sequence[tuple[Any, int] | None]) -> list[tuple[Any, int, int, int]]:
    """The operands of a column cut into runs that one step each makes: ``(batch, start, step,
    length)`` for consecutive entries of one batch at evenly rising positions, ``(None, k, 0, 1)``
    for operand ``k`` that is no entry (``sources[k]`` None).

    >>> _runs([("a", 0), ("a", 2), ("a", 4), ("b", 1), None, ("a", 5)])
    [('a', 0, 2, 3), ('b', 1, 1, 1), (None, 4, 0, 1), ('a', 5, 1, 1)]
    """
    runs: list[tuple[Any, int, int, int]] = []
    for k, source in enumerate(sources):
        if source is None:
            runs.append((None, k, 0, 1))
            continue
        batch, position = source
        if runs and runs[-1][0] is batch and batch is not None:
            _, start, step, length = runs[-1]
            if (length == 1 and position > start) or position == start + step * length:
                runs[-1] = (batch, start, position - start if length == 1 else step, length + 1)
                continue
        runs.append((batch, position, 1, 1))
    return runs


def _progression(positions: Sequence[int]) -> tuple[int, int] | None:
    """``(start, step)`` where ``positions`` rise evenly, else None.

    >>> _progression([1, 4, 7]), _progression([2]), _progression([0, 2, 1])
    ((1, 3), (2, 1), None)
    """
    step = positions[1] - positions[0] if len(positions) > 1 else 1
    if step <= 0 or any(b - a != step for a, b in zip(positions, positions[1:], strict=False)):
        return None
    return positions[0], step


def _one_batch(sources: Sequence[tuple[Any, int] | None]) -> tuple[Any, list[int]] | None:
    """``(batch, positions)`` where every operand of a column is an entry of one batch, else None."""
    if any(s is None for s in sources) or any(s[0] is not sources[0][0] for s in sources):
        return None
    return sources[0][0], [s[1] for s in sources]


def _flat_entry(node: Tensor) -> tuple[Tensor, int, int] | None:
    """``(base, k, position)`` where ``node`` is ``base[i₀, …, iₖ₋₁, :, …, :]``: entry ``position``
    of ``base`` with its ``k`` leading axes flattened into one, a batch that is already there (a
    broadcast's rows, a Hessian's directions) and that a column of such entries reads as a
    reshape, a slice or a gather instead of a stack of one piece per entry.  None otherwise."""
    if node.kind != "op" or node.param[0] != "index":
        return None
    base, items = node.args[0], dict(node.param[1])["key"].items
    k = next((n for n, item in enumerate(items) if item[0] != "i"), len(items))
    if k == 0 or len(items) != base.ndim:
        return None
    if any(item != ("s", 0, 1, n) for item, n in zip(items[k:], base.shape[k:], strict=True)):
        return None
    ints = [item[1] for item in items[:k]]
    if any(not 0 <= i < n for i, n in zip(ints, base.shape, strict=False)):
        return None
    return base, k, int(np.ravel_multi_index(ints, base.shape[:k]))


def _fusable(node: Tensor) -> bool:
    from jacacc.tensor import fusion

    return fusion.ENABLED and fusion.fusable(node)


def _call_seconds(node: Tensor) -> float:
    """What one step like ``node`` costs on its own: a NumPy call, or a share of a fused region's."""
    return FUSED_CALL_SECONDS if _fusable(node) else CALL_SECONDS[node.kind]


def _column_seconds(sources: Sequence[tuple[Any, int] | None], batch_sizes: dict[Any, int],
                    operands: Sequence[Tensor]) -> float:
    """Seconds to make a column's batched operand: from one batch nothing (the whole of it in
    order), a slice (evenly strided) or a gather; else a stack of one piece per run
    (:func:`_runs`), each elementwise operand among them written by a kernel of its own."""
    elements = operands[0].size
    copy = len(operands) * elements * COPY_SECONDS_PER_ELEMENT
    if (taken := _one_batch(sources)) is not None:
        batch, positions = taken
        if positions == list(range(batch_sizes[batch])):
            return 0.0
        return (SLICE_SECONDS if _progression(positions) else STACK_SECONDS) + copy
    stacked = _stacking_seconds(sources, operands)
    whole = _whole_batches(sources)
    return stacked if whole is None else min(stacked, _joining_seconds(whole, batch_sizes, operands))


def _stacking_seconds(sources: Sequence[tuple[Any, int] | None], operands: Sequence[Tensor]) -> float:
    """Seconds to stack a column from one piece per run (:func:`_runs`)."""
    runs = _runs(sources)
    unfused = sum(_fusable(operands[start]) for batch, start, _, _ in runs if batch is None)
    copy = len(operands) * operands[0].size * COPY_SECONDS_PER_ELEMENT
    return STACK_SECONDS + len(runs) * PIECE_SECONDS + unfused * UNFUSED_SECONDS + copy


def _joining_seconds(whole: Sequence[Any], batch_sizes: dict[Any, int], operands: Sequence[Tensor]) -> float:
    """Seconds to join ``whole`` batches and gather a column of ``operands`` from them."""
    elements = operands[0].size
    joined = sum(batch_sizes[b] for b in whole) + len(operands)
    return 2 * STACK_SECONDS + len(whole) * PIECE_SECONDS + joined * elements * COPY_SECONDS_PER_ELEMENT


def _whole_batches(sources: Sequence[tuple[Any, int] | None]) -> list[Any] | None:
    """The batches, in order of first use, where every operand of a column is an entry of one
    of several batches (else None): joined whole, one gather takes the column from them."""
    if any(s is None for s in sources):
        return None
    found: dict[int, Any] = {}
    for batch, _ in sources:
        found.setdefault(id(batch), batch)
    return list(found.values()) if len(found) > 1 else None


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, k: int) -> int:
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _summed_products(nodes: Sequence[Tensor], roots: Sequence[Tensor]) -> dict[int, list[list[Tensor]]]:
    """Per sum (by id), the groups of its terms that are alike einsums — one subscripts, one
    operand shapes, each read by that sum only — whose stacking pays: ``Σₜ Aₜ·Bₜ`` is one
    einsum of the stacked ``Aₜ`` and ``Bₜ`` with ``t`` summed (a backward pass through a loop
    accumulates a weight's gradient, or a Hessian block, as one small product per step: one
    matrix product with the steps' inner dimensions side by side instead of T products and a
    T-term sum of their outputs).  Read only by the sum, no term is an operand of another, so the
    terms are independent whatever their depths."""
    from jacacc.tensor.expr import delta_expansion

    readers = reader_counts(nodes, roots)
    found: dict[int, list[list[Tensor]]] = {}
    for node in nodes:
        if node.kind != "add":
            continue
        alike: dict[tuple, list[Tensor]] = defaultdict(list)
        for term in node.args:
            if term.kind == "einsum" and readers[id(term)] == 1 and term.size <= MAX_ELEMENTS * 16 \
                    and delta_expansion(term.param, term.args) is None:
                alike[(term.param, tuple(a.shape for a in term.args))].append(term)
        groups = [g for g in alike.values() if len(g) > 1 and _stacked_sum_pays(g)]
        if groups:
            found[id(node)] = groups
    return found


def _stacked_sum_pays(terms: list[Tensor]) -> bool:
    """Whether one einsum on stacked operands costs less than ``terms`` apart and their sum: the
    calls and the additions of their outputs saved against a stack of each operand that differs."""
    m = len(terms)
    saved = (m - 1) * (CALL_SECONDS["einsum"] + terms[0].size * ADD_SECONDS_PER_ELEMENT)
    spent = 0.0
    for column in zip(*(t.args for t in terms), strict=True):
        if any(a is not column[0] for a in column):
            spent += STACK_SECONDS + m * column[0].size * COPY_SECONDS_PER_ELEMENT
    return saved > spent


def _flat_source(node: Tensor, sizes: dict[Any, int]) -> tuple[tuple[int, int], int] | None:
    """``node``'s source as :func:`_worthwhile` keys them where it is a flat entry (:func:`_flat_entry`):
    the batch ``(id(base), k)``, its size recorded in ``sizes``."""
    if (flat := _flat_entry(node)) is None:
        return None
    base, k, position = flat
    sizes[(id(base), k)] = int(np.prod(base.shape[:k]))
    return (id(base), k), position


def _worthwhile(groups: list[list[Tensor]], nodes: Sequence[Tensor], roots: Sequence[Tensor]) -> set[int]:
    """The groups to batch: chains of groups (a group reading the members of another, in any
    order) are weighed whole, the calls they save against the stacks their operands from
    outside take, the gathers inside, and the entries read from outside; a chain that pays is
    batched whole.  (Weighed one by one, the first group of a chain pays for a stack whose
    saving comes later, and no chain would start.)"""
    group_of = {id(m): g for g, members in enumerate(groups) for m in members}
    position = {id(m): k for members in groups for k, m in enumerate(members)}
    chains = _UnionFind(len(groups))
    sizes = {g: len(members) for g, members in enumerate(groups)}
    spent = [0.0] * len(groups)
    for g, members in enumerate(groups):
        for column in zip(*(m.args for m in members), strict=True):
            first = column[0]
            if all(a is first for a in column) or all(a.kind == "const" for a in column):
                continue  # shared, or stacked once here
            sources = [(group_of[id(a)], position[id(a)]) if id(a) in group_of else _flat_source(a, sizes)
                       for a in column]
            for source in sources:
                if source is not None and not isinstance(source[0], tuple):
                    chains.union(g, source[0])
            spent[g] += _column_seconds(sources, sizes, column)
    readers: dict[int, set[int | None]] = defaultdict(set)  # member → the chains reading it (None: no group)
    for node in nodes:
        for a in node.args:
            if id(a) in group_of:
                reader = group_of.get(id(node))
                readers[id(a)].add(None if reader is None else chains.find(reader))
    for r in roots:
        readers[id(r)].add(None)
    for node in nodes:  # a sum of every member of a group reads their batch once (_Batcher._batches_summed)
        if node.kind == "add" and id(node) not in group_of:
            for g in {group_of[id(a)] for a in node.args if id(a) in group_of}:
                if {id(m) for m in groups[g]} <= {id(a) for a in node.args}:
                    for m in groups[g]:
                        readers[id(m)].discard(None)
    saved: dict[int, float] = defaultdict(float)
    cost: dict[int, float] = defaultdict(float)
    for g, members in enumerate(groups):
        chain = chains.find(g)
        saved[chain] += (len(members) - 1) * _call_seconds(members[0])
        cost[chain] += spent[g] + ENTRY_SECONDS * sum(any(c != chain for c in readers[id(m)]) for m in members)
    return {g for g in range(len(groups)) if saved[chains.find(g)] > cost[chains.find(g)]}


class _Batcher:
    """The rewrite: each node's replacement, and the batched node and position of every entry made."""

    def __init__(self, summed: dict[int, list[list[Tensor]]]) -> None:
        self.new: dict[int, Tensor] = {}
        self.entries: dict[int, tuple[Tensor, int]] = {}
        self.flattened: dict[tuple[int, int], Tensor] = {}
        self.views = Views()
        #: per sum (by id), its groups of alike products to stack (:func:`_summed_products`)
        self.summed = summed

    def source(self, operand: Tensor) -> tuple[Tensor, int] | None:
        """``(batch, position)`` of an operand that is an entry: of a batched group, or of a
        tensor's leading axes flattened (:func:`_flat_entry`); None otherwise."""
        if (entry := self.entries.get(id(operand))) is not None:
            return entry
        if (flat := _flat_entry(operand)) is None:
            return None
        from jacacc.tensor.arrays import reshape_node

        base, k, position = flat
        batch = self.flattened.get((id(base), k))
        if batch is None:
            batch = self.flattened[(id(base), k)] = reshape_node(base, (int(np.prod(base.shape[:k])), *base.shape[k:]))
        return batch, position

    def rewritten(self, node: Tensor) -> Tensor:
        """``node`` on its operands' replacements; a sum of every entry of a batch (among other
        terms) adds the batch up along its leading axis instead, and alike products among its
        terms (:func:`_summed_products`) are one product of stacked operands."""
        args = tuple(self.new[id(a)] for a in node.args)
        if node.kind == "add" and id(node) in self.summed:
            args = self._products_stacked(node, args)
        if node.kind == "add" and (summed := self._batches_summed(args)) is not args:
            return summed[0] if len(summed) == 1 else add(*summed)
        if node.kind == "op" and node.param[0] == "concatenate" \
                and (whole := self._batch_stacked(args, dict(node.param[1])["axis"])) is not None:
            return whole
        return with_args(node, args)

    def _products_stacked(self, node: Tensor, args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """``node``'s terms (replaced: ``args``) with each group of alike products one einsum
        over its operands stacked, the stacking letter summed."""
        from jacacc.tensor.expr import symbol

        position = {id(a): k for k, a in enumerate(node.args)}
        kept = list(args)
        for group in self.summed[id(node)]:
            template = group[0]
            inputs, out = template.param.split("->")
            letter = next(symbol(k) for k in range(64) if symbol(k) not in template.param)
            labels, operands = [], []
            for term_labels, column in zip(inputs.split(","), zip(*(t.args for t in group), strict=True), strict=True):
                stacked = self.column([self.new[id(a)] for a in column])
                labels.append(term_labels if stacked is None else letter + term_labels)
                operands.append(self.new[id(column[0])] if stacked is None else stacked)
            for t in group:
                kept[position[id(t)]] = None
            kept[position[id(group[0])]] = einsum(",".join(labels) + "->" + out, *operands)
        return tuple(a for a in kept if a is not None)

    def _batch_stacked(self, pieces: tuple[Tensor, ...], axis: int) -> Tensor | None:
        """The batch that ``pieces`` stack, in order, along ``axis`` (``np.stack`` of a loop's
        results): each piece an entry of one batch of length 1 along ``axis``, or a unit axis put
        there into such an entry; that batch with its leading axis moved there, or None."""
        concatenated = [self._unit_entry(piece, axis) for piece in pieces]
        if any(c is None for c in concatenated):
            return None
        batch, _, has_unit = concatenated[0]
        if len(pieces) != batch.shape[0] or any(b is not batch or p != k or u != has_unit
                                                for k, (b, p, u) in enumerate(concatenated)):
            return None
        letters = index_letters(batch.ndim)
        if has_unit:  # the entries have the unit axis: the batch's letter takes its place
            entry = letters[1:]
            return einsum(f"{letters}->{entry[:axis]}{letters[0]}{entry[axis + 1:]}", batch)
        moved = letters[1:axis + 1] + letters[0] + letters[axis + 1:]
        return batch if axis == 0 else einsum(f"{letters}->{moved}", batch)

    def _unit_entry(self, piece: Tensor, axis: int) -> tuple[Tensor, int, bool] | None:
        """``(batch, position, True)`` where ``piece`` is an entry of ``batch`` of length 1 along
        ``axis``; ``(batch, position, False)`` where it puts a unit axis at ``axis`` into such an
        entry; None otherwise."""
        if (source := self.entries.get(id(piece))) is not None:
            return (*source, True) if piece.shape[axis] == 1 else None
        if _unit_axis(piece) != axis or (source := self.entries.get(id(piece.args[0]))) is None:
            return None
        return (*source, False)

    def _batches_summed(self, terms: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        positions: dict[int, list[int]] = defaultdict(list)
        batches: dict[int, Tensor] = {}
        for term in terms:
            if (source := self.entries.get(id(term))) is not None:
                positions[id(source[0])].append(source[1])
                batches[id(source[0])] = source[0]
        whole = {b for b, taken in positions.items() if sorted(taken) == list(range(batches[b].shape[0]))}
        if not whole:
            return terms
        kept = tuple(t for t in terms if (source := self.entries.get(id(t))) is None or id(source[0]) not in whole)
        letters = index_letters(batches[next(iter(whole))].ndim)
        return kept + tuple(einsum(f"{letters}->{letters[1:]}", batches[b]) for b in whole)

    def _gathered(self, operands: Sequence[Tensor]) -> Tensor | None:
        """The column as one gather of the tensor that every operand is a view of
        (:class:`~jacacc.tensor.views.Views`; a reshape where it takes its entries in order), or
        None where they view different tensors.  One step where a stack would take one slice
        per operand: a Hessian's directions, or entries of several batches that interleave."""
        views = [self.views.of(a) for a in operands]
        base = views[0][0]
        if any(b is not base for b, _ in views) or any(b is a for (b, _), a in zip(views, operands, strict=True)):
            return None
        return self.views.gathered(base, np.stack([p for _, p in views]))

    def column(self, operands: Sequence[Tensor]) -> Tensor | None:
        """The batched operand for one argument position of a group (None: shared by all): a
        batch as it is, a slice or a gather of one, or a stack of slices and operands (:func:`_runs`)."""
        from jacacc.tensor.arrays import _advanced_index, concatenate_nodes, insert_unit_axes

        first = operands[0]
        if all(a is first for a in operands):
            return None
        if all(a.kind == "const" for a in operands):  # a stack of constants is one
            return const(np.stack([a.value for a in operands]))
        sources = [self.source(a) for a in operands]
        if (taken := _one_batch(sources)) is not None:
            batch, positions = taken
            if (stride := _progression(positions)) is not None:
                return _part(batch, *stride, len(positions))
            return _advanced_index(batch, (np.array(positions),))
        if (gathered := self._gathered(operands)) is not None:
            return gathered
        runs = _runs(sources)
        whole = _whole_batches(sources)
        sizes = {b: b.shape[0] for b in whole or ()}
        if whole is not None and _joining_seconds(whole, sizes, operands) < _stacking_seconds(sources, operands):
            offsets, start = {}, 0  # the batches joined whole, the column gathered from them
            for b in whole:
                offsets[id(b)], start = start, start + b.shape[0]
            joined = concatenate_nodes(whole, 0)
            positions = [offsets[id(b)] + p for b, p in sources]
            return joined if positions == list(range(joined.shape[0])) else \
                _advanced_index(joined, (np.array(positions),))
        pieces = [insert_unit_axes(operands[start], (0,)) if batch is None else _part(batch, start, step, length)
                  for batch, start, step, length in runs]
        return concatenate_nodes(pieces, 0)

    def batch(self, members: list[Tensor]) -> bool:
        """Replace ``members`` by the entries of one batched node (False: the operator's rule declined)."""
        from jacacc.tensor.batching import _batched_node

        template = members[0]
        operands = list(zip(*(tuple(self.new[id(a)] for a in m.args) for m in members), strict=True))
        columns = [self.column(c) for c in operands]
        flags = [c is not None for c in columns]
        args = [c if c is not None else shared[0] for c, shared in zip(columns, operands, strict=True)]
        if template.kind == "op" and not self._rule_applies(template, args, flags, len(members)):
            return False
        batched = _batched_node(template, args, flags, (len(members),))
        for position, member in enumerate(members):
            entry = _entry(batched, position)
            self.new[id(member)] = entry
            self.entries[id(entry)] = (batched, position)
        return True

    @staticmethod
    def _rule_applies(template: Tensor, args: list[Tensor], flags: list[bool], members: int) -> bool:
        """Whether the operator's batching rule takes these operands (else it would be unrolled)."""
        from jacacc.tensor.operators import get_operator

        name, options, _ = template.param
        return get_operator(name).batch((members,), tuple(args), tuple(flags), **dict(options)) is not None


def _entry(batched: Tensor, position: int) -> Tensor:
    from jacacc.tensor.arrays import BasicKey, index_node

    rest = tuple(("s", 0, 1, n) for n in batched.shape[1:])
    return index_node(batched, BasicKey((("i", position),) + rest))


def _part(batched: Tensor, start: int, step: int, length: int) -> Tensor:
    """Entries ``start, start + step, …`` (``length`` of them) of a batched node, as a batch."""
    from jacacc.tensor.arrays import BasicKey, index_node

    if start == 0 and step == 1 and length == batched.shape[0]:
        return batched
    rest = tuple(("s", 0, 1, n) for n in batched.shape[1:])
    return index_node(batched, BasicKey((("s", start, step, length),) + rest))


def batch_isomorphic(roots: Sequence[Tensor]) -> list[Tensor]:
    """``roots`` with the groups of isomorphic independent nodes that pay
    (:func:`_worthwhile`) run as one batched node each (see the module docstring).

    Parameters
    ----------
    roots : sequence of Tensor

    Returns
    -------
    list of Tensor
        The same values; groups are batched from the leaves up, so a group whose operands
        are the entries of a batched group reads that batch as it is (or a slice or gather of it).
    """
    nodes = nodes_of(roots)
    depth = _depths(nodes)
    groups = _groups(nodes, depth)
    chosen = _worthwhile(groups, nodes, roots)
    summed = _summed_products(nodes, roots)
    if not chosen and not summed:
        return list(roots)
    group_of = {id(m): groups[g] for g in chosen for m in groups[g]}
    batcher = _Batcher(summed)
    for node in sorted(nodes, key=lambda n: depth[id(n)]):  # stable: operands first within a depth too
        if id(node) in batcher.new:
            continue
        members = group_of.get(id(node))
        if members is None or not batcher.batch(members):
            for member in members or (node,):
                batcher.new[id(member)] = batcher.rewritten(member)
    return [batcher.new[id(r)] for r in roots]
