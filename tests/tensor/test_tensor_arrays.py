"""NumPy's array functions in jacacc.tensor (jacacc/tensor/arrays.py) against JAX in float64.

Reductions (sum, mean, prod with zeros, max/min with ties, var/std), shape changes, basic and
advanced indexing with scatter-add transposes, joins and splits, tensordot/matmul/dot/kron,
cumsum, sort, pad and diff: values against NumPy, Jacobians against ``jax.jacfwd`` and Hessians
against ``jax.hessian`` at rtol 1e-9 in forward, reverse and cross-country mode, compressed
Hessians, every mode of ``jt.modes()`` on one small function per family, hypothesis-drawn shapes
(zero-size axes included), clear one-line errors, and autograd's two classic examples written
fresh: an MLP whose parameters are one flat vector unpacked by slicing and reshape, and the
vectorized Rosenbrock function with its Hessian.
"""

from __future__ import annotations

import functools

import jax_reference
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import jacacc.tensor as jt
from jacacc.errors import OrderError, TraceError, UnsupportedOperationError

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

pytestmark = pytest.mark.usefixtures("float64_jax")

TOL = {"rtol": 1e-9, "atol": 1e-11}
MAIN_MODES = ["forward", "reverse", "cross_country"]
HYPOTHESIS = settings(max_examples=10, deadline=None, derandomize=True,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

rng0 = np.random.default_rng(25)
x6 = rng0.normal(size=6)
x23 = rng0.normal(size=(2, 3))
x234 = rng0.normal(size=(2, 3, 4))
TIES = np.array([1.0, 3.0, 3.0, 2.0, -1.0, -1.0])
ZEROS = np.array([[0.0, 2.0, -3.0], [0.0, 0.0, 4.0], [1.5, -2.0, 3.0], [0.0, 0.0, 0.0]])
MASK = np.array([True, False, True, True, False, True])


# ---------------------------------------------------------------------------- references
def _jax_args(x):
    return jnp.asarray(x, dtype=jnp.float64)


@functools.cache
def _reference(f, what, shape):
    """``jax.jacfwd`` / ``jax.hessian`` of ``f(x, jnp)``, compiled once per function and shape."""
    g = functools.partial(f, xp=jnp)
    return jax_reference.jit(jax.jacfwd(g) if what == "jacobian" else jax.hessian(g)).lower(
        jax.ShapeDtypeStruct(shape, jnp.float64)).compile()


def jax_jacobian(f, x):
    return np.asarray(_reference(f, "jacobian", np.shape(x))(_jax_args(x)))


def jax_hessian(f, x):
    return np.asarray(_reference(f, "hessian", np.shape(x))(_jax_args(x)))


def _scalar(f, x):
    """A scalar function of ``f``'s value with curvature of its own: ``Σ w·sin(f(x))``."""
    w = np.linspace(0.5, 1.5, int(np.prod(np.shape(f(x, np))))).reshape(np.shape(f(x, np)))

    def s(x, xp=np):
        return xp.sum(w * xp.sin(f(x, xp)))

    return s


def _np(f):
    return functools.partial(f, xp=np)


@pytest.fixture
def quick_anneal(monkeypatch):
    """``anneal`` with a 0.25 s time limit: beyond 12 intermediates it otherwise spends its 10 s default
    on every derivative pass (orders only change the cost, not the value checked here)."""
    from jacacc.orders import registry
    from jacacc.orders.local_search import anneal_vertex

    monkeypatch.setitem(registry._METHODS["vertex"], "anneal", functools.partial(anneal_vertex, time_limit=0.25))


# ---------------------------------------------------------------------------- every operation against JAX
CASES = [  # several operations of one family per function: each costs a JAX compile
    # reductions
    ("sum mean keepdims", lambda x, xp: xp.sin(xp.sum(x ** 2, axis=(0, -1), keepdims=True)) * x
     + xp.cos(x).mean(axis=-1, keepdims=True) + xp.mean(xp.sin(x), axis=1)[:, None, :] * (x ** 3).sum(axis=1)[:, None],
     x234),
    ("max ties", lambda x, xp: xp.max(x.reshape(2, 3), axis=1) ** 2, TIES),
    ("min amin ties", lambda x, xp: xp.min(x.reshape(3, 2), axis=0) ** 3 + xp.amin(x), TIES),
    ("amax methods", lambda x, xp: xp.amax(x) * xp.sin(x) + x.max(axis=0) * x.min(axis=1, keepdims=True), x23),
    ("prod with zeros", lambda x, xp: xp.prod(x, axis=1) + xp.prod(x, axis=1) ** 2 + xp.prod(x, axis=0).sum(), ZEROS),
    ("prod", lambda x, xp: xp.prod(x) * xp.sin(x).prod(axis=(0, 2)), x234),
    ("var std", lambda x, xp: xp.var(x, axis=1, ddof=1).sum() * xp.std(x, axis=(0, 2)) * x.var()
     + x.std(axis=0, ddof=1).sum(axis=1), x234),
    # shape changes
    ("reshape", lambda x, xp: xp.sin(xp.reshape(x, (3, -1))) @ x[:2, 0]
     + xp.reshape(xp.sin(x) * x, (3, 2), order="F")[:, 0] ** 2, x23),
    ("reshape ravel flatten", lambda x, xp: xp.sin(x.reshape(4, 6)) * x.reshape((6, 4)).T
     + (xp.sin(x.ravel()) * x.flatten() + xp.ravel(x, order="F")).reshape(4, 6), x234),
    ("unit axes broadcast_to", lambda x, xp: xp.squeeze(xp.expand_dims(xp.sin(x), (0, 2)), axis=0) * x[:, None, :]
     + (xp.broadcast_to(xp.sin(x), (4, 2, 3)) * xp.arange(4.0)[:, None, None]).sum(axis=0)[:, None] + x[None][0][:, None],
     x23),
    ("transposes", lambda x, xp: xp.moveaxis(xp.sin(x), 0, -1) * xp.swapaxes(x, 0, 2).transpose(1, 0, 2)
     + xp.transpose(xp.sin(x), (1, -1, 0)) * x.T.transpose(1, 0, 2), x234),
    # indexing
    ("basic index", lambda x, xp: xp.sin(x[1, ::-2, None, 1:3]) * x[..., -1, None][1], x234),
    ("integer arrays and mask", lambda x, xp: xp.sin(x[np.array([0, 2, 2, 5])]) * x[np.array([[1, 1], [0, 3]])].sum()
     + xp.sin(x[MASK]) ** 2, x6),
    ("2-d boolean mask", lambda x, xp: xp.cos(x[x23 > 0]) * xp.sum(x[:, np.array([True, False, True])]), x23),
    ("advanced mixed", lambda x, xp: xp.sin(x[np.array([0, 1]), :, np.array([3, 0])]) * x[:, np.array([2, 2, 0])].sum()
     + xp.cos(x[1:, np.array([0, 2]), np.array([1, 3])]).sum(), x234),
    # joining and splitting
    ("concatenate stack", lambda x, xp: xp.concatenate([
        xp.sin(xp.concatenate([x, x ** 2, np.ones((2, 1))], axis=1)).ravel(), xp.cos(xp.concatenate([x, x.T], axis=None)),
        (xp.stack([x, xp.sin(x)], axis=-1) ** 2).ravel()]), x23),
    ("hstack vstack", lambda x, xp: xp.sin(xp.hstack([x, x])) * 2 + xp.vstack([x, x[0]]).sum()
     + xp.sin(xp.hstack([x[0], x[1, :2]])).sum(), x23),
    ("split", lambda x, xp: xp.sin(xp.split(x, 3, axis=1)[1]) * xp.array_split(x.ravel(), 4)[0][0]
     + xp.split(xp.sin(x), [1, 2], axis=1)[2] * x[:, :1], x23),
    # products
    ("tensordot", lambda x, xp: xp.tensordot(xp.sin(x), x, axes=([0, 2], [0, 2]))
     + xp.tensordot(x[0], xp.sin(x[1]).T, axes=1), x234),
    ("matmul broadcast", lambda x, xp: xp.sin(x) @ x[0].T[None] + (x[0, :, 0] @ xp.sin(x)).sum()
     + (x[1, 0] @ x[0].T)[None, None, :], x234),
    ("matmul vectors", lambda x, xp: xp.sin(x) @ x[0] + x[1] @ xp.cos(x).T, x234[0]),
    ("dot", lambda x, xp: xp.dot(xp.sin(x), x[0, 0]) + xp.dot(x[0], xp.cos(x)).sum(), x234[:, :, :3]),
    ("kron", lambda x, xp: xp.kron(xp.sin(x), x).sum() * xp.kron(x[0], xp.cos(x[1])) ** 2, x23),
    # cumsum, sort, pad, diff
    ("cumsum", lambda x, xp: xp.sin(xp.cumsum(x ** 2, axis=1))
     + (xp.cumsum(xp.sin(x)) * x.cumsum(axis=0).ravel()).reshape(2, 3), x23),
    ("sort", lambda x, xp: xp.sort(xp.sin(x), axis=0) * x + xp.sort(x ** 3, axis=None).reshape(2, 3) ** 2, x23),
    ("sort ties", lambda x, xp: xp.sort(x) * xp.arange(6.0), TIES),
    ("pad", lambda x, xp: xp.sin(xp.pad(x ** 2, ((1, 0), (2, 1)))) * xp.sum(xp.sin(xp.pad(x, 1, constant_values=0.5)) ** 2),
     x23),
    ("diff", lambda x, xp: xp.diff(xp.sin(x), n=2, axis=0) ** 2 + xp.diff(x, axis=1).sum(), x234),
    ("diff prepend append", lambda x, xp: xp.diff(x ** 2, prepend=0.5, append=x[-1:]), x6),
]


def _against_jax(case, jacobian_modes, hessian_modes):
    _, f, x = case
    F = _np(f)
    value, _ = jt.vjp(F, x)
    np.testing.assert_allclose(value, F(x), **TOL)
    J = jax_jacobian(f, x)
    for mode in jacobian_modes:
        np.testing.assert_allclose(jt.jacobian(F, mode=mode)(x), J, **TOL, err_msg=mode)
    s = _scalar(f, x)
    H = jax_hessian(s, x)
    for mode in hessian_modes:
        np.testing.assert_allclose(jt.hessian(s, mode=mode)(x), H, **TOL, err_msg=mode)
    np.testing.assert_allclose(jt.hessian(s, compress=True)(x).dense(), H, **TOL)


@pytest.mark.parametrize(("case", "k"), [(c, k) for k, c in enumerate(CASES)], ids=[c[0] for c in CASES])
def test_against_jax(case, k):
    """Each case's Jacobian in one mode and its Hessian in the next (the modes rotate over the
    cases, so each mode meets every family across the list); every mode on every case:
    :func:`test_against_jax_in_every_mode`."""
    _against_jax(case, [MAIN_MODES[k % 3]], [MAIN_MODES[(k + 1) % 3]])


@pytest.mark.exhaustive
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_against_jax_in_every_mode(case):
    _against_jax(case, MAIN_MODES, MAIN_MODES)


VECTOR_HESSIANS = ["amax methods", "prod with zeros", "reshape", "basic index", "integer arrays and mask",
                   "concatenate stack", "sort", "diff prepend append"]


@pytest.mark.parametrize("name", VECTOR_HESSIANS)
def test_hessian_of_a_vector_valued_function(name):
    """The Hessian of every output at once (shape out + x + x), written out and compressed."""
    _, f, x = next(c for c in CASES if c[0] == name)
    H = jax_hessian(f, x)
    np.testing.assert_allclose(jt.hessian(_np(f))(x), H, **TOL)
    np.testing.assert_allclose(jt.hessian(_np(f), mode="reverse", compress=True)(x).dense(), H, **TOL)


# ---------------------------------------------------------------------------- every mode
SMALL = [  # one small scalar function per family, so the search-based orders stay quick
    ("mean keepdims", lambda x, xp: xp.sum(xp.mean(x, axis=0, keepdims=True) * x ** 2), x23),
    ("max ties", lambda x, xp: xp.sum(xp.max(x.reshape(2, 3), axis=1) ** 3), TIES),
    ("prod with zeros", lambda x, xp: xp.sum(xp.prod(x, axis=1)), ZEROS[:2]),
    ("var", lambda x, xp: xp.var(x, ddof=1), x6),
    ("reshape", lambda x, xp: xp.sum(x.reshape(3, 2)[0] ** 3), x23),
    ("slices", lambda x, xp: xp.sum(x[1:] * x[::-2][:2] ** 2), x6[:3]),
    ("gather", lambda x, xp: xp.sum(x[np.array([0, 0, 2])] ** 3), x6[:3]),
    ("concatenate", lambda x, xp: xp.sum(xp.concatenate([x, x ** 2]) ** 2), x6[:3]),
    ("cumsum", lambda x, xp: xp.sum(xp.cumsum(x) ** 3), x6[:3]),
    ("sort", lambda x, xp: xp.sum(xp.sort(x) ** 3 * xp.arange(3.0)), x6[:3]),
    ("pad", lambda x, xp: xp.sum(xp.pad(x, 1) ** 3 * xp.arange(5.0)), x6[:3]),
    ("diff", lambda x, xp: xp.sum(xp.diff(x) ** 3), x6[:3]),
    ("matmul", lambda x, xp: xp.sum(xp.sin(x[None] @ x.T[None])), x23),
    ("kron", lambda x, xp: xp.sum(xp.kron(x, x) ** 3), x6[:2]),
]


def _sampled(modes):
    """The modes, the preaccumulation variants (``preaccumulation``'s own halves and its chain
    rule, one code path with it) in the exhaustive tier only."""
    variants = ("forward_preaccumulation", "reverse_preaccumulation", "chain_preaccumulation")
    return [pytest.param(m, marks=pytest.mark.exhaustive) if m in variants else m for m in modes]


@pytest.mark.parametrize("mode", _sampled(jt.modes()))
@pytest.mark.parametrize("case", SMALL, ids=[c[0] for c in SMALL])
def test_every_mode(case, mode, quick_anneal):
    _, f, x = case
    F = _np(f)
    try:
        H, g = jt.hessian(F, mode=mode)(x), jt.grad(F, mode=mode)(x)  # the larger graph first
    except OrderError as exc:  # the subset DP's documented limit (2^n subsets), named in its message
        assert mode == "exhaustive" and "max_intermediates" in str(exc)
        pytest.skip(str(exc))
    np.testing.assert_allclose(g, jax_jacobian(f, x), **TOL)
    np.testing.assert_allclose(H, jax_hessian(f, x), **TOL)


# ---------------------------------------------------------------------------- hypothesis-drawn shapes
shapes = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)


