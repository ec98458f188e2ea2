"""The fast path of :class:`~vmstack.cchain.vm.CChainVM`: :class:`FastAncestorWalk`, the
per-block fetch behind ``CChainVM.get_ancestors``.

It reads within ONE store snapshot, per block: the header and body RLP (zero-copy views on
LMDB), the block bytes stitched by :func:`~vmstack.cchain.block_bytes`, the parent hash read
in place from the header bytes, and the canonical check, through the
:class:`~vmstack.cchain.cache.CanonicalHashCache` for settled heights (immutable) and from
the store for the others (a reorg can still change those, so they are never cached). What
it reads is judged as :mod:`vmstack.cchain.chain` judges every read
(:meth:`~vmstack.cchain.chain.ChainReader.missing_or_corrupt`,
:func:`~vmstack.cchain.chain.check_block_checksum`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from vmstack.cchain.integrity import integrity_block_checksum
from vmstack.cchain.rlpbytes import block_bytes, stitched_parent_hash
from vmstack.errors import BlockNotFound, InvalidBlock, StoreCorrupted
from vmstack.store.base import ReadSnapshot

if TYPE_CHECKING:
    from vmstack.cchain.block import CChainBlock

from vmstack.cchain.chain import MAX_NUMBER, ChainReader, check_block_checksum

__all__ = ["FastAncestorWalk"]


class FastAncestorWalk:
    """The fast path's per-block fetch for :func:`~vmstack.batching.walk_ancestors`, over
    one snapshot, through ``chain``'s interface. It remembers the height of the block it
    fetched last, so a parent's height is its child's minus one and needs no lookup. The
    methods it calls per block are bound once, up front: this is the hot loop of the
    batched protocol. ``processing`` gives the processing blocks by ID (served from memory).

    A height with no canonical entry in the store is read from the archive beneath it as
    the chain's :class:`~vmstack.cchain.source.ChainSource` decides (one call,
    :meth:`~vmstack.cchain.source.ChainSource.archived_block`, on that path only; above the
    archive's last height one comparison tells the store answers): the canonical check
    against the archive's hash there, the header and body bytes from the archive (checked
    by it) stitched the same way. So one answer walks from the store into the archive and
    across its files.
    """

    __slots__ = (
        "_archive_last",
        "_archived_block",
        "_canonical_key",
        "_chain",
        "_check_from",
        "_get",
        "_has",
        "_keys",
        "_lookup",
        "_next_number",
        "_processing",
        "_settled",
        "_snap",
    )

    def __init__(
        self,
        chain: ChainReader,
        snap: ReadSnapshot,
        processing: Callable[[bytes], CChainBlock | None],
    ) -> None:
        self._chain = chain
        self._snap = snap
        self._get = snap.get
        self._has = snap.has
        self._keys = chain.schema.block_data_keys
        self._canonical_key = chain.schema.canonical_hash_key
        self._processing = processing
        self._lookup = chain.cache.lookup
        self._archive_last = chain.source.archive_last
        self._archived_block = chain.source.archived_block
        self._next_number: int | None = None
        settled = chain.settled_number(snap)
        chain.settle_cache(settled)
        self._settled = settled
        start = chain.integrity_start(snap)
        self._check_from = MAX_NUMBER + 1 if start is None else start

    def fetch(self, block_id: bytes) -> tuple[bytes, bytes]:
        known = self._processing(block_id)
        if known is not None:
            self._next_number = known.height - 1
            return bytes(known), known.parent_id
        number = self._next_number
        if number is None:
            number = self._chain.block_number(self._snap, block_id)
            if number is None:
                raise BlockNotFound(f"block {block_id.hex()} is not known")
        elif number < 0:
            raise BlockNotFound("the walk is past the genesis block")
        get = self._get
        header_key, body_key, integrity_key = self._keys(number, block_id)
        canonical: bytes | memoryview | None = None
        archived: tuple[bytes, bytes, bytes] | None = None
        settled = number <= self._settled
        if settled:
            canonical = self._lookup(number)
        if canonical is None:
            try:
                canonical = get(self._canonical_key(number))
            except KeyError:
                # No canonical entry in the store: the archive's block, if it holds one.
                archived = self._archived_block(number)
                if archived is not None:
                    canonical = archived[0]
            if settled and canonical == block_id:
                self._chain.remember_canonical(number, block_id)
        elif number <= self._archive_last and not self._has(self._canonical_key(number)):
            # A cached height the store has no entry for: the archive's block is served.
            archived = self._archived_block(number)
            if archived is not None and archived[0] != canonical:
                raise self._chain.missing_or_corrupt(self._snap, number, block_id, archived[0])
        if canonical != block_id:
            raise self._chain.missing_or_corrupt(self._snap, number, block_id, canonical)
        header: bytes | memoryview
        body: bytes | memoryview
        if archived is not None:
            header, body = archived[1], archived[2]
        else:
            try:
                header = get(header_key)
                body = get(body_key)
            except KeyError:
                raise self._chain.missing_or_corrupt(
                    self._snap, number, block_id, canonical
                ) from None
        try:
            data = block_bytes(header, body)
            parent_id = stitched_parent_hash(data, header)
        except InvalidBlock as error:
            raise StoreCorrupted(
                f"the stored block {block_id.hex()} at {number} is malformed: {error.reason}"
            ) from None
        if number >= self._check_from and archived is None:
            try:
                entry = get(integrity_key)
            except KeyError:
                entry = None
            check_block_checksum(
                integrity_key,
                number,
                block_id,
                data,
                None if entry is None else integrity_block_checksum(entry),
            )
        self._next_number = number - 1
        return data, parent_id
