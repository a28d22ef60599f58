"""``make demo`` / ``jacacc demo``: a tour of jacacc's five systems, every result checked.

Each part runs one system on a small, ordinary example, prints one headline
— its number beside a reference — and checks its results against independent
references (central differences, closed forms, the dense chain rule) and,
where they are installed, against JAX or PyTorch; a peer that is not
importable is skipped with a note, not counted as a failure.

=============  ======================================================================
part           what it shows
=============  ======================================================================
graph          paper 003: vertex/edge/face/structure elimination on Roe's flux
tensor         paper 002: a Hessian by cross-country mode, FLOPs and time vs JAX
linalg         paper 004: a Gaussian-process likelihood gradient through potrf/trsm
iverson        paper 001: the trace's gradient in Iverson notation, at zero cost
elementwise    paper 000: §6's elementwise derivatives in gather form
=============  ======================================================================

:func:`main` runs the parts named (all by default) and returns the exit
status: 0 when every check of every part passed, 1 otherwise.  The registry
(:mod:`jacacc.demo.registry`) lists them; each part is a module of this
package.

Examples
--------
>>> import jacacc.demo
>>> jacacc.demo.parts()
['graph', 'tensor', 'linalg', 'iverson', 'elementwise']
>>> print(jacacc.demo.describe(["iverson"]))
iverson      paper 001: the trace's gradient in Iverson notation, diag at zero cost
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections.abc import Sequence

from jacacc.demo.registry import Part, get_part, parts, register_part
from jacacc.demo.report import (
    Report,
    best_time,
    central_differences,
    format_time,
    missing_dependency,
    relative_error,
)

__all__ = ["TOUR", "Part", "Report", "best_time", "central_differences", "describe", "format_time", "get_part",
           "main", "parts", "register_part", "relative_error", "run_part"]

#: the part modules in tour order; importing one registers its part
TOUR: tuple[str, ...] = ("graph", "tensor", "linalg", "iverson", "elementwise")
for _module in TOUR:
    importlib.import_module(f"jacacc.demo.{_module}")


def _selected(names: Sequence[str] | None) -> list[Part]:
    """The parts named (all when ``names`` is None or empty), each once, in the order given;
    an unknown name raises :class:`~jacacc.errors.RegistryError` before anything runs."""
    chosen = list(dict.fromkeys(names)) if names else parts()
    return [get_part(name) for name in chosen]


def describe(names: Sequence[str] | None = None) -> str:
    """One line per part (all by default): its name and its one-line description."""
    width = max(len(name) for name in parts()) + 2
    return "\n".join(f"{part.name:<{width}}{part.description}" for part in _selected(names))


def run_part(part: Part) -> tuple[Report, float]:
    """Run one part: its header, its lines and checks, and a PASS/FAIL line; returns its report and seconds.

    An exception inside the part is reported (one line; the traceback follows on
    stderr unless an optional dependency is missing) and makes the part fail; it does not stop the tour.
    """
    print(f"== {part.name}: {part.description}")
    report = Report(part.name)
    start = time.perf_counter()
    try:
        part.run(report)
    except Exception as exc:  # a broken part fails; the other parts still run
        report.error(exc)
        if not missing_dependency(exc):
            traceback.print_exc()
    elapsed = time.perf_counter() - start
    print(f"{'PASS' if report.passed else 'FAIL'} {part.name}: {report.summary()} ({elapsed:.2f} s)")
    print()
    return report, elapsed


def main(names: Sequence[str] | None = None) -> int:
    """Run the demo parts named (all by default); 0 when every check passed, 1 otherwise.

    An unknown part name raises :class:`~jacacc.errors.RegistryError` (the CLI
    turns it into a one-line error and exit status 2).
    """
    selected = _selected(names)
    start = time.perf_counter()
    results = [(part.name, *run_part(part)) for part in selected]
    failed = [name for name, report, _ in results if not report.passed]
    print("summary: " + ", ".join(f"{name} {'PASS' if report.passed else 'FAIL'} {seconds:.2f} s"
                                  for name, report, seconds in results))
    total = time.perf_counter() - start
    if failed:
        print(f"DEMO FAILED: {', '.join(failed)} ({len(failed)} of {len(results)} parts; {total:.1f} s)")
        return 1
    print(f"all {len(results)} part(s) passed ({total:.1f} s)")
    return 0
