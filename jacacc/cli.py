"""The ``jacacc`` command line.

``jacacc optimize GRAPH.json`` finds an elimination order and prints it with
its multiplication count beside forward and reverse mode; ``jacacc methods``
lists the registered order methods; ``jacacc demo`` runs the built-in example;
``jacacc compile`` prints a generated Jacobian kernel, ``jacacc bench``
times kernels against JAX and PyTorch, and ``jacacc sweep`` runs a grid of
cells (in-process, on local workers or a Dask cluster) into a SQLite store.
Errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import NoReturn

from jacacc.api import Plan, optimize, resolve_mode
from jacacc.argtypes import dimension, positive_int
from jacacc.eliminate import modes
from jacacc.errors import JacaccError, require_extra
from jacacc.graph import CompGraph
from jacacc.orders import methods
from jacacc.progress import SearchProgress, shows_progress

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
            "see docs/guide/graph-elimination.md (make docs builds the site)."
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
    opt.add_argument("graph", metavar="GRAPH.json|MODULE:FUNCTION",
                     help="graph in the JSON exchange format, or a JAX function (traced with jacacc.from_jax; "
                     "give its argument's shape with --shape)")
    _add_shape_argument(opt)
    opt.add_argument("--mode", default=None,
                     help=f"elimination mode: {' | '.join(modes())} (default: vertex, or the one mode the "
                     "method is registered in: structure for dstar, blocks, levels)")
    known = "; ".join(f"{mode}: {', '.join(methods(mode))}" for mode in modes())
    opt.add_argument(
        "--method",
        default="markowitz",
        help=f"order method ({known}); default: markowitz",
    )
    opt.add_argument("--seed", type=int, default=None, help="seed for randomized methods (random, anneal, cpsat)")
    opt.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                     help="time limit of a search method (anneal, cpsat, optimal; default 10 s, "
                     "optimal: until proven)")
    opt.add_argument("--workers", type=int, default=None, help="CP-SAT search workers (cpsat, optimal)")
    opt.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="show a search's progress (best, bound, elapsed) on stderr; "
                     "default: when stderr is a terminal")
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

    demo = sub.add_parser(
        "demo", help="tour the five systems on built-in examples, every result checked",
        description=("Tour jacacc's five systems (graph elimination, tensor calculus, linear algebra, the "
                     "Iverson-bracket language, elementwise derivatives), each on a small example whose "
                     "results are checked against independent references and, where installed, JAX or "
                     "PyTorch. Exit status 0 when every check passes, 1 otherwise."))
    demo.add_argument("parts", nargs="*", metavar="PART",
                      help="the parts to run, in this order (default: all; see --list)")
    demo.add_argument("--list", action="store_true", help="list the parts, one per line, and exit")
    _add_kernel_commands(sub)
    _add_sweep_command(sub)
    return parser


def _add_sweep_command(sub: argparse._SubParsersAction) -> None:
    """The ``sweep`` subcommand: a grid of cells into a SQLite store (jacacc.sweep)."""
    from jacacc.sweep.arguments import add_executor_arguments

    sweep = sub.add_parser(
        "sweep",
        help="run a grid of problem x mode x method x seed x options cells into a SQLite store",
        description=(
            "Cross the lists of GRID.json (problems, modes, methods, seeds, options; see docs/guide/experiments.md, "
            "'Sweeps') into cells, optimize and verify each one, and store one row per cell in STORE as it "
            "finishes. A rerun with the same STORE computes only the cells missing. "
            "`jacacc sweep --export STORE OUT.json|OUT.csv` writes the stored records."
        ),
    )
    sweep.add_argument("grid", nargs="?", metavar="GRID.json", help="the grid (a JSON object, or a list of them)")
    sweep.add_argument("--out", metavar="STORE", help="the SQLite store the cells go to (created when missing)")
    sweep.add_argument("--export", nargs=2, metavar=("STORE", "OUT"),
                       help="write the records of STORE to OUT (.json: a list of records; .csv: one row per cell)")
    add_executor_arguments(sweep, store=False)
    sweep.add_argument("--resume", action=argparse.BooleanOptionalAction, default=None,
                       help="skip the cells already in STORE (default); --no-resume recomputes them")
    sweep.add_argument("--retry-failed", action="store_true",
                       help="recompute the cells stored as error or timeout")
    sweep.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bar over cells on stderr; default: when stderr is a terminal")


def _add_kernel_commands(sub: argparse._SubParsersAction) -> None:
    """The ``compile`` and ``bench`` subcommands (compiled Jacobian kernels)."""
    from jacacc.codegen import backends

    comp = sub.add_parser(
        "compile",
        help="print (or write) the Jacobian kernel generated for a graph or zoo problem",
        description=(
            "Generate the straight-line Jacobian kernel of a zoo problem (traced) or a graph file "
            "(numeric partials) for one backend and elimination order, and print its source. "
            "The counts (mults, skipped multiplications by structural 0/±1) go to stderr."
        ),
    )
    comp.add_argument("target", metavar="GRAPH_OR_PROBLEM",
                      help="a zoo problem name, a JSON graph file, or MODULE:FUNCTION of a JAX function "
                      "(with --shape)")
    _add_shape_argument(comp)
    comp.add_argument("--backend", default="numba", help=f"{' | '.join(backends())} (default: numba)")
    comp.add_argument("--method", default="markowitz", help="order method (default: markowitz)")
    comp.add_argument("--mode", default=None,
                      help="elimination mode (default: vertex, or the method's only mode: structure for dstar, "
                      "blocks, levels)")
    comp.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    comp.add_argument("--max-statements", type=positive_int, default=None,
                      help="numba: split programs longer than this into parts")
    comp.add_argument("-o", "--output", default=None, help="write the source to this file instead of stdout")

    bench = sub.add_parser(
        "bench",
        help="Jacobians per second of compiled kernels next to JAX and PyTorch",
        description=(
            "Time every method x backend kernel of a zoo problem and the peers (JAX jit(vmap(jacfwd)) and "
            "jit(vmap(jacrev)), torch.func vmap(jacfwd) and vmap(jacrev); per-point Jacobians) at each batch "
            "size, with the roofline estimate of each kernel; writes a JSON record and a figure on request."
        ),
    )
    bench.add_argument("problem", metavar="PROBLEM", help="a zoo function problem (see jacacc.problems.names())")
    bench.add_argument("--methods", nargs="+", default=["forward", "reverse", "markowitz"])
    bench.add_argument("--backends", nargs="+", default=["numpy", "numba"],
                       help="backends; 'numba+fastmath' passes fastmath=True (default: numpy numba)")
    bench.add_argument("--peers", nargs="*", default=None,
                       help="peers (default: jax-jacfwd jax-jacrev torch-jacfwd torch-jacrev); none: --peers")
    bench.add_argument("--sizes", nargs="+", type=positive_int, default=[1_000, 100_000])
    bench.add_argument("--mode", default="vertex")
    bench.add_argument("--repeat", type=positive_int, default=3)
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--json", default=None, metavar="PATH", help="write the record here")
    bench.add_argument("--figure", default=None, metavar="PATH", help="write the bar chart here (needs matplotlib)")
    bench.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bar on stderr; default: when stderr is a terminal")
    bench.add_argument("--quick-peaks", action="store_true", help="measure the machine's peaks on small sizes")
    bench.add_argument("--threads", type=positive_int, default=None,
                       help="threads for the BLAS libraries (threadpoolctl) and Numba's kernels "
                            "(default: the libraries' own)")


def _baselines(graph: CompGraph, mode: str) -> dict[str, Plan]:
    return {name: optimize(graph, mode=mode, method=name) for name in BASELINES if name in methods(mode)}


def _search_options(args: argparse.Namespace) -> dict:
    """``time_limit``, ``workers`` and a ``progress`` printer for the search methods that take them."""
    options = {}
    if args.time_limit is not None:
        options["time_limit"] = args.time_limit
    if args.workers is not None:
        options["workers"] = args.workers
    if shows_progress(args.progress) and _takes_progress(args.mode, args.method):
        options["progress"] = SearchProgress(args.time_limit, enabled=True)
    return options


def _takes_progress(mode: str, method: str) -> bool:
    import inspect

    from jacacc.orders import get_method

    try:
        return "progress" in inspect.signature(get_method(method, mode)).parameters
    except (JacaccError, TypeError, ValueError):
        return False


def _add_shape_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", nargs="*", type=dimension, default=None, metavar="N",
                        help="shape of a JAX function's argument, e.g. --shape 6 or --shape 2 3 "
                        "(--shape alone: a scalar)")


def _load_function(spec: str):
    """``module:function`` → the function; the module is a dotted name importable
    from the current directory, or a path to a ``.py`` file."""
    import importlib
    import importlib.util
    import os

    module_name, _, attribute = spec.rpartition(":")
    if not module_name or not attribute:
        raise JacaccError(f"{spec!r} is not MODULE:FUNCTION")
    try:
        if module_name.endswith(".py"):
            if not os.path.isfile(module_name):
                raise JacaccError(f"no file {module_name!r} (from {spec!r})")
            loader_spec = importlib.util.spec_from_file_location(
                os.path.splitext(os.path.basename(module_name))[0], module_name)
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise JacaccError(f"cannot import module {module_name!r} (from {spec!r}): {exc}") from None
    except JacaccError:
        raise
    except Exception as exc:  # the module's own code failed: one line, not its traceback
        raise JacaccError(f"importing module {module_name!r} (from {spec!r}) raised {_describe(exc)}") from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise JacaccError(f"module {module_name!r} has no function {attribute!r}")
    return function


def _load_target(target: str, shape: list[int] | None, *, problems: bool):
    """A zoo problem (``problems=True``: a traced function or a graph), a JSON graph
    file, or ``MODULE:FUNCTION`` of a JAX function traced with :func:`jacacc.from_jax`
    at an argument of ``shape``."""
    import os

    is_function = ":" in target and not os.path.exists(target)
    if shape is not None and not is_function:
        raise JacaccError("--shape applies to a MODULE:FUNCTION target only")
    if problems:
        from jacacc.problems import get, names

        if target in names():
            problem = get(target)
            return problem if problem.kind == "function" else problem.graph()
    if not is_function:
        if problems and not os.path.exists(target):
            from jacacc.problems import names

            raise JacaccError(f"{target!r} is neither a zoo problem, a graph file nor MODULE:FUNCTION; "
                              f"problems: {', '.join(names())}")
        return CompGraph.from_json(target)
    if shape is None:
        raise JacaccError(f"{target!r} is a function: give its argument's shape with --shape")
    import numpy as np

    from jacacc.jaxpr import from_jax

    function = _load_function(target)
    try:
        return from_jax(function, np.ones(tuple(shape)))
    except JacaccError:  # jacacc's own refusals (an unsupported primitive, ...) are one line already
        raise
    except Exception as exc:
        # The user's function failed while JAX traced it: name it and the exception on one
        # line instead of a traceback through JAX's internals.
        raise JacaccError(f"function {target!r} raised {_describe(exc)} while being traced at an argument "
                          f"of shape {tuple(shape)} (call it in Python to see the traceback)") from None


def _describe(exc: BaseException) -> str:
    """``Type: first line of the message`` of an exception, for a one-line error.

    Examples
    --------
    >>> _describe(ZeroDivisionError("division by zero"))
    'ZeroDivisionError: division by zero'
    >>> _describe(ValueError("shapes differ\\nmore detail"))
    'ValueError: shapes differ ...'
    >>> _describe(KeyError())
    'KeyError'
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return f"{type(exc).__name__}: {lines[0]}" + (" ..." if len(lines) > 1 else "")


