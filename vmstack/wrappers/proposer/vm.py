"""ProposerVM: avalanchego's proposervm ("snowman++") as a layer over any ``ChainVM``.

Before the fork every block is the inner VM's block itself (a *pre-fork* block: same ID,
same bytes). From the fork on, every inner block travels inside a *post-fork* envelope
(:class:`~vmstack.wrappers.proposer.envelope.PostForkBlock`) that names its proposer and is
signed with that proposer's staking key. The fork rules are avalanchego's: a block whose
parent's timestamp is before ``fork_time`` is pre-fork, one whose parent's timestamp is at
or after it is post-fork; the first post-fork block is unsigned; a post-fork parent never
has a pre-fork child.

This module holds the layer's lifecycle: configuration, serving, building and the
preference. Accepted post-fork blocks are recorded in the layer's own keyspace of the
store with an index from inner block ID to envelope ID
(:mod:`~vmstack.wrappers.proposer.state`, which also undoes an accept a crash cut short);
verified, undecided post-fork blocks are kept in memory. Pre-fork blocks live only in the
inner VM, whose accepted chain stays the authority on heights and on the last accepted
block (the index maps its answers to envelopes); a post-fork height whose index entry is
lost is ``StoreCorrupted``, never answered with its bare inner block. The layer's blocks
are :class:`~vmstack.wrappers.proposer.block.ProposerBlock`; what it has verified and how
it decides them (verify, accept, reject, as avalanchego's proposervm and ``utils/tree``
do) is its :class:`~vmstack.wrappers.proposer.chain.LayerChain`; the rules of each kind
of block are in :mod:`~vmstack.wrappers.proposer.verify`, the batched protocol in
:mod:`~vmstack.wrappers.proposer.batched`.

Building follows the preference: ``reject`` never moves it (the engine sets it);
``build_block`` on a preferred block that is no longer served builds on the last accepted
block instead.

Errors raised by the inner VM pass through unchanged (the very object).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from vmstack.clock import Clock
from vmstack.errors import (
    BlockNotFound,
    InvalidBlock,
    ProposerWindowNotStarted,
    StoreCorrupted,
)
from vmstack.interfaces import ChainVM
from vmstack.layers import has_batched_methods
from vmstack.parsepool import ParsePool
from vmstack.store import KeyValueStore, MemoryStore, is_writer
from vmstack.wrappers.proposer import batched
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.certificate import Certificate
from vmstack.wrappers.proposer.chain import LayerChain
from vmstack.wrappers.proposer.envelope import (
    build_signed,
    build_unsigned,
    chain_id_bytes,
)
from vmstack.wrappers.proposer.staking import StakingKey, signing_identity
from vmstack.wrappers.proposer.state import ProposerState, is_block_id
from vmstack.wrappers.proposer.verdicts import signature_verdict
from vmstack.wrappers.proposer.verify import (
    BlockFacts,
    ProposerTurn,
    block_facts,
    inner_accepted,
    own_facts,
    pchain_height_source,
    proposer_turn,
    try_envelope,
)
from vmstack.wrappers.proposer.windower import ValidatorSource, Windower

__all__ = ["ProposerVM"]


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
        "_chain",
        "_chain_id",
        "_clock",
        "_durango_time",
        "_fork_time",
        "_inner",
        "_inner_batched",
        "_min_block_delay",
        "_parse_pool",
        "_pchain_height",
        "_signer",
        "_windower",
    )

    #: The class of the layer's chain, what it has verified and how it decides:
    #: ``chain_type(inner, state, fork_time=…, clock=…, pchain_height=…, windower=…,
    #: durango_time=…)``.
    chain_type: ClassVar[type[LayerChain]] = LayerChain

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
        self._chain = self.chain_type(
            inner,
            ProposerState(store),
            fork_time=fork_time,
            clock=clock,
            pchain_height=self._pchain_height,
            windower=self._windower,
            durango_time=durango_time,
        )
        if is_writer(store):
            self._chain.state.recover(functools.partial(inner_accepted, inner))
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
            return ProposerBlock(self._chain, self._inner.get_block(block_id), None)
        block_id = bytes(block_id)
        processing = self._chain.processing.get(block_id)
        if processing is not None:
            return processing
        record = self._chain.state.record(block_id)
        if record is not None:
            inner_id, envelope = record
            return ProposerBlock(self._chain, self._inner.get_block(inner_id), envelope)
        if self._chain.envelope_of_inner(block_id) is not None:
            raise BlockNotFound(
                f"block {block_id.hex()} is the inner block of a post-fork "
                "block; only the post-fork block is served"
            )
        inner_block = self._inner.get_block(block_id)
        first = self._chain.state.first_post_fork_height()
        if first is not None and inner_block.height >= first:
            raise BlockNotFound(
                f"block {block_id.hex()} is at height {inner_block.height}, "
                f"after the fork (from {first}): only post-fork blocks are "
                "served there"
            )
        return ProposerBlock(self._chain, inner_block, None)

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
            existing = self._chain.processing.get(envelope.id)
            if existing is not None:
                return existing
            return ProposerBlock(self._chain, self._inner.parse_block(envelope.inner), envelope)
        try:
            inner_block = self._inner.parse_block(data)
        except InvalidBlock as error:
            if failure is None:
                raise
            raise failure from error
        return ProposerBlock(self._chain, inner_block, None)

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
            return ProposerBlock(self._chain, self._inner.build_block(), None)
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
        return ProposerBlock(self._chain, inner_block, envelope)

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
            return parent_id, block_facts(self._chain, parent_id)
        except BlockNotFound:
            if self._chain.preferred is None:
                raise
            self._prefer_last_accepted()
            parent_id = self._preferred_id()
            return parent_id, block_facts(self._chain, parent_id)

    def _turn(self, parent_id: bytes, parent: BlockFacts, timestamp: int) -> ProposerTurn:
        """This node's turn to build a child of post-fork ``parent`` stamped
        ``timestamp``."""
        assert self._windower is not None
        processing = self._chain.processing.get(parent_id)
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
        facts = own_facts(self._chain, block_id) if is_block_id(block_id) else None
        if facts is not None:
            self._inner.set_preference(facts.inner_id)
        else:
            if is_block_id(block_id) and self._chain.envelope_of_inner(bytes(block_id)) is not None:
                raise BlockNotFound(
                    f"block {bytes(block_id).hex()} is the inner block of a post-fork block"
                )
            self._inner.set_preference(block_id)
        self._chain.preferred = bytes(block_id)

    def last_accepted(self) -> bytes:
        """The inner VM's last accepted block, as its envelope once it is post-fork.
        ``StoreCorrupted`` if the layer has accepted post-fork blocks and the index has
        lost the last one's entry (it is never answered as a bare inner block)."""
        return self._chain.last_accepted()

    def get_block_id_at_height(self, height: int) -> bytes:
        """The inner VM's accepted block at ``height``, as its envelope after the fork;
        ``StoreCorrupted`` for a post-fork height whose index entry is lost."""
        inner_id = self._inner.get_block_id_at_height(height)
        found = self._chain.state.accepted_envelope_of_inner(inner_id)
        if found is not None:
            return found
        first = self._chain.state.first_post_fork_height()
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
            self._chain,
            self._inner_batched,
            block_id,
            max_blocks_num,
            max_blocks_size,
            max_retrieval_time,
        )

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[ProposerBlock]:
        """Parse ``blocks`` in input order as :meth:`parse_block` parses each, with all
        inner bytes parsed below in one call and the signatures checked last;
        ``InvalidBlock`` names the failing index (see
        :func:`vmstack.wrappers.proposer.batched.batched_parse_block`). Already verified
        blocks are returned as the same objects."""
        parsed: list[ProposerBlock] = []
        for inner_block, envelope in batched.batched_parse_block(
            self._inner, blocks, chain_id=self._chain_id, parse_pool=self._parse_pool
        ):
            existing = None if envelope is None else self._chain.processing.get(envelope.id)
            parsed.append(
                existing
                if existing is not None
                else ProposerBlock(self._chain, inner_block, envelope)
            )
        return parsed

    # --- the preference -----------------------------------------------------------

    def _preferred_id(self) -> bytes:
        return self.last_accepted() if self._chain.preferred is None else self._chain.preferred

    def _prefer_last_accepted(self) -> None:
        """Prefer the last accepted block, in this layer and in the inner VM."""
        self._chain.preferred = None
        self._inner.set_preference(self._inner.last_accepted())
