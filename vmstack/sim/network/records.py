"""What a network run is asked to do and what it reports: :class:`NetworkSimulationConfig`,
one :class:`NodeResult` per node, and the run's :class:`NetworkReport`.

The configuration checks itself when made (a bad value is a ``ValueError`` naming it); the
results are plain records the coordinator (:mod:`vmstack.sim.network.run`) fills in, and every
figure they hold is simulated except the wall times and memory the report says are measured.
"""

from __future__ import annotations

import math

import attrs

from vmstack.batching import DEFAULT_MAX_BLOCKS_NUM
from vmstack.consensus.parameters import DEFAULT_PARAMETERS, Parameters
from vmstack.defaults import DEFAULT_CHAIN_ID
from vmstack.sim.costs import CostModel
from vmstack.sim.links import NetworkConfig
from vmstack.sim.network.stake import STAKE_KINDS

#: The proposer layer's minimum delay between a block and its child (its default).
MIN_BLOCK_DELAY = 1.0

__all__ = [
    "DESCRIPTORS_PER_LMDB_NODE",
    "MISSED_REASONS",
    "MissedSlot",
    "NetworkReport",
    "NetworkSimulationConfig",
    "NodeResult",
    "SlotRecord",
    "lmdb_nodes_fit",
]

#: File descriptors one node's LMDB environment holds while it is open.
DESCRIPTORS_PER_LMDB_NODE = 4
#: Descriptors kept free for everything else a process opens.
SPARE_DESCRIPTORS = 256


