"""VMClient holds a server's answers to the protocol: a deliberately buggy server (a fake
servicer answering what each test says) gets VMUnavailable naming the rule, never its
answer passed on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

import vmstack
from tests.wrappers.rpc.conftest import build_served_chain
from vmstack.errors import BlockNotFound, InvalidBlock, VMStackError, VMUnavailable
from vmstack.store import MemoryStore
from vmstack.wrappers.rpc import VMClient, VMServer, vm_pb2
from vmstack.wrappers.rpc.protocol import (
    ERROR_METADATA_KEY,
    MAX_RESPONSE_SIZE,
    METHODS,
    SERVICE,
    wire_error_of,
)

ASKED = b"\x11" * 32
OTHER = b"\x22" * 32
PARENT = b"\x33" * 32


class FakeServicer:
    """A gRPC server of avalanchego's ``vm.VM`` only (no vmstack extras) that answers each
    method with ``answers[method]`` whatever the request (an empty response where none is
    given), or fails it with ``failures[method]``: a status with that message and, when
    ``typed`` is set, vmstack's typed error in the trailing metadata."""

    def __init__(self, directory: Path) -> None:
        self.answers: dict[str, Message] = {}
        self.failures: dict[str, Exception] = {}
        self.typed = True
        self.server = grpc.server(
            ThreadPoolExecutor(max_workers=2),
            options=[("grpc.max_send_message_length", MAX_RESPONSE_SIZE)],
        )
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(self._answer(name))
            for name, method in METHODS.items()
            if method.service == SERVICE
        }
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers),)
        )
        self.address = f"unix:{directory / 'fake.sock'}"
        assert self.server.add_insecure_port(self.address)
        self.server.start()

    def _answer(self, name: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        def answer(request: bytes, context: grpc.ServicerContext) -> bytes:
            failure = self.failures.get(name)
            if failure is not None:
                if self.typed:
                    context.set_trailing_metadata(
                        ((ERROR_METADATA_KEY, wire_error_of(failure).SerializeToString()),)
                    )
                context.abort(grpc.StatusCode.UNKNOWN, str(failure))
            response = self.answers.get(name) or METHODS[name].response()
            return response.SerializeToString()

        return answer


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[FakeServicer, VMClient]]:
    servicer = FakeServicer(tmp_path)
    with VMClient(servicer.address, timeout=10.0) as client:
        yield servicer, client
    servicer.server.stop(None).wait(10)


def parsed(block_id: bytes = ASKED, parent_id: bytes = PARENT) -> vm_pb2.ParseBlockResponse:
    return vm_pb2.ParseBlockResponse(id=block_id, parent_id=parent_id, height=7)


Call = Callable[[VMClient], object]

