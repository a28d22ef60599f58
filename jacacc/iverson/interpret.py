"""The reference interpreter (paper 001 §4.1, Figures 4–5), optionally counting operations.

One scalar at a time, by the evaluation rules, so that it is obviously correct:
``⊞`` stacks the values of its body, ``Σ`` adds them, a false bracket is zero
without evaluating what it guards, ``let`` binds a value, pairs are tuples
(arrays of pairs are pairs of arrays).  It is slow; :func:`jacacc.iverson.compile`
generates fast code that must agree with it.

It runs in bounded memory and Python stack: sums stream their index points
instead of materializing them (a sum whose term reads none of its indices is
evaluated once and added ``n`` times, in chunks, with the same left-to-right
float additions), and sub-expressions are evaluated with an explicit stack
(:mod:`~jacacc.iverson._stack`), so programs thousands of nodes deep run.
Inputs must be real: complex, string, object and other non-real arrays are a
:class:`~jacacc.errors.DTypeError` naming the variable; booleans and integers
become floats.

Instrumented, the same interpreter counts the scalar additions, multiplications
and black-box calls it performs under the sparsity-aware rules of §4.3 — the
ground truth :func:`jacacc.iverson.cost` is tested against:

* ``a + b`` is not counted when ``a`` or ``b`` is (immediately) a bracket whose
  predicate is false: there is nothing to add;
* ``Σ_{i} Σ_{j} … [p]·e`` (sums directly nested, then one bracket) with ``k``
  index tuples satisfying ``p`` costs ``max(k − 1, 0)`` additions plus ``e`` at
  those ``k`` tuples; a sum without a bracket is the case ``p = true``;
* a false bracket costs nothing, a true one the operands of its data comparisons
  and its body;
* predicates on data (``[x > 0]``) are counted as if true — the model is static —
  so the counting interpreter evaluates what they guard and multiplies by 0.

Examples
--------
>>> import numpy as np, jacacc.iverson as iv
>>> A = iv.var("A", (3, 3)); i = iv.index("i")
>>> trace = iv.sum(i, 3, A[i, i])
>>> evaluate(trace, A=np.arange(9.0).reshape(3, 3))
12.0
>>> count_operations(trace, A=np.zeros((3, 3)))
{'add': 2, 'mul': 0, 'nonlinear': 0}
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

import numpy as np

from jacacc.errors import require_real_dtype
from jacacc.iverson._stack import Step, drive
from jacacc.iverson.check import check
from jacacc.iverson.syntax import (
    FUNCTIONS,
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
    IvTypeError,
    Let,
    Mul,
    Or,
    Pair,
    PairType,
    Pred,
    Proj,
    Sum,
    Type,
    Var,
    has_data_atoms,
    leading_extent,
    pred_children_exprs,
    type_text,
)

__all__ = ["bind_arrays", "count_operations", "evaluate", "variable_array", "zeros_of"]

#: comparison symbol -> Python operator (works on ints, floats and NumPy / JAX / PyTorch arrays alike)
COMPARE = {"==": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def zeros_of(t: Type) -> Any:
    """The zero value of type ``t``: 0.0, a zero array, or a pair of zeros."""
    if isinstance(t, PairType):
        return (zeros_of(t.fst), zeros_of(t.snd))
    return 0.0 if t == () else np.zeros(t)


def bind_arrays(free: Mapping[str, Type], arrays: Mapping[str, Any]) -> dict[str, Any]:
    """The input values for a program's free variables, checked against their types.

    Keyword arrays the program does not read are ignored; a missing or misshapen
    one is an :class:`IvTypeError` naming the variable.
    """
    env: dict[str, Any] = {}
    for name, t in free.items():
        if name not in arrays:
            raise IvTypeError(f"no value given for the variable {name!r} ({type_text(t)})")
        env[name] = _as_value(name, t, arrays[name])
    return env


def _as_value(name: str, t: Type, value: Any) -> Any:
    if isinstance(t, PairType):
        if not isinstance(value, tuple) or len(value) != 2:
            raise IvTypeError(f"the variable {name!r} is a pair {type_text(t)}; pass a tuple of two values")
        return (_as_value(name, t.fst, value[0]), _as_value(name, t.snd, value[1]))
    arr = variable_array(name, value)
    if arr.shape != t:
        raise IvTypeError(f"the variable {name!r} has shape {t}, got an array of shape {arr.shape}")
    return float(arr) if t == () else arr


def variable_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array, or a :class:`~jacacc.errors.DTypeError` naming the variable.

    Booleans and integers convert to floats; complex values (whose imaginary part a float
    conversion would drop with only a warning), strings, bytes, objects, dates and other
    non-real dtypes are refused.
    """
    try:
        arr = np.asarray(value)
    except ValueError as exc:  # ragged nesting
        raise IvTypeError(f"the variable {name!r} is not an array of numbers: {exc}") from None
    require_real_dtype(arr.dtype, f"the variable {name!r}", "jacacc.iverson")
    return arr.astype(np.float64, copy=False)


