"""What lets a network run hold many nodes on one machine: a mesh that holds nothing per
pair of nodes, node stores in memory when LMDB environments would exhaust the file
descriptors (chosen automatically, or refused before the run with the reason), and the same
simulated figures on either store."""

from __future__ import annotations

import json
import random
import resource
from pathlib import Path

import attrs
import pytest

from tests.sim.networks import SMALL, simulated
from vmstack.cli import main
from vmstack.errors import VMStackError
from vmstack.sim.network import (
    LocalEngine,
    Mesh,
    NetworkConfig,
    NetworkSimulationConfig,
    simulate_network,
)


def test_a_mesh_of_a_million_nodes_is_made_at_once_and_its_links_are_fixed() -> None:
    config = NetworkConfig()
    mesh = Mesh(config, random.Random(5), 1_000_000)
    # Nothing per pair: a mesh holding 5e11 pairs could not be made at all.
    latency = mesh.latency(3, 999_999)
    assert latency == mesh.latency(999_999, 3)
    assert (
        config.latency - config.latency_spread <= latency <= config.latency + config.latency_spread
    )
    assert mesh.min_latency == pytest.approx(config.latency - config.latency_spread)
    # The same seed gives the same links; another seed other links.
    assert Mesh(config, random.Random(5), 1_000_000).latency(3, 999_999) == latency
    assert Mesh(config, random.Random(6), 1_000_000).latency(3, 999_999) != latency
    spread = {round(mesh.latency(0, peer), 4) for peer in range(1, 200)}
    assert len(spread) > 100
    with pytest.raises(ValueError, match="no link between nodes 4 and 4"):
        mesh.latency(4, 4)


def _limit_descriptors(monkeypatch: pytest.MonkeyPatch, soft: int) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _kind: (soft, soft))


def test_auto_takes_lmdb_while_the_descriptors_hold_and_memory_beyond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _limit_descriptors(monkeypatch, 1024)
    assert NetworkSimulationConfig(nodes=100).node_store_used == "lmdb"
    assert NetworkSimulationConfig(nodes=1000).node_store_used == "memory"
    assert NetworkSimulationConfig(nodes=1000, node_store="lmdb").node_store_used == "lmdb"
    assert NetworkSimulationConfig(nodes=1000).as_dict()["node_store_used"] == "memory"
    with pytest.raises(ValueError, match="node_store must be auto, lmdb or memory"):
        NetworkSimulationConfig(node_store="disk")


def test_more_lmdb_stores_than_descriptors_are_refused_before_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _limit_descriptors(monkeypatch, 300)
    config = attrs.evolve(SMALL, nodes=40, node_store="lmdb")
    with pytest.raises(
        VMStackError,
        match=r"40 LMDB node stores need about 160 file "
        r"descriptors and this process may open 300",
    ):
        simulate_network(config, LocalEngine())


def test_memory_stores_give_the_figures_of_lmdb_stores() -> None:
    on_lmdb = simulated(LocalEngine(), config=attrs.evolve(SMALL, node_store="lmdb"))
    on_memory = simulated(LocalEngine(), config=attrs.evolve(SMALL, node_store="memory"))
    assert on_memory == on_lmdb
    assert on_memory["totals"]["nodes_at_tip"] == SMALL.nodes


def test_the_cli_says_which_node_store_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "network.json"
    assert (
        main(
            [
                "simulate",
                "--nodes",
                "3",
                "--blocks",
                "6",
                "--txs-per-block",
                "1",
                "--live-blocks",
                "1",
                "--node-store",
                "memory",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert "node stores: memory" in capsys.readouterr().out
    config = json.loads(out.read_text())["config"]
    assert (config["node_store"], config["node_store_used"]) == ("memory", "memory")
