"""The tensor language lowered onto the kernel IR: one or a few definitions per ``let`` binding.

:func:`lower` brings a program to gen push-out form (paper 001 §5.3: lets at the
top, every ⊞ outermost in its binding; :func:`~jacacc.iverson.normalize.gen_pushout`)
and turns each binding ``v = ⊞_i ⊞_j b`` into :class:`~jacacc.kernels.ir.Definition`
objects of the kernel layer, which compiles them (:mod:`jacacc.kernels.support`):

* a bracket ``[p]·e`` becomes a :class:`~jacacc.kernels.ir.Guard` of the index
  comparisons of ``p`` around ``e``; its data comparisons (relu's ``x > 0``)
  become the table's predicates (``gt``) and ``where``, tested after the index
  comparisons, so a read they guard is never made outside its range.  A
  disjunction is split into disjoint conjunctions, ``[p ∨ q] = [p] + [¬p ∧ q]``;
* a Σ whose body is a bracket gets its bounds from the bracket's index comparisons
  by Fourier–Motzkin elimination (:func:`jacacc.intlin.nested_bounds`, paper 000
  §4.2): ``Σ_k [k ≤ i] x[k]`` loops over ``0 … i``, ``Σ_k [2k = i]`` over at most one
  value, and the comparisons left on the enclosing indices guard the sum;
* a binding whose body is a sum of bracketed terms gets one definition per term,
  each over its own support, added into one zeroed buffer (paper 001 §4.3: the
  gradient of a trace fills n entries of its n×n result, not n²).

Every definition is named canonically — arguments ``a0, a1, …`` in the order they
are read, indices ``i0, i1, …``, sum indices ``k0, k1, …`` — so two bindings that
differ only in the names of what they read lower to the same text and share one
compiled kernel: the 400 steps of a recurrence compile as one step.

Examples
--------
>>> import jacacc.iverson as iv
>>> A = iv.var("A", (3, 3)); i, j = iv.index("i"), iv.index("j")
>>> program = lower(iv.grad(iv.sum(i, 3, A[i, i]), A))
>>> [str(term.definition) for binding in program.bindings for term in binding.terms]
['f[i0, i1] = [i0 == i1] * 1']
"""

from __future__ import annotations

from dataclasses import dataclass

from jacacc.iverson._stack import Step, drive
from jacacc.iverson.normalize import _pushout, bindings_of, gen_pushout
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
    Mul,
    Or,
    Pair,
    PairType,
    Pred,
    Sum,
    Type,
    Var,
    fresh,
    index,
    operation_name,
    substitute_indices,
    unshadowed,
)
from jacacc.iverson.syntax import Affine as IvAffine
from jacacc.kernels.ir import (
    CHAIN_FOLD,
    Affine,
    Binary,
    Call,
    Condition,
    Definition,
    Guard,
    Node,
    Number,
    Read,
    Summation,
    chain,
    rebuild,
    substitute,
    walk,
)
from jacacc.kernels.support import Pin, affine_nest, box_forms, inequality_forms

__all__ = ["HOIST_DEPTH", "LoweredBinding", "LoweredProgram", "Term", "lower"]

#: a subtree this many operations deep, outside brackets and sums, becomes a binding of its own
HOIST_DEPTH = 32

