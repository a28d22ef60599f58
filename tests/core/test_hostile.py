"""Hostile input at every entry point: a correct result or one clear jacacc error.

Entry points: graph construction (``CompGraph``, JSON dicts and files,
``as_graph``), ``jacacc.optimize``, ``jacacc.trace`` and a traced function's
evaluation, ``jacacc.compile`` and a kernel's call, and each CLI subcommand
(run in-process).  Every case either asserts a correct result against the
reference Jacobian or asserts a :class:`jacacc.errors.JacaccError` whose
message names the problem; the CLI answers with exit status 2 and one
``jacacc: error: ...`` line on stderr, never a traceback.

The rule for non-finite numbers (``jacacc/graph.py``): a graph's stored
numeric partials must be finite, values at points follow IEEE arithmetic.
"""

from __future__ import annotations

import json
import math

import networkx as nx
import numpy as np
import pytest

import jacacc
from jacacc import CompGraph, reference_jacobian
from jacacc.cli import main as cli_main
from jacacc.errors import (
    GraphError,
    JacaccError,
    OrderError,
    RegistryError,
    TraceError,
    UnsupportedOperationError,
)
from jacacc.verify import bauer_jacobian

GOOD = {
    "inputs": ["x1", "x2"],
    "outputs": ["y1", "y2"],
    "edges": [["x1", "a", 2.0], ["x2", "a", -1.0], ["a", "y1", 3.0], ["a", "b", 0.5], ["b", "y2", 4.0],
              ["x2", "y2", 1.5]],
}
HUGE_INT, LONG, ODD = 10**30, "s" * 10_000, "ü→∂"
ODD_IDS = {
    "inputs": [HUGE_INT, ODD],
    "outputs": [LONG, "ÿ"],
    "edges": [[HUGE_INT, "m", 2.0], [ODD, "m", 1.0], ["m", LONG, 3.0], ["m", "ÿ", 1.5], [ODD, LONG, 2.0]],
}
SEARCH = {"time_limit": 0.5, "workers": 1}


def with_edges(*edges, base=GOOD) -> dict:
    return {**base, "edges": base["edges"] + [list(e) if isinstance(e, tuple) else e for e in edges]}


def assert_close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def f_two(x):
    return [x[0] * np.sin(x[1]), x[0] - x[1]]


@pytest.fixture(scope="module")
def traced():
    return jacacc.trace(f_two, 2)


@pytest.fixture(scope="module")
def points():
    return np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.25]])


def raises(error: type[Exception], fragment: str):
    """``pytest.raises`` matching a literal fragment of the message."""
    return pytest.raises(error, match=_escape(fragment))


def _escape(text: str) -> str:
    import re

    return re.escape(text)


# ============================================================================ graph construction
def _nx_with_partial(p):
    G = nx.DiGraph()
    G.add_edge("x", "y", partial=p)
    return G


def _multidigraph():
    G = nx.MultiDiGraph()
    G.add_edge("x", "y")
    G.add_edge("x", "y")
    return G


def _nx_self_loop():
    G = nx.DiGraph()
    G.add_edges_from([("x", "a"), ("a", "a"), ("a", "y")])
    return G


