"""Hand-written pullbacks against transposed pushforwards (issue 41, item 4).

An operator of jacacc.tensor declares its pushforward (``jvp``) and gets its pullback by
transposing it (:mod:`jacacc.tensor.transpose`); a hand-written ``vjp`` is kept only where it
measures faster.  For every operator that declares one, this script builds both pullbacks of one
application (the operator's arguments and outputs bound as inputs, so the backward runs alone),
checks that they agree, and times each as a planned program (:class:`jacacc.tensor.evaluate.Program`,
its straight-line function), on n × n float64 problems, one BLAS thread:

* ``declared_s`` / ``transposed_s``: the best of five repeats, each a loop of at least 20 ms;
* ``declared_flops`` / ``transposed_flops``: the FLOPs of each expression
  (:func:`jacacc.tensor.expr.flops_of`);
* ``ratio`` = transposed / declared: above 1 the hand-written one is faster.

The rule: a hand-written pullback stays where the transposed one costs more FLOPs (gelqf, qr and
gesdd, whose hand-written ones fold two cotangents' terms before one product).  The committed
record measured all eleven operators that declared one then (commit 4c113a0, 2026-11-29); the
transposed pullbacks of trsm, potrf, potri, getrs, getri, slogdet_lu, syevd and pinv had the same
FLOPs or fewer and ran as fast (ratios 0.99–1.01 at n = 128 and 512) or faster (pinv: 0.89, 20 %
fewer FLOPs), and those eight hand-written pullbacks were deleted.  A run now measures the
operators that still declare one (the others are listed as transposed only).

Writes ``results/operator_pullbacks.json``.

Usage::

    python experiments/operator_pullbacks.py              # n = 16, 128, 512: about a minute
    python experiments/operator_pullbacks.py --sizes 16   # a smoke run
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import jacacc.linalg as jl  # noqa: E402
from jacacc.bench import time_call, write_record  # noqa: E402
from jacacc.tensor.evaluate import Program  # noqa: E402
from jacacc.tensor.expr import flops_of  # noqa: E402
from jacacc.tensor.operators import get_operator  # noqa: E402
from jacacc.tensor.rule_checks import applications, bound_rules, differentiated_arguments, forward_values  # noqa: E402

EXPERIMENT = "operator_pullbacks"
DEFAULT_SIZES = (16, 128, 512)


def _cases(n: int, rng: np.random.Generator) -> dict[str, tuple[Callable[..., Any], tuple[np.ndarray, ...]]]:
    """One function per operator with a declared vjp, and its arguments at size n (well conditioned:
    eigenvalues and singular values apart, so no gap is clamped)."""
    M = rng.normal(size=(n, n)) / np.sqrt(n)
    S = M @ M.T + np.eye(n)
    A = M + 3 * np.eye(n)
    B = rng.normal(size=(n, n))
    orthogonal, _ = np.linalg.qr(rng.normal(size=(n, n)))
    spread = orthogonal.T @ np.diag(1 + np.arange(n) / n) @ orthogonal
    tall = np.linalg.qr(rng.normal(size=(n, n // 2)))[0] @ np.diag(1 + np.arange(n // 2) / n)
    return {
        "trsm": (lambda L, B: jl.trsm(L, B), (np.linalg.cholesky(S), B)),
        "potrf": (lambda S: jl.potrf(S), (S,)),
        "potri": (lambda L: jl.potri(L), (np.linalg.cholesky(S),)),
        "getrs": (lambda A, B: jl.gesv(A, B), (A, B)),
        "getri": (lambda A: jl.inverse(A), (A,)),
        "slogdet_lu": (lambda A: jl.slogdet(A)[1], (A,)),
        "gelqf": (lambda A: jl.gelqf(A)[0] + jl.gelqf(A)[1].sum(), (tall.T,)),
        "syevd": (lambda S: jl.syevd(S)[0] + jl.syevd(S)[1].sum(), (spread,)),
        "qr": (lambda A: np.linalg.qr(A)[0] + np.linalg.qr(A)[1].sum(), (tall,)),
        "gesdd": (lambda A: np.linalg.svd(A, full_matrices=False)[0] + np.linalg.svd(A, full_matrices=False)[1].sum(),
                  (tall,)),
        "pinv": (lambda A: np.linalg.pinv(A), (tall,)),
    }


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b), initial=0.0) / max(np.max(np.abs(b), initial=0.0), 1e-300))


def measure(name: str, f: Callable[..., Any], args: tuple[np.ndarray, ...], n: int,
            rng: np.random.Generator) -> dict[str, Any]:
    """Both pullbacks of ``f``'s application of operator ``name``: agreement, FLOPs and times."""
    node, values = next((node, values) for node, values in applications(f, args) if node.param[0] == name)
    moving = differentiated_arguments(node, values)
    rules = bound_rules(node, moving)
    declared = [rules.pullback[k] for k in moving]
    transposed = [rules.transposed[k] for k in moving]
    inputs = [*rules.arguments, *rules.outputs, *rules.cotangents]
    arrays = [*(np.asarray(v) for v in values), *forward_values(node, values),
              *(rng.standard_normal(c.shape) for c in rules.cotangents)]
    programs = {"declared": Program(declared, inputs), "transposed": Program(transposed, inputs)}
    results = {arm: program(*arrays) for arm, program in programs.items()}
    row: dict[str, Any] = {"operator": name, "n": n,
                           "difference": max(_relative(a, b) for a, b in zip(results["transposed"],
                                                                             results["declared"], strict=True))}
    for arm, program in programs.items():
        row[f"{arm}_flops"] = flops_of(declared if arm == "declared" else transposed)
        row[f"{arm}_s"] = time_call(lambda program=program: program(*arrays), repeat=5, min_time=0.02)
    row["ratio"] = row["transposed_s"] / row["declared_s"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []
    print(f"{'operator':<11} {'n':>4} {'declared':>11} {'transposed':>11} {'ratio':>6} {'FLOPs d/t':>21} {'diff':>8}")
    for n in args.sizes:
        for name, (f, fargs) in _cases(n, rng).items():
            if get_operator(name).vjp is None:
                print(f"{name:<11} {n:>4} transposed only")
                continue
            row = measure(name, f, fargs, n, rng)
            rows.append(row)
            print(f"{name:<11} {n:>4} {row['declared_s'] * 1e6:>9.1f}µs {row['transposed_s'] * 1e6:>9.1f}µs "
                  f"{row['ratio']:>6.2f} {row['declared_flops']:>10}/{row['transposed_flops']:<10} "
                  f"{row['difference']:>8.1e}", flush=True)
    path = os.path.join(args.out, "results", f"{EXPERIMENT}.json")
    write_record(path, EXPERIMENT, rows, parameters={"sizes": args.sizes, "blas_threads": 1}, seed=args.seed)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
