"""What both sides of the process boundary agree on: methods, limits, failures, requests.

The service is defined once, in ``vm.proto``; :data:`METHODS` reads its methods from the
compiled descriptor, so the server's handlers and the client's calls cannot drift from it.

Errors cross in-band: a response's ``failure`` names the kind of error the served VM raised
and its message (:func:`failure_of` on the server, :func:`error_of` on the client), so
``BlockNotFound``, ``InvalidBlock`` (with its index), ``StoreCorrupted``,
``BatchingNotImplemented``, ``VMUnavailable`` and ``ValueError`` arrive as themselves. A
request that cannot be read, carries fields this version does not know, or a caller's
time that is no time (:data:`MAX_CALLER_TIME`), is refused before it reaches the VM
(:func:`decode_request`).

A block is named by its ID and the digest of the bytes its holder has
(:func:`block_digest`): the server keeps the blocks it handed out under both, so a block
of another body under the same ID never takes the place of the one a caller holds.
"""

from __future__ import annotations

import hashlib
import math

import attrs
from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from vmstack.errors import (
    BatchingNotImplemented,
    BlockNotFound,
    InvalidBlock,
    InvalidTransaction,
    MalformedRequest,
    StoreCorrupted,
    VMStackError,
    VMUnavailable,
)
from vmstack.interfaces import Block
from vmstack.wrappers.rpc import vm_pb2

__all__ = [
    "MAX_CALLER_TIME",
    "MAX_MESSAGE_SIZE",
    "MAX_REQUEST_SIZE",
    "MAX_RESPONSE_SIZE",
    "METHODS",
    "MalformedRequest",
    "Method",
    "SERVICE",
    "block_digest",
    "decode_request",
    "error_of",
    "facts_of",
    "failure_of",
]

#: avalanchego's cap on one network message (2 MiB); an Ancestors message (at most
#: ``MAX_CONTAINERS_LEN`` bytes of blocks) fits in it.
MAX_MESSAGE_SIZE = 2 * 1024 * 1024
#: The largest request a server reads: one message plus room for the request's own framing
#: (field tags and lengths, the caller's time). Anything larger is refused unread.
MAX_REQUEST_SIZE = MAX_MESSAGE_SIZE + 64 * 1024
#: The largest response a client reads. Answers are bounded by the caller's own budgets
#: (an Ancestors answer by ``max_blocks_size``), so this only stops a runaway server.
MAX_RESPONSE_SIZE = 64 * 1024 * 1024
#: The latest caller's time (``now``) a request may carry, in seconds: 2^53, the largest
#: whole number a double holds exactly (far beyond any block timestamp in use, far within
#: what a block's timestamp field holds). A later time, a negative one or one that is not
#: finite is a malformed request: it would move a served simulated clock for good.
MAX_CALLER_TIME = float(2**53)
#: The service's full name, as gRPC routes it.
SERVICE = vm_pb2.DESCRIPTOR.services_by_name["VM"].full_name


@attrs.frozen
class Method:
    """One call of the service: its name, gRPC path, and message classes."""

    name: str
    path: str
    request: type[Message]
    response: type[Message]


def _methods() -> dict[str, Method]:
    service = vm_pb2.DESCRIPTOR.services_by_name["VM"]
    return {
        method.name: Method(
            name=method.name,
            path=f"/{SERVICE}/{method.name}",
            request=getattr(vm_pb2, method.input_type.name),
            response=getattr(vm_pb2, method.output_type.name),
        )
        for method in service.methods
    }


#: Every call of the service by name (``"GetAncestors"``, ...), read from ``vm.proto``.
METHODS: dict[str, Method] = _methods()


def _unknown_fields(message: Message) -> bool:
    if len(UnknownFieldSet(message)):
        return True
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        values = value if field.is_repeated else [value]
        if any(_unknown_fields(item) for item in values):
            return True
    return False


