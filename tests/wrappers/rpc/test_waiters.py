"""WaitForEvent calls never make the server deaf: however many wait, Health and Shutdown are
answered at once (the waiters hold threads of their own, not the workers), Shutdown ends
every wait, one waiter past the bound is refused at once, and each refusal is heard."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import empty_pb2

from tests.wrappers.rpc.test_submit import CHAIN_ID
from vmstack import SimClock, build_stack
from vmstack.store import MemoryStore
from vmstack.wrappers.rpc import VMClient, VMServer, vm_pb2
from vmstack.wrappers.rpc.waiting import MAX_WAITERS


@pytest.fixture
def server() -> Iterator[tuple[VMServer, list[tuple[str, BaseException]]]]:
    clock = SimClock(1_000.0)
    vm = build_stack(MemoryStore(), chain_id=CHAIN_ID, clock=clock, served_part=True)
    refusals: list[tuple[str, BaseException]] = []
    with VMServer(
        vm,
        clock=clock,
        workers=4,
        on_refusal=lambda method, error: refusals.append((method, error)),
    ) as served:
        yield served, refusals


def _waiters(channel: grpc.Channel, count: int, timeout: float = 60) -> list[grpc.CallFuture]:
    wait = channel.unary_unary(
        "/vm.VM/WaitForEvent",
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=vm_pb2.WaitForEventResponse.FromString,
    )
    futures = [wait.future(empty_pb2.Empty(), timeout=timeout) for _ in range(count)]
    time.sleep(0.5)  # every one of them is waiting on the server now
    return futures


def test_health_and_shutdown_are_answered_while_eight_wait(
    server: tuple[VMServer, list[tuple[str, BaseException]]],
) -> None:
    served, _ = server
    with (
        grpc.insecure_channel(served.address) as channel,
        VMClient(served.address, timeout=5.0) as client,
    ):
        waiting = _waiters(channel, 8)
        assert not any(future.done() for future in waiting)
        assert "serving" in client.health()
        assert client.get_block_id_at_height(0) == client.last_accepted()
        client.shutdown()
        assert served.shut_down.is_set()
        # Shutdown ends every wait, with nothing to build.
        for future in waiting:
            assert future.result(timeout=5).message == vm_pb2.MESSAGE_UNSPECIFIED


def test_a_waiter_past_the_bound_is_refused_at_once(
    server: tuple[VMServer, list[tuple[str, BaseException]]],
) -> None:
    served, refusals = server
    with (
        grpc.insecure_channel(served.address) as channel,
        VMClient(served.address, timeout=5.0) as client,
    ):
        waiting = _waiters(channel, MAX_WAITERS)
        (one_more,) = _waiters(channel, 1)
        with pytest.raises(grpc.RpcError) as refused:
            one_more.result(timeout=5)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert [method for method, _ in refusals] == ["WaitForEvent"]
        assert "serving" in client.health()
        client.shutdown()
        for future in waiting:
            future.result(timeout=5)


def test_every_refused_call_is_heard(
    server: tuple[VMServer, list[tuple[str, BaseException]]],
) -> None:
    served, refusals = server
    with VMClient(served.address, timeout=5.0) as client, pytest.raises(ValueError):
        client.parse_block(b"\xc0junk")
    ((method, error),) = refusals
    assert method == "ParseBlock"
    assert isinstance(error, ValueError)
