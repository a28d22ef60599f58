"""Certified vertex orders: every bound and reduction of jacacc.bounds against brute force,
the certificate's round trip, and the checker catching every kind of flaw.

The oracle is the exhaustive subset DP (:func:`jacacc.orders.exhaustive.optimum`),
which shares no code with the bounds, the reductions or the checker.
"""

from __future__ import annotations

import dataclasses
import itertools
import random

import networkx as nx
import pytest
from dags import random_lcgs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jacacc import CompGraph
from jacacc.bounds import (
    Structure,
    block_lower_bound,
    block_partition_bound,
    connectivity_lower_bound,
    connectivity_terms,
    disjoint_paths,
    safe_prefix,
    structural_lower_bound,
    twin_classes,
)
from jacacc.eliminate import count_ops
from jacacc.orders.certify import (
    Certificate,
    CertificateError,
    _eliminate_all,
    _unit_flow,
    certify,
    check_certificate,
)
from jacacc.orders.exhaustive import optimum
from jacacc.problems import generators

pytest.importorskip("ortools")

ORACLE = settings(max_examples=40, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def twin_lcgs(draw, max_intermediates: int = 6, max_copies: int = 3) -> CompGraph:
    """A random LCG with false twins: copies of some intermediates (same predecessors and successors)."""
    graph = draw(random_lcgs(max_intermediates=max_intermediates, int_ids=False))
    g = graph.to_networkx()
    mids = list(graph.intermediates)
    if mids:
        for k in range(draw(st.integers(1, max_copies))):
            v = mids[draw(st.integers(0, len(mids) - 1))]
            twin = f"{v}_t{k}"
            g.add_edges_from((u, twin, {"partial": 1.0}) for u in graph.predecessors(v))
            g.add_edges_from((twin, w, {"partial": 1.0}) for w in graph.successors(v))
    return CompGraph(g, graph.inputs, graph.outputs)


def nx_flow(preds: dict, succs: dict, sources: set, vertex, side: str) -> int:
    """Most paths from ``sources`` to ``vertex`` sharing only ``vertex``, by NetworkX's maximum flow."""
    net = nx.DiGraph()
    step = preds if side == "in" else succs
    for u in step:
        net.add_edge(("i", u), ("o", u), capacity=1)
        for w in step[u]:
            net.add_edge(("o", w), ("i", u), capacity=len(step))
    for x in sources:
        net.add_edge("s", ("i", x), capacity=1)
    return nx.maximum_flow_value(net, "s", ("i", vertex))


def best(graph: CompGraph) -> int:
    return optimum(graph, "vertex").cost if graph.intermediates else 0


def cost_of(graph: CompGraph, order) -> int:
    state = Structure.from_graph(graph)
    return sum(state.eliminate(v) for v in order)


def as_graph(state: Structure) -> CompGraph:
    return CompGraph.from_edges(state.inputs, state.outputs, [(u, w) for u, out in state.succs.items() for w in out])


# ============================================================================ the connectivity bound
@ORACLE
@given(graph=random_lcgs(max_intermediates=8))
def test_connectivity_bound_is_below_the_optimum_and_its_paths_are_witnesses(graph):
    bound = connectivity_lower_bound(graph)
    assert len(graph.intermediates) <= bound <= best(graph)
    succs = {v: set(graph.successors(v)) for v in graph.digraph}
    preds = {v: set(graph.predecessors(v)) for v in graph.digraph}
    for term in connectivity_terms(graph):
        v = term.vertex
        for paths, ends in ((term.in_paths, set(graph.inputs)), (term.out_paths, set(graph.outputs))):
            inner = [u for p in paths for u in p if u != v]
            assert len(inner) == len(set(inner))  # disjoint but for v
            for p in paths:
                assert all(w in succs[u] for u, w in itertools.pairwise(p))
                assert (p[0] if paths is term.in_paths else p[-1]) in ends
        # maximum: NetworkX's flow and the checker's own find no more paths
        for side, ends, kappa in (("in", set(graph.inputs), term.kappa_in), ("out", set(graph.outputs), term.kappa_out)):
            assert kappa == nx_flow(preds, succs, ends, v, side) == _unit_flow(preds, succs, ends, v, set(), side)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_lcgs(max_intermediates=6))
def test_each_term_is_the_least_its_vertex_can_cost(graph):
    """κ(X, v)·κ(v, Y) = min over every set E of other intermediates of v's cost after E."""
    mids = list(graph.intermediates)
    start = Structure.from_graph(graph)
    for term in connectivity_terms(graph):
        others = [u for u in mids if u != term.vertex]
        least = None
        for r in range(len(others) + 1):
            for eliminated in itertools.combinations(others, r):
                state = start.copy()
                for u in eliminated:
                    state.eliminate(u)
                here = state.eliminate(term.vertex)
                least = here if least is None else min(least, here)
        assert least == term.value


