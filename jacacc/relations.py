"""Multiplication relations of an expression set and face elimination sequences that realize it.

Paper 003 §5.  An optimal Jacobian accumulation can be written as a set of
algebraic expressions joined by reference variables
(:mod:`jacacc.bracketing`).  Every face of the dual c-graph is a possible
multiplication of two consecutive path pieces; in the expressions, a
multiplication ``A * B`` (``A`` the later factor) relates the *earliest*
factor(s) of ``A`` to the *latest* factor(s) of ``B``:

* **direct** when nothing stands between the two factors (``x*y``, or
  ``x*y*z`` for ``y`` and ``z``);
* **indirect** when a parenthesized sum does (``x*(y*z + w)`` relates ``x``
  to ``y`` and to ``w`` indirectly).

**Elimination dependencies** (the paper's Lemma 2, reconstructed — its
symbols were lost in extraction).  When two factors ``y``, ``x`` are related
both directly (somewhere ``x*y``) and indirectly (elsewhere
``x*(y*z + R)``), eliminating the face ``y|x`` for the direct relation must
wait until every face ``z|y`` that builds a product *ending in* ``y`` inside
the parenthesis has been eliminated: the fill-in of ``z|y`` inherits the
successors of ``y``, and only while ``y|x`` still exists does that include
``x``, so only then can the parenthesized sum later meet ``x`` as one
factor.  Symmetrically for ``(z*x + R)*y``, the faces ``x|z`` come first.
:func:`elimination_dependencies` builds this relation over faces (pairs of
factors) and :func:`circular_dependencies` reports its cycles.

**Proposition 1** (constructive).  :func:`realize` looks for a face
elimination sequence that computes exactly the products of the expression
set.  It follows every dual-graph vertex's value (a leaf, a product, or a sum
of those; sums compared as multisets), eliminates only faces whose product
is one the expressions still need, and never a face that a still-needed
product depends on in the sense above (the dynamic form of the dependency
relation: a face ``vB|vA`` waits while a needed product ``A * R'`` has
``B`` at the later end of ``R' ≠ B``, or a needed ``L' * B`` has ``A`` at
the earlier end of ``L' ≠ A``).  Among the eligible faces, the one whose
product comes first in the expressions' calculation order goes first (the
paper: "eliminate edges in line-graph in the same order as the calculation
order"; references in definition order, then the entries, each product after
its operands).  An absorption or merge that forms a sum no expression
contains a part of is a dead end, and so is a state where a still-needed
product (or an entry) has lost an operand for good: under Naumann's rule no
step copies a value, so a leaf or a product that no vertex holds any more
never comes back.  The search backtracks from dead ends and
remembers the states it has searched.  The budget is split among restarts
with other priorities (innermost product first, then seeded random orders):
dead ends are met early or not at all, so many short searches find far more
sequences than one long one.  When every face is eliminated this way the
sequence's multiplications are at most the expressions' (each needed product
is made once); when no eligible face is left before the end — the
expressions need a product the dual graph cannot form without breaking a
parenthesis, which includes circular dependencies — it reports where it
stopped.  Replaying the sequence (:func:`jacacc.eliminate.eliminate_faces`)
checks the count and the Jacobian independently.  ``exhaustive=True`` decides
instead of searching: it drops the reconstructed rules (dependencies, sums),
keeps only pruning that cannot lose a sequence, and when it has covered every
face sequence made of the expressions' products without success, no face
elimination sequence realizes the set — which happens for expression sets
that are not optimal even without circular dependencies (Proposition 1 is
stated for optimal sets).

Examples
--------
>>> from jacacc import optimize
>>> from jacacc.bracketing import to_expressions, paper_symbol
>>> from jacacc.problems.paper003 import fig4_1a
>>> plan = optimize(fig4_1a(), mode="vertex", method="markowitz")
>>> ex = to_expressions(plan, names=paper_symbol)
>>> result = realize(ex)
>>> result.realized, result.mults, ex.mults
(True, 5, 5)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from jacacc.bracketing import Expr, ExpressionError, ExpressionSet, Leaf, Mul, Ref, Sum
from jacacc.eliminate.face import FaceGraph, FaceStep, face_rule
from jacacc.graph import CompGraph, as_graph
from jacacc.linegraph import Terminal

__all__ = [
    "Realization",
    "Relation",
    "circular_dependencies",
    "elimination_dependencies",
    "multiplication_relations",
    "realize",
]

RANDOM_RESTARTS = 38  # searches with a seeded random priority after the two systematic ones

Atom = Leaf | Ref
Face = tuple[Atom, Atom]  # (earlier factor, later factor)


# ----------------------------------------------------------------------------- relations
@dataclass(frozen=True)
class Relation:
    """One multiplication relation: ``later * earlier`` meet in the product ``where``
    (a reference name or an entry ``J[output,input]``); ``direct`` when no
    parenthesis separates them."""

    earlier: Atom
    later: Atom
    direct: bool
    where: str

    @property
    def face(self) -> Face:
        return (self.earlier, self.later)


def _ends(e: Expr, side: str) -> list[tuple[Atom, bool, list[Mul]]]:
    """The factors at the earlier (``side="first"``) or later (``"last"``) end of ``e``:
    each with whether no sum lies on the way, and the products passed on the way."""
    out: list[tuple[Atom, bool, list[Mul]]] = []
    stack: list[tuple[Expr, bool, list[Mul]]] = [(e, True, [])]
    while stack:
        node, direct, via = stack.pop()
        if isinstance(node, (Leaf, Ref)):
            out.append((node, direct, via))
        elif isinstance(node, Mul):
            stack.append((node.right if side == "first" else node.left, direct, [*via, node]))
        elif isinstance(node, Sum):
            stack.extend((t, False, via) for t in reversed(node.terms))
        else:
            raise ExpressionError(f"not an expression node: {node!r}")
    return out


def _products(exprs: ExpressionSet) -> Iterator[tuple[Mul, str]]:
    """Every product node of the set, with where it is written."""
    trees = [(tree, name) for name, tree in exprs.references.items()]
    trees += [(tree, f"J[{o},{i}]") for (o, i), tree in exprs.entries.items()]
    for tree, where in trees:
        stack = [tree]
        while stack:
            node = stack.pop()
            if isinstance(node, Mul):
                yield node, where
                stack += [node.right, node.left]
            elif isinstance(node, Sum):
                stack.extend(node.terms)


def multiplication_relations(exprs: ExpressionSet) -> list[Relation]:
    """Every direct and indirect multiplication relation of an expression set (paper 003 §5).

    Examples
    --------
    Paper 003 Fig. 4.1 (a) in its factored form (Eq. 4.5): the products inside
    each parenthesis are direct, the product of the two sums relates their
    factors indirectly.

    >>> from jacacc.bracketing import paper_symbol, parse_expressions
    >>> from jacacc.problems.paper003 import fig4_1a
    >>> ex = parse_expressions("J[f,x] = (f_a*a_c + f_b*b_c)*(c_d*d_x + c_e*e_x)", fig4_1a(), names=paper_symbol)
    >>> for r in multiplication_relations(ex)[:3]:
    ...     print(ex.format(r.later), ex.format(r.earlier), "direct" if r.direct else "indirect")
    a_c c_d indirect
    a_c c_e indirect
    b_c c_d indirect
    """
    relations = []
    for node, where in _products(exprs):
        for later, direct_l, _ in _ends(node.left, "first"):
            for earlier, direct_r, _ in _ends(node.right, "last"):
                relations.append(Relation(earlier, later, direct_l and direct_r, where))
    return relations


def elimination_dependencies(exprs: ExpressionSet) -> nx.DiGraph:
    """The elimination-dependency relation between faces (paper 003 §5, Lemma 2).

    Nodes are faces ``(earlier, later)`` of factors related both directly and
    indirectly; an edge ``f → g`` says face ``f`` must be eliminated before
    ``g`` so that ``g``'s elimination breaks no parenthesis (module docstring).
    Edge attribute ``where``: the expression that imposes it.
    """
    relations = multiplication_relations(exprs)
    kinds: dict[Face, set[bool]] = defaultdict(set)
    for r in relations:
        kinds[r.face].add(r.direct)
    both = {f for f, k in kinds.items() if k == {True, False}}
    deps = nx.DiGraph()
    deps.add_nodes_from(both)
    for node, where in _products(exprs):
        for later, direct_l, via_l in _ends(node.left, "first"):
            for earlier, direct_r, via_r in _ends(node.right, "last"):
                face = (earlier, later)
                if face not in both or (direct_l and direct_r):
                    continue
                # products inside the parenthesis that end in `earlier` (make z|earlier first) ...
                for inner in via_r:
                    if isinstance(inner.left, (Leaf, Ref)) and inner.left == earlier:
                        for z, _, _ in _ends(inner.right, "last"):
                            deps.add_edge((z, earlier), face, where=where)
                # ... and products that start with `later` (make later|z first)
                for inner in via_l:
                    if isinstance(inner.right, (Leaf, Ref)) and inner.right == later:
                        for z, _, _ in _ends(inner.left, "first"):
                            deps.add_edge((later, z), face, where=where)
    return deps


def circular_dependencies(exprs: ExpressionSet, limit: int = 100) -> list[list[Face]]:
    """Cycles of the elimination-dependency relation (at most ``limit``); none means
    Proposition 1's condition holds for this expression set."""
    cycles = []
    for cycle in nx.simple_cycles(elimination_dependencies(exprs)):
        cycles.append(cycle)
        if len(cycles) >= limit:
            break
    return cycles


