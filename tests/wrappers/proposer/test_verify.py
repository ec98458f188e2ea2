"""The proposer layer's rules per block kind: what a post-fork envelope and a pre-fork
block must satisfy against their parent, the clock and the P-chain."""

from __future__ import annotations

from typing import Any

import pytest

from vmstack.conformance import MemoryVM
from vmstack.errors import InvalidBlock
from vmstack.wrappers.proposer.block import build_signed, build_unsigned
from vmstack.wrappers.proposer.verify import MAX_CLOCK_SKEW, pchain_height_source
from vmstack.wrappers.proposer.vm import ProposerBlock, ProposerVM

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


def _envelope(vm: ProposerVM, inner: MemoryVM, parent: ProposerBlock, **fields: Any,
              ) -> bytes:
    """Envelope bytes over a fresh inner block on ``parent``'s inner block."""
    inner.set_preference(parent.inner.id)
    inner_block = inner.build_block()
    values: dict[str, Any] = {"timestamp": parent.timestamp, "pchain_height": 0}
    signer = fields.pop("key", node_key())
    values.update(fields)
    if signer is None:
        return bytes(build_unsigned(parent.id, values["timestamp"], values["pchain_height"],
                                    bytes(inner_block)))
    return bytes(build_signed(parent.id, values["timestamp"], values["pchain_height"],
                              bytes(inner_block), key=signer, chain_id=CHAIN_ID))


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


@pytest.mark.parametrize("fields, reason", [
    ({"timestamp": -1}, "before its parent's"),
    ({"timestamp": 10**6}, "too far in the future"),
    ({"pchain_height": 5}, "ahead of the P-chain"),
])
def test_envelope_fields_are_checked_against_parent_and_clock(fields: dict[str, int],
                                                              reason: str) -> None:
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
    block = vm.parse_block(_envelope(vm, inner, parent,
                                     timestamp=int(clock()) + MAX_CLOCK_SKEW))
    block.verify()


def test_inner_parent_must_match_the_envelope_parent() -> None:
    """An envelope whose inner block builds on another block fails to verify."""
    vm, inner, clock = make_vm(fork_time=0)
    blocks = grow(vm, clock, 3)
    inner.set_preference(blocks[0].inner.id)
    stray = inner.build_block()
    data = bytes(build_signed(blocks[-1].id, blocks[-1].timestamp, 0, bytes(stray),
                              key=node_key(), chain_id=CHAIN_ID))
    with pytest.raises(InvalidBlock, match="inner block's parent"):
        vm.parse_block(data).verify()


def test_unknown_parent_fails() -> None:
    """An envelope whose parent is unknown fails to verify."""
    vm, inner, clock = make_vm(fork_time=0)
    grow(vm, clock, 1)
    data = bytes(build_signed(bytes(32), int(clock()), 0, bytes(inner.build_block()),
                              key=node_key(), chain_id=CHAIN_ID))
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
