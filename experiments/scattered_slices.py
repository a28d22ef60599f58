"""Sums of slices scattered back: one fused kernel with a bracket per slice, or each slice added where it lies.

A sum of ``index_scatter`` terms (the adjoint of ``x[a:b]``: a convolution's Hessian by shifted
slices, a sum of windows) can run as one fused region, whose kernel tests every slice's bracket
at every entry of the sum, or as NumPy statements that add each slice into the sum's array where
it lies.  :func:`jacacc.tensor.fusion._scattered_cheaper` picks one by a cost model
(:data:`~jacacc.tensor.fusion.BRACKET_TEST_ELEMENTS`, :data:`~jacacc.tensor.fusion.BRACKET_GROWTH`,
:data:`~jacacc.tensor.fusion.SCATTERED_ENTRY_ELEMENTS`,
:data:`~jacacc.tensor.fusion.SCATTERED_SLICE_CALLS`).  This script times both ways on sums of
``k`` slices ``0.1·(j + 1)·x`` (a stencil's Hessian: the weights times a shifted Jacobian) of an n × width array placed at columns j … j + width of an n × n
array, and records which the rule picks:

* ``kernel_s`` / ``scattered_s``: the best of five repeats of the planned program (its
  straight-line function, warm), each a loop of at least 20 ms;
* ``rule``: ``"scattered"`` or ``"kernel"``; ``picked_within`` the picked time over the faster one.

Writes ``results/scattered_slices.json``.

Usage::

    python experiments/scattered_slices.py           # about a minute
    python experiments/scattered_slices.py --quick   # the three smallest cases
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from jacacc.bench import time_call, write_record  # noqa: E402
from jacacc.tensor import fusion  # noqa: E402
from jacacc.tensor.arrays import BasicKey  # noqa: E402
from jacacc.tensor.evaluate import Program  # noqa: E402
from jacacc.tensor.expr import Tensor, add, const, einsum, var  # noqa: E402
from jacacc.tensor.operators import apply_operator  # noqa: E402

EXPERIMENT = "scattered_slices"
#: (n, slices, width): small windows, few wide shifted slices, and between
CASES = ((40, 30, 3), (100, 10, 3), (100, 98, 3), (200, 7, 194), (300, 20, 20), (300, 298, 3),
         (1000, 300, 3), (2000, 7, 1994))


def slice_sum(n: int, slices: int, width: int) -> tuple[Tensor, Tensor]:
    """Σⱼ 0.1·(j + 1)·x placed at columns j … j + width of an n × n array, and x (n × width)."""
    x = var("x", (n, width))
    terms = [apply_operator("index_scatter", [einsum("ij,->ij", x, const(0.1 * (j + 1)))],
                            key=BasicKey((("s", 0, 1, n), ("s", j, 1, width))), shape=(n, n))[0]
             for j in range(slices)]
    return add(*terms), x


@contextmanager
def forced(scattered: bool) -> Iterator[None]:
    """Fusion's choice forced one way while planning."""
    rule = fusion._scattered_cheaper
    fusion._scattered_cheaper = lambda region: scattered
    try:
        yield
    finally:
        fusion._scattered_cheaper = rule


def measure(n: int, slices: int, width: int, rng: np.random.Generator) -> dict:
    total, x = slice_sum(n, slices, width)
    point = rng.standard_normal((n, width))
    [region] = [r for r in fusion.find_regions([total], min_size=0) if r.root is total] or [None]
    times, results = {}, {}
    for way, scattered in (("kernel", False), ("scattered", True)):
        with forced(scattered):
            program = Program([total], [x])
        for _ in range(5):  # past the kernel's compile
            program(point)
        results[way] = program(point)[0]
        times[way] = time_call(lambda program=program: program(point), repeat=5, min_time=0.02)
    np.testing.assert_allclose(results["kernel"], results["scattered"], rtol=1e-12)
    rule = "scattered" if region is None or fusion._scattered_cheaper(region) else "kernel"
    return {"n": n, "slices": slices, "width": width, "kernel_s": times["kernel"], "scattered_s": times["scattered"],
            "rule": rule, "picked_within": times[rule] / min(times.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the three smallest cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results",
                                                      f"{EXPERIMENT}.json"))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []
    for n, slices, width in CASES[:3] if args.quick else CASES:
        row = measure(n, slices, width, rng)
        rows.append(row)
        print(f"n={n:5d} slices={slices:4d} width={width:5d}  kernel {row['kernel_s'] * 1e6:10.1f} us  "
              f"scattered {row['scattered_s'] * 1e6:10.1f} us  rule: {row['rule']:9s} ({row['picked_within']:.2f}x the faster)",
              flush=True)
    write_record(args.out, EXPERIMENT, rows, seed=args.seed,
                 parameters={"cases": [list(c) for c in CASES], "quick": args.quick, "blas_threads": 1,
                             "bracket_test_elements": fusion.BRACKET_TEST_ELEMENTS,
                             "bracket_growth": fusion.BRACKET_GROWTH,
                             "scattered_entry_elements": fusion.SCATTERED_ENTRY_ELEMENTS,
                             "scattered_slice_calls": fusion.SCATTERED_SLICE_CALLS})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
