"""The LMDB data file checked before LMDB maps it, and the marker that says it held data.

LMDB maps ``data.mdb`` and reads its pages straight from memory. A file cut shorter than
the pages its newest meta page names is never noticed by LMDB itself: the first read past
the end of the file is a ``SIGBUS`` that kills the process, which no ``except`` can catch.
So an :class:`~vmstack.store.LMDBStore`, writer or read-only, first reads the two meta pages
itself (:func:`check_data_file`), as LMDB's ``mdb_env_read_header`` does, and refuses a file
smaller than ``(last page + 1) * page size`` of the meta with the higher transaction ID with
:class:`~vmstack.errors.StoreCorrupted` naming the file and both sizes.

An empty or missing ``data.mdb`` holds no meta page, and LMDB opens it as a new, empty store.
That is right for a new store and wrong for one whose data file was cut to nothing. The
honest signal of the difference is kept beside the file: :data:`HELD_DATA_MARKER`, which
the writer creates (and, with ``sync=True``, flushes) once the environment has a committed
transaction (after its first commit, or at open when the newest meta page already counts
one). A data file that is empty or missing while the marker exists is ``StoreCorrupted``,
never re-initialised. The marker is written after the commit it records, so a crash between
the two leaves a non-empty data file without a marker, which the next writer's open marks.
The lock files are no such signal: LMDB creates ``lock.mdb``, and the store creates
``writer.lock``, whenever a store is opened, written or not.

The layout read here is LMDB 0.9's (the one py-lmdb bundles), in the machine's byte order
and word size: a page header (``pgno``, pad, flags, lower, upper), then the meta (magic,
version, address, map size, the two database records, the first of which holds the page
size in its pad field, the last page number and the transaction ID). A meta page that is
not LMDB's (wrong magic, flags or version) is left to LMDB, which reports it as damage.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from typing import Final

import attrs

from vmstack.errors import StoreCorrupted, StoreError

__all__ = ["DATA_FILE", "HELD_DATA_MARKER", "MetaPage", "check_data_file", "mark_held_data"]

logger = logging.getLogger(__name__)

#: LMDB's data file in the environment directory.
DATA_FILE: Final = "data.mdb"
#: The file beside :data:`DATA_FILE` that says the environment has committed data.
HELD_DATA_MARKER: Final = "data.committed"

_MARKER_TEXT: Final = (
    b"This LMDB environment has committed transactions (written by vmstack's LMDBStore).\n"
    b"An empty or missing data.mdb beside this file is damage, not a new store.\n"
)

_PAGE_HEADER: Final = struct.Struct("@NHHHH")
_META: Final = struct.Struct("@IIPN" + "IHHNNNNN" * 2 + "NN")
_META_LEN: Final = _PAGE_HEADER.size + _META.size
_MAGIC: Final = 0xBEEFC0DE
_DATA_VERSION: Final = 1
_P_META: Final = 0x08
_PAGE_SIZE_FIELD: Final = 4
_LAST_PAGE_FIELD: Final = -2
_TXNID_FIELD: Final = -1


@attrs.frozen(slots=True)
class MetaPage:
    """What the newer of the two meta pages says: the page size, the last page number in
    use and the ID of the last committed transaction (0 for a store never written)."""

    page_size: int
    last_page: int
    txnid: int

    @property
    def required_size(self) -> int:
        """The bytes the data file must at least hold: every page up to the last."""
        return (self.last_page + 1) * self.page_size


def _read_meta(descriptor: int, offset: int) -> tuple[int, ...] | None:
    """The meta fields of the page at ``offset``, or ``None`` if it is not an LMDB meta
    page of this layout (short, wrong flags, magic or version)."""
    raw = os.pread(descriptor, _META_LEN, offset)
    if len(raw) != _META_LEN:
        return None
    flags = _PAGE_HEADER.unpack_from(raw)[2]
    fields = _META.unpack_from(raw, _PAGE_HEADER.size)
    if not flags & _P_META or fields[0] != _MAGIC or fields[1] != _DATA_VERSION:
        return None
    return fields


def _newest_meta(descriptor: int, data_path: str, size: int) -> MetaPage | None:
    """The newer meta page of the data file open as ``descriptor`` (``size`` bytes), or
    ``None`` when a meta page is not LMDB's (left for LMDB to report)."""
    first = _read_meta(descriptor, 0)
    if first is None:
        if size < _META_LEN:
            raise StoreCorrupted(
                f"the LMDB data file {data_path} is {size} bytes, too short "
                f"to hold its first meta page ({_META_LEN} bytes)"
            )
        return None
    page_size = first[_PAGE_SIZE_FIELD]
    if page_size < _META_LEN:
        return None
    if size < page_size + _META_LEN:
        raise StoreCorrupted(
            f"the LMDB data file {data_path} is {size} bytes, too short to "
            f"hold its two meta pages ({page_size + _META_LEN} bytes)"
        )
    second = _read_meta(descriptor, page_size)
    if second is None:
        return None
    newest = second if second[_TXNID_FIELD] > first[_TXNID_FIELD] else first
    return MetaPage(page_size, newest[_LAST_PAGE_FIELD], newest[_TXNID_FIELD])


