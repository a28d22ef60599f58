"""Tensor expressions in Einstein notation (paper 002 §2): the nodes of the expression DAG.

Five kinds of node make up every expression jacacc traces or derives:

``var``
    An argument of the function (a tensor input, bound by name at evaluation).
``const``
    A constant array.  Unit tensors are constants with a name: ``ones``
    (every entry 1) and ``delta`` (the Kronecker δ, an identity matrix); both
    are kept symbolic until an expression is planned.
``einsum``
    The paper's generic multiplication ``A *(s1,s2,s3) B`` (``np.einsum`` with
    subscripts ``"s1,s2->s3"``); a single operand stands for a contraction of
    one tensor (a sum over axes, a transpose, a diagonal).  Scalar constants
    may ride along as extra operands.
``add``
    The sum of tensors of one shape.
``unary``
    An elementwise function of the operation table (:mod:`jacacc.ops`:
    ``exp``, ``log``, ``maximum`` of two operands, ``where`` of three …), or
    ``pow`` with a constant exponent, ``shift`` = adding a constant.

Nodes are immutable and *hash-consed*: building a node equal to a live one
returns that node, so common subexpressions are shared without a separate
pass.  Construction simplifies: constants fold, scalar ones and zero tensors
disappear, an einsum that changes nothing is its operand.

Examples
--------
>>> X, w = var("X", (4, 3)), var("w", (3,))
>>> Xw = einsum("ij,j->i", X, w)
>>> print(Xw)
X *(ij,j,i) w
>>> Xw is einsum("ij,j->i", X, w)
True
"""

from __future__ import annotations

import functools
import itertools
import math
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc import ops

__all__ = ["Tensor", "UNARY", "add", "const", "delta", "einsum", "elementwise", "flops_of", "grouped_sum", "nodes_of", "reader_counts", "sums_a_letter", "ones", "rebuild", "scale",
           "symbol", "unary", "var", "with_args", "zeros"]

Shape = tuple[int, ...]

def _table_function(op: ops.Operation) -> Any:
    def evaluate(xp: Any, *args: Any) -> Any:
        return op.array_value(xp, *args[:-1])  # the last argument is the node's parameter, unused

    return evaluate


# elementwise functions: name -> implementation ``f(xp, *arrays, p)`` on NumPy or CuPy arrays: every
# operation of the table (jacacc.ops), and the tensor level's two with a constant parameter ``p``
UNARY: dict[str, Any] = {
    **{op.name: _table_function(op) for op in ops.iterate()},
    # the table's pow: called (xp, a, p) with the constant exponent p as the node's parameter, or
    # (xp, a, b, None) with the exponent an operand; either way the second argument is the exponent
    "pow": lambda xp, a, b, p=None: a**b,
    "shift": lambda xp, a, p: a + p,  # the table's add with the constant p
}
# elementwise functions whose derivative is zero wherever it exists
PIECEWISE_CONSTANT = frozenset(op.name for op in ops.iterate() if op.piecewise_constant)

_INTERN: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_SERIAL = itertools.count()
FOLD_LIMIT = 4096  # fold constant subexpressions up to this many elements


def symbol(k: int) -> str:
    """The ``k``-th einsum index letter (a-z, A-Z, then further Unicode letters)."""
    letters = "ijklmnopqrstuvwxyzabcdefghABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return letters[k] if k < len(letters) else chr(0x100 + k)


class Tensor:
    """One node of a tensor expression DAG (build with the module's functions).

    Attributes
    ----------
    kind : str
        ``"var"``, ``"const"``, ``"einsum"``, ``"add"``, ``"unary"`` or ``"op"`` (a general function);
        in a planned program also ``"fused"`` (a region run as one kernel: :mod:`jacacc.tensor.fusion`).
    shape : tuple of int
    args : tuple of Tensor
        The operands.
    param : hashable
        The variable's name, the einsum's subscripts, the unary function's
        ``(name, parameter)``, the constant's key.
    value : numpy.ndarray or None
        A constant's value (``None`` for the symbolic unit tensors until asked).
    """

    __slots__ = ("kind", "shape", "args", "param", "_value", "serial", "_flops", "__weakref__")

    def __init__(self, kind: str, shape: Shape, args: tuple[Tensor, ...], param: Any, value: Any = None) -> None:
        self.kind, self.shape, self.args, self.param, self._value = kind, shape, args, param, value
        self._flops: int | None = None  # node_flops, once asked (a node never changes)
        # creation order: a deterministic key for putting commutative operands in one order
        self.serial = next(_SERIAL)

    # ------------------------------------------------------------------ queries
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def value(self) -> np.ndarray | None:
        """A constant's value as an array (materializing unit tensors); None otherwise."""
        if self.kind != "const":
            return None
        if self._value is None:
            name = self.param[0]
            if name == "ones":
                return np.ones(self.shape)
            if name == "zeros":
                return np.zeros(self.shape)
            if name == "delta":
                return np.eye(self.shape[0])
        return self._value

    def is_scalar_const(self, number: float | None = None) -> bool:
        """True for a constant of shape () (equal to ``number`` if given)."""
        if self.kind != "const" or self.shape != ():
            return False
        return number is None or float(self.value) == number

    @property
    def is_zero(self) -> bool:
        return self.kind == "const" and (self.param[0] == "zeros" or (self.param[0] == "scalar" and
                                                                       float(self.value) == 0.0))

    def __repr__(self) -> str:
        return f"Tensor({self.kind}, shape={self.shape}, {self.describe()})"

    def describe(self) -> str:
        """This node alone, its operands by kind."""
        if self.kind == "var":
            return str(self.param)
        if self.kind == "const":
            return _const_text(self)
        return f"{self.kind} {self.param}"

    def __str__(self) -> str:
        return render(self)

    @property
    def flops(self) -> int:
        """The floating-point operations of evaluating this node alone (operands given)."""
        return node_flops(self)


