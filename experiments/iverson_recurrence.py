"""A long Iverson recurrence's gradient with an empty kernel cache: jacacc against jax.jit (issue 40).

Issue 40 asks that the gradient of a 400-step recurrence of the tensor language compile with Numba
in at most 20 s.  The recurrence (:func:`jacacc.iverson.generate.recurrence`) is

    z₀ = x,   z_{t+1}[i] = tanh(Σ_j A[i, j]·z_t[j]) + 0.5·z_t[i],   f = Σ_i z_T[i],

``n = 8``, written with ``let`` bindings, and differentiated with respect to ``x`` by
``iv.grad``.  Every sample is a fresh child process with a new empty ``JACACC_CACHE_DIR`` (JAX's
persistent compilation cache off):

* ``jacacc``: ``grad_s`` (``iv.grad``), ``compile_s`` (``iv.compile(…, backend="numba")``: the
  lowering), ``first_s`` (the first call, which compiles each distinct kernel), ``total_s`` (the
  three), ``warm_s`` (a later call), ``kernels`` (distinct compiled kernels) and ``bindings``;
* ``jax``: the same program written with ``jax.numpy`` by ``jacacc.iverson.arrays`` (what JAX
  would be given), ``jax.jit(jax.grad(f))``: ``total_s`` (trace, compile and first call) and
  ``warm_s``.

The two gradients agree (rtol 1e-10).

    python experiments/iverson_recurrence.py          # results/iverson_recurrence.json, a few minutes
    python experiments/iverson_recurrence.py --quick --out /tmp/ir.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "iverson_recurrence"
STEPS = (25, 100, 400)
VARIANTS = ("jacacc", "jax")
RTOL = 1e-10
#: the issue's limit on the 400-step gradient's compile, from grad to first value
TARGET_S = 20.0

CHILD_CODE = r'''
import json, sys, time
start = time.perf_counter()
import numpy as np
import jacacc.iverson as iv
from jacacc.iverson.generate import recurrence
steps, variant, n = int(sys.argv[1]), sys.argv[2], 8


rng = np.random.default_rng(0)
A, x0 = rng.standard_normal((n, n)) * 0.3, rng.standard_normal(n)
f, _, x = recurrence(steps, n)
built = time.perf_counter()
out = {"import_s": built - start}
if variant == "jax":
    import jax
    jax.config.update("jax_enable_x64", True)
    from jacacc.iverson.arrays import array_function
    g = jax.jit(jax.grad(lambda v: array_function(f, "jax")(A=A, x=v)))
    begin = time.perf_counter()
    result = np.asarray(g(x0))
    out["total_s"] = time.perf_counter() - begin
    call = lambda: np.asarray(g(x0))
else:
    begin = time.perf_counter()
    gradient = iv.grad(f, x)
    graded = time.perf_counter()
    kernel = iv.compile(gradient, backend="numba")
    compiled = time.perf_counter()
    result = kernel(A=A, x=x0)
    first = time.perf_counter()
    out.update(grad_s=graded - begin, compile_s=compiled - graded, first_s=first - compiled, total_s=first - begin,
               kernels=len(kernel.kernel.kernels), bindings=len(kernel.kernel.steps))
    call = lambda: kernel(A=A, x=x0)
for _ in range(3):
    call()
warm = time.perf_counter()
call()
out["warm_s"] = time.perf_counter() - warm
out["result"] = np.asarray(result).tolist()
print(json.dumps(out))
'''


def run_child(steps: int, variant: str, timeout: float) -> dict[str, Any]:
    """One sample: a fresh process, an empty kernel cache, JAX's persistent cache off."""
    from jacacc.bench import fresh_child

    return fresh_child(CHILD_CODE, [str(steps), variant], timeout, path=ROOT)


def measure(steps: tuple[int, ...], timeout: float) -> list[dict[str, Any]]:
    import numpy as np

    rows = []
    for count in steps:
        samples = {v: run_child(count, v, timeout) for v in VARIANTS}
        reference = samples["jax"].get("result")
        for variant, sample in samples.items():
            row = {"steps": count, "variant": variant, **{k: v for k, v in sample.items() if k != "result"}}
            if sample["status"] == "ok" and reference is not None:
                row["agrees_with_jax"] = bool(np.allclose(sample["result"], reference, rtol=RTOL, atol=1e-300))
            rows.append(row)
    return rows


def table_text(rows: list[dict[str, Any]]) -> str:
    lines = ["| steps | bindings | kernels | jacacc grad | lowering | first call | jacacc total | "
             "jax.jit first call | jacacc warm | jax.jit warm |", "|---|---|---|---|---|---|---|---|---|---|"]
    for count in dict.fromkeys(r["steps"] for r in rows):
        by = {r["variant"]: r for r in rows if r["steps"] == count}
        j, x = by.get("jacacc", {}), by.get("jax", {})

        def cell(row: dict[str, Any], key: str, scale: float = 1.0, unit: str = "s") -> str:
            if key not in row:
                return row.get("status", "–")
            return f"{row[key] * scale:.3g} {unit}"

        lines.append(f"| {count} | {j.get('bindings', '–')} | {j.get('kernels', '–')} | {cell(j, 'grad_s')} | "
                     f"{cell(j, 'compile_s')} | {cell(j, 'first_s')} | {cell(j, 'total_s')} | {cell(x, 'total_s')} | "
                     f"{cell(j, 'warm_s', 1e3, 'ms')} | {cell(x, 'warm_s', 1e3, 'ms')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "results" / f"{EXPERIMENT}.json"))
    parser.add_argument("--steps", type=int, nargs="+", default=list(STEPS))
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--quick", action="store_true", help="10 steps only (for the tests)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from jacacc.bench import load_average, write_record

    steps = (10,) if args.quick else tuple(args.steps)
    start = time.perf_counter()
    params = {"steps": list(steps), "n": 8, "timeout_s": args.timeout, "rtol": RTOL, "target_s": TARGET_S,
              "load_average_before": load_average(), "quick": args.quick}
    rows = measure(steps, args.timeout)
    params["wall_s"] = time.perf_counter() - start
    params["load_average_after"] = load_average()
    write_record(args.out, EXPERIMENT, {"rows": rows}, parameters=params, seed=0)
    print(table_text(rows))
    failed = [(r["steps"], r["variant"]) for r in rows if r.get("agrees_with_jax") is False
              or (r["variant"] == "jacacc" and r["status"] != "ok")]
    if failed:
        print(f"FAILED: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
