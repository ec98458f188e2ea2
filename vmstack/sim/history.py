"""The two-node bootstrap over real history: :func:`simulate_history`.

The serving peers are C-chain VMs over an empty store with an era1 archive beneath it
(``CChainVM(history=...)``): their chain is the archive's, served from its files. The
bootstrapping node starts from the archive's genesis block and fetches, verifies and accepts
every block up to the tip, through the simulated network of :mod:`vmstack.sim.run`, once
batched and once serially. Real blocks were executed by an EVM this VM does not run, so the
node verifies them as a replaying VM does (``replay=True``: every rule but the execution
results, whose commitments the header states); the serving side checks what the archive
checks. The blocks are real: their sizes and transaction mixes are Ethereum's.

The chain bootstrapped is the archive's contiguous run from block 0 (a sparse archive's
later files cannot be linked to genesis), up to ``blocks`` blocks of it.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry import trace
from prometheus_client import CollectorRegistry

from vmstack.cchain import ETHEREUM, CChainVM, block_bytes
from vmstack.cchain.history import NETWORK_CHAIN_IDS
from vmstack.cchain.rlpbytes import iter_list_items
from vmstack.clock import SimClock
from vmstack.interfaces import ChainVM
from vmstack.sim.bootstrap import Bootstrapper, BootstrapResult
from vmstack.sim.costs import REFERENCE_COSTS, CostModel
from vmstack.sim.network import Network
from vmstack.sim.run import MODES, SimulationConfig, SimulationReport, _merge, layer_figures
from vmstack.stack import wrap_layers
from vmstack.store import LMDBStore, MemoryStore
from vmstack.store.history import EraArchive

__all__ = ["contiguous_end", "simulate_history"]


def contiguous_end(archive: EraArchive) -> int:
    """The last height of the archive's contiguous run from block 0 (``ValueError`` for an
    archive without block 0)."""
    if not archive.holds(0):
        raise ValueError(f"the archive {archive.directory} does not hold block 0: a node "
                         "bootstraps from genesis")
    end = 0
    while archive.holds(end + 1):
        end += 1
    return end


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
    ``blocks`` caps the blocks bootstrapped (default: the whole contiguous run from genesis);
    ``chain_id`` defaults to the archive network's (``mainnet``, ``sepolia``, ``holesky``),
    else it must be given (``ValueError``). The node's store lives in a temporary directory
    removed afterwards."""
    tracer = trace.get_tracer("vmstack.sim")
    with EraArchive(directory, sparse=True) as archive:
        if chain_id is None:
            chain_id = NETWORK_CHAIN_IDS.get(archive.network)
            if chain_id is None:
                raise ValueError(f"the archive's network {archive.network!r} has no known "
                                 "chain ID: give one")
        end = contiguous_end(archive)
        tip_height = end if blocks is None else min(blocks, end)
        if tip_height < 1:
            raise ValueError("the archive holds no block after genesis to bootstrap")
        config = SimulationConfig(blocks=tip_height, txs_per_block=0, peers=peers, seed=seed,
                                  modes=modes, chain_id=chain_id)
        tip = archive.hash(tip_height)
        tip_time = ETHEREUM.decode_header(archive.header_rlp(tip_height)).time
        clock = SimClock(float(tip_time + 60))
        genesis = block_bytes(archive.header_rlp(0), archive.body_rlp(0))
        transactions = sum(_transaction_count(archive.body_rlp(height))
                           for height in range(1, tip_height + 1))
        started = time.perf_counter()
        registries = {mode: [CollectorRegistry() for _ in range(peers)] for mode in modes}
        results: dict[str, BootstrapResult] = {}
        layers: dict[str, dict[str, dict[str, float]]] = {}
        with tempfile.TemporaryDirectory(prefix="vmstack-history-") as temporary:
            for mode in modes:
                serving: list[ChainVM] = [
                    wrap_layers(CChainVM(MemoryStore(), flavour=ETHEREUM, chain_id=chain_id,
                                         clock=clock, history=archive),
                                name="C", tracer=tracer, registry=registry)
                    for registry in registries[mode]]
                with LMDBStore(Path(temporary) / f"node-{mode}", sync=False) as store:
                    node = CChainVM(store, flavour=ETHEREUM, chain_id=chain_id, clock=clock,
                                    genesis=genesis, replay=True)
                    network = Network(config.network, random.Random(seed), peers)
                    progress = (None if on_fetch is None
                                else (lambda n, mode=mode: on_fetch(mode, n)))
                    results[mode] = Bootstrapper(
                        node=node, peers=serving, network=network, costs=costs, clock=clock,
                        batched=mode == "batched", max_blocks_num=config.max_blocks_num,
                        progress=progress).run(tip)
                    if node.last_accepted() != tip:
                        raise RuntimeError(f"the {mode} bootstrap did not reach the tip")
                merged: dict[str, dict[str, float]] = {}
                for registry in registries[mode]:
                    _merge(merged, layer_figures(registry))
                layers[mode] = merged
        source = (f"real history: {archive.network} blocks 1-{tip_height} from the era1 "
                  f"files in {directory}")
        return SimulationReport(config=config, costs=costs, chain_reused=True,
                                build_wall_seconds=time.perf_counter() - started,
                                results=results, layers=layers, transactions=transactions,
                                source=source)
