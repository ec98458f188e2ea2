"""The main job: build a chain on a serving node, then bootstrap a second node from it.

:func:`simulate` builds a chain with :func:`~vmstack.cchain.generate_chain` on the full stack
(the transition a third of the way up, the proposer fork two thirds up) over an embedded LMDB
store, serves it from ``peers`` stacks over that store, and bootstraps a fresh node with its
own stack and store through the simulated network, once with the batched protocol and once
with the serial fallback. Every layer of every stack runs on the one simulated clock.

With ``out_of_process``, every node's C-chain part runs in a process of its own behind the
gRPC boundary (:func:`~vmstack.wrappers.rpc.spawn`), as avalanchego runs a plugin VM: the
serving peers' processes open the chain's store read-only, the bootstrapping node's process
owns its chain store, and the proposer and pass-through layers stay in this process. The
served processes follow the one simulated clock, so the simulated figures for a seed and a
cost model are the same in and out of process; the round trips are measured beside them,
and :func:`calibrate` with ``out_of_process`` fits the cost model to calls that cross.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from functools import partial
from pathlib import Path

import attrs
from opentelemetry import trace
from prometheus_client import CollectorRegistry

from vmstack.batching import (
    DEFAULT_MAX_BLOCKS_NUM,
    batched_parse_block,
    get_ancestors,
)
from vmstack.cchain import generate_chain
from vmstack.clock import SimClock
from vmstack.defaults import DEFAULT_CHAIN_ID
from vmstack.errors import VMUnavailable
from vmstack.interfaces import Block, ChainVM
from vmstack.sim.bootstrap import Bootstrapper, BootstrapResult
from vmstack.sim.bounds import MAX_PEERS, MAX_PEERS_OUT_OF_PROCESS
from vmstack.sim.chain import chain_transactions
from vmstack.sim.costs import REFERENCE_COSTS, CostModel, fit_cost, mean_cost, time_call
from vmstack.sim.links import Network, NetworkConfig
from vmstack.stack import build_stack
from vmstack.store import KeyValueStore, LMDBStore
from vmstack.wrappers.proposer import StakingKey
from vmstack.wrappers.rpc import RoundTrips, VMClient, spawn

__all__ = [
    "MODES",
    "SimulationConfig",
    "SimulationReport",
    "add_layer_figures",
    "calibrate",
    "layer_figures",
    "simulate",
    "stored_chain",
]

MODES = ("batched", "serial")
_CHAIN_FILE = "chain.json"


@attrs.frozen
class SimulationConfig:
    """What to simulate. ``start_time`` is the genesis-era unix time the chain starts at;
    ``peers`` is at most :data:`~vmstack.sim.bounds.MAX_PEERS`
    (:data:`~vmstack.sim.bounds.MAX_PEERS_OUT_OF_PROCESS` with
    ``out_of_process``)."""

    blocks: int = 600
    txs_per_block: int = 10
    peers: int = 3
    seed: int = 1
    modes: tuple[str, ...] = MODES
    network: NetworkConfig = attrs.field(factory=NetworkConfig)
    block_interval: float = 2.0
    start_time: float = 1_700_000_000.0
    chain_id: int = DEFAULT_CHAIN_ID
    max_blocks_num: int = DEFAULT_MAX_BLOCKS_NUM
    out_of_process: bool = False

    def __attrs_post_init__(self) -> None:
        if self.blocks < 1 or self.txs_per_block < 0 or self.peers < 1:
            raise ValueError("blocks and peers must be at least 1, txs_per_block at least 0")
        most = MAX_PEERS_OUT_OF_PROCESS if self.out_of_process else MAX_PEERS
        if self.peers > most:
            where = " out of process (each peer is a process)" if self.out_of_process else ""
            raise ValueError(f"peers must be at most {most}{where}, got {self.peers}")
        unknown = set(self.modes) - set(MODES)
        if unknown or not self.modes:
            raise ValueError(f"modes are {MODES}, got {self.modes}")

    @property
    def transition_time(self) -> float:
        """The transition a third of the way up the chain."""
        return self.start_time + self.block_interval * (self.blocks // 3)

    @property
    def fork_time(self) -> float:
        """The proposer fork two thirds of the way up the chain."""
        return self.start_time + self.block_interval * (2 * self.blocks // 3)

    def chain_identity(self) -> dict[str, object]:
        """What fixes the chain's bytes: a stored chain is reused only if this matches."""
        return {
            "blocks": self.blocks,
            "txs_per_block": self.txs_per_block,
            "seed": self.seed,
            "block_interval": self.block_interval,
            "start_time": self.start_time,
            "chain_id": self.chain_id,
        }

    def as_dict(self) -> dict[str, object]:
        return attrs.asdict(self)


