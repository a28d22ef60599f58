"""Integer arrays computed from traced values, and indexing with them (jacacc.tensor.dynamic_index).

Each case is a function ``f(x, xp)`` written once for NumPy and ``jax.numpy`` whose indices come from
its own argument (floor, astype(int), integer arithmetic) and whose indexed arrays are traced: the
value must equal NumPy's, and the gradient and Hessian of ``Σ w·sin(f(x))`` must match JAX's in
forward, reverse and cross-country mode.  Indices stay in range (JAX clamps out-of-range gathers;
NumPy and jacacc raise).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import jacacc.tensor as jt
from jacacc.errors import UnsupportedOperationError
from jacacc.tensor.trace import trace

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
pytestmark = pytest.mark.usefixtures("float64_jax")

MODES = ("forward", "reverse", "cross_country")
x10 = np.array([0.3, 2.7, 1.1, 4.6, -0.8, 1.9, 0.45, -1.3, 2.2, 0.6])


def _cells(x, xp, n):
    """Integer cells in [0, n) made from x: floor, astype(int), clip."""
    return xp.clip(xp.floor(xp.abs(x) * 1.7).astype(int), 0, n - 1)


CASES = {
    # a 1-D table lookup with linear interpolation, the table traced too
    "interpolation": lambda x, xp: (lambda c, t: (1 - (x[:4] - c)) * t[c] + (x[:4] - c) * t[c + 1])(
        _cells(x[:4], xp, 5), xp.sin(x[4:])),
    # two index arrays on adjacent leading axes, repeated cells
    "two axes": lambda x, xp: xp.exp(x).reshape(2, 5)[_cells(x[:6], xp, 2), _cells(x[3:9], xp, 5)],
    # a slice, then an index array in place (NumPy keeps the indexed axis where it was)
    "slice then index": lambda x, xp: (x * x).reshape(2, 5)[:, _cells(x[1:4], xp, 5)],
    "index then slice": lambda x, xp: xp.tanh(x).reshape(5, 2)[_cells(x[:3], xp, 5), 1:],
    "offset slice": lambda x, xp: xp.cos(x).reshape(5, 2)[1:, _cells(x[:3], xp, 2)],
    # index arrays apart: their axes go in front (NumPy's rule)
    "separated axes": lambda x, xp: xp.concatenate([x, x ** 2, x[:4]]).reshape(2, 3, 4)[
        _cells(x[:2], xp, 2), :, _cells(x[5:7], xp, 4)],
    # a constant integer array and an int beside a traced one
    "with constants": lambda x, xp: xp.sin(x).reshape(2, 5)[np.array([1, 0, 1]), _cells(x[:3], xp, 5)]
    + xp.sin(x).reshape(2, 5)[1, _cells(x[2:5], xp, 5)],
    # integer arithmetic keeps integers: + - * // % abs minimum, negative indices wrap
    "integer arithmetic": lambda x, xp: (lambda c, t: t[(c + 3) % 10] * t[c // 2] + t[xp.minimum(c * 2, 9)]
                                         + t[xp.abs(c - 4)] + t[c - 10])(_cells(x[:4], xp, 6), x * x),
    # four corners of one table (their pullbacks' scatters one scatter: combined_scatters)
    "four corners": lambda x, xp: (lambda f, i, j: f[i, j] * x[6:9] + f[(i + 1) % 2, j] + f[i, (j + 1) % 5]
                                   * f[(i + 1) % 2, (j + 1) % 5])(
        (x * x).reshape(2, 5), _cells(x[:3], xp, 2), _cells(x[3:6], xp, 5)),
    # a bool cast is a mask
    "bool cast": lambda x, xp: xp.where((x - 0.5).astype(bool), x ** 3, 2 * x) + x.astype(np.int32),
    # integers NumPy computes from the values: argmax, argmin (axes, keepdims), argsort
    "argmax": lambda x, xp: x[xp.argmax(x)] * x + x.reshape(2, 5)[0, xp.argmin(x[5:])],
    "argmin along an axis": lambda x, xp: xp.take_along_axis(
        xp.sin(x).reshape(2, 5), xp.argmin(x.reshape(2, 5), axis=1, keepdims=True), axis=1),
    "sort by argsort": lambda x, xp: xp.take_along_axis(x.reshape(2, 5) ** 2, xp.argsort(x.reshape(2, 5), axis=1),
                                                        axis=1) * xp.arange(10.0).reshape(2, 5),
    # a list of ints and computed integers is an index array, as NumPy makes one
    "list of computed indices": lambda x, xp: xp.cos(x).reshape(2, 5)[[xp.argmax(x[:4]) % 2, 1],
                                                                      [0, xp.argmin(x[5:])]],
    "take": lambda x, xp: xp.take(xp.exp(x).reshape(5, 2), xp.argsort(x)[:4] // 2, axis=0)
    + xp.take(x, x.argmax()) + x.take(xp.argsort(x)[::3]).sum(),
}


def _reference(s, x):
    g = functools.partial(s, xp=jnp)
    grad, hess = jax.jit(lambda v: (jax.grad(g)(v), jax.hessian(g)(v)))(jnp.asarray(x))
    return np.asarray(grad), np.asarray(hess)


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy_and_jax_in_every_mode(name):
    f = CASES[name]
    expected = f(x10, np)
    value = np.asarray(jt.vjp(functools.partial(f, xp=np), x10)[0])
    np.testing.assert_allclose(value, expected, rtol=1e-14, atol=1e-300)
    w = np.linspace(0.5, 1.5, expected.size).reshape(expected.shape)

    def s(x, xp=np):
        return xp.sum(w * xp.sin(f(x, xp)))

    grad, hess = _reference(s, x10)
    for mode in MODES:
        np.testing.assert_allclose(jt.grad(s, mode=mode)(x10), grad, rtol=1e-10, atol=1e-12, err_msg=mode)
        np.testing.assert_allclose(jt.hessian(s, mode=mode)(x10), hess, rtol=1e-10, atol=1e-12, err_msg=mode)


def test_integer_arrays_report_numpy_types():
    seen = {}

    def f(x):
        i = x.astype(np.int32)
        seen.update(i=i.dtype, plus=(i + 1).dtype, wide=(i + np.int64(2)).dtype, times=(i * 1.5).dtype,
                    quotient=(i / 2).dtype, floor=(i // 2).dtype, back=i.astype(float).dtype, mask=(x > 0).dtype,
                    moved=[i[1:].dtype, i.reshape(3, 1).T.dtype, np.concatenate([i, i]).dtype, np.flip(i).dtype],
                    mixed=np.concatenate([i, x]).dtype, order=np.argsort(x).dtype, best=np.argmax(x).dtype)
        return np.sum(x)

    trace(f, [np.ones(3)])
    assert seen["i"] == np.int32 and seen["plus"] == np.int32 and seen["floor"] == np.int32
    assert seen["wide"] == np.int64
    assert seen["times"] == seen["quotient"] == seen["back"] == seen["mixed"] == np.float64
    assert seen["moved"] == [np.int32] * 4 and seen["order"] == seen["best"] == np.intp


def test_a_repeated_index_accumulates_its_cotangents():
    def f(t, x):
        return np.sum(t[np.floor(x).astype(int)] * x)

    t, x = np.arange(4.0), np.array([1.2, 1.7, 3.1, 1.5])
    np.testing.assert_array_equal(jt.grad(f)(t, x), [0.0, 1.2 + 1.7 + 1.5, 0.0, 3.1])


def test_an_index_out_of_range_raises_as_numpy_does():
    g = jt.grad(lambda t, x: np.sum(t[np.floor(x).astype(int)]))
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 0 with size 4"):
        g(np.arange(4.0), np.array([1.0, 7.5]))


def test_a_numpy_array_taken_along_computed_indices_is_a_constant():
    table = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])

    def f(x):
        order = np.argsort(x, axis=1)
        return np.sum(np.take_along_axis(table, order, axis=1) * x)

    x = np.array([[0.5, -1.0, 2.0], [3.0, 1.0, 0.0]])
    np.testing.assert_array_equal(jt.grad(f)(x), np.take_along_axis(table, np.argsort(x, axis=1), axis=1))


def test_what_cannot_be_traced_is_refused_in_one_line():
    table = np.arange(5.0)
    with pytest.raises(UnsupportedOperationError, match="indexing a NumPy array with it"):
        jt.grad(lambda x: np.sum(table[np.floor(x).astype(int)] * x))(np.ones(3))
    with pytest.raises(UnsupportedOperationError, match="float array or mask.*astype\\(int\\)"):
        jt.grad(lambda x: np.sum(x[np.floor(x)]))(np.ones(3))
    with pytest.raises(UnsupportedOperationError, match="np.newaxis"):
        jt.grad(lambda x: np.sum(x[None, np.floor(x).astype(int)]))(np.ones(3))


def test_takes_at_one_set_of_indices_compute_its_positions_once():
    """The flat positions of a set of computed indices are one node (``flat_positions``): two fields
    read at the same cells, in a loop body that rebuilds its constant grid each step (a constant
    array is one node per value), compute them once per step, and their pullbacks' scatters reuse
    them.  The gradient is NumPy's own by hand."""
    from jacacc.tensor.expr import nodes_of

    n = 100

    def step(f, g, v):
        grid = np.arange(n)  # rebuilt each call, as the fluid simulation's meshgrid
        cells = np.mod(np.floor(grid - v).astype(int), n)
        return f[cells] * g[cells]

    def objective(f, g, v):
        return np.sum(step(f, g, v) + step(g, f, v) ** 2)

    rng = np.random.default_rng(0)
    f, g, v = rng.standard_normal(n), rng.standard_normal(n), rng.uniform(0, 3, n)
    traced = trace(objective, [f, g, v])
    positions = [node for node in nodes_of(traced.outputs) if node.kind == "op" and node.param[0] == "flat_positions"]
    assert len(positions) == 1
    cells = np.mod(np.floor(np.arange(n) - v).astype(int), n)
    a, b = f[cells], g[cells]
    want_f, want_g = np.zeros(n), np.zeros(n)
    np.add.at(want_f, cells, b + 2 * (b * a) * b)
    np.add.at(want_g, cells, a + 2 * (b * a) * a)
    got_f, got_g = jt.grad(objective, argnum=(0, 1))(f, g, v)
    np.testing.assert_allclose(got_f, want_f, rtol=1e-12)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-12)


