"""What both sides agree on: generated code, the method table, the one table of wire errors,
requests and the caller's time."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vmstack import errors
from vmstack.errors import InvalidBlock, MalformedRequest, VMStackError
from vmstack.wrappers.rpc import metrics_pb2, runtime_pb2, vm_pb2, vmstack_pb2
from vmstack.wrappers.rpc.protocol import (
    MAX_CALLER_TIME,
    MAX_REQUEST_SIZE,
    METHODS,
    NOW_METADATA_KEY,
    WIRE_ERRORS,
    caller_time,
    decode_request,
    error_of_wire,
    wire_error_of,
)

GENERATED = {
    "vmstack/wrappers/rpc/vm.proto": vm_pb2,
    "vmstack/wrappers/rpc/runtime.proto": runtime_pb2,
    "vmstack/wrappers/rpc/metrics.proto": metrics_pb2,
    "vmstack/wrappers/rpc/vmstack.proto": vmstack_pb2,
}


@pytest.mark.parametrize("proto", sorted(GENERATED))
def test_generated_modules_match_the_protos(proto: str) -> None:
    """Each *_pb2 module was generated from its .proto as it is now (regenerate after
    changing one)."""
    pytest.importorskip("grpc_tools", reason="grpcio-tools (the test extra) compiles the protos")
    from vmstack.wrappers.rpc.regenerate import compile_descriptor

    assert GENERATED[proto].DESCRIPTOR.serialized_pb == compile_descriptor(proto), (
        f"the module of {proto} is stale: run python -m vmstack.wrappers.rpc.regenerate"
    )


def test_vm_has_exactly_avalanchegos_methods_and_extras_their_own_service() -> None:
    """vm.VM carries avalanchego's methods and no others (no LastAccepted); Describe and
    SubmitTransactions are vmstack.Extras'."""
    vm_methods = {name for name, method in METHODS.items() if method.service == "vm.VM"}
    assert vm_methods == {
        "Initialize",
        "SetState",
        "Shutdown",
        "CreateHandlers",
        "NewHTTPHandler",
        "WaitForEvent",
        "Connected",
        "Disconnected",
        "BuildBlock",
        "ParseBlock",
        "GetBlock",
        "SetPreference",
        "Health",
        "Version",
        "AppRequest",
        "AppRequestFailed",
        "AppResponse",
        "AppGossip",
        "Gather",
        "GetAncestors",
        "BatchedParseBlock",
        "GetBlockIDAtHeight",
        "StateSyncEnabled",
        "GetOngoingSyncStateSummary",
        "GetLastStateSummary",
        "ParseStateSummary",
        "GetStateSummary",
        "BlockVerify",
        "BlockAccept",
        "BlockReject",
        "StateSummaryAccept",
    }
    extras = {name: method.path for name, method in METHODS.items() if method.service != "vm.VM"}
    assert extras == {
        "Describe": "/vmstack.Extras/Describe",
        "SubmitTransactions": "/vmstack.Extras/SubmitTransactions",
    }
    assert METHODS["GetAncestors"].path == "/vm.VM/GetAncestors"


def _tree() -> list[type[Exception]]:
    classes: list[type[Exception]] = [ValueError]
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, VMStackError):
            classes.append(cls)
    return classes


def test_the_wire_table_holds_every_class_of_the_error_tree() -> None:
    """Every class of vmstack.errors (and ValueError) has its own wire kind."""
    assert set(WIRE_ERRORS.values()) == set(_tree())
    assert all(WIRE_ERRORS[cls.__name__] is cls for cls in _tree())


_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "str": st.text(max_size=40),
    "int": st.integers(0, 1 << 40),
    "int | None": st.none() | st.integers(0, 1 << 20),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "object": st.text(max_size=10) | st.integers() | st.none(),
    "list[str]": st.lists(st.text(max_size=20), max_size=4),
}


