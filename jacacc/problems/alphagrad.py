"""The AlphaGrad tasks as graphax builds them, and graphax's cost of eliminating their vertices.

AlphaGrad (Lohoff & Neftci, NeurIPS 2024) learned vertex-elimination orders
on ten tasks; the counts it compares with (forward, reverse, minimal
Markowitz with ties to the lowest index) are those of the graphs graphax's
interpreter builds from each task's jaxpr: one vertex per equation.  The
graphs are stored under ``jacacc/problems/data/alphagrad/`` (written by
``experiments/alphagrad_graphs.py`` from the functions of
:mod:`jacacc.problems.alphagrad_functions`), so this module needs no JAX.

Zoo entries ``graphax_<task>`` (tag ``"graphax"``) give the structural graph
(:class:`~jacacc.graph.CompGraph` without partials) of each task.  For the
scalar tasks that is the whole story: jacacc's vertex elimination of it costs
exactly the published counts.  Where vertices are vectors or matrices
graphax prices an elimination by the *kinds* of the edges (dense, diagonal,
Kronecker δ, copy; see :data:`KIND_TIES`) and their shapes: :func:`graphax_cost`
replays an order under that model, :func:`graphax_order` gives graphax's
forward, reverse and minimal-Markowitz orders.  The zoo graph of such a task
leaves out the vertices on no input→output path (constants, a sliced-off
``stop_gradient``), which graphax keeps and :func:`graphax_cost` counts.

:data:`PUBLISHED` holds AlphaGrad's table; :data:`TASKS` the tasks whose
graphs are stored (BlackScholes_Jacobian, the Jacobian of Black–Scholes
computed by graphax's own ``jacve``, is not among them).

Examples
--------
>>> from jacacc import optimize
>>> from jacacc.problems import get
>>> g = get("graphax_PropaneCombustion").graph()
>>> len(g.intermediates), optimize(g, mode="vertex", method="forward").mults
(51, 151)
>>> graphax_cost("MLP", graphax_order("MLP", "reverse"))
392
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Hashable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from jacacc.errors import JacaccError
from jacacc.graph import CompGraph, _reachable
from jacacc.problems.base import Problem, register

__all__ = [
    "DATA_DIR",
    "KIND_TIES",
    "PUBLISHED",
    "TASKS",
    "GraphaxElimination",
    "graphax_cost",
    "graphax_order",
    "live_graph",
    "published_order",
    "task_data",
]

DATA_DIR = Path(__file__).resolve().parent / "data" / "alphagrad"

# AlphaGrad's table (alphagrad commit 0431887, alphazero/config/joint.yaml and the
# evaluation notebooks): vertices (intermediates), forward, reverse, minimal
# Markowitz with ties to the lowest index, and AlphaGrad's best order.
PUBLISHED: dict[str, tuple[int, int, int, int, int]] = {
    "RoeFlux_1d": (98, 620, 364, 407, 320),
    "RoeFlux_3d": (143, 1556, 979, 938, 811),
    "RobotArm_6DOF": (108, 397, 301, 288, 231),
    "HumanHeartDipole": (78, 240, 172, 194, 148),
    "PropaneCombustion": (51, 151, 90, 111, 88),
    "BlackScholes_Jacobian": (129, 545, 572, 350, 312),
    "f": (75, 17728, 8859, 12083, 6374),
    "g": (85, 632, 566, 451, 417),
    "MLP": (38, 10930, 392, 4796, 389),
    "Transformer": (90, 135010, 4688, 51869, 4656),
}

# the tasks whose graphs are stored, in PUBLISHED's order
TASKS: tuple[str, ...] = tuple(t for t in PUBLISHED if t != "BlackScholes_Jacobian")

# Tasks whose vertices are all scalars (1×1): there graphax's cost is the plain
# Markowitz count Σ|P(j)|·|S(j)| and jacacc's own engines reproduce it.
SCALAR_TASKS: tuple[str, ...] = ("RoeFlux_1d", "RobotArm_6DOF", "HumanHeartDipole", "PropaneCombustion", "g")


def dumps(data: dict[str, Any]) -> str:
    """The stored form of a task's data: one vertex or edge per line, diff-friendly."""
    head = {k: v for k, v in data.items() if k not in ("vertices", "edges")}
    lines = ["{"]
    lines += [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    for key in ("vertices", "edges"):
        rows = ",\n".join(f"    {json.dumps(row)}" for row in data[key])
        lines.append(f'  "{key}": [\n{rows}\n  ]' + ("," if key == "vertices" else ""))
    return "\n".join(lines) + "\n}\n"


@cache
def _load(name: str) -> str:
    path = DATA_DIR / f"{name}.json"
    if not path.exists():
        raise JacaccError(f"no stored graph for task {name!r}; tasks: {', '.join(TASKS)}")
    return path.read_text()


def task_data(name: str) -> dict[str, Any]:
    """The stored graph of task ``name``: ``inputs``, ``outputs``, ``vertices``
    (``[id, primitive, [rows, cols]]`` in equation order) and ``edges``
    (``[source, target, kind, [out1, out2, in1, in2]]``); see
    :func:`jacacc.problems.alphagrad_functions.graphax_graph`."""
    return json.loads(_load(name))


def live_graph(data: dict[str, Any]) -> CompGraph:
    """The structural :class:`CompGraph` of ``data``, without the vertices on no input→output path.

    graphax keeps such vertices (a constant such as ``jnp.zeros``, a value
    whose only use is a ``stop_gradient``); jacacc's graphs may not hold them.
    The vertices keep graphax's equation order, so that ties broken toward
    the lowest index break as graphax breaks them.
    """
    succs: defaultdict[str, list[str]] = defaultdict(list)
    preds: defaultdict[str, list[str]] = defaultdict(list)
    for source, target, *_ in data["edges"]:
        succs[source].append(target)
        preds[target].append(source)
    live = _reachable(succs, data["inputs"]) & _reachable(preds, data["outputs"])
    live |= set(data["inputs"]) | set(data["outputs"])
    nodes = [*data["inputs"], *(v[0] for v in data["vertices"] if v[0] in live)]
    edges = [(s, t) for s, t, *_ in data["edges"] if s in live and t in live]
    return CompGraph.from_edges(data["inputs"], data["outputs"], edges, nodes=nodes)


# ============================================================================ graphax's cost model
# An edge (j → k) carries ∂k/∂j as a tensor with indices (1, 2) of k's shape and (3, 4)
# of j's (scalars 1×1, vectors n×1).  Its kind says which output index equals which
# input index, and whether that diagonal holds arbitrary values ("D"), ones (a Kronecker
# δ, "K") or one constant ("C").  -1 (convert_element_type) and 11 (reshape, slice,
# concatenate) are copies whatever the shapes.
KIND_TIES: dict[int, tuple[tuple[int, int, str], ...]] = {
    1: (),
    2: ((1, 3, "D"),), 3: ((2, 4, "D"),), 4: ((1, 4, "D"),), 5: ((2, 3, "D"),),
    6: ((1, 3, "D"), (2, 4, "D")), 7: ((1, 4, "D"), (2, 3, "D")),
    -2: ((1, 3, "K"),), -3: ((2, 4, "K"),), -4: ((1, 4, "K"),), -5: ((2, 3, "K"),),
    -6: ((1, 3, "K"), (2, 4, "K")), -7: ((1, 4, "K"), (2, 3, "K")),
    8: ((1, 3, "K"), (2, 4, "D")), 9: ((1, 4, "K"), (2, 3, "D")),
    -8: ((1, 3, "D"), (2, 4, "K")), -9: ((1, 4, "D"), (2, 3, "K")),
    10: ((1, 3, "C"), (2, 4, "C")), -10: ((1, 4, "C"), (2, 3, "C")),
}
_KIND_OF = {frozenset(t): k for k, t in KIND_TIES.items()}
COPY, RESHAPE = -1, 11
_FREE = frozenset({-1, 11, -6, -7})  # copies: multiplying through them costs nothing

# graphax's tables (its CONTRACTION_MAP, MUL_SPARSITY_MAP, ADD_SPARSITY_MAP) agree with
# the rules below except for these pairs (in-edge kind, out-edge kind); we follow graphax.
# None of them occurs in the nine stored tasks.  Masks list the factors counted among
# (k1, k2, j1, j2, i1, i2), see _mask.
_GRAPHAX_MASKS: dict[tuple[int, int], str] = {
    (-10, -9): "110000", (-10, -8): "110000", (-4, -9): "100000", (-4, 9): "110000",
    (-3, -10): "010011", (-3, 7): "110011", (2, -5): "110111", (3, 7): "110011", (4, -9): "110000",
    (4, 9): "110000", (8, -5): "110001", (9, -5): "110010", (10, -9): "110000", (10, -8): "110000",
}
_GRAPHAX_PRODUCTS: dict[tuple[int, int], int] = {
    (-9, -8): 7, (-9, 2): 5, (-9, 3): 4, (-9, 4): 3, (-9, 5): 2, (-9, 8): -9, (-9, 9): 6, (-8, -9): -9,
    (-8, 9): 7, (-7, -10): 10, (-7, 10): -10, (-6, -10): -10, (-6, 10): 10, (2, -4): 4, (3, -4): 1,
    (8, -9): 7, (8, -4): -4, (8, 9): 9, (9, -9): -9, (9, -8): 9, (9, 2): 5, (9, 3): 4, (9, 4): 3,
    (9, 5): 2, (9, 8): 7,
}
_GRAPHAX_SUMS: dict[tuple[int, int], int] = {(8, 10): 1, (10, -6): 10}


def _classes(inner: int, outer: int) -> tuple[list[list[int]], list[tuple[int, int, str]]]:
    """Index classes of the product of an in-edge (i → j, kind ``inner``) and an out-edge
    (j → k, kind ``outer``) over the six indices k1 k2 j1 j2 i1 i2 (0 … 5)."""
    links = [(o - 1, p - 1, kind) for o, p, kind in KIND_TIES[outer]]  # k_o = j_(p-2)
    links += [(o + 1, p + 1, kind) for o, p, kind in KIND_TIES[inner]]  # j_o = i_(p-2)
    parent = list(range(6))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b, _ in links:
        parent[find(b)] = find(a)
    groups: dict[int, list[int]] = {}
    for n in range(6):
        groups.setdefault(find(n), []).append(n)
    return list(groups.values()), links


def _mask(inner: int, outer: int) -> tuple[int, ...]:
    """Which of the factors (k1, k2, j1, j2, i1, i2) the product's multiplications count.

    Every class of equal indices counts once, through a k index if it has one,
    else an i index; a class that joins k to i through ones only (Kronecker δ
    or a constant) counts not at all: the product does not vary along it.
    """
    if (inner, outer) in _GRAPHAX_MASKS:
        return tuple(int(c) for c in _GRAPHAX_MASKS[inner, outer])
    if inner in _FREE or outer in _FREE:
        return (0,) * 6
    groups, links = _classes(inner, outer)
    mask = [0] * 6
    for group in groups:
        kinds = {kind for a, b, kind in links if a in group}
        if kinds and "D" not in kinds and min(group) < 2 and max(group) > 3:
            continue
        mask[next((n for n in group if n < 2), next((n for n in group if n > 3), group[0]))] = 1
    return tuple(mask)


@cache
def _product_kind(inner: int, outer: int) -> int:
    """The kind of (out-edge)·(in-edge): the ties that chain from k through j to i."""
    if (inner, outer) in _GRAPHAX_PRODUCTS:
        return _GRAPHAX_PRODUCTS[inner, outer]
    if inner == COPY or outer == COPY:
        return outer if inner == COPY else inner
    if RESHAPE in (inner, outer):
        return RESHAPE if inner == outer else 1  # a reshaped Jacobian loses its structure
    groups, links = _classes(inner, outer)
    ties = []
    for group in groups:
        for k in (n for n in group if n < 2):
            for i in (n for n in group if n > 3):
                kinds = {kind for a, b, kind in links if a in group}
                kind = "D" if "D" in kinds else "C" if kinds == {"C"} else "K"
                ties.append((k + 1, i - 1, kind))
    return _KIND_OF.get(frozenset(ties), 1)


@cache
def _sum_kind(old: int, new: int) -> int:
    """The kind of the sum of two edges: the ties both have (δ + δ stays a δ for graphax)."""
    if (old, new) in _GRAPHAX_SUMS:
        return _GRAPHAX_SUMS[old, new]
    if old == 0 or new == 0:
        return new if old == 0 else old
    if old == COPY or new == COPY:
        return new if old == COPY else old
    if RESHAPE in (old, new):
        return RESHAPE if old == new else 1
    first = {(o, p): kind for o, p, kind in KIND_TIES[old]}
    second = {(o, p): kind for o, p, kind in KIND_TIES[new]}
    ties = [(*key, first[key] if first[key] == second[key] else "D") for key in first.keys() & second.keys()]
    return _KIND_OF.get(frozenset(ties), 1)


def _multiplications(inner: list[int], outer: list[int]) -> int:
    """graphax's multiply count of (out-edge)·(in-edge); edges as [kind, out1, out2, in1, in2]."""
    if inner[0] == 10 and outer[0] == 10:
        return 1  # a constant times a constant
    mask = _mask(inner[0], outer[0])
    if not any(mask):
        return 0
    factors = (outer[1], outer[2], abs(outer[3]), abs(outer[4]), inner[3], inner[4])
    count = 1
    for used, factor in zip(mask, factors, strict=True):
        if used and factor >= 0:
            count *= factor
    return count


def _degree_weight(edge: list[int], own: slice) -> int:
    """What one edge adds to graphax's Markowitz count: a dense edge the size of the vertex
    (``own`` selects its dimensions), an edge diagonal in both index pairs 1, any other one
    output dimension of the edge (graphax reads it by kind from a four-entry table)."""
    kind = edge[0]
    if kind == 1:
        return edge[own][0] * edge[own][1]
    if kind in (6, 7, 8):
        return 1
    position = kind - 2 + (4 if kind < 2 else 0)  # graphax's index into (2, 1, 1, 2), clamped
    return edge[(2, 1, 1, 2)[min(max(position, 0), 3)]]


class GraphaxElimination:
    """A vertex elimination in progress under graphax's cost model.

    Every vertex of ``data`` (a task's stored graph) takes part, those on no
    input→output path too; the outputs are never eliminated.  :meth:`eliminate`
    returns the multiplications graphax counts; :meth:`degree` is graphax's
    Markowitz degree.

    Examples
    --------
    >>> state = GraphaxElimination(task_data("RoeFlux_1d"))
    >>> state.degree("v1"), state.eliminate("v1")
    (2, 2)
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.edges: dict[tuple[str, str], list[int]] = {(s, t): [kind, *dims] for s, t, kind, dims in data["edges"]}
        self.preds: dict[str, dict[str, None]] = {}
        self.succs: dict[str, dict[str, None]] = {}
        for s, t in self.edges:
            self.succs.setdefault(s, {})[t] = None
            self.preds.setdefault(t, {})[s] = None
        outputs = set(data["outputs"])
        self.intermediates: list[str] = [v[0] for v in data["vertices"] if v[0] not in outputs]
        self.remaining: set[str] = set(self.intermediates)

    def degree(self, j: str) -> int:
        """graphax's Markowitz degree of ``j``: weighted out-edges times weighted in-edges."""
        out = sum(_degree_weight(self.edges[j, k], slice(3, 5)) for k in self.succs.get(j, ()))
        into = sum(_degree_weight(self.edges[i, j], slice(1, 3)) for i in self.preds.get(j, ()))
        return out * into

    def eliminate(self, j: str) -> int:
        """Eliminate ``j``; return the multiplications."""
        if j not in self.remaining:
            raise JacaccError(f"{j!r} is not an intermediate left to eliminate")
        self.remaining.discard(j)
        preds, succs = list(self.preds.pop(j, ())), list(self.succs.pop(j, ()))
        total = 0
        for k in succs:
            outer = self.edges.pop((j, k))
            for i in preds:
                inner = self.edges[i, j]
                total += _multiplications(inner, outer)
                old = self.edges.get((i, k))
                kind = _sum_kind(0 if old is None else old[0], _product_kind(inner[0], outer[0]))
                self.edges[i, k] = [kind, outer[1], outer[2], inner[3], inner[4]]
                self.succs.setdefault(i, {})[k] = None
                self.preds.setdefault(k, {})[i] = None
            del self.preds[k][j]
        for i in preds:
            del self.edges[i, j]
            del self.succs[i][j]
        return total


def _data(task: str | dict[str, Any]) -> dict[str, Any]:
    return task_data(task) if isinstance(task, str) else task


def graphax_cost(task: str | dict[str, Any], order: Sequence[Hashable]) -> int:
    """The multiplications graphax counts for eliminating the vertices of ``task`` in ``order``.

    ``task``: a task name or its data (:func:`task_data`); ``order``: vertex
    ids (``"v12"``) or graphax's vertex numbers (``12``, the equation's
    position), covering every intermediate.
    """
    state = GraphaxElimination(_data(task))
    ids = [v if isinstance(v, str) else f"v{v}" for v in order]
    if sorted(ids) != sorted(state.intermediates):
        missing, extra = set(state.intermediates) - set(ids), set(ids) - set(state.intermediates)
        raise JacaccError(f"order is not a permutation of the intermediates (missing {sorted(missing)[:5]}, "
                          f"not intermediates {sorted(extra)[:5]})")
    return sum(state.eliminate(v) for v in ids)


def graphax_order(task: str | dict[str, Any], method: str) -> list[str]:
    """graphax's ``"forward"``, ``"reverse"`` or ``"markowitz"`` order of ``task``'s intermediates.

    Forward is equation order; Markowitz eliminates the vertex of least
    :meth:`GraphaxElimination.degree` first, ties to the lowest index (AlphaGrad's
    ``minimal_markowitz``).
    """
    state = GraphaxElimination(_data(task))
    if method == "forward":
        return list(state.intermediates)
    if method == "reverse":
        return state.intermediates[::-1]
    if method != "markowitz":
        raise JacaccError(f"unknown graphax order {method!r}; valid: forward, reverse, markowitz")
    position = {v: n for n, v in enumerate(state.intermediates)}
    order = []
    while state.remaining:
        j = min(state.remaining, key=lambda v: (state.degree(v), position[v]))
        order.append(j)
        state.eliminate(j)
    return order


# ============================================================================ the zoo entries
def _register(task: str) -> None:
    data = task_data(task)
    register(Problem(
        name=f"graphax_{task}",
        description=f"AlphaGrad's {task} as graphax's jaxpr graph (one vertex per equation, structure only)",
        source="Lohoff & Neftci 2024 (AlphaGrad); graphax examples, traced with JAX "
               f"{data['jax_version']}",
        n_inputs=len(data["inputs"]),
        n_outputs=len(data["outputs"]),
        builder=lambda: live_graph(task_data(task)),
        tags=("graphax",) if task in SCALAR_TASKS else ("graphax", "tensor"),
    ))


for _task in TASKS:
    if (DATA_DIR / f"{_task}.json").exists():  # absent only before experiments/alphagrad_graphs.py first ran
        _register(_task)


@cache
def _orders() -> dict[str, Any]:
    return json.loads((DATA_DIR / "orders.json").read_text())


def published_order(task: str, which: str = "alphagrad") -> list[int]:
    """An order AlphaGrad's evaluation notebooks print for ``task``, as graphax's vertex numbers.

    ``which``: ``"alphagrad"`` (the best order AlphaGrad found) or
    ``"markowitz"`` (graphax's minimal-Markowitz order).  Replayed with
    :func:`graphax_cost`, the AlphaGrad orders give the table's AlphaGrad column.
    """
    if which not in ("alphagrad", "markowitz"):
        raise JacaccError(f"unknown order {which!r}; valid: alphagrad, markowitz")
    return list(_orders()[which][task])
