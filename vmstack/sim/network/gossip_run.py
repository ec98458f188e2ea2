"""Transaction gossip in a network run (``--tx-rate R``): submissions at random nodes,
push and pull over the simulated links, and what the report says of them.

While blocks are built, ``R`` transactions a simulated second (across the network, at
times drawn from a seeded exponential) are submitted, each at a node drawn at random
(when it is not up and caught up, the submission goes to one that is, one link latency
later); the transactions are a pool of the development keys' signed
for the run's seed, their nonces following on from the state the chain's history left
(the same pool at every node), so they are valid in order. A node's gossip
(:mod:`vmstack.sim.network.gossip_node`, coreth's parameters) pushes what was submitted
there every 0.1 s while it has something to send; every caught-up node pulls from one
random caught-up peer every second. Each push and pull message crosses the simulated link
of its pair (latency, jitter, bandwidth and drops: the bytes count against the link like
any message), and a push goes to the peers its send configuration names, resolved as
avalanchego's sender does (:func:`~vmstack.gossip.choose_peers`). Builders build from
their own pool; a node that accepts a block forgets its transactions. Submissions stop
three block intervals before the building phase ends, so the last ones can still be
built.

The report's ``simulated.gossip`` (:meth:`TransactionGossipping.gossip_report`) gives
``submitted``, ``included``, ``included_twice``, the inclusion latency of each included
transaction from its submission (``latency_s``: ``p50``, ``p90``, ``max``),
``duplicate_receipts_per_tx`` (items nodes received and their pools did not take,
because they held the transaction already or a block had included it, per submitted
transaction), ``gossip_bytes_per_node_s`` (gossip bytes put on the links, a mean over
nodes and simulated seconds) and ``bloom_hit_rate`` (of the items handlers looked at
answering pulls, the share the requester's filter held; a fraction of 1).
"""

from __future__ import annotations

import math
import random
from typing import Any

from vmstack.gossip import CORETH_GOSSIP, choose_peers
from vmstack.sim.network.events import NetworkEventLoop
from vmstack.sim.network.gossip_node import GossipCounts, GossipOut, node_id_of, node_of_id
from vmstack.sim.network.node import Built, Call

__all__ = ["DRAIN_INTERVALS", "SUBMISSION_SEED_OFFSET", "TransactionGossipping", "percentile"]

#: Block intervals before the end of building in which no transaction is submitted.
DRAIN_INTERVALS = 3
#: The submitted transactions are the development keys' pool of the run's seed plus this.
SUBMISSION_SEED_OFFSET = 7_919


