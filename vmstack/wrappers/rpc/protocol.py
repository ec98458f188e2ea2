"""What both sides of the process boundary agree on: avalanchego's ``vm.VM`` service
(RPC chain VM protocol :data:`PROTOCOL_VERSION`), vmstack's ``Extras`` service beside it,
message limits, and how what the protocol has no room for travels.

The services are defined once, in ``vm.proto`` and ``vmstack.proto``; :data:`METHODS` reads
their methods from the compiled descriptors, so the server's handlers and the client's calls
cannot drift from them.

Errors: avalanchego's protocol carries one error in band (``ERROR_NOT_FOUND``, for
``GetBlock`` and ``GetBlockIDAtHeight``); any other failure is the call's gRPC status, whose
message a plain avalanchego client reads. vmstack's typed error travels beside it, in the
call's trailing metadata (:data:`ERROR_METADATA_KEY`, a ``vmstack.WireError``), through ONE
symmetric table (:data:`WIRE_ERRORS`): every class of :mod:`vmstack.errors`' tree, and
``ValueError``, goes out as its name, message and attributes and comes back as itself
(:func:`wire_error_of` on the server, :func:`error_of_wire` on the client).

What else rides in metadata, ignored by an avalanchego peer: the caller's simulated time
(:data:`NOW_METADATA_KEY`, seconds as text, refused unless a time from 0 to
:data:`MAX_CALLER_TIME`) and, with ``BlockAccept`` and ``BlockReject``, the SHA-256 digest of
the bytes the caller holds (:data:`DIGEST_METADATA_KEY`), so the decision reaches the block
of those bytes even when another block with the same ID and other bytes was parsed since.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import grpc
from google.protobuf.message import DecodeError, Message

from vmstack import errors as _errors
from vmstack.errors import MalformedRequest, VMStackError, VMUnavailable
from vmstack.wrappers.rpc import vm_pb2, vmstack_pb2

__all__ = [
    "BrokenWireError",
    "DIGEST_METADATA_KEY",
    "ERROR_METADATA_KEY",
    "EXTRAS_SERVICE",
    "MAX_ATTRIBUTE_DEPTH",
    "MAX_CALLER_TIME",
    "MAX_MESSAGE_SIZE",
    "MAX_REQUEST_SIZE",
    "MAX_RESPONSE_SIZE",
    "MAX_WIRE_ATTRIBUTES",
    "MAX_WIRE_ERROR_SIZE",
    "METHODS",
    "Method",
    "NOW_METADATA_KEY",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSIONS",
    "SERVICE",
    "WIRE_ATTRIBUTES",
    "WIRE_ERRORS",
    "block_digest",
    "caller_time",
    "check_protocol_version",
    "decode_request",
    "error_of_wire",
    "json_depth",
    "status_of",
    "trailing_error",
    "wire_error_of",
]

#: avalanchego's RPC chain VM protocol version this boundary speaks by default (``version.
#: RPCChainVMProtocol`` of avalanchego v1.14.x): a plugin announces it to the node's runtime
#: service, which refuses a plugin of another version.
PROTOCOL_VERSION = 45
#: The protocol versions this boundary can speak, ``vm.proto`` being the same for each: 45
#: (avalanchego v1.14.x) and 46 (v1.15.x).
PROTOCOL_VERSIONS = (45, 46)


def check_protocol_version(version: object) -> int:
    """``version`` as a protocol version this boundary speaks (an int of
    :data:`PROTOCOL_VERSIONS`, or its decimal text), else ``ValueError`` saying which."""
    number = version
    if isinstance(version, str) and version.strip().isdigit():
        number = int(version)
    if type(number) is not int or number not in PROTOCOL_VERSIONS:
        raise ValueError(
            f"the RPC chain VM protocol version is one of "
            f"{', '.join(map(str, PROTOCOL_VERSIONS))}, got {version!r}"
        )
    return number


#: avalanchego's cap on one network message (2 MiB); an Ancestors message (at most
#: ``MAX_CONTAINERS_LEN`` bytes of blocks) fits in it.
MAX_MESSAGE_SIZE = 2 * 1024 * 1024
#: The largest request a server reads: one message plus room for the request's own framing.
#: Anything larger is refused unread.
MAX_REQUEST_SIZE = MAX_MESSAGE_SIZE + 64 * 1024
#: The largest response a client reads. Answers are bounded by the caller's own budgets
#: (an Ancestors answer by ``max_blocks_size``), so this only stops a runaway server.
MAX_RESPONSE_SIZE = 64 * 1024 * 1024
#: The latest caller's time a call may carry, in seconds: 2^53, the largest whole number a
#: double holds exactly. A later time, a negative one or one that is not finite is a
#: malformed request: it would move a served simulated clock for good.
MAX_CALLER_TIME = float(2**53)
#: avalanchego's service, as gRPC routes it (``vm.VM``).
SERVICE = vm_pb2.DESCRIPTOR.services_by_name["VM"].full_name
#: vmstack's extras (``vmstack.Extras``), which an avalanchego peer neither offers nor calls.
EXTRAS_SERVICE = vmstack_pb2.DESCRIPTOR.services_by_name["Extras"].full_name
#: Call metadata: the caller's clock, in seconds, as ``repr(float)``.
NOW_METADATA_KEY = "vmstack-now"
#: Call metadata of BlockAccept and BlockReject: the SHA-256 digest of the block's bytes.
DIGEST_METADATA_KEY = "vmstack-block-digest-bin"
#: Trailing metadata of a failed call (or of an in-band ``ERROR_NOT_FOUND``): the typed
#: error, a serialized ``vmstack.WireError``.
ERROR_METADATA_KEY = "vmstack-error-bin"


@attrs.frozen
class Method:
    """One call of a service: its name, service, gRPC path, and message classes."""

    name: str
    service: str
    path: str
    request: type[Message]
    response: type[Message]


def _message_class(full_name: str) -> type[Message]:
    from google.protobuf import empty_pb2

    modules = {"google.protobuf.Empty": empty_pb2.Empty}
    if full_name in modules:
        return modules[full_name]
    package, _, name = full_name.rpartition(".")
    module = {"vm": vm_pb2, "vmstack": vmstack_pb2}[package]
    cls: type[Message] = getattr(module, name)
    return cls


def _methods() -> dict[str, Method]:
    methods: dict[str, Method] = {}
    for module, service_name in ((vm_pb2, "VM"), (vmstack_pb2, "Extras")):
        service = module.DESCRIPTOR.services_by_name[service_name]
        for method in service.methods:
            if method.name in methods:
                raise RuntimeError(f"{method.name} is a method of two services")
            methods[method.name] = Method(
                name=method.name,
                service=service.full_name,
                path=f"/{service.full_name}/{method.name}",
                request=_message_class(method.input_type.full_name),
                response=_message_class(method.output_type.full_name),
            )
    return methods


#: Every call of both services by name (``"GetAncestors"``, ``"Describe"``, ...).
METHODS: dict[str, Method] = _methods()


def decode_request(method: Method, data: bytes) -> Message:
    """Read ``data`` as a request of ``method``, or raise :class:`MalformedRequest`.

    Refused: anything over :data:`MAX_REQUEST_SIZE` (unread) and bytes that do not decode.
    Fields the request type does not define are skipped, as protobuf's rules say: a node of
    a later protocol may send fields this one does not know.
    """
    if len(data) > MAX_REQUEST_SIZE:
        raise MalformedRequest(
            f"{method.name} request of {len(data)} bytes is over the {MAX_REQUEST_SIZE}-byte limit"
        )
    request = method.request()
    try:
        request.ParseFromString(data)
    except DecodeError as error:
        raise MalformedRequest(f"{method.name} request does not decode: {error}") from None
    return request


def caller_time(method: str, metadata: Mapping[str, str | bytes]) -> float | None:
    """The caller's time a call carries (:data:`NOW_METADATA_KEY`), ``None`` without one;
    :class:`MalformedRequest` for one that is not a time from 0 to :data:`MAX_CALLER_TIME`."""
    value = metadata.get(NOW_METADATA_KEY)
    if value is None:
        return None
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    try:
        now = float(text)
    except ValueError:
        now = math.nan
    if not (math.isfinite(now) and 0 <= now <= MAX_CALLER_TIME):
        raise MalformedRequest(
            f"{method} request: the caller's time {text[:40]!r} is not a "
            f"time from 0 to {MAX_CALLER_TIME:.0f} seconds"
        )
    return now


def block_digest(data: bytes) -> bytes:
    """The SHA-256 digest of a block's bytes, which names them in a decision."""
    return hashlib.sha256(data).digest()