def _intern(kind: str, shape: Shape, args: tuple[Tensor, ...], param: Any, value: Any = None) -> Tensor:
    key = (kind, shape, tuple(id(a) for a in args), param)
    found = _INTERN.get(key)
    if found is not None and found.args == args:
        return found
    node = Tensor(kind, shape, args, param, value)
    _INTERN[key] = node
    return node


#: Registered general functions (:mod:`jacacc.tensor.operators` fills it): name → Operator.
OPERATORS: dict[str, Any] = {}


def operator_node(name: str, args: tuple[Tensor, ...], options: tuple, index: int, shape: Shape) -> Tensor:
    """Output ``index`` of the general function ``name`` (an :class:`~jacacc.tensor.operators.Operator`)
    on ``args``: a node of kind ``"op"`` whose param is ``(name, options, index)``."""
    return _intern("op", tuple(int(n) for n in shape), args, (name, options, index))


# ---------------------------------------------------------------------------- leaves
def var(name: str, shape: Sequence[int]) -> Tensor:
    """A tensor argument called ``name``.

    >>> var("x", (3,)).shape
    (3,)
    """
    return _intern("var", tuple(int(n) for n in shape), (), name)


#: constant arrays up to this many entries are one node per value (:func:`const`)
SHARED_CONST_MAX = 8192


def const(value: Any) -> Tensor:
    """A constant array (scalars and small arrays are shared by value)."""
    array = np.asarray(value, dtype=float)
    if array.ndim == 0:
        # the sign bit is part of the key: -0.0 == 0.0, but x / -0.0 is -inf
        return _intern("const", (), (), ("scalar", float(array), bool(np.signbit(array))), array)
    array = array.copy()
    array.flags.writeable = False
    if array.size <= SHARED_CONST_MAX:
        # one node per value: a loop body that makes the same array each step (``np.arange(n)``,
        # ``np.eye(n)``) makes one constant, and what it computes from it is shared (interned) too
        return _intern("const", array.shape, (), ("small", array.tobytes()), array)
    return Tensor("const", array.shape, (), ("array", id(array)), array)


def cancelled(shape: Sequence[int]) -> Tensor:
    """Zero as the sum of nonzero constants (the partials 1 and −1 of ``x − x``): a number, not a
    structural zero.  Products keep it, so an infinite partial met on the way gives NaN in every
    elimination order, as IEEE arithmetic (and JAX) give ∞·(1 − 1); a structural zero would
    annihilate the product in the orders that add first and not in those that multiply first."""
    return _intern("const", tuple(shape), (), ("cancelled",), np.zeros(tuple(shape)))


def ones(shape: Sequence[int]) -> Tensor:
    """The unit tensor of all ones (kept symbolic)."""
    return _intern("const", tuple(shape), (), ("ones",))


def zeros(shape: Sequence[int]) -> Tensor:
    """The zero tensor (kept symbolic; dropped from sums, annihilates products)."""
    return _intern("const", tuple(shape), (), ("zeros",))


def delta(n: int) -> Tensor:
    """The Kronecker δ of extent ``n`` (an ``n × n`` identity, kept symbolic)."""
    return _intern("const", (n, n), (), ("delta",))


# ---------------------------------------------------------------------------- operations
def _parse(subscripts: str, n: int) -> tuple[list[str], str]:
    lhs, _, rhs = subscripts.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != n:
        raise ValueError(f"einsum {subscripts!r} names {len(inputs)} operands, got {n}")
    return inputs, rhs


def einsum(subscripts: str, *operands: Tensor) -> Tensor:
    """The generic multiplication (an explicit-output einsum), simplified.

    Scalar ones are dropped, scalar constants multiplied together, a zero
    operand gives the zero tensor, constants fold, and a single operand whose
    subscripts equal the output is returned as is.

    >>> a = var("a", (3,))
    >>> einsum("i->i", a) is a
    True
    >>> einsum(",i->i", const(0.0), a).is_zero
    True
    """
    inputs, out = _parse(subscripts, len(operands))
    sizes: dict[str, int] = {}
    for labels, op in zip(inputs, operands, strict=True):
        if len(labels) != op.ndim:
            raise ValueError(f"einsum {subscripts!r}: operand of shape {op.shape} under {labels!r}")
        for label, n in zip(labels, op.shape, strict=True):
            if sizes.setdefault(label, n) != n:
                raise ValueError(f"einsum {subscripts!r}: index {label!r} has extents {sizes[label]} and {n}")
    shape = tuple(sizes[c] for c in out)
    if any(op.is_zero for op in operands):
        return zeros(shape)
    inputs, operands = _drop_unit_sums(inputs, operands, sizes, out)
    inputs, operands = _summed_deltas_renamed(inputs, operands, out)
    # multiply scalar constants into one factor; drop it when it is 1
    scalar = 1.0
    kept: list[tuple[str, Tensor]] = []
    for labels, op in zip(inputs, operands, strict=True):
        if op.is_scalar_const() and op.param[0] != "cancelled":  # a cancelled zero multiplies as a number
            scalar *= float(op.value)
        else:
            kept.append((labels, op))
    if scalar != 1.0:
        kept.append(("", const(scalar)))
    if not kept:
        return const(scalar) if out == "" else _broadcast_scalar(scalar, shape)
    if len(kept) == 1 and kept[0][0] == out:
        return kept[0][1]
    if len(kept) == 2:  # commutativity (paper 002, Lemma 2): B *(s2,s1,s3) A is A *(s1,s2,s3) B if built
        swapped = f"{kept[1][0]},{kept[0][0]}->{out}"
        found = _INTERN.get(("einsum", shape, (id(kept[1][1]), id(kept[0][1])), swapped))
        if found is not None and found.args == (kept[1][1], kept[0][1]):
            return found
    subs = ",".join(labels for labels, _ in kept) + "->" + out
    args = tuple(op for _, op in kept)
    # a scaled δ stays a scatter (delta_expansion): folded, c·δ would be a dense constant that a
    # sum then adds entry by entry instead of along its diagonal
    if all(op.kind == "const" for op in args) and max(math.prod(shape), *(op.size for op in args)) <= FOLD_LIMIT \
            and delta_expansion(subs, args) is None:
        return const(np.einsum(subs, *(op.value for op in args)))
    return _intern("einsum", shape, args, subs)


