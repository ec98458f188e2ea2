"""Test doubles for layers and engines: an in-memory chain VM that records every call.

:class:`MemoryVM` is a complete ``ChainVM`` with no batched methods at all (it cannot
batch, like coreth); :class:`BatchedMemoryVM` adds the batched protocol, answering from its
own memory in one call. Both record every public call in :attr:`MemoryVM.calls` and can be
told to fail: :meth:`MemoryVM.fail_next` makes the next call of a method raise a given error,
:meth:`MemoryVM.fail_block` makes every retrieval of one block raise (on the serial and the
batched path alike, so both paths see the same fault).

Fetching a block costs time when the VM is given a ``fetch_cost`` (on a
:class:`~vmstack.clock.SimClock`): every ``get_block`` and every block a batched
``get_ancestors`` reads moves the clock by that many seconds, on both paths alike, and
:attr:`MemoryVM.fetches` logs which block was fetched when. That makes time budgets
observable: a walk that ignores or restarts its budget reads blocks after the deadline.

Blocks are small and self-describing: ``b"MB" | parent id | height u64 | timestamp u64 |
payload``, big-endian, and a block's ID is the sha256 of its bytes.
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Sequence
from typing import Any

import attrs

from vmstack.batching import AncestorBudget, check_parse_batch, parse_each, walk_ancestors
from vmstack.clock import Clock
from vmstack.errors import BatchingNotImplemented, BlockNotFound, InvalidBlock

__all__ = [
    "BatchedMemoryVM",
    "Call",
    "Fetch",
    "GENESIS_PARENT",
    "MemoryBlock",
    "MemoryVM",
    "memory_vm",
]

GENESIS_PARENT = bytes(32)
_MAGIC = b"MB"
_HEAD = struct.Struct(">2s32sQQ")


@attrs.frozen
class Call:
    """One recorded call: the method's name and its positional arguments."""

    method: str
    args: tuple[Any, ...] = ()


@attrs.frozen
class Fetch:
    """One block read by a walk or by ``get_block``: which block, and when the read began."""

    block_id: bytes
    started: float


class MemoryBlock:
    """A block of :class:`MemoryVM`; ``verify/accept/reject`` report back to its VM."""

    __slots__ = ("_bytes", "_id", "height", "parent_id", "payload", "timestamp", "vm")

    def __init__(
        self, vm: MemoryVM, parent_id: bytes, height: int, timestamp: int, payload: bytes = b""
    ) -> None:
        self.vm = vm
        self.parent_id = parent_id
        self.height = height
        self.timestamp = timestamp
        self.payload = payload
        self._bytes = _HEAD.pack(_MAGIC, parent_id, height, timestamp) + payload
        self._id = hashlib.sha256(self._bytes).digest()

    @property
    def id(self) -> bytes:
        return self._id

    def __bytes__(self) -> bytes:
        return self._bytes

    def verify(self) -> None:
        self.vm._verify(self)

    def accept(self) -> None:
        self.vm._accept(self)

    def reject(self) -> None:
        self.vm._reject(self)

    def __repr__(self) -> str:
        return f"MemoryBlock(height={self.height}, id={self._id.hex()[:12]}…)"


