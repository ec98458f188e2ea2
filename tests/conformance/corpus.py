"""Layers written as a third party would write them: correct ones, and broken variants.

Each broken layer makes one plausible mistake of its own class; ``BROKEN`` names the kit rule
its mistake breaks. ``CORRECT`` are layers of different kinds that must pass the whole kit.
``kit_class(name)`` is the conformance test class of a layer, with its declarations.

This module is not collected by itself (its name does not start with ``test_``):
``test_kit_corpus.py`` runs each class through the kit in a pytester session.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from vmstack.batching import (
    DEFAULT_MAX_RETRIEVAL_TIME,
    AncestorBudget,
    batched_parse_block,
    check_block_id,
    fetch_through,
    get_ancestors,
    stack_clock,
    walk_ancestors,
)
from vmstack.clock import Clock
from vmstack.conformance import Declaration, LayerConformance
from vmstack.errors import BatchingNotImplemented, BlockNotFound, InvalidBlock, VMStackError
from vmstack.interfaces import BatchedChainVM, Block, ChainVM
from vmstack.layers import PassThroughBlock, PassThroughVM, refusal, supports_batching
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.chain import LayerChain
from vmstack.wrappers.proposer.vm import ProposerVM

# --- a correct pass-through layer, the base of most broken ones -----------------------------


class PassBlock(PassThroughBlock):
    """A pass-through layer's block (the broken variants override its decisions)."""

    __slots__ = ()


class PassVM(PassThroughVM):
    """A correct pass-through layer: PassThroughVM as it is; the broken variants override
    its methods and use ``below()`` (the VM below for a batched call, or the refusal) and
    ``wrap_block``."""

    block_type = PassBlock

    def below(self) -> BatchedChainVM:
        return self.batched_inner()

    def wrap_block(self, block: Block) -> PassThroughBlock:
        return self.block_type(block, self)


# --- correct layers of other kinds --------------------------------------------------------


class ProxyBlock:
    """A block that is not a wrapper: fields copied, decisions made by a call to its VM
    (as a client across a process boundary makes them)."""

    def __init__(self, vm: ProxyVM, block: Block) -> None:
        self._vm = vm
        self.id = block.id
        self.parent_id = block.parent_id
        self.height = block.height
        self.timestamp = block.timestamp
        self._bytes = bytes(block)

    def __bytes__(self) -> bytes:
        return self._bytes

    def verify(self) -> None:
        self._vm.decide(self.id, "verify")

    def accept(self) -> None:
        self._vm.decide(self.id, "accept")

    def reject(self) -> None:
        self._vm.decide(self.id, "reject")


class ProxyVM:
    """Answers batched calls itself, with one call: it runs the engine helpers against the
    VM below (fallback included), as a server across a process boundary does. Its blocks
    are proxies that reach the block below by a call."""

    def __init__(self, inner: ChainVM, *, clock: Clock) -> None:
        self._inner = inner
        self._clock = clock
        self._served: dict[bytes, Block] = {}

    @property
    def inner(self) -> ChainVM:
        return self._inner

    batching = True

    def proxy(self, block: Block) -> ProxyBlock:
        self._served[block.id] = block
        return ProxyBlock(self, block)

    def decide(self, block_id: bytes, decision: str) -> None:
        getattr(self._served[block_id], decision)()

    def get_block(self, block_id: bytes) -> ProxyBlock:
        return self.proxy(self._inner.get_block(block_id))

    def parse_block(self, data: bytes) -> ProxyBlock:
        return self.proxy(self._inner.parse_block(data))

    def build_block(self) -> ProxyBlock:
        return self.proxy(self._inner.build_block())

    def set_preference(self, block_id: bytes) -> None:
        self._inner.set_preference(block_id)

    def last_accepted(self) -> bytes:
        return self._inner.last_accepted()

    def get_block_id_at_height(self, height: int) -> bytes:
        return self._inner.get_block_id_at_height(height)

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        return get_ancestors(
            self._inner,
            block_id,
            max_blocks_num=max_blocks_num,
            max_blocks_size=max_blocks_size,
            max_retrieval_time=max_retrieval_time,
            clock=self._clock,
        )

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[ProxyBlock]:
        return [self.proxy(block) for block in batched_parse_block(self._inner, blocks)]


