"""Hypothesis fuzzing of the server's request handling, as the other parse paths are fuzzed:
any bytes as any method's request get an answer of the method's type, refusals are of the
project's error tree, and nothing a request carries changes the store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.mutations import byte_mutations, mutate
from tests.wrappers.rpc.conftest import ServedChain, build_served_chain
from vmstack.store import MemoryStore
from vmstack.wrappers.rpc import VMServer, vm_pb2
from vmstack.wrappers.rpc.protocol import METHODS, wire_error_of

_FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def chain() -> ServedChain:
    return build_served_chain(MemoryStore(), blocks=12)


@pytest.fixture(scope="module")
def server(chain: ServedChain) -> Iterator[VMServer]:
    with VMServer(chain.full_stack(), clock=chain.clock) as served:
        yield served


def _items(chain: ServedChain) -> dict[bytes, bytes]:
    return {bytes(key): bytes(value) for key, value in chain.store.iterate(b"")}


#: Every method but the two that end or wait on the server (Shutdown closes the stack,
#: WaitForEvent waits on a live call).
FUZZED = sorted(set(METHODS) - {"Shutdown", "WaitForEvent"})


def _check(server: VMServer, chain: ServedChain, method: str, request: bytes) -> str:
    """Answer ``request``; the refusal's wire kind ("" when answered). Fails on an answer
    that does not decode, a refusal from outside the error tree, or a changed store."""
    before = _items(chain)
    try:
        METHODS[method].response.FromString(server.answer(method, request))
        kind = ""
    except Exception as error:
        wire = wire_error_of(error)
        assert wire.kind, wire.message
        kind = wire.kind
    assert _items(chain) == before
    assert server.vm.last_accepted() == chain.tip
    return kind


@_FUZZ
@given(method=st.sampled_from(FUZZED), request=st.binary(max_size=600))
def test_any_bytes_as_any_request(
    server: VMServer, chain: ServedChain, method: str, request: bytes
) -> None:
    """Random bytes get a decodable answer or a refusal of the error tree, never another
    exception out of the server."""
    _check(server, chain, method, request)


@pytest.mark.slow
@_FUZZ
@given(data=st.data())
def test_mutated_valid_requests(server: VMServer, chain: ServedChain, data: st.DataObject) -> None:
    """Valid requests with bytes flipped, cut or lengths corrupted are answered cleanly."""
    tip_bytes = bytes(server.vm.get_block(chain.tip))
    requests = {
        "ParseBlock": vm_pb2.ParseBlockRequest(bytes=tip_bytes),
        "BlockVerify": vm_pb2.BlockVerifyRequest(bytes=tip_bytes, p_chain_height=3),
        "BlockReject": vm_pb2.BlockRejectRequest(id=chain.tip),
        "GetAncestors": vm_pb2.GetAncestorsRequest(
            blk_id=chain.tip,
            max_blocks_num=5,
            max_blocks_size=50_000,
            max_blocks_retrival_time=10**9,
        ),
        "BatchedParseBlock": vm_pb2.BatchedParseBlockRequest(request=[tip_bytes] * 3),
        "GetBlockIDAtHeight": vm_pb2.GetBlockIDAtHeightRequest(height=4),
        "Initialize": vm_pb2.InitializeRequest(chain_data_dir="/nonexistent", config_bytes=b"{}"),
    }
    method = data.draw(st.sampled_from(sorted(requests)))
    request = data.draw(mutate([requests[method].SerializeToString()], byte_mutations))
    _check(server, chain, method, request)


def test_garbage_is_a_malformed_request_and_later_fields_are_skipped(
    server: VMServer, chain: ServedChain
) -> None:
    """Bytes that do not decode are MalformedRequest; a field of a later protocol is skipped,
    as protobuf's rules say, and the request answered."""
    assert _check(server, chain, "GetBlock", b"\x0a\xff\xff\xff\xff\x0f") == "MalformedRequest"
    request = vm_pb2.GetBlockRequest(id=chain.tip).SerializeToString() + b"\x18\x07"
    assert _check(server, chain, "GetBlock", request) == ""