def _drop_unit_sums(inputs: list[str], operands: Sequence[Tensor], sizes: dict[str, int],
                    out: str) -> tuple[list[str], tuple[Tensor, ...]]:
    """The einsum's terms without the summed letters of extent 1 that only constants carry.

    Summing over one entry reads that entry, so the constants are indexed at 0 along those axes
    and the letters dropped.  What a broadcast traces to (``[:, None]`` against a matrix: a unit
    axis summed against ones) then stays an elementwise product, which a fused region takes in,
    instead of a reduction, which ends one.

    >>> a = var("a", (3,))
    >>> einsum("k,i,j->ij", ones((1,)), a, ones((4,))).param
    'i,j->ij'
    """
    unit = {c for c, n in sizes.items() if n == 1 and c not in out}
    unit -= {c for labels, op in zip(inputs, operands, strict=True) if op.kind != "const" for c in labels}
    if not unit:
        return inputs, tuple(operands)
    new_inputs, new_operands = [], []
    for labels, op in zip(inputs, operands, strict=True):
        if any(c in unit for c in labels):
            kept = [k for k, c in enumerate(labels) if c not in unit]
            new_shape = tuple(op.shape[k] for k in kept)
            op = ones(new_shape) if op.param[0] == "ones" else const(np.asarray(op.value).reshape(new_shape))
            labels = "".join(labels[k] for k in kept)
        new_inputs.append(labels)
        new_operands.append(op)
    return new_inputs, tuple(new_operands)


def _summed_deltas_renamed(inputs: list[str], operands: Sequence[Tensor], out: str) -> tuple[list[str], tuple[Tensor, ...]]:
    """The einsum's terms without the δs that tie a summed letter: ``δ(j, k)`` with ``k`` summed
    says ``k = j``, so ``k`` is renamed ``j`` in the other terms and the δ dropped (where ``j``
    is then in no other term, the δ's diagonal stays as ones along ``j``: ``Σᵢⱼ δ(i, j)`` is n).  A contraction against a δ written as a
    dense identity costs ``n`` times the FLOPs of the renamed one and reads its ``n²`` entries
    (a Gaussian process's Hessian: ``ijk,jk,nj,nk->in`` against two identities, 10⁷ FLOPs, is
    ``ijj,jj->ij``, 10³); a δ whose letters both stay in the output is a scatter
    (:func:`delta_expansion`) and stays.

    >>> a, b = var("a", (2, 3, 3)), var("b", (3, 3))
    >>> einsum("ijk,jk,nk->in", a, delta(3), b).param
    'ijj,nj->in'
    """
    inputs, operands = list(inputs), list(operands)
    while True:
        tied = next((k for k, op in enumerate(operands) if op.kind == "const" and op.param[0] == "delta"
                     and (inputs[k][0] not in out or inputs[k][1] not in out)), None)
        if tied is None:
            return inputs, tuple(operands)
        first, second = inputs[tied]
        keep, gone = (second, first) if first not in out and second in out else (first, second)
        n = operands[tied].shape[0]
        del inputs[tied], operands[tied]
        inputs = [labels.replace(gone, keep) for labels in inputs]
        if not any(keep in labels for labels in inputs):  # j nowhere else: the δ's diagonal, ones along j
            inputs.append(keep)
            operands.append(ones((n,)))


def _broadcast_scalar(scalar: float, shape: Shape) -> Tensor:
    return ones(shape) if scalar == 1.0 else _intern("einsum", shape, (const(scalar), ones(shape)),
                                                     "," + index_letters(len(shape)) + "->" + index_letters(len(shape)))


def index_letters(n: int, start: int = 0) -> str:
    """The einsum index letters ``symbol(start) … symbol(start + n - 1)``.

    >>> index_letters(3), index_letters(2, 3)
    ('ijk', 'lm')
    """
    return "".join(symbol(k) for k in range(start, start + n))


def scale(factor: float, a: Tensor) -> Tensor:
    """``factor · a`` as an einsum with a scalar constant."""
    labels = index_letters(a.ndim)
    return einsum(f",{labels}->{labels}", const(factor), a)


def add(*terms: Tensor) -> Tensor:
    """The sum of tensors of one shape (zeros dropped, nested sums flattened, constants folded)."""
    if not terms:
        raise ValueError("add needs at least one term")
    shape = terms[0].shape
    flat: list[Tensor] = []
    for t in terms:
        if t.shape != shape:
            raise ValueError(f"add: shapes {shape} and {t.shape} differ")
        if t.is_zero:
            continue
        flat.extend(t.args if t.kind == "add" else (t,))
    if not flat:
        return zeros(shape)
    if len(flat) == 1:
        return flat[0]
    if all(t.kind == "const" for t in flat) and math.prod(shape) <= FOLD_LIMIT:
        total = sum(t.value for t in flat)
        return cancelled(shape) if not np.any(total) else const(total)
    flat.sort(key=lambda t: t.serial)  # a sum is commutative: one node for any order of its terms
    return _intern("add", shape, tuple(flat), None)


def grouped_sum(*terms: Tensor) -> Tensor:
    """The sum node of exactly ``terms``, a sum among them kept as one term (:func:`add` flattens
    it): for a rewrite that groups terms on purpose.

    >>> a, b, c = var("a", (2,)), var("b", (2,)), var("c", (2,))
    >>> [t.kind for t in grouped_sum(add(a, b), c).args]
    ['add', 'var']
    """
    if len(terms) < 2 or len({t.shape for t in terms}) != 1:
        raise ValueError("grouped_sum needs two or more terms of one shape")
    return _intern("add", terms[0].shape, tuple(terms), None)


