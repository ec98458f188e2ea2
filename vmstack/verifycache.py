"""Process-wide, bounded caches of signature verification results, with counters.

A node meets the same signed transaction and the same signed envelope many times: when it
parses a block, verifies it, restores it from the store, takes a transaction into its
mempool, and once per peer that sends it. Each of those would recover the sender (secp256k1)
or check the envelope's signature (P-256 or RSA) again. A :class:`VerificationCache` keeps the
result of such a check under a key made of *every* byte the check reads (the hash and the
whole signature for a recovery; the certificate, the message digest and the signature for an
envelope), so a look-up can only return what the check itself would return for those bytes:
a forged twin (another ``v``, a high ``s``, one byte changed anywhere) is another key and is
checked afresh. Only successful results are kept: a check that fails raises each time.

Each cache holds at most ``maxsize`` entries; when full, the oldest entry inserted goes
first. Its counters (:attr:`~VerificationCache.lookups`, :attr:`~VerificationCache.computed`,
:attr:`~VerificationCache.evicted`) say how much work it saved; :func:`caches` lists every
cache of the process and :func:`clear_all` empties them (a benchmark that times a fresh
node's work starts from empty caches).
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

__all__ = ["CacheStats", "VerificationCache", "caches", "clear_all"]

K = TypeVar("K")
V = TypeVar("V")

_REGISTRY: dict[str, VerificationCache[object, object]] = {}


class CacheStats:
    """The counters of one cache at one moment (a plain snapshot)."""

    __slots__ = ("computed", "entries", "evicted", "lookups", "name")

    def __init__(self, name: str, lookups: int, computed: int, evicted: int, entries: int) -> None:
        self.name = name
        #: Look-ups made, hits and misses.
        self.lookups = lookups
        #: Checks that ran because the key was not there (successful or not).
        self.computed = computed
        #: Entries dropped to stay within the bound.
        self.evicted = evicted
        #: Entries held now.
        self.entries = entries

    def __repr__(self) -> str:
        return (
            f"CacheStats({self.name!r}, lookups={self.lookups}, computed={self.computed}, "
            f"evicted={self.evicted}, entries={self.entries})"
        )


class VerificationCache(Generic[K, V]):
    """A bounded map from the full input of a check to its successful result.

    :meth:`get` counts a look-up and returns the kept value or ``None``; the caller then
    runs the check, calls :meth:`computed_once` (successful or not) and, only on success,
    :meth:`put`. Safe to share between threads (inserts and evictions hold a lock; a
    look-up is one dictionary read); the counters are exact in one thread and may miss a
    count where threads race on them.
    """

    __slots__ = ("_entries", "_lock", "computed", "evicted", "lookups", "maxsize", "name")

    def __init__(self, name: str, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("a verification cache holds at least one entry")
        if name in _REGISTRY:
            raise ValueError(f"a verification cache named {name!r} exists already")
        self.name = name
        self.maxsize = maxsize
        self._entries: dict[K, V] = {}
        self._lock = threading.Lock()
        self.lookups = 0
        self.computed = 0
        self.evicted = 0
        _REGISTRY[name] = self  # type: ignore[assignment]

    def get(self, key: K) -> V | None:
        """The value kept for ``key``, or ``None``; counts one look-up."""
        self.lookups += 1
        return self._entries.get(key)

    def computed_once(self) -> None:
        """Count one check that ran because its key was missing."""
        self.computed += 1

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` (a successful result) for ``key``, dropping the oldest entry when
        the cache is full."""
        with self._lock:
            entries = self._entries
            if key not in entries and len(entries) >= self.maxsize:
                del entries[next(iter(entries))]
                self.evicted += 1
            entries[key] = value

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def clear(self) -> None:
        """Drop every entry and zero the counters."""
        with self._lock:
            self._entries.clear()
            self.lookups = self.computed = self.evicted = 0

    def stats(self) -> CacheStats:
        """A snapshot of the counters."""
        return CacheStats(self.name, self.lookups, self.computed, self.evicted, len(self))


def caches() -> dict[str, CacheStats]:
    """A snapshot of every verification cache of the process, by name."""
    return {name: cache.stats() for name, cache in _REGISTRY.items()}


def clear_all() -> None:
    """Empty every verification cache of the process and zero its counters."""
    for cache in _REGISTRY.values():
        cache.clear()
