"""Einstein factors: local partial derivatives of tensors with symbolic Kronecker deltas.

An edge ``u → v`` of a tensor computational graph carries ∂v/∂u, a tensor with
the index set ``s_v·s_u`` (paper 002 §3).  Most of these tensors are mostly
deltas: ∂exp(A)/∂A is ``exp(A)[ij] δ[ii'] δ[jj']``, ∂(A·B)/∂A is
``δ[ii'] B[jk]``.  A :class:`Factor` stores only the part that is not a delta —
``tensor`` with its axis labels — and names every axis of the partial by a
label: an axis of ``s_v`` (``out``) and an axis of ``s_u`` (``inp``) that
share a label are tied by a δ, and a label that no axis of ``tensor`` carries
is a broadcast (the partial is constant along it).  The δs are never
materialized unless a final dense result asks for it.

A sum of two factors (two paths meeting, or one input read twice: ``x·x``,
``x ⊗ x``) is one factor where adding the stored tensors stores no more than
both terms together — a δ plus a δ is ``2·δ``, a diagonal plus a dense matrix
a dense matrix.  Otherwise it stays a :class:`FactorSum` of factors with
their own δs (∂(x ⊗ x)/∂x is ``x[j] δ[ii'] + x[i] δ[jj']``, two vectors, not
an ``n³`` tensor), and the chain rule distributes over its terms — paper 002
§2, Lemma 3 (the distributive property of the generic multiplication).

The chain rule on factors (:func:`product`) unifies the labels of the shared
vertex's axes and multiplies the two stored tensors with one einsum — the
generic multiplication ``E(u,w) += E(v,w) *(s_w s_v, s_v s_u, s_w s_u) E(u,v)``
of DESIGN.md's tensor level, with the deltas contracted for free.

Examples
--------
>>> from jacacc.tensor.expr import var, unary
>>> a = var("a", (3,))
>>> e = Factor.from_letters(unary("exp", a), "i", "i", "i", (3,), (3,))   # ∂exp(a)/∂a
>>> s = Factor.from_letters(unary("sin", a), "i", "i", "i", (3,), (3,))
>>> p, flops = product(e, s)       # two diagonal Jacobians: an elementwise product
>>> p.tensor.shape, flops
((3,), 3)
>>> materialize(p).shape
(3, 3)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from jacacc.tensor.expr import Tensor, add, const, delta, einsum, node_flops, ones, symbol

__all__ = ["Factor", "FactorSum", "accumulate", "add_factors", "materialize", "product", "product_of"]

Labels = tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Factor:
    """A partial derivative ∂v/∂u in Einstein form (see the module docstring).

    Attributes
    ----------
    tensor : Tensor or None
        The stored tensor (``None``: the scalar 1, the factor is all deltas).
    labels : tuple of int
        One label per axis of ``tensor``, all distinct, each among ``out + inp``.
    out, inp : tuple of int
        The labels of the axes of v (``s_v``) and of u (``s_u``).
    extent : dict
        label → axis length.
    """

    tensor: Tensor | None
    labels: Labels
    out: Labels
    inp: Labels
    extent: Mapping[int, int] = field(repr=False)

    @classmethod
    def from_letters(cls, tensor: Tensor | None, labels: str, out: str, inp: str,
                     out_shape: Sequence[int], inp_shape: Sequence[int]) -> Factor:
        """A factor from index letters, e.g. ``from_letters(B, "jk", "ik", "ij", C.shape, A.shape)``
        for ∂(A·B)/∂A with ``C = A·B``.  Repeated letters of ``tensor`` take its
        diagonal; letters of ``tensor`` in neither ``out`` nor ``inp`` are summed over."""
        names: dict[str, int] = {}
        extent: dict[int, int] = {}

        def number(letters: str, shape: Sequence[int] | None) -> Labels:
            if shape is not None and len(shape) != len(letters):
                raise ValueError(f"factor letters {letters!r} for an axis list of shape {tuple(shape)}")
            result = []
            for pos, c in enumerate(letters):
                k = names.setdefault(c, len(names))
                if shape is not None and extent.setdefault(k, int(shape[pos])) != shape[pos]:
                    raise ValueError(f"factor letter {c!r} has extents {extent[k]} and {shape[pos]}")
                result.append(k)
            return tuple(result)

        t_labels = number(labels, None if tensor is None else tensor.shape)
        out_l, inp_l = number(out, out_shape), number(inp, inp_shape)
        keep = tuple(dict.fromkeys(k for k in t_labels if k in set(out_l + inp_l)))
        if tensor is not None and keep != t_labels:  # diagonal or summed axes: contract them now
            tensor = einsum(_subs([t_labels], keep), tensor)
        return _relabelled(tensor, keep, out_l, inp_l, extent)

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the dense partial, ``s_v`` axes then ``s_u`` axes."""
        return tuple(self.extent[k] for k in (*self.out, *self.inp))

    @property
    def nbytes(self) -> int:
        """Bytes of the stored tensor in float64 (0 when it is all deltas)."""
        return 0 if self.tensor is None else 8 * self.tensor.size

    @property
    def is_zero(self) -> bool:
        return self.tensor is not None and self.tensor.is_zero

    def layout(self) -> str:
        """The structure in index letters: ``T[jk] -> [ik|ij]`` (``out|inp``), ``1`` for no tensor."""
        letter = {k: symbol(n) for n, k in enumerate(dict.fromkeys((*self.out, *self.inp, *self.labels)))}
        stored = "1" if self.tensor is None else "T[" + "".join(letter[k] for k in self.labels) + "]"
        return (f"{stored} -> [" + "".join(letter[k] for k in self.out) + "|"
                + "".join(letter[k] for k in self.inp) + "]")

    def __repr__(self) -> str:
        return f"Factor({self.layout()}, shape={self.shape})"


