"""Paper 004's benchmark (experiments/linalg_benchmark.py) end to end at tiny sizes: the record's
structure, every timed result checked against the peers, the profiles and the figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from experiment_scripts import PNG_MAGIC, load_experiment

from jacacc.bench import read_record

pytest.importorskip("jax")
pytest.importorskip("torch")
pytest.importorskip("gpytorch")
pytest.importorskip("opt_einsum")
pytest.importorskip("matplotlib")

REPO = Path(__file__).resolve().parents[2]
SIZES = (4, 8)
INDUCING = (5, 10)
SGP_N = 120


@pytest.fixture(scope="module")
def script():
    return load_experiment("linalg_benchmark")


@pytest.fixture(scope="module")
def run(script, tmp_path_factory):
    """Every operator at n = 4, 8 and the sparse GP at U = 5, 10 (n = 120), with library-default threads
    (pinning would change the thread pools of the rest of the test session)."""
    out = tmp_path_factory.mktemp("linalg_benchmark")
    assert script.main(["--quick", "--sizes", *map(str, SIZES), "--sgp-n", str(SGP_N), "--sgp-inducing",
                        *map(str, INDUCING), "--threads", "0", "--out", str(out)]) == 0
    return out, read_record(out / "results" / "linalg_benchmark.json")


def test_record_structure(run, script):
    out, record = run
    assert record["experiment"] == "linalg_benchmark" and record["seed"] == 0
    assert record["environment"]["versions"]["jax"] and record["environment"]["versions"]["torch"]
    params = record["parameters"]
    assert params["sizes"] == list(SIZES) and params["operators"] == list(script.OPERATORS)
    assert params["dtype"] == "float64" and params["batch"] == 1 and params["versions"]["gpytorch"]
    assert params["sgp"]["n"] == SGP_N and params["sgp"]["inducing"] == list(INDUCING)
    results = record["results"]
    assert "partial" not in results
    rows = results["operators"]["rows"]
    keys = {(r["operator"], r["n"], r["library"], r["phase"]) for r in rows}
    assert len(keys) == len(rows)
    for op in script.OPERATORS:
        for n in SIZES:
            for library in script.LIBRARIES:
                assert {(op, n, library, "forward"), (op, n, library, "backward")} <= keys
            assert (op, n, "jacacc", "grad") in keys
    assert (out / "figures" / "linalg_benchmark.png").read_bytes()[:8] == PNG_MAGIC


def test_every_operator_timed_and_matching(run, script):
    """At these sizes nothing is over budget or memory: every row ran and agreed with PyTorch."""
    _, record = run
    for r in record["results"]["operators"]["rows"]:
        assert not r["skipped"], r
        assert r["matches"] and r["max_rel_error"] <= script.TOLERANCE, r
        assert r["reference"] == "torch"
        assert r["seconds"] > 0 and r["per_n3"] == pytest.approx(r["seconds"] / r["n"] ** 3)
        if r["phase"] == "backward":
            assert r["peak_bytes"] is not None and r["memory_measure"]
    checks = record["results"]["operators"]["checks"]
    assert len(checks) == len(script.OPERATORS) * len(SIZES)
    assert all(max(c["errors"].values()) <= script.TOLERANCE for c in checks)


def test_summary_ratios(run, script):
    _, record = run
    summary = record["results"]["operators"]["summary"]
    assert {(s["operator"], s["n"]) for s in summary} == {(op, n) for op in script.OPERATORS for n in SIZES}
    for s in summary:
        t = s["seconds"]
        assert s["backward_jacacc_over_torch"] == pytest.approx(t["jacacc_backward"] / t["torch_backward"])
        assert s["jacacc_grad_minus_forward"] == pytest.approx(t["jacacc_grad"] - t["jacacc_forward"])
    table = script.operator_table(summary)
    assert table.count("\n") == len(summary) + 1 and "bwd jacacc/torch" in table


def test_backward_profiles(run, script):
    """Profiled at the largest n: jacacc's pullback program (the registered operators) with FLOPs per
    node, PyTorch's ATen calls with the FLOPs of their products and solves."""
    _, record = run
    profiles = record["results"]["operators"]["profiles"]
    assert set(profiles) == set(script.OPERATORS)
    for p in profiles.values():
        assert p["n"] == max(SIZES)
        assert p["jacacc"]["functions"] and p["torch"]["functions"]
        assert p["torch"]["flops"] > 0
        assert isinstance(p["jacacc"]["grad_expression_flops"], int)
    potrf = profiles["potrf"]
    n = max(SIZES)
    # paper 004's potrf pullback: one product Lᵀ·L̄ and two triangular solves, as PyTorch's
    assert sum("op trsm" in node["node"] for node in potrf["jacacc"]["nodes"]) == 2
    assert potrf["torch"]["flops_by_op"]["aten::linalg_solve_triangular"] == 2 * n**3


