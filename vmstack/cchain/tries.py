"""Commitments a header makes to its body and receipts: the roots of ordered hexary tries,
the uncle hash, the ExtDataHash and the logs bloom. This module is the one place a body's
and the receipts' commitments are computed, and a body's compared with a header.

As geth's ``DeriveSha``: item ``i`` is stored in an Ethereum hexary Merkle-Patricia trie
under the key ``rlp(i)``, and the root is the commitment. Transactions are stored in their
canonical bytes (typed ones as ``type || payload``), withdrawals as their RLP, receipts in their
consensus form.

The body's commitments (transactions root, uncle hash, withdrawals root, Avalanche's
ExtDataHash) are computed by ONE function, :func:`encoded_body_commitments`, from the
encodings of the body's items (what a block received as bytes already has, the fast form);
:func:`body_commitments` gives it those of a decoded body. ONE function,
:func:`check_body_commitments`, compares them with a header, raising ``InvalidBlock`` that
names the field; :func:`with_body_commitments` writes them into a header. Sealing a block
(``Flavour.seal``), building one (``CChainVM.build_block``), :func:`check_body` and
``CChainVM.verify`` all go through these. The receipts' commitments (gas used, receipts
root, bloom) are computed by ONE function too, :func:`encoded_receipt_commitments`, from the
receipts' consensus encodings (:func:`receipt_commitments` gives it those of decoded
receipts; the era1 verifier a file's receipts as they stand), whose bloom means what
:func:`receipts_bloom` says;
:func:`with_receipt_commitments` writes them into a header and
``rules.check_receipts_commitments`` compares them with one.

:func:`derive_root` builds the trie's nodes bottom-up from the sorted keys in one pass and
hashes only what the root depends on, instead of inserting key by key into a general trie
(the ``trie`` package's ``HexaryTrie``, which gives the same roots about ten times slower;
the tests compare the two).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import attrs

from vmstack.cchain.rlpbytes import encode_item, list_prefix
from vmstack.cchain.types import (
    EMPTY_EXT_DATA_HASH,
    EMPTY_ROOT,
    ZERO_HASH,
    AnyHeader,
    AvalancheHeader,
    Transaction,
    Withdrawal,
    logs_bloom,
)
from vmstack.errors import InvalidBlock
from vmstack.keccak import keccak256
from vmstack.rlpreader import list_items, read_prefix

if TYPE_CHECKING:
    from vmstack.cchain.types import Block, Body, Receipt

__all__ = [
    "BodyCommitments",
    "ReceiptCommitments",
    "body_commitments",
    "check_body",
    "check_body_commitments",
    "derive_root",
    "encoded_body_commitments",
    "encoded_receipt_commitments",
    "ext_data_hash",
    "receipt_commitments",
    "receipts_bloom",
    "receipts_root",
    "transactions_root",
    "uncles_hash",
    "with_body_commitments",
    "with_receipt_commitments",
    "withdrawals_root",
]


def derive_root(values: Iterable[bytes]) -> bytes:
    """The root of the trie mapping ``rlp(i)`` to the ``i``-th value (``EMPTY_ROOT`` if none).

    An empty value is no entry, as in a trie where writing an empty value deletes the key.
    """
    values = values if isinstance(values, list) else list(values)
    paths = _index_paths(len(values))
    items = [
        (paths[index], value if type(value) is bytes else bytes(value))
        for index, value in enumerate(values)
        if value
    ]
    if not items:
        return EMPTY_ROOT
    items.sort()
    return keccak256(_node(items, 0))


# Nodes are built as their RLP encodings: a node's items are byte strings (encoded with
# encode_item) or child references, and a parent's payload is the concatenation of its items.
# A key path is kept as a string of hex digits, one per nibble: slicing it is slicing the
# path, hex digits sort as their nibbles do, and a path's compact (hex-prefix) encoding is
# its flag digits in front, read back as hex.

_PathItems = list[tuple[str, bytes]]
_EMPTY_STRING = b"\x80"
_NIBBLE = {digit: value for value, digit in enumerate("0123456789abcdef")}

#: The key paths of ``rlp(0)``, ``rlp(1)``, ...: grown (by replacement, never in place,
#: so concurrent readers see a complete list) when a longer trie asks.
_index_path_list: list[str] = []


def _index_paths(count: int) -> list[str]:
    """The key paths (hex digits) of ``rlp(i)`` for ``i`` in ``range(count)``, at least."""
    global _index_path_list
    paths = _index_path_list
    if len(paths) < count:
        paths = paths + [
            encode_item(index.to_bytes((index.bit_length() + 7) // 8, "big")).hex()
            for index in range(len(paths), max(count, 2 * len(paths), 256))
        ]
        _index_path_list = paths
    return paths


def _list(payload: bytes) -> bytes:
    """The RLP encoding of a list whose items' encodings, joined, are ``payload``."""
    return list_prefix(len(payload)) + payload


