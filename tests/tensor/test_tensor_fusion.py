"""Fusion in the tensor evaluator (issue 26, items 1–2): regions of elementwise nodes as loop kernels.

Every test fuses every region whatever its size (``FUSION_MIN_SIZE`` and ``INLINE_MIN_SIZE`` set to 0)
and writes kernels into a temporary cache directory.  Fused programs agree with
the interpreter (which evaluates a region node by node) and with the unfused
program at rtol 1e-12 — not bitwise: a kernel adds in another order — for the
objectives below and for drawn expressions (hypothesis).  Each region's CUDA
source (the kernel layer's CUDA emitter, :mod:`jacacc.kernels.cuda`) is
compile-checked with ``nvcc --ptx`` where nvcc exists and run thread by thread
as host C++ where g++ exists; ``tests/tensor/test_tensor_gpu.py`` runs it on a GPU.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jacacc.tensor as jt
from jacacc import kernels
from jacacc.elementwise.parse import parse
from jacacc.tensor import fusion
from jacacc.tensor.arrays import BasicKey, index_node
from jacacc.tensor.evaluate import Program
from jacacc.tensor.expr import Tensor, add, const, delta, einsum, ones, unary, var
from jacacc.tensor.operators import apply_operator

pytest.importorskip("numba")

RTOL = 1e-12
REPO = Path(__file__).resolve().parents[2]
#: the threshold as shipped (every test here sets it to 0)
SHIPPED_MIN_SIZE = fusion.FUSION_MIN_SIZE


@pytest.fixture(autouse=True)
def fuse_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    # the kernels go to the kernel cache directory of the run, as everywhere: a kernel's module is
    # named by the hash of its source, so a later run loads what this one compiled; the tests of the
    # cache itself give it a directory of their own
    monkeypatch.setattr(fusion, "FUSION_MIN_SIZE", 0)
    monkeypatch.setattr(fusion, "INLINE_MIN_SIZE", 0)
    monkeypatch.setattr(fusion, "ENABLED", True)
    # the kernels under test run from the first call (test_first_calls_run_node_by_node... checks the tiers)
    monkeypatch.setattr(fusion, "COMPILE_AFTER", 0)


def _close(got: Any, want: Any, rtol: float = RTOL) -> None:
    want = np.asarray(want)
    assert np.shape(got) == want.shape
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def _fused(program: Program) -> list[Any]:
    return [n.param for n in program.nodes if n.kind == "fused"]


# ----------------------------------------------------------------------------- objectives
def _logistic_l2(w, X, y):
    return np.sum(np.log1p(np.exp(-y * (X @ w)))) + 0.35 * np.sum(w * w)


def _gaussian_nll(mu, logvar, X):
    return 0.5 * np.sum((X - mu) ** 2 / np.exp(logvar) + logvar)


def _gaussian_nll_logvar(logvar, mu, X):
    return _gaussian_nll(mu, logvar, X)


def _cubic(x, a):
    return np.sum(a * x**3 - 2 * x**2 + np.sin(x) * x + x / (1 + x**2))


def _softmax(W, X, Y):
    logits = X @ W.T
    z = logits - np.max(logits, axis=1, keepdims=True)
    return -np.sum(Y * (z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))))


def _pseudo_huber(w, X, y):
    r = (X @ w - y) / 0.7
    return np.sum(0.49 * (np.sqrt(1 + r**2) - 1))


def _tanh_mlp(W1, X, w2, y):
    return np.sum((np.tanh(X @ W1.T) @ w2 - y) ** 2)


def _differences(x, y):
    """1-D total variation with a strided, a reversed and an integer read: slices in regions."""
    d = x[1:] - x[:-1]
    return (0.5 * np.sum((x - y) ** 2) + 0.3 * np.sum(np.sqrt(d**2 + 1e-3))
            + np.sum(x[::2] * np.tanh(x[::-1][1::2])) + x[0] * x[-1])


def _image_tv(U):
    """Isotropic 2-D total variation of an image: row and column differences of a matrix."""
    dx = U[1:, :] - U[:-1, :]
    dy = U[:, 1:] - U[:, :-1]
    return np.sum(np.sqrt(dx[:, :-1] ** 2 + dy[:-1, :] ** 2 + 1e-2)) + 0.1 * np.sum(U**2)


def _branches_and_pairs(w, X, y):
    """The table's operations of two and three operands in regions: logaddexp, maximum, hypot,
    arctan2, a predicate and where."""
    z = X @ w
    return (np.sum(np.logaddexp(0.0, -y * z)) + np.sum(np.maximum(w, 0.1 * w) ** 2)
            + np.sum(np.where(z > 0.2, z**2, np.hypot(z, 1.0))) + np.sum(np.arctan2(w, 1.0 + w**2)))


def _objectives() -> dict[str, tuple[Callable, tuple]]:
    rng = np.random.default_rng(0)
    n, d, k = 7, 4, 3
    X = rng.standard_normal((n, d))
    return {
        "logistic + L2": (_logistic_l2, (rng.standard_normal(d), X, rng.choice([-1.0, 1.0], n))),
        "Gaussian NLL (mu)": (_gaussian_nll, (rng.standard_normal(d), rng.standard_normal(d), X)),
        "Gaussian NLL (logvar)": (_gaussian_nll_logvar, (rng.standard_normal(d), rng.standard_normal(d), X)),
        "cubic score": (_cubic, (rng.standard_normal(6), rng.standard_normal(6))),
        "softmax keepdims": (_softmax, (rng.standard_normal((k, d)), X, np.eye(k)[rng.integers(0, k, n)])),
        "pseudo-Huber": (_pseudo_huber, (rng.standard_normal(d), X, rng.standard_normal(n))),
        "tanh MLP": (_tanh_mlp, (rng.standard_normal((5, d)), X, rng.standard_normal(5), rng.standard_normal(n))),
        "differences": (_differences, (rng.standard_normal(8), rng.standard_normal(8))),
        "image TV": (_image_tv, (rng.standard_normal((5, 4)),)),
        "branches and pairs": (_branches_and_pairs, (rng.standard_normal(d), X, rng.choice([-1.0, 1.0], n))),
    }


OBJECTIVES = _objectives()


@pytest.mark.parametrize("quantity", ["gradient", "hessian"])
@pytest.mark.parametrize("name", list(OBJECTIVES))
def test_fused_programs_agree_with_the_interpreter_and_unfused(name: str, quantity: str) -> None:
    f, args = OBJECTIVES[name]
    transform = jt.grad(f) if quantity == "gradient" else jt.hessian(f)
    got = transform(*args)
    (program,) = transform.plans.values()
    assert _fused(program), f"{name}: no region fused"
    arrays = [np.asarray(a, dtype=np.float64) for a in args]
    _close(got, program.interpret(np, arrays)[0])
    unfused = Program(program.outputs, program.inputs, program.dtype, fuse_kernels=False)
    assert not _fused(unfused)
    _close(got, unfused(*arrays)[0])
    # the kernels count what the nodes they replace count (the same planned outputs, without
    # re-bracketing, which would take a moved scalar factor back into its contraction)
    assert program.flops == Program(program.outputs, program.inputs, program.dtype, fuse=False,
                                    fuse_kernels=False).flops


# ----------------------------------------------------------------------------- regions
def _centered_squares(n: int = 5, m: int = 4) -> tuple[Tensor, Tensor, Tensor]:
    X, mu = var("X", (n, m)), var("mu", (m,))
    centered = add(X, einsum("j,i,->ij", mu, ones((n,)), const(-1.0)))
    return einsum("ij->j", unary("pow", centered, 2.0)), X, mu


def test_region_of_a_broadcast_subtraction_and_a_column_sum() -> None:
    y, X, mu = _centered_squares()
    [region] = fusion.find_regions([y], min_size=0)
    assert region.root is y
    assert [n.kind for n in region.members] == ["einsum", "add", "unary", "einsum"]
    assert region.inputs == (X, mu)  # the ones tensor and -1 are numbers in the kernel
    assert region.work == 20 and region.operations == 5  # -1·mu·1, +, **2, the sum
    kernel = fusion.FusedKernel(region, np.float64)
    assert kernel.definition.source == "fused[i0] = sum(s0, 0, 4, (x0[s0, i0] + -1 * x1[i0])**2)"
    assert kernel.interchange  # the column sum runs over rows of X
    rng = np.random.default_rng(1)
    x, m = rng.standard_normal((5, 4)), rng.standard_normal(4)
    _close(kernel(x, m), np.sum((x - m) ** 2, axis=0))


def test_a_shared_node_an_output_and_an_expensive_broadcast_are_materialized() -> None:
    x, z, v = var("x", (6,)), var("z", (6,)), var("v", (3,))
    t = unary("exp", x)  # read twice: never recomputed
    y = add(unary("shift", t, 1.0), einsum("i,i->i", t, z))
    s = unary("tanh", y)
    w = einsum("i,ij->ij", unary("exp", v), einsum("ij,ij->ij", var("A", (3, 6)), var("B", (3, 6))))
    regions = fusion.find_regions([s, y, w], min_size=0)
    by_root = {id(r.root): r for r in regions}
    # y is an output: the root of its own region, not a member of tanh's
    assert id(y) in by_root and id(s) not in by_root
    assert [n.kind for n in by_root[id(y)].members] == ["unary", "einsum", "add"]
    assert by_root[id(y)].inputs == (t, z)
    assert all(t not in r.members for r in regions)
    # exp(v) would be recomputed per column of the product: computed once by NumPy instead
    assert [n.kind for n in by_root[id(w)].members] == ["einsum", "einsum"]
    assert by_root[id(w)].inputs[0] is unary("exp", v)


def test_blas_contractions_are_never_fused() -> None:
    n = 2 * max(fusion.INLINE_SUM_MAX, fusion.LOW_RANK_MAX)  # sums longer than a region writes out, no thin factor
    A, B, x = var("A", (n, n)), var("B", (n, n)), var("x", (n,))
    product = einsum("ij,jk->ik", unary("exp", A), B)  # a matrix product: not memory-bound
    y = unary("tanh", unary("shift", product, 1.0))
    mv = einsum("i,ij,j->i", unary("shift", unary("exp", x), 2.0), A, x)  # matvec of an input: one BLAS call
    regions = fusion.find_regions([y, mv], min_size=0)
    members = [m for r in regions for m in r.members]
    assert all(m is not product and m is not mv for m in members)
    # a summing root is memory-bound: its loop runs no longer than its largest operand is big, or
    # LOW_RANK_MAX times as long for a thin factor
    assert all(r.work <= fusion.LOW_RANK_MAX * max(a.size for a in r.root.args)
               for r in regions if r.root.kind == "einsum")
    program = Program([y, mv], [A, B, x])
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((n, n)), rng.standard_normal((n, n)), rng.standard_normal(n)]
    for got, want in zip(program(*arrays), Program([y, mv], [A, B, x], fuse_kernels=False)(*arrays), strict=True):
        _close(got, want)
    assert "dot(" in program._straight_line.source


def test_many_small_scattered_slices_are_added_where_they_lie() -> None:
    """A sum of many small slices scattered back (a convolution's Hessian by windows) is no region
    (a kernel would test every slice's bracket at every entry): each slice is added into the sum's
    array where it lies, one NumPy statement each; a sum of few large slices stays a region."""
    n, k, width = 100, 98, 3
    x = var("x", (n, width))
    blocks = [apply_operator("index_scatter", [unary("exp", einsum("ij,->ij", x, const(0.1 * j)))],
                             key=BasicKey((("s", 0, 1, n), ("s", j, 1, width))), shape=(n, n))[0]
              for j in range(k)]
    total = add(*blocks)
    assert fusion._scattered_cheaper(fusion._region(*_members_of(total)))
    assert not any(r.root is total for r in fusion.find_regions([total], min_size=0))
    program = Program([total], [x])
    point = np.random.default_rng(4).standard_normal((n, width))
    (got,) = program(point)
    want = np.zeros((n, n))
    for j in range(k):
        want[:, j:j + width] += np.exp(0.1 * j * point)
    _close(got, want)
    assert "] += " in program._straight_line.source
    wide = var("w", (n, n - 1))  # a differenced vector's two shifted slices: each nearly the whole array
    few = add(*(apply_operator("index_scatter", [unary("exp", wide)], key=BasicKey((("s", 0, 1, n), ("s", j, 1, n - 1))),
                               shape=(n, n))[0] for j in range(2)))
    assert not fusion._scattered_cheaper(fusion._region(*_members_of(few)))


def test_a_regularized_stencil_hessian_sums_its_shifted_slices_in_one_kernel() -> None:
    """The Hessian of ½‖Σⱼ wⱼ x[j : m + j] − y‖² + ½λ‖x‖² is a sum of shifted slices plus a δ scatter
    (λ·I): the slices' sum is one region (:func:`fusion.scatter_terms_apart`), the δ added after it,
    and the Hessian equals WᵀW + λI."""
    n, k, lam = 60, 5, 0.3
    rng = np.random.default_rng(2)
    w, x, y = rng.standard_normal(k), rng.standard_normal(n), rng.standard_normal(n - k + 1)

    def objective(x: Any, w: Any, y: Any) -> Any:
        blurred = sum(w[j] * x[j:n - k + 1 + j] for j in range(k))
        return 0.5 * np.sum((blurred - y) ** 2) + 0.5 * lam * np.sum(x ** 2)

    hessian = jt.hessian(objective)
    for _ in range(4):  # past the kernels' compile
        got = hessian(x, w, y)
    W = np.zeros((n - k + 1, n))
    for j in range(k):
        W[np.arange(n - k + 1), np.arange(n - k + 1) + j] = w[j]
    _close(got, W.T @ W + lam * np.eye(n))
    [plan] = [getattr(p, "plan", p) for p in hessian.plans.values()]
    slices = [sum(1 for m in kernel.region.members if m.kind == "op" and m.param[0] == "index_scatter")
              for kernel in plan.fused_kernels]
    assert max(slices) == k


def _members_of(root: Any) -> tuple[list[Any], list[int]]:
    """The nodes under ``root`` and the positions of the root's region-like members: every node."""
    from jacacc.tensor.expr import nodes_of

    nodes = nodes_of([root])
    return nodes, [k for k, node in enumerate(nodes) if node.kind not in ("var", "const")]


def test_a_short_contraction_is_summed_where_the_region_reads_it() -> None:
    """``Ω ⊙ (T − U Vᵀ)`` of rank 3: the product's terms are written into the kernel (no n × n
    product in memory); a short sum read at fewer indices than the loops around it stays BLAS."""
    U, V, T = var("U", (20, 3)), var("V", (30, 3)), var("T", (20, 30))
    residual = unary("pow", add(T, einsum("ik,jk,->ij", U, V, const(-1.0))), 2.0)
    program = Program([einsum("ij->i", residual)], [U, V, T])
    [kernel] = _fused(program)
    # V is read through Vᵀ: the innermost loop (over s0) reads its rows
    assert kernel.definition.source == ("fused[i0] = sum(s0, 0, 29, (x0[i0, s0] + -1 * (x1[i0, 0] * x2[0, s0] "
                                        "+ x1[i0, 1] * x2[1, s0] + x1[i0, 2] * x2[2, s0]))**2)")
    assert [x.param for x in kernel.region.inputs] == ["T", "U", "jk->kj"]
    assert kernel.region.inputs[2].args[0].param == "V"
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((20, 3)), rng.standard_normal((30, 3)), rng.standard_normal((20, 30))]
    _close(program(*arrays)[0], np.sum((arrays[2] - arrays[0] @ arrays[1].T) ** 2, axis=1))
    # read once per row but inside a loop over columns: each column would recompute it
    broadcast = einsum("ij,i->ij", T, unary("shift", einsum("ik,k->i", U, var("w", (3,))), 1.0))
    regions = fusion.find_regions([unary("exp", broadcast)], min_size=0)
    assert all(m.kind != "einsum" or m.param != "ik,k->i" for r in regions for m in r.members)


def test_a_low_rank_gradient_is_one_kernel_of_dot_products() -> None:
    """Matrix factorization's gradient −2 (Ω² ⊙ (T − UVᵀ)) V: the sum over j of a computed n × n
    factor times the thin V is the region's root (LOW_RANK_MAX), UVᵀ is written into it, each row of
    the factor is computed once and added into one accumulator per column of V, and Vᵀ — a
    transposed view the kernel reads along its rows — is passed in C order."""

    def mf(U, V, T, Omega):
        return np.sum((Omega * (T - U @ V.T)) ** 2)

    rng = np.random.default_rng(8)
    n, k = 40, 3
    U, V, T = rng.standard_normal((n, k)), rng.standard_normal((n, k)), rng.standard_normal((n, n))
    Omega = (rng.random((n, n)) < 0.5).astype(float)
    grad = jt.grad(mf)
    _close(grad(U, V, T, Omega), -2.0 * ((Omega * Omega) * (T - U @ V.T)) @ V)
    [program] = grad.plans.values()
    [kernel] = _fused(program)
    assert kernel.interchange and kernel.region.root.shape == (n, k)
    assert "@" not in program._straight_line.source  # neither UVᵀ nor the product with V is BLAS
    source, _ = kernels.numba_source(kernel.definition, kernel.arguments, interchange=True,
                                     last_extent=kernel.kernel_shape[-1])
    assert "_a2 +=" in source and "_fk[" not in source  # one pass, an accumulator per column of V
    thin = [x.size == n * k for x in kernel.region.inputs]  # U and Vᵀ, each read n times per entry
    assert kernel.contiguous_inputs == tuple(thin) and any(x.shape == (k, n) for x in kernel.region.inputs)
    assert "np.ascontiguousarray(" in program._straight_line.source
    # a product with a wide factor stays a matrix product
    wide = einsum("ij,jm->im", unary("exp", var("A", (n, n))), var("B", (n, fusion.LOW_RANK_MAX + 1)))
    assert not fusion.find_regions([wide], min_size=0)


@pytest.mark.parametrize("subscripts, thin_shape", [
    ("ij,mj->im", (3, 9)),     # the thin factor read along rows: accumulators
    ("ij,jm->im", (9, 3)),     # read along its columns: the k-outside accumulation
    ("bij,mj->bim", (3, 9)),   # a batch letter
    ("ij,jm->mi", (9, 3)),     # the thin letter first: not low-rank (each F row would be read m times)
])
def test_low_rank_roots_give_the_unfused_values(subscripts: str, thin_shape: tuple[int, ...]) -> None:
    """Whichever layout the kernel of a low-rank root takes, it computes what the unfused program
    does (rtol 1e-12); the thin letter last is what makes an einsum low-rank."""
    big_shape = (2, 5, 9) if subscripts.startswith("bij") else (5, 9)
    A, B, V = var("A", big_shape), var("B", big_shape), var("V", thin_shape)
    F = unary("tanh", add(A, unary("exp", B)))
    y = einsum(subscripts, F, V)
    program = Program([y], [A, B, V])
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal(big_shape), rng.standard_normal(big_shape), rng.standard_normal(thin_shape)]
    _close(program(*arrays)[0], Program([y], [A, B, V], fuse_kernels=False)(*arrays)[0], rtol=1e-12)
    roots = [kernel.region.root for kernel in _fused(program)]
    assert (y in roots) == (subscripts != "ij,jm->mi")