def unary(name: str, a: Tensor, p: float | None = None) -> Tensor:
    """Elementwise ``name`` of ``a`` (``p``: the exponent of ``pow``, the constant of ``shift``)."""
    if name not in UNARY:
        raise ValueError(f"unknown elementwise function {name!r}")
    if name == "pow":
        if p == 1:
            return a
        if p == 0:
            return ones(a.shape)
    if name == "shift" and p == 0:
        return a
    param = (name, None if p is None else float(p))
    if a.kind == "const" and a.size <= FOLD_LIMIT:
        with np.errstate(all="ignore"):
            return const(UNARY[name](np, a.value, param[1]))
    return _intern("unary", a.shape, (a,), param)


def elementwise(name: str, *args: Tensor) -> Tensor:
    """The operation ``name`` of the table (:mod:`jacacc.ops`) applied elementwise to ``args``.

    Operands of one shape; a scalar constant is broadcast to it.  A unary
    operation is :func:`unary`.

    Examples
    --------
    >>> a, b = var("a", (3,)), var("b", (3,))
    >>> print(elementwise("maximum", a, b))
    maximum(a, b)
    """
    if len(args) == 1:
        return unary(name, args[0])
    op = ops.get(name)
    if len(args) != op.arity:
        raise ValueError(f"{op.name} takes {op.arity} operand(s), got {len(args)}")
    shape = next((a.shape for a in args if a.ndim), ())
    if any(a.shape not in ((), shape) for a in args):
        raise ValueError(f"{op.name}: operand shapes {[a.shape for a in args]} differ")
    if all(a.kind == "const" for a in args) and math.prod(shape) <= FOLD_LIMIT:
        with np.errstate(all="ignore"):
            return const(np.broadcast_to(op.value(*(a.value for a in args)), shape).copy())
    args = tuple(a if a.shape == shape else _broadcast_scalar_node(a, shape) for a in args)
    return _intern("unary", shape, args, (op.name, None))


def _broadcast_scalar_node(a: Tensor, shape: Shape) -> Tensor:
    labels = index_letters(len(shape))
    return einsum(f",{labels}->{labels}", a, ones(shape))


# ---------------------------------------------------------------------------- walking, costing
def nodes_of(roots: Iterable[Tensor], descend: Callable[[Tensor], bool] | None = None) -> list[Tensor]:
    """Every node reachable from ``roots``, operands before users (a topological order);
    with ``descend``, the walk does not enter the operands of a node for which it is false."""
    order: list[Tensor] = []
    seen: set[int] = set()
    for root in roots:
        stack: list[tuple[Tensor, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            if descend is None or descend(node):
                stack.extend((a, False) for a in reversed(node.args) if id(a) not in seen)
    return order


def reader_counts(nodes: Iterable[Tensor], roots: Iterable[Tensor]) -> dict[int, int]:
    """How many reads of each node (by id) there are among ``nodes`` — an operand used twice by one
    node read twice — each root read once more, by whoever asked for it: a node read once is one
    a rewrite of its only reader may drop.

    >>> x = var("x", (2,))
    >>> y = add(x, unary("exp", x))
    >>> counts = reader_counts(nodes_of([y]), [y])
    >>> counts[id(x)], counts[id(y)]
    (2, 1)
    """
    counts: dict[int, int] = {}
    for node in nodes:
        for a in node.args:
            counts[id(a)] = counts.get(id(a), 0) + 1
    for r in roots:
        counts[id(r)] = counts.get(id(r), 0) + 1
    return counts


#: Most passes :func:`fuse_einsums` makes to reach a DAG that another pass leaves alone.
MAX_FUSION_PASSES = 8
#: Most operands a fused einsum gets (:func:`fuse_einsums`).
MAX_FUSED_OPERANDS = 6


@functools.lru_cache(maxsize=8192)
def contraction_path(subscripts: str, shapes: tuple[Shape, ...]) -> tuple[tuple[tuple[int, ...], ...], int]:
    """The pairwise contraction order of an einsum and its FLOPs (opt_einsum's cost model).

    The cheapest of opt_einsum's exhaustive ("optimal", up to four operands),
    dynamic-programming and greedy paths, ties broken by the largest
    intermediate: no single optimizer wins everywhere ("optimal" keeps a
    scalar factor first and then misses a cheaper bracketing that "dp" finds).
    The evaluator runs exactly this path, so the FLOPs reported are those run.
    """
    import opt_einsum

    n = len(shapes)
    strategies = ["optimal"] if n <= 2 else (["optimal", "dp", "greedy"] if n <= 4 else ["dp", "greedy"])
    best: tuple[int, int, Any] | None = None
    for strategy in strategies:
        try:
            path, info = opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize=strategy)
        except RuntimeError:  # "dp" finds no path when an extent is zero
            continue
        key = (int(info.opt_cost), int(info.largest_intermediate), path)
        if best is None or key[:2] < best[:2]:
            best = key
    presummed = _presummed_path(subscripts, shapes)
    if presummed is not None and best is not None:
        _, info = opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize=[list(s) for s in presummed])
        key = (int(info.opt_cost), int(info.largest_intermediate), presummed)
        if key[:2] < best[:2]:
            best = key
    if best is None:
        if not any(0 in shape for shape in shapes):
            raise RuntimeError(f"opt_einsum found no contraction path for {subscripts!r} on shapes {shapes}")
        return tuple((0, 1) for _ in range(n - 1)), 0  # nothing to compute: any order, no FLOPs
    return tuple(tuple(step) for step in best[2]), best[0]


