"""The proposer layer's rules per block kind: which bytes are which kind, and what each
kind must satisfy against its parent and the accepted chain.

- Bytes (:func:`decode_envelope`, :func:`try_envelope`): a valid envelope is a post-fork
  block; bytes that fail as one are pre-fork bytes for the inner VM, and the envelope's
  failure is kept when they looked like an envelope (codec version 0). Option blocks are
  refused: they follow oracle blocks, which no inner VM of this stack builds.
- A post-fork block (:func:`check_post_fork`): its parent is served and is a processing
  block or the last accepted block; a pre-fork parent is from at or after the fork time
  and has an unsigned child; P-chain heights and timestamps never go down from parent to
  child; the timestamp runs at most :data:`MAX_CLOCK_SKEW` ahead of the clock and the
  P-chain height not ahead of the P-chain; the inner block's parent is the parent's inner
  block, and the inner block is not accepted already.
- A pre-fork block (:func:`check_pre_fork`): its parent is pre-fork and from before the
  fork time, and the block extends the accepted chain.
- The proposer windows, when the layer has a validator set (:func:`check_proposer_window`,
  and :func:`proposer_turn` for building): a post-fork child of a post-fork parent is
  signed by the proposer its slot expects (from Durango on), or comes no earlier than its
  proposer's delay and is signed iff within the verify windows (before Durango), all
  against the validator set at the parent's P-chain height.

Each check is a flat function of what it reads, ``if ...: raise InvalidBlock(...)``,
changing nothing. The block comes as an argument, the
layer's configuration as values (the fork time, the windower, Durango's time) or as the
callables it reads late (the clock, the P-chain height), and what the layer knows of its
chain through :class:`ProposerChain`, a few read-only queries the layer
(:mod:`~vmstack.wrappers.proposer.chain`) answers from its processing blocks, its records
(:mod:`~vmstack.wrappers.proposer.state`) and its inner VM. No rule reads the layer itself.
The facts the checks gather of a block (:class:`BlockFacts`) are also what building on it
needs. The facts of a pre-fork block the layer has verified or accepted are kept
(:class:`PreForkFacts`), so building on it does not restore the whole inner block just to
read its timestamp.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import attrs

from vmstack.errors import AnyoneCanPropose, BlockNotFound, InvalidBlock
from vmstack.interfaces import Block, ChainVM
from vmstack.wrappers.proposer.certificate import format_node_id
from vmstack.wrappers.proposer.envelope import OptionBlock, PostForkBlock, decode_block
from vmstack.wrappers.proposer.windower import (
    EMPTY_NODE_ID,
    MAX_BUILD_WINDOWS,
    MAX_VERIFY_DELAY,
    MAX_VERIFY_WINDOWS,
    WINDOW_DURATION,
    Windower,
    time_to_slot,
)

if TYPE_CHECKING:
    from vmstack.wrappers.proposer.block import ProposerBlock

__all__ = [
    "BlockFacts",
    "MAX_CLOCK_SKEW",
    "PreForkFacts",
    "ProposerChain",
    "ProposerTurn",
    "block_facts",
    "check_extends_accepted_chain",
    "check_post_fork",
    "check_pre_fork",
    "check_pre_fork_extends_accepted_chain",
    "check_proposer_window",
    "decode_envelope",
    "inner_accepted",
    "own_facts",
    "parent_facts",
    "pchain_height_source",
    "proposer_turn",
    "try_envelope",
]

#: How far (seconds) a post-fork block's timestamp may run ahead of the local clock
#: (avalanchego's ``maxSkew``).
MAX_CLOCK_SKEW = 10

_UINT64_MAX = 2**64 - 1


@attrs.frozen
class BlockFacts:
    """What building on or verifying against a parent needs to know of it."""

    post_fork: bool
    timestamp: int
    pchain_height: int
    inner_id: bytes


class PreForkFacts:
    """The facts of the pre-fork blocks a layer has verified or accepted, newest kept.

    Only a block whose checks passed (its inner block verified) or that was accepted is
    remembered, and a rejected one is forgotten, so an entry says what asking the inner
    VM would: an accepted block stays served, a verified one until it is rejected. At
    most ``limit`` entries are kept (the oldest go first); a block not kept is looked up
    in the inner VM. Safe to use from several threads.
    """

    __slots__ = ("_facts", "_limit", "_lock")

    def __init__(self, limit: int = 256) -> None:
        self._facts: dict[bytes, BlockFacts] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def get(self, block_id: bytes) -> BlockFacts | None:
        """The kept facts of pre-fork block ``block_id``, or ``None``."""
        return self._facts.get(block_id)

    def remember(self, block: Block) -> None:
        """Keep the facts of ``block``, a pre-fork (inner) block verified or accepted."""
        facts = BlockFacts(False, block.timestamp, 0, block.id)
        with self._lock:
            kept = self._facts
            kept[facts.inner_id] = facts
            if len(kept) > self._limit:
                del kept[next(iter(kept))]

    def forget(self, block_id: bytes) -> None:
        """Drop ``block_id`` (rejected: the inner VM no longer serves it)."""
        with self._lock:
            self._facts.pop(block_id, None)


class ProposerChain(Protocol):
    """What the rules read of a proposer layer's chain: read-only queries the layer answers
    from its processing blocks, its records and its inner VM. Asking changes nothing."""

    @property
    def inner(self) -> ChainVM:
        """The VM below the layer: its blocks and its accepted chain."""
        ...

    def last_accepted(self) -> bytes:
        """The layer's last accepted block (its envelope once post-fork)."""
        ...

    def processing_facts(self, block_id: bytes) -> BlockFacts | None:
        """The facts of ``block_id`` if it is a processing (verified, undecided) post-fork
        block of the layer, else ``None``."""
        ...

    def accepted_facts(self, block_id: bytes) -> BlockFacts | None:
        """The facts of ``block_id`` if it is an accepted post-fork block of the layer
        (from its record; ``StoreCorrupted`` for a damaged one), else ``None``."""
        ...

    def is_accepted(self, block_id: bytes) -> bool:
        """Whether ``block_id`` is an accepted post-fork block (it has a record)."""
        ...

    def envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        """A post-fork block, processing or accepted, whose inner block is ``inner_id``."""
        ...

    def accepted_envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        """The accepted post-fork block whose inner block is ``inner_id``, or ``None``."""
        ...

    def pre_fork_facts(self, block_id: bytes) -> BlockFacts | None:
        """The kept facts of a pre-fork block the layer verified or accepted
        (:class:`PreForkFacts`), or ``None``."""
        ...


