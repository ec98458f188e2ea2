"""The key-value store contract every vmstack store meets, and the pieces the stores share.

A store maps non-empty ``bytes`` keys to ``bytes`` values. Besides single reads and writes it
offers the three things the C-chain VM needs:

- an atomic write batch (``with store.write_batch() as batch: ...``): everything put or deleted
  inside the with-block becomes visible at once when the block exits cleanly, and nothing does
  if it raises, so a block, its receipts and the head pointer are never half written;
- key-ordered prefix iteration (the go-ethereum rawdb schema groups keys by prefix);
- a consistent read snapshot (``with store.snapshot() as snap: ...``), one per request: every
  read inside it sees the store as it was when the snapshot opened, whatever writers do
  meanwhile. A snapshot may hand out zero-copy ``memoryview`` values that are valid only inside
  its with-block; copy them with ``bytes(value)`` to keep them longer.

:class:`PrefixedStore` is a view that puts a fixed prefix in front of every key: coreth nests
its chain database under ``sha256(b"ethdb")``, and a layer can keep its own records in the same
store without colliding with the chain's keys.

Bad arguments raise ``TypeError`` (a key that is not ``bytes``) or ``ValueError`` (an empty or
over-long key); operational failures raise :class:`StoreError`, a closed store
:class:`StoreClosed`, and a store whose files fail their checks
:class:`~vmstack.errors.StoreCorrupted`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Protocol, Self, TypeAlias, runtime_checkable

from vmstack.errors import StoreClosed, StoreError

__all__ = [
    "BufferedWriteBatch",
    "BytesLike",
    "ClosesOnExit",
    "KeyReader",
    "KeyValueStore",
    "KeyWriter",
    "MAX_KEY_LEN",
    "PrefixedStore",
    "ReadSnapshot",
    "WriteBatch",
    "WriteOp",
    "check_key",
    "check_prefix",
    "check_value",
    "is_writer",
]

#: The longest key a store accepts: LMDB's default limit, applied to every store so that code
#: tested on :class:`~vmstack.store.MemoryStore` behaves the same on LMDB.
MAX_KEY_LEN = 511

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""What a store accepts as a value; it is copied to ``bytes`` when the write is queued."""

WriteOp: TypeAlias = tuple[bytes, bytes | None]
"""One queued write: ``(key, value)`` puts, ``(key, None)`` deletes."""


def check_key(key: object) -> bytes:
    """Return ``key`` if it is a usable store key, else raise ``TypeError`` / ``ValueError``."""
    if not isinstance(key, bytes):
        raise TypeError(f"store keys are bytes, not {type(key).__name__}")
    if not key:
        raise ValueError("store keys must not be empty")
    if len(key) > MAX_KEY_LEN:
        raise ValueError(f"store key of {len(key)} bytes is longer than {MAX_KEY_LEN}")
    return key


def check_prefix(prefix: object, start: object = None) -> tuple[bytes, bytes | None]:
    """Validate the arguments of ``iterate``: a ``bytes`` prefix (may be empty) and an
    optional ``bytes`` start, neither longer than :data:`MAX_KEY_LEN`."""
    if not isinstance(prefix, bytes):
        raise TypeError(f"an iteration prefix is bytes, not {type(prefix).__name__}")
    if start is not None and not isinstance(start, bytes):
        raise TypeError(f"an iteration start is bytes or None, not {type(start).__name__}")
    if len(prefix) > MAX_KEY_LEN or (start is not None and len(start) > MAX_KEY_LEN):
        raise ValueError(f"an iteration prefix or start is at most {MAX_KEY_LEN} bytes")
    return prefix, start


