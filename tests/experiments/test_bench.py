"""Experiment records and the timing helper."""

from __future__ import annotations

import json

import pytest

from jacacc.bench import environment, read_record, time_call, write_record


def test_record_round_trip_carries_environment_and_seed(tmp_path):
    path = tmp_path / "sub" / "r.json"
    written = write_record(path, "demo", {"rows": [1, 2]}, parameters={"n": 3}, seed=7)
    read = read_record(path)
    assert read == json.loads(json.dumps(written))
    assert read["seed"] == 7 and read["parameters"] == {"n": 3} and read["results"] == {"rows": [1, 2]}
    env = read["environment"]
    assert env["python"] and env["cpu_count"] >= 1 and env["versions"]["networkx"]


def test_read_record_refuses_other_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"a": 1}')
    with pytest.raises(ValueError, match="not a jacacc record"):
        read_record(path)


def test_environment_names_every_tracked_package():
    from jacacc.bench import TRACKED_PACKAGES

    assert set(environment()["versions"]) == set(TRACKED_PACKAGES)


def test_time_call_runs_the_function_and_returns_the_best():
    calls = []
    best = time_call(lambda: calls.append(1), repeat=4)
    assert len(calls) == 4 and 0 <= best < 1


def _blas_counts() -> list[int]:
    from jacacc.bench import thread_pools

    return [p["num_threads"] for p in thread_pools() if p["user_api"] == "blas"]


def test_blas_threads_limits_numpys_and_scipys_blas_in_the_block_and_restores_them():
    pytest.importorskip("threadpoolctl")
    import scipy.linalg  # noqa: F401 - SciPy's OpenBLAS is a library of its own

    from jacacc.bench import blas_threads

    before = _blas_counts()
    assert before, "NumPy's BLAS is always loaded"
    with blas_threads(1) as pools:
        inside = [p["num_threads"] for p in pools if p["user_api"] == "blas"]
        assert inside == [1] * len(before) == _blas_counts()
    assert _blas_counts() == before


def test_every_record_says_how_many_threads_its_blas_had():
    pytest.importorskip("threadpoolctl")
    pools = environment()["thread_pools"]
    assert any(p["user_api"] == "blas" and p["num_threads"] >= 1 for p in pools)
