"""The process boundary: a VM stack served over gRPC, as avalanchego's rpcchainvm serves a
plugin VM, with the batched protocol in one round trip per call.

- :class:`VMServer` serves any ``ChainVM`` (usually a whole stack);
- :class:`VMClient` is the engine's side, a layer that answers every batched call with
  exactly one round trip (the server runs the engine helpers, fallback included);
- :func:`spawn` runs ``vmstack serve`` in a child process over an LMDB store and yields a
  connected client.

The service is ``vm.proto`` beside this module; :mod:`vmstack.wrappers.rpc.protocol` holds
what both sides agree on (methods, message limits, how errors cross).
"""

from vmstack.wrappers.rpc.client import RemoteBlock, RoundTrips, VMClient
from vmstack.wrappers.rpc.process import spawn
from vmstack.wrappers.rpc.protocol import MAX_MESSAGE_SIZE, MAX_REQUEST_SIZE
from vmstack.wrappers.rpc.server import VMServer

__all__ = ["MAX_MESSAGE_SIZE", "MAX_REQUEST_SIZE", "RemoteBlock", "RoundTrips", "VMClient",
           "VMServer", "spawn"]
