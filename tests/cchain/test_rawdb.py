"""The rawdb schema: every key of coreth's database layout, number/hash codecs, helpers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from Crypto.Hash import keccak
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import load_vectors
from vmstack.cchain.rawdb import (
    CORETH_KEY_PREFIX,
    KeyKind,
    ParsedKey,
    Schema,
    decode_block_hash,
    decode_block_number,
    delete_block,
    encode_block_number,
    read_body_rlp,
    read_canonical_hash,
    read_head_header_hash,
    read_header_number,
    read_header_rlp,
    read_last_accepted_hash,
    read_last_settled_hash,
    read_receipts_rlp,
    write_block,
    write_canonical_hash,
    write_head_header_hash,
    write_last_accepted_hash,
    write_last_settled_hash,
    write_receipts,
)
from vmstack.errors import StoreCorrupted
from vmstack.store import MemoryStore

CORETH = Schema(CORETH_KEY_PREFIX)
HASH_A = bytes(range(32))
HASH_B = bytes(range(32, 64))


def _hex(value: str) -> bytes:
    return bytes.fromhex(value.removeprefix("0x"))


def _layout() -> dict[str, Any]:
    layout: dict[str, Any] = load_vectors("cchain_blocks.json")["db_layout_examples"]
    return layout


def _block_rlp_by_hash() -> dict[bytes, bytes]:
    blocks = load_vectors("cchain_blocks.json")["blocks"]
    return {_hex(block["hash"]): _hex(block["rlp"]) for block in blocks}


def _rlp_list_payload(data: bytes) -> bytes:
    """Test-only: the payload of an RLP list (its items without the list prefix)."""
    first = data[0]
    assert first >= 0xC0
    if first <= 0xF7:
        return data[1:]
    return data[1 + first - 0xF7 :]


def _rlp_list(payload: bytes) -> bytes:
    """Test-only: an RLP list prefix over ``payload``."""
    if len(payload) < 56:
        return bytes([0xC0 + len(payload)]) + payload
    size = len(payload).to_bytes((len(payload).bit_length() + 7) // 8, "big")
    return bytes([0xF7 + len(size)]) + size + payload


def _keccak(data: bytes) -> bytes:
    return keccak.new(digest_bits=256, data=data).digest()


BLOCK_KEY_BUILDERS: dict[str, Callable[[int, bytes], bytes]] = {
    "header h+num+hash": lambda number, block_hash: CORETH.header_key(number, block_hash),
    "body b+num+hash": lambda number, block_hash: CORETH.body_key(number, block_hash),
    "receipts r+num+hash": lambda number, block_hash: CORETH.receipts_key(number, block_hash),
    "canonical h+num+n": lambda number, block_hash: CORETH.canonical_hash_key(number),
    "number H+hash": lambda number, block_hash: CORETH.header_number_key(block_hash),
}
BLOCK_KEY_KINDS = {
    "header h+num+hash": KeyKind.HEADER,
    "body b+num+hash": KeyKind.BODY,
    "receipts r+num+hash": KeyKind.RECEIPTS,
    "canonical h+num+n": KeyKind.CANONICAL_HASH,
    "number H+hash": KeyKind.HEADER_NUMBER,
}
HEAD_KEYS = {
    "head pointer LastHeader": (CORETH.head_header_key(), KeyKind.HEAD_HEADER),
    "head pointer LastBlock": (CORETH.last_accepted_key(), KeyKind.HEAD_BLOCK),
    "head pointer LastFast": (CORETH.head_fast_block_key(), KeyKind.HEAD_FAST_BLOCK),
}


def test_coreth_prefix_is_sha256_of_ethdb() -> None:
    """CORETH_KEY_PREFIX equals the prefix recorded with the coreth database examples."""
    assert _hex(_layout()["prefix"]) == CORETH_KEY_PREFIX
    assert CORETH_KEY_PREFIX.hex().startswith("337fb73f")


def test_every_example_key_is_built_by_the_schema() -> None:
    """Each key of db_layout_examples is what the schema builds from its number and hash."""
    checked = 0
    for example in _layout()["examples"]:
        if "entries" in example:
            number, block_hash = example["block_number"], _hex(example["block_hash"])
            for entry in example["entries"]:
                build = BLOCK_KEY_BUILDERS[entry["what"]]
                assert build(number, block_hash) == _hex(entry["key"]), entry["what"]
                parsed = CORETH.parse_key(_hex(entry["key"]))
                assert parsed is not None
                assert parsed.kind is BLOCK_KEY_KINDS[entry["what"]]
                checked += 1
        else:
            key, kind = HEAD_KEYS[example["what"]]
            assert key == _hex(example["key"])
            assert CORETH.parse_key(key) == ParsedKey(kind)
            checked += 1
    assert checked == 3 * 5 + 3


def test_example_values_decode_to_their_block() -> None:
    """Number and canonical values decode to the block; header + body join to the block RLP."""
    blocks = _block_rlp_by_hash()
    for example in (e for e in _layout()["examples"] if "entries" in e):
        number, block_hash = example["block_number"], _hex(example["block_hash"])
        values = {entry["what"]: _hex(entry["value"]) for entry in example["entries"]}
        assert decode_block_number(values["number H+hash"]) == number
        assert decode_block_hash(values["canonical h+num+n"]) == block_hash
        header, body = values["header h+num+hash"], values["body b+num+hash"]
        assert _keccak(header) == block_hash
        joined = _rlp_list(header + _rlp_list_payload(body))
        assert joined == blocks[block_hash]


def test_head_pointers_name_the_last_block() -> None:
    """The head pointer values of the example database all name the fixture's last block."""
    blocks = load_vectors("cchain_blocks.json")["blocks"]
    last = max(
        (b for b in blocks if b["name"].startswith("cchain-fixture/")), key=lambda b: b["number"]
    )
    for example in (e for e in _layout()["examples"] if "entries" not in e):
        assert decode_block_hash(_hex(example["value"])) == _hex(last["hash"])


