"""jacacc.tensor on a CUDA GPU: fused regions as CUDA kernels, and the breadth objectives against JAX and PyTorch.

Issue 26 (item 2) runs the tensor evaluator's fused regions as CUDA kernels
(:mod:`jacacc.tensor.fusion`, through :func:`jacacc.kernels.cuda_source` and CuPy)
when the arguments are CuPy arrays.  Two measurements, on one GPU, written to
``results/gpu_tensor.json``:

* ``regions`` — where a region's CUDA kernel beats running the region node by
  node with CuPy (one CuPy kernel per node): the regions of
  ``fusion_threshold.py`` (a chain of k elementwise operations on vectors of n,
  and the same chain summed to a scalar) at k = 2, 4, 8 and n = 10³ … 10⁷,
  every region made a kernel (``FUSION_MIN_SIZE`` 0, no bound on ``CUDA_MAX_SERIAL``).
  A reduction's kernel sums serially in one thread per output element, which is
  what :data:`~jacacc.tensor.fusion.CUDA_MAX_SERIAL` bounds; ``row_sums`` times
  such a chain on 2²² entries summed along rows of 4 … 4096 (one thread per row).
* ``breadth`` — the objectives of ``tensor_breadth.py`` (gradient and Hessian)
  on CuPy arrays: ``jacacc.tensor.grad``/``hessian`` with fused regions as CUDA
  kernels (``jacacc``) and node by node (``jacacc-unfused``,
  ``JACACC_FUSION_CUDA=0`` semantics), ``jax.jit`` on the GPU, and
  ``torch.func`` on CUDA tensors.  Every result is checked against JAX's
  (relative to its largest entry, 1e-8) before it is timed; a timed call ends
  with the device synchronized.

Timings: one warm-up call, then the best of ``--repeats`` samples, each the
call looped for at least 10 ms.  Needs CuPy and a GPU; JAX and PyTorch rows are
skipped (recorded) where those are missing or see no GPU.

    python experiments/gpu_tensor.py                 # about three minutes on an H100/H200
    python experiments/gpu_tensor.py --quick --out /tmp/g
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from jacacc.bench import time_call, write_record
from jacacc.progress import note

EXPERIMENT = "gpu_tensor"
REGION_SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
REGION_OPERATIONS = (2, 4, 8)
ROW_LENGTHS = (4, 16, 64, 256, 1024, 4096)
PARTS = ("regions", "row_sums", "breadth")
QUANTITIES = ("gradient", "hessian")
TOLERANCE = 1e-8
MIN_SAMPLE_S = 0.01


def synchronize() -> None:
    """Wait for every CuPy, JAX and PyTorch kernel queued on the GPU."""
    import cupy

    cupy.cuda.Device().synchronize()
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        sys.modules["torch"].cuda.synchronize()


def timed(call: Callable[[], Any], repeats: int) -> float:
    """Best seconds of ``repeats`` samples of ``call`` (device synchronized after each call)."""

    def synchronized() -> None:
        call()
        synchronize()

    synchronized()
    return time_call(synchronized, repeat=repeats, min_time=MIN_SAMPLE_S)


# =========================================================================== regions
@contextlib.contextmanager
def every_region_a_kernel() -> Iterator[None]:
    """No bound on a thread's serial sum while the block runs: every fused region a CUDA kernel."""
    from jacacc.tensor import fusion

    saved = fusion.CUDA_MAX_SERIAL
    fusion.CUDA_MAX_SERIAL = 1 << 62
    try:
        yield
    finally:
        fusion.CUDA_MAX_SERIAL = saved


def race(got: Any, fused: Any, unfused: Any, x: Any, y: Any, repeats: int) -> dict[str, float]:
    """The fused program's result ``got`` checked against node by node, then both timed on (x, y)."""
    import cupy as cp

    want = unfused(x, y)[0]
    error = float(cp.max(cp.abs(got - want)) / max(1.0, float(cp.max(cp.abs(want)))))
    fused_s = timed(lambda: fused(x, y), repeats)
    unfused_s = timed(lambda: unfused(x, y), repeats)
    return {"max_rel_error": error, "fused_us": fused_s * 1e6, "unfused_us": unfused_s * 1e6,
            "speedup": unfused_s / fused_s}


