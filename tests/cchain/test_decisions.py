"""The C-chain VM's decisions under a Snowman engine, in the scenarios coreth's own tests
play (described and written anew here): reorg protection, accepting a block that was not
preferred, a preference that sticks, a preference set to a grandchild before its parent,
the mempool following the preferred chain, a rejected block's transactions coming back, a
loser that can never verify, and only accepted blocks indexed by height."""

from __future__ import annotations

import pytest

from tests.cchain.chains import new_vm
from tests.support.transactions import signed_transfer
from vmstack.cchain import CChainVM
from vmstack.cchain.block import CChainBlock
from vmstack.cchain.genesis import BASE_FEE, DEV_KEYS
from vmstack.cchain.types import Transaction
from vmstack.clock import SimClock
from vmstack.errors import BlockNotFound, InvalidBlock
from vmstack.store import MemoryStore

START = 1_700_000_000.0


def _tx(key: int, nonce: int = 0) -> Transaction:
    return signed_transfer(
        nonce, key=key, to=b"\x77" * 20, value=key % 1000 + 1, max_fee_per_gas=2 * BASE_FEE
    )


class Net:
    """Our node and peers over one genesis and one simulated clock."""

    def __init__(self) -> None:
        self.clock = SimClock(START)
        self.vm = new_vm(MemoryStore(), self.clock)

    def peer(self) -> CChainVM:
        return new_vm(MemoryStore(), self.clock)

    def peer_block(self, txs: list[Transaction], parents: list[bytes] | None = None) -> CChainBlock:
        """A block built by a fresh peer carrying ``txs`` over the chain of raw blocks
        ``parents`` (oldest first; default: on genesis), parsed and verified by our node."""
        peer = self.peer()
        for raw in parents or []:
            block = peer.parse_block(raw)
            block.verify()
            peer.set_preference(block.id)
        self.clock.advance(1.0)
        if txs:
            peer.add_transactions(txs)
        built = peer.build_block()
        ours = self.vm.parse_block(bytes(built))
        ours.verify()
        return ours


def test_a_preference_that_would_orphan_the_accepted_block_is_refused() -> None:
    """Two siblings verified; one is accepted; preferring the other would orphan it."""
    net = Net()
    first = net.peer_block([_tx(DEV_KEYS[0])])
    second = net.peer_block([_tx(DEV_KEYS[1])])
    net.vm.set_preference(first.id)
    first.accept()
    with pytest.raises(InvalidBlock, match="cannot orphan finalized block"):
        net.vm.set_preference(second.id)
    # A child of the loser can never be preferred either, and an older accepted block not.
    with pytest.raises(InvalidBlock, match="cannot orphan finalized block"):
        net.vm.set_preference(net.vm.get_block_id_at_height(0))
    with pytest.raises(BlockNotFound):
        net.vm.set_preference(b"\x05" * 32)
    second.reject()


def test_accepting_a_block_that_was_not_preferred_moves_the_build_head_to_it() -> None:
    net = Net()
    preferred = net.peer_block([_tx(DEV_KEYS[0])])
    other = net.peer_block([_tx(DEV_KEYS[1])])
    net.vm.set_preference(preferred.id)
    other.accept()
    built = net.vm.build_block()
    assert built.parent_id == other.id
    built.verify()
    preferred.reject()


def test_a_preference_sticks_to_a_descendant_of_the_accepted_block() -> None:
    """Branches A1-A2 and B1-B2; B2 preferred; accepting B1 keeps building on B2."""
    net = Net()
    a1 = net.peer_block([_tx(DEV_KEYS[0])])
    b1 = net.peer_block([_tx(DEV_KEYS[1])])
    a2 = net.peer_block([_tx(DEV_KEYS[2])], [bytes(a1)])
    b2 = net.peer_block([_tx(DEV_KEYS[3])], [bytes(b1)])
    net.vm.set_preference(b2.id)
    b1.accept()
    a1.reject()
    a2.reject()
    assert net.vm.build_block().parent_id == b2.id
    b2.accept()
    assert net.vm.last_accepted() == b2.id
    assert net.vm.build_block().parent_id == b2.id


