"""Transactions (:mod:`vmstack.cchain.types.transactions`): signing, senders, chain ids and
authorizations of every type."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import rlp

from tests.cchain.types.samples import CHAIN, KEY, SENDER, TO, signed_transactions
from vmstack.cchain import (
    Authorization,
    LegacyTx,
    decode_transaction,
    keccak256,
    recover_sender,
    sign_hash,
    sign_transaction,
)
from vmstack.errors import InvalidBlock


def _enc(value: Any) -> bytes:
    return rlp.encode(value, infer_serializer=False)


def test_every_transaction_type_signs_and_recovers() -> None:
    """Each type signs deterministically, recovers its sender and survives its canonical bytes."""
    for tx in signed_transactions():
        assert tx.sender() == SENDER
        assert recover_sender(tx, CHAIN) == SENDER
        data = tx.encode()
        assert decode_transaction(data) == tx
        assert decode_transaction(memoryview(data)) == tx
        assert tx.hash == keccak256(data)
        assert (data[0] == tx.TYPE) if tx.TYPE else data[0] >= 0xC0


def test_legacy_protection_follows_the_chain_id() -> None:
    """A legacy tx signed without a chain id is unprotected (v 27/28) and valid on any chain."""
    tx = sign_transaction(LegacyTx(nonce=1, gas=21000, to=TO), KEY, None)
    assert tx.v in (27, 28) and tx.chain_id is None
    assert tx.sender(CHAIN) == SENDER
    protected = sign_transaction(LegacyTx(nonce=1, gas=21000, to=TO), KEY, CHAIN)
    assert protected.chain_id == CHAIN and protected.signing_hash(CHAIN) != tx.signing_hash()
    with pytest.raises(InvalidBlock, match="chain id"):
        protected.sender(1)


def test_typed_transactions_reject_another_chain() -> None:
    """A typed tx signs and recovers only for its own chain id."""
    tx = signed_transactions()[3]
    with pytest.raises(InvalidBlock, match="chain id"):
        tx.sender(1)
    with pytest.raises(ValueError, match="chain id"):
        sign_transaction(attrs.evolve(tx, r=0, s=0), KEY, 1)


def test_unsigned_or_tampered_transactions_have_no_sender() -> None:
    """An unsigned tx, a bad parity or a changed field give InvalidBlock or another sender."""
    with pytest.raises(InvalidBlock, match="v = 0"):
        LegacyTx(nonce=1).sender()
    signed = signed_transactions()[3]
    with pytest.raises(InvalidBlock, match="parity"):
        attrs.evolve(signed, y_parity=2).sender()
    assert attrs.evolve(signed, value=2).sender() != SENDER


def test_authorization_recovers_its_authority() -> None:
    """A 7702 authorization signed over keccak(0x05 || rlp(...)) recovers the signer."""
    auth = Authorization(chain_id=CHAIN, address=TO, nonce=3)
    parity, r, s = sign_hash(auth.signing_hash(), KEY)
    assert attrs.evolve(auth, y_parity=parity, r=r, s=s).authority() == SENDER
    assert auth.signing_hash() == keccak256(b"\x05" + _enc([CHAIN.to_bytes(2, "big"), TO, b"\x03"]))


@pytest.mark.parametrize("data_length", [0, 40, 300])
def test_the_bytes_kept_at_signing_are_the_transactions_own(data_length: int) -> None:
    """A transaction signed here is entered with its sender and its encoding, built from
    the fields encoded once for the signing hash; both are what a node that never saw it
    computes from the transaction alone (every type, EIP-155 and unprotected legacy,
    payloads over and under RLP's 55-byte short form)."""
    from vmstack.cchain.crypto import address_of
    from vmstack.cchain.rlpbytes import encode_item
    from vmstack.cchain.types import AccessListTx, AccessTuple, DynamicFeeTx, LegacyTx
    from vmstack.cchain.types.transactions import SIGNED_HERE, _known
    from vmstack.verifycache import clear_all

    key = (7).to_bytes(32, "big")
    data = bytes(range(256)) * 2
    data = data[:data_length]
    access = (AccessTuple(address=b"\x02" * 20, storage_keys=(b"\x03" * 32,)),)
    signed = [
        LegacyTx(nonce=1, gas_price=10**9, gas=90_000, to=b"\x01" * 20, value=5, data=data).sign(
            key, chain_id
        )
        for chain_id in (None, 43114)
    ] + [
        AccessListTx(
            chain_id=43114, nonce=2, gas=90_000, to=None, data=data, access_list=access
        ).sign(key),
        DynamicFeeTx(chain_id=43114, nonce=3, gas=90_000, to=b"\x01" * 20, data=data).sign(key),
    ]
    kept = [_known(tx) for tx in signed]
    assert all(entry is not None for entry in kept)
    clear_all()
    assert len(SIGNED_HERE) == 0
    for tx, entry in zip(signed, kept, strict=True):
        assert entry is not None
        own = encode_item(tx.to_items())
        assert entry[2] == (own if tx.TYPE == 0 else bytes((tx.TYPE,)) + own)
        assert entry[1] == tx.sender() == address_of(key)
