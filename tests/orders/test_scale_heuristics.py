"""Preaccumulation orders (``jacacc.orders.scale``) against forward and reverse mode (issue 43, item 5).

The orders are permutations of the intermediates; the cost each reports is the replayed cost and
the multiplications of the schedule jacacc builds from it, whose Jacobian is the dense chain
rule's; look-ahead never costs more than the mode it finishes with; and on issue 43's family the
orders beat the better of forward and reverse mode.
"""

from __future__ import annotations

import pytest
from dags import random_lcgs
from hypothesis import HealthCheck, given, settings

import jacacc
from jacacc.orders import methods
from jacacc.orders.heuristics import forward_reverse_costs
from jacacc.orders.local_search import vertex_order_cost
from jacacc.orders.scale import preaccumulation_order, replay_cost
from jacacc.problems.generators import random_dag, recent_plus_random
from jacacc.verify import check_schedule

METHODS = ("reverse_preaccumulation", "forward_preaccumulation", "preaccumulation", "chain_preaccumulation")
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_methods_are_registered_heuristics():
    heuristics = methods("vertex", exact=False)
    assert all(name in heuristics for name in METHODS)


@FAST
@given(graph=random_lcgs(max_intermediates=12))
def test_orders_are_permutations_with_exact_costs_and_bounded_by_their_mode(graph):
    forward, reverse = forward_reverse_costs(graph)
    bound = {"reverse": reverse, "forward": forward, "best": min(forward, reverse)}
    for completion in ("reverse", "forward", "best"):
        for rule in ("lookahead", "chains"):
            order, cost = preaccumulation_order(graph, completion, rule)
            assert sorted(map(str, order)) == sorted(map(str, graph.intermediates))
            assert cost == vertex_order_cost(graph, order) == replay_cost(graph, order)
            if rule == "lookahead":
                assert cost <= bound[completion], completion


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("method", METHODS)
def test_schedule_counts_the_replayed_cost_and_gives_the_chain_rule_jacobian(method, seed):
    graph = random_dag(4, 40, 3, seed=seed) if seed % 2 else recent_plus_random(3, 40, 3, seed=seed)
    plan = jacacc.optimize(graph, method=method, baselines=False)
    assert sorted(plan.order) == sorted(graph.intermediates)
    assert plan.mults == plan.schedule.mults == vertex_order_cost(graph, plan.order)
    check_schedule(plan.schedule, graph)


@pytest.mark.parametrize("seed", [0, 1])
def test_preaccumulation_beats_forward_and_reverse_on_issue_43s_family(seed):
    graph = recent_plus_random(10, 2000, 10, seed=seed, partials="none")
    best = min(forward_reverse_costs(graph))
    for method in ("reverse_preaccumulation", "preaccumulation", "chain_preaccumulation"):
        order = jacacc.orders.find_order(graph, "vertex", method, seed, {}).order
        assert replay_cost(graph, order) < best, method
    order, cost = preaccumulation_order(graph)
    assert cost == replay_cost(graph, order) < 0.95 * best


def test_the_wrong_completion_or_rule_is_refused():
    graph = recent_plus_random(2, 10, 2, seed=0)
    with pytest.raises(ValueError, match="completion"):
        preaccumulation_order(graph, "sideways")
    with pytest.raises(ValueError, match="rule"):
        preaccumulation_order(graph, "reverse", "markowitz")


def test_a_graph_without_intermediates_has_the_empty_order():
    graph = jacacc.CompGraph.from_edges(["x"], ["y"], [("x", "y")])
    assert preaccumulation_order(graph) == ([], 0)
    assert jacacc.optimize(graph, method="preaccumulation").mults == 0
