"""Code generation: every backend's Jacobians against the numpy reference, the dense chain
rule and finite differences; structural-constant skipping; CUDA source; registry and cache."""

from __future__ import annotations

import importlib.util
import json
import linecache
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jacacc
from jacacc.codegen import backends, clear_cache, get_backend, lower, register_backend
from jacacc.codegen.cupy_ import CupyBackend
from jacacc.codegen.numpy_ import NumpyBackend
from jacacc.errors import GraphError, MissingExtraError, RegistryError
from jacacc.partials import Apply, Const
from jacacc.problems import get
from jacacc.verify import central_differences

REPO = Path(__file__).resolve().parents[2]


def _shared(x):
    # shared subexpressions (s used four times), constants, a constant output, an input as output
    s = np.sin(x[0] * x[1]) + 2.0
    t = s * s / (1.0 + x[2] ** 2)
    return [t * s, np.sqrt(t) - 3.0 * s, 7.0, x[1], s]


def _piecewise(x):
    # Iverson brackets, abs, a zero partial (x - x style), pow with a traced exponent, erf, arctan2, hypot
    a = np.maximum(x[0], x[1]) * np.abs(x[2])
    b = (x[0] + x[1]) - x[1]
    c = np.hypot(x[0], x[2]) ** x[1] + np.arctan2(x[1], x[0])
    from scipy.special import erf

    return [a + b * c, np.minimum(a, 0.5) - erf(x[2]), np.exp(-c) * np.tanh(b)]


FUNCTIONS = {
    "shared": (_shared, 3, lambda rng: rng.uniform(0.5, 1.5, 3)),
    "piecewise": (_piecewise, 3, lambda rng: rng.uniform(0.5, 1.5, 3) * np.array([1.0, -1.0, 1.0])),
    "RoeFlux_1d": (None, None, None),
    "BlackScholes": (None, None, None),
    "RobotArm_6DOF": (None, None, None),
}


def _traced_and_points(name: str, n_points: int = 5):
    fn, n, sampler = FUNCTIONS[name]
    if fn is None:
        p = get(name)
        traced = p.trace()
        X = np.stack([p.sample(s) for s in range(n_points)])
    else:
        traced = jacacc.trace(fn, n, unpack=False)
        rng = np.random.default_rng(1)
        X = np.stack([sampler(rng) for _ in range(n_points)])
    return traced, X


@pytest.fixture(scope="module", params=list(FUNCTIONS))
def case(request):
    traced, X = _traced_and_points(request.param)
    return request.param, traced, X