# --- what the rules know of a block -----------------------------------------------------


def own_facts(chain: ProposerChain, block_id: bytes) -> BlockFacts | None:
    """What the layer knows of its own post-fork block ``block_id``, without asking the
    inner VM; ``None`` if it is not one of them."""
    block_id = bytes(block_id)
    facts = chain.processing_facts(block_id)
    if facts is not None:
        return facts
    return chain.accepted_facts(block_id)


def block_facts(chain: ProposerChain, block_id: bytes) -> BlockFacts:
    """What building and verifying need to know of a block the layer serves
    (``BlockNotFound`` otherwise); only a pre-fork block the layer has not verified or
    accepted (:class:`PreForkFacts`) is looked up below."""
    facts = own_facts(chain, block_id)
    if facts is not None:
        return facts
    if chain.envelope_of_inner(block_id) is not None:
        raise BlockNotFound(f"block {block_id.hex()} is the inner block of a post-fork block")
    seen = chain.pre_fork_facts(block_id)
    if seen is not None:
        return seen
    inner_block = chain.inner.get_block(block_id)
    return BlockFacts(False, inner_block.timestamp, 0, inner_block.id)


def inner_accepted(inner: ChainVM, inner_id: bytes, height: int | None = None) -> bool:
    """Whether ``inner`` has accepted ``inner_id``; ``height``, when the caller knows
    it, spares asking the inner VM for the whole block (a slow restore) just to learn
    it."""
    if inner_id == inner.last_accepted():
        return True
    try:
        if height is None:
            height = inner.get_block(inner_id).height
        return height >= 0 and inner.get_block_id_at_height(height) == inner_id
    except BlockNotFound:
        return False


def pchain_height_source(pchain_height: Callable[[], int] | int) -> Callable[[], int]:
    """The current P-chain height as a zero-argument callable, from a fixed u64 or a
    callable; ``ValueError`` for anything else."""
    if isinstance(pchain_height, int) and not isinstance(pchain_height, bool):
        if not 0 <= pchain_height <= _UINT64_MAX:
            raise ValueError(f"pchain_height must be a u64, got {pchain_height}")
        fixed_height = pchain_height
        return lambda: fixed_height
    if callable(pchain_height):
        return pchain_height
    raise ValueError(f"pchain_height is an int or a callable, got {pchain_height!r}")


# --- which kind of block bytes are ------------------------------------------------------


