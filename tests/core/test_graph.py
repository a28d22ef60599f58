"""Tests of jacacc.graph (schema, validation, IO, reference Jacobian) and jacacc.verify."""

from __future__ import annotations

import json
import re
import warnings

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jacacc.api import optimize
from jacacc.errors import GraphError, JacaccError
from jacacc.graph import CompGraph, PrunedVerticesWarning, as_graph, reference_jacobian
from jacacc.schedule import Schedule
from jacacc.verify import bauer_jacobian, central_differences, check_schedule, count_paths

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ============================================================================ strategies
@st.composite
def dag_specs(draw, max_inputs: int = 4, max_intermediates: int = 8, max_outputs: int = 4):
    """A random DAG as ``(inputs, outputs, edges, nodes)`` for :meth:`CompGraph.from_edges`.

    Every intermediate gets a predecessor among earlier non-output vertices and
    a successor among later non-input vertices, so nothing is pruned; extra
    random edges (direct input→output edges among them) are added on top.
    Inputs that feed nothing and outputs fed by nothing occur, declared through
    ``nodes``.  Node ids are all strings or all ints; the edge list and the
    node declaration order are shuffled so insertion order is not topological.
    """
    n_in = draw(st.integers(1, max_inputs))
    n_mid = draw(st.integers(0, max_intermediates))
    n_out = draw(st.integers(1, max_outputs))
    if draw(st.booleans()):
        ids: list = draw(st.permutations(range(n_in + n_mid + n_out)))
    else:
        ids = [f"x{i}" for i in range(n_in)] + [f"v{i}" for i in range(n_mid)] + [f"y{i}" for i in range(n_out)]
    inputs, mids, outputs = ids[:n_in], ids[n_in : n_in + n_mid], ids[n_in + n_mid :]
    order = inputs + mids + outputs  # a topological order of the vertices
    edges: dict = {}
    for k, v in enumerate(mids):
        edges[(draw(st.sampled_from(inputs + mids[:k])), v)] = None
    for k, v in enumerate(mids):
        edges[(v, draw(st.sampled_from(mids[k + 1 :] + outputs)))] = None
    candidates = [
        (u, v)
        for i, u in enumerate(order)
        for v in order[i + 1 :]
        if u not in outputs and v not in inputs
    ]
    picks = draw(st.lists(st.integers(0, len(candidates) - 1), max_size=2 * len(order)))
    for p in picks:
        edges[candidates[p]] = None
    edge_list = draw(st.permutations(list(edges)))
    values = draw(
        st.lists(
            st.floats(-3, 3, allow_nan=False, allow_infinity=False),
            min_size=len(edge_list),
            max_size=len(edge_list),
        )
    )
    triples = [(u, v, p) for (u, v), p in zip(edge_list, values, strict=True)]
    nodes = draw(st.permutations(inputs + outputs))
    return inputs, outputs, triples, nodes


def build(spec) -> CompGraph:
    inputs, outputs, triples, nodes = spec
    # prune=False: the strategy never produces a vertex off every input→output path
    return CompGraph.from_edges(inputs, outputs, triples, nodes=nodes, prune=False)


def assert_close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


# ============================================================================ bad input
def _nx(edges, kinds=None, **graph_attrs) -> nx.DiGraph:
    g = nx.DiGraph(**graph_attrs)
    g.add_edges_from(edges)
    for node, kind in (kinds or {}).items():
        g.nodes[node]["kind"] = kind
    return g


def test_cycle_names_its_vertices():
    edges = [("x", "a", 1), ("a", "b", 1), ("b", "c", 1), ("c", "a", 1), ("c", "y", 1)]
    with pytest.raises(GraphError, match="cycle") as info:
        CompGraph.from_edges(["x"], ["y"], edges)
    message = str(info.value)
    for node in ("'a'", "'b'", "'c'"):
        assert node in message
    assert "'x'" not in message and "'y'" not in message


def test_cycle_in_a_networkx_graph():
    g = _nx([("x", "a"), ("a", "b"), ("b", "a"), ("b", "y")],
            {"x": "input", "a": "intermediate", "b": "intermediate", "y": "output"})
    with pytest.raises(GraphError, match=r"cycle: '(a' → 'b' → 'a|b' → 'a' → 'b)'"):
        CompGraph.from_networkx(g)
    with pytest.raises(GraphError, match="cycle"):
        CompGraph(g, ["x"], ["y"])


def test_self_loop():
    with pytest.raises(GraphError, match=r"self-loop on 'a'"):
        CompGraph.from_edges(["x"], ["y"], [("x", "a", 1), ("a", "a", 2), ("a", "y", 1)])
    g = _nx([("x", "a"), ("a", "a"), ("a", "y")])
    with pytest.raises(GraphError, match=r"cycle: 'a' → 'a'"):
        CompGraph(g, ["x"], ["y"])


