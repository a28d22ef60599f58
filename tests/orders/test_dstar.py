"""D* (Guenter 2007, quoted in paper 003 §1): factor subgraphs, factoring order, schedules."""

from __future__ import annotations

import itertools
import time
import warnings

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jacacc
from jacacc.errors import JacaccError, OrderError
from jacacc.graph import CompGraph, reference_jacobian
from jacacc.orders.dstar import ChainProducts, Factoring, dstar, factor_subgraphs
from jacacc.orders.registry import methods
from jacacc.problems import generators
from jacacc.problems.paper003 import paper003_graphs
from jacacc.schedule import Op
from jacacc.verify import bauer_jacobian, check_schedule
from tests.dags import random_lcgs

VARIANTS = [dict(inner=i, ties=t, chains=c) for i, t, c in
            itertools.product(("best", "forward", "reverse"), ("inner", "outer"), ("forward", "reverse"))]


def graph(inputs, outputs, edges, seed=0):
    """A numeric graph whose partials are distinct random values."""
    rng = np.random.default_rng(seed)
    return CompGraph.from_edges(inputs, outputs, [(u, v, float(rng.uniform(0.5, 2.0))) for u, v in edges])


def check(plan_or_schedule, g, partials=None):
    """The schedule evaluates to the reference Jacobian, and its costs add up."""
    schedule = getattr(plan_or_schedule, "schedule", plan_or_schedule)
    check_schedule(schedule, g, partials)
    steps = schedule.order
    assert isinstance(steps[-1], ChainProducts)
    assert all(isinstance(s, Factoring) for s in steps[:-1])
    assert sum(s.mults for s in steps) == schedule.mults == sum(isinstance(op, Op) for op in schedule.ops)
    assert sum(s.adds for s in steps[:-1]) == schedule.adds


# ---------------------------------------------------------------------------- registry and api
def test_registered_in_structure_mode_and_resolved_by_optimize():
    assert "dstar" in methods("structure")
    g = graph(["x"], ["y"], [("x", "a"), ("x", "b"), ("a", "y"), ("b", "y")])
    plan = jacacc.optimize(g, method="dstar")
    assert plan.mode == "structure" and plan.method == "dstar"
    assert plan.schedule.mode == "structure"
    assert plan.order == plan.schedule.order
    assert [str(s) for s in plan.order] == ["[x→y]×1", "chains×1"]
    assert plan.mults == plan.schedule.mults == 2 and plan.adds == 1
    np.testing.assert_allclose(plan.jacobian(), reference_jacobian(g))
    assert "structure" in repr(plan)
    assert plan.to_record()["order"] == ["[x→y]×1", "chains×1"]


def test_bad_options_are_refused():
    g = graph(["x"], ["y"], [("x", "a"), ("a", "y")])
    for bad in ({"inner": "sideways"}, {"ties": "middle"}, {"chains": "auto"}, {"inner": 3}):
        with pytest.raises(OrderError, match="dstar option"):
            jacacc.optimize(g, method="dstar", **bad)
    with pytest.raises(JacaccError):
        jacacc.optimize(g, method="dstar", depth=3)  # not an option of dstar
    with pytest.raises(OrderError, match="structure"):
        jacacc.optimize(g, mode="structure", method=["a"])  # no explicit orders in this mode
    with pytest.raises(JacaccError):
        dstar({"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", 1], ["y", "x", 1]]})


# ---------------------------------------------------------------------------- hand-made graphs
def test_diamond():
    g = graph(["x"], ["y"], [("x", "a"), ("x", "b"), ("a", "y"), ("b", "y")])
    assert factor_subgraphs(g) == {("x", "y"): 1}
    result = dstar(g)
    assert result.order[0] == Factoring("x", "y", 1, mults=2, adds=1)
    check(result.schedule, g)


def test_nested_diamonds_inner_first():
    # x → a, a branches to b and c, joined at d, which branches to e and f, joined at y
    edges = [("x", "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e"), ("d", "f"),
             ("e", "y"), ("f", "y")]
    g = graph(["x"], ["y"], edges)
    assert factor_subgraphs(g) == {("a", "d"): 1, ("a", "y"): 1, ("d", "y"): 1}
    inner = dstar(g, ties="inner")
    assert [str(s) for s in inner.order] == ["[a→d]×1", "[d→y]×1", "chains×1"]
    assert inner.schedule.mults == 6  # 2 + 2 for the diamonds, 2 for the chain x → a → d → y
    check(inner.schedule, g)
    outer = dstar(g, ties="outer")  # the enclosing [a, y] first: its paths summed in one go
    assert [str(s) for s in outer.order] == ["[a→y]×1", "chains×1"]
    assert outer.schedule.mults == 7
    check(outer.schedule, g)
    assert dstar(g).schedule.mults == 6  # the default keeps the cheaper variant
    assert jacacc.optimize(g, method="markowitz").mults == 6


