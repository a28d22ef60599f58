"""Property tests of the elimination engines and every registered order method.

Every check here is against an independent reference: the dense chain rule
and Bauer's path formula for values, a NetworkX replay for costs, the
textbook formulas for forward and reverse mode, and brute force for optimality
claims.
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from dags import random_lcgs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jacacc
from jacacc import CompGraph, EdgeStep, OrderError, RegistryError, optimize, reference_jacobian
from jacacc.eliminate import count_ops
from jacacc.orders.heuristics import EDGE_HEURISTICS, VERTEX_HEURISTICS
from jacacc.verify import bauer_jacobian, check_schedule

MODES = ["vertex", "edge"]
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def all_methods():
    return [(mode, name) for mode in MODES for name in jacacc.methods(mode, exact=False)]


# ----------------------------------------------------------------------------- independent cost replays
def replay_vertex_cost(graph: CompGraph, order) -> int:
    """Σ |P(j)|·|S(j)| over the order, on a NetworkX copy (independent of the engine)."""
    g = nx.DiGraph(graph.digraph.edges)
    g.add_nodes_from(graph.digraph.nodes)
    cost = 0
    for j in order:
        preds, succs = list(g.predecessors(j)), list(g.successors(j))
        cost += len(preds) * len(succs)
        g.add_edges_from((i, k) for i in preds for k in succs)
        g.remove_node(j)
    return cost


def replay_edge_cost(graph: CompGraph, steps) -> tuple[int, int]:
    """Multiplications and fill-ins of an edge elimination sequence, on a NetworkX copy."""
    g = nx.DiGraph(graph.digraph.edges)
    g.add_nodes_from(graph.digraph.nodes)
    inter = set(graph.intermediates)
    mults = fills = 0
    for (u, v), direction in steps:
        assert g.has_edge(u, v)
        if direction == "front":
            pairs = [(u, k) for k in g.successors(v)]
        else:
            pairs = [(i, v) for i in g.predecessors(u)]
        mults += len(pairs)
        fills += sum(not g.has_edge(a, b) for a, b in pairs)
        g.add_edges_from(pairs)
        g.remove_edge(u, v)
        for w in (u, v):
            if w in inter and w in g and (g.in_degree(w) == 0 or g.out_degree(w) == 0):
                g.remove_node(w)
    assert not (inter & set(g.nodes)), "sequence left intermediates"
    return mults, fills


def textbook_forward_reverse(graph: CompGraph) -> tuple[int, int]:
    """Σ|X(j)|·|S(j)| and Σ|P(j)|·|Y(j)| with X, Y from NetworkX ancestors/descendants."""
    g = graph.digraph
    fwd = rev = 0
    for j in graph.intermediates:
        x = len(nx.ancestors(g, j) & set(graph.inputs))
        y = len(nx.descendants(g, j) & set(graph.outputs))
        fwd += x * g.out_degree(j)
        rev += g.in_degree(j) * y
    return fwd, rev


# ----------------------------------------------------------------------------- properties over random DAGs
@pytest.mark.parametrize(("mode", "method"), all_methods())
@PROPERTY
@given(graph=random_lcgs(), seed=st.integers(0, 2**31 - 1))
def test_every_method_reproduces_the_reference_jacobian(mode, method, graph, seed):
    plan = optimize(graph, mode=mode, method=method, seed=seed)
    check_schedule(plan.schedule, graph, rtol=1e-10)
    np.testing.assert_allclose(plan.jacobian(), bauer_jacobian(graph), rtol=1e-10, atol=1e-10)
    assert plan.jacobian().shape == (len(graph.outputs), len(graph.inputs))


@pytest.mark.parametrize(("mode", "method"), all_methods())
@PROPERTY
@given(graph=random_lcgs(), seed=st.integers(0, 2**31 - 1))
def test_reported_cost_is_the_schedule_and_an_independent_replay(mode, method, graph, seed):
    plan = optimize(graph, mode=mode, method=method, seed=seed)
    ops = plan.schedule.ops
    assert plan.mults == len(ops)
    assert plan.adds == sum(op.accumulate for op in ops)
    if mode == "vertex":
        assert sorted(map(str, plan.order)) == sorted(map(str, graph.intermediates))
        assert plan.mults == replay_vertex_cost(graph, plan.order)
    else:
        mults, fills = replay_edge_cost(graph, plan.order)
        assert plan.mults == mults
        assert plan.schedule.fill_ins == fills
    assert plan.lower_bound is not None and plan.lower_bound <= plan.mults
    counted = count_ops(graph, plan.order, mode)
    assert (counted.mults, counted.adds, counted.fill_ins) == (plan.mults, plan.adds, plan.schedule.fill_ins)


@pytest.mark.parametrize("mode", MODES)
@PROPERTY
@given(graph=random_lcgs())
def test_forward_and_reverse_cost_the_textbook_formulas(mode, graph):
    fwd, rev = textbook_forward_reverse(graph)
    assert optimize(graph, mode=mode, method="forward").mults == fwd
    assert optimize(graph, mode=mode, method="reverse").mults == rev


@PROPERTY
@given(graph=random_lcgs(max_intermediates=6), data=st.data())
def test_any_vertex_order_gives_the_same_jacobian(graph, data):
    order = data.draw(st.permutations(list(graph.intermediates)))
    plan = optimize(graph, mode="vertex", method=order)
    assert plan.method == "explicit"
    check_schedule(plan.schedule, graph)


@PROPERTY
@given(graph=random_lcgs(max_intermediates=6), batch=st.integers(1, 4), seed=st.integers(0, 1000))
def test_schedule_evaluates_a_batch_like_a_loop(graph, batch, seed):
    plan = optimize(graph, mode="edge", method="markowitz")
    partials = np.random.default_rng(seed).normal(size=(batch, graph.n_edges))
    got = plan.schedule.evaluate(partials)
    assert got.shape == (batch, len(graph.outputs), len(graph.inputs))
    for b in range(batch):
        np.testing.assert_allclose(got[b], reference_jacobian(graph, partials[b]), rtol=1e-10, atol=1e-12)


def brute_force_vertex_minimum(graph: CompGraph) -> int:
    return min(replay_vertex_cost(graph, p) for p in itertools.permutations(graph.intermediates))


@settings(max_examples=40, deadline=None)
@given(graph=random_lcgs(max_intermediates=5))
def test_optimality_claims_and_lower_bound_hold_against_brute_force(graph):
    best = brute_force_vertex_minimum(graph)
    for method in jacacc.methods("vertex"):
        plan = optimize(graph, mode="vertex", method=method, seed=0)
        assert plan.lower_bound <= best
        if plan.optimal:
            assert plan.mults == best


# ----------------------------------------------------------------------------- hand-checked behaviour
def chain(n: int) -> CompGraph:
    names = ["x"] + [f"v{i}" for i in range(n)] + ["y"]
    return CompGraph.from_edges(["x"], ["y"], [(a, b, 2.0) for a, b in zip(names, names[1:], strict=False)])


def test_markowitz_breaks_ties_toward_reverse_mode():
    assert optimize(chain(3), method="markowitz").order == ("v2", "v1", "v0")
    assert optimize(chain(3), method="markowitz_lowest_index").order == ("v0", "v1", "v2")


def test_markowitz_picks_the_cheaper_vertex_first():
    # two inputs feed a, which feeds b, which fans out to three outputs.
    # Markowitz degrees: a = 2*1, b = 1*3  -> a first (cost 2), then b has 2*3 = 6: total 8,
    # whereas b first (3) then a (2*3 = 6) costs 9.
    edges = [("x0", "a"), ("x1", "a"), ("a", "b")] + [("b", f"y{i}") for i in range(3)]
    g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1", "y2"], [(u, v, 1.5) for u, v in edges])
    plan = optimize(g, method="markowitz")
    assert plan.order == ("a", "b")
    assert plan.mults == 2 + 6


def test_lower_bound_proves_a_chain_optimal():
    plan = optimize(chain(4), method="reverse")
    assert plan.mults == 4 and plan.lower_bound == 4 and plan.optimal is True


def test_random_methods_are_reproducible_with_a_seed():
    g = CompGraph.from_edges(
        ["x0", "x1"], ["y0", "y1"],
        [("x0", "a", 1), ("x1", "a", 2), ("a", "b", 3), ("a", "c", 4), ("b", "y0", 5), ("c", "y1", 6),
         ("b", "c", 7), ("x0", "c", 8)],
    )
    for mode in MODES:
        a = optimize(g, mode=mode, method="random", seed=7).order
        b = optimize(g, mode=mode, method="random", seed=7).order
        assert a == b


def test_edge_steps_accept_several_spellings():
    g = chain(1)
    for seq in ([(("x", "v0"), "front")], [("x", "v0", "front")], [{"edge": ["v0", "y"], "direction": "back"}]):
        plan = optimize(g, mode="edge", method=seq)
        assert plan.jacobian().item() == 4.0
        assert isinstance(plan.order[0], EdgeStep)


# ----------------------------------------------------------------------------- bad orders and names
@pytest.mark.parametrize(
    ("order", "message"),
    [
        (["v0", "v1"], r"missing 'v2'"),
        (["v0", "v1", "v2", "v2"], r"repeated 'v2'"),
        (["v0", "v1", "v2", "zz"], r"unknown vertices 'zz'"),
        (["x", "v0", "v1", "v2"], r"not intermediates 'x'"),
        (42, r"list of intermediates, got int"),
    ],
)
def test_vertex_order_that_is_not_a_permutation_is_refused(order, message):
    with pytest.raises(OrderError, match=message):
        optimize(chain(3), method=order)


@pytest.mark.parametrize(
    ("seq", "message"),
    [
        ([(("x", "y"), "front")], r"not in the graph"),
        ([(("v0", "y"), "front")], r"needs an intermediate target"),
        ([(("x", "v0"), "back")], r"needs an intermediate source"),
        ([(("x", "v0"), "sideways")], r"direction 'sideways'"),
        ([("x",)], r"a step is"),
        ([], r"intermediates left: 'v0'"),
    ],
)
def test_invalid_edge_sequences_are_refused(seq, message):
    with pytest.raises(OrderError, match=message):
        optimize(chain(1), mode="edge", method=seq)


def test_unknown_mode_and_method_list_the_valid_ones():
    with pytest.raises(RegistryError, match=r"unknown mode 'diagonal'; valid modes: vertex, edge"):
        optimize(chain(1), mode="diagonal")
    with pytest.raises(RegistryError, match=r"unknown method 'magic'.*markowitz"):
        optimize(chain(1), method="magic")
    with pytest.raises(RegistryError, match=r"unknown mode"):
        jacacc.methods("diagonal")
    with pytest.raises(RegistryError, match=r"does not accept options"):
        optimize(chain(1), method="markowitz", depth=3)


def test_methods_registry_lists_the_required_heuristics():
    for mode in MODES:
        assert {"forward", "reverse", "markowitz", "random"} <= set(jacacc.methods(mode))


def test_a_callable_method_and_a_registered_one():
    def lowest_name_first(graph, *, seed=None):
        return sorted(graph.intermediates)

    plan = optimize(chain(2), method=lowest_name_first)
    assert plan.method == "lowest_name_first" and plan.order == ("v0", "v1")
    jacacc.register_method("test_lowest_name_first", lowest_name_first, modes=["vertex"])
    try:
        assert "test_lowest_name_first" in jacacc.methods("vertex")
        assert optimize(chain(2), method="test_lowest_name_first").order == ("v0", "v1")
    finally:
        from jacacc.orders.registry import _METHODS

        del _METHODS["vertex"]["test_lowest_name_first"]


def test_plan_and_schedule_print_their_cost():
    plan = optimize(chain(2), method="markowitz")
    text = repr(plan)
    for word in ("mode", "vertex", "method", "markowitz", "mults", "adds", "optimal", "lower bound"):
        assert word in text
    assert f"mults={plan.mults}" in repr(plan.schedule)
    assert plan.schedule.listing().count("\n") == plan.mults - 1


def test_a_structural_graph_optimizes_but_does_not_evaluate():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "v"), ("v", "y")])
    plan = optimize(g)
    assert plan.mults == 1
    with pytest.raises(jacacc.GraphError, match=r"non-numeric partials"):
        plan.jacobian()
    assert plan.jacobian(np.array([2.0, 3.0])).item() == 6.0


# ----------------------------------------------------------------------------- greedy drivers vs naive scans
def naive_vertex_order(graph, key):
    """Re-evaluate every key at every step (what the lazy heap must reproduce)."""
    from jacacc.eliminate.state import EliminationGraph

    state, order = EliminationGraph(graph), []
    while not state.done:
        j = min(state.intermediates, key=lambda v: (key(state, v), state.rank[v]))
        order.append(j)
        state.eliminate_vertex(j)
    return order


def naive_edge_order(graph, key):
    from jacacc.eliminate.state import EliminationGraph
    from jacacc.orders.heuristics import _step_rank

    state, order = EliminationGraph(graph), []
    while not state.done:
        step = min(state.edge_steps(), key=lambda s: (key(state, s), _step_rank(state, s)))
        order.append(step)
        state.apply(step)
    return order


@pytest.mark.parametrize("heuristic", VERTEX_HEURISTICS,
                         ids=lambda h: h.name)
@PROPERTY
@given(graph=random_lcgs(max_inputs=3, max_intermediates=10, max_outputs=3))
def test_lazy_vertex_driver_equals_a_naive_scan(heuristic, graph):
    assert list(heuristic(graph)) == naive_vertex_order(graph, heuristic.make_key(graph))


@pytest.mark.parametrize("heuristic", EDGE_HEURISTICS,
                         ids=lambda h: h.name)
@PROPERTY
@given(graph=random_lcgs(max_inputs=3, max_intermediates=10, max_outputs=3))
def test_lazy_edge_driver_equals_a_naive_scan(heuristic, graph):
    assert list(heuristic(graph)) == naive_edge_order(graph, heuristic.make_key(graph))
