"""Parameters as lists, tuples and dicts of arrays (issue 41): results in the same structure,
against JAX's in forward, reverse and cross-country mode."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jacacc.tensor as jt
from jacacc.tensor.pytree import flatten, unflatten

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)

MODES = ("forward", "reverse", "cross_country")
RNG = np.random.default_rng(0)
LAYERS = [(RNG.normal(size=(3, 4)), RNG.normal(size=4)), (RNG.normal(size=(4, 2)), RNG.normal(size=2))]
X = RNG.normal(size=(5, 3))


def net(params, X, xp=np):
    """autograd's neural-net example: a list of (W, b) tuples."""
    h = X
    for W, b in params:
        h = xp.tanh(h @ W + b)
    return xp.sum(h ** 2)


def assert_same_tree(got, want):
    """The same structure (containers of the same kinds and keys) and leaves within rtol 1e-11."""
    got_leaves, got_tree = flatten(got)
    want_leaves, want_tree = flatten(jax.tree_util.tree_map(np.asarray, want))
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("mode", MODES)
def test_a_list_of_layer_tuples(mode):
    assert_same_tree(jt.grad(net, mode=mode)(LAYERS, X), jax.grad(lambda p: net(p, X, jnp))(LAYERS))
    value, grads = jt.value_and_grad(net, mode=mode)(LAYERS, X)
    np.testing.assert_allclose(value, net(LAYERS, X), rtol=1e-12)
    assert_same_tree(grads, jax.grad(lambda p: net(p, X, jnp))(LAYERS))


@pytest.mark.parametrize("mode", MODES)
def test_a_dict_with_a_scalar_its_hessian_blocks_and_several_argnums(mode):
    params = {"w": RNG.normal(size=3), "c": 0.7}
    x = RNG.normal(size=3)

    def f(p, x, xp=np):
        return p["c"] * xp.sum(xp.sin(p["w"] * x)) + xp.sum(p["w"] ** 2 * x)

    def g(p, x):
        return f(p, x, jnp)

    assert_same_tree(jt.hessian(f, mode=mode)(params, x), jax.hessian(g)(params, x))
    value, grads = jt.value_and_grad(f, argnum=(0, 1), mode=mode)(params, x)
    assert_same_tree(grads, jax.grad(g, argnums=(0, 1))(params, x))
    assert_same_tree(jt.hessian(f, argnum=(0, 1), mode=mode)(params, x), jax.hessian(g, argnums=(0, 1))(params, x))
    assert_same_tree(jt.jacobian(lambda p: p["c"] * np.tanh(p["w"]), mode=mode)(params),
                     jax.jacobian(lambda p: p["c"] * jnp.tanh(p["w"]))(params))


def test_named_tuples_and_a_list_of_numbers_keep_their_kind():
    Params = collections.namedtuple("Params", "a b")
    g = jt.grad(lambda p: np.sum(p.a * p.b ** 2))(Params(np.ones(2), np.arange(2.0)))
    assert isinstance(g, Params)
    np.testing.assert_allclose(g.a, [0.0, 1.0])
    np.testing.assert_allclose(g.b, [0.0, 2.0])
    g = jt.grad(lambda xs: np.sum(np.array(xs) ** 2))([1.0, 2.0, 3.0])
    assert isinstance(g, list)
    np.testing.assert_allclose(g, [2.0, 4.0, 6.0])


def test_one_plan_per_structure():
    g = jt.grad(net)
    g(LAYERS, X)
    shifted = [(W + 1.0, b) for W, b in LAYERS]
    assert_same_tree(g(shifted, X), jax.grad(lambda p: net(p, X, jnp))(shifted))
    with pytest.raises(ValueError, match="hold no arrays"):
        jt.grad(lambda p, x: np.sum(x))([], np.ones(2))


def test_flatten_and_unflatten_are_inverse():
    tree_value = {"z": [1.0, (2.0, {"k": 3.0})], "a": ()}
    leaves, tree = flatten(tree_value)
    assert leaves == [1.0, 2.0, 3.0]
    assert unflatten(tree, leaves) == tree_value


Pair = collections.namedtuple("Pair", "first second")


@st.composite
def _pytrees(draw, depth=0):
    """A pytree of small arrays: lists, tuples, dicts and a named tuple, nested up to three deep."""
    if depth >= 3 or draw(st.booleans()):
        return np.full(draw(st.integers(0, 3)), float(draw(st.integers(0, 9))))
    kind = draw(st.sampled_from(["list", "tuple", "dict", "namedtuple"]))
    if kind == "namedtuple":
        return Pair(draw(_pytrees(depth + 1)), draw(_pytrees(depth + 1)))
    children = draw(st.lists(_pytrees(depth + 1), max_size=3))
    if kind == "dict":
        return {f"k{9 - i}": c for i, c in enumerate(children)}  # keys out of sorted order
    return children if kind == "list" else tuple(children)


