"""The public tensor-calculus API: grad, jacobian, hessian, vjp, jvp (paper 002).

Each transformation traces ``f`` once per argument shapes and dtype, derives
the derivative *expression* by vertex elimination on the tensor graph in the
chosen ``mode``, simplifies it, plans it (:class:`~jacacc.tensor.evaluate.Program`)
and caches the plan; later calls only evaluate.  A Hessian is the derivative
of the Jacobian expression, so every mode applies to both passes.

Derivatives keep their structure (DESIGN.md): an input read twice (``w @ w``,
``np.sum(w * w)``, ``np.outer(x, x)``) gives partials that are a scaled
identity, a diagonal or a sum of δ-structured factors
(:class:`~jacacc.tensor.factor.FactorSum`), added as such and never assembled
entry by entry, and the evaluator adds a δ term into a dense sum along its
diagonal.  The Hessian of logistic regression plus ``λ·Σw²`` is that of
logistic regression plus ``2λ`` on its diagonal, at the same cost; the
tracemalloc peak of the Hessians of ``w @ w``, ``Σ w²`` and logistic
regression with an L2 term, and of the Jacobian of ``np.outer(x, x)``, is at
most twice their result plus their inputs (``tests/tensor/test_tensor_structure.py``).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import math
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jacacc.errors import RegistryError, TraceError, UnsupportedOperationError, require_real_dtype
from jacacc.progress import slow_work
from jacacc.tensor.captured import MAX_BINDINGS, Captured, refuse_impure_trace
from jacacc.tensor.derive import derivative_factors, tensor_modes
from jacacc.tensor.evaluate import Program, array_module
from jacacc.tensor.expr import Tensor, flops_of, fuse_einsums, render, var, zeros
from jacacc.tensor.factor import Factor, FactorSum, materialize
from jacacc.tensor.graph import tensor_graph
from jacacc.tensor.pytree import Arguments, is_container, structure_builder, structure_reader
from jacacc.tensor.trace import Traced, TracedFunction, trace

__all__ = ["CompressedHessian", "DerivativeExpression", "derivative_expression", "grad", "hessian", "jacobian",
           "jvp", "value_and_grad", "vjp"]


# ---------------------------------------------------------------------------- checking arguments
def _check_mode(mode: Any) -> str:
    valid = tensor_modes()
    if not isinstance(mode, str) or mode not in valid:
        raise RegistryError(f"unknown mode {mode!r}; valid modes: {', '.join(valid)}")
    return mode


def _check_argnum(argnum: Any, n: int) -> int:
    if isinstance(argnum, bool) or not isinstance(argnum, int | np.integer):
        raise TypeError(f"argnum must be an int, got {type(argnum).__name__}")
    if not -n <= argnum < n:
        raise ValueError(f"argnum {argnum} is out of range for a function called with {n} argument(s)")
    return int(argnum) % n


def _argnums(argnum: Any) -> tuple[bool, tuple[Any, ...]]:
    """Whether ``argnum`` names several positions (a sequence: the results come as a tuple), and
    the positions (one int, unchecked against the call's arguments, or the checked sequence)."""
    several = not isinstance(argnum, int | np.integer) or isinstance(argnum, bool)
    return several, (_argnum_sequence(argnum) if several else (argnum,))


def _argnum_sequence(argnum: Any) -> tuple[Any, ...]:
    """Several positions: a non-empty sequence of ints."""
    if isinstance(argnum, str | bytes) or not isinstance(argnum, Sequence | np.ndarray) or len(argnum) == 0:
        raise TypeError(f"argnum must be an int or a non-empty sequence of ints, got {argnum!r}")
    for k in argnum:
        if isinstance(k, bool) or not isinstance(k, int | np.integer):
            raise TypeError(f"argnum must be an int or a non-empty sequence of ints, got {argnum!r}")
    return tuple(argnum)


def _as_array(a: Any, position: int, differentiated: bool) -> Any:
    """``a`` as a NumPy (or CuPy) array; complex refused, integers refused where differentiated,
    masked arrays refused (``np.asarray`` would drop the mask)."""
    if isinstance(a, np.ma.MaskedArray):
        raise TypeError(f"argument {position} is a masked array (numpy.ma): jacacc.tensor would drop its mask; "
                        "pass the data with the masked entries filled (a.filled(value)) and the mask as an array")
    if not type(a).__module__.startswith("cupy"):
        a = np.asarray(a)
    require_real_dtype(a.dtype, f"argument {position}", "jacacc.tensor")
    if differentiated and a.dtype.kind != "f":
        raise TypeError(f"argument {position} has dtype {a.dtype}: the differentiated argument must be "
                        "float32 or float64 (an integer argument has no derivative)")
    return a


_FLOAT64 = np.dtype(np.float64)
_FLOAT64_STR = _FLOAT64.str  # ``dtype.str`` builds a new string at every access


def _prepare(args: Sequence[Any], wrt: Sequence[int]) -> tuple[Sequence[Any], np.dtype, tuple]:
    """The arguments as arrays of one float dtype, that dtype, and the plan's cache key."""
    # the common case, float64 NumPy arrays, checked in a plain loop: it runs at every call, where
    # ``all`` over a generator cost 0.8 µs more
    shapes = []
    for a in args:
        if type(a) is not np.ndarray or a.dtype is not _FLOAT64:
            break
        shapes.append(a.shape)
    else:
        return args, _FLOAT64, (tuple(shapes), _FLOAT64_STR, "numpy")
    arrays = [_as_array(a, k, k in wrt) for k, a in enumerate(args)]
    floats = [a.dtype for a in arrays if a.dtype.kind == "f"]
    dtype = np.result_type(*floats) if floats else np.dtype(np.float64)
    dtype = np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)
    xp = array_module(arrays)
    # an integer or boolean argument not differentiated (labels, indices, a mask) is data f may index
    # with: traced as the constant it is, so the plan is keyed by its value
    arrays = [a if a.dtype == dtype or (a.dtype.kind in _CONSTANT_KINDS and k not in wrt) else a.astype(dtype)
              for k, a in enumerate(arrays)]
    key = (tuple(tuple(a.shape) for a in arrays), dtype.str, xp.__name__,
           *(_content_key(a) for a in arrays if a.dtype.kind in _CONSTANT_KINDS))
    return arrays, dtype, key


