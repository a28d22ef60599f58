"""The integer system of a point in an elementwise definition: its indices, their ranges and guards.

Every index of a definition lives in a *context*: the function's indices with
their extents, the enclosing sums' indices with their bounds (a lower limit
``⌈n/d⌉ ≤ k`` is the linear constraint ``d·k − n ≥ 0``), and the enclosing
brackets' conditions.  A floor quotient ``⌊n/m⌋`` in an index becomes an
auxiliary integer ``q`` with ``m·q ≤ n ≤ m·q + m − 1``, or ``n = m·q`` where a
bracket ``n % m == 0`` guards it, so the whole context is a system of integer
equalities and inequalities (:mod:`jacacc.intlin`) — the set Γ̂ of paper 000
§5.2 — used both to check reads against their arrays' extents and to solve a
read map for the derivative (§5.1).

Examples
--------
>>> from jacacc.elementwise.parse import parse
>>> d = parse("f[i] = sum(k, 0, i, x[(i + k) // 2])")
>>> ctx = Context.of_function(d.indices, {"i": 4}).inside(d.body)
>>> sys = ctx.system()
>>> form = sys.linear(d.body.body.indices[0])
>>> sorted(form[0].items()), sorted(sys.box(ctx))
([('_q0', 1)], ['_q0', 'i', 'k'])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jacacc.intlin import Form
from jacacc.kernels.ir import Affine, Condition, Guard, Limit, Node, Quotient, Summation

__all__ = ["Context", "System", "interval"]


@dataclass(frozen=True)
class Context:
    """The indices in scope at a node: ``(name, extent or None)`` of the function (None: only
    ``≥ 0`` is known, as for a derivative's indices, whose range is its argument's shape), the
    enclosing sums ``(index, lower, upper)`` outermost first, and the enclosing brackets' conditions."""

    outputs: tuple[tuple[str, int | None], ...]
    sums: tuple[tuple[str, tuple[Limit, ...], tuple[Limit, ...]], ...] = ()
    conditions: tuple[Condition, ...] = ()

    @staticmethod
    def of_function(indices: tuple[str, ...], sizes: Mapping[str, int | None]) -> Context:
        return Context(tuple((n, sizes.get(n)) for n in indices))

    def inside(self, node: Node) -> Context:
        """The context of ``node``'s body (a sum or a bracket)."""
        if isinstance(node, Summation):
            return Context(self.outputs, (*self.sums, (node.index, node.lower, node.upper)), self.conditions)
        if isinstance(node, Guard):
            return Context(self.outputs, self.sums, (*self.conditions, *node.conditions))
        return self

    @property
    def variables(self) -> list[str]:
        return [n for n, _ in self.outputs] + [k for k, _, _ in self.sums]

    def system(self) -> System:
        """The constraints of this context (auxiliaries for its quotients are added as they are met)."""
        sys = System()
        for c in self.conditions:
            if c.relation == "%":
                sys.divisible(c.form, c.modulus)
        for name, extent in self.outputs:
            sys.ineqs.append(({name: 1}, 0))
            if extent is not None:
                sys.ineqs.append(({name: -1}, extent - 1))
        for index, lower, upper in self.sums:
            for limit in lower:  # d·k - n ≥ 0
                coeffs, const = sys.linear(limit.numerator)
                sys.ineqs.append(({**{v: -c for v, c in coeffs.items()}, index: limit.divisor}, -const))
            for limit in upper:  # n - d·k ≥ 0
                coeffs, const = sys.linear(limit.numerator)
                sys.ineqs.append(({**coeffs, index: -limit.divisor}, const))
        for c in self.conditions:
            if c.relation != "%":
                (sys.eqs if c.relation == "==" else sys.ineqs).append(sys.linear(c.form))
        return sys


@dataclass
class System:
    """Integer constraints ``ineqs ≥ 0`` and ``eqs = 0`` over index names and auxiliaries ``_q*``;
    ``defined`` maps each auxiliary to ``(n, m)``, the quotient ``n / m`` it stands for."""

    ineqs: list[Form] = field(default_factory=list)
    eqs: list[Form] = field(default_factory=list)
    defined: dict[str, tuple[Affine, int]] = field(default_factory=dict)
    _exact: dict[tuple, str] = field(default_factory=dict)  # numerators guarded by n % m == 0
    _names: dict[Quotient, str] = field(default_factory=dict)

    def _fresh(self, numerator: Affine, m: int) -> str:
        name = f"_q{len(self.defined)}"
        self.defined[name] = (numerator, m)
        return name

    def divisible(self, numerator: Affine, m: int) -> str:
        """Register a bracket ``n % m == 0``: an auxiliary ``q`` with ``n = m·q``."""
        n = self.linear(numerator)
        key = (_key(n), m)
        if key not in self._exact:
            name = self._exact[key] = self._fresh(numerator, m)
            self.eqs.append(({**n[0], name: -m}, n[1]))
        return self._exact[key]

    def linear(self, a: Affine) -> Form:
        """``a`` as a linear form over index names and auxiliaries (a quotient ``⌊n/m⌋`` becomes an
        auxiliary ``q``: ``n = m·q`` where a bracket ``n % m == 0`` encloses it, else
        ``0 ≤ n − m·q ≤ m − 1``)."""
        coeffs: dict[str, int] = {}
        for v, c in a.coeffs:
            name = self._auxiliary(v) if isinstance(v, Quotient) else v
            coeffs[name] = coeffs.get(name, 0) + c
        return {v: c for v, c in coeffs.items() if c}, a.const

    def _auxiliary(self, q: Quotient) -> str:
        if q not in self._names:
            n = self.linear(q.numerator)
            key = (_key(n), q.divisor)
            if key in self._exact:
                self._names[q] = self._exact[key]
            else:
                name = self._names[q] = self._fresh(q.numerator, q.divisor)
                self.ineqs.append(({**n[0], name: -q.divisor}, n[1]))  # n - m·q ≥ 0
                self.ineqs.append(({**{v: -c for v, c in n[0].items()}, name: q.divisor}, q.divisor - 1 - n[1]))
        return self._names[q]

    def box(self, context: Context, sizes: Mapping[str, int] | None = None) -> dict[str, tuple[int, int]]:
        """Inclusive bounds of every variable, from the context's extents (``sizes`` for indices
        without one) through the sum limits and quotients — what :func:`jacacc.intlin.integer_feasible`
        needs to search."""
        out: dict[str, tuple[int, int]] = {}
        for name, extent in context.outputs:
            n = extent if extent is not None else (sizes or {}).get(name)
            if n is None:
                raise ValueError(f"no extent for the index {name}")
            out[name] = (0, n - 1)
        for index, lower, upper in context.sums:
            lo = max(-(-interval(lim.numerator, out)[0] // lim.divisor) for lim in lower)
            hi = min(interval(lim.numerator, out)[1] // lim.divisor for lim in upper)
            out[index] = (lo, max(lo, hi))
        for name, (numerator, m) in self.defined.items():
            lo, hi = interval(numerator, out)
            out[name] = (lo // m, hi // m)
        return out


def _key(form: Form) -> tuple:
    return tuple(sorted(form[0].items())), form[1]


def interval(a: Affine, box: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    """The range of ``a`` over the box (quotients through their numerators' ranges)."""
    lo = hi = a.const
    for v, c in a.coeffs:
        if isinstance(v, Quotient):
            n_lo, n_hi = interval(v.numerator, box)
            low, high = n_lo // v.divisor, n_hi // v.divisor
        else:
            low, high = box[v]
        lo += min(c * low, c * high)
        hi += max(c * low, c * high)
    return lo, hi
