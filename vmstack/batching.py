"""Engine-side helpers for the optional batched protocol, and the one budget every layer obeys.

:func:`get_ancestors` and :func:`batched_parse_block` are what a consensus engine calls. They
use the VM's batched method when it has one and fall back to one ``get_block`` /
``parse_block`` per block only when the VM raises
:class:`~vmstack.errors.BatchingNotImplemented`.

The rules (ARCHITECTURE.md, section 3), in the order the code applies them:

1. Only ``BatchingNotImplemented`` triggers the fallback; every other error propagates.
2. Fallback walk: ``BlockNotFound`` on the first block gives ``[]``; any other error on the
   first block propagates. Mid-walk, ``BlockNotFound`` ends the walk quietly and any other
   error ends it with a log line; the partial answer is returned.
3. Order: the requested block, then its parent, and so on.
4. Budgets: the first block is always included; each block costs ``len + 4`` bytes and a
   further block is added only while the total stays ``<= max_blocks_size``; at most
   ``max_blocks_num`` blocks; the time budget starts with the call and is checked before
   each parent fetch, never before the first.
5. Every layer obeys rule 4 for the WHOLE answer it returns: :class:`AncestorBudget` is the
   one implementation of it, used by the fallback walk and by every layer that walks.

Whether a VM batches at all (``supports_batching``, ``has_batched_methods``) is
:mod:`vmstack.layers`'s to say.
"""

from __future__ import annotations

import enum
import itertools
import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence, Sized
from typing import TypeVar

import attrs

from vmstack.clock import Clock
from vmstack.errors import BatchingNotImplemented, BlockNotFound, InvalidBlock
from vmstack.interfaces import Block, ChainVM, iter_layers

__all__ = [
    "AncestorBudget",
    "AncestorWalk",
    "BLOCK_ID_LEN",
    "CONTAINER_LEN_OVERHEAD",
    "DEFAULT_MAX_BLOCKS_NUM",
    "DEFAULT_MAX_RETRIEVAL_TIME",
    "MAX_CONTAINERS_LEN",
    "MAX_PARSE_BATCH",
    "WalkEnd",
    "batched_parse_block",
    "check_block_id",
    "check_parse_batch",
    "fetch_through",
    "get_ancestors",
    "parse_each",
    "serial_get_ancestors",
    "serial_parse_block",
    "stack_clock",
    "walk_ancestors",
]

logger = logging.getLogger(__name__)

#: Bytes of block payload in one Ancestors message: 4/5 of avalanchego's 2 MiB message cap.
MAX_CONTAINERS_LEN = 1_677_721
#: Bytes each block costs in an Ancestors message on top of its own length (its u32 prefix).
CONTAINER_LEN_OVERHEAD = 4
#: The engine's default block count per GetAncestors request.
DEFAULT_MAX_BLOCKS_NUM = 2000
#: The engine's default time budget per GetAncestors request, in seconds.
DEFAULT_MAX_RETRIEVAL_TIME = 0.05
#: Length of every block ID.
BLOCK_ID_LEN = 32
#: The most blocks one ``batched_parse_block`` call accepts. An Ancestors message carries at
#: most ``MAX_CONTAINERS_LEN / CONTAINER_LEN_OVERHEAD`` (about 420,000) empty containers;
#: a batch beyond that cannot have come from a peer and is refused with ``ValueError``.
MAX_PARSE_BATCH = MAX_CONTAINERS_LEN // CONTAINER_LEN_OVERHEAD

#: ``memoryview`` formats whose items are single bytes.
_BYTE_FORMATS = frozenset({"B", "b", "c"})

BlockT = TypeVar("BlockT", bound=Block)

BlockFetch = Callable[[bytes], tuple[bytes, bytes]]
"""Fetch one block for a walk: ``block_id -> (block bytes, parent id)``."""


def check_block_id(block_id: object) -> bytes:
    """Return ``block_id`` as bytes, or raise ``ValueError`` unless it is 32 bytes.

    A ``memoryview`` must be a flat view of bytes (format ``B``, ``b`` or ``c``): a view
    of wider items (``memoryview(array("I", ...))``, a cast view) has another length in
    items than in bytes, and is refused rather than read as some 32 bytes.
    """
    if not isinstance(block_id, bytes | bytearray | memoryview):
        raise ValueError(f"a block ID is {BLOCK_ID_LEN} bytes, got {type(block_id).__name__}")
    if isinstance(block_id, memoryview) and (
        block_id.format not in _BYTE_FORMATS or block_id.ndim != 1
    ):
        raise ValueError(
            f"a block ID is {BLOCK_ID_LEN} bytes, got a memoryview of format "
            f"{block_id.format!r} with {block_id.ndim} dimension(s)"
        )
    block_id = bytes(block_id)
    if len(block_id) != BLOCK_ID_LEN:
        raise ValueError(f"a block ID is {BLOCK_ID_LEN} bytes, got {len(block_id)}")
    return block_id


