"""Code generation for the tensor language: Numba loop nests and vectorized NumPy (paper 001 §4.3's model made real).

:func:`compile` brings a program to gen push-out form (lets at the top, every
⊞ outermost in its binding; :mod:`~jacacc.iverson.normalize`) and prints it
as Python source, registered with :mod:`linecache` so tracebacks show it:

``"numba"``
    loop nests compiled with ``numba.njit``.  Brackets are compiled into the
    loops instead of being tested at every point: an index comparison whose
    innermost index is a loop variable narrows that loop (``a·i + r ≥ 0``
    becomes a bound by floor / ceiling division) or replaces it by a single
    value (``a·i + r = 0``: ``i = −r / a`` when ``a`` divides ``r``), and is
    otherwise tested as early as its indices are known.  A ⊞ whose body is a
    sum of bracketed terms fills its zero-initialized output term by term,
    each over its own support — so the gradient of trace ``⊞_i ⊞_j [i = j]``
    runs in O(n), as §4.3's cost model counts it.  Sums accumulate in
    the interpreter's order (bit-for-bit the same sums); data comparisons are
    evaluated after the index comparisons of their bracket (they may read
    what those guard).
``"numpy"``
    whole-array code: the program's :mod:`~jacacc.iverson.arrays` translation
    printed as straight-line NumPy statements (index grids, gathers,
    ``np.where``, ``np.sum`` over an axis) — vectorized, dense.

Both take the program's inputs as keyword arrays (extra ones ignored) and
return what :func:`~jacacc.iverson.interpret.evaluate` returns.  Generated
expressions never nest more than :data:`MAX_NESTING` operations: deeper ones
are split into named intermediates (``t3 = …``), so deep programs compile.

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
from collections.abc import Callable
from typing import Any

import numpy as np

from jacacc import kernels
from jacacc.errors import RegistryError, require_extra
from jacacc.iverson._stack import Step, drive
from jacacc.iverson.arrays import _Lib, _value
from jacacc.iverson.check import check
from jacacc.iverson.interpret import bind_arrays
from jacacc.iverson.normalize import _pushout, bindings_of, gen_pushout
from jacacc.iverson.syntax import (
    FUNCTIONS,
    Access,
    Add,
    Affine,
    And,
    BoolConst,
    Bracket,
    Cmp,
    Const,
    DataCmp,
    Expr,
    Func,
    Gen,
    IvTypeError,
    Mul,
    Or,
    Pair,
    PairType,
    Pred,
    Sum,
    Var,
    conjoin,
    conjuncts,
    fresh,
    has_data_atoms,
    index,
    index_part,
    operation_name,
    unshadowed,
)

__all__ = ["BACKENDS", "CompiledProgram", "compile"]

_CACHE: dict[tuple, CompiledProgram] = {}
#: operations nested in one generated expression before an intermediate is named
MAX_NESTING = 16


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
                return self.kernel(*args, buffer)
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


def _identifier(prefix: str, counter: itertools.count) -> str:
    return f"{prefix}{next(counter)}"


# ----------------------------------------------------------------------------- Numba loop nests


class _LoopPrinter:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self.counter = itertools.count()
        self.vars: dict[str, str] = {}
        self.indices: dict[str, str] = {}

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def temp(self, prefix: str = "t") -> str:
        return _identifier(prefix, self.counter)

    # --- index expressions and predicates
    def affine(self, a: Affine) -> str:
        parts = [str(a.const)] if a.const or not a.coeffs else []
        for name, c in a.coeffs:
            parts.append(f"{c} * {self.indices[name]}" if c != 1 else self.indices[name])
        return " + ".join(parts) if parts else "0"

    def predicate(self, p: Pred) -> str:
        if isinstance(p, Cmp):
            op = {"==": "==", "<": "<", "<=": "<=", ">": ">", ">=": ">="}[p.op]
            return f"({self.affine(p.lhs)} {op} {self.affine(p.rhs)})"
        if isinstance(p, DataCmp):
            return f"({self.scalar(p.lhs)} {p.op} {self.scalar(p.rhs)})"
        if isinstance(p, And):
            return f"({self.predicate(p.a)} and {self.predicate(p.b)})"
        if isinstance(p, Or):
            return f"({self.predicate(p.a)} or {self.predicate(p.b)})"
        assert isinstance(p, BoolConst)
        return "True" if p.value else "False"

    # --- loops narrowed by the comparisons of a conjunction
    def loops(self, scope: list[tuple[str, int]], atoms: list[Cmp], rest: Pred | None,
              body: Callable[[], None]) -> None:
        """Emit loops over ``scope`` where every comparison of ``atoms`` holds (narrowing each loop by
        the comparisons whose innermost index it is), then test ``rest`` and run ``body``."""
        opened = 0
        position = {name: k for k, (name, _) in enumerate(scope)}
        outer = [c for c in atoms if _innermost(c, position) == -1]  # only enclosing indices: test first
        pending = [c for c in atoms if _innermost(c, position) != -1]
        if outer:
            self.emit(f"if {' and '.join(self.predicate(c) for c in outer)}:")
            self.depth += 1
            opened += 1
        for k, (name, extent) in enumerate(scope):
            ident = self.temp("i")
            self.indices[name] = ident
            mine = [c for c in pending if _innermost(c, position) == k]
            pending = [c for c in pending if c not in mine]
            equalities = [c for c in mine if c.normal()[0] == "==" and c.normal()[1].coeff(name) != 0]
            lo, hi = "0", str(extent - 1)
            checks: list[str] = []
            if equalities:
                rel, a = equalities[0].normal()
                coeff = a.coeff(name)
                r = self.temp("r")
                self.emit(f"{r} = {self.affine(a.without(name))}")
                if abs(coeff) != 1:
                    self.emit(f"if (-{r}) % {coeff} == 0:")
                    self.depth += 1
                    opened += 1
                self.emit(f"{ident} = (-{r}) // {coeff}")
                checks.append(f"0 <= {ident} <= {extent - 1}")
                checks += [self.predicate(c) for c in mine if c is not equalities[0]]
            else:
                for c in mine:
                    rel, a = c.normal()
                    coeff = a.coeff(name)
                    if rel == "==" or coeff == 0:
                        checks.append(self.predicate(c))
                        continue
                    rest_code = self.affine(a.without(name))
                    if coeff > 0:  # coeff·i + r ≥ 0  ⇒  i ≥ ⌈-r / coeff⌉ = -(r // coeff)
                        lo = f"max({lo}, -(({rest_code}) // {coeff}))"
                    else:  # i ≤ ⌊r / |coeff|⌋
                        hi = f"min({hi}, ({rest_code}) // {-coeff})"
                self.emit(f"for {ident} in range({lo}, ({hi}) + 1):")
                self.depth += 1
                opened += 1
            if checks:
                self.emit(f"if {' and '.join(checks)}:")
                self.depth += 1
                opened += 1
        assert not pending, "every comparison is tested at its innermost index"
        if rest is not None:
            self.guarded(rest, body)
        else:
            body()
        self.depth -= opened

    def guarded(self, p: Pred, body: Callable[[], None]) -> None:
        """``if p: body`` with the index comparisons tested before any data is read."""
        part = index_part(p)
        opened = 0
        if not (isinstance(part, BoolConst) and part.value):
            self.emit(f"if {self.predicate(part)}:")
            self.depth += 1
            opened += 1
        if has_data_atoms(p):
            self.emit(f"if {self.predicate(p)}:")
            self.depth += 1
            opened += 1
        body()
        self.depth -= opened

    # --- scalars
    def scalar(self, e: Expr) -> str:
        """Code for the scalar ``e``; intermediates are named (``t3 = …``) once the expression
        nests :data:`MAX_NESTING` operations deep (Python's parser refuses deeply nested
        parentheses, and a 1000-step program must still compile)."""
        return drive(self._scalar(e))[0]

    def _scalar(self, e: Expr) -> Step:
        """(code, nesting depth) of ``e``; a step of :func:`~jacacc.iverson._stack.drive`."""
        if isinstance(e, Const):
            return repr(e.value), 0
        if isinstance(e, Var):
            return self.vars[e.name], 0
        if isinstance(e, Access):
            indices = []
            target: Expr = e
            while isinstance(target, Access):
                indices.append(self.affine(target.idx))
                target = target.target
            assert isinstance(target, Var), "gen push-out leaves reads of variables only"
            return f"{self.vars[target.name]}[{', '.join(reversed(indices))}]", 0
        if isinstance(e, (Add, Mul)):
            a, da = yield self._scalar(e.a)
            b, db = yield self._scalar(e.b)
            return self.named(f"({a} {'+' if isinstance(e, Add) else '*'} {b})", 1 + max(da, db))
        if isinstance(e, Func):
            arg, depth = yield self._scalar(e.arg)
            spelling = _spelling(e.name, "numba")
            if spelling.count("{0}") > 1 and not arg.isidentifier():
                # a template that reads its operand more than once (relu's NaN test): compute it once
                name = self.temp("t")
                self.emit(f"{name} = {arg}")
                arg, depth = name, 0
            return self.named(kernels.call_text(spelling, [arg]), depth + 1)
        if isinstance(e, Bracket):
            out = self.temp("b")
            self.emit(f"{out} = 0.0")
            atoms, rest = _split_conjunction(e.pred)
            self.guarded(conjoin(atoms + ([rest] if rest is not None else [])),
                         lambda: self.emit(f"{out} = {self.scalar(e.body)}"))
            return out, 0
        if isinstance(e, Sum):
            scope, inner = _peel_sums(e)
            atoms, rest = ([], None)
            if isinstance(inner, Bracket):
                atoms, rest = _split_conjunction(inner.pred)
                inner = inner.body
            acc = self.temp("s")
            self.emit(f"{acc} = 0.0")
            saved = dict(self.indices)
            self.loops(scope, atoms, rest, lambda: self.emit(f"{acc} += {self.scalar(inner)}"))
            self.indices = saved
            return acc, 0
        raise AssertionError(f"not in gen push-out form: {type(e).__name__}")  # pragma: no cover

    def named(self, code: str, depth: int) -> tuple[str, int]:
        """``code`` itself, or a temporary holding it once it nests too deep."""
        if depth < MAX_NESTING:
            return code, depth
        name = self.temp("t")
        self.emit(f"{name} = {code}")
        return name, 0

    # --- bindings
    def binding(self, target: str, value: Expr, preallocated: bool = False) -> None:
        scope: list[tuple[str, int]] = []
        body = value
        while isinstance(body, Gen):
            body = _peel(body, scope)
        while body.type != ():  # a whole tensor under ⊞: entry by entry
            name = fresh("i")
            scope.append((name, body.type[0]))
            body = _pushout(Access(body, index(name)))
        if not scope:
            self.emit(f"{target} = {self.scalar(body)}")
            return
        if not preallocated:
            shape = ", ".join(str(n) for _, n in scope)
            self.emit(f"{target} = np.zeros(({shape},))")
        terms = _addends(body) if _has_bracket_addend(body) else [body]
        op = "=" if len(terms) == 1 else "+="
        if preallocated and (len(terms) > 1 or any(_has_data_guard(t) for t in terms)):
            # ``out`` holds an earlier result: clear the supports first (terms accumulate, and a
            # data bracket may now be false where it held)
            for term in terms:
                self.fill(target, scope, term, lambda _term: "0.0", "=", clear=True)
        for term in terms:
            self.fill(target, scope, term, self.scalar, op)

    def fill(self, target: str, scope: list[tuple[str, int]], term: Expr, value: Callable[[Expr], str],
             op: str, clear: bool = False) -> None:
        """``target[I] op value(term)`` over the support of ``term``'s bracket (with ``clear``: over
        the support its index comparisons allow, reading no data)."""
        saved = dict(self.indices)
        atoms: list[Cmp] = []
        rest: Pred | None = None
        if isinstance(term, Bracket):
            atoms, rest = _split_conjunction(term.pred)
            term = term.body
        if clear and rest is not None:
            part = index_part(rest)
            rest = None if isinstance(part, BoolConst) and part.value else part

        def store() -> None:
            at = ", ".join(self.indices[name] for name, _ in scope)
            self.emit(f"{target}[{at}] {op} {value(term)}")

        self.loops(scope, atoms, rest, store)
        self.indices = saved


def _innermost(c: Cmp, position: dict[str, int]) -> int:
    names = c.lhs.names | c.rhs.names
    inside = [position[n] for n in names if n in position]
    return max(inside) if inside else -1


def _split_conjunction(p: Pred) -> tuple[list[Cmp], Pred | None]:
    """The index comparisons of ``p``'s top-level conjunction, and what is left (None if nothing)."""
    atoms = conjuncts(p)
    rest = [q for q in atoms if not isinstance(q, Cmp)]
    return [q for q in atoms if isinstance(q, Cmp)], (conjoin(rest) if rest else None)


