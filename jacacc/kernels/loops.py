"""Python and Numba loop kernels: the kernel layer's Numba emitter (and its Python reference).

A :class:`~jacacc.kernels.ir.Definition` — an elementwise function, one
of its gather-form derivatives (paper 000 §5: lock-free derivatives), or a
fused region of the tensor evaluator — compiles to a kernel that fills its
output element by element: each element is computed on its own, so no element
is written twice and there are no atomics and no scatter.  The body is printed
by :class:`~jacacc.kernels.emit.Emitter`; this module chooses the loops around
it (:func:`python_source`: hoisted invariants, an interior split of the last
index, a final sum's loop outside the last index, chunked reductions) and
compiles the source: :func:`python_kernel` (the interpreter: the reference,
slow) and :func:`numba_kernel` (``@njit(parallel=True)`` with a ``prange``
over the outermost index, the :mod:`~jacacc.kernels.functions` helpers for
``exp``/``log``/``tanh``, cached in memory and on disk).

Examples
--------
>>> import numpy as np
>>> from jacacc.elementwise.parse import parse
>>> k = python_kernel(parse("f[i] = sum(k, 0, i, x[k])"), ["x"])
>>> out = np.zeros(4)
>>> k(out, np.arange(4.0)); out
array([0., 1., 3., 6.])
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jacacc.kernels.emit import Calls, Emitter, contiguity, fold
from jacacc.kernels.functions import HELPER_NAMES, SMALL_VECTOR_MATH, fastmath_text, modules, numba_preamble
from jacacc.kernels.inline import inline_helpers
from jacacc.kernels.ir import (
    OPERANDS,
    Affine,
    Binary,
    Call,
    Definition,
    Guard,
    Limit,
    Node,
    Quotient,
    Summation,
    Unary,
    chain,
    free_indices,
    rebuild,
    walk,
)

__all__ = ["ACCUMULATORS_MAX", "BLOCK", "CHUNK", "MIN_CHUNKS", "NUMBA_PARALLEL_MAX_CHARS", "PARALLEL_MIN_ELEMENTS", "VECTOR_MATH_MAX_CALLS",
           "InteriorSplit", "cache_root", "cached_module", "interior_split", "kernel_cache_dir", "last_factor", "numba_kernel", "numba_source",
           "python_kernel", "python_source"]


def _py_emitter(arrays: dict[str, str], indent: int, parallel: bool, known: dict[Node, str] | None = None,
                calls: Calls | None = None) -> Emitter:
    """A Python emitter at ``indent`` (unsigned reads in parallel kernels), with subtrees already
    computed into the variables of ``known``, spelling functions by ``calls``."""
    em = Emitter("py", arrays, calls=calls)
    em.indent = indent
    em.unsigned_reads = parallel
    em.known = dict(known or {})
    return em


def _sum_range(node: Summation, env: dict[str, str], arrays: dict[str, str]) -> tuple[str, str]:
    """The first and last value of a sum's index, as Python expressions."""
    bounds = Emitter("py", arrays)
    return (fold("max", [bounds.limit(lim, env, True) for lim in node.lower]),
            fold("min", [bounds.limit(lim, env, False) for lim in node.upper]))


