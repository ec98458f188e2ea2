"""Bad input and damaged stores: garbage, truncated and tampered blocks raise InvalidBlock;
stored values that fail their checks raise StoreCorrupted (BlockNotFound where a key is
simply missing), on both paths, and are never served as data."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cchain.chains import STORE_KINDS, build_chain, new_vm, open_store, tampered
from vmstack.batching import MAX_CONTAINERS_LEN, serial_get_ancestors
from vmstack.cchain import CChainVM, list_prefix, rawdb
from vmstack.errors import BlockNotFound, InvalidBlock, StoreCorrupted
from vmstack.store import KeyValueStore, MemoryStore

CHAIN = 8


@pytest.fixture(scope="module")
def sample() -> tuple[CChainVM, list[bytes]]:
    """A small chain on a MemoryStore (read-only use), and the blocks' bytes, oldest first."""
    vm = new_vm(MemoryStore())
    ids = build_chain(vm, CHAIN, txs=3)
    return vm, [bytes(vm.get_block(block_id)) for block_id in ids]


# --- parse_block and batched_parse_block -------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=600))
def test_garbage_is_an_invalid_block(data: bytes) -> None:
    """Random bytes never parse (a valid block is astronomically unlikely)."""
    vm = CChainVM(MemoryStore())
    with pytest.raises(InvalidBlock):
        vm.parse_block(data)


def test_truncated_blocks_are_invalid(sample: tuple[CChainVM, list[bytes]]) -> None:
    """Every truncation of a block (sampled) raises InvalidBlock."""
    vm, blocks = sample
    data = blocks[-1]
    for length in [*range(0, 40), *range(40, len(data), 37), len(data) - 1]:
        with pytest.raises(InvalidBlock):
            vm.parse_block(data[:length])


@pytest.mark.parametrize("mutate", [
    lambda data: data + b"\x00",
    lambda data: b"\xf9\xff\xff" + data[3:],
    lambda data: data[:3] + b"\xf8" + data[4:],
    lambda data: list_prefix(len(data) + 10) + data,
    lambda data: b"\xbf" + b"\xff" * 8 + data,
], ids=["trailing byte", "long outer length", "header prefix", "wrapped", "2**64 length"])
def test_broken_framing_is_invalid(sample: tuple[CChainVM, list[bytes]],
                                   mutate: Callable[[bytes], bytes]) -> None:
    """Trailing bytes, wrong or huge declared lengths: InvalidBlock, nothing allocated."""
    vm, blocks = sample
    with pytest.raises(InvalidBlock):
        vm.parse_block(mutate(blocks[-1]))


def test_wrong_body_shapes_are_invalid(sample: tuple[CChainVM, list[bytes]]) -> None:
    """A body with a missing or extra field, a string for a list, or a non-canonical
    version is refused at parse time."""
    vm, blocks = sample
    block = vm.parse_block(blocks[-1])
    header, body = block.header_rlp(), block.body_rlp()
    payload_start = 1 if body[0] < 0xF8 else 1 + body[0] - 0xF7
    fields = body[payload_start:]
    version_at = fields.rindex(b"\xc0\x80")  # empty uncles, then version 0
    variants = [
        fields + b"\x80",                                   # a fifth field
        fields[:version_at + 1],                            # version and extData missing
        b"\x80" + fields[fields.index(b"\xc0", 1):],        # a string for the transactions
        fields[:version_at + 1] + b"\x00" + fields[version_at + 2:],  # non-canonical version
    ]
    for payload in variants:
        data = list_prefix(len(header) + len(payload)) + header + payload
        with pytest.raises(InvalidBlock):
            vm.parse_block(data)


def test_non_bytes_input_is_an_invalid_block() -> None:
    """Something that is not bytes is refused as InvalidBlock (a ValueError)."""
    vm = CChainVM(MemoryStore())
    for value in (None, 5, "f8", [b"\xc0"]):
        with pytest.raises(InvalidBlock):
            vm.parse_block(value)  # type: ignore[arg-type]


def test_a_bad_element_fails_the_whole_batch_naming_its_index(
        sample: tuple[CChainVM, list[bytes]]) -> None:
    """batched_parse_block raises InvalidBlock with the index; nothing becomes processing."""
    vm, blocks = sample
    fresh = CChainVM(vm.store)
    batch = [*blocks[:3], blocks[3][:-1], *blocks[4:]]
    with pytest.raises(InvalidBlock) as caught:
        fresh.batched_parse_block(batch)
    assert caught.value.index == 3
    assert fresh.processing() == ()
    assert fresh.batched_parse_block([]) == []


