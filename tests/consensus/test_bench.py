"""The consensus bench rows measure what they say and judge their goals."""

from __future__ import annotations

from vmstack.benchmarks import consensus


def test_rows_have_every_figure_and_a_verdict() -> None:
    """Two rows, each with fast, baseline and floor times and a verdict on its goal; the
    measured polls never accept (the block tree's blocks would raise)."""
    rows = consensus.run(quick=True)
    assert [row.case.split(",")[0] for row in rows] == [
        "Topological.record_poll",
        "Tree.record_poll",
    ]
    for row in rows:
        assert row.fast_seconds > 0 and row.baseline_seconds > 0 and row.floor_seconds
        assert row.goal_met is not None


def test_the_baseline_polls_the_same_trees_alike() -> None:
    """The baseline's tallies equal the block tree's: after the same polls both prefer the
    tip with 15 votes at the last accepted block."""
    walked = consensus._WalkEachVote()
    tree = consensus._topological()
    for _ in range(3):
        walked.record_poll(consensus.VOTES)
        tree.record_poll(consensus.VOTES)
    assert walked.trees[consensus.GENESIS].preference() == consensus.CHAINS["a"][0].id
    assert tree.preference() == consensus.CHAINS["a"][-1].id
