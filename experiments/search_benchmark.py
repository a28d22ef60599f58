"""Exact and local search against graph size: time to proven optimality, gap at the limit, gain over heuristics.

For seeded random DAGs of growing size (3 inputs, 3 outputs, ``max_preds=3``)
runs ``cpsat`` in vertex, edge and face mode under a time limit and records
the time to a proof, or the gap ``(objective − bound) / objective`` when the
limit runs out first; a mode stops growing after its first unproven size.
On the AlphaGrad functions of the zoo it compares markowitz, ``anneal`` and
``cpsat`` (vertex mode).  Writes ``results/search_benchmark.json`` (with the
largest graph proven optimal per mode) and ``figures/search_benchmark.png``.

The searches and the heuristics they are compared with are cells of sweeps
(:mod:`jacacc.sweep`): one wave per random-DAG size over the modes still
growing (the zoo rides along with the first), so ``--workers N`` or
``--scheduler ADDRESS`` run the searches of a wave side by side;
``--search-workers`` sets CP-SAT's own threads per search.

    python experiments/search_benchmark.py                        # minutes
    python experiments/search_benchmark.py --sizes 4 6 --time-limit 2 --zoo BlackScholes --out /tmp/r
    python experiments/search_benchmark.py --scheduler tcp://host:8786 --time-limit 600 --store runs/search.sqlite
"""

from __future__ import annotations

import argparse
import os
import sys

from jacacc import problems
from jacacc.bench import write_record
from jacacc.progress import note
from jacacc.sweep import read_records, run
from jacacc.sweep.arguments import add_executor_arguments, executor_options, store_path

MODES = ("vertex", "edge", "face")
DEFAULT_SIZES = (4, 6, 8, 10, 12, 16, 20, 25, 30, 40, 50, 60)
HEURISTICS = {"vertex": ("markowitz", "min_fill", "relative_markowitz"),
              "edge": ("markowitz", "min_fill", "relative_markowitz"),
              "face": ("greedy", "edge_markowitz", "vertex_markowitz")}


def random_dag_call(size: int, seed: int) -> str:
    """The generator call of the random DAG of ``size`` intermediates (its own seed: seed + size)."""
    return f"random_dag(3, {size}, 3, max_preds=3, seed={seed + size})"


def random_grid(size: int, modes: list[str], time_limit: float, search_workers: int, seed: int) -> dict:
    """One wave: cpsat and each mode's heuristics on the random DAG of ``size``, in the open ``modes``."""
    methods = [f"{mode}:cpsat" for mode in modes] + [f"{mode}:{h}" for mode in modes for h in HEURISTICS[mode]]
    return {"name": f"search_benchmark random_dag n={size}", "problems": [random_dag_call(size, seed)],
            "methods": methods, "seeds": [seed], "options": {"time_limit": time_limit, "workers": search_workers}}


def zoo_grid(names: list[str], time_limit: float, search_workers: int, seed: int) -> dict:
    """anneal, cpsat and the vertex heuristics (markowitz among them) on the zoo problems."""
    methods = ["anneal", "cpsat", *HEURISTICS["vertex"]]
    return {"name": "search_benchmark zoo", "problems": names, "methods": methods, "seeds": [seed],
            "options": {"time_limit": time_limit, "workers": search_workers}}


def search_row(search: dict, heuristics: list[dict], **extra) -> dict:
    """A search cell's row, with the best of the mode's heuristics on the same graph."""
    result = search["result"]
    info = result.get("search") or {}
    mults, heuristic = min((h["result"]["mults"], h["method"]) for h in heuristics)
    return {
        **extra, "mode": search["mode"], "method": search["method"],
        "intermediates": result["graph"]["intermediates"], "edges": result["graph"]["edges"],
        "mults": result["mults"], "lower_bound": result["lower_bound"], "optimal": bool(result["optimal"]),
        "status": info.get("status"),
        "gap": (result["mults"] - result["lower_bound"]) / result["mults"] if result["mults"] else 0.0,
        "seconds": result["optimize_seconds"], "solver": info.get("solver"),
        "heuristic": heuristic, "heuristic_mults": mults,
    }


