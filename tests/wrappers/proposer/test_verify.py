"""The proposer layer's rules per block kind: what a post-fork envelope and a pre-fork
block must satisfy against their parent, the clock and the P-chain."""

from __future__ import annotations

import math
from typing import Any

import pytest

from vmstack.conformance import MemoryVM
from vmstack.errors import InvalidBlock
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.envelope import build_signed, build_unsigned
from vmstack.wrappers.proposer.verify import (
    MAX_CLOCK_SKEW,
    BlockFacts,
    PreForkFacts,
    pchain_height_source,
)
from vmstack.wrappers.proposer.vm import ProposerVM

from . import CHAIN_ID, grow, make_vm, node_key

FORK = 10.0


def test_post_fork_parent_never_has_a_pre_fork_child() -> None:
    """An inner block offered as a pre-fork child of a post-fork block fails to verify."""
    vm, inner, clock = make_vm(fork_time=FORK)
    blocks = grow(vm, clock, 7)
    clock.advance(2)
    raw = inner.build_block()
    with pytest.raises(InvalidBlock, match="never has a pre-fork child"):
        vm.parse_block(bytes(raw)).verify()
    assert blocks[-1].post_fork


def test_pre_fork_block_after_the_fork_fails() -> None:
    """A pre-fork child of the last pre-fork block fails: its children are post-fork."""
    vm, inner, clock = make_vm(fork_time=FORK)
    blocks = grow(vm, clock, 5)
    assert blocks[-1].timestamp >= FORK and not blocks[-1].post_fork
    clock.advance(2)
    pre_fork = vm.parse_block(bytes(inner.build_block()))
    with pytest.raises(InvalidBlock, match="pre-fork block after the fork"):
        pre_fork.verify()


def _envelope(
    vm: ProposerVM,
    inner: MemoryVM,
    parent: ProposerBlock,
    **fields: Any,
) -> bytes:
    """Envelope bytes over a fresh inner block on ``parent``'s inner block."""
    inner.set_preference(parent.inner.id)
    inner_block = inner.build_block()
    values: dict[str, Any] = {"timestamp": parent.timestamp, "pchain_height": 0}
    signer = fields.pop("key", node_key())
    values.update(fields)
    if signer is None:
        return bytes(
            build_unsigned(
                parent.id, values["timestamp"], values["pchain_height"], bytes(inner_block)
            )
        )
    return bytes(
        build_signed(
            parent.id,
            values["timestamp"],
            values["pchain_height"],
            bytes(inner_block),
            key=signer,
            chain_id=CHAIN_ID,
        )
    )


def test_post_fork_block_before_the_fork_fails() -> None:
    """An envelope over a pre-fork parent from before the fork time fails to verify."""
    vm, inner, clock = make_vm(fork_time=FORK)
    blocks = grow(vm, clock, 2)
    data = _envelope(vm, inner, blocks[-1], key=None)
    with pytest.raises(InvalidBlock, match="post-fork block before the fork"):
        vm.parse_block(data).verify()


def test_first_post_fork_block_must_be_unsigned() -> None:
    """A signed child of the last pre-fork block fails to verify."""
    vm, inner, clock = make_vm(fork_time=FORK)
    blocks = grow(vm, clock, 5)
    with pytest.raises(InvalidBlock, match="first post-fork block is unsigned"):
        vm.parse_block(_envelope(vm, inner, blocks[-1])).verify()


@pytest.mark.parametrize(
    "fields, reason",
    [
        ({"timestamp": -1}, "before its parent's"),
        ({"timestamp": 10**6}, "too far in the future"),
        ({"pchain_height": 5}, "ahead of the P-chain"),
    ],
)
def test_envelope_fields_are_checked_against_parent_and_clock(
    fields: dict[str, int], reason: str
) -> None:
    """Timestamps before the parent or beyond the skew, and future P-chain heights, fail."""
    vm, inner, clock = make_vm(fork_time=0)
    parent = grow(vm, clock, 2)[-1]
    if fields.get("timestamp") == -1:
        fields = {"timestamp": parent.timestamp - 1}
    with pytest.raises(InvalidBlock, match=reason):
        vm.parse_block(_envelope(vm, inner, parent, **fields)).verify()


def test_skew_allows_blocks_slightly_ahead() -> None:
    """A timestamp within the allowed skew of the local clock verifies."""
    vm, inner, clock = make_vm(fork_time=0)
    parent = grow(vm, clock, 2)[-1]
    block = vm.parse_block(_envelope(vm, inner, parent, timestamp=int(clock()) + MAX_CLOCK_SKEW))
    block.verify()