def _code_names(definition: Definition, arguments: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    arrays = {a: f"_a_{a}" for a in arguments}
    env = {n: f"_i_{n}" for n in definition.indices}
    return arrays, env


def python_source(definition: Definition, arguments: list[str], parallel: bool = False,
                  reduction: bool = False, interchange: bool | None = None, calls: Calls | None = None,
                  last_extent: int | None = None) -> str:
    """A Python function ``kernel(out, *arrays)`` filling ``out`` (the function's shape) element by
    element; ``parallel`` runs the outermost index with Numba's ``prange`` (the inner ones as plain
    loops, which Numba can vectorize — each element is still computed on its own).  With
    ``reduction``, for a body ending in a sum (``c * sum(k, …)``, as derivatives are built), the
    range of that sum is cut into chunks instead: each parallel iteration computes every element's
    partial sum over one chunk — the chunk's data stays in cache across the elements — and the
    partial sums are added at the end, still without atomics.  That is the layout for a gradient
    with few elements, each a long sum (a convolution's kernel).

    ``interchange`` chooses where such a final sum's loop goes: outside the last index's loop
    (True, wherever the sum's bounds do not depend on that index: :func:`_interchanged_source`,
    for rank 1 too), inside it (False), or as the reads' contiguity suggests (None,
    :func:`_sum_outside_last_index`).  A caller that knows which operand is large — the tensor
    evaluator's fused reductions (:mod:`jacacc.tensor.fusion`) — decides it by that operand.
    ``last_extent``, the last index's extent where the caller knows it: an interchanged sum over at
    most :data:`ACCUMULATORS_MAX` values of it adds into that many local accumulators in one
    pass over ``k`` (a low-rank gradient's five columns), which LLVM keeps in registers.

    ``calls`` spells the functions (default: the table's Numba spellings, which the interpreter
    runs too; :func:`numba_kernel` passes the vectorizable helpers) and records the calls made."""
    calls = Calls.of(calls, "py")
    if reduction and isinstance(last_factor(definition.body), Summation):
        return _chunked_source(definition, arguments, parallel, calls)
    from jacacc.kernels.terms import terms_source  # it builds on this module's layout helpers

    sparse = terms_source(definition, arguments, parallel, calls)
    if sparse is not None:  # every term on a thin part of the output: zeroed, then each added where it lives
        return sparse
    split = interior_split(definition)
    if split is not None:
        return _split_source(definition, arguments, parallel, split, calls)
    outside = _sum_outside_last_index(definition) if interchange is None else (
        interchange and bool(definition.indices) and _sum_outside(definition.body, definition.indices[-1],
                                                                  by_contiguity=False))
    if outside:
        return _interchanged_source(definition, arguments, parallel, calls, last_extent)
    arrays, env = _code_names(definition, arguments)
    lines = _signature(definition, arguments, arrays)
    loops, known = _loops_with_invariants(definition, env, arrays, parallel, len(definition.indices), calls)
    em = _py_emitter(arrays, 1 + len(definition.indices), parallel, known, calls)
    value = em.value(definition.body, env)
    store = "    " * em.indent + f"_out[{', '.join(env[n] for n in definition.indices)}] = {value}"
    return "\n".join([*lines, *loops, *em.lines, store, ""])


def _sum_outside_last_index(definition: Definition) -> bool:
    """Whether the body is ``factors · sum(k, lo, hi, t)`` (rank ≥ 2) with ``lo, hi`` free of the
    last index ``v`` and ``t`` contiguous along ``v`` rather than ``k`` (:func:`~jacacc.kernels.emit.contiguity`): then
    the ``k`` loop goes outside the ``v`` loop (:func:`_interchanged_source`)."""
    return len(definition.indices) >= 2 and _sum_outside(definition.body, definition.indices[-1])


def _sum_outside(body: Node, v: str, by_contiguity: bool = True) -> bool:
    """Whether ``body`` is ``factors · sum(k, lo, hi, t)`` with ``lo, hi`` free of ``v`` and (with
    ``by_contiguity``) ``t`` reading more contiguously along ``v`` than along ``k``."""
    sum_node = last_factor(body)
    if not isinstance(sum_node, Summation) or any(
            v in lim.numerator.names for lim in (*sum_node.lower, *sum_node.upper)):
        return False
    if v not in free_indices(sum_node):  # the same sum for every v: hoisted instead (_invariants)
        return False
    return not by_contiguity or contiguity(sum_node.body, v) > contiguity(sum_node.body, sum_node.index)


def _interchanged_source(definition: Definition, arguments: list[str], parallel: bool, calls: Calls,
                         last_extent: int | None = None) -> str:
    """:func:`python_source` for :func:`_sum_outside_last_index`: per outer element, the row of
    sums over the last index ``v`` accumulates in ``_out`` with ``k`` outside ``v`` (each element
    still adds its terms in the order of ``k``: the same values), then the factors multiply it.
    The factors of ``t`` that do not depend on ``v`` are computed once per ``k``, not once per ``v``,
    and the ``v`` loop reads rows."""
    arrays, env = _code_names(definition, arguments)
    rank = len(definition.indices)
    lines = _signature(definition, arguments, arrays)
    loops, known = _loops_with_invariants(definition, env, arrays, parallel, rank - 1, calls)
    lines += loops
    lines += _interchanged_lines(definition, definition.body, env, arrays, known, parallel, rank,
                                 ("0", f"_n{rank - 1}"), calls, last_extent)
    return "\n".join([*lines, ""])


def _interchanged_lines(definition: Definition, body: Node, env: dict[str, str], arrays: dict[str, str],
                        known: dict[Node, str], parallel: bool, indent: int, span: tuple[str, str],
                        calls: Calls, last_extent: int | None = None) -> list[str]:
    """The last index's loop over ``span`` (start, stop) for a ``body`` of :func:`_sum_outside`,
    at ``indent``: the sum's loop outside, the rows accumulated in ``_out``, then the factors."""
    sum_node = last_factor(body)
    assert isinstance(sum_node, Summation)
    pad = "    " * indent
    v = env[definition.indices[-1]]
    row = ", ".join(env[n] for n in definition.indices)
    lo, hi = _sum_range(sum_node, env, arrays)
    start, stop = span
    k = "_k"
    lines = [f"{pad}_klo = {lo}", f"{pad}_khi = {hi}"]
    inner = {**env, sum_node.index: k}
    # the factors of t without v, once per k and stored: computed in the v loop, they would be
    # recomputed per element (LLVM cannot tell that _out is no argument), and computed just before
    # it, reassociation would move a division among them into it ((a / b) · x → (a · x) / b)
    invariant, variant = _split_product(sum_node.body, definition.indices[-1])
    reads_rows = invariant is not None and (
        contiguity(variant, sum_node.index) > contiguity(variant, definition.indices[-1]))
    if reads_rows and last_extent is not None and last_extent <= ACCUMULATORS_MAX and span[0] == "0":
        lines += _accumulator_lines(invariant, variant, inner, definition.indices, env, k, last_extent, pad,
                                    arrays, known, parallel, indent, calls)
        return lines + _final_factor_lines(body, sum_node, env, row, v, span, pad, arrays, known, parallel,
                                           indent, calls)
    if invariant is not None:
        first = _py_emitter(arrays, indent + 1, parallel, known, calls)
        first.serial = 2000  # names apart from the other emitters'
        factor = first.value(invariant, inner)
        lines += [f"{pad}_fk = np.empty(max(_khi - _klo + 1, 0))", f"{pad}for {k} in range(_klo, _khi + 1):",
                  *first.lines, f"{pad}    _fk[{k} - _klo] = {factor}"]
        if reads_rows:
            # the rest reads rows along k (Σ_j F(i, j)·V[m, j]: a low-rank gradient): one dot
            # product of the stored factors per element, the k loop innermost and vectorized
            lines += _dot_product_lines(variant, inner, v, k, span, row, pad, arrays, known, parallel, indent, calls)
            return lines + _final_factor_lines(body, sum_node, env, row, v, span, pad, arrays, known, parallel,
                                               indent, calls)
    lines += [f"{pad}for {v} in range({start}, {stop}):", f"{pad}    _out[{row}] = 0.0",
              f"{pad}for {k} in range(_klo, _khi + 1):"]
    term = _py_emitter(arrays, indent + 1, parallel, known, calls)
    if invariant is not None:
        term.line(f"_f = _fk[{k} - _klo]")
        term.known[invariant] = "_f"
    term.line(f"for {v} in range({start}, {stop}):")
    term.indent += 1
    value = term.value(sum_node.body if invariant is None else Binary(0, "*", invariant, variant), inner)
    lines += term.lines + ["    " * (indent + 2) + f"_out[{row}] += {value}"]
    return lines + _final_factor_lines(body, sum_node, env, row, v, span, pad, arrays, known, parallel, indent, calls)


def _accumulator_lines(invariant: Node, variant: Node, inner: dict[str, str], indices: tuple[str, ...],
                       env: dict[str, str], k: str, extent: int, pad: str, arrays: dict[str, str],
                       known: dict[Node, str], parallel: bool, indent: int, calls: Calls) -> list[str]:
    """The interchanged sum of a last index of ``extent`` values in one pass over ``k``: per ``k``
    the factors without the last index once, then each of its values added into a local
    accumulator of its own; the accumulators stored in ``_out`` (the terms in the order of ``k``)."""
    last = indices[-1]
    term = _py_emitter(arrays, indent + 1, parallel, known, calls)
    term.serial = 4000  # names apart from the other emitters'
    term.line(f"_f = {term.value(invariant, inner)}")
    for c in range(extent):
        term.line(f"_a{c} += _f * {term.value(variant, {**inner, last: str(c)})}")
    stores = [f"{pad}_out[{', '.join(str(c) if n == last else env[n] for n in indices)}] = _a{c}"
              for c in range(extent)]
    check = [f"{pad}if _n{len(indices) - 1} != {extent}:",
             f"{pad}    raise ValueError('the kernel was generated for a last axis of {extent}')"]
    return [*check, *(f"{pad}_a{c} = 0.0" for c in range(extent)), f"{pad}for {k} in range(_klo, _khi + 1):",
            *term.lines, *stores]


def _dot_product_lines(variant: Node, inner: dict[str, str], v: str, k: str, span: tuple[str, str], row: str,
                       pad: str, arrays: dict[str, str], known: dict[Node, str], parallel: bool, indent: int,
                       calls: Calls) -> list[str]:
    """Per value of the last index ``v``: ``_out[row]`` = the sum over ``k`` of the stored factors
    ``_fk`` times ``variant`` (the terms added in the order of ``k``, as the k-outside form adds them)."""
    start, stop = span
    term = _py_emitter(arrays, indent + 2, parallel, known, calls)
    term.serial = 3000  # names apart from the other emitters'
    value = term.value(variant, inner)
    return [f"{pad}for {v} in range({start}, {stop}):", f"{pad}    _acc = 0.0",
            f"{pad}    for {k} in range(_klo, _khi + 1):", *term.lines,
            f"{pad}        _acc += _fk[{k} - _klo] * {value}", f"{pad}    _out[{row}] = _acc"]


def _final_factor_lines(body: Node, sum_node: Summation, env: dict[str, str], row: str, v: str,
                        span: tuple[str, str], pad: str, arrays: dict[str, str], known: dict[Node, str],
                        parallel: bool, indent: int, calls: Calls) -> list[str]:
    """The factors of ``body`` around its final sum, applied to the sums stored in ``_out``."""
    if body is sum_node:  # no factors
        return []
    start, stop = span
    final = _py_emitter(arrays, indent + 1, parallel, {**known, sum_node: f"_out[{row}]"}, calls)
    value = final.value(body, env)
    return [f"{pad}for {v} in range({start}, {stop}):", *final.lines, "    " * (indent + 1) + f"_out[{row}] = {value}"]


def _split_product(node: Node, v: str) -> tuple[Node | None, Node]:
    """``node`` as ``invariant · variant``: the factors of its leading product that do not read
    ``v`` and the rest (None, ``node``: every factor reads ``v``, or none does)."""
    factors: list[Node] = []
    stack = [node]
    while stack:
        here = stack.pop()
        if isinstance(here, Binary) and here.op == "*":
            stack += [here.right, here.left]
        else:
            factors.append(here)
    fixed = [f for f in factors if v not in free_indices(f)]
    moving = [f for f in factors if v in free_indices(f)]
    if not fixed or not moving:
        return None, node
    return chain([("*", f) for f in fixed]), chain([("*", f) for f in moving])


def _invariants(definition: Definition) -> dict[Node, int]:
    """Subtrees of the body computed once per iteration of an outer output loop instead of once per
    element (loop-invariant code motion): sums and calls at the function's own level (outside every
    sum and bracket, so their reads are made for every element anyway) that do not read the last
    index, each with the position of the deepest index it reads (−1: none)."""
    position = {name: k for k, name in enumerate(definition.indices)}
    last = len(definition.indices) - 1
    out: dict[Node, int] = {}

    def visit(node: Node) -> None:
        if isinstance(node, (Summation, Call)):
            level = max((position[v] for v in free_indices(node) if v in position), default=-1)
            if level < last:
                out.setdefault(node, level)
                return
        if isinstance(node, (Summation, Guard)):
            return
        for child in OPERANDS:
            sub = getattr(node, child, None)
            if isinstance(sub, Node):
                visit(sub)

    visit(definition.body)
    return out


def _loops_with_invariants(definition: Definition, env: dict[str, str], arrays: dict[str, str], parallel: bool,
                           count: int, calls: Calls) -> tuple[list[str], dict[Node, str]]:
    """The first ``count`` output loops, each followed by the :func:`_invariants` of its level (those
    of no index before them, after a return for an empty output), and the variables holding them."""
    invariants = _invariants(definition)
    lines: list[str] = []
    known: dict[Node, str] = {}
    if invariants:
        empty = " or ".join(f"_n{k} == 0" for k in range(len(definition.indices)))
        lines += [f"    if {empty}:", "        return"]  # the invariants' reads are only checked on elements
    loops = _output_loops(definition, env, 1, "prange" if parallel else "range")
    em = _py_emitter(arrays, 1, parallel, calls=calls)
    em.serial = 1000  # names apart from the body's emitters
    for level in range(-1, count):
        if level >= 0:
            lines.append(loops[level])
        em.lines, em.indent = [], 2 + level
        for node, at in invariants.items():
            if at == level:
                name = em.fresh("h")
                value = em.value(node, env)
                em.line(f"{name} = {value}")
                em.known[node] = name
                known[node] = name
        lines += em.lines
    return lines, known


#: the most values of an interchanged sum's last index added into local accumulators in one pass
#: (:func:`python_source`'s ``last_extent``): matrix factorization's gradient at n = 1024, rank 5,
#: took 1.14 ms in one pass against 1.68 ms with the stored row and five dot products
ACCUMULATORS_MAX = 16
#: the most values of the sum's index in one chunk of a chunked reduction (:func:`python_source`),
#: and the fewest chunks (so that every thread has some)
CHUNK = 4096
MIN_CHUNKS = 16
#: the elements of the last index one parallel iteration of a split 1-D kernel covers
BLOCK = 1024


@dataclass(frozen=True)
class InteriorSplit:
    """The range of the last output index ``v`` on which the sums' bounds do not depend on ``v``:
    ``max(lower) ≤ v ≤ min(upper)`` (each an :class:`Affine` of the other output indices, a
    :class:`Limit` whose divisor rounds it), and the body with those sums' ``v``-dependent limits
    dropped, which holds there.  Inside, a sum like a convolution's ``sum(z, max(0, v − 999), min(8, v), …)``
    runs over a fixed range (``0 … 8``), so LLVM unrolls it and vectorizes over ``v``."""

    lower: tuple[Limit, ...]
    upper: tuple[Limit, ...]
    body: Node


def interior_split(definition: Definition) -> InteriorSplit | None:
    """The :class:`InteriorSplit` of the definition's last index, or None when no sum's bounds
    depend on it in a way that a range of it removes (a limit ``a·v + r`` beside a limit without
    ``v``; ``r`` and that limit in the other output indices only)."""
    v = definition.indices[-1]
    outer = set(definition.indices[:-1])
    lower: list[Limit] = []
    upper: list[Limit] = []
    replaced: dict[Node, Summation] = {}
    for node in walk(definition.body):
        if not isinstance(node, Summation) or node in replaced:
            continue
        sides = []
        for limits, is_lower in ((node.lower, True), (node.upper, False)):
            moving = [lim for lim in limits if v in lim.numerator.names]
            fixed = [lim for lim in limits if v not in lim.numerator.names]
            usable = moving and fixed and all(lim.numerator.names <= outer for lim in fixed) and all(
                lim.divisor == 1 and not lim.numerator.quotients() and lim.numerator.names <= outer | {v}
                for lim in moving)
            sides.append(fixed if usable else list(limits))
            if not usable:
                continue
            anchor = fixed[0]  # max(lower) is anchor's value where every moving limit stays below it
            for lim in moving:
                a = dict(lim.numerator.coeffs)[v]
                rest = lim.numerator - Affine.of(v).scale(a)  # a·v + rest ≤ anchor (lower) or ≥ (upper)
                bound = _anchor_affine(anchor, is_lower) - rest
                if (a > 0) == is_lower:  # v ≤ ⌊bound / a⌋ (a > 0) or v ≤ ⌊−bound / −a⌋
                    upper.append(Limit(bound if a > 0 else bound.scale(-1), abs(a)))
                else:  # v ≥ ⌈bound / a⌉
                    lower.append(Limit(bound if a > 0 else bound.scale(-1), abs(a)))
        if tuple(sides[0]) != node.lower or tuple(sides[1]) != node.upper:
            replaced[node] = Summation(node.column, node.index, tuple(sides[0]), tuple(sides[1]), node.body)
    if not replaced:
        return None
    body = rebuild(definition.body, lambda n: _replaced_inside(n, replaced))
    return InteriorSplit(tuple(lower), tuple(upper), body)


def _replaced_inside(node: Node, replaced: dict[Node, Summation]) -> Node | None:
    """The replacement of a sum, with the sums inside its body replaced too (None: not replaced)."""
    if node not in replaced:
        return None
    new = replaced[node]
    body = rebuild(new.body, lambda n: _replaced_inside(n, replaced))
    return Summation(new.column, new.index, new.lower, new.upper, body)


def _anchor_affine(anchor: Limit, lower: bool) -> Affine:
    """A fixed limit as an affine form: exact for divisor 1; otherwise its rounded value as a
    quotient atom (``⌈n/d⌉ = −⌊−n/d⌋``)."""
    if anchor.divisor == 1:
        return anchor.numerator
    if lower:
        return Affine.of(Quotient(anchor.numerator.scale(-1), anchor.divisor)).scale(-1)
    return Affine.of(Quotient(anchor.numerator, anchor.divisor))


def _split_source(definition: Definition, arguments: list[str], parallel: bool, split: InteriorSplit,
                  calls: Calls) -> str:
    """:func:`python_source` with the last index's loop cut into border, interior, border: the
    interior evaluates ``split.body`` (fixed sum ranges), the borders the definition's body.  A 1-D
    parallel kernel runs blocks of :data:`BLOCK` elements, each cut the same way."""
    arrays, env = _code_names(definition, arguments)
    rank = len(definition.indices)
    v, last = env[definition.indices[-1]], f"_n{rank - 1}"
    blocked = parallel and rank == 1
    lines = _signature(definition, arguments, arrays)
    loops, known = _loops_with_invariants(definition, env, arrays, parallel, rank - 1, calls)
    lines += loops
    pad = "    " * rank
    limits = Emitter("py", arrays)
    low = fold("max", ["0", *(limits.limit(lim, env, True) for lim in split.lower)])
    high = fold("min", [f"{last} - 1", *(limits.limit(lim, env, False) for lim in split.upper)])
    lines += [f"{pad}_vlo = {low}", f"{pad}_vhi = {high}"]
    if blocked:
        lines += [f"{pad}for _b in prange(({last} + {BLOCK - 1}) // {BLOCK}):",
                  f"{pad}    _v0 = _b * {BLOCK}", f"{pad}    _v1 = min(_v0 + {BLOCK}, {last})"]
        pad += "    "
    else:
        lines += [f"{pad}_v0 = 0", f"{pad}_v1 = {last}"]
    lines += [f"{pad}_m0 = min(max(_vlo, _v0), _v1)", f"{pad}_m1 = max(min(_vhi + 1, _v1), _m0)"]
    store = f"_out[{', '.join(env[n] for n in definition.indices)}]"
    for start, stop, body in (("_v0", "_m0", definition.body), ("_m0", "_m1", split.body),
                              ("_m1", "_v1", definition.body)):
        if body is split.body and _sum_outside(body, definition.indices[-1]):
            # the interior's sums no longer depend on v: their loops can go outside it
            lines += _interchanged_lines(definition, body, env, arrays, known, parallel, len(pad) // 4,
                                         (start, stop), calls)
            continue
        lines.append(f"{pad}for {v} in range({start}, {stop}):")
        em = _py_emitter(arrays, len(pad) // 4 + 1, parallel, known, calls)
        value = em.value(body, env)
        lines += em.lines + ["    " * em.indent + f"{store} = {value}"]
    return "\n".join([*lines, ""])


def last_factor(node: Node) -> Node:
    """The last factor of a leading product: derivatives put their sums there, after the factors
    hoisted out of them (``-c * sum(…)``)."""
    while isinstance(node, (Binary, Unary)) and getattr(node, "op", "*") == "*":
        node = node.right if isinstance(node, Binary) else node.operand
    return node


def _signature(definition: Definition, arguments: list[str], arrays: dict[str, str]) -> list[str]:
    dims = [f"_n{k}" for k in range(len(definition.indices))]
    params = ", ".join(["_out", *(arrays[a] for a in arguments)])
    return [f"# {definition.source}", f"def kernel({params}):", f"    {', '.join(dims)}, = _out.shape"]


def _output_loops(definition: Definition, env: dict[str, str], indent: int, first: str) -> list[str]:
    lines = []
    for depth, name in enumerate(definition.indices):
        loop = first if depth == 0 else "range"
        lines.append("    " * (indent + depth) + f"for {env[name]} in {loop}(_n{depth}):")
    return lines


def _chunked_source(definition: Definition, arguments: list[str], parallel: bool, calls: Calls) -> str:
    arrays, env = _code_names(definition, arguments)
    total = " * ".join(f"_n{k}" for k in range(len(definition.indices)))
    flat = env[definition.indices[0]]
    for k, name in enumerate(definition.indices[1:], start=1):
        flat = f"({flat}) * _n{k} + {env[name]}"
    sum_node = last_factor(definition.body)
    assert isinstance(sum_node, Summation)
    inner = 1 + len(definition.indices)
    lines = _signature(definition, arguments, arrays)
    # the union of the sum's ranges over all elements
    lo, hi = _sum_range(sum_node, env, arrays)
    lines += ["    _kmin = 0", "    _kmax = -1", "    _first = True"]
    lines += _output_loops(definition, env, 1, "range")
    pad = "    " * inner
    lines += [f"{pad}_lo = {lo}", f"{pad}_hi = {hi}", f"{pad}if _lo <= _hi:",
              f"{pad}    _kmin = _lo if _first else min(_kmin, _lo)",
              f"{pad}    _kmax = _hi if _first else max(_kmax, _hi)", f"{pad}    _first = False"]
    # chunks of at most CHUNK values of k, and at least MIN_CHUNKS of them (a sum over rows of a
    # matrix has few k, each a long row: one chunk would leave the other threads idle)
    lines += [f"    _len = max(1, min({CHUNK}, (_kmax - _kmin + {MIN_CHUNKS}) // {MIN_CHUNKS}))",
              "    _chunks = (_kmax - _kmin) // _len + 1 if _kmax >= _kmin else 0",
              f"    _part = np.zeros((_chunks, {total}))",
              f"    for _c in {'prange' if parallel else 'range'}(_chunks):",
              "        _c0 = _kmin + _c * _len",
              "        _c1 = min(_c0 + _len - 1, _kmax)"]
    lines += _output_loops(definition, env, 2, "range")
    em = _py_emitter(arrays, inner + 1, parallel, calls=calls)
    chunk_env = {**env, "_c0": "_c0", "_c1": "_c1"}
    piece = Summation(sum_node.column, sum_node.index, (*sum_node.lower, Limit(Affine.of("_c0"))),
                      (*sum_node.upper, Limit(Affine.of("_c1"))), sum_node.body)
    partial = em.value(piece, chunk_env)
    lines += em.lines + ["    " * (inner + 1) + f"_part[_c, {flat}] = {partial}"]
    # the elements: the factors outside the sum times the added partial sums
    lines += _output_loops(definition, env, 1, "prange" if parallel else "range")
    final = _py_emitter(arrays, inner, parallel, {sum_node: "_total"}, calls)
    lines += [f"{pad}_total = 0.0", f"{pad}for _c in range(_chunks):", f"{pad}    _total += _part[_c, {flat}]"]
    value = final.value(definition.body, env)
    lines += final.lines + [f"{pad}_out[{', '.join(env[n] for n in definition.indices)}] = {value}"]
    return "\n".join([*lines, ""])


def _load(source: str, tag: str, namespace: dict[str, Any]) -> Callable:
    # imported on use: the kernel layer loads without the scalar core's code generators
    from jacacc.codegen.base import register_source

    code = compile(source, register_source(source, tag), "exec")
    exec(code, namespace)  # noqa: S102 - our own generated source
    return namespace["kernel"]


def python_kernel(definition: Definition, arguments: list[str], interchange: bool | None = None,
                  last_extent: int | None = None) -> Callable:
    """The kernel run by the Python interpreter (the reference backend); ``interchange`` and
    ``last_extent`` are :func:`python_source`'s."""
    return _load(python_source(definition, arguments, interchange=interchange, last_extent=last_extent),
                 "kernel-py", dict(modules("numba")))


def numba_kernel(definition: Definition, arguments: list[str], reduction: bool = False,
                 parallel: bool = True, interchange: bool | None = None, cache: bool = True,
                 last_extent: int | None = None) -> Callable:
    """The kernel compiled by Numba: ``@njit(parallel=True)``, a ``prange`` over the outermost
    index (or, with ``reduction``, over chunks of the final sum: :func:`python_source`); with
    ``parallel=False`` the same loops on the calling thread (no thread wake-up: small inputs).
    ``interchange`` and ``last_extent`` are :func:`python_source`'s.

    With ``cache`` (the default), a kernel of the same source is compiled once per process (the
    dispatcher is kept in memory, and Numba compiles it once per argument type) and, where the
    directory of :func:`kernel_cache_dir` is writable, once per machine: the source is written there
    as a module and jitted with Numba's ``cache=True``, so another process loads the machine code.
    ``cache=False`` compiles anew (what a measurement of compile time wants).

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.elementwise.parse import parse
    >>> k = numba_kernel(parse("f[i] = exp(x[i]) * 2"), ["x"], parallel=False, cache=True)
    >>> out = np.empty(3)
    >>> k(out, np.zeros(3)); out.tolist()
    [2.0, 2.0, 2.0]
    >>> k is numba_kernel(parse("f[i] = exp(x[i]) * 2"), ["x"], parallel=False, cache=True)
    True
    """
    from jacacc.errors import require_extra

    numba = require_extra("numba", "numba")
    source, used = numba_source(definition, arguments, reduction, interchange, last_extent)
    if len(source) > NUMBA_PARALLEL_MAX_CHARS:
        # Numba's parallel passes grow much faster than linearly with the loop body: a 2000-term
        # sum compiled in 30 s on one thread and 550 s with parallel=True
        parallel = False
    text = _module_text(source, used)
    if not cache:
        return _compiled_module(text, numba, parallel, False)
    key = (text, parallel)
    found = _KERNELS.get(key)
    if found is None:
        found = _KERNELS[key] = _compiled_module(text, numba, parallel, True)
    return found


def numba_kernel_on_disk(definition: Definition, arguments: list[str], reduction: bool = False,
                         interchange: bool | None = None, last_extent: int | None = None) -> bool:
    """Whether the kernel :func:`numba_kernel` makes of these arguments was compiled before and is in
    Numba's on-disk cache under :func:`kernel_cache_dir` (its index file exists), so that calling it
    loads machine code instead of compiling.  Answered without importing Numba: the module's text
    (and so its file name) is known before it is compiled.

    Examples
    --------
    >>> from jacacc.elementwise.parse import parse
    >>> numba_kernel_on_disk(parse("f[i] = x[i] * 2.0 + 0.125"), ["x"]) in (True, False)
    True
    """
    directory = kernel_cache_dir()
    if directory is None:
        return False
    text = _module_text(*numba_source(definition, arguments, reduction, interchange, last_extent))
    return _numba_index_exists(directory, text)


def _digest(text: str) -> str:
    """The hash that names a generated module's file (:func:`cached_module`)."""
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _numba_index_exists(directory: Path, text: str, function: str = "kernel") -> bool:
    """Whether Numba's cache index of ``function`` in the module ``text`` (as :func:`cached_module`
    names its file) is in ``directory``'s ``__pycache__``, where Numba keeps a module's cache."""
    return any((directory / "__pycache__").glob(f"k{_digest(text)}.{function}-*.nbi"))


def numba_source(definition: Definition, arguments: list[str], reduction: bool = False,
                 interchange: bool | None = None, last_extent: int | None = None) -> tuple[str, set[str]]:
    """The source :func:`numba_kernel` compiles (:func:`python_source` with ``parallel``) and the
    operations whose vectorizable helpers it calls (:func:`~jacacc.kernels.functions.vector_math_source`).

    The functions with a small helper (:data:`~jacacc.kernels.functions.SMALL_VECTOR_MATH`, the
    table's ``vector_math="small"``: ``exp``, ``log``, ``tanh``, and the templates that call them,
    ``logistic``) call it, unless the kernel would make more than :data:`VECTOR_MATH_MAX_CALLS`
    such calls: each helper is written into the kernel with its branches (a hundred ``tanh`` calls
    made its data-flow analysis run out of memory), where a libm call costs one call.  A large
    helper (``erf``) would add seconds to every small kernel's compilation: libm.

    Examples
    --------
    >>> from jacacc.elementwise.parse import parse
    >>> source, used = numba_source(parse("f[i] = tanh(x[i]) + sin(x[i])"), ["x"])
    >>> sorted(used), "_tanh(" in source, "np.sin(" in source
    (['tanh'], True, True)
    """
    calls = Calls("numba", vector_math=SMALL_VECTOR_MATH)
    source = python_source(definition, arguments, parallel=True, reduction=reduction, interchange=interchange,
                           calls=calls, last_extent=last_extent)
    if calls.helper_calls() > VECTOR_MATH_MAX_CALLS:
        calls = Calls("numba")
        source = python_source(definition, arguments, parallel=True, reduction=reduction,
                               interchange=interchange, calls=calls, last_extent=last_extent)
    return source, calls.helpers()


#: kernels compiled with ``cache=True`` in this process: (module text, parallel) → dispatcher
_KERNELS: dict[tuple[str, bool], Callable] = {}


def _module_text(source: str, used: set[str]) -> str:
    """A module defining ``kernel`` (``source``) and the vector math helpers it calls, un-jitted."""
    preamble = numba_preamble("generated by jacacc.kernels; safe to delete", used, fastmath_text(_FASTMATH))
    return inline_helpers("\n".join([*preamble, "", "", source]), HELPER_NAMES)


def _compiled_module(text: str, numba: Any, parallel: bool, cache: bool, fastmath: bool = True) -> Callable:
    """``kernel`` of the module ``text`` jitted: with ``cache``, imported from the kernel cache
    directory with Numba's on-disk cache (:func:`cached_module`); otherwise, or where that fails,
    executed from memory.  ``fastmath=False`` sets no flag (sums in their order, no fused
    multiply-adds)."""
    # reassociation lets LLVM vectorize the sums (as XLA and Eigen do); no other fast-math flag, so
    # inf and nan behave as in the reference
    options = {"parallel": parallel, "error_model": "numpy", "fastmath": _FASTMATH if fastmath else False}
    module = cached_module(text) if cache else None
    if module is not None:
        try:
            return numba.njit(cache=True, **options)(module.kernel)
        except (RuntimeError, ImportError, SyntaxError):  # no cache locator
            pass
    namespace: dict[str, Any] = {}
    return numba.njit(cache=False, **options)(_load(text, "kernel-numba", namespace))


def compiled_loop(function: Callable, **options: Any) -> Callable | None:
    """A hand-written loop (an operator's inner loop over groups or a batch) compiled by Numba
    with its on-disk cache, NumPy's error model and ``options``, or None without Numba: the one
    place the tensor level's and the linear-algebra routines' loops are jitted.  Numba compiles
    at the first call, once per argument types; the caller keeps the result (``functools.cache``).

    >>> import numpy as np
    >>> from jacacc.tensor.arrays import _group_extrema_loop   # each row's maximum (a module's function:
    >>> compiled_loop(_group_extrema_loop)(np.array([[1.0, 3.0], [2.0, 0.0]]), True)   # Numba caches it)
    array([3., 2.])
    """
    try:
        import numba
    except ImportError:
        return None
    return numba.njit(cache=True, error_model="numpy", **options)(function)


def cache_root() -> Path | None:
    """The folder of jacacc's caches of compiled code: ``$JACACC_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/jacacc`` (``~/.cache/jacacc``); None where ``JACACC_CACHE_DIR`` is empty
    (nothing is cached on disk)."""
    root = os.environ.get("JACACC_CACHE_DIR")
    if root is None:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "jacacc")
    return Path(root) if root else None


def kernel_cache_dir() -> Path | None:
    """Where :func:`numba_kernel` writes cached kernels: ``$JACACC_CACHE_DIR/kernels``, else
    ``$XDG_CACHE_HOME/jacacc/kernels`` (``~/.cache/jacacc/kernels``); None where it cannot be
    created or written (kernels are then cached in memory only) or ``JACACC_CACHE_DIR`` is empty."""
    root = cache_root()
    if root is None:
        return None
    directory = root / "kernels"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return directory if os.access(directory, os.W_OK) else None


def cached_module(text: str) -> Any | None:
    """The generated module ``text`` written to :func:`kernel_cache_dir` (under the hash of its text)
    and imported, so that the functions it jits with Numba's ``cache=True`` are compiled once per
    machine; None where there is no writable cache directory (the caller then runs ``text`` from
    memory, without ``cache=True``).

    >>> module = cached_module("VALUE = 41 + 1")
    >>> module is None or module.VALUE == 42
    True
    """
    directory = kernel_cache_dir()
    if directory is None:
        return None
    try:
        return _file_module(text, directory)
    except OSError:  # written by another process meanwhile, or the disk is full: from memory
        return None


def _file_module(text: str, directory: Path) -> Any:
    """The module ``text`` written to ``directory`` under the hash of its text (once: Numba keys its
    cache by the file's contents) and imported."""
    digest = _digest(text)
    path = directory / f"k{digest}.py"
    if not path.exists() or path.read_text() != text:
        temporary = directory / f".k{digest}.{os.getpid()}.tmp"
        temporary.write_text(text)
        os.replace(temporary, path)
    spec = importlib.util.spec_from_file_location(f"jacacc_kernel_{digest}", path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has a loader
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # registered: Numba finds a function's module by name, to cache it and to load it again
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    for value in vars(module).values():
        _recover_from_corrupt_cache(value)
    return module


def _recover_from_corrupt_cache(dispatcher: Any) -> None:
    """Let a Numba function whose on-disk cache entry cannot be read (a truncated or overwritten
    ``.nbi``/``.nbc`` file) compile afresh and write a new entry, instead of failing at every call
    in every process until the cache is deleted: Numba's own loader raises the unpickling error."""
    cache = getattr(dispatcher, "_cache", None)  # a Numba dispatcher's FunctionCache (cache=True)
    load = getattr(cache, "load_overload", None)
    if load is None or getattr(load, "recovers", False):
        return

    def load_or_forget(signature: Any, target_context: Any) -> Any:
        try:
            return load(signature, target_context)
        except Exception:  # noqa: BLE001 - any failure to read the entry: it is rewritten
            cache.flush()  # an empty index: the compile that follows saves a new entry
            return None

    load_or_forget.recovers = True  # type: ignore[attr-defined]
    cache.load_overload = load_or_forget


#: Numba: below this many elements (of the result or of the largest input) a kernel runs on the
#: calling thread; waking the thread pool costs 50–170 µs, more than such a kernel's work (measured
#: on two cores with ``OMP_WAIT_POLICY=passive``: the crossover lies near 3·10⁴ elements; 1·10⁴ with
#: a short spin, ``GOMP_SPINCOUNT=10000``, which keeps the pool awake between the kernels of one vjp)
PARALLEL_MIN_ELEMENTS = 32_768
#: a kernel's source longer than this compiles without ``parallel=True`` (see :func:`numba_kernel`)
NUMBA_PARALLEL_MAX_CHARS = 20_000
_FASTMATH = {"reassoc", "contract"}
#: above this many calls of the vectorizable helpers in one kernel, libm is called instead (:func:`numba_source`)
VECTOR_MATH_MAX_CALLS = 16
