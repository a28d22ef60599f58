"""The on-disk kernel cache (``jacacc.kernels.loops.cached_module``) survives damaged entries (issue 41)."""

from __future__ import annotations

import numpy as np
import pytest

from jacacc.kernels import loops

TEXT = """
import numpy as np
from numba import njit


@njit(cache=True)
def scaled_sine(x, out):
    for i in range(x.shape[0]):
        out[i] = 3.0 * np.sin(x[i])
"""


def _call(module) -> np.ndarray:
    x = np.linspace(-1.0, 1.0, 7)
    out = np.empty_like(x)
    module.scaled_sine(x, out)
    return out


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_cache_entry_is_compiled_again_and_rewritten(damage, tmp_path, monkeypatch):
    """A truncated, overwritten or emptied ``.nbi``/``.nbc`` file once failed every later call, in
    every process, until the cache was deleted; now the function compiles afresh and its entry is
    written again, readable by the next import."""
    pytest.importorskip("numba")
    monkeypatch.setenv("JACACC_CACHE_DIR", str(tmp_path))
    want = 3.0 * np.sin(np.linspace(-1.0, 1.0, 7))
    np.testing.assert_array_equal(_call(loops.cached_module(TEXT)), want)
    entries = sorted(p for p in (tmp_path / "kernels").rglob("*") if p.suffix in (".nbi", ".nbc"))
    assert {p.suffix for p in entries} == {".nbi", ".nbc"}
    for path in entries:
        data = path.read_bytes()
        path.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"\x80\x04not a pickle" * 9,
                          "empty": b""}[damage])
    # a new import of the same module: new dispatchers, which read the damaged entries from disk
    np.testing.assert_array_equal(_call(loops.cached_module(TEXT)), want)
    again = loops.cached_module(TEXT)
    np.testing.assert_array_equal(_call(again), want)
    assert sum(again.scaled_sine.stats.cache_hits.values()) == 1  # the rewritten entry is read back