def _simplified(tensor: Tensor | None, labels: Labels, out: Labels, inp: Labels, extent: Mapping[int, int]) -> Factor:
    """Drop unit tensors: a scalar 1 or a tensor of ones carries nothing a label cannot say."""
    if tensor is not None and (tensor.is_scalar_const(1.0) or (tensor.kind == "const" and tensor.param == ("ones",))):
        tensor, labels = None, ()
    return Factor(tensor, labels, out, inp, dict(extent))


def _subs(operands: Sequence[Labels], result: Labels) -> str:
    return ",".join("".join(symbol(k) for k in op) for op in operands) + "->" + "".join(symbol(k) for k in result)


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, k: int) -> int:
        root = k
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        self.parent[k] = root
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _built_cost(node: Tensor | None, before: Sequence[Tensor | None]) -> int:
    """FLOPs of ``node`` if the operation built it (not when it is one of its operands).

    A sum flattens the sums among its operands into one node
    (:func:`~jacacc.tensor.expr.add`); their additions are already counted, so
    only the terms it adds are: absorbing n terms into one edge costs n sums,
    not the n²/2 that counting each flattened sum whole would report (and that
    would make a key grow at every absorption into an edge near the vertex)."""
    if node is None or any(node is b for b in before):
        return 0
    if node.kind != "add":
        return node_flops(node)
    counted = sum(node_flops(b) for b in before if b is not None and b.kind == "add")
    return max(0, node_flops(node) - counted)


def product(left: Factor, right: Factor) -> tuple[Factor, int]:
    """The chain rule ``E(u, w) = E(v, w) · E(u, v)`` on factors: ``left`` is
    ∂w/∂v, ``right`` is ∂v/∂u.  Returns the factor and the FLOPs of the einsum built.

    The axes of v (``left.inp`` and ``right.out``) are identified label by
    label; a label of v that ends up on an axis of w or u is a δ and costs
    nothing, the others are summed by the einsum — or, where no stored tensor
    depends on them, multiply the result by their extent.
    """
    if len(left.inp) != len(right.out) or any(left.extent[a] != right.extent[b] for a, b in zip(left.inp, right.out, strict=True)):
        raise ValueError(f"factors do not chain: {left} after {right}")
    off = 1 + max((*left.extent, -1))
    shift = {k: k + off for k in right.extent}
    uf = _UnionFind()
    for a, b in zip(left.inp, right.out, strict=True):
        uf.union(a, shift[b])
    extent = {uf.find(k): n for k, n in left.extent.items()}
    extent.update({uf.find(shift[k]): n for k, n in right.extent.items()})
    out = tuple(uf.find(k) for k in left.out)
    inp = tuple(uf.find(shift[k]) for k in right.inp)
    result = set(out + inp)
    t1 = tuple(uf.find(k) for k in left.labels)
    t2 = tuple(uf.find(shift[k]) for k in right.labels)
    stored = set(t1) | set(t2)
    summed_free = {uf.find(k) for k in left.inp} - result - stored
    scalar = math.prod(extent[k] for k in summed_free)
    keep = tuple(dict.fromkeys(k for k in (*t1, *t2) if k in result))
    operands: list[tuple[Labels, Tensor]] = []
    if left.tensor is not None:
        operands.append((t1, left.tensor))
    if right.tensor is not None:
        operands.append((t2, right.tensor))
    if scalar != 1:
        operands.append(((), const(float(scalar))))
    if not operands:
        tensor = None
    else:
        tensor = einsum(_subs([ls for ls, _ in operands], keep), *(t for _, t in operands))
    cost = _built_cost(tensor, [left.tensor, right.tensor])
    return _relabelled(tensor, keep, out, inp, extent), cost


