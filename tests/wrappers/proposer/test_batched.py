"""The proposer layer's batched protocol, after avalanchego's proposervm batched_vm_test.go."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from opentelemetry.trace import NoOpTracer

from vmstack.batching import (
    CONTAINER_LEN_OVERHEAD,
    AncestorBudget,
    batched_parse_block,
    get_ancestors,
    serial_get_ancestors,
)
from vmstack.conformance import MemoryVM
from vmstack.errors import BatchingNotImplemented, InvalidBlock
from vmstack.interfaces import ChainVM
from vmstack.store import MemoryStore
from vmstack.wrappers import TracedVM
from vmstack.wrappers.proposer.batched import walk_own
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.state import ProposerState
from vmstack.wrappers.proposer.vm import ProposerVM

from . import grow, make_vm

FORK = 10.0
BIG = 10**6
HOUR = 3600.0


def _cost(blocks: list[bytes]) -> int:
    return sum(len(block) + CONTAINER_LEN_OVERHEAD for block in blocks)


def _traced(inner: MemoryVM) -> ChainVM:
    return TracedVM(inner, tracer=NoOpTracer(), name="C")


#: The layers a test may put under the proposer layer, over the memory VM.
BELOW: dict[str, tuple[bool, Callable[[MemoryVM], ChainVM] | None]] = {
    "batching": (True, None),
    "serial": (False, None),
    "traced-batching": (True, _traced),
    "traced-serial": (False, _traced),
}


def _stack(kind: str, fork_time: float) -> tuple[ProposerVM, MemoryVM, list[bytes]]:
    """A stack of ``kind`` with 3 pre-fork and, from FORK on, 3 post-fork blocks; returns
    the chain's bytes newest first (genesis last)."""
    batching, below = BELOW[kind]
    vm, inner, clock = make_vm(fork_time=fork_time, batching=batching, below=below)
    blocks = grow(vm, clock, 6, step=4)
    genesis = inner.get_block(inner.get_block_id_at_height(0))
    inner.calls.clear()
    return vm, inner, [bytes(block) for block in reversed(blocks)] + [bytes(genesis)]


# --- GetAncestors -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BELOW))
def test_get_ancestors_pre_fork_only(kind: str) -> None:
    """Before the fork the answer is the inner chain; an unknown ID gives []."""
    vm, _, chain = _stack(kind, math.inf)
    tip = vm.last_accepted()
    assert vm.get_ancestors(tip, 1000, BIG, HOUR) == chain
    first = vm.get_block_id_at_height(1)
    assert vm.get_ancestors(first, 1000, BIG, HOUR) == chain[-2:]
    assert vm.get_ancestors(bytes(32), 1000, BIG, HOUR) == []


@pytest.mark.parametrize("kind", sorted(BELOW))
def test_get_ancestors_post_fork_only(kind: str) -> None:
    """With the fork at genesis every block but genesis is the layer's own."""
    vm, inner, chain = _stack(kind, 0)
    tip = vm.last_accepted()
    assert all(vm.get_block(vm.get_block_id_at_height(h)).post_fork for h in range(1, 7))
    assert vm.get_ancestors(tip, 1000, BIG, HOUR) == chain
    assert vm.get_ancestors(vm.get_block_id_at_height(1), 1000, BIG, HOUR) == chain[-2:]
    assert vm.get_ancestors(bytes(32), 1000, BIG, HOUR) == []
    below_tip = vm.get_block(tip).inner.id
    assert vm.get_ancestors(below_tip, 1000, BIG, HOUR) == []
    assert inner.get_block(below_tip).height == 6


@pytest.mark.parametrize("kind", sorted(BELOW))
def test_get_ancestors_across_the_fork(kind: str) -> None:
    """Across the fork the answer is complete, and max_blocks_num may cut it on either side."""
    vm, inner, chain = _stack(kind, FORK)
    kinds = [vm.get_block(vm.get_block_id_at_height(h)).post_fork for h in range(1, 7)]
    assert kinds == [False, False, False, True, True, True]
    tip = vm.last_accepted()
    assert vm.get_ancestors(tip, 1000, BIG, HOUR) == chain
    inner.calls.clear()
    assert vm.get_ancestors(tip, 2, BIG, HOUR) == chain[:2]
    assert inner.calls == [], "a cut inside the post-fork part asks nothing below"
    assert vm.get_ancestors(tip, 5, BIG, HOUR) == chain[:5]
    pre_fork_tip = vm.get_block_id_at_height(3)
    assert vm.get_ancestors(pre_fork_tip, 3, BIG, HOUR) == chain[3:6]


