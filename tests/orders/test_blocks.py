"""Method ``blocks`` (paper 003 §4–§5): exact schedules, paper figure costs, pages, options."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jacacc
from jacacc.errors import OrderError
from jacacc.graph import reference_jacobian
from jacacc.orders.blocks import (
    DIRECTIONS,
    PageSplit,
    ScheduleEmitter,
    Separation,
    WorkGraph,
    _process,
    blocks_method,
    choose_pair,
    separate,
    separation_candidates,
    split_pages,
)
from jacacc.problems import generators, get, paper003
from jacacc.structure import Block, Chain
from jacacc.verify import bauer_jacobian, check_schedule
from tests.dags import random_lcgs

FAST = settings(max_examples=50, deadline=None)
STRUCTURE_METHODS = ["blocks", "levels"]


def test_registered_in_structure_mode_and_resolved_without_a_mode():
    assert {"blocks", "levels"} <= set(jacacc.methods("structure"))
    plan = jacacc.optimize(paper003.fig4_1a(), method="blocks")
    assert plan.mode == "structure" and plan.method == "blocks"


# ---------------------------------------------------------------------------------------- paper figures
@pytest.mark.parametrize("name", sorted(paper003.paper003_graphs()))
@pytest.mark.parametrize("method", STRUCTURE_METHODS)
def test_paper_figures_exact(name, method):
    g = paper003.paper003_graphs()[name]
    plan = jacacc.optimize(g, method=method)
    check_schedule(plan.schedule, g)
    assert plan.mults == plan.schedule.mults == sum(type(op).__name__ == "Op" for op in plan.schedule.ops)
    assert plan.mults >= plan.lower_bound


@pytest.mark.parametrize(("figure", "mults"), [
    ("fig4_1a", 5),   # Eq. 4.1: two simple blocks chained, 5 fma
    ("fig4_1c", 12),  # Eq. 4.2: all paths listed, 12 fma
    ("fig4_1b", 8),   # Eq. 4.5: the complex block factorized with a reference edge, 8 fma
    ("fig4_4a", 6),   # each subgraph in its own order
])
def test_paper_costs(figure, mults):
    assert blocks_method(getattr(paper003, figure)()).schedule.mults == mults


def test_order_describes_reference_edges_innermost_first():
    order = blocks_method(paper003.fig4_1a()).order
    assert order == (
        Chain("x", ("d",), "c"), Chain("x", ("e",), "c"), Block("x", "c"),
        Chain("c", ("a",), "f"), Chain("c", ("b",), "f"), Block("c", "f"),
        Chain("x", ("c",), "f"),
    )
    text = [str(s) for s in jacacc.optimize(paper003.fig4_1b(), method="blocks").order]
    assert text[0].startswith(("backward-factorize B(x, f)", "forward-factorize B(x, f)"))


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_each_factorization_direction_is_exact_on_fig4_1b(direction):
    g = paper003.fig4_1b()
    result = blocks_method(g, directions=[direction])
    check_schedule(result.schedule, g)
    assert result.schedule.mults == 8  # backward (Eq. 4.3/4.5) and forward (Eq. 4.4) agree here


# ---------------------------------------------------------------------------------------- random graphs
@FAST
@given(random_lcgs(), st.sampled_from(STRUCTURE_METHODS))
def test_random_dags_exact(g, method):
    plan = jacacc.optimize(g, method=method)
    check_schedule(plan.schedule, g)
    np.testing.assert_allclose(plan.jacobian(), bauer_jacobian(g), atol=1e-9)
    assert plan.mults == plan.schedule.mults


@FAST
@given(random_lcgs(max_intermediates=10), st.sampled_from(DIRECTIONS), st.integers(0, 3))
def test_random_dags_exact_for_every_option(g, direction, splits):
    result = blocks_method(g, directions=[direction], page_splits=splits)
    check_schedule(result.schedule, g)


@FAST
@given(random_lcgs(max_inputs=3, max_intermediates=10, max_outputs=3))
def test_page_split_keeps_the_jacobian(g):
    """Split at the §5 pair whatever it costs, then process: the pages merge to the Jacobian."""
    work = WorkGraph(g, ScheduleEmitter(g))
    pair = choose_pair(work)
    if pair is not None:
        w, v, _, _ = pair
        split_pages(work, w, v)
    _process(work, DIRECTIONS, 0)
    schedule = work.em.schedule(work.result(), work.steps)
    check_schedule(schedule, g)


def test_page_split_is_taken_when_it_pays():
    # a random DAG where the §5 split at (w, v) beats factorizing the whole page (65 < 66)
    g = generators.random_dag(4, 20, 4, seed=30)
    with_pages, without = blocks_method(g, page_splits=2), blocks_method(g, page_splits=0)
    check_schedule(with_pages.schedule, g)
    check_schedule(without.schedule, g)
    assert any(isinstance(s, PageSplit) for s in with_pages.order)
    assert with_pages.schedule.mults < without.schedule.mults
    assert not any(isinstance(s, PageSplit) for s in without.order)


@FAST
@given(random_lcgs(max_inputs=3, max_intermediates=10, max_outputs=3), st.integers(0, 3))
def test_separation_keeps_the_jacobian(g, pick):
    """Separate root-terminal pairs (§5 step 4) whatever it costs, then process: the pages
    partition the paths, so they still merge to the Jacobian."""
    work = WorkGraph(g, ScheduleEmitter(g))
    candidates = separation_candidates(work)
    if candidates:
        side, edges, _ = candidates[pick % len(candidates)]
        separate(work, edges, side)
    _process(work, DIRECTIONS, 0)
    check_schedule(work.em.schedule(work.result(), work.steps), g)


def _skip_graph():
    # x -> a -> b -> c -> y, and x -> c: the edge x->c skips two levels
    return jacacc.CompGraph.from_edges(
        ["x", "z"], ["y", "u"],
        [("x", "a", 2.0), ("a", "b", 3.0), ("b", "c", 5.0), ("c", "y", 7.0), ("x", "c", 11.0),
         ("z", "a", 13.0), ("b", "u", 17.0)])


def test_separation_candidates_prefer_edges_crossing_most_levels():
    work = WorkGraph(_skip_graph(), ScheduleEmitter(_skip_graph()))
    candidates = separation_candidates(work)
    first = [c for c in candidates if c[0] == "first"]
    assert first == [("first", (("x", "c"),), "edges crossing 3 levels")]
    last = [c for c in candidates if c[0] == "last"]  # b -> u: level 2 -> 4
    assert last == [("last", (("b", "u"),), "edges crossing 2 levels")]


def test_separate_moves_exactly_the_paths_of_the_chosen_edges():
    g = _skip_graph()
    work = WorkGraph(g, ScheduleEmitter(g))
    separate(work, [("x", "c")], "first")
    # the new page holds x -> c' -> y; the old one keeps c for the paths through b
    copies = [v for v in work.succs if v not in g.digraph]
    assert [work.name(v) for v in copies] == ["c"]
    (c2,) = copies
    assert set(work.succs["x"]) == {"a", c2} and set(work.succs[c2]) == {"y"}
    assert "x" not in work.preds["c"]
    _process(work, DIRECTIONS, 0)
    check_schedule(work.em.schedule(work.result(), work.steps), g)


def test_separation_by_single_root_without_cross_level_edges():
    g = generators.bipartite(3, 3, 2, density=1.0, seed=0)
    work = WorkGraph(g, ScheduleEmitter(g))
    reasons = [reason for _, _, reason in separation_candidates(work)]
    assert any(r.startswith("the paths of output") for r in reasons)
    assert any(r.startswith("the paths of input") for r in reasons)


def test_section5_moves_taken_only_when_they_pay():
    """Over seeded random graphs: every taken page split or separation leaves the schedule
    cheaper than factorizing without them, and separations are taken (the page split is
    checked by test_page_split_is_taken_when_it_pays)."""
    taken = set()
    graphs = [generators.random_dag(4, 16, 4, seed=s) for s in range(40)]
    graphs += [generators.layered([3, 4, 4, 3, 2], density=0.6, seed=s) for s in range(20)]
    for g in graphs:
        with_moves, plain = blocks_method(g, page_splits=2), blocks_method(g, page_splits=0)
        check_schedule(with_moves.schedule, g)
        kinds = {type(step).__name__ for step in with_moves.order if isinstance(step, (PageSplit, Separation))}
        if kinds:
            assert with_moves.schedule.mults < plain.schedule.mults
        taken |= kinds
    assert "Separation" in taken


FAMILIES = [
    ("random_dag", lambda s: generators.random_dag(3, 25, 3, seed=s)),
    ("random_dag_band", lambda s: generators.random_dag(2, 30, 4, window=5, seed=s)),
    ("layered", lambda s: generators.layered([3, 4, 4, 3, 2], density=0.6, seed=s)),
    ("bipartite", lambda s: generators.bipartite(3, 3, 2, density=0.8, seed=s)),
    ("reduction_tree", lambda s: generators.reduction_tree(3, 2, seed=s)),
    ("broadcast_tree", lambda s: generators.broadcast_tree(3, 2, seed=s)),
    ("chain", lambda s: generators.chain(8, seed=s)),
    ("ladder", lambda s: generators.ladder(6, 3, seed=s)),
]


@pytest.mark.parametrize(("family", "build"), FAMILIES, ids=[f for f, _ in FAMILIES])
@pytest.mark.parametrize("method", STRUCTURE_METHODS)
def test_generator_families_exact(family, build, method):
    for seed in range(3):
        g = build(seed)
        plan = jacacc.optimize(g, method=method)
        check_schedule(plan.schedule, g)
        np.testing.assert_allclose(plan.jacobian(), reference_jacobian(g), atol=1e-9)


def test_chain_costs_one_per_intermediate():
    g = generators.chain(10, seed=0)
    assert blocks_method(g).schedule.mults == len(g.intermediates)


# ---------------------------------------------------------------------------------------- zoo, options
@pytest.mark.parametrize("method", STRUCTURE_METHODS)
def test_roeflux_exact(method):
    problem = get("RoeFlux_1d")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = problem.trace()
    g = traced.linearize(problem.sample(0))
    plan = jacacc.optimize(g, method=method)
    check_schedule(plan.schedule, g, rtol=1e-8)
    # the symbolic graph has the same structure; the plan evaluates the traced partials at other points
    x = np.stack([problem.sample(s) for s in (1, 2)])
    np.testing.assert_allclose(plan.jacobian(traced.partials(x)),
                               reference_jacobian(g, traced.partials(x)), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize(("options", "message"), [
    ({"directions": ["sideways"]}, "directions must be"),
    ({"directions": []}, "directions must be"),
    ({"page_splits": -1}, "page_splits must be"),
    ({"page_splits": 1.5}, "page_splits must be"),
])
def test_bad_options(options, message):
    with pytest.raises(OrderError, match=message):
        jacacc.optimize(paper003.fig4_1b(), method="blocks", **options)