@pytest.mark.parametrize("interchange, last_extent", [(False, None), (True, None), (True, 3)])
def test_dot_product_layout_adds_what_the_plain_loops_add(interchange: bool, last_extent: int | None) -> None:
    """f[i, m] = Σ_j exp(A[i, j]) · W[m, j]: with the sum outside the last index the stored factors
    exp(A[i, j]) are reused by dot products over rows of W, or, the last extent known, added into
    one accumulator per m in one pass; the values are the plain loops'."""
    definition = parse("f[i, m] = sum(j, 0, 6, exp(A[i, j]) * W[m, j])")
    source = kernels.python_source(definition, ["A", "W"], interchange=interchange, last_extent=last_extent)
    assert ("_acc +=" in source) == (interchange and last_extent is None)
    assert ("_a2 +=" in source) == (last_extent == 3)
    rng = np.random.default_rng(3)
    A, W = rng.standard_normal((4, 7)), rng.standard_normal((3, 7))
    out = np.empty((4, 3))
    kernel = kernels.python_kernel(definition, ["A", "W"], interchange=interchange, last_extent=last_extent)
    kernel(out, A, W)
    np.testing.assert_allclose(out, np.exp(A) @ W.T, rtol=1e-13)
    if last_extent is not None:  # generated for three columns: another count is refused, not half-filled
        with pytest.raises(ValueError, match="last axis of 3"):
            kernel(np.empty((4, 2)), A, W[:2])


