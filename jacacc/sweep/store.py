"""The durable results store: one SQLite file, one row per cell, written by the coordinator.

Table ``cells`` — ``key`` (primary key: canonical JSON of the cell's key),
the key columns ``problem``, ``mode``, ``method``, ``seed``, ``options``
(JSON of the options the method takes, ``{}`` when none), ``status``
(``ok``, ``skipped``, ``error``, ``timeout``), ``result`` (JSON), ``error``
(one line), ``worker``, ``machine`` (JSON), ``version``, ``started`` and
``finished`` (ISO 8601, UTC), ``seconds``, ``attempts``.  Table ``sweeps``
keeps one row per run (grid, executor, counts, outcome).

Each outcome is written in its own transaction as it arrives, so a sweep
stopped at any point (Ctrl-C, a killed coordinator) keeps every cell that
finished.  The file uses SQLite's write-ahead log with ``synchronous=NORMAL``:
a commit survives the process being killed; only an operating-system crash
can lose the last few.

Examples
--------
>>> import tempfile, os
>>> from jacacc.sweep.grid import parse_grid
>>> from jacacc.sweep.cells import run_cell
>>> [grid] = parse_grid({"problems": ["chain_50"], "methods": ["forward"]})
>>> cell = next(grid.cells())
>>> with tempfile.TemporaryDirectory() as tmp, Store(os.path.join(tmp, "s.sqlite")) as store:
...     store.put(run_cell(cell))
...     [(r["problem"], r["status"], r["result"]["mults"]) for r in store.records()]
[('chain_50', 'ok', 49)]
"""

from __future__ import annotations

import csv
import functools
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from jacacc.errors import JacaccError

__all__ = ["STATUSES", "Store", "export"]

STATUSES = ("ok", "skipped", "error", "timeout")
SCHEMA_VERSION = 1
#: seconds a write waits for another process's transaction on the store before it fails
BUSY_TIMEOUT = 5.0
KEY_COLUMNS = ("problem", "mode", "method", "seed", "options")
COLUMNS = ("key", *KEY_COLUMNS, "status", "result", "error", "worker", "machine", "version",
           "started", "finished", "seconds", "attempts")
JSON_COLUMNS = ("options", "result", "machine")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS cells (
    key TEXT PRIMARY KEY,
    problem TEXT NOT NULL,
    mode TEXT NOT NULL,
    method TEXT NOT NULL,
    seed INTEGER,
    options TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'skipped', 'error', 'timeout')),
    result TEXT,
    error TEXT,
    worker TEXT,
    machine TEXT,
    version TEXT,
    started TEXT,
    finished TEXT,
    seconds REAL,
    attempts INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS cells_by_status ON cells (status);
