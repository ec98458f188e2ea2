"""The network report's "nodes at tip" counts the nodes that hold the tip block itself: a
node holding another block of the tip's height (an equivocation on the last block) is not
at the tip."""

from __future__ import annotations

import attrs

from tests.sim.networks import SMALL
from vmstack.sim.network import LocalEngine, NetworkRun, simulate_network


def test_a_node_holding_another_block_at_the_tip_height_is_not_at_the_tip() -> None:
    runs: list[NetworkRun] = []
    config = attrs.evolve(SMALL, node_store="memory")
    report = simulate_network(config, LocalEngine(), observe=runs.append)
    assert report.totals["nodes_at_tip"] == config.nodes
    run = runs[-1]
    tip = run.network_tip
    assert tip is not None
    state = run.states[2]
    assert state.tip == tip
    # Node 2 holds a sibling of the tip block: same height, another block.
    state.tip = attrs.evolve(tip, block_id=bytes(32))
    assert state.result.height == tip.height
    assert run.totals()["nodes_at_tip"] == config.nodes - 1
