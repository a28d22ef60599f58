"""The instruction-table tier (jacacc.kernels.tables): tables built from straight-line programs,
their register allocation, and every interpreter (NumPy, Numba, the CUDA source on the host)
against direct evaluation and against the straight-line kernels, below and above the tier
threshold; the interpreter compiled once and loaded by a fresh process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jacacc
from jacacc.codegen import lower
from jacacc.errors import RegistryError
from jacacc.kernels import tables
from jacacc.partials import FUNCTIONS, Apply, Const, Var
from jacacc.problems import get

REPO = Path(__file__).resolve().parents[2]

#: the operations of the drawn programs: each defined on all reals, so any drawn program is finite
#: or IEEE-consistent in every interpreter
SAFE = ["mul", "add", "sub", "neg", "square", "sin", "cos", "tanh", "exp", "arctan", "maximum", "where", "gt",
        "abs", "logaddexp", "hypot"]


def random_program(seed: int, n_inputs: int = 3, length: int = 40):
    """A seeded random straight-line program over :data:`SAFE`, nested expressions and constants
    included: (inputs, assignments, results)."""
    rng = np.random.default_rng(seed)
    inputs = [f"x{k}" for k in range(n_inputs)]
    names = list(inputs)
    assignments = []

    def operand():
        if rng.random() < 0.15:
            return Const(float(rng.choice([0.5, -1.25, 2.0, 0.0])))
        return Var(names[int(rng.integers(max(0, len(names) - 8), len(names)))])  # recent values, mostly

    for k in range(length):
        name = SAFE[int(rng.integers(len(SAFE)))]
        expr = Apply(name, tuple(operand() for _ in range(FUNCTIONS[name].arity)))
        if rng.random() < 0.3:  # a nested expression: several instructions for one assignment
            expr = Apply("mul", (expr, operand()))
        assignments.append((f"t{k}", expr))
        names.append(f"t{k}")
    results = [Var(names[-1]), Var(names[-2]), Const(0.0), Apply("neg", (Var(names[-3]),)), Var(inputs[0])]
    return inputs, assignments, results


def evaluate_directly(inputs, assignments, results, X):
    """Each assignment's expression evaluated by NumPy (jacacc.partials.Expr.evaluate): the reference."""
    env = {name: X[:, k] for k, name in enumerate(inputs)}
    with np.errstate(all="ignore"):
        for name, expr in assignments:
            env[name] = np.broadcast_to(expr.evaluate(env), (len(X),))
        return np.stack([np.broadcast_to(r.evaluate(env), (len(X),)) for r in results], axis=1)


def run_table(runner, table, X):
    V = np.full((len(X), 2), np.nan, dtype=X.dtype)
    J = np.full((len(X), len(table.outputs) - 2), np.nan, dtype=X.dtype)
    runner(X, V, J)
    return np.concatenate([V, J], axis=1)


# ------------------------------------------------------------------ the table itself
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_drawn_programs_numpy_table_matches_direct_evaluation(seed):
    inputs, assignments, results = random_program(seed)
    table = tables.InstructionTable.build(inputs, assignments, results)
    X = np.random.default_rng(seed).uniform(-2, 2, (7, len(inputs)))
    expected = evaluate_directly(inputs, assignments, results, X)
    np.testing.assert_allclose(run_table(tables.numpy_table_kernel(table), table, X), expected, rtol=1e-14)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_register_allocation_invariants(seed):
    """Every instruction reads registers written before (constants, inputs, or an earlier
    instruction's destination, not yet overwritten) and never writes a register it reads; runs
    cover the code in order, one operation each."""
    inputs, assignments, results = random_program(seed, length=60)
    table = tables.InstructionTable.build(inputs, assignments, results)
    holds: dict[int, str] = {r: "constant" for r in range(len(table.constants))}
    holds.update({int(r): "input" for r in table.input_rows})
    for q, (op, d, a, b) in enumerate(table.code.tolist()):
        arity = FUNCTIONS[tables.OPERATIONS[op]].arity
        reads = [a, b, int(table.third[q])][:arity]
        assert all(r in holds for r in reads), (q, reads)
        assert d not in reads and d >= len(table.constants)
        holds[d] = f"i{q}"
    assert all(int(r) in holds for r in table.outputs)
    assert table.runs[0, 1] == 0 and table.runs[-1, 2] == table.n_instructions
    assert (table.runs[1:, 1] == table.runs[:-1, 2]).all()
    for op, start, end in table.runs.tolist():
        assert (table.code[start:end, 0] == op).all()
    assert table.n_registers <= len(table.constants) + len(inputs) + table.n_instructions