@attrs.frozen
class SimulationReport:
    """Every figure of a run: configuration, cost model, chain, and one result per mode.

    ``transactions`` is how many the chain holds (a block holds at most what its gas
    limit pays for, fewer than ``txs_per_block`` asks when that is more; the rest waits).
    ``round_trips`` (out of process only, measured) gives, per mode, the round trips of
    the serving peers' clients and of the bootstrapping node's client:
    ``{mode: {"serving" | "node": {method: {"calls": n, "seconds": s}}}}``.
    """

    config: SimulationConfig
    costs: CostModel
    chain_reused: bool
    build_wall_seconds: float
    results: dict[str, BootstrapResult]
    layers: dict[str, dict[str, dict[str, float]]]
    round_trips: dict[str, dict[str, dict[str, dict[str, float]]]] = attrs.field(factory=dict)
    transactions: int | None = None
    #: Where the chain came from when it was not built here (real history), else ``None``.
    source: str | None = None

    def speedup(self) -> float | None:
        """Serial over batched simulated bootstrap time, when both ran."""
        if set(MODES) <= self.results.keys():
            return self.results["serial"].total_seconds / self.results["batched"].total_seconds
        return None

    def as_dict(self) -> dict[str, object]:
        return {
            "seed": self.config.seed,
            "config": self.config.as_dict(),
            "costs": self.costs.as_dict(),
            "chain": {
                "reused": self.chain_reused,
                "transactions": self.transactions,
                "source": self.source,
                "build_wall_seconds": self.build_wall_seconds,
            },
            "simulated": {mode: result.simulated() for mode, result in self.results.items()},
            "measured": {mode: result.measured() for mode, result in self.results.items()},
            "round_trips": self.round_trips,
            "layers": {
                mode: {
                    name: {"calls": int(entry["calls"]), "seconds": entry["seconds"]}
                    for name, entry in figures.items()
                }
                for mode, figures in self.layers.items()
            },
            "speedup": self.speedup(),
        }


def layer_figures(registry: CollectorRegistry) -> dict[str, dict[str, float]]:
    """Calls and seconds per ``{namespace}_{method}`` histogram in ``registry``."""
    figures: dict[str, dict[str, float]] = {}
    for family in registry.collect():
        if not family.name.endswith("_duration_seconds"):
            continue
        name = family.name.removesuffix("_duration_seconds")
        entry = figures.setdefault(name, {"calls": 0.0, "seconds": 0.0})
        for sample in family.samples:
            if sample.name.endswith("_count"):
                entry["calls"] += sample.value
            elif sample.name.endswith("_sum"):
                entry["seconds"] += sample.value
    return {name: entry for name, entry in sorted(figures.items()) if entry["calls"]}


def add_layer_figures(
    into: dict[str, dict[str, float]], figures: dict[str, dict[str, float]]
) -> None:
    """Add ``figures`` (:func:`layer_figures` of one registry) into ``into``, call counts and
    seconds summed per layer method."""
    for name, entry in figures.items():
        total = into.setdefault(name, {"calls": 0.0, "seconds": 0.0})
        total["calls"] += entry["calls"]
        total["seconds"] += entry["seconds"]


@contextmanager
def _working_dir(data_dir: Path | None) -> Iterator[Path]:
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        yield data_dir
        return
    with tempfile.TemporaryDirectory(prefix="vmstack-sim-") as temporary:
        yield Path(temporary)


