"""The scalar tracer's rules: forward evaluation and local partials as expressions.

Each elementary operation the tracer understands is one :class:`Rule` in one
registry dict, :data:`RULES`.  The built-in rules are the operation table's
(:mod:`jacacc.ops`): each operation's derivative, written once there against a
builder interface, is built here as scalar expressions by :class:`ExprBuilder`.
Users may register more with :func:`register_rule`.  A rule knows

* its name (the ``op`` attribute of a traced graph node) and arity;
* the NumPy ufunc names that mean it (``"true_divide"``, ``"absolute"``), so
  ``np.divide(t, 2)`` on a tracer finds the ``div`` rule;
* a vectorized NumPy forward evaluation;
* a *partial rule*: given the operands as expressions (``Var(node)`` for a
  traced operand, ``Const(c)`` for a constant one) and the result node
  ``Var(out)``, it returns one :class:`~jacacc.partials.Expr` per operand: the local
  partial ∂out/∂operand that labels the edge operand → out of the
  computational graph (paper 003 §2).  Partials may reuse the result
  (``exp``: ∂ = out; ``sqrt``: ∂ = 0.5/out), which is what makes the
  linearized graph cheap to evaluate.

A rule may return the symbolic zero :data:`jacacc.ops.ZERO` for an operand
whose partial is never needed (a constant operand); :meth:`Rule.partials`
also blanks constant operands itself.

Examples
--------
>>> from jacacc.partials import Var
>>> [str(p) for p in get_rule("mul").partials((Var("a"), Var("b")), Var("v"))]
['b', 'a']
>>> [str(p) for p in get_rule("sqrt").partials((Var("a"),), Var("v"))]
['0.5/v']
>>> get_rule("true_divide").name
'div'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jacacc import ops
from jacacc.errors import RegistryError, UnsupportedOperationError
from jacacc.partials import Const, Expr, apply, as_expr

__all__ = ["RULES", "Rule", "get_rule", "register_rule", "rule_names", "ufunc_names", "unregister_rule"]

PartialRule = Callable[..., Sequence["Expr | ops.Zero"]]


@dataclass(frozen=True)
class Rule:
    """One elementary operation.

    Attributes
    ----------
    name : str
        Canonical name; the key in :data:`RULES` and the ``op`` of traced nodes.
    arity : int
        Number of operands.
    forward : callable
        ``forward(*operands) -> result``, vectorized NumPy evaluation.
    partial_rule : callable
        ``partial_rule(*operands, out) -> sequence of Expr or ZERO`` with one
        entry per operand; operands and ``out`` are expressions.
    aliases : tuple of str
        Other names that mean this operation: NumPy ufunc names (``__name__``)
        and spellings accepted by :func:`get_rule`.
    doc : str
        One line for listings: the derivative in words.
    """

    name: str
    arity: int
    forward: Callable[..., Any]
    partial_rule: PartialRule = field(repr=False)
    aliases: tuple[str, ...] = ()
    doc: str = ""

    def partials(self, operands: Sequence[Expr], out: Expr) -> list[Expr | ops.Zero]:
        """The local partials ∂out/∂operand, :data:`~jacacc.ops.ZERO` for constant operands.

        Parameters
        ----------
        operands : sequence of Expr
            ``Var(node)`` for traced operands, ``Const(c)`` for constants.
        out : Expr
            The result, normally ``Var(result_node)``.

        Examples
        --------
        >>> from jacacc.partials import Var, Const
        >>> get_rule("pow").partials((Var("x"), Const(3.0)), Var("y"))
        [Apply('mul', (Const(3.0), Apply('pow', (Var('x'), Const(2.0))))), ZERO]
        """
        operands = tuple(operands)
        if len(operands) != self.arity:
            raise ValueError(f"{self.name} takes {self.arity} operand(s), got {len(operands)}")
        # Constant folding inside a rule may hit a domain error in a partial
        # that is then discarded (log of a negative constant base); keep quiet.
        with np.errstate(all="ignore"):
            result = list(self.partial_rule(*operands, out))
        if len(result) != self.arity:
            raise ValueError(
                f"partial rule of {self.name} returned {len(result)} partials for {self.arity} operands"
            )
        # A rule may return plain numbers (``[2.0]``); edges always carry Expr.
        return [
            ops.ZERO if isinstance(a, Const) or p is None or p is ops.ZERO else as_expr(p)
            for a, p in zip(operands, result, strict=True)
        ]

    def __call__(self, *operands: Any) -> Any:
        """Forward evaluation on numbers or arrays."""
        return self.forward(*operands)


#: The registry: canonical rule name -> :class:`Rule`.
RULES: dict[str, Rule] = {}
# every alias (and canonical name) -> canonical name
_ALIASES: dict[str, str] = {}


def register_rule(
    name: str,
    arity: int,
    forward: Callable[..., Any],
    partial_rule: PartialRule,
    *,
    aliases: Sequence[str] = (),
    doc: str = "",
    replace: bool = False,
) -> Rule:
    """Add an elementary operation to :data:`RULES`.

    Parameters
    ----------
    name : str
        Canonical name.
    arity : int
        Number of operands.
    forward : callable
        Vectorized NumPy evaluation ``forward(*operands)``.
    partial_rule : callable
        ``partial_rule(*operands, out)`` returning one expression (or ``ZERO``)
        per operand; see :meth:`Rule.partials`.
    aliases : sequence of str
        NumPy ufunc names (``ufunc.__name__``) and other spellings that mean
        this operation; a ufunc whose name is registered here is dispatched to
        this rule by the tracer.
    doc : str
        Short description of the derivative.
    replace : bool
        Allow replacing an existing rule of the same name.

    Returns
    -------
    Rule

    Examples
    --------
    >>> from jacacc.partials import Const
    >>> r = register_rule("twice", 1, lambda x: 2 * x, lambda x, out: [Const(2.0)], doc="2")
    >>> get_rule("twice")(3.0)
    6.0
    >>> _ = unregister_rule("twice")
    """
    if not isinstance(arity, int) or arity < 1:
        raise ValueError(f"arity must be a positive integer, got {arity!r}")
    names = (name, *aliases)
    if not replace:
        taken = [n for n in names if n in _ALIASES]
        if taken:
            raise RegistryError(
                f"rule name(s) {', '.join(map(repr, taken))} already registered; pass replace=True to override"
            )
    elif name in RULES:
        unregister_rule(name)
    rule = Rule(name, arity, forward, partial_rule, tuple(aliases), doc)
    RULES[name] = rule
    for n in names:
        _ALIASES[n] = name
    return rule


def unregister_rule(name: str) -> Rule:
    """Remove a rule (and its aliases) from the registry and return it.

    Examples
    --------
    >>> _ = register_rule("triple", 1, lambda x: 3 * x, lambda x, out: [3.0])
    >>> unregister_rule("triple").name
    'triple'
    >>> "triple" in RULES
    False
    """
    rule = get_rule(name)
    del RULES[rule.name]
    for n in (rule.name, *rule.aliases):
        _ALIASES.pop(n, None)
    return rule


def get_rule(name: str) -> Rule:
    """The rule for ``name``: a canonical name or an alias such as a ufunc name.

    Raises
    ------
    UnsupportedOperationError
        When nothing is registered under ``name``; the message names it.

    Examples
    --------
    >>> get_rule("absolute").name
    'abs'
    >>> get_rule("floor")
    Traceback (most recent call last):
    ...
    jacacc.errors.UnsupportedOperationError: no derivative rule for operation 'floor' ...
    """
    canonical = _ALIASES.get(name)
    if canonical is None:
        raise UnsupportedOperationError(
            f"no derivative rule for operation {name!r} (supported: {', '.join(sorted(RULES))}); "
            "register one with jacacc.rules.register_rule"
        )
    return RULES[canonical]


def rule_names() -> list[str]:
    """Canonical names of all registered rules, sorted.

    Examples
    --------
    >>> rule_names()[:4]
    ['abs', 'add', 'arccos', 'arccosh']
    """
    return sorted(RULES)


def ufunc_names() -> list[str]:
    """Every name the registry answers to (canonical names and aliases), sorted.

    Examples
    --------
    >>> "true_divide" in ufunc_names() and "div" in ufunc_names()
    True
    """
    return sorted(_ALIASES)


class ExprBuilder:
    """The operation table's builder (:class:`jacacc.ops.Builder`) for scalar :class:`~jacacc.partials.Expr`.

    The derivatives of :mod:`jacacc.ops` written with it are the partials on
    a traced graph's edges; :func:`jacacc.partials.apply` simplifies as they are
    built (``1*x``, constant folding).
    """

    def constant(self, value: float) -> Expr:
        return Const(value)

    def add(self, a: Expr, b: Expr) -> Expr:
        return apply("add", a, b)

    def multiply(self, a: Expr, b: Expr) -> Expr:
        return apply("mul", a, b)

    def subtract(self, a: Expr, b: Expr) -> Expr:
        return apply("sub", a, b)

    def divide(self, a: Expr, b: Expr) -> Expr:
        return apply("div", a, b)

    def power(self, a: Expr, exponent: float) -> Expr:
        return apply("pow", a, Const(exponent))

    def call(self, name: str, args: Sequence[Expr]) -> Expr:
        return apply(name, *args)


_BUILDER = ExprBuilder()


def _table_rule(op: ops.Operation) -> PartialRule:
    """The partial rule of a table operation: its derivative built as expressions.

    A constant operand is passed as a number so the derivative folds
    (``x**3`` gives ``3*x**2``); a zero partial of a traced operand is the
    constant 0, which keeps its edge (the code generators skip it as a
    structural zero) so a value that only feeds a predicate stays on an
    input→output path.
    """

    def partial_rule(*operands_and_out: Expr) -> list[Expr | ops.Zero]:
        *operands, out = operands_and_out
        args = [o.value if isinstance(o, Const) else o for o in operands]
        active = [not isinstance(o, Const) for o in operands]
        built = ops.partials(op.name, _BUILDER, args, out, active)
        return [Const(0.0) if p is ops.ZERO and on else p for p, on in zip(built, active, strict=True)]

    partial_rule.__name__ = f"_{op.name}_partials"
    return partial_rule


for _op in ops.iterate():
    register_rule(_op.name, _op.arity, _op.value, _table_rule(_op), aliases=_op.aliases, doc=_op.derivative_text)
del _op
