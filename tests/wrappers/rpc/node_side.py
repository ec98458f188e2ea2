"""The node's side of a ``vmstack plugin`` process, written as avalanchego's node speaks it and
with nothing of vmstack's client: the runtime service that takes the plugin's handshake, a
genesis funding the dev accounts, and one vm.VM call over a plain gRPC channel."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
from google.protobuf import empty_pb2
from google.protobuf.message import Message

from vmstack.cchain.genesis import DEV_BALANCE, dev_addresses
from vmstack.wrappers.rpc import runtime_pb2

__all__ = ["CHAIN_ID", "GENESIS", "Runtime", "call_vm"]

CHAIN_ID = 43_112

#: A C-chain genesis of :data:`CHAIN_ID` funding every dev account with ``DEV_BALANCE``.
GENESIS = json.dumps(
    {
        "config": {"chainId": CHAIN_ID},
        "alloc": {address.hex(): {"balance": hex(DEV_BALANCE)} for address in dev_addresses()},
        "gasLimit": hex(15_000_000),
        "timestamp": "0x0",
    }
).encode()


class Runtime:
    """The node's runtime service on ``127.0.0.1:<port>``: records the one Initialize a
    plugin sends, whatever protocol version it announces."""

    def __init__(self) -> None:
        self.handshake: runtime_pb2.InitializeRequest | None = None
        self.received = threading.Event()
        self.server = grpc.server(ThreadPoolExecutor(max_workers=2))
        handler = grpc.unary_unary_rpc_method_handler(
            self._initialize,
            request_deserializer=runtime_pb2.InitializeRequest.FromString,
            response_serializer=empty_pb2.Empty.SerializeToString,
        )
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("vm.runtime.Runtime", {"Initialize": handler}),)
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def _initialize(
        self, request: runtime_pb2.InitializeRequest, context: grpc.ServicerContext
    ) -> empty_pb2.Empty:
        self.handshake = request
        self.received.set()
        return empty_pb2.Empty()


def call_vm(
    channel: grpc.Channel, method: str, request: Message, response: type[Message]
) -> Message:
    """``/vm.VM/<method>`` called once on ``channel`` with ``request``, its answer parsed as
    ``response``; 30 seconds at most."""
    stub = channel.unary_unary(
        f"/vm.VM/{method}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=response.FromString,
    )
    answer: Message = stub(request, timeout=30)
    return answer