def check_parse_batch(blocks: Iterable[bytes]) -> list[bytes]:
    """Return ``blocks`` as a list, or raise ``ValueError`` if it is not a sequence or
    exceeds ``MAX_PARSE_BATCH``; an element that is not bytes is ``InvalidBlock`` naming its
    index.

    A sized batch is judged by its length before any element is read, and any other
    iterable is read at most one element past the maximum, so an oversized (or endless)
    batch costs nothing to refuse.
    """
    if type(blocks) is list or type(blocks) is tuple:
        # The common case, each layer of a stack checking the same list: a pass in C.
        if len(blocks) > MAX_PARSE_BATCH:
            raise _oversized_batch(str(len(blocks)))
        batch = list(blocks)
        if all(type(data) is bytes for data in batch):
            return batch
    else:
        if isinstance(blocks, str | bytes | bytearray | memoryview) or not isinstance(
            blocks, Iterable
        ):
            raise ValueError(f"a batch is a sequence of block bytes, got {type(blocks).__name__}")
        if isinstance(blocks, Sized) and len(blocks) > MAX_PARSE_BATCH:
            raise _oversized_batch(str(len(blocks)))
        batch = list(itertools.islice(blocks, MAX_PARSE_BATCH + 1))
        if len(batch) > MAX_PARSE_BATCH:
            raise _oversized_batch("more")
    for index, data in enumerate(batch):
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidBlock(f"a block is bytes, got {type(data).__name__}", index=index)
    return batch


def _oversized_batch(got: str) -> ValueError:
    return ValueError(
        f"a batch holds at most {MAX_PARSE_BATCH} blocks (one Ancestors message), got {got}"
    )


class AncestorBudget:
    """Rule 4 for one ancestors answer: count, size and time, for the whole answer.

    Create it when the call starts (that starts the time budget). Offer blocks in order with
    :meth:`admit`; the first is always taken. Call :meth:`may_fetch_parent` before fetching
    each parent. A layer that answers partly itself and partly from the layer below hands
    that layer :meth:`remaining` and feeds its answer back through :meth:`extend`, so the
    combined answer obeys the rule even if the layer below includes a first block that the
    remaining size cannot hold.
    """

    __slots__ = (
        "_clock",
        "_deadline",
        "blocks",
        "max_blocks_num",
        "max_blocks_size",
        "max_retrieval_time",
        "size",
        "started",
    )

    def __init__(
        self,
        max_blocks_num: int = DEFAULT_MAX_BLOCKS_NUM,
        max_blocks_size: int = MAX_CONTAINERS_LEN,
        max_retrieval_time: float = DEFAULT_MAX_RETRIEVAL_TIME,
        *,
        clock: Clock = time.monotonic,
    ) -> None:
        if isinstance(max_blocks_num, bool) or not isinstance(max_blocks_num, int):
            raise ValueError(f"max_blocks_num must be an int, got {max_blocks_num!r}")
        if max_blocks_num < 1:
            raise ValueError(f"max_blocks_num must be at least 1, got {max_blocks_num}")
        if isinstance(max_blocks_size, bool) or not isinstance(max_blocks_size, int):
            raise ValueError(f"max_blocks_size must be an int, got {max_blocks_size!r}")
        if max_blocks_size < 0:
            raise ValueError(f"max_blocks_size must not be negative, got {max_blocks_size}")
        if not isinstance(max_retrieval_time, int | float) or math.isnan(max_retrieval_time):
            raise ValueError(f"max_retrieval_time must be a number, got {max_retrieval_time!r}")
        if max_retrieval_time < 0:
            raise ValueError(f"max_retrieval_time must not be negative, got {max_retrieval_time}")
        self.max_blocks_num = max_blocks_num
        self.max_blocks_size = max_blocks_size
        self.max_retrieval_time = float(max_retrieval_time)
        self._clock = clock
        self.started = clock()
        self._deadline = self.started + self.max_retrieval_time
        self.blocks: list[bytes] = []
        self.size = 0

    def admit(self, block: bytes) -> bool:
        """Add ``block`` if it fits and return True; return False (and add nothing) if not."""
        # Written out flat: this runs once per block of every answer.
        blocks = self.blocks
        cost = len(block) + CONTAINER_LEN_OVERHEAD
        if blocks and (
            len(blocks) >= self.max_blocks_num or self.size + cost > self.max_blocks_size
        ):
            return False
        blocks.append(block)
        self.size += cost
        return True

    def may_fetch_parent(self) -> bool:
        """Whether the walk may fetch one more parent: room for a block and time left."""
        return len(self.blocks) < self.max_blocks_num and self._clock() < self._deadline

    def remaining(self) -> tuple[int, int, float]:
        """``(max_blocks_num, max_blocks_size, max_retrieval_time)`` left for a layer below.

        Call it only when :meth:`may_fetch_parent` is true and at least one block is in,
        so every figure is a valid budget (count >= 1, size and time >= 0).
        """
        return (
            self.max_blocks_num - len(self.blocks),
            max(self.max_blocks_size - self.size, 0),
            max(self._deadline - self._clock(), 0.0),
        )

    def extend(self, blocks: Iterable[bytes]) -> None:
        """Admit ``blocks`` in order, stopping at the first that does not fit."""
        for block in blocks:
            if not self.admit(block):
                return


