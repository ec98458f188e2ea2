"""Network runs with transaction gossip (``--tx-rate``): every submitted transaction is
included exactly once, the figures are the ones the report names, and they are the same
batched or one event at a time, and on Ray as on the local engine."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from vmstack.sim.network import LocalEngine, NetworkSimulationConfig, simulate_network
from vmstack.sim.network.gossip_run import percentile
from vmstack.sim.network.node import NODE_METHODS

from .networks import SMALL

GOSSIP = attrs.evolve(SMALL, nodes=5, live_blocks=8, tx_rate=6.0)
FIELDS = {
    "submitted",
    "included",
    "included_twice",
    "latency_s",
    "duplicate_receipts_per_tx",
    "gossip_bytes_per_node_s",
    "bloom_hit_rate",
    "submissions_refused",
    "messages_dropped",
}


def _gossip(config: NetworkSimulationConfig = GOSSIP, **options: Any) -> dict[str, Any]:
    report = simulate_network(config, LocalEngine(), **options)
    simulated: dict[str, Any] = report.as_dict()["simulated"]  # type: ignore[assignment]
    return simulated


@pytest.fixture(scope="module")
def local_figures() -> dict[str, Any]:
    return _gossip()


@pytest.mark.slow
def test_every_submitted_transaction_is_included_exactly_once(
    local_figures: dict[str, Any],
) -> None:
    gossip = local_figures["gossip"]
    assert set(gossip) == FIELDS
    assert gossip["submitted"] > 20
    assert gossip["included"] == gossip["submitted"]
    assert gossip["included_twice"] == 0 and gossip["submissions_refused"] == 0
    latency = gossip["latency_s"]
    assert 0 < latency["p50"] <= latency["p90"] <= latency["max"] < 4 * GOSSIP.block_interval
    assert 0 <= gossip["bloom_hit_rate"] <= 1
    assert gossip["gossip_bytes_per_node_s"] > 0
    assert gossip["duplicate_receipts_per_tx"] >= 0
    # the blocks built live carry the gossiped transactions, not the seed's pool
    assert local_figures["totals"]["blocks_built"] == GOSSIP.live_blocks


@pytest.mark.slow
def test_one_event_at_a_time_gives_the_same_figures(local_figures: dict[str, Any]) -> None:
    one_by_one = _gossip(batch=False)
    assert one_by_one["gossip"] == local_figures["gossip"]
    assert one_by_one["nodes"] == local_figures["nodes"]
    batched, serial = local_figures["totals"], one_by_one["totals"]
    assert serial["batches"] == serial["events"] > batched["batches"]
    assert {k: v for k, v in serial.items() if k not in ("batches", "widest_batch")} == {
        k: v for k, v in batched.items() if k not in ("batches", "widest_batch")
    }


def test_a_run_without_a_rate_has_no_gossip_figures() -> None:
    assert "gossip" not in _gossip(attrs.evolve(GOSSIP, tx_rate=0.0, live_blocks=2))


@pytest.mark.parametrize("rate", [-1.0, float("inf"), float("nan")])
def test_a_bad_rate_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match="tx_rate"):
        attrs.evolve(GOSSIP, tx_rate=rate)


def test_the_gossip_methods_are_node_methods() -> None:
    assert {"gossip_submit", "gossip_push", "gossip_pull", "gossip_request"} <= NODE_METHODS


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([float(n) for n in range(1, 11)], 0.9) == 9.0


@pytest.mark.slow
def test_ray_gives_the_local_gossip_figures(
    ray_session: Any, local_figures: dict[str, Any]
) -> None:
    from vmstack.sim.network.ray_engine import RayEngine

    on_ray = simulate_network(GOSSIP, RayEngine(workers=2)).as_dict()["simulated"]
    assert on_ray == local_figures