def test_a_preference_set_to_a_grandchild_before_its_parent() -> None:
    net = Net()
    child = net.peer_block([_tx(DEV_KEYS[0])])
    grandchild = net.peer_block([_tx(DEV_KEYS[1])], [bytes(child)])
    net.vm.set_preference(grandchild.id)
    assert net.vm.build_block().parent_id == grandchild.id
    net.vm.set_preference(child.id)
    assert net.vm.build_block().parent_id == child.id
    net.vm.set_preference(grandchild.id)
    child.accept()
    grandchild.accept()
    assert net.vm.build_block().parent_id == grandchild.id


def test_switching_to_another_branch_puts_back_the_abandoned_branch_s_transactions() -> None:
    """A peer's block carries T; preferring it, then its sibling (which lacks T), puts T
    back: the next block built on the sibling carries it."""
    net = Net()
    held = _tx(DEV_KEYS[0])
    first = net.peer_block([held])
    second = net.peer_block([_tx(DEV_KEYS[1])])
    net.vm.set_preference(first.id)
    assert held not in net.vm.pending()
    net.vm.set_preference(second.id)
    assert held in net.vm.pending()
    built = net.vm.build_block()
    assert built.parent_id == second.id and held in built.transactions
    built.verify()


def test_the_pool_reads_nonces_from_the_preferred_head() -> None:
    """A pooled transaction the preferred block holds is no longer pending; back on the
    branch that lacks it, it is."""
    net = Net()
    mine = _tx(DEV_KEYS[0])
    net.vm.add_transactions([mine])
    block = net.peer_block([mine])
    assert net.vm.pending() == [mine]
    net.vm.set_preference(block.id)
    assert net.vm.pending() == []
    net.vm.set_preference(net.vm.last_accepted())
    assert net.vm.pending() == [mine]


def test_a_rejected_peer_block_s_transactions_return_to_the_pool() -> None:
    net = Net()
    carried = _tx(DEV_KEYS[0])
    winner_tx = _tx(DEV_KEYS[1])
    loser = net.peer_block([carried, winner_tx])
    winner = net.peer_block([winner_tx])
    net.vm.set_preference(winner.id)
    winner.accept()
    loser.reject()
    # The accepted chain holds winner_tx: only the other comes back.
    assert net.vm.pending() == [carried]


def test_a_loser_below_the_last_accepted_height_never_verifies() -> None:
    """B2 builds on B1, the sibling of accepted A1, and is verified only after A2 is
    accepted: its height is the last accepted's and it is not accepted."""
    net = Net()
    a1 = net.peer_block([_tx(DEV_KEYS[0])])
    b1 = net.peer_block([_tx(DEV_KEYS[1])])
    a2 = net.peer_block([_tx(DEV_KEYS[2])], [bytes(a1)])
    peer = net.peer()
    first = peer.parse_block(bytes(b1))
    first.verify()
    peer.set_preference(first.id)
    b2_bytes = bytes(peer.build_block())
    net.vm.set_preference(a2.id)
    a1.accept()
    a2.accept()
    with pytest.raises(InvalidBlock, match="is not accepted and the last accepted"):
        net.vm.parse_block(b2_bytes).verify()


def test_accept_needs_the_last_accepted_block_as_parent_and_only_accepted_are_indexed() -> None:
    net = Net()
    child = net.peer_block([_tx(DEV_KEYS[0])])
    grandchild = net.peer_block([_tx(DEV_KEYS[1])], [bytes(child)])
    with pytest.raises(InvalidBlock, match="its parent is not the last accepted block"):
        grandchild.accept()
    with pytest.raises(BlockNotFound):
        net.vm.get_block_id_at_height(1)
    child.accept()
    assert net.vm.get_block_id_at_height(1) == child.id
    with pytest.raises(BlockNotFound):
        net.vm.get_block_id_at_height(2)