def _copy(error: Exception) -> Exception:
    """``error`` as it comes back across a process boundary: an equal copy for vmstack's
    errors and ``ValueError``, a ``VMStackError`` with the message for anything else."""
    if isinstance(error, InvalidBlock):
        return InvalidBlock(error.reason, index=error.index)
    if isinstance(error, VMStackError | ValueError):
        return type(error)(*error.args)
    return VMStackError(f"{type(error).__name__}: {error}")


class BoundaryVM:
    """A client across a (simulated) process boundary: no ``inner``, errors come back as
    copies, batched calls answered on the far side with the engine helpers."""

    batching = True

    def __init__(self, far_side: ChainVM, *, clock: Clock) -> None:
        self._far = ProxyVM(far_side, clock=clock)

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._far, method)(*args)
        except Exception as error:
            raise _copy(error) from None

    def get_block(self, block_id: bytes) -> Block:
        return BoundaryBlock(self, self._call("get_block", block_id))

    def parse_block(self, data: bytes) -> Block:
        return BoundaryBlock(self, self._call("parse_block", data))

    def build_block(self) -> Block:
        return BoundaryBlock(self, self._call("build_block"))

    def set_preference(self, block_id: bytes) -> None:
        self._call("set_preference", block_id)

    def last_accepted(self) -> bytes:
        answer: bytes = self._call("last_accepted")
        return answer

    def get_block_id_at_height(self, height: int) -> bytes:
        answer: bytes = self._call("get_block_id_at_height", height)
        return answer

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        answer: list[bytes] = self._call(
            "get_ancestors", block_id, max_blocks_num, max_blocks_size, max_retrieval_time
        )
        return answer

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[Block]:
        return [BoundaryBlock(self, block) for block in self._call("batched_parse_block", blocks)]


class BoundaryBlock:
    """A block of :class:`BoundaryVM`: fields carried over, decisions sent across."""

    def __init__(self, vm: BoundaryVM, far: ProxyBlock) -> None:
        self._vm = vm
        self._far = far
        self.id = far.id
        self.parent_id = far.parent_id
        self.height = far.height
        self.timestamp = far.timestamp

    def __bytes__(self) -> bytes:
        return bytes(self._far)

    def _decide(self, decision: str) -> None:
        try:
            getattr(self._far, decision)()
        except Exception as error:
            raise _copy(error) from None

    def verify(self) -> None:
        self._decide("verify")

    def accept(self) -> None:
        self._decide("accept")

    def reject(self) -> None:
        self._decide("reject")


class BoundaryDropsTheIndex(BoundaryVM):
    """Copies errors across the boundary but loses the failing index of a batch."""

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return BoundaryVM._call(self, method, *args)
        except InvalidBlock as error:
            raise InvalidBlock(error.reason) from None


class ReadThroughCacheVM(PassVM):
    """Answers get_block from its own memory of accepted, canonical blocks (accepted blocks
    never change), reading below only for blocks it does not hold."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self._accepted: dict[bytes, Block] = {}

    def get_block(self, block_id: bytes) -> PassThroughBlock:
        cached = self._accepted.get(block_id)
        if cached is not None:
            return self.wrap_block(cached)
        block = self._inner.get_block(block_id)
        try:
            canonical = self._inner.get_block_id_at_height(block.height) == block.id
        except BlockNotFound:  # a processing block above the last accepted one
            canonical = False
        if canonical:
            self._accepted[block.id] = block
        return self.wrap_block(block)


# --- broken layers: decisions -------------------------------------------------------------


class _NoAcceptBlock(PassBlock):
    def accept(self) -> None:
        """Dropped."""


class _NoRejectBlock(PassBlock):
    def reject(self) -> None:
        """Dropped."""


class _NoVerifyBlock(PassBlock):
    def verify(self) -> None:
        """Dropped."""


class DropsAcceptOfFetchedBlocks(PassVM):
    """Blocks from get_block do not pass accept down."""

    def get_block(self, block_id: bytes) -> PassThroughBlock:
        return _NoAcceptBlock(self._inner.get_block(block_id), self)


class DropsVerifyOfParsedBlocks(PassVM):
    """Blocks from parse_block do not pass verify down."""

    def parse_block(self, data: bytes) -> PassThroughBlock:
        return _NoVerifyBlock(self._inner.parse_block(data), self)


class DropsRejectOfBuiltBlocks(PassVM):
    """Blocks from build_block do not pass reject down."""

    def build_block(self) -> PassThroughBlock:
        return _NoRejectBlock(self._inner.build_block(), self)


class DropsAcceptOfBatchedBlocks(PassVM):
    """Blocks from batched_parse_block do not pass accept down."""

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[PassThroughBlock]:
        return [_NoAcceptBlock(block, self) for block in self.below().batched_parse_block(blocks)]


class _SwallowingBlock(PassBlock):
    def verify(self) -> None:
        try:
            self._inner.verify()
        except Exception:
            return


class SwallowsVerifyErrors(PassVM):
    """verify swallows the error of the block below."""

    block_type = _SwallowingBlock


class _TwiceBlock(PassBlock):
    def verify(self) -> None:
        self._inner.verify()
        self._inner.verify()


class VerifiesTwice(PassVM):
    """verify reaches the block below twice."""

    block_type = _TwiceBlock


class _Record:
    """A plain record of a block's fields: decisions on it go nowhere."""

    def __init__(self, block: Block) -> None:
        self.id = block.id
        self.parent_id = block.parent_id
        self.height = block.height
        self.timestamp = block.timestamp
        self._bytes = bytes(block)

    def __bytes__(self) -> bytes:
        return self._bytes

    def verify(self) -> None:
        """Nothing below is told."""

    def accept(self) -> None:
        """Nothing below is told."""

    def reject(self) -> None:
        """Nothing below is told."""


