"""Limits of the batched protocol under hostile arguments: bad budgets and block IDs are
``ValueError``, unknown IDs give ``[]``, answers never exceed the budget, walks always end
(even round a cyclic chain), and batches beyond ``MAX_PARSE_BATCH`` are refused before any
VM is called."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from vmstack import BlockNotFound, InvalidBlock, SimClock, batched_parse_block, get_ancestors
from vmstack.batching import (
    CONTAINER_LEN_OVERHEAD,
    MAX_CONTAINERS_LEN,
    MAX_PARSE_BATCH,
    AncestorBudget,
    serial_get_ancestors,
    walk_ancestors,
)
from vmstack.conformance.doubles import BatchedMemoryVM, MemoryVM, memory_vm
from vmstack.interfaces import ChainVM, iter_layers
from vmstack.stack import wrap_layers
from vmstack.wrappers.proposer import ProposerVM

#: Hundreds of stacks driven to their limits: the full suite runs them.
pytestmark = pytest.mark.thorough

CHAIN = 30


def pass_through(inner: ChainVM) -> ChainVM:
    """``inner`` under a metered and a traced layer."""
    return wrap_layers(inner, name="C", tracer=NoOpTracer(), registry=CollectorRegistry())


def never_forking(inner: ChainVM) -> ChainVM:
    """``inner`` under a ProposerVM that never forks (a pure pass-through of pre-fork blocks)."""
    return ProposerVM(inner, fork_time=math.inf, chain_id=1)


STACKS: dict[str, Callable[[ChainVM], ChainVM]] = {
    "bare": lambda vm: vm,
    "traced+metered": pass_through,
    "proposer": never_forking,
    "traced+proposer": lambda vm: pass_through(never_forking(pass_through(vm))),
}


@pytest.fixture(params=[True, False], ids=["inner batches", "inner does not batch"])
def inner(request: pytest.FixtureRequest) -> MemoryVM:
    return memory_vm(batching=request.param, blocks=CHAIN)


@pytest.fixture(params=list(STACKS))
def stack(request: pytest.FixtureRequest, inner: MemoryVM) -> ChainVM:
    return STACKS[request.param](inner)


def chain_bytes(vm: MemoryVM) -> list[bytes]:
    """The accepted chain of ``vm``, newest first, as bytes."""
    out: list[bytes] = []
    block_id = vm.last_accepted()
    while True:
        try:
            block = vm.get_block(block_id)
        except BlockNotFound:
            return out
        out.append(bytes(block))
        block_id = block.parent_id


def oracle(chain: Sequence[bytes], num: int, size: int) -> list[bytes]:
    """What rule 4 admits from ``chain`` (newest first) with no time limit, written plainly."""
    answer: list[bytes] = []
    total = 0
    for block in chain:
        cost = len(block) + CONTAINER_LEN_OVERHEAD
        if answer and (len(answer) >= num or total + cost > size):
            break
        answer.append(block)
        total += cost
    return answer


# --- budgets ------------------------------------------------------------------------------


@pytest.mark.parametrize("num", [0, -1, -(2**70), True, 2.0, "5", None])
def test_bad_block_counts_are_value_errors(stack: ChainVM, inner: MemoryVM, num: Any) -> None:
    """A block count below 1 or not an int is ValueError, and no VM is asked anything."""
    tip = inner.last_accepted()
    inner.calls.clear()
    with pytest.raises(ValueError):
        get_ancestors(stack, tip, max_blocks_num=num)
    assert inner.calls == []


@pytest.mark.parametrize("size", [-1, -(2**70), 1.5, "big", None])
def test_bad_sizes_are_value_errors(stack: ChainVM, inner: MemoryVM, size: Any) -> None:
    """A negative or non-int size budget is ValueError before any VM is asked."""
    tip = inner.last_accepted()
    inner.calls.clear()
    with pytest.raises(ValueError):
        get_ancestors(stack, tip, max_blocks_size=size)
    assert inner.calls == []


@pytest.mark.parametrize("seconds", [math.nan, -math.inf, -0.001, "0.05", None, b"1"])
def test_bad_times_are_value_errors(stack: ChainVM, inner: MemoryVM, seconds: Any) -> None:
    """NaN, a negative time or a time that is not a number is ValueError before any VM call."""
    tip = inner.last_accepted()
    inner.calls.clear()
    with pytest.raises(ValueError):
        get_ancestors(stack, tip, max_retrieval_time=seconds)
    assert inner.calls == []


def test_huge_limits_give_the_whole_chain(stack: ChainVM, inner: MemoryVM) -> None:
    """Limits far beyond the chain (2**62 blocks and bytes, infinite time) give the whole
    chain once, ending at genesis, batched and serial alike."""
    chain = chain_bytes(inner)
    tip = inner.last_accepted()
    limits: dict[str, Any] = {
        "max_blocks_num": 2**62,
        "max_blocks_size": 2**62,
        "max_retrieval_time": math.inf,
    }
    assert get_ancestors(stack, tip, **limits) == chain
    assert serial_get_ancestors(stack, tip, **limits) == chain
    assert len(chain) == CHAIN + 1


@pytest.mark.parametrize(
    "limits",
    [
        {"max_blocks_num": 1},
        {"max_blocks_size": 0},
        {"max_retrieval_time": 0.0},
    ],
    ids=["one block", "zero bytes", "zero seconds"],
)
def test_smallest_budgets_give_exactly_the_first_block(
    stack: ChainVM, inner: MemoryVM, limits: dict[str, Any]
) -> None:
    """A budget of one block, zero bytes or zero seconds still answers the requested block
    (the first block is always included), and nothing more."""
    tip = inner.last_accepted()
    clock = SimClock(100.0)
    assert get_ancestors(stack, tip, clock=clock, **limits) == [bytes(inner.get_block(tip))]


@settings(max_examples=60, deadline=None)
@given(
    num=st.integers(1, 40),
    size=st.integers(0, 3_000),
    name=st.sampled_from(list(STACKS)),
    batching=st.booleans(),
    start=st.integers(0, CHAIN),
)
def test_answers_never_exceed_the_budget(
    num: int, size: int, name: str, batching: bool, start: int
) -> None:
    """For any count and size, batched and serial answers equal the plain rule-4 prefix of
    the chain: never more blocks, never more bytes than allowed beyond the first block."""
    vm = memory_vm(batching=batching, blocks=CHAIN)
    top = STACKS[name](vm)
    chain = chain_bytes(vm)[CHAIN - start :]
    block_id = hashlib.sha256(chain[0]).digest()
    expected = oracle(chain, num, size)
    for answer in (
        get_ancestors(
            top, block_id, max_blocks_num=num, max_blocks_size=size, max_retrieval_time=math.inf
        ),
        serial_get_ancestors(
            top, block_id, max_blocks_num=num, max_blocks_size=size, max_retrieval_time=math.inf
        ),
    ):
        assert answer == expected
        assert 1 <= len(answer) <= num
        assert len(answer) == 1 or sum(len(b) + CONTAINER_LEN_OVERHEAD for b in answer) <= size


# --- block IDs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "block_id",
    [
        b"",
        b"\x01" * 31,
        b"\x01" * 33,
        b"\x01" * 4096,
        "a" * 32,
        7,
        None,
        [1] * 32,
        bytearray(31),
    ],
    ids=["empty", "31 bytes", "33 bytes", "4 KiB", "str", "int", "None", "list", "short bytearray"],
)
def test_malformed_block_ids_are_value_errors(
    stack: ChainVM, inner: MemoryVM, block_id: Any
) -> None:
    """An ID that is not 32 bytes is ValueError from both engine helpers, before any call."""
    inner.calls.clear()
    with pytest.raises(ValueError):
        get_ancestors(stack, block_id)
    with pytest.raises(ValueError):
        serial_get_ancestors(stack, block_id)
    assert inner.calls == []


def test_unknown_block_ids_give_empty_answers(stack: ChainVM) -> None:
    """A well-formed ID the stack does not have gives [], batched and serial."""
    for block_id in (bytes(32), b"\xff" * 32, hashlib.sha256(b"nobody").digest()):
        assert get_ancestors(stack, block_id) == []
        assert serial_get_ancestors(stack, block_id) == []


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_buffer_block_ids_are_taken_as_bytes(
    stack: ChainVM, inner: MemoryVM, kind: Callable[[bytes], Any]
) -> None:
    """A 32-byte bytearray or memoryview ID gets the same answer as the bytes ID."""
    tip = inner.last_accepted()
    assert get_ancestors(stack, kind(tip)) == get_ancestors(stack, tip)


# --- walks that could run forever ---------------------------------------------------------


class RingBlock:
    """A block of :class:`RingVM`: fixed bytes, and a parent that leads back round the ring."""

    def __init__(self, block_id: bytes, parent_id: bytes, height: int, data: bytes) -> None:
        self.id = block_id
        self.parent_id = parent_id
        self.height = height
        self.timestamp = height
        self._data = data

    def __bytes__(self) -> bytes:
        return self._data

    def verify(self) -> None:
        """Nothing to check."""

    def accept(self) -> None:
        """Nothing to record."""

    def reject(self) -> None:
        """Nothing to forget."""


class RingVM:
    """A broken VM whose chain is a cycle: every block's parent chain comes back to it.

    A hash-linked chain cannot do this; a buggy or hostile VM can, and every walk over it
    must still end within its budget.
    """

    batching = False

    def __init__(self, length: int = 5, block_len: int = 100) -> None:
        ids = [hashlib.sha256(b"ring %d" % i).digest() for i in range(length)]
        self.blocks = {
            ids[i]: RingBlock(ids[i], ids[(i + 1) % length], length - i, bytes([i]) * block_len)
            for i in range(length)
        }
        self.fetches = 0
        self.first = ids[0]

    def get_block(self, block_id: bytes) -> RingBlock:
        self.fetches += 1
        try:
            return self.blocks[block_id]
        except KeyError:
            raise BlockNotFound(block_id.hex()) from None

    def parse_block(self, data: bytes) -> RingBlock:
        raise InvalidBlock("a ring VM parses nothing")

    def build_block(self) -> RingBlock:
        raise InvalidBlock("a ring VM builds nothing")

    def set_preference(self, block_id: bytes) -> None:
        self.get_block(block_id)

    def last_accepted(self) -> bytes:
        return self.first

    def get_block_id_at_height(self, height: int) -> bytes:
        raise BlockNotFound(str(height))


class BatchedRingVM(RingVM):
    """:class:`RingVM` answering ``get_ancestors`` itself with the shared walk."""

    batching = True

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        budget = AncestorBudget(max_blocks_num, max_blocks_size, max_retrieval_time)

        def fetch(wanted: bytes) -> tuple[bytes, bytes]:
            block = self.get_block(wanted)
            return bytes(block), block.parent_id

        return walk_ancestors(fetch, block_id, budget).blocks

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[RingBlock]:
        raise InvalidBlock("a ring VM parses nothing", index=0)


@pytest.mark.parametrize("ring_type", [RingVM, BatchedRingVM], ids=["serial", "batched"])
@pytest.mark.parametrize("name", list(STACKS))
def test_a_cyclic_chain_ends_at_the_block_count(ring_type: type[RingVM], name: str) -> None:
    """Round a cyclic chain with no size or time limit, the walk stops at max_blocks_num."""
    ring = ring_type()
    top = STACKS[name](ring)
    answer = get_ancestors(
        top, ring.first, max_blocks_num=57, max_blocks_size=2**62, max_retrieval_time=math.inf
    )
    assert len(answer) == 57
    assert answer[:5] == answer[5:10]
    assert ring.fetches <= 58


@pytest.mark.parametrize("ring_type", [RingVM, BatchedRingVM], ids=["serial", "batched"])
def test_a_cyclic_chain_ends_at_the_message_size(ring_type: type[RingVM]) -> None:
    """With a count of 2**62 and no time limit, the default size budget (one Ancestors
    message) ends the walk round a cycle after MAX_CONTAINERS_LEN // (len + 4) blocks."""
    ring = ring_type()
    top = pass_through(never_forking(ring))
    answer = get_ancestors(top, ring.first, max_blocks_num=2**62, max_retrieval_time=math.inf)
    assert len(answer) == MAX_CONTAINERS_LEN // (100 + CONTAINER_LEN_OVERHEAD)


