"""Benchmark cases behind ``vmstack bench``: each compares a fast path with its baseline.

A case module exposes ``run(quick: bool) -> list[Comparison]``. Times are medians of
repeated runs of the same work in one process, so the ratios are what matter: absolute
times drift from machine to machine, ratios hold. Nothing here asserts a time.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import attrs

__all__ = ["Comparison", "alternated_medians", "calls_filling", "median_seconds"]


def median_seconds(operation: Callable[[], object], *, repeat: int = 7, number: int = 1) -> float:
    """Median wall time in seconds of one ``operation()``, over ``repeat`` rounds of
    ``number`` calls each (one warm-up call first)."""
    if repeat < 1 or number < 1:
        raise ValueError("repeat and number must be at least 1")
    operation()
    rounds: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            operation()
        rounds.append((time.perf_counter() - start) / number)
    return statistics.median(rounds)


def alternated_medians(
    operations: Sequence[Callable[[], object]],
    *,
    repeat: int = 7,
    number: int | Sequence[int] = 1,
    before_each: Callable[[], object] | None = None,
) -> list[float]:
    """Median wall time in seconds of one call of each of ``operations``, timed in
    alternating rounds: every round times each operation once (``number`` calls, or
    ``number[i]`` for the i-th), in forward order one round and reversed the next, so load
    from elsewhere on the machine falls on every side alike. One warm-up call of each
    first; ``before_each``, if given, runs untimed before each operation's calls of a round
    (to reset a cache, say: with ``number`` 1, before every timed call)."""
    counts = [number] * len(operations) if isinstance(number, int) else list(number)
    if repeat < 1 or len(counts) != len(operations) or min(counts, default=1) < 1:
        raise ValueError("repeat and every number must be at least 1, one number per operation")
    for operation in operations:
        if before_each is not None:
            before_each()
        operation()
    times: list[list[float]] = [[] for _ in operations]
    order = list(range(len(operations)))
    for round_index in range(repeat):
        for index in order if round_index % 2 == 0 else order[::-1]:
            operation, count = operations[index], counts[index]
            if before_each is not None:
                before_each()
            start = time.perf_counter()
            for _ in range(count):
                operation()
            times[index].append((time.perf_counter() - start) / count)
    return [statistics.median(rounds) for rounds in times]


def calls_filling(operation: Callable[[], object], budget: float, *, most: int = 1000) -> int:
    """How many calls of ``operation`` fill about ``budget`` seconds: one call timed, then
    between 1 and ``most``. Short operations are timed in rounds of that many calls, so a
    round is long against the clock's resolution."""
    start = time.perf_counter()
    operation()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, min(most, int(budget / once)))


@attrs.frozen
class Comparison:
    """One benchmark row: a fast path against its honest baseline, with the floor beside it.

    ``speedup`` is baseline time / fast time; ``over_floor`` is fast time / floor time (how
    far the fast path is from the cheapest conceivable way to produce the same bytes).
    ``goal`` states the target in words, e.g. ``">= 100x baseline, <= 4x floor"``, and
    ``goal_met`` whether this run met it (``None`` when the row has no goal of its own);
    :meth:`judged` sets it from the figures, and with it ``reason``, why the goal cannot be
    met (given by the case, printed under the table), where the run did not meet it.
    """

    group: str
    case: str
    fast_seconds: float
    baseline_seconds: float
    floor_seconds: float | None = None
    fast_label: str = "fast"
    baseline_label: str = "baseline"
    floor_label: str = "floor"
    goal: str = ""
    notes: dict[str, float | int | str] = attrs.field(factory=dict)
    goal_met: bool | None = None
    reason: str = ""
    #: The case module that printed the row (its short name), set by ``vmstack bench``.
    module: str = ""

    @property
    def speedup(self) -> float:
        return self.baseline_seconds / self.fast_seconds if self.fast_seconds > 0 else float("inf")

    @property
    def over_floor(self) -> float | None:
        if self.floor_seconds is None or self.floor_seconds <= 0:
            return None
        return self.fast_seconds / self.floor_seconds

    def judged(
        self,
        *,
        min_speedup: float | None = None,
        max_over_floor: float | None = None,
        also: bool = True,
        unmet_reason: str = "",
    ) -> Comparison:
        """This row with ``goal_met``: the speedup at least ``min_speedup``, the fast path
        at most ``max_over_floor`` times the floor, and ``also`` (any other condition of
        the goal), each where given; when not met, ``reason`` is ``unmet_reason`` (why the
        goal cannot be met, in the case's words)."""
        met = also
        if min_speedup is not None:
            met = met and self.speedup >= min_speedup
        if max_over_floor is not None:
            over = self.over_floor
            met = met and over is not None and over <= max_over_floor
        return attrs.evolve(self, goal_met=met, reason="" if met else unmet_reason)

    def as_dict(self) -> dict[str, object]:
        """Every figure of the row, for JSON output."""
        return {
            "module": self.module,
            "group": self.group,
            "case": self.case,
            "fast_label": self.fast_label,
            "baseline_label": self.baseline_label,
            "floor_label": self.floor_label,
            "fast_seconds": self.fast_seconds,
            "baseline_seconds": self.baseline_seconds,
            "floor_seconds": self.floor_seconds,
            "speedup": self.speedup,
            "over_floor": self.over_floor,
            "goal": self.goal,
            "goal_met": self.goal_met,
            "reason": self.reason,
            "notes": dict(self.notes),
        }
