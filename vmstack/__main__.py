"""``python -m vmstack``: the same command line as the ``vmstack`` script."""

import sys

from vmstack.cli import main

sys.exit(main())
