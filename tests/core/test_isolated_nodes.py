"""Nodes named in ``inputs`` / ``outputs`` are nodes, whether or not an edge touches them.

An input nothing depends on is a zero Jacobian column, an output that depends
on nothing (a constant) a zero row; such graphs are valid in every mode and
method, however they are built (JSON dict or file, ``from_edges``, NetworkX
with ``kind`` attributes), and compile to kernels.  A node listed both as input
and as output is refused: it needs a copy node (see ``jacacc/graph.py``).
"""

from __future__ import annotations

import inspect
import json
import warnings

import networkx as nx
import numpy as np
import pytest
from dags import random_lcgs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jacacc
from jacacc import CompGraph, GraphError, reference_jacobian
from jacacc.eliminate.face import FACE_RULES
from jacacc.orders import get_method
from jacacc.verify import bauer_jacobian

HEURISTICS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EXACT = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FACE_RULE_NAMES = sorted(FACE_RULES)
SEARCH_OPTIONS = {"time_limit": 0.5, "workers": 1, "hint_time": 0.05}


def assert_close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def options_for(mode: str, method: str, **extra) -> dict:
    """Small time limits and one worker for the methods that take them."""
    params = inspect.signature(get_method(method, mode)).parameters
    return {k: v for k, v in {**SEARCH_OPTIONS, **extra}.items() if k in params}


def runs(exact: bool) -> list[tuple[str, str, dict]]:
    """(mode, method, options) for every registered method of every mode, face
    methods under every face rule (the exact face searches cover Naumann's rule only)."""
    out = []
    for mode in jacacc.modes():
        for method in jacacc.methods(mode):
            is_exact = method in jacacc.methods(mode, exact=True) or method == "anneal"
            if is_exact != exact:
                continue
            if mode == "face" and not is_exact:
                out += [(mode, method, {"rule": rule}) for rule in FACE_RULE_NAMES]
            else:
                out.append((mode, method, options_for(mode, method)))
    return out


HEURISTIC_RUNS = runs(exact=False)
EXACT_RUNS = runs(exact=True)


# ============================================================================ graphs with isolated endpoints
@st.composite
def padded_graphs(draw, max_intermediates: int = 6):
    """A random LCG plus unused inputs and constant outputs, interleaved at random
    positions of ``inputs`` / ``outputs`` and declared nowhere else.

    Returns the JSON form (without ``nodes``) and the ids of the extra inputs and outputs.
    """
    base = draw(random_lcgs(max_inputs=3, max_intermediates=max_intermediates, max_outputs=3))
    data = base.to_json()
    data.pop("nodes", None)
    ints = isinstance(base.inputs[0], int)
    n_unused, n_const = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    unused = [5000 + i if ints else f"unused{i}" for i in range(n_unused)]
    const = [6000 + i if ints else f"const{i}" for i in range(n_const)]
    for extra, key in ((unused, "inputs"), (const, "outputs")):
        for node in extra:
            data[key].insert(draw(st.integers(0, len(data[key]))), node)
    # the base graph's own unused inputs / constant outputs (the strategy makes some) count too
    unused += [x for x in base.inputs if base.digraph.out_degree(x) == 0]
    const += [y for y in base.outputs if base.digraph.in_degree(y) == 0]
    return data, unused, const


def build(data: dict, how: str, tmp_path=None) -> CompGraph:
    """The same graph through each construction path."""
    if how == "dict":
        return CompGraph.from_json(data)
    if how == "file":
        path = tmp_path / "g.json"
        path.write_text(json.dumps(data))
        return jacacc.as_graph(str(path))
    if how == "from_edges":
        return CompGraph.from_edges(data["inputs"], data["outputs"], data["edges"])
    if how == "networkx":
        G = nx.DiGraph()
        G.add_nodes_from(data["inputs"], kind="input")
        G.add_nodes_from(data["outputs"], kind="output")
        for u, v, p in data["edges"]:
            for node in (u, v):
                G.add_node(node, kind=G.nodes[node].get("kind", "intermediate") if node in G else "intermediate")
            G.add_edge(u, v, partial=p)
        G.graph["inputs"], G.graph["outputs"] = list(data["inputs"]), list(data["outputs"])
        return CompGraph.from_networkx(G)
    if how == "constructor":  # the plain constructor: endpoints absent from the DiGraph
        G = nx.DiGraph()
        G.add_edges_from((u, v, {"partial": p}) for u, v, p in data["edges"])
        return CompGraph(G, data["inputs"], data["outputs"])
    raise AssertionError(how)


