"""Byte-level RLP helpers: stitching, splitting, in-place reads, strict framing checks, and
the encoder the records use."""

from __future__ import annotations

from typing import Any

import pytest
import rlp
from hypothesis import given, settings
from hypothesis import strategies as st

from vmstack.cchain import (
    block_bytes,
    block_hash,
    check_rlp,
    header_parent_hash,
    header_slice,
    iter_list_items,
    keccak256,
    list_items,
    list_prefix,
    read_prefix,
    split_block,
)
from vmstack.cchain.rlpbytes import RLPItem, encode_item, stitched_parent_hash
from vmstack.cchain.types import decode_rlp
from vmstack.errors import InvalidBlock

PARENT = bytes(range(32))


def _header(extra: int = 600) -> list[bytes]:
    """A header-like list: a 32-byte first field and padding to reach a realistic size."""
    return [PARENT, b"\x11" * extra, b"\x05"]


def _enc(value: Any) -> bytes:
    return rlp.encode(value, infer_serializer=False)


BODIES = {
    "empty ethereum": [[], []],
    "empty avalanche": [[], [], b"", b""],
    "short list": [[b"\x01"], [], []],
    "one-byte length": [[b"\x01" * 60], []],
    "two-byte length": [[b"\x02" * 300], [], []],
    "three-byte length": [[b"\x03" * 70_000], [], b"", b"\x04" * 10],
}
HEADERS = {
    "short header": [PARENT],
    "one-byte header": _header(100),
    "two-byte header": _header(600),
    "three-byte header": _header(70_000),
}


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
@pytest.mark.parametrize("header", HEADERS.values(), ids=HEADERS.keys())
def test_block_bytes_equals_encoding_the_joined_list(header: list[bytes], body: list[Any]) -> None:
    """block_bytes(h, b) is the RLP of [h, *b] for every prefix width, from bytes and views."""
    expected = _enc([header, *body])
    header_rlp, body_rlp = _enc(header), _enc(body)
    assert block_bytes(header_rlp, body_rlp) == expected
    views = memoryview(bytearray(header_rlp)), memoryview(bytearray(body_rlp))
    assert block_bytes(*views) == expected
    assert split_block(expected) == (header_rlp, body_rlp)
    assert header_parent_hash(header_rlp) == PARENT
    assert stitched_parent_hash(expected, views[0]) == PARENT
    assert bytes(header_slice(expected)) == header_rlp
    assert block_hash(expected) == keccak256(header_rlp)


def test_block_over_64_kib_uses_the_three_byte_length() -> None:
    """A block whose payload exceeds 64 KiB gets the 0xfa prefix with a 3-byte length."""
    data = block_bytes(_enc(_header()), _enc(BODIES["three-byte length"]))
    assert data[0] == 0xFA
    assert int.from_bytes(data[1:4], "big") == len(data) - 4


GOOD_HEADER = _enc(_header())
GOOD_BODY = _enc([[b"\x01" * 300], []])

MALFORMED_PAIRS = {
    "empty header": (b"", GOOD_BODY),
    "header is a string": (_enc(b"\x11" * 600), GOOD_BODY),
    "header trailing byte": (GOOD_HEADER + b"\x00", GOOD_BODY),
    "header truncated": (GOOD_HEADER[:-1], GOOD_BODY),
    "header length leading zero": (b"\xfa\x00" + GOOD_HEADER[1:], GOOD_BODY),
    "header long form for short": (b"\xf8\x02\x01\x02", GOOD_BODY),
    "header length truncated": (b"\xf9\x01", GOOD_BODY),
    "empty body": (GOOD_HEADER, b""),
    "body is a string": (GOOD_HEADER, _enc(b"\x11" * 300)),
    "body trailing byte": (GOOD_HEADER, GOOD_BODY + b"\xc0"),
    "body truncated": (GOOD_HEADER, GOOD_BODY[:-1]),
    "short body too long": (GOOD_HEADER, b"\xc3\xc0\xc0"),
    "short body trailing": (GOOD_HEADER, b"\xc1\xc0\xc0"),
    "body 0xf8 for 3 bytes": (GOOD_HEADER, b"\xf8\x03\xc0\xc0\xc0"),
    "body 0xf9 for 200 bytes": (GOOD_HEADER, b"\xf9\x00\xc8" + b"\x01" * 200),
    "body declares 2**60 bytes": (GOOD_HEADER, b"\xff" + (2**60).to_bytes(8, "big") + b"\xc0"),
}


