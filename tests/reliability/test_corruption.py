"""Corruption: a store with one damaged value (a flipped byte, a truncation) or one missing
key yields ``StoreCorrupted`` or ``BlockNotFound``, never wrong bytes served as a block — on
``get_block``, on ``get_ancestors`` (the first block raises; mid-walk the answer stops
before the damaged block), on the serial walk, and through the full stack."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from tests.reliability.stacks import (
    START,
    bare_vm,
    chain_of,
    full_stack,
    grow,
    store_items,
)
from vmstack import BlockNotFound, SimClock, StoreCorrupted, get_ancestors
from vmstack.batching import serial_get_ancestors
from vmstack.cchain import rawdb
from vmstack.interfaces import ChainVM
from vmstack.store import KeyValueStore, LMDBStore, MemoryStore

SCHEMA = rawdb.Schema(b"")
TARGET = 4
"""The height whose stored values are damaged (mid-chain, so walks reach it from above)."""


@attrs.frozen
class Chain:
    """A pristine chain: its store's items, block IDs by height, and the true answer of
    ``get_ancestors`` from the head (every block, newest first)."""

    items: dict[bytes, bytes]
    ids: list[bytes]
    truth: list[bytes]


def build_chain(factory: Callable[[KeyValueStore, SimClock], ChainVM], blocks: int) -> Chain:
    store, clock = MemoryStore(), SimClock(START)
    vm = factory(store, clock)
    ids = [vm.get_block_id_at_height(0), *grow(vm, clock, blocks)]
    truth = get_ancestors(vm, ids[-1], max_blocks_num=10_000, max_retrieval_time=60.0)
    assert truth == chain_of(vm, ids[-1])
    return Chain(store_items(store), ids, truth)


@pytest.fixture(scope="module")
def bare_chain() -> Chain:
    return build_chain(bare_vm, 8)


def reopen(items: dict[bytes, bytes], store: KeyValueStore | None = None) -> KeyValueStore:
    """A store holding ``items`` (a fresh MemoryStore unless ``store`` is given)."""
    store = MemoryStore() if store is None else store
    with store.write_batch() as batch:
        for key, value in items.items():
            batch.put(key, value)
    return store


def block_hash_at(chain: Chain, height: int) -> bytes:
    """The C-chain block hash at ``height`` (the canonical entry, whatever the top layer)."""
    return chain.items[SCHEMA.canonical_hash_key(height)]


KEYS: dict[str, Callable[[int, bytes], bytes]] = {
    "header": SCHEMA.header_key,
    "body": SCHEMA.body_key,
    "receipts": SCHEMA.receipts_key,
    "canonical": lambda number, _: SCHEMA.canonical_hash_key(number),
    "integrity": SCHEMA.integrity_key,
    "number": lambda _, block_hash: SCHEMA.header_number_key(block_hash),
}


def damage_positions(value: bytes) -> list[int]:
    """Byte positions to flip: the framing, the first field, the middle, the last byte."""
    return sorted({0, 1, min(5, len(value) - 1), len(value) // 2, len(value) - 1})


def flipped(value: bytes, position: int) -> bytes:
    return value[:position] + bytes((value[position] ^ 0x5A,)) + value[position + 1:]


def is_prefix(answer: list[bytes], truth: list[bytes]) -> bool:
    return answer == truth[:len(answer)]


def ancestors(vm: ChainVM, head: bytes) -> list[bytes] | type[StoreCorrupted]:
    """``get_ancestors`` with no practical limits, or ``StoreCorrupted`` if it raised that."""
    try:
        return get_ancestors(vm, head, max_blocks_num=10_000, max_retrieval_time=60.0)
    except StoreCorrupted:
        return StoreCorrupted


def serial(vm: ChainVM, head: bytes) -> list[bytes] | type[StoreCorrupted]:
    """The serial walk with no practical limits, or ``StoreCorrupted`` if it raised that."""
    try:
        return serial_get_ancestors(vm, head, max_blocks_num=10_000, max_retrieval_time=60.0)
    except StoreCorrupted:
        return StoreCorrupted


def check_damaged(vm: ChainVM, chain: Chain, kind: str, target_id: bytes, target: int) -> None:
    """What a VM over a store with one damaged value of ``kind`` at height ``target`` does:
    nothing it serves differs from the truth, and the damage is reported, not hidden."""
    head = chain.ids[-1]
    below = len(chain.ids) - 1 - target
    with pytest.raises((StoreCorrupted, BlockNotFound)) as caught:
        vm.get_block(target_id)
    if kind != "number":
        assert caught.type is StoreCorrupted
    from_target = ancestors(vm, target_id)
    from_head = ancestors(vm, head)
    walked = serial(vm, head)
    assert from_head is not StoreCorrupted and walked is not StoreCorrupted
    assert is_prefix(from_head, chain.truth) and is_prefix(walked, chain.truth)
    assert walked == chain.truth[:below]
    if kind == "receipts":
        assert from_target == chain.truth[below:]
        assert from_head == chain.truth
    elif kind == "number":
        assert from_target in ([], StoreCorrupted, chain.truth[below:])
        assert from_head == chain.truth
    elif kind == "integrity":
        # The entry holds the block's checksum and the receipts'; the fast path reads only
        # the block's, so damage to the receipts' half leaves the (intact) block served.
        assert from_target in (StoreCorrupted, chain.truth[below:])
        assert from_head in (chain.truth[:below], chain.truth)
    else:
        assert from_target is StoreCorrupted
        assert from_head == chain.truth[:below]


@pytest.mark.parametrize("kind", list(KEYS))
def test_a_flipped_byte_is_never_served(bare_chain: Chain, kind: str) -> None:
    """A byte flipped anywhere in a header, body, receipts, canonical, integrity or number
    value is reported (StoreCorrupted; a damaged number entry may just hide the block) and
    never served: walks from above stop before the block, as a prefix of the truth."""
    block_hash = block_hash_at(bare_chain, TARGET)
    key = KEYS[kind](TARGET, block_hash)
    value = bare_chain.items[key]
    for position in damage_positions(value):
        items = dict(bare_chain.items)
        items[key] = flipped(value, position)
        vm = bare_vm(reopen(items), SimClock(START + 100))
        check_damaged(vm, bare_chain, kind, block_hash, TARGET)


@pytest.mark.parametrize("kind", ["header", "body", "receipts", "canonical", "integrity"])
def test_a_truncated_value_is_store_corrupted(bare_chain: Chain, kind: str) -> None:
    """A value cut short by one byte, or to a single byte, is StoreCorrupted, never data."""
    block_hash = block_hash_at(bare_chain, TARGET)
    key = KEYS[kind](TARGET, block_hash)
    value = bare_chain.items[key]
    for cut in (value[:-1], value[:1]):
        items = dict(bare_chain.items)
        items[key] = cut
        vm = bare_vm(reopen(items), SimClock(START + 100))
        check_damaged(vm, bare_chain, kind, block_hash, TARGET)


@pytest.mark.parametrize(("kind", "error"), [("receipts", StoreCorrupted),
                                             ("number", BlockNotFound)])
def test_a_missing_key_the_fast_path_does_not_read(bare_chain: Chain, kind: str,
                                                   error: type[Exception]) -> None:
    """A settled block's missing receipts are damage (StoreCorrupted) and a missing number
    entry makes the block unknown (BlockNotFound) on the slow path; the fast path, which
    reads neither for a parent, still serves the truth."""
    block_hash = block_hash_at(bare_chain, TARGET)
    items = dict(bare_chain.items)
    del items[KEYS[kind](TARGET, block_hash)]
    vm = bare_vm(reopen(items), SimClock(START + 100))
    below = len(bare_chain.ids) - 1 - TARGET
    with pytest.raises(error):
        vm.get_block(block_hash)
    head = bare_chain.ids[-1]
    assert serial(vm, head) == bare_chain.truth[:below]
    assert ancestors(vm, head) == bare_chain.truth
    if kind == "receipts":
        assert ancestors(vm, block_hash) == bare_chain.truth[below:]
    else:
        assert ancestors(vm, block_hash) == []


@pytest.mark.parametrize("kind", ["header", "body", "canonical"])
def test_a_missing_part_of_an_accepted_block_is_store_corrupted(bare_chain: Chain,
                                                                kind: str) -> None:
    """An accepted height whose canonical entry, header or body is gone is damage, judged
    alike on every path: StoreCorrupted when asked for the block, and walks from above stop
    before it, as a prefix of the truth."""
    block_hash = block_hash_at(bare_chain, TARGET)
    items = dict(bare_chain.items)
    del items[KEYS[kind](TARGET, block_hash)]
    vm = bare_vm(reopen(items), SimClock(START + 100))
    check_damaged(vm, bare_chain, kind, block_hash, TARGET)


def test_a_missing_integrity_entry_is_store_corrupted(bare_chain: Chain) -> None:
    """A block written with integrity entries whose entry is gone is StoreCorrupted."""
    block_hash = block_hash_at(bare_chain, TARGET)
    items = dict(bare_chain.items)
    del items[SCHEMA.integrity_key(TARGET, block_hash)]
    vm = bare_vm(reopen(items), SimClock(START + 100))
    check_damaged(vm, bare_chain, "integrity", block_hash, TARGET)


def test_the_head_block_damaged(bare_chain: Chain) -> None:
    """A damaged head block makes get_ancestors from the head StoreCorrupted (the first
    block's error propagates) and the parent's answer stays whole."""
    head = bare_chain.ids[-1]
    height = len(bare_chain.ids) - 1
    items = dict(bare_chain.items)
    key = SCHEMA.body_key(height, head)
    items[key] = flipped(items[key], len(items[key]) // 2)
    vm = bare_vm(reopen(items), SimClock(START + 100))
    assert ancestors(vm, head) is StoreCorrupted
    assert ancestors(vm, bare_chain.ids[-2]) == bare_chain.truth[1:]


# --- through the full stack, on LMDB -----------------------------------------------------


@pytest.fixture(scope="module")
def stack_chain() -> Chain:
    return build_chain(full_stack, 13)


@pytest.mark.parametrize("kind", ["header", "body", "canonical"])
def test_damage_below_the_fork_through_the_full_stack(stack_chain: Chain, tmp_path: Path,
                                                      kind: str) -> None:
    """On LMDB through every layer, a damaged pre-fork block is StoreCorrupted from
    get_block; the batched and serial answers from the head stop before it and agree."""
    block_id = stack_chain.ids[TARGET]
    key = KEYS[kind](TARGET, block_hash_at(stack_chain, TARGET))
    items = dict(stack_chain.items)
    items[key] = flipped(items[key], len(items[key]) // 2)
    with LMDBStore(tmp_path / "db") as store:
        vm = full_stack(reopen(items, store), SimClock(START + 100))
        with pytest.raises(StoreCorrupted):
            vm.get_block(block_id)
        below = len(stack_chain.ids) - 1 - TARGET
        head = stack_chain.ids[-1]
        assert ancestors(vm, head) == serial(vm, head) == stack_chain.truth[:below]
        assert ancestors(vm, block_id) is StoreCorrupted


@pytest.mark.parametrize("kind", ["header", "body"])
def test_damage_above_the_fork_through_the_full_stack(stack_chain: Chain, kind: str) -> None:
    """A damaged inner block of a post-fork block is StoreCorrupted from get_block; the
    ancestors answers, served from the proposer's own records, are still the truth or a
    prefix of it."""
    height = len(stack_chain.ids) - 2
    key = KEYS[kind](height, block_hash_at(stack_chain, height))
    items = dict(stack_chain.items)
    items[key] = flipped(items[key], len(items[key]) // 2)
    vm = full_stack(reopen(items), SimClock(START + 100))
    with pytest.raises(StoreCorrupted):
        vm.get_block(stack_chain.ids[height])
    head = stack_chain.ids[-1]
    for answer in (ancestors(vm, head), serial(vm, head)):
        assert answer is not StoreCorrupted and is_prefix(answer, stack_chain.truth)


def proposer_record_key(chain: Chain, height: int) -> bytes:
    """The proposer layer's stored record of the post-fork block at ``height``."""
    from vmstack.wrappers.proposer.vm import STORE_PREFIX

    return STORE_PREFIX + b"b" + chain.ids[height]


def test_a_damaged_proposer_record_framing_is_store_corrupted(stack_chain: Chain) -> None:
    """A flipped byte in the unsigned part of a stored post-fork block is StoreCorrupted
    (its ID no longer matches) and walks stop before it."""
    height = len(stack_chain.ids) - 2
    key = proposer_record_key(stack_chain, height)
    items = dict(stack_chain.items)
    items[key] = flipped(items[key], 32 + 40)
    vm = full_stack(reopen(items), SimClock(START + 100))
    with pytest.raises(StoreCorrupted):
        vm.get_block(stack_chain.ids[height])
    head = stack_chain.ids[-1]
    assert ancestors(vm, head) == serial(vm, head) == stack_chain.truth[:1]


def test_a_damaged_proposer_signature_is_never_served(stack_chain: Chain) -> None:
    """A flipped byte in the signature of a stored post-fork block is never served."""
    height = len(stack_chain.ids) - 2
    key = proposer_record_key(stack_chain, height)
    items = dict(stack_chain.items)
    items[key] = flipped(items[key], len(items[key]) - 3)
    vm = full_stack(reopen(items), SimClock(START + 100))
    head = stack_chain.ids[-1]
    for answer in (ancestors(vm, head), serial(vm, head)):
        assert answer is StoreCorrupted or is_prefix(answer, stack_chain.truth)
    try:
        served = bytes(vm.get_block(stack_chain.ids[height]))
    except StoreCorrupted:
        return
    assert served == stack_chain.truth[1]