def lmdb_nodes_fit(nodes: int) -> bool:
    """Whether ``nodes`` LMDB node stores fit in the file descriptors this process may
    open (its soft ``RLIMIT_NOFILE``), with :data:`SPARE_DESCRIPTORS` to spare."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return (
        soft == resource.RLIM_INFINITY
        or nodes * DESCRIPTORS_PER_LMDB_NODE + SPARE_DESCRIPTORS <= soft
    )


@attrs.frozen
class NetworkSimulationConfig:
    """What to simulate.

    ``builders`` nodes (default: 1 of 2 nodes, else an eighth of them, between 2 and 4)
    start with the ``blocks``-block chain; of the others, ``late_fraction`` join at a random
    time in the first half of the ``live_blocks`` building phase. A node gives up a request
    after ``max_attempts`` peers in a row failed it; a run still going after ``max_events``
    events fails (a bound against a run that would not end). The chain's transition is a
    third of the way up its first ``blocks`` blocks and the proposer fork two thirds up.
    Every node validates, with a weight drawn as ``stake`` says (one of
    :data:`~vmstack.sim.network.stake.STAKE_KINDS`), and the proposer windows decide who
    builds each of the ``live_blocks`` blocks; ``block_interval`` is how long after its
    parent a block's first slot proposer builds it (at least the proposer layer's
    minimum block delay, 1 s).
    ``node_store`` is where each node keeps its chain: ``lmdb``, ``memory``, or ``auto``
    (LMDB when every node's environment fits in this process's file descriptors, else
    memory; :attr:`node_store_used` says which).
    ``equivocators`` (with ``consensus="snowman"``) are byzantine proposers: in each of
    its slots such a node builds two blocks on its preference and pushes one to each half
    of the other nodes (docs/network-consensus.md).
    """

    nodes: int = 8
    builders: int | None = None
    blocks: int = 120
    txs_per_block: int = 4
    live_blocks: int = 20
    late_fraction: float = 0.25
    seed: int = 1
    network: NetworkConfig = attrs.field(factory=NetworkConfig)
    block_interval: float = 2.0
    start_time: float = 1_700_000_000.0
    chain_id: int = DEFAULT_CHAIN_ID
    max_blocks_num: int = DEFAULT_MAX_BLOCKS_NUM
    max_attempts: int = 100
    max_events: int = 10_000_000
    stake: str = "equal"
    node_store: str = "auto"
    consensus: str = "coordinator"
    k: int | None = None
    alpha: int | None = None
    beta: int | None = None
    partition: tuple[float, float, float] | None = None
    tx_rate: float = 0.0
    equivocators: tuple[int, ...] = attrs.field(default=(), converter=tuple)

    def __attrs_post_init__(self) -> None:
        if self.node_store not in ("auto", "lmdb", "memory"):
            raise ValueError(f"node_store must be auto, lmdb or memory, not {self.node_store!r}")
        if self.nodes < 2:
            raise ValueError(f"a network needs at least 2 nodes, got {self.nodes}")
        if not 1 <= self.builder_count < self.nodes:
            raise ValueError(
                f"builders must be between 1 and nodes - 1 ({self.nodes - 1}), "
                f"got {self.builder_count}"
            )
        if self.blocks < 1 or self.txs_per_block < 0 or self.live_blocks < 0:
            raise ValueError("blocks must be at least 1, txs_per_block and live_blocks at least 0")
        if not 0 <= self.late_fraction <= 1:
            raise ValueError(f"late_fraction must be in [0, 1], got {self.late_fraction}")
        slowest_link = self.network.latency + self.network.latency_spread
        if not self.block_interval > slowest_link:
            raise ValueError(
                f"block_interval must exceed the slowest link's latency "
                f"({slowest_link:g} s), got {self.block_interval}"
            )
        if self.block_interval < MIN_BLOCK_DELAY:
            raise ValueError(
                f"block_interval must be at least the proposer layer's minimum "
                f"block delay ({MIN_BLOCK_DELAY:g} s), got {self.block_interval}"
            )
        if self.stake not in STAKE_KINDS:
            raise ValueError(f"stake is one of {STAKE_KINDS}, not {self.stake!r}")
        check_consensus(self)
        if not (self.tx_rate >= 0 and math.isfinite(self.tx_rate)):
            raise ValueError(f"tx_rate must be a finite rate of 0 or more, got {self.tx_rate}")
        if self.max_attempts < 1 or self.max_events < 1:
            raise ValueError(
                f"max_attempts and max_events must be at least 1, got "
                f"{self.max_attempts} and {self.max_events}"
            )

    @property
    def builder_count(self) -> int:
        """How many nodes build and serve the chain from the start."""
        if self.builders is not None:
            return self.builders
        return 1 if self.nodes == 2 else max(2, min(4, self.nodes // 8))

    @property
    def transition_time(self) -> float:
        return self.start_time + self.block_interval * (self.blocks // 3)

    @property
    def fork_time(self) -> float:
        return self.start_time + self.block_interval * (2 * self.blocks // 3)

    @property
    def node_store_used(self) -> str:
        """The store each node keeps its chain in (``auto`` resolved for this process)."""
        if self.node_store != "auto":
            return self.node_store
        return "lmdb" if lmdb_nodes_fit(self.nodes) else "memory"

    def consensus_parameters(self) -> Parameters:
        """The Snowman parameters of the run: the defaults with ``k``, both alphas
        (``alpha``) and ``beta`` replaced where given (with ``concurrent_repolls`` at most
        ``beta``, as the parameters require)."""
        changes: dict[str, int] = {}
        if self.k is not None:
            changes["k"] = self.k
        if self.alpha is not None:
            changes["alpha_preference"] = self.alpha
            changes["alpha_confidence"] = self.alpha
        if self.beta is not None:
            changes["beta"] = self.beta
            changes["concurrent_repolls"] = min(DEFAULT_PARAMETERS.concurrent_repolls, self.beta)
        return attrs.evolve(DEFAULT_PARAMETERS, **changes)

    def as_dict(self) -> dict[str, object]:
        data = attrs.asdict(self)
        data["builders"] = self.builder_count
        data["node_store_used"] = self.node_store_used
        return data


@attrs.define
class NodeResult:
    """What one node did. Every field but the wall times of the run is simulated.

    ``bootstrap_seconds`` is the simulated time from joining to having caught up with its
    peers the first time (``None`` if it never did); ``crashed_at`` the simulated time its
    process was found dead (``None`` if it was not). ``bad_answers`` counts the answers
    this node dropped as bad (an answer that did not parse or chain, a fetched or gossiped
    block that failed ``verify``, a peer whose store failed while serving it), each time
    asking another peer; ``bad_answers_sent`` the bad answers this node gave others.

    ``weight`` is the node's stake and ``stake_share`` its share of the whole;
    ``blocks_built`` the blocks it built in its slots, ``slots_missed`` the slots it was
    the expected proposer of but lost (down, not joined yet, or behind the tip).
    ``timeline`` is (simulated seconds, blocks fetched) at each fetch, ``heights``
    (simulated seconds, height) at each change of its last accepted block."""

    index: int
    role: str
    joined_at: float = 0.0
    requests: int = 0
    retries: int = 0
    bytes_received: int = 0
    blocks_fetched: int = 0
    rounds: int = 0
    gossip_accepted: int = 0
    gossip_ignored: int = 0
    bad_answers: int = 0
    bad_answers_sent: int = 0
    polls: int = 0
    height: int = 0
    bootstrap_seconds: float | None = None
    crashed_at: float | None = None
    crash_reason: str | None = None
    stalled: str | None = None
    timeline: list[tuple[float, int]] = attrs.field(factory=list)
    weight: int = 0
    stake_share: float = 0.0
    blocks_built: int = 0
    slots_missed: int = 0
    heights: list[tuple[float, int]] = attrs.field(factory=list)
    accepted_count: int = 0
    rejected_count: int = 0
    accepted_ids: list[str] = attrs.field(factory=list)

    @property
    def crashed(self) -> bool:
        return self.crashed_at is not None

    def as_dict(self) -> dict[str, object]:
        data = attrs.asdict(self)
        data["crashed"] = self.crashed
        data["timeline"] = [list(point) for point in self.timeline]
        data["heights"] = [list(point) for point in self.heights]
        return data


#: Runs of at most this many nodes list every node's accepted block IDs in the JSON.
MAX_NODES_WITH_ACCEPTED_IDS = 64

#: What decides blocks in a network run (``NetworkSimulationConfig.consensus``).
CONSENSUS_ENGINES = ("snowman", "coordinator")


def check_consensus(config: NetworkSimulationConfig) -> None:
    """Refuse (``ValueError``) a consensus engine, parameters or partition that cannot
    run: parameters are checked as the engine's ``Parameters.verify`` does."""
    if config.consensus not in CONSENSUS_ENGINES:
        raise ValueError(f"consensus is one of {CONSENSUS_ENGINES}, not {config.consensus!r}")
    if config.consensus == "coordinator":
        if (config.k, config.alpha, config.beta, config.partition) != (None,) * 4:
            raise ValueError("--k, --alpha, --beta and --partition need --consensus snowman")
        if config.equivocators:
            raise ValueError("equivocating proposers need consensus snowman")
        return
    for node in config.equivocators:
        if not 0 <= node < config.nodes:
            raise ValueError(f"an equivocator is a node index below {config.nodes}, got {node}")
    config.consensus_parameters().verify()
    if config.partition is not None:
        fraction, start, end = config.partition
        if not (0 < fraction < 1 and 0 <= start < end):
            raise ValueError(
                f"a partition is FRACTION@START-END with 0 < FRACTION < 1 and "
                f"0 <= START < END, got {fraction:g}@{start:g}-{end:g}"
            )