def test_inner_parent_must_match_the_envelope_parent() -> None:
    """An envelope whose inner block builds on another block fails to verify."""
    vm, inner, clock = make_vm(fork_time=0)
    blocks = grow(vm, clock, 3)
    inner.set_preference(blocks[0].inner.id)
    stray = inner.build_block()
    data = bytes(
        build_signed(
            blocks[-1].id, blocks[-1].timestamp, 0, bytes(stray), key=node_key(), chain_id=CHAIN_ID
        )
    )
    with pytest.raises(InvalidBlock, match="inner block's parent"):
        vm.parse_block(data).verify()


def test_unknown_parent_fails() -> None:
    """An envelope whose parent is unknown fails to verify."""
    vm, inner, clock = make_vm(fork_time=0)
    grow(vm, clock, 1)
    data = bytes(
        build_signed(
            bytes(32),
            int(clock()),
            0,
            bytes(inner.build_block()),
            key=node_key(),
            chain_id=CHAIN_ID,
        )
    )
    with pytest.raises(InvalidBlock, match="is not known"):
        vm.parse_block(data).verify()


@pytest.mark.parametrize("value", [-1, 2**64, 1.5, True, "3", None])
def test_pchain_height_source_refuses_anything_but_a_u64_or_a_callable(value: Any) -> None:
    """A P-chain height is a u64 or a zero-argument callable; anything else is ValueError."""
    with pytest.raises(ValueError, match="pchain_height"):
        pchain_height_source(value)


def test_pchain_height_source_answers_a_fixed_height_or_asks_the_callable() -> None:
    """A fixed height is answered as given; a callable is asked each time."""
    assert pchain_height_source(2**64 - 1)() == 2**64 - 1
    heights = iter([4, 9])
    source = pchain_height_source(lambda: next(heights))
    assert (source(), source()) == (4, 9)


# --- the facts of pre-fork blocks the layer has decided on ------------------------------


def test_building_on_a_verified_or_accepted_pre_fork_block_reads_no_inner_block() -> None:
    """Building on a pre-fork block the layer verified (or accepted) takes its timestamp
    from what the layer kept, without reading the inner block again."""
    vm, inner, clock = make_vm(fork_time=FORK)
    grow(vm, clock, 2)
    inner.forget_records()
    processing = grow(vm, clock, 2, accept=False)
    assert not processing[-1].post_fork
    assert inner.calls_to("get_block") == []


def test_a_pre_fork_block_not_decided_here_is_read_from_the_inner_vm() -> None:
    """A pre-fork block the layer has not verified (accepted below it) is read from the
    inner VM, and its facts are what that read says."""
    vm, inner, clock = make_vm(fork_time=FORK)
    clock.advance(2)
    below = inner.build_block()
    below.verify()
    below.accept()
    vm.set_preference(below.id)
    inner.forget_records()
    child = vm.build_block()
    assert [call.args for call in inner.calls_to("get_block")] == [(below.id,)]
    assert child.parent_id == below.id and not child.post_fork


def test_a_rejected_pre_fork_block_is_forgotten() -> None:
    """A rejected preferred pre-fork block is not built on, though the layer verified it:
    its kept facts go with it, and the next block builds on the last accepted one."""
    vm, _, clock = make_vm(fork_time=FORK)
    accepted = grow(vm, clock, 1)[-1]
    rejected = grow(vm, clock, 1, accept=False)[-1]
    rejected.reject()
    assert vm._chain.pre_fork_facts(rejected.id) is None
    clock.advance(2)
    assert vm.build_block().parent_id == accepted.id


def test_pre_fork_facts_keep_the_newest_up_to_their_limit() -> None:
    """The kept facts are bounded: the oldest entry goes first."""
    vm, _, clock = make_vm(fork_time=math.inf)
    blocks = grow(vm, clock, 3)
    kept = PreForkFacts(limit=2)
    for block in blocks:
        kept.remember(block.inner)
    assert kept.get(blocks[0].id) is None
    assert kept.get(blocks[2].id) == BlockFacts(False, blocks[2].timestamp, 0, blocks[2].id)
    kept.forget(blocks[2].id)
    assert kept.get(blocks[2].id) is None and kept.get(blocks[1].id) is not None
