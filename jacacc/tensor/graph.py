"""The tensor computational graph: expression DAG vertices, Einstein-factor edges (paper 002 §3).

:func:`tensor_graph` turns an expression DAG into a
:class:`~jacacc.graph.CompGraph` whose vertices are the tensors on a path from
the differentiated arguments to the outputs and whose edge ``u → v`` carries
the local partial ∂v/∂u as a :class:`~jacacc.tensor.factor.Factor`:

* a multiplication ``C = A *(s1,s2,s3) B``: ∂C/∂A is B with the labels of its
  axes, the axes of C and A labelled by ``s3`` and ``s1`` — where they share
  a letter, a δ (Theorems 5 and 8 are this factor times the pushforward /
  pullback);
* an elementwise function ``C = f(A)``: ``f'(A)`` on shared labels, a vector
  and not a diagonal matrix (Theorems 7 and 10);
* an addition: a pure δ (the identity);
* a general unary function (Theorems 6 and 9): its registered Jacobian rule.

The graph's :meth:`TensorGraph.edge_algebra` is a :class:`FactorAlgebra`: the
scalar core's vertex elimination engine and order heuristics, run on this
graph, multiply factors (an einsum per predecessor/successor pair) and cost
an elimination in FLOPs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import networkx as nx

from jacacc import ops
from jacacc.graph import CompGraph
from jacacc.tensor.expr import Tensor, add, const, einsum, elementwise, nodes_of, scale, unary, zeros
from jacacc.tensor.factor import Factor
from jacacc.tensor.linear import LinearPartial, OperatorPartial, Partial, add_partials, chain

__all__ = ["FactorAlgebra", "TensorBuilder", "TensorGraph", "elementwise_derivatives", "local_partials", "register_partial", "tensor_graph"]

Edge = tuple[Hashable, Hashable]
PartialRule = Callable[[Tensor, int], Partial | None]


# ---------------------------------------------------------------------------- local partials
class TensorBuilder:
    """The operation table's builder (:class:`jacacc.ops.Builder`) for tensor expressions.

    Values are nodes of the elementwise node's shape or scalar constants; a
    product with a scalar constant is a scaling, a sum with one a shift, any
    other product the elementwise generic multiplication ``A *(s,s,s) B``.
    """

    def constant(self, value: float) -> Tensor:
        return const(value)

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        if b.is_scalar_const() and a.ndim:
            a, b = b, a
        if a.is_scalar_const() and b.ndim:
            return unary("shift", b, float(a.value))
        return add(a, b)

    def multiply(self, a: Tensor, b: Tensor) -> Tensor:
        if b.is_scalar_const():
            a, b = b, a
        if a.is_scalar_const():
            return scale(float(a.value), b)
        letters = _letters(max(a.ndim, b.ndim))
        return einsum(f"{letters},{letters}->{letters}", a, b)

    def divide(self, a: Tensor, b: Tensor) -> Tensor:
        return self.multiply(a, unary("reciprocal", b))

    def power(self, a: Tensor, exponent: float) -> Tensor:
        return unary("reciprocal", a) if exponent == -1.0 else unary("pow", a, exponent)

    def call(self, name: str, args: Sequence[Tensor]) -> Tensor:
        return elementwise(name, *args)


_BUILDER = TensorBuilder()


def elementwise_derivatives(node: Tensor) -> list[Tensor]:
    """``∂C/∂A_k`` of an elementwise node ``C = f(A_1, …)``, one per operand, as expressions.

    The derivatives are the operation table's (:mod:`jacacc.ops`), built with
    the nodes already there (``exp' = C``, ``tanh' = 1 − C²``) so they reuse
    the function's values; the symbolic zero of the node's shape where a partial is zero (the
    operation table's :data:`~jacacc.ops.ZERO`, which every builder shares, stops here).
    ``shift``, and ``pow`` with a constant exponent, carry their constant second operand in the node.
    """
    name, p = node.param
    if name == "pow" and len(node.args) == 1:
        derivatives = ops.partials("pow", _BUILDER, (node.args[0], p), node)[:1]
    elif name == "shift":
        derivatives = ops.partials("add", _BUILDER, (node.args[0], p), node)[:1]
    else:
        derivatives = ops.partials(name, _BUILDER, node.args, node, active=[True] * len(node.args))
    return [zeros(node.shape) if d is ops.ZERO else d for d in derivatives]


def _letters(n: int) -> str:
    return "".join(chr(ord("a") + k) for k in range(n))


def _einsum_partial(node: Tensor, k: int) -> Factor:
    """∂C/∂A_k of ``C = einsum(A_1, …)``: the other operands, contracted over
    what neither C nor A_k indexes (Theorems 5 and 8)."""
    lhs, out = node.param.split("->")
    inputs = lhs.split(",")
    others = [(inputs[m], a) for m, a in enumerate(node.args) if m != k]
    wanted = set(out) | set(inputs[k])
    keep = "".join(dict.fromkeys(c for labels, _ in others for c in labels if c in wanted))
    tensor = einsum(",".join(ls for ls, _ in others) + "->" + keep, *(a for _, a in others)) if others else None
    return Factor.from_letters(tensor, keep if others else "", out, inputs[k], node.shape, node.args[k].shape)


def _add_partial(node: Tensor, k: int) -> Factor:
    letters = _letters(node.ndim)
    return Factor.from_letters(None, "", letters, letters, node.shape, node.shape)


def _unary_partial(node: Tensor, k: int) -> Factor | None:
    derivative = elementwise_derivatives(node)[k]
    if derivative is zeros(node.shape):  # the structural zero; a computed 0 stays a number
        return None
    letters = _letters(node.ndim)
    labels = letters if derivative.ndim else ""
    return Factor.from_letters(derivative, labels, letters, letters, node.shape, node.shape)


def _operator_partial(node: Tensor, k: int) -> OperatorPartial:
    """∂C/∂A_k of a general function (Theorems 6 and 9): a linear map given by the
    operator's declared pushforward and pullback, never written out."""
    return OperatorPartial(node, k)


_RULES: dict[str, PartialRule] = {"einsum": _einsum_partial, "add": _add_partial, "unary": _unary_partial,
                                  "op": _operator_partial}


def register_partial(kind: str, rule: PartialRule) -> None:
    """Register the local-partial rule of a node kind: ``rule(node, k)`` returns
    ∂node/∂node.args[k] as a Factor (``None`` when it is zero).  General unary
    functions (Theorems 6 and 9, e.g. the linear-algebra operators) add theirs here."""
    _RULES[kind] = rule


def local_partials(node: Tensor, depends: Callable[[Tensor], bool]) -> dict[int, Partial]:
    """The nonzero partials of ``node`` w.r.t. each distinct operand that ``depends``,
    keyed by operand position of first appearance.

    An operand read more than once (``x * x``, ``x @ x``, ``np.outer(x, x)``, ``t + t``)
    gets the sum of its partials, added by structure
    (:func:`~jacacc.tensor.linear.add_partials`): ``δ + δ`` is ``2·δ``, ``diag(x) + diag(x)``
    a diagonal, and terms whose δs tie different axes (∂(x ⊗ x)/∂x) a
    :class:`~jacacc.tensor.factor.FactorSum` — never a dense tensor nor a linear map.
    """
    try:
        rule = _RULES[node.kind]
    except KeyError:
        raise ValueError(f"no partial rule for nodes of kind {node.kind!r}") from None
    found: dict[int, Partial] = {}
    first: dict[int, int] = {}
    for k, a in enumerate(node.args):
        if not depends(a):
            continue
        f = rule(node, k)
        if f is None or f.is_zero:
            continue
        position = first.setdefault(id(a), k)
        found[position] = add_partials(found[position], f)[0] if position in found else f
    return found


# ---------------------------------------------------------------------------- the algebra
def _memoized(cache: dict, operation: Callable[[Partial, Partial], tuple[Partial, int]],
              a: Partial, b: Partial) -> tuple[Partial, int]:
    """``operation(a, b)`` looked up by the operands' ids (the cache holds the operands, so their
    ids cannot be reused while cached)."""
    key = (id(a), id(b))
    cached = cache.get(key)
    if cached is None:
        cached = cache[key] = (a, b, *operation(a, b))
    return cached[2], cached[3]


class FactorAlgebra:
    """The edge algebra of a tensor graph: factors on edges, einsums as products, FLOPs as costs.

    Passed to (or picked up by) :class:`~jacacc.eliminate.state.EliminationGraph`
    as its recorder: every combination ``(i,k) += (j,k)·(i,j)`` the engine makes
    is a :func:`~jacacc.tensor.factor.product` (distributed over the terms of a
    :class:`~jacacc.tensor.factor.FactorSum`), and an absorption adds by structure
    (:func:`~jacacc.tensor.factor.add_factors`: one factor where that stores no
    more than the terms apart, else a sum of factors); ``flops`` sums the FLOPs
    of the einsums and sums actually built.
    """

    def __init__(self, factors: dict[Edge, Partial]) -> None:
        self.factors = dict(factors)
        self.flops = 0
        #: The graph has general functions' edges (linear maps): derive leaves the vertices
        #: next to one to :func:`~jacacc.tensor.linear.accumulate_by_sweeps`.
        self.lazy_sums = any(isinstance(p, LinearPartial) for p in self.factors.values())
        self._products: dict[tuple[int, int], tuple[Partial, Partial, Partial, int]] = {}
        self._sums: dict[tuple[int, int], tuple[Partial, Partial, Partial, int]] = {}

    def copy(self) -> FactorAlgebra:
        """The same values and FLOPs so far, independent from here on (products cache shared)."""
        other = FactorAlgebra(self.factors)
        other.flops = self.flops
        other._products = self._products
        other._sums = self._sums
        return other

    def _product(self, left: Partial, right: Partial) -> tuple[Partial, int]:
        return _memoized(self._products, chain, left, right)

    def _sum(self, old: Partial, new: Partial) -> tuple[Partial, int]:
        # an absorption priced by a heuristic's key is priced again at each refresh of that key
        # (add_factors compares δ structures: a quarter of a millisecond), and then built
        return _memoized(self._sums, add_partials, old, new)

    def multiply(self, target: Edge, left: Edge, right: Edge, *, new: bool) -> None:
        result, cost = self._product(self.factors[left], self.factors[right])
        if not new:
            result, extra = self._sum(self.factors[target], result)
            cost += extra
        self.factors[target] = result
        self.flops += cost

    def remove(self, edge: Edge) -> None:
        self.factors.pop(edge, None)

    def combine_cost(self, i: Hashable, j: Hashable, k: Hashable, *, new: bool) -> int:
        result, cost = self._product(self.factors[(j, k)], self.factors[(i, j)])
        if not new:
            cost += self._sum(self.factors[(i, k)], result)[1]
        return cost

    def max_order(self, i: Hashable, j: Hashable, k: Hashable) -> int:
        """The tensor order of the stored product of (j,k) and (i,j) (paper 002's cross-country key)."""
        result, _ = self._product(self.factors[(j, k)], self.factors[(i, j)])
        return len(result.labels)


class TensorGraph(CompGraph):
    """A :class:`~jacacc.graph.CompGraph` of tensors whose edges carry Einstein factors.

    Vertices are integers (positions in the expression's topological order);
    ``tensors[v]`` is the expression node of vertex ``v`` and ``factors[(u, v)]``
    the partial ∂v/∂u.  Edge ``partial`` attributes are left empty (structure
    only): the values live in the factors, and the engines reach them through
    :meth:`edge_algebra`.
    """

    def __init__(self, digraph: nx.DiGraph, inputs: Sequence[int], outputs: Sequence[int],
                 tensors: dict[int, Tensor], factors: dict[Edge, Partial]) -> None:
        super().__init__(digraph, inputs, outputs, prune=False)
        self.tensors = tensors
        self.factors = factors

    def edge_algebra(self) -> FactorAlgebra:
        """A fresh :class:`FactorAlgebra` over this graph's factors."""
        return FactorAlgebra(self.factors)

    def __repr__(self) -> str:
        return (f"TensorGraph(inputs={len(self.inputs)}, intermediates={len(self.intermediates)}, "
                f"outputs={len(self.outputs)}, edges={self.n_edges})")


def tensor_graph(outputs: Sequence[Tensor], inputs: Sequence[Tensor],
                 seeds: dict[int, Factor] | None = None, sinks: dict[int, Factor] | None = None) -> TensorGraph:
    """The tensor computational graph from ``inputs`` (expression nodes, usually
    ``var``s) to ``outputs``.

    Nodes that do not depend on an input are data: they enter the factors but
    are no vertices.  Zero partials (``relu'``'s derivative, …) are no edges.
    An output that is also an input gets a copy vertex joined by a δ.
    ``seeds`` (input position → factor ∂input/∂seed) adds one extra input
    vertex ``"seed"`` before the inputs (a forward tangent); ``sinks`` (output
    position → factor ∂sink/∂output) one extra output ``"sink"`` after the
    outputs (a reverse cotangent).

    Examples
    --------
    >>> from jacacc.tensor.expr import var, unary
    >>> X, w = var("X", (4, 3)), var("w", (3,))
    >>> y = unary("exp", einsum("ij,j->i", X, w))
    >>> g = tensor_graph([y], [w])
    >>> g, [str(g.factors[e].layout()) for e in g.edges]
    (TensorGraph(inputs=1, intermediates=1, outputs=1, edges=2), ['T[ij] -> [i|j]', 'T[i] -> [i|i]'])
    """
    input_ids = {id(x): n for n, x in enumerate(inputs)}
    order = nodes_of(outputs)
    dependent: set[int] = set()
    for node in order:
        if id(node) in input_ids or any(id(a) in dependent for a in node.args):
            dependent.add(id(node))
    depends = lambda t: id(t) in dependent  # noqa: E731
    vertex: dict[int, int] = {id(node): pos for pos, node in enumerate(order)}
    tensors: dict[Any, Tensor] = {}
    factors: dict[Edge, Partial] = {}
    for node in order:
        if id(node) not in dependent or id(node) in input_ids:
            continue
        for k, f in local_partials(node, depends).items():
            factors[(vertex[id(node.args[k])], vertex[id(node)])] = f
    input_vertices = [vertex.get(id(x), f"absent{n}") for n, x in enumerate(inputs)]
    output_vertices: list[Hashable] = []
    for n, y in enumerate(outputs):
        v = vertex[id(y)]
        if id(y) in input_ids:  # f(x) = x: the output is a copy of the input
            copy = f"copy{n}"
            letters = _letters(y.ndim)
            factors[(v, copy)] = Factor.from_letters(None, "", letters, letters, y.shape, y.shape)
            tensors[copy] = y
            v = copy
        output_vertices.append(v)
    for n, x in enumerate(inputs):
        tensors[input_vertices[n]] = x
    if seeds:
        input_vertices = ["seed"]
        for n, f in seeds.items():
            factors[("seed", vertex.get(id(inputs[n]), f"absent{n}"))] = f
    if sinks:
        for n, f in sinks.items():
            factors[(output_vertices[n], "sink")] = f
        output_vertices = ["sink"]
    factors = _on_paths(factors, input_vertices, output_vertices)
    digraph = nx.DiGraph()
    digraph.add_edges_from(factors)
    for v in digraph.nodes:
        if isinstance(v, int):
            tensors[v] = order[v]
    return TensorGraph(digraph, input_vertices, output_vertices, tensors, factors)


def _on_paths(factors: dict[Edge, Partial], inputs: Sequence[Hashable], outputs: Sequence[Hashable]) -> dict[Edge, Partial]:
    """The factors on some input → output path (zero partials can cut a vertex off)."""
    succ: dict[Hashable, list[Hashable]] = {}
    pred: dict[Hashable, list[Hashable]] = {}
    for u, v in factors:
        succ.setdefault(u, []).append(v)
        pred.setdefault(v, []).append(u)

    def reach(start: Sequence[Hashable], step: dict) -> set:
        seen, stack = set(start), list(start)
        while stack:
            for n in step.get(stack.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    stack.append(n)
        return seen

    live = reach(inputs, succ) & reach(outputs, pred)
    return {e: f for e, f in factors.items() if e[0] in live and e[1] in live}

