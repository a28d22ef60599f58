"""Paper 001 (Bernstein et al., "Differentiating a Tensor Language"): cheap, purely functional gradients.

What the paper says
-------------------
§1: naive reverse mode breaks the cheap-gradient principle on tensor code —
the adjoint of trace is diag, which writes the n² − n off-diagonal zeros, and
with XLA the gradient of "first column times first row" of A runs in O(n²)
although the function is O(n).  Carrying sparsity as Iverson brackets keeps
the gradient as cheap as the function.  §2.1: the adjoint of a 1-D convolution
is a correlation, and the gradient of the sum-of-squares deconvolution loss
is "a pipeline of two stencil operations".  §2.3: let-lifting the batched
example (a ``let`` nested in the sum over the batch) exposes a batched
convolution and "can always be performed without increasing the
operation-count cost".

What this script does (each claim asserted)
-------------------------------------------
(a) trace: ``iv.grad(Σ_i A[i, i], A)`` is ``⊞_i ⊞_j [i = j]`` — diag — with no
    arithmetic at all under the §4.3 cost model (the function costs n − 1
    additions), for every n; its compiled (Numba) code writes the n diagonal
    entries of a zero matrix.  Run time is measured for n = 10² … 10⁴ and the
    slope of log(time) over log(n) fitted: asserted below 1.5 (linear),
    JAX's ``jit(grad(trace))`` and PyTorch's ``trace(A).backward()`` shown beside
    (they write the dense n × n gradient: slope about 2).
(b) first column × first row, f(A) = Σ_i A[i, 0]·A[0, i]: the gradient
    ``⊞_i ⊞_j [j = 0]·A[0, i] + [i = 0]·A[j, 0]`` costs one addition (where both
    brackets hold) against the function's 2n − 1 operations; compiled it runs
    in O(n) (slope asserted below 1.5), JAX and PyTorch beside.
(c) the adjoint of the convolution y = ⊞_i Σ_k x[i + k]·w[k] with respect to x
    is printed; it is the correlation ⊞_m Σ_k [0 ≤ m − k < n]·ȳ[m − k]·w[k]
    (asserted structurally: one Σ over the kernel, reads ȳ at m − k) and equals
    ``np.convolve(ȳ, w, "full")``.
(d) the gradient of Σ_i (y[i] − b[i])² with respect to x has exactly two
    sums, both over the kernel's extent (two stencils: the convolution and the
    correlation of the residual), equals the closed form and central differences.
(e) the batched example: let-lifting moves the ``let`` out of the sum over the
    batch (⊞_b ⊞_i …, a batched convolution) with exactly the same cost.

Run ``python paper_reproductions/001_tensor_language.py``; ``main()`` returns
0 when every check passes (an ``AssertionError`` otherwise).  ``QUICK=1`` in the
environment uses n ≤ 2000 and 10 ms of calls per time (the tests do).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import numpy as np

import jacacc.iverson as iv
from jacacc.iverson.syntax import Access, Sum, walk

QUICK = bool(os.environ.get("QUICK"))
SIZES = [100, 200, 500, 1000, 2000] if QUICK else [100, 200, 500, 1000, 2000, 5000, 10000]
#: seconds of calls behind each time (best of five): 10 ms suffice for the slopes at the quick sizes
MIN_TOTAL = 0.01 if QUICK else 0.05


def best_time(fn: Callable[[], object], min_total: float = MIN_TOTAL, repeats: int = 5) -> float:
    """The best of ``repeats`` averages, each over enough calls to last ``min_total`` seconds."""
    fn()
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_total / repeats or calls >= 1 << 16:
            break
        calls *= 4
    best = elapsed / calls
    for _ in range(repeats - 1):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def slope(sizes: list[int], times: list[float]) -> float:
    """Least-squares slope of log(time) against log(n)."""
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


def peer_times(make: Callable[[int], tuple[Callable[[], object], Callable[[], object]]]) -> dict[str, list[float]]:
    """Times of the JAX and PyTorch gradients (where installed) for every size."""
    out: dict[str, list[float]] = {}
    for name in ("jax", "torch"):
        try:
            times = [best_time(make(n)[0 if name == "jax" else 1]) for n in SIZES]
        except ImportError:
            continue
        out[name] = times
    return out


def jax_and_torch(f_jax: Callable, f_torch: Callable) -> Callable[[int], tuple[Callable, Callable]]:
    def make(n: int) -> tuple[Callable, Callable]:
        import jax
        import torch

        jax.config.update("jax_enable_x64", True)
        A = np.random.default_rng(0).random((n, n))
        g = jax.jit(jax.grad(f_jax))
        Aj = jax.numpy.asarray(A)
        At = torch.tensor(A, requires_grad=True)

        def run_jax() -> object:
            return g(Aj).block_until_ready()

        def run_torch() -> object:
            At.grad = None
            f_torch(At).backward()
            return At.grad

        return run_jax, run_torch

    return make


def scaling(name: str, build: Callable[[int], iv.Expr], peers: dict[str, list[float]]) -> float:
    """Compile the gradient for every size, time it, print the table, return the fitted slope.

    jacacc's kernel is timed writing into the buffer an earlier call returned
    (``out=``: the dense n × n result whose off-support entries are already zero),
    so it does the gradient's own work — O(n) writes; the time with a fresh
    ``np.zeros`` result is shown beside (the operating system zeroes the pages
    the writes touch, with transparent huge pages up to all n² entries).
    """
    ours, fresh = [], []
    for n in SIZES:
        A = iv.var("A", (n, n))
        g = iv.grad(build(n), A)
        kernel = iv.compile(g, backend="numba")
        X = np.random.default_rng(1).random((n, n))
        buffer = kernel(A=X)
        assert np.array_equal(kernel(A=X, out=buffer), iv.compile(g, backend="numpy")(A=X))
        ours.append(best_time(lambda kernel=kernel, X=X, buffer=buffer: kernel(A=X, out=buffer)))
        fresh.append(best_time(lambda kernel=kernel, X=X: kernel(A=X), repeats=3))
    print(f"\n{name}: gradient time [s]")
    print(f"{'n':>7} {'jacacc':>11} {'(fresh out)':>11} " + " ".join(f"{p:>11}" for p in peers))
    for k, n in enumerate(SIZES):
        print(f"{n:>7} {ours[k]:>11.3g} {fresh[k]:>11.3g} " + " ".join(f"{peers[p][k]:>11.3g}" for p in peers))
    s = slope(SIZES, ours)
    print(f"slope of log time over log n: jacacc {s:.2f} (fresh out {slope(SIZES, fresh):.2f}); "
          + ", ".join(f"{p} {slope(SIZES, t):.2f}" for p, t in peers.items()))
    return s


def trace_program(n: int) -> iv.Expr:
    A = iv.var("A", (n, n))
    i = iv.index("i")
    return iv.sum(i, n, A[i, i])


def column_row_program(n: int) -> iv.Expr:
    A = iv.var("A", (n, n))
    i = iv.index("i")
    return iv.sum(i, n, A[i, 0] * A[0, i])


def check_trace() -> None:
    for n in (3, 50, 10_000):
        f = trace_program(n)
        g = iv.grad(f, iv.var("A", (n, n)))
        assert str(g) == f"⊞_{{i<{n}}} ⊞_{{j<{n}}} [i = j]", str(g)
        assert iv.cost(g) == {"add": 0, "mul": 0, "nonlinear": 0}
        assert iv.cost(f) == {"add": n - 1, "mul": 0, "nonlinear": 0}
    assert np.array_equal(iv.evaluate(g if n == 3 else iv.grad(trace_program(3), iv.var("A", (3, 3))),
                                      A=np.ones((3, 3))), np.eye(3))
    print("grad trace =", iv.grad(trace_program(4), iv.var("A", (4, 4))), "(cost 0; trace costs n - 1)")
    import jax.numpy as jnp
    import torch

    peers = peer_times(jax_and_torch(lambda A: jnp.trace(A), lambda A: torch.trace(A)))
    s = scaling("trace", trace_program, peers)
    assert s < 1.5, f"the gradient of trace should run in O(n); fitted slope {s:.2f}"


def check_column_row() -> None:
    n = 6
    A = iv.var("A", (n, n))
    f = column_row_program(n)
    g = iv.grad(f, A)
    print("\ngrad Σ_i A[i,0]·A[0,i] =", g)
    assert iv.cost(g)["add"] + iv.cost(g)["mul"] <= 1, iv.cost(g)
    assert iv.cost(f) == {"add": n - 1, "mul": n, "nonlinear": 0}
    X = np.random.default_rng(2).random((n, n))
    expected = np.zeros((n, n))
    expected[:, 0] += X[0, :]
    expected[0, :] += X[:, 0]
    assert np.allclose(iv.evaluate(g, A=X), expected)
    import jax.numpy as jnp
    import torch

    peers = peer_times(jax_and_torch(lambda A: jnp.dot(A[:, 0], A[0, :]), lambda A: torch.dot(A[:, 0], A[0, :])))
    s = scaling("first column × first row", column_row_program, peers)
    assert s < 1.5, f"the gradient should run in O(n); fitted slope {s:.2f}"


def convolution(n: int, k: int) -> tuple[iv.Expr, iv.Expr, iv.Expr]:
    x, w = iv.var("x", (n + k - 1,)), iv.var("w", (k,))
    i, j = iv.index("i"), iv.index("j")
    return iv.gen(i, n, iv.sum(j, k, x[i + j] * w[j])), x, w


def check_convolution_adjoint() -> None:
    n, k = 12, 3
    y, x, w = convolution(n, k)
    ybar = iv.var("ȳ", (n,))
    adj = iv.adjoint(y, x, ybar)
    print("\nadjoint of the convolution ⊞_i Σ_j x[i + j]·w[j] w.r.t. x:\n ", adj)
    sums = [e for e in walk(adj) if isinstance(e, Sum)]
    assert len(sums) == 1 and sums[0].extent == k, "one sum over the kernel: a correlation"
    reads = [e for e in walk(adj) if isinstance(e, Access) and getattr(e.target, "name", None) == "ȳ"]
    assert reads and all(r.idx.coeff(sums[0].index) == -1 for r in reads), "ȳ read at m - k"
    rng = np.random.default_rng(3)
    yb, wv = rng.standard_normal(n), rng.standard_normal(k)
    got = iv.evaluate(adj, x=rng.standard_normal(n + k - 1), w=wv, **{"ȳ": yb})
    assert np.allclose(got, np.convolve(yb, wv, "full"))
    compiled = iv.compile(adj, backend="numpy")
    assert np.allclose(compiled(w=wv, **{"ȳ": yb}), got)


def check_deconvolution_gradient() -> None:
    n, k = 20, 4
    y, x, w = convolution(n, k)
    b = iv.var("b", (n,))
    i = iv.index("i")
    loss = iv.let("y", y, lambda yv: iv.sum(i, n, (yv[i] - b[i]) * (yv[i] - b[i])))
    g = iv.grad(loss, x)
    print("\ngradient of the deconvolution loss Σ_i (y[i] - b[i])² w.r.t. x:\n ", str(g).replace("\n", "\n  "))
    sums = [e for e in walk(g) if isinstance(e, Sum)]
    assert len(sums) == 2 and all(s.extent == k for s in sums), "a pipeline of two stencils"
    rng = np.random.default_rng(4)
    X, W, B = rng.standard_normal(n + k - 1), rng.standard_normal(k), rng.standard_normal(n)
    residual = np.array([X[t:t + k] @ W for t in range(n)]) - B
    expected = 2 * np.convolve(residual, W, "full")
    got = iv.evaluate(g, x=X, w=W, b=B)
    assert np.allclose(got, expected)
    h = 1e-6
    fd = np.array([(iv.evaluate(loss, x=X + h * e, w=W, b=B) - iv.evaluate(loss, x=X - h * e, w=W, b=B)) / (2 * h)
                   for e in np.eye(n + k - 1)])
    assert np.allclose(got, fd, atol=1e-6)
    assert iv.cost(g)["mul"] <= 3 * iv.cost(loss)["mul"], (iv.cost(g), iv.cost(loss))


def check_batched_let_lifting() -> None:
    batch, n, k = 5, 10, 3
    X, Y, w = iv.var("X", (batch, n + k - 1)), iv.var("Y", (batch, n)), iv.var("w", (k,))
    b, i, j = iv.index("b"), iv.index("i"), iv.index("j")
    loss = iv.sum(b, batch, iv.let("y", iv.gen(i, n, iv.sum(j, k, X[b, i + j] * w[j])),
                                   lambda y: iv.sum(i, n, (y[i] - Y[b, i]) * (y[i] - Y[b, i]))))
    lifted = iv.let_lift(loss)
    print("\nbatched loss, let-lifted:\n ", str(lifted).replace("\n", "\n  "))
    assert iv.cost(lifted) == iv.cost(loss), (iv.cost(lifted), iv.cost(loss))
    assert str(lifted).startswith("let y") and "⊞_{b<5} ⊞_{i<10}" in str(lifted), "a batched convolution"
    rng = np.random.default_rng(5)
    arrays = {"X": rng.standard_normal((batch, n + k - 1)), "Y": rng.standard_normal((batch, n)),
              "w": rng.standard_normal(k)}
    assert np.isclose(iv.evaluate(lifted, **arrays), iv.evaluate(loss, **arrays))
    assert np.allclose(iv.evaluate(iv.grad(lifted, w), **arrays), iv.evaluate(iv.grad(loss, w), **arrays))


def main() -> int:
    check_convolution_adjoint()
    check_deconvolution_gradient()
    check_batched_let_lifting()
    check_trace()
    check_column_row()
    print("\nall paper 001 checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
