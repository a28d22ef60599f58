"""The source language of elementwise-defined tensor functions (paper 000 §5), parsed with positions.

A definition reads ``f[i, j] = <expression>``: zero-based indices, argument
reads ``a[i + k, 2*j - 1]`` at integer-affine index expressions (coefficients
may be 0, negative or greater than 1), ``sum(k, lo, hi, expr)`` over
``lo ≤ k ≤ hi`` with bounds affine in the enclosing indices, numbers,
``+ - * / **`` and unary minus with Python's precedence (``-x**2`` is
``-(x**2)``), and the functions of :data:`FUNCTIONS` — the unary operations of
:mod:`jacacc.ops` by their names there (``exp``, ``tanh``, ``arcsin``, ``erf``,
``abs``, ``relu`` …).  Python's
own parser reads the text (the grammar is a subset of Python's expressions);
this module checks that subset and builds the kernel IR's tree
(:mod:`jacacc.kernels.ir`), whose every node knows its column in the source,
so an error names the problem and where it is; :func:`unparse` prints it back.

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
from collections.abc import Callable

from jacacc import ops
from jacacc.errors import JacaccError, SizeLimitError
from jacacc.kernels.ir import (
    CHAIN_FOLD,
    FUNCTIONS,
    LEFT_OUT,
    Affine,
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
    unparse,
)

# the language's functions and its printer are the kernel IR's (jacacc.kernels.ir)
__all__ = ["FUNCTIONS", "LEFT_OUT", "SourceError", "parse", "unparse"]


class SourceError(JacaccError, ValueError):
    """A malformed definition: the message names the problem and its column in the source."""


def parse(source: str) -> Definition:
    """Parse one definition ``f[i, j] = …`` (see the module docstring)."""
    if not isinstance(source, str):
        raise SourceError(f"the source must be a string, got {type(source).__name__}")
    try:
        tree = ast.parse(source.strip(), mode="exec")
    except SyntaxError as exc:
        # Python's tokenizer admits 200 nested parentheses ("too many nested parentheses")
        raise SourceError(f"not a definition: {exc.msg} at column {exc.offset or 0}") from None
    except RecursionError:
        # Python's parser builds its tree recursively: a chain of some 3000 operators, or as many
        # unary minuses, is beyond it (2000 are not)
        raise SizeLimitError(f"the source ({len(source)} characters) nests deeper than Python's parser can "
                             "read; split a long sum into partial sums in parentheses") from None
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

    def unparse(self, node: ast.AST) -> str:
        """``node``'s text as Python writes it, or as the source does where it nests too deep for that."""
        try:
            return ast.unparse(node)
        except RecursionError:
            return ast.get_source_segment(self.text, node) or "…"

    def fail(self, message: str, node: ast.AST) -> SourceError:
        return SourceError(f"{message} at column {getattr(node, 'col_offset', 0)}")

    def expression(self, node: ast.AST, bound: set[str]) -> Node:
        col = getattr(node, "col_offset", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value,
                                                                                                      bool):
            return Number(col, float(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return self.signed(node, bound)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and isinstance(node.left, ast.List):
            return self.guard(node, bound)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                return Power(col, self.expression(node.left, bound), self.exponent(node.right))
            if type(node.op) not in _OPERATORS:
                raise self.fail(f"unsupported operator {type(node.op).__name__}", node)
            return self.chain(node, bound)
        if isinstance(node, ast.Subscript):
            if not isinstance(node.value, ast.Name):
                raise self.fail(f"only arguments can be read, not {ast.unparse(node.value)}", node)
            if node.value.id == self.name:
                raise self.fail(f"the definition of {self.name} reads {self.name} itself", node)
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            what = _Described(lambda: f"index {self.unparse(node)}")  # text made only for an error
            indices = tuple(self.affine(item, bound, what) for item in items)
            return Read(col, node.value.id, indices)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                raise self.fail(f"unknown function {ast.unparse(node.func)}", node)
            if node.keywords:
                raise self.fail(f"{node.func.id} takes no keyword arguments", node)
            if node.func.id == "sum":
                return self.summation(node, bound)
            if node.func.id not in FUNCTIONS:
                raise self.fail(_unknown_function(node.func.id), node)
            if len(node.args) != 1:
                raise self.fail(f"{node.func.id} takes one argument, got {len(node.args)}", node)
            return Call(col, node.func.id, self.expression(node.args[0], bound))
        if isinstance(node, ast.List):
            raise self.fail(f"a bracket {ast.unparse(node)} must be the left factor of a product, "
                            f"like [i == j] * x[i]", node)
        if isinstance(node, ast.Name):
            what = "an index" if node.id in bound else "an argument" if node.id else "a name"
            raise self.fail(f"{node.id} is {what} and cannot be used as a value (read arguments as "
                            f"{node.id}[...])", node)
        raise self.fail(f"unsupported expression {ast.unparse(node)}", node)

    def chain(self, node: ast.BinOp, bound: set[str]) -> Node:
        """``a + b - c …`` or ``a * b / c …``: Python's left-leaning tree walked down its left spine
        with a loop (a chain of 2000 operators is 2000 deep there) and rebuilt by :func:`chain`."""
        additive = isinstance(node.op, (ast.Add, ast.Sub))
        kinds = (ast.Add, ast.Sub) if additive else (ast.Mult, ast.Div)
        spine: list[tuple[str, ast.AST]] = []
        first: ast.AST = node
        # a bracket's product [c] * x is an operand of its own (a guard), not part of the chain
        while isinstance(first, ast.BinOp) and isinstance(first.op, kinds) and not (
                isinstance(first.op, ast.Mult) and isinstance(first.left, ast.List)):
            spine.append((_OPERATORS[type(first.op)], first.right))
            first = first.left
        items = [("+" if additive else "*", self.expression(first, bound))]
        items += [(op, self.expression(operand, bound)) for op, operand in reversed(spine)]
        return chain(items, node.col_offset)

    def signed(self, node: ast.UnaryOp, bound: set[str]) -> Node:
        """``-x``, ``+x``, ``- - x`` …: a run of signs read with a loop.  Up to :data:`CHAIN_FOLD`
        minuses each stay a node (the text reads back to the same tree); a longer run keeps its parity."""
        col = node.col_offset
        minuses = 0
        operand: ast.AST = node
        while isinstance(operand, ast.UnaryOp) and isinstance(operand.op, (ast.USub, ast.UAdd)):
            minuses += isinstance(operand.op, ast.USub)
            operand = operand.operand
        out = self.expression(operand, bound)
        for _ in range(minuses if minuses <= CHAIN_FOLD else minuses % 2):
            out = Unary(col, out)
        return out

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
        lower = self.limits(lo, bound, lower=True)
        upper = self.limits(hi, bound, lower=False)
        return Summation(node.col_offset, name, lower, upper, self.expression(body, bound | {name}))

    def guard(self, node: ast.BinOp, bound: set[str]) -> Guard:
        """``[conditions] * body``: comparisons of affine index expressions (chains allowed) joined by
        ``and``, or a congruence ``n % m == r`` (kept as ``(n - r) % m == 0``)."""
        bracket = node.left
        if len(bracket.elts) != 1:
            raise self.fail("a bracket holds one condition, like [i == j] or [i <= j and j < 4]", bracket)
        cond = bracket.elts[0]
        parts = cond.values if isinstance(cond, ast.BoolOp) and isinstance(cond.op, ast.And) else [cond]
        conditions: list[Condition] = []
        for part in parts:
            conditions += self.comparison(part, bound)
        return Guard(node.col_offset, tuple(conditions), self.expression(node.right, bound))

    def comparison(self, node: ast.AST, bound: set[str]) -> list[Condition]:
        if not isinstance(node, ast.Compare):
            raise self.fail(f"a bracket condition must compare index expressions, got {ast.unparse(node)}", node)
        left = node.left
        if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod):
            modulus = self.positive_constant(left.right, "a modulus")
            if len(node.ops) != 1 or not isinstance(node.ops[0], ast.Eq):
                raise self.fail("a congruence reads n % m == r", node)
            residue = self.affine(node.comparators[0], bound, "a bracket condition")
            return [Condition(self.affine(left.left, bound, "a bracket condition") - residue, "%", modulus)]
        out = []
        terms = [self.affine(t, bound, "a bracket condition") for t in [left, *node.comparators]]
        for op, a, b in zip(node.ops, terms, terms[1:], strict=False):
            if isinstance(op, ast.Eq):
                out.append(Condition(a - b, "=="))
            elif isinstance(op, (ast.GtE, ast.Gt)):
                out.append(Condition(a - b - Affine.make({}, int(isinstance(op, ast.Gt))), ">="))
            elif isinstance(op, (ast.LtE, ast.Lt)):
                out.append(Condition(b - a - Affine.make({}, int(isinstance(op, ast.Lt))), ">="))
            else:
                raise self.fail(f"unsupported comparison {type(op).__name__} in a bracket (use == < <= > >=)", node)
        return out

    def positive_constant(self, node: ast.AST, what: str) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool) \
                and node.value > 0:
            return node.value
        raise self.fail(f"{what} must be a positive integer constant, got {ast.unparse(node)}", node)

    def limits(self, node: ast.AST, bound: set[str], lower: bool) -> tuple[Limit, ...]:
        """A sum bound: an affine expression, ``ceil(n / d)`` (lower) or ``floor(n / d)`` (upper), or
        ``max(…)`` of lower / ``min(…)`` of upper limits."""
        combine, rounding = ("max", "ceil") if lower else ("min", "floor")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            if node.func.id == combine and node.args:
                return tuple(limit for arg in node.args for limit in self.limits(arg, bound, lower))
            if node.func.id == rounding and len(node.args) == 1 and isinstance(node.args[0], ast.BinOp) \
                    and isinstance(node.args[0].op, ast.Div):
                numerator = self.affine(node.args[0].left, bound, "the sum bound")
                return (Limit(numerator, self.positive_constant(node.args[0].right, "a bound's divisor")),)
            if node.func.id in ("max", "min", "ceil", "floor"):
                raise self.fail(f"{'a lower' if lower else 'an upper'} sum bound may use {combine}(…) and "
                                f"{rounding}(n / d), not {node.func.id}", node)
        return (Limit(self.affine(node, bound, "the sum bound")),)

    def affine(self, node: ast.AST, bound: set[str], what: str | _Described) -> Affine:
        """An integer-affine expression of the bound indices."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return Affine.make({}, node.value)
        if isinstance(node, ast.Name):
            if node.id not in bound:
                raise self.fail(f"{what} uses {node.id}, which is not an index in scope", node)
            return Affine.make({node.id: 1}, 0)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            sign = 1
            while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
                sign *= -1 if isinstance(node.op, ast.USub) else 1
                node = node.operand
            return self.affine(node, bound, what).scale(sign)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            # a loop down the left spine (i + 1 + 1 + … may be long), then the terms in source order
            terms: list[tuple[int, ast.AST]] = []
            while isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
                terms.append((-1 if isinstance(node.op, ast.Sub) else 1, node.right))
                node = node.left
            total = self.affine(node, bound, what)
            for sign, term in reversed(terms):
                total = total + self.affine(term, bound, what).scale(sign)
            return total
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            top = node
            factors = []
            while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                factors.append(node.right)
                node = node.left
            product = self.affine(node, bound, what)
            for factor in reversed(factors):
                right = self.affine(factor, bound, what)
                if product.coeffs and right.coeffs:
                    raise self.fail(f"{what} is not affine in the indices (a product of two indices)", top)
                constant, other = (product, right) if not product.coeffs else (right, product)
                product = other.scale(constant.const)
            return product
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
            numerator = self.affine(node.left, bound, what)
            divisor = self.positive_constant(node.right, "a floor division's divisor")
            return numerator if divisor == 1 else Affine.of(Quotient(numerator, divisor)).folded()
        raise self.fail(f"{what} is not affine in the indices: {ast.unparse(node)}", node)


_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def _unknown_function(name: str) -> str:
    canonical = ops.resolve(name)
    if canonical in FUNCTIONS:
        return f"{name} is called {canonical} in the language"
    if canonical in LEFT_OUT:
        return f"{name} is not a function of the language ({LEFT_OUT[canonical]})"
    if canonical is not None:
        return f"{name} takes {ops.get(canonical).arity} operands; the language's functions take one"
    return f"unknown function {name} (known: {', '.join(FUNCTIONS)}, sum)"


class _Described:
    """A description made when it is printed: an error message's, not made for every read."""

    def __init__(self, make: Callable[[], str]) -> None:
        self.make = make

    def __str__(self) -> str:
        return self.make()
