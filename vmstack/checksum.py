"""The checksum of every value vmstack stores with one: CRC-32, and the one framing that
ties a stored value to its key.

:func:`crc32` is the CRC-32 of zlib and gzip (the same polynomial, the same values as
``zlib.crc32``), computed by Intel's ISA-L through the ``isal`` package, which folds with
carry-less multiplication and is about 2.5-3x faster than the standard library's zlib on
the 0.5-20 KB values checked on the serving path (block bytes, proposer records).

Every checksum vmstack stores covers the key the value is stored under as well as the
value: :func:`keyed_checksum` is the CRC-32 of ``key + value``. So a damaged value fails,
and so does a sound value copied under another key of its kind (another block's record,
another height's pointer), which a checksum of the value alone would pass. A record of
vmstack's own is stored framed, one way for every kind (pointers, heights, records of any
length, the configuration record)::

    frame(key, value) = keyed_checksum(key, value) (4 bytes, big-endian) + value

and read back with :func:`unframe`, which checks the length (when the kind has a fixed
one) and the checksum and raises :class:`~vmstack.errors.StoreCorrupted` otherwise. A new
kind of record adopts the pair and nothing else. Values that keep another program's layout
(the C-chain's go-ethereum keys) are not framed; the C-chain's integrity entry holds their
keyed checksums instead (:mod:`vmstack.cchain.integrity`).

Changing this framing changes every stored record: :data:`vmstack.store.format.FORMAT_VERSION`
moves with it.
"""

from __future__ import annotations

from typing import Final

from isal import isal_zlib

from vmstack.errors import StoreCorrupted

__all__ = ["CHECKSUM_LEN", "crc32", "frame", "keyed_checksum", "unframe"]

#: ``crc32(data, value=0) -> int``: the CRC-32 of ``data`` (any bytes-like object),
#: continuing from ``value``; equal to ``zlib.crc32(data, value)``. Bound directly, so a
#: hot path pays one C call.
crc32: Final = isal_zlib.crc32

#: The bytes of a stored checksum (big-endian).
CHECKSUM_LEN: Final = 4


def keyed_checksum(key: bytes | memoryview, value: bytes | memoryview) -> int:
    """The CRC-32 of ``key + value`` (without building it): the checksum of ``value``
    stored under ``key``."""
    return crc32(value, crc32(key))


def frame(key: bytes, value: bytes | memoryview) -> bytes:
    """What is stored under ``key`` for ``value``: its keyed checksum (4 bytes,
    big-endian), then ``value``."""
    return keyed_checksum(key, value).to_bytes(CHECKSUM_LEN, "big") + value


def unframe(
    key: bytes, stored: bytes | memoryview, what: str, *, length: int | None = None
) -> memoryview:
    """The value :func:`frame` stored under ``key``, as a view of ``stored`` (no copy).

    :class:`~vmstack.errors.StoreCorrupted`, its message starting with ``what``, if
    ``stored`` is too short to hold a checksum, its value is not ``length`` bytes (when
    given), or its checksum does not match: the value is damaged, or it is another key's.
    """
    size = len(stored)
    if length is not None and size != CHECKSUM_LEN + length:
        raise StoreCorrupted(f"{what} is {size} bytes, not {CHECKSUM_LEN + length}")
    if size < CHECKSUM_LEN:
        raise StoreCorrupted(f"{what} is {size} bytes, too short to hold its checksum")
    view = memoryview(stored)
    value = view[CHECKSUM_LEN:]
    if keyed_checksum(key, value) != int.from_bytes(view[:CHECKSUM_LEN], "big"):
        raise StoreCorrupted(
            f"{what} fails its checksum: it is damaged, or it is the value of another key"
        )
    return value
