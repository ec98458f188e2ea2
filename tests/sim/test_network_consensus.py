"""The network run decided by Snowman: every node's engine over its own stack, queries,
chits and blocks on the simulated links (docs/network-consensus.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tests.sim.networks import small_snowman
from tests.support.reports import reported
from vmstack.cli import main
from vmstack.consensus.engine import PullQuery, PushQuery
from vmstack.sim.costs import REFERENCE_COSTS
from vmstack.sim.network.consensus import SnowmanNetworkRun, partition_minority
from vmstack.sim.network.engines import LocalEngine
from vmstack.sim.network.node import NodeServer
from vmstack.sim.network.records import (
    NetworkReport,
    NetworkSimulationConfig,
    NodeResult,
    parse_partition,
)
from vmstack.sim.network.run import NetworkRun, _specs, simulate_network
from vmstack.sim.network.stake import StakeSchedule

_HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def _config(**overrides: Any) -> NetworkSimulationConfig:
    return small_snowman(**overrides)


def _one_chain(report: NetworkReport) -> list[str]:
    """Every node's accepted IDs are a prefix of one chain (asserted); that chain."""
    chains = [node.accepted_ids for node in report.nodes if not node.crashed]
    longest = max(chains, key=len)
    for chain in chains:
        assert chain == longest[: len(chain)]
    assert report.safety == {"conflicting_accepts": 0}
    return longest


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_nodes_build_and_accept_100_blocks() -> None:
    report = simulate_network(
        _config(nodes=2, live_blocks=100, k=2, alpha=2, beta=3), LocalEngine()
    )
    decided: dict[str, Any] = report.consensus
    assert decided["engine"] == "snowman" and decided["converged"] is True
    assert decided["blocks_accepted"] >= 100
    chain = _one_chain(report)
    for node in report.nodes:
        assert node.accepted_count == len(node.accepted_ids) == len(chain) >= 100
    assert sum(node.blocks_built for node in report.nodes) >= 100
    finality = decided["finality_s"]
    assert isinstance(finality, dict)
    assert 0 <= finality["p50"] <= finality["p90"] <= finality["max"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_partition_of_30_percent_cannot_finalize_and_loses_its_blocks() -> None:
    config = _config(
        nodes=10, live_blocks=30, k=5, alpha=3, beta=3, block_interval=3.0, partition=(0.3, 10, 60)
    )
    report = simulate_network(config, LocalEngine())
    minority = partition_minority([node.weight for node in report.nodes], 0.3)
    assert minority == {0, 1, 2}
    for node in report.nodes:
        if node.index in minority:
            # No block accepted while cut off (a little after the cut for what was in
            # flight, a little before the end for the reconnection to arrive).
            assert not [at for at, _ in node.heights if 12.0 < at < 60.0], node.heights
    decided: dict[str, Any] = report.consensus
    assert decided["converged"] is True
    assert decided["blocks_rejected"] >= 1
    assert sum(node.rejected_count for node in report.nodes if node.index in minority) >= 1
    chain = _one_chain(report)
    assert all(node.accepted_ids == chain for node in report.nodes)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_crashed_proposer_leaves_the_others_deciding_one_chain() -> None:
    crashed: list[int] = []

    def crash_a_builder(run: NetworkRun) -> None:
        if not crashed and run.clock() - run.started > 4.0:
            crashed.append(0)
            run.engine.crash(0)

    report = simulate_network(
        _config(live_blocks=8, late_fraction=0.5), LocalEngine(), observe=crash_a_builder
    )
    assert any(node.role == "late" for node in report.nodes)
    assert report.nodes[0].crashed
    assert report.consensus["converged"] is True
    chain = _one_chain(report)
    live = [node for node in report.nodes if not node.crashed]
    assert all(node.accepted_ids == chain for node in live)
    assert len(chain) >= 8


def test_a_node_without_enough_connected_stake_sends_no_polls() -> None:
    config = _config(nodes=4, live_blocks=1)
    stake = StakeSchedule.draw(
        nodes=4, kind="equal", seed=config.seed, durango_time=config.start_time
    )
    node = NodeServer(_specs(config, stake)[0])
    try:
        node.generate(config.blocks, config.txs_per_block, config.seed, config.block_interval)
        # Three of four equal validators unreachable: 25% connected, below alpha / k.
        step = node.consensus_join(
            config.start_time + 1_000, config.consensus_parameters(), 1, 2.0, (1, 2, 3)
        )
        assert step.build_at is not None
        built = node.consensus_build(
            max(step.build_at, config.start_time + 1_000),
            step.preference,
            config.seed,
            step.preference_height * config.txs_per_block,
            config.txs_per_block,
        )
        assert len(built.built) == 1 and built.processing == 1
        assert not [m for _, m in built.sends if isinstance(m, PushQuery | PullQuery)]
        # Reconnected, it polls.
        again = node.consensus_connect(config.start_time + 1_001, (1, 2, 3), True)
        assert [m for _, m in again.sends if isinstance(m, PullQuery)]
    finally:
        node.close()


@pytest.mark.slow
def test_the_same_seed_gives_the_same_figures_batched_or_one_event_at_a_time() -> None:
    config = _config(live_blocks=3)
    batched = reported(simulate_network(config, LocalEngine()))["simulated"]
    single = reported(simulate_network(config, LocalEngine(), batch=False))["simulated"]
    for figures in (batched, single):
        figures["totals"].pop("batches")
        figures["totals"].pop("widest_batch")
        figures["totals"].pop("calls")
    assert batched == single


def test_bad_consensus_options_are_value_errors() -> None:
    with pytest.raises(ValueError, match="FRACTION@START-END"):
        parse_partition("0.3@60-10")
    with pytest.raises(ValueError, match="FRACTION@START-END"):
        parse_partition("thirty")
    with pytest.raises(ValueError, match="need --consensus snowman"):
        NetworkSimulationConfig(nodes=4, k=3)
    with pytest.raises(ValueError, match="alpha"):
        _config(k=4, alpha=5)
    with pytest.raises(ValueError, match="consensus is one of"):
        _config(consensus="avalanche")


@pytest.mark.slow
def test_the_cli_writes_the_consensus_figures(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    code = main(
        [
            "simulate",
            "--nodes",
            "4",
            "--blocks",
            "12",
            "--live-blocks",
            "3",
            "--consensus",
            "snowman",
            "--k",
            "3",
            "--alpha",
            "2",
            "--beta",
            "3",
            "--node-store",
            "memory",
            "--json",
            str(out),
            *(["--plot", str(tmp_path / "run.png")] if _HAS_MATPLOTLIB else []),
        ]
    )
    assert code == 0
    if _HAS_MATPLOTLIB:
        assert (tmp_path / "run-finality.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    simulated = json.loads(out.read_text())["simulated"]
    decided = simulated["consensus"]
    assert set(decided) == {
        "engine",
        "params",
        "polls_successful",
        "polls_failed",
        "blocks_accepted",
        "blocks_rejected",
        "finality_s",
        "converged",
    }
    assert decided["engine"] == "snowman" and decided["params"]["k"] == 3
    assert set(decided["finality_s"]) == {"p50", "p90", "max"}
    assert simulated["safety"] == {"conflicting_accepts": 0}
    for node in simulated["nodes"]:
        assert len(node["accepted_ids"]) == node["accepted_count"]
    assert main(["simulate", "--nodes", "4", "--consensus", "snowman", "--partition", "x"]) == 2


def test_a_coordinator_run_reports_its_decisions_as_final_once_built() -> None:
    report = simulate_network(
        NetworkSimulationConfig(nodes=3, blocks=12, live_blocks=2, node_store="memory"),
        LocalEngine(),
    )
    assert report.consensus["engine"] == "coordinator"
    assert report.consensus["blocks_rejected"] == 0
    assert report.safety == {"conflicting_accepts": 0}
    assert not isinstance(report, SnowmanNetworkRun)


def test_runs_of_more_than_64_nodes_list_no_accepted_ids() -> None:
    def report(nodes: int) -> dict[str, Any]:
        results = tuple(NodeResult(index, "node") for index in range(nodes))
        for result in results:
            result.accepted_ids = ["ab" * 32]
            result.accepted_count = 1
        made = NetworkReport(
            config=NetworkSimulationConfig(nodes=nodes, node_store="memory"),
            costs=REFERENCE_COSTS,
            engine={"name": "local"},
            nodes=results,
            totals={},
            setup_wall_seconds=0.0,
            run_wall_seconds=0.0,
        )
        simulated = reported(made)["simulated"]
        assert isinstance(simulated, dict)
        return simulated

    assert all("accepted_ids" not in node for node in report(65)["nodes"])
    assert all(node["accepted_ids"] == ["ab" * 32] for node in report(64)["nodes"])