#: dtype kinds of the arguments traced as constants (where not differentiated)
_CONSTANT_KINDS = "iub"


def _content_key(a: Any) -> tuple:
    """An array's dtype and a digest of its values: part of a plan's key where the plan holds it."""
    data = np.ascontiguousarray(a.get() if hasattr(a, "get") else a)  # a CuPy array: its values on the host
    return data.dtype.str, hashlib.blake2b(data.tobytes(), digest_size=16).digest()


# ---------------------------------------------------------------------------- derivative expressions
def _zero_factor(out_shape: tuple[int, ...], inp_shape: tuple[int, ...]) -> Factor:
    # A scalar zero broadcast over every axis: compression then stores one number.
    letters = "".join(chr(ord("a") + k) for k in range(len(out_shape) + len(inp_shape)))
    return Factor.from_letters(zeros(()), "", letters[: len(out_shape)], letters[len(out_shape):],
                               out_shape, inp_shape)


def derivative_factor(y: Tensor, x: Tensor, mode: str) -> tuple[Factor | FactorSum, int, list[Hashable]]:
    """∂y/∂x as a factor (δs symbolic; a :class:`~jacacc.tensor.factor.FactorSum` where terms
    with different δs meet; written out where general functions
    (:mod:`jacacc.tensor.operators`) lie on the way), with the elimination's FLOPs and order."""
    graph = tensor_graph([y], [x])
    factors, flops, order = derivative_factors(graph, mode)
    found = factors.get((graph.inputs[0], graph.outputs[0]))
    return (found if found is not None else _zero_factor(y.shape, x.shape)), flops, order


def jacobian_expression(y: Tensor, x: Tensor, mode: str) -> Tensor:
    """The dense Jacobian of ``y`` w.r.t. ``x`` as an expression of shape ``y.shape + x.shape``."""
    return materialize(derivative_factor(y, x, mode)[0])


@dataclass
class DerivativeExpression:
    """A derivative as a printable tensor expression.

    Attributes
    ----------
    expression : Tensor
        The dense derivative (shape ``out.shape + x.shape * order``).
    factor : Factor or FactorSum
        The last derivative before its δs were written out (what
        ``compress=True`` keeps, a sum's terms added into one factor).
    flops : int
        FLOPs of evaluating ``expression`` once (every node, the function's own
        included, each shared node once) — the sum over the einsums, sums and
        elementwise functions the evaluator runs.
    elimination_flops : list of int
        FLOPs of the products each elimination pass built.
    mode : str
    """

    expression: Tensor
    factor: Factor | FactorSum
    flops: int
    elimination_flops: list[int]
    mode: str
    inputs: tuple[Tensor, ...] = field(repr=False)

    def __str__(self) -> str:
        return render(self.expression)

    def evaluate(self, *args: Any) -> Any:
        """The derivative at ``args`` (one evaluation, planned on the spot)."""
        arrays, dtype, _ = _prepare(args, ())
        return Program([self.expression], self.inputs, dtype)(*arrays)[0]


