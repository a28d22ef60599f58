"""The breadth benchmark (experiments/tensor_breadth.py) end to end in its quick mode: the record's
structure, every jacacc result checked against JAX's, the summary, the figure and the README table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from experiment_scripts import PNG_MAGIC, load_experiment

from jacacc.bench import read_record

pytest.importorskip("jax")
pytest.importorskip("torch")
pytest.importorskip("opt_einsum")
pytest.importorskip("matplotlib")


SIZES = (8,)  # the smallest quick size: the script's paths, not its timings, are under test


@pytest.fixture(scope="module")
def script():
    return load_experiment("tensor_breadth")


@pytest.fixture(scope="module")
def run(script, tmp_path_factory):
    """Every objective at one quick size (about 10 s on one core)."""
    out = tmp_path_factory.mktemp("tensor_breadth")
    assert script.main(["--quick", "--sizes", *map(str, SIZES), "--out", str(out)]) == 0
    return out, read_record(out / "results" / "tensor_breadth.json")


def test_at_least_sixteen_objectives_of_several_families(script):
    assert len(script.OBJECTIVES) >= 16
    assert len({o.family for o in script.OBJECTIVES}) >= 8
    for objective in script.OBJECTIVES:
        small, large = objective.sizes
        assert small == script.SMALL and 512 <= large <= 1000


def test_record_structure(run, script):
    out, record = run
    assert record["experiment"] == "tensor_breadth" and record["seed"] == 0
    assert record["environment"]["versions"]["jax"] and record["environment"]["versions"]["torch"]
    params = record["parameters"]
    assert params["quick"] is True and params["dtype"] == "float64" and params["tolerance"] == 1e-8
    assert params["objectives"] == [o.name for o in script.OBJECTIVES]
    assert params["torch_threads"] == 1 and params["blas_threads"]
    assert "--xla_cpu_multi_thread_eigen=false" in params["xla_flags"]
    results = record["results"]
    assert "partial" not in results
    rows = results["rows"]
    keys = {(r["objective"], r["n"], r["quantity"], r["library"]) for r in rows}
    assert len(keys) == len(rows) == len(script.OBJECTIVES) * len(SIZES) * 3 * 3
    for r in rows:
        assert r["params"] == math.prod(r["shape"]) and r["status"] in ("ok", "mismatch", "error", "refused")
    assert len(results["ratios"]) == len(script.OBJECTIVES) * len(SIZES) * 3
    assert set(results["summary"]) == set(script.QUANTITIES)
    assert (out / "figures" / "tensor_breadth.png").read_bytes()[:8] == PNG_MAGIC


def test_every_jacacc_result_matched_jax(run):
    _, record = run
    rows = record["results"]["rows"]
    for r in rows:
        if r["library"] == "jax":
            assert r["status"] == "ok" and r["reference"] is None, r
            continue
        assert r["status"] == "ok", r
        assert r["reference"] == "jax" and r["matches"] is True and r["max_rel_error"] <= 1e-8, r
        assert r["first_call_s"] > 0 and len(r["samples"]) == 2
        assert 0 < r["best_s"] <= r["median_s"]


def test_summary_is_the_geometric_mean_and_worst_of_the_ratios(run):
    _, record = run
    results = record["results"]
    for quantity, s in results["summary"].items():
        ratios = [r["ratio"] for r in results["ratios"] if r["quantity"] == quantity]
        assert s["compared"] == len(ratios) and s["jacacc_failed"] == []
        assert s["geomean_ratio"] == pytest.approx(float(np.exp(np.mean(np.log(ratios)))))
        assert s["worst_ratio"] == max(ratios) and s["best_ratio"] == min(ratios)
        assert s["geomean_speedup"] == pytest.approx(1 / s["geomean_ratio"])
    for r in results["ratios"]:
        assert r["ratio"] == pytest.approx(r["seconds"]["jacacc"] / min(r["seconds"]["jax"], r["seconds"]["torch"]))


def test_readme_table(run, script):
    _, record = run
    table = script.readme_table(record)
    lines = table.splitlines()
    assert lines[0].startswith("| objective | params | value jacacc |")
    assert sum(line.startswith("| logistic_l2 |") for line in lines) == len(SIZES)
    assert any(line.startswith("| hessian |") for line in lines)


def test_readme_block_is_rendered_from_the_record(run, tmp_path):
    """update_readme --only tensor-breadth fills the breadth block and leaves the rest alone."""
    out, _ = run
    update = load_experiment("update_readme")
    readme = tmp_path / "README.md"
    readme.write_text(f"a\n{update.BREADTH_START}\nold\n{update.BREADTH_END}\nb\n")
    assert update.main(["--results", str(out / "results"), "--readme", str(readme), "--only", "tensor-breadth"]) == 0
    text = readme.read_text()
    assert text.startswith("a\n") and text.endswith(f"{update.BREADTH_END}\nb\n") and "\nold\n" not in text
    assert "| logistic_l2 |" in text and "| hessian |" in text and "figures/tensor_breadth.png" in text


def test_a_refusal_or_failure_is_a_row_not_a_crash(script, monkeypatch):
    """An operation jacacc refuses is recorded as ``refused`` with its message and never timed."""
    from jacacc.errors import UnsupportedOperationError

    def refuse(*args, **kwargs):
        raise UnsupportedOperationError("np.linalg.svd is not supported by jacacc.tensor")

    monkeypatch.setitem(script.PREPARE, "jacacc", refuse)
    objective = script.BY_NAME["ridge"]
    args = objective.arguments(4, np.random.default_rng(0))
    row, result = script.measure(objective, "gradient", "jacacc", args, None, 1, 0.0)
    assert result is None and row["status"] == "refused" and "svd" in row["error"] and "best_s" not in row
    ratios = script.ratio_rows([{"objective": "ridge", "n": 4, "params": 4, "quantity": "gradient", **row},
                                {"objective": "ridge", "n": 4, "params": 4, "quantity": "gradient",
                                 "library": "jax", "status": "ok", "best_s": 1e-5}])
    assert ratios[0]["ratio"] is None and ratios[0]["jacacc_status"] == "refused"
    assert script.summarize(ratios)["gradient"]["jacacc_failed"][0]["status"] == "refused"


def test_a_mismatch_is_recorded_and_not_timed(script):
    objective = script.BY_NAME["quadratic_form"]
    args = objective.arguments(4, np.random.default_rng(0))
    wrong = (np.zeros(()), "jax")
    row, _ = script.measure(objective, "value", "jacacc", args, wrong, 1, 0.0)
    assert row["status"] == "mismatch" and row["matches"] is False and "samples" not in row


def test_torch_namespace_spells_numpy(script):
    import torch

    xp = script.TorchNumPy()
    a = torch.arange(6.0, dtype=torch.float64).reshape(2, 3)
    assert xp.max(a, axis=1, keepdims=True).tolist() == [[2.0], [5.0]]
    assert float(xp.mean(a)) == 2.5 and xp.eye(2).dtype == torch.float64
    assert float(xp.exp(torch.zeros((), dtype=torch.float64))) == 1.0