@pytest.mark.parametrize("pair", MALFORMED_PAIRS.values(), ids=MALFORMED_PAIRS.keys())
def test_block_bytes_rejects_malformed_framing(pair: tuple[bytes, bytes]) -> None:
    """Each malformed header or body framing raises InvalidBlock, from bytes and from views."""
    header_rlp, body_rlp = pair
    with pytest.raises(InvalidBlock):
        block_bytes(header_rlp, body_rlp)
    with pytest.raises(InvalidBlock):
        block_bytes(memoryview(header_rlp), memoryview(body_rlp))


@pytest.mark.parametrize(
    "header",
    [b"", b"\xc0", _enc([b"\x01" * 31]), _enc([[PARENT]]), _enc(PARENT), GOOD_HEADER + b"\x00"],
    ids=["empty", "empty list", "31-byte field", "list field", "a string", "trailing byte"],
)
def test_header_parent_hash_rejects_what_is_not_a_header(header: bytes) -> None:
    """A header whose framing or first field is wrong raises InvalidBlock."""
    with pytest.raises(InvalidBlock):
        header_parent_hash(header)


def test_stitched_parent_hash_refuses_a_header_whose_first_field_is_not_a_hash() -> None:
    """A stitched block whose header starts with anything but a 32-byte string is
    InvalidBlock with header_parent_hash's message, whatever the prefix widths."""
    for header in ([b"\x01" * 31, b"\x11" * 600], [[PARENT], b"\x11" * 600], [b"x"]):
        header_rlp = _enc(header)
        data = block_bytes(header_rlp, _enc([[], []]))
        with pytest.raises(InvalidBlock, match="parent hash"):
            stitched_parent_hash(data, header_rlp)


def test_header_parent_hash_reads_views_of_short_headers() -> None:
    """A short header (under 256 bytes) and a view of a long one both give the parent hash."""
    assert header_parent_hash(_enc([PARENT, b"x"])) == PARENT
    assert header_parent_hash(memoryview(bytearray(GOOD_HEADER))) == PARENT


@pytest.mark.parametrize(
    "block",
    [b"\xc0", _enc([PARENT, []]), _enc([[b"\x01"]])[:-1], _enc([_header(), []]) + b"\x00"],
    ids=["empty list", "header is a string", "truncated", "trailing byte"],
)
def test_header_slice_and_split_reject_malformed_blocks(block: bytes) -> None:
    """A block without a well-framed header list first raises InvalidBlock."""
    with pytest.raises(InvalidBlock):
        header_slice(block)
    with pytest.raises(InvalidBlock):
        split_block(block)


