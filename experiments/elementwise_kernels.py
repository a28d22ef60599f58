"""Gather-form derivative kernels of elementwise functions (paper 000 §5) against JAX and PyTorch.

Paper 000 derives, for each argument of an elementwise-defined function, an
expression whose every element is one independent gather over the elements of
``df`` that read it (eq. 47): "one thread per element of the derivative", no
atomics, no temporary memory.  Reverse mode in JAX and PyTorch instead
scatter-adds (or transposes a convolution).  This script times all gradients of
one vector-Jacobian product — given the inputs and ``df``, from scratch — of

* ``section6``: the paper's §6 function ``exp(−Σ_k ((a[i,k] + b[j,k])²·c[i,i] + d[i+k]³))``
  with ``i``, ``j`` scaled up (K = 5 as in the paper),
* ``conv1d``: ``f[i] = Σ_k w[k]·x[i + k]`` (9 taps),
* ``conv2d``: ``f[i, j] = Σ_p Σ_q w[p, q]·x[i + p, j + q]`` (3 × 3),
* ``lowrank``: ``f[i, j] = tanh(x[i + j])·y[j]`` — ``x`` is read along anti-diagonals, so the
  scatter-add of reverse mode collides on every element,

for ``f.compile("numba")`` (``k.vjp``: one parallel kernel per argument), ``jax.jit`` of
``jax.vjp`` and ``torch.autograd.grad`` on the same functions written idiomatically in
``jax.numpy`` / ``torch`` (broadcasting, ``jnp.correlate``, ``correlate2d`` / ``conv1d``,
``conv2d``, fancy indexing), each result checked equal to jacacc's first (float64).  Output
sizes run from 10⁴ to 10⁷ elements; the median of ``--repeat`` samples (the tools taking turns) is recorded per case,
size and tool (the first call, which compiles, is recorded apart: jacacc's kernels are cached on disk,
so on a machine that ran the benchmark before it loads them), with the ratio of jacacc's time
to the best peer's.

Writes ``results/elementwise_kernels.json`` and ``figures/elementwise_kernels.png``.

    python experiments/elementwise_kernels.py              # a few minutes on 2 cores
    QUICK=1 python experiments/elementwise_kernels.py --out /tmp/ek.json --figure /tmp/ek.png   # seconds
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Numba's OpenMP threads spin after each parallel loop, by default for 300 000 iterations; on a
# two-core machine they then steal the cores from the next launch and from the peers' thread pools
# (seen: 8 ms per launch of a 1 µs kernel, and NumPy 10× slower beside them).  Passive waiting
# (OMP_WAIT_POLICY=passive) avoids that but costs 50–170 µs to wake the pool for every kernel; a
# short spin (GOMP_SPINCOUNT=10000, microseconds) keeps the pool awake between the kernels of one
# vjp and asleep otherwise.  Set before Numba starts; recorded with the results.
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import numpy as np  # noqa: E402

import jacacc.elementwise as ew  # noqa: E402
from jacacc.bench import write_record  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "elementwise_kernels"
SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (10_000,)  # one size: every size recompiles every kernel (~1 s each with Numba)
TOOLS = ("jacacc", "jax", "torch")
SECTION6_K = 5
CONV1D_TAPS = 9
CONV2D_TAPS = 3


# ----------------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    """One function: its source for a target output size, sample arrays, and the peers' versions.

    ``build(n)`` gives ``(source, sizes, shapes)`` with about ``n`` output elements;
    ``jax_fn`` and ``torch_fn`` take the arrays positionally in sorted name order.
    """

    name: str
    description: str
    build: Callable[[int], tuple[str, dict[str, int], dict[str, tuple[int, ...]]]]
    sample: Callable[[np.random.Generator, dict[str, tuple[int, ...]]], dict[str, np.ndarray]]
    jax_fn: Callable[..., Any]
    torch_fn: Callable[..., Any]


def _side(n: int) -> int:
    return max(2, round(math.sqrt(n)))


def section6_build(n: int) -> tuple[str, dict[str, int], dict[str, tuple[int, ...]]]:
    m, k = _side(n), SECTION6_K
    source = f"f[i, j] = exp(-sum(k, 0, {k - 1}, (a[i, k] + b[j, k])**2 * c[i, i] + d[i + k]**3))"
    return source, {"i": m, "j": m}, {"a": (m, k), "b": (m, k), "c": (m, m), "d": (m + k - 1,)}


def section6_sample(rng: np.random.Generator, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    # small magnitudes keep exp(−Σ) away from underflow, so every gradient element is checked
    return {"a": rng.uniform(-0.5, 0.5, shapes["a"]), "b": rng.uniform(-0.5, 0.5, shapes["b"]),
            "c": rng.uniform(0.0, 1.0, shapes["c"]), "d": rng.uniform(-0.5, 0.5, shapes["d"])}


def section6_jax(a, b, c, d):
    import jax.numpy as jnp

    m, k = a.shape
    window = d[jnp.arange(m)[:, None] + jnp.arange(k)[None, :]]
    s = jnp.sum((a[:, None, :] + b[None, :, :]) ** 2, axis=2) * jnp.diagonal(c)[:, None]
    return jnp.exp(-(s + jnp.sum(window**3, axis=1)[:, None]))


def section6_torch(a, b, c, d):
    import torch

    m, k = a.shape
    window = d[torch.arange(m)[:, None] + torch.arange(k)[None, :]]
    s = torch.sum((a[:, None, :] + b[None, :, :]) ** 2, dim=2) * torch.diagonal(c)[:, None]
    return torch.exp(-(s + torch.sum(window**3, dim=1)[:, None]))


def conv1d_build(n: int) -> tuple[str, dict[str, int], dict[str, tuple[int, ...]]]:
    k = CONV1D_TAPS
    return (f"f[i] = sum(k, 0, {k - 1}, w[k] * x[i + k])", {"i": n}, {"w": (k,), "x": (n + k - 1,)})


def normal_sample(rng: np.random.Generator, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    return {name: rng.standard_normal(shape) for name, shape in shapes.items()}


def conv1d_jax(w, x):
    import jax.numpy as jnp

    return jnp.correlate(x, w, mode="valid")  # Σ_k x[i + k]·w[k]


def conv1d_torch(w, x):
    import torch.nn.functional as F

    return F.conv1d(x[None, None], w[None, None])[0, 0]  # PyTorch's conv is a correlation


def conv2d_build(n: int) -> tuple[str, dict[str, int], dict[str, tuple[int, ...]]]:
    m, k = _side(n), CONV2D_TAPS
    source = f"f[i, j] = sum(p, 0, {k - 1}, sum(q, 0, {k - 1}, w[p, q] * x[i + p, j + q]))"
    return source, {"i": m, "j": m}, {"w": (k, k), "x": (m + k - 1, m + k - 1)}


def conv2d_jax(w, x):
    from jax.scipy.signal import correlate2d

    return correlate2d(x, w, mode="valid")


def conv2d_torch(w, x):
    import torch.nn.functional as F

    return F.conv2d(x[None, None], w[None, None])[0, 0]


def lowrank_build(n: int) -> tuple[str, dict[str, int], dict[str, tuple[int, ...]]]:
    m = _side(n)
    return "f[i, j] = tanh(x[i + j]) * y[j]", {"i": m, "j": m}, {"x": (2 * m - 1,), "y": (m,)}


def lowrank_jax(x, y):
    import jax.numpy as jnp

    m = y.shape[0]
    return jnp.tanh(x[jnp.arange(x.shape[0] - m + 1)[:, None] + jnp.arange(m)[None, :]]) * y[None, :]


def lowrank_torch(x, y):
    import torch

    m = y.shape[0]
    return torch.tanh(x[torch.arange(x.shape[0] - m + 1)[:, None] + torch.arange(m)[None, :]]) * y[None, :]


CASES = {
    "section6": Case("section6", "§6: exp(−Σ_k ((a[i,k] + b[j,k])²·c[i,i] + d[i+k]³)), K = 5, i, j ≈ √n",
                     section6_build, section6_sample, section6_jax, section6_torch),
    "conv1d": Case("conv1d", "1-D convolution Σ_k w[k]·x[i + k], 9 taps", conv1d_build, normal_sample,
                   conv1d_jax, conv1d_torch),
    "conv2d": Case("conv2d", "2-D convolution Σ_p Σ_q w[p,q]·x[i+p, j+q], 3 × 3, i, j ≈ √n", conv2d_build,
                   normal_sample, conv2d_jax, conv2d_torch),
    "lowrank": Case("lowrank", "tanh(x[i + j])·y[j], i, j ≈ √n: every x element read √n times", lowrank_build,
                    normal_sample, lowrank_jax, lowrank_torch),
}


# ----------------------------------------------------------------------------- the tools


def jacacc_vjp(case: Case, source: str, sizes: dict[str, int], arrays: dict[str, np.ndarray]
               ) -> tuple[Callable[[np.ndarray], dict[str, np.ndarray]], Any]:
    kernel = ew.define(source, sizes).compile(backend="numba")
    return lambda df: kernel.vjp(df, **arrays), kernel


def jax_vjp(case: Case, arrays: dict[str, np.ndarray]) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    import jax

    names = sorted(arrays)
    args = [jax.numpy.asarray(arrays[n]) for n in names]

    @jax.jit
    def gradients(df, *values):
        return jax.vjp(case.jax_fn, *values)[1](df)

    def run(df: Any) -> dict[str, Any]:
        return dict(zip(names, jax.block_until_ready(gradients(df, *args)), strict=True))

    return run


def torch_vjp(case: Case, arrays: dict[str, np.ndarray]) -> Callable[[Any], dict[str, Any]]:
    import torch

    names = sorted(arrays)
    leaves = [torch.tensor(arrays[n], dtype=torch.float64, requires_grad=True) for n in names]

    def run(df: Any) -> dict[str, Any]:
        out = case.torch_fn(*leaves)
        return dict(zip(names, torch.autograd.grad(out, leaves, df), strict=True))

    return run


def calls_per_sample(fn: Callable[[], Any], min_time: float = 0.02, warmup: float = 0.05) -> int:
    """Warm ``fn`` up for ``warmup`` seconds (three calls at least) and return how many calls make
    a sample of ``min_time`` seconds (short calls are otherwise dominated by the clock)."""
    once, calls, start = [], 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - start < warmup:
        t = time.perf_counter()
        fn()
        once.append(time.perf_counter() - t)
        calls += 1
    per_call = min(once)
    return 1 if per_call >= min_time else math.ceil(min_time / max(per_call, 1e-7))


def interleaved_medians(runners: dict[str, Callable[[], Any]], repeat: int) -> dict[str, list[float]]:
    """Seconds per call of each runner, ``repeat`` samples each, the tools taking turns.

    Round by round rather than tool by tool: on a shared two-core machine a disturbance of a few
    hundred milliseconds (other processes, the kernel reclaiming the pages of a large run) was
    seen inflating every sample of whichever tool ran then by 100×; taking turns spreads it over
    the tools, and the median drops it.
    """
    calls = {tool: calls_per_sample(fn) for tool, fn in runners.items()}
    samples: dict[str, list[float]] = {tool: [] for tool in runners}
    for _ in range(repeat):
        for tool, fn in runners.items():
            start = time.perf_counter()
            for _ in range(calls[tool]):
                fn()
            samples[tool].append((time.perf_counter() - start) / calls[tool])
    return samples


def check_equal(ours: dict[str, np.ndarray], theirs: dict[str, Any], what: str, rtol: float = 1e-8) -> float:
    """Assert two gradient dicts agree (relative to each gradient's largest entry); return the
    largest relative difference."""
    worst = 0.0
    for name, value in ours.items():
        other = np.asarray(theirs[name])
        assert other.shape == value.shape, f"{what}: d{name} has shape {other.shape}, jacacc {value.shape}"
        scale = max(float(np.max(np.abs(other))), 1e-300)
        err = float(np.max(np.abs(value - other))) / scale
        assert err <= rtol, f"{what}: d{name} differs from jacacc by {err:.3g} (relative to its largest entry)"
        worst = max(worst, err)
    return worst


def bench_case(case: Case, n: int, repeat: int, seed: int, tools: tuple[str, ...], budget: float,
               slow: set[str]) -> dict[str, Any]:
    """Time every tool on ``case`` at about ``n`` output elements; check the peers against jacacc first."""
    source, sizes, shapes = case.build(n)
    rng = np.random.default_rng(seed)
    arrays = case.sample(rng, shapes)
    out_shape = tuple(sizes.values())
    df = rng.standard_normal(out_shape)
    row: dict[str, Any] = {"case": case.name, "target": n, "outputs": int(np.prod(out_shape)), "source": source,
                           "sizes": sizes, "shapes": {k: list(v) for k, v in shapes.items()}, "tools": {}}
    run, kernel = jacacc_vjp(case, source, sizes, arrays)
    start = time.perf_counter()
    reference = run(df)  # compiles every derivative kernel for these shapes
    row["tools"]["jacacc"] = {"first_call_s": time.perf_counter() - start}
    row["kernels"] = list(kernel.sources)  # the function's, any stored intermediates', each derivative's
    peers = {"jax": lambda: jax_vjp(case, arrays), "torch": lambda: torch_vjp(case, arrays)}
    runners: dict[str, Callable[[], Any]] = {"jacacc": lambda: run(df)}
    for tool in tools:
        if tool == "jacacc":
            continue
        if tool in slow:  # an earlier size took longer than the budget: larger ones are left out
            row["tools"][tool] = {"skipped": f"a smaller size took more than {budget:g} s"}
            continue
        peer = peers[tool]()
        if tool == "torch":
            import torch

            peer_df = torch.tensor(df)
        else:
            peer_df = df
        start = time.perf_counter()
        result = peer(peer_df)
        row["tools"][tool] = {"first_call_s": time.perf_counter() - start,
                              "max_relative_difference": check_equal(reference, result, f"{case.name} n={n} {tool}")}
        runners[tool] = lambda peer=peer, peer_df=peer_df: peer(peer_df)
    timed = interleaved_medians({t: fn for t, fn in runners.items() if t in tools}, repeat)
    for tool, samples in timed.items():
        median = statistics.median(samples)
        row["tools"][tool].update({"median_s": median, "samples_s": samples})
        if median > budget:
            slow.add(tool)
    times = {t: v["median_s"] for t, v in row["tools"].items() if "median_s" in v}
    peer_times = {t: s for t, s in times.items() if t != "jacacc"}
    if "jacacc" in times and peer_times:
        best = min(peer_times, key=peer_times.get)
        row["best_peer"] = best
        row["jacacc_over_best_peer"] = times["jacacc"] / peer_times[best]
    return row


# ----------------------------------------------------------------------------- output


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Median vjp time against output elements, one panel per case, one line per tool."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r["case"] for r in rows))
    fig, axes = plt.subplots(1, len(cases), figsize=(4.2 * len(cases), 3.8), squeeze=False)
    labels = {"jacacc": "jacacc (Numba, gather)", "jax": "JAX jit(vjp)", "torch": "PyTorch autograd"}
    for ax, case in zip(axes[0], cases, strict=True):
        mine = [r for r in rows if r["case"] == case]
        for tool, marker in zip(TOOLS, "os^", strict=True):
            points = [(r["outputs"], r["tools"][tool]["median_s"]) for r in mine
                      if "median_s" in r["tools"].get(tool, {})]
            if points:
                ax.loglog(*zip(*points, strict=True), marker=marker, label=labels[tool])
        last = mine[-1]
        ratio = last.get("jacacc_over_best_peer")
        ax.set_title(f"{case}" + (f"\njacacc / best peer at n = {last['outputs']:.0e}: {ratio:.2g}" if ratio else ""),
                     fontsize=9)
        ax.set_xlabel("output elements")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("all gradients of one vjp [s] (median)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_table(rows: list[dict[str, Any]], header: bool = True) -> None:
    if header:
        print(f"{'case':<9} {'outputs':>9} " + " ".join(f"{t:>10}" for t in TOOLS) + f" {'jacacc/best':>12}")
    for r in rows:
        cells = []
        for t in TOOLS:
            v = r["tools"].get(t, {})
            cells.append(f"{v['median_s']:>10.3g}" if "median_s" in v else f"{'—':>10}")
        ratio = r.get("jacacc_over_best_peer")
        print(f"{r['case']:<9} {r['outputs']:>9} " + " ".join(cells)
              + (f" {ratio:>8.2f} ({r['best_peer']})" if ratio else ""), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--sizes", nargs="*", type=int, default=None,
                        help=f"target output elements (default {SIZES}; {QUICK_SIZES} with QUICK=1 or --quick)")
    parser.add_argument("--tools", nargs="*", default=list(TOOLS), choices=list(TOOLS))
    parser.add_argument("--repeat", type=int, default=None, help="timed samples per tool (default 7; 3 quick)")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="a peer whose median exceeds this many seconds is left out at larger sizes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small sizes only (also: QUICK=1 in the environment)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / f"{EXPERIMENT}.json")
    parser.add_argument("--figure", type=Path, default=ROOT / "figures" / f"{EXPERIMENT}.png")
    args = parser.parse_args(argv)
    quick = args.quick or bool(os.environ.get("QUICK"))
    sizes = tuple(args.sizes or (QUICK_SIZES if quick else SIZES))
    repeat = args.repeat or (3 if quick else 7)

    import jax
    import numba
    import torch

    jax.config.update("jax_enable_x64", True)  # every tool in float64, as jacacc's kernels are
    params = {"cases": {c: CASES[c].description for c in args.cases}, "sizes": list(sizes), "tools": args.tools,
              "repeat": repeat, "budget_s": args.budget, "quick": quick, "dtype": "float64",
              "numba_threads": numba.get_num_threads(), "torch_threads": torch.get_num_threads(),
              "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
              "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
              "timing": "median of `repeat` samples, the tools taking turns, after 0.05 s (3 calls at least) "
                        "of warm-up each; a sample averages calls until 0.02 s; the first call (compilation, or "
                        "for jacacc a load from its on-disk kernel cache) is recorded apart",
              "measured": "all gradients of one vjp from the inputs and df (jacacc: k.vjp; JAX: jit of vjp "
                          "including the forward pass; PyTorch: forward + autograd.grad)"}
    rows: list[dict[str, Any]] = []
    for name in args.cases:
        slow: set[str] = set()
        for n in sizes:
            rows.append(bench_case(CASES[name], n, repeat, args.seed, tuple(args.tools), args.budget, slow))
            print_table(rows[-1:], header=len(rows) == 1)
            # written after each size, so an interrupted run keeps what it measured
            write_record(args.out, EXPERIMENT, {"rows": rows, "partial": True}, parameters=params, seed=args.seed)
    summary = [{"case": r["case"], "outputs": r["outputs"], "ratio": r.get("jacacc_over_best_peer"),
                "best_peer": r.get("best_peer")} for r in rows]
    write_record(args.out, EXPERIMENT, {"rows": rows, "summary": summary}, parameters=params, seed=args.seed)
    plot(rows, args.figure)
    print()
    print_table(rows)
    print(f"wrote {args.out} and {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
