"""The ``vm.VM`` calls on blocks, as :class:`~vmstack.wrappers.rpc.VMServer` answers them
against the VM it serves: BuildBlock, ParseBlock, GetBlock, SetPreference,
GetBlockIDAtHeight, BlockVerify, BlockAccept, BlockReject and the two batched calls.

:class:`BlockCalls` keeps the blocks handed out (:class:`~vmstack.wrappers.rpc.handed.HandedOut`)
so a decision reaches the very block object the served VM returned for the caller's bytes;
the batched calls run the engine helpers (:func:`vmstack.get_ancestors`,
:func:`vmstack.batched_parse_block`) on the served VM and write their answers in one go
(:mod:`vmstack.wrappers.rpc.wire`). :class:`Call` is what a handler reads of its call beyond
the request. The server holds its lock around every call here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import Any

from google.protobuf import empty_pb2
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from vmstack import batching
from vmstack.clock import SimClock
from vmstack.errors import BlockNotFound, InvalidBlock, MalformedRequest
from vmstack.interfaces import Block, ChainVM
from vmstack.layers import fact_holders
from vmstack.wrappers.rpc import vm_pb2
from vmstack.wrappers.rpc.handed import HandedOut
from vmstack.wrappers.rpc.protocol import DIGEST_METADATA_KEY, block_digest
from vmstack.wrappers.rpc.wire import (
    encode_parse_block_responses,
    encode_repeated_bytes,
)

__all__ = ["BlockCalls", "Call", "Handler", "timestamp"]


class Call:
    """What a handler reads of its call beyond the request (its metadata), and the typed
    error it answered in band, for the trailing metadata."""

    __slots__ = ("in_band_error", "metadata")

    def __init__(self, metadata: Mapping[str, str | bytes]) -> None:
        self.metadata = metadata
        self.in_band_error: BaseException | None = None


#: A handler answers a message, or its serialization when it builds that in one go
#: (:mod:`vmstack.wrappers.rpc.wire`).
Handler = Callable[[Message, Call], "Message | bytes"]


_ID = attrgetter("id")
_PARENT_ID = attrgetter("parent_id")
_HEIGHT = attrgetter("height")
_TIMESTAMP = attrgetter("timestamp")


def timestamp(seconds: int) -> Timestamp:
    """A block's timestamp (whole seconds) as ``vm.proto`` carries it."""
    return Timestamp(seconds=seconds)


def _block_facts(block: Block) -> dict[str, Any]:
    return {
        "id": block.id,
        "parent_id": block.parent_id,
        "height": block.height,
        "timestamp": timestamp(block.timestamp),
    }


