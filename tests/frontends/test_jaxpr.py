"""The JAX front end (jacacc.jaxpr.from_jax): every handled primitive on its own against
``jax.jacfwd`` (float64, 1e-10), refusals, the zoo's JAX versions against ``jax.jacfwd``
through several elimination plans and compiled kernels, and graph sizes beside the NumPy
tracer's."""

from __future__ import annotations

import shutil
import subprocess

import jax_reference
import numpy as np
import pytest

import jacacc
from jacacc.errors import UnsupportedOperationError
from jacacc.tracer import Traced

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
lax = jax.lax

TOL = {"rtol": 1e-10, "atol": 1e-10}


def _flat(tree) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(leaf, dtype=float)) for leaf in jax.tree_util.tree_leaves(tree)])


def reference(f, x, jacobian=None):
    """Values and ``jax.jacfwd`` Jacobian of ``f`` at ``x`` in float64, as (m,), (m, n)."""
    x = np.asarray(x, dtype=float)
    with jax.enable_x64(True):
        # compiled whole: one XLA compilation instead of one per primitive run eagerly
        values = jax.tree_util.tree_leaves(jax_reference.jit(f)(jnp.asarray(x)))
        jac = jax.tree_util.tree_leaves(jax_reference.jit((jacobian or jax.jacfwd)(f))(jnp.asarray(x)))
    rows = [np.asarray(j, dtype=float).reshape(np.size(v), x.size) for v, j in zip(values, jac, strict=True)]
    return _flat(values), np.concatenate(rows)


def check(f, x, jacobian=None, **plan) -> Traced:
    """from_jax(f, x) gives jax's values and jax.jacfwd's Jacobian at x."""
    traced = jacacc.from_jax(f, x)
    assert isinstance(traced, Traced) and traced.fun is f
    x = np.asarray(x, dtype=float)
    values, jac = reference(f, x, jacobian)
    np.testing.assert_allclose(traced(x.ravel()), values, **TOL)
    np.testing.assert_allclose(traced.jacobian(x.ravel(), **plan), jac, **TOL)
    np.testing.assert_allclose(traced.reference_jacobian(x.ravel()), jac, **TOL)
    return traced


X4 = np.array([0.7, -1.3, 0.4, 2.1])
POS4 = np.array([0.7, 1.3, 0.4, 2.1])


def ops(traced: Traced) -> set[str]:
    return {op for _, op in traced.graph.digraph.nodes(data="op")} - {"input", "copy", "const"}


# ------------------------------------------------------------------ elementwise primitives, one each
ELEMENTWISE = [
    ("add", lambda x: x + x[::-1], X4),
    ("sub", lambda x: x - 2.0 * x[::-1], X4),
    ("mul", lambda x: x * x[::-1], X4),
    ("div", lambda x: x / (1.5 + x[::-1] ** 2), X4),
    ("neg", lambda x: -x, X4),
    ("pow", lambda x: x[:2] ** x[2:], POS4),
    ("integer_pow", lambda x: (x**3, x**-2), X4),
    ("square", lambda x: jnp.square(x), X4),
    ("exp", jnp.exp, X4),
    ("log", jnp.log, POS4),
    ("log1p", jnp.log1p, POS4),
    ("sqrt", jnp.sqrt, POS4),
    ("rsqrt", lax.rsqrt, POS4),
    ("sin", jnp.sin, X4),
    ("cos", jnp.cos, X4),
    ("tan", jnp.tan, X4 / 2),
    ("tanh", jnp.tanh, X4),
    ("atan2", lambda x: jnp.arctan2(x[:2], x[2:]), X4),
    ("abs", jnp.abs, X4),
    ("max", lambda x: (jnp.maximum(x, 0.5), jnp.maximum(x[:2], x[2:])), X4),
    ("min", lambda x: (jnp.minimum(x, 0.5), jnp.minimum(x[:2], x[2:])), X4),
    ("logistic", jax.nn.sigmoid, X4),
    ("erf", lambda x: jax.scipy.special.erf(x), X4),
]


