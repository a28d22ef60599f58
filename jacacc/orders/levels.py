"""Method ``levels``: local Jacobians between depth levels, multiplied in the cheapest bracketing.

Paper 003 §4 writes a graph whose cross-level edges are segmented (Def. 3.4)
as a product of local Jacobians between adjacent depth levels,
``J = J_L ⋯ J_2 J_1`` (Eq. 4.6), notes that the order of accumulation
(left to right, right to left, "from both sides or from the middle") is a
choice that changes the cost, that unrelated subgraphs spanning the same
levels may prefer different orders (Fig. 4.4), and that one should "first
eliminate all the simple chains and simple blocks … using reference edges,
and eliminate depth levels by performing depth local Jacobian multiplication"
on what remains.  This module does exactly that:

1. **Reference edges** (§4): simple chains and simple blocks are replaced
   innermost first, as in :mod:`jacacc.orders.blocks` (``reduce=True``).
2. **Unrelated subgraphs** (Fig. 4.4): each weakly connected component of
   what remains gets its own levels and its own bracketing.
3. **Depth levels and segmentation** (Def. 3.4): levels are counted from the
   inputs or, as the paper does, from the roots (``sides``); a cross-level
   edge is segmented by copies of its source or of its target vertex
   (``copies``).  A copy edge is an identity entry of its level Jacobian;
   multiplying by it is free ("the calculation of [a unit label] is
   unnecessary, just like the calculation of zero entries"), so the product
   of an entry with a copy is the entry itself and costs nothing.  This is
   how the edges that skip levels enter the *non-adjacent* level products
   ``J[j←i]`` without extra work.
4. **Matrix-chain dynamic programming** over the level Jacobians: the cost of
   ``J[j←k] · J[k←i]`` is the number of scalar multiplications it actually
   performs given the sparsity of both factors (a triple (r, m, c) with both
   entries non-zero and neither an identity copy), which depends only on the
   structure, so the classical interval DP finds the cheapest bracketing
   (ties broken by additions).  Every combination of ``sides`` × ``copies``
   is costed and the cheapest kept.  The schedule's ops are exactly the
   multiplications of the chosen products: an entry that is a sum of several
   products is one new slot with fused accumulations; a sum that contains a
   plain entry (a product with an identity) adds it with one ``Add``.

Choices where the paper is not explicit: ties between equal-cost brackets
go to the split nearest the inputs; the "non-depth local Jacobian" of
Fig. 4.4 (b) (a product over sets of vertices other than whole levels) is
covered only through the free identity copies of segmented edges and the
per-component bracketing, not as arbitrary vertex sets.

Examples
--------
>>> from jacacc import optimize
>>> from jacacc.problems.paper003 import fig4_4a
>>> plan = optimize(fig4_4a(), method="levels", reduce=False)
>>> plan.mults  # each subgraph takes its own optimal order (Fig. 4.4): 3 + 3
6
>>> plan.jacobian().tolist()
[[341.0, 0.0], [0.0, 12246.0]]
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.errors import OrderError
from jacacc.graph import as_graph
from jacacc.orders.blocks import ScheduleEmitter, WorkGraph, replace_chains
from jacacc.orders.registry import OrderResult, register_method
from jacacc.structure import depth_levels

__all__ = ["LevelProduct", "level_jacobians", "levels_method", "matrix_chain"]

Node = Hashable
ONE = -1  # an identity entry (a segmentation copy): multiplying by it is free
Matrix = dict[Node, dict[Node, int]]  # row -> col -> slot or ONE


@dataclass(frozen=True)
class LevelProduct:
    """One component's level-Jacobian product: levels, segmentation, bracketing, cost."""

    component: int
    side: str
    copy: str
    bracketing: str
    mults: int

    def __str__(self) -> str:
        return (f"levels[component {self.component}, from {self.side}, copies of {self.copy}]: "
                f"{self.bracketing} [{self.mults} mults]")


class _Component:
    """A weakly connected piece of a work graph, dressed for :func:`jacacc.structure.depth_levels`."""

    def __init__(self, work: WorkGraph, nodes: set[Node]) -> None:
        self.succs = {v: work.succs[v] for v in work.succs if v in nodes}
        self.preds = {v: work.preds[v] for v in work.preds if v in nodes}
        self.inputs = tuple(x for x in work.inputs if x in nodes)
        self.outputs = tuple(y for y in work.outputs if y in nodes)


