"""consensus_reversibility_test.go's governance case: 55 of 100 nodes start on red, 35 on
blue, 10 byzantine nodes insist on blue; on avalanchego's MT19937 with seed 0 every honest
node finalizes red."""

from __future__ import annotations

from tests.consensus.network import Byzantine, Network
from vmstack.consensus import DEFAULT_PARAMETERS
from vmstack.consensus.snowball import SNOWBALL


def test_snowball_governance() -> None:
    """TestSnowballGovernance: the honest nodes all end preferring color 0."""
    network = Network(SNOWBALL, DEFAULT_PARAMETERS, colors=2, seed=0)
    for _ in range(55):
        network.add_node(0, [1])
    assert all(node.preference() == network.colors[0] for node in network.nodes)
    for _ in range(100 - 10 - 55):
        network.add_node(1, [0])
    for _ in range(10):
        network.add_node(1, [0], byzantine=True)
    while not network.finalized():
        network.round()
        assert network.rounds < 100_000, "the network does not finalize"
    honest = [node for node in network.nodes if not isinstance(node, Byzantine)]
    assert len(honest) == 90
    assert all(node.preference() == network.colors[0] for node in honest)
