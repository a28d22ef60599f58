"""The kernel benchmark: peers rebuilt from the traced graph, the roofline helpers, the
benchmark harness and the `jacacc bench` command end to end (tiny sizes)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jacacc.bench import (
    bench_kernels,
    get_peer,
    machine_peaks,
    peer_function,
    peers,
    roofline_seconds,
    summarize_kernel_benchmark,
)
from jacacc.errors import RegistryError
from jacacc.problems import get


@pytest.fixture(scope="module")
def quick_peaks():
    return machine_peaks(quick=True)


@pytest.mark.parametrize("library", ["jax", "torch"])
@pytest.mark.parametrize("name", ["RoeFlux_1d", "BlackScholes", "RobotArm_6DOF"])
def test_peer_function_computes_the_traced_primal(library, name):
    lib = pytest.importorskip(library)
    p = get(name)
    x = p.sample(3)
    f = peer_function(p.trace(), library)
    if library == "jax":
        lib.config.update("jax_enable_x64", True)
        y = np.asarray(f(lib.numpy.asarray(x)))
    else:
        y = f(lib.from_numpy(x)).numpy()
    np.testing.assert_allclose(y, p(x), rtol=1e-12, atol=1e-12)


def test_peer_registry():
    assert {"jax-jacfwd", "jax-jacrev", "torch-jacfwd", "torch-jacrev"} <= set(peers())
    with pytest.raises(RegistryError, match="valid peers: jax-jacfwd"):
        get_peer("tensorflow")


def test_roofline_and_peaks(quick_peaks):
    assert set(quick_peaks) == {"flops", "calls", "libm_calls", "vector_calls", "bandwidth"}
    assert all(v > 0 for v in quick_peaks.values())
    # the call peak is the fastest measured implementation, so the roofline stays a lower bound
    assert quick_peaks["calls"] == max(quick_peaks["libm_calls"], quick_peaks["vector_calls"])
    counts = {"flops": 100, "calls": 2, "bytes": 8}
    peaks = {"flops": 1e9, "calls": 1e7, "bandwidth": 1e10}
    # the largest of the three times, each a lower bound on its own (their sum is not one)
    assert roofline_seconds(counts, 10, peaks) == pytest.approx(10 * 2 / 1e7)
    assert roofline_seconds({"flops": 300, "calls": 2, "bytes": 8}, 10, peaks) == pytest.approx(10 * 300 / 1e9)
    assert roofline_seconds({"flops": 0, "calls": 0, "bytes": 8e3}, 10, peaks) == pytest.approx(8e-6)


def test_recorded_roofline_fractions_are_at_most_one():
    import json
    from pathlib import Path

    record = json.loads((Path(__file__).resolve().parents[2] / "results" / "kernel_benchmark.json").read_text())
    results = record["results"]
    rows = [r for r in results["rows"] if "roofline_s" in r]
    assert rows
    for r in rows:
        assert roofline_seconds(r, r["N"], results["peaks"]) == pytest.approx(r["roofline_s"])
        assert r["roofline_fraction"] <= 1.0, (r["problem"], r["impl"], r["N"])


def test_bench_kernels_checks_every_implementation(quick_peaks):
    pytest.importorskip("numba")
    rows = bench_kernels("BlackScholes", methods=["reverse"], backends=["numpy", "numba"],
                         sizes=[16, 32], repeat=1, progress=False, peaks=quick_peaks)
    timed = [r for r in rows if "jacobians_per_s" in r]
    assert {r["impl"] for r in timed} >= {"numpy/reverse", "numba/reverse"}
    for r in timed:
        assert r["max_error"] < 1e-10, r
        assert r["jacobians_per_s"] > 0
    kernel_rows = [r for r in timed if r["kind"] == "kernel"]
    assert all(r["skipped"] + r["folded"] + r["emitted_mults"] == r["mults"] for r in kernel_rows)
    assert all(r["roofline_fraction"] > 0 for r in kernel_rows)
    assert all(r["jacobians_per_s_reused"] == pytest.approx(r["N"] / r["seconds_reused"]) for r in kernel_rows)
    summary = summarize_kernel_benchmark(rows)
    assert summary[0]["problem"] == "BlackScholes" and summary[0]["N"] == 32


def test_bench_progress_bar_is_quiet_off_a_terminal_and_drawn_when_asked(capsys, quick_peaks):
    pytest.importorskip("numba")
    options = dict(methods=["reverse"], backends=["numpy"], peers=[], sizes=[8, 16], repeat=1, peaks=quick_peaks)
    bench_kernels("BlackScholes", **options)  # stderr is captured, not a terminal: no bar
    assert capsys.readouterr().err == ""
    bench_kernels("BlackScholes", progress=True, **options)
    assert "2/2" in capsys.readouterr().err


@pytest.mark.scripts  # runs the benchmark script end to end: `make test-extra`
def test_cli_bench_end_to_end(tmp_path, capsys):
    pytest.importorskip("numba")
    pytest.importorskip("matplotlib")
    from jacacc.cli import main

    threadpoolctl = pytest.importorskip("threadpoolctl")
    import numba

    record, figure = tmp_path / "bench.json", tmp_path / "bench.png"
    with threadpoolctl.threadpool_limits(limits=None):  # gives back the BLAS threads --threads 1 sets
        try:
            code = main(["bench", "BlackScholes", "--sizes", "8", "16", "--methods", "reverse", "markowitz",
                         "--backends", "numpy", "numba", "--repeat", "1", "--quick-peaks", "--no-progress",
                         "--threads", "1", "--json", str(record), "--figure", str(figure)])
            numba_threads = numba.get_num_threads()
        finally:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert code == 0 and numba_threads == 1
    out = capsys.readouterr().out
    assert "numba/markowitz" in out and "jax-jacfwd" in out and "torch-jacrev" in out
    data = json.loads(record.read_text())
    assert data["experiment"] == "kernel_benchmark" and data["environment"]["versions"]["numba"]
    assert data["parameters"]["sizes"] == [8, 16] and data["seed"] == 0
    assert data["parameters"]["threads"] == 1
    blas = [p["num_threads"] for p in data["environment"]["thread_pools"] if p["user_api"] == "blas"]
    assert blas and set(blas) == {1}
    assert figure.stat().st_size > 0


def test_cli_bench_refuses_graph_problems(capsys):
    from jacacc.cli import main
    from jacacc.problems import names

    graph_problem = next(n for n in names() if get(n).kind == "graph")
    assert main(["bench", graph_problem, "--sizes", "8", "--peers"]) == 2
    assert "is a graph" in capsys.readouterr().err
