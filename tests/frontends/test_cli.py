"""End-to-end tests of the ``jacacc`` command line.

Most run ``jacacc.cli.main`` in this process with stdout and stderr captured, as a console
script would run it, since a Python process per test cost about a second each; the
tests of ``python -m jacacc``, the console script and module targets on a path start a
process of their own (``run_process``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jacacc.api import optimize
from jacacc.cli import main
from jacacc.eliminate import modes
from jacacc.graph import CompGraph
from jacacc.orders import methods

ROOT = Path(__file__).resolve().parents[2]

# 3 inputs, 6 intermediates, 3 outputs; methods disagree on it
GRAPH = {
    "inputs": ["x1", "x2", "x3"],
    "outputs": ["y1", "y2", "y3"],
    "edges": [
        ["x1", "a", 2.0], ["x2", "a", -1.0], ["x2", "b", 0.5], ["x3", "b", 3.0],
        ["a", "c", 1.5], ["b", "c", 2.0], ["b", "d", -2.0], ["c", "e", 0.25],
        ["c", "f", 4.0], ["d", "f", 1.0], ["e", "y1", 2.0], ["f", "y1", -1.0],
        ["e", "y2", 3.0], ["f", "y3", 0.5], ["d", "y3", 1.0], ["x1", "y2", 7.0],
    ],
}

MODE_METHODS = [(mode, name) for mode in modes() for name in methods(mode, exact=False)]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """``jacacc ARGS`` in this process: its exit status (argparse's exits included), stdout
    and stderr, shaped like a finished subprocess."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exc:  # argparse's --help and usage errors
            status = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["jacacc", *args], status, out.getvalue(), err.getvalue())