def _peel(e: Gen | Sum, scope: list[tuple[str, int]]) -> Expr:
    """Append ``e``'s binder to ``scope`` (renamed if it shadows one there) and return its body."""
    name, body = unshadowed(e, {n for n, _ in scope})
    scope.append((name, e.extent))
    return body


def _peel_sums(e: Expr) -> tuple[list[tuple[str, int]], Expr]:
    scope: list[tuple[str, int]] = []
    while isinstance(e, Sum):
        e = _peel(e, scope)
    return scope, e


def _addends(e: Expr) -> list[Expr]:
    """The terms of a tree of additions, left to right (no recursion: the tree may be deep)."""
    out: list[Expr] = []
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, Add):
            stack += [node.b, node.a]
        else:
            out.append(node)
    return out


def _has_data_guard(e: Expr) -> bool:
    return isinstance(e, Bracket) and has_data_atoms(e.pred)


def _has_bracket_addend(e: Expr) -> bool:
    return isinstance(e, Add) and any(isinstance(t, Bracket) for t in _addends(e))


def _numba_backend(expr: Expr) -> CompiledProgram:
    """The loop nest jitted by Numba: imported from a file of the kernel layer's cache directory
    with ``cache=True`` (:func:`jacacc.kernels.cached_module`), so a later process loads the
    machine code; run from memory and compiled where there is no writable directory."""
    numba = require_extra("numba", "numba")
    source, inputs, takes_out = _loop_source(expr)
    namespace = _namespace("numba")
    imports = "".join(f"import {module.__name__} as {name}\n" for name, module in sorted(namespace.items()))
    module = kernels.cached_module(f"# generated by jacacc.iverson (numba backend)\n{imports}\n{source}")
    if module is not None:
        kernel = numba.njit(error_model="numpy", cache=True)(module.kernel)
    else:
        kernel = numba.njit(error_model="numpy")(_exec(source, "numba", dict(namespace)))
    return CompiledProgram(expr, "numba", source, kernel, inputs, takes_out)


