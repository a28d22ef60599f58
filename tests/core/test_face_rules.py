"""The Griewank–Walther variants of face elimination (paper 003 §1): each rule on a
hand-made graph where the result is worked out by hand, and every rule's Jacobians
on random DAGs against the dense chain rule."""

from __future__ import annotations

import numpy as np
import pytest
from dags import random_lcgs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jacacc
from jacacc import CompGraph, OrderError, RegistryError, optimize
from jacacc.eliminate import FACE_RULES, FaceRule, count_ops, eliminate_faces, face_rule
from jacacc.eliminate.face import FaceGraph, FaceStep
from jacacc.problems.generators import random_dag
from jacacc.schedule import Add, ScheduleBuilder, SplitAdd

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FACE_METHODS = jacacc.methods("face", exact=False)

# x → j → k → {y1, y2} and the shortcut x → k: the biclique of k has the two
# path pieces x→k and j→k side by side, so splits and partial merges apply.
SHORTCUT = CompGraph.from_edges(
    ["x"], ["y1", "y2"],
    [("x", "j", 2.0), ("j", "k", 3.0), ("x", "k", 5.0), ("k", "y1", 7.0), ("k", "y2", 11.0)],
)
SHORTCUT_JACOBIAN = [[(3 * 2 + 5) * 7], [(3 * 2 + 5) * 11]]


def finish(state: FaceGraph, steps: list[FaceStep]) -> list[FaceStep]:
    """Eliminate the remaining intermediate faces in the order the graph lists them."""
    while (step := next(state.intermediate_faces(), None)) is not None:
        state.eliminate(*step)
        steps.append(step)
    return steps


def run(rule: str, first: list[tuple[str, str, str]]):
    """Eliminate the faces ``first`` (paths of original edges), then the rest; the Schedule."""
    builder = ScheduleBuilder(SHORTCUT.inputs, SHORTCUT.outputs, SHORTCUT.edges)
    state = FaceGraph(SHORTCUT, builder, rule=rule)
    steps = []
    for i, j, k in first:
        step = FaceStep((i, j), (j, k))
        state.eliminate(*step)
        steps.append(step)
    steps = finish(state, steps)
    schedule = builder.build(mode="face", order=steps)
    assert schedule.evaluate(SHORTCUT.partial_array()).tolist() == SHORTCUT_JACOBIAN
    # the sequence names the vertices the rule created, so it replays exactly
    replayed = eliminate_faces(SHORTCUT, steps, rule=rule)
    assert (replayed.mults, replayed.adds) == (schedule.mults, schedule.adds)
    return schedule


# ----------------------------------------------------------------------------- each variant by hand
def test_split_fill_in_absorbs_part_of_the_product():
    # after x→k→y2 is eliminated, x→k keeps only the successor k→y1.  Eliminating x→j→k:
    # Naumann fills in a second x→k vertex with successors {k→y1, k→y2} (its faces then
    # cost 2, beside x→k's 1: 5 in all); the split fill-in gives the new vertex only
    # k→y2 and adds the product into x→k (4 in all, one addition more for the split).
    naumann = run("naumann", [("x", "k", "y2"), ("x", "j", "k")])
    split = run("split_fill_in", [("x", "k", "y2"), ("x", "j", "k")])
    assert (naumann.mults, naumann.adds) == (5, 2)
    assert (split.mults, split.adds) == (4, 2)
    # one addition is the split (an Add into x→k), the other the absorption into x→y2
    assert sum(isinstance(op, Add) for op in split.ops) == 1


def test_absorption_without_removal_copies_the_partner():
    # after j→k→y2 is eliminated, j→k keeps only k→y1.  Eliminating x→j→k: the product has
    # successors {k→y1}, strictly inside those of x→k.  Naumann fills in (6 in all);
    # absorption without removal makes a copy x→k' = x→k + product over {k→y1} while
    # x→k keeps k→y2 (5 in all).
    naumann = run("naumann", [("j", "k", "y2"), ("x", "j", "k")])
    kept = run("absorption_without_removal", [("j", "k", "y2"), ("x", "j", "k")])
    assert (naumann.mults, naumann.adds) == (6, 2)
    assert kept.mults == 5
    assert sum(isinstance(op, SplitAdd) for op in kept.ops) == 1
    # the plain split-fill-in rule does not cover this case: the product's set is the smaller
    assert run("split_fill_in", [("j", "k", "y2"), ("x", "j", "k")]).mults == 6


