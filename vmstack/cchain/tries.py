"""Commitments a header makes to its body: the roots of ordered hexary tries.

As geth's ``DeriveSha``: item ``i`` is stored in an Ethereum hexary Merkle-Patricia trie (the
``trie`` package) under the key ``rlp(i)``, and the root is the commitment. Transactions are
stored in their canonical bytes (typed ones as ``type || payload``), withdrawals as their RLP,
receipts in their consensus form. :func:`check_body` compares a block's body with what its
header commits to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import rlp
from trie.hexary import HexaryTrie

from vmstack.cchain.crypto import keccak256
from vmstack.cchain.types import EMPTY_ROOT, Transaction, Withdrawal
from vmstack.errors import InvalidBlock

if TYPE_CHECKING:
    from vmstack.cchain.types import Block, Receipt

__all__ = [
    "EMPTY_ROOT",
    "check_body",
    "derive_root",
    "receipts_root",
    "transactions_root",
    "withdrawals_root",
]


def derive_root(values: Iterable[bytes]) -> bytes:
    """The root of the trie mapping ``rlp(i)`` to the ``i``-th value (``EMPTY_ROOT`` if none)."""
    trie = HexaryTrie(db={})
    for index, value in enumerate(values):
        trie[rlp.encode(index)] = value
    root: bytes = trie.root_hash
    return root


def transactions_root(transactions: Sequence[Transaction]) -> bytes:
    """The header's ``tx_root`` for these transactions."""
    return derive_root(tx.encode() for tx in transactions)


def withdrawals_root(withdrawals: Sequence[Withdrawal]) -> bytes:
    """The header's ``withdrawals_hash`` for these withdrawals."""
    return derive_root(w.encode() for w in withdrawals)


def receipts_root(receipts: Sequence[Receipt]) -> bytes:
    """The header's ``receipt_root`` for these receipts (consensus form, typed with the
    type byte; a receipt without ``tx_type`` set counts as legacy)."""
    return derive_root(r.encode() for r in receipts)


def check_body(block: Block) -> None:
    """Raise ``InvalidBlock`` unless the header commits to the block's body.

    Checks the transactions root, the uncle hash and, where the header has one, the
    withdrawals root (a header with a withdrawals hash needs a body with withdrawals and
    the other way round). Flavour-specific commitments such as Avalanche's ``ext_data_hash``
    are the caller's rule.
    """
    header = block.header
    if transactions_root(block.transactions) != header.tx_root:
        raise InvalidBlock(f"block {block.number}: transactions root does not match the header")
    uncle_hash = keccak256(rlp.encode([u.to_items() for u in block.uncles]))
    if uncle_hash != header.uncle_hash:
        raise InvalidBlock(f"block {block.number}: uncle hash does not match the header")
    expected = getattr(header, "withdrawals_hash", None)
    withdrawals = block.withdrawals
    if (expected is None) != (withdrawals is None):
        raise InvalidBlock(f"block {block.number}: header and body disagree on having withdrawals")
    if withdrawals is not None and withdrawals_root(withdrawals) != expected:
        raise InvalidBlock(f"block {block.number}: withdrawals root does not match the header")