# ----------------------------------------------------------------------------- values
class _Values:
    """Canonical value ids: a leaf, a product of two values, a sum (multiset of terms)."""

    def __init__(self) -> None:
        self._ids: dict[Hashable, int] = {}
        self.kind: list[str] = []
        self.args: list[Any] = []
        self.size: list[int] = []
        self._ends: dict[tuple[int, str], frozenset[int]] = {}

    def _intern(self, key: Hashable, kind: str, args: Any, size: int) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self.kind)
            self.kind.append(kind)
            self.args.append(args)
            self.size.append(size)
        return found

    def leaf(self, index: int) -> int:
        return self._intern(("leaf", index), "leaf", index, 1)

    def mul(self, later: int, earlier: int) -> int:
        return self._intern(("mul", later, earlier), "mul", (later, earlier), self.size[later] + self.size[earlier])

    def sum(self, *values: int) -> int:
        terms: Counter[int] = Counter()
        for v in values:
            terms.update(self.args[v] if self.kind[v] == "sum" else {v: 1})
        key = ("sum", frozenset(terms.items()))
        return self._intern(key, "sum", terms, sum(self.size[t] * n for t, n in terms.items()))

    def ends(self, v: int, side: str) -> frozenset[int]:
        """``v`` and the values at its earlier (``"first"``) or later (``"last"``) end."""
        key = (v, side)
        if key not in self._ends:
            kind, args = self.kind[v], self.args[v]
            found = {v}
            if kind == "mul":
                found |= self.ends(args[1] if side == "first" else args[0], side)
            elif kind == "sum":
                for t in args:
                    found |= self.ends(t, side)
            self._ends[key] = frozenset(found)
        return self._ends[key]


