"""One-thread-per-element kernels for elementwise definitions (paper 000 §5: lock-free derivatives).

A definition and each of its gather-form derivatives compiles to a kernel in
which one thread computes one output element: sums become loops whose bounds
are the ``max``/``min`` of the limits (rounded up or down), brackets become
``if`` blocks around the reads they guard (a read under a false bracket is
never made), and quotients are floor divisions.  No element is written by two
threads, so there are no atomics and no scatter.

Backends (a registry): ``"python"`` (the source run by the interpreter — the
reference, slow), ``"numba"`` (the same source, ``@njit(parallel=True)`` with a
``prange`` over the outermost index) and ``"cuda"`` (CUDA C++ source for
``cupy.RawKernel``; :func:`cuda_source` needs no CuPy, so it can be
compile-checked with ``nvcc --ptx`` or run thread by thread as host C++).

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
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jacacc import ops
from jacacc.codegen.base import register_source
from jacacc.elementwise.derive import free_indices
from jacacc.elementwise.parse import (
    FUNCTIONS,
    Affine,
    Binary,
    Call,
    Condition,
    Definition,
    Guard,
    Limit,
    Node,
    Number,
    Power,
    Quotient,
    Read,
    Summation,
    Unary,
    chain,
    children,
    rebuild,
    walk,
)

__all__ = ["CUDA_KERNEL_NAME", "cuda_source", "kernel_cache_dir", "numba_kernel", "python_kernel", "python_source"]

CUDA_KERNEL_NAME = "jacacc_elementwise"
#: the deepest a generated expression nests before a subexpression gets a name of its own
#: (Python's parser stops at 200 parentheses; nvcc reads a named value just as fast)
MAX_NESTING = 40

#: the language's functions in Python/Numba source and in CUDA C++: the operation table's spellings
#: (:mod:`jacacc.ops`), a function or a template with ``{0}``; the C helpers are ``ops.CUDA_HELPERS``
_PY_FUNCTIONS = {name: ops.get(name).numba for name in FUNCTIONS}
_C_FUNCTIONS = {name: ops.get(name).cuda for name in FUNCTIONS}
#: the modules the Python spellings call (``np.exp``, ``math.erf``)
_PY_MODULES = {"np": np, "math": math}


class _Emitter:
    """Statements and expressions of one kernel body in Python (``lang="py"``) or C (``"c"``)."""

    def __init__(self, lang: str, arrays: dict[str, str], shapes: dict[str, list[str]] | None = None) -> None:
        self.lang = lang
        self.arrays = arrays  # argument → code name
        self.shapes = shapes or {}  # argument → code names of its extents (C: row-major offsets)
        self.lines: list[str] = []
        self.indent = 2
        self.serial = 0
        self.known: dict[Node, str] = {}  # subtrees already computed into a variable
        self.depths: dict[str, int] = {}  # expression → how deep it nests (named beyond MAX_NESTING)
        # Numba: read with unsigned indices — every read was checked to stay in range and one
        # under a false bracket is never made, so the wraparound test for negative indices
        # (which keeps LLVM from vectorizing the sums) is dead weight
        self.unsigned_reads = False

    def fresh(self, base: str) -> str:
        self.serial += 1
        return f"_{base}{self.serial}"

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    # ---------------------------------------------------------------- integers
    def index(self, a: Affine, env: dict[str, str]) -> str:
        parts = [str(a.const)] if a.const else []
        for v, c in a.coeffs:
            term = self.quotient(v, env) if isinstance(v, Quotient) else env[v]
            parts.append(term if c == 1 else f"({c}) * {term}")
        return "(" + " + ".join(parts) + ")" if parts else "0"

    def quotient(self, q: Quotient, env: dict[str, str]) -> str:
        n = self.index(q.numerator, env)
        return f"({n} // {q.divisor})" if self.lang == "py" else f"jc_floordiv({n}, {q.divisor})"

    def limit(self, lim: Limit, env: dict[str, str], lower: bool) -> str:
        n = self.index(lim.numerator, env)
        if lim.divisor == 1:
            return n
        if self.lang == "py":
            return f"(-((-{n}) // {lim.divisor}))" if lower else f"({n} // {lim.divisor})"
        return f"(-jc_floordiv(-{n}, {lim.divisor}))" if lower else f"jc_floordiv({n}, {lim.divisor})"

    def condition(self, c: Condition, env: dict[str, str]) -> str:
        n = self.index(c.form, env)
        if c.relation == "%":
            return f"({n} % {c.modulus} == 0)"
        return f"({n} {c.relation} 0)"

    # ---------------------------------------------------------------- values
    def value(self, node: Node, env: dict[str, str]) -> str:
        """The expression of ``node``'s value; the statements it needs first (sums' loops, brackets'
        blocks, named subexpressions) are appended to :attr:`lines` at the current indent."""
        if node in self.known:
            return self.known[node]
        if not isinstance(node, (Unary, Binary, Power, Call)):
            return self._leaf(node, env)
        operands = [self.value(sub, env) for sub in children(node)]
        text = self._operation(node, operands)
        depth = 1 + max(self._depth(t) for t in operands)
        if depth > MAX_NESTING:
            # Python's parser refuses 200 nested parentheses, and a long sum or a call of a call …
            # nests one level per operation: name the subexpression (_w1 = …) and go on with the name
            name = self.fresh("w")
            self.line(f"{name} = {text}" if self.lang == "py" else f"real {name} = {text};")
            return name
        self.depths[text] = depth
        return text

    def _depth(self, text: str) -> int:
        """How deep ``text`` (an operand just computed) nests parentheses and brackets."""
        if text in self.depths:
            return self.depths[text]
        deepest = level = 0
        for ch in text:  # a leaf: a number, a read or a name, a few characters
            level += 1 if ch in "([" else -1 if ch in ")]" else 0
            deepest = max(deepest, level)
        return deepest

    def _operation(self, node: Node, operands: list[str]) -> str:
        """An operation on its operands' expressions."""
        if isinstance(node, Unary):
            return f"(-{operands[0]})"
        if isinstance(node, Binary):
            return f"({operands[0]} {node.op} {operands[1]})"
        if isinstance(node, Power):
            base = operands[0]
            p = node.exponent
            if self.lang == "py":
                return f"({base} ** {int(p) if float(p).is_integer() else repr(p)})"
            if p in (2.0, 3.0):  # squares and cubes as products, the common case of a constant exponent
                return f"jc_pow{int(p)}({base})"
            return f"pow({base}, (real){p!r})"
        assert isinstance(node, Call)
        spelling = (_PY_FUNCTIONS if self.lang == "py" else _C_FUNCTIONS)[node.function]
        if "{" not in spelling:
            return f"{spelling}({operands[0]})"
        operand = operands[0]
        if spelling.count("{0}") > 1 and not operand.isidentifier():
            # a template that reads its operand more than once (relu's NaN test): compute it once
            operand = self.fresh("w")
            self.line(f"{operand} = {operands[0]}" if self.lang == "py" else f"real {operand} = {operands[0]};")
        return f"({spelling.format(operand)})"

    def _leaf(self, node: Node, env: dict[str, str]) -> str:
        """A number, a read, or a sum or bracket computed by statements into a variable."""
        if isinstance(node, Number):
            return repr(float(node.value)) if self.lang == "py" else f"((real){float(node.value)!r})"
        if isinstance(node, Read):
            idx = [self.index(a, env) for a in node.indices]
            name = self.arrays[node.argument]
            if self.lang == "py":
                if self.unsigned_reads:  # in range (checked exactly): no negative-index wraparound
                    idx = [f"np.uint64({i})" for i in idx]
                return f"{name}[{', '.join(idx)}]"
            flat = idx[0]
            for extent, i in zip(self.shapes[node.argument][1:], idx[1:], strict=True):
                flat = f"({flat}) * {extent} + {i}"
            return f"{name}[{flat}]"
        if isinstance(node, Summation):
            return self.summation(node, env)
        if isinstance(node, Guard):
            return self.guard(node, env)
        raise TypeError(f"unknown node {type(node).__name__}")  # pragma: no cover

    def summation(self, node: Summation, env: dict[str, str]) -> str:
        if self.lang == "py":
            node = _innermost_contiguous(node)
        acc, k, lo, hi = self.fresh("s"), self.fresh("k"), self.fresh("lo"), self.fresh("hi")
        lows = [self.limit(lim, env, True) for lim in node.lower]
        highs = [self.limit(lim, env, False) for lim in node.upper]
        inner = {**env, node.index: k}
        if self.lang == "py":
            self.line(f"{acc} = 0.0")
            self.line(f"{lo} = {_fold('max', lows)}")
            self.line(f"{hi} = {_fold('min', highs)}")
            self.line(f"for {k} in range({lo}, {hi} + 1):")
        else:
            self.line(f"real {acc} = 0;")
            self.line(f"long long {lo} = {_fold('max', lows, c=True)};")
            self.line(f"long long {hi} = {_fold('min', highs, c=True)};")
            self.line(f"for (long long {k} = {lo}; {k} <= {hi}; ++{k}) {{")
        self.indent += 1
        term = self.value(node.body, inner)
        self.line(f"{acc} += {term}" + (";" if self.lang == "c" else ""))
        self.indent -= 1
        if self.lang == "c":
            self.line("}")
        return acc

    def guard(self, node: Guard, env: dict[str, str]) -> str:
        # divisibility first: the quotients of the other conditions are exact where it holds
        conditions = sorted(node.conditions, key=lambda c: c.relation != "%")
        out = self.fresh("g")
        test = (" and " if self.lang == "py" else " && ").join(self.condition(c, env) for c in conditions)
        if self.lang == "py":
            self.line(f"{out} = 0.0")
            self.line(f"if {test}:")
        else:
            self.line(f"real {out} = 0;")
            self.line(f"if ({test}) {{")
        self.indent += 1
        value = self.value(node.body, env)
        self.line(f"{out} = {value}" + (";" if self.lang == "c" else ""))
        self.indent -= 1
        if self.lang == "c":
            self.line("}")
        return out


