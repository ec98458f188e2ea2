"""The project's checksum: CRC-32 with zlib's values, so stores written with either read
back under the other; and the one framing that ties a stored value to its key."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vmstack.checksum import CHECKSUM_LEN, crc32, frame, keyed_checksum, unframe
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


@given(key=st.binary(max_size=40), value=st.binary(max_size=200))
def test_a_framed_value_reads_back_under_its_key_only(key: bytes, value: bytes) -> None:
    """The stored form is the CRC-32 of key and value, then the value; it reads back under
    its key (as a view, with or without a length), and under another key, damaged anywhere
    or cut, it is StoreCorrupted naming it."""
    stored = frame(key, value)
    assert keyed_checksum(key, value) == zlib.crc32(key + value)
    assert stored == zlib.crc32(key + value).to_bytes(CHECKSUM_LEN, "big") + value
    assert frame(key, memoryview(value)) == stored
    assert unframe(key, memoryview(stored), "the thing") == value
    assert unframe(key, stored, "the thing", length=len(value)) == value
    with pytest.raises(StoreCorrupted, match=r"^the thing fails its checksum"):
        unframe(key + b"\0", stored, "the thing")
    for index in range(len(stored)):
        damaged = bytearray(stored)
        damaged[index] ^= 0x10
        with pytest.raises(StoreCorrupted, match=r"^the thing fails its checksum"):
            unframe(key, bytes(damaged), "the thing")
    expected = f"^the thing is {len(stored) - 1} bytes, not {len(stored)}$"
    with pytest.raises(StoreCorrupted, match=expected):
        unframe(key, stored[:-1], "the thing", length=len(value))
    for length in range(CHECKSUM_LEN):
        with pytest.raises(StoreCorrupted, match="too short to hold its checksum"):
            unframe(key, stored[:length], "the thing")


def test_a_value_moved_to_another_key_of_its_kind_fails() -> None:
    """The case a checksum of the value alone passes: a sound record under a sibling key."""
    stored = frame(b"b" + bytes(32), b"record of block zero")
    with pytest.raises(StoreCorrupted, match="the value of another key"):
        unframe(b"b" + bytes([1]) * 32, stored, "the record")
