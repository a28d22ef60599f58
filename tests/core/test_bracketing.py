"""Eliminations as algebraic expressions with reference variables (paper 003 §2, §4), and back."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from dags import random_lcgs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jacacc
from jacacc import CompGraph, OrderError, optimize, reference_jacobian
from jacacc.bracketing import (
    ExpressionError,
    ExpressionSet,
    Leaf,
    Mul,
    Ref,
    Sum,
    expand_paths,
    from_expressions,
    paper_symbol,
    parse_expressions,
    to_expressions,
)
from jacacc.problems import paper003
from jacacc.schedule import Add, Op, Schedule

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MODE_METHODS = [(mode, name) for mode in ("vertex", "edge", "face") for name in jacacc.methods(mode)]
# optimal searches are exponential (face mode takes seconds on 4 intermediates): fixed small graphs only
SWEEP = [(mode, name) for mode in ("vertex", "edge", "face") for name in jacacc.methods(mode, exact=False)]
SCRIPT = Path(__file__).resolve().parents[2] / "paper_reproductions" / "003_fig4_1_expressions.py"


def _paths_cost(graph: CompGraph) -> tuple[int, int]:
    """Σ over input→output paths of (length − 1), and Σ over pairs of (paths − 1): by networkx."""
    g = nx.DiGraph(graph.digraph.edges)
    mults = adds = 0
    for x in graph.inputs:
        for y in graph.outputs:
            if x in g and y in g:
                paths = list(nx.all_simple_paths(g, x, y))
                mults += sum(len(p) - 2 for p in paths)
                adds += max(len(paths) - 1, 0)
    return mults, adds


def _round_trip(graph: CompGraph, schedule: Schedule) -> None:
    """The checks every schedule must pass: expressions evaluate to the Jacobian, count the same,
    and print → parse → from_expressions gives a schedule with the same Jacobian and counts."""
    ref = reference_jacobian(graph)
    ex = to_expressions(schedule, graph)
    assert (ex.mults, ex.adds) == (schedule.mults, schedule.adds)
    assert ex.fmas >= ex.mults
    np.testing.assert_allclose(ex.evaluate(graph.partial_array()), ref, rtol=1e-9, atol=1e-12)
    assert set(ex.entries) == set(schedule.result)
    # a reference variable is used more than once (or not at all), everything else is inlined once
    uses = {name: 0 for name in ex.references}
    for e in [*ex.references.values(), *ex.entries.values()]:
        stack = [e]
        while stack:
            node = stack.pop()
            if isinstance(node, Ref):
                uses[node.name] += 1
            elif isinstance(node, Mul):
                stack += [node.left, node.right]
            elif isinstance(node, Sum):
                stack += list(node.terms)
    assert all(n != 1 for n in uses.values()), uses
    text = str(ex)
    parsed = parse_expressions(text, graph)
    assert parsed == ex
    assert str(parsed) == text
    back = from_expressions(parsed, graph)
    assert (back.mults, back.adds) == (schedule.mults, schedule.adds)
    np.testing.assert_allclose(back.evaluate(graph.partial_array()), ref, rtol=1e-9, atol=1e-12)
    # and the schedule rebuilt from the expressions converts back to the same expressions' costs
    again = to_expressions(back, graph)
    assert (again.mults, again.adds, again.fmas) == (ex.mults, ex.adds, ex.fmas)
    np.testing.assert_allclose(again.evaluate(), ref, rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------- properties
@PROPERTY
@given(graph=random_lcgs(max_intermediates=7))
def test_every_method_round_trips_through_expressions(graph):
    for mode, name in SWEEP:
        try:
            plan = optimize(graph, mode=mode, method=name, seed=0)
        except OrderError:  # a method that refuses graphs beyond a size limit (exhaustive search)
            continue
        _round_trip(graph, plan.schedule)


@PROPERTY
@given(graph=random_lcgs(), seed=st.integers(0, 10**6))
def test_random_face_and_edge_orders_round_trip(graph, seed):
    for mode in ("face", "edge", "vertex"):
        _round_trip(graph, optimize(graph, mode=mode, method="random", seed=seed).schedule)


@PROPERTY
@given(graph=random_lcgs(max_intermediates=6), batch=st.integers(1, 3), seed=st.integers(0, 1000))
def test_evaluate_is_batched(graph, batch, seed):
    partials = np.random.default_rng(seed).uniform(-2, 2, (batch, 2, graph.n_edges))
    ex = to_expressions(optimize(graph, mode="face", method="greedy").schedule)
    np.testing.assert_allclose(
        ex.evaluate(partials), reference_jacobian(graph, partials), rtol=1e-9, atol=1e-12
    )
    paths = expand_paths(graph)
    np.testing.assert_allclose(
        paths.evaluate(partials), reference_jacobian(graph, partials), rtol=1e-9, atol=1e-12
    )


@PROPERTY
@given(graph=random_lcgs())
def test_expand_paths_is_bauers_formula(graph):
    ex = expand_paths(graph)
    assert not ex.references
    assert (ex.mults, ex.adds) == _paths_cost(graph)
    assert ex.fmas == ex.mults  # every addition adds a path product (or a lone edge into a product sum)
    np.testing.assert_allclose(ex.evaluate(), reference_jacobian(graph), rtol=1e-9, atol=1e-12)
    back = from_expressions(parse_expressions(str(ex), graph), graph)
    assert (back.mults, back.adds) == (ex.mults, ex.adds)
    np.testing.assert_allclose(
        back.evaluate(graph.partial_array()), reference_jacobian(graph), rtol=1e-9, atol=1e-12
    )


# ----------------------------------------------------------------------------- by hand
def _diamond() -> CompGraph:
    return CompGraph.from_edges(
        ["x"], ["y"], [("x", "a", 2.0), ("x", "b", 3.0), ("a", "c", 5.0), ("b", "c", 7.0), ("c", "y", 11.0)]
    )


@pytest.mark.parametrize(("mode", "name"), MODE_METHODS)
def test_every_method_round_trips_on_the_paper_graphs(mode, name):
    for graph in [_diamond(), paper003.fig1_1(), paper003.fig3_1a(), paper003.fig4_1a(), paper003.fig5_1a()]:
        _round_trip(graph, optimize(graph, mode=mode, method=name, seed=0).schedule)


def test_diamond_forward_and_reverse():
    g = _diamond()
    fwd = to_expressions(optimize(g, method="forward"))
    assert str(fwd) == "J[y,x] = d[y,c]*(d[c,a]*d[a,x] + d[c,b]*d[b,x])"
    assert (fwd.mults, fwd.adds, fwd.fmas) == (3, 1, 3)
    rev = to_expressions(optimize(g, method="reverse"))
    assert str(rev) == "J[y,x] = d[y,c]*d[c,b]*d[b,x] + d[y,c]*d[c,a]*d[a,x]"
    assert (rev.mults, rev.adds) == (4, 1)
    assert rev.evaluate().item() == fwd.evaluate().item() == 11 * (10 + 21)
    assert str(expand_paths(g)) == "J[y,x] = d[y,c]*d[c,a]*d[a,x] + d[y,c]*d[c,b]*d[b,x]"


def test_shared_value_becomes_a_reference():
    # x → v → {y, z}: eliminating v multiplies d[v,x] into both outputs; with an extra
    # intermediate the fill-in x → w is used twice and is named
    g = CompGraph.from_edges(
        ["x"], ["y", "z"], [("x", "u", 2.0), ("u", "w", 3.0), ("w", "y", 5.0), ("w", "z", 7.0)]
    )
    ex = to_expressions(optimize(g, method=["u", "w"]))
    assert str(ex) == "r1 = d[w,u]*d[u,x]\nJ[y,x] = d[y,w]*r1\nJ[z,x] = d[z,w]*r1"
    assert list(ex.references) == ["r1"]
    assert (ex.mults, ex.adds, ex.fmas) == (3, 0, 3)
    assert ex.evaluate().ravel().tolist() == [30.0, 42.0]


def test_fig4_1a_factored_and_listed():
    g = paper003.fig4_1a()
    ex = to_expressions(optimize(g, method="markowitz"), names=paper_symbol)
    assert str(ex) == "J[f,x] = (f_b*b_c + f_a*a_c)*(c_e*e_x + c_d*d_x)"
    assert (ex.mults, ex.adds, ex.fmas) == (5, 2, 5)
    listed = expand_paths(g, names=paper_symbol)
    assert (listed.mults, listed.adds, listed.fmas) == (12, 3, 12)
    assert ex.evaluate().item() == listed.evaluate().item() == reference_jacobian(g).item() == 13454.0
    # the paper's Eq. 4.1 typed in by hand parses to the same cost
    eq41 = parse_expressions("J[f,x] = (f_a*a_c + f_b*b_c)*(c_d*d_x + c_e*e_x)", g, names=paper_symbol)
    assert eq41.fmas == 5 and eq41.evaluate().item() == 13454.0
    assert from_expressions(eq41, g).mults == 5
    # Fig. 4.1 (c), the listed paths as a graph: every vertex elimination costs Eq. 4.2's 12
    assert to_expressions(optimize(paper003.fig4_1c(), method="markowitz")).fmas == 12


def test_fig4_1b_reference_variable():
    ex = to_expressions(optimize(paper003.fig4_1b(), method="markowitz"), names=paper_symbol)
    assert str(ex) == "r1 = f_b*b_v + f_a*a_v\nJ[f,x] = (f_b*b_q + r1*v_q)*q_x + (f_a*a_p + r1*v_p)*p_x"
    assert (ex.mults, ex.adds, ex.fmas) == (8, 4, 8)


def test_direct_edges_and_structural_zeros():
    g = CompGraph.from_edges(
        ["x1", "x2"],
        ["y1", "y2"],
        [("x1", "y1", 2.0), ("x1", "v", 3.0), ("v", "y1", 5.0)],
        nodes=["x2", "y2"],
    )
    ex = to_expressions(optimize(g, method="markowitz"))
    assert set(ex.entries) == {("y1", "x1")}
    assert str(ex) == "J[y1,x1] = d[y1,x1] + d[y1,v]*d[v,x1]"
    np.testing.assert_array_equal(ex.evaluate(), [[17.0, 0.0], [0.0, 0.0]])


def test_face_merge_counts_a_plain_addition():
    # a sum of two values that are not products: a merge, one addition with nothing to fuse into
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "y", 3.0), ("x", "y", 5.0)])
    ex = parse_expressions("r1 = d[y,a]*d[a,x]\nr2 = r1 + d[y,x]\nJ[y,x] = r1 + r2", g)
    assert (ex.mults, ex.adds, ex.fmas) == (1, 2, 3)
    s = from_expressions(ex, g)
    assert (s.mults, s.adds) == (1, 2)
    assert any(isinstance(op, Add) for op in s.ops)
    assert s.evaluate(g.partial_array()).item() == ex.evaluate().item() == 6 + 11


def test_sum_without_products_waits_until_a_term_is_used_nowhere_else():
    # a → y directly (d[y,a]) and through b (r1); the schedule has no copy, so r2 = d[y,a] + r1
    # must accumulate in place into d[y,a] or r1, and both are still read by J's other products:
    # those are emitted first (J's fill-in is its second product), then r2, then r2*d[a,x]
    g = CompGraph.from_edges(
        ["x"], ["y"], [("x", "a", 2.0), ("a", "y", 3.0), ("a", "b", 5.0), ("b", "y", 7.0)]
    )
    ex = parse_expressions(
        "r1 = d[y,b]*d[b,a]\nr2 = d[y,a] + r1\nJ[y,x] = r2*d[a,x] + d[y,a]*d[a,x] + r1*d[a,x]", g
    )
    s = from_expressions(ex, g)
    assert (s.mults, s.adds) == (ex.mults, ex.adds) == (4, 3)
    assert s.evaluate(g.partial_array()).item() == ex.evaluate().item() == 2 * (3 + 35) * 2
    assert [type(op).__name__ for op in s.ops] == ["Op", "Op", "Op", "Add", "Op"]
    assert not s.ops[1].accumulate and s.ops[2].accumulate
    # a value summed with itself and used nowhere else can be doubled in place; three times cannot
    twice = parse_expressions("J[y,x] = (d[y,a] + d[y,a])*d[a,x]", g)
    assert from_expressions(twice, g).evaluate(g.partial_array()).item() == 12.0
    thrice = parse_expressions("r1 = d[y,a] + d[y,a] + d[y,a]\nJ[y,x] = r1*d[a,x]", g)
    with pytest.raises(ExpressionError, match="without copying"):
        from_expressions(thrice, g)


def test_hand_made_schedule_with_reuse_and_overwrite():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "y", 3.0), ("x", "y", 5.0)])
    # s3 = s1*s0 is merged into s2 twice: a reference; the last op overwrites s3 with a value
    # nothing reads, which is still defined (as a reference) so that its multiplication is counted
    ops = [Op(3, 1, 0, False), Op(2, 1, 0, True), Add(2, 3), Add(2, 3), Op(3, 1, 0, False)]
    s = Schedule(g.inputs, g.outputs, g.edges, [*g.edges, ("x", "y")], ops, {("y", "x"): 2})
    ex = to_expressions(s, g)
    assert str(ex) == "r1 = d[y,a]*d[a,x]\nr2 = d[y,a]*d[a,x]\nJ[y,x] = d[y,x] + d[y,a]*d[a,x] + r1 + r1"
    assert (ex.mults, ex.adds) == (s.mults, s.adds) == (3, 3)
    assert ex.fmas == 3 + 2  # three terms that are not products: two plain additions
    assert ex.evaluate().item() == s.evaluate(g.partial_array()).item() == 23.0
    back = from_expressions(parse_expressions(str(ex), g), g)
    assert (back.mults, back.adds) == (3, 3)
    assert back.evaluate(g.partial_array()).item() == 23.0
    with pytest.raises(ExpressionError, match="holds no value"):
        to_expressions(
            Schedule(
                g.inputs, g.outputs, g.edges, [*g.edges, ("x", "y")], [Op(2, 3, 0, True)], {("y", "x"): 2}
            )
        )


def test_parentheses_are_minimal_but_keep_the_tree():
    g = CompGraph.from_edges(["x"], ["y"], [("x", "a", 2.0), ("a", "b", 3.0), ("b", "y", 5.0)])
    for text in ["J[y,x] = d[y,b]*d[b,a]*d[a,x]", "J[y,x] = d[y,b]*(d[b,a]*d[a,x])"]:
        ex = parse_expressions(text, g)
        assert str(ex) == text
        assert ex.mults == 2
    assert str(parse_expressions("J[y,x] = ((d[y,b])*d[b,a])*(d[a,x])", g)) == "J[y,x] = d[y,b]*d[b,a]*d[a,x]"
    nested = parse_expressions(
        "J[y,x] = d[y,b]*d[b,a]*d[a,x] + (d[y,b]*d[b,a]*d[a,x] + d[y,b]*d[b,a]*d[a,x])", g
    )
    assert isinstance(nested.entries[("y", "x")], Sum)
    assert str(parse_expressions(str(nested), g)) == str(nested)
    assert nested.adds == 2 and nested.fmas == 6  # the product is fused into the inner sum's value
    assert from_expressions(nested, g).evaluate(g.partial_array()).item() == 90.0


def test_integer_node_ids_and_colliding_names():
    g = CompGraph.from_edges([0], [2], [(0, 1, 2.0), (1, 2, 3.0)])
    ex = to_expressions(optimize(g, method="markowitz"))
    assert str(ex) == "J[2,0] = d[2,1]*d[1,0]"
    assert parse_expressions(str(ex), g) == ex
    mixed = CompGraph.from_edges([0], ["0y"], [(0, "1", 2.0), ("1", 1, 3.0), (1, "0y", 5.0)])
    ex = to_expressions(optimize(mixed, method="markowitz"))
    assert "d['1',0]" in str(ex) and "d[1,'1']" in str(ex)
    assert parse_expressions(str(ex), mixed) == ex


def test_errors():
    g = _diamond()
    with pytest.raises(ExpressionError, match="not defined"):
        parse_expressions("J[y,x] = r9", g)
    with pytest.raises(ExpressionError, match="unknown symbol"):
        parse_expressions("J[y,x] = d[y,q]", g)
    with pytest.raises(ExpressionError, match="expected"):
        parse_expressions("J[x,y] = d[y,c]", g)
    with pytest.raises(ExpressionError, match="missing"):
        parse_expressions("J[y,x] = (d[y,c]", g)
    with pytest.raises(ExpressionError, match="defined twice"):
        parse_expressions("J[y,x] = d[y,c]\nJ[y,x] = d[y,c]", g)
    with pytest.raises(ExpressionError, match="chain-rule"):
        from_expressions(parse_expressions("J[y,x] = d[a,x]*d[y,c]", g))
    with pytest.raises(ExpressionError, match="different pairs"):
        from_expressions(parse_expressions("J[y,x] = d[a,x] + d[c,a]", g))
    with pytest.raises(ExpressionError, match="not ∂y/∂x"):
        from_expressions(parse_expressions("J[y,x] = d[c,a]*d[a,x]", g))
    # without the check a non-chain-rule product is still a valid straight-line program
    s = from_expressions(parse_expressions("J[y,x] = d[c,a]*d[a,x]", g), check=False)
    assert s.evaluate(g.partial_array()).item() == 10.0
    with pytest.raises(ExpressionError, match="before it is defined"):
        ExpressionSet.from_graph(g, {}, {("y", "x"): Ref("r1")})
    with pytest.raises(ExpressionError, match="at least two"):
        Sum((Leaf(0),))
    with pytest.raises(ExpressionError, match="distinct"):
        to_expressions(optimize(g), names=lambda u, v: "e")
    with pytest.raises(ExpressionError, match="shape"):
        expand_paths(g).evaluate(np.ones(3))
    with pytest.raises(ExpressionError, match="max_paths"):
        expand_paths(g, max_paths=1)


# ----------------------------------------------------------------------------- the paper reproduction
def test_paper_reproduction_script_runs(capsys):
    spec = importlib.util.spec_from_file_location("paper003_fig4_1_expressions", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main() == 0
    out = capsys.readouterr().out
    assert "5 fma" in out and "12 fma" in out
