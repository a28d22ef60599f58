"""Exact integer linear algebra on affine constraints: Fourier–Motzkin elimination and integer feasibility.

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
from collections.abc import Iterable, Mapping

Form = tuple[dict[str, int], int]

__all__ = ["Form", "bounds_for", "ceil_div", "count_points_1d", "eliminate", "floor_div", "integer_feasible",
           "tighten"]


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
    """Split constraints on ``var`` into lower bounds ``var ≥ ⌈-f/a⌉`` and upper bounds
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


def _shadow_infeasible(cons: list[Form], variables: list[str]) -> bool:
    current = cons
    for v in variables:
        if any(not c and k < 0 for c, k in current):
            return True
        current = eliminate(current, v)
    return any(not c and k < 0 for c, k in current)


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
        projected = cons
        for w in rest:
            projected = eliminate(projected, w)
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
