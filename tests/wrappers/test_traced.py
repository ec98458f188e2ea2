"""TracedVM: spans read back from the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from opentelemetry.trace import NoOpTracer, StatusCode

from vmstack import BatchingNotImplemented, BlockNotFound, batched_parse_block, get_ancestors
from vmstack.conformance import MemoryBlock, memory_vm
from vmstack.conformance.plugin import SpanRecorder
from vmstack.wrappers import TracedBlock, TracedVM

CAPABILITIES = pytest.mark.parametrize(
    "batching", [True, False], ids=["inner-batches", "inner-does-not-batch"]
)


@CAPABILITIES
def test_layer_reports_inner_and_capability(batching: bool, vmstack_spans: SpanRecorder) -> None:
    """``inner``, ``batching`` and ``name`` say what the layer wraps and can do."""
    inner = memory_vm(batching=batching)
    traced = TracedVM(inner, tracer=vmstack_spans.tracer, name="C")
    assert traced.inner is inner
    assert traced.batching is batching
    assert traced.name == "C"
    assert traced.tracer is vmstack_spans.tracer


def test_batched_get_ancestors_is_one_span_with_its_attributes(vmstack_spans: SpanRecorder) -> None:
    """A batched get_ancestors of 20 blocks is one span carrying the request and the count."""
    inner = memory_vm(batching=True, blocks=50)
    traced = TracedVM(inner, tracer=vmstack_spans.tracer, name="C")
    tip = inner.last_accepted()
    answer = get_ancestors(
        traced, tip, max_blocks_num=20, max_blocks_size=100_000, max_retrieval_time=0.5
    )
    assert len(answer) == 20
    (span,) = vmstack_spans.spans()
    assert span.name == "C.get_ancestors"
    assert dict(span.attributes or {}) == {
        "block_id": tip.hex(),
        "max_blocks_num": 20,
        "max_blocks_size": 100_000,
        "max_retrieval_time": 0.5,
        "num_blocks": 20,
    }
    assert span.status.status_code is StatusCode.UNSET


def test_batched_parse_block_is_one_span(vmstack_spans: SpanRecorder) -> None:
    """A batched parse of 30 blocks is one span whose ``num_blocks`` is the batch length."""
    inner = memory_vm(batching=True, blocks=30)
    batch = [bytes(inner.get_block(inner.get_block_id_at_height(h))) for h in range(1, 31)]
    traced = TracedVM(inner, tracer=vmstack_spans.tracer, name="C")
    parsed = batched_parse_block(traced, batch)
    assert [bytes(block) for block in parsed] == batch
    assert all(isinstance(block, TracedBlock) for block in parsed)
    (span,) = vmstack_spans.spans()
    assert span.name == "C.batched_parse_block"
    assert (span.attributes or {})["num_blocks"] == 30


def test_fallback_is_one_span_per_block_and_no_batched_span(vmstack_spans: SpanRecorder) -> None:
    """Over a VM that cannot batch, the refusal makes no span and each fetched block one."""
    inner = memory_vm(batching=False, blocks=12)
    traced = TracedVM(inner, tracer=vmstack_spans.tracer, name="C")
    answer = get_ancestors(traced, inner.last_accepted(), max_blocks_num=10)
    assert len(answer) == 10
    assert vmstack_spans.names() == ["C.get_block"] * 10


def test_refusal_makes_no_span_and_calls_nothing(vmstack_spans: SpanRecorder) -> None:
    """Both batched methods refuse at once over a VM that cannot batch."""
    inner = memory_vm(batching=False, blocks=3)
    tip = inner.last_accepted()
    inner.calls.clear()
    traced = TracedVM(inner, tracer=vmstack_spans.tracer, name="C")
    with pytest.raises(BatchingNotImplemented, match=r"TracedVM\(C\)"):
        traced.get_ancestors(tip, 10, 1000, 1.0)
    with pytest.raises(BatchingNotImplemented):
        traced.batched_parse_block([b"anything"])
    assert vmstack_spans.spans() == []
    assert inner.calls == []


def _one_block_calls(
    traced: TracedVM, tip: bytes, tip_bytes: bytes
) -> dict[str, Callable[[], object]]:
    return {
        "get_block": lambda: traced.get_block(tip),
        "parse_block": lambda: traced.parse_block(tip_bytes),
        "build_block": traced.build_block,
        "set_preference": lambda: traced.set_preference(tip),
        "last_accepted": traced.last_accepted,
        "get_block_id_at_height": lambda: traced.get_block_id_at_height(4),
    }


@pytest.mark.parametrize(
    ("method", "attributes"),
    [
        ("get_block", {"block_id", "height"}),
        ("parse_block", {"num_bytes", "block_id", "height"}),
        ("build_block", {"block_id", "height"}),
        ("set_preference", {"block_id"}),
        ("last_accepted", {"block_id"}),
        ("get_block_id_at_height", {"height", "block_id"}),
    ],
)
def test_each_method_is_one_span(
    method: str, attributes: set[str], vmstack_spans: SpanRecorder
) -> None:
    """Every one-block method makes one span named after it, with its cheap attributes."""
    inner = memory_vm(batching=True, blocks=4)
    tip = inner.last_accepted()
    traced = TracedVM(inner, tracer=vmstack_spans.tracer, name="proposervm")
    _one_block_calls(traced, tip, bytes(inner.get_block(tip)))[method]()
    (span,) = vmstack_spans.spans()
    assert span.name == f"proposervm.{method}"
    assert set(span.attributes or {}) == attributes
    if "height" in attributes:
        assert (span.attributes or {})["height"] == (5 if method == "build_block" else 4)


def test_block_decisions_are_traced(vmstack_spans: SpanRecorder) -> None:
    """verify, accept and reject of a TracedBlock make ``C.block.*`` spans and reach the
    inner block."""
    inner = memory_vm(batching=True, blocks=2)
    traced = TracedVM(inner, tracer=vmstack_spans.tracer, name="C")
    accepted = traced.build_block()
    accepted.verify()
    accepted.accept()
    rejected = traced.build_block()
    rejected.verify()
    rejected.reject()
    names = vmstack_spans.names()
    assert names == [
        "C.build_block",
        "C.block.verify",
        "C.block.accept",
        "C.build_block",
        "C.block.verify",
        "C.block.reject",
    ]
    for span in vmstack_spans.named("C.block.accept"):
        assert dict(span.attributes or {}) == {"block_id": accepted.id.hex(), "height": 3}
    assert inner.last_accepted() == accepted.id
    assert [call.method for call in inner.calls if call.method.startswith("block.")] == [
        "block.verify",
        "block.accept",
        "block.verify",
        "block.reject",
    ]


def test_traced_block_forwards_its_fields(vmstack_spans: SpanRecorder) -> None:
    """A TracedBlock exposes the inner block and forwards its fields and bytes."""
    inner = memory_vm(batching=True, blocks=3)
    tip = inner.last_accepted()
    block = TracedVM(inner, tracer=vmstack_spans.tracer, name="C").get_block(tip)
    below = inner.get_block(tip)
    assert isinstance(block.inner, MemoryBlock)
    assert block.inner is below
    assert (block.id, block.parent_id, block.height, block.timestamp, bytes(block)) == (
        below.id,
        below.parent_id,
        below.height,
        below.timestamp,
        bytes(below),
    )
    assert "TracedBlock(MemoryBlock(height=3" in repr(block)


def test_error_is_recorded_and_reraised_unchanged(vmstack_spans: SpanRecorder) -> None:
    """An error from below marks the span ERROR with an exception event and comes up as the
    same object."""
    inner = memory_vm(batching=True, blocks=3)
    traced = TracedVM(inner, tracer=vmstack_spans.tracer, name="C")
    fault = BlockNotFound("injected")
    inner.fail_next("get_block", fault)
    with pytest.raises(BlockNotFound) as raised:
        traced.get_block(inner.last_accepted())
    assert raised.value is fault
    (span,) = vmstack_spans.spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "BlockNotFound: injected"
    (event,) = span.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.type"] == "vmstack.errors.BlockNotFound"


def test_batched_error_is_one_span_and_reraised_unchanged(vmstack_spans: SpanRecorder) -> None:
    """An error from a batched call below is recorded on the one span and re-raised as is."""
    inner = memory_vm(batching=True, blocks=3)
    traced = TracedVM(inner, tracer=vmstack_spans.tracer, name="C")
    fault = RuntimeError("injected")
    inner.fail_next("get_ancestors", fault)
    with pytest.raises(RuntimeError) as raised:
        traced.get_ancestors(inner.last_accepted(), 10, 10_000, 1.0)
    assert raised.value is fault
    (span,) = vmstack_spans.spans()
    assert span.status.status_code is StatusCode.ERROR
    assert "num_blocks" not in (span.attributes or {})


def test_batching_not_implemented_from_below_is_not_an_error(vmstack_spans: SpanRecorder) -> None:
    """BatchingNotImplemented from below is recorded as an event, not an ERROR, and passes
    up as the same object."""
    inner = memory_vm(batching=True, blocks=3)
    traced = TracedVM(inner, tracer=vmstack_spans.tracer, name="C")
    refusal = BatchingNotImplemented("injected")
    inner.fail_next("batched_parse_block", refusal)
    with pytest.raises(BatchingNotImplemented) as raised:
        traced.batched_parse_block([])
    assert raised.value is refusal
    (span,) = vmstack_spans.spans()
    assert span.status.status_code is StatusCode.UNSET
    assert [event.name for event in span.events] == ["exception"]
    attributes = dict(span.events[0].attributes or {})
    assert attributes == {
        "exception.type": "vmstack.errors.BatchingNotImplemented",
        "exception.message": "injected",
        "exception.escaped": "True",
    }  # no stack trace: none is formatted for the protocol's signal


def test_stacked_traced_layers_nest_their_spans(vmstack_spans: SpanRecorder) -> None:
    """A traced layer's span is the parent of the span of the traced layer below it."""
    inner = memory_vm(batching=True, blocks=10)
    lower = TracedVM(inner, tracer=vmstack_spans.tracer, name="C")
    upper = TracedVM(lower, tracer=vmstack_spans.tracer, name="proposervm")
    assert len(get_ancestors(upper, inner.last_accepted())) == 11
    (outer,) = vmstack_spans.named("proposervm.get_ancestors")
    (nested,) = vmstack_spans.named("C.get_ancestors")
    assert outer.context is not None and nested.parent is not None
    assert nested.parent.span_id == outer.context.span_id
    assert nested.context is not None and nested.context.trace_id == outer.context.trace_id
    assert outer.parent is None


def test_noop_tracer_changes_no_answer() -> None:
    """With the API's no-op tracer the layer answers exactly like the VM below."""
    inner = memory_vm(batching=True, blocks=25)
    traced = TracedVM(inner, tracer=NoOpTracer(), name="C")
    tip = inner.last_accepted()
    assert get_ancestors(traced, tip, max_blocks_num=7) == get_ancestors(
        inner, tip, max_blocks_num=7
    )


@pytest.mark.parametrize("name", ["", None, 3])
def test_name_must_be_a_non_empty_string(name: object) -> None:
    """A missing or empty name is a ValueError."""
    with pytest.raises(ValueError, match="non-empty name"):
        TracedVM(memory_vm(), tracer=SpanRecorder().tracer, name=name)  # type: ignore[arg-type]