def test_remaining_budget_goes_down_in_one_call() -> None:
    """The pre-fork part is one batched call with what is left of count and size."""
    vm, inner, chain = _stack("batching", FORK)
    tip = vm.last_accepted()
    vm.get_ancestors(tip, 5, BIG, HOUR)
    calls = inner.calls_to("get_ancestors")
    assert len(calls) == 1
    block_id, num, size, seconds = calls[0].args
    assert block_id == vm.get_block_id_at_height(3)
    assert (num, size) == (2, BIG - _cost(chain[:3]))
    assert 0 < seconds <= HOUR
    assert not inner.calls_to("get_block")


@pytest.mark.parametrize("kind", sorted(BELOW))
def test_size_budget_never_overshoots_at_the_fork(kind: str) -> None:
    """A size budget one byte short of the first pre-fork block stops at the fork boundary;
    the exact cost includes it (avalanchego's ``>=`` and overshoot are not copied)."""
    vm, _, chain = _stack(kind, FORK)
    tip = vm.last_accepted()
    with_first_pre_fork = _cost(chain[:4])
    assert vm.get_ancestors(tip, 1000, with_first_pre_fork, HOUR) == chain[:4]
    assert vm.get_ancestors(tip, 1000, with_first_pre_fork - 1, HOUR) == chain[:3]
    assert vm.get_ancestors(tip, 1000, 0, HOUR) == chain[:1]


@pytest.mark.parametrize("fork_time", [math.inf, FORK, 0])
def test_same_answers_whatever_lies_below(fork_time: float) -> None:
    """A batching inner VM, a serial one, and either under a tracing layer give the same
    complete answers, equal to the fallback walk through the stack."""
    answers = {}
    for kind in sorted(BELOW):
        vm, _, chain = _stack(kind, fork_time)
        tip = vm.last_accepted()
        answers[kind] = [
            vm.get_ancestors(tip, num, size, HOUR)
            for num in (1, 3, 4, 7)
            for size in (0, _cost(chain[:4]), BIG)
        ]
        fallback = [
            serial_get_ancestors(
                vm, tip, max_blocks_num=num, max_blocks_size=size, max_retrieval_time=HOUR
            )
            for num in (1, 3, 4, 7)
            for size in (0, _cost(chain[:4]), BIG)
        ]
        assert answers[kind] == fallback
    assert len({repr(answer) for answer in answers.values()}) == 1


def test_batching_not_implemented_from_below_falls_back_to_a_walk() -> None:
    """If the inner VM refuses at call time, the layer walks it serially: still complete."""
    vm, inner, chain = _stack("batching", FORK)
    inner.fail_next("get_ancestors", BatchingNotImplemented("not today"))
    assert vm.get_ancestors(vm.last_accepted(), 1000, BIG, HOUR) == chain
    assert len(inner.calls_to("get_block")) == 5, "3 pre-fork blocks, genesis, its parent"


def test_inner_error_below_the_fork_ends_the_answer_there() -> None:
    """An error of the inner VM's pre-fork part ends the answer after the post-fork part;
    on the first block it propagates unchanged."""
    vm, inner, chain = _stack("batching", FORK)
    fault = RuntimeError("inner VM failed")
    inner.fail_next("get_ancestors", fault)
    assert vm.get_ancestors(vm.last_accepted(), 1000, BIG, HOUR) == chain[:3]
    inner.fail_next("get_ancestors", fault)
    with pytest.raises(RuntimeError) as raised:
        vm.get_ancestors(vm.get_block_id_at_height(2), 1000, BIG, HOUR)
    assert raised.value is fault


def test_time_budget_is_shared_with_the_layer_below() -> None:
    """A zero time budget gives the first block only, wherever it lies."""
    for fork_time in (math.inf, 0):
        vm, _, chain = _stack("serial", fork_time)
        assert vm.get_ancestors(vm.last_accepted(), 1000, BIG, 0.0) == chain[:1]


