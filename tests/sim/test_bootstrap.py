"""Tests for the discrete-event bootstrap over memory VMs."""

from __future__ import annotations

import random

import pytest

from vmstack import SimClock
from vmstack.conformance import memory_vm
from vmstack.sim.bootstrap import Bootstrapper, BootstrapResult
from vmstack.sim.costs import REFERENCE_COSTS
from vmstack.sim.events import EventLoop
from vmstack.sim.links import Network, NetworkConfig

MODES = pytest.mark.parametrize("batched", [True, False], ids=["batched", "serial"])


def bootstrap(
    batched: bool,
    *,
    blocks: int = 120,
    seed: int = 7,
    peers: int = 3,
    drop_probability: float = 0.05,
    max_blocks_num: int = 50,
) -> BootstrapResult:
    serving = memory_vm(batching=True, blocks=blocks)
    node = memory_vm(batching=True)
    network = Network(NetworkConfig(drop_probability=drop_probability), random.Random(seed), peers)
    return Bootstrapper(
        node=node,
        peers=[serving] * peers,
        network=network,
        costs=REFERENCE_COSTS,
        clock=SimClock(1000.0),
        batched=batched,
        max_blocks_num=max_blocks_num,
    ).run(serving.last_accepted())


@MODES
def test_bootstrap_fetches_and_accepts_the_whole_chain(batched: bool) -> None:
    """The node ends with the serving node's tip accepted, every block fetched once."""
    serving = memory_vm(batching=True, blocks=90)
    node = memory_vm(batching=True)
    network = Network(NetworkConfig(), random.Random(1), 2)
    result = Bootstrapper(
        node=node,
        peers=[serving, serving],
        network=network,
        costs=REFERENCE_COSTS,
        clock=SimClock(),
        batched=batched,
        max_blocks_num=40,
    ).run(serving.last_accepted())
    assert node.last_accepted() == serving.last_accepted()
    assert result.blocks == 90
    assert result.timeline[0] == (0.0, 0)
    assert result.timeline[-1] == (result.total_seconds, 90)
    times = [point[0] for point in result.timeline]
    assert times == sorted(times)


@MODES
def test_same_seed_gives_identical_simulated_figures(batched: bool) -> None:
    """Two runs with the same seed agree on every simulated figure."""
    assert bootstrap(batched).simulated() == bootstrap(batched).simulated()


def test_drops_cause_retries_and_a_different_seed_differs() -> None:
    """Dropped messages are retried with the next peer, and the seed changes the run."""
    lossy = bootstrap(True, drop_probability=0.4, seed=3)
    assert lossy.retries > 0
    assert lossy.blocks == 120
    assert lossy.simulated() != bootstrap(True, drop_probability=0.4, seed=4).simulated()


def test_batched_bootstrap_is_faster_in_simulated_time() -> None:
    """Batched serving answers with more blocks per round trip than the 50 ms serial walk."""
    batched = bootstrap(True, blocks=400, max_blocks_num=2000, drop_probability=0.0)
    serial = bootstrap(False, blocks=400, max_blocks_num=2000, drop_probability=0.0)
    assert batched.requests <= serial.requests
    assert batched.total_seconds < serial.total_seconds


def test_event_loop_runs_simultaneous_events_in_schedule_order() -> None:
    """Events at the same time run in the order they were scheduled."""
    clock = SimClock()
    loop = EventLoop(clock)
    seen: list[str] = []
    loop.schedule(1.0, lambda: seen.append("b"))
    loop.schedule(0.5, lambda: seen.append("a"))
    loop.schedule(1.0, lambda: seen.append("c"))
    loop.run()
    assert seen == ["a", "b", "c"]
    assert clock() == 1.0


def test_event_loop_refuses_the_past() -> None:
    """An event cannot be scheduled before now."""
    with pytest.raises(ValueError):
        EventLoop(SimClock()).schedule(-1.0, lambda: None)


@pytest.mark.parametrize(
    "config",
    [
        {"latency": 0.01, "latency_spread": 0.02},
        {"bandwidth": 0.0},
        {"drop_probability": 1.0},
    ],
)
def test_network_config_refuses_nonsense(config: dict[str, float]) -> None:
    """A network that cannot work is refused when it is configured."""
    with pytest.raises(ValueError):
        NetworkConfig(**config)


@MODES
def test_the_time_budget_binds_both_paths_alike(batched: bool) -> None:
    """A serving cost of 1/64 s a block lets four blocks into a 1/16 s budget, on the
    batched path as on the serial one: the batched answer's cost is charged as its walk
    proceeds, not after it."""
    import attrs

    from vmstack.sim.costs import OperationCost

    per_block = OperationCost(per_block=1 / 64)
    costs = attrs.evolve(
        REFERENCE_COSTS, serve_batched=per_block, serve_serial=OperationCost(base=1 / 64)
    )
    serving = memory_vm(batching=True, blocks=40)
    node = memory_vm(batching=True)
    network = Network(NetworkConfig(drop_probability=0.0), random.Random(1), 1)
    result = Bootstrapper(
        node=node,
        peers=[serving],
        network=network,
        costs=costs,
        clock=SimClock(),
        batched=batched,
        max_retrieval_time=1 / 16,
    ).run(serving.last_accepted())
    assert node.last_accepted() == serving.last_accepted()
    assert result.requests == 10  # 40 blocks, four an answer


def test_retries_are_recorded_with_their_time_and_reason() -> None:
    """Every retry is in the result with the simulated time it happened and why, in order."""
    lossy = bootstrap(False, drop_probability=0.3, seed=3)
    assert len(lossy.retries_at) == lossy.retries > 0
    times = [at for at, _ in lossy.retries_at]
    assert times == sorted(times) and 0 < times[0] <= lossy.total_seconds
    assert {reason for _, reason in lossy.retries_at} <= {"timeout", "empty", "invalid"}
    assert "timeout" in {reason for _, reason in lossy.retries_at}
    assert lossy.simulated()["retries_at"] == [list(point) for point in lossy.retries_at]
