"""Random graph families (jacacc.problems.generators) and scalarized networks (jacacc.problems.networks)."""

from __future__ import annotations

import itertools
import warnings

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jacacc
import jacacc.problems.generators as gen
import jacacc.problems.networks as nets
from jacacc.problems.base import get, names
from jacacc.verify import central_differences

# one small instance of every family, as a function of the seed
FAMILIES = {
    "random_dag": lambda seed, **kw: gen.random_dag(4, 30, 3, seed=seed, **kw),
    "random_dag_window": lambda seed, **kw: gen.random_dag(5, 40, 4, max_preds=2, window=6, seed=seed, **kw),
    "layered": lambda seed, **kw: gen.layered([3, 5, 4, 2], seed=seed, **kw),
    "layered_sparse": lambda seed, **kw: gen.layered([6, 9, 9, 5], density=0.25, seed=seed, **kw),
    "bipartite": lambda seed, **kw: gen.bipartite(5, 4, 3, density=0.5, seed=seed, **kw),
    "reduction_tree": lambda seed, **kw: gen.reduction_tree(3, 3, seed=seed, **kw),
    "broadcast_tree": lambda seed, **kw: gen.broadcast_tree(3, 2, seed=seed, **kw),
    "chain": lambda seed, **kw: gen.chain(7, seed=seed, **kw),
    "ladder": lambda seed, **kw: gen.ladder(6, 3, seed=seed, **kw),
}


def build_quietly(factory, *args, **kwargs):
    """Call a generator with every warning (a pruning warning above all) turned into an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return factory(*args, **kwargs)


def assert_valid(g: jacacc.CompGraph) -> None:
    """Checked on the networkx graph, independently of CompGraph's own validation."""
    d = g.to_networkx()
    assert nx.is_directed_acyclic_graph(d)
    assert set(g.inputs).isdisjoint(g.outputs)
    assert all(d.in_degree(x) == 0 and d.out_degree(x) > 0 for x in g.inputs)
    assert all(d.out_degree(y) == 0 and d.in_degree(y) > 0 for y in g.outputs)
    from_inputs = set().union(*(nx.descendants(d, x) for x in g.inputs))
    to_outputs = set().union(*(nx.ancestors(d, y) for y in g.outputs))
    for v in g.intermediates:
        assert v in from_inputs and v in to_outputs, v
    assert set(d.nodes) == set(g.inputs) | set(g.intermediates) | set(g.outputs)


def counts(g: jacacc.CompGraph) -> tuple[int, int, int, int]:
    return len(g.inputs), len(g.intermediates), len(g.outputs), g.n_edges


def mults(g: jacacc.CompGraph, method: str) -> int:
    return jacacc.optimize(g, method=method).mults


# ---------------------------------------------------------------------------- determinism, validity
@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_same_graph_other_seed_other_graph(family):
    make = FAMILIES[family]
    assert build_quietly(make, 3).to_json() == build_quietly(make, 3).to_json()
    assert build_quietly(make, 3).to_json() != build_quietly(make, 4).to_json()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_families_are_valid(family, seed):
    assert_valid(build_quietly(FAMILIES[family], seed))


@pytest.mark.parametrize("family", FAMILIES)
def test_partials_options(family):
    make = FAMILIES[family]
    rnd = build_quietly(make, 5)
    ones = build_quietly(make, 5, partials="ones")
    none = build_quietly(make, 5, partials="none")
    assert rnd.is_numeric
    values = rnd.partial_array()
    assert np.all((np.abs(values) >= 0.1) & (np.abs(values) <= 1.0))
    assert np.all(ones.partial_array() == 1.0)
    assert none.partials_kind == "structural"
    # the structure does not depend on the partials option
    assert set(rnd.edges) == set(ones.edges) == set(none.edges)
    assert rnd.inputs == none.inputs and rnd.outputs == none.outputs


def test_bad_knobs_are_refused():
    with pytest.raises(ValueError, match="partials"):
        gen.chain(3, partials="zeros")
    with pytest.raises(ValueError, match="n_inputs"):
        gen.random_dag(0, 5, 1)
    with pytest.raises(ValueError, match="density"):
        gen.layered([2, 2], density=1.5)
    with pytest.raises(ValueError, match="two widths"):
        gen.layered([3])


