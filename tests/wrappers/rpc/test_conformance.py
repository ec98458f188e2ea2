"""The engine's side of the process boundary passes the conformance kit: VMClient over a
VMServer that serves the kit's recording VM.

The client tracks the last accepted block and keeps the accepted ones, as avalanchego's
``chain.State`` does: the chain grows through it (build, verify, prefer, accept), as a chain
behind an avalanchego client does, and its ``last_accepted`` runs below when the client asks
the served VM for its state (SetState); a block it saw accepted is read below by a client
that did not."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from vmstack.conformance import LayerConformance
from vmstack.conformance.declarations import Declaration
from vmstack.conformance.doubles import MemoryVM
from vmstack.conformance.stacks import KitStack
from vmstack.interfaces import ChainVM
from vmstack.wrappers.rpc import VMClient, VMServer, vm_pb2

#: The whole kit through a gRPC server: many quick tests, seconds together.
pytestmark = pytest.mark.thorough


class TestVMClient(LayerConformance):
    """VMClient answers batched calls itself (one round trip; the server runs the engine
    helpers, fallback included) and sits across a process boundary."""

    declarations = (
        Declaration.ANSWERS_BATCHED_CALLS_ITSELF,
        Declaration.PROCESS_BOUNDARY,
        Declaration.SERVES_BLOCKS_FROM_MEMORY,
    )
    max_examples = 8
    _opened: list[VMServer | VMClient]

    @pytest.fixture(autouse=True)
    def _close_connections(self) -> Iterator[None]:
        self._opened = []
        yield
        for opened in reversed(self._opened):
            opened.close()

    def wrap(self, inner: ChainVM) -> ChainVM:
        # The served VM's time budget runs on the kit's clock, as it would on the served
        # process's own simulated clock.
        server = VMServer(inner, clock=getattr(inner, "clock", None))
        client = VMClient(server.address, timeout=30.0)
        self._opened += [server, client]
        return client

    def extend_chain(self, layer: ChainVM, inner: MemoryVM, count: int) -> list[bytes]:
        ids = []
        for _ in range(count):
            block = layer.build_block()
            block.verify()
            layer.set_preference(block.id)
            block.accept()
            ids.append(block.id)
        return ids

    def error_action(self, stack: KitStack, method: str) -> Callable[[], object]:
        if method == "last_accepted":
            client = stack.layer
            assert isinstance(client, VMClient)
            return lambda: client.set_state(vm_pb2.STATE_NORMAL_OP)
        if method == "get_block":
            # The client answers the blocks it saw accepted itself; one that has not seen
            # them asks below.
            fresh = VMClient(stack.layer.address, timeout=30.0)  # type: ignore[attr-defined]
            self._opened.append(fresh)
            return lambda: fresh.get_block(stack.ids[1])
        return super().error_action(stack, method)