def test_tampered_bodies_fail_verify_and_never_replace_a_known_block() -> None:
    """A flipped byte inside a transaction keeps the ID: verify refuses it; against a
    processing block with that ID, parse refuses it; the real block is still served."""
    vm = new_vm(MemoryStore())
    build_chain(vm, 1)
    vm.add_transactions(vm.get_block(vm.last_accepted()).transactions)
    block = vm.build_block()
    data = bytearray(bytes(block))
    data[-60] ^= 0x04
    forged = vm.parse_block(bytes(data))
    assert forged.id == block.id
    with pytest.raises(InvalidBlock):
        forged.verify()
    block.verify()
    with pytest.raises(InvalidBlock):
        vm.parse_block(bytes(data))
    assert vm.get_ancestors(block.id, 1, 0, 1.0) == [bytes(block)]
    block.accept()
    with pytest.raises(InvalidBlock):
        CChainVM(vm.store).parse_block(bytes(data)).verify()


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mutated_blocks_raise_only_invalid_block(sample: tuple[CChainVM, list[bytes]],
                                                 data: st.DataObject) -> None:
    """Bit flips, cuts and insertions in a valid block: parse and verify either succeed or
    raise InvalidBlock, and a failed verify leaves nothing processing."""
    vm, blocks = sample
    fresh = CChainVM(vm.store, clock=vm.clock)
    raw = bytearray(blocks[-1])
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(raw) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip":
            raw[position] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "cut":
            del raw[position]
        else:
            raw.insert(position, data.draw(st.integers(0, 255)))
    try:
        block = fresh.parse_block(bytes(raw))
        block.verify()
    except InvalidBlock:
        assert fresh.processing() == ()


# --- damaged stores ----------------------------------------------------------------------


@pytest.fixture(params=STORE_KINDS)
def damaged(request: pytest.FixtureRequest, tmp_path: Path
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
        damaged: tuple[KeyValueStore, CChainVM, list[bytes]], what: str) -> None:
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
        damaged: tuple[KeyValueStore, CChainVM, list[bytes]]) -> None:
    """A well-formed header stored under another block's key (checksum updated to match) is
    caught by the header hash check."""
    store, vm, ids = damaged
    schema = vm.schema
    other = vm.get_block(ids[2])
    store.put(schema.header_key(2, ids[1]), other.header_rlp())
    store.put(schema.body_key(2, ids[1]), other.body_rlp())
    rawdb.write_integrity(store, schema, 2, ids[1], rawdb.checksum(bytes(other)))
    with pytest.raises(StoreCorrupted):
        vm.get_block(ids[1])


def test_flipped_receipts_are_corruption_on_the_slow_path(
        damaged: tuple[KeyValueStore, CChainVM, list[bytes]]) -> None:
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
        damaged: tuple[KeyValueStore, CChainVM, list[bytes]], value: str) -> None:
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
        damaged: tuple[KeyValueStore, CChainVM, list[bytes]], damage: str) -> None:
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
        damaged: tuple[KeyValueStore, CChainVM, list[bytes]], what: str) -> None:
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


@pytest.mark.parametrize("what", ["receipts", "number"])
def test_keys_only_the_slow_path_reads(
        damaged: tuple[KeyValueStore, CChainVM, list[bytes]], what: str) -> None:
    """Missing receipts or number entry: get_block says BlockNotFound; the fast path, which
    reads neither for a parent (its number is its child's minus one), still serves the
    right bytes, never other ones."""
    store, vm, ids = damaged
    schema = vm.schema
    before = vm.get_ancestors(ids[-1], 100, MAX_CONTAINERS_LEN, 60.0)
    store.delete(schema.receipts_key(3, ids[2]) if what == "receipts"
                 else schema.header_number_key(ids[2]))
    with pytest.raises(BlockNotFound):
        vm.get_block(ids[2])
    assert vm.get_ancestors(ids[-1], 100, MAX_CONTAINERS_LEN, 60.0) == before


def test_rejected_and_non_canonical_blocks_are_not_served(
        damaged: tuple[KeyValueStore, CChainVM, list[bytes]]) -> None:
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


@pytest.mark.parametrize("damage", ["r=0", "y_parity=2", "high s"])
def test_a_transaction_whose_sender_cannot_be_recovered_fails_verify(damage: str) -> None:
    """verify recovers every sender, so an accepted block always restores on the slow path."""
    import attrs

    from vmstack import SimClock
    from vmstack.cchain import CChainVM, DynamicFeeTx, sign_transaction
    from vmstack.cchain.crypto import SECP256K1_N
    from vmstack.store import MemoryStore

    good = sign_transaction(DynamicFeeTx(chain_id=43114, max_fee_per_gas=10**10, gas=21000,
                                         to=b"\x11" * 20), 777, 43114)
    bad = {"r=0": attrs.evolve(good, r=0), "y_parity=2": attrs.evolve(good, y_parity=2),
           "high s": attrs.evolve(good, s=SECP256K1_N - good.s, y_parity=1 - good.y_parity)}
    clock = SimClock(1.7e9)
    vm = CChainVM(MemoryStore(), clock=clock)
    vm.add_transactions([bad[damage]])
    clock.advance(2)
    block = vm.build_block()
    with pytest.raises(InvalidBlock, match="transaction 0"):
        block.verify()
    with pytest.raises(BlockNotFound):
        vm.get_block(block.id)


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

    def accept_first(self: MemoryStore):  # type: ignore[no-untyped-def]
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
    generate_chain(CChainVM(store, clock=clock, settle_lag=2), blocks=5, txs_per_block=1,
                   seed=4, clock=clock)
    rawdb.write_canonical_hash(store, rawdb.Schema(), 4, bytes(32))
    fresh = CChainVM(store, clock=clock, settle_lag=2)
    with pytest.raises(StoreCorrupted, match="canonical entry at height 4"):
        fresh.get_block_id_at_height(4)
