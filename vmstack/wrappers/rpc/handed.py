"""The blocks a server has handed out and not yet seen decided: :class:`HandedOut`.

Kept under the SHA-256 digest of the bytes the caller holds (those sent to parse a block,
else its own), so a decision that names those bytes reaches the very block object the
served VM returned for them, and a block with the same ID and another body (a peer's)
never takes its place. Per ID, the store also knows the digest last handed out and the one
last verified, for a decision that names only the ID (avalanchego's client sends no
digest): it reaches the verified block, as ``vm_server.go``'s verified blocks do, else the
latest. What is kept is bounded by bytes, least recently handed out first to go.
"""

from __future__ import annotations

from collections import OrderedDict

from vmstack.interfaces import Block
from vmstack.wrappers.rpc.protocol import block_digest

__all__ = ["HANDED_OUT_BYTES", "HANDED_OUT_OVERHEAD", "HandedOut"]

#: The bytes of handed-out, undecided blocks a server keeps for their decisions (each
#: costs its length and :data:`HANDED_OUT_OVERHEAD`): 32 MiB, 16 messages' worth.
HANDED_OUT_BYTES = 32 * 1024 * 1024
#: What a kept block costs beyond its bytes, in the count against :data:`HANDED_OUT_BYTES`.
HANDED_OUT_OVERHEAD = 2048


class HandedOut:
    """Handed-out blocks by digest, at most ``limit`` bytes of them (as counted: each its
    length and :data:`HANDED_OUT_OVERHEAD`). Not locked: its server's lock guards it."""

    def __init__(self, limit: int = HANDED_OUT_BYTES) -> None:
        self._kept: OrderedDict[bytes, tuple[Block, int]] = OrderedDict()
        self._latest_by_id: dict[bytes, bytes] = {}
        self._verified_by_id: dict[bytes, bytes] = {}
        self._bytes = 0
        self._limit = limit

    @property
    def counted(self) -> tuple[int, int]:
        """``(blocks, bytes)`` kept, the bytes as counted against the limit."""
        return len(self._kept), self._bytes

    def keep(self, block: Block, data: bytes | None = None) -> Block:
        """Keep ``block`` under the digest of ``data`` (default: its own bytes), as the
        latest handed out under its ID; returns it."""
        data = bytes(block) if data is None else data
        digest = block_digest(data)
        cost = len(data) + HANDED_OUT_OVERHEAD
        kept = self._kept.pop(digest, None)
        if kept is not None:
            self._bytes -= kept[1]
        self._kept[digest] = (block, cost)
        self._latest_by_id[block.id] = digest
        self._bytes += cost
        while self._bytes > self._limit:
            gone, (gone_block, gone_cost) = self._kept.popitem(last=False)
            self._bytes -= gone_cost
            self._unindex(gone_block.id, gone)
        return block

    def get(self, digest: bytes) -> Block | None:
        """The block kept under ``digest``, ``None`` if none is."""
        kept = self._kept.get(digest)
        return None if kept is None else kept[0]

    def verified(self, block: Block, digest: bytes) -> None:
        """Note that the block kept under ``digest`` verified: a decision naming only its
        ID reaches it (nothing, if no block is kept under ``digest``)."""
        if digest in self._kept:
            self._verified_by_id[block.id] = digest

    def digest_for(self, block_id: bytes) -> bytes | None:
        """The digest a decision naming only ``block_id`` reaches: the block last verified
        under it, else the last handed out under it; ``None`` if neither is kept."""
        return self._verified_by_id.get(block_id, self._latest_by_id.get(block_id))

    def forget(self, digest: bytes) -> None:
        """Stop keeping the block under ``digest`` (decided)."""
        kept = self._kept.pop(digest, None)
        if kept is not None:
            self._bytes -= kept[1]
            self._unindex(kept[0].id, digest)

    def _unindex(self, block_id: bytes, digest: bytes) -> None:
        """Drop the ID's entries that name ``digest`` (a block no longer kept)."""
        for index in (self._latest_by_id, self._verified_by_id):
            if index.get(block_id) == digest:
                del index[block_id]
