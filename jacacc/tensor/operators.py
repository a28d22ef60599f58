"""General functions as expression nodes: operators with declared derivatives (paper 002, Theorems 6 and 9).

Paper 002 differentiates a *general unary function* ``C = f(A)`` by its
derivative tensor ``f'(A)`` (Theorem 6 forward, Theorem 9 reverse).  For the
linear-algebra operators of paper 004 (Cholesky, triangular solves, …) that
tensor has ``n⁴`` entries and is never wanted: what the chain rule needs is
its action on a tangent (the *pushforward*, ``Ċ = f'(A)·Ȧ``) and its
transpose's action on a cotangent (the *pullback*, ``Ā = C̄·f'(A)``), which
BLAS/LAPACK compute in ``O(n³)``.  An :class:`Operator` declares

* ``forward``: the NumPy computation (one array or a tuple of them),
* ``output_shapes``: the shapes of its outputs from those of its arguments,
* ``jvp`` and ``vjp``: the pushforward and pullback *as tensor expressions*,
  written with the operators themselves and einsums, so that a derivative
  of a derivative works (Hessians through a Cholesky factor),
* ``flops``: its forward FLOPs, for the cost reported by ``.flops``.

:func:`apply_operator` builds the expression nodes (kind ``"op"``, one per
output); ``jacacc.tensor`` differentiates them through
:class:`~jacacc.tensor.linear.OperatorPartial` edges, linear maps that are
applied, never written out, until a dense result asks for them.

Examples
--------
>>> import numpy as np
>>> from jacacc.tensor.expr import const, einsum, render, var
>>> def double_vjp(outputs, args, cotangents, **options):
...     (c,) = cotangents
...     return (None if c is None else einsum(",ij->ij", const(2.0), c),)
>>> double = Operator("double_example", lambda a: 2 * a, lambda s: (s,),
...                   lambda outputs, args, tangents: (einsum(",ij->ij", const(2.0), tangents[0]),),
...                   double_vjp, lambda s: int(np.prod(s)))
>>> register_operator(double)
>>> (y,) = apply_operator("double_example", [var("A", (2, 2))])
>>> y.kind, y.shape, str(render(y))
('op', (2, 2), 'double_example(A)')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.errors import RegistryError
from jacacc.tensor.expr import OPERATORS, Tensor, operator_node

__all__ = ["Operator", "apply_operator", "get_operator", "outputs_of", "register_operator"]

@dataclass(frozen=True)
class Operator:
    """A general function with a declared pushforward and pullback.

    Attributes
    ----------
    name : str
    forward : callable
        ``forward(*arrays, **options)`` → array or tuple of arrays (NumPy).
    output_shapes : callable
        ``output_shapes(*shapes, **options)`` → tuple of output shapes;
        raises ``ValueError`` with a clear message for shapes the operator refuses.
    jvp : callable
        ``jvp(outputs, args, tangents, **options)`` → one tangent expression per
        output (``None``: zero); ``tangents`` has one expression or ``None`` per
        argument.
    vjp : callable
        ``vjp(outputs, args, cotangents, **options)`` → one cotangent expression
        per argument (``None``: zero); ``cotangents`` has one per output.
    flops : callable
        ``flops(*shapes, **options)`` → FLOPs of one forward evaluation.
    in_place : tuple of (int, str)
        ``(argument position, keyword)`` pairs: ``forward(..., keyword=True)``
        may overwrite that argument's memory with its result (LAPACK works in
        place).  The evaluator passes it when nothing reads the argument later.
    batch : callable or None
        The batching rule (:mod:`jacacc.tensor.batching`):
        ``batch(batch_shape, args, batched, **options)`` → ``(args, options)``
        applying the same operator to arguments of which those flagged in
        ``batched`` carry leading ``batch_shape`` axes, giving outputs with
        those axes in front — or ``None`` where it cannot.  Without one, a
        batch is applied element by element.
    spelling : callable or None
        ``spelling(args, **options)`` → one Python expression computing the operator's only output
        from the NumPy arrays named by the source texts ``args``, which the straight-line program
        (:mod:`jacacc.tensor.straightline`) writes inline instead of calling ``forward`` (a call
        through the generic path costs microseconds a step, which small programs feel).  It must
        give what ``forward`` gives: the interpreter keeps calling ``forward``.
    scipy_blas : bool
        Whether ``forward`` calls SciPy's BLAS or LAPACK.  NumPy and SciPy each load their own
        OpenBLAS, each with a thread pool that spins after a call; a program alternating them on
        two threads ran no faster than on one (potrf's backward at n = 1024: NumPy's GEMM between
        SciPy's potrf and trsm calls, 139 ms, against 74 ms all in SciPy).  The straight-line
        program runs its matrix products through SciPy's BLAS where one of its operators has this.
    device : bool
        Whether ``forward`` also takes CuPy arrays (it is written against its arguments' array
        module, :func:`jacacc.ops.array_module`).  The evaluator refuses CuPy arrays for an
        operator without it (LAPACK through SciPy, say) with a clear error.
    """

    name: str
    forward: Callable[..., Any]
    output_shapes: Callable[..., tuple[tuple[int, ...], ...]]
    jvp: Callable[..., tuple[Tensor | None, ...]]
    vjp: Callable[..., tuple[Tensor | None, ...]]
    flops: Callable[..., int]
    in_place: tuple[tuple[int, str], ...] = ()
    batch: Callable[..., tuple[Sequence[Tensor], dict[str, Any]] | None] | None = None
    device: bool = False
    spelling: Callable[..., str] | None = None
    scipy_blas: bool = False


def register_operator(operator: Operator) -> None:
    """Make ``operator`` available to :func:`apply_operator` (replacing one of the same name)."""
    OPERATORS[operator.name] = operator


def get_operator(name: str) -> Operator:
    """The registered operator ``name``.

    Raises
    ------
    RegistryError
        Unknown name (the registered ones are listed).
    """
    try:
        return OPERATORS[name]
    except KeyError:
        raise RegistryError(f"unknown operator {name!r}; registered: {', '.join(sorted(OPERATORS))}") from None


def _options_key(options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(options.items()))


def apply_operator(name: str, args: Sequence[Tensor], **options: Any) -> tuple[Tensor, ...]:
    """The output nodes of operator ``name`` applied to ``args`` (one node per output).

    The nodes share their arguments and options; the evaluator computes the
    operator once for all of them.
    """
    operator = get_operator(name)
    shapes = operator.output_shapes(*(a.shape for a in args), **options)
    key = _options_key(options)
    return tuple(operator_node(name, tuple(args), key, index, shape) for index, shape in enumerate(shapes))


def outputs_of(node: Tensor) -> tuple[Tensor, ...]:
    """All output nodes of the operator application ``node`` belongs to."""
    name, key, _ = node.param
    return apply_operator(name, node.args, **dict(key))