@pytest.mark.parametrize(
    "inputs, outputs, edges, pattern",
    [
        pytest.param(["x"], ["y"], [("x", "y", 1), ("a", "x", 1)],
                     r"edge\(s\) into an input: \('a' → 'x'\)", id="edge-into-input"),
        pytest.param(["x"], ["y"], [("x", "y", 1), ("y", "z", 1)],
                     r"edge\(s\) out of an output: \('y' → 'z'\)", id="edge-out-of-output"),
        pytest.param(["x"], ["y"], [("x", "y", [1.0])],
                     r"edge \('x' → 'y'\) has a non-numeric partial \[1\.0\] \(type list\)", id="partial-list"),
        pytest.param(["x"], ["y"], [("x", "y", {"v": 1})],
                     r"edge \('x' → 'y'\) has a non-numeric partial \{'v': 1\} \(type dict\)", id="partial-dict"),
        pytest.param(["x"], ["y"], [("x", "y", True)],
                     r"edge \('x' → 'y'\) has a non-numeric partial True \(a boolean\)", id="partial-bool"),
        pytest.param(["x"], ["y"], [("x", "y", 1 + 2j)],
                     r"edge \('x' → 'y'\) has a non-numeric partial", id="partial-complex"),
        pytest.param(["x"], ["y"], [("x", "y", "  ")],
                     r"edge \('x' → 'y'\) has an empty partial string", id="partial-blank"),
        pytest.param(["x"], ["y"], [("x", "y", 1), ("x", "y", 2)],
                     r"duplicate edge \('x' → 'y'\) at edge #0 and #1", id="duplicate-edge"),
        pytest.param(["x"], ["x"], [("x", "y", 1)],
                     r"node\(s\) 'x' listed both as input and output", id="input-and-output"),
        pytest.param(["x", "x"], ["y"], [("x", "y", 1)],
                     r"inputs lists a node more than once: 'x'", id="input-twice"),
        pytest.param(["x"], ["y", "y"], [("x", "y", 1)],
                     r"outputs lists a node more than once: 'y'", id="output-twice"),
        pytest.param(["x"], ["y"], [(1.5, "y", 1)],
                     r"node id 1\.5 in edge #0 is a float", id="node-float"),
        pytest.param(["x"], ["y"], [("x", "y", 1), (["x"], "y", 1)],
                     r"node id \['x'\] in edge #1 is a list", id="node-list"),
        pytest.param(["x"], ["y"], [("x", True, 1)],
                     r"node id True in edge #0 is a bool", id="node-bool"),
        pytest.param(["x"], ["y"], [("x", None, 1)],
                     r"node id None in edge #0 is a NoneType", id="node-none"),
        pytest.param([2.0], ["y"], [("x", "y", 1)],
                     r"node id 2\.0 in inputs is a float", id="input-float"),
        pytest.param(["x"], [False], [("x", "y", 1)],
                     r"node id False in outputs is a bool", id="output-bool"),
        pytest.param(["x"], ["y"], [("x", "y", 1), ("x",)],
                     r"edge #1 is \('x',\); an edge is \[src, dst\]", id="short-edge"),
        pytest.param(["x"], ["y"], ["xy"],
                     r"edge #0 is 'xy'", id="string-edge"),
    ],
)
def test_bad_graphs_from_edges(inputs, outputs, edges, pattern):
    with pytest.raises(GraphError, match=pattern):
        CompGraph.from_edges(inputs, outputs, edges)


def test_inputs_and_outputs_in_no_edge_are_nodes():
    # a node named in inputs / outputs is a node: a zero column / row (tests/core/test_isolated_nodes.py)
    g = CompGraph.from_edges(["x", "q"], ["y"], [("x", "y", 1)])
    assert g.kind("q") == "input" and g.digraph.degree("q") == 0
    assert_close(reference_jacobian(g), [[1.0, 0.0]])
    g = CompGraph.from_edges(["x"], ["y", "q"], [("x", "y", 1)])
    assert g.kind("q") == "output" and g.digraph.degree("q") == 0
    assert_close(reference_jacobian(g), [[1.0], [0.0]])


def test_graph_error_is_a_value_error():
    with pytest.raises(ValueError):
        CompGraph.from_edges(["x"], ["y"], [("x", "y", [1])])
    assert issubclass(GraphError, JacaccError)


