"""Points shared between threads: the scalar Jacobian kernels' parallelism without Numba's ``parallel=True``.

The scalar schedules' kernels (straight-line and instruction-table, :mod:`jacacc.codegen`) are
``@njit(nogil=True)`` functions of a range of points ``first … last − 1``; :func:`run_blocks`
calls one per thread on contiguous shares of whole blocks.  Numba's ``parallel=True`` would do the
same with a ``prange`` over blocks, but its parfor passes cost about 1.5–2 s of every kernel's
compilation (measured on one straight-line kernel of 72 statements: 3.9 s with the ``prange``
driver, 2.0 s for the instruction-table interpreter without it), and a kernel that releases the
GIL runs as well on a pool of Python threads.  The thread count is Numba's
(:func:`numba.get_num_threads`, which ``NUMBA_NUM_THREADS`` and ``jacacc.bench.limit_numba_threads``
set), so benchmarks that pin Numba to one thread pin these kernels too.

Examples
--------
>>> import numpy as np
>>> seen = []
>>> run_blocks(lambda first, last: seen.append((first, last)), 10, block=4, work_per_point=1)
>>> seen
[(0, 10)]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["THREADED_MIN_WORK", "run_blocks"]

#: points × work per point below which a call runs on the calling thread alone (waking threads costs
#: tens of microseconds)
THREADED_MIN_WORK = 1 << 18
_POOL: Any = None


def _pool(workers: int) -> Any:
    """A thread pool of at least ``workers`` threads, made once per process."""
    global _POOL
    if _POOL is None or _POOL._max_workers < workers:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jacacc-kernel")
    return _POOL


def run_blocks(kernel: Callable[[int, int], Any], n_points: int, block: int, work_per_point: int,
               threads: int | None = None) -> None:
    """Call ``kernel(first, last)`` on shares of ``n_points`` points — whole blocks of ``block``
    points, one contiguous share per thread — on ``threads`` threads (default Numba's thread
    count, or 1 where Numba is not installed), or once on the calling thread where the work
    (``n_points × work_per_point``) is below :data:`THREADED_MIN_WORK`.  ``kernel`` must release
    the GIL to run in parallel; an exception in any share is raised here."""
    if threads is None:
        threads = _numba_threads()
    blocks = -(-n_points // block)
    threads = min(threads, blocks)
    if threads <= 1 or n_points * work_per_point < THREADED_MIN_WORK:
        kernel(0, n_points)
        return
    share = -(-blocks // threads) * block
    futures = [_pool(threads).submit(kernel, first, min(first + share, n_points))
               for first in range(0, n_points, share)]
    for future in futures:
        future.result()


def _numba_threads() -> int:
    try:
        import numba
    except ImportError:  # pragma: no cover - the kernels that call this need Numba
        return 1
    return int(numba.get_num_threads())
