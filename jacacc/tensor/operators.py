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
* ``jvp``: the pushforward *as a tensor expression*, written with the
  operators themselves and einsums, so that a derivative of a derivative
  works (Hessians through a Cholesky factor),
* ``flops``: its forward FLOPs, for the cost reported by ``.flops``,

and, as JAX does (Frostig, Johnson, Maclaurin, Paszke & Radul, "Decomposing
reverse-mode automatic differentiation", 2021), gets its pullback by
*transposing* that pushforward (:mod:`jacacc.tensor.transpose`): the
pushforward is linear in the tangents, and its transpose applied to a
cotangent is the pullback.  A hand-written ``vjp`` is declared only where it
measures faster (``experiments/operator_pullbacks.py``).  An operator that is
*linear* in some of its arguments (``linear_in``: a reshape, a gather, a
triangular solve in its right-hand side) declares its ``transpose`` there,
which transposition needs, and a wholly linear one needs no ``jvp`` at all:
its pushforward is the operator applied to the tangents (JAX's
``deflinear``).  An operator whose derivative is zero wherever it exists (an
argsort, the pivots of an LU factorization) says so with ``zero_derivative``.

Zero tangents and cotangents are the symbolic zero
:func:`~jacacc.tensor.expr.zeros` of the right shape, which products,
sums and linear operators propagate without a test at each use.

:func:`apply_operator` builds the expression nodes (kind ``"op"``, one per
output); ``jacacc.tensor`` differentiates them through
:class:`~jacacc.tensor.linear.OperatorPartial` edges, linear maps that are
applied, never written out, until a dense result asks for them.

Examples
--------
>>> import numpy as np
>>> from jacacc.tensor.expr import const, einsum, render, var
>>> def cube_jvp(outputs, args, tangents):
...     (a,), (t,) = args, tangents
...     return (einsum(",ij,ij,ij->ij", const(3.0), a, a, t),)
>>> cube = Operator("cube_example", lambda a: a**3, lambda s: (s,), cube_jvp,
...                 flops=lambda s: 2 * int(np.prod(s)))
>>> register_operator(cube)
>>> A = var("A", (2, 2))
>>> (y,) = apply_operator("cube_example", [A])
>>> y.kind, y.shape, str(render(y))
('op', (2, 2), 'cube_example(A)')
>>> (pulled,) = cube.pullback((y,), (A,), (var("C", (2, 2)),))   # transposed from cube_jvp
>>> print(pulled)
einsum(ij,ij,ij,->ij)(C, A, A, 3)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jacacc.errors import RegistryError, TraceError
from jacacc.tensor.expr import OPERATORS, Tensor, operator_node, var, zeros

__all__ = ["Operator", "apply_operator", "get_operator", "no_flops", "outputs_of", "placeholder",
           "register_operator", "unary_linear"]

Shape = tuple[int, ...]


def no_flops(*_: Any, **__: Any) -> int:
    """The FLOPs of an operator that only moves entries (the default of :attr:`Operator.flops`)."""
    return 0


_PLACEHOLDERS = itertools.count()


def placeholder(shape: Shape) -> Tensor:
    """A fresh variable standing for a tangent or a cotangent while a rule is built."""
    return var(f"<placeholder {next(_PLACEHOLDERS)}>", tuple(shape))


@dataclass(frozen=True)
class Operator:
    """A general function with a declared pushforward; its pullback by transposition.

    Attributes
    ----------
    name : str
    forward : callable
        ``forward(*arrays, **options)`` → array or tuple of arrays (NumPy).
    output_shapes : callable
        ``output_shapes(*shapes, **options)`` → tuple of output shapes;
        raises ``ValueError`` with a clear message for shapes the operator refuses.
    jvp : callable or None
        ``jvp(outputs, args, tangents, **options)`` → one tangent expression per
        output, linear in ``tangents`` (one expression per argument, the symbolic
        zero where an argument has none).  ``None`` for a wholly linear operator
        (``linear_in``): its pushforward is the operator applied to the tangents.
    vjp : callable or None
        ``vjp(outputs, args, cotangents, **options)`` → one cotangent expression
        per argument (``cotangents``: one per output, zeros where absent).  ``None``:
        the transpose of ``jvp`` (:func:`jacacc.tensor.transpose.transpose_linear`),
        or of the operator itself where it is linear; a hand-written one is kept
        where it measures faster.
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
    linear_in : tuple of int, or "all"
        The argument positions in which the operator is (jointly) linear, the others held fixed:
        a triangular solve's right-hand side; ``"all"`` for every argument, however many (the
        pieces of a concatenation).  Where ``jvp`` is
        ``None`` the operator's other arguments are data it does not differentiate (indices, a
        permutation).
    transpose : callable or None
        ``transpose(args, cotangents, **options)`` → one cotangent expression per position of
        ``linear_in``: the adjoint of the linear map ``args[linear_in] ↦ outputs``, which must not
        read the linear arguments (it is the same map at every point).  Required with ``linear_in``.
    zero_derivative : bool
        The derivative is zero wherever it exists (an argsort, a floor, LU's pivots): no ``jvp``.
    """

    name: str
    forward: Callable[..., Any]
    output_shapes: Callable[..., tuple[tuple[int, ...], ...]]
    jvp: Callable[..., tuple[Tensor, ...]] | None = None
    vjp: Callable[..., tuple[Tensor, ...]] | None = None
    flops: Callable[..., int] = no_flops
    in_place: tuple[tuple[int, str], ...] = ()
    batch: Callable[..., tuple[Sequence[Tensor], dict[str, Any]] | None] | None = None
    device: bool = False
    spelling: Callable[..., str] | None = None
    scipy_blas: bool = False
    linear_in: tuple[int, ...] | str = ()
    transpose: Callable[..., tuple[Tensor, ...]] | None = None
    zero_derivative: bool = False

    def __post_init__(self) -> None:
        if self.zero_derivative and (self.jvp or self.vjp or self.linear_in or self.transpose):
            raise RegistryError(f"operator {self.name!r}: zero_derivative excludes jvp, vjp, linear_in and transpose")
        if bool(self.linear_in) != (self.transpose is not None):
            raise RegistryError(f"operator {self.name!r}: linear_in and transpose are declared together")
        if isinstance(self.linear_in, str) and self.linear_in != "all":
            raise RegistryError(f"operator {self.name!r}: linear_in is positions or 'all', got {self.linear_in!r}")
        if not self.zero_derivative and self.jvp is None and not self.linear_in:
            raise RegistryError(f"operator {self.name!r}: declare its jvp, or linear_in and transpose for a linear "
                                f"operator, or zero_derivative")

    def linear_positions(self, n_args: int) -> tuple[int, ...]:
        """The positions of ``linear_in`` among ``n_args`` arguments."""
        return tuple(range(n_args)) if self.linear_in == "all" else tuple(self.linear_in)

    # ------------------------------------------------------------------ derivatives
    def pushforward(self, outputs: Sequence[Tensor], args: Sequence[Tensor], tangents: Sequence[Tensor],
                    **options: Any) -> tuple[Tensor, ...]:
        """The outputs' tangents from the arguments' (``tangents``: one per argument, zeros where absent)."""
        if self.zero_derivative or all(t.is_zero for t in tangents):
            return tuple(zeros(o.shape) for o in outputs)
        if self.jvp is None:  # linear: the operator itself on the tangents of its linear arguments
            linear = self.linear_positions(len(args))
            moved = [tangents[k] if k in linear else a for k, a in enumerate(args)]
            return apply_operator(self.name, moved, **options)
        return self._checked("jvp", self.jvp(tuple(outputs), tuple(args), tuple(tangents), **options), outputs)

    def pullback(self, outputs: Sequence[Tensor], args: Sequence[Tensor], cotangents: Sequence[Tensor],
                 **options: Any) -> tuple[Tensor, ...]:
        """The arguments' cotangents from the outputs' (``cotangents``: one per output, zeros where absent)."""
        if self.vjp is None or self.zero_derivative or all(c.is_zero for c in cotangents):
            return self.transposed_pushforward(outputs, args, cotangents, **options)
        return self._checked("vjp", self.vjp(tuple(outputs), tuple(args), tuple(cotangents), **options), args)

    def transposed_pushforward(self, outputs: Sequence[Tensor], args: Sequence[Tensor], cotangents: Sequence[Tensor],
                               **options: Any) -> tuple[Tensor, ...]:
        """The pullback as the transpose of the pushforward, whether or not a ``vjp`` is declared
        (what :meth:`pullback` gives without one; with one, the reference it is checked against)."""
        if self.zero_derivative or all(c.is_zero for c in cotangents):
            return tuple(zeros(a.shape) for a in args)
        if self.jvp is None:
            return self.transposed(args, cotangents, **options)
        from jacacc.tensor.transpose import transpose_linear

        seeds = [placeholder(a.shape) for a in args]
        return tuple(transpose_linear(self.pushforward(outputs, args, seeds, **options), seeds, cotangents))

    def transposed(self, args: Sequence[Tensor], cotangents: Sequence[Tensor], **options: Any) -> tuple[Tensor, ...]:
        """The adjoint of the operator as a linear map of its ``linear_in`` arguments: one cotangent
        per argument, zeros outside ``linear_in``."""
        if not self.linear_in:
            raise TraceError(f"operator {self.name!r} is not linear in any argument: it has no transpose")
        positions = self.linear_positions(len(args))
        pieces = self._checked("transpose", self.transpose(tuple(args), tuple(cotangents), **options),
                               [args[k] for k in positions])
        placed = dict(zip(positions, pieces, strict=True))
        return tuple(placed.get(k, zeros(a.shape)) for k, a in enumerate(args))

    def _checked(self, rule: str, results: Any, like: Sequence[Tensor]) -> tuple[Tensor, ...]:
        # a rule that returns the wrong thing is the operator's bug: name it here, not deep in a sweep
        results = tuple(results)
        if len(results) != len(like) or any(not isinstance(r, Tensor) or r.shape != x.shape
                                            for r, x in zip(results, like, strict=False)):
            got = [getattr(r, "shape", r) for r in results]
            raise RegistryError(f"operator {self.name!r}: its {rule} gave {got}; expected one tensor per "
                                f"{'output' if rule == 'jvp' else 'argument'} of shapes {[x.shape for x in like]}")
        return results


def unary_linear(name: str, forward: Callable[..., Any], output_shapes: Callable[..., tuple[Shape, ...]],
                 adjoint: Callable[..., Tensor], **fields: Any) -> Operator:
    """A linear operator of one argument, declared by its adjoint ``adjoint(cotangent, arg, **options)``
    (which may read the argument's shape, not its values); its pushforward is itself.  ``fields``:
    the other :class:`Operator` attributes (``batch``, ``spelling``, ``flops``, …)."""

    def transpose(args: tuple[Tensor, ...], cotangents: tuple[Tensor, ...], **options: Any) -> tuple[Tensor]:
        return (adjoint(cotangents[0], args[0], **options),)

    return Operator(name, forward, output_shapes, linear_in=(0,), transpose=transpose, **fields)


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
    if name not in OPERATORS:
        _register_builtin_operators()
    try:
        return OPERATORS[name]
    except KeyError:
        raise RegistryError(f"unknown operator {name!r}; registered: {', '.join(sorted(OPERATORS))}") from None


#: modules that register jacacc's own operators when imported; the linear-algebra ones are imported
#: on first use (a traced call of jacacc.linalg or np.linalg), so a lookup by name imports them
_BUILTIN_OPERATOR_MODULES = ("jacacc.linalg.blas_cholesky", "jacacc.linalg.factorizations", "jacacc.linalg.svd",
                             "jacacc.tensor.scipy_functions")


def _register_builtin_operators() -> None:
    import importlib

    for module in _BUILTIN_OPERATOR_MODULES:
        importlib.import_module(module)


def _options_key(options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(options.items()))


def apply_operator(name: str, args: Sequence[Tensor], **options: Any) -> tuple[Tensor, ...]:
    """The output nodes of operator ``name`` applied to ``args`` (one node per output).

    The nodes share their arguments and options; the evaluator computes the
    operator once for all of them.  A linear operator of zero arguments is the
    symbolic zero (``linear_in``: a pushforward or a transpose of a zero needs no node).
    """
    operator = get_operator(name)
    shapes = operator.output_shapes(*(a.shape for a in args), **options)
    if operator.linear_in and all(args[k].is_zero for k in operator.linear_positions(len(args))):
        return tuple(zeros(shape) for shape in shapes)
    key = _options_key(options)
    return tuple(operator_node(name, tuple(args), key, index, shape) for index, shape in enumerate(shapes))


def outputs_of(node: Tensor) -> tuple[Tensor, ...]:
    """All output nodes of the operator application ``node`` belongs to."""
    name, key, _ = node.param
    return apply_operator(name, node.args, **dict(key))
