"""jacacc.iverson.compile: generated NumPy and Numba code agrees with the reference interpreter.

Random programs of every construct (and their gradients) are compiled with
each backend and compared with ``iv.evaluate``; the sparse structure of the
Numba loops is checked on the generated source (no timing here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iverson_programs import flat, program_and_gradients

import jacacc.iverson as iv
from jacacc.errors import RegistryError

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BACKENDS = ["numpy", "loops", "numba"]


def loop_depth(source: str) -> int:
    """The deepest nesting of ``for`` loops in generated Python source."""
    deepest, open_loops = 0, []  # indentation of the enclosing for-lines
    for line in source.splitlines():
        indent = len(line) - len(line.lstrip())
        open_loops = [k for k in open_loops if k < indent]
        if line.lstrip().startswith("for "):
            open_loops.append(indent)
            deepest = max(deepest, len(open_loops))
    return deepest


@pytest.mark.parametrize("backend", ["numpy", "loops"])
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), scalar=st.booleans())
def test_compiled_programs_agree_with_the_interpreter(backend: str, seed: int, scalar: bool) -> None:
    exprs, arrays = program_and_gradients(seed, scalar)
    for expr in exprs:
        expected = iv.evaluate(expr, **arrays)
        got = iv.compile(expr, backend=backend)(**arrays)
        assert type(got) is type(expected)
        assert np.allclose(flat(got), flat(expected), rtol=1e-12, atol=1e-12), str(expr)


_CACHED_SCRIPT = """
import json
import numpy as np
import jacacc.iverson as iv
from jacacc.iverson.generate import random_program
program = random_program(np.random.default_rng(5), scalar=True, max_extent=4, max_depth=5)
arrays = program.arrays(np.random.default_rng(6))
kernel = iv.compile(program.expr, backend="numba")
assert np.allclose(kernel(**arrays), iv.evaluate(program.expr, **arrays), rtol=1e-12, atol=1e-12)
stats = [k.stats for k in kernel.kernel.kernels]
print(json.dumps({"kernels": len(stats), "hits": sum(sum(s.cache_hits.values()) for s in stats),
                  "misses": sum(sum(s.cache_misses.values()) for s in stats)}))