def _values(shape, seed, ties=False, zeros=False):
    x = np.random.default_rng(seed).normal(size=shape)
    if ties:  # few distinct values: max/min ties
        x = np.round(x * 2) / 2
    if zeros:  # some exact zeros: prod's special cases
        x = np.where(np.abs(x) < 0.5, 0.0, x)
    return x


@st.composite
def reductions(draw):
    shape = draw(shapes)
    op = draw(st.sampled_from(["sum", "mean", "max", "min", "prod", "var", "std"]))
    ndim = len(shape)
    axis = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1) if ndim else st.none(),
                          st.lists(st.integers(0, max(ndim - 1, 0)), unique=True, max_size=ndim).map(tuple)
                          if ndim else st.none()))
    keepdims = draw(st.booleans())
    return shape, op, axis, keepdims, draw(st.integers(0, 2**16))


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered",
                            "ignore:Degrees of freedom")
@HYPOTHESIS
@given(reductions())
@example(((2, 0), "sum", 1, True, 0))             # zero-size axes, as NumPy allows them
@example(((0, 3), "mean", None, False, 1))
@example(((2, 0, 3), "var", (0, 2), False, 2))
@example(((0,), "prod", 0, True, 3))
@example(((3, 0), "max", 0, False, 4))
@example(((3, 2), "max", None, True, 5))
def test_reductions_on_drawn_shapes(drawn):
    shape, op, axis, keepdims, seed = drawn
    x = _values(shape, seed, ties=op in ("max", "min"), zeros=op == "prod")
    axes = range(len(shape)) if axis is None else ([axis] if isinstance(axis, int) else axis)
    if op in ("max", "min") and any(shape[k] == 0 for k in axes):
        with pytest.raises(TraceError, match="zero-size"):
            jt.jacobian(lambda x: getattr(np, op)(x, axis=axis, keepdims=keepdims))(x)
        return

    def f(x, xp):
        return getattr(xp, op)(x, axis=axis, keepdims=keepdims)

    value, _ = jt.vjp(_np(f), x)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(value, f(x, np), **TOL)
    if op == "std" and np.any(np.asarray(f(x, np)) == 0):
        return  # sqrt at 0: no derivative to compare
    np.testing.assert_allclose(jt.jacobian(_np(f), mode="reverse")(x), jax_jacobian(f, x), **TOL)
    s = _scalar(f, x)
    np.testing.assert_allclose(jt.hessian(s)(x), jax_hessian(s, x), **TOL)


