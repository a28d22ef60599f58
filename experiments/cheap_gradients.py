"""The cheap-gradient guarantee of jacacc.iverson (paper 001), measured: cost ratios and run-time ratios.

Paper 001 proves that the purely functional adjoint of a program in tensor
SSA form costs at most a constant multiple of the program under its
sparsity-aware cost model (§4.3, Theorem 6.55).  This script measures it:

1. **Cost ratios** ``cost(grad f) / cost(f)`` (additions + multiplications +
   black-box calls, ``iv.cost`` after ``iv.normalize`` + ``iv.simplify``) for
   ``--programs`` random scalar programs of every construct
   (``jacacc.iverson.generate``, seeded) and every input they read, and for
   the paper's examples (trace, first column × first row, the
   deconvolution loss, the batched loss, a two-layer tanh network).  The
   documented constant is ``C = 5`` (README): the worst primitive is a
   black-box call whose derivative costs four operations (tanh' = 1 − t·t
   times the cotangent), plus the primal program itself.
2. **Run-time ratios** ``time(grad f) / time(f)`` on the same kind of
   programs at larger extents: jacacc's compiled gradient over its
   compiled function, against JAX (``jit(grad f)`` over ``jit(f)``) and
   PyTorch (``backward`` over the forward call), where f is the very same
   program written with each library's array operations
   (``jacacc.iverson.arrays``).

Writes ``results/cheap_gradients.json`` and ``figures/cheap_gradients.png``.
``--quick`` runs a small version (the tests use it).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

import jacacc.iverson as iv
from jacacc.bench import time_call, write_record
from jacacc.iverson.arrays import array_function
from jacacc.iverson.generate import GeneratedProgram, random_program
from jacacc.progress import progress_bar

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "cheap_gradients"
CONSTANT = 5


def total(cost: dict[str, int]) -> int:
    return cost["add"] + cost["mul"] + cost["nonlinear"]


def paper_examples(n: int = 16, k: int = 3) -> dict[str, GeneratedProgram]:
    """The programs of paper 001's examples, at small sizes."""
    i, j, b = iv.index("i"), iv.index("j"), iv.index("b")
    A = iv.var("A", (n, n))
    x, w, y = iv.var("x", (n + k - 1,)), iv.var("w", (k,)), iv.var("y", (n,))
    conv = iv.gen(i, n, iv.sum(j, k, x[i + j] * w[j]))
    batch = 4
    X, Y = iv.var("X", (batch, n + k - 1)), iv.var("Y", (batch, n))
    W1, v = iv.var("W1", (n, n)), iv.var("v", (n,))
    hidden = iv.gen(i, n, iv.tanh(iv.sum(j, n, W1[i, j] * y[j])))
    return {
        "trace": GeneratedProgram(iv.sum(i, n, A[i, i]), {"A": (n, n)}, True),
        "first column × first row": GeneratedProgram(iv.sum(i, n, A[i, 0] * A[0, i]), {"A": (n, n)}, True),
        "deconvolution loss": GeneratedProgram(
            iv.let("c", conv, lambda c: iv.sum(i, n, (c[i] - y[i]) * (c[i] - y[i]))),
            {"x": (n + k - 1,), "w": (k,), "y": (n,)}, True),
        "batched loss": GeneratedProgram(
            iv.sum(b, batch, iv.let("c", iv.gen(i, n, iv.sum(j, k, X[b, i + j] * w[j])),
                                    lambda c: iv.sum(i, n, (c[i] - Y[b, i]) * (c[i] - Y[b, i])))),
            {"X": (batch, n + k - 1), "Y": (batch, n), "w": (k,)}, True),
        "two-layer tanh net": GeneratedProgram(
            iv.let("h", hidden, lambda h: iv.sum(i, n, v[i] * h[i])), {"W1": (n, n), "y": (n,), "v": (n,)}, True),
    }


def cost_ratios(programs: dict[str, GeneratedProgram]) -> list[dict[str, Any]]:
    rows = []
    for name, program in progress_bar(list(programs.items()), desc="cost ratios"):
        cost_f = iv.cost(program.expr)
        for wrt_name, shape in program.inputs.items():
            g = iv.simplify(iv.normalize(iv.grad(program.expr, iv.var(wrt_name, shape))))
            cost_g = iv.cost(g)
            rows.append({"program": name, "wrt": wrt_name, "cost_f": cost_f, "cost_grad": cost_g,
                         "ratio": total(cost_g) / total(cost_f) if total(cost_f) else None})
    return rows


