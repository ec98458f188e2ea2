"""ProposerVM: building across the fork, serving, decisions, parsing, configuration, and the
layer conformance kit."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest
from Crypto.PublicKey import ECC

from vmstack.batching import serial_get_ancestors
from vmstack.clock import SimClock
from vmstack.conformance import Declaration, LayerConformance, MemoryVM, memory_vm
from vmstack.errors import BlockNotFound, InvalidBlock
from vmstack.interfaces import ChainVM
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.envelope import (
    PostForkBlock,
    build_option,
    build_signed,
    decode_block,
)
from vmstack.wrappers.proposer.staking import StakingKey
from vmstack.wrappers.proposer.vm import ProposerVM

from . import CHAIN_ID, grow, make_vm, node_key

FORK = 10.0

# --- the conformance kit ----------------------------------------------------------------


@pytest.mark.thorough  # the whole kit again, over another arrangement: the full suite runs it
class TestConformanceBeforeTheFork(LayerConformance):
    """With the fork never reached the layer passes pre-fork blocks through, and completes
    batched answers itself (walking a VM below that cannot batch)."""

    declarations = frozenset({Declaration.ANSWERS_BATCHED_CALLS_ITSELF})

    def wrap(self, inner: ChainVM) -> ChainVM:
        assert isinstance(inner, MemoryVM)
        return ProposerVM(
            inner, fork_time=math.inf, chain_id=CHAIN_ID, staking_key=node_key(), clock=inner.clock
        )


# The whole kit over the proposer layer: the quick loop leaves it to the full suite.
@pytest.mark.thorough
class TestConformanceForkAtGenesis(LayerConformance):
    """With the fork at genesis every block the kit grows is a signed post-fork block: an
    envelope of the layer's own, which it serves from its own store."""

    declarations = frozenset(
        {Declaration.ANSWERS_BATCHED_CALLS_ITSELF, Declaration.BLOCKS_OF_ITS_OWN}
    )
    #: Faults are injected below by block ID, and the VM below never sees the IDs of
    #: post-fork blocks; the layer answers get_ancestors of post-fork blocks from its own
    #: store, so an error of the batched call below (which it does not make) cannot come up.
    not_applicable: ClassVar[dict[str, str]] = {
        "errors.first-block": "faults are injected by block ID into the inner VM, which "
        "never sees the IDs of post-fork blocks",
        "errors.mid-walk": "faults are injected by block ID into the inner VM, which never "
        "sees the IDs of post-fork blocks",
        "errors.batched-ancestors-unchanged": "the layer answers the post-fork part from its "
        "own store; an error of the pre-fork part below "
        "ends the answer there, as a walk ends "
        "(test_batched.py checks this)",
    }
    max_examples: ClassVar[int] = 8

    def wrap(self, inner: ChainVM) -> ChainVM:
        assert isinstance(inner, MemoryVM)
        return ProposerVM(
            inner, fork_time=0, chain_id=CHAIN_ID, staking_key=node_key(), clock=inner.clock
        )

    def extend_chain(self, layer: ChainVM, inner: MemoryVM, count: int) -> list[bytes]:
        ids: list[bytes] = []
        for _ in range(count):
            block = layer.build_block()
            block.verify()
            block.accept()
            layer.set_preference(block.id)
            ids.append(block.id)
        return ids


# --- the fork rules ---------------------------------------------------------------------


def test_before_the_fork_blocks_are_the_inner_blocks() -> None:
    """Pre-fork blocks have the inner block's ID and bytes and no envelope."""
    vm, inner, clock = make_vm(fork_time=math.inf)
    for block in grow(vm, clock, 3):
        assert not block.post_fork and block.envelope is None
        below = inner.get_block(block.id)
        assert bytes(block) == bytes(below) and block.inner is below
        assert block.proposer is None and block.pchain_height == 0


def test_fork_activates_after_the_first_block_at_the_fork_time() -> None:
    """Children of blocks before the fork time are pre-fork; the first post-fork block is
    unsigned and the ones after it are signed by the node."""
    vm, _, clock = make_vm(fork_time=FORK)
    blocks = grow(vm, clock, 8)
    kinds = [block.post_fork for block in blocks]
    assert kinds == [False] * 5 + [True] * 3
    last_pre_fork, first_post_fork = blocks[4], blocks[5]
    assert last_pre_fork.timestamp >= FORK > blocks[3].timestamp
    assert first_post_fork.proposer is None
    assert first_post_fork.inner.parent_id == last_pre_fork.id
    assert all(block.proposer == node_key().node_id for block in blocks[6:])
    for block in blocks[5:]:
        assert isinstance(block.envelope, PostForkBlock)
        assert decode_block(bytes(block)) == block.envelope