def test_a_cyclic_chain_ends_at_the_time_budget() -> None:
    """With no count or size limit, a clock that moves ends the walk round a cycle."""
    clock = SimClock(0.0)
    ring = RingVM()
    original = ring.get_block

    def slow_get_block(block_id: bytes) -> RingBlock:
        clock.advance(0.001)
        return original(block_id)

    ring.get_block = slow_get_block  # type: ignore[method-assign]
    answer = get_ancestors(
        ring,
        ring.first,
        max_blocks_num=2**62,
        max_blocks_size=2**62,
        max_retrieval_time=0.05,
        clock=clock,
    )
    assert 45 <= len(answer) <= 51


# --- parse batches ------------------------------------------------------------------------


class HugeSequence(Sequence[bytes]):
    """A lazy sequence claiming ``length`` elements, counting the elements read."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.reads = 0

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: Any) -> Any:
        self.reads += 1
        if isinstance(index, slice):
            raise TypeError("no slices")
        if not 0 <= index < self.length:
            raise IndexError(index)
        return b""

    def __iter__(self) -> Iterator[bytes]:
        for _ in range(self.length):
            self.reads += 1
            yield b""


def test_a_batch_over_the_maximum_is_refused_before_any_call(
    stack: ChainVM, inner: MemoryVM
) -> None:
    """MAX_PARSE_BATCH + 1 elements is ValueError naming the maximum; no VM is called."""
    inner.calls.clear()
    with pytest.raises(ValueError, match=str(MAX_PARSE_BATCH)):
        batched_parse_block(stack, [b""] * (MAX_PARSE_BATCH + 1))
    assert inner.calls == []


@pytest.mark.parametrize("name", ["traced+metered", "traced+proposer"])
def test_a_batch_at_the_maximum_is_parsed(name: str) -> None:
    """Exactly MAX_PARSE_BATCH elements is a batch like any other: here the first element is
    invalid, so the answer is InvalidBlock naming index 0."""
    stack = STACKS[name](memory_vm(batching=True, blocks=2))
    with pytest.raises(InvalidBlock) as caught:
        batched_parse_block(stack, [b""] * MAX_PARSE_BATCH)
    assert caught.value.index == 0


@pytest.mark.parametrize("length", [MAX_PARSE_BATCH + 1, 10**7, 2**62])
def test_a_huge_lazy_batch_is_refused_without_reading_it(
    stack: ChainVM, inner: MemoryVM, length: int
) -> None:
    """A lazy sequence claiming more than MAX_PARSE_BATCH elements (up to 2**62) is refused
    from its length alone: no element is read and no VM is called."""
    batch = HugeSequence(length)
    inner.calls.clear()
    with pytest.raises(ValueError, match=str(MAX_PARSE_BATCH)):
        batched_parse_block(stack, batch)
    assert batch.reads == 0
    assert inner.calls == []


def test_proposer_refuses_an_oversized_batch_itself() -> None:
    """ProposerVM.batched_parse_block, called directly, refuses an oversized batch before
    reaching the inner VM."""
    vm = memory_vm(batching=True, blocks=2)
    vm.calls.clear()
    with pytest.raises(ValueError, match=str(MAX_PARSE_BATCH)):
        never_forking(vm).batched_parse_block(  # type: ignore[attr-defined]
            [b""] * (MAX_PARSE_BATCH + 1)
        )
    assert vm.calls == []


def test_parse_failures_name_their_index(stack: ChainVM, inner: MemoryVM) -> None:
    """A batch with one corrupt element fails as a whole with InvalidBlock at its index."""
    good = [bytes(inner.get_block(inner.get_block_id_at_height(h))) for h in (1, 2, 3)]
    bad = bytearray(good[1])
    bad[0] ^= 0xFF
    with pytest.raises(InvalidBlock) as caught:
        batched_parse_block(stack, [good[0], bytes(bad), good[2]])
    assert caught.value.index == 1


def test_doubles_record_no_work_for_refused_calls() -> None:
    """The doubles used above really record calls (so the empty call lists mean something)."""
    vm = BatchedMemoryVM()
    get_ancestors(vm, vm.last_accepted())
    batched_parse_block(vm, [bytes(vm.get_block(vm.last_accepted()))])
    assert [c.method for c in vm.calls][:2] == ["last_accepted", "get_ancestors"]
    assert "batched_parse_block" in [c.method for c in vm.calls]


# --- the real stack -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_stack() -> tuple[ChainVM, list[bytes]]:
    """The full stack from build_stack over a chain past the transition and the fork, and
    the chain's bytes from the head, newest first."""
    from tests.reliability.stacks import START, chain_of, full_stack, grow
    from vmstack import SimClock
    from vmstack.store import MemoryStore

    clock = SimClock(START)
    vm = full_stack(MemoryStore(), clock)
    ids = grow(vm, clock, 13)
    return vm, chain_of(vm, ids[-1])


