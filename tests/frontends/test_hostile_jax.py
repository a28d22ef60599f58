"""Hostile inputs to the JAX front end (issue 24): custom derivative rules at their tie
points, graphs too large to build, non-real arguments and ``jax.random``.

Every derivative is compared with ``jax.jacfwd`` (``jax.jacrev`` for ``custom_vjp``,
which forward mode refuses) in float64; nothing the code computes is hard-coded."""

from __future__ import annotations

import time

import numpy as np
import pytest

import jacacc
from jacacc.errors import DTypeError, SizeLimitError, UnsupportedOperationError
from jacacc.jaxpr import DEFAULT_MAX_EDGES, estimate_edges
from tests.frontends.test_jaxpr import reference

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

TOL = {"rtol": 1e-10, "atol": 1e-10}


def check(f, x, jacobian=None):
    """``from_jax(f, x)`` has JAX's values and derivative at ``x``, by a plan and the dense chain rule."""
    traced = jacacc.from_jax(f, x)
    x = np.asarray(x, dtype=float)
    values, jac = reference(f, x, jacobian)
    np.testing.assert_allclose(traced(x.ravel()), values, **TOL)
    np.testing.assert_allclose(traced.jacobian(x.ravel()), jac, **TOL)
    np.testing.assert_allclose(traced.reference_jacobian(x.ravel()), jac, **TOL)
    return traced


# ------------------------------------------------------------------ 1. custom derivative rules
#: the kinks of the activations (relu, leaky_relu, elu ... at 0; hard_tanh at ±1; relu6 at 0
#: and 6; hard_sigmoid / hard_silu at ±3) and points between them
TIES = np.array([0.0, 1.0, -1.0, 3.0, -3.0, 6.0, 0.5, -0.7, 2.0, -4.0])

_ACTIVATIONS = [
    "relu", "relu6", "softplus", "log_sigmoid", "sigmoid", "silu", "swish", "elu", "selu", "celu",
    "leaky_relu", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "squareplus", "mish",
    "sparse_plus", "sparse_sigmoid", "soft_sign", "log_softmax", "softmax", "logsumexp", "standardize",
    "logmeanexp", "glu", "identity",
]
ACTIVATIONS = [(name, getattr(jax.nn, name)) for name in _ACTIVATIONS if hasattr(jax.nn, name)]
ACTIVATIONS += [
    ("gelu_tanh", lambda x: jax.nn.gelu(x, approximate=True)),
    ("gelu_erf", lambda x: jax.nn.gelu(x, approximate=False)),
    ("logaddexp_tie", lambda x: jnp.logaddexp(x, x[::-1])),  # logaddexp(a, a) at the middle and x = 0
    ("logaddexp_const", lambda x: (jnp.logaddexp(x, 0.0), jnp.logaddexp(x, -jnp.inf), jnp.logaddexp(0.0, x))),
]