@functools.lru_cache(maxsize=4096)
def _hex_prefix(path: str, leaf: bool) -> bytes:
    """The compact (hex-prefix) encoding of a node's key path, RLP-encoded: a flag nibble
    (2 for a leaf, +1 for an odd length) and, for an even length, a zero nibble in front
    of the path's nibbles. Kept for the paths used lately (every key is an index's, so
    the paths are few)."""
    if len(path) % 2:
        return encode_item(bytes.fromhex(("3" if leaf else "1") + path))
    return encode_item(bytes.fromhex(("20" if leaf else "00") + path))


def _reference(encoded: bytes) -> bytes:
    """How a parent refers to a child node: inline if its encoding is under 32 bytes, else by
    the hash of its encoding."""
    return encoded if len(encoded) < 32 else b"\xa0" + keccak256(encoded)


def _node(items: _PathItems, depth: int) -> bytes:
    """The encoded node for ``items`` (sorted, sharing their first ``depth`` nibbles)."""
    if len(items) == 1:
        path, value = items[0]
        return _list(_hex_prefix(path[depth:], True) + encode_item(value))
    first, last = items[0][0], items[-1][0]
    common = depth
    limit = min(len(first), len(last))
    while common < limit and first[common] == last[common]:
        common += 1
    if common > depth:
        return _list(_hex_prefix(first[depth:common], False) + _reference(_branch(items, common)))
    return _branch(items, depth)


def _branch(items: _PathItems, depth: int) -> bytes:
    """The encoded branch node at ``depth``: 16 children by the next nibble, and the value
    of a key that ends here."""
    slots = [_EMPTY_STRING] * 17
    start = 0
    count = len(items)
    if len(items[0][0]) == depth:
        slots[16] = encode_item(items[0][1])
        start = 1
    while start < count:
        digit = items[start][0][depth]
        end = start + 1
        while end < count and items[end][0][depth] == digit:
            end += 1
        if end == start + 1:
            # One key under this nibble: its leaf, as _node makes it, without the slice.
            path, value = items[start]
            child = _list(_hex_prefix(path[depth + 1 :], True) + encode_item(value))
        else:
            child = _node(items[start:end], depth + 1)
        slots[_NIBBLE[digit]] = _reference(child)
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


def receipts_bloom(receipts: Sequence[Receipt]) -> bytes:
    """The header's ``bloom`` for these receipts: the union of the bloom each receipt
    carries in its consensus form (its ``bloom`` when set, else the bloom of its logs).

    This is the one meaning of a block's bloom: the header commits to the same per-receipt
    blooms as its receipts root does, so the two can never disagree about a receipt (geth's
    ``MergeBloom``). For a receipt whose ``bloom`` is its logs' bloom, as execution and
    :func:`~vmstack.cchain.codec.derive_receipts` make every receipt, it equals the bloom of
    all the block's logs (execution-specs' ``logs_bloom(block_logs)``). A receipt without
    logs and without a stated bloom adds nothing; one without logs whose stated bloom has
    bits adds them (so its encoding in the receipts root and the header bloom agree).
    """
    bloom = 0
    for receipt in receipts:
        stated = receipt.bloom
        if stated is not None:
            bloom |= int.from_bytes(stated, "big")
        elif receipt.logs:
            bloom |= int.from_bytes(logs_bloom(receipt.logs), "big")
    return bloom.to_bytes(256, "big")


