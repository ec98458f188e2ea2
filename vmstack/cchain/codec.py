"""The block codec, shared by two flavours: Ethereum and the Avalanche C-chain.

A flavour is a header type plus ONE declaration of its body fields, in order:

- :data:`ETHEREUM`: ``[transactions, uncles, withdrawals?]`` (withdrawals from Shanghai on);
- :data:`AVALANCHE`: ``[transactions, uncles, version, ext_data]`` (coreth's layout).

That declaration drives the body codec and the block codec alike: a body is
``[*body fields]`` and a block is ``[header, *the same body fields]``, so the identity
``block_bytes(encode_header(h), encode_body(b)) == encode_block(Block(h, b))`` holds by
construction and cannot be broken by a flavour that spells its block differently from its
body.

Bytes go through the ``rlp`` package with raw lists (no ``rlp.Serializable``); decoding is
strict and every failure is :class:`~vmstack.errors.InvalidBlock` with a message naming what
was wrong. A decoded block's hash is keccak256 of its header bytes as they stand.

Receipts: :func:`encode_receipts` / :func:`decode_receipts` read and write the storage form
geth keeps under the ``r`` key, and :func:`derive_receipts` restores what a node derives
from the block (type, bloom, transaction hash, gas used, contract address, log positions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from vmstack.cchain.rlpbytes import decode_string_list, encode_item, header_slice, list_prefix
from vmstack.cchain.tries import (
    body_commitments,
    receipt_commitments,
    with_body_commitments,
    with_receipt_commitments,
)
from vmstack.cchain.types import (
    AccessListTx,
    AnyHeader,
    AvalancheHeader,
    BlobTx,
    Block,
    Body,
    Header,
    LegacyTx,
    Receipt,
    RLPItem,
    Transaction,
    Withdrawal,
    decode_rlp,
    logs_bloom,
    transaction_from_item,
)
from vmstack.cchain.types.fields import UINT32
from vmstack.errors import InvalidBlock
from vmstack.keccak import keccak256
from vmstack.rlpreader import Buffer

__all__ = [
    "AVALANCHE",
    "BodyField",
    "ETHEREUM",
    "Flavour",
    "decode_receipts",
    "derive_receipts",
    "encode_receipt_forms",
    "encode_receipts",
]


@attrs.frozen
class BodyField:
    """One field of a flavour's body, in body order.

    ``encode`` turns the :class:`Body` attribute ``name`` into a raw RLP item; ``decode``
    turns a raw item back (raising ``InvalidBlock``). An ``optional`` field may be absent at
    the end of the list (its attribute is then ``None``).
    """

    name: str
    encode: Callable[[Any], RLPItem]
    decode: Callable[[Flavour, RLPItem], Any]
    optional: bool = False


def _encode_txs(txs: Sequence[Transaction]) -> RLPItem:
    return [tx.block_item() for tx in txs]


def _decode_txs(flavour: Flavour, item: RLPItem) -> tuple[Transaction, ...]:
    if type(item) is not list:
        raise InvalidBlock("body: the transactions field must be an RLP list")
    return tuple(transaction_from_item(tx, f"transaction {i}") for i, tx in enumerate(item))


def _encode_uncles(uncles: Sequence[AnyHeader]) -> RLPItem:
    return [u.to_items() for u in uncles]


def _decode_uncles(flavour: Flavour, item: RLPItem) -> tuple[AnyHeader, ...]:
    if type(item) is not list:
        raise InvalidBlock("body: the uncles field must be an RLP list")
    header_type = flavour.header_type
    return tuple(header_type.from_items(u, f"uncle {i}") for i, u in enumerate(item))


def _encode_withdrawals(withdrawals: Sequence[Withdrawal]) -> RLPItem:
    return [w.to_items() for w in withdrawals]


def _decode_withdrawals(flavour: Flavour, item: RLPItem) -> tuple[Withdrawal, ...]:
    if type(item) is not list:
        raise InvalidBlock("body: the withdrawals field must be an RLP list")
    return tuple(Withdrawal.from_items(w, f"withdrawal {i}") for i, w in enumerate(item))


def _encode_version(version: int) -> RLPItem:
    return UINT32.encode(version, "body version")


def _decode_version(flavour: Flavour, item: RLPItem) -> int:
    return UINT32.decode(item, "body version")  # type: ignore[no-any-return]


def _encode_ext_data(ext_data: bytes) -> RLPItem:
    if not isinstance(ext_data, (bytes, bytearray)):
        raise ValueError("body ext_data must be bytes")
    return bytes(ext_data)


def _decode_ext_data(flavour: Flavour, item: RLPItem) -> bytes:
    if type(item) is not bytes:
        raise InvalidBlock("body: the ext_data field must be an RLP string, found a list")
    return item


TRANSACTIONS = BodyField("transactions", _encode_txs, _decode_txs)
UNCLES = BodyField("uncles", _encode_uncles, _decode_uncles)
WITHDRAWALS = BodyField("withdrawals", _encode_withdrawals, _decode_withdrawals, optional=True)
VERSION = BodyField("version", _encode_version, _decode_version)
EXT_DATA = BodyField("ext_data", _encode_ext_data, _decode_ext_data)

_BODY_ATTRIBUTES = tuple(a.name for a in attrs.fields(Body))


def _check_declaration(instance: Flavour, attribute: Any, fields: tuple[BodyField, ...]) -> None:
    names = [f.name for f in fields]
    unknown = [n for n in names if n not in _BODY_ATTRIBUTES]
    if unknown or len(set(names)) != len(names):
        raise ValueError(f"body fields must be distinct Body attributes, got {names}")
    seen_optional = False
    for f in fields:
        if seen_optional and not f.optional:
            raise ValueError("optional body fields must come last")
        seen_optional = seen_optional or f.optional


@attrs.frozen(repr=False)
class Flavour:
    """A block format: its header type and its body fields, declared once.

    Every method is strict on input bytes (``InvalidBlock``) and checks the records it
    encodes (``ValueError`` for a header of the other flavour, a body field the flavour does
    not have, or a value that cannot be encoded).
    """

    name: str
    header_type: type[Header] | type[AvalancheHeader]
    body_fields: tuple[BodyField, ...] = attrs.field(validator=_check_declaration)
    _required: int = attrs.field(init=False, repr=False, eq=False)
    _undeclared: tuple[str, ...] = attrs.field(init=False, repr=False, eq=False)

    def __repr__(self) -> str:
        return f"Flavour({self.name!r})"

    def __attrs_post_init__(self) -> None:
        declared = {f.name for f in self.body_fields}
        object.__setattr__(self, "_required", sum(1 for f in self.body_fields if not f.optional))
        object.__setattr__(
            self, "_undeclared", tuple(n for n in _BODY_ATTRIBUTES if n not in declared)
        )

    # -- building records ---------------------------------------------------------------

    def body(
        self,
        transactions: Sequence[Transaction] = (),
        uncles: Sequence[AnyHeader] = (),
        *,
        withdrawals: Sequence[Withdrawal] | None = None,
        version: int = 0,
        ext_data: bytes = b"",
    ) -> Body:
        """A :class:`Body` of this flavour: the arguments it does not declare are dropped.

        Ethereum keeps ``withdrawals`` (``None`` means a pre-Shanghai body); Avalanche keeps
        ``version`` and ``ext_data``.
        """
        values: dict[str, Any] = {
            "transactions": tuple(transactions),
            "uncles": tuple(uncles),
            "withdrawals": None if withdrawals is None else tuple(withdrawals),
            "version": version,
            "ext_data": bytes(ext_data),
        }
        for name in self._undeclared:
            values[name] = None
        return Body(**values)

    def seal(
        self,
        header: AnyHeader,
        body: Body,
        receipts: Sequence[Receipt] | None = None,
    ) -> Block:
        """A block whose header commits to ``body``, as geth's ``NewBlock`` does.

        Sets the body's commitments as :func:`~vmstack.cchain.tries.body_commitments`
        computes them (``tx_root`` and ``uncle_hash``, ``withdrawals_hash`` when the body has
        withdrawals, ``ext_data_hash`` for Avalanche), and ``receipt_root`` and ``bloom``
        as :func:`~vmstack.cchain.tries.receipt_commitments` computes them when
        ``receipts`` (consensus receipts, in transaction order) are given.
        """
        self._check_header(header)
        self._body_items(body)
        header = with_body_commitments(header, body_commitments(body))
        if receipts is not None:
            header = with_receipt_commitments(header, receipt_commitments(receipts))
        return Block(header, body)

    # -- the one body declaration, both directions ---------------------------------------

    def _check_header(self, header: AnyHeader) -> None:
        if type(header) is not self.header_type:
            raise ValueError(
                f"a {self.name} block needs a {self.header_type.__name__}, "
                f"got {type(header).__name__}"
            )

    def _body_items(self, body: Body) -> list[RLPItem]:
        for name in self._undeclared:
            if getattr(body, name) is not None:
                raise ValueError(f"a {self.name} body has no {name} field; it must be None")
        items: list[RLPItem] = []
        absent: str | None = None
        for f in self.body_fields:
            value = getattr(body, f.name)
            if value is None:
                if not f.optional:
                    raise ValueError(f"a {self.name} body needs its {f.name} field")
                absent = f.name
                continue
            if absent is not None:
                raise ValueError(f"body field {f.name} is present but {absent} is not")
            if f.name == "uncles":
                for uncle in value:
                    self._check_header(uncle)
            items.append(f.encode(value))
        return items

    def _body_from_items(self, items: list[RLPItem], first: int, what: str) -> Body:
        count = len(items) - first
        total = len(self.body_fields)
        if not self._required <= count <= total:
            expected = str(total) if self._required == total else f"{self._required} to {total}"
            raise InvalidBlock(f"{what} has {count} body fields, expected {expected}")
        values: dict[str, Any] = {}
        for f, item in zip(self.body_fields, items[first:], strict=False):
            values[f.name] = f.decode(self, item)
        return Body(**values)

    # -- bytes ----------------------------------------------------------------------------

    def encode_header(self, header: AnyHeader) -> bytes:
        """The header's RLP."""
        self._check_header(header)
        return encode_item(header.to_items())

    def decode_header(self, data: Buffer) -> AnyHeader:
        """A header from its RLP (strict)."""
        strings = decode_string_list(data)
        if strings is None:
            return self.header_type.from_items(decode_rlp(data, "header", max_depth=1))
        items: list[RLPItem] = list(strings)
        return self.header_type.from_items(items)

    def encode_body(self, block_or_body: Block | Body) -> bytes:
        """The body RLP (what geth's rawdb stores under the ``b`` key)."""
        if isinstance(block_or_body, Block):
            self._check_header(block_or_body.header)
            body = block_or_body.body
        else:
            body = block_or_body
        return encode_item(self._body_items(body))

    def decode_body(self, data: Buffer) -> Body:
        """A body from its RLP (strict)."""
        items = decode_rlp(data, "body", max_depth=3)
        if type(items) is not list:
            raise InvalidBlock("body: expected an RLP list, found a string")
        return self._body_from_items(items, 0, "body")

    def block_from_parts(
        self, header_rlp: Buffer, body_rlp: Buffer, block_hash: bytes | None = None
    ) -> Block:
        """A block from a stored header RLP and body RLP (rawdb's ``h`` and ``b`` values).

        ``block_hash`` is the hash the caller already knows (from the store key); without it
        the hash is keccak256 of ``header_rlp`` as it stands.
        """
        header = self.decode_header(header_rlp)
        body = self.decode_body(body_rlp)
        return Block(header, body, hash=keccak256(header_rlp) if block_hash is None else block_hash)

    def encode_block(self, block: Block) -> bytes:
        """The block RLP: ``[header, *body fields]``."""
        self._check_header(block.header)
        return encode_item([block.header.to_items(), *self._body_items(block.body)])

    def decode_block(self, data: Buffer) -> Block:
        """A block from its RLP (strict); its hash is keccak256 of the header bytes."""
        raw = data if type(data) is bytes else bytes(data)
        items = decode_rlp(raw, "block", max_depth=3)
        if type(items) is not list:
            raise InvalidBlock("block: expected an RLP list, found a string")
        if not items:
            raise InvalidBlock("block: empty list, expected a header and a body")
        header = self.header_type.from_items(items[0])
        body = self._body_from_items(items, 1, "block")
        return Block(header, body, hash=keccak256(header_slice(raw)))