def test_without_a_key_post_fork_blocks_are_unsigned() -> None:
    """A node without a staking key builds unsigned post-fork blocks."""
    vm, _, clock = make_vm(fork_time=0, signed=False)
    blocks = grow(vm, clock, 3)
    assert all(block.post_fork and block.proposer is None for block in blocks)
    assert vm.node_id is None


def test_fork_at_genesis_makes_every_block_post_fork() -> None:
    """With the fork at or before genesis the first block is already post-fork."""
    vm, _, clock = make_vm(fork_time=0)
    blocks = grow(vm, clock, 3)
    assert [block.post_fork for block in blocks] == [True, True, True]
    assert blocks[0].proposer is None and blocks[1].proposer == node_key().node_id


def test_pchain_height_follows_the_callable() -> None:
    """Built blocks name the current P-chain height and never go below their parent's."""
    height = [3]
    clock = SimClock()
    inner = memory_vm(clock=clock)
    vm = ProposerVM(
        inner,
        fork_time=0,
        chain_id=CHAIN_ID,
        clock=clock,
        staking_key=node_key(),
        pchain_height=lambda: height[0],
    )
    first, second = grow(vm, clock, 2)
    assert (first.pchain_height, second.pchain_height) == (3, 3)
    height[0] = 1
    third = vm.build_block()
    assert third.pchain_height == 3
    with pytest.raises(InvalidBlock, match="ahead of the P-chain"):
        third.verify()


# --- serving blocks ---------------------------------------------------------------------


def test_served_blocks_and_heights_across_the_fork() -> None:
    """get_block, last_accepted and get_block_id_at_height give envelopes after the fork."""
    vm, inner, clock = make_vm(fork_time=FORK)
    blocks = grow(vm, clock, 8)
    assert vm.last_accepted() == blocks[-1].id
    for block in blocks:
        assert vm.get_block_id_at_height(block.height) == block.id
        served = vm.get_block(block.id)
        assert (served.id, bytes(served), served.parent_id) == (
            block.id,
            bytes(block),
            block.parent_id,
        )
    with pytest.raises(BlockNotFound, match="inner block of a post-fork block"):
        vm.get_block(blocks[-1].inner.id)
    with pytest.raises(BlockNotFound):
        vm.get_block(bytes(32))
    with pytest.raises(BlockNotFound):
        vm.set_preference(blocks[-1].inner.id)
    assert inner.last_accepted() == blocks[-1].inner.id


def test_processing_blocks_are_served_and_rejected_ones_are_not() -> None:
    """A verified post-fork block is served; after reject it is not."""
    vm, _, clock = make_vm(fork_time=0)
    grow(vm, clock, 2)
    clock.advance(2)
    block = vm.build_block()
    with pytest.raises(BlockNotFound):
        vm.get_block(block.id)
    block.verify()
    assert vm.get_block(block.id) is block
    assert vm.parse_block(bytes(block)) is block
    block.reject()
    with pytest.raises(BlockNotFound):
        vm.get_block(block.id)


def test_decisions_reach_the_inner_block_after_the_fork() -> None:
    """verify and accept of post-fork blocks reach their inner blocks, once each; a
    rejected envelope's inner block is rejected when its sibling is accepted, not before."""
    vm, inner, clock = make_vm(fork_time=0)
    grow(vm, clock, 2)
    clock.advance(2)
    built = vm.build_block()
    inner.calls.clear()
    built.verify()
    built.accept()
    other = vm.build_block()
    other.verify()
    other.reject()
    clock.advance(2)
    winner = vm.build_block()
    assert winner.parent_id == other.parent_id == built.id
    winner.verify()
    winner.accept()
    decisions = [call for call in inner.calls if call.method.startswith("block.")]
    assert [(call.method, call.args) for call in decisions] == [
        ("block.verify", (built.inner.id,)),
        ("block.accept", (built.inner.id,)),
        ("block.verify", (other.inner.id,)),
        ("block.verify", (winner.inner.id,)),
        ("block.accept", (winner.inner.id,)),
        ("block.reject", (other.inner.id,)),
    ]
    assert vm.last_accepted() == winner.id


def test_accept_requires_verify() -> None:
    """Accepting a post-fork block that was never verified raises InvalidBlock."""
    vm, _, clock = make_vm(fork_time=0)
    grow(vm, clock, 1)
    clock.advance(2)
    with pytest.raises(InvalidBlock, match="not processing"):
        vm.build_block().accept()


# --- parsing ----------------------------------------------------------------------------


def test_parse_block_tries_post_fork_then_pre_fork() -> None:
    """Envelope bytes parse to post-fork blocks, inner bytes to pre-fork blocks."""
    vm, _, clock = make_vm(fork_time=FORK)
    blocks = grow(vm, clock, 8)
    fresh, _, _ = make_vm(fork_time=FORK)
    for block in blocks:
        parsed = fresh.parse_block(bytes(block))
        assert (parsed.id, parsed.post_fork, parsed.height) == (
            block.id,
            block.post_fork,
            block.height,
        )
        assert isinstance(parsed, ProposerBlock)


