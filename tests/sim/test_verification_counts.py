"""A network run pays for each signature about once: every node's recoveries of a
transaction's sender and checks of an envelope's signature go through the process-wide
verification caches, so the checks that run per distinct signed item stay at most 1.5
(without the caches, each item was checked once per node and per path, hundreds of times
in a 300-node run), and the simulated figures are those of a run with empty caches."""

from __future__ import annotations

import pytest

from vmstack.cchain.crypto import RECOVERED_SENDERS
from vmstack.sim.network import LocalEngine, NetworkSimulationConfig, simulate_network
from vmstack.verifycache import clear_all
from vmstack.wrappers.proposer.certificate import VERIFIED_SIGNATURES

#: A network small enough to run twice in a test.
NODES = 48
#: The run the counts were first taken on: 140 transactions (60 blocks of 2 and 10 live
#: blocks of 2), 300 nodes, about 40 s of CPU.
LARGE = NetworkSimulationConfig(
    nodes=300, blocks=60, txs_per_block=2, live_blocks=10, node_store="memory", seed=1
)


@pytest.mark.slow
def test_each_signature_is_checked_about_once_per_run() -> None:
    config = NetworkSimulationConfig(nodes=NODES, node_store="memory", seed=2)
    clear_all()
    first = simulate_network(config, LocalEngine()).as_dict()["simulated"]
    senders = RECOVERED_SENDERS.stats()
    envelopes = VERIFIED_SIGNATURES.stats()
    assert senders.evicted == 0 and envelopes.evicted == 0
    # Distinct items: every successful check is one entry (a sender signed in this process
    # is entered at signing); every look-up is a check the run would have made uncached.
    assert senders.entries > 0 and envelopes.entries > 0
    assert senders.computed <= 1.5 * senders.entries
    assert envelopes.computed <= 1.5 * envelopes.entries
    assert senders.lookups >= 10 * senders.entries  # the nodes asked many times each
    assert envelopes.lookups >= 10 * envelopes.entries
    # The same run from empty caches again gives the same figures.
    clear_all()
    assert simulate_network(config, LocalEngine()).as_dict()["simulated"] == first


@pytest.mark.slow
def test_a_300_node_run_checks_each_signature_at_most_one_and_a_half_times() -> None:
    """The 300-node run that recovered 140 transactions' senders 53,784 times and checked
    29 envelopes' signatures 12,154 times before the caches: now at most 1.5 checks per
    distinct item."""
    clear_all()
    run = simulate_network(LARGE, LocalEngine())
    assert run.totals["nodes_at_tip"] == LARGE.nodes
    senders = RECOVERED_SENDERS.stats()
    envelopes = VERIFIED_SIGNATURES.stats()
    assert senders.evicted == 0 and envelopes.evicted == 0
    assert senders.entries >= 140 and envelopes.entries > 0
    assert senders.computed <= 1.5 * senders.entries
    assert envelopes.computed <= 1.5 * envelopes.entries
    assert senders.lookups >= 100 * senders.entries  # each node asks about each sender