def try_envelope(
    data: bytes,
    chain_id: bytes,
) -> tuple[PostForkBlock | None, InvalidBlock | None]:
    """``(envelope, None)`` for a valid post-fork block; ``(None, failure)`` for bytes
    that look like an envelope but fail; ``(None, None)`` for anything else."""
    decoded, failure = decode_envelope(data)
    if decoded is None:
        return None, failure
    try:
        decoded.verify(chain_id)
    except InvalidBlock as error:
        return None, error
    return decoded, None


def decode_envelope(data: bytes) -> tuple[PostForkBlock | None, InvalidBlock | None]:
    """As :func:`try_envelope`, without the epoch and signature checks (the costly
    part, which a batch runs last). Bytes without the codec version ``0`` in front are no
    envelope (a pre-fork block's bytes): ``(None, None)`` at once, nothing raised."""
    if data[:2] != b"\0\0":
        return None, None
    try:
        decoded = decode_block(data)
    except InvalidBlock as error:
        return None, error
    if isinstance(decoded, OptionBlock):
        return None, InvalidBlock(
            "option blocks follow oracle blocks, which no inner VM of this stack builds"
        )
    return decoded, None


# --- post-fork blocks -------------------------------------------------------------------


def parent_facts(chain: ProposerChain, child: ProposerBlock) -> BlockFacts:
    """What the layer knows of ``child``'s parent; ``InvalidBlock`` if it serves no such
    block."""
    try:
        return block_facts(chain, child.parent_id)
    except BlockNotFound:
        raise InvalidBlock(
            f"block {child.id.hex()}: parent {child.parent_id.hex()} is not known"
        ) from None


def check_post_fork(
    chain: ProposerChain,
    block: ProposerBlock,
    envelope: PostForkBlock,
    *,
    fork_time: float,
    clock: Callable[[], float],
    pchain_height: Callable[[], int],
    windower: Windower | None,
    durango_time: float,
) -> None:
    """The rules of a post-fork block ``block`` (its ``envelope``) against its parent, the
    accepted chain, the clock and the P-chain: ``fork_time`` and ``durango_time`` are the
    layer's, ``clock`` and ``pchain_height`` are read (once each, late) for the current
    time and P-chain height, ``windower`` is the layer's proposer windows (``None``: no
    windows)."""
    parent = parent_facts(chain, block)
    check_extends_accepted_chain(chain, block, parent)
    if not parent.post_fork:
        if parent.timestamp < fork_time:
            raise InvalidBlock(
                f"block {block.id.hex()}: post-fork block before the fork "
                f"(parent timestamp {parent.timestamp} < fork time "
                f"{fork_time})"
            )
        if envelope.certificate or envelope.signature:
            raise InvalidBlock(f"block {block.id.hex()}: the first post-fork block is unsigned")
    elif envelope.pchain_height < parent.pchain_height:
        raise InvalidBlock(
            f"block {block.id.hex()}: P-chain height "
            f"{envelope.pchain_height} is below its parent's "
            f"{parent.pchain_height}"
        )
    if block.inner.parent_id != parent.inner_id:
        raise InvalidBlock(
            f"block {block.id.hex()}: its inner block's parent "
            f"{block.inner.parent_id.hex()} is not the inner block of its "
            f"parent ({parent.inner_id.hex()})"
        )
    if envelope.timestamp < parent.timestamp:
        raise InvalidBlock(
            f"block {block.id.hex()}: timestamp {envelope.timestamp} is "
            f"before its parent's {parent.timestamp}"
        )
    if envelope.timestamp > clock() + MAX_CLOCK_SKEW:
        raise InvalidBlock(
            f"block {block.id.hex()}: timestamp {envelope.timestamp} is too far in the future"
        )
    current = pchain_height()
    if envelope.pchain_height > current:
        raise InvalidBlock(
            f"block {block.id.hex()}: P-chain height "
            f"{envelope.pchain_height} is ahead of the P-chain ({current})"
        )
    if windower is not None and parent.post_fork:
        check_proposer_window(
            windower,
            durango_time=durango_time,
            block_id=block.id,
            height=block.height,
            timestamp=envelope.timestamp,
            proposer=envelope.proposer,
            parent_timestamp=parent.timestamp,
            parent_pchain_height=parent.pchain_height,
        )
    inner_id = block.inner.id
    if chain.accepted_envelope_of_inner(inner_id) is not None:
        raise InvalidBlock(
            f"block {block.id.hex()}: its inner block {inner_id.hex()} is "
            "already accepted (in another post-fork block)"
        )


