"""The loop benchmark (experiments/loop_scaling.py): the quick run end to end in fresh processes, its
record's rows, and jacacc's gradients and Hessians agreeing with JAX's."""

from __future__ import annotations

import pytest
from experiment_scripts import load_experiment

from jacacc.bench import read_record

pytestmark = pytest.mark.scripts


def test_quick_run_records_linear_plans_that_agree_with_jax(tmp_path):
    pytest.importorskip("jax")
    script = load_experiment("loop_scaling")
    path = tmp_path / "loops.json"
    assert script.main(["--steps", "4", "8", "--warm-seconds", "0.2", "--out", str(path)]) == 0
    rows = read_record(path)["results"]
    assert {(r["library"], r["derivative"], r["steps"]) for r in rows} == {
        (lib, d, t) for lib in script.LIBRARIES for d in script.DERIVATIVES for t in (4, 8)}
    ours = {(r["derivative"], r["steps"]): r for r in rows if r["library"] == "jacacc"}
    for r in ours.values():
        assert r["status"] == "ok", r
        assert r["relative_error"] < 1e-9, r
        assert r["first_s"] > 0 and r["warm_s"] > 0 and r["warm_ratio"] > 0
    for derivative in script.DERIVATIVES:  # twice the steps, at most a little over twice the nodes
        assert ours[(derivative, 8)]["nodes"] <= 2.2 * ours[(derivative, 4)]["nodes"]