def test_split_block_checks_the_framing_of_the_remaining_items() -> None:
    """An item after the header that overruns the block raises InvalidBlock."""
    inner = _enc(_header()) + b"\xc5\xc0"
    block = list_prefix(len(inner)) + inner
    with pytest.raises(InvalidBlock):
        split_block(block)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\x05", (False, 0, 1)),
        (b"\x80", (False, 1, 0)),
        (b"\x81\x80", (False, 1, 1)),
        (b"\xb8\x38" + b"a" * 56, (False, 2, 56)),
        (b"\xc0", (True, 1, 0)),
        (b"\xf8\x38" + b"\x01" * 56, (True, 2, 56)),
        (b"\xfa\x01\x00\x00" + b"\x01" * 65536, (True, 4, 65536)),
    ],
)
def test_read_prefix_reads_each_form(data: bytes, expected: tuple[bool, int, int]) -> None:
    """read_prefix returns kind, payload offset and length for every prefix form."""
    assert read_prefix(data) == expected
    assert read_prefix(memoryview(data)) == expected


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "end of the input"),
        (b"\x81\x05", "single byte"),
        (b"\x83ab", "past the end"),
        (b"\xc3\x01", "past the end"),
        (b"\xb8\x05abcde", "long length form"),
        (b"\xb9\x00\x40" + b"a" * 64, "leading zero"),
        (b"\xbb\x01", "truncated"),
        (b"\xff" + (2**60).to_bytes(8, "big"), "declares"),
        (b"\xbf" + b"\xff" * 8, "declares"),
    ],
)
def test_read_prefix_rejects_bad_prefixes(data: bytes, reason: str) -> None:
    """Non-canonical or overrunning prefixes raise InvalidBlock saying what was wrong."""
    with pytest.raises(InvalidBlock, match=reason):
        read_prefix(data)


def test_read_prefix_respects_the_scope_end() -> None:
    """An item that fits the buffer but not the given end is rejected."""
    with pytest.raises(InvalidBlock):
        read_prefix(b"\x83abc", 0, 3)


def test_list_items_yield_views_of_each_item() -> None:
    """list_items gives each first-level item's full encoding, in order."""
    items = [b"\x01", b"", [b"ab", []], b"x" * 100]
    data = _enc(items)
    assert [bytes(v) for v in list_items(data)] == [_enc(i) for i in items]
    assert [bytes(v) for v in iter_list_items(memoryview(data))] == [_enc(i) for i in items]


def test_iter_list_items_raises_when_it_reaches_a_bad_item() -> None:
    """A malformed item is reported when the iteration reaches it, after the good ones."""
    data = b"\xc4\x01\x83ab"
    items = iter_list_items(data)
    assert bytes(next(items)) == b"\x01"
    with pytest.raises(InvalidBlock):
        next(items)
    with pytest.raises(InvalidBlock):
        list_items(b"\x80")


@pytest.mark.parametrize("length", [0, 1, 55, 56, 255, 256, 65535, 65536, 2**24, 2**40])
def test_list_prefix_matches_pyrlp(length: int) -> None:
    """list_prefix agrees with the rlp package at every width boundary."""
    assert list_prefix(length) == rlp.codec.length_prefix(length, 0xC0)


def test_list_prefix_rejects_impossible_lengths() -> None:
    """A negative length or one of 2**64 bytes is a ValueError."""
    for length in (-1, 2**64):
        with pytest.raises(ValueError):
            list_prefix(length)


def test_check_rlp_rejects_nested_overrun_and_trailing_bytes() -> None:
    """A nested item overrunning its list, or trailing bytes, raise InvalidBlock."""
    check_rlp(_enc([[b"ab", [b"c"]], b""]))
    for data in (b"\xc4\xc2\x83ab", b"\xc2\xc0\xc0\xc0", b"\xc1\x81\x00", b"\x05\x05"):
        with pytest.raises(InvalidBlock):
            check_rlp(data)


_items: st.SearchStrategy[Any] = st.recursive(
    st.binary(max_size=80),
    lambda children: st.lists(children, max_size=6),
    max_leaves=30,
)


def _mutations(data: bytes) -> st.SearchStrategy[bytes]:
    """Near misses of a valid encoding: one byte changed, cut short, or extended."""
    index = st.integers(0, len(data) - 1)
    return st.one_of(
        st.tuples(index, st.integers(0, 255)).map(
            lambda t: data[: t[0]] + bytes((t[1],)) + data[t[0] + 1 :]
        ),
        index.map(lambda i: data[:i]),
        st.binary(min_size=1, max_size=3).map(lambda extra: data + extra),
    )


