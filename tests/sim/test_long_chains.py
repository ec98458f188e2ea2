"""A network run over a long generated chain: the live builders' transactions continue the
chain's (one sequence, :class:`~vmstack.cchain.generate.TransactionSequence`, at every
length), and a builder whose slice overlaps what the chain holds drops it and builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vmstack.cchain import CChainVM, generate_chain
from vmstack.cchain.generate import SEQUENCE_CHUNK, pool_transactions, transaction_pool
from vmstack.cchain.genesis import dev_addresses
from vmstack.clock import SimClock
from vmstack.sim.network import LocalEngine, NetworkSimulationConfig, RayEngine, simulate_network
from vmstack.sim.network.node import NodeServer, NodeSpec
from vmstack.store import MemoryStore


@pytest.mark.slow
def test_pool_slices_are_the_pool_at_every_position() -> None:
    """Slices of the sequence are the first chunk's pool wherever they are cut, and the
    chunk after it starts from the nonces the first ends with."""
    first = transaction_pool(seed=5, chain_id=43114, size=3000).transactions
    assert pool_transactions(seed=5, chain_id=43114, start=1000, count=100) == list(
        first[1000:1100]
    )
    assert pool_transactions(seed=5, chain_id=43114, start=0, count=3000) == list(first)
    across = pool_transactions(seed=5, chain_id=43114, start=SEQUENCE_CHUNK - 2, count=40)
    chunk = transaction_pool(seed=5, chain_id=43114, size=SEQUENCE_CHUNK)
    assert across[:2] == list(chunk.transactions[-2:])
    # The next chunk's transactions of a key take on from the nonce the first chunk ends at.
    nonces = dict(zip(dev_addresses(), chunk.next_nonces, strict=True))
    for tx in across[2:]:
        sender = tx.sender()
        assert tx.nonce == nonces[sender]
        nonces[sender] += 1


@pytest.mark.slow
def test_generate_chain_includes_the_sequence_in_order_past_a_chunk() -> None:
    """What generate_chain includes, block after block, is the sequence from position 0,
    past the 1,024 transactions where two generators once drifted apart and past a chunk
    boundary."""
    clock = SimClock(1_700_000_000.0)
    vm = CChainVM(MemoryStore(), clock=clock)
    blocks, per_block = 90, 100  # 9,000 transactions: past SEQUENCE_CHUNK
    ids = generate_chain(vm, blocks=blocks, txs_per_block=per_block, seed=7, clock=clock)
    sequence = pool_transactions(seed=7, chain_id=43114, start=0, count=blocks * per_block)
    for height, block_id in enumerate(ids):
        # Each block holds its slice (in the mempool's order: by sender, nonces in order).
        included = set(vm.get_block(block_id).transactions)
        assert included == set(sequence[height * per_block : (height + 1) * per_block])
    assert len(sequence) > SEQUENCE_CHUNK


def test_a_builder_drops_what_its_chain_already_holds_and_builds(tmp_path: Path) -> None:
    """A live slice that overlaps what the chain included (stale nonces) is dropped, one
    transaction at a time, and the block is built with the fresh rest."""
    config = NetworkSimulationConfig(nodes=2, blocks=4, txs_per_block=3)
    node = NodeServer(
        NodeSpec(
            index=0,
            chain_id=config.chain_id,
            start_time=config.start_time,
            fork_time=config.fork_time,
            transition_time=config.transition_time,
        ),
        tmp_path / "node",
    )
    try:
        tip = node.generate(config.blocks, config.txs_per_block, config.seed, 2.0)
        # Positions 6..11: the first six are in the chain already, the last three are new.
        built = node.build(tip.timestamp + 2.0, config.seed, 6, 9)
        assert built.tip.height == tip.height + 1
        block = node.vm.get_block(built.tip.block_id)
        assert block.height == tip.height + 1
        assert node.transactions(config.blocks + 1) == 4 * 3 + 3
    finally:
        node.close()


def _long_run(blocks: int, engine: Any) -> None:
    config = NetworkSimulationConfig(
        nodes=2, blocks=blocks, txs_per_block=10, live_blocks=4, node_store="memory", seed=1
    )
    report = simulate_network(config, engine)
    totals = report.totals
    assert totals["crashed"] == 0
    assert totals["blocks_built"] == config.live_blocks
    assert totals["tip_height"] == blocks + config.live_blocks
    assert totals["nodes_at_tip"] == config.nodes


@pytest.mark.slow
@pytest.mark.parametrize("blocks", [600, 3000])
def test_live_slots_build_after_a_long_chain_locally(blocks: int) -> None:
    """The default chain (600 blocks of 10) and one five times longer: every live slot
    builds (the generators once drifted apart after 1,024 transactions and every node's
    first build raised)."""
    _long_run(blocks, LocalEngine())


@pytest.mark.slow
@pytest.mark.parametrize("blocks", [600, 3000])
def test_live_slots_build_after_a_long_chain_on_ray(blocks: int, ray_session: Any) -> None:
    """The same on Ray: each actor's process signs the sequence for itself."""
    _long_run(blocks, RayEngine(workers=2))
