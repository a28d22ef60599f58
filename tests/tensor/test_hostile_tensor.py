"""Hostile use of ``jacacc.tensor`` and ``jacacc.linalg`` (issue 24).

A cached transformation must never return a stale result: whenever a value the
function reads besides its arguments changes (a closure variable, a global
array, an attribute, a list or dict entry, a default argument), the next call
gives what a fresh transformation gives.  Random draws inside a differentiated
function are refused by name; side effects run once per trace and are named by
a warning.  Bad arguments get one line naming them.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import jacacc.linalg as la
import jacacc.tensor as jt
from jacacc.errors import TraceError
from jacacc.tensor.captured import Captured, SideEffectWarning

X = np.array([1.0, -2.0, 0.5])
TRANSFORMS = {"grad": jt.grad, "jacobian": jt.jacobian, "hessian": jt.hessian,
              "value_and_grad": jt.value_and_grad}


def assert_fresh(transformed, make, f, *args):
    """The cached transformation gives what a new one gives now."""
    got, want = transformed(*args), make(f)(*args)
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12)


# ---------------------------------------------------------------------------- captured values that change
@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_a_rebound_closure_variable_is_read_again(name):
    make = TRANSFORMS[name]
    c = 2.0

    def f(x):
        return np.sum(c * x ** 3)

    g = make(f)
    first = g(X)
    c = 5.0
    assert_fresh(g, make, f, X)
    again = g(X)
    if name != "value_and_grad":
        np.testing.assert_allclose(again, 2.5 * first)  # every term scales with c


def test_the_issue_example():
    c = 2
    g = jt.grad(lambda x: np.sum(c * x ** 2))
    np.testing.assert_allclose(g(X), 4 * X)
    c = 5
    np.testing.assert_allclose(g(X), 10 * X)


W_GLOBAL = np.array([1.0, 2.0, 3.0])


def _global_loss(x):
    return np.sum(W_GLOBAL * np.tanh(x))


def test_a_global_array_changed_in_place_or_rebound():
    global W_GLOBAL
    saved = W_GLOBAL
    try:
        h = jt.hessian(_global_loss)
        h(X)
        W_GLOBAL[1] = -7.0  # in place
        assert_fresh(h, jt.hessian, _global_loss, X)
        W_GLOBAL = np.array([0.5, 0.25, 4.0])  # rebound
        assert_fresh(h, jt.hessian, _global_loss, X)
    finally:
        W_GLOBAL = saved
        saved[:] = [1.0, 2.0, 3.0]


def test_a_value_read_through_a_helper_function():
    scale = np.array([1.0, 1.0, 1.0])

    def helper(x):
        return scale * x

    def f(x):
        return np.sum(np.exp(helper(x)))

    g = jt.grad(f)
    g(X)
    scale *= 3.0
    assert_fresh(g, jt.grad, f, X)


class Model:
    def __init__(self):
        self.W = np.eye(3)
        self.decay = 0.1

    def loss(self, x):
        return np.sum(np.tanh(self.W @ x)) + self.decay * np.sum(x * x)


def test_attributes_of_self_changed_or_replaced():
    m = Model()
    g = jt.grad(m.loss)
    g(X)
    m.decay = 2.0
    assert_fresh(g, jt.grad, m.loss, X)
    m.W = np.arange(9.0).reshape(3, 3) / 9
    assert_fresh(g, jt.grad, m.loss, X)
    m.W[0, 0] = 5.0
    assert_fresh(g, jt.grad, m.loss, X)


def test_list_and_dict_entries_and_default_arguments():
    weights = [np.ones(3), 2.0]
    config = {"alpha": 0.5}

    def f(x, extra=np.zeros(3)):  # noqa: B008 - a mutable default is what is tested
        return np.sum(weights[0] * x ** 2) * weights[1] + config["alpha"] * np.sum(extra * x)

    g = jt.grad(f)
    g(X)
    weights[1] = 3.0
    assert_fresh(g, jt.grad, f, X)
    weights[0][2] = -1.0
    assert_fresh(g, jt.grad, f, X)
    config["alpha"] = 4.0
    f.__defaults__[0][:] = 1.0
    assert_fresh(g, jt.grad, f, X)


def test_a_change_rebuilds_the_plans_of_every_shape():
    c = 1.0
    g = jt.grad(lambda x: np.sum(c * x ** 2))
    small, large = np.ones(2), np.ones(4)
    g(small)
    g(large)
    c = 3.0
    g(large)  # the change is seen here ...
    np.testing.assert_allclose(g(small), 6 * small)  # ... and the other shape's plan is not reused


def test_unchanged_values_reuse_the_plan():
    c = np.array([1.0, 2.0, 3.0])
    g = jt.hessian(lambda x: np.sum(c * x ** 3))
    g(X)
    plan = next(iter(g.plans.values()))
    c2 = c  # another name for the same array: nothing changed
    del c2
    g(X + 1)
    assert next(iter(g.plans.values())) is plan


def test_captured_names_what_changed():
    offset = 1.0
    captured = Captured.of(lambda x: x + offset)
    assert captured.changed() is None
    offset = 2.0
    assert "'offset'" in captured.changed()


def test_the_sign_of_a_captured_zero_counts():
    """0.0 and -0.0 compare equal, yet arctan2, copysign and 1/x tell them apart: a scalar or an
    array entry that changes sign is a change."""
    c = 0.0
    g = jt.grad(lambda x: np.sum(x * np.arctan2(c, -1.0)))
    np.testing.assert_allclose(g(X), np.pi)
    c = -0.0
    np.testing.assert_allclose(g(X), -np.pi)
    w = np.zeros(3)
    h = jt.grad(lambda x: np.sum(x * np.arctan2(w, -1.0)))
    np.testing.assert_allclose(h(X), np.pi)
    w[1] = -0.0
    np.testing.assert_allclose(h(X), [np.pi, -np.pi, np.pi])


@pytest.mark.parametrize("size", [3, (1 << 16) // 8 + 1])  # compared byte for byte, and by NumPy
def test_captured_arrays_are_compared_exactly_at_either_size(size):
    from jacacc.tensor.captured import Captured

    w = np.zeros(size)
    w[0] = np.nan
    captured = Captured.of(lambda x: w @ x)
    assert captured.changed() is None              # NaN is still NaN
    w[1] = -0.0
    assert "'w'" in captured.changed()             # the sign of a zero
    w[1] = 0.0
    assert captured.changed() is None
    w[-1] = 1e-300
    assert "'w'" in captured.changed()


def test_containers_numpy_reads_are_checked():
    """A deque, an array.array, a scipy.sparse matrix's arrays and a torch tensor, changed in place."""
    import array
    import collections

    import scipy.sparse

    d = collections.deque([1.0, 2.0])
    g = jt.grad(lambda x: np.sum(x * d[-1]))
    g(X)
    d.append(5.0)
    np.testing.assert_allclose(g(X), 5.0)
    a = array.array("d", [1.0, 2.0, 3.0])
    g = jt.grad(lambda x: np.sum(x * np.asarray(a)))
    g(X)
    a[0] = -4.0
    np.testing.assert_allclose(g(X), [-4.0, 2.0, 3.0])
    S = scipy.sparse.csr_matrix(np.diag([1.0, 2.0, 3.0]))
    g = jt.grad(lambda x: np.sum(S.toarray() @ x))
    g(X)
    S.data[2] = 10.0
    np.testing.assert_allclose(g(X), [1.0, 2.0, 10.0])
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64)
    g = jt.grad(lambda x: np.sum(x * t.numpy()))
    g(X)
    t[1] = 7.0
    np.testing.assert_allclose(g(X), [1.0, 7.0, 1.0])