@settings(max_examples=150, deadline=None)
@given(_items)
def test_check_rlp_accepts_every_encoding(value: Any) -> None:
    """Whatever the rlp package encodes, check_rlp accepts and the strict decoder inverts."""
    data = _enc(value)
    check_rlp(data)
    assert decode_rlp(data, "value") == value


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=40), _items.map(_enc).flatmap(_mutations)))
def test_check_rlp_agrees_with_the_strict_decoder(data: bytes) -> None:
    """On arbitrary bytes, check_rlp and the strict decoder accept and reject alike."""
    try:
        decode_rlp(data, "data")
        decoded = True
    except InvalidBlock:
        decoded = False
    try:
        check_rlp(data)
        checked = True
    except InvalidBlock:
        checked = False
    assert decoded == checked


def test_check_rlp_bounds_nesting_depth() -> None:
    """check_rlp refuses lists nested deeper than max_depth and accepts them at it."""
    from vmstack.cchain import check_rlp, list_prefix

    nested = b"\x80"
    for _ in range(3):
        nested = list_prefix(len(nested)) + nested
    check_rlp(nested, max_depth=3)
    with pytest.raises(InvalidBlock, match="nested deeper than 2"):
        check_rlp(nested, max_depth=2)


def test_a_large_deeply_nested_body_is_refused_before_decoding() -> None:
    """A body over 16 KiB nested 500 deep is InvalidBlock, found by the depth walk."""
    import tracemalloc

    from vmstack.cchain import AVALANCHE, list_prefix

    nested = b"\xb9\x50\x00" + b"\x01" * 0x5000
    for _ in range(500):
        nested = list_prefix(len(nested)) + nested
    tracemalloc.start()
    try:
        with pytest.raises(InvalidBlock, match="nested deeper than 3"):
            AVALANCHE.decode_body(nested)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(nested)


# --- the encoder the records use --------------------------------------------------------


_encodable: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.binary(max_size=80),
        st.binary(max_size=80).map(bytearray),
        st.integers(0, 255).map(lambda b: bytes((b,))),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=6), st.lists(children, max_size=6).map(tuple)
    ),
    max_leaves=40,
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_encodable)
def test_encode_item_gives_the_bytes_of_rlp_encode(value: Any) -> None:
    """For any tree of byte strings (bytearray too) and lists (tuples too), encode_item's
    bytes are the rlp package's."""
    assert encode_item(value) == _enc(value)


@pytest.mark.parametrize("length", [0, 1, 55, 56, 255, 256, 1023, 1024, 65535, 65536, 70000])
def test_encode_item_matches_rlp_at_every_length_width(length: int) -> None:
    """Strings and lists across the prefix width boundaries, and single bytes on each
    side of 0x80, alone and inside a list."""
    string = bytes(range(256)) * (length // 256) + bytes(range(length % 256))
    assert encode_item(string) == _enc(string)
    assert encode_item([string]) == _enc([string])
    items: list[RLPItem] = [b"\x01"] * length
    assert encode_item(items) == _enc(items)
    assert encode_item([[b""] * length, b"x"]) == _enc([[b""] * length, b"x"])


@pytest.mark.parametrize("byte", [0x00, 0x7F, 0x80, 0xFF])
def test_encode_item_writes_a_single_byte_as_itself_only_below_0x80(byte: int) -> None:
    """A single byte under 0x80 is its own encoding; from 0x80 on it gets a prefix."""
    single = bytes((byte,))
    expected = single if byte < 0x80 else b"\x81" + single
    assert encode_item(single) == expected
    assert encode_item([single]) == bytes((0xC0 + len(expected),)) + expected


@pytest.mark.parametrize("value", [1, "a", None, True, memoryview(b"ab"), [b"a", [7]]])
def test_encode_item_refuses_what_is_not_an_item(value: Any) -> None:
    """Anything but byte strings and lists in the tree is a ValueError."""
    with pytest.raises(ValueError, match="cannot RLP-encode"):
        encode_item(value)
