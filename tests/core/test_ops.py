"""The operation table (jacacc.ops): every operation in every representation that carries it.

Each operation's derivative is written once, in jacacc/ops.py; these tests run it
through each builder — plain numbers, the scalar tracer's expressions
(jacacc.rules), the tensor level (jacacc.tensor, first and second derivatives) —
and compare with central differences of the operation's value and with JAX's
derivative of the operation's JAX spelling.  The Iverson and elementwise languages
are checked in tests/core/test_ops_iverson_elementwise.py.
"""

from __future__ import annotations

import importlib
import shutil

import jax_reference
import numpy as np
import pytest

import jacacc.tensor as jt
from jacacc import ops
from jacacc.codegen.cupy_ import CudaPrinter
from jacacc.partials import Apply, Var
from jacacc.tracer import apply_rule, trace

#: operations whose value is the identity or zero: the front ends' plumbing, checked in test_trace
PLUMBING = {"stop_gradient", "tangent_seed", "pos"}
TABLE = [op.name for op in ops.iterate() if op.name not in PLUMBING]


def points(name: str, arity: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Operands inside the operation's domain, away from kinks and poles."""
    n = 5
    if name in ("log", "log2", "log10", "sqrt", "reciprocal", "cbrt", "div"):
        return [rng.uniform(0.3, 2.0, n) * (1 if k == 0 or name != "div" else rng.choice([-1, 1], n))
                for k in range(arity)]
    if name == "pow":
        return [rng.uniform(0.3, 2.0, n), rng.uniform(-2.0, 2.0, n)]
    if name == "arccosh":
        return [rng.uniform(1.2, 3.0, n)]
    if name in ("arcsin", "arccos", "arctanh", "log1p"):
        return [rng.uniform(-0.8, 0.8, n)]
    if name == "where":
        return [rng.choice([0.0, 1.0], n), rng.normal(size=n), rng.normal(size=n)]
    if name in ("maximum", "minimum", "fmax", "fmin", "gt", "ge", "lt", "le", "eq", "ne"):
        a = rng.normal(size=n)
        return [a, a + rng.choice([-1.0, 1.0], n) * rng.uniform(0.2, 1.0, n)]  # no ties
    if name in ("abs", "sign", "relu", "heaviside"):
        return [rng.choice([-1.0, 1.0], n) * rng.uniform(0.2, 1.5, n)]
    return [rng.uniform(-1.5, 1.5, n) for _ in range(arity)]


class NumberBuilder:
    """Values are NumPy arrays: the table's derivatives evaluated at a point."""

    def constant(self, value):
        return np.float64(value)

    def add(self, a, b):
        return a + b

    def multiply(self, a, b):
        return a * b

    def power(self, a, exponent):
        return a**exponent

    def call(self, name, args):
        return ops.get(name).value(*args)


def table_partials(name: str, args: list[np.ndarray]) -> list[np.ndarray]:
    op = ops.get(name)
    out = op.value(*args)
    built = ops.partials(name, NumberBuilder(), args, out, active=[True] * op.arity)
    return [np.zeros_like(args[0]) if p is ops.ZERO else np.broadcast_to(p, args[0].shape) for p in built]


def central_differences(name: str, args: list[np.ndarray], k: int, h: float = 1e-6) -> np.ndarray:
    op = ops.get(name)
    up = [a + h if m == k else a for m, a in enumerate(args)]
    down = [a - h if m == k else a for m, a in enumerate(args)]
    return (op.value(*up) - op.value(*down)) / (2 * h)


@pytest.mark.parametrize("name", TABLE)
def test_derivative_matches_central_differences(name):
    op = ops.get(name)
    args = points(name, op.arity, np.random.default_rng(0))
    for k, partial in enumerate(table_partials(name, args)):
        if name == "where" and k == 0:
            continue  # the condition: piecewise constant, no finite difference across 0/1
        np.testing.assert_allclose(partial, central_differences(name, args, k), rtol=1e-6, atol=1e-8,
                                   err_msg=f"{name}, operand {k}")


def _jax_function(op: ops.Operation):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    if not op.jnp:
        pytest.skip(f"{op.name} has no JAX spelling")
    module, _, attr = op.jnp.rpartition(".")
    module = {"jnp": "jax.numpy"}.get(module, module)
    return jax, getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("name", TABLE)
def test_derivative_matches_jax(name):
    op = ops.get(name)
    jax, f = _jax_function(op)
    args = points(name, op.arity, np.random.default_rng(1))
    mine = table_partials(name, args)
    for k in range(op.arity):
        if name == "where" and k == 0:
            continue
        theirs = jax_reference.jit(jax.vmap(jax.grad(lambda *a, k=k: f(*a).astype(float), argnums=k)))(*args)
        np.testing.assert_allclose(mine[k], theirs, rtol=1e-12, atol=1e-14, err_msg=f"{name}, operand {k}")


@pytest.mark.parametrize("name", ["maximum", "minimum", "abs", "relu", "sign"])
def test_kink_conventions_are_jax_s(name):
    op = ops.get(name)
    jax, f = _jax_function(op)
    args = [np.zeros(1)] * op.arity
    mine = table_partials(name, args)
    for k in range(op.arity):
        theirs = jax.grad(lambda *a, k=k: f(*a)[0], argnums=k)(*args)
        np.testing.assert_array_equal(mine[k], theirs)


@pytest.mark.parametrize("name", TABLE)
def test_scalar_rules_carry_the_table(name):
    """The traced scalar graph of ``name`` has the table's partials on its edges."""
    op = ops.get(name)
    args = points(name, op.arity, np.random.default_rng(2))
    traced = trace(lambda *x: apply_rule(name, *x), op.arity, unpack=True)
    expected = table_partials(name, args)
    for i in range(len(args[0])):
        jac = traced.reference_jacobian([a[i] for a in args])
        np.testing.assert_allclose(jac[0], [p[i] for p in expected], rtol=1e-13, atol=1e-15, err_msg=name)


#: how each operation is reached in NumPy code that jacacc.tensor traces
TENSOR_SPELLING = {"gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal, "eq": np.equal,
                   "ne": np.not_equal, "div": np.divide, "sub": np.subtract, "mul": np.multiply, "add": np.add,
                   "neg": np.negative, "abs": np.abs}


def _tensor_function(name: str):
    if name in TENSOR_SPELLING:
        return TENSOR_SPELLING[name]
    function = getattr(np, name, None)
    if isinstance(function, np.ufunc):
        return function
    if name == "logistic":
        import scipy.special

        return scipy.special.expit
    if name == "erf" or name == "erfc":
        import scipy.special

        return getattr(scipy.special, name)
    if name == "where":
        return np.where
    return None


@pytest.mark.parametrize("name", TABLE)
def test_tensor_level_first_and_second_derivatives_match_jax(name):
    op = ops.get(name)
    g = _tensor_function(name)
    if g is None:
        pytest.skip(f"{name} is reached in jacacc.tensor through another operation")
    jax, f = _jax_function(op)
    jnp = importlib.import_module("jax.numpy")
    args = points(name, op.arity, np.random.default_rng(3))
    # a function of one vector: each operand a shift of it, so Hessians mix operands; where's
    # condition is a constant mask
    x = args[-1]
    shifts = [a - x for a in args]

    def operands(x):
        return [args[0] > 0.5 if name == "where" and k == 0 else x + s for k, s in enumerate(shifts)]

    def ours(x):
        return np.sum(np.tanh(x) * g(*operands(x)))

    def theirs(x):
        return jnp.sum(jnp.tanh(x) * f(*operands(x)).astype(float))

    grad, hessian = jax_reference.jit(jax.grad(theirs)), jax_reference.jit(jax.hessian(theirs))  # one compile each, not one per op
    for mode in ("forward", "reverse", "cross_country"):
        np.testing.assert_allclose(jt.grad(ours, mode=mode)(x), grad(x), rtol=1e-9, atol=1e-12,
                                   err_msg=f"{name} {mode}")
        np.testing.assert_allclose(jt.hessian(ours, mode=mode)(x), hessian(x), rtol=1e-9, atol=1e-11,
                                   err_msg=f"{name} {mode}")


def test_every_operation_prints_as_cuda_and_compiles():
    """One expression using every operation of the table, printed by the CUDA printer from the table's
    spellings and helpers; compiled with nvcc --ptx where nvcc exists."""
    printer = CudaPrinter("float64")
    variables = [Var(f"v{k}") for k in range(3)]
    lines = []
    for op in ops.iterate():
        if op.name in PLUMBING:
            continue
        text = printer.doprint(Apply(op.name, tuple(variables[: op.arity])))
        lines.append(f"    acc += {text};")
    source = "\n".join(["typedef double real;", ops.CUDA_HELPERS,
                        "extern \"C\" __global__ void every_op(const real* x, real* out) {",
                        "    real v0 = x[0], v1 = x[1], v2 = x[2], acc = 0;", *lines, "    out[0] = acc;", "}"])
    assert all(op.cuda for op in ops.iterate())
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: the source is printed, not compiled")
    from jacacc.kernels import cuda_ptx

    assert ".entry every_op" in cuda_ptx(source)


def test_zero_is_one_object_and_falsy():
    assert ops.Zero() is ops.ZERO and not ops.ZERO
    import pickle

    assert pickle.loads(pickle.dumps(ops.ZERO)) is ops.ZERO


def test_unknown_operation_is_refused_by_name():
    with pytest.raises(Exception, match="'floor'"):
        ops.get("floor")


def test_declaring_a_taken_name_is_refused():
    with pytest.raises(Exception, match="already declared"):
        ops.declare("exp", 1, "np.exp", lambda f, x, out: [out])


# under Numba, every operation in one kernel compiles for 10-15 s: exhaustive (make test-extra); make test
# compiles each operation's Numba spelling in tests/core/test_ops_iverson_elementwise.py
@pytest.mark.parametrize("backend, tier", [("numpy", "straight"), ("numpy", "table"),
                                           pytest.param("numba", "straight", marks=pytest.mark.exhaustive),
                                           pytest.param("numba", "table", marks=pytest.mark.exhaustive)])
def test_compiled_kernels_carry_every_operation(backend, tier):
    """One traced function of three inputs applying every operation (operand k is ``x[k] + c``, ``c``
    placing it inside the operation's domain); its compiled kernel's values and Jacobian against the
    table's values and partials, as one straight-line function and as an instruction table (whose
    interpreter carries every operation: jacacc.kernels.tables)."""
    if backend == "numba":
        pytest.importorskip("numba")
    import jacacc

    names = [name for name in TABLE if name != "where"]
    rng = np.random.default_rng(4)
    base = np.array([0.5, 0.7, 0.6])
    shifts = {name: [a[0] - base[k] for k, a in enumerate(points(name, ops.get(name).arity, rng))]
              for name in names}

    def f(x0, x1, x2):
        x = (x0, x1, x2)
        return [apply_rule(name, *(x[k] + c for k, c in enumerate(shifts[name]))) for name in names]

    kernel = jacacc.compile(trace(f, 3, unpack=True), backend=backend, method="forward", mode="vertex",
                            backend_options={"tier": tier})
    assert kernel.tier == tier
    X = base + np.array([[0.0, 0.0, 0.0], [1e-3, -2e-3, 1.5e-3]])  # the sample points and a point beside
    values, J = kernel.values_and_jacobians(X)
    for row, name in enumerate(names):
        op = ops.get(name)
        args = [X[:, k] + c for k, c in enumerate(shifts[name])]
        np.testing.assert_allclose(values[:, row], op.value(*args), rtol=1e-12, err_msg=name)
        for k, partial in enumerate(table_partials(name, args)):
            np.testing.assert_allclose(J[:, row, k], partial, rtol=1e-11, atol=1e-13, err_msg=f"{name} {k}")


def test_templates_call_other_operations_by_their_spelling():
    """A Numba template may call another operation as ``{name}``: every generator resolves it to its
    own spelling of that operation (the kernel layer's helpers where it prints them)."""
    from jacacc import kernels

    assert ops.spelling("logistic", "numba") == "(1.0 / (1.0 + np.exp(-({0}))))"
    assert ops.spellings("numba")["logistic"] == ops.spelling("logistic", "numba")
    assert kernels.spelling("logistic", "numba", vector_math=True) == "(1.0 / (1.0 + _exp(-({0}))))"
    assert kernels.call_text(kernels.spelling("relu", "numba"), ["x"]) == "(x if x > 0.0 or x != x else 0.0)"
    for name in ops.names():  # every reference names an operation of the table
        for backend in ("numpy", "numba", "cuda", "torch"):
            if getattr(ops.get(name), backend):
                assert "{" not in ops.spelling(name, backend).replace("{0}", "").replace("{1}", "").replace(
                    "{2}", ""), (name, backend)
    with pytest.raises(ValueError, match="unknown backend"):
        ops.spelling("exp", "fortran")


def test_cost_flags_of_the_table():
    """What the kernel layer reads of an operation's cost: the sets the code generators and the fusion
    pass used to keep as lists of their own."""
    from jacacc import kernels
    from jacacc.elementwise.derive import POINTWISE_FUNCTIONS
    from jacacc.tensor import fusion

    flagged = {attr: {op.name for op in ops.iterate() if getattr(op, attr)}
               for attr in ("costly", "vector_math", "slow_in_kernels")}
    assert flagged["vector_math"] <= flagged["costly"] and flagged["slow_in_kernels"] <= flagged["costly"]
    assert {op.name: op.vector_math for op in ops.iterate() if op.vector_math} == {
        "exp": "small", "log": "small", "logaddexp": "small", "tanh": "small", "erf": "large"}
    assert kernels.VECTOR_MATH == {"exp", "log", "logaddexp", "tanh", "erf"}
    assert kernels.SMALL_VECTOR_MATH == {"exp", "log", "logaddexp", "tanh"}
    # read as their argument by the tensor evaluator: the value passes unchanged
    assert {op.name for op in ops.iterate() if op.identity} == {"pos", "stop_gradient"}
    x = np.array([-1.5, 0.0, 2.0])
    for op in ops.iterate():
        if op.identity:
            np.testing.assert_array_equal(op.function(x), x)
    # measured by experiments/fusion_threshold.py: left out of fused regions
    assert fusion.SLOW_IN_KERNELS == kernels.slow_in_kernels() == {
        "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "cbrt", "cosh", "erf", "erfc", "exp2",
        "expm1", "log10", "log1p", "log2", "sinh", "tan"}
    # tabulated per argument element by elementwise derivatives: costly and defined on all reals
    assert POINTWISE_FUNCTIONS == {"exp", "exp2", "expm1", "tanh", "sin", "cos", "sinh", "cosh", "arctan",
                                   "arcsinh", "erf", "erfc", "logistic"}
    # recomputed per broadcast element inside a fused region rather than materialized: the cheap ones
    from jacacc.elementwise.parse import FUNCTIONS

    assert {name for name in FUNCTIONS if not ops.get(name).costly} == {
        "abs", "sign", "square", "relu", "heaviside", "reciprocal"}
