"""A network of nodes: builders serve and extend a chain, the others bootstrap from it.

:func:`simulate_network` runs ``nodes`` nodes, each with its own full stack and LMDB store
(an :class:`~vmstack.sim.engines.NodeServer`), in this process or in Ray actors (an
:class:`~vmstack.sim.engines.Engine`). The first ``builders`` nodes hold a chain of
``blocks`` blocks when the run starts (one builds it, the others import it); the other nodes
start empty and bootstrap concurrently from random peers with the engine's loop: ask a peer
for its last accepted block, then ``get_ancestors`` from it down to a block the node has,
``batched_parse_block`` each answer, verify and accept oldest first; a request that is
dropped or not answered in time goes to another peer. A share of them join late (churn).
Meanwhile the builders take turns building ``live_blocks`` new blocks, one every
``block_interval`` seconds, and gossip each to every node; a bootstrapped node accepts a
gossiped block that extends its chain and fetches what it misses when one does not. A node
that finishes a bootstrap asks again and fetches the blocks built meanwhile, until a peer
has nothing newer, and a caught-up node keeps asking a peer every ``block_interval`` while
blocks are being built or it is behind (as consensus polls would tell it). Nodes that have
bootstrapped serve later joiners too.

The event loop, the simulated network and every random draw stay in this process (the
coordinator); the nodes only answer calls. Calls whose events fall within one minimum link
latency of each other, on different nodes (or only reads on one node), cannot influence each
other, since nothing one node does reaches another sooner than that; the coordinator hands
them to the engine together and then completes them in time order, running first any event
scheduled meanwhile for an earlier time. The outcome is exactly that of running every event
one by one, so for a seed and a cost model every simulated figure is the same on every
engine, whatever the number of workers.
"""

from __future__ import annotations

import heapq
import itertools
import random
import time
from collections.abc import Callable
from typing import Any

import attrs

from vmstack.batching import CONTAINER_LEN_OVERHEAD
from vmstack.clock import SimClock
from vmstack.errors import VMStackError
from vmstack.sim.bootstrap import REQUEST_BYTES
from vmstack.sim.costs import REFERENCE_COSTS, CostModel
from vmstack.sim.engines import (
    Built,
    Call,
    Delivered,
    Engine,
    Executed,
    NodeCrashed,
    NodeSpec,
    Received,
    Tip,
)
from vmstack.sim.network import Mesh
from vmstack.sim.network_records import NetworkReport, NetworkSimulationConfig, NodeResult

__all__ = [
    "Mesh",
    "NetworkReport",
    "NetworkRun",
    "NetworkSimulationConfig",
    "NodeResult",
    "simulate_network",
]

#: Seconds the engine may take to build, export or import the builders' chain.
SETUP_TIMEOUT = 3600.0


@attrs.define
class _NodeState:
    """The coordinator's book of one node: its result, plus what its protocol is doing."""

    result: NodeResult
    tip: Tip | None = None
    joined: bool = False
    ready: bool = False
    in_round: bool = False
    poll_due: bool = False
    busy_until: float = 0.0
    outstanding: int | None = None
    attempts: int = 0
    target: int = 0


@attrs.define(order=False)
class _Event:
    at: float
    order: int
    node: int
    read: bool
    call: Callable[[], Call | None] | None
    then: Callable[[Any], None]
    always: bool = False

    @property
    def key(self) -> tuple[float, int]:
        return (self.at, self.order)


