"""Keeping freed memory for the next call: glibc's ``malloc`` thresholds (issue 26, per-call cost).

A planned tensor program allocates its temporaries afresh on every call (NumPy
has no caching allocator), and glibc gives a freed block back to the kernel
when it was mapped on its own (above ``M_MMAP_THRESHOLD``) or sits at the top
of a heap with more than ``M_TRIM_THRESHOLD`` free: the next call then faults
every page of it in again, zeroed.  Programs with temporaries of megabytes pay
that on every call — kernel ridge regression's value at n = 1000 (three
1000 × 1000 temporaries) took 3.7 ms where JAX takes 1.8 ms, and 2.0 ms with
the thresholds below (one pinned core; ``experiments/tensor_breadth.py``'s
objective).  JAX and PyTorch keep freed memory in caching allocators for the
same reason.

:func:`keep_freed_memory` sets ``M_MMAP_THRESHOLD`` to 32 MiB (glibc's own
ceiling for the threshold it adapts at run time) and ``M_TRIM_THRESHOLD`` to
128 MiB: blocks up to 32 MiB come from the heap, and up to 128 MiB of freed
heap stays with the process.  The tensor evaluator calls it once, on the
first NumPy call of a program, unless ``JACACC_MALLOC=0`` is in the
environment; it does nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from typing import Any

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

#: blocks up to this many bytes come from the heap (glibc's ``DEFAULT_MMAP_THRESHOLD_MAX`` on 64 bits)
MMAP_THRESHOLD = 32 << 20
#: freed heap kept by the process before glibc trims it
TRIM_THRESHOLD = 128 << 20
# glibc's mallopt parameter numbers (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _glibc() -> Any:
    """The C library if it is glibc (it has ``gnu_get_libc_version``), else None."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") else None


@functools.cache
def keep_freed_memory() -> bool:
    """Set glibc's thresholds (:data:`MMAP_THRESHOLD`, :data:`TRIM_THRESHOLD`) once per process.

    Returns whether they were set: False with ``JACACC_MALLOC=0`` in the environment, where the C
    library is not glibc, or where ``mallopt`` refuses a value.

    >>> keep_freed_memory() in (True, False)
    True
    """
    if os.environ.get("JACACC_MALLOC", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    libc = _glibc()
    if libc is None:
        return False
    # mallopt returns 1 on success; setting either disables glibc's dynamic adjustment of both
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(_M_TRIM_THRESHOLD,
                                                                                        TRIM_THRESHOLD))