def _innermost_contiguous(node: Summation) -> Summation:
    """``sum(j, …, sum(z, …, t))`` as ``sum(z, …, sum(j, …, t))`` when the inner range does not
    depend on ``j`` (the two sums then commute) and ``t`` reads memory contiguously along ``j``
    rather than ``z`` (row-major: ``j`` in the last axis), so that the innermost loop is the one
    LLVM vectorizes — a reassociation, as the kernels' ``reassoc`` flag allows."""
    inner = node.body
    if not isinstance(inner, Summation) or any(
            node.index in lim.numerator.names for lim in (*inner.lower, *inner.upper)):
        return node
    if _contiguity(inner.body, node.index) <= _contiguity(inner.body, inner.index):
        return node
    return Summation(inner.column, inner.index, inner.lower, inner.upper,
                     Summation(node.column, node.index, node.lower, node.upper, inner.body))


def _contiguity(node: Node, index: str) -> int:
    """Reads under ``node`` that step by one element along ``index`` (it moves only their last axis,
    with coefficient ±1) minus the reads it strides (it moves another axis)."""
    score = 0
    for read in (n for n in walk(node) if isinstance(n, Read)):
        moved = [dict(a.coeffs).get(index, 0) if index in a.names else 0 for a in read.indices]
        if any(moved[:-1]):
            score -= 1
        elif abs(moved[-1]) == 1:
            score += 1
    return score


