"""``cpsat`` / ``optimal`` against the exhaustive oracle, honest flags, options, and the benchmark script.

Every plan's Jacobian is checked against the chain-rule reference.  The
oracle (:mod:`jacacc.orders.exhaustive`) is independent of the CP-SAT model
(vertex mode); in edge and face mode the branch-and-bound shares its states
and bounds, so there the comparison checks the time-limited driver, the cap
and the reported flags.
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
from dags import random_lcgs
from hypothesis import HealthCheck, given, settings

import jacacc
from jacacc import CompGraph, OrderError, optimize
from jacacc.bench import read_record
from jacacc.eliminate import count_ops
from jacacc.orders.cpsat import branch_and_bound, cpsat_vertex, edge_steps_from_vertex_order, vertex_model
from jacacc.orders.exhaustive import optimum
from jacacc.orders.local_search import Progress
from jacacc.problems import generators
from jacacc.verify import check_schedule

pytest.importorskip("ortools")

ROOT = pathlib.Path(__file__).resolve().parents[2]
ORACLE = settings(max_examples=30, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# paper 003's face-beats-vertex graph: vertex optimum 12, edge and face optimum 11
FACE_BEATS_VERTEX = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [
    ("x0", "v0", 2.0), ("x0", "v2", 3.0), ("x1", "v1", 5.0), ("v0", "v1", 7.0), ("v0", "v2", 11.0),
    ("v1", "v2", 13.0), ("v0", "y0", 17.0), ("v0", "y1", 19.0), ("v1", "y0", 23.0), ("v1", "y1", 29.0),
    ("v2", "y0", 31.0), ("v2", "y1", 37.0)])


def check_flags(plan, best: int) -> None:
    """Never optimal=True without proof; the bound never above the optimum."""
    assert plan.lower_bound is not None and plan.lower_bound <= best <= plan.mults
    assert plan.search is not None and plan.search.objective == plan.mults
    assert plan.search.best_bound <= best
    if plan.optimal:
        assert plan.mults == best and plan.search.status == "optimal"
    else:
        assert plan.search.status == "feasible"
    check_schedule(plan.schedule, plan.graph)


# ============================================================================ against the oracle
@ORACLE
@given(graph=random_lcgs(max_intermediates=9))
def test_vertex_optimal_matches_the_oracle(graph):
    best = optimum(graph, "vertex").cost if graph.intermediates else 0
    plan = optimize(graph, method="optimal", workers=1, seed=0, hint_time=0)
    assert plan.mults == best and plan.optimal is True
    check_flags(plan, best)


@ORACLE
@given(graph=random_lcgs(max_intermediates=8))
def test_vertex_cpsat_model_alone_matches_the_oracle(graph):
    """No local search: the hint is the best greedy order, CP-SAT must close the gap itself."""
    best = optimum(graph, "vertex").cost if graph.intermediates else 0
    result = cpsat_vertex(graph, workers=1, time_limit=20, hint_time=0)
    assert result.search.objective == best == count_ops(graph, result.order).mults
    assert result.optimal is True and result.lower_bound == best


@ORACLE
@given(graph=random_lcgs(max_inputs=3, max_intermediates=4, max_outputs=3))
def test_edge_optimal_matches_the_oracle(graph):
    best = optimum(graph, "edge").cost if graph.intermediates else 0
    plan = optimize(graph, mode="edge", method="optimal", hint_time=0)
    assert plan.mults == best and plan.optimal is True
    check_flags(plan, best)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_lcgs(max_inputs=2, max_intermediates=3, max_outputs=2))
def test_face_optimal_matches_the_oracle(graph):
    best = optimum(graph, "face").cost if graph.intermediates else 0
    plan = optimize(graph, mode="face", method="optimal", hint_time=0)
    assert plan.mults == best and plan.optimal is True
    check_flags(plan, best)


# seed 7's searches take seconds: exhaustive (make test-extra); the other eleven run in make test
@pytest.mark.parametrize("seed", [pytest.param(s, marks=pytest.mark.exhaustive) if s == 7 else s for s in range(12)])
def test_seeded_random_dags_in_every_mode(seed):
    graph = generators.random_dag(2, 3 + seed % 3, 2, seed=seed)
    for mode in ("vertex", "edge", "face"):
        best = optimum(graph, mode).cost
        plan = optimize(graph, mode=mode, method="cpsat", seed=seed, workers=2, time_limit=20)
        assert plan.mults == best and plan.optimal is True, mode
        check_flags(plan, best)


def test_edge_optimum_below_the_vertex_optimum_where_edges_win():
    vertex, edge, face = (optimize(FACE_BEATS_VERTEX, mode=m, method="optimal", time_limit=20)
                          for m in ("vertex", "edge", "face"))
    assert (vertex.mults, edge.mults, face.mults) == (12, 11, 11)
    assert vertex.optimal and edge.optimal and face.optimal
    for plan in (vertex, edge, face):
        check_schedule(plan.schedule, FACE_BEATS_VERTEX)


# ============================================================================ honest flags at the time limit
def test_time_limit_reports_the_gap_honestly():
    graph = generators.random_dag(4, 60, 4, seed=1)
    plan = optimize(graph, method="cpsat", time_limit=1.0, workers=2, seed=0)
    info = plan.search
    assert info.status == "feasible" and plan.optimal is None
    assert plan.lower_bound == max(info.best_bound, jacacc.structural_lower_bound(graph))
    assert info.best_bound < info.objective == plan.mults and info.gap > 0
    assert info.wall_time < 10
    check_schedule(plan.schedule, graph)


@pytest.mark.parametrize("mode", ["edge", "face"])
def test_branch_and_bound_stops_at_the_time_limit(mode):
    graph = generators.random_dag(3, 14, 3, seed=4)
    result = branch_and_bound(graph, mode, time_limit=0.5, hint_time=0)
    info = result.search
    assert info.wall_time < 5
    assert info.best_bound <= info.objective == count_ops(graph, result.order, mode).mults
    assert (result.optimal is True) == (info.status == "optimal") == (info.best_bound == info.objective)


def test_max_states_stops_with_a_valid_bound():
    graph = generators.random_dag(2, 4, 2, seed=2)
    best = optimum(graph, "edge").cost
    result = branch_and_bound(graph, "edge", time_limit=20, hint_time=0, max_states=20)
    assert result.lower_bound <= best <= result.search.objective


# ============================================================================ options, progress, errors
def test_progress_reports_best_bound_and_elapsed():
    reports = []
    graph = generators.random_dag(3, 25, 3, seed=5)
    optimize(graph, method="cpsat", time_limit=2, workers=1, seed=0, progress=reports.append)
    assert reports and all(isinstance(r, Progress) for r in reports)
    assert any(r.bound is not None for r in reports) and any(r.best is not None for r in reports)
    elapsed = [r.elapsed for r in reports]
    assert elapsed == sorted(elapsed)


@pytest.mark.parametrize(("mode", "options"), [
    ("vertex", {"time_limit": -1}), ("vertex", {"time_limit": 0}), ("vertex", {"workers": 0}),
    ("vertex", {"workers": 1.5}), ("vertex", {"hint_time": -1}), ("edge", {"time_limit": -3}),
    ("face", {"workers": 0}), ("edge", {"max_states": 0}),
])
def test_bad_options_are_refused(mode, options):
    with pytest.raises(OrderError):
        optimize(FACE_BEATS_VERTEX, mode=mode, method="cpsat", **options)


def test_methods_are_registered_as_exact_in_every_mode():
    for mode in ("vertex", "edge", "face"):
        assert {"cpsat", "optimal"} <= set(jacacc.methods(mode, exact=True))


def test_vertex_order_as_edge_steps_costs_the_same():
    graph = generators.random_dag(3, 12, 3, seed=8)
    order = list(reversed(graph.intermediates))
    steps = edge_steps_from_vertex_order(graph, order)
    assert count_ops(graph, steps, "edge").mults == count_ops(graph, order, "vertex").mults


def test_model_size_grows_with_comparable_pairs():
    small = vertex_model(generators.chain(5))
    large = vertex_model(generators.chain(10))
    assert len(small.Proto().variables) < len(large.Proto().variables)


# ============================================================================ the benchmark script
def load_benchmark():
    spec = importlib.util.spec_from_file_location("search_benchmark", ROOT / "experiments" / "search_benchmark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.scripts  # runs the benchmark script end to end: `make test-extra`
def test_search_benchmark_runs_at_a_tiny_size(tmp_path):
    bench = load_benchmark()
    assert bench.main(["--sizes", "4", "6", "--time-limit", "2", "--zoo", "BlackScholes", "--search-workers", "1",
                       "--out", str(tmp_path), "--figures", str(tmp_path)]) == 0
    record = read_record(tmp_path / "search_benchmark.json")
    rows = record["results"]["rows"]
    assert {r["mode"] for r in rows} == {"vertex", "edge", "face"}
    for r in rows:
        assert r["lower_bound"] <= r["mults"] <= r["heuristic_mults"]
        if r["optimal"]:
            assert r["lower_bound"] == r["mults"] and r["seconds"] <= 2 + 1
    assert set(record["results"]["largest_proven"]) == {"vertex", "edge", "face"}
    assert (tmp_path / "search_benchmark.png").read_bytes()[:8] == PNG_MAGIC