BAD_GRAPHS = [
    # non-finite partials: refused wherever a graph stores a number
    pytest.param(lambda: CompGraph.from_json(with_edges(["x1", "y1", float("nan")])),
                 "edge ('x1' → 'y1') has a non-finite partial nan", id="nan-json-number"),
    pytest.param(lambda: CompGraph.from_json(with_edges(["x1", "y1", "Infinity"])),
                 "non-finite partial 'Infinity'", id="inf-json-string"),
    pytest.param(lambda: CompGraph.from_edges(["x"], ["y"], [("x", "y", -math.inf)]),
                 "non-finite partial -inf", id="inf-from-edges"),
    pytest.param(lambda: CompGraph.from_networkx(_nx_with_partial(np.float64("nan"))),
                 "non-finite partial", id="nan-networkx"),
    pytest.param(lambda: CompGraph.from_json(GOOD).with_partials([np.nan] * 6),
                 "non-finite partial nan", id="nan-with-partials"),
    # structure
    pytest.param(lambda: CompGraph.from_json(with_edges(["a", "a", 1.0])),
                 "self-loop on 'a'", id="self-loop-json"),
    pytest.param(lambda: CompGraph.from_networkx(_nx_self_loop()), "cycle: 'a' → 'a'", id="self-loop-networkx"),
    pytest.param(lambda: CompGraph.from_json(with_edges(["a", "y1", 7.0])),
                 "duplicate edge ('a' → 'y1') at edge #2 and #6", id="duplicate-edge"),
    pytest.param(lambda: jacacc.as_graph(_multidigraph()), "got MultiDiGraph", id="multidigraph"),
    pytest.param(lambda: CompGraph.from_json({**GOOD, "outputs": ["y1", "y2", "x1"]}),
                 "'x1' listed both as input and output", id="input-and-output"),
    pytest.param(lambda: CompGraph.from_json({**GOOD, "inputs": ["x1", "x2", "y1"]}),
                 "listed both as input and output", id="output-and-input"),
    # the containers
    pytest.param(lambda: CompGraph.from_edges("xy", ["y"], []), "inputs must be a list of node ids, got str",
                 id="inputs-string"),
    pytest.param(lambda: CompGraph.from_edges(["x"], None, []), "outputs must be a list of node ids, got NoneType",
                 id="outputs-none"),
    pytest.param(lambda: CompGraph(nx.DiGraph(), 3, []), "inputs must be a list of node ids, got int",
                 id="constructor-inputs-int"),
    pytest.param(lambda: CompGraph.from_edges(["x"], ["y"], None), "edges must be a list", id="edges-none"),
    pytest.param(lambda: CompGraph.from_edges(["x"], ["y"], {"x": "y"}), "edges must be a list", id="edges-dict"),
    pytest.param(lambda: CompGraph.from_edges(["x"], ["y"], [], nodes=5), "nodes must be a list", id="nodes-int"),
    pytest.param(lambda: CompGraph.from_json(with_edges(["x1", "y1", 1, 2])), "edge #6 is ['x1', 'y1', 1, 2]",
                 id="edge-four-items"),
    pytest.param(lambda: CompGraph.from_json(with_edges({"src": "x1"})), "edge #6 is {'src'", id="edge-dict"),
    pytest.param(lambda: CompGraph.from_json(with_edges([1.5, "y1", 1])), "node id 1.5 in edge #6 is a float",
                 id="node-float"),
    # partial strings that do not parse
    pytest.param(lambda: CompGraph.from_json(with_edges(["x1", "y1", "2,5"])),
                 "partial '2,5' that is neither a number nor an expression", id="decimal-comma"),
    pytest.param(lambda: CompGraph.from_json(with_edges(["x1", "y1", "1.2.3"])),
                 "partial '1.2.3' that is neither", id="two-dots"),
    pytest.param(lambda: CompGraph.from_json(with_edges(["x1", "y1", "1e"])), "partial '1e' that is neither",
                 id="bare-exponent"),
    pytest.param(lambda: CompGraph.from_json(with_edges(["x1", "y1", "sin(x1"])),
                 "partial expression 'sin(x1' with unbalanced parentheses", id="open-paren"),
    pytest.param(lambda: CompGraph.from_json(with_edges(["x1", "y1", "(x1))"])), "unbalanced parentheses",
                 id="close-paren"),
    pytest.param(lambda: CompGraph.from_json(with_edges(["x1", "y1", " "])), "empty partial string",
                 id="blank-partial"),
    pytest.param(lambda: CompGraph.from_edges(["x"], ["y"], [("x", "y", 1j)]), "non-numeric partial 1j",
                 id="complex-partial"),
    pytest.param(lambda: CompGraph.from_edges(["x"], ["y"], [("x", "y", np.array(2j))]), "non-numeric partial",
                 id="complex-0d-array-partial"),
    # JSON objects
    pytest.param(lambda: CompGraph.from_json([GOOD]), "cannot read a graph from a list", id="json-list"),
    pytest.param(lambda: CompGraph.from_json({"inputs": []}), "missing key(s): outputs, edges", id="json-missing"),
    pytest.param(lambda: CompGraph.from_json({**GOOD, "edgez": []}), "unknown key(s): edgez", id="json-unknown"),
    pytest.param(lambda: CompGraph.from_json({**GOOD, "edges": {}}), "'edges' must be a list, got dict",
                 id="json-edges-dict"),
    pytest.param(lambda: CompGraph.from_json({**GOOD, "name": ["g"]}), "'name' must be a string, got list",
                 id="json-name-list"),
    pytest.param(lambda: jacacc.as_graph(42), "cannot use a int as a graph", id="as-graph-int"),
    pytest.param(lambda: jacacc.as_graph(None), "cannot use a NoneType as a graph", id="as-graph-none"),
    pytest.param(lambda: jacacc.as_graph(nx.Graph()), "cannot use a Graph as a graph", id="undirected"),
]


@pytest.mark.parametrize("build, fragment", BAD_GRAPHS)
def test_bad_graphs_are_refused_with_one_clear_error(build, fragment):
    with raises(GraphError, fragment):
        build()