def test_example_database_is_read_through_the_helpers() -> None:
    """The example entries written into a store read back through the rawdb helpers."""
    store = MemoryStore()
    examples = _layout()["examples"]
    for example in examples:
        for entry in example.get("entries", [example]):
            store.put(_hex(entry["key"]), _hex(entry["value"]))
    for example in (e for e in examples if "entries" in e):
        number, block_hash = example["block_number"], _hex(example["block_hash"])
        assert read_canonical_hash(store, CORETH, number) == block_hash
        assert read_header_number(store, CORETH, block_hash) == number
        header = read_header_rlp(store, CORETH, number, block_hash)
        assert header is not None
        assert _keccak(bytes(header)) == block_hash
        assert read_body_rlp(store, CORETH, number, block_hash) is not None
        assert read_receipts_rlp(store, CORETH, number, block_hash) is not None
    head = read_last_accepted_hash(store, CORETH)
    assert head is not None
    assert read_head_header_hash(store, CORETH) == head
    assert read_last_settled_hash(store, CORETH) is None
    assert read_canonical_hash(store, Schema(), 0) is None


def test_keys_follow_the_geth_layout_without_prefix() -> None:
    """Unprefixed keys are exactly geth's: tag, 8-byte big-endian number, hash or suffix."""
    schema = Schema()
    number = 0x0102030405060708
    assert schema.header_key(number, HASH_A) == b"h" + bytes(range(1, 9)) + HASH_A
    assert schema.body_key(number, HASH_A) == b"b" + bytes(range(1, 9)) + HASH_A
    assert schema.receipts_key(number, HASH_A) == b"r" + bytes(range(1, 9)) + HASH_A
    assert schema.canonical_hash_key(number) == b"h" + bytes(range(1, 9)) + b"n"
    assert schema.header_number_key(HASH_A) == b"H" + HASH_A
    assert schema.header_prefix(number) == b"h" + bytes(range(1, 9))
    assert schema.last_accepted_key() == b"LastBlock"
    assert schema.head_header_key() == b"LastHeader"
    assert schema.head_fast_block_key() == b"LastFast"
    assert schema.last_settled_key() == b"LastFinalized"


