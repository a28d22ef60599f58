"""The two executors that need nothing but Python: in-process, and local worker processes.

An executor's one method is ``run(cells, emit)``: it pulls cells from the
iterator as it has room for them and calls ``emit(outcome)`` in the
coordinating process for each finished one (the runner stores it there).

:class:`LocalProcesses` is a small process pool written for sweeps rather
than :class:`concurrent.futures.ProcessPoolExecutor`, for two reasons: a
cell past its timeout must be *stopped*, and ProcessPoolExecutor cannot stop
one running task (killing its worker breaks the whole pool and fails every
task in flight); and a worker that dies should cost only the cell it was
running, rescheduled up to ``max_attempts`` times, which needs to know which
worker ran what.  Each worker has its own pipe and runs one cell at a time;
the coordinator waits on the pipes and the processes' sentinels together
(:func:`multiprocessing.connection.wait`), kills a worker whose cell is past
its deadline and starts a fresh one.  Workers start by ``forkserver`` where
available (no fork of a threaded coordinator), else ``spawn``.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from jacacc.errors import JacaccError
from jacacc.sweep.cells import failed_outcome, now, run_cell
from jacacc.sweep.grid import Cell

__all__ = ["InProcess", "LocalProcesses"]

Emit = Callable[[dict[str, Any]], None]
MAX_ATTEMPTS = 3
STARTUP_TIMEOUT = 120.0
READY = "ready"
_STOP_GRACE = 1.0


class InProcess:
    """Run every cell in the coordinating process, one after the other: nothing to start.

    Examples
    --------
    >>> from jacacc.sweep.grid import parse_grid
    >>> [grid] = parse_grid({"problems": ["chain_50"], "methods": ["forward", "reverse"]})
    >>> out = []
    >>> InProcess().run(grid.cells(), out.append)
    >>> [o["result"]["mults"] for o in out]
    [49, 49]
    """

    def describe(self) -> str:
        return "in-process"

    def run(self, cells: Iterator[Cell], emit: Emit) -> None:
        for cell in cells:
            emit(run_cell(cell))


def _worker_main(conn: Connection) -> None:
    """A worker's loop: say it is ready, then receive a cell and send its outcome;
    ``None`` or a closed pipe ends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    conn.send(READY)
    while True:
        try:
            cell = conn.recv()
        except (EOFError, OSError):
            return
        if cell is None:
            return
        conn.send(run_cell(cell))


@dataclass
class _Slot:
    """One worker process and the cell it runs."""

    process: Any
    conn: Connection
    launched: float
    ready: bool = False
    cell: Cell | None = None
    attempts: int = 0
    started: str = ""
    start: float = 0.0

    @property
    def label(self) -> str:
        from jacacc.sweep.cells import machine

        return f"{machine()['hostname']}:{self.process.pid}"


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it, else all)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows: no affinity call
        return max(1, os.cpu_count() or 1)


