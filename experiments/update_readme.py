"""Put the latest experiment tables and figures into the documentation pages.

Each measured block lives on the page of the system it measures, between
``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` markers (:data:`BLOCKS`):

* ``results`` (``docs/guide/graph-elimination.md``): ``results/compare_methods.md``,
  the heuristic run-time summary and their figures;
* ``tensor-results`` and ``tensor-breadth`` (``docs/guide/tensor.md``): the
  tensor-Hessian table and the breadth benchmark's tables;
* ``linalg-results`` (``docs/guide/linalg.md``): paper 004's benchmark;
* ``iverson-results`` (``docs/guide/iverson.md``): paper 001's cheap-gradient
  measurements,

so the site shows what ``make experiments`` last measured.  ``--only NAME …``
rewrites just the named blocks (a block whose record is missing is left as it
is); ``--docs DIR`` names the documentation directory; ``--readme FILE``
rewrites whichever blocks one file holds instead (the README kept them before
the documentation site).  Figure links are written relative to the page.
"""

from __future__ import annotations

import argparse
import os
import sys

from jacacc.bench import read_record

START, END = "<!-- results:start -->", "<!-- results:end -->"


def runtime_summary(record: dict) -> str:
    rows = record["results"]["rows"]
    largest: dict[tuple[str, str], dict] = {}
    for r in rows:
        key = (r["mode"], r["method"])
        if key not in largest or r["vertices"] > largest[key]["vertices"]:
            largest[key] = r
    lines = ["| mode | method | largest graph (vertices) | seconds | mults |", "|---|---|---|---|---|"]
    for (mode, method), r in sorted(largest.items()):
        lines.append(f"| {mode} | {method} | {r['vertices']} | {r['seconds']:.2f} | {r['mults']} |")
    return "\n".join(lines)


def render(results_dir: str, figures: str = "figures") -> str:
    """The method-comparison block; ``figures`` is the figures directory as the page links it."""
    compare = read_record(os.path.join(results_dir, "compare_methods.json"))
    runtime = read_record(os.path.join(results_dir, "heuristic_runtime.json"))
    env = compare["environment"]
    with open(os.path.join(results_dir, "compare_methods.md"), encoding="utf-8") as fh:
        tables = fh.read().strip()
    return "\n".join([
        START,
        f"Measured by `make experiments` on {compare['created'][:10]} ({env['platform']}, Python {env['python']}, "
        f"{env['cpu_count']} cores; seed {compare['seed']}). Sizes are inputs/intermediates/outputs.",
        "",
        tables,
        "",
        f"![multiplications relative to the best method]({figures}/compare_methods.png)",
        "",
        "Heuristic run time on seeded random DAGs (order finding only):",
        "",
        runtime_summary(runtime),
        "",
        f"![heuristic run time against graph size]({figures}/heuristic_runtime.png)",
        END,
    ])


TENSOR_START, TENSOR_END = "<!-- tensor-results:start -->", "<!-- tensor-results:end -->"
LINALG_START, LINALG_END = "<!-- linalg-results:start -->", "<!-- linalg-results:end -->"


def _record(results_dir: str, name: str) -> dict | None:
    """The record ``<name>.json`` of an experiment script, None when it was not run; the
    script's directory is put on ``sys.path`` for its table functions."""
    path = os.path.join(results_dir, f"{name}.json")
    if not os.path.exists(path):
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    return read_record(path)


def _measured_by(record: dict, script: str) -> str:
    env = record["environment"]
    threads = record["parameters"].get("threads")
    return (f"Measured by `python experiments/{script}.py` on {record['created'][:10]} ({env['platform']}, "
            f"{env['cpu_count']} cores, {threads or 'default'} thread(s) per library; seed {record['seed']})")


def render_tensor(results_dir: str, figures: str = "figures") -> str | None:
    """The tensor-Hessian table block (``tensor_hessians.py``'s record), or None without a record."""
    record = _record(results_dir, "tensor_hessians")
    if record is None:
        return None
    from tensor_hessians import readme_table

    return "\n".join([
        TENSOR_START,
        _measured_by(record, "tensor_hessians") + "; Hessian, float64, median of warm calls; – where a method "
        "ran out of its time or memory budget.",
        "",
        readme_table(record),
        "",
        f"![Hessian time against n]({figures}/tensor_hessians.png)",
        TENSOR_END,
    ])


BREADTH_START, BREADTH_END = "<!-- tensor-breadth:start -->", "<!-- tensor-breadth:end -->"


def render_breadth(results_dir: str, figures: str = "figures") -> str | None:
    """The breadth-benchmark block (``tensor_breadth.py``'s record): per objective and size jacacc's
    best time, the best peer's and their ratio for value, gradient and Hessian, then the geometric
    mean and the worst ratio per quantity; None without a record."""
    record = _record(results_dir, "tensor_breadth")
    if record is None:
        return None
    from tensor_breadth import readme_table

    params = record["parameters"]
    load = params.get("load_average_before")
    source = params.get("source") or {}
    commit = source.get("commit")
    tensor_changes = [p for p in source.get("jacacc_changed", []) if p.startswith("jacacc/tensor")]
    measured = (f"jacacc at commit {commit[:7]}" + (f" with local changes to {', '.join(tensor_changes)}"
                                                    if tensor_changes else "")) if commit else None
    return "\n".join([
        BREADTH_START,
        _measured_by(record, "tensor_breadth") + (f"; {measured}" if measured else "") + "; float64, best of "
        f"{params.get('repeats')} warm samples (taken in rounds across the libraries); ratio = jacacc's time / the best peer's (< 1: jacacc faster)"
        + (f"; load average {load[0]:.2f} when it started" if load else "") + ".",
        "",
        readme_table(record),
        "",
        f"![jacacc's speed relative to the best peer per objective]({figures}/tensor_breadth.png)",
        BREADTH_END,
    ])


