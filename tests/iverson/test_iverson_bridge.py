"""The bridge from Einstein notation to paper 001's tensor language (jacacc.iverson.bridge).

``einsum`` is checked against ``np.einsum`` on many subscripts and on its
errors; ``from_tensor`` on traced functions, on hand-built nodes of every kind
and on derivative expressions (gradients and Hessians from jacacc.tensor):
the translated program, run by iverson's reference interpreter, must give the
numbers jacacc.tensor's own evaluator gives.  The interpreter is slow, so
every size here is at most 4.
"""

from __future__ import annotations

import numpy as np
import pytest

import jacacc.iverson as iv
import jacacc.tensor as jt
from jacacc.errors import UnsupportedOperationError
from jacacc.iverson.bridge import Translation, einsum, from_tensor, print_tensor
from jacacc.iverson.syntax import Gen, Let, Mul, Sum, walk
from jacacc.tensor import expr as E
from jacacc.tensor.evaluate import Program
from jacacc.tensor.expr import nodes_of

TOL = {"rtol": 1e-10, "atol": 1e-12}


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _tensor_value(node: E.Tensor, **arrays: np.ndarray) -> np.ndarray:
    """jacacc.tensor's own evaluation of ``node`` with its ``var`` nodes bound by name."""
    inputs = [n for n in nodes_of([node]) if n.kind == "var"]
    return Program([node], inputs)(*(arrays[n.param] for n in inputs))[0]


def _lets(e: iv.Expr) -> list[str]:
    return [n.name for n in walk(e) if isinstance(n, Let)]


# ---------------------------------------------------------------------------- einsum
EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),  # matmul
    ("ij,jk", [(2, 3), (3, 2)]),  # implicit output: ik
    ("i,j->ij", [(3,), (2,)]),  # outer
    ("ij,kl->ijkl", [(2, 1), (3, 2)]),  # outer of matrices
    ("ii->", [(3, 3)]),  # trace
    ("ii->i", [(4, 4)]),  # diagonal
    ("ii", [(3, 3)]),  # implicit trace
    ("iij->j", [(2, 2, 3)]),  # diagonal, then summed
    ("ij->ji", [(2, 3)]),  # transpose
    ("ijk->kij", [(2, 3, 4)]),  # axis permutation
    ("ij->", [(2, 3)]),  # total sum
    ("ij->i", [(2, 3)]),  # row sums
    ("ij->j", [(2, 3)]),  # column sums
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),  # batched matmul
    ("bij,bj->bi", [(3, 2, 4), (3, 4)]),  # batched matvec
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 4)]),  # three operands
    ("ij,j,j->i", [(3, 2), (2,), (2,)]),  # a quadratic form's pieces
    ("i,i->", [(4,)] * 2),  # dot product, scalar output
    ("ij,ij->", [(2, 3)] * 2),  # Frobenius product
    ("i,i,i->i", [(3,)] * 3),  # Hadamard product of three
    ("ij,jk,ki->", [(2, 3), (3, 2), (2, 2)]),  # trace of a product
    ("ii,i->i", [(3, 3), (3,)]),  # diagonal times a vector
    (",i->i", [(), (3,)]),  # a scalar operand
    (",->", [(), ()]),  # two scalars
    ("i->i", [(3,)]),  # identity
]


@pytest.mark.parametrize(("subscripts", "shapes"), EINSUMS, ids=[s for s, _ in EINSUMS])
def test_einsum_matches_numpy(subscripts, shapes):
    rng = _rng(len(subscripts))
    names = [f"A{k}" for k in range(len(shapes))]
    arrays = {n: rng.normal(size=s) for n, s in zip(names, shapes, strict=True)}
    program = einsum(subscripts, *(iv.var(n, s) for n, s in zip(names, shapes, strict=True)))
    expected = np.einsum(subscripts, *arrays.values())
    assert program.shape == expected.shape
    np.testing.assert_allclose(iv.evaluate(program, **arrays), expected, **TOL)


