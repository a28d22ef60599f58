"""autograd's operation suite: the cases of its tests, differentiated by jacacc.tensor and checked against JAX.

The issue asks for "≥ 95 % of autograd's operation suite right, 0 wrong".  autograd's operation suite
is the cases of four test files of HIPS/autograd: ``tests/test_systematic.py`` (unary and binary ufuncs,
reductions, shape functions, ``einsum``, ``tensordot``, splitting and stacking, each through
``combo_check``), ``tests/test_numpy.py`` (indexing, slicing, ``concatenate``, ``dot``, reductions,
``np.array`` of traced values, ``np.r_``/``np.c_``, …), ``tests/test_linalg.py`` (``inv``, ``pinv``,
``solve``, ``det``, ``slogdet``, ``norm``, ``eigh``, ``cholesky``, ``svd``) and ``tests/test_scipy.py``
(``scipy.stats`` densities, ``scipy.special``, ``logsumexp``, ``scipy.signal.convolve``,
``scipy.integrate.odeint``, ``scipy.linalg``).  This script writes every case of those files that is
about real float64 functions the way autograd's test writes it — the NumPy/SciPy function, the argument
shapes and ranges, the keyword combinations ``combo_check`` runs through, the arguments differentiated
(``argnum``), the order checked — one row per test function (one per parametrization of a parametrized
test), each row holding that test's checks (one per argument combination).

For each check the function's output is scalarized, ``L(x) = Σ_leaves Σ W ⊙ f(x)`` with a fixed random
weight ``W`` per output leaf (``f`` may return a list or tuple of arrays: ``np.split``, ``eigh``,
``svd``), and

* jacacc: ``jacacc.tensor.grad(L, argnum)`` and — where autograd's test checks second order
  (``check_grads``' default ``order=2``, ``combo_check``'s too; ``order=3`` is checked to second order
  here) — ``jacacc.tensor.hessian(L, argnum)``, in their default modes, on the arguments as the test
  passes them (Python floats, lists and tuples of arrays included);
* reference: ``jax.grad`` and ``jax.hessian`` of the same ``L`` written with ``jax.numpy`` /
  ``jax.scipy`` (float64, ``jax.enable_x64``, under ``jax.jit`` — eager where ``jit`` cannot trace it), as a function of the flattened
  differentiated entries.  JAX's value of ``f`` is checked against NumPy's first (rtol
  :data:`RTOL`): where JAX lacks the function, raises, or computes a different value (``np.partition``
  arranges the non-``kth`` entries its own way), or where JAX's derivative is not finite but central
  differences are (``np.std`` of one entry), the reference is central finite differences of the NumPy
  function (a five-point stencil, the Hessian as differences of differences), compared at
  :data:`FD_RTOL`.  ``eigh``'s and ``svd``'s vectors are signed as NumPy signs them and ``eigh`` reads
  the triangle NumPy reads; ``pinv`` gets NumPy's cutoff; ``psi`` is ``digamma``, ``rgamma`` ``1/gamma``,
  ``erfcinv(y)`` ``erfinv(1 − y)``, ``multivariate_normal.entropy`` ``½ log det(2πe Σ)``.

A result is right when, for every gradient leaf and Hessian block, ``max |jacacc − ref| ≤ ATOL + RTOL ·
max |ref|`` (:data:`RTOL` 1e-8, :data:`ATOL` 1e-10).  Where jacacc differs from JAX, central differences
second the verdict (:func:`cross_check`, at most :data:`CROSS_CHECK_MAX` entries): where they differ from
JAX by more than RTOL themselves (an ill-conditioned function: ``pinv(xᵀx)`` of a square ``x``) and jacacc is
within twice that of both, the result is right, with a note saying so.  Each check gets one class, and a
row the worst of its checks' (wrong > crash > refused > reference-missing > right):

* ``right``;
* ``wrong``: numbers differ from the reference (or the result's shape or nesting does): the failure
  that matters;
* ``refused``: jacacc raised one of its own errors (:class:`jacacc.errors.JacaccError`:
  ``UnsupportedOperationError``, ``TraceError``, …), whose message names what it refuses;
* ``crash``: any other exception out of jacacc (type, message and the innermost jacacc frame recorded);
* ``reference-missing``: jacacc returned numbers but neither JAX nor finite differences gave a reference.

Left out (autograd's own API, complex numbers, or not an operation):

* every complex-valued combination and test: the complex inputs of ``unary_ufunc_check``,
  ``binary_ufunc_check``, ``stat_check`` and of ``kron``/``dot``/``outer``/``matmul``/``tensordot``/
  ``einsum_matmult`` (their real combinations are kept), ``test_vector_2norm_complex``,
  ``test_frobenius_norm_complex``, ``test_frobenius_norm_axis_complex``, ``test_vector_norm_ord_complex``,
  ``test_norm_axis_complex``, ``test_norm_nuclear_complex``, ``test_norm_nuclear_axis_complex``,
  ``test_eigvalh_lower_complex``, ``test_eigvalh_upper_complex``, ``test_svd_*_complex``,
  ``test_svd_only_s_*_complex``, ``test_eig_real``, ``test_eig_complex``, ``test_eig_batched``
  (``eig`` of a real matrix has complex eigenvalues), ``test_sqrtm`` (the square root of a symmetrized
  random matrix, indefinite, is complex);
* autograd's own functions and containers: ``test_make_diagonal`` (``np.make_diagonal`` is autograd's),
  ``test_convolve_generalization``, ``test_convolve_ignore``, ``test_convolve_ignore_dot``
  (``autograd.scipy.signal.convolve``'s ``axes``/``dot_axes`` signature has no SciPy counterpart;
  ``test_convolve`` and ``test_convolve_2d`` are run as ``scipy.signal.convolve``);
* not a derivative of an operation: ``test_numpy_version``; ``test_astype`` (that a float32
  argument's gradient stays float32: a dtype rule, and the suite is float64); ``test_msort``
  (``np.msort`` left NumPy 2, autograd skips it there too); the third-order half of
  ``test_logsumexp6`` (a ``grad`` nested in the function) — its gradient and Hessian are checked.

Every random array is drawn from ``numpy.random.default_rng([seed, crc32(case name)])``, so a row's
inputs do not depend on which rows run.

    python experiments/autograd_suite.py                        # results/autograd_suite.json, a few minutes
    python experiments/autograd_suite.py --quick --out /tmp/autograd_suite.json
    python experiments/autograd_suite.py --cases test_sin test_numpy.py::test_dot
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import operator
import os
import signal
import sys
import time
import traceback
import types
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.integrate
import scipy.linalg
import scipy.signal
import scipy.special
import scipy.stats

from jacacc.bench import load_average, sibling_script, write_record

EXPERIMENT = "autograd_suite"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RTOL = 1e-8
ATOL = 1e-10
FD_RTOL = 1e-6
FD_ATOL = 1e-8
FD_STEP = 1e-3
CROSS_CHECK_MAX = 60  # entries differentiated, at most, for central differences to second a disagreement with JAX
CHECK_TIMEOUT_S = 120
CLASSES = ("right", "wrong", "refused", "crash", "reference-missing")
#: the worst class first: a row takes the first of these any of its checks has
SEVERITY = ("wrong", "crash", "refused", "reference-missing", "right")
SYS, NUM, LIN, SCI = (f"tests/test_{name}.py" for name in ("systematic", "numpy", "linalg", "scipy"))
MAX_FAILURES_KEPT = 5

Tree = Any  # an array, a number, or a list / tuple of trees


# =========================================================================== namespaces
class NoReference(Exception):
    """JAX has no function of this name (and no equivalent written here)."""


def _odeint_jax(func: Callable, y0: Any, t: Any, args: tuple = ()) -> Any:
    from jax.experimental.ode import odeint

    return odeint(func, y0, t, *args)


def _mvn_entropy_jax(ns: Any) -> Callable:
    def entropy(mean: Any = None, cov: Any = 1.0) -> Any:
        n = cov.shape[-1]
        return 0.5 * (n * math.log(2 * math.pi * math.e) + ns.np.linalg.slogdet(cov)[1])

    return entropy


#: JAX spellings of functions JAX names differently or lacks but whose equivalent is one line
JAX_ALIASES: dict[str, Callable[[Any], Callable]] = {
    "special.psi": lambda ns: ns.special.digamma,
    "special.rgamma": lambda ns: lambda x: 1.0 / ns.special.gamma(x),
    "special.erfcinv": lambda ns: lambda y: ns.special.erfinv(1.0 - y),
    "stats.multivariate_normal.entropy": _mvn_entropy_jax,
    "np.row_stack": lambda ns: ns.np.vstack,
    "integrate.odeint": lambda ns: _odeint_jax,
}


def namespace(library: str) -> types.SimpleNamespace:
    """The modules a case's function is spelled against: ``np``, ``special``, ``stats``, ``sla``
    (scipy.linalg), ``signal``, ``integrate`` — NumPy/SciPy's or JAX's."""
    if library == "numpy":
        return types.SimpleNamespace(name="numpy", np=np, special=scipy.special, stats=scipy.stats,
                                     sla=scipy.linalg, signal=scipy.signal, integrate=scipy.integrate)
    import jax
    import jax.numpy as jnp
    import jax.scipy.linalg
    import jax.scipy.signal
    import jax.scipy.special
    import jax.scipy.stats

    return types.SimpleNamespace(name="jax", np=jnp, special=jax.scipy.special, stats=jax.scipy.stats,
                                 sla=jax.scipy.linalg, signal=jax.scipy.signal,
                                 integrate=types.SimpleNamespace(), jax=jax)


def resolve(ns: Any, path: str) -> Callable:
    """``path`` ("np.sin", "stats.norm.logpdf") in the namespace; JAX's alias where it has one."""
    if ns.name == "jax" and path in JAX_ALIASES:
        return JAX_ALIASES[path](ns)
    target = ns
    for part in path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise NoReference(f"{ns.name} has no {path}") from None
    return target


def op(path: str) -> Callable:
    """The function ``path`` of whichever namespace a check runs in."""

    def call(ns: Any, *args: Any, **kwargs: Any) -> Any:
        return resolve(ns, path)(*args, **kwargs)

    call.__name__ = path
    return call