class _Counts:
    __slots__ = ("add", "mul", "nonlinear")

    def __init__(self) -> None:
        self.add = self.mul = self.nonlinear = 0

    def as_dict(self) -> dict[str, int]:
        return {"add": self.add, "mul": self.mul, "nonlinear": self.nonlinear}


#: terms of a sum whose body reads none of its indices added per NumPy call (bounded memory)
CHUNK = 1 << 16

_SIMPLE = object()  # "not a leaf": _Interpreter.leaf's answer for nodes it does not evaluate


class _Interpreter:
    """The evaluation rules as steps of :func:`~jacacc.iverson._stack.drive`: programs nest deeper
    than Python's recursion limit, so sub-evaluations are yielded, not called."""

    def __init__(self, counts: _Counts | None) -> None:
        self.counts = counts

    def run(self, e: Expr, venv: Mapping[str, Any]) -> Any:
        return drive(self.eval(e, {}, venv))

    # predicates -------------------------------------------------------------
    def truth(self, p: Pred, ienv: Mapping[str, int], venv: Mapping[str, Any]) -> Step:
        if isinstance(p, Cmp):
            return bool(COMPARE[p.op](p.lhs.value(ienv), p.rhs.value(ienv)))
        if isinstance(p, DataCmp):
            lhs = yield self.eval(p.lhs, ienv, venv)
            rhs = yield self.eval(p.rhs, ienv, venv)
            return bool(COMPARE[p.op](lhs, rhs))
        if isinstance(p, (And, Or)):
            # the side without data comparisons first: it may make reading the other's data unnecessary
            first, second = (p.b, p.a) if has_data_atoms(p.a) and not has_data_atoms(p.b) else (p.a, p.b)
            if isinstance(p, And):
                return (yield self.truth(first, ienv, venv)) and (yield self.truth(second, ienv, venv))
            return (yield self.truth(first, ienv, venv)) or (yield self.truth(second, ienv, venv))
        assert isinstance(p, BoolConst)
        return p.value

    def guard(self, p: Pred, ienv: Mapping[str, int], venv: Mapping[str, Any]) -> Step:
        """(counted, holds): whether the cost model treats ``p`` as true, and whether it is.

        Data comparisons are evaluated only where the index comparisons allow ``p``
        (:func:`~jacacc.iverson.syntax.index_part`), so they may read what those guard."""
        if not cost_truth(p, ienv):
            return False, False
        if self.counts is None:
            holds = yield self.truth(p, ienv, venv)
            return holds, holds
        for operand in pred_children_exprs(p):  # the data the predicate compares is computed
            yield self.eval(operand, ienv, venv)
        saved, self.counts = self.counts, None  # the comparison itself is free
        try:
            holds = yield self.truth(p, ienv, venv)
        finally:
            self.counts = saved
        return True, holds

    # expressions ------------------------------------------------------------
    def leaf(self, e: Expr, ienv: Mapping[str, int], venv: Mapping[str, Any]) -> Any:
        """The value of a constant, a variable or a read of a variable, evaluated directly (most
        operands are these; a step each would only cost time); ``_SIMPLE`` for anything else."""
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Var):
            return venv[e.name]
        if isinstance(e, Access) and isinstance(e.target, Var):
            return self.read(e, venv[e.target.name], ienv)
        return _SIMPLE

    def read(self, e: Access, target: Any, ienv: Mapping[str, int]) -> Any:
        k = e.idx.value(ienv)
        extent = leading_extent(e.target.type)
        if not 0 <= k < extent:
            raise IvTypeError(f"read out of range: {e} reads index {k} of extent {extent}")
        return _index(target, k)

    def operand(self, e: Expr, ienv: Mapping[str, int], venv: Mapping[str, Any]) -> Step:
        value = self.leaf(e, ienv, venv)
        if value is _SIMPLE:
            value = yield self.eval(e, ienv, venv)
        return value

    def eval(self, e: Expr, ienv: Mapping[str, int], venv: Mapping[str, Any]) -> Step:
        value = self.leaf(e, ienv, venv)
        if value is not _SIMPLE:
            return value
        if isinstance(e, Add):
            a = yield self.operand(e.a, ienv, venv)
            b = yield self.operand(e.b, ienv, venv)
            if self.counts is not None and not (_false_bracket(e.a, ienv) or _false_bracket(e.b, ienv)):
                self.counts.add += 1
            return a + b
        if isinstance(e, Mul):
            a = yield self.operand(e.a, ienv, venv)
            b = yield self.operand(e.b, ienv, venv)
            if self.counts is not None:
                self.counts.mul += 1
            return a * b
        if isinstance(e, Func):
            a = yield self.operand(e.arg, ienv, venv)
            if self.counts is not None:
                self.counts.nonlinear += 1
            with np.errstate(all="ignore"):
                return float(FUNCTIONS[e.name](a))
        if isinstance(e, Gen):
            values = []
            for i in range(e.extent):
                values.append((yield self.eval(e.body, {**ienv, e.index: i}, venv)))
            return _stack(values, e.body.type)
        if isinstance(e, Sum):
            return (yield self.eval_sum(e, ienv, venv))
        if isinstance(e, Access):
            return self.read(e, (yield self.eval(e.target, ienv, venv)), ienv)
        if isinstance(e, Bracket):
            counted, holds = yield self.guard(e.pred, ienv, venv)
            if not counted:
                return zeros_of(e.type)
            value = yield self.eval(e.body, ienv, venv)
            return value if holds else zeros_of(e.type)
        if isinstance(e, Let):
            value = yield self.eval(e.value, ienv, venv)
            return (yield self.eval(e.body, ienv, {**venv, e.name: value}))
        if isinstance(e, Pair):
            return ((yield self.eval(e.a, ienv, venv)), (yield self.eval(e.b, ienv, venv)))
        if isinstance(e, Proj):
            return (yield self.eval(e.arg, ienv, venv))[e.which]
        raise TypeError(f"cannot evaluate {type(e).__name__}")  # pragma: no cover

    def term(self, inner: Expr, env: Mapping[str, int], venv: Mapping[str, Any]) -> Step:
        """(counted, value) of one term of a composite sum: whether it counts as a term, and what
        it adds (None for nothing)."""
        if isinstance(inner, Bracket):
            counted, holds = yield self.guard(inner.pred, env, venv)
            if not counted:
                return False, None
            value = yield self.eval(inner.body, env, venv)
            return True, (value if holds else None)
        return True, (yield self.operand(inner, env, venv))

    def eval_sum(self, e: Sum, ienv: Mapping[str, int], venv: Mapping[str, Any]) -> Step:
        binders: list[tuple[str, int]] = []
        inner: Expr = e
        while isinstance(inner, Sum):  # directly nested sums are one composite sum (§4.3)
            binders.append((inner.index, inner.extent))
            inner = inner.body
        names = [b for b, _ in binders]
        if not (inner.free_indices & set(names)):
            return (yield self.invariant_sum(inner, binders, ienv, venv))
        # the index points are streamed (an odometer, last index fastest, as itertools.product
        # orders them) rather than materialized: memory stays bounded however long the sum is
        total, terms = 0.0, 0
        extents = [n for _, n in binders]
        point = [0] * len(binders)
        while True:
            env = {**ienv, **dict(zip(names, point, strict=True))}
            counted, value = yield self.term(inner, env, venv)
            terms += counted
            if value is not None:
                total += value
            k = len(point) - 1
            while k >= 0:
                point[k] += 1
                if point[k] < extents[k]:
                    break
                point[k] = 0
                k -= 1
            if k < 0:
                break
        if self.counts is not None:
            self.counts.add += max(terms - 1, 0)
        return total

    def invariant_sum(self, inner: Expr, binders: list[tuple[str, int]], ienv: Mapping[str, int],
                      venv: Mapping[str, Any]) -> Step:
        """A composite sum whose term reads none of its indices: the term is the same at every point,
        so it is evaluated (and its operations counted) once and scaled by the number of points.

        The value is still the interpreter's left-to-right float sum ``((0 + v) + v) + …`` — not
        ``n·v``, which rounds differently — computed by ``np.add.accumulate`` (strictly sequential)
        over chunks of at most :data:`CHUNK` terms."""
        n = 1
        for _, extent in binders:
            n *= extent
        saved = self.counts
        if saved is not None:
            self.counts = _Counts()
        try:
            counted, value = yield self.term(inner, ienv, venv)
        finally:
            once, self.counts = self.counts, saved
        if saved is not None and once is not None:
            saved.add += once.add * n + (max(n - 1, 0) if counted else 0)
            saved.mul += once.mul * n
            saved.nonlinear += once.nonlinear * n
        if value is None:
            return 0.0
        total = np.float64(0.0)
        left = n
        with np.errstate(all="ignore"):
            while left > 0:
                size = min(left, CHUNK)
                chunk = np.full(size + 1, value, dtype=np.float64)
                chunk[0] = total
                total = np.add.accumulate(chunk)[-1]
                left -= size
        return float(total)