def test_einsum_writes_gens_outside_sums_in_canonical_names():
    A, B = iv.var("A", (2, 3)), iv.var("B", (3, 4))
    assert str(einsum("ij,jk->ik", A, B)) == "⊞_{i<2} ⊞_{j<4} Σ_{k<3} A[i, k] · B[k, j]"
    assert str(einsum("pq,qr->pr", A, B)) == str(einsum("ij,jk->ik", A, B))  # labels do not matter
    e = einsum("ij,jk->ik", A, B)
    assert isinstance(e, Gen) and isinstance(e.body, Gen) and isinstance(e.body.body, Sum)
    assert str(einsum("ii->", iv.var("S", (3, 3)))) == "Σ_{i<3} S[i, i]"
    assert str(einsum("i,j->ij", iv.var("x", (2,)), iv.var("y", (3,)))) == "⊞_{i<2} ⊞_{j<3} x[i] · y[j]"


def test_einsum_of_scalars_and_numbers():
    s = iv.var("s", ())
    assert str(einsum(",->", s, s)) == "s · s"
    x = iv.var("x", (3,))
    e = einsum(",i->i", 2.0, x)
    np.testing.assert_allclose(iv.evaluate(e, x=np.arange(3.0)), [0.0, 2.0, 4.0])


def test_einsum_operands_may_be_expressions():
    x, y = iv.var("x", (3,)), iv.var("y", (3,))
    i = iv.index("i")
    ex = iv.gen(i, 3, iv.exp(x[i]))
    e = einsum("i,i->", ex, y)
    xv, yv = _rng(1).normal(size=3), _rng(2).normal(size=3)
    np.testing.assert_allclose(iv.evaluate(e, x=xv, y=yv), np.exp(xv) @ yv, **TOL)


def test_einsum_inside_a_binder_does_not_capture_its_index():
    # row i of A dotted with x, inside a gen over i: the contraction must not be named i
    A, x = iv.var("A", (3, 4)), iv.var("x", (4,))
    i = iv.index("i")
    e = iv.gen(i, 3, einsum("j,j->", A[i], x))
    assert str(e) == "⊞_{i<3} Σ_{j<4} A[i, j] · x[j]"
    a, v = _rng(3).normal(size=(3, 4)), _rng(4).normal(size=4)
    np.testing.assert_allclose(iv.evaluate(e, A=a, x=v), a @ v, **TOL)


def test_einsum_programs_are_differentiable_by_iverson():
    A, x = iv.var("A", (3, 3)), iv.var("x", (3,))
    quad = einsum("i,ij,j->", x, A, x)
    a, v = _rng(5).normal(size=(3, 3)), _rng(6).normal(size=3)
    np.testing.assert_allclose(iv.evaluate(iv.grad(quad, x), A=a, x=v), (a + a.T) @ v, **TOL)


A23, B34, X3 = iv.var("A", (2, 3)), iv.var("B", (3, 4)), iv.var("x", (3,))
EINSUM_ERRORS = [
    (("ij,jk->ik", A23), "names 2 operand"),
    (("ij->ij", A23, B34), "names 1 operand"),
    (("ijk->i", A23), "operand 0 has 2 axes"),
    (("ij,jk->ik", A23, X3), "operand 1 has 1 axes"),
    (("ij,ij->", A23, B34), "index 'i' has extent 2 and 3"),
    (("ij->ii", iv.var("S", (2, 2))), "output index 'i' appears more than once"),
    (("ij->k", A23), "output index 'k' is not an index of any operand"),
    (("...j->j", A23), "broadcasting"),
    (("i1->i", A23), "'1' is not a letter"),
    (("ij->i->j", A23), "malformed"),
    ((3, A23), "must be a string"),
    (("ij->",), "at least one operand"),
    (("ij,i->i", iv.pair(A23, A23), X3), "is a pair"),
]


@pytest.mark.parametrize(("call", "message"), EINSUM_ERRORS, ids=[m for _, m in EINSUM_ERRORS])
def test_einsum_refuses_malformed_calls(call, message):
    with pytest.raises(iv.IvTypeError, match=message.replace("(", r"\(").replace(".", r"\.")):
        einsum(*call)


