"""Test helpers for the C-chain records: a signing key and one signed transaction of every type.

Not a test module: the record and codec test files import from it.
"""

from __future__ import annotations

from typing import Any

from vmstack.cchain import (
    AccessListTx,
    AccessTuple,
    Authorization,
    BlobTx,
    DynamicFeeTx,
    LegacyTx,
    SetCodeTx,
    address_of,
    keccak256,
    sign_transaction,
)

KEY = keccak256(b"codec test key")
SENDER = address_of(KEY)
TO = bytes.fromhex("35" * 20)
CHAIN = 43114


def signed_transactions() -> list[Any]:
    """Two legacy transactions (a transfer, a creation) and one of each typed kind, signed
    with ``KEY`` for ``CHAIN``."""
    access = (AccessTuple(address=TO, storage_keys=(bytes(32), b"\x01" * 32)),)
    unsigned: list[Any] = [
        LegacyTx(nonce=0, gas_price=25 * 10**9, gas=21000, to=TO, value=1),
        LegacyTx(nonce=1, gas_price=25 * 10**9, gas=90000, to=None, data=b"\x60\x00"),
        AccessListTx(
            chain_id=CHAIN, nonce=2, gas_price=10**9, gas=30000, to=TO, access_list=access
        ),
        DynamicFeeTx(
            chain_id=CHAIN,
            nonce=3,
            max_priority_fee_per_gas=2,
            max_fee_per_gas=50 * 10**9,
            gas=21000,
            to=TO,
            value=10**18,
        ),
        BlobTx(
            chain_id=CHAIN,
            nonce=4,
            max_fee_per_gas=10**10,
            gas=21000,
            to=TO,
            max_fee_per_blob_gas=1,
            blob_versioned_hashes=(b"\x01" + bytes(31),),
        ),
        SetCodeTx(
            chain_id=CHAIN,
            nonce=5,
            max_fee_per_gas=10**10,
            gas=50000,
            to=TO,
            authorization_list=(Authorization(chain_id=CHAIN, address=TO, nonce=6),),
        ),
    ]
    return [sign_transaction(tx, KEY, CHAIN) for tx in unsigned]
