"""Sweeps (jacacc.sweep): the same records on every executor, nothing lost, nothing computed twice.

The cluster tests start a real ``dask.distributed.LocalCluster`` (two worker
processes); the kill tests kill real worker processes with SIGKILL.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import signal
import sqlite3
import time

import pytest

import jacacc
from jacacc.cli import main
from jacacc.errors import GridError, JacaccError, MissingExtraError
from jacacc.sweep import load_grid, read_records, run

# small graphs, every mode, a size limit and a method that refuses a graph (an error cell)
GRID = {
    "name": "test",
    "problems": ["random_dag(3, 10, 3)", "paper003_fig4_1a", "BlackScholes"],
    "modes": ["vertex", "edge", "face"],
    "methods": ["forward", "reverse", "markowitz", "exhaustive", "face:greedy", "structure:dstar"],
    "seeds": [0, 1],
    "limits": [{"methods": ["exhaustive"], "max_faces": 20, "reason": "exact search"}],
}
# deterministic cells of ~0.1 s each (annealing by iteration count), so workers are busy when killed
SLOW_GRID = {"problems": ["random_dag(3, 24, 3)"], "methods": ["anneal"], "seeds": [0, 1, 2, 3, 4, 5],
             "options": {"iterations": 6000, "time_limit": 60}}
# a minute-long search and a quick cell after it
SLOW_AND_FAST = [{"problems": ["random_dag(3, 40, 3)"], "methods": ["anneal"], "options": {"time_limit": 60}},
                 {"problems": ["chain_50"], "methods": ["reverse"]}]
TIMING = ("seconds", "optimize_seconds", "verify_seconds", "wall_time")


def comparable(record: dict) -> tuple:
    """A record without what depends on where and when it ran."""
    result = record["result"]
    if result is not None:
        result = {k: v for k, v in result.items() if k not in TIMING}
        if "search" in result:
            result["search"] = {k: v for k, v in result["search"].items() if k not in TIMING}
    return record["key"], record["status"], json.dumps(result, sort_keys=True), record["error"]


def records_of(store, grid=None) -> list[tuple]:
    return sorted(comparable(r) for r in read_records(store, grid))


def stored_keys(store) -> list[str]:
    with sqlite3.connect(store) as db:
        return [row[0] for row in db.execute("SELECT key FROM cells")]


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The grid run in-process: the reference records."""
    store = tmp_path_factory.mktemp("reference") / "sweep.sqlite"
    summary = run(GRID, store)
    return store, summary