def _presummed_path(subscripts: str, shapes: tuple[Shape, ...]) -> tuple[tuple[int, ...], ...] | None:
    """A path that first sums each operand over its own letters (summed, in no other operand),
    then contracts the rest on :func:`contraction_path`'s path; None where no operand has such a
    letter.  opt_einsum's paths are pairwise: ``j,ik->ij`` (a row sum spread over ``j`` by ones)
    is one ``i × j × k`` loop there, ``i × k`` then ``i × j`` here.

    >>> _presummed_path("j,ik->ij", ((8,), (1024, 8)))
    ((1,), (0, 1))
    """
    inputs, out = _parse(subscripts, len(shapes))
    if len(inputs) < 2:
        return None
    holders: dict[str, set[int]] = {}
    for k, term in enumerate(inputs):
        for c in term:
            holders.setdefault(c, set()).add(k)
    extent = {c: n for term, shape in zip(inputs, shapes, strict=True) for c, n in zip(term, shape, strict=True)}
    own = [{c for c in term if c not in out and holders[c] == {k} and extent[c] > 1} for k, term in enumerate(inputs)]
    presum = [k for k, term in enumerate(inputs) if own[k] and len(set(term)) == len(term)]
    if not presum:
        return None
    order, path = list(range(len(inputs))), []
    for k in presum:  # each step pops one operand and appends its sum at the end
        path.append((order.index(k),))
        order.remove(k)
        order.append(k)
    terms = ["".join(c for c in inputs[k] if c not in own[k]) if k in presum else inputs[k] for k in order]
    rest, _ = contraction_path(",".join(terms) + "->" + out, tuple(_shape_of(t, extent) for t in terms))
    return tuple(path) + rest


def _shape_of(term: str, extent: dict[str, int]) -> Shape:
    return tuple(extent[c] for c in term)


def einsum_flops(subscripts: str, shapes: Sequence[Shape]) -> int:
    """FLOPs of an einsum by opt_einsum's cost model, on the path :func:`contraction_path` picks.

    A pure relabelling of one operand (a transpose) costs nothing: NumPy
    returns a view.
    """
    inputs, out = _parse(subscripts, len(shapes))
    if len(inputs) == 1 and sorted(inputs[0]) == sorted(out) and len(set(out)) == len(out):
        return 0
    return contraction_path(subscripts, tuple(tuple(s) for s in shapes))[1]


@dataclass(frozen=True)
class DeltaExpansion:
    """How an einsum that only spreads values over δ diagonals and broadcasts is evaluated.

    An einsum whose unit operands (δs, ones) all keep their indices in the
    output — a dense Hessian written out from its compressed form, ``δ(i,i')·S``
    — is a *scatter*, not a product: the zero array of the output is viewed
    through one axis per class of δ-tied output axes (strides summed), and the
    product of the other operands (the *core*, contracted over what the output
    lacks) is written into that view, broadcast along classes the core lacks.
    Only the core's contraction does arithmetic.

    Attributes
    ----------
    core : str
        Subscripts of the core contraction (``""``: no core, the value is 1).
    core_args : tuple of int
        Positions of the core's operands among the einsum's.
    class_axes : tuple of tuple of int
        Output axes of each class, the core's output classes first.
    """

    core: str
    core_args: tuple[int, ...]
    class_axes: tuple[tuple[int, ...], ...]


def delta_expansion(subscripts: str, operands: Sequence[Tensor]) -> DeltaExpansion | None:
    """The scatter plan of an einsum with δ operands (see :class:`DeltaExpansion`),
    or ``None`` when it has none or a δ index is summed."""
    inputs, out = _parse(subscripts, len(operands))
    units = [k for k, op in enumerate(operands) if op.kind == "const" and op.param[0] in ("delta", "ones")]
    if not any(operands[k].param[0] == "delta" for k in units):
        return None
    if any(c not in out for k in units for c in inputs[k]):
        return None
    parent = {c: c for c in out}

    def find(c: str) -> str:
        while parent[c] != c:
            c = parent[c]
        return c

    for k in units:
        if operands[k].param[0] == "delta":
            a, b = inputs[k]
            parent[find(b)] = find(a)
    core_args = tuple(k for k in range(len(operands)) if k not in units)
    rename = {c: find(c) if c in parent else c for k in core_args for c in inputs[k]}
    core_inputs = ["".join(rename[c] for c in inputs[k]) for k in core_args]
    classes = list(dict.fromkeys(find(c) for c in out))
    core_out = "".join(c for c in dict.fromkeys("".join(core_inputs)) if c in classes)
    ordered = list(core_out) + [c for c in classes if c not in core_out]
    class_axes = tuple(tuple(n for n, c in enumerate(out) if find(c) == r) for r in ordered)
    core = ",".join(core_inputs) + "->" + core_out if core_args else ""
    return DeltaExpansion(core, core_args, class_axes)


def node_flops(node: Tensor) -> int:
    """FLOPs of one node: its einsum's cost (for a δ scatter, its core's:
    :class:`DeltaExpansion`), one per element per extra term of a sum, one per
    element of an elementwise function; leaves cost nothing."""
    if node._flops is None:
        # fusion weighs each candidate einsum several times over its passes: counted once
        node._flops = _count_flops(node)
    return node._flops


def _count_flops(node: Tensor) -> int:
    if node.kind == "einsum":
        expansion = delta_expansion(node.param, node.args)
        if expansion is not None:
            if not expansion.core:
                return 0
            return einsum_flops(expansion.core, [node.args[k].shape for k in expansion.core_args])
        return einsum_flops(node.param, [a.shape for a in node.args])
    if node.kind == "add":
        return node.size * (len(node.args) - 1)
    if node.kind == "unary":
        return node.size
    if node.kind == "fused":  # a region of nodes run as one kernel (jacacc.tensor.fusion): theirs
        return int(node.param.flops)
    if node.kind == "op":  # counted once per application, on its first output
        name, options, index = node.param
        return 0 if index else int(OPERATORS[name].flops(*(a.shape for a in node.args), **dict(options)))
    return 0


def with_args(node: Tensor, args: tuple[Tensor, ...]) -> Tensor:
    """``node`` with its operands replaced by ``args``: the same kind, shape and parameter, not
    simplified again (``node`` itself where nothing changed).

    >>> a, b = var("a", (2,)), var("b", (2,))
    >>> with_args(unary("exp", a), (b,)) is unary("exp", b)
    True
    """
    if all(x is y for x, y in zip(args, node.args, strict=True)):
        return node
    return _intern(node.kind, node.shape, args, node.param, node._value)


