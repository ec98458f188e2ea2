"""The project's checksum: CRC-32 with zlib's values, so stores written with either read
back under the other; and the two ways a stored value carries it."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vmstack.checksum import (
    CHECKSUM_LEN,
    append_keyed_checksum,
    crc32,
    leading_checksum_holds,
    prepend_checksum,
    read_keyed_value,
)
from vmstack.errors import StoreCorrupted


@given(data=st.binary(max_size=5000), start=st.integers(0, 2**32 - 1))
def test_crc32_equals_zlib_for_any_bytes_and_start_value(data: bytes, start: int) -> None:
    """Every input (empty, short, past the folding width) and every running value gives
    zlib.crc32's answer, from bytes, bytearray and memoryview alike."""
    expected = zlib.crc32(data, start)
    assert crc32(data, start) == expected
    assert crc32(bytearray(data), start) == expected
    assert crc32(memoryview(data), start) == expected


def test_crc32_of_a_large_slice_of_a_view() -> None:
    """A non-zero-offset view of a large buffer (as an LMDB value slice) is summed as its
    own bytes."""
    buffer = bytes(range(256)) * 1024
    view = memoryview(buffer)[7:200_007]
    assert crc32(view) == zlib.crc32(buffer[7:200_007])


def test_crc32_refuses_text() -> None:
    """A str is no bytes-like object: TypeError, as zlib does."""
    with pytest.raises(TypeError):
        crc32("abc")


@given(key=st.binary(max_size=40), value=st.binary(min_size=1, max_size=40))
def test_a_keyed_value_reads_back_under_its_key_only(key: bytes, value: bytes) -> None:
    """The stored form is the value and the CRC-32 of key and value; it reads back under
    its key, and under another key, damaged or cut it is StoreCorrupted naming it."""
    stored = append_keyed_checksum(key, value)
    assert stored == value + zlib.crc32(key + value).to_bytes(CHECKSUM_LEN, "big")
    assert read_keyed_value(key, memoryview(stored), len(value), "the thing") == value
    with pytest.raises(StoreCorrupted, match=r"^the thing fails its checksum$"):
        read_keyed_value(key + b"\0", stored, len(value), "the thing")
    damaged = bytes((stored[0] ^ 1,)) + stored[1:]
    with pytest.raises(StoreCorrupted, match=r"^the thing fails its checksum$"):
        read_keyed_value(key, damaged, len(value), "the thing")
    expected = f"^the thing is {len(stored) - 1} bytes, not {len(stored)}$"
    with pytest.raises(StoreCorrupted, match=expected):
        read_keyed_value(key, stored[:-1], len(value), "the thing")


@given(body=st.binary(max_size=200))
def test_a_leading_checksum_holds_for_its_body_only(body: bytes) -> None:
    """The stored form is the CRC-32 of the body, then the body; any flipped bit, and any
    value too short to hold a checksum, fails."""
    stored = prepend_checksum(body)
    assert stored == zlib.crc32(body).to_bytes(CHECKSUM_LEN, "big") + body
    assert leading_checksum_holds(stored) and leading_checksum_holds(memoryview(stored))
    for index in range(len(stored)):
        damaged = bytearray(stored)
        damaged[index] ^= 0x10
        assert not leading_checksum_holds(bytes(damaged))
    assert not any(leading_checksum_holds(stored[:length]) for length in range(CHECKSUM_LEN))
