"""avalanchego's bloom filter (``utils/bloom``), byte for byte: the hash of a key and a salt,
the filter's add and membership rules, its wire form, and the sizing functions.

The wire form of a filter is one byte of hash count ``k`` (1 to 16), then the ``k`` seeds
as big-endian 64-bit words, then the entries (at least one byte). Adding a 64-bit hash
``h`` runs, for each seed in turn, ``h = rotl64(h, 17) ^ seed`` and sets bit ``h % m``
(``m`` the number of entry bits; bit ``i % 8`` of byte ``i // 8``); a hash is contained
when every one of those bits is set. :func:`bloom_hash` gives a key's hash under a salt:
the first 8 bytes of ``sha256(key || salt)``, big-endian.

The sizing functions compute in IEEE doubles exactly as upstream does, so
``optimal_entries(8192, 0.01)`` is 9,815 bytes, ``optimal_hashes(9815, 8192)`` is 7, and
``estimate_count(7, 9815, 0.05)`` is 11,836 (see ``docs/gossip.md``).
"""

from __future__ import annotations

import hashlib
import math
import os
import struct
import threading
from collections.abc import Sequence
from typing import Final, Self

from vmstack.errors import MalformedRequest

__all__ = [
    "BloomFilter",
    "MAX_HASHES",
    "MIN_ENTRIES",
    "MIN_HASHES",
    "bloom_hash",
    "estimate_count",
    "optimal_entries",
    "optimal_hashes",
    "optimal_parameters",
]

#: The fewest hashes (seeds) a filter has.
MIN_HASHES: Final = 1
#: The most hashes a filter has (a false-positive probability of 2^-16 at optimal sizes).
MAX_HASHES: Final = 16
#: The fewest entry bytes a filter has.
MIN_ENTRIES: Final = 1

_BITS_PER_BYTE: Final = 8
_SEED_BYTES: Final = 8
_HASH_ROTATION: Final = 17
_MASK64: Final = (1 << 64) - 1
#: Go's ``math.MaxInt`` on a 64-bit machine: what the sizing functions saturate at.
_MAX_INT: Final = (1 << 63) - 1
_LN2_SQUARED: Final = math.log(2) * math.log(2)
_UINT64_BE: Final = struct.Struct(">Q")
_sha256 = hashlib.sha256


def bloom_hash(key: bytes, salt: bytes) -> int:
    """The 64-bit hash of ``key`` under ``salt``: the first 8 bytes of
    ``sha256(key || salt)`` read big-endian (upstream's ``bloom.Hash``)."""
    first: int = _UINT64_BE.unpack_from(_sha256(key + salt).digest())[0]
    return first


def _check_hashes(count: int) -> None:
    if count < MIN_HASHES:
        raise ValueError(f"too few hashes: {count} < {MIN_HASHES}")
    if count > MAX_HASHES:
        raise ValueError(f"too many hashes: {count} > {MAX_HASHES}")


def _go_int(value: float) -> int:
    """A finite double below 2^63 converted as Go's ``int(float64)`` does (toward zero)."""
    return int(value)


