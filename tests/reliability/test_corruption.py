"""Corruption: a store with one damaged value (a flipped byte, a truncation), one missing
key, or a sound value copied under another key of its kind yields ``StoreCorrupted`` or
``BlockNotFound``, never wrong bytes served as a block — on ``get_block``, on
``get_ancestors`` (the first block raises; mid-walk the answer stops before the damaged
block), on the serial walk, and through the full stack; and a data file cut short or
emptied is ``StoreCorrupted`` when the stack opens it, never a signal or a new chain."""

from __future__ import annotations

import contextlib
import os
import shutil
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
from tests.support.processes import python_child_output
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
    return value[:position] + bytes((value[position] ^ 0x5A,)) + value[position + 1 :]


def is_prefix(answer: list[bytes], truth: list[bytes]) -> bool:
    return answer == truth[: len(answer)]


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
    assert isinstance(from_head, list) and isinstance(walked, list)
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


@pytest.mark.parametrize(
    ("kind", "error"), [("receipts", StoreCorrupted), ("number", BlockNotFound)]
)
def test_a_missing_key_the_fast_path_does_not_read(
    bare_chain: Chain, kind: str, error: type[Exception]
) -> None:
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
def test_a_missing_part_of_an_accepted_block_is_store_corrupted(
    bare_chain: Chain, kind: str
) -> None:
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
def test_damage_below_the_fork_through_the_full_stack(
    stack_chain: Chain, tmp_path: Path, kind: str
) -> None:
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
        assert isinstance(answer, list) and is_prefix(answer, stack_chain.truth)


def proposer_record_key(chain: Chain, height: int) -> bytes:
    """The proposer layer's stored record of the post-fork block at ``height``."""
    from vmstack.wrappers.proposer.state import STORE_PREFIX

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
        assert not isinstance(answer, list) or is_prefix(answer, stack_chain.truth)
    try:
        served = bytes(vm.get_block(stack_chain.ids[height]))
    except StoreCorrupted:
        return
    assert served == stack_chain.truth[1]


# --- misplaced values: a sound value under another key of its kind ------------------------

#: What is copied from block TARGET - 1 under block TARGET's keys: one kind of value, or
#: the whole block with its integrity entry (which a checksum of the values alone passes).
MOVES: dict[str, tuple[str, ...]] = {
    "header": ("header",),
    "body": ("body",),
    "receipts": ("receipts",),
    "integrity": ("integrity",),
    "canonical": ("canonical",),
    "number": ("number",),
    "block": ("header", "body", "integrity"),
    "block with receipts": ("header", "body", "receipts", "integrity"),
}


def moved(chain: Chain, kinds: tuple[str, ...], target: int) -> dict[bytes, bytes]:
    """The chain's items with the values of ``kinds`` of block ``target - 1`` copied under
    the keys of block ``target``."""
    source, destination = block_hash_at(chain, target - 1), block_hash_at(chain, target)
    items = dict(chain.items)
    for kind in kinds:
        items[KEYS[kind](target, destination)] = chain.items[KEYS[kind](target - 1, source)]
    return items


#: What the fast path reads of a block: the receipts never, a number entry only for the
#: first block of a walk (a parent's number is its child's minus one), the rest always.
FAST_READS: dict[str, str] = {"receipts": "never", "number": "first"}


def check_misplaced(vm: ChainVM, chain: Chain, target: int, *, fast_reads: str = "always") -> None:
    """What a VM over a store with a value misplaced at height ``target`` does: get_block
    of that block is StoreCorrupted, and so is get_ancestors from it unless the fast path
    never reads the value (it then serves the truth); walks from above stop before it (the
    serial walk always, the fast walk when it reads the value for a parent); the height
    answers StoreCorrupted or the true ID, and parsing its bytes StoreCorrupted or that
    block. Never another block's bytes."""
    head, block_id = chain.ids[-1], chain.ids[target]
    below = len(chain.ids) - 1 - target
    with pytest.raises(StoreCorrupted):
        vm.get_block(block_id)
    assert serial(vm, head) == chain.truth[:below]
    if fast_reads == "never":
        assert ancestors(vm, block_id) == chain.truth[below:]
    else:
        assert ancestors(vm, block_id) is StoreCorrupted
    if fast_reads == "always":
        assert ancestors(vm, head) == chain.truth[:below]
    else:
        assert ancestors(vm, head) == chain.truth
    with contextlib.suppress(StoreCorrupted):
        assert vm.get_block_id_at_height(target) == block_id
    try:
        parsed = vm.parse_block(chain.truth[below])
    except StoreCorrupted:
        return
    assert parsed.id == block_id and bytes(parsed) == chain.truth[below]


@pytest.mark.parametrize("move", list(MOVES))
def test_a_value_under_another_blocks_key_is_store_corrupted(bare_chain: Chain, move: str) -> None:
    """A sound value of the block below copied under a block's keys (each kind alone,
    or the whole block with its integrity entry) is StoreCorrupted, never served as that
    block: the integrity entry's checksums cover its key, the number and hash of the block.
    The fast path reads neither receipts nor a parent's number entry, and serves the true
    bytes past those."""
    items = moved(bare_chain, MOVES[move], TARGET)
    vm = bare_vm(reopen(items), SimClock(START + 100))
    check_misplaced(vm, bare_chain, TARGET, fast_reads=FAST_READS.get(move, "always"))