class NetworkRun:
    """The coordinator of one run: the event loop, the mesh, and every node's book.

    ``observe(run)``, if given, is called after every batch of calls (a hook for progress
    and for fault injection: ``run.engine.crash(i)``). ``batch=False`` hands the engine one
    event's call at a time: the reference that the batched run equals, figure for figure.
    """

    def __init__(self, config: NetworkSimulationConfig, engine: Engine, *,
                 costs: CostModel = REFERENCE_COSTS,
                 observe: Callable[[NetworkRun], None] | None = None,
                 batch: bool = True) -> None:
        self.config = config
        self.engine = engine
        self.costs = costs
        self.observe = observe
        self.rng = random.Random(config.seed)
        self.mesh = Mesh(config.network, self.rng, config.nodes)
        self.lookahead = self.mesh.min_latency
        self.batching = batch
        builders = config.builder_count
        others = list(range(builders, config.nodes))
        late = set(self.rng.sample(others, round(len(others) * config.late_fraction)))
        self.states = [
            _NodeState(NodeResult(index, "builder" if index < builders
                                  else "late" if index in late else "node"))
            for index in range(config.nodes)
        ]
        self.clock = SimClock(config.start_time + config.block_interval * config.blocks)
        self.started = self.clock()
        self._queue: list[tuple[float, int, _Event]] = []
        self._order = itertools.count()
        self._current: _Event | None = None
        self._requests = itertools.count(1)
        self.events_run = 0
        self.batches = 0
        self.calls = 0
        self.widest_batch = 0
        self.built = 0
        self.missed_slots = 0
        self.network_tip: Tip | None = None

    # --- the event loop --------------------------------------------------------------

    def schedule(self, delay: float, node: int, then: Callable[[Any], None], *,
                 call: Callable[[], Call | None] | None = None, read: bool = False,
                 always: bool = False) -> None:
        """Run ``then(answer)`` for ``node`` ``delay`` seconds from now, ``answer`` being
        what ``call()`` (evaluated when the event is due; ``None`` for no call) answered.

        An event for a crashed node is dropped, unless ``always`` (the network's own
        events, such as a builder's turn): then ``then(None)`` runs.
        ``read`` events only read the node and only schedule events for other nodes. An
        event for another node than the one whose event is running must be at least one
        minimum link latency away: what makes batching exact."""
        if delay < 0:
            raise ValueError(f"an event cannot be scheduled in the past (delay {delay})")
        current = self._current
        if current is not None:
            if current.node != node and delay < self.lookahead:
                raise ValueError(f"node {current.node} cannot reach node {node} sooner than "
                                 f"{self.lookahead:g} s (got {delay:g} s)")
            if current.read and current.node == node:
                raise ValueError("a read event cannot schedule events for its own node")
        event = _Event(self.clock() + delay, next(self._order), node, read, call, then,
                       always)
        heapq.heappush(self._queue, (event.at, event.order, event))

    def run(self) -> None:
        """Run every event; each batch's calls go to the engine at once."""
        while self._queue:
            batch = self._take_batch()
            calls = [event.call() if event.call is not None else None for event in batch]
            wanted = [call for call in calls if call is not None]
            answers = iter(self.engine.run(wanted) if wanted else [])
            self.batches += 1
            self.calls += len(wanted)
            self.widest_batch = max(self.widest_batch, len(wanted))
            for event, call in zip(batch, calls, strict=True):
                self._run_until(event.key)
                self._complete(event, next(answers) if call is not None else None)
            if self.observe is not None:
                self.observe(self)

    def _take_batch(self) -> list[_Event]:
        """The events due first: the next one, then those after it within the lookahead
        that touch no node already in the batch (reads of one node go together)."""
        first = heapq.heappop(self._queue)[2]
        batch = [first]
        exclusive: set[int] = set() if first.read else {first.node}
        reading: set[int] = {first.node} if first.read else set()
        horizon = first.at + self.lookahead
        while self.batching and self._queue and self._queue[0][0] < horizon:
            event = self._queue[0][2]
            if event.node in exclusive or (not event.read and event.node in reading):
                break
            heapq.heappop(self._queue)
            batch.append(event)
            (reading if event.read else exclusive).add(event.node)
        return batch

    def _run_until(self, key: tuple[float, int]) -> None:
        """Run, one at a time, the events scheduled since the batch was taken that are due
        before ``key``."""
        while self._queue and self._queue[0][:2] < key:
            event = heapq.heappop(self._queue)[2]
            call = event.call() if event.call is not None else None
            answer = self.engine.run([call])[0] if call is not None else None
            if call is not None:
                self.calls += 1
            self._complete(event, answer)

    def _complete(self, event: _Event, answer: Any) -> None:
        if self.events_run >= self.config.max_events:
            raise VMStackError(f"the network did not settle within {self.config.max_events} "
                               "events")
        self.clock.advance(event.at - self.clock())
        self.events_run += 1
        state = self.states[event.node]
        if isinstance(answer, NodeCrashed):
            self._crashed(event.node, answer.reason)
            answer = None
        if state.result.crashed and not event.always:
            return
        self._current = event
        try:
            event.then(answer)
        finally:
            self._current = None

    def _crashed(self, node: int, reason: str) -> None:
        result = self.states[node].result
        if result.crashed_at is None:
            result.crashed_at = self.clock() - self.started
            result.crash_reason = reason

    def _up(self, node: int) -> bool:
        return not self.states[node].result.crashed

    # --- joining and bootstrapping ----------------------------------------------------

    def _peers_for(self, node: int, height: int) -> list[int]:
        """Nodes that can serve ``node`` up to ``height``: up, caught up once, and (as far
        as the coordinator's book says) that high."""
        return [peer for peer, state in enumerate(self.states)
                if peer != node and state.ready and self._up(peer) and state.tip is not None
                and state.tip.height >= height]

    def _join(self, node: int) -> None:
        state = self.states[node]
        state.joined = True
        state.result.joined_at = self.clock() - self.started
        state.result.timeline.append((state.result.joined_at, 0))
        self._ask_frontier(node)

    def _ask_frontier(self, node: int) -> None:
        """Ask a random peer for its last accepted block (a round trip of small messages)."""
        state = self.states[node]
        state.in_round = True
        if not self._give_up_after_attempts(node, "frontier"):
            return
        peers = self._peers_for(node, 0)
        request = next(self._requests)
        state.outstanding = request
        self.schedule(self.config.network.timeout, node,
                      lambda _: self._timed_out(node, request, lambda: self._ask_frontier(node)))
        if not peers:
            return
        peer = self.rng.choice(peers)
        state.result.requests += 1
        delay = self.mesh.transfer(node, peer, REQUEST_BYTES)
        if delay is not None:
            self.schedule(delay, peer, lambda _: self._answer_frontier(peer, node, request),
                          read=True)

    def _answer_frontier(self, peer: int, node: int, request: int) -> None:
        tip = self.states[peer].tip
        delay = self.mesh.transfer(peer, node, REQUEST_BYTES)
        if tip is not None and delay is not None:
            self.schedule(delay, node, lambda _: self._frontier(node, request, tip))

    def _frontier(self, node: int, request: int, tip: Tip) -> None:
        state = self.states[node]
        if state.outstanding != request:
            return
        state.outstanding = None
        state.attempts = 0
        if state.tip is not None and tip.height <= state.tip.height:
            self._caught_up(node)
            return
        state.target = tip.height
        self._request(node, tip.block_id)

    def _give_up_after_attempts(self, node: int, what: str) -> bool:
        state = self.states[node]
        if state.attempts >= self.config.max_attempts:
            state.result.stalled = f"no peer answered its {what} request after " \
                                   f"{self.config.max_attempts} attempts"
            state.in_round = False
            return False
        state.attempts += 1
        return True

    def _timed_out(self, node: int, request: int, again: Callable[[], None]) -> None:
        state = self.states[node]
        if state.outstanding == request:
            state.outstanding = None
            state.result.retries += 1
            again()

    def _request(self, node: int, want: bytes) -> None:
        """``get_ancestors`` of ``want`` from a random peer that has it."""
        state = self.states[node]
        if not self._give_up_after_attempts(node, "ancestors"):
            return
        request = next(self._requests)
        state.outstanding = request
        self.schedule(self.config.network.timeout, node,
                      lambda _: self._timed_out(node, request, lambda: self._request(node, want)))
        peers = self._peers_for(node, state.target)
        if not peers:
            return
        peer = self.rng.choice(peers)
        state.result.requests += 1
        delay = self.mesh.transfer(node, peer, REQUEST_BYTES)
        if delay is None:
            return
        at = self.clock() + delay
        self.schedule(delay, peer, lambda answer: self._served(peer, node, request, want, answer),
                      call=lambda: Call(peer, "serve", (want, at, self.config.max_blocks_num)),
                      read=True)

    def _served(self, peer: int, node: int, request: int, want: bytes,
                answer: list[bytes]) -> None:
        state = self.states[peer]
        now = self.clock()
        start = max(now, state.busy_until)
        cost = self.costs.serve_batched(len(answer), sum(map(len, answer)))
        state.busy_until = start + cost
        size = sum(len(block) + CONTAINER_LEN_OVERHEAD for block in answer)
        delay = self.mesh.transfer(peer, node, size)
        if delay is None:
            return
        wait = start - now + cost + delay
        at = now + wait
        receiver = self.states[node]
        self.schedule(wait, node,
                      lambda received: self._received(node, want, answer, received),
                      call=lambda: (Call(node, "receive", (want, answer, at))
                                    if receiver.outstanding == request else None))

    def _received(self, node: int, want: bytes, answer: list[bytes],
                  received: Received | None) -> None:
        if received is None:  # an answer to a request given up on
            return
        state = self.states[node]
        state.outstanding = None
        state.result.bytes_received += sum(map(len, answer))
        if not received.usable:
            state.result.retries += 1
            self._request(node, want)
            return
        now = self.clock()
        start = max(now, state.busy_until)
        cost = self.costs.parse_batched(len(answer), sum(map(len, answer)))
        state.busy_until = start + cost
        self.schedule(start - now + cost, node, lambda _: self._parsed(node, received))

    def _parsed(self, node: int, received: Received) -> None:
        state = self.states[node]
        state.attempts = 0
        state.result.blocks_fetched += received.new_blocks
        state.result.timeline.append((self.clock() - self.started,
                                      state.result.blocks_fetched))
        if not received.reached:
            assert received.next_want is not None
            self._request(node, received.next_want)
            return
        at = self.clock()
        self.schedule(0.0, node, lambda executed: self._executed(node, executed),
                      call=lambda: Call(node, "execute", (at,)))

    def _executed(self, node: int, executed: Executed) -> None:
        state = self.states[node]
        state.tip = executed.tip
        state.result.height = executed.tip.height
        state.result.rounds += 1
        cost = sum(self.costs.execute(1, size) for size in executed.sizes)
        start = max(self.clock(), state.busy_until)
        state.busy_until = start + cost
        self.schedule(start - self.clock() + cost, node, lambda _: self._ask_frontier(node))

    def _caught_up(self, node: int) -> None:
        state = self.states[node]
        state.in_round = False
        if not state.ready:
            state.ready = True
            state.result.bootstrap_seconds = (self.clock() - self.started
                                              - state.result.joined_at)
            state.result.timeline.append((self.clock() - self.started,
                                          state.result.blocks_fetched))
        self._schedule_poll(node)

    def _schedule_poll(self, node: int) -> None:
        state = self.states[node]
        if not state.poll_due and self._worth_polling(node):
            state.poll_due = True
            self.schedule(self.config.block_interval, node, lambda _: self._poll(node))

    def _worth_polling(self, node: int) -> bool:
        """Whether a caught-up node should ask a peer again later, as consensus polls do:
        while blocks are still being built, or while it is behind a tip some live node has
        (a gossiped block it missed)."""
        tip = self.network_tip
        if tip is None:
            return False
        if self.built < self.config.live_blocks and self._live_builders():
            return True
        state = self.states[node]
        return (state.tip is None or state.tip.height < tip.height) and any(
            other.tip is not None and other.tip.height >= tip.height and self._up(peer)
            for peer, other in enumerate(self.states) if peer != node)

    def _poll(self, node: int) -> None:
        state = self.states[node]
        state.poll_due = False
        if not state.ready or state.in_round:
            return  # the round under way ends in a poll of its own.
        if not self._worth_polling(node):
            return
        state.result.polls += 1
        self._ask_frontier(node)

    # --- building and gossip -----------------------------------------------------------

    def _live_builders(self) -> list[int]:
        return [index for index in range(self.config.builder_count) if self._up(index)]

    def _schedule_slot(self, slot: int, delay: float) -> None:
        """Slot ``slot``'s block, built by the builder whose turn it is if it has the newest
        block, else missed (the next slot's builder tries again)."""
        if self.built >= self.config.live_blocks:
            return
        builders = self._live_builders()
        if not builders:
            return
        builder = builders[slot % len(builders)]
        state = self.states[builder]
        tip = self.network_tip
        at = self.clock() + delay

        def build() -> Call | None:
            if (state.result.crashed or state.tip is None or tip is None
                    or state.tip.block_id != tip.block_id):
                return None
            height = tip.height + 1
            return Call(builder, "build", (at, self.config.seed,
                                           (height - 1) * self.config.txs_per_block,
                                           self.config.txs_per_block))

        self.schedule(delay, builder, lambda built: self._built(builder, slot, built),
                      call=build, always=True)

    def _built(self, builder: int, slot: int, built: Built | None) -> None:
        if built is None:
            self.missed_slots += 1
            self._schedule_slot(slot + 1, self.config.block_interval)
            return
        self.built += 1
        state = self.states[builder]
        state.tip = self.network_tip = built.tip
        state.result.height = built.tip.height
        for node, other in enumerate(self.states):
            if node == builder or not self._up(node) or not other.joined:
                continue
            delay = self.mesh.transfer(builder, node, len(built.block))
            if delay is None:
                continue
            self._gossip(node, built.block, built.tip, delay)
        self._schedule_slot(slot + 1, self.config.block_interval)

    def _gossip(self, node: int, block: bytes, block_tip: Tip, delay: float) -> None:
        state = self.states[node]
        at = self.clock() + delay
        self.schedule(delay, node,
                      lambda delivered: self._delivered(node, block, block_tip, delivered),
                      call=lambda: (Call(node, "deliver", (block, at))
                                    if state.ready and not state.in_round else None))

    def _delivered(self, node: int, block: bytes, block_tip: Tip,
                   delivered: Delivered | None) -> None:
        state = self.states[node]
        if delivered is None:
            state.result.gossip_ignored += 1
            return
        now = self.clock()
        start = max(now, state.busy_until)
        state.busy_until = start + self.costs.parse_serial(1, len(block)) + \
            self.costs.execute(1, len(block))
        if delivered.accepted:
            state.result.gossip_accepted += 1
            state.tip = delivered.tip
            state.result.height = delivered.tip.height
        elif not delivered.known:
            # A gap: fetch the gossiped block and what lies below it.
            state.in_round = True
            state.attempts = 0
            state.target = block_tip.height
            self._request(node, block_tip.block_id)

    # --- the whole run -------------------------------------------------------------------

    def start(self, builder_tips: list[Tip]) -> None:
        """Schedule the joins and the first slot; ``builder_tips`` are the builders' tips."""
        config = self.config
        for builder, tip in enumerate(builder_tips):
            state = self.states[builder]
            state.tip, state.joined, state.ready = tip, True, True
            state.result.height = tip.height
            state.result.bootstrap_seconds = 0.0
        self.network_tip = builder_tips[0]
        for builder in range(config.builder_count):
            self._schedule_poll(builder)
        join_window = config.block_interval * config.live_blocks / 2
        for state in self.states[config.builder_count:]:
            node = state.result.index
            delay = self.rng.uniform(0.0, join_window) if state.result.role == "late" else 0.0
            self._schedule_join(node, delay)
        self._schedule_slot(0, config.block_interval)

    def _schedule_join(self, node: int, delay: float) -> None:
        self.schedule(delay, node, lambda _: self._join(node))

    def totals(self) -> dict[str, float | int | None]:
        """The network's figures (all simulated)."""
        results = [state.result for state in self.states]
        tip_height = self.network_tip.height if self.network_tip is not None else 0
        bootstraps = [r.bootstrap_seconds for r in results
                      if r.role != "builder" and r.bootstrap_seconds is not None]
        return {
            "requests": sum(r.requests for r in results),
            "retries": sum(r.retries for r in results),
            "bytes_received": sum(r.bytes_received for r in results),
            "blocks_fetched": sum(r.blocks_fetched for r in results),
            "messages": self.mesh.messages,
            "dropped": self.mesh.dropped,
            "bytes_sent": self.mesh.bytes_sent,
            "blocks_built": self.built,
            "missed_slots": self.missed_slots,
            "tip_height": tip_height,
            "nodes_at_tip": sum(1 for state in self.states if not state.result.crashed
                                and state.ready and state.result.height == tip_height),
            "crashed": sum(1 for r in results if r.crashed),
            "stalled": sum(1 for r in results if r.stalled is not None),
            "bootstrapped": len(bootstraps),
            "mean_bootstrap_seconds": (sum(bootstraps) / len(bootstraps)
                                       if bootstraps else None),
            "max_bootstrap_seconds": max(bootstraps) if bootstraps else None,
            "simulated_seconds": self.clock() - self.started,
            "events": self.events_run,
            "batches": self.batches,
            "calls": self.calls,
            "widest_batch": self.widest_batch,
            "lookahead_seconds": self.lookahead,
        }


