"""Compiled Jacobian kernels against JAX and PyTorch on the zoo's functions.

For every function problem of the zoo (those tagged ``scale`` and ``LEFT_OUT`` excepted), every
method × backend of ``jacacc.compile`` and every peer (JAX ``jit(vmap(jacfwd))``
/ ``jit(vmap(jacrev))``, PyTorch ``vmap(jacfwd)`` / ``vmap(jacrev)``) is timed at
10^3 and 10^5 points (Jacobians per second, best of three calls), with the
roofline estimate of each kernel.  Then the compile time of the numba kernel
of a graph with more than 10^4 edges (Encoder_m) is measured for several part
sizes, and Encoder_s's.  Writes ``results/kernel_benchmark.json`` and ``figures/kernel_benchmark.png``.

    python experiments/kernel_benchmark.py                          # ~15 minutes on 2 cores, idle
    python experiments/kernel_benchmark.py --problems RoeFlux_1d --sizes 100 --out /tmp/kb --no-compile-scaling
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from jacacc.bench import (
    bench_kernels,
    machine_peaks,
    plot_kernel_benchmark,
    summarize_kernel_benchmark,
    write_record,
)
from jacacc.problems import get, names

# forward mode is left out by default: on these functions (few inputs or few outputs) reverse or
# markowitz is always cheaper, and forward kernels of the large ones take minutes to compile
METHODS = ("reverse", "markowitz")
# the numpy backend is the tests' reference; add it with --backends numpy numba ...;
# "numba+fastmath" gains little with the vectorized body
BACKENDS = ("numba",)
PEERS = ("jax-jacfwd", "jax-jacrev", "torch-jacfwd", "torch-jacrev")
SIZES = (1_000, 100_000)
# compile time of big kernels: (problem, part sizes)
COMPILE_SCALING = (("Encoder_m", (1_000, 1_500, 2_000)), ("Encoder_s", (1_500,)))
# PyTorch's vmap(jacfwd) / vmap(jacrev) on the three largest take minutes per call at 10^5 points
SKIP = tuple(f"{p}:torch-{mode}" for p in ("GaussianDataFitting", "Perceptron_params_s", "Perceptron_s")
             for mode in ("jacfwd", "jacrev"))
# JAX's jit(vmap(jacfwd)) on Encoder_s (1 845 edges) had not finished after 12 minutes at 10^5 points
LEFT_OUT = ("Encoder_s",)


def zoo_functions() -> list[str]:
    """The zoo's function problems but those tagged ``scale`` and those in ``LEFT_OUT``."""
    return [n for n in names()
            if get(n).kind == "function" and "scale" not in get(n).tags and n not in LEFT_OUT]


def compile_scaling(problem: str, part_sizes: tuple[int, ...], method: str = "markowitz") -> list[dict]:
    """Code size and numba compile time of ``problem``'s kernel for each part size."""
    from jacacc.codegen import compile as compile_kernel

    traced = get(problem).trace()
    rows = []
    for part in part_sizes:
        start = time.perf_counter()
        kernel = compile_kernel(traced, backend="numba", method=method, cache=False,
                                backend_options={"max_statements": part, "disk_cache": False})
        codegen = time.perf_counter() - start
        kernel.compile()
        row = {
            "problem": problem, "edges": traced.graph.n_edges, "method": method, "max_statements": part,
            "statements": len(kernel.program.statements), "source_lines": kernel.source.count("\n"),
            "source_bytes": len(kernel.source), "codegen_s": codegen, "compile_s": kernel.compile_time,
            "mults": kernel.mults, "skipped": kernel.skipped,
        }
        rows.append(row)
        print(f"{problem}: {row['edges']} edges, parts of {part}: {row['statements']} statements, "
              f"{row['source_lines']} lines, codegen {codegen:.1f} s, numba compile {kernel.compile_time:.1f} s",
              flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="*", default=None, help="default: the zoo's functions")
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    parser.add_argument("--backends", nargs="*", default=list(BACKENDS))
    parser.add_argument("--peers", nargs="*", default=list(PEERS))
    parser.add_argument("--sizes", nargs="*", type=int, default=list(SIZES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", nargs="*", default=list(SKIP), metavar="PROBLEM:IMPL",
                        help="leave out one implementation on one problem (default: %(default)s)")
    parser.add_argument("--no-compile-scaling", action="store_true")
    parser.add_argument("--out", default=".", help="directory holding results/ and figures/")
    args = parser.parse_args(argv)
    problems = args.problems or zoo_functions()
    peaks = machine_peaks()
    print(f"peaks: {peaks['flops'] / 1e9:.1f} GFLOP/s, {peaks['calls'] / 1e9:.2f} G calls/s (libm {peaks['libm_calls'] / 1e9:.2f}, vector helpers {peaks['vector_calls'] / 1e9:.2f}), "
          f"{peaks['bandwidth'] / 1e9:.1f} GB/s", flush=True)
    params = {"problems": problems, "methods": args.methods, "backends": args.backends, "peers": args.peers,
              "skip": args.skip,
              "sizes": args.sizes, "repeat": args.repeat, "dtype": "float64",
              "points": "problem.sample(seed) * N(1, 0.01^2) per coordinate"}
    record_path = os.path.join(args.out, "results", "kernel_benchmark.json")
    rows: list[dict] = []
    skip = {tuple(s.split(":", 1)) for s in args.skip}
    for problem in problems:
        rows += bench_kernels(problem, methods=args.methods, backends=args.backends,
                              peers=[p for p in args.peers if (problem, p) not in skip],
                              sizes=args.sizes, repeat=args.repeat, seed=args.seed, peaks=peaks)
        # written after each problem, so an interrupted run keeps what it measured
        write_record(record_path, "kernel_benchmark", {"rows": rows, "peaks": peaks, "partial": True},
                     parameters=params, seed=args.seed)
    summary = summarize_kernel_benchmark(rows)
    for s in summary:
        best = {k: v for k, v in s.items() if isinstance(v, dict)}
        text = ", ".join(f"{k} {v['jacobians_per_s']:.3g}/s ({v['impl']})" for k, v in best.items())
        ratio, reused = s.get("numba_over_jax"), s.get("numba_reused_over_jax")
        print(f"{s['problem']}: {text}" + (f"; numba/jax {ratio:.2f}x" if ratio else "")
              + (f" ({reused:.2f}x with reused result buffers)" if reused else ""), flush=True)
    scaling = [] if args.no_compile_scaling else [
        row for problem, parts in COMPILE_SCALING for row in compile_scaling(problem, parts)]
    results = {"rows": rows, "summary": summary, "peaks": peaks, "compile_scaling": scaling}
    write_record(record_path, "kernel_benchmark", results, parameters=params, seed=args.seed)
    plot_kernel_benchmark(rows, os.path.join(args.out, "figures", "kernel_benchmark.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
