"""The engine's side of the process boundary passes the conformance kit: VMClient over a
VMServer that serves the kit's recording VM."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vmstack.conformance import LayerConformance
from vmstack.conformance.kit import Declaration
from vmstack.interfaces import ChainVM
from vmstack.wrappers.rpc import VMClient, VMServer

#: The whole kit through a gRPC server: seconds.
pytestmark = pytest.mark.slow


class TestVMClient(LayerConformance):
    """VMClient answers batched calls itself (one round trip; the server runs the engine
    helpers, fallback included) and sits across a process boundary."""

    declarations = (Declaration.ANSWERS_BATCHED_CALLS_ITSELF, Declaration.PROCESS_BOUNDARY)
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
