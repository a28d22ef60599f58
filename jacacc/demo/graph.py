"""Demo part ``graph`` (paper 003): elimination on Roe's flux with every heuristic in every mode.

Traces RoeFlux_1d (6 → 3), optimizes its graph with every registered
heuristic in every mode (vertex, edge, face, structure), and checks every
schedule's Jacobian against central differences of the function itself and
the dense chain rule on the graph.  The time-limited search ``anneal`` runs
for :data:`ANNEAL_SECONDS`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jacacc.demo.registry import register_part
from jacacc.demo.report import Report, central_differences, relative_error

__all__ = ["ANNEAL_SECONDS", "CHAIN_RULE_RTOL", "FD_RTOL", "PROBLEM", "run"]

PROBLEM = "RoeFlux_1d"
FD_RTOL = 1e-6  # central differences: about step² ≈ 1e-12 plus rounding / step
CHAIN_RULE_RTOL = 1e-12
ANNEAL_SECONDS = 1.0  # the time limit of the one time-limited search among the heuristics


def _options(method: str) -> dict[str, Any]:
    return {"time_limit": ANNEAL_SECONDS} if method == "anneal" else {}


@register_part("graph", "paper 003: Roe's flux eliminated by every heuristic in every mode, each Jacobian checked")
def run(report: Report) -> None:
    """Optimize RoeFlux_1d's graph with every heuristic in every mode and verify every schedule."""
    import jacacc
    from jacacc.problems import get

    problem = get(PROBLEM)
    traced = problem.trace()
    graph = traced.graph
    x = problem.sample(seed=0)
    report.line(f"{problem.name}: {problem.description}")
    report.line(f"traced graph: {len(graph.inputs)} inputs, {len(graph.intermediates)} intermediates, "
                f"{len(graph.outputs)} outputs, {graph.n_edges} edges; point x = "
                f"[{', '.join(f'{v:.4f}' for v in x)}]")
    fd = central_differences(problem, x)
    chain_rule = traced.reference_jacobian(x)
    partials = traced.partials(x)
    report.close("dense chain rule on the graph vs central differences of the function", chain_rule, fd, FD_RTOL)

    report.line()
    report.line(f"{'mode':<9} {'method':<24} {'mults':>6} {'adds':>6}  {'vs FD':>8} {'vs chain':>8}  order")
    rows: list[tuple[str, str, int]] = []
    worst_fd = worst_chain = 0.0
    for mode in jacacc.modes():
        for name in jacacc.methods(mode, exact=False):
            plan = jacacc.optimize(graph, mode=mode, method=name, seed=0, **_options(name))
            jac = plan.schedule.evaluate(partials, zero_edges=traced.zero_edges)
            err, exact = relative_error(jac, fd), relative_error(jac, chain_rule)
            worst_fd, worst_chain = max(worst_fd, err), max(worst_chain, exact)
            rows.append((mode, name, plan.mults))
            order = " ".join(plan.order_strings())
            order = order if len(order) <= 36 else order[:33] + "..."
            label = f"{name} ({ANNEAL_SECONDS:g} s)" if name == "anneal" else name
            flag = "" if err <= FD_RTOL and exact <= CHAIN_RULE_RTOL else "  FAILED"
            report.line(f"{mode:<9} {label:<24} {plan.mults:>6} {plan.adds:>6}  {err:8.1e} {exact:8.1e}  "
                        f"{order}{flag}")
    report.line()
    lower_bound = jacacc.optimize(graph).lower_bound
    baseline = {name: mults for mode, name, mults in rows if mode == "vertex" and name in ("forward", "reverse")}
    mode, name, mults = min(rows, key=lambda row: row[2])
    report.headline(f"best heuristic {name} ({mode} mode) {mults} mults against forward mode's "
                    f"{baseline['forward']} and reverse mode's {baseline['reverse']} (lower bound {lower_bound})")
    report.require(f"all {len(rows)} schedules vs central differences: worst relative error {worst_fd:.1e} "
                   f"(rtol {FD_RTOL:g})", worst_fd <= FD_RTOL)
    report.require(f"all {len(rows)} schedules vs the dense chain rule: worst relative error {worst_chain:.1e} "
                   f"(rtol {CHAIN_RULE_RTOL:g})", worst_chain <= CHAIN_RULE_RTOL)
    report.require(f"no schedule beats the lower bound ({lower_bound} mults)",
                   all(m >= lower_bound for _, _, m in rows))
    with np.printoptions(precision=5, suppress=True):  # local: callers' print options stay as they were
        report.line("Jacobian (markowitz, vertex mode):")
        for row in str(traced.jacobian(x)).splitlines():
            report.line(row)