DYNAMIC_SCALE = 2.0


def test_globals_read_by_a_computed_name_are_checked():
    """Code that reads globals through globals(), eval or vars can read any of them."""
    global DYNAMIC_SCALE
    g = jt.grad(lambda x: np.sum(x * globals()["DYNAMIC_SCALE"]))
    e = jt.grad(lambda x: np.sum(x * eval("DYNAMIC_SCALE")))  # noqa: S307 - what is tested
    np.testing.assert_allclose(g(X), 2.0)
    np.testing.assert_allclose(e(X), 2.0)
    try:
        DYNAMIC_SCALE = 3.0
        np.testing.assert_allclose(g(X), 3.0)
        np.testing.assert_allclose(e(X), 3.0)
    finally:
        DYNAMIC_SCALE = 2.0


#: a module global that shares its name with an attribute ``f`` reads (``V.T``)
T = np.ones((300, 300))


def test_an_attribute_name_is_no_global_read():
    """``V.T`` names the attribute ``T`` (it is in the code's ``co_names``), not the global ``T``:
    that array is not compared with its snapshot at every call; a global the code loads is."""
    captured = Captured.of(lambda U, V: np.sum(U @ V.T))
    assert captured.arrays == [] and captured.changed() is None
    read = Captured.of(lambda x: np.sum(T * x))
    assert [what for what, _, _ in read.arrays] == ["the array in the global 'T' was changed in place"]