def _python_loops_backend(expr: Expr) -> CompiledProgram:
    """The loop source run by the Python interpreter (no Numba): for debugging generated code.

    The functions are Numba's spellings, NumPy's on Python floats: ``recip(0)`` is inf, not a
    :class:`ZeroDivisionError`, as in the interpreter."""
    source, inputs, takes_out = _loop_source(expr)
    return CompiledProgram(expr, "loops", source, _exec(source, "loops", dict(_namespace("numba"))), inputs, takes_out)


def _loop_source(expr: Expr) -> tuple[str, list[str], bool]:
    """The kernel's source, its inputs, and whether it writes a tensor result into an ``out`` argument."""
    bindings, out = bindings_of(gen_pushout(expr))
    inputs = sorted(expr.free_vars)
    printer = _LoopPrinter()
    for name in inputs:
        printer.vars[name] = f"a_{len(printer.vars)}"
    params = [printer.vars[n] for n in inputs]
    takes_out = not isinstance(expr.type, PairType) and expr.type != ()
    if takes_out:
        params.append("out")
    for k, (name, value) in enumerate(bindings):
        # the result's own binding is computed in place into ``out``
        last = takes_out and k == len(bindings) - 1 and isinstance(out, Var) and out.name == name
        ident = "out" if last else printer.temp("v")
        printer.binding(ident, value, preallocated=last)
        printer.vars[name] = ident
    if takes_out and not isinstance(out, Var):
        printer.binding("out", out, preallocated=True)
    elif takes_out and printer.vars[out.name] != "out":  # an input or an earlier binding: copy it
        printer.emit(f"out[...] = {printer.vars[out.name]}")
    result = "out" if takes_out else _emit_output(printer, out)
    printer.emit(f"return {result}")
    header = f"def kernel({', '.join(params)}):"
    return "\n".join([header] + printer.lines) + "\n", inputs, takes_out


def _emit_output(printer: _LoopPrinter, out: Expr) -> str:
    if isinstance(out, Pair):
        return f"({_emit_output(printer, out.a)}, {_emit_output(printer, out.b)})"
    if isinstance(out, Var):
        return printer.vars[out.name]
    ident = printer.temp("out")
    printer.binding(ident, out)
    return ident


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
    "loops": _python_loops_backend,
}
