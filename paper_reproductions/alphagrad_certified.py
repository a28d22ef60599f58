"""AlphaGrad's tasks (Lohoff & Neftci, NeurIPS 2024): vertex orders with certified lower bounds.

What the paper says
-------------------
AlphaGrad learns vertex-elimination orders by reinforcement learning and reports, per task, the
multiplications of forward, reverse and minimal-Markowitz elimination and of its best order
(:data:`jacacc.problems.alphagrad.PUBLISHED`); none of them is proven optimal, and no published
method certifies optimal orders at this size (51–108 intermediates).

What this script does (each claim asserted)
-------------------------------------------
For each scalar task (zoo ``graphax_<task>``, the graphs graphax builds), the certificate stored in
``results/alphagrad_certificates.json`` (written by ``experiments/alphagrad_certify.py``) is
re-verified by :func:`jacacc.orders.certify.check_certificate` from the graph alone, without the
solver: the order is a permutation of the intermediates and its cost is replayed from scratch; every
Menger term's witness paths are paths of the graph and disjoint; the safe prefix follows its rules;
each block bound is recomputed by the checker's own flows and dynamic program.  Then: the order costs
no more than AlphaGrad's best, the bound is at most the order's cost, and a task is called optimal
only where the re-verified bound equals the cost.  A bound CP-SAT proved beyond the re-verified one
(``proof="cp-sat"``) is printed as the solver's, not counted as certified.  Prints the paper-style
table.  Runs in about 15 s.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jacacc import optimize  # noqa: E402
from jacacc.bench import read_record  # noqa: E402
from jacacc.orders.certify import Certificate, check_certificate  # noqa: E402
from jacacc.problems import get  # noqa: E402
from jacacc.problems.alphagrad import PUBLISHED  # noqa: E402

RECORD = ROOT / "results" / "alphagrad_certificates.json"


def main() -> int:
    certificates = read_record(RECORD)["results"]["certificates"]
    rows = ["| task | vertices | fwd | rev | Markowitz | AlphaGrad | jacacc order | certified bound | "
            "CP-SAT's bound | status | check (s) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for task, data in certificates.items():
        graph = get(f"graphax_{task}").graph()
        certificate = Certificate.from_json(data)
        start = time.perf_counter()
        check_certificate(graph, certificate)
        seconds = time.perf_counter() - start
        vertices, fwd, rev, markowitz, alphagrad = PUBLISHED[task]
        assert len(graph.intermediates) == vertices
        # the order is the graph's own: optimize replays it to the same count
        assert optimize(graph, mode="vertex", method=list(certificate.order), baselines=False).mults == certificate.cost
        assert certificate.certified_bound <= certificate.lower_bound <= certificate.cost <= alphagrad, task
        status = "optimal" if certificate.certified_bound == certificate.cost else \
            f"gap [{certificate.certified_bound}, {certificate.cost}]"
        rows.append(f"| {task} | {vertices} | {fwd} | {rev} | {markowitz} | {alphagrad} | {certificate.cost} | "
                    f"{certificate.certified_bound} | {certificate.lower_bound} | {status} | {seconds:.1f} |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