def test_einsum_refuses_non_expression_operands():
    with pytest.raises(iv.IvTypeError, match="expected an expression"):
        einsum("i->", "x")


# ---------------------------------------------------------------------------- traced functions
def logistic(w, X):
    return np.sum(np.log1p(np.exp(X @ w)))


def two_layer(W1, W2, X):
    return np.sum(np.tanh(np.tanh(X @ W1) @ W2))


def factorization(U, V, R):
    return np.sum((U @ V.T - R) ** 2)


def every_unary(x):
    y = np.exp(x) + np.log(x) + np.log1p(x) + np.sqrt(x) + np.sin(x) + np.cos(x) + np.tanh(x)
    z = np.abs(x - 1.5) + np.maximum(x - 1.0, 0.0) + 1.0 / x + x**3 + x**-2 + x**1.5 + (x + 2.0)
    return np.sum(y * z)


def constants(x):
    M = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    return np.sum(np.tanh(M @ x) * np.array([2.0, -3.0])) + np.trace(np.diag(x) @ np.outer(x, x)) - 2.5 * np.sum(x)


def broadcasting(x, A):
    return np.sum(np.exp(A + x) / (1.0 + x))


CASES = {
    "logistic": (logistic, lambda r: [r.normal(size=3), r.normal(size=(4, 3))]),
    "two_layer": (two_layer, lambda r: [r.normal(size=(3, 4)), r.normal(size=(4, 2)), r.normal(size=(3, 3))]),
    "factorization": (factorization, lambda r: [r.normal(size=(3, 2)), r.normal(size=(4, 2)), r.normal(size=(3, 4))]),
    "every_unary": (every_unary, lambda r: [r.uniform(0.5, 2.5, size=4)]),
    "constants": (constants, lambda r: [r.normal(size=3)]),
    "broadcasting": (broadcasting, lambda r: [r.uniform(0.5, 1.0, size=3), r.normal(size=(2, 3))]),
}


def _case(name: str, seed: int = 0):
    f, make = CASES[name]
    args = make(_rng(seed))
    names = f.__code__.co_varnames[: len(args)]
    return f, args, dict(zip(names, args, strict=True))


@pytest.mark.parametrize("name", CASES)
def test_traced_functions_evaluate_to_the_same_numbers(name):
    f, args, arrays = _case(name)
    traced = jt.trace(f, args)
    t = from_tensor(traced.outputs[0])
    assert isinstance(t, Translation)
    np.testing.assert_allclose(t.evaluate(**arrays), f(*args), **TOL)
    np.testing.assert_allclose(t.evaluate(**arrays), _tensor_value(traced.outputs[0], **arrays), **TOL)


@pytest.mark.parametrize("name", CASES)
def test_translations_print_in_index_notation(name):
    f, args, _ = _case(name)
    root = jt.trace(f, args).outputs[0]
    text = print_tensor(root)
    assert "Σ" in text  # every case sums to a scalar
    assert text == str(from_tensor(root).expr)


def test_logistic_loss_prints_fused():
    _, args, _ = _case("logistic")
    root = jt.trace(logistic, args).outputs[0]
    assert print_tensor(root) == "Σ_{i<4} log1p(exp(Σ_{j<3} X[i, j] · w[j]))"


def test_factorization_shares_the_residual_once():
    _, args, _ = _case("factorization")
    t = from_tensor(jt.trace(factorization, args).outputs[0])
    assert str(t) == ("let t0 = ⊞_{i<3} ⊞_{j<4} (Σ_{k<2} U[i, k] · V[j, k]) - R[i, j] in\n"
                      "Σ_{i<3} Σ_{j<4} t0[i, j] · t0[i, j]")


def test_translated_programs_differentiate_like_jacacc_tensor():
    # paper 001's derivative of the translation = paper 002's derivative of the expression
    for name, wrt in (("logistic", "w"), ("two_layer", "W1"), ("factorization", "V"), ("every_unary", "x"),
                      ("constants", "x"), ("broadcasting", "A")):
        f, args, arrays = _case(name, seed=7)
        t = from_tensor(jt.trace(f, args))
        g = iv.grad(t.expr, iv.var(wrt, arrays[wrt].shape))
        argnum = list(arrays).index(wrt)
        np.testing.assert_allclose(iv.evaluate(g, **arrays, **t.constants), jt.grad(f, argnum=argnum)(*args),
                                   **TOL)


