"""``LMDBStore``: the embedded default :class:`~vmstack.store.base.KeyValueStore`, over LMDB.

Why LMDB: reads are memory-mapped and zero-copy. A read snapshot is one LMDB read transaction
opened with ``buffers=True``, so ``snapshot.get`` hands out ``memoryview`` slices of the map
that go straight to ``block_bytes`` without a copy (about half a microsecond per get), and
LMDB's MVCC makes every snapshot consistent while a writer commits.

Durability. Every batch is one write transaction. With the default ``sync=True`` a commit
returns only after LMDB has flushed the data pages and then the meta page, so a committed
batch survives a process kill and a power loss, and a batch interrupted at any point — the
process SIGKILLed mid-transaction — is simply absent when the store is opened again: LMDB
never overwrites live pages and switches to a new version by writing one meta page. With
``sync=False`` the store is still safe against a killed process (the OS holds the written
pages), but an operating-system crash may lose the last batches or damage the file; it is
meant for throw-away stores in benchmarks and simulations. Opening after a crash needs no
recovery step; reader slots left by a dead process are cleared on open.

Map size. LMDB maps a fixed address range; when a write would outgrow it the store doubles
the map and retries the whole batch instead of failing. Remapping invalidates every pointer
into the old map, so it waits until no snapshot of this store is open in any thread (new
snapshots wait behind a pending remap). A thread that writes while it holds a snapshot of
the same store therefore cannot grow the map: that write raises :class:`StoreError` (and
writes nothing) rather than deadlock. The default map (1 GiB) costs only address space.

Threads. Any number of threads may read, each through its own snapshot (one LMDB read
transaction each, up to ``max_readers`` at once), while one writer commits; writes from
several threads are serialised. A snapshot belongs to the thread that opened it. Every LMDB
call outside the write transaction goes through one shared gate, so the rare moments that
need the environment to themselves — remapping, closing, and aborting a failed write
transaction (py-lmdb 3.0 can deadlock aborting a write while other threads read) — wait for
the readers in flight and hold new ones back briefly.

Processes. One handle writes a store: a store opened for writing takes an exclusive OS
lock (``flock``) on :data:`~vmstack.store.lmdb.locks.WRITER_LOCK_FILE` in the environment
directory and holds it until :meth:`~LMDBStore.close` (the OS releases it when the process
dies, however it dies). A
second handle opened for writing while the lock is held — in another process or in this
one — raises :class:`StoreError`; any number of read-only handles may open alongside the
writer, and they never write. The stack's layers repair what a crash left half-written
only through the writer (:attr:`LMDBStore.writer`), so a reader never undoes a write that
a live writer has in flight.

Errors. LMDB errors that mean the files are damaged or are not an LMDB database (corrupted
page, bad meta page, checksum or version mismatch) surface as
:class:`~vmstack.errors.StoreCorrupted`; other LMDB failures as :class:`StoreError`; using a
closed store, snapshot or batch raises :class:`StoreClosed`. Before LMDB maps the data
file, opening checks it against the last page its meta page names, and an empty or missing
data file of a store that held data (see :mod:`vmstack.store.lmdb.files`): a file cut
short is ``StoreCorrupted`` naming it and both sizes, never a ``SIGBUS`` on the first read
past its end, and a store cut to nothing is never opened as a new one.

This module holds the store itself: opening, short reads, batches committed in one write
transaction and the map's growth. The writer lock and the read gate are in
:mod:`vmstack.store.lmdb.locks`, snapshots and the key scan in
:mod:`vmstack.store.lmdb.snapshot`, the error mapping in :mod:`vmstack.store.lmdb.errors`,
the checks of the data file in :mod:`vmstack.store.lmdb.files`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from itertools import islice
from typing import Any

import lmdb

from vmstack.errors import StoreClosed, StoreError
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
from vmstack.store.lmdb.errors import translate_error
from vmstack.store.lmdb.files import HELD_DATA_MARKER, check_data_file, mark_held_data
from vmstack.store.lmdb.locks import (
    ReadGate,
    release_writer_lock,
    take_writer_lock,
)
from vmstack.store.lmdb.snapshot import LMDBSnapshot, ReadTxn, scan

__all__ = ["DEFAULT_MAP_SIZE", "DEFAULT_MAX_READERS", "LMDBStore"]

#: Initial map size: address space only (the file grows with the data), doubled when full.
DEFAULT_MAP_SIZE = 1 << 30
#: Concurrent read transactions (open snapshots and short reads) across all processes.
DEFAULT_MAX_READERS = 256

_ITERATE_CHUNK = 256


class LMDBStore(ClosesOnExit):
    """A key-value store in an LMDB environment directory at ``path``.

    ``map_size`` is the initial map in bytes (it doubles when full); ``readonly`` opens an
    existing store for reading only (alongside a live writer, if any); a handle opened for
    writing holds the store's writer lock until closed, and a second one raises
    :class:`StoreError` (see the module docstring); ``sync=False`` trades OS-crash
    durability for commit speed; ``max_readers`` bounds concurrent read transactions
    and is fixed by the first process that opens the environment. Use it as a context
    manager or call :meth:`close`.
    """

    __slots__ = (
        "__weakref__",
        "_closed",
        "_env",
        "_gate",
        "_held_data_marked",
        "_lock_descriptor",
        "_path",
        "_readonly",
        "_sync",
        "_write_lock",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        readonly: bool = False,
        sync: bool = True,
        max_readers: int = DEFAULT_MAX_READERS,
    ) -> None:
        if isinstance(map_size, bool) or not isinstance(map_size, int) or map_size <= 0:
            raise ValueError(f"map_size must be a positive int, got {map_size!r}")
        if isinstance(max_readers, bool) or not isinstance(max_readers, int) or max_readers < 1:
            raise ValueError(f"max_readers must be a positive int, got {max_readers!r}")
        self._path = os.fspath(path)
        self._readonly = readonly
        self._sync = sync
        self._closed = True
        self._lock_descriptor: int | None = None
        self._held_data_marked = False
        if readonly and not os.path.isdir(self._path):
            raise StoreError(f"no LMDB store to open read-only at {self._path}")
        if not readonly:
            self._lock_descriptor = take_writer_lock(self._path)
        try:
            meta = check_data_file(self._path)
        except BaseException:
            self._drop_writer_lock()
            raise
        try:
            self._env = lmdb.open(
                self._path,
                map_size=map_size,
                subdir=True,
                readonly=readonly,
                sync=sync,
                metasync=True,
                max_readers=max_readers,
                max_dbs=0,
                max_spare_txns=1,
                lock=True,
            )
        except lmdb.Error as exc:
            self._drop_writer_lock()
            raise translate_error(exc, f"cannot open the LMDB store at {self._path}") from exc
        self._gate = ReadGate()
        self._write_lock = threading.RLock()
        self._closed = False
        try:
            self._env.reader_check()
        except lmdb.Error as exc:
            self._env.close()
            self._closed = True
            self._drop_writer_lock()
            raise translate_error(exc, f"cannot open the LMDB store at {self._path}") from exc
        if not readonly:
            self._held_data_marked = os.path.exists(os.path.join(self._path, HELD_DATA_MARKER))
            if meta is not None and meta.txnid > 0 and not self._held_data_marked:
                self._held_data_marked = mark_held_data(self._path, sync=sync)

    def _drop_writer_lock(self) -> None:
        descriptor, self._lock_descriptor = self._lock_descriptor, None
        if descriptor is not None:
            release_writer_lock(descriptor)

    @property
    def path(self) -> str:
        """The environment directory."""
        return self._path

    @property
    def readonly(self) -> bool:
        """Whether the store was opened read-only."""
        return self._readonly

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    @property
    def writer(self) -> bool:
        """Whether this handle is the store's writer: open for writing, holding the writer
        lock (never for a read-only or closed handle)."""
        return self._lock_descriptor is not None

    @property
    def map_size(self) -> int:
        """The current size of the memory map in bytes."""
        with self._reading(buffers=False):
            return self._env.info()["map_size"]

    def __len__(self) -> int:
        with self._reading(buffers=False) as txn:
            return txn.stat()["entries"]

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"the LMDB store at {self._path} is closed")

    def _begin_read(self, *, buffers: bool) -> lmdb.Transaction[Any]:
        """Enter the gate and begin a read transaction; the caller must :meth:`_end_read`."""
        while True:
            self._check_open()
            self._gate.enter_shared()
            if self._closed:
                self._gate.exit_shared()
                self._check_open()
            try:
                if buffers:
                    return self._env.begin(buffers=True)
                return self._env.begin()
            except lmdb.MapResizedError:
                self._gate.exit_shared()
                self._adopt_map_size()
            except lmdb.Error as exc:
                self._gate.exit_shared()
                raise translate_error(exc, "cannot begin a read transaction") from exc
            except BaseException:
                self._gate.exit_shared()
                raise

    def _end_read(self, txn: lmdb.Transaction[Any]) -> None:
        try:
            txn.abort()
        finally:
            self._gate.exit_shared()

    def _reading(self, *, buffers: bool) -> ReadTxn:
        return ReadTxn(self, buffers)

    def get(self, key: bytes) -> bytes:
        """A copy of the value under ``key``; ``KeyError`` if there is none."""
        check_key(key)
        with self._reading(buffers=False) as txn:
            try:
                value: bytes | None = txn.get(key)
            except lmdb.Error as exc:
                raise translate_error(exc, f"cannot read key {key.hex()}") from exc
        if value is None:
            raise KeyError(key)
        return value

    def has(self, key: bytes) -> bool:
        """Whether ``key`` has a value."""
        check_key(key)
        with self._reading(buffers=True) as txn:
            try:
                return txn.get(key) is not None
            except lmdb.Error as exc:
                raise translate_error(exc, f"cannot read key {key.hex()}") from exc

    def put(self, key: bytes, value: BytesLike) -> None:
        """Store ``value`` under ``key`` in a transaction of its own."""
        self._commit(((check_key(key), check_value(value)),))

    def delete(self, key: bytes) -> None:
        """Remove ``key`` if present, in a transaction of its own."""
        self._commit(((check_key(key), None),))

    def write_batch(self) -> WriteBatch:
        """An atomic batch: one write transaction when its with-block exits cleanly."""
        self._check_writable()
        return BufferedWriteBatch(self._commit)

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Copies of the pairs in key order, read in chunks of short read transactions, so
        an unfinished iteration never pins old pages or blocks a map resize."""
        prefix, start = check_prefix(prefix, start)
        self._check_open()
        return self._iterate_chunks(prefix, start)

    def _iterate_chunks(self, prefix: bytes, start: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        after: bytes | None = None
        while True:
            with self._reading(buffers=False) as txn:
                chunk = list(islice(scan(txn, prefix, start, after), _ITERATE_CHUNK))
            yield from chunk
            if len(chunk) < _ITERATE_CHUNK:
                return
            after = chunk[-1][0]

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        """One read transaction with zero-copy values, for the duration of the with-block."""
        self._check_open()
        return LMDBSnapshot(self)

    def sync(self) -> None:
        """Flush committed data to disk (useful with ``sync=False``)."""
        self._check_writable()
        try:
            self._env.sync(True)
        except lmdb.Error as exc:
            raise translate_error(exc, "cannot flush the store") from exc

    def close(self) -> None:
        """Wait for open snapshots and writes to finish, then close the environment.

        Idempotent. Raises :class:`StoreError` if the calling thread itself holds a snapshot
        of this store (closing would pull the map from under its values).
        """
        if self._closed:
            return
        if self._gate.depth():
            raise StoreError("close() called while this thread holds a snapshot of the store")
        with self._write_lock:
            self._gate.enter_exclusive()
            try:
                if not self._closed:
                    self._closed = True
                    self._env.close()
                    self._drop_writer_lock()
            finally:
                self._gate.exit_exclusive()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("read-only" if self._readonly else "open")
        return f"<LMDBStore {self._path} {state}>"

    def _check_writable(self) -> None:
        self._check_open()
        if self._readonly:
            raise StoreError(f"the LMDB store at {self._path} is open read-only")

    def _commit(self, ops: Sequence[WriteOp]) -> None:
        """Apply ``ops`` in one write transaction, growing the map and retrying when full."""
        self._check_writable()
        with self._write_lock:
            self._check_open()
            while True:
                try:
                    txn = self._env.begin(write=True)
                except lmdb.MapResizedError:
                    self._adopt_map_size()
                    continue
                except lmdb.Error as exc:
                    raise translate_error(exc, "cannot begin a write transaction") from exc
                try:
                    for key, value in ops:
                        if value is None:
                            txn.delete(key)
                        else:
                            txn.put(key, value)
                    txn.commit()
                    if not self._held_data_marked:
                        self._held_data_marked = mark_held_data(self._path, sync=self._sync)
                    return
                except lmdb.MapFullError:
                    self._abort_and_grow(txn)
                except lmdb.Error as exc:
                    self._abort(txn)
                    raise translate_error(exc, "cannot commit a write batch") from exc
                except BaseException:
                    self._abort(txn)
                    raise

    def _abort(self, txn: lmdb.Transaction[bytes]) -> None:
        """Abort a write transaction while no other thread is inside LMDB.

        py-lmdb 3.0's ``Transaction.abort`` of a write transaction can wait, holding the GIL,
        for operations in flight on other threads, which need the GIL to finish; aborting
        only under the exclusive gate rules that deadlock out.
        """
        self._gate.enter_exclusive()
        try:
            txn.abort()
        finally:
            self._gate.exit_exclusive()

    def _abort_and_grow(self, txn: lmdb.Transaction[bytes]) -> None:
        """Abort the full transaction and double the map, with no snapshot open anywhere."""
        own_snapshot = bool(self._gate.depth())
        self._gate.enter_exclusive()
        try:
            txn.abort()
            if own_snapshot:
                raise StoreError(
                    "the LMDB map is full and cannot grow while this thread holds a snapshot "
                    "of the store; close the snapshot before writing, or open the store with "
                    "a larger map_size"
                )
            self._check_open()
            current = self._env.info()["map_size"]
            try:
                self._env.set_mapsize(current * 2)
            except lmdb.Error as exc:
                raise translate_error(exc, f"cannot grow the map beyond {current} bytes") from exc
        finally:
            self._gate.exit_exclusive()

    def _adopt_map_size(self) -> None:
        """Adopt a map size another process has grown the environment to."""
        if self._gate.depth():
            raise StoreError("another process grew the map while this thread holds a snapshot")
        with self._write_lock:
            self._gate.enter_exclusive()
            try:
                self._check_open()
                try:
                    self._env.set_mapsize(0)
                except lmdb.Error as exc:
                    raise translate_error(exc, "cannot adopt the grown map size") from exc
            finally:
                self._gate.exit_exclusive()
