"""jacacc.iverson: building programs, the printer, the checker's errors, the interpreter, jacacc.intlin."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jacacc.iverson as iv
from jacacc.intlin import count_points_1d, eliminate, integer_feasible
from jacacc.iverson.generate import random_program

x, A = iv.var("x", (5,)), iv.var("A", (4, 3))
i, j, k = iv.index("i"), iv.index("j"), iv.index("k")


# ----------------------------------------------------------------------------- printer and structure


@pytest.mark.parametrize("expr, text", [
    (iv.gen(i, 5, iv.gen(j, 5, iv.bracket(i == j))), "⊞_{i<5} ⊞_{j<5} [i = j]"),
    (iv.sum(i, 4, x[i + 1] * x[i]), "Σ_{i<4} x[i + 1] · x[i]"),
    (iv.gen(i, 3, iv.bracket((i < 2) & (i >= 1)) * (x[i] - 2 * x[2 * i])), "⊞_{i<3} [i < 2 ∧ i ≥ 1]·(x[i] - 2 · x[2*i])"),
    (iv.gen(i, 4, iv.bracket((i <= 0) | (i > 2)) * x[4 - i]), "⊞_{i<4} [i ≤ 0 ∨ i > 2]·x[-i + 4]"),
    (iv.sum(i, 5, iv.exp(x[i]) / iv.sqrt(x[i])), "Σ_{i<5} exp(x[i]) / sqrt(x[i])"),
    (iv.pair(x[0], A[1, 2]).snd, "π₂((x[0], A[1, 2]))"),
    (iv.let("y", iv.gen(i, 5, iv.tanh(x[i])), lambda y: y[0] * y[4]), "let y = ⊞_{i<5} tanh(x[i]) in\ny[0] · y[4]"),
    (iv.sum(i, 5, iv.bracket(x[i] > 0) * iv.relu(x[i])), "Σ_{i<5} [x[i] > 0]·relu(x[i])"),
    (-iv.log(x[0]) + 0.25 * iv.sin(x[1]) - iv.cos(x[2]), "-log(x[0]) + 0.25 · sin(x[1]) - cos(x[2])"),
])
def test_printer_uses_the_paper_notation(expr, text):
    assert str(expr) == text


def test_structural_equality_is_alpha_equivalence():
    assert iv.same(iv.gen(i, 5, x[i]), iv.gen(j, 5, x[j]))
    B = iv.var("B", (3, 3))
    assert not iv.same(iv.gen(i, 3, iv.gen(j, 3, B[i, j])), iv.gen(i, 3, iv.gen(j, 3, B[j, i])))
    assert iv.same(iv.gen(i, 3, iv.gen(j, 3, B[i, j])), iv.gen(j, 3, iv.gen(i, 3, B[j, i])))
    assert not iv.same(iv.gen(i, 3, x[i]), iv.gen(i, 4, x[i]))


def test_python_numbers_mix_with_expressions_and_indices():
    n = 5
    e = iv.gen(i, n, 0.25 * x[n - 1 - i] + 1 - x[i] / 2)
    X = np.arange(1.0, 6.0)
    assert np.allclose(iv.evaluate(e, x=X), 0.25 * X[::-1] + 1 - X / 2)
    assert np.isclose(iv.evaluate(2.0 * A[i, 0] if False else iv.sum(i, 4, A[i, 0]), A=np.ones((4, 3))), 4.0)


def test_a_bracket_factor_guards_the_whole_product():
    e = iv.sum(i, 4, iv.sum(j, 4, iv.bracket(i == j) * x[i] * x[j]))
    # [i = j]·(x[i]·x[j]): the product is not computed off the diagonal
    assert iv.cost(e) == {"add": 3, "mul": 4, "nonlinear": 0}
    assert iv.count_operations(e, x=np.ones(5)) == iv.cost(e)


# ----------------------------------------------------------------------------- ill-typed programs


@pytest.mark.parametrize("build, message", [
    (lambda: x + 1.0, "\\+ takes scalars, but x has type R\\^\\(5,\\)"),
    (lambda: iv.gen(i, 5, x[i]) * 2.0, "· takes scalars"),
    (lambda: iv.sum(i, 5, iv.gen(j, 2, x[j])), "sum takes scalars"),
    (lambda: iv.exp(x), "exp takes scalars"),
    (lambda: x[i * j], "index expressions must be affine"),
    (lambda: x[i][j], "cannot index the scalar"),
    (lambda: x[0.5], "an index must be an integer-affine expression"),
    (lambda: x[x[0]], "cannot be used as an index"),
    (lambda: x[0].fst, ".fst of x\\[0\\], which is not a pair"),
    (lambda: iv.let("y", iv.gen(i, 3, x[i]), iv.var("y", (4,))[0]), "let y: the value has type R\\^\\(3,\\)"),
    (lambda: iv.check(x[0] + iv.var("x", (6,))[0]), "variable 'x' is used with types"),
    (lambda: iv.gen(i, 0, x[i]), "positive integer extent"),
    (lambda: iv.var("z", (2, -1)), "positive extents"),
    (lambda: i + 1.5, "scaled by an integer|integer-affine"),
    (lambda: iv.bracket(x[0]), "expected a predicate"),
    (lambda: iv.exp(i), "cannot be used as a scalar value"),
    (lambda: x[0] * (i == j), "is not a value"),
    (lambda: bool(i == j), "has no Python truth value"),
    (lambda: bool(x[0] > 1), "has no Python truth value"),
    (lambda: iv.const(float("inf")), "constants must be finite"),
])
def test_ill_typed_programs_are_refused_naming_the_construct(build, message):
    with pytest.raises(iv.IvTypeError, match=message):
        build()


@pytest.mark.parametrize("expr, message", [
    (iv.gen(i, 5, x[i + 1]), "read out of range: x\\[i \\+ 1\\] with extent 5 can read index 5"),
    (iv.gen(i, 5, x[i - 1]), "read out of range: x\\[i - 1\\] with extent 5 can read index -1"),
    (iv.sum(i, 3, iv.sum(j, 3, x[2 * i + j])), "x\\[2\\*i \\+ j\\]"),
    (iv.gen(i, 5, iv.bracket((i >= 1) | (i == 0)) * x[i - 1]), "under \\[i = 0\\]"),
    (x[i], "index i is used outside its binder .* in x\\[i\\]"),
    (iv.gen(i, 3, iv.bracket(j < 2) * x[i]), "index j is used outside its binder"),
    (iv.gen(i, 5, iv.bracket(x[i - 1] > 0) * x[i]), "x\\[i - 1\\] with extent 5 can read index -1"),
])
def test_reads_out_of_range_and_unbound_indices_are_refused(expr, message):
    with pytest.raises(iv.IvTypeError, match=message):
        iv.check(expr)
    with pytest.raises(iv.IvTypeError):
        iv.evaluate(expr, x=np.ones(5))


def test_guarded_reads_are_accepted():
    guarded = [
        iv.gen(i, 5, iv.bracket(i + 1 < 5) * x[i + 1]),
        iv.gen(i, 5, iv.bracket((i >= 1) & (x[i - 1] > 0)) * x[i]),  # data read guarded by the index part
        iv.gen(i, 6, iv.bracket((2 * i < 5) | (i == 5)) * iv.bracket(i < 5) * x[i]),
        iv.sum(i, 3, iv.sum(j, 5, iv.bracket(2 * i + j <= 4) * x[2 * i + j])),
    ]
    for e in guarded:
        assert iv.check(e) == {"x": (5,)}
        iv.evaluate(e, x=np.ones(5))


def test_evaluate_reports_missing_and_misshapen_arrays():
    e = iv.sum(i, 5, x[i])
    with pytest.raises(iv.IvTypeError, match="no value given for the variable 'x'"):
        iv.evaluate(e)
    with pytest.raises(iv.IvTypeError, match="has shape \\(5,\\), got an array of shape \\(4,\\)"):
        iv.evaluate(e, x=np.ones(4))
    assert iv.evaluate(e, x=np.ones(5), unused=np.ones(2)) == 5.0


def test_interpreter_on_pairs_lets_and_shadowing():
    e = iv.let("p", iv.pair(iv.gen(i, 5, x[i] * 2), iv.sum(i, 5, x[i])),
               lambda p: iv.gen(i, 5, p.fst[i] + p.snd))
    X = np.arange(5.0)
    assert np.allclose(iv.evaluate(e, x=X), 2 * X + X.sum())
    shadow = iv.gen(i, 2, iv.gen(i, 3, A[i, 0]))  # the inner i shadows the outer one
    assert np.array_equal(iv.evaluate(shadow, A=np.arange(12.0).reshape(4, 3)), [[0, 3, 6], [0, 3, 6]])
    pairs = iv.gen(i, 3, iv.pair(x[i], x[i] * x[i]))  # an array of pairs is a pair of arrays
    fst, snd = iv.evaluate(pairs, x=X)
    assert np.array_equal(fst, X[:3]) and np.array_equal(snd, X[:3] ** 2)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), scalar=st.booleans())
def test_generated_programs_are_well_formed(seed: int, scalar: bool):
    program = random_program(np.random.default_rng(seed), scalar=scalar, max_extent=4, max_depth=5)
    assert iv.check(program.expr) == program.inputs
    value = iv.evaluate(program.expr, **program.arrays(np.random.default_rng(seed)))
    if scalar:
        assert isinstance(value, float)


# ----------------------------------------------------------------------------- integer machinery


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_integer_feasibility_equals_enumeration(data):
    names = ["u", "v", "w"][: data.draw(st.integers(1, 3))]
    box = {n: (0, data.draw(st.integers(0, 6))) for n in names}
    coeff = st.integers(-3, 3)
    ineqs = [({n: data.draw(coeff) for n in names}, data.draw(st.integers(-6, 6)))
             for _ in range(data.draw(st.integers(0, 3)))]
    eqs = [({n: data.draw(coeff) for n in names}, data.draw(st.integers(-6, 6)))
           for _ in range(data.draw(st.integers(0, 1)))]
    points = list(itertools.product(*(range(lo, hi + 1) for lo, hi in box.values())))

    def holds(point, form, equal):
        value = sum(c * point[names.index(n)] for n, c in form[0].items()) + form[1]
        return value == 0 if equal else value >= 0

    brute = any(all(holds(p, f, False) for f in ineqs) and all(holds(p, f, True) for f in eqs) for p in points)
    assert integer_feasible(ineqs, eqs, box) == brute
    # Fourier–Motzkin never loses an integer point
    bounds = [({n: 1}, -lo) for n, (lo, hi) in box.items()] + [({n: -1}, hi) for n, (lo, hi) in box.items()]
    projected = eliminate(ineqs + bounds, names[0])
    for p in points:
        if all(holds(p, f, False) for f in ineqs):
            assert all(holds(p, f, False) for f in projected)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(-6, 6)), max_size=2),
       st.lists(st.tuples(st.integers(-3, -1), st.integers(-6, 6)), max_size=2),
       st.lists(st.tuples(st.integers(1, 3), st.integers(-6, 6)), max_size=1),
       st.integers(0, 4), st.integers(0, 8))
def test_count_points_1d_equals_enumeration(lower, upper, equal, lo, hi):
    brute = sum(1 for x_ in range(lo, hi + 1) if all(a * x_ + c >= 0 for a, c in lower + upper)
                and all(a * x_ + c == 0 for a, c in equal))
    assert count_points_1d(lower, upper, equal, lo, hi) == brute