def test_tampered_signature_fails_parse() -> None:
    """A signed block with a changed signature fails with the signature as the reason."""
    vm, _, clock = make_vm(fork_time=0)
    block = grow(vm, clock, 3)[-1]
    data = bytearray(bytes(block))
    data[-5] ^= 0x40
    with pytest.raises(InvalidBlock, match="signature verification failed"):
        vm.parse_block(bytes(data))


def test_block_signed_for_another_chain_fails_parse() -> None:
    """A block signed for another chain ID fails the signature check here."""
    vm, inner, clock = make_vm(fork_time=0)
    parent = grow(vm, clock, 2)[-1]
    inner.set_preference(parent.inner.id)
    data = bytes(
        build_signed(
            parent.id,
            parent.timestamp,
            0,
            bytes(inner.build_block()),
            key=node_key(),
            chain_id=bytes(32),
        )
    )
    with pytest.raises(InvalidBlock, match="signature verification failed"):
        vm.parse_block(data)


def test_option_blocks_are_refused() -> None:
    """Options need an oracle inner VM, which this stack has not, so they are refused."""
    vm, _, clock = make_vm(fork_time=0)
    parent = grow(vm, clock, 1)[-1]
    with pytest.raises(InvalidBlock, match="option"):
        vm.parse_block(bytes(build_option(parent.id, bytes(parent.inner))))


def test_inner_errors_pass_through_parse_unchanged() -> None:
    """An error of the inner VM's parse_block comes up as the very same object."""
    vm, inner, clock = make_vm(fork_time=0)
    block = grow(vm, clock, 1)[-1]
    fault = RuntimeError("inner parse failed")
    inner.fail_next("parse_block", fault)
    with pytest.raises(RuntimeError) as raised:
        vm.parse_block(bytes(block))
    assert raised.value is fault


# --- configuration ----------------------------------------------------------------------


def test_identity_from_a_raw_key_and_certificate() -> None:
    """A raw P-256 key gets a self-signed certificate; a given certificate must match."""
    private = ECC.generate(curve="P-256")
    vm = ProposerVM(MemoryVM(), fork_time=0, chain_id=CHAIN_ID, staking_key=private)
    assert vm.node_id == StakingKey(private).node_id
    with pytest.raises(ValueError):
        ProposerVM(
            MemoryVM(),
            fork_time=0,
            chain_id=CHAIN_ID,
            staking_key=private,
            certificate=node_key().certificate,
        )


@pytest.mark.slow
def test_blocks_of_an_rsa_proposer_verify_on_another_node() -> None:
    """Blocks signed with an RSA staking key parse, verify and accept on a node with another
    key: the certificate in each block is what the signature is checked against."""
    rsa_key = StakingKey.generate(algorithm="RSA", seed=b"rsa proposer")
    clock = SimClock()
    proposer = ProposerVM(
        memory_vm(clock=clock), fork_time=0, chain_id=CHAIN_ID, clock=clock, staking_key=rsa_key
    )
    blocks = grow(proposer, clock, 3)
    assert [block.proposer for block in blocks[1:]] == [rsa_key.node_id] * 2
    other, _, other_clock = make_vm(fork_time=0)
    other_clock.advance(clock())
    for block in other.batched_parse_block([bytes(block) for block in blocks]):
        block.verify()
        block.accept()
    assert other.last_accepted() == blocks[-1].id
    assert other.node_id == node_key().node_id != rsa_key.node_id


@pytest.mark.parametrize(
    "arguments",
    [
        {"fork_time": math.nan},
        {"fork_time": "soon"},
        {"chain_id": b"short"},
        {"pchain_height": -1},
        {"pchain_height": "high"},
        {"staking_key": node_key(), "certificate": node_key().certificate},
        {"certificate": node_key().certificate},
        {"staking_key": "not a key"},
    ],
)
def test_bad_arguments_raise_value_error(arguments: dict[str, Any]) -> None:
    """Bad configuration raises ValueError at construction."""
    config: dict[str, Any] = {"fork_time": 0, "chain_id": CHAIN_ID}
    config.update(arguments)
    with pytest.raises(ValueError):
        ProposerVM(MemoryVM(), **config)


def test_serial_and_batched_answers_agree_on_a_simple_chain() -> None:
    """The layer's answer equals the serial walk through it, across the fork."""
    vm, _, clock = make_vm(fork_time=FORK)
    tip = grow(vm, clock, 10)[-1]
    assert vm.get_ancestors(tip.id, 100, 10**6, 1.0) == serial_get_ancestors(
        vm, tip.id, max_blocks_num=100, max_blocks_size=10**6, max_retrieval_time=1.0, clock=clock
    )
