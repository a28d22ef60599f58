"""Paper 002, §3–4: cross-country mode beats reverse mode on logistic regression; compression makes the matrix-factorization Newton step O(k³).

What the paper says
-------------------
§3 "Cross-Country Mode": for expressions like f(x) = B g(h(Ax)) the
derivative B diag(u) diag(v) A is cheaper when the vectors u and v are
multiplied elementwise first and the result then meets the matrices, instead
of multiplying left to right (reverse) or right to left (forward); such
expressions are "fairly common in second order derivatives", e.g. the
gradient of Σ g(h(Ax)).  §4: on logistic regression f(w) = Σ_i log(exp(−y_i
X_i w) + 1) "our cross-country mode is about 30% faster on the CPU" than
reverse mode.

§3 "Compressing Derivatives": the Hessian of f(U) = ‖T − UVᵀ‖² w.r.t. U is
H = 2 (V *(ij,ik,jk) V) *(jl,ik,ijkl) I ∈ R^{n×k×n×k}; "Newton-type algorithms
for this problem solve the Newton system which takes time in O((nk)³).
However, the Hessian can be compressed to 2(V *(ij,ik,jk) V) which is a small
matrix of size k × k. This matrix can be inverted in O(k³) time." The paper
quotes about 10 µs for the compressed against about 1 s for the dense solve
at n = 1000, k = 10.

What this script does
---------------------
(a) Logistic regression (m = 2n, dense random data): the FLOPs of the Hessian
    expression derived in each mode (``jacacc.tensor.derivative_expression(f,
    w, X, y, order=2, mode=m).flops``: every einsum, sum and elementwise
    function the evaluator runs) for several n, and the time of
    ``jacacc.tensor.hessian(f, mode=m)`` at n = 256: the median of 41
    interleaved samples per mode (each sample loops the call for at least
    20 ms), both Hessians checked against Xᵀ diag(s(1−s)) X first.  Asserted:
    cross-country needs fewer FLOPs than reverse at every n, and its median
    time is at most reverse's plus 5 % (noise).  Where the timing claim fails
    on the machine at hand the script says so and asserts the FLOP claim only.
    Why cross-country wins: reverse mode pulls the m × n matrix X back through
    each elementwise function (five m × n passes and two transposes), while
    cross-country first multiplies the m-vectors of the chain into one and
    scales X once; the extra work is O(mn) against the O(mn²) of Xᵀ D X, so
    the FLOP gap shrinks as 1/n, but the m × n passes are memory-bound and
    the measured gap is larger.

(b) Matrix factorization with Ω all ones (f(U) = ‖T − UVᵀ‖²), n = 200, k = 5:
    ``hessian(f, compress=True)`` stores a k × k tensor equal to 2VᵀV (asserted
    on ``.stored``; its ``.dense()`` equals the uncompressed Hessian and the
    closed form δ(i, i′)·2VᵀV); the Newton step Δ solving H·Δ = ∇f is computed
    both ways — one (nk) × (nk) dense solve, and one k × k solve for all n rows
    at once, Δ = ∇f (2VᵀV)^{-1} — and the two agree; both solves are timed
    (median of repeats) and the compressed one must be at least 100 times
    faster.  A short table at n = 100, 200, 400 shows the gap growing with n (printed, not asserted: as n² asymptotically).
    With a general mask Ω the compressed Hessian is the n blocks
    2Vᵀ diag(Ω_i²) V (stored n × k × k): n small solves, O(nk³), also checked.

Run ``python paper_reproductions/002_tensor_calculus.py``; ``main()`` returns
0 when every check passes (an ``AssertionError`` otherwise).
"""

from __future__ import annotations

import statistics
import sys

import numpy as np

import jacacc.tensor as jt
from jacacc.bench import time_call

SEED = 0
FLOP_SIZES = (16, 64, 256, 1024)
TIMING_N = 256
TIMING_SAMPLES = 41
SAMPLE_S = 0.02
NOISE = 1.05  # cross-country's median may exceed reverse's by this factor and still count as "not slower"
MF_N, MF_K = 200, 5
MF_SIZES = (100, 200, 400)
MIN_SPEEDUP = 100.0


def logistic(w, X, y):
    return np.sum(np.log(np.exp(-y * (X @ w)) + 1))


def logistic_data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = 2 * n
    return rng.standard_normal(n) / np.sqrt(n), rng.standard_normal((m, n)), rng.choice([-1.0, 1.0], m)


