"""Block headers: the Ethereum header, the Avalanche C-chain (coreth) header, and their defaults.

Header optional fields follow the geth rule: trailing absent (``None``) fields are not
written, and an absent field followed by a present one is written as the empty string (so an
absent integer reads back as 0).
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from vmstack.cchain.types.fields import (
    ADDRESS,
    BLOOM,
    BYTES,
    EMPTY_BLOOM,
    HASH,
    NONCE,
    UINT64,
    UINT256,
    ZERO_ADDRESS,
    ZERO_HASH,
    _field,
    _Record,
    _seal,
)
from vmstack.keccak import keccak256

EMPTY_ROOT = keccak256(b"\x80")
"""Root of an empty hexary trie: keccak256(rlp(b""))."""
EMPTY_UNCLE_HASH = keccak256(b"\xc0")
"""Uncle hash of a block without uncles: keccak256(rlp([]))."""
EMPTY_EXT_DATA_HASH = keccak256(b"\x80")
"""coreth's ExtDataHash of empty extData: keccak256(rlp(b"")) (it equals EMPTY_ROOT)."""


class _HeaderBase(_Record):
    """What both header flavours share: the 15 fields of the original Ethereum header."""

    __slots__ = ()
    parent_hash: bytes
    number: int
    time: int

    @property
    def hash(self) -> bytes:
        """keccak256 of this header's RLP (computed on each access)."""
        return keccak256(self.encode())

    @property
    def timestamp(self) -> int:
        """The header time in unix seconds (an alias of ``time``)."""
        return self.time


@attrs.frozen
class Header(_HeaderBase):
    """An Ethereum header, Frontier through Prague (15 to 21 fields).

    Fields 15 onwards are optional and appear by fork: ``base_fee`` (London),
    ``withdrawals_hash`` (Shanghai), ``blob_gas_used``, ``excess_blob_gas``,
    ``parent_beacon_root`` (Cancun), ``requests_hash`` (Prague).
    """

    parent_hash: bytes = _field(HASH, ZERO_HASH)
    uncle_hash: bytes = _field(HASH, EMPTY_UNCLE_HASH)
    coinbase: bytes = _field(ADDRESS, ZERO_ADDRESS)
    state_root: bytes = _field(HASH, EMPTY_ROOT)
    tx_root: bytes = _field(HASH, EMPTY_ROOT)
    receipt_root: bytes = _field(HASH, EMPTY_ROOT)
    bloom: bytes = _field(BLOOM, EMPTY_BLOOM)
    difficulty: int = _field(UINT256, 0)
    number: int = _field(UINT256, 0)
    gas_limit: int = _field(UINT64, 0)
    gas_used: int = _field(UINT64, 0)
    time: int = _field(UINT64, 0)
    extra: bytes = _field(BYTES, b"")
    mix_digest: bytes = _field(HASH, ZERO_HASH)
    nonce: bytes = _field(NONCE, bytes(8))
    base_fee: int | None = _field(UINT256, None, optional=True)
    withdrawals_hash: bytes | None = _field(HASH, None, optional=True)
    blob_gas_used: int | None = _field(UINT64, None, optional=True)
    excess_blob_gas: int | None = _field(UINT64, None, optional=True)
    parent_beacon_root: bytes | None = _field(HASH, None, optional=True)
    requests_hash: bytes | None = _field(HASH, None, optional=True)


@attrs.frozen
class AvalancheHeader(_HeaderBase):
    """An Avalanche C-chain (coreth) header: 16 to 24 fields.

    The 15 Ethereum fields, then ``ext_data_hash`` (always present: the hash of the block's
    atomic extData), then the optional tail by network upgrade: ``base_fee`` (Apricot 3),
    ``ext_data_gas_used`` and ``block_gas_cost`` (Apricot 4), ``blob_gas_used``,
    ``excess_blob_gas`` and ``parent_beacon_root`` (Etna), ``time_milliseconds`` and
    ``min_delay_excess`` (Granite).
    """

    parent_hash: bytes = _field(HASH, ZERO_HASH)
    uncle_hash: bytes = _field(HASH, EMPTY_UNCLE_HASH)
    coinbase: bytes = _field(ADDRESS, ZERO_ADDRESS)
    state_root: bytes = _field(HASH, EMPTY_ROOT)
    tx_root: bytes = _field(HASH, EMPTY_ROOT)
    receipt_root: bytes = _field(HASH, EMPTY_ROOT)
    bloom: bytes = _field(BLOOM, EMPTY_BLOOM)
    difficulty: int = _field(UINT256, 0)
    number: int = _field(UINT256, 0)
    gas_limit: int = _field(UINT64, 0)
    gas_used: int = _field(UINT64, 0)
    time: int = _field(UINT64, 0)
    extra: bytes = _field(BYTES, b"")
    mix_digest: bytes = _field(HASH, ZERO_HASH)
    nonce: bytes = _field(NONCE, bytes(8))
    ext_data_hash: bytes = _field(HASH, EMPTY_EXT_DATA_HASH)
    base_fee: int | None = _field(UINT256, None, optional=True)
    ext_data_gas_used: int | None = _field(UINT256, None, optional=True)
    block_gas_cost: int | None = _field(UINT256, None, optional=True)
    blob_gas_used: int | None = _field(UINT64, None, optional=True)
    excess_blob_gas: int | None = _field(UINT64, None, optional=True)
    parent_beacon_root: bytes | None = _field(HASH, None, optional=True)
    time_milliseconds: int | None = _field(UINT64, None, optional=True)
    min_delay_excess: int | None = _field(UINT64, None, optional=True)


_seal(Header, "header")
_seal(AvalancheHeader, "header")

AnyHeader: TypeAlias = Header | AvalancheHeader
