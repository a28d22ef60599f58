"""Paper 003, Fig. 4.1: the factored expression (Eq. 4.1, 5 fma) against all paths listed (Eq. 4.2, 12 fma).

What the paper says (§4)
------------------------
"in Fig. 4.1 (a) there are two simple blocks [...] chained together, we can
immediately write down its algebraic expression (4.1)"; "Fig. 4.1 (c) is a
direct simple block that lists all paths from root to terminal in Fig. 4.1
(a). Its algebraic expression (4.2)"; "it takes 12 fma's to compute Eq. 4.2
while only 5 fma's for Eq. 4.1"; and, for local Jacobian accumulation, one
order is preferred to another "because the latter splits [c] into 4
vertices, resulting in Fig. 4.1 (c), which requires more fma's".  §4 also
says that "multiple algebraic expressions connected by intermediate
variables is effectively a DAG of references", i.e. a schedule.

What this script does
---------------------
On the reconstructed graph ``jacacc.problems.paper003.fig4_1a()`` (see
``docs/paper003_figures.md``; edge ``u → v`` is written ``v_u`` = ∂v/∂u, the
paper's notation, e.g. ``f_a`` = ∂f/∂a):

1. finds the best vertex elimination (``jacacc.optimize(g, method="markowitz")``),
   converts its schedule to algebraic expressions
   (:func:`jacacc.bracketing.to_expressions`) and prints the factored form;
   it is Eq. 4.1 up to the order of the terms of each sum;
2. writes out all root–terminal paths (:func:`jacacc.bracketing.expand_paths`),
   Eq. 4.2;
3. prints the order the paper rejects (eliminate ``c`` first) for contrast;
4. converts the expressions back into schedules
   (:func:`jacacc.bracketing.from_expressions`) and checks them;
5. for reference variables, prints the best vertex elimination of the
   complex block Fig. 4.1 (b): a value used twice is named ``r1`` (Eq. 4.4 /
   4.5's ``r``).

Counting convention (the paper's "fma")
---------------------------------------
Counted from the expression trees themselves.  Every multiplication ``*`` is
one fused multiply-add; the addition that adds a product term of a sum into
the running sum is fused into that product's multiplication (``a*b + c`` is
one fma).  An addition only costs an operation of its own when it has no
product to fuse into: a sum with ``q`` terms that are not products (edge
partials, reference variables, parenthesised sums) needs ``max(q - 1, 0)``
plain additions.  A reference variable's definition is counted once.  So
``fmas = mults + Σ_sums max(q - 1, 0)``.  Eq. 4.1 ``(f_a a_c + f_b b_c)(c_d d_x
+ c_e e_x)``: 2 + 2 + 1 = 5 multiplications, both additions fused: 5 fma.
Eq. 4.2: 4 paths of 4 edges, 4 × 3 = 12 multiplications, the 3 additions
fused: 12 fma.  Both numbers are computed at run time and asserted.

Run ``python paper_reproductions/003_fig4_1_expressions.py``; ``main()``
returns 0 when every check passes (an ``AssertionError`` otherwise).
"""

from __future__ import annotations

import sys

import numpy as np

import jacacc
from jacacc.bracketing import (
    Expr,
    ExpressionSet,
    Leaf,
    Mul,
    Ref,
    expand_paths,
    from_expressions,
    paper_symbol,
    parse_expressions,
    to_expressions,
)
from jacacc.problems import paper003

# Eq. 4.1 as docs/paper003_figures.md reconstructs it, in the paper's symbols
EQ_4_1 = "J[f,x] = (f_a*a_c + f_b*b_c)*(c_d*d_x + c_e*e_x)"


def canonical(e: Expr, ex: ExpressionSet) -> str:
    """The expression with the terms of every sum sorted: equal up to commutativity of ``+``
    (products keep their order, the paper's noncommutativity restriction)."""
    if isinstance(e, Leaf):
        return ex.symbols[e.index]
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, Mul):
        return f"[{canonical(e.left, ex)}*{canonical(e.right, ex)}]"
    return "(" + " + ".join(sorted(canonical(t, ex) for t in e.terms)) + ")"


def counts(ex: ExpressionSet) -> str:
    return f"{ex.fmas} fma ({ex.mults} multiplications, {ex.adds} additions)"


def section(title: str) -> None:
    print(f"\n== {title}")


