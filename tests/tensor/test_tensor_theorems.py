"""Theorems 5-10 of paper 002 (Laue, Mitterreiter, Giesen, "A simple and efficient tensor
calculus", AAAI 2020), each checked on its own.

Each test builds a small function with exactly the node of the theorem — a generic
multiplication ``C = A *(s1,s2,s3) B``, a general unary function ``C = f(A)`` or an
elementwise one — on top of random linear maps: upstream ``A = P *(s1s4,s4,s1) x``
for the forward theorems (so ``Ȧ = P`` has the index set ``s1s4`` of the paper) and
downstream ``y = D *(s4s3,s3,s4) C`` for the reverse ones (so the adjoint ``C̄`` is
``D``).  jacacc's derivative in forward (resp. reverse) mode must equal the theorem's
right-hand side evaluated directly with ``np.einsum``:

* Theorem 5: ``Ċ = B *(s2,s1s4,s3s4) Ȧ + A *(s1,s2s4,s3s4) Ḃ``
* Theorem 6: ``Ċ = f'(A) *(s3s1,s1s4,s3s4) Ȧ``
* Theorem 7: ``Ċ = f'(A) *(s1,s1s4,s1s4) Ȧ``
* Theorem 8: ``Ā = C̄ *(s4s3,s2,s4s1) B`` and ``B̄ = C̄ *(s4s3,s1,s4s2) A``
* Theorem 9: ``Ā = C̄ *(s4s3,s3s1,s4s1) f'(A)``
* Theorem 10: ``Ā = C̄ *(s4s1,s1,s4s1) f'(A)``

jacacc has no general unary functions of its own; Theorems 6 and 9 register one (a
softmax, a matrix square, column norms) through :func:`jacacc.tensor.graph.register_partial`
and build the node directly in the expression DAG.  Their ``f'`` in the formula comes
from ``jax.jacfwd``, so the registered rule is checked too.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import jacacc.tensor as jt
from jacacc.tensor import expr as E
from jacacc.tensor import graph as G
from jacacc.tensor.api import jacobian_expression
from jacacc.tensor.evaluate import Program
from jacacc.tensor.factor import Factor

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

TOL = {"rtol": 1e-10, "atol": 1e-12}
SIZES = {"i": 2, "j": 3, "k": 4, "l": 2, "b": 2}
S4_IN = "XY"  # index set of the differentiated input x (forward theorems): shape (2, 3)
S4_OUT = "UV"  # index set of the output y (reverse theorems): shape (3, 2)
SIZES.update({"X": 2, "Y": 3, "U": 3, "V": 2})

# (s1, s2, s3) of C = A *(s1,s2,s3) B: products of every kind
PRODUCTS = [
    ("ij", "jk", "ik"),  # matrix product
    ("ij", "ij", "ij"),  # elementwise
    ("i", "j", "ij"),  # outer
    ("ij", "ij", ""),  # inner (Frobenius)
    ("ij", "j", "i"),  # matrix-vector
    ("i", "ij", "j"),  # vector-matrix
    ("bij", "bjk", "bik"),  # batched matrix product
    ("ijk", "jl", "lik"),  # contraction with a permuted result
    ("ij", "jk", "kji"),  # no summation, three-index result
    ("ij", "k", "ik"),  # an index of A summed alone (its adjoint broadcasts along it)
]


def shape(labels: str) -> tuple[int, ...]:
    return tuple(SIZES[c] for c in labels)


def einsum(subscripts: str, *operands):
    """``np.einsum`` that also broadcasts: an output index no operand has is a ones axis."""
    lhs, out = subscripts.split("->")
    have = set(lhs)
    missing = "".join(c for c in out if c not in have)
    ones = [np.ones(SIZES[c]) for c in missing]
    return np.einsum(",".join([lhs, *missing]) + "->" + out if missing else subscripts, *operands, *ones)


def product_id(p):
    return f"{p[0]},{p[1]}->{p[2]}"


@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


# ---------------------------------------------------------------------------- Theorem 5
@pytest.mark.parametrize("s", PRODUCTS, ids=product_id)
def test_theorem_5_forward_multiplication(s, rng):
    s1, s2, s3 = s

    def f(x, P, Q):  # A = P·x, B = Q·x, C = A *(s1,s2,s3) B
        A = np.einsum(f"{s1}{S4_IN},{S4_IN}->{s1}", P, x)
        B = np.einsum(f"{s2}{S4_IN},{S4_IN}->{s2}", Q, x)
        return np.einsum(f"{s1},{s2}->{s3}", A, B)

    x = rng.normal(size=shape(S4_IN))
    P, Q = rng.normal(size=shape(s1 + S4_IN)), rng.normal(size=shape(s2 + S4_IN))
    A, B = einsum(f"{s1}{S4_IN},{S4_IN}->{s1}", P, x), einsum(f"{s2}{S4_IN},{S4_IN}->{s2}", Q, x)
    A_dot, B_dot = P, Q
    theorem = (einsum(f"{s2},{s1}{S4_IN}->{s3}{S4_IN}", B, A_dot)
               + einsum(f"{s1},{s2}{S4_IN}->{s3}{S4_IN}", A, B_dot))
    got = jt.jacobian(f, argnum=0, mode="forward")(x, P, Q)
    np.testing.assert_allclose(got, theorem, **TOL)


@pytest.mark.parametrize("s", PRODUCTS, ids=product_id)
def test_theorem_5_pushforward_of_one_tangent(s, rng):
    """The same with s4 = ∅: jvp of ``C = A *(s1,s2,s3) B`` with tangents ``Ȧ``, ``Ḃ``."""
    s1, s2, s3 = s
    A, B = rng.normal(size=shape(s1)), rng.normal(size=shape(s2))
    A_dot, B_dot = rng.normal(size=shape(s1)), rng.normal(size=shape(s2))
    value, C_dot = jt.jvp(lambda A, B: np.einsum(f"{s1},{s2}->{s3}", A, B), (A, B), (A_dot, B_dot))
    np.testing.assert_allclose(value, einsum(f"{s1},{s2}->{s3}", A, B), **TOL)
    theorem = einsum(f"{s2},{s1}->{s3}", B, A_dot) + einsum(f"{s1},{s2}->{s3}", A, B_dot)
    np.testing.assert_allclose(C_dot, theorem, **TOL)


# ---------------------------------------------------------------------------- Theorem 8
@pytest.mark.parametrize("s", PRODUCTS, ids=product_id)
def test_theorem_8_reverse_multiplication(s, rng):
    s1, s2, s3 = s

    def f(A, B, D):  # y = D *(s4s3,s3,s4) (A *(s1,s2,s3) B)
        return np.einsum(f"{S4_OUT}{s3},{s3}->{S4_OUT}", D, np.einsum(f"{s1},{s2}->{s3}", A, B))

    A, B = rng.normal(size=shape(s1)), rng.normal(size=shape(s2))
    D = rng.normal(size=shape(S4_OUT + s3))
    C_bar = D  # ∂y/∂C
    A_bar = einsum(f"{S4_OUT}{s3},{s2}->{S4_OUT}{s1}", C_bar, B)
    B_bar = einsum(f"{S4_OUT}{s3},{s1}->{S4_OUT}{s2}", C_bar, A)
    np.testing.assert_allclose(jt.jacobian(f, argnum=0, mode="reverse")(A, B, D), A_bar, **TOL)
    np.testing.assert_allclose(jt.jacobian(f, argnum=1, mode="reverse")(A, B, D), B_bar, **TOL)


@pytest.mark.parametrize("s", PRODUCTS, ids=product_id)
def test_theorem_8_pullback_of_one_cotangent(s, rng):
    """The same with s4 = ∅: vjp of ``C = A *(s1,s2,s3) B`` with a cotangent ``C̄``."""
    s1, s2, s3 = s
    A, B = rng.normal(size=shape(s1)), rng.normal(size=shape(s2))
    C_bar = rng.normal(size=shape(s3))
    _, pullback = jt.vjp(lambda A, B: np.einsum(f"{s1},{s2}->{s3}", A, B), A, B)
    A_bar, B_bar = pullback(C_bar)
    np.testing.assert_allclose(A_bar, einsum(f"{s3},{s2}->{s1}", C_bar, B), **TOL)
    np.testing.assert_allclose(B_bar, einsum(f"{s3},{s1}->{s2}", C_bar, A), **TOL)


# ---------------------------------------------------------------------------- elementwise: Theorems 7 and 10
# name -> (function of the array module, its derivative by hand, whether it needs a positive argument)
ELEMENTWISE = {
    "exp": (lambda xp, a: xp.exp(a), lambda a: np.exp(a), False),
    "log": (lambda xp, a: xp.log(a), lambda a: 1 / a, True),
    "log1p": (lambda xp, a: xp.log1p(a), lambda a: 1 / (1 + a), True),
    "sqrt": (lambda xp, a: xp.sqrt(a), lambda a: 0.5 / np.sqrt(a), True),
    "sin": (lambda xp, a: xp.sin(a), lambda a: np.cos(a), False),
    "cos": (lambda xp, a: xp.cos(a), lambda a: -np.sin(a), False),
    "tanh": (lambda xp, a: xp.tanh(a), lambda a: 1 - np.tanh(a) ** 2, False),
    "abs": (lambda xp, a: xp.abs(a), lambda a: np.sign(a), False),
    "relu": (lambda xp, a: xp.maximum(a, 0), lambda a: (a > 0).astype(float), False),
    "reciprocal": (lambda xp, a: 1.0 / a, lambda a: -1 / a**2, True),
    "cube": (lambda xp, a: a**3, lambda a: 3 * a**2, False),
    "power 2.5": (lambda xp, a: a**2.5, lambda a: 2.5 * a**1.5, True),
    "shift": (lambda xp, a: a + 1.5, lambda a: np.ones_like(a), False),
    "scaled": (lambda xp, a: -a, lambda a: -np.ones_like(a), False),
}
ELEMENTWISE_SHAPES = ["ij", "i", "bij"]


def _elementwise_input(rng, labels, positive):
    """Upstream map and input with every entry of A = P·x away from 0 (and positive if needed)."""
    while True:
        x = rng.uniform(0.5, 1.5, size=shape(S4_IN))
        P = rng.uniform(0.1, 1.0, size=shape(labels + S4_IN)) if positive else rng.normal(size=shape(labels + S4_IN))
        A = einsum(f"{labels}{S4_IN},{S4_IN}->{labels}", P, x)
        if np.min(np.abs(A)) > 0.1:
            return x, P, A


@pytest.mark.parametrize("labels", ELEMENTWISE_SHAPES)
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_theorem_7_forward_elementwise(name, labels, rng):
    fn, derivative, positive = ELEMENTWISE[name]
    s1 = labels
    x, P, A = _elementwise_input(rng, s1, positive)

    def f(x, P):
        return fn(np, np.einsum(f"{s1}{S4_IN},{S4_IN}->{s1}", P, x))

    theorem = einsum(f"{s1},{s1}{S4_IN}->{s1}{S4_IN}", derivative(A), P)  # f'(A) *(s1,s1s4,s1s4) Ȧ
    np.testing.assert_allclose(jt.jacobian(f, mode="forward")(x, P), theorem, **TOL)


@pytest.mark.parametrize("labels", ELEMENTWISE_SHAPES)
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_theorem_10_reverse_elementwise(name, labels, rng):
    fn, derivative, positive = ELEMENTWISE[name]
    s1 = labels
    _, _, A = _elementwise_input(rng, s1, positive)
    D = rng.normal(size=shape(S4_OUT + s1))

    def f(A, D):  # y = D *(s4s1,s1,s4) f(A)
        return np.einsum(f"{S4_OUT}{s1},{s1}->{S4_OUT}", D, fn(np, A))

    theorem = einsum(f"{S4_OUT}{s1},{s1}->{S4_OUT}{s1}", D, derivative(A))  # C̄ *(s4s1,s1,s4s1) f'(A)
    np.testing.assert_allclose(jt.jacobian(f, mode="reverse")(A, D), theorem, **TOL)
    # with s4 = ∅: the pullback of one cotangent
    C_bar = rng.normal(size=shape(s1))
    (A_bar,) = jt.vjp(lambda A: fn(np, A), A)[1](C_bar)
    np.testing.assert_allclose(A_bar, C_bar * derivative(A), **TOL)


# ---------------------------------------------------------------------------- general unary: Theorems 6 and 9
def _softmax_jacobian_expr(a: E.Tensor) -> tuple[E.Tensor, str]:
    """softmax(a)ᵢ = exp(aᵢ)/Σⱼexp(aⱼ): f'(a)[i,k] = sᵢδᵢₖ − sᵢsₖ, written with jacacc's nodes."""
    e = E.unary("exp", a)
    s = E.einsum("i,->i", e, E.unary("reciprocal", E.einsum("i->", e)))
    return E.add(E.einsum("i,ik->ik", s, E.delta(a.shape[0])), E.scale(-1.0, E.einsum("i,k->ik", s, s))), "ik"


def _square_jacobian_expr(a: E.Tensor) -> tuple[E.Tensor, str]:
    """(A·A)[i,j] = Σₘ A[i,m] A[m,j]: f'(A)[ij,kl] = δᵢₖ A[l,j] + A[i,k] δⱼₗ."""
    d = E.delta(a.shape[0])
    return E.add(E.einsum("ik,lj->ijkl", d, a), E.einsum("ik,jl->ijkl", a, d)), "ijkl"