def test_sparse_gp(run, script):
    _, record = run
    sgp = record["results"]["sparse_gp"]
    assert sgp["n"] == SGP_N and sgp["d"] == script.SGP_D
    assert "linalg_examples.sparse_gp_bound" in sgp["jacacc_source"] and sgp["hand_gradient"]
    rows = sgp["rows"]
    for U in INDUCING:
        here = {r["method"]: r for r in rows if r["U"] == U}
        assert {"jacacc", "gpytorch"} <= set(here)
        for r in here.values():
            assert not r["skipped"] and r["matches"], r
            assert r["value_rel_error"] <= script.SGP_TOLERANCE and r["gradient_rel_error"] <= script.SGP_TOLERANCE
            assert r["seconds"] > 0 and r["peak_bytes"] is not None
    assert [s["U"] for s in sgp["summary"]] == list(INDUCING)
    assert all(s["jacacc_over_gpytorch"] > 0 for s in sgp["summary"])
    assert sgp["profile"]["U"] == max(INDUCING)
    assert sgp["profile"]["gpytorch"]["flops"] > 0 and sgp["profile"]["jacacc"]["functions"]
    assert "U" in script.sparse_gp_table(sgp)


def test_bound_reference_against_dense_formula(script):
    """The NumPy reference bound equals −log N(y | 0, Q + σ²I) + tr(K − Q)/(2σ²) written out densely."""
    X, y = script.sparse_gp_data(40, 3, 1)
    problem = script.sparse_gp_problem(X, y, 6, 1)
    p = problem.params
    s, noise = float(p["variance"]), float(p["noise"])
    Kuu = script.rbf_numpy(p["Z"], p["Z"], p["lengthscale"], s) + problem.jitter * s * np.eye(6)
    Kuf = script.rbf_numpy(p["Z"], X, p["lengthscale"], s)
    Q = Kuf.T @ np.linalg.solve(Kuu, Kuf)
    C = Q + noise * np.eye(40)
    dense = (0.5 * 40 * np.log(2 * np.pi) + 0.5 * np.linalg.slogdet(C)[1] + 0.5 * y @ np.linalg.solve(C, y)
             + 0.5 * (40 * s - np.trace(Q)) / noise)
    assert script.titsias_bound_numpy(problem) == pytest.approx(dense, rel=1e-10)


def test_peer_conventions(script):
    """The peers' LQ and eigendecomposition follow jacacc's sign conventions."""
    import torch

    from jacacc import linalg

    rng = np.random.default_rng(3)
    A = rng.standard_normal((5, 5)) + 3 * np.eye(5)
    Q, L = (t.numpy() for t in script.torch_lq(torch.from_numpy(A)))
    Qj, Lj = linalg.gelqf(A)
    assert np.allclose(Q, Qj) and np.allclose(L, Lj) and np.allclose(L @ Q, A)
    S = A + A.T
    U, lam = (t.numpy() for t in script.torch_eig(torch.from_numpy(S)))
    Uj, lamj = linalg.syevd(S)
    assert np.allclose(U, Uj) and np.allclose(lam, lamj)