def test_bad_node_id_in_nodes_and_in_a_networkx_graph():
    with pytest.raises(GraphError, match=r"node id 0\.5 in nodes is a float"):
        CompGraph.from_edges(["x"], ["y"], [("x", "y", 1)], nodes=[0.5])
    g = _nx([("x", 2.5), (2.5, "y")])
    with pytest.raises(GraphError, match=r"node id 2\.5 in the graph is a float"):
        CompGraph(g, ["x"], ["y"])


@pytest.mark.parametrize(
    "edge",
    [
        pytest.param(("x", "b", "sin(x)"), id="expression"),
        pytest.param(("x", "b"), id="structural"),
    ],
)
def test_non_numeric_partials_are_refused_where_numbers_are_needed(edge):
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "y", 1.0), edge, ("b", "y", 3.0)])
    assert not g.is_numeric
    bad = re.escape("('x' → 'b')")
    with pytest.raises(GraphError, match=rf"not a linearized graph: 1 edge\(s\) have non-numeric partials, e\.g\. {bad}"):
        g.require_numeric()
    with pytest.raises(GraphError, match=rf"non-numeric partials.*{bad}"):
        reference_jacobian(g)
    with pytest.raises(GraphError, match=rf"non-numeric partials.*{bad}"):
        g.partial_array()
    # explicit partials make the graph evaluable
    values = {("x", "a"): 2.0, ("a", "y"): 1.0, ("x", "b"): 5.0, ("b", "y"): 3.0}
    assert_close(reference_jacobian(g, [values[e] for e in g.edges]), [[2.0 + 15.0]])


def test_partials_kind():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", "cos(x)"), ("a", "y", 2)])
    assert g.partials_kind == "mixed"
    assert CompGraph.from_edges(["x"], ["y"], [("x", "y", "cos(x)")]).partials_kind == "symbolic"
    assert CompGraph.from_edges(["x"], ["y"], [("x", "y")]).partials_kind == "structural"
    assert CompGraph.from_edges(["x"], ["y"], [("x", "y", 1)]).partials_kind == "numeric"


def test_reference_jacobian_checks_the_partials_shape():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "y", 1.0)])
    with pytest.raises(GraphError, match=re.escape("partials must have shape (..., 2) (one value per edge), got (3,)")):
        reference_jacobian(g, [1.0, 2.0, 3.0])
    with pytest.raises(GraphError, match=re.escape("got ()")):
        reference_jacobian(g, 1.0)


GOOD = {"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", 1.0]]}


@pytest.mark.parametrize(
    "data, pattern",
    [
        pytest.param({"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", 1], ["x", "y", 2]]},
                     r"duplicate edge \('x' → 'y'\) at edge #0 and #1", id="duplicate-edge"),
        pytest.param({"inputs": ["x"], "edges": []},
                     r"graph JSON is missing key\(s\): outputs", id="missing-outputs"),
        pytest.param({"outputs": ["y"]},
                     r"graph JSON is missing key\(s\): inputs, edges", id="missing-two"),
        pytest.param({**GOOD, "partials": [], "extra": 1},
                     r"graph JSON has unknown key\(s\): extra, partials", id="unknown-keys"),
        pytest.param({**GOOD, "inputs": "x"},
                     r"graph JSON key 'inputs' must be a list, got str", id="inputs-str"),
        pytest.param({**GOOD, "edges": {"x": "y"}},
                     r"graph JSON key 'edges' must be a list, got dict", id="edges-dict"),
        pytest.param({**GOOD, "nodes": 3},
                     r"graph JSON key 'nodes' must be a list, got int", id="nodes-int"),
        pytest.param({**GOOD, "inputs": [["x"]]},
                     r"node id \['x'\] in inputs is a list", id="input-list"),
        pytest.param({**GOOD, "edges": [["x", "y", [1, 2]]]},
                     r"edge \('x' → 'y'\) has a non-numeric partial \[1, 2\]", id="partial-list"),
        pytest.param({**GOOD, "edges": [["x", "y", 1, 2]]},
                     r"edge #0 is \['x', 'y', 1, 2\]", id="long-edge"),
        pytest.param({**GOOD, "edges": [["x", 1.5, 1]]},
                     r"node id 1\.5 in edge #0 is a float", id="node-float"),
    ],
)
def test_bad_json(data, pattern):
    with pytest.raises(GraphError, match=pattern):
        CompGraph.from_json(data)


def test_json_that_is_not_an_object(tmp_path):
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(GraphError, match="graph JSON must be an object, got list"):
        CompGraph.from_json(path)
    with pytest.raises(GraphError, match="cannot read a graph from a list"):
        CompGraph.from_json([1, 2])