def _derivatives(y: Tensor, inputs: Sequence[Tensor], wrt: Sequence[int], mode: str) -> list[Tensor]:
    """∂y/∂x_k for each argument ``k`` of ``wrt`` (``x_k = inputs[k]``), dense, from one
    elimination on the graph from all of them to ``y``: in reverse mode one backward sweep
    serves every argument, where a derivative per argument would sweep once each."""
    distinct = list(dict.fromkeys(wrt))  # an argument named twice is one input of the graph
    graph = tensor_graph([y], [inputs[k] for k in distinct])
    factors, _, _ = derivative_factors(graph, mode)
    derivatives = {}
    for v, k in zip(graph.inputs, distinct, strict=True):
        found = factors.get((v, graph.outputs[0]))
        derivatives[k] = materialize(found if found is not None else _zero_factor(y.shape, inputs[k].shape))
    return [derivatives[k] for k in wrt]


def _first_derivatives(traced: TracedFunction, wrt: Sequence[int], mode: str) -> list[Tensor]:
    """∂f/∂x_k for each argument ``k`` of ``wrt`` (:func:`_derivatives`)."""
    return _derivatives(traced.outputs[0], traced.inputs, wrt, mode)


def _second_derivatives(traced: TracedFunction, wrt: Sequence[int], mode: str) -> list[Tensor]:
    """The blocks ∂²f/∂x_i∂x_j of ``wrt × wrt``, row by row: the first derivatives from one
    elimination, then each one's row of blocks from one more elimination w.r.t. every argument,
    or every block from one of its own, whichever costs fewer FLOPs in all (the joint rows share
    a sweep; one elimination per block fits its order to the block: a neural net's Hessian took
    22 M FLOPs in joint rows and 15 M by blocks, a Gaussian mixture's 1.75 M and 2.17 M)."""
    firsts = _first_derivatives(traced, wrt, mode)
    rows = [block for first in firsts for block in _derivatives(first, traced.inputs, wrt, mode)]
    if len(set(wrt)) == 1:
        return rows
    by_block = [_derivatives(first, traced.inputs, [j], mode)[0] for first in firsts for j in wrt]
    return min(rows, by_block, key=flops_of)


def _derive(traced: TracedFunction, argnum: int | Sequence[int], order: int, mode: str,
            fused: bool = True) -> DerivativeExpression:
    """The ``order``-th derivative w.r.t. argument ``argnum``, or the mixed one w.r.t. the arguments
    ``argnum`` lists (one per pass: ``(i, j)`` is ∂²f/∂x_i∂x_j, its axes those of f, x_i, x_j).

    ``fused=False`` leaves the einsum chains as they are, for a :class:`Program` of several
    derivatives that fuses them over all at once: fused one derivative at a time, each folds the
    function's own products into chains of its own (attention's ``X Wq Wkᵀ Xᵀ`` three ways for
    the gradients of ``Wq``, ``Wk`` and ``Wv``), and the program computes the function thrice."""
    positions = [argnum] * order if isinstance(argnum, int | np.integer) else list(argnum)
    y = traced.outputs[0]
    passes: list[int] = []
    expression, factor = y, None
    for k in positions:
        factor, flops, _ = derivative_factor(expression, traced.inputs[k], mode)
        passes.append(flops)
        expression = materialize(factor)
    if fused:  # what runs: the last expression with its einsum chains fused (as Program does)
        (expression,) = fuse_einsums([expression])
    return DerivativeExpression(expression, factor, flops_of([expression]), passes, mode, traced.inputs)


def derivative_expression(f: Callable, *args: Any, argnum: int = 0, order: int = 2,
                          mode: str = "cross_country") -> DerivativeExpression:
    """The ``order``-th derivative of ``f`` w.r.t. argument ``argnum`` at the
    shapes of ``args``, as a printable expression with its FLOP count.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.ones((6, 3))
    >>> d = derivative_expression(lambda w, X: np.sum(np.log1p(np.exp(X @ w))), np.ones(3), X, order=1)
    >>> d.expression.shape, d.flops > 0
    ((3,), True)
    """
    if isinstance(order, bool) or not isinstance(order, int) or order < 1:
        raise ValueError(f"order must be a positive int, got {order!r}")
    mode = _check_mode(mode)
    argnum = _check_argnum(argnum, len(args))
    arrays, _, _ = _prepare(args, (argnum,))
    return _derive(trace(f, arrays), argnum, order, mode)


# ---------------------------------------------------------------------------- compiled transformations
#: a captured float whose value has changed this many times becomes a parameter of the plans
PARAMETER_AFTER_CHANGES = 3


@dataclass
class _Parameter:
    """A captured float that the plans take as an input, read at each call (not a constant)."""

    what: str  # as Captured describes the binding
    read: Callable[[], Any]
    write: Callable[[Any], None]