def _colnorm_jacobian_expr(a: E.Tensor) -> tuple[E.Tensor, str]:
    """c[j] = (Σᵢ A[i,j]²)^½ (a vector from a matrix): f'(A)[j,kl] = δⱼₗ A[k,l] / c[l]."""
    c = E.unary("sqrt", E.einsum("kl,kl->l", a, a))
    return E.einsum("kl,l,jl->jkl", a, E.unary("reciprocal", c), E.delta(a.shape[1])), "jkl"


def _elementwise_exp_as_general(a: E.Tensor) -> tuple[E.Tensor, str]:
    """exp viewed as a general unary function: f'(A)[ij,kl] = exp(A[i,j]) δᵢₖ δⱼₗ (a diagonal 4th-order tensor)."""
    return E.einsum("ij,ik,jl->ijkl", E.unary("exp", a), E.delta(a.shape[0]), E.delta(a.shape[1])), "ijkl"


# kind -> (jacobian expression, jax version of the function, input labels s1, output labels s3)
GENERAL = {
    "theorem6_softmax": (_softmax_jacobian_expr, lambda a: jax.nn.softmax(a), "k", "i"),
    "theorem6_matrix_square": (_square_jacobian_expr, lambda a: a @ a, "kl", "ij"),
    "theorem6_column_norms": (_colnorm_jacobian_expr, lambda a: jnp.sqrt(jnp.sum(a * a, axis=0)), "kl", "j"),
    "theorem6_exp_as_general": (_elementwise_exp_as_general, jnp.exp, "kl", "ij"),
}
GENERAL_SIZES = {"i": 3, "j": 3, "k": 3, "l": 3}


