"""Paper 003's reconstructed figure graphs: validity, the statements of the text, Jacobians.

Every statement of the paper that a reconstruction relies on is checked here
from the graph by an independent computation (path enumeration, depth
levels, dominators, explicit factored evaluations with an operation counter,
vertex splitting written out here), never by reading the builder's edge list.

The paper draws dependence arrows (root → … → terminal); jacacc's edges
follow the data flow.  :func:`paper_view` turns a CompGraph back into the
paper's direction, and most checks below are phrased in it.
"""

from __future__ import annotations

import itertools
import math
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

import jacacc
from jacacc.graph import CompGraph, reference_jacobian
from jacacc.problems import base as registry
from jacacc.problems import paper003

DOC = Path(__file__).resolve().parents[2] / "docs" / "paper003_figures.md"
NAMES = sorted(paper003.paper003_graphs())
VERTEX_METHODS = jacacc.methods("vertex")


# ---------------------------------------------------------------------------------------- helpers
def paper_view(g: CompGraph) -> nx.DiGraph:
    """The graph in the paper's direction: arrow s → d (s depends on d) labelled ∂s/∂d."""
    pg = nx.DiGraph()
    pg.add_nodes_from(g.digraph.nodes)
    for u, v in g.edges:
        pg.add_edge(v, u, label=g.partial(u, v))
    pg.graph["roots"] = tuple(g.outputs)
    pg.graph["terminals"] = tuple(g.inputs)
    return pg


def lab(pg: nx.DiGraph, s, d) -> float:
    return pg.edges[s, d]["label"]


def intermediates(pg: nx.DiGraph) -> list:
    fixed = set(pg.graph["roots"]) | set(pg.graph["terminals"])
    return [n for n in pg.nodes if n not in fixed]


def depth_levels(pg: nx.DiGraph) -> dict:
    """Definition 3.4: roots on level 0, an intermediate on the length of its longest path
    from a root, every terminal on the last level."""
    level = {}
    for n in nx.topological_sort(pg):
        preds = list(pg.predecessors(n))
        level[n] = 1 + max(level[p] for p in preds) if preds else 0
    last = max(level.values())
    for t in pg.graph["terminals"]:
        level[t] = last
    return level


def cross_level_edges(pg: nx.DiGraph) -> dict:
    """Edges spanning more than one depth level, with the number of levels they cross."""
    level = depth_levels(pg)
    return {(s, d): level[d] - level[s] - 1 for s, d in pg.edges if level[d] - level[s] > 1}


def is_direct_simple_chain(pg: nx.DiGraph, path: list) -> bool:
    """Definition 3.2: at least one intermediate vertex, each with in- and out-degree 1."""
    inner = path[1:-1]
    return bool(inner) and all(pg.in_degree(n) == 1 and pg.out_degree(n) == 1 for n in inner)


def is_direct_simple_block(pg: nx.DiGraph, source, sink) -> bool:
    """Definition 3.3 with direct chains only: every out-edge of ``source`` is an edge to
    ``sink`` or starts a direct simple chain to ``sink``; at least two such out-edges; and every
    vertex strictly between them lies on one of those chains (nothing else enters or leaves)."""
    if pg.out_degree(source) < 2:
        return False
    inner = set()
    for first in pg.successors(source):
        if first == sink:
            continue
        path = [source, first]
        while pg.out_degree(path[-1]) == 1 and path[-1] != sink and pg.in_degree(path[-1]) == 1:
            path.append(next(iter(pg.successors(path[-1]))))
        if path[-1] != sink or not is_direct_simple_chain(pg, path):
            return False
        inner |= set(path[1:-1])
    between = nx.descendants(pg, source) & nx.ancestors(pg, sink)
    return between == inner


def relabelled(pg: nx.DiGraph) -> nx.DiGraph:
    """Node attribute ``fixed``: the name of a root or terminal, '' for an intermediate, so that
    isomorphism keeps roots and terminals in place and lets intermediates be renamed."""
    h = pg.copy()
    fixed = set(pg.graph["roots"]) | set(pg.graph["terminals"])
    for n in h.nodes:
        h.nodes[n]["fixed"] = n if n in fixed else ""
    return h


def same_figure(a: nx.DiGraph, b: nx.DiGraph) -> bool:
    """Isomorphic with equal labels, roots and terminals matched by name."""
    return nx.is_isomorphic(
        relabelled(a), relabelled(b),
        node_match=lambda x, y: x["fixed"] == y["fixed"],
        edge_match=lambda x, y: x["label"] == y["label"],
    )


