# jacacc — two commands for a fresh machine:
#   make demo   create .venv, install with the CPU extras, tour the five systems (each result checked)
#   make test   create .venv if missing, install every CPU-capable extra, run the tests
# and: make docs (the site: docs/_build/html), make experiments (results/, figures/, the docs' tables),
#      make test-extra (the experiment scripts' and the site's end-to-end runs, and the exhaustive
#      checks that make test samples; CI runs them too),
#      make test-slow, make lint
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# --no-compile: no bytecode for all of torch, JAX and SciPy at install time (half of the
# install's 70 s); Python compiles each module the first time it is imported
PIP_INSTALL := $(PIP) install --quiet --no-compile
# Bytecode is written, once, into .venv and the clone's __pycache__ folders even where the
# environment says not to (PYTHONDONTWRITEBYTECODE): otherwise each of the suite's processes,
# workers and subprocesses alike, compiles every module it imports again, torch and JAX included
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-extra test-slow lint docs experiments clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# stamp files: re-install only when pyproject.toml changes
$(VENV)/.core-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP_INSTALL) -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP_INSTALL) -e ".[test,docs,all-cpu]"
	touch $@ $(VENV)/.core-installed $(VENV)/.docs-installed $(VENV)/.demo-installed

# the demo compares with JAX and PyTorch: every CPU-capable extra
$(VENV)/.demo-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP_INSTALL) -e ".[all-cpu]"
	touch $@ $(VENV)/.core-installed

demo: $(VENV)/.demo-installed
	$(PY) -m jacacc.demo

test: $(VENV)/.test-installed
	$(PY) -m pytest -q -n auto --dist loadfile -m "not slow and not scripts and not exhaustive"

test-extra: $(VENV)/.test-installed
	$(PY) -m pytest -q -n auto --dist loadfile -m "(scripts or exhaustive) and not slow"

test-slow: $(VENV)/.test-installed
	$(PY) -m pytest -q -m slow

# every benchmark, then the measured blocks of the documentation pages (about an hour)
experiments: $(VENV)/.test-installed
	$(PY) experiments/compare_methods.py
	$(PY) experiments/heuristic_runtime.py
	$(PY) experiments/heuristic_scale.py
	$(PY) experiments/structure_methods.py
	$(PY) experiments/realize_expressions.py
	$(PY) experiments/search_benchmark.py
	$(PY) experiments/sweep_benchmark.py --dask
	$(PY) experiments/dual_graph_figure.py
	$(PY) experiments/kernel_benchmark.py
	$(PY) experiments/elementwise_kernels.py
	$(PY) experiments/frontend_sizes.py
	$(PY) experiments/graph_scale.py
	$(PY) experiments/tensor_hessians.py
	$(PY) experiments/tensor_breadth.py
	$(PY) experiments/first_call.py
	$(PY) experiments/compile_scaling.py
	$(PY) experiments/first_call_outside.py
	$(PY) experiments/iverson_recurrence.py
	$(PY) experiments/long_sum.py
	$(PY) experiments/outside.py
	$(PY) experiments/loop_scaling.py
	$(PY) experiments/autograd_suite.py
	$(PY) experiments/fusion_threshold.py
	$(PY) experiments/linalg_examples.py
	$(PY) experiments/linalg_benchmark.py
	$(PY) experiments/cheap_gradients.py
	$(PY) experiments/update_readme.py

# the documentation site, offline, warnings as errors: open docs/_build/html/index.html
$(VENV)/.docs-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP_INSTALL) -e ".[docs]"
	touch $@ $(VENV)/.core-installed

docs: $(VENV)/.docs-installed
	$(VENV)/bin/sphinx-build -W --keep-going -b html docs docs/_build/html

lint: $(VENV)/.test-installed
	$(VENV)/bin/ruff check jacacc tests experiments paper_reproductions

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache
