"""The conformance kit run on the built-in pass-through layers, alone and stacked."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from vmstack import get_ancestors
from vmstack.clock import SimClock
from vmstack.conformance import LayerConformance, MemoryVM, memory_vm
from vmstack.conformance.plugin import SpanRecorder
from vmstack.describe import describe_stack
from vmstack.interfaces import ChainVM
from vmstack.stack import wrap_layers
from vmstack.wrappers import MeteredVM, TracedVM

Kind = Literal["traced", "metered"]


def _stack(
    inner: ChainVM, kinds: list[Kind], spans: SpanRecorder, registry: CollectorRegistry
) -> ChainVM:
    """Put the layers ``kinds`` (bottom first) over ``inner``, each with its own name."""
    vm = inner
    for depth, kind in enumerate(kinds):
        if kind == "traced":
            vm = TracedVM(vm, tracer=spans.tracer, name=f"t{depth}")
        else:
            vm = MeteredVM(vm, registry=registry, namespace=f"m{depth}")
    return vm


class TestTracedVM(LayerConformance):
    """TracedVM over an SDK tracer passes the kit."""

    def wrap(self, inner: ChainVM) -> ChainVM:
        return TracedVM(inner, tracer=SpanRecorder().tracer, name="C")


class TestMeteredVM(LayerConformance):
    """MeteredVM over a fresh registry passes the kit."""

    def wrap(self, inner: ChainVM) -> ChainVM:
        return MeteredVM(inner, registry=CollectorRegistry(), namespace="C")


@pytest.mark.thorough  # the whole kit again, over another arrangement: the full suite runs it
class TestTracedOverAClockThatStandsStill(LayerConformance):
    """A ``make_inner`` of the user's own, whose reads cost no time: a correct layer still
    passes (the time budget then runs out only when it is zero)."""

    max_examples = 6

    def make_inner(self, *, batching: bool, clock: SimClock) -> MemoryVM:
        return memory_vm(batching=batching, clock=clock)

    def wrap(self, inner: ChainVM) -> ChainVM:
        return TracedVM(inner, tracer=SpanRecorder().tracer, name="C")


@pytest.mark.thorough  # the whole kit again, over another arrangement: the full suite runs it
class TestTracedOverMetered(LayerConformance):
    """TracedVM over MeteredVM (the order of wrap_layers) passes the kit."""

    max_examples = 6

    def wrap(self, inner: ChainVM) -> ChainVM:
        return _stack(inner, ["metered", "traced"], SpanRecorder(), CollectorRegistry())


@pytest.mark.thorough  # the whole kit again, over another arrangement: the full suite runs it
class TestMeteredOverTraced(LayerConformance):
    """MeteredVM over TracedVM passes the kit."""

    max_examples = 6

    def wrap(self, inner: ChainVM) -> ChainVM:
        return _stack(inner, ["traced", "metered"], SpanRecorder(), CollectorRegistry())


@pytest.mark.thorough  # the whole kit again, over another arrangement: the full suite runs it
class TestDoubleTraced(LayerConformance):
    """Two TracedVMs, one over the other, pass the kit."""

    max_examples = 6

    def wrap(self, inner: ChainVM) -> ChainVM:
        return _stack(inner, ["traced", "traced"], SpanRecorder(), CollectorRegistry())


@pytest.mark.thorough  # the whole kit again, over another arrangement: the full suite runs it
class TestWrapLayersTwice(LayerConformance):
    """wrap_layers applied twice, as build_stack does around a proposer, passes the kit."""

    max_examples = 6

    def wrap(self, inner: ChainVM) -> ChainVM:
        spans, registry = SpanRecorder(), CollectorRegistry()
        lower = wrap_layers(inner, name="C", tracer=spans.tracer, registry=registry)
        return wrap_layers(lower, name="proposervm", tracer=spans.tracer, registry=registry)


@settings(max_examples=25, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["traced", "metered"]), min_size=1, max_size=4),
    batching=st.booleans(),
    length=st.integers(1, 30),
    num=st.integers(1, 40),
    size=st.integers(0, 4000),
)
def test_any_layer_order_answers_like_the_bare_vm(
    kinds: list[Kind], batching: bool, length: int, num: int, size: int
) -> None:
    """Any pile of traced and metered layers answers like the VM below, with one call per
    layer, one span per traced layer and one observation per metered layer."""
    spans, registry = SpanRecorder(), CollectorRegistry()
    inner = memory_vm(batching=batching, blocks=length)
    stack = _stack(inner, kinds, spans, registry)
    tip = inner.last_accepted()
    expected = get_ancestors(inner, tip, max_blocks_num=num, max_blocks_size=size)
    inner.calls.clear()
    assert get_ancestors(stack, tip, max_blocks_num=num, max_blocks_size=size) == expected
    assert [layer.batching for layer in describe_stack(stack)] == [batching] * (len(kinds) + 1)
    if batching:
        assert [call.method for call in inner.calls] == ["get_ancestors"]
        assert sorted(spans.names()) == sorted(
            f"t{depth}.get_ancestors" for depth, kind in enumerate(kinds) if kind == "traced"
        )
        for depth, kind in enumerate(kinds):
            if kind == "metered":
                assert (
                    registry.get_sample_value(
                        f"m{depth}_get_ancestors_duration_seconds_count", {"outcome": "success"}
                    )
                    == 1
                )
    else:
        assert {call.method for call in inner.calls} == {"get_block"}
        assert not any(name.endswith(".get_ancestors") for name in spans.names())
