"""A network run decided by Snowman: :class:`SnowmanNetworkRun`, and the consensus and
safety figures of any network run (:func:`consensus_figures`).

Every node runs a :class:`~vmstack.consensus.SnowmanEngine` over its own stack once it has
bootstrapped (the builders from the start; the others when their first bootstrap ends, as
:mod:`vmstack.sim.network.bootstrap` runs it). Queries, chits and blocks are messages on the
simulated links: each takes its link's latency, jitter and its size over the bandwidth, or
is dropped; a message that is dropped, cut by a partition or sent to a node that is down or
not in consensus yet comes back to the node waiting for its answer as a failure
(``QueryFailed`` / ``GetFailed``) one network timeout later. Each node builds when the
proposer windows of its own preferred block give it a slot (``block_interval`` after that
block at the earliest): a node that has not seen the newest block builds a competing one.
A partition (``FRACTION@START-END``) cuts the nodes holding FRACTION of the stake, taken in
index order, off from the others between those simulated seconds; each side's engines are
told the other side is disconnected, and reconnected when it heals.

Building stops once ``live_blocks`` heights above the starting chain are accepted somewhere;
the run then goes on until every live node in consensus has accepted the same last block
with nothing left processing (converged), or until a simulated deadline (not converged).
See docs/network-consensus.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from vmstack.consensus.engine import (
    Chits,
    Get,
    GetFailed,
    Message,
    PullQuery,
    PushQuery,
    Put,
    QueryFailed,
)
from vmstack.sim.network.node import Call, Tip
from vmstack.sim.network.node_consensus import ConsensusStep
from vmstack.sim.network.records import NetworkReport, parse_partition
from vmstack.sim.network.run import NetworkRun

__all__ = ["SnowmanNetworkRun", "consensus_figures", "partition_minority"]

#: What decides a network run's blocks when ``--consensus`` is not given.
DEFAULT_CONSENSUS = "snowman"

#: Bytes a message takes on a link besides a block it carries (IDs, heights, framing).
MESSAGE_OVERHEAD = 64

#: Simulated seconds a run may go on, past its partition's end, per live block and fixed,
#: before it is reported as not converged.
DEADLINE_PER_BLOCK = 30.0
DEADLINE_FIXED = 300.0


def partition_minority(weights: list[int] | tuple[int, ...], fraction: float) -> set[int]:
    """The nodes cut off by a partition of ``fraction`` of the stake: in index order until
    their stake reaches ``fraction`` of the total."""
    total = sum(weights)
    cut: set[int] = set()
    held = 0
    for index, weight in enumerate(weights):
        if held >= fraction * total:
            break
        cut.add(index)
        held += weight
    return cut


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _message_size(message: Message) -> int:
    if isinstance(message, PushQuery | Put):
        return MESSAGE_OVERHEAD + len(message.block)
    return MESSAGE_OVERHEAD


class SnowmanNetworkRun(NetworkRun):
    """A network run whose blocks every node's Snowman engine decides (the module's
    docstring says how); figures in :func:`consensus_figures`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        config = self.config
        self.params = config.consensus_parameters()
        self.in_consensus: list[bool] = [False] * config.nodes
        self.processing: list[int] = [0] * config.nodes
        self.preferences: list[bytes | None] = [None] * config.nodes
        self.build_tokens: list[int] = [0] * config.nodes
        self.polls: list[tuple[int, int]] = [(0, 0)] * config.nodes
        self.accepted_ids: list[list[bytes]] = [[] for _ in range(config.nodes)]
        self.rejected_counts: list[int] = [0] * config.nodes
        self.accepted_at_height: dict[int, bytes] = {}
        self.rejected_blocks: set[bytes] = set()
        self.built_at: dict[bytes, float] = {}
        self.built_transactions: dict[bytes, tuple[bytes, ...]] = {}
        #: The block pairs byzantine proposers built in one slot each.
        self.equivocations: list[tuple[bytes, ...]] = []
        self.finality: list[float] = []
        self.conflicting_accepts = 0
        self.start_height = 0
        self.converged = False
        self.partitioned = False
        self.asking_frontier = False
        partition = config.partition
        self.minority = (
            partition_minority(self.stake.weights, partition[0]) if partition is not None else set()
        )
        end = partition[2] if partition is not None else 0.0
        self.deadline = (
            self.started + end + DEADLINE_FIXED + DEADLINE_PER_BLOCK * config.live_blocks
        )
        self.failure_delay = max(config.network.timeout, self.lookahead)

    # --- the event loop: nothing past the deadline or after convergence ------------------

    def schedule(self, delay: float, node: int, then: Any, **kwargs: Any) -> None:
        """As the event loop's, but events past the deadline or after the run converged
        are not scheduled."""
        if self.converged or self.clock() + delay > self.deadline:
            return
        super().schedule(delay, node, then, **kwargs)

    # --- joining: bootstrapping as before, then consensus --------------------------------

    def start(self, builder_tips: list[Tip]) -> None:
        self.start_height = builder_tips[0].height
        super().start(builder_tips)
        for builder in range(self.config.builder_count):
            self._join_consensus(builder)
        partition = self.config.partition
        if partition is not None:
            _, begin, end = partition
            self.schedule(begin, 0, lambda _: self._partition(True), always=True)
            self.schedule(end, 0, lambda _: self._partition(False), always=True)

    def _schedule_height(self) -> None:
        """The coordinator builds nothing: each node builds in its own slots."""

    def _worth_polling(self, node: int) -> bool:
        """A node in consensus learns of new blocks from its engine, not from polls."""
        if self.in_consensus[node]:
            return False
        return super()._worth_polling(node)

    def _caught_up(self, node: int) -> None:
        super()._caught_up(node)
        if not self.in_consensus[node] and self._up(node):
            self._join_consensus(node)

    def _join_consensus(self, node: int) -> None:
        self.in_consensus[node] = True
        config = self.config
        disconnected = tuple(sorted(self._other_side(node))) if self.partitioned else ()
        self._node_call(
            node,
            0.0,
            lambda now: Call(
                node,
                "consensus_join",
                (
                    now,
                    self.params,
                    config.seed * 1_000_003 + node,
                    config.block_interval,
                    disconnected,
                    self.start_height,
                ),
            ),
        )

    def _other_side(self, node: int) -> set[int]:
        if node in self.minority:
            return set(range(self.config.nodes)) - self.minority
        return set(self.minority)

    def _cut(self, a: int, b: int) -> bool:
        return self.partitioned and ((a in self.minority) != (b in self.minority))

    def _partition(self, begin: bool) -> None:
        self.partitioned = begin
        for node in range(self.config.nodes):
            if not self.in_consensus[node] or not self._up(node):
                continue
            peers = tuple(sorted(self._other_side(node)))
            self._node_call(
                node,
                self.lookahead,
                lambda now, node=node, peers=peers: Call(
                    node, "consensus_connect", (now, peers, not begin)
                ),
            )

    # --- calls and messages ---------------------------------------------------------------

    def _node_call(self, node: int, delay: float, make: Any) -> None:
        at = self.clock() + delay
        self.schedule(delay, node, lambda step: self._stepped(node, step), call=lambda: make(at))

    def _carry(self, source: int, destination: int, message: Message) -> None:
        transfer = None
        if not self._cut(source, destination) and self._up(destination):
            transfer = self.mesh.transfer(source, destination, _message_size(message))
        if transfer is None:
            self._fail(source, destination, message, self.failure_delay)
            return
        at = self.clock() + transfer

        def call() -> Call | None:
            if not self.in_consensus[destination] or not self.states[destination].ready:
                return None
            return Call(destination, "consensus_receive", (at, source, message))

        def then(step: Any) -> None:
            if step is None:
                self._fail(source, destination, message, self.failure_delay)
                return
            self._stepped(destination, step)

        self.schedule(transfer, destination, then, call=call, always=True)

    def _fail(self, source: int, destination: int, message: Message, delay: float) -> None:
        """The failure the node waiting for an answer to ``message`` gets."""
        failure: Message
        if isinstance(message, PushQuery | PullQuery):
            waiting, peer, failure = source, destination, QueryFailed(message.request_id)
        elif isinstance(message, Chits):
            waiting, peer, failure = destination, source, QueryFailed(message.request_id)
        elif isinstance(message, Get):
            waiting, peer, failure = source, destination, GetFailed(message.request_id)
        elif isinstance(message, Put):
            waiting, peer, failure = destination, source, GetFailed(message.request_id)
        else:
            return
        if not self._up(waiting) or not self.in_consensus[waiting]:
            return
        self._node_call(
            waiting, delay, lambda now: Call(waiting, "consensus_receive", (now, peer, failure))
        )

    def _stepped(self, node: int, step: Any) -> None:
        if not isinstance(step, ConsensusStep):
            return
        now = self.clock()
        state = self.states[node]
        self._set_tip(node, step.tip)
        if self.network_tip is None or step.tip.height > self.network_tip.height:
            self.network_tip = step.tip
        self.processing[node] = step.processing
        self.polls[node] = (step.polls_successful, step.polls_failed)
        for position, block_id in enumerate(step.built):
            self.built += 1
            state.result.blocks_built += 1
            self.built_at.setdefault(block_id, now)
            if self.config.tx_rate:
                self.built_transactions[block_id] = step.transactions[position]
            slot, delay = step.built_slots[position]
            slots = self.slots
            slots.built_in_slot[slot] = slots.built_in_slot.get(slot, 0) + 1
            slots.delays[delay] = slots.delays.get(delay, 0) + 1
        if step.equivocated:
            self.equivocations.append(step.equivocated)
            self.built += len(step.equivocated)
            state.result.blocks_built += len(step.equivocated)
            for block_id in step.equivocated:
                self.built_at.setdefault(block_id, now)
        for block_id, height in step.accepted:
            self.accepted_ids[node].append(block_id)
            first = height not in self.accepted_at_height
            held = self.accepted_at_height.setdefault(height, block_id)
            if first and height > self.start_height:
                self.slots.tip.append((now - self.started, height))
            if held != block_id:
                self.conflicting_accepts += 1
            elif self.config.tx_rate and block_id in self.built_transactions:
                # First accepted anywhere: its transactions are included now.
                self.gossip_included_hashes(self.built_transactions.pop(block_id))
            if block_id in self.built_at:
                self.finality.append(now - self.built_at[block_id])
        self.rejected_counts[node] += len(step.rejected)
        self.rejected_blocks.update(step.rejected)
        for destination, message in step.sends:
            self._carry(node, destination, message)
        self._plan_build(node, step)
        self._check_converged()

    # --- building in each node's own slots -------------------------------------------------

    def _accepted_heights(self) -> int:
        return max(self.accepted_at_height, default=self.start_height) - self.start_height

    def _plan_build(self, node: int, step: ConsensusStep) -> None:
        if step.preference == self.preferences[node] and not step.built:
            return
        self.preferences[node] = step.preference
        self.build_tokens[node] += 1
        if step.build_at is None or self._accepted_heights() >= self.config.live_blocks:
            return
        token = self.build_tokens[node]
        preference = step.preference
        config = self.config
        height = step.preference_height
        # With transaction gossip, a builder builds from its own pool.
        txs = 0 if config.tx_rate else config.txs_per_block

        def build(now: float) -> Call | None:
            if self.build_tokens[node] != token:
                return None
            if self._accepted_heights() >= config.live_blocks:
                return None
            arguments = (now, preference, config.seed, height * config.txs_per_block, txs)
            if node in config.equivocators:
                others = [other for other in range(config.nodes) if other != node]
                half = len(others) // 2
                halves = (tuple(others[:half]), tuple(others[half:]))
                return Call(node, "consensus_equivocate", (*arguments, halves))
            return Call(node, "consensus_build", arguments)

        at = max(step.build_at, self.clock())
        self.schedule(
            at - self.clock(),
            node,
            lambda answer: self._stepped(node, answer),
            call=lambda: build(at),
        )

    def _check_converged(self) -> None:
        if self._accepted_heights() < self.config.live_blocks:
            return
        if not self.asking_frontier:
            self.asking_frontier = True
            self.schedule(
                self.config.block_interval, 0, lambda _: self._frontier_round(), always=True
            )
        last: bytes | None = None
        for node, state in enumerate(self.states):
            if not self._up(node) or state.result.stalled is not None:
                continue
            if not self.in_consensus[node]:
                return  # still joining
            if self.processing[node] or state.tip is None:
                return
            if last is None:
                last = state.tip.block_id
            elif state.tip.block_id != last:
                return
        self.converged = last is not None
        if self.converged:
            # Every live node decided the same last block: what is still queued (slots
            # to come, polls of nothing processing) changes nothing any more.
            self.building = False
            self._queue.clear()

    def _frontier_round(self) -> None:
        """Once building stopped: every live node in consensus with nothing processing asks
        one validator for what lies above its last accepted block, every
        ``block_interval``, until the run converges."""
        for node in range(self.config.nodes):
            if self._up(node) and self.in_consensus[node] and not self.processing[node]:
                self._node_call(
                    node,
                    self.lookahead,
                    lambda now, node=node: Call(node, "consensus_frontier", (now,)),
                )
        self.schedule(self.config.block_interval, 0, lambda _: self._frontier_round(), always=True)

    def finish(self) -> None:
        """Write every node's decisions into its result."""
        for node, state in enumerate(self.states):
            ids = self.accepted_ids[node]
            state.result.accepted_count = len(ids)
            state.result.rejected_count = self.rejected_counts[node]
            state.result.accepted_ids = [block_id.hex() for block_id in ids]


