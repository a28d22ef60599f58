"""Checking operators' derivative rules numerically, at the applications a function makes.

An :class:`~jacacc.tensor.operators.Operator` declares a pushforward and gets
its pullback by transposition, or declares both.  :func:`check_operator_rules`
traces a function, finds every operator application in it, and checks at the
given arguments, application by application:

* the dot-product test ``⟨J·ṫ, c̄⟩ = ⟨ṫ, Jᵀ·c̄⟩`` between the pushforward and
  the pullback the operator uses (paper 004 §4 checks its operators so);
* where a ``vjp`` is declared, that it gives the transposed pushforward
  (:meth:`~jacacc.tensor.operators.Operator.transposed_pushforward`).

Random tangents and cotangents are drawn for the arguments that are floating
point and not constant; integer arguments (pivots, permutations) are held.
This is the rules' half of JAX's ``check_grads``: what a user registering an
operator runs, and what the tests run over every registered one.  Whether the
pushforward is the operator's derivative at all is checked on whole functions
(:func:`jacacc.tensor.jvp` against central differences of ``f``): an operator
alone can read only part of its argument (potrf one triangle) or take a
factorization beside the matrix it factors (getrs), which differences of its
``forward`` alone do not see.

Examples
--------
>>> import numpy as np
>>> import jacacc.linalg as jl
>>> A = np.eye(3) * 4 + 0.1
>>> checks = check_operator_rules(lambda A: jl.potrf(A), A)
>>> [c.operator for c in checks], all(c.passed for c in checks)
(['potrf'], True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jacacc.tensor.evaluate import Program
from jacacc.tensor.expr import OPERATORS, Tensor, nodes_of, rebuild, zeros
from jacacc.tensor.operators import get_operator, outputs_of, placeholder
from jacacc.tensor.trace import trace

__all__ = ["BoundRules", "RuleCheck", "applications", "bound_rules", "check_operator_rules", "differentiated_arguments",
           "forward_values"]


@dataclass(frozen=True)
class RuleCheck:
    """The checks of one operator application (relative errors; ``None`` where not applicable).

    Attributes
    ----------
    operator : str
    options : dict
    dot_product : float
        ``|⟨J·ṫ, c̄⟩ − ⟨ṫ, Jᵀ·c̄⟩| / (|⟨J·ṫ, c̄⟩| + |⟨ṫ, Jᵀ·c̄⟩|)``.
    declared_vs_transposed : float or None
        The declared ``vjp`` against the transposed pushforward; ``None`` without a declared ``vjp``.
    tolerance : float
        What each error is held to.
    """

    operator: str
    options: dict[str, Any]
    dot_product: float
    declared_vs_transposed: float | None
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.dot_product <= self.tolerance and (self.declared_vs_transposed is None
                                                       or self.declared_vs_transposed <= self.tolerance)

    def __str__(self) -> str:
        declared = "—" if self.declared_vs_transposed is None else f"{self.declared_vs_transposed:.1e}"
        return (f"{self.operator}: dot product {self.dot_product:.1e}, declared vjp vs transposed {declared} "
                f"({'passed' if self.passed else 'FAILED'})")


def _applications(roots: Sequence[Tensor]) -> list[Tensor]:
    """The first output node of each operator application under ``roots`` whose derivative is not
    declared zero, in evaluation order."""
    found, seen = [], set()
    for node in nodes_of(roots):
        if node.kind != "op" or get_operator(node.param[0]).zero_derivative:
            continue
        key = (node.param[0], node.param[1], tuple(id(a) for a in node.args))
        if key not in seen:
            seen.add(key)
            found.append(node)
    return found


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    scale = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)), 1e-300)
    return float(np.max(np.abs(a - b), initial=0.0)) / scale


@dataclass(frozen=True)
class BoundRules:
    """An application's derivative rules with its arguments and outputs as variables of their own
    (so the rules run alone, on given values): the inputs are ``arguments + outputs + tangents +
    cotangents``; the tangents of the arguments not in ``moving`` are the symbolic zero."""

    arguments: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    tangents: tuple[Tensor, ...]
    cotangents: tuple[Tensor, ...]
    pushforward: tuple[Tensor, ...]
    pullback: tuple[Tensor, ...]
    transposed: tuple[Tensor, ...] | None  # the transposed pushforward, where a vjp is declared

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return self.arguments + self.outputs + self.tangents + self.cotangents


def bound_rules(node: Tensor, moving: Sequence[int]) -> BoundRules:
    """The rules of the application ``node`` belongs to, differentiated in the arguments ``moving``."""
    operator, options = get_operator(node.param[0]), dict(node.param[1])
    args, outputs = node.args, outputs_of(node)
    arg_vars = tuple(placeholder(a.shape) for a in args)
    out_vars = tuple(placeholder(o.shape) for o in outputs)
    tangents = tuple(placeholder(a.shape) for a in args)
    cotangents = tuple(placeholder(o.shape) for o in outputs)
    rebound = dict(zip(map(id, args), arg_vars, strict=True)) | dict(zip(map(id, outputs), out_vars, strict=True))

    def bound(exprs: Sequence[Tensor]) -> tuple[Tensor, ...]:
        return tuple(rebuild(list(exprs), lambda old, new: rebound.get(id(old), new)))

    seeds = [t if k in moving else zeros(a.shape) for k, (a, t) in enumerate(zip(args, tangents, strict=True))]
    transposed = None if operator.vjp is None else \
        bound(operator.transposed_pushforward(outputs, args, cotangents, **options))
    return BoundRules(arg_vars, out_vars, tangents, cotangents,
                      bound(operator.pushforward(outputs, args, seeds, **options)),
                      bound(operator.pullback(outputs, args, cotangents, **options)), transposed)


def differentiated_arguments(node: Tensor, values: Sequence[Any]) -> list[int]:
    """The positions of ``node``'s arguments that are floating point and not constant."""
    return [k for k, (a, v) in enumerate(zip(node.args, values, strict=True))
            if a.kind != "const" and np.asarray(v).dtype.kind == "f"]


