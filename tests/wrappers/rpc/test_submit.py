"""Transactions submitted to a stack whose C-chain part is served in another process: one
round trip, the served mempool's refusals as InvalidTransaction, the transaction included
in the next block built over the boundary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.transactions import signed_transfer
from vmstack import InvalidTransaction, SimClock, build_stack, submit_transactions
from vmstack.cchain import DEV_KEYS, CChainVM, DynamicFeeTx, address_of
from vmstack.interfaces import find_layer
from vmstack.store import MemoryStore
from vmstack.wrappers.rpc import VMClient, VMServer, spawn

CHAIN_ID = 43114


def transfer(nonce: int, *, key: int | bytes = DEV_KEYS[0], value: int = 10**18) -> DynamicFeeTx:
    """A signed transfer from ``key`` to the zero address at ``nonce``."""
    return signed_transfer(nonce, key=key, value=value, chain_id=CHAIN_ID)


def test_a_stack_over_a_client_submits_with_the_same_refusals() -> None:
    """A transaction crosses once and is queued; a duplicate and a replay are refused with
    their reasons as in process; the next block built over the boundary includes it once."""
    clock = SimClock(1_000.0)
    served = build_stack(MemoryStore(), chain_id=CHAIN_ID, clock=clock)
    served_vm = find_layer(served, CChainVM)
    sender = address_of(DEV_KEYS[0])
    with VMServer(served, clock=clock) as server, VMClient(server.address, clock=clock) as client:
        engine_stack = build_stack(MemoryStore(), out_of_process=client, clock=clock)
        first = transfer(0)
        assert submit_transactions(engine_stack, [first]) == 1
        assert client.round_trips.calls["SubmitTransactions"] == 1
        with pytest.raises(InvalidTransaction, match="duplicate") as duplicate:
            submit_transactions(engine_stack, [first])
        assert "duplicate" in duplicate.value.reason
        with pytest.raises(InvalidTransaction):
            submit_transactions(engine_stack, [transfer(0, value=2)])  # nonce 0 is taken
        clock.advance(2.0)
        block = engine_stack.build_block()
        block.verify()
        block.accept()
        assert served_vm.account(sender).nonce == 1
        with pytest.raises(InvalidTransaction, match="replay"):
            submit_transactions(engine_stack, [first])


@pytest.mark.slow
def test_a_spawned_child_takes_transactions(tmp_path: Path) -> None:
    """Over a real process boundary too: the child's mempool queues the transaction and
    refuses what no block could carry (a transaction signed for another chain)."""
    with spawn(tmp_path / "store", chain_id=CHAIN_ID) as client:
        stack = build_stack(MemoryStore(), out_of_process=client)
        assert submit_transactions(stack, [transfer(0)]) == 1
        other_chain = DynamicFeeTx(
            chain_id=1, nonce=1, max_fee_per_gas=50 * 10**9, gas=21_000, to=bytes(20), value=1
        ).sign(DEV_KEYS[1])
        with pytest.raises(InvalidTransaction):
            submit_transactions(stack, [other_chain])