@pytest.mark.parametrize(("name", "f", "x"), ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_elementwise_primitive(name, f, x):
    with jax.enable_x64(True):
        assert name in str(jax.make_jaxpr(f)(x)), f"{name} does not appear in the jaxpr"
    check(f, x)


def test_rsqrt_and_integer_pow_are_one_vertex_each():
    traced = check(lambda x: lax.rsqrt(x) + x**3, POS4)
    assert len(traced.graph.intermediates) == 8  # a pow per element and primitive; the adds are outputs


# ------------------------------------------------------------------ data movement
MOVEMENT = [
    ("broadcast_in_dim", lambda x: jnp.broadcast_to(x[:, None], (4, 3)) * jnp.arange(3.0), X4),
    ("reshape", lambda x: jnp.reshape(x, (2, 2)) @ np.array([[1.0, 2.0], [3.0, -1.0]]), X4),
    ("squeeze", lambda x: jnp.squeeze(jnp.reshape(x, (1, 4, 1)), (0, 2)) ** 2, X4),
    ("broadcast_in_dim", lambda x: jnp.expand_dims(x, 0) * jnp.ones((3, 1)), X4),  # expand_dims
    ("concatenate", lambda x: jnp.concatenate([x, 2.0 * x[:2], jnp.zeros(1)]), X4),
    ("slice", lambda x: (x[1:3], x[::2] * 3.0), X4),
    ("dynamic_slice", lambda x: (lax.dynamic_slice(x, (1,), (2,)), lax.dynamic_slice(x, (3,), (2,))), X4),
    ("gather", lambda x: x[jnp.array([2, 0, 2])] * x[jnp.array([1, 1, 3])], X4),
    ("gather", lambda x: (jnp.take(x, jnp.array([0, 9]), mode="fill", fill_value=-5.0),
                          jnp.take(x, jnp.array([-7, 9]), mode="clip")), X4),
    ("gather", lambda x: jnp.reshape(x, (2, 2))[jnp.array([1, 0]), jnp.array([0, 0])], X4),
    ("gather", lambda x: jnp.take_along_axis(jnp.reshape(x, (2, 2)), jnp.array([[1], [0]]), axis=1), X4),
    ("gather", lambda x: jax.vmap(lambda row, i: row[i] * row)(jnp.reshape(x, (2, 2)), jnp.array([1, 0])), X4),
    ("transpose", lambda x: jnp.reshape(x, (2, 2)).T * np.array([[1.0, 2.0], [3.0, 4.0]]), X4),
    ("rev", lambda x: jnp.flip(x) * x, X4),
    ("pad", lambda x: jnp.pad(x, (2, 1), constant_values=0.5) ** 2, X4),
    ("dynamic_update_slice", lambda x: lax.dynamic_update_slice(x, x[:2] * 3.0, (1,)), X4),
    ("scatter", lambda x: x.at[jnp.array([0, 3])].set(x[1:3] ** 2), X4),
    ("convert_element_type", lambda x: (x > 0.0).astype(x.dtype) * x + x.astype(jnp.float64), X4),
    ("stack", lambda x: jnp.stack([x, x**2], axis=1), X4),
]


@pytest.mark.parametrize(("name", "f", "x"), MOVEMENT, ids=[f"{e[0]}{i}" for i, e in enumerate(MOVEMENT)])
def test_data_movement_primitive(name, f, x):
    with jax.enable_x64(True):
        assert name in str(jax.make_jaxpr(f)(x)), f"{name} does not appear in the jaxpr"
    check(f, x)


def test_gather_fill_gives_a_constant_output():
    traced = jacacc.from_jax(lambda x: jnp.take(x, jnp.array([1, 8]), mode="fill"), X4)
    values = traced(X4)
    assert values[0] == X4[1] and np.isnan(values[1])
    np.testing.assert_array_equal(traced.jacobian(X4)[1], 0.0)


def test_structural_primitives_add_no_vertices():
    traced = jacacc.from_jax(lambda x: jnp.reshape(x, (2, 2)).T[::-1] * 1.5, X4)
    assert len(traced.graph.intermediates) == 0 and traced.graph.n_edges == 4


# ------------------------------------------------------------------ reductions and contractions
def test_reduce_sum_starts_at_the_first_term():
    traced = check(lambda x: (jnp.sum(x), jnp.sum(jnp.reshape(x, (2, 2)), axis=0)), X4)
    assert ops(traced) == {"add"} and len(traced.graph.intermediates) == 2  # 3 + 2·1 adds, outputs own 3


def test_reduce_max():
    check(lambda x: (jnp.max(x), jnp.max(jnp.reshape(x, (2, 2)), axis=1), jnp.min(x)), X4)


def test_reduce_prod_and_cumulative():
    check(lambda x: (jnp.prod(x), jnp.cumsum(x), jnp.cumprod(x[::-1])), X4)


def test_dot_general_matrix_vector_and_contractions():
    w = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]])
    check(lambda x: (jnp.reshape(x, (2, 2)) @ w, jnp.dot(x, x), jnp.outer(x[:2], x[2:])), X4)