def forward_values(node: Tensor, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of ``node``'s application computed by its operator's ``forward`` on ``arrays``."""
    out = OPERATORS[node.param[0]].forward(*(np.array(a, copy=True) for a in arrays), **dict(node.param[1]))
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def _check_application(node: Tensor, values: list[np.ndarray], rng: np.random.Generator,
                       tolerance: float) -> RuleCheck:
    moving = differentiated_arguments(node, values)
    rules = bound_rules(node, moving)
    args, outputs = node.args, rules.outputs
    t_values = [rng.standard_normal(a.shape) if k in moving else np.zeros(a.shape) for k, a in enumerate(args)]
    c_values = [rng.standard_normal(o.shape) for o in outputs]
    results = Program([*rules.pushforward, *rules.pullback, *(rules.transposed or ())], rules.inputs)(
        *(np.asarray(v) for v in values), *forward_values(node, values), *t_values, *c_values)
    jt, vc = results[:len(outputs)], results[len(outputs):len(outputs) + len(args)]
    left = sum(float(np.sum(j * c)) for j, c in zip(jt, c_values, strict=True))
    right = sum(float(np.sum(t * v)) for k, (t, v) in enumerate(zip(t_values, vc, strict=True)) if k in moving)
    dot = abs(left - right) / max(abs(left) + abs(right), 1e-300)
    declared = None
    if rules.transposed is not None:
        reference = results[len(outputs) + len(args):]
        declared = max((_relative(vc[k], reference[k]) for k in moving), default=0.0)
    return RuleCheck(get_operator(node.param[0]).name, dict(node.param[1]), dot, declared, tolerance)


def applications(f: Callable, arrays: Sequence[np.ndarray]) -> list[tuple[Tensor, list[Any]]]:
    """Each operator application ``f`` makes at ``arrays`` (its first output node; operators whose
    derivative is declared zero left out) with the values of its arguments there."""
    traced = trace(f, arrays)
    nodes = _applications(traced.outputs)
    arguments = [a for node in nodes for a in node.args]
    values = Program(arguments, traced.inputs)(*arrays) if arguments else []
    found, start = [], 0
    for node in nodes:
        found.append((node, list(values[start:start + len(node.args)])))
        start += len(node.args)
    return found


def check_operator_rules(f: Callable, *args: Any, seed: int = 0, tolerance: float = 1e-9) -> list[RuleCheck]:
    """Check the derivative rules of every operator application ``f`` makes at ``args``.

    Parameters
    ----------
    f : callable
        A function of arrays, traced by :func:`jacacc.tensor.trace.trace`.
    *args : array_like
        The arguments; each application is checked at the values it receives from them.
    seed : int
        Seeds the random tangents and cotangents.
    tolerance : float
        The relative error each check is held to.

    Returns
    -------
    list of RuleCheck
        One per application (applications of operators whose derivative is declared zero are skipped).
    """
    rng = np.random.default_rng(seed)
    return [_check_application(node, values, rng, tolerance)
            for node, values in applications(f, [np.asarray(a) for a in args])]