# ---------------------------------------------------------------------------- node kinds
x3 = E.var("x", (3,))
UNARIES = [
    ("exp", None, "exp(x[i])"), ("log", None, "log(x[i])"), ("log1p", None, "log1p(x[i])"),
    ("sqrt", None, "sqrt(x[i])"), ("sin", None, "sin(x[i])"), ("cos", None, "cos(x[i])"),
    ("tanh", None, "tanh(x[i])"), ("relu", None, "relu(x[i])"), ("reciprocal", None, "1 / x[i]"),
    ("abs", None, "abs(x[i])"), ("heaviside", None, "[x[i] > 0]"), ("arctan", None, "arctan(x[i])"),
    ("sign", None, "[x[i] > 0] - [x[i] < 0]"), ("pow", 2.0, "x[i] · x[i]"), ("pow", 3.0, "x[i] · x[i] · x[i]"),
    ("pow", -1.0, "1 / x[i]"), ("pow", -2.0, "1 / (x[i] · x[i])"), ("pow", 0.5, "exp(0.5 · log(x[i]))"),
    ("pow", -1.5, "exp(-1.5 · log(x[i]))"), ("pow", 20.0, None), ("shift", 2.5, "x[i] + 2.5"),
    ("shift", -1.0, "x[i] + -1"),
]


@pytest.mark.parametrize(("name", "p", "text"), UNARIES, ids=[f"{n}[{p}]" for n, p, _ in UNARIES])
def test_every_unary_function(name, p, text):
    node = E.unary(name, x3, p)
    t = from_tensor(node)
    if text is not None:
        assert str(t.expr) == f"⊞_{{i<3}} {text}"
    for x in (np.array([0.5, 1.0, 2.0]), np.array([-1.5, 0.0, 0.75])):
        if name in ("log", "log1p", "sqrt") or (name == "pow" and not float(p).is_integer()):
            x = np.abs(x) + 0.25
        if name in ("reciprocal",) or (name == "pow" and p < 0):
            x = np.where(x == 0, 0.5, x)
        np.testing.assert_allclose(t.evaluate(x=x), _tensor_value(node, x=x), **TOL)


def test_a_large_integer_power_squares_scalar_lets():
    t = from_tensor(E.unary("pow", x3, 41.0))
    assert str(t.expr) == ("⊞_{i<3} let s0 = x[i] · x[i] · x[i] · x[i] · x[i] · x[i] · x[i] · x[i] · x[i] · x[i] in\n"
                           "let s1 = s0 · s0 in\ns1 · s1 · x[i]")
    assert sum(isinstance(n, Mul) for n in walk(t.expr)) == 9 + 1 + 2  # not 40
    x = np.array([1.01, -0.99, 1.02])
    np.testing.assert_allclose(t.evaluate(x=x), x**41, **TOL)
    np.testing.assert_allclose(iv.evaluate(iv.grad(iv.sum("i", 3, t.expr[iv.index("i")]), iv.var("x", (3,))), x=x),
                               41 * x**40, **TOL)
    huge = from_tensor(E.unary("pow", x3, -1e6))  # a million factors would not do
    np.testing.assert_allclose(huge.evaluate(x=np.array([1.0, -1.0, 1.0 + 1e-7])), [1.0, 1.0, (1.0 + 1e-7) ** -1e6],
                               rtol=1e-9)


def test_power_zero_and_one():
    assert E.unary("pow", x3, 0.0).kind == "const"  # jacacc.tensor folds these itself
    np.testing.assert_allclose(from_tensor(E.unary("pow", x3, 0.0)).evaluate(), np.ones(3))
    assert str(from_tensor(E.unary("pow", x3, 1.0)).expr) == "⊞_{i<3} x[i]"