class MemoryVM:
    """An in-memory ``ChainVM`` without the batched protocol, recording every call.

    It starts with an accepted genesis block at height 0. ``get_block`` serves verified and
    accepted blocks, as rule 9 asks; parsing alone does not make a block served.

    ``fetch_cost`` (seconds, default 0) is what each block read costs on ``clock``, which
    must then be able to ``advance`` (a :class:`~vmstack.clock.SimClock`).
    """

    batching = False

    def __init__(
        self, *, clock: Clock = time.time, genesis_timestamp: int = 0, fetch_cost: float = 0.0
    ) -> None:
        if not (isinstance(fetch_cost, int | float) and 0 <= fetch_cost < float("inf")):
            raise ValueError(f"fetch_cost is a finite number of seconds >= 0, got {fetch_cost!r}")
        if fetch_cost and not callable(getattr(clock, "advance", None)):
            raise ValueError(
                f"a fetch_cost needs a clock that can advance (a SimClock), got {clock!r}"
            )
        self.clock = clock
        self.fetch_cost = float(fetch_cost)
        self.calls: list[Call] = []
        #: Every block read (by ``get_block`` or inside a batched ``get_ancestors``), in order.
        self.fetches: list[Fetch] = []
        self._failures_next: dict[str, list[BaseException]] = {}
        self._failures_block: dict[bytes, BaseException] = {}
        self._blocks: dict[bytes, MemoryBlock] = {}
        self._accepted: dict[bytes, MemoryBlock] = {}
        self._processing: dict[bytes, MemoryBlock] = {}
        self._by_height: dict[int, bytes] = {}
        genesis = MemoryBlock(self, GENESIS_PARENT, 0, genesis_timestamp, b"genesis")
        self._blocks[genesis.id] = genesis
        self._accepted[genesis.id] = genesis
        self._by_height[0] = genesis.id
        self._last_accepted = genesis.id
        self._preferred = genesis.id
        self._build_counter = 0
        self._last_built: MemoryBlock | None = None
        self._repeat_build = False

    # --- failure injection and call records ---------------------------------------------

    def fail_next(self, method: str, error: BaseException) -> None:
        """Make the next call of ``method`` raise ``error`` (queued, one per call)."""
        self._failures_next.setdefault(method, []).append(error)

    def fail_block(self, block_id: bytes, error: BaseException) -> None:
        """Make every retrieval of ``block_id``, serial or batched, raise ``error``."""
        self._failures_block[block_id] = error

    def calls_to(self, method: str) -> list[Call]:
        """The recorded calls of ``method``."""
        return [call for call in self.calls if call.method == method]

    def known_block(self, block_id: bytes) -> MemoryBlock | None:
        """The block with ``block_id`` if this VM ever built or parsed it (served or not),
        without recording a call or costing time; ``None`` otherwise."""
        return self._blocks.get(block_id)

    def forget_records(self) -> None:
        """Clear :attr:`calls` and :attr:`fetches`."""
        self.calls.clear()
        self.fetches.clear()

    def _record(self, method: str, *args: Any) -> None:
        self.calls.append(Call(method, args))
        queued = self._failures_next.get(method)
        if queued:
            raise queued.pop(0)

    # --- ChainVM -------------------------------------------------------------------------

    def get_block(self, block_id: bytes) -> MemoryBlock:
        self._record("get_block", block_id)
        return self._read(block_id)

    def parse_block(self, data: bytes) -> MemoryBlock:
        self._record("parse_block", data)
        return self._parse(data)

    def build_block(self) -> MemoryBlock:
        self._record("build_block")
        if self._repeat_build and self._last_built is not None:
            self._repeat_build = False
            return self._last_built
        parent = self._blocks[self._preferred]
        self._build_counter += 1
        timestamp = max(int(self.clock()), parent.timestamp)
        block = MemoryBlock(
            self, parent.id, parent.height + 1, timestamp, self._build_counter.to_bytes(8, "big")
        )
        self._last_built = self._known(block)
        return self._last_built

    def repeat_next_build(self) -> None:
        """Make the next ``build_block`` return the block the previous one returned (the
        same object, bytes and ID), as a VM asked twice to build on one state may: a layer
        with envelopes of its own then wraps one block below in two envelopes."""
        self._repeat_build = True

    def set_preference(self, block_id: bytes) -> None:
        self._record("set_preference", block_id)
        self._served(block_id)
        self._preferred = block_id

    def last_accepted(self) -> bytes:
        self._record("last_accepted")
        return self._last_accepted

    def get_block_id_at_height(self, height: int) -> bytes:
        self._record("get_block_id_at_height", height)
        try:
            return self._by_height[height]
        except KeyError:
            raise BlockNotFound(f"no accepted block at height {height}") from None

    # --- the model behind them -----------------------------------------------------------

    def _served(self, block_id: bytes) -> MemoryBlock:
        failure = self._failures_block.get(block_id)
        if failure is not None:
            raise failure
        block = self._accepted.get(block_id) or self._processing.get(block_id)
        if block is None:
            shown = (
                bytes(block_id).hex()
                if isinstance(block_id, bytes | bytearray | memoryview)
                else repr(block_id)
            )
            raise BlockNotFound(f"block {shown} is not served")
        return block

    def _read(self, block_id: bytes) -> MemoryBlock:
        """One block read: logged in :attr:`fetches`, costing ``fetch_cost`` seconds."""
        self.fetches.append(Fetch(block_id, self.clock()))
        if self.fetch_cost:
            self.clock.advance(self.fetch_cost)  # type: ignore[attr-defined]
        return self._served(block_id)

    def _fetch(self, block_id: bytes) -> tuple[bytes, bytes]:
        block = self._read(block_id)
        return bytes(block), block.parent_id

    def _known(self, block: MemoryBlock) -> MemoryBlock:
        return self._blocks.setdefault(block.id, block)

    def _parse(self, data: bytes) -> MemoryBlock:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidBlock(f"a block is bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _HEAD.size:
            raise InvalidBlock(f"a memory block is at least {_HEAD.size} bytes, got {len(data)}")
        magic, parent_id, height, timestamp = _HEAD.unpack_from(data)
        if magic != _MAGIC:
            raise InvalidBlock(f"bad magic {magic!r}")
        block = self._known(MemoryBlock(self, parent_id, height, timestamp, data[_HEAD.size :]))
        if height == 0 and block.id != self._by_height[0]:
            raise InvalidBlock("a block at height 0 that is not this chain's genesis")
        return block

    def _verify(self, block: MemoryBlock) -> None:
        self._record("block.verify", block.id)
        if block.id in self._accepted or block.id in self._processing:
            return
        parent = self._accepted.get(block.parent_id) or self._processing.get(block.parent_id)
        if parent is None:
            raise InvalidBlock(
                f"parent {block.parent_id.hex()} of block {block.id.hex()} is not known"
            )
        if block.height != parent.height + 1:
            raise InvalidBlock(f"height {block.height} does not follow {parent.height}")
        if block.timestamp < parent.timestamp:
            raise InvalidBlock("timestamp goes backwards")
        self._processing[block.id] = block

    def _accept(self, block: MemoryBlock) -> None:
        self._record("block.accept", block.id)
        if block.id not in self._processing:
            raise InvalidBlock(f"block {block.id.hex()} is not processing")
        self._settle_accepted(block, preferred=self._preferred == block.parent_id)

    def _reject(self, block: MemoryBlock) -> None:
        self._record("block.reject", block.id)
        self._processing.pop(block.id, None)

    def extend_chain(self, count: int, *, timestamp_step: int = 2) -> list[bytes]:
        """Build, verify and accept ``count`` blocks on the last accepted one, without
        recording calls; returns their IDs, oldest first."""
        ids: list[bytes] = []
        for _ in range(count):
            parent = self._blocks[self._last_accepted]
            self._build_counter += 1
            block = self._known(
                MemoryBlock(
                    self,
                    parent.id,
                    parent.height + 1,
                    parent.timestamp + timestamp_step,
                    self._build_counter.to_bytes(8, "big"),
                )
            )
            self._processing[block.id] = block
            self._settle_accepted(block, preferred=True)
            ids.append(block.id)
        return ids

    def _settle_accepted(self, block: MemoryBlock, *, preferred: bool) -> None:
        """Move the processing ``block`` to the accepted chain: it names its height and is
        the last accepted block, and the preferred one too if ``preferred``."""
        del self._processing[block.id]
        self._accepted[block.id] = block
        self._by_height[block.height] = block.id
        self._last_accepted = block.id
        if preferred:
            self._preferred = block.id


class BatchedMemoryVM(MemoryVM):
    """:class:`MemoryVM` plus the batched protocol, answered from memory in one call.

    Its capability can change while it runs, as a VM's below a transition does: set
    :attr:`batching` to False on an instance and both batched methods raise
    ``BatchingNotImplemented`` (the call is still recorded) until it is True again.
    """

    batching = True

    def _refuse_unless_batching(self, method: str) -> None:
        if not self.batching:
            raise BatchingNotImplemented(f"BatchedMemoryVM.{method}: batching is switched off")

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        self._record("get_ancestors", block_id, max_blocks_num, max_blocks_size, max_retrieval_time)
        self._refuse_unless_batching("get_ancestors")
        budget = AncestorBudget(
            max_blocks_num, max_blocks_size, max_retrieval_time, clock=self.clock
        )
        return walk_ancestors(self._fetch, block_id, budget).blocks

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[MemoryBlock]:
        batch = check_parse_batch(blocks)
        self._record("batched_parse_block", tuple(batch))
        self._refuse_unless_batching("batched_parse_block")
        return parse_each(self._parse, batch)


def memory_vm(
    *, batching: bool = True, blocks: int = 0, clock: Clock = time.time, fetch_cost: float = 0.0
) -> MemoryVM:
    """A fresh memory VM, with or without the batched protocol, holding ``blocks`` accepted
    blocks above genesis, each block read costing ``fetch_cost`` seconds on ``clock``; its
    call record starts empty."""
    kind = BatchedMemoryVM if batching else MemoryVM
    vm: MemoryVM = kind(clock=clock, fetch_cost=fetch_cost)
    vm.extend_chain(blocks)
    return vm
