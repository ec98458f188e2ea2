"""A network run decided by Snowman on the Ray engine: the same simulated figures as on the
local engine (docs/network-consensus.md)."""

from __future__ import annotations

from typing import Any

import pytest

from vmstack.sim.network.engines import LocalEngine
from vmstack.sim.network.records import NetworkSimulationConfig
from vmstack.sim.network.run import simulate_network

#: Eight nodes, a partition of 30% of the stake: polls fail, blocks are rejected.
PARTITIONED = NetworkSimulationConfig(
    nodes=8,
    blocks=12,
    live_blocks=4,
    consensus="snowman",
    k=4,
    alpha=3,
    beta=4,
    node_store="memory",
    partition=(0.3, 5.0, 15.0),
)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_snowman_on_ray_gives_the_local_engine_figures(ray_session: Any) -> None:
    from vmstack.sim.network.ray_engine import RayEngine

    local: dict[str, Any] = simulate_network(PARTITIONED, LocalEngine()).as_dict()["simulated"]  # type: ignore[assignment]
    on_ray = simulate_network(PARTITIONED, RayEngine(workers=2, call_timeout=120.0))
    assert on_ray.engine["name"] == "ray"
    assert on_ray.as_dict()["simulated"] == local
    decided = local["consensus"]
    assert decided["engine"] == "snowman" and decided["converged"] is True
    assert decided["polls_failed"] > 0 and decided["blocks_rejected"] >= 1
    assert local["safety"] == {"conflicting_accepts": 0}
