"""The block rules (vmstack.cchain.rules), as ``CChainVM.verify`` applies them: gas, chain
ID, signature ranges, body sizes and the receipts the block's own execution produces; each
broken rule is ``InvalidBlock`` with a reason, and generated chains still verify."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from tests.cchain.chains import START, build_chain, new_vm
from tests.support.transactions import signed_transfer
from vmstack.cchain import (
    ETHEREUM,
    AccessListTx,
    Block,
    CChainBlock,
    CChainVM,
    DynamicFeeTx,
    LegacyTx,
    Transaction,
    Withdrawal,
    execute_transactions,
)
from vmstack.cchain.crypto import SECP256K1_HALF_N, SECP256K1_N
from vmstack.cchain.execution import intrinsic_gas
from vmstack.cchain.genesis import DEV_KEYS, GAS_LIMIT
from vmstack.cchain.rules import MAX_UNCLES, MAX_WITHDRAWALS, check_transaction_rules
from vmstack.cchain.tries import derive_root, receipts_root, uncles_hash, withdrawals_root
from vmstack.cchain.types import logs_bloom
from vmstack.errors import InvalidBlock
from vmstack.store import MemoryStore

KEY = DEV_KEYS[0]
CHAIN_ID = 43114
TO = b"\x33" * 20


def _legacy(
    nonce: int, *, chain_id: int | None = CHAIN_ID, gas: int = 21_000, data: bytes = b""
) -> LegacyTx:
    tx = LegacyTx(nonce=nonce, gas_price=25 * 10**9, gas=gas, to=TO, data=data)
    return tx.sign(KEY, chain_id)


def _dynamic(
    nonce: int, *, chain_id: int = CHAIN_ID, gas: int = 21_000, data: bytes = b""
) -> DynamicFeeTx:
    return signed_transfer(
        nonce, key=KEY, to=TO, gas=gas, data=data, chain_id=chain_id, max_priority_fee_per_gas=1
    )


def _item_encoding(tx: Transaction) -> bytes:
    return tx.encode()


def _block_over(
    vm: CChainVM,
    txs: Sequence[Transaction],
    *,
    withdrawals: Sequence[Withdrawal] | None = None,
    uncles: int = 0,
    **changes: Any,
) -> bytes:
    """A block on the last accepted block carrying ``txs`` whose header commits to them
    and to their modelled receipts, then has ``changes`` applied: every rule but the ones
    ``txs`` or ``changes`` break holds."""
    template = vm.build_block()
    receipts = execute_transactions(txs)
    bloom = 0
    for receipt in receipts:
        if receipt.logs:
            bloom |= int.from_bytes(logs_bloom(receipt.logs), "big")
    fields: dict[str, Any] = {
        "tx_root": derive_root(_item_encoding(tx) for tx in txs),
        "receipt_root": receipts_root(receipts),
        "gas_used": receipts[-1].cumulative_gas_used if receipts else 0,
        "bloom": bloom.to_bytes(256, "big"),
    }
    with contextlib.suppress(ValueError):  # a block a state rule refuses keeps the parent's
        fields["state_root"] = vm.state_root_after(template.parent_id, txs, withdrawals or ())
    if withdrawals is not None:
        fields["withdrawals_hash"] = withdrawals_root(withdrawals)
    uncle_headers = [template.header] * uncles
    if uncles:
        fields["uncle_hash"] = uncles_hash(uncle_headers)
    header = attrs.evolve(template.header, **{**fields, **changes})
    body = vm.flavour.body(list(txs), uncle_headers, withdrawals=withdrawals or ())
    return vm.flavour.encode_block(Block(header, body))


def _refused(vm: CChainVM, data: bytes, reason: str) -> InvalidBlock:
    block = vm.parse_block(data)
    with pytest.raises(InvalidBlock) as caught:
        block.verify()
    assert reason in caught.value.reason
    assert vm.processing() == ()
    return caught.value


def test_a_consistent_block_of_crafted_transactions_verifies() -> None:
    """The helper's block (legacy EIP-155, unprotected and typed transactions) is valid, so
    each refusal below comes from the rule it breaks."""
    vm = new_vm(MemoryStore())
    txs: list[Transaction] = [
        _legacy(0),
        _legacy(1, chain_id=None),
        _dynamic(2),
        _dynamic(3, gas=100_000, data=b"\xa9\x05\x9c\xbb" + bytes(64)),
    ]
    block = vm.parse_block(_block_over(vm, txs))
    block.verify()
    block.accept()
    assert vm.last_accepted() == block.id


def test_intrinsic_gas_beyond_the_gas_limit_is_invalid() -> None:
    """Two calls whose data alone needs more gas than the block's limit are refused."""
    vm = new_vm(MemoryStore())
    data = b"\x01" * 500_000  # 16 gas a byte: 8 M gas each
    txs = [_dynamic(n, gas=8_100_000, data=data) for n in range(2)]
    assert sum(intrinsic_gas(tx) for tx in txs) > GAS_LIMIT
    # The header claims gas within the limit, so the intrinsic gas rule is what refuses it.
    _refused(vm, _block_over(vm, txs, gas_used=GAS_LIMIT), "exceeds the block gas limit")


