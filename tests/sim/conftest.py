"""Fixtures of the simulator tests: one local Ray per test module that asks for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ray_session() -> Iterator[Any]:
    """One local Ray (two CPUs, no dashboard) for every test of a module (starting one
    costs seconds); those tests skip where Ray is not installed."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