def test_dot_general_with_batch_dimensions():
    x = np.random.default_rng(3).normal(size=(2, 2, 2))
    traced = check(lambda a: jnp.einsum("bij,bjk->bik", a, a), x)
    assert traced.n_inputs == 8 and traced.n_outputs == 8
    y = np.random.default_rng(4).normal(size=(2, 3, 2))
    check(lambda a: jnp.einsum("bij,bkj->bki", a, a[:, ::-1] * 2.0), y)


# ------------------------------------------------------------------ comparisons and select
@pytest.mark.parametrize("compare", ["gt", "lt", "ge", "le", "eq", "ne"])
def test_comparison_feeding_select(compare):
    op = getattr(jnp, {"gt": "greater", "lt": "less", "ge": "greater_equal", "le": "less_equal",
                        "eq": "equal", "ne": "not_equal"}[compare])

    def f(x):
        return jnp.where(op(x, x[::-1] * 0.5), jnp.sin(x), x**2)

    traced = check(f, X4)
    assert {compare, "where"} <= ops(traced)


@pytest.mark.filterwarnings("ignore:invalid value encountered in log")
def test_where_with_an_unselected_branch_that_is_nan():
    # log(x) at negative x is NaN but not selected: values and Jacobian stay finite
    def f(x):
        return jnp.where(x > 0.0, jnp.log(jnp.abs(x) + 1.0) * x, 2.0 * x)

    check(f, X4)
    traced = jacacc.from_jax(lambda x: jnp.where(x > 0.0, jnp.log(x), -1.0), X4)
    np.testing.assert_allclose(traced(X4), [np.log(0.7), -1.0, np.log(0.4), np.log(2.1)])


def test_predicate_of_a_value_used_nowhere_else_keeps_its_edges():
    traced = check(lambda x: jnp.where(x[0] > x[1], x[2], x[3]), X4)
    assert {"x0", "x1"} <= set(traced.graph.digraph.predecessors("v1"))  # the predicate vertex
    check(lambda x: jnp.where(x[0] > x[1], x[2], x[3]), X4[[1, 0, 2, 3]])


def test_logical_operations_and_isfinite():
    check(lambda x: jnp.where(jnp.logical_and(x > 0.0, x < 1.0) | ~jnp.isfinite(x), x**2, -x), X4)


def test_logaddexp_and_logsumexp():
    check(lambda x: (jnp.logaddexp(x, 0.3), jax.nn.logsumexp(x), jax.nn.softplus(x)), X4)


# ------------------------------------------------------------------ calls, stop_gradient
def test_jit_is_inlined():
    inner = jax.jit(lambda v: jnp.sin(v) * v[::-1])
    check(lambda x: inner(x) + inner(2.0 * x), X4)


def test_custom_jvp_is_inlined():
    @jax.custom_jvp
    def soft(v):
        return jnp.log1p(jnp.exp(v))

    soft.defjvp(lambda primals, tangents: (soft(primals[0]), jax.nn.sigmoid(primals[0]) * tangents[0]))
    check(lambda x: (jax.nn.relu(x), soft(x)), X4)


def test_custom_vjp_and_checkpoint_are_inlined():
    @jax.custom_vjp
    def f(v):
        return jnp.sin(v) * 2.0

    f.defvjp(lambda v: (f(v), v), lambda v, g: (2.0 * g * jnp.cos(v),))
    check(lambda x: jax.checkpoint(jnp.tanh)(f(x)), X4, jacobian=jax.jacrev)  # jvp refuses custom_vjp


