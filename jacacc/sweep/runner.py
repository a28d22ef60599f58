"""``jacacc.sweep.run``: a grid, an executor and a store, tied together in the coordinating process.

The runner walks the grid's cells lazily, skips those already stored
(resume), hands the rest to the executor, and for each outcome that comes
back writes the store (one transaction), advances the progress bar and calls
``on_record``.  Memory stays flat however many cells the grid has: cells are
generated, stored keys are looked up in the store, and only the cells in
flight are held.
"""

from __future__ import annotations

import numbers
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jacacc.errors import JacaccError
from jacacc.progress import progress_bar
from jacacc.sweep.cells import now
from jacacc.sweep.grid import Cell, Grid, load_grid
from jacacc.sweep.store import Store

__all__ = ["SweepSummary", "make_executor", "run"]

RETRIED = ("error", "timeout")


@dataclass
class SweepSummary:
    """What a run did.

    Attributes
    ----------
    store, executor : str
    cells : int
        Cells in the grid.
    stored : int
        Cells found in the store and not computed (resume).
    computed : int
        Outcomes written by this run; ``statuses`` counts them by status.
    seconds : float
        Wall time of the run.
    store_seconds : float
        Time spent writing the store.
    coordinator_cpu_seconds : float
        CPU time of the coordinating process (with workers: its whole
        overhead — scheduling, pipes, store, progress).
    """

    store: str
    executor: str
    cells: int = 0
    stored: int = 0
    computed: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    store_seconds: float = 0.0
    coordinator_cpu_seconds: float = 0.0

    def __str__(self) -> str:
        parts = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items()))
        return (f"{self.cells} cells: {self.computed} computed ({parts or 'none'}), {self.stored} already stored; "
                f"{self.seconds:.1f} s on {self.executor}; store {self.store}")


def make_executor(scheduler: Any = None, workers: int | None = None, cell_timeout: float | None = None) -> Any:
    """The executor for the arguments of :func:`run`: a Dask cluster (``scheduler``),
    ``workers`` local processes, one local process when only ``cell_timeout`` is
    given (a cell must run where it can be killed), else in-process."""
    from jacacc.sweep.local import InProcess, LocalProcesses

    if scheduler is not None and workers is not None:
        raise JacaccError("give either workers (local processes) or scheduler (a Dask cluster), not both")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, numbers.Integral)
                                or workers < 1):
        raise JacaccError(f"workers must be a positive integer, got {workers!r}")
    if cell_timeout is not None and (isinstance(cell_timeout, bool) or not isinstance(cell_timeout, numbers.Real)
                                     or not cell_timeout > 0):
        raise JacaccError(f"cell_timeout must be a positive number of seconds, got {cell_timeout!r}")
    if scheduler is not None:
        from jacacc.sweep.dask_cluster import DaskCluster

        return DaskCluster(scheduler, cell_timeout)
    if workers is not None or cell_timeout is not None:
        return LocalProcesses(int(workers or 1), cell_timeout)
    return InProcess()


def run(
    grid: Any,
    store: str | os.PathLike,
    *,
    scheduler: Any = None,
    workers: int | None = None,
    cell_timeout: float | None = None,
    resume: bool = True,
    retry_failed: bool = False,
    progress: bool | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    desc: str = "sweep",
) -> SweepSummary:
    """Run a sweep: every cell of ``grid`` not yet in ``store``, on the chosen executor.

    Parameters
    ----------
    grid : path, dict, list or Grid
        A grid file, a grid object (or list of them, see :mod:`jacacc.sweep.grid`).
    store : path
        The SQLite store (created when missing).
    scheduler : str or distributed.Client, optional
        Run on this Dask cluster (needs ``jacacc[distributed]``).
    workers : int, optional
        Run on this many local processes.  Neither: in the calling process.
    cell_timeout : float, optional
        Seconds per cell; a cell past it is killed and stored as ``timeout``
        (without ``workers`` or ``scheduler``, cells then run in one local process).
    resume : bool, default True
        Skip the cells already stored; False recomputes every cell of the grid,
        each stored row replaced only when its new outcome is written (a sweep
        stopped meanwhile keeps the old rows of the cells it did not reach).
    retry_failed : bool, default False
        Recompute cells stored as ``error`` or ``timeout``.
    progress : bool or None
        The progress bar over cells (None: when stderr is a terminal).
    on_record : callable, optional
        Called with each outcome after it is stored (raising from it stops
        the sweep: what is stored stays).
    desc : str
        The progress bar's label.

    Returns
    -------
    SweepSummary

    Examples
    --------
    >>> import os, tempfile
    >>> grid = {"problems": ["chain_50", "random_dag(3, 8, 3)"], "methods": ["forward", "reverse"]}
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     first = run(grid, os.path.join(tmp, "sweep.sqlite"))
    ...     again = run(grid, os.path.join(tmp, "sweep.sqlite"))
    >>> (first.computed, first.statuses), (again.computed, again.stored)
    ((4, {'ok': 4}), (0, 4))
    """
    grids = load_grid(grid)
    executor = make_executor(scheduler, workers, cell_timeout)
    summary = SweepSummary(str(store), executor.describe(), cells=sum(len(g) for g in grids))
    start, cpu_start = time.perf_counter(), time.process_time()
    with Store(store) as db:
        run_id = db.begin_sweep([g.source for g in grids], summary.executor, now())
        bar = progress_bar(total=summary.cells, desc=desc, unit="cell", enabled=progress)
        in_flight: set[str] = set()
        outcome = "interrupted"

        def recompute(status: str | None) -> bool:
            # a stored row stays until the new outcome replaces it (Store.put: INSERT OR REPLACE)
            return status is None or not resume or (retry_failed and status in RETRIED)

        def pending() -> Iterator[Cell]:
            for cell in _all_cells(grids):
                if cell.key in in_flight or not recompute(db.status(cell.key)):
                    summary.stored += 1
                    bar.update()
                    continue
                in_flight.add(cell.key)
                yield cell

        def emit(record: dict[str, Any]) -> None:
            written = time.perf_counter()
            db.put(record)
            summary.store_seconds += time.perf_counter() - written
            in_flight.discard(record["key"])
            summary.computed += 1
            summary.statuses[record["status"]] = summary.statuses.get(record["status"], 0) + 1
            bar.set_postfix(_postfix(summary.statuses), refresh=False)
            bar.update()
            if on_record is not None:
                on_record(record)

        try:
            executor.run(pending(), emit)
            outcome = "finished"
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            bar.close()
            summary.seconds = time.perf_counter() - start
            summary.coordinator_cpu_seconds = time.process_time() - cpu_start
            db.end_sweep(run_id, now(), summary.cells, summary.computed, outcome)
    return summary


def _all_cells(grids: list[Grid]) -> Iterator[Cell]:
    for grid in grids:
        yield from grid.cells()


def _postfix(statuses: dict[str, int]) -> dict[str, int]:
    """The bar's postfix: failures only (a clean sweep shows just the count)."""
    return {s: n for s, n in statuses.items() if s != "ok"}
