"""Stores with one plausible mistake each, and the store-kit rule the mistake breaks.

Each is a :class:`~vmstack.store.MemoryStore` with one method changed; ``BROKEN_STORES``
maps its name to the class and the rule (``vmstack.conformance.STORE_RULES``) whose tests
must fail it. ``tests/store/test_store_kit_corpus.py`` runs them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from vmstack.store import MemoryStore, ReadSnapshot, WriteBatch
from vmstack.store.base import BufferedWriteBatch, BytesLike, WriteOp, check_key, check_value


class ForgetsEmptyValues(MemoryStore):
    """Takes an empty value for a delete."""

    def put(self, key: bytes, value: BytesLike) -> None:
        if len(value) == 0:
            self.delete(key)
        else:
            super().put(key, value)


class KeepsTheCallersBuffer(MemoryStore):
    """Stores a bytearray as handed in, so the caller's later changes show through."""

    def put(self, key: bytes, value: BytesLike) -> None:
        if isinstance(value, bytearray):
            check_key(key)
            self._data[key] = value  # type: ignore[assignment]  # the mistake
            if key not in self._keys:
                bisect.insort(self._keys, key)
        else:
            super().put(key, value)


class EmptyKeyIsMissing(MemoryStore):
    """Answers the empty key as a missing one instead of refusing it."""

    def get(self, key: bytes) -> bytes:
        if key == b"":
            raise KeyError(key)
        return super().get(key)


class TakesTextValues(MemoryStore):
    """Encodes a str value instead of refusing it."""

    def put(self, key: bytes, value: BytesLike) -> None:
        super().put(key, value.encode() if isinstance(value, str) else value)


class _WritesAtOnce:
    """A batch that writes each operation straight through as it is queued, inside its
    with-block or not: neither atomic nor bounded by its block."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __enter__(self) -> _WritesAtOnce:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def put(self, key: bytes, value: bytes) -> None:
        self._store.put(key, value)

    def delete(self, key: bytes) -> None:
        self._store.delete(key)


class NonAtomicStore(MemoryStore):
    """A store whose batches write as they go."""

    def write_batch(self) -> _WritesAtOnce:  # type: ignore[override]
        return _WritesAtOnce(self)


class BatchDeletesLast(MemoryStore):
    """Applies a batch's puts first and its deletes after them."""

    def write_batch(self) -> WriteBatch:
        def commit(ops: Sequence[WriteOp]) -> None:
            self._apply(sorted(ops, key=lambda op: op[1] is None))

        return BufferedWriteBatch(commit)


class BatchOutlivesItsBlock(MemoryStore):
    """Hands out batches that take writes before and after their with-block."""

    def write_batch(self) -> _WritesAtOnce:  # type: ignore[override]
        return _WritesAtOnce(self)


class IteratesInWriteOrder(MemoryStore):
    """Iterates in the order keys were first written, not in key order."""

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        ordered = list(super().iterate(prefix, start=start))
        written = {key: index for index, key in enumerate(self._data)}
        return iter(sorted(ordered, key=lambda pair: written[pair[0]]))


class IterationStopsAtOneChunk(MemoryStore):
    """Iterates over the first 512 matching keys only."""

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(super().iterate(prefix, start=start))[:512])


class IterateTakesText(MemoryStore):
    """Encodes a str prefix instead of refusing it."""

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        text: Any = prefix
        return super().iterate(text.encode() if isinstance(text, str) else prefix, start=start)


class _LiveSnapshot:
    """A "snapshot" that reads the store as it is now."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __enter__(self) -> _LiveSnapshot:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def get(self, key: bytes) -> bytes:
        return self._store.get(key)

    def has(self, key: bytes) -> bool:
        return self._store.has(key)

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        return self._store.iterate(prefix, start=start)


class SnapshotsReadLiveData(MemoryStore):
    """Its snapshots see every write made after they opened."""

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        return _LiveSnapshot(self)


class SnapshotOutlivesItsBlock(MemoryStore):
    """Its snapshots go on answering (live data) after their with-block."""

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        opened = super().snapshot()
        live = _LiveSnapshot(self)

        class Outliving:
            def __enter__(self) -> Any:
                opened.__enter__()
                return live

            def __exit__(self, *exc: Any) -> None:
                opened.__exit__(*exc)

        return Outliving()


class CloseKeepsTheData(MemoryStore):
    """close does nothing: the store goes on answering."""

    def close(self) -> None:
        return None


class DeletingAMissingKeyDropsAnother(MemoryStore):
    """A delete of a key that is not there removes the next key from the ordered index
    (the data keeps it): ``get`` still finds it, iteration no longer does."""

    def _apply(self, ops: Sequence[WriteOp]) -> None:
        with self._lock:
            self._check_open()
            for key, value in ops:
                for snap in self._snapshots:
                    snap.remember(key, self._data.get(key))
                index = bisect.bisect_left(self._keys, key)
                if value is None:
                    self._data.pop(key, None)
                    if index < len(self._keys):  # the mistake: not checked to be ``key``
                        del self._keys[index]
                else:
                    if key not in self._data:
                        bisect.insort(self._keys, key)
                    self._data[key] = check_value(value)


class WithoutSnapshots(MemoryStore):
    """Has no ``snapshot`` method: not a KeyValueStore."""

    snapshot = None  # type: ignore[assignment]


#: Each broken store's class and the rule whose tests must fail it.
BROKEN_STORES: dict[str, tuple[type[Any], str]] = {
    "ForgetsEmptyValues": (ForgetsEmptyValues, "store.read-write"),
    "KeepsTheCallersBuffer": (KeepsTheCallersBuffer, "store.copies-values"),
    "EmptyKeyIsMissing": (EmptyKeyIsMissing, "store.keys"),
    "TakesTextValues": (TakesTextValues, "store.values"),
    "NonAtomicStore": (NonAtomicStore, "store.batch.atomic"),
    "BatchDeletesLast": (BatchDeletesLast, "store.batch.order"),
    "BatchOutlivesItsBlock": (BatchOutlivesItsBlock, "store.batch.once"),
    "IteratesInWriteOrder": (IteratesInWriteOrder, "store.iterate.order"),
    "IterationStopsAtOneChunk": (IterationStopsAtOneChunk, "store.iterate.order"),
    "IterateTakesText": (IterateTakesText, "store.iterate.arguments"),
    "SnapshotsReadLiveData": (SnapshotsReadLiveData, "store.snapshot.isolation"),
    "SnapshotOutlivesItsBlock": (SnapshotOutlivesItsBlock, "store.snapshot.closes"),
    "CloseKeepsTheData": (CloseKeepsTheData, "store.close"),
    "DeletingAMissingKeyDropsAnother": (DeletingAMissingKeyDropsAnother, "store.model"),
    "WithoutSnapshots": (WithoutSnapshots, "store.protocol"),
}
