"""The Ray engine: the local engine's figures from nodes in Ray actors, a killed actor
reported as a crashed node while the run goes on, a bad node's answers dropped and counted
as on the local engine, and an unreachable cluster refused at once."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from rich.console import Console

from tests.sim.hostile import answer_other_bodies, damage_bodies
from tests.sim.networks import SMALL, simulated
from tests.sim.test_bad_nodes import HOSTILE, assert_survived, failing_build, run_with
from tests.support.reports import reported
from vmstack.errors import VMStackError
from vmstack.sim.network import LocalEngine, NetworkRun, RayEngine, simulate_network
from vmstack.sim.network.ray_cluster import RayHost, _probe_cluster, plan_placement
from vmstack.sim.network.report import placement_summary, print_network_report


def _hosts(*rooms: int | None) -> list[RayHost]:
    return [
        RayHost(f"node{index}", f"10.0.0.{index + 1}", room) for index, room in enumerate(rooms)
    ]


def test_actors_go_to_the_hosts_in_turn_and_skip_a_full_one() -> None:
    assert plan_placement(4, _hosts(None, None)) == [0, 1, 0, 1]
    assert plan_placement(5, _hosts(None, None, None)) == [0, 1, 2, 0, 1]
    # The first host holds one actor: the others go on in turn without it.
    assert plan_placement(5, _hosts(1, None, None)) == [0, 1, 2, 1, 2]
    # The cluster holds three actors of the five asked: the plan is those three.
    assert plan_placement(5, _hosts(2, 1)) == [0, 1, 0]
    assert plan_placement(3, _hosts(0, 0)) == []
    assert plan_placement(2, []) == []
    with pytest.raises(ValueError, match="workers must be at least 1"):
        plan_placement(0, _hosts(None))


def test_the_placement_line_names_every_host_with_its_actors_and_nodes() -> None:
    engine = {
        "name": "ray",
        "workers": 3,
        "workers_asked": 4,
        "hosts": [
            {"node_id": "a" * 56, "address": "10.0.0.1", "actors": [0, 2]},
            {"node_id": "b" * 56, "address": "10.0.0.2", "actors": [1]},
        ],
        "actors": [
            {"actor": 0, "nodes": [0, 3]},
            {"actor": 1, "nodes": [1]},
            {"actor": 2, "nodes": [2]},
        ],
    }
    assert placement_summary(engine) == (
        "placement: 3 actors on 2 hosts (asked for 4; the cluster held 3): "
        "10.0.0.1 (aaaaaaaa) 2 actors, 3 nodes; 10.0.0.2 (bbbbbbbb) 1 actors, 1 nodes"
    )
    assert placement_summary({"name": "local"}) is None


#: These tests start Ray.
pytestmark = pytest.mark.ray


def test_an_unreachable_cluster_is_a_clear_error_not_a_hang() -> None:
    pytest.importorskip("ray")
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        engine = RayEngine(address=f"127.0.0.1:{port}")
        with pytest.raises(VMStackError, match="no Ray cluster answers at"):
            simulate_network(SMALL, engine)


@pytest.mark.slow
def test_a_listener_that_is_not_ray_is_one_line_within_the_join_bound() -> None:
    pytest.importorskip("ray")
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        engine = RayEngine(address=address, join_timeout=2.0)
        started = time.monotonic()
        with pytest.raises(VMStackError) as refused:
            simulate_network(SMALL, engine)
        waited = time.monotonic() - started
    message = str(refused.value)
    assert message == (
        f"no Ray cluster answers at {address} within 2 s: something listens "
        "there, but not Ray's control service"
    )
    # The bound holds: Ray's own join would retry for 20 s and more.
    assert waited < 15


@pytest.mark.slow
def test_ray_engine_gives_the_local_engine_figures(ray_session: Any) -> None:
    # Two actors for four nodes: calls on the two run at once, two nodes share each.
    engine = RayEngine(workers=2)
    ray_figures = simulated(engine)
    assert engine.describe()["workers"] == 2
    assert ray_figures == simulated(LocalEngine())


@pytest.mark.slow
def test_ray_engine_gives_the_local_figures_with_skewed_stake(ray_session: Any) -> None:
    # The proposer windows' choices (who builds, which slots are missed) are the
    # coordinator's, from the same book on either engine.
    config = attrs.evolve(SMALL, stake="skewed", live_blocks=10)
    on_ray = simulate_network(config, RayEngine(workers=2))
    assert sum(node.blocks_built for node in on_ray.nodes) == config.live_blocks
    assert len({node.weight for node in on_ray.nodes}) > 1
    assert (
        reported(on_ray)["simulated"]
        == reported(simulate_network(config, LocalEngine()))["simulated"]
    )


@pytest.mark.slow
def test_the_report_says_which_host_each_actor_ran_on_and_what_it_held(ray_session: Any) -> None:
    report = simulate_network(SMALL, RayEngine(workers=3))
    engine: dict[str, Any] = report.engine
    node_id = ray_session.get_runtime_context().get_node_id()
    address = ray_session.util.get_node_ip_address()
    assert engine["hosts"] == [{"node_id": node_id, "address": address, "actors": [0, 1, 2]}]
    assert [actor["nodes"] for actor in engine["actors"]] == [[0, 3], [1], [2]]
    assert {actor["node_id"] for actor in engine["actors"]} == {node_id}
    measured = reported(report)["measured"]
    by_actor = measured["peak_memory_bytes_by_actor"]
    assert [entry["actor"] for entry in by_actor] == [0, 1, 2]
    assert all(entry["bytes"] > 0 and entry["node_id"] == node_id for entry in by_actor)
    (host,) = measured["peak_memory_bytes_by_host"]
    assert host["actors"] == 3 and host["bytes"] == sum(entry["bytes"] for entry in by_actor)
    console = Console(record=True, width=200)
    print_network_report(report, console)
    assert (
        f"placement: 3 actors on 1 host: {host['address']} ({node_id[:8]}) 3 actors, "
        "4 nodes" in console.export_text()
    )


@pytest.mark.slow
def test_actors_that_ask_for_cpus_go_to_as_many_as_the_cluster_holds(ray_session: Any) -> None:
    # The local Ray has two CPUs: two actors of one CPU each, and the four nodes on them.
    engine = RayEngine(workers=4, actor_cpus=1.0)
    ray_figures = simulated(engine)
    described: dict[str, Any] = engine.describe()
    assert (described["workers"], described["workers_asked"]) == (2, 4)
    assert [actor["nodes"] for actor in described["actors"]] == [[0, 2], [1, 3]]
    assert ray_figures == simulated(LocalEngine())


def _wait_until_dead(ray: Any, actor: Any) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ping.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError("the killed actor still answers")


@pytest.mark.slow
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
    assert (report.engine["workers"], report.engine["address"]) == (SMALL.nodes, None)
    facts: dict[str, Any] = report.engine
    assert [actor["nodes"] for actor in facts["actors"]] == [[0], [1], [2], [3]]
    # Even the killed actor's store is gone once the engine is closed.
    assert engine.store_root is not None and not engine.store_root.exists()


@pytest.mark.slow
def test_scaling_example_compares_local_and_ray_on_a_running_cluster(
    ray_session: Any, tmp_path: Path
) -> None:
    """examples/ray_scaling.py joins the cluster it is given and finds the same simulated
    figures on every engine."""
    script = Path(__file__).resolve().parents[2] / "examples" / "ray_scaling.py"
    out = tmp_path / "scaling.json"
    result = subprocess.run(
        [
            sys.executable,
            str(script),
            "--nodes",
            "3",
            "--workers",
            "2",
            "--blocks",
            "6",
            "--txs-per-block",
            "1",
            "--live-blocks",
            "1",
            "--json",
            str(out),
            "--ray-address",
            ray_session.get_runtime_context().gcs_address,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "same simulated figures on every run: yes" in result.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [(row["engine"], row["workers"]) for row in rows] == [("local", "-"), ("ray", 2)]
    assert rows[0]["calls"] == rows[1]["calls"] > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault", [answer_other_bodies, damage_bodies], ids=["other bodies", "damaged store"]
)
def test_a_bad_node_on_ray_is_dropped_and_counted_as_on_the_local_engine(
    ray_session: Any, fault: Any
) -> None:
    # Two actors: the bad node shares its actor with an honest one, which goes on serving.
    report = run_with(RayEngine(workers=2, call_timeout=60.0), fault)
    assert_survived(report)
    assert report.nodes[HOSTILE].bad_answers_sent > 0
    local = run_with(LocalEngine(), fault)
    assert reported(report)["simulated"] == reported(local)["simulated"]


@pytest.mark.slow
def test_a_node_whose_own_call_fails_on_ray_is_crashed_not_the_run(ray_session: Any) -> None:
    engine = RayEngine(workers=2, call_timeout=60.0)
    report = run_with(engine, failing_build)
    assert report.nodes[HOSTILE].crash_reason == (
        "its build failed: StoreCorrupted: the block record at the head is damaged"
    )
    assert report.totals["crashed"] == 1
    # Node 3 shares the failed node's actor and is not taken down with it.
    assert not report.nodes[3].crashed
    assert report.totals["nodes_at_tip"] == SMALL.nodes - 1


@pytest.mark.slow
def test_a_cluster_that_needs_a_token_refuses_a_driver_without_it_in_one_line(
    ray_session: Any,
) -> None:
    if os.environ.get("RAY_AUTH_MODE") != "token":
        pytest.skip("the local Ray runs without token authentication")
    address = ray_session.get_runtime_context().gcs_address
    environment = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    environment.pop("RAY_AUTH_TOKEN", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vmstack",
            "simulate",
            "--nodes",
            "3",
            "--blocks",
            "4",
            "--engine",
            "ray",
            "--ray-address",
            address,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=environment,
    )
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"vmstack simulate: the Ray cluster at {address} refused this "
        "driver: it needs Ray's authentication token"
    ), result.stderr
    assert "InvalidAuthToken" in last


@pytest.mark.slow
def test_a_cluster_of_another_ray_version_is_refused_in_one_line(
    ray_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = ray_session.get_runtime_context().gcs_address
    monkeypatch.setattr(ray_session, "__version__", "0.0.1")
    with pytest.raises(VMStackError) as refused:
        _probe_cluster(ray_session, address, timeout=30.0)
    assert str(refused.value).startswith(f"the Ray cluster at {address} runs Ray 2.")
    assert "this driver Ray 0.0.1 on Python" in str(refused.value)
    assert "\n" not in str(refused.value)
