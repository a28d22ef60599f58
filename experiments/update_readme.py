"""Put the latest experiment tables and figures into README.md.

Replaces the text between ``<!-- results:start -->`` and ``<!-- results:end -->``
with ``results/compare_methods.md``, the heuristic run-time summary and the
figure links, so the README shows what ``make experiments`` last measured.
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


def render(results_dir: str) -> str:
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
        "![multiplications relative to the best method](figures/compare_methods.png)",
        "",
        "Heuristic run time on seeded random DAGs (order finding only):",
        "",
        runtime_summary(runtime),
        "",
        "![heuristic run time against graph size](figures/heuristic_runtime.png)",
        END,
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results")
    parser.add_argument("--readme", default="README.md")
    args = parser.parse_args(argv)
    with open(args.readme, encoding="utf-8") as fh:
        text = fh.read()
    if START not in text or END not in text:
        raise SystemExit(f"{args.readme} has no {START} … {END} block")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    with open(args.readme, "w", encoding="utf-8") as fh:
        fh.write(head + render(args.results) + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
