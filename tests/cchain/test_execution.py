"""The execution model (vmstack.cchain.execution): intrinsic gas, the modelled execution
cost, and the receipts execute_transactions derives from transactions alone."""

from __future__ import annotations

from tests.support.transactions import signed_transfer
from vmstack.cchain import DynamicFeeTx, keccak256
from vmstack.cchain.execution import TX_BASE_GAS, execute_transactions, intrinsic_gas
from vmstack.cchain.types import AccessTuple

KEY = keccak256(b"test sender")
TO = keccak256(b"test recipient")[12:]


def _tx(nonce: int, *, gas: int = 21_000, data: bytes = b"", chain_id: int = 43114) -> DynamicFeeTx:
    return signed_transfer(
        nonce, key=KEY, to=TO, gas=gas, data=data, chain_id=chain_id, max_priority_fee_per_gas=1
    )


def test_execution_model_status_gas_and_logs() -> None:
    """A transaction short of gas fails using all of it; a call emits one log."""
    call = _tx(0, data=b"\xa9\x05\x9c\xbb" + bytes(64), gas=100_000)
    short = _tx(1, data=b"\x01" * 100, gas=21_500)
    transfer = _tx(2)
    receipts = execute_transactions([call, short, transfer])
    assert [r.status for r in receipts] == [1, 0, 1]
    assert len(receipts[0].logs) == 1 and receipts[0].logs[0].address == TO
    used = [receipts[0].cumulative_gas_used]
    used.append(receipts[1].cumulative_gas_used - used[0])
    assert used[1] == short.gas
    assert receipts[2].cumulative_gas_used - receipts[1].cumulative_gas_used == 21_000
    assert intrinsic_gas(transfer) == 21_000
    assert [r.tx_type for r in receipts] == [2, 2, 2]


def test_intrinsic_gas_counts_data_creation_and_access_list() -> None:
    """21,000 base; 4 per zero and 16 per non-zero data byte; 32,000 for a creation; 2,400
    per access-list address and 1,900 per storage key."""
    assert intrinsic_gas(_tx(0)) == TX_BASE_GAS
    assert intrinsic_gas(_tx(0, data=b"\x00\x01\x00")) == TX_BASE_GAS + 4 + 16 + 4
    creation = DynamicFeeTx(chain_id=43114, gas=100_000, to=None, data=b"\x01")
    assert intrinsic_gas(creation) == TX_BASE_GAS + 32_000 + 16
    listed = DynamicFeeTx(
        chain_id=43114,
        gas=100_000,
        to=TO,
        access_list=(AccessTuple(address=TO, storage_keys=(bytes(32), bytes(32))),),
    )
    assert intrinsic_gas(listed) == TX_BASE_GAS + 2_400 + 2 * 1_900


def test_receipts_are_a_pure_function_of_the_transactions() -> None:
    """The same transactions give equal receipts every time; cumulative gas runs over them."""
    txs = [_tx(i, data=b"\xa9\x05\x9c\xbb" * i, gas=60_000) for i in range(4)]
    first, again = execute_transactions(txs), execute_transactions(txs)
    assert first == again
    cumulative = [r.cumulative_gas_used for r in first]
    assert cumulative == sorted(cumulative) and len(set(cumulative)) == 4
    assert execute_transactions([]) == ()
