"""``CChainVM``: the bottom of the stack, a C-chain VM whose blocks live in a key-value store.

Storage. Every accepted block is kept the way go-ethereum's rawdb keeps it (header RLP, body
RLP, number and canonical entries, head pointers, and receipts once settled; see
:mod:`vmstack.cchain.rawdb`), so a coreth database can be opened as it is. ALL persistent
state is in the store: two ``CChainVM`` objects over one store (a transition layer's pre and
post VMs) see each other's accepted blocks, because the last accepted block is read through
the store on each use, never kept in memory where it could go stale. Processing blocks
(verified, undecided) are the one thing an instance keeps to itself, in memory.

Reading. Every read of the store goes through :class:`~vmstack.cchain.chain.ChainReader`,
which judges what it finds (missing or corrupt) in one place: :meth:`CChainVM.get_block` is
the honest slow path (decode, receipts, sender recovery, re-encode),
:meth:`CChainVM.get_ancestors` the fast path
(:class:`~vmstack.cchain.fastwalk.FastAncestorWalk`, one snapshot, bytes stitched without
decoding). Corruption is never served as data, on either path; see :mod:`vmstack.cchain.chain`.

Parsing and verifying. ``parse_block`` is strict but lazy: it hashes the header slice (the
ID), decodes the header, and checks the framing of the body fields; transactions are decoded
when ``verify`` needs them. ``batched_parse_block`` is ``parse_block`` per element (there is
no cheaper correct parse) with the batch rules of ARCHITECTURE.md, section 3. ``verify``
checks, cheapest first so that hostile bytes cost little to refuse: the parent (processing
here, or the last accepted block); the header against it (:func:`check_header_rules`); the
body as received (:func:`~vmstack.cchain.rules.check_received_body`: counts read from the
framing before anything is decoded, each transaction's rules, and the header's commitments
to the body, which :mod:`vmstack.cchain.tries` computes and compares); the receipts the
block's execution produces (:func:`check_receipts_commitments`); and last, that every
sender recovers. Bytes that carry a known block's ID but other contents are refused.
``accept`` is one atomic write batch.

Settling. A block is settled once its receipts are written. With ``settle_lag=0`` that
happens when it is accepted; with ``settle_lag=k`` a block's receipts are written when the
block ``k`` heights above it is accepted (asynchronous execution), in that block's accept
batch, and the last-settled pointer (geth's ``LastFinalized``) moves with them. A store
without that pointer (coreth's) counts every accepted block as settled, as coreth executes
each block when it accepts it.

Execution. The VM does not run EVM code: receipts come from the execution model of
:mod:`vmstack.cchain.execution`.

Accounts. Each block's post-state (nonces, balances: :mod:`vmstack.cchain.state`) is derived
from its parent's when it is verified or built: a processing block holds the accounts it
changed over its parent's state (a processing block's, or the accepted state), so siblings
and deeper processing chains verify independently. ``verify`` refuses a transaction whose
nonce or balance does not fit that state and a header whose state root is not the
post-state's. ``accept`` writes the changed accounts and the state head (block and root)
in the block's own write batch, so a crash leaves the block with its state or neither;
``reject`` drops the post-state. The accepted state lives in the store, so two VMs over one
store (a transition layer's pre and post VMs) share it: each re-reads it when the store's
last accepted block is not the one it holds. A replaying VM (``replay=True``), and one over a
chain another program wrote (a coreth database: no state head, no integrity marker),
keeps no account state: those blocks were executed by an EVM it does not run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from vmstack.batching import (
    AncestorBudget,
    check_block_id,
    check_parse_batch,
    walk_ancestors,
)
from vmstack.cchain import rawdb
from vmstack.cchain.accounts import (
    accepted_base,
    build_on,
    check_state_commitment,
    reader_of,
    state_of,
)
from vmstack.cchain.block import BlockStatus, CChainBlock
from vmstack.cchain.building import build_new_block, move_preference
from vmstack.cchain.cache import CanonicalHashCache
from vmstack.cchain.chain import MAX_NUMBER, ChainReader
from vmstack.cchain.codec import AVALANCHE, Flavour
from vmstack.cchain.deciding import accept_block, reject_block, verify_block
from vmstack.cchain.era1.tier import HistoryTier
from vmstack.cchain.execution import execute_transactions
from vmstack.cchain.fastwalk import FastAncestorWalk
from vmstack.cchain.genesis import (
    BASE_FEE,
    BLACKHOLE_ADDRESS,
    GAS_LIMIT,
    Genesis,
)
from vmstack.cchain.mempool import Mempool
from vmstack.cchain.opening import open_chain
from vmstack.cchain.rlpbytes import first_item_offset, frame_body_fields, header_slice
from vmstack.cchain.source import ChainSource
from vmstack.cchain.state import (
    AcceptedState,
    Account,
    apply_block,
)
from vmstack.cchain.types import (
    AvalancheHeader,
    Transaction,
    Withdrawal,
)
from vmstack.clock import Clock
from vmstack.defaults import DEFAULT_CACHE_SIZE, DEFAULT_CHAIN_ID
from vmstack.errors import (
    BlockNotFound,
    InvalidBlock,
    InvalidTransaction,
)
from vmstack.keccak import keccak256
from vmstack.store.base import KeyValueStore

if TYPE_CHECKING:
    from vmstack.store.history import EraArchive

__all__ = ["CChainVM"]

# --- the VM -----------------------------------------------------------------------------


class CChainVM:
    """The C-chain VM over ``store``: ``ChainVM`` and the batched protocol (``batching`` is
    true; it is the bottom of a stack and has no ``inner``).

    ``flavour`` is the block format (:data:`~vmstack.cchain.AVALANCHE` or ``ETHEREUM``);
    ``key_prefix`` goes in front of every key (``rawdb.CORETH_KEY_PREFIX`` for a coreth
    database); ``clock`` gives block timestamps, the future-timestamp bound and the
    ancestors time budget; ``chain_id`` is the transactions' chain; ``cache_size`` bounds the
    canonical hash cache; ``settle_lag`` is how many accepted blocks a block's receipts wait
    for. An empty store gets a genesis block, deterministic from
    ``flavour``, ``chain_id`` and ``genesis`` (a :class:`~vmstack.cchain.Genesis`; default
    :func:`~vmstack.cchain.genesis.default_genesis` at ``genesis_timestamp``, funding
    ``DEV_KEYS``), or from ``genesis`` given as a genesis block's RLP; a store that has a
    chain keeps it (``genesis``, if given, must give its block 0, else ``ValueError``).
    A genesis that names a chain ID sets it: ``chain_id`` left at its default takes the
    genesis's, another is ``ValueError``. A store that holds chain data but no
    valid last accepted pointer is ``StoreCorrupted``: it is never given a genesis block
    over its blocks.

    ``replay=True`` is for a VM that replays blocks a real EVM executed (a coreth
    database's chain, recorded blocks): the execution model cannot reproduce their
    receipts, and their gas limits follow fork rules this VM does not know, so ``verify``
    takes the header's gas limit, gas used, receipts root and bloom as the block states
    them; every other rule holds. A replaying VM trusts its source for the cost of a
    block: the gas limit it takes as given is what bounds the transactions checked.

    ``history`` (an :class:`~vmstack.store.history.EraArchive`) puts settled history beneath
    the store (:mod:`vmstack.cchain.era1`), read where :attr:`source` (a
    :class:`~vmstack.cchain.source.ChainSource`) says; ``get_ancestors`` walks from the
    store into the archive and across its files in one answer, ``get_block`` restores an
    archived block on the same slow path (its receipts from the archive). Over an empty
    store the chain is the archive's at once (genesis its block 0, last accepted its last
    block; an archive that starts later is served from its first block, a checkpoint, with
    nothing below it): nothing is written or imported. A store beneath which the archive
    holds the history must continue it: its lowest block's parent is the archive's block below
    (``StoreCorrupted`` otherwise), and its block 0, if it has one, is the archive's
    (``ValueError`` otherwise). Real history was executed by an EVM this VM does not run and
    its state is not here: a VM over an archive without account state serves and verifies
    (as ``replay=True`` verifies) but ``build_block`` raises
    :class:`~vmstack.errors.StoreError`.
    """

    batching = True

    def __init__(
        self,
        store: KeyValueStore,
        *,
        flavour: Flavour = AVALANCHE,
        key_prefix: bytes = b"",
        clock: Clock = time.time,
        chain_id: int = DEFAULT_CHAIN_ID,
        cache_size: int = DEFAULT_CACHE_SIZE,
        settle_lag: int = 0,
        genesis_timestamp: int = 0,
        genesis: Genesis | bytes | None = None,
        replay: bool = False,
        history: EraArchive | None = None,
    ) -> None:
        if isinstance(genesis, Genesis):
            chain_id = genesis.chain_id_for(chain_id)
        if not isinstance(flavour, Flavour):
            raise ValueError(f"flavour must be a Flavour, got {flavour!r}")
        if isinstance(chain_id, bool) or not isinstance(chain_id, int) or chain_id < 1:
            raise ValueError(f"chain_id must be a positive int, got {chain_id!r}")
        if isinstance(settle_lag, bool) or not isinstance(settle_lag, int) or settle_lag < 0:
            raise ValueError(f"settle_lag must be a non-negative int, got {settle_lag!r}")
        self._store = store
        self._flavour = flavour
        self._avalanche = flavour.header_type is AvalancheHeader
        self._schema = rawdb.Schema(key_prefix)
        self._history = None if history is None else HistoryTier(history, flavour)
        self._chain = ChainReader(self._schema, flavour, cache_size, self._history)
        self._clock = clock
        self._chain_id = chain_id
        self._settle_lag = settle_lag
        self._replay = bool(replay)
        self._lock = threading.RLock()
        self._processing: dict[bytes, CChainBlock] = {}
        # The blocks build_block assembled and verify has not yet seen, by ID: the very
        # object, its very bytes and its transactions' encodings (see _own_build).
        self._built_here: dict[bytes, tuple[CChainBlock, bytes, tuple[bytes, ...]]] = {}
        self._preferred: bytes | None = None
        self._base: AcceptedState | None = None
        open_chain(self, genesis, genesis_timestamp)
        with self._store.snapshot() as snap:
            # A chain another program wrote (a coreth database: no integrity marker, no
            # state head) has no account state here: its blocks are served, not re-executed.
            self._stateless = self._replay or (
                not snap.has(self._schema.state_head_key())
                and (self._history is not None or self._chain.integrity_start(snap) is None)
            )
            if self._stateless and self._history is not None:
                # Real history: its blocks are verified as a replaying VM verifies them.
                self._replay = True
            # The gas limit is the genesis's on a chain this VM wrote, the C-chain's on
            # another program's.
            self._gas_limit = (
                GAS_LIMIT
                if self._stateless
                else self._chain.stored_header(
                    snap, 0, self._chain.canonical_hash(snap, 0)
                ).gas_limit
            )
            if not self._stateless:
                accepted_base(self, snap)
        self._mempool = Mempool(
            chain_id=chain_id,
            gas_limit=self._gas_limit,
            avalanche=self._avalanche,
            base_fee=BASE_FEE,  # every block's, by the chain's static fee rule
        )

    # --- opening ---------------------------------------------------------------------------

    # --- account state ---------------------------------------------------------------------

    def account(self, address: bytes, *, block_id: bytes | None = None) -> Account:
        """The account of ``address`` (20 bytes) in the state after ``block_id`` (a
        processing block or the last accepted one; default the last accepted): nonce 0,
        balance 0 for an address never touched. ``BlockNotFound`` for an older or unknown
        block (only those states are kept)."""
        if not isinstance(address, bytes) or len(address) != 20:
            raise ValueError(f"an address is 20 bytes, got {address!r}")
        state = state_of(self, None if block_id is None else check_block_id(block_id))
        return state.get(address) if isinstance(state, AcceptedState) else (state.account(address))

    def next_nonce(self, address: bytes) -> int:
        """The nonce a new transaction from ``address`` takes: its nonce in the preferred
        block's state, past the ones pending in the mempool that follow on (geth's pending
        nonce)."""
        return self._mempool.next_nonce(address, reader_of(self, build_on(self))(address).nonce)

    def state_root_after(
        self,
        parent_id: bytes,
        transactions: Sequence[Transaction],
        withdrawals: Sequence[Withdrawal] = (),
        *,
        coinbase: bytes = BLACKHOLE_ADDRESS,
        base_fee: int = BASE_FEE,
    ) -> bytes:
        """The state root of a block over ``parent_id`` (processing or the last accepted
        block) carrying ``transactions`` and ``withdrawals``, with ``coinbase`` credited the
        fees at ``base_fee``, by the rules ``verify`` applies (``InvalidBlock`` for a
        transaction they refuse): what a block crafted outside ``build_block`` must
        state."""
        found = state_of(self, check_block_id(parent_id))
        parent = None if isinstance(found, AcceptedState) else found
        base = found if isinstance(found, AcceptedState) else self._base
        if base is None:
            with self._store.snapshot() as snap:
                base = accepted_base(self, snap)
        senders = [tx.sender() for tx in transactions]
        state = apply_block(
            parent,
            base,
            transactions,
            senders,
            execute_transactions(transactions),
            coinbase=coinbase,
            base_fee=base_fee,
            withdrawals=withdrawals,
        )
        return state.root

    # --- properties ------------------------------------------------------------------------

    @property
    def flavour(self) -> Flavour:
        return self._flavour

    @property
    def chain_id(self) -> int:
        return self._chain_id

    @property
    def gas_limit(self) -> int:
        """The gas limit of every block of this chain (its genesis's)."""
        return self._gas_limit

    @property
    def schema(self) -> rawdb.Schema:
        """The schema that builds every key of this VM's store."""
        return self._schema

    @property
    def store(self) -> KeyValueStore:
        return self._store

    @property
    def history(self) -> EraArchive | None:
        """The archive beneath the store, if any."""
        return None if self._history is None else self._history.archive

    @property
    def source(self) -> ChainSource:
        """Which of the store and the archive beneath it answers each read of the chain."""
        return self._chain.source

    @property
    def cache(self) -> CanonicalHashCache:
        """The canonical hash cache (settled heights only); its hit and miss counts."""
        return self._chain.cache

    @property
    def settle_lag(self) -> int:
        return self._settle_lag

    @property
    def clock(self) -> Clock:
        return self._clock

    def processing(self) -> tuple[CChainBlock, ...]:
        """The blocks this instance has verified and not yet seen decided."""
        return tuple(self._processing.values())

    # --- ChainVM: reading ------------------------------------------------------------------

    def last_accepted(self) -> bytes:
        """The last accepted block's ID, read from the store (another VM over the same store
        may have moved it), in one snapshot, as its checks against the chain need."""
        with self._store.snapshot() as snap:
            return self._chain.last_accepted(snap)

    def last_settled(self) -> bytes:
        """The last settled block's ID (receipts written): the last accepted one's in a store
        without a last-settled pointer."""
        found = rawdb.read_last_settled_hash(self._store, self._schema)
        return self.last_accepted() if found is None else found

    def get_block_id_at_height(self, height: int) -> bytes:
        """The ID of the accepted block at ``height``; ``BlockNotFound`` above the last
        accepted height, ``StoreCorrupted`` for a canonical entry naming a block the store
        lacks (:meth:`ChainReader.missing_or_corrupt
        <vmstack.cchain.chain.ChainReader.missing_or_corrupt>`). Settled heights go through
        the canonical hash cache."""
        if isinstance(height, bool) or not isinstance(height, int) or height < 0:
            raise ValueError(f"a height is a non-negative int, got {height!r}")
        if height > MAX_NUMBER:
            raise BlockNotFound(f"no block at height {height}")
        cache = self._chain.cache
        if height <= cache.settled_height:
            cached = cache.lookup(height)
            if cached is not None:
                return cached
        with self._store.snapshot() as snap:
            found = self._chain.canonical_hash(snap, height)
        self._chain.remember_canonical(height, found)
        return found

    def get_block(self, block_id: bytes) -> CChainBlock:
        """A processing block from memory, or an accepted one restored from the store the
        way a faithful VM restores it (see the module docstring). ``BlockNotFound`` for
        anything else; ``StoreCorrupted`` for stored data that fails a check."""
        block_id = check_block_id(block_id)
        known = self._processing.get(block_id)
        if known is not None:
            return known
        with self._store.snapshot() as snap:
            restored = self._chain.restore(snap, block_id)
            if not self._stateless:
                check_state_commitment(self, snap, block_id, restored.block.header)
        raw = restored.raw
        return CChainBlock(
            self,
            block_id,
            raw,
            restored.block.header,
            header_end=first_item_offset(raw) + restored.header_size,
            body=restored.block.body,
            status=BlockStatus.ACCEPTED,
            receipts=restored.receipts,
            senders=restored.senders,
        )

    def stored_receipts(self, number: int, block_id: bytes) -> bytes:
        """The stored receipts (storage form) of the settled block ``block_id`` at
        ``number``, checked against its integrity entry (``StoreCorrupted`` otherwise)."""
        with self._store.snapshot() as snap:
            return self._chain.stored_receipts(snap, number, check_block_id(block_id))

    # --- BatchedChainVM: the fast path -----------------------------------------------------

    def get_ancestors(
        self,
        block_id: bytes,
        max_blocks_num: int,
        max_blocks_size: int,
        max_retrieval_time: float,
    ) -> list[bytes]:
        """The bytes of ``block_id`` and its ancestors, newest first, within the budget
        (ARCHITECTURE.md, section 3), from one store snapshot; ``[]`` if the block is not
        served."""
        block_id = check_block_id(block_id)
        budget = AncestorBudget(
            max_blocks_num, max_blocks_size, max_retrieval_time, clock=self._clock
        )
        # The processing blocks are looked at before the snapshot opens: a block accepted in
        # between is then in one or the other, never in neither.
        processing = dict(self._processing)
        with self._store.snapshot() as snap:
            walk = FastAncestorWalk(self._chain, snap, processing.get)
            return walk_ancestors(walk.fetch, block_id, budget).blocks

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[CChainBlock]:
        """Every element parsed as :meth:`parse_block` parses it, in input order; an invalid
        element raises ``InvalidBlock`` naming its index and nothing is kept. Elements with
        the same bytes are one block, parsed once: a peer that repeats a block (as a
        hostile one wrapping a single inner block in many envelopes does) gets no more
        parsing out of the node than the block itself costs."""
        parsed_by_bytes: dict[bytes, CChainBlock] = {}
        parsed: list[CChainBlock] = []
        parse = self.parse_block
        for index, data in enumerate(check_parse_batch(blocks)):
            raw = data if type(data) is bytes else bytes(data)
            block = parsed_by_bytes.get(raw)
            if block is None:
                try:
                    block = parsed_by_bytes[raw] = parse(raw)
                except InvalidBlock as error:
                    raise error.at_index(index) from error
            parsed.append(block)
        return parsed

    # --- ChainVM: parsing, building, deciding ----------------------------------------------

    def parse_block(self, data: bytes) -> CChainBlock:
        """The block in ``data``, checked as cheaply as correctness allows: the header slice
        is hashed (the ID) and decoded strictly, the body fields' framing is checked, and
        the transactions are decoded only when needed (by ``verify``). Bytes of a processing
        block give that very block; other bytes with its ID are refused. Nothing is stored.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidBlock(f"block bytes must be bytes, not {type(data).__name__}")
        raw = bytes(data)
        header = bytes(header_slice(raw))  # one copy, then hashed and decoded as bytes
        block_id = keccak256(header)
        known = self._processing.get(block_id)
        if known is not None:
            if known._raw == raw:
                return known
            raise InvalidBlock(
                f"block {block_id.hex()}: bytes differ from the processing block with this ID"
            )
        decoded = self._flavour.decode_header(header)
        header_end = first_item_offset(raw) + len(header)
        spans = frame_body_fields(self._flavour, raw, header_end)
        return CChainBlock(self, block_id, raw, decoded, header_end=header_end, spans=spans)

    def add_transactions(self, transactions: Iterable[Transaction]) -> None:
        """Queue signed transactions for :meth:`build_block`, checked against the preferred
        block's state; :class:`~vmstack.errors.InvalidTransaction` (and none queued) for
        one no block could carry now (:meth:`Mempool.add_transactions
        <vmstack.cchain.mempool.Mempool.add_transactions>`)."""
        if self._stateless:
            raise InvalidTransaction(
                "a replaying VM keeps no account state to check transactions against"
            )
        self._mempool.add_transactions(transactions, reader_of(self, build_on(self)))

    def add_ext_data(self, ext_data: bytes) -> None:
        """Queue extData (Avalanche atomic transactions) for a built block; each built block
        takes at most one. ``ValueError`` on an Ethereum VM."""
        self._mempool.add_ext_data(ext_data)

    def add_withdrawals(self, withdrawals: Iterable[Withdrawal]) -> None:
        """Queue a list of withdrawals for a built block (Ethereum); each built block takes
        at most one list. ``ValueError`` on an Avalanche VM."""
        self._mempool.add_withdrawals(withdrawals)

    def pending_transactions(self) -> int:
        """How many transactions wait in the mempool (pending and queued)."""
        return self._mempool.count()

    def pending(self) -> list[Transaction]:
        """The mempool's pending (executable) transactions, in nonce order per sender; read
        without draining (:meth:`Mempool.pending <vmstack.cchain.mempool.Mempool.pending>`)."""
        return self._mempool.pending()

    def queued(self) -> list[Transaction]:
        """The mempool's queued (nonce-gapped) transactions, in nonce order per sender; read
        without draining."""
        return self._mempool.queued()

    def take_transactions(self) -> list[Transaction]:
        """Remove every pending transaction from the mempool and return them in arrival
        order (a transition layer hands them to the VM that takes over)."""
        return self._mempool.take_transactions()

    def set_preference(self, block_id: bytes) -> None:
        """Build the next block on ``block_id``: the last accepted block, or a processing
        block that descends from it; ``BlockNotFound`` for an unknown block, and
        ``InvalidBlock`` ("cannot orphan finalized block") for one that conflicts with
        the accepted chain (an older accepted block, or a processing block on a branch
        off it).

        The mempool follows the preference: when the new head is not on the branch of the
        old one, the transactions of the abandoned branch's blocks (the
        :data:`REINJECT_DEPTH` nearest the old head) that the new branch lacks are put
        back in the pool, and the pooled senders' nonces are re-read from the new head's
        state (what its chain holds leaves the pool)."""
        move_preference(self, block_id)

    def build_block(self) -> CChainBlock:
        """A new block on the preferred block (the last accepted one unless a processing
        block is preferred), with every pending transaction executable on its state that
        fits the gas limit (:meth:`Mempool.executable
        <vmstack.cchain.mempool.Mempool.executable>`) and the next queued extData
        (Avalanche) or withdrawals (Ethereum). Its timestamp is the clock's, but never
        before its parent's. The block is not verified; its transactions stay pending
        until an accepted block includes them."""
        return build_new_block(self)

    # The block's own verify, accept and reject (:mod:`vmstack.cchain.deciding`).

    def _verify(self, block: CChainBlock) -> None:
        verify_block(self, block)

    def _accept(self, block: CChainBlock) -> None:
        accept_block(self, block)

    def _reject(self, block: CChainBlock) -> None:
        reject_block(self, block)

    def __repr__(self) -> str:
        return (
            f"CChainVM({self._flavour.name}, chain {self._chain_id}, "
            f"{len(self._processing)} processing, settle_lag={self._settle_lag})"
        )