def check_value(value: object) -> bytes:
    """Return ``value`` as immutable ``bytes`` (copying a bytearray or memoryview)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"store values are bytes-like, not {type(value).__name__}")


def is_writer(store: object) -> bool:
    """Whether ``store`` is the one handle allowed to repair what a crash left in it.

    A layer that finds a half-finished write at start-up undoes it only through the
    store's writer: another process may be in the middle of that very write. A store says
    so with a ``writer`` attribute (an :class:`~vmstack.store.LMDBStore` is the writer
    when it is open for writing and holds its writer lock; a read-only handle never is);
    a store without one is private to this process (a :class:`~vmstack.store.MemoryStore`)
    and is its own writer.
    """
    writer = getattr(store, "writer", True)
    return writer is True


@runtime_checkable
class KeyReader(Protocol):
    """Anything keys can be read from: a store or a read snapshot."""

    def get(self, key: bytes) -> bytes | memoryview:
        """The value stored under ``key``; ``KeyError`` if there is none."""
        ...

    def has(self, key: bytes) -> bool:
        """Whether a value is stored under ``key``."""
        ...


@runtime_checkable
class KeyWriter(Protocol):
    """Anything keys can be written to: a store or a write batch."""

    def put(self, key: bytes, value: BytesLike) -> None:
        """Store ``value`` under ``key``, replacing any previous value."""
        ...

    def delete(self, key: bytes) -> None:
        """Remove ``key``; removing a missing key is not an error."""
        ...


@runtime_checkable
class ReadSnapshot(Protocol):
    """A consistent, read-only view of a store, valid inside its with-block.

    Values may be zero-copy ``memoryview`` objects that point into the store's memory; they
    are valid only until the with-block that opened the snapshot exits.
    """

    def get(self, key: bytes) -> bytes | memoryview:
        """The value under ``key`` as of the snapshot; ``KeyError`` if there is none."""
        ...

    def has(self, key: bytes) -> bool:
        """Whether ``key`` had a value when the snapshot opened."""
        ...

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes | memoryview]]:
        """``(key, value)`` pairs whose key starts with ``prefix`` (and is ``>= start``),
        in ascending key order, as of the snapshot."""
        ...


@runtime_checkable
class WriteBatch(Protocol):
    """Writes queued inside a with-block and committed atomically when it exits cleanly.

    If the with-block raises, nothing queued is written and the exception propagates. A batch
    is used once: after its with-block it refuses further writes.
    """

    def put(self, key: bytes, value: BytesLike) -> None:
        """Queue ``value`` under ``key``."""
        ...

    def delete(self, key: bytes) -> None:
        """Queue the removal of ``key`` (a missing key is not an error)."""
        ...

    def __enter__(self) -> WriteBatch: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class KeyValueStore(Protocol):
    """A key-value store: single reads and writes, atomic batches, iteration, snapshots."""

    def get(self, key: bytes) -> bytes:
        """A copy of the value under ``key``; ``KeyError`` if there is none."""
        ...

    def has(self, key: bytes) -> bool:
        """Whether a value is stored under ``key``."""
        ...

    def put(self, key: bytes, value: BytesLike) -> None:
        """Store ``value`` under ``key`` durably, as a batch of one."""
        ...

    def delete(self, key: bytes) -> None:
        """Remove ``key``; removing a missing key is not an error."""
        ...

    def write_batch(self) -> WriteBatch:
        """A new atomic batch, to be used as a context manager."""
        ...

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` copies in ascending key order, for keys that start with ``prefix``
        and are ``>= start``. Every pair was in the store at some moment during the
        iteration; a point-in-time view of many keys is what :meth:`snapshot` is for."""
        ...

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        """A context manager yielding a consistent :class:`ReadSnapshot`."""
        ...

    def close(self) -> None:
        """Release the store; later calls raise :class:`StoreClosed`. Idempotent."""
        ...


class BufferedWriteBatch:
    """A write batch that queues operations and hands them to ``commit`` in one call.

    The stores apply the queued list under their own lock (memory) or in one write
    transaction (LMDB), which is what makes the batch atomic; queueing in Python also lets a
    store retry the whole batch, for instance after growing its map. Values are copied to
    ``bytes`` when queued, so a ``memoryview`` from a snapshot may be written after the
    snapshot is gone.
    """

    __slots__ = ("_commit", "_ops", "_state")

    _NEW, _OPEN, _DONE = 0, 1, 2

    def __init__(self, commit: Callable[[Sequence[WriteOp]], None]) -> None:
        self._commit = commit
        self._ops: list[WriteOp] = []
        self._state = self._NEW

    def __len__(self) -> int:
        return len(self._ops)

    def put(self, key: bytes, value: BytesLike) -> None:
        """Queue ``value`` under ``key``."""
        self._check_open()
        self._ops.append((check_key(key), check_value(value)))

    def delete(self, key: bytes) -> None:
        """Queue the removal of ``key``."""
        self._check_open()
        self._ops.append((check_key(key), None))

    def _check_open(self) -> None:
        if self._state != self._OPEN:
            if self._state == self._NEW:
                raise StoreError("a write batch is used inside its with-block")
            raise StoreClosed("this write batch has already been committed or discarded")

    def __enter__(self) -> BufferedWriteBatch:
        if self._state != self._NEW:
            raise StoreClosed("a write batch can be entered only once")
        self._state = self._OPEN
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._state = self._DONE
        ops, self._ops = self._ops, []
        if exc_type is None and ops:
            self._commit(ops)


