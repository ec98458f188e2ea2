"""What a server's answer must be: the protocol's rules a
:class:`~vmstack.wrappers.rpc.VMClient` holds every answer to before it passes anything on,
and how a failed call becomes an error of the error tree.

An answer that breaks a rule (a block ID that is not 32 bytes, an in-band ``err`` that is
not one of ``vm.Error``'s values or comes beside data, an ``InvalidBlock`` naming no element
of its batch, a typed error that is not the error tree's own) is
:class:`~vmstack.errors.VMUnavailable` naming the rule. A failed call's gRPC status becomes
the typed error its trailing metadata carries, else the error its status code says
(:meth:`AnswerRules.failure`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import grpc

from vmstack.errors import BlockNotFound, InvalidBlock, VMStackError, VMUnavailable
from vmstack.wrappers.rpc import vm_pb2
from vmstack.wrappers.rpc.protocol import (
    EXTRAS_SERVICE,
    METHODS,
    BrokenWireError,
    json_depth,
    trailing_error,
)

__all__ = ["AnswerRules", "HEALTH_DEPTH", "HEALTH_TEXT", "ID_LENGTH", "read_health"]

#: The longest health details :func:`read_health` reads as JSON, in characters (longer
#: ones are returned as text, cut there).
HEALTH_TEXT = 64 * 1024
#: The deepest nesting of health details read as JSON (deeper ones are returned as text).
HEALTH_DEPTH = 32
#: The length of a block ID, in bytes.
ID_LENGTH = 32


def read_health(details: bytes) -> str:
    """A server's health details (vm.VM/Health) as one line: vmstack's ``serving`` and
    ``pid``, other JSON as JSON, anything else (or JSON too long or too deep to parse
    safely) as text."""
    text = details.decode(errors="replace")
    if len(text) > HEALTH_TEXT or json_depth(text) > HEALTH_DEPTH:
        # Read as text, never parsed: nothing a server sends can recurse here.
        return text[:HEALTH_TEXT]
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(parsed, dict) and "serving" in parsed:
        return f"serving {parsed['serving']} (pid {parsed.get('pid')})"
    return json.dumps(parsed)


class AnswerRules:
    """The rules of the module docstring for the client of the server at ``address``,
    whose calls may take ``timeout`` seconds (both named in the errors)."""

    def __init__(self, address: str, timeout: float) -> None:
        self.address = address
        self.timeout = timeout

    def typed(
        self, method: str, metadata: Iterable[tuple[str, str | bytes]] | None
    ) -> Exception | None:
        """The typed error in a call's trailing ``metadata`` (``None`` without one); one that
        is not of the error tree's own types is ``VMUnavailable`` naming the rule."""
        try:
            return trailing_error(metadata)
        except BrokenWireError as broken:
            raise self.broken(method, broken.rule, broken.what) from None

    def failure(self, method: str, error: grpc.RpcError) -> Exception:
        call = error if isinstance(error, grpc.Call) else None
        code = call.code() if call is not None else None
        details = call.details() if call is not None else str(error)
        try:
            typed = self.typed(method, call.trailing_metadata()) if call is not None else None
        except VMUnavailable as broken:
            return broken
        if typed is not None:
            return typed
        if code == grpc.StatusCode.UNKNOWN:
            return VMStackError(f"{method}: {details}")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return ValueError(f"{method}: a message is over the limit: {details}")
        if code == grpc.StatusCode.UNIMPLEMENTED and METHODS[method].service == EXTRAS_SERVICE:
            return VMStackError(
                f"{method}: the VM at {self.address} does not offer "
                f"vmstack's extras ({EXTRAS_SERVICE})"
            )
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return VMUnavailable(f"{method}: the VM at {self.address} refused the call: {details}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return VMUnavailable(
                f"{method}: the VM at {self.address} did not answer within {self.timeout:g} s"
            )
        status = code.name if code is not None else "no status"
        return VMUnavailable(
            f"{method}: the VM at {self.address} is unavailable ({status}: {details})"
        )

    def broken(self, method: str, rule: str, what: str) -> VMUnavailable:
        """The error for an answer that breaks the protocol: it is not passed on."""
        return VMUnavailable(
            f"{method}: the VM at {self.address} broke the protocol ({rule}): {what}"
        )

    def check_id(self, method: str, what: str, block_id: bytes) -> None:
        if len(block_id) != ID_LENGTH:
            raise self.broken(method, "a block ID is 32 bytes", f"{what} of {len(block_id)} bytes")

    def check_in_band(
        self,
        method: str,
        err: int,
        in_band: Exception | None,
        with_data: bool,
        not_found: str,
    ) -> None:
        """Hold an answer's in-band ``err`` to the protocol: none, or one of ``vm.Error``'s
        values with no data beside it; ``ERROR_NOT_FOUND`` is :class:`BlockNotFound` (the
        server's own when it sent one), ``ERROR_CLOSED`` :class:`VMUnavailable`, another
        known value ``VMStackError`` naming it."""
        if err == vm_pb2.ERROR_UNSPECIFIED:
            return
        known = vm_pb2.Error.DESCRIPTOR.values_by_number.get(err)
        if known is None:
            raise self.broken(method, "an in-band error is one of vm.Error's values", f"err={err}")
        if with_data:
            raise self.broken(
                method,
                "an answer carries an error or data, never both",
                f"{known.name} beside data",
            )
        if err == vm_pb2.ERROR_NOT_FOUND:
            if isinstance(in_band, BlockNotFound):
                raise in_band
            raise BlockNotFound(not_found)
        if err == vm_pb2.ERROR_CLOSED:
            raise VMUnavailable(f"{method}: the VM at {self.address} is closed ({known.name})")
        raise VMStackError(f"{method}: the served VM answered {known.name}")

    def check_batch_failure(self, error: Exception, size: int) -> None:
        if not isinstance(error, InvalidBlock):
            return
        index = error.index
        if type(index) is not int or not 0 <= index < size:
            raise self.broken(
                "BatchedParseBlock",
                "rule 7: InvalidBlock names the index of the bad element",
                f"index {index!r} in a batch of {size}",
            ) from None
