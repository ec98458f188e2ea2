"""Tests for vmstack.capability: a layer's capability is read once and kept current."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from vmstack import BatchingNotImplemented, SimClock, get_ancestors, supports_batching
from vmstack.capability import BatchingWatch, fixed_capability
from vmstack.conformance import BatchedMemoryVM, memory_vm
from vmstack.interfaces import AnnouncesBatching, ChainVM
from vmstack.transition import SerialChainVM, TransitionVM
from vmstack.wrappers import MeteredVM, TracedVM

TRANSITION_TIME = 21  # memory blocks are 2 s apart from genesis at 0: height 11 is the first.


class AnnouncingMemoryVM(BatchedMemoryVM):
    """A batching memory VM that promises its capability never changes."""

    watch_batching = staticmethod(fixed_capability)


class CountingTransitionVM(TransitionVM):
    """A TransitionVM that counts how often its ``batching`` is read."""

    reads = 0

    @property
    def batching(self) -> bool:
        self.reads += 1
        return super().batching


def transition_stack(post: BatchedMemoryVM) -> tuple[CountingTransitionVM, ChainVM]:
    """A transition layer over ``post`` with metered and traced layers above it."""
    transition = CountingTransitionVM(SerialChainVM(post), post,
                                      transition_time=TRANSITION_TIME)
    metered = MeteredVM(transition, registry=CollectorRegistry(), namespace="C")
    return transition, TracedVM(metered, tracer=TracerProvider().get_tracer("test"), name="C")


def test_a_stack_over_a_transition_reads_its_capability_once_per_change() -> None:
    """Many batched calls read the transition's capability never; its change is announced
    once, and the stack refuses before the transition and forwards after it."""
    post = AnnouncingMemoryVM(clock=SimClock(22.0))
    post.extend_chain(10)
    transition, top = transition_stack(post)
    announced: list[bool] = []
    assert isinstance(top, AnnouncesBatching) and top.watch_batching(announced.append)
    reads_when_built = transition.reads
    for _ in range(20):
        with pytest.raises(BatchingNotImplemented):
            top.get_ancestors(post.last_accepted(), 5, 10_000, 1.0)  # type: ignore[attr-defined]
        assert len(get_ancestors(top, post.last_accepted(), max_blocks_num=5)) == 5
    assert not supports_batching(top)
    assert transition.reads == reads_when_built
    assert post.calls_to("get_ancestors") == []
    block = top.build_block()
    block.verify()
    block.accept()
    assert transition.transitioned and announced == [True]
    reads_after_transition = transition.reads
    for _ in range(20):
        assert len(top.get_ancestors(block.id, 5, 10_000, 1.0)) == 5  # type: ignore[attr-defined]
    assert supports_batching(top)
    assert transition.reads == reads_after_transition
    assert len(post.calls_to("get_ancestors")) == 20
    assert announced == [True]


def test_a_layer_over_a_vm_that_announces_nothing_asks_it_at_each_call() -> None:
    """A VM with a live ``batching`` and no ``watch_batching`` is asked live, and the layers
    above it say they cannot announce: they follow its changes at once."""
    inner = memory_vm(batching=True, blocks=5)
    assert isinstance(inner, BatchedMemoryVM)
    layer = MeteredVM(inner, registry=CollectorRegistry(), namespace="C")
    assert not layer.watch_batching(lambda batching: None)
    assert BatchingWatch(layer).ready() is layer
    inner.batching = False
    assert not layer.batching and BatchingWatch(layer).ready() is None
    with pytest.raises(BatchingNotImplemented):
        layer.get_ancestors(inner.last_accepted(), 5, 10_000, 1.0)
    inner.batching = True
    assert len(layer.get_ancestors(inner.last_accepted(), 5, 10_000, 1.0)) == 5


def test_a_transition_over_a_live_vm_cannot_announce() -> None:
    """A transition layer whose post VM is asked live is asked live too."""
    post = memory_vm(batching=True, blocks=3)
    transition, top = transition_stack(post)  # type: ignore[arg-type]
    assert not transition.watch_batching(lambda batching: None)
    assert not top.watch_batching(lambda batching: None)  # type: ignore[attr-defined]


def test_a_vm_without_the_batched_methods_never_batches() -> None:
    """The watch of a VM without the batched methods says no, and promises no change."""
    watch = BatchingWatch(memory_vm(batching=False))
    assert not watch.now and watch.ready() is None
    assert watch.watch(lambda batching: None)


def test_a_watch_tells_its_subscribers_only_of_changes() -> None:
    """A repeated announcement of the same capability reaches nobody."""

    class Switchable(BatchedMemoryVM):
        def watch_batching(self, callback: object) -> bool:
            self.callback = callback
            return True

    below = Switchable()
    watch = BatchingWatch(below)
    seen: list[bool] = []
    assert watch.now and watch.watch(seen.append)
    below.callback(True)  # type: ignore[operator]
    below.callback(False)  # type: ignore[operator]
    below.callback(False)  # type: ignore[operator]
    assert seen == [False] and not watch.now and watch.ready() is None
