"""jacacc.iverson, the language itself: random programs against an independent NumPy oracle, the printer,
structural equality, operation counts, ill-typed programs refused, and the integer machinery (jacacc.intlin).

The oracle evaluates a program over whole arrays: every enclosing binder is an axis, an index expression is
an integer array built from ``np.arange`` grids, a bracket is ``np.where``, a read is a fancy-index gather.
It shares no code with the interpreter (which runs one scalar at a time) and also counts operations the
vectorised way: a node's count is the number of points where it is evaluated under the §4.3 rules, i.e. where
the index parts of its enclosing brackets hold.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iverson_programs import FEATURES, GeneratedProgram, features, programs, random_program

import jacacc.iverson as iv
from jacacc.intlin import ceil_div, count_points_1d, eliminate, floor_div, integer_feasible
from jacacc.iverson.syntax import (
    Access,
    Add,
    Affine,
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
    Var,
    recip,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**32 - 1)

x, y, A, s = iv.var("x", (5,)), iv.var("y", (4,)), iv.var("A", (4, 3)), iv.var("s")
i, j, k = iv.index("i"), iv.index("j"), iv.index("k")


# ----------------------------------------------------------------------------- the NumPy oracle

_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos, "sqrt": np.sqrt, "tanh": np.tanh,
    "relu": lambda a: np.where(a > 0.0, a, 0.0), "recip": lambda a: 1.0 / a,
}
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


class OracleRangeError(AssertionError):
    """A read outside its axis at a point where the read is evaluated (check should have refused it)."""


def _leaves(value: Any, f: Callable[[np.ndarray], Any]) -> Any:
    """``f`` on every array of a value (pairs are tuples)."""
    return tuple(_leaves(v, f) for v in value) if isinstance(value, tuple) else f(value)


class Oracle:
    """Whole-array evaluation.  At a point with ``sizes`` (one axis per enclosing gen / sum, outermost
    first) a value of type ``T`` is an array of shape ``sizes + T`` (a tuple of them for a pair);
    ``live`` (shape ``sizes``) marks where the node is evaluated under the counting rules."""

    def __init__(self, arrays: dict[str, Any]) -> None:
        self.inputs = {name: (np.asarray(v, dtype=np.float64), 0) for name, v in arrays.items()}
        self.counts = {"add": 0, "mul": 0, "nonlinear": 0}

    def run(self, expr: Expr) -> Any:
        with np.errstate(all="ignore"):  # masked-out points may compute nonsense; np.where drops it
            value = self.ev(expr, (), {}, self.inputs, np.ones((), dtype=bool))
        return _leaves(value, lambda a: float(a) if a.ndim == 0 else np.array(a))

    # index expressions and predicates
    @staticmethod
    def index(a: Affine, sizes: tuple[int, ...], axes: dict[str, int]) -> np.ndarray:
        out = np.full(sizes, a.const, dtype=np.int64)
        for name, c in a.coeffs:
            shape = [1] * len(sizes)
            shape[axes[name]] = sizes[axes[name]]
            out = out + c * np.arange(sizes[axes[name]]).reshape(shape)
        return out

    def truth(self, p: Pred, sizes: tuple[int, ...], axes: dict[str, int], venv: dict, live: np.ndarray | None
              ) -> np.ndarray:
        """Where ``p`` holds; with ``live`` None, data comparisons read as true (the cost model's view)."""
        if isinstance(p, BoolConst):
            out = np.full(sizes, p.value)
        elif isinstance(p, Cmp):
            out = _COMPARE[p.op](self.index(p.lhs, sizes, axes), self.index(p.rhs, sizes, axes))
        elif isinstance(p, DataCmp):
            if live is None:
                return np.ones(sizes, dtype=bool)
            out = _COMPARE[p.op](self.ev(p.lhs, sizes, axes, venv, live), self.ev(p.rhs, sizes, axes, venv, live))
        elif isinstance(p, And):
            out = self.truth(p.a, sizes, axes, venv, live) & self.truth(p.b, sizes, axes, venv, live)
        else:
            assert isinstance(p, Or)
            out = self.truth(p.a, sizes, axes, venv, live) | self.truth(p.b, sizes, axes, venv, live)
        return np.broadcast_to(out, sizes)

    def count(self, what: str, where: np.ndarray) -> None:
        self.counts[what] += int(np.count_nonzero(where))

    # expressions
    def ev(self, e: Expr, sizes: tuple[int, ...], axes: dict[str, int], venv: dict, live: np.ndarray) -> Any:
        if isinstance(e, Const):
            return np.full(sizes, e.value)
        if isinstance(e, Var):
            value, depth = venv[e.name]
            # a value bound outside inner binders is constant along their axes
            return _leaves(value, lambda a: np.broadcast_to(
                a.reshape(a.shape[:depth] + (1,) * (len(sizes) - depth) + a.shape[depth:]), sizes + a.shape[depth:]))
        if isinstance(e, Add):
            a, b = self.ev(e.a, sizes, axes, venv, live), self.ev(e.b, sizes, axes, venv, live)
            nothing_to_add = np.zeros(sizes, dtype=bool)
            for side in (e.a, e.b):
                if isinstance(side, Bracket):
                    nothing_to_add = nothing_to_add | ~self.truth(side.pred, sizes, axes, venv, None)
            self.count("add", live & ~nothing_to_add)
            return a + b
        if isinstance(e, Mul):
            a, b = self.ev(e.a, sizes, axes, venv, live), self.ev(e.b, sizes, axes, venv, live)
            self.count("mul", live)
            return a * b
        if isinstance(e, Func):
            a = self.ev(e.arg, sizes, axes, venv, live)
            self.count("nonlinear", live)
            return _FUNCTIONS[e.name](a)
        if isinstance(e, Gen):
            inner = sizes + (e.extent,)
            return self.ev(e.body, inner, {**axes, e.index: len(sizes)}, venv,
                           np.broadcast_to(live[..., None], inner))
        if isinstance(e, Sum):
            return self.sum(e, sizes, axes, venv, live)
        if isinstance(e, Access):
            target = self.ev(e.target, sizes, axes, venv, live)
            at = self.index(e.idx, sizes, axes)
            grid = np.indices(sizes, sparse=True)

            def gather(a: np.ndarray) -> np.ndarray:
                extent = a.shape[len(sizes)]
                bad = live & ((at < 0) | (at >= extent))
                if bad.any():
                    raise OracleRangeError(f"{e} reads outside 0..{extent - 1}")
                return a[(*grid, np.clip(at, 0, extent - 1))]

            return _leaves(target, gather)
        if isinstance(e, Bracket):
            index_part = self.truth(e.pred, sizes, axes, venv, None)
            holds = self.truth(e.pred, sizes, axes, venv, live & index_part)
            body = self.ev(e.body, sizes, axes, venv, live & index_part)
            return _leaves(body, lambda a: np.where(holds.reshape(sizes + (1,) * (a.ndim - len(sizes))), a, 0.0))
        if isinstance(e, Let):
            value = self.ev(e.value, sizes, axes, venv, live)
            return self.ev(e.body, sizes, axes, {**venv, e.name: (value, len(sizes))}, live)
        if isinstance(e, Pair):
            return (self.ev(e.a, sizes, axes, venv, live), self.ev(e.b, sizes, axes, venv, live))
        assert isinstance(e, Proj), type(e)
        return self.ev(e.arg, sizes, axes, venv, live)[e.which]

    def sum(self, e: Sum, sizes: tuple[int, ...], axes: dict[str, int], venv: dict, live: np.ndarray) -> np.ndarray:
        # directly nested sums are one composite sum: its terms are the points where its bracket's
        # index part holds, and it costs (terms - 1) additions
        inner_sizes, inner_axes, body = sizes, dict(axes), e
        while isinstance(body, Sum):
            inner_axes[body.index] = len(inner_sizes)
            inner_sizes, body = inner_sizes + (body.extent,), body.body
        new_axes = tuple(range(len(sizes), len(inner_sizes)))
        inner_live = np.broadcast_to(live.reshape(sizes + (1,) * len(new_axes)), inner_sizes)
        terms = inner_live
        if isinstance(body, Bracket):
            terms = terms & self.truth(body.pred, inner_sizes, inner_axes, venv, None)
        self.counts["add"] += int(np.maximum(terms.sum(axis=new_axes) - 1, 0).sum())
        return self.ev(body, inner_sizes, inner_axes, venv, inner_live).sum(axis=new_axes)


def oracle(expr: Expr, arrays: dict[str, Any]) -> tuple[Any, dict[str, int]]:
    """The value of ``expr`` and its operation counts, computed the vectorised way."""
    o = Oracle(arrays)
    return o.run(expr), o.counts


# ----------------------------------------------------------------------------- helpers


def assert_has_type(value: Any, t: Any) -> None:
    """``value`` is what evaluate returns for type ``t``: a float, an array of that shape, or a tuple."""
    if isinstance(t, PairType):
        assert isinstance(value, tuple) and len(value) == 2
        assert_has_type(value[0], t.fst)
        assert_has_type(value[1], t.snd)
    elif t == ():
        assert isinstance(value, float)
    else:
        assert isinstance(value, np.ndarray) and value.shape == t and value.dtype == np.float64


def assert_close(got: Any, want: Any) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_close(g, w)
        return
    # the oracle adds in another order (np.sum), so agreement is up to rounding
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def evaluate_program(program: GeneratedProgram, seed: int) -> tuple[dict[str, Any], Any]:
    arrays = program.arrays(np.random.default_rng(seed))
    return arrays, iv.evaluate(program.expr, **arrays)


# ----------------------------------------------------------------------------- generated programs


@pytest.mark.parametrize("scalar", [True, False], ids=["scalar", "tensor"])
@SETTINGS
@given(data=st.data())
def test_generated_programs_pass_check(scalar: bool, data: st.DataObject) -> None:
    program = data.draw(programs(scalar=scalar))
    assert iv.check(program.expr) == program.inputs
    assert program.scalar_output == (program.expr.type == ())
    if scalar:
        assert program.scalar_output
    assert features(program.expr) <= FEATURES | {"index-var"}


@pytest.mark.parametrize("scalar", [True, False], ids=["scalar", "tensor"])
@SETTINGS
@given(data=st.data(), seed=seeds)
def test_evaluate_returns_the_programs_type(scalar: bool, data: st.DataObject, seed: int) -> None:
    program = data.draw(programs(scalar=scalar))
    _, value = evaluate_program(program, seed)
    assert_has_type(value, program.expr.type)
    assert np.all(np.isfinite(_flat(value)))  # the generator keeps values finite


@pytest.mark.parametrize("scalar", [True, False], ids=["scalar", "tensor"])
@SETTINGS
@given(data=st.data(), seed=seeds)
def test_interpreter_agrees_with_the_numpy_oracle(scalar: bool, data: st.DataObject, seed: int) -> None:
    program = data.draw(programs(scalar=scalar))
    arrays, value = evaluate_program(program, seed)
    want, counts = oracle(program.expr, arrays)
    assert_close(value, want)
    assert iv.count_operations(program.expr, **arrays) == counts


@SETTINGS
@given(program=programs(scalar=False), seed=seeds)
def test_count_operations_is_deterministic_non_negative_and_static(program: GeneratedProgram, seed: int) -> None:
    rng = np.random.default_rng(seed)
    arrays, other = program.arrays(rng), program.arrays(rng)
    counts = iv.count_operations(program.expr, **arrays)
    assert set(counts) == {"add", "mul", "nonlinear"}
    assert all(isinstance(v, int) and v >= 0 for v in counts.values())
    assert iv.count_operations(program.expr, **arrays) == counts
    # the model is static (data predicates count as true): other input values, the same counts
    assert iv.count_operations(program.expr, **other) == counts
    kinds = {type(node) for node in _nodes(program.expr)}
    if Func not in kinds:
        assert counts["nonlinear"] == 0
    if Mul not in kinds:
        assert counts["mul"] == 0
    if Add not in kinds and Sum not in kinds:
        assert counts["add"] == 0


@SETTINGS
@given(program=programs(scalar=False), seed=seeds)
def test_renaming_every_index_gives_an_alpha_equivalent_program(program: GeneratedProgram, seed: int) -> None:
    renamed = program.renamed("k")
    assert iv.same(program.expr, renamed.expr)
    assert renamed.inputs == program.inputs
    if any(isinstance(node, (Gen, Sum)) for node in _nodes(program.expr)):
        assert str(renamed.expr) != str(program.expr)
    arrays = program.arrays(np.random.default_rng(seed))
    assert_close(iv.evaluate(renamed.expr, **arrays), iv.evaluate(program.expr, **arrays))


def test_the_generator_covers_every_construct() -> None:
    # seeded (uniform) decisions: a few hundred programs show every construct the module promises
    seen: set[str] = set()
    for seed in range(300):
        program = random_program(np.random.default_rng(seed), scalar=seed % 2 == 0)
        seen |= features(program.expr)
    assert FEATURES <= seen, sorted(FEATURES - seen)


def _nodes(e: Expr) -> list[Expr]:
    out = [e]
    for c in e.children:
        out += _nodes(c)
    if isinstance(e, Bracket):
        out += [n for q in _data_operands(e.pred) for n in _nodes(q)]
    return out


def _data_operands(p: Pred) -> list[Expr]:
    if isinstance(p, DataCmp):
        return [p.lhs, p.rhs]
    if isinstance(p, (And, Or)):
        return _data_operands(p.a) + _data_operands(p.b)
    return []


def _flat(value: Any) -> np.ndarray:
    if isinstance(value, tuple):
        return np.concatenate([_flat(v) for v in value])
    return np.ravel(np.asarray(value, dtype=np.float64))


def test_the_oracle_refuses_an_unguarded_read_out_of_range() -> None:
    # the oracle's own range check, so that its silence on generated programs means something
    with pytest.raises(OracleRangeError):
        oracle(iv.gen(i, 5, x[i + 1]), {"x": np.ones(5)})
    value, _ = oracle(iv.gen(i, 5, iv.bracket(i + 1 < 5) * x[i + 1]), {"x": np.arange(5.0)})
    assert np.array_equal(value, [1, 2, 3, 4, 0])


# ----------------------------------------------------------------------------- the printer


@pytest.mark.parametrize("expr, text", [
    (iv.gen(i, 5, iv.gen(j, 5, iv.bracket(i == j))), "⊞_{i<5} ⊞_{j<5} [i = j]"),
    (iv.sum(i, 4, x[i + 1] * x[i]), "Σ_{i<4} x[i + 1] · x[i]"),
    (iv.sum(i, 4, iv.sum(j, 4, iv.bracket(2 * i + 1 == j) * A[i, j - 1])), "Σ_{i<4} Σ_{j<4} [2*i + 1 = j]·A[i, j - 1]"),
    (iv.gen(i, 4, iv.bracket((i >= 1) & ((j < 2) | (i == j))) * x[i]), "⊞_{i<4} [i ≥ 1 ∧ (j < 2 ∨ i = j)]·x[i]"),
    (iv.gen(i, 4, iv.bracket(i <= 2) * x[4 - i]), "⊞_{i<4} [i ≤ 2]·x[-i + 4]"),
    (iv.bracket(s > 1.0) * iv.gen(i, 5, x[i]), "[s > 1]·(⊞_{i<5} x[i])"),
    (iv.gen(i, 3, iv.bracket(i < 2) * iv.gen(j, 2, A[i, j])), "⊞_{i<3} [i < 2]·(⊞_{j<2} A[i, j])"),
    (iv.sum(i, 5, iv.bracket(x[i] > 1.5) * iv.relu(x[i])), "Σ_{i<5} [x[i] > 1.5]·relu(x[i])"),
    (iv.let("t", iv.gen(i, 5, iv.exp(x[i])), lambda t: t[0] / t[1]), "let t = ⊞_{i<5} exp(x[i]) in\nt[0] / t[1]"),
    (iv.let("u", s * s, iv.var("u") + 1), "let u = s · s in\nu + 1"),
    (iv.pair(x[0], s).fst, "π₁((x[0], s))"),
    (iv.pair(x[0], iv.gen(i, 2, x[i])).snd[1], "π₂((x[0], ⊞_{i<2} x[i]))[1]"),
    (iv.gen(i, 3, x[i])[j], "(⊞_{i<3} x[i])[j]"),
    (-x[0] + 0.25 * iv.sin(x[1]) - iv.cos(x[2]), "-x[0] + 0.25 · sin(x[1]) - cos(x[2])"),
    (x[0] - (x[1] + x[2]), "x[0] - (x[1] + x[2])"),
    (x[0] * (x[1] * x[2]), "x[0] · (x[1] · x[2])"),
    (recip(x[0]), "1 / x[0]"),
    (x[0] / (x[1] / x[2]), "x[0] / (x[1] / x[2])"),
    (x[0] / 4, "0.25 · x[0]"),
    (iv.sqrt(iv.log(x[0]) + iv.tanh(s)), "sqrt(log(x[0]) + tanh(s))"),
])
def test_printer_uses_the_paper_notation(expr: Expr, text: str) -> None:
    assert str(expr) == text


# ----------------------------------------------------------------------------- structural equality


def test_same_is_alpha_equivalence_of_gen_and_sum_binders() -> None:
    B = iv.var("B", (3, 3))
    assert iv.same(iv.gen(i, 5, x[i]), iv.gen(j, 5, x[j]))
    assert iv.same(iv.sum(i, 5, x[i]), iv.sum(k, 5, x[k]))
    assert not iv.same(iv.gen(i, 3, iv.gen(j, 3, B[i, j])), iv.gen(i, 3, iv.gen(j, 3, B[j, i])))
    assert iv.same(iv.gen(i, 3, iv.gen(j, 3, B[i, j])), iv.gen(j, 3, iv.gen(i, 3, B[j, i])))
    # shadowing: the inner binder decides, whatever the names
    assert iv.same(iv.gen(i, 3, iv.gen(i, 3, B[i, i])), iv.gen(j, 3, iv.gen(k, 3, B[k, k])))
    assert not iv.same(iv.gen(i, 3, iv.gen(i, 3, B[i, 0])), iv.gen(i, 3, iv.gen(j, 3, B[i, 0])))
    # a free index is not renamed
    assert not iv.same(iv.gen(i, 3, x[i + j]), iv.gen(i, 3, x[i + k]))
    assert iv.same(iv.gen(i, 3, x[i + j]), iv.gen(k, 3, x[k + j]))
    # binders in brackets and data predicates are renamed too
    assert iv.same(iv.sum(i, 5, iv.bracket((i < 3) & (x[i] > 1.0)) * x[i]),
                   iv.sum(j, 5, iv.bracket((j < 3) & (x[j] > 1.0)) * x[j]))
    # but not extents, bodies, or let names (only gen and sum binders are alpha-renamed)
    assert not iv.same(iv.gen(i, 3, x[i]), iv.gen(i, 4, x[i]))
    assert not iv.same(iv.gen(i, 3, x[i]), iv.sum(i, 3, x[i]))
    assert not iv.same(iv.gen(i, 3, x[i]), iv.gen(i, 3, x[i + 1]))
    assert not iv.same(iv.let("a", s, iv.var("a") * 2), iv.let("b", s, iv.var("b") * 2))


def test_same_on_index_expressions_and_predicates() -> None:
    assert iv.same(i + 1, 1 + i)
    assert iv.same(2 * i - j, -j + i + i)
    assert not iv.same(i + 1, i + 2)
    assert iv.same(i == j, j == i)
    assert iv.same(i < j, j > i)
    assert iv.same(i < j, i + 1 <= j)  # integer semantics
    assert not iv.same(i < j, i <= j)
    assert iv.same(iv.bracket(i == j) * x[i], iv.bracket(j == i) * x[i])


# ----------------------------------------------------------------------------- Python numbers


def test_python_numbers_mix_with_expressions_and_index_expressions() -> None:
    X = np.arange(1.0, 6.0)
    e = x[1]
    assert iv.same(0.25 * e, Mul(Const(0.25), e))
    assert iv.same(e * 3, Mul(e, Const(3.0)))
    assert iv.same(e + 2, Add(e, Const(2.0)))
    assert iv.same(2 - e, Add(Const(2.0), Mul(Const(-1.0), e)))
    assert iv.same(np.float64(2.0) * e, Mul(Const(2.0), e))  # NumPy scalars too
    assert iv.same(e * np.int64(2), Mul(e, Const(2.0)))
    assert iv.same(np.float64(2.0) - e, 2 - e)
    assert iv.same(np.int64(4) - i, 4 - i) and iv.same(np.int64(2) * i, i + i)
    for built, want in [(0.25 * e, 0.5), (e * 3, 6.0), (1 - e, -1.0), (2 / e, 1.0), (e / 4, 0.5),
                        (sum([x[0], x[1], x[2]]), 6.0), (-e, -2.0)]:
        assert iv.evaluate(built, x=X) == pytest.approx(want)
    # index expressions: Python ints, negative coefficients, NumPy ints
    n = 5
    assert np.array_equal(iv.evaluate(iv.gen(i, n, x[n - 1 - i]), x=X), X[::-1])
    assert np.array_equal(iv.evaluate(iv.gen(i, 2, x[2 * i + np.int64(1)]), x=X), X[[1, 3]])
    M = np.arange(12.0).reshape(4, 3)
    assert iv.same(A[i, 0], A[i][0])
    assert np.array_equal(iv.evaluate(iv.gen(i, 4, A[i, 0]), A=M), M[:, 0])
    assert np.array_equal(iv.evaluate(iv.gen(i, 3, iv.gen(j, 4, A[j, i])), A=M), M.T)
    assert str(x[n - 1 - i]) == "x[-i + 4]"
    assert (n - 1 - i).coeff("i") == -1


# ----------------------------------------------------------------------------- operation counts

X5, Y4 = np.linspace(0.6, 1.4, 5), np.linspace(0.7, 1.3, 4)
M43 = np.arange(12.0).reshape(4, 3) / 10 + 0.5


@pytest.mark.parametrize("expr, counts", [
    # Σ over 5 terms: 4 additions
    (iv.sum(i, 5, x[i]), (4, 0, 0)),
    # Σ_i Σ_j [i = j]·x[i]·y[j] over 4×4: 4 terms, 3 additions, the product only on the diagonal
    (iv.sum(i, 4, iv.sum(j, 4, iv.bracket(i == j) * x[i] * y[j])), (3, 4, 0)),
    # at each i one side is a false bracket: nothing to add
    (iv.gen(i, 4, iv.bracket(i < 2) * x[i] + iv.bracket(i >= 2) * y[i]), (0, 0, 0)),
    # Σ_i Σ_j [i < j]·A[i, j] over 4×3: 3 + 2 + 1 = 6 terms
    (iv.sum(i, 4, iv.sum(j, 3, iv.bracket(i < j) * A[i, j])), (2, 0, 0)),
    # no bracket: 4·3 terms
    (iv.sum(i, 4, iv.sum(j, 3, A[i, j])), (11, 0, 0)),
    # not directly nested: the inner sum has i + 1 terms (0 + 1 + 2 + 3 additions), then 3 more, 4 products
    (iv.sum(i, 4, 2 * iv.sum(j, 4, iv.bracket(j <= i) * y[j])), (9, 4, 0)),
    # [i < 2]·x[i] + x[i] adds only where the bracket holds: 2, and the sum 3
    (iv.sum(i, 4, iv.bracket(i < 2) * x[i] + x[i]), (5, 0, 0)),
    # black-box functions: one per point
    (iv.gen(i, 3, iv.exp(x[i])), (0, 0, 3)),
    # a data predicate counts as true, whatever the data: 3 terms, 3 products
    (iv.sum(i, 3, iv.bracket(x[i] > 10.0) * (x[i] * x[i])), (2, 3, 0)),
    # a false bracket costs nothing
    (iv.gen(i, 4, iv.bracket(i < 1) * (x[i] * x[i])), (0, 1, 0)),
    # sugar: a / b = a · recip(b), a - b = a + (-1)·b
    (x[0] / x[1], (0, 1, 1)),
    (x[0] - x[1], (1, 1, 0)),
    # a let value is computed once
    (iv.let("t", iv.exp(s), lambda t: t * t), (0, 1, 1)),
    # a projection computes the whole pair
    (iv.pair(iv.exp(s), x[0] * x[1]).snd, (0, 1, 1)),
    # reading a generated tensor computes all of it
    (iv.gen(i, 3, x[i] * x[i])[1], (0, 3, 0)),
])
def test_count_operations_by_hand(expr: Expr, counts: tuple[int, int, int]) -> None:
    arrays = {"x": X5, "y": Y4, "A": M43, "s": 0.75}
    want = dict(zip(("add", "mul", "nonlinear"), counts, strict=True))
    assert iv.count_operations(expr, **arrays) == want
    # and the oracle's way of counting agrees, as do the values
    value, oracle_counts = oracle(expr, {n: arrays[n] for n in iv.check(expr)})
    assert oracle_counts == want
    assert_close(iv.evaluate(expr, **arrays), value)


def test_counts_and_values_of_the_documented_examples() -> None:
    trace = iv.sum(i, 3, A[i, i])
    assert iv.evaluate(trace, A=np.arange(12.0).reshape(4, 3)) == 0.0 + 4.0 + 8.0
    assert iv.count_operations(trace, A=np.zeros((4, 3))) == {"add": 2, "mul": 0, "nonlinear": 0}
    eye = iv.gen(i, 3, iv.gen(j, 3, iv.bracket(i == j)))
    assert np.array_equal(iv.evaluate(eye), np.eye(3))
    assert iv.count_operations(eye) == {"add": 0, "mul": 0, "nonlinear": 0}


# ----------------------------------------------------------------------------- ill-typed programs


def _same_variable_with_two_shapes() -> Expr:
    return iv.var("v", (3,))[0] + iv.var("v", (4,))[0]


@pytest.mark.parametrize("build, message", [
    # shape mismatches
    (lambda: x + s, r"\+ takes scalars.*R\^\(5,\)"),
    (lambda: s * iv.gen(i, 3, x[i]), "· takes scalars"),
    (lambda: iv.exp(x), "exp takes scalars"),
    (lambda: iv.let("t", iv.gen(i, 3, x[i]), iv.var("t", (4,))[0]), r"let t: the value has type R\^\(3,\)"),
    (lambda: iv.let("t", s, iv.var("t", (2,))[0]), "let t: the value has type R but the body reads"),
    (lambda: iv.check(_same_variable_with_two_shapes()), "variable 'v' is used with types"),
    (lambda: iv.sum(i, 3, iv.gen(j, 3, x[j])), "sum takes scalars"),
    (lambda: x > 1.0, "data comparison needs scalars"),
    # reads out of range, without a guard or with one that does not guard enough
    (lambda: iv.check(iv.gen(i, 5, x[i + 1])), r"read out of range: x\[i \+ 1\]"),
    (lambda: iv.check(iv.gen(i, 5, x[i - 1])), "read out of range.*can read index -1"),
    (lambda: iv.check(iv.gen(i, 5, iv.bracket(i >= 1) * x[i + 1])), "read out of range"),
    (lambda: iv.check(iv.gen(i, 5, iv.bracket(s > 0.0) * x[i + 1])), "read out of range"),  # data guards nothing
    (lambda: iv.check(iv.gen(i, 5, iv.bracket((i < 4) | (i > 0)) * x[i + 1])), "read out of range"),
    (lambda: iv.check(iv.gen(i, 3, y[2 * i])), "read out of range"),  # y[4] with y of extent 4
    (lambda: iv.check(iv.gen(i, 3, iv.gen(j, 3, y[i + j]))), "read out of range"),
    # indices outside their binders
    (lambda: iv.check(x[i]), "index i is used outside its binder"),
    (lambda: iv.check(iv.gen(j, 3, x[i])), "index i is used outside its binder"),
    (lambda: iv.check(iv.sum(i, 3, x[i]) + x[i]), "index i is used outside its binder"),
    (lambda: iv.check(iv.bracket(i < 2) * s), "index i is used outside its binder"),
    # predicates and expressions have no Python truth value
    (lambda: bool(i < j), "has no Python truth value"),
    (lambda: bool(x[0] > 1.0), "has no Python truth value"),
    (lambda: 0 <= i < 3, "has no Python truth value"),  # a chained comparison asks for one
    (lambda: bool(x[0]), "has no Python truth value"),
    (lambda: bool(i), "has no truth value"),
    (lambda: x[0] if i == j else s, "has no Python truth value"),
    # index expressions are affine
    (lambda: x[i * j], "must be affine"),
    (lambda: x[i * 0.5], "scaled by an integer"),
    (lambda: x[s], "cannot be used as an index"),
    (lambda: x[0] + i, "cannot be used as a scalar value"),
    # indexing a scalar, projecting a non-pair
    (lambda: s[0], "cannot index the scalar s"),
    (lambda: x[0][1], r"cannot index the scalar x\[0\]"),
    (lambda: x.fst, r"\.fst of x, which is not a pair"),
    (lambda: s.snd, r"\.snd of s, which is not a pair"),
    # binders and brackets
    (lambda: iv.gen(i, 0, x[i]), "positive integer extent"),
    (lambda: iv.sum(i * 2, 3, x[i]), "sum binds an index variable"),
    (lambda: iv.bracket(1.0), "expected a predicate"),
    (lambda: iv.var("z", (0,)), "positive extents"),
    # evaluation with missing or misshapen arrays
    (lambda: iv.evaluate(x[0]), "no value given for the variable 'x'"),
    (lambda: iv.evaluate(x[0], x=np.ones(4)), "has shape"),
])
def test_ill_typed_programs_are_refused_naming_the_construct(build: Callable[[], Any], message: str) -> None:
    with pytest.raises(IvTypeError, match=message) as info:
        build()
    assert isinstance(info.value, TypeError)  # IvTypeError is a TypeError too


def test_guards_of_every_kind_make_reads_in_range() -> None:
    X = np.arange(1.0, 6.0)
    accepted = [
        iv.gen(i, 5, iv.bracket(i + 1 < 5) * x[i + 1]),
        iv.gen(i, 5, x[i + 1] * iv.bracket(i <= 3)),  # a unit bracket on the right guards the left factor
        iv.gen(i, 5, iv.bracket((i >= 1) & (i + 1 < 5)) * (x[i - 1] + x[i + 1])),
        iv.gen(i, 5, iv.bracket(i >= 1) * (iv.bracket(i < 4) * (x[i - 1] * x[i + 1]))),
        iv.gen(i, 5, iv.bracket((i + 1 < 5) & (x[i + 1] > 2.0)) * x[i]),  # data read guarded in its bracket
        iv.gen(i, 3, iv.gen(j, 3, iv.bracket(i + j < 5) * x[i + j])),
        iv.sum(i, 5, iv.sum(j, 5, iv.bracket(2 * i + 1 == j) * x[i])),
        iv.gen(i, 5, iv.gen(i, 2, x[i + 3])),  # the inner i shadows the outer one
    ]
    for expr in accepted:
        assert iv.check(expr) == {"x": (5,)}
        value, _ = oracle(expr, {"x": X})
        assert_close(iv.evaluate(expr, x=X), value)


# ----------------------------------------------------------------------------- pairs and shadowing (bugs found and fixed)


def test_reading_an_array_of_nested_pairs() -> None:
    nested = iv.gen(i, 3, iv.pair(iv.pair(x[i], 2 * x[i]), s))
    expr = iv.gen(j, 3, nested[j].fst.snd)
    assert iv.check(expr) == {"x": (5,), "s": ()}
    X = np.arange(5.0)
    assert np.array_equal(iv.evaluate(expr, x=X, s=1.0), 2 * X[:3])


def test_indexing_a_pair_with_a_scalar_side_is_refused() -> None:
    with pytest.raises(IvTypeError):
        iv.check(iv.pair(iv.gen(i, 3, x[i]), s)[0])


def test_indexing_a_pair_of_arrays_of_different_extents_is_refused() -> None:
    ragged = iv.pair(iv.gen(i, 4, x[i]), iv.gen(i, 3, x[i]))
    with pytest.raises(IvTypeError):
        iv.check(iv.gen(j, 4, ragged[j].snd))


def test_out_of_range_message_under_a_shadowing_binder_names_the_users_read() -> None:
    shadowed = iv.gen(i, 5, iv.bracket(i < 4) * iv.gen(i, 5, x[i + 1]))  # the guard is about the outer i
    with pytest.raises(IvTypeError, match="read out of range") as info:
        iv.check(shadowed)
    assert "x[i + 1]" in str(info.value), str(info.value)


# ----------------------------------------------------------------------------- jacacc.intlin

NAMES = ("u", "v", "w")


@st.composite
def systems(draw: st.DrawFn) -> tuple[list, list, dict[str, tuple[int, int]]]:
    """A random system over 2–3 variables in boxes within 0..6, coefficients in [-3, 3]."""
    names = NAMES[: draw(st.integers(2, 3))]
    box = {}
    for n in names:
        lo = draw(st.integers(0, 6))
        box[n] = (lo, draw(st.integers(lo, 6)))

    def form() -> tuple[dict[str, int], int]:
        return {n: draw(st.integers(-3, 3)) for n in names}, draw(st.integers(-9, 9))

    ineqs = [form() for _ in range(draw(st.integers(0, 4)))]
    eqs = [form() for _ in range(draw(st.integers(0, 2)))]
    return ineqs, eqs, box


def _value(form: tuple[dict[str, int], int], point: dict[str, int]) -> int:
    return sum(c * point[n] for n, c in form[0].items()) + form[1]


def _box_points(box: dict[str, tuple[int, int]]) -> list[dict[str, int]]:
    names = list(box)
    return [dict(zip(names, p, strict=True)) for p in itertools.product(*(range(lo, hi + 1) for lo, hi in box.values()))]


def _solutions(ineqs: list, eqs: list, box: dict[str, tuple[int, int]]) -> list[dict[str, int]]:
    return [p for p in _box_points(box) if all(_value(f, p) >= 0 for f in ineqs) and all(_value(f, p) == 0 for f in eqs)]


@settings(max_examples=300, deadline=None)
@given(system=systems())
def test_integer_feasible_equals_enumeration(system: tuple[list, list, dict]) -> None:
    ineqs, eqs, box = system
    assert integer_feasible(ineqs, eqs, box) == bool(_solutions(ineqs, eqs, box))


@settings(max_examples=200, deadline=None)
@given(system=systems())
def test_eliminate_never_removes_an_integer_point(system: tuple[list, list, dict]) -> None:
    ineqs, eqs, box = system
    # everything as inequalities, the box and both halves of each equality included
    constraints = list(ineqs) + [f for c, k in eqs for f in ((c, k), ({n: -a for n, a in c.items()}, -k))]
    constraints += [({n: 1}, -lo) for n, (lo, _) in box.items()] + [({n: -1}, hi) for n, (_, hi) in box.items()]
    points = _solutions(ineqs, eqs, box)
    for name in box:
        projected = eliminate(constraints, name)
        assert all(form[0].get(name, 0) == 0 for form in projected)
        for p in points:
            assert all(_value(form, p) >= 0 for form in projected), (name, p)
    # eliminating every variable in turn: what remains is constant, and contradictory only without points
    remaining = constraints
    for name in box:
        remaining = eliminate(remaining, name)
    assert all(not any(form[0].values()) for form in remaining)
    if any(form[1] < 0 for form in remaining):
        assert not points


@settings(max_examples=300, deadline=None)
@given(lower=st.lists(st.tuples(st.integers(1, 3), st.integers(-9, 9)), max_size=2),
       upper=st.lists(st.tuples(st.integers(-3, -1), st.integers(-9, 9)), max_size=2),
       equal=st.lists(st.tuples(st.integers(-3, 3).filter(bool), st.integers(-9, 9)), max_size=2),
       lo=st.integers(-6, 6), hi=st.integers(-6, 6))
def test_count_points_1d_equals_enumeration(lower: list, upper: list, equal: list, lo: int, hi: int) -> None:
    brute = sum(1 for v in range(lo, hi + 1)
                if all(a * v + c >= 0 for a, c in lower + upper) and all(a * v + c == 0 for a, c in equal))
    assert count_points_1d(lower, upper, equal, lo, hi) == brute


@given(a=st.integers(-50, 50), b=st.integers(-7, 7).filter(bool))
def test_floor_and_ceil_division_are_exact(a: int, b: int) -> None:
    assert floor_div(a, b) == int(np.floor(a / b))
    assert ceil_div(a, b) == int(np.ceil(a / b))


def test_integer_feasible_by_hand() -> None:
    box = {"i": (0, 3), "j": (0, 3)}
    assert integer_feasible([], [({"i": 1, "j": 1}, -5)], box)  # i + j = 5
    assert not integer_feasible([], [({"i": 2}, -3)], box)  # 2i = 3: rationally feasible only
    assert not integer_feasible([], [({"i": 2, "j": -2}, -1)], box)  # 2i - 2j = 1
    assert not integer_feasible([({"i": 1}, -4)], [], box)  # i ≥ 4 outside the box
    assert integer_feasible([({"i": 3, "j": -2}, -1), ({"i": -3, "j": 2}, 2)], [], box)  # 1 ≤ 3i - 2j ≤ 2
    with pytest.raises(ValueError, match="without bounds"):
        integer_feasible([({"k": 1}, 0)], [], box)


@pytest.mark.parametrize("system, removed", [
    # 2i + 3j = a, i + 2j = b: no unit coefficient, but unimodular (Smith divisors 1, 1): both sums go
    (lambda i, j, a, b: (2 * i + 3 * j == a) & (i + 2 * j == b), 2),
    # i + j = a, i - j = b: divisors 1, 2 — one sum is removed, the other needs a divisibility bracket
    (lambda i, j, a, b: (i + j == a) & (i - j == b), 1),
    # three equalities in two summed indices: a cokernel condition on a, b appears
    (lambda i, j, a, b: (3 * i + 2 * j == a) & (2 * i + j == b) & (5 * i + 3 * j == a + b), 2),
])
def test_simplify_removes_sums_pinned_by_an_equality_system(system, removed):
    from jacacc.iverson.syntax import Sum, walk

    i, j, a, b = (iv.index(n) for n in "ijab")
    x = iv.var("x", (9, 9))
    e = iv.gen("a", 7, iv.gen("b", 7, iv.sum("i", 9, iv.sum("j", 9, iv.bracket(system(i, j, a, b)) * x[i, j]))))
    s = iv.simplify(e)
    assert sum(isinstance(n, Sum) for n in walk(s)) == 2 - removed
    X = np.random.default_rng(0).standard_normal((9, 9))
    assert np.array_equal(iv.evaluate(s, x=X), iv.evaluate(e, x=X))
    assert iv.cost(s) == iv.count_operations(s, x=X)