@pytest.fixture(scope="module")
def cluster():
    """A real two-process Dask LocalCluster and a client on it."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="1GiB",
                                  dashboard_address=None) as local, \
            distributed.Client(local, set_as_default=False) as client:
        yield client


# ---------------------------------------------------------------------------- the records
def test_every_cell_measures_cost_bound_verification_and_provenance(in_process):
    store, summary = in_process
    total = len(load_grid(GRID)[0])
    assert summary.cells == summary.computed == total == len(stored_keys(store))
    records = read_records(store, GRID)
    assert [r["key"] for r in records] == [c.key for c in load_grid(GRID)[0].cells()]
    assert {r["status"] for r in records} == {"ok", "skipped"}
    for r in records:
        assert r["version"] == jacacc.__version__ and r["machine"]["hostname"] and r["worker"]
        assert r["started"] <= r["finished"] and r["seconds"] >= 0 and r["attempts"] == 1
        result = r["result"]
        assert result["graph"]["edges"] > 0 and result["structural_lower_bound"] > 0
        if r["status"] == "skipped":
            assert r["method"] == "exhaustive" and result["skipped"].startswith("exact search; more than 20 faces")
            continue
        assert result["verified"] and result["max_rel_error"] <= 1e-9
        assert result["lower_bound"] <= result["mults"]
    # costs are optimize's own
    plan = jacacc.optimize(jacacc.problems.get("BlackScholes").graph(), mode="edge", method="markowitz", seed=1)
    [row] = [r for r in records if (r["problem"], r["mode"], r["method"], r["seed"]) ==
             ("BlackScholes", "edge", "markowitz", 1)]
    assert (row["result"]["mults"], row["result"]["adds"]) == (plan.mults, plan.adds)


def test_search_cells_record_proof_status_and_bound(tmp_path):
    grid = {"problems": ["paper003_fig4_1a"], "modes": ["vertex", "edge"], "methods": ["cpsat"],
            "options": {"time_limit": 5, "workers": 1}}
    run(grid, tmp_path / "s.sqlite")
    for r in read_records(tmp_path / "s.sqlite"):
        search = r["result"]["search"]
        assert search["status"] == "optimal" and search["best_bound"] == r["result"]["mults"]
        assert r["result"]["optimal"] is True and r["options"] == {"time_limit": 5, "workers": 1}


def test_same_records_on_two_local_workers(in_process, tmp_path):
    reference, _ = in_process
    summary = run(GRID, tmp_path / "local.sqlite", workers=2)
    assert summary.executor == "2 local processes" and summary.computed == summary.cells
    assert records_of(tmp_path / "local.sqlite") == records_of(reference)
    assert len({r["worker"] for r in read_records(tmp_path / "local.sqlite")}) == 2


@pytest.mark.exhaustive  # starting a cluster is most of its 9 s; make test runs two local processes above
def test_same_records_on_a_dask_cluster(in_process, cluster, tmp_path):
    reference, _ = in_process
    summary = run(GRID, tmp_path / "dask.sqlite", scheduler=cluster)
    assert summary.executor.startswith("dask tcp://") and summary.computed == summary.cells
    assert records_of(tmp_path / "dask.sqlite") == records_of(reference)
    workers = {r["worker"].split(" ")[0] for r in read_records(tmp_path / "dask.sqlite")}
    assert workers <= set(cluster.scheduler_info()["workers"])
    # by address too: the sweep opens (and closes) its own client
    again = run(GRID, tmp_path / "by-address.sqlite", scheduler=cluster.scheduler.address)
    assert again.computed == again.cells
    assert records_of(tmp_path / "by-address.sqlite") == records_of(reference)


# ---------------------------------------------------------------------------- nothing lost
def test_a_killed_local_worker_loses_nothing(tmp_path):
    reference = tmp_path / "reference.sqlite"
    run(SLOW_GRID, reference)
    killed = []

    def kill_the_busy_worker(record):
        if killed:
            return
        finished = int(record["worker"].rsplit(":", 1)[1])
        busy = [p for p in multiprocessing.active_children() if p.pid != finished and p.name == "jacacc-sweep-worker"]
        os.kill(busy[0].pid, signal.SIGKILL)
        killed.append(busy[0].pid)

    store = tmp_path / "killed.sqlite"
    summary = run(SLOW_GRID, store, workers=2, on_record=kill_the_busy_worker)
    assert killed and summary.computed == summary.cells == 6
    keys = stored_keys(store)
    assert len(keys) == len(set(keys)) == 6
    assert records_of(store) == records_of(reference)
    assert max(r["attempts"] for r in read_records(store)) == 2  # the killed worker's cell, rescheduled


def test_a_cell_whose_worker_keeps_dying_is_stored_as_an_error_after_three_attempts(tmp_path):
    import threading

    stop = threading.Event()
    killed: list[int] = []

    def kill_every_worker_once_it_runs():
        seen: dict[int, float] = {}
        while not stop.is_set():
            for p in multiprocessing.active_children():
                if p.name == "jacacc-sweep-worker" and p.pid not in killed:
                    if time.monotonic() - seen.setdefault(p.pid, time.monotonic()) > 0.6:
                        os.kill(p.pid, signal.SIGKILL)
                        killed.append(p.pid)
            time.sleep(0.05)

    killer = threading.Thread(target=kill_every_worker_once_it_runs)
    killer.start()
    try:
        summary = run(SLOW_AND_FAST[0], tmp_path / "dies.sqlite", workers=1)
    finally:
        stop.set()
        killer.join()
    [record] = read_records(tmp_path / "dies.sqlite")
    assert summary.statuses == {"error": 1} and record["attempts"] == 3 and len(killed) >= 3
    assert record["error"] == "worker process died (exit code -9) running this cell 3 times"


def test_a_killed_dask_worker_loses_nothing(cluster, tmp_path):
    reference = tmp_path / "reference.sqlite"
    run(SLOW_GRID, reference)
    pids = cluster.run(os.getpid)
    killed = []

    def kill_a_worker(record):
        if not killed:
            address = next(a for a in pids if not record["worker"].startswith(a))
            os.kill(pids[address], signal.SIGKILL)
            killed.append(address)

    store = tmp_path / "killed.sqlite"
    summary = run(SLOW_GRID, store, scheduler=cluster, on_record=kill_a_worker)
    assert killed and summary.computed == summary.cells == 6
    keys = stored_keys(store)
    assert len(keys) == len(set(keys)) == 6
    assert records_of(store) == records_of(reference)
    cluster.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker


class Stop(Exception):
    """Raised by a hook to stop a sweep mid-way."""


def _stopper(seen: list[str], n: int):
    """An ``on_record`` hook that notes each stored key in ``seen`` and stops the sweep at the ``n``-th."""

    def hook(record):
        seen.append(record["key"])
        if len(seen) == n:
            raise Stop

    return hook


@pytest.mark.parametrize("workers", [None, 2], ids=["in-process", "workers=2"])
def test_a_stopped_sweep_resumes_with_only_the_missing_cells(in_process, tmp_path, workers):
    reference, _ = in_process
    store = tmp_path / "stopped.sqlite"
    seen: list[str] = []
    stop_after_five = _stopper(seen, 5)

    with pytest.raises(Stop):
        run(GRID, store, workers=workers, on_record=stop_after_five)
    first = {r["key"]: r["started"] for r in read_records(store)}
    assert sorted(first) == sorted(seen)
    summary = run(GRID, store, workers=workers)
    assert summary.stored == 5 and summary.computed == summary.cells - 5
    assert records_of(store) == records_of(reference)
    assert {k: first[k] for k in first} == {r["key"]: r["started"] for r in read_records(store) if r["key"] in first}
    finished = run(GRID, store)
    assert finished.computed == 0 and finished.stored == finished.cells
    with sqlite3.connect(store) as db:
        outcomes = [row[0] for row in db.execute("SELECT outcome FROM sweeps ORDER BY id")]
    assert outcomes == ["Stop: ", "finished", "finished"]


def test_a_stopped_recomputation_keeps_the_rows_it_did_not_reach(tmp_path):
    """--no-resume replaces each row when its new outcome is written: a sweep stopped (or killed)
    after five cells leaves every cell stored, five of them new (once: the rows were deleted first)."""
    store = tmp_path / "again.sqlite"
    run(GRID, store)
    before = {r["key"]: r["started"] for r in read_records(store)}
    seen: list[str] = []
    stop_after_five = _stopper(seen, 5)

    with pytest.raises(Stop):
        run(GRID, store, resume=False, on_record=stop_after_five)
    after = {r["key"]: r["started"] for r in read_records(store)}
    assert after.keys() == before.keys()
    assert sorted(k for k in after if after[k] != before[k]) == sorted(seen)


def test_worker_processes_are_capped_at_the_cores(tmp_path):
    from jacacc.sweep.local import available_cores

    summary = run({"problems": ["chain_50"], "methods": ["forward", "reverse"]}, tmp_path / "c.sqlite",
                  workers=1000)
    cores = available_cores()
    assert summary.executor.startswith(f"{cores} local process") and "1000 asked for" in summary.executor
    assert summary.statuses == {"ok": 2}


def test_a_graph_file_changed_at_the_same_path_is_computed_again(tmp_path):
    """A cell's key holds the file's content hash: a rerun after the file changed is not resumed
    from the old graph's rows."""
    graph = tmp_path / "g.json"
    edges = [["a", "v", 2.0], ["b", "v", -1.0], ["v", "y", 3.0], ["v", "z", 1.5]]
    graph.write_text(json.dumps({"inputs": ["a", "b"], "outputs": ["y", "z"], "edges": edges}))
    grid = {"problems": [str(graph)], "methods": ["forward"]}
    store = tmp_path / "files.sqlite"
    assert run(grid, store).computed == 1 and run(grid, store).computed == 0
    graph.write_text(json.dumps({"inputs": ["a", "b"], "outputs": ["y", "z"],
                                 "edges": [*edges, ["a", "w", 1.0], ["w", "y", 1.0]]}))
    again = run(grid, store)
    assert again.computed == 1 and again.stored == 0
    assert sorted(r["result"]["graph"]["edges"] for r in read_records(store)) == [4, 6]  # both graphs kept