@pytest.mark.parametrize("subscripts", ["ij->i", "ij->j", "ij->", "ij,j->i", "ij,i->j"])
def test_reductions_of_computed_operands(subscripts: str) -> None:
    A, v = var("A", (5, 7)), var("v", (7,))
    w = var("w", (5,))
    square = unary("pow", unary("shift", A, 0.5), 2.0)
    operands = {"ij->i": (square,), "ij->j": (square,), "ij->": (square,), "ij,j->i": (square, v),
                "ij,i->j": (square, w)}[subscripts]
    y = unary("sqrt", unary("shift", unary("pow", einsum(subscripts, *operands), 2.0), 1.0))
    program = Program([y], [A, v, w])
    assert _fused(program)
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((5, 7)), rng.standard_normal(7), rng.standard_normal(5)]
    _close(program(*arrays)[0], Program([y], [A, v, w], fuse_kernels=False)(*arrays)[0])
    _close(program(*arrays)[0], program.interpret(np, arrays)[0])


def test_scalar_inputs_and_delta_terms() -> None:
    lam, x = var("lam", ()), var("x", (4,))
    y = einsum(",i->i", lam, unary("exp", unary("shift", x, 1.0)))
    M = add(unary("tanh", einsum("i,j->ij", x, x)), delta(4))  # δ read as a bracket
    program = Program([y, M], [lam, x])
    assert len(_fused(program)) == 2
    arrays = [np.asarray(0.3), np.linspace(-1.0, 1.0, 4)]
    for got, want in zip(program(*arrays), Program([y, M], [lam, x], fuse_kernels=False)(*arrays), strict=True):
        _close(got, want)