def new_paper_graph(pg: nx.DiGraph) -> nx.DiGraph:
    out = nx.DiGraph()
    out.graph.update(pg.graph)
    return out


def unfold_from_root(pg: nx.DiGraph) -> nx.DiGraph:
    """Backward factorization carried to the end: one copy of each intermediate per path from the
    (single) root, the terminal kept as one vertex — every intermediate gets in-degree 1."""
    (root,), (terminal,) = pg.graph["roots"], pg.graph["terminals"]
    out = new_paper_graph(pg)
    stack = [(root,)]
    while stack:
        path = stack.pop()
        for d in pg.successors(path[-1]):
            target = terminal if d == terminal else path + (d,)
            out.add_edge(path if len(path) > 1 else root, target, label=lab(pg, path[-1], d))
            if d != terminal:
                stack.append(path + (d,))
    return out


def unfold_to_terminal(pg: nx.DiGraph) -> nx.DiGraph:
    """Forward factorization carried to the end: the mirror image of :func:`unfold_from_root`."""
    rev = pg.reverse(copy=True)
    rev.graph["roots"], rev.graph["terminals"] = pg.graph["terminals"], pg.graph["roots"]
    out = unfold_from_root(rev).reverse(copy=True)
    out.graph.update(pg.graph)
    return out


def list_all_paths(pg: nx.DiGraph) -> nx.DiGraph:
    """Fig. 4.1 (c)'s construction: one direct simple chain per root–terminal path."""
    out = new_paper_graph(pg)
    fixed = set(pg.graph["roots"]) | set(pg.graph["terminals"])
    for k, path in enumerate(all_root_terminal_paths(pg)):
        names = [n if n in fixed else (k, n) for n in path]
        for (s, d), (cs, cd) in zip(itertools.pairwise(path), itertools.pairwise(names), strict=True):
            out.add_edge(cs, cd, label=lab(pg, s, d))
    return out


def split_by_in_edges(pg: nx.DiGraph, vertices) -> nx.DiGraph:
    """Backward splitting "from behind" of vertices whose out-edges all go to the terminal: one
    copy per in-edge, each with its own copy of the out-edges."""
    out = pg.copy()
    for n in vertices:
        ins, outs = list(pg.in_edges(n)), list(pg.out_edges(n))
        for k, (s, _) in enumerate(ins[1:], start=1):
            copy = (n, k)
            out.remove_edge(s, n)
            out.add_edge(s, copy, label=lab(pg, s, n))
            for _, d in outs:
                out.add_edge(copy, d, label=lab(pg, n, d))
    return out


def split_by_out_edges(pg: nx.DiGraph, vertices) -> nx.DiGraph:
    """Forward splitting "from the head of an edge": the mirror image of :func:`split_by_in_edges`."""
    rev = pg.reverse(copy=True)
    out = split_by_in_edges(rev, vertices).reverse(copy=True)
    out.graph.update(pg.graph)
    return out


def all_root_terminal_paths(pg: nx.DiGraph) -> list[list]:
    return [p for r in pg.graph["roots"] for t in pg.graph["terminals"]
            for p in nx.all_simple_paths(pg, r, t)]


def jacobian_entry(g: CompGraph, root, terminal) -> float:
    return reference_jacobian(g)[g.outputs.index(root), g.inputs.index(terminal)]


class Ops:
    """Counts the fused multiply-adds of an explicit evaluation: a product costs one, a sum of
    products costs one per product (the addition fused into its multiplication)."""

    def __init__(self) -> None:
        self.count = 0

    def mul(self, *factors: float) -> float:
        self.count += len(factors) - 1
        return math.prod(factors)

    def fma(self, a: float, b: float, c: float) -> float:
        self.count += 1
        return a * b + c


def render(edges) -> str:
    return "  ".join(f"{s}→{d}:{p:g}" for s, d, p in edges)


# ---------------------------------------------------------------------------------------- all figures
def test_registered_problems_match_builders():
    assert sorted(registry.names("paper003")) == NAMES
    for name, graph in paper003.paper003_graphs().items():
        problem = registry.get(name)
        assert problem.kind == "graph" and "paper003" in problem.tags
        assert (problem.n_inputs, problem.n_outputs) == (len(graph.inputs), len(graph.outputs))
        assert problem.graph() == graph