def check_extends_accepted_chain(
    chain: ProposerChain, block: ProposerBlock, parent: BlockFacts
) -> None:
    """A post-fork block builds on a processing block or on the last accepted block:
    a child of any other accepted block conflicts with the accepted chain (it would
    re-decide an accepted height), so it is ``InvalidBlock``."""
    parent_id = block.parent_id
    if chain.processing_facts(parent_id) is not None:
        return
    last = chain.last_accepted()
    if parent_id == last:
        return
    if parent.post_fork or inner_accepted(chain.inner, parent.inner_id):
        raise InvalidBlock(
            f"block {block.id.hex()}: it conflicts with the accepted chain "
            f"(its parent {parent_id.hex()} is accepted but the last "
            f"accepted block is {last.hex()})"
        )


# --- pre-fork blocks --------------------------------------------------------------------


def check_pre_fork(chain: ProposerChain, block: ProposerBlock, *, fork_time: float) -> None:
    """A pre-fork block needs a pre-fork parent from before ``fork_time``, and extends the
    accepted chain (:func:`check_pre_fork_extends_accepted_chain`).

    A parent is fetched only when the block itself is at or after the fork time: a
    block before it has a parent before it too, as chain VMs never let time run
    backwards from parent to child (the inner VM's verify checks that).
    """
    parent_id = block.parent_id
    if (
        chain.processing_facts(parent_id) is not None
        or chain.is_accepted(parent_id)
        or chain.envelope_of_inner(parent_id) is not None
    ):
        raise InvalidBlock(f"block {block.id.hex()}: a post-fork block never has a pre-fork child")
    if block.timestamp >= fork_time:
        parent = parent_facts(chain, block)
        if parent.timestamp >= fork_time:
            raise InvalidBlock(
                f"block {block.id.hex()}: pre-fork block after the fork "
                f"(parent timestamp {parent.timestamp} >= fork time "
                f"{fork_time})"
            )
    check_pre_fork_extends_accepted_chain(chain, block)


def check_pre_fork_extends_accepted_chain(
    chain: ProposerChain, block: ProposerBlock, *, accepting: bool = False
) -> None:
    """A pre-fork block that is not accepted itself builds on the last accepted block
    or (to be verified) on a block that is not accepted, processing below: a new child
    of an older accepted block conflicts with the accepted chain, and only a child of
    the last accepted block can be accepted, whatever the inner VM allows."""
    last = chain.last_accepted()
    parent_id = block.parent_id
    if parent_id == last or block.id == last:
        return
    if not accepting and not inner_accepted(chain.inner, parent_id, block.height - 1):
        return
    if inner_accepted(chain.inner, block.id, block.height):
        return
    if accepting:
        raise InvalidBlock(
            f"block {block.id.hex()}: its parent {parent_id.hex()} is "
            f"not the last accepted block {last.hex()}"
        )
    raise InvalidBlock(
        f"block {block.id.hex()}: it conflicts with the accepted chain "
        f"(its parent {parent_id.hex()} is accepted but the last accepted "
        f"block is {last.hex()})"
    )


# --- proposer windows -------------------------------------------------------------------


def _who(node_id: bytes | None) -> str:
    return (
        "unsigned"
        if node_id is None or node_id == EMPTY_NODE_ID
        else (f"signed by {format_node_id(node_id)}")
    )


