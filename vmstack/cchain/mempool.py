"""The mempool of :class:`~vmstack.cchain.vm.CChainVM`: what its built blocks carry, and what
it remembers of the transactions it has seen lately.

:class:`Mempool` queues signed transactions (checked as they come: a transaction a valid
block could not carry is refused with ``ValueError``), Avalanche extData and Ethereum
withdrawal lists; a built block takes transactions in order while the block's gas limit
holds, and at most one extData or withdrawals list; a rejected built block gives them back
at the front. It also remembers, as a node's transaction pool does, each recent
transaction's canonical encoding and the sender recovered for an encoding: a node sees most
transactions twice (mempool, then block), and recovering a sender is the costly part of
``verify``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence

from vmstack.cchain.execution import intrinsic_gas
from vmstack.cchain.types import (
    AccessListTx,
    BlobTx,
    Body,
    DynamicFeeTx,
    LegacyTx,
    SetCodeTx,
    Transaction,
    Withdrawal,
)
from vmstack.errors import InvalidBlock

__all__ = ["Mempool"]

_TRANSACTION_TYPES = (LegacyTx, AccessListTx, DynamicFeeTx, BlobTx, SetCodeTx)
_MEMO_SIZE = 4096


class Mempool:
    """Queued transactions, extData (only when ``avalanche``) or withdrawals (only when
    not) for the blocks of a VM of chain ``chain_id`` whose blocks have ``gas_limit``; and
    the memos of recent encodings and recovered senders. Safe to use from several threads.
    """

    def __init__(self, *, chain_id: int, gas_limit: int, avalanche: bool) -> None:
        self._chain_id = chain_id
        self._gas_limit = gas_limit
        self._avalanche = avalanche
        self._lock = threading.Lock()
        self._transactions: deque[Transaction] = deque()
        self._ext_data: deque[bytes] = deque()
        self._withdrawals: deque[tuple[Withdrawal, ...]] = deque()
        self._encodings: OrderedDict[Transaction, bytes] = OrderedDict()
        self._recovered: OrderedDict[bytes, bytes] = OrderedDict()

    def add_transactions(self, transactions: Iterable[Transaction]) -> None:
        """Queue signed transactions (in order). ``ValueError`` for a transaction of another
        chain or whose gas limit exceeds a block's or does not cover its intrinsic gas (a
        block carrying it would be invalid); then none is queued."""
        queued: list[Transaction] = []
        for tx in transactions:
            if not isinstance(tx, _TRANSACTION_TYPES):
                raise ValueError(f"not a transaction: {tx!r}")
            own = tx.chain_id
            if own is not None and own != self._chain_id:
                raise ValueError(f"transaction for chain {own}, this VM is chain "
                                 f"{self._chain_id}")
            if tx.gas > self._gas_limit:
                raise ValueError(f"transaction gas {tx.gas} exceeds the block gas limit "
                                 f"{self._gas_limit}")
            if tx.gas < intrinsic_gas(tx):
                raise ValueError(f"transaction gas {tx.gas} is below its intrinsic gas "
                                 f"{intrinsic_gas(tx)}")
            queued.append(tx)
        with self._lock:
            self._transactions.extend(queued)

    def add_ext_data(self, ext_data: bytes) -> None:
        """Queue extData (Avalanche atomic transactions); each built block takes at most
        one. ``ValueError`` on an Ethereum VM."""
        if not self._avalanche:
            raise ValueError("extData is an Avalanche body field")
        if not isinstance(ext_data, bytes | bytearray):
            raise ValueError("extData must be bytes")
        with self._lock:
            self._ext_data.append(bytes(ext_data))

    def add_withdrawals(self, withdrawals: Iterable[Withdrawal]) -> None:
        """Queue a list of withdrawals (Ethereum); each built block takes at most one list.
        ``ValueError`` on an Avalanche VM."""
        if self._avalanche:
            raise ValueError("withdrawals are an Ethereum body field")
        items = tuple(withdrawals)
        if not all(isinstance(w, Withdrawal) for w in items):
            raise ValueError("withdrawals must be Withdrawal records")
        with self._lock:
            self._withdrawals.append(items)

    def pending(self) -> int:
        """How many transactions wait."""
        return len(self._transactions)

    def take_transactions(self) -> list[Transaction]:
        """Remove every waiting transaction and return them in order."""
        with self._lock:
            waiting = list(self._transactions)
            self._transactions.clear()
        return waiting

    def take_block(self) -> tuple[list[Transaction], bytes, tuple[Withdrawal, ...]]:
        """What the next built block carries, removed from the queues: the waiting
        transactions in order while their gas limits fit in a block's, the next extData
        (``b""`` if none) and the next withdrawals list (``()`` if none)."""
        with self._lock:
            waiting = self._transactions
            txs: list[Transaction] = []
            gas = 0
            while waiting and gas + waiting[0].gas <= self._gas_limit:
                tx = waiting.popleft()
                txs.append(tx)
                gas += tx.gas
            ext_data = self._ext_data.popleft() if self._ext_data else b""
            withdrawals = self._withdrawals.popleft() if self._withdrawals else ()
        return txs, ext_data, withdrawals

    def give_back(self, body: Body) -> None:
        """Return what a rejected built block took, to the front of the queues in order."""
        with self._lock:
            self._transactions.extendleft(reversed(body.transactions))
            if body.ext_data:
                self._ext_data.appendleft(body.ext_data)
            if body.withdrawals:
                self._withdrawals.appendleft(body.withdrawals)

    def encoding(self, tx: Transaction) -> bytes:
        """A transaction's canonical encoding, remembered for the transactions seen lately
        (as a node's transaction pool keeps each transaction's bytes)."""
        memo = self._encodings
        found = memo.get(tx)
        if found is None:
            found = memo[tx] = tx.encode()
            if len(memo) > _MEMO_SIZE:
                memo.popitem(last=False)
        return found

    def check_senders(self, transactions: Sequence[Transaction], encodings: Sequence[bytes],
                      where: str) -> None:
        """Every transaction's sender recovers (what executing the block would need first),
        so an accepted block always restores; ``InvalidBlock`` naming ``where`` and the
        transaction otherwise. A sender recovered once is remembered by the transaction's
        encoding."""
        recovered = self._recovered
        for index, (encoding, tx) in enumerate(zip(encodings, transactions, strict=True)):
            if encoding in recovered:
                recovered.move_to_end(encoding)
                continue
            try:
                recovered[encoding] = tx.sender()
            except InvalidBlock as error:
                raise InvalidBlock(f"{where}: transaction {index}: {error.reason}") from None
            if len(recovered) > _MEMO_SIZE:
                recovered.popitem(last=False)