@attrs.frozen(slots=True)
class ReceiptCommitments:
    """What a header commits to about its block's receipts: the gas they use in all, their
    root and their bloom, by the header's field names."""

    gas_used: int
    receipt_root: bytes
    bloom: bytes


def receipt_commitments(receipts: Sequence[Receipt]) -> ReceiptCommitments:
    """A header's commitments to ``receipts`` (consensus receipts in transaction order):
    :func:`encoded_receipt_commitments` over their consensus encodings. Building
    (``CChainVM.build_block``), sealing (``Flavour.seal``) and verifying
    (:func:`~vmstack.cchain.rules.check_receipts_commitments`) all use it."""
    return encoded_receipt_commitments([r.encode() for r in receipts])


def encoded_receipt_commitments(encodings: Sequence[bytes]) -> ReceiptCommitments:
    """The ONE computation of a header's commitments to a block's receipts, from their
    consensus encodings in transaction order (what the receipts trie stores:
    ``[outcome, cumulative gas, bloom, logs]``, a typed receipt after its type byte): the
    gas used is the last one's cumulative gas, the receipts root their trie's, the bloom
    the union of the blooms they carry (:func:`receipts_bloom` gives the meaning).
    :func:`receipt_commitments` passes decoded receipts' encodings, the era1 verifier
    (:func:`~vmstack.cchain.era1.check_archived_block`) a file's receipts as they stand.
    ``InvalidBlock`` naming the receipt for an encoding of another shape."""
    bloom = 0
    gas_used = 0
    for index, encoding in enumerate(encodings):
        try:
            fields = list_items(encoding if encoding[:1] >= b"\xc0" else memoryview(encoding)[1:])
        except InvalidBlock as error:
            raise InvalidBlock(f"receipt {index}: {error.reason}") from None
        if len(fields) != 4:
            raise InvalidBlock(f"receipt {index} has {len(fields)} fields, expected 4")
        is_list, offset, length = read_prefix(fields[2])
        if is_list or length != 256:
            raise InvalidBlock(f"receipt {index}: its bloom is not 256 bytes")
        bloom |= int.from_bytes(fields[2][offset : offset + length], "big")
        if index == len(encodings) - 1:
            is_list, offset, length = read_prefix(fields[1])
            if is_list:
                raise InvalidBlock(f"receipt {index}: its cumulative gas is not a string")
            gas_used = int.from_bytes(fields[1][offset : offset + length], "big")
    return ReceiptCommitments(
        gas_used=gas_used, receipt_root=derive_root(encodings), bloom=bloom.to_bytes(256, "big")
    )


def with_receipt_commitments(header: AnyHeader, commitments: ReceiptCommitments) -> AnyHeader:
    """``header`` committing to receipts with ``commitments``: their root and their bloom
    (the gas used is the header's own, set by whoever executed the block, as geth's
    ``NewBlock`` leaves it)."""
    return attrs.evolve(header, receipt_root=commitments.receipt_root, bloom=commitments.bloom)


def ext_data_hash(ext_data: bytes) -> bytes:
    """coreth's ``CalcExtDataHash``: keccak256 of the RLP string of ``ext_data``.

    Empty extData gives ``EMPTY_EXT_DATA_HASH`` = keccak256(0x80). (Headers before Apricot
    Phase 1 carry the zero hash instead; that is a rule of the chain, not of this hash.)
    """
    return keccak256(encode_item(bytes(ext_data)))


def uncles_hash(uncles: Sequence[AnyHeader]) -> bytes:
    """The header's ``uncle_hash``: keccak256 of the RLP list of the uncle headers."""
    return keccak256(encode_item([u.to_items() for u in uncles]))


@attrs.frozen(slots=True)
class BodyCommitments:
    """What a header commits to about a body, field by field as the header names them.

    ``withdrawals_hash`` is ``None`` for a body without a withdrawals list, and
    ``ext_data_hash`` for a body without extData (an Ethereum body).
    """

    tx_root: bytes
    uncle_hash: bytes
    withdrawals_hash: bytes | None
    ext_data_hash: bytes | None


