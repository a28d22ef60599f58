"""Exact integer linear algebra: Smith normal form, Fourier–Motzkin elimination, integer feasibility.

Shared by the tensor language (:mod:`jacacc.iverson`: are reads in range, which
index values satisfy a bracket, how many terms does a guarded sum have) and the
elementwise derivatives of paper 000 (§4.2, Algorithm 3).  Everything is exact:
Python integers, no floating point.

A *linear form* is a pair ``(coeffs, const)`` with ``coeffs`` a mapping from
variable names to integers; a *constraint* ``(coeffs, const)`` states
``Σ coeffs[v]·v + const ≥ 0``.  Equalities are given separately.

Examples
--------
>>> # 0 <= i < 4, 0 <= j < 4, i + j = 5 has integer points; 2*i = 3 has none
>>> box = {"i": (0, 3), "j": (0, 3)}
>>> integer_feasible([], [({"i": 1, "j": 1}, -5)], box)
True
>>> integer_feasible([], [({"i": 2}, -3)], box)
False
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

Form = tuple[dict[str, int], int]

__all__ = ["Form", "LoopBound", "NestedBounds", "SmithForm", "bounds_for", "ceil_div", "count_points_1d",
           "determinant", "eliminate", "floor_div", "integer_feasible", "nested_bounds", "range_escape",
           "shadow_empty", "smith_normal_form", "tighten"]


def floor_div(a: int, b: int) -> int:
    """⌊a / b⌋ for integers, ``b ≠ 0``."""
    return a // b if b > 0 else (-a) // (-b)


def ceil_div(a: int, b: int) -> int:
    """⌈a / b⌉ for integers, ``b ≠ 0``."""
    return -floor_div(-a, b)


def _clean(coeffs: Mapping[str, int]) -> dict[str, int]:
    return {v: int(c) for v, c in coeffs.items() if c}


def tighten(form: Form) -> Form | None:
    """Normalize the constraint ``a·x + c ≥ 0`` for integer ``x``: divide by ``g = gcd(a)`` and round
    ``c`` down (``a/g·x ≥ ⌈-c/g⌉``).  Returns None for a constraint without variables that holds,
    raises nothing; an unsatisfiable constant constraint is returned as ``({}, -1)``."""
    coeffs, const = _clean(form[0]), int(form[1])
    if not coeffs:
        return None if const >= 0 else ({}, -1)
    g = math.gcd(*coeffs.values())
    return {v: c // g for v, c in coeffs.items()}, floor_div(const, g)


def eliminate(constraints: Iterable[Form], var: str) -> list[Form]:
    """Fourier–Motzkin: the constraints without ``var`` implied by ``constraints`` (rational shadow,
    tightened for integers).  Integer-infeasible systems may survive (the shadow is not exact), but a
    system this makes infeasible has no integer point."""
    lower, upper, rest = [], [], []
    for coeffs, const in constraints:
        c = coeffs.get(var, 0)
        (lower if c > 0 else upper if c < 0 else rest).append((coeffs, const))
    out = list(rest)
    for lc, lk in lower:
        a = lc[var]
        for uc, uk in upper:
            b = -uc[var]
            combined = {v: b * lc.get(v, 0) + a * uc.get(v, 0) for v in set(lc) | set(uc) if v != var}
            t = tighten((combined, b * lk + a * uk))
            if t is not None:
                out.append(t)
    return _dedupe(out)


def _dedupe(constraints: list[Form]) -> list[Form]:
    seen: dict[tuple, int] = {}
    for coeffs, const in constraints:
        key = tuple(sorted(coeffs.items()))
        seen[key] = min(seen.get(key, const), const)  # the tighter constant wins
    return [(dict(k), c) for k, c in seen.items()]


def bounds_for(constraints: Iterable[Form], var: str) -> tuple[list[tuple[int, Form]], list[tuple[int, Form]]]:
    """Split constraints on ``var`` into lower bounds ``var ≥ ⌈f/a⌉`` and upper bounds
    ``var ≤ ⌊f/b⌋``, each as ``(divisor, f)`` with ``f`` a form in the other variables."""
    lower: list[tuple[int, Form]] = []
    upper: list[tuple[int, Form]] = []
    for coeffs, const in constraints:
        c = coeffs.get(var, 0)
        others = {v: k for v, k in coeffs.items() if v != var}
        if c > 0:
            lower.append((c, ({v: -k for v, k in others.items()}, -const)))
        elif c < 0:
            upper.append((-c, (others, const)))
    return lower, upper


def _substitute(constraints: Iterable[Form], var: str, value: int) -> list[Form] | None:
    out = []
    for coeffs, const in constraints:
        c = coeffs.get(var, 0)
        rest = {v: k for v, k in coeffs.items() if v != var}
        t = tighten((rest, const + c * value))
        if t is None:
            continue
        if not t[0] and t[1] < 0:
            return None
        out.append(t)
    return out


def _inequalities(ineqs: Iterable[Form], eqs: Iterable[Form], box: Mapping[str, tuple[int, int]]) -> list[Form]:
    cons = [(_clean(c), int(k)) for c, k in ineqs]
    for c, k in eqs:
        cons.append((_clean(c), int(k)))
        cons.append(({v: -x for v, x in _clean(c).items()}, -int(k)))
    for v, (lo, hi) in box.items():
        cons.append(({v: 1}, -int(lo)))
        cons.append(({v: -1}, int(hi)))
    return cons


#: Fourier–Motzkin can square the number of constraints per eliminated variable; past this many
#: pairs a projection is abandoned (a proof of emptiness is then not found, which is always sound)
FM_LIMIT = 4000


def _eliminate_within(constraints: list[Form], var: str) -> list[Form] | None:
    """:func:`eliminate`, or None when it would combine more than :data:`FM_LIMIT` pairs."""
    lower = sum(1 for c, _ in constraints if c.get(var, 0) > 0)
    upper = sum(1 for c, _ in constraints if c.get(var, 0) < 0)
    return None if lower * upper > FM_LIMIT else eliminate(constraints, var)


def _shadow_infeasible(cons: list[Form], variables: list[str]) -> bool:
    current: list[Form] | None = cons
    for v in variables:
        if any(not c and k < 0 for c, k in current):
            return True
        current = _eliminate_within(current, v)
        if current is None:
            return False  # too large to project: not proven empty
    return any(not c and k < 0 for c, k in current)


def shadow_empty(constraints: Iterable[Form]) -> bool:
    """Whether Fourier–Motzkin elimination of every variable proves ``constraints ≥ 0`` have no
    integer point.  Sound, not complete: False means "maybe not empty" (the shadow is rational,
    tightened for integers at each step).

    >>> shadow_empty([({"i": 1}, 0), ({"i": -1}, 2), ({"i": 1}, -3)])  # 0 ≤ i ≤ 2, i ≥ 3
    True
    >>> shadow_empty([({"i": 2, "j": -2}, -1), ({"i": -2, "j": 2}, 1)])  # 2i - 2j = 1: no integers
    True
    """
    cons = [t for t in (tighten(c) for c in constraints) if t is not None]
    return _shadow_infeasible(cons, sorted({v for c, _ in cons for v in c}))


def integer_feasible(ineqs: Iterable[Form], eqs: Iterable[Form], box: Mapping[str, tuple[int, int]],
                     budget: int = 200_000) -> bool:
    """Whether ``ineqs ≥ 0``, ``eqs = 0`` have an integer point with each variable within its
    inclusive ``box`` bounds ``(lo, hi)`` (every variable of the constraints must be in ``box``).

    Exact: a Fourier–Motzkin shadow that is empty proves infeasibility; otherwise the
    first variable's values allowed by the projection are enumerated and the rest
    solved recursively.  When more than ``budget`` branches would be needed the
    answer is a conservative True ("maybe feasible").
    """
    cons = _inequalities(ineqs, eqs, box)
    variables = sorted(box)
    missing = {v for c, _ in cons for v in c} - set(variables)
    if missing:
        raise ValueError(f"variables without bounds: {sorted(missing)}")
    counter = [budget]

    def search(cons: list[Form], vars_left: list[str]) -> bool:
        counter[0] -= 1
        if counter[0] < 0:
            return True
        cons = [t for t in (tighten(c) for c in cons) if t is not None]
        if any(not c and k < 0 for c, k in cons):
            return False
        if not vars_left:
            return True
        if _shadow_infeasible(cons, vars_left):
            return False
        v, rest = vars_left[0], vars_left[1:]
        projected: list[Form] | None = cons
        for w in rest:
            projected = _eliminate_within(projected, w)
            if projected is None:  # too large: v's own constraints (its box) bound the enumeration
                projected = [c for c in cons if set(c[0]) <= {v}]
                break
        lower, upper = bounds_for(projected, v)
        lo = max(ceil_div(f[1], d) for d, f in lower if not f[0])
        hi = min(floor_div(f[1], d) for d, f in upper if not f[0])
        for value in range(lo, hi + 1):
            sub = _substitute(cons, v, value)
            if sub is not None and search(sub, rest):
                return True
            if counter[0] < 0:
                return True
        return False

    return search(cons, variables)


def range_escape(form: Form, extent: int, ineqs: Iterable[Form], eqs: Iterable[Form],
                 box: Mapping[str, tuple[int, int]]) -> int | None:
    """Where an index ``form`` can leave ``0 ≤ form < extent`` under the constraints: ``-1`` when it
    can go below 0, ``extent`` when it can reach ``extent``, None when it stays in range (exact:
    :func:`integer_feasible`)."""
    coeffs, const = dict(form[0]), form[1]
    ineqs = list(ineqs)
    for bad, where in ((({v: -c for v, c in coeffs.items()}, -const - 1), -1),  # form ≤ -1
                       ((coeffs, const - extent), extent)):  # form ≥ extent
        if integer_feasible(ineqs + [bad], eqs, box):
            return where
    return None


def count_points_1d(lower: list[tuple[int, int]], upper: list[tuple[int, int]], equal: list[tuple[int, int]],
                    lo: int, hi: int) -> int:
    """Number of integers ``x`` in ``[lo, hi]`` with ``a·x + c ≥ 0`` for each ``(a, c)`` in ``lower``
    (``a > 0``) and ``upper`` (``a < 0``) and ``a·x + c = 0`` for each ``(a, c)`` in ``equal``."""
    for a, c in lower:
        lo = max(lo, ceil_div(-c, a))
    for a, c in upper:
        hi = min(hi, floor_div(c, -a))
    if equal:
        a, c = equal[0]
        if (-c) % a:
            return 0
        x = (-c) // a
        if not lo <= x <= hi or any(a2 * x + c2 != 0 for a2, c2 in equal[1:]):
            return 0
        return 1
    return max(0, hi - lo + 1)


# ----------------------------------------------------------------------------- Smith normal form (paper 000 §4.1)

Matrix = list[list[int]]


def _identity(n: int) -> Matrix:
    return [[int(r == c) for c in range(n)] for r in range(n)]


def _matmul(a: list[list], b: list[list]) -> list[list]:
    cols = len(b[0]) if b else 0
    return [[sum(a[r][k] * b[k][c] for k in range(len(b))) for c in range(cols)] for r in range(len(a))]


def _as_matrix(a: Iterable[Iterable[int]]) -> Matrix:
    rows = [[int(v) for v in row] for row in a]
    if rows and any(len(r) != len(rows[0]) for r in rows):
        raise ValueError("a matrix needs rows of one length")
    return rows


@dataclass(frozen=True)
class SmithForm:
    """``S = U·A·V`` with ``U``, ``V`` unimodular and ``S`` diagonal, each diagonal entry dividing the next.

    ``rank`` is the number of non-zero diagonal entries.  :meth:`pseudo_inverse`,
    :meth:`kernel` and :meth:`cokernel` give paper 000's I, K and C (§4.1):
    ``A x = b`` has an integer solution iff ``C b = 0`` and ``I b`` is integral,
    and then every solution is ``I b + K z`` for an integer vector ``z``.
    """

    A: Matrix
    S: Matrix
    U: Matrix
    V: Matrix
    rank: int

    @property
    def diagonal(self) -> list[int]:
        return [self.S[k][k] for k in range(self.rank)]

    def pseudo_inverse(self) -> list[list[Fraction]]:
        """``I = V·S⁺·U`` (n × m, rational), with ``S⁺`` the transpose of ``S`` with inverted pivots."""
        m, n = len(self.A), len(self.A[0]) if self.A else 0
        s_plus = [[Fraction(0)] * m for _ in range(n)]
        for k in range(self.rank):
            s_plus[k][k] = Fraction(1, self.S[k][k])
        return _matmul(_matmul(self.V, s_plus), self.U)

    def kernel(self) -> Matrix:
        """``K``: the last ``n - rank`` columns of ``V`` (n × (n - rank)); ``A·K = 0``, and they span
        the integer kernel."""
        return [row[self.rank:] for row in self.V]

    def cokernel(self) -> Matrix:
        """``C``: the last ``m - rank`` rows of ``U`` ((m - rank) × m); ``C·A = 0``."""
        return [list(row) for row in self.U[self.rank:]]

    def solve(self, b: Sequence[int]) -> tuple[list[int], Matrix] | None:
        """An integer solution of ``A x = b`` and the kernel basis, or None when there is none."""
        c = [sum(self.U[r][k] * int(b[k]) for k in range(len(b))) for r in range(len(self.U))]
        if any(c[r] for r in range(self.rank, len(c))):
            return None
        y = []
        for k in range(self.rank):
            if c[k] % self.S[k][k]:
                return None
            y.append(c[k] // self.S[k][k])
        n = len(self.V)
        y += [0] * (n - self.rank)
        return [sum(self.V[r][k] * y[k] for k in range(n)) for r in range(n)], self.kernel()


def smith_normal_form(a: Iterable[Iterable[int]]) -> SmithForm:
    """The Smith normal form of an integer matrix (exact; paper 000 §4.1).

    Pivoting on the smallest non-zero entry of the remaining block, rows and
    columns are reduced by integer division until the pivot's row and column
    are clear and it divides the whole block; every operation is applied to
    ``U`` (rows) or ``V`` (columns) too.

    Examples
    --------
    >>> f = smith_normal_form([[2, 4], [6, 8]])
    >>> f.diagonal, _matmul(_matmul(f.U, f.A), f.V) == f.S
    ([2, 4], True)
    >>> f.solve([2, 6]) is not None, f.solve([1, 0]) is None     # 2x + 4y = 1 has no integer solution
    (True, True)
    """
    A = _as_matrix(a)
    m = len(A)
    n = len(A[0]) if A else 0
    S = [row[:] for row in A]
    U, V = _identity(m), _identity(n)

    def swap_rows(i: int, j: int) -> None:
        S[i], S[j] = S[j], S[i]
        U[i], U[j] = U[j], U[i]

    def swap_cols(i: int, j: int) -> None:
        for M in (S, V):
            for row in M:
                row[i], row[j] = row[j], row[i]

    def add_row(dst: int, src: int, q: int) -> None:  # row dst += q · row src
        for M in (S, U):
            M[dst] = [x + q * y for x, y in zip(M[dst], M[src], strict=True)]

    def add_col(dst: int, src: int, q: int) -> None:  # col dst += q · col src
        for M in (S, V):
            for row in M:
                row[dst] += q * row[src]

    rank = 0
    for t in range(min(m, n)):
        while True:
            entries = [(abs(S[r][c]), r, c) for r in range(t, m) for c in range(t, n) if S[r][c]]
            if not entries:
                break
            _, r, c = min(entries)
            swap_rows(t, r)
            swap_cols(t, c)
            pivot = S[t][t]
            for r in range(t + 1, m):
                if S[r][t]:
                    add_row(r, t, -(S[r][t] // pivot))
            for c in range(t + 1, n):
                if S[t][c]:
                    add_col(c, t, -(S[t][c] // pivot))
            if any(S[r][t] for r in range(t + 1, m)) or any(S[t][c] for c in range(t + 1, n)):
                continue  # a remainder is smaller than the pivot: it becomes the next pivot
            bad = next(((r, c) for r in range(t + 1, m) for c in range(t + 1, n) if S[r][c] % pivot), None)
            if bad is None:
                break
            add_row(t, bad[0], 1)  # bring a non-multiple into the pivot row; the next round reduces it
        if S[t][t] == 0:  # the remaining block is zero: the rank is t
            break
        if S[t][t] < 0:
            S[t] = [-x for x in S[t]]
            U[t] = [-x for x in U[t]]
        rank += 1
    return SmithForm(A, S, U, V, rank)


def determinant(a: Iterable[Iterable[int]]) -> int:
    """The determinant of a square integer matrix (exact, by fractions)."""
    M = [[Fraction(v) for v in row] for row in _as_matrix(a)]
    n = len(M)
    det = Fraction(1)
    for k in range(n):
        pivot = next((r for r in range(k, n) if M[r][k]), None)
        if pivot is None:
            return 0
        if pivot != k:
            M[k], M[pivot] = M[pivot], M[k]
            det = -det
        det *= M[k][k]
        for r in range(k + 1, n):
            f = M[r][k] / M[k][k]
            M[r] = [x - f * y for x, y in zip(M[r], M[k], strict=True)]
    return int(det)


# ----------------------------------------------------------------------------- nested bounds (paper 000 §4.2)


@dataclass(frozen=True)
class LoopBound:
    """The range of one variable: ``max(⌈f/a⌉ for (a, f) in lower) ≤ x ≤ min(⌊f/b⌋ for (b, f) in upper)``,
    each ``f`` a form in the variables outside it (and the parameters)."""

    variable: str
    lower: tuple[tuple[int, Form], ...]
    upper: tuple[tuple[int, Form], ...]

    def range(self, env: Mapping[str, int]) -> range:
        lo = max(ceil_div(_value(f, env), d) for d, f in self.lower) if self.lower else None
        hi = min(floor_div(_value(f, env), d) for d, f in self.upper) if self.upper else None
        if lo is None or hi is None:
            raise ValueError(f"{self.variable} is unbounded {'below' if lo is None else 'above'}")
        return range(lo, hi + 1)


def _value(form: Form, env: Mapping[str, int]) -> int:
    return sum(c * env[v] for v, c in form[0].items()) + form[1]


@dataclass(frozen=True)
class NestedBounds:
    """Fourier–Motzkin's loop nest for ``A x ≥ b``: ``bounds`` outermost first, and the ``conditions``
    on the parameters alone under which the system can have points (paper 000 Algorithm 3)."""

    bounds: tuple[LoopBound, ...]
    conditions: tuple[Form, ...]

    def points(self, params: Mapping[str, int] | None = None) -> list[dict[str, int]]:
        """Every integer point of the nest (parameters fixed by ``params``), in loop order."""
        env = dict(params or {})
        if any(_value(c, env) < 0 for c in self.conditions):
            return []
        out: list[dict[str, int]] = []

        def walk(k: int) -> None:
            if k == len(self.bounds):
                out.append({b.variable: env[b.variable] for b in self.bounds})
                return
            for value in self.bounds[k].range(env):
                env[self.bounds[k].variable] = value
                walk(k + 1)
            env.pop(self.bounds[k].variable, None)

        walk(0)
        return out


def nested_bounds(constraints: Iterable[Form], variables: Sequence[str]) -> NestedBounds:
    """Loop bounds for ``variables`` (outermost first) from ``constraints`` (``form ≥ 0``) by
    Fourier–Motzkin elimination, innermost variable first; other names are parameters.

    The bounds of each variable are read off the system in which every inner
    variable has been eliminated, so they mention only outer variables and
    parameters; what is left after eliminating all of them are the
    feasibility conditions.  The rational shadow tightened for integers
    (:func:`tighten`) can admit an outer value with no inner integer point: the
    nest then has an empty inner range there, never a missing point.

    Examples
    --------
    >>> # 0 ≤ z ≤ 4, 0 ≤ d - z ≤ 2  (paper 000 §6: i = d - z)
    >>> nest = nested_bounds([({"z": 1}, 0), ({"z": -1}, 4), ({"d": 1, "z": -1}, 0), ({"d": -1, "z": 1}, 2)], ["z"])
    >>> [p["z"] for p in nest.points({"d": 3})]
    [1, 2, 3]
    """
    systems = [[t for t in (tighten(c) for c in constraints) if t is not None]]
    for v in reversed(variables):
        systems.append(eliminate(systems[-1], v))
    bounds = []
    for k, v in enumerate(variables):
        system = systems[len(variables) - 1 - k]  # the inner variables of v eliminated
        lower, upper = bounds_for(system, v)
        bounds.append(LoopBound(v, tuple(lower), tuple(upper)))
    return NestedBounds(tuple(bounds), tuple(c for c in systems[-1] if c[0] or c[1] < 0))