def test_bad_limits_raise_value_error() -> None:
    """Bad limits and malformed IDs raise ValueError."""
    vm, _, _ = _stack("batching", FORK)
    tip = vm.last_accepted()
    for num, size, seconds in ((0, BIG, HOUR), (1, -1, HOUR), (1, BIG, -1.0)):
        with pytest.raises(ValueError):
            vm.get_ancestors(tip, num, size, seconds)
    with pytest.raises(ValueError):
        vm.get_ancestors(tip[:31], 1, BIG, HOUR)


def test_engine_helper_uses_the_layer() -> None:
    """vmstack's get_ancestors takes the layer's batched answer over a serial inner VM."""
    vm, inner, chain = _stack("serial", FORK)
    assert get_ancestors(vm, vm.last_accepted(), max_retrieval_time=HOUR) == chain
    assert len(inner.calls_to("get_block")) == 5, "3 pre-fork blocks, genesis, its parent"


# --- BatchedParseBlock ------------------------------------------------------------------


def _fresh(kind: str, fork_time: float) -> tuple[ProposerVM, MemoryVM]:
    batching, below = BELOW[kind]
    vm, inner, _ = make_vm(fork_time=fork_time, batching=batching, below=below)
    inner.calls.clear()
    return vm, inner


@pytest.mark.parametrize("fork_time", [math.inf, 0, FORK])
@pytest.mark.parametrize("kind", ["batching", "serial"])
def test_batched_parse_pre_fork_post_fork_and_across(kind: str, fork_time: float) -> None:
    """Blocks from before, after and across the fork parse to the same IDs, in input order,
    with one call below when the inner VM batches and one parse per block when it does not."""
    source, _, chain = _stack("batching", fork_time)
    ids = [source.get_block_id_at_height(h) for h in range(6, 0, -1)]
    vm, inner = _fresh(kind, fork_time)
    parsed = vm.batched_parse_block(chain[:-1])
    assert [block.id for block in parsed] == ids
    assert [bytes(block) for block in parsed] == chain[:-1]
    assert all(isinstance(block, ProposerBlock) for block in parsed)
    if kind == "batching":
        assert len(inner.calls_to("batched_parse_block")) == 1
        assert not inner.calls_to("parse_block")
    else:
        assert len(inner.calls_to("parse_block")) == 6
    assert vm.batched_parse_block([]) == []


def test_hundred_block_batch_with_the_fork_in_the_middle() -> None:
    """A 100-block batch, 50 post-fork then 50 pre-fork, parses in one call below, and the
    blocks verify and accept in order on a fresh node."""
    source, _, clock = make_vm(fork_time=100.0)
    blocks = grow(source, clock, 100)
    assert [block.post_fork for block in blocks] == [False] * 50 + [True] * 50
    batch = [bytes(block) for block in reversed(blocks)]
    vm, inner = _fresh("batching", 100.0)
    parsed = vm.batched_parse_block(batch)
    assert [block.id for block in parsed] == [block.id for block in reversed(blocks)]
    assert [block.post_fork for block in parsed] == [True] * 50 + [False] * 50
    assert len(inner.calls_to("batched_parse_block")) == 1
    (call,) = inner.calls_to("batched_parse_block")
    assert list(call.args[0]) == [bytes(block.inner) for block in reversed(blocks)]
    node, _, node_clock = make_vm(fork_time=100.0)
    node_clock.advance(clock())
    for block in node.batched_parse_block(batch)[::-1]:
        block.verify()
        block.accept()
    assert node.last_accepted() == blocks[-1].id


def test_tampered_signature_fails_the_batch_at_its_index() -> None:
    """A changed signature fails the whole batch with InvalidBlock naming its index and the
    signature; nothing of the batch becomes served."""
    source, _, chain = _stack("batching", 0)
    tampered = bytearray(chain[1])
    tampered[-3] ^= 0x10
    batch = [chain[0], bytes(tampered), chain[2]]
    for kind in ("batching", "serial"):
        vm, _ = _fresh(kind, 0)
        with pytest.raises(InvalidBlock, match="signature verification failed") as raised:
            vm.batched_parse_block(batch)
        assert raised.value.index == 1
        assert vm.get_ancestors(source.last_accepted(), 10, BIG, HOUR) == []