def cost_truth(p: Pred, ienv: Mapping[str, int]) -> bool:
    """``p`` with every data comparison read as true (the static cost model's view)."""
    if isinstance(p, Cmp):
        return bool(COMPARE[p.op](p.lhs.value(ienv), p.rhs.value(ienv)))
    if isinstance(p, DataCmp):
        return True
    if isinstance(p, And):
        return cost_truth(p.a, ienv) and cost_truth(p.b, ienv)
    if isinstance(p, Or):
        return cost_truth(p.a, ienv) or cost_truth(p.b, ienv)
    assert isinstance(p, BoolConst)
    return p.value


def _false_bracket(e: Expr, ienv: Mapping[str, int]) -> bool:
    return isinstance(e, Bracket) and not cost_truth(e.pred, ienv)


def _stack(values: list[Any], t: Type) -> Any:
    if isinstance(t, PairType):
        return (_stack([v[0] for v in values], t.fst), _stack([v[1] for v in values], t.snd))
    return np.array(values, dtype=np.float64) if t == () else np.stack(values)


def _index(value: Any, k: int) -> Any:
    if isinstance(value, tuple):
        return (_index(value[0], k), _index(value[1], k))
    item = value[k]
    return float(item) if np.ndim(item) == 0 else item


def _result(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_result(v) for v in value)
    return float(value) if np.ndim(value) == 0 else np.asarray(value, dtype=np.float64)


def evaluate(expr: Expr, **arrays: Any) -> Any:
    """Evaluate a program: a float for a scalar, an array for a tensor, a tuple for a pair.

    ``arrays`` bind the free variables by name; arrays the program does not
    read are ignored.
    """
    venv = bind_arrays(check(expr), arrays)
    return _result(_Interpreter(None).run(expr, venv))


def count_operations(expr: Expr, **arrays: Any) -> dict[str, int]:
    """Run the interpreter on ``arrays`` and count additions, multiplications and black-box calls
    under the §4.3 rules (see the module docstring)."""
    venv = bind_arrays(check(expr), arrays)
    counts = _Counts()
    _Interpreter(counts).run(expr, venv)
    return counts.as_dict()