class _Stacks:
    """Builds the full stack the simulation runs, the same way for every node."""

    def __init__(self, config: SimulationConfig, clock: SimClock) -> None:
        self.config = config
        self.clock = clock
        self.tracer = trace.get_tracer("vmstack.sim")

    def build(
        self,
        store: KeyValueStore,
        registry: CollectorRegistry | None = None,
        *,
        staking_key: StakingKey | None = None,
        out_of_process: VMClient | None = None,
    ) -> ChainVM:
        """A node's stack over ``store``; over ``out_of_process`` (the client of a served
        C-chain part) from the "C" layers up when one is given."""
        return build_stack(
            store,
            chain_id=self.config.chain_id,
            fork_time=self.config.fork_time,
            transition_time=(None if out_of_process is not None else self.config.transition_time),
            tracer=self.tracer,
            registry=registry,
            clock=self.clock,
            staking_key=staking_key,
            out_of_process=out_of_process,
        )

    def serve(self, data_dir: Path, *, readonly: bool) -> AbstractContextManager[VMClient]:
        """The C-chain part of a node over the LMDB store in ``data_dir``, in a process of
        its own on this simulation's clock."""
        return spawn(
            data_dir,
            clock=self.clock,
            readonly=readonly,
            chain_id=self.config.chain_id,
            transition_time=self.config.transition_time,
        )

    @contextmanager
    def node(
        self, directory: Path, registry: CollectorRegistry | None = None
    ) -> Iterator[tuple[ChainVM, VMClient | None]]:
        """A fresh node in ``directory``: its stack, and its boundary's client when the
        C-chain part runs out of process (its store then in ``directory/chain``, the
        proposer's records in ``directory/proposervm``)."""
        if not self.config.out_of_process:
            with LMDBStore(directory) as store:
                yield self.build(store, registry), None
            return
        with (
            self.serve(directory / "chain", readonly=False) as client,
            LMDBStore(directory / "proposervm") as store,
        ):
            yield self.build(store, registry, out_of_process=client), client

    def builder_key(self) -> StakingKey:
        """The staking identity of the node that builds the chain, derived from the seed:
        its post-fork blocks are signed (ECDSA P-256) and every other node checks them."""
        return StakingKey.generate(seed=f"vmstack simulate {self.config.seed}".encode())