def test_float32_programs_stay_float32() -> None:
    f, args = OBJECTIVES["Gaussian NLL (mu)"]
    args32 = [np.asarray(a, dtype=np.float32) for a in args]
    g = jt.grad(f)
    got = g(*args32)
    (program,) = g.plans.values()
    assert _fused(program) and program.dtype == np.float32
    assert got.dtype == np.float32
    _close(got, jt.grad(f)(*args), rtol=1e-5)


# ----------------------------------------------------------------------------- caches and switches
def test_a_second_program_reuses_the_compiled_kernel() -> None:
    y, X, mu = _centered_squares(6, 3)
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((6, 3)), rng.standard_normal(3)]
    first = Program([y], [X, mu])
    first(*arrays)
    [kernel] = _fused(first)
    compiled = dict(kernel.kernel.overloads)
    second = Program([y], [X, mu])
    second(*arrays)
    [again] = _fused(second)
    assert again is not kernel and again.kernel is kernel.kernel
    assert dict(again.kernel.overloads) == compiled  # no new compilation


def test_kernels_are_cached_on_disk_for_another_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JACACC_CACHE_DIR", str(tmp_path))
    script = textwrap.dedent("""
        import json, sys
        import numpy as np
        from jacacc.tensor import fusion
        from jacacc.tensor.evaluate import Program
        from jacacc.tensor.expr import einsum, unary, var
        fusion.FUSION_MIN_SIZE = 0
        x = var("x", (5,))
        y = einsum("i->", unary("tanh", unary("shift", x, 0.123456789)))
        program = Program([y], [x])
        [kernel] = [n.param for n in program.nodes if n.kind == "fused"]
        assert program.fused_kernels == (kernel,) and kernel.first_call_seconds is None
        calls = 0
        while kernel.first_call_seconds is None:  # node by node until the kernel is hot
            expected = np.sum(np.tanh(np.linspace(0.0, 1.0, 5) + 0.123456789))
            assert np.isclose(program(np.linspace(0.0, 1.0, 5))[0], expected, rtol=1e-14)
            calls += 1
        stats = kernel.kernel.stats
        print(json.dumps({"hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values()),
                          "first_call_reported": kernel.first_call_seconds > 0, "calls": calls}))
    """)

    def run() -> dict[str, int | bool]:
        env = {**os.environ, "JACACC_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True,
                              timeout=120)
        return json.loads(done.stdout.strip().splitlines()[-1])

    # compiled and written on the call after COMPILE_AFTER calls node by node; then, in another
    # process, found on disk and loaded, not compiled, on the first call
    child_compile_after = fusion._compile_after(os.environ.get("JACACC_COMPILE_AFTER"))  # the child's, not this fixture's
    assert run() == {"hits": 0, "misses": 1, "first_call_reported": True, "calls": child_compile_after + 1}
    sources = list((tmp_path / "kernels").glob("k*.py"))
    assert len(sources) == 1
    assert list((tmp_path / "kernels" / "__pycache__").glob(f"{sources[0].stem}.*.nbi"))
    assert run() == {"hits": 1, "misses": 0, "first_call_reported": True, "calls": 1}


def test_an_unwritable_cache_directory_keeps_kernels_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jacacc import kernels

    monkeypatch.setenv("JACACC_CACHE_DIR", "")
    assert kernels.kernel_cache_dir() is None
    x = var("x", (4,))
    program = Program([unary("exp", unary("shift", x, 0.987654321))], [x])
    _close(program(np.zeros(4))[0], np.exp(np.full(4, 0.987654321)))


def test_without_numba_the_program_runs_unfused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    assert not fusion.numba_available()
    f, args = OBJECTIVES["cubic score"]
    g = jt.grad(f)
    got = g(*args)
    (program,) = g.plans.values()
    assert not _fused(program)
    _close(got, program.interpret(np, [np.asarray(a) for a in args])[0])


def test_fusion_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    y, X, mu = _centered_squares()
    assert _fused(Program([y], [X, mu]))
    assert not _fused(Program([y], [X, mu], fuse_kernels=False))
    monkeypatch.setattr(fusion, "ENABLED", False)
    assert not _fused(Program([y], [X, mu]))
    assert _fused(Program([y], [X, mu], fuse_kernels=True))


