"""A network of validators: the proposer windows pick who extends the chain, and nodes
bootstrap from each other.

:func:`simulate_network` runs ``nodes`` nodes, each with its own full stack and LMDB store
(a :class:`~vmstack.sim.network.node.NodeServer`), in this process or in Ray actors (an
:class:`~vmstack.sim.network.engines.Engine`). The first ``builders`` nodes hold a chain of
``blocks`` blocks when the run starts (one builds it, the others import it); the other nodes
start empty and bootstrap concurrently from random peers with the engine's loop: ask a peer
for its last accepted block, then ``get_ancestors`` from it down to a block the node has,
``batched_parse_block`` each answer, verify and accept oldest first; a request that is
dropped or not answered in time goes to another peer. A share of them join late (churn).
Every node validates with a stake drawn from the seed
(:mod:`vmstack.sim.network.stake`), and meanwhile ``live_blocks`` new blocks are built in
the proposer windows (Snowman++, post-Durango): the block above the network's tip is built
``block_interval`` seconds after it by the expected proposer of that time's slot, if that
node is up and caught up (its last accepted block is the tip); otherwise the slot is
missed and the next slot's expected proposer tries at the slot's start, 5 s later, and so
on. Every node's proposer layer enforces the same windows on what it builds and verifies.
The coordinator stands in for consensus: a block is final once built, and only a node at
the tip builds, so there is never a second block at one height (a node that is behind
loses its slot; each missed slot is reported with its reason). The builder gossips each
block to every node; a bootstrapped node accepts a
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

The run is layered: the records in :mod:`vmstack.sim.network.records`, the event loop and
every node's book in :mod:`vmstack.sim.network.events`, joining and catching up in
:mod:`vmstack.sim.network.bootstrap`; this module adds building and gossip, starts the
nodes (late joiners at a random time) and runs the whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from vmstack.errors import AnyoneCanPropose, NodeCrashed, VMStackError
from vmstack.sim.costs import REFERENCE_COSTS, CostModel
from vmstack.sim.network.bootstrap import NodeBootstrapping
from vmstack.sim.network.engines import Engine
from vmstack.sim.network.gossip_run import TransactionGossipping
from vmstack.sim.network.node import Built, Call, Delivered, NodeSpec, Tip
from vmstack.sim.network.records import (
    MISSED_REASONS,
    MissedSlot,
    NetworkReport,
    NetworkSimulationConfig,
)
from vmstack.sim.network.stake import StakeSchedule, node_staking_seed
from vmstack.wrappers.proposer.windower import (
    MAX_LOOK_AHEAD_SLOTS,
    WINDOW_DURATION,
    time_to_slot,
)

__all__ = ["NetworkRun", "simulate_network"]

#: Seconds the engine may take to build, export or import the builders' chain.
SETUP_TIMEOUT = 3600.0


class NetworkRun(NodeBootstrapping, TransactionGossipping):
    """The coordinator of one run: the event loop, the mesh, and every node's book
    (:class:`~vmstack.sim.network.events.NetworkEventLoop`), the bootstrapping protocol
    (:class:`~vmstack.sim.network.bootstrap.NodeBootstrapping`), building and gossip.

    ``observe(run)``, if given, is called after every batch of calls (a hook for progress
    and for fault injection: ``run.engine.crash(i)``). ``batch=False`` hands the engine one
    event's call at a time: the reference that the batched run equals, figure for figure.
    """

    # --- building in the proposer windows, and gossip ----------------------------------

    def _schedule_height(self) -> None:
        """The slots of the block above the network's tip, from the one ``block_interval``
        after the tip on; building ends once ``live_blocks`` are built or no node is up."""
        tip = self.network_tip
        if tip is None or self.built >= self.config.live_blocks:
            self.building = False
            return
        first = time_to_slot(tip.timestamp, tip.timestamp + self.config.block_interval)
        self._schedule_slot(tip, first, first)

    def _slot_time(self, parent: Tip, slot: int) -> float:
        """When the proposer of ``slot`` builds the child of ``parent``: ``block_interval``
        after it, or the slot's start if later."""
        return max(
            parent.timestamp + self.config.block_interval, parent.timestamp + WINDOW_DURATION * slot
        )

    def _proposer(self, parent: Tip, slot: int) -> int | None:
        """The node the windows expect to build the child of ``parent`` in ``slot``, or
        ``None`` when anyone may (a pre-fork parent, or no validator at its P-chain
        height)."""
        if not parent.post_fork:
            return None
        try:
            node_id = self.windower.expected_proposer(parent.height + 1, parent.pchain_height, slot)
        except AnyoneCanPropose:
            return None
        return self.stake.node_of(node_id)

    def _at_tip(self, node: int, parent: Tip) -> bool:
        """Whether ``node`` is up, has joined and caught up once, and has ``parent``, the
        network's tip, as its last accepted block."""
        state = self.states[node]
        return (
            self._up(node)
            and state.ready
            and state.tip is not None
            and state.tip.block_id == parent.block_id
        )

    def _schedule_slot(self, parent: Tip, slot: int, first: int) -> None:
        """Slot ``slot`` for the child of ``parent``: its expected proposer builds if it is
        up and caught up, else the slot is missed and the next slot's proposer tries
        (``first`` is the first slot tried for this height). When anyone may propose, the
        first caught-up node builds (the first node up if none is). Building ends when no
        node is up, or when a height's slots were all missed for the windower's whole
        look-ahead (an hour of slots): the report then shows fewer blocks built."""
        if not self._any_up():
            self.building = False
            return
        if slot - first >= MAX_LOOK_AHEAD_SLOTS:
            self.building = False  # no proposer came within the windower's look-ahead
            return
        expected = self._proposer(parent, slot)
        if expected is None:
            candidates = [
                node for node in range(self.config.nodes) if self._at_tip(node, parent)
            ] or [node for node in range(self.config.nodes) if self._up(node)]
            node = candidates[0]
        else:
            node = expected
        at = self._slot_time(parent, slot)
        config = self.config
        # With transaction gossip, a builder builds from its own pool.
        txs = 0 if config.tx_rate else config.txs_per_block

        def build() -> Call | None:
            if not self._at_tip(node, parent):
                return None
            return Call(node, "build", (at, config.seed, parent.height * config.txs_per_block, txs))

        self.schedule(
            max(0.0, at - self.clock()),
            node,
            lambda built: self._slot_done(node, parent, slot, first, at, built),
            call=build,
            always=True,
        )

    def _slot_done(
        self, node: int, parent: Tip, slot: int, first: int, at: float, built: Built | None
    ) -> None:
        state = self.states[node]
        if built is None:
            reason = (
                "down" if state.result.crashed else "not joined" if not state.joined else "behind"
            )
            self.missed_slots += 1
            state.result.slots_missed += 1
            self.slots.missed.append(
                MissedSlot(parent.height + 1, slot, at - self.started, node, reason)
            )
            self._schedule_slot(parent, slot + 1, first)
            return
        self.built += 1
        state.result.blocks_built += 1
        if self.config.tx_rate:
            self.gossip_included(built)
        self._set_tip(node, built.tip)
        self.network_tip = built.tip
        slots = self.slots
        slots.built_in_slot[slot] = slots.built_in_slot.get(slot, 0) + 1
        delay = built.tip.timestamp - parent.timestamp
        slots.delays[delay] = slots.delays.get(delay, 0) + 1
        slots.tip.append((self.clock() - self.started, built.tip.height))
        for other_node, other in enumerate(self.states):
            if other_node == node or not self._up(other_node) or not other.joined:
                continue
            transfer = self.mesh.transfer(node, other_node, len(built.block))
            if transfer is None:
                continue
            self._gossip(other_node, node, built.block, built.tip, transfer)
        self._schedule_height()

    def _gossip(self, node: int, builder: int, block: bytes, block_tip: Tip, delay: float) -> None:
        state = self.states[node]
        at = self.clock() + delay
        self.schedule(
            delay,
            node,
            lambda delivered: self._delivered(node, builder, block, block_tip, delivered),
            call=lambda: (
                Call(node, "deliver", (block, at)) if state.ready and not state.in_round else None
            ),
        )

    def _delivered(
        self, node: int, builder: int, block: bytes, block_tip: Tip, delivered: Delivered | None
    ) -> None:
        state = self.states[node]
        if delivered is None:
            state.result.gossip_ignored += 1
            return
        now = self.clock()
        start = max(now, state.busy_until)
        state.busy_until = (
            start + self.costs.parse_serial(1, len(block)) + self.costs.execute(1, len(block))
        )
        if delivered.refused is not None:
            self._bad_answer(node, builder)
        elif delivered.accepted:
            state.result.gossip_accepted += 1
            self._set_tip(node, delivered.tip)
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
            state.joined, state.ready = True, True
            self.serving.append(builder)
            self._set_tip(builder, tip)
            state.result.bootstrap_seconds = 0.0
        self.network_tip = builder_tips[0]
        self.slots.tip.append((0.0, builder_tips[0].height))
        for builder in range(config.builder_count):
            self._schedule_poll(builder)
        join_window = config.block_interval * config.live_blocks / 2
        for state in self.states[config.builder_count :]:
            node = state.result.index
            delay = self.rng.uniform(0.0, join_window) if state.result.role == "late" else 0.0
            self._schedule_join(node, delay)
        self._schedule_height()
        if config.tx_rate:
            self.start_gossip()

    def _schedule_join(self, node: int, delay: float) -> None:
        self.schedule(delay, node, lambda _: self._join(node))

    def totals(self) -> dict[str, float | int | None]:
        """The network's figures (all simulated)."""
        results = [state.result for state in self.states]
        tip_height = self.network_tip.height if self.network_tip is not None else 0
        bootstraps = [
            r.bootstrap_seconds
            for r in results
            if r.role != "builder" and r.bootstrap_seconds is not None
        ]
        return {
            "requests": sum(r.requests for r in results),
            "retries": sum(r.retries for r in results),
            "bytes_received": sum(r.bytes_received for r in results),
            "blocks_fetched": sum(r.blocks_fetched for r in results),
            "bad_answers": sum(r.bad_answers for r in results),
            "messages": self.mesh.messages,
            "dropped": self.mesh.dropped,
            "bytes_sent": self.mesh.bytes_sent,
            "blocks_built": self.built,
            "missed_slots": self.missed_slots,
            **{
                f"missed_{reason.replace(' ', '_')}": sum(
                    1 for missed in self.slots.missed if missed.reason == reason
                )
                for reason in MISSED_REASONS
            },
            "tip_height": tip_height,
            # At the tip: holding the network's tip block itself, not a block of its height.
            "nodes_at_tip": sum(
                1
                for state in self.states
                if not state.result.crashed
                and state.ready
                and state.tip is not None
                and self.network_tip is not None
                and state.tip.block_id == self.network_tip.block_id
            ),
            "crashed": sum(1 for r in results if r.crashed),
            "stalled": sum(1 for r in results if r.stalled is not None),
            "bootstrapped": len(bootstraps),
            "mean_bootstrap_seconds": (sum(bootstraps) / len(bootstraps) if bootstraps else None),
            "max_bootstrap_seconds": max(bootstraps) if bootstraps else None,
            "simulated_seconds": self.clock() - self.started,
            "events": self.events_run,
            "batches": self.batches,
            "calls": self.calls,
            "widest_batch": self.widest_batch,
            "lookahead_seconds": self.lookahead,
        }