def consensus_figures(run: NetworkRun) -> tuple[dict[str, object], dict[str, object]]:
    """The ``consensus`` and ``safety`` figures of a finished run (a coordinator run
    decides each block once built: no polls, no rejects, finality 0)."""
    if isinstance(run, SnowmanNetworkRun):
        params = run.params
        successful = sum(polls[0] for polls in run.polls)
        failed = sum(polls[1] for polls in run.polls)
        finality = run.finality
        return (
            {
                "engine": "snowman",
                "params": {
                    "k": params.k,
                    "alpha_preference": params.alpha_preference,
                    "alpha_confidence": params.alpha_confidence,
                    "beta": params.beta,
                    "concurrent_repolls": params.concurrent_repolls,
                    "optimal_processing": params.optimal_processing,
                },
                "polls_successful": successful,
                "polls_failed": failed,
                "blocks_accepted": len(run.accepted_at_height),
                "blocks_rejected": len(run.rejected_blocks),
                "finality_s": {
                    "p50": _percentile(finality, 0.5) if finality else None,
                    "p90": _percentile(finality, 0.9) if finality else None,
                    "max": max(finality) if finality else None,
                },
                "converged": run.converged,
            },
            {"conflicting_accepts": run.conflicting_accepts},
        )
    start = run.slots.tip[0][1] if run.slots.tip else 0
    for state in run.states:
        state.result.accepted_count = max(0, state.result.height - start)
    return (
        {
            "engine": "coordinator",
            "params": None,
            "polls_successful": 0,
            "polls_failed": 0,
            "blocks_accepted": run.built,
            "blocks_rejected": 0,
            "finality_s": {"p50": 0.0, "p90": 0.0, "max": 0.0},
            "converged": True,
        },
        {"conflicting_accepts": 0},
    )


