"""VMServer and VMClient in one process: answers, round trips, errors and bad input."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vmstack
from tests.wrappers.rpc.conftest import ServedChain, build_served_chain
from vmstack.batching import serial_get_ancestors, serial_parse_block
from vmstack.clock import SimClock
from vmstack.conformance import memory_vm
from vmstack.conformance.doubles import MemoryBlock, MemoryVM
from vmstack.errors import (
    BatchingNotImplemented,
    BlockNotFound,
    InvalidBlock,
    MalformedRequest,
    StoreCorrupted,
    VMStackError,
    VMUnavailable,
)
from vmstack.interfaces import ChainVM
from vmstack.store import MemoryStore
from vmstack.wrappers.rpc import MAX_REQUEST_SIZE, VMClient, VMServer, vm_pb2
from vmstack.wrappers.rpc.protocol import DIGEST_METADATA_KEY, METHODS, trailing_error

Served = tuple[ChainVM, VMClient]

budgets = st.tuples(st.integers(1, 40), st.integers(0, 40_000), st.sampled_from([0.0, 0.05, 60.0]))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(budget=budgets, start=st.integers(0, 29))
def test_answers_over_the_boundary_equal_in_process(
    served: Served, served_chain: ServedChain, budget: tuple[int, int, float], start: int
) -> None:
    """For any budget, get_ancestors over gRPC equals the in-process answer byte for byte,
    on the batched path and on the fallback path."""
    vm, client = served
    count, size, seconds = budget
    block_id = served_chain.ids[start]
    kwargs = {
        "max_blocks_num": count,
        "max_blocks_size": size,
        "max_retrieval_time": seconds,
        "clock": served_chain.clock,
    }
    expected = vmstack.get_ancestors(vm, block_id, **kwargs)  # type: ignore[arg-type]
    assert vmstack.get_ancestors(client, block_id, **kwargs) == expected  # type: ignore[arg-type]
    assert serial_get_ancestors(client, block_id, **kwargs) == expected  # type: ignore[arg-type]
    assert all(type(block) is bytes for block in expected)


def test_batched_calls_are_one_round_trip_each(served: Served, served_chain: ServedChain) -> None:
    """get_ancestors and batched_parse_block cost one round trip whatever their size."""
    vm, client = served
    answer = vmstack.get_ancestors(client, served_chain.tip, max_retrieval_time=60.0)
    assert len(answer) == len(served_chain.ids) + 1
    parsed = vmstack.batched_parse_block(client, answer[:20])
    assert client.round_trips.calls == {"GetAncestors": 1, "BatchedParseBlock": 1}
    in_process = serial_parse_block(vm, answer[:20])
    assert [block.id for block in parsed] == [block.id for block in in_process]
    assert [(b.parent_id, b.height, b.timestamp, bytes(b)) for b in parsed] == [
        (b.parent_id, b.height, b.timestamp, bytes(b)) for b in in_process
    ]


def test_a_served_vm_that_cannot_batch_still_costs_one_round_trip() -> None:
    """The server runs the engine helpers, so the fallback happens on its side."""
    clock = SimClock(0.0)
    vm = memory_vm(batching=False, blocks=50, clock=clock)
    tip = vm.last_accepted()
    with VMServer(vm) as server, VMClient(server.address) as client:
        assert vmstack.supports_batching(client)
        answer = vmstack.get_ancestors(client, tip, max_blocks_num=30)
        parsed = vmstack.batched_parse_block(client, answer)
        assert client.round_trips.calls == {"GetAncestors": 1, "BatchedParseBlock": 1}
    assert answer == serial_get_ancestors(vm, tip, max_blocks_num=30)
    assert [block.id for block in parsed] == [vm.parse_block(data).id for data in answer]


def test_the_servers_fallback_walk_runs_on_the_stacks_clock() -> None:
    """A served stack on simulated time, behind a server given no clock of its own, walks
    the fallback ancestors on that simulated time: a slow ``get_block`` (wall time) never
    cuts the answer short of what the same walk gives in process."""
    clock = SimClock(0.0)
    vm = memory_vm(batching=False, blocks=30, clock=clock)
    tip = vm.last_accepted()
    expected = serial_get_ancestors(vm, tip, max_blocks_num=30, max_retrieval_time=0.05)
    assert len(expected) == 30
    get_block = vm.get_block

    def slow_get_block(block_id: bytes) -> Any:
        time.sleep(0.01)
        return get_block(block_id)

    vm.get_block = slow_get_block  # type: ignore[method-assign]
    with VMServer(vm) as server, VMClient(server.address) as client:
        answer = client.get_ancestors(tip, 30, 1 << 20, 0.05)
    assert answer == expected


def test_invalid_block_in_a_batch_crosses_with_its_index(
    served: Served, served_chain: ServedChain
) -> None:
    """One bad element fails the whole batch with InvalidBlock naming its index."""
    vm, client = served
    good = bytes(vm.get_block(served_chain.tip))
    with pytest.raises(InvalidBlock) as over_grpc:
        client.batched_parse_block([good, good, b"\xc0junk"])
    with pytest.raises(InvalidBlock) as in_process:
        vmstack.batched_parse_block(vm, [good, good, b"\xc0junk"])
    assert over_grpc.value.index == in_process.value.index == 2
    assert str(over_grpc.value) == str(in_process.value)


@pytest.mark.parametrize(
    "error",
    [
        BlockNotFound("gone"),
        StoreCorrupted("header checksum"),
        BatchingNotImplemented("not here"),
        ValueError("bad argument"),
        VMStackError("refused"),
    ],
)
def test_errors_of_the_served_vm_cross_as_themselves(error: Exception) -> None:
    """Whatever the served VM raises arrives with its type and message."""
    vm = memory_vm(batching=True, blocks=3)
    with VMServer(vm) as server, VMClient(server.address) as client:
        vm.fail_next("get_block", error)
        with pytest.raises(type(error)) as raised:
            client.get_block(vm.last_accepted())
        assert type(raised.value) is type(error)
        assert str(raised.value) == str(error)
        assert client.get_block(vm.last_accepted()).id == vm.last_accepted()


@pytest.mark.parametrize(
    "call",
    [
        lambda vm: vm.parse_block(None),
        lambda vm: vm.parse_block("text"),
        lambda vm: vm.get_block(None),
        lambda vm: vm.get_block(b"short"),
        lambda vm: vm.get_block(bytes(32)),
        lambda vm: vm.get_block_id_at_height(-1),
        lambda vm: vm.get_block_id_at_height("1"),
        lambda vm: vm.get_block_id_at_height(2**70),
        lambda vm: vm.set_preference(b"x"),
        lambda vm: vm.get_ancestors(bytes(32), 0, 10, 1.0),
        lambda vm: vm.get_ancestors(bytes(32), 1, -1, 1.0),
        lambda vm: vm.batched_parse_block([b"ok", None]),
    ],
    ids=[
        "parse None",
        "parse str",
        "get None",
        "get short",
        "get unknown",
        "height -1",
        "height str",
        "height 2**70",
        "prefer short",
        "ancestors count 0",
        "ancestors size -1",
        "batch with None",
    ],
)
def test_odd_arguments_get_the_errors_of_the_served_vm(served: Served, call: object) -> None:
    """The client answers odd arguments exactly as the stack it serves does."""
    vm, client = served
    assert callable(call)
    with pytest.raises(Exception) as in_process:
        call(vm)
    with pytest.raises(Exception) as over_grpc:
        call(client)
    assert type(over_grpc.value) is type(in_process.value)
    assert str(over_grpc.value) == str(in_process.value)


def test_decisions_reach_the_served_blocks() -> None:
    """verify/accept/reject of a RemoteBlock reach the served block: accepted blocks become
    last_accepted, rejected ones are no longer served."""
    source = build_served_chain(MemoryStore(), blocks=8)
    blocks = [bytes(source.full_stack().get_block(block_id)) for block_id in source.ids]
    target = build_served_chain(MemoryStore(), blocks=0)
    target.clock.advance(source.clock() - target.clock())
    vm = target.full_stack()
    with (
        VMServer(vm, clock=target.clock) as server,
        VMClient(server.address, clock=target.clock) as client,
    ):
        for data in blocks[:6]:
            block = client.parse_block(data)
            block.verify()
            block.accept()
            assert client.last_accepted() == vm.last_accepted() == block.id
        rejected = client.parse_block(blocks[6])
        rejected.verify()
        assert vm.get_block(rejected.id).id == rejected.id
        rejected.reject()
        with pytest.raises(BlockNotFound):
            client.get_block(rejected.id)
        assert client.get_block_id_at_height(6) == source.ids[5]


def test_describe_stack_reads_through_the_boundary(served_chain: ServedChain) -> None:
    """The out-of-process arrangement puts the client under the C layers, and
    describe_stack lists the served layers below it."""
    from prometheus_client import CollectorRegistry

    from vmstack.stack import wrap_layers

    registry = CollectorRegistry()
    served = wrap_layers(served_chain.c_part(), name="served", registry=registry)
    with (
        VMServer(served, clock=served_chain.clock, registry=registry) as server,
        VMClient(server.address, clock=served_chain.clock) as client,
    ):
        stack = served_chain.full_stack(out_of_process=client)
        kinds = [(layer.kind, layer.name) for layer in vmstack.describe_stack(stack)]
        assert kinds == [
            ("TracedVM", "proposervm"),
            ("MeteredVM", "proposervm"),
            ("ProposerVM", None),
            ("TracedVM", "C"),
            ("MeteredVM", "C"),
            ("VMClient", server.address),
            ("MeteredVM", "served"),
            ("TransitionVM", None),
            ("CChainVM", None),
        ]
        vmstack.get_ancestors(stack, served_chain.ids[10])
        assert "served_get_ancestors_duration_seconds" in client.served_metrics()


def test_full_stack_over_the_boundary_answers_as_in_process(served_chain: ServedChain) -> None:
    """The proposer layer over the client serves the same bytes as the stack in process,
    across the fork and the transition, batched and serial."""
    in_process = served_chain.full_stack()
    with (
        VMServer(served_chain.c_part(), clock=served_chain.clock) as server,
        VMClient(server.address, clock=served_chain.clock) as client,
    ):
        split = served_chain.full_stack(out_of_process=client)
        tip = in_process.last_accepted()
        assert split.last_accepted() == tip
        expected = vmstack.get_ancestors(in_process, tip, max_retrieval_time=60.0)
        assert len(expected) == len(served_chain.ids) + 1
        assert vmstack.get_ancestors(split, tip, max_retrieval_time=60.0) == expected
        assert serial_get_ancestors(split, tip, max_retrieval_time=60.0) == expected


def test_build_stack_refuses_options_of_the_served_part(served_chain: ServedChain) -> None:
    """Options that shape the served C-chain part are refused with out_of_process."""
    with (
        VMServer(served_chain.c_part()) as server,
        VMClient(server.address) as client,
        pytest.raises(ValueError, match="transition_time"),
    ):
        vmstack.build_stack(MemoryStore(), transition_time=5.0, out_of_process=client)


def test_the_served_clock_follows_the_callers_time() -> None:
    """A server on simulated time moves its clock to the time each request carries."""
    caller, served_clock = SimClock(500.0), SimClock(100.0)
    vm = memory_vm(blocks=2, clock=served_clock)
    with (
        VMServer(vm, clock=served_clock) as server,
        VMClient(server.address, clock=caller) as client,
    ):
        client.last_accepted()
        assert served_clock() == 500.0
        caller.advance(12.5)
        client.get_block_id_at_height(0)
        assert served_clock() == 512.5


@pytest.mark.parametrize("now", [1e300, float(2**64), float("inf"), float("nan"), -1.0])
def test_an_absurd_caller_time_is_refused_and_leaves_the_clock(now: float) -> None:
    """A caller's time that is no time (beyond 2^53 s, infinite, NaN, negative) is a
    malformed request, refused as ValueError; the served clock stays where it was and the
    served VM still builds."""
    served_clock = SimClock(100.0)
    vm = memory_vm(blocks=2, clock=served_clock)
    with (
        VMServer(vm, clock=served_clock) as server,
        VMClient(server.address, clock=lambda: now) as absurd,
        VMClient(server.address, clock=SimClock(150.0)) as caller,
    ):
        for call in (
            absurd.last_accepted,
            absurd.build_block,
            lambda: absurd.get_block(vm.last_accepted()),
        ):
            with pytest.raises(ValueError, match="caller's time"):
                call()
        assert served_clock() == 100.0
        assert caller.build_block().parent_id == vm.last_accepted()
        assert served_clock() == 150.0


class _SlowVM(MemoryVM):
    """A memory VM whose get_block waits until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def get_block(self, block_id: bytes) -> MemoryBlock:
        self.release.wait(10)
        return super().get_block(block_id)


