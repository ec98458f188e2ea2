"""``TransitionVM``: hands the chain from a ``pre`` VM to a ``post`` VM at a transition time.

The rules are the pure functions of :mod:`vmstack.transition.rules`; this module only
connects them to the two VMs. Both VMs keep their blocks in one store, so ``post`` serves
the blocks ``pre`` accepted. Whether the transition is accepted is derived from the last
accepted block (rule 2), so it is persisted with that block and survives a restart.

A child of the transition block, accepted or still processing, verifies and builds as any
child of a processing block (rule 4): ``pre`` judges it while the transition block is
processing, and when the transition block is accepted every processing descendant of it is
handed to ``post``, which verifies it again, parents first; the blocks the engine holds
then reach ``post`` with their decisions. A verdict never depends on whether this node has
accepted an ancestor, as both VMs judge a block by the same chain rules.

Its capability is that of the VM in charge, so it changes at the transition. Nothing is
announced: before it, a batched call is refused here at once with the sentinel, which
passes up through the layers above unchanged; after it, the call is forwarded to the post
VM (ARCHITECTURE.md, section 5).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Sequence

from vmstack.clock import Clock
from vmstack.errors import BatchingNotImplemented, InvalidBlock, InvalidTransaction
from vmstack.interfaces import (
    BatchedChainVM,
    Block,
    ChainVM,
    TransactionSink,
    TransactionSource,
    find_layer,
)
from vmstack.layers import WrappedBlock, has_batched_methods, supports_batching
from vmstack.transition.rules import transition_accepted

__all__ = ["TransitionBlock", "TransitionVM"]

logger = logging.getLogger(__name__)


class TransitionBlock(WrappedBlock):
    """A block returned by :class:`TransitionVM`, wrapping the block of ``pre`` or ``post``.

    A block that ``pre`` parsed before the transition was accepted and that is verified
    after it is parsed again by ``post`` first, and one that ``pre`` verified and that was
    handed to ``post`` with the transition is decided through ``post``'s block, so from the
    transition on ``post`` verifies and decides every block of the accepted chain's future
    (rule 3).
    """

    __slots__ = ("_source", "_vm")

    def __init__(self, vm: TransitionVM, inner: Block, source: ChainVM) -> None:
        super().__init__(inner)
        self._vm = vm
        self._source = source

    def verify(self) -> None:
        self._vm._verify(self)

    def accept(self) -> None:
        self._vm._accept(self)

    def reject(self) -> None:
        self._vm._reject(self)


class TransitionVM:
    """Switches from ``pre`` (before the transition) to ``post`` (from it on).

    ``transition_time`` is in unix seconds. ``pre`` typically cannot batch (as coreth), so
    before the transition both batched methods raise ``BatchingNotImplemented`` and the
    engine falls back; after it, ``post`` answers them. Every block returned is a
    :class:`TransitionBlock`, batched results included.
    """

    def __init__(
        self, pre: ChainVM, post: ChainVM, *, transition_time: float, clock: Clock = time.time
    ) -> None:
        if (
            isinstance(transition_time, bool)
            or not isinstance(transition_time, int | float)
            or math.isnan(transition_time)
        ):
            raise ValueError(
                f"transition_time must be a number of seconds, got {transition_time!r}"
            )
        self._pre = pre
        self._post = post
        self.transition_time = transition_time
        self.clock = clock
        self._transitioned = self._derive_transitioned()
        #: Blocks ``pre`` verified through this layer and that are not decided yet.
        self._verified_by_pre: dict[bytes, Block] = {}
        #: Processing blocks handed to ``post`` when the transition was accepted: ID ->
        #: ``post``'s block.
        self._handed_over: dict[bytes, Block] = {}
        self._preferred: bytes | None = None

    # --- the layer ---------------------------------------------------------------------

    @property
    def pre(self) -> ChainVM:
        """The VM in charge before the transition block is accepted."""
        return self._pre

    @property
    def post(self) -> ChainVM:
        """The VM in charge from the transition block on."""
        return self._post

    @property
    def inner(self) -> ChainVM:
        """The VM in charge now."""
        return self._post if self._transitioned else self._pre

    @property
    def batching(self) -> bool:
        """Whether the VM in charge now answers batched calls."""
        return supports_batching(self.inner)

    @property
    def seconds_to_transition(self) -> float:
        """How long until ``transition_time`` by the layer's clock (0 once it has come).
        Which VM is in charge is decided by block timestamps, not by this clock: the
        transition happens when the first block at or after the time is accepted."""
        return max(0.0, self.transition_time - self.clock())

    @property
    def transitioned(self) -> bool:
        """Whether this node has accepted the transition block (rule 2)."""
        return self._transitioned

    def _derive_transitioned(self) -> bool:
        vm = self._post
        last = vm.get_block(vm.last_accepted())
        return transition_accepted(last.timestamp, self.transition_time)

    def _wrap(self, block: Block) -> TransitionBlock:
        return TransitionBlock(self, block, self.inner)

    # --- ChainVM -----------------------------------------------------------------------

    def get_block(self, block_id: bytes) -> TransitionBlock:
        return self._wrap(self.inner.get_block(block_id))

    def parse_block(self, data: bytes) -> TransitionBlock:
        return self._wrap(self.inner.parse_block(data))

    def build_block(self) -> TransitionBlock:
        """A new block from the VM in charge, on its preferred block (processing or
        accepted, the transition block and its descendants included); once that block is
        rejected the VM in charge builds on its last accepted block again."""
        return self._wrap(self.inner.build_block())

    def set_preference(self, block_id: bytes) -> None:
        """Prefer ``block_id`` in the VM in charge (and in ``post`` again once the
        transition hands it the preferred block)."""
        self.inner.set_preference(block_id)
        self._preferred = block_id

    def last_accepted(self) -> bytes:
        return self.inner.last_accepted()

    def get_block_id_at_height(self, height: int) -> bytes:
        return self.inner.get_block_id_at_height(height)

    # --- BatchedChainVM ----------------------------------------------------------------

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        return self._batched_inner().get_ancestors(
            block_id, max_blocks_num, max_blocks_size, max_retrieval_time
        )

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[Block]:
        return [self._wrap(block) for block in self._batched_inner().batched_parse_block(blocks)]

    def _batched_inner(self) -> BatchedChainVM:
        """The VM in charge, to forward a batched call to: one without the batched methods
        (the pre VM, as coreth) is refused here at once, calling nothing; one with them
        that cannot batch now raises the sentinel itself."""
        vm = self.inner
        if not has_batched_methods(vm):
            when = "after" if self._transitioned else "before"
            raise BatchingNotImplemented(
                f"{type(self.inner).__name__} is in charge {when} the transition and offers "
                "no batched protocol"
            )
        return vm

    # --- the rules at work -------------------------------------------------------------

    def _resolve(self, block: TransitionBlock) -> None:
        """Point a block ``pre`` verified and then handed to ``post`` at ``post``'s block,
        so its decisions reach the VM that holds it from the transition on."""
        if block._source is not self._post:
            moved = self._handed_over.get(block.id)
            if moved is not None:
                block._inner = moved
                block._source = self._post

    def _verify(self, block: TransitionBlock) -> None:
        self._resolve(block)
        if self._transitioned and block._source is not self._post:
            block._inner = self._post.parse_block(bytes(block._inner))
            block._source = self._post
        block._inner.verify()
        if block._source is not self._post:
            self._verified_by_pre[block.id] = block._inner

    def _accept(self, block: TransitionBlock) -> None:
        self._resolve(block)
        block._inner.accept()
        self._forget(block.id)
        if not self._transitioned and transition_accepted(block.timestamp, self.transition_time):
            self._transitioned = True
            self._hand_over_transactions()
            self._hand_over_processing(block.id)

    def _reject(self, block: TransitionBlock) -> None:
        self._resolve(block)
        block._inner.reject()
        self._forget(block.id)

    def _forget(self, block_id: bytes) -> None:
        self._verified_by_pre.pop(block_id, None)
        self._handed_over.pop(block_id, None)

    def _hand_over_processing(self, transition_id: bytes) -> None:
        """Hand ``post`` the processing descendants of the accepted transition block that
        ``pre`` verified: ``post`` parses and verifies each, parents first, and prefers
        the preferred one of them. Processing blocks of other branches stay with ``pre``,
        which decides them (the engine rejects them: they conflict with the accepted
        chain). A block ``post`` refuses (the two VMs judged it differently) stays with
        ``pre`` too, logged."""
        processing = sorted(self._verified_by_pre.values(), key=lambda block: block.height)
        self._verified_by_pre = {}
        for verified in processing:
            if verified.parent_id != transition_id and verified.parent_id not in self._handed_over:
                continue
            try:
                moved = self._post.parse_block(bytes(verified))
                moved.verify()
            except InvalidBlock as refusal:
                logger.warning(
                    "block %s, verified before the transition was accepted, is refused "
                    "after it: %s",
                    verified.id.hex(),
                    refusal,
                )
                continue
            self._handed_over[verified.id] = moved
        if self._preferred in self._handed_over:
            self._post.set_preference(self._preferred)

    def _hand_over_transactions(self) -> None:
        """Move the transactions still pending in the pre VM's mempool to the post VM's, in
        order, when the post VM takes over: nothing submitted before the transition is
        dropped by it, except what the accepted chain made invalid meanwhile (a nonce
        below its sender's), which the post VM refuses one by one."""
        try:
            source = find_layer(self._pre, TransactionSource)  # type: ignore[type-abstract]
            target = find_layer(self._post, TransactionSink)  # type: ignore[type-abstract]
        except LookupError:
            return
        for tx in source.take_transactions():
            with contextlib.suppress(InvalidTransaction):
                target.add_transactions([tx])