def summarize(values: list[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=float)
    return {"count": int(a.size), "min": float(a.min()), "median": float(np.median(a)),
            "p90": float(np.percentile(a, 90)), "max": float(a.max()), "mean": float(a.mean())}


def jacacc_times(program: GeneratedProgram, wrt: str, arrays: dict[str, Any], backend: str) -> tuple[float, float]:
    f = iv.compile(program.expr, backend=backend)
    g = iv.compile(iv.grad(program.expr, iv.var(wrt, program.inputs[wrt])), backend=backend)
    return time_call(lambda: f(**arrays), repeat=5, min_time=0.01), time_call(lambda: g(**arrays), repeat=5,
                                                                             min_time=0.01)


def jax_times(program: GeneratedProgram, wrt: str, arrays: dict[str, Any]) -> tuple[float, float]:
    import jax

    jax.config.update("jax_enable_x64", True)
    f = array_function(program.expr, "jax")
    names = sorted(arrays)
    jarrays = {k: jax.numpy.asarray(v) for k, v in arrays.items()}

    def positional(*values: Any) -> Any:
        return f(**dict(zip(names, values, strict=True)))

    value = jax.jit(positional)
    gradient = jax.jit(jax.grad(positional, argnums=names.index(wrt)))
    args = [jarrays[k] for k in names]
    return (time_call(lambda: value(*args).block_until_ready(), repeat=5, min_time=0.01),
            time_call(lambda: gradient(*args).block_until_ready(), repeat=5, min_time=0.01))


def torch_times(program: GeneratedProgram, wrt: str, arrays: dict[str, Any]) -> tuple[float, float]:
    import torch

    f = array_function(program.expr, "torch")
    tensors = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in arrays.items()}
    leaf = tensors[wrt].clone().requires_grad_(True)

    def value() -> Any:
        with torch.no_grad():
            return f(**tensors)

    def gradient() -> Any:
        leaf.grad = None
        f(**{**tensors, wrt: leaf}).backward()
        return leaf.grad

    if not f(**{**tensors, wrt: leaf}).requires_grad:  # f does not depend on wrt differentiably
        raise LookupError(f"the program does not depend on {wrt} differentiably")
    return time_call(value, repeat=5, min_time=0.01), time_call(gradient, repeat=5, min_time=0.01)


def time_ratios(programs: list[tuple[str, GeneratedProgram]], seed: int, backend: str) -> list[dict[str, Any]]:
    rows = []
    rng = np.random.default_rng(seed)
    for name, program in progress_bar(programs, desc="run-time ratios"):
        arrays = program.arrays(rng)
        for wrt, shape in program.inputs.items():
            if shape == ():
                continue
            row: dict[str, Any] = {"program": name, "wrt": wrt, "cost_f": total(iv.cost(program.expr))}
            for peer, timer in (("jacacc", lambda p, w, a: jacacc_times(p, w, a, backend)), ("jax", jax_times),
                                ("torch", torch_times)):
                try:
                    tf, tg = timer(program, wrt, arrays)
                except (ImportError, LookupError):
                    continue
                row[peer] = {"function_s": tf, "gradient_s": tg, "ratio": tg / tf}
            rows.append(row)
    return rows


def readme_table(record: dict[str, Any]) -> str:
    """The README's tables: cost-ratio distribution, the paper's examples, run-time ratios per library."""
    res = record["results"]
    r = res["cost"]["random"]
    lines = [f"Cost ratio cost(grad f) / cost(f) over {r['count']} random gradients: median {r['median']:.2f}, "
             f"90th percentile {r['p90']:.2f}, max {r['max']:.2f} (documented C = {res['constant']}; "
             f"{res['cost']['zero_cost_programs']} program-input pairs without arithmetic have free gradients).",
             "", "| paper example | wrt | cost f | cost grad f | ratio |", "|---|---|---|---|---|"]
    for row in res["cost"]["examples"]:
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}"
        lines.append(f"| {row['program']} | {row['wrt']} | {total(row['cost_f'])} | {total(row['cost_grad'])} "
                     f"| {ratio} |")
    lines += ["", "| run time grad f / f | median | 90th percentile | max | gradients |", "|---|---|---|---|---|"]
    names = {"jacacc": "jacacc (compiled, Numba)", "jax": "JAX (jit)", "torch": "PyTorch (autograd)"}
    for peer, summary in res["time"].items():
        lines.append(f"| {names.get(peer, peer)} | {summary['median']:.2f} | {summary['p90']:.2f} "
                     f"| {summary['max']:.2f} | {summary['count']} |")
    return "\n".join(lines)


