"""Fuzzed block bytes through a bare ``CChainVM`` and the full stack from ``build_stack``:
``parse_block``, ``verify`` and ``batched_parse_block`` raise only ``InvalidBlock``, store
nothing, and allocate nothing for a declared length of 2**60."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.mutations import (
    deeply_nested,
    huge_length_inputs,
    mutate,
    rlp_mutations,
    u32_mutations,
)
from tests.reliability.stacks import START, bare_vm, full_stack, grow, store_items
from vmstack import InvalidBlock, SimClock, batched_parse_block
from vmstack.cchain import AVALANCHE, ETHEREUM, list_prefix, read_prefix, split_block
from vmstack.interfaces import ChainVM
from vmstack.store import MemoryStore

#: Fuzzing: the full suite runs it.
pytestmark = pytest.mark.thorough

STACK = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@attrs.define
class Node:
    """A node under fuzzing: its top VM, its store, and valid block bytes to mutate (its own
    latest accepted blocks and the next block of an identical node, new to it)."""

    vm: ChainVM
    store: MemoryStore
    seeds: list[bytes]
    clock: SimClock


def make_node(
    factory: Callable[..., ChainVM], blocks: int, picks: tuple[int, ...], **options: Any
) -> Node:
    """A node with ``blocks`` accepted blocks; its seeds are the accepted blocks at indexes
    ``picks`` and the block that comes next."""
    ahead_clock = SimClock(START)
    ahead = factory(MemoryStore(), ahead_clock, **options)
    ids = grow(ahead, ahead_clock, blocks + 1)
    store, clock = MemoryStore(), SimClock(START)
    vm = factory(store, clock, **options)
    assert grow(vm, clock, blocks) == ids[:-1]
    seeds = [bytes(vm.get_block(ids[index])) for index in picks]
    seeds.append(bytes(ahead.get_block(ids[-1])))
    clock.advance(2.0)
    return Node(vm, store, seeds, clock)


NODES: dict[str, Callable[[], Node]] = {
    "cchain-avalanche": lambda: make_node(bare_vm, 6, (2, 4, 5), flavour=AVALANCHE),
    "cchain-ethereum": lambda: make_node(bare_vm, 6, (2, 4, 5), flavour=ETHEREUM),
    # pre-transition, pre-fork, the unsigned first post-fork block, signed post-fork blocks
    "full stack": lambda: make_node(full_stack, 13, (2, 7, 10, 11, 12)),
}


@pytest.fixture(scope="module", params=list(NODES))
def node(request: pytest.FixtureRequest) -> Node:
    return NODES[request.param]()


def attempt(call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)``, or ``None`` when it raises ``InvalidBlock`` (anything else escapes)."""
    try:
        return call(*args)
    except InvalidBlock:
        return None


def test_seeds_parse_and_the_next_block_verifies(node: Node) -> None:
    """The unmutated seeds parse, and the next block verifies (then is rejected again)."""
    for seed in node.seeds:
        assert bytes(node.vm.parse_block(seed)) == seed
    before = store_items(node.store)
    block = node.vm.parse_block(node.seeds[-1])
    block.verify()
    block.reject()
    assert store_items(node.store) == before


def exercise(node: Node, data: bytes) -> None:
    """``data`` through parse, verify and a batch between two valid blocks: only
    ``InvalidBlock``, a parsed block keeps the bytes, and the store is untouched."""
    before = store_items(node.store)
    block = attempt(node.vm.parse_block, data)
    if block is not None:
        assert bytes(block) == data
        attempt(block.verify)
        attempt(block.reject)
    good = node.seeds[0]
    try:
        parsed = batched_parse_block(node.vm, [good, data, good])
    except InvalidBlock as error:
        assert error.index == 1, error
    else:
        assert [bytes(b) for b in parsed] == [good, data, good]
    assert store_items(node.store) == before


@pytest.mark.slow
@STACK
@given(data=st.data())
def test_mutated_blocks_through_the_stack(node: Node, data: st.DataObject) -> None:
    """Mutated block bytes (RLP framing, fields, envelope lengths) give only InvalidBlock
    from parse, verify and batched parse, and the store's keys and values never change."""
    exercise(node, data.draw(mutate(node.seeds, st.one_of(rlp_mutations, u32_mutations))))


@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=400))
def test_random_bytes_through_the_stack(node: Node, data: bytes) -> None:
    """Arbitrary bytes through parse, verify and batched parse give only InvalidBlock."""
    exercise(node, data)


def cchain_seed(node: Node) -> bytes:
    """A C-chain block among the node's seeds (pre-fork blocks are the inner blocks)."""
    return next(seed for seed in node.seeds if seed[0] >= 0xC0)


def test_huge_declared_lengths_through_the_stack(node: Node) -> None:
    """Blocks declaring 2**60 or 2**64 - 1 bytes are InvalidBlock from parse and batched
    parse, with under 256 KiB allocated for all of them together."""
    inputs = huge_length_inputs(cchain_seed(node))

    def run() -> None:
        for bad in inputs:
            with pytest.raises(InvalidBlock):
                node.vm.parse_block(bad)
            with pytest.raises(InvalidBlock):
                batched_parse_block(node.vm, [bad])

    before = store_items(node.store)
    tracemalloc.start()
    try:
        run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024
    assert store_items(node.store) == before


def test_deeply_nested_header_and_body_through_the_stack(node: Node) -> None:
    """A header, or a transactions list, nested 5000 lists deep is InvalidBlock from parse
    or verify, never a RecursionError."""
    header, body = split_block(cchain_seed(node))
    nested = deeply_nested(5_000)
    deep_header = list_prefix(len(nested) + len(body) - 1) + nested + body[1:]
    with pytest.raises(InvalidBlock):
        node.vm.parse_block(deep_header)
    _, payload_start, _ = read_prefix(body, 0)
    _, first_start, first_len = read_prefix(body, payload_start)
    rest = body[first_start + first_len :]
    block = header + nested + rest
    parsed = attempt(node.vm.parse_block, list_prefix(len(block)) + block)
    if parsed is not None:
        with pytest.raises(InvalidBlock):
            parsed.verify()


def test_nested_header_memory_stays_proportional(node: Node) -> None:
    """A 50 KB header nested 800 lists deep is refused with under 8x its size allocated."""
    inner = b"\xb9\xc3\x50" + b"\x01" * 50_000
    for _ in range(800):
        inner = list_prefix(len(inner)) + inner
    data = list_prefix(len(inner)) + inner
    tracemalloc.start()
    try:
        with pytest.raises(InvalidBlock):
            node.vm.parse_block(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * len(data)