class WalkEnd(enum.Enum):
    """Why an ancestors walk left out the block it names in :attr:`AncestorWalk.stopped_at`."""

    #: ``fetch`` raised ``BlockNotFound`` for it: the VM does not serve it (a layer walking
    #: its own blocks hands that block to the VM below).
    NOT_SERVED = "not served"
    #: The budget held no room for it (count, size or time; rule 4).
    BUDGET = "budget"
    #: ``fetch`` raised another error for it mid-walk; the walk logged it (rule 2).
    FAILED = "failed"


@attrs.frozen
class AncestorWalk:
    """Where an ancestors walk stopped: the answer, the first block it leaves out, and why.

    ``blocks`` is the budget's list of blocks (the whole answer, including any the budget
    held before the walk began); ``stopped_at`` is the ID of the block the walk did not add,
    which for :attr:`WalkEnd.NOT_SERVED` is where a VM below could take over.
    """

    blocks: list[bytes]
    stopped_at: bytes
    reason: WalkEnd


def walk_ancestors(fetch: BlockFetch, block_id: bytes, budget: AncestorBudget) -> AncestorWalk:
    """The serial ancestors walk (rules 2-4): ``fetch`` one block, then each parent.

    ``fetch`` returns a block's bytes and its parent ID, raising ``BlockNotFound`` for a
    block that is not served. Blocks go into ``budget``; the result holds its blocks and
    says where and why the walk stopped. When the budget already holds blocks (a layer
    above answered the newest part itself), ``block_id`` is the parent of the last of them
    and is fetched as a mid-walk block. Any error but ``BlockNotFound`` on the first block
    propagates.
    """
    next_id = block_id
    if not budget.blocks:
        try:
            data, next_id = fetch(block_id)
        except BlockNotFound:
            return AncestorWalk(budget.blocks, block_id, WalkEnd.NOT_SERVED)
        budget.admit(data)
    while budget.may_fetch_parent():
        try:
            data, parent_id = fetch(next_id)
        except BlockNotFound:
            return AncestorWalk(budget.blocks, next_id, WalkEnd.NOT_SERVED)
        except Exception:
            logger.warning(
                "ancestors walk stopped at block %s after %d blocks",
                next_id.hex(),
                len(budget.blocks),
                exc_info=True,
            )
            return AncestorWalk(budget.blocks, next_id, WalkEnd.FAILED)
        if not budget.admit(data):
            break
        next_id = parent_id
    return AncestorWalk(budget.blocks, next_id, WalkEnd.BUDGET)


def stack_clock(vm: object) -> Clock:
    """The clock ``vm``'s stack measures time with: the ``clock`` of its topmost layer that
    has one (every layer of a stack from :func:`vmstack.build_stack` runs on the clock it
    was given); ``time.monotonic`` for a stack with none."""
    for layer in iter_layers(vm):
        clock = getattr(layer, "clock", None)
        if callable(clock):
            return clock  # type: ignore[no-any-return]
    return time.monotonic