# ---------------------------------------------------------------------------- failures are data
def test_a_cell_that_raises_is_stored_with_its_message_and_not_retried(tmp_path):
    grid = {"problems": ["random_dag(3, -1, 3)", "random_dag(3, 30, 3)"], "methods": ["markowitz", "exhaustive"]}
    store = tmp_path / "errors.sqlite"
    summary = run(grid, store)
    assert summary.statuses == {"ok": 1, "error": 3}
    by_key = {(r["problem"], r["method"]): r for r in read_records(store)}
    bad = by_key[("random_dag(3, -1, 3)", "markowitz")]
    assert bad["error"] == "ValueError: n_intermediates must be an integer >= 0, got -1" and bad["result"] is None
    refused = by_key[("random_dag(3, 30, 3)", "exhaustive")]
    assert refused["error"].startswith("OrderError: exhaustive vertex elimination is limited")
    assert refused["result"]["graph"]["intermediates"] == 30  # what was measured before it failed
    assert run(grid, store).computed == 0  # stored failures are not retried ...
    retried = run(grid, store, retry_failed=True)  # ... unless asked
    assert retried.computed == 3 and retried.stored == 1


def test_a_cell_past_its_timeout_is_killed_and_stored_as_timed_out(tmp_path):
    grid = SLOW_AND_FAST
    start = time.perf_counter()
    summary = run(grid, tmp_path / "t.sqlite", cell_timeout=1.0)
    assert time.perf_counter() - start < 20
    assert summary.executor == "1 local process" and summary.statuses == {"timeout": 1, "ok": 1}
    slow, fast = read_records(tmp_path / "t.sqlite", grid)
    assert slow["status"] == "timeout" and slow["error"] == "cell ran past its 1 s timeout and was killed"
    assert fast["status"] == "ok"  # on a fresh worker


