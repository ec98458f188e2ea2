"""The project's checksum: CRC-32 with zlib's values, so stores written with either read
back under the other."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vmstack.checksum import crc32


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
