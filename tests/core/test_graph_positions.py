"""Graph construction on integer positions (issue 24): the same graphs, orders and errors.

Validation, the topological sort and the order finders run on vertex
positions and NumPy arrays, and a graph read from edges builds its
``networkx.DiGraph`` only when something asks for it.  Checked here against
independent references:

* the topological order against NetworkX's lexicographical sort keyed by
  insertion position, on graphs that take each of the sort's routes (in
  order, the vectorized scan, the heap after a failed check or a long
  propagation, a cycle);
* ``from_edges`` / ``from_json`` against a DiGraph built one ``add_edge`` at a
  time and validated by the constructor: node order, attribute dicts,
  adjacency order, edge order, pruning warnings;
* the column-wise edge reader against the one-by-one reader (the first bad
  edge in order is the one named, whichever check finds it);
* ``rank_adjacency`` and the integer Markowitz driver against the generic ones.
"""

from __future__ import annotations

import random
import warnings

import networkx as nx
import numpy as np
import pytest

import jacacc.graph as graph_module
from jacacc import CompGraph
from jacacc.errors import GraphError
from jacacc.graph import PrunedVerticesWarning, _topological_positions
from jacacc.orders import find_order


# ---------------------------------------------------------------------------- helpers
def lexicographic(n: int, src: list[int], dst: list[int]) -> list[int] | None:
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(src, dst, strict=True))
    try:
        return list(nx.lexicographical_topological_sort(g))  # ints: keyed by position
    except nx.NetworkXUnfeasible:
        return None


def positions(n: int, src: list[int], dst: list[int]) -> list[int] | None:
    order = _topological_positions(n, np.array(src, dtype=np.intp), np.array(dst, dtype=np.intp))
    return None if order is None else order.tolist()


@pytest.fixture
def heap_calls(monkeypatch):
    """Counts how often the sort falls back to the heap version."""
    calls = []
    real = graph_module._kahn_positions

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(graph_module, "_kahn_positions", counted)
    return calls


def random_dag_positions(rng: random.Random, n: int, max_preds: int, shuffle: float) -> tuple[list[int], list[int]]:
    """A random DAG on ``n`` positions: built in a topological order, then a fraction
    ``shuffle`` of the vertices moved to random positions (insertion order no longer topological)."""
    src, dst = [], []
    for v in range(1, n):
        for u in rng.sample(range(v), min(v, rng.randint(0, max_preds))):
            src.append(u)
            dst.append(v)
    label = list(range(n))
    moved = rng.sample(range(n), int(shuffle * n))
    targets = moved[:]
    rng.shuffle(targets)
    for a, b in zip(moved, targets, strict=True):
        label[a] = b
    return [label[u] for u in src], [label[v] for v in dst]


def structure(g: CompGraph) -> dict:
    """Everything construction decides, in order: compared between construction routes."""
    nx_graph = g._g
    return {
        "nodes": list(nx_graph._node.items()),
        "succ": [(u, list(out.items())) for u, out in nx_graph._succ.items()],
        "pred": [(v, list(into.items())) for v, into in nx_graph._pred.items()],
        "graph": dict(nx_graph.graph),
        "edges": g.edges,
        "topological_order": g.topological_order,
        "intermediates": g.intermediates,
        "inputs": g.inputs,
        "outputs": g.outputs,
    }


# ---------------------------------------------------------------------------- topological order
@pytest.mark.parametrize("shuffle", [0.0, 0.02, 0.2, 1.0])
def test_topological_positions_match_networkx(shuffle, heap_calls):
    rng = random.Random(int(shuffle * 100))
    for _ in range(150):
        n = rng.randint(1, 60)
        src, dst = random_dag_positions(rng, n, rng.randint(1, 4), shuffle)
        assert positions(n, src, dst) == lexicographic(n, src, dst), (n, src, dst)
    if shuffle == 0.0:
        assert not heap_calls  # in order: one test, no sort at all


