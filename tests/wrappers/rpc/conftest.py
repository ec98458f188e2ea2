"""Fixtures for the process boundary: a served chain, in process (``VMServer``) and out of
process (``spawn``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from vmstack.cchain import generate_chain
from vmstack.clock import SimClock
from vmstack.interfaces import ChainVM
from vmstack.stack import build_stack
from vmstack.store import KeyValueStore, LMDBStore, MemoryStore
from vmstack.wrappers.proposer import StakingKey
from vmstack.wrappers.rpc import VMClient, VMServer

START = 1_000.0
TRANSITION_TIME = START + 10
FORK_TIME = START + 30
BLOCKS = 30


@attrs.define
class ServedChain:
    """A chain of :data:`BLOCKS` blocks (transition at block 5, fork at block 15), its
    store, the clock it was built on, and its block IDs, oldest first."""

    store: KeyValueStore
    clock: SimClock
    ids: list[bytes]

    @property
    def tip(self) -> bytes:
        return self.ids[-1]

    def c_part(self) -> ChainVM:
        """The C-chain part of the stack (what a plugin process serves)."""
        return build_stack(
            self.store, clock=self.clock, transition_time=TRANSITION_TIME, served_part=True
        )

    def full_stack(self, *, out_of_process: VMClient | None = None) -> ChainVM:
        """The whole stack in this process, or over ``out_of_process`` from "C" up."""
        return build_stack(
            self.store,
            clock=self.clock,
            fork_time=FORK_TIME,
            tracer=NoOpTracer(),
            registry=CollectorRegistry(),
            staking_key=_KEY,
            transition_time=None if out_of_process is not None else TRANSITION_TIME,
            out_of_process=out_of_process,
        )


_KEY = StakingKey.generate(seed=b"rpc tests")


def build_served_chain(store: KeyValueStore, *, blocks: int = BLOCKS) -> ServedChain:
    """Build the chain on the full stack over ``store``."""
    clock = SimClock(START)
    chain = ServedChain(store, clock, [])
    chain.ids = generate_chain(
        chain.full_stack(), blocks=blocks, txs_per_block=2, seed=11, clock=clock
    )
    return chain


@pytest.fixture(scope="module")
def served_chain() -> ServedChain:
    """One chain in a memory store, shared by a module's read-only tests."""
    return build_served_chain(MemoryStore())


@pytest.fixture
def served(served_chain: ServedChain) -> Iterator[tuple[ChainVM, VMClient]]:
    """The chain's full stack in process, and a client of the same stack served in
    process."""
    vm = served_chain.full_stack()
    with (
        VMServer(vm, clock=served_chain.clock) as server,
        VMClient(server.address, clock=served_chain.clock) as client,
    ):
        yield vm, client


@pytest.fixture(scope="module")
def lmdb_chain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding the chain in an LMDB store, closed (for ``spawn``)."""
    directory = tmp_path_factory.mktemp("served")
    with LMDBStore(directory) as store:
        build_served_chain(store)
    return directory
