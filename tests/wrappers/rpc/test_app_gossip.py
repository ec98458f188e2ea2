"""``vmstack plugin``'s transaction gossip, driven as an avalanchego node drives it with
plain messages: the node's vm.VM calls (AppGossip, AppRequest, AppResponse, Connected) on
a gRPC channel, and the node's ``appsender.AppSender`` service a real gRPC servicer here,
at the ``server_addr`` of Initialize, recording what the plugin sends."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import grpc
import pytest
from google.protobuf import empty_pb2
from google.protobuf.message import Message

from tests.support.transactions import signed_transfer
from tests.wrappers.rpc.node_side import CHAIN_ID, GENESIS
from tests.wrappers.rpc.test_plugin import Node, start_node
from vmstack.cchain import DEV_KEYS, DynamicFeeTx
from vmstack.gossip import (
    BloomFilter,
    bloom_hash,
    marshal_pull_request,
    marshal_pull_response,
    marshal_push_gossip,
    parse_pull_request,
    parse_pull_response,
    parse_push_gossip,
    prefix_handler,
    split_handler,
)
from vmstack.wrappers.rpc import appsender_pb2, vm_pb2, vmstack_pb2
from vmstack.wrappers.rpc.app_gossip import APP_ERROR_UNEXPECTED

pytestmark = pytest.mark.processes

#: Seconds any wait of these tests may take.
DEADLINE = 30.0
PEER = bytes(range(20))


def transfer(nonce: int, key: int | bytes, value: int = 1) -> DynamicFeeTx:
    """A signed transfer of the plugin's chain from ``key`` at ``nonce``."""
    return signed_transfer(nonce, key=key, value=value, chain_id=CHAIN_ID)


class AppSender:
    """The node's appsender service: every message the plugin sends, by method, in order."""

    METHODS: ClassVar[dict[str, Any]] = {
        "SendAppRequest": appsender_pb2.SendAppRequestMsg,
        "SendAppResponse": appsender_pb2.SendAppResponseMsg,
        "SendAppError": appsender_pb2.SendAppErrorMsg,
        "SendAppGossip": appsender_pb2.SendAppGossipMsg,
    }

    def __init__(self) -> None:
        self.received: dict[str, queue.Queue[Any]] = {name: queue.Queue() for name in self.METHODS}
        self.server = grpc.server(ThreadPoolExecutor(max_workers=2))
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(
                self._recorder(name),
                request_deserializer=message.FromString,
                response_serializer=empty_pb2.Empty.SerializeToString,
            )
            for name, message in self.METHODS.items()
        }
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("appsender.AppSender", handlers),)
        )
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def _recorder(self, name: str) -> Any:
        def record(message: Message, context: grpc.ServicerContext) -> empty_pb2.Empty:
            self.received[name].put(message)
            return empty_pb2.Empty()

        return record

    def next(self, name: str) -> Any:
        """The next message of ``name``; fails after :data:`DEADLINE` seconds."""
        try:
            return self.received[name].get(timeout=DEADLINE)
        except queue.Empty:
            pytest.fail(f"the plugin sent no {name} within {DEADLINE:g} s")


class StandardError:
    """The plugin's standard error, read line by line on a thread."""

    def __init__(self, node: Node) -> None:
        self.lines: list[str] = []
        assert node.process.stderr is not None
        self._stream = node.process.stderr
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._stream:
            self.lines.append(line.decode(errors="replace"))

    def wait_for(self, text: str) -> str:
        """The first line holding ``text``; fails after :data:`DEADLINE` seconds."""
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            time.sleep(0.05)
        pytest.fail(f"the plugin logged no {text!r} within {DEADLINE:g} s: {self.lines}")


@pytest.fixture
def appsender() -> Iterator[AppSender]:
    sender = AppSender()
    yield sender
    sender.server.stop(None).wait(10)


@pytest.fixture
def node(tmp_path: Path, appsender: AppSender) -> Iterator[tuple[Node, StandardError]]:
    with start_node(tmp_path) as started:
        log = StandardError(started)
        started.call(
            "Initialize",
            vm_pb2.InitializeRequest(
                network_id=12345,
                chain_data_dir=str(tmp_path / "chain"),
                genesis_bytes=GENESIS,
                config_bytes=b"{}",
                server_addr=appsender.address,
            ),
            vm_pb2.InitializeResponse,
        )
        started.call(
            "SetState",
            vm_pb2.SetStateRequest(state=vm_pb2.STATE_NORMAL_OP),
            vm_pb2.SetStateResponse,
        )
        yield started, log
        started.call("Shutdown", empty_pb2.Empty(), empty_pb2.Empty)
        assert started.process.wait(DEADLINE) == 0


def build_and_accept(node: Node) -> bytes:
    """The bytes of the next block, built, verified and accepted."""
    built = node.call("BuildBlock", vm_pb2.BuildBlockRequest(), vm_pb2.BuildBlockResponse)
    assert isinstance(built, vm_pb2.BuildBlockResponse)
    node.call(
        "BlockVerify", vm_pb2.BlockVerifyRequest(bytes=built.bytes), vm_pb2.BlockVerifyResponse
    )
    node.call("SetPreference", vm_pb2.SetPreferenceRequest(id=built.id), empty_pb2.Empty)
    node.call("BlockAccept", vm_pb2.BlockAcceptRequest(id=built.id), empty_pb2.Empty)
    return bytes(built.bytes)


def push(node: Node, payload: bytes) -> None:
    """An AppGossip from :data:`PEER`; the plugin answers it without an error."""
    node.call("AppGossip", vm_pb2.AppGossipMsg(node_id=PEER, msg=payload), empty_pb2.Empty)


