"""The compile-scaling benchmark (experiments/compile_scaling.py) in its quick mode: the record's
structure, the tiers, the checks of every child, the warm cache, the summary, the figure and the
table; and a child past its timeout recorded as timed out, the series skipped after it."""

from __future__ import annotations

import importlib.util

import pytest
from experiment_scripts import PNG_MAGIC, load_experiment

from jacacc.bench import read_record

pytest.importorskip("numba")
pytest.importorskip("matplotlib")

HAS_JAX = importlib.util.find_spec("jax") is not None
QUICK_LAYERS = (1, 2)
QUICK_JAX_LAYERS = (2,)


@pytest.fixture(scope="module")
def script():
    return load_experiment("compile_scaling")


@pytest.fixture(scope="module")
def run(script, tmp_path_factory):
    """``--quick``: L = 1 and 2, each tier (table cold and warm cache, straight-line) and JAX at L = 2,
    eight fresh children (about 20 s on two cores: every cold table child compiles the interpreter)."""
    out = tmp_path_factory.mktemp("compile_scaling")
    record_path, figure = out / "results" / "compile_scaling.json", out / "figures" / "compile_scaling.png"
    caches = tmp_path_factory.mktemp("compile_scaling_caches")
    assert script.main(["--quick", "--out", str(record_path), "--figure", str(figure),
                        "--cache-root", str(caches)]) == 0
    return read_record(record_path), figure, caches


def rows_of(record, series):
    return sorted((r for r in record["results"]["rows"] if r["series"] == series), key=lambda r: r["layers"])


def test_quick_grid_and_parameters(run, script):
    record, _, caches = run
    assert record["experiment"] == "compile_scaling" and record["seed"] == 0
    assert record["environment"]["versions"]["numba"]
    params = record["parameters"]
    assert params["quick"] is True and params["threads"] == 1 and params["tolerance"] == 1e-10
    assert params["layers"] == list(QUICK_LAYERS) and params["straight_layers"] == list(QUICK_LAYERS)
    assert params["jax_layers"] == (list(QUICK_JAX_LAYERS) if HAS_JAX else [])
    assert params["child_environment"]["NUMBA_NUM_THREADS"] == "1"
    assert "--xla_cpu_multi_thread_eigen=false" in params["child_environment"]["XLA_FLAGS"]
    expected = {(series, L) for L in QUICK_LAYERS
                for series in ("jacacc-table", "jacacc-table-warm-cache", "jacacc-straight")}
    if HAS_JAX:
        expected |= {(f"jax-{mode}", L) for L in QUICK_JAX_LAYERS for mode in script.JAX_MODES}
    rows = record["results"]["rows"]
    assert {(r["series"], r["layers"]) for r in rows} == expected and len(rows) == len(expected)
    for r in rows:
        assert r["status"] == "ok" and r["timed_out"] is False, r
        assert r["child_wall_s"] > 0 and r["peak_rss_mib"] > 10
        assert r["first_call_s"] > 0 and 0 < r["warm_s"] <= min(r["warm_samples_s"]) + 1e-12
    assert list(caches.iterdir()) == []  # every child's cache directory removed


def test_tiers_statements_and_timings(run):
    record, _, _ = run
    table, straight = rows_of(record, "jacacc-table"), rows_of(record, "jacacc-straight")
    warm = rows_of(record, "jacacc-table-warm-cache")
    for rows, tier in ((table, "table"), (warm, "table"), (straight, "straight")):
        for r in rows:
            assert r["library"] == "jacacc" and r["tier"] == r["kernel_tier"] == tier
            assert r["numba_threads"] == 1
            for phase in ("import_s", "numba_start_s", "trace_s", "plan_lower_s", "compile_s"):
                assert r[phase] > 0, (r["series"], phase)
            assert r["time_to_first_jacobian_s"] == pytest.approx(
                r["trace_s"] + r["plan_lower_s"] + r["compile_s"] + r["first_call_s"])
    statements = [r["statements"] for r in table]
    assert statements[0] > 50 and statements == sorted(set(statements))  # grow with L
    for rows in (straight, warm):
        assert [r["statements"] for r in rows] == statements
    for r in table + warm:
        assert r["instructions"] >= r["statements"] and r["registers"] > 0


def test_every_check_passes(run):
    record, _, _ = run
    for r in record["results"]["rows"]:
        if r["library"] == "jacacc":
            assert r["reference"] == "numpy/straight" and r["check_points"] == 4
            for key in ("max_rel_error", "values_max_rel_error", "values_rel_error_vs_direct"):
                assert 0 <= r[key] < 1e-10, (r["series"], r["layers"], key)
            assert "check_jacobians" not in r  # dropped once compared
        else:
            assert r["dtype"] == "float64" and 0 <= r["max_rel_error_vs_jacacc"] < 1e-10
    assert record["results"]["summary"]["failures"] == []


