"""One bad node never ends a network run: a builder that answers its real block IDs with
other bodies, or that serves from a damaged store, gives bad answers that the others drop
and count, asking another peer; every honest node still reaches the tip. A node whose own
call fails is reported as crashed, the run going on without it. (The same faults on Ray are
in test_ray_engine.py.)"""

from __future__ import annotations

from typing import Any

from tests.sim.hostile import answer_other_bodies, damage_bodies, inject
from tests.sim.networks import SMALL
from tests.support.reports import reported
from vmstack.errors import StoreCorrupted
from vmstack.sim.network import LocalEngine, NetworkReport, NetworkRun, simulate_network
from vmstack.sim.network.node import Built, Executed, NodeServer
from vmstack.sim.network.stake import StakeSchedule

HOSTILE = 1
"""The builder made bad: node 0 builds the chain, node 1 imports it and serves it too."""


def run_with(engine: Any, fault: Any) -> NetworkReport:
    """:data:`SMALL` on ``engine``, with ``fault`` put into :data:`HOSTILE` before any
    block is served. A node with a damaged store would crash as soon as the proposer
    windows give it a slot (it builds on its damaged tip), so that fault's node validates
    nothing (weight 0): its bad answers, not its crash, are what the test is about."""
    injected: list[int] = []
    stake = None
    if fault is damage_bodies:
        drawn = StakeSchedule.draw(
            nodes=SMALL.nodes, kind=SMALL.stake, seed=SMALL.seed, durango_time=SMALL.start_time
        )
        stake = drawn.with_weights(
            [0 if node == HOSTILE else weight for node, weight in enumerate(drawn.weights)]
        )

    def inject_once(run: NetworkRun) -> None:
        if not injected:
            inject(engine, HOSTILE, fault)
            injected.append(HOSTILE)

    return simulate_network(SMALL, engine, observe=inject_once, stake=stake)


def assert_survived(report: NetworkReport) -> None:
    """Every node, the bad one too, ends at the network's tip; the bad answers are the bad
    node's, and each is counted once on each side."""
    totals = report.totals
    assert totals["crashed"] == totals["stalled"] == 0
    assert totals["nodes_at_tip"] == SMALL.nodes
    assert totals["blocks_built"] == SMALL.live_blocks
    nodes = report.nodes
    assert totals["bad_answers"] == sum(node.bad_answers for node in nodes) > 0
    assert nodes[HOSTILE].bad_answers_sent == totals["bad_answers"]
    assert all(node.bad_answers_sent == 0 for node in nodes if node.index != HOSTILE)
    assert reported(report)["simulated"]["totals"]["bad_answers"] == totals["bad_answers"]


def _raise_damaged(now: float, seed: int, position: int, txs: int) -> Built:
    raise StoreCorrupted("the block record at the head is damaged")


def failing_build(node: NodeServer) -> None:
    """From now on ``node``'s own ``build`` fails as over a damaged store."""
    node.build = _raise_damaged  # type: ignore[method-assign]


def test_a_node_answering_other_bodies_is_dropped_and_counted() -> None:
    engine = LocalEngine()
    refusals: list[Executed] = []

    def note_refusals(node: NodeServer) -> None:
        execute = node.execute

        def noted(now: float) -> Executed:
            executed = execute(now)
            if executed.refused is not None:
                refusals.append(executed)
            return executed

        node.execute = noted  # type: ignore[method-assign]

    def fault(node: NodeServer) -> None:
        answer_other_bodies(node)
        for other in engine._nodes:
            if other is not node:
                note_refusals(other)

    report = run_with(engine, fault)
    assert_survived(report)
    # Fetched blocks that failed verify were dropped, and blamed on the node that sent them.
    assert refusals and all(executed.refused_from == HOSTILE for executed in refusals)
    assert all("transactions root" in str(executed.refused) for executed in refusals)


def test_a_node_serving_from_a_damaged_store_is_dropped_and_counted() -> None:
    engine = LocalEngine()
    report = run_with(engine, damage_bodies)
    assert_survived(report)


def test_a_node_whose_own_call_fails_is_reported_crashed_and_the_run_goes_on() -> None:
    report = run_with(LocalEngine(), failing_build)
    crashed = report.nodes[HOSTILE]
    assert crashed.crashed
    assert crashed.crash_reason == (
        "its build failed: StoreCorrupted: the block record at the head is damaged"
    )
    assert report.totals["crashed"] == 1
    assert report.totals["blocks_built"] == SMALL.live_blocks
    assert report.totals["nodes_at_tip"] == SMALL.nodes - 1