BAD_FILES = [
    pytest.param('{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", 1],', "malformed JSON in", id="truncated"),
    pytest.param("", "Expecting value at line 1 column 1", id="empty-file"),
    pytest.param("[1, 2]", "graph JSON must be an object, got list", id="list"),
    pytest.param('"a graph"', "graph JSON must be an object, got str", id="string"),
    pytest.param("null", "graph JSON must be an object, got NoneType", id="null"),
    pytest.param('{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", NaN]]}', "non-finite partial nan",
                 id="nan-token"),
    pytest.param('{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", -Infinity]]}', "non-finite partial -inf",
                 id="infinity-token"),
    pytest.param(b"\xff\xfe{}", "not UTF-8 text", id="not-utf8"),
    pytest.param('{"inputs": ["x"], "outputs": ["y"]}', "missing key(s): edges", id="missing-key"),
    pytest.param('{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", "3.1.4"]]}', "neither a number",
                 id="bad-number-string"),
]


@pytest.mark.parametrize("content, fragment", BAD_FILES)
def test_bad_graph_files(tmp_path, content, fragment):
    path = tmp_path / "g.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with raises(GraphError, fragment):
        jacacc.as_graph(path)
    with raises(GraphError, fragment):
        jacacc.optimize(str(path))


def test_missing_paths_and_directories(tmp_path):
    with raises(GraphError, "no such graph file: "):
        CompGraph.from_json(tmp_path / "nope.json")
    with raises(GraphError, "is a directory"):
        CompGraph.from_json(tmp_path)


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(GOOD).encode())
    assert CompGraph.from_json(path) == CompGraph.from_json(GOOD)


def test_a_huge_node_id_does_not_flood_the_message():
    with pytest.raises(GraphError, match="cycle") as info:
        CompGraph.from_json({"inputs": ["x"], "outputs": ["y"],
                             "edges": [["x", LONG, 1], [LONG, "b", 1], ["b", LONG, 1], ["b", "y", 1]]})
    assert len(str(info.value)) < 500 and "(10002 characters)" in str(info.value)


# ============================================================================ odd but valid graphs
def test_unicode_huge_and_mixed_node_ids_in_every_mode(tmp_path):
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(ODD_IDS, ensure_ascii=False), encoding="utf-8")
    g = CompGraph.from_json(path)
    assert g == CompGraph.from_json(ODD_IDS) and g.inputs == (HUGE_INT, ODD)
    want = bauer_jacobian(g)
    assert_close(reference_jacobian(g), want)
    for mode in jacacc.modes():
        for method in jacacc.methods(mode):
            options = SEARCH if method in ("cpsat", "optimal", "anneal") else {}
            if method == "anneal":
                options = {"time_limit": 0.5}
            assert_close(jacacc.optimize(path, mode=mode, method=method, seed=0, **options).jacobian(), want)
    assert_close(jacacc.compile(g, backend="numpy")(np.ones((2, 2))), np.broadcast_to(want, (2, 2, 2)))
    # ints and their string spellings are different nodes, in one graph
    mixed = CompGraph.from_json({"inputs": [1, "1"], "outputs": ["y"], "edges": [[1, "y", 2.0], ["1", "y", 3.0]]})
    assert_close(jacacc.optimize(mixed, mode="face", method="greedy").jacobian(), [[2.0, 3.0]])


def test_empty_graph_and_graph_without_intermediates():
    empty = {"inputs": [], "outputs": [], "edges": []}
    plan = jacacc.optimize(empty)
    assert plan.jacobian().shape == (0, 0) and plan.mults == 0 and plan.optimal is True
    assert jacacc.compile(CompGraph.from_json(empty), backend="numpy")(np.ones((3, 0))).shape == (3, 0, 0)
    direct = {"inputs": ["x"], "outputs": ["y", "z"], "edges": [["x", "y", 2.0], ["x", "z", -1.0]]}
    assert_close(jacacc.optimize(direct, mode="face", method="greedy").jacobian(), [[2.0], [-1.0]])
    only_inputs = CompGraph.from_json({"inputs": ["x"], "outputs": [], "edges": []})
    assert jacacc.compile(only_inputs, backend="numpy")(np.ones((3, 1))).shape == (3, 0, 1)


# ============================================================================ NaN and inf at evaluation
def test_nan_partials_at_evaluation_reach_exactly_their_entries():
    g = CompGraph.from_json(GOOD)
    P = g.partial_array()
    P[g.edge_index("x2", "y2")] = np.nan  # only J[y2, x2] has a path through this edge
    want = reference_jacobian(g)
    want[1, 1] = np.nan
    np.testing.assert_array_equal(reference_jacobian(g, P), want)
    for mode, method in (("vertex", "markowitz"), ("edge", "reverse"), ("face", "greedy"), ("structure", "levels")):
        np.testing.assert_array_equal(jacacc.optimize(g, mode=mode, method=method).jacobian(P), want)