class _Cache:
    """Plans per (shapes, dtype, array module), built on first use and rebuilt
    when a value ``f`` read besides its arguments has changed since.

    ``build(arrays, dtype, *extra)`` traces ``f`` (through :meth:`trace`, which
    snapshots what ``f`` can reach and refuses random draws and side effects)
    and plans the derivative; :meth:`get` reuses a plan only while that
    snapshot still holds (:mod:`jacacc.tensor.captured`).

    A captured float that keeps changing (a step size, a temperature, a
    regularization weight set before each call) would re-trace and re-plan at
    every call: after :data:`PARAMETER_AFTER_CHANGES` changes it becomes a
    parameter, traced as a scalar input that the plan reads at each call.
    Where ``f`` cannot be traced so (it branches on the value, or makes a
    shape of it), the float stays a constant.
    """

    def __init__(self, f: Callable, name: str, build: Callable[..., Any]) -> None:
        self.f, self.name, self.build = f, name, build
        self.plans: dict[tuple, Any] = {}
        self.captured: Captured | None = None
        self._snapshot = Captured()
        self._work: Any = None  # the progress report of the plan being built (jacacc.progress.slow_work)
        self.parameters: list[_Parameter] = []
        self._parameter_names: frozenset[str] = frozenset()
        self._changes: collections.Counter[str] = collections.Counter()
        self._constants: set[str] = set()  # floats that f cannot take as parameters

    def trace(self, arrays: Sequence[Any]) -> TracedFunction:
        """``f`` traced at ``arrays``; refused if it draws random numbers or changes
        what it reads meanwhile (a cached plan could not repeat either)."""
        if self._work is not None:
            self._work.stage("tracing")
        while True:
            try:
                with refuse_impure_trace(self._snapshot, getattr(self.f, "__name__", "f"), self.name):
                    traced = self._trace_with_parameters(arrays)
                break
            except (TraceError, UnsupportedOperationError, TypeError, ValueError):
                if not self.parameters:
                    raise
                # f reads a parameter where it needs a number (a branch, a shape): constants again
                self._constants.update(self._parameter_names)
                self._set_parameters([])
        if self._work is not None:
            self._work.stage(f"deriving and planning ({len(traced.inputs)} arguments)")
        return traced

    def _trace_with_parameters(self, arrays: Sequence[Any]) -> TracedFunction:
        nodes = [var(f"captured{k}", ()) for k in range(len(self.parameters))]
        values = [p.read() for p in self.parameters]
        try:
            for p, node in zip(self.parameters, nodes, strict=True):
                p.write(Traced(node))
            return trace(self.f, arrays, nodes)
        finally:
            for p, value in zip(self.parameters, values, strict=True):
                p.write(value)

    def _set_parameters(self, parameters: list[_Parameter]) -> None:
        self.parameters = parameters
        self._parameter_names = frozenset(p.what for p in parameters)
        self.plans.clear()

    def _note_change(self, what: str) -> None:
        """Count a change of ``what``; past the threshold a float becomes a parameter."""
        self._changes[what] += 1
        if self._changes[what] < PARAMETER_AFTER_CHANGES or what in self._constants or self.captured is None:
            return
        binding = self.captured.scalar_binding(what)
        if binding is not None:
            self._set_parameters([*self.parameters, _Parameter(what, *binding)])

    def get(self, arrays: Sequence[Any], dtype: np.dtype, key: tuple, *extra: Any) -> Any:
        if self.captured is not None:
            change = self.captured.changed(self._parameter_names)
            if change is not None:
                self._note_change(change)
                # every plan read the old values
                self.plans.clear()
                self.captured = None
        plan = self.plans.get(key)
        if plan is None:
            # a snapshot before tracing shows f's own side effects; the one kept is taken after
            self._snapshot = Captured.of(self.f)
            with slow_work(f"{self.name} of {getattr(self.f, '__name__', 'f')}") as self._work:
                plan = self.plans[key] = self.build(arrays, dtype, *extra)
            self._work = None
            self.captured = Captured.of(self.f)
            if not self.captured.complete:
                warnings.warn(f"{getattr(self.f, '__name__', 'f')} reaches more than {MAX_BINDINGS} values besides "
                              f"its arguments: they cannot be checked at each call, so the {self.name} traces it at "
                              "every call; pass large data as arguments", RuntimeWarning, stacklevel=3)
        if self.parameters:
            return _WithParameters(plan, [p.read for p in self.parameters], dtype)
        return plan


class _WithParameters:
    """A plan called with the arguments and then the captured parameters' current values."""

    def __init__(self, plan: Any, reads: list[Callable[[], Any]], dtype: np.dtype) -> None:
        self.plan, self.reads, self.dtype = plan, reads, dtype

    def __call__(self, *arrays: Any) -> Any:
        return self.plan(*arrays, *(np.asarray(read(), dtype=self.dtype) for read in self.reads))


