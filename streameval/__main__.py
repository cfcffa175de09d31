"""``python -m streameval``: the command line, as the ``streameval`` script."""

import sys

from streameval.cli.main import main

sys.exit(main())
