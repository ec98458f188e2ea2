"""The proposer layer's chain: what it has verified, accepted and decided, and how it decides.

:class:`LayerChain` holds what the layer remembers between calls: its processing
(verified, undecided) post-fork blocks, the inner blocks they share, the
:class:`~vmstack.wrappers.proposer.tree.InnerTree` of verified inner blocks, the kept facts
of pre-fork blocks, the preferred block, and its records in the store
(:mod:`~vmstack.wrappers.proposer.state`). It answers the read-only queries the rules ask
(:class:`~vmstack.wrappers.proposer.verify.ProposerChain`), and it is where a
:class:`~vmstack.wrappers.proposer.block.ProposerBlock`'s ``verify``, ``accept`` and
``reject`` land (:class:`~vmstack.wrappers.proposer.block.BlockDecisions`), as
avalanchego's proposervm and ``utils/tree`` decide (docs/decisions.md):

- two post-fork blocks may wrap one inner block; it is verified once and shared by every
  wrapper, even one verified after an earlier wrapper was rejected;
- a post-fork block's ``reject`` forgets the wrapper only (it is never served again): its
  inner block may still be accepted through another wrapper, so it stays in the tree;
- accepting a post-fork block writes its record ahead, accepts its inner block and rejects
  the inner block's processing siblings and, transitively, their inner descendants;
- a pre-fork block is the inner block itself: its ``reject`` is the inner ``reject``;
- ``accept`` takes only a child of the last accepted block, so nothing a peer sends moves
  the accepted chain; ``reject`` never moves the preference.

Errors raised by the inner VM pass through unchanged (the very object).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from vmstack.clock import Clock
from vmstack.errors import InvalidBlock, StoreCorrupted
from vmstack.interfaces import Block, ChainVM
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.state import ProposerState
from vmstack.wrappers.proposer.tree import InnerTree
from vmstack.wrappers.proposer.verify import (
    BlockFacts,
    PreForkFacts,
    check_post_fork,
    check_pre_fork,
    check_pre_fork_extends_accepted_chain,
)
from vmstack.wrappers.proposer.windower import Windower

__all__ = ["LayerChain", "SharedInner"]


@attrs.define
class SharedInner:
    """A verified, undecided inner block and the post-fork blocks that wrap it.

    Two envelopes may wrap one inner block (two proposers, or one re-signing). The inner
    block is verified once and every wrapper holds this very object, so accepting one
    wrapper decides the inner block for all of them. ``wrappers`` are the processing ones
    (replaced, never mutated, so readers on other threads may look at it while the engine
    decides); ``first`` is the first that wrapped it, which names it while no wrapper is
    processing. The entry lives as long as the inner block is undecided.
    """

    block: Block
    wrappers: tuple[bytes, ...]
    first: bytes


class LayerChain:
    """The chain of a proposer layer over ``inner``, its records in ``state``.

    ``fork_time``, ``clock``, ``pchain_height``, ``windower`` and ``durango_time`` are the
    layer's, as the post-fork rules read them. ``processing`` (post-fork block ID ->
    block) and ``preferred`` (``None``: the last accepted block) are the layer's to read;
    only this chain and the layer's preference change them.
    """

    __slots__ = (
        "_clock",
        "_durango_time",
        "_fork_time",
        "_inner",
        "_kept_pre_fork",
        "_pchain_height",
        "_shared",
        "_tree",
        "_windower",
        "preferred",
        "processing",
        "state",
    )

    def __init__(
        self,
        inner: ChainVM,
        state: ProposerState,
        *,
        fork_time: float,
        clock: Clock,
        pchain_height: Callable[[], int],
        windower: Windower | None,
        durango_time: float,
    ) -> None:
        self._inner = inner
        self.state = state
        self._fork_time = fork_time
        self._clock = clock
        self._pchain_height = pchain_height
        self._windower = windower
        self._durango_time = durango_time
        self.processing: dict[bytes, ProposerBlock] = {}
        self._shared: dict[bytes, SharedInner] = {}
        self._tree = InnerTree()
        self._kept_pre_fork = PreForkFacts()
        self.preferred: bytes | None = None

    # --- what the rules read (ProposerChain) ---------------------------------------------

    @property
    def inner(self) -> ChainVM:
        """The VM below the layer."""
        return self._inner

    @property
    def clock(self) -> Clock:
        """The layer's clock."""
        return self._clock

    def last_accepted(self) -> bytes:
        """The inner VM's last accepted block, as its envelope once it is post-fork.
        ``StoreCorrupted`` if the layer has accepted post-fork blocks and the index has
        lost the last one's entry (it is never answered as a bare inner block)."""
        inner_id = self._inner.last_accepted()
        while True:
            found = self.state.accepted_envelope_of_inner(inner_id)
            if found is not None:
                return found
            if self.state.newest_parent() in (None, inner_id):
                # No post-fork block yet, or the first one is being accepted on top of
                # this last pre-fork block: a pre-fork block, served as itself.
                return inner_id
            # Another process may have accepted blocks since the inner VM was asked; an
            # unchanged answer means the index lost the entry of a post-fork block.
            again = self._inner.last_accepted()
            if again == inner_id:
                raise StoreCorrupted(
                    f"the last accepted block {inner_id.hex()} is after the "
                    "fork but has no entry in the post-fork index"
                )
            inner_id = again

    def processing_facts(self, block_id: bytes) -> BlockFacts | None:
        processing = self.processing.get(block_id)
        if processing is None or processing.envelope is None:
            return None
        envelope = processing.envelope
        return BlockFacts(True, envelope.timestamp, envelope.pchain_height, processing.inner.id)

    def accepted_facts(self, block_id: bytes) -> BlockFacts | None:
        record = self.state.record(block_id)
        if record is None:
            return None
        inner_id, envelope = record
        return BlockFacts(True, envelope.timestamp, envelope.pchain_height, inner_id)

    def is_accepted(self, block_id: bytes) -> bool:
        return self.state.is_accepted(block_id)

    def envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        """A post-fork block whose inner block is ``inner_id``: a processing one, the
        first that wrapped it while it is undecided, or the accepted one."""
        shared = self._shared.get(inner_id)
        if shared is not None:
            return shared.wrappers[0] if shared.wrappers else shared.first
        return self.state.accepted_envelope_of_inner(inner_id)

    def accepted_envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        return self.state.accepted_envelope_of_inner(inner_id)

    def pre_fork_facts(self, block_id: bytes) -> BlockFacts | None:
        return self._kept_pre_fork.get(block_id)

    # --- the decisions (BlockDecisions) --------------------------------------------------

    def verify(self, block: ProposerBlock) -> None:
        """Apply the rules of the block's kind (:mod:`~vmstack.wrappers.proposer.verify`),
        then verify the inner block (once for all the post-fork blocks wrapping it, until
        it is decided) and keep a post-fork block as processing."""
        envelope = block.envelope
        if block.rejected:
            raise InvalidBlock(f"block {block.id.hex()} was rejected")
        if envelope is None:
            check_pre_fork(self, block, fork_time=self._fork_time)
            block.inner.verify()
            self._kept_pre_fork.remember(block.inner)
            return
        if block.id in self.processing or self.state.is_accepted(block.id):
            return
        check_post_fork(
            self,
            block,
            envelope,
            fork_time=self._fork_time,
            clock=self._clock,
            pchain_height=self._pchain_height,
            windower=self._windower,
            durango_time=self._durango_time,
        )
        inner_id = block.inner.id
        shared = self._shared.get(inner_id)
        if shared is None:
            block.inner.verify()
            self._tree.add(block.inner)
            self._shared[inner_id] = SharedInner(block.inner, (block.id,), block.id)
        else:
            # Another post-fork block wrapped the same inner block, which is still
            # undecided: share its verified object, so one decision reaches it once.
            if bytes(shared.block) != bytes(block.inner):
                raise InvalidBlock(
                    f"block {block.id.hex()}: its inner block's bytes differ "
                    f"from the processing inner block {inner_id.hex()}"
                )
            block._inner = shared.block
            shared.wrappers = (*shared.wrappers, block.id)
        self.processing[block.id] = block

    def accept(self, block: ProposerBlock) -> None:
        """Accept a child of the last accepted block: a pre-fork block's inner block, or a
        post-fork block's record written ahead and then its inner block."""
        envelope = block.envelope
        if block.rejected:
            raise InvalidBlock(f"block {block.id.hex()} was rejected and cannot be accepted")
        if envelope is None:
            check_pre_fork_extends_accepted_chain(self, block, accepting=True)
            block.inner.accept()
            self._kept_pre_fork.remember(block.inner)
            self._follow_preference(block)
            return
        if block.id not in self.processing:
            if self.state.is_accepted(block.id):
                return
            raise InvalidBlock(f"block {block.id.hex()} is not processing: verify it first")
        last = self.last_accepted()
        if envelope.parent_id != last:
            raise InvalidBlock(
                f"block {block.id.hex()}: its parent {envelope.parent_id.hex()} "
                f"is not the last accepted block {last.hex()}"
            )
        # Write ahead: the layer's record goes to the store before the inner block is
        # accepted, so the inner VM's last accepted block always has its envelope (a reader
        # never sees an inner block the layer does not serve). A crash between the two
        # writes leaves a record ahead of the inner VM, which the next start of the store's
        # writer undoes.
        inner_id = block.inner.id
        self.state.write_accepted(block.id, inner_id, envelope, block.height)
        try:
            block.inner.accept()
        except BaseException:
            self.state.undo_record(block.id, inner_id, envelope.parent_id)
            raise
        # The inner block is decided: other wrappers of it, still processing, are rejected
        # by the engine later without touching it. Its inner siblings can no longer be
        # accepted: they are rejected now, with their inner descendants.
        self._shared.pop(inner_id, None)
        del self.processing[block.id]
        self._follow_preference(block)
        for loser in self._tree.reject_conflicts(block.inner):
            self._shared.pop(loser.id, None)

    def reject(self, block: ProposerBlock) -> None:
        """Reject a pre-fork block's inner block (and the post-fork children below it), or
        forget a post-fork block, leaving its inner block undecided."""
        if block.envelope is None:
            self._kept_pre_fork.forget(block.id)
            block.inner.reject()
            # Post-fork children of a rejected pre-fork block can never be accepted.
            for loser in self._tree.reject_children(block.id):
                self._shared.pop(loser.id, None)
            return
        if self.state.is_accepted(block.id):
            raise InvalidBlock(f"block {block.id.hex()} is accepted and cannot be rejected")
        block._rejected = True
        if self.processing.pop(block.id, None) is not None:
            shared = self._shared.get(block.inner.id)
            if shared is not None:
                # The inner block stays verified and undecided (avalanchego's proposervm
                # never rejects it here): another wrapper may still be accepted, and an
                # accepted sibling rejects it (InnerTree).
                shared.wrappers = tuple(w for w in shared.wrappers if w != block.id)

    def _follow_preference(self, accepted: ProposerBlock) -> None:
        """Move the preference onto a block accepted on top of the preferred one."""
        if self.preferred == accepted.parent_id:
            self.preferred = accepted.id
