"""A refusal to build before this node's proposer window names the time it may build in full
seconds (``1700000001.0``), never rounded to a few digits (``1.7e+09``)."""

from __future__ import annotations

import pytest

from vmstack.clock import SimClock
from vmstack.conformance import memory_vm
from vmstack.errors import ProposerWindowNotStarted
from vmstack.wrappers.proposer.staking import StakingKey
from vmstack.wrappers.proposer.vm import ProposerVM

from . import CHAIN_ID

KEYS = [StakingKey.generate(seed=b"time text a"), StakingKey.generate(seed=b"time text b")]
NOW = 1_700_000_000.0


@pytest.mark.parametrize("durango_time", [0.0, 2e9])
def test_the_time_a_node_may_build_is_printed_in_full_seconds(durango_time: float) -> None:
    clock = SimClock(NOW)
    nodes = [
        ProposerVM(
            memory_vm(clock=clock),
            fork_time=0,
            chain_id=CHAIN_ID,
            clock=clock,
            staking_key=key,
            validators={key.node_id: 1 for key in KEYS},
            durango_time=durango_time,
        )
        for key in KEYS
    ]
    clock.advance(1.0)
    first = nodes[0].build_block()
    for node in nodes:
        block = node.parse_block(bytes(first))
        block.verify()
        block.accept()
    refusals = []
    for node in nodes:
        try:
            node.build_block()
        except ProposerWindowNotStarted as error:
            refusals.append(error)
    assert refusals, "one node at least waits for its window"
    for refused in refusals:
        assert refused.build_time > NOW
        assert "e+09" not in str(refused)
        assert repr(refused.build_time) in str(refused)
