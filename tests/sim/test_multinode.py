"""A network of nodes: every node bootstraps and follows the builders, the figures are a
function of the seed, batched or not, and a node whose process dies is reported as crashed
while the run goes on (the Ray engine's own tests are in test_ray_engine.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.sim.networks import SMALL, simulated
from vmstack.cli import main
from vmstack.errors import VMStackError
from vmstack.sim.network import (
    LocalEngine,
    NetworkRun,
    NetworkSimulationConfig,
    make_engine,
    simulate_network,
)


@pytest.fixture(scope="module")
def local_figures() -> dict[str, Any]:
    return simulated(LocalEngine())


def test_local_network_bootstraps_every_node_and_follows_the_builders(
    local_figures: dict[str, Any],
) -> None:
    totals, nodes = local_figures["totals"], local_figures["nodes"]
    assert totals["blocks_built"] == SMALL.live_blocks
    assert totals["tip_height"] == SMALL.blocks + SMALL.live_blocks
    assert totals["nodes_at_tip"] == SMALL.nodes
    assert totals["crashed"] == totals["stalled"] == 0
    assert [node["role"] for node in nodes].count("builder") == 2
    assert [node["role"] for node in nodes].count("late") == 1
    for node in nodes[2:]:
        # Every joiner fetched the chain in several answers of at most 8 blocks.
        assert node["blocks_fetched"] >= SMALL.blocks
        assert node["requests"] >= SMALL.blocks // SMALL.max_blocks_num
        assert node["bytes_received"] > 0
        assert node["bootstrap_seconds"] > 0
        assert node["height"] == totals["tip_height"]
    late = next(node for node in nodes if node["role"] == "late")
    assert late["joined_at"] > 0
    # A late joiner has more to fetch: the blocks built before it joined.
    assert late["blocks_fetched"] > SMALL.blocks
    assert totals["requests"] == sum(node["requests"] for node in nodes)
    assert totals["dropped"] > 0 and totals["retries"] > 0


def test_the_run_is_a_function_of_its_seed(local_figures: dict[str, Any]) -> None:
    assert simulated(LocalEngine()) == local_figures


def test_batched_calls_give_the_figures_of_one_event_at_a_time(
    local_figures: dict[str, Any],
) -> None:
    one_by_one = simulated(LocalEngine(), batch=False)
    assert one_by_one["nodes"] == local_figures["nodes"]
    batched, serial = local_figures["totals"], one_by_one["totals"]
    assert serial["batches"] == serial["events"] > batched["batches"]
    assert {k: v for k, v in serial.items() if k not in ("batches", "widest_batch")} == {
        k: v for k, v in batched.items() if k not in ("batches", "widest_batch")
    }


def test_a_crashed_local_node_is_reported_and_the_run_goes_on() -> None:
    engine = LocalEngine()

    def crash_node_2_once_bootstrapped(run: NetworkRun) -> None:
        if run.states[2].ready:
            run.engine.crash(2)

    report = simulate_network(SMALL, engine, observe=crash_node_2_once_bootstrapped)
    crashed = report.nodes[2]
    assert crashed.crashed and crashed.crash_reason == "stopped"
    assert crashed.crashed_at is not None and crashed.bootstrap_seconds is not None
    assert report.totals["crashed"] == 1
    assert report.totals["nodes_at_tip"] == SMALL.nodes - 1
    assert report.totals["blocks_built"] == SMALL.live_blocks


def test_the_slots_of_a_crashed_proposer_go_to_the_next_slots_proposers() -> None:
    def crash_builder_0_after_the_first_block(run: NetworkRun) -> None:
        if run.built >= 1:
            run.engine.crash(0)

    report = simulate_network(SMALL, LocalEngine(), observe=crash_builder_0_after_the_first_block)
    assert report.nodes[0].crashed and not report.nodes[1].crashed
    assert report.totals["blocks_built"] == SMALL.live_blocks
    down = [missed for missed in report.slots.missed if missed.reason == "down"]
    assert down and all(missed.node == 0 for missed in down)
    assert report.nodes[0].slots_missed >= len(down)
    assert report.totals["nodes_at_tip"] == SMALL.nodes - 1


def test_a_network_needs_two_nodes_and_a_builder_short_of_all() -> None:
    with pytest.raises(ValueError, match="at least 2 nodes"):
        NetworkSimulationConfig(nodes=1)
    with pytest.raises(ValueError, match="builders must be between 1 and"):
        NetworkSimulationConfig(nodes=4, builders=4)
    with pytest.raises(ValueError, match="need --engine ray"):
        make_engine("local", workers=2)


def test_a_run_that_does_not_settle_in_its_event_budget_fails_clearly() -> None:
    config = NetworkSimulationConfig(
        nodes=3, blocks=6, txs_per_block=0, live_blocks=2, max_events=10
    )
    with pytest.raises(VMStackError, match="did not settle within 10 events"):
        simulate_network(config, LocalEngine())


def test_cli_runs_a_network_and_names_the_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "network.json"
    status = main(
        [
            "simulate",
            "--nodes",
            "3",
            "--blocks",
            "12",
            "--txs-per-block",
            "1",
            "--live-blocks",
            "2",
            "--json",
            str(out),
        ]
    )
    assert status == 0
    report = json.loads(out.read_text())
    assert report["engine"]["name"] == "local"
    assert len(report["simulated"]["nodes"]) == 3
    assert report["simulated"]["totals"]["nodes_at_tip"] == 3
    assert "network totals" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--nodes", "4", "--serial"], "--serial applies to the two-node run"),
        (["--engine", "local", "--workers", "2"], "need --engine ray"),
        (["--nodes", "4", "--builders", "4"], "builders must be between"),
    ],
)
def test_cli_refuses_options_a_network_does_not_take(
    options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--blocks", "4", *options]) == 2
    assert message in capsys.readouterr().err