CREATE TABLE IF NOT EXISTS sweeps (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    grid TEXT NOT NULL,
    executor TEXT NOT NULL,
    started TEXT NOT NULL,
    finished TEXT,
    cells INTEGER,
    computed INTEGER,
    outcome TEXT
);
"""


def _store_errors(method: Any) -> Any:
    """SQLite's operational errors of a :class:`Store` method (a store locked by another
    process's transaction past the busy timeout, a full disk) as one line naming the store."""

    @functools.wraps(method)
    def guarded(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.OperationalError as exc:
            raise _operational_error(self.path, exc) from None

    return guarded


def _operational_error(path: str, exc: sqlite3.OperationalError) -> JacaccError:
    hint = " (another process holds it: wait for it to finish, or give another store)" if "locked" in str(exc) else ""
    return JacaccError(f"sweep store {path!r}: {exc}{hint}")


class Store:
    """A sweep's SQLite store, opened (and created when missing) at ``path``.

    Parameters
    ----------
    path : str or path
    create : bool, default True
        False: refuse a missing file (reading back, exporting).
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = True) -> None:
        self.path = str(path)
        if not create and not os.path.isfile(self.path):
            raise JacaccError(f"no sweep store {self.path!r}")
        parent = os.path.dirname(os.path.abspath(self.path))
        if create and not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._check_schema()
        except sqlite3.OperationalError as exc:  # locked, unreadable: a sweep store or not
            raise _operational_error(self.path, exc) from None
        except sqlite3.DatabaseError as exc:
            raise JacaccError(f"{self.path!r} is not a sweep store: {exc}") from None

    def _check_schema(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if version == 0 and not tables:
            with self._db:
                self._db.executescript(_SCHEMA)
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif version != SCHEMA_VERSION or "cells" not in tables:
            raise JacaccError(f"{self.path!r} is not a jacacc sweep store (schema {version}, tables "
                              f"{', '.join(sorted(tables)) or 'none'})")

    # ------------------------------------------------------------------ cells
    @_store_errors
    def status(self, key: str) -> str | None:
        """The stored status of the cell ``key``, or None when it is not stored."""
        row = self._db.execute("SELECT status FROM cells WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    @_store_errors
    def put(self, outcome: dict[str, Any]) -> None:
        """Store one outcome (replacing an older row of the same key), in its own transaction."""
        values = [json.dumps(outcome[c]) if c in JSON_COLUMNS and outcome[c] is not None else outcome[c]
                  for c in COLUMNS]
        with self._db:
            self._db.execute(f"INSERT OR REPLACE INTO cells ({', '.join(COLUMNS)}) "
                             f"VALUES ({', '.join('?' * len(COLUMNS))})", values)

    @_store_errors
    def forget(self, keys: Iterable[str], statuses: Iterable[str] | None = None) -> int:
        """Delete the rows of ``keys`` (only those with one of ``statuses`` when given), in
        one transaction; returns how many went."""
        wanted = None if statuses is None else tuple(statuses)
        removed = 0
        with self._db:
            for key in keys:
                if wanted is None:
                    cursor = self._db.execute("DELETE FROM cells WHERE key = ?", (key,))
                else:
                    marks = ", ".join("?" * len(wanted))
                    cursor = self._db.execute(f"DELETE FROM cells WHERE key = ? AND status IN ({marks})",
                                              (key, *wanted))
                removed += cursor.rowcount
        return removed

    @_store_errors
    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM cells").fetchone()[0]

    @_store_errors
    def counts(self) -> dict[str, int]:
        """Rows per status."""
        return dict(self._db.execute("SELECT status, COUNT(*) FROM cells GROUP BY status").fetchall())

    def records(self, keys: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
        """The stored records (JSON columns parsed): all in insertion order, or those of
        ``keys`` in that order (keys not stored are left out)."""
        query = f"SELECT {', '.join(COLUMNS)} FROM cells"
        if keys is None:
            rows: Iterable[tuple] = self._db.execute(query + " ORDER BY rowid").fetchall()
        else:
            rows = (row for key in keys for row in self._db.execute(query + " WHERE key = ?", (key,)))
        for row in rows:
            record = dict(zip(COLUMNS, row, strict=True))
            for column in JSON_COLUMNS:
                if record[column] is not None:
                    record[column] = json.loads(record[column])
            yield record

    # ------------------------------------------------------------------ runs
    @_store_errors
    def begin_sweep(self, grid: Any, executor: str, started: str) -> int:
        """Record the start of a run; returns its id."""
        with self._db:
            cursor = self._db.execute("INSERT INTO sweeps (grid, executor, started) VALUES (?, ?, ?)",
                                      (json.dumps(grid), executor, started))
        return int(cursor.lastrowid)

    @_store_errors
    def end_sweep(self, run: int, finished: str, cells: int, computed: int, outcome: str) -> None:
        """Record how run ``run`` ended (``finished``, ``interrupted`` or the error line)."""
        with self._db:
            self._db.execute("UPDATE sweeps SET finished = ?, cells = ?, computed = ?, outcome = ? WHERE id = ?",
                             (finished, cells, computed, outcome, run))

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------------- export
def export(store: str | os.PathLike, out: str | os.PathLike) -> int:
    """Write the records of ``store`` to ``out``: ``.json`` (a list of records, results
    nested) or ``.csv`` (one row per cell, result fields flattened: ``mults``,
    ``graph.edges``, ``search.status``, ...).  Returns the number of records.

    Examples
    --------
    >>> export("missing.sqlite", "out.json")
    Traceback (most recent call last):
    ...
    jacacc.errors.JacaccError: no sweep store 'missing.sqlite'
    """
    suffix = Path(out).suffix.lower()
    if suffix not in (".json", ".csv"):
        raise JacaccError(f"export to .json or .csv, not {str(out)!r}")
    with Store(store, create=False) as db:
        records = list(db.records())
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    if suffix == ".json":
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(records, fh, indent=1)
            fh.write("\n")
    else:
        _write_csv(records, out)
    return len(records)


def _flatten(record: dict[str, Any]) -> dict[str, Any]:
    """A record as one CSV row: key columns, the result's fields (nested ones dotted), lists as JSON."""
    row = {c: record[c] for c in COLUMNS if c not in ("key", "result", "machine")}
    row["options"] = json.dumps(record["options"], sort_keys=True)
    row["hostname"] = (record["machine"] or {}).get("hostname")

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            row[prefix] = json.dumps(value) if isinstance(value, list) else value

    walk("", record["result"] or {})
    return row


def _write_csv(records: list[dict[str, Any]], out: str | os.PathLike) -> None:
    rows = [_flatten(r) for r in records]
    columns = list(dict.fromkeys(c for row in rows for c in row)) or [c for c in COLUMNS if c != "result"]
    with open(out, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