def test_malformed_json_file_names_the_path(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", 1],\n')
    with pytest.raises(GraphError, match="malformed JSON") as info:
        CompGraph.from_json(path)
    assert str(path) in str(info.value)
    assert "line 2" in str(info.value)


def test_binary_file_is_malformed_json(tmp_path):
    path = tmp_path / "binary.json"
    path.write_bytes(b"\xff\xfe\x00{}")
    with pytest.raises(GraphError, match="malformed JSON") as info:
        CompGraph.from_json(str(path))
    assert str(path) in str(info.value)


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.json"
    with pytest.raises(GraphError, match=re.escape(f"no such graph file: {path}")):
        CompGraph.from_json(path)
    with pytest.raises(GraphError, match="no such graph file"):
        as_graph(str(path))


def test_networkx_nodes_without_kind():
    g = _nx([("x", "a"), ("a", "b"), ("b", "y")], {"x": "input", "y": "output"})
    with pytest.raises(GraphError, match=r"node\(s\) without a 'kind' attribute: 'a', 'b'"):
        CompGraph.from_networkx(g)


def test_networkx_unknown_kind():
    g = _nx([("x", "a"), ("a", "y")], {"x": "input", "a": "hidden", "y": "output"})
    with pytest.raises(GraphError, match=r"node\(s\) with an unknown kind: 'a'; kind is one of input, intermediate"):
        CompGraph.from_networkx(g)


def test_networkx_declared_order_disagrees_with_kinds():
    g = _nx([("x", "y"), ("z", "y")], {"x": "input", "z": "input", "y": "output"}, inputs=["x"])
    with pytest.raises(GraphError, match=r"graph attribute 'inputs' = \['x'\] disagrees"):
        CompGraph.from_networkx(g)


def test_multidigraph_is_refused():
    g = nx.MultiDiGraph([("x", "y"), ("x", "y")])
    with pytest.raises(GraphError, match="expected a networkx.DiGraph, got MultiDiGraph"):
        CompGraph.from_networkx(g)
    with pytest.raises(GraphError, match="got MultiDiGraph; duplicate"):
        CompGraph(g, ["x"], ["y"])
    with pytest.raises(GraphError, match="got MultiDiGraph"):
        as_graph(g)


@pytest.mark.parametrize("obj, name", [(3, "int"), (nx.Graph([("x", "y")]), "Graph"), (None, "NoneType")])
def test_as_graph_refuses_other_objects(obj, name):
    with pytest.raises(GraphError, match=rf"cannot use a {name} as a graph; pass a CompGraph"):
        as_graph(obj)


def test_as_graph_accepts_every_documented_form(tmp_path):
    g = CompGraph.from_edges(["x"], ["y"], [("x", "v", 2.0), ("v", "y", 3.0)])
    path = tmp_path / "g.json"
    g.to_json(path)

    class Traced:
        graph = g

    assert as_graph(g) is g
    assert as_graph(Traced()) is g
    for form in (g.to_networkx(), g.to_json(), path, str(path)):
        assert as_graph(form) == g


# ============================================================================ pruning
def test_pruning_warns_names_and_keeps_the_jacobian():
    live = [("x", "a", 2.0), ("a", "y", 3.0), ("x", "z", 5.0), ("a", "z", -1.0)]
    dead = [
        ("x", "dead_end", 4.0),  # reached from an input, reaches no output
        ("a", "dead_end", 1.0),
        ("orphan", "y", 7.0),  # reaches an output, reached from no input
        ("s", "t", 1.0),  # a dead chain into an output
        ("t", "z", 1.0),
        ("p", "q", 1.0),  # a component on its own
    ]
    with pytest.warns(PrunedVerticesWarning, match=r"pruned 6 intermediate\(s\) on no input→output path") as rec:
        g = CompGraph.from_edges(["x"], ["y", "z"], live + dead)
    message = str(rec[0].message)
    for node in ("dead_end", "orphan", "s", "t", "p", "q"):
        assert repr(node) in message
    assert g.intermediates == ("a",)
    assert set(g.digraph.nodes) == {"x", "a", "y", "z"}
    assert set(g.edges) == {(u, v) for u, v, _ in live}
    clean = CompGraph.from_edges(["x"], ["y", "z"], live)
    assert g == clean
    assert_close(reference_jacobian(g), reference_jacobian(clean))
    assert_close(reference_jacobian(g), [[6.0], [5.0 - 2.0]])


def test_prune_false_raises_instead():
    edges = [("x", "y", 1.0), ("x", "d", 1.0), ("e", "y", 1.0)]
    with pytest.raises(GraphError, match=r"intermediate\(s\) on no input→output path: 'd', 'e'"):
        CompGraph.from_edges(["x"], ["y"], edges, prune=False)
    with pytest.raises(GraphError, match="'d', 'e'"):
        CompGraph.from_json({"inputs": ["x"], "outputs": ["y"], "edges": [list(e) for e in edges]}, prune=False)


def test_nothing_to_prune_gives_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CompGraph.from_edges(["x", "w"], ["y", "z"], [("x", "a", 1.0), ("a", "y", 1.0)], nodes=["w", "z"])


def test_many_pruned_vertices_are_abbreviated():
    edges = [("x", "y", 1.0)] + [("x", f"d{i}", 1.0) for i in range(20)]
    with pytest.warns(PrunedVerticesWarning, match=r"pruned 20 .*'d0', .*\(20 in all\)"):
        CompGraph.from_edges(["x"], ["y"], edges)


@SETTINGS
@given(spec=dag_specs(), data=st.data())
def test_pruning_random_dead_vertices_keeps_the_jacobian(spec, data):
    inputs, outputs, triples, nodes = spec
    clean = build(spec)
    sources = [n for n in clean.digraph.nodes if n not in outputs]
    targets = [n for n in clean.digraph.nodes if n not in inputs]
    n_dead = data.draw(st.integers(1, 4))
    dead = [f"dead{i}" for i in range(n_dead)]
    extra = []
    last = {True: None, False: None}
    for d in dead:
        dead_end = data.draw(st.booleans())
        if dead_end:  # reached from a live vertex, leads nowhere live
            extra.append((data.draw(st.sampled_from(sources)), d, 1.5))
        else:  # fed by nothing live, leads into a live vertex
            extra.append((d, data.draw(st.sampled_from(targets)), -2.5))
        if last[dead_end] is not None and data.draw(st.booleans()):
            extra.append((last[dead_end], d, 0.5))  # a dead chain stays dead
        last[dead_end] = d
    with pytest.warns(PrunedVerticesWarning) as rec:
        g = CompGraph.from_edges(inputs, outputs, triples + extra, nodes=nodes)
    message = str(rec[0].message)
    for d in dead:
        assert repr(d) in message
        assert d not in g.digraph
    assert g == clean
    assert_close(reference_jacobian(g), reference_jacobian(clean))


# ============================================================================ JSON / networkx IO
def test_json_round_trip_dict_and_file(tmp_path):
    g = CompGraph.from_edges(
        ["x1", "x2"], ["y"],
        [("x1", "a", 2.0), ("x2", "a", -1.0), ("a", "y", 0.5), ("x2", "y", 3.0)],
    )
    data = g.to_json()
    assert data["inputs"] == ["x1", "x2"] and data["outputs"] == ["y"] and set(data) == {"inputs", "outputs", "edges"}
    assert sorted(data["edges"]) == [["a", "y", 0.5], ["x1", "a", 2.0], ["x2", "a", -1.0], ["x2", "y", 3.0]]
    assert [tuple(e[:2]) for e in data["edges"]] == list(g.edges)  # edges are written in slot order
    assert CompGraph.from_json(data) == g
    assert CompGraph.from_json(json.loads(json.dumps(data))) == g
    path = tmp_path / "g.json"
    assert g.to_json(path) == data
    assert json.loads(path.read_text()) == data
    for source in (path, str(path)):
        back = CompGraph.from_json(source)
        assert back == g
        assert back.edges == g.edges
        assert_close(reference_jacobian(back), reference_jacobian(g))


def test_isolated_inputs_and_outputs_round_trip_through_nodes(tmp_path):
    g = CompGraph.from_edges(["x", "unused"], ["y", "const"], [("x", "v", 2.0), ("v", "y", 3.0)],
                             nodes=["unused", "const"])
    data = g.to_json(tmp_path / "g.json")
    assert sorted(data["nodes"]) == ["const", "unused"]
    back = CompGraph.from_json(tmp_path / "g.json")
    assert back == g
    assert back.inputs == ("x", "unused") and back.outputs == ("y", "const")
    assert back.kind("unused") == "input" and back.kind("const") == "output"
    assert_close(reference_jacobian(back), [[6.0, 0.0], [0.0, 0.0]])


def test_json_without_isolated_nodes_has_no_nodes_key():
    assert "nodes" not in CompGraph.from_edges(["x"], ["y"], [("x", "y", 1)]).to_json()


def test_a_node_id_missing_from_edges_and_nodes_is_a_constant_output():
    g = CompGraph.from_json({"inputs": ["x"], "outputs": ["y", "c"], "edges": [["x", "y", 1]]})
    assert g.kind("c") == "output"
    assert_close(reference_jacobian(g), [[1.0], [0.0]])


def test_int_node_ids_round_trip(tmp_path):
    g = CompGraph.from_edges([0, 1], [3], [(0, 2, 1.5), (1, 2, 2.0), (2, 3, 4.0)])
    path = tmp_path / "ints.json"
    g.to_json(path)
    back = CompGraph.from_json(path)
    assert back == g
    assert back.inputs == (0, 1) and back.outputs == (3,) and back.intermediates == (2,)
    assert all(type(n) is int for n in back.digraph.nodes)
    # ints and their string spellings are different nodes: input "0" is unused, and
    # vertex 0 (fed by no input) is pruned with a warning that names it
    with pytest.warns(PrunedVerticesWarning, match=r"pruned 1 intermediate\(s\) on no input→output path: 0$"):
        g = CompGraph.from_json({"inputs": ["0"], "outputs": [3], "edges": [[0, 3, 1]]})
    assert g.inputs == ("0",) and 0 not in g.digraph
    assert_close(reference_jacobian(g), [[0.0]])


def test_numpy_integer_node_ids_become_plain_ints():
    g = CompGraph.from_edges([np.int64(0)], [np.int64(2)], [(np.int64(0), np.int64(1), 1.0), (np.int64(1), np.int64(2), 2.0)])
    data = g.to_json()
    json.dumps(data)  # serialisable
    assert data["inputs"] == [0] and all(type(n) is int for e in data["edges"] for n in e[:2])


def test_numeric_strings_become_floats_expressions_are_kept():
    g = CompGraph.from_json({
        "inputs": ["x"], "outputs": ["y"],
        "edges": [["x", "a", "2.5"], ["a", "b", " -1e-3 "], ["b", "y", "sin(x) * 2"], ["x", "y", 4]],
    })
    assert g.partial("x", "a") == 2.5 and isinstance(g.partial("x", "a"), float)
    assert g.partial("a", "b") == -0.001
    assert g.partial("b", "y") == "sin(x) * 2"
    assert g.partial("x", "y") == 4.0 and isinstance(g.partial("x", "y"), float)
    assert g.partials_kind == "mixed"
    assert ["b", "y", "sin(x) * 2"] in g.to_json()["edges"]
    assert CompGraph.from_json(g.to_json()) == g


def test_structural_edges_round_trip_without_partial():
    g = CompGraph.from_json({"inputs": ["x"], "outputs": ["y"], "edges": [["x", "v"], ["v", "y"]]})
    assert g.to_json()["edges"] == [["x", "v"], ["v", "y"]]
    assert g.partial("x", "v") is None
    assert CompGraph.from_json(g.to_json()) == g


def test_name_round_trips():
    data = {"name": "tiny", "inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", 1.0]]}
    assert CompGraph.from_json(data).to_json() == data