@pytest.fixture
def slow_server() -> Iterator[tuple[_SlowVM, VMServer]]:
    vm = _SlowVM()
    with VMServer(vm) as server:
        yield vm, server
        vm.release.set()


def test_a_passed_deadline_is_vm_unavailable(slow_server: tuple[_SlowVM, VMServer]) -> None:
    """A call the server does not answer in time fails with VMUnavailable, and the server
    serves the next call once it is free (the client that gave up did not break it)."""
    vm, server = slow_server
    with VMClient(server.address, timeout=0.3) as client:
        started = time.monotonic()
        with pytest.raises(VMUnavailable, match="did not answer within"):
            client.get_block(vm.last_accepted())
        assert time.monotonic() - started < 5
        vm.release.set()
        assert client.last_accepted() == vm.last_accepted()
        assert client.get_block(vm.last_accepted()).height == 0


def test_a_server_that_is_gone_is_vm_unavailable() -> None:
    """Calls to a closed server, and calls of a closed client, raise VMUnavailable."""
    vm = memory_vm(blocks=1)
    server = VMServer(vm)
    client = VMClient(server.address, timeout=2.0)
    assert client.last_accepted() == vm.last_accepted()
    server.close()
    with pytest.raises(VMUnavailable):
        client.get_block_id_at_height(0)
    assert client.last_accepted() == vm.last_accepted()  # tracked: no round trip
    client.close()
    with pytest.raises(VMUnavailable, match="closed"):
        client.get_block_id_at_height(0)