def _components(work: WorkGraph) -> list[set[Node]]:
    seen: set[Node] = set()
    found = []
    for start in work.succs:
        if start in seen or not (work.succs[start] or work.preds[start]):
            continue
        comp, stack = {start}, [start]
        while stack:
            v = stack.pop()
            for n in (*work.succs[v], *work.preds[v]):
                if n not in comp:
                    comp.add(n)
                    stack.append(n)
        seen |= comp
        found.append(comp)
    return found


def level_jacobians(graph: Any, side: str = "inputs", copy: str = "source") -> list[Matrix]:
    """The local Jacobians between adjacent depth levels of a segmented graph (Def. 3.4, Eq. 4.6).

    Parameters
    ----------
    graph : CompGraph or a work graph (``succs``/``preds`` mapping to edge slots or partials)
    side : {"inputs", "outputs"}
        Levels counted from the inputs, or from the roots as the paper does.
    copy : {"source", "target"}
        Which endpoint of a cross-level edge fills the levels it crosses.

    Returns
    -------
    list of dict
        Entry ``k-1`` is ``J_k`` (level ``k-1`` to level ``k``) as
        ``{row vertex: {column vertex: edge index or ONE}}``; ``ONE`` (-1)
        marks the identity entry of a segmentation copy, which keeps the name
        of the vertex it copies.

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig3_1a
    >>> level_jacobians(fig3_1a())  # x → a → f and the cross-level edge x → f
    [{'a': {'x': 1}, 'x': {'x': -1}}, {'f': {'x': 2, 'a': 0}}]
    """
    if side not in ("inputs", "outputs"):
        raise OrderError(f"side must be 'inputs' or 'outputs', got {side!r}")
    if copy not in ("source", "target"):
        raise OrderError(f"copy must be 'source' or 'target', got {copy!r}")
    if not hasattr(graph, "succs"):
        g = as_graph(graph)
        index = {e: i for i, e in enumerate(g.edges)}
        succs = {u: {v: index[(u, v)] for v in g.successors(u)} for u in g.topological_order}
    else:
        succs = graph.succs
    level = depth_levels(graph, side=side)
    last = max(level.values(), default=0)
    mats: list[Matrix] = [{} for _ in range(last)]
    for u, out in succs.items():
        for w, slot in out.items():
            lu, lw = level[u], level[w]
            if copy == "source":
                for k in range(lu + 1, lw):
                    mats[k - 1].setdefault(u, {})[u] = ONE
                mats[lw - 1].setdefault(w, {})[u] = slot
            else:
                mats[lu].setdefault(w, {})[u] = slot
                for k in range(lu + 2, lw + 1):
                    mats[k - 1].setdefault(w, {})[w] = ONE
    return mats


# ------------------------------------------------------------------------------------ the DP
def _compose(a: dict[Node, set[Node]], b: dict[Node, set[Node]]) -> dict[Node, set[Node]]:
    """Sparsity pattern of a · b (rows → column sets)."""
    out: dict[Node, set[Node]] = {}
    for r, mids in a.items():
        cols: set[Node] = set()
        for m in mids:
            cols |= b.get(m, set())
        if cols:
            out[r] = cols
    return out


def _column_counts(a: dict[Node, set[Node]]) -> dict[Node, tuple[int, bool]]:
    """For each column m of ``a``: (number of rows with an entry, whether (m, m) is an identity)."""
    counts: dict[Node, list] = {}
    for r, mids in a.items():
        for m in mids:
            entry = counts.setdefault(m, [0, False])
            entry[0] += 1
            entry[1] = entry[1] or r == m
    return {m: (n, ident) for m, (n, ident) in counts.items()}


def _row_counts(b: dict[Node, set[Node]]) -> dict[Node, tuple[int, bool]]:
    """For each row m of ``b``: (number of columns with an entry, whether (m, m) is an identity)."""
    return {m: (len(cols), m in cols) for m, cols in b.items()}