def _rule(jacobian_expr):
    def rule(node: E.Tensor, k: int) -> Factor:
        (a,) = node.args
        tensor, letters = jacobian_expr(a)
        out = letters[: node.ndim]
        return Factor.from_letters(tensor, letters, out, letters[node.ndim:], node.shape, a.shape)

    return rule


@pytest.fixture(params=list(GENERAL))
def general(request):
    """A general unary node kind registered with register_partial (unregistered afterwards)."""
    kind = request.param
    jacobian_expr, f_jax, s1, s3 = GENERAL[kind]
    G.register_partial(kind, _rule(jacobian_expr))
    yield kind, f_jax, s1, s3
    G._RULES.pop(kind, None)  # the registry has no public way to unregister


def _general_node(kind: str, a: E.Tensor, s3: str) -> E.Tensor:
    return E.Tensor(kind, tuple(GENERAL_SIZES[c] for c in s3), (a,), kind)


def _jax_derivative(f_jax, a):
    """f'(a) by ``jax.jacfwd`` in float64 (index set s3s1)."""
    with jax.enable_x64(True):
        return np.asarray(jax.jacfwd(f_jax)(jnp.asarray(a, dtype=jnp.float64)), dtype=float)


def test_theorem_6_forward_general_unary(general, rng):
    kind, f_jax, s1, s3 = general
    sizes = {**GENERAL_SIZES, "X": 2, "Y": 3}
    x_val = rng.normal(size=(2, 3))
    P_val = rng.normal(size=tuple(sizes[c] for c in s1 + S4_IN)) * 0.5
    x = E.var("x", x_val.shape)
    A = E.einsum(f"{s1}{S4_IN},{S4_IN}->{s1}", E.const(P_val), x)  # upstream linear map, Ȧ = P
    C = _general_node(kind, A, s3)
    got = Program([jacobian_expression(C, x, "forward")], [x])(x_val)[0]
    A_val = np.einsum(f"{s1}{S4_IN},{S4_IN}->{s1}", P_val, x_val)
    f_prime = _jax_derivative(f_jax, A_val)  # index set s3s1
    theorem = np.einsum(f"{s3}{s1},{s1}{S4_IN}->{s3}{S4_IN}", f_prime, P_val)  # f'(A) *(s3s1,s1s4,s3s4) Ȧ
    np.testing.assert_allclose(got, theorem, **TOL)


