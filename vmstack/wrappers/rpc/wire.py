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

__all__ = [
    "BlockFacts",
    "decode_repeated_bytes",
    "encode_parse_block_responses",
    "encode_repeated_bytes",
    "varint",
]

_UINT64_LIMIT = 1 << 64
_INT64_MIN = -(1 << 63)
_INT64_LIMIT = 1 << 63
_ID_LENGTH = 32
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


#: The tag and length before a length-delimited element of field 1, by length, as computed
#: (only lengths under 2^14, two bytes of varint: at most 16,384 of them).
_FIELD_1_PREFIXES: dict[int, bytes] = {}
_CACHED_LENGTHS = 1 << 14


def _length_prefix(tag: int, length: int) -> bytes:
    """The tag byte and the varint length before a length-delimited field."""
    return bytes((tag,)) + varint(length)


def _field_1_prefix(length: int) -> bytes:
    prefix = _FIELD_1_PREFIXES.get(length)
    if prefix is None:
        prefix = _length_prefix(_FIELD_1_BYTES, length)
        if length < _CACHED_LENGTHS:
            _FIELD_1_PREFIXES[length] = prefix
    return prefix


def encode_repeated_bytes(items: Iterable[bytes]) -> bytes:
    """The serialization of a message whose field 1, a ``repeated bytes``, holds ``items``
    in order (and no other field is set). Each element's tag and length are looked up
    (computed once per length), and the message is one join of prefixes and elements
    interleaved: no Python code runs per element unless its length is new."""
    elements = items if isinstance(items, list) else list(items)
    lengths = list(map(len, elements))
    prefixes = list(map(_FIELD_1_PREFIXES.get, lengths))
    if None in prefixes:
        prefixes = list(map(_field_1_prefix, lengths))
    parts: list[bytes] = [b""] * (2 * len(elements))
    parts[0::2] = prefixes  # type: ignore[assignment]  # no None left
    parts[1::2] = elements
    return b"".join(parts)


def _int64(value: int) -> bytes:
    """An ``int64`` field's varint (a negative value as its 64-bit two's complement)."""
    if not _INT64_MIN <= value < -_INT64_MIN:
        raise ValueError(f"an int64 holds -2^63 to 2^63 - 1, not {value}")
    return varint(value & (_UINT64_LIMIT - 1))


#: The facts a ParseBlockResponse carries: id, parent ID, height, timestamp (seconds).
BlockFacts = tuple[bytes, bytes, int, int]


#: A ParseBlockResponse of a 32-byte ID and parent ID, a height of 1 to 4 varint bytes
#: (under 2^28) and a timestamp of 5 (2^28 to 2^35 seconds: 1978 to 3058), as
#: ``bytes % (id, parent_id, height's bytes..., timestamp's bytes...)``, by the height's
#: varint length: the element's tag and length, then each field in field-number order.
_TYPICAL = {
    size: bytes((_FIELD_1_BYTES, 77 + size))  # the length: 78 to 81, none of them b"%"
    + b"\x0a\x20%b\x12\x20%b\x20"
    + b"%c" * size
    + b"\x2a\x06\x08%c%c%c%c%c"
    for size in (1, 2, 3, 4)
}
_TYPICAL_1, _TYPICAL_2, _TYPICAL_3, _TYPICAL_4 = (_TYPICAL[size] for size in (1, 2, 3, 4))
_FIVE_BYTES_MIN = 1 << 28
_FIVE_BYTES_LIMIT = 1 << 35


def encode_parse_block_responses(facts: Iterable[BlockFacts]) -> bytes:
    """``BatchedParseBlockResponse(response=[ParseBlockResponse(id, parent_id, height,
    timestamp=Timestamp(seconds=timestamp)) for each block's facts]).SerializeToString()``,
    built directly: proto3's rules (an empty ``bytes`` field or a zero number is not
    written; the timestamp, a message that is set, always is) in field-number order. A
    block's usual facts (32-byte IDs, a height under 2^28, a timestamp of this millennium)
    are written with one formatting of a template, its varints' bytes computed inline."""
    parts: list[bytes] = []
    append = parts.append
    for block_id, parent_id, height, seconds in facts:
        if (
            _FIVE_BYTES_MIN <= seconds < _FIVE_BYTES_LIMIT
            and 0 < height < 0x10000000
            and len(block_id) == _ID_LENGTH
            and len(parent_id) == _ID_LENGTH
        ):
            s0 = seconds & 0x7F | 0x80
            s1 = (seconds >> 7) & 0x7F | 0x80
            s2 = (seconds >> 14) & 0x7F | 0x80
            s3 = (seconds >> 21) & 0x7F | 0x80
            s4 = seconds >> 28
            if height < 0x80:
                append(_TYPICAL_1 % (block_id, parent_id, height, s0, s1, s2, s3, s4))
            elif height < 0x4000:
                append(
                    _TYPICAL_2
                    % (block_id, parent_id, height & 0x7F | 0x80, height >> 7, s0, s1, s2, s3, s4)
                )
            elif height < 0x200000:
                append(
                    _TYPICAL_3
                    % (
                        block_id,
                        parent_id,
                        height & 0x7F | 0x80,
                        (height >> 7) & 0x7F | 0x80,
                        height >> 14,
                        s0,
                        s1,
                        s2,
                        s3,
                        s4,
                    )
                )
            else:
                append(
                    _TYPICAL_4
                    % (
                        block_id,
                        parent_id,
                        height & 0x7F | 0x80,
                        (height >> 7) & 0x7F | 0x80,
                        (height >> 14) & 0x7F | 0x80,
                        height >> 21,
                        s0,
                        s1,
                        s2,
                        s3,
                        s4,
                    )
                )
            continue
        append(_parse_block_response(block_id, parent_id, height, seconds))
    return b"".join(parts)


def _parse_block_response(block_id: bytes, parent_id: bytes, height: int, seconds: int) -> bytes:
    """One element of :func:`encode_parse_block_responses`, whatever its facts."""
    if not 0 <= height < _UINT64_LIMIT:
        raise ValueError(f"a block's height is a uint64, not {height}")
    timestamp = b"\x08" + _int64(seconds) if seconds else b""
    body = b"".join(
        (
            _length_prefix(0x0A, len(block_id)) if block_id else b"",
            block_id,
            _length_prefix(0x12, len(parent_id)) if parent_id else b"",
            parent_id,
            b"\x20" + varint(height) if height else b"",
            _length_prefix(0x2A, len(timestamp)),
            timestamp,
        )
    )
    return _length_prefix(_FIELD_1_BYTES, len(body)) + body


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