def test_an_interpolations_corner_scatters_are_one_scatter():
    """The pullback of a bilinear interpolation reads the field at four corners: its four scatters
    into the field's shape are one (combined_scatters), and the gradient is NumPy's np.add.at."""
    from jacacc.tensor.evaluate import Program

    n = 8

    def interpolate(f, x, y):
        i, j = np.floor(x).astype(int), np.floor(y).astype(int)
        s, t = x - i, y - j
        i0, i1, j0, j1 = np.mod(i, n), np.mod(i + 1, n), np.mod(j, n), np.mod(j + 1, n)
        return np.sum((1 - s) * ((1 - t) * f[i0, j0] + t * f[i0, j1]) + s * ((1 - t) * f[i1, j0] + t * f[i1, j1]))

    rng = np.random.default_rng(4)
    f, x, y = rng.standard_normal((n, n)), rng.uniform(0, 2 * n, 30), rng.uniform(-n, n, 30)
    gradient = jt.grad(interpolate)
    got = gradient(f, x, y)
    i, j = np.floor(x).astype(int), np.floor(y).astype(int)
    s, t = x - i, y - j
    want = np.zeros((n, n))
    for di, dj, weight in ((0, 0, (1 - s) * (1 - t)), (0, 1, (1 - s) * t), (1, 0, s * (1 - t)), (1, 1, s * t)):
        np.add.at(want, (np.mod(i + di, n), np.mod(j + dj, n)), weight)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    [plan] = [getattr(p, "plan", p) for p in gradient.plans.values()]
    assert isinstance(plan, Program)
    scatters = [node for node in plan.nodes if node.kind == "op" and node.param[0] == "scatter_dynamic"]
    assert len(scatters) == 1 and scatters[0].args[1].size == 4 * x.size


