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
from vmstack.wrappers.rpc.protocol import METHODS, block_digest

_FUZZ = settings(max_examples=150, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def chain() -> ServedChain:
    return build_served_chain(MemoryStore(), blocks=12)


@pytest.fixture(scope="module")
def server(chain: ServedChain) -> Iterator[VMServer]:
    with VMServer(chain.full_stack(), clock=chain.clock) as served:
        yield served


def _items(chain: ServedChain) -> dict[bytes, bytes]:
    return {bytes(key): bytes(value) for key, value in chain.store.iterate(b"")}


def _check(server: VMServer, chain: ServedChain, method: str, request: bytes) -> int:
    """Answer ``request``; the failure kind (0 when none). Fails on an answer that does not
    decode, a failure from outside the error tree, or a changed store."""
    before = _items(chain)
    answer = METHODS[method].response.FromString(server.answer(method, request))
    failure = answer.failure  # type: ignore[attr-defined]
    assert failure.kind != vm_pb2.Failure.INTERNAL, failure.message
    assert _items(chain) == before
    assert server.vm.last_accepted() == chain.tip
    return int(failure.kind)


@_FUZZ
@given(method=st.sampled_from(sorted(METHODS)), request=st.binary(max_size=600))
def test_any_bytes_as_any_request(server: VMServer, chain: ServedChain, method: str,
                                  request: bytes) -> None:
    """Random bytes get a decodable answer, never an exception out of the server."""
    _check(server, chain, method, request)


@pytest.mark.slow
@_FUZZ
@given(data=st.data())
def test_mutated_valid_requests(server: VMServer, chain: ServedChain, data: st.DataObject
                                ) -> None:
    """Valid requests with bytes flipped, cut or lengths corrupted are answered cleanly."""
    tip_bytes = bytes(server.vm.get_block(chain.tip))
    requests = {
        "ParseBlock": vm_pb2.ParseBlockRequest(bytes=tip_bytes),
        "BlockVerify": vm_pb2.BlockVerifyRequest(id=chain.tip, bytes=tip_bytes),
        "BlockReject": vm_pb2.BlockDecisionRequest(id=chain.tip, digest=block_digest(tip_bytes)),
        "GetAncestors": vm_pb2.GetAncestorsRequest(id=chain.tip, max_blocks_num=5,
                                                   max_blocks_size=50_000,
                                                   max_retrieval_time=1.0),
        "BatchedParseBlock": vm_pb2.BatchedParseBlockRequest(blocks=[tip_bytes] * 3),
        "GetBlockIDAtHeight": vm_pb2.GetBlockIDAtHeightRequest(height=4, now=2e9),
    }
    method = data.draw(st.sampled_from(sorted(requests)))
    request = data.draw(mutate([requests[method].SerializeToString()], byte_mutations))
    _check(server, chain, method, request)


def test_unknown_fields_are_refused_before_the_vm(server: VMServer, chain: ServedChain) -> None:
    """A request with a field the server does not know never reaches the VM."""
    request = vm_pb2.GetBlockRequest(id=chain.tip).SerializeToString() + b"\x18\x07"
    assert _check(server, chain, "GetBlock", request) == vm_pb2.Failure.MALFORMED_REQUEST