def test_a_child_that_dies_without_a_record_is_run_again(monkeypatch):
    from jacacc.sweep import cells

    [grid] = load_grid(SLOW_AND_FAST[1])
    cell = next(iter(grid.cells()))
    runs: list[str] = []
    real = cells._run_child

    def dies_once(cell, timeout, worker):
        runs.append("run")
        if len(runs) == 1:
            return cells.failed_outcome(cell, "error", "cell process exited with status -9", worker, cells.now(),
                                        0.0), True
        return real(cell, timeout, worker)

    monkeypatch.setattr(cells, "_run_child", dies_once)
    record = cells.run_cell_in_subprocess(cell, 60.0)
    assert runs == ["run", "run"] and record["status"] == "ok" and record["attempts"] == 2
    runs.clear()
    monkeypatch.setattr(cells, "_run_child", lambda cell, timeout, worker: (
        runs.append("run") or cells.failed_outcome(cell, "error", "cell process exited with status 1", worker,
                                                   cells.now(), 0.0), True))
    record = cells.run_cell_in_subprocess(cell, 60.0)
    assert len(runs) == cells.CHILD_ATTEMPTS and record["status"] == "error" and record["attempts"] == 2


def test_a_cell_past_its_timeout_on_dask_is_killed(cluster, tmp_path):
    grid = SLOW_AND_FAST
    summary = run(grid, tmp_path / "t.sqlite", scheduler=cluster, cell_timeout=1.0)
    slow, fast = read_records(tmp_path / "t.sqlite", grid)
    assert summary.statuses == {"timeout": 1, "ok": 1}, (slow["error"], fast["error"])
    assert slow["status"] == "timeout" and fast["result"]["mults"] == 49


