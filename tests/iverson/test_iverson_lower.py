"""The tensor language lowered onto the kernel IR (jacacc.iverson.lower) and the support loops it
compiles to (jacacc.kernels.support): every point of a bracket's support visited exactly once,
disjunctions split into disjoint cases, canonical names shared across bindings, deep subtrees
hoisted, and every backend equal to the interpreter."""

from __future__ import annotations

import itertools
import shutil

import numpy as np
import pytest
from iverson_programs import flat, program_and_gradients

import jacacc.iverson as iv
from jacacc.iverson.generate import recurrence
from jacacc.iverson.lower import HOIST_DEPTH, lower
from jacacc.kernels.ir import Affine, Condition, Definition, Guard, Number
from jacacc.kernels.support import affine_nest, python_support_kernel, support_source


def _random_condition(rng: np.random.Generator, names: list[str]) -> Condition:
    coeffs = {n: int(rng.integers(-3, 4)) for n in names}
    return Condition(Affine.make(coeffs, int(rng.integers(-6, 7))), str(rng.choice(["==", ">=", ">="])))


@pytest.mark.parametrize("seed", range(40))
def test_support_loops_visit_every_point_of_the_support_once(seed: int) -> None:
    """Against enumeration: adding 1 at every visited index gives the bracket's indicator."""
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    names = [f"i{k}" for k in range(rank)]
    shape = tuple(int(rng.integers(1, 7)) for _ in range(rank))
    conditions = tuple(_random_condition(rng, names) for _ in range(int(rng.integers(1, 4))))
    d = Definition("f", tuple(names), Guard(0, conditions, Number(0, 1.0)), "")
    out = np.zeros(shape)
    python_support_kernel(d, [], shape, accumulate=True)(out)
    want = np.zeros(shape)
    for point in itertools.product(*(range(n) for n in shape)):
        env = dict(zip(names, point, strict=True))
        want[point] = all(c.holds(env) for c in conditions)
    assert np.array_equal(out, want), support_source(d, [], shape)


def test_an_infeasible_support_writes_nothing_and_equalities_are_solved() -> None:
    i = Affine.of("i")
    empty = Definition("f", ("i",), Guard(0, (Condition(i.scale(0) - Affine.make({}, 1), ">="),), Number(0, 1.0)), "")
    assert support_source(empty, [], (4,)).rstrip().endswith("return")
    assert affine_nest([({"i": 1}, 0), ({"i": -1}, -1)], ["i"]) is None  # 0 ≤ i ≤ −1
    levels, _ = affine_nest([({"i": 1}, 0), ({"i": -1}, 9), ({"j": 3, "i": -1}, 1), ({"j": -3, "i": 1}, -1)],
                            ["i", "j"])
    assert type(levels[1]).__name__ == "Pin"  # 3j = i − 1: j is computed, not looped over


def _recurrence(steps: int, n: int = 5) -> iv.Expr:
    """The gradient w.r.t. x of the benchmark recurrence."""
    f, _, x = recurrence(steps, n)
    return iv.grad(f, x)


def test_the_steps_of_a_recurrence_share_their_kernels() -> None:
    """Compile work grows with the distinct steps, not with the program: 60 steps, few kernels."""
    pytest.importorskip("numba")
    g = _recurrence(60)
    program = lower(g)
    texts = {term.definition.source for b in program.bindings for term in (*b.terms, *b.clear)}
    assert len(program.bindings) > 100 and len(texts) <= 10
    rng = np.random.default_rng(3)
    arrays = {"A": rng.normal(size=(5, 5)) * 0.4, "x": rng.normal(size=5)}
    kernel = iv.compile(g, backend="numba")
    assert len(kernel.kernel.kernels) == len(texts)
    want = iv.evaluate(g, **arrays)
    assert np.allclose(kernel(**arrays), want, rtol=1e-12, atol=1e-300)
    assert np.allclose(iv.compile(g, backend="numpy")(**arrays), want, rtol=1e-12, atol=1e-300)


