"""The push gossiper: locally issued items sent to a share of the stake and a number of
validators, and sent again while they stay in the set (avalanchego's ``PushGossiper``).

It knows no transport: a cycle ends in one call of ``send(config, payload)`` per queue
that had something to send, ``config`` the :class:`SendConfig` of who gets it (as
avalanchego's ``common.SendConfig``) and ``payload`` the handler-prefixed ``PushGossip``.
:func:`choose_peers` resolves a :class:`SendConfig` against the connected peers as
avalanchego's sender does; a network run and a plugin each call it or their own.
"""

from __future__ import annotations

import math
import random
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from vmstack.clock import Clock
from vmstack.gossip.messages import TRANSACTION_GOSSIP_HANDLER, marshal_push_gossip, prefix_handler
from vmstack.gossip.sets import Marshaller, PushGossiperSet

__all__ = [
    "BranchingFactor",
    "PushGossiper",
    "PushStatistics",
    "SendConfig",
    "choose_peers",
    "top_validators",
]

T = TypeVar("T")


@dataclass(frozen=True)
class BranchingFactor:
    """Who a push goes to: the validators holding ``stake_percentage`` of the stake
    (heaviest first), and in addition ``validators`` connected validators, ``non_validators``
    connected non-validators and ``peers`` connected peers of either kind, sampled
    uniformly. Negative counts, or all three counts 0, are ``ValueError`` (upstream's
    ``Verify``)."""

    stake_percentage: float = 0.0
    validators: int = 0
    non_validators: int = 0
    peers: int = 0

    def __post_init__(self) -> None:
        if self.validators < 0:
            raise ValueError("num validators cannot be negative")
        if self.non_validators < 0:
            raise ValueError("num non-validators cannot be negative")
        if self.peers < 0:
            raise ValueError("num peers cannot be negative")
        if max(self.validators, self.non_validators, self.peers) == 0:
            raise ValueError("must gossip to at least one peer")


@dataclass(frozen=True)
class SendConfig:
    """Where one push goes: every node of ``node_ids``, then ``validators`` connected
    validators, ``non_validators`` connected non-validators and ``peers`` connected peers
    not already chosen (avalanchego's ``common.SendConfig``)."""

    node_ids: tuple[bytes, ...] = ()
    validators: int = 0
    non_validators: int = 0
    peers: int = 0


def top_validators(weights: Mapping[bytes, int], percentage: float) -> list[bytes]:
    """The heaviest validators (ties by node ID, ascending) until their stake reaches
    ``ceil(percentage * total)``, ``percentage`` bound to [0, 1] (avalanchego's
    ``Validators.Top``)."""
    percentage = max(0.0, min(1.0, percentage))
    ordered = sorted(weights.items(), key=lambda entry: (-entry[1], entry[0]))
    target = math.ceil(percentage * float(sum(weights.values())))
    chosen: list[bytes] = []
    stake = 0
    for node_id, weight in ordered:
        if stake >= target:
            break
        chosen.append(node_id)
        stake += weight
    return chosen


def choose_peers(
    config: SendConfig,
    *,
    connected: Collection[bytes],
    validators: Collection[bytes],
    draw: random.Random,
    self_id: bytes | None = None,
) -> list[bytes]:
    """The peers ``config`` names among ``connected`` (never ``self_id``): the connected
    ones of ``node_ids`` in their order, then uniform samples of the connected validators,
    non-validators and peers not yet chosen, each of its count or as many as there are."""
    reachable = [node for node in connected if node != self_id]
    reachable_set = set(reachable)
    chosen: list[bytes] = []
    seen: set[bytes] = set()
    for node in config.node_ids:
        if node in reachable_set and node not in seen:
            chosen.append(node)
            seen.add(node)
    validator_set = set(validators)
    for count, pool in (
        (config.validators, [n for n in reachable if n in validator_set]),
        (config.non_validators, [n for n in reachable if n not in validator_set]),
        (config.peers, reachable),
    ):
        left = [node for node in pool if node not in seen]
        for node in draw.sample(left, min(count, len(left))):
            chosen.append(node)
            seen.add(node)
    return chosen


@dataclass
class PushStatistics:
    """What a push gossiper has done: messages and items sent, their bytes (the items'
    marshalled lengths, as upstream's metric counts them), and items dropped from the
    queues because the set no longer held them; ``top_validators`` how many validators the
    last message went to for their stake."""

    messages: int = 0
    items: int = 0
    item_bytes: int = 0
    dropped: int = 0
    top_validators: int = 0


@dataclass
class _Tracking:
    added: float
    last_gossiped: float = -math.inf