def parse_partition(text: str) -> tuple[float, float, float]:
    """``FRACTION@START-END`` (a share of stake, simulated seconds from the run's start)
    as a tuple; ``ValueError`` naming the expected form otherwise."""
    try:
        fraction_text, span = text.split("@", 1)
        start_text, end_text = span.split("-", 1)
        partition = (float(fraction_text), float(start_text), float(end_text))
    except ValueError:
        raise ValueError(
            f"--partition is FRACTION@START-END (as 0.3@10-60), not {text!r}"
        ) from None
    fraction, start, end = partition
    if not (0 < fraction < 1 and 0 <= start < end):
        raise ValueError(
            f"--partition is FRACTION@START-END with 0 < FRACTION < 1 and 0 <= START < END, "
            f"not {text!r}"
        )
    return partition


#: Why an expected proposer loses its slot.
MISSED_REASONS = ("down", "not joined", "behind")


@attrs.frozen
class MissedSlot:
    """A slot whose expected proposer lost it: the ``height`` of the block it was for, the
    ``slot`` (the windower's, counted in 5 s from the parent's timestamp), the simulated
    time it came (seconds from the run's start), the ``node`` and why: ``down`` (its
    process gone), ``not joined`` (it joins later) or ``behind`` (up, but not at the
    network's tip: in a network with consensus it could have built a competing block at a
    lower height)."""

    height: int
    slot: int
    at: float
    node: int
    reason: str

    def as_dict(self) -> dict[str, object]:
        return attrs.asdict(self)


