"""Loading the experiment scripts and executing their notebooks, for the tests of several scripts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "experiments"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def load_experiment(name: str):
    """``experiments/<name>.py`` as the module ``experiments_<name>`` (registered in
    ``sys.modules``: dataclasses look their module up while the class is built)."""
    module_name = f"experiments_{name}"
    spec = importlib.util.spec_from_file_location(module_name, EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def execute_notebook(name: str, results: Path, monkeypatch) -> list:
    """Run ``experiments/notebooks/<name>.ipynb`` on the records in ``results``; assert no
    cell failed and a figure was drawn; return the code cells' outputs."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = EXPERIMENTS / "notebooks" / f"{name}.ipynb"
    monkeypatch.setenv("JACACC_RESULTS", str(results))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(notebook.parent)}})
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type == "display_data" and "image/png" in o.get("data", {}) for o in outputs)
    return outputs