class CacheOfRecords(PassVM):
    """A cache that keeps records of fetched blocks and hands them out again."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        # Records, not blocks: handing them out is what is broken.
        self._seen: dict[bytes, Any] = {}

    def get_block(self, block_id: bytes) -> PassThroughBlock:
        if block_id in self._seen:
            return self._seen[block_id]
        block = self.wrap_block(self._inner.get_block(block_id))
        self._seen[block_id] = _Record(block)
        return block


class CacheOfProcessingBlocks(PassVM):
    """A cache that also keeps processing blocks, and never forgets a rejected one."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self._seen: dict[bytes, Block] = {}

    def get_block(self, block_id: bytes) -> PassThroughBlock:
        if block_id not in self._seen:
            self._seen[block_id] = self._inner.get_block(block_id)
        return self.wrap_block(self._seen[block_id])


class _EvictingBlock(PassBlock):
    def __init__(self, inner: Block, layer: PassVM, cache: dict[bytes, Block]) -> None:
        super().__init__(inner, layer)
        self._cache = cache

    def reject(self) -> None:
        self._cache.pop(self.id, None)
        self._inner.reject()


class CacheEvictingOnItsOwnRejects(PassVM):
    """A cache of processing blocks that forgets a block only when it is rejected through
    the object the cache handed out."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self._seen: dict[bytes, Block] = {}

    def get_block(self, block_id: bytes) -> PassThroughBlock:
        if block_id not in self._seen:
            self._seen[block_id] = self._inner.get_block(block_id)
        return _EvictingBlock(self._seen[block_id], self, self._seen)


# --- broken layers: decisions under consensus ------------------------------------------------


class OneProcessingHead(PassVM):
    """Tracks one processing head: a block verifies only on the last accepted block or on
    the block verified last, so a child of the other sibling is refused."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self._head: bytes | None = None

    def intercept(self, method: str, forward: Callable[..., Any], *args: Any) -> Any:
        if method != "block.verify":
            return forward(*args)
        block = args[0]
        if block.id != self._head and block.parent_id not in (
            self._inner.last_accepted(),
            self._head,
        ):
            raise InvalidBlock(f"block {block.id.hex()} builds on neither head")
        result = forward(*args)
        self._head = block.id
        return result


