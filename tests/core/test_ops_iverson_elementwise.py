"""The operation table (jacacc.ops) through the Iverson language and elementwise definitions.

Every unary operation of the table that a language accepts is differentiated by
that language — Iverson's ``grad`` and ``forward``, the elementwise gather-form
derivative — and checked against central differences at points inside its
domain; the operations a language leaves out are exactly those it says it
leaves out.  The spellings the languages take from the table are checked by
running one program that calls every function through each code generator
(Iverson's Numba, loop and NumPy code, its JAX and PyTorch translations, the
elementwise Python, Numba and CUDA kernels) against the reference evaluators.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import jacacc.iverson as iv
from jacacc import ops
from jacacc.elementwise import define, parse
from jacacc.elementwise.derive import POINTWISE_FUNCTIONS
from jacacc.elementwise.parse import FUNCTIONS as ELEMENTWISE_FUNCTIONS
from jacacc.elementwise.parse import LEFT_OUT as ELEMENTWISE_LEFT_OUT
from jacacc.elementwise.parse import SourceError
from jacacc.iverson import syntax
from jacacc.iverson.arrays import array_function
from jacacc.iverson.derive import derivative_of_function
from jacacc.kernels import cuda_ptx, cuda_source, host_kernel, numba_kernel

UNARY = ops.names(arity=1)
#: points inside each operation's domain, away from its kinks (default: DEFAULT_POINTS)
DEFAULT_POINTS = np.array([-0.7, -0.2, 0.3, 0.9])
POINTS = {
    "log": np.array([0.2, 0.6, 1.3, 2.1]), "log2": np.array([0.2, 0.6, 1.3, 2.1]),
    "log10": np.array([0.2, 0.6, 1.3, 2.1]), "sqrt": np.array([0.2, 0.6, 1.3, 2.1]),
    "arccosh": np.array([1.2, 1.7, 2.5, 3.1]),
}
STEP = 1e-6


def points(name: str) -> np.ndarray:
    return POINTS.get(name, DEFAULT_POINTS)


def iverson_name(name: str) -> str:
    return syntax.IVERSON_NAMES.get(name, name)


def central_differences(f, x: np.ndarray) -> np.ndarray:
    """The gradient of the scalar ``f`` at ``x`` by central differences."""
    eye = np.eye(x.size)
    return np.array([(f(x + STEP * e) - f(x - STEP * e)) / (2 * STEP) for e in eye])


# ----------------------------------------------------------------------------- which operations


def test_each_language_takes_every_unary_operation_but_those_it_leaves_out():
    assert {syntax.operation_name(n) for n in syntax.FUNCTIONS} == set(UNARY) - set(syntax.LEFT_OUT)
    assert set(ELEMENTWISE_FUNCTIONS) == set(UNARY) - set(ELEMENTWISE_LEFT_OUT)
    assert set(syntax.LEFT_OUT) <= set(UNARY) and set(ELEMENTWISE_LEFT_OUT) <= set(UNARY)


def test_the_pointwise_functions_are_defined_on_all_reals():
    assert {ops.get(n).domain for n in POINTWISE_FUNCTIONS} == {"all reals"}


def test_names_of_the_table_that_are_not_the_languages_are_refused_naming_why():
    x = iv.var("x", (2,))
    with pytest.raises(iv.IvTypeError, match="'reciprocal' is called 'recip'"):
        syntax.Func("reciprocal", x[0])
    with pytest.raises(iv.IvTypeError, match="the language's own -x"):
        iv.func("negative", x[0])
    with pytest.raises(iv.IvTypeError, match="takes 2 operands"):
        iv.func("maximum", x[0])
    with pytest.raises(iv.IvTypeError, match="unknown function 'foo'"):
        iv.func("foo", x[0])
    assert str(iv.func("reciprocal", x[0])) == str(iv.recip(x[0])) == "1 / x[0]"
    assert str(iv.func("expit", x[0])) == "logistic(x[0])"
    with pytest.raises(SourceError, match="absolute is called abs"):
        parse("f[i] = absolute(x[i])")
    with pytest.raises(SourceError, match="stop_gradient is not a function"):
        parse("f[i] = stop_gradient(x[i])")
    with pytest.raises(SourceError, match="hypot takes 2 operands"):
        parse("f[i] = hypot(x[i])")


def test_piecewise_constant_functions_pass_no_derivative():
    x = iv.var("x", (3,))
    i = iv.index("i")
    assert derivative_of_function("sign", x[0], None) is ops.ZERO
    g = iv.grad(iv.sum(i, 3, iv.func("sign", x[i]) + iv.func("heaviside", x[i]) * x[i]), x)
    np.testing.assert_array_equal(iv.evaluate(g, x=np.array([-1.0, 0.5, 2.0])), [0.0, 1.0, 1.0])
    f = define("f[i] = sign(x[i]) * heaviside(x[i])", {"i": 3}, backend="python")
    assert str(f.derivative("x")) == "dx[dx0] = 0"


# ----------------------------------------------------------------------------- derivatives


@pytest.mark.parametrize("name", UNARY)
def test_iverson_derivatives_of_every_operation_match_central_differences(name):
    if iverson_name(name) not in syntax.FUNCTIONS:
        assert name in syntax.LEFT_OUT
        return
    n = len(points(name))
    x, u = iv.var("x", (n,)), iv.var("u", (n,))
    i = iv.index("i")
    weights = np.linspace(0.5, 1.5, n)
    # a weight per element, so that each partial is seen on its own
    program = iv.sum(i, n, iv.func(name, x[i]) * iv.var("w", (n,))[i])
    at = points(name)
    expected = central_differences(lambda v: iv.evaluate(program, x=v, w=weights), at)
    gradient = iv.evaluate(iv.grad(program, x), x=at, w=weights)
    np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-8)
    direction = np.linspace(-1.0, 1.0, n)
    tangent = iv.evaluate(iv.forward(program, x, u), x=at, w=weights, u=direction)
    np.testing.assert_allclose(tangent, expected @ direction, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", UNARY)
def test_elementwise_derivatives_of_every_operation_match_central_differences(name):
    if name not in ELEMENTWISE_FUNCTIONS:
        assert name in ELEMENTWISE_LEFT_OUT
        return
    n = len(points(name))
    f = define(f"f[i] = {name}(x[i]) * w[i]", {"i": n}, backend="python")
    weights = np.linspace(0.5, 1.5, n)
    at = points(name)
    expected = central_differences(lambda v: f(x=v, w=weights).sum(), at)
    gradient = f.vjp(np.ones(n), x=at, w=weights)["x"]
    np.testing.assert_allclose(gradient, expected, rtol=1e-6, atol=1e-8)


def test_derivatives_read_as_before():
    """The classic functions' derivatives print as they did before the table wrote them."""
    x = iv.var("x", (2,))
    texts = {name: str(derivative_of_function(name, x[0], x[1]))
             for name in ("exp", "log", "sin", "cos", "sqrt", "tanh", "relu", "recip")}
    assert texts == {"exp": "x[1]", "log": "1 / x[0]", "sin": "cos(x[0])", "cos": "-sin(x[0])",
                     "sqrt": "0.5 / x[1]", "tanh": "1 - x[1] · x[1]", "relu": "[x[0] > 0]",
                     "recip": "-(x[1] · x[1])"}
    f = define("f[i] = tanh(x[i]) + sqrt(x[i]) + cos(x[i]) + log(x[i]) + x[i]**3", {"i": 2}, backend="python")
    assert str(f.derivative("x")) == ("dx[dx0] = [dx0 <= 1] * (df[dx0] * (1 - tanh(x[dx0])**2)) + [dx0 <= 1] * "
                                      "(df[dx0] * (0.5 / sqrt(x[dx0]))) + [dx0 <= 1] * (-df[dx0] * sin(x[dx0])) + "
                                      "[dx0 <= 1] * (df[dx0] * (1 / x[dx0])) + [dx0 <= 1] * (3 * df[dx0] * x[dx0]**2)")


