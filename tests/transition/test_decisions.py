"""A child of a processing transition block, over the C-chain VM: it verifies and builds on
the builder and on a peer that has verified but not accepted the transition block, and the
decisions that follow reach the post VM."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from vmstack import InvalidBlock, SimClock, build_stack, submit_transactions
from vmstack.cchain import CChainVM
from vmstack.cchain.generate import dev_transactions
from vmstack.conformance import memory_vm
from vmstack.interfaces import Block, ChainVM
from vmstack.layers import PassThroughVM
from vmstack.store import MemoryStore
from vmstack.transition import SerialChainVM, TransitionVM

START = 1_000.0
TRANSITION_TIME = START + 10


def chain_block(block: Block) -> Block:
    """The C-chain VM's block under every layer's block."""
    while not hasattr(block, "transactions"):
        block = block.inner  # type: ignore[attr-defined]
    return block


def node(*, fork_time: float | None = None) -> tuple[ChainVM, SimClock]:
    """A stack whose next built block is the transition block."""
    clock = SimClock(START)
    vm = build_stack(
        MemoryStore(), clock=clock, transition_time=TRANSITION_TIME, fork_time=fork_time
    )
    for _ in range(3):
        clock.advance(2)
        block = vm.build_block()
        block.verify()
        vm.set_preference(block.id)
        block.accept()
    clock.advance(TRANSITION_TIME - clock())
    return vm, clock


def transition_layer(vm: ChainVM) -> TransitionVM:
    layer = vm
    while not isinstance(layer, TransitionVM):
        layer = layer.inner  # type: ignore[attr-defined]
    return layer


@pytest.mark.parametrize("fork_time", [None, START], ids=["no-fork", "fork-before"])
def test_children_of_the_processing_transition_block_verify_on_builder_and_peer(
    fork_time: float | None,
) -> None:
    """The builder builds two generations on its unaccepted transition block and verifies
    them; a peer that verified the transition block verifies the same bytes; after both
    accept, they agree, and every transaction is included once."""
    builder, clock = node(fork_time=fork_time)
    peer, _ = node(fork_time=fork_time)
    assert builder.last_accepted() == peer.last_accepted()
    transactions = dev_transactions(builder, 6, seed=3)
    submit_transactions(builder, transactions)
    transition = builder.build_block()
    assert transition.timestamp >= TRANSITION_TIME
    transition.verify()
    builder.set_preference(transition.id)
    clock.advance(2)
    child = builder.build_block()
    assert child.parent_id == transition.id
    child.verify()
    builder.set_preference(child.id)
    clock.advance(2)
    grandchild = builder.build_block()
    grandchild.verify()
    assert not transition_layer(builder).transitioned

    received = [peer.parse_block(bytes(block)) for block in (transition, child, grandchild)]
    for block in received:
        block.verify()
    assert not transition_layer(peer).transitioned

    for vm, blocks in ((builder, [transition, child, grandchild]), (peer, received)):
        for block in blocks:
            vm.set_preference(block.id)
            block.accept()
        assert transition_layer(vm).transitioned
        assert vm.last_accepted() == grandchild.id
    included = [
        tx.hash
        for block in (transition, child, grandchild)
        for tx in chain_block(block).transactions  # type: ignore[attr-defined]
    ]
    assert sorted(included) == sorted(tx.hash for tx in transactions)
    for vm in (builder, peer):
        clock.advance(2)
        after = vm.build_block()
        assert after.parent_id == grandchild.id
        after.verify()


def test_siblings_on_the_transition_block_are_handed_to_the_post_vm() -> None:
    """Two children of the processing transition block are both handed to the post VM when
    the transition block is accepted; the winner is accepted there, the loser rejected
    there, and the post VM builds on the winner."""
    vm, clock = node()
    transition = vm.build_block()
    transition.verify()
    vm.set_preference(transition.id)
    clock.advance(2)
    loser = vm.build_block()
    loser.verify()
    clock.advance(1)
    winner = vm.build_block()
    winner.verify()
    assert loser.parent_id == winner.parent_id == transition.id and loser.id != winner.id
    vm.set_preference(winner.id)
    transition.accept()
    layer = transition_layer(vm)
    post = layer.post
    assert isinstance(post, CChainVM)
    assert {block.id for block in post.processing()} == {loser.id, winner.id}
    clock.advance(1)
    assert vm.build_block().parent_id == winner.id, "the preferred block is preferred in post"
    winner.accept()
    loser.reject()
    assert vm.last_accepted() == winner.id
    assert post.processing() == ()
    clock.advance(2)
    assert vm.build_block().parent_id == winner.id


class RefusesOne(PassThroughVM):
    """A post VM that judges one block otherwise than the pre VM did."""

    refused: bytes = b""

    def intercept(self, method: str, forward: Callable[..., Any], *args: Any) -> Any:
        if method == "block.verify" and args[0].id == self.refused:
            raise InvalidBlock("the post VM's rules refuse it")
        return forward(*args)


def test_a_block_the_post_vm_refuses_stays_with_the_pre_vm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A processing descendant the post VM refuses at the hand-over is logged and decided
    through the pre VM that verified it."""
    memory = memory_vm(batching=True, blocks=5, clock=SimClock(22.0))
    post = RefusesOne(memory)
    transition = TransitionVM(SerialChainVM(memory), post, transition_time=21)
    block = transition.build_block()
    block.verify()
    transition.set_preference(block.id)
    child = transition.build_block()
    child.verify()
    post.refused = child.id
    with caplog.at_level(logging.WARNING, logger="vmstack.transition.vm"):
        block.accept()
    assert transition.transitioned
    assert "is refused after it" in caplog.text
    child.accept()
    assert memory.last_accepted() == child.id
