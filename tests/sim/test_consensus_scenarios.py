"""Network runs decided by Snowman under faults: a byzantine proposer that equivocates, and
a partition whose rejects reach every layer of every node's stack exactly once
(docs/network-consensus.md)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import StatusCode

import vmstack.sim.network.node as node_module
from tests.sim.networks import small_snowman
from vmstack.sim.network.consensus import SnowmanNetworkRun
from vmstack.sim.network.engines import LocalEngine
from vmstack.sim.network.records import NetworkSimulationConfig
from vmstack.sim.network.run import NetworkRun, simulate_network
from vmstack.stack import build_stack


def _config(**overrides: Any) -> NetworkSimulationConfig:
    return small_snowman(**({"nodes": 8} | overrides))


def _run(config: NetworkSimulationConfig) -> tuple[Any, SnowmanNetworkRun]:
    held: list[NetworkRun] = []

    def keep(run: NetworkRun) -> None:
        if not held:
            held.append(run)

    report = simulate_network(config, LocalEngine(), observe=keep)
    (run,) = held
    assert isinstance(run, SnowmanNetworkRun)
    return report, run


class _Decisions(SpanProcessor):
    """Counts a traced stack's successful block verifies, accepts and rejects, by layer
    and block ID."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        layer, _, what = span.name.partition(".block.")
        if what and span.status.status_code is not StatusCode.ERROR:
            assert span.attributes is not None
            self.counts[(layer, str(span.attributes["block_id"]), what)] += 1

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_equivocating_proposer_loses_one_of_its_blocks_everywhere() -> None:
    report, run = _run(_config(live_blocks=8, equivocators=(0, 3)))
    assert report.consensus["converged"] is True
    assert report.safety == {"conflicting_accepts": 0}
    assert run.equivocations, "the byzantine proposers had no slot"
    chains = [set(ids) for ids in run.accepted_ids]
    for pair in run.equivocations:
        assert len(pair) == 2 and pair[0] != pair[1]
        winners = {block_id for block_id in pair if all(block_id in chain for chain in chains)}
        # One wins on every node; the other is accepted nowhere and rejected.
        assert len(winners) == 1
        (loser,) = set(pair) - winners
        assert not any(loser in chain for chain in chains)
        assert loser in run.rejected_blocks
    assert all(ids == run.accepted_ids[0] for ids in run.accepted_ids)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_verified_block_gets_one_decision_at_every_layer_of_every_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorders: list[_Decisions] = []

    def traced_stack(*args: Any, **kwargs: Any) -> Any:
        recorder = _Decisions()
        provider = TracerProvider()
        provider.add_span_processor(recorder)
        recorders.append(recorder)
        return build_stack(*args, tracer=provider.get_tracer("decisions"), **kwargs)

    monkeypatch.setattr(node_module, "build_stack", traced_stack)
    report, run = _run(_config(live_blocks=4, partition=(0.3, 5.0, 15.0)))
    assert report.consensus["converged"] is True
    assert report.consensus["blocks_rejected"] >= 1
    assert len(recorders) == report.config.nodes
    rejects = 0
    for index, recorder in enumerate(recorders):
        blocks = {(layer, block_id) for layer, block_id, _ in recorder.counts}
        assert {layer for layer, _ in blocks} == {"C", "proposervm"}
        for layer, block_id in blocks:
            verified = recorder.counts[(layer, block_id, "verify")]
            decided = (
                recorder.counts[(layer, block_id, "accept")],
                recorder.counts[(layer, block_id, "reject")],
            )
            where = f"node {index}, layer {layer}, block {block_id[:12]}"
            assert verified >= 1, f"{where}: decided {decided} without a verify"
            assert sorted(decided) == [0, 1], f"{where}: decided {decided}"
            rejects += decided[1]
    # The rejects counted in the spans are at least the engine's (each at both layers).
    assert rejects >= 2 * sum(run.rejected_counts) > 0
