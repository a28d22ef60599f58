"""The sparsity-aware cost model of paper 001 (§4.3, Figure 6), computed without running the program.

``cost(e)`` counts the scalar additions, multiplications and black-box calls
that evaluating ``e`` performs, for the sizes of its tensors; index arithmetic
and comparisons are free.  The rules (stated in words; the paper's Figure 6
did not survive text extraction, these follow its prose):

* ``a + b`` costs 1 unless ``a`` or ``b`` is immediately a bracket whose
  predicate is false at that point (there is nothing to add);
* ``a · b`` costs 1, a black-box call 1 (``nonlinear``);
* ``[p]·e`` costs what ``e`` and the data operands of ``p`` cost where ``p``
  holds, nothing elsewhere;
* ``⊞_i e`` costs the sum over ``i`` of what ``e`` costs;
* ``Σ_i Σ_j … [p]·e`` (sums directly nested, then a bracket; ``p = true`` when
  there is none) with ``k`` index tuples satisfying ``p`` costs ``max(k − 1, 0)``
  additions plus ``e`` at those tuples — a sum over a single true value costs
  no addition;
* a read ``t[a]`` costs what computing ``t`` costs; ``let`` costs its value and
  its body; pairs and projections cost their parts;
* predicates on data (``[x > 0]``) are static unknowns and count as true.

Counts are closed-form where the structure allows: a cost that does not depend
on an index is multiplied by its extent, and the number of integer points of
a conjunction of affine constraints is counted along its last variable by
bounds (:mod:`jacacc.intlin`), enumerating only the variables the constraints
couple.  :func:`jacacc.iverson.interpret.count_operations` is the instrumented
interpreter this module is tested against.

Examples
--------
>>> import jacacc.iverson as iv
>>> A = iv.var("A", (100, 100)); i, j = iv.index("i"), iv.index("j")
>>> cost(iv.sum(i, 100, A[i, i]))                          # trace: n - 1 additions
{'add': 99, 'mul': 0, 'nonlinear': 0}
>>> cost(iv.gen(i, 100, iv.gen(j, 100, iv.bracket(i == j))))  # its gradient, diag: free
{'add': 0, 'mul': 0, 'nonlinear': 0}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from jacacc.iverson._stack import Step, drive
from jacacc.iverson.check import check, dnf
from jacacc.iverson.interpret import COMPARE
from jacacc.iverson.syntax import (
    Access,
    Add,
    And,
    BoolConst,
    Bracket,
    Cmp,
    Const,
    DataCmp,
    Expr,
    Func,
    Gen,
    Let,
    Mul,
    Or,
    Pair,
    Pred,
    Proj,
    Sum,
    Var,
    conjoin,
    pred_children_exprs,
    unshadowed,
    walk,
)

__all__ = ["Cost", "cost"]

Box = tuple[tuple[str, int], ...]
ENUMERATION_LIMIT = 50_000_000  # index points enumerated at once when counting


@dataclass(frozen=True)
class Cost:
    add: int = 0
    mul: int = 0
    nonlinear: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.add + other.add, self.mul + other.mul, self.nonlinear + other.nonlinear)

    def as_dict(self) -> dict[str, int]:
        return {"add": self.add, "mul": self.mul, "nonlinear": self.nonlinear}

    @property
    def total(self) -> int:
        return self.add + self.mul + self.nonlinear


ZERO = Cost()


def cost(expr: Expr) -> dict[str, int]:
    """Additions, multiplications and black-box calls of ``expr`` under §4.3's model.

    Returns ``{"add": …, "mul": …, "nonlinear": …}``.
    """
    check(expr)
    return drive(_cost(expr, (), ())).as_dict()


def has_arithmetic(e: Expr) -> bool:
    """Whether evaluating ``e`` can perform any counted operation (one walk, no recursion)."""
    return any(isinstance(node, (Add, Mul, Func, Sum)) for node in walk(e))


def _cost(e: Expr, box: Box, guard: tuple[Pred, ...]) -> Step:
    """Σ over the points of ``box`` where every ``guard`` holds of the cost of ``e`` at that point
    (a step of :func:`~jacacc.iverson._stack.drive`: programs nest deeper than Python recurses)."""
    if isinstance(e, (Var, Const)):
        return ZERO
    if isinstance(e, Add):
        pair = guard + _nonzero(e.a) + _nonzero(e.b)
        return (yield _cost(e.a, box, guard)) + (yield _cost(e.b, box, guard)) + Cost(add=count(box, pair))
    if isinstance(e, Mul):
        return (yield _cost(e.a, box, guard)) + (yield _cost(e.b, box, guard)) + Cost(mul=count(box, guard))
    if isinstance(e, Func):
        return (yield _cost(e.arg, box, guard)) + Cost(nonlinear=count(box, guard))
    if not has_arithmetic(e):  # nothing counted below: skip the point counting of brackets and sums
        return ZERO
    if isinstance(e, Bracket):
        inner = guard + (e.pred,)
        total = yield _cost(e.body, box, inner)
        for operand in pred_children_exprs(e.pred):
            total = total + (yield _cost(operand, box, inner))
        return total
    if isinstance(e, Gen):
        name, body = unshadowed(e, {n for n, _ in box})
        return (yield _cost(body, box + ((name, e.extent),), guard))
    if isinstance(e, Sum):
        return (yield _sum_cost(e, box, guard))
    if isinstance(e, Access):
        return (yield _cost(e.target, box, guard))
    assert isinstance(e, (Let, Pair, Proj))
    total = ZERO
    for c in e.children:
        total = total + (yield _cost(c, box, guard))
    return total


def _nonzero(e: Expr) -> tuple[Pred, ...]:
    """The predicate under which an addend counts (§4.3: only a bracket immediately under ``+``)."""
    return (e.pred,) if isinstance(e, Bracket) else ()


def _sum_cost(e: Sum, box: Box, guard: tuple[Pred, ...]) -> Step:
    binders: list[tuple[str, int]] = []
    inner: Expr = e
    scope = box
    while isinstance(inner, Sum):  # directly nested sums are costed jointly
        name, body = unshadowed(inner, {n for n, _ in scope})
        binders.append((name, inner.extent))
        scope = scope + ((name, inner.extent),)
        inner = body
    pred: tuple[Pred, ...] = (inner.pred,) if isinstance(inner, Bracket) else ()
    total = yield _cost(inner, scope, guard)  # a bracket body costs only where its predicate holds
    return total + Cost(add=_sum_additions(box, guard, tuple(binders), pred))


def _sum_additions(box: Box, guard: tuple[Pred, ...], binders: Box, pred: tuple[Pred, ...]) -> int:
    """Σ over guarded points of ``box`` of max(k − 1, 0), k = #points of ``binders`` where ``pred`` holds."""
    outer = {name for name, _ in box}
    coupled = set().union(*(_mentions(p) for p in pred)) & outer if pred else set()
    if not coupled:  # k is the same at every outer point
        k = count(binders, pred)
        return max(k - 1, 0) * count(box, guard) if k > 1 else 0
    # enumerate the outer indices the predicate and guard couple; the rest multiply
    guard_names = set().union(*(_mentions(g) for g in guard)) & outer if guard else set()
    enumerated = tuple((n, x) for n, x in box if n in coupled | guard_names)
    free = int(np.prod([x for n, x in box if n not in coupled | guard_names], dtype=np.int64))
    grid = _grid(enumerated)
    keep = _holds(guard, grid) if guard else np.ones(_grid_size(grid), dtype=bool)
    ks = count(binders, pred, {n: v[keep] for n, v in grid.items()})
    return int(free * np.maximum(np.asarray(ks) - 1, 0).sum())