def test_inputs_count_as_cut_vertices():
    # x0 → a → v and x0 → v: both paths start at x0, so only one disjoint path; P(v) = {x0} is possible
    g = CompGraph.from_edges(["x0"], ["y"], [("x0", "a"), ("a", "v"), ("x0", "v"), ("v", "y"), ("a", "y")])
    assert len(disjoint_paths(g, "v")) == 1
    assert best(g) >= connectivity_lower_bound(g)


# ============================================================================ safe prefix
@ORACLE
@given(graph=random_lcgs(max_intermediates=8), seed=st.integers(0, 10**6))
def test_safe_prefix_keeps_the_optimum_and_never_costs_more(graph, seed):
    steps, left = safe_prefix(graph)
    prefix = [s.vertex for s in steps]
    assert sum(s.cost for s in steps) + best(as_graph(left)) == best(graph)
    assert cost_of(graph, prefix + list(left.intermediates)) >= best(graph)
    # the theorem's stronger form: moving the prefix to the front of any order costs no more
    rng = random.Random(seed)
    for _ in range(5):
        order = list(graph.intermediates)
        rng.shuffle(order)
        moved = prefix + [v for v in order if v not in set(prefix)]
        assert cost_of(graph, moved) <= cost_of(graph, order)
    # the bound is unchanged by the reduction
    assert sum(s.cost for s in steps) + connectivity_lower_bound(left) == connectivity_lower_bound(graph)


# ============================================================================ false twins
def restricted_optimum(graph: CompGraph, classes: list[list]) -> int:
    """The cheapest order among those eliminating each class consecutively (brute force)."""
    mids = list(graph.intermediates)
    owner = {v: i for i, c in enumerate(classes) for v in c}
    memo: dict = {}

    def go(done: frozenset, state: Structure) -> int:
        if len(done) == len(mids):
            return 0
        if done in memo:
            return memo[done]
        open_class = [i for i, c in enumerate(classes) if 0 < len(done & set(c)) < len(c)]
        options = [v for v in mids if v not in done and (not open_class or owner.get(v) == open_class[0])]
        result = None
        for v in options:
            nxt = state.copy()
            here = nxt.eliminate(v)
            total = here + go(done | {v}, nxt)
            result = total if result is None else min(result, total)
        memo[done] = result
        return result

    return go(frozenset(), Structure.from_graph(graph))


@ORACLE
@given(graph=twin_lcgs(), seed=st.integers(0, 10**6))
def test_twins_consecutive_keep_the_optimum(graph, seed):
    from jacacc.orders.cpsat import _twins_together

    classes = twin_classes(graph)
    assert restricted_optimum(graph, classes) == best(graph)
    rng = random.Random(seed)
    order = list(graph.intermediates)
    rng.shuffle(order)
    together = _twins_together(graph, order)
    assert cost_of(graph, together) <= cost_of(graph, order)
    position = {v: i for i, v in enumerate(together)}
    for c in classes:
        spots = sorted(position[v] for v in c)
        assert spots == list(range(spots[0], spots[0] + len(c)))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=twin_lcgs(max_intermediates=5))
def test_cpsat_with_twins_and_cuts_matches_the_oracle(graph):
    from jacacc.orders.cpsat import cpsat_vertex

    result = cpsat_vertex(graph, workers=1, time_limit=20, hint_time=0)
    assert result.optimal is True and result.search.objective == best(graph)
    assert count_ops(graph, result.order).mults == best(graph)


# ============================================================================ block bounds
@ORACLE
@given(graph=random_lcgs(max_intermediates=8), seed=st.integers(0, 10**6))
def test_block_bounds_are_valid_and_exact_on_everything(graph, seed):
    mids = list(graph.intermediates)
    opt = best(graph)
    assert block_lower_bound(graph, mids) == opt
    rng = random.Random(seed)
    rng.shuffle(mids)
    cut = rng.randint(0, len(mids))
    blocks = [mids[:cut], mids[cut:]]
    assert sum(block_lower_bound(graph, b) for b in blocks) <= opt
    # a block bounds its own members' cost in every order: the optimal order too
    order = list(optimum(graph, "vertex").order) if mids else []
    state = Structure.from_graph(graph)
    price = {v: state.eliminate(v) for v in order}
    for b in blocks:
        assert block_lower_bound(graph, b) <= sum(price[v] for v in b)
    total, parts = block_partition_bound(graph, 3)
    assert connectivity_lower_bound(graph) <= total <= opt
    assert sorted(v for b, _ in parts for v in b) == sorted(graph.intermediates)