def rebuild(roots: Sequence[Tensor], rewrite: Callable[[Tensor, Tensor], Tensor]) -> list[Tensor]:
    """``roots`` rewritten bottom-up: each node, operands first, is rebuilt on its operands'
    rewrites (:func:`with_args`) and replaced by ``rewrite(original, rebuilt)``.

    >>> a, b = var("a", (2,)), var("b", (2,))
    >>> y = einsum("i,i->", unary("exp", a), b)
    >>> (z,) = rebuild([y], lambda old, new: b if old is a else new)
    >>> z is einsum("i,i->", unary("exp", b), b)
    True
    """
    new: dict[int, Tensor] = {}
    for node in nodes_of(roots):
        new[id(node)] = rewrite(node, with_args(node, tuple(new[id(a)] for a in node.args)))
    return [new[id(r)] for r in roots]


def flops_of(roots: Iterable[Tensor], exclude: Iterable[Tensor] = ()) -> int:
    """Total FLOPs of evaluating ``roots`` once, each shared node counted once,
    nodes also reachable from ``exclude`` (already computed) not counted."""
    skip = {id(n) for n in nodes_of(exclude)}
    return sum(node_flops(n) for n in nodes_of(roots) if id(n) not in skip)


# ---------------------------------------------------------------------------- fusion
def fuse_einsums(roots: Sequence[Tensor], max_operands: int = MAX_FUSED_OPERANDS) -> list[Tensor]:
    """``roots`` with every einsum that feeds exactly one other einsum (and is no
    root) inlined into it, so that opt_einsum plans the whole contraction.

    Elimination builds products two factors at a time in the order of the
    elimination sequence; a chain of such binary products can force a large
    intermediate that another bracketing avoids (the matrix-factorization
    Hessian's ``V *(jk,ij,jl)`` chain builds an ``n × k × n`` tensor pairwise
    but only ``n × k²`` when ``V ⊗ V`` is formed first).  Fusing gives the path
    optimizer the choice; the result has the same value, and since the binary
    bracketing is one of the paths "optimal" considers, never more FLOPs.

    >>> A, B, C = var("A", (50, 2)), var("B", (2, 50)), var("C", (50,))
    >>> y = einsum("ij,j->i", einsum("ik,kj->ij", A, B), C)
    >>> fused = fuse_einsums([y])[0]
    >>> fused.param, flops_of([fused]) < flops_of([y])
    ('ik,kj,j->i', True)

    Where inlining an operand would cost more FLOPs it is kept apart (:func:`_cheapest_inlining`);
    since a node kept apart in one pass may be used once after the next, passes repeat until
    nothing changes, so fusing a fused expression changes nothing.  Each einsum also weighs its
    whole chain of single-use einsums inlined at once, taken where that costs fewer FLOPs and
    writes no more entries to intermediates (:func:`_exclusive_cost`) than the pairwise choices:
    a bracketing that crosses two levels (``a ⊗ b``, times ``c``, summed against ``a``) is
    cheaper only as a whole, each of its steps alone a tie.
    """
    roots = list(roots)
    memo: dict[tuple, tuple] = {}
    for _ in range(MAX_FUSION_PASSES):
        fused = _fuse_once(roots, max_operands, memo)
        if all(a is b for a, b in zip(fused, roots, strict=True)):
            break
        roots = fused
    return roots


def _fuse_once(roots: Sequence[Tensor], max_operands: int, memo: dict[tuple, tuple]) -> list[Tensor]:
    """One pass of :func:`fuse_einsums` over the DAG of ``roots``.

    ``memo`` carries each einsum's choice from one pass to the next: a node met again with the
    same fused operands, flags and operand costs chooses the same (most of the DAG after the
    first pass), so only what changed is weighed again.  The memo holds the nodes it is keyed by,
    so their ids stay theirs while it lives.
    """
    order = nodes_of(roots)
    uses: dict[int, int] = {}
    read_by_other: set[int] = set()  # read by a node that is no einsum
    for node in order:
        for a in node.args:
            uses[id(a)] = uses.get(id(a), 0) + 1
            if node.kind != "einsum":
                read_by_other.add(id(a))
    keep = {id(r) for r in roots}
    spread = {id(n) for n in order if id(n) not in keep and id(n) not in read_by_other and _spreads(n)}
    fused: dict[int, Tensor] = {}
    # per einsum: what the nodes only it uses cost as fused (``total``; ``own``: its own share) --
    # FLOPs and entries written to intermediates -- and the deep candidate, every single-use einsum
    # below it inlined, with the same two counts
    total: dict[int, tuple[int, int]] = {}
    own: dict[int, tuple[int, int]] = {}
    deep: dict[int, tuple[Tensor, tuple[int, int], tuple[int, int]]] = {}
    for node in order:
        args = tuple(fused[id(a)] for a in node.args)
        if node.kind != "einsum":
            same = all(a is b for a, b in zip(args, node.args, strict=True))
            fused[id(node)] = node if same else _intern(node.kind, node.shape, args, node.param, node._value)
            continue
        inline = [orig.kind == "einsum" and a.kind == "einsum" and id(orig) not in keep
                  and (uses[id(orig)] == 1 or id(orig) in spread)
                  for orig, a in zip(node.args, args, strict=True)]
        # a spreading product read by several einsums is weighed as each reader's alone: it goes
        # once every reader has taken it in
        counts = [((0, 0), (0, 0)) if uses[id(o)] > 1 else (own.get(id(o), (0, 0)), total.get(id(o), (0, 0)))
                  for o in node.args]
        key = (id(node), tuple(map(id, args)), tuple(inline), tuple(counts))
        if key in memo:
            _, _, fused[id(node)], own[id(node)], total[id(node)], deep[id(node)] = memo[key]
            continue
        if not any(inline):  # nothing to inline: the node itself on its (fused) operands
            chosen = with_args(node, args)
            fused[id(node)] = chosen
            own[id(node)], total[id(node)] = _exclusive_cost(chosen, args, counts, inline)
            deep[id(node)] = (chosen, own[id(node)], total[id(node)])
            memo[key] = (node, args, chosen, own[id(node)], total[id(node)], deep[id(node)])
            continue
        chosen = _cheapest_inlining(node.param, args, inline, max_operands)
        fused[id(node)] = chosen
        own[id(node)], total[id(node)] = _exclusive_cost(chosen, args, counts, inline)
        below = [deep[id(o)] if flag else (a, (0, 0), (0, 0)) for o, a, flag in zip(node.args, args, inline,
                                                                                   strict=True)]
        operands = tuple(b[0] for b in below)
        # an einsum that simplified away (a product with an empty axis, say) is no longer one
        flags = [flag and b.kind == "einsum" for b, flag in zip(operands, inline, strict=True)]
        whole = _inline_operands(node.param, operands, flags, max_operands)
        deep[id(node)] = (whole, *_exclusive_cost(whole, operands, [b[1:] for b in below], inline))
        # a chain whose cheapest bracketing crosses two or more levels (the net's first-layer
        # Hessian: a ⊗ b, then times c, then summed against a again: 34 M FLOPs and two 32⁴
        # arrays kept apart, 33 M and one as a whole) is cheaper only as a whole.  It is taken
        # where it also writes no more: fewer FLOPs bought with larger intermediates (an
        # elementwise product kept apart joins a fused kernel; its pieces inlined do not) lose.
        (_, _, (new_flops, new_written)), (flops, written) = deep[id(node)], total[id(node)]
        if any(inline) and new_flops < flops and new_written <= written:
            fused[id(node)], own[id(node)], total[id(node)] = deep[id(node)]
        memo[key] = (node, args, fused[id(node)], own[id(node)], total[id(node)], deep[id(node)])
    return [fused[id(r)] for r in roots]


