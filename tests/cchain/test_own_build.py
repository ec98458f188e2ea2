"""A block this VM built is verified without its commitments computed again; any other
block, one claiming the built block's ID included, has them checked. A transaction signed
in this process knows its sender; a twin of it does not."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import vmstack.cchain.deciding as vm_module
from tests.cchain.chains import new_vm, tampered
from tests.support.transactions import signed_transfer
from vmstack.cchain import (
    AVALANCHE,
    ETHEREUM,
    CChainBlock,
    CChainVM,
    DynamicFeeTx,
    LegacyTx,
    Withdrawal,
    transaction_pool,
)
from vmstack.cchain.codec import Flavour
from vmstack.cchain.crypto import (
    RECOVERED_SENDERS,
    SECP256K1_N,
    address_of,
    recover_address,
)
from vmstack.cchain.genesis import DEV_KEYS
from vmstack.cchain.rlpbytes import encode_item, first_item_offset
from vmstack.cchain.types.blocks import Block
from vmstack.errors import InvalidBlock
from vmstack.keccak import keccak256
from vmstack.store import MemoryStore

KEY = DEV_KEYS[0]
TO = keccak256(b"own build recipient")[12:]


def _tx(nonce: int) -> DynamicFeeTx:
    return signed_transfer(nonce, key=KEY, to=TO, max_priority_fee_per_gas=1)


def _built(vm: CChainVM) -> CChainBlock:
    """A built, unverified block of two transactions on an accepted parent."""
    parent = vm.build_block()
    parent.verify()
    parent.accept()
    vm.add_transactions([_tx(0), _tx(1)])
    return vm.build_block()


def _count_commitment_checks(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"body": 0, "receipts": 0}
    body_check = vm_module.check_received_body  # type: ignore[attr-defined]
    receipts_check = vm_module.check_receipts_commitments  # type: ignore[attr-defined]

    def counted_body(*args: Any, **kwargs: Any) -> Any:
        calls["body"] += 1
        return body_check(*args, **kwargs)

    def counted_receipts(*args: Any, **kwargs: Any) -> Any:
        calls["receipts"] += 1
        return receipts_check(*args, **kwargs)

    monkeypatch.setattr(vm_module, "check_received_body", counted_body)
    monkeypatch.setattr(vm_module, "check_receipts_commitments", counted_receipts)
    return calls


def _forged(vm: CChainVM, block: CChainBlock, header: Any, body: Any) -> CChainBlock:
    """A block object claiming ``block``'s ID, marked built and carrying its receipts and
    post-state, whose bytes hold ``header`` and ``body``: what a peer's block with an
    ID-looking shape could present."""
    raw = vm.flavour.encode_block(Block(header, body))
    header_rlp = vm.flavour.encode_header(header)
    forged = CChainBlock(
        vm,
        block.id,
        raw,
        header,
        header_end=first_item_offset(raw) + len(header_rlp),
        body=body,
        receipts=block.receipts,
        built=True,
    )
    forged._state = block._state
    return forged


def test_a_built_block_verifies_without_its_commitments_computed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vm = new_vm(MemoryStore())
    block = _built(vm)
    calls = _count_commitment_checks(monkeypatch)
    block.verify()
    assert calls == {"body": 0, "receipts": 0}
    block.accept()
    assert vm.last_accepted() == block.id


def test_a_copy_of_a_built_block_parsed_from_its_bytes_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the very object build_block returned skips the checks: the same bytes parsed
    (another object, as a peer's would be) are checked in full, and verify."""
    vm = new_vm(MemoryStore())
    block = _built(vm)
    copy = vm.parse_block(bytes(block))
    assert copy is not block and copy.id == block.id
    calls = _count_commitment_checks(monkeypatch)
    copy.verify()
    assert calls == {"body": 1, "receipts": 1}


@pytest.mark.parametrize("field", ["receipt_root", "tx_root"])
def test_a_peer_block_with_a_wrong_root_is_refused(field: str) -> None:
    """A peer's block (parsed, not built here) whose header states a wrong receipts or
    transactions root is refused, while this VM has built the honest block beside it."""
    vm = new_vm(MemoryStore())
    block = _built(vm)
    peer = vm.parse_block(tampered(vm, block, **{field: keccak256(b"wrong root")}))
    with pytest.raises(InvalidBlock, match="root"):
        peer.verify()
    block.verify()


def test_a_block_claiming_a_built_blocks_id_with_a_wrong_receipts_root_is_refused() -> None:
    vm = new_vm(MemoryStore())
    block = _built(vm)
    header = attrs.evolve(block.header, receipt_root=keccak256(b"wrong receipts"))
    forged = _forged(vm, block, header, block.body)
    with pytest.raises(InvalidBlock, match="receipts root"):
        forged.verify()
    assert vm.processing() == ()


