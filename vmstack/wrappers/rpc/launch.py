"""A plugin started as an avalanchego node starts one: :func:`start_plugin`.

The node's side of the runtime handshake (avalanchego's ``rpcchainvm`` subprocess
runtime): a ``vm.runtime.Runtime`` service on ``127.0.0.1:0``, its address in the plugin's
``AVALANCHE_VM_RUNTIME_ENGINE_ADDR``, the plugin started with no arguments and standard input
closed, and its one ``Initialize(protocol_version, addr)`` awaited. A plugin announcing
another protocol version than the client's is refused, as a node refuses it: the
handshake fails with a message naming both versions, the plugin is stopped and
:class:`~vmstack.errors.VMUnavailable` raised. Otherwise the caller gets a
:class:`~vmstack.wrappers.rpc.VMClient` of the address the plugin announced, speaking that
version; at the end the client sends ``Shutdown``, then the plugin gets SIGTERM and, if it
still runs, SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO

import grpc
from google.protobuf import empty_pb2

from vmstack.errors import VMUnavailable
from vmstack.wrappers.rpc import runtime_pb2
from vmstack.wrappers.rpc.client import VMClient
from vmstack.wrappers.rpc.plugin import ENGINE_ADDRESS_VARIABLE
from vmstack.wrappers.rpc.protocol import PROTOCOL_VERSION, check_protocol_version

__all__ = ["STOP_GRACE", "start_plugin"]

#: Seconds a plugin has to exit after Shutdown, and again after SIGTERM, before the next step.
STOP_GRACE = 10.0


class _Runtime:
    """The node's runtime service: takes one handshake, refusing another protocol version."""

    def __init__(self, protocol_version: int) -> None:
        self.protocol_version = protocol_version
        self.announced: runtime_pb2.InitializeRequest | None = None
        self.received = threading.Event()
        self.server = grpc.server(ThreadPoolExecutor(max_workers=1))
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
        self.announced = request
        self.received.set()
        if request.protocol_version != self.protocol_version:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"the node speaks RPC chain VM protocol version {self.protocol_version}, "
                f"the plugin {request.protocol_version}: they must match exactly",
            )
        return empty_pb2.Empty()


def _stop(process: subprocess.Popen[bytes]) -> None:
    for stop in (None, process.terminate, process.kill):
        if stop is not None:
            with contextlib.suppress(ProcessLookupError):
                stop()
        try:
            process.wait(STOP_GRACE)
            return
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def _said(log: IO[bytes]) -> str:
    log.seek(0)
    text = log.read()[-2000:].decode(errors="replace").strip()
    return f"; it said: {text}" if text else ""


@contextlib.contextmanager
def start_plugin(
    command: Sequence[str],
    *,
    protocol_version: int = PROTOCOL_VERSION,
    timeout: float = 10.0,
    handshake_timeout: float = 30.0,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Iterator[VMClient]:
    """Start the plugin ``command`` as a node does, take its handshake and yield a
    :class:`VMClient` of it (``timeout`` per call, ``protocol_version`` the version both
    must speak, 45 or 46; ``.pid`` the plugin's process). ``environ`` is the plugin's
    environment (default: this process's), the runtime's address added. A plugin that
    announces no address within ``handshake_timeout`` seconds, exits first, or speaks
    another protocol version is stopped and :class:`VMUnavailable` raised, with what it
    wrote to standard error."""
    version = check_protocol_version(protocol_version)
    runtime = _Runtime(version)
    environment = {
        **(os.environ if environ is None else environ),
        ENGINE_ADDRESS_VARIABLE: f"127.0.0.1:{runtime.port}",
    }
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=environment,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            waited = 0.0
            while not runtime.received.wait(0.1):
                waited += 0.1
                if process.poll() is not None or waited >= handshake_timeout:
                    _stop(process)
                    raise VMUnavailable(
                        f"the plugin {command[0]} made no handshake (exit status "
                        f"{process.returncode}){_said(log)}"
                    )
            announced = runtime.announced
            assert announced is not None
            if announced.protocol_version != version:
                _stop(process)
                raise VMUnavailable(
                    f"the plugin {command[0]} speaks RPC chain VM protocol version "
                    f"{announced.protocol_version}, this client {version}: refused"
                )
            with VMClient(announced.addr, timeout=timeout, protocol_version=version) as client:
                client.pid = process.pid
                try:
                    yield client
                finally:
                    with contextlib.suppress(VMUnavailable):
                        client.shutdown()
        finally:
            if process.poll() is None:
                _stop(process)
            runtime.server.stop(None).wait(STOP_GRACE)