def plot_cheap_gradients(record: dict[str, Any]) -> Any:
    """The figure: the cost-ratio histogram beside the run-time ratios per library (returns it)."""
    import matplotlib.pyplot as plt

    cost_rows, time_rows = record["results"]["cost"]["rows"], record["results"]["time_rows"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    ratios = [r["ratio"] for r in cost_rows if r["ratio"] is not None]
    left.hist(ratios, bins=30, color="tab:blue")
    left.axvline(CONSTANT, color="tab:red", linestyle="--", label=f"documented C = {CONSTANT}")
    left.set_xlabel("cost(grad f) / cost(f)  (§4.3 model)")
    left.set_ylabel("programs × inputs")
    left.legend()
    left.set_title(f"cost ratios, {len(ratios)} gradients")
    for k, peer in enumerate(("jacacc", "jax", "torch")):
        values = [r[peer]["ratio"] for r in time_rows if peer in r]
        if values:
            right.scatter(np.full(len(values), k) + np.random.default_rng(k).uniform(-0.2, 0.2, len(values)),
                          values, s=10, label=peer)
    right.set_xticks(range(3), ["jacacc", "JAX", "PyTorch"])
    right.set_yscale("log")
    right.set_ylabel("time(grad f) / time(f)")
    right.set_title("run-time ratios on the same programs")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=300, help="random programs for the cost ratios")
    parser.add_argument("--timed", type=int, default=40, help="random programs for the run-time ratios")
    parser.add_argument("--timed-extent", type=int, default=24, help="largest extent of the timed programs")
    parser.add_argument("--backend", default="numba", help="jacacc.iverson.compile backend")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a small run (tests)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / f"{EXPERIMENT}.json")
    parser.add_argument("--figure", type=Path, default=ROOT / "figures" / f"{EXPERIMENT}.png")
    args = parser.parse_args(argv)
    if args.quick:
        args.programs, args.timed, args.timed_extent = 20, 2, 6

    generated = {f"random {s}": random_program(np.random.default_rng(args.seed + s), scalar=True,
                                               max_extent=4, max_depth=5) for s in range(args.programs)}
    examples = paper_examples()
    cost_rows = cost_ratios({**examples, **generated})
    random_ratios = [r["ratio"] for r in cost_rows if r["program"].startswith("random") and r["ratio"] is not None]
    zero_cost = [r for r in cost_rows if r["ratio"] is None]
    assert all(total(r["cost_grad"]) == 0 for r in zero_cost), "a program with no arithmetic has a costly gradient"
    worst = max(r["ratio"] for r in cost_rows if r["ratio"] is not None)
    assert worst <= CONSTANT, f"cheap-gradient constant exceeded: {worst}"

    timed_programs = [(f"random {s}", random_program(np.random.default_rng(10_000 + args.seed + s),
                                                     scalar=True, max_extent=args.timed_extent, max_depth=4))
                      for s in range(args.timed)]
    timed = [(name, p) for name, p in timed_programs if total(iv.cost(p.expr)) > 0]
    timed += [(name, p) for name, p in paper_examples(n=256 if not args.quick else 8).items()]
    time_rows = time_ratios(timed, args.seed, args.backend)

    results = {
        "constant": CONSTANT,
        "cost": {"random": summarize(random_ratios),
                 "examples": [r for r in cost_rows if not r["program"].startswith("random")],
                 "zero_cost_programs": len(zero_cost), "rows": cost_rows},
        "time": {peer: summarize([r[peer]["ratio"] for r in time_rows if peer in r])
                 for peer in ("jacacc", "jax", "torch") if any(peer in r for r in time_rows)},
        "time_rows": time_rows,
    }
    record = write_record(args.out, EXPERIMENT, results, seed=args.seed,
                          parameters={"programs": args.programs, "timed": args.timed,
                                      "timed_extent": args.timed_extent, "backend": args.backend,
                                      "quick": args.quick})
    import matplotlib

    matplotlib.use("Agg")
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    plot_cheap_gradients(record).savefig(args.figure, dpi=120)
    print(f"cost ratios over {len(random_ratios)} random gradients: {results['cost']['random']}")
    for row in results["cost"]["examples"]:
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}"
        print(f"  {row['program']:<26} wrt {row['wrt']:<3} cost f {total(row['cost_f']):>7} "
              f"grad {total(row['cost_grad']):>7}  ratio {ratio}")
    for peer, summary in results["time"].items():
        print(f"run-time ratio grad/f, {peer}: median {summary['median']:.2f}, max {summary['max']:.2f}")
    print(f"wrote {args.out} and {args.figure}")
    return 0 if math.isfinite(worst) else 1


if __name__ == "__main__":
    sys.exit(main())
