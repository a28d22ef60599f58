"""Graph sizes of the two front ends: the NumPy tracer (jacacc.trace) against the JAX front end
(jacacc.from_jax) on the zoo functions that have both versions.

For each function: inputs, outputs, intermediates, edges and the multiplications of vertex
elimination in Markowitz order, for the graph traced from the NumPy version and for the graph
interpreted from the JAX version's jaxpr; the JAX graph's Jacobian is checked against
``jax.jacfwd`` and against the NumPy graph's at the problem's sample point before the row is
kept.  Writes ``results/frontend_sizes.json`` and prints a Markdown table.

    python experiments/frontend_sizes.py
    python experiments/frontend_sizes.py --problems RoeFlux_1d BlackScholes --out /tmp/r
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import jacacc
from jacacc.bench import write_record
from jacacc.problems import get
from jacacc.problems.jax_functions import FUNCTIONS

FRONT_ENDS = ("numpy", "jax")


def sizes(traced: jacacc.Traced) -> dict[str, int]:
    """Inputs, outputs, intermediates, edges and Markowitz vertex-elimination mults."""
    g = traced.graph
    plan = jacacc.optimize(g, mode="vertex", method="markowitz")
    return {"inputs": len(g.inputs), "outputs": len(g.outputs), "intermediates": len(g.intermediates),
            "edges": g.n_edges, "markowitz_mults": plan.mults}


def jacfwd(f, x: np.ndarray) -> np.ndarray:
    import jax

    with jax.enable_x64(True):
        return np.asarray(jax.jacfwd(f)(x), dtype=float).reshape(-1, x.size)


def measure(name: str, seed: int) -> dict:
    problem, f = get(name), FUNCTIONS[name]
    x = problem.sample(seed)
    start = time.perf_counter()
    numpy_traced = jacacc.trace(problem.fn, problem.n_inputs, unpack=False)
    numpy_seconds = time.perf_counter() - start
    start = time.perf_counter()
    jax_traced = jacacc.from_jax(f, x)
    jax_seconds = time.perf_counter() - start
    jac = jax_traced.jacobian(x)
    reference = jacfwd(f, x)
    scale = max(1.0, float(np.max(np.abs(reference))))
    error_jacfwd = float(np.max(np.abs(jac - reference)) / scale)
    error_numpy = float(np.max(np.abs(jac - numpy_traced.jacobian(x))) / scale)
    if error_jacfwd > 1e-10 or error_numpy > 1e-9:
        raise AssertionError(f"{name}: from_jax Jacobian off by {error_jacfwd:.1e} (jacfwd), "
                             f"{error_numpy:.1e} (NumPy tracer)")
    return {"problem": name, "numpy": {**sizes(numpy_traced), "trace_seconds": numpy_seconds},
            "jax": {**sizes(jax_traced), "trace_seconds": jax_seconds},
            "max_rel_error_vs_jacfwd": error_jacfwd, "max_rel_error_vs_numpy": error_numpy}


def markdown(rows: list[dict]) -> str:
    columns = ("intermediates", "edges", "markowitz_mults")
    head = ["problem", "n → m"] + [f"{c.replace('_', ' ')} ({fe})" for c in columns for fe in FRONT_ENDS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["problem"], f"{r['numpy']['inputs']} → {r['numpy']['outputs']}"]
        cells += [str(r[fe][c]) for c in columns for fe in FRONT_ENDS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="*", default=list(FUNCTIONS),
                        help="zoo functions with a JAX version (default: all of them)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample point the Jacobians are checked at")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    rows = [measure(name, args.seed) for name in args.problems]
    write_record(
        os.path.join(args.out, "frontend_sizes.json"),
        "frontend_sizes",
        {"rows": rows},
        parameters={"problems": args.problems, "front_ends": {"numpy": "jacacc.trace(problem.fn)",
                    "jax": "jacacc.from_jax(jacacc.problems.jax_functions.FUNCTIONS[name])"},
                    "mults": "vertex elimination, markowitz"},
        seed=args.seed,
    )
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