@pytest.mark.parametrize(("name", "f"), ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_at_its_ties_matches_jacfwd(name, f):
    check(f, TIES)
    check(f, np.zeros(4))  # every input at the tie at once (softmax, logsumexp ... of equal entries)


def test_softplus_and_logaddexp_use_their_custom_rules():
    # the cases of the issue: the primal max(x, 0) + log1p(exp(-|x|)) has a kink at 0 whose
    # one-sided derivative is not the rule's (and JAX's)
    traced = jacacc.from_jax(jax.nn.softplus, np.zeros(1))
    np.testing.assert_allclose(traced.jacobian(np.zeros(1)), reference(jax.nn.softplus, np.zeros(1))[1], **TOL)
    pair = lambda x: jnp.logaddexp(x[0], x[1])  # noqa: E731
    traced = jacacc.from_jax(pair, np.zeros(2))
    for a in (0.0, 1.5, -2.0):
        np.testing.assert_allclose(traced.jacobian([a, a]), reference(pair, [a, a])[1], **TOL)


def test_log1mexp_on_its_domain():
    if not hasattr(jax.nn, "log1mexp"):
        pytest.skip("jax.nn.log1mexp is not in this JAX")
    check(jax.nn.log1mexp, np.array([np.log(2.0), 0.1, 1.0, 5.0]))


ALL_IN_ONE_NAMES = ["relu", "relu6", "softplus", "log_sigmoid", "mish", "hard_silu", "hard_tanh", "leaky_relu"]


def _all_in_one(x):
    outs = [getattr(jax.nn, name)(x) for name in ALL_IN_ONE_NAMES if hasattr(jax.nn, name)]
    return (*outs, jnp.logaddexp(x, x[::-1]), jax.nn.softmax(x))


def _few(x):
    return jax.nn.softplus(x), jax.nn.relu(x), jax.nn.log_sigmoid(x), jnp.logaddexp(x, x[::-1])


@pytest.mark.parametrize(("backend", "f", "x"), [
    ("numpy", _all_in_one, np.array([0.0, 1.0, -1.0, 3.0, 6.0, -3.0, 0.0])),
    # small: numba compiles every statement (15 s even so)
    pytest.param("numba", _few, np.array([0.0, 1.0, 0.0]), marks=pytest.mark.slow),
])
def test_compiled_kernels_keep_the_custom_rules(backend, f, x):
    if backend == "numba":
        pytest.importorskip("numba")
    traced = jacacc.from_jax(f, x)
    # the tie points themselves, and points near them
    pts = np.stack([x, x + 1e-3, x - 0.25, np.zeros_like(x)])
    expected = [reference(f, p) for p in pts]
    kernel = jacacc.compile(traced, backend=backend)
    values, jacobians = kernel.values_and_jacobians(pts)
    np.testing.assert_allclose(values, np.stack([v for v, _ in expected]), **TOL)
    np.testing.assert_allclose(jacobians, np.stack([j for _, j in expected]), **TOL)
    np.testing.assert_allclose(traced.jacobian(pts), jacobians, **TOL)


def test_user_custom_jvp_overrides_the_primal():
    # a rule that is not the primal's derivative at all: the rule wins, as in jax.jacfwd
    @jax.custom_jvp
    def f(v):
        return jnp.abs(v) * v[::-1]

    @f.defjvp
    def _(primals, tangents):
        (v,), (dv,) = primals, tangents
        return f(v), 3.0 * jnp.cos(v) * dv + v * dv[::-1]

    traced = check(lambda x: jnp.sin(f(x)) + f(x**2), np.array([0.0, -0.5, 2.0]))
    assert "stop_gradient" in {op for _, op in traced.graph.digraph.nodes(data="op")}


def test_nested_custom_rules_and_custom_rules_in_loops():
    @jax.custom_jvp
    def g(v):
        return jax.nn.relu(v) * 2.0  # a custom rule inside a custom rule's primal

    g.defjvp(lambda p, t: (g(p[0]), jax.nn.softplus(p[0]) * t[0]))
    body = lambda c, xi: (jax.nn.softplus(c * xi), g(c))  # noqa: E731
    check(lambda x: (g(x), jax.lax.scan(body, x[0], x[1:])), np.array([0.0, 0.0, 1.0, -2.0]))


def test_custom_vjp_uses_its_backward_rule():
    @jax.custom_vjp
    def f(v):
        return jnp.maximum(v, 0.0) * v[0]

    def fwd(v):
        return f(v), v

    def bwd(v, g):  # deliberately not the primal's derivative
        return (jnp.cos(v) * g + jnp.sum(g * v) * jnp.ones_like(v),)

    f.defvjp(fwd, bwd)
    check(lambda x: jnp.tanh(f(x)), np.array([0.0, 1.0, -1.0]), jacobian=jax.jacrev)


def test_custom_vjp_whose_backward_rule_jax_cannot_transpose():
    # relu(g) - relu(-g) is g, but made of nonlinear primitives: the Jacobian then comes
    # from one VJP per output element
    @jax.custom_vjp
    def f(v):
        return jnp.sin(v) * v[::-1]

    f.defvjp(lambda v: (f(v), v), lambda v, g: (jnp.exp(v) * (jax.nn.relu(g) - jax.nn.relu(-g)),))
    check(f, np.array([0.3, 0.0, -1.0]), jacobian=jax.jacrev)


@jax.custom_jvp
def _safe_norm(v):
    return jnp.sqrt(jnp.sum(v**2))


@_safe_norm.defjvp
def _safe_norm_jvp(primals, tangents):
    (v,), (dv,) = primals, tangents
    n = _safe_norm(v)
    return n, jnp.where(n > 0, jnp.sum(v * dv) / jnp.where(n > 0, n, 1.0), 0.0)


def test_safe_rule_whose_primal_has_an_infinite_partial_compiled():
    # the primal's sqrt has partial inf at 0; the compiled kernel skips the structurally zero
    # (stop_gradient) edges in front of it and gives the rule's 0
    traced = jacacc.from_jax(_safe_norm, np.zeros(3))
    pts = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 2.0]])
    kernel = jacacc.compile(traced, backend="numpy")
    np.testing.assert_allclose(kernel(pts), np.stack([reference(_safe_norm, p)[1] for p in pts]), **TOL)