def _transformation(f: Callable, argnum: int | Sequence[int], order: int, mode: str, *, scalar: bool,
                    compress: bool, name: str) -> Callable:
    if not callable(f):
        raise TypeError(f"{name} needs a function, got {type(f).__name__}")
    mode = _check_mode(mode)
    several, argnums = _argnums(argnum)
    if several and compress:
        raise ValueError("hessian(compress=True) takes one argnum: compress the blocks of several arguments one "
                         "argnum at a time")

    def build(arrays: Sequence[Any], dtype: np.dtype, wrt: tuple[int, ...]) -> Any:
        traced = cache.trace(arrays)
        y = traced.outputs[0]
        if scalar and y.shape != ():
            raise TraceError(f"{name} needs a scalar-valued function; {getattr(f, '__name__', 'f')} returns shape "
                             f"{y.shape} (use jacobian)")
        if compress:
            factor = _derive(traced, wrt[0], order, mode).factor
            if isinstance(factor, FactorSum):  # one stored tensor: the δs the terms do not share written out
                factor, _ = factor.collapsed()
            return _CompressedPlan(factor, traced.inputs, dtype)
        if order == 1:  # one elimination for every argument: a reverse sweep shared by all
            return Program(_first_derivatives(traced, wrt, mode), traced.inputs, dtype)
        if order == 2 and several:  # one program for every block ∂²f/∂x_i∂x_j, row by row (JAX's nesting)
            return Program(_second_derivatives(traced, wrt, mode), traced.inputs, dtype)
        blocks = itertools.product(wrt, repeat=order) if several else [(wrt[0],) * order]
        return Program([_derive(traced, block, order, mode, fused=False).expression for block in blocks],
                       traced.inputs, dtype)

    cache = _Cache(f, name, build)
    positions: dict[int, tuple[int, ...]] = {}  # number of arguments -> the positions differentiated

    def transformed(*args: Any) -> Any:
        wrt = positions.get(len(args))
        if wrt is None:
            wrt = positions[len(args)] = tuple(_check_argnum(k, len(args)) for k in argnums)
        arrays, dtype, key = _prepare(args, wrt)
        plan = cache.get(arrays, dtype, (wrt, *key), wrt)
        result = plan(*arrays)
        if compress:
            return result
        if not several:
            return result[0]
        if order == 1:
            return tuple(result)
        n = len(wrt)
        return tuple(tuple(result[i * n:(i + 1) * n]) for i in range(n))

    transformed.__name__ = f"{name}_{getattr(f, '__name__', 'f')}"
    transformed.__doc__ = f"The {name} of {getattr(f, '__name__', 'f')} w.r.t. argument {argnum} ({mode} mode)."
    transformed.plans = cache.plans  # type: ignore[attr-defined]
    return transformed


