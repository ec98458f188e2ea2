"""Tests for every numbered rule of ARCHITECTURE.md, section 3, through the engine helpers."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vmstack
from vmstack import (
    CONTAINER_LEN_OVERHEAD,
    BatchingNotImplemented,
    BlockNotFound,
    InvalidBlock,
    SimClock,
    StoreCorrupted,
    batched_parse_block,
    get_ancestors,
)
from vmstack.batching import (
    DEFAULT_MAX_RETRIEVAL_TIME,
    MAX_PARSE_BATCH,
    AncestorBudget,
    AncestorWalk,
    WalkEnd,
    walk_ancestors,
)
from vmstack.conformance import GENESIS_PARENT, BatchedMemoryVM, MemoryVM, memory_vm

#: Where the simulated clocks start.
START = 1_000.0

BATCHING = pytest.mark.parametrize("batching", [True, False], ids=["batches", "serial"])


class RefusingVM(MemoryVM):
    """A VM that has the batched methods but refuses them, as a layer over a serial VM does."""

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        self._record("get_ancestors", block_id)
        raise BatchingNotImplemented("refused")

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[vmstack.Block]:
        self._record("batched_parse_block", tuple(blocks))
        raise BatchingNotImplemented("refused")


def chain(batching: bool, blocks: int = 10) -> tuple[MemoryVM, list[bytes]]:
    """A memory VM with ``blocks`` blocks above genesis; IDs oldest first, genesis included."""
    vm = memory_vm(batching=batching)
    ids = [vm.last_accepted(), *vm.extend_chain(blocks)]
    vm.calls.clear()
    return vm, ids


def block_len(vm: MemoryVM, block_id: bytes) -> int:
    return len(bytes(vm._served(block_id)))


@BATCHING
def test_requested_block_first_then_ancestors(batching: bool) -> None:
    """Rule 3: the answer starts at the requested block and walks down to genesis."""
    vm, ids = chain(batching)
    answer = get_ancestors(vm, ids[7])
    assert answer == [bytes(vm._served(block_id)) for block_id in reversed(ids[:8])]


def test_batched_method_is_used_once_when_offered() -> None:
    """Rule 1: a batching VM answers in one call, with no per-block calls."""
    vm, ids = chain(True)
    get_ancestors(vm, ids[-1])
    assert [call.method for call in vm.calls] == ["get_ancestors"]


def test_refusal_falls_back_to_one_get_block_per_block() -> None:
    """Rule 1: BatchingNotImplemented, and only it, triggers the serial walk."""
    vm = RefusingVM()
    ids = [vm.last_accepted(), *vm.extend_chain(5)]
    vm.calls.clear()
    answer = get_ancestors(vm, ids[-1])
    assert len(answer) == 6
    assert [call.method for call in vm.calls] == ["get_ancestors"] + ["get_block"] * 7


@pytest.mark.parametrize(
    "error", [BlockNotFound("gone"), StoreCorrupted("bad"), RuntimeError("boom")]
)
def test_other_errors_from_batched_method_propagate(error: Exception) -> None:
    """Rule 1: any error but BatchingNotImplemented propagates unchanged, with no fallback."""
    vm, ids = chain(True)
    vm.fail_next("get_ancestors", error)
    with pytest.raises(type(error)) as raised:
        get_ancestors(vm, ids[-1])
    assert raised.value is error
    assert vm.calls_to("get_block") == []


@BATCHING
def test_unknown_first_block_gives_empty_answer(batching: bool) -> None:
    """Rule 2: BlockNotFound on the first block means "I don't have it": []."""
    vm, _ = chain(batching)
    assert get_ancestors(vm, b"\x07" * 32) == []


@BATCHING
def test_other_error_on_first_block_propagates(batching: bool) -> None:
    """Rule 2: any other error on the first block propagates as it is."""
    vm, ids = chain(batching)
    error = StoreCorrupted("flipped byte")
    vm.fail_block(ids[-1], error)
    with pytest.raises(StoreCorrupted) as raised:
        get_ancestors(vm, ids[-1])
    assert raised.value is error


@BATCHING
def test_block_not_found_mid_walk_ends_quietly(batching: bool) -> None:
    """Rule 2: a missing ancestor ends the walk with the partial answer."""
    vm, ids = chain(batching)
    vm.fail_block(ids[6], BlockNotFound("pruned"))
    assert len(get_ancestors(vm, ids[10])) == 4


@BATCHING
def test_other_error_mid_walk_ends_with_partial_answer_and_log(
    batching: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Rule 2: another mid-walk error ends the walk, is logged, and the partial answer stands."""
    vm, ids = chain(batching)
    vm.fail_block(ids[8], StoreCorrupted("truncated body"))
    with caplog.at_level("WARNING", logger="vmstack.batching"):
        answer = get_ancestors(vm, ids[10])
    assert len(answer) == 2
    assert any("ancestors walk stopped" in record.message for record in caplog.records)


