"""The Kernel object and :func:`compile_kernel` (exported as ``jacacc.compile``).

A :class:`Kernel` is a compiled Jacobian evaluator for a batch of points: it
keeps its generated :attr:`~Kernel.source`, the schedule's counts beside what
the code actually multiplies (:attr:`~Kernel.skipped`), and compiles lazily on
first use.  Kernels are cached in-process per (graph fingerprint, schedule,
backend and its options, dtype), and schedules per (graph, mode, method,
options), so compiling the same function twice costs a dictionary lookup.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from jacacc.codegen.base import Backend, JacobianProgram, as_points, fingerprint, lower
from jacacc.codegen.registry import get_backend
from jacacc.errors import GraphError, JacaccError, RegistryError
from jacacc.graph import CompGraph
from jacacc.progress import slow_work
from jacacc.schedule import Schedule

__all__ = ["Kernel", "clear_cache", "compile_kernel"]

_KERNELS: dict[tuple, Kernel] = {}
_SCHEDULES: dict[tuple, Schedule] = {}
_LOCK = threading.Lock()


class Kernel:
    """A compiled Jacobian kernel: points ``(N, n)`` → Jacobians ``(N, m, n)``.

    Create with :func:`jacacc.compile`.

    Attributes
    ----------
    backend : str
    dtype : str
    source : str
        The generated code (Python for numpy/numba, CUDA C++ for cupy); for the ``table``
        tier, the instruction table's listing.
    tier : str
        ``"straight"`` (one generated function) or ``"table"`` (an instruction table run by
        an interpreter compiled once: the backend's ``tier`` option, :mod:`jacacc.kernels.tables`).
    program : JacobianProgram
        The backend-neutral straight-line program it was printed from.
    schedule : Schedule
    mults, adds : int
        The schedule's multiplications and additions.
    skipped : int
        Multiplications not emitted: a factor is a structural 0 or ±1.
    folded : int
        Multiplications of two other constants, folded when compiling.
    emitted_mults : int
        ``mults - skipped - folded``: what the code multiplies per point.
    compile_time : float or None
        Seconds spent in the backend's compiler (None until compiled); for Numba's on-disk
        cache (the numba backend's ``disk_cache``), the seconds spent loading the machine code.

    Examples
    --------
    >>> import numpy as np, jacacc
    >>> f = jacacc.trace(lambda x: [x[0] * x[1], x[0] - x[1]], 2)
    >>> k = jacacc.compile(f, backend="numpy")
    >>> k(np.array([[2.0, 3.0]]))
    array([[[ 3.,  2.],
            [ 1., -1.]]])
    >>> V, J = k.values_and_jacobians(np.array([[2.0, 3.0]]))
    >>> V
    array([[ 6., -1.]])
    >>> k.mults, k.skipped
    (0, 0)
    """

    def __init__(self, graph: CompGraph, schedule: Schedule, backend: Backend, dtype: str,
                 program: JacobianProgram | None = None, *, method: str | None = None, mode: str | None = None) -> None:
        self.graph = graph
        self.schedule = schedule
        self._backend = backend
        self.backend = backend.name
        self.dtype = dtype
        self.method = method
        self.mode = mode
        t0 = time.perf_counter()
        self.program = program if program is not None else lower(graph, schedule)
        #: "table" where the program runs as an instruction table, else "straight"
        self.tier = "table" if backend.uses_table(self.program) else "straight"
        self.source = backend.generate(self.program, dtype)
        self.codegen_time = time.perf_counter() - t0
        self.compile_time: float | None = None
        self._run: Any = None
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- counts
    @property
    def n_inputs(self) -> int:
        return self.program.n_inputs

    @property
    def n_outputs(self) -> int:
        return self.program.n_outputs

    @property
    def mults(self) -> int:
        return self.program.mults

    @property
    def adds(self) -> int:
        return self.program.adds

    @property
    def skipped(self) -> int:
        return self.program.skipped

    @property
    def folded(self) -> int:
        return self.program.folded

    @property
    def emitted_mults(self) -> int:
        return self.program.emitted_mults

    def operation_counts(self) -> dict[str, int]:
        """Per-point arithmetic and memory counts; see :meth:`JacobianProgram.operation_counts`,
        plus ``bytes`` (inputs read, values and Jacobians written)."""
        counts = self.program.operation_counts()
        counts["bytes"] = (counts["loads"] + counts["stores"]) * np.dtype(self.dtype).itemsize
        return counts

    # ---------------------------------------------------------------- running
    def compile(self) -> Kernel:
        """Compile now (otherwise the first call does); records :attr:`compile_time`."""
        with self._lock:
            if self._run is None:
                what = (f"compiling the {self.backend} kernel ({len(self.program.statements)} statements, "
                        f"{'instruction table' if self.tier == 'table' else 'straight-line'})")
                with slow_work(what):
                    run = self._backend.load(self.source, self.program, self.dtype)
                    build = getattr(run, "build", None)
                    self.compile_time = build() if build is not None else 0.0
                self._run = run
        return self

    def values_and_jacobians(self, X: Any, out: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
        """Function values ``(N, m)`` and Jacobians ``(N, m, n)`` at the points ``X``
        of shape ``(N, n)`` (or one point ``(n,)``: then ``(m,)`` and ``(m, n)``).

        For the cupy backend a CuPy ``X`` gives CuPy results, a NumPy ``X`` NumPy ones.

        Parameters
        ----------
        X : array_like
            Real points.  Integers and other float precisions are converted to the
            kernel's dtype (float64 points to a float32 kernel are rounded); strided,
            Fortran-order and read-only arrays are copied; complex points are refused
            (:class:`~jacacc.errors.GraphError`).  NaN and inf follow IEEE arithmetic.
        out : (V, J), optional
            C-contiguous arrays of the kernel's dtype and the result shapes to write
            into (either may be None).  Evaluating many batches into the same
            buffers saves allocating, and first touching, fresh result memory on
            every call (for an 11×11 Jacobian at 10^5 points that is 97 MB, and
            its page faults can cost more than the arithmetic).

        Examples
        --------
        >>> import numpy as np, jacacc
        >>> f = jacacc.trace(lambda x: [x[0] * x[1]], 2)
        >>> k = jacacc.compile(f, backend="numpy")
        >>> J = np.empty((3, 1, 2))
        >>> _ = k.values_and_jacobians(np.ones((3, 2)), out=(None, J))
        >>> J[0]
        array([[1., 1.]])
        """
        if self._run is None:
            self.compile()
        if out is not None and not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise GraphError("out must be a pair (V, J) of buffers (either may be None); for the Jacobians "
                             "alone use kernel(X, out=J)")
        V, J = (None, None) if out is None else out
        if getattr(self._run, "device", False) and not isinstance(X, np.ndarray) and hasattr(X, "__cuda_array_interface__"):
            if X.ndim != 2 or X.shape[1] != self.n_inputs:
                raise GraphError(f"points must have shape (N, {self.n_inputs}), got {X.shape}")
            N = X.shape[0]
            return self._run(X, self._out("values", V, (N, self.n_outputs), device=True),
                             self._out("Jacobians", J, (N, self.n_outputs, self.n_inputs), device=True))
        pts, single = as_points(X, self.n_inputs, self.dtype)
        N, m, n = pts.shape[0], self.n_outputs, self.n_inputs
        lead = () if single else (N,)
        V = self._out("values", V, (*lead, m))
        J = self._out("Jacobians", J, (*lead, m, n))
        if not single:
            return self._run(pts, V, J)
        # the kernels take batches: a one-point batch viewing the caller's buffers
        Vb, Jb = self._run(pts, None if V is None else V.reshape(1, m), None if J is None else J.reshape(1, m, n))
        return (Vb[0] if V is None else V), (Jb[0] if J is None else J)

    def _out(self, what: str, buf: Any, shape: tuple[int, ...], device: bool = False) -> Any:
        """``buf`` checked as an output buffer of ``shape`` (None passes through)."""
        if buf is None:
            return None
        is_host = isinstance(buf, np.ndarray)
        if device == is_host or (not is_host and not hasattr(buf, "__cuda_array_interface__")):
            where = "a CuPy array (the points are on the GPU)" if device else "a NumPy array"
            raise GraphError(f"out: the {what} buffer must be {where}, got {type(buf).__name__}")
        if tuple(buf.shape) != shape or str(buf.dtype) != self.dtype or not buf.flags.c_contiguous:
            raise GraphError(f"out: the {what} buffer must be a C-contiguous {self.dtype} array of shape "
                             f"{shape}, got {buf.dtype} {tuple(buf.shape)}"
                             f"{'' if buf.flags.c_contiguous else ' (not C-contiguous)'}")
        if is_host and not buf.flags.writeable:
            raise GraphError(f"out: the {what} buffer is read-only")
        return buf

    def jacobians(self, X: Any, out: Any = None) -> Any:
        """Jacobians ``(N, m, n)`` at the points ``X`` (``(N, n)``); ``out``: a buffer
        to write them into (see :meth:`values_and_jacobians`)."""
        return self.values_and_jacobians(X, out=(None, out))[1]

    __call__ = jacobians

    def values(self, X: Any) -> Any:
        """Function values ``(N, m)`` at the points ``X``."""
        return self.values_and_jacobians(X)[0]

    def __repr__(self) -> str:
        counts = self.program.operation_counts()
        rows = [
            ("backend", f"{self.backend} ({self.dtype})"),
            ("method", f"{self.method or 'given'} ({self.mode or self.schedule.mode})"),
            ("shape", f"{self.n_inputs} inputs → {self.n_outputs} outputs"),
            ("mults", f"{self.mults} (skipped ±1/0: {self.skipped}, folded: {self.folded}, "
                      f"emitted: {self.emitted_mults})"),
            ("per point", f"{counts['flops']} flops, {counts['calls']} calls, "
                          f"{len(self.program.statements)} statements"),
            ("tier", self._tier_text()),
            ("source", f"{self.source.count(chr(10))} lines"),
            ("compiled", "no" if self.compile_time is None else f"{self.compile_time:.3f} s"),
        ]
        width = max(len(k) for k, _ in rows)
        return "Kernel\n" + "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)

    def _tier_text(self) -> str:
        if self.tier == "straight":
            return "straight-line"
        table = self.program.table()
        return (f"instruction table ({table.n_instructions} instructions in {len(table.runs)} runs, "
                f"{table.n_registers} registers)")


def _graph_of(f: Any) -> CompGraph:
    from jacacc.tracer import Traced

    if isinstance(f, Traced):
        return f.graph
    if isinstance(f, CompGraph):
        return f
    trace = getattr(f, "trace", None)  # a zoo Problem
    if callable(trace) and getattr(f, "fn", None) is not None:
        return trace().graph
    raise JacaccError(
        f"cannot compile a {type(f).__name__}: pass a jacacc.Traced (jacacc.trace(f, n)), a traced "
        "CompGraph or a zoo problem"
    )


def compile_kernel(
    f: Any,
    backend: str | type[Backend] | Backend = "numpy",
    method: Any = "markowitz",
    mode: str = "vertex",
    *,
    dtype: str | np.dtype = "float64",
    schedule: Schedule | Any = None,
    backend_options: Mapping[str, Any] | None = None,
    cache: bool = True,
    **options: Any,
) -> Kernel:
    """Compile a traced function's Jacobian into a batched kernel.

    Parameters
    ----------
    f : Traced, CompGraph or zoo Problem
        A traced function (or its graph).  A graph without a primal program is
        accepted when all its partials are numbers.
    backend : str, Backend subclass or instance
        A name from :func:`jacacc.codegen.backends`: ``"numpy"`` (reference),
        ``"numba"`` (CPU, parallel over points), ``"cupy"`` (CUDA).
    method, mode : str
        The elimination order, as for :func:`jacacc.optimize`.
    dtype : {"float64", "float32"}
    schedule : Schedule or Plan, optional
        Use this schedule instead of optimizing (``method``/``mode`` ignored).
    backend_options : mapping, optional
        Passed to the backend's constructor (numba: ``max_statements``, ``fastmath``).
    cache : bool, default True
        Reuse an identical kernel compiled earlier in this process.
    **options
        Passed to :func:`jacacc.optimize` (``seed``, ...).

    Returns
    -------
    Kernel

    Raises
    ------
    RegistryError
        Unknown backend (the message lists the valid ones) or unsupported dtype.
    MissingExtraError
        The backend's optional dependency is missing (raised at the first call).

    Examples
    --------
    >>> import numpy as np, jacacc
    >>> f = jacacc.trace(lambda x: [np.sin(x[0]) * x[1]], 2)
    >>> k = jacacc.compile(f, backend="numpy", method="reverse")
    >>> np.allclose(k(np.array([[0.0, 2.0]])), [[[2.0, 0.0]]])
    True
    >>> k is jacacc.compile(f, backend="numpy", method="reverse")
    True
    """
    graph = _graph_of(f)
    instance = get_backend(backend, **dict(backend_options or {}))
    try:
        dtype_name = np.dtype(dtype).name
    except TypeError:
        raise RegistryError(f"unknown dtype {dtype!r}; backend {instance.name!r} supports: "
                            f"{', '.join(instance.dtypes)}") from None
    if dtype_name not in instance.dtypes:
        raise RegistryError(
            f"backend {instance.name!r} does not support dtype {dtype_name!r}; supported: {', '.join(instance.dtypes)}"
        )
    graph_key = fingerprint(graph)
    method_name = method if isinstance(method, str) else getattr(method, "__name__", repr(method))
    if schedule is not None:
        schedule = getattr(schedule, "schedule", schedule)  # a Plan
        if not isinstance(schedule, Schedule):
            raise JacaccError(f"schedule must be a Schedule or a Plan, got {type(schedule).__name__}")
        method_name, mode = None, schedule.mode
    else:
        skey = (graph_key, mode, method, tuple(sorted(options.items())))
        try:
            hash(skey)
        except TypeError:
            skey = None
        schedule = _SCHEDULES.get(skey) if skey is not None and cache else None
        if schedule is None:
            from jacacc.api import optimize

            with slow_work(f"planning the kernel ({mode} elimination, {method_name})"):
                schedule = optimize(graph, mode=mode, method=method, **options).schedule
            if skey is not None:
                _SCHEDULES[skey] = schedule
    key = (fingerprint(graph, schedule), instance.name, repr(sorted(vars(instance).items())), dtype_name)
    with _LOCK:
        kernel = _KERNELS.get(key) if cache else None
        if kernel is None:
            with slow_work(f"generating the {instance.name} kernel"):
                kernel = Kernel(graph, schedule, instance, dtype_name, method=method_name, mode=mode)
            if cache:
                _KERNELS[key] = kernel
    return kernel


def clear_cache() -> None:
    """Forget every cached kernel and schedule (compiled code is freed with the kernels)."""
    with _LOCK:
        _KERNELS.clear()
        _SCHEDULES.clear()