#: an einsum that sums nothing and writes this many times the entries of its operands or more
#: (:func:`_spreads`) is inlined into each einsum that reads it, however many, where that costs less
SPREAD_FACTOR = 4


def _spreads(node: Tensor) -> bool:
    """Whether ``node`` is an einsum that only spreads its operands out — it sums nothing and writes
    at least :data:`SPREAD_FACTOR` times the entries it reads: an outer product, ``L[k, i]·Φ[i, j]``
    as an ``n³`` array (a Cholesky's derivative in a Gaussian process's Hessian, 8 MB at n = 100,
    written and then contracted by each of its readers).  Inlined, each reader's contraction path
    need not write it."""
    if node.kind != "einsum" or sums_a_letter(node) or delta_expansion(node.param, node.args) is not None:
        return False
    return node.size >= SPREAD_FACTOR * sum(a.size for a in node.args)


def _exclusive_cost(result: Tensor, args: tuple[Tensor, ...], counts: list[tuple[tuple[int, int], tuple[int, int]]],
                    inline: list[bool]) -> tuple[tuple[int, int], tuple[int, int]]:
    """The FLOPs and the entries written to intermediates of ``result`` itself (its contraction
    path's pairwise results, not its output) and of it with every node only it uses: the nodes
    under each flagged operand (``counts``: the operand's own and its exclusive cost), the
    operand itself (its output written) only where it is kept apart rather than inlined."""
    existing = {id(b) for a in args for b in (a, *a.args)}
    mine = (0, 0) if id(result) in existing else (node_flops(result), _intermediate_entries(result))
    flops, written = mine
    for a, ((their_flops, their_written), (all_flops, all_written)), flag in zip(args, counts, inline, strict=True):
        if not flag:
            continue
        if a is result or any(a is b for b in result.args):
            # a product that sums nothing read by another stays in the fused kernel that computes both
            elementwise = all(b.kind == "einsum" and not sums_a_letter(b) for b in (a, result))
            flops, written = flops + all_flops, written + all_written + (0 if elementwise else a.size)
        else:
            flops, written = flops + all_flops - their_flops, written + all_written - their_written
    return mine, (flops, written)


def sums_a_letter(node: Tensor) -> bool:
    """Whether ``node`` is an einsum that sums over some letter (one its output lacks).

    >>> a = var("a", (2, 3))
    >>> sums_a_letter(einsum("ij->i", a)), sums_a_letter(einsum("ij->ji", a)), sums_a_letter(a)
    (True, False, False)
    """
    if node.kind != "einsum":
        return False
    inputs, out = _parse(node.param, len(node.args))
    return not set(out) >= set("".join(inputs))


def _intermediate_entries(node: Tensor) -> int:
    """The entries of the pairwise results an einsum's contraction path writes before its output;
    none for a product that sums nothing, which a fused kernel (:mod:`jacacc.tensor.fusion`)
    computes in one pass."""
    if node.kind != "einsum" or len(node.args) < 3 or delta_expansion(node.param, node.args) is not None:
        return 0
    inputs, out = _parse(node.param, len(node.args))
    if not sums_a_letter(node):
        return 0
    extent = {c: n for labels, a in zip(inputs, node.args, strict=True) for c, n in zip(labels, a.shape, strict=True)}
    path, _ = contraction_path(node.param, tuple(a.shape for a in node.args))
    terms = list(inputs)
    entries = 0
    for step in path[:-1]:
        taken = [terms.pop(p) for p in sorted(step, reverse=True)]
        rest = set(out).union(*terms)
        result = "".join(dict.fromkeys(c for t in taken for c in t if c in rest))
        entries += math.prod(extent[c] for c in result)
        terms.append(result)
    return entries