# ============================================================================ certificates
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_lcgs(max_intermediates=8))
def test_certify_matches_the_oracle_and_checks(graph):
    cert = certify(graph, time_limit=10, hint_time=0)
    opt = best(graph)
    assert cert.cost == opt == count_ops(graph, list(cert.order)).mults
    assert cert.status == "optimal" and cert.lower_bound == opt
    assert cert.certified_bound <= opt
    check_certificate(graph, cert)
    again = Certificate.from_json(cert.to_json())
    assert again == cert
    check_certificate(graph, again)


def test_certificate_of_a_zoo_graph_prints_and_round_trips():
    from jacacc import problems

    graph = problems.get("graphax_HumanHeartDipole").graph()
    cert = certify(graph, time_limit=10)
    assert (cert.cost, cert.lower_bound, cert.status) == (148, 148, "optimal")
    check_certificate(graph, Certificate.from_json(cert.to_json()))
    text = str(cert)
    assert "optimal" in text and "148" in text and "Menger terms" in text


def test_a_gap_is_reported_honestly():
    graph = generators.random_dag(3, 24, 3, seed=3)
    cert = certify(graph, time_limit=1, hint_time=0.2, block_sizes=(4,))
    check_certificate(graph, cert)
    assert cert.lower_bound <= cert.cost
    if cert.status == "gap":
        assert cert.lower_bound < cert.cost and f"gap {cert.gap}" in str(cert)


def tamper_cases(cert: Certificate):
    term = cert.terms[0]
    yield "cost", dataclasses.replace(cert, cost=cert.cost + 1)
    yield "permutation", dataclasses.replace(cert, order=cert.order[:-1] + cert.order[:1])
    yield "shares a vertex", dataclasses.replace(cert, terms=(dataclasses.replace(term, in_paths=term.in_paths * 2),)
                                       + cert.terms[1:])
    yield "do not name every", dataclasses.replace(cert, terms=cert.terms[1:])
    yield "certified bound", dataclasses.replace(cert, certified_bound=cert.certified_bound + 1)
    yield "status", dataclasses.replace(cert, status="gap")
    yield "proof", dataclasses.replace(cert, proof="magic")
    if cert.blocks:
        (block, value), *rest = cert.blocks
        yield "bounds its cost", dataclasses.replace(cert, blocks=((block, value + 1), *rest))
        yield "disjoint", dataclasses.replace(cert, blocks=cert.blocks + cert.blocks[:1])
    if cert.prefix:
        step, *rest = cert.prefix
        yield "prefix step", dataclasses.replace(cert, prefix=(dataclasses.replace(step, cost=step.cost + 1), *rest))
        yield "prefix step", dataclasses.replace(cert, prefix=(dataclasses.replace(step, paths=()), *rest))


@pytest.mark.parametrize("seed", range(3))
def test_the_checker_catches_every_flaw(seed):
    graph = generators.random_dag(2, 7, 2, seed=seed)
    cert = certify(graph, time_limit=5, hint_time=0)
    check_certificate(graph, cert)
    for what, bad in tamper_cases(cert):
        with pytest.raises(CertificateError, match=what):
            check_certificate(graph, bad)


def test_the_checker_refuses_a_wrong_path_and_a_bad_json():
    g = CompGraph.from_edges(["x0", "x1"], ["y"], [("x0", "a"), ("x1", "a"), ("a", "b"), ("x1", "b"),
                                                    ("b", "y")])
    cert = certify(g, time_limit=2)
    term = next(t for t in cert.terms if t.vertex == "b")
    forged = dataclasses.replace(term, in_paths=(("x0", "b"), ("x1", "b")))  # x0 → b is no edge
    bad = dataclasses.replace(cert, terms=tuple(forged if t.vertex == "b" else t for t in cert.terms))
    with pytest.raises(CertificateError, match="not an edge"):
        check_certificate(g, bad)
    with pytest.raises(CertificateError, match="malformed"):
        Certificate.from_json("{}")


def test_replay_agrees_with_the_engine():
    graph = generators.random_dag(3, 12, 3, seed=8)
    order = list(reversed(graph.intermediates))
    preds = {v: set(graph.predecessors(v)) for v in graph.digraph}
    succs = {v: set(graph.successors(v)) for v in graph.digraph}
    assert _eliminate_all(preds, succs, order) == count_ops(graph, order).mults


@ORACLE
@given(graph=random_lcgs(max_intermediates=8))
def test_both_older_and_newer_bounds_hold(graph):
    opt = best(graph)
    assert structural_lower_bound(graph) <= opt and connectivity_lower_bound(graph) <= opt
