"""CChainVM's lifecycle: genesis, mempool and building, verify rules, accept, reject,
preference, heights, settling, the canonical hash cache, and two VMs over one store."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import pytest

from tests.cchain.chains import START, build_chain, new_vm, tampered
from tests.support.transactions import signed_transfer
from vmstack.batching import serial_get_ancestors
from vmstack.cchain import (
    AVALANCHE,
    ETHEREUM,
    BlockStatus,
    CChainBlock,
    CChainVM,
    DynamicFeeTx,
    LegacyTx,
    Withdrawal,
    execute_transactions,
    genesis_block,
    keccak256,
    rawdb,
    receipts_root,
    transaction_pool,
)
from vmstack.cchain.genesis import BASE_FEE, DEV_KEYS, GAS_LIMIT, Genesis, default_genesis
from vmstack.cchain.integrity import checksum
from vmstack.cchain.rules import MAX_FUTURE_SECONDS
from vmstack.clock import SimClock
from vmstack.errors import BlockNotFound, InvalidBlock
from vmstack.interfaces import BatchedChainVM, ChainVM
from vmstack.layers import supports_batching
from vmstack.store import MemoryStore, ReadSnapshot, WriteBatch
from vmstack.store.base import BytesLike

KEY = DEV_KEYS[0]
TO = keccak256(b"test recipient")[12:]


def _tx(nonce: int, *, gas: int = 21_000, data: bytes = b"", chain_id: int = 43114) -> DynamicFeeTx:
    return signed_transfer(
        nonce, key=KEY, to=TO, gas=gas, data=data, chain_id=chain_id, max_priority_fee_per_gas=1
    )


class CountingStore:
    """A MemoryStore that counts write batches and single writes."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.batches = 0
        self.single_writes = 0

    def get(self, key: bytes) -> bytes:
        return self.inner.get(key)

    def has(self, key: bytes) -> bool:
        return self.inner.has(key)

    def put(self, key: bytes, value: BytesLike) -> None:
        self.single_writes += 1
        self.inner.put(key, value)

    def delete(self, key: bytes) -> None:
        self.single_writes += 1
        self.inner.delete(key)

    def write_batch(self) -> WriteBatch:
        self.batches += 1
        return self.inner.write_batch()

    def iterate(self, prefix: bytes = b"", *, start: bytes | None = None):
        return self.inner.iterate(prefix, start=start)

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        return self.inner.snapshot()

    def close(self) -> None:
        self.inner.close()


def _accept_chain(vm: CChainVM, count: int) -> list[bytes]:
    return build_chain(vm, count, txs=2)


# --- genesis -----------------------------------------------------------------------------


def test_genesis_is_deterministic_from_flavour_allocation_and_timestamp() -> None:
    """Two empty stores get the same genesis; another allocation or timestamp another one."""
    first = CChainVM(MemoryStore()).last_accepted()
    assert CChainVM(MemoryStore()).last_accepted() == first
    assert CChainVM(MemoryStore(), genesis=Genesis({TO: 1})).last_accepted() != first
    assert CChainVM(MemoryStore(), genesis_timestamp=5).last_accepted() != first
    assert CChainVM(MemoryStore(), flavour=ETHEREUM).last_accepted() != first
    assert first == genesis_block(AVALANCHE, chain_id=43114).hash


def test_genesis_is_written_once_and_settled() -> None:
    """The genesis batch writes the block, its (empty) receipts and every head pointer."""
    store = MemoryStore()
    vm = CChainVM(store)
    genesis = vm.last_accepted()
    assert vm.get_block_id_at_height(0) == genesis
    assert vm.last_settled() == genesis
    block = vm.get_block(genesis)
    assert (block.height, block.status, block.receipts) == (0, BlockStatus.ACCEPTED, ())
    schema = vm.schema
    assert rawdb.read_head_header_hash(store, schema) == genesis
    assert rawdb.read_integrity_start(store, schema) == 0
    keys = len(store)
    CChainVM(store)
    assert len(store) == keys


