"""The scalar tier (jacacc.tensor.scalarize): small programs written out entry by entry and run as an
instruction table give the NumPy program's results, keep the tensor level's zeros apart, and are
refused by name where they cannot be written out."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import jacacc.tensor as jt
from jacacc.errors import UnsupportedOperationError
from jacacc.tensor import scalarize
from jacacc.tensor.api import _derive
from jacacc.tensor.evaluate import Program
from jacacc.tensor.expr import cancelled, einsum, unary, var
from jacacc.tensor.operators import apply_operator
from jacacc.tensor.trace import trace

pytest.importorskip("numba")


def wood(x):
    f = np.array([10 * (x[1] - x[0] ** 2), 1 - x[0], np.sqrt(90) * (x[3] - x[2] ** 2), 1 - x[2],
                  np.sqrt(10) * (x[1] + x[3] - 2), (x[1] - x[3]) / np.sqrt(10)])
    return np.sum(f ** 2)


def shifted_slices(x):
    # a stencil by slices, a concatenation, a pad and a running sum: entries moved, never computed
    y = np.concatenate([x[1:] - x[:-1], np.pad(x[:2], 1)])
    return np.sum(np.tanh(y) ** 2) + np.sum(np.cumsum(x) * x[::-1])


def powers(x):
    return np.sum(np.abs(x) ** x[::-1]) + np.maximum(x[0], x[1]) * x[2]


def products(x):
    # np.prod's exact derivatives read its zero masks, signs and zero counts (prod_masks)
    return (np.prod(x) - 1) ** 2 + np.sum(np.prod(x.reshape(2, 2), axis=1) ** 3)


FUNCTIONS = {"wood": wood, "shifted_slices": shifted_slices, "powers": powers, "products": products}
POINT = np.array([0.7, -1.3, 0.4, 1.1])


def derivative_program(f, x, order, dtype=np.float64):
    traced = trace(f, [x])
    return Program([_derive(traced, 0, order, "cross_country").expression], traced.inputs, dtype)


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_table_gives_the_numpy_program_s_derivatives(name, order):
    program = derivative_program(FUNCTIONS[name], POINT, order)
    (want,) = program(POINT)
    table = scalarize.scalar_program(program.outputs, program.inputs)
    # NumPy's interpreter of the table (the Numba one, compiled once per set of operations, runs
    # the tables of the tests below)
    (got,) = table.reference(POINT)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def _tables(program):
    """The scalar tier's table of ``program`` (products fused into the sums that alone read them)
    and the same table without the fusion."""
    from jacacc.kernels.tables import InstructionTable

    fused = scalarize.scalar_program(program.outputs, program.inputs)
    build = InstructionTable.from_values.__func__
    try:
        InstructionTable.from_values = classmethod(lambda cls, *a, fused=False: build(cls, *a, fused=False))
        plain = scalarize.scalar_program(program.outputs, program.inputs)
    finally:
        InstructionTable.from_values = classmethod(build)
    return fused, plain


# each operation set and dtype compiles interpreters of its own (seconds): one case by default,
# every function in both dtypes with the exhaustive checks
_FUSED_CASES = [pytest.param(name, dtype, marks=() if (name, dtype) == ("wood", np.float64) else pytest.mark.exhaustive)
                for name in sorted(FUNCTIONS) for dtype in (np.float64, np.float32)]


@pytest.mark.parametrize(("name", "dtype"), _FUSED_CASES)
def test_products_fused_into_sums_give_the_same_bits(name, dtype):
    """A product read only by a sum is one ``muladd`` instruction (rounded twice, as the two it
    replaces): the table with them has fewer instructions and gives the unfused table's results to
    the last bit, in the Numba interpreters of one point and of blocks and in NumPy's."""
    from jacacc.kernels.tables import MULADD, OPERATIONS, numba_table_kernel

    program = derivative_program(FUNCTIONS[name], POINT, 2)
    fused, plain = _tables(program)
    assert fused.table.n_instructions < plain.table.n_instructions
    assert OPERATIONS.index(MULADD) in fused.table.code[:, 0]
    points = np.random.default_rng(3).normal(size=(5, POINT.size)).astype(dtype)
    outputs = []
    for table in (fused.table, plain.table):
        run = numba_table_kernel(table, np.dtype(dtype).name)
        V, J = np.empty((5, 0), dtype), np.empty((5, len(table.outputs)), dtype)
        one_V, one_J = np.empty((1, 0), dtype), np.empty((1, len(table.outputs)), dtype)
        run.on_this_thread(points[:1], one_V, one_J)
        run(points, V, J)
        outputs.append((J.copy(), one_J.copy()))
    np.testing.assert_array_equal(outputs[0][0], outputs[1][0])
    np.testing.assert_array_equal(outputs[0][1], outputs[1][1])
    np.testing.assert_array_equal(outputs[0][1], outputs[0][0][:1])
    np.testing.assert_array_equal(fused.reference(POINT)[0], plain.reference(POINT)[0])
    if shutil.which("g++") is not None:  # the CUDA interpreter's source, run on the host
        from jacacc.kernels.tables import host_table_kernel

        J = np.empty((5, len(fused.table.outputs)), dtype)
        host_table_kernel(fused.table, np.dtype(dtype).name)(points, np.empty((5, 0), dtype), J)
        tol = 1e-12 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(J, outputs[1][0], rtol=tol, atol=tol)


