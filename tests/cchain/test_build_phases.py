"""The chain-build row's account of a missed goal: a build timed phase by phase, with every
timer taken away after it, and the share of the build's other work that would have to go."""

from __future__ import annotations

import pytest

from vmstack.benchmarks.build_phases import PHASES, REST, timed_phases
from vmstack.benchmarks.state import _beyond_the_signatures
from vmstack.cchain import CChainVM
from vmstack.cchain.generate import generate_chain
from vmstack.cchain.state import AccountTrie
from vmstack.clock import SimClock
from vmstack.stack import build_stack
from vmstack.store import MemoryStore


def _small_build() -> object:
    clock = SimClock(1_700_000_000.0)
    vm = build_stack(MemoryStore(), clock=clock)
    return generate_chain(vm, blocks=4, txs_per_block=3, seed=1, clock=clock)


def _timed_names() -> tuple[object, object, object]:
    return (
        CChainVM.__dict__["add_transactions"],
        CChainVM.__dict__["build_block"],
        AccountTrie.__dict__["root_hash"],
    )


def test_a_timed_build_counts_every_phase_and_adds_up_to_the_build() -> None:
    before = _timed_names()
    total, spent = timed_phases(_small_build)
    assert set(spent) == {*PHASES, REST}
    assert spent["drawing and signing"] > 0 and spent["account trie root"] > 0
    assert spent["accept and its write"] > 0 and spent["mempool checks"] > 0
    assert all(seconds >= 0 for phase, seconds in spent.items() if phase != REST)
    assert sum(spent.values()) == pytest.approx(total)
    assert _timed_names() == before  # the timers are gone


def test_the_timers_are_taken_away_when_the_build_raises() -> None:
    before = _timed_names()

    def failing() -> object:
        _small_build()
        raise RuntimeError("the build failed")

    with pytest.raises(RuntimeError, match="the build failed"):
        timed_phases(failing)
    assert _timed_names() == before


def test_the_build_without_its_signatures_against_the_floor() -> None:
    # 2.5 s of build, 0.35 s of it signing, a 0.9 s floor: 2.15 s of other work where the
    # goal leaves 1.8 - 0.35 = 1.45 s, so 33% of it would have to go.
    said = _beyond_the_signatures(2.5, 0.9, 0.35)
    assert "2.4x its crypto floor (2150 ms against 900 ms)" in said
    assert "would have to lose 33% of its time" in said