def _expression_values(
    exprs: ExpressionSet, values: _Values
) -> tuple[Counter[int], dict[tuple[Any, Any], int], set[int]]:
    """The products the set computes (value ids, each as often as it is written), each
    entry's value, and the sums it forms."""
    memo: dict[str, int] = {}
    needed: Counter[int] = Counter()
    sums: set[int] = set()

    def value(e: Expr) -> int:
        if isinstance(e, Leaf):
            return values.leaf(e.index)
        if isinstance(e, Ref):
            if e.name not in memo:
                memo[e.name] = value(exprs.references[e.name])
            return memo[e.name]
        if isinstance(e, Mul):
            product = values.mul(value(e.left), value(e.right))
            needed[product] += 1
            return product
        total = values.sum(*(value(t) for t in e.terms))
        sums.add(total)
        return total

    for name in exprs.references:  # definition order is a calculation order
        value(Ref(name))
    entries = {key: value(tree) for key, tree in exprs.entries.items()}
    return needed, entries, sums


class _ValueTracker:
    """A FaceGraph recorder that follows the value every dual-graph vertex holds."""

    def __init__(self, values: _Values, graph: CompGraph | None, of: dict[Any, int] | None = None) -> None:
        self.values = values
        self.of: dict[Any, int] = of if of is not None else {e: values.leaf(i) for i, e in enumerate(graph.edges)}
        self.last_product: int | None = None
        self.written: list[int] = []  # the values set since this tracker was made

    def multiply(self, target: Any, left: Any, right: Any, *, new: bool) -> None:
        product = self.values.mul(self.of[left], self.of[right])
        self.last_product = product
        self._set(target, product if new else self.values.sum(self.of[target], product))

    def add(self, target: Any, source: Any) -> None:
        self._set(target, self.values.sum(self.of[target], self.of[source]))

    def sum(self, target: Any, first: Any, second: Any) -> None:
        self._set(target, self.values.sum(self.of[first], self.of[second]))

    def _set(self, vertex: Any, value: int) -> None:
        self.of[vertex] = value
        self.written.append(value)

    def remove(self, vertex: Any) -> None:
        pass  # keep the value: a removed vertex's last value may be read by the caller