class BloomFilter:
    """A bloom filter of ``num_hashes`` seeds (1 to 16) over ``num_entries`` bytes (at
    least 1): ``add(h)`` and ``contains(h)`` take a 64-bit hash (:func:`bloom_hash` of a key
    and salt), ``marshal()`` is the wire form and :meth:`parse` reads one back.

    The seeds are the filter's own: drawn from ``os.urandom`` unless ``seeds`` gives them
    (then ``num_hashes`` is their number), and visible in :meth:`marshal`. ``count`` is the
    number of ``add`` calls (a repeated hash counts again, as upstream's filter counts
    additions), 0 for a parsed filter. Bad sizes are ``ValueError``. Safe to use from
    several threads.
    """

    __slots__ = ("_count", "_entries", "_lock", "_num_bits", "_seeds")

    def __init__(
        self, num_hashes: int, num_entries: int, *, seeds: Sequence[int] | None = None
    ) -> None:
        if num_entries < MIN_ENTRIES:
            raise ValueError(f"too few entries: {num_entries} < {MIN_ENTRIES}")
        if seeds is None:
            _check_hashes(num_hashes)
            raw = os.urandom(num_hashes * _SEED_BYTES)
            seeds = [
                int.from_bytes(raw[i : i + _SEED_BYTES], "big")
                for i in range(0, len(raw), _SEED_BYTES)
            ]
        else:
            _check_hashes(len(seeds))
            if len(seeds) != num_hashes:
                raise ValueError(f"{len(seeds)} seeds given for {num_hashes} hashes")
            if any(not 0 <= seed <= _MASK64 for seed in seeds):
                raise ValueError("a seed is not a 64-bit unsigned integer")
        self._seeds: tuple[int, ...] = tuple(seeds)
        self._entries = bytearray(num_entries)
        self._num_bits = num_entries * _BITS_PER_BYTE
        self._count = 0
        self._lock = threading.Lock()

    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview) -> Self:
        """The filter whose wire form is ``data`` (upstream's ``bloom.Parse``):
        :class:`~vmstack.errors.MalformedRequest` (a ``ValueError``) for no bytes, a hash
        count outside 1 to 16, or no entry byte. ``parse(f.marshal()).marshal()`` is
        ``f.marshal()``."""
        raw = bytes(data)
        if not raw:
            raise MalformedRequest("bloom filter: invalid num hashes (no bytes)")
        num_hashes = raw[0]
        offset = 1 + num_hashes * _SEED_BYTES
        if num_hashes < MIN_HASHES:
            raise MalformedRequest(f"bloom filter: too few hashes: {num_hashes} < {MIN_HASHES}")
        if num_hashes > MAX_HASHES:
            raise MalformedRequest(f"bloom filter: too many hashes: {num_hashes} > {MAX_HASHES}")
        if len(raw) < offset + MIN_ENTRIES:
            raise MalformedRequest("bloom filter: too few entries")
        seeds = [
            int.from_bytes(raw[1 + i * _SEED_BYTES : 1 + (i + 1) * _SEED_BYTES], "big")
            for i in range(num_hashes)
        ]
        parsed = cls(num_hashes, len(raw) - offset, seeds=seeds)
        parsed._entries[:] = raw[offset:]
        return parsed

    @property
    def num_hashes(self) -> int:
        """The number of seeds."""
        return len(self._seeds)

    @property
    def num_entries(self) -> int:
        """The number of entry bytes."""
        return len(self._entries)

    @property
    def seeds(self) -> tuple[int, ...]:
        """The seeds, in the order the hash runs through them."""
        return self._seeds

    @property
    def count(self) -> int:
        """The number of ``add`` calls since the filter was made."""
        return self._count

    def add(self, h: int) -> None:
        """Set the bits of the 64-bit hash ``h``."""
        entries = self._entries
        num_bits = self._num_bits
        with self._lock:
            for seed in self._seeds:
                h = (((h << _HASH_ROTATION) | (h >> (64 - _HASH_ROTATION))) & _MASK64) ^ seed
                index = h % num_bits
                entries[index >> 3] |= 1 << (index & 7)
            self._count += 1

    def contains(self, h: int) -> bool:
        """Whether every bit of the 64-bit hash ``h`` is set (false positives possible,
        false negatives never)."""
        entries = self._entries
        num_bits = self._num_bits
        for seed in self._seeds:
            h = (((h << _HASH_ROTATION) | (h >> (64 - _HASH_ROTATION))) & _MASK64) ^ seed
            index = h % num_bits
            if not (entries[index >> 3] >> (index & 7)) & 1:
                return False
        return True

    def marshal(self) -> bytes:
        """The wire form: the hash count, the seeds big-endian, the entries."""
        with self._lock:
            entries = bytes(self._entries)
        seeds = b"".join(seed.to_bytes(_SEED_BYTES, "big") for seed in self._seeds)
        return bytes([len(self._seeds)]) + seeds + entries

    def __repr__(self) -> str:
        return (
            f"BloomFilter(num_hashes={self.num_hashes}, num_entries={self.num_entries}, "
            f"count={self._count})"
        )


def optimal_entries(count: int, false_positive: float) -> int:
    """The entry bytes a filter of ``count`` items at ``false_positive`` needs, at the
    optimal number of hashes (upstream's ``OptimalEntries``): at least 1, and Go's
    ``MaxInt`` for a probability of 0 or below."""
    if count <= 0:
        return MIN_ENTRIES
    if false_positive >= 1:
        return MIN_ENTRIES
    if false_positive <= 0:
        return _MAX_INT
    entries_in_bits = -float(count) * math.log(false_positive) / _LN2_SQUARED
    entries = (entries_in_bits + _BITS_PER_BYTE - 1) / _BITS_PER_BYTE
    if entries >= float(_MAX_INT):
        return _MAX_INT
    return max(_go_int(entries), MIN_ENTRIES)


def optimal_hashes(num_entries: int, count: int) -> int:
    """The number of hashes that minimises the false-positive probability of a filter of
    ``num_entries`` bytes after ``count`` additions (upstream's ``OptimalHashes``), in 1 to
    16."""
    if num_entries < MIN_ENTRIES:
        return MIN_HASHES
    if count <= 0:
        return MAX_HASHES
    num_hashes = math.ceil(float(num_entries) * _BITS_PER_BYTE * math.log(2) / float(count))
    if num_hashes >= MAX_HASHES:
        return MAX_HASHES
    return max(int(num_hashes), MIN_HASHES)


def optimal_parameters(count: int, false_positive: float) -> tuple[int, int]:
    """``(num_hashes, num_entries)`` for ``count`` items at ``false_positive`` (upstream's
    ``OptimalParameters``)."""
    num_entries = optimal_entries(count, false_positive)
    return optimal_hashes(num_entries, count), num_entries


def estimate_count(num_hashes: int, num_entries: int, false_positive: float) -> int:
    """How many additions bring a filter of ``num_hashes`` and ``num_entries`` to
    ``false_positive`` (upstream's ``EstimateCount``): 0 for bad sizes or a probability of
    0 or below, Go's ``MaxInt`` for 1 or above."""
    if num_hashes < MIN_HASHES or num_entries < MIN_ENTRIES or false_positive <= 0:
        return 0
    if false_positive >= 1:
        return _MAX_INT
    inverse_hashes = 1 / float(num_hashes)
    num_bits = float(num_entries * 8)
    exponent = 1 - math.pow(false_positive, inverse_hashes)
    if exponent <= 0:
        # -log(0) is +Inf in Go; the conversion then saturates.
        return _MAX_INT
    count = math.ceil(-math.log(exponent) * num_bits * inverse_hashes)
    if count >= _MAX_INT:
        return _MAX_INT
    return int(count)