# ---------------------------------------------------------------------------- random_dag
@settings(max_examples=60, deadline=None)
@given(
    n_in=st.integers(1, 6),
    n_mid=st.integers(0, 40),
    n_out=st.integers(1, 6),
    max_preds=st.integers(1, 4),
    window=st.one_of(st.none(), st.integers(1, 10)),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_dag_property(n_in, n_mid, n_out, max_preds, window, seed):
    g = build_quietly(gen.random_dag, n_in, n_mid, n_out, max_preds=max_preds, window=window, seed=seed)
    assert counts(g)[:3] == (n_in, n_mid, n_out)
    assert_valid(g)
    position = {f"x{i}": i for i in range(n_in)} | {f"v{i}": n_in + i for i in range(n_mid)}
    d = g.to_networkx()
    for v in g.intermediates:
        assert d.in_degree(v) >= 1
    for u, v in g.edges:
        assert u in position  # no edge leaves an output
        if v in position:
            assert position[u] < position[v]  # numbering is topological
            if window is not None and u.startswith("v"):
                assert position[v] - position[u] <= window


def test_random_dag_in_degree_bound():
    g = build_quietly(gen.random_dag, 3, 300, 4, max_preds=2, seed=0)
    d = g.to_networkx()
    over = [v for v in g.intermediates if d.in_degree(v) > 2]
    # only the targets of repair edges may exceed max_preds, and they are few
    assert len(over) < 0.2 * 300


@pytest.mark.slow
def test_random_dag_scales_to_1e5():
    import time

    t = time.perf_counter()
    g = build_quietly(gen.random_dag, 10, 100_000, 10, window=100, seed=0)
    assert time.perf_counter() - t < 60
    assert counts(g)[:3] == (10, 100_000, 10)


# ---------------------------------------------------------------------------- layered, bipartite
@pytest.mark.parametrize("widths", [[2, 3], [3, 5, 4, 2], [4, 1, 4], [5, 6, 7, 6, 5]])
def test_layered_dense_counts_and_mode_costs(widths):
    g = build_quietly(gen.layered, widths, seed=0)
    inner = widths[1:-1]
    assert counts(g) == (
        widths[0],
        sum(inner),
        widths[-1],
        sum(a * b for a, b in zip(widths, widths[1:], strict=False)),
    )
    # dense layers: after eliminating earlier layers, layer l's vertices have all w_0 inputs as
    # predecessors and its w_{l+1} successors; in reverse, its w_{l-1} predecessors and all w_L outputs
    w = widths
    forward = sum(w[k] * w[0] * w[k + 1] for k in range(1, len(w) - 1))
    reverse = sum(w[k] * w[k - 1] * w[-1] for k in range(1, len(w) - 1))
    assert mults(g, "forward") == forward
    assert mults(g, "reverse") == reverse


def test_layered_sparse_layers():
    widths = [10, 20, 20, 10]
    g = build_quietly(gen.layered, widths, density=0.1, seed=3)
    layer = {x: 0 for x in g.inputs} | {y: len(widths) - 1 for y in g.outputs}
    layer |= {v: int(v[1 : v.index("_")]) for v in g.intermediates}
    assert all(layer[v] == layer[u] + 1 for u, v in g.edges)
    for level, width in enumerate(widths):
        assert sum(1 for n in layer.values() if n == level) == width
    assert g.n_edges < 0.3 * sum(a * b for a, b in zip(widths, widths[1:], strict=False))


@pytest.mark.parametrize("n_in, n_mid, n_out", [(6, 1, 4), (1, 1, 9), (7, 3, 5)])
def test_bipartite_dense_costs(n_in, n_mid, n_out):
    g = build_quietly(gen.bipartite, n_in, n_out, n_mid, seed=1)
    assert counts(g) == (n_in, n_mid, n_out, n_mid * (n_in + n_out))
    # every middle vertex has all inputs as predecessors and all outputs as successors,
    # and no elimination changes that: every order costs n_mid · n_in · n_out
    for method in ("forward", "reverse", "markowitz"):
        assert mults(g, method) == n_mid * n_in * n_out
    assert np.linalg.matrix_rank(jacacc.reference_jacobian(g)) == min(n_mid, n_in, n_out)


# ---------------------------------------------------------------------------- trees
@pytest.mark.parametrize("depth, b", [(1, 3), (2, 2), (3, 3), (5, 2)])
def test_reduction_tree(depth, b):
    g = build_quietly(gen.reduction_tree, depth, b, seed=0)
    leaves = b**depth
    assert counts(g) == (
        leaves,
        sum(b**k for k in range(1, depth)),
        1,
        sum(b**k for k in range(1, depth + 1)),
    )
    d = g.to_networkx()
    assert all(d.in_degree(v) == b and d.out_degree(v) == 1 for v in g.intermediates)
    # forward: a vertex at height l has b^l leaves below it and 1 successor → Σ_l b^(d-l)·b^l
    assert mults(g, "forward") == (depth - 1) * leaves
    # reverse: b predecessors, 1 output above it → Σ_l b^(d-l)·b
    assert mults(g, "reverse") == sum(b ** (depth - k + 1) for k in range(1, depth))
    # a product of partials along each leaf's path
    path_products = [
        np.prod([g.partial(*e) for e in zip(p, p[1:], strict=False)])
        for x in g.inputs
        for p in nx.all_simple_paths(d, x, "y0")
    ]
    np.testing.assert_allclose(jacacc.reference_jacobian(g)[0], path_products)


@pytest.mark.parametrize("depth, b", [(1, 2), (2, 3), (4, 2)])
def test_broadcast_tree_is_the_mirror(depth, b):
    g = build_quietly(gen.broadcast_tree, depth, b, seed=0)
    r = build_quietly(gen.reduction_tree, depth, b, seed=0)
    assert counts(g) == (1, counts(r)[1], b**depth, counts(r)[3])
    assert nx.is_isomorphic(g.to_networkx(), r.to_networkx().reverse(copy=True))
    assert mults(g, "forward") == mults(r, "reverse")
    assert mults(g, "reverse") == mults(r, "forward")


# ---------------------------------------------------------------------------- chains
@pytest.mark.parametrize("length", [1, 2, 10, 50])
def test_chain_costs(length):
    g = build_quietly(gen.chain, length, seed=2)
    assert counts(g) == (1, length - 1, 1, length)
    for method in ("forward", "reverse", "markowitz"):
        assert mults(g, method) == length - 1
    np.testing.assert_allclose(jacacc.reference_jacobian(g), [[np.prod(g.partial_array())]])


@pytest.mark.parametrize("length", [2, 3, 8, 20])
def test_ladder_width_two_costs(length):
    g = build_quietly(gen.ladder, length, 2, seed=0)
    assert counts(g) == (2, 2 * (length - 1), 2, 3 * length)
    # computed level by level: forward Σ|X(j)|·|S(j)| = 1·1 + 2·2 at level 1, then 2·3 per level
    assert mults(g, "forward") == 6 * (length - 2) + 5
    assert mults(g, "reverse") == 6 * (length - 2) + 5
    assert mults(g, "markowitz") == 5 * (length - 1)
    assert np.all(jacacc.reference_jacobian(g) != 0)  # every output depends on every input


@pytest.mark.parametrize("length", [2, 3, 4])
def test_ladder_width_two_best_vertex_order(length):
    g = gen.ladder(length, 2, partials="none")
    best = min(jacacc.optimize(g, method=list(o)).mults for o in itertools.permutations(g.intermediates))
    assert best == 5 * (length - 1)


@pytest.mark.parametrize("length, width", [(1, 1), (5, 1), (4, 3), (7, 4)])
def test_ladder_shape(length, width):
    g = build_quietly(gen.ladder, length, width, seed=0)
    assert counts(g) == (width, width * (length - 1), width, length * (2 * width - 1))
    if width == 1:  # a single rail is a chain
        assert nx.is_isomorphic(g.to_networkx(), gen.chain(length).to_networkx())
    if length >= width:
        assert np.all(jacacc.reference_jacobian(g) != 0)


# ---------------------------------------------------------------------------- forward/reverse from first principles
def _forward_reverse_formulas(g: jacacc.CompGraph) -> tuple[int, int]:
    """Forward order: when j is eliminated its predecessors are exactly the inputs it depends
    on, its successors the original ones → Σ |X(j)|·|S(j)|; reverse mirrors it → Σ |P(j)|·|Y(j)|."""
    d = g.to_networkx()
    inputs, outputs = set(g.inputs), set(g.outputs)
    forward = sum(len(nx.ancestors(d, j) & inputs) * d.out_degree(j) for j in g.intermediates)
    reverse = sum(d.in_degree(j) * len(nx.descendants(d, j) & outputs) for j in g.intermediates)
    return forward, reverse


SMALL_RANDOM = [n for n in names("random") if "scale" not in get(n).tags]


@pytest.mark.parametrize("name", SMALL_RANDOM)
def test_registered_forward_reverse_costs(name):
    g = get(name).graph()
    assert (mults(g, "forward"), mults(g, "reverse")) == _forward_reverse_formulas(g)


# ---------------------------------------------------------------------------- the registered problems
@pytest.mark.parametrize("name", names("random"))
def test_registered_graph_problems_build(name):
    p = get(name)
    assert p.kind == "graph" and "random" in p.tags
    g = build_quietly(p.builder)
    assert_valid(g)
    assert (len(g.inputs), len(g.outputs)) == (p.n_inputs, p.n_outputs)
    assert "seed=" in p.description
    assert g == build_quietly(p.builder)  # the recorded seed makes it reproducible


@pytest.mark.parametrize("name", [n for n in names("random") if n != "random_dag_l"])
def test_registered_markowitz_reproduces_reference(name):
    g = get(name).graph()
    plan = jacacc.optimize(g, method="markowitz")
    np.testing.assert_allclose(plan.jacobian(), jacacc.reference_jacobian(g), rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_registered_markowitz_reproduces_reference_large():
    g = get("random_dag_l").graph()
    plan = jacacc.optimize(g, method="markowitz")
    np.testing.assert_allclose(plan.jacobian(), jacacc.reference_jacobian(g), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------- networks
NETWORKS = [
    n for n in names("alphagrad") if get(n).fn is not None and n.split("_")[0] in ("Perceptron", "Encoder")
]
FAST_NETWORKS = ["Perceptron_s", "Perceptron_params_s", "Encoder_s", "Perceptron_m"]


def test_network_problems_are_registered():
    assert {"Perceptron_s", "Perceptron_m", "Perceptron_params_s", "Encoder_s", "Encoder_m"} <= set(NETWORKS)
    for name in NETWORKS:
        expected = {"alphagrad", "matrix", "scale"} if name.endswith("_m") else {"alphagrad", "matrix"}
        assert set(get(name).tags) == expected


def _check_network(name: str) -> None:
    p = get(name)
    traced = p.trace()
    g = traced.graph
    n_vertices = len(g.inputs) + len(g.intermediates) + len(g.outputs)
    assert 100 <= n_vertices <= 12_000
    assert (len(g.inputs), len(g.outputs)) == (p.n_inputs, 1)
    for seed in (0, 1):
        x = p.sample(seed)
        np.testing.assert_allclose(traced(x), p(x), rtol=1e-12)
        jac = traced.reference_jacobian(x)
        np.testing.assert_allclose(jac, central_differences(p, x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", FAST_NETWORKS)
def test_network_jacobian_matches_central_differences(name):
    _check_network(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NETWORKS if n not in FAST_NETWORKS])
def test_network_jacobian_matches_central_differences_large(name):
    _check_network(name)


def test_perceptron_weights_as_inputs_agrees_with_fixed_weights():
    fn, n = nets.make_perceptron(3, 5, 4, seed=7)
    fn_w, n_w = nets.make_perceptron(3, 5, 4, seed=7, weights_as_inputs=True)
    params = nets.perceptron_params(3, 5, 4, seed=7)
    flat = np.concatenate([np.ravel(params[k]) for k in nets.PERCEPTRON_PARAMS])
    assert n_w == 3 + flat.size
    x = np.array([0.3, -0.7, 1.1])
    z = np.concatenate([x, flat])
    assert fn_w(z)[0] == pytest.approx(fn(x)[0], rel=1e-14)
    grad_x = jacacc.trace(fn, n, unpack=False).reference_jacobian(x)
    grad_z = jacacc.trace(fn_w, n_w, unpack=False).reference_jacobian(z)
    np.testing.assert_allclose(grad_z[:, :3], grad_x, rtol=1e-12)


def test_networks_are_seeded():
    a, _ = nets.make_encoder(2, 3, seed=1)
    b, _ = nets.make_encoder(2, 3, seed=1)
    c, _ = nets.make_encoder(2, 3, seed=2)
    x = np.linspace(-1.0, 1.0, 6)
    assert a(x)[0] == b(x)[0] != c(x)[0]
    assert get("Encoder_s").sample(3).tolist() == get("Encoder_s").sample(3).tolist()


def test_network_building_blocks():
    h = np.array([1.0, -2.0, 0.5, 4.0])
    out = nets.layer_norm(h, 1.0, 0.0)
    assert abs(out.mean()) < 1e-12 and out.var() == pytest.approx(1.0, rel=1e-4)
    z = np.array([0.2, -1.0, 3.0])
    probs = np.exp(z) / np.exp(z).sum()
    assert nets.softmax_cross_entropy(z, 2) == pytest.approx(-np.log(probs[2]))
    assert nets.silu(np.array([0.0, 2.0])).tolist() == pytest.approx([0.0, 2.0 / (1.0 + np.exp(-2.0))])