def cmd_optimize(args: argparse.Namespace) -> int:
    args.mode = resolve_mode(args.mode, args.method)
    graph = _load_target(args.graph, args.shape, problems=False)
    if not isinstance(graph, CompGraph):
        graph = graph.graph
    options = _search_options(args)
    try:
        plan = optimize(graph, mode=args.mode, method=args.method, seed=args.seed, **options)
    finally:
        if "progress" in options:
            options["progress"].close()
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
    if plan.search is not None:
        info = plan.search
        gap = "" if info.gap is None else f", gap {100 * info.gap:.1f} %"
        print(f"search  {info.status} ({info.solver}): objective {info.objective}, bound {info.best_bound}{gap}, "
              f"{info.wall_time:.2f} s")
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
    from jacacc.demo import describe
    from jacacc.demo import main as demo_main

    if args.list:
        print(describe(args.parts))
        return 0
    return demo_main(args.parts)


def cmd_compile(args: argparse.Namespace) -> int:
    args.mode = resolve_mode(args.mode, args.method)

    from jacacc.codegen import compile as compile_kernel

    target = _load_target(args.target, args.shape, problems=True)
    options = {} if args.max_statements is None else {"max_statements": args.max_statements}
    kernel = compile_kernel(target, backend=args.backend, method=args.method, mode=args.mode, dtype=args.dtype,
                            backend_options=options)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(kernel.source)
    else:
        sys.stdout.write(kernel.source)
    print(
        f"jacacc: {args.backend} kernel, {args.mode}/{args.method}: mults {kernel.mults} "
        f"(skipped {kernel.skipped} by structural 0/±1, folded {kernel.folded}, emitted {kernel.emitted_mults}), "
        f"{len(kernel.program.statements)} statements" + (f", written to {args.output}" if args.output else ""),
        file=sys.stderr,
    )
    return 0


