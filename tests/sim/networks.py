"""The small network the network-run tests share, and its simulated figures."""

from __future__ import annotations

from typing import Any

from vmstack.sim.network import NetworkConfig, NetworkSimulationConfig, simulate_network

__all__ = ["SMALL", "simulated", "small_snowman"]

# Four nodes (two builders, one late joiner), short answers so a bootstrap takes several
# requests, and drops often enough that some requests time out and are retried.
SMALL = NetworkSimulationConfig(
    nodes=4,
    blocks=30,
    txs_per_block=1,
    live_blocks=6,
    late_fraction=0.5,
    max_blocks_num=8,
    seed=3,
    network=NetworkConfig(drop_probability=0.05),
)


def simulated(
    engine: Any, config: NetworkSimulationConfig = SMALL, **options: Any
) -> dict[str, Any]:
    """The simulated figures of ``config`` (default :data:`SMALL`) run on ``engine``."""
    report = simulate_network(config, engine, **options)
    figures: dict[str, Any] = report.as_dict()["simulated"]  # type: ignore[assignment]
    return figures


def small_snowman(**overrides: Any) -> NetworkSimulationConfig:
    """A small network (six nodes) decided by Snowman with parameters its size can meet
    (``k`` 4, alphas 3, ``beta`` 4), memory stores and every node there from the start;
    ``overrides`` replace any field."""
    settings: dict[str, Any] = {
        "nodes": 6,
        "blocks": 12,
        "live_blocks": 6,
        "consensus": "snowman",
        "k": 4,
        "alpha": 3,
        "beta": 4,
        "node_store": "memory",
        "late_fraction": 0.0,
    }
    settings.update(overrides)
    return NetworkSimulationConfig(**settings)
