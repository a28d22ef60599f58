"""Tests of the tracer (jacacc.tracer), the rules table (jacacc.rules) and the
symbolic partials (jacacc.partials).

Jacobians of traced functions are checked against central finite differences
of the *original* Python function, so the tests also check that the traced
graph computes what the function computes.  The functions in ``FUNCTIONS``
together use every rule in the table; ``test_every_rule_is_covered`` fails
when a rule is added without a test function that uses it.
"""

from __future__ import annotations

import importlib
import math
import warnings

import numpy as np
import pytest
import scipy.special as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import jacacc.tracer as jt
from jacacc.errors import JacaccError, RegistryError, UnsupportedOperationError
from jacacc.graph import CompGraph, PrunedVerticesWarning
from jacacc.ops import ZERO
from jacacc.partials import (
    FUNCTIONS,
    Apply,
    Const,
    Expr,
    ExprPrinter,
    NumpyPrinter,
    Var,
    apply,
    cos,
    exp,
    ge,
    lt,
    sin,
)
from jacacc.rules import RULES, get_rule, register_rule, unregister_rule
from jacacc.tracer import Traced, TraceError, Tracer, trace

# --------------------------------------------------------------------------- helpers
H = 1e-6
RTOL = 1e-6


def call_numeric(f, x, unpack):
    """Evaluate the original function at a float point, outputs flattened."""
    x = np.asarray(x, dtype=float)
    out = f(*x) if unpack else f(x)
    return np.asarray(_flat(out), dtype=float)


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [v for item in value for v in _flat(item)]
    if isinstance(value, np.ndarray):
        return [float(v) for v in value.ravel()]
    return [float(value)]


def fd_jacobian(f, x, unpack, h=H):
    """Central finite differences, shape (m, n)."""
    x = np.asarray(x, dtype=float)
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h
        cols.append((call_numeric(f, x + e, unpack) - call_numeric(f, x - e, unpack)) / (2 * h))
    return np.stack(cols, axis=-1)


def assert_close_to_fd(jac, fd):
    scale = max(1.0, float(np.max(np.abs(fd), initial=0.0)))
    np.testing.assert_allclose(jac, fd, rtol=RTOL, atol=RTOL * scale)


def ops_of(traced: Traced) -> set[str]:
    return {op for _, op in traced.graph.digraph.nodes(data="op")} - {"input", "copy", "const"}


# --------------------------------------------------------------------------- functions covering the table
def f_arith(a, b):
    return [
        a + b,
        a - b,
        a * b,
        a / b,
        -a,
        +b,
        a**3,
        2.0**b,
        a**b,
        np.square(a),
        np.reciprocal(b),
        1.5 - a,
        3 / b,
    ]


def f_exp_log(x):
    a, b = x
    return [
        np.sqrt(a),
        np.cbrt(b),
        np.exp(a),
        np.exp2(b),
        np.expm1(a),
        np.log(a),
        np.log2(b),
        np.log10(a),
        np.log1p(b),
    ]


def f_trig(x):
    a, b = x[0], x[1]
    return np.array(
        [
            np.sin(a),
            np.cos(b),
            np.tan(a),
            np.arcsin(b),
            np.arccos(a),
            np.arctan(b),
            np.arctan2(a, b),
            np.hypot(a, b),
            np.arctan2(0.3, b),
        ]
    )


def f_hyperbolic(a, b, c):
    return (np.sinh(a), np.cosh(b), np.tanh(a * b), np.arcsinh(b), np.arccosh(c), np.arctanh(a))


def f_piecewise(a, b):
    return [
        abs(a),
        np.fabs(b),
        np.absolute(a - b),
        np.maximum(a, b),
        np.minimum(a, b),
        np.fmax(a, 0.0),
        np.fmin(b, 0.0),
        np.maximum(a * b, b),
        np.sign(a) * b,
        np.logaddexp(a, 2 * b),
        jt.relu(a) + jt.relu(b) + jt.heaviside(a - b),
    ]


def f_special(x):
    return [sp.erf(x[0]), sp.erfc(x[1]), sp.erf(x[0] * x[1])]


def f_jacacc_functions(x):
    # the module-level functions, and ufuncs on the whole object array (NumPy
    # then calls the Tracer methods named after them: x[0].tanh(), ...)
    return [
        jt.sin(x[0]) * jt.exp(x[1]),
        jt.sqrt(jt.hypot(x[0], x[1])),
        np.tanh(x)[0],
        np.log(x)[1],
        jt.maximum(x[0], 0.25),
        jt.erf(x[1]),
        jt.arctan2(x[0], 2.0),
        jt.power(x[0], 2.5),
    ]