def plain(fn: Callable, name: str | None = None) -> Callable:
    """A function that needs no namespace (``operator.mul``, builtin ``sum``)."""

    def call(ns: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    call.__name__ = name or getattr(fn, "__name__", "f")
    return call


def named(name: str, fn: Callable) -> Callable:
    fn.__name__ = name
    return fn


# =========================================================================== checks and cases
@dataclass(frozen=True)
class Check:
    """One of a test's gradient checks: ``fn(ns, *args, **kwargs)`` differentiated w.r.t. the arguments
    at ``argnums``; ``order`` 2 checks the Hessian too; ``ref`` is the JAX spelling where it differs."""

    fn: Callable
    args: tuple
    kwargs: dict = field(default_factory=dict)
    argnums: tuple[int, ...] = (0,)
    order: int = 2
    ref: Callable | None = None


@dataclass(frozen=True)
class Case:
    """One test function of autograd's (one parametrization of a parametrized one): its name, file, and
    its checks drawn with a generator (:class:`Draw`)."""

    test: str
    source: str
    build: Callable[[Draw], list[Check]]

    @property
    def name(self) -> str:
        return f"{os.path.basename(self.source)}::{self.test}"


class Draw:
    """autograd's test helpers' random draws: ``R`` (``npr.randn``: a float without a shape), ``U``
    (``npr.uniform``), ``rand`` (``npr.rand``)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def R(self, *shape: int) -> Any:
        return float(self.rng.standard_normal()) if not shape else self.rng.standard_normal(shape)

    def U(self, low: float, high: float, size: Any = None) -> Any:
        return float(self.rng.uniform(low, high)) if size is None else self.rng.uniform(low, high, size)

    def rand(self, *shape: int) -> Any:
        return float(self.rng.random()) if not shape else self.rng.random(shape)

    def psd(self, d: int) -> np.ndarray:
        """test_linalg's ``rand_psd``."""
        m = self.R(d, d)
        return m @ m.T


def _fn(fn: str | Callable) -> Callable:
    return op(fn) if isinstance(fn, str) else fn


def chk(fn: str | Callable, *args: Any, argnums: tuple[int, ...] = (0,), order: int = 2,
        ref: Callable | None = None, **kwargs: Any) -> Check:
    """``check_grads(fn, argnum)(*args, **kwargs)``."""
    return Check(_fn(fn), tuple(args), kwargs, tuple(argnums), order, ref)


def combo(fn: str | Callable, argnums: tuple[int, ...], *arglists: list, order: int = 2,
          ref: Callable | None = None, **kwlists: list) -> list[Check]:
    """``combo_check(fn, argnums)(*arglists, **kwlists)``: every combination of the arguments, then of
    the keywords."""
    f = _fn(fn)
    keys = list(kwlists)
    return [Check(f, tuple(args), dict(zip(keys, values, strict=True)), tuple(argnums), order, ref)
            for args in itertools.product(*arglists)
            for values in itertools.product(*(kwlists[k] for k in keys))]


def _transform(lims: tuple[float, float], x: Any) -> Any:
    return x * (lims[1] - lims[0]) + lims[0]


def unary(g: Draw, fn: str | Callable, lims: tuple[float, float] = (-2.0, 2.0), **kw: Any) -> list[Check]:
    """``unary_ufunc_check``'s real part: a scalar, a vector, a 3 × 2 and a 1 × 2 matrix in ``lims``."""
    values = [_transform(lims, 0.4), _transform(lims, g.rand(2)), _transform(lims, g.rand(3, 2)),
              _transform(lims, g.rand(1, 2))]
    return combo(fn, (0,), values, **kw)


def binary(g: Draw, fn: str | Callable, lims_a: tuple[float, float] = (-2.0, 2.0),
           lims_b: tuple[float, float] = (-2.0, 2.0), same: bool = True) -> list[Check]:
    """``binary_ufunc_check`` (``same``: both arguments from the same draws) or
    ``binary_ufunc_check_no_same_args``: every pair of a scalar, a vector, a 3 × 2 and a 1 × 2 matrix."""
    if same:
        base = [0.6, g.rand(2), g.rand(3, 2), g.rand(1, 2)]
        first, second = base, base
    else:
        first = [0.6, g.rand(2), g.rand(3, 2), g.rand(1, 2)]
        second = [0.7, g.rand(2), g.rand(3, 2), g.rand(1, 2)]
    return combo(fn, (0, 1), [_transform(lims_a, x) for x in first], [_transform(lims_b, x) for x in second])


def stat(g: Draw, fn: str) -> list[Check]:
    """``stat_check``'s real part."""
    x, a, b, c, d = 3.5, g.R(), g.R(3), g.R(2, 3), g.R(1, 3)
    return (combo(fn, (0,), [x, a])
            + combo(fn, (0,), [b, c, d], axis=[None, 0], keepdims=[True, False])
            + combo(fn, (0,), [c, d], axis=[None, 0, 1], keepdims=[True, False]))


def one(fn: Callable, name: str) -> Callable:
    """A test's own ``fun(x, …)`` spelled against the namespace: ``fn(ns, *args)``."""
    return named(name, fn)


# --------------------------------------------------------------------------- helpers of the cases
def _tril_sym(ns: Any, a: Any) -> Any:
    """test_linalg's ``check_symmetric_matrix_grads``: ``(L + Lᵀ) / 2`` of the lower triangle."""
    lower = ns.np.tril(a)
    return (lower + ns.np.swapaxes(lower, -1, -2)) / 2.0


def _sym(ns: Any, a: Any) -> Any:
    """test_scipy's ``symmetrize_matrix_arg``: ``(X + Xᵀ) / 2``."""
    return 0.5 * (a + ns.np.swapaxes(a, -1, -2)) if ns.np.ndim(a) > 1 else a


def symmetrized(fn: str, position: int, name: str, drop: tuple[str, ...] = ()) -> tuple[Callable, Callable]:
    """``symmetrize_matrix_arg(fn, position)`` and its JAX spelling (keywords in ``drop`` left out)."""

    def numpy_side(ns: Any, *args: Any, **kwargs: Any) -> Any:
        args = list(args)
        args[position] = _sym(ns, args[position])
        return resolve(ns, fn)(*args, **kwargs)

    def jax_side(ns: Any, *args: Any, **kwargs: Any) -> Any:
        return numpy_side(ns, *args, **{k: v for k, v in kwargs.items() if k not in drop})

    return named(name, numpy_side), named(name, jax_side)


def _stop(ns: Any, x: Any) -> Any:
    return ns.jax.lax.stop_gradient(x)


def eigh_jax(v0: np.ndarray, uplo: str = "L") -> Callable:
    """JAX's ``eigh`` as NumPy's: of the symmetric matrix the ``uplo`` triangle defines (NumPy reads only
    that triangle; JAX symmetrizes), eigenvectors signed as NumPy's ``v0``."""

    def ref(ns: Any, x: Any, *args: Any) -> Any:
        xp = ns.np
        if uplo == "L":
            part, strict = xp.tril(x), xp.tril(x, -1)
        else:
            part, strict = xp.triu(x), xp.triu(x, 1)
        w, v = xp.linalg.eigh(part + xp.swapaxes(strict, -1, -2))
        sign = _stop(ns, xp.sign(xp.sum(v * v0, axis=-2, keepdims=True)))
        return w, v * sign

    return ref


def svd_jax(u0: np.ndarray) -> Callable:
    """JAX's thin SVD with the singular vectors signed as NumPy's (``u0``: NumPy's U)."""

    def ref(ns: Any, x: Any, **kwargs: Any) -> Any:
        xp = ns.np
        u, s, vh = xp.linalg.svd(x, full_matrices=False)
        sign = _stop(ns, xp.sign(xp.sum(u * u0, axis=-2, keepdims=True)))
        return u * sign, s, vh * xp.swapaxes(sign, -1, -2)

    return ref


def _svd(ns: Any, x: Any) -> Any:
    u, s, v = ns.np.linalg.svd(x, full_matrices=False)
    return (u, s, v)


def svd_case(g: Draw, *shape: int) -> list[Check]:
    mat = g.R(*shape)
    return [chk(named("svd", _svd), mat, ref=svd_jax(np.linalg.svd(mat, full_matrices=False)[0]))]


def eigh_case(mat: np.ndarray, uplo: str | None) -> list[Check]:
    def fn(ns: Any, x: Any) -> Any:
        w, v = ns.np.linalg.eigh(x) if uplo is None else ns.np.linalg.eigh(x, uplo)
        return (w, v)

    if uplo is None:
        v0 = np.linalg.eigh(mat)[1]
    else:
        v0 = np.linalg.eigh(mat, uplo)[1]
    return [chk(named("eigh", fn), mat, ref=eigh_jax(v0, uplo or "L"))]


def _pinv_jax(ns: Any, x: Any) -> Any:
    return ns.np.linalg.pinv(x, rtol=1e-15)  # NumPy's default cutoff, rcond = 1e-15


def _stack_ref(fn: Callable) -> Callable:
    """The JAX spelling of a function of a list of traced numbers: the list stacked first."""

    def ref(ns: Any, x: Any, *args: Any) -> Any:
        return fn(ns, ns.np.stack(x) if isinstance(x, list | tuple) else x, *args)

    return ref


def _ndarray_ref(fn: Callable) -> Callable:
    """The JAX spelling of a function whose arguments are nested lists of numbers: ``jnp.array`` of each."""

    def ref(ns: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(ns, *(ns.np.array(a) if isinstance(a, list) else a for a in args), **kwargs)

    return ref


def _odefunc(y: Any, t: Any, arg1: Any, arg2: Any) -> Any:
    """test_scipy's ``func`` of test_odeint (``jax.numpy`` where JAX's odeint calls it)."""
    xp = _jnp() if type(y).__module__.startswith("jax") else np
    return -xp.sqrt(t) - y + arg1 - xp.mean((y + arg2) ** 2)


def _jnp() -> Any:
    import jax.numpy as jnp

    return jnp


# =========================================================================== the cases
def _systematic() -> list[Case]:
    def u(name: str, lims: tuple[float, float] = (-2.0, 2.0), fn: str | Callable | None = None) -> Case:
        return Case(f"test_{name}", SYS, lambda g: unary(g, fn or f"np.{name}", lims))

    def b(name: str, fn: str | Callable, lims_a: tuple[float, float] = (-2.0, 2.0),
          lims_b: tuple[float, float] = (-2.0, 2.0), same: bool = True) -> Case:
        return Case(f"test_{name}", SYS, lambda g: binary(g, fn, lims_a, lims_b, same))

    def c(name: str, build: Callable[[Draw], list[Check]]) -> Case:
        return Case(f"test_{name}", SYS, build)

    deg = one(lambda ns, x: ns.np.degrees(x) / 50.0, "degrees(x) / 50")
    rad = one(lambda ns, x: ns.np.rad2deg(x) / 50.0, "rad2deg(x) / 50")
    cases = [Case(f"test_{name}", SYS, lambda g, name=name: stat(g, f"np.{name}"))
             for name in ("max", "mean", "min", "sum", "prod", "var", "std")]
    cases += [
        u("sin"), u("abs", (0.1, 4.0)), u("absolute", (0.1, 4.0)), u("arccosh", (1.1, 4.0)),
        u("arcsinh", (-0.9, 0.9)), u("arctanh", (-0.9, 0.9)), u("ceil", (-1.5, 1.5)), u("cos"), u("cosh"),
        u("deg2rad"), u("degrees", fn=deg), u("exp"), u("exp2"), u("expm1"), u("fabs"),
        u("floor", (-1.5, 1.5)), u("log", (0.2, 2.0)), u("log10", (0.2, 2.0)), u("log1p", (0.2, 2.0)),
        u("log2", (0.2, 2.0)), u("rad2deg", fn=rad), u("radians"), u("sign"), u("sinh"),
        u("sqrt", (1.0, 3.0)), u("square"), u("tan", (-1.1, 1.1)), u("tanh"), u("real"),
        u("real_ic", fn="np.real_if_close"), u("imag"), u("conj"), u("conjugate"), u("angle"),
        b("add", "np.add"), b("logaddexp", "np.logaddexp"), b("logaddexp2", "np.logaddexp2"),
        b("remainder", "np.remainder", (-0.9, 0.9), (0.7, 1.9), same=False),
        b("true_divide", "np.true_divide", lims_b=(0.8, 1.2)),
        b("mod", "np.mod", lims_b=(0.8, 2.1), same=False),
        b("true_divide_neg", "np.true_divide", lims_b=(-0.3, -2.0)),
        b("mod_neg", "np.mod", lims_b=(-0.3, -2.0), same=False),
        b("op_mul", plain(operator.mul, "a * b")), b("op_add", plain(operator.add, "a + b")),
        b("op_sub", plain(operator.sub, "a - b")),
        b("op_mod", plain(operator.mod, "a % b"), lims_b=(0.3, 2.0), same=False),
        b("op_mod_neg", plain(operator.mod, "a % b"), lims_b=(-0.3, -2.0), same=False),
        c("transpose", lambda g: combo("np.transpose", (0,), [g.R(2, 3, 4)],
                                       axes=[None, [0, 1, 2], [0, 2, 1], [2, 0, 1], [2, 1, 0], [1, 0, 2],
                                             [1, 2, 0]])),
        c("moveaxis", lambda g: combo("np.moveaxis", (0,), [g.R(2, 3, 4)], source=[0, 1, 2],
                                      destination=[0, 1, 2])),
        c("repeat", lambda g: combo("np.repeat", (0,), [g.R(2, 3, 4), g.R(3, 1)], repeats=[0, 1, 2],
                                    axis=[None, 0, 1])),
        c("diff", lambda g: combo("np.diff", (0,), [g.R(5, 5), g.R(5, 5, 5)], n=[1, 2], axis=[0, 1])
          + combo("np.diff", (0,), [g.R(1), g.R(1, 1)], axis=[0])
          + combo("np.diff", (0,), [g.R(1, 1), g.R(3, 1)], axis=[1])),
        c("gradient", lambda g: combo("np.gradient", (0,), [g.R(5, 5), g.R(5, 5, 5)], axis=[None, 0, 1, -1])
          + combo("np.gradient", (0,), [g.R(5, 5, 5)], axis=[(0, 1), (0, -1)])),
        c("tile", lambda g: combo("np.tile", (0,), [g.R(2, 1, 3, 1)], reps=[(1, 4, 1, 2)])
          + combo("np.tile", (0,), [g.R(1, 2)], reps=[(1, 2), (2, 3), (3, 2, 1)])
          + combo("np.tile", (0,), [g.R(1)], reps=[(2,), 2])),
        c("kron", lambda g: combo("np.kron", (0, 1), [g.R(5, 5), g.R(4, 4), g.R(5), g.R(5, 1), g.R(1, 5), g.R()],
                                  [g.R(3, 3), g.R(2, 2), g.R(3), g.R(1, 3), g.R(3, 1), g.R()])),
        c("inner", lambda g: combo("np.inner", (0, 1), [1.5, g.R(3), g.R(2, 3)], [0.3, g.R(3), g.R(4, 3)])),
        c("dot", lambda g: combo("np.dot", (0, 1), [1.5, g.R(3), g.R(2, 3), g.R(2, 2, 3)],
                                 [0.3, g.R(3), g.R(3, 4), g.R(2, 3, 4)])),
        c("outer", lambda g: combo("np.outer", (0, 1), [g.R(3)], [g.R(3)])),
        c("matmul", lambda g: combo("np.matmul", (0, 1), [g.R(3), g.R(2, 3), g.R(2, 2, 3)],
                                    [g.R(3), g.R(3, 4), g.R(2, 3, 4)])),
        c("matmul_broadcast", lambda g: combo("np.matmul", (0, 1), [g.R(1, 2, 2)], [g.R(3, 2, 1)])),
        c("tensordot_1", lambda g: combo("np.tensordot", (0, 1), [g.R(1, 3), g.R(2, 3, 2)],
                                         [g.R(3), g.R(3, 1), g.R(3, 4, 2)], axes=[[(1,), (0,)]])),
        c("tensordot_2", lambda g: combo("np.tensordot", (0, 1), [g.R(3), g.R(3, 1), g.R(3, 4, 2)],
                                         [g.R(1, 3), g.R(2, 3, 2)], axes=[[(0,), (1,)]])),
        c("tensordot_3", lambda g: combo("np.tensordot", (0, 1), [g.R(2, 3), g.R(2, 3, 4)],
                                         [g.R(1, 2, 3), g.R(2, 2, 3, 4)], axes=[[(0, 1), (1, 2)], [(1, 0), (2, 1)]])),
        c("tensordot_4", lambda g: combo("np.tensordot", (0, 1), [g.R(2, 2), g.R(4, 2, 2)],
                                         [g.R(2, 2), g.R(2, 2, 4)], axes=[1, 2])),
        c("tensordot_5", lambda g: combo("np.tensordot", (0, 1), [g.R(4)], [g.R()], axes=[0])),
        c("tensordot_6", lambda g: combo("np.tensordot", (0, 1), [g.R(2, 6)], [g.R(6, 3)], axes=[[[-1], [0]]])),
        c("tensordot_7", lambda g: combo("np.tensordot", (0, 1), [g.R(2, 6)], [g.R(6, 3)], axes=[[-1, 0]])),
        c("tensordot_8", lambda g: combo("np.tensordot", (0, 1), [g.R(2)], [g.R(2, 2)], axes=[[0, 1]])),
    ]
    for name in ("maximum", "fmax", "minimum", "fmin"):
        cases.append(c(name, lambda g, name=name: combo(f"np.{name}", (0, 1), [g.R(1), g.R(1, 4), g.R(3, 4)],
                                                          [g.R(1), g.R(1, 4), g.R(3, 4)])))
    cases += [
        c("sort", lambda g: combo("np.sort", (0,), [g.R(1), g.R(7)])),
        c("partition", lambda g: combo("np.partition", (0,), [g.R(7), g.R(14)], kth=[0, 3, 6])),
        c("atleast_1d", lambda g: combo("np.atleast_1d", (0,), [1.2, g.R(1), g.R(7), g.R(1, 4), g.R(2, 4),
                                                                g.R(2, 4, 5)])),
        c("atleast_2d", lambda g: combo("np.atleast_2d", (0,), [1.2, g.R(1), g.R(7), g.R(1, 4), g.R(2, 4),
                                                                g.R(2, 4, 5)])),
        c("atleast_3d", lambda g: combo("np.atleast_3d", (0,), [1.2, g.R(1), g.R(7), g.R(1, 4), g.R(2, 4),
                                                                g.R(2, 4, 5), g.R(2, 4, 3, 5)])),
        c("einsum_transpose", lambda g: combo("np.einsum", (1,), ["ij->ji"], [g.R(1, 1), g.R(4, 4), g.R(3, 4)])),
        c("einsum_matmult", lambda g: combo("np.einsum", (1, 2), ["ij,jk->ik"], [g.R(2, 3)], [g.R(3, 4)])),
        c("einsum_matmult_broadcast", lambda g: combo("np.einsum", (1, 2), ["...ij,...jk->...ik"],
                                                      [g.R(2, 3), g.R(2, 2, 3)], [g.R(3, 4), g.R(2, 3, 4)])),
        c("einsum_matmult_broadcast_leadzero", lambda g: combo("np.einsum", (1, 2), ["...ij,...jk->...ik"],
                                                               [g.R(0, 2, 3)], [g.R(0, 3, 4)])),
        c("einsum_covsum", lambda g: combo("np.einsum", (1, 2), ["ijk,lji->lki"], [g.R(3, 4, 4)], [g.R(4, 4, 3)])),
        c("einsum_ellipses", lambda g: combo("np.einsum", (1, 2), ["...jk,...lj->...lk", "...,...->..."],
                                             [g.R(4, 4), g.R(3, 4, 4)], [g.R(4, 4), g.R(3, 4, 4)])),
        c("einsum_ellipses_tail", lambda g: combo("np.einsum", (1, 2), ["jk...,lj...->lk..."],
                                                  [g.R(3, 2), g.R(3, 2, 4)], [g.R(2, 3), g.R(2, 3, 4)])),
        c("einsum_ellipses_center", lambda g: combo("np.einsum", (1, 2), ["j...k,lj...->lk..."],
                                                    [g.R(2, 2), g.R(2, 2, 2)], [g.R(2, 2), g.R(2, 2, 2)])),
        c("einsum_three_args", lambda g: combo("np.einsum", (1, 2), ["ijk,lji,lli->lki"], [g.R(3, 4, 4)],
                                               [g.R(4, 4, 3)], [g.R(4, 4, 3)])),
        c("einsum2_transpose", lambda g: combo("np.einsum", (0,), [g.R(1, 1), g.R(4, 4), g.R(3, 4)], [(0, 1)],
                                               [(1, 0)])),
        c("einsum2_matmult", lambda g: combo("np.einsum", (0, 2), [g.R(2, 3)], [(0, 1)], [g.R(3, 4)], [(1, 2)],
                                             [(0, 2)])),
        c("einsum2_matmult_broadcast", lambda g: combo("np.einsum", (0, 2), [g.R(2, 3), g.R(2, 2, 3)],
                                                       [(Ellipsis, 0, 1)], [g.R(3, 4), g.R(2, 3, 4)],
                                                       [(Ellipsis, 1, 2)], [(Ellipsis, 0, 2)])),
        c("einsum2_covsum", lambda g: combo("np.einsum", (0, 2), [g.R(3, 4, 4)], [(0, 1, 2)], [g.R(4, 4, 3)],
                                            [(3, 1, 0)], [(3, 2, 0)])),
        c("einsum2_three_args", lambda g: combo("np.einsum", (0, 2), [g.R(3, 4, 4)], [(0, 1, 2)], [g.R(4, 4, 3)],
                                                [(3, 1, 0)], [g.R(4, 4, 3)], [(3, 3, 0)], [(3, 2, 0)])),
        c("einsum_naked_sum", lambda g: combo("np.einsum", (1, 2), ["k,nk->"], [g.R(5)], [g.R(10, 5)])),
        c("einsum_naked_sum2", lambda g: combo("np.einsum", (1,), ["abcd->bd"], [g.R(3, 2, 3, 2)])),
        c("einsum_naked_sum_ellipsis", lambda g: combo("np.einsum", (1, 2), ["...k,...nk->..."], [g.R(3, 5)],
                                                       [g.R(3, 10, 5)])),
        c("einsum_no_output_indices", lambda g: combo("np.einsum", (1, 2), ["ij,k"], [g.R(3, 4)], [g.R(3)])),
        c("trace", lambda g: combo("np.trace", (0,), [g.R(5, 5), g.R(4, 5), g.R(5, 4), g.R(3, 4, 5)],
                                   offset=[-1, 0, 1])),
        c("diag", lambda g: combo("np.diag", (0,), [g.R(5, 5)], k=[-1, 0, 1])),
        c("diag_flat", lambda g: combo("np.diag", (0,), [g.R(5)], k=[-1, 0, 1])),
        c("tril", lambda g: combo("np.tril", (0,), [g.R(5, 5)], k=[-1, 0, 1])),
        c("triu", lambda g: combo("np.triu", (0,), [g.R(5, 5)], k=[-1, 0, 1])),
        c("tril_3d", lambda g: combo("np.tril", (0,), [g.R(5, 5, 4)], k=[-1, 0, 1])),
        c("triu_3d", lambda g: combo("np.triu", (0,), [g.R(5, 5, 4)], k=[-1, 0, 1])),
        c("swapaxes", lambda g: combo("np.swapaxes", (0,), [g.R(3, 4, 5)], axis1=[0, 1, 2], axis2=[0, 1, 2])),
        c("rollaxis", lambda g: combo("np.rollaxis", (0,), [g.R(2, 3, 4)], axis=[0, 1, 2], start=[0, 1, 2])),
        c("cross", lambda g: combo("np.cross", (0, 1), [g.R(3, 3)], [g.R(3, 3)], axisa=[-1, 0, 1],
                                   axisb=[-1, 0, 1], axisc=[-1, 0, 1], axis=[None, -1, 0, 1])),
        c("vsplit_2d", lambda g: combo("np.vsplit", (0,), [g.R(4, 8)], [4, [1, 2]])),
        c("vsplit_3d", lambda g: combo("np.vsplit", (0,), [g.R(4, 4, 4)], [2, [1, 2]])),
        c("hsplit_2d", lambda g: combo("np.hsplit", (0,), [g.R(4, 8)], [4, [1, 2]])),
        c("hsplit_3d", lambda g: combo("np.hsplit", (0,), [g.R(4, 4, 4)], [2, [1, 2]])),
        c("dsplit_3d", lambda g: combo("np.dsplit", (0,), [g.R(4, 4, 4)], [2, [1, 2]])),
        c("split_1d", lambda g: combo("np.split", (0,), [g.R(1), g.R(7)], [1], axis=[0])),
        c("split_2d", lambda g: combo("np.split", (0,), [g.R(4, 8)], [4, [1, 2]], axis=[0, 1])),
        c("split_3d", lambda g: combo("np.split", (0,), [g.R(4, 4, 4)], [2, [1, 2]], axis=[0, 1, 2])),
        c("array_split_1d", lambda g: combo("np.array_split", (0,), [g.R(1), g.R(7)], [1, 3], axis=[0])),
        c("array_split_2d", lambda g: combo("np.array_split", (0,), [g.R(7, 7)], [4, [3, 5]], axis=[0, 1])),
        c("array_split_3d", lambda g: combo("np.array_split", (0,), [g.R(7, 7, 7)], [4, [3, 5]], axis=[0, 1, 2])),
        c("concatenate_1ist", lambda g: combo("np.concatenate", (0,), [(g.R(1), g.R(3))], axis=[0])),
        c("concatenate_tuple", lambda g: combo("np.concatenate", (0,), [[g.R(1), g.R(3)]], axis=[0])),
        c("concatenate_2d", lambda g: combo("np.concatenate", (0,), [(g.R(2, 2), g.R(2, 2))], axis=[0, 1])),
        c("concatenate_3d", lambda g: combo("np.concatenate", (0,), [(g.R(2, 2, 2), g.R(2, 2, 2))],
                                            axis=[0, 1, 2])),
        c("vstack_1d", lambda g: combo("np.vstack", (0,), [g.R(2), (g.R(2), g.R(2))])),
        c("vstack_2d", lambda g: combo("np.vstack", (0,), [g.R(2, 3), (g.R(2, 4), g.R(1, 4))])),
        c("vstack_3d", lambda g: combo("np.vstack", (0,), [g.R(2, 3, 4), (g.R(2, 3, 4), g.R(5, 3, 4))])),
        c("hstack_1d", lambda g: combo("np.hstack", (0,), [g.R(2), (g.R(2), g.R(2))])),
        c("hstack_2d", lambda g: combo("np.hstack", (0,), [g.R(3, 2), (g.R(3, 4), g.R(3, 5))])),
        c("hstack_3d", lambda g: combo("np.hstack", (0,), [g.R(2, 3, 4), (g.R(2, 1, 4), g.R(2, 5, 4))])),
        c("stack_1d", lambda g: combo("np.stack", (0,), [(g.R(2),), (g.R(2), g.R(2))], axis=[0, 1])),
        c("row_stack_1d", lambda g: combo("np.row_stack", (0,), [g.R(2), (g.R(2), g.R(2))])),
        c("row_stack_2d", lambda g: combo("np.row_stack", (0,), [g.R(2, 3), (g.R(2, 4), g.R(1, 4))])),
        c("column_stack_1d", lambda g: combo("np.column_stack", (0,), [g.R(2), (g.R(2), g.R(2))])),
        c("column_stack_2d", lambda g: combo("np.column_stack", (0,), [g.R(2, 2), (g.R(2, 2), g.R(2, 2))])),
        c("select", lambda g: combo("np.select", (1,), [[g.R(3, 4, 5) > 0, g.R(3, 4, 5) > 0, g.R(3, 4, 5) > 0]],
                                    [[g.R(3, 4, 5), g.R(3, 4, 5), g.R(3, 4, 5)]], default=[0.0, 1.1])),
        c("pad", lambda g: combo("np.pad", (0,), [g.R(2, 2)],
                                 [0, 3, (3,), (3, 2), ((3, 2),), ((1, 2), (3, 4)), ((0, 0), (0, 0))],
                                 ["constant"])),
    ]
    return cases


def _numpy() -> list[Case]:
    def c(name: str, build: Callable[[Draw], list[Check]]) -> Case:
        return Case(f"test_{name}", NUM, build)

    def f1(name: str, fn: Callable, *shape: int) -> Case:
        """``check_grads(fun)(npr.randn(*shape))``."""
        return c(name, lambda g: [chk(one(fn, name), g.R(*shape))])

    def at(name: str, fn: Callable, *points: float, order: int = 2, ref: Callable | None = None) -> Case:
        """``check_grads(fun)(point)`` (order 1: ``grad(fun)(point)``) at each point."""
        return c(name, lambda g: [chk(one(fn, name), p, order=order, ref=ref) for p in points])

    dot = op("np.dot")

    def reductions_on_box(g: Draw) -> list[Check]:
        base = np.abs(g.R(5)) + 0.5
        return [chk(one(lambda ns, a, name=name: getattr(ns.np, name)(ns.np.exp(a) * base), f"{name}(exp(a) * base)"),
                    0.7) for name in ("sum", "prod", "max", "min")]

    def dots(g: Draw) -> list[Check]:
        mat1, mat2, v1, v2, v3 = g.R(10, 11), g.R(10, 11), g.R(10), g.R(11), g.R(11)
        return [chk(dot, mat1, v2), chk(dot, mat1, mat2.T), chk(dot, v1, mat1), chk(dot, v2, v3)]

    def dots_floats(g: Draw) -> list[Check]:
        mat1, v1, f = g.R(10, 11), g.R(10), g.R()
        return [chk(dot, mat1, f), chk(dot, f, mat1), chk(dot, v1, f), chk(dot, f, v1)]

    def outers(g: Draw) -> list[Check]:
        v2, v3 = g.R(11), g.R(11)
        return [chk("np.outer", v2, v3), chk("np.outer", v2.T, v3), chk("np.outer", v2.T, v3.T)]

    def mean_list(ns: Any, x: Any) -> Any:
        return ns.np.mean([x, x + 2]) + ns.np.mean((x, x + 2))

    def mean_list_jax(ns: Any, x: Any) -> Any:
        return ns.np.mean(ns.np.stack([x, x + 2])) + ns.np.mean(ns.np.stack((x, x + 2)))

    def list_of_boxes(name: str) -> tuple[Callable, Callable]:
        return (one(lambda ns, x: getattr(ns.np, name)([x, x + 2]) + getattr(ns.np, name)((x, x + 2)),
                    f"{name}([x, x + 2]) + {name}((x, x + 2))"),
                lambda ns, x: getattr(ns.np, name)(ns.np.stack([x, x + 2])) * 2)

    def concat(name: str, axis: int | None, keyword: bool = True) -> Case:
        """test_simple_concatenate (``axis`` None: ``concatenate((A, x))``) and test_concatenate_axis_*
        (``concatenate((B, x, B), axis)``, the axis by keyword or by position)."""

        def build(g: Draw) -> list[Check]:
            a, b = g.R(5, 6, 4), g.R(4, 6, 4) if axis is None else g.R(5, 6, 4)
            if axis is None:
                return [chk(one(lambda ns, x: ns.np.concatenate((a, x)), "concatenate((A, x))"), b)]
            if keyword:
                fn = one(lambda ns, x: ns.np.concatenate((b, x, b), axis=axis), f"concatenate((B, x, B), axis={axis})")
            else:
                fn = one(lambda ns, x: ns.np.concatenate((b, x, b), axis), f"concatenate((B, x, B), {axis})")
            return [chk(fn, a)]

        return c(name, build)

    def trace_case(name: str, shape: tuple[int, ...], low: int, high: int) -> Case:
        def build(g: Draw) -> list[Check]:
            mat = g.R(*shape)
            offset = int(g.rng.integers(low, high))
            return [chk(one(lambda ns, x: ns.np.trace(x, offset=offset), f"trace(x, offset={offset})"), mat)]

        return c(name, build)

    def attributes(ns: Any, x: Any) -> Any:
        assert x.shape == ()
        assert x.ndim == 0
        assert x.size == 1
        assert x.dtype == ns.np.float64
        return x**2

    def length(ns: Any, x: Any) -> Any:
        assert len(x) == 3
        return x

    def with_constant(name: str, fn: Callable, n: tuple[int, ...] = (3, 2)) -> Case:
        def build(g: Draw) -> list[Check]:
            const = g.R(*n)
            return [chk(one(lambda ns, x: fn(ns, x, const), name), g.R(*n))]

        return c(name, build)

    def ddof(name: str) -> Case:
        def build(g: Draw) -> list[Check]:
            b, cc, d = g.R(3), g.R(3, 4), g.R(1, 3)
            return (combo(f"np.{name}", (0,), [b, cc, d], axis=[None], keepdims=[True, False], ddof=[0, 1])
                    + combo(f"np.{name}", (0,), [cc, d], axis=[None, 1], keepdims=[True, False], ddof=[2]))

        return c(f"{name}_ddof", build)

    def where(g: Draw) -> list[Check]:
        cond = g.R(4, 5) > 0
        return [chk(one(lambda ns, x, y: ns.np.where(cond, x, y), "where(C, x, y)"), g.R(4, 5), g.R(4, 5))]

    def cast_to_int(ns: Any, w: Any) -> Any:
        inds = ns.np.ones(5)[:, None]
        ns.np.concatenate((w, inds), axis=1)
        new_w = w[:, :-1]
        new_inds = ns.np.int64(w[:, -1])
        assert new_inds.dtype == ns.np.int64
        return new_w[new_inds].sum()

    def nan_to_num(g: Draw) -> list[Check]:
        y = np.array([0.0, np.nan, np.inf, -np.inf])
        return [chk(one(lambda ns, x: ns.np.sum(ns.np.sin(ns.np.nan_to_num(x + y))), "sum(sin(nan_to_num(x + y)))"),
                    g.R(4))]

    def linspace(g: Draw) -> list[Check]:
        return [chk(one(lambda ns, x, y, num=num: ns.np.linspace(x, y, num), f"linspace(x, y, {num})"), a, b)
                for num in (0, 1, 5) for a, b in ((1.2, 3.4), (1.2, -3.4), (1.2, 1.2))]

    def gradient(g: Draw) -> list[Check]:
        checks = [chk("np.gradient", g.R(10)), chk("np.gradient", g.R(10, 10)), chk("np.gradient", g.R(10, 10, 10))]
        return checks + [chk("np.gradient", g.R(10, 10, 10), axis=a) for a in (None, 0, 1, -1, (0, 1), (0, -1))]

    def append_list(g: Draw) -> list[Check]:
        fn = one(lambda ns, a, b: ns.np.append(a, b), "append(A, b)")
        return [chk(fn, [1.0, 2.0, 3.0], 4.0, argnums=(0, 1), ref=_stack_ref(fn))]

    def append_list_2d(g: Draw) -> list[Check]:
        fn = one(lambda ns, a, b, **kw: ns.np.append(a, b, **kw), "append(A, B, axis=0)")
        return [chk(fn, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[7.0, 8.0, 9.0]], argnums=(0, 1), axis=0,
                    ref=_ndarray_ref(fn))]

    def diagonal(g: Draw) -> list[Check]:
        fn = one(lambda ns, d: ns.np.diagonal(d, axis1=-1, axis2=-2), "diagonal(D, axis1=-1, axis2=-2)")
        return [chk(fn, g.R(4, 4)), chk(fn, g.R(3, 4, 4))]

    mean_ref_pairs = {name: list_of_boxes(name) for name in ("std", "var")}
    x2d = lambda ns, x: ns.np.array([[x, x * 1.0, x + 2.5], [x**2, x, x / 2.0]])  # noqa: E731
    x1d = lambda ns, x: ns.np.array([x, x * 1.0, x + 2.5])  # noqa: E731
    return [
        c("dot", dots), c("dot_with_floats", dots_floats), c("outer", outers),
        f1("max", lambda ns, x: ns.np.max(x), 10, 11), f1("max_axis", lambda ns, x: ns.np.max(x, axis=1), 3, 4, 5),
        f1("max_axis_keepdims", lambda ns, x: ns.np.max(x, axis=1, keepdims=True), 3, 4, 5),
        f1("min", lambda ns, x: ns.np.min(x), 10, 11), f1("min_axis", lambda ns, x: ns.np.min(x, axis=1), 3, 4, 5),
        f1("min_axis_keepdims", lambda ns, x: ns.np.min(x, axis=1, keepdims=True), 3, 4, 5),
        f1("sum_1", lambda ns, x: ns.np.sum(x), 10, 11), f1("sum_2", lambda ns, x: ns.np.sum(x, axis=0), 10, 11),
        f1("sum_3", lambda ns, x: ns.np.sum(x, axis=0, keepdims=True), 10, 11),
        f1("sum_with_axis_tuple", lambda ns, x: ns.np.sum(x, axis=(1, 2)), 10, 11, 7),
        c("plain_numpy_reductions_on_box", reductions_on_box),
        f1("flipud", lambda ns, x: ns.np.flipud(x), 10, 11), f1("fliplr", lambda ns, x: ns.np.fliplr(x), 10, 11),
        f1("rot90", lambda ns, x: ns.np.rot90(x), 10, 11),
        f1("cumsum_axis0", lambda ns, x: ns.np.cumsum(x, axis=0), 10, 11),
        f1("cumsum_axis1", lambda ns, x: ns.np.cumsum(x, axis=1), 10, 11),
        f1("cumsum_1d", lambda ns, x: ns.np.cumsum(x), 10), f1("cumsum_no_axis", lambda ns, x: ns.np.cumsum(x), 10, 11),
        c("non_numpy_sum", lambda g: [chk(one(lambda ns, x, y: sum([x, y]), "sum([x, y])"), g.R(10, 11), g.R(10, 11))]),
        f1("mean_1", lambda ns, x: ns.np.mean(x), 10, 11), f1("mean_2", lambda ns, x: ns.np.mean(x, axis=0), 10, 11),
        f1("mean_3", lambda ns, x: ns.np.mean(x, axis=0, keepdims=True), 10, 11),
        at("mean_list_of_boxes", one(mean_list, "mean([x, x + 2]) + mean((x, x + 2))"), 0.0, order=1,
           ref=mean_list_jax),
        at("std_list_of_boxes", mean_ref_pairs["std"][0], 0.0, order=1, ref=mean_ref_pairs["std"][1]),
        at("var_list_of_boxes", mean_ref_pairs["var"][0], 0.0, order=1, ref=mean_ref_pairs["var"][1]),
        f1("index_ints", lambda ns, x: x[3, 0, 1], 5, 6, 4),
        f1("index_slice", lambda ns, x: x[::-1, 2:4, :], 5, 6, 4),
        f1("index_lists", lambda ns, x: x[[0, 1, 2], :, :], 5, 6, 4),
        f1("index_mixed", lambda ns, x: x[3, 2:, [1, 3]], 5, 6, 4),
        f1("vector_slice", lambda ns, x: x[2:4], 5),
        f1("index_slice_fanout", lambda ns, x: x[::-1, 2:4, :] + x[::-1, 3:5, :], 5, 6, 4),
        f1("index_multiple_slices", lambda ns, x: x[2:6][1:3], 7),
        f1("reshape_method", lambda ns, x: x.reshape((5 * 4, 6)), 5, 6, 4),
        f1("reshape_call", lambda ns, x: ns.np.reshape(x, (5 * 4, 6)), 5, 6, 4),
        f1("reshape_method_nolist", lambda ns, x: x.reshape(5 * 4, 6), 5, 6, 4),
        f1("ravel_method", lambda ns, x: x.ravel(), 5, 6, 4), f1("ravel_call", lambda ns, x: ns.np.ravel(x), 5, 6, 4),
        f1("flatten_method", lambda ns, x: x.flatten(), 5, 6, 4),
        c("simple_append_list", append_list),
        c("simple_append_arr", lambda g: [chk("np.append", np.array([1.0, 2.0, 3.0]), 4.0, argnums=(0, 1))]),
        c("simple_append_list_2D", append_list_2d),
        concat("simple_concatenate", None), concat("concatenate_axis_0", 0),
        concat("concatenate_axis_1", 1), concat("concatenate_axis_1_unnamed", 1, keyword=False),
        trace_case("trace", (10, 11), -9, 11), trace_case("trace2", (11, 10), -9, 11),
        trace_case("trace_extradims", (5, 6, 4, 3), -5, 6),
        f1("diag", lambda ns, x: ns.np.diag(x), 10, 10), f1("transpose", lambda ns, x: x.T, 8, 8),
        f1("roll", lambda ns, x: ns.np.roll(x, 2, axis=1), 4, 5),
        f1("roll_no_axis", lambda ns, x: ns.np.roll(x, 2, axis=1), 4, 5),
        f1("triu", lambda ns, x: ns.np.triu(x, k=2), 5, 5), f1("tril", lambda ns, x: ns.np.tril(x, k=2), 5, 5),
        c("clip", lambda g: [chk(one(lambda ns, x: ns.np.clip(x, a_min=0.1, a_max=1.1), "clip(x, a_min=0.1, a_max=1.1)"),
                                 g.R(5, 5), ref=lambda ns, x: ns.np.clip(x, 0.1, 1.1))]),
        c("prod_1", lambda g: [chk(one(lambda ns, x: ns.np.prod(x), "prod(x)"), g.R(2, 3) ** 2 / 10.0 + 0.1)]),
        c("prod_2", lambda g: [chk(one(lambda ns, x: ns.np.prod(x, axis=0), "prod(x, axis=0)"), g.R(2, 3) ** 2 + 0.1)]),
        c("prod_3", lambda g: [chk(one(lambda ns, x: ns.np.prod(x, axis=0, keepdims=True), "prod(x, axis=0, keepdims)"),
                                   g.R(2, 3) ** 2 + 0.1)]),
        c("prod_4", lambda g: [chk(one(lambda ns, x: ns.np.prod(x), "prod(x)"), g.R(7) ** 2 + 0.1)]),
        at("1d_array", x1d, 3.0), at("2d_array", x2d, 3.0),
        at("1d_array_fanout", lambda ns, x: x1d(ns, x) + x1d(ns, x), 3.0),
        at("2d_array_fanout", lambda ns, x: x2d(ns, x) + x2d(ns, x), 3.0),
        at("array_from_scalar", lambda ns, x: ns.np.array(x), 3.0),
        # autograd boxes the float 3.0; NumPy's own 0-d value with .shape, .ndim, .size, .dtype is np.float64(3.0)
        at("scalar_array_box_attributes", attributes, np.float64(3.0), order=1),
        f1("array_from_arrays", lambda ns, x: ns.np.array([x, x]), 3, 2),
        f1("array_from_arrays_2", lambda ns, x: ns.np.array([[2 * x, x + 1], [x, x]]), 3, 2),
        f1("len", length, 3, 2),
        f1("r_basic", lambda ns, x: ns.np.r_[x], 3, 2), f1("r_double", lambda ns, x: ns.np.r_[x, x], 3, 2),
        with_constant("no_relation", lambda ns, x, const: const),
        with_constant("r_no_relation", lambda ns, x, const: ns.np.r_[const]),
        with_constant("r_node_and_const", lambda ns, x, const: ns.np.r_[x, const]),
        with_constant("r_mixed", lambda ns, x, const: ns.np.r_[x, const, x]),
        with_constant("r_slicing", lambda ns, x, const: ns.np.r_[x, const, 1:10], (10,)),
        with_constant("c_", lambda ns, x, const: ns.np.c_[x, const, x]),
        with_constant("c_mixed", lambda ns, x, const: ns.np.c_[x, const, x]),
        ddof("var"), ddof("std"), c("where", where),
        f1("squeeze_func", lambda ns, x: ns.np.squeeze(x), 5, 1, 4),
        f1("squeeze_method", lambda ns, x: x.squeeze(), 5, 1, 4),
        f1("repeat", lambda ns, x: ns.np.repeat(x, 2, axis=1), 5, 3, 4),
        f1("repeat_axis1_rep1", lambda ns, x: ns.np.repeat(x, 1, axis=1), 5, 3, 4),
        f1("repeat_axis0", lambda ns, x: ns.np.repeat(x, 2, axis=0), 5, 3),
        f1("repeat_1d_axis0", lambda ns, x: ns.np.repeat(x, 2, axis=0), 5),
        f1("repeat_axis0_rep1", lambda ns, x: ns.np.repeat(x, 1, axis=0), 5, 1),
        f1("expand_dims", lambda ns, x: ns.np.expand_dims(x, 2), 5, 1, 4),
        at("tensordot_kwargs_by_position",
           lambda ns, x: ns.np.tensordot(x * ns.np.ones((2, 2)), x * ns.np.ones((2, 2)), 2), 1.0, order=1),
        # JAX takes an index array, not a list, as the index: arr[array(seq)]
        c("multi_index", lambda g: [chk(one(lambda ns, x: ns.np.sum(x[[0, 0]]), "sum(x[[0, 0]])"), g.R(3),
                                        ref=lambda ns, x: ns.np.sum(x[ns.np.array([0, 0])]))]),
        c("multi_index2", lambda g: [chk(one(lambda ns, x: ns.np.sum(x[[0, 1, 0]]), "sum(x[[0, 1, 0]])"), g.R(3),
                                         ref=lambda ns, x: ns.np.sum(x[ns.np.array([0, 1, 0])]))]),
        f1("index_dot_slices", lambda ns, x: ns.np.dot(x[:2], x[2:]), 4),
        f1("cast_to_int", cast_to_int, 5, 10),
        c("diagonal", diagonal), c("nan_to_num", nan_to_num),
        at("max_equal_values", lambda ns, x: ns.np.max(ns.np.array([x, x])), 1.0),
        at("max_equal_values_2d", lambda ns, x: ns.np.max(ns.np.array([[x, x], [x, 0.5]]), axis=1), 1.0, -1.0),
        at("min_3_way_equality", lambda ns, x: ns.np.min(ns.np.array([[x, x, x], [x, 0.5, 0.5], [0.5, 0.5, 0.5],
                                                                       [x, x, 0.5]]), axis=0), 1.0, -1.0),
        at("maximum_equal_values", lambda ns, x: ns.np.maximum(x, x), 1.0),
        at("maximum_equal_values_2d", lambda ns, x: ns.np.maximum(ns.np.array([x, x, 0.5]),
                                                                  ns.np.array([[x, 0.5, x], [x, x, 0.5]])),
           1.0, -1.0, 2.0),
        c("linspace", linspace), c("gradient", gradient),
    ]


def _linalg() -> list[Case]:
    def c(name: str, build: Callable[[Draw], list[Check]]) -> Case:
        return Case(f"test_{name}", LIN, build)

    inv = op("np.linalg.inv")
    det = op("np.linalg.det")
    norm = op("np.linalg.norm")

    def inv_case(g: Draw) -> list[Check]:
        mat = g.R(8, 8)
        return [chk(inv, mat @ mat + np.eye(8))]

    def pinv_case(g: Draw) -> list[Check]:
        pinv = op("np.linalg.pinv")
        low_rank = one(lambda ns, x: ns.np.linalg.pinv(ns.np.swapaxes(x, -1, -2) @ x), "pinv(xᵀ x)")
        low_rank_jax = lambda ns, x: _pinv_jax(ns, ns.np.swapaxes(x, -1, -2) @ x)  # noqa: E731
        checks = []
        for m in range(2, 8):
            checks += [chk(pinv, g.R(5, m), ref=_pinv_jax), chk(pinv, g.R(2, 5, m), ref=_pinv_jax)]
        for m in range(2, 8):
            checks += [chk(low_rank, g.R(5, m), ref=low_rank_jax), chk(low_rank, g.R(2, 5, m), ref=low_rank_jax)]
        return checks

    def solve(name: str, d: int, shift: float, b_shape: tuple[int, ...], argnum: int, batch: int = 0,
              vector: bool = False) -> Case:
        def build(g: Draw) -> list[Check]:
            a = (g.R(batch, d, d) if batch else g.R(d, d)) + shift * np.eye(d)
            b = g.R(*b_shape)
            if vector:
                fn = one(lambda ns, a: ns.np.linalg.solve(a, b[..., None])[..., 0], "solve(A, B[..., None])[..., 0]")
                return [chk(fn, a)]
            if argnum == 0:
                return [chk(one(lambda ns, a: ns.np.linalg.solve(a, b), "solve(a, B)"), a)]
            return [chk(one(lambda ns, b: ns.np.linalg.solve(a, b), "solve(A, b)"), b)]

        return c(name, build)

    logdet = one(lambda ns, x: ns.np.linalg.slogdet(x)[1], "slogdet(x)[1]")

    def slogdet_3d(g: Draw) -> list[Check]:
        mat = np.concatenate([(g.psd(5) + 5 * np.eye(5))[None, ...] for _ in range(3)])
        return [chk(one(lambda ns, x: ns.np.sum(ns.np.linalg.slogdet(x)[1]), "sum(slogdet(x)[1])"), mat)]

    def norm_list(ns: Any, x: Any) -> Any:
        return ns.np.linalg.norm([x, x + 2]) + ns.np.linalg.norm((x, x + 2))

    def norm_list_jax(ns: Any, x: Any) -> Any:
        return 2 * ns.np.linalg.norm(ns.np.stack([x, x + 2]))

    cholesky = one(lambda ns, a: ns.np.linalg.cholesky(_tril_sym(ns, a)), "cholesky(sym(A))")

    def reparameterization(g: Draw) -> list[Check]:
        z = np.random.RandomState(0).randn(6)
        fn = one(lambda ns, a: ns.np.linalg.norm(ns.np.dot(ns.np.linalg.cholesky(_tril_sym(ns, a)), z)),
                 "norm(cholesky(sym(A)) @ z)")
        return [chk(fn, g.psd(6))]

    def broadcast_hmat(g: Draw) -> np.ndarray:
        mat = g.R(2, 3, 6, 6) + 10 * np.eye(6)[None, None, ...]
        return np.einsum("...ij,...kj->...ik", mat, mat)

    only_s = one(lambda ns, x: ns.np.linalg.svd(x, full_matrices=False, compute_uv=False), "svd(x, compute_uv=False)")
    cases = [
        c("inv", inv_case), c("pinv", pinv_case),
        c("inv_3d", lambda g: [chk(inv, g.R(4, 4, 4) + 5 * np.eye(4)), chk(inv, g.R(4, 4, 4, 4) + 5 * np.eye(4))]),
        solve("solve_arg1", 8, 10.0, (8, 7), 0), solve("solve_arg1_1d", 8, 10.0, (8,), 0),
        solve("solve_arg2", 6, 1.0, (6, 5), 1), solve("solve_arg1_3d", 4, 5.0, (5, 4), 0, batch=5, vector=True),
        solve("solve_arg1_3d_3d", 4, 5.0, (5, 4, 6), 0, batch=5),
        c("det", lambda g: [chk(det, g.R(6, 6))]), c("det_3d", lambda g: [chk(det, g.R(3, 3, 3))]),
        c("slogdet", lambda g: (lambda m: [chk(logdet, m), chk(logdet, -m)])(g.R(6, 6))),
        c("slogdet_3d", slogdet_3d),
        c("vector_2norm", lambda g: [chk(norm, g.R(6))]),
        c("norm_list_of_boxes", lambda g: [chk(one(norm_list, "norm([x, x + 2]) + norm((x, x + 2))"), 0.0, order=1,
                                               ref=norm_list_jax)]),
        c("frobenius_norm", lambda g: [chk(norm, g.R(6, 5))]),
        c("frobenius_norm_axis", lambda g: [chk(norm, g.R(6, 5, 4), axis=(0, 1))]),
    ]
    cases += [c(f"vector_norm_ord[6-{o}]", lambda g, o=o: [chk(norm, g.R(6), ord=o)]) for o in range(2, 5)]
    cases += [c(f"norm_axis[shape0-{a}]", lambda g, a=a: [chk(norm, g.R(6, 5, 4), axis=a)]) for a in range(3)]
    cases += [
        c("norm_nuclear", lambda g: [chk(norm, g.R(6, 5), ord="nuc", order=1)]),
        c("norm_nuclear_axis", lambda g: [chk(norm, g.R(6, 5, 4), ord="nuc", axis=(0, 1), order=1)]),
        c("eigvalh_lower", lambda g: eigh_case(g.R(6, 6), None)),
        c("eigvalh_upper", lambda g: eigh_case(g.R(6, 6), "U")),
        c("eigvalh_lower_broadcasting", lambda g: eigh_case(broadcast_hmat(g), None)),
        c("eigvalh_upper_broadcasting", lambda g: eigh_case(broadcast_hmat(g), "U")),
        c("cholesky", lambda g: [chk(cholesky, g.psd(6))]),
        c("cholesky_broadcast", lambda g: [chk(cholesky, np.concatenate([g.psd(6)[None] for _ in range(3)]))]),
        c("cholesky_reparameterization_trick", reparameterization),
        c("svd_wide_2d", lambda g: svd_case(g, 3, 5)), c("svd_wide_3d", lambda g: svd_case(g, 4, 3, 5)),
        c("svd_square_2d", lambda g: svd_case(g, 4, 4)), c("svd_square_3d", lambda g: svd_case(g, 3, 4, 4)),
        c("svd_tall_2d", lambda g: svd_case(g, 5, 3)), c("svd_tall_3d", lambda g: svd_case(g, 4, 5, 3)),
        c("svd_only_s_2d", lambda g: [chk(only_s, g.R(5, 3))]),
        c("svd_only_s_3d", lambda g: [chk(only_s, g.R(4, 5, 3))]),
    ]
    return cases


def _scipy() -> list[Case]:
    def c(name: str, build: Callable[[Draw], list[Check]]) -> Case:
        return Case(f"test_{name}", SCI, build)

    def pos(g: Draw, *shape: int, shift: float = 1.1) -> np.ndarray:
        return g.R(*shape) ** 2 + shift

    def u(name: str, path: str, lims: tuple[float, float]) -> Case:
        return c(name, lambda g: unary(g, path, lims))

    def scalars(name: str, path: str, first: Callable[[Draw], Any], shift: float = 1.3) -> Case:
        """``combo_check(fn, [1])(first, R(4) ** 2 + 1.3)`` — arrays, not lists: every pair of entries."""

        def build(g: Draw) -> list[Check]:
            a = first(g)
            a = [a] if np.ndim(a) == 0 and not isinstance(a, list) else list(a)
            return combo(path, (1,), [float(v) if not isinstance(v, int) else v for v in a],
                         [float(v) for v in pos(g, 4, shift=shift)])

        return c(name, build)

    norm_args = lambda g: ([g.R(4)], [g.R(4)], [pos(g, 4)])  # noqa: E731
    norm_bargs = lambda g: ([g.R(4, 3)], [g.R(1, 3)], [pos(g, 4, 1)])  # noqa: E731
    t_args = lambda g: ([g.R(4)], [pos(g, 4, shift=2.1)], [g.R(4)], [pos(g, 4, shift=2.1)])  # noqa: E731
    t_bargs = lambda g: ([g.R(4, 3)], [pos(g, 1, 3, shift=2.1)], [g.R(4, 3)], [pos(g, 4, 1, shift=2.1)])  # noqa: E731

    def make_psd(mat: np.ndarray) -> np.ndarray:
        return mat.T @ mat + np.eye(mat.shape[0])

    def mvn(name: str, method: str, x_shape: tuple[int, ...]) -> Case:
        fn, ref = symmetrized(f"stats.multivariate_normal.{method}", 2, f"mvn.{method}(x, mean, sym(cov))",
                              drop=("allow_singular",))
        kwargs = {"allow_singular": [False]} if x_shape == (4,) else {}
        return c(name, lambda g: combo(fn, (0, 1, 2), [g.R(*x_shape)], [g.R(4)], [make_psd(g.R(4, 4))], ref=ref,
                                       **kwargs))

    def mvn_entropy(g: Draw) -> list[Check]:
        fn, ref = symmetrized("stats.multivariate_normal.entropy", 1, "mvn.entropy(mean, sym(cov))")
        return combo(fn, (0, 1), [10 * g.R(4)], [make_psd(g.R(4, 4))], ref=ref)

    def mvn_singular(g: Draw) -> list[Check]:
        cov = np.zeros((4, 4))
        cov[0, 0] = cov[1, 1] = 1

        def density(method: str) -> Callable:
            def fn(ns: Any, x: Any, mean: Any, cov: Any) -> Any:
                x = ns.np.concatenate([x[:2], mean[2:]])
                return resolve(ns, f"stats.multivariate_normal.{method}")(x, mean, _sym(ns, cov), allow_singular=True)

            return one(fn, f"mvn.{method}(x, mean, sym(cov), allow_singular=True)")

        arrays = lambda: [np.concatenate((g.R(2), np.zeros(2)))]  # noqa: E731
        return (combo(density("pdf"), (0, 1), arrays(), arrays(), [cov])
                + combo(density("logpdf"), (0, 1), arrays(), arrays(), [cov]))

    def dirichlet(name: str, method: str, argnum: int, normalized: bool) -> Case:
        def build(g: Draw) -> list[Check]:
            alpha = g.rng.random(4) ** 2 + 1.2
            x = g.rng.dirichlet(alpha)
            if normalized:
                fn = one(lambda ns, x, a: resolve(ns, f"stats.dirichlet.{method}")(x / sum(x), a),
                         f"dirichlet.{method}(x / sum(x), alpha)")
            else:
                fn = f"stats.dirichlet.{method}"
            return combo(fn, (argnum,), [x], [alpha])

        return c(name, build)

    lse = "special.logsumexp"

    def odeint(g: Draw) -> list[Check]:
        return combo("integrate.odeint", (1, 2, 3), [_odefunc], [g.R(3)], [np.linspace(0.1, 0.2, 4)],
                     [(g.R(3), g.R(3))])

    cases = []
    for method in ("pdf", "cdf", "logpdf"):
        cases.append(c(f"chi2_{method}", lambda g, m=method: combo(f"stats.chi2.{m}", (0,), [pos(g, 4)], [1, 2, 3])))
    cases += [
        c("beta_cdf", lambda g: combo("stats.beta.cdf", (0,), [g.U(0.0, 1.0, 4)], [pos(g, 4)], [pos(g, 4)])),
        c("beta_pdf", lambda g: combo("stats.beta.pdf", (0, 1, 2), [g.U(0.0, 1.0, 4)], [pos(g, 4)], [pos(g, 4)])),
        c("beta_logpdf", lambda g: combo("stats.beta.logpdf", (0, 1, 2), [g.U(0.0, 1.0, 4)], [pos(g, 4)],
                                         [pos(g, 4)])),
        c("gamma_cdf", lambda g: combo("stats.gamma.cdf", (0,), [pos(g, 4)], [pos(g, 4)])),
        c("gamma_pdf", lambda g: combo("stats.gamma.pdf", (0, 1), [pos(g, 4)], [pos(g, 4)])),
        c("gamma_logpdf", lambda g: combo("stats.gamma.logpdf", (0, 1), [pos(g, 4)], [pos(g, 4)])),
    ]
    for method in ("pdf", "cdf", "sf", "logpdf", "logcdf", "logsf"):
        cases.append(c(f"norm_{method}", lambda g, m=method: combo(f"stats.norm.{m}", (0, 1, 2), *norm_args(g))))
    # as autograd writes them: the broadcast sf and logsf tests call cdf and logcdf
    for test, method in (("pdf", "pdf"), ("cdf", "cdf"), ("sf", "cdf"), ("logpdf", "logpdf"), ("logcdf", "logcdf"),
                         ("logsf", "logcdf")):
        cases.append(c(f"norm_{test}_broadcast",
                       lambda g, m=method: combo(f"stats.norm.{m}", (0, 1, 2), *norm_bargs(g))))
    for method in ("cdf", "logpmf", "pmf"):
        cases.append(c(f"poisson_{method}", lambda g, m=method: combo(
            f"stats.poisson.{m}", (1,), [np.round(g.R(4) ** 2)], [pos(g, 4)])))
    for method in ("cdf", "logpmf", "pmf"):
        cases.append(c(f"poisson_{method}_broadcast", lambda g, m=method: combo(
            f"stats.poisson.{m}", (1,), [np.round(g.R(4, 3) ** 2)], [pos(g, 4, 1)])))
    for method, argnums in (("pdf", (0, 1, 2, 3)), ("cdf", (0, 2)), ("logpdf", (0, 1, 2, 3)), ("logcdf", (0, 2))):
        cases.append(c(f"t_{method}", lambda g, m=method, a=argnums: combo(f"stats.t.{m}", a, *t_args(g))))
    for method, argnums in (("pdf", (0, 1, 2, 3)), ("cdf", (0, 2)), ("logpdf", (0, 1, 2, 3)), ("logcdf", (0, 2))):
        cases.append(c(f"t_{method}_broadcast", lambda g, m=method, a=argnums: combo(f"stats.t.{m}", a, *t_bargs(g))))
    cases += [
        mvn("mvn_pdf", "pdf", (4,)), mvn("mvn_logpdf", "logpdf", (4,)), c("mvn_entropy", mvn_entropy),
        c("mvn_sing_cov", mvn_singular), mvn("mvn_pdf_broadcast", "pdf", (5, 4)),
        mvn("mvn_logpdf_broadcast", "logpdf", (5, 4)),
        dirichlet("dirichlet_pdf_x", "pdf", 0, True), dirichlet("dirichlet_pdf_alpha", "pdf", 1, False),
        dirichlet("dirichlet_logpdf_x", "logpdf", 0, True), dirichlet("dirichlet_logpdf_alpha", "logpdf", 1, False),
        c("logsumexp1", lambda g: combo(lse, (0,), [np.array([1.1]), g.R(4), g.R(3, 4)], axis=[None, 0],
                                        keepdims=[True, False])),
        c("logsumexp2", lambda g: combo(lse, (0,), [g.R(3, 4), g.R(4, 5, 6), g.R(1, 5)], axis=[None, 0, 1],
                                        keepdims=[True, False])),
        c("logsumexp3", lambda g: combo(lse, (0,), [g.R(4)], b=[np.exp(g.R(4))], axis=[None, 0],
                                        keepdims=[True, False])),
        c("logsumexp4", lambda g: combo(lse, (0,), [g.R(3, 4)], b=[np.exp(g.R(3, 4))], axis=[None, 0, 1],
                                        keepdims=[True, False])),
        c("logsumexp5", lambda g: combo(lse, (0,), [g.R(2, 3, 4)], b=[np.exp(g.R(2, 3, 4))], axis=[None, 0, 1],
                                        keepdims=[True, False])),
        c("logsumexp6", lambda g: [chk(lse, g.R(1, 5), axis=1, keepdims=True)]),
        c("convolve", lambda g: combo("signal.convolve", (0, 1), [g.R(4), g.R(5), g.R(6)], [g.R(2), g.R(3), g.R(4)],
                                      mode=["full", "valid", "same"])),
        c("convolve_2d", lambda g: combo("signal.convolve", (0, 1), [g.R(4, 3), g.R(5, 4), g.R(6, 7)],
                                         [g.R(2, 2), g.R(3, 2), g.R(4, 2), g.R(4, 1)], mode=["full", "valid", "same"])),
        c("beta", lambda g: combo("special.beta", (0, 1), [pos(g, 4)], [pos(g, 4)])),
        c("betainc", lambda g: combo("special.betainc", (2,), [pos(g, 4)], [pos(g, 4)], [g.U(0.0, 1.0, 4)])),
        c("betaln", lambda g: combo("special.betaln", (0, 1), [pos(g, 4)], [pos(g, 4)])),
        scalars("gammainc", "special.gammainc", lambda g: [1]),
        scalars("gammaincc", "special.gammaincc", lambda g: [1]),
        scalars("polygamma", "special.polygamma", lambda g: [0]),
        scalars("jn", "special.jn", lambda g: [2]), scalars("yn", "special.yn", lambda g: [2]),
        u("psi", "special.psi", (0.3, 2.0)), u("digamma", "special.digamma", (0.3, 2.0)),
        u("gamma", "special.gamma", (0.3, 2.0)), u("gammaln", "special.gammaln", (0.3, 2.0)),
        u("gammasgn", "special.gammasgn", (0.3, 2.0)), u("rgamma", "special.rgamma", (0.3, 2.0)),
        c("multigammaln", lambda g: combo("special.multigammaln", (0,), [g.U(4.0, 5.0), g.U(4.0, 5.0, (2, 3))],
                                          [1, 2, 3])),
    ]
    cases += [u(name, f"special.{name}", (0.2, 20.0)) for name in ("j0", "j1", "y0", "y1", "i0", "i1")]
    cases += [
        scalars("iv", "special.iv", lambda g: g.U(1.0, 50.0, 4)),
        scalars("ive", "special.ive", lambda g: g.U(1.0, 50.0, 4)),
        u("erf", "special.erf", (-3.0, 3.0)), u("erfc", "special.erfc", (-3.0, 3.0)),
        u("erfinv", "special.erfinv", (-0.95, 0.95)), u("erfcinv", "special.erfcinv", (0.05, 1.95)),
        u("logit", "special.logit", (0.10, 0.90)), u("expit", "special.expit", (-4.05, 4.95)),
        c("odeint", odeint),
        c("solve_sylvester", lambda g: combo("sla.solve_sylvester", (0, 1, 2), [g.R(3, 3)], [g.R(3, 3)],
                                             [g.R(3, 3)])),
        c("solve_banded", lambda g: combo("sla.solve_banded", (1, 2), [(1, 1)], [g.R(3, 5)], [g.R(5)], order=1)),
    ]
    return cases


CASES: tuple[Case, ...] = (*_systematic(), *_numpy(), *_linalg(), *_scipy())
BY_NAME = {case.name: case for case in CASES}
#: the subset ``--quick`` runs: one or two of each kind, under a minute
QUICK = ("test_systematic.py::test_sin", "test_systematic.py::test_op_mul", "test_systematic.py::test_einsum_covsum",
         "test_numpy.py::test_index_mixed", "test_numpy.py::test_concatenate_axis_1", "test_linalg.py::test_inv",
         "test_linalg.py::test_slogdet", "test_scipy.py::test_norm_logpdf", "test_scipy.py::test_logsumexp1",
         "test_scipy.py::test_j0")
#: autograd's tests this suite leaves out, and why (the module docstring says more)
SKIPPED = {
    "complex numbers": [
        "complex inputs of unary_ufunc_check / binary_ufunc_check / stat_check and of test_kron, test_dot, "
        "test_outer, test_matmul, test_tensordot_1, test_einsum_matmult (their real combinations run)",
        *(f"{LIN}::test_{n}" for n in (
            "vector_2norm_complex", "frobenius_norm_complex", "frobenius_norm_axis_complex",
            "vector_norm_ord_complex", "norm_axis_complex", "norm_nuclear_complex", "norm_nuclear_axis_complex",
            "eigvalh_lower_complex", "eigvalh_upper_complex", "eig_real", "eig_complex", "eig_batched",
            "svd_wide_2d_complex", "svd_wide_3d_complex", "svd_square_2d_complex", "svd_square_3d_complex",
            "svd_tall_2d_complex", "svd_tall_3d_complex", "svd_only_s_2d_complex", "svd_only_s_3d_complex")),
        f"{SCI}::test_sqrtm (the square root of a symmetrized random matrix, indefinite, is complex)",
    ],
    "autograd's own API": [
        f"{NUM}::test_make_diagonal (np.make_diagonal is autograd's)",
        f"{SCI}::test_convolve_generalization, test_convolve_ignore, test_convolve_ignore_dot "
        "(autograd.scipy.signal.convolve's axes/dot_axes signature has no SciPy counterpart)",
    ],
    "not a derivative of an operation": [
        f"{NUM}::test_numpy_version",
        f"{NUM}::test_astype (a float32 argument's gradient stays float32: a dtype rule; the suite is float64)",
        f"{SYS}::test_msort (np.msort left NumPy 2; autograd skips it there too)",
        f"{SCI}::test_logsumexp6's third-order half (grad nested inside the checked function)",
    ],
}


# =========================================================================== trees
def is_tree(x: Any) -> bool:
    return isinstance(x, list | tuple)


def tree_leaves(tree: Tree) -> list[Any]:
    """The leaves of a list / tuple tree, depth first."""
    if is_tree(tree):
        return [leaf for child in tree for leaf in tree_leaves(child)]
    return [tree]


def rebuild(template: Tree, leaves: Iterator[Any]) -> Tree:
    """``template``'s structure with its leaves taken in order from ``leaves``."""
    if is_tree(template):
        return type(template)(rebuild(child, leaves) for child in template)
    return next(leaves)


def as_numpy(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


def describe(value: Any) -> str:
    """A short spelling of an argument: arrays by their shape."""
    if isinstance(value, np.ndarray):
        return f"bool{value.shape}" if value.dtype == bool else f"array{value.shape}"
    if isinstance(value, list | tuple):
        inner = ", ".join(describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if callable(value):
        return getattr(value, "__name__", "function")
    return repr(value)


def describe_check(check: Check) -> str:
    args = ", ".join(describe(a) for a in check.args)
    kwargs = "".join(f", {k}={describe(v)}" for k, v in check.kwargs.items())
    return f"{check.fn.__name__}({args}{kwargs}) w.r.t. {list(check.argnums)}"


def output_leaves(out: Any) -> list[Any]:
    return tree_leaves(out) if is_tree(out) else [out]


# =========================================================================== the objective
def bind(check: Check, ns: Any, weights: list[Any]) -> Callable[..., Any]:
    """``L(*xs) = Σ_leaves Σ W ⊙ f(args with xs at argnums)``: the scalarized check in ``ns``."""
    fn = check.ref if (check.ref is not None and ns.name == "jax") else check.fn

    def scalarized(*xs: Any) -> Any:
        args = list(check.args)
        for k, x in zip(check.argnums, xs, strict=True):
            args[k] = x
        leaves = output_leaves(fn(ns, *args, **check.kwargs))
        if len(leaves) != len(weights):
            raise ValueError(f"{len(leaves)} output leaves, {len(weights)} weights")
        total = None
        for w, y in zip(weights, leaves, strict=True):
            term = ns.np.sum(y * w)
            total = term if total is None else total + term
        return total

    scalarized.__name__ = check.fn.__name__.replace(".", "_")
    return scalarized


@dataclass
class Prepared:
    """A check made ready: the NumPy output (its leaves), the weights, the differentiated leaves."""

    check: Check
    outputs: list[np.ndarray]
    weights: list[np.ndarray]
    diff: list[Tree]  # the differentiated arguments as the test passes them
    leaves: list[Any]
    sizes: list[int]
    shapes: list[tuple[int, ...]]
    x0: np.ndarray  # the differentiated entries, flattened


def prepare(check: Check, rng: np.random.Generator) -> Prepared:
    numpy = namespace("numpy")
    outputs = [as_numpy(y) for y in output_leaves(check.fn(numpy, *check.args, **check.kwargs))]
    weights = [rng.standard_normal(y.shape) for y in outputs]
    diff = [check.args[k] for k in check.argnums]
    leaves = tree_leaves(diff)
    shapes = [np.shape(leaf) for leaf in leaves]
    sizes = [int(np.size(leaf)) for leaf in leaves]
    x0 = np.concatenate([as_numpy(leaf).ravel() for leaf in leaves]) if leaves else np.zeros(0)
    return Prepared(check, outputs, weights, diff, leaves, sizes, shapes, x0)


def _split(p: Prepared, flat: Any, to_leaf: Callable[[Any, Any], Any]) -> list[Tree]:
    """The differentiated arguments rebuilt from the flat entries (``to_leaf(piece, template_leaf)``)."""
    pieces, start = [], 0
    for leaf, size, shape in zip(p.leaves, p.sizes, p.shapes, strict=True):
        pieces.append(to_leaf(flat[start:start + size].reshape(shape), leaf))
        start += size
    return rebuild(p.diff, iter(pieces))


def flat_function(p: Prepared, ns: Any) -> Callable[[Any], Any]:
    """``L`` as a function of the flattened differentiated entries."""
    scalarized = bind(p.check, ns, p.weights if ns.name == "numpy" else [_jnp().asarray(w) for w in p.weights])
    if ns.name == "numpy":
        def to_leaf(piece: Any, leaf: Any) -> Any:
            return float(piece) if isinstance(leaf, float | int) else piece
    else:
        def to_leaf(piece: Any, leaf: Any) -> Any:
            return piece

    return lambda flat: scalarized(*_split(p, flat, to_leaf))


# =========================================================================== jacacc
class StructureMismatch(Exception):
    """jacacc's result has another shape or nesting than the arguments call for."""


def jacacc_derivative(p: Prepared, derivative: str) -> np.ndarray:
    """jacacc.tensor's gradient (flat) or Hessian (dense, n × n) of the scalarized check, called on the
    arguments as the test passes them."""
    import jacacc.tensor as jt

    numpy = namespace("numpy")
    f = bind(p.check, numpy, p.weights)
    n_diff = len(p.diff)
    argnum = tuple(range(n_diff)) if n_diff > 1 else 0
    transform = jt.grad if derivative == "gradient" else jt.hessian
    result = transform(f, argnum=argnum)(*p.diff)
    if derivative == "gradient":
        return flatten_gradient(tree_leaves(result), p)
    return dense_hessian(result, p)


def flatten_gradient(leaves: list[Any], p: Prepared) -> np.ndarray:
    if len(leaves) != len(p.leaves):
        raise StructureMismatch(f"the gradient has {len(leaves)} leaves, the arguments {len(p.leaves)}")
    out = []
    for leaf, shape in zip(leaves, p.shapes, strict=True):
        a = as_numpy(leaf)
        if a.shape != shape:
            raise StructureMismatch(f"a gradient of shape {a.shape} for an argument of shape {shape}")
        out.append(a.ravel())
    return np.concatenate(out) if out else np.zeros(0)


def _outer_split(template: Tree, value: Any) -> list[Any]:
    """``value`` split along the structure of ``template``: one subtree per leaf of ``template``."""
    if is_tree(template):
        if not is_tree(value) or len(value) != len(template):
            raise StructureMismatch("the Hessian's nesting differs from jax.hessian's")
        return [sub for t, v in zip(template, value, strict=True) for sub in _outer_split(t, v)]
    return [value]


def dense_hessian(result: Any, p: Prepared) -> np.ndarray:
    """jacacc's Hessian as one dense n × n matrix.  It nests as ``jax.hessian`` nests: the differentiated
    arguments' structure (the tuple of them where ``argnum`` is a sequence, else the one argument) with
    every leaf replaced by that structure again, whose leaves are blocks of shape ``leaf_a.shape +
    leaf_b.shape``."""
    structure = tuple(p.diff) if len(p.diff) > 1 else p.diff[0]
    offsets = np.concatenate([[0], np.cumsum(p.sizes)]).astype(int)
    n = int(offsets[-1])
    dense = np.zeros((n, n))
    rows = _outer_split(structure, result)
    for a, row in enumerate(rows):
        for b, block in enumerate(_outer_split(structure, row)):
            block = as_numpy(block)
            if block.shape != tuple(p.shapes[a]) + tuple(p.shapes[b]):
                raise StructureMismatch(f"a Hessian block of shape {block.shape} for arguments of shapes "
                                        f"{p.shapes[a]} and {p.shapes[b]}")
            dense[offsets[a]:offsets[a + 1], offsets[b]:offsets[b + 1]] = block.reshape(p.sizes[a], p.sizes[b])
    return dense


def exception_class(exc: BaseException) -> tuple[str, str]:
    """``refused`` for jacacc's own errors (their first line), ``crash`` for anything else (type, message,
    and the innermost frame inside jacacc)."""
    from jacacc.errors import JacaccError

    text = str(exc).strip()
    lines = text.splitlines()
    message = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")[:400]
    if isinstance(exc, JacaccError):
        return "refused", message + (" […]" if len(lines) > 1 else "")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f"{os.sep}jacacc{os.sep}" in f.filename]
    if frames:
        where = frames[-1]
        path = where.filename[where.filename.rfind(f"{os.sep}jacacc{os.sep}") + 1:]
        message += f" [at {path}:{where.lineno} in {where.name}]"
    return "crash", message


# =========================================================================== references
def fd_gradient(f: Callable[[np.ndarray], Any], x: np.ndarray, step: float = FD_STEP) -> np.ndarray:
    """Central differences, five-point stencil; the step shrinks near zero so it keeps the sign of x.
    The derivative index is the last axis (``f`` may return an array: its Jacobian, rows first)."""
    columns = []
    for i in range(x.size):
        h = step * max(1.0, abs(x[i]))
        if x[i] != 0 and abs(x[i]) < 4 * h:
            h = abs(x[i]) / 4
        e = np.zeros_like(x)
        e[i] = h
        columns.append((f(x - 2 * e) - 8 * f(x - e) + 8 * f(x + e) - f(x + 2 * e)) / (12 * h))
    return np.stack(columns, axis=-1) if columns else np.zeros_like(x)


def fd_hessian(f: Callable[[np.ndarray], float], x: np.ndarray) -> np.ndarray:
    """Differences of :func:`fd_gradient`, symmetrized."""
    if not x.size:
        return np.zeros((0, 0))
    h = fd_gradient(lambda y: fd_gradient(f, y), x)
    return (h + h.T) / 2


def leaves_close(result: list[np.ndarray], reference: list[np.ndarray], rtol: float, atol: float) -> tuple[bool, float]:
    """Whether every pair of blocks agrees (``max |r − ref| ≤ atol + rtol · max |ref|``, NaN where NaN and equal
    infinities allowed) and the largest difference relative to its block's largest reference entry."""
    worst, ok = 0.0, True
    if len(result) != len(reference):
        return False, math.inf
    for r, ref in zip(result, reference, strict=True):
        r, ref = as_numpy(r), as_numpy(ref)
        if r.shape != ref.shape:
            return False, math.inf
        if r.size == 0:
            continue
        same_special = (np.isnan(r) & np.isnan(ref)) | (np.isinf(r) & (r == ref))
        if np.any(~np.isfinite(r) & ~same_special) or np.any(~np.isfinite(ref) & ~same_special):
            return False, math.inf
        finite = ~same_special
        if not finite.any():
            continue
        diff = float(np.max(np.abs(r[finite] - ref[finite])))
        scale = float(np.max(np.abs(ref[finite])))
        worst = max(worst, diff / scale if scale > 0 else diff)
        ok = ok and diff <= atol + rtol * scale
    return ok, worst


def blocks(p: Prepared, value: np.ndarray) -> list[np.ndarray]:
    """A flat gradient split by argument leaf, or a dense Hessian split into leaf × leaf blocks."""
    offsets = np.concatenate([[0], np.cumsum(p.sizes)]).astype(int)
    spans = list(itertools.pairwise(offsets))
    if value.ndim == 1:
        return [value[a:b] for a, b in spans]
    return [value[a:b, c:d] for a, b in spans for c, d in spans]


@dataclass
class Reference:
    kind: str  # "jax", "fd" or "missing"
    value: np.ndarray | None
    note: str | None = None


def _jax_call(fn: Callable, x0: Any) -> Any:
    """``jax.jit(fn)(x0)``, eagerly where ``jit`` cannot trace it."""
    import jax

    try:
        return jax.jit(fn)(x0)
    except Exception:  # noqa: BLE001 - a function jit cannot trace may still run eagerly
        return fn(x0)


def jax_value_agrees(p: Prepared) -> str | None:
    """None where JAX's value of ``f`` equals NumPy's (rtol :data:`RTOL`), else why not."""
    import jax.numpy as jnp

    ns = namespace("jax")
    fn = p.check.ref if p.check.ref is not None else p.check.fn

    def outputs(flat: Any) -> tuple:
        args = list(p.check.args)
        for k, x in zip(p.check.argnums, _split(p, flat, lambda piece, leaf: piece), strict=True):
            args[k] = x
        return tuple(output_leaves(fn(ns, *args, **p.check.kwargs)))

    theirs = [as_numpy(y) for y in _jax_call(outputs, jnp.asarray(p.x0))]
    ok, err = leaves_close(theirs, p.outputs, RTOL, ATOL)
    return None if ok else f"JAX's value differs from NumPy's (max relative difference {err:.3g})"


def reference(p: Prepared, derivative: str, state: dict[str, Any]) -> Reference:
    """JAX's gradient / Hessian of the scalarized check (``jax.jit``; ``state`` remembers JAX's verdict for
    the other derivative), else central differences of the NumPy function."""
    import jax

    note = state.get("jax_problem")
    if note is None and "jax_ok" not in state:
        try:
            note = jax_value_agrees(p)
        except NoReference as exc:
            note = str(exc)
        except Exception as exc:  # noqa: BLE001 - JAX's failure sends the check to finite differences
            note = f"JAX failed: {exc_line(exc)}"
        state["jax_ok"] = note is None
        state["jax_problem"] = note
    if note is None:
        try:
            g = flat_function(p, namespace("jax"))
            transform = jax.grad(g) if derivative == "gradient" else jax.hessian(g)
            value = np.asarray(_jax_call(transform, jax.numpy.asarray(p.x0)), dtype=np.float64)
            if np.all(np.isfinite(value)):
                return Reference("jax", value)
            note = f"JAX's {derivative} is not finite"
            fd = _fd(p, derivative)
            if np.all(np.isfinite(fd)):
                return Reference("fd", fd, note + "; central differences are")
            return Reference("jax", value, note)
        except Exception as exc:  # noqa: BLE001
            note = f"JAX failed: {exc_line(exc)}"
    try:
        fd = _fd(p, derivative)
    except Exception as exc:  # noqa: BLE001
        return Reference("missing", None, f"{note}; finite differences failed: {exc_line(exc)}")
    if not np.all(np.isfinite(fd)):
        return Reference("missing", None, f"{note}; finite differences are not finite")
    return Reference("fd", fd, note)


def _fd(p: Prepared, derivative: str) -> np.ndarray:
    f = flat_function(p, namespace("numpy"))
    scalar = lambda x: float(f(x))  # noqa: E731
    if derivative == "gradient":
        return fd_gradient(scalar, p.x0.copy())
    return fd_hessian(scalar, p.x0.copy())


def exc_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")[:300]


# =========================================================================== classification
def classify(result: np.ndarray | None, ref: Reference, p: Prepared | None = None) -> tuple[str, float | None, str | None]:
    """The class of one derivative that jacacc computed: ``right``/``wrong`` against the reference (at
    :data:`RTOL` for JAX's, :data:`FD_RTOL` for finite differences), ``reference-missing`` without one.
    Returns (class, largest relative difference, message)."""
    if ref.value is None or ref.kind == "missing":
        return "reference-missing", None, ref.note
    rtol, atol = (RTOL, ATOL) if ref.kind == "jax" else (FD_RTOL, FD_ATOL)
    if result is None or result.shape != ref.value.shape:
        return "wrong", math.inf, f"shape {None if result is None else result.shape}, reference {ref.value.shape}"
    ours = blocks(p, result) if p is not None else [result]
    theirs = blocks(p, ref.value) if p is not None else [ref.value]
    ok, err = leaves_close(ours, theirs, rtol, atol)
    if ok:
        return "right", err, None
    bad = int(np.sum(~np.isfinite(result) & np.isfinite(ref.value)))
    detail = f"; {bad} of jacacc's {result.size} entries not finite where the reference's are" if bad else ""
    return "wrong", err, f"max relative difference {err:.3g} from {ref.kind} (rtol {rtol:g}){detail}"


def cross_check(p: Prepared, derivative: str, ours: np.ndarray, ref: Reference) -> tuple[bool, str | None]:
    """Where jacacc differs from JAX: whether JAX itself is that uncertain.  Central differences are
    computed (up to :data:`CROSS_CHECK_MAX` entries); where JAX and they differ by more than RTOL (an
    ill-conditioned function: ``pinv(xᵀx)``'s Hessian) and jacacc is no farther from either than twice
    that, the difference is within the problem's own uncertainty.  Returns (settled, a note on what central
    differences said; None where they were not computed)."""
    if p.x0.size > CROSS_CHECK_MAX or ours.shape != ref.value.shape:
        return False, None
    try:
        fd = _fd(p, derivative)
    except Exception:  # noqa: BLE001 - no second reference: the difference stands
        return False, None
    if not np.all(np.isfinite(fd)):
        return False, None
    spread = leaves_close(blocks(p, ref.value), blocks(p, fd), RTOL, ATOL)[1]
    to_jax = leaves_close(blocks(p, ours), blocks(p, ref.value), RTOL, ATOL)[1]
    to_fd = leaves_close(blocks(p, ours), blocks(p, fd), RTOL, ATOL)[1]
    if spread > RTOL and to_jax <= 2 * spread and to_fd <= 2 * spread:
        return True, (f"within the reference's own uncertainty: jacacc {to_jax:.2g} from JAX and {to_fd:.2g} from "
                      f"central differences, which differ from JAX by {spread:.2g}")
    return False, f"central differences differ from JAX by {spread:.2g}, from jacacc by {to_fd:.2g}"


def worst(classes: list[str]) -> str:
    for c in SEVERITY:
        if c in classes:
            return c
    return "right"


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """A ``TimeoutError`` after ``seconds`` (SIGALRM; nothing where that is not available)."""
    usable = hasattr(signal, "SIGALRM") and seconds > 0
    if usable:
        import threading

        usable = threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_check(check: Check, rng: np.random.Generator, timeout: int = CHECK_TIMEOUT_S) -> dict[str, Any]:
    """One check: jacacc's gradient (and Hessian), each against its reference."""
    entry: dict[str, Any] = {"check": describe_check(check), "parts": []}
    p = prepare(check, rng)
    state: dict[str, Any] = {}
    derivatives = ("gradient", "hessian") if check.order >= 2 else ("gradient",)
    for derivative in derivatives:
        part: dict[str, Any] = {"derivative": derivative}
        try:
            with time_limit(timeout):
                ours = jacacc_derivative(p, derivative)
        except StructureMismatch as exc:
            part.update({"class": "wrong", "message": f"StructureMismatch: {exc}", "reference": None})
            entry["parts"].append(part)
            break
        except Exception as exc:  # noqa: BLE001 - jacacc's failure is the datum
            cls, message = exception_class(exc)
            part.update({"class": cls, "message": message, "reference": None})
            entry["parts"].append(part)
            break
        ref = reference(p, derivative, state)
        cls, err, message = classify(ours, ref, p)
        if cls == "wrong" and ref.kind == "jax":
            settled, note = cross_check(p, derivative, ours, ref)
            if settled:
                cls, message = "right", note
            elif note:
                message = f"{message}; {note}"
        part.update({"class": cls, "max_rel_error": err, "reference": ref.kind,
                     "message": "; ".join(m for m in (message, ref.note) if m) or None})
        entry["parts"].append(part)
    entry["class"] = worst([part["class"] for part in entry["parts"]])
    return entry


def run_case(case: Case, seed: int, timeout: int = CHECK_TIMEOUT_S) -> dict[str, Any]:
    """Every check of one of autograd's tests; the row's class is the worst of its checks'."""
    rng = np.random.default_rng([seed, zlib.crc32(case.name.encode())])
    began = time.perf_counter()
    row: dict[str, Any] = {"name": case.name, "test": case.test, "source": case.source}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            checks = case.build(Draw(rng))
        except Exception as exc:  # noqa: BLE001 - a case that cannot be drawn is the script's bug; keep going
            row.update({"class": "reference-missing", "message": f"the case could not be built: {exc_line(exc)}",
                        "checks": 0, "check_classes": {}, "references": {}, "failures": [],
                        "wall_s": time.perf_counter() - began})
            return row
        entries = []
        for check in checks:
            try:
                entries.append(run_check(check, rng, timeout))
            except Exception as exc:  # noqa: BLE001 - NumPy's own evaluation failed: no reference
                entries.append({"check": describe_check(check), "class": "reference-missing",
                                "parts": [{"derivative": "value", "class": "reference-missing",
                                           "message": f"NumPy's value failed: {exc_line(exc)}"}]})
    classes = [e["class"] for e in entries]
    row["class"] = worst(classes) if entries else "reference-missing"
    row["checks"] = len(entries)
    row["check_classes"] = {c: classes.count(c) for c in CLASSES if classes.count(c)}
    references: dict[str, int] = {}
    for e in entries:
        for part in e["parts"]:
            if part.get("reference"):
                references[part["reference"]] = references.get(part["reference"], 0) + 1
    row["references"] = references
    row["reference_notes"] = sorted({part["message"] for e in entries for part in e["parts"]
                                     if part["class"] == "right" and part.get("message")})[:MAX_FAILURES_KEPT]
    failures = []
    for e in entries:
        for part in e["parts"]:
            if part["class"] != "right":
                failures.append({"check": e["check"], "derivative": part["derivative"], "class": part["class"],
                                 "message": part.get("message"), "max_rel_error": part.get("max_rel_error")})
    failures.sort(key=lambda f: SEVERITY.index(f["class"]))
    row["failures"] = failures[:MAX_FAILURES_KEPT]
    first = failures[0] if failures else None
    row["message"] = (f"{first['check']}, {first['derivative']}: {first['message']}"
                      if first and first["class"] == row["class"] else None)
    row["wall_s"] = time.perf_counter() - began
    return row


# =========================================================================== summary
def count(rows: list[dict]) -> dict[str, int]:
    return {c: sum(r["class"] == c for r in rows) for c in CLASSES}


def summarize(rows: list[dict]) -> dict[str, Any]:
    """Counts per class over every row and per file, the checks' counts, and the operations refused."""
    by_file = {}
    for source in (SYS, NUM, LIN, SCI):
        mine = [r for r in rows if r["source"] == source]
        if mine:
            by_file[source] = {"cases": len(mine), **count(mine)}
    checks = {c: sum(r["check_classes"].get(c, 0) for r in rows) for c in CLASSES}
    refusals = sorted({f["message"] for r in rows for f in r["failures"] if f["class"] == "refused" and f["message"]})
    return {"cases": len(rows), "counts": count(rows), "by_file": by_file,
            "checks": sum(r["checks"] for r in rows), "check_counts": checks,
            "right_fraction": (sum(r["class"] == "right" for r in rows) / len(rows)) if rows else None,
            "refusals": refusals}


def table_text(record: dict) -> str:
    """The counts per file and class, then every row that is not right."""
    results = record["results"]
    s = results["summary"]
    lines = ["| file | cases | " + " | ".join(CLASSES) + " |", "|---|---|" + "---|" * len(CLASSES)]
    for source, counts in s["by_file"].items():
        lines.append(f"| {source} | {counts['cases']} | " + " | ".join(str(counts[c]) for c in CLASSES) + " |")
    lines.append(f"| all | {s['cases']} | " + " | ".join(str(s["counts"][c]) for c in CLASSES) + " |")
    fraction = s["right_fraction"]
    lines.append("")
    lines.append(f"{s['counts']['right']} of {s['cases']} cases right"
                 + (f" ({100 * fraction:.1f} %)" if fraction is not None else "")
                 + f"; {s['checks']} checks: " + ", ".join(f"{c} {n}" for c, n in s["check_counts"].items()))
    rows = [r for r in results["rows"] if r["class"] != "right"]
    if rows:
        lines += ["", "| case | class | checks | message |", "|---|---|---|---|"]
        for r in sorted(rows, key=lambda r: (SEVERITY.index(r["class"]), r["name"])):
            classes = ", ".join(f"{c} {n}" for c, n in r["check_classes"].items())
            message = (r["message"] or "").replace("|", "\\|")
            lines.append(f"| {r['name']} | {r['class']} | {classes} | {message} |")
    return "\n".join(lines)


# =========================================================================== main
def select(names: list[str] | None, quick: bool) -> list[Case]:
    """The cases to run: ``--cases`` (a full name ``file.py::test`` or a test's name, every file's), the quick
    subset, or all."""
    if quick and not names:
        names = list(QUICK)
    if not names:
        return list(CASES)
    chosen = []
    for name in names:
        found = [c for c in CASES if name in (c.name, c.test) or c.test == f"test_{name}"]
        if not found:
            raise SystemExit(f"no case {name!r}; --list shows them")
        chosen += [c for c in found if c not in chosen]
    return chosen


def source_state() -> dict[str, Any]:
    """The commit and jacacc's changes (``outside.source_state``: read-only git, no index refresh)."""
    outside = sibling_script(HERE, "outside", "_autograd_suite")
    breadth = sibling_script(HERE, "tensor_breadth", "_autograd_suite")
    return outside.source_state(breadth)


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", metavar="NAME", default=None,
                        help="cases to run: file.py::test_name or test_name (default all)")
    parser.add_argument("--quick", action="store_true", help=f"the {len(QUICK)} cases of QUICK")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=CHECK_TIMEOUT_S, help="seconds per jacacc call")
    parser.add_argument("--out", default=os.path.join(ROOT, "results", f"{EXPERIMENT}.json"),
                        help="the record's path (default results/autograd_suite.json)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the suite, write the record, print the table.

    Returns 0: a wrong result, a refusal or a crash of jacacc is a row of the record, not raised.
    """
    args = parse_arguments(argv)
    if args.list:
        for case in CASES:
            print(case.name)
        return 0
    cases = select(args.cases, args.quick)
    params: dict[str, Any] = {
        "cases": [c.name for c in cases], "quick": args.quick, "seed": args.seed, "rtol": RTOL, "atol": ATOL,
        "fd_rtol": FD_RTOL, "fd_atol": FD_ATOL, "fd_step": FD_STEP, "dtype": "float64",
        "objective": "Σ_leaves Σ W ⊙ f(x), W ~ N(0, 1) fixed per check and output leaf",
        "jacacc": "jacacc.tensor.grad / hessian (default modes), on the arguments as autograd's test passes them",
        "reference": "jax.jit(jax.grad / jax.hessian) (jax_enable_x64) of the same objective written with jax.numpy / "
                     "jax.scipy, after JAX's value of f matched NumPy's; else five-point central differences of "
                     "the NumPy function",
        "criterion": "per gradient leaf and Hessian block: max |jacacc − ref| ≤ atol + rtol · max |ref|; where "
                     "jacacc differs from JAX but JAX differs from central differences by more than rtol too "
                     "(ill-conditioned), right if jacacc is within twice that spread of both",
        "cross_check_max": CROSS_CHECK_MAX,
        "classes": {"right": "agrees with the reference", "wrong": "numbers (or shape / nesting) differ",
                    "refused": "a jacacc.errors.JacaccError (its first line)",
                    "crash": "any other exception out of jacacc (type, message, innermost jacacc frame)",
                    "reference-missing": "jacacc gave numbers, no reference could be computed"},
        "row_class": "the worst class of the test's checks: " + " > ".join(SEVERITY),
        "skipped": SKIPPED, "check_timeout_s": args.timeout, "source": source_state(),
        "load_average_before": load_average(), "autograd": "HIPS/autograd tests at bff107b (master, 2025)",
    }
    import jax

    start = time.perf_counter()
    rows: list[dict] = []
    with jax.enable_x64(True):
        params["jax_enable_x64"] = bool(jax.config.jax_enable_x64)
        for i, case in enumerate(cases):
            row = run_case(case, args.seed, args.timeout)
            rows.append(row)
            print(f"[{i + 1}/{len(cases)}] {case.name:<58} {row['class']:<17} {row['checks']:>4} checks "
                  f"{row['wall_s']:6.1f} s  {row['message'] or ''}"[:300], file=sys.stderr, flush=True)
    params["wall_s"] = time.perf_counter() - start
    params["load_average_after"] = load_average()
    record = write_record(args.out, EXPERIMENT, {"summary": summarize(rows), "rows": rows}, parameters=params,
                          seed=args.seed)
    print(table_text(record))
    print(f"\n{len(rows)} cases in {params['wall_s']:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
