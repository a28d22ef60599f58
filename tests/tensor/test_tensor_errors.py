"""Bad input to jacacc.tensor gets clear errors: unsupported NumPy calls name the operation
(UnsupportedOperationError), non-scalar functions given to grad and malformed calls are
TraceErrors, argnum out of range a ValueError, integer and complex arguments TypeErrors,
unknown modes RegistryErrors that list the valid ones — from every entry point."""

from __future__ import annotations

import numpy as np
import pytest

import jacacc.tensor as jt
from jacacc.errors import JacaccError, OrderError, RegistryError, TraceError, UnsupportedOperationError

x3 = np.array([0.5, -0.3, 0.8])
M3 = np.array([[1.0, 0.2, 0.0], [0.1, 2.0, 0.3], [0.0, 0.4, 1.5]])


# ---------------------------------------------------------------------------- unsupported operations
UNSUPPORTED = [
    ("np.add.reduce", lambda x: np.add.reduce(x), x3, ["add", "reduce"]),
    ("ufunc with out=", lambda x: np.sum(np.exp(x, out=np.empty(3))), x3, ["exp", "out"]),
    ("ndarray.any", lambda x: x * x.any(), x3, ["ndarray.any"]),
    ("np.einsum dtype/out", lambda x: np.einsum("i->", x, dtype=float), x3, ["einsum", "dtype"]),
    ("np.partition", lambda x: np.sum(np.partition(x, 1)), x3, ["np.partition"]),
    ("np.unique", lambda x: np.sum(np.unique(x)), x3, ["np.unique"]),
    ("np.outer of a matrix", lambda x: np.sum(np.outer(np.outer(x, x), x)), x3, ["outer", "(3, 3)"]),
    ("np.matmul with a scalar", lambda x: np.sum(np.sum(x) @ x), x3, ["matmul", "scalar"]),
    ("np.matmul misaligned", lambda x: np.sum(x @ np.ones((4, 2))), x3, ["matmul", "(3,)", "(4, 2)", "align"]),
    ("float()", lambda x: float(np.sum(x)) * x, x3, ["float"]),
    ("truth value", lambda x: x if np.sum(x) else -x, x3, ["truth value"]),
    ("complex constant", lambda x: np.sum(x * (1 + 2j)), x3, ["complex"]),
    ("comparison steering control flow", lambda x: np.sum(x) if x == 0 else np.sum(-x), x3, ["truth value"]),
    ("np.linalg.eig", lambda x: np.sum(np.linalg.eig(np.outer(x, x))[0]), x3, ["np.linalg.eig"]),
    ("np.fft.fft", lambda x: np.sum(np.fft.fft(x).real), x3, ["np.fft.fft"]),
    ("logical and of values", lambda x: np.sum(x & x), x3, ["logical_and", "comparison"]),
    ("negative constant base", lambda x: np.sum((-2.0) ** x), x3, ["power", "-2", "not positive"]),
    ("zero constant base", lambda x: np.sum(0.0 ** x), x3, ["power", "0", "not positive"]),
]


@pytest.mark.parametrize("case", UNSUPPORTED, ids=[c[0] for c in UNSUPPORTED])
@pytest.mark.parametrize("transform", ["grad", "jacobian", "hessian"])
def test_unsupported_operation_is_refused_by_name(case, transform):
    _, f, arg, words = case
    with pytest.raises(UnsupportedOperationError) as info:
        getattr(jt, transform)(f)(arg)
    message = str(info.value)
    for word in words:
        assert word in message, (word, message)


def test_unsupported_operation_from_vjp_jvp_and_derivative_expression():
    f = lambda A: np.sum(np.linalg.eig(A)[0])  # noqa: E731
    for call in (lambda: jt.vjp(f, M3), lambda: jt.jvp(f, (M3,), (M3,)), lambda: jt.derivative_expression(f, M3)):
        with pytest.raises(UnsupportedOperationError, match="eig"):
            call()


@pytest.mark.parametrize("f, spelled", [
    (lambda x: np.sum(np.spacing(x)), "np.spacing"),
    (lambda x: np.sum(np.fft.fft(x).real), "np.fft.fft"),
    (lambda x: np.sum(np.linalg.eig(np.outer(x, x))[0]), "np.linalg.eig"),
])
def test_unsupported_operation_is_named_with_its_module_in_one_line(f, spelled):
    with pytest.raises(UnsupportedOperationError) as info:
        jt.grad(f)(x3)
    message = str(info.value)
    assert message.startswith(spelled + " ") and "\n" not in message
    assert "supported:" not in message and "exp" not in message  # no list of everything supported