def _mentions(p: Pred) -> set[str]:
    """Index names an *index* comparison inside ``p`` mentions (data comparisons count as true)."""
    if isinstance(p, Cmp):
        return set(p.lhs.names | p.rhs.names)
    if isinstance(p, (And, Or)):
        return _mentions(p.a) | _mentions(p.b)
    return set()


def _grid(box: Sequence[tuple[str, int]]) -> dict[str, np.ndarray]:
    """All points of a box, one flat int64 array per index."""
    size = int(np.prod([n for _, n in box], dtype=np.int64))
    if size > ENUMERATION_LIMIT:
        raise MemoryError(f"counting would enumerate {size} index points; the cost model's limit is "
                          f"{ENUMERATION_LIMIT}")
    if not box:
        return {}
    axes = np.meshgrid(*(np.arange(n, dtype=np.int64) for _, n in box), indexing="ij")
    return {name: a.ravel() for (name, _), a in zip(box, axes, strict=True)}


def _grid_size(grid: Mapping[str, np.ndarray]) -> int:
    return len(next(iter(grid.values()))) if grid else 1




def _holds(preds: Sequence[Pred], env: Mapping[str, np.ndarray]) -> np.ndarray:
    """Vectorized truth of a conjunction of predicates, data comparisons read as true."""
    out: np.ndarray | bool = True
    for p in preds:
        out = np.logical_and(out, _truth(p, env))
    size = _grid_size(env)
    return np.broadcast_to(np.asarray(out, dtype=bool), (size,)) if env else np.asarray(out, dtype=bool)


