"""Elementwise-defined functions on the tensor language: evaluation and vector-Jacobian products (paper 000 §5).

A definition ``f[i, j] = g(a[A·(i, j) + b], …)`` becomes the program
``⊞_i ⊞_j g(…)`` of :mod:`jacacc.iverson`; a sum ``sum(k, lo, hi, e)`` with
bounds affine in the outer indices becomes a sum over a fixed range guarded by
the bracket ``[lo ≤ k ≤ hi]``.  Every read is checked against its array's
extent under the binders' ranges and the sum bounds, exactly over the
integers (:mod:`jacacc.intlin`), and refused naming its column.  The
vector-Jacobian product w.r.t. an argument is paper 001's adjoint of that
program (``jacacc.iverson.adjoint``), simplified and compiled: for each
element of ``da`` it gathers exactly the elements of ``df`` that read it,
with no scatter, and an argument read under several maps gets the sum.

Examples
--------
>>> import numpy as np
>>> f = define("f[i] = x[i]**2 + x[2*i]", {"i": 3})
>>> X = np.arange(6.0)
>>> f(x=X)
array([0., 3., 8.])
>>> f.vjp(np.ones(3), x=X)["x"]
array([1., 2., 5., 0., 1., 0.])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import jacacc.iverson as iv
from jacacc.elementwise.parse import (
    Affine,
    Binary,
    Call,
    Definition,
    Node,
    Number,
    Power,
    Read,
    SourceError,
    Summation,
    Unary,
    parse,
)
from jacacc.errors import RegistryError
from jacacc.intlin import Form, range_escape
from jacacc.iverson.syntax import Affine as IvAffine

__all__ = ["ElementwiseFunction", "define"]

BACKENDS = ("numba", "numpy")


def define(source: str, sizes: Mapping[str, int], backend: str = "numba") -> ElementwiseFunction:
    """An elementwise-defined function from its source and the extents of its indices.

    ``sizes`` maps each index of the left side to its extent; the arguments'
    shapes come from the arrays passed in.  ``backend`` compiles the programs
    (:func:`jacacc.iverson.compile`).
    """
    return ElementwiseFunction(parse(source), sizes, backend)


class ElementwiseFunction:
    """``f[i, j] = …``: call it with keyword arrays; :meth:`vjp` pulls a cotangent ``df`` back."""

    def __init__(self, definition: Definition, sizes: Mapping[str, int], backend: str = "numba") -> None:
        if backend not in BACKENDS:
            raise RegistryError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
        self.definition = definition
        self.backend = backend
        extents = {}
        for name in definition.indices:
            if name not in sizes:
                column = definition.source.index(name, definition.source.index("["))
                raise SourceError(f"the index {name} has no extent (sizes gives {sorted(sizes) or 'none'}) "
                                  f"at column {column}")
            n = sizes[name]
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
                raise SourceError(f"the extent of {name} must be a positive integer, got {n!r}")
            extents[name] = int(n)
        unknown = set(sizes) - set(definition.indices)
        if unknown:
            raise SourceError(f"sizes names {sorted(unknown)}, which are not indices of {definition.name}")
        self.sizes = extents
        self.shape = tuple(extents[n] for n in definition.indices)
        self._programs: dict[tuple, iv.Expr] = {}

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def arguments(self) -> list[str]:
        return sorted(self.definition.arguments())

    def __repr__(self) -> str:
        return f"<ElementwiseFunction {self.definition.source} with {self.sizes}>"

    def __str__(self) -> str:
        return self.definition.source

    # ------------------------------------------------------------------ programs
    def shapes_of(self, arrays: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        shapes = {}
        for name, rank in self.definition.arguments().items():
            if name not in arrays:
                raise SourceError(f"no array given for the argument {name!r} of {self.name}")
            shape = np.shape(arrays[name])
            if len(shape) != rank:
                raise SourceError(f"{name} is read with {rank} ind{'ex' if rank == 1 else 'ices'} but its array "
                                  f"has shape {shape}")
            shapes[name] = tuple(int(s) for s in shape)
        return shapes

    def program(self, shapes: Mapping[str, tuple[int, ...]]) -> iv.Expr:
        """The iverson program of this function for the given argument shapes (cached)."""
        key = tuple(sorted(shapes.items()))
        if key not in self._programs:
            translator = _Translator(self.definition, dict(shapes))
            body = translator.scalar(self.definition.body, {n: iv.index(n) for n in self.definition.indices},
                                     {n: (0, self.sizes[n] - 1) for n in self.definition.indices}, [])
            expr = body
            for name in reversed(self.definition.indices):
                expr = iv.gen(name, self.sizes[name], expr)
            self._programs[key] = expr
        return self._programs[key]

    def __call__(self, **arrays: Any) -> np.ndarray:
        shapes = self.shapes_of(arrays)
        kernel = iv.compile(self.program(shapes), backend=self.backend)
        return kernel(**{n: arrays[n] for n in shapes})

    def vjp(self, df: Any, /, **arrays: Any) -> dict[str, np.ndarray]:
        """Gradients of ``Σ df ⊙ f`` w.r.t. every argument (each with its array's shape)."""
        shapes = self.shapes_of(arrays)
        df = np.asarray(df, dtype=np.float64)
        if df.shape != self.shape:
            raise SourceError(f"the cotangent d{self.name} must have shape {self.shape}, got {df.shape}")
        program = self.program(shapes)
        cotangent = iv.var("d" + self.name, self.shape)
        out = {}
        for name, shape in shapes.items():
            gradient = iv.adjoint(program, iv.var(name, shape), cotangent)
            kernel = iv.compile(gradient, backend=self.backend)
            out[name] = kernel(**{n: arrays[n] for n in shapes}, **{"d" + self.name: df})
        return out


class _Translator:
    """Source tree → iverson expression, checking every read against its array's extent."""

    def __init__(self, definition: Definition, shapes: dict[str, tuple[int, ...]]) -> None:
        self.definition = definition
        self.shapes = shapes
        self.serial = 0

    def index(self, a: Affine, env: Mapping[str, IvAffine]) -> IvAffine:
        total = IvAffine((), a.const)
        for name, c in a.coeffs:
            total = total + c * env[name]
        return total

    def scalar(self, node: Node, env: Mapping[str, IvAffine], box: Mapping[str, tuple[int, int]],
               constraints: list[Form]) -> iv.Expr:
        if isinstance(node, Number):
            return iv.const(node.value)
        if isinstance(node, Read):
            self.check_read(node, box, constraints)
            target: iv.Expr = iv.var(node.argument, self.shapes[node.argument])
            return target[tuple(self.index(a, env) for a in node.indices)]
        if isinstance(node, Unary):
            return -self.scalar(node.operand, env, box, constraints)
        if isinstance(node, Binary):
            a = self.scalar(node.left, env, box, constraints)
            b = self.scalar(node.right, env, box, constraints)
            if node.op == "+":
                return a + b
            if node.op == "-":
                return a - b
            return a * b if node.op == "*" else a / b
        if isinstance(node, Power):
            return _power(self.scalar(node.base, env, box, constraints), node.exponent)
        if isinstance(node, Call):
            x = self.scalar(node.argument, env, box, constraints)
            if node.function == "abs":
                return iv.relu(x) + iv.relu(-x)
            return getattr(iv, node.function)(x)
        if isinstance(node, Summation):
            return self.summation(node, env, box, constraints)
        raise TypeError(f"unknown node {type(node).__name__}")  # pragma: no cover

    def summation(self, node: Summation, env: Mapping[str, IvAffine], box: Mapping[str, tuple[int, int]],
                  constraints: list[Form]) -> iv.Expr:
        lo = _interval(node.lower, box)[0]
        hi = _interval(node.upper, box)[1]
        if hi < lo:
            return iv.const(0.0)  # every range of the sum is empty
        self.serial += 1
        slot = f"{node.index}_{self.serial}"  # 0 ≤ slot < n stands for k = slot + lo
        k = iv.index(slot) + lo
        inner_env = {**env, node.index: k}
        inner_box = {**box, node.index: (lo, hi)}
        lower = self.index(node.lower, env)
        upper = self.index(node.upper, env)
        # lo ≤ k ≤ hi, as constraints on the source's names for the range checks of reads inside
        bounds = [({**_negated(node.lower.coeffs), node.index: 1}, -node.lower.const),
                  ({**dict(node.upper.coeffs), node.index: -1}, node.upper.const)]
        body = self.scalar(node.body, inner_env, inner_box, constraints + bounds)
        return iv.sum(slot, hi - lo + 1, iv.bracket((k >= lower) & (k <= upper)) * body)

    def check_read(self, node: Read, box: Mapping[str, tuple[int, int]], constraints: list[Form]) -> None:
        shape = self.shapes[node.argument]
        names = set().union(*(a.names for a in node.indices)) | {v for c, _ in constraints for v in c}
        sub_box = {v: box[v] for v in names}
        for axis, (a, extent) in enumerate(zip(node.indices, shape, strict=True)):
            where = range_escape((dict(a.coeffs), a.const), extent, constraints, [], sub_box)
            if where is not None:
                what = "below 0" if where == -1 else f"beyond {extent - 1}"
                text = ", ".join(str(x) for x in node.indices)
                raise SourceError(f"{node.argument}[{text}] can read index {what} on axis {axis} "
                                  f"(shape {shape}) at column {node.column}")


def _negated(coeffs: tuple[tuple[str, int], ...]) -> dict[str, int]:
    return {v: -c for v, c in coeffs}


def _interval(a: Affine, box: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    lo = hi = a.const
    for v, c in a.coeffs:
        low, high = box[v]
        lo += min(c * low, c * high)
        hi += max(c * low, c * high)
    return lo, hi


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
