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
