"""Byte-level RLP helpers that no library offers: work on encodings without decoding them.

A store keeps a block as two values, its header RLP and its body RLP (geth's rawdb layout).
The block's RLP is ``[header, *body items]``, so it is one new list prefix followed by the
header bytes and the body's payload: :func:`block_bytes` builds it with a single copy, with
no decoding. :func:`header_parent_hash` reads the parent hash (the header's first field) in
place (:func:`stitched_parent_hash` in the bytes :func:`block_bytes` stitched), and
:func:`header_slice` finds the header inside a block's bytes, so a block's hash is
``keccak256(header_slice(block))`` with no re-encoding. :func:`frame_body_fields` checks the
framing of a block's body fields without decoding the lists, :class:`ItemSpan` says where
each lies, and :func:`list_item_encodings` gives a list's items as a trie stores them.
:func:`encode_item` is the encoder the records use: the same bytes as ``rlp.encode``, in
one walk of the item tree.

The strict prefix reader they build on (:func:`~vmstack.rlpreader.read_prefix`, list
items without decoding) is :mod:`vmstack.rlpreader`, beneath the store. Every reading
function accepts ``bytes``, ``bytearray`` or a ``memoryview`` (e.g. a
zero-copy LMDB buffer) and is strict: a non-canonical length prefix, a length past the end
of the buffer (even a declared length of 2**60: nothing is allocated for it), or trailing
bytes raise :class:`~vmstack.errors.InvalidBlock` with a message that says what was wrong.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, TypeAlias

import attrs

from vmstack.errors import InvalidBlock
from vmstack.keccak import keccak256
from vmstack.rlpreader import Buffer, list_payload_offset, read_prefix

if TYPE_CHECKING:
    from vmstack.cchain.codec import Flavour

__all__ = [
    "ItemSpan",
    "block_bytes",
    "block_hash",
    "check_rlp",
    "decode_string_list",
    "encode_item",
    "first_item_offset",
    "frame_body_fields",
    "header_parent_hash",
    "header_slice",
    "list_item_encodings",
    "list_prefix",
    "split_block",
    "stitched_parent_hash",
]

RLPItem: TypeAlias = bytes | list["RLPItem"]
"""A raw RLP item tree, what :func:`encode_item` writes (it takes ``bytearray`` strings
and tuples too, as ``rlp.encode`` does)."""

_BYTE_U16 = struct.Struct(">BH")
_unpack_byte_u16 = _BYTE_U16.unpack_from
_pack_byte_u16 = _BYTE_U16.pack
_join = b"".join
_BYTE_U16_BYTE = struct.Struct(">BHB")


def _long_prefix(length: int, offset: int) -> bytes:
    """The prefix of a string (``offset`` 0x80) or list (0xC0) of ``length`` >= 56 bytes."""
    width = (length.bit_length() + 7) // 8
    if width > 8:
        raise ValueError("an RLP item cannot exceed 2**64 - 1 bytes")
    return bytes((offset + 55 + width,)) + length.to_bytes(width, "big")


def _prefix_table(offset: int) -> tuple[bytes, ...]:
    """The prefixes of items of 0 to 1023 payload bytes: strings at ``offset`` 0x80,
    lists at 0xC0."""
    return tuple(bytes((offset + n,)) if n < 56 else _long_prefix(n, offset) for n in range(1024))


#: The prefixes of strings and lists of up to 1 KiB, by length (the common items).
_STRING_PREFIXES = _prefix_table(0x80)
_LIST_PREFIXES = _prefix_table(0xC0)


def list_prefix(payload_length: int) -> bytes:
    """The canonical RLP prefix of a list whose payload is ``payload_length`` bytes."""
    if payload_length < 1024:
        if payload_length < 0:
            raise ValueError("a payload length cannot be negative")
        return _LIST_PREFIXES[payload_length]
    return _long_prefix(payload_length, 0xC0)


def encode_item(item: RLPItem) -> bytes:
    """The canonical RLP encoding of a raw item tree (``bytes`` or ``bytearray`` strings,
    lists or tuples of items), byte for byte what ``rlp.encode`` gives; ``ValueError``
    for anything else in the tree (an int, a str, ``None``), which is a caller's mistake.

    The records encode through it: it walks the tree once and joins each list's parts,
    a string item being written inline rather than through a call of its own.
    """
    if type(item) is bytes or (type(item) is not list and isinstance(item, bytearray)):
        length = len(item)
        if length == 1 and item[0] < 0x80:
            return bytes(item)
        if length < 1024:
            return _STRING_PREFIXES[length] + item
        return _long_prefix(length, 0x80) + item
    if type(item) is not list and not isinstance(item, list | tuple):
        raise ValueError(f"cannot RLP-encode a {type(item).__name__}: items are bytes or lists")
    parts: list[bytes] = []
    append = parts.append
    for child in item:
        if type(child) is bytes:
            length = len(child)
            if length == 1:
                append(child if child[0] < 0x80 else b"\x81" + child)
            elif length < 1024:
                append(_STRING_PREFIXES[length] + child)
            else:
                append(_long_prefix(length, 0x80) + child)
        else:
            append(encode_item(child))
    payload = _join(parts)
    length = len(payload)
    if length < 1024:
        return _LIST_PREFIXES[length] + payload
    return _long_prefix(length, 0xC0) + payload


def block_bytes(header_rlp: Buffer, body_rlp: Buffer) -> bytes:
    """The block RLP ``[header, *body items]`` from a header RLP and a body RLP.

    One new list prefix over ``header_rlp ++ payload(body_rlp)``, produced with exactly one
    copy of the data. Both inputs must each be exactly one canonical RLP list (no trailing
    bytes, no truncation); only their outer framing is checked, not their items, which keeps
    this the cheap step of the ancestors walk (use :func:`check_rlp` for a full check).
    """
    # The common case, a header of 256 bytes to 64 KiB (a two-byte length, as every real
    # header has) and a block under 64 KiB, is checked with two struct reads and as few
    # steps as CPython allows: this is the hot step of the ancestors walk. Anything else,
    # including every error, goes through the general path, which also words the message.
    header_len = len(header_rlp)
    body_len = len(body_rlp)
    try:
        h0, h_declared = _unpack_byte_u16(header_rlp)
        b0, b_declared = _unpack_byte_u16(body_rlp)
    except struct.error:
        return _block_bytes_checked(header_rlp, body_rlp)
    if h0 == 0xF9 and h_declared == header_len - 3 and h_declared > 0xFF:
        if b0 == 0xF9 and b_declared == body_len - 3 and b_declared > 0xFF:
            body_start = 3
        elif 0xC0 <= b0 < 0xF8 and b0 - 0xBF == body_len:
            body_start = 1
        elif b0 == 0xF8 and b_declared >> 8 == body_len - 2 and body_len > 57:
            body_start = 2
        else:
            return _block_bytes_checked(header_rlp, body_rlp)
        payload = header_len + body_len - body_start
        if payload < 0x10000:
            if type(body_rlp) is not memoryview:
                body_rlp = memoryview(body_rlp)
            return _join((_pack_byte_u16(0xF9, payload), header_rlp, body_rlp[body_start:]))
    return _block_bytes_checked(header_rlp, body_rlp)


def _block_bytes_checked(header_rlp: Buffer, body_rlp: Buffer) -> bytes:
    """:func:`block_bytes` for any framing: every prefix width, and every error message."""
    list_payload_offset(header_rlp, "header")
    body_start = list_payload_offset(body_rlp, "body")
    payload = len(header_rlp) + len(body_rlp) - body_start
    return _join((list_prefix(payload), header_rlp, memoryview(body_rlp)[body_start:]))


def header_parent_hash(header_rlp: Buffer) -> bytes:
    """The parent hash (the first field, 32 bytes) of a header RLP, read without decoding."""
    n = len(header_rlp)
    if n > 0xFF:
        h0, declared, f0 = _BYTE_U16_BYTE.unpack_from(header_rlp)
        if h0 == 0xF9 and declared == n - 3 and declared > 0xFF and f0 == 0xA0:
            return bytes(header_rlp[4:36])
    start = list_payload_offset(header_rlp, "header")
    if n < start + 33 or header_rlp[start] != 0xA0:
        raise InvalidBlock("header: the first field (parent hash) is not a 32-byte string")
    return bytes(header_rlp[start + 1 : start + 33])


def stitched_parent_hash(block_rlp: bytes, header_rlp: Buffer) -> bytes:
    """The parent hash of a block that :func:`block_bytes` stitched from ``header_rlp``:
    what :func:`header_parent_hash` reads, read in the block's own bytes (one slice, no
    view) when a three-byte list prefix puts the header at offset 3 and the header's own
    three-byte prefix puts its first field at 6, as in every real block; from
    ``header_rlp`` otherwise, with its checks and messages."""
    if block_rlp[0] == 0xF9 and block_rlp[3] == 0xF9 and block_rlp[6] == 0xA0:
        return block_rlp[7:39]
    return header_parent_hash(header_rlp)


def _header_bounds(block_rlp: Buffer) -> tuple[int, int]:
    start = list_payload_offset(block_rlp, "block")
    is_list, payload, length = read_prefix(block_rlp, start)
    if not is_list:
        raise InvalidBlock("block: the first item (header) is not an RLP list")
    return start, payload + length


def header_slice(block_rlp: Buffer) -> memoryview:
    """The header's RLP inside a block's RLP, as a view (no copy).

    ``keccak256(header_slice(block))`` is the block hash: the hash of the header bytes as they
    stand, with no re-encoding.
    """
    start, end = _header_bounds(block_rlp)
    return memoryview(block_rlp)[start:end]


def block_hash(block_rlp: Buffer) -> bytes:
    """The block hash: keccak256 of the header RLP inside ``block_rlp``."""
    return keccak256(header_slice(block_rlp))


def split_block(block_rlp: Buffer) -> tuple[bytes, bytes]:
    """Split a block RLP into ``(header RLP, body RLP)``; the inverse of :func:`block_bytes`.

    The body is a new list over the block's remaining items. The framing of those items is
    checked (each must be a complete RLP item), their contents are not.
    """
    start, header_end = _header_bounds(block_rlp)
    offset = header_end
    end = len(block_rlp)
    while offset < end:
        _, payload, length = read_prefix(block_rlp, offset, end)
        offset = payload + length
    view = memoryview(block_rlp)
    rest = view[header_end:]
    return bytes(view[start:header_end]), b"".join((list_prefix(len(rest)), rest))


def decode_string_list(data: Buffer) -> list[bytes] | None:
    """The items of ``data`` if it is exactly one canonical RLP list of strings (a header);
    ``None`` if it is anything else, for the general decoder to judge and word.

    Decoding a header is the costly part of parsing a block, and a header is a flat list:
    one pass over its item prefixes, with :func:`read_prefix`'s strict rules, replaces the
    ``rlp`` package's recursive decoder on this path.
    """
    end = len(data)
    try:
        is_list, offset, length = read_prefix(data, 0, end)
        if not is_list or offset + length != end:
            return None
        items: list[bytes] = []
        while offset < end:
            b0 = data[offset]
            if b0 < 0x80:  # a single byte is its own encoding
                items.append(bytes(data[offset : offset + 1]))
                offset += 1
            elif b0 < 0xB8:  # a short string: the hot case, read inline
                start = offset + 1
                offset = start + b0 - 0x80
                if offset > end or (b0 == 0x81 and data[start] < 0x80):
                    return None
                items.append(bytes(data[start:offset]))
            elif b0 < 0xC0:
                _, start, length = read_prefix(data, offset, end)
                offset = start + length
                items.append(bytes(data[start:offset]))
            else:
                return None
    except InvalidBlock:
        return None
    return items


def check_rlp(data: Buffer, *, max_depth: int | None = None) -> None:
    """Check that ``data`` is exactly one canonical RLP item, nested items included, with
    lists nested at most ``max_depth`` deep (the outer list is depth 1) when it is given.

    Builds nothing: it walks the prefixes only, so a lazy parser can reject malformed bytes
    before deciding what to decode. Raises ``InvalidBlock`` naming the offending offset.
    """
    end = len(data)
    is_list, payload, length = read_prefix(data, 0, end)
    if payload + length != end:
        raise InvalidBlock(f"{end - payload - length} trailing bytes after the RLP item")
    stack: list[int] = []
    offset = payload
    scope_end = payload + length if is_list else offset
    while True:
        if offset < scope_end:
            is_list, payload, length = read_prefix(data, offset, scope_end)
            if is_list:
                stack.append(scope_end)
                if max_depth is not None and len(stack) >= max_depth:
                    raise InvalidBlock(f"lists nested deeper than {max_depth} at offset {offset}")
                scope_end = payload + length
                offset = payload
            else:
                offset = payload + length
        elif stack:
            scope_end = stack.pop()
        else:
            return


# --- a block's body fields ------------------------------------------------------------

_BODY_LIST_FIELDS = frozenset({"transactions", "uncles", "withdrawals"})


@attrs.frozen(slots=True)
class ItemSpan:
    """Where one first-level item of a block's RLP lies: ``raw[start:end]`` is its whole
    encoding, ``raw[payload:end]`` its payload."""

    start: int
    payload: int
    end: int
    is_list: bool


def first_item_offset(raw: bytes) -> int:
    """Offset of the first item in an RLP list whose framing is already checked."""
    first = raw[0]
    return 1 if first < 0xF8 else 1 + first - 0xF7


def frame_body_fields(flavour: Flavour, raw: bytes, header_end: int) -> tuple[ItemSpan, ...]:
    """Check the framing of a block's body fields (after the header) against ``flavour``:
    their count, which are lists and which strings, and the string fields' values (version
    and extData are cheap to decode). Transactions, uncles and withdrawals are left for a
    lazy decode. Returns where each field lies."""
    fields = flavour.body_fields
    spans: list[ItemSpan] = []
    offset, end = header_end, len(raw)
    while offset < end:
        if len(spans) == len(fields):
            raise InvalidBlock(f"block has more than {len(fields)} body fields")
        field = fields[len(spans)]
        is_list, payload, length = read_prefix(raw, offset, end)
        if is_list != (field.name in _BODY_LIST_FIELDS):
            kind = "list" if field.name in _BODY_LIST_FIELDS else "string"
            raise InvalidBlock(f"block body field {field.name} must be an RLP {kind}")
        if not is_list:
            field.decode(flavour, raw[payload : payload + length])
        spans.append(ItemSpan(offset, payload, payload + length, is_list))
        offset = payload + length
    required = sum(1 for field in fields if not field.optional)
    if len(spans) < required:
        raise InvalidBlock(f"block has {len(spans)} body fields, expected at least {required}")
    return tuple(spans)


def list_item_encodings(
    raw: bytes, span: ItemSpan, limit: int | None = None, what: str = "items"
) -> list[bytes]:
    """The encodings of the items of the list at ``span``, as a trie stores them: a list
    item (a legacy transaction, a withdrawal) as it stands, a string item (a typed
    transaction) as its payload. With a ``limit``, a list of more items is
    ``InvalidBlock``, found after reading at most ``limit + 1`` prefixes."""
    encodings: list[bytes] = []
    offset = span.payload
    while offset < span.end:
        if limit is not None and len(encodings) == limit:
            raise InvalidBlock(f"block carries more than {limit} {what}")
        is_list, payload, length = read_prefix(raw, offset, span.end)
        encodings.append(
            raw[offset : payload + length] if is_list else raw[payload : payload + length]
        )
        offset = payload + length
    return encodings
