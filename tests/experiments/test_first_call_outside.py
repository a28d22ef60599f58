"""The outside set's first calls with an empty cache (experiments/first_call_outside.py) in its quick
mode: one objective's gradient and Hessian, each variant in a fresh child; the record's structure,
agreement with JAX, and the summary's target computed from the rows."""

from __future__ import annotations

import pytest
from experiment_scripts import load_experiment

from jacacc.bench import read_record

pytest.importorskip("numba")
pytest.importorskip("jax")


@pytest.fixture(scope="module")
def script():
    return load_experiment("first_call_outside")


@pytest.fixture(scope="module")
def record(script, tmp_path_factory):
    path = tmp_path_factory.mktemp("first_call_outside") / "record.json"
    assert script.main(["--quick", "--out", str(path)]) == 0
    return read_record(path)


def test_every_variant_ran_and_agrees_with_jax(record, script):
    rows = record["results"]["rows"]
    assert {(r["objective"], r["quantity"], r["variant"]) for r in rows} == {
        (script.OBJECTIVES[0], q, v) for q in script.QUANTITIES for v in script.VARIANTS}
    for r in rows:
        assert r["first_s"] > 0 and r["warm_s"] > 0 and r["import_s"] > 0, r
        assert r["agrees_with_jax"], r


def test_summary_follows_from_the_rows(record):
    rows = {(r["quantity"], r["variant"]): r for r in record["results"]["rows"]}
    for s in record["results"]["summary"]:
        jax_first = rows[s["quantity"], "jax"]["first_s"]
        assert s["limit_s"] == max(2.0, jax_first)
        assert s["jacacc_first_s"] == rows[s["quantity"], "jacacc"]["first_s"]
        assert s["within_target"] == (s["jacacc_first_s"] <= s["limit_s"])
