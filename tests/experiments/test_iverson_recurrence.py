"""A long Iverson recurrence's gradient with an empty cache (experiments/iverson_recurrence.py) in its
quick mode: both variants in fresh children, the gradients agree, the record's fields and table."""

from __future__ import annotations

import pytest
from experiment_scripts import load_experiment

from jacacc.bench import read_record

pytest.importorskip("numba")
pytest.importorskip("jax")


@pytest.fixture(scope="module")
def script():
    return load_experiment("iverson_recurrence")


@pytest.fixture(scope="module")
def record(script, tmp_path_factory):
    path = tmp_path_factory.mktemp("iverson_recurrence") / "record.json"
    assert script.main(["--quick", "--out", str(path)]) == 0
    return read_record(path)


def test_both_variants_ran_and_agree(record, script):
    rows = record["results"]["rows"]
    assert {(r["steps"], r["variant"]) for r in rows} == {(10, v) for v in script.VARIANTS}
    for r in rows:
        assert r["status"] == "ok" and r["agrees_with_jax"] and r["total_s"] > 0 and r["warm_s"] > 0, r
    jacacc = next(r for r in rows if r["variant"] == "jacacc")
    # the phases add up, and the recurrence's steps share their kernels
    assert jacacc["total_s"] == pytest.approx(jacacc["grad_s"] + jacacc["compile_s"] + jacacc["first_s"])
    assert jacacc["bindings"] > 2 * 10 and jacacc["kernels"] < jacacc["bindings"] // 3


def test_table_has_a_row_per_length(record, script):
    text = script.table_text(record["results"]["rows"])
    assert text.count("\n| 10 |") == 1 and "jax.jit first call" in text