def check_zero_lines(J: np.ndarray, g: CompGraph, unused, const) -> None:
    """Exact zeros in the columns of unused inputs and the rows of constant outputs."""
    for x in unused:
        assert np.all(J[..., :, g.inputs.index(x)] == 0.0), x
    for y in const:
        assert np.all(J[..., g.outputs.index(y), :] == 0.0), y


@HEURISTICS
@given(spec=padded_graphs())
def test_every_heuristic_method_in_every_mode_and_face_rule(spec):
    data, unused, const = spec
    g = CompGraph.from_json(data)
    assert g.inputs == tuple(data["inputs"]) and g.outputs == tuple(data["outputs"])
    want = reference_jacobian(g)
    assert want.shape == (len(g.outputs), len(g.inputs))
    assert_close(want, bauer_jacobian(g))
    check_zero_lines(want, g, unused, const)
    for mode, method, options in HEURISTIC_RUNS:
        plan = jacacc.optimize(g, mode=mode, method=method, seed=1, **options)
        J = plan.jacobian()
        assert J.shape == want.shape, (mode, method, options)
        assert_close(J, want)
        check_zero_lines(J, g, unused, const)


@EXACT
@given(spec=padded_graphs(max_intermediates=4))
def test_every_exact_search_in_every_mode(spec):
    data, unused, const = spec
    g = CompGraph.from_json(data)
    want = reference_jacobian(g)
    for mode, method, options in EXACT_RUNS:
        plan = jacacc.optimize(g, mode=mode, method=method, seed=0, **options)
        J = plan.jacobian()
        assert_close(J, want)
        check_zero_lines(J, g, unused, const)
        if method == "exhaustive":
            assert plan.optimal is True


@HEURISTICS
@given(spec=padded_graphs(max_intermediates=4), data=st.data())
def test_isolated_endpoints_cost_nothing(spec, data):
    """An isolated input or output adds no operation: every method costs what it costs
    on the graph without them."""
    graph_data, unused, const = spec
    g = CompGraph.from_json(graph_data)
    bare = CompGraph.from_json({**graph_data,
                                "inputs": [x for x in graph_data["inputs"] if x not in unused],
                                "outputs": [y for y in graph_data["outputs"] if y not in const]})
    mode, method, options = data.draw(st.sampled_from(HEURISTIC_RUNS))
    if method == "random":  # the random stream depends on the vertex set
        return
    a = jacacc.optimize(g, mode=mode, method=method, seed=0, **options)
    b = jacacc.optimize(bare, mode=mode, method=method, seed=0, **options)
    assert (a.mults, a.adds) == (b.mults, b.adds), (mode, method, options)


@pytest.mark.parametrize("how", ["dict", "file", "from_edges", "networkx", "constructor"])
def test_every_construction_path_accepts_undeclared_endpoints(how, tmp_path):
    data = {"inputs": ["w", "x"], "outputs": ["y", "c"],
            "edges": [["x", "a", 2.0], ["a", "y", 3.0], ["x", "y", 0.5]]}
    g = build(data, how, tmp_path)
    assert g.inputs == ("w", "x") and g.outputs == ("y", "c")
    assert g.kind("w") == "input" and g.kind("c") == "output"
    assert g == CompGraph.from_json({**data, "nodes": ["w", "c"]})  # the same as declaring them
    assert_close(reference_jacobian(g), [[0.0, 6.5], [0.0, 0.0]])
    assert_close(jacacc.optimize(g, mode="face", method="greedy").jacobian(), [[0.0, 6.5], [0.0, 0.0]])


def test_networkx_kinds_on_isolated_nodes():
    G = nx.DiGraph()
    G.add_node("w", kind="input")
    G.add_node("c", kind="output")
    G.add_edge("x", "y", partial=4.0)
    G.nodes["x"]["kind"], G.nodes["y"]["kind"] = "input", "output"
    g = CompGraph.from_networkx(G)
    assert g.inputs == ("w", "x") and g.outputs == ("c", "y")
    assert_close(jacacc.optimize(G, mode="edge").jacobian(), [[0.0, 0.0], [0.0, 4.0]])


def test_to_json_round_trip_keeps_isolated_endpoints(tmp_path):
    g = CompGraph.from_edges(["x", "w"], ["c", "y"], [("x", "y", 2.0)])
    data = g.to_json(tmp_path / "g.json")
    assert sorted(data["nodes"]) == ["c", "w"]  # still written, for readers that expect them
    back = CompGraph.from_json(tmp_path / "g.json")
    assert back == g and back.inputs == g.inputs and back.outputs == g.outputs
    del data["nodes"]
    assert CompGraph.from_json(data) == g


@pytest.mark.parametrize("mode, method, options", HEURISTIC_RUNS + EXACT_RUNS,
                         ids=lambda x: x if isinstance(x, str) else ",".join(f"{k}={v}" for k, v in x.items()))
