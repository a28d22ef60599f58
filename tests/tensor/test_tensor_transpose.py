"""Transposition of linear expressions (jacacc.tensor.transpose) and every operator's rules.

A pullback derived by transposing a pushforward must be the pushforward's adjoint: checked
as whole matrices on small random einsums (hypothesis), rule by rule, and by the dot-product
test at every application of every registered operator (jacacc.tensor.rule_checks), where a
hand-written vjp is also checked against the transposed pushforward."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_samples import SAMPLES

from jacacc.errors import RegistryError, TraceError
from jacacc.tensor import expr as E
from jacacc.tensor.evaluate import Program
from jacacc.tensor.expr import OPERATORS
from jacacc.tensor.operators import Operator, apply_operator, get_operator, placeholder
from jacacc.tensor.rule_checks import check_operator_rules
from jacacc.tensor.transpose import transpose_linear


def _images_of_a_basis(root: E.Tensor, seed: E.Tensor, data: dict) -> np.ndarray:
    """``root`` evaluated at each unit vector of ``seed``'s entries: one raveled image per row."""
    program = Program([root], [seed, *data])
    images = []
    for k in range(seed.size):
        e = np.zeros(seed.size)
        e[k] = 1.0
        images.append(np.ravel(program(e.reshape(seed.shape), *data.values())[0]))
    return np.array(images).reshape(seed.size, root.size)


def _matrix_of(root: E.Tensor, t: E.Tensor, data: dict) -> np.ndarray:
    """The linear map t ↦ root as a matrix (root entries × t entries), column by column."""
    return _images_of_a_basis(root, t, data).T


def _transposed_matrix(root: E.Tensor, t: E.Tensor, data: dict) -> np.ndarray:
    c = placeholder(root.shape)
    (tbar,) = transpose_linear([root], [t], [c])
    return _images_of_a_basis(tbar, c, data)


def _assert_transposes(root: E.Tensor, t: E.Tensor, data: dict) -> None:
    np.testing.assert_allclose(_transposed_matrix(root, t, data), _matrix_of(root, t, data), rtol=1e-12, atol=1e-12)


@st.composite
def _einsums(draw):
    """An einsum linear in one operand: its letters may repeat (a diagonal read), be summed by
    it alone (a reduction) or be shared with the others and the output."""
    pool = "abcd"
    extents = {c: draw(st.integers(1, 3)) for c in pool}
    n_operands = draw(st.integers(1, 3))
    terms = [draw(st.text(pool, min_size=0, max_size=3)) for _ in range(n_operands)]
    present = sorted(set("".join(terms)))
    out = "".join(draw(st.permutations(present))[:draw(st.integers(0, len(present)))])
    k = draw(st.integers(0, n_operands - 1))
    return terms, out, k, extents


@settings(max_examples=60, deadline=None)
@given(_einsums(), st.integers(0, 2**16))
def test_einsum_transpose_is_the_matrix_transpose(case, seed):
    terms, out, k, extents = case
    rng = np.random.default_rng(seed)
    operands, data = [], {}
    for m, term in enumerate(terms):
        shape = tuple(extents[c] for c in term)
        if m == k:
            t = E.var(f"t{seed}_{m}", shape)
            operands.append(t)
        else:
            v = E.var(f"d{seed}_{m}", shape)
            data[v] = rng.normal(size=shape)
            operands.append(v)
    root = E.einsum(",".join(terms) + "->" + out, *operands)
    if root.is_zero or not any(a is t for a in E.nodes_of([root])):
        return
    _assert_transposes(root, t, data)


def test_sums_and_linear_elementwise_functions_transpose():
    t, d = E.var("t", (3,)), E.var("d", (3,))
    data = {d: np.array([0.5, -2.0, 3.0])}
    cond = E.elementwise("gt", d, E.const(0.0))
    root = E.add(E.elementwise("mul", t, d), E.elementwise("div", E.unary("neg", t), d),
                 E.elementwise("where", cond, t, E.scale(3.0, t)), E.elementwise("sub", E.scale(2.0, t), t),
                 E.einsum("i->i", E.unary("pos", t)))
    _assert_transposes(root, t, data)


def test_a_linear_operator_transposes_through_its_declared_transpose():
    import jacacc.linalg.blas_cholesky  # noqa: F401  registers trsm

    t, A = E.var("t", (3, 2)), E.var("A", (3, 3))
    data = {A: np.tril(np.random.default_rng(0).normal(size=(3, 3))) + 3 * np.eye(3)}
    (root,) = apply_operator("trsm", [A, E.einsum("ij->ij", t)], alpha=2.0, transpose=False, rightside=False,
                             lower=True)
    _assert_transposes(E.add(root, E.scale(0.5, t)), t, data)


@pytest.mark.parametrize("build, message", [
    (lambda t: E.einsum("i,i->i", t, t), "multiplies 2 operands"),
    (lambda t: E.unary("exp", t), "elementwise exp"),
    (lambda t: E.unary("shift", t, 1.0), "shift"),
])
def test_what_is_not_linear_is_refused_by_name(build, message):
    t = E.var("t", (3,))
    with pytest.raises(TraceError, match=message):
        transpose_linear([build(t)], [t], [E.var("c", (3,))])


