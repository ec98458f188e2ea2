"""The parts of vm.VM beyond the block calls, as avalanchego's vm_server.go answers them:
Initialize and SetState, Version, health (also grpc.health.v1), Gather, WaitForEvent, state
sync, and decisions from a client that names a block by its ID alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import empty_pb2
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tests.wrappers.rpc.test_submit import CHAIN_ID, transfer
from vmstack import SimClock, build_stack
from vmstack.conformance import memory_vm
from vmstack.store import MemoryStore
from vmstack.wrappers.rpc import VMClient, VMServer, metrics_pb2, vm_pb2
from vmstack.wrappers.rpc.gather import metric_families


@pytest.fixture
def served() -> Iterator[tuple[VMServer, VMClient, SimClock]]:
    clock = SimClock(1_000.0)
    vm = build_stack(MemoryStore(), chain_id=CHAIN_ID, clock=clock, served_part=True)
    registry = CollectorRegistry()
    Counter("served_calls", "calls served", registry=registry).inc(3)
    with (
        VMServer(vm, clock=clock, registry=registry) as server,
        VMClient(server.address, clock=clock) as client,
    ):
        yield server, client, clock


def _call(client: VMClient, method: str, request: Message, response: type[Message]) -> object:
    stub = grpc.insecure_channel(client.address).unary_unary(
        f"/vm.VM/{method}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=response.FromString,
    )
    return stub(request, timeout=10)


def test_initialize_and_set_state_answer_the_last_accepted_block(
    served: tuple[VMServer, VMClient, SimClock],
) -> None:
    server, client, _ = served
    genesis = client.initialize()
    assert genesis.height == 0
    assert bytes(genesis) == bytes(server.vm.get_block(server.vm.last_accepted()))
    block = client.build_block()
    block.verify()
    block.accept()
    assert client.set_state(vm_pb2.STATE_NORMAL_OP).id == block.id == client.last_accepted()
    assert client.round_trips.calls.get("GetBlock") is None


def test_version_health_and_grpc_health(served: tuple[VMServer, VMClient, SimClock]) -> None:
    _, client, _ = served
    assert client.version().startswith("vmstack/")
    assert "pid" in client.health()
    with grpc.insecure_channel(client.address) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        answer = check(health_pb2.HealthCheckRequest(service="vm.VM"), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_gather_answers_the_registry_as_metric_families(
    served: tuple[VMServer, VMClient, SimClock],
) -> None:
    _, client, _ = served
    families = {family.name: family for family in client.gather()}
    assert families["served_calls_total"].type == metrics_pb2.COUNTER
    assert families["served_calls_total"].metric[0].counter.value == 3


def test_metric_families_of_each_kind() -> None:
    """Counters with their _total name, gauges, histograms with cumulative buckets (the +Inf
    one implicit), label sets apart."""
    registry = CollectorRegistry()
    Gauge("height", "tip height", ["chain"], registry=registry).labels("C").set(7)
    histogram = Histogram("fetch_seconds", "fetch time", buckets=(0.1, 1.0), registry=registry)
    for seconds in (0.05, 0.5, 5.0):
        histogram.observe(seconds)
    families = {family.name: family for family in metric_families(registry)}
    height = families["height"]
    assert height.type == metrics_pb2.GAUGE
    assert [(label.name, label.value) for label in height.metric[0].label] == [("chain", "C")]
    assert height.metric[0].gauge.value == 7
    fetched = families["fetch_seconds"].metric[0].histogram
    assert families["fetch_seconds"].type == metrics_pb2.HISTOGRAM
    assert [(b.upper_bound, b.cumulative_count) for b in fetched.bucket] == [(0.1, 1), (1.0, 2)]
    assert (fetched.sample_count, fetched.sample_sum) == (3, 5.55)


def test_wait_for_event_answers_once_a_transaction_is_pending(
    served: tuple[VMServer, VMClient, SimClock],
) -> None:
    """It waits while the mempool is empty (other calls go on), and answers BUILD_BLOCK once
    a transaction is submitted."""
    _, client, _ = served
    answers: list[object] = []
    waiting = threading.Thread(
        target=lambda: answers.append(client.call("WaitForEvent", empty_pb2.Empty()))
    )
    waiting.start()
    time.sleep(0.3)
    assert not answers
    assert client.get_block_id_at_height(0) == client.last_accepted()
    client.submit_transactions([transfer(0)])
    waiting.join(10)
    assert not waiting.is_alive()
    (answer,) = answers
    assert isinstance(answer, vm_pb2.WaitForEventResponse)
    assert answer.message == vm_pb2.MESSAGE_BUILD_BLOCK


def test_a_cancelled_wait_for_event_ends(served: tuple[VMServer, VMClient, SimClock]) -> None:
    _, client, _ = served
    with grpc.insecure_channel(client.address) as channel:
        wait = channel.unary_unary(
            "/vm.VM/WaitForEvent",
            request_serializer=empty_pb2.Empty.SerializeToString,
            response_deserializer=vm_pb2.WaitForEventResponse.FromString,
        )
        with pytest.raises(grpc.RpcError) as error:
            wait(empty_pb2.Empty(), timeout=0.3)
        assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert client.get_block_id_at_height(0) == client.last_accepted()


def test_state_sync_is_not_implemented(served: tuple[VMServer, VMClient, SimClock]) -> None:
    _, client, _ = served
    enabled = _call(client, "StateSyncEnabled", empty_pb2.Empty(), vm_pb2.StateSyncEnabledResponse)
    assert isinstance(enabled, vm_pb2.StateSyncEnabledResponse)
    assert not enabled.enabled
    summary = _call(
        client,
        "GetStateSummary",
        vm_pb2.GetStateSummaryRequest(height=1),
        vm_pb2.GetStateSummaryResponse,
    )
    assert isinstance(summary, vm_pb2.GetStateSummaryResponse)
    assert summary.err == vm_pb2.ERROR_STATE_SYNC_NOT_IMPLEMENTED
    handlers = _call(client, "CreateHandlers", empty_pb2.Empty(), vm_pb2.CreateHandlersResponse)
    assert isinstance(handlers, vm_pb2.CreateHandlersResponse)
    assert not handlers.handlers


def test_a_decision_by_id_alone_reaches_the_block_handed_out_under_it() -> None:
    """avalanchego's client names a decided block by its ID only: the server decides the
    block it handed out last under that ID."""
    vm = memory_vm(blocks=2)
    with VMServer(vm) as server, grpc.insecure_channel(server.address) as channel:
        build = channel.unary_unary(
            "/vm.VM/BuildBlock",
            request_serializer=vm_pb2.BuildBlockRequest.SerializeToString,
            response_deserializer=vm_pb2.BuildBlockResponse.FromString,
        )
        verify = channel.unary_unary(
            "/vm.VM/BlockVerify",
            request_serializer=vm_pb2.BlockVerifyRequest.SerializeToString,
            response_deserializer=vm_pb2.BlockVerifyResponse.FromString,
        )
        accept = channel.unary_unary(
            "/vm.VM/BlockAccept",
            request_serializer=vm_pb2.BlockAcceptRequest.SerializeToString,
            response_deserializer=empty_pb2.Empty.FromString,
        )
        built = build(vm_pb2.BuildBlockRequest(), timeout=10)
        verify(vm_pb2.BlockVerifyRequest(bytes=built.bytes), timeout=10)
        accept(vm_pb2.BlockAcceptRequest(id=built.id), timeout=10)
        assert vm.last_accepted() == built.id
        assert server.handed_out[0] == 0


def test_an_unbounded_time_budget_crosses_as_the_longest_the_field_holds(
    served: tuple[VMServer, VMClient, SimClock],
) -> None:
    _, client, _ = served
    tip = client.last_accepted()
    assert len(client.get_ancestors(tip, 5, 1 << 20, float("inf"))) == 1


def test_version_reads_the_package_metadata_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Version answers from the version read once, not a metadata lookup per call."""
    import importlib.metadata

    from vmstack.wrappers.rpc import server as server_module

    server_module._served_version.cache_clear()
    looked_up: list[str] = []
    real = importlib.metadata.version

    def counting(name: str) -> str:
        looked_up.append(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", counting)
    with VMServer(memory_vm(blocks=1)) as server:
        answers = {
            vm_pb2.VersionResponse.FromString(server.answer("Version", b"")).version
            for _ in range(3)
        }
    assert len(answers) == 1 and next(iter(answers)).startswith("vmstack/")
    assert looked_up == ["vmstack"]
