"""The source language of elementwise-defined tensor functions (paper 000 §5), parsed with positions.

A definition reads ``f[i, j] = <expression>``: zero-based indices, argument
reads ``a[i + k, 2*j - 1]`` at integer-affine index expressions (coefficients
may be 0, negative or greater than 1), ``sum(k, lo, hi, expr)`` over
``lo ≤ k ≤ hi`` with bounds affine in the enclosing indices, numbers,
``+ - * / **`` and unary minus with Python's precedence (``-x**2`` is
``-(x**2)``), and the functions ``exp log sqrt tanh sin cos abs``.  Python's
own parser reads the text (the grammar is a subset of Python's expressions);
this module checks that subset and builds a small tree whose every node
knows its column in the source, so an error names the problem and where it is.

Examples
--------
>>> d = parse("f[i, j] = exp(-sum(k, 0, 4, (a[i, k] + b[j, k])**2 * c[i, i] + d[i + k]**3))")
>>> d.name, d.indices, sorted(d.arguments())
('f', ('i', 'j'), ['a', 'b', 'c', 'd'])
>>> parse("f[i, j] = x[i*j]")
Traceback (most recent call last):
...
jacacc.elementwise.parse.SourceError: index x[i * j] is not affine in the indices (a product of two indices) at column 12
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from jacacc.errors import JacaccError

__all__ = ["FUNCTIONS", "Affine", "Binary", "Call", "Definition", "Node", "Number", "Power", "Read", "SourceError",
           "Summation", "Unary", "parse"]

#: the scalar functions the language knows
FUNCTIONS = ("exp", "log", "sqrt", "tanh", "sin", "cos", "abs")


class SourceError(JacaccError, ValueError):
    """A malformed definition: the message names the problem and its column in the source."""


@dataclass(frozen=True)
class Affine:
    """``Σ coeffs[v]·v + const`` over index names."""

    coeffs: tuple[tuple[str, int], ...]
    const: int

    @staticmethod
    def make(coeffs: dict[str, int], const: int) -> Affine:
        return Affine(tuple(sorted((v, c) for v, c in coeffs.items() if c)), const)

    def __add__(self, other: Affine) -> Affine:
        merged = dict(self.coeffs)
        for v, c in other.coeffs:
            merged[v] = merged.get(v, 0) + c
        return Affine.make(merged, self.const + other.const)

    def scale(self, k: int) -> Affine:
        return Affine.make({v: c * k for v, c in self.coeffs}, self.const * k)

    @property
    def names(self) -> set[str]:
        return {v for v, _ in self.coeffs}

    def __str__(self) -> str:
        parts = []
        for v, c in self.coeffs:
            term = v if abs(c) == 1 else f"{abs(c)}*{v}"
            parts.append(("-" if c < 0 else "+") + term)
        if self.const or not parts:
            parts.append(("-" if self.const < 0 else "+") + str(abs(self.const)))
        text = " ".join(p[0] + " " + p[1:] for p in parts).strip()
        return text[2:] if text.startswith("+ ") else "-" + text[2:] if text.startswith("- ") else text


@dataclass(frozen=True)
class Node:
    column: int


@dataclass(frozen=True)
class Number(Node):
    value: float


@dataclass(frozen=True)
class Read(Node):
    argument: str
    indices: tuple[Affine, ...]


@dataclass(frozen=True)
class Unary(Node):
    operand: Node  # unary minus


@dataclass(frozen=True)
class Binary(Node):
    op: str  # + - * /
    left: Node
    right: Node


@dataclass(frozen=True)
class Power(Node):
    base: Node
    exponent: float  # a constant


@dataclass(frozen=True)
class Call(Node):
    function: str
    argument: Node


@dataclass(frozen=True)
class Summation(Node):
    index: str
    lower: Affine
    upper: Affine
    body: Node


@dataclass(frozen=True)
class Definition:
    """``name[indices] = body``."""

    name: str
    indices: tuple[str, ...]
    body: Node
    source: str

    def arguments(self) -> dict[str, int]:
        """Argument name → number of indices it is read with."""
        out: dict[str, int] = {}
        for node in walk(self.body):
            if isinstance(node, Read):
                out.setdefault(node.argument, len(node.indices))
        return out


def walk(node: Node) -> Iterator[Node]:
    yield node
    for child in (getattr(node, f, None) for f in ("operand", "left", "right", "base", "argument", "body")):
        if isinstance(child, Node):
            yield from walk(child)


def parse(source: str) -> Definition:
    """Parse one definition ``f[i, j] = …`` (see the module docstring)."""
    if not isinstance(source, str):
        raise SourceError(f"the source must be a string, got {type(source).__name__}")
    try:
        tree = ast.parse(source.strip(), mode="exec")
    except SyntaxError as exc:
        raise SourceError(f"not a definition: {exc.msg} at column {exc.offset or 0}") from None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign) or len(tree.body[0].targets) != 1:
        raise SourceError("the source must be one definition of the form f[i, j] = expression")
    stmt = tree.body[0]
    target = stmt.targets[0]
    text = source.strip()
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)):
        raise SourceError(f"the left side must read like f[i, j] at column {target.col_offset}")
    items = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
    indices = []
    for item in items:
        if not isinstance(item, ast.Name):
            raise SourceError(f"the function's indices must be plain names, got {ast.unparse(item)} "
                              f"at column {item.col_offset}")
        if item.id in indices:
            raise SourceError(f"the index {item.id} appears twice on the left side at column {item.col_offset}")
        indices.append(item.id)
    parser = _Parser(text, set(indices), target.value.id)
    return Definition(target.value.id, tuple(indices), parser.expression(stmt.value, set(indices)), text)


class _Parser:
    def __init__(self, text: str, function_indices: set[str], name: str) -> None:
        self.text = text
        self.function_indices = function_indices
        self.name = name

    def fail(self, message: str, node: ast.AST) -> SourceError:
        return SourceError(f"{message} at column {getattr(node, 'col_offset', 0)}")

    def expression(self, node: ast.AST, bound: set[str]) -> Node:
        col = getattr(node, "col_offset", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value,
                                                                                                      bool):
            return Number(col, float(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.expression(node.operand, bound)
            return Unary(col, inner) if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                return Power(col, self.expression(node.left, bound), self.exponent(node.right))
            ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
            if type(node.op) not in ops:
                raise self.fail(f"unsupported operator {type(node.op).__name__}", node)
            return Binary(col, ops[type(node.op)], self.expression(node.left, bound),
                          self.expression(node.right, bound))
        if isinstance(node, ast.Subscript):
            if not isinstance(node.value, ast.Name):
                raise self.fail(f"only arguments can be read, not {ast.unparse(node.value)}", node)
            if node.value.id == self.name:
                raise self.fail(f"the definition of {self.name} reads {self.name} itself", node)
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            indices = tuple(self.affine(item, bound, f"index {ast.unparse(node)}") for item in items)
            return Read(col, node.value.id, indices)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                raise self.fail(f"unknown function {ast.unparse(node.func)}", node)
            if node.keywords:
                raise self.fail(f"{node.func.id} takes no keyword arguments", node)
            if node.func.id == "sum":
                return self.summation(node, bound)
            if node.func.id not in FUNCTIONS:
                raise self.fail(f"unknown function {node.func.id} (known: {', '.join(FUNCTIONS)}, sum)", node)
            if len(node.args) != 1:
                raise self.fail(f"{node.func.id} takes one argument, got {len(node.args)}", node)
            return Call(col, node.func.id, self.expression(node.args[0], bound))
        if isinstance(node, ast.Name):
            what = "an index" if node.id in bound else "an argument" if node.id else "a name"
            raise self.fail(f"{node.id} is {what} and cannot be used as a value (read arguments as "
                            f"{node.id}[...])", node)
        raise self.fail(f"unsupported expression {ast.unparse(node)}", node)

    def exponent(self, node: ast.AST) -> float:
        value = node
        sign = 1.0
        while isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)):
            sign *= -1.0 if isinstance(value.op, ast.USub) else 1.0
            value = value.operand
        if isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) \
                and not isinstance(value.value, bool):
            return sign * float(value.value)
        raise self.fail(f"the exponent {ast.unparse(node)} must be a constant number", node)

    def summation(self, node: ast.Call, bound: set[str]) -> Summation:
        if len(node.args) != 4:
            raise self.fail(f"sum takes (index, lower, upper, expression), got {len(node.args)} arguments", node)
        index_node, lo, hi, body = node.args
        if not isinstance(index_node, ast.Name):
            raise self.fail(f"the summation index must be a name, got {ast.unparse(index_node)}", index_node)
        name = index_node.id
        if name in bound:
            raise self.fail(f"the summation index {name} is already bound", index_node)
        lower = self.affine(lo, bound, "the sum bound")
        upper = self.affine(hi, bound, "the sum bound")
        return Summation(node.col_offset, name, lower, upper, self.expression(body, bound | {name}))

    def affine(self, node: ast.AST, bound: set[str], what: str) -> Affine:
        """An integer-affine expression of the bound indices."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return Affine.make({}, node.value)
        if isinstance(node, ast.Name):
            if node.id not in bound:
                raise self.fail(f"{what} uses {node.id}, which is not an index in scope", node)
            return Affine.make({node.id: 1}, 0)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.affine(node.operand, bound, what)
            return inner.scale(-1) if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            left, right = self.affine(node.left, bound, what), self.affine(node.right, bound, what)
            return left + (right.scale(-1) if isinstance(node.op, ast.Sub) else right)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            left, right = self.affine(node.left, bound, what), self.affine(node.right, bound, what)
            if left.coeffs and right.coeffs:
                raise self.fail(f"{what} is not affine in the indices (a product of two indices)", node)
            constant, other = (left, right) if not left.coeffs else (right, left)
            return other.scale(constant.const)
        raise self.fail(f"{what} is not affine in the indices: {ast.unparse(node)}", node)
