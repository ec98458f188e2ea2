"""The proposer layer's answers to the batched protocol (ARCHITECTURE.md, section 3), in
full whatever the layers below can do.

- :func:`get_ancestors` walks the layer's own blocks (processing, then accepted) from the
  requested one down to the fork, then hands the remaining count, size and time to the
  inner VM for the pre-fork part in one call. When the inner VM cannot batch
  (``BatchingNotImplemented``) the layer walks it serially itself, so the answer is
  complete and identical to the fallback walk over the whole stack (avalanchego drops the
  pre-fork part when a tracing layer sits below). One
  :class:`~vmstack.batching.AncestorBudget` spans both parts, so the budget rule holds for
  the WHOLE answer, at the fork boundary too (rule 5).
- :func:`batched_parse_block` classifies every element as ``parse_block`` does, hands ALL
  inner bytes (the inner blocks of the envelopes and the pre-fork elements) down in one
  call, and checks the envelopes' signatures last (:func:`check_signatures`, the one
  costly step per element), so the answer and the index of the first bad element equal
  the per-block fallback's (rule 7). With the layer's
  :class:`~vmstack.parsepool.ParsePool`, the signatures are checked in worker processes
  while the inner VM parses, and the serial checks consult those verdicts
  (:mod:`vmstack.wrappers.proposer.verdicts`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from vmstack import batching
from vmstack.batching import (
    AncestorBudget,
    WalkEnd,
    check_block_id,
    check_parse_batch,
    fetch_through,
    walk_ancestors,
)
from vmstack.errors import BatchingNotImplemented, BlockNotFound, InvalidBlock
from vmstack.interfaces import BatchedChainVM, Block, ChainVM
from vmstack.store import ReadSnapshot
from vmstack.wrappers.proposer.chain import LayerChain
from vmstack.wrappers.proposer.envelope import PostForkBlock
from vmstack.wrappers.proposer.state import stored_block
from vmstack.wrappers.proposer.verdicts import SignatureVerdicts, start_signature_checks
from vmstack.wrappers.proposer.verify import decode_envelope

if TYPE_CHECKING:
    from vmstack.parsepool import ParsePool

__all__ = ["ParsedElement", "batched_parse_block", "check_signatures", "get_ancestors", "walk_own"]

logger = logging.getLogger(__name__)


# --- GetAncestors -----------------------------------------------------------------------


def get_ancestors(
    chain: LayerChain,
    below: BatchedChainVM | None,
    block_id: bytes,
    max_blocks_num: int,
    max_blocks_size: int,
    max_retrieval_time: float,
) -> list[bytes]:
    """``block_id`` and its ancestors, newest first, under one budget for the whole
    answer: the layer's own blocks, then the pre-fork part from the inner VM (one
    batched call, or a serial walk of it when it cannot batch). ``chain`` is the layer's,
    ``below`` its inner VM when that has the batched methods (``None``: walked serially)."""
    block_id = check_block_id(block_id)
    budget = AncestorBudget(max_blocks_num, max_blocks_size, max_retrieval_time, clock=chain.clock)
    # The processing blocks are looked at before the snapshot opens: an accept writes
    # its record before it forgets the processing block, so a block accepted in between
    # is in one or the other, never in neither.
    processing = dict(chain.processing)
    with chain.state.snapshot() as snapshot:
        handoff = walk_own(snapshot, processing, block_id, budget)
    if handoff is None:
        return budget.blocks
    if not budget.blocks and chain.envelope_of_inner(handoff) is not None:
        return []
    if below is not None:
        num, size, seconds = budget.remaining()
        try:
            answer = below.get_ancestors(handoff, num, size, seconds)
        except BatchingNotImplemented:
            pass
        except Exception:
            if not budget.blocks:
                raise
            logger.warning(
                "pre-fork ancestors of %s could not be read below the fork; "
                "answering with %d post-fork blocks",
                block_id.hex(),
                len(budget.blocks),
                exc_info=True,
            )
            return budget.blocks
        else:
            budget.extend(answer)
            return budget.blocks
    return walk_ancestors(fetch_through(chain.inner), handoff, budget).blocks


def walk_own(
    snapshot: ReadSnapshot,
    processing: Mapping[bytes, Block],
    block_id: bytes,
    budget: AncestorBudget,
) -> bytes | None:
    """Walk the layer's own blocks (``processing``, then the accepted ones in
    ``snapshot``) into ``budget``; return the ID of the first block that is not one of
    them (where the inner VM takes over), or ``None`` if the walk stopped for another
    reason (budget, or a block that failed to read)."""

    def fetch(wanted: bytes) -> tuple[bytes, bytes]:
        block = processing.get(wanted)
        if block is not None:
            return bytes(block), block.parent_id
        stored = stored_block(snapshot, wanted)
        if stored is None:
            raise BlockNotFound(f"block {wanted.hex()} is not a post-fork block of the layer")
        return stored

    walk = walk_ancestors(fetch, block_id, budget)
    return walk.stopped_at if walk.reason is WalkEnd.NOT_SERVED else None


# --- BatchedParseBlock ------------------------------------------------------------------


#: One parsed element of a batch: its inner block and, after the fork, its envelope.
ParsedElement = tuple[Block, PostForkBlock | None]


def batched_parse_block(
    inner: ChainVM,
    blocks: Sequence[bytes],
    *,
    chain_id: bytes,
    parse_pool: ParsePool | None,
) -> list[ParsedElement]:
    """Parse ``blocks`` in input order: envelopes decoded here, all inner bytes parsed
    below in one call, then signatures checked; ``InvalidBlock`` names the failing index.
    The layer wraps each element into its block (reusing a processing one). ``inner`` is
    the layer's inner VM, ``chain_id`` the chain ID its headers sign, ``parse_pool`` its
    worker processes (``None``: the signatures are checked here).

    Each element is classified as ``parse_block`` classifies it (post-fork if it
    is a valid envelope, else pre-fork bytes), so the answer, and the index of the
    first bad element, equal the per-block fallback's. The cheap work runs first over
    the batch (framing, then the inner VM's parse), the signatures last and only up to
    the first bad element; decoding stops at the first element that looks like an
    envelope but is not one, and only that one failure is kept.
    """
    batch = check_parse_batch(blocks)
    parsed: list[ParsedElement] = []
    while len(parsed) < len(batch):
        parsed.extend(_parse_run(inner, batch, len(parsed), chain_id, parse_pool))
    return parsed


def _parse_run(
    inner: ChainVM,
    batch: Sequence[bytes],
    start: int,
    chain_id: bytes,
    parse_pool: ParsePool | None,
) -> list[ParsedElement]:
    """Parse ``batch[start:]`` up to and including the first element whose envelope
    fails to decode (all of it when none does) with one batched call below; return
    the blocks of that run, or raise for its first bad element."""
    envelopes: list[PostForkBlock | None] = []
    raws: list[bytes] = []
    inner_bytes: list[bytes] = []
    failure: InvalidBlock | None = None
    for index in range(start, len(batch)):
        data = bytes(batch[index])
        envelope, failure = decode_envelope(data)
        envelopes.append(envelope)
        raws.append(data)
        inner_bytes.append(data if envelope is None else envelope.inner)
        if failure is not None:
            break
    # The signatures go to the layer's worker processes (if it has a pool and the run is
    # large enough) while the inner VM parses; they are consulted in the serial order.
    verdicts = start_signature_checks(parse_pool, envelopes, chain_id)
    parse_inner = inner.parse_block
    try:
        inner_blocks: list[Block | None] = list(batching.batched_parse_block(inner, inner_bytes))
    except InvalidBlock as error:
        # A failed run needs few of the checks: the ones it needs run here, serially.
        verdicts.cancel()
        if error.index is None:
            raise
        bad = error.index
        check_signatures(
            envelopes,
            raws,
            [None] * len(envelopes),
            start,
            bad + 1,
            chain_id=chain_id,
            parse_inner=parse_inner,
        )
        if failure is not None and bad == len(inner_bytes) - 1:
            raise failure.at_index(start + bad) from error
        if start == 0:
            raise
        raise error.at_index(start + bad) from error
    except BaseException:
        verdicts.cancel()
        raise
    try:
        check_signatures(
            envelopes,
            raws,
            inner_blocks,
            start,
            len(envelopes),
            chain_id=chain_id,
            parse_inner=parse_inner,
            verdicts=verdicts,
        )
    finally:
        verdicts.cancel()  # checks that stopped early (a bad element) give the pool back
    parsed: list[ParsedElement] = []
    for envelope, inner_block in zip(envelopes, inner_blocks, strict=True):
        assert inner_block is not None
        parsed.append((inner_block, envelope))
    return parsed


def check_signatures(
    envelopes: list[PostForkBlock | None],
    raws: Sequence[bytes],
    inner_blocks: list[Block | None],
    start: int,
    stop: int,
    *,
    chain_id: bytes,
    parse_inner: Callable[[bytes], Block],
    verdicts: SignatureVerdicts | None = None,
) -> None:
    """Check the envelopes ``[0, stop)`` of a run (epoch and signature) in order.

    An envelope that fails is, as in ``parse_block``, tried as pre-fork bytes: if
    ``parse_inner`` parses its raw bytes, the element becomes that pre-fork block
    (``envelopes`` and ``inner_blocks`` are updated in place); otherwise its failure is
    raised at its index in the batch (``start`` + its index in the run). It needs nothing
    of the layer but ``chain_id`` and ``parse_inner``: the one costly step per element,
    kept apart from the run's cheap work. With ``verdicts``, a signature whose verdict a
    worker process computed ahead is not checked again here (same check, same answer).
    """
    for index in range(stop):
        envelope = envelopes[index]
        if envelope is None:
            continue
        try:
            envelope.verify(chain_id, check_signature=None if verdicts is None else verdicts.check)
        except InvalidBlock as failure:
            try:
                inner_block = parse_inner(raws[index])
            except InvalidBlock:
                raise failure.at_index(start + index) from None
            envelopes[index] = None
            inner_blocks[index] = inner_block