# ---------------------------------------------------------------------------- random draws and side effects
def test_random_draws_are_refused_by_name():
    with pytest.raises(TraceError, match=r"np\.random"):
        jt.grad(lambda x: np.sum(np.random.normal(size=3) * x))(X)
    rng = np.random.default_rng(0)
    with pytest.raises(TraceError, match="generator in the closure variable 'rng'"):
        jt.hessian(lambda x: np.sum(rng.normal(size=3) * x ** 2))(X)
    with pytest.raises(TraceError, match="Python's random module"):
        jt.grad(lambda x: np.sum(random.random() * x))(X)


def test_a_generator_seeded_from_entropy_inside_f_is_refused():
    """np.random.default_rng() inside f draws other numbers at every call: a cached plan would
    repeat the first call's; a generator seeded by the code is the same at every call."""
    with pytest.raises(TraceError, match="operating system's entropy"):
        jt.grad(lambda x: np.sum(np.random.default_rng().normal(size=3) * x))(X)
    g = jt.grad(lambda x: np.sum(np.random.default_rng(7).normal(size=3) * x))
    np.testing.assert_allclose(g(X), np.random.default_rng(7).normal(size=3))


def test_a_generator_not_drawn_from_is_fine():
    rng = np.random.default_rng(0)
    noise = rng.normal(size=3)
    g = jt.grad(lambda x: np.sum(noise * x) if rng is not None else None)
    np.testing.assert_allclose(g(X), noise)


def test_side_effects_run_once_per_trace_with_a_warning():
    calls = []

    def f(x):
        calls.append(1)
        return np.sum(x ** 2)

    g = jt.grad(f)
    with pytest.warns(SideEffectWarning, match="'calls'"):
        g(X)
    np.testing.assert_allclose(g(X), 2 * X)
    assert len(calls) == 1  # the cached plan: f is not run again


# ---------------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize("argnum", [None, "a", [], [0, None], 1.5])
def test_value_and_grad_argnum_is_checked(argnum):
    with pytest.raises(TypeError, match="argnum must be an int or a non-empty sequence of ints"):
        jt.value_and_grad(lambda x: np.sum(x ** 2), argnum=argnum)(X)


