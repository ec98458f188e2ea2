"""The gossip messages on the wire: sdk.proto's field numbers as avalanchego has them, the
generated module current, the uvarint handler prefix."""

from __future__ import annotations

import pytest

from vmstack.errors import MalformedRequest
from vmstack.gossip import (
    BloomFilter,
    marshal_pull_request,
    marshal_pull_response,
    marshal_push_gossip,
    parse_pull_request,
    parse_pull_response,
    parse_push_gossip,
    prefix_handler,
    sdk_pb2,
    split_handler,
    uvarint,
)


def test_the_sdk_module_is_generated_from_sdk_proto_as_it_is() -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the test extra) compiles the protos")
    from vmstack.wrappers.rpc.regenerate import PROTOS, compile_descriptor

    assert "vmstack/gossip/sdk.proto" in PROTOS
    assert sdk_pb2.DESCRIPTOR.serialized_pb == compile_descriptor("vmstack/gossip/sdk.proto"), (
        "sdk_pb2 is stale: run python -m vmstack.wrappers.rpc.regenerate"
    )


def test_field_numbers_are_upstreams() -> None:
    fields = {
        message: {field.name: field.number for field in descriptor.fields}
        for message, descriptor in sdk_pb2.DESCRIPTOR.message_types_by_name.items()
    }
    assert fields == {
        "PullGossipRequest": {"salt": 2, "filter": 3},
        "PullGossipResponse": {"gossip": 1},
        "PushGossip": {"gossip": 1},
    }
    assert sdk_pb2.DESCRIPTOR.package == "sdk"


def test_the_bytes_on_the_wire() -> None:
    # field 1, wire type 2 (0x0a), then each item's length and bytes
    assert marshal_push_gossip([b"ab", b"c"]) == b"\x0a\x02ab\x0a\x01c"
    assert marshal_pull_response([b"ab"]) == b"\x0a\x02ab"
    # salt is field 2 (0x12), filter field 3 (0x1a)
    salt = bytes(range(32))
    wire = BloomFilter(1, 1, seeds=[7]).marshal()
    assert marshal_pull_request(wire, salt) == b"\x12\x20" + salt + b"\x1a\x0a" + wire
    bloom, parsed_salt = parse_pull_request(marshal_pull_request(wire, salt))
    assert (bloom.marshal(), parsed_salt) == (wire, salt)
    assert parse_push_gossip(b"\x0a\x02ab\x0a\x01c") == [b"ab", b"c"]
    assert parse_pull_response(b"") == []


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02")],
)
def test_the_handler_prefix_is_a_uvarint(value: int, encoded: bytes) -> None:
    assert uvarint(value) == encoded
    assert prefix_handler(value, b"msg") == encoded + b"msg"
    assert split_handler(encoded + b"msg") == (value, b"msg")


def test_the_largest_uvarint_and_overflow() -> None:
    top = uvarint((1 << 64) - 1)
    assert len(top) == 10 and split_handler(top + b"x") == ((1 << 64) - 1, b"x")
    with pytest.raises(MalformedRequest):
        split_handler(b"\xff" * 9 + b"\x02")  # past 64 bits
    with pytest.raises(MalformedRequest):
        split_handler(b"\x80\x80")  # never ends
    with pytest.raises(ValueError):
        uvarint(-1)


def test_unreadable_messages_are_malformed_requests() -> None:
    for parse in (parse_push_gossip, parse_pull_response, parse_pull_request):
        with pytest.raises(MalformedRequest):
            parse(b"\x0a\x05ab")  # a length past the end