class RejectsSiblingsItself(PassVM):
    """On accept rejects below the siblings it verified (as a tree of inner blocks would),
    and still passes the engine's rejects of them down: a loser is rejected twice."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self._verified: dict[bytes, Block] = {}

    def intercept(self, method: str, forward: Callable[..., Any], *args: Any) -> Any:
        result = forward(*args)
        if method == "block.verify":
            self._verified[args[0].id] = args[0]
        elif method == "block.accept":
            accepted = args[0]
            for other in list(self._verified.values()):
                if other.parent_id == accepted.parent_id and other.id != accepted.id:
                    other.reject()
        return result


class _RejectsSharedChain(LayerChain):
    def reject(self, block: ProposerBlock) -> None:
        inner_id = block.inner.id
        super().reject(block)
        shared = self._shared.get(inner_id)
        if block.post_fork and shared is not None and not shared.wrappers:
            del self._shared[inner_id]
            shared.block.reject()


class RejectsSharedBlock(ProposerVM):
    """A proposer layer that rejects an inner block with the last processing envelope that
    wraps it, though a later envelope of it may still be accepted."""

    chain_type = _RejectsSharedChain


class ForwardsEachPreferenceOnce(PassVM):
    """Passes a preference down only the first time it is set: switching back to a block
    preferred before is lost."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self._forwarded: set[bytes] = set()

    def set_preference(self, block_id: bytes) -> None:
        if block_id in self._forwarded:
            return
        self._inner.set_preference(block_id)
        self._forwarded.add(block_id)


# --- broken layers: types -----------------------------------------------------------------


class BytearrayAncestors(PassVM):
    """get_ancestors answers bytearrays."""

    def get_ancestors(self, *args: Any) -> list[bytes]:
        return [bytearray(block) for block in PassVM.get_ancestors(self, *args)]  # type: ignore[misc]


class MemoryviewAncestors(PassVM):
    """get_ancestors answers memoryviews."""

    def get_ancestors(self, *args: Any) -> list[bytes]:
        return [memoryview(block) for block in PassVM.get_ancestors(self, *args)]  # type: ignore[misc]


class _NoTimestampBlock:
    """A block without a timestamp."""

    def __init__(self, inner: Block) -> None:
        self._inner = inner
        self.id = inner.id
        self.parent_id = inner.parent_id
        self.height = inner.height

    def __bytes__(self) -> bytes:
        return bytes(self._inner)

    def verify(self) -> None:
        self._inner.verify()

    def accept(self) -> None:
        self._inner.accept()

    def reject(self) -> None:
        self._inner.reject()


class ParsesIntoNonBlocks(PassVM):
    """parse_block returns objects without a timestamp."""

    def parse_block(self, data: bytes) -> PassThroughBlock:
        return _NoTimestampBlock(self._inner.parse_block(data))  # type: ignore[return-value]


# --- broken layers: time ------------------------------------------------------------------


class RescalesTime(PassVM):
    """Forwards the time budget in milliseconds."""

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        return PassVM.get_ancestors(
            self, block_id, max_blocks_num, max_blocks_size, max_retrieval_time * 1000
        )


class HalvesTime(PassVM):
    """Keeps half the time budget for itself and never uses it."""

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        return PassVM.get_ancestors(
            self, block_id, max_blocks_num, max_blocks_size, max_retrieval_time / 2
        )


class IgnoresTime(PassVM):
    """Forwards the engine's default time budget whatever it was given."""

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        return PassVM.get_ancestors(
            self, block_id, max_blocks_num, max_blocks_size, DEFAULT_MAX_RETRIEVAL_TIME
        )


class _SelfWalkingVM(PassVM):
    """Answers get_ancestors itself, walking get_block below on the kit's clock."""

    batching = True

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self.clock: Clock = inner.clock  # type: ignore[attr-defined]

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        budget = AncestorBudget(
            max_blocks_num, max_blocks_size, max_retrieval_time, clock=self.clock
        )
        walk = walk_ancestors(fetch_through(self._inner), check_block_id(block_id), budget)
        return walk.blocks

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[PassThroughBlock]:
        return [self.wrap_block(block) for block in batched_parse_block(self._inner, blocks)]


class RestartsTime(_SelfWalkingVM):
    """Walks itself, starting the time budget after reading the first block."""

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        fetch = fetch_through(self._inner)
        try:
            first, parent = fetch(check_block_id(block_id))
        except BlockNotFound:
            return []
        budget = AncestorBudget(
            max_blocks_num, max_blocks_size, max_retrieval_time, clock=self.clock
        )
        budget.admit(first)
        return walk_ancestors(fetch, parent, budget).blocks