def test_safe_rule_whose_primal_has_an_infinite_partial_numeric():
    # the stop_gradient edges are structural zeros: no plan multiplies their 0 by sqrt's inf
    traced = jacacc.from_jax(_safe_norm, np.zeros(3))
    want = reference(_safe_norm, np.zeros(3))[1]
    with np.errstate(all="ignore"):
        for method in ("markowitz", "forward", "reverse"):
            np.testing.assert_allclose(traced.jacobian(np.zeros(3), method=method), want, **TOL)
        np.testing.assert_allclose(traced.reference_jacobian(np.zeros(3)), want, **TOL)


# ------------------------------------------------------------------ 2. the size budget
def test_a_graph_too_large_to_build_is_refused_quickly():
    start = time.perf_counter()
    with pytest.raises(SizeLimitError, match=r"about 6,[0-9,]+ edges .*max_edges=5,000,000.*jacacc\.tensor"):
        jacacc.from_jax(lambda x: x @ x.T, np.ones((120, 120)))
    assert time.perf_counter() - start < 5.0


def test_the_estimate_is_close_to_the_graph_built():
    cases = [
        (lambda x: x @ x.T, np.ones((12, 12))),
        (lambda x: jnp.einsum("bij,bjk->bik", x, x), np.ones((2, 4, 4))),
        (lambda x: jnp.sum(jnp.tanh(x[:, None] * x[None, :]), axis=0), np.ones(9)),
        (lambda x: jax.lax.scan(lambda c, xi: (jnp.sin(c) * xi, c**2), x[:3], x.reshape(4, 3)), np.ones(12)),
        (lambda x: jax.nn.softplus(x) * jnp.cumsum(x), np.ones(16)),
    ]
    for f, x in cases:
        edges, estimate = jacacc.from_jax(f, x).graph.n_edges, estimate_edges(f, x)
        assert 0.5 * estimate <= edges <= 1.5 * estimate, (edges, estimate)  # an estimate, not a count


def test_max_edges_lowers_and_raises_the_budget():
    f, x = (lambda x: x @ x.T), np.ones((6, 6))
    estimate = estimate_edges(f, x)
    assert estimate < DEFAULT_MAX_EDGES
    traced = check(f, np.arange(36.0).reshape(6, 6) / 10)  # under the default budget
    assert traced.graph.n_edges <= estimate
    with pytest.raises(SizeLimitError, match=f"max_edges={estimate - 1:,}"):
        jacacc.from_jax(f, x, max_edges=estimate - 1)
    assert jacacc.from_jax(f, x, max_edges=estimate).graph.n_edges == traced.graph.n_edges
    assert jacacc.from_jax(f, x, max_edges=None).graph.n_edges == traced.graph.n_edges
    with pytest.raises(jacacc.TraceError, match="max_edges"):
        jacacc.from_jax(f, x, max_edges=-1)


