"""Measuring one cell, wherever it runs: in the coordinator, a local worker process or a Dask worker.

:func:`run_cell` never raises for the cell's own failures: it returns an
*outcome* — the record the store keeps — with status ``ok``, ``skipped``
(over a grid limit) or ``error`` (the exception's one line).  A cell
measures:

* the graph's size (inputs, intermediates, outputs, edges, faces) and
  :func:`~jacacc.bounds.structural_lower_bound`;
* :func:`~jacacc.api.optimize`: mults, adds, fill-ins, the plan's lower bound
  and optimality, and for search methods the proof status and best bound;
  ``optimize_seconds``;
* verification (``verify``): the schedule's Jacobian on two seeded random
  points of partials against the dense chain rule
  (:func:`~jacacc.graph.reference_jacobian`), ``max_rel_error`` and
  ``verified`` (at most ``VERIFY_RTOL``).

:func:`run_cell_in_subprocess` runs a cell in a child interpreter that is
killed at its timeout (the Dask executor's hard guard).

Examples
--------
>>> from jacacc.sweep.grid import parse_grid
>>> [grid] = parse_grid({"problems": ["chain_50"], "methods": ["reverse"]})
>>> outcome = run_cell(next(grid.cells()))
>>> outcome["status"], outcome["result"]["mults"], outcome["result"]["verified"]
('ok', 49, True)
"""

from __future__ import annotations

import datetime as _dt
import os
import pickle
import platform
import socket
import subprocess
import sys
import time
from collections import OrderedDict
from functools import lru_cache
from typing import Any

import numpy as np

from jacacc.sweep.grid import Cell, ProblemSpec

__all__ = ["VERIFY_RTOL", "error_line", "failed_outcome", "run_cell", "run_cell_in_subprocess"]

VERIFY_RTOL = 1e-9
_GRAPH_CACHE_SIZE = 8
_graphs: OrderedDict[tuple[str, int | None], Any] = OrderedDict()


def now() -> str:
    """The current UTC time as ISO 8601 with milliseconds (the store's timestamps)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


@lru_cache(maxsize=1)
def machine() -> dict[str, Any]:
    """Where this process runs: hostname, platform, Python, CPU count."""
    return {"hostname": socket.gethostname(), "platform": platform.platform(),
            "python": platform.python_version(), "cpu_count": os.cpu_count()}


def default_worker() -> str:
    """``hostname:pid`` of this process."""
    return f"{machine()['hostname']}:{os.getpid()}"


def error_line(exc: BaseException) -> str:
    """``Type: first line of the message`` of an exception.

    Examples
    --------
    >>> error_line(ValueError("bad size\\nmore"))
    'ValueError: bad size ...'
    >>> error_line(KeyError())
    'KeyError'
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return f"{type(exc).__name__}: {lines[0]}" + (" ..." if len(lines) > 1 else "")


# ---------------------------------------------------------------------------- the graph
def build_graph(problem: ProblemSpec, seed: int | None) -> Any:
    """The cell's graph: a zoo entry, a generator call (with the cell's seed when it
    gives none) or a file's JSON; the last few built are kept."""
    if problem.kind == "zoo":
        from jacacc.problems import get

        return get(problem.key).graph()  # the zoo caches its graphs and traces
    cache_key = (problem.key, problem.content, seed if problem.takes_seed else None)  # a file: its content too
    if cache_key in _graphs:
        _graphs.move_to_end(cache_key)
        return _graphs[cache_key]
    if problem.kind == "generator":
        from jacacc.problems import generators

        kwargs = dict(problem.kwargs)
        if problem.takes_seed:
            kwargs["seed"] = seed
        graph = getattr(generators, problem.generator)(*problem.args, **kwargs)
    else:
        from jacacc.graph import CompGraph

        graph = CompGraph.from_json(problem.graph)
    _graphs[cache_key] = graph
    if len(_graphs) > _GRAPH_CACHE_SIZE:
        _graphs.popitem(last=False)
    return graph


def graph_size(graph: Any) -> dict[str, int]:
    """Inputs, intermediates, outputs, edges and faces (Σ |P(j)|·|S(j)| over intermediates)."""
    faces = sum(len(graph.predecessors(j)) * len(graph.successors(j)) for j in graph.intermediates)
    return {"inputs": len(graph.inputs), "intermediates": len(graph.intermediates),
            "outputs": len(graph.outputs), "edges": graph.n_edges, "faces": faces}


# ---------------------------------------------------------------------------- measuring
def measure(cell: Cell, result: dict[str, Any]) -> str:
    """Fill ``result`` for ``cell`` step by step (a failure keeps what was measured)
    and return the status, ``"ok"`` or ``"skipped"``."""
    from jacacc.api import optimize
    from jacacc.bounds import structural_lower_bound

    graph = build_graph(cell.problem, cell.seed)
    size = graph_size(graph)
    result["graph"] = size
    result["structural_lower_bound"] = structural_lower_bound(graph, cell.mode)
    for limit in cell.limits:
        reason = limit.reason(cell.mode, cell.method, size)
        if reason is not None:
            result["skipped"] = reason
            return "skipped"
    start = time.perf_counter()
    plan = optimize(graph, mode=cell.mode, method=cell.method, seed=cell.seed, **cell.options)
    result["optimize_seconds"] = time.perf_counter() - start
    result.update(mults=plan.mults, adds=plan.adds, fill_ins=plan.schedule.fill_ins,
                  lower_bound=plan.lower_bound, optimal=plan.optimal)
    if plan.baseline is not None:  # the method's own order cost more than forward or reverse mode
        result.update(baseline=plan.baseline, method_mults=plan.method_mults)
    if plan.search is not None:
        info = plan.search
        result["search"] = {"status": info.status, "objective": info.objective, "best_bound": info.best_bound,
                            "wall_time": info.wall_time, "solver": info.solver}
    if cell.verify:
        result.update(verify(graph, plan, cell.seed))
    return "ok"