@pytest.mark.slow
def test_pushed_and_pulled_transactions_enter_the_mempool_and_bad_bytes_lose_nothing(
    node: tuple[Node, StandardError], appsender: AppSender
) -> None:
    plugin, log = node
    pushed = transfer(0, DEV_KEYS[1])

    # Malformed gossip is refused on standard error, answered without an error (a node
    # would stop the chain on one), and loses nothing that came before or after.
    push(plugin, b"")  # no handler prefix
    log.wait_for("AppGossip refused: MalformedRequest: gossip payload: no readable uvarint")
    push(plugin, prefix_handler(7, marshal_push_gossip([pushed.encode()])))
    log.wait_for("unknown handler 7")
    push(plugin, prefix_handler(0, b"\xff\xff\xff"))  # not a PushGossip
    push(plugin, prefix_handler(0, marshal_push_gossip([b"\x02junk", pushed.encode()])))
    log.wait_for("1 item(s) did not unmarshal, 0 refused by the mempool")
    push(plugin, prefix_handler(0, marshal_push_gossip([pushed.encode()])))  # a duplicate
    log.wait_for("0 item(s) did not unmarshal, 1 refused by the mempool")

    # A pull request gets what its filter lacks: the pushed transaction, not the one the
    # filter holds; a request that does not read gets an AppError.
    held = transfer(0, DEV_KEYS[2])
    push(plugin, prefix_handler(0, marshal_push_gossip([held.encode()])))
    salt = bytes(range(32))
    bloom = BloomFilter(7, 1024)
    bloom.add(bloom_hash(held.hash, salt))
    request = prefix_handler(0, marshal_pull_request(bloom.marshal(), salt))
    plugin.call(
        "AppRequest",
        vm_pb2.AppRequestMsg(node_id=PEER, request_id=41, request=request),
        empty_pb2.Empty,
    )
    answer = appsender.next("SendAppResponse")
    assert (answer.node_id, answer.request_id) == (PEER, 41)
    assert parse_pull_response(answer.response) == [pushed.encode()]
    plugin.call(
        "AppRequest",
        vm_pb2.AppRequestMsg(node_id=PEER, request_id=42, request=prefix_handler(0, b"\x12")),
        empty_pb2.Empty,
    )
    error = appsender.next("SendAppError")
    assert (error.node_id, error.request_id, error.error_code) == (
        PEER,
        42,
        APP_ERROR_UNEXPECTED,
    )
    assert "PullGossipRequest" in error.error_message
    log.wait_for("AppRequest refused: MalformedRequest: PullGossipRequest")

    # Both gossiped transactions are built into the next block, once.
    block = build_and_accept(plugin)
    assert pushed.encode() in block and held.encode() in block
    assert appsender.received["SendAppGossip"].empty()  # only local submissions are pushed
    # Accepted, they are no longer offered to pulls.
    fresh = BloomFilter(7, 1024)
    plugin.call(
        "AppRequest",
        vm_pb2.AppRequestMsg(
            node_id=PEER,
            request_id=43,
            request=prefix_handler(0, marshal_pull_request(fresh.marshal(), salt)),
        ),
        empty_pb2.Empty,
    )
    assert parse_pull_response(appsender.next("SendAppResponse").response) == []


@pytest.mark.slow
def test_submitted_transactions_are_pushed_and_pulls_go_to_a_connected_peer(
    node: tuple[Node, StandardError], appsender: AppSender
) -> None:
    plugin, log = node
    submitted = transfer(0, DEV_KEYS[3])
    queued = plugin.channel.unary_unary(
        "/vmstack.Extras/SubmitTransactions",
        request_serializer=vmstack_pb2.SubmitTransactionsRequest.SerializeToString,
        response_deserializer=vmstack_pb2.SubmitTransactionsResponse.FromString,
    )(vmstack_pb2.SubmitTransactionsRequest(transactions=[submitted.encode()]), timeout=DEADLINE)
    assert queued.queued == 1

    gossip = appsender.next("SendAppGossip")
    handler, message = split_handler(gossip.msg)
    assert handler == 0
    assert parse_push_gossip(message) == [submitted.encode()]
    # The plugin knows no stakes: the node picks coreth's 100 validators.
    assert (list(gossip.node_ids), gossip.validators, gossip.non_validators, gossip.peers) == (
        [],
        100,
        0,
        0,
    )

    # With a peer connected, the plugin pulls from it; the answer enters the mempool.
    plugin.call("Connected", vm_pb2.ConnectedRequest(node_id=PEER), empty_pb2.Empty)
    pull = appsender.next("SendAppRequest")
    assert list(pull.node_ids) == [PEER]
    handler, message = split_handler(pull.request)
    assert handler == 0
    bloom, salt = parse_pull_request(message)
    assert bloom.contains(bloom_hash(submitted.hash, salt))
    pulled = transfer(0, DEV_KEYS[4])
    plugin.call(
        "AppResponse",
        vm_pb2.AppResponseMsg(
            node_id=PEER,
            request_id=pull.request_id,
            response=marshal_pull_response([pulled.encode()]),
        ),
        empty_pb2.Empty,
    )
    # An answer to no request is refused on standard error.
    plugin.call(
        "AppResponse",
        vm_pb2.AppResponseMsg(node_id=PEER, request_id=pull.request_id, response=b""),
        empty_pb2.Empty,
    )
    log.wait_for(f"AppResponse refused: MalformedRequest: no pull request {pull.request_id}")

    block = build_and_accept(plugin)
    assert submitted.encode() in block and pulled.encode() in block
