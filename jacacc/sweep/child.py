"""``python -m jacacc.sweep.child``: run one pickled cell from stdin, write its outcome to stdout.

The child imports what a cell needs, writes one byte (``R``) when it is
ready, then reads the cell: the parent's timeout counts from that byte, so
the interpreter's start-up is not charged to the cell
(:func:`jacacc.sweep.cells.run_cell_in_subprocess`).
"""

from __future__ import annotations

import jacacc.api  # noqa: F401  (imported before the ready byte: not charged to the cell's time)
import jacacc.problems  # noqa: F401
from jacacc.sweep.cells import child_main

if __name__ == "__main__":  # pragma: no cover - runs in the child interpreter
    child_main()