@st.composite
def reshapes(draw):
    shape = draw(shapes)
    size = int(np.prod(shape))
    order = draw(st.permutations(range(len(shape))))
    new = list(draw(st.permutations(shape)))
    if new and draw(st.booleans()) and size:
        new[draw(st.integers(0, len(new) - 1))] = -1
    return shape, tuple(order), tuple(new) + draw(st.sampled_from([(), (1,)])), draw(st.integers(0, 2**16))


@HYPOTHESIS
@given(reshapes())
def test_shape_changes_on_drawn_shapes(drawn):
    shape, order, new, seed = drawn
    x = _values(shape, seed)

    def f(x, xp):
        y = xp.transpose(xp.sin(x), order).reshape(new)
        return xp.expand_dims(y, 0).squeeze(0) * xp.ravel(x).sum()

    value, _ = jt.vjp(_np(f), x)
    np.testing.assert_allclose(value, f(x, np), **TOL)
    np.testing.assert_allclose(jt.jacobian(_np(f))(x), jax_jacobian(f, x), **TOL)
    s = _scalar(f, x)
    np.testing.assert_allclose(jt.hessian(s)(x), jax_hessian(s, x), **TOL)


@st.composite
def basic_keys(draw):
    shape = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple))
    items = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "full"] if n else ["slice", "full"]))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, -1, -2, 3]))))
        else:
            items.append(slice(None))
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), None)
    if draw(st.booleans()):  # an Ellipsis standing for the trailing axes
        cut = draw(st.integers(0, len(items)))
        items = [*items[:cut], Ellipsis] if all(i is not None for i in items[cut:]) else items
    return shape, tuple(items), draw(st.integers(0, 2**16))


