"""Where a fused kernel starts to beat NumPy node by node (issue 26, item 2: the fusion threshold).

The tensor evaluator runs a region of elementwise nodes either as one NumPy
call per node (each a pass over memory and a few hundred nanoseconds of
dispatch) or as one Numba loop kernel (:mod:`jacacc.tensor.fusion`: one pass,
one dispatch of about a microsecond).  This script times both on regions of
2–8 operations over 10²–10⁶ elements, on one thread:

* ``elementwise``: a chain of k operations on vectors, cycling through a
  product with a second vector, a shift, ``tanh``, a square, a sum with the
  second vector, a product, ``logistic`` and a shift;
* ``reduction``: a chain of k − 1 operations from the second on (the shift
  first: a product would merge into the sum as one einsum), summed to a scalar.

and, per function ``f`` of the kernel language on 10⁵ elements, NumPy's ufunc
against a kernel computing it alone, and NumPy's ``f(x) * exp(x)`` (three
calls) against one kernel of it: a function whose kernel loses the second race
is left out of regions (:data:`jacacc.tensor.fusion.SLOW_IN_KERNELS`) — NumPy
calls SIMD implementations of many (SVML on AVX-512) where Numba calls libm
one element at a time, and a libm call in a loop also keeps LLVM from
vectorizing the rest of it (the inlined ``exp``/``log``/``tanh`` helpers).

Each time is the best of several repeats of the program's straight-line
function (:mod:`jacacc.tensor.straightline`), fused (every region fused:
``FUSION_MIN_SIZE`` set to 0) and unfused (``Program(..., fuse_kernels=False)``),
after checking that both agree.  The record gives, per kind and k, the
smallest size from which the kernel is not slower at every larger size
measured (the crossover: one Numba dispatch against k NumPy calls), and those
crossovers as the table :data:`jacacc.tensor.fusion.FUSION_MIN_SIZE` holds
(``min_sizes``: per kind, the sizes by k where they change).  Fusing a region
costs its compilation once (0.1–0.5 s, a few milliseconds from the disk
cache), as ``jax.jit`` compiles a function on its first call.  Writes ``results/fusion_threshold.json``.

Usage::

    python experiments/fusion_threshold.py            # about a minute
    python experiments/fusion_threshold.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jacacc.bench import time_call, write_record  # noqa: E402

EXPERIMENT = "fusion_threshold"
SIZES = (10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000, 300_000, 1_000_000)
#: a function whose kernel of ``f(x) * exp(x)`` takes more than this times NumPy's is left out of regions
SLOW_RATIO = 1.5
#: a speed-up above this is "not slower" (timings on a shared machine vary by a few per cent)
NOISE = 0.95
OPERATIONS = tuple(range(2, 9))


def _steps() -> list[Callable[[Any, Any], Any]]:
    """The chain's operations, each one NumPy call when run node by node: ``step(t, y)``."""
    from jacacc.tensor.expr import add, einsum, unary

    return [
        lambda t, y: einsum("i,i->i", t, y),
        lambda t, y: unary("shift", t, 1.0),
        lambda t, y: unary("tanh", t),
        lambda t, y: unary("pow", t, 2.0),
        lambda t, y: add(t, y),
        lambda t, y: einsum("i,i->i", t, y),
        lambda t, y: unary("logistic", t),
        lambda t, y: unary("shift", t, -0.5),
    ]


def region(kind: str, operations: int, n: int) -> tuple[Any, tuple[Any, Any]]:
    """The expression of one region and its two ``var`` inputs."""
    from jacacc.tensor.expr import einsum, var

    x, y = var("x", (n,)), var("y", (n,))
    t = x
    steps = _steps()[1:operations] if kind == "reduction" else _steps()[:operations]
    for step in steps:
        t = step(t, y)
    if kind == "reduction":
        t = einsum("i->", t)
    return t, (x, y)


def programs(expression: Any, inputs: tuple[Any, Any]) -> tuple[Any, Any]:
    """The fused (every region, whatever its size) and unfused programs of ``expression``."""
    from jacacc.tensor import fusion
    from jacacc.tensor.evaluate import Program

    saved = fusion.FUSION_MIN_SIZE
    fusion.FUSION_MIN_SIZE = 0
    try:
        fused = Program([expression], inputs, fuse_kernels=True)
    finally:
        fusion.FUSION_MIN_SIZE = saved
    unfused = Program([expression], inputs, fuse_kernels=False)
    if not any(node.kind == "fused" for node in fused.nodes):
        raise RuntimeError("the region was not fused (is Numba installed?)")
    return fused, unfused


def measure(kind: str, operations: int, n: int, rng: np.random.Generator, repeats: int,
            budget: float) -> dict[str, Any]:
    expression, inputs = region(kind, operations, n)
    fused, unfused = programs(expression, inputs)
    regions = [node.param.region for node in fused.nodes if node.kind == "fused"]
    x, y = rng.uniform(-1.0, 1.0, n), rng.uniform(-1.0, 1.0, n)
    start = time.perf_counter()
    got = fused(x, y)[0]  # compiles the kernel (or loads it from the disk cache)
    first = time.perf_counter() - start
    np.testing.assert_allclose(got, unfused(x, y)[0], rtol=1e-12, atol=1e-12 * n)
    fused_s = time_call(lambda: fused(x, y), repeat=repeats, min_time=budget)
    unfused_s = time_call(lambda: unfused(x, y), repeat=repeats, min_time=budget)
    return {"kind": kind, "operations": operations, "n": n, "kernels": len(regions),
            "numpy_calls": sum(r.operations for r in regions), "fused_us": fused_s * 1e6,
            "unfused_us": unfused_s * 1e6, "speedup": unfused_s / fused_s, "first_call_s": first}