@BATCHING
def test_first_block_included_even_if_alone_over_size(batching: bool) -> None:
    """Rule 4: the first block is always included, whatever max_blocks_size says."""
    vm, ids = chain(batching)
    assert len(get_ancestors(vm, ids[-1], max_blocks_size=0)) == 1


@BATCHING
def test_size_exactly_at_budget_is_allowed_and_one_byte_less_is_not(batching: bool) -> None:
    """Rule 4: a total equal to max_blocks_size (len + 4 per block) fits; one byte over does not."""
    vm, ids = chain(batching)
    exact = sum(block_len(vm, block_id) + CONTAINER_LEN_OVERHEAD for block_id in ids[-3:])
    assert len(get_ancestors(vm, ids[-1], max_blocks_size=exact)) == 3
    assert len(get_ancestors(vm, ids[-1], max_blocks_size=exact - 1)) == 2


@BATCHING
@pytest.mark.parametrize("max_blocks_num", [1, 2, 5, 11, 50])
def test_max_blocks_num_is_honoured(batching: bool, max_blocks_num: int) -> None:
    """Rule 4: at most max_blocks_num blocks, fewer only when the chain ends."""
    vm, ids = chain(batching)
    answer = get_ancestors(vm, ids[-1], max_blocks_num=max_blocks_num)
    assert len(answer) == min(max_blocks_num, len(ids))


class SteppingClock:
    """A clock that moves by ``step`` every time it is read, counting the reads."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        value = self.now
        self.now += self.step
        return value


def test_time_budget_is_checked_before_each_parent_fetch() -> None:
    """Rule 4: with a clock moving 1 s per read and a 3.5 s budget, three parents are fetched."""
    vm, ids = chain(False)
    clock = SteppingClock(1.0)
    answer = get_ancestors(vm, ids[-1], max_retrieval_time=3.5, clock=clock)
    # reads: start (t=0), then checks at t=1, 2, 3 pass and t=4 stops the walk.
    assert len(answer) == 4
    assert len(vm.calls_to("get_block")) == 4


def test_time_is_never_checked_before_the_first_block() -> None:
    """Rule 4: a zero time budget still returns the first block, and only it."""
    vm, ids = chain(False)
    clock = SimClock(0.0)
    assert len(get_ancestors(vm, ids[-1], max_retrieval_time=0.0, clock=clock)) == 1


def test_time_budget_on_simulated_time() -> None:
    """Rule 4: a SimClock that never advances never exhausts a positive budget."""
    vm, ids = chain(False)
    assert len(get_ancestors(vm, ids[-1], max_retrieval_time=1e-9, clock=SimClock())) == 11


@pytest.mark.parametrize(
    "limits",
    [
        {"max_blocks_num": 0},
        {"max_blocks_num": -1},
        {"max_blocks_size": -1},
        {"max_retrieval_time": -0.1},
        {"max_retrieval_time": float("nan")},
        {"max_blocks_num": 1.5},
        {"max_blocks_num": True},
    ],
)
@BATCHING
def test_bad_limits_raise_value_error(batching: bool, limits: dict[str, float]) -> None:
    """Rule 4: max_blocks_num < 1, a negative size or time (or a non-number) is a ValueError."""
    vm, ids = chain(batching)
    with pytest.raises(ValueError):
        get_ancestors(vm, ids[-1], **limits)  # type: ignore[arg-type]
    assert vm.calls == []


@pytest.mark.parametrize("block_id", [b"", b"\x01" * 31, b"\x01" * 33, "ab" * 32, 7])
def test_malformed_block_id_raises_value_error(block_id: object) -> None:
    """A block ID that is not 32 bytes is refused before any VM call."""
    vm, _ = chain(True)
    with pytest.raises(ValueError, match="32 bytes"):
        get_ancestors(vm, block_id)  # type: ignore[arg-type]
    assert vm.calls == []


@settings(max_examples=60, deadline=None)
@given(
    length=st.integers(1, 25),
    start=st.integers(0, 25),
    num=st.integers(1, 30),
    size=st.integers(0, 2000),
    fetch_cost=st.sampled_from([0.0, 0.004, 0.02]),
)
def test_batched_answer_equals_fallback_answer(
    length: int, start: int, num: int, size: int, fetch_cost: float
) -> None:
    """Rule 6: for the same chain, the batched answer equals the fallback, byte for byte,
    the retrieval-time budget included.

    Both VMs run on simulated clocks where each block read costs ``fetch_cost`` seconds, so
    the default budget (``DEFAULT_MAX_RETRIEVAL_TIME``) cuts both walks at the same block
    whatever the machine's load; with no cost it never cuts."""
    batched = memory_vm(batching=True, clock=SimClock(START), fetch_cost=fetch_cost)
    batched.extend_chain(length)
    serial = RefusingVM(clock=SimClock(START), fetch_cost=fetch_cost)
    serial.extend_chain(length)
    block_id = batched._by_height[min(start, length)]
    limits: dict[str, Any] = {"max_blocks_num": num, "max_blocks_size": size}
    answer = get_ancestors(batched, block_id, **limits)
    assert answer == get_ancestors(serial, block_id, **limits)
    assert len(answer) <= num
    assert len(answer) == 1 or sum(len(b) + 4 for b in answer) <= size
    unbounded = get_ancestors(batched, block_id, **limits, max_retrieval_time=math.inf)
    if fetch_cost:
        # The budget cuts the walk short of the other limits, never past them.
        assert answer == unbounded[: len(answer)]
        assert len(answer) <= DEFAULT_MAX_RETRIEVAL_TIME / fetch_cost + 1
    else:
        # Simulated time stands still: the budget never cuts, whatever the load.
        assert answer == unbounded


