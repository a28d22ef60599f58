"""paper_reproductions/000_elementwise_derivatives.py and experiments/elementwise_kernels.py, quick runs.

Both run in a subprocess with ``QUICK=1`` (the reproduction asserts its claims
itself; the benchmark's record is read back and checked here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from experiment_scripts import PNG_MAGIC, REPO

REPRODUCTION = REPO / "paper_reproductions" / "000_elementwise_derivatives.py"
BENCHMARK = REPO / "experiments" / "elementwise_kernels.py"


def _run(args: list[str]) -> subprocess.CompletedProcess:
    pytest.importorskip("jax")
    pytest.importorskip("torch")
    pytest.importorskip("numba")
    env = {**os.environ, "QUICK": "1"}
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.mark.slow  # ~25 s (`make test-slow`); §6 against JAX and the intro examples are also in test_elementwise
def test_reproduction_script():
    out = _run([str(REPRODUCTION)]).stdout
    assert "all paper 000 checks passed" in out
    # §6's derivative w.r.t. d gathers over z with i = dd0 − z (the paper's output, zero-based)
    assert "sum(z, max(0, dd0 - 2), min(4, dd0), " in out and "df[dd0 - z, j]" in out
    assert "df elements gathered by dd[d0], d0 = 0…7: [4, 8, 12, 12, 12, 8, 4, 0]" in out
    assert "Σ(−1) = [1, 2, 3]" in out
    assert "exact match found" in out


@pytest.mark.slow  # ~20 s of compiling and timing; the peers' agreement is also checked by test_elementwise
def test_benchmark_quick_run(tmp_path):
    pytest.importorskip("matplotlib")
    record_path, figure = tmp_path / "elementwise_kernels.json", tmp_path / "elementwise_kernels.png"
    _run([str(BENCHMARK), "--out", str(record_path), "--figure", str(figure)])
    record = json.loads(record_path.read_text())
    assert record["experiment"] == "elementwise_kernels" and record["environment"]["versions"]["numpy"]
    assert record["parameters"]["quick"] and record["seed"] == 0
    rows = record["results"]["rows"]
    assert {r["case"] for r in rows} == {"section6", "conv1d", "conv2d", "lowrank"}
    for r in rows:
        tools = r["tools"]
        assert set(tools) == {"jacacc", "jax", "torch"}
        for peer in ("jax", "torch"):  # each peer was checked against jacacc before it was timed
            assert tools[peer]["max_relative_difference"] <= 1e-8
        times = {t: v["median_s"] for t, v in tools.items()}
        assert all(t > 0 for t in times.values())
        best = min(times["jax"], times["torch"])
        assert r["jacacc_over_best_peer"] == pytest.approx(times["jacacc"] / best)
        # the function's kernel and one derivative kernel per argument (and any stored intermediates)
        assert {"f", *(f"d{name}" for name in r["shapes"])} <= set(r["kernels"])
    assert figure.read_bytes()[:8] == PNG_MAGIC