def _changed(value):
    """The same value with one container changed (a kind, a length or a key), or a leaf made a number."""
    if isinstance(value, np.ndarray):
        return 1.0
    if isinstance(value, dict):
        return {**value, "extra": np.ones(1)}
    if isinstance(value, Pair):
        return (value.first, value.second)
    return (tuple if isinstance(value, list) else list)(value)


@settings(max_examples=150, deadline=None)
@given(st.lists(_pytrees(), min_size=1, max_size=3))
def test_the_generated_reader_and_builder_match_flatten_and_unflatten(args):
    """The code generated for a call's structure reads the leaves Arguments finds, refuses (None) a
    call whose structure differs anywhere, and rebuilds every argument as unflatten does."""
    from jacacc.tensor.pytree import Arguments, structure_builder, structure_reader

    flat = Arguments(args)
    read = structure_reader(flat.trees)
    got = read(args)
    assert got is not None and len(got) == len(flat.leaves)
    assert all(a is b for a, b in zip(got, flat.leaves, strict=True))
    for k in range(len(args)):
        assert read([*args[:k], _changed(args[k]), *args[k + 1:]]) is None
    assert read([*args, np.ones(1)]) is None
    rebuilt = structure_builder(flat.trees)(flat.leaves)
    for value, tree, (a, b) in zip(rebuilt, flat.trees, flat.spans, strict=True):
        leaves, rebuilt_tree = flatten(value)
        assert rebuilt_tree == tree and all(x is y for x, y in zip(leaves, flat.leaves[a:b], strict=True))
        assert type(value) is type(unflatten(tree, flat.leaves[a:b]))


def test_a_call_in_another_structure_after_the_first_takes_the_full_path():
    g = jt.grad(net)
    g(LAYERS, X)
    as_lists = [[W, b] for W, b in LAYERS]  # lists, not tuples: the generated reader refuses it
    assert_same_tree(g(as_lists, X), jax.grad(lambda p: net(p, X, jnp))(as_lists))
    assert_same_tree(g(LAYERS, X), jax.grad(lambda p: net(p, X, jnp))(LAYERS))


@pytest.mark.parametrize("mode", MODES)
def test_vjp_and_jvp_of_structured_arguments(mode):
    params = {"w": RNG.normal(size=3), "layers": [RNG.normal(size=(3, 2))]}

    def f(p, x, xp=np):
        return xp.tanh(x @ p["layers"][0]) * xp.sum(p["w"] * x)

    x = RNG.normal(size=3)
    value, back = jt.vjp(f, params, x, mode=mode)
    want_value, want_back = jax.vjp(lambda p, x: f(p, x, jnp), params, x)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    cotangent = np.array([0.5, -1.5])
    assert_same_tree(back(cotangent), want_back(cotangent))
    tangents = ({"w": np.ones(3), "layers": [np.full((3, 2), 0.5)]}, np.arange(3.0))
    _, out = jt.jvp(f, (params, x), tangents, mode=mode)
    np.testing.assert_allclose(out, jax.jvp(lambda p, x: f(p, x, jnp), (params, x), tangents)[1], rtol=1e-11)
    with pytest.raises(ValueError, match="structure"):
        jt.jvp(f, (params, x), ({"w": np.ones(3)}, np.arange(3.0)))


def test_subclasses_of_list_and_tuple_come_back_as_lists_and_tuples():
    # flattened by exact type first (the fast path at every call), by isinstance for subclasses
    class Layers(list):
        pass

    class Pair(tuple):
        pass

    value = Layers([Pair((np.ones(2), np.zeros(3))), np.ones(1)])
    leaves, tree = flatten(value)
    rebuilt = unflatten(tree, leaves)
    assert type(rebuilt) is list and type(rebuilt[0]) is tuple and len(leaves) == 3
    assert all(a is b for a, b in zip(flatten(rebuilt)[0], leaves, strict=True))


def test_a_transformation_of_pytrees_lists_the_plans_of_every_structure():
    """``.plans`` reads the plans made for each structure of arguments, not only those of arrays passed
    as they are: a benchmark waits on their steady state (``Program.settled``) through it."""
    g = jt.grad(lambda p, x: np.sum(p["w"] * x) + p["b"] ** 2)
    assert len(g.plans) == 0
    g({"w": np.ones(3), "b": np.array(2.0)}, np.arange(3.0))
    g({"w": np.ones(4), "b": np.array(2.0)}, np.arange(4.0))
    plans = list(g.plans.values())
    assert len(plans) == 2 and all(hasattr(p, "settled") for p in plans)
