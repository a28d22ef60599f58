"""Elementwise-defined functions: evaluation, gather-form derivatives and their kernels (paper 000 §5).

:func:`define` reads ``f[i, j] = …`` (:mod:`~jacacc.elementwise.parse`) with the
extents of its indices; ``f(**arrays)`` evaluates it, one element per
iteration of a kernel (:mod:`jacacc.kernels`), after every read
has been checked against its array's extent exactly over the integers (the
binders' ranges, sum bounds and brackets: :mod:`jacacc.intlin`) and refused
naming its column.  ``f.derivative(x)`` is the gather-form derivative of §5
(:mod:`~jacacc.elementwise.derive`) — again an elementwise function, of the
cotangent ``df`` and the arguments, printable, and derivable again — and
``f.vjp(df, **arrays)`` evaluates one derivative per argument: each element of
``dx`` gathers exactly the elements of ``df`` that read it, with no scatter and
no atomics.  ``f.adjoint_vjp`` computes the same through paper 001's adjoint
of the definition's tensor-language program (:mod:`jacacc.iverson`), an
independent derivation the tests compare against.

Examples
--------
>>> import numpy as np
>>> f = define("f[i] = x[i]**2 + x[2*i]", {"i": 3}, backend="python")
>>> X = np.arange(6.0)
>>> f(x=X)
array([0., 3., 8.])
>>> f.vjp(np.ones(3), x=X)["x"]
array([1., 2., 5., 0., 1., 0.])
>>> print(f.derivative("x"))
dx[dx0] = [dx0 <= 2] * (2 * df[dx0] * x[dx0]) + [dx0 % 2 == 0 and dx0 // 2 <= 2] * df[dx0 // 2]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

import jacacc.iverson as iv
from jacacc import kernels
from jacacc.elementwise import derive
from jacacc.elementwise.parse import SourceError, parse
from jacacc.elementwise.system import Context
from jacacc.elementwise.terms import tabulate_terms
from jacacc.errors import DTypeError, RegistryError, require_real_dtype
from jacacc.intlin import range_escape
from jacacc.iverson.syntax import Affine as IvAffine
from jacacc.kernels.ir import (
    CHILDREN,
    Affine,
    Binary,
    Call,
    Condition,
    Definition,
    Guard,
    Node,
    Number,
    Power,
    Read,
    Summation,
    Unary,
)

__all__ = ["BACKENDS", "ElementwiseFunction", "checked_array", "define"]

#: evaluation backends of :class:`ElementwiseFunction` (``f.compile`` adds "cupy")
BACKENDS: dict[str, Callable] = {"numba": kernels.numba_kernel, "python": kernels.python_kernel}


def define(source: str, sizes: Mapping[str, int], backend: str = "numba") -> ElementwiseFunction:
    """An elementwise-defined function from its source and the extents of its indices.

    ``sizes`` maps each index of the left side to its extent; the arguments'
    shapes come from the arrays passed in.  ``backend`` runs the kernels:
    ``"numba"`` (compiled, parallel) or ``"python"`` (the interpreter; slow, no compile time).
    """
    definition = parse(source)
    if not isinstance(sizes, Mapping):
        example = ", ".join(f"{n!r}: 3" for n in definition.indices)
        raise SourceError(f"define: sizes must map each index of {definition.name} to its extent, like "
                          f"{{{example}}}; got {type(sizes).__name__}")
    extents: dict[str, int | None] = {}
    for name in definition.indices:
        if name not in sizes:
            column = definition.source.index(name, definition.source.index("["))
            raise SourceError(f"the index {name} has no extent (sizes gives {sorted(sizes, key=str) or 'none'}) "
                              f"at column {column}")
        n = sizes[name]
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
            raise SourceError(f"the extent of {name} (sizes[{name!r}]) must be a positive integer, got {n!r}")
        extents[name] = int(n)
    unknown = set(sizes) - set(definition.indices)
    if unknown:
        raise SourceError(f"sizes names {sorted(unknown, key=str)}, which are not indices of {definition.name}")
    tabulated = tabulate_terms(definition)  # a long sum of like terms: one sum over their constants
    return ElementwiseFunction(tabulated.definition, extents, backend, constants=tabulated.constants)


def checked_array(value: Any, name: str, function: str) -> Any:
    """``value`` as an array of real numbers (a CuPy array stays one), for the argument ``name`` of
    ``function``.

    Raises
    ------
    DTypeError
        For complex numbers (NumPy would drop the imaginary part with a mere warning), strings,
        objects, dates, bytes — any dtype but floats, integers and booleans — naming the argument.

    Examples
    --------
    >>> checked_array([1, 2], "x", "f").dtype.kind
    'i'
    >>> checked_array([1 + 1j], "x", "f")
    Traceback (most recent call last):
    ...
    jacacc.errors.DTypeError: the argument 'x' of f is complex (complex128); jacacc.elementwise computes with real numbers (pass the real and imaginary parts separately)
    """
    if not type(value).__module__.startswith("cupy"):
        try:
            value = np.asarray(value)
        except (TypeError, ValueError) as exc:  # a ragged list: not an array of numbers at all
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DTypeError(f"the argument {name!r} of {function} is not an array of numbers ({first})") from None
    require_real_dtype(value.dtype, f"the argument {name!r} of {function}", "jacacc.elementwise")
    return value


class ElementwiseFunction:
    """``f[i, j] = …``: call it with keyword arrays; :meth:`vjp` pulls a cotangent ``df`` back,
    :meth:`derivative` gives the derivative as an elementwise function, :meth:`compile` kernels.

    ``sizes`` maps each index to its extent, or to None for a derivative's indices, whose
    extents are the shape of the array named ``shape_of``.  ``constants``: arrays the definition
    reads that the function supplies itself (the tables of :func:`~jacacc.elementwise.terms.tabulate_terms`);
    they are no arguments of the function and have no gradient.
    """

    def __init__(self, definition: Definition, sizes: Mapping[str, int | None], backend: str = "numba",
                 shape_of: str | None = None, constants: Mapping[str, np.ndarray] | None = None) -> None:
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise RegistryError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
        self.definition = definition
        self.backend = backend
        self.sizes = dict(sizes)
        self.shape_of = shape_of
        self.constants = dict(constants or {})
        self._checked: set[tuple] = set()
        self._kernel: Callable | None = None
        self._derivatives: dict[tuple, ElementwiseFunction] = {}
        self._programs: dict[tuple, iv.Expr] = {}
        self._tape: dict[str, Definition] | None = None

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def arguments(self) -> list[str]:
        """The arguments the definition reads, sorted (its :attr:`constants` apart)."""
        return sorted(a for a in self.definition.arguments() if a not in self.constants)

    @property
    def kernel_arguments(self) -> list[str]:
        """Every array the definition reads, its constants included, sorted: a kernel's parameters."""
        return sorted(self.definition.arguments())

    @property
    def shape(self) -> tuple[int, ...] | None:
        """The output shape (None for a derivative, whose shape is its argument's)."""
        if any(self.sizes[n] is None for n in self.definition.indices):
            return None
        return tuple(self.sizes[n] for n in self.definition.indices)

    @property
    def cotangent(self) -> str:
        """The name of the cotangent: ``df`` for ``f``."""
        return derive.cotangent_name(self.name)

    def __repr__(self) -> str:
        extents = self.sizes if self.shape_of is None else f"the shape of {self.shape_of}"
        return f"<ElementwiseFunction {self.definition.source} over {extents}>"

    def __str__(self) -> str:
        return self.definition.source

    # ------------------------------------------------------------------ shapes and checks
    def shapes_of(self, arrays: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        """The shapes of the arrays this function reads (and of ``shape_of``), checked against the ranks."""
        shapes = {}
        needed = dict(self.definition.arguments())
        if self.shape_of is not None:
            needed.setdefault(self.shape_of, len(self.definition.indices))
        for name, rank in needed.items():
            if name not in arrays:
                raise SourceError(f"no array given for the argument {name!r} of {self.name}")
            shape = np.shape(arrays[name])
            if len(shape) != rank:
                raise SourceError(f"{name} is read with {rank} ind{'ex' if rank == 1 else 'ices'} but its array "
                                  f"has shape {shape}")
            shapes[name] = tuple(int(s) for s in shape)
        if self.shape_of is not None and self.shape is not None and shapes[self.shape_of] != self.shape:
            raise SourceError(f"{self.name} was derived for {self.shape_of} of shape {self.shape}, "
                              f"got an array of shape {shapes[self.shape_of]}")
        return shapes

    def inputs(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        """``arrays`` with each one this function reads (and ``shape_of``) checked to hold real numbers
        (:func:`checked_array`).

        Arrays it does not read are passed over, unchecked: one dict of inputs feeds a function, its
        tape and its derivatives, each reading the ones it needs (the derivative of ``2 * x[i] + y[i]``
        w.r.t. ``x`` reads neither), and an extra array is ignored (tests/elementwise/test_elementwise_properties.py).
        A missing one is refused by :meth:`shapes_of`."""
        needed = set(self.definition.arguments()) | ({self.shape_of} if self.shape_of else set())
        checked = {name: checked_array(a, name, self.name) if name in needed else a for name, a in arrays.items()}
        return {**checked, **self.constants}

    def output_shape(self, shapes: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
        return self.shape if self.shape_of is None else shapes[self.shape_of]

    def check(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        """Refuse (naming the read and its column) any read that can leave its array for these shapes."""
        key = tuple(sorted(shapes.items()))
        if key in self._checked:
            return
        sizes = dict(zip(self.definition.indices, self.output_shape(shapes), strict=True))
        context = Context.of_function(self.definition.indices, sizes)
        for read, ctx in reads_in(self.definition.body, context):
            sys = ctx.system()
            forms = [sys.linear(a) for a in read.indices]
            box = sys.box(ctx)
            for axis, (form, extent) in enumerate(zip(forms, shapes[read.argument], strict=True)):
                where = range_escape(form, extent, sys.ineqs, sys.eqs, box)
                if where is not None:
                    what = "below 0" if where == -1 else f"beyond {extent - 1}"
                    text = ", ".join(str(x) for x in read.indices)
                    raise SourceError(f"{read.argument}[{text}] can read index {what} on axis {axis} "
                                      f"(shape {shapes[read.argument]}) at column {read.column}")
        self._checked.add(key)

    # ------------------------------------------------------------------ evaluation
    def __call__(self, **arrays: Any) -> np.ndarray:
        """The function's values for these arrays (keyword arguments, by name)."""
        return self._evaluate(self.inputs(arrays))

    def _evaluate(self, arrays: Mapping[str, Any]) -> np.ndarray:
        """:meth:`__call__` on checked arrays; :meth:`vjp` passes its tape and cotangent along too."""
        shapes = self.shapes_of(arrays)
        self.check(shapes)
        if self._kernel is None:
            self._kernel = BACKENDS[self.backend](self.definition, self.kernel_arguments)
        out = np.empty(self.output_shape(shapes))
        self._kernel(out, *(np.ascontiguousarray(arrays[a], dtype=np.float64) for a in self.kernel_arguments))
        return out

    def derivative(self, argument: str, shape: tuple[int, ...] | None = None) -> ElementwiseFunction:
        """The gather-form derivative ``d<argument>`` (paper 000 §5.3, Algorithm 4): an elementwise
        function of the cotangent ``d<name>`` and the arguments, with the shape of ``argument``.
        Given that ``shape``, brackets that hold on all of it are left out."""
        if not isinstance(argument, str):
            raise SourceError(f"derivative: the argument must be the name of an array {self.name} reads, got "
                              f"{type(argument).__name__}")
        if argument in self.constants:
            raise SourceError(f"{argument} is a table of {self.name}'s constants, not an argument; it has no derivative")
        key = (argument, None if shape is None else _checked_shape(shape, argument))
        rank = self.definition.arguments().get(argument)
        if key[1] is not None and rank is not None and len(key[1]) != rank:
            raise SourceError(f"{argument} is read with {rank} ind{'ex' if rank == 1 else 'ices'}, "
                              f"the shape given has {len(key[1])}")
        if key not in self._derivatives:
            definition = derive.derivative(self.definition, argument, self.sizes, key[1])
            extents = key[1] or (None,) * len(definition.indices)
            self._derivatives[key] = ElementwiseFunction(
                definition, dict(zip(definition.indices, extents, strict=True)), self.backend, shape_of=argument,
                constants=self.constants)
        return self._derivatives[key]

    def tape(self) -> dict[str, Definition]:
        """The forward values the gather derivatives read instead of recomputing them: sums and calls
        at the function's own level that derivative factors copy, as definitions over its indices
        (``<name>_v0``, …; a later one reads the earlier ones; :func:`~jacacc.elementwise.derive.stored_values`)."""
        if self._tape is None:
            stored = derive.stored_values(self.definition)
            pointwise = self.pointwise_names()
            indices = self.definition.indices
            self._tape = {p.name: p.definition for p in self._pointwise_values.values()}
            for node, name in stored.items():
                body = derive.recall_inside(node, stored, indices, pointwise)
                self._tape[name] = Definition.printed(name, indices, body)
        return dict(self._tape)

    @functools.cached_property
    def _pointwise_values(self) -> dict[str, derive.Pointwise]:
        return derive.pointwise_values(self.definition)

    def pointwise_names(self) -> dict[str, str]:
        """:func:`~jacacc.elementwise.derive.pointwise_key` → name of each pointwise :meth:`tape` array."""
        return {key: p.name for key, p in self._pointwise_values.items()}

    def tape_shape(self, name: str, shapes: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
        """The shape of the :meth:`tape` array ``name`` for these argument shapes: the function's, or
        for a pointwise value (:func:`~jacacc.elementwise.derive.pointwise_values`) its argument's."""
        for p in self._pointwise_values.values():
            if p.name == name:
                return shapes[p.argument]
        return self.output_shape(shapes)

    def gather(self, argument: str, shape: tuple[int, ...],
               output: tuple[int, ...] | None = None) -> ElementwiseFunction:
        """The derivative :meth:`vjp` evaluates: :meth:`derivative` for the argument's ``shape``, reading
        the :meth:`tape` arrays where it would recompute a sum of the function.  ``output`` is this
        function's own shape where its sizes leave it open (a derivative's: the shape of ``shape_of``)."""
        shape = tuple(int(n) for n in shape)
        sizes = self.sizes if output is None else dict(zip(self.definition.indices, output, strict=True))
        key = ("tape", argument, shape, tuple(sizes.values()))
        if key not in self._derivatives:
            stored = derive.stored_values(self.definition)
            definition = derive.derivative(self.definition, argument, sizes, shape, stored, self.pointwise_names())
            self._derivatives[key] = ElementwiseFunction(
                definition, dict(zip(definition.indices, shape, strict=True)), self.backend, shape_of=argument,
                constants=self.constants)
        return self._derivatives[key]

    def vjp(self, df: Any, /, **arrays: Any) -> dict[str, np.ndarray]:
        """Gradients of ``Σ df ⊙ f`` w.r.t. every argument (each with its array's shape), each by its
        gather-form derivative (:meth:`gather`) after one pass over the :meth:`tape`."""
        arrays = self.inputs(arrays)
        shapes = self.shapes_of(arrays)
        df = self._cotangent(df, shapes)
        self.check(shapes)
        inputs = {**arrays, self.cotangent: df}
        for name, definition in self.tape().items():
            key = ("sum", name, self.tape_shape(name, shapes))
            if key not in self._derivatives:
                self._derivatives[key] = ElementwiseFunction(
                    definition, dict(zip(definition.indices, key[2], strict=True)), self.backend,
                    constants=self.constants)
            inputs[name] = self._derivatives[key]._evaluate(inputs)
        output = self.output_shape(shapes)
        return {name: self.gather(name, shape, output)._evaluate(inputs) for name, shape in shapes.items()
                if name in self.arguments}

    def _cotangent(self, df: Any, shapes: Mapping[str, tuple[int, ...]]) -> np.ndarray:
        df = np.asarray(checked_array(df, self.cotangent, self.name), dtype=np.float64)
        expected = self.output_shape(shapes)
        if df.shape != expected:
            raise SourceError(f"the cotangent {self.cotangent} must have shape {expected}, got {df.shape}")
        return df

    def compile(self, backend: str = "numba") -> Any:
        """Kernels for this function and its derivatives: ``"numba"`` or ``"cupy"``
        (:class:`~jacacc.elementwise.compiled.CompiledFunction`)."""
        from jacacc.elementwise.compiled import CompiledFunction

        return CompiledFunction(self, backend)

    # ------------------------------------------------------------------ paper 001's adjoint
    def program(self, shapes: Mapping[str, tuple[int, ...]]) -> iv.Expr:
        """The :mod:`jacacc.iverson` program of this function for the given argument shapes (cached)."""
        key = tuple(sorted(shapes.items()))
        if key not in self._programs:
            self.check(shapes)
            extents = dict(zip(self.definition.indices, self.output_shape(shapes), strict=True))
            translator = _Translator(self.definition, dict(shapes))
            box = {n: (0, extents[n] - 1) for n in self.definition.indices}
            expr = translator.scalar(self.definition.body, {n: iv.index(n) for n in self.definition.indices}, box)
            for name in reversed(self.definition.indices):
                expr = iv.gen(name, extents[name], expr)
            self._programs[key] = expr
        return self._programs[key]

    def adjoint_vjp(self, df: Any, /, **arrays: Any) -> dict[str, np.ndarray]:
        """:meth:`vjp` through paper 001's adjoint of :meth:`program` (compiled with NumPy): an
        independent derivation.  Definitions with floor quotients or divisibility brackets have no
        translation (the tensor language has no floor division) and are refused."""
        arrays = self.inputs(arrays)
        shapes = self.shapes_of(arrays)
        df = self._cotangent(df, shapes)
        program = self.program(shapes)
        cotangent = iv.var(self.cotangent, df.shape)
        out = {}
        for name in self.arguments:
            gradient = iv.adjoint(program, iv.var(name, shapes[name]), cotangent)
            kernel = iv.compile(gradient, backend="numpy")
            out[name] = kernel(**{n: arrays[n] for n in self.definition.arguments()}, **{self.cotangent: df})
        return out


def _checked_shape(shape: Any, argument: str) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints, or one clear error naming ``argument``."""
    try:
        dims = tuple(shape)
    except TypeError:
        dims = None
    if dims is None or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0 for n in dims):
        raise SourceError(f"the shape of {argument} must be a tuple of non-negative integers, got {shape!r}")
    return tuple(int(n) for n in dims)


def reads_in(node: Node, context: Context) -> Iterator[tuple[Read, Context]]:
    """Every read under ``node`` with its context (the sums and brackets around it)."""
    if isinstance(node, Read):
        yield node, context
        return
    inner = context.inside(node)
    for child in CHILDREN:
        sub = getattr(node, child, None)
        if isinstance(sub, Node):
            yield from reads_in(sub, inner)


class _Translator:
    """Source tree → iverson expression (reads were checked by :meth:`ElementwiseFunction.check`)."""

    def __init__(self, definition: Definition, shapes: dict[str, tuple[int, ...]]) -> None:
        self.definition = definition
        self.shapes = shapes
        self.serial = 0

    def index(self, a: Affine, env: Mapping[str, IvAffine]) -> IvAffine:
        total = IvAffine((), a.const)
        for name, c in a.coeffs:
            if not isinstance(name, str):
                raise SourceError(f"{self.definition.name} has the floor quotient {name}, which the tensor "
                                  f"language cannot express")
            total = total + c * env[name]
        return total

    def scalar(self, node: Node, env: Mapping[str, IvAffine], box: Mapping[str, tuple[int, int]]) -> iv.Expr:
        if isinstance(node, Number):
            return iv.const(node.value)
        if isinstance(node, Read):
            target: iv.Expr = iv.var(node.argument, self.shapes[node.argument])
            return target[tuple(self.index(a, env) for a in node.indices)]
        if isinstance(node, Unary):
            return -self.scalar(node.operand, env, box)
        if isinstance(node, Binary):
            a = self.scalar(node.left, env, box)
            b = self.scalar(node.right, env, box)
            if node.op == "+":
                return a + b
            if node.op == "-":
                return a - b
            return a * b if node.op == "*" else a / b
        if isinstance(node, Power):
            return _power(self.scalar(node.base, env, box), node.exponent)
        if isinstance(node, Call):  # both languages call the operation table's functions
            return iv.func(node.function, self.scalar(node.argument, env, box))
        if isinstance(node, Summation):
            return self.summation(node, env, box)
        if isinstance(node, Guard):
            return iv.bracket(self.predicate(node.conditions, env)) * self.scalar(node.body, env, box)
        raise TypeError(f"unknown node {type(node).__name__}")  # pragma: no cover

    def predicate(self, conditions: tuple[Condition, ...], env: Mapping[str, IvAffine]) -> Any:
        out = None
        for c in conditions:
            if c.relation == "%":
                raise SourceError(f"{self.definition.name} has the divisibility bracket {c}, which the tensor "
                                  f"language cannot express")
            form = self.index(c.form, env)
            p = (form == 0) if c.relation == "==" else (form >= 0)
            out = p if out is None else out & p
        return out

    def summation(self, node: Summation, env: Mapping[str, IvAffine], box: Mapping[str, tuple[int, int]]) -> iv.Expr:
        lo = max(-(-_interval(lim.numerator, box)[0] // lim.divisor) for lim in node.lower)
        hi = min(_interval(lim.numerator, box)[1] // lim.divisor for lim in node.upper)
        if hi < lo:
            return iv.const(0.0)  # every range of the sum is empty
        self.serial += 1
        slot = f"{node.index}_{self.serial}"  # 0 ≤ slot < n stands for k = slot + lo
        k = iv.index(slot) + lo
        inner_env = {**env, node.index: k}
        inner_box = {**box, node.index: (lo, hi)}
        bounds = None
        for lim in node.lower:  # d·k ≥ n
            p = lim.divisor * k >= self.index(lim.numerator, env)
            bounds = p if bounds is None else bounds & p
        for lim in node.upper:  # d·k ≤ n
            bounds = bounds & (lim.divisor * k <= self.index(lim.numerator, env))
        body = self.scalar(node.body, inner_env, inner_box)
        return iv.sum(slot, hi - lo + 1, iv.bracket(bounds) * body)


def _interval(a: Affine, box: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    from jacacc.elementwise.system import interval

    return interval(a, box)


def _power(x: iv.Expr, p: float) -> iv.Expr:
    """``x ** p`` for a constant ``p``: products for integers (negative bases are fine), sqrt for ½,
    exp(p·log x) otherwise (x > 0)."""
    if float(p).is_integer():
        n = int(abs(p))
        out: iv.Expr = iv.const(1.0)
        if n:
            out = x
            for _ in range(n - 1):
                out = out * x
        return 1.0 / out if p < 0 else out
    if p == 0.5:
        return iv.sqrt(x)
    return iv.exp(p * iv.log(x))
