"""Hostile input for ``jacacc.iverson`` (issue 24): non-real dtypes, very long sums, very deep programs.

Every check compares with an independent reference — a plain Python loop, central finite
differences, the interpreter, the static cost model — never with numbers written down here.
"""

from __future__ import annotations

import math
import re
import tracemalloc
import warnings

import numpy as np
import pytest

import jacacc.iverson as iv
from jacacc.errors import DTypeError, JacaccError
from jacacc.iverson.arrays import array_function

DEPTH = 1000  # steps of the deep programs: past Python's default recursion limit with room to spare


# ----------------------------------------------------------------------------- 1 and 4: dtypes


def _product_program():
    x, w = iv.var("x", (3,)), iv.var("w", (3,))
    i = iv.index("i")
    return iv.sum(i, 3, x[i] * w[i]), x, w


NON_REAL = {
    "complex": np.array([1 + 2j, 3.0, 4.0]),
    "str": np.array(["a", "b", "c"]),
    "mixed str": ["a", 1.0, 2.0],
    "object": np.array([1.0, None, 2.0], dtype=object),
    "datetime": np.array(["2024-01-01", "2024-01-02", "2024-01-03"], dtype="datetime64[D]"),
    "timedelta": np.array([1, 2, 3], dtype="timedelta64[s]"),
    "bytes": np.array([b"a", b"b", b"c"]),
}


def _entry_points():
    """Every way to run a program on arrays, as ``name -> callable(**arrays)``."""
    e, x, _ = _product_program()
    g = iv.grad(e, x)
    dx = iv.var("dx", (3,))
    return {
        "evaluate": lambda **a: iv.evaluate(e, **a),
        "count_operations": lambda **a: iv.count_operations(e, **a),
        "compile numpy": lambda **a: iv.compile(e, "numpy")(**a),
        "compile loops": lambda **a: iv.compile(e, "loops")(**a),
        "grad evaluate": lambda **a: iv.evaluate(g, **a),
        "grad compiled": lambda **a: iv.compile(g, "numpy")(**a),
        "forward evaluate": lambda **a: iv.evaluate(iv.forward(e, x, dx), dx=np.ones(3), **a),
        "array_function": lambda **a: array_function(e, "numpy")(**a),
    }


@pytest.mark.parametrize("entry", sorted(_entry_points()))
@pytest.mark.parametrize("kind", sorted(NON_REAL))
def test_non_real_input_is_refused_by_name(entry, kind):
    run = _entry_points()[entry]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning on the way to the error
        with pytest.raises(DTypeError, match=r"'w'") as info:
            run(x=np.ones(3), w=NON_REAL[kind])
    assert isinstance(info.value, TypeError) and "\n" not in str(info.value)


def test_complex_input_does_not_lose_its_imaginary_part():
    e, _, _ = _product_program()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DTypeError, match=r"'x'.*complex"):
            iv.evaluate(e, x=np.ones(3) * (1 + 1j), w=np.ones(3))


@pytest.mark.parametrize("entry", sorted(_entry_points()))
def test_booleans_and_integers_compute_as_floats(entry):
    run = _entry_points()[entry]
    expected = run(x=np.array([1.0, 0.0, 1.0]), w=np.array([2.0, 3.0, 4.0]))
    got = run(x=np.array([True, False, True]), w=np.array([2, 3, 4], dtype=np.int8))
    assert np.array_equal(np.asarray(got), np.asarray(expected))


@pytest.mark.parametrize("value", ["a", "1.5", 1j, np.complex128(2 + 0j), np.array(3j), None, [1.0], object()])
def test_const_refuses_non_real_values_by_name(value):
    with pytest.raises(DTypeError) as info:
        iv.const(value)
    assert isinstance(info.value, TypeError) and isinstance(info.value, JacaccError)
    assert repr(value)[:10] in str(info.value)


@pytest.mark.parametrize("value", [1j, np.complex64(1), np.array(2j), "a"])
def test_arithmetic_with_non_real_numbers_is_refused(value):
    x = iv.var("x", (2,))
    for build in (lambda: x[0] * value, lambda: value + x[0], lambda: x[0] / value, lambda: x[0] > value):
        with pytest.raises(JacaccError) as info:
            build()
        assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("value", [2, 2.5, np.float32(0.25), np.int64(-3), np.array(1.5), True])
def test_const_keeps_real_numbers(value):
    assert iv.evaluate(iv.const(value)) == float(value)


@pytest.mark.parametrize("shape", [(2.5,), ("a",), (1j,), (None,)])
def test_var_refuses_non_integer_extents(shape):
    with pytest.raises(iv.IvTypeError, match="shape"):
        iv.var("x", shape)


