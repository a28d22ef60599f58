"""The experiment scripts' end-to-end runs are marked ``scripts`` (``make test-extra``; CI runs them).

A test that runs a script — its quick run, its notebook, its reproduction script — measures
timings and pays for compiles in fresh child processes: half a minute each on two cores. They
are kept out of ``make test``, which checks the library; the structural tests of each script
(its grid, its parameters, its error messages) stay in it.
"""

from __future__ import annotations

import pytest

#: module fixtures that run an experiment script end to end
SCRIPT_RUNS = frozenset({"run", "record", "results", "quick_peaks"})
#: tests that execute a script, a notebook or a reproduction by themselves
SCRIPT_TESTS = ("test_reproduction_script", "test_notebook_executes", "test_benchmark_quick_run",
                "test_quick_run_writes_a_valid_record_and_figure", "test_dual_graph_figure",
                "test_structure_comparison_checks_and_records_every_method",
                "test_realization_experiment_replays_every_realized_sequence",
                "test_frontend_sizes_record_matches_both_front_ends", "test_graph_scale_records_every_stage",
                "test_sweep_benchmark_runs_at_a_tiny_size")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", item.name)
        if SCRIPT_RUNS & set(getattr(item, "fixturenames", ())) or name in SCRIPT_TESTS:
            item.add_marker(pytest.mark.scripts)