def test_symbolic_constants_become_brackets_and_numbers():
    d = E.einsum("i,ij->ij", x3, E.delta(3))
    assert print_tensor(d) == "⊞_{i<3} ⊞_{j<3} [i = j]·x[i]"
    assert print_tensor(E.delta(2)) == "⊞_{i<2} ⊞_{j<2} [i = j]"
    assert print_tensor(E.einsum("ii->", E.delta(4))) == "4"  # jacacc.tensor folds δ's trace to a number
    assert print_tensor(E.ones((2,))) == "⊞_{i<2} 1"
    assert print_tensor(E.zeros((2, 2))) == "⊞_{i<2} ⊞_{j<2} 0"
    b = E.einsum("i,j->ij", x3, E.ones((2,)))
    assert print_tensor(b) == "⊞_{i<3} ⊞_{j<2} x[i]"
    assert from_tensor(d).constants == {} and from_tensor(b).constants == {}
    x = np.array([1.0, -2.0, 3.0])
    for node in (d, b, E.einsum("ij,jk->ik", d, E.delta(3))):
        np.testing.assert_allclose(from_tensor(node).evaluate(x=x), _tensor_value(node, x=x), **TOL)


def test_array_constants_become_named_inputs():
    M = np.arange(6.0).reshape(2, 3)
    node = E.einsum("ij,j->i", E.const(M), x3)
    t = from_tensor(node)
    assert list(t.constants) == ["c0"] and np.array_equal(t.constants["c0"], M)
    assert str(t.expr) == "⊞_{i<2} Σ_{j<3} c0[i, j] · x[j]"
    assert "with c0 : R^(2, 3) a constant" in str(t)
    np.testing.assert_allclose(t.evaluate(x=np.ones(3)), M @ np.ones(3), **TOL)
    # a generated name never clashes with an argument of that name
    clash = E.einsum("ij,j->i", E.const(M), E.var("c0", (3,)))
    assert list(from_tensor(clash).constants) == ["c1"]
    # scalars are written inline, unless iverson cannot write them
    assert print_tensor(E.scale(2.5, x3)) == "⊞_{i<3} 2.5 · x[i]"
    inf = from_tensor(E.einsum(",i->i", E.const(np.inf), x3))
    assert list(inf.constants) == ["c0"] and inf.constants["c0"].shape == ()
    np.testing.assert_array_equal(inf.evaluate(x=np.array([1.0, 2.0, 3.0])), [np.inf] * 3)


def test_constant_roots():
    assert str(from_tensor(E.const(3.0)).expr) == "3"
    assert from_tensor(E.const(3.0)).evaluate() == 3.0


def test_shared_nodes_are_one_let():
    e = E.unary("exp", x3)
    node = E.add(E.einsum("i,i->i", e, e), E.unary("sin", e))
    t = from_tensor(node)
    assert _lets(t.expr) == ["t0"]
    assert str(t.expr) == "let t0 = ⊞_{i<3} exp(x[i]) in\n⊞_{i<3} t0[i] · t0[i] + sin(t0[i])"
    x = np.array([0.1, -0.2, 0.3])
    np.testing.assert_allclose(t.evaluate(x=x), np.exp(2 * x) + np.sin(np.exp(x)), **TOL)


def test_lets_follow_the_dag_order_and_avoid_argument_names():
    t0 = E.var("t0", (3,))
    a = E.unary("exp", t0)
    b = E.add(a, E.unary("sin", a))
    node = E.einsum("i,i->", b, b)
    t = from_tensor(node)
    assert _lets(t.expr) == ["t1", "t2"]  # t0 is the argument; a before b
    x = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(t.evaluate(t0=x), _tensor_value(node, t0=x), **TOL)