@HYPOTHESIS
@given(basic_keys())
@example(((0, 3), (slice(None), 1), 0))
@example(((4, 2), (slice(None, None, -2), None, Ellipsis), 1))
def test_basic_indexing_on_drawn_keys(drawn):
    shape, key, seed = drawn
    x = _values(shape, seed)

    def f(x, xp):
        return xp.sin(x)[key] * 2

    value, _ = jt.vjp(_np(f), x)
    np.testing.assert_allclose(value, f(x, np), **TOL)
    np.testing.assert_allclose(jt.jacobian(_np(f), mode="reverse")(x), jax_jacobian(f, x), **TOL)
    np.testing.assert_allclose(jt.jacobian(_np(f), mode="forward")(x), jax_jacobian(f, x), **TOL)


@HYPOTHESIS
@given(st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple), st.integers(0, 2**16), st.data())
def test_gathers_with_repeats_on_drawn_indices(shape, seed, data):
    x = _values(shape, seed)
    n = shape[0]
    index = np.array(data.draw(st.lists(st.integers(-n, n - 1), max_size=5) if n else st.just([])), dtype=int)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=shape[-1], max_size=shape[-1])), dtype=bool)

    def f(x, xp):
        return xp.sin(x[index]).sum(axis=0) * 1.5 + xp.sum(x[..., mask] ** 2)

    value, _ = jt.vjp(_np(f), x)
    np.testing.assert_allclose(value, f(x, np), **TOL)
    np.testing.assert_allclose(jt.jacobian(_np(f))(x), jax_jacobian(f, x), **TOL)
    s = _scalar(f, x)
    np.testing.assert_allclose(jt.hessian(s)(x), jax_hessian(s, x), **TOL)