"""


def test_numba_kernels_are_cached_on_disk_for_another_process(tmp_path) -> None:
    """The kernels a process compiles are loaded by the next one (Numba's on-disk cache under the
    kernel layer's directory), with the same value."""
    pytest.importorskip("numba")
    env = {**os.environ, "JACACC_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", _CACHED_SCRIPT], capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    first = run()
    assert first["kernels"] >= 1 and first == {**first, "hits": 0, "misses": first["kernels"]}
    assert run() == {**first, "hits": first["kernels"], "misses": 0}


@pytest.mark.parametrize("seed", range(12))
def test_numba_kernels_agree_with_the_interpreter_and_reuse_out(seed: int) -> None:
    pytest.importorskip("numba")
    exprs, arrays = program_and_gradients(seed, scalar=seed % 2 == 0)
    other = {k: (v * 1.1 if isinstance(v, np.ndarray) else v * 1.1) for k, v in arrays.items()}
    for expr in exprs:
        kernel = iv.compile(expr, backend="numba")
        assert np.allclose(flat(kernel(**arrays)), flat(iv.evaluate(expr, **arrays)), rtol=1e-12, atol=1e-12)
        if isinstance(expr.type, iv.PairType) or expr.type == ():
            continue
        # out= written again with other inputs: only the support is rewritten, the rest stays zero
        buffer = kernel(**arrays)
        assert kernel(out=buffer, **other) is buffer
        assert np.allclose(buffer, iv.evaluate(expr, **other), rtol=1e-12, atol=1e-12)


def test_gradient_of_trace_compiles_to_one_loop_over_the_diagonal() -> None:
    n = 3000
    A = iv.var("A", (n, n))
    i = iv.index("i")
    g = iv.grad(iv.sum(i, n, A[i, i]), A)
    kernel = iv.compile(g, backend="loops")
    assert loop_depth(kernel.source) == 1  # j is pinned by [i = j]: computed, not looped over
    out = kernel(A=np.zeros((n, n)))
    assert out.shape == (n, n) and out.trace() == n and np.count_nonzero(out) == n


def test_bracket_inequalities_narrow_loops_and_equalities_solve_non_unit_coefficients() -> None:
    n = 10
    x = iv.var("x", (n,))
    i, j = iv.index("i"), iv.index("j")
    e = iv.gen(i, n, iv.sum(j, n, iv.bracket((2 * j == i) & (j >= 1)) * x[j]))
    kernel = iv.compile(e, backend="loops")
    assert "% 2 == 0" in kernel.source and kernel.source.count("for ") == 1
    X = np.arange(1.0, n + 1)
    assert np.array_equal(kernel(x=X), iv.evaluate(e, x=X))
    band = iv.gen(i, n, iv.sum(j, n, iv.bracket((j >= i - 1) & (j <= i + 1)) * x[j]))
    source = iv.compile(band, backend="loops").source
    assert "max(" in source and "min(" in source  # the band's bounds, not a test per j
    assert np.allclose(iv.compile(band, backend="loops")(x=X), iv.evaluate(band, x=X))


def test_sum_of_bracketed_terms_fills_each_support() -> None:
    n = 50
    A = iv.var("A", (n, n))
    i = iv.index("i")
    g = iv.grad(iv.sum(i, n, A[i, 0] * A[0, i]), A)
    source = iv.compile(g, backend="loops").source
    # per bracketed term one loop over a line of A (twice: out= clears the supports first), none nested
    assert source.count("for ") == 4 and loop_depth(source) == 1, source
    X = np.random.default_rng(0).random((n, n))
    for backend in BACKENDS:
        assert np.array_equal(iv.compile(g, backend=backend)(A=X), iv.evaluate(g, A=X))


def test_data_brackets_read_only_where_the_index_brackets_hold() -> None:
    x = iv.var("x", (4,))
    i = iv.index("i")
    # x[i - 1] is only in range where i ≥ 1: the data comparison must wait for the index one
    e = iv.gen(i, 4, iv.bracket((x[i - 1] > 0.5) & (i >= 1)) * x[i])
    X = np.array([0.1, 0.9, 0.2, 0.7])
    for backend in BACKENDS:
        assert np.array_equal(iv.compile(e, backend=backend)(x=X), iv.evaluate(e, x=X))


def test_compile_errors_and_conventions() -> None:
    x = iv.var("x", (3,))
    i = iv.index("i")
    e = iv.gen(i, 3, x[i] * 2)
    with pytest.raises(RegistryError, match="unknown backend 'cuda'"):
        iv.compile(e, backend="cuda")
    kernel = iv.compile(e, backend="numpy")
    assert kernel is iv.compile(e, backend="numpy")  # cached per program
    with pytest.raises(iv.IvTypeError, match="no value given for the variable 'x'"):
        kernel()
    with pytest.raises(iv.IvTypeError, match="has shape"):
        kernel(x=np.zeros(4))
    assert np.array_equal(kernel(x=np.ones(3), unused=np.ones(9)), [2.0, 2.0, 2.0])  # extra arrays ignored
    with pytest.raises(iv.IvTypeError, match="out must be"):
        kernel(x=np.ones(3), out=np.zeros(4))
    assert "def kernel(" in kernel.source
    s = iv.sum(i, 3, x[i])
    assert isinstance(iv.compile(s, backend="loops")(x=np.ones(3)), float)
    with pytest.raises(iv.IvTypeError, match="out= is for tensor results"):
        iv.compile(s, backend="loops")(x=np.ones(3), out=np.zeros(()))


@pytest.mark.parametrize("library", ["jax", "torch"])
@pytest.mark.parametrize("seed", range(8))
def test_peer_translations_agree_with_the_interpreter(library: str, seed: int, float64_jax) -> None:
    """The JAX / PyTorch version of a program (what the cheap-gradient experiment times) computes it."""
    pytest.importorskip(library)
    from jacacc.iverson.arrays import array_function

    exprs, arrays = program_and_gradients(seed, scalar=seed % 2 == 0)
    for expr in exprs:
        got = array_function(expr, library)(**arrays)
        assert np.allclose(flat(got), flat(iv.evaluate(expr, **arrays)), rtol=1e-12, atol=1e-12), str(expr)
