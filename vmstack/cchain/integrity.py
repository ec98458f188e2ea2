"""The values of vmstack's integrity keys (their keys are :mod:`vmstack.cchain.rawdb`'s):
the integrity entry of a block and the integrity-start marker.

An integrity entry is the :func:`checksum` of the block RLP (4 bytes, big-endian), then the
checksum of the receipts RLP once they are written (4 more), both keyed by the entry's own
key (:func:`vmstack.checksum.keyed_checksum` over the integrity key, which names the
block's number and hash, and the RLP): a header, body or receipts copied from another block
under this block's keys fails, even together with that block's entry. The marker is the
first block number written with an entry (8 bytes, big-endian), framed by
:func:`vmstack.checksum.frame` (a checksum over its key and the number), so that the
marker, which decides which blocks are checked at all, is checked itself. Every value here
is checked when decoded: a bad length or checksum is
:class:`~vmstack.errors.StoreCorrupted`, never a wrong answer.
"""

from __future__ import annotations

import struct
from typing import Final

import attrs

from vmstack.checksum import frame, keyed_checksum, unframe
from vmstack.errors import StoreCorrupted

__all__ = [
    "Integrity",
    "checksum",
    "decode_integrity",
    "decode_integrity_start",
    "encode_integrity",
    "encode_integrity_start",
    "integrity_block_checksum",
]

_CRC = struct.Struct(">I")
_CRC_PAIR = struct.Struct(">II")
_NUMBER_LENGTH = 8


#: ``checksum(integrity_key, data) -> int``: the integrity checksum of a block's stored
#: bytes (or its receipts), :func:`vmstack.checksum.keyed_checksum` under the block's
#: integrity key (a 32-bit unsigned int), bound directly so the serving path pays no
#: extra call.
checksum: Final = keyed_checksum


@attrs.frozen(slots=True)
class Integrity:
    """A decoded integrity entry: the checksum of the block RLP and, once the block's
    receipts are written, of the receipts RLP."""

    block: int
    receipts: int | None = None


def encode_integrity(block_checksum: int, receipts_checksum: int | None = None) -> bytes:
    """An integrity entry: 4 big-endian bytes of the block RLP's checksum, then 4 of the
    receipts RLP's checksum when the receipts are written."""
    if receipts_checksum is None:
        return _CRC.pack(block_checksum)
    return _CRC_PAIR.pack(block_checksum, receipts_checksum)


def decode_integrity(data: bytes | memoryview) -> Integrity:
    """An integrity entry read back; :class:`StoreCorrupted` unless it is 4 or 8 bytes."""
    if len(data) == 4:
        return Integrity(_CRC.unpack(data)[0])
    if len(data) == 8:
        block, receipts = _CRC_PAIR.unpack(data)
        return Integrity(block, receipts)
    raise StoreCorrupted(f"a stored integrity entry is {len(data)} bytes, not 4 or 8")


def integrity_block_checksum(data: bytes | memoryview) -> int:
    """Just the block checksum of an integrity entry (what a reader serving block bytes
    needs), without building a record; :class:`StoreCorrupted` unless it is 4 or 8 bytes."""
    if len(data) != 4 and len(data) != 8:
        raise StoreCorrupted(f"a stored integrity entry is {len(data)} bytes, not 4 or 8")
    checksum: int = _CRC.unpack_from(data)[0]
    return checksum


def encode_integrity_start(key: bytes, encoded_number: bytes) -> bytes:
    """The integrity-start marker stored under ``key``: the 8-byte block number, framed
    (:func:`vmstack.checksum.frame`)."""
    return frame(key, encoded_number)


def decode_integrity_start(key: bytes, value: bytes | memoryview) -> int:
    """The block number of the integrity-start marker ``value`` read under ``key``;
    :class:`StoreCorrupted` unless it is a number with its valid checksum."""
    number = unframe(key, value, "the integrity-start marker", length=_NUMBER_LENGTH)
    return int.from_bytes(number, "big")