def f_frontend(a, b):
    # the front ends' rules (jacacc.jaxpr): predicates (1.0 / 0.0, zero partials), where,
    # logistic (also scipy.special.expit), stop_gradient (of a piecewise constant here, so that
    # finite differences agree), tangent_seed
    p = jt.gt(a, b)
    return [
        jt.where(p, np.sin(a), b**2),
        jt.where(jt.le(a, 0.5), a, -b) + jt.ge(b, a) + jt.lt(a, b) + jt.eq(a, b) + jt.ne(a, b),
        jt.logistic(a * b) + sp.expit(b),
        a * jt.stop_gradient(p),
        # how from_jax runs a custom rule: the stopped primal plus a tangent seed (value 0,
        # partial 1) has b's value and derivative
        np.sin(jt.stop_gradient(b) + jt.tangent_seed(b)),
    ]


def f_mixed(x):
    # a small "real" function: shared subexpressions, constants, object-array ops
    s = np.sum(x**2)
    r = np.sqrt(s)
    w = np.array([[1.0, -2.0], [0.5, 3.0], [2.0, 0.0]])
    z = np.tanh(x @ w)
    return [r * np.exp(-x[0]), np.log1p(s) - z[0] * z[1], np.sin(x[1] * x[2]) / (1.0 + s)]


# (function, n_inputs, unpack, point)
FUNCTIONS_TABLE = [
    pytest.param(f_arith, 2, True, [1.3, 0.7], id="arith"),
    pytest.param(f_exp_log, 2, False, [1.3, 0.7], id="exp_log"),
    pytest.param(f_trig, 2, False, [0.4, -0.3], id="trig"),
    pytest.param(f_hyperbolic, 3, True, [0.4, -0.3, 1.7], id="hyperbolic"),
    pytest.param(f_piecewise, 2, True, [0.9, -0.4], id="piecewise"),
    pytest.param(f_special, 2, False, [0.3, -0.8], id="special"),
    pytest.param(f_jacacc_functions, 2, False, [0.6, 1.4], id="jacacc_functions"),
    pytest.param(f_mixed, 3, False, [0.3, -0.6, 1.1], id="mixed"),
    pytest.param(f_frontend, 2, True, [0.9, -0.4], id="frontend"),
]


@pytest.mark.parametrize(("f", "n", "unpack", "x"), FUNCTIONS_TABLE)
def test_reference_jacobian_matches_finite_differences(f, n, unpack, x):
    traced = trace(f, n)
    np.testing.assert_allclose(traced.values(x), call_numeric(f, x, unpack), rtol=1e-12, atol=1e-14)
    jac = traced.reference_jacobian(x)
    assert jac.shape == (traced.n_outputs, n)
    assert_close_to_fd(jac, fd_jacobian(f, x, unpack))


def test_every_rule_is_covered():
    covered = set()
    for param in FUNCTIONS_TABLE:
        f, n, _, _ = param.values
        covered |= ops_of(trace(f, n))
    assert covered == set(RULES), f"rules without a test function: {sorted(set(RULES) - covered)}"


@pytest.mark.parametrize(("f", "n", "unpack", "x"), FUNCTIONS_TABLE)
def test_jacobian_through_a_plan(f, n, unpack, x):
    pytest.importorskip("jacacc.api")
    traced = trace(f, n)
    expected = traced.reference_jacobian(x)
    np.testing.assert_allclose(traced.jacobian(x), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        traced.jacobian(x, method="reverse", mode="edge"), expected, rtol=1e-12, atol=1e-12
    )
    assert_close_to_fd(traced.jacobian(x), fd_jacobian(f, x, unpack))
    # batched points through the same (cached) plan
    pts = np.asarray(x) + np.linspace(-0.01, 0.01, 6).reshape(2, 3, 1)
    batch = traced.jacobian(pts)
    assert batch.shape == (2, 3, traced.n_outputs, n)
    np.testing.assert_allclose(batch[1, 2], traced.reference_jacobian(pts[1, 2]), rtol=1e-12, atol=1e-12)


def test_jacobian_plans_are_cached():
    pytest.importorskip("jacacc.api")
    traced = trace(f_mixed, 3)
    traced.jacobian([0.1, 0.2, 0.3])
    traced.jacobian([0.3, 0.2, 0.1])
    traced.jacobian([0.3, 0.2, 0.1], method="forward")
    assert len(traced._plans) == 2


