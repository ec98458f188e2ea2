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
exception event without the ERROR status and without a stack trace (it is the protocol's
signal, not a failure: no traceback is formatted for it) and passes up unchanged too (a VM
below that cannot batch now refuses that way: one span with the event). When the VM below
has no batched methods, the batched methods refuse at once, without a span: the engine's
fallback that follows is traced call by call.

Only the OpenTelemetry API is used; the caller injects the tracer (an SDK tracer, or the
API's no-op one). The forwarding is :class:`~vmstack.layers.PassThroughVM`'s;
this module adds the span around each call (:meth:`TracedVM.intercept`).
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from contextvars import Token
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from vmstack.errors import BatchingNotImplemented
from vmstack.interfaces import ChainVM
from vmstack.layers import METHODS, PassThroughBlock, PassThroughVM

__all__ = ["TracedBlock", "TracedVM"]

ResultT = TypeVar("ResultT")
_Attributes = dict[str, AttributeValue] | None


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


def _of_block(args: tuple[Any, ...]) -> _Attributes:
    return {"block_id": args[0].id.hex(), "height": args[0].height}


def _block_fields(span: Span, block: Any) -> None:
    span.set_attribute("block_id", block.id.hex())
    span.set_attribute("height", block.height)


def _nothing(span: Span, result: object) -> None:
    return None


#: Per method: the attributes known before the call (from its arguments), and what the
#: answer adds once it returns.
_ATTRIBUTES: dict[
    str, tuple[Callable[[tuple[Any, ...]], _Attributes], Callable[[Span, Any], None]]
] = {
    "get_block": (
        lambda args: {"block_id": _hex(args[0])},
        lambda span, block: span.set_attribute("height", block.height),
    ),
    "parse_block": (lambda args: {"num_bytes": _size(args[0])}, _block_fields),
    "build_block": (lambda args: None, _block_fields),
    "set_preference": (lambda args: {"block_id": _hex(args[0])}, _nothing),
    "last_accepted": (
        lambda args: None,
        lambda span, block_id: span.set_attribute("block_id", _hex(block_id)),
    ),
    "get_block_id_at_height": (
        lambda args: {"height": args[0]},
        lambda span, block_id: span.set_attribute("block_id", _hex(block_id)),
    ),
    "get_ancestors": (
        lambda args: {
            "block_id": _hex(args[0]),
            "max_blocks_num": args[1],
            "max_blocks_size": args[2],
            "max_retrieval_time": args[3],
        },
        lambda span, answer: span.set_attribute("num_blocks", len(answer)),
    ),
    "batched_parse_block": (lambda args: {"num_blocks": _size(args[0])}, _nothing),
    "block.verify": (_of_block, _nothing),
    "block.accept": (_of_block, _nothing),
    "block.reject": (_of_block, _nothing),
}


class _Scope:
    """One span around one call: current while the call runs, ended when it returns.

    Cheaper than ``start_as_current_span`` (no generator-based context manager), which
    matters on the per-block fallback path.
    """

    __slots__ = ("_token", "span")

    _token: Token[Context]

    def __init__(self, tracer: Tracer, name: str, attributes: _Attributes) -> None:
        self.span: Span = tracer.start_span(name, attributes=attributes)

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        otel_context.detach(self._token)
        span = self.span
        if exc is not None:
            if isinstance(exc, BatchingNotImplemented):
                _record_refusal(span, exc)
            else:
                span.record_exception(exc, escaped=True)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()


def _record_refusal(span: Span, refusal: BatchingNotImplemented) -> None:
    """The ``exception`` event of a refusal to batch, as ``record_exception`` makes it but
    without ``exception.stacktrace``: the refusal is the protocol's signal on a path that
    then succeeds (the engine helper falls back), so no traceback is formatted for it."""
    if not span.is_recording():
        return
    kind = type(refusal)
    span.add_event(
        "exception",
        {
            "exception.type": f"{kind.__module__}.{kind.__qualname__}",
            "exception.message": str(refusal),
            "exception.escaped": "True",
        },
    )


class TracedBlock(PassThroughBlock):
    """A block returned by :class:`TracedVM`; ``verify/accept/reject`` are traced as
    ``"{name}.block.verify"`` etc. and reach the inner block."""

    __slots__ = ()


class TracedVM(PassThroughVM):
    """A pass-through layer that traces every call of ``inner`` with ``tracer``.

    ``name`` prefixes the span names (``"C"``, ``"proposervm"``). The batched methods exist
    always: they forward one call when ``inner`` batches and raise
    ``BatchingNotImplemented`` otherwise.
    """

    __slots__ = ("_span_names", "_tracer")

    block_type = TracedBlock

    def __init__(self, inner: ChainVM, *, tracer: Tracer, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a TracedVM needs a non-empty name, got {name!r}")
        super().__init__(inner, name=name)
        self._tracer = tracer
        self._span_names = {method: f"{name}.{method}" for method in METHODS}

    @property
    def name(self) -> str:
        """The prefix of this layer's span names."""
        return self._name  # type: ignore[return-value]

    @property
    def tracer(self) -> Tracer:
        """The tracer the spans are made with."""
        return self._tracer

    def intercept(self, method: str, forward: Callable[..., ResultT], *args: Any) -> ResultT:
        """Make the call inside one span named ``"{name}.{method}"``, with its attributes."""
        before, after = _ATTRIBUTES[method]
        with _Scope(self._tracer, self._span_names[method], before(args)) as span:
            result = forward(*args)
            after(span, result)
        return result
