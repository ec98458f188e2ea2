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

#: The largest network a test runs quickly on 2 cores (a 300-node run takes minutes).
NODES = 48


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