def test_the_vectorized_scan_and_the_heap_both_decide_some_orders(heap_calls):
    """Late vertices placed at one scan position in increasing order: the scan's order;
    a late vertex that must wait for a later one: the heap's.  Both agree with NetworkX."""
    # 3 is inserted after its successor 1; 1 is late, placed after 3
    assert positions(4, [0, 3, 1], [1, 1, 2]) == lexicographic(4, [0, 3, 1], [1, 1, 2]) == [0, 3, 1, 2]
    assert not heap_calls
    # 4 → 2 → 1, both late at scan position 4, but 2 must precede 1: the check fails, the heap decides
    src, dst = [4, 2, 0], [2, 1, 3]
    assert positions(5, src, dst) == lexicographic(5, src, dst) == [0, 3, 4, 2, 1]
    assert len(heap_calls) == 1


def test_a_long_chain_inserted_backwards_goes_to_the_heap(heap_calls):
    n = 3000
    src, dst = list(range(n - 1, 0, -1)), list(range(n - 2, -1, -1))  # n-1 → n-2 → … → 0
    assert positions(n, src, dst) == list(range(n - 1, -1, -1))
    assert len(heap_calls) == 1  # the propagation ran out of its budget


@pytest.mark.parametrize("src, dst", [
    ([0, 1, 2], [1, 2, 0]),  # a cycle through a back edge
    ([0, 1, 2, 3], [1, 2, 3, 1]),
    ([2, 1], [1, 2]),  # a 2-cycle
    ([0, 1], [1, 1]),  # a self-loop
])
def test_a_cycle_has_no_topological_order(src, dst):
    assert positions(4, src, dst) is None
    assert lexicographic(4, src, dst) is None


def test_random_graphs_with_cycles():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(2, 30)
        src, dst = random_dag_positions(rng, n, 3, rng.random())
        for _ in range(rng.randint(1, 3)):
            src.append(rng.randrange(n))
            dst.append(rng.randrange(n))
        pairs = list(dict.fromkeys(zip(src, dst, strict=True)))  # no repeated edge
        src, dst = [u for u, _ in pairs], [v for _, v in pairs]
        assert positions(n, src, dst) == lexicographic(n, src, dst)


# ---------------------------------------------------------------------------- from_edges against add_edge
def random_edge_list(seed: int) -> tuple[list, list, list, list]:
    """Inputs, outputs, edges (varied partial types, shuffled order, dead vertices, isolated
    inputs and outputs) and declared nodes."""
    rng = random.Random(seed)
    n = rng.randint(4, 50)
    src, dst = random_dag_positions(rng, n, 3, rng.choice([0.0, 0.1, 1.0]))
    name = (lambda i: f"n{i}") if seed % 2 else (lambda i: i)
    partials = [1, 2.5, -0.5, "sin(x)", None, "3", 7]
    edges = [[name(u), name(v), rng.choice(partials)] for u, v in zip(src, dst, strict=True)]
    for edge in edges:
        if edge[2] is None and rng.random() < 0.5:
            del edge[2]  # [src, dst]
    rng.shuffle(edges)
    g = nx.DiGraph((e[0], e[1]) for e in edges)
    sources = [v for v in g if g.in_degree(v) == 0]
    sinks = [v for v in g if g.out_degree(v) == 0]
    inputs = sources[:max(1, len(sources) - 1)]  # a source left out: dead intermediates
    outputs = [v for v in sinks if v not in inputs][:max(1, len(sinks) - 1)]
    if seed % 3 == 0:
        inputs.append("isolated input")
    if seed % 4 == 0:
        outputs.append("constant output")
    declared = [name(n + 1)] + ([inputs[0]] if seed % 5 == 0 else [])
    return inputs, outputs, edges, declared