@pytest.mark.parametrize("name", NAMES)
def test_graph_is_valid_numeric_and_unpruned(name):
    key = name.removeprefix("paper003_")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a PrunedVerticesWarning would fail here
        g = getattr(paper003, key)()
    edges = paper003.paper_edges(key)
    assert g.is_numeric and g.n_edges == len(edges)
    assert {(d, s) for s, d, _ in edges} == set(g.edges)
    pg = paper_view(g)
    for s, d, p in edges:
        assert lab(pg, s, d) == p
    # every edge lies on a root–terminal path (nothing would have been pruned)
    on_paths = {e for path in all_root_terminal_paths(pg) for e in itertools.pairwise(path)}
    assert on_paths == set(pg.edges)


@pytest.mark.parametrize("name", NAMES)
def test_original_figures_have_distinct_prime_labels(name):
    labels = [p for _, _, p in paper003.paper_edges(name)]
    derived = ("fig3_1b", "fig3_1c", "fig4_1c", "fig4_2", "fig5_2b")
    if not any(tag in name for tag in derived):
        primes = [p for p in range(2, 200) if all(p % q for q in range(2, p))]
        assert labels == primes[: len(labels)]


def _sampled(modes):
    """The modes, the preaccumulation variants (``preaccumulation``'s own halves and its chain
    rule, one code path with it) in the exhaustive tier only."""
    variants = ("forward_preaccumulation", "reverse_preaccumulation", "chain_preaccumulation")
    return [pytest.param(m, marks=pytest.mark.exhaustive) if m in variants else m for m in modes]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("method", _sampled(VERTEX_METHODS))