def test_no_intermediates_and_no_edges(mode, method, options):
    direct = CompGraph.from_json({"inputs": ["a", "b", "u"], "outputs": ["p", "k", "q"],
                                  "edges": [["a", "p", 2.0], ["b", "p", -1.0], ["b", "q", 3.0]]})
    empty = CompGraph.from_json({"inputs": ["a", "b"], "outputs": ["k"], "edges": []})
    nothing = CompGraph.from_json({"inputs": [], "outputs": [], "edges": []})
    for g, want in ((direct, [[2.0, -1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]]),
                    (empty, [[0.0, 0.0]]), (nothing, np.zeros((0, 0)))):
        plan = jacacc.optimize(g, mode=mode, method=method, seed=0, **options)
        assert plan.mults == 0 and plan.adds == 0
        assert plan.optimal is True and plan.lower_bound == 0
        J = plan.jacobian()
        assert J.shape == np.shape(want)
        assert_close(J, want)
        assert_close(plan.jacobian(np.zeros((4, g.n_edges))), np.zeros((4, *np.shape(want))))


def test_an_input_listed_as_output_is_refused_with_the_copy_node_remedy():
    for data in ({"inputs": ["x"], "outputs": ["x"], "edges": []},
                 {"inputs": ["x", "z"], "outputs": ["y", "x"], "edges": [["z", "y", 1.0]]}):
        with pytest.raises(GraphError, match=r"node\(s\) 'x' listed both as input and output; .*copy node"):
            CompGraph.from_json(data)
    # the remedy the message names: an identity row through a copy node
    g = CompGraph.from_json({"inputs": ["x", "z"], "outputs": ["y", "x_out"],
                             "edges": [["z", "y", 1.5], ["x", "x_out", 1]]})
    assert_close(jacacc.optimize(g).jacobian(), [[0.0, 1.5], [1.0, 0.0]])
    G = nx.DiGraph()
    G.add_node("x", kind="input")
    G.graph["outputs"] = ["x"]
    with pytest.raises(GraphError, match="listed both as input and output|disagrees"):
        CompGraph.from_networkx(G)


def test_typo_in_an_input_name_is_not_silent():
    """A misspelt input is an unused input now; the vertex the edges use instead is fed
    by no input and is pruned with a warning that names it."""
    with pytest.warns(jacacc.PrunedVerticesWarning, match="'x_1'"):
        g = CompGraph.from_json({"inputs": ["x1"], "outputs": ["y"], "edges": [["x_1", "y", 2.0]]})
    assert_close(reference_jacobian(g), [[0.0]])


# ============================================================================ codegen
def f_unused_and_constant(x):
    """Input x1 unused; outputs 1 and 3 constant; output 2 is input x0 itself."""
    return [x[0] * np.sin(x[2]), 2.5, x[0], np.exp(x[2]) - 1.0, 0.0]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_compiled_kernel_with_unused_input_and_constant_outputs(backend):
    if backend == "numba":
        pytest.importorskip("numba")
    traced = jacacc.trace(f_unused_and_constant, 3)
    assert traced.graph.digraph.degree("x1") == 0
    X = np.random.default_rng(0).normal(size=(7, 3))
    want = traced.reference_jacobian(X)
    for method, mode in (("markowitz", "vertex"), ("reverse", "edge"), ("greedy", "face"), ("levels", "structure")):
        kernel = jacacc.compile(traced, backend=backend, method=method, mode=mode)
        V, J = kernel.values_and_jacobians(X)
        assert_close(J, want)
        assert np.all(J[:, :, 1] == 0.0) and np.all(J[:, [1, 4], :] == 0.0)
        assert_close(V[:, 1], np.full(7, 2.5))
        assert_close(V[:, 0], X[:, 0] * np.sin(X[:, 2]))
        if backend == "numba":
            break  # one numba compile is enough; the program is the same for every order


def test_compiled_numeric_graph_with_isolated_endpoints():
    g = CompGraph.from_json({"inputs": ["x", "w"], "outputs": ["c", "y"],
                             "edges": [["x", "a", 2.0], ["a", "y", 3.0]]})
    kernel = jacacc.compile(g, backend="numpy")
    assert_close(kernel(np.ones((2, 2))), np.broadcast_to([[0.0, 0.0], [6.0, 0.0]], (2, 2, 2)))


def test_traced_constant_function_in_every_mode():
    traced = jacacc.trace(lambda x: [3.0, -1.0], 2)
    X = np.ones((3, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to prune, nothing to warn about
        for mode in jacacc.modes():
            for method in jacacc.methods(mode, exact=False):
                assert_close(traced.jacobian(X, method=method, mode=mode, seed=0), np.zeros((3, 2, 2)))
