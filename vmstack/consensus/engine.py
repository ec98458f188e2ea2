"""The Snowman engine loop over any ``ChainVM`` stack (avalanchego's
``snow/engine/snowman/engine.go``), with the network left to the caller.

The engine sends every message through ``send(destination, message)`` and takes every
message in through :meth:`SnowmanEngine.receive`; a simulator carries them on its own links
(with its latency, drops and partitions) and reports a query or a block request that will
not be answered with :class:`QueryFailed` / :class:`GetFailed`. See docs/consensus.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import attrs

from vmstack.clock import Clock
from vmstack.consensus.parameters import Parameters
from vmstack.consensus.poll import PollSet
from vmstack.consensus.topological import Topological
from vmstack.errors import VMStackError
from vmstack.interfaces import Block, ChainVM
from vmstack.wrappers.proposer.windower import MersenneTwister, WeightedWithoutReplacement

__all__ = [
    "Chits",
    "Get",
    "GetFailed",
    "Message",
    "PullQuery",
    "PushQuery",
    "Put",
    "QueryFailed",
    "Sampler",
    "SnowmanEngine",
    "StakeSampler",
]


@attrs.frozen
class PushQuery:
    """A query carrying the block: issue it, then answer with :class:`Chits`."""

    request_id: int
    block: bytes
    requested_height: int


@attrs.frozen
class PullQuery:
    """A query naming the block: answer with :class:`Chits`."""

    request_id: int
    block_id: bytes
    requested_height: int


@attrs.frozen
class Chits:
    """A vote: the sender's preference, its preferred block at the requested height (the
    vote counted) and its last accepted block."""

    request_id: int
    preferred_id: bytes
    preferred_id_at_height: bytes
    accepted_id: bytes
    accepted_height: int


@attrs.frozen
class Get:
    """A request for a block's bytes: answer with :class:`Put`."""

    request_id: int
    block_id: bytes


@attrs.frozen
class Put:
    """A block's bytes, in answer to :class:`Get`."""

    request_id: int
    block: bytes


@attrs.frozen
class QueryFailed:
    """From the transport: the query ``request_id`` sent to this sender will not be
    answered (a timeout, a dead link)."""

    request_id: int


@attrs.frozen
class GetFailed:
    """From the transport: the block request ``request_id`` will not be answered."""

    request_id: int


Message = PushQuery | PullQuery | Chits | Get | Put | QueryFailed | GetFailed
Send = Callable[[bytes, Message], None]


class Sampler(Protocol):
    """Who to poll: ``weights`` is the validator set (node ID → stake); ``sample(count)``
    draws ``count`` validators by stake with multiplicity, or None when the set holds fewer
    weight units."""

    @property
    def weights(self) -> Mapping[bytes, int]: ...

    def sample(self, count: int) -> list[bytes] | None: ...


class StakeSampler:
    """avalanchego's weighted sampler without replacement over weight units, drawing from an
    MT19937 seeded with ``seed``: a validator is named as often as its drawn units fall in
    its stake."""

    def __init__(self, weights: Mapping[bytes, int], *, seed: int = 0) -> None:
        if not weights or any(weight <= 0 for weight in weights.values()):
            raise ValueError("a sampler needs validators, each with a positive stake")
        self.weights = dict(weights)
        self._nodes = sorted(self.weights)
        source = MersenneTwister(seed)
        self._draws = WeightedWithoutReplacement(
            source.uint64, [self.weights[node] for node in self._nodes]
        )

    def sample(self, count: int) -> list[bytes] | None:
        indices = self._draws.sample(count)
        return None if indices is None else [self._nodes[index] for index in indices]


class _Tracked:
    """A stack block in the block tree: its decisions are counted by the engine."""

    __slots__ = ("block", "engine")

    def __init__(self, engine: SnowmanEngine, block: Block) -> None:
        self.engine = engine
        self.block = block

    @property
    def id(self) -> bytes:
        return self.block.id

    @property
    def parent_id(self) -> bytes:
        return self.block.parent_id

    @property
    def height(self) -> int:
        return self.block.height

    def accept(self) -> None:
        self.block.accept()
        self.engine._decided(self.block, accepted=True)

    def reject(self) -> None:
        self.block.reject()
        self.engine._decided(self.block, accepted=False)


