"""The fee rules a block meets (docs/chain-rules.md): the base fee the chain's fee rule gives,
the Avalanche coinbase the blackhole address, every fee cap at least the base fee and every
tip cap within its fee cap; the mempool refuses what no block could carry; nonces stop at
2^64 - 1 (EIP-2681) and a genesis holds uint256 balances and 64-bit nonces."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from tests.cchain.chains import new_vm
from tests.support.transactions import signed_transfer
from vmstack.cchain import (
    AVALANCHE,
    ETHEREUM,
    CChainVM,
    LegacyTx,
    address_of,
    execute_transactions,
)
from vmstack.cchain.codec import Flavour
from vmstack.cchain.genesis import (
    BASE_FEE,
    BLACKHOLE_ADDRESS,
    DEV_KEYS,
    Genesis,
    GenesisAccount,
    new_header,
)
from vmstack.cchain.rules import base_fee_rule
from vmstack.cchain.types import Transaction
from vmstack.errors import InvalidBlock, InvalidTransaction
from vmstack.store import MemoryStore

KEY = DEV_KEYS[0]
BUILDER = address_of(DEV_KEYS[5])
TO = b"\x42" * 20


def _transfer(nonce: int = 0, *, key: int = KEY, **fees: Any) -> Transaction:
    fees = fees or {"max_fee_per_gas": 2 * BASE_FEE, "max_priority_fee_per_gas": 10**9}
    return signed_transfer(nonce, key=key, to=TO, value=1, **fees)


def _crafted(
    vm: CChainVM,
    txs: Sequence[Transaction],
    *,
    coinbase: bytes = BLACKHOLE_ADDRESS,
    base_fee: int = BASE_FEE,
    flavour: Flavour = AVALANCHE,
) -> bytes:
    """A child of ``vm``'s last accepted block carrying ``txs`` with every commitment right
    (body, receipts, the post-state with ``coinbase`` paid at ``base_fee``): only the fee
    fields are what a hostile builder chose."""
    parent_id = vm.last_accepted()
    parent = vm.get_block(parent_id)
    receipts = execute_transactions(txs)
    header: Any = new_header(
        flavour,
        parent.header,
        parent_hash=parent_id,
        timestamp=parent.timestamp + 2,
        gas_used=receipts[-1].cumulative_gas_used if receipts else 0,
        base_fee=base_fee,
    )
    root = vm.state_root_after(parent_id, txs, coinbase=coinbase, base_fee=base_fee)
    header = attrs.evolve(header, coinbase=coinbase, state_root=root)
    body = (
        flavour.body(transactions=tuple(txs))
        if flavour is AVALANCHE
        else flavour.body(transactions=tuple(txs), withdrawals=())
    )
    return flavour.encode_block(flavour.seal(header, body, receipts))


def _peer(flavour: Flavour = AVALANCHE) -> CChainVM:
    return new_vm(MemoryStore(), flavour=flavour)


def test_a_well_formed_block_with_the_rule_s_fields_verifies() -> None:
    """The control: the crafting is right, so each refusal below is the fee rule's."""
    vm = _peer()
    vm.parse_block(_crafted(vm, [_transfer()])).verify()
    assert base_fee_rule(vm.get_block(vm.last_accepted()).header) == BASE_FEE


def test_an_avalanche_block_paying_its_builder_is_refused() -> None:
    vm = _peer()
    block = vm.parse_block(_crafted(vm, [_transfer()], coinbase=BUILDER))
    with pytest.raises(InvalidBlock, match="not the blackhole address"):
        block.verify()


def test_an_ethereum_block_may_pay_its_coinbase() -> None:
    """The Ethereum flavour credits the whole fee to the coinbase, whoever it is."""
    vm = _peer(ETHEREUM)
    vm.parse_block(_crafted(vm, [_transfer()], coinbase=BUILDER, flavour=ETHEREUM)).verify()


@pytest.mark.parametrize("base_fee", [0, BASE_FEE - 1, 10 * BASE_FEE])
def test_a_base_fee_other_than_the_rule_s_is_refused(base_fee: int) -> None:
    """Base fee 0 (nothing burnt) or above every cap (users pay their whole cap)."""
    vm = _peer()
    block = vm.parse_block(_crafted(vm, [_transfer()], base_fee=base_fee))
    with pytest.raises(InvalidBlock, match="the chain's fee rule gives"):
        block.verify()


def test_a_transaction_whose_fee_cap_is_below_the_base_fee_is_refused_in_a_block() -> None:
    vm = _peer()
    cheap = LegacyTx(nonce=0, gas_price=1, gas=21_000, to=TO).sign(KEY, 43114)
    block = vm.parse_block(_crafted(vm, [cheap]))
    with pytest.raises(InvalidBlock, match="fee cap 1 wei/gas is below the base fee"):
        block.verify()


def test_the_mempool_refuses_what_no_block_could_carry() -> None:
    vm = _peer()
    with pytest.raises(InvalidTransaction, match="below the base fee"):
        vm.add_transactions([LegacyTx(nonce=0, gas_price=1, gas=21_000, to=TO).sign(KEY, 43114)])
    with pytest.raises(InvalidTransaction, match="below the base fee"):
        vm.add_transactions([_transfer(max_fee_per_gas=BASE_FEE - 1, max_priority_fee_per_gas=0)])
    with pytest.raises(InvalidTransaction, match=r"tip cap \d+ is above its fee cap"):
        vm.add_transactions(
            [_transfer(max_fee_per_gas=BASE_FEE, max_priority_fee_per_gas=BASE_FEE + 1)]
        )
    assert vm.pending_transactions() == 0
    # At the base fee it is taken and built.
    vm.add_transactions([LegacyTx(nonce=0, gas_price=BASE_FEE, gas=21_000, to=TO).sign(KEY, 43114)])
    block = vm.build_block()
    block.verify()
    assert len(block.transactions) == 1


def test_a_nonce_of_2_64_minus_1_is_refused_everywhere() -> None:
    """EIP-2681: an account at nonce 2^64 - 1 (a genesis may give it) cannot send."""
    top = 2**64 - 1
    genesis = Genesis({address_of(KEY): GenesisAccount(balance=10**24, nonce=top)})
    vm = new_vm(MemoryStore(), genesis=genesis)
    assert vm.account(address_of(KEY)).nonce == top
    with pytest.raises(InvalidTransaction, match="2\\^64 - 1"):
        vm.add_transactions([_transfer(top)])
    # A block carrying it, every commitment right (the state it states has nonce 2^64).
    block = vm.parse_block(_crafted(vm, [_transfer(top)]))
    with pytest.raises(InvalidBlock, match="2\\^64 - 1"):
        block.verify()


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (GenesisAccount(balance=0), None),
        ({"balance": hex(2**256)}, "balance"),
        ({"balance": "1", "nonce": hex(2**64)}, "nonce"),
    ],
)
def test_a_genesis_holds_uint256_balances_and_64_bit_nonces(entry: Any, field: str | None) -> None:
    if field is None:
        assert Genesis({TO: GenesisAccount(balance=2**256 - 1, nonce=2**64 - 1)}).accounts()
        return
    fields = {key: f"{value}" for key, value in entry.items()}
    text = json.dumps({"alloc": {TO.hex(): fields}})
    with pytest.raises(ValueError, match=f"{field} is an int from 0 to"):
        Genesis.from_json(text)
    with pytest.raises(ValueError, match=f"{field} is an int from 0 to"):
        bad: dict[str, Any] = {field: int(entry[field], 16)}
        Genesis({TO: GenesisAccount(**bad)})