def test_paper003_fig4_1a_nested_blocks():
    g = jacacc.problems.get("paper003_fig4_1a").graph()
    assert factor_subgraphs(g) == {("x", "c"): 1, ("x", "f"): 1, ("c", "f"): 1}
    plan = jacacc.optimize(g, method="dstar")
    assert [str(s) for s in plan.order] == ["[x→c]×1", "[c→f]×1", "chains×1"]
    assert plan.mults == 5
    check(plan, g)


def test_shared_factor_subgraph_is_summed_once():
    # the diamond a → {b, c} → d lies in all four derivative graphs
    edges = [("x1", "a"), ("x2", "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"),
             ("d", "y1"), ("d", "y2")]
    g = graph(["x1", "x2"], ["y1", "y2"], edges)
    assert factor_subgraphs(g) == {("a", "d"): 4}
    result = dstar(g)
    factoring, chains = result.order
    assert factoring == Factoring("a", "d", 4, mults=2, adds=1)
    assert chains.n_chains == 4 and chains.mults == 6  # two shared half-chains, then four entries
    assert result.schedule.mults == 8 == jacacc.optimize(g, method="markowitz").mults
    check(result.schedule, g)


def test_counts_follow_the_derivative_graphs():
    # [u, y0] lies in D(x0, y0) and D(x1, y0); [u, y1] likewise: counts 2 each
    edges = [("x0", "u"), ("x1", "u"), ("u", "s"), ("u", "k"), ("s", "y0"), ("k", "y0"),
             ("s", "y1"), ("k", "y1")]
    g = graph(["x0", "x1"], ["y0", "y1"], edges)
    assert factor_subgraphs(g) == {("u", "y0"): 2, ("u", "y1"): 2}
    result = dstar(g)
    assert [(s.source, s.sink, s.n_graphs) for s in result.order[:-1]] == [("u", "y0", 2), ("u", "y1", 2)]
    check(result.schedule, g)


def test_factoring_removes_a_subgraph_from_other_counts():
    # Once [x, c] is factored, x keeps one successor and [x, f] disappears without being factored.
    g = jacacc.problems.get("paper003_fig4_1a").graph()
    result = dstar(g, inner="best", ties="inner")
    assert ("x", "f") not in {(s.source, s.sink) for s in result.order[:-1]}


def test_guenter_style_traced_function():
    # f(x) = sin(cos x) · cos(cos x): cos x branches into sin and cos, joined by the product
    traced = jacacc.trace(lambda x: np.sin(np.cos(x)) * np.cos(np.cos(x)), 1)
    counts = factor_subgraphs(traced.graph)
    assert list(counts.values()) == [1]
    plan = jacacc.optimize(traced.graph, method="dstar")  # structure only: symbolic partials are fine
    for x in (0.3, 1.7):
        partials = traced.partials([x])
        got = plan.schedule.evaluate(partials)
        np.testing.assert_allclose(got, [[-np.sin(x) * np.cos(2 * np.cos(x))]], rtol=1e-12)
        check(plan, traced.linearize([x]))


def test_two_outputs_share_a_factored_product():
    def f(x, y):
        u = x * y
        s, c = np.sin(u), np.cos(u)
        return [s * c, s + c]

    traced = jacacc.trace(f, 2)
    assert sorted(factor_subgraphs(traced.graph).values()) == [2, 2]  # [u, out0] and [u, out1]
    plan = jacacc.optimize(traced.graph, method="dstar")
    assert [s.n_graphs for s in plan.order[:-1]] == [2, 2]
    check(plan, traced.linearize([0.4, -1.3]))


def test_input_joined_to_output_directly_and_by_a_path():
    g = graph(["x"], ["y"], [("x", "y"), ("x", "a"), ("a", "y")])
    assert factor_subgraphs(g) == {("x", "y"): 1}
    result = dstar(g)
    assert result.schedule.mults == 1 and result.schedule.adds == 1
    check(result.schedule, g)


def test_parallel_paths_of_different_lengths():
    edges = [("x", "a"), ("a", "b"), ("b", "y"), ("x", "c"), ("c", "y"), ("x", "y"), ("a", "y")]
    g = graph(["x"], ["y"], edges)
    check(dstar(g).schedule, g)


