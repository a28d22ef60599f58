"""The package surface: what ``import jacacc`` loads, and lazy subpackage access (PEP 562)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import jacacc

HEAVY = ("scipy", "ortools", "numba", "cupy", "jax", "torch", "matplotlib", "tqdm", "hypothesis")


def _fresh_interpreter(code: str) -> dict:
    """Run ``code`` in a new interpreter; it prints one JSON object, returned parsed."""
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def test_import_jacacc_loads_numpy_and_networkx_but_no_heavy_dependency_nor_lazy_submodule():
    report = _fresh_interpreter(
        "import sys, json, jacacc; "
        f"print(json.dumps({{'heavy': [m for m in {HEAVY!r} if m in sys.modules], "
        "'lazy': [m for m in jacacc.LAZY_SUBMODULES if 'jacacc.' + m in sys.modules], "
        "'core': ['numpy' in sys.modules, 'networkx' in sys.modules]}))"
    )
    assert report == {"heavy": [], "lazy": [], "core": [True, True]}


def test_problems_are_reached_as_an_attribute_after_a_plain_import():
    report = _fresh_interpreter(
        "import sys, json, jacacc; "
        "before = 'jacacc.problems' in sys.modules; "
        "shape = list(jacacc.problems.get('RoeFlux_1d').sample(seed=1).shape); "
        "print(json.dumps({'before': before, 'shape': shape, 'after': 'jacacc.problems' in sys.modules}))"
    )
    assert report == {"before": False, "shape": [6], "after": True}


@pytest.mark.parametrize("name", jacacc.LAZY_SUBMODULES)
def test_every_lazy_submodule_is_the_module_itself(name):
    module = getattr(jacacc, name)
    assert module is sys.modules[f"jacacc.{name}"]
    assert name in dir(jacacc)


def test_an_unknown_attribute_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        jacacc.no_such_thing  # noqa: B018


# ---------------------------------------------------------------------------- import layering


PACKAGE = Path(jacacc.__file__).parent


def _module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, known: set[str], root: Path = PACKAGE) -> set[str]:
    """The jacacc modules ``path`` imports anywhere (module level or inside functions), outside
    ``if TYPE_CHECKING:`` blocks; ``from pkg import sub`` counts as importing ``pkg.sub`` only."""
    tree = ast.parse(path.read_text())
    typing_only = {id(sub) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for sub in ast.walk(node)}
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = {f"{base}.{alias.name}" for alias in node.names} & known
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(base)
    return (found & known) - {name}


def _import_graph() -> nx.DiGraph:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(paths)
    for name, path in paths.items():
        graph.add_edges_from((name, target) for target in _imported_modules(path, set(paths)))
    return graph


def test_the_import_graph_sees_lazy_imports_and_skips_type_checking_blocks(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    source = package / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.b\n"
                      "def f():\n    from pkg import a\n    from . import c\n")
    assert _imported_modules(source, {"pkg.a", "pkg.b", "pkg.c", "pkg"}, root=package) == {"pkg.a", "pkg.c"}


def test_the_api_the_orders_and_the_engines_import_in_layers_without_a_circle():
    graph = _import_graph()
    layered = [m for m in graph if m in ("jacacc.api", "jacacc.bounds", "jacacc.graph")
               or m.startswith(("jacacc.orders", "jacacc.eliminate"))]
    assert "jacacc.orders.cpsat" in layered and "jacacc.api" in layered
    for component in nx.strongly_connected_components(graph):
        circle = component & set(layered)
        assert len(component) == 1 or not circle, f"import circle through {sorted(component)}"
    # the search sits below the API: cpsat reaches the bound without importing jacacc.api
    assert not nx.has_path(graph, "jacacc.orders.cpsat", "jacacc.api")