def test_table_tier_compiles_the_interpreter_once(run):
    """Cold children start from an empty cache and compile the interpreter; the next program of the
    same operations compiles nothing; the warm-cache child loads it from the cache the cold one filled."""
    record, _, _ = run
    table, warm = rows_of(record, "jacacc-table"), rows_of(record, "jacacc-table-warm-cache")
    for cold, cached in zip(table, warm, strict=True):
        assert cold["variant"] == "cold" and cold["cache_files_before"] == 0 and cold["cache_files_after"] > 0
        assert cached["variant"] == "warm_cache" and cached["cache_files_before"] > 0
        assert cached["compile_s"] < cold["compile_s"]
        assert "second" not in cached
        second = cold["second"]
        assert second["layers"] == cold["layers"] + 1 and second["kernel_tier"] == "table"
        assert second["statements"] > cold["statements"]
        assert second["compile_s"] < cold["compile_s"] / 5  # the interpreter already compiled
        assert 0 <= second["max_rel_error"] < 1e-10
    for r in rows_of(record, "jacacc-straight"):
        assert r["cache_files_before"] == 0 and "second" not in r


@pytest.mark.skipif(not HAS_JAX, reason="jax is not installed")
def test_jax_rows_and_ratios(run):
    record, _, _ = run
    for mode in ("jacfwd", "jacrev"):
        (r,) = rows_of(record, f"jax-{mode}")
        assert r["library"] == "jax" and r["mode"] == mode and r["backend_start_s"] > 0
        assert r["statements"] == rows_of(record, "jacacc-table")[-1]["statements"]
        assert r["jaxpr_equations"] > 0 and r["devices"]
    (ratio,) = record["results"]["summary"]["ratios"]
    best = min((rows_of(record, f"jax-{m}")[0] for m in ("jacfwd", "jacrev")), key=lambda r: r["warm_s"])
    table = rows_of(record, "jacacc-table")[-1]
    assert ratio["layers"] == 2 and ratio["best_jax"] == best["series"]
    assert ratio["table_over_best_jax_warm"] == pytest.approx(table["warm_s"] / best["warm_s"])


def test_summary_figure_and_table(run, script):
    record, figure, _ = run
    summary = record["results"]["summary"]
    table = rows_of(record, "jacacc-table")
    assert summary["interpreter_compile_s"] == table[0]["compile_s"]
    assert summary["straight_timed_out_at"] == []
    assert set(summary["table_second_program_compile_s"]) == {str(L + 1) for L in QUICK_LAYERS}
    assert figure.read_bytes()[:8] == PNG_MAGIC
    text = script.table_text(record)
    for r in record["results"]["rows"]:
        assert f"| {r['series']} | {r['layers']} | {r['statements']} | ok |" in text


def test_a_child_past_its_timeout_is_recorded_and_its_series_skipped(script, tmp_path):
    """A straight-line child cannot import jacacc and compile in one second: timed out, how far it got
    kept, the same series skipped at the next L, and no failure."""
    out = tmp_path / "timeout.json"
    argv = ["--layers", "1", "--straight-layers", "1", "2", "--tiers", "straight", "--no-jax", "--timeout", "1",
            "--points", "10", "--out", str(out), "--no-figure"]
    assert script.main(argv) == 0
    first, second = read_record(out)["results"]["rows"]
    assert (first["series"], first["layers"], first["status"]) == ("jacacc-straight", 1, "timed_out")
    assert first["timed_out"] is True and first["timeout_s"] == 1
    assert (second["layers"], second["status"]) == (2, "skipped") and "timed out at L=1" in second["reason"]


def test_child_environment_pins_threads_and_empties_the_caches(script, tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/somewhere/warm")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true --xla_dump_to=/tmp/x")
    env = script.child_environment(str(tmp_path), 1)
    assert env["JACACC_CACHE_DIR"] == str(tmp_path) and env["NUMBA_CACHE_DIR"].startswith(str(tmp_path))
    assert "JAX_COMPILATION_CACHE_DIR" not in env and env["JAX_ENABLE_COMPILATION_CACHE"] == "false"
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        assert env[name] == "1"
    assert env["XLA_FLAGS"].split() == ["--xla_dump_to=/tmp/x", "--xla_cpu_multi_thread_eigen=false",
                                        "intra_op_parallelism_threads=1"]
    assert "--xla_cpu_multi_thread_eigen=false" not in script.child_environment(str(tmp_path), 4)["XLA_FLAGS"]


def test_full_grid_plan(script):
    """The default grid: the table tier at every L, the straight-line tier up to 27, JAX at 3, 27, 270."""
    args = script.parse_arguments([])
    runs = script.plan_runs(args)
    assert [L for L, series in runs if series == "jacacc-table"] == list(script.LAYERS)
    assert [L for L, series in runs if series == "jacacc-straight"] == [1, 3, 9, 27]
    assert [L for L, series in runs if series == "jax-jacrev"] == [3, 27, 270]
    assert args.points == 10_000 and args.timeout == 300 and args.threads == 1
    assert runs.index((27, "jacacc-table")) < runs.index((27, "jacacc-table-warm-cache"))
