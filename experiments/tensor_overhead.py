"""Per-call overhead of jacacc.tensor's cached transformations (issue 26, item 3).

A warm call of ``jacacc.tensor.grad(f)`` / ``hessian(f)`` checks and keys its
arguments, finds the cached plan, checks that what ``f`` reads besides its
arguments has not changed, and runs the plan.  For small problems that
bookkeeping, not the NumPy work, decided the time.  This script measures, on
small instances of ordinary objectives:

* ``call``: the warm transformed call, as a user makes it;
* ``kernels``: the plan's straight-line function alone
  (:mod:`jacacc.tensor.straightline`) — the NumPy calls the derivative needs,
  with nothing around them;
* ``interpreter``: the same plan run step by step
  (:meth:`~jacacc.tensor.evaluate.Program.interpret`, what every call ran
  before the straight-line functions);

and reports ``overhead = call − kernels`` (target: at most 10 µs).  One BLAS
thread; each time the best of several repeats of a loop of calls.  Writes
``results/tensor_overhead.json``.

Usage::

    python experiments/tensor_overhead.py            # about 20 s
    python experiments/tensor_overhead.py --quick    # a smoke run
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from jacacc.bench import time_call, write_record  # noqa: E402

EXPERIMENT = "tensor_overhead"
TARGET_US = 10.0


def problems(n: int, rng: np.random.Generator) -> dict[str, tuple[Callable, tuple]]:
    """Small objectives (n parameters) and their arguments; the first argument is differentiated."""
    m = 2 * n
    X, y = rng.standard_normal((m, n)), np.sign(rng.standard_normal(m))
    A = rng.standard_normal((n, n))
    return {
        "logistic regression": (lambda w, X, y: np.sum(np.log(np.exp(-y * (X @ w)) + 1)), (rng.standard_normal(n), X, y)),
        "logistic regression + L2": (lambda w, X, y: np.sum(np.log(np.exp(-y * (X @ w)) + 1)) + 0.35 * np.sum(w * w),
                                     (rng.standard_normal(n), X, y)),
        "ridge": (lambda w, X, y: np.sum((X @ w - y) ** 2) + 0.1 * (w @ w), (rng.standard_normal(n), X, y)),
        "quadratic form": (lambda x, A: x @ (A @ x) + np.sum(np.tanh(x)), (rng.standard_normal(n), A)),
        "log-sum-exp": (lambda x: np.log(np.sum(np.exp(x - np.max(x)))) + np.max(x), (rng.standard_normal(n),)),
        "Rosenbrock": (lambda x: np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2),
                       (rng.uniform(-1, 1, n),)),
    }


def measure(name: str, f: Callable, args: tuple, quantity: str, repeats: int, budget: float) -> dict[str, Any]:
    import jacacc.tensor as jt

    transformed = jt.grad(f) if quantity == "gradient" else jt.hessian(f)
    transformed(*args)
    (program,) = transformed.plans.values()
    arrays = [np.asarray(a, dtype=np.float64) for a in args]
    straight = program._straight_line
    np.testing.assert_array_equal(straight(*arrays)[0], program.interpret(np, arrays)[0])
    call = time_call(lambda: transformed(*args), repeat=repeats, min_time=budget)
    kernels = time_call(lambda: straight(*arrays), repeat=repeats, min_time=budget)
    interpreter = time_call(lambda: program.interpret(np, arrays), repeat=repeats, min_time=budget)
    return {"problem": name, "quantity": quantity, "n": int(np.size(args[0])), "steps": len(program._steps),
            "call_us": call * 1e6, "kernels_us": kernels * 1e6, "interpreter_us": interpreter * 1e6,
            "overhead_us": (call - kernels) * 1e6}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| problem | quantity | n | steps | call | kernels | overhead | interpreter |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['problem']} | {r['quantity']} | {r['n']} | {r['steps']} | {r['call_us']:.1f} µs | "
                     f"{r['kernels_us']:.1f} µs | {r['overhead_us']:.1f} µs | {r['interpreter_us']:.1f} µs |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16, help="parameters per problem (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="short loops (a smoke run)")
    parser.add_argument("--out", default=".", help="directory holding results/ (default the repo root)")
    options = parser.parse_args(argv)
    repeats, budget = (2, 0.005) if options.quick else (7, 0.05)
    rng = np.random.default_rng(options.seed)
    rows = [measure(name, f, args, quantity, repeats, budget)
            for name, (f, args) in problems(options.n, rng).items() for quantity in ("gradient", "hessian")]
    print(table(rows))
    worst = max(r["overhead_us"] for r in rows)
    print(f"largest overhead {worst:.1f} µs (target ≤ {TARGET_US:.0f} µs)")
    path = os.path.join(options.out, "results", f"{EXPERIMENT}.json")
    write_record(path, EXPERIMENT, {"rows": rows, "target_us": TARGET_US, "largest_overhead_us": worst},
                 parameters={"n": options.n, "quick": options.quick, "threads": 1}, seed=options.seed)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