def _relabelled(tensor: Tensor | None, labels: Labels, out: Labels, inp: Labels, extent: Mapping[int, int]) -> Factor:
    """The factor with labels renumbered 0, 1, ... in order of appearance (bounded labels)."""
    new = {k: n for n, k in enumerate(dict.fromkeys((*out, *inp, *labels)))}
    return _simplified(tensor, tuple(new[k] for k in labels), tuple(new[k] for k in out), tuple(new[k] for k in inp),
                       {new[k]: extent[k] for k in new})


def _expanded(f: Factor, classes: Labels, target: Labels) -> tuple[Tensor | None, Labels, int]:
    """``f``'s stored tensor rewritten over the position classes ``classes``
    (one per axis of out + inp) with axes ``target``: δs where one label of
    ``f`` covers several classes, ones where ``target`` has an axis ``f`` is
    constant along.  Returns tensor, its labels, and the FLOPs built."""
    positions = (*f.out, *f.inp)
    cover: dict[int, list[int]] = {}
    for label, cls in zip(positions, classes, strict=True):
        cover.setdefault(label, [])
        if cls not in cover[label]:
            cover[label].append(cls)
    operands: list[tuple[Labels, Tensor]] = []
    if f.tensor is not None:
        operands.append((tuple(cover[k][0] for k in f.labels), f.tensor))
    have = {c for ls, _ in operands for c in ls}
    extent = {cls: f.extent[label] for label, cls in zip(positions, classes, strict=True)}
    for covered in cover.values():
        first = covered[0]
        for other in covered[1:]:
            operands.append(((first, other), delta(extent[first])))
            have |= {first, other}
    for cls in target:
        if cls not in have:
            operands.append(((cls,), ones((extent[cls],))))
    if not operands:
        return None, (), 0
    tensor = einsum(_subs([ls for ls, _ in operands], target), *(t for _, t in operands))
    return tensor, target, _built_cost(tensor, [f.tensor])


def accumulate(old: Factor, new: Factor) -> tuple[Factor, int]:
    """``old + new`` (absorption): two partials of the same edge.  Axes tied by a δ
    in only one of them are untied (the δ is materialized there), so the sum
    keeps exactly the structure both share.  Returns the factor and its FLOPs."""
    if old.shape != new.shape:
        raise ValueError(f"cannot add factors of shapes {old.shape} and {new.shape}")
    if old.is_zero:
        return new, 0
    if new.is_zero:
        return old, 0
    keys = list(zip((*old.out, *old.inp), (*new.out, *new.inp), strict=True))
    number = {key: n for n, key in enumerate(dict.fromkeys(keys))}
    classes = tuple(number[key] for key in keys)
    cover_old = {cls for label, cls in zip((*old.out, *old.inp), classes, strict=True) if label in old.labels}
    cover_new = {cls for label, cls in zip((*new.out, *new.inp), classes, strict=True) if label in new.labels}
    # the stored axes of the sum: every class either side stores or ties to another
    target = tuple(sorted(cover_old | cover_new | _tied(old, classes) | _tied(new, classes)))
    a, _, cost_a = _expanded(old, classes, target)
    b, _, cost_b = _expanded(new, classes, target)
    a = const(1.0) if a is None else a
    b = const(1.0) if b is None else b
    tensor = add(a, b)
    cost = cost_a + cost_b + _built_cost(tensor, [a, b])
    nc = len(number)
    extent = {cls: old.extent[label] for label, cls in zip((*old.out, *old.inp), classes, strict=True)}
    out = classes[: len(old.out)]
    inp = classes[len(old.out):]
    assert nc == len(extent)
    return _relabelled(tensor, target, out, inp, extent), cost


def _tied(f: Factor, classes: Labels) -> set[int]:
    """Classes that one label of ``f`` spreads over more than one of (a δ to materialize)."""
    spread: dict[int, set[int]] = {}
    for label, cls in zip((*f.out, *f.inp), classes, strict=True):
        spread.setdefault(label, set()).add(cls)
    return {c for covered in spread.values() if len(covered) > 1 for c in covered}


def materialize(f: Factor | FactorSum) -> Tensor:
    """The dense partial as an expression of shape ``f.shape`` (δs and broadcasts written out;
    a :class:`FactorSum` as the sum of its terms written out).

    >>> from jacacc.tensor.expr import var
    >>> materialize(Factor.from_letters(None, "", "i", "i", (3,), (3,))).param   # the identity: δ
    ('delta',)
    """
    if isinstance(f, FactorSum):
        return add(*(materialize(t) for t in f.terms))
    positions = (*f.out, *f.inp)
    classes = tuple(range(len(positions)))
    tensor, _, _ = _expanded(f, classes, classes)
    if tensor is None:  # a scalar partial of a scalar
        return const(1.0)
    return tensor


