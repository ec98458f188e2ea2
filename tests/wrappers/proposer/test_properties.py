"""Properties of the proposer layer over random chains, forks and budgets."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vmstack.batching import (
    CONTAINER_LEN_OVERHEAD,
    AncestorBudget,
    fetch_through,
    parse_each,
    serial_get_ancestors,
    walk_ancestors,
)
from vmstack.clock import SimClock

from . import STEP, grow, make_vm

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HOUR = 3600.0


def _fork_times(length: int) -> st.SearchStrategy[float]:
    """Fork times at, between and beyond the block times, and never."""
    return st.one_of(st.just(math.inf), st.integers(0, STEP * (length + 2)).map(float))


@SETTINGS
@given(data=st.data())
def test_batched_answer_equals_the_fallback_walk(data: st.DataObject) -> None:
    """For any chain, fork, requested block and budget, the batched answer over a batching
    or a serial inner VM equals the fallback walk, obeys the count and size rule, and is
    what the rule allows for the chain."""
    length = data.draw(st.integers(1, 24), label="blocks")
    fork_time = data.draw(_fork_times(length), label="fork time")
    stacks = [make_vm(fork_time=fork_time, batching=batching) for batching in (True, False)]
    chains = [grow(vm, clock, length) for vm, _, clock in stacks]
    assert [block.id for block in chains[0]] == [block.id for block in chains[1]]
    vm, inner, clock = stacks[0]
    genesis = bytes(inner.get_block(inner.get_block_id_at_height(0)))
    chain = [genesis, *(bytes(block) for block in chains[0])]
    index = data.draw(st.integers(0, length), label="requested height")
    num = data.draw(st.integers(1, length + 3), label="max_blocks_num")
    size = data.draw(
        st.integers(0, sum(len(b) + CONTAINER_LEN_OVERHEAD for b in chain) + 8),
        label="max_blocks_size",
    )
    block_id = vm.get_block_id_at_height(index)

    batched = vm.get_ancestors(block_id, num, size, HOUR)
    over_serial = stacks[1][0].get_ancestors(block_id, num, size, HOUR)
    fallback = serial_get_ancestors(
        vm, block_id, max_blocks_num=num, max_blocks_size=size, max_retrieval_time=HOUR, clock=clock
    )
    expected = AncestorBudget(num, size, HOUR, clock=SimClock())
    expected.extend(reversed(chain[: index + 1]))
    assert batched == over_serial == fallback == expected.blocks
    assert 1 <= len(batched) <= num
    cost = sum(len(block) + CONTAINER_LEN_OVERHEAD for block in batched)
    assert cost <= size or len(batched) == 1


@SETTINGS
@given(data=st.data())
def test_batched_parse_equals_parsing_one_by_one(data: st.DataObject) -> None:
    """Any selection of a chain's blocks, in any order, parses in one batch to the blocks
    that parsing them one by one gives, and parsing alone makes nothing served below."""
    length = data.draw(st.integers(1, 20), label="blocks")
    fork_time = data.draw(_fork_times(length), label="fork time")
    source, _, clock = make_vm(fork_time=fork_time)
    chain = [bytes(block) for block in grow(source, clock, length)]
    picks = data.draw(
        st.lists(st.integers(0, length - 1), min_size=1, max_size=2 * length), label="picks"
    )
    batch = [chain[i] for i in picks]
    batching = data.draw(st.booleans(), label="inner batches")
    vm, inner, _ = make_vm(fork_time=fork_time, batching=batching)
    parsed = vm.batched_parse_block(batch)
    one_by_one = parse_each(make_vm(fork_time=fork_time)[0].parse_block, batch)
    assert [block.id for block in parsed] == [block.id for block in one_by_one]
    assert [bytes(block) for block in parsed] == batch
    assert [block.post_fork for block in parsed] == [block.post_fork for block in one_by_one]
    assert (
        walk_ancestors(
            fetch_through(inner), parsed[0].inner.id, AncestorBudget(clock=SimClock())
        ).blocks
        == []
    )