def test_regions_below_the_threshold_stay_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fusion, "FUSION_MIN_SIZE", 21)
    y, X, mu = _centered_squares()  # 20 iterations
    assert not _fused(Program([y], [X, mu]))
    assert fusion.find_regions([y], min_operations=5) == []


@pytest.mark.scripts  # an experiment script run end to end (make test-extra)
def test_the_threshold_experiment_records_its_measurements(tmp_path: Path) -> None:
    from experiment_scripts import load_experiment

    from jacacc.bench import read_record

    experiment = load_experiment("fusion_threshold")
    assert experiment.main(["--quick", "--out", str(tmp_path)]) == 0
    record = read_record(tmp_path / "results" / "fusion_threshold.json")["results"]
    assert {(r["kind"], r["operations"], r["n"]) for r in record["rows"]} == {
        (kind, k, n) for kind in ("elementwise", "reduction") for k in (2, 3) for n in (100, 1000)}
    assert all(r["kernels"] == 1 and r["fused_us"] > 0 for r in record["rows"])
    assert [r["function"] for r in record["functions"]] == ["exp", "log1p"]


def test_a_region_reading_an_input_transposed_stays_numpy() -> None:
    """NumPy's result of a transposed operand keeps the operand's memory order, which the
    contractions after it were planned for; a kernel writes C order (the ten-layer net's
    reverse-mode Hessian ran its einsums twice as long), so such a region is not fused —
    while the same region reading in loop order is."""
    a, b = var("a transposed", (3, 4)), var("b transposed", (4, 3))
    c = var("c in order", (3, 4))
    assert fusion.find_regions([unary("exp", add(a, einsum("ji->ij", b)))], min_size=0) == []
    [region] = fusion.find_regions([unary("exp", add(a, c))], min_size=0)
    assert not region.transposed and {x.param for x in region.inputs} == {"a transposed", "c in order"}


# ----------------------------------------------------------------------------- drawn expressions
#: functions whose values stay bounded (|y| ≤ 1 or a square root of 1 + x²), so that sums added in
#: another order agree at rtol 1e-12 whatever hypothesis draws
_BOUNDED = ("tanh", "sin", "cos", "logistic")
_DRAWN_SHAPES = {"A": (3, 4), "B": (3, 4), "v": (4,), "u": (3,)}


def test_slices_and_scatters_are_reads_and_brackets_in_the_region() -> None:
    x = var("x", (6,))
    key = BasicKey((("s", 1, 1, 5),))
    d = add(index_node(x, key), einsum("i,->i", index_node(x, BasicKey((("s", 0, 1, 5),))), const(-1.0)))
    spread = apply_operator("index_scatter", [unary("pow", d, 2.0)], key=key, shape=(6,))[0]
    program = Program([unary("tanh", spread)], [x])
    [kernel] = _fused(program)
    assert [n.param for n in kernel.region.inputs] == ["x"]  # no copy of a slice is read
    assert kernel.definition.source == "fused[i0] = tanh([i0 >= 1 and i0 <= 5] * (x0[i0] + -1 * x0[i0 - 1])**2)"
    value = np.linspace(-1.0, 2.0, 6)
    want = np.tanh(np.concatenate([[0.0], np.diff(value) ** 2]))
    _close(program(value)[0], want)
    _close(kernel.reference(np, [value]), want)


def test_rolls_pads_and_concatenations_are_reads_under_brackets_in_the_region() -> None:
    """A Gauss–Seidel sweep by np.roll and a zero-padded stencil: each shifted copy is a read of its
    operand under the bracket of where it lies, the sweep one kernel reading only its two inputs."""
    p, d = var("p", (5, 4)), var("d", (5, 4))
    sweep = lambda p, d: (d + np.roll(p, 1, axis=0) + np.roll(p, -1, axis=0) + np.roll(p, 1, axis=1)  # noqa: E731
                          + np.roll(p, -1, axis=1)) / 4.0
    from jacacc.tensor.trace import Traced

    node = sweep(Traced(p), Traced(d)).node
    program = Program([unary("tanh", node)], [p, d])
    [kernel] = _fused(program)
    assert sorted(x.param for x in kernel.region.inputs) == ["d", "p"]  # no shifted copy is read
    assert sum(m.param[0] == "concatenate" for m in kernel.region.members if m.kind == "op") == 4
    rng = np.random.default_rng(0)
    pv, dv = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    want = np.tanh(sweep(pv, dv))
    _close(program(pv, dv)[0], want)
    _close(kernel.reference(np, [{"p": pv, "d": dv}[x.param] for x in kernel.region.inputs]), want)
    padded = apply_operator("pad", [unary("pow", p, 2.0)], widths=((1, 0), (2, 1)))[0]  # cheap: read twice
    stencil = add(index_node(padded, BasicKey((("s", 0, 1, 5), ("s", 0, 1, 4)))),
                  index_node(padded, BasicKey((("s", 1, 1, 5), ("s", 3, 1, 4)))))
    program = Program([unary("sin", stencil)], [p])
    [kernel] = _fused(program)
    assert [x.param for x in kernel.region.inputs] == ["p"]
    wide = np.pad(pv ** 2, ((1, 0), (2, 1)))
    _close(program(pv)[0], np.sin(wide[:5, :4] + wide[1:6, 3:7]))


def test_operations_of_two_and_three_operands_are_calls_in_regions() -> None:
    f, args = OBJECTIVES["branches and pairs"]
    names = ("logaddexp", "maximum", "hypot", "arctan2", "eq", "gt")
    called: set[str] = set()
    for transform in (jt.grad(f), jt.value_and_grad(f)):  # the value calls arctan2; the gradient, its derivative
        transform(*args)
        (program,) = transform.plans.values()
        called |= {name for kernel in _fused(program) for name in names if f"{name}(" in kernel.definition.source}
    assert called == set(names)


def test_a_hessian_of_differences_keeps_its_delta_structure() -> None:
    """The Hessian of a difference penalty (tridiagonal) is written from vectors: the slices of δ
    are brackets in its kernel, never a dense n × (n − 1) constant read from memory."""
    n = 40
    rng = np.random.default_rng(3)
    args = (rng.standard_normal(n), rng.standard_normal(n))
    h = jt.hessian(lambda x, y: _differences(x, y))
    got = h(*args)
    (program,) = h.plans.values()
    dense = [node.shape for node in program.nodes if node.kind == "const" and node.size >= n]
    assert not dense, dense
    assert all(x.ndim <= 1 for kernel in _fused(program) for x in kernel.region.inputs)
    unfused = Program(program.outputs, program.inputs, program.dtype, fuse_kernels=False)
    _close(got, unfused(*args)[0])
    assert np.count_nonzero(got - np.diag(np.diag(got))) < 6 * n  # tridiagonal, but x[0]·x[-1] and x[::2]


