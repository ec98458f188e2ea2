"""ProposerVM: avalanchego's proposervm ("snowman++") as a layer over any ``ChainVM``.

Before the fork every block is the inner VM's block itself (a *pre-fork* block: same ID,
same bytes). From the fork on, every inner block travels inside a *post-fork* envelope
(:class:`~vmstack.wrappers.proposer.block.PostForkBlock`) that names its proposer and is
signed with that proposer's staking key. The fork rules are avalanchego's:

- a block whose parent's timestamp is before ``fork_time`` is pre-fork; a block whose
  parent's timestamp is at or after it is post-fork;
- the first post-fork block (the child of the last pre-fork block) is unsigned;
- a post-fork parent never has a pre-fork child.

The layer keeps its accepted post-fork blocks in its own keyspace of the store (a
:class:`~vmstack.store.PrefixedStore` view under :data:`STORE_PREFIX`), with an index from
inner block ID to envelope ID; verified, undecided post-fork blocks are kept in memory.
Pre-fork blocks live only in the inner VM, whose accepted chain stays the authority on
heights and on the last accepted block (the index maps its answers to envelopes). Every
stored value carries a checksum, and a post-fork height whose index entry is lost is
``StoreCorrupted``, never answered with its bare inner block.

Consensus safety, as avalanchego's proposervm keeps it:

- two post-fork blocks may wrap one inner block; it is verified once and shared, accepted
  with the wrapper that is accepted, and rejected only with its last processing wrapper
  (never once accepted), whatever the order of the decisions; a rejected post-fork block
  is never served again;
- a post-fork block builds on a processing block or on the last accepted block, and its
  inner block must not be accepted already, else ``verify`` fails; ``accept`` takes only a
  child of the last accepted block, so nothing a peer sends moves the accepted chain;
- a rejected preferred block gives the preference back to the last accepted block.

The batched protocol is answered in full whatever the layers below can do:

- ``get_ancestors`` walks the layer's own blocks (processing, then accepted) from the
  requested one down to the fork, then hands the remaining count, size and time to the inner
  VM for the pre-fork part in one call. When the inner VM cannot batch
  (``BatchingNotImplemented``) the layer walks it serially itself, so the answer is complete
  and identical to the fallback walk over the whole stack (avalanchego drops the pre-fork
  part when a tracing layer sits below). One :class:`~vmstack.batching.AncestorBudget`
  spans both parts, so the budget rule holds for the WHOLE answer, at the fork boundary too.
- ``batched_parse_block`` decodes and verifies every envelope, then hands ALL inner bytes
  (the inner blocks of the envelopes and the pre-fork elements) down in one call.

Errors raised by the inner VM pass through unchanged (the very object).
"""

from __future__ import annotations

import logging
import math
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from vmstack import batching
from vmstack.batching import (
    BLOCK_ID_LEN,
    AncestorBudget,
    WalkEnd,
    check_block_id,
    check_parse_batch,
    fetch_through,
    has_batched_methods,
    supports_batching,
    walk_ancestors,
)
from vmstack.clock import Clock
from vmstack.errors import BatchingNotImplemented, BlockNotFound, InvalidBlock, StoreCorrupted
from vmstack.interfaces import Block, ChainVM
from vmstack.store import KeyValueStore, MemoryStore, PrefixedStore, ReadSnapshot, is_writer
from vmstack.wrappers.proposer.block import (
    OptionBlock,
    PostForkBlock,
    build_signed,
    build_unsigned,
    decode_block,
)
from vmstack.wrappers.proposer.staking import Certificate, StakingKey

__all__ = ["MAX_CLOCK_SKEW", "STORE_PREFIX", "ProposerBlock", "ProposerVM"]

logger = logging.getLogger(__name__)

#: The keyspace of the layer's records in the store it shares with the VMs below.
STORE_PREFIX = b"proposervm/"
#: How far (seconds) a post-fork block's timestamp may run ahead of the local clock
#: (avalanchego's ``maxSkew``).
MAX_CLOCK_SKEW = 10

_BLOCK = b"b"  # b + id -> crc32 (4, BE) | inner id (32) | parent id (32) | envelope bytes
_INNER = b"i"  # i + inner id -> id | crc32(b"i" + inner id + id) (4, BE)
_LAST = b"last"  # the newest post-fork block written: id | crc32(b"last" + id) (4, BE)
_FIRST = b"first"  # first post-fork height: height (8, BE) | crc32(b"first" + height) (4, BE)
_HEIGHT_LEN = 8
_CHECKSUM_LEN = 4
_RECORD_HEAD = _CHECKSUM_LEN + 2 * BLOCK_ID_LEN
_POINTER_LEN = BLOCK_ID_LEN + _CHECKSUM_LEN