#: (what the client is asked, the method the server answers, its answer, the rule named)
BAD_ANSWERS: list[tuple[str, Call, str, Message, str]] = [
    (
        "2,001 ancestors for the default 2,000",
        lambda c: c.get_ancestors(ASKED, 2000, 1 << 30, 1.0),
        "GetAncestors",
        vm_pb2.GetAncestorsResponse(blks_bytes=[b"x"] * 2001),
        "rule 4",
    ),
    (
        "ancestors over the byte budget",
        lambda c: c.get_ancestors(ASKED, 2000, 1_677_721, 1.0),
        "GetAncestors",
        vm_pb2.GetAncestorsResponse(blks_bytes=[b"x" * (1 << 20)] * 2),
        "rule 4",
    ),
    (
        "a second ancestor past a budget the first one fills",
        lambda c: c.get_ancestors(ASKED, 10, 100, 1.0),
        "GetAncestors",
        vm_pb2.GetAncestorsResponse(blks_bytes=[b"x" * 200, b"y"]),
        "rule 4",
    ),
    (
        "a fetched block with a 5-byte parent",
        lambda c: c.get_block(ASKED),
        "GetBlock",
        vm_pb2.GetBlockResponse(parent_id=b"\x33" * 5, bytes=b"block"),
        "32 bytes",
    ),
    (
        "a fetched block without bytes",
        lambda c: c.get_block(ASKED),
        "GetBlock",
        vm_pb2.GetBlockResponse(parent_id=PARENT),
        "bytes",
    ),
    (
        "a built block without bytes",
        lambda c: c.build_block(),
        "BuildBlock",
        vm_pb2.BuildBlockResponse(id=ASKED, parent_id=PARENT),
        "bytes",
    ),
    (
        "a built block with a 5-byte ID",
        lambda c: c.build_block(),
        "BuildBlock",
        vm_pb2.BuildBlockResponse(id=b"\x11" * 5, parent_id=PARENT, bytes=b"b"),
        "32 bytes",
    ),
    (
        "a parsed block with an empty ID",
        lambda c: c.parse_block(b"block"),
        "ParseBlock",
        parsed(b""),
        "32 bytes",
    ),
    (
        "a parsed block with a 5-byte parent",
        lambda c: c.parse_block(b"block"),
        "ParseBlock",
        parsed(parent_id=b"\x33" * 5),
        "32 bytes",
    ),
    (
        "a last accepted block without bytes",
        lambda c: c.last_accepted(),
        "Initialize",
        vm_pb2.InitializeResponse(last_accepted_id=ASKED, last_accepted_parent_id=PARENT),
        "bytes",
    ),
    (
        "a 5-byte last accepted ID",
        lambda c: c.last_accepted(),
        "Initialize",
        vm_pb2.InitializeResponse(
            last_accepted_id=b"\x11" * 5, last_accepted_parent_id=PARENT, bytes=b"b"
        ),
        "32 bytes",
    ),
    (
        "a 5-byte ID at a height",
        lambda c: c.get_block_id_at_height(3),
        "GetBlockIDAtHeight",
        vm_pb2.GetBlockIDAtHeightResponse(blk_id=b"\x11" * 5),
        "32 bytes",
    ),
    (
        "a fetched block answered with err=42, no such value",
        lambda c: c.get_block(ASKED),
        "GetBlock",
        vm_pb2.GetBlockResponse(err=42),  # type: ignore[arg-type]
        "one of vm.Error's values",
    ),
    (
        "a fetched block with ERROR_NOT_FOUND beside its bytes",
        lambda c: c.get_block(ASKED),
        "GetBlock",
        vm_pb2.GetBlockResponse(err=vm_pb2.ERROR_NOT_FOUND, parent_id=PARENT, bytes=b"block"),
        "error or data",
    ),
    (
        "an ID at a height with ERROR_CLOSED beside it",
        lambda c: c.get_block_id_at_height(3),
        "GetBlockIDAtHeight",
        vm_pb2.GetBlockIDAtHeightResponse(blk_id=ASKED, err=vm_pb2.ERROR_CLOSED),
        "error or data",
    ),
    (
        "an ID at a height with err=42 beside it",
        lambda c: c.get_block_id_at_height(3),
        "GetBlockIDAtHeight",
        vm_pb2.GetBlockIDAtHeightResponse(blk_id=ASKED, err=42),  # type: ignore[arg-type]
        "one of vm.Error's values",
    ),
    (
        "an ID at a height answered with err=42 alone",
        lambda c: c.get_block_id_at_height(3),
        "GetBlockIDAtHeight",
        vm_pb2.GetBlockIDAtHeightResponse(err=42),  # type: ignore[arg-type]
        "one of vm.Error's values",
    ),
    (
        "3 parsed blocks for 2",
        lambda c: c.batched_parse_block([b"a", b"b"]),
        "BatchedParseBlock",
        vm_pb2.BatchedParseBlockResponse(response=[parsed()] * 3),
        "rule 7",
    ),
    (
        "1 parsed block for 2",
        lambda c: c.batched_parse_block([b"a", b"b"]),
        "BatchedParseBlock",
        vm_pb2.BatchedParseBlockResponse(response=[parsed()]),
        "rule 7",
    ),
    (
        "a parsed element with a 5-byte ID",
        lambda c: c.batched_parse_block([b"a", b"b"]),
        "BatchedParseBlock",
        vm_pb2.BatchedParseBlockResponse(response=[parsed(), parsed(b"\x11" * 5)]),
        "32 bytes",
    ),
]


@pytest.mark.parametrize(
    ("call", "method", "answer", "rule"),
    [case[1:] for case in BAD_ANSWERS],
    ids=[case[0] for case in BAD_ANSWERS],
)
def test_an_answer_that_breaks_the_protocol_is_vm_unavailable_naming_the_rule(
    fake: tuple[FakeServicer, VMClient], call: Call, method: str, answer: Message, rule: str
) -> None:
    servicer, client = fake
    servicer.answers[method] = answer
    with pytest.raises(VMUnavailable, match=f"{method}: .*broke the protocol.*{rule}"):
        call(client)


@pytest.mark.parametrize("index", [5, None])
def test_an_invalid_block_naming_no_element_of_the_batch_is_vm_unavailable(
    fake: tuple[FakeServicer, VMClient], index: int | None
) -> None:
    servicer, client = fake
    servicer.failures["BatchedParseBlock"] = InvalidBlock("bad", index=index)
    with pytest.raises(VMUnavailable, match="rule 7"):
        client.batched_parse_block([b"a", b"b"])


