"""The slow path (get_block) and the fast path (get_ancestors) serve the same bytes, on
MemoryStore and LMDBStore, and get_ancestors equals the fallback walk under every budget."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cchain.chains import START, STORE_KINDS, build_chain, new_vm, open_store
from vmstack.batching import (
    CONTAINER_LEN_OVERHEAD,
    MAX_CONTAINERS_LEN,
    batched_parse_block,
    get_ancestors,
    serial_get_ancestors,
)
from vmstack.cchain import BlockStatus, CChainVM
from vmstack.clock import SimClock
from vmstack.errors import BlockNotFound
from vmstack.store import KeyValueStore, LMDBStore

BLOCKS = 24


class TickingClock:
    """A clock that moves one second forward each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyValueStore]:
    """A fresh MemoryStore or LMDBStore."""
    with open_store(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
def chain(store: KeyValueStore) -> tuple[CChainVM, list[bytes]]:
    """A VM over ``store`` with a generated chain of BLOCKS blocks (IDs with genesis first)."""
    vm = new_vm(store)
    ids = build_chain(vm, BLOCKS, txs=4)
    return vm, [vm.get_block_id_at_height(0), *ids]


def test_every_block_is_the_same_on_both_paths(chain: tuple[CChainVM, list[bytes]]) -> None:
    """bytes(get_block(id)) equals the bytes get_ancestors serves for it, for every block."""
    vm, ids = chain
    answer = vm.get_ancestors(ids[-1], 10_000, MAX_CONTAINERS_LEN, 60.0)
    assert len(answer) == len(ids)
    for block_id, data in zip(reversed(ids), answer, strict=True):
        block = vm.get_block(block_id)
        assert bytes(block) == data
        assert block.status is BlockStatus.ACCEPTED
        assert vm.get_ancestors(block_id, 1, 0, 0.0) == [data]


def _budgets(sizes: list[int]) -> list[tuple[int, int]]:
    one = sizes[0] + CONTAINER_LEN_OVERHEAD
    three = sum(sizes[:3]) + 3 * CONTAINER_LEN_OVERHEAD
    size_limits = [0, 1, one - 1, one, one + 1, three - 1, three, three + 1, MAX_CONTAINERS_LEN]
    return list(itertools.product([1, 2, 3, 5, 2000], size_limits))


@pytest.mark.slow
def test_fast_path_equals_the_fallback_walk(chain: tuple[CChainVM, list[bytes]]) -> None:
    """For many (start, max_blocks_num, max_blocks_size), both walks give the same answer."""
    vm, ids = chain
    for start in (ids[-1], ids[BLOCKS // 2], ids[2], ids[0]):
        full = serial_get_ancestors(vm, start, max_blocks_num=10_000, max_retrieval_time=60.0)
        assert vm.get_ancestors(start, 10_000, MAX_CONTAINERS_LEN, 60.0) == full
        for count, size in _budgets([len(data) for data in full]):
            fast = vm.get_ancestors(start, count, size, 60.0)
            slow = serial_get_ancestors(
                vm, start, max_blocks_num=count, max_blocks_size=size, max_retrieval_time=60.0
            )
            assert fast == slow, (count, size)
            assert fast == full[: len(fast)]
            assert (
                get_ancestors(
                    vm, start, max_blocks_num=count, max_blocks_size=size, max_retrieval_time=60.0
                )
                == fast
            )


def test_time_budget_is_the_same_on_both_paths(chain: tuple[CChainVM, list[bytes]]) -> None:
    """With a clock that ticks once per reading, both walks stop after the same block."""
    vm, ids = chain
    fast_vm = CChainVM(vm.store, clock=TickingClock())
    fast = fast_vm.get_ancestors(ids[-1], 100, MAX_CONTAINERS_LEN, 4.5)
    slow = serial_get_ancestors(
        vm, ids[-1], max_blocks_num=100, max_retrieval_time=4.5, clock=TickingClock()
    )
    assert fast == slow
    assert 1 < len(fast) < len(ids)


def test_processing_blocks_are_served_from_memory_on_both_paths(
    chain: tuple[CChainVM, list[bytes]],
) -> None:
    """Verified, undecided blocks on top of the chain are served first, then the store."""
    vm, ids = chain
    first = vm.build_block()
    first.verify()
    vm.set_preference(first.id)
    second = vm.build_block()
    second.verify()
    answer = vm.get_ancestors(second.id, 5, MAX_CONTAINERS_LEN, 60.0)
    assert answer[:2] == [bytes(second), bytes(first)]
    assert answer == serial_get_ancestors(vm, second.id, max_blocks_num=5, max_retrieval_time=60.0)
    assert vm.get_block(first.id) is first
    assert answer[2] == bytes(vm.get_block(ids[-1]))


def test_batched_parse_equals_serial_parse(chain: tuple[CChainVM, list[bytes]]) -> None:
    """batched_parse_block gives, per element, the block parse_block gives."""
    vm, ids = chain
    answer = vm.get_ancestors(ids[-1], 10, MAX_CONTAINERS_LEN, 60.0)
    fresh = CChainVM(vm.store)
    batch = batched_parse_block(fresh, answer)
    serial = [fresh.parse_block(data) for data in answer]
    assert [(b.id, b.parent_id, b.height, b.timestamp, bytes(b)) for b in batch] == [
        (b.id, b.parent_id, b.height, b.timestamp, bytes(b)) for b in serial
    ]
    assert [b.id for b in batch] == list(reversed(ids))[:10]


def test_unknown_blocks_are_not_served(chain: tuple[CChainVM, list[bytes]]) -> None:
    """An unknown ID: [] from both walks, BlockNotFound from get_block; bad IDs: ValueError."""
    vm, _ = chain
    unknown = bytes(range(32))
    assert vm.get_ancestors(unknown, 10, 1000, 1.0) == []
    assert serial_get_ancestors(vm, unknown) == []
    with pytest.raises(BlockNotFound):
        vm.get_block(unknown)
    for bad in (b"short", "x" * 32, None):
        with pytest.raises(ValueError):
            vm.get_ancestors(bad, 10, 1000, 1.0)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            vm.get_block(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        vm.get_ancestors(unknown, 0, 1000, 1.0)


def test_lmdb_store_reopened_serves_the_same_answers(tmp_path: Path) -> None:
    """A chain on LMDB, closed and opened again, gives the same answers on both paths."""
    clock = SimClock(START)
    with LMDBStore(tmp_path / "db") as store:
        vm = new_vm(store, clock)
        ids = build_chain(vm, 12)
        before = vm.get_ancestors(ids[-1], 100, MAX_CONTAINERS_LEN, 60.0)
        slow_before = [bytes(vm.get_block(block_id)) for block_id in ids]
    with LMDBStore(tmp_path / "db") as store:
        vm = new_vm(store, clock)
        assert vm.last_accepted() == ids[-1]
        assert vm.get_ancestors(ids[-1], 100, MAX_CONTAINERS_LEN, 60.0) == before
        assert [bytes(vm.get_block(block_id)) for block_id in ids] == slow_before
        more = build_chain(vm, 2, seed=8)
        assert vm.get_ancestors(more[-1], 100, MAX_CONTAINERS_LEN, 60.0)[2:] == before