def test_networkx_round_trip_keeps_order_and_kinds():
    # declared order differs from node insertion order on purpose
    g = CompGraph.from_edges(
        ["x2", "x1"], ["y2", "y1"],
        [("x1", "a", 2.0), ("x2", "a", 3.0), ("a", "y1", 5.0), ("a", "y2", 7.0), ("x1", "y2", 1.0)],
    )
    G = g.to_networkx()
    assert isinstance(G, nx.DiGraph)
    assert G.graph["inputs"] == ["x2", "x1"] and G.graph["outputs"] == ["y2", "y1"]
    assert nx.get_node_attributes(G, "kind") == {
        "x1": "input", "x2": "input", "a": "intermediate", "y1": "output", "y2": "output"
    }
    assert G.edges["a", "y2"]["partial"] == 7.0
    back = CompGraph.from_networkx(G)
    assert back.inputs == ("x2", "x1") and back.outputs == ("y2", "y1")
    assert back == g
    assert_close(reference_jacobian(back), reference_jacobian(g))
    # the copy is independent of the graph
    G.edges["a", "y2"]["partial"] = 0.0
    assert g.partial("a", "y2") == 7.0
    # without the graph attributes the order is the node insertion order
    del G.graph["inputs"], G.graph["outputs"]
    plain = CompGraph.from_networkx(G)
    assert plain.inputs == ("x1", "x2") and plain.outputs == ("y1", "y2")


