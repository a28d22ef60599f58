"""Write the graphs of the AlphaGrad tasks (issue 43) to ``jacacc/problems/data/alphagrad/``.

Each task of :data:`jacacc.problems.alphagrad_functions.TASKS` is traced with
``jax.make_jaxpr`` at its point and turned into the graph graphax builds
(:func:`~jacacc.problems.alphagrad_functions.graphax_graph`); the graph is
written as ``<task>.json`` together with the JAX version that traced it.
:mod:`jacacc.problems.alphagrad` reads these files, so the zoo needs no JAX;
``tests/problems/test_alphagrad_tasks.py`` checks that tracing again gives the
same data.  Rerun after changing a function or the graph rules::

    python experiments/alphagrad_graphs.py            # all tasks
    python experiments/alphagrad_graphs.py --check    # compare only, write nothing
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jacacc.problems.alphagrad import DATA_DIR, dumps, task_data  # noqa: E402
from jacacc.problems.alphagrad_functions import TASKS, graphax_graph, task_jaxpr  # noqa: E402


def build(name: str) -> dict:
    """The data of task ``name``, traced now."""
    import jax

    return {"task": name, "jax_version": jax.__version__, **graphax_graph(task_jaxpr(name))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", default=list(TASKS), help="task names (default: all)")
    parser.add_argument("--check", action="store_true", help="compare with the stored files, write nothing")
    args = parser.parse_args(argv)
    changed = []
    for name in args.tasks:
        data = build(name)
        path = DATA_DIR / f"{name}.json"
        stored = task_data(name) if path.exists() else None
        same = stored is not None and {k: v for k, v in stored.items() if k != "jax_version"} == {
            k: v for k, v in json.loads(dumps(data)).items() if k != "jax_version"}
        print(f"{name:22s} {len(data['vertices']):4d} vertices {len(data['edges']):4d} edges "
              f"{'unchanged' if same else 'CHANGED' if stored else 'new'}")
        if not same:
            changed.append(name)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(dumps(data))
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
