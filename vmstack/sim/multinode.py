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

The run is layered: the records in :mod:`vmstack.sim.network_records`, the event loop and
every node's book in :mod:`vmstack.sim.network_events`, joining and catching up in
:mod:`vmstack.sim.network_bootstrap`; this module adds building and gossip, starts the
nodes (late joiners at a random time) and runs the whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from vmstack.errors import VMStackError
from vmstack.sim.costs import REFERENCE_COSTS, CostModel
from vmstack.sim.engines import (
    Built,
    Call,
    Delivered,
    Engine,
    NodeCrashed,
    NodeSpec,
    Tip,
)
from vmstack.sim.network import Mesh
from vmstack.sim.network_bootstrap import NodeBootstrapping
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


class NetworkRun(NodeBootstrapping):
    """The coordinator of one run: the event loop, the mesh, and every node's book
    (:class:`~vmstack.sim.network_events.NetworkEventLoop`), the bootstrapping protocol
    (:class:`~vmstack.sim.network_bootstrap.NodeBootstrapping`), building and gossip.

    ``observe(run)``, if given, is called after every batch of calls (a hook for progress
    and for fault injection: ``run.engine.crash(i)``). ``batch=False`` hands the engine one
    event's call at a time: the reference that the batched run equals, figure for figure.
    """

    # --- building and gossip -----------------------------------------------------------

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
            self._gossip(node, builder, built.block, built.tip, delay)
        self._schedule_slot(slot + 1, self.config.block_interval)

    def _gossip(self, node: int, builder: int, block: bytes, block_tip: Tip,
                delay: float) -> None:
        state = self.states[node]
        at = self.clock() + delay
        self.schedule(delay, node,
                      lambda delivered: self._delivered(node, builder, block, block_tip,
                                                        delivered),
                      call=lambda: (Call(node, "deliver", (block, at))
                                    if state.ready and not state.in_round else None))

    def _delivered(self, node: int, builder: int, block: bytes, block_tip: Tip,
                   delivered: Delivered | None) -> None:
        state = self.states[node]
        if delivered is None:
            state.result.gossip_ignored += 1
            return
        now = self.clock()
        start = max(now, state.busy_until)
        state.busy_until = start + self.costs.parse_serial(1, len(block)) + \
            self.costs.execute(1, len(block))
        if delivered.refused is not None:
            self._bad_answer(node, builder)
        elif delivered.accepted:
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
            self.serving.append(builder)
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
            "bad_answers": sum(r.bad_answers for r in results),
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
                                   if index < config.builder_count else None),
                     store=config.node_store_used)
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
        transactions = _answer(engine.run([Call(0, "transactions", (config.blocks,))],
                                          timeout=SETUP_TIMEOUT)[0],
                               "counting the chain's transactions")
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
                             peak_memory_bytes=tuple(engine.peak_memory()),
                             transactions=transactions,
                             memory_by_place=engine.memory_by_place())
    finally:
        engine.close()
