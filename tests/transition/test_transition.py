"""Tests for TransitionVM over memory VMs: the switch, the rules and the batched protocol."""

from __future__ import annotations

import pytest

from vmstack import (
    BatchingNotImplemented,
    SimClock,
    batched_parse_block,
    get_ancestors,
)
from vmstack.batching import serial_get_ancestors
from vmstack.conformance import BatchedMemoryVM, MemoryBlock, memory_vm
from vmstack.interfaces import BatchedChainVM
from vmstack.transition import (
    SerialChainVM,
    TransitionBlock,
    TransitionVM,
    builds_on_transition,
    is_transition_block,
    transition_accepted,
)

TRANSITION_TIME = 21  # blocks are 2 s apart from genesis at 0: height 11 (t=22) is the first.


def node(blocks: int, *, clock: SimClock | None = None) -> tuple[BatchedMemoryVM, TransitionVM]:
    vm = memory_vm(batching=True, blocks=blocks, clock=clock or SimClock(2.0 * blocks))
    assert isinstance(vm, BatchedMemoryVM)
    return vm, TransitionVM(SerialChainVM(vm), vm, transition_time=TRANSITION_TIME)


def child_bytes(parent: MemoryBlock, vm: BatchedMemoryVM) -> bytes:
    return bytes(MemoryBlock(vm, parent.id, parent.height + 1, parent.timestamp + 2, b"child"))


def test_rules_are_pure_functions_of_timestamps() -> None:
    """The transition block is the first at or after the time; its children build on it."""
    assert is_transition_block(20, 22, 21) and is_transition_block(20, 21, 21)
    assert not is_transition_block(21, 22, 21) and not is_transition_block(18, 20, 21)
    assert transition_accepted(21, 21) and not transition_accepted(20, 21)
    assert builds_on_transition(22, 21) and not builds_on_transition(20, 21)


def test_serial_view_hides_the_batched_protocol() -> None:
    """The pre VM view offers ChainVM methods only, like coreth."""
    assert not isinstance(SerialChainVM(memory_vm(batching=True)), BatchedChainVM)


def test_before_the_transition_batched_calls_are_refused_and_fallback_answers() -> None:
    """Before the transition the pre VM is in charge: BatchingNotImplemented, then fallback."""
    vm, transition = node(10)
    assert not transition.transitioned
    with pytest.raises(BatchingNotImplemented):
        transition.get_ancestors(vm.last_accepted(), 5, 10_000, 1.0)
    with pytest.raises(BatchingNotImplemented):
        transition.batched_parse_block([])
    answer = get_ancestors(transition, vm.last_accepted(), clock=SimClock())
    assert len(answer) == 11
    assert vm.calls_to("get_ancestors") == []


@pytest.mark.parametrize("height", [5, 11, 12, 20])
def test_after_the_transition_post_serves_every_block_both_paths_agree(height: int) -> None:
    """After the transition, post answers batched calls for blocks before, at and after it."""
    vm, transition = node(20)
    assert transition.transitioned and transition.inner is vm
    block_id = vm.get_block_id_at_height(height)
    batched = get_ancestors(transition, block_id, max_blocks_num=8, clock=SimClock())
    assert batched == serial_get_ancestors(transition, block_id, max_blocks_num=8, clock=SimClock())
    assert len(batched) == min(8, height + 1)
    assert len(vm.calls_to("get_ancestors")) == 1


def test_a_child_of_the_processing_transition_block_verifies_before_and_after_it() -> None:
    """A block building on the verified, unaccepted transition block parses and verifies,
    and is decided through the post VM once the transition block is accepted."""
    vm, transition = node(10, clock=SimClock(22.0))
    transition_block = transition.build_block()
    assert transition_block.timestamp == 22
    transition_block.verify()
    child = child_bytes(vm._served(transition_block.id), vm)
    parsed = transition.parse_block(child)
    parsed.verify()
    transition_block.accept()
    assert transition.transitioned
    parsed.accept()
    assert transition.last_accepted() == parsed.id