def _cheapest_inlining(subscripts: str, args: tuple[Tensor, ...], inline: list[bool], max_operands: int) -> Tensor:
    """:func:`_inline_operands` with every flagged operand inlined where that costs fewer FLOPs
    than keeping them apart; else the flagged operands are inlined one at a time, each only where
    the total shrinks.  At equal FLOPs they stay apart: a product kept apart can join a fused
    region (:mod:`jacacc.tensor.fusion`) where one einsum that sums and spreads over new axes
    (``sum(A**2, 1)[:, None]`` against a matrix, inlined) writes the whole spread array.
    """
    if not any(inline):
        return _inline_operands(subscripts, args, inline, max_operands)
    if _is_permutation(subscripts, len(args)):
        # a transposition of an einsum is that einsum with its output letters reordered: one
        # step instead of two, and nothing larger written
        return _inline_operands(subscripts, args, inline, max_operands)
    existing = {id(b) for a in args for b in (a, *a.args)}

    def cost(flags: list[bool]) -> tuple[int, Tensor]:
        fused = _inline_operands(subscripts, args, flags, max_operands)
        apart = sum(node_flops(a) for a, f, g in zip(args, inline, flags, strict=True) if f and not g)
        # a product that simplifies to one of its operands (a unit axis put in and summed out) costs nothing
        return (0 if id(fused) in existing else node_flops(fused)) + apart, fused

    flags = [False] * len(args)
    best, fused = cost(flags)
    everything, candidate = cost(inline)
    if everything < best:
        return candidate
    for k, flagged in enumerate(inline):
        if flagged:
            trial = flags[:k] + [True] + flags[k + 1:]
            total, candidate = cost(trial)
            if total < best:
                flags, best, fused = trial, total, candidate
    return fused


def _is_permutation(subscripts: str, n_args: int) -> bool:
    """Whether an einsum only reorders the axes of its one operand (``ij->ji``): no letter summed,
    repeated or new.

    >>> _is_permutation("ijk->kij", 1), _is_permutation("ii->i", 1), _is_permutation("ij->i", 1)
    (True, False, False)
    """
    if n_args != 1:
        return False
    (labels,), out = _parse(subscripts, 1)
    return len(set(labels)) == len(labels) and sorted(labels) == sorted(out)


def _inline_operands(subscripts: str, args: tuple[Tensor, ...], inline: list[bool], max_operands: int) -> Tensor:
    """The einsum ``subscripts`` of ``args`` with the einsum operands flagged in
    ``inline`` replaced by their own operands (while at most ``max_operands``)."""
    inputs, out = _parse(subscripts, len(args))
    taken = set(subscripts) - set(",->")
    fresh = (symbol(k) for k in itertools.count() if symbol(k) not in taken)
    count = len(args)
    terms: list[tuple[str, Tensor]] = []
    for labels, a, flag in zip(inputs, args, inline, strict=True):
        if not flag or count - 1 + len(a.args) > max_operands:
            terms.append((labels, a))
            continue
        count += len(a.args) - 1
        inner_inputs, inner_out = _parse(a.param, len(a.args))
        # the inner output's letters become the outer operand's; summed ones get new letters
        rename = dict(zip(inner_out, labels, strict=True))
        for c in dict.fromkeys("".join(inner_inputs)):
            if c not in rename:
                rename[c] = next(fresh)
        terms.extend(("".join(rename[c] for c in ls), b) for ls, b in zip(inner_inputs, a.args, strict=True))
    return einsum(",".join(ls for ls, _ in terms) + "->" + out, *(b for _, b in terms))


# ---------------------------------------------------------------------------- printing
def _const_text(node: Tensor) -> str:
    name = node.param[0]
    if name == "scalar":
        return f"{float(node._value):g}"
    if name == "ones":
        return "1"
    if name in ("zeros", "cancelled"):
        return "0"
    if name == "delta":
        return "δ"
    return f"C{list(node.shape)}"


def _einsum_text(node: Tensor, parts: list[str]) -> str:
    inputs, out = _parse(node.param, len(node.args))
    if len(parts) == 2:
        return f"{parts[0]} *({inputs[0]},{inputs[1]},{out}) {parts[1]}"
    return f"einsum({node.param})({', '.join(parts)})"


def _operator_text(node: Tensor, parts: list[str]) -> str:
    name, options, index = node.param
    flags = ", ".join(f"{k}={v!r}" for k, v in options)
    text = f"{name}{'[' + flags + ']' if flags else ''}({', '.join(parts)})"
    return f"{text}[{index}]" if len(OPERATORS[name].output_shapes(*(a.shape for a in node.args),
                                                                     **dict(options))) > 1 else text


def render(root: Tensor) -> str:
    """``root`` in the paper's notation; subexpressions used more than once are
    named (``t0 = …``) and listed first."""
    order = nodes_of([root])
    uses: dict[int, int] = {}
    for node in order:
        for a in node.args:
            uses[id(a)] = uses.get(id(a), 0) + 1
    names: dict[int, str] = {}
    text: dict[int, str] = {}
    lines: list[str] = []

    def wrap(a: Tensor) -> str:
        t = text[id(a)]
        return f"({t})" if a.kind in ("einsum", "add") and id(a) not in names else t

    for node in order:
        if node.kind == "var":
            t = str(node.param)
        elif node.kind == "const":
            t = _const_text(node)
        elif node.kind == "add":
            t = " + ".join(wrap(a) for a in node.args)
        elif node.kind == "unary":
            name, p = node.param
            inner = ", ".join(text[id(a)] for a in node.args)
            t = f"{name}({inner})" if p is None else f"{name}[{p:g}]({inner})"
        elif node.kind == "op":
            t = _operator_text(node, [text[id(a)] for a in node.args])
        elif node.kind == "fused":
            t = f"fused[{node.param.definition.source}]({', '.join(text[id(a)] for a in node.args)})"
        else:
            t = _einsum_text(node, [wrap(a) for a in node.args])
        if uses.get(id(node), 0) > 1 and node.kind not in ("var", "const") and node is not root:
            name = f"t{len(names)}"
            lines.append(f"{name} = {t}")
            names[id(node)] = name
            t = name
        text[id(node)] = t
    return "\n".join([*lines, text[id(root)]])