def test_deep_subtrees_are_hoisted_into_bindings_of_one_text() -> None:
    x = iv.var("x", (2,))
    e = x[0]
    for _ in range(300):
        e = iv.tanh(e) + x[1]
    program = lower(e)
    texts = {term.definition.source for b in program.bindings for term in b.terms}
    assert len(program.bindings) >= 600 // HOIST_DEPTH and len(texts) <= 3
    X = np.array([0.3, -0.2])
    assert iv.compile(e, backend="loops")(x=X) == pytest.approx(iv.evaluate(e, x=X), rel=1e-12)


@pytest.mark.parametrize("backend", ["loops", "numba"])
def test_disjunctions_and_negations_of_brackets(backend: str) -> None:
    """Overlapping index disjunctions count each point once; ≠ on data (an Or of < and >) and mixed
    index-or-data brackets agree with the interpreter bit for bit."""
    if backend == "numba":
        pytest.importorskip("numba")
    n = 7
    x = iv.var("x", (n,))
    i, j = iv.index("i"), iv.index("j")
    X = np.array([0.5, -1.0, 2.0, 0.5, 3.0, -0.25, 0.5])
    programs = [
        iv.gen(i, n, iv.bracket((i <= 4) | (i >= 2)) * x[i]),  # overlapping: each point once
        iv.gen(i, n, iv.sum(j, n, iv.bracket((j <= i - 2) | (j >= i + 2) | (i == j)) * x[j])),
        iv.gen(i, n, iv.bracket((i <= 2) | (x[i] > 1.0)) * x[i]),
        iv.gen(i, n, iv.bracket((x[i] < 0.5) | (x[i] > 0.5)) * x[i]),  # x ≠ 0.5
        iv.sum(i, n, iv.bracket((i >= 1) & ((x[i - 1] > 0.0) | (i == 3))) * x[i]),
    ]
    for e in programs:
        got = iv.compile(e, backend=backend)(x=X)
        want = iv.evaluate(e, x=X)
        assert np.array_equal(np.asarray(got), np.asarray(want)), str(e)


def test_names_of_the_program_never_reach_the_kernels() -> None:
    """Index and variable names that are the lowering's own (k0, i0, a0) or not identifiers at all."""
    x = iv.var("a0", (4,))
    y = iv.var("y'1", (4,))
    k0, i0 = iv.index("k0"), iv.index("i0")
    e = iv.gen(k0, 4, iv.sum(i0, 4, iv.bracket(i0 <= k0) * x[i0] * y[k0]))
    arrays = {"a0": np.arange(1.0, 5.0), "y'1": np.array([2.0, -1.0, 0.5, 3.0])}
    want = iv.evaluate(e, **arrays)
    for backend in ("loops", "numpy"):
        assert np.array_equal(iv.compile(e, backend=backend)(**arrays), want)
    source = iv.compile(e, backend="loops").source
    code = [line for line in source.splitlines() if not line.lstrip().startswith("#")]
    assert code and not any("y'1" in line for line in code)  # only the comments name the program's


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
@pytest.mark.parametrize("seed", range(3))
def test_cuda_kernels_run_on_the_host_agree_with_the_interpreter(seed: int) -> None:
    """The ``cupy`` backend's CUDA (one thread per element of each term) run thread by thread as host
    C++: a random program and its gradient against the interpreter."""
    from jacacc.iverson.codegen import _loop_backend

    exprs, arrays = program_and_gradients(seed, scalar=seed % 2 == 0)
    for expr in exprs:
        kernel = _loop_backend(expr, "cuda-host")
        assert np.allclose(flat(kernel(**arrays)), flat(iv.evaluate(expr, **arrays)), rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_sources_compile_with_nvcc() -> None:
    from jacacc.iverson.codegen import _loop_backend
    from jacacc.kernels import cuda_ptx_many

    g = _recurrence(3)
    sources = ["// f[" + text for text in dict.fromkeys(_loop_backend(g, "cuda-host").source.split("// f[")[1:])]
    assert sources and all(len(found) == 1 for found in cuda_ptx_many(sources))


@pytest.mark.gpu
def test_cupy_backend_agrees_with_the_interpreter(cupy_gpu) -> None:
    g = _recurrence(20)
    rng = np.random.default_rng(2)
    arrays = {"A": rng.normal(size=(5, 5)) * 0.4, "x": rng.normal(size=5)}
    assert np.allclose(iv.compile(g, backend="cupy")(**arrays), iv.evaluate(g, **arrays), rtol=1e-12, atol=1e-300)