def check_proposer_window(
    windower: Windower,
    *,
    durango_time: float,
    block_id: bytes,
    height: int,
    timestamp: int,
    proposer: bytes | None,
    parent_timestamp: int,
    parent_pchain_height: int,
) -> None:
    """The proposer windows of a post-fork block over a post-fork parent, as avalanchego's
    ``verifyPostDurangoBlockDelay`` / ``verifyPreDurangoBlockDelay``, against the set at
    the parent's P-chain height. Durango applies from a parent at or after
    ``durango_time``:

    - from Durango on, the block's slot (:func:`time_to_slot` from the parent) expects
      one proposer, and the block must be signed by it; with no validators anyone may
      propose and the block must be unsigned;
    - before it, the block comes no earlier than its proposer's delay (an unsigned block
      waits every verify window), and is signed iff it comes within
      :data:`~vmstack.wrappers.proposer.windower.MAX_VERIFY_DELAY` of its parent.

    ``InvalidBlock`` names the slot and whose turn it is, or the delays.
    """
    name = block_id.hex()
    if parent_timestamp >= durango_time:
        slot = time_to_slot(parent_timestamp, timestamp)
        try:
            expected = windower.expected_proposer(height, parent_pchain_height, slot)
        except AnyoneCanPropose:
            if proposer is not None:
                raise InvalidBlock(
                    f"block {name}: {_who(proposer)} in slot {slot}, but no "
                    f"validator is at P-chain height {parent_pchain_height}: "
                    "anyone may propose, and the block must be unsigned"
                ) from None
            return
        except ValueError as error:
            raise InvalidBlock(f"block {name}: {error}") from None
        if expected != proposer:
            raise InvalidBlock(
                f"block {name}: slot {slot} of height {height} expects "
                f"{format_node_id(expected)}, the block is {_who(proposer)}"
            )
        return
    signer = EMPTY_NODE_ID if proposer is None else proposer
    min_delay = windower.delay(height, parent_pchain_height, signer, MAX_VERIFY_WINDOWS)
    delay = timestamp - parent_timestamp
    if delay < min_delay:
        raise InvalidBlock(
            f"block {name}: proposer window not started: a block "
            f"{_who(proposer)} at height {height} comes from {min_delay:g} s "
            f"after its parent, this one {delay:g} s after"
        )
    if (delay < MAX_VERIFY_DELAY) != (proposer is not None):
        raise InvalidBlock(
            f"block {name}: {delay:g} s after its parent it must be "
            f"{'signed' if delay < MAX_VERIFY_DELAY else 'unsigned'} (signed "
            f"within {MAX_VERIFY_DELAY:g} s), it is {_who(proposer)}"
        )


@attrs.frozen
class ProposerTurn:
    """When a node may build a child of a parent: from ``start`` (seconds), the block
    signed iff ``signed``; ``reason`` says why not earlier (whose turn it is)."""

    start: float
    signed: bool
    reason: str


def proposer_turn(
    windower: Windower,
    *,
    durango_time: float,
    min_block_delay: float,
    node_id: bytes | None,
    height: int,
    timestamp: int,
    parent_timestamp: int,
    parent_pchain_height: int,
) -> ProposerTurn:
    """When ``node_id`` (``None``: a node without a key) may build the child at ``height``
    of a post-fork parent, for a block stamped ``timestamp``, as avalanchego's
    ``timeToBuild`` and ``buildChild`` decide it, with the set at the parent's P-chain
    height and never before ``min_block_delay`` after the parent:

    - from Durango on, the start of the node's first slot from the block's slot on (from
      ``min_block_delay`` on when the set is empty: anyone builds, unsigned); the block is
      signed. A node outside the set has no slot within the look-ahead, and its start is
      the look-ahead's end;
    - before it, its delay in the proposer list of
      :data:`~vmstack.wrappers.proposer.windower.MAX_BUILD_WINDOWS` windows (the last
      window for a node without a key); the block is signed iff within the verify windows.
    """
    me = EMPTY_NODE_ID if node_id is None else node_id
    me_name = "a node without a staking key" if node_id is None else format_node_id(me)
    earliest = parent_timestamp + min_block_delay
    if parent_timestamp >= durango_time:
        slot = time_to_slot(parent_timestamp, max(float(timestamp), earliest))
        try:
            delay = windower.min_delay_for_proposer(height, parent_pchain_height, me, slot)
        except AnyoneCanPropose:
            return ProposerTurn(
                earliest,
                False,
                f"no validator is at P-chain height "
                f"{parent_pchain_height}: anyone may build height {height}, "
                f"unsigned, from {earliest!r}",
            )
        start = max(parent_timestamp + delay, earliest)
        now_slot = time_to_slot(parent_timestamp, timestamp)
        expected = windower.expected_proposer(height, parent_pchain_height, now_slot)
        if me not in windower.validator_set(parent_pchain_height).members:
            whose = (
                f"{me_name} is not a validator at P-chain height {parent_pchain_height}, so "
                "it has no slot"
            )
        else:
            whose = f"its next slot is {time_to_slot(parent_timestamp, start)}, from {start!r}"
        return ProposerTurn(
            start,
            True,
            f"slot {now_slot} of height {height} expects {format_node_id(expected)}; {whose}",
        )
    delay = windower.delay(height, parent_pchain_height, me, MAX_BUILD_WINDOWS)
    start = parent_timestamp + max(delay, min_block_delay)
    return ProposerTurn(
        start,
        timestamp - parent_timestamp < MAX_VERIFY_DELAY,
        f"height {height}: the window of {me_name} opens {delay:g} s "
        f"after its parent ({delay / WINDOW_DURATION:g} windows), at "
        f"{start!r}",
    )
