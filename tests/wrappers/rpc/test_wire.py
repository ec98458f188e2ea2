"""The batched calls' messages built and read in one go are the protobuf runtime's bytes,
and the handed-out blocks kept in one pass keep their rules."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given, settings
from hypothesis import strategies as st

from vmstack.wrappers.rpc import vm_pb2
from vmstack.wrappers.rpc.handed import HANDED_OUT_OVERHEAD, HandedOut
from vmstack.wrappers.rpc.wire import (
    decode_repeated_bytes,
    encode_parse_block_responses,
    encode_repeated_bytes,
    varint,
)

_items = st.lists(st.binary(max_size=300), max_size=20)
_facts = st.lists(
    st.tuples(
        st.one_of(st.just(b""), st.binary(min_size=32, max_size=32), st.binary(max_size=40)),
        st.one_of(st.just(b""), st.binary(min_size=32, max_size=32), st.binary(max_size=40)),
        st.one_of(st.just(0), st.integers(0, 1 << 20), st.integers(0, (1 << 64) - 1)),
        st.one_of(st.just(0), st.integers(-(1 << 63), (1 << 63) - 1), st.integers(0, 1 << 35)),
    ),
    max_size=10,
)


@settings(max_examples=200, deadline=None)
@given(_items)
def test_a_repeated_bytes_field_is_written_as_the_runtime_writes_it(items: list[bytes]) -> None:
    wire = encode_repeated_bytes(items)
    assert wire == vm_pb2.GetAncestorsResponse(blks_bytes=items).SerializeToString()
    assert wire == vm_pb2.BatchedParseBlockRequest(request=items).SerializeToString()
    assert decode_repeated_bytes(wire) == items


@settings(max_examples=200, deadline=None)
@given(_facts)
def test_parse_block_responses_are_written_as_the_runtime_writes_them(
    facts: list[tuple[bytes, bytes, int, int]],
) -> None:
    expected = vm_pb2.BatchedParseBlockResponse(
        response=[
            vm_pb2.ParseBlockResponse(
                id=block_id,
                parent_id=parent_id,
                height=height,
                timestamp=Timestamp(seconds=seconds),
            )
            for block_id, parent_id, height, seconds in facts
        ]
    )
    assert encode_parse_block_responses(facts) == expected.SerializeToString()


def test_a_long_element_and_values_of_every_varint_length() -> None:
    long = bytes(range(256)) * 700  # a three-byte length
    assert decode_repeated_bytes(encode_repeated_bytes([long, b""])) == [long, b""]
    assert varint(0) == b"\x00"
    for value in (1, 127, 128, 16383, 16384, (1 << 21) - 1, 1 << 21, 1 << 28, 1 << 35):
        assert varint(value) == Timestamp(seconds=value).SerializeToString()[1:]
    assert varint((1 << 64) - 1) == bytes([0xFF] * 9 + [0x01])
    for bad in (-1, 1 << 64):
        with pytest.raises(ValueError):
            varint(bad)
    with pytest.raises(ValueError):
        encode_parse_block_responses([(b"i" * 32, b"p" * 32, 1 << 64, 1)])


@pytest.mark.parametrize(
    "wire",
    [
        b"\x0a",  # a tag without a length
        b"\x0a\x05abc",  # an element cut short
        b"\x0a\x80",  # a length cut short
        b"\x12\x01a",  # another field
        b"\x08\x01",  # a number
        b"\x0a\x01a\x10\x01",  # an element, then an unknown field
        b"\x0a" + b"\xff" * 10 + b"\x01",  # a length past 64 bits
    ],
)
def test_any_other_encoding_is_left_to_the_runtime(wire: bytes) -> None:
    """What is not laid out element by element is None: the caller reads it with the
    protobuf runtime, which reads what protobuf allows and refuses the rest."""
    assert decode_repeated_bytes(wire) is None


class _Block:
    def __init__(self, block_id: bytes, data: bytes) -> None:
        self.id = block_id
        self._data = data

    def __bytes__(self) -> bytes:
        return self._data


def _block(block_id: bytes, data: bytes) -> Any:
    """A block as the store sees one: an ID and bytes."""
    return _Block(block_id, data)


def test_a_batch_is_kept_in_order_bounded_and_found_by_bytes_and_digest() -> None:
    datas = [bytes([index]) * 100 for index in range(10)]
    blocks: list[Any] = [_block(bytes([index // 2]) * 32, data) for index, data in enumerate(datas)]
    cost = 100 + HANDED_OUT_OVERHEAD
    handed = HandedOut(limit=6 * cost)
    handed.keep_batch(blocks, datas)
    # The four least recently handed out went; the newest six are kept.
    assert handed.counted == (6, 6 * cost)
    assert handed.get(datas[3]) is None
    assert handed.get(datas[4]) is blocks[4]
    # Blocks 8 and 9 share an ID: the latest handed out under it is 9, until 8 verifies.
    assert handed.data_for(blocks[8].id) == datas[9]
    handed.verified(blocks[8], datas[8])
    assert handed.data_for(blocks[8].id) == datas[8]
    digest = hashlib.sha256(datas[9]).digest()
    assert handed.find(blocks[9].id, digest) == (blocks[9], datas[9])
    assert handed.find(blocks[7].id, digest) is None  # the digest of another ID's bytes
    handed.forget(datas[8])
    assert handed.data_for(blocks[8].id) == datas[9]
    # Kept again, the same bytes move to the newest end and are counted once.
    handed.keep_batch(blocks[4:5], datas[4:5])
    handed.keep_batch(blocks[:2], datas[:2])
    assert handed.counted == (6, 6 * cost)
    assert handed.get(datas[4]) is blocks[4]
    assert handed.get(datas[5]) is None
    with pytest.raises(ValueError):
        handed.keep_batch(blocks[:2], datas[:1])


def test_a_found_twin_under_an_id_is_neither_the_latest_nor_the_verified() -> None:
    """A decision naming bytes kept under its ID that are neither the latest nor the
    verified ones still reaches them."""
    first, second, third = (_block(b"x" * 32, bytes([index]) * 50) for index in range(3))
    handed = HandedOut()
    handed.keep_batch([first, second, third], [bytes(first), bytes(second), bytes(third)])
    handed.verified(third, bytes(third))
    digest = hashlib.sha256(bytes(first)).digest()
    assert handed.find(b"x" * 32, digest) == (first, bytes(first))


def test_kept_blocks_are_hashed_only_for_decisions_and_once_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Keeping a batch hashes nothing; decisions hash what they need, and a caller naming
    digests the server does not hold never has the same bytes hashed twice."""
    from vmstack.wrappers.rpc import handed as handed_module

    hashed: list[bytes] = []

    def counting(data: bytes) -> bytes:
        hashed.append(data)
        return hashlib.sha256(data).digest()

    monkeypatch.setattr(handed_module, "block_digest", counting)
    datas = [bytes([index]) * 64 for index in range(50)]
    blocks = [_block(bytes([index]) * 32, data) for index, data in enumerate(datas)]
    handed = HandedOut()
    handed.keep_batch(blocks, datas)
    assert hashed == []
    digest = hashlib.sha256(datas[7]).digest()
    assert handed.find(blocks[7].id, digest) == (blocks[7], datas[7])
    assert hashed == [datas[7]]
    for _ in range(3):
        assert handed.find(blocks[3].id, b"\0" * 32) is None
    assert sorted(hashed) == sorted(datas)  # every kept block once, none twice
    handed.forget(datas[7])
    assert handed.find(blocks[7].id, digest) is None