def function_rows(n: int, rng: np.random.Generator, repeats: int, budget: float,
                  names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Per function of the kernel language (or of ``names``): NumPy's ufunc against a kernel of it
    alone, and NumPy's ``f(x) * exp(x)`` against a kernel of that, on ``n`` elements."""
    from jacacc import ops
    from jacacc.elementwise.parse import FUNCTIONS, parse
    from jacacc.kernels import numba_kernel

    rows = []
    for name in names or FUNCTIONS:
        x = rng.uniform(0.1, 0.9, n) + (1.0 if name == "arccosh" else 0.0)
        out = np.empty(n)
        f = ops.get(name).function
        row: dict[str, Any] = {"function": name, "n": n}
        for label, text, numpy_version in (
                ("alone", f"f[i] = {name}(x[i])", lambda f=f, x=x: f(x)),
                ("with_exp", f"f[i] = {name}(x[i]) * exp(x[i])", lambda f=f, x=x: f(x) * np.exp(x))):
            kernel = numba_kernel(parse(text), ["x"], parallel=False, cache=True)
            kernel(out, x)
            np.testing.assert_allclose(out, numpy_version(), rtol=1e-12)
            numpy_s = time_call(numpy_version, repeat=repeats, min_time=budget)
            kernel_s = time_call(lambda k=kernel, x=x, out=out: k(out, x), repeat=repeats, min_time=budget)
            row.update({f"{label}_numpy_us": numpy_s * 1e6, f"{label}_kernel_us": kernel_s * 1e6,
                        f"{label}_ratio": kernel_s / numpy_s})
        rows.append(row)
    return rows


def crossovers(rows: list[dict[str, Any]]) -> dict[str, dict[int, int | None]]:
    """Per kind and number of operations: the smallest size from which the kernel is not slower
    (speed-up at least :data:`NOISE`) at every larger size measured (None: never)."""
    out: dict[str, dict[int, int | None]] = {}
    for kind in sorted({r["kind"] for r in rows}):
        out[kind] = {}
        for k in sorted({r["operations"] for r in rows if r["kind"] == kind}):
            series = sorted((r["n"], r["speedup"]) for r in rows if r["kind"] == kind and r["operations"] == k)
            found = None
            for n, speedup in reversed(series):
                if speedup < NOISE:
                    break
                found = n
            out[kind][k] = found
    return out


def min_sizes(found: dict[str, dict[int, int | None]]) -> dict[str, dict[int, int | None]]:
    """The crossovers as :data:`jacacc.tensor.fusion.FUSION_MIN_SIZE` holds them: per kind, the
    size by number of operations where it changes (more operations take the last entry).

    >>> min_sizes({"elementwise": {2: 300, 3: 100, 4: 10, 5: 10}, "reduction": {2: 10, 3: 10}})
    {'elementwise': {2: 300, 3: 100, 4: 10}, 'reduction': {2: 10}}
    """
    table: dict[str, dict[int, int | None]] = {}
    for kind, sizes in found.items():
        table[kind] = {}
        for k, size in sorted(sizes.items()):
            if not table[kind] or list(table[kind].values())[-1] != size:
                table[kind][k] = size
    return table


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| kind | ops | n | fused | unfused | speed-up |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['operations']} | {r['n']} | {r['fused_us']:.2f} µs | "
                     f"{r['unfused_us']:.2f} µs | {r['speedup']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the measurement on one Numba thread (set here and restored: never through the
    environment, which Numba re-reads and refuses to change once its threads run)."""
    import numba

    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return _measure_and_record(argv)
    finally:
        numba.set_num_threads(threads)


def _measure_and_record(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="two sizes, two chain lengths, two functions (a smoke run)")
    parser.add_argument("--out", default=".", help="directory holding results/ (default the repo root)")
    options = parser.parse_args(argv)
    sizes, operations = ((100, 1000), (2, 3)) if options.quick else (SIZES, OPERATIONS)
    repeats, budget = (2, 0.002) if options.quick else (7, 0.02)
    rng = np.random.default_rng(options.seed)
    functions = function_rows(1000 if options.quick else 100_000, rng, repeats, budget,
                              ("exp", "log1p") if options.quick else None)
    slow = sorted(r["function"] for r in functions if r["with_exp_ratio"] > SLOW_RATIO)
    print("\n".join(f"{r['function']:12s} alone: numpy {r['alone_numpy_us']:8.1f} µs kernel {r['alone_kernel_us']:8.1f} µs"
                    f" | with exp: numpy {r['with_exp_numpy_us']:8.1f} µs kernel {r['with_exp_kernel_us']:8.1f} µs "
                    f"ratio {r['with_exp_ratio']:5.2f}" for r in functions))
    print(f"slower in a kernel than {SLOW_RATIO}× NumPy: {slow}")
    rows = [measure(kind, k, n, rng, repeats, budget)
            for kind in ("elementwise", "reduction") for k in operations for n in sizes]
    print(table(rows))
    found = crossovers(rows)
    chosen = min_sizes(found)
    print(f"crossovers: {found}")
    print(f"FUSION_MIN_SIZE: {chosen}")
    path = os.path.join(options.out, "results", f"{EXPERIMENT}.json")
    write_record(path, EXPERIMENT, {"rows": rows, "crossovers": found, "min_sizes": chosen, "noise": NOISE,
                                    "functions": functions, "slow_ratio": SLOW_RATIO,
                                    "slow_in_kernels": slow},
                 parameters={"sizes": list(sizes), "operations": list(operations), "quick": options.quick,
                             "threads": 1, "repeats": repeats, "min_time_s": budget}, seed=options.seed)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