def check_data_file(path: str) -> MetaPage | None:
    """Check the data file of the LMDB environment at ``path`` before LMDB maps it.

    Returns what its newer meta page says, or ``None`` for a new store (no data file, or
    an empty one, and no :data:`HELD_DATA_MARKER`) and for meta pages that are not LMDB's
    (LMDB's own open then reports them). :class:`~vmstack.errors.StoreCorrupted`, naming
    the file and the sizes, for a data file shorter than the pages its meta names, too
    short to hold its meta pages, or empty or missing beside the marker. A check that
    fails is read again once, so a meta page a live writer was writing at that moment
    cannot refuse a sound file.
    """
    data_path = os.path.join(path, DATA_FILE)
    try:
        descriptor = os.open(data_path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        _refuse_if_held(path, data_path, "missing")
        return None
    except OSError as exc:
        raise StoreError(f"cannot read the LMDB data file {data_path}: {exc}") from exc
    try:
        try:
            return _check_open_file(path, descriptor, data_path)
        except StoreCorrupted:
            return _check_open_file(path, descriptor, data_path)
    except OSError as exc:
        raise StoreError(f"cannot read the LMDB data file {data_path}: {exc}") from exc
    finally:
        os.close(descriptor)


def _check_open_file(path: str, descriptor: int, data_path: str) -> MetaPage | None:
    size = os.fstat(descriptor).st_size
    if size == 0:
        _refuse_if_held(path, data_path, "0 bytes")
        return None
    meta = _newest_meta(descriptor, data_path, size)
    if meta is None:
        return None
    # The file only grows while a writer commits, and the pages a meta names are written
    # before the meta: its size, taken after the meta was read, is never short of it.
    size = os.fstat(descriptor).st_size
    if size < meta.required_size:
        raise StoreCorrupted(
            f"the LMDB data file {data_path} is {size} bytes, but its meta page (transaction "
            f"{meta.txnid}) names page {meta.last_page} of {meta.page_size} bytes as the "
            f"last, so it must hold at least {meta.required_size} bytes: the file was cut "
            "short"
        )
    return meta


def _refuse_if_held(path: str, data_path: str, state: str) -> None:
    marker = os.path.join(path, HELD_DATA_MARKER)
    if os.path.exists(marker):
        raise StoreCorrupted(
            f"the LMDB data file {data_path} is {state}, but {marker} says the store held "
            "committed data: the data file was cut or removed, and the store is not opened "
            "as a new one"
        )


def mark_held_data(path: str, *, sync: bool) -> bool:
    """Create :data:`HELD_DATA_MARKER` in the environment directory ``path`` (flushed, with
    the directory entry, when ``sync``); whether it now exists. A failure is logged, not
    raised: the data it would protect was committed, and the next commit tries again."""
    marker = os.path.join(path, HELD_DATA_MARKER)
    try:
        descriptor = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(descriptor, _MARKER_TEXT)
            if sync:
                os.fsync(descriptor)
        finally:
            os.close(descriptor)
        if sync:
            directory = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                with contextlib.suppress(OSError):
                    os.fsync(directory)
            finally:
                os.close(directory)
    except OSError as exc:
        logger.warning("cannot write %s: %s", marker, exc)
        return False
    return True