def test_networkx_kinds_are_inferred_when_no_node_has_one():
    G = nx.DiGraph()
    G.add_edge("a", "m", partial=2.0)
    G.add_edge("b", "m", partial=3.0)
    G.add_edge("m", "p", partial=5.0)
    G.add_edge("m", "q", partial=7.0)
    G.add_edge("b", "q", partial=1.0)
    g = CompGraph.from_networkx(G)
    assert g.inputs == ("a", "b") and g.outputs == ("p", "q") and g.intermediates == ("m",)
    assert [g.kind(n) for n in ("a", "m", "q")] == ["input", "intermediate", "output"]
    assert_close(reference_jacobian(g), [[10.0, 15.0], [14.0, 22.0]])
    assert as_graph(G) == g


def test_digraph_view_is_read_only_and_kinds_are_set():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "v", 2.0), ("v", "y", 3.0)])
    view = g.digraph
    assert view.nodes["v"]["kind"] == "intermediate"
    with pytest.raises(nx.NetworkXError):
        view.add_edge("x", "y")


# ============================================================================ reference Jacobian
def test_chain():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "v", 2.0), ("v", "w", -3.0), ("w", "y", 0.5)])
    assert_close(reference_jacobian(g), [[2.0 * -3.0 * 0.5]])


def test_diamond():
    # x -> a -> y and x -> b -> y: dy/dx = 2*5 + 3*7
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("x", "b", 3.0), ("a", "y", 5.0), ("b", "y", 7.0)])
    assert_close(reference_jacobian(g), [[31.0]])
    assert_close(bauer_jacobian(g), [[31.0]])
    assert count_paths(g) == 2