def test_a_banded_jacobian_read_at_two_offsets_is_computed_where_it_is_read() -> None:
    """Rosenbrock's Hessian reads the n × (n − 1) Jacobian of x[1:] − x[:-1]² at [i, j − 1] and
    [i, j]: a cheap node, so the one kernel writing the Hessian computes it at both reads instead of
    writing it to memory first (at n = 4096 that was a 128 MB array)."""
    n = 40
    x = np.random.default_rng(4).standard_normal(n)
    h = jt.hessian(lambda x: np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2))
    got = h(x)
    (program,) = h.plans.values()
    assert len(_fused(program)) == 1
    assert [node.shape for node in program.nodes if node.ndim == 2] == [(n, n)]
    unfused = Program(program.outputs, program.inputs, program.dtype, fuse_kernels=False)
    _close(got, unfused(x)[0])


@pytest.mark.parametrize(("reads", "joins"), [(2, True), (fusion.MAX_COPIES, True), (fusion.MAX_COPIES + 1, False)])
def test_a_cheap_node_read_at_several_places_joins_up_to_max_copies(reads: int, joins: bool) -> None:
    x, z = var("x", (12,)), var("z", (12, 12))
    cheap = einsum("i,ij->ij", x, z)  # no sum, no costly function
    rows = 12 - reads + 1
    terms = [unary("sin", index_node(cheap, BasicKey((("s", k, 1, rows), ("s", 0, 1, 12))))) for k in range(reads)]
    root = add(*terms)
    (region,) = fusion.find_regions([root], min_size=0)
    assert (cheap in region.members) is joins and (cheap in region.inputs) is not joins

    """``(δ[:, 1:] − δ[:, :-1]) @ x`` is a BLAS product: its difference matrix is folded once."""
    n = 30
    x = var("x", (n - 1,))
    eye = delta(n)
    difference = add(index_node(eye, BasicKey((("s", 0, 1, n), ("s", 1, 1, n - 1)))),
                     einsum("ij,->ij", index_node(eye, BasicKey((("s", 0, 1, n), ("s", 0, 1, n - 1)))), const(-1.0)))
    assert fusion.is_structural(difference)
    program = Program([unary("tanh", einsum("ij,j->i", difference, x))], [x])
    assert [node.shape for node in program.nodes if node.kind == "const" and node.size > 1] == [(n, n - 1)]
    assert not [node for node in program.nodes if node.kind == "op"]
    value = np.linspace(0.0, 1.0, n - 1)
    want = np.tanh((np.eye(n)[:, 1:] - np.eye(n)[:, :-1]) @ value)
    _close(program(value)[0], want)


@st.composite
def _drawn_programs(draw: st.DrawFn) -> tuple[list[Tensor], list[Tensor]]:
    """A DAG of elementwise steps over two matrices (functions, sums, products with broadcast rows
    and columns, shifts, powers), maybe summed at the end, with maybe an intermediate as a second
    output (a region root that is also read)."""
    A, B, v, u = (var(name, shape) for name, shape in _DRAWN_SHAPES.items())
    values = [A, B]
    for _ in range(draw(st.integers(1, 6))):
        a = draw(st.sampled_from(values))
        kind = draw(st.sampled_from(["function", "root", "add", "row", "column", "product", "shift", "power",
                                     "reverse", "roll"]))
        if kind == "function":
            new = unary(draw(st.sampled_from(_BOUNDED)), a)
        elif kind == "root":  # sqrt(1 + a²): a costly function of an unbounded operand, bounded again
            new = unary("sqrt", unary("shift", unary("pow", a, 2.0), 1.0))
        elif kind == "add":
            new = add(a, draw(st.sampled_from(values)))
        elif kind == "row":
            new = einsum("ij,j->ij", a, v)
        elif kind == "column":
            new = einsum("ij,i->ij", a, u)
        elif kind == "product":
            new = einsum("ij,ij->ij", unary("tanh", a), draw(st.sampled_from(values)))
        elif kind == "shift":
            new = unary("shift", a, draw(st.sampled_from([-0.5, 1.0, 2.5])))
        elif kind == "reverse":  # a[::-1, 1:] - a[::-1, :-1], padded with a zero column
            flipped = [index_node(a, BasicKey((("s", 2, -1, 3), ("s", start, 1, 3)))) for start in (1, 0)]
            new = apply_operator("index_scatter", [add(flipped[0], einsum("ij,->ij", flipped[1], const(-1.0)))],
                                 key=BasicKey((("s", 0, 1, 3), ("s", 0, 1, 3))), shape=(3, 4))[0]
        elif kind == "roll":  # rows moved down one, the first row zero, then a column of a: a[:, 0] · row
            rows = apply_operator("index_scatter", [index_node(a, BasicKey((("s", 0, 1, 2), ("s", 0, 1, 4))))],
                                  key=BasicKey((("s", 1, 1, 2), ("s", 0, 1, 4))), shape=(3, 4))[0]
            new = einsum("ij,i->ij", rows, index_node(a, BasicKey((("s", 0, 1, 3), ("i", 0)))))
        else:
            new = unary("pow", unary("tanh", a), draw(st.sampled_from([2.0, 3.0])))
        values.append(new)
    y = values[-1]
    reduction = draw(st.sampled_from(["", "ij->i", "ij->j", "ij->", "ij,j->i", "ij,i->j"]))
    if reduction:
        y = einsum(reduction, y, *({"j": [v], "i": [u]}.get(reduction[3], []) if "," in reduction else []))
    outputs = [y]
    if draw(st.booleans()) and len(values) > 3:
        outputs.append(values[len(values) // 2 + 1])
    return outputs, [A, B, v, u]


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=_drawn_programs(), seed=st.integers(0, 2**16))
def test_drawn_fused_programs_agree_with_the_unfused(drawn: tuple[list[Tensor], list[Tensor]], seed: int) -> None:
    check_drawn_program(drawn, seed)


@pytest.mark.exhaustive  # the make-test twin above draws 5 programs
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=_drawn_programs(), seed=st.integers(0, 2**16))
def test_more_drawn_fused_programs_agree_with_the_unfused(drawn: tuple[list[Tensor], list[Tensor]],
                                                          seed: int) -> None:
    check_drawn_program(drawn, seed)


def check_drawn_program(drawn: tuple[list[Tensor], list[Tensor]], seed: int) -> None:
    """The fused program's outputs equal the unfused program's and the interpreter's."""
    outputs, inputs = drawn
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1.5, 1.5, _DRAWN_SHAPES[x.param]) for x in inputs]
    fused = Program(outputs, inputs)
    unfused = Program(outputs, inputs, fuse_kernels=False)
    for got, want, reference in zip(fused(*arrays), unfused(*arrays), fused.interpret(np, arrays), strict=True):
        _close(got, want)
        _close(got, reference)


