"""``python -m jacacc.demo [PART ...] [--list]``: the same as ``jacacc demo``."""

import sys

from jacacc.cli import main

sys.exit(main(["demo", *sys.argv[1:]]))