def stored_chain(config: SimulationConfig, directory: Path) -> bool:
    """Whether ``directory`` holds the finished chain ``config`` builds (so a run reuses
    it); ``ValueError`` if it holds a finished chain of another configuration.

    A chain is finished once its identity file is written, after its last block; a
    directory whose build was interrupted has none, and its chain is built anew.
    """
    identity_file = directory / _CHAIN_FILE
    if not identity_file.is_file():
        return False
    try:
        stored = json.loads(identity_file.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(
            f"{identity_file} cannot be read ({error}); remove it to build the chain anew"
        ) from None
    if stored != config.chain_identity():
        raise ValueError(
            f"{directory} holds a different chain ({stored}); use another "
            "--data-dir or the same configuration"
        )
    return True


def _prepare_chain(
    config: SimulationConfig,
    stacks: _Stacks,
    store: KeyValueStore,
    directory: Path,
    on_block: Callable[[int], None] | None,
) -> bool:
    """Build the chain unless ``directory`` holds this very chain; True if it was reused.
    ``store`` must be empty unless the chain is reused (see :func:`simulate`)."""
    identity_file = directory / _CHAIN_FILE
    identity = config.chain_identity()
    if stored_chain(config, directory):
        vm = stacks.build(store)
        tip = vm.get_block(vm.last_accepted())
        stacks.clock.advance(max(tip.timestamp - stacks.clock(), 0.0))
        return True
    vm = stacks.build(store, staking_key=stacks.builder_key())
    generate_chain(
        vm,
        blocks=config.blocks,
        txs_per_block=config.txs_per_block,
        seed=config.seed,
        clock=stacks.clock,
        block_interval=config.block_interval,
        progress=on_block,
    )
    # Written last and atomically: the mark of a finished chain.
    partial = identity_file.with_suffix(".partial")
    partial.write_text(json.dumps(identity))
    partial.replace(identity_file)
    return False


def _progress_of(
    mode: str, on_fetch: Callable[[str, int], None] | None
) -> Callable[[int], None] | None:
    if on_fetch is None:
        return None
    return lambda fetched: on_fetch(mode, fetched)


def simulate(
    config: SimulationConfig,
    *,
    data_dir: Path | None = None,
    costs: CostModel = REFERENCE_COSTS,
    on_build: Callable[[int], None] | None = None,
    on_fetch: Callable[[str, int], None] | None = None,
    on_peer: Callable[[int], None] | None = None,
) -> SimulationReport:
    """Run the simulation of ``config`` and return every figure.

    Without ``data_dir`` the stores live in a temporary directory removed afterwards; with
    it, the serving store persists and a later run with the same chain configuration reuses
    it. ``on_build(n)``, ``on_fetch(mode, n)`` and ``on_peer(n)`` (``n`` peers set up:
    started out of process, then built anew for each mode) report progress.
    """
    with _working_dir(data_dir) as directory:
        clock = SimClock(config.start_time)
        stacks = _Stacks(config, clock)
        results: dict[str, BootstrapResult] = {}
        layers: dict[str, dict[str, dict[str, float]]] = {}
        round_trips: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
        serving_dir = directory / "serving"
        if not stored_chain(config, directory):
            # What an interrupted build left behind is rebuilt from nothing.
            shutil.rmtree(serving_dir, ignore_errors=True)
        with LMDBStore(serving_dir) as serving_store:
            build_started = time.perf_counter()
            reused = _prepare_chain(config, stacks, serving_store, directory, on_build)
            transactions = chain_transactions(serving_store, config.blocks)
            build_wall = time.perf_counter() - build_started
        with (
            LMDBStore(serving_dir, readonly=config.out_of_process) as serving_store,
            ExitStack() as processes,
        ):
            # Out of process, each peer's C-chain part is a reader of the chain's store.
            served: list[VMClient | None] = []
            for _ in range(config.peers):
                served.append(
                    processes.enter_context(stacks.serve(serving_dir, readonly=True))
                    if config.out_of_process
                    else None
                )
                if on_peer is not None and config.out_of_process:
                    on_peer(len(served))
            for mode in config.modes:
                registries = [CollectorRegistry() for _ in range(config.peers)]
                peers: list[ChainVM] = []
                for registry, client in zip(registries, served, strict=True):
                    peers.append(stacks.build(serving_store, registry, out_of_process=client))
                    if on_peer is not None:
                        on_peer(len(peers))
                tip = _last_accepted(peers)
                node_dir = directory / f"node-{mode}"
                shutil.rmtree(node_dir, ignore_errors=True)
                trips = RoundTrips()
                for client in served:
                    if client is not None:
                        client.round_trips = trips
                node_dir.mkdir(parents=True)
                with stacks.node(node_dir) as (node, node_client):
                    network = Network(config.network, random.Random(config.seed), config.peers)
                    bootstrapper = Bootstrapper(
                        node=node,
                        peers=peers,
                        network=network,
                        costs=costs,
                        clock=clock,
                        batched=mode == "batched",
                        max_blocks_num=config.max_blocks_num,
                        progress=_progress_of(mode, on_fetch),
                    )
                    results[mode] = bootstrapper.run(tip)
                    if node.last_accepted() != tip:
                        raise RuntimeError(f"the {mode} bootstrap did not reach the tip")
                    if node_client is not None:
                        round_trips[mode] = {
                            "serving": trips.as_dict(),
                            "node": node_client.round_trips.as_dict(),
                        }
                shutil.rmtree(node_dir, ignore_errors=True)
                merged: dict[str, dict[str, float]] = {}
                for registry in registries:
                    add_layer_figures(merged, layer_figures(registry))
                layers[mode] = merged
        return SimulationReport(
            config=config,
            costs=costs,
            chain_reused=reused,
            transactions=transactions,
            build_wall_seconds=build_wall,
            results=results,
            layers=layers,
            round_trips=round_trips,
        )


def _last_accepted(peers: list[ChainVM]) -> bytes:
    """The last accepted block of the first peer that answers (a peer whose process died
    is ``VMUnavailable``; the bootstrap then drops it), or ``VMUnavailable`` if none does."""
    for peer in peers[:-1]:
        try:
            return peer.last_accepted()
        except VMUnavailable:
            continue
    return peers[-1].last_accepted()


def _parse_into(vm: ChainVM, data: bytes, parsed: list[Block]) -> None:
    parsed.append(vm.parse_block(data))


def _execute(block: Block) -> None:
    block.verify()
    block.accept()


def calibrate(config: SimulationConfig, *, blocks: int = 120) -> CostModel:
    """Measure what each call costs on this machine, on a chain like the one ``config``
    builds (``blocks`` blocks of it), and fit a :class:`CostModel` to the measurements.
    With ``config.out_of_process`` the calls cross the process boundary as in the run, so
    the model learns the round trips.

    Each block is parsed once per fresh node, newest first, as a bootstrap parses it (a
    node refuses a second look at a block past an unaccepted transition)."""
    sample = attrs.evolve(config, blocks=min(blocks, config.blocks))
    with tempfile.TemporaryDirectory(prefix="vmstack-calibrate-") as temporary:
        directory = Path(temporary)
        stacks = _Stacks(sample, SimClock(sample.start_time))
        with LMDBStore(directory / "serving") as serving_store:
            _prepare_chain(sample, stacks, serving_store, directory, None)
        with ExitStack() as open_nodes:
            serving_store = open_nodes.enter_context(
                LMDBStore(directory / "serving", readonly=sample.out_of_process)
            )
            served = (
                open_nodes.enter_context(stacks.serve(directory / "serving", readonly=True))
                if sample.out_of_process
                else None
            )
            peer = stacks.build(serving_store, out_of_process=served)
            for name in ("serial", "batched"):
                (directory / name).mkdir()
            serial_node, _ = open_nodes.enter_context(stacks.node(directory / "serial"))
            batched_node, _ = open_nodes.enter_context(stacks.node(directory / "batched"))
            ids = [peer.get_block_id_at_height(h) for h in range(sample.blocks, 0, -1)]
            data = [bytes(peer.get_block(block_id)) for block_id in ids]
            serve_serial = [
                (1, len(raw), time_call(partial(peer.get_block, block_id)))
                for block_id, raw in zip(ids, data, strict=True)
            ]
            serve_batched = []
            for count in sorted({1, 8, 32, len(ids)}):
                ancestors = partial(
                    get_ancestors, peer, ids[0], max_blocks_num=count, max_retrieval_time=60.0
                )
                serve_batched.append((count, sum(map(len, ancestors())), time_call(ancestors)))
            # Each fresh node parses the newest block once, untimed: its first parse also pays
            # one-time costs (the builder's certificate, imported once) that no fit should
            # spread over every call.
            serial_node.parse_block(data[0])
            parsed: list[Block] = []
            parse_serial = []
            for raw in data[1:]:
                elapsed = time_call(partial(_parse_into, serial_node, raw, parsed))
                parse_serial.append((1, len(raw), elapsed))
            batched_node.parse_block(data[0])
            parse_batched = []
            start = 1
            for count in (1, 8, 32, len(data)):
                batch = data[start : start + count]
                if batch:
                    parse_batched.append(
                        (
                            len(batch),
                            sum(map(len, batch)),
                            time_call(partial(batched_parse_block, batched_node, batch)),
                        )
                    )
                start += count
            execute = [
                (1, len(bytes(block)), time_call(partial(_execute, block)))
                for block in reversed(parsed)
            ]
    return CostModel(
        serve_batched=fit_cost(serve_batched, by="blocks"),
        serve_serial=fit_cost(serve_serial),
        parse_batched=mean_cost(parse_batched),
        parse_serial=mean_cost(parse_serial),
        execute=fit_cost(execute),
        source=(
            "calibrated on this machine, out of process"
            if sample.out_of_process
            else "calibrated on this machine"
        ),
    )