def _check_bench_names(args: argparse.Namespace, peers: Sequence[str]) -> None:
    """Unknown backends, methods, modes and peers, refused before the machine's peaks
    are measured (seconds), so that a typo fails at once."""
    from jacacc.bench import get_peer
    from jacacc.codegen import get_backend
    from jacacc.orders import get_method

    for name in args.backends:
        backend, *flags = name.split("+")  # "numba+fastmath", as bench_kernels reads it
        get_backend(backend, **{flag: True for flag in flags})
    for method in args.methods:
        get_method(method, args.mode)
    for peer in peers:
        get_peer(peer)


def _limit_threads(threads: int) -> None:
    """``jacacc bench --threads``: every BLAS library through threadpoolctl, and Numba's pool."""
    from jacacc.bench import limit_blas_threads

    limit_blas_threads(threads)
    numba = require_extra("numba", "cpu")
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


def cmd_bench(args: argparse.Namespace) -> int:
    from jacacc.bench import (
        bench_kernels,
        machine_peaks,
        plot_kernel_benchmark,
        summarize_kernel_benchmark,
        write_record,
    )
    from jacacc.bench import peers as peer_names
    from jacacc.problems import get

    problem = get(args.problem)
    if problem.kind != "function":
        raise JacaccError(f"problem {args.problem!r} is a graph; bench needs a function problem")
    peers = peer_names() if args.peers is None else args.peers
    _check_bench_names(args, peers)
    if args.threads is not None:
        _limit_threads(args.threads)
    peaks = machine_peaks(quick=args.quick_peaks)
    rows = bench_kernels(problem, methods=args.methods, backends=args.backends, peers=peers, sizes=args.sizes,
                         mode=args.mode, repeat=args.repeat, seed=args.seed, progress=args.progress,
                         peaks=peaks)
    print(f"{problem.name}: {problem.n_inputs} inputs, {problem.n_outputs} outputs; peaks "
          f"{peaks['flops'] / 1e9:.1f} GFLOP/s, {peaks['calls'] / 1e9:.2f} G calls/s, "
          f"{peaks['bandwidth'] / 1e9:.1f} GB/s")
    width = max(len(r["impl"]) for r in rows)
    print(f"{'implementation':<{width}}  {'N':>8}  {'Jacobians/s':>12}  {'reused out':>12}  {'build s':>8}  "
          f"{'mults':>6}  {'skipped':>7}  {'roofline':>8}")
    for r in rows:
        if "skipped" in r and "seconds" not in r and isinstance(r["skipped"], str):
            print(f"{r['impl']:<{width}}  {r['N']:>8}  skipped: {r['skipped']}")
            continue
        roof = f"{r['roofline_fraction']:.0%}" if "roofline_fraction" in r else "-"
        reused = f"{r['jacobians_per_s_reused']:.4g}" if "jacobians_per_s_reused" in r else "-"
        print(f"{r['impl']:<{width}}  {r['N']:>8}  {r['jacobians_per_s']:>12.4g}  {reused:>12}  {r['build_s']:>8.2f}  "
              f"{r.get('mults', '-'):>6}  {r.get('skipped', '-'):>7}  {roof:>8}")
    summary = summarize_kernel_benchmark(rows)
    if args.json:
        write_record(args.json, "kernel_benchmark", {"rows": rows, "summary": summary, "peaks": peaks},
                     parameters={"problem": problem.name, "methods": args.methods, "backends": args.backends,
                                 "peers": peers, "sizes": args.sizes, "mode": args.mode, "repeat": args.repeat,
                                 "threads": args.threads},
                     seed=args.seed)
    if args.figure:
        plot_kernel_benchmark(rows, args.figure)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from jacacc.sweep import export, run
    from jacacc.sweep.arguments import executor_options

    if args.export:
        if args.grid is not None or args.out is not None:
            raise JacaccError("--export takes STORE and OUT only (no GRID.json, no --out)")
        store, out = args.export
        count = export(store, out)
        print(f"exported {count} records from {store} to {out}")
        return 0
    if args.grid is None or args.out is None:
        raise JacaccError("give GRID.json and --out STORE (or --export STORE OUT)")
    try:
        summary = run(args.grid, args.out, resume=args.resume is not False, retry_failed=args.retry_failed,
                      progress=args.progress, **executor_options(args))
    except KeyboardInterrupt:
        print(f"jacacc: interrupted; the finished cells are in {args.out} (run the same command to go on)",
              file=sys.stderr)
        return 130
    print(f"sweep: {summary}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("no command given; choose one of: optimize, methods, demo, compile, bench, sweep")
    handler = {"optimize": cmd_optimize, "methods": cmd_methods, "demo": cmd_demo,
               "compile": cmd_compile, "bench": cmd_bench, "sweep": cmd_sweep}[args.command]
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