def _split(records: list[dict], searches: tuple[str, ...]) -> tuple[list[dict], dict]:
    """The search cells that finished (others noted) and the heuristic cells by (problem, mode)."""
    done, heuristics = [], {}
    for r in records:
        if r["status"] != "ok":
            note(f"{r['problem']} {r['mode']}:{r['method']}: {r['status']}: {r['error']}")
        elif r["method"] in searches:
            done.append(r)
        else:
            heuristics.setdefault((r["problem"], r["mode"]), []).append(r)
    return done, heuristics


def random_rows(records: list[dict], size: int) -> list[dict]:
    searches, heuristics = _split(records, ("cpsat",))
    rows = []
    for r in searches:
        row = search_row(r, heuristics[(r["problem"], r["mode"])], family="random_dag", problem=r["problem"],
                         size=size)
        rows.append(row)
        note(f"{row['mode']:<6} n={size:<4} {row['mults']:>6} mults  bound {row['lower_bound']:>6}  "
             f"{'optimal' if row['optimal'] else 'gap %.1f %%' % (100 * row['gap'])}  "
             f"{row['seconds']:7.2f} s  (best heuristic {row['heuristic_mults']})")
    return rows


def zoo_rows(records: list[dict]) -> list[dict]:
    searches, heuristics = _split(records, ("anneal", "cpsat"))
    rows = []
    for r in searches:
        mine = heuristics[(r["problem"], r["mode"])]
        row = search_row(r, mine, family="zoo", problem=r["problem"], size=r["result"]["graph"]["intermediates"])
        row["markowitz"] = next(h["result"]["mults"] for h in mine if h["method"] == "markowitz")
        rows.append(row)
        note(f"{row['problem']:<24} {row['method']:<7} {row['mults']:>6} mults  (markowitz {row['markowitz']}, "
             f"bound {row['lower_bound']}, {row['status']}, {row['seconds']:.1f} s)")
    return rows


def measure(sizes: list[int], zoo_names: list[str], time_limit: float, zoo_limit: float, search_workers: int,
            seed: int, store: str | None = None, **executor) -> list[dict]:
    """The random DAGs wave by wave (a mode stops growing after its first unproven size) and the zoo."""
    rows: list[dict] = []
    zoo = [zoo_grid(zoo_names, zoo_limit, search_workers, seed)] if zoo_names else []
    waiting = list(zoo)  # the zoo runs with the first wave
    open_modes = list(MODES)
    with store_path(store, "search_benchmark") as path:
        for size in sizes:
            if not open_modes:
                break
            wave = random_grid(size, open_modes, time_limit, search_workers, seed)
            run([wave, *waiting], path, desc=f"search_benchmark n={size}", **executor)
            waiting = []
            new = random_rows(read_records(path, wave), size)
            rows += new
            proven = {r["mode"] for r in new if r["optimal"]}
            open_modes = [m for m in open_modes if m in proven]
        if waiting:
            run(waiting, path, desc="search_benchmark zoo", **executor)
        rows.sort(key=lambda r: MODES.index(r["mode"]) if r["family"] == "random_dag" else len(MODES))
        if zoo:
            rows += zoo_rows(read_records(path, zoo))
    return rows


def largest_proven(rows: list[dict], within: float) -> dict:
    """Per mode, the random graph with the most intermediates proven optimal within ``within`` seconds."""
    out = {}
    for mode in MODES:
        proven = [r for r in rows if r["family"] == "random_dag" and r["mode"] == mode and r["optimal"]
                  and r["seconds"] <= within]
        best = max(proven, key=lambda r: r["intermediates"], default=None)
        out[mode] = None if best is None else {k: best[k] for k in ("problem", "intermediates", "edges",
                                                                     "mults", "seconds")}
    return out


