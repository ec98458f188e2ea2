"""Benchmark cases: the cost of one poll in the consensus library (docs/consensus.md).

- ``Topological.record_poll`` per poll, with the default parameters, 10 processing blocks
  (two competing chains of five over the last accepted block) and K = 20 votes (15 for one
  tip, 5 for the other), so every poll pushes votes through both chains and records on six
  trees; against a baseline that walks each of the 20 votes to the last accepted block on
  its own before polling the same trees, and a floor of one pass over the votes;
- ``Tree.record_poll`` per poll over 10 choices, the same 20 votes; against the flat n-ary
  snowflake (one instance, no bits), and the same floor.

Each measured poll runs on a fresh structure polled fewer than beta times, so nothing is
accepted and every poll does the same work; the sides are measured in alternation.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from vmstack.benchmarks import Comparison
from vmstack.consensus import DEFAULT_PARAMETERS, SNOWFLAKE, Topological, Tree
from vmstack.consensus.snowball import NnarySnowflake, single_termination_condition

__all__ = ["run"]

GROUP = "consensus"
TOPOLOGICAL_GOAL = "<= 300x floor (one pass over the votes), >= 1.2x walking each vote"
TREE_GOAL = "<= 100x floor (one pass over the votes)"
POLLS = DEFAULT_PARAMETERS.beta - 1
PARAMS = DEFAULT_PARAMETERS


def _id(label: str) -> bytes:
    return hashlib.sha256(label.encode()).digest()


class _Block:
    __slots__ = ("height", "id", "parent_id")

    def __init__(self, block_id: bytes, parent_id: bytes, height: int) -> None:
        self.id = block_id
        self.parent_id = parent_id
        self.height = height

    def accept(self) -> None:
        raise AssertionError("the benchmark never accepts")

    def reject(self) -> None:
        raise AssertionError("the benchmark never rejects")


GENESIS = _id("genesis")
CHAINS = {
    side: [_Block(_id(f"{side}{height}"), b"", height) for height in range(1, 6)] for side in "ab"
}
for chain in CHAINS.values():
    for parent, child in zip([None, *chain], chain, strict=False):
        child.parent_id = GENESIS if parent is None else parent.id
BLOCKS = [block for chain in CHAINS.values() for block in chain]
VOTES = {CHAINS["a"][-1].id: 15, CHAINS["b"][-1].id: 5}


def _topological() -> Topological:
    tree = Topological(PARAMS)
    tree.initialize(GENESIS, 0)
    for block in BLOCKS:
        tree.add(block)
    return tree


class _WalkEachVote:
    """The baseline: every vote walked to the last accepted block alone, tallying each
    ancestor's children, then the trees with ``alpha_preference`` votes polled."""

    def __init__(self) -> None:
        self.parent = {block.id: block.parent_id for block in BLOCKS}
        self.trees: dict[bytes, Tree] = {}
        for block in BLOCKS:
            tree = self.trees.get(block.parent_id)
            if tree is None:
                self.trees[block.parent_id] = Tree(SNOWFLAKE, PARAMS, block.id)
            else:
                tree.add(block.id)

    def record_poll(self, votes: dict[bytes, int]) -> None:
        tallies: dict[bytes, dict[bytes, int]] = {}
        for block_id, count in votes.items():
            for _ in range(count):
                child = block_id
                while child in self.parent:
                    parent = self.parent[child]
                    tally = tallies.setdefault(parent, {})
                    tally[child] = tally.get(child, 0) + 1
                    child = parent
        for parent, tally in tallies.items():
            if sum(tally.values()) >= PARAMS.alpha_preference:
                self.trees[parent].record_poll(tally)


CHOICES = [_id(f"choice{index}") for index in range(10)]
TREE_VOTES = {CHOICES[3]: 15, CHOICES[7]: 5}


def _tree() -> Tree:
    tree = Tree(SNOWFLAKE, PARAMS, CHOICES[0])
    for choice in CHOICES[1:]:
        tree.add(choice)
    return tree


def _flat() -> NnarySnowflake:
    conditions = single_termination_condition(PARAMS.alpha_confidence, PARAMS.beta)
    return NnarySnowflake(PARAMS.alpha_preference, conditions, CHOICES[0])


def _flat_poll(instance: NnarySnowflake, votes: dict[bytes, int]) -> None:
    choice = max(votes, key=votes.__getitem__)
    instance.record_poll(votes[choice], choice)


def _floor_pass(votes: dict[bytes, int]) -> int:
    total = 0
    for _block_id, count in votes.items():
        total += count
    return total


def _per_poll(
    sides: list[tuple[Callable[[], Any], Callable[[Any], object]]], rounds: int
) -> list[float]:
    """Median seconds per poll of each side: ``make()`` a fresh structure (untimed), then
    ``POLLS`` timed polls ``poll(structure)``; sides alternate round by round."""
    times: list[list[float]] = [[] for _ in sides]
    for _ in range(rounds):
        for index, (make, poll) in enumerate(sides):
            subjects = [make() for _ in range(8)]
            start = time.perf_counter()
            for subject in subjects:
                for _ in range(POLLS):
                    poll(subject)
            times[index].append((time.perf_counter() - start) / (len(subjects) * POLLS))
    return [statistics.median(side) for side in times]


def run(quick: bool) -> list[Comparison]:
    """Two rows: the block tree's poll and the bit tree's poll."""
    rounds = 3 if quick else 9
    fast, baseline, floor = _per_poll(
        [
            (_topological, lambda tree: tree.record_poll(VOTES)),
            (_WalkEachVote, lambda tree: tree.record_poll(VOTES)),
            (lambda: VOTES, _floor_pass),
        ],
        rounds,
    )
    tree_fast, tree_baseline, tree_floor = _per_poll(
        [
            (_tree, lambda tree: tree.record_poll(TREE_VOTES)),
            (_flat, lambda flat: _flat_poll(flat, TREE_VOTES)),
            (lambda: TREE_VOTES, _floor_pass),
        ],
        rounds,
    )
    return [
        Comparison(
            group=GROUP,
            case="Topological.record_poll, 10 processing blocks, K=20 votes, per poll",
            fast_seconds=fast,
            baseline_seconds=baseline,
            floor_seconds=floor,
            fast_label="topological pass (Kahn), 6 trees polled",
            baseline_label="each vote walked alone, same trees",
            floor_label="one pass over the votes",
            goal=TOPOLOGICAL_GOAL,
            notes={"polls_per_structure": POLLS, "processing_blocks": len(BLOCKS)},
        ).judged(min_speedup=1.2, max_over_floor=300.0),
        Comparison(
            group=GROUP,
            case="Tree.record_poll, 10 choices, K=20 votes, per poll",
            fast_seconds=tree_fast,
            baseline_seconds=tree_baseline,
            floor_seconds=tree_floor,
            fast_label="bit tree (snowflake)",
            baseline_label="flat n-ary snowflake, no bits",
            floor_label="one pass over the votes",
            goal=TREE_GOAL,
            notes={"choices": len(CHOICES)},
        ).judged(max_over_floor=100.0),
    ]
