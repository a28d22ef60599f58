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

from collections.abc import Callable
from typing import Any

import numpy as np

from jacacc.codegen.base import register_source
from jacacc.elementwise.parse import (
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
)

__all__ = ["CUDA_KERNEL_NAME", "cuda_source", "numba_kernel", "python_kernel", "python_source"]

CUDA_KERNEL_NAME = "jacacc_elementwise"

_PY_FUNCTIONS = {"exp": "np.exp", "log": "np.log", "sqrt": "np.sqrt", "tanh": "np.tanh", "sin": "np.sin",
                 "cos": "np.cos", "abs": "np.abs", "sign": "np.sign"}
_C_FUNCTIONS = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "sin": "sin", "cos": "cos",
                "abs": "fabs", "sign": "jc_sign"}


class _Emitter:
    """Statements and expressions of one kernel body in Python (``lang="py"``) or C (``"c"``)."""

    def __init__(self, lang: str, arrays: dict[str, str], shapes: dict[str, list[str]] | None = None) -> None:
        self.lang = lang
        self.arrays = arrays  # argument → code name
        self.shapes = shapes or {}  # argument → code names of its extents (C: row-major offsets)
        self.lines: list[str] = []
        self.indent = 2
        self.serial = 0
        self.depth = 0  # loops and brackets around the current statement (inside the output loops)
        self.parallel_sum = False  # Numba: prange the first sum outside every other sum

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
        if isinstance(node, Number):
            return repr(float(node.value)) if self.lang == "py" else f"((real){float(node.value)!r})"
        if isinstance(node, Read):
            idx = [self.index(a, env) for a in node.indices]
            name = self.arrays[node.argument]
            if self.lang == "py":
                return f"{name}[{', '.join(idx)}]"
            flat = idx[0]
            for extent, i in zip(self.shapes[node.argument][1:], idx[1:], strict=True):
                flat = f"({flat}) * {extent} + {i}"
            return f"{name}[{flat}]"
        if isinstance(node, Unary):
            return f"(-{self.value(node.operand, env)})"
        if isinstance(node, Binary):
            return f"({self.value(node.left, env)} {node.op} {self.value(node.right, env)})"
        if isinstance(node, Power):
            base = self.value(node.base, env)
            p = node.exponent
            if self.lang == "py":
                return f"({base} ** {int(p) if float(p).is_integer() else repr(p)})"
            if p in (2.0, 3.0):  # squares and cubes as products, the common case of a constant exponent
                return f"jc_pow{int(p)}({base})"
            return f"pow({base}, (real){p!r})"
        if isinstance(node, Call):
            table = _PY_FUNCTIONS if self.lang == "py" else _C_FUNCTIONS
            return f"{table[node.function]}({self.value(node.argument, env)})"
        if isinstance(node, Summation):
            return self.summation(node, env)
        if isinstance(node, Guard):
            return self.guard(node, env)
        raise TypeError(f"unknown node {type(node).__name__}")  # pragma: no cover

    def summation(self, node: Summation, env: dict[str, str]) -> str:
        acc, k, lo, hi = self.fresh("s"), self.fresh("k"), self.fresh("lo"), self.fresh("hi")
        lows = [self.limit(lim, env, True) for lim in node.lower]
        highs = [self.limit(lim, env, False) for lim in node.upper]
        inner = {**env, node.index: k}
        if self.lang == "py":
            self.line(f"{acc} = 0.0")
            self.line(f"{lo} = {_fold('max', lows)}")
            self.line(f"{hi} = {_fold('min', highs)}")
            loop = "prange" if self.parallel_sum and self.depth == 0 else "range"
            self.line(f"for {k} in {loop}({lo}, {hi} + 1):")
        else:
            self.line(f"real {acc} = 0;")
            self.line(f"long long {lo} = {_fold('max', lows, c=True)};")
            self.line(f"long long {hi} = {_fold('min', highs, c=True)};")
            self.line(f"for (long long {k} = {lo}; {k} <= {hi}; ++{k}) {{")
        self.indent += 1
        self.depth += 1
        term = self.value(node.body, inner)
        self.line(f"{acc} += {term}" + (";" if self.lang == "c" else ""))
        self.depth -= 1
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
        self.depth += 1  # a reduction under a bracket stays serial
        value = self.value(node.body, env)
        self.line(f"{out} = {value}" + (";" if self.lang == "c" else ""))
        self.depth -= 1
        self.indent -= 1
        if self.lang == "c":
            self.line("}")
        return out