def test_a_store_with_a_chain_keeps_it() -> None:
    """A VM opened over a store with a chain keeps that chain; a different genesis is refused."""
    store = MemoryStore()
    vm = new_vm(store)
    ids = _accept_chain(vm, 3)
    again = new_vm(store, genesis_timestamp=99)
    assert again.last_accepted() == ids[-1]
    other = AVALANCHE.encode_block(
        genesis_block(AVALANCHE, chain_id=43114, genesis=default_genesis(timestamp=1))
    )
    with pytest.raises(ValueError):
        CChainVM(store, genesis=other)


def test_constructor_rejects_bad_arguments() -> None:
    """Bad chain id, settle lag, cache size or flavour are ValueErrors."""
    for options in (
        {"chain_id": 0},
        {"settle_lag": -1},
        {"cache_size": 0},
        {"flavour": "avalanche"},
        {"genesis_timestamp": -1},
    ):
        with pytest.raises(ValueError):
            CChainVM(MemoryStore(), **options)


def test_the_vm_is_a_batched_bottom_vm() -> None:
    """It speaks both protocols, batches, and has no inner VM."""
    vm = CChainVM(MemoryStore())
    assert isinstance(vm, ChainVM) and isinstance(vm, BatchedChainVM)
    assert supports_batching(vm)
    assert not hasattr(vm, "inner")


# --- building ----------------------------------------------------------------------------


def test_build_takes_mempool_transactions_within_the_gas_limit() -> None:
    """Transactions are taken in nonce order until the next would pass the gas limit; the
    rest stay pending, and so do the built ones until a block with them is accepted."""
    vm = new_vm(MemoryStore())
    big = GAS_LIMIT // 3 + 1
    vm.add_transactions([_tx(i, gas=big) for i in range(4)])
    block = vm.build_block()
    assert [tx.nonce for tx in block.transactions] == [0, 1]
    assert vm.pending_transactions() == 4
    block.verify()
    block.accept()
    assert vm.pending_transactions() == 2
    assert block.header.gas_used <= GAS_LIMIT
    assert block.header.gas_used == execute_transactions(block.transactions)[-1].cumulative_gas_used


def test_built_block_commits_to_its_body_and_receipts() -> None:
    """Roots, bloom and ExtDataHash of a built block are those of its body and receipts."""
    vm = new_vm(MemoryStore())
    vm.add_transactions(transaction_pool(seed=1, chain_id=43114).transactions[:8])
    vm.add_ext_data(b"atomic" * 60)
    block = vm.build_block()
    receipts = execute_transactions(block.transactions)
    sealed = AVALANCHE.seal(block.header, block.body, receipts)
    assert sealed.header == block.header
    assert block.header.receipt_root == receipts_root(receipts)
    assert block.body.ext_data == b"atomic" * 60
    assert block.status is BlockStatus.UNVERIFIED
    block.verify()
    assert vm.processing() == (block,)


def test_build_timestamp_is_the_clock_but_never_before_the_parent() -> None:
    """A clock behind the parent gives the parent's timestamp."""
    clock = SimClock(START)
    vm = new_vm(MemoryStore(), clock)
    first = vm.build_block()
    assert first.timestamp == int(START)
    first.verify()
    first.accept()
    slow = new_vm(vm.store, SimClock(START - 100))
    assert slow.build_block().timestamp == int(START)