def test_a_whole_block_under_another_blocks_keys_through_the_full_stack(
    stack_chain: Chain, tmp_path: Path
) -> None:
    """On LMDB through every layer, a pre-fork block's header, body and integrity entry
    copied under the next block's keys is StoreCorrupted on every path."""
    items = moved(stack_chain, MOVES["block"], TARGET)
    with LMDBStore(tmp_path / "db") as store:
        vm = full_stack(reopen(items, store), SimClock(START + 100))
        check_misplaced(vm, stack_chain, TARGET)


def proposer_index_key(chain: Chain, height: int) -> bytes:
    """The proposer layer's index entry of the inner block of the post-fork block at
    ``height`` (the inner ID is the first field of the block's framed record)."""
    from vmstack.checksum import CHECKSUM_LEN
    from vmstack.wrappers.proposer.state import STORE_PREFIX

    record = chain.items[proposer_record_key(chain, height)]
    return STORE_PREFIX + b"i" + record[CHECKSUM_LEN : CHECKSUM_LEN + 32]


@pytest.mark.parametrize("kind", ["record", "index"])
def test_a_proposer_value_under_another_blocks_key_is_store_corrupted(
    stack_chain: Chain, tmp_path: Path, kind: str
) -> None:
    """The proposer's record of an accepted post-fork block, or its index entry, copied
    under the key of the next block's is StoreCorrupted wherever it is read: get_block,
    get_ancestors from that block, the height's ID and parsing its bytes, and walks from
    above stop before it. A checksum of the value alone used to pass the record, and
    get_ancestors answered the block below where this one belongs."""
    height = len(stack_chain.ids) - 2
    key_of = proposer_record_key if kind == "record" else proposer_index_key
    items = dict(stack_chain.items)
    items[key_of(stack_chain, height)] = stack_chain.items[key_of(stack_chain, height - 1)]
    with LMDBStore(tmp_path / "db") as store:
        vm = full_stack(reopen(items, store), SimClock(START + 100))
        if kind == "record":
            check_misplaced(vm, stack_chain, height)
            return
        # The index is read where an inner block is mapped to its envelope: the height's
        # ID. Every other path answers from the records, the truth.
        with pytest.raises(StoreCorrupted):
            vm.get_block_id_at_height(height)
        head, below = stack_chain.ids[-1], len(stack_chain.ids) - 1 - height
        for answer in (ancestors(vm, head), serial(vm, head)):
            assert not isinstance(answer, list) or is_prefix(answer, stack_chain.truth)
        for read in (
            lambda: bytes(vm.get_block(stack_chain.ids[height])),
            lambda: bytes(vm.parse_block(stack_chain.truth[below])),
        ):
            with contextlib.suppress(StoreCorrupted):
                assert read() == stack_chain.truth[below]


def test_one_configuration_record_under_the_others_key_is_store_corrupted(
    stack_chain: Chain,
) -> None:
    """The C-chain part's configuration record copied under the proposer layer's key is
    StoreCorrupted when the stack is built, not another part's settings."""
    from vmstack.store.keyspaces import CONFIG_CHAIN, CONFIG_PROPOSER

    items = dict(stack_chain.items)
    items[CONFIG_PROPOSER.prefix] = items[CONFIG_CHAIN.prefix]
    with pytest.raises(StoreCorrupted, match="proposer configuration record"):
        full_stack(reopen(items), SimClock(START + 100))


# --- damaged store files ------------------------------------------------------------------

_OPEN_STACK_IN_CHILD = """
import sys
from tests.reliability.stacks import START, full_stack
from vmstack import SimClock, StoreCorrupted
from vmstack.store import LMDBStore
try:
    store = LMDBStore(sys.argv[1], readonly=sys.argv[2] == "readonly")
    vm = full_stack(store, SimClock(START + 100))
    print("served", vm.last_accepted().hex())
except StoreCorrupted as error:
    print("StoreCorrupted:", error)
"""
#: Seconds a child opening a damaged store may take before the test fails.
CHILD_DEADLINE = 120.0


@pytest.fixture(scope="module")
def stack_store(stack_chain: Chain, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The full stack's chain in an LMDB store, closed."""
    path = tmp_path_factory.mktemp("stack") / "db"
    with LMDBStore(path) as store:
        reopen(stack_chain.items, store)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["writer", "readonly"])
def test_a_truncated_store_is_store_corrupted_through_the_full_stack(
    stack_store: Path, tmp_path: Path, mode: str
) -> None:
    """A data file cut to a quarter, half or all but a page of its size is StoreCorrupted
    naming the file when the stack opens it, never a SIGBUS: the opener runs in a child
    process, which must live and say so within its deadline."""
    full = os.path.getsize(stack_store / "data.mdb")
    for size in (full // 4, full // 2, full - 4096):
        path = tmp_path / f"cut{size}"
        shutil.copytree(stack_store, path)
        os.truncate(path / "data.mdb", size)
        said = python_child_output(_OPEN_STACK_IN_CHILD, str(path), mode, seconds=CHILD_DEADLINE)
        assert said.startswith(f"StoreCorrupted: the LMDB data file {path}"), said
        assert f"is {size} bytes" in said


def test_an_emptied_store_is_never_a_new_chain(stack_store: Path, tmp_path: Path) -> None:
    """A store of a whole chain whose data file is 0 bytes is StoreCorrupted, writer and
    reader alike, and is left 0 bytes: no genesis block is written over it."""
    path = tmp_path / "db"
    shutil.copytree(stack_store, path)
    os.truncate(path / "data.mdb", 0)
    for readonly in (False, True):
        with pytest.raises(StoreCorrupted, match="is 0 bytes"):
            full_stack(LMDBStore(path, readonly=readonly), SimClock(START + 100))
    assert os.path.getsize(path / "data.mdb") == 0
