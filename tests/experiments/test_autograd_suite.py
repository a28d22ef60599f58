"""autograd's operation suite (experiments/autograd_suite.py): its case table, the classifier (a fabricated
wrong result is ``wrong``, jacacc's own error ``refused``, any other exception ``crash``), the Hessian's
nesting, and (``scripts`` tier) a few cases end to end and the committed record's counts against its rows."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from experiment_scripts import REPO, load_experiment

from jacacc.bench import read_record

#: a case jacacc gets right, one it refuses (np.int64 of traced values), one of each other file
RUN = ("test_systematic.py::test_sin", "test_numpy.py::test_cast_to_int", "test_linalg.py::test_inv",
       "test_scipy.py::test_j0")
COMMITTED = REPO / "results" / "autograd_suite.json"


@pytest.fixture(scope="module")
def script():
    return load_experiment("autograd_suite")


@pytest.fixture(scope="module")
def record(script, tmp_path_factory):
    """Four cases end to end (a few seconds)."""
    pytest.importorskip("jax")
    path = tmp_path_factory.mktemp("autograd_suite") / "autograd_suite.json"
    assert script.main(["--cases", *RUN, "--out", str(path)]) == 0
    return read_record(path)


# --------------------------------------------------------------------------- the case table
def test_cases_follow_autograds_four_files(script):
    names = [case.name for case in script.CASES]
    assert len(names) == len(set(names)) and len(names) > 300
    assert {case.source for case in script.CASES} == {f"tests/test_{f}.py" for f in ("systematic", "numpy", "linalg",
                                                                                    "scipy")}
    for case in script.CASES:
        assert case.name == f"{os.path.basename(case.source)}::{case.test}" and case.test.startswith("test_")
    assert set(script.QUICK) <= set(script.BY_NAME)
    for skipped in ("test_make_diagonal", "test_eig_real", "test_astype", "test_sqrtm", "test_convolve_ignore"):
        assert skipped in str(script.SKIPPED) and skipped in script.__doc__
        assert not any(case.test == skipped for case in script.CASES)


def test_every_case_draws_checks_numpy_can_evaluate(script):
    """Every check's arguments fit its function: NumPy computes its value (what the weights are drawn for)."""
    import warnings

    for case in script.CASES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            checks = case.build(script.Draw(np.random.default_rng(0)))
            assert checks, case.name
            for check in checks:
                assert all(0 <= k < len(check.args) for k in check.argnums) and check.order in (1, 2), case.name
                prepared = script.prepare(check, np.random.default_rng(1))
                assert prepared.x0.shape == (sum(prepared.sizes),), case.name


def test_selection_by_full_or_bare_name(script):
    assert [c.name for c in script.select(["test_numpy.py::test_dot"], False)] == ["test_numpy.py::test_dot"]
    assert {c.source for c in script.select(["test_dot"], False)} == {"tests/test_systematic.py",
                                                                      "tests/test_numpy.py"}
    assert [c.name for c in script.select(None, True)] == list(script.QUICK)
    with pytest.raises(SystemExit):
        script.select(["test_no_such_case"], False)


# --------------------------------------------------------------------------- the classifier
def test_a_fabricated_wrong_result_is_wrong(script):
    ref = script.Reference("jax", np.array([1.0, -2.0, 3.0]))
    assert script.classify(np.array([1.0, -2.0, 3.0]), ref)[0] == "right"
    assert script.classify(np.array([1.0, -2.0, 3.0 + 1e-12]), ref)[0] == "right"
    cls, err, message = script.classify(np.array([1.0, -2.0, 3.001]), ref)
    assert cls == "wrong" and err == pytest.approx(1e-3 / 3) and "from jax" in message
    cls, err, message = script.classify(np.array([1.0, np.nan, 3.0]), ref)
    assert cls == "wrong" and math.isinf(err) and "not finite" in message
    assert script.classify(np.array([1.0, -2.0]), ref)[0] == "wrong"  # a shape that differs
    # finite differences are held to FD_RTOL, JAX to RTOL
    fd = script.Reference("fd", np.array([1.0, -2.0, 3.0]))
    assert script.classify(np.array([1.0, -2.0, 3.0 + 1e-7]), fd)[0] == "right"
    assert script.classify(np.array([1.0, -2.0, 3.0 + 1e-7]), ref)[0] == "wrong"
    assert script.classify(np.array([1.0]), script.Reference("missing", None, "no JAX"))[0] == "reference-missing"
    # a NaN where the reference has NaN is no difference
    both = script.Reference("jax", np.array([np.nan, 1.0]))
    assert script.classify(np.array([np.nan, 1.0]), both)[0] == "right"


def test_each_leaf_is_held_to_its_own_scale(script):
    """A small gradient block is not excused by a large one beside it."""
    check = script.chk("np.multiply", np.ones(2), np.ones(3)[:1], argnums=(0, 1))
    prepared = script.Prepared(check, [], [], [np.ones(2), np.ones(1)], [np.ones(2), np.ones(1)], [2, 1],
                               [(2,), (1,)], np.ones(3))
    ref = script.Reference("jax", np.array([1e6, 1e6, 1e-3]))
    assert script.classify(np.array([1e6, 1e6, 2e-3]), ref, prepared)[0] == "wrong"
    assert script.classify(np.array([1e6, 1e6, 2e-3]), ref)[0] == "right"  # one block: scaled by 1e6


