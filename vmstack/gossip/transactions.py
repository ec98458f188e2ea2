"""The C-chain's transactions as gossip: their marshaller, a set over a stack's mempool,
coreth's parameters, and one node's transaction gossip put together.

A transaction travels in its typed binary form (:meth:`~vmstack.cchain.types.LegacyTx.encode`:
the RLP list of a legacy transaction, ``type || rlp(fields)`` otherwise) and its gossip ID
is its hash. The set speaks only the mempool's public protocol: ``find_mempool(vm)``, its
``add_transactions``, ``submit_transactions`` for local submissions, and the mempool's
``has(hash)`` when it has one; it remembers what it added so it can answer pulls, and
forgets what an accepted block included (:meth:`TransactionGossip.on_accepted`).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from vmstack.cchain.types import Transaction, decode_transaction
from vmstack.clock import Clock
from vmstack.gossip.messages import TRANSACTION_GOSSIP_HANDLER
from vmstack.gossip.pull import GossipHandler, GossipRouter, PullGossiper, ResponseCallback
from vmstack.gossip.push import BranchingFactor, PushGossiper, SendConfig
from vmstack.gossip.sets import SetWithBloomFilter
from vmstack.interfaces import ChainVM
from vmstack.keccak import keccak256
from vmstack.submission import find_mempool, submit_transactions

__all__ = [
    "CORETH_GOSSIP",
    "GossipConfig",
    "GossipTransaction",
    "MempoolGossipSet",
    "TARGET_MESSAGE_SIZE",
    "TransactionGossip",
    "TransactionMarshaller",
]


@dataclass(frozen=True)
class GossipTransaction:
    """A transaction as gossip: the transaction, its canonical encoding, and its hash (the
    gossip ID), the last two computed once."""

    transaction: Transaction
    encoding: bytes
    gossip_id: bytes

    @classmethod
    def of(cls, transaction: Transaction) -> GossipTransaction:
        """The gossip item of ``transaction``."""
        encoding = transaction.encode()
        return cls(transaction, encoding, keccak256(encoding))


class TransactionMarshaller:
    """Marshals a :class:`GossipTransaction` as its encoding; ``unmarshal`` refuses
    (``ValueError``) bytes that are not a transaction's canonical encoding."""

    def marshal(self, item: GossipTransaction) -> bytes:
        """The transaction's canonical encoding."""
        return item.encoding

    def unmarshal(self, data: bytes) -> GossipTransaction:
        """The transaction ``data`` encodes, when ``data`` is its canonical encoding."""
        transaction = decode_transaction(data)
        item = GossipTransaction.of(transaction)
        if item.encoding != bytes(data):
            raise ValueError("gossiped transaction is not in its canonical encoding")
        return item

    def gossip_id(self, item: GossipTransaction) -> bytes:
        """The transaction hash."""
        return item.gossip_id


class MempoolGossipSet:
    """The transactions a node's mempool took through gossip or local submission, as a
    gossip set: ``add`` queues one in ``find_mempool(vm)`` (its refusal, an
    :class:`~vmstack.errors.InvalidTransaction`, propagates; a transaction already held is
    ``ValueError``), ``has`` and ``iterate`` read what is held, in arrival order. When the
    mempool has a ``has(hash)`` method, a transaction it no longer holds is not held here
    either. Safe to use from several threads."""

    def __init__(self, vm: object) -> None:
        self._vm = vm
        self._held: OrderedDict[bytes, GossipTransaction] = OrderedDict()
        self._lock = threading.Lock()

    def _mempool_has(self) -> Callable[[bytes], bool] | None:
        has = getattr(find_mempool(self._vm), "has", None)
        return has if callable(has) else None

    def add(self, item: GossipTransaction) -> None:
        """Queue ``item`` in the mempool and hold it."""
        with self._lock:
            if item.gossip_id in self._held:
                raise ValueError(f"transaction {item.gossip_id.hex()} is already held")
        find_mempool(self._vm).add_transactions([item.transaction])
        with self._lock:
            self._held[item.gossip_id] = item

    def adopt(self, items: Iterable[GossipTransaction]) -> None:
        """Hold ``items`` the mempool already took (a local submission)."""
        with self._lock:
            for item in items:
                self._held[item.gossip_id] = item

    def forget(self, gossip_ids: Iterable[bytes]) -> int:
        """Hold none of ``gossip_ids`` any longer (an accepted block included them); how
        many were held."""
        with self._lock:
            return sum(self._held.pop(gossip_id, None) is not None for gossip_id in gossip_ids)

    def has(self, gossip_id: bytes) -> bool:
        """Whether the transaction of ``gossip_id`` is held."""
        with self._lock:
            held = gossip_id in self._held
        if not held:
            return False
        mempool_has = self._mempool_has()
        return mempool_has is None or bool(mempool_has(gossip_id))

    def iterate(self) -> Iterator[GossipTransaction]:
        """The held transactions, in arrival order (a snapshot)."""
        with self._lock:
            items = list(self._held.values())
        mempool_has = self._mempool_has()
        if mempool_has is None:
            return iter(items)
        return (item for item in items if mempool_has(item.gossip_id))

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)


