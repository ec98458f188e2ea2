"""The mempool of :class:`~vmstack.cchain.vm.CChainVM`: what its built blocks carry, and what
it remembers of the transactions it has seen lately.

:class:`Mempool` keeps signed transactions in one queue per sender, by nonce, deduplicated
by hash. :meth:`Mempool.add_transactions` refuses at once, with
:class:`~vmstack.errors.InvalidTransaction`, what no block could carry now (a bad or missing
signature, another chain, gas below intrinsic or above a block's, a fee cap below the base
fee, a tip cap above the fee cap, a nonce at 2^64 - 1 or below the sender's, a balance
below what the transaction may cost, a duplicate), so one bad transaction never poisons a
builder. A built block takes, against its parent's state, every executable transaction
that fits the gas limit, in nonce order per sender, the senders in the order their next
transaction arrived; building removes nothing: the transactions stay until an accepted
block (built here or by a peer) includes them or makes them stale (a nonce below the
sender's).

Pending and queued (go-ethereum's split). A sender's transactions whose nonces run on
without a gap from its nonce in the state the pool last read for it (the preferred
block's) are *pending* (executable); the rest, behind a gap, are *queued*. Each part has
bounds of its own: at most :data:`MAX_PER_SENDER` pending per sender and
:data:`MAX_PENDING` in all; at most :data:`MAX_QUEUED_PER_SENDER` queued per sender and
:data:`MAX_QUEUED` in all. And every sender's pooled transactions together (pending and
queued) cost at most its balance (``value + gas * fee cap`` each), so an account funded for
one transfer holds one transaction here, whatever its nonces.

Eviction rule. A queued transaction never evicts a pending one. Over the queued bound, a new
queued transaction takes the place of the highest-nonce queued transaction of the sender
with the most queued (its own sender's, for the per-sender bound, if its nonce is lower),
when that sender holds more queued than the newcomer's would after it; otherwise it is
refused ("the pool is full"). Over the pending bound, a new pending transaction takes the
place of the highest-nonce pending transaction of the sender with the most pending, when
that sender holds more pending than the newcomer's sender would after it; otherwise it is
refused. So a sender with few pending transactions is never evicted by one with as many:
to evict an honest sender's only pending transaction an attacker would need a sender with
no pending transaction at all to take its place, which eviction never makes room for. What
a flood costs is in docs/chain-rules.md.

Replacement. A transaction with the sender and nonce of a pooled one replaces it only when
its fee cap and (for the fee-market types) its tip cap are both at least
:data:`REPLACEMENT_BUMP_PERCENT` higher (go-ethereum's price bump), and its sender can
still pay for all it has pooled; otherwise it is refused ("underpriced replacement").

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
from vmstack.keccak import keccak256

__all__ = [
    "MAX_PENDING",
    "MAX_PER_SENDER",
    "MAX_QUEUED",
    "MAX_QUEUED_PER_SENDER",
    "Mempool",
    "REPLACEMENT_BUMP_PERCENT",
]

_TRANSACTION_TYPES = (LegacyTx, AccessListTx, DynamicFeeTx, BlobTx, SetCodeTx)
_MEMO_SIZE = 4096
#: The most pending (executable) transactions of one sender.
MAX_PER_SENDER: Final = 256
#: The most pending transactions in all.
MAX_PENDING: Final = 8192
#: The most queued (nonce-gapped) transactions of one sender.
MAX_QUEUED_PER_SENDER: Final = 64
#: The most queued transactions in all.
MAX_QUEUED: Final = 1024
#: How much higher (percent) a replacement's fee and tip caps must be.
REPLACEMENT_BUMP_PERCENT: Final = 10

#: Reads an account of the state a mempool checks against.
AccountReader = Callable[[bytes], Account]
#: One pooled transaction: arrival number, transaction, hash, cost.
_Entry = tuple[int, Transaction, bytes, int]


def _tip(tx: Transaction) -> int:
    return int(getattr(tx, "max_priority_fee_per_gas", max_price(tx)))


class Mempool:
    """Pooled transactions (pending and queued), extData (only when ``avalanche``) or
    withdrawals (only when not) for the blocks of a VM of chain ``chain_id`` whose blocks
    have ``gas_limit`` and ``base_fee``; and the memos of recent encodings and recovered
    senders. Safe to use from several threads.
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
        max_queued_per_sender: int = MAX_QUEUED_PER_SENDER,
        max_queued: int = MAX_QUEUED,
    ) -> None:
        self._chain_id = chain_id
        self._gas_limit = gas_limit
        self._avalanche = avalanche
        self._base_fee = base_fee
        self._max_per_sender = max_per_sender
        self._max_pending = max_pending
        self._max_queued_per_sender = max_queued_per_sender
        self._max_queued = max_queued
        self._lock = threading.Lock()
        # Per sender: nonce -> (arrival number, transaction, hash, cost).
        self._queues: dict[bytes, dict[int, _Entry]] = {}
        self._hashes: dict[bytes, bytes] = {}
        # Per sender: its nonce in the state last read, its pooled cost, its pending count.
        self._base: dict[bytes, int] = {}
        self._cost: dict[bytes, int] = {}
        self._pending_of: dict[bytes, int] = {}
        self._pending_total = 0
        self._arrivals = 0
        self._ext_data: deque[bytes] = deque()
        self._withdrawals: deque[tuple[Withdrawal, ...]] = deque()
        self._encodings: OrderedDict[Transaction, bytes] = OrderedDict()
        self._recovered: OrderedDict[bytes, bytes] = OrderedDict()

    # --- the split -------------------------------------------------------------------------

    def _classify(self, sender: bytes) -> None:
        """Recount ``sender``'s pending transactions: the run of nonces from its base."""
        queue = self._queues.get(sender)
        before = self._pending_of.pop(sender, 0)
        count = 0
        if queue:
            nonce = self._base.get(sender, 0)
            while nonce + count in queue:
                count += 1
            self._pending_of[sender] = count
        self._pending_total += count - before

    def _queued_of(self, sender: bytes) -> int:
        return len(self._queues.get(sender, ())) - self._pending_of.get(sender, 0)

    def _queued_total(self) -> int:
        return len(self._hashes) - self._pending_total

    def _rebase(self, sender: bytes, nonce: int) -> None:
        """Take ``nonce`` as ``sender``'s state nonce: drop what it makes stale, recount."""
        queue = self._queues.get(sender)
        if queue is None:
            return
        self._base[sender] = nonce
        for stale in [n for n in queue if n < nonce]:
            self._remove(sender, stale)
        if sender in self._queues:
            self._classify(sender)

    def _forget(self, sender: bytes) -> None:
        self._queues.pop(sender, None)
        self._base.pop(sender, None)
        self._cost.pop(sender, None)
        self._pending_total -= self._pending_of.pop(sender, 0)

    # --- adding ----------------------------------------------------------------------------

    def _check(
        self, tx: object, account_of: AccountReader, seen: set[bytes]
    ) -> tuple[bytes, bytes, Transaction, Account]:
        """``(sender, hash, tx, account)`` of a transaction a block could carry now, or
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
        cost = tx.value + tx.gas * cap
        if account.balance < cost:
            raise InvalidTransaction(
                f"transaction from 0x{sender.hex()} (nonce {tx.nonce}) "
                f"costs up to {cost} wei, the sender's balance is "
                f"{account.balance}"
            )
        return sender, tx_hash, tx, account

    def add_transactions(
        self, transactions: Iterable[Transaction], account_of: AccountReader
    ) -> None:
        """Pool signed transactions, checked against the state ``account_of`` reads (the
        preferred block's), each as pending or queued under the bounds, the cost bound and
        the replacement rule of the module docstring. The first one refused raises
        ``InvalidTransaction`` and then none is pooled: the checks and bounds are tried on
        the whole batch first."""
        with self._lock:
            checked: list[tuple[bytes, bytes, Transaction, Account]] = []
            seen: set[bytes] = set()
            for tx in transactions:
                entry = self._check(tx, account_of, seen)
                seen.add(entry[1])
                checked.append(entry)
            slots = [(sender, tx.nonce) for sender, _, tx, _ in checked]
            if len(slots) != len(set(slots)):
                raise InvalidTransaction("two submitted transactions of one sender share a nonce")
            if len(checked) == 1:
                self._insert(*checked[0])
                return
            # All or nothing: try the batch on a copy of the books, then keep it.
            saved = self._save()
            try:
                for entry in checked:
                    self._insert(*entry)
            except InvalidTransaction:
                self._restore(saved)
                raise

    def _save(self) -> tuple[object, ...]:
        return (
            {sender: dict(queue) for sender, queue in self._queues.items()},
            dict(self._hashes),
            dict(self._base),
            dict(self._cost),
            dict(self._pending_of),
            self._pending_total,
            self._arrivals,
        )

    def _restore(self, saved: tuple[object, ...]) -> None:
        (
            self._queues,
            self._hashes,
            self._base,
            self._cost,
            self._pending_of,
            self._pending_total,
            self._arrivals,
        ) = saved  # type: ignore[assignment]

    def _insert(self, sender: bytes, tx_hash: bytes, tx: Transaction, account: Account) -> None:
        if self._base.get(sender) != account.nonce:
            self._rebase(sender, account.nonce)
        queue = self._queues.get(sender, {})
        cost = tx.value + tx.gas * max_price(tx)
        pooled = self._cost.get(sender, 0)
        old = queue.get(tx.nonce)
        if old is not None:
            self._check_replacement(sender, old[1], tx)
            pooled -= old[3]
        if pooled + cost > account.balance:
            raise InvalidTransaction(
                f"transaction from 0x{sender.hex()} (nonce {tx.nonce}): with the "
                f"{len(queue)} it has pooled it would cost up to {pooled + cost} wei, the "
                f"sender's balance is {account.balance}"
            )
        if old is None:
            pending = self._pending_of.get(sender, 0)
            if tx.nonce == account.nonce + pending:
                self._make_room_pending(sender, pending)
            else:
                self._make_room_queued(sender, tx.nonce)
        else:
            self._remove(sender, tx.nonce)
        queue = self._queues.setdefault(sender, {})
        self._base[sender] = account.nonce
        self._arrivals += 1
        queue[tx.nonce] = (self._arrivals, tx, tx_hash, cost)
        self._hashes[tx_hash] = sender
        self._cost[sender] = self._cost.get(sender, 0) + cost
        self._classify(sender)

    def _check_replacement(self, sender: bytes, old: Transaction, new: Transaction) -> None:
        bump = 100 + REPLACEMENT_BUMP_PERCENT
        if max_price(new) * 100 < max_price(old) * bump or _tip(new) * 100 < _tip(old) * bump:
            raise InvalidTransaction(
                f"underpriced replacement: a transaction from 0x{sender.hex()} with nonce "
                f"{new.nonce} is pooled; a replacement pays at least "
                f"{REPLACEMENT_BUMP_PERCENT}% more (fee cap and tip cap)"
            )

    def _make_room_pending(self, sender: bytes, pending: int) -> None:
        """Room for one more pending transaction of ``sender`` (which has ``pending``)."""
        if pending >= self._max_per_sender:
            raise InvalidTransaction(
                f"0x{sender.hex()} has {pending} pending transactions, the most one sender may have"
            )
        if self._pending_total < self._max_pending:
            return
        victim = max(self._pending_of, key=lambda s: self._pending_of[s])
        if self._pending_of[victim] <= pending + 1:
            raise InvalidTransaction(
                "the pool is full: every pending transaction belongs to a sender with no "
                "more pending than this one's would have"
            )
        self._remove(victim, self._base[victim] + self._pending_of[victim] - 1)

    def _make_room_queued(self, sender: bytes, nonce: int) -> None:
        """Room for one more queued transaction of ``sender`` at ``nonce``; pending
        transactions are never touched."""
        queued = self._queued_of(sender)
        if queued >= self._max_queued_per_sender:
            highest = max(self._queues[sender])
            if nonce >= highest:
                raise InvalidTransaction(
                    f"0x{sender.hex()} has {queued} queued transactions, the most one sender "
                    "may have, all nearer executable"
                )
            self._remove(sender, highest)
            return
        if self._queued_total() < self._max_queued:
            return
        victim = max(
            (s for s in self._queues if self._queued_of(s) > 0), key=lambda s: self._queued_of(s)
        )
        if self._queued_of(victim) <= queued + 1:
            raise InvalidTransaction(
                "the pool is full: every queued transaction belongs to a sender with no more "
                "queued than this one's would have"
            )
        self._remove(victim, max(self._queues[victim]))

    def _remove(self, sender: bytes, nonce: int) -> None:
        """Take one pooled transaction out (its sender recounted)."""
        queue = self._queues[sender]
        _, _, tx_hash, cost = queue.pop(nonce)
        self._hashes.pop(tx_hash, None)
        self._cost[sender] = self._cost.get(sender, 0) - cost
        if queue:
            self._classify(sender)
        else:
            self._forget(sender)

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

    def count(self) -> int:
        """How many transactions are pooled (pending and queued)."""
        return len(self._hashes)

    def pending(self) -> list[Transaction]:
        """The pending (executable) transactions, in nonce order per sender, the senders in
        the order their first pending transaction arrived; nothing is removed."""
        with self._lock:
            return self._part(pending=True)

    def queued(self) -> list[Transaction]:
        """The queued (nonce-gapped) transactions, in nonce order per sender; nothing is
        removed."""
        with self._lock:
            return self._part(pending=False)

    def _part(self, *, pending: bool) -> list[Transaction]:
        runs: list[tuple[int, list[Transaction]]] = []
        for sender, queue in self._queues.items():
            base, count = self._base.get(sender, 0), self._pending_of.get(sender, 0)
            nonces = sorted(n for n in queue if (base <= n < base + count) == pending)
            if nonces:
                runs.append((queue[nonces[0]][0], [queue[n][1] for n in nonces]))
        runs.sort(key=lambda run: run[0])
        return [tx for _, run in runs for tx in run]

    def next_nonce(self, sender: bytes, state_nonce: int) -> int:
        """The nonce a new transaction of ``sender`` takes: past ``state_nonce`` (the
        sender's in the state) and every pooled one that follows on from it."""
        with self._lock:
            queue = self._queues.get(sender, {})
            nonce = state_nonce
            while nonce in queue:
                nonce += 1
            return nonce

    def take_transactions(self) -> list[Transaction]:
        """Remove every pooled transaction and return them, in arrival order."""
        with self._lock:
            waiting = sorted(
                (entry for queue in self._queues.values() for entry in queue.values()),
                key=lambda entry: entry[0],
            )
            self._queues.clear()
            self._hashes.clear()
            self._base.clear()
            self._cost.clear()
            self._pending_of.clear()
            self._pending_total = 0
        return [entry[1] for entry in waiting]

    def executable(self, account_of: AccountReader) -> list[Transaction]:
        """What a block over the state ``account_of`` reads takes: every pooled
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
                    arrival, tx, _, cost = queue[nonce]
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
        are: drop what it included and every pooled transaction of theirs that the new
        nonces (read with ``account_of``) make stale, and recount them."""
        with self._lock:
            for sender in dict.fromkeys(senders):
                if sender in self._queues:
                    self._rebase(sender, account_of(sender).nonce)

    def reset(self, account_of: AccountReader) -> None:
        """Re-read every pooled sender's nonce from a new head's state (``account_of``):
        what that chain holds leaves, and pending and queued are recounted from it."""
        with self._lock:
            for sender in list(self._queues):
                self._rebase(sender, account_of(sender).nonce)

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