# --------------------------------------------------------------------------- hypothesis: random points
finite = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(st.lists(finite, min_size=3, max_size=3))
def test_mixed_function_random_points(x):
    assume(np.sum(np.square(x)) > 1e-2)  # sqrt(sum(x**2)) has a kink at the origin
    traced = trace(f_mixed, 3)
    assert_close_to_fd(traced.reference_jacobian(x), fd_jacobian(f_mixed, x, False))


@settings(max_examples=40, deadline=None)
@given(st.floats(0.1, 3.0), st.floats(-1.5, 1.5))
def test_pow_and_trig_random_points(a, b):
    def f(a, b):
        return [a**b, np.sin(a * b) * np.cos(b), np.arctan2(b, a), np.hypot(a, b), sp.erf(a - b)]

    traced = trace(f, 2)
    assert_close_to_fd(traced.reference_jacobian([a, b]), fd_jacobian(f, [a, b], True))


@settings(max_examples=40, deadline=None)
@given(st.floats(-2.0, 2.0), st.floats(-2.0, 2.0))
def test_kinks_away_from_ties(a, b):
    # max/min/abs are differentiable away from their kinks; skip points too close to one
    assume(min(abs(a - b), abs(a), abs(b)) > 1e-3)

    def f(a, b):
        return [np.maximum(a, b), np.minimum(a, b), abs(a), np.fabs(b), np.maximum(a, 0.0) * b]

    traced = trace(f, 2)
    assert_close_to_fd(traced.reference_jacobian([a, b]), fd_jacobian(f, [a, b], True))


# --------------------------------------------------------------------------- graph structure
def test_repeated_use_gives_one_edge_with_summed_partial():
    traced = trace(lambda x: x[0] * x[0], 1)
    assert traced.graph.edges == (("x0", "y0"),)
    assert traced.graph.partial("x0", "y0") == 2 * Var("x0")
    assert str(traced.graph.partial("x0", "y0")) == "2*x0"
    np.testing.assert_allclose(traced.reference_jacobian([3.0]), [[6.0]])
    # x + x and x - x: sums of constant partials
    assert trace(lambda x: x[0] + x[0], 1).graph.partial("x0", "y0") == Const(2.0)
    assert trace(lambda x: x[0] - x[0], 1).graph.partial("x0", "y0") == Const(0.0)


def test_constants_are_folded_into_partials():
    traced = trace(lambda x: 3.0 * x[0] + np.float64(2.0) * np.sin(1.0), 1)
    g = traced.graph
    assert len(g.digraph) == 3  # x0, v1 = 3*x0, y0 = v1 + const
    assert g.digraph.nodes["v1"]["args"] == (3.0, "x0")  # operand order kept
    assert g.digraph.nodes["y0"]["op"] == "add"
    assert g.digraph.nodes["y0"]["args"] == ("v1", 2.0 * math.sin(1.0))
    assert g.partial("x0", "v1") == Const(3.0)
    np.testing.assert_allclose(traced([1.0]), [3.0 + 2.0 * math.sin(1.0)])


def test_node_names_and_attributes():
    traced = trace(lambda a, b: [np.sin(a) * b, np.exp(a)], 2)
    g = traced.graph
    assert g.inputs == ("x0", "x1")
    assert g.outputs == ("y0", "y1")
    assert g.intermediates == ("v1",)
    nodes = g.digraph.nodes
    assert (nodes["v1"]["op"], nodes["v1"]["args"]) == ("sin", ("x0",))
    assert (nodes["y0"]["op"], nodes["y0"]["args"]) == ("mul", ("v1", "x1"))
    assert (nodes["x0"]["kind"], nodes["v1"]["kind"], nodes["y1"]["kind"]) == (
        "input",
        "intermediate",
        "output",
    )
    assert g.partial("x0", "v1") == cos(Var("x0"))
    assert g.partial("x0", "y1") == Var("y1")  # exp: the partial reuses the result


