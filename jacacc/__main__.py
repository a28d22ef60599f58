import sys

from jacacc.cli import main

sys.exit(main())