# ------------------------------------------------------------------ numpy reference
@pytest.mark.parametrize(
    "mode, method",
    [("vertex", "forward"), ("vertex", "reverse"), ("vertex", "markowitz"), ("vertex", "min_fill"),
     ("edge", "markowitz"), ("face", "greedy"), ("face", "vertex_markowitz")],
)
def test_numpy_kernel_matches_chain_rule_and_finite_differences(case, mode, method):
    name, traced, X = case
    if mode == "face" and traced.graph.n_edges > 150:
        pytest.skip("face elimination of a big graph: slow, covered by the small functions")
    k = jacacc.compile(traced, backend="numpy", method=method, mode=mode)
    V, J = k.values_and_jacobians(X)
    np.testing.assert_allclose(V, traced.values(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(J, traced.reference_jacobian(X), rtol=1e-10, atol=1e-10)
    fd = central_differences(traced.values, X[0])
    np.testing.assert_allclose(J[0], fd, rtol=1e-5, atol=1e-5)
    assert k.skipped + k.folded + k.emitted_mults == k.mults


def test_no_multiplication_by_structural_unit_or_zero(case):
    _, traced, _ = case
    for method in ("forward", "reverse", "markowitz"):
        prog = jacacc.compile(traced, backend="numpy", method=method).program
        for s in prog.statements:
            if s.phase == "accumulate" and isinstance(s.expr, Apply) and s.expr.fn == "mul":
                assert not any(isinstance(a, Const) and a.value in (0.0, 1.0, -1.0) for a in s.expr.args), s
        assert sum(s.phase == "accumulate" and s.expr.fn == "mul" for s in prog.statements) <= prog.emitted_mults


def test_skipped_counts_on_a_known_function():
    f = jacacc.trace(lambda a, b: (a + b) * (a - b), 2)
    k = jacacc.compile(f, backend="numpy", method="forward")
    # forward: the four products multiply the partials 1, 1, 1, -1 of a+b and a-b
    assert (k.mults, k.skipped, k.folded, k.emitted_mults) == (4, 4, 0, 0)
    np.testing.assert_allclose(k(np.array([[3.0, 2.0]])), [[[6.0, -4.0]]])
    g = jacacc.trace(lambda x: 2.0 * (3.0 * x[0]) * x[1], 2)
    kg = jacacc.compile(g, backend="numpy", method="forward")
    assert kg.folded >= 1 and kg.skipped + kg.folded + kg.emitted_mults == kg.mults
    np.testing.assert_allclose(kg(np.array([[1.0, 2.0]])), [[[12.0, 6.0]]])


def test_single_point_shapes_float32_and_bad_input():
    traced, X = _traced_and_points("shared")
    k = jacacc.compile(traced, backend="numpy")
    V, J = k.values_and_jacobians(X[0])
    assert V.shape == (5,) and J.shape == (5, 3)
    k32 = jacacc.compile(traced, backend="numpy", dtype="float32")
    assert k32 is not k and k32(X).dtype == np.float32
    np.testing.assert_allclose(k32(X), k(X), rtol=1e-4, atol=1e-4)
    with pytest.raises(GraphError, match=r"shape \(N, 3\)"):
        k(np.ones((2, 4)))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_results_written_into_given_buffers(backend):
    if backend == "numba":
        pytest.importorskip("numba")
    traced, X = _traced_and_points("shared")
    k = jacacc.compile(traced, backend=backend, method="markowitz")
    Vr, Jr = jacacc.compile(traced, backend="numpy", method="forward").values_and_jacobians(X)
    V, J = np.full((len(X), 5), np.nan), np.full((len(X), 5, 3), np.nan)  # stale contents must all go
    Vo, Jo = k.values_and_jacobians(X, out=(V, J))
    assert Vo is V and Jo is J
    np.testing.assert_allclose(J, Jr, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(V, Vr, rtol=1e-12, atol=1e-12)
    J2 = np.full_like(J, np.nan)
    assert k(X, out=J2) is J2 and np.array_equal(J2, J)
    one = np.full((5, 3), np.nan)  # a single point writes through a one-point view
    assert k(X[2], out=one) is one
    np.testing.assert_allclose(one, Jr[2], rtol=1e-12, atol=1e-12)
    with pytest.raises(GraphError, match=r"Jacobians buffer must be a C-contiguous float64 array of shape"):
        k(X, out=np.empty((len(X), 3, 5)))
    with pytest.raises(GraphError, match="not C-contiguous"):
        k(X, out=np.empty((len(X), 5, 6))[:, :, ::2])
    with pytest.raises(GraphError, match="float64"):
        k(X, out=np.empty((len(X), 5, 3), dtype=np.float32))
    frozen = np.empty((len(X), 5, 3))
    frozen.flags.writeable = False
    with pytest.raises(GraphError, match="read-only"):
        k(X, out=frozen)
    with pytest.raises(GraphError, match="values buffer must be a NumPy array"):
        k.values_and_jacobians(X, out=([0.0] * 5, None))
    with pytest.raises(GraphError, match=r"out must be a pair \(V, J\)"):
        k.values_and_jacobians(X, out=J)


def test_numeric_graph_gives_a_constant_jacobian_and_nan_values():
    g = jacacc.CompGraph.from_json("docs/examples/small.json")
    k = jacacc.compile(g, backend="numpy")
    V, J = k.values_and_jacobians(np.zeros((2, 2)))
    assert np.isnan(V).all()
    np.testing.assert_allclose(J[1], jacacc.reference_jacobian(g))


def test_symbolic_graph_without_primal_is_refused():
    data = json.loads((REPO / "docs/examples/roeflux_1d.json").read_text())
    del data["program"]
    with pytest.raises(GraphError, match="no primal program"):
        jacacc.compile(jacacc.CompGraph.from_json(data), backend="numpy")


@pytest.mark.parametrize("path", sorted((REPO / "docs/examples").glob("*.json")), ids=lambda p: p.name)
def test_every_shipped_example_compiles(path):
    """Each example graph compiles from its file alone; the traced ones (with a ``program``) give
    the Jacobian and values of the function they were traced from, the numeric ones their LCG's."""
    g = jacacc.CompGraph.from_json(path)
    k = jacacc.compile(g, backend="numpy")
    data = json.loads(path.read_text())
    if "program" not in data:
        np.testing.assert_allclose(k(np.zeros((1, len(g.inputs))))[0], jacacc.reference_jacobian(g))
        return
    problem = get(path.stem.replace("roeflux", "RoeFlux"))
    traced = problem.trace()
    X = np.stack([problem.sample(s) for s in range(4)])
    V, J = k.values_and_jacobians(X)
    np.testing.assert_allclose(J, traced.reference_jacobian(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(V, traced.values(X), rtol=1e-14)
    from jacacc.cli import main

    assert main(["compile", str(path), "--backend", "numpy"]) == 0


def test_traced_graph_round_trips_through_json_with_its_program(tmp_path):
    traced = jacacc.trace(_shared, 3, unpack=False)
    traced.graph.to_json(tmp_path / "g.json")
    g = jacacc.CompGraph.from_json(tmp_path / "g.json")
    X = np.random.default_rng(0).uniform(0.5, 1.5, (3, 3))
    V, J = jacacc.compile(g, backend="numpy").values_and_jacobians(X)
    np.testing.assert_allclose(J, traced.reference_jacobian(X), rtol=1e-13)
    np.testing.assert_allclose(V, traced.values(X), rtol=1e-14)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["edges"][0].__setitem__(2, "cos(q7)"), "names 'q7', which is not a vertex"),
    (lambda d: d["edges"][0].__setitem__(2, "floor(x0)"), "'floor' is not an operation"),
    (lambda d: d["edges"][0].__setitem__(2, "x0 +* 2"), "cannot be read"),
    (lambda d: d["program"].append(["zz", "sin", ["x0"]]), "node 'zz' is not a vertex"),
    (lambda d: d["program"].__setitem__(0, [d["program"][0][0], "frobnicate", ["x0"]]), "unknown operation"),
    (lambda d: d["program"].__setitem__(0, [d["program"][0][0], "sin", ["x0", "x1"]]), "takes 1 argument"),
    (lambda d: d["program"].__setitem__(0, [d["program"][0][0], "sin", ["q7"]]), "argument 'q7' is not a vertex"),
    (lambda d: d["program"].pop(), "gives no operation for"),
    (lambda d: d["program"].append(d["program"][0]), "twice"),
    (lambda d: d.__setitem__("program", [["v1", "sin"]]), "must be \\[node, op, \\[args\\]\\]"),
])
def test_bad_expressions_and_programs_are_refused_when_loaded(change, message):
    data = jacacc.trace(_shared, 3, unpack=False).graph.to_json()
    change(data)
    with pytest.raises(GraphError, match=message):
        jacacc.CompGraph.from_json(data)


# ------------------------------------------------------------------ registry, cache, source
def test_registry_errors_and_cache():
    assert {"numpy", "numba", "cupy"} <= set(backends())
    with pytest.raises(RegistryError, match="valid backends: .*numba"):
        jacacc.compile(jacacc.trace(lambda a: a * a, 1), backend="fortran")
    with pytest.raises(RegistryError, match="already registered"):
        register_backend("numpy", NumpyBackend)
    f = jacacc.trace(lambda a: a * a, 1)
    with pytest.raises(RegistryError, match="dtype"):
        jacacc.compile(f, backend="numpy", dtype="int32")
    k1 = jacacc.compile(f, backend="numpy")
    assert jacacc.compile(jacacc.trace(lambda b: b * b, 1), backend="numpy") is k1  # same graph fingerprint
    assert jacacc.compile(f, backend="numpy", cache=False) is not k1
    clear_cache()
    assert jacacc.compile(f, backend="numpy") is not k1
    assert isinstance(get_backend(CupyBackend), CupyBackend)


def test_generated_source_is_kept_and_registered_with_linecache():
    f = jacacc.trace(lambda a, b: np.log(a) * b, 2)
    k = jacacc.compile(f, backend="numpy", method="reverse")
    assert "np.log(x0)" in k.source and "def kernel(X)" in k.source
    k(np.array([[1.0, 2.0]]))
    names = [n for n in linecache.cache if n.startswith("<jacacc-kernel-numpy")]
    assert any("np.log(x0)" in "".join(linecache.cache[n][2]) for n in names)
    assert "skipped" in repr(k)


def test_import_jacacc_imports_no_heavy_dependency():
    code = (
        "import sys, jacacc, jacacc.codegen, jacacc.bench; "
        "heavy = [m for m in ('numba', 'cupy', 'jax', 'torch', 'matplotlib') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ numba
@pytest.fixture(scope="module")
def numba_kernels():
    pytest.importorskip("numba")
    out = {}
    for name in ("shared", "piecewise", "RoeFlux_1d", "BlackScholes"):
        traced, X = _traced_and_points(name)
        out[name] = (traced, X, jacacc.compile(traced, backend="numba", method="markowitz").compile())
    return out


@pytest.mark.parametrize("name", ["shared", "piecewise", "RoeFlux_1d", "BlackScholes"])
def test_numba_kernel_matches_numpy_reference_and_finite_differences(numba_kernels, name):
    traced, X, k = numba_kernels[name]
    V, J = k.values_and_jacobians(X)
    ref = jacacc.compile(traced, backend="numpy", method="markowitz")
    Vr, Jr = ref.values_and_jacobians(X)
    np.testing.assert_allclose(V, Vr, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(J, Jr, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(J[0], central_differences(traced.values, X[0]), rtol=1e-5, atol=1e-5)
    assert k.compile_time is not None and "nogil=True" in k.source


def test_numba_split_parts_and_float32():
    """A schedule cut into parts of at most 10 statements (four parts, each passing what later
    parts read), in float64 and float32."""
    pytest.importorskip("numba")
    traced, X = _traced_and_points("shared")
    split = jacacc.compile(traced, backend="numba", method="reverse", backend_options={"max_statements": 10})
    assert "kernel_part2" in split.source and "kept between parts" in split.source
    np.testing.assert_allclose(split(X), traced.reference_jacobian(X), rtol=1e-10, atol=1e-10)
    k32 = jacacc.compile(traced, backend="numba", method="reverse", dtype="float32",
                         backend_options={"max_statements": 10})
    J32 = k32(X)
    assert J32.dtype == np.float32
    np.testing.assert_allclose(J32, traced.reference_jacobian(X), rtol=2e-3, atol=2e-3)


_DISK_CACHE_SCRIPT = """
import json, sys
import numpy as np
import jacacc
disk_cache = sys.argv[1] == "1"
f = jacacc.trace(lambda x: [x[0] * x[1] + 0.4375 * x[0], x[0] - x[1] * x[1]], 2)
k = jacacc.compile(f, backend="numba", backend_options={"disk_cache": disk_cache}).compile()
V, J = k.values_and_jacobians(np.array([[2.0, 3.0]]))
assert np.allclose(J, [[[3.4375, 2.0], [1.0, -6.0]]]) and np.allclose(V, [[6.875, -7.0]])
modules = [m for name, m in sys.modules.items() if name.startswith("jacacc_kernel_")]
stats = modules[0].kernel.stats if modules else None
print(json.dumps({"module": bool(modules), "hits": stats and sum(stats.cache_hits.values()),
                  "misses": stats and sum(stats.cache_misses.values()), "cached_source": "cache=True" in k.source}))
"""


@pytest.mark.parametrize("directory", ["writable", "none"])
def test_numba_kernels_are_cached_on_disk_for_another_process(directory, tmp_path):
    """A numba kernel compiled once is loaded, not compiled, by a later process (Numba's on-disk cache
    under the kernel layer's directory); with ``disk_cache=False``, or no writable directory
    (``JACACC_CACHE_DIR=""``), it is compiled from memory each time, with the same results."""
    pytest.importorskip("numba")
    root = str(tmp_path) if directory == "writable" else ""

    def run(disk_cache: bool) -> dict:
        env = {**os.environ, "JACACC_CACHE_DIR": root, "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", _DISK_CACHE_SCRIPT, "1" if disk_cache else "0"],
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    if directory == "none":
        assert run(True) == {"module": False, "hits": None, "misses": None, "cached_source": True}
        return
    assert run(False) == {"module": False, "hits": None, "misses": None, "cached_source": False}
    assert not (tmp_path / "kernels").exists() or not list((tmp_path / "kernels").glob("k*.py"))
    assert run(True) == {"module": True, "hits": 0, "misses": 1, "cached_source": True}
    assert len(list((tmp_path / "kernels").glob("k*.py"))) == 1
    assert run(True) == {"module": True, "hits": 1, "misses": 0, "cached_source": True}


@pytest.mark.parametrize("n_points", [0, 1, 7, 300, 1025])
def test_numba_blocks_any_number_of_points(n_points):
    # N not a multiple of the block (and smaller than one, and empty): the last block is partial.
    # The blocking is what is tested, so a function the kernel computes with libm calls (no
    # vector-math helpers to inline) keeps the three compiles short.
    pytest.importorskip("numba")
    traced, X = _traced_and_points("shared", max(n_points, 1))
    X = X[:n_points]
    m, n = len(traced.graph.outputs), len(traced.graph.inputs)
    ref = jacacc.compile(traced, backend="numpy", method="reverse")
    for block in (None, 8, 64):
        k = jacacc.compile(traced, backend="numba", method="reverse", backend_options={"block": block})
        assert f"blocks of {block}" in k.source or block is None
        assert "def _exp" not in k.source
        V, J = k.values_and_jacobians(X)
        assert V.shape == (n_points, m) and J.shape == (n_points, m, n) and J.flags.c_contiguous
        if n_points:
            Vr, Jr = ref.values_and_jacobians(X)
            np.testing.assert_allclose(V, Vr, rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(J, Jr, rtol=1e-12, atol=1e-12)


def test_numba_vector_math_helpers_match_numpy_and_scipy():
    # the generated exp / log / erf / tanh (the kernel layer's, which the numba backend prints)
    # against NumPy and SciPy: a few ulp, and the special values
    pytest.importorskip("numba")
    from scipy.special import erf

    from jacacc.kernels import VECTOR_MATH, vector_math_source

    assert VECTOR_MATH == {"exp", "log", "erf", "tanh", "logaddexp"}
    src = "import math\nimport numpy as np\nfrom numba import njit\n"
    src += "\n".join(vector_math_source(VECTOR_MATH, False))
    src += (
        "\n\n@njit\ndef run(x, out):\n    for i in range(x.size):\n"
        "        out[0, i] = _exp(x[i])\n        out[1, i] = _log(x[i])\n        out[2, i] = _erf(x[i])\n"
        "        out[3, i] = _tanh(x[i])\n"
        "\n\n@njit\ndef run2(a, b, out):\n    for i in range(a.size):\n        out[i] = _logaddexp(a[i], b[i])\n"
    )
    namespace: dict = {}
    exec(src, namespace)
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-750, 750, 20000), rng.uniform(-7, 7, 20000), 10.0 ** rng.uniform(-320, 308, 20000),
                        rng.uniform(-0.6, 0.6, 20000), -(10.0 ** rng.uniform(-320, 1, 20000)),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 5e-324, 709.78, 709.79, -745.2, 1.0, 3.0, 6.0,
                         0.55, -0.55, np.nextafter(0.55, 0.0), 19.0, 20.0]])
    out = np.empty((4, x.size))
    namespace["run"](x, out)
    assert np.signbit(out[3][x == 0.0]).tolist() == np.signbit(x[x == 0.0]).tolist()  # tanh(-0) = -0
    with np.errstate(all="ignore"):
        for got, ref in zip(out, (np.exp(x), np.log(x), erf(x), np.tanh(x)), strict=True):
            np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
            finite = np.isfinite(ref)
            np.testing.assert_array_equal(got[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)])
            np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-15, atol=1e-320)
    # logaddexp: every pair of the values above against a permutation of them, near pairs (its
    # derivative's a - out), and every pair of the special values
    special = x[-18:]
    a = np.concatenate([x, x[: x.size // 2], np.repeat(special, special.size)])
    b = np.concatenate([rng.permutation(x), x[: x.size // 2] + rng.normal(scale=1e-3, size=x.size // 2),
                        np.tile(special, special.size)])
    got = np.empty(a.size)
    namespace["run2"](a, b, got)
    with np.errstate(all="ignore"):
        ref = np.logaddexp(a, b)
        # NumPy's max(a, b) + log1p(exp(-|a - b|)) loses what cancels in the sum: the error bound
        # is a few ulp of the larger of its two terms, not of the result
        scale = np.abs(np.maximum(a, b)) + np.log1p(np.exp(-np.abs(a - b)))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    finite = np.isfinite(ref)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)])
    assert np.all(np.abs(got[finite] - ref[finite]) <= 4 * np.finfo(float).eps * scale[finite] + 1e-320)


def test_numba_options_libm_fastmath_subset_and_bad_block():
    pytest.importorskip("numba")
    traced, X = _traced_and_points("BlackScholes")
    ref = jacacc.compile(traced, backend="numpy", method="markowitz")(X)
    libm = jacacc.compile(traced, backend="numba", backend_options={"vector_math": False})
    assert "_exp" not in libm.source and "math.erf" in libm.source
    np.testing.assert_allclose(libm(X), ref, rtol=1e-12, atol=1e-12)
    fm = jacacc.compile(traced, backend="numba", backend_options={"fastmath": {"contract", "nsz"}})
    assert "fastmath={'contract', 'nsz'}" in fm.source
    with pytest.raises(ValueError, match="block"):
        jacacc.compile(traced, backend="numba", backend_options={"block": 0})


@pytest.mark.exhaustive  # make test checks the fastmath kernel's source above; this compiles and runs it
def test_numba_fastmath_subset_kernel_runs():
    pytest.importorskip("numba")
    traced, X = _traced_and_points("BlackScholes")
    ref = jacacc.compile(traced, backend="numpy", method="markowitz")(X)
    fm = jacacc.compile(traced, backend="numba", backend_options={"fastmath": {"contract", "nsz"}})
    np.testing.assert_allclose(fm(X), ref, rtol=1e-12, atol=1e-12)


def test_numba_vector_math_auto_switches_to_libm_on_large_programs(monkeypatch):
    from jacacc.codegen import numba_
    from jacacc.codegen.base import lower

    traced, _ = _traced_and_points("BlackScholes")
    prog = lower(traced.graph, jacacc.optimize(traced.graph).schedule)
    assert "def _exp" in numba_.NumbaBackend().generate(prog, "float64")  # small: inlined helpers
    monkeypatch.setattr(numba_, "VECTOR_MATH_MAX_STATEMENTS", len(prog.statements) - 1)
    large = numba_.NumbaBackend().generate(prog, "float64")
    assert "def _exp" not in large and "math.erf" in large
    assert "def _exp" in numba_.NumbaBackend(vector_math=True).generate(prog, "float64")
    with pytest.raises(ValueError, match="vector_math"):
        numba_.NumbaBackend(vector_math="sometimes")


# ------------------------------------------------------------------ cupy / CUDA
def _cuda_sources():
    out = []
    for name in ("shared", "piecewise", "RoeFlux_1d"):
        traced, _ = _traced_and_points(name)
        prog = lower(traced.graph, jacacc.optimize(traced.graph, method="markowitz").schedule)
        for dtype in ("float64", "float32"):
            out.append((name, dtype, CupyBackend().generate(prog, dtype)))
    return out


def test_cuda_source_is_generated_without_cupy():
    for _, dtype, src in _cuda_sources():
        assert 'extern "C" __global__ void jacacc_kernel' in src
        assert ("typedef float real;" in src) == (dtype == "float32")
        if dtype == "float32":
            assert "1.0f" in src or "2.0f" in src


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_source_compiles_with_nvcc():
    from jacacc.kernels import cuda_ptx_many

    sources = _cuda_sources()
    for (name, dtype, _), found in zip(sources, cuda_ptx_many([src for _, _, src in sources]), strict=True):
        assert found, (name, dtype)


# A host stand-in for the CUDA launch: the kernel body is plain C++ over CUDA's math overloads,
# so g++ can run it thread by thread; the generated code is the one shipped to the GPU.
_HOST_SHIM = """
#include <cmath>
using namespace std;
#define __device__
#define __forceinline__ inline
#define __global__
#define __restrict__ __restrict
struct jc_dim { long long x; };
static jc_dim blockIdx, blockDim, threadIdx;
#include "kernel.cu"
extern "C" void run_threads(const real* X, real* V, real* J, long long N) {
    blockDim.x = 32;  // a partial last block: threads past N must return without writing
    for (long long b = 0; b * blockDim.x < N; ++b)
        for (long long t = 0; t < blockDim.x; ++t) {
            blockIdx.x = b;
            threadIdx.x = t;
            jacacc_kernel(X, V, J, N);
        }
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cuda_kernel_body_run_on_the_host_matches_numpy(tmp_path, dtype):
    """Without a GPU, run the generated CUDA kernel thread by thread as host C++ (g++):
    its indexing, stores, helpers and constants against the numpy reference."""
    import ctypes

    tol = 1e-12 if dtype == "float64" else 2e-4
    ctype = ctypes.c_double if dtype == "float64" else ctypes.c_float
    for name in ("shared", "piecewise", "RoeFlux_1d", "BlackScholes"):
        traced, X = _traced_and_points(name)
        k = jacacc.compile(traced, backend="cupy", method="markowitz", dtype=dtype)
        work = tmp_path / f"{name}_{dtype}"
        work.mkdir()
        (work / "kernel.cu").write_text(k.source)
        (work / "shim.cpp").write_text(_HOST_SHIM)
        lib = work / "kernel.so"
        subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-o", str(lib), str(work / "shim.cpp")],
                       check=True, cwd=work)
        run = ctypes.CDLL(str(lib)).run_threads
        run.argtypes = [ctypes.POINTER(ctype)] * 3 + [ctypes.c_longlong]
        pts = np.ascontiguousarray(X, dtype=dtype)
        n_pts, m, n = len(pts), k.n_outputs, k.n_inputs
        V, J = np.full((n_pts, m), np.nan, dtype), np.full((n_pts, m, n), np.nan, dtype)
        run(*(a.ctypes.data_as(ctypes.POINTER(ctype)) for a in (pts, V, J)), n_pts)
        Vr, Jr = jacacc.compile(traced, backend="numpy", method="markowitz").values_and_jacobians(X)
        np.testing.assert_allclose(J, Jr, rtol=tol, atol=tol)
        np.testing.assert_allclose(V, Vr, rtol=tol, atol=tol)


def test_cupy_backend_without_cupy_names_the_extra():
    try:
        import cupy  # noqa: F401
    except ImportError:
        k = jacacc.compile(jacacc.trace(lambda a: a * a, 1), backend="cupy")
        assert "jacacc_kernel" in k.source
        with pytest.raises(MissingExtraError, match=r"jacacc\[gpu\]"):
            k(np.ones((2, 1)))
    else:  # pragma: no cover - a CUDA machine
        pytest.skip("cupy is installed")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cupy_kernel_matches_numpy_reference(dtype, cupy_gpu):
    cp = cupy_gpu
    tol = 1e-10 if dtype == "float64" else 2e-3
    for name in ("shared", "piecewise", "RoeFlux_1d", "BlackScholes"):
        traced, X = _traced_and_points(name)
        k = jacacc.compile(traced, backend="cupy", method="markowitz", dtype=dtype)
        V, J = k.values_and_jacobians(X)
        Vr, Jr = jacacc.compile(traced, backend="numpy", method="markowitz").values_and_jacobians(X)
        np.testing.assert_allclose(J, Jr, rtol=tol, atol=tol)
        np.testing.assert_allclose(V, Vr, rtol=tol, atol=tol)
        Vd, Jd = k.values_and_jacobians(cp.asarray(X, dtype=dtype))
        np.testing.assert_allclose(cp.asnumpy(Jd), Jr, rtol=tol, atol=tol)
        Jbuf = cp.full(Jd.shape, cp.nan, dtype=dtype)  # device buffers are written in place
        assert k(cp.asarray(X, dtype=dtype), out=Jbuf) is Jbuf
        np.testing.assert_allclose(cp.asnumpy(Jbuf), Jr, rtol=tol, atol=tol)
        Jhost = np.full(Jr.shape, np.nan, dtype=dtype)  # host buffers are filled by the copy back
        assert k(X, out=Jhost) is Jhost
        np.testing.assert_allclose(Jhost, Jr, rtol=tol, atol=tol)


# ------------------------------------------------------------------ CLI
def test_cli_compile_prints_and_writes_source(tmp_path, capsys):
    from jacacc.cli import main

    assert main(["compile", "BlackScholes", "--backend", "cupy", "--method", "reverse"]) == 0
    out, err = capsys.readouterr()
    assert "__global__" in out and "skipped" in err
    path = tmp_path / "k.py"
    assert main(["compile", "docs/examples/small.json", "--backend", "numpy", "-o", str(path)]) == 0
    assert "def kernel(X)" in path.read_text()
    assert main(["compile", "nope", "--backend", "numpy"]) == 2
    assert main(["compile", "BlackScholes", "--backend", "fortran"]) == 2
    assert "valid backends" in capsys.readouterr().err


def test_backends_print_the_kernel_layer_s_spellings_helpers_and_preambles():
    """The scalar schedules' printers take the function spellings, the vectorizable helpers (also
    inside a template that calls one: logistic's exp) and the Numba / CUDA preambles from
    jacacc.kernels, as the loop kernels do."""
    from scipy.special import erf, expit

    from jacacc import kernels
    from jacacc.codegen import numba_

    traced = jacacc.trace(lambda x: [expit(x[0]) * erf(x[1]) + np.tanh(x[0] * x[1])], 2)
    prog = lower(traced.graph, jacacc.optimize(traced.graph).schedule)
    numba_source = numba_.NumbaBackend().generate(prog, "float64")
    assert "(1.0 / (1.0 + _exp(-(" in numba_source and "_erf(" in numba_source and "_tanh(" in numba_source
    assert all(f"def _{name}(x):" in numba_source for name in ("exp", "erf", "tanh")) and "def _log" not in numba_source
    libm = numba_.NumbaBackend(vector_math=False).generate(prog, "float64")
    assert "np.exp(-(" in libm and "math.erf(" in libm and "def _exp" not in libm
    assert numba_source.splitlines()[1:5] == kernels.numba_preamble("")[1:5]
    cuda_source = CupyBackend().generate(prog, "float32")
    assert "\n".join(kernels.cuda_preamble("float32")) in cuda_source and "jc_logistic(" in cuda_source
    X = np.random.default_rng(3).uniform(-1.0, 1.0, (7, 2))
    if importlib.util.find_spec("numba") is not None:
        got = jacacc.compile(traced, backend="numba").values_and_jacobians(X)
        want = jacacc.compile(traced, backend="numpy").values_and_jacobians(X)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-14)