def test_two_by_two_by_hand():
    # v = f(x1, x2); y1 = g(v); y2 = h(v, x1)
    a, b, c, d, e = 2.0, -1.0, 3.0, 0.5, 4.0
    g = CompGraph.from_edges(
        ["x1", "x2"], ["y1", "y2"],
        [("x1", "v", a), ("x2", "v", b), ("v", "y1", c), ("v", "y2", d), ("x1", "y2", e)],
    )
    want = np.array([[a * c, b * c], [a * d + e, b * d]])
    assert_close(reference_jacobian(g), want)
    assert reference_jacobian(g).shape == (2, 2)


def test_isolated_input_and_output_give_zero_column_and_row():
    g = CompGraph.from_edges(["x", "w"], ["c", "y"], [("x", "y", 2.0)], nodes=["w", "c"])
    assert_close(reference_jacobian(g), [[0.0, 0.0], [2.0, 0.0]])


def test_no_outputs():
    g = CompGraph.from_edges(["x"], [], [], nodes=["x"])
    assert reference_jacobian(g).shape == (0, 1)
    assert reference_jacobian(g, np.zeros((3, 0))).shape == (3, 0, 1)


@SETTINGS
@given(spec=dag_specs())
def test_reference_jacobian_equals_bauer(spec):
    g = build(spec)
    J = reference_jacobian(g)
    assert J.shape == (len(g.outputs), len(g.inputs))
    assert_close(J, bauer_jacobian(g))


@SETTINGS
@given(spec=dag_specs(), data=st.data())
def test_rows_follow_outputs_and_columns_follow_inputs(spec, data):
    inputs, outputs, triples, nodes = spec
    J = reference_jacobian(build(spec))
    rows = data.draw(st.permutations(range(len(outputs))))
    cols = data.draw(st.permutations(range(len(inputs))))
    permuted = build(([inputs[c] for c in cols], [outputs[r] for r in rows], triples, nodes))
    assert_close(reference_jacobian(permuted), J[np.ix_(rows, cols)])
    assert_close(bauer_jacobian(permuted), J[np.ix_(rows, cols)])


@SETTINGS
@given(spec=dag_specs(), seed=st.integers(0, 2**32 - 1), batch=st.integers(1, 4))
def test_batched_partials(spec, seed, batch):
    g = build(spec)
    P = np.random.default_rng(seed).normal(size=(batch, g.n_edges))
    J = reference_jacobian(g, P)
    assert J.shape == (batch, len(g.outputs), len(g.inputs))
    for b in range(batch):
        assert_close(J[b], reference_jacobian(g, P[b]))
        assert_close(J[b], bauer_jacobian(g.with_partials(P[b])))


def test_batched_partials_with_two_batch_axes():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("x", "b", 3.0), ("a", "y", 5.0), ("b", "y", 7.0)])
    P = np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4)
    J = reference_jacobian(g, P)
    assert J.shape == (2, 3, 1, 1)
    edge = {e: i for i, e in enumerate(g.edges)}
    want = (P[..., edge["x", "a"]] * P[..., edge["a", "y"]] + P[..., edge["x", "b"]] * P[..., edge["b", "y"]])
    assert_close(J[..., 0, 0], want)