# ----------------------------------------------------------------------------- Proposition 1
@dataclass
class Realization:
    """The outcome of :func:`realize`.

    Attributes
    ----------
    realized : bool
        True when the face sequence computes every entry with only the
        expression set's products (so ``mults <= expressions.mults``).
    order : tuple of FaceStep
        The faces eliminated, in order (replayable with ``mode="face"``).
    mults : int
        Faces eliminated (one multiplication each).
    missing : int
        Products of the expressions the sequence did not make (0 when realized;
        a shared product counts once).
    reason : str
        Why the construction stopped, when it did.
    exhausted : bool
        True when ``realize(..., exhaustive=True)`` searched every face sequence
        whose multiplications are all the expressions' products and none
        realizes the set: no face elimination sequence does (under the rule).
    """

    realized: bool
    order: tuple[FaceStep, ...]
    mults: int
    missing: int
    reason: str = ""
    exhausted: bool = False

    def __repr__(self) -> str:
        state = "realized" if self.realized else f"not realized ({self.reason})"
        return f"Realization({state}, mults={self.mults}, missing={self.missing})"


def realize(
    exprs: ExpressionSet, graph: Any = None, *, rule: str | None = None, max_steps: int = 20_000,
    exhaustive: bool = False,
) -> Realization:
    """A face elimination sequence computing exactly the products of ``exprs`` (Proposition 1).

    Depth-first over the eligible faces (module docstring), in the expressions'
    calculation order, backtracking from dead ends; gives up after ``max_steps`` face
    eliminations tried in all.  The first branch is the greedy construction, so
    an expression set that the greedy order realizes costs one pass.

    Parameters
    ----------
    exprs : ExpressionSet
        Typically :func:`~jacacc.bracketing.to_expressions` of a plan.
    graph : CompGraph, optional
        The graph the expressions are over; default the one attached to ``exprs``.
    rule : str, optional
        Face rule (:func:`jacacc.eliminate.face_rule`); Naumann's by default.
    max_steps : int
        Search budget.
    exhaustive : bool, default False
        Decide instead of search: one depth-first search over *every* face
        sequence whose multiplications are all products of the expressions,
        without the dependency rule and the sum pruning (which are
        reconstructions), keeping only what cannot lose a sequence (states
        already searched; under Naumann's rule, states that lost a needed
        operand).  If it ends within ``max_steps``, ``exhausted`` says that no
        face elimination sequence realizes the set.

    Returns
    -------
    Realization
        ``realized`` with the sequence, or the deepest partial sequence found
        and why it stopped.

    Examples
    --------
    D*'s expressions for this graph take 15 multiplications (the optimum is
    14); no face elimination sequence makes exactly its products, which is no
    counterexample to Proposition 1 (stated for optimal expression sets):

    >>> from jacacc import optimize, to_expressions
    >>> from jacacc.problems.generators import random_dag
    >>> g = random_dag(3, 7, 3, seed=37)
    >>> realize(to_expressions(optimize(g, method="dstar")), exhaustive=True)
    Realization(not realized (no face elimination sequence makes exactly these products), mults=..., missing=...)
    >>> realize(to_expressions(optimize(g, method="optimal", workers=1, seed=0)), exhaustive=True).realized
    True
    """
    g = as_graph(graph) if graph is not None else exprs.graph
    if g is None:
        raise ExpressionError("realize needs the graph the expressions are over (pass graph=)")
    if tuple(g.edges) != tuple(exprs.edges):
        raise ExpressionError("the graph's edges differ from the expression set's (same order required)")
    values = _Values()
    needed, entries, sums = _expression_values(exprs, values)
    calculation = list(needed)  # products in the order they are first written
    rng = np.random.default_rng(0)
    priorities = [calculation]
    if not exhaustive:
        priorities.append(sorted(calculation, key=values.size.__getitem__))
        priorities += [list(rng.permutation(calculation)) for _ in range(RANDOM_RESTARTS)]
    deepest: _Search | None = None
    for priority in priorities:  # restarts share the budget
        search = _Search(values, Counter({p: 1 for p in calculation}), entries, sums,
                         max(1, max_steps // len(priorities)), priority)
        search.prune = not exhaustive
        tracker = _ValueTracker(values, g)
        state = FaceGraph(g, tracker, rule=rule)
        # under Naumann's rule no step copies a value, so one no vertex holds any more is gone
        search.values_vanish = state.rule == face_rule(None)
        found = search.run(state, tracker, [])
        if found is not None:
            return Realization(True, tuple(found), len(found), sum(search.remaining.values()))
        if deepest is None or len(search.deepest) > len(deepest.deepest):
            deepest = search
        if search.steps <= search.max_steps:  # searched to the end: another priority finds no more
            what = ("no face elimination sequence makes exactly these products" if exhaustive else
                    "every face sequence meeting the dependency rules was tried")
            return Realization(False, tuple(deepest.deepest), len(deepest.deepest), deepest.missing_at_deepest,
                               what, exhausted=exhaustive)
    assert deepest is not None  # every search spent its share of the budget
    return Realization(False, tuple(deepest.deepest), len(deepest.deepest), deepest.missing_at_deepest,
                       f"search budget of {max_steps} steps spent")


class _Search:
    """Depth-first construction of :func:`realize`, with undo of the product counts."""

    def __init__(self, values: _Values, remaining: Counter[int], entries: dict, sums: set[int],
                 max_steps: int, priority: list[int]) -> None:
        self.values = values
        # the expressions' calculation order (products in the order they are first written,
        # inner before outer): the paper's "same order as the calculation order"
        self.position = {p: i for i, p in enumerate(priority)}
        self.sums_with: dict[int, set[int]] = defaultdict(set)  # term -> the expressions' sums holding it
        for total in sums:
            for term in values.args[total]:
                self.sums_with[term].add(total)
        self.remaining = remaining
        self.blocking = _blocking_index(values, remaining)
        self.entries = entries
        self.max_steps = max_steps
        self.steps = 0
        self.deepest: list[FaceStep] = []
        self.missing_at_deepest = sum(remaining.values())
        self.reason = ""
        self.values_vanish = False  # set by realize: prune states that lost a needed operand
        self.prune = True  # the dependency rule and the sum pruning (off for an exhaustive decision)
        self.made = 0  # an order-free fingerprint of the products made so far (xor of their hashes)
        self.dead: set[tuple[int, frozenset]] = set()  # states already searched without success

    def eligible(self, state: FaceGraph, tracker: _ValueTracker) -> tuple[list[FaceStep], int, int]:
        """Eligible faces (calculation order), the faces left, and how many wait on a dependency."""
        values, scored, blocked, n_faces = self.values, [], 0, 0
        for step in state.intermediate_faces():
            n_faces += 1
            a_value, b_value = tracker.of[step.right], tracker.of[step.left]
            product = values.mul(a_value, b_value)
            if not self.remaining[product]:
                continue
            if self.prune and self.waits(a_value, b_value):
                blocked += 1
                continue
            scored.append((self.position[product], len(scored), step))
        scored.sort(key=lambda t: t[:2])
        return [step for _, _, step in scored], n_faces, blocked

    def partial(self, v: int) -> bool:
        """Whether value ``v`` can be on the way to the expressions' values: a leaf, a
        product, or a sum whose terms lie within one of the expressions' sums."""
        values = self.values
        if values.kind[v] != "sum":
            return True
        terms: Counter[int] = values.args[v]
        candidates: set[int] | None = None
        for t in terms:
            holding = self.sums_with.get(t, set())
            candidates = set(holding) if candidates is None else candidates & holding
            if not candidates:
                return False
        return any(all(values.args[total][t] >= n for t, n in terms.items()) for total in candidates or ())

    def waits(self, a_value: int, b_value: int) -> bool:
        """Whether the face ``B|A`` must wait for a needed product that runs through it."""
        values, remaining = self.values, self.remaining
        for product in self.blocking.get(("later", a_value, b_value), ()):
            if remaining[product] and _pending(values, remaining, values.args[product][1], b_value, "last"):
                return True
        for product in self.blocking.get(("earlier", a_value, b_value), ()):
            if remaining[product] and _pending(values, remaining, values.args[product][0], a_value, "first"):
                return True
        return False

    def run(self, state: FaceGraph, tracker: _ValueTracker, order: list[FaceStep]) -> list[FaceStep] | None:
        candidates, n_faces, blocked = self.eligible(state, tracker)
        if n_faces == 0:
            wrong = [k for k, v in self.entries.items() if _entry_value(state, tracker, k) != v]
            if not wrong:
                return order
            self._note(order, f"entries {wrong[:3]} end with other sums")
            return None
        if not candidates:
            self._note(order, f"{n_faces} faces left, {blocked} of them with a needed product waiting on a "
                              "dependency" if blocked else f"{n_faces} faces left, none with a needed product")
            return None
        for step in candidates:
            self.steps += 1
            if self.steps > self.max_steps:
                return None
            child_tracker = _ValueTracker(self.values, None, dict(tracker.of))
            child = state.copy(child_tracker)
            child.eliminate(*step)
            if self.prune and not all(self.partial(v) for v in child_tracker.written):
                continue  # an absorption or merge formed a sum the expressions never build
            product = child_tracker.last_product
            self.made ^= hash(("made", product))
            key = (self.made, _state_key(child, child_tracker))
            if key not in self.dead:  # another order of the same eliminations failed from here
                self.remaining[product] -= 1
                if self.values_vanish and self.stranded(child, child_tracker):
                    self._note([*order, step], "a needed product or entry lost an operand")
                else:
                    found = self.run(child, child_tracker, [*order, step])
                    if found is not None:
                        return found
                self.remaining[product] += 1
                self.dead.add(key)
            self.made ^= hash(("made", product))
        return None

    def stranded(self, state: FaceGraph, tracker: _ValueTracker) -> bool:
        """Whether a needed product or an entry has lost an operand for good.

        A leaf, or a product already made, that no vertex holds any more can
        never come back (Naumann's rule copies no value), so a still-needed
        product of it — or an entry summing it — cannot be formed: for
        instance two terms merged into one vertex before each was multiplied
        by the factor the expressions multiply them by separately.  A sum is
        obtainable when each of its terms is, or lies in a held sum whose
        terms are all among its own.
        """
        values, remaining = self.values, self.remaining
        held = {tracker.of[v] for v in state.succs if v in tracker.of}
        held_sums = [h for h in held if values.kind[h] == "sum"]

        def obtainable(v: int) -> bool:
            if v in held:
                return True
            kind = values.kind[v]
            if kind == "leaf":
                return False
            if kind == "mul":
                return remaining[v] > 0
            terms: Counter[int] = values.args[v]
            return all(obtainable(t) or any(t in values.args[h] and all(terms[u] >= n for u, n in
                                                                         values.args[h].items())
                                            for h in held_sums) for t in terms)

        for product, n in remaining.items():
            if n and not all(obtainable(operand) for operand in values.args[product]):
                return True
        return not all(obtainable(v) for v in self.entries.values())

    def _note(self, order: list[FaceStep], reason: str) -> None:
        if len(order) >= len(self.deepest):
            self.deepest, self.reason = list(order), reason
            self.missing_at_deepest = sum(self.remaining.values())


def _blocking_index(values: _Values, needed: Counter[int]) -> dict[tuple[str, int, int], list[int]]:
    """For each (A, B) the needed products that may forbid eliminating a face ``B|A``:
    ``A * R'`` with ``B`` at the later end of ``R' ≠ B`` ("later"), or ``L' * B`` with
    ``A`` at the earlier end of ``L' ≠ A`` ("earlier"); :func:`_pending` decides whether it still does."""
    index: dict[tuple[str, int, int], list[int]] = defaultdict(list)
    for product in needed:
        later, earlier = values.args[product]
        for b in values.ends(earlier, "last") - {earlier}:
            index[("later", later, b)].append(product)
        for a in values.ends(later, "first") - {later}:
            index[("earlier", a, earlier)].append(product)
    return index


def _pending(values: _Values, remaining: Counter[int], v: int, end: int, side: str) -> bool:
    """Whether the face at factor ``end`` must still carry the products of ``v`` (a needed
    operand with ``end`` at its ``side``): true while the product made *directly* with
    ``end`` on the way down is still to be made (its fill-in inherits ``end``'s
    neighbours only while the face exists; the products above it inherit theirs from
    it), or while ``end`` is a bare term of a sum on the way (the merge needs the face)."""
    kind, args = values.kind[v], values.args[v]
    if kind == "mul":
        operand = args[1] if side == "first" else args[0]
        if operand == end:
            return bool(remaining[v])
        return _pending(values, remaining, operand, end, side)
    if kind == "sum":
        if end in args:
            return True
        return any(_pending(values, remaining, t, end, side) for t in args if end in values.ends(t, side))
    return False


def _state_key(state: FaceGraph, tracker: _ValueTracker) -> frozenset:
    """The dual graph up to the names of fill-in vertices: each vertex's value with its
    successors' values (terminals stand for themselves)."""
    def name(v: Any) -> Any:
        return tracker.of.get(v, v) if not isinstance(v, Terminal) else v

    return frozenset((name(v), frozenset(Counter(name(s) for s in out).items())) for v, out in state.succs.items())


def _entry_value(state: FaceGraph, tracker: _ValueTracker, key: tuple[Any, Any]) -> int | None:
    output, inp = key
    for v in state.by_dst.get(output, ()):
        if v[0] == inp:  # an LCG edge (u, v) or a FillIn(src, dst, index)
            return tracker.of[v]
    return None
