"""The syntax of the tensor language of paper 001 (§4.1): index expressions, predicates, expressions.

Three levels make up a program:

index expressions (:class:`Affine`)
    Integer-affine combinations of index variables, ``i + 2*j - 1``.  Index
    arithmetic is free in the cost model (§4.3).
predicates (:class:`Pred`)
    Comparisons ``==  <  <=  >  >=`` of index expressions, comparisons of scalar
    data (``x[i] > 0``, a *relational* predicate), and ``&`` / ``|`` of
    predicates.
expressions (:class:`Expr`)
    ``var``, constants, scalar ``+`` and ``*`` (``-`` and ``/`` are sugar:
    ``a - b = a + (-1)·b``, ``a / b = a · recip(b)``), black-box scalar
    functions, ``gen`` (tensor generation ⊞), ``sum`` (Σ), access ``x[a]``, the
    Iverson bracket ``[p]·e`` (over any type), ``let`` and pairs.

Every node is immutable and carries its type: a shape tuple for a tensor
(``()`` for a scalar) or a :class:`PairType`.  Types are checked as a program is
built; whether every index is bound and every read in range is checked once a
whole program is handed to an entry point (:mod:`~jacacc.iverson.check`).
Arithmetic, ``sum`` and the black-box functions take scalars only, as in the
paper; tensors are built with ``gen``.  Python's comparison operators on
expressions and index expressions build predicates, so structural equality of
nodes is :func:`same` (by :attr:`Expr.key`), never ``==``.

Examples
--------
>>> import jacacc.iverson as iv
>>> x = iv.var("x", (5,)); i, j = iv.index("i"), iv.index("j")
>>> eye = iv.gen(i, 5, iv.gen(j, 5, iv.bracket(i == j)))
>>> print(eye)
⊞_{i<5} ⊞_{j<5} [i = j]
>>> print(iv.sum(i, 4, x[i + 1] * x[i]))
Σ_{i<4} x[i + 1] · x[i]
"""

from __future__ import annotations

import functools
import itertools
import numbers
import weakref
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "FUNCTIONS", "IVERSON_NAMES", "LEFT_OUT", "Access", "Add", "Affine", "And", "BoolConst", "Bracket", "Cmp",
    "Const", "DataCmp", "Expr", "Func", "Gen", "IvTypeError", "Let", "Mul", "Or", "Pair", "PairType", "Pred",
    "Proj", "Sum", "Var", "as_affine", "as_expr", "bracket", "const", "cos", "exp", "fresh", "func", "gen",
    "index", "let", "log", "operation_name", "pair", "recip", "relu", "same", "sin", "sqrt", "sum", "tanh", "var",
]

from jacacc import ops
from jacacc.errors import DTypeError, JacaccError
from jacacc.iverson._stack import Step, drive


class IvTypeError(JacaccError, TypeError):
    """A program of the tensor language is ill-typed: shape mismatch, unbound index,
    read out of range, arithmetic on a tensor, ... (the message names the construct)."""


# ----------------------------------------------------------------------------- types


@dataclass(frozen=True)
class PairType:
    """The type of ``pair(a, b)``; arrays of pairs are pairs of arrays (§5.2's isomorphism)."""

    fst: Type
    snd: Type

    def __str__(self) -> str:
        return f"({type_text(self.fst)}, {type_text(self.snd)})"


Type = tuple[int, ...] | PairType  # noqa: UP007


def type_text(t: Type) -> str:
    """``'R'`` for a scalar, ``'R^(3, 4)'`` for a tensor, ``'(…, …)'`` for a pair."""
    if isinstance(t, PairType):
        return str(t)
    return "R" if t == () else f"R^{t}"


def prepend_extent(n: int, t: Type) -> Type:
    """The type of ``gen i n e`` for ``e`` of type ``t`` (pairs distribute: struct of arrays)."""
    if isinstance(t, PairType):
        return PairType(prepend_extent(n, t.fst), prepend_extent(n, t.snd))
    return (n,) + t


def drop_extent(t: Type) -> Type:
    """The type of ``x[a]`` for ``x`` of type ``t``."""
    if isinstance(t, PairType):
        return PairType(drop_extent(t.fst), drop_extent(t.snd))
    return t[1:]


def leading_extent(t: Type) -> int | None:
    """The extent of the first axis of ``t`` (the same for both sides of a pair), None for a scalar."""
    if isinstance(t, PairType):
        return leading_extent(t.fst)
    return t[0] if t else None


def _indexable_pair(t: PairType) -> bool:
    """Whether every leaf of ``t`` is an array with the same leading extent."""
    def extents(u: Type) -> list[int | None]:
        if isinstance(u, PairType):
            return extents(u.fst) + extents(u.snd)
        return [u[0] if u else None]

    found = extents(t)
    return found[0] is not None and all(e == found[0] for e in found)


def type_size(t: Type) -> int:
    """Number of scalars in a value of type ``t``."""
    if isinstance(t, PairType):
        return type_size(t.fst) + type_size(t.snd)
    return int(np.prod(t, dtype=np.int64))


# ----------------------------------------------------------------------------- names

_COUNTER = itertools.count()


def fresh(base: str) -> str:
    """A name no user program contains: ``base`` with a serial suffix after ``'`` (printed as-is)."""
    stem = base.split("'", 1)[0]
    return f"{stem}'{next(_COUNTER)}"


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise IvTypeError(f"{what} name must be a non-empty string, got {name!r}")
    return name


# ----------------------------------------------------------------------------- index expressions


