"""A long elementwise sum with an empty cache (experiments/long_sum.py) in its quick mode: both
variants in fresh children, the values and gradients agree, the record's fields and table."""

from __future__ import annotations

import pytest
from experiment_scripts import load_experiment

from jacacc.bench import read_record

pytest.importorskip("numba")
pytest.importorskip("jax")


@pytest.fixture(scope="module")
def script():
    return load_experiment("long_sum")


@pytest.fixture(scope="module")
def record(script, tmp_path_factory):
    path = tmp_path_factory.mktemp("long_sum") / "record.json"
    assert script.main(["--quick", "--out", str(path)]) == 0
    return read_record(path)


def test_both_variants_ran_and_agree(record, script):
    rows = record["results"]["rows"]
    assert {(r["terms"], r["variant"]) for r in rows} == {(60, v) for v in script.VARIANTS}
    for r in rows:
        assert r["status"] == "ok" and r["agrees_with_jax"] and r["total_s"] > 0 and r["peak_mb"] > 0, r
    jacacc = next(r for r in rows if r["variant"] == "jacacc")
    assert jacacc["total_s"] == pytest.approx(jacacc["define_s"] + jacacc["first_s"] + jacacc["vjp_s"])
    assert jacacc["agrees_with_numpy"] and jacacc["tables"] >= 1 and "sum(t" in jacacc["printed"]  # the like terms became a table
    assert jacacc["within_target"] == (jacacc["total_s"] <= script.TARGET_S and jacacc["peak_mb"] <= script.TARGET_MB)


def test_table_has_a_row_per_variant(record, script):
    text = script.table_text(record["results"]["rows"])
    assert text.count("\n| 60 |") == 2