def test_cond_on_a_constant_predicate_is_inlined():
    check(lambda x: lax.cond(True, jnp.sin, jnp.cos, x), X4)


def test_stop_gradient_passes_the_value_but_not_the_derivative():
    traced = check(lambda x: x * lax.stop_gradient(x) + lax.stop_gradient(jnp.exp(x[0])), X4)
    assert "stop_gradient" in ops(traced)


# ------------------------------------------------------------------ arguments and outputs
def test_scalar_list_and_pytree_arguments_and_outputs():
    check(lambda x: jnp.sin(x) * x, 0.3)
    check(lambda x: {"b": x[0] * x[1], "a": (jnp.exp(x), 3.0)}, [0.2, -0.4])
    traced = check(lambda x: jnp.sum(x**2, axis=0), np.arange(6.0).reshape(2, 3))
    assert (traced.n_inputs, traced.n_outputs) == (6, 3)


# ------------------------------------------------------------------ refusals
def test_unknown_primitive_is_refused_by_name():
    with pytest.raises(UnsupportedOperationError, match="'sort'"):
        jacacc.from_jax(jnp.sort, X4)
    with pytest.raises(UnsupportedOperationError, match="'argmax'"):
        jacacc.from_jax(lambda x: x[jnp.argmax(x)], X4)


def test_conversion_to_an_integer_type_is_refused():
    with pytest.raises(UnsupportedOperationError, match="convert_element_type.*int32"):
        jacacc.from_jax(lambda x: x.astype(jnp.int32) * 2, X4)


def test_traced_control_flow_is_refused():
    # lax.cond converts its traced predicate to an int32 branch index: refused there
    with pytest.raises(UnsupportedOperationError, match="convert_element_type"):
        jacacc.from_jax(lambda x: lax.cond(x[0] > 0, jnp.sin, jnp.cos, x), X4)
    with pytest.raises(UnsupportedOperationError, match="'while'"):
        jacacc.from_jax(lambda x: lax.while_loop(lambda v: v[0] < 10.0, lambda v: v * 2.0, x), X4)


def test_loops_with_a_fixed_trip_count_are_unrolled():
    def f(x):
        n = jnp.sum(jnp.arange(3))  # a constant bound that is not static: a while loop
        return (lax.fori_loop(0, 3, lambda i, v: jnp.sin(v) * x, x),
                lax.fori_loop(0, n, lambda i, v: v * x[i], x[3]),
                lax.scan(lambda c, xi: (c * xi + 1.0, c ** 2), 1.0, x, reverse=True))

    check(f, X4)


def test_constant_parts_never_become_vertices():
    # sort, argmax and integer arithmetic on constants are evaluated by JAX
    traced = check(lambda x: x * jnp.sort(jnp.array([3.0, 1.0, 2.0, 0.0]))[jnp.argmax(jnp.arange(4))], X4)
    assert len(traced.graph.intermediates) == 0


# ------------------------------------------------------------------ compiled kernels
def test_compiled_kernels_with_select_logistic_rsqrt_and_stop_gradient():
    def f(x):
        s = jax.nn.sigmoid(x) * lax.rsqrt(1.0 + x**2)
        return jnp.where(x > 0.2, s, jnp.log(jnp.abs(x))) + lax.stop_gradient(x[::-1]) * x

    traced = check(f, X4)
    assert {"logistic", "where", "gt", "stop_gradient"} <= ops(traced)
    pts = X4 + np.linspace(-0.3, 0.3, 5)[:, None]
    expected = np.stack([reference(f, p)[1] for p in pts])
    for backend in ("numpy", "numba"):
        if backend == "numba":
            pytest.importorskip("numba")
        kernel = jacacc.compile(traced, backend=backend)
        values, jacobians = kernel.values_and_jacobians(pts)
        np.testing.assert_allclose(values, traced(pts), **TOL)
        np.testing.assert_allclose(jacobians, expected, **TOL)