@pytest.mark.parametrize("largest", [True, False])
def test_extremum_weights_are_written_out_with_ties_infinities_and_nans(largest):
    """np.max/np.min's derivative weights (logsumexp's shift): 1/ties at the extremum, NaN in a
    group holding a NaN, over any axes, as the operator computes them on NumPy arrays."""
    x = var("x", (3, 2, 4))
    (weights,) = apply_operator("extremum_weights", [x], axes=(0, 2), largest=largest)
    (rows,) = apply_operator("extremum_weights", [x], axes=(2,), largest=largest)
    point = np.random.default_rng(5).normal(size=(3, 2, 4))
    point[0, 0, :2] = point[2, 0, 3] = 4.0 if largest else -4.0       # a three-way tie
    point[1, 1, 1] = np.inf if largest else -np.inf
    point[2, 1, 0] = np.nan                                          # one group's NaN
    table = scalarize.scalar_program([weights, rows], [x])
    for got, want in zip(table.reference(point), Program([weights, rows], [x])(point), strict=True):
        np.testing.assert_array_equal(got, want)
    assert np.all(np.isnan(table.reference(point)[0][:, 1]))


@pytest.mark.parametrize("largest", [True, False])
def test_the_shift_extremum_is_written_out_with_ties_infinities_and_nans(largest):
    """logsumexp's and softmax's shift (shift_extremum): each group's extremum over any axes, kept,
    a NaN propagating, as the operator computes it on NumPy arrays."""
    x = var("x", (3, 2, 4))
    shifts = [apply_operator("shift_extremum", [x], axes=axes, largest=largest)[0] for axes in ((0, 2), (2,), (0, 1, 2))]
    point = np.random.default_rng(6).normal(size=(3, 2, 4))
    point[0, 0, :2] = 4.0 if largest else -4.0
    point[1, 1, 1] = np.inf if largest else -np.inf
    point[2, 1, 0] = np.nan
    table = scalarize.scalar_program(shifts, [x])
    for got, want in zip(table.reference(point), Program(shifts, [x])(point), strict=True):
        np.testing.assert_array_equal(got, want)
    assert np.isnan(table.reference(point)[0][0, 1, 0]) and table.reference(point)[1].shape == (3, 2, 1)


def test_prod_masks_are_written_out_with_zeros_signs_and_counts():
    """Every output of np.prod's masks, per group over any axes, as the operator computes them on
    NumPy arrays: groups with no, one, two and three zeros, negative entries, a negative zero."""
    x = var("x", (4, 2, 3))
    masks = apply_operator("prod_masks", [x], axes=(2,)) + apply_operator("prod_masks", [x], axes=(0, 2))
    point = np.random.default_rng(7).normal(size=(4, 2, 3))
    point[1, 0, 0] = 0.0                          # one zero
    point[2, 0, :2] = 0.0                         # two
    point[3, 1, :] = [0.0, -0.0, 0.0]             # three, one of them negative zero
    table = scalarize.scalar_program(list(masks), [x])
    for got, want in zip(table.reference(point), Program(list(masks), [x])(point), strict=True):
        np.testing.assert_array_equal(got, want)


def test_einsums_of_three_operands_are_written_pair_by_pair():
    """A chain ``A·B·C`` is written along its contraction path: no more instructions than its
    FLOPs (all at once, every combination of its letters would be a product of three)."""
    from jacacc.tensor.expr import flops_of

    A, B, C = var("A", (2, 8)), var("B", (8, 8)), var("C", (8, 2))
    y = einsum("ij,jk,kl->il", A, B, C)
    table = scalarize.scalar_program([y], [A, B, C])
    assert table.table.n_instructions <= flops_of([y]) < 2 * 8 * 8 * 2 * 2
    rng = np.random.default_rng(9)
    arrays = [rng.normal(size=s) for s in ((2, 8), (8, 8), (8, 2))]
    np.testing.assert_allclose(table.reference(*arrays)[0], arrays[0] @ arrays[1] @ arrays[2], rtol=1e-13)