def encoded_body_commitments(
    tx_encodings: Sequence[bytes],
    uncles_rlp: bytes,
    withdrawal_encodings: Sequence[bytes] | None,
    ext_data_rlp: bytes | None,
) -> BodyCommitments:
    """The commitments of a body given as encodings: the transactions' canonical encodings
    and the withdrawals' RLP (as the tries store them), the RLP of the uncles list and of the
    extData string. The one computation of a body's commitments; a block received as bytes
    passes its own slices, so nothing is re-encoded."""
    return BodyCommitments(
        tx_root=derive_root(tx_encodings),
        uncle_hash=keccak256(uncles_rlp),
        withdrawals_hash=(
            None if withdrawal_encodings is None else derive_root(withdrawal_encodings)
        ),
        ext_data_hash=None if ext_data_rlp is None else keccak256(ext_data_rlp),
    )


def body_commitments(body: Body, tx_encodings: Sequence[bytes] | None = None) -> BodyCommitments:
    """The commitments of a decoded body, through :func:`encoded_body_commitments`.
    ``tx_encodings``, when given, are the transactions' encodings already known (building a
    block reuses them) and are not computed again."""
    withdrawals = body.withdrawals
    ext_data = body.ext_data
    return encoded_body_commitments(
        [tx.encode() for tx in body.transactions] if tx_encodings is None else tx_encodings,
        encode_item([u.to_items() for u in body.uncles]),
        None if withdrawals is None else [w.encode() for w in withdrawals],
        None if ext_data is None else encode_item(bytes(ext_data)),
    )


def with_body_commitments(header: AnyHeader, commitments: BodyCommitments) -> AnyHeader:
    """``header`` committing to ``commitments``: transactions root and uncle hash, the
    withdrawals root when the body has withdrawals, the ExtDataHash for an Avalanche header
    when the body has extData."""
    changes: dict[str, bytes] = {
        "tx_root": commitments.tx_root,
        "uncle_hash": commitments.uncle_hash,
    }
    if commitments.withdrawals_hash is not None:
        changes["withdrawals_hash"] = commitments.withdrawals_hash
    if isinstance(header, AvalancheHeader) and commitments.ext_data_hash is not None:
        changes["ext_data_hash"] = commitments.ext_data_hash
    return attrs.evolve(header, **changes)  # type: ignore[arg-type]


def check_body_commitments(header: AnyHeader, commitments: BodyCommitments) -> None:
    """Raise ``InvalidBlock`` naming the field unless ``header`` commits to a body with
    ``commitments``: the transactions root, the uncle hash, then on an Avalanche header the
    ExtDataHash (before Apricot Phase 1 a header carried the zero hash over empty extData,
    which holds too), on another the withdrawals root (a header with a withdrawals hash needs
    a body with withdrawals and the other way round)."""
    if commitments.tx_root != header.tx_root:
        raise InvalidBlock("transactions root does not match the header")
    if commitments.uncle_hash != header.uncle_hash:
        raise InvalidBlock("uncle hash does not match the header")
    if isinstance(header, AvalancheHeader):
        committed = header.ext_data_hash
        pre_ap1 = committed == ZERO_HASH and commitments.ext_data_hash == EMPTY_EXT_DATA_HASH
        if commitments.ext_data_hash != committed and not pre_ap1:
            raise InvalidBlock("ExtDataHash does not match the extData")
        return
    expected = header.withdrawals_hash
    if (expected is None) != (commitments.withdrawals_hash is None):
        raise InvalidBlock("header and body disagree on having withdrawals")
    if commitments.withdrawals_hash != expected:
        raise InvalidBlock("withdrawals root does not match the header")


def check_body(block: Block) -> None:
    """Raise ``InvalidBlock`` (naming the block's number and the field) unless the header
    commits to the block's body: :func:`check_body_commitments` over
    :func:`body_commitments`."""
    try:
        check_body_commitments(block.header, body_commitments(block.body))
    except InvalidBlock as error:
        raise InvalidBlock(f"block {block.number}: {error.reason}") from None