def test_nan_points_propagate(traced, points):
    X = points.copy()
    X[1, 0] = np.nan  # x0 is NaN at point 1: d/dx1 of x0*sin(x1) is NaN, d/dx0 = sin(x1) is not
    J = traced.jacobian(X)
    assert np.isnan(J[1, 0, 1]) and np.isfinite(J[1, 0, 0]) and np.all(np.isfinite(J[[0, 2]]))
    np.testing.assert_array_equal(J, traced.reference_jacobian(X))
    np.testing.assert_array_equal(jacacc.compile(traced, backend="numpy")(X), J)
    V = traced.values(X)
    assert np.isnan(V[1]).all() and np.isfinite(V[[0, 2]]).all()


def test_inf_points_do_not_crash(traced):
    with np.errstate(all="ignore"):
        assert traced.jacobian([np.inf, 1.0]).shape == (2, 2)
        assert jacacc.compile(traced, backend="numpy")(np.array([[np.inf, 1.0]])).shape == (1, 2, 2)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_traced_non_finite_constants_follow_ieee_but_are_not_written_to_files():
    t = jacacc.trace(lambda x: x[0] / 0.0, 1)  # IEEE: the partial is the constant inf
    assert t.jacobian([1.0])[0, 0] == np.inf
    with raises(GraphError, "cannot write edge ('x0' → 'y0') to JSON: its partial is the constant inf"):
        t.graph.to_json()
    sqrt = jacacc.trace(lambda x: np.sqrt(x[0]), 1)
    with raises(TraceError, "linearize: at this point 1 partial(s) are not finite"):
        sqrt.linearize([0.0])
    with raises(TraceError, "not finite"):
        sqrt.linearize([np.nan])
    assert sqrt.jacobian([0.0])[0, 0] == np.inf


# ============================================================================ optimize
@pytest.fixture(scope="module")
def good():
    return CompGraph.from_json(GOOD)


BAD_ORDERS = [
    pytest.param("vertex", ["a", "a", "b"], "not a permutation of the intermediates: repeated 'a'", id="vertex-dup"),
    pytest.param("vertex", ["a", "zz", "b"], "unknown vertices 'zz'", id="vertex-unknown"),
    pytest.param("vertex", ["a"], "missing 'b'", id="vertex-short"),
    pytest.param("vertex", None, "a vertex elimination order is a list of intermediates, got NoneType",
                 id="vertex-none"),
    pytest.param("vertex", 5, "got int", id="vertex-int"),
    pytest.param("edge", [(("x1", "a"), "front")] * 2, "step #1 (front(x1→a)): edge ('x1' → 'a') is not in the graph",
                 id="edge-dup"),
    pytest.param("edge", [(("x1", "zz"), "front")], "edge ('x1' → 'zz') is not in the graph", id="edge-unknown"),
    pytest.param("edge", [("x1", "a")], "a step is ((src, dst), 'front' | 'back')", id="edge-malformed"),
    pytest.param("edge", [(("x1", "a"), "sideways")], "use 'front' or 'back'", id="edge-direction"),
    pytest.param("edge", [(("a", "y1"), "back")], "ends with intermediates left", id="edge-incomplete"),
    pytest.param("face", ["b", "b", "a"], "repeated 'b'", id="face-dup"),
    pytest.param("face", ["zz"], "unknown vertices 'zz'", id="face-unknown"),
    pytest.param("structure", ["a", "b"], "mode 'structure' takes no explicit order", id="structure"),
]


@pytest.mark.parametrize("mode, order, fragment", BAD_ORDERS)
def test_bad_explicit_orders(good, mode, order, fragment):
    with raises(OrderError, fragment):
        jacacc.optimize(good, mode=mode, method=order)


SEARCH_LIMITS = [
    ("cpsat", {"time_limit": 0}, "time_limit must be a positive number of seconds, got 0"),
    ("cpsat", {"time_limit": -1}, "time_limit must be a positive number of seconds, got -1"),
    ("optimal", {"time_limit": float("nan")}, "time_limit must be a positive number of seconds, got nan"),
    ("optimal", {"workers": 0}, "workers must be a positive integer, got 0"),
    ("cpsat", {"workers": -2}, "workers must be a positive integer, got -2"),
    ("cpsat", {"workers": 1.5}, "workers must be a positive integer, got 1.5"),
]


@pytest.mark.parametrize("mode", ["vertex", "edge", "face"])
def test_zero_and_negative_time_limits_and_workers(good, mode):
    for method, options, fragment in SEARCH_LIMITS:
        with raises(OrderError, fragment):
            jacacc.optimize(good, mode=mode, method=method, **options)


def test_anneal_limits(good):
    for options, fragment in (({"time_limit": 0}, "time_limit must be a positive number"),
                              ({"time_limit": -1}, "got -1"),
                              ({"iterations": -1}, "iterations must be an integer ≥ 0, got -1")):
        with raises(OrderError, fragment):
            jacacc.optimize(good, method="anneal", **options)