# ----------------------------------------------------------------------------- CUDA for fused regions
def _gpu_objectives() -> dict[str, tuple[Callable, tuple]]:
    """The programs whose fused regions get CUDA checks: gradients and Hessians of these."""
    names = ("logistic + L2", "tanh MLP", "softmax keepdims", "Gaussian NLL (mu)", "Gaussian NLL (logvar)",
             "differences", "image TV", "branches and pairs")
    return {name: OBJECTIVES[name] for name in names}


@functools.cache
def _cuda_kernels() -> list[tuple[str, Any]]:
    """(label, FusedKernel) of every fused region of the gradients and Hessians of
    :func:`_gpu_objectives` (one per CUDA source), and of one float32 program; built once per
    worker (nine seconds of tracing, planning and kernel loading) for the tests that read them."""
    found: dict[str, tuple[str, Any]] = {}
    for name, (f, args) in _gpu_objectives().items():
        for quantity, transform in (("gradient", jt.grad(f)), ("hessian", jt.hessian(f))):
            transform(*args)
            (program,) = transform.plans.values()
            for kernel in _fused(program):
                found.setdefault(kernel.cuda_source, (f"{name} {quantity}: {kernel.definition.source}", kernel))
    f, args = OBJECTIVES["Gaussian NLL (mu)"]
    g = jt.grad(f)
    g(*(np.asarray(a, dtype=np.float32) for a in args))
    (program,) = g.plans.values()
    for kernel in _fused(program):
        found.setdefault(kernel.cuda_source, (f"float32 Gaussian NLL: {kernel.definition.source}", kernel))
    return list(found.values())


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_fused_regions_cuda_sources_compile_with_nvcc() -> None:
    from jacacc.kernels import cuda_ptx_many

    kernels = _cuda_kernels()
    assert len(kernels) >= 8 and any(k.dtype == np.float32 for _, k in kernels)
    # one nvcc run for all (it costs about a second per run); the float32 and float64 sources
    # apart, since each declares its own `real` (a namespace each keeps them apart as well)
    entries = cuda_ptx_many([k.cuda_source for _, k in kernels])
    for (label, _), found in zip(kernels, entries, strict=True):
        assert len(found) == 1, label


@pytest.mark.exhaustive  # one g++ build per region: 10 s
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
def test_fused_regions_cuda_kernels_run_on_the_host_match_the_reference() -> None:
    """Each region's CUDA kernel run thread by thread as host C++ (the CUDA body is plain C++ over
    CUDA's math overloads) against the region evaluated node by node."""
    from jacacc.kernels import host_kernel

    rng = np.random.default_rng(11)
    for label, kernel in _cuda_kernels():
        inputs = [rng.uniform(0.5, 1.5, x.shape).astype(kernel.dtype) for x in kernel.region.inputs]
        want = np.reshape(kernel.reference(np, inputs), kernel.kernel_shape)
        # built into the kernel cache directory: a later run loads the library built from the same source
        run = host_kernel(kernel.cuda_source, len(inputs), len(kernel.kernel_shape) + sum(kernel.ranks.values()))
        out = np.full(kernel.kernel_shape, np.nan, dtype=kernel.dtype)
        run(out, *(np.ascontiguousarray(a).reshape(1) if scalar else np.ascontiguousarray(a)
                   for a, scalar in zip(inputs, kernel.scalar_inputs, strict=True)))
        _close(out, want, rtol=1e-12 if kernel.dtype == np.float64 else 1e-5)
        assert out.dtype == kernel.dtype, label


def test_fused_regions_run_node_by_node_where_a_cuda_kernel_would_not_pay() -> None:
    """A long sum per thread on few threads loses to CuPy's parallel reductions: such a region is
    evaluated node by node on the GPU; an elementwise region, or short sums, run as one kernel."""
    x = var("x", (100_000,))
    [total] = fusion.find_regions([einsum("i->", unary("tanh", unary("shift", x, 1.0)))], min_size=0)
    [pointwise] = fusion.find_regions([unary("tanh", unary("shift", x, 1.0))], min_size=0)
    y, _, _ = _centered_squares()
    [columns] = fusion.find_regions([y], min_size=0)
    assert not fusion.FusedKernel(total, np.float64).cuda_worthwhile
    assert fusion.FusedKernel(pointwise, np.float64).cuda_worthwhile
    assert fusion.FusedKernel(columns, np.float64).cuda_worthwhile  # 5 terms per thread
    # on NumPy arrays the interpreter's step is the reference, never a device kernel
    kernel = fusion.FusedKernel(pointwise, np.float64)
    values = np.linspace(-1.0, 1.0, 100_000)
    _close(kernel.evaluate(np, [values]), np.tanh(values + 1.0))
    assert kernel._cuda_kernel is None


def test_the_fusion_threshold_is_the_recorded_measurement() -> None:
    """FUSION_MIN_SIZE holds the crossovers experiments/fusion_threshold.py recorded, as its
    ``min_sizes`` gives them (a rerun that moves them must move the constant too)."""
    from jacacc.bench import read_record

    record = read_record(REPO / "results" / "fusion_threshold.json")["results"]
    recorded = {kind: {int(k): size for k, size in sizes.items()} for kind, sizes in record["min_sizes"].items()}
    assert SHIPPED_MIN_SIZE == recorded
    for kind, sizes in record["crossovers"].items():
        for k, size in sizes.items():
            assert fusion.min_size_of(kind, int(k), recorded) == size


# ----------------------------------------------------------------------------- scalar factors
def test_scalar_factors_move_where_a_region_multiplies_by_them() -> None:
    """A contraction's scalar factor goes to an elementwise operand only it reads, or to its output
    read by one elementwise step — not onto an array far larger than the one its path scaled."""
    X, w, v = var("X", (40, 30)), var("w", (30,)), var("v", (40,))
    c = const(-0.5)
    into_operand = einsum("i,ij,->j", unary("tanh", v), X, c)
    into_output = unary("exp", einsum("ij,j,->i", X, w, c))
    u, t = var("u", (3000,)), var("t", (3000,))
    too_large = unary("exp", einsum("i,j,->ij", u, t, c))
    # a scaling kept apart from the one contraction that reads it (a tie in FLOPs) is taken in first
    apart = unary("exp", einsum("ij,j->i", X, einsum("j,->j", w, c)))
    moved = fusion.scales_into_regions([into_operand, into_output, too_large, apart])
    assert moved[3].args[0].param == "i,->i" and moved[3].args[0].args[0].args == (X, w)
    assert moved[0].param == "i,ij->j" and moved[0].args[0].param == "i,->i"
    assert moved[0].args[0].args == (into_operand.args[0], c)
    assert moved[1].args[0].param == "i,->i" and moved[1].args[0].args[0].param == "ij,j->i"
    assert moved[2] is too_large
    rng = np.random.default_rng(12)
    x, wv, vv = rng.normal(size=(40, 30)), rng.normal(size=30), rng.normal(size=40)
    program = Program([into_operand, into_output, apart], [X, w, v])
    assert _fused(program)
    got = program(x, wv, vv)
    _close(got[0], -0.5 * np.tanh(vv) @ x)
    _close(got[1], np.exp(-0.5 * x @ wv))
    _close(got[2], np.exp(-0.5 * x @ wv))


