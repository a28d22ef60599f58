"""The executor options shared by ``jacacc sweep`` and the experiment scripts.

Examples
--------
>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_executor_arguments(parser)
>>> executor_options(parser.parse_args(["--workers", "2", "--cell-timeout", "30"]))
{'scheduler': None, 'workers': 2, 'cell_timeout': 30.0}
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from jacacc.argtypes import positive_int, positive_seconds

__all__ = ["add_executor_arguments", "executor_options", "store_path"]


def add_executor_arguments(parser: argparse.ArgumentParser, *, store: bool = True) -> None:
    """Add ``--workers N | --scheduler ADDRESS``, ``--cell-timeout`` and (``store``) ``--store PATH``."""
    group = parser.add_argument_group("where the cells run (jacacc.sweep)")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, default=None, metavar="N",
                       help="run the cells on N local processes (default: in this process)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run the cells on the Dask cluster whose scheduler is at ADDRESS "
                       "(tcp://host:8786; needs `pip install 'jacacc[distributed]'`)")
    group.add_argument("--cell-timeout", type=positive_seconds, default=None, metavar="SECONDS",
                       help="stop a cell after SECONDS and store it as timed out (its process is killed)")
    if store:
        group.add_argument("--store", default=None, metavar="PATH",
                           help="keep the cells in this SQLite store; a rerun with the same store computes "
                           "only the cells missing (default: a temporary store)")


def executor_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`jacacc.sweep.run` given on the command line."""
    return {"scheduler": args.scheduler, "workers": args.workers, "cell_timeout": args.cell_timeout}


@contextlib.contextmanager
def store_path(path: str | None, name: str) -> Iterator[str]:
    """``path``, or a temporary ``name.sqlite`` removed afterwards when ``path`` is None.

    Examples
    --------
    >>> with store_path(None, "demo") as path:
    ...     os.path.basename(path)
    'demo.sqlite'
    """
    if path is not None:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="jacacc-sweep-") as folder:
        yield os.path.join(folder, f"{name}.sqlite")