class Affine:
    """An integer-affine index expression ``Σ c_v·v + c``; immutable, unhashable.

    ``==``, ``<``, ... build predicates (:class:`Cmp`); compare structurally
    with :attr:`key`.
    """

    __slots__ = ("coeffs", "const")
    __hash__ = None  # type: ignore[assignment]  # == builds a predicate

    def __init__(self, coeffs: Mapping[str, int] | Iterable[tuple[str, int]] = (), const: int = 0) -> None:
        items = coeffs.items() if isinstance(coeffs, Mapping) else coeffs
        merged: dict[str, int] = {}
        for name, c in items:
            merged[name] = merged.get(name, 0) + int(c)
        object.__setattr__(self, "coeffs", tuple(sorted((n, c) for n, c in merged.items() if c)))
        object.__setattr__(self, "const", int(const))

    def __setattr__(self, *_: Any) -> None:
        raise AttributeError("Affine is immutable")

    @property
    def key(self) -> tuple:
        return (self.coeffs, self.const)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(n for n, _ in self.coeffs)

    def coeff(self, name: str) -> int:
        return dict(self.coeffs).get(name, 0)

    @property
    def is_constant(self) -> bool:
        return not self.coeffs

    @property
    def variable(self) -> str | None:
        """The name if this is a bare index variable ``i``, else None."""
        if len(self.coeffs) == 1 and self.coeffs[0][1] == 1 and self.const == 0:
            return self.coeffs[0][0]
        return None

    def value(self, env: Mapping[str, Any]) -> Any:
        """Evaluate with ``env`` mapping index names to ints (or integer arrays)."""
        total: Any = self.const
        for name, c in self.coeffs:
            total = total + c * env[name]
        return total

    def substitute(self, mapping: Mapping[str, Affine]) -> Affine:
        coeffs: dict[str, int] = {}
        const = self.const
        for name, c in self.coeffs:
            if name in mapping:
                repl = mapping[name]
                const += c * repl.const
                for n2, c2 in repl.coeffs:
                    coeffs[n2] = coeffs.get(n2, 0) + c * c2
            else:
                coeffs[name] = coeffs.get(name, 0) + c
        return Affine(coeffs, const)

    def without(self, name: str) -> Affine:
        return Affine([(n, c) for n, c in self.coeffs if n != name], self.const)

    # arithmetic
    def __add__(self, other: Any) -> Affine:
        o = as_affine(other)
        return Affine(list(self.coeffs) + list(o.coeffs), self.const + o.const)

    __radd__ = __add__

    def __neg__(self) -> Affine:
        return Affine([(n, -c) for n, c in self.coeffs], -self.const)

    def __sub__(self, other: Any) -> Affine:
        return self + (-as_affine(other))

    def __rsub__(self, other: Any) -> Affine:
        return as_affine(other) + (-self)

    def __mul__(self, other: Any) -> Affine:
        if isinstance(other, Affine):
            if other.is_constant:
                other = other.const
            elif self.is_constant:
                return other * self.const
            else:
                raise IvTypeError(f"index expressions must be affine: ({self}) * ({other}) is not")
        if not _is_int(other):
            raise IvTypeError(f"an index expression can only be scaled by an integer, got {other!r}")
        return Affine([(n, c * int(other)) for n, c in self.coeffs], self.const * int(other))

    __rmul__ = __mul__

    # predicates
    def __eq__(self, other: Any) -> Cmp:  # type: ignore[override]
        return Cmp("==", self, as_affine(other))

    def __ne__(self, other: Any) -> Pred:  # type: ignore[override]
        o = as_affine(other)
        return Cmp("<", self, o) | Cmp(">", self, o)

    def __lt__(self, other: Any) -> Cmp:
        return Cmp("<", self, as_affine(other))

    def __le__(self, other: Any) -> Cmp:
        return Cmp("<=", self, as_affine(other))

    def __gt__(self, other: Any) -> Cmp:
        return Cmp(">", self, as_affine(other))

    def __ge__(self, other: Any) -> Cmp:
        return Cmp(">=", self, as_affine(other))

    def __bool__(self) -> bool:
        raise IvTypeError(f"the index expression {self} has no truth value")

    def __str__(self) -> str:
        parts: list[str] = []
        for name, c in self.coeffs:
            mag = abs(c)
            term = name if mag == 1 else f"{mag}*{name}"
            if not parts:
                parts.append(term if c > 0 else f"-{term}")
            else:
                parts.append(f"{'+' if c > 0 else '-'} {term}")
        if self.const or not parts:
            if not parts:
                parts.append(str(self.const))
            else:
                parts.append(f"{'+' if self.const > 0 else '-'} {abs(self.const)}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Affine({self})"


def _is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def as_affine(x: Any) -> Affine:
    """An index expression from an :class:`Affine`, an int or an index-variable name."""
    if isinstance(x, Affine):
        return x
    if _is_int(x):
        return Affine((), int(x))
    if isinstance(x, Expr):
        raise IvTypeError(f"a scalar expression ({x}) cannot be used as an index; indices are affine "
                          "expressions of index variables")
    raise IvTypeError(f"an index must be an integer-affine expression of index variables, got {x!r}")


def index(name: str) -> Affine:
    """An index variable, bound by an enclosing :func:`gen` or :func:`sum`."""
    return Affine(((_check_name(name, "index"), 1),))


# ----------------------------------------------------------------------------- predicates

_CMP_TEXT = {"==": "=", "<": "<", "<=": "≤", ">": ">", ">=": "≥"}


class Pred:
    """A predicate; ``&`` and ``|`` combine predicates.  Has no truth value in Python."""

    __slots__ = ("_key",)
    __hash__ = None  # type: ignore[assignment]

    def __and__(self, other: Pred) -> Pred:
        return And(self, _as_pred(other))

    def __rand__(self, other: Pred) -> Pred:
        return And(_as_pred(other), self)

    def __or__(self, other: Pred) -> Pred:
        return Or(self, _as_pred(other))

    def __ror__(self, other: Pred) -> Pred:
        return Or(_as_pred(other), self)

    def __bool__(self) -> bool:
        raise IvTypeError(f"the predicate [{self}] has no Python truth value; use iv.bracket({self})")

    @property
    def key(self) -> tuple:
        k = getattr(self, "_key", None)
        if k is None:
            k = self._make_key()
            object.__setattr__(self, "_key", k)
        return k

    def _make_key(self) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError


def _as_pred(p: Any) -> Pred:
    if isinstance(p, Pred):
        return p
    if isinstance(p, bool):
        return BoolConst(p)
    raise IvTypeError(f"expected a predicate (a comparison of index expressions or of scalars), got {p!r}")


class BoolConst(Pred):
    """``true`` or ``false``."""

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        object.__setattr__(self, "value", bool(value))

    def _make_key(self) -> tuple:
        return ("bool", self.value)

    def __str__(self) -> str:
        return "true" if self.value else "false"


class Cmp(Pred):
    """``lhs op rhs`` between index expressions, ``op`` in ``== < <= > >=``."""

    __slots__ = ("op", "lhs", "rhs")

    def __init__(self, op: str, lhs: Affine, rhs: Affine) -> None:
        if op not in _CMP_TEXT:
            raise IvTypeError(f"unknown comparison {op!r}")
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "lhs", as_affine(lhs))
        object.__setattr__(self, "rhs", as_affine(rhs))

    def normal(self) -> tuple[str, Affine]:
        """``('==', a)`` for ``a = 0`` or ``('>=', a)`` for ``a ≥ 0`` (integer semantics)."""
        d = self.lhs - self.rhs
        if self.op == "==":
            return "==", d
        if self.op == ">=":
            return ">=", d
        if self.op == ">":
            return ">=", d - 1
        if self.op == "<=":
            return ">=", -d
        return ">=", -d - 1

    def _make_key(self) -> tuple:
        rel, a = self.normal()
        if rel == "==":  # a = 0 and -a = 0 are one predicate
            first = a.coeffs[0][1] if a.coeffs else a.const
            if first < 0:
                a = -a
        return ("cmp", rel, a.key)

    def __str__(self) -> str:
        return f"{self.lhs} {_CMP_TEXT[self.op]} {self.rhs}"


