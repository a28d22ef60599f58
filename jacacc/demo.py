"""``make demo``: the main job end to end on a built-in example.

Traces Roe's flux (RoeFlux_1d, 6 → 3), prints the graph's size, optimizes
it with every registered heuristic in every mode (vertex, edge, face), and checks every
schedule's Jacobian against central finite differences and the dense chain
rule.  Exit status 0 when every check passes.
"""

from __future__ import annotations

import sys

import numpy as np

from jacacc.api import optimize
from jacacc.eliminate import modes
from jacacc.graph import reference_jacobian
from jacacc.orders import methods
from jacacc.problems import get
from jacacc.verify import central_differences

FD_RTOL = 1e-6  # central differences are accurate to about step² ≈ 1e-12 plus rounding / step
CHAIN_RULE_RTOL = 1e-12


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))


def main(problem_name: str = "RoeFlux_1d") -> int:
    problem = get(problem_name)
    traced = problem.trace()
    graph = traced.graph
    x = problem.sample(seed=0)
    print(f"{problem.name}: {problem.description}")
    print(
        f"traced graph: {len(graph.inputs)} inputs, {len(graph.intermediates)} intermediates, "
        f"{len(graph.outputs)} outputs, {graph.n_edges} edges"
    )
    fd = central_differences(traced, x)
    chain_rule = traced.reference_jacobian(x)
    fd_err = _relative_error(chain_rule, fd)
    print(f"point x = {x.tolist()}")
    print(f"dense chain rule vs central differences: relative error {fd_err:.2e}")
    ok = fd_err <= FD_RTOL
    print()
    print(f"{'mode':<7} {'method':<24} {'mults':>6} {'adds':>6} {'optimal':>8}  {'vs FD':>9} {'vs chain':>9}  order")
    for mode in modes():
        for name in methods(mode, exact=False):
            plan = optimize(graph, mode=mode, method=name, seed=0)
            jac = traced.jacobian(x, mode=mode, method=name, seed=0)
            err = _relative_error(jac, fd)
            exact = _relative_error(jac, chain_rule)
            passed = err <= FD_RTOL and exact <= CHAIN_RULE_RTOL
            ok &= passed
            optimal = {True: "yes", False: "no", None: "?"}[plan.optimal]
            order = " ".join(plan.order_strings())
            if len(order) > 40:
                order = order[:37] + "..."
            flag = "" if passed else "  FAILED"
            print(
                f"{mode:<7} {name:<24} {plan.mults:>6} {plan.adds:>6} {optimal:>8}  {err:9.2e} {exact:9.2e}  "
                f"{order}{flag}"
            )
    print()
    print(f"lower bound on multiplications: {optimize(graph).lower_bound}")
    print("Jacobian (markowitz, vertex mode):")
    with np.printoptions(precision=5, suppress=True):  # local: callers' print options stay as they were
        print(traced.jacobian(x))
    assert np.allclose(traced.jacobian(x), reference_jacobian(traced.linearize(x)))
    print()
    print("all schedules verified" if ok else "VERIFICATION FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