BAD_CALLS = [
    pytest.param({"mode": "diag"}, RegistryError, "unknown mode 'diag'; valid modes: vertex, edge, face, structure",
                 id="mode"),
    pytest.param({"mode": 3}, RegistryError, "unknown mode 3", id="mode-int"),
    pytest.param({"method": "nope"}, RegistryError, "unknown method 'nope' for mode 'vertex'; valid methods:",
                 id="method"),
    pytest.param({"method": "markowitz", "time_limit": 1}, RegistryError,
                 "method 'markowitz' does not accept options ['time_limit']", id="option"),
    pytest.param({"mode": "face", "method": "greedy", "rule": "bogus"}, RegistryError, "unknown face rule 'bogus'",
                 id="face-rule"),
    pytest.param({"mode": "face", "method": "cpsat", "rule": "griewank_walther", "time_limit": 1}, OrderError,
                 "covers Naumann's rule only, not 'griewank_walther'", id="face-search-rule"),
    pytest.param({"method": "random", "seed": -1}, OrderError, "seed must be a non-negative integer or None, got -1",
                 id="seed-negative"),
    pytest.param({"method": "random", "seed": "x"}, OrderError, "got 'x'", id="seed-string"),
    pytest.param({"method": "random", "seed": 1.5}, OrderError, "got 1.5", id="seed-float"),
]


@pytest.mark.parametrize("kwargs, error, fragment", BAD_CALLS)
def test_unknown_names_options_and_seeds(good, kwargs, error, fragment):
    with raises(error, fragment):
        jacacc.optimize(good, **kwargs)


def test_face_search_under_naumanns_rule_by_name(good):
    plan = jacacc.optimize(good, mode="face", method="cpsat", rule="naumann", time_limit=1)
    assert_close(plan.jacobian(), reference_jacobian(good))


@pytest.mark.parametrize("partials, fragment", [
    pytest.param(np.ones(5), "partials must have shape (..., 6)", id="shape"),
    pytest.param(np.ones(6) * 1j, "partials are complex (dtype complex128)", id="complex"),
    pytest.param(["a"] * 6, "partials must be real numbers, got an array of dtype <U1", id="strings"),
    pytest.param([[1.0] * 6, [1.0]], "partials must be an array of real numbers", id="ragged"),
])
def test_bad_partials_at_evaluation(good, partials, fragment):
    plan = jacacc.optimize(good)
    with raises(GraphError, fragment):
        plan.jacobian(partials)
    with raises(GraphError, fragment):
        reference_jacobian(good, partials)


def test_integer_partials_at_evaluation_are_converted(good):
    P = np.arange(1, 7)
    assert_close(jacacc.optimize(good, mode="edge").jacobian(P), reference_jacobian(good, P.astype(float)))


# ============================================================================ trace and traced evaluation
def test_trace_refuses_a_function_it_cannot_call():
    with pytest.raises(TraceError, match=r"f cannot be called as f\(x\) with x a vector") as info:
        jacacc.trace(lambda a, b, c: a, 2)
    assert isinstance(info.value, TypeError)  # what calling f wrongly would raise
    with raises(TraceError, "f cannot be called as f(x0, ..., x2)"):
        jacacc.trace(lambda a, b: a, 3, unpack=True)
    with raises(UnsupportedOperationError, "complex constant"):
        jacacc.trace(lambda x: x[0] * 1j, 1)
    with raises(TraceError, "returned a str"):
        jacacc.trace(lambda x: "y", 1)


GOOD_POINTS = {
    "int": lambda X: np.array([[1, 2], [0, -1]]),
    "float32": lambda X: X.astype(np.float32),
    "object": lambda X: X.astype(object),
    "list": lambda X: X.tolist(),
    "strided": lambda X: np.repeat(X, 2, axis=1)[:, ::2],
    "transposed": lambda X: np.ascontiguousarray(X.T).T,
    "fortran": lambda X: np.asfortranarray(X),
    "read-only": lambda X: _read_only(X),
    "empty-batch": lambda X: np.zeros((0, 2)),
}


def _read_only(X):
    X = X.copy()
    X.flags.writeable = False
    return X


BAD_POINTS = [
    pytest.param(lambda X: X + 1j, "points are complex (dtype complex128)", id="complex"),
    pytest.param(lambda X: X.astype(str), "points must be real numbers, got an array of dtype <U", id="strings"),
    pytest.param(lambda X: np.array([[1.0, 2.0j]], dtype=object), "points must be real numbers, got an array of dtype object",
                 id="object-complex"),
    pytest.param(lambda X: [[1.0, 2.0], [1.0]], "points must be an array of real numbers", id="ragged"),
    pytest.param(lambda X: np.ones((3, 3)), "shape", id="wrong-width"),
    pytest.param(lambda X: None, "got ()", id="none"),  # NumPy reads None as a NaN scalar
]