@HYPOTHESIS
@given(st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple), st.integers(0, 2**16), st.data())
def test_joins_and_splits_on_drawn_shapes(shape, seed, data):
    x = _values(shape, seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    other = list(shape)
    other[axis] = data.draw(st.integers(0, 3))
    c = _values(tuple(other), seed + 1)
    sections = data.draw(st.integers(1, 4))

    def f(x, xp):
        joined = xp.concatenate([xp.sin(x), c, x ** 2], axis=axis)
        parts = xp.array_split(joined, sections, axis=axis)
        return xp.stack([parts[0], parts[0] * 2], axis=0) * xp.cumsum(parts[0], axis=axis)

    value, _ = jt.vjp(_np(f), x)
    np.testing.assert_allclose(value, f(x, np), **TOL)
    np.testing.assert_allclose(jt.jacobian(_np(f))(x), jax_jacobian(f, x), **TOL)


@HYPOTHESIS
@given(st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple),
       st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple), st.integers(0, 2**16), st.data())
def test_matmul_broadcasting_on_drawn_shapes(batch_a, batch_b, seed, data):
    n = data.draw(st.integers(1, 3))
    a_vec, b_vec = data.draw(st.booleans()), data.draw(st.booleans())
    try:
        np.broadcast_shapes(batch_a, batch_b)
    except ValueError:
        return
    if 0 in batch_a + batch_b:
        # opt_einsum's "dp" path raises on some zero-size einsums the program fuses
        # ('ij,kjl,m->m' with k = 0) in jacacc.tensor.expr.contraction_path: not this module's
        return
    shape_a = (n,) if a_vec else batch_a + (2, n)
    shape_b = (n,) if b_vec else batch_b + (n, 2)
    x = _values(shape_a, seed)
    B = _values(shape_b, seed + 1)

    def f(x, xp):
        return xp.matmul(xp.sin(x), B) + (x @ (B * x.sum())).sum()

    value, _ = jt.vjp(_np(f), x)
    np.testing.assert_allclose(value, f(x, np), **TOL)
    np.testing.assert_allclose(jt.jacobian(_np(f))(x), jax_jacobian(f, x), **TOL)


ZERO_SIZE = [
    lambda x, xp: xp.concatenate([xp.sin(x), np.ones((2, 3))], axis=1) * 2,
    lambda x, xp: xp.stack([x, x ** 2]) + xp.split(x, 2, axis=0)[0].sum(),
    lambda x, xp: xp.cumsum(x, axis=1) + xp.sort(x ** 2, axis=0) + xp.diff(x, axis=0, prepend=0.0)[:2],
    lambda x, xp: xp.pad(x, 1) ** 2,
    lambda x, xp: x[np.array([1, 1, 0])][:2] * x[:, ::-1].reshape(2, 0) + x.reshape(0, 2).T,
    lambda x, xp: (x @ np.ones((0, 3))) ** 2 + xp.tensordot(x, np.ones((0, 3)), axes=([1], [0])),
]


@pytest.mark.parametrize("k", range(len(ZERO_SIZE)))
def test_zero_size_axes(k):
    """Operations on an array with a zero-length axis (2 × 0), as NumPy allows them."""
    f, x = ZERO_SIZE[k], np.ones((2, 0))
    value, _ = jt.vjp(_np(f), x)
    np.testing.assert_allclose(value, f(x, np), **TOL)
    J = jt.jacobian(_np(f))(x)
    assert J.shape == jax_jacobian(f, x).shape


