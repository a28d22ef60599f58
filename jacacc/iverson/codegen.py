"""Code generation for the tensor language: kernel-layer loops and vectorized NumPy (paper 001 §4.3's model made real).

:func:`compile` brings a program to gen push-out form (lets at the top, every
⊞ outermost in its binding; :mod:`~jacacc.iverson.normalize`) and generates:

``"numba"``
    the program lowered onto the kernel IR (:func:`~jacacc.iverson.lower.lower`:
    a :class:`~jacacc.kernels.ir.Definition` per term of each binding) and each
    definition compiled by the kernel layer (:mod:`jacacc.kernels.support`),
    run binding by binding.  Brackets are compiled into the loops instead of
    being tested at every point: index comparisons become Fourier–Motzkin loop
    bounds, and an equality fixes its index instead of looping over it
    (``a·i + r = 0``: ``i = −r / a`` where ``a`` divides ``r``).  A ⊞ whose
    body is a sum of bracketed terms fills its zero-initialized output term by
    term, each over its own support — so the gradient of trace ``⊞_i ⊞_j [i = j]``
    runs in O(n), as §4.3's cost model counts it.  Sums accumulate in the
    interpreter's order, without fast-math flags; data comparisons are evaluated
    after the index comparisons of their bracket (they may read what those
    guard).  The definitions are named canonically, so the steps of a
    recurrence share one compiled kernel: compile time grows with the number of
    distinct steps, not with the program's length.  Outputs of 32 768 elements
    or more run their outermost loop in parallel (``prange``).
``"loops"``
    the same kernels run by the Python interpreter: for reading and debugging
    generated code (``.source``).
``"numpy"``
    whole-array code: the program's :mod:`~jacacc.iverson.arrays` translation
    printed as straight-line NumPy statements (index grids, gathers,
    ``np.where``, ``np.sum`` over an axis) — vectorized, dense.

All take the program's inputs as keyword arrays (extra ones ignored) and
return what :func:`~jacacc.iverson.interpret.evaluate` returns.

Examples
--------
>>> import numpy as np, jacacc.iverson as iv
>>> A = iv.var("A", (4, 4)); i, j = iv.index("i"), iv.index("j")
>>> f = compile(iv.gen(i, 4, iv.gen(j, 4, iv.bracket(i == j) * A[i, j])), backend="numpy")
>>> X = np.arange(16.0).reshape(4, 4)
>>> np.array_equal(f(A=X), np.diag(np.diag(X)))
True
>>> print(f.source.splitlines()[0])
def kernel(a_0):
"""

from __future__ import annotations

import builtins
import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from jacacc import kernels
from jacacc.errors import RegistryError, require_extra
from jacacc.iverson.arrays import _Lib, _value
from jacacc.iverson.check import check
from jacacc.iverson.interpret import bind_arrays
from jacacc.iverson.lower import LoweredProgram, Term, lower
from jacacc.iverson.normalize import bindings_of, gen_pushout
from jacacc.iverson.syntax import (
    FUNCTIONS,
    Expr,
    IvTypeError,
    Pair,
    PairType,
    Var,
    operation_name,
)
from jacacc.kernels.ir import Definition
from jacacc.kernels.support import support_source

__all__ = ["BACKENDS", "CompiledProgram", "compile"]

_CACHE: dict[tuple, CompiledProgram] = {}


