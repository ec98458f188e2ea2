"""What a :class:`~vmstack.wrappers.rpc.VMClient` hands out: :class:`RemoteBlock`, a block of
the served VM whose decisions are calls, and :class:`RoundTrips`, the calls it made.

A remote block carries id, parent ID, height, timestamp and bytes. ``verify`` sends the
bytes (BlockVerify goes by bytes); ``accept`` and ``reject`` send the ID, with the SHA-256
digest of the bytes beside it in the call's metadata, so a vmstack server decides the block
of those very bytes. A rejected block refuses ``verify`` and ``accept`` as a block in
process does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from vmstack.errors import InvalidBlock
from vmstack.wrappers.rpc import vm_pb2
from vmstack.wrappers.rpc.protocol import DIGEST_METADATA_KEY, block_digest

if TYPE_CHECKING:
    from vmstack.wrappers.rpc.client import VMClient

__all__ = ["RemoteBlock", "RoundTrips"]


@attrs.define
class RoundTrips:
    """Round trips made by one client: how many, and their wall seconds, per method."""

    calls: dict[str, int] = attrs.field(factory=dict)
    seconds: dict[str, float] = attrs.field(factory=dict)

    def add(self, method: str, seconds: float) -> None:
        self.calls[method] = self.calls.get(method, 0) + 1
        self.seconds[method] = self.seconds.get(method, 0.0) + seconds

    @property
    def total(self) -> int:
        """Round trips of every method together."""
        return sum(self.calls.values())

    def as_dict(self) -> dict[str, dict[str, float]]:
        """``{method: {"calls": n, "seconds": s}}``, for JSON output."""
        return {
            method: {"calls": count, "seconds": self.seconds[method]}
            for method, count in sorted(self.calls.items())
        }


class RemoteBlock:
    """A block of the served VM: its facts, and decisions that are calls to the server."""

    __slots__ = (
        "_bytes",
        "_client",
        "_digest",
        "_rejected",
        "height",
        "id",
        "parent_id",
        "timestamp",
    )

    def __init__(
        self,
        client: VMClient,
        block_id: bytes,
        parent_id: bytes,
        height: int,
        timestamp: int,
        data: bytes,
    ) -> None:
        self._client = client
        self.id = block_id
        self.parent_id = parent_id
        self.height = height
        self.timestamp = timestamp
        self._bytes = data
        self._digest: bytes | None = None
        self._rejected = False

    def __bytes__(self) -> bytes:
        return self._bytes

    def _decision(self) -> tuple[tuple[str, bytes]]:
        if self._digest is None:
            self._digest = block_digest(self._bytes)
        return ((DIGEST_METADATA_KEY, self._digest),)

    def verify(self) -> None:
        """Verify the served block of these bytes (BlockVerify sends them, so the server
        finds that block or parses them again); ``InvalidBlock`` once this block is
        rejected."""
        if self._rejected:
            raise InvalidBlock(f"block {self.id.hex()} was rejected")
        self._client.call("BlockVerify", vm_pb2.BlockVerifyRequest(bytes=self._bytes))

    def accept(self) -> None:
        """Accept the served block of these bytes; it becomes the client's last accepted.
        ``InvalidBlock`` once this block is rejected."""
        if self._rejected:
            raise InvalidBlock(
                f"block {self.id.hex()} is rejected: only a verified block can be accepted"
            )
        self._client.call(
            "BlockAccept", vm_pb2.BlockAcceptRequest(id=self.id), metadata=self._decision()
        )
        self._client._accepted(self)

    def reject(self) -> None:
        """Reject the served block of these bytes (again: nothing)."""
        if self._rejected:
            return
        self._client.call(
            "BlockReject", vm_pb2.BlockRejectRequest(id=self.id), metadata=self._decision()
        )
        self._rejected = True

    def __repr__(self) -> str:
        return f"RemoteBlock(id={self.id.hex()[:16]}…, height={self.height})"