# ---------------------------------------------------------------------------- conventions
def test_scatter_add_accumulates_repeated_indices():
    g = jt.grad(lambda x: np.sum(x[np.array([0, 0, 0, 2])] ** 2))(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(g, [6.0, 0.0, 6.0])
    g = jt.grad(lambda x: np.sum(x[[0, 0, 1]]))(np.array([1.0, 2.0, 3.0]))  # a list is an index array too
    np.testing.assert_array_equal(g, [2.0, 1.0, 0.0])


def test_iterating_and_unpacking_a_traced_array():
    """Python iterates by indexing until an IndexError: an out-of-bounds index is one, as in NumPy."""
    def f(x):
        a, b = x
        return sum(np.sum(row ** 2) for row in x) + np.sum(a * b)

    np.testing.assert_allclose(jt.grad(f)(x23), 2 * x23 + x23[::-1], **TOL)


def test_max_ties_share_the_derivative_equally():
    g = jt.grad(lambda x: np.max(x))(np.array([2.0, 5.0, 5.0, 5.0, 1.0]))
    np.testing.assert_allclose(g, [0.0, 1 / 3, 1 / 3, 1 / 3, 0.0], **TOL)


def test_prod_derivatives_with_zeros_are_products_of_the_others():
    x = np.array([0.0, 0.0, 2.0, 3.0])
    np.testing.assert_array_equal(jt.grad(np.prod)(x), [0.0, 0.0, 0.0, 0.0])
    expected = np.zeros((4, 4))
    expected[0, 1] = expected[1, 0] = 6.0  # ∂²/∂x₀∂x₁ = x₂x₃; every other pair keeps a zero factor
    np.testing.assert_array_equal(jt.hessian(np.prod)(x), expected)


def test_float32_arguments():
    x = np.arange(1.0, 7.0, dtype=np.float32)
    g = jt.grad(lambda x: np.sum(x[np.array([1, 1, 4])] ** 2) + np.max(x) + np.prod(x[:3]) + np.sort(x)[-1])(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, [6.0, 11.0, 2.0, 0.0, 10.0, 2.0], rtol=1e-6)


def test_operator_outputs_do_not_alias_the_arguments():
    """Reshape and slices return copies: a later in-place operator must not reach the caller's array."""
    x = np.arange(6.0)
    for f in (lambda x: x.reshape(2, 3), lambda x: x[1:4], lambda x: x.reshape(3, 2)[:, 0]):
        value, _ = jt.vjp(f, x)
        assert not np.shares_memory(value, x)


def test_expressions_print_with_short_operator_options():
    d = jt.derivative_expression(lambda x: np.sum(x[np.arange(50) % 3] * x[1:4].sum()), np.ones(3), order=1)
    text = str(d)
    assert "gather" in text and "indices" in text and len(text) < 2000


# ---------------------------------------------------------------------------- errors
ERRORS = [
    (lambda x: np.sum(x, axis=2), TraceError, ["np.sum", "axis 2", "(2, 3)"]),
    (lambda x: np.sum(np.mean(x, axis=(0, 0))), TraceError, ["np.mean", "repeated axis"]),
    (lambda x: np.sum(x.reshape(4, 2)), TraceError, ["reshape", "size 6", "(4, 2)"]),
    (lambda x: np.sum(x.reshape(-1, -1)), TraceError, ["reshape", "one -1"]),
    (lambda x: np.sum(x.reshape(6, order="A")), UnsupportedOperationError, ["reshape", "order='A'"]),
    (lambda x: np.sum(x[2]), TraceError, ["index 2", "axis 0", "size 2"]),
    (lambda x: np.sum(x[0, 0, 0]), TraceError, ["too many indices", "(2, 3)"]),
    (lambda x: np.sum(x[np.array([True, False, True])]), TraceError, ["indexing", "(2, 3)", "boolean"]),
    (lambda x: np.sum(x[x > 0]), UnsupportedOperationError, []),
    (lambda x: np.sum(x[np.argmax(x, axis=3)]), TraceError, ["np.argmax", "axis 3"]),
    (lambda x: np.sum(np.pad(x, 1, mode="reflect")), UnsupportedOperationError, ["np.pad", "mode='reflect'"]),
    (lambda x: np.sum(np.pad(x, -1)), TraceError, ["np.pad", "non-negative"]),
    (lambda x: np.sum(x, where=np.ones((2, 3), bool)), UnsupportedOperationError, ["np.sum", "where="]),
    (lambda x: np.sum(np.max(x, initial=0.0)), UnsupportedOperationError, ["np.max", "initial="]),
    (lambda x: np.var(x, mean=np.zeros((1, 1))), UnsupportedOperationError, ["np.var", "mean="]),
    (lambda x: np.sum(x, dtype=np.int64), UnsupportedOperationError, ["np.sum", "dtype=int64"]),
    (lambda x: np.max(x[:, :0]), TraceError, ["np.max", "zero-size"]),
    (lambda x: np.sum(np.concatenate([x, x.T])), TraceError, ["np.concatenate", "(2, 3)", "(3, 2)"]),
    (lambda x: np.sum(np.split(x, 2, axis=1)[0]), TraceError, ["np.split", "equal"]),
    (lambda x: np.sum(np.stack([x, x.T])), TraceError, ["np.stack", "same shape"]),
    (lambda x: np.sum(x @ np.ones((2, 2))), UnsupportedOperationError, ["matmul", "(2, 3)", "(2, 2)", "align"]),
    (lambda x: np.sum(np.stack([x, x, x]) @ np.ones((2, 3, 2))), UnsupportedOperationError, ["matmul", "broadcast"]),
    (lambda x: np.sum(np.tensordot(x, x, axes=([0], [1]))), TraceError, ["np.tensordot", "(2, 3)"]),
    (lambda x: np.sum(np.squeeze(x, axis=0)), TraceError, ["np.squeeze", "axis 0", "not one"]),
    (lambda x: np.sum(np.broadcast_to(x, (3, 3))), TraceError, ["np.broadcast_to", "(2, 3)", "(3, 3)"]),
    (lambda x: np.sum(np.moveaxis(x, 0, 5)), TraceError, ["np.moveaxis", "axis 5"]),
    (lambda x: np.sum(np.diff(x, n=-1)), TraceError, ["np.diff", "non-negative"]),
    (lambda x: np.sum(np.transpose(x, (0, 0))), TraceError, ["transpose", "permutation"]),
    (lambda x: np.sum(np.transpose(x, (0, 7))), TraceError, ["transpose", "axis 7"]),
    (lambda x: np.sum(np.sort(x, order="f")), UnsupportedOperationError, ["np.sort", "order="]),
    (lambda x: x.sort(), UnsupportedOperationError, ["ndarray.sort", "in place"]),
    (lambda x: np.sum(np.cumsum(x, out=np.empty(6))), UnsupportedOperationError, ["np.cumsum", "out="]),
]


@pytest.mark.parametrize("f, error, words", ERRORS, ids=[f"error{k}" for k in range(len(ERRORS))])
def test_bad_input_gives_a_clear_one_line_error(f, error, words):
    with pytest.raises(error) as info:
        jt.grad(f)(x23)
    message = str(info.value)
    assert "\n" not in message and "supported:" not in message
    for word in words:
        assert word in message, (word, message)


# ---------------------------------------------------------------------------- autograd's classic examples
LAYERS = [(3, 4), (4, 4), (4, 2)]


def unpack(params, xp=np):
    """The (W, b) of each layer from one flat parameter vector (slices and reshape)."""
    out, start = [], 0
    for m, n in LAYERS:
        W = params[start:start + m * n].reshape(m, n)
        b = params[start + m * n:start + m * n + n]
        out.append((W, b))
        start += m * n + n
    return out


N_PARAMS = sum(m * n + n for m, n in LAYERS)


def mlp_loss(params, X, Y, xp=np):
    h = X
    for k, (W, b) in enumerate(unpack(params, xp)):
        h = h @ W + b
        if k < len(LAYERS) - 1:
            h = xp.tanh(h)
    log_norm = xp.log(xp.sum(xp.exp(h), axis=1, keepdims=True))
    return -xp.mean(xp.sum((h - log_norm) * Y, axis=1))


def test_mlp_with_flat_parameters():
    rng = np.random.default_rng(3)
    params, X = rng.normal(size=N_PARAMS) * 0.5, rng.normal(size=(5, 3))
    Y = np.eye(2)[rng.integers(0, 2, size=5)]
    ref = functools.partial(mlp_loss, xp=jnp)
    g_ref = np.asarray(jax_reference.jit(jax.grad(ref))(_jax_args(params), X, Y))
    H_ref = np.asarray(jax_reference.jit(jax.hessian(ref))(_jax_args(params), X, Y))
    for mode in MAIN_MODES:
        np.testing.assert_allclose(jt.grad(mlp_loss, mode=mode)(params, X, Y), g_ref, **TOL)
    np.testing.assert_allclose(jt.hessian(mlp_loss)(params, X, Y), H_ref, **TOL)
    np.testing.assert_allclose(jt.hessian(mlp_loss, mode="reverse", compress=True)(params, X, Y).dense(), H_ref,
                               **TOL)


def rosenbrock(x, xp=np):
    return xp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def test_rosenbrock_gradient_and_hessian():
    x = np.random.default_rng(4).normal(size=100)
    ref = functools.partial(rosenbrock, xp=jnp)
    np.testing.assert_allclose(jt.grad(rosenbrock)(x), np.asarray(jax_reference.jit(jax.grad(ref))(_jax_args(x))), **TOL)
    H_ref = np.asarray(jax_reference.jit(jax.hessian(ref))(_jax_args(x)))
    for mode in MAIN_MODES:
        np.testing.assert_allclose(jt.hessian(rosenbrock, mode=mode)(x), H_ref, **TOL)
    np.testing.assert_allclose(jt.hessian(rosenbrock, compress=True)(x).dense(), H_ref, **TOL)
    np.testing.assert_allclose(jt.grad(rosenbrock)(np.ones(100)), np.zeros(100), **TOL)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)])
