"""Transactions waiting in the pre VM's mempool at the transition move to the post VM's."""

from __future__ import annotations

import pytest

from vmstack import SimClock, build_stack, find_layer, submit_transactions
from vmstack.cchain import CChainVM, keccak256
from vmstack.cchain.generate import transaction_pool
from vmstack.interfaces import ChainVM
from vmstack.store import MemoryStore
from vmstack.transition import TransitionVM

START = 1_000.0
TRANSITION_TIME = START + 10
QUEUED = 3_000


def _build_one(vm: ChainVM, clock: SimClock) -> list[bytes]:
    """Build, verify, prefer and accept one block; the hashes of its transactions."""
    clock.advance(2.0)
    block = vm.build_block()
    block.verify()
    vm.set_preference(block.id)
    block.accept()
    bottom = find_layer(vm, TransitionVM).post
    assert isinstance(bottom, CChainVM)
    return [keccak256(tx.encode()) for tx in bottom.get_block(block.id).transactions]


@pytest.mark.slow
def test_thousands_queued_before_the_transition_are_all_included_in_order() -> None:
    """Nothing submitted before the transition is dropped by it: every transaction ends up
    in exactly one block, each sender's in nonce order."""
    clock = SimClock(START)
    vm = build_stack(MemoryStore(), transition_time=TRANSITION_TIME, clock=clock)
    transactions = transaction_pool(seed=5, chain_id=43114, size=QUEUED).transactions
    assert submit_transactions(vm, transactions) == QUEUED
    transition = find_layer(vm, TransitionVM)
    pre_pool, post_pool = (find_layer(side, CChainVM) for side in (transition.pre, transition.post))
    included: list[bytes] = []
    while not transition.transitioned:
        included += _build_one(vm, clock)
    assert pre_pool.pending_transactions() == 0
    assert post_pool.pending_transactions() == QUEUED - len(included)
    assert 0 < len(included) < QUEUED
    while post_pool.pending_transactions():
        included += _build_one(vm, clock)
    assert sorted(included) == sorted(keccak256(tx.encode()) for tx in transactions)
    position = {keccak256(tx.encode()): index for index, tx in enumerate(transactions)}
    by_sender: dict[bytes, list[int]] = {}
    for tx_hash in included:
        tx = transactions[position[tx_hash]]
        by_sender.setdefault(tx.sender(), []).append(tx.nonce)
    assert all(nonces == sorted(nonces) for nonces in by_sender.values())


def test_submit_transactions_refuses_what_no_block_can_hold() -> None:
    """A transaction of another chain is refused, naming why, and nothing is queued."""
    vm = build_stack(MemoryStore(), clock=SimClock(START))
    good = transaction_pool(seed=5, chain_id=43114, size=3).transactions
    other_chain = transaction_pool(seed=5, chain_id=1, size=4).transactions[-1]
    with pytest.raises(ValueError, match="chain"):
        submit_transactions(vm, [*good, other_chain])
    assert find_layer(vm, CChainVM).pending_transactions() == 0