def test_a_gas_limit_below_the_intrinsic_gas_is_invalid() -> None:
    """A transaction that cannot pay its own intrinsic gas makes the block invalid."""
    vm = new_vm(MemoryStore())
    _refused(
        vm,
        _block_over(vm, [_dynamic(0, gas=21_500, data=b"\x01" * 100)]),
        "below its intrinsic gas",
    )


def test_a_transaction_gas_limit_above_the_block_gas_limit_is_invalid() -> None:
    """No transaction may ask for more gas than the whole block has."""
    vm = new_vm(MemoryStore())
    _refused(vm, _block_over(vm, [_dynamic(0, gas=GAS_LIMIT + 1)]), "exceeds the block's")


@pytest.mark.parametrize(
    "make",
    [
        lambda: _legacy(0, chain_id=1),
        lambda: _dynamic(0, chain_id=1),
        lambda: AccessListTx(chain_id=CHAIN_ID + 1, nonce=0, gas_price=1, gas=21_000, to=TO).sign(
            KEY
        ),
    ],
    ids=["legacy-eip155", "dynamic-fee", "access-list"],
)
def test_a_transaction_signed_for_another_chain_is_invalid(make: Any) -> None:
    """EIP-155 legacy and typed transactions of another chain are refused."""
    vm = new_vm(MemoryStore())
    _refused(vm, _block_over(vm, [_legacy(0), make()]), "is signed for chain")


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"v": 2**200}, "is signed for chain"),
        ({"v": 30}, "neither 27/28 nor EIP-155"),
        ({"v": 0}, "neither 27/28 nor EIP-155"),
        ({"r": 0}, "r is out of range"),
        ({"r": SECP256K1_N}, "r is out of range"),
        ({"s": 0}, "s is out of range"),
        ({"s": SECP256K1_HALF_N + 1}, "s is out of range"),
        ({"s": SECP256K1_N + 5}, "s is out of range"),
    ],
)
def test_legacy_signature_values_out_of_range_are_invalid(
    changes: dict[str, Any], reason: str
) -> None:
    """A legacy v far out of range, r or s zero or at least the order, and a high s."""
    vm = new_vm(MemoryStore())
    bad = attrs.evolve(_legacy(1), **changes)
    _refused(vm, _block_over(vm, [_legacy(0), bad]), reason)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"y_parity": 2}, "y parity"),
        ({"y_parity": 2**255}, "y parity"),
        ({"r": 0}, "r is out of range"),
        ({"s": SECP256K1_N - 1}, "s is out of range"),
    ],
)
def test_typed_signature_values_out_of_range_are_invalid(
    changes: dict[str, Any], reason: str
) -> None:
    """A typed transaction's y parity must be 0 or 1, its r and s in range with a low s."""
    vm = new_vm(MemoryStore())
    bad = attrs.evolve(_dynamic(1), **changes)
    _refused(vm, _block_over(vm, [_dynamic(0), bad]), reason)