def test_constant_output():
    traced = trace(lambda x: [x[0] * 2.0, 5.0], 1)
    g = traced.graph
    assert g.outputs == ("y0", "y1")
    assert g.digraph.nodes["y1"]["op"] == "const"
    assert g.predecessors("y1") == []
    np.testing.assert_allclose(traced([1.5]), [3.0, 5.0])
    np.testing.assert_allclose(traced(np.ones((4, 1))), np.tile([2.0, 5.0], (4, 1)))
    np.testing.assert_allclose(traced.reference_jacobian([1.5]), [[2.0], [0.0]])
    # a function that is constant altogether
    const = trace(lambda x: 7.0, 2)
    assert const.n_outputs == 1 and const.graph.n_edges == 0
    np.testing.assert_allclose(const.reference_jacobian([[1.0, 2.0]] * 3), np.zeros((3, 1, 2)))


def test_output_equal_to_an_input_gets_a_copy_node():
    traced = trace(lambda x: [x[1], x[0] * x[1]], 2)
    g = traced.graph
    assert g.digraph.nodes["y0"]["op"] == "copy"
    assert g.partial("x1", "y0") == Const(1.0)
    np.testing.assert_allclose(traced.reference_jacobian([2.0, 3.0]), [[0.0, 1.0], [3.0, 2.0]])


def test_output_used_later_gets_a_copy_node():
    def f(x):
        s = np.sin(x[0])
        return [s, s * x[1]]

    traced = trace(f, 2)
    g = traced.graph
    assert g.intermediates == ("v1",)
    assert g.digraph.nodes["y0"]["op"] == "copy"
    assert g.digraph.nodes["y1"]["op"] == "mul"
    assert set(g.successors("v1")) == {"y0", "y1"}
    assert_close_to_fd(traced.reference_jacobian([0.5, 2.0]), fd_jacobian(f, [0.5, 2.0], False))


def test_value_returned_twice_gets_two_copy_nodes():
    traced = trace(lambda x: [np.exp(x[0])] * 2, 1)
    g = traced.graph
    assert g.intermediates == ("v1",)
    assert [g.digraph.nodes[o]["op"] for o in g.outputs] == ["copy", "copy"]
    np.testing.assert_allclose(traced.reference_jacobian([0.0]), [[1.0], [1.0]])


def test_dead_operations_are_not_in_the_graph():
    def f(x):
        np.cos(x[0]) * 3.0  # dead: result unused
        unused = np.exp(x[1])
        _ = unused + 1.0
        return np.sin(x[0])

    with warnings.catch_warnings():
        warnings.simplefilter("error", PrunedVerticesWarning)
        traced = trace(f, 2)
    g = traced.graph
    assert set(g.digraph.nodes) == {"x0", "x1", "y0"}  # unused input x1 stays, isolated
    assert g.digraph.nodes["y0"]["op"] == "sin"
    np.testing.assert_allclose(traced.reference_jacobian([0.0, 1.0]), [[1.0, 0.0]])


def test_intermediates_are_numbered_in_creation_order():
    def f(x):
        a = np.sin(x[0])
        np.cos(a)  # dead, so it takes no number
        b = np.exp(a)
        c = b * a
        return [c, a]

    g = trace(f, 1).graph
    assert g.intermediates == ("v1", "v2")
    assert g.digraph.nodes["v1"]["op"] == "sin"
    assert g.digraph.nodes["v2"]["op"] == "exp"


def test_no_outputs():
    traced = trace(lambda x: [], 2)
    assert traced.n_outputs == 0
    assert traced([1.0, 2.0]).shape == (0,)
    assert traced.reference_jacobian([1.0, 2.0]).shape == (0, 2)


def test_list_tuple_and_array_outputs_agree():
    def as_list(x):
        return [x[0] * x[1], np.sin(x[0]), x[1] ** 2, 1.0]

    def as_array(x):
        return np.array([[x[0] * x[1], np.sin(x[0])], [x[1] ** 2, 1.0]])  # C order flattening

    def as_nested(x):
        return (x[0] * x[1], [np.sin(x[0]), (x[1] ** 2,)], np.float64(1.0))

    x = [0.7, -1.2]
    ref = trace(as_list, 2)
    for fn in (as_array, as_nested):
        other = trace(fn, 2)
        assert other.graph == ref.graph
        np.testing.assert_allclose(other(x), ref(x))
        np.testing.assert_allclose(other.reference_jacobian(x), ref.reference_jacobian(x))


def test_scalar_tracer_and_number_outputs():
    traced = trace(lambda x: x[0] * 2, 1)
    assert traced.n_outputs == 1
    assert traced(3.0).shape == (1,)  # a scalar is accepted for one input


