"""``python -m vmstack.cli``: the command line, as ``vmstack``."""

from __future__ import annotations

import sys

from vmstack.cli import main

sys.exit(main())