ETHEREUM = Flavour("ethereum", Header, (TRANSACTIONS, UNCLES, WITHDRAWALS))
"""Ethereum blocks: 15-21 header fields, body ``[transactions, uncles, withdrawals?]``."""

AVALANCHE = Flavour("avalanche", AvalancheHeader, (TRANSACTIONS, UNCLES, VERSION, EXT_DATA))
"""Avalanche C-chain (coreth) blocks: 16-24 header fields, body
``[transactions, uncles, version, ext_data]``."""


# --- receipts ---------------------------------------------------------------------------


def encode_receipts(receipts: Sequence[Receipt]) -> bytes:
    """The storage form of a block's receipts (geth rawdb ``r`` key): a list of
    ``[post_state_or_status, cumulative_gas_used, logs]``."""
    return encode_item([r.storage_items() for r in receipts])


def encode_receipt_forms(receipts: Sequence[Receipt]) -> tuple[list[bytes], bytes]:
    """Both encodings of a block's receipts from one encoding of each receipt's fields:
    each receipt's consensus form (what :meth:`Receipt.encode
    <vmstack.cchain.types.Receipt.encode>` gives, the receipts trie's values) and the
    block's storage form (what :func:`encode_receipts` gives), byte for byte. Building a
    block needs the first for its header and accepting it the second."""
    consensus: list[bytes] = []
    stored: list[bytes] = []
    for receipt in receipts:
        outcome, gas, logs = receipt.storage_items()
        bloom = receipt.bloom if receipt.bloom is not None else logs_bloom(receipt.logs)
        head = encode_item(outcome) + encode_item(gas)
        logs_rlp = encode_item(logs)
        storage_payload = head + logs_rlp
        stored.append(list_prefix(len(storage_payload)) + storage_payload)
        payload = head + encode_item(bloom) + logs_rlp
        encoded = list_prefix(len(payload)) + payload
        consensus.append(encoded if receipt.tx_type == 0 else bytes((receipt.tx_type,)) + encoded)
    storage = b"".join(stored)
    return consensus, list_prefix(len(storage)) + storage