class WallClockWalk(_SelfWalkingVM):
    """Walks itself on the wall clock instead of the clock it was given."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self.clock = time.monotonic


# --- broken layers: count and size on long answers ----------------------------------------


class CapsAt2000(PassVM):
    """Never asks for more than 2,000 blocks."""

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        return PassVM.get_ancestors(
            self, block_id, min(max_blocks_num, 2000), max_blocks_size, max_retrieval_time
        )


class DropsLastOfLongAnswers(PassVM):
    """Drops the oldest block of answers longer than 1,000 blocks."""

    def get_ancestors(self, *args: Any) -> list[bytes]:
        answer = PassVM.get_ancestors(self, *args)
        return answer[:-1] if len(answer) > 1000 else answer


class SkipsPastLength(PassVM):
    """Loses one block past 1,500 blocks."""

    def get_ancestors(self, *args: Any) -> list[bytes]:
        answer = PassVM.get_ancestors(self, *args)
        return answer[:1500] + answer[1501:]


class SizeOffByOne(PassVM):
    """Asks for one byte less than it was given."""

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        return PassVM.get_ancestors(
            self, block_id, max_blocks_num, max(max_blocks_size - 1, 0), max_retrieval_time
        )


class CountOffByOne(PassVM):
    """Asks for one block more than it was given."""

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        return PassVM.get_ancestors(
            self, block_id, max_blocks_num + 1, max_blocks_size, max_retrieval_time
        )


# --- broken layers: sentinels, parse, order, staleness ------------------------------------


class SwallowsFirstBlockErrors(PassVM):
    """Turns any error of get_ancestors into the empty answer."""

    def get_ancestors(self, *args: Any) -> list[bytes]:
        try:
            return PassVM.get_ancestors(self, *args)
        except BatchingNotImplemented:
            raise
        except Exception:
            return []


class RaisesForUnknownBlocks(PassVM):
    """Raises BlockNotFound where the answer is empty."""

    def get_ancestors(self, *args: Any) -> list[bytes]:
        answer = PassVM.get_ancestors(self, *args)
        if not answer:
            raise BlockNotFound("no such block")
        return answer


class GetBlockReturnsNone(PassVM):
    """get_block returns None for a block it does not find."""

    def get_block(self, block_id: bytes) -> PassThroughBlock:
        try:
            return PassVM.get_block(self, block_id)
        except BlockNotFound:
            return None  # type: ignore[return-value]


class ParseDropsBadElements(PassVM):
    """batched_parse_block parses what it can and leaves out the rest."""

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[PassThroughBlock]:
        self.below()
        parsed = []
        for data in blocks:
            try:
                parsed.append(self.parse_block(data))
            except InvalidBlock:
                continue
        return parsed


class ParseIndexFromOne(PassVM):
    """Reports the failing element of a batch counting from one."""

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[PassThroughBlock]:
        try:
            return PassVM.batched_parse_block(self, blocks)
        except InvalidBlock as error:
            if error.index is None:
                raise
            raise InvalidBlock(error.reason, index=error.index + 1) from error


class ParseSortsByHeight(PassVM):
    """Returns a batch sorted by height."""

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[PassThroughBlock]:
        return sorted(PassVM.batched_parse_block(self, blocks), key=lambda block: block.height)


class OldestFirst(PassVM):
    """Answers get_ancestors oldest first."""

    def get_ancestors(self, *args: Any) -> list[bytes]:
        return PassVM.get_ancestors(self, *args)[::-1]


class StaleLastAccepted(PassVM):
    """Remembers the last accepted block once, at construction."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self._last: bytes | None = None

    def last_accepted(self) -> bytes:
        if self._last is None:
            self._last = self._inner.last_accepted()
        return self._last


class _ParentFromLayerBlock(PassBlock):
    def __init__(self, inner: Block, layer: PassVM, parent_id: bytes) -> None:
        super().__init__(inner, layer)
        self._parent_id = parent_id

    @property
    def parent_id(self) -> bytes:
        return self._parent_id


