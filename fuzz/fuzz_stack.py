"""Coverage-guided fuzzing of a whole stack's parse path (atheris).

A full stack from ``build_stack`` (transition, tracing, metering and the proposer layer) over
a ``MemoryStore`` holding a short chain that crosses the transition and the fork gets each
input through ``parse_block``, the parsed block's ``verify`` (then ``reject``), and
``batched_parse_block`` with the input between two valid blocks. Only ``InvalidBlock`` may
come out, a parsed block keeps the input's bytes, a failing batch names index 1, and the
store's keys and values never change. See fuzz/README.md for how to run it.
"""

from __future__ import annotations

from collections.abc import Iterator

from harness import attempt, main
from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from vmstack import InvalidBlock, SimClock, batched_parse_block
from vmstack.cchain import generate_chain
from vmstack.interfaces import ChainVM
from vmstack.stack import build_stack
from vmstack.store import MemoryStore
from vmstack.wrappers.proposer import StakingKey

START = 1_000.0
BLOCKS = 13


def _node(store: MemoryStore, clock: SimClock) -> ChainVM:
    return build_stack(
        store,
        clock=clock,
        fork_time=START + 20,
        transition_time=START + 10,
        tracer=NoOpTracer(),
        registry=CollectorRegistry(),
        staking_key=StakingKey.generate(seed=b"fuzz"),
    )


def _setup() -> tuple[ChainVM, MemoryStore, list[bytes]]:
    """The node under test with ``BLOCKS`` accepted blocks, and seeds: some of its blocks
    (pre-transition, pre-fork, the unsigned first post-fork block, signed ones) and the next
    block, built by an identical node."""
    ahead_clock = SimClock(START)
    ahead = _node(MemoryStore(), ahead_clock)
    ids = generate_chain(ahead, blocks=BLOCKS + 1, txs_per_block=3, seed=7, clock=ahead_clock)
    store, clock = MemoryStore(), SimClock(START)
    vm = _node(store, clock)
    generate_chain(vm, blocks=BLOCKS, txs_per_block=3, seed=7, clock=clock)
    clock.advance(2.0)
    seeds = [bytes(vm.get_block(ids[i])) for i in (2, 7, 10, 11, 12)]
    seeds.append(bytes(ahead.get_block(ids[-1])))
    return vm, store, seeds


VM, STORE, SEEDS = _setup()


def _items() -> dict[bytes, bytes]:
    return {bytes(key): bytes(value) for key, value in STORE.iterate(b"")}


BEFORE = _items()


def one_input(data: bytes) -> None:
    """``data`` through parse, verify and a batch; raise on anything but ``InvalidBlock``,
    on a parsed block with other bytes, or on any change to the store."""
    block = attempt(VM.parse_block, data)
    if block is not None:
        assert bytes(block) == data, "a parsed block does not keep its bytes"
        attempt(block.verify)
        attempt(block.reject)
    good = SEEDS[0]
    try:
        parsed = batched_parse_block(VM, [good, data, good])
    except InvalidBlock as error:
        assert error.index == 1, f"the batch failed at {error.index}, not at the fuzzed block"
    else:
        assert [bytes(b) for b in parsed] == [good, data, good]
    assert _items() == BEFORE, "parsing changed the store"


def seeds() -> Iterator[bytes]:
    """The node's own blocks of every kind and the block that comes next."""
    yield from SEEDS


if __name__ == "__main__":
    main(one_input, seeds)