# ---------------------------------------------------------------------------- sums of factors
def _stored(f: Factor) -> int:
    return 0 if f.tensor is None else f.tensor.size


@dataclass(frozen=True, eq=False)
class FactorSum:
    """A partial that is a sum of factors whose δ structures differ (see the module docstring).

    Two terms are kept apart only where adding them as one factor would store
    more than both together (:func:`add_factors`); terms of one structure are
    always one factor, so a sum has at most as many terms as there are ways
    to tie its axes.

    Attributes
    ----------
    terms : tuple of Factor
        At least two, none zero, all of one shape.

    Examples
    --------
    >>> from jacacc.tensor.expr import var
    >>> x = var("x", (3,))
    >>> left = Factor.from_letters(x, "j", "ij", "i", (3, 3), (3,))   # ∂(x ⊗ x)/∂(first x)
    >>> right = Factor.from_letters(x, "i", "ij", "j", (3, 3), (3,))  # ∂(x ⊗ x)/∂(second x)
    >>> s, _ = add_factors(left, right)
    >>> s.layout(), s.shape
    ('T[j] -> [ij|i] + T[i] -> [ij|j]', (3, 3, 3))
    >>> materialize(s).shape
    (3, 3, 3)
    """

    terms: tuple[Factor, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.terms[0].shape

    @property
    def out(self) -> Labels:
        """The first term's labels of v's axes (their number is what callers read)."""
        return self.terms[0].out

    @property
    def labels(self) -> Labels:
        """The stored labels of its highest-order term: the tensor order cross-country's key ranks by."""
        return max((t.labels for t in self.terms), key=len)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.terms)

    is_zero = False

    def layout(self) -> str:
        return " + ".join(t.layout() for t in self.terms)

    def collapsed(self) -> tuple[Factor, int]:
        """The terms added as one factor (δs they do not share written out), with the FLOPs built:
        for callers that need one stored tensor (a compressed Hessian)."""
        total, flops = self.terms[0], 0
        for t in self.terms[1:]:
            total, cost = accumulate(total, t)
            flops += cost
        return total, flops

    def __repr__(self) -> str:
        return f"FactorSum({self.layout()}, shape={self.shape})"


def _terms(f: Factor | FactorSum) -> tuple[Factor, ...]:
    return f.terms if isinstance(f, FactorSum) else (f,)


def add_factors(old: Factor | FactorSum, new: Factor | FactorSum) -> tuple[Factor | FactorSum, int]:
    """``old + new`` (absorption) keeping structure: each term of ``new`` is added into a
    term of the sum where the two as one factor store no more than both apart
    (:func:`accumulate`: equal δs, a δ into a diagonal or a dense tensor), else kept
    as a term of its own.  Returns a :class:`Factor` or a :class:`FactorSum`, and the FLOPs built.

    A sum of scaled identities, diagonals and dense partials is thereby one factor
    of the largest of them; only terms whose δs tie different axes (∂(x ⊗ x)/∂x,
    ∂(BBᵀ)/∂B) stay apart — adding those would write a δ out into a tensor larger
    than both terms together.
    """
    if old.shape != new.shape:
        raise ValueError(f"cannot add factors of shapes {old.shape} and {new.shape}")
    terms = [t for t in _terms(old) if not t.is_zero]
    flops = 0
    for term in _terms(new):
        if term.is_zero:
            continue
        for k, kept in enumerate(terms):
            merged, cost = accumulate(kept, term)
            # a scalar counts as nothing stored: δ + δ is the scalar 2 on a δ
            if _stored(merged) <= max(1, _stored(kept) + _stored(term)):
                terms[k] = merged
                flops += cost
                break
        else:
            terms.append(term)
    if not terms:  # every term zero: the zero factor of the old
        return (old if isinstance(old, Factor) else old.terms[0]), 0
    return (terms[0] if len(terms) == 1 else FactorSum(tuple(terms))), flops


def product_of(left: Factor | FactorSum, right: Factor | FactorSum) -> tuple[Factor | FactorSum, int]:
    """The chain rule :func:`product` on factors or sums of factors: distributed over the
    terms (paper 002, Lemma 3), the products added by :func:`add_factors`.  Returns the
    partial and the FLOPs built."""
    if isinstance(left, Factor) and isinstance(right, Factor):
        return product(left, right)
    total: Factor | FactorSum | None = None
    flops = 0
    for a in _terms(left):
        for b in _terms(right):
            p, cost = product(a, b)
            flops += cost
            if total is None:
                total = p
            else:
                total, cost = add_factors(total, p)
                flops += cost
    assert total is not None
    return total, flops
