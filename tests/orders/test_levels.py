"""Method ``levels`` (paper 003 §4, Def. 3.4, Eq. 4.6, Fig. 4.4): level Jacobians and the matrix-chain DP."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jacacc
from jacacc.errors import OrderError
from jacacc.graph import reference_jacobian
from jacacc.orders.levels import (
    ONE,
    LevelProduct,
    _compose,
    _product_cost,
    level_jacobians,
    levels_method,
    matrix_chain,
)
from jacacc.problems import paper003
from jacacc.structure import depth_levels
from jacacc.verify import check_schedule
from tests.dags import random_lcgs

FAST = settings(max_examples=50, deadline=None)
SIDES, COPIES = ["inputs", "outputs"], ["source", "target"]


def dense_product(g, side, copy):
    """Multiply the level Jacobians as dense matrices (identity entries = 1)."""
    mats = level_jacobians(g, side=side, copy=copy)
    values = g.partial_array()
    cols = list(g.inputs)
    acc = np.eye(len(cols))
    for m in mats:
        rows = sorted({r for r in m}, key=str) if m is not mats[-1] else list(g.outputs)
        dense = np.zeros((len(rows), len(cols)))
        for i, r in enumerate(rows):
            for c, entry in m.get(r, {}).items():
                dense[i, cols.index(c)] = 1.0 if entry == ONE else values[entry]
        acc, cols = dense @ acc, rows
    return acc


@FAST
@given(random_lcgs(), st.sampled_from(SIDES), st.sampled_from(COPIES))
def test_level_jacobians_multiply_to_the_jacobian(g, side, copy):
    """Eq. 4.6: with the cross-level edges segmented, J = J_L ⋯ J_1."""
    if not any(g.successors(x) for x in g.inputs):
        return
    np.testing.assert_allclose(dense_product(g, side, copy), reference_jacobian(g), atol=1e-9)


def test_level_jacobians_of_fig3_1a_segment_the_cross_level_edge():
    j1, j2 = level_jacobians(paper003.fig3_1a(), copy="source")
    assert j1 == {"a": {"x": 1}, "x": {"x": ONE}} and j2 == {"f": {"a": 0, "x": 2}}
    j1, j2 = level_jacobians(paper003.fig3_1a(), copy="target")
    assert j1 == {"a": {"x": 1}, "f": {"x": 2}} and j2 == {"f": {"a": 0, "f": ONE}}


# ---------------------------------------------------------------------------------------- the DP
def brute_force(patterns, i=0, j=None):
    """Every bracketing of J[j←i]: the least (mults, adds)."""
    j = len(patterns) if j is None else j
    if j == i + 1:
        return (0, 0), patterns[i]
    best = None
    for k in range(i + 1, j):
        (lm, la), left = brute_force(patterns, k, j)
        (rm, ra), right = brute_force(patterns, i, k)
        m, a = _product_cost(left, right)
        cost = (lm + rm + m, la + ra + a)
        if best is None or cost < best:
            best = cost
            pattern = _compose(left, right)
    return best, pattern


@pytest.mark.parametrize("seed", range(20))
def test_matrix_chain_matches_brute_force(seed):
    rng = random.Random(seed)
    widths = [rng.randint(1, 4) for _ in range(rng.randint(2, 6))]
    names = [[f"v{lv}_{k}" for k in range(w)] for lv, w in enumerate(widths)]
    patterns = []
    for lv in range(1, len(widths)):
        pat = {}
        for r in names[lv]:
            cols = {c for c in names[lv - 1] if rng.random() < 0.6} or {rng.choice(names[lv - 1])}
            pat[r] = cols
        patterns.append(pat)
    mults, adds, _ = matrix_chain(patterns)
    assert (mults, adds) == brute_force(patterns)[0]


def test_identity_entries_are_free():
    # x is copied through level 1; the product of its copy with anything costs nothing
    assert _product_cost({"y": {"x", "a"}}, {"x": {"x"}, "a": {"x"}}) == (1, 1)


def test_fig4_4_unrelated_subgraphs_take_their_own_orders():
    """Fig. 4.4 (a): one bracketing for the whole graph costs 7, one per subgraph 3 + 3."""
    g = paper003.fig4_4a()
    mats = level_jacobians(g)
    whole, _, _ = matrix_chain([{r: set(row) for r, row in m.items()} for m in mats])
    assert whole == 7
    result = levels_method(g, reduce=False)
    assert result.schedule.mults == 6
    brackets = sorted(s.bracketing for s in result.order if isinstance(s, LevelProduct))
    assert brackets == ["((J3 J2) J1)", "(J3 (J2 J1))"]  # conflicting optimal orders
    check_schedule(result.schedule, g)


def test_fig4_1_levels():
    # 4.1 (a): the DP avoids splitting c into 4 vertices (Fig. 4.1 (c), 12 fma): 5 fma as Eq. 4.1
    assert levels_method(paper003.fig4_1a(), reduce=False).schedule.mults == 5
    # 4.1 (b) (Eq. 4.6, four factors after segmentation): 8, as backward/forward factorization
    assert levels_method(paper003.fig4_1b(), reduce=False).schedule.mults == 8


# ---------------------------------------------------------------------------------------- exactness
@FAST
@given(random_lcgs(), st.booleans(), st.sampled_from(SIDES), st.sampled_from(COPIES))
def test_random_dags_exact_for_every_option(g, reduce, side, copy):
    result = levels_method(g, reduce=reduce, sides=[side], copies=[copy])
    check_schedule(result.schedule, g)
    dp = sum(s.mults for s in result.order if isinstance(s, LevelProduct))
    chains = sum(len(s.interior) for s in result.order if hasattr(s, "interior"))
    assert result.schedule.mults == dp + chains  # every multiplication is accounted for by a step


@FAST
@given(random_lcgs())
def test_plan_counts_from_the_schedule(g):
    plan = jacacc.optimize(g, method="levels")
    assert plan.mode == "structure" and plan.mults == plan.schedule.mults
    assert plan.adds == plan.schedule.adds
    check_schedule(plan.schedule, g)


def test_levels_are_those_of_structure():
    g = paper003.fig4_1b()
    assert len(level_jacobians(g, side="outputs")) == max(depth_levels(g, side="outputs").values())


@pytest.mark.parametrize(("options", "message"), [
    ({"sides": ["middle"]}, "sides must be"),
    ({"copies": []}, "copies must be"),
    ({"copies": ["both"]}, "copies must be"),
])
def test_bad_options(options, message):
    with pytest.raises(OrderError, match=message):
        jacacc.optimize(paper003.fig4_1b(), method="levels", **options)


def test_level_jacobians_refuse_bad_arguments():
    with pytest.raises(OrderError, match="side must be"):
        level_jacobians(paper003.fig3_1a(), side="up")
    with pytest.raises(OrderError, match="copy must be"):
        level_jacobians(paper003.fig3_1a(), copy="up")


def test_dp_on_fig4_1a_matches_brute_force():
    # four level Jacobians of shapes 2×1, 1×2, 2×1, 1×2 (Fig. 4.1 (a)): all five bracketings compared
    g = paper003.fig4_1a()
    mats = level_jacobians(g)
    patterns = [{r: set(row) for r, row in m.items()} for m in mats]
    assert matrix_chain(patterns)[:2] == brute_force(patterns)[0]