def test_a_batch_spanning_the_transition_is_parsed_by_the_fallback_then_executed() -> None:
    """A bootstrap's batch across the transition parses, and executes in order across it."""
    source, _ = node(30)
    data = [bytes(source._served(source.get_block_id_at_height(h))) for h in range(30, 0, -1)]
    vm, transition = node(0, clock=SimClock(100.0))
    blocks = batched_parse_block(transition, data)
    assert [bytes(block) for block in blocks] == data
    assert all(isinstance(block, TransitionBlock) for block in blocks)
    assert vm.calls_to("batched_parse_block") == []
    for block in reversed(blocks):
        block.verify()
        block.accept()
    assert transition.transitioned
    assert transition.last_accepted() == source.last_accepted()
    assert batched_parse_block(transition, data[:3])[0].id == blocks[0].id
    assert len(vm.calls_to("batched_parse_block")) == 1


@pytest.mark.parametrize("accepted_transition", [False, True], ids=["just before", "just after"])
def test_restart_around_the_transition_block(accepted_transition: bool) -> None:
    """A node restarted just before or after accepting the transition block agrees with itself."""
    vm, transition = node(10, clock=SimClock(22.0))
    transition_block = transition.build_block()
    transition_block.verify()
    if accepted_transition:
        transition_block.accept()
    restarted = TransitionVM(SerialChainVM(vm), vm, transition_time=TRANSITION_TIME)
    assert restarted.transitioned is accepted_transition
    assert restarted.last_accepted() == transition.last_accepted()
    tip = restarted.last_accepted()
    assert get_ancestors(restarted, tip, clock=SimClock()) == get_ancestors(
        transition, tip, clock=SimClock()
    )


def test_every_returned_block_is_wrapped_and_reaches_the_inner_block() -> None:
    """get_block, build_block and batched results are TransitionBlocks; accept reaches below."""
    vm, transition = node(20, clock=SimClock(50.0))
    assert isinstance(transition.get_block(vm.last_accepted()), TransitionBlock)
    built = transition.build_block()
    assert isinstance(built, TransitionBlock)
    built.verify()
    built.accept()
    assert vm.calls_to("block.accept")[-1].args == (built.id,)
    batch = transition.batched_parse_block([bytes(built)])
    assert isinstance(batch[0], TransitionBlock)


def test_layers_over_the_transition_follow_its_capability_as_it_changes() -> None:
    """A pass-through layer over the transition refuses before it and forwards after it."""
    from opentelemetry.sdk.trace import TracerProvider
    from prometheus_client import CollectorRegistry

    from vmstack import supports_batching
    from vmstack.wrappers import MeteredVM, TracedVM

    vm, transition = node(10, clock=SimClock(22.0))
    registry = CollectorRegistry()
    metered = MeteredVM(transition, registry=registry, namespace="C")
    layer = TracedVM(metered, tracer=TracerProvider().get_tracer("test"), name="C")
    assert not supports_batching(layer)
    with pytest.raises(BatchingNotImplemented):
        layer.get_ancestors(vm.last_accepted(), 5, 10_000, 1.0)
    assert (
        registry.get_sample_value(
            "C_get_ancestors_duration_seconds_count", {"outcome": "not_implemented"}
        )
        == 1
    )
    block = layer.build_block()
    block.verify()
    block.accept()
    assert supports_batching(layer) and supports_batching(metered)
    assert len(layer.get_ancestors(block.id, 5, 10_000, 1.0)) == 5
    assert len(vm.calls_to("get_ancestors")) == 1
    assert (
        registry.get_sample_value("C_get_ancestors_duration_seconds_count", {"outcome": "success"})
        == 1
    )


def test_parsing_does_not_depend_on_order_or_history() -> None:
    """A batch across the transition parses the same twice, newest first and oldest first."""
    source, _ = node(30)
    data = [bytes(source._served(source.get_block_id_at_height(h))) for h in range(30, 0, -1)]
    _, transition = node(0, clock=SimClock(100.0))
    first = [block.id for block in batched_parse_block(transition, data)]
    assert [block.id for block in batched_parse_block(transition, data)] == first
    assert [block.id for block in batched_parse_block(transition, data[::-1])] == first[::-1]


def test_the_layer_takes_a_clock_but_blocks_decide_the_switch() -> None:
    """The clock tells how long until the transition time; only acceptance switches VMs."""
    vm, _ = node(5)
    clock = SimClock(15.0)
    transition = TransitionVM(SerialChainVM(vm), vm, transition_time=TRANSITION_TIME, clock=clock)
    assert transition.seconds_to_transition == 6.0
    clock.advance(10.0)
    assert transition.seconds_to_transition == 0.0 and not transition.transitioned
    with pytest.raises(ValueError):
        TransitionVM(SerialChainVM(vm), vm, transition_time=float("nan"))
