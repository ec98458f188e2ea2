"""The Ray engine: the local engine's figures from nodes in Ray actors, a killed actor
reported as a crashed node while the run goes on, a bad node's answers dropped and counted
as on the local engine, and an unreachable cluster refused at once."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.sim.hostile import answer_other_bodies, damage_bodies
from tests.sim.networks import SMALL, simulated
from tests.sim.test_bad_nodes import HOSTILE, assert_survived, failing_build, run_with
from vmstack.errors import VMStackError
from vmstack.sim.engines import LocalEngine, RayEngine
from vmstack.sim.multinode import NetworkRun, simulate_network

#: These tests start Ray.
pytestmark = pytest.mark.slow


def test_an_unreachable_cluster_is_a_clear_error_not_a_hang() -> None:
    pytest.importorskip("ray")
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        engine = RayEngine(address=f"127.0.0.1:{port}")
        with pytest.raises(VMStackError, match="no Ray cluster answers at"):
            simulate_network(SMALL, engine)


@pytest.fixture(scope="module")
def ray_session() -> Iterator[Any]:
    """One local Ray for every test here (starting one costs seconds)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_engine_gives_the_local_engine_figures(ray_session: Any) -> None:
    # Two actors for four nodes: calls on the two run at once, two nodes share each.
    engine = RayEngine(workers=2)
    ray_figures = simulated(engine)
    assert engine.describe()["workers"] == 2
    assert ray_figures == simulated(LocalEngine())


def test_ray_engine_gives_the_local_figures_with_skewed_stake(ray_session: Any) -> None:
    # The proposer windows' choices (who builds, which slots are missed) are the
    # coordinator's, from the same book on either engine.
    config = attrs.evolve(SMALL, stake="skewed", live_blocks=10)
    on_ray = simulate_network(config, RayEngine(workers=2))
    assert sum(node.blocks_built for node in on_ray.nodes) == config.live_blocks
    assert len({node.weight for node in on_ray.nodes}) > 1
    assert on_ray.as_dict()["simulated"] == \
        simulate_network(config, LocalEngine()).as_dict()["simulated"]


def _wait_until_dead(ray: Any, actor: Any) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError("the killed actor still answers")


def test_a_killed_actor_is_reported_as_crashed_and_the_run_goes_on(ray_session: Any) -> None:
    # One actor per node, the default.
    engine = RayEngine(call_timeout=30.0)
    killed: list[int] = []

    def kill_node_2_once_bootstrapped(run: NetworkRun) -> None:
        if run.states[2].ready and not killed:
            actor = engine.actor_of(2)
            ray_session.kill(actor)
            _wait_until_dead(ray_session, actor)
            killed.append(2)

    report = simulate_network(SMALL, engine, observe=kill_node_2_once_bootstrapped)
    assert killed == [2]
    crashed = report.nodes[2]
    assert crashed.crashed
    assert crashed.crash_reason is not None and "died" in crashed.crash_reason
    assert report.totals["crashed"] == 1
    assert report.totals["nodes_at_tip"] == SMALL.nodes - 1
    assert report.totals["blocks_built"] == SMALL.live_blocks
    assert report.engine == {"name": "ray", "workers": SMALL.nodes, "address": None}
    # Even the killed actor's store is gone once the engine is closed.
    assert engine.store_root is not None and not engine.store_root.exists()


def test_scaling_example_compares_local_and_ray_on_a_running_cluster(
        ray_session: Any, tmp_path: Path) -> None:
    """examples/ray_scaling.py joins the cluster it is given and finds the same simulated
    figures on every engine."""
    script = Path(__file__).resolve().parents[2] / "examples" / "ray_scaling.py"
    out = tmp_path / "scaling.json"
    result = subprocess.run(
        [sys.executable, str(script), "--nodes", "3", "--workers", "2", "--blocks", "6",
         "--txs-per-block", "1", "--live-blocks", "1", "--json", str(out),
         "--ray-address", ray_session.get_runtime_context().gcs_address],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "same simulated figures on every run: yes" in result.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [(row["engine"], row["workers"]) for row in rows] == [("local", "-"), ("ray", 2)]
    assert rows[0]["calls"] == rows[1]["calls"] > 0


@pytest.mark.parametrize("fault", [answer_other_bodies, damage_bodies],
                         ids=["other bodies", "damaged store"])
def test_a_bad_node_on_ray_is_dropped_and_counted_as_on_the_local_engine(
        ray_session: Any, fault: Any) -> None:
    # Two actors: the bad node shares its actor with an honest one, which goes on serving.
    report = run_with(RayEngine(workers=2, call_timeout=60.0), fault)
    assert_survived(report)
    assert report.nodes[HOSTILE].bad_answers_sent > 0
    local = run_with(LocalEngine(), fault)
    assert report.as_dict()["simulated"] == local.as_dict()["simulated"]


def test_a_node_whose_own_call_fails_on_ray_is_crashed_not_the_run(ray_session: Any) -> None:
    engine = RayEngine(workers=2, call_timeout=60.0)
    report = run_with(engine, failing_build)
    assert report.nodes[HOSTILE].crash_reason == (
        "its build failed: StoreCorrupted: the block record at the head is damaged")
    assert report.totals["crashed"] == 1
    # Node 3 shares the failed node's actor and is not taken down with it.
    assert not report.nodes[3].crashed
    assert report.totals["nodes_at_tip"] == SMALL.nodes - 1