def test_the_numba_interpreter_runs_the_table():
    program = derivative_program(wood, POINT, 1)
    table = scalarize.scalar_program(program.outputs, program.inputs)
    np.testing.assert_allclose(table(POINT)[0], program(POINT)[0], rtol=1e-12)
    np.testing.assert_array_equal(table(POINT)[0], table.reference(POINT)[0])


def test_float32_programs_run_in_float32():
    x = POINT.astype(np.float32)
    program = derivative_program(wood, x, 1, np.float32)
    (want,) = program(x)
    (got,) = scalarize.scalar_program(program.outputs, program.inputs, np.float32).reference(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_structural_zeros_make_no_instruction_and_cancelled_zeros_multiply():
    A, x = var("A", (3, 3)), var("x", (3,))
    # A ∘ δ reads the diagonal only: three products and two sums per entry of A's diagonal times x
    diagonal = scalarize.scalar_program([einsum("ii,i->i", A, x)], [A, x])
    assert diagonal.table.n_instructions == 3
    s = var("s", ())
    y = einsum(",->", cancelled(()), unary("log", s))  # 0 · log(0): NaN, as NumPy gives it
    (value,) = scalarize.scalar_program([y], [s]).reference(np.array(0.0))
    assert np.isnan(value)


def test_programs_it_cannot_write_out_are_refused_by_name():
    def through_sort(a):
        return np.sum(np.sort(a) * np.arange(3.0))

    program = derivative_program(through_sort, np.array([1.0, 3.0, 2.0]), 1)
    with pytest.raises(UnsupportedOperationError, match="general function argsort"):
        scalarize.scalar_program(program.outputs, program.inputs)
    n = scalarize.SMALL_FACTORIZATION + 1
    program = derivative_program(lambda a: np.linalg.slogdet(np.outer(a, a) + np.eye(n))[1], np.ones(n), 1)
    with pytest.raises(UnsupportedOperationError, match="LU factorizations of at most"):
        scalarize.scalar_program(program.outputs, program.inputs)
    big = var("B", (300, 300))
    with pytest.raises(UnsupportedOperationError, match="at most"):
        scalarize.scalar_program([einsum("ij,jk->ik", big, big)], [big])


def test_a_program_switches_to_the_table_after_its_calls_and_keeps_its_results(monkeypatch):
    monkeypatch.setattr(scalarize, "SCALAR_AFTER", 2)
    monkeypatch.setattr(scalarize, "TRY_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(scalarize, "WRITE_SECONDS_PER_OPERATION", 0.0)
    monkeypatch.setattr(scalarize, "KEEP_BELOW", float("inf"))  # kept whatever the timing
    program = derivative_program(wood, POINT, 1)
    first = [program(POINT)[0] for _ in range(2)]
    assert not program.scalar_tier
    later = [program(POINT + k)[0] for k in range(3)]
    assert program.scalar_tier
    np.testing.assert_allclose(later[0], first[0], rtol=1e-12)
    np.testing.assert_allclose(later[2], derivative_program(wood, POINT + 2, 1)(POINT + 2)[0], rtol=1e-12)


def test_a_slower_table_is_not_kept(monkeypatch):
    monkeypatch.setattr(scalarize, "SCALAR_AFTER", 0)
    monkeypatch.setattr(scalarize, "TRY_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(scalarize, "WRITE_SECONDS_PER_OPERATION", 0.0)
    monkeypatch.setattr(scalarize, "KEEP_BELOW", 0.0)
    program = derivative_program(wood, POINT, 1)
    assert not program.settled
    for _ in range(3):
        program(POINT)
    assert not program.scalar_tier and program.settled  # tried and declined: the steady state


def test_a_program_is_settled_once_its_tier_is_tried_or_out_of_reach(monkeypatch):
    monkeypatch.setattr(scalarize, "SCALAR_AFTER", 1)
    monkeypatch.setattr(scalarize, "TRY_AFTER_SECONDS", 3600.0)  # not tried within this test
    program = derivative_program(wood, POINT, 1)
    for _ in range(3):
        program(POINT)
    assert not program.settled
    monkeypatch.setattr(scalarize, "MAX_INSTRUCTIONS", 1)  # past the tier's reach: nothing to wait for
    assert derivative_program(wood, POINT, 1).settled


def test_grad_through_the_tier_matches_without_it(monkeypatch):
    monkeypatch.setattr(scalarize, "SCALAR_AFTER", 1)
    monkeypatch.setattr(scalarize, "TRY_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(scalarize, "WRITE_SECONDS_PER_OPERATION", 0.0)
    monkeypatch.setattr(scalarize, "KEEP_BELOW", float("inf"))
    g = jt.grad(wood)
    values = [g(POINT + 0.1 * k) for k in range(4)]
    monkeypatch.setattr(scalarize, "ENABLED", False)
    g_plain = jt.grad(lambda x: wood(x))
    for k, v in enumerate(values):
        np.testing.assert_allclose(v, g_plain(POINT + 0.1 * k), rtol=1e-12)


@pytest.mark.parametrize("text", ["-1", "soon"])
def test_the_call_count_setting_is_checked(text):
    with pytest.raises(ValueError, match="JACACC_SCALAR_AFTER"):
        scalarize._calls_before(text)


# ---------------------------------------------------------------------------- small solves written out
def kalman_like(theta, ys):
    """A filter-like loop: a 2 × 2 covariance through solve, inv and slogdet at every step."""
    F = np.array([[1.0, 0.1], [0.0, theta[2]]])
    P, total = np.eye(2), 0.0
    for y in ys:
        P = F @ P @ F.T + np.exp(theta[0]) * np.eye(2)
        S = P + np.exp(theta[1]) * np.eye(2)
        total = total + y @ np.linalg.solve(S, y) + np.linalg.slogdet(S)[1] + np.sum(np.linalg.inv(S))
        P = P - P @ np.linalg.solve(S, P)
    return total


@pytest.mark.parametrize("order", [1, 2])
def test_solves_inverses_and_log_determinants_are_written_out_with_pivoting(order):
    ys = np.random.default_rng(3).standard_normal((4, 2))
    theta = np.array([-0.5, -1.0, 0.8])
    program = derivative_program(lambda t: kalman_like(t, ys), theta, order)
    table = scalarize.scalar_program(program.outputs, program.inputs)
    assert table.factorized
    np.testing.assert_allclose(table.reference(theta)[0], program(theta)[0], rtol=1e-10)
    # a matrix whose first pivot is tiny: partial pivoting swaps the rows, as LAPACK does
    A = var("A", (3, 3))
    from jacacc.linalg.factorizations import gesv, slogdet

    B = np.array([[1e-12, 2.0, 1.0], [3.0, -1.0, 0.5], [0.5, 4.0, -2.0]])
    solved = scalarize.scalar_program([gesv(A, A), *slogdet(A)], [A]).reference(B)
    np.testing.assert_allclose(solved[0], np.eye(3), atol=1e-12)
    assert solved[1] == np.sign(np.linalg.det(B))
    np.testing.assert_allclose(solved[2], np.log(abs(np.linalg.det(B))), rtol=1e-12)


def test_a_singular_matrix_after_the_switch_raises_numpy_s_error(monkeypatch):
    from jacacc.linalg.routines import SingularMatrixError

    monkeypatch.setattr(scalarize, "SCALAR_AFTER", 0)
    monkeypatch.setattr(scalarize, "TRY_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(scalarize, "WRITE_SECONDS_PER_OPERATION", 0.0)
    monkeypatch.setattr(scalarize, "KEEP_BELOW", float("inf"))
    g = jt.grad(lambda a: np.sum(np.linalg.solve(np.diag(a) + a[0] * np.ones((2, 2)), a)))
    for k in range(3):
        g(np.array([1.0 + k, 2.0]))
    with pytest.raises(SingularMatrixError):
        g(np.array([0.0, 0.0]))


def test_the_tier_waits_until_the_numpy_calls_would_pay_for_the_table(monkeypatch):
    monkeypatch.setattr(scalarize, "SCALAR_AFTER", 0)
    monkeypatch.setattr(scalarize, "KEEP_BELOW", float("inf"))
    monkeypatch.setattr(scalarize, "TRY_AFTER_SECONDS", 3600.0)
    program = derivative_program(wood, POINT, 1)
    for _ in range(20):
        program(POINT)
    assert not program.scalar_tier and program._scalar is None  # not even tried
    assert scalarize.time_before_trying(program) == 3600.0