def main() -> int:
    g = paper003.fig4_1a()
    reference = jacacc.reference_jacobian(g)
    batch = np.random.default_rng(0).uniform(-2.0, 2.0, (5, g.n_edges))
    batch_reference = jacacc.reference_jacobian(g, batch)

    section(
        "Fig. 4.1 (a), reconstructed (paper direction: root f depends on ..., label = ∂source/∂destination)"
    )
    print("  " + "  ".join(f"{s}→{d}:{p:g}" for s, d, p in paper003.paper_edges("fig4_1a")))
    print(f"  Jacobian ∂f/∂x = {reference.item():g}")

    # 1. the factored form: the best vertex elimination as algebraic expressions
    plan = jacacc.optimize(g, method="markowitz")
    factored = to_expressions(plan, names=paper_symbol)
    section(f"Best vertex elimination (markowitz, order {' '.join(plan.order_strings())}) as expressions")
    print(plan.schedule.listing())
    print("=>")
    print(factored)
    print(f"cost: {counts(factored)}")
    eq41 = parse_expressions(EQ_4_1, g, names=paper_symbol)
    key = ("f", "x")
    assert canonical(factored.entries[key], factored) == canonical(eq41.entries[key], eq41), "not Eq. 4.1"
    print(f"= Eq. 4.1 up to the order of the terms of each sum: {EQ_4_1}")
    assert (factored.mults, factored.adds) == (plan.mults, plan.adds)
    assert factored.fmas == eq41.fmas == 5, factored.fmas  # the paper: "only 5 fma's for Eq. 4.1"
    assert plan.optimal is True and plan.lower_bound == 5  # no vertex elimination does better
    np.testing.assert_allclose(factored.evaluate(), reference)
    np.testing.assert_allclose(factored.evaluate(batch), batch_reference)

    # 2. all root-terminal paths listed: Bauer's formula unfactored
    listed = expand_paths(g, names=paper_symbol)
    section("All root–terminal paths listed (Eq. 4.2; Fig. 4.1 (c) as an expression)")
    print(listed)
    print(f"cost: {counts(listed)}")
    assert listed.fmas == listed.mults == 12, listed.fmas  # the paper: "12 fma's to compute Eq. 4.2"
    assert not listed.references
    np.testing.assert_allclose(listed.evaluate(), reference)
    np.testing.assert_allclose(listed.evaluate(batch), batch_reference)
    fig4_1c = jacacc.optimize(paper003.fig4_1c(), method="markowitz")
    as_graph = to_expressions(fig4_1c)
    print(f"Fig. 4.1 (c) (the listed paths as a graph), best vertex elimination: {counts(as_graph)}")
    assert as_graph.fmas == 12

    # 3. the order the paper rejects: c first "splits c into 4 vertices"
    c_first = jacacc.optimize(g, method=["c", "a", "b", "d", "e"])
    rejected = to_expressions(c_first, names=paper_symbol)
    section("Eliminating c first (the order the paper rejects: c is split into its 4 in/out pairs)")
    print(rejected)
    print(f"cost: {counts(rejected)}")
    assert rejected.fmas == c_first.mults == 10
    np.testing.assert_allclose(rejected.evaluate(), reference)

    # 4. the way back: the expressions are a schedule (print -> parse -> schedule)
    section("Back to schedules (from_expressions of the printed expressions)")
    for name, ex, fmas in (("factored, Eq. 4.1", factored, 5), ("all paths, Eq. 4.2", listed, 12)):
        schedule = from_expressions(parse_expressions(str(ex), g, names=paper_symbol), g)
        print(f"-- {name}: {schedule.mults} multiplications, {schedule.adds} additions")
        print(schedule.listing())
        assert schedule.mults == ex.mults == fmas and schedule.adds == ex.adds
        np.testing.assert_allclose(schedule.evaluate(g.partial_array()), reference)
        np.testing.assert_allclose(schedule.evaluate(batch), batch_reference)

    # 5. reference variables: the complex block of Fig. 4.1 (b)
    b = paper003.fig4_1b()
    plan_b = jacacc.optimize(b, method="markowitz")
    with_ref = to_expressions(plan_b, names=paper_symbol)
    section("Fig. 4.1 (b), best vertex elimination: a value used twice becomes a reference variable")
    print(with_ref)
    print(f"cost: {counts(with_ref)} (r1 is defined once; Eq. 4.4 / 4.5: 8 fma)")
    assert list(with_ref.references) == ["r1"]
    assert str(with_ref).count("r1") == 3  # defined once, used twice
    assert with_ref.fmas == plan_b.mults == 8
    np.testing.assert_allclose(with_ref.evaluate(), jacacc.reference_jacobian(b))
    back = from_expressions(parse_expressions(str(with_ref), b, names=paper_symbol), b)
    assert back.mults == 8
    np.testing.assert_allclose(back.evaluate(b.partial_array()), jacacc.reference_jacobian(b))

    section("Summary")
    print(
        f"factored (Eq. 4.1): {factored.fmas} fma; all paths (Eq. 4.2): {listed.fmas} fma — as in paper 003"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