class LocalProcesses:
    """``workers`` local worker processes, with a hard per-cell timeout.

    Parameters
    ----------
    workers : int
        Capped at :func:`available_cores`.
    cell_timeout : float, optional
        Seconds; a cell past it is stored as ``timeout`` and its worker killed
        and replaced.
    max_attempts : int, default 3
        How many times a cell is started on a worker that then dies before it
        is stored as an ``error``.

    Examples
    --------
    >>> from jacacc.sweep.grid import parse_grid
    >>> [grid] = parse_grid({"problems": ["chain_50"], "methods": ["forward", "reverse"]})
    >>> out = []
    >>> LocalProcesses(2).run(grid.cells(), out.append)
    >>> sorted(o["method"] for o in out)
    ['forward', 'reverse']
    """

    def __init__(self, workers: int, cell_timeout: float | None = None, max_attempts: int = MAX_ATTEMPTS) -> None:
        # more processes than cores only share the cores, each paying its own start-up and memory
        self.requested, self.workers = workers, min(workers, available_cores())
        self.cell_timeout = cell_timeout
        self.max_attempts = max_attempts
        methods = multiprocessing.get_all_start_methods()
        self._context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        if "forkserver" in methods:
            self._context.set_forkserver_preload(["jacacc.sweep.cells", "jacacc.api", "jacacc.problems"])

    def describe(self) -> str:
        text = f"{self.workers} local process" + ("es" if self.workers > 1 else "")
        if self.requested > self.workers:
            text += f" ({self.requested} asked for; capped at the {self.workers} cores available)"
        return text

    def run(self, cells: Iterator[Cell], emit: Emit) -> None:
        slots = [self._start() for _ in range(self.workers)]
        retry: collections.deque[tuple[Cell, int]] = collections.deque()
        source = iter(cells)
        exhausted = False
        try:
            while True:
                for slot in slots:
                    if slot.cell is None and not exhausted:
                        exhausted = not self._assign(slot, retry, source)
                busy = [s for s in slots if s.cell is not None]
                if not busy:
                    return
                wait([s.conn for s in busy] + [s.process.sentinel for s in busy], timeout=self._wait_time(busy))
                for i, slot in enumerate(slots):
                    if slot.cell is not None:
                        slots[i] = self._collect(slot, retry, emit)
                exhausted = exhausted and not retry
        finally:
            self._stop(slots)

    # ------------------------------------------------------------------ one worker
    def _start(self) -> _Slot:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(target=_worker_main, args=(theirs,), daemon=True,
                                        name="jacacc-sweep-worker")
        process.start()
        theirs.close()
        return _Slot(process, ours, time.monotonic())

    def _assign(self, slot: _Slot, retry: collections.deque, source: Iterator[Cell]) -> bool:
        """Give ``slot`` the next cell (a rescheduled one first); False when there is none left."""
        if retry:
            cell, attempts = retry.popleft()
        else:
            cell = next(source, None)
            if cell is None:
                return False
            attempts = 0
        slot.cell, slot.attempts, slot.started, slot.start = cell, attempts + 1, now(), time.monotonic()
        try:
            slot.conn.send(cell)
        except (BrokenPipeError, OSError):
            pass  # the worker is gone: its sentinel shows it and _collect reschedules the cell
        return True

    def _wait_time(self, busy: list[_Slot]) -> float | None:
        """Until the first deadline: a running cell's timeout or a starting worker's start-up limit."""
        deadlines = [s.launched + STARTUP_TIMEOUT for s in busy if not s.ready]
        if self.cell_timeout is not None:
            deadlines += [s.start + self.cell_timeout for s in busy if s.ready]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def _collect(self, slot: _Slot, retry: collections.deque, emit: Emit) -> _Slot:
        """Emit ``slot``'s outcome if it has one, handle a dead or overdue worker; returns
        the slot to keep (a fresh worker where the old one was killed or died)."""
        while slot.cell is not None and slot.conn.poll():
            try:
                message = slot.conn.recv()
            except (EOFError, OSError):
                break
            if message == READY:  # the cell's clock starts when its worker can run it
                slot.ready, slot.start = True, time.monotonic()
                continue
            message["attempts"] = slot.attempts
            slot.cell = None
            emit(message)
            return slot
        if not slot.process.is_alive():
            return self._died(slot, retry, emit)
        if not slot.ready and time.monotonic() - slot.launched > STARTUP_TIMEOUT:
            self._kill(slot)
            raise JacaccError(f"a local worker process did not start within {STARTUP_TIMEOUT:g} s")
        if self.cell_timeout is not None and slot.ready and time.monotonic() - slot.start >= self.cell_timeout:
            cell, label = slot.cell, slot.label
            self._kill(slot)
            emit(failed_outcome(cell, "timeout", f"cell ran past its {self.cell_timeout:g} s timeout and was killed",
                                label, slot.started, time.monotonic() - slot.start, slot.attempts))
            return self._start()
        return slot

    def _died(self, slot: _Slot, retry: collections.deque, emit: Emit) -> _Slot:
        """The worker died running ``slot.cell``: reschedule it, or store it as an error
        after ``max_attempts`` deaths; start a replacement."""
        cell, label = slot.cell, slot.label
        self._kill(slot)
        code = slot.process.exitcode
        if not slot.ready:
            raise JacaccError(
                f"a local worker process exited with code {code} before it started (a script that runs a sweep "
                "with workers needs its main code under `if __name__ == \"__main__\":`: each worker process "
                "imports the main module, as with any Python process pool)")
        if slot.attempts >= self.max_attempts:
            emit(failed_outcome(cell, "error", f"worker process died (exit code {code}) running this cell "
                                f"{slot.attempts} times", label, slot.started, time.monotonic() - slot.start,
                                slot.attempts))
        else:
            retry.append((cell, slot.attempts))
        return self._start()

    @staticmethod
    def _kill(slot: _Slot) -> None:
        slot.cell = None
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join()
        slot.conn.close()

    @staticmethod
    def _stop(slots: list[_Slot]) -> None:
        """Ask idle workers to finish, kill busy ones (an interrupted sweep), reap all."""
        for slot in slots:
            try:
                if slot.cell is None:
                    slot.conn.send(None)
                else:
                    slot.process.kill()
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + _STOP_GRACE
        for slot in slots:
            slot.process.join(max(0.0, deadline - time.monotonic()))
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join()
            slot.conn.close()