def test_number_codec_round_trips_and_checks_bounds() -> None:
    """Numbers encode to 8 big-endian bytes; out-of-range or non-int numbers are refused."""
    for number in (0, 1, 255, 256, 2**32, 2**64 - 1):
        encoded = encode_block_number(number)
        assert len(encoded) == 8
        assert decode_block_number(encoded) == number
        assert decode_block_number(memoryview(encoded)) == number
    for bad in (-1, 2**64):
        with pytest.raises(ValueError):
            encode_block_number(bad)
    for wrong_type in (1.0, "1", True):
        with pytest.raises(TypeError):
            encode_block_number(wrong_type)  # type: ignore[arg-type]


@pytest.mark.parametrize("length", [0, 7, 9, 32])
def test_stored_number_of_wrong_length_is_corruption(length: int) -> None:
    """decode_block_number refuses anything but 8 bytes with StoreCorrupted."""
    with pytest.raises(StoreCorrupted):
        decode_block_number(b"\x01" * length)


@pytest.mark.parametrize("length", [0, 8, 31, 33])
def test_stored_hash_of_wrong_length_is_corruption(length: int) -> None:
    """decode_block_hash refuses anything but 32 bytes with StoreCorrupted."""
    with pytest.raises(StoreCorrupted):
        decode_block_hash(b"\x01" * length)


def test_key_builders_reject_bad_hashes() -> None:
    """A hash that is not 32 bytes of bytes is refused by every key builder."""
    builders: list[Callable[[Any], bytes]] = [
        lambda h: CORETH.header_key(1, h),
        lambda h: CORETH.body_key(1, h),
        lambda h: CORETH.receipts_key(1, h),
        CORETH.header_number_key,
    ]
    for build in builders:
        with pytest.raises(ValueError):
            build(b"\x00" * 31)
        with pytest.raises(TypeError):
            build("00" * 32)
    with pytest.raises(ValueError):
        CORETH.canonical_hash_key(-1)


def test_schema_prefix_is_checked() -> None:
    """A schema prefix must be bytes and leave room for the longest key."""
    with pytest.raises(TypeError):
        Schema("ethdb")
    with pytest.raises(ValueError):
        Schema(b"p" * 500)
    assert Schema(b"p" * 400).header_key(1, HASH_A).startswith(b"p" * 400 + b"h")
    assert Schema() == Schema(b"")
    assert Schema(CORETH_KEY_PREFIX) != Schema()


def test_parse_key_rejects_foreign_keys() -> None:
    """Keys outside the schema (other prefix, unknown tag, wrong length) parse to None."""
    assert CORETH.parse_key(Schema().header_key(1, HASH_A)) is None
    assert CORETH.parse_key(CORETH_KEY_PREFIX + b"x" + b"\x00" * 40) is None
    assert CORETH.parse_key(CORETH_KEY_PREFIX + b"h" + b"\x00" * 8) is None
    assert CORETH.parse_key(CORETH_KEY_PREFIX + b"H" + b"\x00" * 31) is None
    assert CORETH.parse_key(CORETH_KEY_PREFIX + b"LastSomething") is None


@settings(max_examples=60, deadline=None)
@given(
    prefix=st.binary(max_size=40),
    number=st.integers(0, 2**64 - 1),
    block_hash=st.binary(min_size=32, max_size=32),
)
def test_parse_key_inverts_every_builder(prefix: bytes, number: int, block_hash: bytes) -> None:
    """parse_key recovers kind, number and hash from every key the schema builds."""
    schema = Schema(prefix)
    assert schema.parse_key(schema.header_key(number, block_hash)) == ParsedKey(
        KeyKind.HEADER, number, block_hash
    )
    assert schema.parse_key(schema.body_key(number, block_hash)) == ParsedKey(
        KeyKind.BODY, number, block_hash
    )
    assert schema.parse_key(schema.receipts_key(number, block_hash)) == ParsedKey(
        KeyKind.RECEIPTS, number, block_hash
    )
    assert schema.parse_key(schema.canonical_hash_key(number)) == ParsedKey(
        KeyKind.CANONICAL_HASH, number
    )
    assert schema.parse_key(schema.header_number_key(block_hash)) == ParsedKey(
        KeyKind.HEADER_NUMBER, block_hash=block_hash
    )
    assert schema.parse_key(schema.last_settled_key()) == ParsedKey(KeyKind.HEAD_FINALIZED_BLOCK)


