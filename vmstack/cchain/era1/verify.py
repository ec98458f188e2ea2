"""The C-chain's check of an era1 archive: :func:`check_archived_block`, :func:`verify_archive`.

The archive checks what its files state (:meth:`EraArchive.verify
<vmstack.store.history.EraArchive.verify>`: accumulators, header numbers, total difficulties,
parent links, every CRC and RLP frame); what a block's header commits to is checked here,
with the functions every C-chain block's commitments go through
(:mod:`vmstack.cchain.tries`): each body against the header's transactions root, uncle hash
and withdrawals root (:func:`~vmstack.cchain.tries.encoded_body_commitments`), each receipts
list against the gas used, the receipts root and the logs bloom
(:func:`~vmstack.cchain.tries.encoded_receipt_commitments`), all from the encodings as the
file holds them, nothing re-encoded.
"""

from __future__ import annotations

from collections.abc import Callable

from vmstack.cchain.codec import ETHEREUM
from vmstack.cchain.rules import check_receipt_commitments
from vmstack.cchain.tries import (
    check_body_commitments,
    encoded_body_commitments,
    encoded_receipt_commitments,
)
from vmstack.errors import InvalidBlock
from vmstack.rlpreader import Buffer, iter_list_items, read_prefix
from vmstack.store.history import EraArchive

__all__ = ["check_archived_block", "verify_archive"]


def _trie_encodings(list_rlp: Buffer) -> list[bytes]:
    """A list's items as a trie stores them: a list item as it stands, a string item (a typed
    transaction or receipt) as its payload."""
    encodings = []
    for item in iter_list_items(list_rlp):
        is_list, payload, length = read_prefix(item)
        encodings.append(bytes(item) if is_list else bytes(item[payload : payload + length]))
    return encodings


def check_archived_block(header_rlp: bytes, body_rlp: bytes, receipts_rlp: bytes) -> None:
    """Raise ``InvalidBlock`` saying what differs unless the Ethereum header ``header_rlp``
    commits to the body ``body_rlp`` (``[transactions, uncles, withdrawals?]``) and to the
    receipts ``receipts_rlp`` (the list of their consensus forms, as an era1 file holds
    them)."""
    header = ETHEREUM.decode_header(header_rlp)
    fields = list(iter_list_items(body_rlp))
    if len(fields) not in (2, 3):
        raise InvalidBlock(f"body has {len(fields)} fields, expected 2 or 3")
    check_body_commitments(
        header,
        encoded_body_commitments(
            _trie_encodings(fields[0]),
            bytes(fields[1]),
            None if len(fields) == 2 else _trie_encodings(fields[2]),
            None,
        ),
    )
    check_receipt_commitments(header, encoded_receipt_commitments(_trie_encodings(receipts_rlp)))


def verify_archive(archive: EraArchive, *, on_block: Callable[[int], None] | None = None) -> int:
    """Every record of every file of ``archive`` read and checked, as go-ethereum's ``era
    verify`` does: what the archive checks (:meth:`EraArchive.verify
    <vmstack.store.history.EraArchive.verify>`) and each block by
    :func:`check_archived_block`. ``on_block(number)`` is called after each block. Returns
    the bytes of the files read; :class:`~vmstack.errors.StoreCorrupted` naming the file
    and block at the first failure."""
    return archive.verify(on_block=on_block, check_block=check_archived_block)