def fetch_through(vm: ChainVM) -> BlockFetch:
    """A walk's fetch over ``vm.get_block``: one call per block, as the fallback makes."""

    def fetch(block_id: bytes) -> tuple[bytes, bytes]:
        block = vm.get_block(block_id)
        return bytes(block), block.parent_id

    return fetch


def get_ancestors(
    vm: ChainVM,
    block_id: bytes,
    *,
    max_blocks_num: int = DEFAULT_MAX_BLOCKS_NUM,
    max_blocks_size: int = MAX_CONTAINERS_LEN,
    max_retrieval_time: float = DEFAULT_MAX_RETRIEVAL_TIME,
    clock: Clock | None = None,
) -> list[bytes]:
    """Bytes of ``block_id`` and its ancestors, newest first, as a peer would be answered.

    Uses ``vm.get_ancestors`` when the VM has that method (whether or not it has the other
    batched method); on ``BatchingNotImplemented`` (and only
    then) walks ``vm.get_block`` serially under the same budget. ``[]`` means the VM does
    not have ``block_id``. Bad limits or a malformed ``block_id`` raise ``ValueError``.

    ``clock`` measures the fallback walk's time budget; by default it is the stack's own
    clock (:func:`stack_clock`), the one its layers measure the batched path with, so under
    a :class:`~vmstack.clock.SimClock` both paths are judged on simulated time.
    """
    block_id = check_block_id(block_id)
    budget = AncestorBudget(
        max_blocks_num,
        max_blocks_size,
        max_retrieval_time,
        clock=stack_clock(vm) if clock is None else clock,
    )
    batched = getattr(vm, "get_ancestors", None)
    if callable(batched):
        try:
            answer: list[bytes] = batched(
                block_id, max_blocks_num, max_blocks_size, max_retrieval_time
            )
            return answer
        except BatchingNotImplemented:
            pass
    return walk_ancestors(fetch_through(vm), block_id, budget).blocks


def serial_get_ancestors(
    vm: ChainVM,
    block_id: bytes,
    *,
    max_blocks_num: int = DEFAULT_MAX_BLOCKS_NUM,
    max_blocks_size: int = MAX_CONTAINERS_LEN,
    max_retrieval_time: float = DEFAULT_MAX_RETRIEVAL_TIME,
    clock: Clock | None = None,
) -> list[bytes]:
    """The fallback answer of :func:`get_ancestors`, taken even when ``vm`` could batch.

    This is what an engine facing a VM without the batched protocol gets: the honest serial
    baseline that benchmarks and the simulation compare the batched path with. ``clock``
    is as for :func:`get_ancestors` (the stack's own clock by default).
    """
    block_id = check_block_id(block_id)
    budget = AncestorBudget(
        max_blocks_num,
        max_blocks_size,
        max_retrieval_time,
        clock=stack_clock(vm) if clock is None else clock,
    )
    return walk_ancestors(fetch_through(vm), block_id, budget).blocks


def parse_each(parse: Callable[[bytes], BlockT], blocks: Sequence[bytes]) -> list[BlockT]:
    """Parse ``blocks`` one by one; an ``InvalidBlock`` is re-raised naming its index."""
    parsed: list[BlockT] = []
    for index, data in enumerate(blocks):
        try:
            parsed.append(parse(data))
        except InvalidBlock as error:
            raise error.at_index(index) from error
    return parsed


def batched_parse_block(vm: ChainVM, blocks: Sequence[bytes]) -> list[Block]:
    """Parse ``blocks`` in input order: all of them, or ``InvalidBlock`` naming the index.

    Uses ``vm.batched_parse_block`` when the VM has it; on ``BatchingNotImplemented`` (and
    only then) calls ``vm.parse_block`` per element. Empty input gives ``[]``.
    """
    batch = check_parse_batch(blocks)
    if not batch:
        return []
    batched = getattr(vm, "batched_parse_block", None)
    if callable(batched):
        try:
            parsed: list[Block] = batched(batch)
            return parsed
        except BatchingNotImplemented:
            pass
    return serial_parse_block(vm, batch)


def serial_parse_block(vm: ChainVM, blocks: Sequence[bytes]) -> list[Block]:
    """The fallback of :func:`batched_parse_block`, taken even when ``vm`` could batch."""
    return parse_each(vm.parse_block, check_parse_batch(blocks))
