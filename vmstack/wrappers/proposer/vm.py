"""ProposerVM: avalanchego's proposervm ("snowman++") as a layer over any ``ChainVM``.

Before the fork every block is the inner VM's block itself (a *pre-fork* block: same ID,
same bytes). From the fork on, every inner block travels inside a *post-fork* envelope
(:class:`~vmstack.wrappers.proposer.block.PostForkBlock`) that names its proposer and is
signed with that proposer's staking key. The fork rules are avalanchego's: a block whose
parent's timestamp is before ``fork_time`` is pre-fork, one whose parent's timestamp is at
or after it is post-fork; the first post-fork block is unsigned; a post-fork parent never
has a pre-fork child.

This module holds the layer's lifecycle: serving, building, preference, and the accept and
reject plumbing. Accepted post-fork blocks are recorded in the layer's own keyspace of the
store with an index from inner block ID to envelope ID
(:mod:`~vmstack.wrappers.proposer.state`, which also undoes an accept a crash cut short);
verified, undecided post-fork blocks are kept in memory. Pre-fork blocks live only in the
inner VM, whose accepted chain stays the authority on heights and on the last accepted
block (the index maps its answers to envelopes); a post-fork height whose index entry is
lost is ``StoreCorrupted``, never answered with its bare inner block. The rules of each
kind of block are in :mod:`~vmstack.wrappers.proposer.verify`, the batched protocol in
:mod:`~vmstack.wrappers.proposer.batched`.

Decisions, as avalanchego's proposervm and ``utils/tree`` make them (docs/decisions.md):

- two post-fork blocks may wrap one inner block; it is verified once and shared by every
  wrapper, even one verified after an earlier wrapper was rejected;
- a post-fork block's ``reject`` forgets the wrapper only (it is never served again): its
  inner block may still be accepted through another wrapper, so it stays verified in the
  layer's :class:`~vmstack.wrappers.proposer.tree.InnerTree`;
- accepting a post-fork block accepts its inner block and rejects the inner block's
  processing siblings and, transitively, their inner descendants: every inner block the
  layer verified gets exactly one decision, whatever order the engine rejects the
  wrappers in;
- a pre-fork block is the inner block itself: its ``reject`` is the inner ``reject``;
- a post-fork block builds on a processing block or on the last accepted block, and its
  inner block must not be accepted already, else ``verify`` fails; ``accept`` takes only a
  child of the last accepted block, so nothing a peer sends moves the accepted chain;
- ``reject`` never moves the preference (the engine sets it); ``build_block`` on a
  preferred block that is no longer served builds on the last accepted block instead.

Errors raised by the inner VM pass through unchanged (the very object).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from vmstack.capability import has_batched_methods
from vmstack.clock import Clock
from vmstack.errors import (
    BlockNotFound,
    InvalidBlock,
    ProposerWindowNotStarted,
    StoreCorrupted,
)
from vmstack.interfaces import Block, ChainVM
from vmstack.parsepool import ParsePool
from vmstack.store import KeyValueStore, MemoryStore, is_writer
from vmstack.wrappers.proposer import batched
from vmstack.wrappers.proposer.block import (
    PostForkBlock,
    build_signed,
    build_unsigned,
    chain_id_bytes,
)
from vmstack.wrappers.proposer.certificate import Certificate
from vmstack.wrappers.proposer.staking import StakingKey, signing_identity
from vmstack.wrappers.proposer.state import ProposerState, is_block_id
from vmstack.wrappers.proposer.tree import InnerTree
from vmstack.wrappers.proposer.verdicts import signature_verdict
from vmstack.wrappers.proposer.verify import (
    BlockFacts,
    PreForkFacts,
    ProposerChain,
    ProposerTurn,
    block_facts,
    check_post_fork,
    check_pre_fork,
    check_pre_fork_extends_accepted_chain,
    inner_accepted,
    own_facts,
    pchain_height_source,
    proposer_turn,
    try_envelope,
)
from vmstack.wrappers.proposer.windower import ValidatorSource, Windower

__all__ = [
    "ProposerBlock",
    "ProposerVM",
]


@attrs.define
class _SharedInner:
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


class _LayerChain:
    """The read-only queries the rules ask of a layer
    (:class:`~vmstack.wrappers.proposer.verify.ProposerChain`), answered from its processing
    blocks, its records in the store, its kept pre-fork facts and its inner VM."""

    __slots__ = ("_vm",)

    def __init__(self, vm: ProposerVM) -> None:
        self._vm = vm

    @property
    def inner(self) -> ChainVM:
        return self._vm._inner

    def last_accepted(self) -> bytes:
        return self._vm.last_accepted()

    def processing_facts(self, block_id: bytes) -> BlockFacts | None:
        processing = self._vm._processing.get(block_id)
        if processing is None or processing.envelope is None:
            return None
        envelope = processing.envelope
        return BlockFacts(True, envelope.timestamp, envelope.pchain_height, processing.inner.id)

    def accepted_facts(self, block_id: bytes) -> BlockFacts | None:
        record = self._vm._state.record(block_id)
        if record is None:
            return None
        inner_id, envelope = record
        return BlockFacts(True, envelope.timestamp, envelope.pchain_height, inner_id)

    def is_accepted(self, block_id: bytes) -> bool:
        return self._vm._state.is_accepted(block_id)

    def envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        return self._vm._envelope_of_inner(inner_id)

    def accepted_envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        return self._vm._state.accepted_envelope_of_inner(inner_id)

    def pre_fork_facts(self, block_id: bytes) -> BlockFacts | None:
        return self._vm._pre_fork_facts.get(block_id)


class ProposerBlock:
    """A block of :class:`ProposerVM`: a post-fork envelope over an inner block, or a
    pre-fork block (the inner block itself, same ID and bytes).

    ``verify``, ``accept`` and ``reject`` apply the fork rules and reach the inner block.
    """

    __slots__ = ("_envelope", "_inner", "_rejected", "_vm")

    def __init__(self, vm: ProposerVM, inner: Block, envelope: PostForkBlock | None) -> None:
        self._vm = vm
        self._inner = inner
        self._envelope = envelope
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
        self._vm._verify(self)

    def accept(self) -> None:
        """Accept the inner block, then record a post-fork block as accepted."""
        self._vm._accept(self)

    def reject(self) -> None:
        """Forget a post-fork block (never served again) and leave its inner block
        undecided: it may be accepted through another wrapper, and is rejected when a
        sibling inner block is accepted. A pre-fork block rejects its inner block.
        ``InvalidBlock`` for an accepted block."""
        self._vm._reject(self)

    def __repr__(self) -> str:
        kind = "post-fork" if self.post_fork else "pre-fork"
        return f"ProposerBlock({kind}, height={self.height}, id={self.id.hex()[:12]}…)"


class ProposerVM:
    """The proposer layer over ``inner``.

    ``fork_time`` (seconds, on ``clock``) activates post-fork blocks; ``math.inf`` never
    does, which makes the layer a pure pass-through of pre-fork blocks. ``chain_id`` (32
    bytes, or an int taken as a 32-byte big-endian number) is signed into every header.
    ``store`` is the ``KeyValueStore`` the stack shares
    (the layer uses a prefixed view of it; a fresh ``MemoryStore`` if ``None``).
    ``staking_key`` (also accepted as ``signer``) is the node's identity: a
    :class:`StakingKey`, or a pycryptodome
    ``RsaKey`` / P-256 ``EccKey`` with its ``certificate`` (DER or :class:`Certificate`; a
    self-signed one if omitted). Without a key the node builds unsigned post-fork blocks, as
    anyone may once the proposer windows have passed.
    ``validators`` turns on avalanchego's proposer windows (Snowman++): the validator set
    (NodeID -> weight) at every P-chain height, a callable of the P-chain height giving
    it, or a :class:`~vmstack.wrappers.proposer.windower.Windower`; ``{}`` is an empty set
    (anyone may propose, unsigned). A post-fork child of a post-fork block is then checked
    against the set at its parent's P-chain height
    (:func:`~vmstack.wrappers.proposer.verify.check_proposer_window`): from
    ``durango_time`` on (judged by the parent's timestamp; default 0, Durango throughout),
    each slot of 5 s has one expected proposer, who alone signs a block in it; before it,
    the pre-Durango delays apply. ``build_block`` builds only from this node's turn (and
    never sooner than ``min_block_delay`` seconds after the parent), else raises
    :class:`~vmstack.errors.ProposerWindowNotStarted` naming the time it may build
    (:meth:`build_time`). Without ``validators`` (the default) the layer models no
    windows: any node builds at any time, signed when it has a key.
    ``pchain_height`` is the current P-chain height, an int or a zero-argument callable;
    built blocks name it and verified ones may not exceed it. ``clock`` gives block
    timestamps and the ancestors time budget. ``parse_pool`` (a
    :class:`~vmstack.parsepool.ParsePool`, none by default) checks the envelopes'
    signatures of a large ``batched_parse_block`` in worker processes; the layer starts
    its workers in the background as it is built (a batch before they are ready is parsed
    serially, never waiting for them), owns it from then on and :meth:`close` closes it (a
    pool shared by several layers closes once).

    On start the layer undoes a record written ahead of an inner accept that a crash cut
    short, but only when ``store`` is its data's writer (:func:`vmstack.store.is_writer`):
    over a read-only handle, or beside a live writer, it writes nothing.
    """

    __slots__ = (
        "_chain_id",
        "_clock",
        "_durango_time",
        "_fork_time",
        "_inner",
        "_inner_batched",
        "_min_block_delay",
        "_parse_pool",
        "_pchain_height",
        "_pre_fork_facts",
        "_preferred",
        "_processing",
        "_shared",
        "_signer",
        "_state",
        "_tree",
        "_windower",
    )

    def __init__(
        self,
        inner: ChainVM,
        *,
        fork_time: float,
        chain_id: bytes | int,
        store: KeyValueStore | None = None,
        staking_key: StakingKey | Any = None,
        certificate: Certificate | bytes | None = None,
        clock: Clock = time.time,
        pchain_height: Callable[[], int] | int = 0,
        signer: StakingKey | Any = None,
        parse_pool: ParsePool | None = None,
        validators: Windower | ValidatorSource | None = None,
        durango_time: float = 0.0,
        min_block_delay: float = 1.0,
    ) -> None:
        if parse_pool is not None and not isinstance(parse_pool, ParsePool):
            raise ValueError(f"parse_pool must be a ParsePool or None, got {parse_pool!r}")
        if (
            isinstance(fork_time, bool)
            or not isinstance(fork_time, int | float)
            or (math.isnan(fork_time))
        ):
            raise ValueError(f"fork_time must be a number of seconds, got {fork_time!r}")
        for name, value in (("durango_time", durango_time), ("min_block_delay", min_block_delay)):
            if isinstance(value, bool) or not isinstance(value, int | float) or (math.isnan(value)):
                raise ValueError(f"{name} must be a number of seconds, got {value!r}")
        if min_block_delay < 0 or math.isinf(min_block_delay):
            raise ValueError(
                f"min_block_delay must be finite and not negative, got {min_block_delay!r}"
            )
        self._chain_id = chain_id_bytes(chain_id)
        self._windower = (
            validators
            if validators is None or isinstance(validators, Windower)
            else Windower(validators, self._chain_id)
        )
        self._durango_time = durango_time
        self._min_block_delay = min_block_delay
        self._pchain_height = pchain_height_source(pchain_height)
        self._signer = signing_identity(staking_key, certificate, signer=signer)
        self._inner = inner
        #: The inner VM as a batched VM when it has the methods (it may still refuse).
        self._inner_batched = inner if has_batched_methods(inner) else None
        self._fork_time = fork_time
        self._clock = clock
        self._parse_pool = parse_pool
        store = MemoryStore() if store is None else store
        self._state = ProposerState(store)
        self._processing: dict[bytes, ProposerBlock] = {}
        self._shared: dict[bytes, _SharedInner] = {}
        self._tree = InnerTree()
        self._pre_fork_facts = PreForkFacts()
        self._preferred: bytes | None = None
        if is_writer(store):
            self._state.recover(functools.partial(inner_accepted, inner))
        if parse_pool is not None:
            parse_pool.start(signature_verdict)

    # --- configuration -------------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        """The clock this layer runs on (fork rule, timestamps, its time budgets)."""
        return self._clock

    @property
    def inner(self) -> ChainVM:
        """The VM below this layer."""
        return self._inner

    @property
    def batching(self) -> bool:
        """Always True: the layer answers batched calls itself, walking the inner VM
        serially when that VM cannot batch."""
        return True

    @property
    def fork_time(self) -> float:
        """The time from which children of a block are post-fork blocks."""
        return self._fork_time

    @property
    def chain_id(self) -> bytes:
        """The chain ID signed into every header."""
        return self._chain_id

    @property
    def windower(self) -> Windower | None:
        """The proposer windows the layer enforces, or ``None`` (no windows)."""
        return self._windower

    @property
    def durango_time(self) -> float:
        """The time from which children of a block follow the post-Durango windows."""
        return self._durango_time

    @property
    def min_block_delay(self) -> float:
        """Seconds after its parent before which no windowed child is built."""
        return self._min_block_delay

    @property
    def parse_pool(self) -> ParsePool | None:
        """The worker processes that check a large batch's signatures, if any."""
        return self._parse_pool

    def close(self) -> None:
        """Close the layer's :attr:`parse_pool` (its workers stopped and reaped); the layer
        keeps working, parsing every batch serially. Idempotent."""
        if self._parse_pool is not None:
            self._parse_pool.close()

    @property
    def node_id(self) -> bytes | None:
        """This node's NodeID, or ``None`` when it builds unsigned blocks."""
        return None if self._signer is None else self._signer.node_id

    # --- ChainVM -------------------------------------------------------------------------

    def get_block(self, block_id: bytes) -> ProposerBlock:
        """A processing or accepted block; ``BlockNotFound`` for anything else, including
        the inner block of a post-fork block (only its envelope is served)."""
        if not is_block_id(block_id):
            return ProposerBlock(self, self._inner.get_block(block_id), None)
        block_id = bytes(block_id)
        processing = self._processing.get(block_id)
        if processing is not None:
            return processing
        record = self._state.record(block_id)
        if record is not None:
            inner_id, envelope = record
            return ProposerBlock(self, self._inner.get_block(inner_id), envelope)
        if self._envelope_of_inner(block_id) is not None:
            raise BlockNotFound(
                f"block {block_id.hex()} is the inner block of a post-fork "
                "block; only the post-fork block is served"
            )
        inner_block = self._inner.get_block(block_id)
        first = self._state.first_post_fork_height()
        if first is not None and inner_block.height >= first:
            raise BlockNotFound(
                f"block {block_id.hex()} is at height {inner_block.height}, "
                f"after the fork (from {first}): only post-fork blocks are "
                "served there"
            )
        return ProposerBlock(self, inner_block, None)

    def parse_block(self, data: bytes) -> ProposerBlock:
        """Parse ``data`` as a post-fork block (signature checked), else as pre-fork bytes.

        As avalanchego does, bytes that fail as a post-fork block are tried as an inner
        block; if they looked like an envelope (codec version 0) and the inner VM refuses
        them too, the envelope's failure is raised, as it says more. Anything but a bytes
        object (``bytes``, ``bytearray``, ``memoryview``) is ``InvalidBlock``, as below.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidBlock(f"block bytes must be bytes, not {type(data).__name__}")
        data = bytes(data)
        envelope, failure = try_envelope(data, self._chain_id)
        if envelope is not None:
            existing = self._processing.get(envelope.id)
            if existing is not None:
                return existing
            return ProposerBlock(self, self._inner.parse_block(envelope.inner), envelope)
        try:
            inner_block = self._inner.parse_block(data)
        except InvalidBlock as error:
            if failure is None:
                raise
            raise failure from error
        return ProposerBlock(self, inner_block, None)

    def build_block(self) -> ProposerBlock:
        """Build on the preferred block: a pre-fork block while its timestamp is before the
        fork, else a post-fork block (unsigned when its parent is pre-fork or the node has
        no key). With proposer windows, a child of a post-fork block is built only from
        this node's turn, signed as the windows say; before it
        :class:`~vmstack.errors.ProposerWindowNotStarted` names the time it may build, and
        nothing is taken from the inner VM. A preferred block that is no longer served
        (rejected) gives way to the last accepted block, here and in the inner VM, so a
        node always builds."""
        parent_id, parent = self._build_parent()
        if not parent.post_fork and parent.timestamp < self._fork_time:
            return ProposerBlock(self, self._inner.build_block(), None)
        timestamp = max(int(self._clock()), parent.timestamp)
        signed = parent.post_fork and self._signer is not None
        if parent.post_fork and self._windower is not None:
            turn = self._turn(parent_id, parent, timestamp)
            if timestamp < turn.start:
                raise ProposerWindowNotStarted(
                    f"not this node's turn to build on {parent_id.hex()} at {timestamp}: "
                    f"{turn.reason}",
                    build_time=turn.start,
                )
            signed = turn.signed and self._signer is not None
        inner_block = self._inner.build_block()
        pchain_height = max(self._pchain_height(), parent.pchain_height)
        if not signed or self._signer is None:
            envelope = build_unsigned(parent_id, timestamp, pchain_height, bytes(inner_block))
        else:
            envelope = build_signed(
                parent_id,
                timestamp,
                pchain_height,
                bytes(inner_block),
                key=self._signer,
                chain_id=self._chain_id,
            )
        return ProposerBlock(self, inner_block, envelope)

    def build_time(self) -> float:
        """The earliest time (seconds, on the layer's clock) at which :meth:`build_block`
        builds on the preferred block: now when it may build now (always without proposer
        windows, and on a pre-fork block), else the start of this node's turn."""
        now = self._clock()
        parent_id, parent = self._build_parent()
        if self._windower is None or not parent.post_fork:
            return now
        turn = self._turn(parent_id, parent, max(int(now), parent.timestamp))
        return max(now, turn.start)

    def _build_parent(self) -> tuple[bytes, BlockFacts]:
        """The preferred block and its facts; a preferred block no longer served gives
        way to the last accepted one."""
        parent_id = self._preferred_id()
        try:
            return parent_id, block_facts(self._chain(), parent_id)
        except BlockNotFound:
            if self._preferred is None:
                raise
            self._prefer_last_accepted()
            parent_id = self._preferred_id()
            return parent_id, block_facts(self._chain(), parent_id)

    def _turn(self, parent_id: bytes, parent: BlockFacts, timestamp: int) -> ProposerTurn:
        """This node's turn to build a child of post-fork ``parent`` stamped
        ``timestamp``."""
        assert self._windower is not None
        processing = self._processing.get(parent_id)
        parent_height = (
            processing.height
            if processing is not None
            else self._inner.get_block(parent.inner_id).height
        )
        return proposer_turn(
            self._windower,
            durango_time=self._durango_time,
            min_block_delay=self._min_block_delay,
            node_id=self.node_id,
            height=parent_height + 1,
            timestamp=timestamp,
            parent_timestamp=parent.timestamp,
            parent_pchain_height=parent.pchain_height,
        )

    def set_preference(self, block_id: bytes) -> None:
        """Prefer ``block_id`` (served, else ``BlockNotFound``) and its inner block below."""
        facts = own_facts(self._chain(), block_id) if is_block_id(block_id) else None
        if facts is not None:
            self._inner.set_preference(facts.inner_id)
        else:
            if is_block_id(block_id) and self._envelope_of_inner(bytes(block_id)) is not None:
                raise BlockNotFound(
                    f"block {bytes(block_id).hex()} is the inner block of a post-fork block"
                )
            self._inner.set_preference(block_id)
        self._preferred = bytes(block_id)

    def last_accepted(self) -> bytes:
        """The inner VM's last accepted block, as its envelope once it is post-fork.
        ``StoreCorrupted`` if the layer has accepted post-fork blocks and the index has
        lost the last one's entry (it is never answered as a bare inner block)."""
        inner_id = self._inner.last_accepted()
        while True:
            found = self._state.accepted_envelope_of_inner(inner_id)
            if found is not None:
                return found
            if self._state.newest_parent() in (None, inner_id):
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

    def get_block_id_at_height(self, height: int) -> bytes:
        """The inner VM's accepted block at ``height``, as its envelope after the fork;
        ``StoreCorrupted`` for a post-fork height whose index entry is lost."""
        inner_id = self._inner.get_block_id_at_height(height)
        found = self._state.accepted_envelope_of_inner(inner_id)
        if found is not None:
            return found
        first = self._state.first_post_fork_height()
        if first is not None and height >= first:
            raise StoreCorrupted(
                f"accepted height {height} is after the fork (from {first}) "
                "but has no entry in the post-fork index"
            )
        return inner_id

    # --- BatchedChainVM ------------------------------------------------------------------

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        """``block_id`` and its ancestors, newest first, under one budget for the whole
        answer: the layer's own blocks, then the pre-fork part from the inner VM (one
        batched call, or a serial walk of it when it cannot batch); see
        :func:`vmstack.wrappers.proposer.batched.get_ancestors`."""
        return batched.get_ancestors(
            self, block_id, max_blocks_num, max_blocks_size, max_retrieval_time
        )

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[ProposerBlock]:
        """Parse ``blocks`` in input order as :meth:`parse_block` parses each, with all
        inner bytes parsed below in one call and the signatures checked last;
        ``InvalidBlock`` names the failing index (see
        :func:`vmstack.wrappers.proposer.batched.batched_parse_block`). Already verified
        blocks are returned as the same objects."""
        parsed: list[ProposerBlock] = []
        for inner_block, envelope in batched.batched_parse_block(self, blocks):
            existing = None if envelope is None else self._processing.get(envelope.id)
            parsed.append(
                existing if existing is not None else ProposerBlock(self, inner_block, envelope)
            )
        return parsed

    # --- the model behind them -----------------------------------------------------------

    def _chain(self) -> ProposerChain:
        """What the rules read of this layer, as read-only queries."""
        return _LayerChain(self)

    def _preferred_id(self) -> bytes:
        return self.last_accepted() if self._preferred is None else self._preferred

    def _envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        """A post-fork block whose inner block is ``inner_id``: a processing one, the
        first that wrapped it while it is undecided, or the accepted one."""
        shared = self._shared.get(inner_id)
        if shared is not None:
            return shared.wrappers[0] if shared.wrappers else shared.first
        return self._state.accepted_envelope_of_inner(inner_id)

    def _verify(self, block: ProposerBlock) -> None:
        """Apply the rules of the block's kind (:mod:`~vmstack.wrappers.proposer.verify`),
        then verify the inner block (once for all the post-fork blocks wrapping it, until
        it is decided) and keep a post-fork block as processing."""
        envelope = block.envelope
        if block._rejected:
            raise InvalidBlock(f"block {block.id.hex()} was rejected")
        if envelope is None:
            check_pre_fork(self._chain(), block, fork_time=self._fork_time)
            block.inner.verify()
            self._pre_fork_facts.remember(block.inner)
            return
        if block.id in self._processing or self._state.is_accepted(block.id):
            return
        check_post_fork(
            self._chain(),
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
            self._shared[inner_id] = _SharedInner(block.inner, (block.id,), block.id)
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
        self._processing[block.id] = block

    def _accept(self, block: ProposerBlock) -> None:
        envelope = block.envelope
        if block._rejected:
            raise InvalidBlock(f"block {block.id.hex()} was rejected and cannot be accepted")
        if envelope is None:
            check_pre_fork_extends_accepted_chain(self._chain(), block, accepting=True)
            block.inner.accept()
            self._pre_fork_facts.remember(block.inner)
            self._follow_preference(block)
            return
        if block.id not in self._processing:
            if self._state.is_accepted(block.id):
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
        self._state.write_accepted(block.id, inner_id, envelope, block.height)
        try:
            block.inner.accept()
        except BaseException:
            self._state.undo_record(block.id, inner_id, envelope.parent_id)
            raise
        # The inner block is decided: other wrappers of it, still processing, are rejected
        # by the engine later without touching it. Its inner siblings can no longer be
        # accepted: they are rejected now, with their inner descendants.
        self._shared.pop(inner_id, None)
        del self._processing[block.id]
        self._follow_preference(block)
        for loser in self._tree.reject_conflicts(block.inner):
            self._shared.pop(loser.id, None)

    def _follow_preference(self, accepted: ProposerBlock) -> None:
        """Move the preference onto a block accepted on top of the preferred one."""
        if self._preferred == accepted.parent_id:
            self._preferred = accepted.id

    def _reject(self, block: ProposerBlock) -> None:
        if block.envelope is None:
            self._pre_fork_facts.forget(block.id)
            block.inner.reject()
            # Post-fork children of a rejected pre-fork block can never be accepted.
            for loser in self._tree.reject_children(block.id):
                self._shared.pop(loser.id, None)
            return
        if self._state.is_accepted(block.id):
            raise InvalidBlock(f"block {block.id.hex()} is accepted and cannot be rejected")
        block._rejected = True
        if self._processing.pop(block.id, None) is not None:
            shared = self._shared.get(block.inner.id)
            if shared is not None:
                # The inner block stays verified and undecided (avalanchego's proposervm
                # never rejects it here): another wrapper may still be accepted, and an
                # accepted sibling rejects it (InnerTree).
                shared.wrappers = tuple(w for w in shared.wrappers if w != block.id)

    def _prefer_last_accepted(self) -> None:
        """Prefer the last accepted block, in this layer and in the inner VM."""
        self._preferred = None
        self._inner.set_preference(self._inner.last_accepted())