# --------------------------------------------------------------------------- calling conventions
def test_unpacked_and_vector_calling_conventions():
    def unpacked(a, b):
        return a * np.sin(b)

    def vector(x):
        return x[0] * np.sin(x[1])

    def vector_unpacking(x):
        a, b = x
        return a * np.sin(b)

    graphs = [trace(unpacked, 2).graph, trace(vector, 2).graph, trace(vector_unpacking, 2).graph]
    assert graphs[0] == graphs[1] == graphs[2]
    # forcing the convention
    assert trace(lambda *args: args[0] * args[1], 2, unpack=True).graph == trace(lambda a, b: a * b, 2).graph
    forced = trace(lambda x, scale=2.0: x[0] * scale, 2, unpack=False)  # two parameters, still a vector
    np.testing.assert_allclose(forced.reference_jacobian([1.0, 1.0]), [[2.0, 0.0]])


def test_default_convention_rules():
    seen = {}

    def one(x):
        seen["one"] = type(x)
        return x[0]

    def two(a, b):
        return a + b

    trace(one, 1)
    assert seen["one"] is np.ndarray  # a single input still arrives as an array
    trace(two, 2)
    trace(np.sin, 1)  # builtin callable: vector form, elementwise through Tracer.sin
    with pytest.raises(TypeError):
        trace(two, 3)  # 2 parameters for 3 inputs: called with the vector, which fails


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None])
def test_bad_n_inputs(bad):
    with pytest.raises(TraceError, match="n_inputs"):
        trace(lambda x: x[0], bad)
    assert issubclass(TraceError, ValueError) and issubclass(TraceError, JacaccError)


def test_bad_outputs():
    with pytest.raises(TraceError, match="str"):
        trace(lambda x: "no", 1)
    with pytest.raises(TraceError, match="NoneType"):
        trace(lambda x: [x[0], None], 1)


def test_tracers_leaking_out_of_a_trace():
    leaked = []

    def f(x):
        leaked.append(x[0])
        return x[0]

    trace(f, 1)
    with pytest.raises(TraceError, match="after its trace finished"):
        leaked[0] + 1.0

    def mixes(x):
        return x[0] * inner_value[0]

    inner_value = []

    def outer(x):
        inner_value.append(x[0])
        return trace(mixes, 1)

    with pytest.raises(TraceError, match="different traces"):
        trace(outer, 1)


# --------------------------------------------------------------------------- numpy interplay
def test_object_array_operations():
    w = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.0]])

    def f(x):
        return [np.sum(x), *(x @ w), np.dot(x, w[:, 0]), *np.sin(x), *np.exp(x) * 2.0, np.prod(x)]

    x = np.array([0.3, -0.7, 1.1])
    traced = trace(f, 3)
    np.testing.assert_allclose(traced(x), call_numeric(f, x, False), rtol=1e-13)
    jac = traced.reference_jacobian(x)
    np.testing.assert_allclose(jac[0], np.ones(3))
    np.testing.assert_allclose(jac[1:3], w.T)
    assert_close_to_fd(jac, fd_jacobian(f, x, False))


def test_float_array_with_a_tracer_is_elementwise():
    def f(x):
        return np.array([1.0, 2.0, 3.0]) * x[0] + x[0] * np.array([0.0, 1.0, 0.0]) - np.arange(3.0) / x[1]

    x = [0.5, 2.0]
    traced = trace(f, 2)
    assert traced.n_outputs == 3
    assert_close_to_fd(traced.reference_jacobian(x), fd_jacobian(f, x, False))


def test_numpy_scalars_and_zero_d_arrays_as_constants():
    def f(x):
        return [np.float64(2.0) * x[0], x[0] ** np.int64(2), np.array(3.0) - x[0], np.float32(0.5) / x[0]]

    traced = trace(f, 1)
    assert traced.graph.intermediates == ()
    assert_close_to_fd(traced.reference_jacobian([1.5]), fd_jacobian(f, [1.5], False))


def test_jacacc_functions_on_plain_numbers_and_arrays():
    assert jt.sin(0.5) == pytest.approx(math.sin(0.5))
    assert isinstance(jt.exp(1.0), float)
    np.testing.assert_allclose(jt.maximum(np.array([1.0, -1.0]), 0.0), [1.0, 0.0])
    np.testing.assert_allclose(jt.erf(np.array([0.0, 1.0])), sp.erf([0.0, 1.0]))
    assert jt.apply_rule("hypot", 3.0, 4.0) == 5.0
    with pytest.raises(TypeError, match="2 operand"):
        jt.maximum(1.0)