def test_grouping_keeps_dependencies_and_lengthens_runs():
    """Eight independent chains written one after the other: grouped by level, each level's
    operation is one run, and the values are unchanged."""
    inputs = [f"x{k}" for k in range(8)]
    assignments = []
    for k in range(8):
        assignments += [(f"s{k}", Apply("sin", (Var(f"x{k}"),))), (f"m{k}", Apply("mul", (Var(f"s{k}"), Var(f"x{k}")))),
                        (f"e{k}", Apply("exp", (Var(f"m{k}"),)))]
    results = [Var(f"e{k}") for k in range(8)]
    table = tables.InstructionTable.build(inputs, assignments, results)
    assert [tables.OPERATIONS[op] for op in table.runs[:, 0]] == ["sin", "mul", "exp"]
    X = np.random.default_rng(0).uniform(-1, 1, (4, 8))
    V, J = np.empty((4, 8)), np.empty((4, 0))
    tables.numpy_table_kernel(table)(X, V, J)
    np.testing.assert_allclose(V, evaluate_directly(inputs, assignments, results, X), rtol=1e-15)


def test_bad_programs_are_refused_by_name(monkeypatch):
    with pytest.raises(ValueError, match="'v9' is read before it is assigned"):
        tables.InstructionTable.build(["x0"], [("v1", Apply("sin", (Var("v9"),)))], [Var("v1")])
    # an operation declared after the interpreters were generated has no instruction
    monkeypatch.setattr(tables, "_OPCODE", {k: v for k, v in tables._OPCODE.items() if k != "sin"})
    with pytest.raises(ValueError, match="operation 'sin' has no interpreter instruction"):
        tables.InstructionTable.build(["x0"], [("v1", Apply("sin", (Var("x0"),)))], [Var("v1")])


def test_deeply_nested_expression_flattens_without_recursion():
    expr = Var("x0")
    for _ in range(20_000):
        expr = Apply("sin", (expr,))
    table = tables.InstructionTable.build(["x0"], [("y", expr)], [Var("y")])
    assert table.n_instructions == 20_000 and len(table.runs) == 1


# ------------------------------------------------------------------ the compiled interpreters
@pytest.fixture(scope="module")
def drawn():
    programs = [random_program(seed, length=80) for seed in range(4)]
    return [(p, tables.InstructionTable.build(*p)) for p in programs]


def test_numba_interpreter_matches_direct_evaluation(drawn):
    # float32 interpreters: test_table_tier_single_points_buffers_and_float32 in make test
    _check_numba_interpreter(drawn[:1], float32=False)


@pytest.mark.exhaustive  # every drawn program in both dtypes: seven more interpreter compiles
def test_numba_interpreter_matches_direct_evaluation_on_every_drawn_program(drawn):
    _check_numba_interpreter(drawn, float32=True)


def _check_numba_interpreter(drawn, float32):
    pytest.importorskip("numba")
    for program, table in drawn:
        X = np.random.default_rng(1).uniform(-2, 2, (300, 3))  # several blocks and a partial one
        expected = evaluate_directly(*program, X)
        for block in (8, 128):
            got = run_table(tables.numba_table_kernel(table, block=block), table, X)
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-300)
        # one point at a time: the one-point interpreter (registers in one vector)
        kernel = tables.numba_table_kernel(table)
        for row in range(0, 300, 37):
            got = run_table(kernel.on_this_thread, table, X[row:row + 1])
            np.testing.assert_allclose(got, expected[row:row + 1], rtol=1e-12, atol=1e-300)
        if not float32:
            continue
        got32 = run_table(tables.numba_table_kernel(table, "float32"), table, X.astype(np.float32))
        assert got32.dtype == np.float32
        finite = np.isfinite(expected) & (np.abs(expected) < 1e30)
        np.testing.assert_allclose(got32[finite], expected[finite], rtol=2e-3, atol=2e-3)


