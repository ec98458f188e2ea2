"""The blocks of :class:`~vmstack.cchain.vm.CChainVM`: :class:`CChainBlock` and its
:class:`BlockStatus`.

A block holds its bytes and its decoded header; its body is decoded on demand (``verify``
needs it; serving does not). Where the header and each body field lie in the bytes is found
once (:func:`~vmstack.cchain.rlpbytes.frame_body_fields`). Deciding a block (``verify``,
``accept``, ``reject``) is the VM's work: the block hands itself to its VM.
:func:`assemble_block` makes a new block from its parent and contents, as ``build_block``
needs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from vmstack.cchain.codec import encode_receipt_forms
from vmstack.cchain.execution import execute_transactions
from vmstack.cchain.genesis import new_header
from vmstack.cchain.rlpbytes import (
    ItemSpan,
    block_bytes,
    encode_item,
    first_item_offset,
    frame_body_fields,
    list_prefix,
)
from vmstack.cchain.rules import base_fee_rule
from vmstack.cchain.tries import (
    body_commitments,
    encoded_receipt_commitments,
    with_body_commitments,
    with_receipt_commitments,
)
from vmstack.cchain.types import (
    AnyHeader,
    Block,
    Body,
    LegacyTx,
    Receipt,
    Transaction,
    Withdrawal,
)
from vmstack.keccak import keccak256

if TYPE_CHECKING:
    from vmstack.cchain.codec import Flavour
    from vmstack.cchain.state import State
    from vmstack.cchain.vm import CChainVM

__all__ = ["BlockStatus", "CChainBlock", "assemble_block"]


class BlockStatus(enum.Enum):
    """Where a block stands: parsed or built but not verified, verified and undecided
    (processing), accepted, or rejected."""

    UNVERIFIED = "unverified"
    PROCESSING = "processing"
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class CChainBlock:
    """A block of :class:`CChainVM`: its bytes, its decoded header, and its body decoded on
    demand.

    ``verify``, ``accept`` and ``reject`` are decided by the VM. A block served by
    :meth:`CChainVM.get_block` from the store also carries its restored execution
    artifacts: ``senders`` always, ``receipts`` (with derived fields) once settled.
    """

    __slots__ = (
        "_body",
        "_built",
        "_header",
        "_header_end",
        "_id",
        "_raw",
        "_receipts",
        "_receipts_rlp",
        "_senders",
        "_spans",
        "_state",
        "_status",
        "_vm",
    )

    def __init__(
        self,
        vm: CChainVM,
        block_id: bytes,
        raw: bytes,
        header: AnyHeader,
        *,
        header_end: int,
        spans: tuple[ItemSpan, ...] | None = None,
        body: Body | None = None,
        status: BlockStatus = BlockStatus.UNVERIFIED,
        receipts: tuple[Receipt, ...] | None = None,
        senders: tuple[bytes, ...] | None = None,
        built: bool = False,
    ) -> None:
        self._vm = vm
        self._id = block_id
        self._raw = raw
        self._header = header
        self._header_end = header_end
        self._spans = spans
        self._body = body
        self._status = status
        self._receipts = receipts
        # The storage form of ``receipts`` when it was encoded with them (a block built
        # here), for the accept to write; ``None`` otherwise.
        self._receipts_rlp: bytes | None = None
        self._senders = senders
        self._built = built
        # The post-state while the block is built or processing (see CChainVM).
        self._state: State | None = None

    @property
    def id(self) -> bytes:
        """The block hash: keccak256 of the header RLP."""
        return self._id

    @property
    def hash(self) -> bytes:
        """The block hash (the same 32 bytes as :attr:`id`), as a decoded block names it."""
        return self._id

    @property
    def parent_id(self) -> bytes:
        return self._header.parent_hash

    @property
    def height(self) -> int:
        return self._header.number

    @property
    def timestamp(self) -> int:
        return self._header.time

    def __bytes__(self) -> bytes:
        return self._raw

    @property
    def status(self) -> BlockStatus:
        return self._status

    @property
    def header(self) -> AnyHeader:
        return self._header

    @property
    def body(self) -> Body:
        """The decoded body (strict; decoded on first use, ``InvalidBlock`` if malformed)."""
        if self._body is None:
            self._body = self._vm.flavour.decode_body(self.body_rlp())
        return self._body

    @property
    def transactions(self) -> tuple[Transaction, ...]:
        return self.body.transactions

    @property
    def block(self) -> Block:
        """The block as a codec record."""
        return Block(self._header, self.body, hash=self._id)

    @property
    def receipts(self) -> tuple[Receipt, ...] | None:
        """Receipts with derived fields, for a settled block read by ``get_block``; the
        modelled receipts of a block built here; ``None`` otherwise."""
        return self._receipts

    @property
    def senders(self) -> tuple[bytes, ...] | None:
        """The recovered senders, for a block read from the store by ``get_block``."""
        return self._senders

    def header_rlp(self) -> bytes:
        """The header RLP, as rawdb stores it."""
        return self._raw[first_item_offset(self._raw) : self._header_end]

    def body_rlp(self) -> bytes:
        """The body RLP, as rawdb stores it: a list of the block's items after the header."""
        rest = self._raw[self._header_end :]
        return list_prefix(len(rest)) + rest

    def _body_spans(self) -> tuple[ItemSpan, ...]:
        if self._spans is None:
            self._spans = frame_body_fields(self._vm.flavour, self._raw, self._header_end)
        return self._spans

    def verify(self) -> None:
        self._vm._verify(self)

    def accept(self) -> None:
        self._vm._accept(self)

    def reject(self) -> None:
        self._vm._reject(self)

    def __repr__(self) -> str:
        return (
            f"CChainBlock(height={self.height}, id={self._id.hex()[:16]}..., {self._status.value})"
        )


