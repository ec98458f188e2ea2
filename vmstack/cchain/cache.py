"""``CanonicalHashCache``: an LRU of block number -> canonical hash, for settled heights only.

The fast path checks, for every block it serves, that the block is the canonical one at its
height (number -> hash). Most of those heights are deep in the settled past, where the answer
can never change, so it is worth remembering them instead of reading the store each time.

Only settled heights are cached. A height above the last settled block can still be
reorganised — a different block can become canonical there — and a cache that remembered
the old hash would keep serving it after the store had moved on (the bug behind erigon issue
19173, where a canonical-hash cache filled during a reorg answered with a stale hash).
:meth:`CanonicalHashCache.remember` therefore refuses any height above
:attr:`~CanonicalHashCache.settled_height`, and :meth:`~CanonicalHashCache.forget_above`
drops entries and lowers the settled height if the caller ever has to roll back.

The cache is thread-safe: reader threads serving requests may look up while the accepting
thread remembers and settles.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict

from vmstack.defaults import DEFAULT_CACHE_SIZE

__all__ = ["CanonicalHashCache", "DEFAULT_CAPACITY"]

#: Entries kept by default: about 1.7 MB of memory (see ``bytes_per_entry``); the default
#: ``cache_size`` of every VM and stack (:data:`vmstack.defaults.DEFAULT_CACHE_SIZE`).
DEFAULT_CAPACITY = DEFAULT_CACHE_SIZE

_HASH_LENGTH = 32


class CanonicalHashCache:
    """A least-recently-used map of settled block number -> 32-byte canonical hash.

    ``capacity`` bounds the entries; the least recently used one is evicted first. Nothing is
    settled at first (``settled_height == -1``): the owner calls :meth:`settle` as blocks
    become settled. :attr:`hits` and :attr:`misses` count :meth:`lookup` outcomes.
    """

    __slots__ = ("_capacity", "_entries", "_hits", "_lock", "_misses", "_settled")

    def __init__(self, capacity: int = DEFAULT_CAPACITY, *, settled_height: int = -1) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        _check_height(settled_height, allow_none_settled=True)
        self._capacity = capacity
        self._entries: OrderedDict[int, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._settled = settled_height
        self._hits = 0
        self._misses = 0

    @property
    def capacity(self) -> int:
        """The most entries the cache holds."""
        return self._capacity

    @property
    def settled_height(self) -> int:
        """The highest settled height (``-1`` if none): nothing above it is ever cached."""
        return self._settled

    @property
    def hits(self) -> int:
        """Lookups answered from the cache."""
        return self._hits

    @property
    def misses(self) -> int:
        """Lookups the cache could not answer."""
        return self._misses

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, number: object) -> bool:
        return number in self._entries

    def settle(self, height: int) -> None:
        """Record that every height up to ``height`` is settled (immutable).

        Settled heights only move forward: a lower ``height`` than the current one is a
        ``ValueError`` (use :meth:`forget_above` to roll back on purpose).
        """
        _check_height(height)
        with self._lock:
            if height < self._settled:
                raise ValueError(
                    f"settled height cannot move back from {self._settled} to {height}; "
                    "use forget_above() to roll back"
                )
            self._settled = height

    def remember(self, number: int, block_hash: bytes | bytearray | memoryview) -> bool:
        """Cache ``block_hash`` as the canonical hash at ``number`` if ``number`` is settled.

        Returns whether it was cached. A settled height cannot change its hash, so a
        different hash for a cached height is a ``ValueError`` (the caller's store and cache
        disagree about a settled block).
        """
        _check_height(number)
        if len(block_hash) != _HASH_LENGTH:
            raise ValueError(f"a block hash is {_HASH_LENGTH} bytes, got {len(block_hash)}")
        with self._lock:
            if number > self._settled:
                return False
            entries = self._entries
            known = entries.get(number)
            if known is not None:
                if known != block_hash:
                    raise ValueError(
                        f"settled height {number} is cached with hash {known.hex()}, "
                        f"not {bytes(block_hash).hex()}"
                    )
                entries.move_to_end(number)
                return True
            entries[number] = bytes(block_hash)
            if len(entries) > self._capacity:
                entries.popitem(last=False)
            return True

    def lookup(self, number: int) -> bytes | None:
        """The cached canonical hash at ``number``, or ``None``; counts a hit or a miss."""
        lock = self._lock
        lock.acquire()
        try:
            found = self._entries.get(number)
            if found is None:
                self._misses += 1
                return None
            self._entries.move_to_end(number)
            self._hits += 1
            return found
        finally:
            lock.release()

    def forget_above(self, height: int) -> int:
        """Drop every entry above ``height`` and lower the settled height to at most
        ``height``; returns how many entries were dropped. ``height`` may be ``-1``."""
        _check_height(height, allow_none_settled=True)
        with self._lock:
            doomed = [number for number in self._entries if number > height]
            for number in doomed:
                del self._entries[number]
            self._settled = min(self._settled, height)
            return len(doomed)

    def clear(self) -> None:
        """Drop every entry and reset the counters (the settled height stays)."""
        with self._lock:
            self._entries.clear()
            self._hits = 0
            self._misses = 0

    def memory_bytes(self) -> int:
        """Bytes held, measured with ``sys.getsizeof``: the ordered dict (its table and
        links) plus every key and hash object it holds."""
        with self._lock:
            total = sys.getsizeof(self._entries)
            for number, block_hash in self._entries.items():
                total += sys.getsizeof(number) + sys.getsizeof(block_hash)
            return total

    def bytes_per_entry(self) -> float:
        """:meth:`memory_bytes` divided by the entries held (``0.0`` when empty)."""
        count = len(self._entries)
        return self.memory_bytes() / count if count else 0.0

    def __repr__(self) -> str:
        return (
            f"CanonicalHashCache({len(self._entries)}/{self._capacity}, "
            f"settled={self._settled}, hits={self._hits}, misses={self._misses})"
        )


def _check_height(height: int, *, allow_none_settled: bool = False) -> None:
    if isinstance(height, bool) or not isinstance(height, int):
        raise TypeError(f"a block height is an int, not {type(height).__name__}")
    if height < (-1 if allow_none_settled else 0):
        raise ValueError(f"a block height is non-negative, got {height}")
