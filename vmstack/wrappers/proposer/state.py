"""The proposer layer's records in the store, and their write-ahead recovery.

The layer keeps its accepted post-fork blocks in its own keyspace of the store it shares
with the VMs below (a :class:`~vmstack.store.PrefixedStore` view under
:data:`STORE_PREFIX`), as avalanchego's proposervm keeps its ``state/``:

- ``b`` + block ID: the record of an accepted post-fork block (checksum, inner block ID,
  parent ID, envelope bytes);
- ``i`` + inner block ID: the index from an inner block to the envelope that wraps it;
- ``last``: the newest post-fork block written (accepted, or being accepted);
- ``first``: the height of the first accepted post-fork block.

Every stored value carries a checksum over its key and itself, so a damaged or misplaced
value is ``StoreCorrupted``, never followed or answered. An accept writes its record ahead
of the inner VM's accept (:meth:`ProposerState.write_accepted`); a crash between the two
leaves a record the inner VM never accepted, which :meth:`ProposerState.recover` undoes on
the next start of the store's writer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager

from vmstack.batching import BLOCK_ID_LEN
from vmstack.checksum import (
    CHECKSUM_LEN,
    append_keyed_checksum,
    leading_checksum_holds,
    prepend_checksum,
    read_keyed_value,
)
from vmstack.errors import InvalidBlock, StoreCorrupted
from vmstack.store import KeyValueStore, PrefixedStore, ReadSnapshot
from vmstack.wrappers.proposer.block import PostForkBlock, decode_block

__all__ = [
    "ProposerState",
    "STORE_PREFIX",
    "is_block_id",
    "stored_block",
]

logger = logging.getLogger(__name__)

#: The keyspace of the layer's records in the store it shares with the VMs below.
STORE_PREFIX = b"proposervm/"

_BLOCK = b"b"  # b + id -> crc32 (4, BE) | inner id (32) | parent id (32) | envelope bytes
_INNER = b"i"  # i + inner id -> id | crc32(b"i" + inner id + id) (4, BE)
_LAST = b"last"  # the newest post-fork block written: id | crc32(b"last" + id) (4, BE)
_FIRST = b"first"  # first post-fork height: height (8, BE) | crc32(b"first" + height) (4, BE)
_HEIGHT_LEN = 8
_RECORD_HEAD = CHECKSUM_LEN + 2 * BLOCK_ID_LEN


def _decode_pointer(key: bytes, value: bytes | memoryview, what: str) -> bytes:
    """The block ID of a pointer stored under ``key`` with
    :func:`~vmstack.checksum.append_keyed_checksum`, so a damaged or misplaced pointer is
    caught rather than followed; ``StoreCorrupted`` naming ``what`` otherwise."""
    return read_keyed_value(key, value, BLOCK_ID_LEN, f"the stored {what}")


def _encode_record(inner_id: bytes, envelope: PostForkBlock) -> bytes:
    return prepend_checksum(inner_id + envelope.parent_id + bytes(envelope))


def _record_parts(block_id: bytes, record: bytes | memoryview) -> tuple[bytes, bytes, bytes]:
    """``(inner id, parent id, envelope bytes)`` of a stored record, or ``StoreCorrupted``
    if the record is short or fails its checksum. The checksum covers everything after it,
    the signature included (which the block ID leaves out), so the ancestors walk reads a
    record without decoding or hashing the envelope."""
    if len(record) <= _RECORD_HEAD:
        raise StoreCorrupted(f"stored post-fork block {block_id.hex()} is truncated")
    view = memoryview(record)
    if not leading_checksum_holds(view):
        raise StoreCorrupted(f"stored post-fork block {block_id.hex()} fails its checksum")
    parent_at = CHECKSUM_LEN + BLOCK_ID_LEN
    return (bytes(view[CHECKSUM_LEN:parent_at]), bytes(view[parent_at:_RECORD_HEAD]),
            bytes(view[_RECORD_HEAD:]))


def is_block_id(value: object) -> bool:
    """Whether ``value`` is a bytes-like object of a block ID's length."""
    return isinstance(value, bytes | bytearray | memoryview) and len(value) == BLOCK_ID_LEN


def stored_block(snapshot: ReadSnapshot, block_id: bytes) -> tuple[bytes, bytes] | None:
    """``(envelope bytes, parent ID)`` of the accepted post-fork block ``block_id`` in a
    snapshot of :meth:`ProposerState.snapshot`, or ``None`` if it has no record there; read
    without decoding the envelope (the record's checksum vouches for it)."""
    try:
        record = snapshot.get(_BLOCK + block_id)
    except KeyError:
        return None
    _, parent_id, data = _record_parts(block_id, record)
    return data, parent_id


def _decode_record(block_id: bytes, record: bytes) -> tuple[bytes, PostForkBlock]:
    """The inner ID and envelope of an accepted block's record, checked against its
    checksum and its ID."""
    inner_id, _, data = _record_parts(block_id, record)
    try:
        envelope = decode_block(data)
    except InvalidBlock as error:
        raise StoreCorrupted(f"stored post-fork block {block_id.hex()}: "
                             f"{error.reason}") from None
    if not isinstance(envelope, PostForkBlock) or envelope.id != block_id:
        raise StoreCorrupted(f"stored post-fork block {block_id.hex()} does not hash to "
                             "its ID")
    return inner_id, envelope