class StaleParentOfBuiltBlocks(PassVM):
    """Names as parent of a built block the preference it saw set first."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self._preferred: bytes | None = None

    def set_preference(self, block_id: bytes) -> None:
        self._inner.set_preference(block_id)
        if self._preferred is None:
            self._preferred = block_id

    def build_block(self) -> PassThroughBlock:
        block = self._inner.build_block()
        parent = block.parent_id if self._preferred is None else self._preferred
        return _ParentFromLayerBlock(block, self, parent)


# --- broken layers: errors ----------------------------------------------------------------


class WrapsErrors(PassVM):
    """Re-raises errors of get_block as its own VMStackError."""

    def get_block(self, block_id: bytes) -> PassThroughBlock:
        try:
            return PassVM.get_block(self, block_id)
        except Exception as error:
            raise VMStackError(f"get_block failed: {error}") from error


class ReplacesErrors(PassVM):
    """Re-raises errors of last_accepted as a new error of the same type."""

    def last_accepted(self) -> bytes:
        try:
            return PassVM.last_accepted(self)
        except Exception as error:
            raise type(error)(*error.args) from error


class SwallowsBatchingNotImplemented(PassVM):
    """Turns BatchingNotImplemented into an empty answer."""

    def get_ancestors(self, *args: Any) -> list[bytes]:
        try:
            return PassVM.get_ancestors(self, *args)
        except BatchingNotImplemented:
            return []


class RewrapsBatchingNotImplemented(PassVM):
    """Raises its own BatchingNotImplemented in place of the one from below."""

    def get_ancestors(self, *args: Any) -> list[bytes]:
        try:
            return PassVM.get_ancestors(self, *args)
        except BatchingNotImplemented as error:
            raise BatchingNotImplemented(f"{type(self).__name__}: {error}") from error


class MeasuresArgumentsFirst(PassVM):
    """Takes the length of parse_block's argument before passing it down."""

    def parse_block(self, data: bytes) -> PassThroughBlock:
        if len(data) > 10_000_000:
            raise InvalidBlock("too large")
        return PassVM.parse_block(self, data)


# --- broken layers: forwarding ------------------------------------------------------------


class PerBlockWalk(PassVM):
    """Answers get_ancestors by walking get_block below, one call per block."""

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        self.below()
        budget = AncestorBudget(
            max_blocks_num, max_blocks_size, max_retrieval_time, clock=stack_clock(self._inner)
        )
        walk = walk_ancestors(fetch_through(self._inner), check_block_id(block_id), budget)
        return walk.blocks


class RetriesGetAncestors(PassVM):
    """Asks twice and keeps the longer answer."""

    def get_ancestors(self, *args: Any) -> list[bytes]:
        first = PassVM.get_ancestors(self, *args)
        second = PassVM.get_ancestors(self, *args)
        return max(first, second, key=len)


class UnwrappedBlocks(PassVM):
    """Returns the inner VM's own blocks from get_block."""

    def get_block(self, block_id: bytes) -> PassThroughBlock:
        return self._inner.get_block(block_id)  # type: ignore[return-value]  # the broken part


class HidesInner(PassVM):
    """Keeps the VM below to itself (no ``inner``)."""

    inner = None  # type: ignore[assignment]


class AlwaysSaysItBatches(PassVM):
    """Says it batches whatever the VM below can do."""

    batching = True


