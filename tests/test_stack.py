"""describe_stack reads a stack back; wrap_layers knows the order of the pass-through layers."""

from __future__ import annotations

import attrs
import pytest
from prometheus_client import CollectorRegistry

import vmstack
from vmstack.conformance import memory_vm
from vmstack.conformance.plugin import SpanRecorder
from vmstack.describe import LayerInfo, StackDescription, describe_stack
from vmstack.stack import wrap_layers
from vmstack.wrappers import MeteredVM, TracedVM


def _two_level_stack(batching: bool) -> vmstack.ChainVM:
    """Memory VM, then C layers, then proposervm layers (no proposer in between yet)."""
    spans, registry = SpanRecorder(), CollectorRegistry()
    lower = wrap_layers(
        memory_vm(batching=batching), name="C", tracer=spans.tracer, registry=registry
    )
    return wrap_layers(lower, name="proposervm", tracer=spans.tracer, registry=registry)


def test_describe_stack_is_exported() -> None:
    """``vmstack.describe_stack`` is the function of :mod:`vmstack.describe`."""
    assert vmstack.describe_stack is describe_stack
    assert "describe_stack" in vmstack.__all__


def test_describe_stack_lists_every_layer_top_to_bottom() -> None:
    """Each layer appears once, top first, with its type, name and capability."""
    description = describe_stack(_two_level_stack(batching=True))
    assert list(description) == [
        LayerInfo("TracedVM", "proposervm", True),
        LayerInfo("MeteredVM", "proposervm", True),
        LayerInfo("TracedVM", "C", True),
        LayerInfo("MeteredVM", "C", True),
        LayerInfo("BatchedMemoryVM", None, True),
    ]
    assert len(description) == 5
    assert description.top == description[0]
    assert description.bottom.kind == "BatchedMemoryVM"


def test_describe_stack_prints_one_aligned_line_per_layer() -> None:
    """``str()`` gives one line per layer, labels padded, capability last."""
    assert str(describe_stack(_two_level_stack(batching=True))) == (
        "TracedVM(proposervm)   batched\n"
        "MeteredVM(proposervm)  batched\n"
        "TracedVM(C)            batched\n"
        "MeteredVM(C)           batched\n"
        "BatchedMemoryVM        batched"
    )
    assert "TracedVM(C)" in str(describe_stack(_two_level_stack(batching=False)))


def test_capability_follows_the_bottom_vm() -> None:
    """Over a VM that cannot batch, every pass-through layer says serial."""
    description = describe_stack(_two_level_stack(batching=False))
    assert [layer.capability for layer in description] == ["serial"] * 5
    assert str(description[-1]) == "MemoryVM  serial"


def test_a_bare_vm_is_a_one_layer_stack() -> None:
    """A VM with no layers is described as itself alone."""
    description = describe_stack(memory_vm(batching=True))
    assert description.as_dicts() == [{"kind": "BatchedMemoryVM", "name": None, "batching": True}]
    assert str(description) == "BatchedMemoryVM  batched"


def test_description_records_are_frozen() -> None:
    """The description and its records cannot be changed after the fact."""
    description = describe_stack(memory_vm())
    assert isinstance(description, StackDescription)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        description[0].batching = True  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        description.layers = ()  # type: ignore[misc]


def test_a_looping_stack_is_a_value_error() -> None:
    """A stack whose ``inner`` links loop cannot be described."""

    class Loop:
        def __init__(self) -> None:
            self.inner: object = self

    with pytest.raises(ValueError, match="loops"):
        describe_stack(Loop())  # type: ignore[arg-type]


def test_wrap_layers_puts_traced_over_metered() -> None:
    """With a tracer and a registry, TracedVM is outermost and MeteredVM sits on the VM."""
    inner = memory_vm(batching=True)
    vm = wrap_layers(inner, name="C", tracer=SpanRecorder().tracer, registry=CollectorRegistry())
    assert isinstance(vm, TracedVM)
    assert isinstance(vm.inner, MeteredVM)
    assert vm.inner.inner is inner
    assert (vm.name, vm.inner.namespace) == ("C", "C")


def test_wrap_layers_leaves_out_what_is_not_given() -> None:
    """Each layer is added only when its tracer or registry is given."""
    inner = memory_vm(batching=True)
    assert wrap_layers(inner, name="C") is inner
    traced = wrap_layers(inner, name="C", tracer=SpanRecorder().tracer)
    assert isinstance(traced, TracedVM) and traced.inner is inner
    metered = wrap_layers(inner, name="C", registry=CollectorRegistry())
    assert isinstance(metered, MeteredVM) and metered.inner is inner


def test_wrapped_stack_answers_like_the_bare_vm() -> None:
    """Two levels of pass-through layers change no ancestors answer."""
    spans, registry = SpanRecorder(), CollectorRegistry()
    inner = memory_vm(batching=True, blocks=40)
    lower = wrap_layers(inner, name="C", tracer=spans.tracer, registry=registry)
    top = wrap_layers(lower, name="proposervm", tracer=spans.tracer, registry=registry)
    tip = inner.last_accepted()
    expected = vmstack.get_ancestors(inner, tip, max_blocks_num=30)
    inner.calls.clear()
    assert vmstack.get_ancestors(top, tip, max_blocks_num=30) == expected
    assert [call.method for call in inner.calls] == ["get_ancestors"]
    assert sorted(spans.names()) == ["C.get_ancestors", "proposervm.get_ancestors"]
    for namespace in ("C", "proposervm"):
        assert (
            registry.get_sample_value(
                f"{namespace}_get_ancestors_duration_seconds_count", {"outcome": "success"}
            )
            == 1
        )


def test_iter_layers_walks_top_to_bottom_and_find_layer_reaches_any_depth() -> None:
    """iter_layers yields every VM of a stack in order; find_layer returns the topmost
    layer of a kind, or a LookupError naming the layers."""
    stack = _two_level_stack(batching=True)
    layers = list(vmstack.iter_layers(stack))
    assert [type(layer).__name__ for layer in layers] == [
        "TracedVM",
        "MeteredVM",
        "TracedVM",
        "MeteredVM",
        "BatchedMemoryVM",
    ]
    assert layers[0] is stack
    assert vmstack.find_layer(stack, MeteredVM) is layers[1]
    assert vmstack.find_layer(stack, type(layers[-1])) is layers[-1]
    with pytest.raises(LookupError, match="TracedVM > MeteredVM"):
        vmstack.find_layer(stack, int)


def test_iter_layers_refuses_a_stack_that_loops() -> None:
    """A stack whose inner links loop is a ValueError, not an endless walk."""

    @attrs.define
    class Loop:
        inner: object = None

    first, second = Loop(), Loop()
    first.inner, second.inner = second, first
    with pytest.raises(ValueError, match="loops"):
        list(vmstack.iter_layers(first))