def test_exceptions_are_refusals_or_crashes(script):
    from jacacc.errors import TraceError, UnsupportedOperationError

    cls, message = script.exception_class(UnsupportedOperationError("np.foo is not supported\nsecond line"))
    assert cls == "refused" and message == "UnsupportedOperationError: np.foo is not supported […]"
    assert script.exception_class(TraceError("bad"))[0] == "refused"
    import jacacc.tensor as jt

    with pytest.raises(TraceError) as raised:
        jt.grad(lambda x: x)(np.ones(2))  # not scalar-valued: jacacc's own error
    assert script.exception_class(raised.value)[0] == "refused"
    cls, message = script.exception_class(ZeroDivisionError("division by zero"))
    assert cls == "crash" and message == "ZeroDivisionError: division by zero"


def test_the_worst_class_wins(script):
    assert script.worst(["right", "refused", "right"]) == "refused"
    assert script.worst(["refused", "crash", "wrong", "right"]) == "wrong"
    assert script.worst(["reference-missing", "right"]) == "reference-missing"
    assert script.worst(["right"]) == "right"


def test_hessian_nesting_as_jax_nests_it(script):
    """argnum (0, 1) with a list of floats first: the arguments' structure, each leaf that structure again."""
    check = script.chk("np.append", [1.0, 2.0], 4.0, argnums=(0, 1))
    prepared = script.prepare(check, np.random.default_rng(0))
    assert prepared.sizes == [1, 1, 1]
    h = np.arange(9.0).reshape(3, 3)
    nested = ([([h[0, 0], h[0, 1]], h[0, 2]), ([h[1, 0], h[1, 1]], h[1, 2])], ([h[2, 0], h[2, 1]], h[2, 2]))
    assert np.array_equal(script.dense_hessian(nested, prepared), h)
    with pytest.raises(script.StructureMismatch):
        script.dense_hessian(((h[0, 0], h[0, 1], h[0, 2]), (h[1, 0], h[1, 1], h[1, 2])), prepared)


def test_finite_differences_of_a_known_function(script):
    f = lambda x: float(np.sum(np.sin(x)) + x[0] * x[1] ** 2)  # noqa: E731
    x = np.array([0.3, -1.2, 2.0])
    grad = np.cos(x) + np.array([x[1] ** 2, 2 * x[0] * x[1], 0.0])
    hess = np.diag(-np.sin(x)) + np.array([[0, 2 * x[1], 0], [2 * x[1], 2 * x[0], 0], [0, 0, 0]])
    assert np.allclose(script.fd_gradient(f, x), grad, rtol=1e-10, atol=1e-10)
    assert np.allclose(script.fd_hessian(f, x), hess, rtol=1e-7, atol=1e-7)


@pytest.mark.scripts
def test_a_check_against_a_wrong_jacacc_is_wrong(script, monkeypatch):
    """run_check end to end with jacacc's gradient replaced by a perturbed one: the row says wrong."""
    jax = pytest.importorskip("jax")
    right = script.jacacc_derivative

    def perturbed(prepared, derivative):
        return right(prepared, derivative) * (1 + 1e-6)

    check = script.chk("np.sin", np.array([0.3, -0.7]))
    with jax.enable_x64(True):
        assert script.run_check(check, np.random.default_rng(0))["class"] == "right"
        monkeypatch.setattr(script, "jacacc_derivative", perturbed)
        entry = script.run_check(check, np.random.default_rng(0))
    assert entry["class"] == "wrong" and [p["reference"] for p in entry["parts"]] == ["jax", "jax"]


# --------------------------------------------------------------------------- records
def _consistent(script, record) -> None:
    results = record["results"]
    rows, summary = results["rows"], results["summary"]
    assert summary["cases"] == len(rows)
    assert summary["counts"] == {c: sum(r["class"] == c for r in rows) for c in script.CLASSES}
    assert summary["checks"] == sum(r["checks"] for r in rows)
    assert summary["check_counts"] == {c: sum(r["check_classes"].get(c, 0) for r in rows) for c in script.CLASSES}
    for source, counts in summary["by_file"].items():
        mine = [r for r in rows if r["source"] == source]
        assert counts["cases"] == len(mine) == sum(counts[c] for c in script.CLASSES)
    for r in rows:
        assert r["class"] in script.CLASSES and sum(r["check_classes"].values()) == r["checks"]
        assert r["class"] == script.worst(list(r["check_classes"])), r["name"]
        if r["class"] != "right":
            assert r["message"] and "\n" not in r["message"] and r["failures"][0]["class"] == r["class"]
    refused = {f["message"] for r in rows for f in r["failures"] if f["class"] == "refused"}
    assert set(summary["refusals"]) == refused


def test_committed_record_counts_agree_with_its_rows(script):
    if not COMMITTED.exists():
        pytest.skip("no results/autograd_suite.json")
    record = read_record(COMMITTED)
    assert record["experiment"] == "autograd_suite"
    _consistent(script, record)
    assert set(record["parameters"]["cases"]) == {r["name"] for r in record["results"]["rows"]}


def test_quick_run_classifies(record, script):
    assert record["experiment"] == "autograd_suite" and record["environment"]["versions"]["jax"]
    params = record["parameters"]
    assert params["rtol"] == 1e-8 and params["atol"] == 1e-10 and params["jax_enable_x64"] is True
    assert "commit" in params["source"] and params["cases"] == list(RUN)
    rows = {r["name"]: r for r in record["results"]["rows"]}
    assert rows["test_systematic.py::test_sin"]["class"] == "right"
    assert rows["test_systematic.py::test_sin"]["references"] == {"jax": 8}  # 4 checks, gradient and Hessian
    assert rows["test_linalg.py::test_inv"]["class"] == "right"
    assert rows["test_scipy.py::test_j0"]["class"] == "right"
    cast = rows["test_numpy.py::test_cast_to_int"]
    assert cast["class"] == "refused" and "np.int64()" in cast["message"]
    _consistent(script, record)
    table = script.table_text(record)
    assert table.startswith("| file | cases |") and "test_numpy.py::test_cast_to_int | refused" in table