def test_numba_interpreter_shares_points_between_threads(drawn, monkeypatch):
    """Past THREADED_MIN_WORK the points are split between threads: the same numbers as one thread."""
    pytest.importorskip("numba")
    program, table = drawn[0]
    X = np.random.default_rng(2).uniform(-2, 2, (2051, 3))
    one = run_table(tables.numba_table_kernel(table), table, X)
    from jacacc.kernels import threads

    monkeypatch.setattr(threads, "THREADED_MIN_WORK", 0)
    import numba

    if numba.get_num_threads() < 2:
        pytest.skip("one Numba thread")
    many = run_table(tables.numba_table_kernel(table), table, X)
    np.testing.assert_array_equal(many, one)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cuda_interpreter_on_the_host_matches_direct_evaluation(drawn, dtype, tmp_path):
    tol = 1e-12 if dtype == "float64" else 2e-3
    for program, table in drawn:
        X = np.random.default_rng(3).uniform(-2, 2, (37, 3)).astype(dtype)
        expected = evaluate_directly(*program, X.astype(np.float64))
        got = run_table(tables.host_table_kernel(table, dtype, directory=tmp_path), table, X)
        finite = np.isfinite(expected) & (np.abs(expected) < 1e30)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=tol, atol=tol)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_interpreter_compiles_with_nvcc(tmp_path):
    from jacacc.kernels.cuda import cuda_ptx

    for dtype in ("float64", "float32"):
        ptx = cuda_ptx(tables.cuda_table_source(dtype), directory=tmp_path)
        assert tables.CUDA_TABLE_KERNEL in ptx


