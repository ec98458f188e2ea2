"""Benchmark case: the cost of one post-Durango ``expected_proposer`` call, 1,000 validators.

Per call, over a run of consecutive slots at one height and P-chain height:

- fast: :meth:`~vmstack.wrappers.proposer.windower.Windower.expected_proposer` on a windower
  whose validator set (sorted, weighted heap built) is kept for the P-chain height, as the
  proposer layer uses it;
- baseline: a windower made anew for each call, so the set is sorted and its heap built
  every time (what a port without the per-height set pays on each call);
- floor: the one draw every call needs, a freshly seeded MT19937-64's first output (the seed
  changes with the slot, so no call can reuse another's generator).
"""

from __future__ import annotations

import random

from vmstack.benchmarks import Comparison, alternated_medians
from vmstack.wrappers.proposer.windower import MersenneTwister64, Windower, reverse_bits64

__all__ = ["run"]

GROUP = "proposer windows"
GOAL = "<= 3x floor (one seeded draw), >= 5x a windower made per call"
VALIDATORS = 1_000
CHAIN_ID = bytes(range(32))


def run(quick: bool) -> list[Comparison]:
    """One row: expected_proposer with the kept set against a fresh set per call."""
    draw = random.Random(16)
    validators = {draw.randbytes(20): draw.randint(1, 2_000_000) for _ in range(VALIDATORS)}
    slots = range(16 if quick else 64)
    height, p_chain_height = 1_000_000, 42
    kept = Windower(validators, CHAIN_ID)
    source = kept.chain_source

    def fast() -> object:
        return [kept.expected_proposer(height, p_chain_height, slot) for slot in slots]

    def baseline() -> object:
        return [
            Windower(validators, CHAIN_ID).expected_proposer(height, p_chain_height, slot)
            for slot in slots
        ]

    def floor() -> object:
        return [
            MersenneTwister64(source ^ height ^ reverse_bits64(slot)).uint64() for slot in slots
        ]

    repeat = 3 if quick else 7
    fast_s, baseline_s, floor_s = (
        seconds / len(slots)
        for seconds in alternated_medians((fast, baseline, floor), repeat=repeat)
    )
    return [
        Comparison(
            group=GROUP,
            case=f"expected_proposer, {VALIDATORS:,} validators, per call",
            fast_seconds=fast_s,
            baseline_seconds=baseline_s,
            floor_seconds=floor_s,
            fast_label="kept set per P-chain height",
            baseline_label="windower made per call",
            floor_label="one seeded MT19937-64 draw",
            goal=GOAL,
        ).judged(min_speedup=5.0, max_over_floor=3.0)
    ]
