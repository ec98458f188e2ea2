"""Tests for the capability (vmstack.layers): the sentinel carries it, and a stack says what
each layer can do now without anything subscribed or cached."""

from __future__ import annotations

import pytest
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry

from vmstack import (
    BatchingNotImplemented,
    SimClock,
    describe_stack,
    get_ancestors,
    supports_batching,
)
from vmstack.conformance import BatchedMemoryVM, memory_vm
from vmstack.conformance.plugin import SpanRecorder
from vmstack.interfaces import ChainVM
from vmstack.transition import SerialChainVM, TransitionVM
from vmstack.wrappers import MeteredVM, TracedVM

TRANSITION_TIME = 21  # memory blocks are 2 s apart from genesis at 0: height 11 is the first.


class CountingTransitionVM(TransitionVM):
    """A TransitionVM that counts how often its ``batching`` is read."""

    reads = 0

    @property
    def batching(self) -> bool:
        self.reads += 1
        return super().batching


def transition_stack(
    post: BatchedMemoryVM, spans: SpanRecorder, registry: CollectorRegistry
) -> tuple[CountingTransitionVM, ChainVM]:
    """A transition layer over ``post`` with metered and traced layers above it."""
    transition = CountingTransitionVM(SerialChainVM(post), post, transition_time=TRANSITION_TIME)
    metered = MeteredVM(transition, registry=registry, namespace="C")
    return transition, TracedVM(metered, tracer=spans.tracer, name="C")


def test_a_stack_over_a_transition_follows_it_by_the_sentinel_alone() -> None:
    """Before the transition every batched call is refused by the transition layer at once,
    calling nothing below it, and the engine falls back; after it every call is forwarded.
    No call reads anyone's ``batching``: only describe_stack does."""
    post = BatchedMemoryVM(clock=SimClock(22.0))
    post.extend_chain(10)
    spans, registry = SpanRecorder(), CollectorRegistry()
    transition, top = transition_stack(post, spans, registry)
    assert [layer.capability for layer in describe_stack(top)][:3] == ["serial"] * 3
    reads = transition.reads
    post.forget_records()
    for _ in range(20):
        with pytest.raises(BatchingNotImplemented, match="before the transition"):
            top.get_ancestors(post.last_accepted(), 5, 10_000, 1.0)  # type: ignore[attr-defined]
        assert len(get_ancestors(top, post.last_accepted(), max_blocks_num=5)) == 5
    assert transition.reads == reads
    assert post.calls_to("get_ancestors") == []
    block = top.build_block()
    block.verify()
    block.accept()
    assert transition.transitioned
    for _ in range(20):
        assert len(top.get_ancestors(block.id, 5, 10_000, 1.0)) == 5  # type: ignore[attr-defined]
    assert transition.reads == reads
    assert len(post.calls_to("get_ancestors")) == 20
    assert supports_batching(top)
    assert [layer.capability for layer in describe_stack(top)][:3] == ["batched"] * 3


def test_a_refusal_from_below_is_one_span_and_one_not_implemented_observation() -> None:
    """A batched call refused by the VM below is one span with the refusal as an event and
    no error status, and one ``not_implemented`` observation: the batched histograms exist
    from the layer's building, before the VM below has ever batched."""
    post = BatchedMemoryVM(clock=SimClock(22.0))
    post.extend_chain(10)
    spans, registry = SpanRecorder(), CollectorRegistry()
    _, top = transition_stack(post, spans, registry)
    with pytest.raises(BatchingNotImplemented):
        top.get_ancestors(post.last_accepted(), 5, 10_000, 1.0)  # type: ignore[attr-defined]
    (span,) = spans.named("C.get_ancestors")
    assert span.status.status_code is not StatusCode.ERROR
    assert [(event.attributes or {})["exception.type"] for event in span.events] == [
        "vmstack.errors.BatchingNotImplemented"
    ]
    assert (
        registry.get_sample_value(
            "C_get_ancestors_duration_seconds_count", {"outcome": "not_implemented"}
        )
        == 1
    )
    inner = memory_vm(batching=True, blocks=3)
    assert isinstance(inner, BatchedMemoryVM)
    metered = MeteredVM(inner, registry=registry, namespace="M")
    inner.batching = False
    with pytest.raises(BatchingNotImplemented):
        metered.get_ancestors(inner.last_accepted(), 5, 10_000, 1.0)
    assert (
        registry.get_sample_value(
            "M_get_ancestors_duration_seconds_count", {"outcome": "not_implemented"}
        )
        == 1
    )


def test_a_vm_below_that_stops_batching_is_followed_at_the_next_call() -> None:
    """A VM below whose capability switches off and on refuses and answers call by call;
    the layer's ``batching`` describes it at each moment."""
    inner = memory_vm(batching=True, blocks=5)
    assert isinstance(inner, BatchedMemoryVM)
    layer = MeteredVM(inner, registry=CollectorRegistry(), namespace="C")
    tip = inner.last_accepted()
    for batching in (False, True, False):
        inner.batching = batching
        assert layer.batching is batching
        if batching:
            assert len(layer.get_ancestors(tip, 5, 10_000, 1.0)) == 5
        else:
            with pytest.raises(BatchingNotImplemented, match="switched off"):
                layer.get_ancestors(tip, 5, 10_000, 1.0)
        assert get_ancestors(layer, tip, max_blocks_num=5) == get_ancestors(
            inner, tip, max_blocks_num=5
        )


def test_a_layer_over_a_vm_without_the_batched_methods_refuses_itself() -> None:
    """Over a VM without the methods the layer refuses at once, naming itself, calling
    nothing below and observing nothing."""
    inner = memory_vm(batching=False, blocks=3)
    tip = inner.last_accepted()
    inner.forget_records()
    registry = CollectorRegistry()
    layer = MeteredVM(inner, registry=registry, namespace="C")
    assert not layer.batching and not supports_batching(layer)
    with pytest.raises(BatchingNotImplemented, match=r"MeteredVM\(C\) cannot batch"):
        layer.get_ancestors(tip, 5, 10_000, 1.0)
    assert inner.calls == []
    assert "C_get_ancestors_duration_seconds" not in {family.name for family in registry.collect()}
