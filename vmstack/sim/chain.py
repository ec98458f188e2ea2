"""What both simulations read of a stored C-chain: the transactions it holds, counted
from the framing of the stored bodies (the two-node run's report and a network node's
``transactions`` call)."""

from __future__ import annotations

from vmstack.cchain import rawdb
from vmstack.errors import InvalidBlock, StoreCorrupted
from vmstack.rlpreader import list_items
from vmstack.store import KeyValueStore

__all__ = ["chain_transactions"]


def chain_transactions(store: KeyValueStore, blocks: int) -> int:
    """The transactions in blocks 1 to ``blocks`` of the C-chain in ``store``, counted from
    the framing of their stored bodies (``StoreCorrupted`` if one is missing)."""
    schema = rawdb.Schema(b"")
    count = 0
    for number in range(1, blocks + 1):
        block_hash = rawdb.read_canonical_hash(store, schema, number)
        body = (
            None if block_hash is None else rawdb.read_body_rlp(store, schema, number, block_hash)
        )
        if body is None:
            raise StoreCorrupted(f"the chain has no stored body at height {number}")
        try:
            count += len(list_items(list_items(body)[0]))
        except (InvalidBlock, IndexError) as error:
            raise StoreCorrupted(
                f"the stored body at height {number} is damaged: {error}"
            ) from None
    return count