def region_rows(sizes: tuple[int, ...], operations: tuple[int, ...], repeats: int) -> list[dict]:
    """Fused CUDA kernel against node by node (CuPy) for each region kind, k and n."""
    import cupy as cp
    from fusion_threshold import programs, region

    rows = []
    with every_region_a_kernel():
        for kind in ("elementwise", "reduction"):
            for k in operations:
                for n in sizes:
                    fused, unfused = programs(*region(kind, k, n))
                    rng = np.random.default_rng(n + k)
                    x, y = (cp.asarray(rng.uniform(-1.0, 1.0, n)) for _ in range(2))
                    start = time.perf_counter()
                    got = fused(x, y)[0]
                    synchronize()
                    first = time.perf_counter() - start
                    kernels = [node.param for node in fused.nodes if node.kind == "fused"]
                    ran = all(kernel._cuda_kernel is not None for kernel in kernels)
                    row = {"kind": kind, "operations": k, "n": n, "kernels": len(kernels), "cuda_ran": ran,
                           **race(got, fused, unfused, x, y, repeats), "first_call_s": first,
                           "work_per_thread": max((kern.region.work for kern in kernels), default=0)
                           / max(1, int(np.prod(got.shape)))}
                    rows.append(row)
                    note(f"{kind:<11} k={k} n={n:<9} fused {row['fused_us']:9.1f} µs  node by node "
                         f"{row['unfused_us']:9.1f} µs  speed-up {row['speedup']:.2f}  (CUDA ran: {ran})")
    return rows


def row_region(operations: int, rows: int, length: int) -> tuple[Any, tuple[Any, Any]]:
    """A chain of ``operations`` elementwise operations on (rows, length) matrices summed along the
    rows: one CUDA thread per row, each summing ``length`` terms."""
    from jacacc.tensor.expr import add, einsum, unary, var

    x, y = var("x", (rows, length)), var("y", (rows, length))
    steps = [lambda t: unary("shift", t, 1.0), lambda t: unary("tanh", t), lambda t: unary("pow", t, 2.0),
             lambda t: add(t, y), lambda t: einsum("ij,ij->ij", t, y), lambda t: unary("logistic", t),
             lambda t: unary("shift", t, -0.5)]
    t = x
    for step in steps[:operations]:
        t = step(t)
    return einsum("ij->i", t), (x, y)


def row_rows(total: int, lengths: tuple[int, ...], operations: tuple[int, ...], repeats: int) -> list[dict]:
    """Row sums of ``total`` entries as one CUDA thread per row against node by node (CuPy)."""
    import cupy as cp
    from fusion_threshold import programs

    out = []
    with every_region_a_kernel():
        for k in operations:
            for length in lengths:
                rows = total // length
                fused, unfused = programs(*row_region(k, rows, length))
                rng = np.random.default_rng(length + k)
                x, y = (cp.asarray(rng.uniform(-1.0, 1.0, (rows, length))) for _ in range(2))
                row = {"kind": "rows", "operations": k, "rows": rows, "length": length,
                       **race(fused(x, y)[0], fused, unfused, x, y, repeats)}
                out.append(row)
                note(f"rows k={k} {rows:>8} rows of {length:<6} fused {row['fused_us']:9.1f} µs  node by node "
                     f"{row['unfused_us']:9.1f} µs  speed-up {row['speedup']:.2f}")
    return out


# =========================================================================== breadth objectives
def _jacacc(objective: Any, quantity: str, cuda: bool) -> Callable[..., Any]:
    from tensor_breadth import bind

    import jacacc.tensor as jt
    from jacacc.tensor import fusion

    transform = (jt.grad if quantity == "gradient" else jt.hessian)(bind(objective, np))

    def call(*args: Any) -> Any:
        saved = fusion.CUDA_ENABLED
        fusion.CUDA_ENABLED = cuda
        try:
            return transform(*args)
        finally:
            fusion.CUDA_ENABLED = saved

    return call