# --- errors -------------------------------------------------------------------------------


def _error_tree() -> dict[str, type[Exception]]:
    classes: dict[str, type[Exception]] = {"ValueError": ValueError}
    for name in _errors.__all__:
        cls = getattr(_errors, name)
        if isinstance(cls, type) and issubclass(cls, VMStackError):
            classes[cls.__name__] = cls
    return classes


#: The one table of wire errors: a kind's name on the wire and the class it stands for,
#: every class of :mod:`vmstack.errors` and ``ValueError``. An error of a class outside the
#: table goes as the nearest class of its own that is in it.
WIRE_ERRORS: Mapping[str, type[Exception]] = _error_tree()


def _wire_class(error: BaseException) -> type[Exception] | None:
    for cls in type(error).__mro__:
        if WIRE_ERRORS.get(cls.__name__) is cls:
            return cls
    return None


def wire_error_of(error: BaseException) -> vmstack_pb2.WireError:
    """The wire form of ``error``: its class in :data:`WIRE_ERRORS`, message and attributes
    (those JSON can hold); an error outside the table has kind ``""`` and names its type."""
    cls = _wire_class(error)
    if cls is None:
        return vmstack_pb2.WireError(kind="", message=f"{type(error).__name__}: {error}")
    attributes: dict[str, str] = {}
    for name, value in vars(error).items():
        if name.startswith("_"):
            continue
        try:
            attributes[name] = json.dumps(value)
        except (TypeError, ValueError, RecursionError):
            attributes[name] = json.dumps(f"<{type(value).__name__}>")
    return vmstack_pb2.WireError(kind=cls.__name__, message=str(error), attributes=attributes)


