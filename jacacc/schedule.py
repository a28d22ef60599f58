"""The Schedule IR: a straight-line program of multiplications over edge-value slots.

An elimination (vertex, edge or face; paper 003 §1) applies the chain rule one
multiplication at a time.  A :class:`Schedule` records those multiplications:

* slots ``0 .. n_edges-1`` hold the partials of the graph's edges, in
  ``graph.edges`` order;
* each :class:`Op` multiplies two slots and either **creates** a new slot
  (*fill-in*: a new edge appears in the graph) or **accumulates** into an
  existing one (*absorption*: the product is added to an existing edge);
* once no intermediate is left, every remaining edge joins an input to an
  output and its slot holds one Jacobian entry.

``mults`` is the number of ops and ``adds`` the number of accumulating ops:
costs are counted from the schedule itself, never estimated beside it.

Each product is written ``left * right`` with ``left`` the *later* factor
(∂k/∂j) and ``right`` the *earlier* one (∂j/∂i): for scalars the order is
immaterial, for the tensor-valued edges of the tensor-level systems it is the
matrix product order.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc.errors import GraphError

__all__ = ["Add", "Op", "OpCounter", "Schedule", "ScheduleBuilder", "SplitAdd"]

Node = Hashable
Edge = tuple[Node, Node]


@dataclass(frozen=True)
class Op:
    """One scalar multiplication ``slot[target] (+)= slot[left] * slot[right]``."""

    target: int
    left: int
    right: int
    accumulate: bool

    def __str__(self) -> str:
        sign = "+=" if self.accumulate else "="
        return f"s{self.target} {sign} s{self.left} * s{self.right}"


@dataclass(frozen=True)
class Add:
    """One scalar addition ``slot[target] += slot[source]``: a *merge* of two
    parallel edges (face elimination), no multiplication."""

    target: int
    source: int

    def __str__(self) -> str:
        return f"s{self.target} += s{self.source}"


@dataclass(frozen=True)
class SplitAdd:
    """One scalar addition into a new slot, ``slot[target] = slot[first] + slot[second]``:
    a copy of a dual-graph vertex that absorbs a product while the original
    keeps its other neighbours (the Griewank–Walther split variants of face
    elimination, :mod:`jacacc.eliminate.face`)."""

    target: int
    first: int
    second: int

    def __str__(self) -> str:
        return f"s{self.target} = s{self.first} + s{self.second}"


class Schedule:
    """A verified-by-construction straight-line Jacobian program.

    Parameters
    ----------
    inputs, outputs : sequence of node ids
        Column and row order of the Jacobian.
    edges : sequence of (u, v)
        The graph's edges; edge ``i`` is slot ``i``.
    slot_edges : sequence of (u, v)
        For every slot, the edge whose value it holds (for fill-in slots, the
        edge created by the fill-in).
    ops : sequence of Op, Add or SplitAdd
    result : dict mapping (output, input) to a slot
        The slot holding each structurally nonzero Jacobian entry.
    mode, order : optional metadata (the elimination that produced it).

    Examples
    --------
    >>> from jacacc.graph import CompGraph
    >>> from jacacc.eliminate import eliminate
    >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "v", 2.0), ("v", "y", 3.0)])
    >>> s = eliminate(g, ["v"], mode="vertex")
    >>> print(s.listing())
    s2 = s1 * s0    # (x → y) = (v → y) * (x → v)
    >>> s.evaluate(g.partial_array())
    array([[6.]])
    """

    def __init__(
        self,
        inputs: Sequence[Node],
        outputs: Sequence[Node],
        edges: Sequence[Edge],
        slot_edges: Sequence[Edge],
        ops: Sequence[Op],
        result: dict[tuple[Node, Node], int],
        *,
        mode: str | None = None,
        order: Sequence[Any] | None = None,
    ) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.edges = tuple(edges)
        self.slot_edges = tuple(slot_edges)
        self.ops = tuple(ops)
        self.result = dict(result)
        self.mode = mode
        self.order = None if order is None else tuple(order)
        # The result's nonzeros as coordinates (rows, cols, slots), in the order NumPy's
        # nonzero gives a dense index: a dense (outputs × inputs) index would cost as much
        # memory as a dense Jacobian for every plan, evaluated or not (10^4 × 10^4: 800 MB).
        row = {o: r for r, o in enumerate(self.outputs)}
        col = {i: c for c, i in enumerate(self.inputs)}
        coords = sorted((row[o] * len(self.inputs) + col[i], slot) for (o, i), slot in self.result.items())
        flat = np.array([c for c, _ in coords], dtype=np.int64)
        self._result_rows, self._result_cols = np.divmod(flat, max(len(self.inputs), 1))
        self._result_slot_ids = np.array([slot for _, slot in coords], dtype=np.int64)

    @property
    def n_slots(self) -> int:
        return len(self.slot_edges)

    @property
    def mults(self) -> int:
        """Scalar multiplications: one per :class:`Op`."""
        return sum(isinstance(op, Op) for op in self.ops)

    @property
    def adds(self) -> int:
        """Scalar additions: one per accumulating (absorbing) :class:`Op`, per :class:`Add`
        (merge) and per :class:`SplitAdd` (split absorption)."""
        return sum(isinstance(op, (Add, SplitAdd)) or op.accumulate for op in self.ops)

    @property
    def fill_ins(self) -> int:
        """Ops that create a new slot (a new edge or dual-graph vertex)."""
        return sum(isinstance(op, Op) and not op.accumulate for op in self.ops)

    @property
    def result_slots(self) -> np.ndarray:
        """Array ``(len(outputs), len(inputs))`` of result slots, ``-1`` for a structural zero."""
        index = np.full((len(self.outputs), len(self.inputs)), -1, dtype=np.int64)
        index[self._result_rows, self._result_cols] = self._result_slot_ids
        return index

    def evaluate(self, partials: Any, zero_edges: Iterable[int] = ()) -> np.ndarray:
        """Run the schedule with NumPy, vectorized over a batch of points.

        Parameters
        ----------
        partials : array_like of shape ``(..., n_edges)``
            Edge values in ``edges`` order; leading axes are a batch.
        zero_edges : iterable of int, optional
            Positions of edges whose partial is structurally zero (a traced
            ``stop_gradient`` or predicate, whatever its value says): every
            product with one of them is skipped, as the compiled kernels skip
            it, so a zero never meets an infinite partial (``0 · inf`` would
            be NaN where the derivative is 0, as in JAX's symbolic zeros).

        Returns
        -------
        numpy.ndarray of shape ``(..., len(outputs), len(inputs))``

        Examples
        --------
        >>> from jacacc import CompGraph, optimize
        >>> g = CompGraph.from_edges(["x"], ["y"], [("x", "v", 0.0), ("v", "y", 1.0)])
        >>> schedule = optimize(g, method="markowitz").schedule
        >>> with np.errstate(invalid="ignore"):  # 0 · inf
        ...     schedule.evaluate([0.0, np.inf]), schedule.evaluate([0.0, np.inf], zero_edges=[0])
        (array([[nan]]), array([[0.]]))
        """
        values = np.asarray(partials, dtype=float)
        if values.ndim == 0 or values.shape[-1] != len(self.edges):
            raise GraphError(
                f"partials must have shape (..., {len(self.edges)}) (one value per edge), got {values.shape}"
            )
        batch = values.shape[:-1]
        slots = np.empty((self.n_slots,) + batch)
        slots[: len(self.edges)] = np.moveaxis(values, -1, 0)
        zero = sorted(set(zero_edges))
        if zero:
            self._run_skipping_zeros(slots, zero)
        else:
            self._run(slots)
        jac = np.zeros(batch + (len(self.outputs), len(self.inputs)))
        if self._result_rows.size:
            jac[..., self._result_rows, self._result_cols] = np.moveaxis(slots[self._result_slot_ids], 0, -1)
        return jac

    def _run_skipping_zeros(self, slots: np.ndarray, zero_edges: list[int]) -> None:
        """The ops on ``slots`` with structural zeros propagated: a product with a zero
        factor is zero and not computed, a sum with a zero term is the other term."""
        if zero_edges[0] < 0 or zero_edges[-1] >= len(self.edges):
            raise GraphError(f"zero_edges must be edge positions 0 … {len(self.edges) - 1}, got {zero_edges}")
        zero = [False] * self.n_slots
        for e in zero_edges:
            zero[e] = True
            slots[e] = 0.0
        for op in self.ops:
            if isinstance(op, Add):
                if not zero[op.source]:
                    slots[op.target] = slots[op.source] if zero[op.target] else slots[op.target] + slots[op.source]
                    zero[op.target] = False
            elif isinstance(op, SplitAdd):
                first, second = zero[op.first], zero[op.second]
                if first and second:
                    slots[op.target] = 0.0
                else:
                    slots[op.target] = (slots[op.second] if first else slots[op.first] if second
                                        else slots[op.first] + slots[op.second])
                zero[op.target] = first and second
            elif zero[op.left] or zero[op.right]:
                if not op.accumulate:
                    slots[op.target] = 0.0
                    zero[op.target] = True
            elif op.accumulate and not zero[op.target]:
                slots[op.target] += slots[op.left] * slots[op.right]
            else:
                slots[op.target] = slots[op.left] * slots[op.right]
                zero[op.target] = False

    def _run(self, slots: np.ndarray) -> None:
        for op in self.ops:
            if isinstance(op, Add):
                slots[op.target] += slots[op.source]
            elif isinstance(op, SplitAdd):
                slots[op.target] = slots[op.first] + slots[op.second]
            elif op.accumulate:
                slots[op.target] += slots[op.left] * slots[op.right]
            else:
                slots[op.target] = slots[op.left] * slots[op.right]

    def listing(self) -> str:
        """The schedule as straight-line code, one op per line, edges in comments."""
        lines = []
        for op in self.ops:
            if isinstance(op, Add):
                t, a = self.slot_edges[op.target], self.slot_edges[op.source]
                lines.append(f"{op!s:<15} # {_edge(t)} += {_edge(a)}")
                continue
            if isinstance(op, SplitAdd):
                t, a, b = (self.slot_edges[s] for s in (op.target, op.first, op.second))
                lines.append(f"{op!s:<15} # {_edge(t)} = {_edge(a)} + {_edge(b)}")
                continue
            t, a, b = (self.slot_edges[s] for s in (op.target, op.left, op.right))
            lines.append(f"{op!s:<15} # {_edge(t)} {'+=' if op.accumulate else '='} {_edge(a)} * {_edge(b)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"Schedule(mode={self.mode!r}, mults={self.mults}, adds={self.adds}, "
            f"fill_ins={self.fill_ins}, slots={self.n_slots})"
        )


def _edge(e: Edge) -> str:
    # a fill-in vertex of face elimination carries a third field, its creation index
    return f"({e[0]} → {e[1]})" + (f"#{e[2]}" if len(e) > 2 else "")


class ScheduleBuilder:
    """Records the multiplications an elimination performs, as a Schedule.

    This is the *recorder* interface the elimination engines talk to: they
    say which edge is the product of which two edges; the builder assigns
    slots.  A recorder for tensor-valued edges would implement the same two
    methods and cost products by shape.
    """

    def __init__(self, inputs: Sequence[Node], outputs: Sequence[Node], edges: Sequence[Edge]) -> None:
        self._inputs = tuple(inputs)
        self._outputs = tuple(outputs)
        self._edges = tuple(edges)
        self._slot_edges: list[Edge] = list(self._edges)
        self._slot: dict[Edge, int] = {e: i for i, e in enumerate(self._edges)}
        self._ops: list[Op | Add | SplitAdd] = []

    def multiply(self, target: Edge, left: Edge, right: Edge, *, new: bool) -> None:
        """Record ``target (+)= left * right``; ``new`` marks a fill-in."""
        if new:
            slot = len(self._slot_edges)
            self._slot_edges.append(target)
        else:
            slot = self._slot[target]
        self._ops.append(Op(slot, self._slot[left], self._slot[right], accumulate=not new))
        self._slot[target] = slot

    def add(self, target: Edge, source: Edge) -> None:
        """Record ``target += source`` (a merge of parallel edges)."""
        self._ops.append(Add(self._slot[target], self._slot[source]))

    def sum(self, target: Edge, first: Edge, second: Edge) -> None:
        """Record a new slot ``target = first + second`` (a split absorption)."""
        self._slot_edges.append(target)
        self._ops.append(SplitAdd(len(self._slot_edges) - 1, self._slot[first], self._slot[second]))
        self._slot[target] = len(self._slot_edges) - 1

    def remove(self, edge: Edge) -> None:
        """The edge left the graph; its slot is no longer addressable by name."""
        del self._slot[edge]

    def build(self, *, mode: str, order: Sequence[Any]) -> Schedule:
        """Finish once the graph is bipartite: each edge still named is a Jacobian entry."""
        inputs, outputs = set(self._inputs), set(self._outputs)
        result = {}
        for key, slot in self._slot.items():
            u, v = key[0], key[1]  # an edge (u, v), or a face-elimination vertex (u, v, index)
            if u not in inputs or v not in outputs or (v, u) in result:  # an engine bug, not a user error
                raise AssertionError(f"edge ({u!r} → {v!r}) survives elimination or is not unique")
            result[(v, u)] = slot
        return Schedule(
            self._inputs, self._outputs, self._edges, self._slot_edges, self._ops, result, mode=mode, order=order
        )


class OpCounter:
    """A recorder that only counts: multiplications, additions and fill-ins.

    For cost studies on graphs too large to keep every op of the schedule.
    """

    def __init__(self) -> None:
        self.mults = 0
        self.adds = 0
        self.fill_ins = 0

    def multiply(self, target: Edge, left: Edge, right: Edge, *, new: bool) -> None:
        self.mults += 1
        if new:
            self.fill_ins += 1
        else:
            self.adds += 1

    def add(self, target: Edge, source: Edge) -> None:
        self.adds += 1

    def sum(self, target: Edge, first: Edge, second: Edge) -> None:
        self.adds += 1

    def remove(self, edge: Edge) -> None:
        pass