# ---------------------------------------------------------------------------- grids
@pytest.mark.parametrize(("grid", "message"), [
    ([], "a grid is a JSON object"),
    ({"problems": ["chain_50"]}, "missing key 'methods'"),
    ({"problems": ["chain_50"], "methods": ["forward"], "mode": ["edge"]}, "unknown key 'mode'"),
    ({"problems": ["nope"], "methods": ["forward"]}, "'nope' is neither a zoo problem"),
    ({"problems": ["random_dag(3, n, 3)"], "methods": ["forward"]}, "argument 'n' is not a literal"),
    ({"problems": ["random_tree(3)"], "methods": ["forward"]}, "unknown generator 'random_tree'"),
    ({"problems": ["random_dag(3)"], "methods": ["forward"]}, "missing a required argument"),
    ({"problems": ["missing.json"], "methods": ["forward"]}, "no graph file 'missing.json'"),
    ({"problems": ["chain_50"], "methods": ["forward"], "modes": ["diagonal"]}, "unknown mode 'diagonal'"),
    ({"problems": ["chain_50"], "methods": ["dstar"]}, "'dstar' is registered in none of the modes vertex"),
    ({"problems": ["chain_50"], "methods": ["face:markowitz"]}, "face mode has no method 'markowitz'"),
    ({"problems": ["chain_50"], "methods": ["forward"], "seeds": [-1]}, "a seed is an integer in [0, 2**63)"),
    ({"problems": ["chain_50"], "methods": ["forward"], "seeds": [2**63]}, "in [0, 2**63) or null, got 9223372036854775808"),
    ({"problems": ["chain_50", "chain_50"], "methods": ["forward"]}, "lists 'chain_50' twice"),
    ({"problems": ["chain_50"], "methods": ["forward"], "options": {"time_limt": 1}}, "'time_limt' is taken by none"),
    ({"problems": ["chain_50"], "methods": ["forward"], "options": {"seed": 1}}, 'with the "seeds" list'),
    ({"problems": ["chain_50"], "methods": ["forward"], "limits": [{"max_edges": 3, "max_faces": 4}]},
     "exactly one of max_edges"),
])
def test_a_bad_grid_is_one_clear_line(grid, message):
    with pytest.raises(GridError, match=None) as info:
        load_grid(grid)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_grid_axes_cross_and_options_follow_the_methods_that_take_them():
    [grid] = load_grid({"problems": ["chain_50", "random_dag(4, 10, 4, seed=3)", "tag:paper003"],
                        "modes": ["vertex", "edge"], "methods": ["markowitz", "anneal", "face:greedy"],
                        "seeds": [0, 1], "options": [{"time_limit": 1}, {"time_limit": 2}]})
    cells = list(grid.cells())
    assert len(cells) == len(grid)
    assert len({c.key for c in cells}) == len(cells)
    anneal = [c for c in cells if c.method == "anneal"]
    assert {c.mode for c in anneal} == {"vertex"} and {c.options["time_limit"] for c in anneal} == {1, 2}
    assert all(c.options == {} for c in cells if c.method != "anneal")  # once, not once per option set
    seeded = next(p for p in grid.problems if p.kind == "generator")
    assert seeded.key == "random_dag(4, 10, 4, seed=3)" and not seeded.takes_seed


def test_example_grid_file_loads():
    [grid] = load_grid(os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "grids", "example.json"))
    assert grid.name == "example" and len(grid) > 50


def test_scheduler_without_dask_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)  # as if dask were not installed
    with pytest.raises(MissingExtraError, match=r"jacacc\[distributed\]"):
        run({"problems": ["chain_50"], "methods": ["forward"]}, tmp_path / "s.sqlite", scheduler="tcp://x:8786")


def test_bad_executor_arguments_are_refused(tmp_path):
    grid = {"problems": ["chain_50"], "methods": ["forward"]}
    with pytest.raises(JacaccError, match="not both"):
        run(grid, tmp_path / "s.sqlite", workers=2, scheduler="tcp://x:8786")
    with pytest.raises(JacaccError, match="positive integer"):
        run(grid, tmp_path / "s.sqlite", workers=0)
    with pytest.raises(JacaccError, match="positive number"):
        run(grid, tmp_path / "s.sqlite", cell_timeout=-1)


