"""Blocks and their bodies, and the EIP-4895 withdrawals an Ethereum body carries.

A body's fields are those of every flavour; which of them a flavour writes, and in which
order, is declared by the flavour in :mod:`vmstack.cchain.codec`.
"""

from __future__ import annotations

import attrs

from vmstack.cchain.types.fields import ADDRESS, UINT64, ZERO_ADDRESS, _field, _Record, _seal
from vmstack.cchain.types.headers import AnyHeader
from vmstack.cchain.types.transactions import Transaction


@attrs.frozen
class Withdrawal(_Record):
    """An EIP-4895 withdrawal: ``[index, validator_index, address, amount]`` (amount in gwei)."""

    index: int = _field(UINT64, 0)
    validator_index: int = _field(UINT64, 0)
    address: bytes = _field(ADDRESS, ZERO_ADDRESS)
    amount: int = _field(UINT64, 0)


_seal(Withdrawal, "withdrawal")


@attrs.frozen
class Body:
    """A block's body. Which fields a flavour writes is declared once by the flavour.

    Ethereum writes ``[transactions, uncles]`` plus ``withdrawals`` from Shanghai on (``None``
    before); Avalanche writes ``[transactions, uncles, version, ext_data]`` and has no
    withdrawals. A field the flavour does not declare must stay ``None``.
    """

    transactions: tuple[Transaction, ...] = ()
    uncles: tuple[AnyHeader, ...] = ()
    withdrawals: tuple[Withdrawal, ...] | None = None
    version: int | None = None
    ext_data: bytes | None = None


def _header_hash(block: Block) -> bytes:
    return block.header.hash


@attrs.frozen
class Block:
    """A block: a header and a body, and its hash.

    ``hash`` is keccak256 of the header's bytes. It is computed from the header unless given;
    the decoders give it from the header bytes as they stand (no re-encoding).
    """

    header: AnyHeader
    body: Body = attrs.field(factory=Body)
    hash: bytes = attrs.field(default=attrs.Factory(_header_hash, takes_self=True), kw_only=True)

    @property
    def transactions(self) -> tuple[Transaction, ...]:
        return self.body.transactions

    @property
    def uncles(self) -> tuple[AnyHeader, ...]:
        return self.body.uncles

    @property
    def withdrawals(self) -> tuple[Withdrawal, ...] | None:
        return self.body.withdrawals

    @property
    def number(self) -> int:
        return self.header.number

    @property
    def parent_hash(self) -> bytes:
        return self.header.parent_hash

    @property
    def timestamp(self) -> int:
        return self.header.time
