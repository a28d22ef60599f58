"""The exhaustive (exact) order methods against independent brute force, and paper 003's face claim.

Each mode's optimum is checked against a search that shares nothing with
:mod:`jacacc.orders.exhaustive` but the elimination engines: every
permutation (vertex), a plain depth-first search over all step sequences on
deep copies (edge, face).  Between modes: every vertex elimination is an edge
elimination and every edge elimination a chunking of face eliminations, so
face ≤ edge ≤ vertex.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import pathlib
import time

import pytest
from dags import random_lcgs
from hypothesis import HealthCheck, given, settings

import jacacc
import jacacc.orders.exhaustive as exhaustive
from jacacc import CompGraph, OrderError, optimize
from jacacc.eliminate import EdgeStep, EliminationGraph, FaceStep
from jacacc.eliminate.face import FaceGraph
from jacacc.orders.exhaustive import copy_face_graph, face_state, face_state_key, optimum
from jacacc.problems import generators
from jacacc.verify import check_schedule

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "paper_reproductions" / "003_face_beats_vertex.py"
PROPERTY = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.filter_too_much])
TINY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.filter_too_much])


def tiny_graphs(max_edges: int = 7):
    """Graphs small enough for a plain DFS over every edge or face sequence."""
    return random_lcgs(max_inputs=2, max_intermediates=3, max_outputs=2).filter(lambda g: g.n_edges <= max_edges)


# ----------------------------------------------------------------------------- independent brute force
def brute_vertex(graph: CompGraph) -> int:
    return min(optimize(graph, method=list(p)).mults for p in itertools.permutations(graph.intermediates))


def brute_edge(graph: CompGraph) -> int:
    """Cheapest edge elimination: DFS over every valid step sequence (deep copies, no memo)."""
    best = [None]

    def dfs(state: EliminationGraph, cost: int) -> None:
        if best[0] is not None and cost >= best[0]:
            return  # costs only grow; this prefix is already no better
        if state.done:
            best[0] = cost
            return
        for step in list(state.edge_steps()):
            nxt = copy.deepcopy(state)
            price = nxt.step_cost(step)
            nxt.apply(step)
            dfs(nxt, cost + price)

    dfs(EliminationGraph(graph), 0)
    return best[0]


def brute_face(graph: CompGraph) -> int:
    """Fewest face eliminations: DFS over every face sequence (deep copies, no memo)."""
    best = [None]

    def dfs(state: FaceGraph, depth: int) -> None:
        if best[0] is not None and depth >= best[0]:
            return
        if state.done:
            best[0] = depth
            return
        for step in list(state.intermediate_faces()):
            nxt = copy.deepcopy(state)
            nxt.eliminate(*step)
            dfs(nxt, depth + 1)

    dfs(FaceGraph(graph), 0)
    return best[0]


# ----------------------------------------------------------------------------- vertex mode
@PROPERTY
@given(graph=random_lcgs(max_intermediates=5))
def test_vertex_optimum_is_the_best_permutation(graph):
    plan = optimize(graph, mode="vertex", method="exhaustive")
    assert plan.mults == brute_vertex(graph)
    assert plan.optimal is True and plan.lower_bound == plan.mults
    assert sorted(map(str, plan.order)) == sorted(map(str, graph.intermediates))


# ----------------------------------------------------------------------------- edge mode
@TINY
@given(graph=tiny_graphs())
def test_edge_optimum_is_the_best_step_sequence(graph):
    plan = optimize(graph, mode="edge", method="exhaustive")
    assert plan.mults == brute_edge(graph)
    assert plan.optimal is True and plan.lower_bound == plan.mults
    assert all(isinstance(s, EdgeStep) for s in plan.order)


@PROPERTY
@given(graph=random_lcgs(max_inputs=3, max_intermediates=5, max_outputs=3).filter(lambda g: g.n_edges <= 14))
def test_edge_optimum_never_exceeds_the_vertex_optimum(graph):
    edge = optimize(graph, mode="edge", method="exhaustive")
    assert edge.mults <= optimum(graph, "vertex").cost
    check_schedule(edge.schedule, graph)
    assert optimize(graph, mode="edge", method=list(edge.order)).mults == edge.mults


# ----------------------------------------------------------------------------- face mode
@TINY
@given(graph=tiny_graphs(max_edges=6))
def test_face_optimum_is_the_shortest_face_sequence(graph):
    assert optimum(graph, "face").cost == brute_face(graph)


@pytest.mark.exhaustive  # make test: the face optimum on tiny graphs (test_face_optimum_is_the_shortest_face_sequence)
@PROPERTY
@given(graph=random_lcgs(max_inputs=3, max_intermediates=4, max_outputs=3).filter(lambda g: g.n_edges <= 12))
def test_face_optimum_replays_and_is_bounded_by_edge_and_vertex(graph):
    plan = optimize(graph, mode="face", method="exhaustive")
    assert plan.optimal is True and plan.lower_bound == plan.mults == len(plan.order)
    assert plan.mults <= optimum(graph, "edge").cost <= optimum(graph, "vertex").cost
    again = optimize(graph, mode="face", method=list(plan.order))
    assert again.mults == plan.mults
    assert [str(op) for op in again.schedule.ops] == [str(op) for op in plan.schedule.ops]
    check_schedule(again.schedule, graph)
    assert all(isinstance(f, FaceStep) for f in plan.order)


@PROPERTY
@given(graph=random_lcgs(max_intermediates=4))
def test_copied_face_graph_evolves_like_the_original(graph):
    original = FaceGraph(graph)
    steps = list(original.intermediate_faces())[:3]
    clone = copy_face_graph(original)
    for step in steps:  # the same faces on both: same vertices, faces, fill-in ids
        if original.check_face(step) is None:
            original.eliminate(*step)
            clone.eliminate(*step)
    assert clone.preds == original.preds and clone.succs == original.succs
    assert list(clone.intermediate_faces()) == list(original.intermediate_faces())
    assert clone.fill_ins == original.fill_ins


def test_face_keys_ignore_fill_in_numbering():
    # two independent faces in either order: one state, with its fill-ins numbered differently
    g = CompGraph.from_edges(["x0", "x1"], ["y"], [("x0", "v", 2.0), ("x1", "v", 3.0), ("v", "y", 5.0)])
    f0, f1 = ("x0", "v", "y"), ("x1", "v", "y")
    one, other = face_state(g, [f0, f1]), face_state(g, [f1, f0])
    assert set(one[0].succs) != set(other[0].succs)  # different FillIn ids ...
    assert face_state_key(*one) == face_state_key(*other)  # ... one key
    assert face_state_key(*face_state(g, [f0])) != face_state_key(*face_state(g, [f1]))
    with pytest.raises(OrderError, match="step #1"):
        face_state(g, [f0, f0])


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(graph=random_lcgs(max_inputs=2, max_intermediates=4, max_outputs=2).filter(lambda g: g.n_edges <= 10))
def test_edge_and_face_optima_against_brute_force_on_larger_graphs(graph):
    assert optimum(graph, "edge").cost == brute_edge(graph)
    assert optimum(graph, "face").cost == brute_face(graph)


# ----------------------------------------------------------------------------- the A* bounds
def uninformed(graph: CompGraph, mode: str, monkeypatch) -> int:
    """The optimum found with the A* heuristic at zero and no cap: plain Dijkstra / BFS."""
    with monkeypatch.context() as patch:
        patch.setattr(exhaustive, "_cover_bound", lambda sequences, cache: 0)
        patch.setattr(exhaustive, "_upper_bound", lambda graph, mode: 10**9)
        patch.setattr(exhaustive.EdgeSpace, "bound", lambda self, edges, cache: 0)
        return optimum(graph, mode).cost


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(graph=random_lcgs(max_inputs=3, max_intermediates=4, max_outputs=3).filter(lambda g: g.n_edges <= 8))
def test_bounds_and_caps_never_cut_off_the_optimum(graph):
    monkeypatch = pytest.MonkeyPatch()
    for mode in ("edge", "face"):
        assert optimum(graph, mode).cost == uninformed(graph, mode, monkeypatch)


def test_the_bound_is_below_the_optimum_and_tight_on_a_biclique():
    g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1", "y2"], [
        ("x0", "v"), ("x1", "v"), ("v", "y0"), ("v", "y1"), ("v", "y2")])
    assert exhaustive.face_lower_bound(FaceGraph(g), {}) == optimum(g, "face").cost == 6
    found = face_state(g, [("x0", "v", "y0")])
    assert exhaustive.face_lower_bound(found[0], {}) == 5


# ----------------------------------------------------------------------------- all modes
@pytest.mark.parametrize("mode", ["vertex", "edge", "face"])
def test_plan_reports_proven_optimality(mode):
    g = CompGraph.from_edges(["x0", "x1"], ["y0", "y1"], [
        ("x0", "a", 2.0), ("x1", "a", 3.0), ("a", "b", 5.0), ("a", "y1", 1.5), ("b", "y0", 7.0), ("b", "y1", 11.0)])
    plan = optimize(g, mode=mode, method="exhaustive")
    assert plan.optimal is True and plan.lower_bound == plan.mults
    assert "exhaustive" in jacacc.methods(mode)
    check_schedule(plan.schedule, g)


@pytest.mark.parametrize("mode", ["vertex", "edge", "face"])
def test_a_graph_without_intermediates_costs_nothing(mode):
    g = CompGraph.from_edges(["x"], ["y"], [("x", "y", 2.0)])
    plan = optimize(g, mode=mode, method="exhaustive")
    assert (plan.mults, plan.order, plan.optimal) == (0, (), True)


def test_vertex_limit_is_refused_by_name():
    g = generators.chain(18)  # 17 intermediates
    with pytest.raises(OrderError, match=r"max_intermediates=16"):
        optimize(g, method="exhaustive")
    assert optimize(generators.chain(5), method="exhaustive", max_intermediates=5).mults == 4


@pytest.mark.parametrize("mode", ["edge", "face"])
def test_state_limit_is_refused_by_name(mode):
    g = generators.layered([2, 2, 2, 2], seed=0)
    with pytest.raises(OrderError, match=r"max_states=50\b"):
        optimize(g, mode=mode, method="exhaustive", max_states=50)


def test_unknown_mode_is_refused():
    with pytest.raises(OrderError, match="vertex, edge and face"):
        optimum(generators.chain(2), "diagonal")


# ----------------------------------------------------------------------------- paper 003 §1
def test_paper_reproduction_face_beats_vertex():
    spec = importlib.util.spec_from_file_location("face_beats_vertex", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    start = time.perf_counter()
    assert module.main() == 0
    assert time.perf_counter() - start < 15
