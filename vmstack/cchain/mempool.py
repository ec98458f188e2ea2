"""The mempool of :class:`~vmstack.cchain.vm.CChainVM`: what its built blocks carry, and what
it remembers of the transactions it has seen lately.

:class:`Mempool` keeps signed transactions in one queue per sender, by nonce, deduplicated
by hash. :meth:`Mempool.add_transactions` refuses at once, with
:class:`~vmstack.errors.InvalidTransaction`, what no block could carry now (a bad or missing
signature, another chain, gas below intrinsic or above a block's, a nonce below the
sender's, a balance below what the transaction may cost, a duplicate, a second transaction
for a pending nonce), so one bad transaction never poisons a builder; a nonce above the
sender's waits for the ones before it. A built block takes, against its parent's state,
every executable transaction that fits the gas limit, in nonce order per sender, the
senders in the order their next transaction arrived; building removes nothing: the
transactions stay pending until an accepted block (built here or by a peer) includes them
or makes them stale (a nonce below the sender's), so after a rejected block its
transactions are still there.

Bounds: at most :data:`MAX_PER_SENDER` pending transactions per sender and
:data:`MAX_PENDING` in all. Eviction rule: a transaction over a bound takes the place of
the highest-nonce transaction of the sender with the longest queue (its own sender's, for
the per-sender bound) when its nonce is lower than that one's, which leaves the pool;
otherwise it is refused (``InvalidTransaction``, "the pool is full"). The pool so keeps
the transactions closest to executable.

It also queues Avalanche extData and Ethereum withdrawal lists (a built block takes at most
one; a rejected one gives it back), and remembers each recent transaction's canonical
encoding and the sender recovered for an encoding: a node sees most transactions twice
(mempool, then block), and recovering a sender is the costly part of ``verify``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from vmstack.cchain.crypto import keccak256
from vmstack.cchain.rules import check_transaction_rules
from vmstack.cchain.state import Account, max_price
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
from vmstack.errors import InvalidBlock, InvalidTransaction

__all__ = ["MAX_PENDING", "MAX_PER_SENDER", "Mempool"]

_TRANSACTION_TYPES = (LegacyTx, AccessListTx, DynamicFeeTx, BlobTx, SetCodeTx)
_MEMO_SIZE = 4096
#: The most pending transactions of one sender.
MAX_PER_SENDER: Final = 256
#: The most pending transactions in all.
MAX_PENDING: Final = 8192

#: Reads an account of the state a mempool checks against.
AccountReader = Callable[[bytes], Account]


class Mempool:
    """Pending transactions, extData (only when ``avalanche``) or withdrawals (only when
    not) for the blocks of a VM of chain ``chain_id`` whose blocks have ``gas_limit``; and
    the memos of recent encodings and recovered senders. Safe to use from several threads.
    """

    def __init__(
        self,
        *,
        chain_id: int,
        gas_limit: int,
        avalanche: bool,
        base_fee: int = 0,
        max_per_sender: int = MAX_PER_SENDER,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self._chain_id = chain_id
        self._gas_limit = gas_limit
        self._avalanche = avalanche
        self._base_fee = base_fee
        self._max_per_sender = max_per_sender
        self._max_pending = max_pending
        self._lock = threading.Lock()
        # Per sender: nonce -> (arrival number, transaction, hash).
        self._queues: dict[bytes, dict[int, tuple[int, Transaction, bytes]]] = {}
        self._hashes: dict[bytes, bytes] = {}
        self._arrivals = 0
        self._ext_data: deque[bytes] = deque()
        self._withdrawals: deque[tuple[Withdrawal, ...]] = deque()
        self._encodings: OrderedDict[Transaction, bytes] = OrderedDict()
        self._recovered: OrderedDict[bytes, bytes] = OrderedDict()

    def _check(
        self, tx: object, account_of: AccountReader, seen: set[bytes]
    ) -> tuple[bytes, bytes, Transaction]:
        """``(sender, hash, tx)`` of a transaction a block could carry now, or
        ``InvalidTransaction`` saying why not."""
        if not isinstance(tx, _TRANSACTION_TYPES):
            raise InvalidTransaction(f"not a transaction: {tx!r}")
        encoding = self.encoding(tx)
        tx_hash = keccak256(encoding)
        if tx_hash in self._hashes or tx_hash in seen:
            raise InvalidTransaction(
                f"transaction 0x{tx_hash.hex()} is a duplicate of one already pending"
            )
        try:
            check_transaction_rules([tx], chain_id=self._chain_id, gas_limit=self._gas_limit)
        except InvalidBlock as error:
            raise InvalidTransaction(
                error.reason.replace("transaction 0", "transaction", 1)
            ) from None
        cap = max_price(tx)
        if cap < self._base_fee:
            raise InvalidTransaction(
                f"transaction 0x{tx_hash.hex()}: fee cap {cap} wei/gas is below the base "
                f"fee {self._base_fee}: no block could carry it"
            )
        try:
            sender = self.sender(tx, encoding)
        except InvalidBlock as error:
            raise InvalidTransaction(f"bad signature: {error.reason}") from None
        account = account_of(sender)
        if tx.nonce < account.nonce:
            raise InvalidTransaction(
                f"transaction from 0x{sender.hex()} has nonce "
                f"{tx.nonce}, below the sender's {account.nonce} "
                "(a replay)"
            )
        cost = tx.value + tx.gas * max_price(tx)
        if account.balance < cost:
            raise InvalidTransaction(
                f"transaction from 0x{sender.hex()} (nonce {tx.nonce}) "
                f"costs up to {cost} wei, the sender's balance is "
                f"{account.balance}"
            )
        queue = self._queues.get(sender)
        if queue is not None and tx.nonce in queue:
            raise InvalidTransaction(
                f"a transaction from 0x{sender.hex()} with nonce {tx.nonce} is already pending"
            )
        return sender, tx_hash, tx

    def add_transactions(
        self, transactions: Iterable[Transaction], account_of: AccountReader
    ) -> None:
        """Queue signed transactions, checked against the state ``account_of`` reads (the
        preferred block's). The first one no block could carry now raises
        ``InvalidTransaction`` and then none is queued (see the module docstring)."""
        with self._lock:
            checked: list[tuple[bytes, bytes, Transaction]] = []
            seen: set[bytes] = set()
            for tx in transactions:
                sender, tx_hash, tx = self._check(tx, account_of, seen)
                seen.add(tx_hash)
                checked.append((sender, tx_hash, tx))
            pending = [(sender, tx.nonce) for sender, _, tx in checked]
            if len(pending) != len(set(pending)):
                raise InvalidTransaction("two submitted transactions of one sender share a nonce")
            for sender, tx_hash, tx in checked:
                self._insert(sender, tx_hash, tx)

    def _insert(self, sender: bytes, tx_hash: bytes, tx: Transaction) -> None:
        queue = self._queues.setdefault(sender, {})
        if len(queue) >= self._max_per_sender:
            self._evict_from(sender, tx)
        elif len(self._hashes) >= self._max_pending:
            longest = max(self._queues, key=lambda s: len(self._queues[s]))
            self._evict_from(longest, tx)
        self._arrivals += 1
        queue[tx.nonce] = (self._arrivals, tx, tx_hash)
        self._hashes[tx_hash] = sender

    def _evict_from(self, sender: bytes, incoming: Transaction) -> None:
        queue = self._queues[sender]
        highest = max(queue)
        if incoming.nonce >= highest:
            if not self._queues.get(sender):
                self._queues.pop(sender, None)
            raise InvalidTransaction(
                "the pool is full: the transaction is farther from "
                "executable than every one it could replace"
            )
        self._drop(sender, highest)

    def _drop(self, sender: bytes, nonce: int) -> None:
        queue = self._queues[sender]
        _, _, tx_hash = queue.pop(nonce)
        self._hashes.pop(tx_hash, None)
        if not queue:
            del self._queues[sender]

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
        """How many transactions are pending."""
        return len(self._hashes)

    def next_nonce(self, sender: bytes, state_nonce: int) -> int:
        """The nonce a new transaction of ``sender`` takes: past ``state_nonce`` (the
        sender's in the state) and every pending one that follows on from it."""
        with self._lock:
            queue = self._queues.get(sender, {})
            nonce = state_nonce
            while nonce in queue:
                nonce += 1
            return nonce

    def take_transactions(self) -> list[Transaction]:
        """Remove every pending transaction and return them, in arrival order."""
        with self._lock:
            waiting = sorted(
                (entry for queue in self._queues.values() for entry in queue.values()),
                key=lambda entry: entry[0],
            )
            self._queues.clear()
            self._hashes.clear()
        return [tx for _, tx, _ in waiting]

    def executable(self, account_of: AccountReader) -> list[Transaction]:
        """What a block over the state ``account_of`` reads takes: every pending
        transaction that can run after the ones before it, in nonce order per sender (the
        senders in the order their next transaction arrived), while the block's gas limit
        holds and the sender can pay. Nothing is removed."""
        with self._lock:
            heads: list[tuple[int, bytes, int, int]] = []
            for sender, queue in self._queues.items():
                account = account_of(sender)
                first = queue.get(account.nonce)
                if first is not None:
                    heads.append((first[0], sender, account.nonce, account.balance))
            heads.sort()
            chosen: list[tuple[int, Transaction]] = []
            gas = 0
            for _, sender, nonce, balance in heads:
                queue = self._queues[sender]
                while nonce in queue:
                    arrival, tx, _ = queue[nonce]
                    cost = tx.value + tx.gas * max_price(tx)
                    if gas + tx.gas > self._gas_limit or cost > balance:
                        break
                    chosen.append((arrival, tx))
                    gas += tx.gas
                    balance -= cost
                    nonce += 1
        return [tx for _, tx in chosen]

    def take_extras(self) -> tuple[bytes, tuple[Withdrawal, ...]]:
        """The next extData (``b""`` if none) and withdrawals list (``()`` if none), removed
        from their queues."""
        with self._lock:
            ext_data = self._ext_data.popleft() if self._ext_data else b""
            withdrawals = self._withdrawals.popleft() if self._withdrawals else ()
        return ext_data, withdrawals

    def give_back(self, body: Body) -> None:
        """Return what a rejected built block took of the extras queues, to their front (its
        transactions never left the pool)."""
        with self._lock:
            if body.ext_data:
                self._ext_data.appendleft(body.ext_data)
            if body.withdrawals:
                self._withdrawals.appendleft(body.withdrawals)

    def on_accepted(self, senders: Sequence[bytes], account_of: AccountReader) -> None:
        """After an accepted block (built here or not) whose transactions' ``senders`` these
        are: drop what it included and every pending transaction of theirs that the new
        nonces (read with ``account_of``) make stale."""
        with self._lock:
            for sender in dict.fromkeys(senders):
                queue = self._queues.get(sender)
                if queue is None:
                    continue
                nonce = account_of(sender).nonce
                for stale in [n for n in queue if n < nonce]:
                    self._drop(sender, stale)

    def sender(self, tx: Transaction, encoding: bytes) -> bytes:
        """The sender of ``tx`` (whose encoding is ``encoding``), remembered by encoding;
        ``InvalidBlock`` if it does not recover."""
        recovered = self._recovered
        found = recovered.get(encoding)
        if found is not None:
            recovered.move_to_end(encoding)
            return found
        found = recovered[encoding] = tx.sender()
        if len(recovered) > _MEMO_SIZE:
            recovered.popitem(last=False)
        return found

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

    def check_senders(
        self, transactions: Sequence[Transaction], encodings: Sequence[bytes], where: str
    ) -> list[bytes]:
        """Every transaction's sender, recovered (what executing the block needs first), so
        an accepted block always restores; ``InvalidBlock`` naming ``where`` and the
        transaction otherwise. A sender recovered once is remembered by the transaction's
        encoding."""
        senders: list[bytes] = []
        for index, (encoding, tx) in enumerate(zip(encodings, transactions, strict=True)):
            try:
                senders.append(self.sender(tx, encoding))
            except InvalidBlock as error:
                raise InvalidBlock(f"{where}: transaction {index}: {error.reason}") from None
        return senders
