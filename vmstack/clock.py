"""Clocks: zero-argument callables returning seconds as a float.

Every layer and :func:`vmstack.cchain.generate_chain` take a clock, so a simulator can run
the whole stack — block timestamps, fork and transition times, retrieval budgets — on
simulated time. ``time.time`` and ``time.monotonic`` are clocks; so is :class:`SimClock`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["Clock", "SimClock"]

Clock = Callable[[], float]


class SimClock:
    """A clock whose time moves only when :meth:`advance` is called.

    >>> clock = SimClock(100.0)
    >>> clock.advance(2.5)
    102.5
    >>> clock()
    102.5
    """

    __slots__ = ("_now",)

    def __init__(self, start: float = 0.0) -> None:
        if not math.isfinite(start):
            raise ValueError(f"SimClock start must be finite, got {start!r}")
        self._now = float(start)

    def __call__(self) -> float:
        return self._now

    @property
    def now(self) -> float:
        """The current simulated time in seconds."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0) and return the new time."""
        if not (seconds >= 0 and math.isfinite(seconds)):
            raise ValueError(
                f"SimClock can only advance by a finite, non-negative amount, got {seconds!r}"
            )
        self._now += seconds
        return self._now

    def __repr__(self) -> str:
        return f"SimClock({self._now!r})"
