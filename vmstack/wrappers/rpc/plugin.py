"""The plugin side of avalanchego's rpcchainvm: a VM served as a plugin a node starts
(``vmstack plugin`` is :func:`run` with the C-chain stack of :mod:`vmstack.serving`).

A node starts a plugin with no arguments, standard input closed, and the address of its
runtime service in ``AVALANCHE_VM_RUNTIME_ENGINE_ADDR``. The plugin listens on
``127.0.0.1:0``, calls ``vm.runtime.Runtime/Initialize`` there with protocol version
:data:`~vmstack.wrappers.rpc.protocol.PROTOCOL_VERSION` and its own address within
:data:`HANDSHAKE_TIMEOUT` seconds, and serves ``vm.VM`` and ``grpc.health.v1.Health``
(:class:`~vmstack.wrappers.rpc.VMServer`, without a token: a node presents none, and the
address is the loopback one). The node's ``Initialize`` builds the VM, by the builder the
plugin is given (:data:`PluginBuilder`): this module serves a VM and never builds one.

SIGINT and SIGTERM are ignored until ``Shutdown``, as avalanchego's plugins ignore them (the
node stops a plugin with ``Shutdown``, then SIGTERM); after ``Shutdown`` the plugin closes
what the builder gave it to close and exits at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any

from vmstack.errors import VMStackError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from vmstack.interfaces import ChainVM
    from vmstack.wrappers.rpc import vm_pb2

__all__ = ["ENGINE_ADDRESS_VARIABLE", "HANDSHAKE_TIMEOUT", "PluginBuilder", "run"]

#: The environment variable holding the node's runtime service address.
ENGINE_ADDRESS_VARIABLE = "AVALANCHE_VM_RUNTIME_ENGINE_ADDR"
#: Seconds the runtime handshake may take.
HANDSHAKE_TIMEOUT = 5.0

#: What builds the VM a node's ``Initialize`` asks for: called with the request and a list
#: to append what the plugin closes after ``Shutdown`` (a store); returns the VM and the
#: registry of its metrics. A request it cannot follow raises ``ValueError`` (or an error
#: of vmstack's tree) saying why, which the node receives.
PluginBuilder = Callable[
    ["vm_pb2.InitializeRequest", list[Any]], "tuple[ChainVM, CollectorRegistry | None]"
]


def _handshake(engine: str, address: str) -> None:
    import grpc

    from vmstack.wrappers.rpc import runtime_pb2
    from vmstack.wrappers.rpc.protocol import PROTOCOL_VERSION

    with grpc.insecure_channel(engine) as channel:
        initialize = channel.unary_unary(
            "/vm.runtime.Runtime/Initialize",
            request_serializer=runtime_pb2.InitializeRequest.SerializeToString,
            response_deserializer=lambda data: data,
        )
        try:
            initialize(
                runtime_pb2.InitializeRequest(protocol_version=PROTOCOL_VERSION, addr=address),
                timeout=HANDSHAKE_TIMEOUT,
                wait_for_ready=True,
            )
        except grpc.RpcError as error:
            details = error.details() if isinstance(error, grpc.Call) else str(error)
            raise VMStackError(
                f"the runtime at {engine} did not take the handshake within "
                f"{HANDSHAKE_TIMEOUT:g} s: {details}"
            ) from None


def run(
    builder: PluginBuilder, environ: Mapping[str, str] | None = None, err: IO[str] = sys.stderr
) -> int:
    """Run as a plugin serving the VM ``builder`` makes from the node's ``Initialize``;
    the exit status (0 after Shutdown, 1 when the handshake fails, 2 without the runtime's
    address)."""
    from vmstack.wrappers.rpc.server import VMServer

    environ = os.environ if environ is None else environ
    engine = environ.get(ENGINE_ADDRESS_VARIABLE)
    if not engine:
        print(
            f"vmstack plugin: {ENGINE_ADDRESS_VARIABLE} is not set; a node starts this "
            "plugin with the address of its runtime service there",
            file=err,
        )
        return 2
    restore = {
        number: signal.signal(number, signal.SIG_IGN) for number in (signal.SIGINT, signal.SIGTERM)
    }
    closing: list[Any] = []
    done = threading.Event()
    server = VMServer(
        None,
        address="127.0.0.1:0",
        require_token=False,
        initializer=lambda request: builder(request, closing),
        on_shutdown=done.set,
    )
    try:
        try:
            _handshake(engine, server.address)
        except VMStackError as error:
            print(f"vmstack plugin: {error}", file=err)
            return 1
        while not done.wait(0.5):
            pass
        return 0
    finally:
        server.close(grace=0.5)
        for resource in closing:
            resource.close()
        for number, handler in restore.items():
            signal.signal(number, handler)
