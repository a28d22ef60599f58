"""Gather-form derivatives of elementwise definitions (paper 000 §5, Algorithm 4).

For ``f[α] = f̄(…, x[A·α + b], …)`` and a cotangent ``df``,
``dx[β] = Σ_{α : A·α + b = β} df[α] · ∂f̄/∂x[A·α + b]``.  Each read of ``x``
(an *occurrence*; an argument read under several maps has several) gives one
term.  Sums and brackets on the way from the root to the read add their
indices and constraints to α (§5.2: the sum symbol is removed and its index
appended to α), and the integer system ``A·α = β − b`` (with the
equalities of enclosing brackets and divisibility auxiliaries) is solved by
the Smith normal form ``S = U·M·V`` (§4.1): it is solvable iff the rows of
``U·(β − b)`` past the rank vanish (the cokernel condition, a bracket
``[… == 0]``) and each elementary divisor ``s_r`` divides its row (a bracket
``[… % s_r == 0]``, after which ``⌊…/s_r⌋`` is exact), and then
``α = I·β + K·z``.  The kernel basis is brought to echelon form so that an
index left free by the read keeps its name (``sum(j, …)``) and the particular
solution is zero where a kernel column has a unit pivot (so ``i = dd0 − z``,
``k = z`` in §6).  The ranges of ``z`` are Fourier–Motzkin bounds of the
context's constraints (§4.2, eq. 45); constraints without ``z`` become
brackets.  The result is again a definition of the language, so it can be
derived again (§5.3).

Examples
--------
>>> from jacacc.elementwise.parse import parse
>>> d = parse("f[i, j] = exp(x[i + j])")
>>> print(derivative(d, "x", {"i": 3, "j": 4}))
dx[dx0] = sum(z, max(0, dx0 - 2), min(3, dx0), df[dx0 - z, z] * exp(x[dx0]))
>>> print(derivative(d, "x", {"i": 3, "j": 4}, shape=(6,)))
dx[dx0] = exp(x[dx0]) * sum(z, max(0, dx0 - 2), min(3, dx0), df[dx0 - z, z])

A factor moves out of the sums it does not depend on (loop-invariant code motion), but only
out of sums that are never empty: for ``dx0 ≥ 6`` the sum above is empty and ``x[dx0]`` would
be read where ``f`` reads nothing; with the shape of ``x`` known that cannot happen.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from jacacc import ops
from jacacc.elementwise.parse import FUNCTIONS, SourceError
from jacacc.elementwise.system import Context, interval
from jacacc.intlin import Form, NestedBounds, nested_bounds, shadow_empty, smith_normal_form
from jacacc.kernels.ir import (
    CHILDREN,
    OPERANDS,
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
    expression_text,
    free_indices,
    fresh_name,
    names_in,
    rebuild,
    rename_binders,
    substitute,
    walk,
)

__all__ = ["ElementwiseBuilder", "Occurrence", "Pointwise", "Recall", "cotangent_name", "derivative", "occurrences",
           "pointwise_key", "pointwise_values", "recall_inside", "stored_values"]


def cotangent_name(function: str) -> str:
    """The cotangent of ``f`` is ``df``."""
    return "d" + function


@dataclass(frozen=True)
class Occurrence:
    """One read of the argument: the read, ``∂f̄/∂read`` as a product of ``factors`` and its context."""

    read: Read
    factors: tuple[Node, ...]
    context: Context


# ----------------------------------------------------------------------------- the chain rule (§2)


def split_product(factors: list[Node]) -> tuple[float, list[Node]]:
    """The numeric coefficient and the other factors of ``Π factors`` (nested products and unary
    minuses opened)."""
    flat: list[Node] = []
    coefficient = 1.0
    stack = list(reversed(factors))
    while stack:
        f = stack.pop()
        if isinstance(f, Binary) and f.op == "*":
            stack += [f.right, f.left]
        elif isinstance(f, Number):
            coefficient *= f.value
        elif isinstance(f, Unary):
            coefficient = -coefficient
            stack.append(f.operand)
        else:
            flat.append(f)
    return coefficient, flat


def product(factors: list[Node]) -> Node:
    """``Π factors`` with the numbers folded into one leading coefficient (none for 1, a unary
    minus for −1) and nested products flattened."""
    coefficient, flat = split_product(factors)
    if coefficient == 0.0 or not flat:
        return Number(0, coefficient)
    # left-associated, the coefficient first: prints as c * f1 * f2 without parentheses (a long
    # product, the derivative of a product of many factors, halved by chain: bounded depth)
    first = flat[0] if coefficient == 1.0 else Unary(0, flat[0]) if coefficient == -1.0 else \
        Binary(0, "*", Number(0, coefficient), flat[0])
    return chain([("*", first), *(("*", f) for f in flat[1:])])


class ElementwiseBuilder:
    """The operation table's builder (:class:`jacacc.ops.Builder`) for elementwise source nodes.

    The derivatives of :mod:`jacacc.ops` written with it are the local derivatives of the
    language's operations, in the forms one writes by hand: ``a + -b`` is ``a - b``, ``-1 · b``
    is ``-b``, ``a · b**-1`` is ``a / b``.  The language compares data only through
    ``heaviside`` (its brackets are on indices), so a predicate is written with it:
    ``[a > b] = heaviside(a - b)``, ``[a ≥ b] = 1 - heaviside(b - a)``.

    Examples
    --------
    >>> from jacacc import ops
    >>> from jacacc.elementwise.parse import parse
    >>> x = parse("f[i] = x[i]").body
    >>> [expression_text(p) for p in ops.partials("arctan", ElementwiseBuilder(), [x], None)]
    ['1 / (x[i]**2 + 1)']
    """

    def constant(self, value: float) -> Node:
        return Number(0, value)

    def add(self, a: Node, b: Node) -> Node:
        if isinstance(b, Unary):
            return Binary(0, "-", a, b.operand)
        if isinstance(b, Number) and b.value < 0:
            return Binary(0, "-", a, Number(0, -b.value))
        return Binary(0, "+", a, b)

    def multiply(self, a: Node, b: Node) -> Node:
        if isinstance(a, Number) and a.value == -1.0:
            return Unary(0, b)
        if isinstance(a, Unary):  # the sign outside: -(l / r / r), not -(l / r) / r
            return Unary(0, self.multiply(a.operand, b))
        if isinstance(b, Binary) and b.op == "/" and isinstance(b.left, Number) and b.left.value == 1.0:
            return Binary(0, "/", a, b.right)
        return Binary(0, "*", a, b)

    def power(self, a: Node, exponent: float) -> Node:
        return Binary(0, "/", Number(0, 1.0), a) if exponent == -1.0 else Power(0, a, exponent)

    def call(self, name: str, args: Sequence[Node]) -> Node:
        op = ops.get(name)
        if op.piecewise_constant and op.infix:
            return _predicate(op.name, *args, self)
        if op.name not in FUNCTIONS:
            raise SourceError(f"the derivative needs {op.name}, which is not a function of the language")
        return Call(0, op.name, args[0])


def _predicate(name: str, a: Node, b: Node, builder: ElementwiseBuilder) -> Node:
    """The data predicate ``[a ◦ b]`` (``name`` gt, ge, lt, le, eq, ne) with ``heaviside``."""

    def positive(u: Node, v: Node) -> Node:  # [u > v]
        if isinstance(v, Number) and v.value == 0.0:
            return Call(0, "heaviside", u)
        if isinstance(u, Number) and u.value == 0.0:
            return Call(0, "heaviside", Unary(0, v))
        return Call(0, "heaviside", Binary(0, "-", u, v))

    def complement(u: Node) -> Node:  # 1 - u
        return Binary(0, "-", Number(0, 1.0), u)

    return {
        "gt": lambda: positive(a, b),
        "lt": lambda: positive(b, a),
        "ge": lambda: complement(positive(b, a)),
        "le": lambda: complement(positive(a, b)),
        "eq": lambda: complement(builder.add(positive(a, b), positive(b, a))),
        "ne": lambda: builder.add(positive(a, b), positive(b, a)),
    }[name]()


_BUILDER = ElementwiseBuilder()
#: the table's name of each arithmetic operator of the language
_ARITHMETIC = {"+": "add", "-": "sub", "*": "mul", "/": "div"}


def _locals(node: Node) -> dict[str, Node | None | ops.Zero]:
    """``∂node/∂child`` for each operand field of ``node``: an expression of the node's operands and
    of the node itself (``exp' = exp``), None for 1, :data:`jacacc.ops.ZERO` for 0.  The
    derivatives are the operation table's (:mod:`jacacc.ops`)."""
    if isinstance(node, (Summation, Guard)):
        return {"body": None}
    if isinstance(node, Unary):
        name, fields, args = "neg", ("operand",), [node.operand]
    elif isinstance(node, Binary):
        name, fields, args = _ARITHMETIC[node.op], ("left", "right"), [node.left, node.right]
    elif isinstance(node, Power):  # a constant exponent: its partial is not wanted
        name, fields, args = "pow", ("base",), [node.base, node.exponent]
    elif isinstance(node, Call):
        name, fields, args = node.function, ("argument",), [node.argument]
    else:  # pragma: no cover - every node with operands is above
        raise TypeError(f"no local derivative of {type(node).__name__}")
    partials = ops.partials(name, _BUILDER, args, node)[:len(fields)]
    return {f: None if isinstance(p, Number) and p.value == 1.0 else p
            for f, p in zip(fields, partials, strict=True)}


def occurrences(body: Node, argument: str, context: Context) -> Iterator[Occurrence]:
    """Every read of ``argument`` in ``body`` with ``∂body/∂read`` along its path (the product of
    the local derivatives, reverse mode as in paper 000 §2) and the context of the read."""

    def visit(node: Node, factors: tuple[Node, ...], ctx: Context) -> Iterator[Occurrence]:
        if isinstance(node, Read):
            if node.argument == argument:
                yield Occurrence(node, factors, ctx)
            return
        if isinstance(node, Number):
            return
        inner = ctx.inside(node)
        for child, local in _locals(node).items():
            sub = getattr(node, child)
            if local is ops.ZERO or isinstance(sub, Number):  # no derivative passes (sign, a constant)
                continue
            yield from visit(sub, factors if local is None else (*factors, local), inner)

    yield from visit(body, (), context)


# ----------------------------------------------------------------------------- one term (§5.1, Algorithm 4)


def _combine(rows: list[Affine], matrix_row: list[int]) -> Affine:
    total = Affine.make({}, 0)
    for c, a in zip(matrix_row, rows, strict=True):
        if c:
            total = total + a.scale(c)
    return total


def _echelon(kernel: list[list[int]], particular: list[Affine]) -> tuple[list[list[int]], list[int], list[Affine]]:
    """Unimodular column operations on the kernel basis (columns of ``kernel``, one row per
    variable) giving a reduced echelon form from the last variable up, with positive pivots; the
    particular solution is moved along unit-pivot columns to vanish at their pivots.  Returns the
    columns, their pivot rows and the particular solution."""
    n = len(kernel)
    cols = [[kernel[r][t] for r in range(n)] for t in range(len(kernel[0]) if kernel else 0)]
    if len(cols) == 1 and any(abs(x) == 1 for x in cols[0]):
        # one direction: pivot at the last unit entry, so that index is the kernel factor itself
        # (x[4i + j] gives i = z, j = β - 4z, as paper 000's introduction writes it)
        col = cols[0]
        p = max(r for r in range(n) if abs(col[r]) == 1)
        col = [x * col[p] for x in col]
        x0 = [x - particular[p].scale(col[r]) for r, x in enumerate(particular)]
        return [col], [p], x0
    done: list[tuple[int, list[int]]] = []
    remaining = cols
    for p in reversed(range(n)):
        active = [c for c in remaining if c[p]]
        if not active:
            continue
        while len(active) > 1:  # Euclid on the entries at row p
            active.sort(key=lambda c: abs(c[p]))
            pivot = active[0]
            for c in active[1:]:
                q = c[p] // pivot[p]
                for r in range(n):
                    c[r] -= q * pivot[r]
            active = [c for c in active if c[p]]
        pivot = active[0]
        if pivot[p] < 0:
            pivot[:] = [-x for x in pivot]
        remaining = [c for c in remaining if c is not pivot]
        for _, c in done:  # reduce the columns with later pivots at this row
            q = c[p] // pivot[p]
            for r in range(n):
                c[r] -= q * pivot[r]
        done.append((p, pivot))
    done.reverse()  # pivot rows ascending: outer loops first
    x0 = list(particular)
    for p, col in done:
        if col[p] == 1 and (x0[p].coeffs or x0[p].const):
            shift = x0[p]
            x0 = [x - shift.scale(col[r]) for r, x in enumerate(x0)]
    return [c for _, c in done], [p for p, _ in done], x0


def _term(occ: Occurrence, outputs: list[str], cotangent: str, taken: set[str],
          shape: tuple[int, ...] | None, stored: Recall) -> Node | None:
    """``Σ_{α: A·α + b = β} df[α]·factor`` for one occurrence, in gather form over ``outputs`` (β)."""
    ctx = occ.context
    sys = ctx.system()
    maps = [sys.linear(a) for a in occ.read.indices]
    variables = ctx.variables + list(sys.defined)
    # M·v = rhs: the read map (A·v + c = β) and the context's equalities (E·v + e = 0)
    rows: list[Form] = [*maps, *sys.eqs]
    matrix = [[form[0].get(v, 0) for v in variables] for form in rows]
    rhs = [Affine.of(b) - Affine.make({}, form[1]) for b, form in zip(outputs, maps, strict=True)]
    rhs += [Affine.make({}, -form[1]) for form in sys.eqs]
    snf = smith_normal_form(matrix)
    y = [_combine(rhs, row) for row in snf.U]
    conditions: list[Condition] = []
    values: list[Affine] = []
    for r, yr in enumerate(y):
        s = snf.S[r][r] if r < snf.rank else 0
        if s == 0:  # the cokernel: U·rhs vanishes past the rank
            conditions.append(Condition(yr, "=="))
            continue
        if s < 0:
            yr, s = yr.scale(-1), -s
        if s > 1:
            conditions.append(Condition(yr, "%", s))
            values.append(Affine.of(Quotient(yr, s)).folded())
        else:
            values.append(yr)
    n = len(variables)
    particular = [_combine(values, [snf.V[r][k] for k in range(snf.rank)]) for r in range(n)]
    kernel = [snf.V[r][snf.rank:] for r in range(n)]
    columns, pivots, particular = _echelon(kernel, particular)
    # name the kernel factors: a free index keeps its name, the others are z, z1, z2, …
    names: list[str] = []
    unit = [sum(abs(x) for x in col) == 1 and p < len(ctx.variables) and not particular[p].coeffs
            and particular[p].const == 0 for col, p in zip(columns, pivots, strict=True)]
    n_z = sum(not u for u in unit)
    for p, u in zip(pivots, unit, strict=True):  # a free index's own name is unused after substitution
        names.append(variables[p] if u else fresh_name("z" if n_z == 1 else f"z{len(names) + 1}", taken))
    env = {}
    for r, v in enumerate(variables):
        value = particular[r]
        for col, z in zip(columns, names, strict=True):
            if col[r]:
                value = value + Affine.of(z).scale(col[r])
        env[v] = value
    # the context's inequalities in β and z: bounds of z by Fourier–Motzkin, the rest brackets
    atoms: dict[str, Quotient] = {}
    ineqs = [_as_form(_substituted(form, env), atoms) for form in sys.ineqs]
    zs = set(names)
    with_z = [f for f in ineqs if zs & set(f[0])]
    conditions += [Condition(_from_form(f, atoms), ">=") for f in ineqs if not zs & set(f[0])]
    conditions = _simplified(conditions, outputs, shape)
    if conditions is None:
        return None
    nest = nested_bounds(with_z, names)
    cotangent_read = Read(0, cotangent, tuple(env[v] for v in outputs_of(ctx)))
    coefficient, factors = split_product([cotangent_read, *(substitute(rebuild(f, stored), env)
                                                            for f in occ.factors)])
    factors.insert(0, Number(0, coefficient))
    # each factor sits at the innermost sum whose index it reads (loop-invariant code motion)
    level = {name: k for k, name in enumerate(names)}
    depth = [max((level[v] for v in free_indices(f) if v in level), default=-1) for f in factors]
    # … but never out of a sum that can be empty: the factor would then read where f never does
    innermost = _possibly_empty_level(nest, _known(conditions, outputs, shape, atoms))
    depth = [max(d, innermost) for d in depth]
    body: Node | None = None
    for k in reversed(range(-1, len(names))):
        here = [f for f, d in zip(factors, depth, strict=True) if d == k]
        body = product(here + ([body] if body is not None else []))
        if k < 0:
            break
        bound = nest.bounds[k]
        if not bound.lower or not bound.upper:
            raise SourceError(f"the derivative w.r.t. {occ.read.argument} at column {occ.read.column} sums over "
                              f"{bound.variable}, which is unbounded {'below' if not bound.lower else 'above'}: "
                              f"give the extents of the indices {', '.join(outputs_of(ctx))} (derive the "
                              f"function this derives with the shape of its argument)")
        lower = _ordered(Limit(_from_form(f, atoms), d) for d, f in bound.lower)
        upper = _ordered(Limit(_from_form(f, atoms), d) for d, f in bound.upper)
        body = Summation(0, bound.variable, lower, upper, body)
    body = rename_binders(body, set())  # a factor's copy of a sum can shadow a path sum's index
    return Guard(0, tuple(conditions), body) if conditions else body


def _known(conditions: list[Condition], outputs: list[str], shape: tuple[int, ...] | None,
           atoms: dict[str, Quotient]) -> list[Form]:
    """What holds wherever a term is evaluated: ``0 ≤ outputs < shape`` and its bracket's
    (in)equalities (divisibility brackets left out: fewer constraints only make the use safer)."""
    known: list[Form] = []
    for axis, v in enumerate(outputs):
        known.append(({v: 1}, 0))
        if shape is not None:
            known.append(({v: -1}, shape[axis] - 1))
    for c in conditions:
        if c.relation == "%":
            continue
        coeffs, const = _as_form(c.form, atoms)
        known.append((coeffs, const))
        if c.relation == "==":
            known.append(({v: -x for v, x in coeffs.items()}, -const))
    return known


def _possibly_empty_level(nest: NestedBounds, known: list[Form]) -> int:
    """The innermost sum of ``nest`` whose range may be empty for some values of the indices outside
    it (−1 when Fourier–Motzkin proves every one non-empty wherever it is reached)."""
    innermost = -1
    reached = list(known)
    for level, bound in enumerate(nest.bounds):
        for (p, low), (q, high) in itertools.product(bound.lower, bound.upper):
            # ⌈low/p⌉ > ⌊high/q⌋ (an empty range) needs (low + p − 1)/p ≥ ⌈low/p⌉ ≥ ⌊high/q⌋ + 1 ≥ (high + 1)/q,
            # that is q·low − p·high + p·q − p − q ≥ 0
            names = set(low[0]) | set(high[0])
            crossed = ({v: q * low[0].get(v, 0) - p * high[0].get(v, 0) for v in names},
                       q * low[1] - p * high[1] + p * q - p - q)
            if not shadow_empty([*reached, crossed]):
                innermost = level
                break
        z = bound.variable
        reached += [({**{v: -c for v, c in f[0].items()}, z: p}, -f[1]) for p, f in bound.lower]  # p·z ≥ f
        reached += [({**f[0], z: -q}, f[1]) for q, f in bound.upper]  # q·z ≤ f
    return innermost


@dataclass(frozen=True)
class Recall:
    """What a derivative reads instead of computing: ``values`` (subtrees → the read of their stored
    values) and ``pointwise`` (:func:`pointwise_key` → the name of an array over the argument's shape)."""

    values: Mapping[Node, Read]
    pointwise: Mapping[str, str]

    def __call__(self, node: Node) -> Node | None:
        if node in self.values:
            return self.values[node]
        if self.pointwise and isinstance(node, Call):
            found = pointwise_key(node)
            if found is not None and found[0] in self.pointwise:
                return Read(0, self.pointwise[found[0]], found[1].indices)
        return None


def _ordered(limits: Iterable[Limit]) -> tuple[Limit, ...]:
    """Constant limits first, as one writes ``max(0, d - 2)``."""
    return tuple(sorted(limits, key=lambda lim: (bool(lim.numerator.coeffs), lim.divisor, str(lim.numerator))))


def outputs_of(ctx: Context) -> list[str]:
    return [n for n, _ in ctx.outputs]


def _as_form(a: Affine, atoms: dict[str, Quotient]) -> Form:
    """``a`` as a form, each quotient under the name ``⟨quotient⟩`` (a parameter for
    Fourier–Motzkin; :func:`_from_form` maps it back through ``atoms``)."""
    coeffs: dict[str, int] = {}
    for v, c in a.coeffs:
        key = v
        if isinstance(v, Quotient):
            key = f"⟨{v}⟩"
            atoms[key] = v
        coeffs[key] = coeffs.get(key, 0) + c
    return coeffs, a.const


def _from_form(form: Form, atoms: Mapping[str, Quotient]) -> Affine:
    return Affine.make({atoms.get(v, v): c for v, c in form[0].items()}, form[1])


def _substituted(form: Form, env: Mapping[str, Affine]) -> Affine:
    total = Affine.make({}, form[1])
    for v, c in form[0].items():
        total = total + env[v].scale(c)
    return total


def _simplified(conditions: list[Condition], outputs: list[str],
                shape: tuple[int, ...] | None) -> list[Condition] | None:
    """Drop conditions that always hold for ``0 ≤ outputs < shape`` (``shape`` None: only ``≥ 0`` is
    known), None when one never holds."""
    out: list[Condition] = []
    box = dict(zip(outputs, ((0, n - 1) for n in shape), strict=True)) if shape is not None else None
    for c in conditions:
        form = c.form.folded()
        if not form.coeffs:
            holds = form.const == 0 if c.relation == "==" else form.const >= 0 if c.relation == ">=" else \
                form.const % c.modulus == 0
            if not holds:
                return None
            continue
        if c.relation == ">=" and ((low := _minimum(form)) is not None and low >= 0 or box is not None and
                                   form.names <= set(box) and interval(form, box)[0] >= 0):
            continue  # holds for all indices ≥ 0, or on the whole shape
        if c.relation == "==" and form.coeffs[0][1] < 0:
            form = form.scale(-1)
        cond = Condition(form, c.relation, c.modulus)
        if cond not in out:
            out.append(cond)
    return out


def _minimum(a: Affine) -> int | None:
    """The least value of ``a`` over indices ≥ 0 (None when it is unbounded below)."""
    low = a.const
    for v, c in a.coeffs:
        if c < 0:
            return None
        if isinstance(v, Quotient):
            inner = _minimum(v.numerator)
            if inner is None:
                return None
            low += c * (inner // v.divisor)
    return low


# ----------------------------------------------------------------------------- the derivative


def derivative(definition: Definition, argument: str, sizes: Mapping[str, int | None],
               shape: tuple[int, ...] | None = None, stored: Mapping[Node, str] | None = None,
               pointwise: Mapping[str, str] | None = None) -> Definition:
    """The gather-form derivative ``d<argument>`` of ``definition`` (paper 000 Algorithm 4).

    ``sizes`` gives the extent of each of the definition's indices (None where only ``≥ 0`` is
    known — a derivative's own indices range over its argument's shape, which the reads imply).
    The result reads ``d<name>`` (the cotangent) and the arguments; its indices are
    ``d<argument>0, d<argument>1, …``.  With the argument's ``shape``, brackets that hold on all of
    it are dropped.  ``stored`` maps subtrees of the body at the function's own level (not inside
    a sum or bracket) to the names of arrays holding their values over the function's indices
    (:func:`stored_values`): a factor that copies such a subtree reads the array instead of computing
    it again — the forward values that reverse mode keeps.  ``pointwise`` maps the
    :func:`pointwise_key` of costly calls of one argument element to arrays of their values over the
    argument's shape (:func:`pointwise_values`).
    """
    arity = definition.arguments()
    if argument not in arity:
        raise SourceError(f"{definition.name} does not read {argument!r} (it reads {', '.join(sorted(arity))})")
    taken = {*definition.indices, *arity, definition.name}
    body = rename_binders(definition.body, taken)
    taken |= names_in(body)
    name = fresh_name("d" + argument, taken)
    outputs = [fresh_name(f"{name}{axis}", taken) for axis in range(arity[argument])]
    cotangent = cotangent_name(definition.name)
    if cotangent in taken - {definition.name}:
        raise SourceError(f"{definition.name} reads an argument named {cotangent}, the name of its cotangent")
    context = Context.of_function(definition.indices, sizes)
    recall = Recall({node: Read(0, n, tuple(Affine.of(i) for i in definition.indices))
                     for node, n in (stored or {}).items()}, dict(pointwise or {}))
    terms = [t for occ in occurrences(body, argument, context)
             if (t := _term(occ, outputs, cotangent, set(taken), shape, recall)) is not None]
    # one term per read: a source of 2000 reads has 2000 terms, added by chain at bounded depth
    total: Node = chain([("+", t) for t in terms]) if terms else Number(0, 0.0)
    return Definition.printed(name, tuple(outputs), total)


def stored_values(definition: Definition) -> dict[Node, str]:
    """The subtrees worth keeping from the forward pass, each with a fresh name for the array of its
    values over the function's indices: sums, and calls of sums, at the function's own level
    (outside every sum and bracket) that some derivative factor copies — ``exp(-sum(k, …))`` is its
    own derivative, so every gather term of every argument would compute it again.  Inner subtrees
    come first (a stored value may read an earlier one: :func:`recall_inside`)."""
    context = Context.of_function(definition.indices, {})
    copied: set[Node] = set()
    for argument in definition.arguments():
        for occ in occurrences(definition.body, argument, context):
            for factor in occ.factors:
                copied.update(walk(factor))
    taken = definition.names()
    out: dict[Node, str] = {}

    def visit(node: Node) -> None:
        if isinstance(node, Guard):
            return
        if not isinstance(node, Summation):
            for child in OPERANDS:
                sub = getattr(node, child, None)
                if isinstance(sub, Node):
                    visit(sub)
        if isinstance(node, (Summation, Call)) and node in copied and node not in out and \
                any(isinstance(n, Summation) for n in walk(node)):
            out[node] = fresh_name(f"{definition.name}_v{len(out)}", taken)

    visit(definition.body)
    return out


def recall_inside(node: Node, stored: Mapping[Node, str], indices: tuple[str, ...],
                  pointwise: Mapping[str, str] | None = None) -> Node:
    """``node`` with the stored subtrees strictly inside it (and the pointwise values anywhere in
    it) read from their arrays."""
    recall = Recall({n: Read(0, name, tuple(Affine.of(i) for i in indices)) for n, name in stored.items() if n != node},
                    dict(pointwise or {}))
    return rebuild(node, recall)


#: calls worth an array of their values per argument element when f reads each element many times:
#: the costly functions (:attr:`jacacc.ops.Operation.costly`) defined on all reals (their domain in
#: :mod:`jacacc.ops`), so that the elements f never reads are harmless
POINTWISE_FUNCTIONS = frozenset(name for name in FUNCTIONS
                                if ops.get(name).costly and ops.get(name).domain == "all reals")


def pointwise_key(node: Node) -> tuple[str, Read] | None:
    """For a costly call of one argument element (``tanh(x[i + j])``, ``exp(2 * x[k])``: one read,
    no sums, no brackets), its text with the read's indices replaced by placeholders, and the read;
    None for any other node.  Calls with the same key are one function of the element they read."""
    if not isinstance(node, Call) or node.function not in POINTWISE_FUNCTIONS:
        return None
    nodes = list(walk(node))
    reads = {(n.argument, n.indices) for n in nodes if isinstance(n, Read)}
    if len(reads) != 1 or any(isinstance(n, (Summation, Guard)) for n in nodes):
        return None
    argument, indices = next(iter(reads))
    placeholder = Read(0, argument, tuple(Affine.of(f"⟨{axis}⟩") for axis in range(len(indices))))
    template = rebuild(node, lambda n: placeholder if isinstance(n, Read) else None)
    return expression_text(template), Read(0, argument, indices)


@dataclass(frozen=True)
class Pointwise:
    """An array of a costly call's values over its argument's shape: ``definition`` reads ``argument``."""

    name: str
    argument: str
    definition: Definition


def pointwise_values(definition: Definition) -> dict[str, Pointwise]:
    """The costly calls of one argument element (:func:`pointwise_key`) that ``definition`` evaluates
    at more points than the argument has elements — the read's map is not injective over the
    indices in scope, like ``tanh(x[i + j])`` — each as a definition over the argument's shape
    (``f_p0[p0] = tanh(x[p0])``), keyed by :func:`pointwise_key`.  Each element's value is then
    computed once and read by the function's forward sums and by every derivative factor."""
    taken = definition.names()
    out: dict[str, Pointwise] = {}

    def visit(node: Node, scope: tuple[str, ...]) -> None:
        found = pointwise_key(node)
        if found is not None:
            key, read = found
            if key not in out and not _injective(read, scope):
                name = fresh_name(f"{definition.name}_p{len(out)}", taken)
                indices = tuple(fresh_name(f"p{axis}", {read.argument, name}) for axis in range(len(read.indices)))
                at = Read(0, read.argument, tuple(Affine.of(i) for i in indices))
                body = rebuild(node, lambda n: at if isinstance(n, Read) else None)
                out[key] = Pointwise(name, read.argument, Definition.printed(name, indices, body))
            return
        inner = (*scope, node.index) if isinstance(node, Summation) else scope
        for child in CHILDREN:
            sub = getattr(node, child, None)
            if isinstance(sub, Node):
                visit(sub, inner)

    visit(definition.body, tuple(definition.indices))
    return out


def _injective(read: Read, scope: tuple[str, ...]) -> bool:
    """Whether the read's map determines every index in ``scope`` (quotients: assumed injective)."""
    rows: list[list[int]] = []
    for a in read.indices:
        if any(not isinstance(v, str) for v, _ in a.coeffs):
            return True
        coeffs = dict(a.coeffs)
        rows.append([coeffs.get(v, 0) for v in scope])
    if not scope or not rows:
        return not scope
    return smith_normal_form(rows).rank == len(scope)
