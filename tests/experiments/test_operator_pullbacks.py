"""The pullback comparison (experiments/operator_pullbacks.py): a tiny run's record holds every
operator that still declares a vjp, each agreeing with its transposed pushforward; and the
committed record shows what the deletion of the others rested on."""

from __future__ import annotations

import os

import pytest
from experiment_scripts import load_experiment

from jacacc.bench import read_record
from jacacc.tensor.operators import get_operator

pytestmark = pytest.mark.scripts


def test_a_tiny_run_compares_every_declared_vjp(tmp_path):
    script = load_experiment("operator_pullbacks")
    assert script.main(["--sizes", "8", "--out", str(tmp_path)]) == 0
    rows = read_record(tmp_path / "results" / "operator_pullbacks.json")["results"]
    declared = {name for name in script._cases(8, __import__("numpy").random.default_rng(0))
                if get_operator(name).vjp is not None}
    assert {r["operator"] for r in rows} == declared
    for row in rows:
        assert row["difference"] < 1e-12, row
        assert row["declared_s"] > 0 and row["transposed_s"] > 0


def test_the_kept_vjps_are_those_whose_transposed_pullback_costs_more_flops():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "results", "operator_pullbacks.json")
    rows = read_record(path)["results"]
    for row in rows:
        kept = get_operator(row["operator"]).vjp is not None
        assert kept == (row["transposed_flops"] > row["declared_flops"]), row