@BATCHING
def test_rejected_blocks_are_not_served(batching: bool) -> None:
    """Rule 9: a rejected block is not served on either path."""
    vm, ids = chain(batching)
    block = vm.build_block()
    block.verify()
    assert len(get_ancestors(vm, block.id)) == len(ids) + 1
    block.reject()
    assert get_ancestors(vm, block.id) == []


@BATCHING
def test_processing_blocks_are_served(batching: bool) -> None:
    """Rule 9: a verified, undecided block is served, with its accepted ancestors."""
    vm, ids = chain(batching)
    block = vm.build_block()
    assert get_ancestors(vm, block.id) == []
    block.verify()
    assert get_ancestors(vm, block.id)[1] == bytes(vm._served(ids[-1]))


def encoded_chain(blocks: int) -> list[bytes]:
    source = memory_vm(blocks=blocks)
    return [bytes(source._served(source._by_height[h])) for h in range(1, blocks + 1)]


@BATCHING
def test_batched_parse_keeps_input_order(batching: bool) -> None:
    """Rule 7: the output order is the input order, whatever the chain order."""
    data = encoded_chain(8)
    shuffled = [data[i] for i in (5, 0, 7, 3, 1, 6, 2, 4)]
    vm = memory_vm(batching=batching)
    assert [bytes(block) for block in batched_parse_block(vm, shuffled)] == shuffled


@BATCHING
def test_batched_parse_of_nothing_is_empty(batching: bool) -> None:
    """Rule 7: an empty batch parses to [] without calling the VM."""
    vm = memory_vm(batching=batching)
    assert batched_parse_block(vm, []) == []
    assert vm.calls == []


@BATCHING
@pytest.mark.parametrize("bad_index", [0, 3, 5])
def test_batched_parse_names_the_first_bad_index(batching: bool, bad_index: int) -> None:
    """Rule 7: one bad element fails the whole batch with InvalidBlock naming its index."""
    data = encoded_chain(6)
    data[bad_index] = b"not a block"
    vm = memory_vm(batching=batching)
    with pytest.raises(InvalidBlock) as raised:
        batched_parse_block(vm, data)
    assert raised.value.index == bad_index
    assert f"block {bad_index} of the batch" in str(raised.value)


def test_batched_parse_uses_one_call_when_offered() -> None:
    """Rule 1 for parsing: a batching VM parses the batch in one call."""
    vm = memory_vm(batching=True)
    batched_parse_block(vm, encoded_chain(5))
    assert [call.method for call in vm.calls] == ["batched_parse_block"]


def test_batched_parse_refusal_falls_back_per_element() -> None:
    """Rule 1 for parsing: BatchingNotImplemented falls back to parse_block per element."""
    vm = RefusingVM()
    batched_parse_block(vm, encoded_chain(4))

    assert [call.method for call in vm.calls] == ["batched_parse_block"] + ["parse_block"] * 4