def render_linalg(results_dir: str, figures: str = "figures") -> str | None:
    """The linear-algebra block (``linalg_benchmark.py``'s record): backward ratios to
    PyTorch and JAX per operator and n, and the sparse GP against GPyTorch; None without a record."""
    record = _record(results_dir, "linalg_benchmark")
    if record is None:
        return None
    from linalg_benchmark import ratio_table, sparse_gp_table

    results = record["results"]
    blocks = [
        LINALG_START,
        _measured_by(record, "linalg_benchmark") + "; float64, median of warm calls. Backward time of each "
        "operator, jacacc over PyTorch (< 1: jacacc faster):",
        "",
        ratio_table(results["operators"]["summary"], "torch"),
        "",
        "and over JAX (`jit` of the `vjp` pullback):",
        "",
        ratio_table(results["operators"]["summary"], "jax"),
    ]
    sparse = results.get("sparse_gp")
    if sparse and sparse.get("summary"):
        blocks += ["", f"Sparse-GP bound + gradient (θ and the inducing points), n = {sparse.get('n', '?')}:", "",
                   sparse_gp_table(sparse)]
    blocks += ["", f"![operators and sparse GP against the peers]({figures}/linalg_benchmark.png)", LINALG_END]
    return "\n".join(blocks)


IVERSON_START, IVERSON_END = "<!-- iverson-results:start -->", "<!-- iverson-results:end -->"


def render_iverson(results_dir: str, figures: str = "figures") -> str | None:
    """The cheap-gradient block (``cheap_gradients.py``'s record), or None without a record."""
    record = _record(results_dir, "cheap_gradients")
    if record is None:
        return None
    from cheap_gradients import readme_table

    return "\n".join([
        IVERSON_START,
        _measured_by(record, "cheap_gradients") + "; run times are the best of 5 warm calls.",
        "",
        readme_table(record),
        "",
        f"![cost and run-time ratios]({figures}/cheap_gradients.png)",
        IVERSON_END,
    ])


def _replace(text: str, start: str, end: str, block: str) -> str:
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return head + block + tail


# block name -> (its page under docs/, start marker, end marker, renderer); a renderer
# returns None without its record
BLOCKS = {
    "results": ("guide/graph-elimination.md", START, END, render),
    "tensor-results": ("guide/tensor.md", TENSOR_START, TENSOR_END, render_tensor),
    "tensor-breadth": ("guide/tensor.md", BREADTH_START, BREADTH_END, render_breadth),
    "linalg-results": ("guide/linalg.md", LINALG_START, LINALG_END, render_linalg),
    "iverson-results": ("guide/iverson.md", IVERSON_START, IVERSON_END, render_iverson),
}


def figures_link(page: str, figures: str) -> str:
    """The figures directory as a link from ``page`` (POSIX separators, as Markdown wants)."""
    rel = os.path.relpath(os.path.abspath(figures), os.path.dirname(os.path.abspath(page)))
    return rel.replace(os.sep, "/")


def update_file(path: str, names: list[str], results: str, figures: str, strict: bool) -> list[str]:
    """Rewrite the blocks ``names`` in the file ``path``; return the names rewritten.

    ``strict``: a block whose record exists but whose markers the file lacks is an error
    (a documentation page lost its markers); otherwise it is skipped.
    """
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    done = []
    for name in names:
        _, start, end, render_block = BLOCKS[name]
        present = start in text and end in text
        if strict and not present:
            raise SystemExit(f"{path} has no {start} … {end} block")
        block = render_block(results, figures_link(path, figures))
        if block is not None and present:
            text = _replace(text, start, end, block)
            done.append(name)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results", help="the records' directory (default: results)")
    parser.add_argument("--figures", default="figures", help="the figures' directory (default: figures)")
    parser.add_argument("--docs", default="docs", help="the documentation pages' directory (default: docs)")
    parser.add_argument("--readme", metavar="FILE",
                        help="rewrite the blocks this one file holds instead of the documentation pages")
    parser.add_argument("--only", nargs="+", choices=sorted(BLOCKS), metavar="NAME",
                        help=f"rewrite only these blocks ({', '.join(BLOCKS)}; default all)")
    args = parser.parse_args(argv)
    names = args.only or list(BLOCKS)
    if args.readme is not None:
        with open(args.readme, encoding="utf-8") as fh:
            text = fh.read()
        if "results" in names and (START not in text or END not in text):
            raise SystemExit(f"{args.readme} has no {START} … {END} block")
        update_file(args.readme, names, args.results, args.figures, strict=False)
        return 0
    pages: dict[str, list[str]] = {}
    for name in names:
        pages.setdefault(os.path.join(args.docs, BLOCKS[name][0]), []).append(name)
    for page, page_names in pages.items():
        update_file(page, page_names, args.results, args.figures, strict=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