def assemble_block(
    vm: CChainVM,
    parent_id: bytes,
    parent: AnyHeader,
    timestamp: int,
    txs: Sequence[Transaction],
    ext_data: bytes,
    withdrawals: Sequence[Withdrawal],
    tx_encodings: Sequence[bytes],
    post_state: Callable[[Sequence[Receipt]], State | None],
) -> CChainBlock:
    """A new (unverified, built) block of ``vm`` on ``parent``: ``txs`` executed by the
    execution model, the header committing to the body (from the transactions' known
    ``tx_encodings``) and to the receipts, and its state root the root of
    ``post_state(receipts)`` (the parent's root when that is ``None``: a replaying VM keeps
    no state)."""
    receipts = execute_transactions(txs)
    receipt_encodings, receipts_rlp = encode_receipt_forms(receipts)
    gas_used = receipts[-1].cumulative_gas_used if receipts else 0
    flavour = vm.flavour
    body = flavour.body(txs, ext_data=ext_data, withdrawals=withdrawals)
    header = _commit(
        new_header(
            flavour,
            parent,
            parent_hash=parent_id,
            timestamp=timestamp,
            gas_used=gas_used,
            ext_data=ext_data,
            gas_limit=vm.gas_limit,
            base_fee=base_fee_rule(parent),
        ),
        body,
        receipt_encodings,
        tx_encodings,
    )
    state = post_state(receipts)
    if state is not None:
        header = attrs.evolve(header, state_root=state.root)
    header_rlp = flavour.encode_header(header)
    raw = block_bytes(header_rlp, _body_rlp(flavour, body, tx_encodings))
    block = CChainBlock(
        vm,
        keccak256(header_rlp),
        raw,
        header,
        header_end=first_item_offset(raw) + len(header_rlp),
        body=body,
        receipts=receipts,
        built=True,
    )
    block._state = state
    block._receipts_rlp = receipts_rlp
    return block


def _body_rlp(flavour: Flavour, body: Body, tx_encodings: Sequence[bytes]) -> bytes:
    """``flavour.encode_body(body)``, its transaction list spliced from the transactions'
    known encodings (``tx_encodings``, in order) instead of encoding them again: a legacy
    transaction's item is its encoding, a typed one's the RLP string of it."""
    if not flavour.body_fields or flavour.body_fields[0].name != "transactions":
        return flavour.encode_body(body)
    items = [
        encoding if type(tx) is LegacyTx else encode_item(encoding)
        for tx, encoding in zip(body.transactions, tx_encodings, strict=True)
    ]
    tx_list = b"".join(items)
    rest = flavour.encode_body(attrs.evolve(body, transactions=()))
    # ``rest`` is [[], field, ...]: skip its list prefix and the empty list's 0xc0.
    rest_payload = rest[first_item_offset(rest) + 1 :]
    payload = list_prefix(len(tx_list)) + tx_list + rest_payload
    return list_prefix(len(payload)) + payload


def _commit(
    header: AnyHeader,
    body: Body,
    receipt_encodings: Sequence[bytes],
    tx_encodings: Sequence[bytes],
) -> AnyHeader:
    """``header`` committing to ``body`` and to the receipts whose consensus encodings are
    ``receipt_encodings``: what the flavour's ``seal`` sets, the body's commitments computed
    from the transactions' known encodings and the receipts' from theirs (building blocks
    is the generator's hot loop)."""
    header = with_body_commitments(header, body_commitments(body, tx_encodings))
    return with_receipt_commitments(header, encoded_receipt_commitments(receipt_encodings))
