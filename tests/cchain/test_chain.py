"""Reading the chain from the store (vmstack.cchain.chain): stored values that fail their
checks raise StoreCorrupted, a missing block is judged missing or corrupt by one function
alike on every read path (get_block, get_block_id_at_height, get_ancestors and the serial
walk), and nothing damaged is ever served as data."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cchain.chains import STORE_KINDS, build_chain, new_vm, open_store, tampered
from vmstack.batching import MAX_CONTAINERS_LEN, serial_get_ancestors
from vmstack.cchain import CChainVM, rawdb
from vmstack.cchain.integrity import checksum
from vmstack.errors import BlockNotFound, StoreCorrupted
from vmstack.store import KeyValueStore, MemoryStore

CHAIN = 8


# --- damaged stores ----------------------------------------------------------------------


@pytest.fixture(params=STORE_KINDS)
def damaged(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[KeyValueStore, CChainVM, list[bytes]]]:
    """A store with a chain of CHAIN blocks, to be damaged by the test; VM and IDs."""
    with open_store(request.param, tmp_path) as store:
        vm = new_vm(store)
        yield store, vm, build_chain(vm, CHAIN, txs=2)


def _flip(store: KeyValueStore, key: bytes, at: int = -5) -> None:
    value = bytearray(store.get(key))
    value[at] ^= 0x20
    store.put(key, bytes(value))


def _answers(vm: CChainVM, block_id: bytes) -> tuple[list[bytes], list[bytes]]:
    fast = vm.get_ancestors(block_id, 100, MAX_CONTAINERS_LEN, 60.0)
    slow = serial_get_ancestors(vm, block_id, max_blocks_num=100, max_retrieval_time=60.0)
    return fast, slow


@pytest.mark.parametrize("what", ["header", "body"])
def test_a_flipped_byte_in_a_header_or_body_is_corruption(
    damaged: tuple[KeyValueStore, CChainVM, list[bytes]], what: str
) -> None:
    """Both paths raise StoreCorrupted for the damaged block; a walk from a descendant stops
    before it, identically on both paths."""
    store, vm, ids = damaged
    height = 4
    target = ids[height - 1]
    schema = vm.schema
    key = (schema.header_key if what == "header" else schema.body_key)(height, target)
    _flip(store, key)
    with pytest.raises(StoreCorrupted):
        vm.get_block(target)
    with pytest.raises(StoreCorrupted):
        vm.get_ancestors(target, 10, MAX_CONTAINERS_LEN, 60.0)
    fast, slow = _answers(vm, ids[-1])
    assert fast == slow
    assert len(fast) == CHAIN - height


def test_a_header_whose_hash_does_not_match_its_key_is_corruption(
    damaged: tuple[KeyValueStore, CChainVM, list[bytes]],
) -> None:
    """A well-formed header stored under another block's key (checksum updated to match) is
    caught by the header hash check."""
    store, vm, ids = damaged
    schema = vm.schema
    other = vm.get_block(ids[2])
    store.put(schema.header_key(2, ids[1]), other.header_rlp())
    store.put(schema.body_key(2, ids[1]), other.body_rlp())
    rawdb.write_integrity(
        store, schema, 2, ids[1], checksum(schema.integrity_key(2, ids[1]), bytes(other))
    )
    with pytest.raises(StoreCorrupted):
        vm.get_block(ids[1])


def test_flipped_receipts_are_corruption_on_the_slow_path(
    damaged: tuple[KeyValueStore, CChainVM, list[bytes]],
) -> None:
    """Damaged receipts fail get_block; the fast path, which serves no receipts, is
    unaffected and still serves the right bytes."""
    store, vm, ids = damaged
    before = vm.get_ancestors(ids[4], 1, 0, 1.0)
    _flip(store, vm.schema.receipts_key(5, ids[4]), at=-3)
    with pytest.raises(StoreCorrupted):
        vm.get_block(ids[4])
    assert vm.get_ancestors(ids[4], 1, 0, 1.0) == before


@pytest.mark.parametrize("value", [b"flip", b"short", b"long"])
def test_a_damaged_canonical_entry_is_corruption(
    damaged: tuple[KeyValueStore, CChainVM, list[bytes]], value: str
) -> None:
    """A canonical entry naming a block the store lacks, or of the wrong length, raises
    StoreCorrupted on both paths."""
    store, vm, ids = damaged
    key = vm.schema.canonical_hash_key(6)
    if value == b"flip":
        _flip(store, key, at=0)
    else:
        store.put(key, ids[5][:31] if value == b"short" else ids[5] + b"\x00")
    fresh = CChainVM(store)
    with pytest.raises(StoreCorrupted):
        fresh.get_block(ids[5])
    with pytest.raises(StoreCorrupted):
        fresh.get_ancestors(ids[5], 10, MAX_CONTAINERS_LEN, 60.0)
    fast, slow = _answers(fresh, ids[-1])
    assert fast == slow and len(fast) == CHAIN - 6


@pytest.mark.parametrize("damage", ["delete", "resize", "flip"])
def test_a_damaged_integrity_entry_is_corruption(
    damaged: tuple[KeyValueStore, CChainVM, list[bytes]], damage: str
) -> None:
    """A missing, mis-sized or wrong integrity entry fails both paths."""
    store, vm, ids = damaged
    key = vm.schema.integrity_key(2, ids[1])
    if damage == "delete":
        store.delete(key)
    elif damage == "resize":
        store.put(key, store.get(key)[:5])
    else:
        _flip(store, key, at=0)
    with pytest.raises(StoreCorrupted):
        vm.get_block(ids[1])
    with pytest.raises(StoreCorrupted):
        vm.get_ancestors(ids[1], 10, MAX_CONTAINERS_LEN, 60.0)


@pytest.mark.parametrize("what", ["header", "body"])
def test_a_missing_header_or_body_is_store_corrupted(
    damaged: tuple[KeyValueStore, CChainVM, list[bytes]], what: str
) -> None:
    """A canonical block whose header or body is gone is damage, not a block that is not
    there: StoreCorrupted from get_block and get_ancestors, and a walk from a descendant
    ends above it on both paths alike."""
    store, vm, ids = damaged
    schema = vm.schema
    store.delete((schema.header_key if what == "header" else schema.body_key)(3, ids[2]))
    with pytest.raises(StoreCorrupted, match=f"whose {what} the store does not have"):
        vm.get_block(ids[2])
    with pytest.raises(StoreCorrupted, match=f"whose {what} the store does not have"):
        vm.get_ancestors(ids[2], 10, MAX_CONTAINERS_LEN, 60.0)
    fast, slow = _answers(vm, ids[-1])
    assert fast == slow
    assert len(fast) == CHAIN - 3


@pytest.mark.parametrize(
    ("what", "error"), [("receipts", StoreCorrupted), ("number", BlockNotFound)]
)
def test_keys_only_the_slow_path_reads(
    damaged: tuple[KeyValueStore, CChainVM, list[bytes]], what: str, error: type[Exception]
) -> None:
    """Missing receipts (damage: StoreCorrupted) or number entry (an unknown ID:
    BlockNotFound) fail get_block; the fast path, which reads neither for a parent (its
    number is its child's minus one), still serves the right bytes, never other ones."""
    store, vm, ids = damaged
    schema = vm.schema
    before = vm.get_ancestors(ids[-1], 100, MAX_CONTAINERS_LEN, 60.0)
    store.delete(
        schema.receipts_key(3, ids[2]) if what == "receipts" else schema.header_number_key(ids[2])
    )
    with pytest.raises(error):
        vm.get_block(ids[2])
    assert vm.get_ancestors(ids[-1], 100, MAX_CONTAINERS_LEN, 60.0) == before


def test_rejected_and_non_canonical_blocks_are_not_served(
    damaged: tuple[KeyValueStore, CChainVM, list[bytes]],
) -> None:
    """Rule 9: a rejected block and a stored but non-canonical one are served by neither
    path."""
    store, vm, ids = damaged
    block = vm.build_block()
    block.verify()
    block.reject()
    sibling = vm.parse_block(tampered(vm, vm.get_block(ids[2]), extra=b"side"))
    rawdb.write_block(store, vm.schema, 3, sibling.id, sibling.header_rlp(), sibling.body_rlp())
    for block_id in (block.id, sibling.id):
        with pytest.raises(BlockNotFound):
            vm.get_block(block_id)
        assert vm.get_ancestors(block_id, 10, MAX_CONTAINERS_LEN, 60.0) == []
        assert serial_get_ancestors(vm, block_id) == []


def test_a_block_is_served_while_it_is_being_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """get_ancestors never answers [] for a block that is processing or accepted, even when
    the accept lands between its look at the processing blocks and its snapshot."""
    from vmstack import SimClock
    from vmstack.cchain import generate_chain

    clock = SimClock(1.7e9)
    store = MemoryStore()
    vm = CChainVM(store, clock=clock)
    generate_chain(vm, blocks=2, txs_per_block=1, seed=3, clock=clock)
    clock.advance(2)
    block = vm.build_block()
    block.verify()
    real_snapshot = MemoryStore.snapshot
    pending = [block]

    def accept_first(self: MemoryStore):
        if pending:
            pending.pop().accept()
        return real_snapshot(self)

    monkeypatch.setattr(MemoryStore, "snapshot", accept_first)
    assert len(vm.get_ancestors(block.id, 10, 10**6, 1.0)) == 4
    assert vm.get_block(block.id).hash == block.id


def test_a_canonical_entry_naming_a_missing_block_is_store_corrupted() -> None:
    """get_block_id_at_height never hands out a hash the store does not have at that height."""
    from vmstack import SimClock
    from vmstack.cchain import generate_chain

    clock = SimClock(1.7e9)
    store = MemoryStore()
    generate_chain(
        CChainVM(store, clock=clock, settle_lag=2), blocks=5, txs_per_block=1, seed=4, clock=clock
    )
    rawdb.write_canonical_hash(store, rawdb.Schema(), 4, bytes(32))
    fresh = CChainVM(store, clock=clock, settle_lag=2)
    with pytest.raises(StoreCorrupted, match="canonical entry at height 4"):
        fresh.get_block_id_at_height(4)


# --- missing or corrupt: one judgement on every read path ---------------------------------

DAMAGE = ("unknown id", "deleted header", "deleted body", "corrupt checksum")


def _damage(store: KeyValueStore, vm: CChainVM, ids: list[bytes], damage: str) -> tuple[bytes, int]:
    """Damage the store as ``damage`` says; the block ID and height that are asked for."""
    schema = vm.schema
    if damage == "unknown id":
        return bytes(range(32)), CHAIN + 5
    block_id, height = ids[2], 3
    if damage == "deleted header":
        store.delete(schema.header_key(height, block_id))
    elif damage == "deleted body":
        store.delete(schema.body_key(height, block_id))
    else:
        key = schema.integrity_key(height, block_id)
        entry = bytearray(store.get(key))
        entry[0] ^= 0x01
        store.put(key, bytes(entry))
    return block_id, height


def _judgement(call: Callable[[], object]) -> object:
    """What a read answers: the type of the error it raised, else its answer."""
    try:
        return call()
    except (BlockNotFound, StoreCorrupted) as error:
        return type(error)


@pytest.mark.parametrize("damage", DAMAGE)
def test_missing_and_corrupt_are_judged_alike_on_every_read_path(
    damaged: tuple[KeyValueStore, CChainVM, list[bytes]], damage: str
) -> None:
    """An unknown ID is BlockNotFound on every path (the walks answer []); a canonical entry
    naming a block whose header or body is gone is StoreCorrupted on every path; a block
    failing its checksum is StoreCorrupted on every path that reads its bytes, while
    get_block_id_at_height, which reads only the entries, answers the right ID."""
    store, vm, ids = damaged
    block_id, height = _damage(store, vm, ids, damage)
    fresh = new_vm(store)  # nothing cached from before the damage
    answers = {
        "get_block": _judgement(lambda: fresh.get_block(block_id)),
        "get_block_id_at_height": _judgement(lambda: fresh.get_block_id_at_height(height)),
        "get_ancestors": _judgement(
            lambda: fresh.get_ancestors(block_id, 10, MAX_CONTAINERS_LEN, 60.0)
        ),
        "serial walk": _judgement(lambda: serial_get_ancestors(fresh, block_id)),
    }
    if damage == "unknown id":
        assert answers == {
            "get_block": BlockNotFound,
            "get_block_id_at_height": BlockNotFound,
            "get_ancestors": [],
            "serial walk": [],
        }
    elif damage == "corrupt checksum":
        assert answers == {
            "get_block": StoreCorrupted,
            "get_block_id_at_height": block_id,
            "get_ancestors": StoreCorrupted,
            "serial walk": StoreCorrupted,
        }
    else:
        assert set(answers.values()) == {StoreCorrupted}


@pytest.mark.parametrize("damage", DAMAGE[1:])
def test_a_walk_from_above_stops_before_the_damage_on_both_paths(
    damaged: tuple[KeyValueStore, CChainVM, list[bytes]], damage: str
) -> None:
    """Mid-walk, the damaged block ends the walk on both paths alike: the blocks above it
    are served, it and its ancestors are not."""
    store, vm, ids = damaged
    _damage(store, vm, ids, damage)
    fast, slow = _answers(new_vm(store), ids[-1])
    assert fast == slow
    assert len(fast) == CHAIN - 3


def test_settlement_judges_a_missing_body_as_corruption() -> None:
    """Settling a block (settle_lag > 0) reads it through the same judgement: its body gone
    makes the accept that would settle it StoreCorrupted, and nothing is written."""
    store = MemoryStore()
    vm = new_vm(store, settle_lag=2)
    ids = build_chain(vm, 3, txs=1)
    settled_before = vm.last_settled()
    store.delete(vm.schema.body_key(2, ids[1]))
    block = vm.build_block()
    block.verify()
    with pytest.raises(StoreCorrupted, match="whose body the store does not have"):
        block.accept()
    assert vm.last_accepted() == ids[-1] and vm.last_settled() == settled_before


def test_an_accepted_height_without_a_canonical_entry_is_corruption() -> None:
    """A canonical entry gone below the last accepted height is damage on every path; above
    it, a height is simply not accepted yet."""
    store = MemoryStore()
    ids = build_chain(new_vm(store), 5, txs=1)
    schema = rawdb.Schema()
    store.delete(schema.canonical_hash_key(3))
    vm = new_vm(store)
    with pytest.raises(StoreCorrupted, match="accepted height 3 has no canonical entry"):
        vm.get_block_id_at_height(3)
    with pytest.raises(StoreCorrupted, match="accepted height 3 has no canonical entry"):
        vm.get_block(ids[2])
    with pytest.raises(StoreCorrupted, match="accepted height 3 has no canonical entry"):
        vm.get_ancestors(ids[2], 10, MAX_CONTAINERS_LEN, 60.0)
    with pytest.raises(BlockNotFound, match="no accepted block at height 6"):
        vm.get_block_id_at_height(6)
