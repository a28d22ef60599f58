"""jacacc.intlin: Smith normal form, integer pseudo-inverse / kernel / cokernel, Fourier–Motzkin loop nests.

Properties from paper 000 §4.1–4.2 on random integer matrices of every shape up
to 8 × 8 (entries in [-30, 30]) and random inequality systems, against brute
force enumeration.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jacacc.intlin import _matmul, determinant, nested_bounds, smith_normal_form


@st.composite
def matrices(draw: st.DrawFn, max_size: int = 8, bound: int = 30) -> list[list[int]]:
    m, n = draw(st.integers(1, max_size)), draw(st.integers(1, max_size))
    entry = st.integers(-bound, bound)
    # some rows repeated or zero: rank deficiency is the interesting case
    rows = [[draw(entry) for _ in range(n)] for _ in range(m)]
    for r in range(m):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            rows[r] = [0] * n
        elif kind == 1 and r > 0:
            factor = draw(st.integers(-3, 3))
            rows[r] = [factor * v for v in rows[draw(st.integers(0, r - 1))]]
    return rows


@settings(max_examples=150, deadline=None)
@given(matrices())
def test_smith_normal_form_properties(A):
    f = smith_normal_form(A)
    m, n = len(A), len(A[0])
    # S = U A V, diagonal, each entry dividing the next, non-negative
    assert _matmul(_matmul(f.U, A), f.V) == f.S
    for r in range(m):
        for c in range(n):
            assert f.S[r][c] == 0 or r == c
    d = f.diagonal
    assert all(s > 0 for s in d) and all(d[k + 1] % d[k] == 0 for k in range(len(d) - 1))
    assert all(f.S[k][k] == 0 for k in range(f.rank, min(m, n)))
    assert f.rank == np.linalg.matrix_rank(np.array(A, dtype=float))
    # U and V unimodular
    assert abs(determinant(f.U)) == 1 and abs(determinant(f.V)) == 1
    # pseudo-inverse, kernel and cokernel: M I M = M, C M = 0, M K = 0
    identity = f.pseudo_inverse()
    assert _matmul(_matmul([[Fraction(v) for v in row] for row in A], identity), A) == A
    C, K = f.cokernel(), f.kernel()
    assert len(C) == m - f.rank
    if C:
        assert all(v == 0 for row in _matmul(C, A) for v in row)
    assert all(len(row) == n - f.rank for row in K)
    if n > f.rank:
        assert all(v == 0 for row in _matmul(A, K) for v in row)


@settings(max_examples=150, deadline=None)
@given(matrices(max_size=3, bound=4), st.data())
def test_solvability_and_every_solution(A, data):
    """A x = b is solvable iff C b = 0 and I b is integral; then the solutions are I b + K z."""
    f = smith_normal_form(A)
    m, n = len(A), len(A[0])
    b = [data.draw(st.integers(-6, 6)) for _ in range(m)]
    box = range(-4, 5)
    brute = [x for x in itertools.product(box, repeat=n)
             if all(sum(A[r][c] * x[c] for c in range(n)) == b[r] for r in range(m))]
    Ib = [sum(row[k] * b[k] for k in range(m)) for row in f.pseudo_inverse()]
    Cb = [sum(row[k] * b[k] for k in range(m)) for row in f.cokernel()]
    solvable = all(v == 0 for v in Cb) and all(v.denominator == 1 for v in Ib)
    solution = f.solve(b)
    assert (solution is not None) == solvable
    if solution is None:
        assert not brute
        return
    x0, K = solution
    assert all(sum(A[r][c] * x0[c] for c in range(n)) == b[r] for r in range(m))
    for x in brute:  # every solution in the box differs from x0 by an integer combination of K's columns
        diff = [x[c] - x0[c] for c in range(n)]
        if not K or not K[0]:
            assert all(v == 0 for v in diff)
            continue
        coefficients, *_ = np.linalg.lstsq(np.array(K, dtype=float), np.array(diff, dtype=float), rcond=None)
        assert np.allclose(coefficients, np.round(coefficients)) and np.allclose(np.array(K) @ coefficients, diff)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fourier_motzkin_loop_nest_equals_enumeration(data):
    names = ["u", "v", "w"][: data.draw(st.integers(1, 3))]
    coeff = st.integers(-3, 3)
    constraints = [({n: data.draw(coeff) for n in names}, data.draw(st.integers(-8, 8)))
                   for _ in range(data.draw(st.integers(0, 4)))]
    # a bounding box keeps the system finite
    box = [({n: 1}, 0) for n in names] + [({n: -1}, data.draw(st.integers(0, 5))) for n in names]
    nest = nested_bounds(constraints + box, names)
    brute = [dict(zip(names, p, strict=True)) for p in itertools.product(range(0, 6), repeat=len(names))
             if all(sum(c * p[names.index(v)] for v, c in form.items()) + k >= 0 for form, k in constraints + box)]
    assert nest.points() == brute


def test_fourier_motzkin_with_parameters_reproduces_paper_000_example():
    """§6: dd substitutes i = dd₀ − z with max(0, dd₀ − 2) ≤ z ≤ min(4, dd₀) (i < 3, z < 5)."""
    constraints = [({"z": 1}, 0), ({"z": -1}, 4), ({"d": 1, "z": -1}, 0), ({"d": -1, "z": 1}, 2)]
    nest = nested_bounds(constraints, ["z"])
    for d in range(-2, 9):
        expected = list(range(max(0, d - 2), min(4, d) + 1))
        assert [p["z"] for p in nest.points({"d": d})] == expected
    # the feasibility conditions on the parameter: 0 ≤ d ≤ 6
    assert all(nest.points({"d": d}) == [] for d in (-1, 7))


def _brute_force_feasible(ineqs, box) -> bool:
    names = sorted(box)
    for point in itertools.product(*(range(lo, hi + 1) for lo, hi in (box[n] for n in names))):
        env = dict(zip(names, point, strict=True))
        if all(sum(c * env[v] for v, c in coeffs.items()) + k >= 0 for coeffs, k in ineqs):
            return True
    return False


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([0, 2, 6, 4000]))
def test_integer_feasibility_and_shadow_when_fourier_motzkin_is_cut_short(seed, limit):
    """With the projection abandoned early (a small FM_LIMIT: what a large system hits), feasibility
    still equals enumeration and an emptiness proof is still sound."""
    import jacacc.intlin as intlin

    rng = np.random.default_rng(seed)
    names = [f"v{n}" for n in range(int(rng.integers(2, 5)))]
    box = {v: (0, int(rng.integers(1, 3))) for v in names}
    ineqs = [({v: int(rng.integers(-3, 4)) for v in names}, int(rng.integers(-4, 5))) for _ in range(int(rng.integers(3, 9)))]
    saved = intlin.FM_LIMIT
    intlin.FM_LIMIT = limit
    try:
        feasible = intlin.integer_feasible(ineqs, [], box)
        box_forms = [({v: 1}, -lo) for v, (lo, _) in box.items()] + [({v: -1}, hi) for v, (_, hi) in box.items()]
        empty = intlin.shadow_empty(ineqs + box_forms)
    finally:
        intlin.FM_LIMIT = saved
    expected = _brute_force_feasible(ineqs, box)
    assert feasible == expected
    assert not (empty and expected)  # a proof of emptiness is never wrong
