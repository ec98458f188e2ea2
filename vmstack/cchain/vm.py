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
(:class:`~vmstack.cchain.chain.FastAncestorWalk`, one snapshot, bytes stitched without
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

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from vmstack.batching import (
    AncestorBudget,
    check_block_id,
    check_parse_batch,
    parse_each,
    walk_ancestors,
)
from vmstack.cchain import rawdb
from vmstack.cchain.block import BlockStatus, CChainBlock, assemble_block
from vmstack.cchain.cache import CanonicalHashCache
from vmstack.cchain.chain import MAX_NUMBER, ChainReader, FastAncestorWalk, write_accepted
from vmstack.cchain.codec import AVALANCHE, Flavour, encode_receipts
from vmstack.cchain.crypto import keccak256
from vmstack.cchain.era1.tier import HistoryTier
from vmstack.cchain.execution import execute_transactions
from vmstack.cchain.genesis import (
    BASE_FEE,
    BLACKHOLE_ADDRESS,
    GAS_LIMIT,
    Genesis,
    default_genesis,
    genesis_block,
)
from vmstack.cchain.mempool import Mempool
from vmstack.cchain.rlpbytes import block_bytes, first_item_offset, frame_body_fields, header_slice
from vmstack.cchain.rules import (
    base_fee_rule,
    check_fee_rules,
    check_header_rules,
    check_receipts_commitments,
    check_received_body,
)
from vmstack.cchain.source import ChainSource
from vmstack.cchain.state import (
    AcceptedState,
    Account,
    State,
    account_record,
    apply_block,
    read_account_record,
    read_state_head_record,
    state_head_record,
)
from vmstack.cchain.types import (
    AnyHeader,
    AvalancheHeader,
    Receipt,
    Transaction,
    Withdrawal,
)
from vmstack.clock import Clock
from vmstack.defaults import DEFAULT_CACHE_SIZE, DEFAULT_CHAIN_ID
from vmstack.errors import (
    BlockNotFound,
    InvalidBlock,
    InvalidTransaction,
    StoreCorrupted,
    StoreError,
)
from vmstack.store.base import KeyValueStore, ReadSnapshot
from vmstack.store.format import FORMAT_KEY, check_format

if TYPE_CHECKING:
    from vmstack.store.history import EraArchive

__all__ = ["CChainVM", "REINJECT_DEPTH"]

#: How many blocks of an abandoned branch give their transactions back to the pool when
#: the preference moves to another branch (coreth's reorg reinjection depth).
REINJECT_DEPTH = 64

#: How many blocks built by :meth:`CChainVM.build_block` and not yet verified are
#: remembered as this VM's own (beyond that, the oldest is verified as a peer's would be).
_BUILT_RECORD_SIZE = 256

#: The largest data file whose whole main tree :func:`_check_open_pages` checks at open
#: (every page, by ``check_pages(b"")``). Measured (blocks of 40 transfers, warm page
#: cache): a 600-block store's 15 MB data file is walked in 0.05 s, where the whole open
#: takes 0.9 to 1.3 s; a 2,000-block store's 49 MB in 0.15 s of a 2.1 s open. About 3 ms a
#: megabyte, so at the bound about 0.8 s; bigger stores check the pages of a few keys.
WHOLE_TREE_CHECK_BOUND = 256 * 1024 * 1024


def _check_pages(snap: ReadSnapshot, prefixes: tuple[bytes, ...]) -> None:
    """Check, where ``snap``'s store library trusts its pages (one with ``check_pages``,
    LMDB's), every page a scan of each of ``prefixes`` walks: a damaged page is
    ``StoreCorrupted`` naming the data file and the page. Nothing for other stores."""
    check_pages = getattr(snap, "check_pages", None)
    if check_pages is not None:
        for prefix in prefixes:
            check_pages(prefix)


def _check_open_pages(snap: ReadSnapshot, schema: rawdb.Schema) -> None:
    """The page check at open: the whole main tree when the data file is at most
    :data:`WHOLE_TREE_CHECK_BOUND` (every read the open and later reads make then walks
    checked pages); for a bigger one, the pages holding the records the open reads by key
    (the format record, the head pointers, the integrity-start marker, the canonical entry
    at height 0). The probes of the first integrity and number entries and the canonical,
    header and settled-block reads further down a big store's open reach the library
    unchecked there."""
    data_size = getattr(snap, "data_size", None)
    if data_size is None:
        return
    if data_size() <= WHOLE_TREE_CHECK_BOUND:
        _check_pages(snap, (b"",))
        return
    _check_pages(
        snap,
        (
            FORMAT_KEY,
            schema.last_accepted_key(),
            schema.head_header_key(),
            schema.head_fast_block_key(),
            schema.last_settled_key(),
            schema.integrity_start_key(),
            schema.canonical_hash_key(0),
        ),
    )


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
    the store (:mod:`vmstack.cchain.era1`): every read takes the store first and the
    archive for the heights it holds that the store lacks; ``get_ancestors`` walks from the
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
        if isinstance(genesis, Genesis) and genesis.chain_id is not None:
            if chain_id not in (DEFAULT_CHAIN_ID, genesis.chain_id):
                raise ValueError(
                    f"chain_id {chain_id} differs from the genesis's {genesis.chain_id}"
                )
            chain_id = genesis.chain_id
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
        self._open(genesis, genesis_timestamp)
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
                self._accepted_base(snap)
        self._mempool = Mempool(
            chain_id=chain_id,
            gas_limit=self._gas_limit,
            avalanche=self._avalanche,
            base_fee=BASE_FEE,  # every block's, by the chain's static fee rule
        )

    # --- opening ---------------------------------------------------------------------------

    def _open(self, genesis: Genesis | bytes | None, genesis_timestamp: int) -> None:
        """Adopt the chain in the store, or write the genesis block into an empty one. A
        store that holds chain data but no last accepted pointer is damaged
        (``StoreCorrupted``): it is never given a genesis block over its blocks; nor is a
        store of another record format (:func:`vmstack.store.format.check_format`).

        Before any of that reads the store, the pages its reads walk are checked
        (:func:`_check_open_pages`), so that a damaged page header is ``StoreCorrupted``
        rather than the store library aborting the process."""
        with self._store.snapshot() as snap:
            _check_open_pages(snap, self._schema)
        check_format(
            self._store, holds_records=rawdb.has_vmstack_records(self._store, self._schema)
        )
        with self._store.snapshot() as snap:
            last = rawdb.read_last_accepted_hash(snap, self._schema)
            existing = None if last is None else self._chain.canonical_at(snap, 0)
            if last is None and rawdb.has_chain_data(snap, self._schema):
                raise StoreCorrupted(
                    "the store holds chain data but no last accepted block pointer"
                )
            if last is not None:
                self._chain.last_accepted(snap)
                self._check_history_beneath(snap)
        if last is None and self._history is not None:
            # An empty store over an archive: the chain is the archive's, as it stands (from
            # its block 0, or from its first block as a checkpoint when it starts later).
            if genesis is not None and (
                not self._history.holds(0)
                or self.parse_block(self._genesis_bytes(genesis, genesis_timestamp)).id
                != self._history.hash(0)
            ):
                raise ValueError("the archive's chain has another genesis block")
        elif last is None:
            self._write_genesis(self._genesis_bytes(genesis, genesis_timestamp), genesis)
        elif (
            genesis is not None
            and existing != self.parse_block(self._genesis_bytes(genesis, genesis_timestamp)).id
        ):
            raise ValueError("the store holds a chain with another genesis block")
        with self._store.snapshot() as snap:
            self._chain.settle_cache(self._chain.settled_number(snap))

    def _check_history_beneath(self, snap: ReadSnapshot) -> None:
        """A store's chain and the archive beneath it are one chain: the store's block 0,
        if it has one, is the archive's; the store's lowest written block (its
        integrity-start height) continues the archive. A store without block 0 needs its
        archive."""
        history = self._history
        stored_genesis = rawdb.read_canonical_hash(snap, self._schema, 0)
        if history is None:
            if stored_genesis is None:
                raise StoreCorrupted(
                    "the store has no block 0: its settled history lives in "
                    "an era1 archive (open it with history=)"
                )
            return
        if stored_genesis is not None and history.holds(0) and (stored_genesis != history.hash(0)):
            raise ValueError(
                "the archive beneath the store is of another chain: their block 0 differ"
            )
        start = self._chain.integrity_start(snap)
        if (
            start is None
            or start == 0
            or rawdb.read_canonical_hash(snap, self._schema, start - 1) is not None
        ):
            return
        lowest = rawdb.read_canonical_hash(snap, self._schema, start)
        if not history.holds(start - 1) or lowest is None:
            raise StoreCorrupted(
                f"the store's blocks start at height {start}, and the "
                f"archive does not hold height {start - 1}"
            )
        header = self._chain.stored_header(snap, start, lowest)
        if header.parent_hash != history.hash(start - 1):
            raise StoreCorrupted(
                f"the store's lowest block, at {start}, does not continue "
                f"the archive: its parent is not the archived block "
                f"{start - 1}"
            )

    def _genesis_bytes(self, genesis: Genesis | bytes | None, timestamp: int) -> bytes:
        if isinstance(genesis, bytes | bytearray):
            return bytes(genesis)
        if genesis is None:
            genesis = default_genesis(timestamp=timestamp)
        block = genesis_block(self._flavour, chain_id=self._chain_id, genesis=genesis)
        return self._flavour.encode_block(block)

    def _write_genesis(self, data: bytes, genesis: Genesis | bytes | None) -> None:
        """Write the genesis block with its accounts and state head: those of ``genesis``
        (the default genesis when ``None``), none for a genesis given as block bytes,
        whose header must then state the empty trie's root."""
        block = self.parse_block(data)
        if block.height != 0:
            raise ValueError(f"a genesis block has number 0, not {block.height}")
        accounts: dict[bytes, Account] = {}
        if isinstance(genesis, Genesis):
            accounts = genesis.accounts()
        elif genesis is None:
            accounts = default_genesis().accounts()
        receipts_rlp = encode_receipts(execute_transactions(block.transactions))
        with self._store.write_batch() as batch:
            write_accepted(batch, self._schema, block, receipts_rlp, None, ())
            if not self._replay:
                base = AcceptedState(block.id, accounts)
                if base.trie.root_hash != block.header.state_root:
                    raise ValueError("the genesis block's state root is not its allocation's")
                for address, account in accounts.items():
                    key = self._schema.account_key(address)
                    batch.put(key, account_record(key, account))
                head_key = self._schema.state_head_key()
                batch.put(head_key, state_head_record(head_key, block.id, base.trie.root_hash))

    # --- account state ---------------------------------------------------------------------

    def _accepted_base(self, snap: ReadSnapshot) -> AcceptedState:
        """The state after the last accepted block, as this VM holds it, re-read from
        ``snap`` when the store's last accepted block is another (another VM over the same
        store accepted it). ``StoreCorrupted`` for a store whose state head is missing,
        damaged or not the last accepted block's, or whose accounts do not give the root
        the head records."""
        last = self._chain.last_accepted(snap)
        base = self._base
        if base is not None and base.block_id == last:
            return base
        _check_pages(snap, (self._schema.state_head_key(), self._schema.account_prefix()))
        try:
            head = snap.get(self._schema.state_head_key())
        except KeyError:
            raise StoreCorrupted(
                "the store holds a chain but no account state (a store "
                "of replayed blocks opens with replay=True)"
            ) from None
        block_id, root = read_state_head_record(self._schema.state_head_key(), head)
        if block_id != last:
            raise StoreCorrupted(
                f"the stored account state is after block {block_id.hex()},"
                f" not the last accepted {last.hex()}"
            )
        prefix = self._schema.account_prefix()
        accounts = {
            bytes(key[len(prefix) :]): read_account_record(key, value)
            for key, value in snap.iterate(prefix)
        }
        base = AcceptedState(last, accounts)
        if base.trie.root_hash != root:
            raise StoreCorrupted(
                "the stored accounts do not give the state root their head records"
            )
        self._base = base
        return base

    def _state_of(self, block_id: bytes | None) -> State | AcceptedState:
        """The post-state of a processing block, or of the last accepted one (``None``)."""
        with self._lock:
            if block_id is not None:
                known = self._processing.get(block_id)
                if known is not None and known._state is not None:
                    return known._state
            with self._store.snapshot() as snap:
                if self._stateless:
                    raise ValueError("a replaying VM keeps no account state")
                base = self._accepted_base(snap)
            if block_id is not None and block_id != base.block_id:
                raise BlockNotFound(
                    f"block {block_id.hex()} is neither processing nor the "
                    "last accepted block: only their state is kept"
                )
            return base

    def account(self, address: bytes, *, block_id: bytes | None = None) -> Account:
        """The account of ``address`` (20 bytes) in the state after ``block_id`` (a
        processing block or the last accepted one; default the last accepted): nonce 0,
        balance 0 for an address never touched. ``BlockNotFound`` for an older or unknown
        block (only those states are kept)."""
        if not isinstance(address, bytes) or len(address) != 20:
            raise ValueError(f"an address is 20 bytes, got {address!r}")
        state = self._state_of(None if block_id is None else check_block_id(block_id))
        return state.get(address) if isinstance(state, AcceptedState) else (state.account(address))

    def next_nonce(self, address: bytes) -> int:
        """The nonce a new transaction from ``address`` takes: its nonce in the preferred
        block's state, past the ones pending in the mempool that follow on (geth's pending
        nonce)."""
        return self._mempool.next_nonce(address, self._reader_of(self._build_on())(address).nonce)

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
        found = self._state_of(check_block_id(parent_id))
        parent = None if isinstance(found, AcceptedState) else found
        base = found if isinstance(found, AcceptedState) else self._base
        if base is None:
            with self._store.snapshot() as snap:
                base = self._accepted_base(snap)
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

    def _build_on(self) -> bytes | None:
        """The block the next one builds on, if it is processing (``None``: the last
        accepted block), as :meth:`build_block` chooses it."""
        preferred = self._preferred
        return preferred if preferred in self._processing else None

    def _reader_of(self, block_id: bytes | None) -> Callable[[bytes], Account]:
        state = self._state_of(block_id)
        return state.get if isinstance(state, AcceptedState) else state.account

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
                self._check_state_commitment(snap, block_id, restored.block.header)
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

    def _check_state_commitment(
        self, snap: ReadSnapshot, block_id: bytes, header: AnyHeader
    ) -> None:
        """The state a settled block commits to is the one kept, as a VM restoring a
        block's execution results finds its state: for the last accepted block (the one
        whose state is kept), the stored state head names it and its root is the header's
        (``StoreCorrupted`` otherwise)."""
        if self._chain.last_accepted(snap) != block_id:
            return
        _check_pages(snap, (self._schema.state_head_key(), self._schema.account_prefix()))
        try:
            head = snap.get(self._schema.state_head_key())
        except KeyError:
            raise StoreCorrupted("the last accepted block has no account state") from None
        head_block, root = read_state_head_record(self._schema.state_head_key(), head)
        if head_block != block_id or root != header.state_root:
            raise StoreCorrupted(
                f"the stored account state is not the one block {block_id.hex()} commits to"
            )

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

        def parse_once(data: bytes) -> CChainBlock:
            raw = bytes(data)
            block = parsed_by_bytes.get(raw)
            if block is None:
                block = parsed_by_bytes[raw] = self.parse_block(raw)
            return block

        return parse_each(parse_once, check_parse_batch(blocks))

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
        self._mempool.add_transactions(transactions, self._reader_of(self._build_on()))

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
        block_id = check_block_id(block_id)
        with self._lock:
            with self._store.snapshot() as snap:
                last = self._chain.last_accepted(snap)
                if block_id != last and block_id not in self._processing:
                    if self._chain.accepted_number(snap, block_id) is None:
                        raise BlockNotFound(
                            f"block {block_id.hex()} is neither processing nor accepted"
                        )
                    raise InvalidBlock(
                        f"cannot orphan finalized block: block {block_id.hex()} is an "
                        f"accepted block below the last accepted {last.hex()}"
                    )
            new_branch = self._processing_branch(block_id)
            if new_branch and new_branch[-1].parent_id != last:
                raise InvalidBlock(
                    f"cannot orphan finalized block: block {block_id.hex()} does not "
                    f"descend from the last accepted block {last.hex()}"
                )
            old_head = self._build_on()
            old_branch = [] if old_head is None else self._processing_branch(old_head)
            self._preferred = block_id
            if self._stateless or (old_head is not None and old_head == block_id):
                return
            on_new = {block.id for block in new_branch}
            if old_head is not None and old_head not in on_new:
                kept = {tx for block in new_branch for tx in block.transactions}
                abandoned = [b for b in old_branch if b.id not in on_new][:REINJECT_DEPTH]
                self._put_back(
                    tx
                    for block in reversed(abandoned)
                    for tx in block.transactions
                    if tx not in kept
                )
            self._mempool.reset(self._reader_of(self._build_on()))

    def _processing_branch(self, block_id: bytes) -> list[CChainBlock]:
        """The processing blocks from ``block_id`` down to the first whose parent is not
        processing, nearest first (``[]`` for a block that is not processing)."""
        branch: list[CChainBlock] = []
        current = self._processing.get(block_id)
        while current is not None:
            branch.append(current)
            current = self._processing.get(current.parent_id)
        return branch

    def _put_back(self, transactions: Iterable[Transaction]) -> None:
        """Pool again, one by one against the build head's state, what a rejected or
        abandoned block carried; what no block on the preferred chain could carry now
        (held by it already, or by the accepted chain) is left out."""
        reader = self._reader_of(self._build_on())
        for tx in transactions:
            with contextlib.suppress(InvalidTransaction):
                self._mempool.add_transactions([tx], reader)

    def build_block(self) -> CChainBlock:
        """A new block on the preferred block (the last accepted one unless a processing
        block is preferred), with every pending transaction executable on its state that
        fits the gas limit (:meth:`Mempool.executable
        <vmstack.cchain.mempool.Mempool.executable>`) and the next queued extData
        (Avalanche) or withdrawals (Ethereum). Its timestamp is the clock's, but never
        before its parent's. The block is not verified; its transactions stay pending
        until an accepted block includes them."""
        mempool = self._mempool
        if self._stateless and self._history is not None:
            raise StoreError(
                "cannot build a block: this VM serves real history from an era1 "
                "archive and has none of its state (the accounts its blocks "
                "changed), so it cannot execute a new block on it"
            )
        with self._lock:
            parent_id, parent = self._build_parent()
            timestamp = max(int(self._clock()), parent.time)
            parent_state: State | None = None
            base: AcceptedState | None = None
            if self._stateless:
                txs: list[Transaction] = []
            else:
                found = self._state_of(parent_id)
                if isinstance(found, AcceptedState):
                    base = found
                    txs = mempool.executable(found.get)
                else:
                    parent_state = found
                    base = self._base
                    txs = mempool.executable(found.account)
            ext_data, withdrawals = mempool.take_extras()
        encodings = [mempool.encoding(tx) for tx in txs]

        def post_state(receipts: Sequence[Receipt]) -> State | None:
            if base is None:
                return None
            senders = [
                mempool.sender(tx, encoding) for tx, encoding in zip(txs, encodings, strict=True)
            ]
            return apply_block(
                parent_state,
                base,
                txs,
                senders,
                receipts,
                coinbase=BLACKHOLE_ADDRESS,
                base_fee=base_fee_rule(parent),
                withdrawals=withdrawals,
            )

        block = assemble_block(
            self, parent_id, parent, timestamp, txs, ext_data, withdrawals, encodings, post_state
        )
        self._chain.remember_header(block.id, block.header)
        with self._lock:
            built = self._built_here
            built[block.id] = (block, block._raw, tuple(encodings))
            if len(built) > _BUILT_RECORD_SIZE:
                del built[next(iter(built))]
        return block

    def _own_build(self, block: CChainBlock) -> tuple[bytes, ...] | None:
        """The transactions' encodings of ``block`` if it is a block :meth:`build_block` of
        this VM assembled (the very object, holding the very bytes it was built with, under
        its ID), which is then forgotten; ``None`` for any other block, whatever it claims.
        Such a block's header was computed from its body and its receipts a moment ago, so
        verify does not compute its body and receipts commitments again."""
        record = self._built_here.pop(block.id, None)
        if record is None:
            return None
        built, raw, encodings = record
        if built is not block or raw is not block._raw or not block._built:
            return None
        return encodings

    def _build_parent(self) -> tuple[bytes, AnyHeader]:
        preferred = self._preferred
        if preferred is not None:
            block = self._processing.get(preferred)
            if block is not None:
                return preferred, block.header
        with self._store.snapshot() as snap:
            last = self._chain.last_accepted(snap)
            return last, self._chain.stored_header(snap, self._chain.number_of(snap, last), last)

    def _verify(self, block: CChainBlock) -> None:
        with self._lock:
            if block._status in (BlockStatus.PROCESSING, BlockStatus.ACCEPTED):
                return
            if block._status is BlockStatus.REJECTED:
                raise InvalidBlock(f"block {block.id.hex()} was rejected")
            with self._store.snapshot() as snap:
                if self._is_accepted_copy(snap, block):
                    block._status = BlockStatus.ACCEPTED
                    return
                last_height = self._chain.number_of(snap, self._chain.last_accepted(snap))
                if block.height <= last_height:
                    raise InvalidBlock(
                        f"block {block.id.hex()} at height {block.height} is not accepted "
                        f"and the last accepted block is at {last_height}: it can never be"
                    )
                parent = self._processing.get(block.parent_id)
                base = None if self._stateless else self._accepted_base(snap)
                parent_header: AnyHeader
                if parent is not None:
                    parent_header = parent.header
                else:
                    last = self._chain.last_accepted(snap)
                    if block.parent_id != last:
                        raise InvalidBlock(
                            f"block {block.id.hex()}: parent "
                            f"{block.parent_id.hex()} is neither processing "
                            "nor the last accepted block"
                        )
                    parent_header = self._chain.stored_header(
                        snap, self._chain.number_of(snap, last), last
                    )
            check_header_rules(
                block.header,
                parent_number=parent_header.number,
                parent_time=parent_header.time,
                now=self._clock(),
                gas_limit=None if self._replay else self._gas_limit,
            )
            self._check_body(
                block,
                None if parent is None else parent._state,
                base,
                None if self._replay else base_fee_rule(parent_header),
            )
            block._status = BlockStatus.PROCESSING
            self._processing[block.id] = block
            self._chain.remember_header(block.id, block.header)

    def _is_accepted_copy(self, snap: ReadSnapshot, block: CChainBlock) -> bool:
        """Whether ``block`` is an accepted block (same ID, same bytes); ``InvalidBlock`` for
        other bytes under an accepted block's ID."""
        number = self._chain.accepted_number(snap, block.id)
        if number is None:
            return False
        parts = self._chain.block_parts(snap, number, block.id)
        if parts is not None and block_bytes(*parts) == block._raw:
            return True
        raise InvalidBlock(
            f"block {block.id.hex()}: bytes differ from the accepted block with this ID"
        )

    def _check_body(
        self,
        block: CChainBlock,
        parent_state: State | None,
        base: AcceptedState | None,
        base_fee: int | None,
    ) -> None:
        """The body rules, cheapest first, so that hostile bytes cost little to refuse: the
        rules of the body as received (:func:`~vmstack.cchain.rules.check_received_body`:
        sizes, decode, transaction rules, the header's commitments to the body); the fee
        rules (:func:`~vmstack.cchain.rules.check_fee_rules` against ``base_fee``, the
        chain's fee rule's; not when replaying: real history follows coreth's dynamic fee
        rule, which is not modelled); then that
        the header commits to what executing the block produces: gas used, receipts root
        and bloom (:func:`check_receipts_commitments`; not when replaying); and last, that
        every sender recovers (:meth:`Mempool.check_senders
        <vmstack.cchain.mempool.Mempool.check_senders>`), the costly part; and then (not when
        replaying) the state transition over the parent's state (``parent_state``, or the
        accepted ``base``): each transaction's nonce and balance
        (:func:`~vmstack.cchain.state.apply_block`) and the header's state root. A block
        this VM built keeps the post-state it was built with, from the same function over
        the same parent state. A block :meth:`build_block` of this VM just assembled (this
        very object, with its very bytes: :meth:`_own_build`) skips the body's and the
        receipts' commitments, which were computed from its body and receipts when it was
        built; any other block, a peer's with the same ID included, has them checked."""
        spans = dict(
            zip((f.name for f in self._flavour.body_fields), block._body_spans(), strict=False)
        )
        where = f"block {block.id.hex()}"
        own_encodings = self._own_build(block)
        own = own_encodings is not None
        receipts = block._receipts
        try:
            if own_encodings is not None:
                body, encodings = block.body, list(own_encodings)
            else:
                body, encodings = check_received_body(
                    block.header, block._raw, spans, lambda: block.body, chain_id=self._chain_id
                )
            if base_fee is not None:
                check_fee_rules(block.header, body.transactions, base_fee=base_fee)
            if not self._replay and (not own or receipts is None):
                receipts = execute_transactions(body.transactions)
                check_receipts_commitments(block.header, receipts)
        except InvalidBlock as error:
            raise InvalidBlock(f"{where}: {error.reason}") from None
        senders = self._mempool.check_senders(body.transactions, encodings, where)
        block._senders = tuple(senders)
        if base is None or receipts is None:
            return
        state = block._state if own else None
        if state is None:
            header = block.header
            try:
                state = apply_block(
                    parent_state,
                    base,
                    body.transactions,
                    senders,
                    receipts,
                    coinbase=header.coinbase,
                    base_fee=header.base_fee or 0,
                    withdrawals=body.withdrawals or (),
                )
            except InvalidBlock as error:
                raise InvalidBlock(f"{where}: {error.reason}") from None
        if state.root != block.header.state_root:
            raise InvalidBlock(
                f"{where}: state root {block.header.state_root.hex()} is not "
                f"the post-state's {state.root.hex()}"
            )
        block._state = state

    def _accept(self, block: CChainBlock) -> None:
        with self._lock:
            if block._status is BlockStatus.ACCEPTED:
                return
            if block._status is not BlockStatus.PROCESSING:
                raise InvalidBlock(
                    f"block {block.id.hex()} is {block._status.value}: only a "
                    "verified block can be accepted"
                )
            number = block.height
            with self._store.snapshot() as snap:
                if block.parent_id != self._chain.last_accepted(snap):
                    raise InvalidBlock(
                        f"block {block.id.hex()}: its parent is not the last accepted block"
                    )
                settled_before = self._chain.settled_number(snap)
                integrity_start = self._chain.integrity_start(snap)
                # Heights that become settled with this block: those that lag behind it
                # (and, after a restart with a shorter lag, any left unsettled before).
                stop = number if self._settle_lag == 0 else number - self._settle_lag + 1
                settling = [
                    self._chain.settlement(snap, height, integrity_start)
                    for height in range(settled_before + 1, stop)
                ]
            receipts_rlp = None
            if self._settle_lag == 0:
                receipts = block._receipts
                if receipts is None:
                    receipts = execute_transactions(block.transactions)
                receipts_rlp = encode_receipts(receipts)
            state = block._state
            with self._store.write_batch() as batch:
                write_accepted(batch, self._schema, block, receipts_rlp, integrity_start, settling)
                if state is not None:
                    for address, account in state.changed.items():
                        key = self._schema.account_key(address)
                        if account.empty:
                            batch.delete(key)
                        else:
                            batch.put(key, account_record(key, account))
                    head_key = self._schema.state_head_key()
                    batch.put(head_key, state_head_record(head_key, block.id, state.root))
            block._status = BlockStatus.ACCEPTED
            self._processing.pop(block.id, None)
            base = self._base
            if state is not None and base is not None and base.block_id == block.parent_id:
                base.advance(block.id, state)
            else:
                self._base = None
            block._state = None
            if base is not None and block._senders is not None:
                self._mempool.on_accepted(block._senders, base.get)
            preferred = self._preferred
            if preferred != block.id and not any(
                ancestor.parent_id == block.id
                for ancestor in self._processing_branch(preferred or block.id)
            ):
                # A block that was not preferred is accepted: the build head moves to it,
                # and the pool re-reads its senders' nonces there.
                self._preferred = block.id
                if base is not None and preferred is not None:
                    self._mempool.reset(base.get)
            if receipts_rlp is not None:
                self._chain.settle_cache(number)
            elif settling:
                self._chain.settle_cache(settling[-1].number)

    def _reject(self, block: CChainBlock) -> None:
        with self._lock:
            if block._status is BlockStatus.ACCEPTED:
                raise InvalidBlock(f"block {block.id.hex()} is accepted and cannot be rejected")
            if block._status is BlockStatus.REJECTED:
                return
            verified = block._status is BlockStatus.PROCESSING
            block._status = BlockStatus.REJECTED
            block._state = None
            self._processing.pop(block.id, None)
            if self._built_here.get(block.id, (None,))[0] is block:
                del self._built_here[block.id]
            was_preferred = self._preferred == block.id
            if was_preferred:
                self._preferred = None
            if block._built:
                self._mempool.give_back(block.body)
            if verified and not self._stateless:
                # Its transactions (built here or by a peer) that neither the accepted
                # nor the preferred chain holds return to the pool.
                self._put_back(block.transactions)
                if was_preferred:
                    self._mempool.reset(self._reader_of(self._build_on()))

    def __repr__(self) -> str:
        return (
            f"CChainVM({self._flavour.name}, chain {self._chain_id}, "
            f"{len(self._processing)} processing, settle_lag={self._settle_lag})"
        )
