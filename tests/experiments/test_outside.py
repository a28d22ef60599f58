"""The outside benchmark (experiments/outside.py): its objectives and their sources, the NumPy and JAX
spellings agreeing, a refusal recorded as a row, and (``scripts`` tier, through the ``record`` fixture)
the quick run end to end and its record's schema."""

from __future__ import annotations

import math

import numpy as np
import pytest
from experiment_scripts import load_experiment

from jacacc.bench import read_record

#: small objectives whose two spellings are compared: a dict of parameters with per-component
#: solves and slogdets, a Python loop with solves, a zero-padded 2-D stencil
SPELLED_TWICE = ("autograd_gmm", "kalman_filter", "bratu")


@pytest.fixture(scope="module")
def script():
    return load_experiment("outside")


@pytest.fixture(scope="module")
def record(script, tmp_path_factory):
    """The quick run of every objective (under a minute on one core)."""
    pytest.importorskip("jax")
    pytest.importorskip("torch")
    pytest.importorskip("threadpoolctl")
    path = tmp_path_factory.mktemp("outside") / "outside.json"
    assert script.main(["--quick", "--out", str(path)]) == 0
    return read_record(path)


def test_at_least_twenty_objectives_each_with_a_source(script):
    names = [o.name for o in script.OBJECTIVES]
    assert len(names) >= 20 and len(set(names)) == len(names)
    assert script.BY_NAME == {o.name: o for o in script.OBJECTIVES}
    for objective in script.OBJECTIVES:
        assert objective.source.strip() and objective.function.__doc__, objective.name
        assert objective.name in script.__doc__, f"{objective.name} missing from the docstring's source table"
        quick, full = objective.sizes
        assert 0 < quick <= full


def test_arguments_are_float_trees_of_the_stated_size(script):
    for objective in script.OBJECTIVES:
        args = objective.arguments(objective.sizes[0], np.random.default_rng(0))
        leaves = script.tree_leaves(args[0])
        assert leaves and all(np.asarray(leaf).dtype == np.float64 for leaf in leaves), objective.name
        assert script.parameter_count(args[0]) == sum(np.asarray(leaf).size for leaf in leaves)


@pytest.mark.parametrize("name", SPELLED_TWICE)
def test_numpy_and_jax_spellings_give_the_same_value(script, name):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    objective = script.BY_NAME[name]
    args = objective.arguments(objective.sizes[0], np.random.default_rng([0, script.OBJECTIVES.index(objective)]))
    value = float(objective.function(*args, xp=np))
    with jax.enable_x64(True):
        twin = float(objective.function(*script.tree_map(jnp.asarray, args), xp=jnp))
    assert math.isfinite(value)
    assert twin == pytest.approx(value, rel=1e-12, abs=1e-12)


def test_tree_leaves_follow_jax_order(script):
    jax = pytest.importorskip("jax")
    tree = {"b": [np.ones(2), (np.zeros(3), np.full(1, 2.0))], "a": np.arange(2.0)}
    ours = script.tree_leaves(tree)
    theirs = jax.tree_util.tree_leaves(tree)
    assert len(ours) == len(theirs) and all(np.array_equal(a, b) for a, b in zip(ours, theirs, strict=True))
    assert script.flatten(tree).tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 2.0]


def test_a_refusal_is_a_row_not_a_crash(script, monkeypatch):
    """An exception of jacacc is recorded as ``refused`` with its one-line message and never timed."""
    pytest.importorskip("jax")
    from jacacc.errors import UnsupportedOperationError

    def refuse(*args, **kwargs):
        raise UnsupportedOperationError("np.isnan is not supported by jacacc.tensor\nsecond line")

    monkeypatch.setitem(script.CALLS, "jacacc", refuse)
    objective = script.BY_NAME["wood"]
    args = objective.arguments(4, np.random.default_rng(0))
    import jax

    with jax.enable_x64(True):
        row = script.measure_row(objective, 4, "gradient", args, 1, 0.0, warm_seconds=0.0)
    assert row["status"] == "refused" and row["right"] is None
    assert row["refused"] == "UnsupportedOperationError: np.isnan is not supported by jacacc.tensor"
    assert row["warm_s"]["jacacc"] is None and row["jax_over_jacacc"] is None
    assert row["warm_s"]["jax"] > 0
    summary = script.summarize([row])
    assert summary["gradient"]["refused"] == 1 and summary["gradient"]["not_right"][0]["status"] == "refused"


def test_quick_record_schema(record, script):
    assert record["experiment"] == "outside" and record["seed"] == 0
    assert record["environment"]["versions"]["jax"] and record["environment"]["versions"]["numpy"]
    params = record["parameters"]
    assert params["quick"] is True and params["rtol"] == 1e-8 and params["repeats"] == script.QUICK_REPEATS
    assert params["warm_up_calls"] >= 8 and params["threads"] == 1 and params["torch_threads"] == 1
    assert params["jax_enable_x64"] is True and "--xla_cpu_multi_thread_eigen=false" in params["xla_flags"]
    assert set(params["objectives"]) == set(script.BY_NAME) and params["wall_s"] > 0
    assert "commit" in params["source"] and params["numba_threads"] in (None, 1)
    results = record["results"]
    assert "partial" not in results
    rows = results["rows"]
    for objective in script.OBJECTIVES:
        mine = [r for r in rows if r["objective"] == objective.name]
        wanted = ["gradient", "hessian"] if mine[0]["params"] <= script.HESSIAN_MAX_PARAMS else ["gradient"]
        assert [r["derivative"] for r in mine] == wanted and mine[0]["source"] == objective.source
    for r in rows:
        assert r["status"] in ("right", "wrong", "refused", "no reference"), r
        assert set(r["first_call_s"]) == set(r["warm_s"]) == set(script.LIBRARIES)
        if r["status"] == "refused":
            assert isinstance(r["refused"], str) and "\n" not in r["refused"] and r["warm_s"]["jacacc"] is None
        else:
            assert r["refused"] is None and r["first_call_s"]["jacacc"] > 0
        if r["status"] in ("right", "wrong"):
            assert r["right"] == (r["status"] == "right") == (r["max_rel_error"] <= script.RTOL)
        if r["status"] == "right":
            assert r["warm_s"]["jacacc"] > 0 and len(r["libraries"]["jacacc"]["samples"]) == script.QUICK_REPEATS
        if r["jax_over_jacacc"] is not None:
            assert r["jax_over_jacacc"] == pytest.approx(r["warm_s"]["jax"] / r["warm_s"]["jacacc"])
        if r["torch_over_jacacc"] is not None:
            assert r["torch_over_jacacc"] == pytest.approx(r["warm_s"]["torch"] / r["warm_s"]["jacacc"])
    assert sum(r["status"] == "right" for r in rows) >= len(rows) // 2
    for derivative, s in results["summary"].items():
        mine = [r for r in rows if r["derivative"] == derivative]
        ratios = [r["jax_over_jacacc"] for r in mine if r["jax_over_jacacc"] is not None]
        assert s["objectives"] == len(mine) == s["right"] + s["wrong"] + s["refused"] + len(
            [r for r in mine if r["status"] == "no reference"])
        assert s["geomean_jax_over_jacacc"] == pytest.approx(float(np.exp(np.mean(np.log(ratios)))))
    table = script.table_text(record)
    assert table.startswith("| objective | derivative |") and "| hessian |" in table
