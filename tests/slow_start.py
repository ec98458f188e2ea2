"""A function whose module takes seconds to import in a worker process (not in the test
process itself), for the tests of a pool whose workers are still starting."""

from __future__ import annotations

import multiprocessing
import time

#: How long the import takes in a process multiprocessing started.
IMPORT_SECONDS = 5.0

if multiprocessing.parent_process() is not None:
    time.sleep(IMPORT_SECONDS)


def negate(item: int) -> int:
    """``-item``."""
    return -item