_PREDICATES = {"==": "eq", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
#: a predicate of data comparisons: a comparison, a constant, or ("not", d), ("and", d, e), ("or", d, e)
Data = DataCmp | BoolConst | tuple
#: a case of a predicate: index conditions that all hold, and a data predicate or None
Case = tuple[tuple[Condition, ...], Data | None]


@dataclass(frozen=True)
class Term:
    """One definition of a binding, over its support, with the program names it reads (in the order
    of its canonical arguments ``a0, a1, …``); ``accumulate``: added into the buffer, not stored."""

    definition: Definition
    arguments: tuple[str, ...]
    accumulate: bool


@dataclass(frozen=True)
class LoweredBinding:
    """``name = Σ terms`` of ``shape`` (``()``: a scalar, kept in a buffer of one element).  ``clear``:
    definitions that zero the terms' supports, run first where the buffer holds an earlier result
    (a caller's ``out``)."""

    name: str
    shape: tuple[int, ...]
    terms: tuple[Term, ...]
    clear: tuple[Term, ...]


@dataclass(frozen=True)
class LoweredProgram:
    """The inputs (sorted names and types), the bindings in order and the result: a variable (an input
    or a binding) or a pair of them."""

    inputs: dict[str, Type]
    bindings: tuple[LoweredBinding, ...]
    result: Expr


def lower(expr: Expr) -> LoweredProgram:
    """Lower ``expr`` onto the kernel IR (see the module notes)."""
    bindings, out = bindings_of(gen_pushout(expr))
    lowered = [b for name, value in bindings for b in _binding(name, value)]
    result = _result(out, lowered)
    return LoweredProgram(dict(sorted(expr.free_vars.items())), tuple(lowered), result)


def _result(out: Expr, lowered: list[LoweredBinding]) -> Expr:
    """``out`` as a variable or a pair of variables, each other expression made a binding."""
    if isinstance(out, Pair):
        return Pair(_result(out.a, lowered), _result(out.b, lowered))
    if isinstance(out, Var):
        return out
    name = fresh("out")
    lowered += _binding(name, out)
    return Var(name, out.type)


# ----------------------------------------------------------------------------- bindings


def _binding(name: str, value: Expr) -> list[LoweredBinding]:
    """The lowered binding ``name = value``, after the bindings its deep subtrees were hoisted into."""
    hoisted: list[LoweredBinding] = []
    if isinstance(value.type, PairType):  # pragma: no cover - gen push-out eliminates pairs
        raise AssertionError(f"binding {name} is a pair after pair elimination")
    scope: list[tuple[str, int]] = []
    body = value
    while isinstance(body, Gen):
        extent = body.extent
        inner_name, body = unshadowed(body, {n for n, _ in scope})
        scope.append((inner_name, extent))
    while body.type != ():  # a whole tensor under ⊞: entry by entry
        inner_name = fresh("i")
        scope.append((inner_name, body.type[0]))
        body = _pushout(Access(body, index(inner_name)))
    shape = tuple(n for _, n in scope)
    indices = [f"i{k}" for k in range(len(scope))]  # canonical: programs that differ in names share kernels
    body = substitute_indices(body, {name: IvAffine({i: 1}) for (name, _), i in zip(scope, indices, strict=True)})
    addends = _operands(body, Add)
    if not any(isinstance(t, Bracket) for t in addends):  # one term: a sum without brackets stays whole
        addends = [body]
    pieces: list[tuple[tuple[Condition, ...], Expr, Data | None]] = []
    for term in addends:
        if isinstance(term, Bracket):
            pieces += [(conds, term.body, data) for conds, data in _cases(term.pred)]
        else:
            pieces.append(((), term, None))
    accumulate = len(addends) > 1
    terms = tuple(_term(indices, shape, conds, inner, data, accumulate, hoisted) for conds, inner, data in pieces)
    clear = tuple(_clear_term(t) for t in terms) if accumulate else ()
    return [*hoisted, LoweredBinding(name, shape, terms, clear)]


def _term(indices: list[str], shape: tuple[int, ...], conditions: tuple[Condition, ...], body: Expr,
          data: Data | None, accumulate: bool, hoisted: list[LoweredBinding]) -> Term:
    names = _Names(indices, shape)
    node = names.lowered(body)
    if data is not None:
        node = _where(names.numeric(data), node)
    if conditions:
        node = Guard(0, conditions, node)
    hoisted += names.hoisted
    return _make_term(tuple(indices), node, accumulate)


def _make_term(indices: tuple[str, ...], body: Node, accumulate: bool) -> Term:
    """The term of ``body``, its reads renamed ``a0, a1, …`` in the order they come."""
    arguments: dict[str, str] = {}
    for node in walk(body):
        if isinstance(node, Read) and node.argument not in arguments:
            arguments[node.argument] = f"a{len(arguments)}"

    def renamed(node: Node) -> Node | None:
        if isinstance(node, Read):
            return Read(node.column, arguments[node.argument], node.indices)
        return None

    return Term(_definition(indices, rebuild(body, renamed)), tuple(arguments), accumulate)


def _clear_term(term: Term) -> Term:
    """A definition that stores 0 over ``term``'s index support (reading nothing)."""
    body = term.definition.body
    zero: Node = Number(0, 0.0)
    node = Guard(0, body.conditions, zero) if isinstance(body, Guard) else zero
    return Term(_definition(term.definition.indices, node), (), False)


def _definition(indices: tuple[str, ...], body: Node) -> Definition:
    return Definition.printed("f", indices, body)


# ----------------------------------------------------------------------------- expressions


class _Names:
    """The lowering of one term's body over the term's ``indices`` (extents ``shape``).

    Reads name the program's variables; :func:`_definition` renames them canonically.  A subtree
    nested :data:`HOIST_DEPTH` operations deep, outside every bracket and sum, is hoisted into a
    binding of its own over the term's indices (collected in :attr:`hoisted`, run first), which
    the term reads: a chain of a thousand ``tanh(e) + x[1]`` becomes thirty kernels of one text."""

    def __init__(self, indices: list[str], shape: tuple[int, ...]) -> None:
        self.indices = list(indices)  # the index names in scope (the term's, then enclosing sums')
        self.term_indices = tuple(indices)
        self.shape = shape
        self.sums = 0
        self.enclosed = 0  # brackets and sums around the node being lowered (no hoisting inside)
        self.hoisted: list[LoweredBinding] = []

    def lowered(self, e: Expr) -> Node:
        return drive(self._step(e))[0]

    def _step(self, e: Expr) -> Step:
        """(node, depth) of ``e``; a step of :func:`~jacacc.iverson._stack.drive`."""
        node, depth = yield self._node(e)
        if depth >= HOIST_DEPTH and not self.enclosed:
            name = fresh("t")
            self.hoisted.append(LoweredBinding(name, self.shape, (_make_term(self.term_indices, node, False),), ()))
            at = tuple(Affine.of(i) for i in self.term_indices) or (Affine.make({}, 0),)
            return Read(0, name, at), 0
        return node, depth

    def _node(self, e: Expr) -> Step:
        if isinstance(e, Const):
            return Number(0, float(e.value)), 0
        if isinstance(e, Var):
            if e.type != ():  # pragma: no cover - gen push-out reads tensors entry by entry
                raise AssertionError(f"a tensor {e.name} read whole inside a scalar body")
            return Read(0, e.name, (Affine.make({}, 0),)), 0
        if isinstance(e, Access):
            affines: list[IvAffine] = []
            target: Expr = e
            while isinstance(target, Access):
                affines.append(target.idx)
                target = target.target
            assert isinstance(target, Var), "gen push-out leaves reads of variables only"
            return Read(0, target.name, tuple(_affine(a) for a in reversed(affines))), 0
        if isinstance(e, (Add, Mul)):
            op = "+" if isinstance(e, Add) else "*"
            operands = _operands(e, type(e))
            if len(operands) <= CHAIN_FOLD:  # the tree as written: the interpreter's rounding
                a, da = yield self._step(e.a)
                b, db = yield self._step(e.b)
                return Binary(0, op, a, b), 1 + max(da, db)
            # a long chain, rebalanced (chain): every walk over it stays shallow
            items, deepest = [], 0
            for x in operands:
                node, depth = yield self._step(x)
                items.append((op, node))
                deepest = max(deepest, depth)
            return chain(items), deepest + CHAIN_FOLD.bit_length() + len(operands).bit_length()
        if isinstance(e, Func):
            arg, depth = yield self._step(e.arg)
            return Call(0, operation_name(e.name), arg), depth + 1
        if isinstance(e, Bracket):
            self.enclosed += 1
            inner, depth = yield self._step(e.body)
            guarded = [_guarded(conds, None if data is None else self.numeric(data), inner)
                       for conds, data in _cases(e.pred)]
            self.enclosed -= 1
            return _total(guarded), depth + 2
        if isinstance(e, Sum):
            self.enclosed += 1
            node, depth = yield self._summation(e)
            self.enclosed -= 1
            return node, depth
        raise AssertionError(f"not in gen push-out form: {type(e).__name__}")  # pragma: no cover

    def numeric(self, data: Data) -> Node:
        """A data predicate as a node of value 1 where it holds and 0 elsewhere (the table's
        predicates; NaN compares unequal, as in the interpreter)."""
        if isinstance(data, DataCmp):
            self.enclosed += 1
            node = Call(0, _PREDICATES[data.op], self.lowered(data.lhs), self.lowered(data.rhs))
            self.enclosed -= 1
            return node
        if isinstance(data, BoolConst):
            return Number(0, 1.0 if data.value else 0.0)
        kind, *parts = data
        if kind == "not":
            return Binary(0, "-", Number(0, 1.0), self.numeric(parts[0]))
        a, b = (self.numeric(x) for x in parts)
        return Binary(0, "*", a, b) if kind == "and" else Call(0, "fmax", a, b)

    def _summation(self, e: Sum) -> Step:
        """``Σ_k …`` (nested sums peeled together), bounded by its bracket's index comparisons."""
        scope: list[tuple[str, int]] = []
        body: Expr = e
        while isinstance(body, Sum):
            name, inner = unshadowed(body, set(self.indices) | {n for n, _ in scope})
            scope.append((name, body.extent))
            body = inner
        saved = list(self.indices)
        canonical = [f"k{self.sums + k}" for k in range(len(scope))]
        self.sums += len(scope)
        body = substitute_indices(body, {name: IvAffine({c: 1}) for (name, _), c in zip(scope, canonical, strict=True)})
        self.indices += canonical
        extents = [n for _, n in scope]
        cases: list[Case] = [((), None)]
        if isinstance(body, Bracket):
            cases = _cases(body.pred)
            if len(cases) == 1:
                body = body.body
        inner, depth = yield self._step(body)
        conds: tuple[Condition, ...] = ()
        if len(cases) == 1:  # otherwise the guards are inside, the box outside
            conds, data = cases[0]
            if data is not None:
                inner = _where(self.numeric(data), inner)
        self.indices = saved
        return _bounded_sums(canonical, extents, conds, inner), depth + 2


def _operands(e: Expr, kind: type) -> list[Expr]:
    """The operands of a chain of ``kind`` (Add or Mul) rooted at ``e``, left to right."""
    out: list[Expr] = []
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            stack += [node.b, node.a]  # type: ignore[attr-defined]
        else:
            out.append(node)
    return out


def _bounded_sums(names: list[str], extents: list[int], conditions: tuple[Condition, ...], body: Node) -> Node:
    """``Σ_{k₀} Σ_{k₁} … [conditions] body`` with the conditions turned into the sums' bounds (the
    ones on the enclosing indices alone guard the whole sum)."""
    forms = box_forms(names, extents)
    for c in conditions:
        bounding = inequality_forms(c)
        # Iverson's comparisons are == and >=, never congruences or quotients: every one bounds a loop
        assert bounding is not None, f"not an affine comparison: {c}"
        forms += bounding
    nest = affine_nest(forms, names)
    if nest is None:
        return Number(0, 0.0)
    levels, outer = nest
    pinned = {level.variable: level.value for level in levels if isinstance(level, Pin)}
    node = substitute(body, pinned) if pinned else body
    for level in reversed(levels):
        if isinstance(level, Pin):
            node = Guard(0, level.conditions, node) if level.conditions else node
        else:
            node = Summation(0, level.variable, level.lower, level.upper, node)
    return Guard(0, outer, node) if outer else node


def _affine(a: IvAffine) -> Affine:
    return Affine.make(dict(a.coeffs), a.const)


def _where(data: Node, value: Node) -> Node:
    return Call(0, "where", data, value, Number(0, 0.0))


def _guarded(conditions: tuple[Condition, ...], data: Node | None, value: Node) -> Node:
    node = _where(data, value) if data is not None else value
    return Guard(0, conditions, node) if conditions else node


def _total(nodes: list[Node]) -> Node:
    if not nodes:
        return Number(0, 0.0)
    return chain([("+", n) for n in nodes])


# ----------------------------------------------------------------------------- predicates


def _cases(p: Pred) -> list[Case]:
    """Disjoint cases whose union is ``p``: index conditions, and a data predicate or None.  A
    predicate without index comparisons is one case (its data the whole predicate)."""
    if not _has_index_atoms(p):
        if isinstance(p, BoolConst):
            return [((), None)] if p.value else []
        return [((), _data(p))]
    if isinstance(p, Cmp):
        rel, a = p.normal()
        return _simplified([((Condition(_affine(a), rel),), None)])
    if isinstance(p, And):
        return _simplified([_conjoin(x, y) for x in _cases(p.a) for y in _cases(p.b)])
    if isinstance(p, Or):  # [a ∨ b] = [a] + [¬a ∧ b]
        return _simplified(_cases(p.a) + [_conjoin(x, y) for x in _complement(p.a) for y in _cases(p.b)])
    raise AssertionError(f"unknown predicate {type(p).__name__}")  # pragma: no cover


def _complement(p: Pred) -> list[Case]:
    """Disjoint cases whose union is ``¬p``."""
    if not _has_index_atoms(p):
        if isinstance(p, BoolConst):
            return [] if p.value else [((), None)]
        return [((), ("not", _data(p)))]
    if isinstance(p, Cmp):
        rel, a = p.normal()
        form = _affine(a)
        one = Affine.make({}, 1)
        if rel == ">=":  # ¬(a ≥ 0) ⇔ −a − 1 ≥ 0
            return _simplified([((Condition(form.scale(-1) - one, ">="),), None)])
        # ¬(a = 0) ⇔ a − 1 ≥ 0 or −a − 1 ≥ 0
        return _simplified([((Condition(form - one, ">="),), None), ((Condition(form.scale(-1) - one, ">="),), None)])
    if isinstance(p, And):  # ¬(a ∧ b) = ¬a ∨ (a ∧ ¬b)
        return _simplified(_complement(p.a) + [_conjoin(x, y) for x in _cases(p.a) for y in _complement(p.b)])
    if isinstance(p, Or):  # ¬(a ∨ b) = ¬a ∧ ¬b
        return _simplified([_conjoin(x, y) for x in _complement(p.a) for y in _complement(p.b)])
    raise AssertionError(f"unknown predicate {type(p).__name__}")  # pragma: no cover


def _data(p: Pred) -> Data:
    """A predicate of data comparisons only, as a :data:`Data` tree."""
    if isinstance(p, (DataCmp, BoolConst)):
        return p
    if isinstance(p, (And, Or)):
        return ("and" if isinstance(p, And) else "or", _data(p.a), _data(p.b))
    raise AssertionError(f"unknown predicate {type(p).__name__}")  # pragma: no cover


def _conjoin(x: Case, y: Case) -> Case:
    data = x[1] if y[1] is None else y[1] if x[1] is None else ("and", x[1], y[1])
    return (x[0] + y[0], data)


def _simplified(cases: list[Case]) -> list[Case]:
    """Constant conditions decided: a true one dropped, a case with a false one dropped."""
    out: list[Case] = []
    for conds, data in cases:
        constant = [c for c in conds if not c.form.coeffs]
        if any(not (c.form.const == 0 if c.relation == "==" else c.form.const >= 0) for c in constant):
            continue
        out.append((tuple(c for c in conds if c.form.coeffs), data))
    return out


def _has_index_atoms(p: Pred) -> bool:
    if isinstance(p, Cmp):
        return True
    if isinstance(p, (And, Or)):
        return _has_index_atoms(p.a) or _has_index_atoms(p.b)
    return False