def test_extremum_weights_equal_numpys_mask_over_its_count(axes, layout, dtype):
    """The compiled group loop (with Numba) gives NumPy's weights exactly: ties share, a group with
    a NaN is NaN throughout, infinities are extrema like any value."""
    from jacacc.tensor.arrays import extremum_weights

    x = np.random.default_rng(len(axes)).integers(0, 3, (5, 4, 6)).astype(dtype)
    x[1, 2, 3], x[0, 0, 0], x[4, 3, 5] = np.nan, np.inf, -np.inf
    x = np.asfortranarray(x) if layout == "F" else x
    for largest in (True, False):
        best = x.max(axis=axes, keepdims=True) if largest else x.min(axis=axes, keepdims=True)
        mask = (x == best).astype(dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            want = mask / mask.sum(axis=axes, keepdims=True)
        got = extremum_weights(x, axes, largest)
        assert got.dtype == want.dtype and got.flags.c_contiguous
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)])
def test_shift_extremum_equals_numpys_max_and_min(axes, layout, dtype):
    """softmax's and logsumexp's shift from the compiled group loop (with Numba) is NumPy's max
    (min) with the axes kept, exactly: a NaN anywhere in a group, first included, propagates."""
    from jacacc.tensor.arrays import shift_extremum

    x = np.random.default_rng(len(axes)).integers(0, 3, (5, 4, 6)).astype(dtype)
    x[1, 2, 3], x[0, 0, 0], x[4, 3, 5], x[2, 0, 0] = np.nan, np.inf, -np.inf, np.nan
    x = np.asfortranarray(x) if layout == "F" else x
    for largest in (True, False):
        want = x.max(axis=axes, keepdims=True) if largest else x.min(axis=axes, keepdims=True)
        got = shift_extremum(x, axes, largest)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)])