# ------------------------------------------------------------------ the tiers of the backends
def _roe():
    p = get("RoeFlux_1d")
    return p.trace(), np.stack([p.sample(s) for s in range(9)])


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_programs_just_below_and_above_the_threshold(backend):
    """With ``tier="auto"`` a program of exactly ``table_threshold`` statements stays straight-line,
    one statement more runs as a table; both agree with the straight-line reference (rtol 1e-12)."""
    if backend == "numba":
        pytest.importorskip("numba")
    traced, X = _roe()
    plan = jacacc.optimize(traced.graph, method="markowitz")
    size = len(lower(traced.graph, plan.schedule).statements)
    Vr, Jr = jacacc.compile(traced, backend="numpy", schedule=plan,
                            backend_options={"tier": "straight"}).values_and_jacobians(X)
    for threshold, tier in ((size, "straight"), (size - 1, "table")):
        k = jacacc.compile(traced, backend=backend, schedule=plan,
                           backend_options={"tier": "auto", "table_threshold": threshold})
        assert k.tier == tier
        V, J = k.values_and_jacobians(X)
        np.testing.assert_allclose(V, Vr, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(J, Jr, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(J, traced.reference_jacobian(X), rtol=1e-10, atol=1e-12)
        if tier == "table":
            assert "instruction table" in repr(k) and k.source.startswith("InstructionTable(")


def test_table_tier_single_points_buffers_and_float32():
    pytest.importorskip("numba")
    traced, X = _roe()
    k = jacacc.compile(traced, backend="numba", backend_options={"tier": "table"})
    Jr = traced.reference_jacobian(X)
    np.testing.assert_allclose(k(X[0]), Jr[0], rtol=1e-11)
    J = np.empty_like(Jr)
    assert k(X, out=J) is J
    np.testing.assert_allclose(J, Jr, rtol=1e-11)
    assert k(X[:0]).shape == (0, *Jr.shape[1:])
    k32 = jacacc.compile(traced, backend="numba", dtype="float32", backend_options={"tier": "table"})
    np.testing.assert_allclose(k32(X), Jr, rtol=2e-3, atol=2e-3)


def test_a_numeric_graph_runs_as_a_table():
    """A graph without a primal program: constant Jacobian, NaN values, in the table tier too."""
    g = jacacc.graph.as_graph({"inputs": ["a", "b"], "outputs": ["y"],
                               "edges": [["a", "v", 2.0], ["b", "v", -1.0], ["v", "y", 3.0]]})
    k = jacacc.compile(g, backend="numpy", backend_options={"tier": "table"})
    V, J = k.values_and_jacobians(np.zeros((2, 2)))
    assert np.isnan(V).all() and J.tolist() == [[[6.0, -3.0]]] * 2


def test_bad_tier_options_are_refused():
    with pytest.raises(RegistryError, match="tier must be one of"):
        jacacc.compile(jacacc.trace(lambda x: [x[0]], 1), backend="numpy", backend_options={"tier": "fast"})
    with pytest.raises(RegistryError, match="table_threshold must be an integer"):
        jacacc.compile(jacacc.trace(lambda x: [x[0]], 1), backend="numba", backend_options={"table_threshold": -1})


_FRESH_CACHE_SCRIPT = """
import json, sys
import numpy as np
import jacacc
f = jacacc.trace(lambda x: [np.sin(x[0]) * x[1] - x[1] ** 2, np.tanh(x[0] * x[1])], 2)
k = jacacc.compile(f, backend="numba", backend_options={"tier": "table"}).compile()
X = np.array([[0.5, 2.0], [-1.0, 0.25]])
assert np.allclose(k(X), f.reference_jacobian(X), rtol=1e-12)
modules = [m for name, m in sys.modules.items() if name.startswith("jacacc_kernel_")]
stats = modules[0].table_kernel.stats
print(json.dumps({"tier": k.tier, "hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values())}))
"""


def test_interpreter_compiled_in_one_process_is_loaded_by_the_next(tmp_path):
    """An empty kernel cache: the first process compiles the interpreter and writes it to the cache;
    a second process loads it (Numba's cache hits), whatever program it runs next."""
    pytest.importorskip("numba")

    def run() -> dict:
        env = {**os.environ, "JACACC_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", _FRESH_CACHE_SCRIPT], capture_output=True, text=True,
                              env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert run() == {"tier": "table", "hits": 0, "misses": 1}
    assert run() == {"tier": "table", "hits": 1, "misses": 0}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cupy_table_tier_matches_the_straight_line_reference(dtype, cupy_gpu):
    """The CUDA interpreter on a GPU: host and device points, device buffers written in place, and
    more points than one launch's register file holds (several chunks)."""
    cp = cupy_gpu
    tol = 1e-12 if dtype == "float64" else 2e-3
    traced, X = _roe()
    Vr, Jr = jacacc.compile(traced, backend="numpy", backend_options={"tier": "straight"}).values_and_jacobians(X)
    k = jacacc.compile(traced, backend="cupy", dtype=dtype, backend_options={"tier": "table"})
    assert k.tier == "table"
    V, J = k.values_and_jacobians(X)
    np.testing.assert_allclose(J, Jr, rtol=tol, atol=tol)
    np.testing.assert_allclose(V, Vr, rtol=tol, atol=tol)
    Xd = cp.asarray(X, dtype=dtype)
    Jbuf = cp.full((len(X), *Jr.shape[1:]), cp.nan, dtype=dtype)
    assert k(Xd, out=Jbuf) is Jbuf
    np.testing.assert_allclose(cp.asnumpy(Jbuf), Jr, rtol=tol, atol=tol)
    table = k.program.table()
    chunk_bytes = table.n_registers * np.dtype(dtype).itemsize * 4  # four points per launch
    from unittest import mock

    with mock.patch.object(tables, "CUDA_REGISTER_BYTES", chunk_bytes):
        again = jacacc.compile(traced, backend="cupy", dtype=dtype, cache=False,
                               backend_options={"tier": "table"})
        np.testing.assert_allclose(again(X), Jr, rtol=tol, atol=tol)