def prepare(library: str, objective: Any, quantity: str, args: tuple[np.ndarray, ...]) -> Callable[[], Any]:
    """A call of ``library``'s derivative on device copies of ``args`` (its result on the device)."""
    if library in ("jacacc", "jacacc-unfused"):
        import cupy as cp

        device = [cp.asarray(a) for a in args]
        fn = _jacacc(objective, quantity, cuda=library == "jacacc")
        return lambda: fn(*device)
    if library == "jax":
        import jax
        import jax.numpy as jnp
        from tensor_breadth import bind

        if jax.default_backend() != "gpu":
            raise ImportError(f"JAX runs on {jax.default_backend()}, not the GPU")
        f = bind(objective, jnp)
        fn = jax.grad(f) if quantity == "gradient" else jax.hessian(f)
        jargs = [jax.device_put(jnp.asarray(a)) for a in args]
        compiled = jax.jit(fn).lower(*jargs).compile()
        return lambda: compiled(*jargs)
    import torch
    import torch.func
    from tensor_breadth import TorchNumPy, bind

    if not torch.cuda.is_available():
        raise ImportError("PyTorch sees no GPU")
    torch.set_default_device("cuda")  # the objectives' torch.eye lands on the GPU too
    f = bind(objective, TorchNumPy())
    fn = torch.func.grad(f) if quantity == "gradient" else torch.func.hessian(f)
    targs = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in args]
    return lambda: fn(*targs)


def to_host(result: Any) -> np.ndarray:
    if hasattr(result, "detach"):
        return result.detach().cpu().numpy()
    if hasattr(result, "get") and not isinstance(result, np.ndarray):
        return result.get()
    return np.asarray(result)


def breadth_rows(names: list[str] | None, sizes: tuple[int, ...] | None, repeats: int) -> list[dict]:
    from tensor_breadth import OBJECTIVES, relative_error

    rows = []
    for objective in OBJECTIVES:
        if names and objective.name not in names:
            continue
        for n in sizes or objective.sizes:
            args = objective.arguments(n, np.random.default_rng(n))
            for quantity in QUANTITIES:
                reference = None
                for library in ("jax", "torch", "jacacc", "jacacc-unfused"):
                    row: dict[str, Any] = {"objective": objective.name, "n": n, "params": int(args[0].size),
                                           "quantity": quantity, "library": library}
                    try:
                        start = time.perf_counter()
                        call = prepare(library, objective, quantity, args)
                        result = to_host(call())
                        row["first_call_s"] = time.perf_counter() - start
                        if reference is not None:
                            row["max_rel_error"] = relative_error(result, reference)
                            if not row["max_rel_error"] <= TOLERANCE:
                                raise AssertionError(f"off from JAX by {row['max_rel_error']:.3g}")
                        elif library == "jax":
                            reference = result
                        row["best_s"] = timed(call, repeats)
                        row["status"] = "ok"
                    except Exception as exc:  # noqa: BLE001 - a failure is data: the row records it
                        row["status"] = "error"
                        row["error"] = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
                    rows.append(row)
                    timing = f"{row['best_s'] * 1e6:10.1f} µs" if row["status"] == "ok" else row["error"]
                    note(f"{objective.name:<24} n={n:<5} {quantity:<8} {library:<14} {timing}")
    return rows


def ratios(rows: list[dict]) -> list[dict]:
    """Per (objective, n, quantity): jacacc's best time over the best GPU peer's, fused and unfused."""
    groups: dict[tuple, dict[str, float]] = {}
    for r in rows:
        if r["status"] == "ok":
            groups.setdefault((r["objective"], r["n"], r["quantity"]), {})[r["library"]] = r["best_s"]
    out = []
    for (objective, n, quantity), best in groups.items():
        peers = [best[p] for p in ("jax", "torch") if p in best]
        peer = min(peers) if peers else None
        out.append({"objective": objective, "n": n, "quantity": quantity, "best_peer_s": peer,
                    "ratio": best["jacacc"] / peer if peer and "jacacc" in best else None,
                    "unfused_ratio": best["jacacc-unfused"] / peer if peer and "jacacc-unfused" in best else None})
    return out