def test_theorem_9_reverse_general_unary(general, rng):
    kind, f_jax, s1, s3 = general
    sizes = {**GENERAL_SIZES, "U": 3, "V": 2}
    A_val = rng.normal(size=tuple(sizes[c] for c in s1)) * 0.5
    D_val = rng.normal(size=tuple(sizes[c] for c in S4_OUT + s3))
    A = E.var("A", A_val.shape)
    y = E.einsum(f"{S4_OUT}{s3},{s3}->{S4_OUT}", E.const(D_val), _general_node(kind, A, s3))  # C̄ = D
    got = Program([jacobian_expression(y, A, "reverse")], [A])(A_val)[0]
    f_prime = _jax_derivative(f_jax, A_val)
    theorem = np.einsum(f"{S4_OUT}{s3},{s3}{s1}->{S4_OUT}{s1}", D_val, f_prime)  # C̄ *(s4s3,s3s1,s4s1) f'(A)
    np.testing.assert_allclose(got, theorem, **TOL)


def test_theorem_6_of_an_elementwise_function_is_theorem_7(rng):
    """An elementwise function's f' as a general unary function is the diagonal 4th-order tensor
    ``f'(A)[ij] δ δ``; Theorem 6 with it is Theorem 7 — and jacacc's elementwise derivative."""
    x = rng.normal(size=shape(S4_IN))
    P = rng.normal(size=shape("ij" + S4_IN))
    A = einsum(f"ij{S4_IN},{S4_IN}->ij", P, x)
    diagonal = np.einsum("ij,ik,jl->ijkl", np.exp(A), np.eye(SIZES["i"]), np.eye(SIZES["j"]))
    theorem_6 = np.einsum(f"ijkl,kl{S4_IN}->ij{S4_IN}", diagonal, P)
    theorem_7 = np.einsum(f"ij,ij{S4_IN}->ij{S4_IN}", np.exp(A), P)
    np.testing.assert_allclose(theorem_6, theorem_7, **TOL)
    got = jt.jacobian(lambda x, P: np.exp(np.einsum(f"ij{S4_IN},{S4_IN}->ij", P, x)), mode="forward")(x, P)
    np.testing.assert_allclose(got, theorem_6, **TOL)


def test_elementwise_partial_is_stored_as_a_vector():
    """Theorems 7/10's point: the partial of an elementwise node is f'(A) on shared labels (order of A),
    not the diagonal 4th-order tensor of Theorem 6."""
    a = E.var("a", (3, 4))
    node = E.unary("tanh", a)
    (factor,) = G.local_partials(node, lambda t: t is a).values()
    assert factor.tensor.shape == (3, 4)
    assert factor.shape == (3, 4, 3, 4)
    assert factor.out == factor.inp  # the δs: output and input axes share their labels
