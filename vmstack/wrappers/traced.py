"""TracedVM: one OpenTelemetry span per call, over any ``ChainVM``.

Spans are named ``"{name}.{method}"`` (``"C.get_ancestors"``, ``"proposervm.get_block"``)
and, for blocks, ``"{name}.block.verify"`` / ``.accept`` / ``.reject``. Attributes are the
cheap facts of the call: ``block_id`` (hex), ``height``, ``max_blocks_num``,
``max_blocks_size``, ``max_retrieval_time`` and ``num_blocks`` (the answer's length for
``get_ancestors``, the batch's length for ``batched_parse_block``).

A batched call gets ONE span, never one per block: a span costs tens of microseconds with
the SDK, a block of the batched path about two. The span is made current
while the call runs, so the spans of traced layers below nest under it.

An error from below is recorded on the span (an exception event and status ERROR) and
re-raised unchanged, the very object. ``BatchingNotImplemented`` from below is recorded as an
event without the ERROR status (it is the protocol's signal, not a failure) and passes up
unchanged too. When the VM below cannot batch at all, the batched methods refuse at once,
without a span: the engine's fallback that follows is traced call by call.

Only the OpenTelemetry API is used; the caller injects the tracer (an SDK tracer, or the
API's no-op one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized
from contextvars import Token
from types import TracebackType

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from vmstack.errors import BatchingNotImplemented
from vmstack.interfaces import Block, ChainVM
from vmstack.wrappers.base import BatchingWatch, WrappedBlock, refusal

__all__ = ["TracedBlock", "TracedVM"]


def _size(value: object) -> int:
    """The length of a call's argument for a span attribute, or -1 for an argument without
    one (the layer traces what it was given and leaves judging it to the layer below)."""
    return len(value) if isinstance(value, Sized) else -1


def _hex(block_id: object) -> str:
    """A block ID as the ``block_id`` attribute: hex for bytes, the repr for anything else
    (the layer traces what it was given and leaves judging it to the layer below)."""
    if isinstance(block_id, bytes | bytearray | memoryview):
        return bytes(block_id).hex()
    return repr(block_id)


class _Scope:
    """One span around one call: current while the call runs, ended when it returns.

    Cheaper than ``start_as_current_span`` (no generator-based context manager), which
    matters on the per-block fallback path.
    """

    __slots__ = ("_token", "span")

    _token: Token[Context]

    def __init__(self, tracer: Tracer, name: str,
                 attributes: dict[str, AttributeValue] | None) -> None:
        self.span: Span = tracer.start_span(name, attributes=attributes)

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        otel_context.detach(self._token)
        span = self.span
        if exc is not None:
            span.record_exception(exc, escaped=True)
            if not isinstance(exc, BatchingNotImplemented):
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()


class _Spans:
    """The tracer and span names of one traced layer, shared by the layer and its blocks."""

    __slots__ = ("accept", "batched_parse_block", "build_block", "get_ancestors", "get_block",
                 "get_block_id_at_height", "last_accepted", "name", "parse_block", "reject",
                 "set_preference", "tracer", "verify")

    def __init__(self, tracer: Tracer, name: str) -> None:
        self.tracer = tracer
        self.name = name
        self.get_block = f"{name}.get_block"
        self.parse_block = f"{name}.parse_block"
        self.build_block = f"{name}.build_block"
        self.set_preference = f"{name}.set_preference"
        self.last_accepted = f"{name}.last_accepted"
        self.get_block_id_at_height = f"{name}.get_block_id_at_height"
        self.get_ancestors = f"{name}.get_ancestors"
        self.batched_parse_block = f"{name}.batched_parse_block"
        self.verify = f"{name}.block.verify"
        self.accept = f"{name}.block.accept"
        self.reject = f"{name}.block.reject"

    def scope(self, span_name: str,
              attributes: dict[str, AttributeValue] | None = None) -> _Scope:
        return _Scope(self.tracer, span_name, attributes)


class TracedBlock(WrappedBlock):
    """A block returned by :class:`TracedVM`; ``verify/accept/reject`` are traced as
    ``"{name}.block.verify"`` etc. and reach the inner block."""

    __slots__ = ("_spans",)

    def __init__(self, inner: Block, spans: _Spans) -> None:
        super().__init__(inner)
        self._spans = spans

    def _attributes(self) -> dict[str, AttributeValue]:
        return {"block_id": self._inner.id.hex(), "height": self._inner.height}

    def verify(self) -> None:
        with self._spans.scope(self._spans.verify, self._attributes()):
            self._inner.verify()

    def accept(self) -> None:
        with self._spans.scope(self._spans.accept, self._attributes()):
            self._inner.accept()

    def reject(self) -> None:
        with self._spans.scope(self._spans.reject, self._attributes()):
            self._inner.reject()


class TracedVM:
    """A pass-through layer that traces every call of ``inner`` with ``tracer``.

    ``name`` prefixes the span names (``"C"``, ``"proposervm"``). The batched methods exist
    always: they forward one call when ``inner`` batches and raise
    ``BatchingNotImplemented`` otherwise (see :mod:`vmstack.wrappers.base`).
    """

    __slots__ = ("_below", "_inner", "_spans")

    def __init__(self, inner: ChainVM, *, tracer: Tracer, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a TracedVM needs a non-empty name, got {name!r}")
        self._inner = inner
        self._spans = _Spans(tracer, name)
        self._below = BatchingWatch(inner)

    @property
    def inner(self) -> ChainVM:
        """The VM below this layer."""
        return self._inner

    @property
    def batching(self) -> bool:
        """Whether batched calls are forwarded (the VM below batches) rather than refused."""
        return self._below.now

    def watch_batching(self, callback: Callable[[bool], None]) -> bool:
        """Subscribe ``callback`` to changes of :attr:`batching` (True), or say the layer
        is asked live because the VM below is (False)."""
        return self._below.watch(callback)

    @property
    def name(self) -> str:
        """The prefix of this layer's span names."""
        return self._spans.name

    @property
    def tracer(self) -> Tracer:
        """The tracer the spans are made with."""
        return self._spans.tracer

    # --- ChainVM -------------------------------------------------------------------------

    def get_block(self, block_id: bytes) -> TracedBlock:
        spans = self._spans
        with spans.scope(spans.get_block, {"block_id": _hex(block_id)}) as span:
            block = self._inner.get_block(block_id)
            span.set_attribute("height", block.height)
        return TracedBlock(block, spans)

    def parse_block(self, data: bytes) -> TracedBlock:
        spans = self._spans
        with spans.scope(spans.parse_block, {"num_bytes": _size(data)}) as span:
            block = self._inner.parse_block(data)
            span.set_attribute("block_id", block.id.hex())
            span.set_attribute("height", block.height)
        return TracedBlock(block, spans)

    def build_block(self) -> TracedBlock:
        spans = self._spans
        with spans.scope(spans.build_block) as span:
            block = self._inner.build_block()
            span.set_attribute("block_id", block.id.hex())
            span.set_attribute("height", block.height)
        return TracedBlock(block, spans)

    def set_preference(self, block_id: bytes) -> None:
        spans = self._spans
        with spans.scope(spans.set_preference, {"block_id": _hex(block_id)}):
            self._inner.set_preference(block_id)

    def last_accepted(self) -> bytes:
        spans = self._spans
        with spans.scope(spans.last_accepted) as span:
            block_id = self._inner.last_accepted()
            span.set_attribute("block_id", _hex(block_id))
        return block_id

    def get_block_id_at_height(self, height: int) -> bytes:
        spans = self._spans
        with spans.scope(spans.get_block_id_at_height, {"height": height}) as span:
            block_id = self._inner.get_block_id_at_height(height)
            span.set_attribute("block_id", _hex(block_id))
        return block_id

    # --- BatchedChainVM ------------------------------------------------------------------

    def get_ancestors(self, block_id: bytes, max_blocks_num: int, max_blocks_size: int,
                      max_retrieval_time: float) -> list[bytes]:
        batched = self._below.ready()
        if batched is None:
            raise refusal(f"TracedVM({self._spans.name})", self._inner)
        spans = self._spans
        with spans.scope(spans.get_ancestors, {
            "block_id": _hex(block_id),
            "max_blocks_num": max_blocks_num,
            "max_blocks_size": max_blocks_size,
            "max_retrieval_time": max_retrieval_time,
        }) as span:
            answer = batched.get_ancestors(block_id, max_blocks_num, max_blocks_size,
                                           max_retrieval_time)
            span.set_attribute("num_blocks", len(answer))
        return answer

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[TracedBlock]:
        batched = self._below.ready()
        if batched is None:
            raise refusal(f"TracedVM({self._spans.name})", self._inner)
        spans = self._spans
        with spans.scope(spans.batched_parse_block, {"num_blocks": _size(blocks)}):
            parsed = batched.batched_parse_block(blocks)
        return [TracedBlock(block, spans) for block in parsed]

    def __repr__(self) -> str:
        return f"TracedVM({self._inner!r}, name={self._spans.name!r})"
