"""optimize() checks every method's plan against forward and reverse mode (issue 43, item 5).

``forward_reverse_costs`` (degree counts, no elimination replayed) against the schedules of the
``forward`` and ``reverse`` methods in vertex, edge and face mode on drawn graphs; plans of every
heuristic never cost more than the better of the two, and where the check replaces a method's
order the plan says so and its Jacobian is still the dense chain rule's.
"""

from __future__ import annotations

import numpy as np
import pytest
from dags import random_lcgs
from hypothesis import given, settings

import jacacc
from jacacc.graph import reference_jacobian
from jacacc.orders.heuristics import forward_reverse_costs
from jacacc.problems.generators import random_dag, recent_plus_random


@settings(max_examples=30, deadline=None)
@given(random_lcgs(max_intermediates=10))
def test_degree_counts_are_the_forward_and_reverse_schedules_costs(g):
    forward, reverse = forward_reverse_costs(g)
    for mode in ("vertex", "edge", "face"):
        assert jacacc.optimize(g, mode=mode, method="forward").mults == forward, mode
        assert jacacc.optimize(g, mode=mode, method="reverse").mults == reverse, mode


@settings(max_examples=25, deadline=None)
@given(random_lcgs(max_intermediates=12))
def test_no_heuristic_plan_costs_more_than_forward_or_reverse(g):
    best = min(forward_reverse_costs(g))
    for method in ("markowitz", "markowitz_lowest_index", "relative_markowitz", "min_fill", "random"):
        plan = jacacc.optimize(g, method=method, seed=0)
        assert plan.mults <= best, method
        unchecked = jacacc.optimize(g, method=method, seed=0, baselines=False)
        if plan.baseline is None:
            assert plan.order == unchecked.order
        else:  # the method's own order lost: the plan names the baseline and what the method cost
            assert unchecked.mults == plan.method_mults > plan.mults
            assert plan.optimal is not False


def test_markowitz_loses_to_forward_on_a_long_program_and_the_plan_keeps_forward():
    g = recent_plus_random(5, 1100, 5, seed=0)
    forward, reverse = forward_reverse_costs(g)
    plan = jacacc.optimize(g, method="markowitz")
    unchecked = jacacc.optimize(g, method="markowitz", baselines=False)
    assert unchecked.mults > min(forward, reverse)             # the greedy order loses (issue 43's finding)
    assert plan.baseline == ("forward" if forward <= reverse else "reverse")
    assert plan.mults == min(forward, reverse) and plan.method_mults == unchecked.mults
    assert plan.order == jacacc.optimize(g, method=plan.baseline).order
    assert f"{plan.baseline} mode's kept" in repr(plan)
    record = plan.to_record()
    assert record["baseline"] == plan.baseline and record["method_mults"] == unchecked.mults
    small = recent_plus_random(2, 40, 2, seed=3)
    values = np.random.default_rng(0).normal(size=small.n_edges)
    for mode in ("vertex", "edge", "face"):
        checked = jacacc.optimize(small, mode=mode, method="markowitz" if mode != "face" else "greedy")
        np.testing.assert_allclose(checked.jacobian(values), reference_jacobian(small, values), rtol=1e-12)


def test_explicit_orders_and_structure_methods_are_not_replaced():
    g = random_dag(3, 30, 3, seed=5)
    worst = list(jacacc.optimize(g, method="markowitz", baselines=False).order)
    assert jacacc.optimize(g, method=worst).baseline is None
    assert jacacc.optimize(g, method="levels").baseline is None


@pytest.mark.parametrize("n_inputs", [1, 3, 12])
def test_recent_plus_random_is_a_connected_long_program(n_inputs):
    g = recent_plus_random(n_inputs, 50, 4, seed=n_inputs)
    assert (len(g.inputs), len(g.intermediates), len(g.outputs)) == (n_inputs, 50, 4)
    assert all(len(g.predecessors(v)) <= 2 + n_inputs for v in g.intermediates)
    assert all(f"v{i - 1}" in g.predecessors(f"v{i}") for i in range(1, 50))
    assert g == recent_plus_random(n_inputs, 50, 4, seed=n_inputs)
