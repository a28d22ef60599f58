"""Compiled elementwise functions: one kernel for the function and one per derivative (paper 000 §5).

``f.compile("numba")`` or ``f.compile("cupy")`` returns a :class:`CompiledFunction`:
``k(**arrays)`` evaluates ``f``, ``k.vjp(df, **arrays)`` runs the gather-form
derivative of every argument, each its own kernel with one thread per element
of the gradient — no atomics, no scatter-add (temporaries: the tape, partial sums).  The
derivatives are specialized to the argument shapes of the call (brackets that
hold on a whole shape are left out) and cached per shape.  ``k.sources`` holds
the generated code (Python for Numba, CUDA C++ for CuPy) — the function, its
tape (computed once, read by the derivatives instead of recomputed: costly calls
of one argument element over the argument's shape, and forward sums) and the
derivatives; the CUDA source is
written without CuPy, so it can be compile-checked with ``nvcc --ptx`` on a
machine without a GPU.

Examples
--------
>>> import numpy as np, jacacc.elementwise as ew
>>> k = ew.define("f[i, j] = exp(x[i + j])", {"i": 3, "j": 4}).compile("numba")
>>> X = np.linspace(0.0, 1.0, 6)
>>> np.allclose(k.vjp(np.ones((3, 4)), x=X)["x"], np.exp(X) * [1, 2, 3, 3, 2, 1])
True
>>> print(k.sources["f_p0"].splitlines()[0])  # exp once per element of x (f reads each up to 3 times)
# f_p0[p0] = exp(x[p0])
>>> print(k.sources["dx"].splitlines()[0])
# dx[dx0] = sum(z, max(0, dx0 - 2), min(3, dx0), df[dx0 - z, z] * f_p0[dx0])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from jacacc import kernels
from jacacc.elementwise import derive
from jacacc.elementwise.function import checked_array
from jacacc.elementwise.parse import SourceError
from jacacc.errors import RegistryError, require_extra
from jacacc.kernels import PARALLEL_MIN_ELEMENTS
from jacacc.kernels.ir import Definition, Summation

if TYPE_CHECKING:
    from jacacc.elementwise.function import ElementwiseFunction

__all__ = ["COMPILED_BACKENDS", "CompiledFunction"]

COMPILED_BACKENDS = ("numba", "cupy")
#: Numba: a gradient with at most this many elements whose value ends in a sum (a convolution's
#: kernel) runs as a chunked reduction (:func:`~jacacc.kernels.python_source`)
REDUCTION_MAX_ELEMENTS = 1024


def _checked_buffer(out: Any, shape: tuple[int, ...], name: str) -> Any:
    if tuple(out.shape) != tuple(shape) or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ValueError(f"the buffer for {name} must be a contiguous float64 array of shape {shape}, got "
                         f"{out.dtype} {tuple(out.shape)}")
    return out


class CompiledFunction:
    """An elementwise function and its derivatives as kernels (see the module docstring)."""

    def __init__(self, function: ElementwiseFunction, backend: str = "numba") -> None:
        if backend not in COMPILED_BACKENDS:
            raise RegistryError(f"unknown backend {backend!r}; known: {', '.join(COMPILED_BACKENDS)}")
        self.function = function
        self.backend = backend
        self._kernels: dict[tuple, Callable] = {}
        self._layouts: dict[str, tuple[list[str], bool]] = {}
        tape = function.tape()
        self.ranks = ranks = {**function.definition.arguments(), function.cotangent: len(function.definition.indices),
                              **{name: len(d.indices) for name, d in tape.items()}}
        pointwise = function.pointwise_names()
        derivatives = [derive.derivative(function.definition, a, function.sizes, None, derive.stored_values(
            function.definition), pointwise) for a in function.arguments]
        definitions = [function.definition, *tape.values(), *derivatives]
        #: the definitions compiled: the function, its tape and its derivatives, by name
        self.definitions = {d.name: d for d in definitions}
        #: generated code, by name
        self.sources = {d.name: self._source(d, ranks) for d in definitions}

    def __repr__(self) -> str:
        return f"<CompiledFunction {self.function.definition.source} ({self.backend})>"

    @property
    def source(self) -> str:
        """All generated code, the function's first."""
        return "\n".join(self.sources.values())

    def _source(self, definition: Definition, ranks: dict[str, int]) -> str:
        arguments = sorted(definition.arguments())
        if self.backend == "cupy":
            return kernels.cuda_source(definition, arguments, ranks)
        return kernels.python_source(definition, arguments, parallel=True)

    def _kernel(self, definition: Definition, ranks: dict[str, int], reduction: bool = False,
                parallel: bool = True) -> Callable:
        key = (definition.source, reduction, parallel)
        if key not in self._kernels:
            arguments = sorted(definition.arguments())
            if self.backend == "numba":
                self._kernels[key] = kernels.numba_kernel(definition, arguments, reduction, parallel)
            else:
                self._kernels[key] = kernels.cupy_kernel(kernels.cuda_source(definition, arguments, ranks))
        return self._kernels[key]

    def _run(self, definition: Definition, shape: tuple[int, ...], arrays: dict[str, Any],
             ranks: dict[str, int], out: Any = None) -> Any:
        arguments, ends_in_sum = self._layout(definition)
        if self.backend == "numba":
            inputs = [np.ascontiguousarray(arrays[a], dtype=np.float64) for a in arguments]
            elements = math.prod(shape)
            parallel = max(elements, *(x.size for x in inputs)) >= PARALLEL_MIN_ELEMENTS
            # few elements, each a long sum (a convolution's kernel): chunk the sums instead
            reduction = parallel and ends_in_sum and elements <= REDUCTION_MAX_ELEMENTS
            kernel = self._kernel(definition, ranks, reduction, parallel)
            out = np.empty(shape) if out is None else _checked_buffer(out, shape, definition.name)
            kernel(out, *inputs)
            return out
        kernel = self._kernel(definition, ranks)
        cp = require_extra("cupy", "gpu")
        inputs = [cp.ascontiguousarray(cp.asarray(arrays[a], dtype=cp.float64)) for a in arguments]
        out = cp.empty(shape, dtype=cp.float64) if out is None else _checked_buffer(out, shape, definition.name)
        kernel(out, *inputs)  # one thread per element, the extents passed by the launcher
        return out

    def _layout(self, definition: Definition) -> tuple[list[str], bool]:
        """The kernel's arguments in order, and whether the body ends in a sum (cached: per call the
        Python overhead of a small vjp is most of its time)."""
        key = definition.source
        if key not in self._layouts:
            self._layouts[key] = (sorted(definition.arguments()),
                                  isinstance(kernels.last_factor(definition.body), Summation))
        return self._layouts[key]

    def _ranks(self) -> dict[str, int]:
        return self.ranks

    def __call__(self, **arrays: Any) -> Any:
        f = self.function
        arrays = f.inputs(arrays)  # the arrays f reads: real numbers only
        shapes = f.shapes_of(arrays)
        f.check(shapes)
        return self._finish(self._run(f.definition, f.output_shape(shapes), arrays, self._ranks()), arrays)

    def vjp(self, df: Any, /, **arrays: Any) -> dict[str, Any]:
        """Every argument's gradient of ``Σ df ⊙ f``, each by its own gather kernel."""
        return self.vjp_into({}, df, **arrays)

    def vjp_into(self, buffers: dict[str, Any], df: Any, /, **arrays: Any) -> dict[str, Any]:
        """:meth:`vjp` writing each gradient into ``buffers[name]`` where given (contiguous float64
        of the argument's shape, on the device for CuPy) — the tape too — so that repeated calls
        reuse memory the OS has already mapped; returns the gradients."""
        f = self.function
        arrays = f.inputs(arrays)  # the arrays f reads: real numbers only
        df = checked_array(df, f.cotangent, f.name)
        shapes = f.shapes_of(arrays)
        f.check(shapes)
        expected = f.output_shape(shapes)
        if tuple(np.shape(df)) != expected:
            raise SourceError(f"the cotangent {f.cotangent} must have shape {expected}, got {np.shape(df)}")
        inputs = {**arrays, f.cotangent: df}
        ranks = self._ranks()
        output = f.output_shape(shapes)
        for name, definition in f.tape().items():  # pointwise values and forward sums, once
            inputs[name] = self._run(definition, f.tape_shape(name, shapes), inputs, ranks, buffers.get(name))
            buffers.setdefault(name, inputs[name])
        out = {}
        for name in f.arguments:
            derivative = f.gather(name, shapes[name], output).definition
            out[name] = self._finish(self._run(derivative, shapes[name], inputs, ranks, buffers.get(name)), arrays)
        return out

    def _finish(self, result: Any, arrays: dict[str, Any]) -> Any:
        """CuPy results stay on the device when an input was a device array, else come back as NumPy."""
        if self.backend == "cupy" and not any(type(a).__module__.startswith("cupy") for a in arrays.values()):
            return result.get()
        return result