class ClosesOnExit(abc.ABC):
    """A store as a context manager: ``with`` gives the store and closes it on exit."""

    __slots__ = ()

    @abc.abstractmethod
    def close(self) -> None:
        """Close the store; later use raises :class:`StoreClosed`."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class PrefixedStore(ClosesOnExit):
    """A view of ``store`` in which every key is stored as ``prefix + key``.

    Reads, writes, batches, snapshots and iteration all map onto the underlying store, so a
    batch on the view is as atomic as one on the store and a snapshot is the store's own.
    Iteration yields keys with the prefix removed. The view does not own the store:
    :meth:`close` only retires the view; close the underlying store yourself.
    """

    __slots__ = ("_closed", "_prefix", "_store")

    def __init__(self, store: KeyValueStore, prefix: bytes) -> None:
        if not isinstance(prefix, bytes):
            raise TypeError(f"a store prefix is bytes, not {type(prefix).__name__}")
        if not prefix:
            raise ValueError("a store prefix must not be empty")
        self._store = store
        self._prefix = prefix
        self._closed = False

    @property
    def prefix(self) -> bytes:
        """The bytes put in front of every key."""
        return self._prefix

    @property
    def store(self) -> KeyValueStore:
        """The underlying store."""
        return self._store

    @property
    def writer(self) -> bool:
        """Whether the underlying store is its data's writer (see :func:`is_writer`)."""
        return is_writer(self._store)

    def _key(self, key: bytes) -> bytes:
        if self._closed:
            raise StoreClosed("this prefixed store view is closed")
        return self._prefix + check_key(key)

    def get(self, key: bytes) -> bytes:
        """The value under ``prefix + key``; ``KeyError`` naming ``key`` if there is none."""
        try:
            return self._store.get(self._key(key))
        except KeyError:
            raise KeyError(key) from None

    def has(self, key: bytes) -> bool:
        """Whether ``prefix + key`` has a value."""
        return self._store.has(self._key(key))

    def put(self, key: bytes, value: BytesLike) -> None:
        """Store ``value`` under ``prefix + key``."""
        self._store.put(self._key(key), value)

    def delete(self, key: bytes) -> None:
        """Remove ``prefix + key``."""
        self._store.delete(self._key(key))

    def write_batch(self) -> WriteBatch:
        """A batch of the underlying store that prefixes every key."""
        if self._closed:
            raise StoreClosed("this prefixed store view is closed")
        return _PrefixedBatch(self._store.write_batch(), self._prefix)

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Pairs under ``self.prefix + prefix`` with the view's prefix removed from keys."""
        prefix, start = check_prefix(prefix, start)
        if self._closed:
            raise StoreClosed("this prefixed store view is closed")
        inner_start = None if start is None else self._prefix + start
        cut = len(self._prefix)
        return (
            (key[cut:], value)
            for key, value in self._store.iterate(self._prefix + prefix, start=inner_start)
        )

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        """A snapshot of the underlying store seen through the prefix."""
        if self._closed:
            raise StoreClosed("this prefixed store view is closed")
        return _PrefixedSnapshotContext(self._store.snapshot(), self._prefix)

    def close(self) -> None:
        """Retire this view; the underlying store stays open."""
        self._closed = True

    def __repr__(self) -> str:
        return f"PrefixedStore({self._store!r}, prefix={self._prefix.hex()})"


class _PrefixedBatch:
    """A batch of the underlying store that prefixes every key."""

    __slots__ = ("_inner", "_prefix")

    def __init__(self, inner: WriteBatch, prefix: bytes) -> None:
        self._inner = inner
        self._prefix = prefix

    def put(self, key: bytes, value: BytesLike) -> None:
        self._inner.put(self._prefix + check_key(key), value)

    def delete(self, key: bytes) -> None:
        self._inner.delete(self._prefix + check_key(key))

    def __enter__(self) -> _PrefixedBatch:
        self._inner.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._inner.__exit__(exc_type, exc, tb)


class _PrefixedSnapshot:
    """A read snapshot of the underlying store seen through the prefix."""

    __slots__ = ("_inner", "_prefix")

    def __init__(self, inner: ReadSnapshot, prefix: bytes) -> None:
        self._inner = inner
        self._prefix = prefix

    def get(self, key: bytes) -> bytes | memoryview:
        try:
            return self._inner.get(self._prefix + check_key(key))
        except KeyError:
            raise KeyError(key) from None

    def has(self, key: bytes) -> bool:
        return self._inner.has(self._prefix + check_key(key))

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes | memoryview]]:
        prefix, start = check_prefix(prefix, start)
        inner_start = None if start is None else self._prefix + start
        cut = len(self._prefix)
        return (
            (key[cut:], value)
            for key, value in self._inner.iterate(self._prefix + prefix, start=inner_start)
        )


class _PrefixedSnapshotContext:
    """Opens the underlying snapshot and yields it seen through the prefix."""

    __slots__ = ("_inner", "_prefix")

    def __init__(self, inner: AbstractContextManager[ReadSnapshot], prefix: bytes) -> None:
        self._inner = inner
        self._prefix = prefix

    def __enter__(self) -> ReadSnapshot:
        return _PrefixedSnapshot(self._inner.__enter__(), self._prefix)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._inner.__exit__(exc_type, exc, tb)