def run_process(*args: str, exe: list[str] | None = None) -> subprocess.CompletedProcess:
    """``python -m jacacc ARGS`` (or ``exe ARGS``) as a process of its own."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [*(exe or [sys.executable, "-m", "jacacc"]), *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
    )


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "graph.json"
    path.write_text(json.dumps(GRAPH))
    return path


def parse_text(stdout: str) -> tuple[dict[str, str], dict[str, tuple[int, int]]]:
    """Split the text report into its header fields and its mults/adds table."""
    head, _, table = stdout.partition("\n\n")
    fields = {}
    for line in head.splitlines():
        key, _, value = line.partition(" ")
        fields[key] = value.strip()
    lines = table.strip().splitlines()
    assert lines[0].split() == ["mults", "adds"]
    rows = {}
    for line in lines[1:]:
        name, mults, adds = line.split()
        rows[name] = (int(mults), int(adds))
    return fields, rows


# ============================================================================ help
@pytest.mark.parametrize(
    "args, expected",
    [
        pytest.param([], ["optimize", "methods", "demo", "JSON exchange format", '"inputs"', '"edges"'], id="top"),
        pytest.param(["optimize"], ["GRAPH.json", "--mode", "--method", "--json", "--seed", "vertex", "edge"],
                     id="optimize"),
        pytest.param(["methods"], ["--mode"], id="methods"),
        pytest.param(["demo"], ["usage: jacacc demo"], id="demo"),
    ],
)
def test_help(args, expected):
    result = run_cli(*args, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    for text in expected:
        assert text in result.stdout


def test_console_script():
    script = Path(sys.executable).parent / ("jacacc.exe" if os.name == "nt" else "jacacc")
    if not script.exists():
        pytest.skip("the jacacc console script is not installed next to this interpreter")
    result = run_process("methods", exe=[str(script)])
    assert result.returncode == 0, result.stderr
    assert "markowitz" in result.stdout


def test_python_dash_m_runs_the_same_command_line(graph_file, bad_files):
    # the process boundary: what `python -m jacacc` prints and returns is what main gives here
    args = ["optimize", str(graph_file), "--mode", "edge", "--json"]
    ran, here = run_process(*args), run_cli(*args)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, here.stdout, "")
    failed = run_process("optimize", str(bad_files["cyclic"]))
    assert failed.returncode == 2 and failed.stdout == ""
    assert failed.stderr == run_cli("optimize", str(bad_files["cyclic"])).stderr
    assert failed.stderr.startswith("jacacc: error: the graph has a cycle")


# ============================================================================ optimize
@pytest.mark.parametrize(
    "mode, method",
    [pytest.param("vertex", None, id="vertex-default"), pytest.param("edge", "min_fill", id="edge-min_fill")],
)
def test_optimize_text(graph_file, mode, method):
    args = ["optimize", str(graph_file), "--mode", mode] + (["--method", method] if method else [])
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    plan = optimize(CompGraph.from_json(graph_file), mode=mode, method=method or "markowitz")
    fields, rows = parse_text(result.stdout)
    assert fields["graph"] == f"{graph_file}: 3 inputs, 6 intermediates, 3 outputs, 16 edges"
    assert fields["mode"] == mode
    assert fields["method"] == plan.method
    assert fields["order"].split() == plan.order_strings()
    assert fields["optimal"].endswith(f"(lower bound {plan.lower_bound})")
    expected = {plan.method: (plan.mults, plan.adds)}
    for name in ("forward", "reverse"):
        base = optimize(graph_file, mode=mode, method=name)
        expected[name] = (base.mults, base.adds)
    assert rows == expected
    assert len(set(rows.values())) > 1  # the graph separates the methods


@pytest.mark.parametrize("mode, method", MODE_METHODS, ids=[f"{m}-{n}" for m, n in MODE_METHODS])
def test_every_method_through_the_cli_json(graph_file, mode, method):
    result = run_cli("optimize", str(graph_file), "--mode", mode, "--method", method, "--seed", "7", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    record = json.loads(lines[0])
    assert {"mode", "method", "mults", "adds", "order", "optimal"} <= set(record)
    plan = optimize(CompGraph.from_json(graph_file), mode=mode, method=method, seed=7)
    want = json.loads(json.dumps(plan.to_record()))
    for searched in (want, record):  # a search's wall time (lns reports one) differs from run to run
        searched.get("search", {}).pop("wall_time", None)
    assert {k: record[k] for k in want} == want
    assert record["mode"] == mode and record["method"] == method and record["seed"] == 7
    assert record["graph"] == {"file": str(graph_file), "inputs": 3, "intermediates": 6, "outputs": 3, "edges": 16}
    for name in ("forward", "reverse"):
        if name in methods(mode):
            base = optimize(graph_file, mode=mode, method=name)
            assert record["baselines"][name] == {"mults": base.mults, "adds": base.adds}


# ============================================================================ errors
@pytest.fixture(scope="module")
def bad_files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad")
    files = {
        "malformed": d / "malformed.json",
        "cyclic": d / "cyclic.json",
        "missing": d / "missing.json",
    }
    files["malformed"].write_text('{"inputs": ["x"], "outputs": ["y"], "edges": [["x", "y", 1],\n')
    files["cyclic"].write_text(json.dumps({
        "inputs": ["x"], "outputs": ["y"],
        "edges": [["x", "a", 1], ["a", "b", 1], ["b", "a", 1], ["b", "y", 1]],
    }))
    return files


ALL_VERTEX_METHODS = re.escape(", ".join(methods("vertex")))

ERROR_CASES = [
    pytest.param(["optimize", "{missing}"], r"no such graph file: .*missing\.json", id="missing-file"),
    pytest.param(["optimize", "{malformed}"], r"malformed JSON in .*malformed\.json: .* line 2", id="malformed-json"),
    pytest.param(["optimize", "{cyclic}"], r"the graph has a cycle: '[ab]' → '[ab]' → '[ab]'", id="cycle"),
    pytest.param(["optimize", "{good}", "--method", "bogus"],
                 rf"unknown method 'bogus' for mode 'vertex'; valid methods: {ALL_VERTEX_METHODS}$",
                 id="unknown-method"),
    pytest.param(["optimize", "{good}", "--mode", "bogus"],
                 rf"unknown mode 'bogus'; valid modes: {re.escape(', '.join(modes()))}$", id="unknown-mode"),
    pytest.param(["methods", "--mode", "bogus"], r"unknown mode 'bogus'", id="methods-unknown-mode"),
    pytest.param([], r"no command given; choose one of: optimize, methods, demo", id="no-command"),
    pytest.param(["--bogus"], r"unrecognized arguments: --bogus", id="bad-flag"),
    pytest.param(["optimize", "{good}", "--bogus"], r"unrecognized arguments: --bogus", id="bad-optimize-flag"),
    pytest.param(["optimize"], r"the following arguments are required: GRAPH\.json", id="missing-argument"),
    pytest.param(["optimize", "{good}", "--seed", "abc"], r"argument --seed: invalid int value: 'abc'", id="bad-seed"),
    pytest.param(["frobnicate"], r"invalid choice: 'frobnicate'", id="unknown-command"),
]


@pytest.mark.parametrize("args, pattern", ERROR_CASES)
def test_errors_are_one_line(graph_file, bad_files, args, pattern):
    paths = {name: str(path) for name, path in bad_files.items()} | {"good": str(graph_file)}
    result = run_cli(*(a.format(**paths) for a in args))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jacacc: error: ")
    message = lines[0].removeprefix("jacacc: error: ").removesuffix(" (see `jacacc --help`)")
    message = message.removesuffix(" (see `jacacc optimize --help`)")
    assert re.search(pattern, message), lines[0]


# ============================================================================ methods
def test_methods_lists_every_registered_method():
    result = run_cli("methods")
    assert result.returncode == 0, result.stderr
    listed = {}
    for line in result.stdout.strip().splitlines():
        mode, _, names = line.partition(": ")
        listed[mode] = [] if names == "(none registered)" else names.split(", ")
    assert listed == {mode: methods(mode) for mode in modes()}


def test_methods_of_one_mode():
    result = run_cli("methods", "--mode", "edge")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"edge: {', '.join(methods('edge'))}"


# ============================================================================ progress
@pytest.mark.parametrize("flag, drawn", [("--progress", True), ("--no-progress", False), (None, False)])
def test_search_progress_bar_on_request_and_quiet_off_a_terminal(graph_file, flag, drawn):
    # the subprocess's stderr is a pipe, not a terminal: without a flag the bar stays quiet
    args = ["optimize", str(graph_file), "--method", "anneal", "--time-limit", "0.3", "--seed", "0"]
    done = run_cli(*args, *([flag] if flag else []))
    assert done.returncode == 0, done.stderr
    assert ("best=" in done.stderr) is drawn
    assert ("bound=" in done.stderr) is drawn
    assert "Traceback" not in done.stderr


# ============================================================================ JAX functions as targets
JAX_MODULE = '''
import jax.numpy as jnp


def f(x):
    return jnp.stack([jnp.sin(x[0]) * x[1], jnp.exp(x[2]) + x[0] ** 2, jnp.sum(x * x)])
'''


@pytest.fixture(scope="module")
def jax_module(tmp_path_factory) -> Path:
    pytest.importorskip("jax")
    path = tmp_path_factory.mktemp("jaxmod") / "jaxfun.py"
    path.write_text(JAX_MODULE)
    return path


def _jax_plan(path: Path, method: str):
    import importlib.util

    import numpy as np

    from jacacc.jaxpr import from_jax

    spec = importlib.util.spec_from_file_location("jaxfun_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    traced = from_jax(module.f, np.ones(3))
    return traced, optimize(traced.graph, mode="vertex", method=method)


@pytest.mark.parametrize("spec", ["file", "module"])
def test_optimize_takes_a_jax_function_with_its_shape(jax_module, spec):
    target = f"{jax_module}:f" if spec == "file" else "jaxfun:f"
    env_dir = jax_module.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(env_dir)]))
    done = subprocess.run([sys.executable, "-m", "jacacc", "optimize", target, "--shape", "3", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=env_dir, env=env)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    traced, plan = _jax_plan(jax_module, "markowitz")
    assert record["mults"] == plan.mults
    assert record["graph"]["inputs"] == 3 and record["graph"]["outputs"] == 3
    assert record["graph"]["edges"] == traced.graph.n_edges


def test_compile_takes_a_jax_function_with_its_shape(jax_module):
    done = run_cli("compile", f"{jax_module}:f", "--shape", "3", "--backend", "numpy", "--method", "reverse")
    assert done.returncode == 0, done.stderr
    _, plan = _jax_plan(jax_module, "reverse")
    assert f"mults {plan.mults} " in done.stderr
    assert "def kernel(X)" in done.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(["optimize", "{mod}:f"], "give its argument's shape with --shape", id="no-shape"),
        pytest.param(["optimize", "{mod}:g", "--shape", "3"], "has no function 'g'", id="no-function"),
        pytest.param(["optimize", "no_such_module_xyz:f", "--shape", "3"], "cannot import module", id="no-module"),
        pytest.param(["optimize", "missing.py:f", "--shape", "3"], "no file 'missing.py'", id="no-file"),
        pytest.param(["compile", "{mod}:f", "--shape", "-1"], "must be >= 0", id="negative-shape"),
        pytest.param(["compile", "RoeFlux_1d", "--shape", "3"], None, id="shape-with-a-problem"),
    ],
)
def test_jax_target_errors_are_one_line(jax_module, args, message):
    done = run_cli(*[a.format(mod=jax_module) for a in args])
    if message is None:  # a zoo problem ignores nothing silently: --shape is refused for it
        assert done.returncode != 0 and "--shape applies to a MODULE:FUNCTION target only" in done.stderr
        return
    assert done.returncode != 0
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("method", ["dstar", "blocks", "levels"])
def test_structure_methods_need_no_mode_in_the_cli(graph_file, method):
    # the API resolves the mode a structure method is registered in; so does the CLI
    done = run_cli("optimize", str(graph_file), "--method", method, "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    plan = optimize(CompGraph.from_json(str(graph_file)), method=method)
    assert record["mode"] == "structure" == plan.mode
    assert record["mults"] == plan.mults