def test_a_loop_whose_trip_count_is_known_only_when_running_is_checked_while_running():
    def f(x):
        n = jnp.sum(jnp.arange(40)) // 10  # 78 steps, not static: a while loop
        return jax.lax.fori_loop(0, n, lambda i, v: v @ x, x)

    x = np.ones((4, 4))
    assert estimate_edges(f, x) < 2_000  # the jaxpr gives one step
    with pytest.raises(SizeLimitError, match="while interpreting"):
        jacacc.from_jax(f, x, max_edges=2_000)


# ------------------------------------------------------------------ 3. unchecked input
@pytest.mark.parametrize(
    ("x", "dtype"),
    [
        (np.array(["a"]), "<U1"),
        (np.array(["1.5"]), "<U3"),  # numeric text is not a number either
        (np.array([b"a"]), "|S1"),
        (np.array([1.0 + 2.0j]), "complex128"),
        (np.array([object()]), "object"),
        (np.array([1j, 2.0], dtype=object), "object"),
    ],
)
def test_non_real_argument_is_refused_naming_its_dtype(x, dtype):
    with pytest.raises(DTypeError, match=f"x has dtype {dtype}") as info:
        jacacc.from_jax(jnp.sin, x)
    assert "\n" not in str(info.value)


def test_real_arguments_of_other_dtypes_are_accepted():
    for x in (np.array([1, 2], dtype=np.int32), np.array([True, False]), np.array([0.5, 2], dtype=object),
              np.array([0.5, 2.0], dtype=np.float32)):
        traced = jacacc.from_jax(jnp.sin, x)
        np.testing.assert_allclose(traced.jacobian(np.asarray(x, dtype=float)),
                                   reference(jnp.sin, np.asarray(x, dtype=float))[1], **TOL)


def _legacy_key(x):
    return x * jax.random.normal(jax.random.PRNGKey(0), x.shape)


def _derived_keys(x):
    k1, k2 = jax.random.split(jax.random.fold_in(jax.random.key(1), 7))
    return jnp.sin(x) * jax.random.uniform(k1, x.shape) + jax.random.bernoulli(k2, 0.5, x.shape) * x**2


def _keys_in_a_scan(x):
    def body(carry, _):
        key, acc = carry
        key, sub = jax.random.split(key)
        return (key, acc * jax.random.normal(sub, x.shape) + x), None

    return jax.lax.scan(body, (jax.random.key(0), x), None, length=3)[0][1]


def _permutation(x):
    return x * jax.random.permutation(jax.random.PRNGKey(3), x)


@pytest.mark.parametrize("f", [_legacy_key, _derived_keys, _keys_in_a_scan, _permutation])
def test_random_numbers_from_a_constant_key_are_constants(f):
    check(f, np.array([0.3, -0.2, 1.0, 2.5]))


def test_sort_by_the_input_is_still_refused_by_name():
    with pytest.raises(UnsupportedOperationError, match="'sort' with sort keys that depend on the input"):
        jacacc.from_jax(jnp.sort, np.array([0.3, -0.2]))


@pytest.mark.parametrize("name", ["relu", "softplus", "sigmoid", "log_sigmoid", "silu"])
def test_custom_rules_keep_values_at_infinite_inputs(name):
    # the tangent a custom rule runs on is a vertex of value 0 (not x - stop_gradient(x),
    # which is inf - inf = NaN at an infinite input)
    f = getattr(jax.nn, name)
    traced = jacacc.from_jax(f, np.zeros(3))
    x = np.array([np.inf, -np.inf, 0.5])
    with jax.enable_x64(True), np.errstate(all="ignore"):
        want = np.asarray(f(jnp.asarray(x)))
        np.testing.assert_allclose(traced(x), want, **TOL)
        np.testing.assert_allclose(jacacc.compile(traced, backend="numpy").values_and_jacobians(x[None])[0][0],
                                   want, **TOL)