def test_first_calls_run_node_by_node_then_the_kernel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With COMPILE_AFTER = 2 a region's first two calls run node by node (no compile, the
    reference's numbers), the third compiles the kernel and runs it; a kernel found in the
    on-disk cache runs from the first call."""
    monkeypatch.setattr(fusion, "COMPILE_AFTER", 2)
    monkeypatch.setenv("JACACC_CACHE_DIR", str(tmp_path))
    x = var("x", (64,))
    y = einsum("i->", unary("pow", unary("sin", unary("shift", x, 0.3125)), 3.0))
    X = np.linspace(-1.0, 1.0, 64)
    reference = Program([y], [x], fuse_kernels=False)(X)[0]

    def fresh() -> tuple[Program, fusion.FusedKernel]:
        program = Program([y], [x])
        [kernel] = program.fused_kernels
        return program, kernel

    program, kernel = fresh()
    for call in (1, 2):
        _close(program(X)[0], reference, rtol=1e-14)  # node by node, as the unfused program computes
        assert kernel.calls == call and kernel.first_call_seconds is None
    _close(program(X)[0], reference)
    assert kernel.first_call_seconds is not None and kernel.compiled_now()
    program, kernel = fresh()  # the same kernel, now on disk: used on the first call
    _close(program(X)[0], reference)
    assert kernel.calls == 1 and kernel.first_call_seconds is not None


def test_regions_past_the_compile_budget_run_node_by_node(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Once a program's compiles have spent COMPILE_BUDGET seconds, its other regions are not
    compiled (a loop of small steps made one kernel per step: minutes on the third call): they
    run node by node, with the reference's numbers; a kernel already on disk still loads."""
    monkeypatch.setattr(fusion, "COMPILE_AFTER", 0)
    monkeypatch.setenv("JACACC_CACHE_DIR", str(tmp_path))
    x = var("x", (64,))
    ys = [einsum("i->", unary("pow", unary("sin", unary("shift", x, 0.25 * k)), 3.0)) for k in range(1, 4)]
    X = np.linspace(-1.0, 1.0, 64)
    reference = Program(ys, [x], fuse_kernels=False)(X)
    monkeypatch.setattr(fusion, "COMPILE_BUDGET", 1e-9)  # the first compile spends it all
    program = Program(ys, [x])
    assert len(program.fused_kernels) == 3
    for _ in range(3):
        for got, want in zip(program(X), reference, strict=True):
            _close(got, want, rtol=1e-14)
    compiled = [k for k in program.fused_kernels if k.first_call_seconds is not None]
    # the compiled kernel is called by the program itself once it has run (run() counts no more)
    assert len(compiled) == 1 and [k.calls for k in program.fused_kernels].count(3) == 2 and compiled[0].calls == 1
    monkeypatch.setattr(fusion, "COMPILE_BUDGET", 0.0)  # nothing to spend: only the kernel on disk runs
    again = Program(ys, [x])
    for got, want in zip(again(X), reference, strict=True):
        _close(got, want)
    assert [k.first_call_seconds is not None for k in again.fused_kernels].count(True) == 1


def test_the_straight_line_program_calls_a_compiled_kernel_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a region's kernel has run compiled, the generated program's global names the Numba
    kernel, not the wrapper that counts and checks; the values stay the reference's."""
    monkeypatch.setattr(fusion, "COMPILE_AFTER", 0)
    x = var("x", (64,))
    y = einsum("i->", unary("pow", unary("sin", unary("shift", x, 0.5)), 3.0))
    X = np.linspace(-1.0, 1.0, 64)
    (want,) = Program([y], [x], fuse_kernels=False)(X)
    program = Program([y], [x])
    (kernel,) = program.fused_kernels
    _close(program(X)[0], want, rtol=1e-14)  # the first call writes the program and compiles the kernel
    namespace = program._straight_line.__globals__
    (name,) = [n for n in namespace if n.startswith("kernel")]
    assert namespace[name] is kernel.kernel
    for _ in range(3):
        _close(program(X)[0], want, rtol=1e-14)
    assert kernel.calls == 1


@pytest.mark.parametrize("text, value", [("-1", None), ("soon", None), ("2.5", 2.5), (None, 10.0)])
def test_compile_budget_is_read_from_the_environment(text: str | None, value: float | None) -> None:
    if value is None:
        with pytest.raises(ValueError, match="JACACC_COMPILE_BUDGET must be a number of seconds >= 0"):
            fusion._compile_budget(text)
    else:
        assert fusion._compile_budget(text) == value


@pytest.mark.parametrize("text, value", [(None, 2), ("0", 0), ("5", 5), ("-1", None), ("soon", None)])
def test_compile_after_is_read_from_the_environment(text: str | None, value: int | None) -> None:
    if value is None:
        with pytest.raises(ValueError, match="JACACC_COMPILE_AFTER must be an integer >= 0"):
            fusion._compile_after(text)
    else:
        assert fusion._compile_after(text) == value


def test_kernels_run_on_the_calling_thread_beside_products_openblas_threads():
    """A program with a matrix product OpenBLAS shares among its threads runs its kernels on the
    calling thread (a parallel kernel after such a product waited for a core: 7.9 against 0.6 ms on
    two cores); one without keeps its large kernels parallel."""
    from jacacc import kernels
    from jacacc.tensor.evaluate import Program
    from jacacc.tensor.straightline import SINGLE_THREAD_GEMM

    n = 256
    assert n ** 3 > SINGLE_THREAD_GEMM and n * n >= kernels.PARALLEL_MIN_ELEMENTS
    A, B = var("A", (n, n)), var("B", (n, n))
    elementwise = unary("tanh", unary("exp", A))
    with_product = Program([add(einsum("ij,jk->ik", A, B), elementwise)], [A, B])
    alone = Program([elementwise], [A])
    assert with_product.fused_kernels and not any(k.parallel for k in with_product.fused_kernels)
    assert alone.fused_kernels and all(k.parallel for k in alone.fused_kernels)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    for _ in range(4):  # past the kernel's compile
        (got,) = with_product(a, b)
    _close(got, a @ b + np.tanh(np.exp(a)))