def _encode_pointer(key: bytes, block_id: bytes) -> bytes:
    """A stored block ID with a checksum over its key and itself, so a damaged or
    misplaced pointer is caught rather than followed."""
    return block_id + zlib.crc32(key + block_id).to_bytes(_CHECKSUM_LEN, "big")


def _encode_height(height: int) -> bytes:
    encoded = height.to_bytes(_HEIGHT_LEN, "big")
    return encoded + zlib.crc32(_FIRST + encoded).to_bytes(_CHECKSUM_LEN, "big")


def _decode_height(value: bytes | memoryview) -> int:
    """The first post-fork height of :func:`_encode_height`; ``StoreCorrupted`` otherwise."""
    if len(value) != _HEIGHT_LEN + _CHECKSUM_LEN:
        raise StoreCorrupted(f"the stored first post-fork height is {len(value)} bytes")
    encoded = bytes(value[:_HEIGHT_LEN])
    if zlib.crc32(_FIRST + encoded) != int.from_bytes(value[_HEIGHT_LEN:], "big"):
        raise StoreCorrupted("the stored first post-fork height fails its checksum")
    return int.from_bytes(encoded, "big")


def _decode_pointer(key: bytes, value: bytes | memoryview, what: str) -> bytes:
    """The block ID of a pointer written by :func:`_encode_pointer`; ``StoreCorrupted``
    if the value is not one (wrong length or checksum)."""
    if len(value) != _POINTER_LEN:
        raise StoreCorrupted(f"the stored {what} is {len(value)} bytes, not {_POINTER_LEN}")
    block_id = bytes(value[:BLOCK_ID_LEN])
    if zlib.crc32(key + block_id) != int.from_bytes(value[BLOCK_ID_LEN:], "big"):
        raise StoreCorrupted(f"the stored {what} fails its checksum")
    return block_id


def _encode_record(inner_id: bytes, envelope: PostForkBlock) -> bytes:
    body = inner_id + envelope.parent_id + bytes(envelope)
    return zlib.crc32(body).to_bytes(_CHECKSUM_LEN, "big") + body


def _record_parts(block_id: bytes, record: bytes | memoryview) -> tuple[bytes, bytes, bytes]:
    """``(inner id, parent id, envelope bytes)`` of a stored record, or ``StoreCorrupted``
    if the record is short or fails its checksum. The checksum covers everything after it,
    the signature included (which the block ID leaves out), so the ancestors walk reads a
    record without decoding or hashing the envelope."""
    if len(record) <= _RECORD_HEAD:
        raise StoreCorrupted(f"stored post-fork block {block_id.hex()} is truncated")
    view = memoryview(record)
    if zlib.crc32(view[_CHECKSUM_LEN:]) != int.from_bytes(view[:_CHECKSUM_LEN], "big"):
        raise StoreCorrupted(f"stored post-fork block {block_id.hex()} fails its checksum")
    parent_at = _CHECKSUM_LEN + BLOCK_ID_LEN
    return (bytes(view[_CHECKSUM_LEN:parent_at]), bytes(view[parent_at:_RECORD_HEAD]),
            bytes(view[_RECORD_HEAD:]))


_UINT64_MAX = 2**64 - 1


@attrs.frozen
class _Facts:
    """What building on or verifying against a parent needs to know of it."""

    post_fork: bool
    timestamp: int
    pchain_height: int
    inner_id: bytes