def test_a_bad_signature_is_found_before_any_sender_is_recovered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The range checks of every transaction run before the first recovery: a block whose
    last transaction has a zero s costs no recovery at all."""
    import vmstack.cchain.types.transactions as types

    vm = new_vm(MemoryStore())
    txs: list[Transaction] = [_dynamic(n) for n in range(20)]
    txs.append(attrs.evolve(_dynamic(20), s=0))
    data = _block_over(vm, txs)
    calls = 0
    original = types.recover_address  # type: ignore[attr-defined]

    def counting(*args: Any, **kwargs: Any) -> bytes:
        nonlocal calls
        calls += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(types, "recover_address", counting)
    _refused(vm, data, "s is out of range")
    assert calls == 0


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("receipt_root", b"\x11" * 32, "receipts root"),
        ("gas_used", 21_001, "gas used"),
        ("bloom", b"\xff" * 256, "logs bloom"),
    ],
)
def test_receipt_commitments_must_match_the_execution(field: str, value: Any, reason: str) -> None:
    """Receipts root, gas used and bloom are those the block's own execution produces."""
    vm = new_vm(MemoryStore())
    txs = [_dynamic(0), _dynamic(1, gas=100_000, data=b"\xa9\x05\x9c\xbb" + bytes(64))]
    _refused(vm, _block_over(vm, txs, **{field: value}), reason)


def test_a_block_must_carry_the_chains_gas_limit() -> None:
    """The gas limit is the chain's fixed one; a larger one would let a block carry more
    transactions than the chain allows."""
    vm = new_vm(MemoryStore())
    _refused(vm, _block_over(vm, [_dynamic(0)], gas_limit=GAS_LIMIT * 100), "gas limit")


def test_a_replaying_vm_takes_receipt_commitments_as_given_but_keeps_the_other_rules() -> None:
    """replay=True: a receipts root the model cannot reproduce verifies, a transaction of
    another chain still does not."""
    vm = new_vm(MemoryStore(), replay=True)
    ok = vm.parse_block(
        _block_over(vm, [_dynamic(0)], receipt_root=b"\x11" * 32, gas_limit=8_000_000)
    )
    ok.verify()
    ok.accept()
    _refused(vm, _block_over(vm, [_dynamic(1, chain_id=1)]), "is signed for chain")


def test_more_withdrawals_than_allowed_are_invalid() -> None:
    """An Ethereum block carries at most MAX_WITHDRAWALS withdrawals, counted before the
    body is decoded."""
    vm = new_vm(MemoryStore(), flavour=ETHEREUM)
    many = [
        Withdrawal(index=i, validator_index=i, address=TO, amount=1)
        for i in range(MAX_WITHDRAWALS + 1)
    ]
    _refused(vm, _block_over(vm, [], withdrawals=many), "withdrawals")
    fine = vm.parse_block(_block_over(vm, [], withdrawals=many[:MAX_WITHDRAWALS]))
    fine.verify()


def test_uncles_are_bounded_and_absent_on_avalanche() -> None:
    """An Ethereum block carries at most MAX_UNCLES uncles; a C-chain block none."""
    eth = new_vm(MemoryStore(), flavour=ETHEREUM)
    _refused(
        eth,
        _block_over(eth, [], withdrawals=[], uncles=MAX_UNCLES + 1),
        f"more than {MAX_UNCLES} uncles",
    )
    avalanche = new_vm(MemoryStore())
    _refused(avalanche, _block_over(avalanche, [], uncles=1), "no uncles")


def test_more_transactions_than_the_gas_limit_pays_for_are_refused_unread() -> None:
    """gas_limit // 21000 transactions at most, counted from the framing alone."""
    vm = new_vm(MemoryStore())
    txs = [_dynamic(n) for n in range(GAS_LIMIT // 21_000 + 1)]
    _refused(vm, _block_over(vm, txs, gas_used=0), "more than 714 transactions")


def test_check_transaction_rules_accepts_unprotected_legacy_transactions() -> None:
    """Consensus still accepts a legacy transaction without a chain ID (v = 27/28)."""
    check_transaction_rules([_legacy(0, chain_id=None)], chain_id=CHAIN_ID, gas_limit=GAS_LIMIT)


@pytest.mark.parametrize("txs", [0, 4, 12])
def test_generated_chains_verify_on_another_node(txs: int) -> None:
    """generate_chain's blocks verify and accept on a second VM that sees only their bytes."""
    builder = new_vm(MemoryStore())
    ids = build_chain(builder, 4, txs=txs)
    follower = new_vm(MemoryStore(), clock=builder.clock)  # type: ignore[arg-type]
    for block_id in ids:
        block: CChainBlock = follower.parse_block(bytes(builder.get_block(block_id)))
        block.verify()
        block.accept()
    assert follower.last_accepted() == ids[-1]
    assert follower.get_block(ids[-1]).timestamp >= START
