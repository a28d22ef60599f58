"""The scattered-slices comparison (experiments/scattered_slices.py): a quick run agrees both ways and
names the rule's pick; the committed record holds the cost model fusion uses now, and in it the rule
picked a way within 1.1x of the faster at every case."""

from __future__ import annotations

import os

import pytest
from experiment_scripts import load_experiment

from jacacc.bench import read_record
from jacacc.tensor import fusion

pytestmark = pytest.mark.scripts


def test_a_quick_run_times_both_ways(tmp_path):
    script = load_experiment("scattered_slices")
    out = tmp_path / "scattered_slices.json"
    assert script.main(["--quick", "--out", str(out)]) == 0
    rows = read_record(out)["results"]
    assert [(r["n"], r["slices"], r["width"]) for r in rows] == [tuple(c) for c in script.CASES[:3]]
    for row in rows:
        assert row["kernel_s"] > 0 and row["scattered_s"] > 0 and row["rule"] in ("kernel", "scattered")


def test_the_record_fits_the_rule_fusion_uses():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "results", "scattered_slices.json")
    record = read_record(path)
    parameters = record["parameters"]
    assert (parameters["bracket_test_elements"], parameters["bracket_growth"], parameters["scattered_entry_elements"],
            parameters["scattered_slice_calls"]) == (fusion.BRACKET_TEST_ELEMENTS, fusion.BRACKET_GROWTH,
                                                     fusion.SCATTERED_ENTRY_ELEMENTS, fusion.SCATTERED_SLICE_CALLS)
    assert all(row["picked_within"] <= 1.1 for row in record["results"])
