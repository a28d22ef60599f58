"""`make demo` / `jacacc demo`: the tour of the five systems, its parts, its checks and its errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import jacacc.demo as demo
from jacacc.cli import main as cli_main
from jacacc.errors import RegistryError

PARTS = ["graph", "tensor", "linalg", "iverson", "elementwise"]

#: what each part's headline says, besides its number
HEADLINES = {
    "graph": ["best heuristic", "forward mode's 620", "reverse mode's 358", "lower bound 94"],
    "tensor": ["Hessian FLOPs: cross-country", "against reverse mode's"],
    "linalg": ["∂NLL/∂θ through potrf/trsm", "largest difference from"],
    "iverson": ["grad tr(A) = ⊞_{i<1000} ⊞_{j<1000} [i = j]: 0 operations against the trace's 999"],
    "elementwise": ["gather form", "reverse mode's scatter-add"],
}


@pytest.fixture(autouse=True)
def short_search(monkeypatch):
    """The graph part's time-limited search (anneal) for 0.1 s instead of 1 s."""
    monkeypatch.setattr(demo.graph, "ANNEAL_SECONDS", 0.1)


def headline(out: str) -> str:
    lines = [line for line in out.splitlines() if line.strip().startswith("headline:")]
    assert len(lines) == 1, out
    return lines[0]


def test_list_names_every_part_with_one_line(capsys):
    assert cli_main(["demo", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == PARTS == demo.parts()
    for line in lines:
        name, description = line.split(None, 1)
        assert description.startswith("paper 00") and len(line) <= 110, line


@pytest.mark.parametrize("part", PARTS)
def test_each_part_passes_and_prints_its_headline(part, capsys):
    assert demo.main([part]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"== {part}: ")
    assert f"PASS {part}: " in out and "FAILED" not in out and "FAIL " not in out
    assert "all 1 part(s) passed" in out
    for text in HEADLINES[part]:
        assert text in headline(out), (text, headline(out))


def test_a_wrong_reference_fails_the_part_and_the_exit_status(monkeypatch, capsys):
    real = demo.elementwise.scatter_form
    monkeypatch.setattr(demo.elementwise, "scatter_form",
                        lambda *args, **kwargs: {k: 1.01 * v for k, v in real(*args, **kwargs).items()})
    assert cli_main(["demo", "elementwise"]) == 1
    out = capsys.readouterr().out
    assert "vs the scatter form: worst relative error" in out and "FAILED" in out
    assert "FAIL elementwise: 1 of 4 checks failed" in out and "DEMO FAILED: elementwise" in out


def test_a_part_that_raises_fails_and_the_tour_goes_on(monkeypatch, capsys):
    def broken(n):
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(demo.iverson, "trace_program", broken)
    assert demo.main(["iverson", "elementwise"]) == 1
    captured = capsys.readouterr()
    assert "error: RuntimeError: broken on purpose" in captured.out
    assert "FAIL iverson: raised an error" in captured.out and "PASS elementwise" in captured.out
    assert "broken on purpose" in captured.err  # the traceback, for whoever debugs it


@pytest.mark.parametrize("part, peer, note", [
    pytest.param("tensor", "jax", "skipped: the comparison with JAX", id="tensor-without-jax"),
    pytest.param("linalg", "torch", "skipped: the comparison with PyTorch", id="linalg-without-torch"),
])
def test_a_missing_peer_is_skipped_not_failed(part, peer, note, monkeypatch, capsys):
    for name in [m for m in sys.modules if m == peer or m.startswith(f"{peer}.")]:
        monkeypatch.setitem(sys.modules, name, None)  # `import peer` raises ImportError
    monkeypatch.setitem(sys.modules, peer, None)
    assert demo.main([part]) == 0
    out = capsys.readouterr().out
    assert note in out and f"PASS {part}" in out
    assert "FAILED" not in out


def test_unknown_part_is_a_one_line_error_with_status_2(capsys):
    assert cli_main(["demo", "graph", "tensors"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing ran
    assert captured.err == ("jacacc: error: unknown demo part 'tensors'; valid parts: graph, tensor, linalg, "
                            "iverson, elementwise\n")
    assert cli_main(["demo", "--list", "nope"]) == 2
    with pytest.raises(RegistryError, match="unknown demo part 'nope'"):
        demo.main(["nope"])


def test_python_m_jacacc_demo_takes_the_same_arguments():
    result = subprocess.run([sys.executable, "-m", "jacacc.demo", "--list"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == PARTS
    result = subprocess.run([sys.executable, "-m", "jacacc.demo", "nope"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2 and "unknown demo part 'nope'" in result.stderr


def test_report_and_references():
    report = demo.Report("x")
    assert not report.passed and report.summary() == "no check ran"
    assert report.close("equal", np.ones(3), np.ones(3), rtol=0.0)
    assert not report.close("shape", np.ones(3), np.ones(4), rtol=1.0)
    assert not report.close("nan", np.array([np.nan]), np.array([1.0]), rtol=1.0)
    assert report.summary() == "2 of 3 checks failed"
    J = demo.central_differences(lambda v: np.array([v[0] * v[1], np.sin(v[1])]), np.array([2.0, 0.5]))
    assert np.allclose(J, [[0.5, 2.0], [0.0, np.cos(0.5)]], rtol=1e-8)
