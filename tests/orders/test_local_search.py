"""The ``anneal`` local search: exact costing, seeded results, limits, and quality on the zoo."""

from __future__ import annotations

import random

import pytest
from dags import random_lcgs
from hypothesis import HealthCheck, given, settings

import jacacc
from jacacc import OrderError, optimize, problems
from jacacc.eliminate import count_ops
from jacacc.orders.local_search import BitsetVertexCost, Progress, _Annealer, anneal_vertex
from jacacc.problems import generators
from jacacc.verify import check_schedule

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(graph=random_lcgs(max_intermediates=10))
def test_bitset_cost_equals_the_engine(graph):
    model = BitsetVertexCost(graph)
    order = list(graph.intermediates)
    random.Random(len(order)).shuffle(order)
    assert model.cost(order) == count_ops(graph, order, "vertex").mults


def test_incremental_moves_keep_costs_exact():
    graph = generators.random_dag(4, 40, 3, seed=3)
    model = BitsetVertexCost(graph)
    annealer = _Annealer(model, random.Random(0))
    annealer.load(list(model.intermediates))
    for _ in range(400):
        lo, hi, segment = annealer.propose(8)
        annealer.try_move(lo, hi, segment, 2.0)
        assert annealer.costs == model.costs(annealer.order)
        assert annealer.total == sum(annealer.costs)
        # the checkpoints are the states before their positions (on the vertices not yet eliminated)
        for c, (preds, succs) in enumerate(annealer.checkpoints):
            p, s = model.start()
            done = annealer.order[:c * annealer.stride]
            for j in done:
                model.eliminate(p, s, j)
            alive = [j for j in model.intermediates if j not in done]
            assert [(preds[j], succs[j]) for j in alive] == [(p[j], s[j]) for j in alive]


@pytest.mark.parametrize("seed", [0, 1])
def test_anneal_beats_or_matches_every_start_and_verifies(seed):
    graph = generators.random_dag(4, 30, 3, seed=seed)
    plan = optimize(graph, method="anneal", seed=seed, time_limit=1, iterations=20_000)
    for name in ("markowitz", "min_fill", "relative_markowitz", "reverse"):
        assert plan.mults <= optimize(graph, method=name).mults
    assert plan.search.status == "feasible" and plan.search.objective == plan.mults
    assert plan.optimal in (None, True)
    check_schedule(plan.schedule, graph)


def test_anneal_is_seeded_with_an_iteration_budget():
    graph = generators.random_dag(3, 40, 3, seed=7)
    runs = [anneal_vertex(graph, seed=5, time_limit=30, iterations=5000).order for _ in range(2)]
    assert runs[0] == runs[1]


@FAST
@given(graph=random_lcgs(max_intermediates=8))
def test_small_graphs_are_solved_exactly(graph):
    plan = optimize(graph, method="anneal", seed=0, time_limit=1)
    if graph.intermediates:
        assert plan.optimal is True and plan.search.status == "optimal"
    assert plan.mults == jacacc.optimize(graph, method="exhaustive").mults
    check_schedule(plan.schedule, graph)


def test_anneal_improves_markowitz_on_alphagrad_functions():
    for name, limit in (("RoeFlux_1d", 2), ("BlackScholes_Jacobian", 2)):
        problem = problems.get(name)
        graph = problem.graph()
        plan = optimize(graph, method="anneal", seed=0, time_limit=limit)
        assert plan.mults < optimize(graph, method="markowitz").mults
        check_schedule(plan.schedule, problem.trace().linearize(problem.sample(0)))


def test_progress_reports_improvements():
    reports = []
    graph = generators.random_dag(4, 30, 3, seed=2)
    anneal_vertex(graph, seed=0, time_limit=1, iterations=3000, progress=reports.append)
    assert reports and all(isinstance(r, Progress) for r in reports)
    bests = [r.best for r in reports]
    assert bests == sorted(bests, reverse=True)
    assert "best" in str(reports[-1])


def test_explicit_start_orders_and_bad_options():
    graph = generators.random_dag(3, 20, 2, seed=1)
    order = list(reversed(graph.intermediates))
    result = anneal_vertex(graph, starts=[order], time_limit=1, iterations=100)
    assert result.search.objective <= count_ops(graph, order).mults
    for bad in ({"time_limit": -1}, {"time_limit": 0}, {"time_limit": "5"}, {"iterations": -2},
                {"temperature": 0}, {"starts": []}, {"starts": [["v0"]]}, {"restarts": 0}):
        with pytest.raises(OrderError):
            anneal_vertex(graph, **bad)


def test_anneal_is_registered_for_vertex_mode():
    assert "anneal" in jacacc.methods("vertex") and "anneal" in jacacc.methods("vertex", exact=False)