def percentile(values: list[float], fraction: float) -> float | None:
    """The nearest-rank ``fraction`` percentile of ``values`` (``None`` for none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


class TransactionGossipping(NetworkEventLoop):
    """The gossip protocol of a network run, on the coordinator's event loop."""

    def _gossip_setup(self) -> None:
        self.gossip_rng = random.Random(f"transaction gossip {self.config.seed}")
        self.submitted_at: dict[bytes, float] = {}
        self.included_at: dict[bytes, float] = {}
        self.included_twice = 0
        self.gossip_bytes = 0
        self.gossip_dropped = 0
        self.submissions_refused = 0
        self._push_due: dict[int, float] = {}
        self._ids = [node_id_of(node) for node in range(self.config.nodes)]
        self._pool: tuple[int, tuple[int, ...], int] = (0, (), 0)

    def _ready(self, node: int) -> bool:
        state = self.states[node]
        return self._up(node) and state.ready

    def start_gossip(self) -> None:
        """Schedule every submission and every node's first pull (from the run's start)."""
        config = self.config
        self._gossip_setup()
        window = config.block_interval * max(1, config.live_blocks - DRAIN_INTERVALS)
        arrivals: list[tuple[float, int]] = []
        at = self.gossip_rng.expovariate(config.tx_rate)
        while at < window:
            arrivals.append((at, self.gossip_rng.randrange(config.nodes)))
            at += self.gossip_rng.expovariate(config.tx_rate)
        if arrivals:
            (nonces,) = self.engine.run([Call(0, "gossip_nonces")])
            self._pool = (config.seed + SUBMISSION_SEED_OFFSET, tuple(nonces), len(arrivals))
        for index, (at, node) in enumerate(arrivals):
            self._schedule_submission(at, node, index, tries=0)
        for node in range(config.nodes):
            self._schedule_pull(node, self.gossip_rng.uniform(0.0, CORETH_GOSSIP.pull_frequency))

    # --- submissions and pushes ---------------------------------------------------------

    def _schedule_submission(self, delay: float, node: int, position: int, tries: int) -> None:
        def submit() -> Call | None:
            if not self._ready(node):
                return None
            seed, nonces, size = self._pool
            return Call(node, "gossip_submit", (self.clock(), seed, nonces, size, position))

        self.schedule(
            delay,
            node,
            lambda out: self._submitted(node, position, tries, out),
            call=submit,
            always=True,
        )

    def _submitted(self, node: int, position: int, tries: int, out: GossipOut | None) -> None:
        if out is None:
            # Not up or not caught up: to one that is now, a link latency later (a later
            # transaction of the same sender would otherwise wait for it for ever).
            ready = [other for other in range(self.config.nodes) if self._ready(other)]
            other = ready[self.gossip_rng.randrange(len(ready))] if ready else node
            self._schedule_submission(self.lookahead, other, position, tries + 1)
            return
        if out.refused is not None:
            self.submissions_refused += 1
            return
        for tx_hash in out.submitted:
            self.submitted_at.setdefault(tx_hash, self.clock())
        self._route(node, out)

    def _route(self, node: int, out: GossipOut) -> None:
        """Send what a node's gossip put out, and keep its push cycle going."""
        connected = [self._ids[n] for n in range(self.config.nodes) if self._ready(n)]
        for config, payload in out.pushes:
            for peer_id in choose_peers(
                config,
                connected=connected,
                validators=self._ids,
                draw=self.gossip_rng,
                self_id=self._ids[node],
            ):
                self._send(node, node_of_id(peer_id), payload, "gossip_receive", None)
        for payload in out.requests:
            peers = [n for n in range(self.config.nodes) if n != node and self._ready(n)]
            if peers:
                peer = peers[self.gossip_rng.randrange(len(peers))]
                self._send(node, peer, payload, "gossip_request", node)
        if out.next_push is not None:
            self._schedule_push(node, out.next_push)

    def _send(
        self, source: int, destination: int, payload: bytes, method: str, asker: int | None
    ) -> None:
        delay = self.mesh.transfer(source, destination, len(payload))
        if delay is None:
            self.gossip_dropped += 1
            return
        self.gossip_bytes += len(payload)
        at = self.clock() + delay

        def call() -> Call | None:
            if not self._ready(destination):
                return None
            return Call(destination, method, (payload, at))

        self.schedule(
            delay,
            destination,
            lambda answer: self._arrived(destination, asker, answer),
            call=call,
        )

    def _arrived(self, node: int, asker: int | None, answer: Any) -> None:
        if asker is None or answer is None:
            return
        # A pull response travels back to the node that asked.
        response: bytes = answer
        delay = self.mesh.transfer(node, asker, len(response))
        if delay is None:
            self.gossip_dropped += 1
            return
        self.gossip_bytes += len(response)
        at = self.clock() + delay

        def call() -> Call | None:
            if not self._ready(asker):
                return None
            return Call(asker, "gossip_response", (node, response, at))

        self.schedule(delay, asker, lambda out: None, call=call)

    def _schedule_push(self, node: int, due: float) -> None:
        """The node's next push cycle: on its 0.1 s tick at or after ``due``."""
        if not self.building:
            return
        tick = CORETH_GOSSIP.push_frequency
        now = self.clock()
        at = max(due, now + tick)
        at = now + tick * math.ceil((at - now) / tick - 1e-9)
        if self._push_due.get(node, math.inf) <= at:
            return
        self._push_due[node] = at

        def push() -> Call | None:
            if self._push_due.get(node) != at or not self._ready(node):
                return None
            return Call(node, "gossip_push", (at,))

        def pushed(out: GossipOut | None) -> None:
            if self._push_due.get(node) == at:
                del self._push_due[node]
            if out is not None:
                self._route(node, out)

        self.schedule(at - now, node, pushed, call=push)

    # --- pulls ----------------------------------------------------------------------------

    def _schedule_pull(self, node: int, delay: float) -> None:
        def pull() -> Call | None:
            if not self._ready(node):
                return None
            return Call(node, "gossip_pull", (self.clock(),))

        def pulled(out: GossipOut | None) -> None:
            if out is not None:
                self._route(node, out)
            if self.building:
                self._schedule_pull(node, CORETH_GOSSIP.pull_frequency)

        self.schedule(delay, node, pulled, call=pull)

    # --- inclusion and the report -----------------------------------------------------------

    def gossip_included(self, built: Built) -> None:
        """Book the transactions of a built block."""
        self.gossip_included_hashes(built.transactions)

    def gossip_included_hashes(self, transactions: tuple[bytes, ...]) -> None:
        """Book the transactions (hashes) of a block decided now: built under the
        coordinator, accepted for the first time anywhere under Snowman."""
        for tx_hash in transactions:
            if tx_hash in self.included_at:
                self.included_twice += 1
            else:
                self.included_at[tx_hash] = self.clock()

    def gossip_report(self) -> dict[str, object]:
        """The run's ``simulated.gossip`` figures (see the module)."""
        answers = self.engine.run(
            [Call(node, "gossip_counts") for node in range(self.config.nodes) if self._up(node)]
        )
        counts = [answer for answer in answers if isinstance(answer, GossipCounts)]
        latencies = [
            self.included_at[tx_hash] - submitted
            for tx_hash, submitted in self.submitted_at.items()
            if tx_hash in self.included_at
        ]
        submitted = len(self.submitted_at)
        received = sum(count.received for count in counts)
        added = sum(count.added for count in counts)
        looked_at = sum(count.looked_at for count in counts)
        seconds = self.clock() - self.started
        return {
            "submitted": submitted,
            "included": sum(1 for tx_hash in self.submitted_at if tx_hash in self.included_at),
            "included_twice": self.included_twice,
            "latency_s": {
                "p50": percentile(latencies, 0.5),
                "p90": percentile(latencies, 0.9),
                "max": max(latencies) if latencies else None,
            },
            "duplicate_receipts_per_tx": (received - added) / submitted if submitted else None,
            "gossip_bytes_per_node_s": (
                self.gossip_bytes / self.config.nodes / seconds if seconds > 0 else None
            ),
            "bloom_hit_rate": (
                sum(count.hits for count in counts) / looked_at if looked_at else None
            ),
            "submissions_refused": self.submissions_refused,
            "messages_dropped": self.gossip_dropped,
        }