def summarize(ratio_rows: list[dict]) -> dict[str, dict]:
    """Per quantity: the geometric mean, worst and best of jacacc's time over the best GPU peer's,
    fused and node by node, and the objectives jacacc could not run on the GPU."""
    from tensor_breadth import geometric_mean

    out = {}
    for quantity in QUANTITIES:
        mine = [r for r in ratio_rows if r["quantity"] == quantity]
        entry: dict[str, Any] = {"compared": sum(r["ratio"] is not None for r in mine),
                                 "missing": sorted({r["objective"] for r in mine if r["ratio"] is None})}
        for key in ("ratio", "unfused_ratio"):
            values = [r[key] for r in mine if r[key] is not None]
            entry[key] = {"geomean": geometric_mean(values), "worst": max(values, default=None),
                          "best": min(values, default=None)}
        out[quantity] = entry
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, three objectives (a smoke run)")
    parser.add_argument("--objectives", nargs="*", default=None)
    parser.add_argument("--sizes", nargs="*", type=int, default=None, help="breadth sizes (default each objective's)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--parts", nargs="*", default=list(PARTS), choices=PARTS,
                        help="what to measure (default: all)")
    parser.add_argument("--out", default=".", help="directory holding results/")
    args = parser.parse_args(argv)
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as exc:  # noqa: BLE001 - no CuPy or no GPU: nothing to measure
        print(f"gpu_tensor.py needs CuPy and a CUDA GPU: {exc}", file=sys.stderr)
        return 2
    quick = args.quick
    region_sizes = (1_000, 100_000) if quick else REGION_SIZES
    operations = (2,) if quick else REGION_OPERATIONS
    names = args.objectives or (["logistic_l2", "gaussian_nll", "mlp_flat"] if quick else None)
    sizes = tuple(args.sizes) if args.sizes else ((16,) if quick else None)
    repeats = 2 if quick else args.repeats
    record_path = os.path.join(args.out, "results", f"{EXPERIMENT}.json")
    params = {"device": device, "region_sizes": list(region_sizes), "operations": list(operations),
              "objectives": names, "sizes": list(sizes) if sizes else "each objective's", "repeats": repeats,
              "min_sample_s": MIN_SAMPLE_S, "tolerance": TOLERANCE}
    try:
        import jax

        jax.config.update("jax_enable_x64", True)  # the objectives run in float64
    except ImportError:
        pass
    results: dict[str, Any] = {}
    if "regions" in args.parts:
        results["regions"] = region_rows(region_sizes, operations, repeats)
        write_record(record_path, EXPERIMENT, {**results, "partial": True}, parameters=params, seed=0)
    if "row_sums" in args.parts:
        results["row_sums"] = row_rows(1 << 16 if quick else 1 << 22, (16, 256) if quick else ROW_LENGTHS,
                                       operations, repeats)
        write_record(record_path, EXPERIMENT, {**results, "partial": True}, parameters=params, seed=0)
    if "breadth" in args.parts:
        from tensor_breadth import OBJECTIVES

        results["breadth"] = []
        for objective in OBJECTIVES:  # recorded after each, so a run cut short keeps what it measured
            if not names or objective.name in names:
                results["breadth"] += breadth_rows([objective.name], sizes, repeats)
                results["ratios"] = ratios(results["breadth"])
                write_record(record_path, EXPERIMENT, {**results, "partial": True}, parameters=params, seed=0)
        results["summary"] = summarize(results["ratios"])
        for quantity, entry in results["summary"].items():
            fused, unfused = entry["ratio"], entry["unfused_ratio"]
            if fused["geomean"] is not None:
                print(f"{quantity}: jacacc's time over the best GPU peer's, geometric mean {fused['geomean']:.2f} "
                      f"(worst {fused['worst']:.2f}, best {fused['best']:.2f}); node by node "
                      f"{unfused['geomean']:.2f}; {entry['compared']} compared")
    write_record(record_path, EXPERIMENT, results, parameters=params, seed=0)
    print(f"wrote {record_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