@st.composite
def any_tree_error(draw: st.DrawFn) -> Exception:
    """An error of any class of the tree, built through its own constructor with drawn
    arguments."""
    cls = draw(st.sampled_from(_tree()))
    parameters = inspect.signature(cls.__init__).parameters
    if any(parameter.kind is parameter.VAR_POSITIONAL for parameter in parameters.values()):
        return cls(draw(st.text(max_size=40)))
    arguments: dict[str, Any] = {}
    positional: list[Any] = []
    for name, parameter in parameters.items():
        if name == "self":
            continue
        value = draw(_VALUES[str(parameter.annotation)], label=f"{cls.__name__}.{name}")
        if parameter.kind is parameter.KEYWORD_ONLY:
            arguments[name] = value
        else:
            positional.append(value)
    return cls(*positional, **arguments)


@settings(max_examples=300, deadline=None)
@given(error=any_tree_error())
def test_every_error_of_the_tree_crosses_as_itself(error: Exception) -> None:
    """Out through the wire form and back: the same class, message and attributes."""
    wire = vmstack_pb2.WireError.FromString(wire_error_of(error).SerializeToString())
    back = error_of_wire(wire)
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert vars(back) == vars(error)


def test_malformed_request_and_config_mismatch_cross_as_themselves() -> None:
    """The two that used to arrive as something else: a MalformedRequest is no plain
    ValueError, a ConfigMismatch no bare VMStackError."""
    for error in (
        MalformedRequest("GetBlock request does not decode"),
        errors.ConfigMismatch("chain_id", 1, 2),
    ):
        back = error_of_wire(wire_error_of(error))
        assert type(back) is type(error)
        assert str(back) == str(error)


def test_an_error_outside_the_tree_is_a_vmstack_error_naming_it() -> None:
    """A served VM's bug is not raised as a builtin of the caller's: it is a VMStackError
    that names the original type; a class of the tree's subclasses goes as its tree class."""
    back = error_of_wire(wire_error_of(KeyError("boom")))
    assert type(back) is VMStackError
    assert "KeyError" in str(back)

    class Narrower(InvalidBlock):
        pass

    narrowed = error_of_wire(wire_error_of(Narrower("bad", index=3)))
    assert type(narrowed) is InvalidBlock
    assert (narrowed.reason, narrowed.index) == ("bad", 3)


def test_an_unknown_kind_arrives_as_a_vmstack_error_with_its_message() -> None:
    """A kind of a later version this side does not know keeps its message."""
    back = error_of_wire(vmstack_pb2.WireError(kind="SomethingNew", message="it broke"))
    assert type(back) is VMStackError
    assert str(back) == "it broke"


def test_decode_request_refuses_bytes_that_are_not_a_request() -> None:
    """Garbage is MalformedRequest (a ValueError), not a protobuf exception."""
    with pytest.raises(MalformedRequest, match="does not decode"):
        decode_request(METHODS["GetBlock"], b"\x0a\xff\xff\xff\xff\x0f")


def test_decode_request_skips_fields_of_a_later_protocol() -> None:
    """A field the request type does not define is skipped, as protobuf's rules say."""
    known = vm_pb2.GetBlockRequest(id=bytes(32)).SerializeToString()
    request = decode_request(METHODS["GetBlock"], known + b"\x38\x01")
    assert isinstance(request, vm_pb2.GetBlockRequest)
    assert request.id == bytes(32)


def test_decode_request_refuses_oversized_requests_unread() -> None:
    """Anything over the request limit is refused by its length alone."""
    with pytest.raises(MalformedRequest, match="over the"):
        decode_request(METHODS["BatchedParseBlock"], bytes(MAX_REQUEST_SIZE + 1))


@pytest.mark.parametrize("text", ["1e300", "inf", "nan", "-1", "soon", repr(2.0**60)])
def test_a_caller_time_that_is_no_time_is_malformed(text: str) -> None:
    with pytest.raises(MalformedRequest, match="caller's time"):
        caller_time("GetBlock", {NOW_METADATA_KEY: text})


def test_a_caller_time_within_bounds_is_read() -> None:
    assert caller_time("GetBlock", {NOW_METADATA_KEY: "12.5"}) == 12.5
    assert caller_time("GetBlock", {NOW_METADATA_KEY: repr(MAX_CALLER_TIME)}) == MAX_CALLER_TIME
    assert caller_time("GetBlock", {}) is None