def test_a_block_claiming_a_built_blocks_id_with_other_transactions_is_refused() -> None:
    """The built block's header and ID over a body of other transactions: the
    transactions root refuses it."""
    vm = new_vm(MemoryStore())
    block = _built(vm)
    body = attrs.evolve(block.body, transactions=(block.transactions[0],))
    forged = _forged(vm, block, block.header, body)
    with pytest.raises(InvalidBlock, match="root"):
        forged.verify()
    assert vm.processing() == ()


def test_a_built_block_rejected_then_forged_is_refused() -> None:
    """Rejecting a built block forgets it as this VM's own."""
    vm = new_vm(MemoryStore())
    block = _built(vm)
    block.reject()
    header = attrs.evolve(block.header, receipt_root=keccak256(b"wrong receipts"))
    forged = _forged(vm, block, header, block.body)
    with pytest.raises(InvalidBlock):
        forged.verify()


def test_a_transaction_signed_here_knows_its_sender_without_recovery() -> None:
    tx = _tx(7)
    legacy = LegacyTx(nonce=3, gas_price=50 * 10**9, gas=21_000, to=TO).sign(KEY, 43114)
    computed = RECOVERED_SENDERS.computed
    assert tx.sender() == address_of(KEY)
    assert legacy.sender(43114) == address_of(KEY)
    assert RECOVERED_SENDERS.computed == computed
    # The chain rules still apply to a known transaction.
    with pytest.raises(InvalidBlock, match="chain"):
        tx.sender(1)
    with pytest.raises(InvalidBlock, match="chain"):
        legacy.sender(1)


def test_a_twin_of_a_signed_transaction_is_recovered_afresh() -> None:
    tx = _tx(8)
    high_s = attrs.evolve(tx, s=SECP256K1_N - tx.s)
    with pytest.raises(InvalidBlock, match="not low"):
        high_s.sender()
    assert _not_recovered_as_key(attrs.evolve(tx, y_parity=1 - tx.y_parity))
    assert _not_recovered_as_key(attrs.evolve(tx, nonce=9))


def _not_recovered_as_key(tx: DynamicFeeTx) -> bool:
    """Whether ``tx`` recovers to no sender or another one than KEY's address."""
    try:
        return tx.sender() != address_of(KEY)
    except InvalidBlock:
        return True


@pytest.mark.parametrize("flavour", [AVALANCHE, ETHEREUM])
def test_a_built_blocks_body_bytes_are_the_flavours_encoding(flavour: Flavour) -> None:
    """The body build_block splices from the transactions' known encodings (legacy and
    typed, with extData or withdrawals) is byte for byte the flavour's encoding of it."""
    vm = new_vm(MemoryStore(), flavour=flavour)
    vm.add_transactions(transaction_pool(seed=3, chain_id=43114).transactions[:12])
    if flavour is AVALANCHE:
        vm.add_ext_data(b"atomic" * 30)
    else:
        vm.add_withdrawals([Withdrawal(index=0, validator_index=1, address=TO, amount=5)])
    block = vm.build_block()
    kinds = {type(tx) for tx in block.transactions}
    assert LegacyTx in kinds and len(kinds) > 1
    assert block.body_rlp() == flavour.encode_body(block.body)
    assert bytes(block) == flavour.encode_block(Block(block.header, block.body))
    block.verify()


def _fresh_encoding(tx: Any) -> bytes:
    items = encode_item(tx.to_items())
    return items if type(tx) is LegacyTx else bytes((tx.TYPE,)) + items


def test_what_signing_keeps_is_what_encoding_and_recovery_give() -> None:
    """For every kind of transaction (and legacy protected and not), the encoding and the
    sender kept at signing equal a fresh encoding and a recovery from the signature."""
    txs = list(transaction_pool(seed=4, chain_id=43114).transactions[:40])
    txs.append(LegacyTx(nonce=1, gas_price=5, gas=21_000, to=TO, data=b"\x01").sign(KEY))
    assert len({type(tx) for tx in txs}) >= 3
    for tx in txs:
        assert tx.encode() == _fresh_encoding(tx)
        own = tx.chain_id
        parity = tx.y_parity
        digest = tx.signing_hash(own) if type(tx) is LegacyTx else tx.signing_hash()
        assert tx.sender() == recover_address(digest, parity, tx.r, tx.s)


def test_an_equal_copy_of_a_signed_transaction_is_recovered_afresh() -> None:
    """What signing keeps belongs to the very object signed: an equal copy is encoded and
    recovered as any other transaction (and gives the same answers)."""
    tx = _tx(11)
    copy = attrs.evolve(tx)
    assert copy == tx and copy is not tx
    lookups = RECOVERED_SENDERS.lookups
    assert copy.sender() == address_of(KEY)
    assert RECOVERED_SENDERS.lookups == lookups + 1
    assert copy.encode() == tx.encode()