def test_block_written_in_one_batch_reads_back() -> None:
    """write_block and the pointer writers fill every key; the read helpers return them."""
    store = MemoryStore()
    with store.write_batch() as batch:
        write_block(batch, CORETH, 7, HASH_A, b"\xc1\x01", b"\xc2\x02\x03", b"\xc0")
        write_canonical_hash(batch, CORETH, 7, HASH_A)
        write_last_accepted_hash(batch, CORETH, HASH_A)
        write_head_header_hash(batch, CORETH, HASH_A)
        write_last_settled_hash(batch, CORETH, HASH_A)
    assert read_header_rlp(store, CORETH, 7, HASH_A) == b"\xc1\x01"
    assert read_body_rlp(store, CORETH, 7, HASH_A) == b"\xc2\x02\x03"
    assert read_receipts_rlp(store, CORETH, 7, HASH_A) == b"\xc0"
    assert read_header_number(store, CORETH, HASH_A) == 7
    assert read_canonical_hash(store, CORETH, 7) == HASH_A
    assert read_last_accepted_hash(store, CORETH) == HASH_A
    assert read_head_header_hash(store, CORETH) == HASH_A
    assert read_last_settled_hash(store, CORETH) == HASH_A
    assert all(key.startswith(CORETH_KEY_PREFIX) for key, _ in store.iterate())


def test_receipts_can_follow_and_blocks_can_be_deleted() -> None:
    """Receipts written later are found; delete_block removes the block but not canonical."""
    store = MemoryStore()
    write_block(store, CORETH, 3, HASH_B, b"\xc0", b"\xc0")
    assert read_receipts_rlp(store, CORETH, 3, HASH_B) is None
    write_receipts(store, CORETH, 3, HASH_B, b"\xc1\x80")
    assert read_receipts_rlp(store, CORETH, 3, HASH_B) == b"\xc1\x80"
    write_canonical_hash(store, CORETH, 3, HASH_B)
    delete_block(store, CORETH, 3, HASH_B)
    for read in (read_header_rlp, read_body_rlp, read_receipts_rlp):
        assert read(store, CORETH, 3, HASH_B) is None
    assert read_header_number(store, CORETH, HASH_B) is None
    assert read_canonical_hash(store, CORETH, 3) == HASH_B


def test_corrupt_pointer_values_raise_store_corrupted() -> None:
    """A stored canonical hash, number or head pointer of the wrong length is corruption."""
    store = MemoryStore()
    store.put(CORETH.canonical_hash_key(5), HASH_A[:-1])
    store.put(CORETH.header_number_key(HASH_A), b"\x00" * 7)
    store.put(CORETH.last_accepted_key(), HASH_A + b"\x00")
    with pytest.raises(StoreCorrupted):
        read_canonical_hash(store, CORETH, 5)
    with pytest.raises(StoreCorrupted):
        read_header_number(store, CORETH, HASH_A)
    with pytest.raises(StoreCorrupted):
        read_last_accepted_hash(store, CORETH)


def test_helpers_read_through_a_snapshot() -> None:
    """The read helpers accept a snapshot and see the store as of its opening."""
    store = MemoryStore()
    write_canonical_hash(store, CORETH, 1, HASH_A)
    with store.snapshot() as snap:
        write_canonical_hash(store, CORETH, 1, HASH_B)
        assert read_canonical_hash(snap, CORETH, 1) == HASH_A
    assert read_canonical_hash(store, CORETH, 1) == HASH_B