def decode_receipts(data: Buffer) -> tuple[Receipt, ...]:
    """Receipts from their storage form (strict). Type, bloom and the other derived fields
    are not stored; :func:`derive_receipts` restores them from the block."""
    items = decode_rlp(data, "receipts", max_depth=5)
    if type(items) is not list:
        raise InvalidBlock("receipts: expected an RLP list, found a string")
    return tuple(Receipt.from_storage_items(r, f"receipt {i}") for i, r in enumerate(items))


def _effective_gas_price(tx: Transaction, base_fee: int | None) -> int:
    if isinstance(tx, (LegacyTx, AccessListTx)):
        return tx.gas_price
    if base_fee is None:
        return tx.max_fee_per_gas
    return min(tx.max_fee_per_gas, base_fee + tx.max_priority_fee_per_gas)


_BLOB_GAS_PER_BLOB = 1 << 17


def derive_receipts(
    receipts: Sequence[Receipt], block: Block, senders: Sequence[bytes]
) -> tuple[Receipt, ...]:
    """The receipts of ``block`` with their derived fields filled in, as geth's
    ``Receipts.DeriveFields`` does.

    ``senders`` are the transactions' senders (recovered from their signatures), needed for
    the address of a created contract. Sets ``tx_type``, ``bloom``, ``tx_hash``,
    ``transaction_index``, ``block_hash``, ``block_number``, ``gas_used`` (the difference of
    cumulative gas), ``effective_gas_price``, ``blob_gas_used``, ``contract_address`` and
    ``first_log_index``. Counts that disagree with the block raise ``InvalidBlock``.
    """
    txs = block.transactions
    if len(receipts) != len(txs) or len(senders) != len(txs):
        raise InvalidBlock(
            f"block {block.number} has {len(txs)} transactions but {len(receipts)} receipts "
            f"and {len(senders)} senders"
        )
    base_fee = block.header.base_fee
    derived: list[Receipt] = []
    previous_gas = 0
    log_index = 0
    for i, (receipt, tx, sender) in enumerate(zip(receipts, txs, senders, strict=True)):
        gas_used = receipt.cumulative_gas_used - previous_gas
        if gas_used < 0:
            raise InvalidBlock(f"receipt {i}: cumulative gas used decreases")
        previous_gas = receipt.cumulative_gas_used
        contract = None
        if tx.to is None:
            contract = keccak256(encode_item([sender, _uint_bytes(tx.nonce)]))[12:]
        blob_gas = None
        if isinstance(tx, BlobTx):
            blob_gas = len(tx.blob_versioned_hashes) * _BLOB_GAS_PER_BLOB
        derived.append(
            attrs.evolve(
                receipt,
                tx_type=tx.TYPE,
                bloom=logs_bloom(receipt.logs),
                tx_hash=tx.hash,
                transaction_index=i,
                block_hash=block.hash,
                block_number=block.number,
                gas_used=gas_used,
                effective_gas_price=_effective_gas_price(tx, base_fee),
                blob_gas_used=blob_gas,
                contract_address=contract,
                first_log_index=log_index,
            )
        )
        log_index += len(receipt.logs)
    return tuple(derived)


def _uint_bytes(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")