def test_unsupported_errors_are_jacacc_and_type_errors():
    with pytest.raises(JacaccError):
        jt.grad(lambda x: np.sum(np.fft.fft(x).real))(x3)
    with pytest.raises(TypeError):
        jt.grad(lambda x: np.sum(np.fft.fft(x).real))(x3)


# ---------------------------------------------------------------------------- shapes that do not broadcast
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "power"])
def test_shapes_that_do_not_broadcast(op):
    fn = getattr(np, op)
    with pytest.raises(UnsupportedOperationError) as info:
        jt.grad(lambda x, y: np.sum(fn(x, y)))(x3, np.ones(4))
    message = str(info.value)
    assert "broadcast" in message and "(3,)" in message and "(4,)" in message and op in message


def test_division_of_shapes_that_do_not_broadcast():
    with pytest.raises(UnsupportedOperationError, match=r"np.divide: shapes \(3,\) and \(4,\) do not broadcast"):
        jt.grad(lambda x, y: np.sum(x / y))(x3, np.ones(4))


def test_unknown_attributes_are_still_attribute_errors():
    """Only ndarray's own methods are named as unsupported; a typo stays an AttributeError."""
    with pytest.raises(AttributeError, match="no_such_method"):
        jt.grad(lambda x: x.no_such_method())(x3)


def test_constant_that_does_not_broadcast():
    with pytest.raises(UnsupportedOperationError, match=r"\(3,\) and \(2, 4\)"):
        jt.jacobian(lambda x: x * np.ones((2, 4)))(x3)


# ---------------------------------------------------------------------------- bad functions
def test_grad_of_a_non_scalar_function():
    with pytest.raises(TraceError) as info:
        jt.grad(lambda x: np.sin(x))(x3)
    assert "scalar" in str(info.value) and "(3,)" in str(info.value) and "jacobian" in str(info.value)


@pytest.mark.parametrize("result, words", [(lambda x: (x, x), ["one array", "tuple"]),
                                           (lambda x: [x], ["one array", "list"]),
                                           (lambda x: "x", ["str"]),
                                           (lambda x: None, ["NoneType"])])
def test_function_must_return_one_array(result, words):
    with pytest.raises(TraceError) as info:
        jt.jacobian(result)(x3)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("f, words", [
    (lambda x: np.einsum("ij->", x), ["einsum", "'ij->'", "(3,)"]),
    (lambda x: np.einsum("i,i->", x), ["einsum", "2 operands", "got 1"]),
    (lambda x: np.sum(np.sum(x, axis=3)), ["sum", "axis 3", "(3,)"]),
    (lambda x: np.sum(np.transpose(np.outer(x, x), (0, 0))), ["transpose", "permutation"]),
])
def test_malformed_calls_are_trace_errors(f, words):
    with pytest.raises(TraceError) as info:
        jt.grad(f)(x3)
    for word in words:
        assert word in str(info.value)


def test_not_a_function():
    for transform in (jt.grad, jt.jacobian, jt.hessian):
        with pytest.raises(TypeError, match="needs a function"):
            transform(3)


# ---------------------------------------------------------------------------- argnum
@pytest.mark.parametrize("argnum", [2, 5, -3])
@pytest.mark.parametrize("transform", [jt.grad, jt.jacobian, jt.hessian])
def test_argnum_out_of_range(transform, argnum):
    f = transform(lambda x, y: np.sum(np.sin(x) * y), argnum=argnum)
    with pytest.raises(ValueError) as info:
        f(x3, x3)
    assert str(argnum) in str(info.value) and "out of range" in str(info.value) and "2 argument" in str(info.value)


def test_argnum_out_of_range_in_derivative_expression():
    with pytest.raises(ValueError, match="out of range"):
        jt.derivative_expression(lambda x: np.sum(np.sin(x)), x3, argnum=1)


@pytest.mark.parametrize("argnum", [0.0, "0", True, None])
def test_argnum_must_be_an_int(argnum):
    with pytest.raises(TypeError, match="argnum must be an int"):
        jt.grad(lambda x: np.sum(np.sin(x)), argnum=argnum)(x3)