class ProposerState:
    """The layer's records in its keyspace of ``store``: reading them, writing an accepted
    block ahead of the inner VM's accept, and undoing a write the inner VM never followed.
    """

    __slots__ = ("_store",)

    def __init__(self, store: KeyValueStore) -> None:
        self._store = PrefixedStore(store, STORE_PREFIX)

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        """A consistent view of the records, for :func:`stored_block`."""
        return self._store.snapshot()

    def record(self, block_id: bytes) -> tuple[bytes, PostForkBlock] | None:
        """The inner ID and envelope of the accepted post-fork block ``block_id``, or
        ``None`` if it is not one; ``StoreCorrupted`` for a damaged record."""
        try:
            record = self._store.get(_BLOCK + block_id)
        except KeyError:
            return None
        return _decode_record(block_id, record)

    def is_accepted(self, block_id: bytes) -> bool:
        """Whether ``block_id`` is an accepted post-fork block (it has a record)."""
        return self._store.has(_BLOCK + block_id)

    def accepted_envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        """The accepted post-fork block whose inner block is ``inner_id``, from the index.
        The entry's checksum covers its key and value, so a damaged or misplaced entry is
        ``StoreCorrupted``, never another block's ID."""
        if not is_block_id(inner_id):
            return None
        key = _INNER + bytes(inner_id)
        try:
            value = self._store.get(key)
        except KeyError:
            return None
        return _decode_pointer(key, value, f"index entry of inner block "
                               f"{bytes(inner_id).hex()}")

    def newest_parent(self) -> bytes | None:
        """The parent ID of the newest post-fork block written (accepted or being
        accepted), or ``None`` before the first; pointer and record are read in one
        snapshot, and the record must exist."""
        with self._store.snapshot() as snapshot:
            try:
                value = snapshot.get(_LAST)
            except KeyError:
                return None
            newest = _decode_pointer(_LAST, value, "newest post-fork block pointer")
            try:
                record = snapshot.get(_BLOCK + newest)
            except KeyError:
                raise StoreCorrupted(f"the newest post-fork block pointer names "
                                     f"{newest.hex()}, which has no record") from None
            return _record_parts(newest, record)[1]

    def first_post_fork_height(self) -> int | None:
        """The height of the first accepted post-fork block, or ``None`` before it."""
        try:
            value = self._store.get(_FIRST)
        except KeyError:
            return None
        encoded = read_keyed_value(_FIRST, value, _HEIGHT_LEN,
                                   "the stored first post-fork height")
        return int.from_bytes(encoded, "big")

    def write_accepted(self, block_id: bytes, inner_id: bytes, envelope: PostForkBlock,
                       height: int) -> None:
        """Write the record of a post-fork block being accepted, its index entry and the
        newest-block pointer (and the first post-fork height for the first one) in one
        batch, ahead of the inner VM's accept."""
        first = not self.is_accepted(envelope.parent_id)
        with self._store.write_batch() as batch:
            batch.put(_BLOCK + block_id, _encode_record(inner_id, envelope))
            batch.put(_INNER + inner_id, append_keyed_checksum(_INNER + inner_id, block_id))
            batch.put(_LAST, append_keyed_checksum(_LAST, block_id))
            if first:
                encoded = height.to_bytes(_HEIGHT_LEN, "big")
                batch.put(_FIRST, append_keyed_checksum(_FIRST, encoded))

    def undo_record(self, block_id: bytes, inner_id: bytes, parent_id: bytes) -> None:
        """Remove the record of a post-fork block whose inner block was not accepted."""
        with self._store.write_batch() as batch:
            batch.delete(_BLOCK + block_id)
            batch.delete(_INNER + inner_id)
            if self._store.has(_BLOCK + parent_id):
                batch.put(_LAST, append_keyed_checksum(_LAST, parent_id))
            else:
                batch.delete(_LAST)
                batch.delete(_FIRST)

    def recover(self, inner_accepted: Callable[[bytes], bool]) -> None:
        """Undo a record written ahead of an inner accept that never happened (a crash
        between the two): the newest record counts only if ``inner_accepted`` says the
        inner VM accepted its inner block. Only the store's writer runs this (see
        :func:`vmstack.store.is_writer`): a record another live process is accepting is in
        flight, not left by a crash."""
        last = self._read_last_pointer()
        if last is None:
            return
        try:
            record = self._store.get(_BLOCK + last)
        except KeyError:
            raise StoreCorrupted(f"the newest post-fork block pointer names {last.hex()}, "
                                 "which has no record") from None
        inner_id, envelope = _decode_record(last, record)
        if not inner_accepted(inner_id):
            logger.warning("undoing post-fork block %s: its inner block was never accepted",
                           last.hex())
            self.undo_record(last, inner_id, envelope.parent_id)

    def _read_last_pointer(self) -> bytes | None:
        """The newest post-fork block written (accepted or being accepted), or ``None``."""
        try:
            value = self._store.get(_LAST)
        except KeyError:
            return None
        return _decode_pointer(_LAST, value, "newest post-fork block pointer")
