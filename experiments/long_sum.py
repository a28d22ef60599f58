"""A long elementwise sum with an empty kernel cache: define, first call and vjp against jax.jit (issue 40).

Issue 40 asks that an elementwise function of 1500 ``+`` terms be defined, called and pulled back
(``vjp``) in at most 30 s and 2 GB together.  The function (as the hostile tests write it) is

    f[i] = a[i]*0/n − tanh(a[i]*c₁ + b[i])*a[i] − a[i]*2/n − tanh(a[i]*c₃ + b[i])*a[i] − …

with ``c_k = (k mod 7)/7``, n terms, 1000 points.  Every sample is a fresh child process with a
new empty ``JACACC_CACHE_DIR`` (JAX's persistent cache off), its peak resident memory read from
``getrusage``:

* ``jacacc``: ``define_s`` (``ew.define(source, …, backend="numba")``), ``first_s`` (the first
  call: compiles), ``vjp_s`` (the first ``vjp``: derives and compiles), ``total_s``, ``peak_mb``;
* ``jax``: the same sum written as a Python loop over ``jax.numpy`` terms, ``jax.jit`` of the
  function and of its ``jax.vjp``: ``first_s``, ``vjp_s``, ``total_s``, ``peak_mb``.

Values and gradients agree between the two (rtol 1e-10), and jacacc's with NumPy written term by
term (``agrees_with_numpy``), which stands where JAX gives no result.

    python experiments/long_sum.py                  # results/long_sum.json, about a minute
    python experiments/long_sum.py --quick --out /tmp/ls.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "long_sum"
TERMS = (300, 1500)
VARIANTS = ("jacacc", "jax")
RTOL = 1e-10
TARGET_S, TARGET_MB = 30.0, 2048.0

CHILD_CODE = r'''
import json, resource, sys, time
start = time.perf_counter()
import numpy as np
n, variant, points = int(sys.argv[1]), sys.argv[2], 1000
coefficient = [(k % 7) / 7 for k in range(n)]
rng = np.random.default_rng(0)
a, b, df = rng.standard_normal(points), rng.standard_normal(points), rng.standard_normal(points)
out = {}
if variant == "jax":
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    def f(a, b):
        total = a * 0 / n
        for k in range(1, n):
            total = total - (jnp.tanh(a * coefficient[k] + b) * a if k % 2 else a * k / n)
        return total

    begin = time.perf_counter()
    value = np.asarray(jax.jit(f)(a, b))
    called = time.perf_counter()
    pullback = jax.jit(lambda a, b, df: jax.vjp(f, a, b)[1](df))
    gradient = [np.asarray(g) for g in pullback(a, b, df)]
    done = time.perf_counter()
    out.update(first_s=called - begin, vjp_s=done - called, total_s=done - begin)
else:
    import jacacc.elementwise as ew
    terms = [f"tanh(a[i]*{coefficient[k]!r} + b[i])*a[i]" if k % 2 else f"a[i]*{k}/{n}" for k in range(n)]
    source = "f[i] = " + " - ".join(terms)
    begin = time.perf_counter()
    f = ew.define(source, {"i": points}, backend="numba")
    defined = time.perf_counter()
    value = f(a=a, b=b)
    called = time.perf_counter()
    pulled = f.vjp(df, a=a, b=b)
    gradient = [pulled["a"], pulled["b"]]
    done = time.perf_counter()
    out.update(define_s=defined - begin, first_s=called - defined, vjp_s=done - called, total_s=done - begin,
               tables=len(f.constants), printed=str(f)[:300])
    # NumPy by hand, term by term: the value and both gradients (d/da of tanh(c·a + b)·a is
    # (1 − t²)·c·a + t, d/db is (1 − t²)·a)
    want, ga, gb = np.zeros(points), np.zeros(points), np.zeros(points)
    for k in range(n):
        sign = 1.0 if k == 0 else -1.0
        if k % 2:
            t = np.tanh(a * coefficient[k] + b)
            want += sign * t * a
            ga += sign * ((1 - t * t) * coefficient[k] * a + t) * df
            gb += sign * (1 - t * t) * a * df
        else:
            want += sign * a * k / n
            ga += sign * k / n * df
    out["agrees_with_numpy"] = bool(np.allclose(value, want, rtol=1e-10, atol=1e-10)
                                    and np.allclose(pulled["a"], ga, rtol=1e-10, atol=1e-10)
                                    and np.allclose(pulled["b"], gb, rtol=1e-10, atol=1e-10))
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["import_s"] = begin - start
out["value"] = np.asarray(value).tolist()
out["gradient"] = [np.asarray(g).tolist() for g in gradient]
print(json.dumps(out))
'''


def run_child(terms: int, variant: str, timeout: float) -> dict[str, Any]:
    """One sample: a fresh process, an empty kernel cache, JAX's persistent cache off."""
    from jacacc.bench import fresh_child

    return fresh_child(CHILD_CODE, [str(terms), variant], timeout, path=ROOT)


def measure(counts: tuple[int, ...], timeout: float) -> list[dict[str, Any]]:
    import numpy as np

    rows = []
    for count in counts:
        samples = {v: run_child(count, v, timeout) for v in VARIANTS}
        reference = samples["jax"] if samples["jax"]["status"] == "ok" else None
        for variant, sample in samples.items():
            row = {"terms": count, "variant": variant,
                   **{k: v for k, v in sample.items() if k not in ("value", "gradient")}}
            if sample["status"] == "ok" and reference is not None:
                row["agrees_with_jax"] = bool(
                    np.allclose(sample["value"], reference["value"], rtol=RTOL, atol=1e-12)
                    and all(np.allclose(g, r, rtol=RTOL, atol=1e-12)
                            for g, r in zip(sample["gradient"], reference["gradient"], strict=True)))
            if variant == "jacacc" and sample["status"] == "ok":
                row["within_target"] = sample["total_s"] <= TARGET_S and sample["peak_mb"] <= TARGET_MB
            rows.append(row)
    return rows


def table_text(rows: list[dict[str, Any]]) -> str:
    lines = ["| terms | variant | define | first call | vjp | total | peak memory |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['terms']} | {r['variant']} | {r['status']} | | | | |")
            continue
        define = f"{r['define_s']:.2f} s" if "define_s" in r else "–"
        lines.append(f"| {r['terms']} | {r['variant']} | {define} | {r['first_s']:.2f} s | {r['vjp_s']:.2f} s | "
                     f"{r['total_s']:.2f} s | {r['peak_mb']:.0f} MB |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "results" / f"{EXPERIMENT}.json"))
    parser.add_argument("--terms", type=int, nargs="+", default=list(TERMS))
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--quick", action="store_true", help="60 terms only (for the tests)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from jacacc.bench import load_average, write_record

    counts = (60,) if args.quick else tuple(args.terms)
    start = time.perf_counter()
    params = {"terms": list(counts), "points": 1000, "timeout_s": args.timeout, "rtol": RTOL, "target_s": TARGET_S,
              "target_mb": TARGET_MB, "load_average_before": load_average(), "quick": args.quick}
    rows = measure(counts, args.timeout)
    params["wall_s"] = time.perf_counter() - start
    params["load_average_after"] = load_average()
    write_record(args.out, EXPERIMENT, {"rows": rows}, parameters=params, seed=0)
    print(table_text(rows))
    failed = [(r["terms"], r["variant"]) for r in rows if r.get("agrees_with_jax") is False
              or (r["variant"] == "jacacc" and (r["status"] != "ok" or not r["agrees_with_numpy"]))]
    if failed:
        print(f"FAILED: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