class BlockCalls:
    """The block calls of ``vm.VM`` against the VM ``served()`` returns (``VMStackError``
    before there is one), keeping what it hands out in ``handed``. ``clock`` is the
    server's clock, if it has one: the fallback ancestors walk's budget runs on it (else on
    the clock the served stack's layers measure with), never on wall time under a
    simulated clock."""

    def __init__(
        self, served: Callable[[], ChainVM], handed: HandedOut, clock: SimClock | None
    ) -> None:
        self._served = served
        self._handed = handed
        self._clock = clock

    def handlers(self) -> dict[str, Handler]:
        """The handler of each block call, by method name."""
        return {
            "BuildBlock": self.build_block,
            "ParseBlock": self.parse_block,
            "GetBlock": self.get_block,
            "SetPreference": self.set_preference,
            "GetBlockIDAtHeight": self.get_block_id_at_height,
            "BlockVerify": self.block_verify,
            "BlockAccept": self.block_accept,
            "BlockReject": self.block_reject,
            "GetAncestors": self.get_ancestors,
            "BatchedParseBlock": self.batched_parse_block,
        }

    def build_block(self, request: Message, call: Call) -> Message:
        block = self._handed.keep(self._served().build_block())
        return vm_pb2.BuildBlockResponse(bytes=bytes(block), **_block_facts(block))

    def parse_block(self, request: Message, call: Call) -> Message:
        assert isinstance(request, vm_pb2.ParseBlockRequest)
        data = request.bytes  # one bytes object, kept with the block that holds it
        block = self._handed.keep(self._served().parse_block(data), data)
        return vm_pb2.ParseBlockResponse(**_block_facts(block))

    def get_block(self, request: Message, call: Call) -> Message:
        assert isinstance(request, vm_pb2.GetBlockRequest)
        try:
            block = self._handed.keep(self._served().get_block(request.id))
        except BlockNotFound as error:
            call.in_band_error = error
            return vm_pb2.GetBlockResponse(err=vm_pb2.ERROR_NOT_FOUND)
        return vm_pb2.GetBlockResponse(
            parent_id=block.parent_id,
            bytes=bytes(block),
            height=block.height,
            timestamp=timestamp(block.timestamp),
        )

    def set_preference(self, request: Message, call: Call) -> Message:
        assert isinstance(request, vm_pb2.SetPreferenceRequest)
        self._served().set_preference(request.id)
        return empty_pb2.Empty()

    def get_block_id_at_height(self, request: Message, call: Call) -> Message:
        assert isinstance(request, vm_pb2.GetBlockIDAtHeightRequest)
        try:
            block_id = self._served().get_block_id_at_height(request.height)
        except BlockNotFound as error:
            call.in_band_error = error
            return vm_pb2.GetBlockIDAtHeightResponse(err=vm_pb2.ERROR_NOT_FOUND)
        return vm_pb2.GetBlockIDAtHeightResponse(blk_id=block_id)

    def block_verify(self, request: Message, call: Call) -> Message:
        assert isinstance(request, vm_pb2.BlockVerifyRequest)
        data = request.bytes
        kept = self._handed.get(data)
        if kept is not None:
            block = kept
        else:
            block = self._handed.keep(self._served().parse_block(data), data)
        verify_with_context = getattr(block, "verify_with_context", None)
        if request.HasField("p_chain_height") and callable(verify_with_context):
            verify_with_context(request.p_chain_height)
        else:
            block.verify()
        # A decision that names only the ID reaches this block (vm_server.go's
        # verifiedBlocks), whatever was parsed under the ID since.
        self._handed.verified(block, data)
        return vm_pb2.BlockVerifyResponse(timestamp=timestamp(block.timestamp))

    def decide(self, block_id: bytes, call: Call, decision: Callable[[Block], None]) -> Message:
        digest = call.metadata.get(DIGEST_METADATA_KEY)
        if digest is not None and (not isinstance(digest, bytes) or len(digest) != 32):
            raise MalformedRequest(
                "a decision names its block's bytes by their 32-byte SHA-256 digest"
            )
        found: tuple[Block, bytes] | None = None
        if digest is None:
            data = self._handed.data_for(block_id)
            kept = None if data is None else self._handed.get(data)
            if kept is not None and data is not None:
                found = kept, data
        else:
            found = self._handed.find(block_id, digest)
        if found is not None and found[0].id == block_id:
            block, data = found
        else:
            data = None
            block = self._served().get_block(block_id)
            if digest is not None and block_digest(bytes(block)) != digest:
                raise InvalidBlock(
                    f"block {block_id.hex()}: the served block with this ID "
                    "has other bytes than the caller's (verify those first)"
                )
        decision(block)
        if data is not None:
            self._handed.forget(data)
        return empty_pb2.Empty()

    def block_accept(self, request: Message, call: Call) -> Message:
        assert isinstance(request, vm_pb2.BlockAcceptRequest)
        return self.decide(request.id, call, lambda block: block.accept())

    def block_reject(self, request: Message, call: Call) -> Message:
        assert isinstance(request, vm_pb2.BlockRejectRequest)
        return self.decide(request.id, call, lambda block: block.reject())

    def get_ancestors(self, request: Message, call: Call) -> bytes:
        assert isinstance(request, vm_pb2.GetAncestorsRequest)
        # The fallback walk's budget runs on the stack's clock (the server's, else the one
        # the served stack's layers measure with), as in process: never on wall time under
        # a simulated clock.
        clock = batching.stack_clock(self._served()) if self._clock is None else self._clock
        blocks = batching.get_ancestors(
            self._served(),
            request.blk_id,
            max_blocks_num=request.max_blocks_num,
            max_blocks_size=request.max_blocks_size,
            max_retrieval_time=request.max_blocks_retrival_time / 1e9,
            clock=clock,
        )
        # GetAncestorsResponse(blks_bytes=blocks), serialized in one join.
        return encode_repeated_bytes(blocks)

    def batched_parse_block(self, request: Message, call: Call) -> bytes:
        assert isinstance(request, vm_pb2.BatchedParseBlockRequest)
        batch = list(request.request)
        parsed: Sequence[Block] = batching.batched_parse_block(self._served(), batch)
        # Each block's facts and bytes read once, from the block holding them (a layer's
        # block forwards each at the cost of a call), a column per fact: none of the
        # server's Python code runs per block, and no object is made per block but the
        # facts themselves (fewer for the garbage collector to follow while the parsed
        # blocks are young).
        holders = fact_holders(parsed)
        ids = list(map(_ID, holders))
        self._handed.keep_batch(parsed, batch, ids, list(map(bytes, holders)))
        facts = zip(
            ids,
            map(_PARENT_ID, holders),
            map(_HEIGHT, holders),
            map(_TIMESTAMP, holders),
            strict=True,
        )
        # BatchedParseBlockResponse of each block's facts, serialized in one go.
        return encode_parse_block_responses(facts)
