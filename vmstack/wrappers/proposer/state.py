"""The proposer layer's records in the store, and their write-ahead recovery.

The layer keeps its accepted post-fork blocks in its own keyspace of the store it shares
with the VMs below (a :class:`~vmstack.store.PrefixedStore` view under
:data:`STORE_PREFIX`), as avalanchego's proposervm keeps its ``state/``:

- ``b`` + block ID: the record of an accepted post-fork block (inner block ID, parent ID,
  envelope bytes);
- ``i`` + inner block ID: the index from an inner block to the envelope that wraps it;
- ``last``: the newest post-fork block written (accepted, or being accepted);
- ``first``: the height of the first accepted post-fork block.

Every value is stored framed by :func:`vmstack.checksum.frame`, whose checksum covers its
key (the layer's prefix included) and itself, so a damaged value, or a sound one copied under
another key of its kind (another block's record, another inner block's index entry), is
``StoreCorrupted``, never followed or answered. An accept writes its record ahead
of the inner VM's accept (:meth:`ProposerState.write_accepted`); a crash between the two
leaves a record the inner VM never accepted, which :meth:`ProposerState.recover` undoes on
the next start of the store's writer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager

from vmstack.batching import BLOCK_ID_LEN
from vmstack.checksum import frame, unframe
from vmstack.errors import InvalidBlock, StoreCorrupted
from vmstack.store import KeyValueStore, PrefixedStore, ReadSnapshot, keyspaces
from vmstack.store.format import check_format
from vmstack.wrappers.proposer.envelope import PostForkBlock, decode_block

__all__ = [
    "ProposerState",
    "STORE_PREFIX",
    "is_block_id",
    "stored_block",
]

logger = logging.getLogger(__name__)

#: The keyspace of the layer's records in the store it shares with the VMs below (a line
#: of the store's map, :mod:`vmstack.store.keyspaces`, as each of its keys is).
STORE_PREFIX = keyspaces.PROPOSER_PREFIX

# Each value below is stored as frame(STORE_PREFIX + key, value).
_BLOCK = keyspaces.PROPOSER_RECORD.tag(STORE_PREFIX)  # b + id -> inner id | parent id | envelope
_INNER = keyspaces.PROPOSER_INDEX.tag(STORE_PREFIX)  # i + inner id -> id (32)
_LAST = keyspaces.PROPOSER_LAST.tag(STORE_PREFIX)  # the newest post-fork block written: id (32)
_FIRST = keyspaces.PROPOSER_FIRST.tag(STORE_PREFIX)  # the first post-fork height: height (8, BE)
_HEIGHT_LEN = 8
_RECORD_HEAD = 2 * BLOCK_ID_LEN


def _framed(key: bytes, value: bytes) -> bytes:
    """The stored form of ``value`` under ``key`` of the layer's keyspace."""
    return frame(STORE_PREFIX + key, value)


def _unframed(
    key: bytes, stored: bytes | memoryview, what: str, *, length: int | None = None
) -> memoryview:
    """The value :func:`_framed` stored under ``key``; ``StoreCorrupted`` naming ``what``
    for a damaged or misplaced one."""
    return unframe(STORE_PREFIX + key, stored, what, length=length)


def _decode_pointer(key: bytes, value: bytes | memoryview, what: str) -> bytes:
    """The block ID of a pointer stored under ``key``, so a damaged or misplaced pointer
    is caught rather than followed; ``StoreCorrupted`` naming ``what`` otherwise."""
    return bytes(_unframed(key, value, f"the stored {what}", length=BLOCK_ID_LEN))


def _encode_record(block_id: bytes, inner_id: bytes, envelope: PostForkBlock) -> bytes:
    return _framed(_BLOCK + block_id, inner_id + envelope.parent_id + bytes(envelope))


