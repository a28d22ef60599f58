"""Parameters as users hold them: nested lists, tuples and dicts of arrays (pytrees, as JAX calls them).

``grad(loss)(params, x)`` with ``params = [(W1, b1), (W2, b2)]`` or
``{"W": W, "b": b}``, as in autograd's and JAX's examples, differentiates every
array in ``params`` and returns the gradients in the same structure.  The
arguments are flattened into their leaves (dict entries in sorted key order,
as JAX), the function is traced as a function of the leaves, and the results
are put back into the structure: gradients and Jacobians take the structure
of the argument, a Hessian block ``∂²f/∂a∂b`` the structure of ``a`` holding
the structure of ``b`` (JAX's nesting).

Examples
--------
>>> import numpy as np
>>> leaves, tree = flatten({"b": np.zeros(2), "W": [np.ones(3), 2.0]})
>>> [np.shape(leaf) for leaf in leaves], tree
([(3,), (), (2,)], ('dict', ('W', 'b'), (('list', (None, None)), None)))
>>> unflatten(tree, [1, 2, 3])
{'W': [1, 2], 'b': 3}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["Arguments", "flatten", "is_container", "structure_builder", "structure_reader", "unflatten"]

#: a tree: None for a leaf, else (kind, keys or type, children)
Tree = Any


def is_container(value: Any) -> bool:
    """A list, tuple (named tuples included) or dict: a node of a pytree, not a leaf."""
    return isinstance(value, list | tuple | dict)


def flatten(value: Any) -> tuple[list[Any], Tree]:
    """The leaves of ``value`` in order and its tree (hashable: a plan's cache key holds it)."""
    leaves: list[Any] = []
    return leaves, _flatten(value, leaves)


def _flatten(value: Any, leaves: list[Any]) -> Tree:
    # exact types first: this runs at every call of a transformed function (a list of (W, b) pairs:
    # a dozen nodes), where the isinstance chain and generators cost microseconds
    kind = type(value)
    if kind is np.ndarray:
        leaves.append(value)
        return None
    if kind is list or kind is tuple:
        return kind.__name__, tuple([_flatten(v, leaves) for v in value])
    if isinstance(value, dict):
        keys = tuple(sorted(value))
        return "dict", keys, tuple([_flatten(value[k], leaves) for k in keys])
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple: rebuilt by its type
        return "namedtuple", kind, tuple([_flatten(v, leaves) for v in value])
    if isinstance(value, list | tuple):
        return ("list" if isinstance(value, list) else "tuple"), tuple([_flatten(v, leaves) for v in value])
    leaves.append(value)
    return None


def unflatten(tree: Tree, leaves: Sequence[Any]) -> Any:
    """The structure ``tree`` with ``leaves`` in order (the inverse of :func:`flatten`)."""
    rest = iter(leaves)
    return _unflatten(tree, rest)


def _unflatten(tree: Tree, leaves: Any) -> Any:
    if tree is None:
        return next(leaves)
    if tree[0] == "dict":
        return {k: _unflatten(child, leaves) for k, child in zip(tree[1], tree[2], strict=True)}
    if tree[0] == "namedtuple":
        return tree[1](*(_unflatten(child, leaves) for child in tree[2]))
    children = [_unflatten(child, leaves) for child in tree[1]]
    return children if tree[0] == "list" else tuple(children)


class Arguments:
    """A call's arguments flattened: the leaves, each argument's tree and span of leaves.

    Parameters
    ----------
    args : sequence
        The positional arguments as given (arrays, numbers or containers of them).
    """

    def __init__(self, args: Sequence[Any]) -> None:
        self.leaves: list[Any] = []
        trees, spans = [], []
        for a in args:
            start = len(self.leaves)
            trees.append(_flatten(a, self.leaves))
            spans.append((start, len(self.leaves)))
        self.trees: tuple[Tree, ...] = tuple(trees)
        self.spans: tuple[tuple[int, int], ...] = tuple(spans)

    def without_leaves(self) -> Arguments:
        """The structure alone (trees and spans), holding no arrays: kept between calls."""
        kept = object.__new__(Arguments)
        kept.leaves, kept.trees, kept.spans = [], self.trees, self.spans
        return kept

    def leaf_positions(self, argnums: Sequence[int]) -> tuple[int, ...]:
        """The positions among the leaves of the arguments ``argnums``."""
        return tuple(i for k in argnums for i in range(*self.spans[k]))

    def function_of_leaves(self, f: Callable[..., Any]) -> Callable[..., Any]:
        """``f`` as a function of the leaves (the arguments rebuilt from them at each call)."""
        trees, spans = self.trees, self.spans

        def of_leaves(*leaves: Any) -> Any:
            return f(*(unflatten(tree, leaves[a:b]) for tree, (a, b) in zip(trees, spans, strict=True)))

        of_leaves.__name__ = getattr(f, "__name__", "f")
        return of_leaves

    def first_order(self, argnums: Sequence[int], results: Sequence[Any]) -> list[Any]:
        """Per argument of ``argnums``, its leaves' ``results`` (in leaf order) in its structure."""
        out, k = [], 0
        for a in argnums:
            n = self.spans[a][1] - self.spans[a][0]
            out.append(unflatten(self.trees[a], results[k:k + n]))
            k += n
        return out

    def second_order(self, argnums: Sequence[int], blocks: Sequence[Sequence[Any]], several: bool) -> Any:
        """The leaf blocks ``blocks[i][j]`` (∂²f/∂leaf_i∂leaf_j) nested as ``jax.hessian`` nests them:
        the structure of the argument holding the structure of the argument; with ``several``
        argnums, a tuple over the arguments ``a`` of the structure of ``a`` holding a tuple over
        the arguments ``b`` of the structure of ``b``."""
        offsets, k = [], 0
        for a in argnums:
            offsets.append(k)
            k += self.spans[a][1] - self.spans[a][0]
        size = [self.spans[a][1] - self.spans[a][0] for a in argnums]

        def row(p: int, i: int, q: int) -> Any:  # leaf i of argument p against argument q's leaves
            start = offsets[q]
            return unflatten(self.trees[argnums[q]], blocks[offsets[p] + i][start:start + size[q]])

        if not several:
            return unflatten(self.trees[argnums[0]], [row(0, i, 0) for i in range(size[0])])
        return tuple(unflatten(self.trees[a], [tuple(row(p, i, q) for q in range(len(argnums)))
                                               for i in range(size[p])]) for p, a in enumerate(argnums))


class _Writer:
    """Source of a function over a fixed pytree structure, with the constants it reads bound by name."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"ndarray": np.ndarray}

    def bind(self, value: Any) -> str:
        name = f"k{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def function(self, text: str) -> Callable[..., Any]:
        exec(compile(text, "<jacacc pytree>", "exec"), self.namespace)  # noqa: S102 - our own source
        return self.namespace["structured"]


def _reads(tree: Tree, expr: str, writer: _Writer, checks: list[str], leaves: list[str]) -> None:
    """The checks that a value ``expr`` has the structure ``tree`` with arrays at its leaves, parents
    before children, and the expressions of its leaves in order."""
    if tree is None:
        checks.append(f"type({expr}) is ndarray")
        leaves.append(expr)
        return
    kind = tree[0]
    if kind == "dict":
        keys = writer.bind(tree[1])
        checks.append(f"type({expr}) is dict and {expr}.keys() == {writer.bind(frozenset(tree[1]))}")
        for i, child in enumerate(tree[2]):
            _reads(child, f"{expr}[{keys}[{i}]]", writer, checks, leaves)
        return
    children = tree[2] if kind == "namedtuple" else tree[1]
    spelled = writer.bind(tree[1]) if kind == "namedtuple" else kind
    checks.append(f"type({expr}) is {spelled} and len({expr}) == {len(children)}")
    for i, child in enumerate(children):
        _reads(child, f"{expr}[{i}]", writer, checks, leaves)


def structure_reader(trees: Sequence[Tree]) -> Callable[[Sequence[Any]], list[Any] | None]:
    """A function of a call's arguments returning their leaves where every argument has the
    structure ``trees`` with NumPy arrays at the leaves (what :class:`Arguments` would find), else
    None: one generated expression, not a walk of the structure at each call (a list of
    ``(W, b)`` pairs: 4 µs of :class:`Arguments`, under 1 µs).

    >>> args = ([(np.ones(2), np.zeros(1))], np.eye(2))
    >>> read = structure_reader(Arguments(args).trees)
    >>> [leaf.shape for leaf in read(args)], read(([np.ones(2)], np.eye(2)))
    ([(2,), (1,), (2, 2)], None)
    """
    writer, checks, leaves = _Writer(), [f"len(args) == {len(trees)}"], []
    for k, tree in enumerate(trees):
        _reads(tree, f"args[{k}]", writer, checks, leaves)
    text = (f"def structured(args):\n    if {' and '.join(checks)}:\n        return [{', '.join(leaves)}]\n"
            "    return None\n")
    return writer.function(text)


def _built(tree: Tree, values: list[str], writer: _Writer) -> str:
    """The expression putting the next of ``values`` (expressions, consumed) into ``tree``'s structure."""
    if tree is None:
        return values.pop(0)
    if tree[0] == "dict":
        items = ", ".join(f"{k!r}: {_built(child, values, writer)}" for k, child in zip(tree[1], tree[2], strict=True))
        return "{" + items + "}"
    if tree[0] == "namedtuple":
        return f"{writer.bind(tree[1])}({', '.join(_built(child, values, writer) for child in tree[2])})"
    items = [_built(child, values, writer) for child in tree[1]]
    return f"[{', '.join(items)}]" if tree[0] == "list" else f"({''.join(item + ', ' for item in items)})"


def structure_builder(trees: Sequence[Tree]) -> Callable[[Sequence[Any]], list[Any]]:
    """A function of leaves (in order) returning one value per tree, each the leaves put into
    that tree's structure: :func:`unflatten` of every tree at once, generated for them.

    >>> build = structure_builder([('tuple', (None, ('dict', ('a',), (None,)))), None])
    >>> build([1, 2, 3])
    [(1, {'a': 2}), 3]
    """
    writer = _Writer()
    count = sum(1 for tree in trees for _ in _leaves_of(tree))
    values = [f"r[{i}]" for i in range(count)]
    parts = [_built(tree, values, writer) for tree in trees]
    return writer.function(f"def structured(r):\n    return [{', '.join(parts)}]\n")


def _leaves_of(tree: Tree) -> Any:
    if tree is None:
        yield None
        return
    for child in (tree[2] if tree[0] in ("dict", "namedtuple") else tree[1]):
        yield from _leaves_of(child)