def test_division_by_a_zero_constant_is_ieee_as_in_numpy():
    x = np.array([1.0, -2.0, 0.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        value, grad = jt.value_and_grad(lambda x: np.sum(x / 0.0))(x)
        assert np.isnan(value) and np.isnan(np.sum(x / 0.0))
        np.testing.assert_array_equal(jt.grad(lambda x: np.sum(x / -0.0))(x), np.full(3, -np.inf))
    np.testing.assert_array_equal(grad, np.full(3, np.inf))


@pytest.mark.parametrize("call", [
    lambda A: la.gemm(A, A, A, alpha="x"),
    lambda A: la.gemm(A, A, A, beta="x"),
    lambda A: la.gemm2(A, A, alpha="x"),
    lambda A: la.syrk(A, alpha="x"),
    lambda A: la.trmm(A, A, alpha=1j),
    lambda A: la.trsm(A + 3 * np.eye(2), A, alpha=None),
])
def test_linalg_scalar_options_are_checked_while_traced(call):
    A = np.array([[2.0, 0.5], [0.5, 3.0]])
    with pytest.raises(TypeError, match=r"(alpha|beta) must be a real number"):
        jt.grad(lambda A: np.sum(call(A)))(A)
    with pytest.raises(TypeError, match=r"(alpha|beta) must be a real number"):
        call(A)  # and eagerly, with the same message


def test_linalg_offset_is_checked_while_traced():
    with pytest.raises(TypeError, match="offset must be an int"):
        jt.grad(lambda v: np.sum(la.makediag(v, offset="1")))(np.ones(2))


def test_a_function_reaching_too_much_is_traced_at_every_call(monkeypatch):
    import jacacc.tensor.api as api
    import jacacc.tensor.captured as captured

    monkeypatch.setattr(captured, "MAX_BINDINGS", 3)
    monkeypatch.setattr(api, "MAX_BINDINGS", 3)
    table = {k: float(k) for k in range(10)}
    g = jt.grad(lambda x: np.sum(table[2] * x ** 2))
    with pytest.warns(RuntimeWarning, match="every call"):
        np.testing.assert_allclose(g(X), 4 * X)
    table[2] = 3.0
    with pytest.warns(RuntimeWarning, match="every call"):
        np.testing.assert_allclose(g(X), 6 * X)


def test_a_masked_array_argument_is_refused_by_name():
    """np.asarray drops a mask: NumPy's np.ma arithmetic would skip the masked entries, the plan would not."""
    data = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])
    with pytest.raises(TypeError, match=r"argument 1 is a masked array \(numpy.ma\)"):
        jt.grad(lambda x, d: np.sum(x * d))(X, data)


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_a_closure_float_that_changes_at_every_call_becomes_a_parameter(name):
    """A float set before each call (a step size, a weight) re-planned at every call (0.35–0.7 s
    against 0.04 ms warm); past PARAMETER_AFTER_CHANGES changes the plan reads it at each call
    instead: every result is the fresh transformation's, and the plan is built no more."""
    from jacacc.tensor.api import PARAMETER_AFTER_CHANGES

    make = TRANSFORMS[name]
    weight = 0.5

    def f(x):
        return np.sum(np.tanh(x) ** 2) + weight * np.sum(x ** 3)

    g = make(f)
    plans = []
    for k in range(PARAMETER_AFTER_CHANGES + 4):
        weight = 0.25 * k - 0.6
        assert_fresh(g, make, f, X)
        plans.append(next(iter(g.plans.values())))
    assert len({id(p) for p in plans[PARAMETER_AFTER_CHANGES:]}) == 1


def test_a_float_that_f_branches_on_stays_a_constant():
    """f compares the float with a number: it cannot be a parameter, and every call is still right."""
    threshold = 0.0

    def f(x):
        return np.sum(x ** 2) if threshold < 1.0 else np.sum(np.sin(x))

    g = jt.grad(f)
    for k in range(6):
        threshold = 0.4 * k
        assert_fresh(g, jt.grad, f, X)


def test_non_finite_constants_in_shifts_and_powers_compile():
    """``x − inf``, ``x ** inf`` and ``x + nan`` are NumPy's values, in the straight-line program and
    in fused kernels (their text spells ±inf and NaN by name, not as ``inf``)."""
    x = np.array([1.0, 2.0])
    with np.errstate(invalid="ignore", over="ignore"):
        for f in (lambda x: x - np.inf, lambda x: x ** np.inf, lambda x: x + np.nan):
            np.testing.assert_array_equal(jt.vjp(f, x)[0], f(x))
    h = jt.hessian(lambda x: np.sum(np.exp(x - np.inf) + x ** 2))
    for _ in range(4):  # past the fusion threshold: the shift by −inf inside a fused kernel
        np.testing.assert_array_equal(h(x), 2 * np.eye(2))


def test_or_of_comparisons_and_boolean_scalars_trace():
    """``(x > 1) | (x < 0)`` is a mask; a NumPy boolean scalar (a comparison of 0-d arrays) is a constant."""
    x = np.array([1.5, 0.5, -1.0])
    g = jt.grad(lambda x: np.sum(np.where((x > 1) | (x < 0), x, 2 * x)))(x)
    np.testing.assert_array_equal(g, [1.0, 2.0, 1.0])
    flag = np.float64(0.5) > 0.0
    np.testing.assert_array_equal(jt.grad(lambda x: np.sum(x * flag))(x), np.ones(3))