def _truth(p: Pred, env: Mapping[str, np.ndarray]) -> np.ndarray | bool:
    if isinstance(p, Cmp):
        return COMPARE[p.op](p.lhs.value(env), p.rhs.value(env))
    if isinstance(p, And):
        return np.logical_and(_truth(p.a, env), _truth(p.b, env))
    if isinstance(p, Or):
        return np.logical_or(_truth(p.a, env), _truth(p.b, env))
    if isinstance(p, DataCmp):
        return True
    assert isinstance(p, BoolConst)
    return p.value


def count(box: Box, preds: Sequence[Pred], env: Mapping[str, np.ndarray] | None = None) -> int | np.ndarray:
    """Number of points of ``box`` where every predicate holds (data comparisons as true).

    With ``env`` (outer index values, arrays of one length) the count is per point
    of ``env``, an array.
    """
    env = dict(env or {})
    names = {n for n, _ in box}
    relevant = set().union(*(_mentions(p) for p in preds)) if preds else set()
    free = int(np.prod([x for n, x in box if n not in relevant], dtype=np.int64))
    inner = tuple((n, x) for n, x in box if n in relevant)
    if not preds or (not inner and not (relevant - names)):
        base = free if not preds else free * _holds(preds, {}).astype(np.int64).item()
        return np.full(_grid_size(env), base, dtype=np.int64) if env else base
    cases = dnf(conjoin(preds))
    if len(cases) == 1 and inner:
        counts = _conjunction_count(inner, cases[0], env)
    else:  # a disjunction: enumerate the coupled indices and test the predicate
        counts = _enumerated_count(inner, preds, env)
    counts = free * np.asarray(counts, dtype=np.int64)
    return counts if env else int(counts.reshape(-1)[0])


def _enumerated_count(inner: Box, preds: Sequence[Pred], env: Mapping[str, np.ndarray]) -> np.ndarray:
    grid = _grid(inner)
    n_env = _grid_size(env)
    n_grid = _grid_size(grid)
    if n_env * n_grid > ENUMERATION_LIMIT:
        raise MemoryError(f"counting would enumerate {n_env * n_grid} index points; the cost model's limit "
                          f"is {ENUMERATION_LIMIT}")
    full = {n: np.repeat(v, n_grid) for n, v in env.items()}
    full.update({n: np.tile(v, n_env) for n, v in grid.items()})
    if not full:
        return np.asarray(_holds(preds, {}), dtype=np.int64).reshape(1)
    hits = _holds(preds, full).reshape(n_env, n_grid)
    return hits.sum(axis=1)


def _conjunction_count(inner: Box, case: Sequence[Cmp], env: Mapping[str, np.ndarray]) -> np.ndarray:
    """Points of ``inner`` satisfying a conjunction of comparisons: the last (largest) index is
    counted by its bounds, the others enumerated."""
    order = sorted(inner, key=lambda t: t[1])
    (last, extent), rest = order[-1], order[:-1]
    grid = _grid(rest)
    n_env, n_grid = _grid_size(env), _grid_size(grid)
    if n_env * n_grid > ENUMERATION_LIMIT:
        raise MemoryError(f"counting would enumerate {n_env * n_grid} index points; the cost model's limit "
                          f"is {ENUMERATION_LIMIT}")
    full = {n: np.repeat(v, n_grid) for n, v in env.items()}
    full.update({n: np.tile(v, n_env) for n, v in grid.items()})
    size = n_env * n_grid
    lo = np.zeros(size, dtype=np.int64)
    hi = np.full(size, extent - 1, dtype=np.int64)
    ok = np.ones(size, dtype=bool)
    pinned: np.ndarray | None = None
    for c in case:
        rel, a = c.normal()
        coef = a.coeff(last)
        rest_value = np.broadcast_to(np.asarray(a.without(last).value(full), dtype=np.int64), (size,))
        if coef == 0:
            ok &= (rest_value == 0) if rel == "==" else (rest_value >= 0)
        elif rel == "==":
            divisible = (-rest_value) % coef == 0
            value = np.where(divisible, (-rest_value) // coef, -1)
            ok &= divisible
            if pinned is None:
                pinned = value
            else:
                ok &= value == pinned
        elif coef > 0:
            lo = np.maximum(lo, -np.floor_divide(rest_value, coef))  # x ≥ ⌈-r/c⌉
        else:
            hi = np.minimum(hi, np.floor_divide(rest_value, -coef))  # x ≤ ⌊r/|c|⌋
    if pinned is not None:
        hits = ok & (pinned >= lo) & (pinned <= hi)
    else:
        hits = np.where(ok, np.maximum(hi - lo + 1, 0), 0)
    return np.asarray(hits, dtype=np.int64).reshape(n_env, n_grid).sum(axis=1)
