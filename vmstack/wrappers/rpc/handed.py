"""The blocks a server has handed out and not yet seen decided: :class:`HandedOut`.

Kept under the bytes the caller holds (those sent to parse a block, else its own), so a
decision that names those bytes reaches the very block object the served VM returned for
them, and a block with the same ID and another body (a peer's) never takes its place. A
decision names the bytes by their SHA-256 digest (:func:`~vmstack.wrappers.rpc.protocol.
block_digest`), computed when a decision asks for it: of the bytes last verified and
last handed out under the decision's ID (of every block kept under it only when the
decision names neither), never of a block handed out and not decided. Per ID,
the store also knows the bytes last handed out and those last verified, for a decision
that names only the ID (avalanchego's client sends no digest): it reaches the verified
block, as ``vm_server.go``'s verified blocks do, else the latest. What is kept is bounded
by bytes, least recently handed out first to go.

A batch is recorded in one pass (:meth:`HandedOut.keep_batch`), with no object made per
block: each block has an entry in the indexes (by bytes, by ID), which hold the block and
the bytes the caller sent, and what it costs follows from its length.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from vmstack.interfaces import Block
from vmstack.wrappers.rpc.protocol import block_digest

__all__ = ["HANDED_OUT_BYTES", "HANDED_OUT_OVERHEAD", "HandedOut"]

#: The bytes of handed-out, undecided blocks a server keeps for their decisions (each
#: costs its length and :data:`HANDED_OUT_OVERHEAD`): 32 MiB, 16 messages' worth.
HANDED_OUT_BYTES = 32 * 1024 * 1024
#: What a kept block costs beyond its bytes, in the count against :data:`HANDED_OUT_BYTES`.
HANDED_OUT_OVERHEAD = 2048


class HandedOut:
    """Handed-out blocks by the bytes they were handed out for, at most ``limit`` bytes of
    them (as counted: each its length and :data:`HANDED_OUT_OVERHEAD`). Not locked: its
    server's lock guards it."""

    def __init__(self, limit: int = HANDED_OUT_BYTES) -> None:
        # Least recently handed out first; a block costs len(data) + HANDED_OUT_OVERHEAD.
        self._kept: OrderedDict[bytes, Block] = OrderedDict()
        self._latest_by_id: dict[bytes, bytes] = {}
        self._verified_by_id: dict[bytes, bytes] = {}
        # The digests computed so far, both ways: each kept block is hashed once at most.
        self._digest_of: dict[bytes, bytes] = {}
        self._by_digest: dict[bytes, bytes] = {}
        self._bytes = 0
        self._limit = limit

    @property
    def counted(self) -> tuple[int, int]:
        """``(blocks, bytes)`` kept, the bytes as counted against the limit."""
        return len(self._kept), self._bytes

    def keep(self, block: Block, data: bytes | None = None) -> Block:
        """Keep ``block`` under ``data`` (default: its own bytes), as the latest handed out
        under its ID; returns it."""
        self.keep_batch((block,), (bytes(block) if data is None else bytes(data),))
        return block

    def keep_batch(
        self,
        blocks: Sequence[Block],
        datas: Sequence[bytes],
        ids: Sequence[bytes] | None = None,
        owns: Sequence[bytes] | None = None,
    ) -> None:
        """Keep ``blocks[i]`` under ``datas[i]`` (the bytes the caller sent for it), each
        as the latest handed out under its ID, in order. ``ids[i]`` and ``owns[i]`` are
        the block's ID and its own bytes when the caller has read them already (else they
        are read here); a block whose own bytes equal the caller's is kept under its own,
        so the two are held once, not beside a copy."""
        count = len(blocks)
        lengths = {"byte strings": len(datas)}
        for what, given in (("IDs", ids), ("own bytes", owns)):
            if given is not None:
                lengths[what] = len(given)
        if set(lengths.values()) != {count}:
            given_text = ", ".join(f"{length} {what}" for what, length in lengths.items())
            raise ValueError(f"{count} blocks for {given_text}")
        kept = self._kept
        latest = self._latest_by_id
        pop = kept.pop
        block_ids = [block.id for block in blocks] if ids is None else ids
        own_bytes = [bytes(block) for block in blocks] if owns is None else owns
        replaced = 0
        for block, data, block_id, own in zip(blocks, datas, block_ids, own_bytes, strict=True):
            if own is not data and own == data:
                data = own
            if pop(data, None) is not None:
                replaced += len(data) + HANDED_OUT_OVERHEAD
                if self._digest_of:  # none computed, none to drop (the usual case)
                    self._drop_digest(data)
            kept[data] = block
            latest[block_id] = data
        self._bytes += sum(map(len, datas)) + count * HANDED_OUT_OVERHEAD - replaced
        while self._bytes > self._limit:
            gone, gone_block = kept.popitem(last=False)
            self._bytes -= len(gone) + HANDED_OUT_OVERHEAD
            self._unindex(gone_block.id, gone)
            self._drop_digest(gone)

    def get(self, data: bytes) -> Block | None:
        """The block kept under the bytes ``data``, ``None`` if none is."""
        return self._kept.get(data)

    def verified(self, block: Block, data: bytes) -> None:
        """Note that the block kept under ``data`` verified: a decision naming only its ID
        reaches it (nothing, if no block is kept under ``data``)."""
        if data in self._kept:
            self._verified_by_id[block.id] = data

    def data_for(self, block_id: bytes) -> bytes | None:
        """The bytes a decision naming only ``block_id`` reaches: those last verified under
        it, else those last handed out under it; ``None`` if neither is kept."""
        return self._verified_by_id.get(block_id, self._latest_by_id.get(block_id))

    def find(self, block_id: bytes, digest: bytes) -> tuple[Block, bytes] | None:
        """The block kept under ``block_id`` whose bytes have the SHA-256 ``digest``, with
        those bytes; ``None`` if none is. The verified and the latest bytes under the ID
        are hashed first; only a decision for neither has every kept block hashed (each
        block once in its stay, so no caller can have the same bytes hashed again)."""
        for data in (self._verified_by_id.get(block_id), self._latest_by_id.get(block_id)):
            if data is not None and self._digest(data) == digest:
                return self._kept[data], data
        if digest not in self._by_digest and len(self._digest_of) < len(self._kept):
            for data in self._kept:
                self._digest(data)
        data = self._by_digest.get(digest)
        block = None if data is None else self._kept.get(data)
        if data is None or block is None or block.id != block_id:
            return None
        return block, data

    def _digest(self, data: bytes) -> bytes:
        """The digest of the kept bytes ``data``, computed once."""
        digest = self._digest_of.get(data)
        if digest is None:
            digest = self._digest_of[data] = block_digest(data)
            self._by_digest[digest] = data
        return digest

    def _drop_digest(self, data: bytes) -> None:
        digest = self._digest_of.pop(data, None)
        if digest is not None:
            self._by_digest.pop(digest, None)

    def forget(self, data: bytes) -> None:
        """Stop keeping the block under ``data`` (decided)."""
        block = self._kept.pop(data, None)
        if block is not None:
            self._bytes -= len(data) + HANDED_OUT_OVERHEAD
            self._unindex(block.id, data)
            self._drop_digest(data)

    def _unindex(self, block_id: bytes, data: bytes) -> None:
        """Drop the ID's entries that name ``data`` (a block no longer kept)."""
        for index in (self._latest_by_id, self._verified_by_id):
            if index.get(block_id) == data:
                del index[block_id]