@pytest.mark.parametrize(
    "height",
    [1, 0x7F, 0x80, 0x3FFF, 0x4000, 0x1FFFFF, 0x200000, 0xFFFFFFF, 0x10000000, 1 << 40],
)
@pytest.mark.parametrize(
    "seconds", [(1 << 28) - 1, 1 << 28, 1_700_000_000, (1 << 35) - 1, 1 << 35, 0, -1]
)
def test_each_template_of_a_usual_block_writes_the_runtime_bytes(height: int, seconds: int) -> None:
    """Heights of each varint length and timestamps at the usual range's bounds (and past
    them, the general path) are written as the protobuf runtime writes them."""
    facts = [(bytes([height % 251]) * 32, b"p" * 32, height, seconds), (b"i" * 32, b"", 0, 0)]
    expected = vm_pb2.BatchedParseBlockResponse(
        response=[
            vm_pb2.ParseBlockResponse(
                id=block_id, parent_id=parent, height=number, timestamp=Timestamp(seconds=stamp)
            )
            for block_id, parent, number, stamp in facts
        ]
    )
    assert encode_parse_block_responses(facts) == expected.SerializeToString()


def test_elements_of_every_length_kind_are_written_in_one_message() -> None:
    """Elements whose lengths are cached, new, and too long to cache, in one message."""
    items = [b"", b"a" * 127, b"b" * 128, b"c" * 16383, b"d" * 16384, b"e" * 70000, b"a" * 127]
    for _ in range(2):  # the lengths new, then known
        wire = encode_repeated_bytes(iter(items))
        assert wire == vm_pb2.GetAncestorsResponse(blks_bytes=items).SerializeToString()


def test_a_batch_is_kept_under_the_blocks_own_bytes_when_they_are_the_callers() -> None:
    """Given the blocks' own bytes, the store keeps each block under them when they equal
    the caller's (one object held, not two) and under the caller's bytes otherwise."""
    own = [bytes([index]) * 40 for index in range(3)]
    sent = [bytes(data) for data in own]  # equal bytes, other objects
    sent[2] = b"z" * 40  # bytes other than the block's own
    blocks: list[Any] = [_block(bytes([index]) * 32, data) for index, data in enumerate(own)]
    handed = HandedOut()
    handed.keep_batch(blocks, sent, [block.id for block in blocks], own)
    assert handed.counted == (3, 3 * (40 + HANDED_OUT_OVERHEAD))
    assert [key is data for key, data in zip(handed._kept, own, strict=True)] == [
        True,
        True,
        False,
    ]
    assert handed.get(sent[2]) is blocks[2]
    assert handed.data_for(blocks[0].id) is own[0]
    with pytest.raises(ValueError):
        handed.keep_batch(blocks, sent, None, own[:2])