def _specs(config: NetworkSimulationConfig, stake: StakeSchedule) -> list[NodeSpec]:
    return [
        NodeSpec(
            index=index,
            chain_id=config.chain_id,
            start_time=config.start_time,
            fork_time=config.fork_time,
            transition_time=config.transition_time,
            staking_seed=node_staking_seed(config.seed, index),
            stake=stake,
            store=config.node_store_used,
        )
        for index in range(config.nodes)
    ]


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
    stake: StakeSchedule | None = None,
) -> NetworkReport:
    """Run the network ``config`` describes on ``engine`` and return every figure.

    The engine is started here and closed before returning (also on error). ``observe``
    and ``batch`` are :class:`NetworkRun`'s; ``stake`` replaces the validators drawn from
    the configuration (one weight per node, NodeIDs those of the nodes' keys). A node that
    crashes during the run is reported in its result; one that crashes while the chain is
    being set up fails the run with :class:`~vmstack.errors.VMStackError`.
    """
    setup_started = time.perf_counter()
    drawn = StakeSchedule.draw(
        nodes=config.nodes, kind=config.stake, seed=config.seed, durango_time=config.start_time
    )
    if stake is None:
        stake = drawn
    elif stake.node_ids != drawn.node_ids or stake.durango_time != drawn.durango_time:
        raise ValueError(
            "a stake schedule given to a run has its nodes' NodeIDs and Durango "
            "time (StakeSchedule.with_weights of the drawn one)"
        )
    try:
        engine.start(_specs(config, stake))
        first = _answer(
            engine.run(
                [
                    Call(
                        0,
                        "generate",
                        (config.blocks, config.txs_per_block, config.seed, config.block_interval),
                    )
                ],
                timeout=SETUP_TIMEOUT,
            )[0],
            "building the chain",
        )
        transactions = _answer(
            engine.run([Call(0, "transactions", (config.blocks,))], timeout=SETUP_TIMEOUT)[0],
            "counting the chain's transactions",
        )
        chain = _answer(
            engine.run([Call(0, "export")], timeout=SETUP_TIMEOUT)[0], "exporting the chain"
        )
        imports = engine.run(
            [
                Call(builder, "import_blocks", (chain,))
                for builder in range(1, config.builder_count)
            ],
            timeout=SETUP_TIMEOUT,
        )
        tips = [first] + [_answer(tip, "importing the chain") for tip in imports]
        setup_wall = time.perf_counter() - setup_started
        run_started = time.perf_counter()
        from vmstack.sim.network.consensus import SnowmanNetworkRun, consensus_figures

        run_class = SnowmanNetworkRun if config.consensus == "snowman" else NetworkRun
        network = run_class(config, engine, costs=costs, observe=observe, batch=batch, stake=stake)
        network.start(tips)
        network.run()
        if isinstance(network, SnowmanNetworkRun):
            network.finish()
        decided, safety = consensus_figures(network)
        gossip = network.gossip_report() if config.tx_rate else None
        run_wall = time.perf_counter() - run_started
        return NetworkReport(
            config=config,
            costs=costs,
            engine=engine.describe(),
            nodes=tuple(state.result for state in network.states),
            totals=network.totals(),
            setup_wall_seconds=setup_wall,
            run_wall_seconds=run_wall,
            peak_memory_bytes=tuple(engine.peak_memory()),
            transactions=transactions,
            slots=network.slots,
            memory_by_place=engine.memory_by_place(),
            consensus=decided,
            safety=safety,
            finality_samples=tuple(getattr(network, "finality", ())),
            gossip=gossip,
        )
    finally:
        engine.close()