def test_mempool_refuses_foreign_or_oversized_transactions() -> None:
    """Another chain's transaction, one above the block gas limit, or a non-transaction."""
    vm = new_vm(MemoryStore())
    with pytest.raises(ValueError):
        vm.add_transactions([_tx(0, chain_id=1)])
    with pytest.raises(ValueError):
        vm.add_transactions([_tx(0, gas=GAS_LIMIT + 1)])
    with pytest.raises(ValueError):
        vm.add_transactions([b"not a transaction"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        vm.add_withdrawals([])
    with pytest.raises(ValueError):
        new_vm(MemoryStore(), flavour=ETHEREUM).add_ext_data(b"x")
    assert vm.pending_transactions() == 0


def test_unprotected_legacy_transactions_are_accepted() -> None:
    """A pre-EIP-155 legacy transaction names no chain and may enter any mempool."""
    vm = new_vm(MemoryStore())
    vm.add_transactions([LegacyTx(nonce=0, gas_price=BASE_FEE, gas=21_000, to=TO).sign(KEY)])
    assert vm.pending_transactions() == 1


def test_set_preference_builds_on_a_processing_block() -> None:
    """A preferred processing block is the next block's parent; unknown IDs are refused."""
    vm = new_vm(MemoryStore())
    parent = vm.build_block()
    parent.verify()
    vm.set_preference(parent.id)
    child = vm.build_block()
    assert (child.parent_id, child.height) == (parent.id, 2)
    child.verify()
    with pytest.raises(BlockNotFound):
        vm.set_preference(bytes(32))
    with pytest.raises(ValueError):
        vm.set_preference(b"short")


def test_ethereum_flavour_builds_blocks_with_withdrawals() -> None:
    """An Ethereum VM builds Shanghai blocks carrying queued withdrawals."""
    vm = new_vm(MemoryStore(), flavour=ETHEREUM)
    withdrawals = [Withdrawal(index=1, validator_index=2, address=TO, amount=3)]
    vm.add_withdrawals(withdrawals)
    block = vm.build_block()
    assert block.body.withdrawals == tuple(withdrawals)
    block.verify()
    block.accept()
    assert vm.build_block().body.withdrawals == ()


# --- verify rules ------------------------------------------------------------------------


def _candidate(vm: CChainVM) -> CChainBlock:
    """A built, unverified block with two transactions on an accepted parent at START."""
    parent = vm.build_block()
    parent.verify()
    parent.accept()
    vm.add_transactions([_tx(0), _tx(1, data=b"\xa9\x05\x9c\xbb" + bytes(64), gas=100_000)])
    return vm.build_block()


@pytest.mark.parametrize(
    "changes",
    [
        {"number": 5},
        {"number": 1},
        {"time": int(START) - 1},
        {"time": int(START) + MAX_FUTURE_SECONDS + 1},
        {"gas_used": GAS_LIMIT + 1},
        {"tx_root": bytes(32)},
        {"uncle_hash": bytes(32)},
        {"ext_data_hash": keccak256(b"other")},
        {"parent_hash": keccak256(b"unknown parent")},
    ],
)
def test_verify_refuses_a_block_that_breaks_a_rule(changes: dict[str, Any]) -> None:
    """Height, timestamps, gas, commitments and a known parent are each checked."""
    vm = new_vm(MemoryStore())
    block = _candidate(vm)
    bad = vm.parse_block(tampered(vm, block, **changes))
    with pytest.raises(InvalidBlock):
        bad.verify()
    assert bad.status is BlockStatus.UNVERIFIED
    assert vm.processing() == ()


def test_verify_refuses_a_tampered_body_with_the_same_id() -> None:
    """Changed transaction bytes keep the header (and ID) but fail the transactions root."""
    vm = new_vm(MemoryStore())
    block = _candidate(vm)
    raw = bytearray(bytes(block))
    raw[-40] ^= 0x01
    bad = vm.parse_block(bytes(raw))
    assert bad.id == block.id
    with pytest.raises(InvalidBlock):
        bad.verify()


def test_verify_refuses_a_child_of_an_older_accepted_block() -> None:
    """A block whose parent is accepted but not the last accepted conflicts with the chain."""
    vm = new_vm(MemoryStore())
    ids = _accept_chain(vm, 2)
    sibling = vm.parse_block(tampered(vm, vm.get_block(ids[1]), extra=b"sibling"))
    with pytest.raises(InvalidBlock):
        sibling.verify()


def test_verify_is_idempotent_and_accepted_copies_verify_as_accepted() -> None:
    """Verifying twice is fine; the bytes of an accepted block parse to an accepted block."""
    vm = new_vm(MemoryStore())
    ids = _accept_chain(vm, 2)
    copy = vm.parse_block(bytes(vm.get_block(ids[0])))
    copy.verify()
    assert copy.status is BlockStatus.ACCEPTED
    copy.accept()
    assert vm.last_accepted() == ids[-1]


def test_parse_of_a_processing_block_returns_that_block() -> None:
    """Parsing the bytes of a processing block gives the very same object."""
    vm = new_vm(MemoryStore())
    block = vm.build_block()
    block.verify()
    assert vm.parse_block(bytes(block)) is block
    assert vm.batched_parse_block([bytes(block)])[0] is block


# --- accept and reject -------------------------------------------------------------------


def test_accept_is_one_atomic_batch() -> None:
    """Each accept makes exactly one write batch and no single writes."""
    store = CountingStore()
    vm = new_vm(store)
    batches, single_writes = store.batches, store.single_writes
    for _ in range(3):
        block = vm.build_block()
        block.verify()
        block.accept()
    assert store.batches == batches + 3
    assert store.single_writes == single_writes


def test_accept_needs_verify_and_a_parent_that_is_last_accepted() -> None:
    """Accepting an unverified block, or a second child of one parent, is refused."""
    vm = new_vm(MemoryStore())
    first = vm.build_block()
    with pytest.raises(InvalidBlock):
        first.accept()
    first.verify()
    vm.add_transactions([_tx(0)])
    second = vm.build_block()
    second.verify()
    first.accept()
    with pytest.raises(InvalidBlock):
        second.accept()
    second.reject()
    assert vm.get_block_id_at_height(1) == first.id


def test_reject_drops_a_block_and_returns_its_transactions() -> None:
    """A rejected block is served by neither path and its transactions go back."""
    vm = new_vm(MemoryStore())
    vm.add_transactions([_tx(0), _tx(1)])
    block = vm.build_block()
    block.verify()
    assert vm.get_ancestors(block.id, 10, 10**6, 1.0)[0] == bytes(block)
    block.reject()
    assert block.status is BlockStatus.REJECTED
    with pytest.raises(BlockNotFound):
        vm.get_block(block.id)
    assert vm.get_ancestors(block.id, 10, 10**6, 1.0) == []
    assert serial_get_ancestors(vm, block.id) == []
    assert vm.pending_transactions() == 2
    with pytest.raises(InvalidBlock):
        block.verify()


def test_an_accepted_block_cannot_be_rejected() -> None:
    """reject() on an accepted block raises and changes nothing."""
    vm = new_vm(MemoryStore())
    block = vm.build_block()
    block.verify()
    block.accept()
    with pytest.raises(InvalidBlock):
        block.reject()
    assert vm.last_accepted() == block.id


def test_heights_are_served_for_accepted_blocks_only() -> None:
    """get_block_id_at_height answers accepted heights; above, BlockNotFound; bad, ValueError."""
    vm = new_vm(MemoryStore())
    ids = _accept_chain(vm, 3)
    assert [vm.get_block_id_at_height(h) for h in (1, 2, 3)] == ids
    processing = vm.build_block()
    processing.verify()
    with pytest.raises(BlockNotFound):
        vm.get_block_id_at_height(4)
    with pytest.raises(BlockNotFound):
        vm.get_block_id_at_height(2**70)
    for bad in (-1, "1", True):
        with pytest.raises(ValueError):
            vm.get_block_id_at_height(bad)  # type: ignore[arg-type]


# --- two VMs over one store --------------------------------------------------------------


def test_two_vms_over_one_store_see_each_others_blocks() -> None:
    """Blocks accepted by one instance are served, preferred and built on by the other."""
    store = MemoryStore()
    clock = SimClock(START)
    first = new_vm(store, clock)
    second = new_vm(store, clock)
    ids = build_chain(first, 3)
    assert second.last_accepted() == ids[-1]
    assert bytes(second.get_block(ids[1])) == bytes(first.get_block(ids[1]))
    more = build_chain(second, 2)
    assert first.last_accepted() == more[-1]
    assert first.get_ancestors(more[-1], 100, 10**7, 1.0) == second.get_ancestors(
        more[-1], 100, 10**7, 1.0
    )
    assert first.get_block_id_at_height(5) == more[-1]


# --- settling and the canonical hash cache -----------------------------------------------


def test_receipts_are_written_settle_lag_blocks_later() -> None:
    """With settle_lag=2, block h is settled when h+2 is accepted; get_block restores
    receipts of settled blocks only."""
    store = MemoryStore()
    vm = new_vm(store, settle_lag=2)
    ids = build_chain(vm, 5)
    schema = vm.schema
    assert vm.last_settled() == ids[2]
    for height, block_id in enumerate(ids, start=1):
        stored = rawdb.read_receipts_rlp(store, schema, height, block_id)
        assert (stored is not None) == (height <= 3)
        receipts = vm.get_block(block_id).receipts
        assert (receipts is not None) == (height <= 3)
    assert vm.cache.settled_height == 3


def test_restored_receipts_have_their_derived_fields() -> None:
    """A settled block's receipts come back with hashes, indices and gas used filled in."""
    vm = new_vm(MemoryStore())
    ids = build_chain(vm, 2, txs=6)
    block = vm.get_block(ids[-1])
    assert block.receipts is not None and block.senders is not None
    assert [r.tx_hash for r in block.receipts] == [tx.hash for tx in block.transactions]
    assert [r.transaction_index for r in block.receipts] == list(range(6))
    assert sum(r.gas_used or 0 for r in block.receipts) == block.header.gas_used
    assert all(len(sender) == 20 for sender in block.senders)


def test_the_cache_is_never_filled_for_an_unsettled_height() -> None:
    """Unsettled heights are read from the store every time: a reorg there shows at once,
    while settled heights are cache hits."""
    store = MemoryStore()
    vm = new_vm(store, settle_lag=3)
    ids = build_chain(vm, 8)
    tip = ids[-1]
    vm.get_ancestors(tip, 100, 10**7, 1.0)
    settled = vm.cache.settled_height
    assert settled == 5
    assert all(height <= settled for height in range(9) if height in vm.cache)
    assert 7 not in vm.cache
    hits = vm.cache.hits
    assert vm.get_block_id_at_height(4) == ids[3]
    assert vm.cache.hits == hits + 1
    # Reorg height 7: another block becomes canonical there.
    sibling = vm.parse_block(tampered(vm, vm.get_block(ids[6]), extra=b"reorg"))
    schema = vm.schema
    with store.write_batch() as batch:
        rawdb.write_block(batch, schema, 7, sibling.id, sibling.header_rlp(), sibling.body_rlp())
        rawdb.write_integrity(
            batch,
            schema,
            7,
            sibling.id,
            checksum(schema.integrity_key(7, sibling.id), bytes(sibling)),
        )
        rawdb.write_canonical_hash(batch, schema, 7, sibling.id)
    assert vm.get_block_id_at_height(7) == sibling.id
    assert 7 not in vm.cache
    assert vm.get_ancestors(sibling.id, 100, 10**7, 1.0)[0] == bytes(sibling)
    answer = vm.get_ancestors(tip, 100, 10**7, 1.0)
    assert answer == serial_get_ancestors(vm, tip, max_blocks_num=100, max_retrieval_time=60.0)
    assert len(answer) == 1
    with pytest.raises(BlockNotFound):
        vm.get_block(ids[6])


def test_a_shorter_settle_lag_after_a_restart_settles_what_was_left() -> None:
    """Reopening with settle_lag=0 writes the receipts left behind in the next accept."""
    store = MemoryStore()
    clock = SimClock(START)
    ids = build_chain(new_vm(store, clock, settle_lag=3), 5)
    vm = new_vm(store, clock, settle_lag=0)
    more = build_chain(vm, 1)
    assert vm.last_settled() == more[0]
    for block_id in ids:
        assert vm.get_block(block_id).receipts is not None