def decode_request(method: Method, data: bytes) -> Message:
    """Read ``data`` as a request of ``method``, or raise :class:`MalformedRequest`.

    Refused: anything over :data:`MAX_REQUEST_SIZE`, bytes that do not decode, fields the
    request type does not define (a caller of another version must not be half
    understood), and a caller's time beyond :data:`MAX_CALLER_TIME`, negative or not
    finite.
    """
    if len(data) > MAX_REQUEST_SIZE:
        raise MalformedRequest(
            f"{method.name} request of {len(data)} bytes is over the {MAX_REQUEST_SIZE}-byte "
            "limit")
    request = method.request()
    try:
        request.ParseFromString(data)
    except DecodeError as error:
        raise MalformedRequest(f"{method.name} request does not decode: {error}") from None
    if _unknown_fields(request):
        raise MalformedRequest(f"{method.name} request has fields this server does not know")
    if "now" in request.DESCRIPTOR.fields_by_name and request.HasField("now"):
        now: float = request.now  # type: ignore[attr-defined]
        if not (math.isfinite(now) and 0 <= now <= MAX_CALLER_TIME):
            raise MalformedRequest(f"{method.name} request: the caller's time {now!r} is not "
                                   f"a time from 0 to {MAX_CALLER_TIME:.0f} seconds")
    return request


def block_digest(data: bytes) -> bytes:
    """The SHA-256 digest of a block's bytes, which names them in a decision."""
    return hashlib.sha256(data).digest()


_KIND = vm_pb2.Failure


def failure_of(error: BaseException) -> vm_pb2.Failure:
    """The in-band form of ``error``, most specific kind first."""
    message = str(error)
    if isinstance(error, InvalidBlock):
        failure = vm_pb2.Failure(kind=_KIND.INVALID_BLOCK, message=message, reason=error.reason)
        if error.index is not None:
            failure.index = error.index
        return failure
    kinds: tuple[tuple[type[BaseException], vm_pb2.Failure.Kind.ValueType], ...] = (
        (BlockNotFound, _KIND.BLOCK_NOT_FOUND),
        (InvalidTransaction, _KIND.INVALID_TRANSACTION),
        (StoreCorrupted, _KIND.STORE_CORRUPTED),
        (BatchingNotImplemented, _KIND.BATCHING_NOT_IMPLEMENTED),
        (VMUnavailable, _KIND.VM_UNAVAILABLE),
        (MalformedRequest, _KIND.MALFORMED_REQUEST),
        (VMStackError, _KIND.VM_STACK_ERROR),
        (ValueError, _KIND.VALUE_ERROR),
    )
    for error_type, kind in kinds:
        if isinstance(error, error_type):
            return vm_pb2.Failure(kind=kind, message=message)
    return vm_pb2.Failure(kind=_KIND.INTERNAL, message=f"{type(error).__name__}: {message}")


def error_of(failure: vm_pb2.Failure) -> Exception:
    """The error a client raises for ``failure``: the same kind and message the served VM
    raised (an error outside the project's tree arrives as :class:`VMStackError`)."""
    kind, message = failure.kind, failure.message
    if kind == _KIND.INVALID_BLOCK:
        index = failure.index if failure.HasField("index") else None
        return InvalidBlock(failure.reason or message, index=index)
    simple: dict[int, type[Exception]] = {
        _KIND.BLOCK_NOT_FOUND: BlockNotFound,
        _KIND.INVALID_TRANSACTION: InvalidTransaction,
        _KIND.STORE_CORRUPTED: StoreCorrupted,
        _KIND.BATCHING_NOT_IMPLEMENTED: BatchingNotImplemented,
        _KIND.VM_UNAVAILABLE: VMUnavailable,
        _KIND.VALUE_ERROR: ValueError,
        _KIND.MALFORMED_REQUEST: ValueError,
    }
    if kind in simple:
        return simple[kind](message)
    if kind == _KIND.INTERNAL:
        return VMStackError(f"the served VM failed: {message}")
    return VMStackError(message)


def facts_of(block: Block, *, with_bytes: bool) -> vm_pb2.BlockFacts:
    """What a response says of ``block``; its bytes only where the caller lacks them."""
    facts = vm_pb2.BlockFacts(id=block.id, parent_id=block.parent_id, height=block.height,
                              timestamp=block.timestamp)
    if with_bytes:
        facts.bytes = bytes(block)
    return facts
