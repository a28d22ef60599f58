"""The Dask executor: cells as tasks on an existing ``dask.distributed`` cluster.

The coordinator keeps a bounded window of futures in flight (twice the
cluster's threads, at least 8, re-read every few seconds so a cluster that
grows is used), consumes them with ``as_completed`` as they finish, and
submits the next cell for each one done: its memory does not grow with the
grid.  Resilience is Dask's: a worker that dies has its tasks rescheduled by
the scheduler, and a task whose workers died ``distributed.scheduler.allowed-failures``
times (3 by default) fails with ``KilledWorker`` — stored as that cell's
error.  With a ``cell_timeout`` each cell runs in a child interpreter on the
worker (:func:`~jacacc.sweep.cells.run_cell_in_subprocess`), killed at the
deadline: Dask cannot stop a running task, and its worker processes are
daemonic (no multiprocessing children), so the guard is a subprocess.

Dask is an optional extra (``pip install 'jacacc[distributed]'``); this
module imports it only when a sweep runs.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from jacacc.errors import JacaccError, require_extra
from jacacc.sweep.cells import error_line, failed_outcome, now, run_cell, run_cell_in_subprocess
from jacacc.sweep.grid import Cell

__all__ = ["DaskCluster", "run_cell_on_worker"]

Emit = Callable[[dict[str, Any]], None]
MIN_WINDOW = 8
WINDOW_REFRESH_S = 5.0
CONNECT_TIMEOUT = "10s"


def run_cell_on_worker(cell: Cell, cell_timeout: float | None) -> dict[str, Any]:
    """The task each cell becomes: run it (in a killable child when there is a timeout),
    labelled with the Dask worker's address and pid."""
    from distributed import get_worker

    try:
        label = f"{get_worker().address} (pid {os.getpid()})"
    except ValueError:  # not on a worker (a client that runs tasks locally)
        label = None
    if cell_timeout is None:
        return run_cell(cell, label)
    return run_cell_in_subprocess(cell, cell_timeout, label)


class DaskCluster:
    """Run cells on a Dask cluster given by its scheduler address or a ``Client``.

    Parameters
    ----------
    scheduler : str or distributed.Client
        ``tcp://host:8786`` (a client is opened and closed by the sweep) or a
        client of your own (left open).
    cell_timeout : float, optional
        Seconds per cell; past it the cell's child process is killed and the
        cell stored as ``timeout``.
    """

    def __init__(self, scheduler: Any, cell_timeout: float | None = None) -> None:
        self.scheduler = scheduler
        self.cell_timeout = cell_timeout

    def describe(self) -> str:
        address = self.scheduler if isinstance(self.scheduler, str) else getattr(self.scheduler, "scheduler", None)
        address = getattr(address, "address", address)
        return f"dask {address}"

    def _client(self) -> tuple[Any, bool]:
        """The client and whether the sweep opened it (and so closes it)."""
        distributed = require_extra("distributed", "distributed")
        if isinstance(self.scheduler, distributed.Client):
            return self.scheduler, False
        if not isinstance(self.scheduler, str):
            raise JacaccError(f"scheduler must be an address such as 'tcp://host:8786' or a "
                              f"dask.distributed.Client, got {type(self.scheduler).__name__}")
        try:
            return distributed.Client(self.scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False), True
        except (OSError, TimeoutError, ValueError) as exc:
            raise JacaccError(f"cannot reach the Dask scheduler at {self.scheduler}: {error_line(exc)}") from None

    def run(self, cells: Iterator[Cell], emit: Emit) -> None:
        distributed = require_extra("distributed", "distributed")
        client, owned = self._client()
        token = uuid.uuid4().hex[:12]
        in_flight: dict[Any, tuple[Cell, str]] = {}
        finished = distributed.as_completed(loop=client.loop)
        source = iter(cells)
        count = 0
        window, refreshed = self._window(client), time.monotonic()
        try:
            while True:
                while len(in_flight) < window:
                    cell = next(source, None)
                    if cell is None:
                        break
                    count += 1
                    future = client.submit(run_cell_on_worker, cell, self.cell_timeout, pure=False,
                                           key=f"jacacc-sweep-{token}-{count}")
                    in_flight[future] = (cell, now())
                    finished.add(future)
                if not in_flight:
                    return
                future = next(finished)
                cell, started = in_flight.pop(future)
                emit(self._outcome(future, cell, started))
                future.release()
                if time.monotonic() - refreshed > WINDOW_REFRESH_S:
                    window, refreshed = self._window(client), time.monotonic()
        finally:
            if in_flight:
                client.cancel(list(in_flight))
            if owned:
                client.close()

    @staticmethod
    def _window(client: Any) -> int:
        threads = sum(client.nthreads().values())
        return max(MIN_WINDOW, 2 * threads)

    @staticmethod
    def _outcome(future: Any, cell: Cell, started: str) -> dict[str, Any]:
        """The task's outcome, or an error record when the task itself failed
        (``KilledWorker``: its workers died too often)."""
        try:
            return future.result()
        except Exception as exc:
            return failed_outcome(cell, "error", error_line(exc), "dask", started, 0.0)
