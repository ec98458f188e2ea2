"""The records of an era1 file and what they hold, at the byte level: the e2store record
head (``type u16 LE | length u32 LE | reserved u16 = 0``), the snappy framing of the header,
body and receipts values (:func:`snappy_frame`, :func:`snappy_unframe`), the accumulator
(:func:`accumulator_root`, over each header's Keccak-256) and writing one file
(:class:`EraRecord`, :func:`write_era1`). Nothing here decodes a block.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import attrs
import cramjam
import google_crc32c

from vmstack.errors import StoreCorrupted
from vmstack.keccak import keccak256

__all__ = [
    "ERA1_BLOCKS",
    "EraRecord",
    "MAX_RECORD_VALUE",
    "RECORD_HEAD",
    "TYPE_ACCUMULATOR",
    "TYPE_BLOCK_INDEX",
    "TYPE_BODY",
    "TYPE_ERE_INDEX",
    "TYPE_HEADER",
    "TYPE_RECEIPTS",
    "TYPE_TOTAL_DIFFICULTY",
    "TYPE_VERSION",
    "U64",
    "accumulator_root",
    "e2store_record",
    "snappy_frame",
    "snappy_unframe",
    "write_era1",
]

#: Blocks per era1 file (the accumulator's list limit).
ERA1_BLOCKS: Final = 8192

TYPE_VERSION: Final = 0x3265
TYPE_HEADER: Final = 0x03
TYPE_BODY: Final = 0x04
TYPE_RECEIPTS: Final = 0x05
TYPE_TOTAL_DIFFICULTY: Final = 0x06
TYPE_ACCUMULATOR: Final = 0x07
TYPE_BLOCK_INDEX: Final = 0x3266
TYPE_ERE_INDEX: Final = 0x3267

#: The largest record value read (go-ethereum's e2store limit).
MAX_RECORD_VALUE: Final = 50 * 1024 * 1024
#: An e2store record's head: type, value length, reserved.
RECORD_HEAD: Final = struct.Struct("<HIH")
#: A little-endian u64, as the block index holds them.
U64: Final = struct.Struct("<Q")
_STREAM_ID: Final = b"\xff\x06\x00\x00sNaPpY"
_MAX_CHUNK: Final = 65536


def e2store_record(kind: int, value: bytes) -> bytes:
    """One e2store record: its head, then ``value``."""
    return RECORD_HEAD.pack(kind, len(value), 0) + value


# --- snappy framing ------------------------------------------------------------------------


def _masked_crc32c(data: bytes) -> int:
    crc: int = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def snappy_frame(data: bytes) -> bytes:
    """``data`` in the snappy framing format: the stream identifier, then one compressed
    chunk (masked CRC-32C of its uncompressed bytes) per 64 KiB."""
    parts = [_STREAM_ID]
    for start in range(0, len(data), _MAX_CHUNK):
        chunk = data[start : start + _MAX_CHUNK]
        body = struct.pack("<I", _masked_crc32c(chunk)) + bytes(cramjam.snappy.compress_raw(chunk))
        parts.append(bytes((0x00,)) + len(body).to_bytes(3, "little") + body)
    return b"".join(parts)


def snappy_unframe(framed: bytes | memoryview) -> bytes:
    """The bytes of a snappy-framed stream, every chunk's masked CRC-32C checked.

    Raises :class:`StoreCorrupted` (naming the file too, in an archive) for a
    missing stream identifier, an unskippable reserved chunk, a chunk over 64 KiB
    uncompressed, bytes that do not decompress, or a CRC that does not match.
    """
    view = memoryview(framed)
    if bytes(view[:10]) != _STREAM_ID:
        raise StoreCorrupted("snappy stream does not start with the stream identifier")
    out: list[bytes] = []
    offset, end = 10, len(view)
    while offset < end:
        if offset + 4 > end:
            raise StoreCorrupted("snappy chunk header is truncated")
        kind = view[offset]
        length = int.from_bytes(view[offset + 1 : offset + 4], "little")
        start = offset + 4
        offset = start + length
        if offset > end:
            raise StoreCorrupted("snappy chunk runs past the end of its record")
        if kind == 0xFF:
            if bytes(view[start - 4 : offset]) != _STREAM_ID:
                raise StoreCorrupted("malformed snappy stream identifier")
            continue
        if kind in (0x00, 0x01):
            if length < 4:
                raise StoreCorrupted("snappy chunk too short for its CRC")
            expected = int.from_bytes(view[start : start + 4], "little")
            payload = bytes(view[start + 4 : offset])
            if kind == 0x00:
                try:
                    if cramjam.snappy.decompress_raw_len(payload) > _MAX_CHUNK:
                        raise StoreCorrupted("snappy chunk decompresses to more than 64 KiB")
                    chunk = bytes(cramjam.snappy.decompress_raw(payload))
                except cramjam.DecompressionError as error:
                    raise StoreCorrupted(f"snappy chunk does not decompress ({error})") from None
            else:
                if len(payload) > _MAX_CHUNK:
                    raise StoreCorrupted("uncompressed snappy chunk over 64 KiB")
                chunk = payload
            if _masked_crc32c(chunk) != expected:
                raise StoreCorrupted("snappy chunk CRC-32C does not match its bytes")
            out.append(chunk)
        elif 0x02 <= kind <= 0x7F:
            raise StoreCorrupted(f"reserved unskippable snappy chunk type 0x{kind:02x}")
    return b"".join(out)


# --- the accumulator -----------------------------------------------------------------------


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


_ZERO_HASHES = [bytes(32)]
for _ in range(13):
    _ZERO_HASHES.append(_sha256(_ZERO_HASHES[-1] * 2))


def accumulator_root(hashes: Sequence[bytes], total_difficulties: Sequence[int]) -> bytes:
    """The era1 accumulator: the SSZ hash tree root of the list of header records
    ``(block hash, total difficulty as uint256 LE)``, limit 8,192, its length mixed in."""
    if len(hashes) != len(total_difficulties) or len(hashes) > ERA1_BLOCKS:
        raise ValueError(
            f"an accumulator takes as many hashes as total difficulties, at most {ERA1_BLOCKS}"
        )
    layer = [
        _sha256(h + td.to_bytes(32, "little"))
        for h, td in zip(hashes, total_difficulties, strict=True)
    ]
    for depth in range(13):
        if len(layer) % 2:
            layer.append(_ZERO_HASHES[depth])
        layer = [_sha256(layer[i] + layer[i + 1]) for i in range(0, len(layer), 2)]
    root = layer[0] if layer else _ZERO_HASHES[13]
    return _sha256(root + len(hashes).to_bytes(32, "little"))


# --- writing -------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class EraRecord:
    """One block of an era1 file: its header, body and receipts RLP and total difficulty."""

    header_rlp: bytes
    body_rlp: bytes
    receipts_rlp: bytes
    total_difficulty: int


def write_era1(
    directory: Path | str, network: str, start: int, records: Sequence[EraRecord]
) -> Path:
    """Write ``records`` (blocks ``start``, ``start + 1``, ...) as one era1 file in
    ``directory`` and return its path, named by its epoch and accumulator root. ``start`` is
    a multiple of 8,192 and there are 1 to 8,192 records."""
    if start % ERA1_BLOCKS or not 0 < len(records) <= ERA1_BLOCKS:
        raise ValueError("an era1 file starts at a multiple of 8192 and holds 1 to 8192 blocks")
    parts = [e2store_record(TYPE_VERSION, b"")]
    written = 8
    offsets: list[int] = []
    for record in records:
        offsets.append(written)
        td = record.total_difficulty.to_bytes(32, "little")
        for kind, value in (
            (TYPE_HEADER, snappy_frame(record.header_rlp)),
            (TYPE_BODY, snappy_frame(record.body_rlp)),
            (TYPE_RECEIPTS, snappy_frame(record.receipts_rlp)),
            (TYPE_TOTAL_DIFFICULTY, td),
        ):
            parts.append(e2store_record(kind, value))
            written += 8 + len(value)
    root = accumulator_root(
        [keccak256(r.header_rlp) for r in records], [r.total_difficulty for r in records]
    )
    parts.append(e2store_record(TYPE_ACCUMULATOR, root))
    base = written + 40
    index = [U64.pack(start)]
    index.extend(struct.pack("<q", offset - base) for offset in offsets)
    index.append(U64.pack(len(records)))
    parts.append(e2store_record(TYPE_BLOCK_INDEX, b"".join(index)))
    path = Path(directory) / f"{network}-{start // ERA1_BLOCKS:05d}-{root[:4].hex()}.era1"
    path.write_bytes(b"".join(parts))
    return path
