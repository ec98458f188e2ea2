"""ProposerVM with proposer windows: blocks out of turn are refused with their reason, the
right proposer's are accepted, and a node builds only from its turn."""

from __future__ import annotations

import math

import pytest

from vmstack.clock import SimClock
from vmstack.conformance import memory_vm
from vmstack.errors import InvalidBlock, ProposerWindowNotStarted
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.envelope import build_signed, build_unsigned
from vmstack.wrappers.proposer.staking import StakingKey
from vmstack.wrappers.proposer.vm import ProposerVM

from . import CHAIN_ID

KEYS = [StakingKey.generate(seed=b"window node a"), StakingKey.generate(seed=b"window node b")]
VALIDATORS = {key.node_id: 1 for key in KEYS}


def two_nodes(
    durango_time: float = 0.0,
    validators: dict[bytes, int] | None = None,
) -> tuple[list[ProposerVM], SimClock, ProposerBlock]:
    """Two nodes on one clock, each with its key and the windows on, past their first
    (unsigned) post-fork block, accepted on both; that block is returned."""
    clock = SimClock(100.0)
    chosen = VALIDATORS if validators is None else validators
    nodes = [
        ProposerVM(
            memory_vm(clock=clock),
            fork_time=0,
            chain_id=CHAIN_ID,
            clock=clock,
            staking_key=key,
            validators=chosen,
            durango_time=durango_time,
        )
        for key in KEYS
    ]
    clock.advance(1.0)
    first = nodes[0].build_block()
    assert first.post_fork and first.proposer is None
    for node in nodes:
        block = node.parse_block(bytes(first))
        block.verify()
        block.accept()
    return nodes, clock, first


def by_node_id(nodes: list[ProposerVM], node_id: bytes) -> tuple[ProposerVM, ProposerVM]:
    """The node with ``node_id`` and the other one."""
    first, second = nodes
    return (first, second) if first.node_id == node_id else (second, first)


def test_the_expected_proposer_builds_and_the_other_node_accepts() -> None:
    """Post-Durango, the slot's expected proposer builds a signed block (after the minimum
    delay) and the other node verifies and accepts it."""
    nodes, clock, first = two_nodes()
    windower = nodes[0].windower
    assert windower is not None
    expected = windower.expected_proposer(first.height + 1, first.pchain_height, 0)
    proposer, other = by_node_id(nodes, expected)
    clock.advance(1.0)
    block = proposer.build_block()
    assert block.proposer == expected
    received = other.parse_block(bytes(block))
    received.verify()
    received.accept()
    assert other.last_accepted() == block.id


def test_building_before_the_minimum_delay_is_refused_with_the_time() -> None:
    """Even the expected proposer waits ``min_block_delay`` after the parent; the error
    names the time it may build, which build_time() agrees with."""
    nodes, _, first = two_nodes()
    windower = nodes[0].windower
    assert windower is not None
    proposer, _ = by_node_id(
        nodes, windower.expected_proposer(first.height + 1, first.pchain_height, 0)
    )
    with pytest.raises(ProposerWindowNotStarted) as refused:
        proposer.build_block()
    assert refused.value.build_time == first.timestamp + 1.0
    assert proposer.build_time() == first.timestamp + 1.0


def test_building_before_ones_slot_is_refused_with_the_time() -> None:
    """The node that is not expected in slot 0 is refused, naming whose turn it is and
    the start of its own first slot."""
    nodes, clock, first = two_nodes()
    windower = nodes[0].windower
    assert windower is not None
    height = first.height + 1
    expected = windower.expected_proposer(height, first.pchain_height, 0)
    _, waiting = by_node_id(nodes, expected)
    assert waiting.node_id is not None
    clock.advance(1.0)
    own_slot = windower.min_delay_for_proposer(height, first.pchain_height, waiting.node_id, 0)
    with pytest.raises(ProposerWindowNotStarted, match="slot 0 of height") as refused:
        waiting.build_block()
    assert refused.value.build_time == first.timestamp + max(own_slot, 1.0)
    clock.advance(refused.value.build_time - clock())
    assert waiting.build_block().proposer == waiting.node_id


