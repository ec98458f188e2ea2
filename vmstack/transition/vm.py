"""``TransitionVM``: hands the chain from a ``pre`` VM to a ``post`` VM at a transition time.

The rules are the pure functions of :mod:`vmstack.transition.rules`; this module only
connects them to the two VMs. Both VMs keep their blocks in one store, so ``post`` serves
the blocks ``pre`` accepted. Whether the transition is accepted is derived from the last
accepted block (rule 2), so it is persisted with that block and survives a restart.

Its capability is that of the VM in charge, so it changes at the transition. Nothing is
announced: before it, a batched call is refused here at once with the sentinel, which
passes up through the layers above unchanged; after it, the call is forwarded to the post
VM (ARCHITECTURE.md, section 5).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence

from vmstack.capability import has_batched_methods, supports_batching
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
from vmstack.layers import WrappedBlock
from vmstack.transition.rules import builds_on_transition, transition_accepted

__all__ = ["TransitionBlock", "TransitionVM"]


class TransitionBlock(WrappedBlock):
    """A block returned by :class:`TransitionVM`, wrapping the block of ``pre`` or ``post``.

    A block that ``pre`` parsed before the transition was accepted and that is verified
    after it is parsed again by ``post`` first, so from the transition on ``post`` verifies
    and accepts every block (rule 3).
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
        self._inner.reject()


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
        self._after_transition: set[bytes] = set()

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
        block = self.inner.parse_block(data)
        self._refuse_early(block)
        return self._wrap(block)

    def build_block(self) -> TransitionBlock:
        """A new block from the VM in charge, on its preferred block; once that block is
        rejected the VM in charge builds on its last accepted block again."""
        return self._wrap(self.inner.build_block())

    def set_preference(self, block_id: bytes) -> None:
        self.inner.set_preference(block_id)

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

    def _refuse_early(self, block: Block) -> None:
        """Rule 4 where the parent is a block this node has verified: a child of the
        verified transition block (or of a verified descendant) waits until the transition
        block is accepted. Parsing alone records nothing, so a batch parses the same in any
        order and any number of times; ``verify`` enforces the rule for every block."""
        if not self._transitioned and block.parent_id in self._after_transition:
            raise InvalidBlock(
                f"block {block.id.hex()} builds on the transition block, which this node has "
                "not accepted yet"
            )

    def _verify(self, block: TransitionBlock) -> None:
        if not self._transitioned:
            self._refuse_early(block._inner)
        elif block._source is not self._post:
            block._inner = self._post.parse_block(bytes(block._inner))
            block._source = self._post
        block._inner.verify()
        if not self._transitioned and builds_on_transition(block.timestamp, self.transition_time):
            self._after_transition.add(block.id)

    def _accept(self, block: TransitionBlock) -> None:
        block._inner.accept()
        if not self._transitioned and transition_accepted(block.timestamp, self.transition_time):
            self._transitioned = True
            self._after_transition.clear()
            self._hand_over_transactions()

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