def _fold(op: str, items: list[str], c: bool = False) -> str:
    if len(items) == 1:
        return items[0]
    if not c:
        return f"{op}({', '.join(items)})"
    out = items[0]
    for item in items[1:]:
        out = f"jc_{op}({out}, {item})"
    return out


def _py_emitter(arrays: dict[str, str], indent: int, parallel: bool, known: dict[Node, str] | None = None) -> _Emitter:
    """A Python emitter at ``indent`` (unsigned reads in parallel kernels), with subtrees already
    computed into the variables of ``known``."""
    em = _Emitter("py", arrays)
    em.indent = indent
    em.unsigned_reads = parallel
    em.known = dict(known or {})
    return em


def _sum_range(node: Summation, env: dict[str, str], arrays: dict[str, str]) -> tuple[str, str]:
    """The first and last value of a sum's index, as Python expressions."""
    bounds = _Emitter("py", arrays)
    return (_fold("max", [bounds.limit(lim, env, True) for lim in node.lower]),
            _fold("min", [bounds.limit(lim, env, False) for lim in node.upper]))


def _code_names(definition: Definition, arguments: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    arrays = {a: f"_a_{a}" for a in arguments}
    env = {n: f"_i_{n}" for n in definition.indices}
    return arrays, env


def python_source(definition: Definition, arguments: list[str], parallel: bool = False,
                  reduction: bool = False, interchange: bool | None = None) -> str:
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
    evaluator's fused reductions (:mod:`jacacc.tensor.fusion`) — decides it by that operand."""
    if reduction and isinstance(last_factor(definition.body), Summation):
        return _chunked_source(definition, arguments, parallel)
    split = interior_split(definition)
    if split is not None:
        return _split_source(definition, arguments, parallel, split)
    outside = _sum_outside_last_index(definition) if interchange is None else (
        interchange and bool(definition.indices) and _sum_outside(definition.body, definition.indices[-1],
                                                                  contiguity=False))
    if outside:
        return _interchanged_source(definition, arguments, parallel)
    arrays, env = _code_names(definition, arguments)
    lines = _signature(definition, arguments, arrays)
    loops, known = _loops_with_invariants(definition, env, arrays, parallel, len(definition.indices))
    em = _py_emitter(arrays, 1 + len(definition.indices), parallel, known)
    value = em.value(definition.body, env)
    store = "    " * em.indent + f"_out[{', '.join(env[n] for n in definition.indices)}] = {value}"
    return "\n".join([*lines, *loops, *em.lines, store, ""])


def _sum_outside_last_index(definition: Definition) -> bool:
    """Whether the body is ``factors · sum(k, lo, hi, t)`` (rank ≥ 2) with ``lo, hi`` free of the
    last index ``v`` and ``t`` contiguous along ``v`` rather than ``k`` (:func:`_contiguity`): then
    the ``k`` loop goes outside the ``v`` loop (:func:`_interchanged_source`)."""
    return len(definition.indices) >= 2 and _sum_outside(definition.body, definition.indices[-1])


def _sum_outside(body: Node, v: str, contiguity: bool = True) -> bool:
    """Whether ``body`` is ``factors · sum(k, lo, hi, t)`` with ``lo, hi`` free of ``v`` and (with
    ``contiguity``) ``t`` reading more contiguously along ``v`` than along ``k``."""
    sum_node = last_factor(body)
    if not isinstance(sum_node, Summation) or any(
            v in lim.numerator.names for lim in (*sum_node.lower, *sum_node.upper)):
        return False
    if v not in free_indices(sum_node):  # the same sum for every v: hoisted instead (_invariants)
        return False
    return not contiguity or _contiguity(sum_node.body, v) > _contiguity(sum_node.body, sum_node.index)


def _interchanged_source(definition: Definition, arguments: list[str], parallel: bool) -> str:
    """:func:`python_source` for :func:`_sum_outside_last_index`: per outer element, the row of
    sums over the last index ``v`` accumulates in ``_out`` with ``k`` outside ``v`` (each element
    still adds its terms in the order of ``k``: the same values), then the factors multiply it.
    The factors of ``t`` that do not depend on ``v`` are computed once per ``k``, not once per ``v``,
    and the ``v`` loop reads rows."""
    arrays, env = _code_names(definition, arguments)
    rank = len(definition.indices)
    lines = _signature(definition, arguments, arrays)
    loops, known = _loops_with_invariants(definition, env, arrays, parallel, rank - 1)
    lines += loops
    lines += _interchanged_lines(definition, definition.body, env, arrays, known, parallel, rank,
                                 ("0", f"_n{rank - 1}"))
    return "\n".join([*lines, ""])


def _interchanged_lines(definition: Definition, body: Node, env: dict[str, str], arrays: dict[str, str],
                        known: dict[Node, str], parallel: bool, indent: int, span: tuple[str, str]) -> list[str]:
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
    lines = [f"{pad}for {v} in range({start}, {stop}):", f"{pad}    _out[{row}] = 0.0",
             f"{pad}_klo = {lo}", f"{pad}_khi = {hi}"]
    inner = {**env, sum_node.index: k}
    # the factors of t without v, once per k and stored: computed in the v loop, they would be
    # recomputed per element (LLVM cannot tell that _out is no argument), and computed just before
    # it, reassociation would move a division among them into it ((a / b) · x → (a · x) / b)
    invariant, variant = _split_product(sum_node.body, definition.indices[-1])
    if invariant is not None:
        first = _py_emitter(arrays, indent + 1, parallel, known)
        first.serial = 2000  # names apart from the other emitters'
        factor = first.value(invariant, inner)
        lines += [f"{pad}_fk = np.empty(max(_khi - _klo + 1, 0))", f"{pad}for {k} in range(_klo, _khi + 1):",
                  *first.lines, f"{pad}    _fk[{k} - _klo] = {factor}"]
    lines.append(f"{pad}for {k} in range(_klo, _khi + 1):")
    term = _py_emitter(arrays, indent + 1, parallel, known)
    if invariant is not None:
        term.line(f"_f = _fk[{k} - _klo]")
        term.known[invariant] = "_f"
    term.line(f"for {v} in range({start}, {stop}):")
    term.indent += 1
    value = term.value(sum_node.body if invariant is None else Binary(0, "*", invariant, variant), inner)
    lines += term.lines + ["    " * (indent + 2) + f"_out[{row}] += {value}"]
    if body is sum_node:  # no factors
        return lines
    lines.append(f"{pad}for {v} in range({start}, {stop}):")
    final = _py_emitter(arrays, indent + 1, parallel, {**known, sum_node: f"_out[{row}]"})
    value = final.value(body, env)
    return lines + final.lines + ["    " * (indent + 1) + f"_out[{row}] = {value}"]


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
        for child in ("operand", "left", "right", "base", "argument"):
            sub = getattr(node, child, None)
            if isinstance(sub, Node):
                visit(sub)

    visit(definition.body)
    return out


def _loops_with_invariants(definition: Definition, env: dict[str, str], arrays: dict[str, str], parallel: bool,
                           count: int) -> tuple[list[str], dict[Node, str]]:
    """The first ``count`` output loops, each followed by the :func:`_invariants` of its level (those
    of no index before them, after a return for an empty output), and the variables holding them."""
    invariants = _invariants(definition)
    lines: list[str] = []
    known: dict[Node, str] = {}
    if invariants:
        empty = " or ".join(f"_n{k} == 0" for k in range(len(definition.indices)))
        lines += [f"    if {empty}:", "        return"]  # the invariants' reads are only checked on elements
    loops = _output_loops(definition, env, 1, "prange" if parallel else "range")
    em = _py_emitter(arrays, 1, parallel)
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


def _split_source(definition: Definition, arguments: list[str], parallel: bool, split: InteriorSplit) -> str:
    """:func:`python_source` with the last index's loop cut into border, interior, border: the
    interior evaluates ``split.body`` (fixed sum ranges), the borders the definition's body.  A 1-D
    parallel kernel runs blocks of :data:`BLOCK` elements, each cut the same way."""
    arrays, env = _code_names(definition, arguments)
    rank = len(definition.indices)
    v, last = env[definition.indices[-1]], f"_n{rank - 1}"
    blocked = parallel and rank == 1
    lines = _signature(definition, arguments, arrays)
    loops, known = _loops_with_invariants(definition, env, arrays, parallel, rank - 1)
    lines += loops
    pad = "    " * rank
    limits = _Emitter("py", arrays)
    low = _fold("max", ["0", *(limits.limit(lim, env, True) for lim in split.lower)])
    high = _fold("min", [f"{last} - 1", *(limits.limit(lim, env, False) for lim in split.upper)])
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
                                         (start, stop))
            continue
        lines.append(f"{pad}for {v} in range({start}, {stop}):")
        em = _py_emitter(arrays, len(pad) // 4 + 1, parallel, known)
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


def _chunked_source(definition: Definition, arguments: list[str], parallel: bool) -> str:
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
    em = _py_emitter(arrays, inner + 1, parallel)
    chunk_env = {**env, "_c0": "_c0", "_c1": "_c1"}
    piece = Summation(sum_node.column, sum_node.index, (*sum_node.lower, Limit(Affine.of("_c0"))),
                      (*sum_node.upper, Limit(Affine.of("_c1"))), sum_node.body)
    partial = em.value(piece, chunk_env)
    lines += em.lines + ["    " * (inner + 1) + f"_part[_c, {flat}] = {partial}"]
    # the elements: the factors outside the sum times the added partial sums
    lines += _output_loops(definition, env, 1, "prange" if parallel else "range")
    final = _py_emitter(arrays, inner, parallel, {sum_node: "_total"})
    lines += [f"{pad}_total = 0.0", f"{pad}for _c in range(_chunks):", f"{pad}    _total += _part[_c, {flat}]"]
    value = final.value(definition.body, env)
    lines += final.lines + [f"{pad}_out[{', '.join(env[n] for n in definition.indices)}] = {value}"]
    return "\n".join([*lines, ""])


def _load(source: str, tag: str, namespace: dict[str, Any]) -> Callable:
    code = compile(source, register_source(source, tag), "exec")
    exec(code, namespace)  # noqa: S102 - our own generated source
    return namespace["kernel"]


def python_kernel(definition: Definition, arguments: list[str]) -> Callable:
    """The kernel run by the Python interpreter (the reference backend)."""
    return _load(python_source(definition, arguments), "elementwise-py", dict(_PY_MODULES))


def numba_kernel(definition: Definition, arguments: list[str], reduction: bool = False,
                 parallel: bool = True, interchange: bool | None = None, cache: bool = False) -> Callable:
    """The kernel compiled by Numba: ``@njit(parallel=True)``, a ``prange`` over the outermost
    index (or, with ``reduction``, over chunks of the final sum: :func:`python_source`); with
    ``parallel=False`` the same loops on the calling thread (no thread wake-up: small inputs).
    ``interchange`` is :func:`python_source`'s.

    With ``cache``, a kernel of the same source is compiled once per process (the dispatcher is
    kept in memory, and Numba compiles it once per argument type) and, where the directory of
    :func:`kernel_cache_dir` is writable, once per machine: the source is written there as a
    module and jitted with Numba's ``cache=True``, so another process loads the machine code.

    Examples
    --------
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
    source, used = _vector_math(python_source(definition, arguments, parallel=True, reduction=reduction,
                                              interchange=interchange))
    if len(source) > NUMBA_PARALLEL_MAX_CHARS:
        # Numba's parallel passes grow much faster than linearly with the loop body: a 2000-term
        # sum compiled in 30 s on one thread and 550 s with parallel=True
        parallel = False
    if not cache:
        return _compiled_module(_module_text(source, used), numba, parallel, None)
    text = _module_text(source, used)
    key = (text, parallel)
    found = _KERNELS.get(key)
    if found is None:
        found = _KERNELS[key] = _compiled_module(text, numba, parallel, kernel_cache_dir())
    return found


#: kernels compiled with ``cache=True`` in this process: (module text, parallel) → dispatcher
_KERNELS: dict[tuple[str, bool], Callable] = {}


def _module_text(source: str, used: set[str]) -> str:
    """A module defining ``kernel`` (``source``) and the vector math helpers it calls, un-jitted."""
    from jacacc.codegen.numba_ import _vector_math_source

    lines = ["# generated by jacacc.elementwise.kernels; safe to delete", "import math", "", "import numpy as np",
             "from numba import njit, prange", *(_vector_math_source(used, _FASTMATH_TEXT) if used else ()), "", "",
             source]
    return "\n".join(lines)


def _compiled_module(text: str, numba: Any, parallel: bool, directory: Path | None) -> Callable:
    """``kernel`` of the module ``text`` jitted: imported from a file in ``directory`` with Numba's
    on-disk cache, or (no directory, or it cannot be written) executed from memory."""
    options = {"parallel": parallel, "error_model": "numpy", "fastmath": _FASTMATH}
    if directory is not None:
        try:
            module = _file_module(text, directory)
            # reassociation lets LLVM vectorize the sums (as XLA and Eigen do); no other fast-math
            # flag, so inf and nan behave as in the reference
            return numba.njit(cache=True, **options)(module.kernel)
        except (OSError, RuntimeError, ImportError, SyntaxError):  # unwritable, or no cache locator
            pass
    namespace: dict[str, Any] = {}
    return numba.njit(cache=False, **options)(_load(text, "elementwise-numba", namespace))


def kernel_cache_dir() -> Path | None:
    """Where :func:`numba_kernel` writes cached kernels: ``$JACACC_CACHE_DIR/kernels``, else
    ``$XDG_CACHE_HOME/jacacc/kernels`` (``~/.cache/jacacc/kernels``); None where it cannot be
    created or written (kernels are then cached in memory only) or ``JACACC_CACHE_DIR`` is empty."""
    root = os.environ.get("JACACC_CACHE_DIR")
    if root is None:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "jacacc")
    if not root:
        return None
    directory = Path(root) / "kernels"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return directory if os.access(directory, os.W_OK) else None


def _file_module(text: str, directory: Path) -> Any:
    """The module ``text`` written to ``directory`` under the hash of its text (once: Numba keys its
    cache by the file's contents) and imported."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:24]
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
    return module


#: Numba: below this many elements (of the result or of the largest input) a kernel runs on the
#: calling thread; waking the thread pool costs 50–170 µs, more than such a kernel's work (measured
#: on two cores with ``OMP_WAIT_POLICY=passive``: the crossover lies near 3·10⁴ elements; 1·10⁴ with
#: a short spin, ``GOMP_SPINCOUNT=10000``, which keeps the pool awake between the kernels of one vjp)
PARALLEL_MIN_ELEMENTS = 32_768
#: a kernel's source longer than this compiles without ``parallel=True`` (see :func:`numba_kernel`)
NUMBA_PARALLEL_MAX_CHARS = 20_000
_FASTMATH = {"reassoc", "contract"}
_FASTMATH_TEXT = "{" + ", ".join(repr(flag) for flag in sorted(_FASTMATH)) + "}"  # for the helpers' source
#: Numba: exp, log and tanh as the scalar core's inlined arithmetic helpers (a few ulp; they
#: vectorize with the loop around them, a libm call does not)
VECTOR_MATH = {"np.exp(": ("_exp(", "exp"), "np.log(": ("_log(", "log"), "np.tanh(": ("_tanh(", "tanh")}

#: above this many calls of exp, log and tanh in one kernel the helpers are not used (:func:`_vector_math`)
VECTOR_MATH_MAX_CALLS = 16


def _vector_math(source: str) -> tuple[str, set[str]]:
    """``source`` (from :func:`python_source`, whose only calls of these are the functions of the
    language) calling the :data:`VECTOR_MATH` helpers, and the helpers it needs."""
    used: set[str] = set()
    if sum(source.count(call) for call in VECTOR_MATH) > VECTOR_MATH_MAX_CALLS:
        # each helper is inlined into Numba's IR with its branches: a hundred tanh calls made its
        # data-flow analysis run out of memory; libm calls cost one call each
        return source, used
    for call, (helper, name) in VECTOR_MATH.items():
        if call in source:
            source = source.replace(call, helper)
            used.add(name)
    return source, used


_CUDA_PRELUDE = """typedef double real;
__device__ __forceinline__ long long jc_floordiv(long long a, long long b) {
    long long q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long jc_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long jc_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ real jc_pow2(real x) { return x * x; }
__device__ __forceinline__ real jc_pow3(real x) { return x * x * x; }
"""


def cuda_source(definition: Definition, arguments: list[str], ranks: dict[str, int]) -> str:
    """CUDA C++ for ``cupy.RawKernel``: ``jacacc_elementwise(out, *arrays, *extents)`` with the
    output's extents then each argument's (row-major, contiguous float64), one thread per element."""
    arrays, env = _code_names(definition, arguments)
    shapes = {a: [f"{arrays[a]}_n{k}" for k in range(ranks[a])] for a in arguments}
    em = _Emitter("c", arrays, shapes)
    em.indent = 1
    value = em.value(definition.body, env)
    dims = [f"_n{k}" for k in range(len(definition.indices))]
    params = ["real* __restrict__ _out", *(f"const real* __restrict__ {arrays[a]}" for a in arguments),
              *(f"long long {d}" for d in dims), *(f"long long {s}" for a in arguments for s in shapes[a])]
    lines = [f"// {definition.source}", _CUDA_PRELUDE, ops.CUDA_HELPERS,
             f'extern "C" __global__ void {CUDA_KERNEL_NAME}({", ".join(params)}) {{',
             "    long long _t = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
             f"    if (_t >= {' * '.join(dims)}) return;"]
    rest = "_t"
    unravel = []
    for name, n in reversed(list(zip(definition.indices, dims, strict=True))):
        unravel.append(f"    long long {env[name]} = {rest} % {n};")
        rest = f"({rest} / {n})"
    return "\n".join([*lines, *reversed(unravel), *em.lines, f"    _out[_t] = {value};", "}", ""])