def test_every_vertex_method_reproduces_the_reference_jacobian(name, method):
    g = paper003.paper003_graphs()[name]
    plan = jacacc.optimize(g, mode="vertex", method=method, seed=0)
    np.testing.assert_allclose(plan.jacobian(), reference_jacobian(g), rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_docs_list_both_edge_directions(name):
    text = DOC.read_text(encoding="utf-8")
    edges = paper003.paper_edges(name)
    assert render(edges) in text, f"{name}: paper-direction edge list missing from {DOC.name}"
    assert render([(d, s, p) for s, d, p in edges]) in text, f"{name}: data-flow edge list missing"


# ---------------------------------------------------------------------------------------- Fig. 1.1
def test_fig1_1_adjacent_edge_paths_overlap_and_the_line_graph_represents_them():
    g = paper003.fig1_1()
    assert (len(g.inputs), len(g.intermediates), len(g.outputs)) == (1, 1, 2)
    dg = g.digraph
    # adjacent edge paths: an in-edge and an out-edge of one intermediate (data flow)
    adjacent = {((a, v), (v, b))
                for v in g.intermediates for a in dg.predecessors(v) for b in dg.successors(v)}
    assert len(adjacent) == 2
    shared = set.intersection(*({p[0], p[1]} for p in adjacent))
    assert len(shared) == 1  # both paths overlap on one edge: eliminating it eliminates both
    # Fig. 1.1 (b): in the line graph each adjacent edge path is exactly one edge
    assert set(nx.line_graph(dg).edges) == adjacent
    # several root–terminal pairs to list (§5)
    pairs = {(p[0], p[-1]) for p in all_root_terminal_paths(paper_view(g))}
    assert len(pairs) == 2


# ---------------------------------------------------------------------------------------- Fig. 3.1
def test_fig3_1_cross_level_edge_and_its_segmentations():
    a, b, c = paper003.fig3_1a(), paper003.fig3_1b(), paper003.fig3_1c()
    pa = paper_view(a)
    assert cross_level_edges(pa) == {("f", "x"): 1}
    for seg, new in ((b, "f'"), (c, "x'")):
        ps = paper_view(seg)
        assert cross_level_edges(ps) == {}
        assert depth_levels(ps)[new] == 1  # fills the crossed level
        # the cross-level edge became a direct simple chain through the new vertex, one unit label
        assert is_direct_simple_chain(ps, ["f", new, "x"])
        assert sorted([lab(ps, "f", new), lab(ps, new, "x")]) == [1.0, lab(pa, "f", "x")]
        np.testing.assert_array_equal(reference_jacobian(seg), reference_jacobian(a))
    # the derived vertex: a copy of the tail in (b), of the head in (c)
    assert lab(paper_view(b), "f", "f'") == 1.0 and lab(paper_view(c), "x'", "x") == 1.0


# ---------------------------------------------------------------------------------------- Fig. 4.1 (a), (c)
def test_fig4_1a_is_two_simple_blocks_in_series():
    g = paper003.fig4_1a()
    assert (len(g.inputs), len(g.intermediates), len(g.outputs)) == (1, 5, 1)
    pg = paper_view(g)
    (f,), (x,) = pg.graph["roots"], pg.graph["terminals"]
    # the vertex joining the blocks: the only articulation point, dominating the root from the
    # terminal (data flow) and post-dominating the terminal from the root
    (cut,) = nx.articulation_points(pg.to_undirected())
    dominated_by = nx.immediate_dominators(g.digraph, x)
    node, chain = f, []
    while node != x:
        node = dominated_by[node]
        chain.append(node)
    assert chain == [cut, x]
    assert nx.immediate_dominators(pg, f)[x] == cut
    # the two sides are simple blocks (direct), B(f, cut) and B(cut, x)
    assert is_direct_simple_block(pg, f, cut) and is_direct_simple_block(pg, cut, x)
    components = sorted(sorted(c) for c in nx.biconnected_components(pg.to_undirected()))
    assert len(components) == 2 and all(cut in c for c in components)
    # "the in-degree of [c] is [1]" when the simple block above it is treated as an edge
    assert pg.in_degree(cut) == 2
    contracted = pg.copy()
    contracted.remove_nodes_from(nx.descendants(pg, f) & nx.ancestors(pg, cut))
    contracted.add_edge(f, cut)
    assert contracted.in_degree(cut) == 1


def test_fig4_1a_listing_all_paths_costs_12_fma():
    pg = paper_view(paper003.fig4_1a())
    paths = all_root_terminal_paths(pg)
    assert len(paths) == 4
    assert sum(len(p) - 2 for p in paths) == 12  # (edges per path − 1) multiplications each
    # Eq. 4.2 evaluated term by term
    ops = Ops()
    total = 0.0
    for k, p in enumerate(paths):
        labels = [lab(pg, s, d) for s, d in itertools.pairwise(p)]
        if k == 0:
            total = ops.mul(*labels)
        else:
            total = ops.fma(ops.mul(*labels[:-1]), labels[-1], total)
    assert ops.count == 12
    assert total == jacobian_entry(paper003.fig4_1a(), "f", "x")


def test_fig4_1a_factored_form_costs_5_fma():
    g = paper003.fig4_1a()
    pg = paper_view(g)
    f, x, cut = "f", "x", next(iter(nx.articulation_points(pg.to_undirected())))

    def block(source, sink, ops):
        """Σ over the block's chains of the chain products, fused: one op per edge after the first."""
        value = None
        for first in pg.successors(source):
            (last,) = pg.successors(first)
            assert last == sink
            value = ops.mul(lab(pg, source, first), lab(pg, first, sink)) if value is None \
                else ops.fma(lab(pg, source, first), lab(pg, first, sink), value)
        return value

    ops = Ops()
    value = ops.mul(block(f, cut, ops), block(cut, x, ops))  # Eq. 4.1
    assert ops.count == 5
    assert value == jacobian_entry(g, f, x)
    # vertex elimination reaches Eq. 4.1's count; eliminating the joint first ("splits it into
    # 4 vertices") costs more
    assert jacacc.optimize(g, method="markowitz").mults == 5
    assert min(jacacc.optimize(g, method=list(o)).mults for o in itertools.permutations(g.intermediates)) == 5
    others = [v for v in g.intermediates if v != cut]
    assert len(g.predecessors(cut)) * len(g.successors(cut)) == 4
    assert jacacc.optimize(g, method=[cut, *others]).mults > 5


def test_fig4_1c_lists_all_paths_of_fig4_1a():
    a, c = paper003.fig4_1a(), paper003.fig4_1c()
    pc = paper_view(c)
    assert same_figure(pc, list_all_paths(paper_view(a)))
    # a direct simple block from the root to the terminal
    assert is_direct_simple_block(pc, "f", "x")
    np.testing.assert_array_equal(reference_jacobian(c), reference_jacobian(a))
    for method in VERTEX_METHODS:
        assert jacacc.optimize(c, method=method, seed=0).mults == 12


# ---------------------------------------------------------------------------------------- Fig. 4.1 (b), 4.2
def test_fig4_1b_is_a_complex_block():
    g = paper003.fig4_1b()
    assert (len(g.inputs), len(g.intermediates), len(g.outputs)) == (1, 5, 1)
    pg = paper_view(g)
    # a block: two paths from f to x sharing no intermediate vertex
    assert nx.node_connectivity(pg, "f", "x") >= 2
    # not simple: no intermediate has in- and out-degree 1, so there is no chain at all
    assert not any(pg.in_degree(n) == 1 and pg.out_degree(n) == 1 for n in intermediates(pg))
    assert not is_direct_simple_block(pg, "f", "x")
    # the predecessors of the sink both have in-degree 2
    preds = sorted(pg.predecessors("x"))
    assert len(preds) == 2 and all(pg.in_degree(p) == 2 for p in preds)


def test_fig4_2_backward_factorization():
    pg = paper_view(paper003.fig4_1b())
    preds = list(pg.predecessors("x"))
    step1 = split_by_in_edges(pg, preds)
    assert same_figure(paper_view(paper003.fig4_2a()), step1)
    # now a vertex of in-degree 2 heads a simple block to the sink: it is split like an edge
    heads = [n for n in intermediates(step1)
             if step1.in_degree(n) == 2 and is_direct_simple_block(step1, n, "x")]
    assert len(heads) == 1
    pb = paper_view(paper003.fig4_2b())
    assert same_figure(pb, unfold_from_root(pg))
    assert all(pb.in_degree(n) == 1 for n in intermediates(pb))  # backward factorization is complete


def test_fig4_2_forward_factorization():
    pg = paper_view(paper003.fig4_1b())
    succs = list(pg.successors("f"))
    step1 = split_by_out_edges(pg, succs)
    assert same_figure(paper_view(paper003.fig4_2c()), step1)
    rev = step1.reverse(copy=True)
    tails = [n for n in intermediates(step1)
             if step1.out_degree(n) == 2 and is_direct_simple_block(rev, n, "f")]
    assert len(tails) == 1
    pd = paper_view(paper003.fig4_2d())
    assert same_figure(pd, unfold_to_terminal(pg))
    assert all(pd.out_degree(n) == 1 for n in intermediates(pd))  # forward factorization is complete


@pytest.mark.parametrize("key", ["fig4_2a", "fig4_2b", "fig4_2c", "fig4_2d"])
def test_fig4_2_factorizations_keep_the_jacobian(key):
    np.testing.assert_array_equal(reference_jacobian(getattr(paper003, key)()),
                                  reference_jacobian(paper003.fig4_1b()))


def test_fig4_1b_algebraic_forms_eq_4_3_to_4_5():
    g = paper003.fig4_1b()
    pg = paper_view(g)
    (v,) = [n for n in intermediates(pg) if pg.in_degree(n) == 2 and pg.out_degree(n) == 2]
    p, q = sorted(pg.predecessors("x"))
    a, b = sorted(pg.successors("f"))
    (ap,) = set(pg.successors(a)) - {v}  # a → p or a → q: the cross-level arrow
    (bq,) = set(pg.successors(b)) - {v}
    L = {e: lab(pg, *e) for e in pg.edges}
    J = jacobian_entry(g, "f", "x")
    # Eq. 4.3 (backward result, the block's value written twice)
    r = L[v, p] * L[p, "x"] + L[v, q] * L[q, "x"]
    eq43 = (L["f", a] * (L[a, v] * r + L[a, ap] * L[ap, "x"])
            + L["f", b] * (L[b, v] * r + L[b, bq] * L[bq, "x"]))
    assert eq43 == J
    # Eq. 4.5: the block as one reference variable r, computed once
    ops = Ops()
    r = ops.fma(L[v, q], L[q, "x"], ops.mul(L[v, p], L[p, "x"]))
    left = ops.fma(L[a, v], r, ops.mul(L[a, ap], L[ap, "x"]))
    right = ops.fma(L[b, v], r, ops.mul(L[b, bq], L[bq, "x"]))
    assert ops.fma(L["f", b], right, ops.mul(L["f", a], left)) == J
    eq45_cost = ops.count
    # Eq. 4.4 (forward result), its repeated block B(f, v) as one reference variable s:
    # Σ_z (s v_z + Σ_y f_y y_z) z_x over the sink's predecessors z
    ops = Ops()
    s = ops.fma(L["f", b], L[b, v], ops.mul(L["f", a], L[a, v]))
    total = None
    for z in (p, q):
        coefficient = ops.mul(s, L[v, z])
        for y in (a, b):
            if pg.has_edge(y, z):
                coefficient = ops.fma(L["f", y], L[y, z], coefficient)
        total = ops.mul(coefficient, L[z, "x"]) if total is None else ops.fma(coefficient, L[z, "x"], total)
    assert total == J
    # both reference-variable forms cost what the best vertex elimination costs
    best = min(jacacc.optimize(g, method=list(o)).mults for o in itertools.permutations(g.intermediates))
    assert eq45_cost == ops.count == best == 8


def test_fig4_1b_local_jacobians_eq_4_6():
    """After segmenting the cross-level edges, J = J1 J2 J3 J4 over the depth levels."""
    g = paper003.fig4_1b()
    pg = paper_view(g)
    crossing = cross_level_edges(pg)
    assert len(crossing) == 2 and set(crossing.values()) == {1}
    seg = pg.copy()
    for s, d in crossing:
        seg.remove_edge(s, d)
        seg.add_edge(s, (s, "seg"), label=1.0)
        seg.add_edge((s, "seg"), d, label=lab(pg, s, d))
    level = depth_levels(seg)
    assert cross_level_edges(seg) == {}
    layers = [sorted((n for n in seg if level[n] == k), key=str) for k in range(max(level.values()) + 1)]
    assert [len(layer) for layer in layers] == [1, 2, 3, 2, 1]
    factors = [np.array([[lab(seg, s, d) if seg.has_edge(s, d) else 0.0 for d in lower] for s in upper])
               for upper, lower in itertools.pairwise(layers)]
    assert np.linalg.multi_dot(factors).item() == jacobian_entry(g, "f", "x")


# ---------------------------------------------------------------------------------------- Fig. 4.4
def chain_cost(factors: list[np.ndarray], order: str) -> int:
    """Structural multiplications of a sparse matrix chain, left-to-right or right-to-left."""
    mats = [f != 0 for f in factors]
    cost = 0
    while len(mats) > 1:
        i = 0 if order == "left" else len(mats) - 2
        a, b = mats[i], mats[i + 1]
        cost += int(sum(a[:, k].sum() * b[k, :].sum() for k in range(a.shape[1])))
        mats[i:i + 2] = [(a.astype(int) @ b.astype(int)) != 0]
    return cost


def level_factors(pg: nx.DiGraph, nodes) -> list[np.ndarray]:
    level = depth_levels(pg)
    layers = [sorted((n for n in nodes if level[n] == k), key=str) for k in range(max(level.values()) + 1)]
    return [np.array([[1.0 if pg.has_edge(s, d) else 0.0 for d in lower] for s in upper])
            for upper, lower in itertools.pairwise(layers)]


def test_fig4_4a_subgraphs_prefer_opposite_orders():
    g = paper003.fig4_4a()
    assert (len(g.inputs), len(g.intermediates), len(g.outputs)) == (2, 6, 2)
    pg = paper_view(g)
    components = list(nx.weakly_connected_components(pg))
    assert len(components) == 2  # unrelated subgraphs
    level = depth_levels(pg)
    spans = {frozenset(level[n] for n in c) for c in components}
    assert spans == {frozenset({0, 1, 2, 3})}  # spanning the same depth levels
    assert cross_level_edges(pg) == {}
    costs = []
    for c in components:
        factors = level_factors(pg, c)
        costs.append((chain_cost(factors, "left"), chain_cost(factors, "right")))
    assert sorted(costs) == [(3, 4), (4, 3)]  # conflicting optimal orders
    whole = level_factors(pg, set(pg.nodes))
    assert chain_cost(whole, "left") == chain_cost(whole, "right") == 7
    assert sum(min(c) for c in costs) == 6
    assert jacacc.optimize(g, method="markowitz").mults == 6
    J = reference_jacobian(g)
    assert np.count_nonzero(J) == 2  # each root depends on one terminal only


# ---------------------------------------------------------------------------------------- Fig. 5.1
def test_fig5_1a_one_pair_is_an_indirect_simple_chain_shared_with_other_pairs():
    g = paper003.fig5_1a()
    assert (len(g.inputs), len(g.intermediates), len(g.outputs)) == (2, 2, 2)
    pg = paper_view(g)
    r, t = "r1", "t1"
    relevant = (nx.descendants(pg, r) | {r}) & (nx.ancestors(pg, t) | {t})
    sub = pg.subgraph(relevant).copy()
    # inside it: a simple block B(u, t) (a direct edge and a direct simple chain) …
    blocks = [n for n in relevant - {r, t} if is_direct_simple_block(sub, n, t)]
    assert len(blocks) == 1
    (u,) = blocks
    inner = nx.descendants(sub, u) - {t}
    # … and replacing it by a substitute edge leaves a direct simple chain r → u ⇒ t
    reduced = sub.copy()
    reduced.remove_nodes_from(inner)
    reduced.remove_edge(u, t)
    reduced.add_edge(u, t)
    assert list(nx.all_simple_paths(reduced, r, t)) == [[r, u, t]]
    assert is_direct_simple_chain(reduced, [r, u, t])
    assert not is_direct_simple_chain(sub, [r, u, t])  # indirect: one substitute edge
    # its algebraic form r_u (u_t + Σ chains)
    (a,) = inner
    value = lab(pg, r, u) * (lab(pg, u, t) + lab(pg, u, a) * lab(pg, a, t))
    assert value == jacobian_entry(g, r, t)
    # it "cannot be eliminated directly": its vertices carry paths of other root–terminal pairs
    for n in relevant - {r, t}:
        others = {(p[0], p[-1]) for p in all_root_terminal_paths(pg) if n in p} - {(r, t)}
        assert others
    # Fig. 5.1 (b): in the line graph, the chain's edges also have neighbours outside it
    line = nx.line_graph(pg)
    chain_edges = set(sub.edges)
    assert any(set(line.predecessors(e)) - chain_edges or set(line.successors(e)) - chain_edges
               for e in chain_edges)


# ---------------------------------------------------------------------------------------- Fig. 5.2
def replace_simple_chains(pg: nx.DiGraph) -> nx.DiGraph:
    """Step 1: every maximal direct simple chain becomes one reference edge (label: its product)."""
    out = pg.copy()
    inner = {n for n in intermediates(pg) if pg.in_degree(n) == 1 and pg.out_degree(n) == 1}
    for s, d in list(pg.edges):
        if s in inner or d not in inner:
            continue
        path = [s, d]
        while path[-1] in inner:
            path.append(next(iter(pg.successors(path[-1]))))
        value = math.prod(lab(pg, u, w) for u, w in itertools.pairwise(path))
        out.remove_nodes_from(path[1:-1])
        assert not out.has_edge(path[0], path[-1])
        out.add_edge(path[0], path[-1], label=value)
    return out


def r_degree(pg: nx.DiGraph, n) -> int:
    return sum(1 for r in pg.graph["roots"] if r == n or nx.has_path(pg, r, n))


def t_degree(pg: nx.DiGraph, n) -> int:
    return sum(1 for t in pg.graph["terminals"] if t == n or nx.has_path(pg, n, t))


def test_fig5_2a_has_simple_chains_that_become_reference_edges():
    a, b = paper003.fig5_2a(), paper003.fig5_2b()
    assert (len(a.inputs), len(a.intermediates), len(a.outputs)) == (2, 3, 2)
    pa = paper_view(a)
    chains = [n for n in intermediates(pa) if pa.in_degree(n) == 1 and pa.out_degree(n) == 1]
    assert chains  # it has simple chains
    reduced = replace_simple_chains(pa)
    assert same_figure(paper_view(b), reduced)
    np.testing.assert_array_equal(reference_jacobian(b), reference_jacobian(a))


def test_fig5_2b_step_2_finds_v_and_w_joined_by_an_edge():
    pb = paper_view(paper003.fig5_2b())
    level = depth_levels(pb)
    inner = intermediates(pb)
    best_r = max(r_degree(pb, n) for n in inner)
    assert best_r == 2
    v = min((n for n in inner if r_degree(pb, n) == best_r), key=lambda n: level[n])
    assert [n for n in inner if r_degree(pb, n) == best_r and level[n] == level[v]] == [v]  # unique
    below = nx.descendants(pb, v)
    best_t = max(t_degree(pb, n) for n in below)
    assert best_t == 2
    w = max((n for n in below if t_degree(pb, n) == best_t), key=lambda n: level[n])
    assert pb.has_edge(v, w)  # "the edge between v and w"
    # the roots' cross-level edges that step 4 separates: two different spans
    crossing = {e: k for e, k in cross_level_edges(pb).items() if e[0] in pb.graph["roots"]}
    assert len(set(crossing.values())) == 2
