"""The execution model of :class:`~vmstack.cchain.vm.CChainVM`: what a block's transactions
cost and which receipts they produce.

The VM does not run EVM code: :func:`execute_transactions` derives each transaction's
receipt deterministically from the transaction alone (intrinsic gas plus a modelled
execution cost, a failed status when the gas limit does not cover it, one log per
successful contract call), which gives receipts of realistic shape and cost to restore.
Everything here is a pure function of its arguments: building, verifying and settling a
block all execute it through :func:`execute_transactions`, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from vmstack.cchain.types import Log, Receipt, Transaction, logs_bloom

__all__ = ["TX_BASE_GAS", "execute_transactions", "intrinsic_gas"]

#: The intrinsic gas of the cheapest transaction (a plain transfer). With the block's gas
#: limit it bounds how many transactions a valid block carries, and so how many senders
#: ``verify`` may have to recover: ``gas_limit // TX_BASE_GAS``.
TX_BASE_GAS: Final = 21_000


def intrinsic_gas(tx: Transaction) -> int:
    """The gas a transaction pays before execution (Istanbul / Berlin rules): 21,000, plus
    32,000 for a contract creation, 4 per zero and 16 per non-zero data byte, and 2,400 per
    access-list address and 1,900 per storage key."""
    data = tx.data
    zeros = data.count(0)
    gas = TX_BASE_GAS + 4 * zeros + 16 * (len(data) - zeros)
    if tx.to is None:
        gas += 32_000
    for entry in getattr(tx, "access_list", ()):
        gas += 2_400 + 1_900 * len(entry.storage_keys)
    return gas


def _execution_gas(tx: Transaction) -> int:
    """The modelled cost of running a transaction's code: code deposit for a creation, a
    call overhead plus a per-byte cost for a contract call, nothing for a plain transfer."""
    if tx.to is None:
        return 200 * len(tx.data)
    if tx.data:
        return 5_000 + 64 * len(tx.data)
    return 0


def execute_transactions(transactions: Sequence[Transaction]) -> tuple[Receipt, ...]:
    """The receipts of ``transactions`` under the execution model (a pure function).

    A transaction whose gas limit covers its intrinsic and modelled execution gas succeeds
    (status 1) and uses exactly that; one that does not fails (status 0) and uses its whole
    gas limit. A successful call with at least 4 bytes of data emits one log from the called
    contract: its topic is the 4-byte selector (left-padded to 32 bytes), its data the rest of
    the call data. Cumulative gas
    runs over the block, and ``tx_type`` is set so the receipts root can be computed.
    """
    receipts: list[Receipt] = []
    cumulative = 0
    for tx in transactions:
        needed = intrinsic_gas(tx) + _execution_gas(tx)
        logs: tuple[Log, ...] = ()
        if needed <= tx.gas:
            status, used = 1, needed
            if tx.to is not None and len(tx.data) >= 4:
                topic = bytes(28) + tx.data[:4]
                logs = (Log(address=tx.to, topics=(topic,), data=tx.data[4:]),)
        else:
            status, used = 0, tx.gas
        cumulative += used
        receipts.append(
            Receipt(
                status=status,
                cumulative_gas_used=cumulative,
                logs=logs,
                tx_type=tx.TYPE,
                bloom=logs_bloom(logs),
            )
        )
    return tuple(receipts)
