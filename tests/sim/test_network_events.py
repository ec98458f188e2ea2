"""The network run's event loop: events run in time order on the simulated clock, calls that
cannot influence each other go to the engine together, and an event that could break that
(scheduled in the past, reaching another node sooner than a link allows, a read that
schedules for its own node) is refused."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import pytest

from vmstack.errors import NodeCrashed
from vmstack.sim.network.events import NetworkEventLoop
from vmstack.sim.network.node import Call, NodeSpec
from vmstack.sim.network.records import NetworkSimulationConfig

CONFIG = NetworkSimulationConfig(nodes=3, blocks=3, txs_per_block=0, live_blocks=0)


class RecordingEngine:
    """Answers each call with its node and arguments and keeps every list it was handed;
    the nodes in ``crashed`` answer :class:`NodeCrashed`."""

    name = "recording"

    def __init__(self, crashed: Sequence[int] = ()) -> None:
        self.batches: list[list[Call]] = []
        self.crashed = set(crashed)

    def start(self, specs: Sequence[NodeSpec]) -> None:
        raise AssertionError("the event loop never starts the engine")

    def memory_by_place(self) -> dict[str, object]:
        """Nothing: the recording engine holds no nodes."""
        return {}

    def run(self, calls: Sequence[Call], *, timeout: float | None = None) -> list[Any]:
        self.batches.append(list(calls))
        return [
            NodeCrashed(call.node, "stopped")
            if call.node in self.crashed
            else (call.node, call.args)
            for call in calls
        ]

    def crash(self, node: int) -> None:
        self.crashed.add(node)

    def close(self) -> None:
        pass

    def describe(self) -> dict[str, object]:
        return {"name": self.name}

    def peak_memory(self) -> list[int]:
        return []


def _loop(engine: RecordingEngine, *, batch: bool = True) -> NetworkEventLoop:
    return NetworkEventLoop(CONFIG, engine, batch=batch)


def _tip_call(node: int, tag: str) -> Call:
    return Call(node, "tip", (tag,))


def test_events_run_in_time_order_on_the_simulated_clock() -> None:
    loop = _loop(RecordingEngine())
    seen: list[tuple[str, float]] = []
    start = loop.clock()

    def note(tag: str) -> Callable[[Any], None]:
        return lambda _: seen.append((tag, loop.clock() - start))

    for delay, tag in ((3.0, "c"), (1.0, "a"), (2.0, "b"), (1.0, "a2")):
        loop.schedule(delay, 0, note(tag))
    loop.run()
    assert seen == [("a", 1.0), ("a2", 1.0), ("b", 2.0), ("c", 3.0)]
    assert loop.events_run == 4


def test_calls_on_different_nodes_within_the_lookahead_go_to_the_engine_together() -> None:
    engine = RecordingEngine()
    loop = _loop(engine)
    answers: dict[int, Any] = {}

    def keep(node: int) -> Callable[[Any], None]:
        return lambda answer: answers.__setitem__(node, answer)

    for node in range(3):
        loop.schedule(
            node * loop.lookahead / 4, node, keep(node), call=partial(_tip_call, node, f"n{node}")
        )
    # Two calls on one node are never in one batch.
    loop.schedule(loop.lookahead / 2, 0, lambda _: None, call=lambda: _tip_call(0, "again"))
    loop.run()
    assert answers == {node: (node, (f"n{node}",)) for node in range(3)}
    assert [[call.args for call in batch] for batch in engine.batches] == [
        [("n0",), ("n1",), ("n2",)],
        [("again",)],
    ]
    assert (loop.batches, loop.calls, loop.widest_batch) == (2, 4, 3)


def test_reads_of_one_node_share_a_batch_and_one_event_at_a_time_is_the_reference() -> None:
    def reads(loop: NetworkEventLoop) -> None:
        for tag in ("r1", "r2"):
            loop.schedule(0.0, 1, lambda _: None, call=partial(_tip_call, 1, tag), read=True)

    batched, serial = RecordingEngine(), RecordingEngine()
    for engine, batch in ((batched, True), (serial, False)):
        loop = _loop(engine, batch=batch)
        reads(loop)
        loop.run()
    assert [len(calls) for calls in batched.batches] == [2]
    assert [len(calls) for calls in serial.batches] == [1, 1]


def test_an_event_scheduled_meanwhile_for_an_earlier_time_runs_first() -> None:
    engine = RecordingEngine()
    loop = _loop(engine)
    order: list[str] = []
    gap = loop.lookahead / 2

    def first(_: Any) -> None:
        order.append("first")
        loop.schedule(gap / 2, 0, lambda _: order.append("scheduled meanwhile"))

    loop.schedule(0.0, 0, first, call=lambda: _tip_call(0, "first"))
    loop.schedule(gap, 1, lambda _: order.append("second"), call=lambda: _tip_call(1, "2"))
    loop.run()
    assert order == ["first", "scheduled meanwhile", "second"]
    assert len(engine.batches) == 1


def test_a_crashed_node_loses_its_events_but_the_networks_own_still_run() -> None:
    loop = _loop(RecordingEngine(crashed=[2]))
    ran: list[tuple[str, Any]] = []
    loop.schedule(
        1.0, 2, lambda answer: ran.append(("call", answer)), call=lambda: _tip_call(2, "x")
    )
    loop.schedule(2.0, 2, lambda answer: ran.append(("dropped", answer)))
    loop.schedule(3.0, 2, lambda answer: ran.append(("always", answer)), always=True)
    loop.run()
    assert ran == [("always", None)]
    result = loop.states[2].result
    assert result.crashed and result.crash_reason == "stopped"
    assert result.crashed_at == pytest.approx(1.0)


def test_an_event_in_the_past_is_refused() -> None:
    with pytest.raises(ValueError, match="in the past"):
        _loop(RecordingEngine()).schedule(-0.5, 0, lambda _: None)


def test_no_node_reaches_another_sooner_than_the_fastest_link() -> None:
    loop = _loop(RecordingEngine())
    loop.schedule(0.0, 0, lambda _: loop.schedule(loop.lookahead / 2, 1, lambda _: None))
    with pytest.raises(ValueError, match="cannot reach node 1 sooner than"):
        loop.run()


def test_a_read_cannot_schedule_for_its_own_node() -> None:
    loop = _loop(RecordingEngine())
    loop.schedule(0.0, 0, lambda _: loop.schedule(1.0, 0, lambda _: None), read=True)
    with pytest.raises(ValueError, match="read event cannot schedule events for its own"):
        loop.run()