def test_answers_within_the_rules_are_passed_on(fake: tuple[FakeServicer, VMClient]) -> None:
    """The same checks let every lawful answer through: a first ancestor larger than the
    size budget, the block asked for, an InvalidBlock naming an element of the batch."""
    servicer, client = fake
    servicer.answers["GetAncestors"] = vm_pb2.GetAncestorsResponse(blks_bytes=[b"x" * 200])
    assert client.get_ancestors(ASKED, 10, 100, 1.0) == [b"x" * 200]
    servicer.answers["GetAncestors"] = vm_pb2.GetAncestorsResponse(blks_bytes=[b"x"] * 2000)
    assert len(client.get_ancestors(ASKED, 2000, 1 << 30, 1.0)) == 2000
    servicer.answers["GetBlock"] = vm_pb2.GetBlockResponse(parent_id=PARENT, bytes=b"block")
    block = client.get_block(ASKED)
    assert (block.id, block.parent_id, bytes(block)) == (ASKED, PARENT, b"block")
    servicer.failures["BatchedParseBlock"] = InvalidBlock("bad", index=1)
    with pytest.raises(InvalidBlock) as error:
        client.batched_parse_block([b"a", b"b"])
    assert error.value.index == 1


def test_a_server_that_is_not_vmstacks_gives_messages_and_not_found(
    fake: tuple[FakeServicer, VMClient],
) -> None:
    """Against a plain vm.VM server (no typed errors, no extras) the client still works:
    an error is VMStackError with the server's message, ERROR_NOT_FOUND is BlockNotFound,
    and vmstack's extras are VMStackError saying the server does not offer them."""
    servicer, client = fake
    servicer.typed = False
    servicer.failures["BlockVerify"] = InvalidBlock("state root mismatch", index=None)
    servicer.answers["ParseBlock"] = parsed()
    with pytest.raises(VMStackError, match="state root mismatch") as error:
        client.parse_block(b"block").verify()
    assert type(error.value) is VMStackError
    servicer.answers["GetBlock"] = vm_pb2.GetBlockResponse(err=vm_pb2.ERROR_NOT_FOUND)
    with pytest.raises(BlockNotFound):
        client.get_block(OTHER)
    servicer.answers["GetBlockIDAtHeight"] = vm_pb2.GetBlockIDAtHeightResponse(
        err=vm_pb2.ERROR_NOT_FOUND
    )
    with pytest.raises(BlockNotFound):
        client.get_block_id_at_height(9)
    servicer.answers["GetBlockIDAtHeight"] = vm_pb2.GetBlockIDAtHeightResponse(
        err=vm_pb2.ERROR_CLOSED
    )
    with pytest.raises(VMUnavailable, match="closed"):
        client.get_block_id_at_height(9)
    with pytest.raises(VMStackError, match="does not offer vmstack's extras"):
        client.describe_served()
    with pytest.raises(ValueError, match="int32"):
        client.get_ancestors(ASKED, 1 << 31, 100, 1.0)


class _IndexOutOfRange(VMServer):
    """A server of a real stack whose batched parses fail naming an element that is not
    in the batch."""

    def _answer(self, method: str, request: bytes, call: Any) -> bytes:
        if method != "BatchedParseBlock":
            return super()._answer(method, request, call)
        raise InvalidBlock("bad", index=10_000)


def test_an_index_outside_the_batch_never_reaches_the_proposer_layer() -> None:
    """The engine-side stack over a server that names element 10,000 of a batch of 5 gets
    VMUnavailable from the proposer layer, not an IndexError from inside it."""
    source = build_served_chain(MemoryStore(), blocks=20)
    envelopes = [bytes(source.full_stack().get_block(block_id)) for block_id in source.ids]
    target = build_served_chain(MemoryStore(), blocks=0)
    with (
        _IndexOutOfRange(target.c_part(), clock=target.clock) as server,
        VMClient(server.address, clock=target.clock) as client,
    ):
        stack = target.full_stack(out_of_process=client)
        with pytest.raises(VMUnavailable, match="rule 7"):
            vmstack.batched_parse_block(stack, envelopes[-5:])


def test_an_ancestors_answer_in_another_layout_is_read_as_protobuf_reads_it(
    fake: tuple[FakeServicer, VMClient],
) -> None:
    """An answer with a field this side does not know (a later protocol's) between the
    blocks is read through the protobuf runtime: the blocks, in order, the field skipped;
    the budget still holds it."""
    servicer, client = fake
    wire = b"\x0a\x01a" + b"\x10\x05" + b"\x0a\x02bc"
    servicer.answers["GetAncestors"] = vm_pb2.GetAncestorsResponse.FromString(wire)
    assert servicer.answers["GetAncestors"].SerializeToString() != b"\x0a\x01a\x0a\x02bc"
    assert client.get_ancestors(ASKED, 10, 1 << 20, 1.0) == [b"a", b"bc"]
    with pytest.raises(VMUnavailable, match="rule 4"):
        client.get_ancestors(ASKED, 1, 1 << 20, 1.0)
