"""Fixtures shared by several test modules."""

from __future__ import annotations

import os

import pytest

from jacacc.kernels import cache_root

# Numba's OpenMP threads spin after each parallel kernel by default; on a two-core machine they
# then take the cores from everything else the test process runs.  Passive waiting, set before
# Numba starts its thread pool.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")


# The references the tests compare against are compiled by XLA, ~2700 compiles a run (a third of
# the suite's time on two cores): JAX's persistent compilation cache keeps them between runs, as
# Numba's keeps jacacc's kernels.  Only the peers' executables are cached; set before JAX starts
# (the experiments' subprocesses inherit it).  JAX_ENABLE_COMPILATION_CACHE=false turns it off.
_CACHE_ROOT = cache_root()  # beside jacacc's kernel cache; none where JACACC_CACHE_DIR is empty
if _CACHE_ROOT is not None:
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_CACHE_ROOT / "xla"))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

try:
    from hypothesis import settings
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    settings = None
if settings is not None:
    # The same examples in every run and on every xdist worker: each test's generator is seeded from
    # the test itself, and no example database (a failure saved by one worker would change what
    # another replays).  A test's own @settings still sets its size and deadline.
    settings.register_profile("jacacc", derandomize=True, database=None)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "jacacc"))


@pytest.fixture(scope="module")
def float64_jax():
    """JAX in float64 for one module (restored afterwards): references at rtol 1e-10
    need it.  A module opts in with ``pytestmark = pytest.mark.usefixtures("float64_jax")``."""
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


@pytest.fixture(scope="session")
def cupy_gpu():
    """CuPy on a CUDA GPU: the module, or the test is skipped (no CuPy, no GPU)."""
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no GPU")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no GPU")
    return cupy


#: The longest test files of ``make test``, longest first (seconds with an empty cache on the 2-core
#: machine, measured 2026-11-29: 38, 27, 27, 26, 26, 20, 17, 17, 16, 16, 15, 15).
#: pytest-xdist's ``--dist loadfile`` hands whole files to the workers in collection order; started
#: first (longest-processing-time-first scheduling), a long file no longer runs alone at the end
#: while the other worker idles.  Only the order changes: every test still runs, in its file's order.
LONGEST_FIRST = (
    "tests/tensor/test_tensor_arrays.py", "tests/tensor/test_tensor_numpy_linalg.py", "tests/codegen/test_codegen.py",
    "tests/elementwise/test_elementwise.py", "tests/tensor/test_tensor_fusion.py", "tests/codegen/test_tables.py",
    "tests/iverson/test_iverson_codegen.py", "tests/frontends/test_jaxpr.py", "tests/tensor/test_tensor_properties.py",
    "tests/experiments/test_sweep.py", "tests/tensor/test_tensor_scipy.py", "tests/tensor/test_tensor_svd.py",
)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: k for k, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order