def _fold(op: str, items: list[str], c: bool = False) -> str:
    if len(items) == 1:
        return items[0]
    if not c:
        return f"{op}({', '.join(items)})"
    out = items[0]
    for item in items[1:]:
        out = f"jc_{op}({out}, {item})"
    return out


def _code_names(definition: Definition, arguments: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    arrays = {a: f"_a_{a}" for a in arguments}
    env = {n: f"_i_{n}" for n in definition.indices}
    return arrays, env


def python_source(definition: Definition, arguments: list[str], parallel: bool = False,
                  reduction: bool = False) -> str:
    """A Python function ``kernel(out, *arrays)`` filling ``out`` (the function's shape) element by
    element; ``parallel`` runs the outermost index with Numba's ``prange`` (the inner ones as plain
    loops, which Numba can vectorize — each element is still computed on its own).  With
    ``reduction`` the elements are computed one after the other and the sums at their top level
    are parallel reductions instead: the layout for a gradient with few elements, each a long sum
    (a convolution's kernel)."""
    arrays, env = _code_names(definition, arguments)
    em = _Emitter("py", arrays)
    em.indent = 1 + len(definition.indices)
    em.parallel_sum = parallel and reduction
    value = em.value(definition.body, env)
    dims = [f"_n{k}" for k in range(len(definition.indices))]
    params = ", ".join(["_out", *(arrays[a] for a in arguments)])
    lines = [f"# {definition.source}", f"def kernel({params}):", f"    {', '.join(dims)}, = _out.shape"]
    for depth, (name, n) in enumerate(zip(definition.indices, dims, strict=True)):
        loop = "prange" if parallel and not reduction and depth == 0 else "range"
        lines.append("    " * (depth + 1) + f"for {env[name]} in {loop}({n}):")
    store = "    " * em.indent + f"_out[{', '.join(env[n] for n in definition.indices)}] = {value}"
    return "\n".join([*lines, *em.lines, store, ""])


def _load(source: str, tag: str, namespace: dict[str, Any]) -> Callable:
    code = compile(source, register_source(source, tag), "exec")
    exec(code, namespace)  # noqa: S102 - our own generated source
    return namespace["kernel"]


def python_kernel(definition: Definition, arguments: list[str]) -> Callable:
    """The kernel run by the Python interpreter (the reference backend)."""
    return _load(python_source(definition, arguments), "elementwise-py", {"np": np})


def numba_kernel(definition: Definition, arguments: list[str], reduction: bool = False) -> Callable:
    """The kernel compiled by Numba: ``@njit(parallel=True)``, a ``prange`` over the outermost
    index (or, with ``reduction``, over the top-level sums: :func:`python_source`)."""
    from jacacc.errors import require_extra

    numba = require_extra("numba", "numba")
    source = python_source(definition, arguments, parallel=True, reduction=reduction)
    kernel = _load(source, "elementwise-numba", {"np": np, "prange": numba.prange})
    return numba.njit(parallel=True, error_model="numpy", cache=False)(kernel)


_CUDA_PRELUDE = """typedef double real;
__device__ __forceinline__ long long jc_floordiv(long long a, long long b) {
    long long q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long jc_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long jc_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ real jc_sign(real x) { return (real)((x > 0) - (x < 0)); }
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
    lines = [f"// {definition.source}", _CUDA_PRELUDE,
             f'extern "C" __global__ void {CUDA_KERNEL_NAME}({", ".join(params)}) {{',
             "    long long _t = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
             f"    if (_t >= {' * '.join(dims)}) return;"]
    rest = "_t"
    unravel = []
    for name, n in reversed(list(zip(definition.indices, dims, strict=True))):
        unravel.append(f"    long long {env[name]} = {rest} % {n};")
        rest = f"({rest} / {n})"
    return "\n".join([*lines, *reversed(unravel), *em.lines, f"    _out[_t] = {value};", "}", ""])