@pytest.mark.parametrize("spelled", ["floor", "ceil", "trunc", "rint", "round", "cast", "remainder", "fmod"])
def test_rounding_and_integer_remainders_spelled_inline_equal_their_forward(spelled):
    """Rounding, casts and integer remainders are written into the straight-line program as NumPy
    expressions (Operator.spelling): the same values as the operators' forward functions (the
    interpreter) and NumPy's, at 0-d and n-d arguments."""
    from jacacc.tensor.evaluate import Program

    functions = {
        "floor": lambda x: np.floor(x), "ceil": lambda x: np.ceil(x), "trunc": lambda x: np.trunc(x),
        "rint": lambda x: np.rint(x), "round": lambda x: np.round(x, 1),
        "cast": lambda x: x.astype(np.int32) * 1.5,
        "remainder": lambda x: np.remainder(np.floor(x).astype(int), 3) * x,
        "fmod": lambda x: np.fmod(np.floor(x).astype(int), 3) * x,
    }
    f = functions[spelled]
    for x in (np.array([-2.5, -1.49, -0.5, 0.5, 1.5, 2.51, 7.25]), np.array(-3.75)):
        traced = trace(f, [x])
        program = Program(traced.outputs, traced.inputs, np.float64)
        straight, interpreted = program(x)[0], program.interpret(np, [x])[0]
        np.testing.assert_array_equal(straight, interpreted)
        np.testing.assert_array_equal(straight, f(x))
        source = program._straight_line.source
        assert (".astype('int32')" if spelled == "cast" else f"np.{spelled}(") in source
