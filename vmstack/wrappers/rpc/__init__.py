"""The process boundary: a VM stack served over avalanchego's rpcchainvm protocol (the
``vm.VM`` gRPC service, RPC chain VM protocol version 45 by default, or 46), with the
batched protocol in one round trip per call.

- :class:`VMServer` serves any ``ChainVM`` (usually a whole stack) as ``vm.VM``, with
  ``grpc.health.v1.Health`` and vmstack's ``Extras`` beside it;
- :class:`VMClient` is the engine's side, a layer that speaks ``vm.VM`` to any server of it
  (a vmstack one or an avalanchego plugin) and answers every batched call with exactly one
  round trip;
- :func:`spawn` runs ``vmstack serve`` in a child process over an LMDB store and yields a
  connected client;
- :func:`start_plugin` starts any plugin (vmstack's or another) as an avalanchego node
  does, takes its runtime handshake (the protocol versions must match) and yields a client;
- :mod:`vmstack.wrappers.rpc.plugin` serves a VM as a plugin an avalanchego node starts
  (``vmstack plugin``, with the stack :mod:`vmstack.serving` builds).

The boundary serves a ready VM, or one a builder it is given makes; it never builds a stack
itself (:mod:`vmstack.serving` does, on the floor above it).

The services are ``vm.proto``, ``runtime.proto``, ``metrics.proto`` and ``vmstack.proto``
beside this module; :mod:`vmstack.wrappers.rpc.protocol` holds what both sides agree on
(methods, message limits, how errors and vmstack's extras cross).
"""

from vmstack.wrappers.rpc.client import VMClient
from vmstack.wrappers.rpc.launch import start_plugin
from vmstack.wrappers.rpc.process import spawn
from vmstack.wrappers.rpc.protocol import (
    MAX_MESSAGE_SIZE,
    MAX_REQUEST_SIZE,
    PROTOCOL_VERSION,
    PROTOCOL_VERSIONS,
)
from vmstack.wrappers.rpc.remote import RemoteBlock, RoundTrips
from vmstack.wrappers.rpc.server import VMServer

__all__ = [
    "MAX_MESSAGE_SIZE",
    "MAX_REQUEST_SIZE",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSIONS",
    "RemoteBlock",
    "RoundTrips",
    "VMClient",
    "VMServer",
    "spawn",
    "start_plugin",
]