@pytest.mark.parametrize(
    "limits",
    [
        {"max_blocks_num": 0},
        {"max_blocks_num": -5},
        {"max_blocks_size": -1},
        {"max_retrieval_time": math.nan},
        {"max_retrieval_time": -1.0},
    ],
    ids=["zero count", "negative count", "negative size", "NaN time", "negative time"],
)
def test_bad_limits_through_the_full_stack(
    real_stack: tuple[ChainVM, list[bytes]], limits: dict[str, Any]
) -> None:
    """Bad limits are ValueError from the engine helpers and from the top layer itself."""
    vm, _ = real_stack
    head = vm.last_accepted()
    with pytest.raises(ValueError):
        get_ancestors(vm, head, **limits)
    with pytest.raises(ValueError):
        serial_get_ancestors(vm, head, **limits)
    arguments = {"max_blocks_num": 10, "max_blocks_size": 10_000, "max_retrieval_time": 1.0}
    arguments.update(limits)
    with pytest.raises(ValueError):
        vm.get_ancestors(head, **arguments)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "block_id",
    [b"\x01" * 31, b"\x01" * 33, "a" * 32, None, 12],
    ids=["31 bytes", "33 bytes", "str", "None", "int"],
)
def test_malformed_ids_through_the_full_stack(
    real_stack: tuple[ChainVM, list[bytes]], block_id: Any
) -> None:
    """Malformed IDs are ValueError from the helpers, the top layer's get_ancestors and the
    bottom VM's get_block, never an error from inside a layer."""
    vm, _ = real_stack
    with pytest.raises(ValueError):
        get_ancestors(vm, block_id)
    with pytest.raises(ValueError):
        vm.get_ancestors(block_id, 10, 10_000, 1.0)  # type: ignore[attr-defined]
    *_, bottom = iter_layers(vm)
    with pytest.raises(ValueError):
        cast(ChainVM, bottom).get_block(block_id)


def test_huge_and_tiny_limits_through_the_full_stack(
    real_stack: tuple[ChainVM, list[bytes]],
) -> None:
    """Huge limits give the whole chain once; one block, zero bytes or zero seconds give the
    head alone; unknown IDs give []; batched and serial agree throughout."""
    vm, chain = real_stack
    head = vm.last_accepted()
    huge: dict[str, Any] = {
        "max_blocks_num": 2**62,
        "max_blocks_size": 2**62,
        "max_retrieval_time": math.inf,
    }
    assert get_ancestors(vm, head, **huge) == serial_get_ancestors(vm, head, **huge) == chain
    for tiny in ({"max_blocks_num": 1}, {"max_blocks_size": 0}, {"max_retrieval_time": 0.0}):
        assert (
            get_ancestors(vm, head, **tiny) == serial_get_ancestors(vm, head, **tiny) == chain[:1]
        )
    for size in (len(chain[0]) + 4, len(chain[0]) + len(chain[1]) + 8):
        expected = oracle(chain, 10**6, size)
        assert get_ancestors(vm, head, max_blocks_size=size) == expected
    assert get_ancestors(vm, bytes(32)) == serial_get_ancestors(vm, bytes(32)) == []