def test_jacacc_maximum_on_an_object_array():
    # np.maximum on an object array compares elements (unsupported); jacacc.tracer.maximum works
    def f(x):
        return jt.maximum(x, 0.0) * np.array([1.0, 2.0])

    traced = trace(f, 2)
    np.testing.assert_allclose(traced.reference_jacobian([0.5, -0.5]), [[1.0, 0.0], [0.0, 0.0]])


def test_tracer_methods():
    traced = trace(lambda x: [x[0].sin(), x[0].arctan2(x[1]), x[1].absolute(), x[0].conjugate()], 2)
    np.testing.assert_allclose(
        traced.reference_jacobian([0.0, -2.0]), [[1.0, 0.0], [-0.5, 0.0], [0.0, -1.0], [1.0, 0.0]]
    )


def test_tracer_methods_exist_for_every_rule():
    for rule in RULES.values():
        for name in (rule.name, *rule.aliases):
            if name.isidentifier():
                assert callable(getattr(Tracer, name)), name


# --------------------------------------------------------------------------- unsupported operations
def test_unknown_ufunc_names_the_operation():
    with pytest.raises(UnsupportedOperationError, match="'floor'"):
        trace(lambda x: np.floor(x[0]), 1)
    with pytest.raises(UnsupportedOperationError, match="'rint'"):
        trace(lambda x: np.rint(x[0]), 1)


def test_ufunc_methods_name_the_operation():
    with pytest.raises(UnsupportedOperationError, match=r"add\.reduce"):
        trace(lambda x: np.add.reduce(x[0]), 1)
    with pytest.raises(UnsupportedOperationError, match=r"multiply\.accumulate"):
        trace(lambda x: np.multiply.accumulate(x[0]), 1)
    with pytest.raises(UnsupportedOperationError, match=r"add\.outer"):
        trace(lambda x: np.add.outer(x[0], x[0]), 1)
    with pytest.raises(UnsupportedOperationError, match="out"):
        trace(lambda x: np.sin(x[0], out=np.empty(())), 1)


@pytest.mark.parametrize(
    ("op", "needle"),
    [
        (lambda t: t < 1.0, "'<'"),
        (lambda t: t <= 1.0, "'<='"),
        (lambda t: t > 1.0, "'>'"),
        (lambda t: t >= t, "'>='"),
        (lambda t: t == 1.0, "'=='"),
        (lambda t: 1.0 > t, "'<'"),  # reflected
    ],
)
def test_comparisons_name_the_operator(op, needle):
    with pytest.raises(UnsupportedOperationError, match=needle) as info:
        trace(lambda x: op(x[0]), 1)
    assert "np.maximum" in str(info.value)