class CompiledProgram:
    """A compiled program: call it with keyword arrays; ``.source`` is the generated code.

    A tensor-valued program also takes ``out=``: a float64 C-contiguous array of
    the result's shape that is **zero wherever the result is structurally zero**
    (a fresh ``np.zeros``, or what an earlier call of the same program returned).
    The Numba kernel then writes only the result's support — the gradient of
    trace writes n entries, not n² — instead of allocating and zeroing a new
    array.
    """

    def __init__(self, expr: Expr, backend: str, source: str, kernel: Callable[..., Any], inputs: list[str],
                 takes_out: bool = False) -> None:
        self.expr = expr
        self.backend = backend
        self.source = source
        self.kernel = kernel
        self.inputs = inputs
        self.takes_out = takes_out
        self.free = check(expr)

    def __call__(self, out: np.ndarray | None = None, **arrays: Any) -> Any:
        env = bind_arrays(self.free, arrays)
        # scalars as NumPy scalars: the whole-array code may reshape them
        args = [np.float64(v) if isinstance(v, float) else v for v in (env[n] for n in self.inputs)]
        if out is not None:
            if isinstance(self.expr.type, PairType) or self.expr.type == ():
                raise IvTypeError(f"out= is for tensor results; this program returns {self.expr.type}")
            if (not isinstance(out, np.ndarray) or out.shape != self.expr.type or out.dtype != np.float64
                    or not out.flags.c_contiguous or not out.flags.writeable):
                raise IvTypeError(f"out must be a writeable C-contiguous float64 array of shape {self.expr.type}")
        with np.errstate(all="ignore"):  # as the interpreter: IEEE results, not warnings
            if self.takes_out:
                buffer = np.zeros(self.expr.type) if out is None else out
                return self.kernel(*args, buffer, reused=out is not None)
            result = _result(self.kernel(*args))
        if out is not None:
            out[...] = result
            return out
        return result

    def __repr__(self) -> str:
        return f"<CompiledProgram backend={self.backend!r} inputs={self.inputs}>"


def _result(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_result(v) for v in value)
    return float(value) if np.ndim(value) == 0 else np.asarray(value, dtype=np.float64)


def compile(expr: Expr, backend: str = "numba") -> CompiledProgram:  # noqa: A001 - the module's verb
    """Generate code for ``expr`` (see the module docstring); cached per program and backend."""
    if backend not in BACKENDS:
        raise RegistryError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    free = check(expr)
    for name, t in free.items():
        if isinstance(t, PairType):
            raise IvTypeError(f"compile takes tensor inputs; {name!r} is a pair {t} (pass its parts separately)")
    key = (expr.key, backend)
    if key not in _CACHE:
        _CACHE[key] = BACKENDS[backend](expr)
    return _CACHE[key]