class DataCmp(Pred):
    """A relational predicate on scalar data, ``lhs op rhs`` (e.g. relu's ``x > 0``)."""

    __slots__ = ("op", "lhs", "rhs")

    def __init__(self, op: str, lhs: Expr, rhs: Expr) -> None:
        if op not in _CMP_TEXT:
            raise IvTypeError(f"unknown comparison {op!r}")
        for side in (lhs, rhs):
            if side.type != ():
                raise IvTypeError(f"a data comparison needs scalars, got {side} of type {type_text(side.type)}")
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "lhs", lhs)
        object.__setattr__(self, "rhs", rhs)

    def _make_key(self) -> tuple:
        return ("data", self.op, self.lhs.key, self.rhs.key)

    def __str__(self) -> str:
        return f"{self.lhs} {_CMP_TEXT[self.op]} {self.rhs}"


class _Connective(Pred):
    """A binary connective of predicates (``∧`` or ``∨``)."""

    __slots__ = ("a", "b")
    symbol = ""

    def __init__(self, a: Pred, b: Pred) -> None:
        object.__setattr__(self, "a", _as_pred(a))
        object.__setattr__(self, "b", _as_pred(b))

    def _make_key(self) -> tuple:
        return (self.symbol, self.a.key, self.b.key)

    def __str__(self) -> str:
        return f"{_pred_operand(self.a, type(self))} {self.symbol} {_pred_operand(self.b, type(self))}"


class And(_Connective):
    """``a ∧ b``."""

    symbol = "∧"


class Or(_Connective):
    """``a ∨ b``."""

    symbol = "∨"


def _pred_operand(p: Pred, parent: type) -> str:
    if isinstance(p, (And, Or)) and not isinstance(p, parent):
        return f"({p})"
    return str(p)


def pred_children_exprs(p: Pred) -> list[Expr]:
    """The scalar expressions a predicate reads (those of its data comparisons)."""
    if isinstance(p, DataCmp):
        return [p.lhs, p.rhs]
    if isinstance(p, (And, Or)):
        return pred_children_exprs(p.a) + pred_children_exprs(p.b)
    return []


def map_pred(p: Pred, on_cmp: Callable[[Cmp], Pred], on_expr: Callable[[Expr], Expr]) -> Pred:
    """Rebuild ``p`` with ``on_cmp`` applied to index comparisons and ``on_expr`` to data operands."""
    if isinstance(p, Cmp):
        return on_cmp(p)
    if isinstance(p, DataCmp):
        lhs, rhs = on_expr(p.lhs), on_expr(p.rhs)
        return p if (lhs is p.lhs and rhs is p.rhs) else DataCmp(p.op, lhs, rhs)
    if isinstance(p, And):
        a, b = map_pred(p.a, on_cmp, on_expr), map_pred(p.b, on_cmp, on_expr)
        return p if (a is p.a and b is p.b) else And(a, b)
    if isinstance(p, Or):
        a, b = map_pred(p.a, on_cmp, on_expr), map_pred(p.b, on_cmp, on_expr)
        return p if (a is p.a and b is p.b) else Or(a, b)
    return p


def pred_indices(p: Pred) -> frozenset[str]:
    """Index variables a predicate mentions (in comparisons and in data operands)."""
    if isinstance(p, Cmp):
        return p.lhs.names | p.rhs.names
    if isinstance(p, DataCmp):
        return p.lhs.free_indices | p.rhs.free_indices
    if isinstance(p, (And, Or)):
        return pred_indices(p.a) | pred_indices(p.b)
    return frozenset()


def conjuncts(p: Pred) -> list[Pred]:
    """The atoms of ``p``'s top-level conjunction (``true`` contributes none)."""
    if isinstance(p, And):
        return conjuncts(p.a) + conjuncts(p.b)
    if isinstance(p, BoolConst) and p.value:
        return []
    return [p]


def conjoin(preds: Sequence[Pred]) -> Pred:
    """``p₁ ∧ p₂ ∧ …`` (``true`` for none)."""
    if not preds:
        return BoolConst(True)
    out = preds[0]
    for p in preds[1:]:
        out = And(out, p)
    return out


