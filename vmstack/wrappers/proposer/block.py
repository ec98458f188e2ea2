"""ProposerBlock: a block of the proposer layer, a post-fork envelope over an inner block or
a pre-fork block (the inner block itself).

The block knows its fields; its decisions belong to the layer. ``verify``, ``accept`` and
``reject`` hand the block to the layer's :class:`BlockDecisions`
(:class:`~vmstack.wrappers.proposer.decisions.Decisions`), which applies the fork rules
and reaches the inner block. The envelope's byte format is
:mod:`~vmstack.wrappers.proposer.envelope`.
"""

from __future__ import annotations

from typing import Protocol

from vmstack.interfaces import Block
from vmstack.wrappers.proposer.envelope import PostForkBlock

__all__ = ["BlockDecisions", "ProposerBlock"]


class BlockDecisions(Protocol):
    """What a :class:`ProposerBlock` asks of its layer: each call decides the block (or
    raises what the rules or the inner block raise)."""

    def verify(self, block: ProposerBlock) -> None: ...

    def accept(self, block: ProposerBlock) -> None: ...

    def reject(self, block: ProposerBlock) -> None: ...


class ProposerBlock:
    """A block of :class:`~vmstack.wrappers.proposer.vm.ProposerVM`: a post-fork envelope
    over an inner block, or a pre-fork block (the inner block itself, same ID and bytes).

    ``verify``, ``accept`` and ``reject`` apply the fork rules and reach the inner block,
    through ``decisions``, the layer's.
    """

    __slots__ = ("_decisions", "_envelope", "_inner", "_rejected")

    def __init__(
        self, decisions: BlockDecisions, inner: Block, envelope: PostForkBlock | None
    ) -> None:
        self._decisions = decisions
        self._inner = inner
        self._envelope = envelope
        #: Set by the layer when it rejects the block: it is never verified or accepted.
        self._rejected = False

    @property
    def inner(self) -> Block:
        """The block of the layer below."""
        return self._inner

    @property
    def envelope(self) -> PostForkBlock | None:
        """The post-fork envelope, or ``None`` for a pre-fork block."""
        return self._envelope

    @property
    def post_fork(self) -> bool:
        """Whether this is a post-fork block."""
        return self._envelope is not None

    @property
    def rejected(self) -> bool:
        """Whether the layer rejected this block."""
        return self._rejected

    @property
    def id(self) -> bytes:
        return self._inner.id if self._envelope is None else self._envelope.id

    @property
    def parent_id(self) -> bytes:
        return self._inner.parent_id if self._envelope is None else self._envelope.parent_id

    @property
    def height(self) -> int:
        return self._inner.height

    @property
    def timestamp(self) -> int:
        """The envelope's timestamp after the fork, the inner block's before it."""
        return self._inner.timestamp if self._envelope is None else self._envelope.timestamp

    @property
    def pchain_height(self) -> int:
        """The P-chain height the envelope names (0 for a pre-fork block)."""
        return 0 if self._envelope is None else self._envelope.pchain_height

    @property
    def proposer(self) -> bytes | None:
        """The proposer's NodeID, or ``None`` (pre-fork, or an unsigned post-fork block)."""
        return None if self._envelope is None else self._envelope.proposer

    def __bytes__(self) -> bytes:
        return bytes(self._inner) if self._envelope is None else bytes(self._envelope)

    def verify(self) -> None:
        """Check the fork rules and the envelope against the parent, then verify the inner
        block; ``InvalidBlock`` names the broken rule, inner errors pass through."""
        self._decisions.verify(self)

    def accept(self) -> None:
        """Accept the inner block, then record a post-fork block as accepted."""
        self._decisions.accept(self)

    def reject(self) -> None:
        """Forget a post-fork block (never served again) and leave its inner block
        undecided: it may be accepted through another wrapper, and is rejected when a
        sibling inner block is accepted. A pre-fork block rejects its inner block.
        ``InvalidBlock`` for an accepted block."""
        self._decisions.reject(self)

    def __repr__(self) -> str:
        kind = "post-fork" if self.post_fork else "pre-fork"
        return f"ProposerBlock({kind}, height={self.height}, id={self.id.hex()[:12]}…)"
