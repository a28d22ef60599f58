"""The ``jacacc`` command line.

``jacacc optimize GRAPH.json`` finds an elimination order and prints it with
its multiplication count beside forward and reverse mode; ``jacacc methods``
lists the registered order methods; ``jacacc demo`` runs the built-in example.
Errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import NoReturn

from jacacc.api import Plan, optimize
from jacacc.eliminate import modes
from jacacc.errors import JacaccError
from jacacc.graph import CompGraph
from jacacc.orders import methods

EXIT_ERROR = 2
BASELINES = ("forward", "reverse")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line."""

    def error(self, message: str) -> NoReturn:
        # one prefix for every error, also from a subcommand's parser (whose prog is "jacacc optimize")
        self.exit(EXIT_ERROR, f"jacacc: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="jacacc",
        description=(
            "Jacobian accumulation on computational graphs: find cheap vertex or edge "
            "elimination orders for a linearized computational graph."
        ),
        epilog=(
            "Graph files use the JSON exchange format "
            '{"inputs": [...], "outputs": [...], "edges": [[src, dst, partial], ...]}; '
            "see README.md."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    opt = sub.add_parser(
        "optimize",
        help="find an elimination order for a graph and report its cost",
        description=(
            "Find an elimination order for GRAPH and print it with its multiplication count, "
            "next to forward and reverse mode. mults counts scalar multiplications exactly as the "
            "literature does (vertex j: |P(j)|*|S(j)|; front elimination: |S(j)|; back: |P(i)|), "
            "counted from the schedule's own ops."
        ),
    )
    opt.add_argument("graph", metavar="GRAPH.json", help="graph in the JSON exchange format")
    opt.add_argument("--mode", default="vertex", help=f"elimination mode: {' | '.join(modes())} (default: vertex)")
    known = "; ".join(f"{mode}: {', '.join(methods(mode))}" for mode in modes())
    opt.add_argument(
        "--method",
        default="markowitz",
        help=f"order method ({known}); default: markowitz",
    )
    opt.add_argument("--seed", type=int, default=None, help="seed for randomized methods (random)")
    opt.add_argument(
        "--json",
        action="store_true",
        help="print one JSON record instead of text: mode, method, mults, adds, fill_ins, optimal "
        "(true/false/null = unknown), lower_bound, seed, order (vertex ids, or [src, dst, "
        "'front'|'back'] steps), graph (sizes) and baselines (forward/reverse mults and adds)",
    )

    meth = sub.add_parser("methods", help="list the order methods registered for each mode",
                          description="List the order methods registered for each elimination mode.")
    meth.add_argument("--mode", default=None, help="only this mode")

    sub.add_parser("demo", help="run the built-in example end to end",
                   description="Trace a built-in function, optimize it with every method, verify the Jacobian.")
    return parser


def _baselines(graph: CompGraph, mode: str) -> dict[str, Plan]:
    return {name: optimize(graph, mode=mode, method=name) for name in BASELINES if name in methods(mode)}


def cmd_optimize(args: argparse.Namespace) -> int:
    graph = CompGraph.from_json(args.graph)
    plan = optimize(graph, mode=args.mode, method=args.method, seed=args.seed)
    baselines = _baselines(graph, args.mode)
    if args.json:
        record = plan.to_record()
        record["graph"] = {
            "file": args.graph,
            "inputs": len(graph.inputs),
            "intermediates": len(graph.intermediates),
            "outputs": len(graph.outputs),
            "edges": graph.n_edges,
        }
        record["baselines"] = {name: {"mults": p.mults, "adds": p.adds} for name, p in baselines.items()}
        print(json.dumps(record))
        return 0
    print(
        f"graph   {args.graph}: {len(graph.inputs)} inputs, {len(graph.intermediates)} intermediates, "
        f"{len(graph.outputs)} outputs, {graph.n_edges} edges"
    )
    print(f"mode    {plan.mode}")
    print(f"method  {plan.method}")
    print(f"order   {' '.join(plan.order_strings()) or '(no intermediates)'}")
    optimal = {True: "yes", False: "no", None: "unknown"}[plan.optimal]
    print(f"optimal {optimal} (lower bound {plan.lower_bound})")
    print()
    rows = [(plan.method, plan)] + [(n, p) for n, p in baselines.items() if n != plan.method]
    width = max(len(n) for n, _ in rows)
    print(f"{'':<{width}}  {'mults':>7}  {'adds':>7}")
    for name, p in rows:
        print(f"{name:<{width}}  {p.mults:>7}  {p.adds:>7}")
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    for mode in [args.mode] if args.mode else modes():
        print(f"{mode}: {', '.join(methods(mode)) or '(none registered)'}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from jacacc.demo import main as demo_main

    return demo_main()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("no command given; choose one of: optimize, methods, demo")
    handler = {"optimize": cmd_optimize, "methods": cmd_methods, "demo": cmd_demo}[args.command]
    try:
        return handler(args)
    except JacaccError as exc:
        print(f"jacacc: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"jacacc: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
