"""The first-call benchmark (experiments/first_call.py) at a tiny size: the record's structure, the
phases of every child, the warm caches and a summary computed from the rows."""

from __future__ import annotations

import importlib.util
import statistics

import pytest
from experiment_scripts import load_experiment

from jacacc.bench import read_record

pytest.importorskip("numba")

# a cheap one whose gradient runs a fused kernel and whose Hessian none: the script's paths, not its
# timings, are under test (each child is a fresh process with its imports: about 0.5 s)
OBJECTIVES = ("ridge",)
N = 64
HAS_JAX = importlib.util.find_spec("jax") is not None


@pytest.fixture(scope="module")
def script():
    return load_experiment("first_call")


@pytest.fixture(scope="module")
def record(script, tmp_path_factory):
    """One objective, one child per row: 4 warm-up children and 8 timed (about 10 s)."""
    out = tmp_path_factory.mktemp("first_call")
    cache = tmp_path_factory.mktemp("first_call_cache")
    argv = ["--objectives", *OBJECTIVES, "--n", str(N), "--repeats", "1", "--out", str(out), "--cache-dir", str(cache)]
    assert script.main(argv) == 0
    return read_record(out / "first_call.json")


def timed_rows(record, library=None):
    return [r for r in record["results"]["rows"] if r["status"] == "ok" and library in (None, r["library"])]


def test_record_has_a_row_per_objective_quantity_library_and_variant(record, script):
    assert record["experiment"] == "first_call" and record["seed"] == 0
    params = record["parameters"]
    assert params["objectives"] == list(OBJECTIVES) and params["n"] == dict.fromkeys(OBJECTIVES, N)
    assert params["repeats"] == 1 and params["warm_up_failures"] == []
    rows = record["results"]["rows"]
    keys = {(r["objective"], r["quantity"], r["library"], r["variant"]) for r in rows}
    assert len(keys) == len(rows) == len(OBJECTIVES) * len(script.QUANTITIES) * len(script.LIBRARIES) * 2
    for r in rows:
        assert r["n"] == N
        assert r["status"] == ("ok" if r["library"] == "jacacc" or HAS_JAX else "skipped"), r


def test_every_child_reports_positive_phases(record):
    for r in timed_rows(record):
        assert len(r["samples"]) == 1 and not r["errors"]
        for phase in ("numpy_import_s", "import_s", "setup_s", "first_call_s", "second_call_s", "child_wall_s"):
            assert r["best"][phase] > 0, (r["objective"], r["library"], phase)
        assert all(0 < r["best"][p] <= r["median"][p] for p in r["best"])
        assert r["best"]["child_wall_s"] > r["best"]["import_s"] + r["best"]["first_call_s"]
        assert r["samples"][0]["info"]["shape"] == ([N] if r["quantity"] == "grad" else [N, N])


def test_the_started_variant_times_the_start_up_apart(record):
    for r in timed_rows(record):
        phases = r["samples"][0]["phases"]
        start = {"jacacc": "numba_start_s", "jax": "backend_start_s"}[r["library"]]
        assert (start in phases) == (r["variant"] == "started")
        if r["library"] == "jacacc" and r["variant"] == "started":
            assert phases["numba_start_s"] == pytest.approx(phases["numba_import_s"] + phases["numba_init_s"])
            assert r["samples"][0]["info"]["scipy_linalg_after_init"]  # Numba's target initialisation imports it


def test_jacacc_children_load_every_kernel_from_the_warm_cache(record):
    for r in timed_rows(record, "jacacc"):
        info = r["samples"][0]["info"]
        assert info["cache_misses"] == 0 and (info["cache_hits"] > 0) == (info["kernels"] > 0), r
        if info["kernels"] or r["variant"] == "started":  # planning finds Numba without importing it
            assert info["numba_after_first_call"]


@pytest.mark.skipif(not HAS_JAX, reason="jax is not installed")
def test_jax_children_load_their_executables_from_the_warm_cache(record):
    for r in timed_rows(record, "jax"):
        info = r["samples"][0]["info"]
        assert info["cache_hits"] >= 1 and info["cache_misses"] == 0, r


def test_summary_follows_from_the_rows(record, script):
    summary = record["results"]["summary"]
    assert summary["target_s"] == script.TARGET_S
    for library in script.LIBRARIES:
        for quantity in script.QUANTITIES:
            mine = [r for r in timed_rows(record, library) if r["quantity"] == quantity]
            s = summary[library][quantity]
            if not mine:
                assert s is None
                continue
            for variant in script.VARIANTS:
                rows = [r for r in mine if r["variant"] == variant]
                worst = max(rows, key=lambda r: r["median"]["first_call_s"])
                largest = s["largest_first_call_s"][variant]
                assert largest["seconds"] == worst["median"]["first_call_s"]
                assert largest["objective"] == worst["objective"]
            start = script.START_PHASE[library]
            assert s["median_start_s"] == statistics.median(
                r["median"][start] for r in mine if r["variant"] == "started")
            assert s["median_import_s"] == statistics.median(r["median"]["import_s"] for r in mine)
            first = {(r["objective"], r["variant"]): r["median"]["first_call_s"] for r in mine}
            assert s["median_cold_minus_started_s"] == pytest.approx(statistics.median(
                first[o, "cold"] - first[o, "started"] for o in OBJECTIVES))
    for quantity, under in summary["jacacc_under_target"].items():
        assert under == (summary["jacacc"][quantity]["largest_first_call_s"]["started"]["seconds"] < script.TARGET_S)


def test_table_lists_every_objective_and_quantity(record, script):
    table = script.readme_table(record)
    for objective in OBJECTIVES:
        for quantity in script.QUANTITIES:
            assert f"| {objective} | {N} | {quantity} |" in table
    assert "| jacacc | grad |" in table and "| jax | hessian |" in table
