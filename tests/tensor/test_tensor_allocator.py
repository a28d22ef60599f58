"""glibc's malloc thresholds set once by the tensor evaluator (jacacc.tensor.allocator)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import jacacc.tensor as jt
from jacacc.tensor import allocator


class RecordingLibc:
    def __init__(self, result: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.result = result

    def mallopt(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return self.result


def test_thresholds_are_set_once_with_glibc_s_parameter_numbers(monkeypatch):
    libc = RecordingLibc()
    monkeypatch.setattr(allocator, "_glibc", lambda: libc)
    monkeypatch.delenv("JACACC_MALLOC", raising=False)
    allocator.keep_freed_memory.cache_clear()
    try:
        assert allocator.keep_freed_memory() and allocator.keep_freed_memory()
        # M_MMAP_THRESHOLD is -3, M_TRIM_THRESHOLD -1 in glibc's malloc.h
        assert libc.calls == [(-3, 32 << 20), (-1, 128 << 20)]
    finally:
        allocator.keep_freed_memory.cache_clear()


def test_switched_off_by_the_environment_or_refused_by_mallopt(monkeypatch):
    libc = RecordingLibc(result=0)
    monkeypatch.setattr(allocator, "_glibc", lambda: libc)
    try:
        for setting, calls in (("0", 0), ("1", 1)):
            monkeypatch.setenv("JACACC_MALLOC", setting)
            allocator.keep_freed_memory.cache_clear()
            assert allocator.keep_freed_memory() is False
            assert len(libc.calls) == calls  # a refused value stops at the first call
        monkeypatch.setattr(allocator, "_glibc", lambda: None)  # not glibc
        monkeypatch.setenv("JACACC_MALLOC", "1")
        allocator.keep_freed_memory.cache_clear()
        assert allocator.keep_freed_memory() is False
    finally:
        allocator.keep_freed_memory.cache_clear()


def test_a_program_s_first_numpy_call_sets_them_and_glibc_accepts_them():
    code = ("import numpy as np, jacacc.tensor as jt\n"
            "from jacacc.tensor import allocator\n"
            "assert allocator.keep_freed_memory.cache_info().currsize == 0\n"
            "jt.grad(lambda x: np.sum(np.sin(x)))(np.ones(3))\n"
            "print(allocator.keep_freed_memory(), allocator._glibc() is not None)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == out[1]  # set exactly where the C library is glibc
    np.testing.assert_allclose(jt.grad(lambda x: np.sum(np.sin(x)))(np.ones(3)), np.cos(np.ones(3)))
