"""The gossip messages on the wire, as avalanchego's p2p SDK sends them.

An ``AppGossip`` or ``AppRequest`` payload is the uvarint ID of the handler it is for
(:data:`TRANSACTION_GOSSIP_HANDLER`, 0, for transaction gossip: the one byte ``0x00``) and
then the handler's message; an ``AppResponse`` carries no prefix (the request it answers
names the handler). The messages are ``sdk.proto``'s (``sdk_pb2`` beside this module):
``PushGossip{gossip}``, ``PullGossipRequest{salt, filter}``, ``PullGossipResponse{gossip}``.

Bytes that do not read are :class:`~vmstack.errors.MalformedRequest` (a ``ValueError``)
naming what failed; as upstream, unknown protobuf fields are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from google.protobuf.message import DecodeError

from vmstack.errors import MalformedRequest
from vmstack.gossip import sdk_pb2
from vmstack.gossip.bloom import BloomFilter

__all__ = [
    "SALT_SIZE",
    "TRANSACTION_GOSSIP_HANDLER",
    "marshal_pull_request",
    "marshal_pull_response",
    "marshal_push_gossip",
    "parse_pull_request",
    "parse_pull_response",
    "parse_push_gossip",
    "prefix_handler",
    "split_handler",
    "uvarint",
]

#: The handler ID of transaction gossip (avalanchego's ``p2p.TxGossipHandlerID``).
TRANSACTION_GOSSIP_HANDLER: Final = 0
#: The length of a pull request's salt (an ``ids.ID``).
SALT_SIZE: Final = 32
#: The longest uvarint of a 64-bit number.
_MAX_UVARINT_BYTES: Final = 10


def uvarint(value: int) -> bytes:
    """``value`` (0 to 2^64 - 1) as a uvarint: 7 bits a byte, low first, the high bit set
    on every byte but the last (Go's ``binary.AppendUvarint``)."""
    if not 0 <= value < 1 << 64:
        raise ValueError(f"a uvarint holds 0 to 2^64 - 1, not {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def prefix_handler(handler_id: int, message: bytes) -> bytes:
    """``message`` prefixed with ``handler_id`` as a uvarint: an AppGossip or AppRequest
    payload."""
    return uvarint(handler_id) + message


def split_handler(payload: bytes) -> tuple[int, bytes]:
    """``(handler_id, message)`` of an AppGossip or AppRequest payload;
    :class:`~vmstack.errors.MalformedRequest` for a missing, overlong or overflowing
    prefix (as Go's ``binary.Uvarint`` refuses them)."""
    value = 0
    for index, byte in enumerate(payload[:_MAX_UVARINT_BYTES]):
        if index == _MAX_UVARINT_BYTES - 1 and byte > 1:
            break
        value |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            return value, bytes(payload[index + 1 :])
    raise MalformedRequest("gossip payload: no readable uvarint handler prefix")


def _parse(
    message: sdk_pb2.PushGossip | sdk_pb2.PullGossipResponse, data: bytes, what: str
) -> None:
    try:
        message.ParseFromString(bytes(data))
    except DecodeError as error:
        raise MalformedRequest(f"{what}: {error}") from None


def marshal_push_gossip(gossip: Sequence[bytes]) -> bytes:
    """A ``PushGossip`` of the marshalled items ``gossip``."""
    return sdk_pb2.PushGossip(gossip=list(gossip)).SerializeToString()


def parse_push_gossip(data: bytes) -> list[bytes]:
    """The items of a ``PushGossip``."""
    message = sdk_pb2.PushGossip()
    _parse(message, data, "PushGossip")
    return list(message.gossip)


def marshal_pull_request(filter_bytes: bytes, salt: bytes) -> bytes:
    """A ``PullGossipRequest`` of a bloom filter's wire form and its salt."""
    return sdk_pb2.PullGossipRequest(salt=salt, filter=filter_bytes).SerializeToString()


def parse_pull_request(data: bytes) -> tuple[BloomFilter, bytes]:
    """``(filter, salt)`` of a ``PullGossipRequest``: the salt must be 32 bytes and the
    filter must parse (upstream's ``ParseAppRequest``)."""
    message = sdk_pb2.PullGossipRequest()
    try:
        message.ParseFromString(bytes(data))
    except DecodeError as error:
        raise MalformedRequest(f"PullGossipRequest: {error}") from None
    if len(message.salt) != SALT_SIZE:
        raise MalformedRequest(
            f"PullGossipRequest: a salt is {SALT_SIZE} bytes, not {len(message.salt)}"
        )
    return BloomFilter.parse(message.filter), bytes(message.salt)


def marshal_pull_response(gossip: Sequence[bytes]) -> bytes:
    """A ``PullGossipResponse`` of the marshalled items ``gossip``."""
    return sdk_pb2.PullGossipResponse(gossip=list(gossip)).SerializeToString()


def parse_pull_response(data: bytes) -> list[bytes]:
    """The items of a ``PullGossipResponse``."""
    message = sdk_pb2.PullGossipResponse()
    _parse(message, data, "PullGossipResponse")
    return list(message.gossip)
