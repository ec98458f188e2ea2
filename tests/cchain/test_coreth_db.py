"""A coreth database, laid out with the rawdb helpers from the 22 real C-chain fixture blocks,
is served as it is; the same blocks parse, verify and accept in order on a fresh VM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cchain.chains import (
    FIXTURE_CHAIN_ID,
    STORE_KINDS,
    fixture_blocks,
    new_vm,
    open_store,
    write_coreth_store,
)
from tests.conftest import load_vectors
from vmstack.batching import MAX_CONTAINERS_LEN, serial_get_ancestors
from vmstack.cchain import AVALANCHE, BlockStatus, CChainVM, keccak256, rawdb
from vmstack.cchain.integrity import Integrity, checksum, decode_integrity, encode_integrity
from vmstack.errors import StoreCorrupted
from vmstack.store import KeyValueStore, LMDBStore, MemoryStore

CORETH = rawdb.Schema(rawdb.CORETH_KEY_PREFIX)


@pytest.fixture(params=STORE_KINDS)
def coreth_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyValueStore]:
    """A MemoryStore or LMDBStore holding the fixture chain in coreth's layout."""
    with open_store(request.param, tmp_path) as store:
        write_coreth_store(store, fixture_blocks())
        yield store


def _open(store: KeyValueStore) -> CChainVM:
    return new_vm(store, key_prefix=rawdb.CORETH_KEY_PREFIX, chain_id=FIXTURE_CHAIN_ID)


def test_layout_matches_the_fixture_database() -> None:
    """Every example key and value of the fixture database is what the helpers wrote."""
    store = MemoryStore()
    write_coreth_store(store, fixture_blocks())
    layout = load_vectors("cchain_blocks.json")["db_layout_examples"]
    checked = 0
    for example in layout["examples"]:
        entries = example.get("entries", [example])
        for entry in entries:
            key = bytes.fromhex(entry["key"][2:])
            assert store.get(key) == bytes.fromhex(entry["value"][2:]), entry["what"]
            checked += 1
    assert checked >= 18


def test_coreth_store_is_served_byte_for_byte(coreth_store: KeyValueStore) -> None:
    """get_ancestors from the head returns the 22 blocks, newest first, exactly; so do
    get_block and the fallback walk."""
    blocks = fixture_blocks()
    vm = _open(coreth_store)
    tip = vm.last_accepted()
    assert tip == keccak256(AVALANCHE.decode_block(blocks[-1]).header.encode())
    answer = vm.get_ancestors(tip, 100, MAX_CONTAINERS_LEN, 60.0)
    assert answer == blocks[::-1]
    assert serial_get_ancestors(vm, tip, max_retrieval_time=60.0) == answer
    for height, data in enumerate(blocks):
        block_id = vm.get_block_id_at_height(height)
        restored = vm.get_block(block_id)
        assert bytes(restored) == data
        assert restored.receipts is not None
    assert rawdb.read_integrity_start(coreth_store, CORETH) is None


def test_fixture_blocks_parse_verify_and_accept_in_order() -> None:
    """On a fresh VM whose genesis is the fixture's block 0, blocks 1..21 are accepted one by
    one, and the VM then serves them as the coreth store does (a replaying VM: a real EVM
    executed these blocks, so their receipts and gas limits are taken as given)."""
    blocks = fixture_blocks()
    vm = new_vm(MemoryStore(), genesis=blocks[0], chain_id=FIXTURE_CHAIN_ID, replay=True)
    for data in blocks[1:]:
        block = vm.parse_block(data)
        block.verify()
        block.accept()
        assert block.status is BlockStatus.ACCEPTED
    tip = vm.last_accepted()
    assert vm.get_ancestors(tip, 100, MAX_CONTAINERS_LEN, 60.0) == blocks[::-1]


def test_fixture_blocks_batched_parse_then_accept() -> None:
    """batched_parse_block of all 21 blocks, then verify and accept in order."""
    blocks = fixture_blocks()
    vm = new_vm(MemoryStore(), genesis=blocks[0], chain_id=FIXTURE_CHAIN_ID, replay=True)
    parsed = vm.batched_parse_block(blocks[1:])
    assert [block.height for block in parsed] == list(range(1, 22))
    for block in parsed:
        block.verify()
        block.accept()
    assert vm.get_block_id_at_height(21) == parsed[-1].id


