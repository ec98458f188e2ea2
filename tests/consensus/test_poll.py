"""The early-termination poll and the poll set play avalanchego's poll vectors
(tests/consensus/vectors/poll.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.consensus.vectors import choice_id, poll
from vmstack.consensus import EarlyTermPoll, PollSet
from vmstack.consensus.poll import _shared_prefix_groups


def _node(name: str) -> bytes:
    return name.encode()


def _bag(names: list[str]) -> dict[bytes, int]:
    polled: dict[bytes, int] = {}
    for name in names:
        polled[_node(name)] = polled.get(_node(name), 0) + 1
    return polled


def _votes(named: dict[str, int]) -> dict[bytes, int]:
    return {choice_id(block): count for block, count in named.items()}


@pytest.mark.parametrize("case", poll.EARLY_TERM, ids=lambda case: case["name"])
def test_early_term_vectors(case: dict[str, Any]) -> None:
    """Each early-termination vector finishes exactly where upstream's poll does."""
    parents = {choice_id(child): choice_id(parent) for child, parent in case["parents"].items()}
    alpha_preference, alpha_confidence = case["alphas"]
    current = EarlyTermPoll(alpha_preference, alpha_confidence, _bag(case["polled"]), parents.get)
    for number, step in enumerate(case["steps"]):
        where = f"{case['name']} step {number} {step!r}"
        if step[0] == "vote":
            current.vote(_node(step[1]), choice_id(step[2]))
        elif step[0] == "drop":
            current.drop(_node(step[1]))
        elif step[0] == "finished":
            assert current.finished() is step[1], where
        else:
            assert current.result() == _votes(step[1]), where


@pytest.mark.parametrize("case", poll.SET, ids=lambda case: case["name"])
def test_set_vectors(case: dict[str, Any]) -> None:
    """The poll set hands back finished polls oldest first, as upstream's set."""
    polls = PollSet(case["alpha"], case["alpha"])
    for number, step in enumerate(case["steps"]):
        where = f"{case['name']} step {number} {step!r}"
        if step[0] == "add":
            assert polls.add(step[1], _bag(step[2])) is step[3], where
        elif step[0] == "vote":
            results = polls.vote(step[1], _node(step[2]), choice_id(step[3]))
            assert results == [_votes(result) for result in step[4]], where
        elif step[0] == "drop":
            results = polls.drop(step[1], _node(step[2]))
            assert results == [_votes(result) for result in step[3]], where
        else:
            assert len(polls) == step[1], where


def test_transitive_votes_for_prefixes() -> None:
    """TestTransitiveVotesForPrefixes: siblings {2} and {4} share bit 0 and split on bit 1:
    one shared-prefix instance, holding both."""
    groups = _shared_prefix_groups([choice_id("02"), choice_id("04")])
    assert groups == [[choice_id("02"), choice_id("04")]]


def test_siblings_splitting_on_bit_zero_share_no_prefix() -> None:
    """Siblings that differ in bit 0 have no shared-prefix instance."""
    assert _shared_prefix_groups([choice_id("01"), choice_id("02")]) == []


def test_the_all_zero_id_is_a_block_like_any_other() -> None:
    """A parent of all zeros is walked like any other ID (None alone ends the walk)."""
    zero, child_a, child_b = bytes(32), choice_id("01"), choice_id("02")
    parents = {child_a: zero, child_b: zero}
    current = EarlyTermPoll(4, 4, _bag(["a", "b", "c", "d"]), parents.get)
    current.vote(b"a", child_a)
    current.vote(b"b", child_b)
    current.vote(b"c", child_a)
    # The siblings split on bit 0 and neither can reach 4; their parent still can.
    assert not current.finished()
    current.drop(b"d")
    assert current.finished()