# ---------------------------------------------------------------------------- the command line
def test_cli_runs_resumes_and_exports(tmp_path, capsys):
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"problems": ["chain_50", "random_dag(3, 8, 3)"], "modes": ["vertex", "edge"],
                                "methods": ["forward", "markowitz"], "seeds": [0, 1]}))
    store = tmp_path / "store.sqlite"
    assert main(["sweep", str(grid), "--out", str(store)]) == 0
    assert "16 cells: 16 computed (16 ok), 0 already stored" in capsys.readouterr().out
    assert main(["sweep", str(grid), "--out", str(store), "--workers", "2"]) == 0
    assert "16 cells: 0 computed (none), 16 already stored" in capsys.readouterr().out
    assert main(["sweep", str(grid), "--out", str(store), "--no-resume"]) == 0
    assert "16 computed" in capsys.readouterr().out
    assert main(["sweep", "--export", str(store), str(tmp_path / "out.json")]) == 0
    records = json.loads((tmp_path / "out.json").read_text())
    assert len(records) == 16 and {r["status"] for r in records} == {"ok"}
    assert main(["sweep", "--export", str(store), str(tmp_path / "out.csv")]) == 0
    with open(tmp_path / "out.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 16 and {"problem", "mode", "method", "seed", "mults", "graph.edges", "worker"} <= set(rows[0])
    assert sorted(int(r["mults"]) for r in rows) == sorted(r["result"]["mults"] for r in records)


@pytest.mark.parametrize(("content", "message"), [
    ('{"problems": ["chain_50"], "methods": ["forward"],}', "is not valid JSON"),
    ('{"problems": ["chain_50"], "methods": ["nope"]}', "'nope' is registered in none of the modes"),
    ('[1, 2]', "grid[0]: a grid is a JSON object"),
])
def test_cli_bad_grid_is_one_line(tmp_path, capsys, content, message):
    grid = tmp_path / "grid.json"
    grid.write_text(content)
    assert main(["sweep", str(grid), "--out", str(tmp_path / "s.sqlite")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jacacc: error: ") and message in err and err.count("\n") == 1


@pytest.mark.parametrize(("argv", "message"), [
    (["sweep", "grid.json"], "give GRID.json and --out STORE"),
    (["sweep", "--export", "missing.sqlite", "out.json"], "no sweep store 'missing.sqlite'"),
    (["sweep", "--export", "s.sqlite", "out.txt"], "export to .json or .csv"),
    (["sweep", "g.json", "--out", "s.sqlite", "--workers", "2", "--scheduler", "tcp://x:1"], "not allowed with"),
])
def test_cli_usage_errors(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) if "--scheduler" in argv else _nothing():
        assert main(argv) == 2
    assert message in capsys.readouterr().err


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_store_that_is_not_a_sweep_store_is_refused(tmp_path):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    with pytest.raises(JacaccError, match="not a jacacc sweep store"):
        run({"problems": ["chain_50"], "methods": ["forward"]}, other)


# ---------------------------------------------------------------------------- the experiments
@pytest.mark.parametrize("executor", ["workers", "scheduler"])
def test_experiments_give_the_same_rows_on_every_executor(tmp_path, executor, request):
    from experiment_scripts import load_experiment

    from jacacc.bench import read_record

    script = load_experiment("structure_methods")
    flags = ["--workers", "2"] if executor == "workers" else \
        ["--scheduler", request.getfixturevalue("cluster").scheduler.address]
    rows = {}
    for name, extra in (("in-process", []), (executor, flags)):
        out = tmp_path / name
        assert script.main(["--sizes", "8", "--seeds", "2", "--problems", "BlackScholes", "--out", str(out),
                            "--no-figure", *extra]) == 0
        rows[name] = [{k: v for k, v in r.items() if k != "seconds"}
                      for r in read_record(out / "structure_methods.json")["results"]["rows"]]
    assert rows[executor] == rows["in-process"] and len(rows[executor]) == (3 * 2 + 1) * 6


def test_sweep_benchmark_runs_at_a_tiny_size(tmp_path):
    from experiment_scripts import load_experiment

    from jacacc.bench import read_record

    script = load_experiment("sweep_benchmark")
    assert script.main(["--cells", "4", "--intermediates", "16", "--iterations", "300", "--repeat", "1",
                        "--out", str(tmp_path)]) == 0
    record = read_record(tmp_path / "sweep_benchmark.json")
    runs = record["results"]["runs"]
    assert set(runs) == {"in_process", "local"} and record["environment"]["cpu_count"]
    assert all(r["cells"] == 4 and r["same_results_as_in_process"] for r in runs.values())
    assert runs["local"]["coordinator_cpu_ms_per_cell"] > 0


def test_a_locked_store_is_one_line(tmp_path, capsys, monkeypatch):
    """Another process's transaction holding the store past SQLite's busy timeout: one line naming
    the store (once two chained tracebacks)."""
    from jacacc.sweep import store as store_module

    monkeypatch.setattr(store_module, "BUSY_TIMEOUT", 0.05)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"problems": ["chain_50"], "methods": ["forward"]}))
    store = tmp_path / "locked.sqlite"
    assert main(["sweep", str(grid), "--out", str(store)]) == 0
    capsys.readouterr()
    holder = sqlite3.connect(store, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        assert main(["sweep", str(grid), "--out", str(store), "--no-resume"]) == 2
    finally:
        holder.close()
    err = capsys.readouterr().err
    assert err.startswith("jacacc: error: sweep store") and "database is locked" in err and err.count("\n") == 1