class SnowmanEngine:
    """One node's Snowman engine over the stack ``vm``.

    ``node_id`` names this node in messages; ``sampler`` gives the validators and draws
    who to poll; ``send(destination, message)`` hands a message to the caller's network;
    ``clock`` (seconds) stamps when blocks are issued and decided. Every validator is taken
    as connected until :meth:`disconnected` says otherwise.

    The loop, as upstream's: a block is issued once its parent is processing or accepted
    (a block with an unknown parent waits while the parent is fetched with :class:`Get`),
    after ``verify()``, ``add`` and ``set_preference``; blocks at or below the last accepted
    height are never issued. :meth:`notify_pending` asks for one block, built on the
    preference while fewer than ``optimal_processing`` blocks process, and pushed to ``k``
    sampled validators; otherwise the preference is pulled, up to ``concurrent_repolls``
    polls at once. A query is answered with the preference at the requested height (from
    ``get_block_id_at_height`` below the last accepted height); a vote for a block that is
    not processing counts for its nearest processing ancestor. No poll is sent while the
    connected stake is below ``alpha_confidence / k``.
    """

    def __init__(
        self,
        vm: ChainVM,
        params: Parameters,
        *,
        node_id: bytes,
        sampler: Sampler,
        send: Send,
        clock: Clock,
    ) -> None:
        self.vm = vm
        self.params = params
        self.node_id = node_id
        self.sampler = sampler
        self.send = send
        self.clock = clock
        self.consensus = Topological(params)
        last_id = vm.last_accepted()
        self.consensus.initialize(last_id, vm.get_block(last_id).height)
        self.polls = PollSet(
            params.alpha_preference, params.alpha_confidence, self.consensus.parent_of
        )
        self.connected_nodes = set(sampler.weights)
        #: Block IDs this engine accepted / rejected, in order.
        self.accepted_ids: list[bytes] = []
        self.rejected_ids: list[bytes] = []
        #: Block IDs this engine built and issued, in order (also those a deferred
        #: :meth:`notify_pending` built later, once fewer blocks were processing).
        self.built_ids: list[bytes] = []
        #: When each block was issued here, and when it was accepted (clock seconds).
        self.issued_at: dict[bytes, float] = {}
        self.accepted_at: dict[bytes, float] = {}
        self._processing: dict[bytes, Block] = {}
        self._waiting: dict[bytes, list[tuple[bytes, Block]]] = {}
        self._fetching: dict[int, bytes] = {}
        self._request_id = 0
        self._pending_builds = 0

    # --- entries ------------------------------------------------------------------------

    def notify_pending(self) -> None:
        """The VM has work (transactions): build one block when the engine may."""
        self._pending_builds += 1
        self._build()

    def connected(self, node: bytes) -> None:
        """``node`` is reachable again."""
        self.connected_nodes.add(node)
        self._repoll()

    def disconnected(self, node: bytes) -> None:
        """``node`` is unreachable: its stake no longer counts as connected."""
        self.connected_nodes.discard(node)

    def receive(self, sender: bytes, message: Message) -> None:
        """Handle one message from ``sender`` (or the transport's report about it)."""
        if isinstance(message, PushQuery):
            block = self._parse(message.block)
            if block is not None:
                self._issue(sender, block, push=False)
            self._answer(sender, message.request_id, message.requested_height)
        elif isinstance(message, PullQuery):
            if not self._known(message.block_id):
                self._fetch(sender, message.block_id)
            self._answer(sender, message.request_id, message.requested_height)
        elif isinstance(message, Chits):
            vote = message.preferred_id_at_height
            if not self._known(vote):
                self._fetch(sender, vote)
            self._results(self.polls.vote(message.request_id, sender, self._bubble(vote)))
        elif isinstance(message, QueryFailed):
            self._results(self.polls.drop(message.request_id, sender))
        elif isinstance(message, Get):
            try:
                data = bytes(self.vm.get_block(message.block_id))
            except VMStackError:
                return
            self.send(sender, Put(message.request_id, data))
        elif isinstance(message, Put):
            self._fetching.pop(message.request_id, None)
            block = self._parse(message.block)
            if block is not None:
                self._issue(sender, block, push=False)
        elif isinstance(message, GetFailed):
            self._fetching.pop(message.request_id, None)
        else:
            raise TypeError(f"not an engine message: {message!r}")

    # --- reading ------------------------------------------------------------------------

    def preference(self) -> bytes:
        """The preferred block."""
        return self.consensus.preference()

    def last_accepted(self) -> tuple[bytes, int]:
        """The last accepted block and its height."""
        return self.consensus.last_accepted()

    def connected_stake(self) -> float:
        """The share of stake connected (0 to 1)."""
        weights = self.sampler.weights
        total = sum(weights.values())
        return sum(weights.get(node, 0) for node in self.connected_nodes) / total

    # --- the loop -----------------------------------------------------------------------

    def _next_request(self) -> int:
        self._request_id += 1
        return self._request_id

    def _parse(self, data: bytes) -> Block | None:
        try:
            return self.vm.parse_block(data)
        except VMStackError:
            return None

    def _known(self, block_id: bytes) -> bool:
        if self.consensus.processing(block_id) or block_id == self.consensus.last_accepted()[0]:
            return True
        try:
            self.vm.get_block(block_id)
        except VMStackError:
            return False
        return True

    def _fetch(self, sender: bytes, block_id: bytes) -> None:
        if block_id in self._fetching.values():
            return
        request_id = self._next_request()
        self._fetching[request_id] = block_id
        self.send(sender, Get(request_id, block_id))

    def _issue(self, sender: bytes, block: Block, *, push: bool) -> None:
        last_id, last_height = self.consensus.last_accepted()
        block_id = block.id
        if block.height <= last_height or self.consensus.processing(block_id):
            return
        parent_id = block.parent_id
        if not self.consensus.processing(parent_id) and parent_id != last_id:
            waiting = self._waiting.setdefault(parent_id, [])
            if all(held.id != block_id for _, held in waiting):
                waiting.append((sender, block))
            self._fetch(sender, parent_id)
            return
        try:
            block.verify()
        except VMStackError:
            self._drop_waiting(block_id)
            return
        self.consensus.add(_Tracked(self, block))
        self._processing[block_id] = block
        self.issued_at.setdefault(block_id, self.clock())
        self.vm.set_preference(self.consensus.preference())
        if push:
            self._query(block_id, bytes(block), block.height, push=True)
        for waiter, child in self._waiting.pop(block_id, []):
            self._issue(waiter, child, push=False)
        self._repoll()

    def _drop_waiting(self, block_id: bytes) -> None:
        for _, child in self._waiting.pop(block_id, []):
            self._drop_waiting(child.id)

    def _build(self) -> None:
        while (
            self._pending_builds > 0
            and self.consensus.num_processing() < self.params.optimal_processing
        ):
            self._pending_builds -= 1
            self.vm.set_preference(self.consensus.preference())
            try:
                block = self.vm.build_block()
            except VMStackError:
                return
            if block.parent_id != self.consensus.preference():
                return
            issued = len(self.issued_at)
            self._issue(self.node_id, block, push=True)
            if len(self.issued_at) > issued:
                self.built_ids.append(block.id)

    def _query(self, block_id: bytes, data: bytes, height: int, *, push: bool) -> bool:
        """Poll ``k`` sampled validators about ``block_id``; False when no poll could be
        sent (too little stake connected, too few validators)."""
        if self.connected_stake() < self.params.alpha_confidence / self.params.k:
            return False
        polled = self.sampler.sample(self.params.k)
        if polled is None:
            return False
        bag: dict[bytes, int] = {}
        for node in polled:
            bag[node] = bag.get(node, 0) + 1
        request_id = self._next_request()
        if not self.polls.add(request_id, bag):
            return False
        for node in bag:
            if push:
                self.send(node, PushQuery(request_id, data, height))
            else:
                self.send(node, PullQuery(request_id, block_id, height))
        return True

    def _repoll(self) -> None:
        while (
            len(self.polls) < self.params.concurrent_repolls and self.consensus.num_processing() > 0
        ):
            preferred = self.consensus.preference()
            if not self._query(preferred, b"", self.consensus.preference_height(), push=False):
                return

    def _answer(self, sender: bytes, request_id: int, height: int) -> None:
        last_id, last_height = self.consensus.last_accepted()
        at_height = self.consensus.preference_at_height(height)
        if at_height is None:
            if height < last_height:
                try:
                    at_height = self.vm.get_block_id_at_height(height)
                except VMStackError:
                    at_height = last_id
            else:
                at_height = self.consensus.preference()
        self.send(
            sender, Chits(request_id, self.consensus.preference(), at_height, last_id, last_height)
        )

    def _bubble(self, block_id: bytes) -> bytes:
        """The nearest processing block at or above ``block_id`` (``block_id`` itself when
        none is found: the block tree drops the vote)."""
        current = block_id
        last_id, last_height = self.consensus.last_accepted()
        while not self.consensus.processing(current) and current != last_id:
            try:
                block = self.vm.get_block(current)
            except VMStackError:
                return block_id
            if block.height <= last_height:
                return block_id
            current = block.parent_id
        return current

    def _results(self, results: list[dict[bytes, int]]) -> None:
        for votes in results:
            self.consensus.record_poll(votes)
        if results:
            self.vm.set_preference(self.consensus.preference())
            self._repoll()
            self._build()

    def _decided(self, block: Block, *, accepted: bool) -> None:
        self._processing.pop(block.id, None)
        if accepted:
            self.accepted_ids.append(block.id)
            self.accepted_at[block.id] = self.clock()
        else:
            self.rejected_ids.append(block.id)
