"""A simulated node's transaction gossip: :class:`NodeGossip`, the node methods the
coordinator calls for it, and the plain data they answer.

Each node runs :class:`~vmstack.gossip.TransactionGossip` over its own stack, with coreth's
parameters, its bloom filters' seeds and salts drawn from a generator seeded by the node's
staking seed (so every engine draws the same). Its transport is the coordinator: a push or
pull request the node's gossip sends is collected and returned as data
(:class:`GossipOut`); the coordinator carries it over the simulated links and hands it to
the peers it reaches. Node IDs on this transport are a node's index as 4 big-endian bytes,
weighted by the run's stake.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import attrs

from vmstack.cchain import CChainVM
from vmstack.cchain.generate import transaction_pool
from vmstack.cchain.genesis import dev_addresses
from vmstack.clock import SimClock
from vmstack.errors import BlockNotFound, InvalidTransaction, MalformedRequest
from vmstack.gossip import ResponseCallback, SendConfig, TransactionGossip
from vmstack.interfaces import ChainVM, find_layer
from vmstack.submission import find_mempool

if TYPE_CHECKING:
    from vmstack.sim.network.node import NodeSpec

__all__ = [
    "GOSSIP_METHODS",
    "GossipCounts",
    "GossipOut",
    "NodeGossip",
    "node_id_of",
    "node_of_id",
]

#: The node methods of transaction gossip.
GOSSIP_METHODS: Final = frozenset(
    {
        "gossip_submit",
        "gossip_push",
        "gossip_pull",
        "gossip_receive",
        "gossip_request",
        "gossip_response",
        "gossip_counts",
        "gossip_nonces",
    }
)


def node_id_of(index: int) -> bytes:
    """The gossip node ID of node ``index``."""
    return index.to_bytes(4, "big")


def node_of_id(node_id: bytes) -> int:
    """The node index of a gossip node ID."""
    return int.from_bytes(node_id, "big")


@attrs.frozen
class GossipOut:
    """What a node's gossip sends: pushes (each a :class:`~vmstack.gossip.SendConfig` and
    its payload), pull request payloads, and when its push gossiper is next due
    (``None``: nothing tracked). ``submitted`` are the hashes a submission queued, and
    ``refused`` why the mempool refused it (nothing queued)."""

    pushes: tuple[tuple[SendConfig, bytes], ...] = ()
    requests: tuple[bytes, ...] = ()
    next_push: float | None = None
    submitted: tuple[bytes, ...] = ()
    refused: str | None = None


@attrs.frozen
class GossipCounts:
    """A node's gossip totals: items received by push and by pull, those its pool took,
    and the bloom hits and items its handler looked at answering pulls."""

    received: int = 0
    added: int = 0
    hits: int = 0
    looked_at: int = 0


class NodeGossip:
    """The gossip half of a :class:`~vmstack.sim.network.node.NodeServer`: its methods are
    :data:`GOSSIP_METHODS`, each at a simulated time ``now``."""

    spec: NodeSpec
    clock: SimClock
    vm: ChainVM
    _gossip_state: TransactionGossip | None = None
    _gossip_height: int = 0
    _outbox_pushes: list[tuple[SendConfig, bytes]]
    _outbox_requests: list[bytes]
    #: Moves the node's clock to ``now`` (the node's own).
    _at: Callable[[float], None]

    def _gossip(self) -> TransactionGossip:
        if self._gossip_state is None:
            spec = self.spec
            weights = (
                {node_id_of(i): w for i, w in enumerate(spec.stake.weights)}
                if spec.stake is not None
                else {}
            )
            draw = random.Random(spec.staking_seed or node_id_of(spec.index))
            self._outbox_pushes = []
            self._outbox_requests = []

            def send_request(payload: bytes, on_response: ResponseCallback) -> None:
                self._outbox_requests.append(payload)

            self._gossip_state = TransactionGossip(
                self.vm,
                validator_weights=lambda: weights,
                send_push=lambda config, payload: self._outbox_pushes.append((config, payload)),
                send_request=send_request,
                clock=self.clock,
                random_bytes=draw.randbytes,
            )
            self._gossip_height = self._height()
        return self._gossip_state

    def _height(self) -> int:
        """The height of the C-chain VM's last accepted block."""
        chain = find_layer(self.vm, CChainVM)
        return chain.get_block(chain.last_accepted()).height

    def _out(self, **fields: object) -> GossipOut:
        gossip = self._gossip()
        pushes, self._outbox_pushes = tuple(self._outbox_pushes), []
        requests, self._outbox_requests = tuple(self._outbox_requests), []
        return GossipOut(
            pushes=pushes,
            requests=requests,
            next_push=gossip.push_gossiper.next_due(),
            **fields,  # type: ignore[arg-type]
        )

    @property
    def gossiping(self) -> bool:
        """Whether the node's transaction gossip has started."""
        return self._gossip_state is not None

    def gossip_forget_accepted(self) -> tuple[bytes, ...]:
        """The transactions of the blocks accepted since the last look, which the node's
        gossip no longer holds or pushes (called after every acceptance)."""
        if self._gossip_state is None:
            return ()
        chain = find_layer(self.vm, CChainVM)
        height = self._height()
        included: list[bytes] = []
        for number in range(self._gossip_height + 1, height + 1):
            try:
                block = chain.get_block(chain.get_block_id_at_height(number))
            except BlockNotFound:
                continue
            included.extend(tx.hash for tx in block.transactions)
        self._gossip_height = height
        self._gossip_state.on_accepted(included)
        return tuple(included)

    def gossip_nonces(self) -> tuple[int, ...]:
        """The development keys' nonces in the state of the node's last accepted block."""
        chain = find_layer(self.vm, CChainVM)
        return tuple(chain.account(address).nonce for address in dev_addresses())

    def gossip_submit(
        self, now: float, seed: int, start_nonces: tuple[int, ...], size: int, index: int
    ) -> GossipOut:
        """Submit transaction ``index`` of the development keys' pool of ``size`` for
        ``seed`` whose nonces count on from ``start_nonces`` (the same pool on every node,
        signed once per process)."""
        self._at(now)
        gossip = self._gossip()
        pool = transaction_pool(
            seed=seed, chain_id=find_mempool(self.vm).chain_id, size=size, start_nonces=start_nonces
        )
        transactions = [pool.transactions[index]]
        try:
            gossip.submit(transactions)
        except InvalidTransaction as error:
            return self._out(refused=str(error))
        return self._out(submitted=tuple(tx.hash for tx in transactions))

    def gossip_push(self, now: float) -> GossipOut:
        """One push cycle."""
        self._at(now)
        self._gossip().push()
        return self._out()

    def gossip_pull(self, now: float) -> GossipOut:
        """One pull request."""
        self._at(now)
        self._gossip().pull()
        return self._out()

    def gossip_receive(self, payload: bytes, now: float) -> GossipOut:
        """A peer's push; a payload that does not read is dropped."""
        self._at(now)
        with contextlib.suppress(MalformedRequest):
            self._gossip().app_gossip(payload)
        return self._out()

    def gossip_request(self, payload: bytes, now: float) -> bytes | None:
        """The response to a peer's pull request (``None`` for one that does not read)."""
        self._at(now)
        try:
            return self._gossip().app_request(payload)
        except MalformedRequest:
            return None

    def gossip_response(self, peer: int, response: bytes, now: float) -> GossipOut:
        """A peer's answer to this node's pull request."""
        self._at(now)
        self._gossip().pull_gossiper.handle_response(node_id_of(peer), response)
        return self._out()

    def gossip_counts(self) -> GossipCounts:
        """The node's gossip totals so far."""
        if self._gossip_state is None:
            return GossipCounts()
        gossip = self._gossip_state
        pushed = gossip.handler.statistics
        pulled = gossip.pull_gossiper.statistics
        return GossipCounts(
            received=pushed.items + pulled.items,
            added=pushed.added + pulled.added,
            hits=gossip.handler.hits,
            looked_at=gossip.handler.looked_at,
        )
