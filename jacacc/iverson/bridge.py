"""From Einstein notation to the tensor language of paper 001: ``einsum`` and traced expressions.

Paper 002 writes tensor code as generic multiplications ``A *(s1,s2,s3) B``
(einsums), sums and elementwise functions (:mod:`jacacc.tensor.expr`); paper
001's language writes the same code with tensor generation ⊞, summation Σ,
affine reads and Iverson brackets.  This module translates the first into the
second:

:func:`einsum`
    an Einstein product of iverson tensors as ⊞ over the output indices of Σ
    over the contracted ones of a product of reads;
:func:`from_tensor`
    any traced (or derived) :class:`~jacacc.tensor.expr.Tensor` expression as
    one iverson program (:class:`Translation`): einsums become ⊞/Σ, sums and
    elementwise functions ⊞ over entrywise scalar expressions, the symbolic
    unit tensors brackets and ones, and every node the DAG shares one ``let``;
:func:`print_tensor`
    that program's text.

Tensors used once are *fused* into their reader: the translation of
``exp(X *(ij,j,i) w)`` reads ``exp(Σ_j X[i, j]·w[j])`` at ``i`` instead of
building the vector first, so the printed program is the expression in index
notation.  The translated program evaluates (:func:`jacacc.iverson.evaluate`,
:meth:`Translation.evaluate`) to the values :mod:`jacacc.tensor` computes.

Examples
--------
>>> import numpy as np
>>> import jacacc.iverson as iv
>>> from jacacc.tensor import trace
>>> A, B = iv.var("A", (2, 3)), iv.var("B", (3, 2))
>>> print(einsum("ij,jk->ik", A, B))
⊞_{i<2} ⊞_{j<2} Σ_{k<3} A[i, k] · B[k, j]
>>> f = trace(lambda w, X: np.sum(np.log1p(np.exp(X @ w))), [np.zeros(2), np.zeros((3, 2))])
>>> print(print_tensor(f.outputs[0]))
Σ_{i<3} log1p(exp(Σ_{j<2} X[i, j] · w[j]))
>>> X = np.arange(6.0).reshape(3, 2) / 10
>>> t = from_tensor(f.outputs[0])
>>> bool(np.isclose(t.evaluate(w=np.ones(2), X=X), np.sum(np.log1p(np.exp(X @ np.ones(2))))))
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jacacc.errors import UnsupportedOperationError
from jacacc.iverson import syntax as _syntax
from jacacc.iverson.interpret import evaluate as _evaluate
from jacacc.iverson.syntax import (
    Affine,
    Const,
    Expr,
    Func,
    IvTypeError,
    PairType,
    as_expr,
    bracket,
    exp,
    gen,
    let,
    log,
    recip,
    relu,
    type_text,
)
from jacacc.iverson.syntax import index as iv_index
from jacacc.iverson.syntax import sum as iv_sum
from jacacc.iverson.syntax import var as iv_var
from jacacc.tensor.expr import Tensor, nodes_of

__all__ = ["Translation", "einsum", "from_tensor", "print_tensor"]

Shape = tuple[int, ...]

# Index names are handed out in this order (the usual i, j, k first), then with numeric suffixes.
_INDEX_NAMES = "ijklmnopqrstuvwxyzabcdefgh"

# The tensor level's elementwise functions written with iverson's own constructs rather than as
# black-box calls (:func:`_scalar_function`): data brackets and powers; every other unary operation
# of the table that the language accepts is a call of the same operation (iv.func).
_WRITTEN = {"heaviside", "sign", "shift", "pow"}


def _translatable(name: str) -> bool:
    return name in _WRITTEN or _syntax.IVERSON_NAMES.get(name, name) in _syntax.FUNCTIONS

# Largest integer exponent written as a product x·x·…·x; larger ones square a scalar let, so that
# x**1000 is a program of a dozen multiplications rather than a thousand.
_CHAIN_POWER = 16


# ---------------------------------------------------------------------------- lazy tensors
@dataclass(frozen=True)
class _Lazy:
    """A tensor known by how to read one entry: ``read(idx, scope)`` is the scalar at the affine
    indices ``idx``, with ``scope`` the index names bound around the read (new binders avoid them,
    so nothing is captured or shadowed)."""

    shape: Shape
    read: Callable[[tuple[Affine, ...], frozenset[str]], Expr]


def _pick(taken: Iterable[str]) -> str:
    """The first index name of ``_INDEX_NAMES`` (then ``i1``, ``j1``, …) not in ``taken``."""
    taken = set(taken)
    for name in _INDEX_NAMES:
        if name not in taken:
            return name
    k = 1
    while True:
        for letter in _INDEX_NAMES:
            if f"{letter}{k}" not in taken:
                return f"{letter}{k}"
        k += 1


def _materialize(tensor: _Lazy, scope: frozenset[str] = frozenset()) -> Expr:
    """The whole tensor: ⊞ over fresh indices, in axis order, of one entry."""
    names: list[str] = []
    for _ in tensor.shape:
        names.append(_pick(scope | set(names)))
    body = tensor.read(tuple(iv_index(n) for n in names), scope | set(names))
    for name, extent in zip(reversed(names), reversed(tensor.shape), strict=True):
        body = gen(name, extent, body)
    return body


def _reader(e: Expr) -> _Lazy:
    """An iverson tensor (a variable, a let-bound name, any closed expression) read by access."""
    return _Lazy(tuple(e.shape), lambda idx, scope: e[idx] if idx else e)


def _product(factors: Sequence[Expr]) -> Expr:
    """``f1 · f2 · …`` with the numbers multiplied into one leading factor (dropped when 1; a zero
    zeroes the product) and reciprocals last, so that it prints as ``-x · y / z``; iverson's
    ``*`` moves bracket factors outwards (``[i = j]·(…)``), so a false δ skips the rest."""
    scale = 1.0
    plain: list[Expr] = []
    divisors: list[Expr] = []
    for f in factors:
        if isinstance(f, Const):
            scale *= f.value
        elif isinstance(f, Func) and f.name == "recip":
            divisors.append(f)
        else:
            plain.append(f)
    if scale == 0.0:
        return Const(0.0)
    if not np.isfinite(scale):  # finite numbers whose product overflows: keep them apart
        numbers = [f for f in factors if isinstance(f, Const)]
    else:
        numbers = [Const(scale)] if scale != 1.0 or not (plain or divisors) else []
    kept = numbers + plain + divisors
    out = kept[0]
    for f in kept[1:]:
        out = out * f
    return out


# ---------------------------------------------------------------------------- einsum
def _parse(subscripts: Any, shapes: Sequence[Shape]) -> tuple[list[str], str, dict[str, int]]:
    """Operand labels, output labels and each label's extent; anything malformed is an
    :class:`IvTypeError` naming the problem (NumPy's rules, without ``...``)."""
    if not isinstance(subscripts, str):
        raise IvTypeError(f"einsum subscripts must be a string such as 'ij,jk->ik', got {subscripts!r}")
    text = "".join(subscripts.split())
    if "." in text:
        raise IvTypeError(f"einsum {subscripts!r}: '...' (broadcasting) is not supported; name every axis")
    lhs, arrow, rhs = text.partition("->")
    if "-" in lhs or ">" in lhs or "-" in rhs or ">" in rhs:
        raise IvTypeError(f"einsum {subscripts!r}: malformed subscripts (one '->' separates inputs and output)")
    inputs = lhs.split(",")
    if len(inputs) != len(shapes):
        raise IvTypeError(f"einsum {subscripts!r} names {len(inputs)} operand(s), got {len(shapes)}")
    for labels in (*inputs, rhs):
        bad = [c for c in labels if not c.isalpha()]
        if bad:
            raise IvTypeError(f"einsum {subscripts!r}: {bad[0]!r} is not a letter; subscripts are letters "
                              "separated by ',' with an optional '->' before the output")
    sizes: dict[str, int] = {}
    for k, (labels, shape) in enumerate(zip(inputs, shapes, strict=True)):
        if len(labels) != len(shape):
            raise IvTypeError(f"einsum {subscripts!r}: operand {k} has {len(shape)} axes (shape {shape}) "
                              f"but {len(labels)} subscripts {labels!r}")
        for label, n in zip(labels, shape, strict=True):
            if sizes.setdefault(label, n) != n:
                raise IvTypeError(f"einsum {subscripts!r}: index {label!r} has extent {sizes[label]} and "
                                  f"{n} (operand {k}); broadcasting is not supported")
    if not arrow:  # NumPy's implicit output: the labels used once, in alphabetical order
        counts = {c: "".join(inputs).count(c) for c in sizes}
        rhs = "".join(sorted(c for c, n in counts.items() if n == 1))
    for c in rhs:
        if rhs.count(c) > 1:
            raise IvTypeError(f"einsum {subscripts!r}: output index {c!r} appears more than once")
        if c not in sizes:
            raise IvTypeError(f"einsum {subscripts!r}: output index {c!r} is not an index of any operand")
    return inputs, rhs, sizes


def _contraction(inputs: Sequence[str], out: str, sizes: dict[str, int], operands: Sequence[_Lazy]) -> _Lazy:
    """The einsum as a lazy tensor: at output indices ``idx``, Σ over the contracted labels (in
    order of first appearance) of the product of the operands' reads."""
    contracted = list(dict.fromkeys(c for labels in inputs for c in labels if c not in out))

    def read(idx: tuple[Affine, ...], scope: frozenset[str]) -> Expr:
        at = dict(zip(out, idx, strict=True))
        binders: list[tuple[str, int]] = []
        for label in contracted:
            name = _pick(scope)
            scope = scope | {name}
            at[label] = iv_index(name)
            binders.append((name, sizes[label]))
        # a repeated label within one operand reads its diagonal: both axes get the same index
        body = _product([op.read(tuple(at[c] for c in labels), scope)
                         for labels, op in zip(inputs, operands, strict=True)])
        for name, extent in reversed(binders):
            body = iv_sum(name, extent, body)
        return body

    return _Lazy(tuple(sizes[c] for c in out), read)


def einsum(subscripts: str, *operands: Expr) -> Expr:
    """An Einstein product of iverson tensors, written with ⊞, Σ and reads.

    The output indices become nested ``gen`` in output order, the contracted
    indices nested ``sum`` (in order of first appearance) around the product
    of the operands' reads; a label repeated within one operand reads its
    diagonal.  Index variables are named ``i, j, k, …`` in that order.

    Parameters
    ----------
    subscripts : str
        NumPy's subscripts, ``"ij,jk->ik"``; without ``->`` the output is the
        labels used once, in alphabetical order.  ``...`` is not supported.
    *operands : Expr
        Iverson expressions of tensor (or scalar) type, one per operand; plain
        numbers are scalar constants.

    Returns
    -------
    Expr
        A program of the output's shape (a scalar for ``"...->"``).

    Raises
    ------
    IvTypeError
        For malformed subscripts, a wrong number of operands or of axes, an
        index with two extents, a repeated or unknown output index, a pair
        operand.

    Examples
    --------
    >>> import numpy as np
    >>> import jacacc.iverson as iv
    >>> A = iv.var("A", (3, 3))
    >>> print(einsum("ii->", A))
    Σ_{i<3} A[i, i]
    >>> print(einsum("ij->ji", A))
    ⊞_{i<3} ⊞_{j<3} A[j, i]
    >>> x = iv.var("x", (3,))
    >>> e = einsum("ij,j,j->i", A, x, x)
    >>> print(e)
    ⊞_{i<3} Σ_{j<3} A[i, j] · x[j] · x[j]
    >>> a, v = np.arange(9.0).reshape(3, 3), np.array([1.0, 2.0, 3.0])
    >>> np.allclose(iv.evaluate(e, A=a, x=v), np.einsum("ij,j,j->i", a, v, v))
    True
    >>> einsum("ij,jk->ik", A, x)
    Traceback (most recent call last):
    ...
    jacacc.iverson.syntax.IvTypeError: einsum 'ij,jk->ik': operand 1 has 1 axes (shape (3,)) but 2 subscripts 'jk'
    """
    exprs = [as_expr(op) for op in operands]
    if not exprs:
        raise IvTypeError(f"einsum {subscripts!r} needs at least one operand")
    for k, e in enumerate(exprs):
        if isinstance(e.type, PairType):
            raise IvTypeError(f"einsum operand {k} is a pair ({type_text(e.type)}); einsum takes tensors")
    inputs, out, sizes = _parse(subscripts, [e.type for e in exprs])
    # indices free in an operand (an einsum inside a gen body) must not be captured by the new binders
    scope = frozenset().union(*(e.free_indices for e in exprs))
    return _materialize(_contraction(inputs, out, sizes, [_reader(e) for e in exprs]), scope)


# ---------------------------------------------------------------------------- tensor expressions
@dataclass
class Translation:
    """A :mod:`jacacc.tensor` expression as an iverson program.

    Attributes
    ----------
    expr : Expr
        The program; its free variables are the expression's ``var`` nodes
        (same names and shapes) and the names in :attr:`constants`.
    constants : dict of str to numpy.ndarray
        Values of the constant arrays the expression holds, each read in
        :attr:`expr` as a variable of that name (scalars are written inline,
        ``ones``/``zeros`` as numbers and δ as the bracket ``[i = j]``).

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.tensor import trace
    >>> t = from_tensor(trace(lambda x: x @ np.array([[1.0, 2.0], [3.0, 4.0]]), [np.zeros(2)]).outputs[0])
    >>> print(t)
    ⊞_{i<2} Σ_{j<2} x[j] · c0[j, i]
    with c0 : R^(2, 2) a constant
    >>> t.evaluate(x=np.array([1.0, 1.0]))
    array([4., 6.])
    """

    expr: Expr
    constants: dict[str, np.ndarray] = field(default_factory=dict)

    def evaluate(self, **arrays: Any) -> Any:
        """The program's value (:func:`jacacc.iverson.evaluate`) with ``arrays`` binding the
        expression's variables by name and :attr:`constants` bound as well."""
        return _evaluate(self.expr, **arrays, **self.constants)

    def __str__(self) -> str:
        lines = [str(self.expr)]
        lines += [f"with {name} : {type_text(tuple(value.shape))} a constant" for name, value in self.constants.items()]
        return "\n".join(lines)


def _names(prefix: str, taken: set[str]) -> Iterator[str]:
    """``prefix0, prefix1, …`` skipping names in ``taken`` (which is updated)."""
    k = 0
    while True:
        name = f"{prefix}{k}"
        k += 1
        if name not in taken:
            taken.add(name)
            yield name


def _unary_reads(node: Tensor) -> int:
    """How many times the scalar formula of an elementwise node reads its argument: more than one
    read of a computed tensor is a use to share, like a second user in the DAG."""
    name, p = node.param
    if name == "sign":  # [x > 0] - [x < 0]
        return 2
    if name == "pow" and p is not None and float(p).is_integer() and abs(p) >= 2:
        return 2  # x·x·… (how many times does not matter: more than once)
    return 1


def _is_relabelling(node: Tensor) -> bool:
    """True for an einsum of one operand that sums nothing (a transpose, a diagonal): its entries are
    entries of its operand, so it is never worth a ``let`` of its own."""
    if node.kind != "einsum" or len(node.args) != 1:
        return False
    inputs, out = node.param.split("->")
    return set(inputs) <= set(out)


def _power(x: Expr, n: int, names: Iterator[str]) -> Expr:
    """``x^n`` for an integer ``n >= 1``: ``x·x·…·x`` up to ``_CHAIN_POWER`` factors; beyond, by
    squaring scalar ``let`` s (``let s0 = x^10 in let s1 = s0·s0 in s1·s1`` for ``n = 40``), so
    the program grows with log n."""
    bits: list[int] = []
    while n > _CHAIN_POWER:
        bits.append(n % 2)
        n //= 2
    value = _product([x] * n)
    lets: list[tuple[str, Expr]] = []
    for bit in reversed(bits):  # x^(2m + bit) = (x^m)^2 · x^bit
        name = next(names)
        lets.append((name, value))
        half = iv_var(name, ())
        value = _product([half, half] + [x] * bit)
    for name, v in reversed(lets):
        value = let(name, v, value)
    return value


#: elementwise functions of two operands in iverson's vocabulary.  ``max(a, b) = a + relu(b − a)``
#: has the value of ``np.maximum`` but relu's kink convention: at a tie the whole derivative
#: goes to ``a`` (jacacc.ops splits it ½/½ as JAX); the two agree everywhere else.
_BINARY: dict[str, Callable[[Expr, Expr], Expr]] = {
    "maximum": lambda a, b: a + relu(b - a),
    "minimum": lambda a, b: a - relu(a - b),
    "gt": lambda a, b: bracket(a > b),
    "ge": lambda a, b: bracket(a >= b),
    "lt": lambda a, b: bracket(a < b),
    "le": lambda a, b: bracket(a <= b),
    # iverson compares data with < <= > >= only ("==" on expressions is structural)
    "eq": lambda a, b: bracket(a >= b) - bracket(a > b),
    "ne": lambda a, b: 1.0 - (bracket(a >= b) - bracket(a > b)),
}


def _scalar_function(name: str, p: float | None, x: Expr, names: Iterator[str]) -> Expr:
    """The elementwise function ``name`` (parameter ``p``) of one scalar, in iverson's vocabulary
    (``names``: fresh names for the scalar ``let`` of a large power)."""
    if name not in _WRITTEN:
        return _syntax.func(name, x)
    if name == "heaviside":
        return bracket(x > 0)
    if name == "sign":
        return bracket(x > 0) - bracket(x < 0)
    if name == "shift":
        return x + float(p)
    if name == "pow":
        p = float(p)
        if p.is_integer():
            n = int(p)
            if n == 0:
                return Const(1.0)
            return _power(x, n, names) if n > 0 else recip(_power(x, -n, names))
        return exp(p * log(x))  # x^p = e^(p log x), NaN for x < 0 as NumPy's power
    raise UnsupportedOperationError(f"the elementwise function {name!r} has no translation to jacacc.iverson")


def _root(root: Any) -> Tensor:
    """The expression node of ``root``: a Tensor, a traced function's one output or a derivative's."""
    if isinstance(root, Tensor):
        return root
    expression = getattr(root, "expression", None)  # jacacc.tensor.DerivativeExpression
    if isinstance(expression, Tensor):
        return expression
    outputs = getattr(root, "outputs", None)  # jacacc.tensor.trace.TracedFunction
    if isinstance(outputs, tuple) and len(outputs) == 1 and isinstance(outputs[0], Tensor):
        return outputs[0]
    raise TypeError(f"from_tensor takes a jacacc.tensor expression node (Tensor), got {type(root).__name__}")


def from_tensor(root: Tensor) -> Translation:
    """Translate a :mod:`jacacc.tensor` expression into one iverson program.

    Every node kind has a translation:

    ``var``
        the iverson variable of the same name and shape;
    ``const``
        a scalar inline, ``ones``/``zeros`` as 1/0, the Kronecker δ as
        ``[i = j]``, any other array as a variable with a generated name
        (``c0``, ``c1``, …) whose value is in :attr:`Translation.constants`;
    ``einsum``
        ⊞ over the output indices of Σ over the contracted ones
        (:func:`einsum`);
    ``add``
        ⊞ of the entrywise sum;
    ``unary``
        ⊞ of the scalar function: ``exp log sqrt sin cos tanh relu`` as
        themselves, ``log1p(x) = log(1 + x)``, ``reciprocal(x) = 1 / x``,
        ``abs(x) = relu(x) + relu(-x)``, ``heaviside(x) = [x > 0]``,
        ``sign(x) = [x > 0] - [x < 0]``, ``shift(x) = x + p`` and ``pow``:
        ``x·…·x`` for an integer exponent (``1`` for 0, ``1 / x^|p|`` below
        0), ``exp(p·log(x))`` otherwise.

    A node used once is fused into its user (read entrywise where it is
    needed); a node used more than once — by several users, or twice by one
    scalar formula such as ``abs`` — is computed once by a ``let`` (``t0``,
    ``t1``, …, outermost first, in the DAG's topological order).

    Parameters
    ----------
    root : Tensor
        The expression's output node (a traced function's
        ``TracedFunction`` with one output or a ``DerivativeExpression`` are
        accepted too and stand for their expression).

    Returns
    -------
    Translation

    Raises
    ------
    UnsupportedOperationError
        For an ``op`` node (a linear-algebra operator such as ``potrf``, which
        has no index-notation form), naming the operator.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.tensor import trace
    >>> f = trace(lambda x: np.sum(np.abs(x) * np.exp(x)), [np.zeros(3)])
    >>> print(print_tensor(f.outputs[0]))
    Σ_{i<3} abs(x[i]) · exp(x[i])
    >>> g = trace(lambda x: np.sum(np.sign(np.sin(x))), [np.zeros(3)])
    >>> print(print_tensor(g.outputs[0]))
    let t0 = ⊞_{i<3} sin(x[i]) in
    Σ_{i<3} [t0[i] > 0] - [t0[i] < 0]
    """
    root = _root(root)
    order = nodes_of([root])
    for node in order:
        if node.kind == "op":
            name, options, _ = node.param
            flags = ", ".join(f"{k}={v!r}" for k, v in options)
            raise UnsupportedOperationError(
                f"the operator {name}{'(' + flags + ')' if flags else ''} has no translation to jacacc.iverson: "
                "general functions (linear-algebra operators) are not written in index notation")
    # How often each node's entries are computed by the program if it is not shared: a relabelling
    # (transpose, diagonal) is only a read, so its users' reads pass through it to its operand.
    relabel = {id(n) for n in order if _is_relabelling(n)}
    uses: dict[int, int] = {id(root): 1}
    for node in reversed(order):  # users before their operands
        reads = (_unary_reads(node) if node.kind == "unary" else 1) * \
            (uses.get(id(node), 0) if id(node) in relabel else 1)
        for a in node.args:
            uses[id(a)] = uses.get(id(a), 0) + reads
    taken = {str(n.param) for n in order if n.kind == "var"}
    const_names, let_names, scalar_names = _names("c", taken), _names("t", taken), _names("s", taken)
    constants: dict[str, np.ndarray] = {}
    bindings: list[tuple[str, Expr]] = []
    lazy: dict[int, _Lazy] = {}
    for node in order:
        tensor = _translate(node, [lazy[id(a)] for a in node.args], const_names, scalar_names, constants)
        # a computed tensor read more than once is computed once; leaves are only reads already
        if node is not root and node.kind not in ("var", "const") and id(node) not in relabel \
                and uses.get(id(node), 0) > 1:
            name = next(let_names)
            bindings.append((name, _materialize(tensor)))
            tensor = _reader(iv_var(name, node.shape))
        lazy[id(node)] = tensor
    program = _materialize(lazy[id(root)])
    for name, value in reversed(bindings):
        program = let(name, value, program)
    return Translation(program, constants)


def _translate(node: Tensor, args: list[_Lazy], const_names: Iterator[str], scalar_names: Iterator[str],
               constants: dict[str, np.ndarray]) -> _Lazy:
    """One node as a lazy tensor over its operands' lazy tensors."""
    shape = tuple(node.shape)
    if node.kind == "var":
        return _reader(iv_var(str(node.param), shape))
    if node.kind == "const":
        return _constant(node, const_names, constants)
    if node.kind == "einsum":
        inputs, out, sizes = _parse(node.param, [a.shape for a in args])
        return _contraction(inputs, out, sizes, args)
    if node.kind == "add":
        def add_read(idx: tuple[Affine, ...], scope: frozenset[str]) -> Expr:
            terms = [a.read(idx, scope) for a in args]
            total = terms[0]
            for t in terms[1:]:
                total = total + t
            return total

        return _Lazy(shape, add_read)
    if node.kind == "unary":
        name, p = node.param
        if len(args) == 2 and name in _BINARY:
            first, second = args
            return _Lazy(shape, lambda idx, scope: _BINARY[name](first.read(idx, scope), second.read(idx, scope)))
        if len(args) != 1:
            raise UnsupportedOperationError(f"the elementwise function {name!r} of {len(args)} operands has no "
                                            "translation to jacacc.iverson")
        (arg,) = args
        if not _translatable(name):  # refuse now, not at the first read
            raise UnsupportedOperationError(f"the elementwise function {name!r} has no translation to "
                                            "jacacc.iverson")
        return _Lazy(shape, lambda idx, scope: _scalar_function(name, p, arg.read(idx, scope), scalar_names))
    raise UnsupportedOperationError(f"a jacacc.tensor node of kind {node.kind!r} has no translation to "
                                    "jacacc.iverson")


def _constant(node: Tensor, const_names: Iterator[str], constants: dict[str, np.ndarray]) -> _Lazy:
    """A constant: symbolic units as numbers and brackets, scalars inline, arrays as named inputs."""
    shape = tuple(node.shape)
    kind = node.param[0]
    if kind == "ones":
        return _Lazy(shape, lambda idx, scope: Const(1.0))
    if kind == "zeros":
        return _Lazy(shape, lambda idx, scope: Const(0.0))
    if kind == "delta":  # δ[a, b] = [a = b]; on a diagonal read (a is b) it is 1
        return _Lazy(shape, lambda idx, scope: Const(1.0) if idx[0].key == idx[1].key else bracket(idx[0] == idx[1]))
    value = np.asarray(node.value, dtype=np.float64)
    if shape == () and np.isfinite(value):
        c = Const(float(value))
        return _Lazy(shape, lambda idx, scope: c)
    name = next(const_names)  # an array, or a scalar iverson cannot write (inf, nan)
    constants[name] = value
    return _reader(iv_var(name, shape))


def print_tensor(root: Tensor) -> str:
    """A :mod:`jacacc.tensor` expression printed in paper 001's notation: ``str(from_tensor(root).expr)``.

    Examples
    --------
    >>> import numpy as np
    >>> from jacacc.tensor import trace
    >>> f = trace(lambda X, W: np.sum(np.tanh(X @ W) ** 2), [np.zeros((2, 3)), np.zeros((3, 2))])
    >>> print(print_tensor(f.outputs[0]))
    let t0 = ⊞_{i<2} ⊞_{j<2} tanh(Σ_{k<3} X[i, k] · W[k, j]) in
    Σ_{i<2} Σ_{j<2} t0[i, j] · t0[i, j]
    """
    return str(from_tensor(root).expr)