@pytest.mark.parametrize("build, mode_method", [
    (lambda: generators.reduction_tree(3, 2, seed=1), "reverse"),
    (lambda: generators.broadcast_tree(3, 2, seed=1), "forward"),
    (lambda: generators.chain(12, seed=1), "forward"),
])
def test_graphs_without_factor_subgraphs_are_chain_products(build, mode_method):
    g = build()
    assert factor_subgraphs(g) == {}
    plan = jacacc.optimize(g, method="dstar")
    assert len(plan.order) == 1 and isinstance(plan.order[0], ChainProducts)
    # shared prefixes (one input) or suffixes (one output) make it as cheap as the matching mode
    assert plan.mults == jacacc.optimize(g, method=mode_method).mults
    check(plan, g)


def test_unconnected_pairs_and_constant_outputs():
    dg = nx.DiGraph()
    dg.add_nodes_from(["x0", "x1", "x2", "y0", "y1", "y2"])  # x2 and y2 stay unconnected
    dg.add_weighted_edges_from([("x0", "a", 2.0), ("x0", "b", 3.0), ("a", "y0", 5.0), ("b", "y0", 7.0),
                                ("x1", "y1", 11.0)], weight="partial")
    g = CompGraph(dg, ["x0", "x1", "x2"], ["y0", "y1", "y2"])
    plan = jacacc.optimize(g, method="dstar")
    assert set(plan.schedule.result) == {("y0", "x0"), ("y1", "x1")}
    check(plan, g)


def test_integer_node_ids():
    g = graph([0, 1], [10], [(0, 5), (1, 5), (5, 6), (5, 7), (6, 10), (7, 10)])
    check(dstar(g).schedule, g)


# ---------------------------------------------------------------------------- the definition, brute force
def _brute_factor_subgraphs(g: CompGraph) -> dict:
    """Guenter's definition evaluated by path reachability, per derivative graph."""
    dg = g.to_networkx()
    counts: dict = {}
    for r in g.inputs:
        for t in g.outputs:
            if not nx.has_path(dg, r, t):
                continue
            nodes = (nx.descendants(dg, r) | {r}) & (nx.ancestors(dg, t) | {t})
            d = dg.subgraph(nodes)

            def avoids(src, dst, via, d=d):  # a src→dst path that misses via
                return via not in (src, dst) and nx.has_path(d.subgraph(set(d) - {via}), src, dst)

            for early, late in itertools.permutations(nodes, 2):
                if not nx.has_path(d, early, late) or d.out_degree(early) < 2 or d.in_degree(late) < 2:
                    continue
                dominates = not avoids(r, late, early)
                postdominates = not avoids(early, t, late)
                if dominates or postdominates:
                    counts[(early, late)] = counts.get((early, late), 0) + 1
    return counts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_lcgs(max_intermediates=7))
def test_factor_subgraphs_match_the_definition(g):
    assert factor_subgraphs(g) == _brute_factor_subgraphs(g)


# ---------------------------------------------------------------------------- random graphs
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_lcgs(), st.sampled_from(VARIANTS))
def test_random_lcgs_give_the_exact_jacobian(g, variant):
    result = dstar(g, **variant)
    check(result.schedule, g)
    np.testing.assert_allclose(result.schedule.evaluate(g.partial_array()), bauer_jacobian(g),
                               rtol=1e-10, atol=1e-12)
    best = dstar(g)
    assert best.schedule.mults <= result.schedule.mults
    assert jacacc.optimize(g, method="dstar").mults == best.schedule.mults


@pytest.mark.parametrize("seed", range(4))
def test_random_dags_from_the_generators(seed):
    for g in (generators.random_dag(3, 25, 3, seed=seed), generators.layered([3, 5, 5, 2], density=0.6, seed=seed),
              generators.ladder(6, seed=seed)):
        plan = jacacc.optimize(g, method="dstar")
        check(plan, g)
        # batched evaluation on other partials
        partials = np.random.default_rng(seed).uniform(-1, 1, (4, g.n_edges))
        np.testing.assert_allclose(plan.jacobian(partials), reference_jacobian(g, partials), atol=1e-12)


@pytest.mark.parametrize("name", sorted(paper003_graphs()))
def test_paper003_figures(name):
    g = jacacc.problems.get(name).graph()
    plan = jacacc.optimize(g, method="dstar")
    check(plan, g)
    np.testing.assert_allclose(plan.jacobian(), bauer_jacobian(g))


@pytest.mark.parametrize("name", ["RoeFlux_1d", "BlackScholes_Jacobian", "HumanHeartDipole"])
def test_zoo_functions(name):
    problem = jacacc.problems.get(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = problem.trace()
    start = time.perf_counter()
    plan = jacacc.optimize(traced.graph, method="dstar")
    assert time.perf_counter() - start < 10
    check(plan, traced.linearize(problem.sample(0)))
