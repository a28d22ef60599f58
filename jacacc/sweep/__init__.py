"""Sweeps: every experiment as a grid of independent cells, on one executor, into a durable store.

A *grid* (a JSON object, :mod:`jacacc.sweep.grid`) crosses problems × modes
× methods × seeds × options into *cells*; each cell optimizes one problem
with one method and measures cost, bounds, verification and time
(:mod:`jacacc.sweep.cells`).  :func:`run` hands the cells not yet stored to
an executor — in-process (the default), local worker processes
(:mod:`jacacc.sweep.local`) or a Dask cluster
(:mod:`jacacc.sweep.dask_cluster`) — and writes each outcome to a SQLite
store as it arrives (:mod:`jacacc.sweep.store`), so an interrupted sweep
resumes where it stopped and a finished one computes nothing.

=========================  ============================================================
module                     responsibility
=========================  ============================================================
``grid``                   parse and validate grids; cells and their keys
``cells``                  measure one cell (wherever it runs); the killable child
``child``                  ``python -m jacacc.sweep.child``: one cell in its own interpreter
``store``                  the SQLite store, reading records back, export to JSON/CSV
``local``                  in-process and local-process executors (timeouts, restarts)
``dask_cluster``           the Dask executor (optional extra ``distributed``)
``runner``                 :func:`run`: resume, executor, store writes, progress
``arguments``              the executor options the CLI and the experiments share
=========================  ============================================================

Examples
--------
>>> import os, tempfile
>>> from jacacc import sweep
>>> grid = {"problems": ["chain_50"], "modes": ["vertex", "edge"], "methods": ["forward", "markowitz"]}
>>> with tempfile.TemporaryDirectory() as tmp:
...     summary = sweep.run(grid, os.path.join(tmp, "s.sqlite"))
...     rows = sweep.read_records(os.path.join(tmp, "s.sqlite"), grid)
>>> summary.computed, [(r["mode"], r["method"], r["result"]["mults"]) for r in rows]
(4, [('vertex', 'forward', 49), ('vertex', 'markowitz', 49), ('edge', 'forward', 49), ('edge', 'markowitz', 49)])
"""

from __future__ import annotations

import os
from typing import Any

from jacacc.sweep.grid import Cell, Grid, Limit, ProblemSpec, load_grid, parse_grid
from jacacc.sweep.runner import SweepSummary, make_executor, run
from jacacc.sweep.store import STATUSES, Store, export

__all__ = ["STATUSES", "Cell", "Grid", "Limit", "ProblemSpec", "Store", "SweepSummary", "export", "load_grid",
           "make_executor", "parse_grid", "read_records", "run"]


def read_records(store: str | os.PathLike, grid: Any = None) -> list[dict[str, Any]]:
    """The records in ``store``: all of them, or those of ``grid``'s cells in the grid's order.

    Parameters
    ----------
    store : path
    grid : path, dict, list or Grid, optional

    Returns
    -------
    list of dict
        One record per stored cell: ``problem``, ``mode``, ``method``,
        ``seed``, ``options``, ``status``, ``result``, ``error``, ``worker``,
        ``machine``, ``version``, ``started``, ``finished``, ``seconds``, ``attempts``.
    """
    with Store(store, create=False) as db:
        if grid is None:
            return list(db.records())
        keys = (cell.key for g in load_grid(grid) for cell in g.cells())
        return list(db.records(keys))
