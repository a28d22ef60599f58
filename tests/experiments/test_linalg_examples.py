"""Paper 004's four applications (experiments/linalg_examples.py) at small sizes: gradients against central
differences, the sparse-GP bound relations, the two Bayesian-linear-regression routes, the Kalman filter against
the dense Gaussian density, the quick CLI run's record and figure, the notebook on that record, and the
reproduction script paper_reproductions/004_differentiable_linalg.py (quick run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from experiment_scripts import PNG_MAGIC, execute_notebook, load_experiment

from jacacc.bench import read_record
from jacacc.errors import UnsupportedOperationError

pytest.importorskip("opt_einsum")
pytest.importorskip("scipy")

REPO = Path(__file__).resolve().parents[2]
REPRODUCTION = REPO / "paper_reproductions" / "004_differentiable_linalg.py"
RTOL = 1e-5  # central differences with h = 1e-6 agree to ~1e-8 on these problems


@pytest.fixture(scope="module")
def ex():
    return load_experiment("linalg_examples")


@pytest.fixture(scope="module")
def run(ex, tmp_path_factory):
    """The script's quick run (about 2 s)."""
    out = tmp_path_factory.mktemp("linalg_examples")
    assert ex.main(["--quick", "--out", str(out)]) == 0
    return out, read_record(out / "results" / "linalg_examples.json")


# ---------------------------------------------------------------------------- GP regression (§3.1)
def test_gp_nll_matches_the_dense_gaussian_and_its_gradient_central_differences(ex):
    data = ex.gp_data(20, seed=3)
    X, y = data["X"], data["y"]
    theta = np.log([1.1, 0.9, 0.2])
    K = 0.9 * np.exp(-0.5 * (X - X.T) ** 2 / 1.1**2) + 0.2 * np.eye(20)
    _, logdet = np.linalg.slogdet(K)
    dense = 0.5 * (y[:, 0] @ np.linalg.solve(K, y[:, 0]) + logdet + 20 * np.log(2 * np.pi))
    value, (grad,) = ex.value_and_grad(ex.gp_nll, (0,))(theta, X, y)
    assert value == pytest.approx(dense, rel=1e-12)
    assert float(ex.gp_nll(theta, X, y)) == pytest.approx(dense, rel=1e-12)
    fd = ex.central_differences(ex.gp_nll, [theta, X, y], 0)
    assert ex.relative_error(grad, fd) <= RTOL


def test_gp_fit_decreases_the_nll_to_a_stationary_point(ex):
    result = ex.gp_regression(40, seed=1, check_n=15)
    fit = result["fit"]
    assert fit["nll_fit"] < fit["nll_init"] and fit["grad_max_abs_at_fit"] <= 1e-3
    assert result["gradient_check"]["max_rel_error"] <= RTOL
    assert len(result["curve"]["x"]) == len(result["curve"]["mean"]) == len(result["curve"]["sd"])
    assert min(result["curve"]["sd"]) >= 0


# ---------------------------------------------------------------------------- sparse GP (§3.2)
def test_sparse_gp_gradient_w_r_t_hyperparameters_and_inducing_inputs(ex):
    data = ex.power_like_data(30, 3, seed=5)
    X, y = data["X"], data["y"]
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((5, 3))
    theta = np.log([0.9, 1.2, 0.15])
    value, (g_theta, g_z) = ex.value_and_grad(ex.sparse_gp_bound, (0, 1))(theta, Z, X, y)
    assert value == pytest.approx(float(ex.sparse_gp_bound(theta, Z, X, y)), rel=1e-12)
    for argnum, grad in ((0, g_theta), (1, g_z)):
        fd = ex.central_differences(ex.sparse_gp_bound, [theta, Z, X, y], argnum)
        assert ex.relative_error(grad, fd) <= RTOL, argnum


