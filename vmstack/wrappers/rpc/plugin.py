"""``vmstack plugin`` (also the ``vmstack-plugin`` executable): vmstack's C-chain VM as an
avalanchego plugin.

A node starts a plugin with no arguments, standard input closed, and the address of its
runtime service in ``AVALANCHE_VM_RUNTIME_ENGINE_ADDR``. The plugin listens on
``127.0.0.1:0``, calls ``vm.runtime.Runtime/Initialize`` there with protocol version
:data:`~vmstack.wrappers.rpc.protocol.PROTOCOL_VERSION` and its own address within
:data:`HANDSHAKE_TIMEOUT` seconds, and serves ``vm.VM`` and ``grpc.health.v1.Health``
(:class:`~vmstack.wrappers.rpc.VMServer`, without a token: a node presents none, and the
address is the loopback one). The node's ``Initialize`` builds the stack:

- ``chain_data_dir``: the folder of its LMDB store (created if absent);
- ``genesis_bytes``: a geth-style genesis JSON (empty: the default genesis);
- ``config_bytes``: a JSON object of stack options (:data:`CONFIG_OPTIONS`; empty: none).

SIGINT and SIGTERM are ignored until ``Shutdown``, as avalanchego's plugins ignore them (the
node stops a plugin with ``Shutdown``, then SIGTERM); after ``Shutdown`` the plugin closes
its stack and store and exits at once.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vmstack.errors import VMStackError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from vmstack.interfaces import ChainVM
    from vmstack.wrappers.rpc import vm_pb2

__all__ = ["CONFIG_OPTIONS", "ENGINE_ADDRESS_VARIABLE", "HANDSHAKE_TIMEOUT",
           "build_from_initialize", "main"]

#: The environment variable holding the node's runtime service address.
ENGINE_ADDRESS_VARIABLE = "AVALANCHE_VM_RUNTIME_ENGINE_ADDR"
#: Seconds the runtime handshake may take.
HANDSHAKE_TIMEOUT = 5.0
#: The stack options ``config_bytes`` may set, and the JSON types each takes.
CONFIG_OPTIONS: Mapping[str, tuple[type, ...]] = {
    "chain_id": (int,),
    "fork_time": (int, float),
    "transition_time": (int, float),
    "durango_time": (int, float),
    "settle_lag": (int,),
    "cache_size": (int,),
    "parse_workers": (int,),
}


def _config(data: bytes) -> dict[str, Any]:
    if not data.strip():
        return {}
    try:
        config = json.loads(data)
    except ValueError as error:
        raise ValueError(f"config_bytes is not JSON: {error}") from None
    if not isinstance(config, dict):
        raise ValueError("config_bytes is a JSON object of stack options")
    for name, value in config.items():
        if name not in CONFIG_OPTIONS:
            raise ValueError(f"config_bytes: unknown option {name!r}; the options are "
                             f"{', '.join(CONFIG_OPTIONS)}")
        if isinstance(value, bool) or not isinstance(value, CONFIG_OPTIONS[name]):
            raise ValueError(f"config_bytes: {name} must be a number, got {value!r}")
    return config


def build_from_initialize(request: vm_pb2.InitializeRequest, closing: list[Any]
                          ) -> tuple[ChainVM, CollectorRegistry]:
    """The stack a node's ``Initialize`` asks for (see the module's docstring); the store is
    appended to ``closing``, for the plugin to close after ``Shutdown``."""
    from prometheus_client import CollectorRegistry

    from vmstack.cchain.genesis import Genesis
    from vmstack.stack import build_stack, wrap_layers
    from vmstack.store import LMDBStore

    if not request.chain_data_dir:
        raise ValueError("Initialize: chain_data_dir names the folder of the VM's store")
    config = _config(request.config_bytes)
    genesis = Genesis.from_json(request.genesis_bytes) if request.genesis_bytes else None
    directory = Path(request.chain_data_dir) / "vmstack"
    directory.mkdir(parents=True, exist_ok=True)
    store = LMDBStore(directory)
    closing.append(store)
    registry = CollectorRegistry()
    vm = build_stack(store, genesis=genesis, served_part="fork_time" not in config, **config)
    return wrap_layers(vm, name="served", registry=registry), registry


def _handshake(engine: str, address: str) -> None:
    import grpc

    from vmstack.wrappers.rpc import runtime_pb2
    from vmstack.wrappers.rpc.protocol import PROTOCOL_VERSION

    with grpc.insecure_channel(engine) as channel:
        initialize = channel.unary_unary(
            "/vm.runtime.Runtime/Initialize",
            request_serializer=runtime_pb2.InitializeRequest.SerializeToString,
            response_deserializer=lambda data: data)
        try:
            initialize(runtime_pb2.InitializeRequest(protocol_version=PROTOCOL_VERSION,
                                                     addr=address),
                       timeout=HANDSHAKE_TIMEOUT, wait_for_ready=True)
        except grpc.RpcError as error:
            details = error.details() if isinstance(error, grpc.Call) else str(error)
            raise VMStackError(f"the runtime at {engine} did not take the handshake within "
                               f"{HANDSHAKE_TIMEOUT:g} s: {details}") from None


def run(environ: Mapping[str, str] | None = None, err: IO[str] = sys.stderr) -> int:
    """What the plugin does; its exit status (0 after Shutdown, 1 when the handshake fails,
    2 without the runtime's address)."""
    from vmstack.wrappers.rpc.server import VMServer

    environ = os.environ if environ is None else environ
    engine = environ.get(ENGINE_ADDRESS_VARIABLE)
    if not engine:
        print(f"vmstack plugin: {ENGINE_ADDRESS_VARIABLE} is not set; a node starts this "
              "plugin with the address of its runtime service there", file=err)
        return 2
    restore = {number: signal.signal(number, signal.SIG_IGN)
               for number in (signal.SIGINT, signal.SIGTERM)}
    closing: list[Any] = []
    done = threading.Event()
    server = VMServer(None, address="127.0.0.1:0", require_token=False,
                      initializer=lambda request: build_from_initialize(request, closing),
                      on_shutdown=done.set)
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


def main(argv: Sequence[str] | None = None) -> int:
    """The ``vmstack-plugin`` executable: takes no arguments."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments:
        print("vmstack plugin takes no arguments; a node starts it with "
              f"{ENGINE_ADDRESS_VARIABLE} set", file=sys.stderr)
        return 2
    return run()


if __name__ == "__main__":
    sys.exit(main())