def plot(record: dict, path: str) -> None:
    from jacacc.plot import _pyplot

    plt = _pyplot()
    rows = record["results"]["rows"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    markers = {"vertex": "o", "edge": "s", "face": "^"}
    for mode in MODES:
        mine = [r for r in rows if r["family"] == "random_dag" and r["mode"] == mode]
        proven = [r for r in mine if r["optimal"]]
        open_ = [r for r in mine if not r["optimal"]]
        line, = left.plot([r["intermediates"] for r in proven], [r["seconds"] for r in proven],
                          marker=markers[mode], label=f"{mode}: proven optimal")
        for r in open_:
            left.plot(r["intermediates"], r["seconds"], marker=markers[mode], color=line.get_color(),
                      fillstyle="none", linestyle="none", label=f"{mode}: limit, gap {100 * r['gap']:.0f} %")
    left.set_yscale("log")
    left.set_xlabel("intermediates (random DAG, 3 in, 3 out)")
    left.set_ylabel("seconds (cpsat)")
    left.set_title("time to proven optimality")
    left.legend(fontsize=7)
    zoo_rows = [r for r in rows if r["family"] == "zoo"]
    names = list(dict.fromkeys(r["problem"] for r in zoo_rows))
    width = 0.27
    for k, (label, get) in enumerate((
            ("markowitz", lambda n: next(r["markowitz"] for r in zoo_rows if r["problem"] == n)),
            ("anneal", lambda n: next(r["mults"] for r in zoo_rows if r["problem"] == n and r["method"] == "anneal")),
            ("cpsat", lambda n: next(r["mults"] for r in zoo_rows if r["problem"] == n and r["method"] == "cpsat")))):
        right.bar([i + (k - 1) * width for i in range(len(names))], [get(n) for n in names], width, label=label)
    right.set_xticks(range(len(names)))
    right.set_xticklabels(names, rotation=30, ha="right", fontsize=7)
    right.set_ylabel("multiplications (vertex elimination)")
    right.set_title("AlphaGrad functions")
    right.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=list(DEFAULT_SIZES),
                        help="intermediates of the random DAGs")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per search")
    parser.add_argument("--zoo-time-limit", type=float, default=None,
                        help="seconds per search on the zoo (default: --time-limit)")
    parser.add_argument("--zoo", nargs="*", default=None, help="zoo problems (default: the AlphaGrad functions)")
    parser.add_argument("--search-workers", type=int, default=2, help="CP-SAT threads per search")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="results")
    parser.add_argument("--figures", default="figures")
    parser.add_argument("--no-figure", action="store_true")
    add_executor_arguments(parser)
    args = parser.parse_args(argv)
    zoo_names = args.zoo if args.zoo is not None else [
        n for n in problems.names("alphagrad") if "matrix" not in problems.get(n).tags
        and len(problems.get(n).graph().intermediates) <= 200]
    zoo_limit = args.zoo_time_limit or args.time_limit
    rows = measure(args.sizes, zoo_names, args.time_limit, zoo_limit, args.search_workers, args.seed, args.store,
                   **executor_options(args))
    record = write_record(
        os.path.join(args.out, "search_benchmark.json"),
        "search_benchmark",
        {"rows": rows, "largest_proven": largest_proven(rows, args.time_limit)},
        parameters={"sizes": args.sizes, "time_limit": args.time_limit, "zoo_time_limit": zoo_limit,
                    "search_workers": args.search_workers,
                    "generator": "random_dag(3, n, 3, max_preds=3, seed=seed+n)",
                    "zoo": zoo_names},
        seed=args.seed,
    )
    print("largest proven optimal within the limit:", record["results"]["largest_proven"])
    if not args.no_figure:
        plot(record, os.path.join(args.figures, "search_benchmark.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