@attrs.define
class _SharedInner:
    """A verified, undecided inner block and the processing post-fork blocks that wrap it.

    Two envelopes may wrap one inner block (two proposers, or one re-signing). The inner
    block is verified once and every wrapper holds this very object, so deciding one
    wrapper decides the inner block for all of them. ``wrappers`` is replaced, never
    mutated, so readers on other threads may look at it while the engine decides.
    """

    block: Block
    wrappers: tuple[bytes, ...]


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
        """Forget a post-fork block (never served again), and reject its inner block once
        no other processing post-fork block wraps it and it is not accepted; a pre-fork
        block rejects its inner block. ``InvalidBlock`` for an accepted block."""
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
    anyone may once the proposer windows have passed (this layer models no windows).
    ``pchain_height`` is the current P-chain height, an int or a zero-argument callable;
    built blocks name it and verified ones may not exceed it. ``clock`` gives block
    timestamps and the ancestors time budget.

    On start the layer undoes a record written ahead of an inner accept that a crash cut
    short, but only when ``store`` is its data's writer (:func:`vmstack.store.is_writer`):
    over a read-only handle, or beside a live writer, it writes nothing.
    """

    __slots__ = ("_chain_id", "_clock", "_fork_time", "_inner", "_pchain_height",
                 "_preferred", "_processing", "_shared", "_signer", "_store")

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
    ) -> None:
        if signer is not None:
            if staking_key is not None:
                raise ValueError("signer and staking_key name the same key: pass one")
            staking_key = signer
        if isinstance(chain_id, int) and not isinstance(chain_id, bool):
            if not 0 <= chain_id < 1 << (8 * BLOCK_ID_LEN):
                raise ValueError(f"an int chain_id must fit in {BLOCK_ID_LEN} bytes")
            chain_id = chain_id.to_bytes(BLOCK_ID_LEN, "big")
        if isinstance(fork_time, bool) or not isinstance(fork_time, int | float) or (
                math.isnan(fork_time)):
            raise ValueError(f"fork_time must be a number of seconds, got {fork_time!r}")
        if not isinstance(chain_id, bytes) or len(chain_id) != BLOCK_ID_LEN:
            raise ValueError(f"chain_id must be {BLOCK_ID_LEN} bytes, got {chain_id!r}")
        if isinstance(pchain_height, int) and not isinstance(pchain_height, bool):
            if not 0 <= pchain_height <= _UINT64_MAX:
                raise ValueError(f"pchain_height must be a u64, got {pchain_height}")
            fixed_height = pchain_height
            self._pchain_height: Callable[[], int] = lambda: fixed_height
        elif callable(pchain_height):
            self._pchain_height = pchain_height
        else:
            raise ValueError(f"pchain_height is an int or a callable, got {pchain_height!r}")
        if isinstance(staking_key, StakingKey):
            if certificate is not None:
                raise ValueError("a StakingKey carries its certificate: pass no certificate")
            self._signer: StakingKey | None = staking_key
        elif staking_key is None:
            if certificate is not None:
                raise ValueError("a certificate without its staking key cannot sign")
            self._signer = None
        else:
            self._signer = StakingKey(staking_key, certificate)
        self._inner = inner
        self._fork_time = fork_time
        self._chain_id = chain_id
        self._clock = clock
        store = MemoryStore() if store is None else store
        self._store = PrefixedStore(store, STORE_PREFIX)
        self._processing: dict[bytes, ProposerBlock] = {}
        self._shared: dict[bytes, _SharedInner] = {}
        self._preferred: bytes | None = None
        if is_writer(store):
            self._recover()

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
    def node_id(self) -> bytes | None:
        """This node's NodeID, or ``None`` when it builds unsigned blocks."""
        return None if self._signer is None else self._signer.node_id

    # --- ChainVM -------------------------------------------------------------------------

    def get_block(self, block_id: bytes) -> ProposerBlock:
        """A processing or accepted block; ``BlockNotFound`` for anything else, including
        the inner block of a post-fork block (only its envelope is served)."""
        if not _is_id(block_id):
            return ProposerBlock(self, self._inner.get_block(block_id), None)
        block_id = bytes(block_id)
        processing = self._processing.get(block_id)
        if processing is not None:
            return processing
        try:
            record = self._store.get(_BLOCK + block_id)
        except KeyError:
            pass
        else:
            inner_id, envelope = self._decode_record(block_id, record)
            return ProposerBlock(self, self._inner.get_block(inner_id), envelope)
        if self._envelope_of_inner(block_id) is not None:
            raise BlockNotFound(f"block {block_id.hex()} is the inner block of a post-fork "
                                "block; only the post-fork block is served")
        inner_block = self._inner.get_block(block_id)
        first = self._first_post_fork_height()
        if first is not None and inner_block.height >= first:
            raise BlockNotFound(f"block {block_id.hex()} is at height {inner_block.height}, "
                                f"after the fork (from {first}): only post-fork blocks are "
                                "served there")
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
        envelope, failure = self._try_envelope(data)
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
        no key). A preferred block that is no longer served (rejected) gives way to the last
        accepted block, here and in the inner VM, so a node always builds."""
        parent_id = self._preferred_id()
        try:
            parent = self._facts(parent_id)
        except BlockNotFound:
            if self._preferred is None:
                raise
            self._prefer_last_accepted()
            parent_id = self._preferred_id()
            parent = self._facts(parent_id)
        inner_block = self._inner.build_block()
        if not parent.post_fork and parent.timestamp < self._fork_time:
            return ProposerBlock(self, inner_block, None)
        timestamp = max(int(self._clock()), parent.timestamp)
        pchain_height = max(self._pchain_height(), parent.pchain_height)
        if not parent.post_fork or self._signer is None:
            envelope = build_unsigned(parent_id, timestamp, pchain_height, bytes(inner_block))
        else:
            envelope = build_signed(parent_id, timestamp, pchain_height, bytes(inner_block),
                                    key=self._signer, chain_id=self._chain_id)
        return ProposerBlock(self, inner_block, envelope)

    def set_preference(self, block_id: bytes) -> None:
        """Prefer ``block_id`` (served, else ``BlockNotFound``) and its inner block below."""
        facts = self._own_facts(block_id) if _is_id(block_id) else None
        if facts is not None:
            self._inner.set_preference(facts.inner_id)
        else:
            if _is_id(block_id) and self._envelope_of_inner(bytes(block_id)) is not None:
                raise BlockNotFound(f"block {bytes(block_id).hex()} is the inner block of a "
                                    "post-fork block")
            self._inner.set_preference(block_id)
        self._preferred = bytes(block_id)

    def last_accepted(self) -> bytes:
        """The inner VM's last accepted block, as its envelope once it is post-fork.
        ``StoreCorrupted`` if the layer has accepted post-fork blocks and the index has
        lost the last one's entry (it is never answered as a bare inner block)."""
        inner_id = self._inner.last_accepted()
        while True:
            found = self._accepted_envelope_of_inner(inner_id)
            if found is not None:
                return found
            if self._newest_parent() in (None, inner_id):
                # No post-fork block yet, or the first one is being accepted on top of
                # this last pre-fork block: a pre-fork block, served as itself.
                return inner_id
            # Another process may have accepted blocks since the inner VM was asked; an
            # unchanged answer means the index lost the entry of a post-fork block.
            again = self._inner.last_accepted()
            if again == inner_id:
                raise StoreCorrupted(f"the last accepted block {inner_id.hex()} is after the "
                                     "fork but has no entry in the post-fork index")
            inner_id = again

    def _newest_parent(self) -> bytes | None:
        """The parent ID of the newest post-fork block written (accepted or being
        accepted), or ``None`` before the first; pointer and record are read in one
        snapshot, and the record must exist."""
        with self._store.snapshot() as snapshot:
            try:
                value = snapshot.get(_LAST)
            except KeyError:
                return None
            newest = _decode_pointer(_LAST, value, "newest post-fork block pointer")
            try:
                record = snapshot.get(_BLOCK + newest)
            except KeyError:
                raise StoreCorrupted(f"the newest post-fork block pointer names "
                                     f"{newest.hex()}, which has no record") from None
            return _record_parts(newest, record)[1]

    def get_block_id_at_height(self, height: int) -> bytes:
        """The inner VM's accepted block at ``height``, as its envelope after the fork;
        ``StoreCorrupted`` for a post-fork height whose index entry is lost."""
        inner_id = self._inner.get_block_id_at_height(height)
        found = self._accepted_envelope_of_inner(inner_id)
        if found is not None:
            return found
        first = self._first_post_fork_height()
        if first is not None and height >= first:
            raise StoreCorrupted(f"accepted height {height} is after the fork (from {first}) "
                                 "but has no entry in the post-fork index")
        return inner_id

    def _first_post_fork_height(self) -> int | None:
        """The height of the first accepted post-fork block, or ``None`` before it."""
        try:
            value = self._store.get(_FIRST)
        except KeyError:
            return None
        return _decode_height(value)

    # --- BatchedChainVM ------------------------------------------------------------------

    def get_ancestors(self, block_id: bytes, max_blocks_num: int, max_blocks_size: int,
                      max_retrieval_time: float) -> list[bytes]:
        """``block_id`` and its ancestors, newest first, under one budget for the whole
        answer: the layer's own blocks, then the pre-fork part from the inner VM (one
        batched call, or a serial walk of it when it cannot batch)."""
        block_id = check_block_id(block_id)
        budget = AncestorBudget(max_blocks_num, max_blocks_size, max_retrieval_time,
                                clock=self._clock)
        # The processing blocks are looked at before the snapshot opens: an accept writes
        # its record before it forgets the processing block, so a block accepted in between
        # is in one or the other, never in neither.
        processing = dict(self._processing)
        with self._store.snapshot() as snapshot:
            handoff = self._walk_own(snapshot, processing, block_id, budget)
        if handoff is None:
            return budget.blocks
        if not budget.blocks and self._envelope_of_inner(handoff) is not None:
            return []
        inner = self._inner
        if has_batched_methods(inner) and supports_batching(inner):
            num, size, seconds = budget.remaining()
            try:
                answer = inner.get_ancestors(handoff, num, size, seconds)
            except BatchingNotImplemented:
                pass
            except Exception:
                if not budget.blocks:
                    raise
                logger.warning("pre-fork ancestors of %s could not be read below the fork; "
                               "answering with %d post-fork blocks", block_id.hex(),
                               len(budget.blocks), exc_info=True)
                return budget.blocks
            else:
                budget.extend(answer)
                return budget.blocks
        return walk_ancestors(fetch_through(inner), handoff, budget).blocks

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[ProposerBlock]:
        """Parse ``blocks`` in input order: envelopes decoded here, all inner bytes parsed
        below in one call, then signatures checked; ``InvalidBlock`` names the failing index.

        Each element is classified as :meth:`parse_block` classifies it (post-fork if it
        is a valid envelope, else pre-fork bytes), so the answer, and the index of the
        first bad element, equal the per-block fallback's. The cheap work runs first over
        the batch (framing, then the inner VM's parse), the signatures last and only up to
        the first bad element; decoding stops at the first element that looks like an
        envelope but is not one, and only that one failure is kept. Already verified
        blocks are returned as the same objects.
        """
        batch = check_parse_batch(blocks)
        parsed: list[ProposerBlock] = []
        while len(parsed) < len(batch):
            parsed.extend(self._parse_run(batch, len(parsed)))
        return parsed

    def _parse_run(self, batch: Sequence[bytes], start: int) -> list[ProposerBlock]:
        """Parse ``batch[start:]`` up to and including the first element whose envelope
        fails to decode (all of it when none does) with one batched call below; return
        the blocks of that run, or raise for its first bad element."""
        envelopes: list[PostForkBlock | None] = []
        raws: list[bytes] = []
        inner_bytes: list[bytes] = []
        failure: InvalidBlock | None = None
        for index in range(start, len(batch)):
            data = bytes(batch[index])
            envelope, failure = self._decode_envelope(data)
            envelopes.append(envelope)
            raws.append(data)
            inner_bytes.append(data if envelope is None else envelope.inner)
            if failure is not None:
                break
        try:
            inner_blocks: list[Block | None] = list(
                batching.batched_parse_block(self._inner, inner_bytes))
        except InvalidBlock as error:
            if error.index is None:
                raise
            bad = error.index
            self._check_signatures(envelopes, raws, [None] * len(envelopes), start, bad + 1)
            if failure is not None and bad == len(inner_bytes) - 1:
                raise failure.at_index(start + bad) from error
            if start == 0:
                raise
            raise error.at_index(start + bad) from error
        self._check_signatures(envelopes, raws, inner_blocks, start, len(envelopes))
        parsed: list[ProposerBlock] = []
        for envelope, inner_block in zip(envelopes, inner_blocks, strict=True):
            assert inner_block is not None
            existing = None if envelope is None else self._processing.get(envelope.id)
            parsed.append(existing if existing is not None
                          else ProposerBlock(self, inner_block, envelope))
        return parsed

    def _check_signatures(self, envelopes: list[PostForkBlock | None], raws: Sequence[bytes],
                          inner_blocks: list[Block | None], start: int, stop: int) -> None:
        """Check the envelopes ``[0, stop)`` of a run (epoch and signature) in order.

        An envelope that fails is, as in :meth:`parse_block`, tried as pre-fork bytes: if
        the inner VM parses them, the element becomes that pre-fork block (``envelopes``
        and ``inner_blocks`` are updated in place); otherwise its failure is raised at its
        index in the batch.
        """
        for index in range(stop):
            envelope = envelopes[index]
            if envelope is None:
                continue
            try:
                envelope.verify(self._chain_id)
            except InvalidBlock as failure:
                try:
                    inner_block = self._inner.parse_block(raws[index])
                except InvalidBlock:
                    raise failure.at_index(start + index) from None
                envelopes[index] = None
                inner_blocks[index] = inner_block

    # --- the model behind them -----------------------------------------------------------

    def _preferred_id(self) -> bytes:
        return self.last_accepted() if self._preferred is None else self._preferred

    def _try_envelope(self, data: bytes) -> tuple[PostForkBlock | None, InvalidBlock | None]:
        """``(envelope, None)`` for a valid post-fork block; ``(None, failure)`` for bytes
        that look like an envelope but fail; ``(None, None)`` for anything else."""
        decoded, failure = self._decode_envelope(data)
        if decoded is None:
            return None, failure
        try:
            decoded.verify(self._chain_id)
        except InvalidBlock as error:
            return None, error
        return decoded, None

    def _decode_envelope(self, data: bytes) -> tuple[PostForkBlock | None, InvalidBlock | None]:
        """As :meth:`_try_envelope`, without the epoch and signature checks (the costly
        part, which a batch runs last)."""
        try:
            decoded = decode_block(data)
        except InvalidBlock as error:
            return None, (error if data[:2] == b"\0\0" else None)
        if isinstance(decoded, OptionBlock):
            return None, InvalidBlock("option blocks follow oracle blocks, which no inner VM "
                                      "of this stack builds")
        return decoded, None

    def _decode_record(self, block_id: bytes, record: bytes) -> tuple[bytes, PostForkBlock]:
        """The inner ID and envelope of an accepted block's record, checked against its
        checksum and its ID."""
        inner_id, _, data = _record_parts(block_id, record)
        try:
            envelope = decode_block(data)
        except InvalidBlock as error:
            raise StoreCorrupted(f"stored post-fork block {block_id.hex()}: "
                                 f"{error.reason}") from None
        if not isinstance(envelope, PostForkBlock) or envelope.id != block_id:
            raise StoreCorrupted(f"stored post-fork block {block_id.hex()} does not hash to "
                                 "its ID")
        return inner_id, envelope

    def _walk_own(self, snapshot: ReadSnapshot, processing: dict[bytes, ProposerBlock],
                  block_id: bytes, budget: AncestorBudget) -> bytes | None:
        """Walk the layer's own blocks (``processing``, then the accepted ones in
        ``snapshot``) into ``budget``; return the ID of the first block that is not one of
        them (where the inner VM takes over), or ``None`` if the walk stopped for another
        reason (budget, or a block that failed to read)."""

        def fetch(wanted: bytes) -> tuple[bytes, bytes]:
            block = processing.get(wanted)
            if block is not None:
                return bytes(block), block.parent_id
            try:
                record = snapshot.get(_BLOCK + wanted)
            except KeyError:
                raise BlockNotFound(f"block {wanted.hex()} is not a post-fork block of the "
                                    "layer") from None
            _, parent_id, data = _record_parts(wanted, record)
            return data, parent_id

        walk = walk_ancestors(fetch, block_id, budget)
        return walk.stopped_at if walk.reason is WalkEnd.NOT_SERVED else None

    def _envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        """A post-fork block (processing or accepted) whose inner block is ``inner_id``."""
        shared = self._shared.get(inner_id)
        if shared is not None and shared.wrappers:
            return shared.wrappers[0]
        return self._accepted_envelope_of_inner(inner_id)

    def _accepted_envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        """The accepted post-fork block whose inner block is ``inner_id``, from the index.
        The entry's checksum covers its key and value, so a damaged or misplaced entry is
        ``StoreCorrupted``, never another block's ID."""
        if not _is_id(inner_id):
            return None
        key = _INNER + bytes(inner_id)
        try:
            value = self._store.get(key)
        except KeyError:
            return None
        return _decode_pointer(key, value, f"index entry of inner block "
                               f"{bytes(inner_id).hex()}")

    def _read_last_pointer(self) -> bytes | None:
        """The newest post-fork block written (accepted or being accepted), or ``None``."""
        try:
            value = self._store.get(_LAST)
        except KeyError:
            return None
        return _decode_pointer(_LAST, value, "newest post-fork block pointer")

    def _is_accepted(self, block_id: bytes) -> bool:
        return self._store.has(_BLOCK + block_id)

    def _own_facts(self, block_id: bytes) -> _Facts | None:
        """What the layer knows of its own post-fork block ``block_id``, without asking the
        inner VM; ``None`` if it is not one of them."""
        block_id = bytes(block_id)
        processing = self._processing.get(block_id)
        if processing is not None and processing.envelope is not None:
            return _Facts(True, processing.envelope.timestamp,
                          processing.envelope.pchain_height, processing.inner.id)
        try:
            record = self._store.get(_BLOCK + block_id)
        except KeyError:
            return None
        inner_id, envelope = self._decode_record(block_id, record)
        return _Facts(True, envelope.timestamp, envelope.pchain_height, inner_id)

    def _facts(self, block_id: bytes) -> _Facts:
        """What building and verifying need to know of a served block (``BlockNotFound``
        otherwise); only a pre-fork block is looked up below."""
        facts = self._own_facts(block_id)
        if facts is not None:
            return facts
        if self._envelope_of_inner(block_id) is not None:
            raise BlockNotFound(f"block {block_id.hex()} is the inner block of a post-fork "
                                "block")
        inner_block = self._inner.get_block(block_id)
        return _Facts(False, inner_block.timestamp, 0, inner_block.id)

    def _parent_facts(self, child: ProposerBlock) -> _Facts:
        try:
            return self._facts(child.parent_id)
        except BlockNotFound:
            raise InvalidBlock(f"block {child.id.hex()}: parent {child.parent_id.hex()} is "
                               "not known") from None

    def _verify(self, block: ProposerBlock) -> None:
        envelope = block.envelope
        if block._rejected:
            raise InvalidBlock(f"block {block.id.hex()} was rejected")
        if envelope is None:
            self._verify_pre_fork(block)
            return
        if block.id in self._processing or self._is_accepted(block.id):
            return
        parent = self._parent_facts(block)
        self._check_extends_accepted_chain(block, parent)
        if not parent.post_fork:
            if parent.timestamp < self._fork_time:
                raise InvalidBlock(f"block {block.id.hex()}: post-fork block before the fork "
                                   f"(parent timestamp {parent.timestamp} < fork time "
                                   f"{self._fork_time})")
            if envelope.certificate or envelope.signature:
                raise InvalidBlock(f"block {block.id.hex()}: the first post-fork block is "
                                   "unsigned")
        elif envelope.pchain_height < parent.pchain_height:
            raise InvalidBlock(f"block {block.id.hex()}: P-chain height "
                               f"{envelope.pchain_height} is below its parent's "
                               f"{parent.pchain_height}")
        if block.inner.parent_id != parent.inner_id:
            raise InvalidBlock(f"block {block.id.hex()}: its inner block's parent "
                               f"{block.inner.parent_id.hex()} is not the inner block of its "
                               f"parent ({parent.inner_id.hex()})")
        if envelope.timestamp < parent.timestamp:
            raise InvalidBlock(f"block {block.id.hex()}: timestamp {envelope.timestamp} is "
                               f"before its parent's {parent.timestamp}")
        if envelope.timestamp > self._clock() + MAX_CLOCK_SKEW:
            raise InvalidBlock(f"block {block.id.hex()}: timestamp {envelope.timestamp} is "
                               "too far in the future")
        current = self._pchain_height()
        if envelope.pchain_height > current:
            raise InvalidBlock(f"block {block.id.hex()}: P-chain height "
                               f"{envelope.pchain_height} is ahead of the P-chain ({current})")
        inner_id = block.inner.id
        if self._accepted_envelope_of_inner(inner_id) is not None:
            raise InvalidBlock(f"block {block.id.hex()}: its inner block {inner_id.hex()} is "
                               "already accepted (in another post-fork block)")
        shared = self._shared.get(inner_id)
        if shared is None:
            block.inner.verify()
            self._shared[inner_id] = _SharedInner(block.inner, (block.id,))
        else:
            # Another processing post-fork block wraps the same inner block: share its
            # verified object, so one decision reaches the inner VM once.
            if bytes(shared.block) != bytes(block.inner):
                raise InvalidBlock(f"block {block.id.hex()}: its inner block's bytes differ "
                                   f"from the processing inner block {inner_id.hex()}")
            block._inner = shared.block
            shared.wrappers = (*shared.wrappers, block.id)
        self._processing[block.id] = block

    def _check_extends_accepted_chain(self, block: ProposerBlock, parent: _Facts) -> None:
        """A post-fork block builds on a processing block or on the last accepted block:
        a child of any other accepted block conflicts with the accepted chain (it would
        re-decide an accepted height), so it is ``InvalidBlock``."""
        parent_id = block.parent_id
        if parent_id in self._processing:
            return
        last = self.last_accepted()
        if parent_id == last:
            return
        if parent.post_fork or self._inner_accepted(parent.inner_id):
            raise InvalidBlock(f"block {block.id.hex()}: it conflicts with the accepted chain "
                               f"(its parent {parent_id.hex()} is accepted but the last "
                               f"accepted block is {last.hex()})")

    def _verify_pre_fork(self, block: ProposerBlock) -> None:
        """A pre-fork block needs a pre-fork parent from before the fork time.

        A parent is fetched only when the block itself is at or after the fork time: a
        block before it has a parent before it too, as chain VMs never let time run
        backwards from parent to child (the inner VM's verify checks that).
        """
        parent_id = block.parent_id
        if (parent_id in self._processing or self._is_accepted(parent_id)
                or self._envelope_of_inner(parent_id) is not None):
            raise InvalidBlock(f"block {block.id.hex()}: a post-fork block never has a "
                               "pre-fork child")
        if block.timestamp >= self._fork_time:
            parent = self._parent_facts(block)
            if parent.timestamp >= self._fork_time:
                raise InvalidBlock(f"block {block.id.hex()}: pre-fork block after the fork "
                                   f"(parent timestamp {parent.timestamp} >= fork time "
                                   f"{self._fork_time})")
        self._check_pre_fork_extends_accepted_chain(block)
        block.inner.verify()

    def _check_pre_fork_extends_accepted_chain(self, block: ProposerBlock, *,
                                               accepting: bool = False) -> None:
        """A pre-fork block that is not accepted itself builds on the last accepted block
        or (to be verified) on a block that is not accepted, processing below: a new child
        of an older accepted block conflicts with the accepted chain, and only a child of
        the last accepted block can be accepted, whatever the inner VM allows."""
        last = self.last_accepted()
        parent_id = block.parent_id
        if parent_id == last or block.id == last:
            return
        if not accepting and not self._inner_accepted(parent_id, block.height - 1):
            return
        if self._inner_accepted(block.id, block.height):
            return
        if accepting:
            raise InvalidBlock(f"block {block.id.hex()}: its parent {parent_id.hex()} is "
                               f"not the last accepted block {last.hex()}")
        raise InvalidBlock(f"block {block.id.hex()}: it conflicts with the accepted chain "
                           f"(its parent {parent_id.hex()} is accepted but the last accepted "
                           f"block is {last.hex()})")

    def _accept(self, block: ProposerBlock) -> None:
        envelope = block.envelope
        if block._rejected:
            raise InvalidBlock(f"block {block.id.hex()} was rejected and cannot be accepted")
        if envelope is None:
            self._check_pre_fork_extends_accepted_chain(block, accepting=True)
            block.inner.accept()
            self._follow_preference(block)
            return
        if block.id not in self._processing:
            if self._is_accepted(block.id):
                return
            raise InvalidBlock(f"block {block.id.hex()} is not processing: verify it first")
        last = self.last_accepted()
        if envelope.parent_id != last:
            raise InvalidBlock(f"block {block.id.hex()}: its parent {envelope.parent_id.hex()} "
                               f"is not the last accepted block {last.hex()}")
        # Write ahead: the layer's record goes to the store before the inner block is
        # accepted, so the inner VM's last accepted block always has its envelope (a reader
        # never sees an inner block the layer does not serve). A crash between the two
        # writes leaves a record ahead of the inner VM, which the next start of the store's
        # writer undoes.
        inner_id = block.inner.id
        first = not self._is_accepted(envelope.parent_id)
        with self._store.write_batch() as batch:
            batch.put(_BLOCK + block.id, _encode_record(inner_id, envelope))
            batch.put(_INNER + inner_id, _encode_pointer(_INNER + inner_id, block.id))
            batch.put(_LAST, _encode_pointer(_LAST, block.id))
            if first:
                batch.put(_FIRST, _encode_height(block.height))
        try:
            block.inner.accept()
        except BaseException:
            self._undo_record(block.id, inner_id, envelope.parent_id)
            raise
        # The inner block is decided: other wrappers of it, still processing, are rejected
        # by the engine later without touching it.
        self._shared.pop(inner_id, None)
        del self._processing[block.id]
        self._follow_preference(block)

    def _undo_record(self, block_id: bytes, inner_id: bytes, parent_id: bytes) -> None:
        """Remove the record of a post-fork block whose inner block was not accepted."""
        with self._store.write_batch() as batch:
            batch.delete(_BLOCK + block_id)
            batch.delete(_INNER + inner_id)
            if self._store.has(_BLOCK + parent_id):
                batch.put(_LAST, _encode_pointer(_LAST, parent_id))
            else:
                batch.delete(_LAST)
                batch.delete(_FIRST)

    def _recover(self) -> None:
        """Undo a record written ahead of an inner accept that never happened (a crash
        between the two): the newest record counts only if the inner VM accepted its inner
        block. Only the store's writer runs this (see :func:`vmstack.store.is_writer`): a
        record another live process is accepting is in flight, not left by a crash."""
        last = self._read_last_pointer()
        if last is None:
            return
        try:
            record = self._store.get(_BLOCK + last)
        except KeyError:
            raise StoreCorrupted(f"the newest post-fork block pointer names {last.hex()}, "
                                 "which has no record") from None
        inner_id, envelope = self._decode_record(last, record)
        if not self._inner_accepted(inner_id):
            logger.warning("undoing post-fork block %s: its inner block was never accepted",
                           last.hex())
            self._undo_record(last, inner_id, envelope.parent_id)

    def _inner_accepted(self, inner_id: bytes, height: int | None = None) -> bool:
        """Whether the inner VM has accepted ``inner_id``; ``height``, when the caller knows
        it, spares asking the inner VM for the whole block (a slow restore) just to learn
        it."""
        if inner_id == self._inner.last_accepted():
            return True
        try:
            if height is None:
                height = self._inner.get_block(inner_id).height
            return height >= 0 and self._inner.get_block_id_at_height(height) == inner_id
        except BlockNotFound:
            return False

    def _follow_preference(self, accepted: ProposerBlock) -> None:
        """Move the preference onto a block accepted on top of the preferred one."""
        if self._preferred == accepted.parent_id:
            self._preferred = accepted.id

    def _reject(self, block: ProposerBlock) -> None:
        if block.envelope is None:
            block.inner.reject()
            self._forget_preference(block.id)
            return
        if self._is_accepted(block.id):
            raise InvalidBlock(f"block {block.id.hex()} is accepted and cannot be rejected")
        block._rejected = True
        if self._processing.pop(block.id, None) is not None:
            inner_id = block.inner.id
            shared = self._shared.get(inner_id)
            if shared is not None:
                shared.wrappers = tuple(w for w in shared.wrappers if w != block.id)
                if not shared.wrappers:
                    # The last wrapper is gone and the inner block was not accepted (an
                    # accept forgets the shared entry): it is rejected with it.
                    del self._shared[inner_id]
                    shared.block.reject()
        self._forget_preference(block.id)

    def _forget_preference(self, rejected_id: bytes) -> None:
        """A rejected preferred block gives the preference back to the last accepted one."""
        if self._preferred == rejected_id:
            self._prefer_last_accepted()

    def _prefer_last_accepted(self) -> None:
        """Prefer the last accepted block, in this layer and in the inner VM."""
        self._preferred = None
        self._inner.set_preference(self._inner.last_accepted())


def _is_id(value: object) -> bool:
    return isinstance(value, bytes | bytearray | memoryview) and len(value) == BLOCK_ID_LEN