_HOST_SHIM = """
#include <cmath>
using namespace std;
#define __device__
#define __forceinline__ inline
#define __global__
#define __restrict__ __restrict
struct jc_dim { long long x; };
static jc_dim blockIdx, blockDim, threadIdx;
#include "kernel.cu"
extern "C" void run_threads(const real* X, real* V, real* J, long long N) {
    blockDim.x = 4;
    for (long long b = 0; b * blockDim.x < N; ++b)
        for (long long t = 0; t < blockDim.x; ++t) {
            blockIdx.x = b;
            threadIdx.x = t;
            jacacc_kernel(X, V, J, N);
        }
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
def test_cuda_kernel_with_select_and_logistic_run_on_the_host(tmp_path):
    # the CUDA source (jc_where, jc_logistic helpers), compiled as host C++ as in test_codegen
    import ctypes

    def f(x):
        return jnp.where(x > 0.2, jax.nn.sigmoid(x) * lax.stop_gradient(x[0]), -x) * x[::-1]

    traced = jacacc.from_jax(f, X4)
    kernel = jacacc.compile(traced, backend="cupy")
    (tmp_path / "kernel.cu").write_text(kernel.source)
    (tmp_path / "shim.cpp").write_text(_HOST_SHIM)
    lib = tmp_path / "kernel.so"
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-o", str(lib), "shim.cpp"], check=True, cwd=tmp_path)
    run = ctypes.CDLL(str(lib)).run_threads
    run.argtypes = [ctypes.POINTER(ctypes.c_double)] * 3 + [ctypes.c_longlong]
    pts = np.ascontiguousarray(X4 + np.linspace(-0.3, 0.3, 6)[:, None])
    V, J = np.full((6, 4), np.nan), np.full((6, 4, 4), np.nan)
    run(*(a.ctypes.data_as(ctypes.POINTER(ctypes.c_double)) for a in (pts, V, J)), len(pts))
    np.testing.assert_allclose(V, traced(pts), **TOL)
    np.testing.assert_allclose(J, np.stack([reference(f, p)[1] for p in pts]), **TOL)


# ------------------------------------------------------------------ the zoo
ZOO_PLANS = [
    ("RoeFlux_1d", {"mode": "vertex", "method": "markowitz"}),
    ("RobotArm_6DOF", {"mode": "edge", "method": "markowitz"}),
    ("HumanHeartDipole", {"mode": "vertex", "method": "reverse"}),
    ("PropaneCombustion", {"mode": "edge", "method": "reverse"}),
    ("BlackScholes", {"mode": "vertex", "method": "forward"}),
    ("BlackScholes_Jacobian", {"mode": "vertex", "method": "markowitz"}),
    ("SteadyStateCombustion", {"mode": "edge", "method": "forward"}),
    ("GaussianDataFitting", {"mode": "vertex", "method": "markowitz"}),
]


@pytest.mark.parametrize(("name", "plan"), ZOO_PLANS, ids=[z[0] for z in ZOO_PLANS])
def test_zoo_function_matches_jacfwd(name, plan):
    from jacacc.problems import get
    from jacacc.problems.jax_functions import FUNCTIONS

    problem, f = get(name), FUNCTIONS[name]
    x = problem.sample(seed=0)
    traced = check(f, x, **plan)
    # the same function as the NumPy zoo's, and both graphs have a size
    np.testing.assert_allclose(traced(x), problem(x), rtol=1e-12, atol=1e-12)
    numpy_graph = problem.graph()
    for g in (traced.graph, numpy_graph):
        assert len(g.intermediates) > 0 and g.n_edges > 0
    np.testing.assert_allclose(traced.jacobian(x), problem.trace().jacobian(x), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", ["RoeFlux_1d", "BlackScholes", "SteadyStateCombustion"])
def test_zoo_function_compiled_with_numpy(name):
    from jacacc.problems import get
    from jacacc.problems.jax_functions import FUNCTIONS

    problem = get(name)
    traced = jacacc.from_jax(FUNCTIONS[name], problem.sample(seed=0))
    pts = np.stack([problem.sample(seed=s) for s in range(3)])
    kernel = jacacc.compile(traced, backend="numpy", method="markowitz")
    np.testing.assert_allclose(kernel(pts), np.stack([reference(FUNCTIONS[name], p)[1] for p in pts]), **TOL)
