"""The plugin side of avalanchego's rpcchainvm: a VM served as a plugin a node starts
(``vmstack plugin`` is :func:`run` with the C-chain stack of :mod:`vmstack.serving`).

A node starts a plugin with no arguments, standard input closed, and the address of its
runtime service in ``AVALANCHE_VM_RUNTIME_ENGINE_ADDR``. The plugin listens on
``127.0.0.1:0``, calls ``vm.runtime.Runtime/Initialize`` there with its protocol version
(:data:`~vmstack.wrappers.rpc.protocol.PROTOCOL_VERSION`, 45, unless
:data:`PROTOCOL_VARIABLE` says 46, for avalanchego v1.15.x) and its own address within
:data:`HANDSHAKE_TIMEOUT` seconds, and serves ``vm.VM`` and ``grpc.health.v1.Health``
(:class:`~vmstack.wrappers.rpc.VMServer`, without a token: a node presents none, and the
address is the loopback one). The node's ``Initialize`` builds the VM, by the builder the
plugin is given (:data:`PluginBuilder`): this module serves a VM and never builds one.

Standard error (what a node logs of its plugin) says where the plugin listens, with its
process ID and protocol version, and every call it refuses, with the refusal's type and
message; WaitForEvent calls never take the threads Health and Shutdown are answered on.

The plugin's transactions travel over the node's network: ``AppGossip`` and ``AppRequest``
carry them into the mempool, and those submitted to the plugin are pushed through the node's
``appsender`` service at the ``server_addr`` of its ``Initialize``
(:mod:`vmstack.wrappers.rpc.app_gossip`; a gossip message the plugin drops is a refusal on
standard error too).

The node stops a plugin with ``Shutdown``, then SIGTERM: after ``Shutdown`` the plugin
closes what the builder gave it to close and exits at once (status 0). A SIGTERM (or SIGINT)
without ``Shutdown`` gives the node :data:`TERMINATION_GRACE` seconds to send it; then the
plugin shuts its stack down itself, closes it and exits (status 0), so a plugin never
outlives the node's request to stop.
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

__all__ = [
    "ENGINE_ADDRESS_VARIABLE",
    "HANDSHAKE_TIMEOUT",
    "MAX_LOG_LINE",
    "PROTOCOL_VARIABLE",
    "PluginBuilder",
    "TERMINATION_GRACE",
    "run",
]

#: The environment variable holding the node's runtime service address.
ENGINE_ADDRESS_VARIABLE = "AVALANCHE_VM_RUNTIME_ENGINE_ADDR"
#: Seconds the runtime handshake may take.
HANDSHAKE_TIMEOUT = 5.0
#: Seconds the plugin waits after SIGTERM (or SIGINT) for the node's ``Shutdown`` before it
#: shuts down by itself.
TERMINATION_GRACE = 5.0
#: The environment variable that sets the protocol version the plugin announces (45 when
#: unset; 46 for avalanchego v1.15.x).
PROTOCOL_VARIABLE = "VMSTACK_RPC_PROTOCOL_VERSION"
#: The longest line the plugin writes to standard error for one refusal, in characters.
MAX_LOG_LINE = 2000

#: What builds the VM a node's ``Initialize`` asks for: called with the request and a list
#: to append what the plugin closes after ``Shutdown`` (a store); returns the VM and the
#: registry of its metrics. A request it cannot follow raises ``ValueError`` (or an error
#: of vmstack's tree) saying why, which the node receives.
PluginBuilder = Callable[
    ["vm_pb2.InitializeRequest", list[Any]], "tuple[ChainVM, CollectorRegistry | None]"
]


def _handshake(engine: str, address: str, protocol_version: int) -> None:
    import grpc

    from vmstack.wrappers.rpc import runtime_pb2

    with grpc.insecure_channel(engine) as channel:
        initialize = channel.unary_unary(
            "/vm.runtime.Runtime/Initialize",
            request_serializer=runtime_pb2.InitializeRequest.SerializeToString,
            response_deserializer=lambda data: data,
        )
        try:
            initialize(
                runtime_pb2.InitializeRequest(protocol_version=protocol_version, addr=address),
                timeout=HANDSHAKE_TIMEOUT,
                wait_for_ready=True,
            )
        except grpc.RpcError as error:
            code = error.code() if isinstance(error, grpc.Call) else None
            details = error.details() if isinstance(error, grpc.Call) else str(error)
            if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
                raise VMStackError(
                    f"the runtime at {engine} did not take the handshake within "
                    f"{HANDSHAKE_TIMEOUT:g} s: {details}"
                ) from None
            raise VMStackError(
                f"the runtime at {engine} refused the handshake of protocol version "
                f"{protocol_version}: {details}"
            ) from None


def _say(err: IO[str], line: str) -> None:
    """One line on standard error, cut at :data:`MAX_LOG_LINE` characters."""
    if len(line) > MAX_LOG_LINE:
        line = line[: MAX_LOG_LINE - 1] + "…"
    print(line.replace("\n", " "), file=err, flush=True)


def run(
    builder: PluginBuilder,
    environ: Mapping[str, str] | None = None,
    err: IO[str] = sys.stderr,
    *,
    termination_grace: float = TERMINATION_GRACE,
) -> int:
    """Run as a plugin serving the VM ``builder`` makes from the node's ``Initialize``;
    the exit status (0 after Shutdown, or after SIGTERM and the grace period; 1 when the
    handshake fails; 2 without the runtime's address or with a protocol version this
    boundary does not speak in :data:`PROTOCOL_VARIABLE`)."""
    from vmstack.wrappers.rpc.protocol import PROTOCOL_VERSION, check_protocol_version
    from vmstack.wrappers.rpc.server import VMServer

    environ = os.environ if environ is None else environ
    engine = environ.get(ENGINE_ADDRESS_VARIABLE)
    if not engine:
        _say(
            err,
            f"vmstack plugin: {ENGINE_ADDRESS_VARIABLE} is not set; a node starts this "
            "plugin with the address of its runtime service there",
        )
        return 2
    try:
        protocol_version = check_protocol_version(
            environ.get(PROTOCOL_VARIABLE, str(PROTOCOL_VERSION))
        )
    except ValueError as error:
        _say(err, f"vmstack plugin: {PROTOCOL_VARIABLE}: {error}")
        return 2
    stop_asked = threading.Event()
    done = threading.Event()
    restore: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        restore = {
            number: signal.signal(number, lambda number, frame: stop_asked.set())
            for number in (signal.SIGINT, signal.SIGTERM)
        }
    closing: list[Any] = []
    server = VMServer(
        None,
        address="127.0.0.1:0",
        require_token=False,
        initializer=lambda request: builder(request, closing),
        on_shutdown=done.set,
        app_gossip=True,
        on_refusal=lambda method, error: _say(
            err, f"vmstack plugin: {method} refused: {type(error).__name__}: {error}"
        ),
    )
    try:
        _say(
            err,
            f"vmstack plugin: serving vm.VM at {server.address} (pid {os.getpid()}, "
            f"RPC chain VM protocol {protocol_version}) for the runtime at {engine}",
        )
        try:
            _handshake(engine, server.address, protocol_version)
        except VMStackError as error:
            _say(err, f"vmstack plugin: {error}")
            return 1
        while not done.wait(0.1):
            if stop_asked.is_set():
                _say(
                    err,
                    f"vmstack plugin: asked to stop; waiting {termination_grace:g} s "
                    "for the node's Shutdown",
                )
                if not done.wait(termination_grace):
                    _say(err, "vmstack plugin: no Shutdown came; shutting down")
                    server.shutdown()
                break
        return 0
    finally:
        server.close(grace=0.5)
        for resource in closing:
            resource.close()
        for number, handler in restore.items():
            signal.signal(number, handler)