class PushGossiper(Generic[T]):
    """Pushes the items :meth:`add` queues, then regossips them (upstream's
    ``PushGossiper``).

    :meth:`gossip` runs one cycle on ``clock``'s time: first the unsent queue, with
    ``gossip_params``, then the sent queue, with ``regossip_params``; each pass takes items
    from the front while the message stays under ``target_gossip_size`` bytes (the item that
    crosses it is still sent), skips an item the set no longer ``has`` (dropped; in the
    regossip pass remembered in a least-recently-used cache of ``discarded_size``, at least
    1, so a re-added item is taken as just sent), stops at an item sent less than
    ``max_regossip_frequency`` seconds ago, and moves what it sends to the back of the sent
    queue. A pass with something to send calls ``send`` once with the handler-prefixed
    ``PushGossip`` (``handler_id``, 0 for transactions) and a :class:`SendConfig` of the
    validators holding the pass's stake share of ``validator_weights()`` plus its counts.
    Negative sizes or frequency are ``ValueError``. Safe to use from several threads.
    """

    def __init__(
        self,
        marshaller: Marshaller[T],
        item_set: PushGossiperSet,
        validator_weights: Callable[[], Mapping[bytes, int]],
        send: Callable[[SendConfig, bytes], None],
        *,
        gossip_params: BranchingFactor,
        regossip_params: BranchingFactor,
        discarded_size: int,
        target_gossip_size: int,
        max_regossip_frequency: float,
        clock: Clock,
        handler_id: int = TRANSACTION_GOSSIP_HANDLER,
    ) -> None:
        if discarded_size < 0:
            raise ValueError("discarded size cannot be negative")
        if target_gossip_size < 0:
            raise ValueError("target gossip size cannot be negative")
        if max_regossip_frequency < 0:
            raise ValueError("re-gossip frequency cannot be negative")
        self._marshaller = marshaller
        self._set = item_set
        self._validator_weights = validator_weights
        self._send = send
        self._gossip_params = gossip_params
        self._regossip_params = regossip_params
        self._discarded_size = max(discarded_size, 1)
        self._target_gossip_size = target_gossip_size
        self._max_regossip_frequency = max_regossip_frequency
        self._clock = clock
        self._handler_id = handler_id
        self._lock = threading.Lock()
        self._tracking: dict[bytes, _Tracking] = {}
        self._to_gossip: deque[T] = deque()
        self._to_regossip: deque[T] = deque()
        self._discarded: OrderedDict[bytes, None] = OrderedDict()
        self.statistics = PushStatistics()

    @property
    def unsent(self) -> int:
        """Items queued and never sent."""
        return len(self._to_gossip)

    @property
    def sent(self) -> int:
        """Items sent and queued to be sent again."""
        return len(self._to_regossip)

    def next_due(self) -> float | None:
        """The earliest time a cycle can send something: now when an item was never sent,
        else when the longest-waiting sent item may be sent again (``None``: nothing is
        tracked). A dropped item may make that cycle send nothing."""
        with self._lock:
            if self._to_gossip:
                return self._clock()
            if not self._to_regossip:
                return None
            first = self._marshaller.gossip_id(self._to_regossip[0])
            return self._tracking[first].last_gossiped + self._max_regossip_frequency

    def add(self, items: Sequence[T]) -> None:
        """Queue ``items`` not yet tracked; an item discarded lately goes to the sent
        queue as if just sent."""
        now = self._clock()
        with self._lock:
            for item in items:
                gossip_id = self._marshaller.gossip_id(item)
                if gossip_id in self._tracking:
                    continue
                tracking = _Tracking(added=now)
                if gossip_id in self._discarded:
                    self._discarded.move_to_end(gossip_id)
                    tracking.last_gossiped = now
                    self._to_regossip.append(item)
                else:
                    self._to_gossip.append(item)
                self._tracking[gossip_id] = tracking

    def gossip(self) -> None:
        """One cycle: the unsent queue, then the sent queue."""
        now = self._clock()
        with self._lock:
            if not self._tracking:
                return
            self._pass(now, self._gossip_params, self._to_gossip, discard=False)
            self._pass(now, self._regossip_params, self._to_regossip, discard=True)

    def _pass(self, now: float, params: BranchingFactor, queue: deque[T], *, discard: bool) -> None:
        gossip: list[bytes] = []
        size = 0
        latest = now - self._max_regossip_frequency
        while size < self._target_gossip_size and queue:
            item = queue.popleft()
            gossip_id = self._marshaller.gossip_id(item)
            tracking = self._tracking[gossip_id]
            if not self._set.has(gossip_id):
                del self._tracking[gossip_id]
                self.statistics.dropped += 1
                if discard:
                    self._discarded[gossip_id] = None
                    self._discarded.move_to_end(gossip_id)
                    while len(self._discarded) > self._discarded_size:
                        self._discarded.popitem(last=False)
                continue
            if latest < tracking.last_gossiped:
                queue.appendleft(item)
                break
            try:
                data = self._marshaller.marshal(item)
            except Exception:
                del self._tracking[gossip_id]
                raise
            gossip.append(data)
            size += len(data)
            self._to_regossip.append(item)
            tracking.last_gossiped = now
        if not gossip:
            return
        payload = prefix_handler(self._handler_id, marshal_push_gossip(gossip))
        top = top_validators(self._validator_weights(), params.stake_percentage)
        self.statistics.messages += 1
        self.statistics.items += len(gossip)
        self.statistics.item_bytes += size
        self.statistics.top_validators = len(top)
        self._send(
            SendConfig(
                node_ids=tuple(top),
                validators=params.validators,
                non_validators=params.non_validators,
                peers=params.peers,
            ),
            payload,
        )