#: The largest typed error a client reads from a call's trailing metadata, in bytes.
MAX_WIRE_ERROR_SIZE = 16 * 1024
#: The most attributes a typed error carries.
MAX_WIRE_ATTRIBUTES = 16
#: The deepest nesting of lists and objects in an attribute of a typed error.
MAX_ATTRIBUTE_DEPTH = 8
_INT_RANGE = range(-(1 << 63), 1 << 64)


class BrokenWireError(VMUnavailable):
    """A typed error that is not one of the tree's: ``rule`` names what it breaks, ``what``
    what was sent. A :class:`~vmstack.errors.VMUnavailable`: the peer broke the protocol."""

    def __init__(self, rule: str, what: str) -> None:
        self.rule = rule
        self.what = what
        super().__init__(f"{rule}: {what}")


def _own_init(cls: type[Exception]) -> Callable[..., None] | None:
    """The ``__init__`` the tree defines for ``cls`` (``None``: the message alone)."""
    for klass in cls.__mro__:
        if klass is VMStackError or not issubclass(klass, VMStackError):
            return None
        if "__init__" in vars(klass):
            init: Callable[..., None] = vars(klass)["__init__"]
            return init
    return None


def _declared_attributes(cls: type[Exception]) -> dict[str, tuple[Any, object]]:
    """The attributes an error of ``cls`` has: its ``__init__``'s parameters (each kept as
    the attribute of its name), with their types and defaults (``inspect.Parameter.empty``:
    none)."""
    init = _own_init(cls)
    if init is None:
        return {}
    hints = typing.get_type_hints(init)
    return {
        name: (hints.get(name, object), parameter.default)
        for name, parameter in inspect.signature(init).parameters.items()
        if name != "self"
    }


#: Every wire kind's attributes: name -> (type, default).
WIRE_ATTRIBUTES: Mapping[str, Mapping[str, tuple[Any, object]]] = {
    name: _declared_attributes(cls) for name, cls in WIRE_ERRORS.items()
}


