"""Figure: an LCG and its dual c-graph side by side, laid out by depth level.

Writes ``figures/dual_graph.png`` for the README (paper 003 §1: face
elimination works on the dual c-graph; vertex elimination of j eliminates the
biclique of j's in- and out-edges).

    python experiments/dual_graph_figure.py [--problem paper003_fig4_1a] [--figures figures]
"""

from __future__ import annotations

import argparse
import os
import sys

from jacacc import problems
from jacacc.plot import plot_dual_graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="paper003_fig4_1a", help="zoo graph to draw")
    parser.add_argument("--figures", default="figures")
    args = parser.parse_args(argv)
    graph = problems.get(args.problem).graph()
    plot_dual_graph(graph, os.path.join(args.figures, "dual_graph.png"), title=args.problem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