#: 20 KiB: the target size of a push message and of a pull response (coreth's).
TARGET_MESSAGE_SIZE: Final = 20 * 1024


@dataclass(frozen=True)
class GossipConfig:
    """The parameters of a node's transaction gossip; the defaults are coreth's: a bloom
    filter for at least 8,192 transactions at 1% false positives, reset past 5% and
    resized for 3 times the pool; pushes to 90% of the stake plus 100 validators,
    regossip to 10 validators at most every 30 s; 16,384 discarded IDs remembered; 20 KiB
    messages; a push cycle every 0.1 s, a pull every 1 s, to one peer."""

    bloom_min_target_elements: int = 8 * 1024
    bloom_target_false_positive: float = 0.01
    bloom_reset_false_positive: float = 0.05
    bloom_churn_multiplier: int = 3
    push_gossip: BranchingFactor = field(
        default_factory=lambda: BranchingFactor(stake_percentage=0.9, validators=100)
    )
    push_regossip: BranchingFactor = field(default_factory=lambda: BranchingFactor(validators=10))
    discarded_size: int = 16_384
    target_message_size: int = TARGET_MESSAGE_SIZE
    push_frequency: float = 0.1
    pull_frequency: float = 1.0
    regossip_frequency: float = 30.0
    poll_size: int = 1


#: coreth's transaction gossip parameters.
CORETH_GOSSIP: Final = GossipConfig()


class TransactionGossip:
    """One node's transaction gossip over the stack ``vm``: a :class:`MempoolGossipSet`
    with a salted bloom filter, a :class:`~vmstack.gossip.PushGossiper` of what is
    submitted here (only local submissions are pushed), a
    :class:`~vmstack.gossip.PullGossiper`, and the handler of handler ID 0 behind a
    :class:`~vmstack.gossip.GossipRouter`.

    The transport is the caller's: ``send_push(config, payload)`` delivers a push,
    ``send_request(payload, on_response)`` a pull request (and calls ``on_response(node_id,
    response)`` with the answer); the caller hands what peers send to :meth:`app_gossip`
    and :meth:`app_request`, runs :meth:`push` every ``config.push_frequency`` seconds and
    :meth:`pull` every ``config.pull_frequency``, and reports accepted blocks'
    transactions to :meth:`on_accepted`. ``random_bytes`` draws the bloom filters' seeds
    and salts (``os.urandom``).
    """

    def __init__(
        self,
        vm: object,
        *,
        validator_weights: Callable[[], Mapping[bytes, int]],
        send_push: Callable[[SendConfig, bytes], None],
        send_request: Callable[[bytes, ResponseCallback], None],
        clock: Clock,
        config: GossipConfig = CORETH_GOSSIP,
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self.vm = vm
        self.config = config
        marshaller = TransactionMarshaller()
        self.held = MempoolGossipSet(vm)
        self.item_set = SetWithBloomFilter(
            self.held,
            marshaller,
            min_target_elements=config.bloom_min_target_elements,
            target_false_positive=config.bloom_target_false_positive,
            reset_false_positive=config.bloom_reset_false_positive,
            target_multiplier=config.bloom_churn_multiplier,
            random_bytes=random_bytes,
        )
        self.push_gossiper = PushGossiper(
            marshaller,
            self.item_set,
            validator_weights,
            send_push,
            gossip_params=config.push_gossip,
            regossip_params=config.push_regossip,
            discarded_size=config.discarded_size,
            target_gossip_size=config.target_message_size,
            max_regossip_frequency=config.regossip_frequency,
            clock=clock,
        )
        self.pull_gossiper = PullGossiper(
            marshaller, self.item_set, send_request, poll_size=config.poll_size
        )
        self.handler = GossipHandler(
            marshaller, self.item_set, target_response_size=config.target_message_size
        )
        self.router = GossipRouter()
        self.router.register(TRANSACTION_GOSSIP_HANDLER, self.handler)

    def submit(self, transactions: Iterable[Any]) -> int:
        """Submit ``transactions`` here (``submit_transactions``: all or none, with the
        mempool's refusals) and queue them for push gossip; how many were queued."""
        items = [GossipTransaction.of(tx) for tx in transactions]
        queued = submit_transactions(cast(ChainVM, self.vm), [item.transaction for item in items])
        self.held.adopt(items)
        for item in items:
            self.item_set.add_to_bloom(item)
        self.push_gossiper.add(items)
        return queued

    def push(self) -> None:
        """One push cycle."""
        self.push_gossiper.gossip()

    def pull(self) -> None:
        """One pull request (``poll_size`` of them)."""
        self.pull_gossiper.gossip()

    def app_gossip(self, payload: bytes) -> None:
        """A peer's AppGossip payload (handler-prefixed)."""
        self.router.app_gossip(payload)

    def app_request(self, payload: bytes) -> bytes:
        """The AppResponse to a peer's AppRequest payload (handler-prefixed)."""
        return self.router.app_request(payload)

    def on_accepted(self, transaction_hashes: Iterable[bytes]) -> int:
        """An accepted block included these transactions: no longer held or pushed; how
        many were held."""
        return self.held.forget(transaction_hashes)
