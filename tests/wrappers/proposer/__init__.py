"""Tests of the proposer layer, and the small chain builders they share."""

from __future__ import annotations

import math
from collections.abc import Callable

from vmstack.clock import SimClock
from vmstack.conformance import MemoryVM, memory_vm
from vmstack.interfaces import ChainVM
from vmstack.store import MemoryStore
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.staking import StakingKey
from vmstack.wrappers.proposer.vm import ProposerVM

CHAIN_ID = bytes([7]) * 32
#: Seconds between blocks in the built chains.
STEP = 2
_KEY = StakingKey.generate(seed=b"proposer tests")


def node_key() -> StakingKey:
    """The seeded staking identity every test node signs with."""
    return _KEY


def make_vm(
    *,
    fork_time: float = math.inf,
    batching: bool = True,
    signed: bool = True,
    store: MemoryStore | None = None,
    below: Callable[[MemoryVM], ChainVM] | None = None,
) -> tuple[ProposerVM, MemoryVM, SimClock]:
    """A proposer layer over a fresh memory VM (or over ``below(memory VM)``, layers
    wrapping it), all on one simulated clock starting at 0."""
    clock = SimClock(0.0)
    inner = memory_vm(batching=batching, clock=clock)
    vm = ProposerVM(
        inner if below is None else below(inner),
        fork_time=fork_time,
        chain_id=CHAIN_ID,
        store=store,
        clock=clock,
        staking_key=node_key() if signed else None,
    )
    return vm, inner, clock


def grow(
    vm: ProposerVM, clock: SimClock, count: int, *, accept: bool = True, step: float = STEP
) -> list[ProposerBlock]:
    """Build ``count`` blocks on the preferred one, advancing ``clock`` by ``step`` before
    each; verify each and prefer it, and accept it unless ``accept`` is False."""
    built: list[ProposerBlock] = []
    for _ in range(count):
        clock.advance(step)
        block = vm.build_block()
        block.verify()
        if accept:
            block.accept()
        vm.set_preference(block.id)
        built.append(block)
    return built