def test_oversized_batches_are_refused_before_sending(served: Served) -> None:
    """A batch over the message limit is a ValueError and makes no round trip."""
    _, client = served
    with pytest.raises(ValueError, match="message limit"):
        client.batched_parse_block([bytes(600_000)] * 4)
    assert client.round_trips.total == 0


def _raw_call(
    address: str, method: str, payload: bytes, metadata: tuple[tuple[str, str | bytes], ...] = ()
) -> bytes:
    """Send ``payload`` as the request of ``method``, bypassing the client's checks."""
    with grpc.insecure_channel(
        address, options=[("grpc.max_send_message_length", 64 << 20)]
    ) as channel:
        call = channel.unary_unary(METHODS[method].path)  # type: ignore[call-arg]  # optional in grpc
        answer: bytes = call(payload, timeout=10, metadata=metadata)
        return answer


def test_the_server_refuses_oversized_and_malformed_requests(served: Served) -> None:
    """Requests a client would never send are refused with a clear status (a typed
    MalformedRequest beside it) and change nothing; fields of a later protocol are skipped,
    as protobuf's rules say; the server goes on serving."""
    vm, client = served
    before = client.last_accepted()
    address = client.address
    with pytest.raises(grpc.RpcError) as oversized:
        _raw_call(address, "BatchedParseBlock", bytes(MAX_REQUEST_SIZE + 100))
    assert oversized.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(grpc.RpcError) as malformed:
        _raw_call(address, "SetPreference", b"\x0a\xff\xff\xff\xff\xff")
    assert malformed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert isinstance(
        trailing_error(malformed.value.trailing_metadata()),  # type: ignore[arg-type]
        MalformedRequest,
    )
    with pytest.raises(grpc.RpcError) as bad_digest:
        _raw_call(
            address,
            "BlockAccept",
            vm_pb2.BlockAcceptRequest(id=before).SerializeToString(),
            metadata=((DIGEST_METADATA_KEY, b"short"),),
        )
    assert "32-byte" in str(bad_digest.value.details())
    later = vm_pb2.GetBlockIDAtHeightRequest(height=0).SerializeToString() + b"\x50\x01"
    answer = vm_pb2.GetBlockIDAtHeightResponse.FromString(
        _raw_call(address, "GetBlockIDAtHeight", later)
    )
    assert answer.blk_id == vm.get_block_id_at_height(0)
    assert client.last_accepted() == vm.last_accepted() == before


def test_concurrent_callers_are_served_one_call_at_a_time(
    served: Served, served_chain: ServedChain
) -> None:
    """Several threads calling at once all get the in-process answers."""
    vm, client = served
    expected = {block_id: bytes(vm.get_block(block_id)) for block_id in served_chain.ids}
    failures: list[BaseException] = []

    def read() -> None:
        try:
            for block_id, data in expected.items():
                assert bytes(client.get_block(block_id)) == data
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures
