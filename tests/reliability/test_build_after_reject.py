"""Building after a rejection: a node whose preferred block was rejected builds its next
block on the last accepted block, at every layer and through the full stack, before and
after the transition and the proposer fork; never ``BlockNotFound`` from deep inside."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.reliability.stacks import START, TRANSITION_TIME, bare_vm, full_stack, grow
from vmstack import SimClock
from vmstack.cchain import CChainVM
from vmstack.cchain.generate import dev_transactions
from vmstack.interfaces import Block, ChainVM
from vmstack.store import KeyValueStore, MemoryStore
from vmstack.submission import find_mempool
from vmstack.transition import TransitionVM
from vmstack.wrappers.proposer.vm import ProposerVM


def transition_stack(store: KeyValueStore, clock: SimClock) -> ChainVM:
    """The transition layer alone over two C-chain VMs sharing ``store``."""
    return TransitionVM(
        CChainVM(store, clock=clock),
        CChainVM(store, clock=clock),
        transition_time=TRANSITION_TIME,
        clock=clock,
    )


def proposer_stack(store: KeyValueStore, clock: SimClock) -> ChainVM:
    """The proposer layer alone over a C-chain VM, forked after block 3."""
    return ProposerVM(
        CChainVM(store, clock=clock), fork_time=START + 6, chain_id=5, store=store, clock=clock
    )


#: (stack, accepted blocks before the scenario): before and after each layer's switch.
STACKS: dict[str, tuple[Callable[[KeyValueStore, SimClock], ChainVM], int]] = {
    "cchain": (bare_vm, 3),
    "transition before": (transition_stack, 2),
    "transition after": (transition_stack, 7),
    "proposer before the fork": (proposer_stack, 1),
    "proposer at the fork": (proposer_stack, 3),
    "proposer after the fork": (proposer_stack, 6),
    "full stack before the fork": (full_stack, 6),
    "full stack at the fork": (full_stack, 9),
    "full stack after the fork": (full_stack, 13),
}


class Node:
    """A stack with a transaction pool, building blocks as an engine does."""

    def __init__(self, name: str) -> None:
        factory, blocks = STACKS[name]
        self.clock = SimClock(START)
        self.vm = factory(MemoryStore(), self.clock)
        grow(self.vm, self.clock, blocks)
        self.taken = 0

    def build(self, *, step: float = 2.0) -> Block:
        """A new verified block on the preferred one (not preferred yet)."""
        self.clock.advance(step)
        find_mempool(self.vm).add_transactions(dev_transactions(self.vm, 2, seed=9 + self.taken))
        self.taken += 2
        block = self.vm.build_block()
        block.verify()
        return block

    def builds_on_last_accepted(self) -> None:
        """The next block builds on the last accepted block, verifies and is accepted."""
        last = self.vm.last_accepted()
        block = self.build()
        assert block.parent_id == last
        block.accept()
        assert self.vm.last_accepted() == block.id


@pytest.mark.parametrize("name", list(STACKS))
def test_preferred_block_rejected(name: str) -> None:
    node = Node(name)
    block = node.build()
    node.vm.set_preference(block.id)
    block.reject()
    node.builds_on_last_accepted()


@pytest.mark.parametrize("name", list(STACKS))
def test_preferred_chain_rejected(name: str) -> None:
    """A preferred block and its preferred child, both rejected (child first, as an engine
    may order them, then parent)."""
    node = Node(name)
    parent = node.build()
    node.vm.set_preference(parent.id)
    if name == "transition before" and parent.timestamp >= TRANSITION_TIME:
        pytest.skip("a child of an unaccepted transition block waits for it")
    child = node.build()
    node.vm.set_preference(child.id)
    child.reject()
    parent.reject()
    node.builds_on_last_accepted()


@pytest.mark.parametrize("name", list(STACKS))
def test_sibling_accepted_and_preferred_rejected(name: str) -> None:
    """The network accepts a sibling of the preferred block; the preferred one is
    rejected; the node builds on the sibling."""
    node = Node(name)
    preferred = node.build()
    sibling = node.build(step=1.0)
    assert sibling.parent_id == preferred.parent_id
    node.vm.set_preference(preferred.id)
    sibling.accept()
    preferred.reject()
    node.builds_on_last_accepted()