def test_traced_evaluation_converts_points(traced, points):
    for kind, make in GOOD_POINTS.items():
        X = make(points)
        want = traced.reference_jacobian(np.array(X, dtype=float).reshape(-1, 2))
        assert_close(traced.jacobian(X), want)
        assert_close(traced.jacobian(X, method="reverse", mode="edge"), want)
        assert traced.values(X).shape == (len(want), 2), kind


@pytest.mark.parametrize("make, fragment", BAD_POINTS)
def test_traced_evaluation_refuses_points(traced, points, make, fragment):
    X = make(points)
    if fragment == "shape":
        fragment = "x must have shape (..., 2), got (3, 3)"
    for call in (traced.jacobian, traced.values, traced.partials):
        with raises(TraceError, fragment):
            call(X)


# ============================================================================ compile and kernels
BAD_COMPILES = [
    pytest.param({"backend": "fortran"}, RegistryError, "unknown backend 'fortran'; valid backends: cupy, numba, numpy",
                 id="backend"),
    pytest.param({"backend": 5}, RegistryError, "unknown backend 5", id="backend-int"),
    pytest.param({"dtype": "banana"}, RegistryError, "unknown dtype 'banana'", id="dtype-unknown"),
    pytest.param({"dtype": "float16"}, RegistryError, "does not support dtype 'float16'", id="dtype-float16"),
    pytest.param({"dtype": complex}, RegistryError, "does not support dtype 'complex128'", id="dtype-complex"),
    pytest.param({"backend_options": {"max_statements": 10}}, RegistryError,
                 "backend 'numpy' does not accept option(s) max_statements; it takes: tier, table_threshold", id="numpy-option"),
    pytest.param({"backend": "numba", "backend_options": {"max_statements": 0}}, RegistryError,
                 "max_statements must be a positive integer, got 0", id="numba-max-statements"),
    pytest.param({"backend": "numba", "backend_options": {"block": -1}}, RegistryError,
                 "block must be a positive integer, got -1", id="numba-block"),
    pytest.param({"method": "bogus"}, RegistryError, "unknown method 'bogus'", id="method"),
    pytest.param({"mode": "bogus"}, RegistryError, "unknown mode 'bogus'", id="mode"),
    pytest.param({"method": "random", "seed": -3}, OrderError, "seed must be a non-negative integer", id="seed"),
]


@pytest.mark.parametrize("kwargs, error, fragment", BAD_COMPILES)
def test_bad_compile_arguments(traced, kwargs, error, fragment):
    with raises(error, fragment):
        jacacc.compile(traced, **{"backend": "numpy", **kwargs})


def test_compile_refuses_what_is_not_a_traced_function():
    for thing, name in ((f_two, "function"), (GOOD, "dict"), ("RoeFlux_1d", "str")):
        with raises(JacaccError, f"cannot compile a {name}"):
            jacacc.compile(thing)
    symbolic = CompGraph.from_json({"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", "cos(x)"]]})
    with raises(GraphError, "is 'cos(x)', not a number, and the graph has no primal program"):
        jacacc.compile(symbolic)


@pytest.fixture(scope="module")
def numpy_kernel(traced):
    return jacacc.compile(traced, backend="numpy")


def test_kernel_converts_points(traced, numpy_kernel, points):
    for kind, make in GOOD_POINTS.items():
        X = make(points)
        V, J = numpy_kernel.values_and_jacobians(X)
        assert J.dtype == np.float64 and J.flags.c_contiguous, kind
        assert_close(J, traced.reference_jacobian(np.array(X, dtype=float).reshape(-1, 2)))
        assert_close(V, traced.values(np.array(X, dtype=float).reshape(-1, 2)))


@pytest.mark.parametrize("make, fragment", BAD_POINTS)
def test_kernel_refuses_points(numpy_kernel, points, make, fragment):
    if fragment == "shape":
        fragment = "points must have shape (N, 2) or (2,), got (3, 3)"
    with raises(GraphError, fragment):
        numpy_kernel(make(points))


def test_float32_kernel_rounds_float64_points(traced, points):
    kernel = jacacc.compile(traced, backend="numpy", dtype="float32")
    J = kernel(points)
    assert J.dtype == np.float32
    np.testing.assert_allclose(J, traced.reference_jacobian(points), rtol=1e-5, atol=1e-6)


def test_kernel_out_buffers_are_checked(numpy_kernel, points):
    with raises(GraphError, "C-contiguous float64 array of shape (3, 2, 2), got float32"):
        numpy_kernel(points, out=np.empty((3, 2, 2), dtype=np.float32))
    with raises(GraphError, "(not C-contiguous)"):
        numpy_kernel(points, out=np.asfortranarray(np.empty((3, 2, 2))))
    with raises(GraphError, "out must be a pair (V, J)"):
        numpy_kernel.values_and_jacobians(points, out=np.empty((3, 2, 2)))