# ----------------------------------------------------------------------------- 2: long sums


def _peak(run):
    tracemalloc.start()
    try:
        value = run()
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_sum_of_10_to_the_8_terms_in_bounded_memory():
    x = iv.var("x", (1,))
    i = iv.index("i")
    n = 10**8
    value, peak = _peak(lambda: iv.evaluate(iv.sum(i, n, x[0]), x=np.ones(1)))
    assert value == float(n)
    assert peak < 4 * 2**20  # materializing the indices took gigabytes


def test_long_index_dependent_sum_in_bounded_memory():
    x = iv.var("x", (1,))
    i = iv.index("i")
    n = 100_000
    program = iv.sum(i, n, iv.bracket(i >= 1) * x[0])  # reads i: evaluated point by point
    value, peak = _peak(lambda: iv.evaluate(program, x=np.full(1, 0.1)))
    reference = 0.0
    for k in range(n):
        if k >= 1:
            reference += 0.1
    assert value == reference
    assert peak < 2**20  # the old interpreter held all n indices (several MiB)


@pytest.mark.parametrize("n", [1, 7, 100_000, 3 * 2**16 + 5])
def test_index_free_sum_keeps_the_sequential_float_sum(n):
    x = iv.var("x", (1,))
    i, j = iv.index("i"), iv.index("j")
    reference = 0.0
    for _ in range(n):  # the interpreter's semantics: left to right, one addition per term
        reference += 0.1
    assert iv.evaluate(iv.sum(i, n, x[0]), x=np.full(1, 0.1)) == reference
    assert iv.evaluate(iv.sum(i, n, iv.sum(j, 1, x[0])), x=np.full(1, 0.1)) == reference
    twice = 0.0
    for _ in range(2 * n):  # directly nested sums are one sequence of 2n terms
        twice += 0.1
    assert iv.evaluate(iv.sum(i, 2, iv.sum(j, n, x[0])), x=np.full(1, 0.1)) == twice


@pytest.mark.parametrize("n", [1, 5, 1000, 10**7])
def test_index_free_sum_counts_as_the_cost_model(n):
    x = iv.var("x", (2,))
    i, j = iv.index("i"), iv.index("j")
    for program in (iv.sum(i, n, x[0] * x[1]), iv.sum(i, n, iv.sum(j, 3, iv.exp(x[0]) + x[1])),
                    iv.sum(i, n, iv.bracket(x[0] > 0.0) * iv.tanh(x[1]))):
        assert iv.count_operations(program, x=np.array([0.5, 0.25])) == iv.cost(program)


def test_index_free_sum_matches_point_by_point_evaluation():
    """The same sums with a bracket that is always true but reads the index (no shortcut)."""
    x = iv.var("x", (2,))
    i, j = iv.index("i"), iv.index("j")
    X = np.array([0.3, -0.7])
    bodies = [x[0], iv.tanh(x[0]) * x[1], iv.bracket(x[1] > 0.0) * x[0], iv.bracket(x[1] < 0.0) * x[0]]
    for body in bodies:
        for n in (1, 3, 1000):
            free = iv.sum(i, n, iv.sum(j, 2, body))
            pinned = iv.sum(i, n, iv.sum(j, 2, iv.bracket(i >= 0) * body))
            assert iv.evaluate(free, x=X) == iv.evaluate(pinned, x=X)
            assert iv.count_operations(free, x=X) == iv.count_operations(pinned, x=X)


# ----------------------------------------------------------------------------- 3: deep programs


def _deep(depth: int = DEPTH):
    x = iv.var("x", (2,))
    e = x[0]
    for _ in range(depth):
        e = iv.tanh(e) + x[1]
    return e, x


def _reference(v: np.ndarray, depth: int = DEPTH) -> float:
    out = v[0]
    for _ in range(depth):
        out = math.tanh(out) + v[1]
    return out


X = np.array([0.3, -0.2])


def _finite_differences(f, v: np.ndarray, h: float = 1e-6) -> np.ndarray:
    out = np.zeros_like(v)
    for k in range(len(v)):
        step = np.zeros_like(v)
        step[k] = h
        out[k] = (f(v + step) - f(v - step)) / (2 * h)
    return out


def test_deep_program_evaluates_prints_and_costs():
    e, _ = _deep()
    assert iv.evaluate(e, x=X) == pytest.approx(_reference(X), rel=1e-12)
    text = str(e)
    assert text.count("tanh(") == DEPTH and text.count("x[1]") == DEPTH
    assert iv.cost(e) == iv.count_operations(e, x=X)
    assert iv.same(e, _deep()[0]) and not iv.same(e, _deep(DEPTH - 1)[0])