# ----------------------------------------------------------------------------- spellings


def _argument(name: str, value):
    """``value`` (in (0.1, 0.6)) moved into the domain of ``name``."""
    return value + 1.5 if name == "arccosh" else value


def _iverson_program(names):
    n = 4
    x = iv.var("x", (n,))
    i = iv.index("i")
    body = None
    for k, name in enumerate(names):
        term = iv.func(name, _argument(name, x[i] * 1.0)) * (1.0 + 0.1 * k)
        body = term if body is None else body + term
    return iv.sum(i, n, body), x


X = np.array([0.15, 0.3, 0.45, 0.58])


@pytest.mark.parametrize("backend", ["numba", "loops", "numpy"])
def test_iverson_code_generators_spell_every_function(backend):
    if backend == "numba":
        pytest.importorskip("numba")
    program, x = _iverson_program(sorted(syntax.FUNCTIONS))
    gradient = iv.grad(program, x)
    assert np.isclose(iv.compile(program, backend=backend)(x=X), iv.evaluate(program, x=X), rtol=1e-13)
    np.testing.assert_allclose(iv.compile(gradient, backend=backend)(x=X), iv.evaluate(gradient, x=X), rtol=1e-13)


@pytest.mark.parametrize("library", ["numpy", "jax", "torch"])
def test_iverson_array_libraries_spell_the_functions_the_table_spells_for_them(library):
    pytest.importorskip(library)
    spelled = {"numpy": lambda op: op.numpy, "jax": lambda op: op.jnp, "torch": lambda op: op.torch}[library]
    names = sorted(n for n in syntax.FUNCTIONS if spelled(ops.get(syntax.operation_name(n))))
    assert {"exp", "log", "sin", "cos", "sqrt", "tanh", "relu", "recip"} <= set(names)
    program, _ = _iverson_program(names)
    value = array_function(program, library)(x=X)
    assert np.isclose(float(value), iv.evaluate(program, x=X), rtol=1e-5)  # JAX computes in float32
    missing = sorted(set(syntax.FUNCTIONS) - set(names))
    if missing:
        with pytest.raises(iv.IvTypeError, match=f"{library} has no spelling of the function {missing[0]}"):
            array_function(_iverson_program(missing[:1])[0], library)(x=X)