def _exec(source: str, tag: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    from jacacc.codegen.base import register_source

    filename = register_source(source, f"iverson-{tag}")
    exec(builtins.compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace["kernel"]


def _spelling(name: str, backend: str) -> str:
    """The spelling of the language's function ``name`` for ``backend`` (``"numpy"``, ``"numba"``):
    the operation table's, through the kernel layer (:func:`jacacc.kernels.spelling`) — a function
    or a template with ``{0}``.  libm, not the vectorizable helpers: the loops keep the
    interpreter's values and its order of summation."""
    return kernels.spelling(operation_name(name), backend)


@functools.cache
def _namespace(backend: str) -> dict[str, Any]:
    """The modules the spellings call (``np``, ``math``, ``scipy``, ``jacacc``:
    :func:`jacacc.kernels.modules`); each kernel gets a copy."""
    return kernels.modules(backend)


# ----------------------------------------------------------------------------- loop kernels


class _Runner:
    """A lowered program (:func:`~jacacc.iverson.lower.lower`) run binding by binding: each term one
    kernel of the kernel layer (:mod:`jacacc.kernels.support` loops, or CUDA threads), each binding a
    buffer of the array module ``xp`` (NumPy, or CuPy for the GPU: results are copied back).

    Called as ``run(*inputs)``, or ``run(*inputs, out)`` for a tensor result (``reused``: ``out`` holds
    an earlier result, so the supports of a result built from several terms are cleared first)."""

    def __init__(self, program: LoweredProgram, make: Callable[[Term, tuple[int, ...]], Callable[..., None]],
                 xp: Any = np) -> None:
        self.inputs = list(program.inputs)
        self.result = program.result
        self.xp = xp
        self.steps = [(b.name, b.shape, [(make(t, b.shape), t.arguments) for t in b.terms],
                       [make(t, b.shape) for t in b.clear]) for b in program.bindings]
        #: the distinct kernels (terms of the same definition share one)
        self.kernels = list({id(k): k for _, _, terms, clear in self.steps
                             for k in [*(k for k, _ in terms), *clear]}.values())
        # the binding an out= buffer stands for: the last one, when it is the result
        last = self.steps[-1][0] if self.steps else None
        self.in_place = last if isinstance(self.result, Var) and self.result.name == last else None

    def __call__(self, *args: Any, reused: bool = False) -> Any:
        xp = self.xp
        values = {name: _buffer_of(a, xp) for name, a in zip(self.inputs, args, strict=False)}
        out = args[len(self.inputs)] if len(args) > len(self.inputs) else None
        device_out = None if out is None or xp is np else xp.asarray(out)
        for name, shape, terms, clear in self.steps:
            into = (out if xp is np else device_out) if out is not None and name == self.in_place else None
            if into is None:
                buffer = xp.zeros(shape or (1,))
            else:
                buffer = into
                if reused:
                    for kernel in clear:
                        kernel(buffer)
            for kernel, arguments in terms:
                kernel(buffer, *(values[a] for a in arguments))
            values[name] = buffer
        if out is not None:
            result = values[self.result.name].reshape(out.shape)
            if xp is not np:
                out[...] = result.get()
            elif self.in_place is None:  # an input or an earlier binding: copied
                out[...] = result
            return out
        return self._returned(self.result, values)

    def _returned(self, result: Expr, values: dict[str, Any]) -> Any:
        if isinstance(result, Pair):
            return (self._returned(result.a, values), self._returned(result.b, values))
        assert isinstance(result, Var)
        value = values[result.name]
        value = value if self.xp is np else value.get()
        return float(value.reshape(-1)[0]) if result.type == () else value


def _buffer_of(value: Any, xp: Any = np) -> Any:
    """An input as the kernels read it: a C-contiguous float64 array, a scalar as one element."""
    array = xp.ascontiguousarray(xp.asarray(value, dtype=xp.float64))
    return array.reshape(1) if array.ndim == 0 else array


def _loop_source(program: LoweredProgram) -> str:
    """The generated code for reading: each binding's terms' kernels, in order."""
    parts = []
    for binding in program.bindings:
        for label, terms in (("clear", binding.clear), ("term", binding.terms)):
            for term in terms:
                arguments = _canonical(term)
                reads = ", ".join(f"{a}={name}" for a, name in zip(arguments, term.arguments, strict=True))
                parts.append(f"# {binding.name} {label}{' += ' if term.accumulate else ' = '}({reads})\n"
                             + support_source(term.definition, arguments, binding.shape, term.accumulate))
    return "\n".join(parts)


def _loop_backend(expr: Expr, backend: str) -> CompiledProgram:
    """``numba`` and ``loops``: :mod:`jacacc.kernels.support` kernels; ``cupy``: one CUDA thread per
    element of each term (:func:`jacacc.kernels.cuda_source`); ``cuda-host`` (not registered: for
    checking the CUDA without a GPU): the same CUDA run thread by thread as host C++."""
    program = lower(expr)
    ranks = {**{name: max(len(t), 1) for name, t in program.inputs.items()},
             **{b.name: max(len(b.shape), 1) for b in program.bindings}}
    xp: Any = np
    if backend == "numba":
        require_extra("numba", "numba")

        def make(term: Term, shape: tuple[int, ...]) -> Callable[..., None]:
            parallel = len(shape) > 0 and math.prod(shape) >= kernels.PARALLEL_MIN_ELEMENTS
            return kernels.numba_support_kernel(term.definition, _canonical(term), shape, term.accumulate,
                                                parallel)
    elif backend == "loops":
        def make(term: Term, shape: tuple[int, ...]) -> Callable[..., None]:
            return kernels.python_support_kernel(term.definition, _canonical(term), shape, term.accumulate)
    else:
        if backend == "cupy":
            xp = require_extra("cupy", "gpu")

        def make(term: Term, shape: tuple[int, ...]) -> Callable[..., None]:
            source = _cuda_source(term, ranks)
            if backend == "cupy":
                return kernels.cupy_kernel(source)
            return kernels.host_kernel(source, len(term.arguments), max(len(shape), 1)
                                       + sum(ranks[a] for a in term.arguments))

    takes_out = not isinstance(expr.type, PairType) and expr.type != ()
    source = _loop_source(program) if backend in ("numba", "loops") else "\n".join(
        _cuda_source(t, ranks) for b in program.bindings for t in (*b.clear, *b.terms))
    return CompiledProgram(expr, backend, source, _Runner(program, make, xp), list(program.inputs), takes_out)


def _cuda_source(term: Term, ranks: dict[str, int]) -> str:
    """The CUDA of ``term``: one thread per element (a scalar's one element under a dummy index)."""
    definition = term.definition
    if not definition.indices:
        definition = Definition(definition.name, ("i0",), definition.body, definition.source)
    arguments = _canonical(term)
    return kernels.cuda_source(definition, arguments, {a: ranks[n] for a, n in zip(arguments, term.arguments,
                                                                                 strict=True)},
                               accumulate=term.accumulate)


def _canonical(term: Term) -> list[str]:
    return [f"a{k}" for k in range(len(term.arguments))]


def _numba_backend(expr: Expr) -> CompiledProgram:
    """Each binding's terms as Numba kernels of the kernel layer (compiled once per distinct
    definition, cached on disk), run in order by a Python driver."""
    return _loop_backend(expr, "numba")


def _cupy_backend(expr: Expr) -> CompiledProgram:
    """Each binding's terms as CUDA kernels (one thread per element, compiled by CuPy), buffers on the
    GPU; results come back as NumPy arrays."""
    return _loop_backend(expr, "cupy")


def _python_loops_backend(expr: Expr) -> CompiledProgram:
    """The same kernels run by the Python interpreter (no Numba): for debugging generated code.

    The functions are Numba's spellings, NumPy's on Python floats: ``recip(0)`` is inf, not a
    :class:`ZeroDivisionError`, as in the interpreter."""
    return _loop_backend(expr, "loops")


# ----------------------------------------------------------------------------- NumPy whole-array code


class _Sym:
    """A NumPy value known by the code that computes it and its shape (for printing arrays.py's translation)."""

    def __init__(self, code: str, shape: tuple[int, ...], printer: _ArrayPrinter) -> None:
        self.code, self.shape, self.printer = code, tuple(shape), printer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _binary(self, other: Any, op: str, reverse: bool = False) -> _Sym:
        o = self.printer.lift(other)
        shape = np.broadcast_shapes(self.shape, o.shape)
        a, b = (o, self) if reverse else (self, o)
        return self.printer.bind(f"{a.code} {op} {b.code}", shape)

    def __add__(self, other: Any) -> _Sym:
        return self._binary(other, "+")

    def __radd__(self, other: Any) -> _Sym:
        return self._binary(other, "+", reverse=True)

    def __sub__(self, other: Any) -> _Sym:
        return self._binary(other, "-")

    def __rsub__(self, other: Any) -> _Sym:
        return self._binary(other, "-", reverse=True)

    def __mul__(self, other: Any) -> _Sym:
        return self._binary(other, "*")

    def __rmul__(self, other: Any) -> _Sym:
        return self._binary(other, "*", reverse=True)

    def __truediv__(self, other: Any) -> _Sym:
        return self._binary(other, "/")

    def __rtruediv__(self, other: Any) -> _Sym:
        return self._binary(other, "/", reverse=True)

    def __eq__(self, other: Any) -> _Sym:  # type: ignore[override]
        return self._binary(other, "==")

    def __lt__(self, other: Any) -> _Sym:
        return self._binary(other, "<")

    def __le__(self, other: Any) -> _Sym:
        return self._binary(other, "<=")

    def __gt__(self, other: Any) -> _Sym:
        return self._binary(other, ">")

    def __ge__(self, other: Any) -> _Sym:
        return self._binary(other, ">=")

    __hash__ = None  # type: ignore[assignment]

    def reshape(self, shape: tuple[int, ...] | list[int]) -> _Sym:
        shape = list(shape)
        if -1 in shape:
            known = int(np.prod([s for s in shape if s != -1]))
            shape[shape.index(-1)] = int(np.prod(self.shape)) // max(known, 1)
        return self.printer.bind(f"{self.code}.reshape({tuple(shape)})", tuple(shape))

    def __getitem__(self, key: Any) -> _Sym:
        items = key if isinstance(key, tuple) else (key,)
        codes, shapes = [], []
        for k in items:
            if isinstance(k, _Sym):
                codes.append(k.code)
                shapes.append(k.shape)
            else:
                codes.append(str(int(k)))
        rest = self.shape[len(items):]
        shape = tuple(np.broadcast_shapes(*shapes)) + rest if shapes else rest
        return self.printer.bind(f"{self.code}[{', '.join(codes)}]", shape)


class _ArrayPrinter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = itertools.count()

    def bind(self, code: str, shape: tuple[int, ...]) -> _Sym:
        name = f"w{next(self.counter)}"
        self.lines.append(f"    {name} = {code}")
        return _Sym(name, shape, self)

    def lift(self, x: Any) -> _Sym:
        if isinstance(x, _Sym):
            return x
        if isinstance(x, (bool, np.bool_)):
            return _Sym(repr(bool(x)), (), self)
        return _Sym(repr(x) if isinstance(x, int) else f"np.float64({float(x)!r})", (), self)

    def library(self) -> _Lib:
        def call(fn: str) -> Callable[..., _Sym]:
            def apply(*args: Any) -> _Sym:
                syms = [self.lift(a) for a in args]
                return self.bind(f"{fn}({', '.join(s.code for s in syms)})",
                                 tuple(np.broadcast_shapes(*(s.shape for s in syms))))
            return apply

        def reduce_sum(x: _Sym, axis: int) -> _Sym:
            return self.bind(f"np.sum({x.code}, axis={axis})", x.shape[:axis] + x.shape[axis + 1:])

        def clip(x: _Sym, lo: int, hi: int) -> _Sym:
            return self.bind(f"np.clip({x.code}, {lo}, {hi})", x.shape)

        def arange(n: int) -> _Sym:
            return self.bind(f"np.arange({n})", (n,))

        def broadcast_to(x: Any, shape: tuple[int, ...]) -> _Sym:
            s = self.lift(x)
            return self.bind(f"np.broadcast_to({s.code}, {tuple(shape)})", tuple(shape))

        def asarray(x: Any) -> _Sym:
            return self.lift(x)

        functions = {name: call(_spelling(name, "numpy")) for name in FUNCTIONS}
        return _Lib(asarray, arange, call("np.where"), reduce_sum, clip, functions, call("np.logical_and"),
                    call("np.logical_or"), broadcast_to)


def _numpy_backend(expr: Expr) -> CompiledProgram:
    printer = _ArrayPrinter()
    lib = printer.library()
    bindings, out = bindings_of(gen_pushout(expr))
    inputs = sorted(expr.free_vars)
    env: dict[str, Any] = {}
    params = []
    for k, name in enumerate(inputs):
        ident = f"a_{k}"
        params.append(ident)
        env[name] = _Sym(ident, tuple(expr.free_vars[name]), printer)
    for name, value in bindings:
        env[name] = _value(value, env, lib)
    result = _value(out, env, lib)
    returned = _returned(result)
    body = printer.lines or ["    pass"]
    source = "\n".join([f"def kernel({', '.join(params)}):", "    with np.errstate(all='ignore'):"]
                       + ["    " + line for line in body] + [f"        return {returned}"]) + "\n"
    return CompiledProgram(expr, "numpy", source, _exec(source, "numpy", dict(_namespace("numpy"))), inputs)


def _returned(value: Any) -> str:
    if isinstance(value, tuple):
        return f"({_returned(value[0])}, {_returned(value[1])})"
    return value.code


#: backend name -> code generator
BACKENDS: dict[str, Callable[[Expr], CompiledProgram]] = {
    "numpy": _numpy_backend,
    "numba": _numba_backend,
    "cupy": _cupy_backend,
    "loops": _python_loops_backend,
}
