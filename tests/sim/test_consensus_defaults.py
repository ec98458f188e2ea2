"""Snowman is the default of a network run, with every network option at its default
and with transaction gossip (docs/network-consensus.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vmstack.cli import main
from vmstack.sim.network.engines import LocalEngine
from vmstack.sim.network.records import NetworkSimulationConfig
from vmstack.sim.network.run import simulate_network


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_network_run_at_its_defaults_is_decided_by_snowman(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert main(["simulate", "--nodes", "16", "--seed", "1", "--json", str(out)]) == 0
    simulated = json.loads(out.read_text())["simulated"]
    decided = simulated["consensus"]
    assert decided["engine"] == "snowman" and decided["params"]["k"] == 20
    assert decided["converged"] is True and decided["blocks_accepted"] >= 20
    assert simulated["safety"] == {"conflicting_accepts": 0}
    assert simulated["totals"]["nodes_at_tip"] == 16
    # The proposer windows' figures are those of the blocks each node built in its slots.
    built = sum(node["blocks_built"] for node in simulated["nodes"])
    assert sum(simulated["slots"]["built_in_slot"].values()) == built >= 20
    assert sum(simulated["slots"]["delays"].values()) == built


def test_the_coordinator_is_still_there_when_asked_for(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    options = ["--nodes", "3", "--blocks", "6", "--live-blocks", "2", "--node-store", "memory"]
    assert main(["simulate", *options, "--consensus", "coordinator", "--json", str(out)]) == 0
    decided = json.loads(out.read_text())["simulated"]["consensus"]
    assert decided["engine"] == "coordinator" and decided["polls_successful"] == 0


def test_transaction_gossip_feeds_the_snowman_builders() -> None:
    config = NetworkSimulationConfig(
        nodes=6,
        blocks=12,
        live_blocks=8,
        consensus="snowman",
        k=4,
        alpha=3,
        beta=4,
        node_store="memory",
        late_fraction=0.0,
        tx_rate=4.0,
    )
    report = simulate_network(config, LocalEngine())
    gossip = report.gossip
    assert gossip is not None
    assert report.consensus["converged"] is True
    assert report.safety == {"conflicting_accepts": 0}
    submitted = gossip["submitted"]
    assert isinstance(submitted, int) and submitted > 0
    # Every submission reached a builder's pool by gossip and an accepted block, once.
    assert gossip["included"] == submitted
    assert gossip["included_twice"] == 0
    latency = gossip["latency_s"]
    assert isinstance(latency, dict) and 0 < latency["p50"] <= latency["max"]
