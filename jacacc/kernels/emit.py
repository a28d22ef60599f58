"""The loop kernels' expression emitter: one body in Python (Numba) or CUDA C++.

:class:`Emitter` prints the body of a :class:`~jacacc.kernels.ir.Definition`
— the kernel IR — for one output element: sums become loops whose bounds are
the ``max``/``min`` of their limits (rounded up or down), brackets ``if``
blocks around the reads they guard (a read under a false bracket is never
made), quotients floor divisions; a subtree already computed (a hoisted
invariant, a stored row) is read from its variable.  Function calls are
spelled by the operation table through :class:`Calls`
(:mod:`jacacc.kernels.functions`), which also records what was called.  The
layouts around the body are :mod:`jacacc.kernels.loops` (Python / Numba) and
:mod:`jacacc.kernels.cuda` (one CUDA thread per element).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable

from jacacc.kernels.functions import (
    KERNEL_OPERATIONS,
    call_text,
    calls,
    helper_set,
    kernel_spelling,
    spelling,
)
from jacacc.kernels.ir import (
    FUNCTIONS,
    Affine,
    Binary,
    Call,
    Condition,
    Guard,
    Limit,
    Node,
    Number,
    Power,
    Quotient,
    Read,
    Summation,
    Unary,
    children,
    walk,
)

__all__ = ["MAX_NESTING", "Calls", "Emitter", "contiguity", "fold", "innermost_contiguous"]

#: the deepest a generated expression nests before a subexpression gets a name of its own
#: (Python's parser stops at 200 parentheses; nvcc reads a named value just as fast)
MAX_NESTING = 40


class Calls:
    """How one kernel spells the language's functions, and which it called.

    Parameters
    ----------
    backend : str
        ``"numba"`` (Python source: the reference interpreter and Numba) or ``"cuda"``.
    vector_math : bool or iterable of str
        Numba: call the generated helpers (``_exp`` …) of the operations that have one
        (:attr:`jacacc.ops.Operation.vector_math`): all (True), or those named
        (:func:`~jacacc.kernels.functions.helper_set`).

    Examples
    --------
    >>> c = Calls("numba", vector_math=True)
    >>> c.call("logistic", "x"), c.call("tanh", "y"), c.call("sin", "z")
    ('(1.0 / (1.0 + _exp(-(x))))', '_tanh(y)', 'np.sin(z)')
    >>> sorted(c.helpers()), c.helper_calls()
    (['exp', 'tanh'], 2)
    """

    def __init__(self, backend: str = "numba", vector_math: bool | Iterable[str] = False) -> None:
        self.backend = backend
        #: the operations spelled as their helpers
        self.vector_math = helper_set(vector_math) if backend == "numba" else frozenset()
        self.spellings = _spellings(backend, self.vector_math)
        #: the table's operations called, with how many calls (a template's calls included)
        self.made: Counter[str] = Counter()

    def call(self, name: str, *operands: str) -> str:
        """The code of ``name(*operands)``, recorded."""
        self.made.update(calls(name, self.backend))
        return call_text(self.spellings[name], operands)

    def template(self, name: str) -> bool:
        """Whether ``name`` is spelled as a template (which may read its operand more than once)."""
        return "{" in self.spellings[name]

    def repeats_operand(self, name: str, position: int = 0) -> bool:
        """Whether the spelling of ``name`` reads its operand ``position`` more than once (relu's NaN test)."""
        return self.spellings[name].count(f"{{{position}}}") > 1

    def helpers(self) -> set[str]:
        """The operations whose vectorizable helpers the calls made need (none without ``vector_math``)."""
        return set(self.made) & self.vector_math

    def helper_calls(self) -> int:
        """How many calls of the helpers were printed."""
        return sum(self.made[name] for name in self.helpers())

    @classmethod
    def of(cls, calls: Calls | None, lang: str) -> Calls:
        """``calls``, or the table's plain spellings for ``lang`` (``"py"`` or ``"c"``)."""
        return calls if calls is not None else cls("numba" if lang == "py" else "cuda")


@functools.cache
def _spellings(backend: str, vector_math: frozenset[str]) -> dict[str, str]:
    """The language's functions, and the operations of two or three operands fused regions call,
    spelled for ``backend`` (read-only: shared by every :class:`Calls`)."""
    return {**{name: spelling(name, backend, vector_math) for name in FUNCTIONS},
            **{name: kernel_spelling(name, backend, vector_math) for name in KERNEL_OPERATIONS}}


class Emitter:
    """Statements and expressions of one kernel body in Python (``lang="py"``) or C (``"c"``)."""

    def __init__(self, lang: str, arrays: dict[str, str], shapes: dict[str, list[str]] | None = None,
                 calls: Calls | None = None) -> None:
        self.lang = lang
        self.calls = Calls.of(calls, lang)  # how functions are spelled, and which were called
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
        # Python/Numba: a sum of a sum may be interchanged so that the innermost loop reads
        # contiguously (a reassociation); False keeps the order the tree gives
        self.reorder_sums = True

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
                return f"({base} ** {int(p) if float(p).is_integer() else self.number(float(p))})"
            if p in (2.0, 3.0):  # squares and cubes as products, the common case of a constant exponent
                return f"jc_pow{int(p)}({base})"
            return f"pow({base}, {self.number(float(p))})"
        assert isinstance(node, Call)
        if not self.calls.template(node.function):
            return self.calls.call(node.function, *operands)
        operands = list(operands)
        for k, text in enumerate(operands):
            if self.calls.repeats_operand(node.function, k) and not text.isidentifier():
                # a template that reads an operand more than once (relu's NaN test): compute it once
                operands[k] = self.fresh("w")
                self.line(f"{operands[k]} = {text}" if self.lang == "py" else f"real {operands[k]} = {text};")
        return f"({self.calls.call(node.function, *operands)})"

    def number(self, value: float) -> str:
        """A constant: ``repr`` (the shortest text that round-trips); inf and NaN by their bits in C,
        NumPy's names in Python."""
        if self.lang == "py":
            if math.isfinite(value):
                return repr(value)
            return "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "(-np.inf)")
        if math.isfinite(value):
            return f"((real){value!r})"
        bits = "0x7ff8000000000000ULL" if math.isnan(value) else "0x7ff0000000000000ULL"
        return f"({'-' if value < 0 else ''}(real)__longlong_as_double({bits}))"

    def _leaf(self, node: Node, env: dict[str, str]) -> str:
        """A number, a read, or a sum or bracket computed by statements into a variable."""
        if isinstance(node, Number):
            return self.number(float(node.value))
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
        if self.lang == "py" and self.reorder_sums:
            node = innermost_contiguous(node)
        acc, k, lo, hi = self.fresh("s"), self.fresh("k"), self.fresh("lo"), self.fresh("hi")
        lows = [self.limit(lim, env, True) for lim in node.lower]
        highs = [self.limit(lim, env, False) for lim in node.upper]
        inner = {**env, node.index: k}
        if self.lang == "py":
            self.line(f"{acc} = 0.0")
            self.line(f"{lo} = {fold('max', lows)}")
            self.line(f"{hi} = {fold('min', highs)}")
            self.line(f"for {k} in range({lo}, {hi} + 1):")
        else:
            self.line(f"real {acc} = 0;")
            self.line(f"long long {lo} = {fold('max', lows, c=True)};")
            self.line(f"long long {hi} = {fold('min', highs, c=True)};")
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


def innermost_contiguous(node: Summation) -> Summation:
    """``sum(j, …, sum(z, …, t))`` as ``sum(z, …, sum(j, …, t))`` when the inner range does not
    depend on ``j`` (the two sums then commute) and ``t`` reads memory contiguously along ``j``
    rather than ``z`` (row-major: ``j`` in the last axis), so that the innermost loop is the one
    LLVM vectorizes — a reassociation, as the kernels' ``reassoc`` flag allows."""
    inner = node.body
    if not isinstance(inner, Summation) or any(
            node.index in lim.numerator.names for lim in (*inner.lower, *inner.upper)):
        return node
    if contiguity(inner.body, node.index) <= contiguity(inner.body, inner.index):
        return node
    return Summation(inner.column, inner.index, inner.lower, inner.upper,
                     Summation(node.column, node.index, node.lower, node.upper, inner.body))


def contiguity(node: Node, index: str) -> int:
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


def fold(op: str, items: list[str], c: bool = False) -> str:
    """``max``/``min`` of ``items`` in Python (``c=False``) or as nested ``jc_max``/``jc_min`` calls in C."""
    if len(items) == 1:
        return items[0]
    if not c:
        return f"{op}({', '.join(items)})"
    out = items[0]
    for item in items[1:]:
        out = f"jc_{op}({out}, {item})"
    return out