@pytest.mark.parametrize("bad", [b"", b"junk", b"\x00\x00\x00\x00\x00\x00" + bytes(10)])
def test_bad_element_is_named_by_index(bad: bytes) -> None:
    """Any bad element fails the batch with its own index."""
    _, _, chain = _stack("batching", FORK)
    vm, _ = _fresh("batching", FORK)
    with pytest.raises(InvalidBlock) as raised:
        vm.batched_parse_block([chain[0], chain[4], bad, chain[5]])
    assert raised.value.index == 2


def test_inner_errors_pass_through_batched_parse_unchanged() -> None:
    """An error of the inner VM's batched parse comes up as the very same object."""
    _, _, chain = _stack("batching", FORK)
    vm, inner = _fresh("batching", FORK)
    fault = RuntimeError("inner batch failed")
    inner.fail_next("batched_parse_block", fault)
    with pytest.raises(RuntimeError) as raised:
        vm.batched_parse_block(chain[:-1])
    assert raised.value is fault


def test_verified_blocks_are_reused() -> None:
    """Parsing a verified block again returns the same object."""
    vm, _, clock = make_vm(fork_time=0)
    grow(vm, clock, 2)
    clock.advance(2)
    processing = vm.build_block()
    processing.verify()
    again = vm.batched_parse_block([bytes(processing)])
    assert again[0] is processing


def test_engine_helper_batches_through_the_layer() -> None:
    """vmstack's batched_parse_block uses the layer's batched method over a serial VM."""
    _, _, chain = _stack("batching", FORK)
    vm, inner = _fresh("serial", FORK)
    parsed = batched_parse_block(vm, chain[:-1])
    assert [bytes(block) for block in parsed] == chain[:-1]
    assert len(inner.calls_to("parse_block")) == 6


# --- the layer's own walk ---------------------------------------------------------------


@pytest.mark.parametrize(
    "budget, answered, handoff",
    [
        (BIG, 3, 2),  # the fork boundary: the walk hands the last pre-fork block down
        (2, 2, None),  # the budget ends the walk among the layer's own blocks: nothing below
    ],
)
def test_own_walk_hands_over_at_the_fork_boundary(
    budget: int, answered: int, handoff: int | None
) -> None:
    """The walk over the layer's own blocks stops at the first block that is not one of
    them (the newest pre-fork block) and names it; a budget that runs out first names
    nothing to hand down."""
    store = MemoryStore()
    vm, _, clock = make_vm(fork_time=FORK, store=store)
    blocks = grow(vm, clock, 6, step=4)
    assert [block.post_fork for block in blocks] == [False] * 3 + [True] * 3
    walked = AncestorBudget(budget, BIG, HOUR, clock=clock)
    with ProposerState(store).snapshot() as snapshot:
        found = walk_own(snapshot, {}, blocks[-1].id, walked)
    assert walked.blocks == [bytes(block) for block in reversed(blocks[-answered:])]
    assert found == (None if handoff is None else blocks[handoff].id)


def test_own_walk_of_a_block_not_its_own_hands_it_down_at_once() -> None:
    """A pre-fork block is not one of the layer's own: the walk adds nothing and names it;
    a processing post-fork block is one of them, read before the stored ones."""
    store = MemoryStore()
    vm, _, clock = make_vm(fork_time=FORK, store=store)
    blocks = grow(vm, clock, 6, step=4)
    walked = AncestorBudget(BIG, BIG, HOUR, clock=clock)
    with ProposerState(store).snapshot() as snapshot:
        assert walk_own(snapshot, {}, blocks[1].id, walked) == blocks[1].id
    assert walked.blocks == []
    clock.advance(4)
    processing = vm.build_block()
    processing.verify()
    walked = AncestorBudget(BIG, BIG, HOUR, clock=clock)
    with ProposerState(store).snapshot() as snapshot:
        found = walk_own(snapshot, {processing.id: processing}, processing.id, walked)
    assert found == blocks[2].id
    assert walked.blocks[0] == bytes(processing) and len(walked.blocks) == 4