@pytest.mark.parametrize(
    ("op", "needle"),
    [
        (bool, "bool"),
        (int, "int"),
        (float, "float"),
        (math.sin, "float"),  # math functions convert to float
        (round, "round"),
        (lambda t: [1, 2][t], "index"),
        (lambda t: 1.0 if t else 0.0, "bool"),
        (lambda t: t // 2, "floor_divide"),
        (lambda t: t % 2, "remainder"),
    ],
)
def test_value_dependent_operations_name_the_operation(op, needle):
    with pytest.raises(UnsupportedOperationError, match=needle):
        trace(lambda x: op(x[0]), 1)


def test_np_maximum_on_object_array_explains():
    with pytest.raises(UnsupportedOperationError, match="from jacacc.tracer import maximum"):
        trace(lambda x: np.maximum(x, 0.0), 2)


def test_unsupported_operands():
    with pytest.raises(UnsupportedOperationError, match="complex"):
        trace(lambda x: x[0] * 1j, 1)
    with pytest.raises(TypeError):
        trace(lambda x: x[0] + "a", 1)


# --------------------------------------------------------------------------- batch evaluation
def test_batch_values_and_partials_match_per_point_loops():
    traced = trace(f_mixed, 3)
    rng = np.random.default_rng(0)
    pts = rng.uniform(-1.0, 1.0, size=(4, 5, 3))
    vals, parts = traced.values(pts), traced.partials(pts)
    assert vals.shape == (4, 5, traced.n_outputs)
    assert parts.shape == (4, 5, traced.graph.n_edges)
    for idx in np.ndindex(4, 5):
        np.testing.assert_allclose(vals[idx], traced.values(pts[idx]), rtol=1e-14)
        np.testing.assert_allclose(parts[idx], traced.partials(pts[idx]), rtol=1e-14)
    jac = traced.reference_jacobian(pts)
    np.testing.assert_allclose(jac[2, 3], traced.reference_jacobian(pts[2, 3]), rtol=1e-14)


def test_node_values_and_linearize():
    traced = trace(lambda a, b: np.exp(a * b), 2)
    values = traced.node_values([1.0, 2.0])
    assert set(values) == {"x0", "x1", "v1", "y0"}
    assert float(values["y0"]) == pytest.approx(math.exp(2.0))
    lcg = traced.linearize([1.0, 2.0])
    assert isinstance(lcg, CompGraph) and lcg.is_numeric
    assert lcg.edges == traced.graph.edges
    np.testing.assert_allclose(lcg.partial_array(), traced.partials([1.0, 2.0]))
    assert lcg.digraph.nodes["v1"]["op"] == "mul"  # node attributes survive
    with pytest.raises(TraceError, match="one point"):
        traced.linearize([[1.0, 2.0]])
    with pytest.raises(TraceError, match="shape"):
        traced.values([1.0, 2.0, 3.0])


def test_repr():
    def my_function(x):
        return np.sin(x[0])

    assert (
        repr(trace(my_function, 1)) == "Traced of my_function(inputs=1, outputs=1, intermediates=0, edges=1)"
    )


# --------------------------------------------------------------------------- rules table
def test_rule_lookup_by_ufunc_name():
    assert get_rule("true_divide") is get_rule("div") is get_rule(np.divide.__name__)
    assert get_rule("absolute") is get_rule("fabs") is get_rule("abs")
    assert get_rule("power").name == "pow"
    with pytest.raises(UnsupportedOperationError, match="'floor'"):
        get_rule("floor")


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule_forward_and_arity(name):
    rule = RULES[name]
    assert rule.arity in (1, 2, 3)
    args = [np.array([0.3, 0.6])] * rule.arity if name != "arccosh" else [np.array([1.3, 1.6])]
    with np.errstate(all="ignore"):
        out = rule(*args)
    assert np.shape(out) == (2,)


def test_pow_partials_specialize_constants():
    x, y, out = Var("x"), Var("y"), Var("out")
    pow_rule = get_rule("pow")
    assert [str(p) for p in pow_rule.partials((x, Const(3.0)), out)] == ["3*x**2", "ZERO"]
    assert [str(p) for p in pow_rule.partials((x, Const(2.0)), out)] == ["2*x", "ZERO"]
    assert pow_rule.partials((Const(2.0), y), out) == [ZERO, math.log(2.0) * out]


def test_register_rule_and_use_it():
    def forward(v):
        return v**3 / 3.0

    rule = register_rule("cube_third", 1, forward, lambda v, out: [v**2], doc="x**2")
    try:
        with pytest.raises(RegistryError, match="already registered"):
            register_rule("cube_third", 1, forward, lambda v, out: [v**2])
        traced = trace(lambda x: jt.apply_rule("cube_third", x[0] * 2.0), 1)
        assert "cube_third" in ops_of(traced)
        np.testing.assert_allclose(traced([1.5]), [9.0])
        np.testing.assert_allclose(traced.reference_jacobian([1.5]), [[18.0]])
        assert rule.doc == "x**2"
    finally:
        unregister_rule("cube_third")
    assert "cube_third" not in RULES


def test_rule_returning_numbers_gives_expr_partials():
    register_rule("shift_scale", 1, lambda v: 2.0 * v + 1.0, lambda v, out: [2])
    try:
        traced = trace(lambda x: jt.apply_rule("shift_scale", x[0]), 1)
        assert traced.graph.partial("x0", "y0") == Const(2.0)
        assert traced.graph.partials_kind == "symbolic"
        np.testing.assert_allclose(traced.reference_jacobian([3.0]), [[2.0]])
    finally:
        unregister_rule("shift_scale")


# --------------------------------------------------------------------------- expressions
def test_expr_str_is_readable():
    v1, v2, v3, v5 = Var("v1"), Var("v2"), Var("v3"), Var("v5")
    assert str(cos(v3)) == "cos(v3)"
    assert str(2 * v1) == "2*v1"
    assert str(v1 * 2) == "2*v1"
    assert str(ge(v2, v5)) == "(v2 >= v5)"
    assert str(-sin(v1)) == "-sin(v1)"
    assert str((v1 + v2) * v3) == "(v1 + v2)*v3"
    assert str(v1 - (v2 - v3)) == "v1 - (v2 - v3)"
    assert str(v1 / (v2 * v3)) == "v1/(v2*v3)"
    assert str(v1 ** (v2**v3)) == "v1**v2**v3"
    assert str((v1**v2) ** v3) == "(v1**v2)**v3"
    assert str(Const(-2.0) ** v1) == "(-2)**v1"
    assert str(0.5 / v1) == "0.5/v1"
    assert str(Var(3) + 1) == "3 + 1"  # integer node ids print bare
    assert repr(Var("x") + 1) == "Apply('add', (Var('x'), Const(1.0)))"


def test_expr_simplification():
    x = Var("x")
    assert Const(1.0) * x == x
    assert Const(0.0) * x == Const(0.0)
    assert x * 0 == Const(0.0)
    assert x + Const(0.0) == x and Const(0.0) + x == x
    assert Const(2.0) * Const(3.0) == Const(6.0)
    assert apply("sin", Const(0.0)) == Const(0.0)
    assert x - x == Const(0.0)
    assert x + x == 2 * x
    assert 2 * (3 * x) == 6 * x
    assert x**1 == x and x**0 == Const(1.0)
    assert apply("neg", -x) == x
    assert x / 1 == x
    assert -1 * x == -x
    assert Apply("mul", (Const(1.0), x)) != x  # direct construction does not simplify
    assert np.float64(2.0) * x == 2 * x  # NumPy scalars defer to Expr


def test_expr_equality_and_hash_by_structure():
    a = cos(Var("v1")) * Var(2) + 1
    b = cos(Var("v1")) * Var(2) + 1
    assert a == b and hash(a) == hash(b)
    assert len({a, b, a + 0}) == 1
    assert Var("1") != Var(1)
    assert Const(1.0) != Var("x")
    assert a.variables == frozenset({"v1", 2})
    with pytest.raises(AttributeError):
        a.fn = "sub"


def test_expr_evaluate_is_vectorized():
    x, y = Var("x"), Var(0)
    e = exp(-(x**2)) * ge(x, y) + lt(x, y) * sin(y)
    xs = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    ys = np.linspace(0.5, -0.5, 4)  # broadcasts against xs
    got = e.evaluate({"x": xs, 0: ys})
    want = np.where(xs >= ys, np.exp(-(xs**2)), np.sin(ys))
    assert got.shape == (3, 4)
    np.testing.assert_allclose(got, want)
    assert ge(x, y).evaluate({"x": 1.0, 0: 0.0}) == 1.0
    assert Const(2.5).evaluate({}) == 2.5
    with pytest.raises(KeyError, match="'x'"):
        x.evaluate({})


def test_every_expression_function_evaluates():
    values = {"a": np.array([0.3, 0.6]), "b": np.array([1.2, 1.4])}
    for name, spec in FUNCTIONS.items():
        args = [Var("b")] if name == "arccosh" else [Var("a"), Var("b"), Var("a")][: spec.arity]
        with np.errstate(all="ignore"):
            got = Apply(name, tuple(args)).evaluate(values)
        assert np.shape(got) == (2,), name


def test_numpy_printer_round_trips_through_eval():
    a, b = Var("a"), Var("b")
    exprs = [
        cos(a) * ge(a, b) - 0.5 / b,
        Apply("erf", (a,)) + Apply("hypot", (a, b)),
        Const(-2.0) ** a + a ** Const(-1.5) - -a,
        Apply("abs", (a - b,)) / (a * b),
    ]
    printer = NumpyPrinter("values[{}]")
    values = {"a": np.array([0.3, 1.6]), "b": np.array([1.2, -0.4])}
    namespace = {"np": np, "scipy": importlib.import_module("scipy"), "values": values}
    for e in exprs:
        src = printer.doprint(e)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(eval(src, namespace), e.evaluate(values), err_msg=src)


def test_printer_subclass_hook():
    class UpperVars(ExprPrinter):
        def print_var(self, expr):
            return str(expr.name).upper()

    assert UpperVars().doprint(cos(Var("v3")) * 2) == "2*cos(V3)"
    assert cos(Var("v3")).to_string(UpperVars()) == "cos(V3)"


def test_expr_is_the_edge_partial_type():
    traced = trace(lambda x: np.tanh(x[0]), 1)
    p = traced.graph.partial("x0", "y0")
    assert isinstance(p, Expr)
    assert str(p) == "1 - y0**2"
    assert traced.graph.to_json()["edges"] == [["x0", "y0", "1 - y0**2"]]
