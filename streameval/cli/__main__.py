import sys

from streameval.cli.main import main

sys.exit(main())