def test_batched_parse_other_errors_propagate() -> None:
    """Rule 1 for parsing: an error other than the sentinel is not a reason to fall back."""
    vm = memory_vm(batching=True)
    error = RuntimeError("disk on fire")
    vm.fail_next("batched_parse_block", error)
    with pytest.raises(RuntimeError) as raised:
        batched_parse_block(vm, encoded_chain(2))
    assert raised.value is error
    assert vm.calls_to("parse_block") == []


def test_batched_parse_refuses_an_absurd_batch() -> None:
    """A batch larger than one Ancestors message could carry is refused up front."""
    vm = memory_vm(batching=True)
    with pytest.raises(ValueError, match="at most"):
        batched_parse_block(vm, [b""] * (MAX_PARSE_BATCH + 1))
    assert vm.calls == []


def test_budget_extend_stops_at_a_first_block_that_does_not_fit() -> None:
    """Rule 5: blocks handed up from a layer below are cut to the whole answer's budget."""
    budget = AncestorBudget(10, 30, 1.0, clock=SimClock())
    budget.admit(b"x" * 10)
    budget.extend([b"y" * 17, b"z"])
    assert budget.blocks == [b"x" * 10]
    assert budget.remaining() == (9, 16, 1.0)


def test_walk_continues_a_partial_answer_as_mid_walk() -> None:
    """A walk handed a non-empty budget treats its first fetch as mid-walk (no [] reset)."""
    vm, ids = chain(False)
    budget = AncestorBudget(3, 10_000, 1.0, clock=SimClock())
    budget.admit(b"from the layer above")
    answer = walk_ancestors(vm._fetch, ids[5], budget).blocks
    assert answer[0] == b"from the layer above"
    assert len(answer) == 3
    assert walk_ancestors(vm._fetch, b"\x09" * 32, budget).blocks == answer


def test_genesis_parent_ends_the_walk() -> None:
    """The walk stops quietly below genesis, whose parent is the zero ID."""
    vm, ids = chain(True, blocks=0)
    assert get_ancestors(vm, ids[0]) == [bytes(vm._served(ids[0]))]
    assert vm._served(ids[0]).parent_id == GENESIS_PARENT


def test_memory_vm_without_batching_is_not_a_batched_vm() -> None:
    """Capability is structural: the serial double has no batched methods at all."""
    assert not isinstance(memory_vm(batching=False), vmstack.BatchedChainVM)
    assert isinstance(memory_vm(batching=True), vmstack.BatchedChainVM)
    assert vmstack.supports_batching(BatchedMemoryVM())
    assert not vmstack.supports_batching(MemoryVM())


def test_a_vm_offering_only_get_ancestors_has_its_answer_used() -> None:
    """Rule 1 per method: a VM with get_ancestors alone answers it itself."""

    class OnlyAncestors(MemoryVM):
        def get_ancestors(
            self,
            block_id: bytes,
            max_blocks_num: int,
            max_blocks_size: int,
            max_retrieval_time: float,
        ) -> list[bytes]:
            return [b"answered in one call"]

    vm = OnlyAncestors()
    ids = vm.extend_chain(3)
    assert get_ancestors(vm, ids[-1]) == [b"answered in one call"]
    assert batched_parse_block(vm, encoded_chain(2))[0].height == 1


def test_capability_is_judged_per_instance() -> None:
    """A layer that copies its inner VM's batched methods per instance is judged per instance."""

    class CopyingLayer:
        def __init__(self, inner: MemoryVM) -> None:
            self.inner = inner
            if isinstance(inner, BatchedMemoryVM):
                self.get_ancestors = inner.get_ancestors
                self.batched_parse_block = inner.batched_parse_block

        def get_block(self, block_id: bytes) -> vmstack.Block:
            return self.inner.get_block(block_id)

    batching = CopyingLayer(memory_vm(batching=True, blocks=3))
    serial = CopyingLayer(memory_vm(batching=False, blocks=3))
    assert vmstack.supports_batching(batching) and not vmstack.supports_batching(serial)
    tip = serial.inner.last_accepted()
    assert len(get_ancestors(serial, tip)) == 4  # type: ignore[arg-type]


def test_a_layer_without_a_batching_attribute_takes_its_inner_vms_capability() -> None:
    """A pass-through layer that declares nothing batches exactly when the VM below does."""

    class Plain:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def get_ancestors(self, *args: object) -> list[bytes]:
            raise BatchingNotImplemented("below cannot")

        def batched_parse_block(self, blocks: Sequence[bytes]) -> list[vmstack.Block]:
            raise BatchingNotImplemented("below cannot")

    assert not vmstack.supports_batching(Plain(memory_vm(batching=False)))
    assert vmstack.supports_batching(Plain(memory_vm(batching=True)))
    assert vmstack.supports_batching(Plain(Plain(memory_vm(batching=True))))