def by_add_edge(inputs: list, outputs: list, edges: list, declared: list) -> CompGraph:
    """The reference: a DiGraph built one add_edge at a time and validated as it is
    (the constructor's copy would list each vertex's predecessors by source instead)."""
    g = nx.DiGraph()
    g.add_nodes_from(declared)
    for edge in edges:
        g.add_edge(edge[0], edge[1], partial=edge[2] if len(edge) == 3 else None)
    return CompGraph._adopt(g, inputs, outputs, edge_order=[(e[0], e[1]) for e in edges])


def built(build, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = structure(build(*args))
        except GraphError as exc:
            result = f"GraphError: {exc}"
    return result, [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize("seed", range(40))
def test_from_edges_builds_what_add_edge_builds(seed):
    inputs, outputs, edges, declared = random_edge_list(seed)
    want = built(by_add_edge, inputs, outputs, edges, declared)
    assert built(lambda *a: CompGraph.from_edges(*a[:3], nodes=a[3]), inputs, outputs, edges, declared) == want
    # edges as a generator go the one-by-one way
    assert built(lambda *a: CompGraph.from_edges(a[0], a[1], iter(a[2]), nodes=a[3]),
                 inputs, outputs, edges, declared) == want
    # a graph that prunes warns as before
    if want[1]:
        assert want[1][0][0] is PrunedVerticesWarning


def test_the_digraph_is_built_on_first_use_only():
    g = CompGraph.from_json({"inputs": ["x"], "outputs": ["y"], "edges": [["x", "v", 2], ["v", "y", 0.5]],
                             "name": "small"})
    assert g._networkx is None
    assert find_order(g, "vertex", "markowitz", None, {}).order == ["v"]
    assert g.rank_adjacency() == ([set(), {0}, {1}], [{1}, {2}, set()])
    assert g.is_numeric and g.partial_array().tolist() == [2.0, 0.5]
    assert g._networkx is None  # loading, ordering and reading the partials need no NetworkX graph
    assert g.kind("v") == "intermediate"
    assert g._networkx is not None and g._g is g._networkx
    assert g.to_json() == {"inputs": ["x"], "outputs": ["y"], "edges": [["x", "v", 2.0], ["v", "y", 0.5]],
                           "name": "small"}
    assert g.digraph.nodes["x"] == {"kind": "input"} and g.digraph.edges["x", "v"] == {"partial": 2.0}


# ---------------------------------------------------------------------------- the first bad edge is named
BAD_EDGES = {  # an edge placed at #3, and what the error says about it there
    "duplicate": (["a", "b", 1.0], "duplicate edge ('a' → 'b') at edge #1 and #3"),
    "self-loop": (["c", "c", 1.0], "self-loop on 'c' (edge #3)"),
    "partial": (["a", "d", "2,5"], "edge ('a' → 'd') has a partial '2,5' that is neither"),
    "non-finite": (["a", "e", float("nan")], "edge ('a' → 'e') has a non-finite partial nan"),
    "shape": (["a"], "edge #3 is "),
    "id": ([1.5, "a", 1.0], "node id 1.5 in edge #3 is a float"),
    "boolean": (["a", "f", True], "edge ('a' → 'f') has a non-numeric partial True"),
}


@pytest.mark.parametrize("first", sorted(BAD_EDGES))
@pytest.mark.parametrize("second", sorted(BAD_EDGES))
def test_the_first_bad_edge_in_order_is_the_one_named(first, second):
    edges = [["x", "a", 1.0], ["a", "b", 1.0], ["b", "y", 1.0]]
    edges += [BAD_EDGES[first][0], ["a", "y", 1.0], BAD_EDGES[second][0], ["b", "z", 1.0]]
    for given in (edges, tuple(map(tuple, edges)), iter(edges)):  # column-wise twice, one by one
        with pytest.raises(GraphError) as error:
            CompGraph.from_edges(["x"], ["y"], given)
        assert BAD_EDGES[first][1] in str(error.value)


def test_numpy_integer_ids_and_tuples_read_like_plain_ones():
    edges = [(np.int64(0), 1, 2), (1, np.int32(2), 0.5)]
    g = CompGraph.from_edges([0], [2], edges)
    assert g.edges == ((0, 1), (1, 2)) and g.partial_array().tolist() == [2.0, 0.5]
    assert structure(g) == structure(CompGraph.from_edges([0], [2], [(0, 1, 2.0), [1, 2, 0.5]]))


# ---------------------------------------------------------------------------- the integer structure
@pytest.mark.parametrize("seed", range(20))
def test_rank_adjacency_and_markowitz_on_shuffled_graphs(seed):
    from jacacc.orders.heuristics import _coded_vertex_order, greedy_vertex_order

    inputs, outputs, edges, declared = random_edge_list(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrunedVerticesWarning)
        graphs = [CompGraph.from_edges(inputs, outputs, edges, nodes=declared),
                  by_add_edge(inputs, outputs, edges, declared)]
    for g in graphs:
        rank = g.rank
        preds, succs = g.rank_adjacency()
        assert preds == [{rank[u] for u in g.predecessors(v)} for v in g.topological_order]
        assert succs == [{rank[w] for w in g.successors(v)} for v in g.topological_order]
        assert g._intermediate_ranks() == [rank[v] for v in g.intermediates]
        for tie, sign in (("reverse", -1), ("forward", 1)):
            generic = greedy_vertex_order(g, lambda s, j: (s.markowitz(j), sign * s.rank[j]))  # noqa: B023
            assert _coded_vertex_order(g, tie) == generic


@pytest.mark.parametrize("build_first", [False, True])
def test_partials_read_before_and_after_the_digraph_is_built(build_first):
    edges = [["x", "v", "sin(x)"], ["x", "w", 1.0], ["w", "y", None], ["v", "y", 2]]
    g = CompGraph.from_edges(["x"], ["y"], edges)
    if build_first:
        assert g._g is g._networkx  # built now
    assert g.partials_kind == "mixed" and not g.is_numeric
    assert g._partials_in_order() == ["sin(x)", 1.0, None, 2.0]
    with pytest.raises(GraphError, match=r"2 edge\(s\) have non-numeric partials, e.g. \('x' → 'v'\) = 'sin\(x\)'"):
        g.partial_array()


@pytest.mark.parametrize("seed", range(30))
def test_cycles_and_misdirected_edges_are_refused_as_add_edge_graphs_are(seed):
    """The error path builds the DiGraph to name a cycle or the misdirected edges: the
    same message as for a DiGraph built one add_edge at a time."""
    inputs, outputs, edges, declared = random_edge_list(seed)
    rng = random.Random(seed)
    nodes = list(dict.fromkeys(x for e in edges for x in e[:2]))
    present = {(e[0], e[1]) for e in edges}
    for _ in range(rng.randint(1, 4)):  # a few random extra edges: cycles, edges into inputs, out of outputs
        u, v = rng.sample(nodes, 2)
        if (u, v) not in present:
            present.add((u, v))
            edges.insert(rng.randrange(len(edges) + 1), [u, v, 1.0])
    want = built(by_add_edge, inputs, outputs, edges, declared)
    assert built(lambda *a: CompGraph.from_edges(*a[:3], nodes=a[3]), inputs, outputs, edges, declared) == want


def test_markowitz_codes_too_large_for_int64_are_python_ints(monkeypatch):
    from jacacc.orders import heuristics
    from jacacc.problems.generators import random_dag

    graphs = [random_dag(3, 40, 3, max_preds=3, seed=seed) for seed in range(4)]
    want = [heuristics._coded_vertex_order(g, tie) for g in graphs for tie in ("reverse", "forward")]
    monkeypatch.setattr(heuristics, "_INT64_CODES", 0)  # every code "too large"
    assert [heuristics._coded_vertex_order(g, tie) for g in graphs for tie in ("reverse", "forward")] == want
