"""A hostile server's typed errors: the client reads a call's trailing metadata into the
error tree's own types only (bounded in size, count and depth, each attribute of its
declared type), and anything else is VMUnavailable naming the rule, never a TypeError or a
RecursionError from inside a layer."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import vmstack
from tests.wrappers.rpc.conftest import build_served_chain
from tests.wrappers.rpc.test_answers import FakeServicer, parsed
from vmstack.errors import BlockNotFound, InvalidBlock, VMUnavailable
from vmstack.store import MemoryStore
from vmstack.wrappers.rpc import VMClient, VMServer, vm_pb2, vmstack_pb2
from vmstack.wrappers.rpc.protocol import (
    ERROR_METADATA_KEY,
    MAX_WIRE_ERROR_SIZE,
    METHODS,
    BrokenWireError,
    error_of_wire,
    json_depth,
    trailing_error,
)

#: 3,000 lists deep: 6 KB that json.loads (and every repr after it) cannot take.
DEEP = "[" * 3000 + "]" * 3000


class RawTrailers(FakeServicer):
    """A fake server that fails ``failing`` (or answers it, with ``answer``) with the raw
    trailing metadata ``trailer``."""

    def __init__(self, directory: Path) -> None:
        self.trailer: bytes = b""
        self.failing = ""
        self.answer_too = False
        super().__init__(directory)

    def _answer(self, name: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        plain = super()._answer(name)

        def answer(request: bytes, context: grpc.ServicerContext) -> bytes:
            if name != self.failing:
                return plain(request, context)
            context.set_trailing_metadata(((ERROR_METADATA_KEY, self.trailer),))
            if self.answer_too:
                return (self.answers.get(name) or METHODS[name].response()).SerializeToString()
            context.abort(grpc.StatusCode.UNKNOWN, "refused")
            raise AssertionError("unreachable")

        return answer


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[tuple[RawTrailers, VMClient]]:
    servicer = RawTrailers(tmp_path)
    with VMClient(servicer.address, timeout=10.0) as client:
        yield servicer, client
    servicer.server.stop(None).wait(10)


def wire(kind: str, message: str = "bad", **attributes: str) -> bytes:
    return vmstack_pb2.WireError(
        kind=kind, message=message, attributes=attributes
    ).SerializeToString()


#: (case, method failing, trailer, the rule named)
HOSTILE: list[tuple[str, str, bytes, str]] = [
    ("index -1", "BatchedParseBlock", wire("InvalidBlock", reason='"x"', index="-1"), "rule 7"),
    ("index 1.5", "BatchedParseBlock", wire("InvalidBlock", reason='"x"', index="1.5"), "type"),
    ("index '0'", "BatchedParseBlock", wire("InvalidBlock", reason='"x"', index='"0"'), "type"),
    ("index true", "BatchedParseBlock", wire("InvalidBlock", reason='"x"', index="true"), "type"),
    (
        "index 2^64",
        "BatchedParseBlock",
        wire("InvalidBlock", reason='"x"', index=str(1 << 64)),
        "type",
    ),
    ("a reason 3,000 lists deep", "BlockVerify", wire("InvalidBlock", reason=DEEP), "nests"),
    ("a reason that is no JSON", "BlockVerify", wire("InvalidBlock", reason="{"), "JSON"),
    ("a reason that is a number", "BlockVerify", wire("InvalidBlock", reason="5"), "type"),
    ("no reason", "BlockVerify", wire("InvalidTransaction"), "every attribute"),
    (
        "a build time that is text",
        "BuildBlock",
        wire("ProposerWindowNotStarted", reason='"r"', build_time='"soon"'),
        "type",
    ),
    (
        "a stored value 3,000 deep",
        "BlockVerify",
        wire("ConfigMismatch", field='"f"', stored=DEEP, given="1"),
        "nests",
    ),
    (
        "17 attributes",
        "BlockVerify",
        wire("InvalidBlock", **{f"a{n}": "1" for n in range(17)}),
        "attributes",
    ),
    ("bytes that are no WireError", "BlockVerify", b"\xff\xff\xff", "WireError"),
]


@pytest.mark.parametrize(
    ("method", "trailer", "rule"), [case[1:] for case in HOSTILE], ids=[case[0] for case in HOSTILE]
)
def test_a_trailer_outside_the_tree_is_vm_unavailable_naming_the_rule(
    raw: tuple[RawTrailers, VMClient], method: str, trailer: bytes, rule: str
) -> None:
    servicer, client = raw
    servicer.failing, servicer.trailer = method, trailer
    servicer.answers["ParseBlock"] = parsed()
    calls: dict[str, Callable[[], object]] = {
        "BatchedParseBlock": lambda: client.batched_parse_block([b"a", b"b"]),
        "BlockVerify": lambda: client.parse_block(b"block").verify(),
        "BuildBlock": client.build_block,
    }
    with pytest.raises(VMUnavailable, match=f"{method}: .*broke the protocol.*{rule}"):
        calls[method]()


def test_a_typed_error_beside_an_answer_is_only_block_not_found(
    raw: tuple[RawTrailers, VMClient],
) -> None:
    """An answer, not a failure, with an InvalidBlock beside it breaks the protocol; with
    BlockNotFound beside ERROR_NOT_FOUND it is that error."""
    servicer, client = raw
    servicer.failing, servicer.answer_too = "GetBlock", True
    servicer.trailer = wire("InvalidBlock", reason='"x"')
    servicer.answers["GetBlock"] = vm_pb2.GetBlockResponse(err=vm_pb2.ERROR_NOT_FOUND)
    with pytest.raises(VMUnavailable, match="no error beside it but BlockNotFound"):
        client.get_block(b"\x01" * 32)
    servicer.trailer = wire("BlockNotFound", "block 01… is not served")
    with pytest.raises(BlockNotFound, match="is not served"):
        client.get_block(b"\x01" * 32)


def test_health_over_nested_details_is_text(raw: tuple[RawTrailers, VMClient]) -> None:
    """Health details 3,000 lists deep, or longer than the client parses, come back as
    text; no RecursionError."""
    servicer, client = raw
    servicer.answers["Health"] = vm_pb2.HealthResponse(details=DEEP.encode())
    assert client.health() == DEEP
    servicer.answers["Health"] = vm_pb2.HealthResponse(
        details=json.dumps({"serving": [[[1]]], "pid": 7}).encode()
    )
    assert client.health() == "serving [[[1]]] (pid 7)"
    nested = json.dumps({"checks": json.loads("[" * 30 + "]" * 30)})
    servicer.answers["Health"] = vm_pb2.HealthResponse(details=nested.encode())
    assert client.health() == nested


def test_an_oversized_trailer_is_refused_unread() -> None:
    with pytest.raises(BrokenWireError, match=f"at most {MAX_WIRE_ERROR_SIZE} bytes"):
        trailing_error(((ERROR_METADATA_KEY, bytes(MAX_WIRE_ERROR_SIZE + 1)),))


def test_attributes_a_class_does_not_declare_are_dropped() -> None:
    back = error_of_wire(
        vmstack_pb2.WireError(
            kind="InvalidBlock", message="m", attributes={"reason": '"r"', "extra": DEEP}
        )
    )
    assert type(back) is InvalidBlock
    assert vars(back) == {"reason": "r", "index": None}


def test_json_depth_skips_strings() -> None:
    assert json_depth('"[[[["') == 0
    assert json_depth('[{"a": "]\\"["}, [1]]') == 2
    assert json_depth(DEEP) == 3000


class _FractionalIndex(VMServer):
    """A server of a real stack whose batched parses fail naming element 1.5."""

    def _answer(self, method: str, request: bytes, call: Any) -> bytes:
        if method != "BatchedParseBlock":
            return super()._answer(method, request, call)
        raise InvalidBlock("bad", index=1.5)  # type: ignore[arg-type]


def test_a_fractional_index_never_reaches_the_proposer_layer() -> None:
    """The engine-side stack over a server naming element 1.5 of a batch gets
    VMUnavailable from the proposer layer, not a TypeError from inside it."""
    source = build_served_chain(MemoryStore(), blocks=6)
    envelopes = [bytes(source.full_stack().get_block(block_id)) for block_id in source.ids]
    target = build_served_chain(MemoryStore(), blocks=0)
    with (
        _FractionalIndex(target.c_part(), clock=target.clock) as server,
        VMClient(server.address, clock=target.clock) as client,
    ):
        stack = target.full_stack(out_of_process=client)
        with pytest.raises(VMUnavailable, match="type"):
            vmstack.batched_parse_block(stack, envelopes[-5:])