def test_numba_kernel_with_awkward_points(traced, points):
    pytest.importorskip("numba")
    kernel = jacacc.compile(traced, backend="numba")
    want = traced.reference_jacobian(points)
    for kind in ("int", "fortran", "strided", "read-only", "transposed"):
        X = GOOD_POINTS[kind](points)
        assert_close(kernel(X), traced.reference_jacobian(np.array(X, dtype=float)))
    assert_close(kernel(points[0]), want[0])  # one point
    X = points.copy()
    X[2, 1] = np.nan
    np.testing.assert_array_equal(kernel(X), traced.reference_jacobian(X))
    with raises(GraphError, "points are complex"):
        kernel(points + 0j)


# ============================================================================ the command line
def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = cli_main(list(args))
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("hostile")
    contents = {
        "good": json.dumps(GOOD),
        "odd": json.dumps(ODD_IDS, ensure_ascii=False),
        "isolated": json.dumps({"inputs": ["x", "w"], "outputs": ["c", "y"], "edges": [["x", "y", 2.0]]}),
        "truncated": '{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", 1],',
        "list": "[1, 2]",
        "missing": '{"inputs": ["x"]}',
        "nan": '{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", NaN]]}',
        "paren": '{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", "sin(x"]]}',
        "symbolic": '{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", "cos(x)"]]}',
        "both": '{"inputs": ["x"], "outputs": ["x"], "edges": []}',
        "loop": '{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "a", 1], ["a", "a", 1], ["a", "y", 1]]}',
        "duplicate": '{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", 1], ["x", "y", 2]]}',
    }
    paths = {}
    for name, text in contents.items():
        path = d / f"{name}.json"
        path.write_text(text, encoding="utf-8")
        paths[name] = str(path)
    (d / "binary.json").write_bytes(b"\xff\xfe\x00")
    paths["binary"] = str(d / "binary.json")
    paths["dir"] = str(d)
    paths["nope"] = str(d / "nope.json")
    paths["no_dir_out"] = str(d / "no" / "such" / "kernel.py")
    return paths


