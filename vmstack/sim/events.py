"""A minimal discrete-event loop on a :class:`~vmstack.clock.SimClock`.

Events run in time order; events at the same time run in the order they were scheduled, so
a run is a pure function of its inputs and its seed.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from vmstack.clock import SimClock

__all__ = ["EventLoop"]


class EventLoop:
    """Schedules actions at simulated times and runs them in order, moving ``clock``."""

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self.events_run = 0

    def schedule(self, delay: float, action: Callable[[], None]) -> None:
        """Run ``action`` ``delay`` seconds (>= 0) from now."""
        if delay < 0:
            raise ValueError(f"an event cannot be scheduled in the past (delay {delay})")
        heapq.heappush(self._queue, (self.clock() + delay, next(self._order), action))

    def run(self, *, max_events: int = 10_000_000) -> None:
        """Run events until none is left; ``max_events`` bounds a run that would not end."""
        while self._queue:
            if self.events_run >= max_events:
                raise RuntimeError(f"simulation did not finish within {max_events} events")
            at, _, action = heapq.heappop(self._queue)
            self.clock.advance(at - self.clock())
            self.events_run += 1
            action()
