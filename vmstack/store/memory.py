"""``MemoryStore``: a thread-safe, dict-backed :class:`~vmstack.store.base.KeyValueStore`.

For tests, examples and simulations that do not need durability. It keeps the same contract
as :class:`~vmstack.store.LMDBStore` — atomic batches, key-ordered iteration, consistent
snapshots, the same key rules — so code tested here behaves the same on LMDB.

Snapshots are versioned rather than copied: opening one costs O(1). While a snapshot is
open, every write first records the value it replaces (once per key) in that snapshot, and
the snapshot reads through those recorded values, so it keeps seeing the store as it was
when it opened. A batch is applied under the store's lock, so neither plain reads nor
snapshots ever see half of it.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from types import TracebackType

from vmstack.errors import StoreClosed
from vmstack.store.base import (
    BufferedWriteBatch,
    BytesLike,
    ClosesOnExit,
    ReadSnapshot,
    WriteBatch,
    WriteOp,
    check_key,
    check_prefix,
    check_value,
)

__all__ = ["MemoryStore"]


class MemoryStore(ClosesOnExit):
    """A key-value store held in a dict, with a sorted key index for ordered iteration."""

    __slots__ = ("__weakref__", "_closed", "_data", "_keys", "_lock", "_snapshots")

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        self._lock = threading.Lock()
        self._snapshots: set[_MemorySnapshot] = set()
        self._closed = False

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the memory store is closed")

    def get(self, key: bytes) -> bytes:
        """The value under ``key``; ``KeyError`` if there is none."""
        check_key(key)
        with self._lock:
            self._check_open()
            value = self._data.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def has(self, key: bytes) -> bool:
        """Whether ``key`` has a value."""
        check_key(key)
        with self._lock:
            self._check_open()
            return key in self._data

    def put(self, key: bytes, value: BytesLike) -> None:
        """Store ``value`` under ``key``."""
        self._apply(((check_key(key), check_value(value)),))

    def delete(self, key: bytes) -> None:
        """Remove ``key`` if present."""
        self._apply(((check_key(key), None),))

    def write_batch(self) -> WriteBatch:
        """An atomic batch, applied under the store's lock when its with-block exits."""
        with self._lock:
            self._check_open()
        return BufferedWriteBatch(self._apply)

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Pairs in key order; the matching pairs are collected at once, so the answer is
        a point-in-time view."""
        prefix, start = check_prefix(prefix, start)
        with self._lock:
            self._check_open()
            keys = self._range(prefix, start)
            pairs = [(key, self._data[key]) for key in keys]
        return iter(pairs)

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        """A context manager yielding a consistent snapshot; opening it is O(1)."""
        with self._lock:
            self._check_open()
        return _MemorySnapshot(self)

    def close(self) -> None:
        """Drop the data; later calls raise :class:`StoreClosed`."""
        with self._lock:
            self._closed = True
            self._data = {}
            self._keys = []

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._data)} keys"
        return f"<MemoryStore {state}>"

    def _range(self, prefix: bytes, start: bytes | None) -> list[bytes]:
        """Keys (live now) that start with ``prefix`` and are ``>= start``; lock held."""
        first = prefix if start is None or start < prefix else start
        keys = self._keys
        index = bisect.bisect_left(keys, first)
        found: list[bytes] = []
        while index < len(keys) and keys[index].startswith(prefix):
            found.append(keys[index])
            index += 1
        return found

    def _apply(self, ops: Sequence[WriteOp]) -> None:
        """Apply queued writes all at once, recording pre-images for open snapshots."""
        with self._lock:
            self._check_open()
            data, keys = self._data, self._keys
            for key, value in ops:
                for snap in self._snapshots:
                    snap.remember(key, data.get(key))
                if value is None:
                    if data.pop(key, None) is not None:
                        del keys[bisect.bisect_left(keys, key)]
                else:
                    if key not in data:
                        bisect.insort(keys, key)
                    data[key] = value


class _MemorySnapshot:
    """A versioned view: live data, overridden by the values writes replaced since opening."""

    __slots__ = ("__weakref__", "_before", "_entered", "_open", "_store")

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._before: dict[bytes, bytes | None] = {}
        self._entered = False
        self._open = False

    def remember(self, key: bytes, value: bytes | None) -> None:
        """Record the value ``key`` had when the snapshot opened (first write only)."""
        if key not in self._before:
            self._before[key] = value

    def __enter__(self) -> _MemorySnapshot:
        store = self._store
        with store._lock:
            store._check_open()
            if self._entered:
                raise StoreClosed("a snapshot can be entered only once")
            self._entered = self._open = True
            store._snapshots.add(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with self._store._lock:
            self._open = False
            self._store._snapshots.discard(self)
            self._before = {}

    def _check(self) -> None:
        if not self._open:
            raise StoreClosed("the snapshot is used outside its with-block")
        self._store._check_open()

    def _value(self, key: bytes) -> bytes | None:
        if key in self._before:
            return self._before[key]
        return self._store._data.get(key)

    def get(self, key: bytes) -> bytes:
        """The value of ``key`` as of the snapshot; ``KeyError`` if there was none."""
        check_key(key)
        with self._store._lock:
            self._check()
            value = self._value(key)
        if value is None:
            raise KeyError(key)
        return value

    def has(self, key: bytes) -> bool:
        """Whether ``key`` had a value when the snapshot opened."""
        check_key(key)
        with self._store._lock:
            self._check()
            return self._value(key) is not None

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Pairs in key order as of the snapshot."""
        prefix, start = check_prefix(prefix, start)
        first = prefix if start is None or start < prefix else start
        with self._store._lock:
            self._check()
            candidates = set(self._store._range(prefix, start))
            candidates.update(
                key for key in self._before if key.startswith(prefix) and key >= first
            )
            pairs = []
            for key in sorted(candidates):
                value = self._value(key)
                if value is not None:
                    pairs.append((key, value))
        return iter(pairs)
