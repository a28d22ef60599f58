"""Paper 002's benchmark (experiments/tensor_hessians.py) end to end at tiny sizes, its notebook, and the
reproduction script paper_reproductions/002_tensor_calculus.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from experiment_scripts import PNG_MAGIC, execute_notebook, load_experiment

from jacacc.bench import read_record

pytest.importorskip("jax")
pytest.importorskip("torch")
pytest.importorskip("opt_einsum")

REPO = Path(__file__).resolve().parents[2]
REPRODUCTION = REPO / "paper_reproductions" / "002_tensor_calculus.py"
SIZES = (4, 8)


@pytest.fixture(scope="module")
def script():
    return load_experiment("tensor_hessians")


@pytest.fixture(scope="module")
def run(script, tmp_path_factory):
    """The benchmark at n = 4, 8 with a time budget no call reaches and a memory cap that skips some."""
    out = tmp_path_factory.mktemp("tensor_hessians")
    # 64 KiB: the neural net's dense Hessian at n = 8 is 32 KiB, so the largest estimates are skipped
    assert script.main(["--quick", "--sizes", *map(str, SIZES), "--memory-cap", str(64 / 2**20),
                        "--threads", "0", "--out", str(out)]) == 0
    return out, read_record(out / "results" / "tensor_hessians.json")


def test_record_structure(run, script):
    out, record = run
    assert record["experiment"] == "tensor_hessians" and record["seed"] == 0
    assert record["environment"]["versions"]["jax"] and record["environment"]["versions"]["torch"]
    params = record["parameters"]
    assert params["sizes"] == list(SIZES) and params["problems"] == list(script.PROBLEMS)
    assert params["dtype"] == "float64" and params["k"] == 5 and params["layers"] == 10
    assert "partial" not in record["results"]
    rows = record["results"]["rows"]
    keys = {(r["problem"], r["n"], r["quantity"], r["method"]) for r in rows}
    assert len(keys) == len(rows)
    for problem in script.PROBLEMS:
        for n in SIZES:
            for quantity in script.QUANTITIES:
                methods = {m for p, size, q, m in keys if (p, size, q) == (problem, n, quantity)}
                assert {"jax", "torch"} <= methods
                if quantity == "value":
                    assert {"numpy", "jacacc"} <= methods
                else:
                    assert {f"jacacc-{mode}" for mode in script.JACACC_MODES} <= methods
                if quantity == "hessian":
                    assert "jacacc-compressed" in methods
                if problem != "neural_net" and quantity != "value":
                    assert "closed_form" in methods
    assert ("matrix_factorization", 8, "hessian", "closed_form_compressed") in keys
    assert (out / "figures" / "tensor_hessians.png").read_bytes()[:8] == PNG_MAGIC


def test_every_timed_row_matched_its_reference(run):
    _, record = run
    rows = record["results"]["rows"]
    timed = [r for r in rows if not r["skipped"]]
    assert len(timed) > 50
    for r in timed:
        assert r["matches"] is True and r["max_rel_error"] <= 1e-8, r
        assert r["seconds"] > 0 and r["first_call_s"] > 0 and len(r["samples"]) >= 1
        assert r["setup_s"] >= 0 and r["result_nbytes"] > 0
        assert r["reference"] in ("jax", "closed_form", "numpy", "torch", "jacacc-cross_country", "jacacc")
        assert r["compared"] == "dense"
        assert r["memory_measure"]
        if r["library"] in ("numpy", "jacacc"):
            assert r["peak_bytes"] is not None and r["peak_bytes"] >= 0
    # JAX is the reference wherever it ran
    ran_jax = {(r["problem"], r["n"], r["quantity"]) for r in timed if r["method"] == "jax"}
    for r in timed:
        if (r["problem"], r["n"], r["quantity"]) in ran_jax:
            assert r["reference"] == "jax"
    for r in timed:
        if r["library"] == "jacacc":
            assert r["flops"] > 0


def test_skips_say_why_and_stop_the_method(run):
    _, record = run
    rows = record["results"]["rows"]
    skipped = [r for r in rows if r["skipped"]]
    assert skipped, "the 64 KiB cap should skip the largest Hessians"
    assert all(r["skipped"].startswith(("memory cap", "time budget")) for r in skipped)
    assert all("seconds" not in r for r in skipped)
    for r in skipped:  # once skipped, skipped at every larger n too
        later = [x for x in rows if (x["problem"], x["quantity"], x["method"]) == (r["problem"], r["quantity"],
                                                                                   r["method"]) and x["n"] > r["n"]]
        assert all(x["skipped"] for x in later)


def test_compressed_rows_store_less(run):
    _, record = run
    rows = {(r["problem"], r["n"], r["method"]): r for r in record["results"]["rows"]
            if r["quantity"] == "hessian" and not r["skipped"]}
    mf = rows[("matrix_factorization", 8, "jacacc-compressed")]
    assert mf["result_nbytes"] == 8 * 8 * 5 * 5 < mf["dense_hessian_bytes"] == 8 * (8 * 5) ** 2
    assert rows[("matrix_factorization", 8, "closed_form_compressed")]["result_nbytes"] == mf["result_nbytes"]


def test_summary_ratios(run):
    _, record = run
    for s in record["results"]["summary"]:
        if s["best_peer"] is not None:
            assert s["best_peer_s"] == min(v for m, v in s["seconds"].items() if m in ("jax", "torch"))
    for r in record["results"]["rows"]:
        if r["method"] in ("jax", "torch") and not r["skipped"]:
            assert r["over_best_peer"] >= 1.0 - 1e-12


def test_closed_forms_agree_with_the_problems(script):
    rng = np.random.default_rng(1)
    import jacacc.tensor as jt

    for problem in ("logistic_regression", "matrix_factorization"):
        args = script.make_arguments(problem, 6, rng)
        f = script.FUNCTIONS[problem](script.NUMPY_OPS)
        forms = script.CLOSED_FORMS[problem]
        np.testing.assert_allclose(forms["gradient"](*args), jt.grad(f)(*args), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(forms["hessian"](*args), jt.hessian(f)(*args), rtol=1e-12, atol=1e-12)
    blocks = script.mf_hessian_blocks(*args)
    np.testing.assert_allclose(script._expand_mf_blocks(blocks), script.mf_hessian(*args))


def test_compressed_hessians_are_checked_as_blocks_where_the_dense_one_is_too_big(script):
    import jax

    import jacacc.tensor as jt

    rng = np.random.default_rng(2)
    args = script.make_arguments("matrix_factorization", 8, rng)
    # the dense Hessian is 12.8 kB: under a 16 KiB cap it is never written out, the blocks are compared
    runner = script.Runner(10.0, 16 * 1024, quick=True)
    with jax.enable_x64(True):
        rows = runner.measure("matrix_factorization", 8, args)
    hessian = {r["method"]: r for r in rows if r["quantity"] == "hessian"}
    assert hessian["closed_form"]["skipped"].startswith("memory cap")
    for method in ("closed_form_compressed", "jacacc-compressed"):
        assert hessian[method]["compared"] == "blocks" and hessian[method]["matches"] is True
        assert hessian[method]["reference"] == "closed_form_compressed"
    # the layout reader, with a mask (n blocks) and without one (one block broadcast over the rows)
    U, V, T, Omega = args
    f = script.FUNCTIONS["matrix_factorization"](script.NUMPY_OPS)
    masked = jt.hessian(f, compress=True)(*args)
    np.testing.assert_allclose(script.blocks_of_compressed(masked), script.mf_hessian_blocks(*args), rtol=1e-12)
    ones = np.ones_like(Omega)
    unmasked = jt.hessian(lambda U, V, T: np.sum((T - U @ V.T) ** 2), compress=True)(U, V, T)
    assert unmasked.stored.shape == (5, 5)
    np.testing.assert_allclose(script.blocks_of_compressed(unmasked), script.mf_hessian_blocks(U, V, T, ones),
                               rtol=1e-12)


def test_notebook_executes(run, monkeypatch):
    out, _ = run
    execute_notebook("tensor_hessians", out / "results", monkeypatch)


def test_reproduction_script():
    """paper_reproductions/002_tensor_calculus.py passes its own asserts (about 5 s).  It runs in a fresh
    process: in this one PyTorch's and XLA's thread pools, started by the benchmark, would slow NumPy's
    small solves down and make its timings meaningless."""
    done = subprocess.run([sys.executable, str(REPRODUCTION)], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "claim (b) holds" in done.stdout and "cross-country / reverse" in done.stdout


def test_readme_block_is_rendered_from_the_record(run, tmp_path):
    """update_readme fills the README's tensor block with one table row per (problem, n) Hessian."""
    out, record = run
    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- results:start -->\n<!-- results:end -->\nb\n"
                      "<!-- tensor-results:start -->\nold\n<!-- tensor-results:end -->\nc\n")
    update = load_experiment("update_readme")
    block = update.render_tensor(str(out / "results"))
    hessians = [s for s in record["results"]["summary"] if s["quantity"] == "hessian"
                and {"jacacc-cross_country", "jacacc-compressed"} & set(s["seconds"])]
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| problem")]
    assert len(rows) == len(hessians) > 0
    assert "figures/tensor_hessians.png" in block
    text = readme.read_text()
    readme.write_text(update._replace(text, "<!-- tensor-results:start -->", "<!-- tensor-results:end -->", block))
    assert "\nold\n" not in readme.read_text() and readme.read_text().endswith("<!-- tensor-results:end -->\nc\n")
    assert rows[0] in readme.read_text()
