"""The service definition and what both sides agree on: generated code, errors, requests."""

from __future__ import annotations

import pytest

from vmstack.errors import (
    BatchingNotImplemented,
    BlockNotFound,
    InvalidBlock,
    StoreCorrupted,
    VMStackError,
    VMUnavailable,
)
from vmstack.wrappers.rpc import vm_pb2
from vmstack.wrappers.rpc.protocol import (
    MAX_REQUEST_SIZE,
    METHODS,
    MalformedRequest,
    decode_request,
    error_of,
    failure_of,
)


def test_generated_module_matches_the_proto() -> None:
    """vm_pb2 was generated from vm.proto as it is now (regenerate after changing it)."""
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the test extra) compiles vm.proto")
    from vmstack.wrappers.rpc.regenerate import compile_descriptor

    assert vm_pb2.DESCRIPTOR.serialized_pb == compile_descriptor(), (
        "vm_pb2.py is stale: run python -m vmstack.wrappers.rpc.regenerate")


def test_every_method_of_the_service_is_known() -> None:
    """The method table is read from the descriptor: the ChainVM calls, decisions, the
    batched protocol, transaction submission, health and description."""
    assert set(METHODS) == {
        "GetBlock", "ParseBlock", "BuildBlock", "SetPreference", "LastAccepted",
        "GetBlockIDAtHeight", "BlockVerify", "BlockAccept", "BlockReject", "GetAncestors",
        "BatchedParseBlock", "SubmitTransactions", "Health", "Describe"}
    for method in METHODS.values():
        assert method.path == f"/vmstack.rpc.VM/{method.name}"
        assert "failure" in method.response.DESCRIPTOR.fields_by_name


@pytest.mark.parametrize("error", [
    BlockNotFound("block ab is not known"),
    StoreCorrupted("header of block 7 fails its checksum"),
    BatchingNotImplemented("TracedVM(C) cannot batch"),
    VMUnavailable("the VM at unix:/x is gone"),
    ValueError("a block ID is 32 bytes, got 3"),
    VMStackError("some other refusal"),
])
def test_errors_cross_as_themselves(error: Exception) -> None:
    """Each error of the tree (and ValueError) comes back with its exact type and message."""
    back = error_of(failure_of(error))
    assert type(back) is type(error)
    assert str(back) == str(error)


@pytest.mark.parametrize("index", [None, 0, 7])
def test_invalid_block_keeps_its_reason_and_index(index: int | None) -> None:
    """InvalidBlock crosses with its reason, its batch index and the same message."""
    error = InvalidBlock("expected an RLP list", index=index)
    back = error_of(failure_of(error))
    assert isinstance(back, InvalidBlock)
    assert (back.reason, back.index, str(back)) == (error.reason, error.index, str(error))


def test_an_error_outside_the_tree_is_a_vmstack_error_naming_it() -> None:
    """A served VM's bug is not raised as a builtin of the caller's: it is a VMStackError
    that names the original type."""
    back = error_of(failure_of(KeyError("boom")))
    assert type(back) is VMStackError
    assert "KeyError" in str(back)


def test_decode_request_refuses_bytes_that_are_not_a_request() -> None:
    """Garbage is MalformedRequest (a ValueError), not a protobuf exception."""
    with pytest.raises(MalformedRequest, match="does not decode"):
        decode_request(METHODS["GetBlock"], b"\x0a\xff\xff\xff\xff\x0f")


def test_decode_request_refuses_unknown_fields() -> None:
    """A field the request type does not define is refused, not silently dropped."""
    known = vm_pb2.GetBlockRequest(id=bytes(32)).SerializeToString()
    unknown_field_7 = b"\x38\x01"
    assert decode_request(METHODS["GetBlock"], known).id == bytes(32)  # type: ignore[attr-defined]
    with pytest.raises(MalformedRequest, match="does not know"):
        decode_request(METHODS["GetBlock"], known + unknown_field_7)


def test_decode_request_refuses_oversized_requests_unread() -> None:
    """Anything over the request limit is refused by its length alone."""
    with pytest.raises(MalformedRequest, match="over the"):
        decode_request(METHODS["BatchedParseBlock"], bytes(MAX_REQUEST_SIZE + 1))