@pytest.mark.parametrize("batching", [True, False])
def test_the_time_budget_runs_on_the_stacks_clock_whatever_the_path(batching: bool) -> None:
    """Without a clock argument the engine helpers measure the fallback walk's budget on the
    stack's own clock, as the batched path does: under a SimClock whose time moves with each
    block read, both paths stop at the same block."""
    from vmstack.batching import serial_get_ancestors, stack_clock
    from vmstack.clock import SimClock
    from vmstack.conformance import memory_vm

    clock = SimClock(0.0)
    vm = memory_vm(batching=batching, blocks=50, clock=clock, fetch_cost=1 / 64)
    assert stack_clock(vm) is clock
    tip = vm.last_accepted()
    answer = get_ancestors(vm, tip, max_retrieval_time=1 / 16)
    assert 2 <= len(answer) <= 7
    assert serial_get_ancestors(vm, tip, max_retrieval_time=1 / 16) == answer


# --- where a walk stops -----------------------------------------------------------------


def _linked(count: int) -> tuple[list[bytes], dict[bytes, tuple[bytes, bytes]]]:
    """``count`` blocks of 10 bytes, newest first, each the child of the next; the oldest
    one's parent is not served."""
    ids = [bytes([n + 1]) * 32 for n in range(count)]
    parents = [*ids[1:], GENESIS_PARENT]
    return ids, {
        block_id: (bytes([n]) * 10, parent)
        for n, (block_id, parent) in enumerate(zip(ids, parents, strict=True))
    }


def _fetch_from(
    blocks: dict[bytes, tuple[bytes, bytes]], failing: bytes | None = None
) -> Callable[[bytes], tuple[bytes, bytes]]:
    def fetch(block_id: bytes) -> tuple[bytes, bytes]:
        if block_id == failing:
            raise RuntimeError("disk on fire")
        try:
            return blocks[block_id]
        except KeyError:
            raise BlockNotFound(block_id.hex()) from None

    return fetch


def test_walk_says_which_missing_block_stopped_it() -> None:
    """A block the fetch does not serve ends the walk there, first block or mid-walk, and
    the result names it."""
    ids, blocks = _linked(5)
    missing = bytes(32 * [0xEE])
    walk = walk_ancestors(_fetch_from(blocks), missing, AncestorBudget(clock=SimClock()))
    assert walk == AncestorWalk([], missing, WalkEnd.NOT_SERVED)
    del blocks[ids[3]]
    walk = walk_ancestors(_fetch_from(blocks), ids[0], AncestorBudget(clock=SimClock()))
    assert (len(walk.blocks), walk.stopped_at, walk.reason) == (3, ids[3], WalkEnd.NOT_SERVED)
    _, whole = _linked(5)
    walk = walk_ancestors(_fetch_from(whole), ids[0], AncestorBudget(clock=SimClock()))
    assert (len(walk.blocks), walk.stopped_at, walk.reason) == (
        5,
        GENESIS_PARENT,
        WalkEnd.NOT_SERVED,
    )


@pytest.mark.parametrize(
    "budget, answered",
    [
        ((2, 10_000), 2),  # count
        ((10, 3 * 14), 3),  # size: three 10-byte blocks and their 4-byte prefixes
    ],
)
def test_walk_says_the_budget_stopped_it_and_where(budget: tuple[int, int], answered: int) -> None:
    """A full budget ends the walk at the first block it leaves out, whichever limit."""
    ids, blocks = _linked(6)
    walk = walk_ancestors(
        _fetch_from(blocks), ids[0], AncestorBudget(*budget, 1.0, clock=SimClock())
    )
    assert walk.blocks == [blocks[block_id][0] for block_id in ids[:answered]]
    assert (walk.stopped_at, walk.reason) == (ids[answered], WalkEnd.BUDGET)


def test_walk_says_a_failed_fetch_stopped_it() -> None:
    """Another error mid-walk ends the walk at that block, as FAILED."""
    ids, blocks = _linked(6)
    walk = walk_ancestors(
        _fetch_from(blocks, failing=ids[2]), ids[0], AncestorBudget(clock=SimClock())
    )
    assert (len(walk.blocks), walk.stopped_at, walk.reason) == (2, ids[2], WalkEnd.FAILED)