def test_prod_masks_compiled_equal_numpys(axes, layout, dtype, monkeypatch):
    """np.prod's masks from the compiled group loop (with Numba) equal the NumPy calls' exactly:
    zero and nonzero masks, signs, and the coefficients for groups of 0, 1, 2 and more zeros,
    with a negative zero and a NaN among the entries."""
    from jacacc.tensor import arrays

    x = np.random.default_rng(len(axes)).integers(-2, 3, (5, 4, 6)).astype(dtype)
    x[tuple(slice(None) if k in axes else 1 for k in range(3))] = 0.0  # a group of zeros only
    x[1, 2, 3], x[0, 0, 0] = np.nan, -0.0
    x = np.asfortranarray(x) if layout == "F" else x
    got = arrays._prod_masks(x, axes)
    assert arrays._prod_masks_compiled() is not None
    monkeypatch.setattr(arrays, "_prod_masks_compiled", lambda: None)
    want = arrays._prod_masks(x, axes)
    assert len(got) == len(want) == arrays.PROD_ZEROS + 4
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype == dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    counts = {int(c) for c in (x == 0).sum(axis=axes).ravel()}
    assert max(counts) > arrays.PROD_ZEROS and (len(axes) > 1 or counts >= {0, 1, 2})  # the coefficients' cases


@st.composite
def _basic_keys(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    key = []
    for n in shape:
        if draw(st.booleans()):
            key.append(draw(st.integers(-n, n - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-n - 1, n + 1))
            key.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, -1, -2]))))
    return shape, tuple(key)


@settings(max_examples=60, deadline=None)
@given(_basic_keys())
def test_inline_indexing_of_the_straight_line_equals_the_interpreter(drawn):
    """Basic indexing and reshape spelled inline in the straight-line program (Operator.spelling)
    give what the operators' forward functions give, and NumPy's own indexing."""
    from jacacc.tensor.evaluate import Program
    from jacacc.tensor.trace import trace

    shape, key = drawn
    x = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape)

    def f(x):
        picked = x[key]
        return np.reshape(picked, (-1,)) * 2.0 if picked.ndim else picked * 2.0

    traced = trace(f, [x])
    program = Program(traced.outputs, traced.inputs, np.float64)
    straight, interpreted = program(x)[0], program.interpret(np, [x])[0]
    np.testing.assert_array_equal(straight, interpreted)
    np.testing.assert_array_equal(straight, f(x))