def consensus_options(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration's consensus keywords from ``simulate``'s parsed options
    (``--consensus``, ``--k``, ``--alpha``, ``--beta``, ``--partition``)."""
    partition = getattr(args, "partition", None)
    return {
        "consensus": getattr(args, "consensus", None) or DEFAULT_CONSENSUS,
        "k": getattr(args, "k", None),
        "alpha": getattr(args, "alpha", None),
        "beta": getattr(args, "beta", None),
        "partition": None if partition is None else parse_partition(partition),
    }


def print_consensus_summary(report: NetworkReport, console: Console) -> None:
    """The consensus figures of a Snowman run, one table (a coordinator run prints none):
    the JSON's, and per accepted block (heights accepted above the starting chain) the
    successful polls over every node, the same per node, and the messages of the run
    (bootstrapping's too) per node."""
    decided = report.consensus
    if decided.get("engine") != "snowman":
        return
    table = Table(title="consensus (snowman)", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    finality = decided["finality_s"]
    assert isinstance(finality, dict)
    for name in ("polls_successful", "polls_failed", "blocks_accepted", "blocks_rejected"):
        table.add_row(name, str(decided[name]))
    accepted = decided["blocks_accepted"]
    assert isinstance(accepted, int)
    if accepted:
        successful = decided["polls_successful"]
        messages = report.totals.get("messages") or 0
        assert isinstance(successful, int)
        nodes = report.config.nodes
        table.add_row("polls per accepted block", f"{successful / accepted:.1f}")
        table.add_row("  per node", f"{successful / accepted / nodes:.1f}")
        table.add_row("messages per node per block", f"{messages / nodes / accepted:.1f}")
    for name in ("p50", "p90", "max"):
        value = finality[name]
        table.add_row(f"finality {name} s", "-" if value is None else f"{value:.3f}")
    table.add_row("converged", str(decided["converged"]))
    table.add_row("conflicting_accepts", str(report.safety.get("conflicting_accepts")))
    console.print(table)


def finality_plot_path(path: Path) -> Path:
    """Where the finality plot of a run plotted to ``path`` goes: beside it."""
    return path.with_name(f"{path.stem}-finality{path.suffix or '.png'}")


def write_finality_plot(report: NetworkReport, path: Path) -> None:
    """A PNG (needs matplotlib, as ``--plot``) of the finality times of a Snowman run: a
    histogram of the seconds from a block's issue on its builder to its acceptance on each
    node."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4))
    samples = list(report.finality_samples)
    axes.hist(samples, bins=min(50, max(1, len(samples))), color="tab:blue")
    axes.set_xlabel("finality (s, issue on the builder to accept on a node)")
    axes.set_ylabel("accepts")
    axes.set_title(
        f"{report.config.nodes} nodes, snowman: finality times (seed {report.config.seed})"
    )
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
