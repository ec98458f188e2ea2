"""The two-node bootstrap over real history: :func:`simulate_history`.

The serving peers are C-chain VMs over an empty store with an era1 archive beneath it
(``CChainVM(history=...)``): their chain is the archive's, served from its files. The
bootstrapping node starts from the archive's genesis block and fetches, verifies and accepts
every block up to the tip, through the simulated network of :mod:`vmstack.sim.run`, once
batched and once serially. Real blocks were executed by an EVM this VM does not run, so the
node verifies them as a replaying VM does (``replay=True``: every rule but the execution
results, whose commitments the header states); the serving side checks what the archive
checks. The blocks are real: their sizes and transaction mixes are Ethereum's.

The chain bootstrapped is the archive's last contiguous run of blocks (up to ``blocks`` of
it). A run from block 0 is bootstrapped from genesis: the node starts with the archive's block
0. A later run (a sparse archive's last files) is bootstrapped from a checkpoint: the node
starts as a VM over an archive of its own holding the run's first block alone (written in a
temporary directory with that block's records from the archive), as a node syncing from a
trusted checkpoint does, and fetches every block above it.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from opentelemetry import trace
from prometheus_client import CollectorRegistry

from vmstack.cchain import ETHEREUM, CChainVM, block_bytes
from vmstack.cchain.era1 import NETWORK_CHAIN_IDS
from vmstack.clock import SimClock
from vmstack.interfaces import ChainVM
from vmstack.rlpreader import iter_list_items
from vmstack.sim.bootstrap import Bootstrapper, BootstrapResult
from vmstack.sim.costs import REFERENCE_COSTS, CostModel
from vmstack.sim.links import Network
from vmstack.sim.run import (
    MODES,
    SimulationConfig,
    SimulationReport,
    add_layer_figures,
    layer_figures,
)
from vmstack.stack import wrap_layers
from vmstack.store import LMDBStore, MemoryStore
from vmstack.store.history import EraArchive, EraRecord, write_era1

__all__ = ["last_run", "simulate_history"]


def last_run(archive: EraArchive) -> tuple[int, int]:
    """The first and last heights of the archive's last contiguous run of blocks."""
    start = archive.last
    while start > 0 and archive.holds(start - 1):
        start -= 1
    return start, archive.last


@contextmanager
def _node_history(
    directory: Path, network: str, start: int, checkpoint: EraRecord
) -> Iterator[EraArchive | None]:
    """The bootstrapping node's own history: none from genesis (block 0 is its genesis
    block), else an archive of the checkpoint block alone."""
    if start == 0:
        yield None
        return
    directory.mkdir()
    write_era1(directory, network, start, [checkpoint])
    with EraArchive(directory) as archive:
        yield archive


def _transaction_count(body_rlp: bytes) -> int:
    return sum(1 for _ in iter_list_items(next(iter_list_items(body_rlp))))


def simulate_history(
    directory: Path,
    *,
    blocks: int | None = None,
    peers: int = 3,
    seed: int = 1,
    modes: tuple[str, ...] = MODES,
    chain_id: int | None = None,
    costs: CostModel = REFERENCE_COSTS,
    on_fetch: Callable[[str, int], None] | None = None,
) -> SimulationReport:
    """Bootstrap a node from ``peers`` peers serving the era1 archive in ``directory`` (see
    the module docstring), in each of ``modes``; the report's ``source`` names the archive.
    ``blocks`` caps the blocks bootstrapped (default: the archive's whole last contiguous run);
    ``chain_id`` defaults to the archive network's (``mainnet``, ``sepolia``, ``holesky``),
    else it must be given (``ValueError``). The node's store lives in a temporary directory
    removed afterwards."""
    tracer = trace.get_tracer("vmstack.sim")
    with EraArchive(directory, sparse=True) as archive:
        if chain_id is None:
            chain_id = NETWORK_CHAIN_IDS.get(archive.network)
            if chain_id is None:
                raise ValueError(
                    f"the archive's network {archive.network!r} has no known chain ID: give one"
                )
        start, end = last_run(archive)
        tip_height = end if blocks is None else min(start + blocks, end)
        if tip_height <= start:
            raise ValueError("the archive's last run holds no block to bootstrap above its first")
        config = SimulationConfig(
            blocks=tip_height - start,
            txs_per_block=0,
            peers=peers,
            seed=seed,
            modes=modes,
            chain_id=chain_id,
        )
        tip = archive.hash(tip_height)
        tip_time = ETHEREUM.decode_header(archive.header_rlp(tip_height)).time
        clock = SimClock(float(tip_time + 60))
        first = block_bytes(archive.header_rlp(start), archive.body_rlp(start))
        checkpoint = EraRecord(
            archive.header_rlp(start),
            archive.body_rlp(start),
            archive.receipts(start),
            archive.total_difficulty(start),
        )
        transactions = sum(
            _transaction_count(archive.body_rlp(height))
            for height in range(start + 1, tip_height + 1)
        )
        started = time.perf_counter()
        registries = {mode: [CollectorRegistry() for _ in range(peers)] for mode in modes}
        results: dict[str, BootstrapResult] = {}
        layers: dict[str, dict[str, dict[str, float]]] = {}
        with tempfile.TemporaryDirectory(prefix="vmstack-history-") as temporary:
            for mode in modes:
                serving: list[ChainVM] = [
                    wrap_layers(
                        CChainVM(
                            MemoryStore(),
                            flavour=ETHEREUM,
                            chain_id=chain_id,
                            clock=clock,
                            history=archive,
                        ),
                        name="C",
                        tracer=tracer,
                        registry=registry,
                    )
                    for registry in registries[mode]
                ]
                with (
                    LMDBStore(Path(temporary) / f"node-{mode}", sync=False) as store,
                    _node_history(
                        Path(temporary) / f"checkpoint-{mode}", archive.network, start, checkpoint
                    ) as own_history,
                ):
                    node = CChainVM(
                        store,
                        flavour=ETHEREUM,
                        chain_id=chain_id,
                        clock=clock,
                        genesis=first if own_history is None else None,
                        replay=True,
                        history=own_history,
                    )
                    network = Network(config.network, random.Random(seed), peers)
                    progress = (
                        None if on_fetch is None else (lambda n, mode=mode: on_fetch(mode, n))
                    )
                    results[mode] = Bootstrapper(
                        node=node,
                        peers=serving,
                        network=network,
                        costs=costs,
                        clock=clock,
                        batched=mode == "batched",
                        max_blocks_num=config.max_blocks_num,
                        progress=progress,
                    ).run(tip)
                    if node.last_accepted() != tip:
                        raise RuntimeError(f"the {mode} bootstrap did not reach the tip")
                merged: dict[str, dict[str, float]] = {}
                for registry in registries[mode]:
                    add_layer_figures(merged, layer_figures(registry))
                layers[mode] = merged
        origin = "genesis" if start == 0 else f"a checkpoint at block {start}"
        source = (
            f"real history: {archive.network} blocks {start + 1}-{tip_height} from the "
            f"era1 files in {directory}, bootstrapped from {origin}"
        )
        return SimulationReport(
            config=config,
            costs=costs,
            chain_reused=True,
            build_wall_seconds=time.perf_counter() - started,
            results=results,
            layers=layers,
            transactions=transactions,
            source=source,
        )