class CapabilityFixedAtConstruction(PassVM):
    """Asks once, when it is built, whether the VM below batches, and refuses or forwards
    by that answer ever after."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self._fixed = supports_batching(inner)

    @property
    def batching(self) -> bool:
        return self._fixed

    def batched_inner(self) -> BatchedChainVM:
        if not self._fixed:
            raise refusal(type(self).__name__, self._inner)
        return PassVM.batched_inner(self)


class DropsSetPreference(PassVM):
    """Does not pass set_preference down."""

    def set_preference(self, block_id: bytes) -> None:
        self._inner.get_block(block_id)


class HeightIndexOffByOne(PassVM):
    """Counts heights from one."""

    def get_block_id_at_height(self, height: int) -> bytes:
        return self._inner.get_block_id_at_height(max(height - 1, 0))


# --- the kit classes ----------------------------------------------------------------------

#: Correct layers: name -> (factory over the inner VM, declarations).
CORRECT: dict[str, tuple[Callable[[Any], ChainVM], frozenset[Declaration]]] = {
    "PassVM": (PassVM, frozenset()),
    "ProxyVM": (
        lambda inner: ProxyVM(inner, clock=inner.clock),
        frozenset({Declaration.ANSWERS_BATCHED_CALLS_ITSELF}),
    ),
    "BoundaryVM": (
        lambda inner: BoundaryVM(inner, clock=inner.clock),
        frozenset({Declaration.ANSWERS_BATCHED_CALLS_ITSELF, Declaration.PROCESS_BOUNDARY}),
    ),
    "ReadThroughCacheVM": (ReadThroughCacheVM, frozenset({Declaration.SERVES_BLOCKS_FROM_MEMORY})),
}

_ITSELF = frozenset({Declaration.ANSWERS_BATCHED_CALLS_ITSELF})
_MEMORY = frozenset({Declaration.SERVES_BLOCKS_FROM_MEMORY})

#: Broken layers: name -> (factory, declarations, the rule the mistake breaks).
BROKEN: dict[str, tuple[Callable[[Any], ChainVM], frozenset[Declaration], str]] = {
    "DropsAcceptOfFetchedBlocks": (
        DropsAcceptOfFetchedBlocks,
        frozenset(),
        "decisions.reach-below",
    ),
    "DropsVerifyOfParsedBlocks": (DropsVerifyOfParsedBlocks, frozenset(), "decisions.reach-below"),
    "DropsRejectOfBuiltBlocks": (
        DropsRejectOfBuiltBlocks,
        frozenset(),
        "decisions.rejected-not-served",
    ),
    "DropsAcceptOfBatchedBlocks": (
        DropsAcceptOfBatchedBlocks,
        frozenset(),
        "decisions.reach-below",
    ),
    "SwallowsVerifyErrors": (SwallowsVerifyErrors, frozenset(), "errors.unchanged"),
    "VerifiesTwice": (VerifiesTwice, frozenset(), "decisions.reach-below"),
    "CacheOfRecords": (CacheOfRecords, _MEMORY, "decisions.reach-below"),
    "CacheOfProcessingBlocks": (CacheOfProcessingBlocks, _MEMORY, "decisions.rejected-not-served"),
    "CacheEvictingOnItsOwnRejects": (CacheEvictingOnItsOwnRejects, _MEMORY, "decisions.reorg"),
    "BytearrayAncestors": (BytearrayAncestors, frozenset(), "wrapping.types"),
    "MemoryviewAncestors": (MemoryviewAncestors, frozenset(), "wrapping.types"),
    "ParsesIntoNonBlocks": (ParsesIntoNonBlocks, frozenset(), "wrapping.types"),
    "RescalesTime": (RescalesTime, frozenset(), "budgets.time"),
    "HalvesTime": (HalvesTime, frozenset(), "budgets.time"),
    "IgnoresTime": (IgnoresTime, frozenset(), "budgets.time"),
    "RestartsTime": (RestartsTime, _ITSELF, "budgets.time"),
    "WallClockWalk": (WallClockWalk, _ITSELF, "budgets.time"),
    "CapsAt2000": (CapsAt2000, frozenset(), "budgets.long-answers"),
    "DropsLastOfLongAnswers": (DropsLastOfLongAnswers, frozenset(), "budgets.long-answers"),
    "SkipsPastLength": (SkipsPastLength, frozenset(), "budgets.long-answers"),
    "SizeOffByOne": (SizeOffByOne, frozenset(), "budgets.size-exact"),
    "CountOffByOne": (CountOffByOne, frozenset(), "budgets.count"),
    "SwallowsFirstBlockErrors": (SwallowsFirstBlockErrors, frozenset(), "errors.first-block"),
    "RaisesForUnknownBlocks": (RaisesForUnknownBlocks, frozenset(), "budgets.empty-sentinel"),
    "GetBlockReturnsNone": (GetBlockReturnsNone, frozenset(), "forwarding.get-block"),
    "ParseDropsBadElements": (ParseDropsBadElements, frozenset(), "parse.all-or-nothing"),
    "ParseIndexFromOne": (ParseIndexFromOne, frozenset(), "parse.all-or-nothing"),
    "ParseSortsByHeight": (ParseSortsByHeight, frozenset(), "parse.order"),
    "OldestFirst": (OldestFirst, frozenset(), "budgets.order"),
    "StaleLastAccepted": (StaleLastAccepted, frozenset(), "forwarding.last-accepted"),
    "StaleParentOfBuiltBlocks": (StaleParentOfBuiltBlocks, frozenset(), "wrapping.parent-ids"),
    "WrapsErrors": (WrapsErrors, frozenset(), "errors.unchanged"),
    "ReplacesErrors": (ReplacesErrors, frozenset(), "errors.unchanged"),
    "SwallowsBatchingNotImplemented": (
        SwallowsBatchingNotImplemented,
        frozenset(),
        "forwarding.refusal",
    ),
    "RewrapsBatchingNotImplemented": (
        RewrapsBatchingNotImplemented,
        frozenset(),
        "errors.batching-not-implemented",
    ),
    "MeasuresArgumentsFirst": (MeasuresArgumentsFirst, frozenset(), "errors.bad-arguments"),
    "PerBlockWalk": (PerBlockWalk, frozenset(), "forwarding.one-call"),
    "RetriesGetAncestors": (RetriesGetAncestors, frozenset(), "forwarding.one-call"),
    "UnwrappedBlocks": (UnwrappedBlocks, frozenset(), "wrapping.blocks"),
    "HidesInner": (HidesInner, frozenset(), "forwarding.capability-visible"),
    "AlwaysSaysItBatches": (AlwaysSaysItBatches, frozenset(), "forwarding.refusal"),
    "CapabilityFixedAtConstruction": (
        CapabilityFixedAtConstruction,
        frozenset(),
        "forwarding.capability-live",
    ),
    "DropsSetPreference": (DropsSetPreference, frozenset(), "forwarding.set-preference"),
    "HeightIndexOffByOne": (HeightIndexOffByOne, frozenset(), "forwarding.height-index"),
    "OneProcessingHead": (OneProcessingHead, frozenset(), "decisions.siblings-verify"),
    "RejectsSiblingsItself": (RejectsSiblingsItself, frozenset(), "decisions.one-decision"),
    "RejectsSharedBlock": (
        lambda inner: RejectsSharedBlock(inner, fork_time=0, chain_id=7, clock=inner.clock),
        frozenset({Declaration.ANSWERS_BATCHED_CALLS_ITSELF, Declaration.BLOCKS_OF_ITS_OWN}),
        "decisions.shared-block-kept",
    ),
    "ForwardsEachPreferenceOnce": (
        ForwardsEachPreferenceOnce,
        frozenset(),
        "decisions.preference-switch",
    ),
    "StaleMemoryDeclaration": (PassVM, _MEMORY, "kit.declarations-hold"),
    "StaleBoundaryDeclaration": (
        lambda inner: PassVM(inner),
        frozenset({Declaration.PROCESS_BOUNDARY}),
        "kit.declarations-hold",
    ),
    "BoundaryDropsTheIndex": (
        lambda inner: BoundaryDropsTheIndex(inner, clock=inner.clock),
        frozenset({Declaration.ANSWERS_BATCHED_CALLS_ITSELF, Declaration.PROCESS_BOUNDARY}),
        "parse.all-or-nothing",
    ),
}


def kit_class(name: str) -> type[LayerConformance]:
    """The conformance test class of the corpus layer ``name``."""
    if name in CORRECT:
        factory, declared = CORRECT[name]
    else:
        factory, declared, _ = BROKEN[name]

    def wrap(self: LayerConformance, inner: ChainVM) -> ChainVM:
        return factory(inner)

    return type(
        f"Test{name}",
        (LayerConformance,),
        {
            "wrap": wrap,
            "declarations": declared,
            "__module__": __name__,
            "__doc__": f"The corpus layer {name} through the kit.",
        },
    )


#: A pass-through layer that declares a rule not applicable though it meets it.
class StaleNotApplicable(LayerConformance):
    """Declares errors.mid-walk not applicable; the layer meets it."""

    not_applicable: ClassVar[dict[str, str]] = {
        "errors.mid-walk": "declared once, and never removed"
    }

    def wrap(self, inner: ChainVM) -> ChainVM:
        return PassVM(inner)


class MisspeltDeclaration(LayerConformance):
    """Declares a name the kit does not know."""

    declarations = frozenset({"answers-batched-itself"})

    def wrap(self, inner: ChainVM) -> ChainVM:
        return PassVM(inner)


class OldKitAttributes(LayerConformance):
    """Sets an attribute an older kit read."""

    pass_through = False

    def wrap(self, inner: ChainVM) -> ChainVM:
        return PassVM(inner)


__all__ = [
    "BROKEN",
    "CORRECT",
    "MisspeltDeclaration",
    "OldKitAttributes",
    "StaleNotApplicable",
    "kit_class",
]