def _cost_from_counts(
    cols: dict[Node, tuple[int, bool]], rows: dict[Node, tuple[int, bool]]
) -> tuple[int, int]:
    """(multiplications, product terms) of a · b, from the column counts of a and the row counts of b."""
    mults = terms = 0
    small, large = (cols, rows) if len(cols) <= len(rows) else (rows, cols)
    for m in small:
        if m in large:
            (n_rows, ident_a), (n_cols, ident_b) = cols[m], rows[m]
            terms += n_rows * n_cols
            mults += (n_rows - ident_a) * (n_cols - ident_b)
    return mults, terms


def _product_cost(a: dict[Node, set[Node]], b: dict[Node, set[Node]]) -> tuple[int, int]:
    """(multiplications, additions) of a · b: identity entries (r == m or m == c) are free."""
    mults, terms = _cost_from_counts(_column_counts(a), _row_counts(b))
    return mults, terms - sum(len(c) for c in _compose(a, b).values())


def matrix_chain(patterns: Sequence[dict[Node, set[Node]]]) -> tuple[int, int, dict[tuple[int, int], int]]:
    """Cheapest bracketing of ``J_L ⋯ J_1`` given the sparsity patterns ``[J_1, …, J_L]``.

    Returns ``(mults, adds, split)`` where ``split[i, j]`` is the level ``k``
    at which ``J[j←i]`` is best formed as ``J[j←k] · J[k←i]``.

    Examples
    --------
    Vertex names must differ between levels, except that a vertex named in
    two adjacent levels is an identity copy (free to multiply by).

    >>> j1 = {"a": {"x"}, "b": {"x"}, "c": {"x"}}
    >>> j2 = {"v": {"a", "b", "c"}}
    >>> j3 = {"y": {"v"}}
    >>> mults, adds, split = matrix_chain([j1, j2, j3])
    >>> mults, adds, split[0, 3]  # J3 (J2 J1): 3 + 1, rather than (J3 J2) J1: 3 + 3
    (4, 2, 2)
    """
    n = len(patterns)
    pat: dict[tuple[int, int], dict[Node, set[Node]]] = {}
    for i in range(n):
        pat[i, i + 1] = patterns[i]
        for j in range(i + 2, n + 1):
            pat[i, j] = _compose(patterns[j - 1], pat[i, j - 1])
    nnz = {key: sum(len(c) for c in p.values()) for key, p in pat.items()}
    cols = {key: _column_counts(p) for key, p in pat.items()}
    rows = {key: _row_counts(p) for key, p in pat.items()}
    best: dict[tuple[int, int], tuple[int, int]] = {(i, i + 1): (0, 0) for i in range(n)}
    split: dict[tuple[int, int], int] = {}
    for span in range(2, n + 1):
        for i in range(0, n - span + 1):
            j = i + span
            choice = None
            for k in range(i + 1, j):
                m, terms = _cost_from_counts(cols[k, j], rows[i, k])
                cost = (best[i, k][0] + best[k, j][0] + m, best[i, k][1] + best[k, j][1] + terms - nnz[i, j])
                if choice is None or cost < choice[0]:
                    choice = (cost, k)
            best[i, j], split[i, j] = choice
    mults, adds = best[0, n] if n else (0, 0)
    return mults, adds, split


def _bracketing(i: int, j: int, split: dict[tuple[int, int], int]) -> str:
    if j == i + 1:
        return f"J{j}"
    k = split[i, j]
    return f"({_bracketing(k, j, split)} {_bracketing(i, k, split)})"