def _specs(config: NetworkSimulationConfig) -> list[NodeSpec]:
    return [NodeSpec(index=index, chain_id=config.chain_id, start_time=config.start_time,
                     fork_time=config.fork_time, transition_time=config.transition_time,
                     staking_seed=(f"vmstack simulate {config.seed} builder {index}".encode()
                                   if index < config.builder_count else None))
            for index in range(config.nodes)]


def _answer(value: Any, what: str) -> Any:
    if isinstance(value, NodeCrashed):
        raise VMStackError(f"{what}: {value}")
    return value


def simulate_network(
    config: NetworkSimulationConfig,
    engine: Engine,
    *,
    costs: CostModel = REFERENCE_COSTS,
    observe: Callable[[NetworkRun], None] | None = None,
    batch: bool = True,
) -> NetworkReport:
    """Run the network ``config`` describes on ``engine`` and return every figure.

    The engine is started here and closed before returning (also on error). ``observe``
    and ``batch`` are :class:`NetworkRun`'s. A node that
    crashes during the run is reported in its result; one that crashes while the chain is
    being set up fails the run with :class:`~vmstack.errors.VMStackError`.
    """
    setup_started = time.perf_counter()
    try:
        engine.start(_specs(config))
        first = _answer(engine.run([Call(0, "generate", (
            config.blocks, config.txs_per_block, config.seed, config.block_interval))],
            timeout=SETUP_TIMEOUT)[0], "building the chain")
        chain = _answer(engine.run([Call(0, "export")], timeout=SETUP_TIMEOUT)[0],
                        "exporting the chain")
        imports = engine.run([Call(builder, "import_blocks", (chain,))
                              for builder in range(1, config.builder_count)],
                             timeout=SETUP_TIMEOUT)
        tips = [first] + [_answer(tip, "importing the chain") for tip in imports]
        setup_wall = time.perf_counter() - setup_started
        run_started = time.perf_counter()
        network = NetworkRun(config, engine, costs=costs, observe=observe, batch=batch)
        network.start(tips)
        network.run()
        run_wall = time.perf_counter() - run_started
        return NetworkReport(config=config, costs=costs, engine=engine.describe(),
                             nodes=tuple(state.result for state in network.states),
                             totals=network.totals(), setup_wall_seconds=setup_wall,
                             run_wall_seconds=run_wall,
                             peak_memory_bytes=tuple(engine.peak_memory()))
    finally:
        engine.close()
