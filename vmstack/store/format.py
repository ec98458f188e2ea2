"""The format version of the records vmstack keeps in a store, and the refusal of another.

vmstack's own records (the configuration record, the C-chain's integrity entries and
integrity-start marker, the proposer layer's records and pointers) are framed by
:mod:`vmstack.checksum`. Each part that keeps such records calls :func:`check_format` when
it opens a store: the store's format record, under :data:`FORMAT_KEY` (framed itself), must
name :data:`FORMAT_VERSION`. A store written with another format is refused with
:class:`~vmstack.errors.StoreCorrupted` naming both versions, as its records would not read
back (every one would fail its checksum). A store with no format record is new when the part
has no records in it yet (the record is written then, unless the store is read-only), and
of format version 1 otherwise: the records vmstack wrote before there was a format record,
whose checksums covered the value alone. Nothing converts an older store; it is rebuilt.

Versions: 1, no format record, checksums over the value alone for records; 2, every
checksum covers its key (:func:`vmstack.checksum.frame`).
"""

from __future__ import annotations

import contextlib
from typing import Final

from vmstack.checksum import frame, unframe
from vmstack.errors import StoreCorrupted, StoreError
from vmstack.store import keyspaces
from vmstack.store.base import KeyValueStore

__all__ = ["FORMAT_KEY", "FORMAT_VERSION", "check_format"]

#: The key of the store's format record (beside the configuration records, outside every
#: part's own keyspace).
FORMAT_KEY: Final = keyspaces.FORMAT.prefix
#: The format version of the records this vmstack writes and reads.
FORMAT_VERSION: Final = 2
_UNRECORDED_VERSION: Final = 1
_VERSION_LEN: Final = 4


def _refusal(found: int) -> StoreCorrupted:
    return StoreCorrupted(
        f"the store's records are in format version {found}, and this vmstack reads format "
        f"version {FORMAT_VERSION} only: rebuild the store (a new one, bootstrapped again)"
    )


def check_format(store: KeyValueStore, *, holds_records: bool) -> None:
    """Hold ``store`` to :data:`FORMAT_VERSION`; ``holds_records`` says whether the calling
    part already has records in it.

    :class:`~vmstack.errors.StoreCorrupted` naming both versions for a store of another
    version (or of version 1: records, but no format record), or for a damaged format
    record. A store with neither gets the record, unless it cannot be written (opened
    read-only), when it is left as it is.
    """
    try:
        stored = store.get(FORMAT_KEY)
    except KeyError:
        if holds_records:
            raise _refusal(_UNRECORDED_VERSION) from None
        with contextlib.suppress(StoreError):
            store.put(FORMAT_KEY, frame(FORMAT_KEY, FORMAT_VERSION.to_bytes(_VERSION_LEN, "big")))
        return
    version = int.from_bytes(
        unframe(FORMAT_KEY, stored, "the store's format record", length=_VERSION_LEN), "big"
    )
    if version != FORMAT_VERSION:
        raise _refusal(version)