# ---------------------------------------------------------------------------- argument types
@pytest.mark.parametrize("transform", [jt.grad, jt.jacobian, jt.hessian])
def test_integer_argument_is_refused(transform):
    with pytest.raises(TypeError) as info:
        transform(lambda x: np.sum(np.sin(x)))(np.arange(3))
    assert "argument 0" in str(info.value) and "int" in str(info.value)


def test_boolean_argument_is_refused():
    with pytest.raises(TypeError, match="bool"):
        jt.grad(lambda x: np.sum(np.sin(x)))(np.ones(3, dtype=bool))


@pytest.mark.parametrize("position", [0, 1])
def test_complex_argument_is_refused(position):
    args = [x3, x3]
    args[position] = x3 + 1j
    with pytest.raises(TypeError) as info:
        jt.grad(lambda x, y: np.sum(np.sin(x) * y))(*args)
    assert f"argument {position}" in str(info.value) and "complex" in str(info.value)


@pytest.mark.parametrize("bad, word", [("abc", "<U3"), (np.array([object()]), "object")])
def test_non_numeric_argument_is_refused(bad, word):
    with pytest.raises(TypeError, match=word):
        jt.grad(lambda x: np.sum(np.sin(x)))(bad)


def test_vjp_and_jvp_refuse_integer_and_complex_arguments():
    with pytest.raises(TypeError, match="int"):
        jt.vjp(lambda x: np.sin(x), np.arange(3))
    with pytest.raises(TypeError, match="complex"):
        jt.jvp(lambda x: np.sin(x), (x3,), (x3 + 1j,))


# ---------------------------------------------------------------------------- modes
def _entry_points(mode):
    f = lambda x: np.sum(np.sin(x))  # noqa: E731
    return {
        "grad": lambda: jt.grad(f, mode=mode),
        "jacobian": lambda: jt.jacobian(f, mode=mode),
        "hessian": lambda: jt.hessian(f, mode=mode),
        "vjp": lambda: jt.vjp(f, x3, mode=mode),
        "jvp": lambda: jt.jvp(f, (x3,), (x3,), mode=mode),
        "derivative_expression": lambda: jt.derivative_expression(f, x3, mode=mode),
    }


@pytest.mark.parametrize("entry", list(_entry_points("x")))
@pytest.mark.parametrize("mode", ["sideways", "", "Reverse", None, 3])
def test_unknown_mode_lists_the_valid_ones(entry, mode):
    with pytest.raises(RegistryError) as info:
        _entry_points(mode)[entry]()
    message = str(info.value)
    assert "unknown mode" in message and repr(mode) in message
    for valid in jt.modes():
        assert valid in message


def test_unknown_mode_is_refused_when_the_transformation_is_made():
    """Before any argument is seen: the error points at the call that names the mode."""
    with pytest.raises(RegistryError):
        jt.hessian(lambda x: np.sum(x), mode="newton")


def test_exhaustive_refuses_large_graphs():
    def deep(x):
        for _ in range(9):
            x = np.sin(np.cos(x))
        return np.sum(x)

    with pytest.raises(OrderError) as info:
        jt.jacobian(deep, mode="exhaustive")(x3)
    assert "16" in str(info.value) and "intermediates" in str(info.value)


# ---------------------------------------------------------------------------- other bad calls
def test_derivative_order_must_be_positive():
    for order in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="order must be a positive int"):
            jt.derivative_expression(lambda x: np.sum(np.sin(x)), x3, order=order)


def test_jvp_needs_one_tangent_per_argument_of_its_shape():
    with pytest.raises(ValueError, match="one tangent per argument"):
        jt.jvp(lambda x: np.sin(x), (x3,), ())
    with pytest.raises(ValueError, match=r"tangent 0 has shape \(4,\)"):
        jt.jvp(lambda x: np.sin(x), (x3,), (np.ones(4),))


def test_vjp_cotangent_must_have_the_value_shape():
    _, pullback = jt.vjp(lambda x: np.sin(x), x3)
    with pytest.raises(ValueError, match=r"cotangent has shape \(4,\)"):
        pullback(np.ones(4))
    with pytest.raises(TypeError, match="complex"):
        pullback(x3 + 1j)
