"""The experiment scripts run at tiny sizes and the notebooks execute on their results."""

from __future__ import annotations

import pytest
from experiment_scripts import EXPERIMENTS, PNG_MAGIC, load_experiment

import jacacc
from jacacc import problems
from jacacc.bench import read_record


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Run both experiments at tiny sizes into a temporary directory."""
    out = tmp_path_factory.mktemp("results")
    figures = tmp_path_factory.mktemp("figures")
    compare = load_experiment("compare_methods")
    runtime = load_experiment("heuristic_runtime")
    scale = load_experiment("heuristic_scale")
    # anneal's time limit cut from its default 10 s: the record, not the search, is under test
    assert compare.main(["--problems", "RoeFlux_1d", "chain_50", "--time-limit", "0.5", "--out", str(out),
                         "--figures", str(figures)]) == 0
    assert runtime.main(["--sizes", "60", "150", "--out", str(out), "--figures", str(figures)]) == 0
    assert scale.main(["--sizes", "100", "400", "--out", str(out), "--figures", str(figures)]) == 0
    return out, figures


def test_method_comparison_record_matches_optimize(results):
    out, figures = results
    record = read_record(out / "compare_methods.json")
    assert record["seed"] == 0 and record["environment"]["versions"]["numpy"]
    assert record["parameters"]["time_limit"] == 0.5
    rows = record["results"]["rows"]
    expected = {(p, m, meth) for p in ("RoeFlux_1d", "chain_50") for m in jacacc.modes() for meth in jacacc.methods(m)}
    assert {(r["problem"], r["mode"], r["method"]) for r in rows} == expected
    skipped = [r for r in rows if r["mults"] is None]
    assert all(r["skipped"] for r in skipped)
    exact = {meth for m in jacacc.modes() for meth in jacacc.methods(m, exact=True)}
    assert {r["method"] for r in skipped} <= exact | {"random", "greedy"}
    markowitz = {(r["problem"], r["mode"]): r["mults"] for r in rows if r["method"] == "markowitz"}
    for r in rows:
        if r["mults"] is None:
            continue
        if r["method"] == "anneal":  # time-limited: how far it gets depends on the machine's load
            assert r["lower_bound"] <= r["mults"] <= markowitz[(r["problem"], r["mode"])]
            continue
        if r["method"] == "lns":  # time-limited too, from its own start
            assert r["lower_bound"] <= r["mults"]
            continue
        plan = jacacc.optimize(problems.get(r["problem"]).graph(), mode=r["mode"], method=r["method"], seed=0)
        assert (r["mults"], r["adds"]) == (plan.mults, plan.adds)
    for best in record["results"]["best"]:
        assert best["mults"] == min(
            r["mults"] for r in rows
            if (r["problem"], r["mode"]) == (best["problem"], best["mode"]) and r["mults"] is not None
        )
    table = (out / "compare_methods.md").read_text()
    assert "| RoeFlux_1d | 6/94/3 |" in table and "**" in table
    assert (figures / "compare_methods.png").read_bytes()[:8] == PNG_MAGIC


def test_heuristic_runtime_record(results):
    out, figures = results
    rows = read_record(out / "heuristic_runtime.json")["results"]["rows"]
    assert {r["size"] for r in rows} == {60, 150}
    assert all(r["seconds"] >= 0 and r["mults"] > 0 for r in rows)
    assert {r["mode"] for r in rows} == {"vertex", "edge"}
    assert (figures / "heuristic_runtime.png").read_bytes()[:8] == PNG_MAGIC


def test_heuristic_scale_record(results):
    """Each method's own order, replayed, against forward and reverse mode's degree counts; the
    checked cost is what optimize returns."""
    out, figures = results
    rows = read_record(out / "heuristic_scale.json")["results"]["rows"]
    assert {r["size"] for r in rows} == {100, 400}
    graph = load_experiment("heuristic_scale").graph_of_size(400, 0)
    for r in (r for r in rows if r["size"] == 400 and r["method"] in ("markowitz", "min_fill")):
        assert r["mults"] == jacacc.optimize(graph, method=r["method"], seed=0, baselines=False).mults
        assert r["checked_mults"] == jacacc.optimize(graph, method=r["method"], seed=0).mults
        assert r["checked_mults"] == min(r["mults"], r["forward"], r["reverse"])
    assert (figures / "heuristic_scale.png").read_bytes()[:8] == PNG_MAGIC


def test_docs_block_is_rendered_from_the_records(results, tmp_path):
    """update_readme writes the method comparison into its documentation page, figures linked from the page."""
    out, _ = results
    update = load_experiment("update_readme")
    docs = tmp_path / "docs"
    page = docs / update.BLOCKS["results"][0]
    page.parent.mkdir(parents=True)
    page.write_text("intro\n<!-- results:start -->\nold\n<!-- results:end -->\noutro\n")
    args = ["--results", str(out), "--docs", str(docs), "--figures", str(tmp_path / "figures"), "--only", "results"]
    assert update.main(args) == 0
    text = page.read_text()
    assert text.startswith("intro\n") and text.endswith("\noutro\n") and "\nold\n" not in text
    assert "| RoeFlux_1d | 6/94/3 |" in text and "](../../figures/compare_methods.png)" in text
    page.write_text("the markers are gone\n")
    with pytest.raises(SystemExit, match="results:start"):
        update.main(args)


def test_readme_option_rewrites_one_file(results, tmp_path):
    """--readme FILE rewrites the blocks that one file holds (and needs the results block)."""
    out, _ = results
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:start -->\nold\n<!-- results:end -->\noutro\n")
    assert load_experiment("update_readme").main(["--results", str(out), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("\noutro\n") and "\nold\n" not in text
    assert "| RoeFlux_1d | 6/94/3 |" in text and "figures/compare_methods.png" in text


def test_every_block_has_its_markers_on_its_page():
    """Each measured block is on the documentation page named for it, once, start before end."""
    update = load_experiment("update_readme")
    for name, (page, start, end, _) in update.BLOCKS.items():
        text = (EXPERIMENTS.parent / "docs" / page).read_text(encoding="utf-8")
        assert text.count(start) == text.count(end) == 1, name
        assert text.index(start) < text.index(end), name


# these notebooks read records of their own: tests/experiments/test_tensor_benchmark.py and
# tests/experiments/test_linalg_examples.py and tests/experiments/test_iverson_experiments.py execute them
OWN_TESTS = {"tensor_hessians", "linalg_examples", "cheap_gradients"}
NOTEBOOKS = sorted(p for p in (EXPERIMENTS / "notebooks").glob("*.ipynb") if p.stem not in OWN_TESTS)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(notebook, results, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    out, _ = results
    monkeypatch.setenv("JACACC_RESULTS", str(out))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(notebook.parent)}}
    )
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type in ("display_data", "execute_result") for o in outputs)


def test_dual_graph_figure(tmp_path):
    assert load_experiment("dual_graph_figure").main(["--problem", "paper003_fig4_1a", "--figures", str(tmp_path)]) == 0
    assert (tmp_path / "dual_graph.png").read_bytes()[:8] == PNG_MAGIC


def test_depth_levels_follow_the_longest_path():
    from jacacc.plot import depth_levels

    g = jacacc.CompGraph.from_edges(["x"], ["y"], [("x", "a", 1), ("a", "b", 1), ("x", "b", 1), ("b", "y", 1)])
    assert depth_levels(g) == {"x": 0, "a": 1, "b": 2, "y": 3}


def test_structure_comparison_checks_and_records_every_method(tmp_path):
    script = load_experiment("structure_methods")
    out, figures = tmp_path / "results", tmp_path / "figures"
    assert script.main(["--sizes", "8", "--seeds", "1", "--problems", "BlackScholes",
                        "--out", str(out), "--figures", str(figures)]) == 0
    record = read_record(out / "structure_methods.json")
    rows = record["results"]["rows"]
    methods = {m for _, m in script.METHODS}
    assert {"dstar", "blocks", "levels", "markowitz"} <= methods
    for family in script.FAMILIES:
        assert {r["method"] for r in rows if r.get("family") == family} == methods
    graph = problems.get("BlackScholes").graph()
    for r in rows:
        if r.get("problem") == "BlackScholes":
            assert r["mults"] == jacacc.optimize(graph, mode=r["mode"], method=r["method"], seed=0).mults
        assert r["max_rel_error"] <= 1e-9
    assert record["results"]["geomean_vs_markowitz"]["zoo"]["markowitz"] == 1.0
    assert (figures / "structure_methods.png").read_bytes()[:8] == PNG_MAGIC


def test_realization_experiment_replays_every_realized_sequence(tmp_path):
    script = load_experiment("realize_expressions")
    assert script.main(["--graphs", "2", "--small-graphs", "2", "--max-steps", "2000", "--decide-steps", "500",
                        "--out", str(tmp_path)]) == 0
    record = read_record(tmp_path / "realize_expressions.json")
    rows = record["results"]["rows"]
    assert len(rows) == 4 * len(script.METHODS)
    assert all(r["realized"] or r["decided"] in ("unrealizable", "undecided") for r in rows)
    summary = record["results"]["summary"]
    for family in script.FAMILIES:
        for mode, method in script.METHODS:
            entry = summary[f"{family} {mode}:{method}"]
            assert entry["graphs"] == 2 and entry["same_count"] <= entry["realized"] <= 2
            assert entry["realized"] + entry["unrealizable"] <= 2
        # vertex orders are always realized with their own count, optimal ones too (Proposition 1)
        assert summary[f"{family} vertex:markowitz"]["same_count"] == 2
        assert summary[f"{family} vertex:optimal"]["same_count"] == 2


def test_frontend_sizes_record_matches_both_front_ends(tmp_path):
    pytest.importorskip("jax")
    import numpy as np

    from jacacc.jaxpr import from_jax
    from jacacc.problems.jax_functions import FUNCTIONS

    script = load_experiment("frontend_sizes")
    assert script.main(["--problems", "BlackScholes", "HumanHeartDipole", "--out", str(tmp_path)]) == 0
    rows = read_record(tmp_path / "frontend_sizes.json")["results"]["rows"]
    assert [r["problem"] for r in rows] == ["BlackScholes", "HumanHeartDipole"]
    for r in rows:
        problem = problems.get(r["problem"])
        numpy_graph = problem.trace().graph
        jax_graph = from_jax(FUNCTIONS[r["problem"]], np.ones(problem.n_inputs)).graph
        for front_end, graph in (("numpy", numpy_graph), ("jax", jax_graph)):
            assert r[front_end]["edges"] == graph.n_edges
            assert r[front_end]["intermediates"] == len(graph.intermediates)
            assert r[front_end]["markowitz_mults"] == jacacc.optimize(graph, method="markowitz").mults
        assert r["max_rel_error_vs_jacfwd"] <= 1e-10


def test_graph_scale_records_every_stage(tmp_path):
    script = load_experiment("graph_scale")
    assert script.main(["--edges", "1000", "3000", "--jax-sizes", "--repeat", "1", "--out", str(tmp_path),
                        "--no-figure"]) == 0
    rows = read_record(tmp_path / "graph_scale.json")["results"]["graphs"]
    assert [900 < r["edges"] < 1200 or 2700 < r["edges"] < 3300 for r in rows] == [True, True]
    for size, r in zip((1000, 3000), rows, strict=True):
        graph = jacacc.CompGraph.from_json(script.layered_dag_json(size, 0))
        assert r["edges"] == graph.n_edges and r["order_length"] == r["intermediates"] == len(graph.intermediates)
        assert all(r[stage] >= 0 for stage in script.STAGES)


def test_gpu_experiment_says_what_it_needs_without_a_gpu(tmp_path, capsys, monkeypatch):
    """experiments/gpu_tensor.py measures on a GPU only; elsewhere it exits with status 2 and says why
    (its measurements ran on a lent GPU: results/gpu_tensor.json)."""
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        pytest.skip("a GPU is here: the script would measure")
    except Exception:  # noqa: BLE001 - no CuPy or no GPU: the case under test
        pass
    assert load_experiment("gpu_tensor").main(["--quick", "--out", str(tmp_path)]) == 2
    assert "needs CuPy and a CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()
