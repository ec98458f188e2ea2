"""Commitments a header makes to its body: the roots of ordered hexary tries.

As geth's ``DeriveSha``: item ``i`` is stored in an Ethereum hexary Merkle-Patricia trie
under the key ``rlp(i)``, and the root is the commitment. Transactions are stored in their
canonical bytes (typed ones as ``type || payload``), withdrawals as their RLP, receipts in their
consensus form. :func:`check_body` compares a block's body with what its header commits to.

:func:`derive_root` builds the trie's nodes bottom-up from the sorted keys in one pass and
hashes only what the root depends on, instead of inserting key by key into a general trie
(the ``trie`` package's ``HexaryTrie``, which gives the same roots about ten times slower;
the tests compare the two).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import rlp

from vmstack.cchain.crypto import keccak256
from vmstack.cchain.rlpbytes import list_prefix
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
    """The root of the trie mapping ``rlp(i)`` to the ``i``-th value (``EMPTY_ROOT`` if none).

    An empty value is no entry, as in a trie where writing an empty value deletes the key.
    """
    items = [(_nibbles(_string(index.to_bytes((index.bit_length() + 7) // 8, "big"))),
              bytes(value))
             for index, value in enumerate(values) if value]
    if not items:
        return EMPTY_ROOT
    items.sort()
    return keccak256(_node(items, 0))


# Nodes are built as their RLP encodings: a node's items are byte strings (encoded with
# _string) or child references, and a parent's payload is the concatenation of its items.

_NibbleItems = list[tuple[bytes, bytes]]
_EMPTY_STRING = b"\x80"


def _string(data: bytes) -> bytes:
    """The RLP encoding of the byte string ``data``."""
    length = len(data)
    if length == 1 and data[0] < 0x80:
        return data
    if length < 56:
        return bytes((0x80 + length,)) + data
    width = (length.bit_length() + 7) // 8
    return bytes((0xB7 + width,)) + length.to_bytes(width, "big") + data


def _list(payload: bytes) -> bytes:
    """The RLP encoding of a list whose items' encodings, joined, are ``payload``."""
    return list_prefix(len(payload)) + payload


def _nibbles(key: bytes) -> bytes:
    """``key`` as a string of half-bytes (each 0..15), high half first."""
    out = bytearray(2 * len(key))
    out[0::2] = bytes(b >> 4 for b in key)
    out[1::2] = bytes(b & 15 for b in key)
    return bytes(out)


def _hex_prefix(nibbles: bytes, leaf: bool) -> bytes:
    """The compact (hex-prefix) encoding of a node's key path, RLP-encoded."""
    flag = 2 if leaf else 0
    if len(nibbles) % 2:
        head = bytes((((flag + 1) << 4) | nibbles[0],))
        nibbles = nibbles[1:]
    else:
        head = bytes((flag << 4,))
    return _string(head + bytes((nibbles[i] << 4) | nibbles[i + 1]
                                for i in range(0, len(nibbles), 2)))


def _reference(encoded: bytes) -> bytes:
    """How a parent refers to a child node: inline if its encoding is under 32 bytes, else by
    the hash of its encoding."""
    return encoded if len(encoded) < 32 else _string(keccak256(encoded))


def _node(items: _NibbleItems, depth: int) -> bytes:
    """The encoded node for ``items`` (sorted, sharing their first ``depth`` nibbles)."""
    if len(items) == 1:
        key, value = items[0]
        return _list(_hex_prefix(key[depth:], True) + _string(value))
    first, last = items[0][0], items[-1][0]
    common = depth
    limit = min(len(first), len(last))
    while common < limit and first[common] == last[common]:
        common += 1
    if common > depth:
        return _list(_hex_prefix(first[depth:common], False)
                     + _reference(_branch(items, common)))
    return _branch(items, depth)


def _branch(items: _NibbleItems, depth: int) -> bytes:
    """The encoded branch node at ``depth``: 16 children by the next nibble, and the value
    of a key that ends here."""
    slots = [_EMPTY_STRING] * 17
    start = 0
    if len(items[0][0]) == depth:
        slots[16] = _string(items[0][1])
        start = 1
    while start < len(items):
        nibble = items[start][0][depth]
        end = start + 1
        while end < len(items) and items[end][0][depth] == nibble:
            end += 1
        slots[nibble] = _reference(_node(items[start:end], depth + 1))
        start = end
    return _list(b"".join(slots))


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
