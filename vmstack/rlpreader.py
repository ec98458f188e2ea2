"""Strict RLP reading at the byte level, the one reader every floor's parser uses.

:func:`read_prefix` reads one item's prefix, :func:`list_payload_offset` checks that a
buffer is exactly one canonical list, and :func:`list_items` / :func:`iter_list_items` give
a list's first-level items as views of their encodings, without decoding them. The era1
reader beneath the C-chain (:mod:`vmstack.store.history`) and the C-chain's byte-level
helpers (:mod:`vmstack.cchain.rlpbytes`) both read with these.

Every function accepts ``bytes``, ``bytearray`` or a ``memoryview`` (e.g. a zero-copy LMDB
buffer) and is strict: a non-canonical length prefix, a length past the end of the buffer
(even a declared length of 2**60: nothing is allocated for it), or trailing bytes raise
:class:`~vmstack.errors.InvalidBlock` with a message that says what was wrong.
"""

from __future__ import annotations

from collections.abc import Iterator

from vmstack.errors import InvalidBlock

__all__ = ["Buffer", "iter_list_items", "list_items", "list_payload_offset", "read_prefix"]

Buffer = bytes | bytearray | memoryview
"""A contiguous byte buffer: what the readers here (and every byte-level RLP helper) read."""


def read_prefix(data: Buffer, offset: int = 0, end: int | None = None) -> tuple[bool, int, int]:
    """Read the item prefix at ``offset``; returns ``(is_list, payload_offset, payload_length)``.

    The item must lie within ``data[offset:end]`` (``end`` defaults to the buffer's end). A
    single byte below 0x80 is its own payload: ``(False, offset, 1)``. Raises
    ``InvalidBlock`` for a missing prefix, a non-canonical prefix (a long form for a short
    length, leading zero bytes in a length, a one-byte string that should have been the
    byte itself) or a payload that runs past ``end``.
    """
    if end is None:
        end = len(data)
    if offset >= end:
        raise InvalidBlock(f"RLP item expected at offset {offset}, found the end of the input")
    b0 = data[offset]
    if b0 < 0x80:
        return False, offset, 1
    if b0 < 0xB8:
        length = b0 - 0x80
        start = offset + 1
        if start + length > end:
            raise InvalidBlock(f"RLP string at offset {offset} runs past the end of its input")
        if length == 1 and data[start] < 0x80:
            raise InvalidBlock(
                f"non-canonical RLP at offset {offset}: single byte below 0x80 encoded as string"
            )
        return False, start, length
    if b0 < 0xC0:
        is_list = False
        width = b0 - 0xB7
    elif b0 < 0xF8:
        length = b0 - 0xC0
        start = offset + 1
        if start + length > end:
            raise InvalidBlock(f"RLP list at offset {offset} runs past the end of its input")
        return True, start, length
    else:
        is_list = True
        width = b0 - 0xF7
    start = offset + 1 + width
    if start > end:
        raise InvalidBlock(f"RLP length at offset {offset} is truncated")
    if data[offset + 1] == 0:
        raise InvalidBlock(f"non-canonical RLP at offset {offset}: length has leading zero bytes")
    length = int.from_bytes(data[offset + 1 : start], "big")
    if length < 56:
        raise InvalidBlock(
            f"non-canonical RLP at offset {offset}: long length form used for {length} bytes"
        )
    if start + length > end:
        kind = "list" if is_list else "string"
        raise InvalidBlock(
            f"RLP {kind} at offset {offset} declares {length} bytes, "
            f"only {end - start} remain in its input"
        )
    return is_list, start, length


def list_payload_offset(data: Buffer, what: str) -> int:
    """Check ``data`` is exactly one canonical RLP list; return its payload offset."""
    n = len(data)
    if n == 0:
        raise InvalidBlock(f"{what}: empty input, expected an RLP list")
    b0 = data[0]
    if b0 < 0xC0:
        raise InvalidBlock(f"{what}: expected an RLP list, found a string")
    if b0 < 0xF8:
        if b0 - 0xBF != n:
            raise _length_mismatch(what, b0 - 0xC0, n - 1)
        return 1
    start = b0 - 0xF6
    if n < start:
        raise InvalidBlock(f"{what}: RLP list length is truncated")
    if data[1] == 0:
        raise InvalidBlock(f"{what}: non-canonical RLP, list length has leading zero bytes")
    length = int.from_bytes(data[1:start], "big")
    if length < 56:
        raise InvalidBlock(f"{what}: non-canonical RLP, long length form for {length} bytes")
    if length != n - start:
        raise _length_mismatch(what, length, n - start)
    return start


def _length_mismatch(what: str, declared: int, available: int) -> InvalidBlock:
    if declared > available:
        return InvalidBlock(
            f"{what}: truncated, the RLP list declares {declared} bytes, {available} present"
        )
    return InvalidBlock(
        f"{what}: {available - declared} trailing bytes after the RLP list of {declared} bytes"
    )


def list_items(data: Buffer) -> list[memoryview]:
    """The first-level items of the single RLP list ``data``, each a view of its full encoding.

    Checks the framing only: the outer list spans the whole buffer, and each item's prefix is
    canonical and ends within the list. Raises ``InvalidBlock`` otherwise.
    """
    return list(iter_list_items(data))


def iter_list_items(data: Buffer) -> Iterator[memoryview]:
    """Yield the first-level items of the single RLP list ``data`` (see :func:`list_items`).

    The outer framing is checked before the first item is yielded; a malformed item raises
    ``InvalidBlock`` when the iteration reaches it.
    """
    offset = list_payload_offset(data, "RLP list")
    end = len(data)
    view = memoryview(data)
    while offset < end:
        _, payload, length = read_prefix(data, offset, end)
        item_end = payload + length
        yield view[offset:item_end]
        offset = item_end