class _Plans(Mapping):
    """The plans of a transformation that takes pytrees, read live: its own (arrays passed as they
    are) and those of the transformation of each structure's leaves (keyed by structure, then plan)."""

    def __init__(self, direct: Callable, by_structure: dict[tuple, Callable]) -> None:
        self._direct, self._by_structure = direct, by_structure

    def _all(self) -> dict[Any, Any]:
        merged = dict(self._direct.plans)
        for structure, leafwise in self._by_structure.items():
            merged.update({(structure, key): plan for key, plan in leafwise.plans.items()})
        return merged

    def __getitem__(self, key: Any) -> Any:
        return self._all()[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def _accepting_pytrees(argnum: int | Sequence[int], order: int, make: Callable[[Callable, Any], Callable],
                       f: Callable) -> Callable:
    """``make(f, argnum)``'s transformation, taking arguments that are lists, tuples or dicts of arrays
    (:mod:`jacacc.tensor.pytree`): traced as a function of their leaves, one transformation per
    structure, the results put back in the arguments' structure (``order`` 0: value and gradients;
    1: gradients or Jacobians; 2: Hessian blocks)."""
    direct = make(f, argnum)
    several, argnums = _argnums(argnum)
    by_structure: dict[tuple, Callable] = {}
    checked: dict[int, tuple[int, ...]] = {}  # number of arguments -> the positions differentiated
    # the last structure called with: its leaves read, and the first-order results rebuilt, by
    # generated code (pytree.structure_reader / structure_builder) where the next call has it too
    last: list[Any] = []

    def finished(flat: Arguments, positions: tuple[int, ...], build: Callable, result: Any) -> Any:
        if order == 0:
            value, grads = result
            grouped = build(grads)
            return value, (tuple(grouped) if several else grouped[0])
        if order == 1:
            grouped = build(result)
            return tuple(grouped) if several else grouped[0]
        return flat.second_order(positions, result, several)

    def transformed(*args: Any) -> Any:
        if last and (leaves := last[0](args)) is not None:
            _, leafwise, flat, positions, build = last
            return finished(flat, positions, build, leafwise(*leaves))
        for a in args:  # a plain loop, not ``any`` over a generator: this runs at every call
            if is_container(a):
                break
        else:
            return direct(*args)
        flat = Arguments(args)
        positions = checked.get(len(args))
        if positions is None:
            positions = checked[len(args)] = tuple(_check_argnum(k, len(args)) for k in argnums)
        leafwise = by_structure.get((flat.trees, positions))
        if leafwise is None:
            leaves = flat.leaf_positions(positions)
            if not leaves:
                raise ValueError(f"argnum {argnum!r}: the arguments there hold no arrays to differentiate")
            leafwise = by_structure[(flat.trees, positions)] = make(flat.function_of_leaves(f), leaves)
        result = leafwise(*flat.leaves)
        build = structure_builder([flat.trees[a] for a in positions])
        last[:] = [structure_reader(flat.trees), leafwise, flat.without_leaves(), positions, build]
        return finished(flat, positions, build, result)

    transformed.__name__ = getattr(direct, "__name__", "transformed")
    transformed.__doc__ = direct.__doc__
    # every plan, whichever structure made it: a benchmark waits on their steady state (Program.settled)
    transformed.plans = _Plans(direct, by_structure)  # type: ignore[attr-defined]
    return transformed


def grad(f: Callable, argnum: int | Sequence[int] = 0, mode: str = "reverse") -> Callable:
    """The gradient of a scalar-valued ``f`` w.r.t. argument ``argnum``: a function
    of the same arguments returning an array of that argument's shape (a tuple
    of them where ``argnum`` is a sequence, as ``jax.grad``'s ``argnums``).

    Examples
    --------
    >>> import numpy as np
    >>> g = grad(lambda x, A: x @ A @ x)
    >>> A = np.array([[2.0, 1.0], [0.0, 3.0]])
    >>> g(np.array([1.0, 2.0]), A).tolist()      # (A + Aᵀ) x
    [6.0, 13.0]
    >>> gx, gA = grad(lambda x, A: x @ A @ x, argnum=(0, 1))(np.array([1.0, 2.0]), A)
    >>> gA.tolist()                               # x xᵀ
    [[1.0, 2.0], [2.0, 4.0]]
    """
    return _accepting_pytrees(argnum, 1, lambda g, a: _transformation(g, a, 1, mode, scalar=True, compress=False,
                                                                       name="grad"), f)


def value_and_grad(f: Callable, argnum: int | Sequence[int] = 0, mode: str = "reverse") -> Callable:
    """``f``'s value and its gradient(s), from one planned program (the forward pass shared).

    ``argnum`` is one position (the function returns ``(value, gradient)``) or a
    sequence of them (``(value, (gradient, ...))``), as in ``jax.value_and_grad``;
    an argument that is a list, tuple or dict of arrays gets its gradient in
    the same structure (:mod:`jacacc.tensor.pytree`).

    Examples
    --------
    >>> import numpy as np
    >>> vg = value_and_grad(lambda x, A: x @ A @ x, argnum=(0, 1))
    >>> value, (gx, gA) = vg(np.array([1.0, 2.0]), np.eye(2))
    >>> float(value), gx.tolist(), gA.tolist()
    (5.0, [2.0, 4.0], [[1.0, 2.0], [2.0, 4.0]])
    >>> params = {"w": np.array([1.0, 2.0]), "c": 3.0}
    >>> value, g = value_and_grad(lambda p: p["c"] * np.sum(p["w"] ** 2))(params)
    >>> float(value), float(g["c"]), g["w"].tolist()
    (15.0, 5.0, [6.0, 12.0])
    """
    return _accepting_pytrees(argnum, 0, lambda g, a: _value_and_grad(g, a, mode), f)


def _value_and_grad(f: Callable, argnum: int | Sequence[int] = 0, mode: str = "reverse") -> Callable:
    """:func:`value_and_grad` of arguments that are arrays."""
    if not callable(f):
        raise TypeError(f"value_and_grad needs a function, got {type(f).__name__}")
    mode = _check_mode(mode)
    several, argnums = _argnums(argnum)

    def build(arrays: Sequence[Any], dtype: np.dtype, wrt: tuple[int, ...]) -> Program:
        traced = cache.trace(arrays)
        y = traced.outputs[0]
        if y.shape != ():
            raise TraceError(f"value_and_grad needs a scalar-valued function; {getattr(f, '__name__', 'f')} returns "
                             f"shape {y.shape}")
        return Program([y, *_first_derivatives(traced, wrt, mode)], traced.inputs, dtype)

    cache = _Cache(f, "value_and_grad", build)

    def transformed(*args: Any) -> Any:
        wrt = tuple(_check_argnum(k, len(args)) for k in argnums)
        arrays, dtype, key = _prepare(args, wrt)
        value, *grads = cache.get(arrays, dtype, (wrt, *key), wrt)(*arrays)
        return value, (tuple(grads) if several else grads[0])

    transformed.__name__ = f"value_and_grad_{getattr(f, '__name__', 'f')}"
    transformed.plans = cache.plans  # type: ignore[attr-defined]
    return transformed


def jacobian(f: Callable, argnum: int | Sequence[int] = 0, mode: str = "reverse") -> Callable:
    """The Jacobian of ``f`` w.r.t. argument ``argnum``, shape ``out.shape + x.shape``
    (a tuple of them, one per argument, where ``argnum`` is a sequence).

    >>> import numpy as np
    >>> jacobian(np.exp)(np.zeros(2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    return _accepting_pytrees(argnum, 1, lambda g, a: _transformation(g, a, 1, mode, scalar=False, compress=False,
                                                                       name="jacobian"), f)


def hessian(f: Callable, argnum: int | Sequence[int] = 0, mode: str = "cross_country",
            compress: bool = False) -> Callable:
    """The Hessian of ``f`` w.r.t. argument ``argnum``, shape ``out.shape + x.shape + x.shape``.

    Where ``argnum`` is a sequence ``(i, j, …)`` the result nests its blocks as
    ``jax.hessian`` does: ``H[a][b]`` is ∂²f/∂x_a∂x_b, of shape
    ``out.shape + x_a.shape + x_b.shape`` (``compress=True`` takes one argnum).

    With ``compress=True`` (paper 002 §3, compression) the result is a
    :class:`CompressedHessian`: the δs of the last derivative stay symbolic, so
    the matrix-factorization Hessian is the ``k × k`` matrix ``2·VᵀV`` and that
    of a single layer ``loss(relu(W @ X))`` w.r.t. ``W`` a third-order tensor
    (rows of ``W`` do not interact).  Behind further layers the rows mix, no δ
    is left and compression gains nothing; ``.dense()`` writes it out.

    >>> import numpy as np
    >>> hessian(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0])).tolist()
    [[6.0, 0.0], [0.0, 12.0]]
    """
    return _accepting_pytrees(argnum, 2, lambda g, a: _transformation(g, a, 2, mode, scalar=False,
                                                                       compress=bool(compress), name="hessian"), f)


# ---------------------------------------------------------------------------- compression
class _CompressedPlan:
    def __init__(self, factor: Factor, inputs: tuple[Tensor, ...], dtype: np.dtype) -> None:
        self.factor = factor
        self.program = None if factor.tensor is None else Program([factor.tensor], inputs, dtype)
        self.dtype = dtype

    def __call__(self, *arrays: Any) -> CompressedHessian:
        stored = None if self.program is None else self.program(*arrays)[0]
        return CompressedHessian(self.factor, stored, self.dtype)


class CompressedHessian:
    """A Hessian kept in Einstein form: a stored tensor plus the δs and broadcasts
    that make up the rest (paper 002 §3).

    Attributes
    ----------
    stored : array or None
        The tensor actually computed (``None``: the Hessian is all δs).
    layout : str
        ``T[kl] -> [ik|jl]``: the letters of the stored tensor's axes, then those
        of the dense Hessian's axes (output and first argument copy | second
        argument copy); an axis letter the stored tensor lacks is a δ where it
        repeats and a broadcast where it does not.
    shape : tuple of int
        The dense Hessian's shape.
    """

    def __init__(self, factor: Factor, stored: Any, dtype: np.dtype) -> None:
        self.factor = factor
        self.stored = stored
        self.dtype = dtype
        self.layout = factor.layout()
        self.shape = factor.shape

    @property
    def nbytes(self) -> int:
        """Bytes held: the stored tensor only."""
        return 0 if self.stored is None else int(self.stored.nbytes)

    @property
    def dense_nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    def dense(self) -> Any:
        """The Hessian written out (the same array as ``compress=False`` gives)."""
        if self.stored is None:
            return Program([materialize(self.factor)], (), self.dtype)()[0]
        t = var("stored", self.factor.tensor.shape)
        f = Factor(t, self.factor.labels, self.factor.out, self.factor.inp, self.factor.extent)
        return Program([materialize(f)], (t,), self.dtype)(self.stored)[0]

    def __repr__(self) -> str:
        return (f"CompressedHessian({self.layout}, shape={self.shape}, nbytes={self.nbytes}, "
                f"dense_nbytes={self.dense_nbytes})")


# ---------------------------------------------------------------------------- vjp / jvp
_COTANGENT = "ȳ"
_TANGENT = "ẋ"


def vjp(f: Callable, *args: Any, mode: str = "reverse") -> tuple[Any, Callable]:
    """``f(*args)`` and its pullback: ``pullback(ȳ)`` returns ``ȳ·∂f/∂args[k]`` for
    every argument ``k`` (a tuple, as ``jax.vjp``).

    >>> import numpy as np
    >>> y, back = vjp(lambda A, x: A @ x, np.eye(2), np.array([1.0, 2.0]))
    >>> [g.tolist() for g in back(np.array([1.0, 0.0]))]
    [[[1.0, 2.0], [0.0, 0.0]], [1.0, 0.0]]

    Arguments that are lists, tuples or dicts of arrays get cotangents of the same structure.
    """
    mode = _check_mode(mode)
    if any(is_container(a) for a in args):
        flat = Arguments(args)
        value, leaf_pullback = vjp(flat.function_of_leaves(f), *flat.leaves, mode=mode)
        return value, lambda ct: tuple(flat.first_order(range(len(args)), leaf_pullback(ct)))
    arrays, dtype, _ = _prepare(args, tuple(range(len(args))))
    traced = trace(f, arrays)
    y = traced.outputs[0]
    value = Program([y], traced.inputs, dtype)(*arrays)[0]
    cotangent = var(_COTANGENT, y.shape)
    letters = "".join(chr(ord("a") + k) for k in range(y.ndim))
    sink = Factor.from_letters(cotangent, letters, "", letters, (), y.shape)
    graph = tensor_graph([y], traced.inputs, sinks={0: sink})
    factors, _, _ = derivative_factors(graph, mode)
    grads = []
    for vertex, x in zip(graph.inputs, traced.inputs, strict=True):
        found = factors.get((vertex, "sink"))
        grads.append(materialize(found if found is not None else _zero_factor((), x.shape)))
    program = Program(grads, (*traced.inputs, cotangent), dtype)

    def pullback(ct: Any) -> tuple[Any, ...]:
        ct = _as_array(ct, 0, False)
        if tuple(ct.shape) != y.shape:
            raise ValueError(f"the cotangent has shape {tuple(ct.shape)}, f's value has shape {y.shape}")
        return tuple(program(*arrays, ct.astype(dtype, copy=False)))

    return value, pullback


def jvp(f: Callable, args: Sequence[Any], tangents: Sequence[Any], mode: str = "forward") -> tuple[Any, Any]:
    """``f(*args)`` and its directional derivative ``Σ_k ∂f/∂args[k] · tangents[k]`` (as ``jax.jvp``).

    >>> import numpy as np
    >>> jvp(lambda x: np.sin(x), [np.zeros(2)], [np.array([1.0, 2.0])])[1].tolist()
    [1.0, 2.0]

    Arguments that are lists, tuples or dicts of arrays take tangents of the same structure.
    """
    mode = _check_mode(mode)
    if len(args) != len(tangents):
        raise ValueError(f"jvp takes one tangent per argument: {len(args)} arguments, {len(tangents)} tangents")
    if any(is_container(a) for a in args):
        flat, flat_tangents = Arguments(args), Arguments(tangents)
        if flat.trees != flat_tangents.trees:
            raise ValueError("jvp: the tangents' structure (lists, tuples, dicts) differs from the arguments'")
        return jvp(flat.function_of_leaves(f), flat.leaves, flat_tangents.leaves, mode=mode)
    arrays, dtype, _ = _prepare(args, tuple(range(len(args))))
    tangent_arrays = [_as_array(t, k, True) for k, t in enumerate(tangents)]
    for k, (a, t) in enumerate(zip(arrays, tangent_arrays, strict=True)):
        if tuple(t.shape) != tuple(a.shape):
            raise ValueError(f"tangent {k} has shape {tuple(t.shape)}, argument {k} has shape {tuple(a.shape)}")
    traced = trace(f, arrays)
    y = traced.outputs[0]
    tangent_vars = [var(f"{_TANGENT}{k}", x.shape) for k, x in enumerate(traced.inputs)]
    seeds = {}
    for k, (x, t) in enumerate(zip(traced.inputs, tangent_vars, strict=True)):
        letters = "".join(chr(ord("a") + m) for m in range(x.ndim))
        seeds[k] = Factor.from_letters(t, letters, letters, "", x.shape, ())
    graph = tensor_graph([y], traced.inputs, seeds=seeds)
    factors, _, _ = derivative_factors(graph, mode)
    found = factors.get(("seed", graph.outputs[0]))
    tangent_out = materialize(found if found is not None else _zero_factor(y.shape, ()))
    program = Program([y, tangent_out], (*traced.inputs, *tangent_vars), dtype)
    value, out = program(*arrays, *(t.astype(dtype) for t in tangent_arrays))
    return value, out
