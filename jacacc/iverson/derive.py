"""Purely functional forward and adjoint derivatives (paper 001 §6).

Both transforms work on the tensor SSA form (:func:`~jacacc.iverson.normalize.normalize`),
where every binding is ``t = ⊞_I r`` with ``r`` one primitive over atoms, so
every coefficient a derivative needs is an atom (a read of a bound variable):
that is what keeps the derivative's cost a constant multiple of the program's.

**Forward** (the total derivative D, §6.2): each binding ``t = ⊞_I r`` gains
``dt = ⊞_I Dr`` with the Leibniz rule ``D(a·b) = Da·b + a·Db``, the chain rule
``D f(a) = f'(a)·Da`` (``exp' `` reuses ``t`` itself), ``D ⊞ = ⊞ D``,
``D Σ = Σ D``, ``D([p]·e) = [p]·De``.

**Adjoint** (§6.3), from the universal property ⟨D f·u, v⟩ = ⟨u, Dᵀf·v⟩: the
cotangent ``t̄`` of ``t = ⊞_I r`` pairs with the linearization of ``r``, a sum
over the reads ``x[ι(I, K)]`` in ``r`` (``K`` the summation indices around the
read, ``g`` its brackets, ``c`` its coefficient):

    ⟨t̄, Dr⟩ = Σ_I Σ_K [g]·t̄[I]·c·dx[ι] = ⟨⊞_J Σ_I Σ_K [g ∧ ι = J]·t̄[I]·c, dx⟩,

so ``x̄ = ⊞_J Σ_I Σ_K [g ∧ ι(I, K) = J]·t̄[I]·c`` summed over all reads of
``x`` — fan-out becomes a sum, a sum becomes a ⊞ (fan-out), and no value is
ever updated in place.  :func:`~jacacc.iverson.simplify.simplify` then
removes the sums the equalities ``ι = J`` pin (the adjoint of a convolution
becomes a correlation).  Only bindings that depend on ``wrt`` are
differentiated; unused bindings are dropped.

Examples
--------
>>> import numpy as np, jacacc.iverson as iv
>>> A = iv.var("A", (4, 4)); i = iv.index("i")
>>> print(grad(iv.sum(i, 4, A[i, i]), A))          # the gradient of trace is diag
⊞_{i<4} ⊞_{j<4} [i = j]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jacacc import ops
from jacacc.iverson._stack import Step, drive
from jacacc.iverson.check import check
from jacacc.iverson.normalize import Binding, bindings_of, let_chain, normalize, read_at
from jacacc.iverson.simplify import simplify, zero_of
from jacacc.iverson.syntax import (
    IVERSON_NAMES,
    Access,
    Add,
    Affine,
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
    Proj,
    Sum,
    Type,
    Var,
    as_expr,
    conjoin,
    fresh,
    index,
    operation_name,
    substitute_indices,
    type_text,
)

__all__ = ["IversonBuilder", "adjoint", "derivative_of_function", "forward", "grad"]


def _check_wrt(expr: Expr, wrt: Var) -> dict[str, Type]:
    free = check(expr)
    if not isinstance(wrt, Var):
        raise IvTypeError(f"wrt must be the iv.var object of an input, got {type(wrt).__name__}")
    if wrt.name in free and free[wrt.name] != wrt.type:
        raise IvTypeError(f"wrt {wrt.name!r} has type {type_text(wrt.type)} but the program reads it as "
                          f"{type_text(free[wrt.name])}")
    return free


class IversonBuilder:
    """The operation table's builder (:class:`jacacc.ops.Builder`) for Iverson expressions.

    The derivatives of :mod:`jacacc.ops` written with it are the local
    derivatives of the language's functions: sums and products are
    :class:`Add` and :class:`Mul`, constants :class:`Const`, calls
    :class:`Func` under the language's names (``reciprocal`` is ``recip``),
    ``heaviside(x)`` the bracket ``[x > 0]`` and a predicate ``[a > b]`` a data
    bracket — the language's own forms, which :func:`~jacacc.iverson.simplify.simplify`
    and the code generators treat as brackets.

    Examples
    --------
    >>> from jacacc import ops
    >>> import jacacc.iverson as iv
    >>> x = iv.var("x", (2,))
    >>> [str(p) for p in ops.partials("relu", IversonBuilder(), [x[0]], None)]
    ['[x[0] > 0]']
    >>> [str(p) for p in ops.partials("arctan", IversonBuilder(), [x[0]], None)]
    ['1 / (x[0] · x[0] + 1)']
    """

    def constant(self, value: float) -> Expr:
        return Const(value)

    def add(self, a: Expr, b: Expr) -> Expr:
        return Add(a, b)

    def multiply(self, a: Expr, b: Expr) -> Expr:
        return Mul(a, b)

    def power(self, a: Expr, exponent: float) -> Expr:
        """``a ** exponent`` with the language's operations: products for integers, ``sqrt`` for
        halves, ``exp(p · log a)`` otherwise (where ``a > 0``)."""
        if exponent < 0:
            return Func("recip", self.power(a, -exponent))
        if float(exponent).is_integer():
            out = a
            for _ in range(int(exponent) - 1):
                out = Mul(out, a)
            return out
        if exponent == 0.5:
            return Func("sqrt", a)
        return Func("exp", Mul(Const(exponent), Func("log", a)))

    def call(self, name: str, args: Sequence[Expr]) -> Expr:
        op = ops.get(name)
        if op.name == "heaviside":
            return Bracket(args[0] > 0.0, Const(1.0))
        if op.piecewise_constant and op.infix:  # a predicate: [a > b] as a data bracket
            a, b = args
            pred = Or(DataCmp("<", a, b), DataCmp(">", a, b)) if op.infix == "!=" else DataCmp(op.infix, a, b)
            return Bracket(pred, Const(1.0))
        if op.arity != 1:
            raise IvTypeError(f"the language has no function {op.name!r} of {op.arity} operands")
        return Func(IVERSON_NAMES.get(op.name, op.name), args[0])


_BUILDER = IversonBuilder()


def derivative_of_function(name: str, arg: Expr, self_read: Expr | None) -> Expr | ops.Zero:
    """``f'(arg)`` written with atoms, :data:`jacacc.ops.ZERO` for a piecewise-constant ``f``.

    The derivative is the operation table's (:mod:`jacacc.ops`), built by
    :class:`IversonBuilder`; ``self_read`` is ``f(arg)`` already computed, when
    available (``exp' `` is then ``self_read`` itself).

    Examples
    --------
    >>> import jacacc.iverson as iv
    >>> x = iv.var("x", (2,))
    >>> print(derivative_of_function("tanh", x[0], x[1]))
    1 - x[1] · x[1]
    >>> derivative_of_function("sign", x[0], None)
    ZERO
    """
    return ops.partials(operation_name(name), _BUILDER, [arg], self_read)[0]


def _scope_of(value: Expr) -> tuple[list[tuple[str, int]], Expr]:
    scope = []
    while isinstance(value, Gen):
        scope.append((value.index, value.extent))
        value = value.body
    return scope, value


def _self_read(body: Expr, var: Var, scope: list[tuple[str, int]]) -> Expr | None:
    """``t[I]`` when the binding's primitive is a black-box call (its derivative may reuse it)."""
    while isinstance(body, Bracket):
        body = body.body
    return read_at(var, scope) if isinstance(body, Func) else None


def _active(bindings: list[Binding], wrt: str) -> set[str]:
    active = {wrt}
    for name, value in bindings:
        if set(value.free_vars) & active:
            active.add(name)
    return active


# ----------------------------------------------------------------------------- forward


def forward(expr: Expr, wrt: Var, direction: Expr) -> Expr:
    """The total derivative of ``expr`` with respect to ``wrt`` applied to ``direction`` (§6.2).

    ``direction`` is an expression of ``wrt``'s type (usually another
    ``iv.var``); the result has ``expr``'s type.
    """
    _check_wrt(expr, wrt)
    direction = as_expr(direction)
    if direction.type != wrt.type:
        raise IvTypeError(f"the direction has type {type_text(direction.type)}, wrt {wrt.name!r} has "
                          f"{type_text(wrt.type)}")
    bindings, out = bindings_of(normalize(expr))
    tangent_name = fresh("d" + wrt.name)
    tangents: dict[str, Var] = {wrt.name: Var(tangent_name, wrt.type)}
    program: list[Binding] = [(tangent_name, direction)]
    for name, value in bindings:
        program.append((name, value))
        scope, body = _scope_of(value)
        var = Var(name, value.type)
        d = _tangent(body, tangents, _self_read(body, var, scope))
        if d is not None:
            dname = fresh("d" + name)
            dvalue: Expr = d
            for i, n in reversed(scope):
                dvalue = Gen(i, n, dvalue)
            program.append((dname, dvalue))
            tangents[name] = Var(dname, value.type)
    result = _tangent(out, tangents, None)
    if result is None:
        result = zero_of(expr.type)
    return simplify(let_chain(program, result))


def _tangent(e: Expr, tangents: dict[str, Var], self_read: Expr | None) -> Expr | None:
    """D e (None for a zero tangent)."""
    return drive(_tangent_step(e, tangents, self_read))


def _tangent_step(e: Expr, tangents: dict[str, Var], self_read: Expr | None) -> Step:
    # a step of :func:`~jacacc.iverson._stack.drive`: a primitive's tree of additions may be deep
    if isinstance(e, Const):
        return None
    if isinstance(e, Var):
        return tangents.get(e.name)
    if isinstance(e, Access):
        d = yield _tangent_step(e.target, tangents, None)
        return None if d is None else Access(d, e.idx)
    if isinstance(e, Add):
        da, db = (yield _tangent_step(e.a, tangents, None)), (yield _tangent_step(e.b, tangents, None))
        if da is None or db is None:
            return da if db is None else db
        return Add(da, db)
    if isinstance(e, Mul):
        da, db = (yield _tangent_step(e.a, tangents, None)), (yield _tangent_step(e.b, tangents, None))
        terms = ([Mul(da, e.b)] if da is not None else []) + ([Mul(e.a, db)] if db is not None else [])
        return None if not terms else terms[0] if len(terms) == 1 else Add(terms[0], terms[1])
    if isinstance(e, Func):
        da = yield _tangent_step(e.arg, tangents, None)
        fprime = derivative_of_function(e.name, e.arg, self_read) if da is not None else ops.ZERO
        return None if fprime is ops.ZERO else Mul(fprime, da)
    if isinstance(e, (Gen, Sum)):
        d = yield _tangent_step(e.body, tangents, self_read)
        return None if d is None else type(e)(e.index, e.extent, d)
    if isinstance(e, Bracket):
        d = yield _tangent_step(e.body, tangents, self_read)
        return None if d is None else Bracket(e.pred, d)
    if isinstance(e, Pair):
        da, db = (yield _tangent_step(e.a, tangents, None)), (yield _tangent_step(e.b, tangents, None))
        if da is None and db is None:
            return None
        return Pair(da if da is not None else zero_of(e.a.type), db if db is not None else zero_of(e.b.type))
    if isinstance(e, Proj):
        d = yield _tangent_step(e.arg, tangents, None)
        return None if d is None else Proj(e.which, d)
    raise AssertionError(f"not in tensor SSA form: {type(e).__name__}")  # pragma: no cover


# ----------------------------------------------------------------------------- adjoint


@dataclass(frozen=True)
class _Read:
    """One read ``x[ι]`` inside a primitive: where, under which sums and brackets, times what."""

    var: str
    idx: tuple[Affine, ...]
    sums: tuple[tuple[str, int], ...]
    guards: tuple[Pred, ...]
    coeff: Expr | None


def _reads(e: Expr, active: set[str], sums: tuple, guards: tuple, coeff: Expr | None,
           self_read: Expr | None) -> list[_Read]:
    """The linearization of ``e`` as a list of reads of active variables with their coefficients."""
    out: list[_Read] = []
    drive(_reads_step(e, active, sums, guards, coeff, self_read, out))
    return out


def _reads_step(e: Expr, active: set[str], sums: tuple, guards: tuple, coeff: Expr | None,
                self_read: Expr | None, out: list[_Read]) -> Step:
    # a step of :func:`~jacacc.iverson._stack.drive`: a primitive's tree of additions may be deep
    if isinstance(e, Const):
        return
    if isinstance(e, (Var, Access)):
        idx: list[Affine] = []
        target = e
        while isinstance(target, Access):
            idx.append(target.idx)
            target = target.target
        if isinstance(target, Var) and target.name in active:
            out.append(_Read(target.name, tuple(reversed(idx)), sums, guards, coeff))
        return
    if isinstance(e, Add):
        yield _reads_step(e.a, active, sums, guards, coeff, None, out)
        yield _reads_step(e.b, active, sums, guards, coeff, None, out)
        return
    if isinstance(e, Mul):
        yield _reads_step(e.a, active, sums, guards, _scaled(coeff, e.b), None, out)
        yield _reads_step(e.b, active, sums, guards, _scaled(coeff, e.a), None, out)
        return
    if isinstance(e, Func):
        fprime = derivative_of_function(e.name, e.arg, self_read)
        if fprime is not ops.ZERO:  # a piecewise-constant function passes no derivative on
            yield _reads_step(e.arg, active, sums, guards, _scaled(coeff, fprime), None, out)
        return
    if isinstance(e, Sum):
        yield _reads_step(e.body, active, sums + ((e.index, e.extent),), guards, coeff, None, out)
        return
    if isinstance(e, Bracket):
        yield _reads_step(e.body, active, sums, guards + (e.pred,), coeff, self_read, out)
        return
    raise AssertionError(f"not in tensor SSA form: {type(e).__name__}")  # pragma: no cover


def _scaled(coeff: Expr | None, factor: Expr) -> Expr:
    return factor if coeff is None else Mul(coeff, factor)


def _contribution(read: _Read, scope: list[tuple[str, int]], cotangent: Expr,
                  out_indices: list[str]) -> Expr:
    """``Σ_I Σ_K [g ∧ ι = J]·t̄[I]·c`` for one read, with ``J`` = ``out_indices`` left free."""
    equalities: list[Pred] = [Cmp("==", a, index(j)) for a, j in zip(read.idx, out_indices, strict=True)]
    term: Expr = cotangent if read.coeff is None else Mul(cotangent, read.coeff)
    preds = list(read.guards) + equalities
    body: Expr = Bracket(conjoin(preds), term) if preds else term
    for name, n in reversed(list(scope) + list(read.sums)):
        body = Sum(name, n, body)
    return body


def _rename_apart(value: Expr, taken: set[str]) -> Expr:
    """Rename the gen indices of a binding so they do not clash with the adjoint's ``J`` indices."""
    scope, body = _scope_of(value)
    mapping = {i: index(fresh(i)) for i, _ in scope if i in taken}
    if not mapping:
        return value
    body = substitute_indices(body, mapping)
    for i, n in reversed(scope):
        body = Gen(mapping[i].variable if i in mapping else i, n, body)
    return body


def adjoint(expr: Expr, wrt: Var, cotangent: Expr) -> Expr:
    """The adjoint derivative of ``expr`` with respect to ``wrt`` applied to ``cotangent`` (§6.3).

    ``cotangent`` is an expression of ``expr``'s type (usually another
    ``iv.var``); the result has ``wrt``'s type.
    """
    _check_wrt(expr, wrt)
    cotangent = as_expr(cotangent)
    if cotangent.type != expr.type:
        raise IvTypeError(f"the cotangent has type {type_text(cotangent.type)}, the program's output has "
                          f"{type_text(expr.type)}")
    bindings, out = bindings_of(normalize(expr))
    active = _active(bindings, wrt.name)
    program: list[Binding] = list(bindings)
    pending: dict[str, list[Expr]] = {}  # variable -> contributions (scalar bodies over its J indices)
    out_indices: dict[str, list[str]] = {}

    def indices_of(name: str, t: Type) -> list[str]:
        if name not in out_indices:
            assert not isinstance(t, PairType)
            out_indices[name] = [fresh("j") for _ in t]
        return out_indices[name]

    def propagate(body: Expr, scope: list[tuple[str, int]], ct: Expr, self_read: Expr | None) -> None:
        for read in _reads(body, active, (), (), None, self_read):
            t = types[read.var]
            pending.setdefault(read.var, []).append(_contribution(read, scope, ct, indices_of(read.var, t)))

    types: dict[str, Type] = {wrt.name: wrt.type, **{n: v.type for n, v in bindings}}
    ct_name = fresh("ct")
    program.append((ct_name, cotangent))
    seeds = _output_parts(out, Var(ct_name, cotangent.type))
    for part, ct in seeds:
        scope = [(fresh("i"), n) for n in part.type]  # a tensor output is read entry by entry
        propagate(read_at(part, scope), scope, read_at(ct, scope), None)
    for name, value in reversed(bindings):
        if name not in active or name not in pending:
            continue
        bar = _accumulate(name, types[name], pending.pop(name), indices_of(name, types[name]))
        program.append((bar.name, bar.value))
        value = _rename_apart(value, set(out_indices.get(name, [])))
        scope, body = _scope_of(value)
        var = Var(name, value.type)
        propagate(body, scope, read_at(Var(bar.name, value.type), scope), _self_read(body, var, scope))
    if wrt.name in pending:
        result = _accumulate(wrt.name, wrt.type, pending.pop(wrt.name), indices_of(wrt.name, wrt.type))
        program.append((result.name, result.value))
        final: Expr = Var(result.name, wrt.type)
    else:
        final = zero_of(wrt.type)
    return simplify(let_chain(program, final))


@dataclass(frozen=True)
class _Bar:
    name: str
    value: Expr


def _accumulate(name: str, t: Type, contributions: list[Expr], js: list[str]) -> _Bar:
    """``x̄ = ⊞_J (c₁ + c₂ + …)``: the contributions of all reads of ``x`` (fan-out becomes a sum)."""
    total = contributions[0]
    for c in contributions[1:]:
        total = Add(total, c)
    value: Expr = total
    for j, n in reversed(list(zip(js, t, strict=True))):
        value = Gen(j, n, value)
    return _Bar(fresh("d" + name), value)


def _output_parts(out: Expr, ct: Expr) -> list[tuple[Expr, Expr]]:
    """Pairs (output atom, its cotangent), splitting an output tuple."""
    if isinstance(out, Pair):
        return _output_parts(out.a, Proj(0, ct)) + _output_parts(out.b, Proj(1, ct))
    return [(out, ct)]


def grad(expr: Expr, wrt: Var) -> Expr:
    """The gradient of a scalar program with respect to ``wrt``: ``adjoint(expr, wrt, 1)``."""
    _check_wrt(expr, wrt)
    if expr.type != ():
        raise IvTypeError(f"grad needs a scalar program; this one has type {type_text(expr.type)} "
                          "(use iv.adjoint with a cotangent)")
    return adjoint(expr, wrt, Const(1.0))

