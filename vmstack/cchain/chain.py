"""The accepted chain of :class:`~vmstack.cchain.vm.CChainVM` in its store: reading it, judged
(:class:`ChainReader`), and writing an accepted block (:func:`write_accepted`).

Two ways to serve a block:

- The slow path (:meth:`ChainReader.restore`, behind ``CChainVM.get_block``) is what a
  faithful VM does: find the number, check the block is canonical, read header and body,
  decode them, check the header hashes to its key, restore the execution artifacts of a
  settled block (read and decode its receipts, derive their derived fields, recover every
  sender with secp256k1 public-key recovery) and re-encode the block to produce its bytes.
  Nothing is skipped and nothing is slowed down on purpose: it is the honest serial baseline.
- The fast path (:class:`~vmstack.cchain.fastwalk.FastAncestorWalk`, behind
  ``CChainVM.get_ancestors``) reads within ONE store snapshot and stitches each block's
  bytes without decoding (see :mod:`vmstack.cchain.fastwalk`); the number of each parent is
  its child's minus one. The budget is :class:`~vmstack.batching.AncestorBudget` walked by
  :func:`~vmstack.batching.walk_ancestors`.

Each accept writes an integrity entry per block (a crc32 of the block's integrity key and
its RLP, and of that key and the receipts RLP once settled: a block's values copied under
another block's keys fail it); both paths check the block checksum, the slow path also the
header hash and the receipts checksum. Blocks written by other software (a coreth
database) have no integrity entry: they are served with the structural checks only
(framing of header and body, the canonical check, and on the slow path the header hash and
a strict decode); the ``vmstack-sum-from`` marker, written with the first block this VM
accepts, says from which height on an entry must exist; it carries its own checksum and may
not go missing while entries exist. The head pointers are checked against the canonical
entries (the last accepted block is the canonical one at its height, with none above it).
On an undamaged store both paths give the same answers.

:class:`ChainReader` reads every value the VM keeps (rawdb keys, see
:mod:`vmstack.cchain.rawdb`) and judges what it reads. The rule it keeps: a read that does
not find a block whole is judged by ONE function, :meth:`ChainReader.missing_or_corrupt`,
on every path (``get_block``, ``get_block_id_at_height``, the fast ancestors walk and
settlement):

- an unknown ID (no number entry), or a height with no canonical entry above the last
  accepted one, is :class:`~vmstack.errors.BlockNotFound`;
- a block the canonical entry at its height does not name is ``BlockNotFound`` when the
  store has both it and the block that entry names there (a side block), else the entry,
  or the number entry that put the block at that height, is damaged
  (:class:`~vmstack.errors.StoreCorrupted`);
- a canonical entry that names a block whose header or body the store lacks, an accepted
  height without a canonical entry, or a settled block without its receipts, is
  ``StoreCorrupted``: a store never drops part of an accepted block, so it is damage, not a
  reorg.

Values that are there but fail a check (length, checksum, hash, framing) are
``StoreCorrupted`` where they are read. Each path checks what it reads: the fast walk reads
neither receipts nor (for a parent, whose number is its child's minus one) number entries,
so damage to those shows on the slow path only, while the fast path goes on serving the
right bytes. A :class:`Settlement` is the receipts a block gets when it becomes settled.

With an archive beneath the store, which of the two answers a read is decided by the
chain's :class:`~vmstack.cchain.source.ChainSource` (the store first, then the archive), on
every path. An archived block has no integrity entry: the archive checks it. The one
integrity check of a stored block's bytes is :func:`check_block_checksum`, used by every
path.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Protocol

import attrs

from vmstack.cchain import rawdb
from vmstack.cchain.cache import CanonicalHashCache
from vmstack.cchain.codec import Flavour, decode_receipts, derive_receipts, encode_receipts
from vmstack.cchain.era1.tier import HistoryTier
from vmstack.cchain.execution import execute_transactions
from vmstack.cchain.integrity import Integrity, checksum
from vmstack.cchain.rlpbytes import block_bytes
from vmstack.cchain.source import ChainSource
from vmstack.cchain.types import AnyHeader, Block, Receipt
from vmstack.errors import BlockNotFound, InvalidBlock, StoreCorrupted
from vmstack.keccak import keccak256
from vmstack.store.base import KeyReader, KeyWriter, ReadSnapshot

if TYPE_CHECKING:
    pass

__all__ = [
    "AcceptedParts",
    "ChainReader",
    "MAX_NUMBER",
    "RestoredBlock",
    "Settlement",
    "check_block_checksum",
    "write_accepted",
]

#: The highest block number a header can carry (a uint64).
MAX_NUMBER: Final = 2**64 - 1
_HEADER_MEMO_SIZE = 4096


def check_block_checksum(
    integrity_key: bytes, number: int, block_id: bytes, data: bytes, recorded: int | None
) -> None:
    """The one integrity check of a stored block's bytes, on every path that reads one (the
    slow path, the fast walk, settlement): ``data`` (the block's stitched RLP) must give the
    checksum ``recorded`` in its integrity entry under ``integrity_key``. ``recorded`` is
    ``None`` when the entry is missing, which is damage for a block written with one.
    Raises :class:`StoreCorrupted` naming the block."""
    if recorded is None:
        raise StoreCorrupted(f"block {block_id.hex()} at {number} has no integrity entry")
    if checksum(integrity_key, data) != recorded:
        raise StoreCorrupted(f"the stored block {block_id.hex()} at {number} fails its checksum")


@attrs.frozen(slots=True)
class RestoredBlock:
    """A stored block as the slow path restores it: the decoded block, its re-encoded bytes,
    its recovered senders and (once settled) its receipts with derived fields."""

    block: Block
    raw: bytes
    header_size: int
    senders: tuple[bytes, ...]
    receipts: tuple[Receipt, ...] | None


class ChainReader:
    """Reads and judges the accepted chain under ``schema`` in the snapshots it is given;
    holds the canonical hash cache (settled heights only) and a memo of decoded headers."""

    def __init__(
        self,
        schema: rawdb.Schema,
        flavour: Flavour,
        cache_size: int,
        history: HistoryTier | None = None,
    ) -> None:
        self.schema = schema
        self.flavour = flavour
        #: Which of the store and the archive beneath it answers each read.
        self.source = ChainSource(schema, history)
        self.cache = CanonicalHashCache(cache_size)
        self._cache_lock = threading.Lock()
        self._headers: OrderedDict[bytes, AnyHeader] = OrderedDict()
        self._memo_lock = threading.Lock()

    # --- the one judgement of a block not found whole ---------------------------------------

    def missing_or_corrupt(
        self,
        reader: KeyReader,
        number: int,
        block_id: bytes | None,
        canonical: bytes | memoryview | None,
    ) -> BlockNotFound | StoreCorrupted:
        """The error for a read that did not find the accepted block ``block_id`` (``None``:
        whichever block is accepted) at ``number`` whole, ``canonical`` being the canonical
        entry read there. The one place missing and corrupt are told apart (see the module
        docstring); it reads more only to explain, on this failure path."""
        schema = self.schema
        if canonical is None:
            unheld = self.source.unheld(number)
            if unheld is not None:
                return BlockNotFound(unheld)
            if number <= self.number_of(reader, self.last_accepted(reader)):
                return StoreCorrupted(f"accepted height {number} has no canonical entry")
            if block_id is None:
                return BlockNotFound(f"no accepted block at height {number}")
            return BlockNotFound(f"block {block_id.hex()} at {number} is not accepted")
        if len(canonical) != rawdb.HASH_LENGTH:
            return StoreCorrupted(
                f"the canonical entry at height {number} is {len(canonical)} bytes, not 32"
            )
        named = bytes(canonical)
        for part, key in (
            ("header", schema.header_key(number, named)),
            ("body", schema.body_key(number, named)),
        ):
            if not reader.has(key):
                return StoreCorrupted(
                    f"the canonical entry at height {number} names block "
                    f"{named.hex()}, whose {part} the store does not have"
                )
        if block_id is not None and named != block_id:
            if not reader.has(schema.header_key(number, block_id)):
                # Its number entry (or its child's parent link) places it where the store
                # has no such block: a misplaced or damaged entry, not a side block.
                return StoreCorrupted(
                    f"block {block_id.hex()} is placed at height {number}, "
                    "where the store does not have it"
                )
            return BlockNotFound(f"block {block_id.hex()} is not the accepted block at {number}")
        if rawdb.read_header_number(reader, schema, named) != number:
            return StoreCorrupted(
                f"the canonical entry at height {number} names block "
                f"{named.hex()}, which the store does not have there"
            )
        return StoreCorrupted(f"block {named.hex()} at {number} could not be read whole")

    # --- head pointers -----------------------------------------------------------------------

    def last_accepted(self, reader: KeyReader) -> bytes:
        """The last accepted block pointer, checked against the chain: it names the
        canonical block at its height, and no block is accepted above it."""
        found = rawdb.read_last_accepted_hash(reader, self.schema)
        if found is None:
            found = self.source.head()
        if found is None:
            raise StoreCorrupted("the store has no last accepted block pointer")
        number = self.head_number(reader, found, "last accepted")
        if (
            number < MAX_NUMBER
            and rawdb.read_canonical_hash(reader, self.schema, number + 1) is not None
        ):
            raise StoreCorrupted(
                f"the last accepted pointer names block {found.hex()} at "
                f"{number}, but height {number + 1} is accepted too"
            )
        return found

    def number_of(self, reader: KeyReader, block_hash: bytes) -> int:
        """The number entry of a block a head pointer names (``StoreCorrupted`` if none)."""
        number = self.block_number(reader, block_hash)
        if number is None:
            raise StoreCorrupted(
                f"a head pointer names block {block_hash.hex()}, which has no number entry"
            )
        return number

    def block_number(self, reader: KeyReader, block_hash: bytes) -> int | None:
        """The height of ``block_hash``: its number entry in the store, else its height in
        the archive beneath (``None`` if neither has it: :meth:`ChainSource.number
        <vmstack.cchain.source.ChainSource.number>`)."""
        return self.source.number(reader, block_hash)

    def canonical_at(self, reader: KeyReader, number: int) -> bytes | None:
        """The canonical hash at ``number``: the store's entry, else the archive's block
        there (``None`` if neither has one)."""
        return self.source.canonical(reader, number)

    def head_number(self, reader: KeyReader, block_hash: bytes, pointer: str) -> int:
        """The height of the block a head pointer names, checked: it has a number entry and
        is the canonical block there (else the pointer or those entries are damaged)."""
        number = self.number_of(reader, block_hash)
        if self.canonical_at(reader, number) != block_hash:
            raise StoreCorrupted(
                f"the {pointer} pointer names block {block_hash.hex()}, "
                f"which is not the canonical block at {number}"
            )
        return number

    def settled_number(self, reader: KeyReader) -> int:
        """The height of the last settled block; without a last-settled pointer (a coreth
        database), the last accepted block's."""
        settled = rawdb.read_last_settled_hash(reader, self.schema)
        if settled is None:
            return self.number_of(reader, self.last_accepted(reader))
        return self.head_number(reader, settled, "last settled")

    def integrity_start(self, reader: ReadSnapshot) -> int | None:
        """The first height written with integrity entries (``None`` for a store that has
        none, such as a coreth database). The marker carries its own checksum; a store
        with integrity entries but no marker is damaged (``StoreCorrupted``), as checks
        must never be turned off by losing one key."""
        start = rawdb.read_integrity_start(reader, self.schema)
        if start is None and rawdb.has_integrity_entries(reader, self.schema):
            raise StoreCorrupted("the store has integrity entries but no integrity-start marker")
        return start

    # --- memos -------------------------------------------------------------------------------

    def settle_cache(self, number: int) -> None:
        """Let the canonical hash cache hold heights up to ``number`` (settled)."""
        with self._cache_lock:
            if number > self.cache.settled_height:
                self.cache.settle(number)

    def remember_canonical(self, number: int, block_hash: bytes | memoryview) -> None:
        """Cache the canonical hash of a settled height; a different hash than the one
        cached is ``StoreCorrupted``."""
        try:
            self.cache.remember(number, block_hash)
        except ValueError as error:
            raise StoreCorrupted(
                f"the canonical entry at settled height {number} changed: {error}"
            ) from None

    def remember_header(self, block_id: bytes, header: AnyHeader) -> None:
        """Remember a header by its hash (an immutable fact), so building and verifying the
        next block need not read and decode its parent's."""
        with self._memo_lock:
            memo = self._headers
            memo[block_id] = header
            if len(memo) > _HEADER_MEMO_SIZE:
                memo.popitem(last=False)

    # --- blocks ------------------------------------------------------------------------------

    def stored_header(self, reader: KeyReader, number: int, block_hash: bytes) -> AnyHeader:
        """The decoded header of a stored block, checked against its hash."""
        known = self._headers.get(block_hash)
        if known is not None and known.number == number:
            return known
        data = self.source.header(reader, number, block_hash)
        if data is None:
            raise StoreCorrupted(f"block {block_hash.hex()} at {number} has no header")
        if keccak256(data) != block_hash:
            raise StoreCorrupted(
                f"the stored header of block {block_hash.hex()} at {number} "
                "does not hash to its key"
            )
        try:
            return self.flavour.decode_header(data)
        except InvalidBlock as error:
            raise StoreCorrupted(
                f"the stored header of block {block_hash.hex()} is malformed: {error.reason}"
            ) from None

    def accepted_number(self, reader: KeyReader, block_id: bytes) -> int | None:
        """The height of ``block_id`` if it is an accepted block, else ``None``."""
        number = self.block_number(reader, block_id)
        if number is None:
            return None
        return number if self.canonical_at(reader, number) == block_id else None

    def block_parts(
        self, reader: KeyReader, number: int, block_id: bytes
    ) -> tuple[bytes | memoryview, bytes | memoryview] | None:
        """The header and body RLP of the block ``block_id`` at ``number``, from the store,
        else from the archive when it is the archive's block there; ``None`` if neither."""
        return self.source.parts(reader, number, block_id)

    def canonical_hash(self, reader: KeyReader, height: int) -> bytes:
        """The ID of the accepted block at ``height``, from the store: its canonical entry,
        which must name a block the store has there (number entry, header and body)."""
        found = rawdb.read_canonical_hash(reader, self.schema, height)
        archived = self.source.archived_hash(height, found)
        if archived is not None:
            return archived
        schema = self.schema
        if (
            found is None
            or rawdb.read_header_number(reader, schema, found) != height
            or not reader.has(schema.header_key(height, found))
            or not reader.has(schema.body_key(height, found))
        ):
            raise self.missing_or_corrupt(reader, height, None, found)
        return found

    def restore(self, reader: ReadSnapshot, block_id: bytes) -> RestoredBlock:
        """The accepted block ``block_id`` read, checked and restored the way a faithful VM
        restores it (the slow path): canonical check, header and body, receipts once
        settled, integrity entry, then decoded, senders recovered, receipts derived and the
        block re-encoded."""
        schema = self.schema
        number = self.block_number(reader, block_id)
        if number is None:
            raise BlockNotFound(f"block {block_id.hex()} is not known")
        canonical = rawdb.read_canonical_hash(reader, schema, number)
        archived = self.source.archived_hash(number, canonical)
        if archived is not None:
            return self._restore_archived(number, block_id, archived)
        header_rlp = rawdb.read_header_rlp(reader, schema, number, block_id)
        body_rlp = rawdb.read_body_rlp(reader, schema, number, block_id)
        if canonical != block_id or header_rlp is None or body_rlp is None:
            raise self.missing_or_corrupt(reader, number, block_id, canonical)
        receipts_rlp: bytes | None = None
        if number <= self.settled_number(reader):
            stored = rawdb.read_receipts_rlp(reader, schema, number, block_id)
            if stored is None:
                # A store never drops part of an accepted block: damage, not absence.
                raise StoreCorrupted(
                    f"settled block {block_id.hex()} at {number} is missing its receipts"
                )
            receipts_rlp = bytes(stored)
        integrity = self._integrity(reader, number, block_id)
        return self._decode(
            block_id, number, bytes(header_rlp), bytes(body_rlp), receipts_rlp, integrity
        )

    def stored_receipts(self, reader: ReadSnapshot, number: int, block_id: bytes) -> bytes:
        """The receipts (storage form) of the settled stored block ``block_id`` at
        ``number``, checked against its integrity entry where it has one;
        ``StoreCorrupted`` if they are missing or fail the check."""
        stored = rawdb.read_receipts_rlp(reader, self.schema, number, block_id)
        if stored is None:
            raise StoreCorrupted(
                f"settled block {block_id.hex()} at {number} is missing its receipts"
            )
        receipts_rlp = bytes(stored)
        integrity = self._integrity(reader, number, block_id)
        if integrity is not None and (
            integrity.receipts is None
            or checksum(self.schema.integrity_key(number, block_id), receipts_rlp)
            != integrity.receipts
        ):
            raise StoreCorrupted(
                f"the stored receipts of block {block_id.hex()} at {number} fail their checksum"
            )
        return receipts_rlp

    def _restore_archived(self, number: int, block_id: bytes, archived: bytes) -> RestoredBlock:
        """The slow path over an archived block (``archived`` the archive's hash at
        ``number``): the same decode, sender recovery, receipts (from the archive,
        consensus form) and re-encode as for a stored block."""
        history = self.source.archive
        if history is None or archived != block_id:
            raise BlockNotFound(f"block {block_id.hex()} is not the archived block at {number}")
        header_rlp, body_rlp = history.parts(number)
        return self._decode(
            block_id,
            number,
            header_rlp,
            body_rlp,
            None,
            None,
            archived_receipts=history.receipts(number),
        )

    def _integrity(self, reader: ReadSnapshot, number: int, block_id: bytes) -> Integrity | None:
        """The block's integrity entry; ``None`` for a block from before this VM wrote
        them; ``StoreCorrupted`` if one should exist and does not."""
        start = self.integrity_start(reader)
        if start is None or number < start:
            return None
        found = rawdb.read_integrity(reader, self.schema, number, block_id)
        if found is None:
            raise StoreCorrupted(f"block {block_id.hex()} at {number} has no integrity entry")
        return found

    def _decode(
        self,
        block_id: bytes,
        number: int,
        header_rlp: bytes,
        body_rlp: bytes,
        receipts_rlp: bytes | None,
        integrity: Integrity | None,
        *,
        archived_receipts: tuple[Receipt, ...] | None = None,
    ) -> RestoredBlock:
        """Decode, check and restore a stored block: the slow path's work. The receipts
        are ``receipts_rlp`` (storage form) or, for an archived block,
        ``archived_receipts`` (decoded from the archive's consensus form)."""
        where = f"block {block_id.hex()} at {number}"
        if keccak256(header_rlp) != block_id:
            raise StoreCorrupted(f"the stored header of {where} does not hash to its key")
        try:
            stitched = block_bytes(header_rlp, body_rlp)
        except InvalidBlock as error:
            raise StoreCorrupted(f"the stored {where} is malformed: {error.reason}") from None
        if integrity is not None:
            integrity_key = self.schema.integrity_key(number, block_id)
            check_block_checksum(integrity_key, number, block_id, stitched, integrity.block)
            if receipts_rlp is not None and (
                integrity.receipts is None
                or checksum(integrity_key, receipts_rlp) != integrity.receipts
            ):
                raise StoreCorrupted(f"the stored receipts of {where} fail their checksum")
        try:
            block = self.flavour.block_from_parts(header_rlp, body_rlp, block_id)
            if block.number != number:
                raise InvalidBlock(f"its header says number {block.number}")
            senders = tuple(tx.sender() for tx in block.transactions)
            receipts = None
            if receipts_rlp is not None:
                archived_receipts = decode_receipts(receipts_rlp)
            if archived_receipts is not None:
                receipts = derive_receipts(archived_receipts, block, senders)
        except InvalidBlock as error:
            raise StoreCorrupted(f"the stored {where} is malformed: {error.reason}") from None
        return RestoredBlock(
            block, self.flavour.encode_block(block), len(header_rlp), senders, receipts
        )

    def settlement(
        self, snap: ReadSnapshot, number: int, integrity_start: int | None
    ) -> Settlement:
        """The receipts of the accepted block at ``number``, from its stored body."""
        schema = self.schema
        block_hash = rawdb.read_canonical_hash(snap, schema, number)
        header_rlp = (
            None if block_hash is None else rawdb.read_header_rlp(snap, schema, number, block_hash)
        )
        body_rlp = (
            None if block_hash is None else rawdb.read_body_rlp(snap, schema, number, block_hash)
        )
        if block_hash is None or header_rlp is None or body_rlp is None:
            raise self.missing_or_corrupt(snap, number, None, block_hash)
        block_checksum: int | None = None
        if integrity_start is not None and number >= integrity_start:
            integrity = rawdb.read_integrity(snap, schema, number, block_hash)
            try:
                stitched = block_bytes(header_rlp, body_rlp)
            except InvalidBlock as error:
                raise StoreCorrupted(
                    f"accepted block {block_hash.hex()} is malformed: {error.reason}"
                ) from None
            block_checksum = None if integrity is None else integrity.block
            check_block_checksum(
                schema.integrity_key(number, block_hash),
                number,
                block_hash,
                stitched,
                block_checksum,
            )
        elif rawdb.read_receipts_rlp(snap, schema, number, block_hash) is not None:
            return Settlement(number, block_hash, None, None)
        try:
            transactions = self.flavour.decode_body(body_rlp).transactions
        except InvalidBlock as error:
            raise StoreCorrupted(
                f"accepted block {block_hash.hex()} has a malformed body: {error.reason}"
            ) from None
        return Settlement(
            number, block_hash, encode_receipts(execute_transactions(transactions)), block_checksum
        )


@attrs.frozen(slots=True)
class Settlement:
    """Receipts to write for a block that becomes settled, and its integrity entry's block
    checksum (``None`` for a block from before this VM wrote integrity entries)."""

    number: int
    block_hash: bytes
    receipts_rlp: bytes | None
    block_checksum: int | None

    def write(self, batch: KeyWriter, schema: rawdb.Schema) -> None:
        if self.receipts_rlp is None:
            return
        rawdb.write_receipts(batch, schema, self.number, self.block_hash, self.receipts_rlp)
        if self.block_checksum is not None:
            integrity_key = schema.integrity_key(self.number, self.block_hash)
            rawdb.write_integrity(
                batch,
                schema,
                self.number,
                self.block_hash,
                self.block_checksum,
                checksum(integrity_key, self.receipts_rlp),
            )


class AcceptedParts(Protocol):
    """What :func:`write_accepted` reads of a block: a ``CChainBlock``, or the parts of a
    block taken from an archive."""

    @property
    def height(self) -> int: ...

    @property
    def id(self) -> bytes: ...

    def header_rlp(self) -> bytes: ...

    def body_rlp(self) -> bytes: ...

    def __bytes__(self) -> bytes: ...


def write_accepted(
    batch: KeyWriter,
    schema: rawdb.Schema,
    block: AcceptedParts,
    receipts_rlp: bytes | None,
    integrity_start: int | None,
    settling: Sequence[Settlement],
) -> None:
    """Write an accepted ``block`` into ``batch`` (one atomic accept): header, body, number
    and canonical entries, the head pointers, its integrity entry, its receipts if it is
    settled at once (``receipts_rlp``), the integrity-start marker if the store has none
    yet, the receipts of the blocks ``settling`` with it, and the last-settled pointer."""
    number, block_id = block.height, block.id
    rawdb.write_block(batch, schema, number, block_id, block.header_rlp(), block.body_rlp())
    rawdb.write_canonical_hash(batch, schema, number, block_id)
    rawdb.write_last_accepted_hash(batch, schema, block_id)
    rawdb.write_head_header_hash(batch, schema, block_id)
    rawdb.write_head_fast_block_hash(batch, schema, block_id)
    integrity_key = schema.integrity_key(number, block_id)
    rawdb.write_integrity(
        batch,
        schema,
        number,
        block_id,
        checksum(integrity_key, bytes(block)),
        None if receipts_rlp is None else checksum(integrity_key, receipts_rlp),
    )
    if receipts_rlp is not None:
        rawdb.write_receipts(batch, schema, number, block_id, receipts_rlp)
    if integrity_start is None:
        rawdb.write_integrity_start(batch, schema, number)
    for settled in settling:
        settled.write(batch, schema)
    if receipts_rlp is not None:
        rawdb.write_last_settled_hash(batch, schema, block_id)
    elif settling:
        rawdb.write_last_settled_hash(batch, schema, settling[-1].block_hash)