def test_relabellings_are_reads_not_lets():
    # Vᵀ used twice is not computed: it is V read with swapped indices
    V = E.var("V", (3, 2))
    Vt = E.einsum("ij->ji", V)
    node = E.einsum("ij,kj->ik", E.unary("exp", Vt), Vt)
    t = from_tensor(node)
    assert _lets(t.expr) == []
    assert str(t.expr) == "⊞_{i<2} ⊞_{j<2} Σ_{k<3} exp(V[k, i]) · V[k, j]"
    # ... but a computed tensor read twice through a relabelling is shared
    S = E.unary("sin", V)
    node2 = E.einsum("ij,ji->", E.einsum("ij->ji", S), S)
    assert _lets(from_tensor(node2).expr) == ["t0"]
    v = _rng(8).normal(size=(3, 2))
    for n in (node, node2):
        np.testing.assert_allclose(from_tensor(n).evaluate(V=v), _tensor_value(n, V=v), **TOL)


def test_a_formula_that_reads_its_argument_twice_shares_it():
    node = E.unary("sign", E.einsum("ij,j->i", E.var("A", (2, 3)), x3))
    t = from_tensor(node)
    assert str(t.expr) == "let t0 = ⊞_{i<2} Σ_{j<3} A[i, j] · x[j] in\n⊞_{i<2} [t0[i] > 0] - [t0[i] < 0]"
    # a leaf is read twice as it is
    assert _lets(from_tensor(E.unary("sign", x3)).expr) == []


def test_translations_are_checked_and_costed_by_iverson():
    _, args, _ = _case("two_layer")
    t = from_tensor(jt.trace(two_layer, args))
    assert iv.check(t.expr) == {"X": (3, 3), "W1": (3, 4), "W2": (4, 2)}
    counts = iv.cost(t.expr)
    assert counts["nonlinear"] == 3 * 2 + 3 * 2 * 4  # the inner tanh, fused, is recomputed per output entry


def test_from_tensor_takes_traced_functions_and_derivatives():
    _, args, arrays = _case("logistic")
    traced = jt.trace(logistic, args)
    assert from_tensor(traced).expr.key == from_tensor(traced.outputs[0]).expr.key
    d = jt.derivative_expression(logistic, *args, order=1)
    assert from_tensor(d).expr.key == from_tensor(d.expression).expr.key
    with pytest.raises(TypeError, match="takes a jacacc.tensor expression node"):
        from_tensor(np.ones(3))


def test_operator_nodes_are_refused_by_name():
    from jacacc import linalg

    A = np.array([[4.0, 1.0], [1.0, 3.0]])
    for f, name in ((lambda A: np.sum(linalg.potrf(A)), "potrf"),
                    (lambda A: linalg.sumlogdiag(linalg.potrf(A)), "potrf|sumlogdiag")):
        root = jt.trace(f, [A]).outputs[0]
        with pytest.raises(UnsupportedOperationError, match=f"the operator ({name})"):
            from_tensor(root)
        with pytest.raises(UnsupportedOperationError):
            print_tensor(root)


# ---------------------------------------------------------------------------- derivative expressions
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("order", [1, 2])
def test_derivative_expressions_evaluate_to_the_same_numbers(name, order):
    f, args, arrays = _case(name, seed=order)
    d = jt.derivative_expression(f, *args, order=order)
    t = from_tensor(d.expression)
    assert "⊞" in str(t.expr)  # a derivative of a scalar function is a tensor
    np.testing.assert_allclose(t.evaluate(**arrays), d.evaluate(*args), **TOL)


@pytest.mark.parametrize("mode", ["forward", "reverse", "cross_country"])
def test_derivatives_in_every_mode(mode):
    f, args, arrays = _case("two_layer", seed=3)
    for argnum in range(2):
        d = jt.derivative_expression(f, *args, argnum=argnum, order=2 if argnum == 1 else 1, mode=mode)
        np.testing.assert_allclose(from_tensor(d).evaluate(**arrays), d.evaluate(*args), **TOL)


def test_piecewise_derivatives_translate_to_data_brackets():
    f = lambda x: np.sum(np.abs(np.sin(x)) * np.maximum(x, 0.0))  # noqa: E731
    x = np.array([-0.5, 0.25, 1.5])
    d = jt.derivative_expression(f, x, order=2)
    t = from_tensor(d)
    assert "[x[i] > 0]" in str(t.expr) and "[i = j]" in str(t.expr)
    np.testing.assert_allclose(t.evaluate(x=x), d.evaluate(x), **TOL)
