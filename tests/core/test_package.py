"""The package surface: what ``import jacacc`` loads, and lazy subpackage access (PEP 562)."""

from __future__ import annotations

import json
import subprocess
import sys

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