def index_part(p: Pred) -> Pred:
    """``p`` with every data comparison replaced by *true*: what holds wherever ``p`` does, and
    the guard under which ``p``'s data operands are evaluated."""
    if isinstance(p, DataCmp):
        return BoolConst(True)
    if isinstance(p, And):
        return And(index_part(p.a), index_part(p.b))
    if isinstance(p, Or):
        return Or(index_part(p.a), index_part(p.b))
    return p


def has_data_atoms(p: Pred) -> bool:
    if isinstance(p, DataCmp):
        return True
    if isinstance(p, (And, Or)):
        return has_data_atoms(p.a) or has_data_atoms(p.b)
    return False


# ----------------------------------------------------------------------------- expressions

#: Iverson's own names for operations of the table (:mod:`jacacc.ops`); every other function
#: is called by the table's canonical name.  The one place the two vocabularies meet.
IVERSON_NAMES: dict[str, str] = {"reciprocal": "recip"}
#: the unary operations of the table the language leaves out, and why
LEFT_OUT: dict[str, str] = {
    "neg": "the language's own -x",
    "pos": "the identity",
    "stop_gradient": "a front end's device for custom derivative rules, not a function",
    "tangent_seed": "a front end's device for custom derivative rules, not a function",
}


def operation_name(name: str) -> str:
    """The :mod:`jacacc.ops` name of the language's function ``name`` (``recip`` → ``reciprocal``)."""
    return _OPS_NAMES.get(name, name)


_OPS_NAMES = {mine: theirs for theirs, mine in IVERSON_NAMES.items()}

#: the black-box scalar functions: every unary operation of :mod:`jacacc.ops` but those in
#: :data:`LEFT_OUT`, by its Iverson name, with its NumPy value (``recip(0)`` is inf under
#: ``np.errstate``, never a Python exception).  Derivatives and spellings are the table's.
FUNCTIONS: dict[str, Callable[[float], float]] = {
    IVERSON_NAMES.get(name, name): ops.get(name).function for name in ops.names(arity=1) if name not in LEFT_OUT
}


class Key:
    """The structural identity of a program (:attr:`Expr.key`): one object per distinct live
    program, compared by identity."""

    __slots__ = ("__weakref__",)

    def __repr__(self) -> str:
        return f"<Key {id(self):#x}>"


# key contents -> its Key; weak, so the table holds only the keys of programs still alive
_KEYS: weakref.WeakValueDictionary[tuple, Key] = weakref.WeakValueDictionary()


def _token(contents: tuple) -> Key:
    """The one :class:`Key` of ``contents`` (a shallow tuple naming child keys)."""
    found = _KEYS.get(contents)
    if found is None:
        found = Key()
        _KEYS[contents] = found
    return found


def _operands(node: Expr) -> list[Expr]:
    """The expressions a node's key and free names are made of: its children and, for a
    bracket, the operands of its data comparisons."""
    if isinstance(node, Bracket):
        return list(node.children) + pred_children_exprs(node.pred)
    return list(node.children)


def _fill(root: Expr, slot: str, compute: Callable[[Expr], Any]) -> None:
    """Compute the cached attribute ``slot`` for ``root`` and every descendant lacking it, children
    first, with an explicit stack (a property computed recursively would exceed Python's recursion
    limit on programs thousands of nodes deep)."""
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if ready:  # its operands are done
            object.__setattr__(node, slot, compute(node))
            continue
        if id(node) in seen or getattr(node, slot, None) is not None:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in _operands(node))


class Expr:
    """Base class of expressions: immutable nodes with a :attr:`type`.

    Operators build new nodes: ``+ - * /`` on scalars, ``x[a, b]`` reads,
    comparisons give data predicates, ``.fst`` / ``.snd`` project pairs.
    """

    __slots__ = ("type", "_key", "_free_indices", "_free_vars")
    __hash__ = None  # type: ignore[assignment]
    children: tuple[Expr, ...] = ()

    def _init(self, t: Type) -> None:
        object.__setattr__(self, "type", t)

    def __setattr__(self, *_: Any) -> None:
        raise AttributeError(f"{type(self).__name__} nodes are immutable")

    # --- structure
    @property
    def key(self) -> Key:
        """Structural identity: two live nodes have the same (``is``-identical) key exactly when
        they are the same program.

        Keys are hash-consed (:func:`_token`): a node's key names its children's keys, not their
        contents, so comparing and hashing keys is constant-time however deep the program is.
        """
        k = getattr(self, "_key", None)
        if k is None:
            _fill(self, "_key", lambda node: _token(node._make_key()))
            k = self._key
        return k

    def _make_key(self) -> tuple:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def free_indices(self) -> frozenset[str]:
        """Index variables read and not bound inside this expression."""
        f = getattr(self, "_free_indices", None)
        if f is None:
            _fill(self, "_free_indices", lambda node: node._compute_free_indices())
            f = self._free_indices
        return f

    def _compute_free_indices(self) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for c in self.children:
            out |= c.free_indices
        return out

    @property
    def free_vars(self) -> dict[str, Type]:
        """Tensor variables read and not bound by a ``let`` inside: name → type."""
        f = getattr(self, "_free_vars", None)
        if f is None:
            _fill(self, "_free_vars", lambda node: node._compute_free_vars())
            f = self._free_vars
        return f

    def _compute_free_vars(self) -> dict[str, Type]:
        out: dict[str, Type] = {}
        for c in self.children:
            _merge_vars(out, c.free_vars, self)
        return out

    @property
    def shape(self) -> tuple[int, ...]:
        if isinstance(self.type, PairType):
            raise IvTypeError(f"{self} is a pair, it has no shape")
        return self.type

    # --- operators
    def __add__(self, other: Any) -> Expr:
        return Add(self, as_expr(other))

    def __radd__(self, other: Any) -> Expr:
        return Add(as_expr(other), self)

    def __sub__(self, other: Any) -> Expr:
        return Add(self, -as_expr(other))

    def __rsub__(self, other: Any) -> Expr:
        return Add(as_expr(other), -self)

    def __neg__(self) -> Expr:
        if isinstance(self, Const):
            return Const(-self.value)
        return Mul(Const(-1.0), self)

    def __mul__(self, other: Any) -> Expr:
        return _product(self, as_expr(other))

    def __rmul__(self, other: Any) -> Expr:
        return _product(as_expr(other), self)

    def __truediv__(self, other: Any) -> Expr:
        o = as_expr(other)
        if isinstance(o, Const):
            if o.value == 0:
                raise ZeroDivisionError(f"division of {self} by the constant 0")
            return _product(Const(1.0 / o.value), self)
        return _product(self, Func("recip", o))

    def __rtruediv__(self, other: Any) -> Expr:
        return _product(as_expr(other), Func("recip", self))

    def __getitem__(self, idx: Any) -> Expr:
        items = idx if isinstance(idx, tuple) else (idx,)
        out: Expr = self
        for a in items:
            out = Access(out, as_affine(a))
        return out

    def __eq__(self, other: Any) -> DataCmp:  # type: ignore[override]
        return DataCmp("==", self, as_expr(other))

    def __lt__(self, other: Any) -> DataCmp:
        return DataCmp("<", self, as_expr(other))

    def __le__(self, other: Any) -> DataCmp:
        return DataCmp("<=", self, as_expr(other))

    def __gt__(self, other: Any) -> DataCmp:
        return DataCmp(">", self, as_expr(other))

    def __ge__(self, other: Any) -> DataCmp:
        return DataCmp(">=", self, as_expr(other))

    def __bool__(self) -> bool:
        raise IvTypeError(f"the expression {self} has no Python truth value")

    @property
    def fst(self) -> Expr:
        return Proj(0, self)

    @property
    def snd(self) -> Expr:
        return Proj(1, self)

    def __str__(self) -> str:
        from jacacc.iverson.printer import to_text

        return to_text(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self} : {type_text(self.type)}>"

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:  # pragma: no cover - abstract
        """This node with new children (same kind, same non-expression fields)."""
        raise NotImplementedError