# ------------------------------------------------------------------------------------ emission
def _emit(i: int, j: int, mats: list[Matrix], split: dict, work: WorkGraph) -> Matrix:
    if j == i + 1:
        return mats[i]
    k = split[i, j]
    a, b = _emit(k, j, mats, split, work), _emit(i, k, mats, split, work)
    col_rows: dict[Node, list[tuple[Node, int]]] = {}
    for r, row in a.items():
        for m, entry in row.items():
            col_rows.setdefault(m, []).append((r, entry))
    terms: dict[tuple[Node, Node], list[Any]] = {}
    for m, row in b.items():
        for r, left in col_rows.get(m, ()):
            for c, right in row.items():
                if left == ONE:
                    term: Any = right
                elif right == ONE:
                    term = left
                else:
                    term = (left, right)
                terms.setdefault((r, c), []).append(term)
    em = work.em
    out: Matrix = {}
    for (r, c), items in terms.items():
        label = (work.name(c), work.name(r))
        products = [t for t in items if isinstance(t, tuple)]
        plain = [t for t in items if not isinstance(t, tuple)]
        if ONE in plain and len(items) > 1:  # an identity copy is a single path by construction
            raise AssertionError(f"identity entry ({r!r}, {c!r}) summed with other paths")
        slot = None
        for left, right in products:
            if slot is None:
                slot = em.product(left, right, label)
            else:
                em.accumulate(slot, left, right)
        if slot is None:  # no product: one plain entry passes through, two or more are summed
            slot, plain = plain[0], plain[1:]
            if plain:
                slot, plain = em.sum(slot, plain[0], label), plain[1:]
        for p in plain:
            em.add(slot, p)
        out.setdefault(r, {})[c] = slot
    return out


# ------------------------------------------------------------------------------------ the method
def levels_method(
    graph: Any,
    *,
    seed: int | None = None,
    reduce: bool = True,
    sides: Sequence[str] = ("inputs", "outputs"),
    copies: Sequence[str] = ("source", "target"),
) -> OrderResult:
    """Paper 003's depth-level strategy: reference edges, then level Jacobians in the best bracketing.

    Registered as method ``"levels"`` of mode ``"structure"``:
    ``jacacc.optimize(graph, method="levels")``.  See the module docstring.

    Parameters
    ----------
    graph : CompGraph or anything :func:`jacacc.graph.as_graph` reads
    seed : ignored (deterministic)
    reduce : bool, default True
        Replace simple chains and simple blocks by reference edges first (§4).
    sides : subset of {"inputs", "outputs"}
        Where depth levels are counted from (the paper: the roots, our outputs).
    copies : subset of {"source", "target"}
        Which endpoint of a cross-level edge fills the crossed levels.

    Returns
    -------
    OrderResult
        ``schedule`` the Schedule; ``order`` the reference edges made and one
        :class:`LevelProduct` per component.

    Examples
    --------
    >>> from jacacc.problems.paper003 import fig4_1b
    >>> result = levels_method(fig4_1b())
    >>> result.schedule.mults, str(result.order[0])
    (8, 'levels[component 0, from inputs, copies of source]: (((J4 J3) J2) J1) [8 mults]')
    """
    g = as_graph(graph)
    sides = (sides,) if isinstance(sides, str) else tuple(sides)
    copies = (copies,) if isinstance(copies, str) else tuple(copies)
    if not sides or any(s not in ("inputs", "outputs") for s in sides):
        raise OrderError(f"sides must be a non-empty subset of ('inputs', 'outputs'), got {list(sides)}")
    if not copies or any(c not in ("source", "target") for c in copies):
        raise OrderError(f"copies must be a non-empty subset of ('source', 'target'), got {list(copies)}")
    work = WorkGraph(g, ScheduleEmitter(g))
    if reduce:
        replace_chains(work)
    result: dict[tuple[Node, Node], int] = {}
    steps = list(work.steps)
    for number, nodes in enumerate(_components(work)):
        comp = _Component(work, nodes)
        best = None
        for side in sides:
            for copy in copies:
                mats = level_jacobians(comp, side=side, copy=copy)
                patterns = [{r: set(row) for r, row in m.items()} for m in mats]
                mults, adds, split = matrix_chain(patterns)
                if best is None or (mults, adds) < best[0]:
                    best = ((mults, adds), side, copy, mats, split)
        (mults, _), side, copy, mats, split = best
        before = work.em.mults
        final = _emit(0, len(mats), mats, split, work) if mats else {}
        if work.em.mults - before != mults:  # the DP's count and the ops must agree
            raise AssertionError(f"level products emitted {work.em.mults - before} mults, DP said {mults}")
        for y, row in final.items():
            for x, slot in row.items():
                result[(y, x)] = slot
        if len(mats) > 1:
            steps.append(LevelProduct(number, side, copy, _bracketing(0, len(mats), split), mults))
    schedule = work.em.schedule(result, steps)
    return OrderResult(tuple(steps), schedule=schedule)


register_method("levels", levels_method, modes=["structure"])
