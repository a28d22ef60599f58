"""Certificates for AlphaGrad's scalar tasks: an order, a lower bound and the evidence (issue 43, item 2).

For each scalar task of AlphaGrad's benchmark as graphax builds it (zoo entries ``graphax_<task>``,
:mod:`jacacc.problems.alphagrad`), :func:`jacacc.orders.certify.certify` searches a vertex
elimination order with CP-SAT (its proven reductions and cuts) and proves a lower bound on every
order's cost; the certificates are written as data (``results/alphagrad_certificates.json``) that
``paper_reproductions/alphagrad_certified.py`` re-verifies without the solver.

Run ``python experiments/alphagrad_certify.py`` (one CP-SAT worker; ``--time-limit`` seconds per
task, default 300: the two tasks not proven reach their final bound within 60 s).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jacacc.bench import write_record  # noqa: E402
from jacacc.orders.certify import certify, check_certificate  # noqa: E402
from jacacc.problems import get  # noqa: E402
from jacacc.problems.alphagrad import SCALAR_TASKS  # noqa: E402

EXPERIMENT = "alphagrad_certificates"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(SCALAR_TASKS), choices=SCALAR_TASKS)
    parser.add_argument("--time-limit", type=float, default=300.0, help="CP-SAT seconds per task")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "results" / f"{EXPERIMENT}.json"))
    args = parser.parse_args(argv)
    certificates = {}
    for task in args.tasks:
        graph = get(f"graphax_{task}").graph()
        certificate = certify(graph, time_limit=args.time_limit, seed=args.seed, workers=1)
        check_certificate(graph, certificate)  # never write one the checker refuses
        certificates[task] = json.loads(certificate.to_json())
        print(f"{task:20s} order {certificate.cost:5d}  bound {certificate.lower_bound:5d}  "
              f"{certificate.status}  {certificate.seconds:.1f} s", flush=True)
    write_record(args.out, EXPERIMENT, {"certificates": certificates}, seed=args.seed,
                 parameters={"time_limit": args.time_limit, "workers": 1, "tasks": args.tasks})
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