def test_an_operator_outside_its_linear_arguments_is_refused():
    import jacacc.linalg.blas_cholesky  # noqa: F401

    t = E.var("t", (3, 3))
    (root,) = apply_operator("trsm", [t, E.var("B", (3, 1))], alpha=1.0, transpose=False, rightside=False, lower=True)
    with pytest.raises(TraceError, match="trsm.*not linear in its argument 0"):
        transpose_linear([root], [t], [E.var("c", (3, 1))])


def test_the_zero_cotangent_and_a_zero_argument_of_a_linear_operator_are_symbolic_zeros():
    t = E.var("t", (3,))
    (tbar,) = transpose_linear([E.scale(2.0, t)], [t], [E.zeros((3,))])
    assert tbar.is_zero
    assert apply_operator("cumsum", [E.zeros((4,))], axis=0, reverse=False)[0].is_zero


def test_operator_declarations_are_checked():
    shapes = lambda s: (s,)  # noqa: E731
    with pytest.raises(RegistryError, match="declare its jvp"):
        Operator("nothing_example", lambda a: a, shapes)
    with pytest.raises(RegistryError, match="together"):
        Operator("half_linear_example", lambda a: a, shapes, linear_in=(0,))
    with pytest.raises(RegistryError, match="zero_derivative excludes"):
        Operator("both_example", lambda a: a, shapes, jvp=lambda *a: a, zero_derivative=True)
    wrong = Operator("wrong_example", lambda a: a, shapes, jvp=lambda outputs, args, tangents: (None,))
    a = E.var("a", (2,))
    with pytest.raises(RegistryError, match="wrong_example.*jvp gave"):
        wrong.pushforward((a,), (a,), (E.var("t", (2,)),))


@pytest.mark.parametrize("label", sorted(SAMPLES))
def test_every_application_passes_the_rule_checks(label):
    f, args, names = SAMPLES[label]
    checks = check_operator_rules(f, *args)
    assert {c.operator for c in checks} >= names
    for check in checks:
        assert check.passed, str(check)


def test_the_samples_cover_every_registered_operator():
    import jacacc.linalg  # noqa: F401  registers the linear-algebra operators
    import jacacc.tensor.numpy_linalg  # noqa: F401
    import jacacc.tensor.scipy_functions  # noqa: F401

    covered = set().union(*(names for _, _, names in SAMPLES.values()))
    differentiable = {name for name, op in OPERATORS.items()
                      if not op.zero_derivative and not name.endswith("_example")}
    assert differentiable - covered == set()


def test_a_declared_vjp_must_agree_with_the_transposed_pushforward():
    # a wrong hand-written pullback (twice the right one) is caught by both checks
    import jacacc.linalg.blas_cholesky  # noqa: F401

    potrf = get_operator("potrf")
    wrong = Operator("potrf_wrong_example", potrf.forward, potrf.output_shapes, potrf.jvp,
                     lambda outputs, args, cts, **o: tuple(E.scale(2.0, x)
                                                           for x in potrf.transposed_pushforward(outputs, args, cts, **o)),
                     batch=potrf.batch)
    from jacacc.tensor.operators import register_operator
    from jacacc.tensor.trace import Traced, _node

    register_operator(wrong)
    S = SAMPLES["potrf"][1][0]
    (check,) = check_operator_rules(lambda S: Traced(apply_operator("potrf_wrong_example", [_node(S)], lower=True)[0]),
                                    S)
    assert not check.passed and check.declared_vs_transposed > 0.1 and check.dot_product > 0.1


def test_an_application_of_many_arguments_is_transposed_once_per_sweep(monkeypatch) -> None:
    """``np.array`` of n traced scalars is one concatenation of n pieces: its reverse sweep builds
    its transpose once for all n edges (each edge built all n slices to keep one: n² nodes, 78 s
    at n = 998), and the Hessian of the windowed convolution is WᵀW."""
    import dataclasses

    import jacacc.tensor as jt

    concatenate = get_operator("concatenate")
    calls = []

    def counted(args, cotangents, **options):
        calls.append(len(args))
        return concatenate.transpose(args, cotangents, **options)

    monkeypatch.setitem(OPERATORS, "concatenate", dataclasses.replace(concatenate, transpose=counted))
    assert get_operator("concatenate").transpose is counted
    n, w = 30, np.array([0.2, -1.0, 0.5])

    def objective(x):
        windows = [np.dot(x[i - 1:i + 2], w) for i in range(1, n - 1)]
        return 0.5 * np.sum(np.array(windows) ** 2)

    x = np.random.default_rng(3).standard_normal(n)
    W = np.zeros((n - 2, n))
    for i in range(n - 2):
        W[i, i:i + 3] = w
    np.testing.assert_allclose(jt.grad(objective)(x), W.T @ (W @ x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jt.hessian(objective)(x), W.T @ W, rtol=1e-12, atol=1e-12)
    assert calls and all(count == n - 2 for count in calls)
    assert len(calls) <= 4  # one per sweep that pulls back through it, not one per piece