def _elementwise_source() -> str:
    """``f[i] = x[i] · Σ_k c_k·f_k(x[i + 1])`` over every function of the language."""
    terms = [f"{1.0 + 0.1 * k} * {name}(x[i + 1]{' + 1.5' if name == 'arccosh' else ''})"
             for k, name in enumerate(ELEMENTWISE_FUNCTIONS)]
    return f"f[i] = x[i] * ({' + '.join(terms)})"


def test_elementwise_numba_kernels_spell_every_function():
    pytest.importorskip("numba")
    f = define(_elementwise_source(), {"i": 3}, backend="python")
    kernel = numba_kernel(f.definition, ["x"], parallel=False)  # one thread: a quicker compilation
    out = np.full(3, np.nan)
    kernel(out, X)
    np.testing.assert_allclose(out, f(x=X), rtol=1e-13)


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("nvcc") is None, reason="no C++ compiler")
def test_elementwise_cuda_kernels_spell_every_function(tmp_path):
    f = define(_elementwise_source(), {"i": 3}, backend="python")
    source = cuda_source(f.definition, ["x"], {"x": 1})
    if shutil.which("nvcc") is not None:
        assert ".entry" in cuda_ptx(source)
    if shutil.which("g++") is None:
        return
    out = np.full(3, np.nan)
    host_kernel(source, 1, 2, tmp_path)(out, X)  # run thread by thread on the host (g++)
    np.testing.assert_allclose(out, f(x=X), rtol=1e-13)