def verify(graph: Any, plan: Any, seed: int | None) -> dict[str, Any]:
    """The plan's Jacobian on two random points of partials (seeded) against the dense chain rule."""
    from jacacc.graph import reference_jacobian

    start = time.perf_counter()
    values = np.random.default_rng(0 if seed is None else seed).normal(size=(2, graph.n_edges))
    reference = reference_jacobian(graph, values)
    scale = max(1.0, float(np.max(np.abs(reference), initial=0.0)))
    error = float(np.max(np.abs(plan.jacobian(values) - reference), initial=0.0)) / scale
    return {"max_rel_error": error, "verified": bool(error <= VERIFY_RTOL),
            "verify_seconds": time.perf_counter() - start}


def run_cell(cell: Cell, worker: str | None = None) -> dict[str, Any]:
    """Measure ``cell`` and return its outcome (the store's record); the cell's own
    exceptions become ``status="error"`` with their one line.

    Parameters
    ----------
    cell : Cell
    worker : str, optional
        Who runs it (default ``hostname:pid``).

    Returns
    -------
    dict
        key fields, ``status``, ``result``, ``error``, ``worker``, ``machine``,
        ``version``, ``started``, ``finished``, ``seconds``, ``attempts``.
    """
    started, start = now(), time.perf_counter()
    result: dict[str, Any] = {}
    error = None
    try:
        status = measure(cell, result)
    except Exception as exc:  # failures are data: the cell's record says what went wrong
        status, error = "error", error_line(exc)
    return outcome(cell, status, result or None, error, worker or default_worker(), started,
                   time.perf_counter() - start)


def outcome(cell: Cell, status: str, result: dict | None, error: str | None, worker: str, started: str,
            seconds: float, attempts: int = 1, host: dict | None = None) -> dict[str, Any]:
    """A cell's record as the store keeps it."""
    from jacacc import __version__

    return {"key": cell.key, "problem": cell.problem.key, "mode": cell.mode, "method": cell.method,
            "seed": cell.seed, "options": dict(cell.options), "status": status, "result": result,
            "error": error, "worker": worker, "machine": machine() if host is None else host,
            "version": __version__, "started": started, "finished": now(), "seconds": seconds,
            "attempts": attempts}


def failed_outcome(cell: Cell, status: str, error: str, worker: str, started: str, seconds: float,
                   attempts: int = 1) -> dict[str, Any]:
    """The record of a cell the coordinator gave up on: ``timeout`` (killed) or ``error`` (its worker died)."""
    return outcome(cell, status, None, error, worker, started, seconds, attempts)


# ---------------------------------------------------------------------------- a killable child
#: a cell's child interpreter that dies without writing a record (a crash, not a timeout) is started
#: again, up to this many runs in all, as a dead worker's cell is rescheduled
CHILD_ATTEMPTS = 2


def run_cell_in_subprocess(cell: Cell, timeout: float, worker: str | None = None) -> dict[str, Any]:
    """Run ``cell`` in a child interpreter (``python -m jacacc.sweep.child``), killed
    ``timeout`` seconds after it is ready (imports done): a hard stop that works
    inside any process, daemonic Dask workers included.  A child that dies without a
    record is run again, :data:`CHILD_ATTEMPTS` times in all; the record counts the runs."""
    worker = worker or default_worker()
    for attempt in range(1, CHILD_ATTEMPTS + 1):
        record, died = _run_child(cell, timeout, worker)
        record["attempts"] = attempt
        if not died:
            break
    return record


def _run_child(cell: Cell, timeout: float, worker: str) -> tuple[dict[str, Any], bool]:
    """One run of ``cell`` in a child interpreter: its record, and whether the child died without one."""
    started, start = now(), time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "jacacc.sweep.child"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        try:
            child.stdin.write(pickle.dumps(cell))
            child.stdin.flush()
        except BrokenPipeError:  # the child died before it read the cell
            return _child_failed(child, cell, worker, started, start), True
        ready = child.stdout.read(1)
        if ready != b"R":
            return _child_failed(child, cell, worker, started, start), True
        started, start = now(), time.perf_counter()  # the cell's time starts when its process is ready
        try:
            out, _ = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            return failed_outcome(cell, "timeout", f"cell ran past its {timeout:g} s timeout and was killed",
                                  worker, started, time.perf_counter() - start), False
        if child.returncode != 0 or not out:
            return _child_failed(child, cell, worker, started, start), True
        record = pickle.loads(out)
        record["worker"] = worker
        return record, False
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _child_failed(child: subprocess.Popen, cell: Cell, worker: str, started: str, start: float) -> dict[str, Any]:
    _, err = child.communicate()
    lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    detail = f": {lines[-1].strip()}" if lines else ""
    return failed_outcome(cell, "error", f"cell process exited with status {child.returncode}{detail}",
                          worker, started, time.perf_counter() - start)


def child_main() -> None:
    """The child's side: signal readiness, read one pickled cell on stdin, write its outcome."""
    sys.stdout.buffer.write(b"R")
    sys.stdout.buffer.flush()
    cell = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps(run_cell(cell)))
    sys.stdout.buffer.flush()
