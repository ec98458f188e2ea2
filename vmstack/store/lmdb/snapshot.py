"""Reading an LMDB store: the short read transaction of one call, the zero-copy snapshot,
and the ordered key scan both use.

A :class:`LMDBSnapshot` is one LMDB read transaction opened with ``buffers=True``: its values
are ``memoryview`` slices of the map, valid inside its with-block only; using it outside
raises :class:`~vmstack.errors.StoreClosed`. Both kinds of read enter and leave through
the store's read gate (:meth:`LMDBStore._begin_read` and :meth:`LMDBStore._end_read`), so a
remap or a close never pulls the map from under a reader.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import lmdb

from vmstack.errors import StoreClosed, StoreError
from vmstack.store.base import check_key, check_prefix
from vmstack.store.lmdb.errors import translate_error

if TYPE_CHECKING:
    from vmstack.store.lmdb.store import LMDBStore

__all__ = ["LMDBSnapshot", "ReadTxn", "scan"]

V = TypeVar("V", bytes, memoryview)


class ReadTxn:
    """A short read transaction as a context manager (gate held for its duration)."""

    __slots__ = ("_buffers", "_store", "_txn")

    def __init__(self, store: LMDBStore, buffers: bool) -> None:
        self._store = store
        self._buffers = buffers

    def __enter__(self) -> lmdb.Transaction[Any]:
        self._txn = self._store._begin_read(buffers=self._buffers)
        return self._txn

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._store._end_read(self._txn)


def _closed_get(key: bytes) -> NoReturn:
    raise StoreClosed("the snapshot is used outside its with-block")


class LMDBSnapshot:
    """One LMDB read transaction with ``buffers=True``: consistent and zero-copy."""

    __slots__ = ("_get", "_state", "_store", "_txn")

    def __init__(self, store: LMDBStore) -> None:
        self._store = store
        self._txn: lmdb.Transaction[memoryview] | None = None
        self._get: Any = _closed_get
        self._state = 0

    def __enter__(self) -> LMDBSnapshot:
        if self._state:
            raise StoreClosed("a snapshot can be entered only once")
        self._state = 1
        self._txn = self._store._begin_read(buffers=True)
        self._get = self._txn.get
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        txn, self._txn = self._txn, None
        self._get = _closed_get
        self._state = 2
        if txn is not None:
            self._store._end_read(txn)

    def _failure(self, exc: lmdb.Error, key: bytes) -> BaseException:
        check_key(key)
        if self._txn is None:
            return StoreClosed("the snapshot is used outside its with-block")
        return translate_error(exc, f"cannot read key {key.hex()}")

    def get(self, key: bytes) -> memoryview:
        """The value as a zero-copy view, valid inside the with-block; ``KeyError`` if none."""
        if type(key) is not bytes:
            check_key(key)
        try:
            value: memoryview | None = self._get(key)
        except lmdb.Error as exc:
            raise self._failure(exc, key) from exc
        if value is None:
            check_key(key)
            raise KeyError(key)
        return value

    def has(self, key: bytes) -> bool:
        """Whether ``key`` had a value when the snapshot opened."""
        if type(key) is not bytes:
            check_key(key)
        try:
            found = self._get(key) is not None
        except lmdb.Error as exc:
            raise self._failure(exc, key) from exc
        if not found:
            check_key(key)
        return found

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, memoryview]]:
        """Pairs in key order as of the snapshot; values are zero-copy views."""
        prefix, start = check_prefix(prefix, start)
        if self._txn is None:
            raise StoreClosed("the snapshot is used outside its with-block")
        return self._guarded(scan(self._txn, prefix, start, None))

    def check_pages(self, prefix: bytes) -> None:
        """Check, before a scan of ``prefix`` in this snapshot, every page liblmdb would
        walk for it (:func:`~vmstack.store.lmdb.pages.check_range_pages`), so that a damaged
        page is :class:`~vmstack.errors.StoreCorrupted` naming the data file and the page
        rather than one of liblmdb's assertions aborting the process."""
        from vmstack.store.lmdb.pages import check_range_pages

        check_prefix(prefix, None)
        if self._txn is None:
            raise StoreClosed("the snapshot is used outside its with-block")
        try:
            check_range_pages(self._store.path, self._txn.id(), prefix)
        except OSError as exc:
            raise StoreError(
                f"cannot read the LMDB data file of {self._store.path}: {exc}"
            ) from exc

    def data_size(self) -> int:
        """The size in bytes of the store's LMDB data file (what bounds the cost of
        ``check_pages(b"")``, which walks every page of the main tree)."""
        from vmstack.store.lmdb.files import DATA_FILE

        try:
            return os.path.getsize(os.path.join(self._store.path, DATA_FILE))
        except OSError as exc:
            raise StoreError(
                f"cannot read the LMDB data file of {self._store.path}: {exc}"
            ) from exc

    def iterate_back(self, prefix: bytes, *, start: bytes) -> Iterator[tuple[bytes, memoryview]]:
        """Pairs under ``prefix`` in descending key order, from the last key at or below
        ``start``, as of the snapshot (one LMDB cursor stepping back; values are zero-copy
        views). What a walk down consecutive heights reads in key order."""
        check_prefix(prefix, start)
        if self._txn is None:
            raise StoreClosed("the snapshot is used outside its with-block")
        return self._guarded(_scan_back(self._txn, prefix, start))

    def _guarded(
        self, pairs: Iterator[tuple[bytes, memoryview]]
    ) -> Iterator[tuple[bytes, memoryview]]:
        try:
            yield from pairs
        except StoreError:
            if self._txn is None:
                raise StoreClosed("the snapshot is used outside its with-block") from None
            raise


def scan(
    txn: lmdb.Transaction[V], prefix: bytes, start: bytes | None, after: bytes | None
) -> Iterator[tuple[bytes, V]]:
    """Pairs of ``txn`` under ``prefix``, from ``start`` on, strictly after ``after``."""
    first = prefix if start is None or start < prefix else start
    if after is not None and after > first:
        first = after
    try:
        cursor = txn.cursor()
        positioned = cursor.set_range(first) if first else cursor.first()
        if not positioned:
            return
        if after is not None and cursor.key() == after and not cursor.next():
            return
        for raw_key, value in cursor.iternext():
            key = bytes(raw_key)
            if not key.startswith(prefix):
                return
            yield key, value
    except lmdb.Error as exc:
        raise translate_error(exc, "cannot iterate the store") from exc


def _scan_back(
    txn: lmdb.Transaction[memoryview], prefix: bytes, start: bytes
) -> Iterator[tuple[bytes, memoryview]]:
    """Pairs of ``txn`` under ``prefix`` in descending key order from the last key at or
    below ``start``."""
    try:
        cursor = txn.cursor()
        if cursor.set_range(start):
            if bytes(cursor.key()) > start and not cursor.prev():
                return
        elif not cursor.last():
            return
        for raw_key, value in cursor.iterprev():
            key = bytes(raw_key)
            if not key.startswith(prefix):
                if key < prefix:
                    return
                continue
            yield key, value
    except lmdb.Error as exc:
        raise translate_error(exc, "cannot iterate the store") from exc
