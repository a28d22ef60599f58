"""Hostile sizes and nesting for graph construction and the CLI (issue 24).

* Construction, validation and JSON loading are O(V + E).  Measured here
  without timing: node ids are a ``str`` subclass that counts its ``__hash__``
  and ``__eq__`` calls, so the test counts the work construction does per
  vertex and edge and checks that doubling the graph doubles it (the old code
  rebuilt ``set(inputs)`` for every vertex and ran ``inputs.count(n)`` for
  every input: quadratic).  Run time itself is measured by
  ``experiments/graph_scale.py``.
* A moderately large traced graph (the old code took minutes) is built and
  its result checked.
* The fast paths (topological order without a heap, pruning settled by
  degrees) give the same results as the general algorithms.
* The CLI answers a JSON file nested 10^5 levels deep, and a
  ``MODULE:FUNCTION`` whose function raises, with one ``jacacc: error:`` line.
"""

from __future__ import annotations

import json
import warnings

import networkx as nx
import numpy as np
import pytest

import jacacc
from jacacc import CompGraph
from jacacc.errors import GraphError
from jacacc.graph import PrunedVerticesWarning, _topological_order
from tests.core.test_hostile import run_cli


# ============================================================================ counted work
class Counted(str):
    """A node id that counts how often it is hashed or compared."""

    calls = 0

    def __hash__(self) -> int:
        Counted.calls += 1
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        Counted.calls += 1
        return str.__eq__(self, other)

    __ne__ = str.__ne__


def wide_graph(n: int) -> dict:
    """``n`` inputs, ``n`` intermediates, ``n`` outputs (an elementwise function), with
    counted ids, plus one reduction so the graph is not only disjoint chains."""
    xs, vs, ys = ([Counted(f"{p}{i}") for i in range(n)] for p in "xvy")
    edges = [[xs[i], vs[i], 2.0] for i in range(n)] + [[vs[i], ys[i], 3.0] for i in range(n)]
    edges += [[vs[i], ys[0], 1.0] for i in range(1, n)]
    return {"inputs": xs, "outputs": ys, "edges": edges}


def counted(build, n: int) -> int:
    data = wide_graph(n)
    Counted.calls = 0
    graph = build(data)
    calls = Counted.calls
    assert len(graph.inputs) == n and len(graph.intermediates) == n and graph.n_edges == 3 * n - 1
    return calls


def from_networkx(data: dict) -> CompGraph:
    g = nx.DiGraph()
    g.add_edges_from((u, v, {"partial": p}) for u, v, p in data["edges"])
    Counted.calls = 0  # count the construction, not the NetworkX graph built for it
    return CompGraph(g, data["inputs"], data["outputs"])


@pytest.mark.parametrize("build", [
    pytest.param(CompGraph.from_json, id="from_json"),
    pytest.param(lambda d: CompGraph.from_edges(d["inputs"], d["outputs"], d["edges"]), id="from_edges"),
    pytest.param(from_networkx, id="constructor"),
])
def test_construction_work_grows_linearly(build):
    small, large = counted(build, 400), counted(build, 1600)
    # linear: 4x the graph, about 4x the hashing; the old code did about 16x
    assert large <= 5 * small, (small, large)
    # and a bounded number of hash / compare calls per vertex and edge
    assert large <= 60 * (3 * 1600 + 3 * 1600), large


def test_indexes_of_a_built_graph_cost_no_rebuild():
    """``intermediates``, ``kind`` and the reference Jacobian used to rebuild
    ``set(inputs)`` per call or per vertex."""
    graph = CompGraph.from_json(wide_graph(1000))
    Counted.calls = 0
    for _ in range(100):
        assert len(graph.intermediates) == 1000
    assert graph.kind(graph.inputs[0]) == "input"
    index = graph.index_domain()
    assert len(index) == 3000
    assert Counted.calls <= 60 * 3000, Counted.calls


def test_a_traced_graph_of_60000_edges_is_right():
    """The old code took minutes here (set(inputs) rebuilt per vertex); the result is checked."""
    n = 20_000
    traced = jacacc.trace(lambda x: np.sin(x) * 2, n)
    g = traced.graph
    assert (len(g.inputs), len(g.intermediates), len(g.outputs), g.n_edges) == (n, n, n, 2 * n)
    assert g.topological_order[:2] == ("x0", "x1") and g.kind("y7") == "output"
    x = np.linspace(-1.0, 1.0, n)
    partials = traced.partials(x)
    np.testing.assert_allclose(partials[:n], np.cos(x))
    np.testing.assert_allclose(partials[n:], 2.0)


