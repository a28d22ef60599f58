"""Experiment records and timing: every result jacacc reports travels with its context.

A *record* is a JSON object ``{"experiment", "created", "seed", "environment",
"parameters", "results"}``; :func:`environment` captures the machine and the
versions of everything that can change a number.  Experiment scripts write
records under ``results/``; notebooks and :mod:`jacacc.plot` read them.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import os
import platform
import time
from collections.abc import Callable
from typing import Any

__all__ = ["environment", "read_record", "time_call", "write_record"]

# packages whose versions can change a result; absent ones are recorded as None
TRACKED_PACKAGES = ("jacacc", "numpy", "scipy", "networkx", "ortools", "numba", "cupy", "jax", "torch")


def environment() -> dict[str, Any]:
    """Machine and software versions.

    Examples
    --------
    >>> env = environment()
    >>> sorted(env)[:3]
    ['cpu_count', 'machine', 'platform']
    >>> env["versions"]["numpy"] is not None
    True
    """
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "versions": versions,
    }


def write_record(
    path: str | os.PathLike,
    experiment: str,
    results: Any,
    *,
    parameters: dict[str, Any] | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """Write an experiment record as JSON (creating the directory) and return it."""
    record = {
        "experiment": experiment,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "seed": seed,
        "environment": environment(),
        "parameters": parameters or {},
        "results": results,
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=1)
        fh.write("\n")
    return record


def read_record(path: str | os.PathLike) -> dict[str, Any]:
    """Read a record written by :func:`write_record`."""
    with open(path, encoding="utf-8") as fh:
        record = json.load(fh)
    missing = {"experiment", "environment", "results"} - set(record)
    if missing:
        raise ValueError(f"{path} is not a jacacc record: missing {sorted(missing)}")
    return record


def time_call(fn: Callable[[], Any], *, repeat: int = 3, min_time: float = 0.0) -> float:
    """Best wall-clock seconds of ``repeat`` calls of ``fn()`` (each call repeated
    until it has run ``min_time`` seconds, then averaged)."""
    best = float("inf")
    for _ in range(repeat):
        calls, start = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best
