"""Receipts and their logs: the storage form, the consensus form, and the logs bloom."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from vmstack.cchain.rlpbytes import encode_item
from vmstack.cchain.types.fields import (
    ADDRESS,
    BYTES,
    HASHES,
    UINT64,
    ZERO_ADDRESS,
    RLPItem,
    _field,
    _items,
    _list_kind,
    _Record,
    _record_kind,
    _seal,
    _string,
)
from vmstack.errors import InvalidBlock
from vmstack.keccak import keccak256


@attrs.frozen
class Log(_Record):
    """An event log: ``[address, topics, data]``; the rest is derived from its block."""

    address: bytes = _field(ADDRESS, ZERO_ADDRESS)
    topics: tuple[bytes, ...] = _field(HASHES, ())
    data: bytes = _field(BYTES, b"")


_seal(Log, "log")

LOGS = _list_kind(_record_kind(Log))


def _add_to_bloom(bloom: bytearray, value: bytes) -> None:
    digest = keccak256(value)
    for i in (0, 2, 4):
        bit = ((digest[i] << 8) | digest[i + 1]) & 2047
        bloom[255 - bit // 8] |= 1 << (bit % 8)


def logs_bloom(logs: Sequence[Log]) -> bytes:
    """The 256-byte bloom filter of ``logs`` (each address and topic sets three bits)."""
    bloom = bytearray(256)
    for log in logs:
        _add_to_bloom(bloom, log.address)
        for topic in log.topics:
            _add_to_bloom(bloom, topic)
    return bytes(bloom)


_STATUS_FAILED = b""
_STATUS_SUCCESS = b"\x01"


@attrs.frozen
class Receipt:
    """A transaction receipt, with the fields a node derives from its block.

    Consensus fields: ``tx_type``, the outcome (``status`` 1/0 since Byzantium, or a 32-byte
    ``post_state`` root before it; exactly one is set), ``cumulative_gas_used``, ``logs``. The
    storage form (geth's rawdb) is ``[post_state_or_status, cumulative_gas_used, logs]``; the
    consensus form adds the bloom and, for a typed transaction, the type byte in front.
    The derived fields (``None`` until :func:`vmstack.cchain.codec.derive_receipts` fills
    them) are not encoded in either form.
    """

    status: int | None = 1
    cumulative_gas_used: int = 0
    logs: tuple[Log, ...] = ()
    post_state: bytes | None = None
    tx_type: int = 0
    bloom: bytes | None = None
    tx_hash: bytes | None = None
    transaction_index: int | None = None
    block_hash: bytes | None = None
    block_number: int | None = None
    gas_used: int | None = None
    effective_gas_price: int | None = None
    blob_gas_used: int | None = None
    contract_address: bytes | None = None
    first_log_index: int | None = None

    def _outcome_item(self) -> bytes:
        if self.post_state is not None:
            if self.status is not None or len(self.post_state) != 32:
                raise ValueError("a receipt has either a 32-byte post_state or a status")
            return self.post_state
        if self.status == 1:
            return _STATUS_SUCCESS
        if self.status == 0:
            return _STATUS_FAILED
        raise ValueError("receipt status must be 0 or 1")

    def storage_items(self) -> list[RLPItem]:
        """The storage form as raw items: ``[post_state_or_status, cumulative_gas, logs]``."""
        return [
            self._outcome_item(),
            UINT64.encode(self.cumulative_gas_used, "receipt cumulative gas used"),
            LOGS.encode(self.logs, "receipt logs"),
        ]

    def encode(self) -> bytes:
        """The consensus form: ``[outcome, cumulative_gas, bloom, logs]``, with the type byte
        in front for a typed transaction (what the receipts trie stores)."""
        bloom = self.bloom if self.bloom is not None else logs_bloom(self.logs)
        outcome, gas, logs = self.storage_items()
        payload = encode_item([outcome, gas, bloom, logs])
        return payload if self.tx_type == 0 else bytes((self.tx_type,)) + payload

    @classmethod
    def from_storage_items(cls, item: RLPItem, what: str = "receipt") -> Receipt:
        """A receipt from its storage form (no type, no bloom: :func:`derive_receipts` adds
        them)."""
        fields = _items(item, what)
        if len(fields) != 3:
            raise InvalidBlock(f"{what} has {len(fields)} fields, expected 3")
        outcome = _string(fields[0], f"{what} status")
        status: int | None
        post_state: bytes | None = None
        if len(outcome) == 32:
            status, post_state = None, outcome
        elif outcome == _STATUS_SUCCESS:
            status = 1
        elif outcome == _STATUS_FAILED:
            status = 0
        else:
            raise InvalidBlock(f"{what} status must be 0x, 0x01 or a 32-byte state root")
        return cls(
            status=status,
            cumulative_gas_used=UINT64.decode(fields[1], f"{what} cumulative gas used"),
            logs=LOGS.decode(fields[2], f"{what} logs"),
            post_state=post_state,
        )
