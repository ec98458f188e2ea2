"""The batched calls' messages in protobuf's wire format, built and read in one go.

A GetAncestors answer or a BatchedParseBlock request is one repeated ``bytes`` field of
thousands of elements, and a BatchedParseBlock answer one ``ParseBlockResponse`` per block.
Building such a message through the protobuf runtime copies every element into it, then
again when it is serialized, and reading one back copies every element out of it once
more; these functions write the same bytes directly (one join) and read them with one
slice per element:

- :func:`encode_repeated_bytes` is byte for byte what ``SerializeToString`` gives for a
  message whose only set field is a repeated ``bytes`` field (``GetAncestorsResponse``,
  ``BatchedParseBlockRequest``);
- :func:`encode_parse_block_responses` is byte for byte ``BatchedParseBlockResponse``'s
  serialization for blocks given by their facts (id, parent ID, height, timestamp);
- :func:`decode_repeated_bytes` reads the elements of such a repeated field from an
  encoding laid out as those functions and protobuf runtimes lay it out (each element's
  tag, length and bytes, nothing else), and answers ``None`` for any other encoding, which
  the caller then reads with the protobuf runtime (unknown fields, another layout, or
  bytes that are not a message at all, which it refuses). The client reads a GetAncestors
  answer with the protobuf runtime itself: for thousands of elements its C decoder makes
  the byte strings faster than a slice per element in Python.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from vmstack.interfaces import Block

__all__ = [
    "BlockFacts",
    "block_facts",
    "decode_repeated_bytes",
    "encode_parse_block_responses",
    "encode_repeated_bytes",
    "varint",
]

_UINT64_LIMIT = 1 << 64
_INT64_MIN = -(1 << 63)
_INT64_LIMIT = 1 << 63
_ID_LENGTH = 32
#: Each byte value as a bytes object of its own.
_BYTE = tuple(bytes((value,)) for value in range(256))
#: Wire type 2 (length-delimited) of field 1: the tag every repeated field here carries.
_FIELD_1_BYTES = 0x0A


def varint(value: int) -> bytes:
    """``value`` (0 to 2^64 - 1) as a protobuf base-128 varint."""
    if value < 0x80:
        if value < 0:
            raise ValueError(f"a varint holds 0 to 2^64 - 1, not {value}")
        return bytes((value,))
    if value < 0x4000:
        return bytes((value & 0x7F | 0x80, value >> 7))
    if value < 0x800000000:  # 2^35: a timestamp in seconds, for millennia
        if value < 0x200000:
            return bytes((value & 0x7F | 0x80, (value >> 7) & 0x7F | 0x80, value >> 14))
        if value < 0x10000000:
            return bytes(
                (
                    value & 0x7F | 0x80,
                    (value >> 7) & 0x7F | 0x80,
                    (value >> 14) & 0x7F | 0x80,
                    value >> 21,
                )
            )
        return bytes(
            (
                value & 0x7F | 0x80,
                (value >> 7) & 0x7F | 0x80,
                (value >> 14) & 0x7F | 0x80,
                (value >> 21) & 0x7F | 0x80,
                value >> 28,
            )
        )
    if value >= _UINT64_LIMIT:
        raise ValueError(f"a varint holds 0 to 2^64 - 1, not {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@lru_cache(maxsize=4096)
def _length_prefix(tag: int, length: int) -> bytes:
    """The tag byte and the varint length before a length-delimited field."""
    return bytes((tag,)) + varint(length)


def encode_repeated_bytes(items: Iterable[bytes]) -> bytes:
    """The serialization of a message whose field 1, a ``repeated bytes``, holds ``items``
    in order (and no other field is set)."""
    prefix = _length_prefix
    parts: list[bytes] = []
    append = parts.append
    for item in items:
        append(prefix(_FIELD_1_BYTES, len(item)))
        append(item)
    return b"".join(parts)


def _int64(value: int) -> bytes:
    """An ``int64`` field's varint (a negative value as its 64-bit two's complement)."""
    if not _INT64_MIN <= value < -_INT64_MIN:
        raise ValueError(f"an int64 holds -2^63 to 2^63 - 1, not {value}")
    return varint(value & (_UINT64_LIMIT - 1))


#: The facts a ParseBlockResponse carries: id, parent ID, height, timestamp (seconds).
BlockFacts = tuple[bytes, bytes, int, int]


def block_facts(blocks: Iterable[Block]) -> list[BlockFacts]:
    """Each block's :data:`BlockFacts`, read once."""
    return [(block.id, block.parent_id, block.height, block.timestamp) for block in blocks]


def encode_parse_block_responses(facts: Iterable[BlockFacts]) -> bytes:
    """``BatchedParseBlockResponse(response=[ParseBlockResponse(id, parent_id, height,
    timestamp=Timestamp(seconds=timestamp)) for each block's facts]).SerializeToString()``,
    built directly: proto3's rules (an empty ``bytes`` field or a zero number is not
    written; the timestamp, a message that is set, always is) in field-number order."""
    parts: list[bytes] = []
    append = parts.append
    prefix = _length_prefix
    byte = _BYTE
    for block_id, parent_id, height, seconds in facts:
        if (
            len(block_id) == _ID_LENGTH
            and len(parent_id) == _ID_LENGTH
            and 0 < height < _UINT64_LIMIT
            and 0 < seconds < _INT64_LIMIT
        ):
            # Every field set, the body under 128 bytes: its length is one byte.
            stamp = varint(seconds)
            body = b"".join(
                (
                    b"\x0a\x20",
                    block_id,
                    b"\x12\x20",
                    parent_id,
                    b"\x20",
                    varint(height),
                    b"\x2a",
                    byte[len(stamp) + 1],
                    b"\x08",
                    stamp,
                )
            )
            append(b"\x0a" + byte[len(body)])
            append(body)
            continue
        if not 0 <= height < _UINT64_LIMIT:
            raise ValueError(f"a block's height is a uint64, not {height}")
        timestamp = b"\x08" + _int64(seconds) if seconds else b""
        body = b"".join(
            (
                prefix(0x0A, len(block_id)) if block_id else b"",
                block_id,
                prefix(0x12, len(parent_id)) if parent_id else b"",
                parent_id,
                b"\x20" + varint(height) if height else b"",
                prefix(0x2A, len(timestamp)),
                timestamp,
            )
        )
        append(prefix(_FIELD_1_BYTES, len(body)))
        append(body)
    return b"".join(parts)


def decode_repeated_bytes(data: bytes) -> list[bytes] | None:
    """The elements of field 1 (a ``repeated bytes``) of the message ``data``, when
    ``data`` is nothing but that field's elements, each as tag, varint length and bytes;
    ``None`` for any other encoding (read it with the protobuf runtime instead)."""
    out: list[bytes] = []
    append = out.append
    size = len(data)
    index = 0
    while index < size:
        if data[index] != _FIELD_1_BYTES or index + 1 >= size:
            return None
        byte = data[index + 1]
        index += 2
        if byte < 0x80:
            length = byte
        else:
            length = byte & 0x7F
            shift = 7
            while True:
                if index >= size or shift > 56:
                    return None
                byte = data[index]
                index += 1
                length |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
        end = index + length
        if end > size:
            return None
        append(data[index:end])
        index = end
    return out
