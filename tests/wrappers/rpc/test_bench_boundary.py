"""The boundary bench's floor: a bare gRPC server in another process answering the
pre-built response; and its sides timed in turn."""

from __future__ import annotations

from pathlib import Path

import grpc
from google.protobuf.message import Message

from vmstack.benchmarks import alternated_medians
from vmstack.benchmarks.boundary import _bare_server
from vmstack.wrappers.rpc import vm_pb2


def test_the_bare_server_answers_the_prebuilt_response_over_a_unix_socket(
    tmp_path: Path,
) -> None:
    request = vm_pb2.BatchedParseBlockRequest(request=[b"a" * 100, b"b" * 50])
    response = vm_pb2.BatchedParseBlockResponse(
        response=[vm_pb2.ParseBlockResponse(id=b"i" * 32, parent_id=b"p" * 32, height=7)]
    )
    calls = {"BatchedParseBlock-2": (request, response)}
    with (
        _bare_server(tmp_path / "bare", calls) as address,
        grpc.insecure_channel(address) as channel,
    ):
        assert address.startswith("unix:")
        stub = channel.unary_unary(
            "/vmstack.bench.Bare/BatchedParseBlock-2",
            request_serializer=vm_pb2.BatchedParseBlockRequest.SerializeToString,
            response_deserializer=vm_pb2.BatchedParseBlockResponse.FromString,
        )
        assert stub(request, timeout=30) == response


def test_sides_are_timed_in_turn_round_by_round() -> None:
    # The crossing rows' timing: one warm-up call each, then rounds of ``number`` calls a
    # side, the sides' order reversed every other round.
    order: list[str] = []
    medians = alternated_medians(
        (lambda: order.append("a"), lambda: order.append("b")), repeat=3, number=2
    )
    warm_up, forward, backward = ["a", "b"], ["a", "a", "b", "b"], ["b", "b", "a", "a"]
    assert order == [*warm_up, *forward, *backward, *forward]
    assert len(medians) == 2 and all(seconds >= 0 for seconds in medians)


def test_the_bare_server_answers_a_vmclient_by_the_requests_size(tmp_path: Path) -> None:
    """``vm.VM``'s own methods answer a VMClient the pre-built response of the request's
    size: the client's side of a crossing row, with nothing of a served stack's."""
    from vmstack.wrappers.rpc import VMClient

    blocks = {size: [bytes([size, index]) * 20 for index in range(size)] for size in (1, 3)}
    calls: dict[str, tuple[Message, Message]] = {}
    for size, batch in blocks.items():
        calls[f"GetAncestors-{size}"] = (
            vm_pb2.GetAncestorsRequest(max_blocks_num=size),
            vm_pb2.GetAncestorsResponse(blks_bytes=batch),
        )
        calls[f"BatchedParseBlock-{size}"] = (
            vm_pb2.BatchedParseBlockRequest(request=batch),
            vm_pb2.BatchedParseBlockResponse(
                response=[
                    vm_pb2.ParseBlockResponse(
                        id=bytes([index]) * 32, parent_id=b"p" * 32, height=index + 1
                    )
                    for index in range(size)
                ]
            ),
        )
    with (
        _bare_server(tmp_path / "bare", calls) as address,
        VMClient(address, timeout=30) as client,
    ):
        for size, batch in blocks.items():
            assert client.get_ancestors(b"t" * 32, size, 1 << 30, 10.0) == batch
            parsed = client.batched_parse_block(batch)
            assert [block.height for block in parsed] == list(range(1, size + 1))
            assert [bytes(block) for block in parsed] == batch
