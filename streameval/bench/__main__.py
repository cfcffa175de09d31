"""``python -m streameval.bench [options]``; with ``--child``, one child of the bench."""

import sys

from streameval.bench.cli import main

sys.exit(main())