def test_sparse_gp_bound_lies_above_the_exact_nll_and_meets_it_at_z_equal_x(ex):
    data = ex.power_like_data(25, 2, seed=6)
    X, y = data["X"], data["y"]
    theta = np.log([1.0, 1.0, 0.1])
    nll = float(ex.gp_nll(theta, X, y))
    rng = np.random.default_rng(1)
    gaps = [float(ex.sparse_gp_bound(theta, X[rng.choice(25, U, replace=False)], X, y)) - nll for U in (2, 6, 12)]
    assert min(gaps) >= 0
    at_x = float(ex.sparse_gp_bound(theta, X, X, y, jitter=1e-10))
    assert at_x == pytest.approx(nll, rel=1e-7)
    checks = ex.sparse_gp_checks(seed=0)
    assert all(row["bound_minus_nll"] >= 0 for row in checks["bound_above_nll"])
    assert checks["z_equals_x"]["rel_gap"] <= 1e-6
    assert checks["gradient"]["max_rel_error_theta"] <= RTOL and checks["gradient"]["max_rel_error_Z"] <= RTOL


def test_syrk_traced_gives_the_gradient_of_the_explicit_product():
    """syrk(B) reads B twice; its gradient (the two δ terms kept apart) equals gemm2(B, Bᵀ)'s."""
    import jacacc.tensor as jt
    from jacacc import linalg

    B = np.random.default_rng(2).standard_normal((4, 7))
    via_syrk = jt.grad(lambda B: linalg.sumlogdiag(linalg.potrf(linalg.syrk(B) + np.eye(4))))(B)
    via_gemm2 = jt.grad(lambda B: linalg.sumlogdiag(linalg.potrf(linalg.gemm2(B, B.T) + np.eye(4))))(B)
    np.testing.assert_allclose(via_syrk, via_gemm2, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------- Bayesian linear regression (§3.3)
def test_blr_potrf_and_gelqf_routes_agree_with_the_dense_evidence(ex):
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((4, 15)), rng.standard_normal((15, 1))
    log_prec = np.log([3.0, 0.7])
    potrf = float(ex.blr_neg_log_evidence(log_prec, X, y, "potrf"))
    gelqf = float(ex.blr_neg_log_evidence(log_prec, X, y, "gelqf"))
    dense = ex.blr_dense_neg_log_evidence(log_prec, X, y)
    assert potrf == pytest.approx(dense, rel=1e-12) and gelqf == pytest.approx(dense, rel=1e-12)
    with pytest.raises(ValueError, match="route"):
        ex.blr_neg_log_evidence(log_prec, X, y, "qr")


def test_blr_gradients(ex):
    rng = np.random.default_rng(4)
    X, y = rng.standard_normal((3, 12)), rng.standard_normal((12, 1))
    log_prec = np.log([2.0, 0.5])

    def potrf_route(log_prec, X, y):
        return ex.blr_neg_log_evidence(log_prec, X, y, "potrf")

    def gelqf_route(log_prec, X, y):
        return ex.blr_neg_log_evidence(log_prec, X, y, "gelqf")

    _, (g_prec, g_x) = ex.value_and_grad(potrf_route, (0, 1))(log_prec, X, y)
    assert ex.relative_error(g_prec, ex.central_differences(potrf_route, [log_prec, X, y], 0)) <= RTOL
    assert ex.relative_error(g_x, ex.central_differences(potrf_route, [log_prec, X, y], 1)) <= RTOL
    try:
        _, (lq_prec, lq_x) = ex.value_and_grad(gelqf_route, (0, 1))(log_prec, X, y)
    except (UnsupportedOperationError, TypeError) as exc:
        pytest.skip(f"jacacc.linalg.gelqf does not trace yet ({type(exc).__name__}: {exc})")
    np.testing.assert_allclose(lq_prec, g_prec, rtol=1e-9)
    np.testing.assert_allclose(lq_x, g_x, rtol=1e-9, atol=1e-12)


def test_blr_example_runs(ex):
    out = ex.bayesian_linear_regression(25, 3, seed=2)
    assert out["potrf_vs_gelqf_rel"] <= 1e-10 and out["potrf_vs_dense_rel"] <= 1e-10
    assert out["potrf_gradient"]["max_rel_error_X"] <= RTOL


# ---------------------------------------------------------------------------- Kalman filter (§3.4)
def test_kalman_value_gradient_and_one_expression(ex):
    out = ex.kalman_filter(8, seed=4)
    assert out["value_vs_dense_rel"] <= 1e-9
    assert max(out["gradient_max_rel_error"].values()) <= RTOL
    assert max(out["one_expression"]["gradient_vs_stepwise_rel"].values()) <= 1e-9


def test_kalman_stepwise_gradient_against_central_differences(ex):
    data = ex.kalman_data(6, seed=9)
    args = [data[k] for k in ("A", "B", "Lq", "log_r", "C", "Y", "Uin", "m0", "P0")]
    value, grads = ex.kalman_nll_and_grad(*args)
    assert value == pytest.approx(ex.kalman_dense_nll(*args), rel=1e-10)
    for k, name in enumerate(ex.KALMAN_PARAMS):
        assert ex.relative_error(grads[name], ex.central_differences(ex.kalman_nll, args, k)) <= RTOL, name
    # the strict upper triangle of Lq does not enter Q = tril(Lq) tril(Lq)ᵀ
    assert np.all(np.triu(grads["Lq"], 1) == 0)


# ---------------------------------------------------------------------------- the CLI and the notebook
def test_quick_run_writes_a_valid_record_and_figure(run, ex):
    out, record = run
    assert record["experiment"] == "linalg_examples" and record["seed"] == 0
    params, results = record["parameters"], record["results"]
    assert params["quick"] is True and params["sparse_n"] == ex.SPARSE_N_QUICK
    assert params["sparse_us"] == list(ex.SPARSE_US_QUICK)
    assert set(results) == {"gp_regression", "sparse_gp_checks", "sparse_gp", "bayesian_linear_regression", "kalman"}
    rows = results["sparse_gp"]["rows"]
    assert [r["U"] for r in rows] == list(ex.SPARSE_US_QUICK)
    for r in rows:
        assert r["value_s"] > 0 and r["value_and_gradient_s"] > 0 and r["first_call_s"] > 0
        assert r["bound_minus_exact_nll"] >= 0 and r["directional_rel_error"] <= 1e-4 and r["program_flops"] > 0
    assert results["sparse_gp"]["profile"]["top_by_own_time"]
    assert results["gp_regression"]["fit"]["nll_fit"] < results["gp_regression"]["fit"]["nll_init"]
    assert results["bayesian_linear_regression"]["potrf_vs_gelqf_rel"] <= 1e-10
    assert results["kalman"]["T"] == ex.KALMAN_T_QUICK
    json.dumps(record)  # plain JSON throughout
    assert (out / "figures" / "linalg_examples.png").read_bytes()[:8] == PNG_MAGIC


def test_notebook_executes(run, monkeypatch):
    out, _ = run
    execute_notebook("linalg_examples", out / "results", monkeypatch)


# ---------------------------------------------------------------------------- the reproduction script
def test_reproduction_script():
    """paper_reproductions/004_differentiable_linalg.py passes its own asserts (QUICK=1: about 8 s).  A fresh
    process, as the other reproductions: PyTorch's thread pool stays out of this one."""
    pytest.importorskip("torch")
    env = {**os.environ, "QUICK": "1"}
    done = subprocess.run([sys.executable, str(REPRODUCTION)], capture_output=True, text=True, timeout=600, env=env,
                          cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "all paper 004 checks passed" in out
    for claim in "bcde":
        assert f"claim ({claim}) holds" in out, claim
    for operator in ("potrf", "trsm(transpose=True, rightside=True)", "trmm(transpose=False, rightside=True)",
                     "syrk(transpose=True)", "potri", "gelqf", "syevd"):
        assert f"\n{operator} " in out, operator
    assert "potrf's backward: 2 triangular solves, gelqf's: 1" in out
    assert "PyTorch not installed" not in out