def _merge_vars(out: dict[str, Type], more: Mapping[str, Type], where: Expr) -> None:
    # conflicts are looked for on the smaller side and the merge is one dict update: the free
    # variables of a long let chain are many, and a merge per node must not walk them in Python
    small, large = (more, out) if len(more) <= len(out) else (out, more)
    for name, t in small.items():
        u = large.get(name)
        if u is not None and u != t:
            first, second = (out[name], more[name])
            raise IvTypeError(f"variable {name!r} is used with types {type_text(first)} and {type_text(second)} "
                              f"(in {where})")
    out.update(more)


def same(a: Expr | Pred | Affine, b: Expr | Pred | Affine) -> bool:
    """Structural equality of two programs (``==`` builds predicates)."""
    return a is b or a.key == b.key


def as_expr(x: Any) -> Expr:
    """An expression from an :class:`Expr` or a Python / NumPy real number."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return Const(float(x))
    if isinstance(x, (np.ndarray, np.generic, numbers.Complex)) and np.ndim(x) == 0:
        return Const(real_number(x, "a constant"))  # refuses complex and non-numeric NumPy scalars
    if isinstance(x, Affine):
        raise IvTypeError(f"the index expression {x} cannot be used as a scalar value; use a bracket "
                          f"(e.g. iv.bracket({x} == 0))")
    if isinstance(x, Pred):
        raise IvTypeError(f"the predicate {x} is not a value; wrap it in iv.bracket(...)")
    raise IvTypeError(f"expected an expression or a number, got {type(x).__name__} {x!r}")


def real_number(value: Any, what: str) -> float:
    """``value`` as a float, or a :class:`~jacacc.errors.DTypeError` naming it: complex numbers,
    strings and other non-real values are refused (``float('1.5')`` or dropping an imaginary
    part would silently compute something else)."""
    item = value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value
    if isinstance(item, (numbers.Real, np.bool_)) or (isinstance(item, np.generic) and item.dtype.kind in "fiub"):
        return float(item)
    if isinstance(item, (numbers.Complex, np.complexfloating)):
        raise DTypeError(f"{what} must be a real number, got the complex number {value!r}")
    raise DTypeError(f"{what} must be a real number, got {type(value).__name__} {value!r}")


def _require_scalar(e: Expr, construct: str) -> None:
    if e.type != ():
        raise IvTypeError(f"{construct} takes scalars, but {e} has type {type_text(e.type)}")


def _product(a: Expr, b: Expr) -> Expr:
    """``a * b``; a bracket factor guards the whole product (``([p]·a)·b = [p]·(a·b)``), so the
    multiplication is not performed where ``p`` is false, and a unit bracket ``[p]·1`` guards
    the other side instead of multiplying."""
    if isinstance(a, Bracket) and (_is_one(a.body) or (a.type == () and b.type == ())):
        return Bracket(a.pred, b if _is_one(a.body) else _product(a.body, b))
    if isinstance(b, Bracket) and (_is_one(b.body) or (a.type == () and b.type == ())):
        return Bracket(b.pred, a if _is_one(b.body) else _product(a, b.body))
    return Mul(a, b)


def _is_one(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 1.0


class Var(Expr):
    """A tensor variable: an input bound by name at evaluation, or a ``let``-bound name."""

    __slots__ = ("name",)

    def __init__(self, name: str, shape: Iterable[int] | PairType) -> None:
        object.__setattr__(self, "name", _check_name(name, "variable"))
        if isinstance(shape, PairType):
            t: Type = shape
        else:
            try:
                t = tuple(shape)
            except TypeError:
                raise IvTypeError(f"the shape of {name!r} must be a tuple of ints, got {shape!r}") from None
            if not all(_is_int(s) for s in t):  # int(2.5) would silently truncate, int('a') fail obscurely
                raise IvTypeError(f"the shape of {name!r} must be a tuple of ints, got {shape!r}")
            t = tuple(int(s) for s in t)
            if any(s <= 0 for s in t):
                raise IvTypeError(f"the shape of {name!r} must have positive extents, got {t}")
        self._init(t)

    def _make_key(self) -> tuple:
        return ("var", self.name, self.type)

    def _compute_free_indices(self) -> frozenset[str]:
        return frozenset()

    def _compute_free_vars(self) -> dict[str, Type]:
        return {self.name: self.type}

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:
        return self


class Const(Expr):
    """A real constant."""

    __slots__ = ("value",)

    def __init__(self, value: float) -> None:
        v = real_number(value, "a constant")
        if not np.isfinite(v):
            raise IvTypeError(f"constants must be finite, got {value!r}")
        object.__setattr__(self, "value", v)
        self._init(())

    def _make_key(self) -> tuple:
        return ("const", self.value)

    def _compute_free_indices(self) -> frozenset[str]:
        return frozenset()

    def _compute_free_vars(self) -> dict[str, Type]:
        return {}

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:
        return self


class _Binary(Expr):
    """A binary scalar operation (the two of the language: ``+`` and ``·``)."""

    __slots__ = ("a", "b")
    symbol = ""

    def __init__(self, a: Expr, b: Expr) -> None:
        a, b = as_expr(a), as_expr(b)
        _require_scalar(a, self.symbol)
        _require_scalar(b, self.symbol)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        self._init(())

    @property
    def children(self) -> tuple[Expr, ...]:  # type: ignore[override]
        return (self.a, self.b)

    def _make_key(self) -> tuple:
        return (self.symbol, self.a.key, self.b.key)

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:
        return type(self)(*children)


class Add(_Binary):
    """Scalar addition ``a + b``."""

    symbol = "+"


class Mul(_Binary):
    """Scalar multiplication ``a · b``."""

    symbol = "·"


def _unknown_function(name: Any) -> str:
    canonical = ops.resolve(name) if isinstance(name, str) else None
    if canonical in LEFT_OUT:
        return f"the operation {name!r} is not a function of the language ({LEFT_OUT[canonical]})"
    mine = IVERSON_NAMES.get(canonical, canonical)
    if mine in FUNCTIONS:  # another name of one of the language's functions: iv.func takes it
        return f"{name!r} is called {mine!r} in the language (or use iv.func)"
    if canonical is not None:
        return f"the operation {name!r} takes {ops.get(canonical).arity} operands; the language's functions take one"
    return f"unknown function {name!r}; known: {', '.join(sorted(FUNCTIONS))}"


class Func(Expr):
    """A black-box scalar function (one of :data:`FUNCTIONS`) applied to a scalar."""

    __slots__ = ("name", "arg")

    def __init__(self, name: str, arg: Expr) -> None:
        if name not in FUNCTIONS:
            raise IvTypeError(_unknown_function(name))
        arg = as_expr(arg)
        _require_scalar(arg, name)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "arg", arg)
        self._init(())

    @property
    def children(self) -> tuple[Expr, ...]:  # type: ignore[override]
        return (self.arg,)

    def _make_key(self) -> tuple:
        return ("func", self.name, self.arg.key)

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:
        return Func(self.name, children[0])


def _binder_name(i: Any, construct: str) -> str:
    if isinstance(i, str):
        return _check_name(i, "index")
    if isinstance(i, Affine) and i.variable is not None:
        return i.variable
    raise IvTypeError(f"{construct} binds an index variable (iv.index(name)), got {i!r}")


def _extent(n: Any, construct: str, name: str) -> int:
    if not _is_int(n) or int(n) <= 0:
        raise IvTypeError(f"{construct} over {name} needs a positive integer extent, got {n!r}")
    return int(n)


class _Binder(Expr):
    __slots__ = ("index", "extent", "body")

    @property
    def children(self) -> tuple[Expr, ...]:  # type: ignore[override]
        return (self.body,)

    def _compute_free_indices(self) -> frozenset[str]:
        return self.body.free_indices - {self.index}

    def _make_key(self) -> tuple:
        # alpha-equivalence: the bound name becomes a marker unique along any nesting
        # chain (the binder's height: binders strictly inside have smaller heights)
        marker = f"#{binder_height(self)}"
        body = substitute_indices(self.body, {self.index: Affine(((marker, 1),))}) if self.index in \
            self.body.free_indices else self.body
        return (type(self).__name__.lower(), self.extent, marker, body.key)

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:
        return type(self)(self.index, self.extent, children[0])


class Gen(_Binder):
    """Tensor generation ``⊞_{i<n} e``: the tensor whose ``i``-th entry is ``e``."""

    def __init__(self, i: Any, n: Any, body: Any) -> None:
        name = _binder_name(i, "gen")
        object.__setattr__(self, "index", name)
        object.__setattr__(self, "extent", _extent(n, "gen", name))
        object.__setattr__(self, "body", as_expr(body))
        self._init(prepend_extent(self.extent, self.body.type))


class Sum(_Binder):
    """Summation ``Σ_{i<n} e`` of a scalar over ``0 ≤ i < n``."""

    def __init__(self, i: Any, n: Any, body: Any) -> None:
        name = _binder_name(i, "sum")
        body = as_expr(body)
        _require_scalar(body, "sum")
        object.__setattr__(self, "index", name)
        object.__setattr__(self, "extent", _extent(n, "sum", name))
        object.__setattr__(self, "body", body)
        self._init(())


class Access(Expr):
    """Tensor access ``x[a]`` at an affine index expression ``a``."""

    __slots__ = ("target", "idx")

    def __init__(self, target: Expr, idx: Any) -> None:
        target = as_expr(target)
        if leading_extent(target.type) is None:
            raise IvTypeError(f"cannot index the scalar {target}")
        if isinstance(target.type, PairType) and not _indexable_pair(target.type):
            raise IvTypeError(f"cannot index the pair {target} of type {type_text(target.type)}: only a pair of "
                              "arrays of one leading extent (an array of pairs) can be indexed")
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "idx", as_affine(idx))
        self._init(drop_extent(target.type))

    @property
    def children(self) -> tuple[Expr, ...]:  # type: ignore[override]
        return (self.target,)

    def _compute_free_indices(self) -> frozenset[str]:
        return self.target.free_indices | self.idx.names

    def _make_key(self) -> tuple:
        return ("access", self.target.key, self.idx.key)

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:
        return Access(children[0], self.idx)


class Bracket(Expr):
    """The Iverson bracket ``[p]·e``: ``e`` where ``p`` holds, zero (of ``e``'s type) elsewhere."""

    __slots__ = ("pred", "body")

    def __init__(self, pred: Pred, body: Expr) -> None:
        object.__setattr__(self, "pred", _as_pred(pred))
        object.__setattr__(self, "body", as_expr(body))
        self._init(self.body.type)

    @property
    def children(self) -> tuple[Expr, ...]:  # type: ignore[override]
        return (self.body,)

    def _compute_free_indices(self) -> frozenset[str]:
        return self.body.free_indices | pred_indices(self.pred)

    def _compute_free_vars(self) -> dict[str, Type]:
        out = dict(self.body.free_vars)
        for e in pred_children_exprs(self.pred):
            _merge_vars(out, e.free_vars, self)
        return out

    def _make_key(self) -> tuple:
        return ("bracket", self.pred.key, self.body.key)

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:
        return Bracket(self.pred, children[0])


class Let(Expr):
    """``let name = value in body``; ``body`` reads the value as ``var(name, value's type)``."""

    __slots__ = ("name", "value", "body")

    def __init__(self, name: str, value: Expr, body: Expr) -> None:
        object.__setattr__(self, "name", _check_name(name, "let"))
        object.__setattr__(self, "value", as_expr(value))
        body = as_expr(body)
        used = body.free_vars.get(name)
        if used is not None and used != self.value.type:
            raise IvTypeError(f"let {name}: the value has type {type_text(self.value.type)} but the body reads "
                              f"{name} as {type_text(used)}")
        object.__setattr__(self, "body", body)
        self._init(body.type)

    @property
    def children(self) -> tuple[Expr, ...]:  # type: ignore[override]
        return (self.value, self.body)

    def _compute_free_vars(self) -> dict[str, Type]:
        value, body = self.value.free_vars, self.body.free_vars
        out = dict(value)
        if self.name in body:  # the body's reads of the bound name are not free
            body = dict(body)
            del body[self.name]
        _merge_vars(out, body, self)
        return out

    def _make_key(self) -> tuple:
        return ("let", self.name, self.value.key, self.body.key)

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:
        return Let(self.name, children[0], children[1])


class Pair(Expr):
    """The pair ``(a, b)``."""

    __slots__ = ("a", "b")

    def __init__(self, a: Expr, b: Expr) -> None:
        a, b = as_expr(a), as_expr(b)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        self._init(PairType(a.type, b.type))

    @property
    def children(self) -> tuple[Expr, ...]:  # type: ignore[override]
        return (self.a, self.b)

    def _make_key(self) -> tuple:
        return ("pair", self.a.key, self.b.key)

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:
        return Pair(*children)


class Proj(Expr):
    """``e.fst`` (``which=0``) or ``e.snd`` (``which=1``) of a pair."""

    __slots__ = ("which", "arg")

    def __init__(self, which: int, arg: Expr) -> None:
        arg = as_expr(arg)
        if not isinstance(arg.type, PairType):
            raise IvTypeError(f"{'.fst' if which == 0 else '.snd'} of {arg}, which is not a pair "
                              f"(type {type_text(arg.type)})")
        object.__setattr__(self, "which", int(which))
        object.__setattr__(self, "arg", arg)
        self._init(arg.type.fst if which == 0 else arg.type.snd)

    @property
    def children(self) -> tuple[Expr, ...]:  # type: ignore[override]
        return (self.arg,)

    def _make_key(self) -> tuple:
        return ("proj", self.which, self.arg.key)

    def rebuild(self, children: tuple[Expr, ...]) -> Expr:
        return Proj(self.which, children[0])


# ----------------------------------------------------------------------------- substitution


def binder_height(e: Expr) -> int:
    """1 + the largest number of nested ``gen``/``sum`` binders strictly inside ``e``'s body."""
    best = 0
    stack = [(c, 0) for c in e.children]
    while stack:
        node, depth = stack.pop()
        d = depth + isinstance(node, _Binder)
        best = max(best, d)
        stack.extend((c, d) for c in node.children)
        if isinstance(node, Bracket):
            stack.extend((c, d) for c in pred_children_exprs(node.pred))
    return best + 1


def substitute_indices(e: Expr, mapping: Mapping[str, Affine]) -> Expr:
    """``e`` with free index variables replaced by affine expressions (capture-avoiding)."""
    return drive(_substitute_indices(e, mapping))


def _substitute_indices(e: Expr, mapping: Mapping[str, Affine]) -> Step:
    mapping = {k: v for k, v in mapping.items() if k in e.free_indices}
    if not mapping:
        return e
    incoming = frozenset().union(*(v.names for v in mapping.values()))

    def on_pred(p: Pred) -> Pred:
        return map_pred(p, lambda c: Cmp(c.op, c.lhs.substitute(mapping), c.rhs.substitute(mapping)),
                        lambda x: substitute_indices(x, mapping))

    if isinstance(e, _Binder):
        name, body = e.index, e.body
        inner = {k: v for k, v in mapping.items() if k != name}
        if name in incoming:  # rename the binder so it does not capture a substituted name
            new = fresh(name)
            body = yield _substitute_indices(body, {name: index(new)})
            name = new
        return type(e)(name, e.extent, (yield _substitute_indices(body, inner)))
    if isinstance(e, Access):
        return Access((yield _substitute_indices(e.target, mapping)), e.idx.substitute(mapping))
    if isinstance(e, Bracket):
        return Bracket(on_pred(e.pred), (yield _substitute_indices(e.body, mapping)))
    children = []
    for c in e.children:
        children.append((yield _substitute_indices(c, mapping)))
    return e.rebuild(tuple(children))


def substitute_var(e: Expr, name: str, value: Expr) -> Expr:
    """``e`` with free reads of variable ``name`` replaced by ``value`` (capture-avoiding).

    ``value`` may have free index variables (e.g. ``y'[i]`` when a ``let`` is
    lifted out of a ``gen`` over ``i``); binders of ``e`` that would capture
    them are renamed.
    """
    return drive(_substitute_vars(e, {name: value}))


def substitute_vars(e: Expr, mapping: Mapping[str, Expr]) -> Expr:
    """``e`` with free reads of each variable of ``mapping`` replaced by its value, simultaneously
    (capture-avoiding, as :func:`substitute_var`): one pass for many names."""
    return drive(_substitute_vars(e, mapping))


def _substitute_vars(e: Expr, mapping: Mapping[str, Expr]) -> Step:
    free = e.free_vars
    if len(free) < len(mapping):  # filter by the smaller side: long let chains carry large mappings
        mapping = {k: mapping[k] for k in free if k in mapping}
    else:
        mapping = {k: v for k, v in mapping.items() if k in free}
    if not mapping:
        return e
    if isinstance(e, Var):
        return mapping[e.name]
    if isinstance(e, Let):
        v = yield _substitute_vars(e.value, mapping)
        inner = {k: x for k, x in mapping.items() if k != e.name}
        if not inner:
            return Let(e.name, v, e.body)
        if any(e.name in x.free_vars for x in inner.values()):
            new = fresh(e.name)
            body = yield _substitute_vars(e.body, {e.name: Var(new, e.value.type)})
            return Let(new, v, (yield _substitute_vars(body, inner)))
        return Let(e.name, v, (yield _substitute_vars(e.body, inner)))
    if isinstance(e, _Binder):
        idx, body = e.index, e.body
        if any(idx in x.free_indices for x in mapping.values()):
            new = fresh(idx)
            body = substitute_indices(body, {idx: index(new)})
            idx = new
        return type(e)(idx, e.extent, (yield _substitute_vars(body, mapping)))
    if isinstance(e, Bracket):
        pred = map_pred(e.pred, lambda c: c, lambda x: substitute_vars(x, mapping))
        return Bracket(pred, (yield _substitute_vars(e.body, mapping)))
    children = []
    for c in e.children:
        children.append((yield _substitute_vars(c, mapping)))
    return e.rebuild(tuple(children))


def unshadowed(binder: Expr, taken: Container[str]) -> tuple[str, Expr]:
    """A ⊞/Σ binder's index and body, the index renamed to a fresh name when ``taken`` already binds it
    (so a walk that keeps one table of enclosing indices never confuses the two)."""
    assert isinstance(binder, _Binder)
    if binder.index in taken:
        new = fresh(binder.index)
        return new, substitute_indices(binder.body, {binder.index: index(new)})
    return binder.index, binder.body


def walk(e: Expr) -> Iterable[Expr]:
    """Every node of ``e`` (pre-order), including the operands of data predicates."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))
        if isinstance(node, Bracket):
            stack.extend(pred_children_exprs(node.pred))


# ----------------------------------------------------------------------------- constructors


def var(name: str, shape: Iterable[int] = ()) -> Var:
    """A tensor input ``name`` of the given shape (``()`` for a scalar)."""
    return Var(name, shape)


def const(value: float) -> Const:
    """The real constant ``value`` (a finite real number; complex and non-numeric values are a
    :class:`~jacacc.errors.DTypeError`)."""
    return Const(value)


def gen(i: Any, n: int, body: Any) -> Gen:
    """``⊞_{i<n} body``: a tensor of extent ``n`` whose ``i``-th entry is ``body``."""
    return Gen(i, n, body)


def sum(i: Any, n: int, body: Any) -> Sum:  # noqa: A001 - the language's Σ
    """``Σ_{i<n} body`` over ``0 ≤ i < n`` (``body`` a scalar)."""
    return Sum(i, n, body)


def bracket(pred: Pred) -> Bracket:
    """The Iverson bracket ``[pred]``: 1 where ``pred`` holds, else 0."""
    return Bracket(_as_pred(pred), Const(1.0))


def let(name: str, value: Any, body: Any) -> Let:
    """``let name = value in body``.

    ``body`` reads the bound value as ``iv.var(name, shape)``, or is a callable
    that receives that variable.
    """
    value = as_expr(value)
    if callable(body) and not isinstance(body, Expr):
        body = body(Var(name, value.type))
    return Let(name, value, as_expr(body))


def pair(a: Any, b: Any) -> Pair:
    return Pair(as_expr(a), as_expr(b))


def func(name: str, x: Any) -> Func:
    """The function ``name`` of :data:`FUNCTIONS` applied to the scalar ``x``.

    ``name`` is the language's name (``recip``) or any name of the operation in
    :mod:`jacacc.ops` (``reciprocal``, ``absolute``, ``expit``).

    Examples
    --------
    >>> x = var("x", (3,))
    >>> print(func("arcsin", x[0]) + func("reciprocal", x[1]) + func("absolute", x[2]))
    arcsin(x[0]) + 1 / x[1] + abs(x[2])
    """
    canonical = ops.resolve(name) if isinstance(name, str) else None
    return Func(IVERSON_NAMES.get(canonical, canonical) if canonical is not None else name, as_expr(x))


def _func(name: str) -> Callable[[Any], Expr]:
    def apply(x: Any) -> Expr:
        return Func(name, as_expr(x))

    apply.__name__ = name
    apply.__doc__ = f"``{name}(x)`` of a scalar expression (a black-box function in the cost model)."
    return apply


exp = _func("exp")
log = _func("log")
sin = _func("sin")
cos = _func("cos")
sqrt = _func("sqrt")
tanh = _func("tanh")
relu = _func("relu")
recip = _func("recip")


@functools.cache
def _zero() -> Const:
    return Const(0.0)


def zero() -> Const:
    """The constant 0 (shared)."""
    return _zero()