def test_partial_merge_moves_shared_faces_to_the_smaller_vertex():
    # Naumann's fill-in for x→j→k (after x→k→y2) has successors {k→y1, k→y2} and the same
    # predecessors as x→k, whose successors {k→y1} are nested inside: the partial merge adds
    # the fill-in's value into x→k and drops its face to k→y1 (4 instead of 5).
    merged = run("partial_merge", [("x", "k", "y2"), ("x", "j", "k")])
    assert merged.mults == 4
    assert merged.adds == 2  # the partial merge and the final absorption into x→y2


def test_naumann_rule_is_the_default_and_variants_combine():
    assert face_rule(None) == FACE_RULES["naumann"] == FaceRule()
    gw = face_rule("griewank_walther")
    assert gw.absorption_without_removal and gw.split_fill_in and gw.partial_merge
    custom = FaceRule("mine", split_fill_in=True, partial_merge=True)
    assert face_rule(custom) is custom
    assert run("griewank_walther", [("x", "k", "y2"), ("x", "j", "k")]).mults == 4


def test_unknown_rule_is_refused_with_the_valid_names():
    with pytest.raises(RegistryError, match="unknown face rule 'gw'.*naumann.*griewank_walther"):
        optimize(SHORTCUT, mode="face", method="greedy", rule="gw")


def test_exhaustive_face_search_refuses_other_rules():
    with pytest.raises(OrderError, match="Naumann's rule only"):
        optimize(SHORTCUT, mode="face", method="exhaustive", rule="griewank_walther")


# ----------------------------------------------------------------------------- rules through optimize
@pytest.mark.parametrize("rule", sorted(FACE_RULES))
@pytest.mark.parametrize("method", FACE_METHODS)
def test_every_method_under_every_rule_on_random_dags(rule, method):
    rng = np.random.default_rng(7)
    for seed in range(4):
        g = random_dag(n_inputs=3, n_intermediates=9, n_outputs=3, seed=seed)
        values = rng.normal(size=g.n_edges)
        plan = optimize(g, mode="face", method=method, rule=rule, seed=seed)
        np.testing.assert_allclose(plan.jacobian(values), jacacc.reference_jacobian(g, values), atol=1e-12)
        assert plan.mults == len(plan.order)  # one multiplication per face, whatever the rule
        assert count_ops(g, plan.order, mode="face", rule=rule).mults == plan.mults
        assert plan.options["rule"] == rule


@PROPERTY
@given(graph=random_lcgs(), rule=st.sampled_from(sorted(FACE_RULES)), seed=st.integers(0, 2**16))
def test_random_face_sequences_under_any_rule_give_the_chain_rule_jacobian(graph, rule, seed):
    plan = optimize(graph, mode="face", method="random", rule=rule, seed=seed)
    np.testing.assert_allclose(plan.jacobian(), jacacc.reference_jacobian(graph), rtol=1e-10, atol=1e-10)
    replay = optimize(graph, mode="face", method=list(plan.order), rule=rule)
    assert (replay.mults, replay.adds) == (plan.mults, plan.adds)


@PROPERTY
@given(graph=random_lcgs(), rule=st.sampled_from(sorted(FACE_RULES)))
def test_vertex_and_edge_orders_replay_under_any_rule(graph, rule):
    for mode in ("vertex", "edge"):
        order = optimize(graph, mode=mode, method="markowitz").order
        plan = optimize(graph, mode="face", method=list(order), rule=rule)
        np.testing.assert_allclose(plan.jacobian(), jacacc.reference_jacobian(graph), rtol=1e-10, atol=1e-10)