def logistic_hessian(w, X, y):
    s = 1.0 / (1.0 + np.exp(y * (X @ w)))
    return (X.T * (s * (1 - s))) @ X


def interleaved_medians(calls: dict[str, object], samples: int) -> dict[str, float]:
    """Median seconds per call of each entry, sampled in turn so that load changes hit all alike."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(samples):
        for name, call in calls.items():
            times[name].append(time_call(call, repeat=1, min_time=SAMPLE_S))
    return {name: statistics.median(t) for name, t in times.items()}


def cross_country_vs_reverse(rng: np.random.Generator) -> bool:
    print("(a) logistic regression, m = 2n: Hessian FLOPs by mode")
    print(f"{'n':>6} {'reverse':>14} {'cross_country':>14} {'forward':>14} {'cc / reverse':>13}")
    for n in FLOP_SIZES:
        args = logistic_data(n, rng)
        flops = {m: jt.derivative_expression(logistic, *args, order=2, mode=m).flops
                 for m in ("reverse", "cross_country", "forward")}
        print(f"{n:>6} {flops['reverse']:>14,} {flops['cross_country']:>14,} {flops['forward']:>14,} "
              f"{flops['cross_country'] / flops['reverse']:>13.4f}")
        assert flops["cross_country"] < flops["reverse"], f"n={n}: cross-country needs no fewer FLOPs than reverse"

    args = logistic_data(TIMING_N, rng)
    reference = logistic_hessian(*args)
    hessians = {m: jt.hessian(logistic, mode=m) for m in ("reverse", "cross_country")}
    for h in hessians.values():  # the first call builds the plan; the result is checked before timing
        np.testing.assert_allclose(h(*args), reference, rtol=1e-10, atol=1e-12)
    print(f"\nexpression at n = {TIMING_N} (cross-country):")
    print(jt.derivative_expression(logistic, *args, order=2, mode="cross_country"))
    print("expression (reverse):")
    print(jt.derivative_expression(logistic, *args, order=2, mode="reverse"))
    medians = interleaved_medians({m: (lambda h=h: h(*args)) for m, h in hessians.items()}, TIMING_SAMPLES)
    ratio = medians["cross_country"] / medians["reverse"]
    print(f"\nHessian time at n = {TIMING_N} (median of {TIMING_SAMPLES} interleaved samples): "
          f"reverse {medians['reverse'] * 1e3:.3f} ms, cross-country {medians['cross_country'] * 1e3:.3f} ms, "
          f"cross-country / reverse = {ratio:.3f} ({(1 - ratio) * 100:.0f}% less time; the paper: about 30%)")
    holds = ratio <= NOISE
    if holds:
        print("claim (a) holds: cross-country needs fewer FLOPs and no more time than reverse")
    else:
        print(f"claim (a), timing part, does NOT hold on this machine: cross-country / reverse = {ratio:.3f} > "
              f"{NOISE} (only the FLOP claim is asserted)")
    return holds


def mf(U, V, T):
    return np.sum((T - U @ V.T) ** 2)


def mf_masked(U, V, T, Omega):
    return np.sum((Omega * (T - U @ V.T)) ** 2)


def newton_solves(n: int, k: int, rng: np.random.Generator, *, verbose: bool) -> tuple[float, float]:
    """Check the compressed Hessian at (n, k) and time the dense and the compressed Newton solve."""
    U, V, T = rng.standard_normal((n, k)), rng.standard_normal((n, k)), rng.standard_normal((n, n))
    Hc = jt.hessian(mf, compress=True)(U, V, T)
    H = jt.hessian(mf)(U, V, T)
    G = jt.grad(mf)(U, V, T)
    gram = 2 * V.T @ V
    closed = np.einsum("ij,ab->iajb", np.eye(n), gram)  # δ(i, i′) · 2VᵀV
    assert Hc.stored.shape == (k, k), f"the compressed Hessian stores {Hc.stored.shape}, not k × k"
    np.testing.assert_allclose(Hc.stored, gram, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(H, closed, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(Hc.dense(), H, rtol=0, atol=0)
    np.testing.assert_allclose(G, -2 * (T - U @ V.T) @ V, rtol=1e-12, atol=1e-9)
    if verbose:
        print(f"{Hc!r}")
        print(f"stored: {Hc.stored.shape} = 2VᵀV, {Hc.nbytes} bytes against {Hc.dense_nbytes:,} dense "
              f"({Hc.dense_nbytes // Hc.nbytes}× less)")

    dense_matrix = H.reshape(n * k, n * k)

    def dense_solve():
        return np.linalg.solve(dense_matrix, G.reshape(n * k)).reshape(n, k)

    def compressed_solve():
        return np.linalg.solve(Hc.stored, G.T).T  # Δ = G (2VᵀV)^{-1}: one k × k solve, n right-hand sides

    np.testing.assert_allclose(compressed_solve(), dense_solve(), rtol=1e-9, atol=1e-11)
    dense_s = statistics.median(time_call(dense_solve, repeat=1, min_time=SAMPLE_S) for _ in range(7))
    compressed_s = statistics.median(time_call(compressed_solve, repeat=1, min_time=SAMPLE_S) for _ in range(7))
    return dense_s, compressed_s


def compression(rng: np.random.Generator) -> None:
    print(f"\n(b) matrix factorization, Ω all ones, n = {MF_N}, k = {MF_K}: compressed Hessian and Newton step")
    dense_s, compressed_s = newton_solves(MF_N, MF_K, rng, verbose=True)
    print(f"Newton step: dense ({MF_N * MF_K} × {MF_N * MF_K}) solve {dense_s * 1e3:.3f} ms, compressed "
          f"({MF_K} × {MF_K}, {MF_N} right-hand sides) {compressed_s * 1e6:.1f} µs: "
          f"{dense_s / compressed_s:,.0f}× faster; the two steps agree")
    assert dense_s / compressed_s >= MIN_SPEEDUP, (
        f"the compressed solve is only {dense_s / compressed_s:.1f}× faster (expected ≥ {MIN_SPEEDUP:g}×)")

    print(f"\n{'n':>5} {'k':>3} {'dense solve':>13} {'compressed':>12} {'speed-up':>10}")
    speedups = []
    for n in MF_SIZES:
        d, c = newton_solves(n, MF_K, rng, verbose=False)
        speedups.append(d / c)
        print(f"{n:>5} {MF_K:>3} {d * 1e3:>10.3f} ms {c * 1e6:>9.1f} µs {d / c:>9,.0f}×")
    # The growth of the speed-up with n is shown, not asserted: timings of a loaded machine
    # can reorder neighbouring sizes (the ≥ 100× claim above has a margin no load erases).
    print(f"speed-up at n = {MF_SIZES[-1]} over n = {MF_SIZES[0]}: {speedups[-1] / speedups[0]:.2f}× "
          f"(dense O((nk)³) against compressed O(k³ + nk²): {(MF_SIZES[-1] / MF_SIZES[0]) ** 2:.0f}× expected)")

    # with a mask the compressed Hessian is the n diagonal blocks 2 Vᵀ diag(Ω_i²) V
    n, k = 50, MF_K
    U, V, T = rng.standard_normal((n, k)), rng.standard_normal((n, k)), rng.standard_normal((n, n))
    Omega = (rng.random((n, n)) < 0.5).astype(float)
    Hc = jt.hessian(mf_masked, compress=True)(U, V, T, Omega)
    blocks = 2 * np.einsum("ij,ja,jb->iab", Omega**2, V, V)
    layout = Hc.layout
    print(f"\nwith a 0/1 mask Ω (n = {n}): {Hc!r}")
    assert Hc.stored.size == n * k * k, f"masked: stored {Hc.stored.shape}, expected the n k × k blocks"
    assert layout.startswith("T[jik]"), layout  # stored[a, i, b] = H[i, a, i, b]
    np.testing.assert_allclose(np.transpose(Hc.stored, (1, 0, 2)), blocks, rtol=1e-12, atol=1e-10)
    G = jt.grad(mf_masked)(U, V, T, Omega)
    step = np.linalg.solve(blocks, G[:, :, None])[:, :, 0]  # n solves of k × k: O(n k³)
    dense = Hc.dense().reshape(n * k, n * k)
    np.testing.assert_allclose(step.reshape(-1), np.linalg.solve(dense, G.reshape(-1)), rtol=1e-8, atol=1e-10)
    print("n block solves of k × k give the dense Newton step")
    print("claim (b) holds: the compressed Hessian is 2VᵀV (k × k) and its Newton step is the dense one, "
          f"{dense_s / compressed_s:,.0f}× faster at n = {MF_N}, k = {MF_K}")


def main() -> int:
    rng = np.random.default_rng(SEED)
    timing_holds = cross_country_vs_reverse(rng)
    compression(rng)
    print("\nsummary: (a) FLOPs asserted; timing " + ("holds" if timing_holds else "NOT reproduced (reported, not asserted)")
          + "; (b) asserted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