def test_a_block_signed_by_the_wrong_node_for_its_slot_is_refused() -> None:
    """A block signed by the node its slot does not expect is InvalidBlock naming the slot
    and the expected proposer."""
    nodes, clock, first = two_nodes()
    windower = nodes[0].windower
    assert windower is not None
    expected = windower.expected_proposer(first.height + 1, first.pchain_height, 0)
    proposer, other = by_node_id(nodes, expected)
    clock.advance(1.0)
    honest = proposer.build_block()
    wrong_key = KEYS[0] if KEYS[0].node_id != expected else KEYS[1]
    forged = build_signed(
        first.id,
        honest.timestamp,
        honest.pchain_height,
        bytes(honest.inner),
        key=wrong_key,
        chain_id=nodes[0].chain_id,
    )
    with pytest.raises(InvalidBlock, match=r"slot 0 of height \d+ expects NodeID-"):
        other.parse_block(bytes(forged)).verify()


def test_an_unsigned_block_when_a_proposer_is_expected_is_refused() -> None:
    """With validators, an unsigned block in a slot is refused: the slot expects a
    proposer."""
    nodes, clock, first = two_nodes()
    clock.advance(1.0)
    honest_inner = nodes[0].inner.build_block()
    unsigned = build_unsigned(first.id, int(clock()), first.pchain_height, bytes(honest_inner))
    with pytest.raises(InvalidBlock, match=r"expects NodeID-.*unsigned"):
        nodes[1].parse_block(bytes(unsigned)).verify()


def test_an_empty_set_lets_anyone_propose_unsigned() -> None:
    """``validators={}``: the child is built unsigned, and a signed one is refused."""
    nodes, clock, first = two_nodes(validators={})
    clock.advance(1.0)
    block = nodes[1].build_block()
    assert block.post_fork and block.proposer is None
    nodes[0].parse_block(bytes(block)).verify()
    signed = build_signed(
        first.id,
        block.timestamp,
        block.pchain_height,
        bytes(block.inner),
        key=KEYS[0],
        chain_id=nodes[0].chain_id,
    )
    with pytest.raises(InvalidBlock, match="anyone may propose"):
        nodes[0].parse_block(bytes(signed)).verify()


def test_pre_durango_a_block_before_its_proposers_delay_is_refused() -> None:
    """Before Durango, a signed block earlier than its proposer's window, an unsigned one
    within the verify windows and a signed one after them are each refused."""
    nodes, clock, first = two_nodes(durango_time=math.inf)
    windower = nodes[0].windower
    assert windower is not None
    height = first.height + 1
    late_key = max(
        KEYS, key=lambda key: windower.delay(height, first.pchain_height, key.node_id, 6)
    )
    assert windower.delay(height, first.pchain_height, late_key.node_id, 6) > 0
    inner = bytes(nodes[0].inner.build_block())
    early = build_signed(
        first.id,
        first.timestamp,
        first.pchain_height,
        inner,
        key=late_key,
        chain_id=nodes[0].chain_id,
    )
    with pytest.raises(InvalidBlock, match="proposer window not started"):
        nodes[1].parse_block(bytes(early)).verify()
    unsigned = build_unsigned(first.id, first.timestamp + 10, first.pchain_height, inner)
    with pytest.raises(InvalidBlock, match="proposer window not started"):
        nodes[1].parse_block(bytes(unsigned)).verify()
    clock.advance(40.0)
    stale = build_signed(
        first.id,
        first.timestamp + 31,
        first.pchain_height,
        inner,
        key=late_key,
        chain_id=nodes[0].chain_id,
    )
    with pytest.raises(InvalidBlock, match="must be unsigned"):
        nodes[1].parse_block(bytes(stale)).verify()


def test_pre_durango_the_first_window_builds_signed() -> None:
    """Before Durango the node with no delay builds a signed block that verifies."""
    nodes, clock, first = two_nodes(durango_time=math.inf)
    windower = nodes[0].windower
    assert windower is not None
    height = first.height + 1
    first_in_line = windower.proposers(height, first.pchain_height, 60)[0]
    proposer, other = by_node_id(nodes, first_in_line)
    clock.advance(1.0)
    block = proposer.build_block()
    assert block.proposer == first_in_line
    other.parse_block(bytes(block)).verify()


def test_bad_window_arguments_raise_value_error() -> None:
    """A durango_time or min_block_delay that is not a number of seconds is refused."""
    for arguments in (
        {"durango_time": math.nan},
        {"min_block_delay": -1.0},
        {"min_block_delay": "soon"},
        {"validators": 5},
    ):
        with pytest.raises(ValueError):
            ProposerVM(memory_vm(), fork_time=0, chain_id=CHAIN_ID, **arguments)
