"""jacacc.structure: paper 003's chains, blocks, depth levels, segmentation, r-/t-degrees."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jacacc.errors import GraphError
from jacacc.graph import CompGraph, reference_jacobian
from jacacc.problems import paper003
from jacacc.structure import (
    Block,
    Chain,
    blocks,
    complex_blocks,
    cross_level_edges,
    depth_levels,
    nested_structure,
    r_degrees,
    segment_cross_level_edges,
    simple_blocks,
    simple_chains,
    t_degrees,
)
from tests.dags import random_lcgs

FAST = settings(max_examples=40, deadline=None)


def edges(*pairs: str) -> list[tuple[str, str, float]]:
    return [(p[0], p[1], 1.0 + k) for k, p in enumerate(pairs)]


# ---------------------------------------------------------------------------------------- depth levels
def test_depth_levels_from_either_side():
    g = CompGraph.from_edges(["x"], ["y"], edges("xa", "ab", "by", "xc", "cy"))
    assert depth_levels(g) == {"x": 0, "a": 1, "b": 2, "c": 1, "y": 3}
    # the paper's Def. 3.4 counts from the roots (our outputs): c sits next to the root
    assert depth_levels(g, side="outputs") == {"x": 0, "a": 1, "b": 2, "c": 2, "y": 3}
    with pytest.raises(GraphError, match="side must be"):
        depth_levels(g, side="middle")


def test_plot_reexports_depth_levels():
    from jacacc import plot

    assert plot.depth_levels is depth_levels


@FAST
@given(random_lcgs(), st.sampled_from(["inputs", "outputs"]))
def test_levels_increase_along_every_edge(g, side):
    level = depth_levels(g, side=side)
    assert all(level[u] < level[v] for u, v in g.edges)
    assert {level[x] for x in g.inputs} <= {0}
    assert len({level[y] for y in g.outputs}) == 1


# ---------------------------------------------------------------------------------------- segmentation
def test_cross_level_edge_of_fig3_1a():
    assert cross_level_edges(paper003.fig3_1a()) == [("x", "f")]
    assert cross_level_edges(paper003.fig4_1a()) == []


@pytest.mark.parametrize(("copy", "figure"), [("target", paper003.fig3_1b), ("source", paper003.fig3_1c)])
def test_segmentation_reproduces_fig3_1(copy, figure):
    seg, want = segment_cross_level_edges(paper003.fig3_1a(), copy=copy), figure()
    assert sorted(seg.edges) == sorted(want.edges)
    assert all(seg.partial(u, v) == want.partial(u, v) for u, v in want.edges)


@FAST
@given(random_lcgs(), st.sampled_from(["source", "target"]))
def test_segmentation_keeps_the_jacobian_and_leaves_no_cross_level_edge(g, copy):
    seg = segment_cross_level_edges(g, copy=copy)
    assert cross_level_edges(seg) == []
    np.testing.assert_allclose(reference_jacobian(seg), reference_jacobian(g), atol=1e-12)


def test_segmentation_refuses_a_bad_copy_side():
    with pytest.raises(GraphError, match="copy must be"):
        segment_cross_level_edges(paper003.fig3_1a(), copy="middle")


# ---------------------------------------------------------------------------------------- degrees
@FAST
@given(random_lcgs())
def test_r_and_t_degrees_are_the_sizes_of_index_range_and_domain(g):
    rng, dom = g.index_range(), g.index_domain()
    assert r_degrees(g) == {v: len(rng[v]) for v in g.topological_order}
    assert t_degrees(g) == {v: len(dom[v]) for v in g.topological_order}


def test_degrees_of_fig5_2b():
    g = paper003.fig5_2b()
    assert r_degrees(g)["v"] == 2 and t_degrees(g)["w"] == 2


# ---------------------------------------------------------------------------------------- chains
def test_direct_simple_chains_are_maximal():
    g = CompGraph.from_edges(["x"], ["y", "z"], edges("xa", "ab", "bc", "cy", "xd", "dy", "dz"))
    assert simple_chains(g) == [Chain("x", ("a", "b", "c"), "y")]  # d has two successors


def test_an_edge_is_not_a_chain():
    g = CompGraph.from_edges(["x"], ["y"], edges("xy"))
    assert simple_chains(g) == [] and nested_structure(g) == []


# ---------------------------------------------------------------------------------------- blocks
def test_simple_blocks_of_fig4_1a():
    found = simple_blocks(paper003.fig4_1a())
    got = [(b.source, b.sink, set(b.interior)) for b in found]
    assert got == [("x", "c", {"d", "e"}), ("c", "f", {"a", "b"})]


def test_simple_block_with_a_direct_edge_and_def_3_3_strictness():
    g = CompGraph.from_edges(["x"], ["y"], edges("xa", "ay", "xy"))
    assert [(b.source, b.sink, b.paths) for b in simple_blocks(g)] == [("x", "y", 2)]
    # the paper's source (our sink) b has an in-edge from outside: not a simple block by Def. 3.3
    h = CompGraph.from_edges(["x", "z"], ["y"], edges("xa", "ab", "xb", "zb", "by"))
    assert simple_blocks(h) == []


def test_nested_structure_reports_indirect_chains_and_blocks():
    # inner block B(a, b) inside the chain x → a ⇒ b → y, in parallel with the chain x → r → y
    g = CompGraph.from_edges(["x"], ["y"], edges("xa", "ap", "pb", "aq", "qb", "by", "xr", "ry"))
    found = nested_structure(g)
    assert found == [
        Chain("a", ("p",), "b"), Chain("a", ("q",), "b"), Chain("x", ("r",), "y"),
        Block("a", "b", paths=2, direct=True),
        Chain("x", ("a", "b"), "y", direct=False),
        Block("x", "y", paths=2, direct=False),
    ]


def test_blocks_of_def_3_1():
    # fig 4.1 (a): two direct simple blocks and the indirect block around them
    found = blocks(paper003.fig4_1a())
    assert [(b.source, b.sink, b.simple, b.direct) for b in found] == [
        ("x", "c", True, True), ("c", "f", True, True), ("x", "f", True, False)]
    assert complex_blocks(paper003.fig4_1a()) == []
    # fig 4.1 (b) is one complex block
    (block,) = blocks(paper003.fig4_1b())
    assert not block.simple and set(block.interior) == {"a", "b", "v", "p", "q"} and block.paths == 6


def test_a_region_with_an_outside_edge_is_not_a_block():
    # a → p → b and a → q → b, but q also feeds the output z: no block between a and b
    g = CompGraph.from_edges(["x"], ["y", "z"], edges("xa", "ap", "pb", "aq", "qb", "by", "qz"))
    assert all((b.source, b.sink) != ("a", "b") for b in blocks(g))


@FAST
@given(random_lcgs())
def test_blocks_are_closed_regions_with_two_paths(g):
    for b in blocks(g):
        inside = set(b.interior)
        for v in inside:
            assert set(g.predecessors(v)) <= inside | {b.source}
            assert set(g.successors(v)) <= inside | {b.sink}
        paths = list(nx.all_simple_paths(g.digraph, b.source, b.sink))
        assert sum(set(p[1:-1]) <= inside for p in paths) == b.paths >= 2


@FAST
@given(random_lcgs())
def test_nested_structure_reduces_series_parallel_graphs_completely(g):
    # a vertex left unreduced has in- or out-degree > 1 in the reduced graph; a pure chain disappears
    found = nested_structure(g)
    removed = {v for item in found if isinstance(item, Chain) for v in item.interior}
    assert removed <= set(g.intermediates)
    assert len(removed) == sum(len(c.interior) for c in found if isinstance(c, Chain))


def test_bad_input_is_refused():
    with pytest.raises(GraphError, match="cannot use a object as a graph"):
        simple_chains(object())