def test_new_blocks_on_a_coreth_store_get_integrity_entries(coreth_store: KeyValueStore) -> None:
    """A block accepted on top of the coreth chain is the first with an integrity entry;
    both paths still serve the whole chain."""
    vm = _open(coreth_store)
    block = vm.build_block()
    block.verify()
    block.accept()
    assert rawdb.read_integrity_start(coreth_store, CORETH) == 22
    assert rawdb.read_integrity(coreth_store, CORETH, 22, block.id) is not None
    answer = vm.get_ancestors(block.id, 100, MAX_CONTAINERS_LEN, 60.0)
    assert answer[1:] == fixture_blocks()[::-1]
    assert answer == serial_get_ancestors(vm, block.id, max_retrieval_time=60.0)


def test_foreign_header_that_does_not_hash_to_its_key_is_corruption(
    coreth_store: KeyValueStore,
) -> None:
    """Without integrity entries, the slow path still checks the header hash."""
    vm = _open(coreth_store)
    block_id = vm.get_block_id_at_height(9)
    key = CORETH.header_key(9, block_id)
    value = bytearray(coreth_store.get(key))
    value[-3] ^= 0x01
    coreth_store.put(key, bytes(value))
    with pytest.raises(StoreCorrupted):
        vm.get_block(block_id)


def test_lmdb_coreth_store_reopens(tmp_path: Path) -> None:
    """The coreth layout on LMDB, closed and reopened, serves the same chain."""
    blocks = fixture_blocks()
    with LMDBStore(tmp_path / "db") as store:
        write_coreth_store(store, blocks)
    with LMDBStore(tmp_path / "db") as store:
        vm = _open(store)
        assert vm.get_ancestors(vm.last_accepted(), 100, MAX_CONTAINERS_LEN, 60.0) == blocks[::-1]


# --- the schema's integrity entries --------------------------------------------------------


def test_integrity_entries_round_trip_and_check_their_length() -> None:
    """encode/decode_integrity round-trip; a wrong length is corruption."""
    assert decode_integrity(encode_integrity(7)) == Integrity(7)
    assert decode_integrity(encode_integrity(2**32 - 1, 5)) == Integrity(2**32 - 1, 5)
    for bad in (b"", b"\x00" * 3, b"\x00" * 5, b"\x00" * 9):
        with pytest.raises(StoreCorrupted):
            decode_integrity(bad)
    key, other = (rawdb.Schema().integrity_key(1, bytes([n]) * 32) for n in (1, 2))
    assert checksum(key, b"block") == checksum(key, memoryview(b"block"))
    assert checksum(key, b"block") != checksum(other, b"block")


def test_integrity_keys_are_built_and_parsed_by_the_schema() -> None:
    """The integrity keys parse back; block_data_keys equals the checked builders."""
    block_hash = bytes(range(32))
    for schema in (rawdb.Schema(), CORETH):
        key = schema.integrity_key(5, block_hash)
        assert schema.parse_key(key) == rawdb.ParsedKey(rawdb.KeyKind.INTEGRITY, 5, block_hash)
        assert schema.parse_key(schema.integrity_start_key()) == rawdb.ParsedKey(
            rawdb.KeyKind.INTEGRITY_START
        )
        assert schema.block_data_keys(5, block_hash) == (
            schema.header_key(5, block_hash),
            schema.body_key(5, block_hash),
            key,
        )


def test_delete_block_removes_the_integrity_entry() -> None:
    """delete_block takes the integrity entry with the block's other keys."""
    store = MemoryStore()
    block_hash = bytes(range(32))
    rawdb.write_block(store, CORETH, 3, block_hash, b"\xc0", b"\xc0")
    rawdb.write_integrity(store, CORETH, 3, block_hash, 1, 2)
    rawdb.write_integrity_start(store, CORETH, 3)
    assert rawdb.read_integrity(store, CORETH, 3, block_hash) == Integrity(1, 2)
    rawdb.delete_block(store, CORETH, 3, block_hash)
    assert rawdb.read_integrity(store, CORETH, 3, block_hash) is None
    assert rawdb.read_integrity_start(store, CORETH) == 3
