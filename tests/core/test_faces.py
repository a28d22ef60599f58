"""Face elimination on the dual c-graph: Naumann's rules, replays of vertex and edge orders, methods."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from dags import random_lcgs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jacacc
from jacacc import CompGraph, OrderError, optimize
from jacacc.eliminate import FaceStep, FillIn, count_ops, eliminate_faces
from jacacc.linegraph import Terminal, line_graph
from jacacc.orders.faces import faces_from_edge_order, faces_from_vertex_order
from jacacc.schedule import Add
from jacacc.verify import bauer_jacobian, check_schedule

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FACE_METHODS = jacacc.methods("face", exact=False)


# ----------------------------------------------------------------------------- the dual c-graph
@settings(max_examples=40, deadline=None)
@given(graph=random_lcgs())
def test_line_graph_is_the_extended_line_graph_with_partials(graph):
    dual = line_graph(graph)
    plain = nx.line_graph(nx.DiGraph(graph.digraph.edges))
    edge_vertices = [v for v, k in dual.nodes(data="kind") if k == "edge"]
    assert set(edge_vertices) == set(graph.edges)
    assert {(a, b) for a, b in dual.edges if not isinstance(a, Terminal) and not isinstance(b, Terminal)} == set(
        plain.edges
    )
    for u, v in graph.edges:
        assert dual.nodes[(u, v)]["partial"] == graph.partial(u, v)
    for x in graph.inputs:
        assert set(dual.successors(Terminal("source", x))) == {e for e in graph.edges if e[0] == x}
    for y in graph.outputs:
        assert set(dual.predecessors(Terminal("sink", y))) == {e for e in graph.edges if e[1] == y}
    for _, _, data in dual.edges(data=True):
        assert data["intermediate"] == (data["via"] in graph.intermediates)


# ----------------------------------------------------------------------------- Naumann's rule, by hand
def test_fill_in_on_a_chain():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "b", 3.0), ("b", "y", 5.0)])
    s = eliminate_faces(g, [("a", "b", "y"), (("x", "a"), FillIn("a", "y", 0))])
    assert (s.mults, s.adds, s.fill_ins) == (2, 0, 2)
    assert s.evaluate(g.partial_array()).item() == 30.0


def test_absorption_into_an_existing_vertex():
    # x→v→y and the direct x→y: the face x→v→y has the same P and S as the vertex x→y
    g = CompGraph.from_edges(["x"], ["y"], [("x", "v", 2.0), ("v", "y", 3.0), ("x", "y", 7.0)])
    s = eliminate_faces(g, [("x", "v", "y")])
    assert (s.mults, s.adds, s.fill_ins) == (1, 1, 0)
    assert s.evaluate(g.partial_array()).item() == 13.0


def test_a_face_elimination_can_leave_the_line_graph_shape():
    # one face of the biclique at v only: x1→v→y becomes a fill-in while x0→v→y stays
    g = CompGraph.from_edges(["x0", "x1"], ["y"], [("x0", "v", 2.0), ("x1", "v", 3.0), ("v", "y", 5.0)])
    s = eliminate_faces(g, [("x1", "v", "y"), ("x0", "v", "y")])
    assert s.mults == 2 and s.evaluate(g.partial_array()).tolist() == [[10.0, 15.0]]


def test_merge_of_twins_is_an_addition():
    # after x0→v1 is combined with both v1→y1 pieces, the fill-in v1→y1#1 (from v1→v2→y1) has
    # the same neighbours as the original v1→y1: they merge, s(v1→y1) += s(#1), no multiplication
    edges = [("x0", "v1", 2.0), ("x1", "v1", 3.0), ("v1", "v2", 5.0), ("v2", "y1", 7.0), ("v1", "y1", 11.0)]
    g = CompGraph.from_edges(["x0", "x1"], ["y1"], edges)
    seq = [("x0", "v1", "y1"), ("v1", "v2", "y1"), (("x0", "v1"), FillIn("v1", "y1", 1)), ("x1", "v1", "y1")]
    s = eliminate_faces(g, seq)
    merges = [op for op in s.ops if isinstance(op, Add)]
    assert len(merges) == 1 and s.mults == 4
    assert s.adds == 1 + sum(op.accumulate for op in s.ops if not isinstance(op, Add)) and s.adds == 2
    np.testing.assert_allclose(s.evaluate(g.partial_array()), bauer_jacobian(g))


@pytest.mark.parametrize(
    ("seq", "message"),
    [
        ([("x", "a", "y")], r"is not in the dual graph"),
        ([("x", "b", "y")], r"is not in the dual graph"),
        ([(("a", "b"), Terminal("sink", "y"))], r"not in the dual graph|no face"),
        ([("a", "b", "y")], r"intermediate faces left"),
        ([("a", "b")], r"a face is"),
        ([("x", "a", "b"), ("x", "a", "b")], r"step #1"),
    ],
)
def test_invalid_face_sequences_are_refused(seq, message):
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "b", 3.0), ("b", "y", 5.0)])
    with pytest.raises(OrderError, match=message):
        optimize(g, mode="face", method=seq)


# ----------------------------------------------------------------------------- replays
@PROPERTY
@given(graph=random_lcgs(max_intermediates=7), data=st.data())
def test_any_vertex_order_replayed_as_faces_costs_the_same(graph, data):
    order = data.draw(st.permutations(list(graph.intermediates)))
    vertex = optimize(graph, mode="vertex", method=order)
    faces = optimize(graph, mode="face", method=order)
    assert faces.order == tuple(faces_from_vertex_order(graph, order))
    assert (faces.mults, faces.adds) == (vertex.mults, vertex.adds)
    np.testing.assert_allclose(faces.jacobian(), vertex.jacobian(), rtol=1e-12, atol=1e-12)
    check_schedule(faces.schedule, graph)


@PROPERTY
@given(graph=random_lcgs(max_intermediates=7), seed=st.integers(0, 10**6))
def test_any_edge_sequence_replayed_as_faces_costs_the_same(graph, seed):
    edge = optimize(graph, mode="edge", method="random", seed=seed)
    faces = optimize(graph, mode="face", method=list(edge.order))
    assert (faces.mults, faces.adds) == (edge.mults, edge.adds)
    np.testing.assert_allclose(faces.jacobian(), edge.jacobian(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method", FACE_METHODS)
@PROPERTY
@given(graph=random_lcgs(), seed=st.integers(0, 10**6))
def test_every_face_method_reproduces_the_reference(method, graph, seed):
    plan = optimize(graph, mode="face", method=method, seed=seed)
    check_schedule(plan.schedule, graph, rtol=1e-10)
    assert plan.mults == len(plan.order) == sum(not isinstance(op, Add) for op in plan.schedule.ops)
    counted = count_ops(graph, plan.order, "face")
    assert (counted.mults, counted.adds, counted.fill_ins) == (plan.mults, plan.adds, plan.schedule.fill_ins)
    assert plan.lower_bound <= plan.mults
    assert all(isinstance(f, FaceStep) and len(f.path) == 3 for f in plan.order)


@settings(max_examples=30, deadline=None)
@given(graph=random_lcgs(), seed=st.integers(0, 10**6))
def test_a_plans_face_order_replays_to_the_same_schedule(graph, seed):
    plan = optimize(graph, mode="face", method="random", seed=seed)
    again = optimize(graph, mode="face", method=list(plan.order))
    assert [str(op) for op in again.schedule.ops] == [str(op) for op in plan.schedule.ops]


def test_edge_sequences_replay_through_the_function_too():
    g = CompGraph.from_edges(["x"], ["y", "z"], [("x", "v", 2.0), ("v", "y", 3.0), ("v", "z", 5.0)])
    faces = faces_from_edge_order(g, [(("x", "v"), "front")])
    assert [f.path for f in faces] == [("x", "v", "y"), ("x", "v", "z")]
    with pytest.raises(OrderError, match="not in the graph"):
        faces_from_edge_order(g, [(("x", "y"), "front")])


def test_face_mode_is_listed_with_its_methods():
    assert "face" in jacacc.modes()
    assert {"forward", "reverse", "greedy", "random", "vertex_markowitz", "edge_markowitz"} <= set(
        jacacc.methods("face")
    )
