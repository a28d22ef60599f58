"""The reference interpreter (paper 001 §4.1, Figures 4–5), optionally counting operations.

One scalar at a time, by the evaluation rules, so that it is obviously correct:
``⊞`` stacks the values of its body, ``Σ`` adds them, a false bracket is zero
without evaluating what it guards, ``let`` binds a value, pairs are tuples
(arrays of pairs are pairs of arrays).  It is slow; :func:`jacacc.iverson.compile`
generates fast code that must agree with it.

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

import itertools
import operator
from collections.abc import Mapping
from typing import Any

import numpy as np

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

__all__ = ["bind_arrays", "count_operations", "evaluate", "zeros_of"]

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
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != t:
        raise IvTypeError(f"the variable {name!r} has shape {t}, got an array of shape {arr.shape}")
    return float(arr) if t == () else arr


class _Counts:
    __slots__ = ("add", "mul", "nonlinear")

    def __init__(self) -> None:
        self.add = self.mul = self.nonlinear = 0

    def as_dict(self) -> dict[str, int]:
        return {"add": self.add, "mul": self.mul, "nonlinear": self.nonlinear}


class _Interpreter:
    def __init__(self, counts: _Counts | None) -> None:
        self.counts = counts

    # predicates -------------------------------------------------------------
    def truth(self, p: Pred, ienv: Mapping[str, int], venv: Mapping[str, Any]) -> bool:
        if isinstance(p, Cmp):
            return bool(COMPARE[p.op](p.lhs.value(ienv), p.rhs.value(ienv)))
        if isinstance(p, DataCmp):
            return bool(COMPARE[p.op](self.eval(p.lhs, ienv, venv), self.eval(p.rhs, ienv, venv)))
        if isinstance(p, (And, Or)):
            # the side without data comparisons first: it may make reading the other's data unnecessary
            first, second = (p.b, p.a) if has_data_atoms(p.a) and not has_data_atoms(p.b) else (p.a, p.b)
            if isinstance(p, And):
                return self.truth(first, ienv, venv) and self.truth(second, ienv, venv)
            return self.truth(first, ienv, venv) or self.truth(second, ienv, venv)
        assert isinstance(p, BoolConst)
        return p.value

    def guard(self, p: Pred, ienv: Mapping[str, int], venv: Mapping[str, Any]) -> tuple[bool, bool]:
        """(counted, holds): whether the cost model treats ``p`` as true, and whether it is.

        Data comparisons are evaluated only where the index comparisons allow ``p``
        (:func:`~jacacc.iverson.syntax.index_part`), so they may read what those guard."""
        if not cost_truth(p, ienv):
            return False, False
        if self.counts is None:
            holds = self.truth(p, ienv, venv)
            return holds, holds
        for operand in pred_children_exprs(p):  # the data the predicate compares is computed
            self.eval(operand, ienv, venv)
        saved, self.counts = self.counts, None  # the comparison itself is free
        try:
            holds = self.truth(p, ienv, venv)
        finally:
            self.counts = saved
        return True, holds

    # expressions ------------------------------------------------------------
    def eval(self, e: Expr, ienv: Mapping[str, int], venv: Mapping[str, Any]) -> Any:
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Var):
            return venv[e.name]
        if isinstance(e, Add):
            a = self.eval(e.a, ienv, venv)
            b = self.eval(e.b, ienv, venv)
            if self.counts is not None and not (_false_bracket(e.a, ienv) or _false_bracket(e.b, ienv)):
                self.counts.add += 1
            return a + b
        if isinstance(e, Mul):
            a = self.eval(e.a, ienv, venv)
            b = self.eval(e.b, ienv, venv)
            if self.counts is not None:
                self.counts.mul += 1
            return a * b
        if isinstance(e, Func):
            a = self.eval(e.arg, ienv, venv)
            if self.counts is not None:
                self.counts.nonlinear += 1
            with np.errstate(all="ignore"):
                return float(FUNCTIONS[e.name](a))
        if isinstance(e, Gen):
            values = [self.eval(e.body, {**ienv, e.index: i}, venv) for i in range(e.extent)]
            return _stack(values, e.body.type)
        if isinstance(e, Sum):
            return self.eval_sum(e, ienv, venv)
        if isinstance(e, Access):
            target = self.eval(e.target, ienv, venv)
            k = e.idx.value(ienv)
            extent = leading_extent(e.target.type)
            if not 0 <= k < extent:
                raise IvTypeError(f"read out of range: {e} reads index {k} of extent {extent}")
            return _index(target, k)
        if isinstance(e, Bracket):
            counted, holds = self.guard(e.pred, ienv, venv)
            if not counted:
                return zeros_of(e.type)
            value = self.eval(e.body, ienv, venv)
            return value if holds else zeros_of(e.type)
        if isinstance(e, Let):
            value = self.eval(e.value, ienv, venv)
            return self.eval(e.body, ienv, {**venv, e.name: value})
        if isinstance(e, Pair):
            return (self.eval(e.a, ienv, venv), self.eval(e.b, ienv, venv))
        if isinstance(e, Proj):
            return self.eval(e.arg, ienv, venv)[e.which]
        raise TypeError(f"cannot evaluate {type(e).__name__}")  # pragma: no cover

    def eval_sum(self, e: Sum, ienv: Mapping[str, int], venv: Mapping[str, Any]) -> float:
        binders: list[tuple[str, int]] = []
        inner: Expr = e
        while isinstance(inner, Sum):  # directly nested sums are one composite sum (§4.3)
            binders.append((inner.index, inner.extent))
            inner = inner.body
        total, terms = 0.0, 0
        for point in itertools.product(*(range(n) for _, n in binders)):
            env = {**ienv, **dict(zip([b for b, _ in binders], point, strict=True))}
            if isinstance(inner, Bracket):
                counted, holds = self.guard(inner.pred, env, venv)
                if not counted:
                    continue
                terms += 1
                value = self.eval(inner.body, env, venv)
                if holds:
                    total += value
            else:
                terms += 1
                total += self.eval(inner, env, venv)
        if self.counts is not None:
            self.counts.add += max(terms - 1, 0)
        return total


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
    return _result(_Interpreter(None).eval(expr, {}, venv))


def count_operations(expr: Expr, **arrays: Any) -> dict[str, int]:
    """Run the interpreter on ``arrays`` and count additions, multiplications and black-box calls
    under the §4.3 rules (see the module docstring)."""
    venv = bind_arrays(check(expr), arrays)
    counts = _Counts()
    _Interpreter(counts).eval(expr, {}, venv)
    return counts.as_dict()
