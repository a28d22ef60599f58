"""Kernels that write a definition only where its top-level bracket holds, its sums added in order.

The loops of :mod:`~jacacc.kernels.loops` fill every element of the output box;
a definition ``f[i, j] = [i = j] · g[i]`` there costs n² iterations for n
values.  The kernels here take the box's extents and the definition's
top-level :class:`~jacacc.kernels.ir.Guard` as a system of affine
inequalities and loop over its integer points only: Fourier–Motzkin bounds
(:func:`jacacc.intlin.nested_bounds`, paper 000 §4.2, Algorithm 3), outermost
first, so the gradient of a trace runs n iterations, as paper 001 §4.3's cost
model counts it.  The elements outside the support are not written: a caller
that needs them zero passes a zeroed buffer.  With ``accumulate`` the value
is added (``+=``) instead of stored, so that several terms of one result,
each over its own support, fill one buffer.

These are the loops the Iverson language lowers onto (:mod:`jacacc.iverson.lower`),
and they keep that language's promise: a sum adds its terms in index order,
functions are libm's and no fast-math flag is set, so a kernel's value is the
interpreter's bit for bit wherever the lowering kept the tree (it rebalances
chains of more than :data:`~jacacc.kernels.ir.CHAIN_FOLD` additions).

Examples
--------
>>> import numpy as np
>>> from jacacc.kernels.ir import Affine, Condition, Definition, Guard, Read
>>> i, j = Affine.of("i"), Affine.of("j")
>>> diagonal = Guard(0, (Condition(i - j, "=="),), Read(0, "g", (i,)))
>>> d = Definition("f", ("i", "j"), diagonal, "f[i, j] = [i == j] * g[i]")
>>> source = support_source(d, ["g"], (3, 3))
>>> for line in source.splitlines()[2:5]: print(line)   # one loop: j = i is solved for
    for _i_i in range(0, (2) + 1):
        if ((_i_i) >= 0) and ((2 + (-1) * _i_i) >= 0):
            _p1 = (_i_i)
>>> out = np.zeros((3, 3)); python_support_kernel(d, ["g"], (3, 3))(out, np.arange(1.0, 4.0)); out
array([[1., 0., 0.],
       [0., 2., 0.],
       [0., 0., 3.]])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.intlin import Form, nested_bounds
from jacacc.kernels.emit import Calls, Emitter, fold
from jacacc.kernels.functions import modules
from jacacc.kernels.ir import Affine, Condition, Definition, Guard, Limit, Quotient
from jacacc.kernels.loops import _KERNELS, _compiled_module, _load, _module_text

__all__ = ["Loop", "Pin", "affine_nest", "box_forms", "inequality_forms", "numba_support_kernel", "python_support_kernel", "support_source"]


@dataclass(frozen=True)
class Loop:
    """``for variable in max(lower) … min(upper)`` (a lower limit rounds up, an upper one down)."""

    variable: str
    lower: tuple[Limit, ...]
    upper: tuple[Limit, ...]


@dataclass(frozen=True)
class Pin:
    """``variable = value`` where ``conditions`` hold: a variable an equality fixes, which no loop
    needs (``value`` a floor quotient, exact where the divisibility condition, first, holds)."""

    variable: str
    value: Affine
    conditions: tuple[Condition, ...]


def affine_nest(forms: Sequence[Form], variables: Sequence[str]) -> tuple[list[Loop | Pin], tuple[Condition, ...]] | None:
    """The loops over the integer points of ``{form ≥ 0}`` in ``variables`` (outermost first; other
    names are parameters): Fourier–Motzkin bounds (:func:`jacacc.intlin.nested_bounds`), a variable
    whose lower and upper bound coincide solved for instead of looped over (``2j = i``: ``j = i // 2``
    where ``i % 2 == 0``), and the conditions on the parameters alone; None where the system has no
    point at all (a constant condition fails).

    Examples
    --------
    >>> levels, conditions = affine_nest([({"i": 1}, 0), ({"i": -1}, 9), ({"j": 2, "i": -1}, 0),
    ...                                   ({"j": -2, "i": 1}, 0)], ["i", "j"])
    >>> levels[1]
    Pin(variable='j', value=Affine(coeffs=((Quotient(numerator=Affine(coeffs=(('i', 1),), const=0), divisor=2), 1),), const=0), conditions=(Condition(form=Affine(coeffs=(('i', 1),), const=0), relation='%', modulus=2),))
    """
    nest = nested_bounds(list(forms), list(variables))
    conditions = tuple(Condition(_affine(f), ">=") for f in nest.conditions)
    if any(not c.form.coeffs and c.form.const < 0 for c in conditions):
        return None
    env: dict[str, Affine] = {}
    levels: list[Loop | Pin] = []
    for bound in nest.bounds:
        lower = [Limit(_affine(f).substitute(env), d) for d, f in bound.lower]
        upper = [Limit(_affine(f).substitute(env), d) for d, f in bound.upper]
        common = next((lim for lim in lower if lim in upper), None)
        if common is None:
            levels.append(Loop(bound.variable, tuple(lower), tuple(upper)))
            continue
        n, d = common.numerator, common.divisor
        value = n if d == 1 else Affine.of(Quotient(n, d)).folded()
        checks = [Condition(n, "%", d)] if d != 1 else []
        # the other bounds, at the pinned value: d'·v ≥ f' below, d'·v ≤ f' above
        checks += [Condition(value.scale(lim.divisor) - lim.numerator, ">=") for lim in lower if lim != common]
        checks += [Condition(lim.numerator - value.scale(lim.divisor), ">=") for lim in upper if lim != common]
        env[bound.variable] = value
        levels.append(Pin(bound.variable, value, tuple(checks)))
    return levels, tuple(c for c in conditions if c.form.coeffs)


def _affine(form: Form) -> Affine:
    return Affine.make(form[0], form[1])


def support_source(definition: Definition, arguments: Sequence[str], shape: Sequence[int],
                   accumulate: bool = False, parallel: bool = False, calls: Calls | None = None) -> str:
    """A Python function ``kernel(out, *arrays)``: for every index ``I`` of the box ``shape`` where
    the definition's top-level bracket holds, ``out[I] = body`` (``+=`` with ``accumulate``).

    A rank-0 definition (no indices) writes ``out[0]``.  ``parallel`` runs the outermost loop with
    Numba's ``prange`` (each element is written by one iteration).  ``calls`` spells the functions
    (default: the table's libm spellings)."""
    arrays = {a: f"_a_{a}" for a in arguments}
    env = {n: f"_i_{n}" for n in definition.indices}
    body = definition.body
    conditions: tuple[Condition, ...] = ()
    if isinstance(body, Guard) and set().union(*(c.form.names for c in body.conditions)) <= set(env):
        conditions, body = body.conditions, body.body
    bounded = [c for c in conditions if inequality_forms(c) is not None]
    checked = [c for c in conditions if inequality_forms(c) is None]
    params = ", ".join(["_out", *(arrays[a] for a in arguments)])
    lines = [f"# {definition.source}", f"def kernel({params}):"]
    em = Emitter("py", arrays, calls=Calls.of(calls, "py"))
    em.unsigned_reads = parallel
    em.reorder_sums = False
    em.indent = 1
    nest = affine_nest(box_forms(definition.indices, shape) + [f for c in bounded for f in inequality_forms(c)],
                       definition.indices)
    if nest is None:  # the support is empty
        return "\n".join([*lines, "    return", ""])
    levels, outer = nest
    checked += list(outer)
    for depth, level in enumerate(levels):
        if isinstance(level, Pin):
            _open(em, level.conditions, env)
            env[level.variable] = em.fresh("p")
            em.line(f"{env[level.variable]} = {em.index(level.value, env)}")
            continue
        lo = fold("max", [em.limit(lim, env, True) for lim in level.lower])
        hi = fold("min", [em.limit(lim, env, False) for lim in level.upper])
        loop = "prange" if parallel and depth == 0 else "range"
        em.line(f"for {env[level.variable]} in {loop}({lo}, {hi} + 1):")
        em.indent += 1
    _open(em, checked, env)
    value = em.value(body, env)
    at = ", ".join(env[n] for n in definition.indices) or "0"
    em.line(f"_out[{at}] {'+=' if accumulate else '='} {value}")
    return "\n".join([*lines, *em.lines, ""])


def _open(em: Emitter, conditions: Sequence[Condition], env: dict[str, str]) -> None:
    """``if c₁ and c₂ …:`` (divisibility first: the quotients after it are exact), indented into."""
    if conditions:
        ordered = sorted(conditions, key=lambda c: c.relation != "%")
        em.line(f"if {' and '.join(em.condition(c, env) for c in ordered)}:")
        em.indent += 1


def box_forms(indices: Sequence[str], shape: Sequence[int]) -> list[Form]:
    """``0 ≤ i ≤ n − 1`` for each index and extent, as forms ``≥ 0`` (:func:`affine_nest`'s input)."""
    if len(indices) != len(shape):
        raise ValueError(f"{len(indices)} indices but a shape of {len(shape)} extents")
    out: list[Form] = []
    for name, extent in zip(indices, shape, strict=True):
        out += [({name: 1}, 0), ({name: -1}, int(extent) - 1)]
    return out


def inequality_forms(c: Condition) -> list[Form] | None:
    """``c`` as forms ``≥ 0`` (an equality as two), or None where it is a congruence or reads a
    floor quotient (then it is tested inside the loops)."""
    if c.relation == "%" or any(isinstance(v, Quotient) for v, _ in c.form.coeffs):
        return None
    form: Form = ({str(v): k for v, k in c.form.coeffs}, c.form.const)
    if c.relation == ">=":
        return [form]
    negated: Form = ({v: -k for v, k in form[0].items()}, -form[1])
    return [form, negated]


def python_support_kernel(definition: Definition, arguments: Sequence[str], shape: Sequence[int],
                          accumulate: bool = False) -> Callable[..., None]:
    """:func:`support_source` run by the Python interpreter (the reference)."""
    return _load(support_source(definition, arguments, shape, accumulate), "support-py", dict(modules("numba")))


def numba_support_kernel(definition: Definition, arguments: Sequence[str], shape: Sequence[int],
                         accumulate: bool = False, parallel: bool = False) -> Callable[..., None]:
    """:func:`support_source` compiled by Numba without fast-math flags (libm functions, sums in
    order), kept in memory per source and on disk under :func:`~jacacc.kernels.loops.kernel_cache_dir`
    as :func:`~jacacc.kernels.loops.numba_kernel`'s are: two definitions that differ only in their
    names compile once."""
    from jacacc.errors import require_extra

    numba = require_extra("numba", "numba")
    text = _module_text(support_source(definition, arguments, shape, accumulate, parallel, Calls("numba")), set())
    key = (text, parallel)
    found: Any = _KERNELS.get(key)
    if found is None:
        found = _KERNELS[key] = _compiled_module(text, numba, parallel, True, fastmath=False)
    return found