def _record_parts(block_id: bytes, record: bytes | memoryview) -> tuple[bytes, bytes, bytes]:
    """``(inner id, parent id, envelope bytes)`` of a stored record, or ``StoreCorrupted``
    if the record is short or fails its checksum. The checksum covers the record's key and
    everything in it, the signature included (which the block ID leaves out), so the
    ancestors walk reads a record without decoding or hashing the envelope, and a record
    copied under another block's key is caught there too."""
    what = f"stored post-fork block {block_id.hex()}"
    body = _unframed(_BLOCK + block_id, record, what)
    if len(body) <= _RECORD_HEAD:
        raise StoreCorrupted(f"{what} is truncated")
    return (
        bytes(body[:BLOCK_ID_LEN]),
        bytes(body[BLOCK_ID_LEN:_RECORD_HEAD]),
        bytes(body[_RECORD_HEAD:]),
    )


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
        raise StoreCorrupted(f"stored post-fork block {block_id.hex()}: {error.reason}") from None
    if not isinstance(envelope, PostForkBlock) or envelope.id != block_id:
        raise StoreCorrupted(f"stored post-fork block {block_id.hex()} does not hash to its ID")
    return inner_id, envelope


class ProposerState:
    """The layer's records in its keyspace of ``store``: reading them, writing an accepted
    block ahead of the inner VM's accept, and undoing a write the inner VM never followed.
    Opening holds the store to the record format (:func:`vmstack.store.format.check_format`):
    records of another format are ``StoreCorrupted``.
    """

    __slots__ = ("_store",)

    def __init__(self, store: KeyValueStore) -> None:
        self._store = PrefixedStore(store, STORE_PREFIX)
        check_format(store, holds_records=self._store.has(_LAST) or self._store.has(_FIRST))

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
        return _decode_pointer(key, value, f"index entry of inner block {bytes(inner_id).hex()}")

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
                raise StoreCorrupted(
                    f"the newest post-fork block pointer names {newest.hex()}, which has no record"
                ) from None
            return _record_parts(newest, record)[1]

    def first_post_fork_height(self) -> int | None:
        """The height of the first accepted post-fork block, or ``None`` before it."""
        try:
            value = self._store.get(_FIRST)
        except KeyError:
            return None
        encoded = _unframed(_FIRST, value, "the stored first post-fork height", length=_HEIGHT_LEN)
        return int.from_bytes(encoded, "big")

    def write_accepted(
        self, block_id: bytes, inner_id: bytes, envelope: PostForkBlock, height: int
    ) -> None:
        """Write the record of a post-fork block being accepted, its index entry and the
        newest-block pointer (and the first post-fork height for the first one) in one
        batch, ahead of the inner VM's accept."""
        first = not self.is_accepted(envelope.parent_id)
        with self._store.write_batch() as batch:
            batch.put(_BLOCK + block_id, _encode_record(block_id, inner_id, envelope))
            batch.put(_INNER + inner_id, _framed(_INNER + inner_id, block_id))
            batch.put(_LAST, _framed(_LAST, block_id))
            if first:
                batch.put(_FIRST, _framed(_FIRST, height.to_bytes(_HEIGHT_LEN, "big")))

    def undo_record(self, block_id: bytes, inner_id: bytes, parent_id: bytes) -> None:
        """Remove the record of a post-fork block whose inner block was not accepted."""
        with self._store.write_batch() as batch:
            batch.delete(_BLOCK + block_id)
            batch.delete(_INNER + inner_id)
            if self._store.has(_BLOCK + parent_id):
                batch.put(_LAST, _framed(_LAST, parent_id))
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
            raise StoreCorrupted(
                f"the newest post-fork block pointer names {last.hex()}, which has no record"
            ) from None
        inner_id, envelope = _decode_record(last, record)
        if not inner_accepted(inner_id):
            logger.warning(
                "undoing post-fork block %s: its inner block was never accepted", last.hex()
            )
            self.undo_record(last, inner_id, envelope.parent_id)

    def _read_last_pointer(self) -> bytes | None:
        """The newest post-fork block written (accepted or being accepted), or ``None``."""
        try:
            value = self._store.get(_LAST)
        except KeyError:
            return None
        return _decode_pointer(_LAST, value, "newest post-fork block pointer")