def test_with_partials_mapping_and_sequence():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "y", 5.0)])
    assert_close(reference_jacobian(g.with_partials({("x", "a"): 3.0, ("a", "y"): 4.0})), [[12.0]])
    assert_close(reference_jacobian(g.with_partials([1.0, -1.0])), [[-1.0]])
    with pytest.raises(GraphError, match=r"missing \('a' → 'y'\)"):
        g.with_partials({("x", "a"): 3.0})
    with pytest.raises(GraphError, match="expected 2 partials, got 3"):
        g.with_partials([1.0, 2.0, 3.0])


# ============================================================================ index domain / range
@SETTINGS
@given(spec=dag_specs())
def test_index_domain_and_range_by_brute_force(spec):
    g = build(spec)
    G = nx.DiGraph(g.digraph)
    dom, rng = g.index_domain(), g.index_range()
    assert set(dom) == set(rng) == set(G.nodes)
    for node in G.nodes:
        assert dom[node] == {x for x in g.inputs if nx.has_path(G, x, node)}
        assert rng[node] == {y for y in g.outputs if nx.has_path(G, node, y)}


def test_index_domain_and_range_by_hand():
    g = CompGraph.from_edges(
        ["x1", "x2"], ["y1", "y2"],
        [("x1", "a", 1), ("x2", "b", 1), ("a", "y1", 1), ("b", "y1", 1), ("b", "y2", 1)],
    )
    dom, rng = g.index_domain(), g.index_range()
    assert dom["a"] == {"x1"} and dom["y1"] == {"x1", "x2"} and dom["y2"] == {"x2"}
    assert rng["b"] == {"y1", "y2"} and rng["x1"] == {"y1"} and rng["y2"] == {"y2"}


# ============================================================================ jacacc.verify
def test_central_differences_on_a_known_function():
    def f(x):
        return [np.sin(x[0]) * np.cos(x[1]), x[0] ** 2 * x[1], np.exp(x[1])]

    x = np.array([0.7, -1.3])
    want = np.array([
        [np.cos(x[0]) * np.cos(x[1]), -np.sin(x[0]) * np.sin(x[1])],
        [2 * x[0] * x[1], x[0] ** 2],
        [0.0, np.exp(x[1])],
    ])
    got = central_differences(f, x)
    assert got.shape == (3, 2)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-8)


def test_central_differences_scales_the_step():
    # h = 1e-6 * |x| = 1e-2: truncation error about h**2 / 6 relative, no cancellation blow-up
    got = central_differences(lambda x: np.sin(x), [1e4])
    np.testing.assert_allclose(got, [[np.cos(1e4)]], rtol=1e-4)
    assert central_differences(lambda x: 3.0 * x, [1e4, -2e5]).shape == (2, 2)


def _diamond_plan():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("x", "b", 3.0), ("a", "y", 5.0), ("b", "y", 7.0)])
    return g, optimize(g, mode="vertex", method="forward")


def test_check_schedule_accepts_a_correct_schedule():
    g, plan = _diamond_plan()
    assert check_schedule(plan.schedule, g) <= 1e-12
    P = np.random.default_rng(0).normal(size=(5, g.n_edges))
    assert check_schedule(plan.schedule, g, P) <= 1e-12


def test_check_schedule_rejects_a_tampered_schedule():
    g, plan = _diamond_plan()
    s = plan.schedule
    assert s.mults == 2
    dropped = Schedule(s.inputs, s.outputs, s.edges, s.slot_edges, s.ops[:-1], s.result)
    with pytest.raises(AssertionError, match="schedule Jacobian differs from the reference"):
        check_schedule(dropped, g)
    (entry, slot), = s.result.items()
    wrong_slot = Schedule(s.inputs, s.outputs, s.edges, s.slot_edges, s.ops, {entry: (slot + 1) % s.n_slots})
    with pytest.raises(AssertionError, match="relative error"):
        check_schedule(wrong_slot, g)
    # a tampered schedule that happens to agree at one point is caught at random points
    P = np.random.default_rng(1).normal(size=(4, g.n_edges))
    with pytest.raises(AssertionError):
        check_schedule(dropped, g, P)


def test_bauer_refuses_too_many_paths():
    # a ladder of k diamonds has 2**k paths
    edges = []
    prev = "x"
    for i in range(6):
        edges += [(prev, f"a{i}", 1.0), (prev, f"b{i}", 1.0), (f"a{i}", f"m{i}", 1.0), (f"b{i}", f"m{i}", 1.0)]
        prev = f"m{i}"
    edges.append((prev, "y", 1.0))
    g = CompGraph.from_edges(["x"], ["y"], edges)
    assert count_paths(g) == 64
    assert_close(bauer_jacobian(g), [[64.0]])
    with pytest.raises(JacaccError, match="64 input→output paths, more than max_paths=10"):
        bauer_jacobian(g, max_paths=10)