def _fits(value: object, hint: Any) -> bool:
    """Whether a decoded JSON ``value`` is of the declared type ``hint`` (an ``int`` no
    ``bool`` and within 64 bits, a ``float`` finite and also any such ``int``, a ``list``
    each of whose items fits)."""
    if hint is object:
        return True
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is int:
        return type(value) is int and value in _INT_RANGE
    if hint is float:
        return (type(value) is int and value in _INT_RANGE) or (
            type(value) is float and math.isfinite(value)
        )
    if hint is str or hint is bool:
        return type(value) is hint
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        return type(value) is list and all(_fits(element, item) for element in value)
    return False


def json_depth(text: str) -> int:
    """How deeply ``text``'s lists and objects nest (0 for a scalar), read without
    recursion, strings skipped: what may be handed to ``json.loads`` is judged first."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def error_of_wire(wire: vmstack_pb2.WireError) -> Exception:
    """The error a client raises for ``wire``: the same class, message and attributes the
    served VM raised (an error outside the tree, or a kind this side does not know, arrives
    as :class:`VMStackError` with the message).

    Only the tree's own types come back: each attribute the class declares, of its declared
    type (an ``int`` an int, not ``1.5`` or ``"0"``), at most :data:`MAX_WIRE_ATTRIBUTES`
    of them nested at most :data:`MAX_ATTRIBUTE_DEPTH` deep; attributes the class does not
    declare are dropped. Anything else is :class:`BrokenWireError` naming the rule."""
    cls = WIRE_ERRORS.get(wire.kind)
    if cls is None:
        prefix = "the served VM failed: " if wire.kind == "" else ""
        return VMStackError(f"{prefix}{wire.message}")
    if cls is ValueError:
        return ValueError(wire.message)
    if len(wire.attributes) > MAX_WIRE_ATTRIBUTES:
        raise BrokenWireError(
            f"a typed error has at most {MAX_WIRE_ATTRIBUTES} attributes",
            f"{wire.kind} with {len(wire.attributes)}",
        )
    error = cls.__new__(cls)
    Exception.__init__(error, wire.message)
    for name, (hint, default) in WIRE_ATTRIBUTES[wire.kind].items():
        text = wire.attributes.get(name)
        if text is None:
            if default is inspect.Parameter.empty:
                raise BrokenWireError(
                    "a typed error carries every attribute of its class",
                    f"{wire.kind} without {name}",
                )
            setattr(error, name, default)
            continue
        if json_depth(text) > MAX_ATTRIBUTE_DEPTH:
            raise BrokenWireError(
                f"an attribute nests at most {MAX_ATTRIBUTE_DEPTH} deep",
                f"{wire.kind}.{name} nested deeper",
            )
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise BrokenWireError(
                "an attribute is JSON", f"{wire.kind}.{name} = {text[:40]!r}"
            ) from None
        if not _fits(value, hint):
            raise BrokenWireError(
                "an attribute is of its declared type",
                f"{wire.kind}.{name} = {text[:40]!r}, not {getattr(hint, '__name__', hint)}",
            )
        setattr(error, name, value)
    return error


def status_of(error: BaseException) -> grpc.StatusCode:
    """The gRPC status a failed call carries: ``INVALID_ARGUMENT`` for a request that cannot
    be read, else ``UNKNOWN``, as a Go server answers with a plain error."""
    if isinstance(error, MalformedRequest):
        return grpc.StatusCode.INVALID_ARGUMENT
    return grpc.StatusCode.UNKNOWN


def trailing_error(metadata: Iterable[tuple[str, str | bytes]] | None) -> Exception | None:
    """The typed error in a call's trailing ``metadata``, ``None`` without one (a server that
    is not vmstack's); :class:`BrokenWireError` for one over :data:`MAX_WIRE_ERROR_SIZE`,
    one that does not decode, or one :func:`error_of_wire` refuses."""
    for key, value in metadata or ():
        if key != ERROR_METADATA_KEY:
            continue
        if not isinstance(value, bytes):
            raise BrokenWireError("a typed error is binary metadata", "text")
        if len(value) > MAX_WIRE_ERROR_SIZE:
            raise BrokenWireError(
                f"a typed error is at most {MAX_WIRE_ERROR_SIZE} bytes", f"{len(value)} bytes"
            )
        try:
            wire = vmstack_pb2.WireError.FromString(value)
        except DecodeError:
            raise BrokenWireError(
                "a typed error is a vmstack.WireError", "bytes that do not decode"
            ) from None
        return error_of_wire(wire)
    return None
