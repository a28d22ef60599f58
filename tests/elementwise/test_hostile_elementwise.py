"""Hostile input to jacacc.elementwise (issue 24): a correct result or one clear jacacc error.

* Non-real arrays (complex, strings, objects, dates, bytes, ragged lists) are refused by name at
  every entry point that takes arrays: NumPy would drop an imaginary part with a mere warning.
* Long sources: 2000-term sums and products parse, evaluate, derive, print and generate code for
  every backend (values against NumPy, gradients against central differences).
* Malformed ``define`` arguments and call keywords are refused naming the argument.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import jacacc.elementwise as ew
from jacacc import kernels
from jacacc.elementwise.parse import SourceError, parse, unparse
from jacacc.errors import DTypeError, JacaccError, SizeLimitError
from jacacc.kernels.ir import walk

RNG = np.random.default_rng(24)
A = RNG.uniform(-0.5, 0.5, 3)
B = RNG.uniform(-0.5, 0.5, 3)


def central_difference(f, arrays: dict[str, np.ndarray], name: str, df: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """∂(Σ df ⊙ f)/∂arrays[name] by central differences, element by element."""
    x = arrays[name]
    out = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[k] = eps
        plus = f(**{**arrays, name: x + step})
        minus = f(**{**arrays, name: x - step})
        out[k] = np.sum(df * (plus - minus)) / (2 * eps)
    return out


# ---------------------------------------------------------------------------- 1. non-real arrays

NON_REAL = {
    "complex": np.array([1 + 1j, 2.0, 3.0]),
    "complex list": [1 + 1j, 2.0, 3.0],
    "strings": np.array(["1", "2", "3"]),
    "a string entry": [1.0, "x", 2.0],
    "objects": np.array([1.0, None, 2.0], dtype=object),
    "dates": np.array(["2020-01-01", "2020-01-02", "2020-01-03"], dtype="datetime64[D]"),
    "bytes": np.array([b"a", b"b", b"c"]),
    "ragged": [[1.0], [1.0, 2.0], [3.0]],
}


def entry_points():
    """Each entry point that takes arrays, as ``call(bad)`` with ``bad`` passed for ``a`` (or ``df``)."""
    f = ew.define("f[i] = a[i]*a[i] + b[i]", {"i": 3}, backend="python")
    k = f.compile("numba")  # no kernel is compiled before the arrays are checked
    df = np.ones(3)
    return {
        "call": lambda bad: f(a=bad, b=B),
        "vjp": lambda bad: f.vjp(df, a=bad, b=B),
        "vjp cotangent": lambda bad: f.vjp(bad, a=A, b=B),
        "derivative": lambda bad: f.derivative("a")(df=df, a=bad, b=B),
        "derivative cotangent": lambda bad: f.derivative("a")(df=bad, a=A, b=B),
        "gather": lambda bad: f.gather("a", (3,))(df=df, a=bad, b=B),
        "adjoint_vjp": lambda bad: f.adjoint_vjp(df, a=bad, b=B),
        "compiled call": lambda bad: k(a=bad, b=B),
        "compiled vjp": lambda bad: k.vjp(df, a=bad, b=B),
        "compiled vjp cotangent": lambda bad: k.vjp(bad, a=A, b=B),
        "vjp_into": lambda bad: k.vjp_into({}, df, a=bad, b=B),
        "numba backend": lambda bad: ew.define("f[i] = a[i]*a[i]", {"i": 3})(a=bad),
    }


@pytest.mark.parametrize("entry", sorted(entry_points()))
@pytest.mark.parametrize("kind", sorted(NON_REAL))
def test_non_real_arrays_are_refused_naming_the_argument(entry, kind):
    name = "df" if "cotangent" in entry else "a"
    with pytest.raises(DTypeError, match=f"the argument '{name}' of [a-z]+ ") as info:
        entry_points()[entry](NON_REAL[kind])
    assert "\n" not in str(info.value)
    if kind.startswith("complex"):
        assert "complex" in str(info.value)


def test_complex_input_no_longer_drops_its_imaginary_part():
    # the example: [1+1j, 2]² came back as [1, 4] with only a ComplexWarning
    f = ew.define("f[i] = a[i]*a[i]", {"i": 2}, backend="python")
    with pytest.raises(DTypeError, match="complex"):
        f(a=np.array([1 + 1j, 2.0]))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float32, bool])
def test_real_dtypes_are_still_accepted(dtype):
    f = ew.define("f[i] = a[i]*a[i] + b[i]", {"i": 3}, backend="python")
    a = np.array([1, 0, 1], dtype=dtype)
    expected = a.astype(np.float64) ** 2 + B
    assert np.allclose(f(a=a, b=B), expected, rtol=1e-7)
    assert np.allclose(f.vjp(np.ones(3), a=a, b=B)["a"], 2 * a.astype(np.float64))


# ---------------------------------------------------------------------------- 2. long sources

def long_sum(n: int) -> tuple[str, callable, callable]:
    """``f[i] = Σ_k tanh(c_k·a[i] + b[i])·a[i] − a[i]*k/n``: the source, f and ∂f/∂a in NumPy."""
    coefficient = [(k % 7) / 7 for k in range(n)]
    terms = [f"tanh(a[i]*{coefficient[k]!r} + b[i])*a[i]" if k % 2 else f"a[i]*{k}/{n}" for k in range(n)]
    source = "f[i] = " + " - ".join(terms)

    def value(a, b):
        out = np.zeros_like(a)
        for k in range(n):
            term = np.tanh(a * coefficient[k] + b) * a if k % 2 else a * k / n
            out = out + term if k == 0 else out - term
        return out

    return source, value, coefficient


@pytest.mark.parametrize("n", [300, 2000])
def test_a_long_sum_defines_evaluates_derives_and_prints(n):
    source, value, _ = long_sum(n)
    f = ew.define(source, {"i": 3}, backend="python")
    # the tree is shallow: no walk over it comes near Python's recursion limit
    depth = {id(f.definition.body): 1}
    for node in walk(f.definition.body):
        for sub in (getattr(node, c, None) for c in ("operand", "left", "right", "base", "argument", "body")):
            if sub is not None:
                depth[id(sub)] = depth[id(node)] + 1
    assert max(depth.values()) < 64
    arrays = {"a": A, "b": B}
    assert np.allclose(f(**arrays), value(A, B), rtol=1e-12, atol=1e-12)
    df = RNG.standard_normal(3)
    gradient = f.vjp(df, **arrays)
    for name in ("a", "b"):
        assert np.allclose(gradient[name], central_difference(value, arrays, name, df), rtol=1e-6, atol=1e-6)
        # the printed derivative reads back and gives the same values
        derivative = f.derivative(name, (3,))
        # (its like terms read f's constant tables: jacacc.elementwise.terms)
        again = ew.define(str(derivative).replace(derivative.name, "g", 1), {f"d{name}0": 3}, backend="python")
        assert np.allclose(again(df=df, **arrays, **f.constants), gradient[name], rtol=1e-12, atol=1e-12)
    # the printed function reads back to the same values
    printed = unparse(f.definition)
    assert np.allclose(ew.define(printed, {"i": 3}, backend="python")(**arrays, **f.constants), value(A, B),
                       rtol=1e-12)


def test_a_long_product_and_its_derivative():
    n = 2000
    c = RNG.uniform(0.999, 1.001, n)
    source = "f[i] = x[i] * " + " * ".join(f"c[{k}]" for k in range(n))
    f = ew.define(source, {"i": 3}, backend="python")
    arrays = {"x": A, "c": c}
    assert np.allclose(f(**arrays), A * np.prod(c), rtol=1e-12)
    df = RNG.standard_normal(3)
    assert np.allclose(f.derivative("x")(df=df, **arrays), df * np.prod(c), rtol=1e-12)
    # every factor read from one argument (each derivative term a product of the 59 others)
    m = 60
    g = ew.define("g[i] = " + " * ".join(f"(1 + a[i]*{k / m!r})" for k in range(m)), {"i": 3}, backend="python")

    def reference(a):
        return np.prod([1 + a * k / m for k in range(m)], axis=0)

    assert np.allclose(g(a=A), reference(A), rtol=1e-12)
    assert np.allclose(g.vjp(df, a=A)["a"], central_difference(reference, {"a": A}, "a", df), rtol=1e-6)


@pytest.mark.parametrize("n", [300, 2000])
def test_long_sources_generate_python_and_cuda_code(n, tmp_path):
    source, value, _ = long_sum(n)
    f = ew.define(source, {"i": 3}, backend="python")
    k = f.compile("cupy")  # CUDA C++ for the function, its tape and its derivatives: no CuPy needed
    for name, text in k.sources.items():
        # no expression nests anywhere near Python's 200 parentheses: named intermediates instead
        for line in text.splitlines():
            level = deepest = 0
            for ch in line:
                level += 1 if ch == "(" else -1 if ch == ")" else 0
                deepest = max(deepest, level)
            assert deepest <= 50, name
    # the Python kernel (the Numba source, run by the interpreter) gives NumPy's values
    kernel = kernels.python_kernel(f.definition, f.kernel_arguments)
    out = np.empty(3)
    kernel(out, *(f.inputs({"a": A, "b": B})[name] for name in f.kernel_arguments))
    assert np.allclose(out, value(A, B), rtol=1e-12, atol=1e-12)
    if shutil.which("nvcc") is not None and n == 300:  # nvcc takes a while: the shorter source
        entries = kernels.cuda_ptx_many(list(k.sources.values()))
        assert all(len(found) == 1 for found in entries), list(k.sources)


def test_numba_compiles_a_300_term_sum():
    source, value, _ = long_sum(300)
    f = ew.define(source, {"i": 3}, backend="numba")
    assert np.allclose(f(a=A, b=B), value(A, B), rtol=1e-12, atol=1e-12)


def test_numba_compiles_a_2000_term_sum_and_its_derivatives():
    """Like terms become one sum over a table of their constants (jacacc.elementwise.terms): seconds,
    where the 2000-term expression took minutes to compile and its vjp gigabytes."""
    source, value, _ = long_sum(2000)
    f = ew.define(source, {"i": 3}, backend="numba")
    assert np.allclose(f(a=A, b=B), value(A, B), rtol=1e-12, atol=1e-12)
    df = RNG.standard_normal(3)
    reference = ew.define(source, {"i": 3}, backend="python").vjp(df, a=A, b=B)
    got = f.compile("numba").vjp(df, a=A, b=B)
    for name in ("a", "b"):
        assert np.allclose(got[name], reference[name], rtol=1e-12, atol=1e-12)


def test_nested_calls_and_signs():
    # tanh(tanh(…)) 20 deep: values and gradient against NumPy and central differences
    depth = 20
    inner = "a[i]"
    for _ in range(depth):
        inner = f"tanh({inner}*0.9 + b[i])"
    f = ew.define("f[i] = " + inner, {"i": 3}, backend="python")

    def reference(a, b):
        x = a
        for _ in range(depth):
            x = np.tanh(x * 0.9 + b)
        return x

    assert np.allclose(f(a=A, b=B), reference(A, B), rtol=1e-13)
    df = RNG.standard_normal(3)
    arrays = {"a": A, "b": B}
    for name, gradient in f.vjp(df, **arrays).items():
        assert np.allclose(gradient, central_difference(reference, arrays, name, df), rtol=1e-6, atol=1e-9)
    # 2001 minus signs: read with a loop, no deeper than one
    g = ew.define("g[i] = " + "-" * 2001 + "a[i] + " + "-" * 2000 + "b[i]", {"i": 3}, backend="python")
    assert np.array_equal(g(a=A, b=B), -A + B)
    assert unparse(g.definition) == "g[i] = -a[i] + b[i]"


def test_sources_beyond_pythons_parser_are_refused_in_one_line():
    # 1000 nested calls: Python's tokenizer stops at 200 parentheses
    with pytest.raises(SourceError, match="too many nested parentheses") as info:
        parse("f[i] = " + "tanh(" * 1000 + "a[i]" + ")" * 1000)
    assert "\n" not in str(info.value)
    # a chain far beyond 2000 operators: Python's parser itself runs out of recursion
    with pytest.raises(SizeLimitError, match="nests deeper than Python's parser can read") as info:
        parse("f[i] = " + " + ".join("a[i]" for _ in range(20_000)))
    assert "\n" not in str(info.value)


def test_long_index_expressions():
    # i + 1 - 1 + 1 … (2000 operators) and 1 * 1 * … * i: affine forms read with loops
    n = 1000
    f = ew.define("f[i] = x[i" + " + 1 - 1" * n + "] * x[" + "1 * " * n + "i]", {"i": 3}, backend="python")
    assert np.allclose(f(x=A), A * A)


# ---------------------------------------------------------------------------- 3. unchecked arguments

@pytest.mark.parametrize("sizes, message", [
    (None, "sizes must map each index of f to its extent, like \\{'i': 3\\}; got NoneType"),
    ([3], "sizes must map .* got list"),
    ("i", "sizes must map .* got str"),
    (3, "sizes must map .* got int"),
    ({}, "the index i has no extent"),
    ({"j": 3}, "the index i has no extent"),
    ({"i": -1}, "the extent of i \\(sizes\\['i'\\]\\) must be a positive integer, got -1"),
    ({"i": 0}, "must be a positive integer, got 0"),
    ({"i": 2.5}, "must be a positive integer, got 2.5"),
    ({"i": 3.0}, "must be a positive integer, got 3.0"),
    ({"i": "3"}, "must be a positive integer, got '3'"),
    ({"i": None}, "must be a positive integer, got None"),
    ({"i": True}, "must be a positive integer, got True"),
    ({"i": 3, "k": 2}, "sizes names \\['k'\\], which are not indices of f"),
    ({"i": 3, 1: 2, "k": 2}, "sizes names \\[1, 'k'\\]"),
])
def test_define_refuses_bad_sizes_naming_them(sizes, message):
    with pytest.raises(SourceError, match=message) as info:
        ew.define("f[i] = a[i]*a[i]", sizes)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("backend", [None, ["python"], "fortran"])
def test_define_refuses_unknown_backends(backend):
    with pytest.raises(JacaccError, match="unknown backend"):
        ew.define("f[i] = a[i]", {"i": 3}, backend=backend)


def test_missing_arrays_are_refused_by_name_and_extra_ones_pass_unchecked():
    f = ew.define("f[i] = a[i]*a[i] + b[i]", {"i": 3}, backend="python")
    k = f.compile("numba")
    for call in (f, k):
        with pytest.raises(SourceError, match="no array given for the argument 'b' of f"):
            call(a=A)
        with pytest.raises(SourceError, match="no array given for the argument 'b' of f"):
            call.vjp(np.ones(3), a=A)
    # one dict of inputs feeds a function, its tape and its derivatives, each reading what it needs
    # (the project's contract: tests/elementwise/test_elementwise_properties.py passes an extra array to vjp);
    # what it does not read is not checked, not even for its dtype
    assert np.allclose(f(a=A, b=B, df=np.ones(3), note=np.array(["x"])), A * A + B)
    assert np.allclose(f.derivative("b")(df=np.full(3, 2.0), a=A, b=B), 2.0)


def test_derivative_arguments_are_checked():
    f = ew.define("f[i] = a[i]*a[i]", {"i": 3}, backend="python")
    with pytest.raises(SourceError, match="f does not read 'c'"):
        f.derivative("c")
    with pytest.raises(SourceError, match="the argument must be the name of an array f reads, got list"):
        f.derivative(["a"])
    with pytest.raises(SourceError, match="the shape of a must be a tuple of non-negative integers, got 'ab'"):
        f.derivative("a", "ab")
    with pytest.raises(SourceError, match="a is read with 1 index, the shape given has 2"):
        f.derivative("a", (3, 3))