CLI_ERRORS = [
    # optimize: limits, seeds, names
    pytest.param(["optimize", "{good}", "--method", "cpsat", "--time-limit", "0"],
                 "time_limit must be a positive number of seconds, got 0.0", id="optimize-time-limit-0"),
    pytest.param(["optimize", "{good}", "--method", "optimal", "--time-limit", "-1"],
                 "time_limit must be a positive number of seconds, got -1.0", id="optimize-time-limit-negative"),
    pytest.param(["optimize", "{good}", "--method", "cpsat", "--workers", "-1"],
                 "workers must be a positive integer, got -1", id="optimize-workers-negative"),
    pytest.param(["optimize", "{good}", "--mode", "edge", "--method", "cpsat", "--workers", "0"],
                 "workers must be a positive integer, got 0", id="optimize-workers-0"),
    pytest.param(["optimize", "{good}", "--time-limit", "5"],
                 "method 'markowitz' does not accept options ['time_limit']", id="optimize-limit-for-heuristic"),
    pytest.param(["optimize", "{good}", "--time-limit", "abc"], "argument --time-limit: invalid float value: 'abc'",
                 id="optimize-time-limit-text"),
    pytest.param(["optimize", "{good}", "--method", "random", "--seed", "-1"],
                 "seed must be a non-negative integer or None, got -1", id="optimize-seed-negative"),
    pytest.param(["optimize", "{good}", "--method", "nope"], "unknown method 'nope' for mode 'vertex'",
                 id="optimize-method"),
    pytest.param(["optimize", "{good}", "--mode", "diag"], "unknown mode 'diag'", id="optimize-mode"),
    pytest.param(["optimize", "{good}", "--mode", "face", "--method", "random", "--workers", "2"],
                 "does not accept options ['workers']", id="optimize-workers-for-heuristic"),
    # optimize: files
    pytest.param(["optimize", "{truncated}"], "malformed JSON in", id="optimize-truncated"),
    pytest.param(["optimize", "{list}"], "graph JSON must be an object, got list", id="optimize-not-object"),
    pytest.param(["optimize", "{missing}"], "graph JSON is missing key(s): outputs, edges", id="optimize-missing-keys"),
    pytest.param(["optimize", "{nan}"], "non-finite partial nan", id="optimize-nan"),
    pytest.param(["optimize", "{paren}"], "unbalanced parentheses", id="optimize-paren"),
    pytest.param(["optimize", "{binary}"], "not UTF-8 text", id="optimize-binary"),
    pytest.param(["optimize", "{dir}"], "is a directory", id="optimize-directory"),
    pytest.param(["optimize", "{nope}"], "no such graph file", id="optimize-nonexistent"),
    pytest.param(["optimize", "{both}"], "listed both as input and output", id="optimize-input-and-output"),
    pytest.param(["optimize", "{loop}"], "self-loop on 'a'", id="optimize-self-loop"),
    pytest.param(["optimize", "{duplicate}"], "duplicate edge ('x' → 'y')", id="optimize-duplicate"),
    # methods, demo
    pytest.param(["methods", "--mode", "diag"], "unknown mode 'diag'", id="methods-mode"),
    pytest.param(["demo", "--fast"], "unrecognized arguments: --fast", id="demo-argument"),
    # compile
    pytest.param(["compile", "{good}", "--backend", "fortran"], "unknown backend 'fortran'", id="compile-backend"),
    pytest.param(["compile", "{good}", "--backend", "numpy", "--dtype", "float16"], "invalid choice: 'float16'",
                 id="compile-dtype"),
    pytest.param(["compile", "{good}", "--backend", "numpy", "--max-statements", "5"],
                 "backend 'numpy' does not accept option(s) max_statements", id="compile-option-for-numpy"),
    pytest.param(["compile", "{good}", "--backend", "numba", "--max-statements", "0"],
                 "argument --max-statements: must be a positive integer, got 0", id="compile-max-statements"),
    pytest.param(["compile", "{good}", "--backend", "numpy", "--method", "cpsat", "--mode", "bogus"],
                 "unknown mode 'bogus'", id="compile-mode"),
    pytest.param(["compile", "not_a_problem", "--backend", "numpy"], "'not_a_problem' is neither a zoo problem",
                 id="compile-target"),
    pytest.param(["compile", "{symbolic}", "--backend", "numpy"], "not a number, and the graph has no primal program",
                 id="compile-symbolic-file"),
    pytest.param(["compile", "{nan}", "--backend", "numpy"], "non-finite partial", id="compile-nan"),
    pytest.param(["compile", "{good}", "--backend", "numpy", "-o", "{no_dir_out}"], "No such file or directory",
                 id="compile-output-dir"),
    # bench: everything is refused before the machine's peaks are measured
    pytest.param(["bench", "not_a_problem"], "unknown problem 'not_a_problem'", id="bench-problem"),
    pytest.param(["bench", "random_dag_s"], "is a graph; bench needs a function problem", id="bench-graph"),
    pytest.param(["bench", "BlackScholes", "--sizes", "0"], "argument --sizes: must be a positive integer, got 0",
                 id="bench-size-0"),
    pytest.param(["bench", "BlackScholes", "--sizes", "100", "-5"], "must be a positive integer, got -5",
                 id="bench-size-negative"),
    pytest.param(["bench", "BlackScholes", "--repeat", "0"], "argument --repeat: must be a positive integer",
                 id="bench-repeat"),
    pytest.param(["bench", "BlackScholes", "--backends", "fortran", "--peers"], "unknown backend 'fortran'",
                 id="bench-backend"),
    pytest.param(["bench", "BlackScholes", "--backends", "numpy+fastmath", "--peers"],
                 "backend 'numpy' does not accept option(s) fastmath", id="bench-backend-flag"),
    pytest.param(["bench", "BlackScholes", "--methods", "bogus", "--peers"], "unknown method 'bogus'",
                 id="bench-method"),
    pytest.param(["bench", "BlackScholes", "--mode", "diag", "--peers"], "unknown mode 'diag'", id="bench-mode"),
    pytest.param(["bench", "BlackScholes", "--peers", "bogus"], "unknown peer 'bogus'", id="bench-peer"),
]


@pytest.mark.parametrize("args, fragment", CLI_ERRORS)
def test_cli_errors_are_one_line(capsys, files, args, fragment):
    code, out, err = run_cli(capsys, *(a.format(**files) for a in args))
    assert code == 2, (out, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("jacacc: error: ")
    assert fragment in lines[0], lines[0]


def test_cli_odd_but_valid_graphs(capsys, files):
    code, out, err = run_cli(capsys, "optimize", files["isolated"], "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["mults"] == 0 and record["graph"]["inputs"] == 2 and record["graph"]["outputs"] == 2
    code, out, err = run_cli(capsys, "optimize", files["odd"], "--mode", "edge", "--json")
    assert code == 0, err
    assert json.loads(out)["graph"]["inputs"] == 2
    code, out, err = run_cli(capsys, "optimize", files["odd"], "--mode", "face", "--method", "greedy")
    assert code == 0 and "ü→∂" in out, err
    code, out, err = run_cli(capsys, "compile", files["isolated"], "--backend", "numpy")
    assert code == 0 and "def kernel" in out, err