def test_from_jax_of_a_100x100_array_is_right():
    pytest.importorskip("jax")
    import jax.numpy as jnp

    traced = jacacc.from_jax(lambda x: jnp.sin(x) * 2, np.ones((100, 100)))
    assert traced.n_inputs == traced.n_outputs == 10_000
    assert traced.graph.n_edges == 20_000
    x = np.linspace(0.0, 1.0, 10_000)
    np.testing.assert_allclose(traced.partials(x)[:10_000], np.cos(x))


# ============================================================================ fast paths agree
def lexicographic(g: nx.DiGraph) -> tuple:
    position = {node: i for i, node in enumerate(g.nodes)}
    return tuple(nx.lexicographical_topological_sort(g, key=position.__getitem__))


@pytest.mark.parametrize("seed", range(20))
def test_topological_order_matches_networkx(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    labels = rng.permutation(n)  # insertion order unrelated to the topological one
    g = nx.DiGraph()
    g.add_nodes_from(int(v) for v in labels)
    for v in range(1, n):
        for u in rng.choice(v, size=min(v, int(rng.integers(0, 4))), replace=False):
            g.add_edge(int(u), v)
    assert _topological_order(g) == lexicographic(g)
    ordered = nx.DiGraph()  # inserted in a topological order: the fast path
    ordered.add_nodes_from(range(n))
    ordered.add_edges_from(g.edges)
    assert _topological_order(ordered) == lexicographic(ordered) == tuple(range(n))


def test_topological_order_of_a_cycle_is_none():
    assert _topological_order(nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a")])) is None
    with pytest.raises(GraphError, match="the graph has a cycle: "):
        CompGraph.from_edges(["x"], ["y"], [("x", "a"), ("a", "b"), ("b", "a"), ("b", "y")])


def test_pruning_still_finds_intermediates_fed_by_a_dead_source():
    """Every intermediate here has in- and out-edges but ``d`` and ``e`` descend only from
    the intermediate source ``s``: the degree shortcut must not skip the sweeps."""
    edges = [("x", "a", 1.0), ("a", "y", 2.0), ("s", "d", 1.0), ("d", "e", 1.0), ("e", "y", 1.0),
             ("a", "z", 1.0), ("a", "t", 1.0), ("t", "u", 1.0)]
    with pytest.warns(PrunedVerticesWarning, match="pruned 5 intermediate"):
        g = CompGraph.from_edges(["x"], ["y", "z"], edges)
    assert set(g.intermediates) == {"a"}
    assert g.edges == (("x", "a"), ("a", "y"), ("a", "z"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CompGraph.from_edges(["x"], ["y"], [("x", "a", 1.0), ("a", "y", 2.0)])  # nothing to prune


def test_duplicate_edge_far_apart_names_both_positions():
    edges = [[f"x{i}", "y", 1.0] for i in range(500)] + [["x7", "y", 2.0]]
    with pytest.raises(GraphError, match=r"duplicate edge \('x7' → 'y'\) at edge #7 and #500"):
        CompGraph.from_edges([f"x{i}" for i in range(500)], ["y"], edges)


def test_edge_order_is_the_given_order_also_when_not_topological():
    edges = [("b", "y", 1.0), ("x", "a", 2.0), ("a", "b", 3.0)]
    g = CompGraph.from_edges(["x"], ["y"], edges)
    assert g.edges == (("b", "y"), ("x", "a"), ("a", "b"))
    assert g.topological_order == ("x", "a", "b", "y")
    assert g.partial_array().tolist() == [1.0, 2.0, 3.0]


# ============================================================================ nesting
DEPTH = 100_000


def test_deeply_nested_python_edges_are_a_graph_error():
    nested: list = []
    for _ in range(DEPTH):
        nested = [nested]
    with pytest.raises(GraphError, match="edge #0 is <a list nested too deeply to show>"):
        CompGraph.from_json({"inputs": ["x"], "outputs": ["y"], "edges": [nested]})




def assert_one_line_error(code: int, err: str, fragment: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("jacacc: error: ")
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("text", [
    pytest.param("[" * DEPTH + "]" * DEPTH, id="bare"),
    pytest.param('{"inputs": ["x"], "outputs": ["y"], "edges": ' + "[" * DEPTH + "]" * DEPTH + "}", id="in-edges"),
])
def test_cli_deeply_nested_json_is_one_line(capsys, tmp_path, text):
    path = tmp_path / "deep.json"
    path.write_text(text, encoding="utf-8")
    code, _, err = run_cli(capsys, "optimize", str(path))
    assert_one_line_error(code, err, "nests arrays or objects too deeply")


def test_cli_function_that_raises_is_one_line(capsys, tmp_path):
    pytest.importorskip("jax")
    module = tmp_path / "raising.py"
    module.write_text("def f(x):\n    raise ValueError('no good\\nsecond line')\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "optimize", f"{module}:f", "--shape", "3")
    assert_one_line_error(code, err, f"function '{module}:f' raised ValueError: no good ...")


def test_cli_module_that_raises_on_import_is_one_line(capsys, tmp_path):
    module = tmp_path / "broken.py"
    module.write_text("x = 1 / 0\n\ndef f(x):\n    return x\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "optimize", f"{module}:f", "--shape", "3")
    assert_one_line_error(code, err, "raised ZeroDivisionError: division by zero")


def test_cli_optimizes_a_graph_with_many_inputs(capsys, tmp_path):
    n = 2000
    data = {"inputs": [f"x{i}" for i in range(n)], "outputs": [f"y{i}" for i in range(n)],
            "edges": [e for i in range(n) for e in ([f"x{i}", f"v{i}", 2.0], [f"v{i}", f"y{i}", 3.0])]}
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, err = run_cli(capsys, "optimize", str(path), "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["mults"] == n
    assert record["graph"] == {"file": str(path), "inputs": n, "intermediates": n, "outputs": n, "edges": 2 * n}


# ---------------------------------------------------------------------------- Markowitz on integer ranks
@pytest.mark.parametrize("tie, sign", [("reverse", -1), ("forward", 1)])
def test_the_integer_markowitz_driver_finds_the_generic_drivers_orders(tie, sign):
    from jacacc.orders.heuristics import _coded_vertex_order, greedy_vertex_order
    from jacacc.problems.generators import random_dag

    for seed in range(25):
        for shape in ((3, 10, 3, 2), (5, 40, 4, 3), (2, 80, 6, 4)):
            g = random_dag(*shape[:3], max_preds=shape[3], seed=seed)
            generic = greedy_vertex_order(g, lambda s, j: (s.markowitz(j), sign * s.rank[j]))  # noqa: B023
            assert _coded_vertex_order(g, tie) == generic


# ---------------------------------------------------------------------------- structural zeros
@pytest.mark.parametrize("mode, method", [("vertex", "markowitz"), ("edge", "markowitz"), ("face", "greedy")])
@pytest.mark.parametrize("seed", range(12))
def test_structural_zeros_are_skipped_by_every_schedule_as_by_the_reference(mode, method, seed):
    """Edges marked structurally zero drop out of every path: a schedule gives what the dense
    chain rule gives on the same marks, even where other partials are infinite (0 · inf)."""
    from jacacc.problems.generators import random_dag

    g = random_dag(3, 12, 3, max_preds=3, seed=seed)
    rng = np.random.default_rng(seed)
    zero = sorted(rng.choice(g.n_edges, size=max(1, g.n_edges // 4), replace=False).tolist())
    values = rng.uniform(-2, 2, size=g.n_edges)
    values[zero] = 0.0
    schedule = jacacc.optimize(g, mode=mode, method=method).schedule
    # finite partials: marking zeros changes nothing
    np.testing.assert_allclose(schedule.evaluate(values, zero_edges=zero), jacacc.reference_jacobian(g, values),
                               rtol=1e-12, atol=1e-12)
    # infinite partials behind the zeros: the marked reference is the truth, no NaN from 0 · inf
    others = [k for k in range(g.n_edges) if k not in zero]
    values[rng.choice(others, size=max(1, len(others) // 5), replace=False)] = np.inf
    with np.errstate(invalid="ignore"):
        want = jacacc.reference_jacobian(g, values, zero_edges=zero)
        got = schedule.evaluate(values, zero_edges=zero)
    # where no path free of marks runs through an inf, every product with it holds a mark: the
    # schedule is finite and equal; elsewhere both are non-finite (inf or NaN by the association)
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, atol=1e-12)
    assert not np.isfinite(got[~finite]).any()
    with np.errstate(invalid="ignore"):
        unmarked = schedule.evaluate(values)
    assert np.isnan(unmarked).sum() >= np.isnan(got).sum()
