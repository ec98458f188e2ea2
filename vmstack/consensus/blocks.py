"""A plain block for the block tree: what a simulator without a VM, an example or a test
hands to :class:`~vmstack.consensus.Topological`."""

from __future__ import annotations

__all__ = ["PlainBlock"]


class PlainBlock:
    """A block that only records its decision: ``status`` is ``"processing"`` until the
    block tree calls ``accept()`` or ``reject()``, then ``"accepted"`` or ``"rejected"``.
    A second decision raises ``RuntimeError`` (the block tree never makes one)."""

    __slots__ = ("height", "id", "parent_id", "status")

    def __init__(self, block_id: bytes, parent_id: bytes, height: int) -> None:
        self.id = bytes(block_id)
        self.parent_id = bytes(parent_id)
        self.height = height
        self.status = "processing"

    def _decide(self, status: str) -> None:
        if self.status != "processing":
            raise RuntimeError(f"block {self.id.hex()} was {self.status} already")
        self.status = status

    def accept(self) -> None:
        self._decide("accepted")

    def reject(self) -> None:
        self._decide("rejected")

    def __repr__(self) -> str:
        return f"PlainBlock({self.id.hex()[:12]}…, height={self.height}, {self.status})"
