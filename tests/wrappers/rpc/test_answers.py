"""VMClient holds a server's answers to the protocol: a deliberately buggy server (a fake
servicer answering what each test says) gets VMUnavailable naming the rule, never its
answer passed on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from google.protobuf.message import Message

import vmstack
from tests.wrappers.rpc.conftest import build_served_chain
from vmstack.errors import InvalidBlock, VMUnavailable
from vmstack.store import MemoryStore
from vmstack.wrappers.rpc import VMClient, VMServer, vm_pb2
from vmstack.wrappers.rpc.protocol import MAX_RESPONSE_SIZE, METHODS, SERVICE

ASKED = b"\x11" * 32
OTHER = b"\x22" * 32
PARENT = b"\x33" * 32


class FakeServicer:
    """A gRPC server of ``vm.proto`` that answers each method with ``answers[method]``,
    whatever the request (an empty response where none is given)."""

    def __init__(self, directory: Path) -> None:
        self.answers: dict[str, Message] = {}
        self.server = grpc.server(ThreadPoolExecutor(max_workers=2),
                                  options=[("grpc.max_send_message_length", MAX_RESPONSE_SIZE)])
        handlers = {name: grpc.unary_unary_rpc_method_handler(self._answer(name))
                    for name in METHODS}
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self.address = f"unix:{directory / 'fake.sock'}"
        assert self.server.add_insecure_port(self.address)
        self.server.start()

    def _answer(self, name: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        def answer(request: bytes, context: grpc.ServicerContext) -> bytes:
            response = self.answers.get(name) or METHODS[name].response()
            return response.SerializeToString()

        return answer


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[FakeServicer, VMClient]]:
    servicer = FakeServicer(tmp_path)
    with VMClient(servicer.address, timeout=10.0) as client:
        yield servicer, client
    servicer.server.stop(None).wait(10)


def facts(block_id: bytes = ASKED, parent_id: bytes = PARENT, data: bytes = b"block"
          ) -> vm_pb2.BlockFacts:
    return vm_pb2.BlockFacts(id=block_id, parent_id=parent_id, height=7, timestamp=9,
                             bytes=data)


def invalid(index: int | None) -> vm_pb2.Failure:
    failure = vm_pb2.Failure(kind=vm_pb2.Failure.INVALID_BLOCK, message="bad", reason="bad")
    if index is not None:
        failure.index = index
    return failure


Call = Callable[[VMClient], object]

#: (what the client is asked, the method the server answers, its answer, the rule named)
BAD_ANSWERS: list[tuple[str, Call, str, Message, str]] = [
    ("2,001 ancestors for the default 2,000",
     lambda c: c.get_ancestors(ASKED, 2000, 1 << 30, 1.0), "GetAncestors",
     vm_pb2.GetAncestorsResponse(blocks=[b"x"] * 2001), "rule 4"),
    ("ancestors over the byte budget",
     lambda c: c.get_ancestors(ASKED, 2000, 1_677_721, 1.0), "GetAncestors",
     vm_pb2.GetAncestorsResponse(blocks=[b"x" * (1 << 20)] * 2), "rule 4"),
    ("a second ancestor past a budget the first one fills",
     lambda c: c.get_ancestors(ASKED, 10, 100, 1.0), "GetAncestors",
     vm_pb2.GetAncestorsResponse(blocks=[b"x" * 200, b"y"]), "rule 4"),
    ("block Y for get_block(X)", lambda c: c.get_block(ASKED), "GetBlock",
     vm_pb2.BlockResponse(block=facts(OTHER)), "the block asked for"),
    ("a 5-byte ID", lambda c: c.get_block(ASKED), "GetBlock",
     vm_pb2.BlockResponse(block=facts(b"\x11" * 5)), "32 bytes"),
    ("no block at all", lambda c: c.get_block(ASKED), "GetBlock",
     vm_pb2.BlockResponse(), "32 bytes"),
    ("a fetched block without bytes", lambda c: c.get_block(ASKED), "GetBlock",
     vm_pb2.BlockResponse(block=facts(data=b"")), "bytes"),
    ("a built block without bytes", lambda c: c.build_block(), "BuildBlock",
     vm_pb2.BlockResponse(block=facts(data=b"")), "bytes"),
    ("a parsed block with an empty ID", lambda c: c.parse_block(b"block"), "ParseBlock",
     vm_pb2.BlockResponse(block=facts(b"")), "32 bytes"),
    ("a parsed block with a 5-byte parent", lambda c: c.parse_block(b"block"), "ParseBlock",
     vm_pb2.BlockResponse(block=facts(parent_id=b"\x33" * 5)), "32 bytes"),
    ("an empty last accepted ID", lambda c: c.last_accepted(), "LastAccepted",
     vm_pb2.BlockIDResponse(), "32 bytes"),
    ("a 5-byte ID at a height", lambda c: c.get_block_id_at_height(3), "GetBlockIDAtHeight",
     vm_pb2.BlockIDResponse(id=b"\x11" * 5), "32 bytes"),
    ("3 parsed blocks for 2", lambda c: c.batched_parse_block([b"a", b"b"]),
     "BatchedParseBlock", vm_pb2.BatchedParseBlockResponse(blocks=[facts()] * 3), "rule 7"),
    ("1 parsed block for 2", lambda c: c.batched_parse_block([b"a", b"b"]),
     "BatchedParseBlock", vm_pb2.BatchedParseBlockResponse(blocks=[facts()]), "rule 7"),
    ("a parsed element with a 5-byte ID", lambda c: c.batched_parse_block([b"a", b"b"]),
     "BatchedParseBlock",
     vm_pb2.BatchedParseBlockResponse(blocks=[facts(), facts(b"\x11" * 5)]), "32 bytes"),
    ("InvalidBlock at index 5 of a batch of 2", lambda c: c.batched_parse_block([b"a", b"b"]),
     "BatchedParseBlock", vm_pb2.BatchedParseBlockResponse(failure=invalid(5)), "rule 7"),
    ("InvalidBlock naming no element of a batch",
     lambda c: c.batched_parse_block([b"a", b"b"]), "BatchedParseBlock",
     vm_pb2.BatchedParseBlockResponse(failure=invalid(None)), "rule 7"),
]


@pytest.mark.parametrize(("call", "method", "answer", "rule"),
                         [case[1:] for case in BAD_ANSWERS],
                         ids=[case[0] for case in BAD_ANSWERS])
def test_an_answer_that_breaks_the_protocol_is_vm_unavailable_naming_the_rule(
        fake: tuple[FakeServicer, VMClient], call: Call, method: str, answer: Message,
        rule: str) -> None:
    servicer, client = fake
    servicer.answers[method] = answer
    with pytest.raises(VMUnavailable, match=f"{method}: .*broke the protocol.*{rule}"):
        call(client)


def test_answers_within_the_rules_are_passed_on(fake: tuple[FakeServicer, VMClient]) -> None:
    """The same checks let every lawful answer through: a first ancestor larger than the
    size budget, the block asked for, an InvalidBlock naming an element of the batch."""
    servicer, client = fake
    servicer.answers["GetAncestors"] = vm_pb2.GetAncestorsResponse(blocks=[b"x" * 200])
    assert client.get_ancestors(ASKED, 10, 100, 1.0) == [b"x" * 200]
    servicer.answers["GetAncestors"] = vm_pb2.GetAncestorsResponse(blocks=[b"x"] * 2000)
    assert len(client.get_ancestors(ASKED, 2000, 1 << 30, 1.0)) == 2000
    servicer.answers["GetBlock"] = vm_pb2.BlockResponse(block=facts())
    assert client.get_block(ASKED).id == ASKED
    servicer.answers["BatchedParseBlock"] = vm_pb2.BatchedParseBlockResponse(
        failure=invalid(1))
    with pytest.raises(InvalidBlock) as error:
        client.batched_parse_block([b"a", b"b"])
    assert error.value.index == 1


class _IndexOutOfRange(VMServer):
    """A server of a real stack whose batched parses fail naming an element that is not
    in the batch."""

    def answer(self, method: str, request: bytes) -> bytes:
        if method != "BatchedParseBlock":
            return super().answer(method, request)
        return vm_pb2.BatchedParseBlockResponse(failure=invalid(10_000)).SerializeToString()


def test_an_index_outside_the_batch_never_reaches_the_proposer_layer() -> None:
    """The engine-side stack over a server that names element 10,000 of a batch of 5 gets
    VMUnavailable from the proposer layer, not an IndexError from inside it."""
    source = build_served_chain(MemoryStore(), blocks=20)
    envelopes = [bytes(source.full_stack().get_block(block_id)) for block_id in source.ids]
    target = build_served_chain(MemoryStore(), blocks=0)
    with _IndexOutOfRange(target.c_part(), clock=target.clock) as server, \
            VMClient(server.address, clock=target.clock) as client:
        stack = target.full_stack(out_of_process=client)
        with pytest.raises(VMUnavailable, match="rule 7"):
            vmstack.batched_parse_block(stack, envelopes[-5:])