def test_deep_program_normal_forms_keep_its_value():
    e, _ = _deep()
    expected = iv.evaluate(e, x=X)
    for transform in (iv.simplify, iv.normalize, iv.let_lift, iv.pair_eliminate, iv.gen_pushout, iv.tensor_ssa):
        out = transform(e)
        assert iv.evaluate(out, x=X) == pytest.approx(expected, rel=1e-12), transform.__name__
        str(out)
        iv.cost(out)


@pytest.mark.exhaustive  # make test checks the compiled deep gradient against finite differences below
def test_deep_program_gradient_matches_finite_differences():
    e, x = _deep()
    g = iv.grad(e, x)
    got = iv.evaluate(g, x=X)
    assert np.allclose(got, _finite_differences(_reference, X), rtol=1e-6, atol=1e-8)
    # the other transforms agree with it: ⟨grad, v⟩ = forward(v), adjoint(1) = grad
    v = iv.var("v", (2,))
    direction = np.array([0.7, -1.3])
    assert iv.evaluate(iv.forward(e, x, v), x=X, v=direction) == pytest.approx(got @ direction, rel=1e-9)
    ct = iv.var("ct", ())
    assert np.allclose(iv.evaluate(iv.adjoint(e, x, ct), x=X, ct=2.0), 2 * got, rtol=1e-12)
    assert iv.cost(g)["nonlinear"] <= 4 * iv.cost(e)["nonlinear"]  # cheap gradient, deep or not
    str(g)


def test_deep_gradient_compiles_with_numpy():
    e, x = _deep()
    g = iv.grad(e, x)
    compiled = iv.compile(g, "numpy")(x=X)
    assert np.allclose(compiled, iv.evaluate(g, x=X), rtol=1e-12)
    assert np.allclose(compiled, _finite_differences(_reference, X), rtol=1e-6, atol=1e-8)


def _paren_depth(source: str) -> int:
    deepest = depth = 0
    for ch in source:
        depth += ch in "([{"
        depth -= ch in ")]}"
        deepest = max(deepest, depth)
    return deepest


@pytest.mark.parametrize("backend, depth", [
    ("numpy", DEPTH), ("loops", DEPTH),
    ("numba", 100),  # 100 deep already failed ("too many nested parentheses")
    pytest.param("numba", DEPTH, marks=pytest.mark.slow),  # Numba compiles 1000 steps in ~45 s
])
def test_deep_program_compiles(backend, depth):
    if backend == "numba":
        pytest.importorskip("numba")
    e, _ = _deep(depth)
    f = iv.compile(e, backend)
    assert f(x=X) == pytest.approx(iv.evaluate(e, x=X), rel=1e-12)
    assert f(x=X) == pytest.approx(_reference(X, depth), rel=1e-12)
    assert _paren_depth(f.source) < 64  # intermediates are named, not nested (the parser stops at 200)


@pytest.mark.exhaustive  # make test: the deep program's gradient, evaluation and compiles above
def test_deep_let_chain_and_long_addition_under_a_gen():
    x = iv.var("x", (3,))
    i = iv.index("i")
    body = x[i]
    for k in range(DEPTH):  # a left-nested addition 1000 terms long, inside a ⊞
        body = body + (k % 3 + 1) * x[i]
    tensor = iv.gen(i, 3, body)
    e = x[0]
    for k in range(DEPTH):  # a let chain 1000 deep
        e = iv.let(f"y{k}", iv.sin(e), lambda y: y * 0.5 + x[1])
    program = iv.sum(i, 3, tensor[i] * x[i]) + e
    v = np.array([0.4, -0.3, 0.2])

    def reference(w: np.ndarray) -> float:
        scale = 1 + sum(k % 3 + 1 for k in range(DEPTH))
        out = w[0]
        for _ in range(DEPTH):
            out = math.sin(out) * 0.5 + w[1]
        return float(scale * (w @ w)) + out

    assert iv.evaluate(program, x=v) == pytest.approx(reference(v), rel=1e-12)
    assert np.allclose(iv.evaluate(iv.grad(program, x), x=v), _finite_differences(reference, v), rtol=1e-6)
    assert iv.compile(program, "numpy")(x=v) == pytest.approx(reference(v), rel=1e-12)
    assert re.search(r"let y\d+ = sin", str(program))
    assert iv.evaluate(iv.simplify(program), x=v) == pytest.approx(reference(v), rel=1e-12)
