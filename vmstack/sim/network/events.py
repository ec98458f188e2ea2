"""The coordinator's event loop of a network run, and its book of every node.

:class:`NetworkEventLoop` holds what the coordinator knows (the configuration, the seeded
random draws, the mesh, one :class:`NodeState` per node, the simulated clock) and runs the
events in time order. Events whose calls cannot influence each other (within one minimum
link latency, on different nodes, or only reads of one node) go to the engine together and
are then completed in time order, running first any event scheduled meanwhile for an earlier
time: the outcome is that of running every event one by one. The node protocols that
schedule the events are :mod:`vmstack.sim.network.bootstrap` (joining and catching up) and
:mod:`vmstack.sim.network.run` (building and gossip).
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from typing import Any, Self

import attrs

from vmstack.clock import SimClock
from vmstack.errors import NodeCrashed, VMStackError
from vmstack.sim.costs import REFERENCE_COSTS, CostModel
from vmstack.sim.network.engines import Engine
from vmstack.sim.network.mesh import Mesh
from vmstack.sim.network.node import Call, Tip
from vmstack.sim.network.records import NetworkSimulationConfig, NodeResult, SlotRecord
from vmstack.sim.network.stake import StakeSchedule

__all__ = ["NetworkEventLoop", "NodeState"]


@attrs.define
class NodeState:
    """The coordinator's book of one node: its result, plus what its protocol is doing;
    ``distrusted`` holds the peers that gave it a bad answer (it asks them no more)."""

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
    distrusted: set[int] = attrs.field(factory=set)


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


class NetworkEventLoop:
    """The coordinator's event loop and book of every node; the node protocols build on it.

    ``observe(run)``, if given, is called after every batch of calls. ``batch=False`` hands
    the engine one event's call at a time: the reference that the batched run equals.
    ``stake`` is the validators' schedule (drawn from the configuration when ``None``):
    every node's result carries its weight and share.
    """

    def __init__(
        self,
        config: NetworkSimulationConfig,
        engine: Engine,
        *,
        costs: CostModel = REFERENCE_COSTS,
        observe: Callable[[Self], None] | None = None,
        batch: bool = True,
        stake: StakeSchedule | None = None,
    ) -> None:
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
            NodeState(
                NodeResult(
                    index, "builder" if index < builders else "late" if index in late else "node"
                )
            )
            for index in range(config.nodes)
        ]
        self.stake = (
            stake
            if stake is not None
            else StakeSchedule.draw(
                nodes=config.nodes,
                kind=config.stake,
                seed=config.seed,
                durango_time=config.start_time,
            )
        )
        if len(self.stake.weights) != config.nodes:
            raise ValueError(
                f"the stake schedule has {len(self.stake.weights)} nodes, the "
                f"network {config.nodes}"
            )
        self.windower = self.stake.windower(config.chain_id)
        for index, state in enumerate(self.states):
            state.result.weight = self.stake.weights[index]
            state.result.stake_share = self.stake.share(index)
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
        #: Whether blocks are still to be built (the slots go on).
        self.building = True
        self.slots = SlotRecord()

    # --- the event loop --------------------------------------------------------------

    def schedule(
        self,
        delay: float,
        node: int,
        then: Callable[[Any], None],
        *,
        call: Callable[[], Call | None] | None = None,
        read: bool = False,
        always: bool = False,
    ) -> None:
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
                raise ValueError(
                    f"node {current.node} cannot reach node {node} sooner than "
                    f"{self.lookahead:g} s (got {delay:g} s)"
                )
            if current.read and current.node == node:
                raise ValueError("a read event cannot schedule events for its own node")
        event = _Event(self.clock() + delay, next(self._order), node, read, call, then, always)
        heapq.heappush(self._queue, (event.at, event.order, event))

    def run(self: Self) -> None:
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
            raise VMStackError(f"the network did not settle within {self.config.max_events} events")
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

    def _bad_answer(self, node: int, peer: int | None) -> None:
        """Count a bad answer ``node`` had from ``peer`` (``None``: a peer no longer known),
        which ``node`` asks no more."""
        self.states[node].result.bad_answers += 1
        if peer is not None:
            self.states[peer].result.bad_answers_sent += 1
            self.states[node].distrusted.add(peer)

    def _up(self, node: int) -> bool:
        return not self.states[node].result.crashed

    def _any_up(self) -> bool:
        return any(not state.result.crashed for state in self.states)

    def _set_tip(self, node: int, tip: Tip) -> None:
        """Book ``tip`` as ``node``'s last accepted block (its height timeline too)."""
        state = self.states[node]
        state.tip = tip
        if tip.height != state.result.height or not state.result.heights:
            state.result.heights.append((self.clock() - self.started, tip.height))
        state.result.height = tip.height