@attrs.define
class SlotRecord:
    """What the proposer windows did in a run: ``built_in_slot[s]`` blocks were built in
    slot ``s`` of their parent (the windower's slots, 5 s each from the parent's
    timestamp), ``delays[d]`` blocks came ``d`` seconds after their parent, ``missed``
    lists every slot lost, oldest first, and ``tip`` is (simulated seconds, height) of
    the network's tip at the start and at each block built."""

    built_in_slot: dict[int, int] = attrs.field(factory=dict)
    delays: dict[int, int] = attrs.field(factory=dict)
    missed: list[MissedSlot] = attrs.field(factory=list)
    tip: list[tuple[float, int]] = attrs.field(factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "built_in_slot": {
                str(slot): count for slot, count in sorted(self.built_in_slot.items())
            },
            "delays": {str(delay): count for delay, count in sorted(self.delays.items())},
            "missed": [missed.as_dict() for missed in self.missed],
            "tip": [list(point) for point in self.tip],
        }


@attrs.frozen
class NetworkReport:
    """Every figure of a network run; ``as_dict()["simulated"]`` depends only on the seed,
    the configuration and the cost model. ``peak_memory_bytes`` is the peak resident size
    of each process that held nodes (this one on the local engine, each actor on Ray);
    ``transactions`` how many the first ``blocks`` blocks hold (a block holds what its gas
    limit pays for, which may be fewer than ``txs_per_block``). ``slots`` is what the
    proposer windows did (:class:`SlotRecord`); ``memory_by_place`` the peaks by host and
    by actor (:meth:`~vmstack.sim.network.engines.Engine.memory_by_place`). ``consensus``
    and ``safety`` are what decided the blocks (docs/network-consensus.md names the
    fields); ``finality_samples`` every finality time of a Snowman run (for its plot);
    ``gossip`` the transaction gossip figures of a run with a ``tx_rate``
    (``simulated.gossip``, :mod:`vmstack.sim.network.gossip_run`)."""

    config: NetworkSimulationConfig
    costs: CostModel
    engine: dict[str, object]
    nodes: tuple[NodeResult, ...]
    totals: dict[str, float | int | None]
    setup_wall_seconds: float
    run_wall_seconds: float
    peak_memory_bytes: tuple[int, ...] = ()
    transactions: int | None = None
    slots: SlotRecord = attrs.field(factory=lambda: SlotRecord())
    memory_by_place: dict[str, object] = attrs.field(factory=dict)
    gossip: dict[str, object] | None = None
    consensus: dict[str, object] = attrs.field(factory=dict)
    safety: dict[str, object] = attrs.field(factory=dict)
    finality_samples: tuple[float, ...] = ()

    def as_dict(self) -> dict[str, object]:
        nodes = [node.as_dict() for node in self.nodes]
        if len(nodes) > MAX_NODES_WITH_ACCEPTED_IDS:
            for node in nodes:
                node.pop("accepted_ids", None)
        simulated: dict[str, object] = {
            "nodes": nodes,
            "totals": self.totals,
            "transactions": self.transactions,
            "slots": self.slots.as_dict(),
            "consensus": self.consensus,
            "safety": self.safety,
        }
        if self.gossip is not None:
            simulated["gossip"] = self.gossip
        return {
            "engine": self.engine,
            "seed": self.config.seed,
            "config": self.config.as_dict(),
            "costs": self.costs.as_dict(),
            "simulated": simulated,
            "measured": {
                "setup_wall_seconds": self.setup_wall_seconds,
                "run_wall_seconds": self.run_wall_seconds,
                "peak_memory_bytes": list(self.peak_memory_bytes),
                **self.memory_by_place,
            },
        }
