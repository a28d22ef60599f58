"""The mutable elimination graph shared by the engines and the order heuristics.

A compact dict-of-ordered-sets copy of a :class:`~jacacc.graph.CompGraph`
(NetworkX is for building and exchange, not for the hot loop).  It performs the
three elementary eliminations of Griewank & Walther (2008, ch. 9) and paper
003 §1 on structure only:

* **vertex elimination** of intermediate ``j``: every in-edge ``(i, j)`` is
  combined with every out-edge ``(j, k)``; cost ``|P(j)|·|S(j)|``;
* **front elimination** of edge ``(i, j)``: combined with every out-edge of
  ``j``; cost ``|S(j)|``;
* **back elimination** of edge ``(j, k)``: combined with every in-edge of
  ``j``; cost ``|P(j)|``.

Each combination ``(i,k) += (j,k)·(i,j)`` is *absorption* when ``(i, k)``
already exists and *fill-in* otherwise.  An intermediate left without
predecessors or successors lies on no path any more and is removed with its
remaining edges.  An optional recorder (:class:`~jacacc.schedule.ScheduleBuilder`)
is told about every multiplication; order finders run without one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Literal, NamedTuple, Protocol

from jacacc.errors import OrderError
from jacacc.graph import CompGraph

Node = Hashable
Edge = tuple[Node, Node]
Direction = Literal["front", "back"]


class EdgeStep(NamedTuple):
    """One step of an edge elimination sequence: an edge and a direction."""

    edge: Edge
    direction: Direction

    def __str__(self) -> str:
        return f"{self.direction}({self.edge[0]}→{self.edge[1]})"


class Recorder(Protocol):
    def multiply(self, target: Edge, left: Edge, right: Edge, *, new: bool) -> None: ...

    def remove(self, edge: Edge) -> None: ...


class EdgeAlgebra(Recorder, Protocol):
    """What an edge carries, seen by the engines: a :class:`Recorder` that keeps
    each edge's value and prices a combination before it is made.

    The scalar core needs none: a scalar product costs one multiplication, so
    the cost of eliminating ``j`` is the Markowitz degree ``|P(j)|·|S(j)|``.
    Where an edge carries a tensor (paper 002: an Einstein factor, see
    :mod:`jacacc.tensor.factor`) the product ``(i, k) += (j, k)·(i, j)`` is an
    einsum whose cost is its FLOP count on the stored shapes.  A graph whose
    edges carry such values offers ``graph.edge_algebra()``; every
    :class:`EliminationGraph` built on it (the engines' and the order
    heuristics') then tracks the values and reports costs in the algebra's
    unit, so the same engines and order methods serve both.
    """

    def combine_cost(self, i: Node, j: Node, k: Node, *, new: bool) -> int: ...

    def copy(self) -> EdgeAlgebra: ...


class EliminationGraph:
    """Structural state of an elimination in progress.

    ``preds[v]`` / ``succs[v]`` are dicts used as insertion-ordered sets so
    that every engine and heuristic is deterministic.  ``rank[v]`` is the
    vertex's position in the graph's topological order; heuristics use it to
    break ties toward forward (low rank) or reverse (high rank) mode.
    """

    def __init__(self, graph: CompGraph, recorder: Recorder | None = None) -> None:
        # a graph with non-scalar edges brings its algebra; a recorder passed in
        # that is one (the tensor derivative's) is used as it
        if hasattr(recorder, "combine_cost"):
            self.algebra: EdgeAlgebra | None = recorder  # type: ignore[assignment]
        elif hasattr(graph, "edge_algebra"):
            if recorder is not None:
                raise TypeError("a graph with an edge algebra records through it; pass no other recorder")
            self.algebra = graph.edge_algebra()
            recorder = self.algebra
        else:
            self.algebra = None
        self.inputs = graph.inputs
        self.outputs = graph.outputs
        self.rank: dict[Node, int] = {v: i for i, v in enumerate(graph.topological_order)}
        self.preds: dict[Node, dict[Node, None]] = {v: {} for v in graph.topological_order}
        self.succs: dict[Node, dict[Node, None]] = {v: {} for v in graph.topological_order}
        for u, v in graph.edges:
            self.succs[u][v] = None
            self.preds[v][u] = None
        # ordered set of the intermediates not yet eliminated
        self.intermediates: dict[Node, None] = dict.fromkeys(graph.intermediates)
        self.recorder = recorder
        # vertices whose predecessor / successor sets changed; heuristics read
        # and clear these to refresh only the keys that can have changed
        self.changed_preds: set[Node] = set()
        self.changed_succs: set[Node] = set()
        self.created_edges: list[Edge] = []

    def copy(self) -> EliminationGraph:
        """An independent copy of the state (its algebra's values copied too; no recorder otherwise)."""
        other = object.__new__(EliminationGraph)
        other.inputs, other.outputs, other.rank = self.inputs, self.outputs, self.rank
        other.preds = {v: dict(p) for v, p in self.preds.items()}
        other.succs = {v: dict(s) for v, s in self.succs.items()}
        other.intermediates = dict(self.intermediates)
        other.algebra = None if self.algebra is None else self.algebra.copy()
        other.recorder = other.algebra
        other.changed_preds, other.changed_succs = set(self.changed_preds), set(self.changed_succs)
        other.created_edges = list(self.created_edges)
        return other

    # ------------------------------------------------------------------ queries
    @property
    def done(self) -> bool:
        """True once no intermediate is left: the graph is bipartite."""
        return not self.intermediates

    def is_intermediate(self, v: Node) -> bool:
        return v in self.intermediates

    def has_edge(self, u: Node, v: Node) -> bool:
        return u in self.succs and v in self.succs[u]

    def edges(self) -> Iterator[Edge]:
        for u, out in self.succs.items():
            for v in out:
                yield (u, v)

    def markowitz(self, j: Node) -> int:
        """The cost of eliminating vertex ``j`` now: the Markowitz degree
        ``|P(j)|·|S(j)|`` of scalar edges, or the sum of the edge algebra's costs
        of its combinations (FLOPs of tensor edges)."""
        if self.algebra is None:
            return len(self.preds[j]) * len(self.succs[j])
        succs = self.succs[j]
        return sum(self.algebra.combine_cost(i, j, k, new=k not in self.succs[i]) for i in self.preds[j] for k in succs)

    def vertex_fill_in(self, j: Node) -> int:
        """Number of new edges vertex elimination of ``j`` would create."""
        succ = self.succs[j]
        return sum(1 for i in self.preds[j] for k in succ if k not in self.succs[i])

    def step_cost(self, step: EdgeStep) -> int:
        """Multiplications of a front (``|S(j)|``) or back (``|P(j)|``) elimination."""
        (u, v), direction = step
        return len(self.succs[v]) if direction == "front" else len(self.preds[u])

    def step_fill_in(self, step: EdgeStep) -> int:
        """Number of new edges an edge-elimination step would create."""
        (u, v), direction = step
        if direction == "front":
            return sum(1 for k in self.succs[v] if k not in self.succs[u])
        return sum(1 for i in self.preds[u] if v not in self.succs[i])

    def edge_steps(self) -> Iterator[EdgeStep]:
        """Every elimination step valid now: front on edges into an intermediate,
        back on edges out of one."""
        for u, out in self.succs.items():
            for v in out:
                if v in self.intermediates:
                    yield EdgeStep((u, v), "front")
                if u in self.intermediates:
                    yield EdgeStep((u, v), "back")

    def check_step(self, step: EdgeStep) -> str | None:
        """Why ``step`` is not valid now, or None when it is."""
        (u, v), direction = step
        if not self.has_edge(u, v):
            return f"edge ({u!r} → {v!r}) is not in the graph at this point"
        if direction == "front" and v not in self.intermediates:
            return f"front elimination of ({u!r} → {v!r}) needs an intermediate target, {v!r} is not one"
        if direction == "back" and u not in self.intermediates:
            return f"back elimination of ({u!r} → {v!r}) needs an intermediate source, {u!r} is not one"
        return None

    # ------------------------------------------------------------------ eliminations
    def eliminate_vertex(self, j: Node) -> set[Node]:
        """Eliminate intermediate ``j``; return the vertices whose neighbourhood changed."""
        preds, succs = list(self.preds[j]), list(self.succs[j])
        for i in preds:
            for k in succs:
                self._combine(i, j, k)
        self._remove_vertex(j)
        return set(preds) | set(succs)

    def front_eliminate(self, i: Node, j: Node) -> set[Node]:
        """Front-eliminate edge ``(i, j)``; return the vertices whose neighbourhood changed."""
        succs = list(self.succs[j])
        for k in succs:
            self._combine(i, j, k)
        self._remove_edge(i, j)
        touched = {i, j, *succs}
        if not self.preds[j]:
            self._remove_vertex(j)
        return touched

    def back_eliminate(self, j: Node, k: Node) -> set[Node]:
        """Back-eliminate edge ``(j, k)``; return the vertices whose neighbourhood changed."""
        preds = list(self.preds[j])
        for i in preds:
            self._combine(i, j, k)
        self._remove_edge(j, k)
        touched = {j, k, *preds}
        if not self.succs[j]:
            self._remove_vertex(j)
        return touched

    def apply(self, step: EdgeStep) -> set[Node]:
        (u, v), direction = step
        return self.front_eliminate(u, v) if direction == "front" else self.back_eliminate(u, v)

    # ------------------------------------------------------------------ internals
    def _combine(self, i: Node, j: Node, k: Node) -> None:
        """(i, k) += (j, k) · (i, j): absorption if (i, k) exists, else fill-in."""
        new = k not in self.succs[i]
        if self.recorder is not None:
            self.recorder.multiply((i, k), (j, k), (i, j), new=new)
        if new:
            self.succs[i][k] = None
            self.preds[k][i] = None
            self.changed_succs.add(i)
            self.changed_preds.add(k)
            self.created_edges.append((i, k))

    def _remove_edge(self, u: Node, v: Node) -> None:
        del self.succs[u][v]
        del self.preds[v][u]
        self.changed_succs.add(u)
        self.changed_preds.add(v)
        if self.recorder is not None:
            self.recorder.remove((u, v))

    def _remove_vertex(self, j: Node) -> None:
        for i in list(self.preds[j]):
            self._remove_edge(i, j)
        for k in list(self.succs[j]):
            self._remove_edge(j, k)
        del self.preds[j], self.succs[j], self.intermediates[j]


def read_sequence(sequence: Any, what: str, as_step: Callable[[Any, int], Any]) -> tuple:
    """Normalise an elimination sequence item by item, refusing what is not a list."""
    if isinstance(sequence, (str, bytes)) or not isinstance(sequence, Sequence):
        raise OrderError(f"a {what} elimination sequence is a list, got {type(sequence).__name__}")
    return tuple(as_step(item, pos) for pos, item in enumerate(sequence))


def apply_checked(steps: Sequence[Any], check: Callable[[Any], str | None], apply: Callable[[Any], Any]) -> None:
    """Apply ``steps`` in turn, refusing the first one ``check`` finds invalid at its turn."""
    for pos, step in enumerate(steps):
        problem = check(step)
        if problem is not None:
            raise OrderError(f"step #{pos} ({step}): {problem}")
        apply(step)
