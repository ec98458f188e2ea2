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
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from vmstack.batching import (
    AncestorBudget,
    check_block_id,
    check_parse_batch,
    parse_each,
    walk_ancestors,
)
from vmstack.cchain import rawdb
from vmstack.cchain.block import BlockStatus, CChainBlock
from vmstack.cchain.cache import CanonicalHashCache
from vmstack.cchain.chain import MAX_NUMBER, ChainReader, FastAncestorWalk
from vmstack.cchain.codec import AVALANCHE, Flavour, encode_receipts
from vmstack.cchain.crypto import keccak256
from vmstack.cchain.execution import TX_BASE_GAS, execute_transactions, intrinsic_gas
from vmstack.cchain.genesis import GAS_LIMIT, genesis_block, new_header, state_root
from vmstack.cchain.rlpbytes import block_bytes, first_item_offset, frame_body_fields, header_slice
from vmstack.cchain.rules import (
    MAX_FUTURE_SECONDS,
    MAX_UNCLES,
    MAX_WITHDRAWALS,
    check_header_rules,
    check_receipts_commitments,
    check_received_body,
    check_transaction_rules,
)
from vmstack.cchain.tries import body_commitments, receipts_root, with_body_commitments
from vmstack.cchain.types import (
    AccessListTx,
    AnyHeader,
    AvalancheHeader,
    BlobTx,
    Body,
    DynamicFeeTx,
    LegacyTx,
    Receipt,
    SetCodeTx,
    Transaction,
    Withdrawal,
    logs_bloom,
)
from vmstack.clock import Clock
from vmstack.errors import BlockNotFound, InvalidBlock, StoreCorrupted
from vmstack.store.base import KeyValueStore, KeyWriter, ReadSnapshot

__all__ = [
    "DEFAULT_CHAIN_ID",
    "MAX_FUTURE_SECONDS",
    "MAX_UNCLES",
    "MAX_WITHDRAWALS",
    "TX_BASE_GAS",
    "BlockStatus",
    "CChainBlock",
    "CChainVM",
    "check_header_rules",
    "check_receipts_commitments",
    "check_transaction_rules",
    "execute_transactions",
    "intrinsic_gas",
]

#: The Avalanche C-chain's chain id on mainnet.
DEFAULT_CHAIN_ID: Final = 43114

_TRANSACTION_TYPES = (LegacyTx, AccessListTx, DynamicFeeTx, BlobTx, SetCodeTx)
_MEMO_SIZE = 4096


def _commit(header: AnyHeader, body: Body, receipts: Sequence[Receipt],
            tx_encodings: Sequence[bytes]) -> AnyHeader:
    """``header`` committing to ``body`` and ``receipts``: what the flavour's ``seal`` sets
    (the body's commitments, from the transactions' known encodings, and the receipts root
    and bloom, with the blooms combined as integers), since building blocks is the
    generator's hot loop."""
    header = with_body_commitments(header, body_commitments(body, tx_encodings))
    bloom = 0
    for receipt in receipts:
        if receipt.logs:
            bloom |= int.from_bytes(receipt.bloom or logs_bloom(receipt.logs), "big")
    return attrs.evolve(header, receipt_root=receipts_root(receipts),
                        bloom=bloom.to_bytes(256, "big"))


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
    ``flavour``, ``chain_id`` and ``genesis_timestamp``, or ``genesis`` (a genesis block's RLP)
    when given; a store that has a chain keeps it (``genesis``, if given, must be its block
    0, else ``ValueError``). A store that holds chain data but no valid last accepted
    pointer is ``StoreCorrupted``: it is never given a genesis block over its blocks.

    ``replay=True`` is for a VM that replays blocks a real EVM executed (a coreth
    database's chain, recorded blocks): the execution model cannot reproduce their
    receipts, and their gas limits follow fork rules this VM does not know, so ``verify``
    takes the header's gas limit, gas used, receipts root and bloom as the block states
    them; every other rule holds. A replaying VM trusts its source for the cost of a
    block: the gas limit it takes as given is what bounds the transactions checked.
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
        cache_size: int = 10_000,
        settle_lag: int = 0,
        genesis_timestamp: int = 0,
        genesis: bytes | None = None,
        replay: bool = False,
    ) -> None:
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
        self._chain = ChainReader(self._schema, flavour, cache_size)
        self._clock = clock
        self._chain_id = chain_id
        self._settle_lag = settle_lag
        self._replay = bool(replay)
        self._lock = threading.RLock()
        self._processing: dict[bytes, CChainBlock] = {}
        self._preferred: bytes | None = None
        self._mempool: deque[Transaction] = deque()
        self._ext_data: deque[bytes] = deque()
        self._withdrawals: deque[tuple[Withdrawal, ...]] = deque()
        self._encodings: OrderedDict[Transaction, bytes] = OrderedDict()
        self._recovered: OrderedDict[bytes, bytes] = OrderedDict()
        self._open(genesis, genesis_timestamp)

    # --- opening ---------------------------------------------------------------------------

    def _open(self, genesis: bytes | None, genesis_timestamp: int) -> None:
        """Adopt the chain in the store, or write the genesis block into an empty one. A
        store that holds chain data but no last accepted pointer is damaged
        (``StoreCorrupted``): it is never given a genesis block over its blocks."""
        with self._store.snapshot() as snap:
            last = rawdb.read_last_accepted_hash(snap, self._schema)
            existing = None if last is None else rawdb.read_canonical_hash(snap, self._schema, 0)
            if last is None and rawdb.has_chain_data(snap, self._schema):
                raise StoreCorrupted("the store holds chain data but no last accepted block "
                                     "pointer")
            if last is not None:
                self._chain.last_accepted(snap)
        if last is None:
            self._write_genesis(self._genesis_bytes(genesis, genesis_timestamp))
        elif genesis is not None and existing != self.parse_block(genesis).id:
            raise ValueError("the store holds a chain with another genesis block")
        with self._store.snapshot() as snap:
            self._chain.settle_cache(self._chain.settled_number(snap))

    def _genesis_bytes(self, genesis: bytes | None, timestamp: int) -> bytes:
        if genesis is not None:
            return genesis
        block = genesis_block(self._flavour, chain_id=self._chain_id, timestamp=timestamp)
        return self._flavour.encode_block(block)

    def _write_genesis(self, data: bytes) -> None:
        block = self.parse_block(data)
        if block.height != 0:
            raise ValueError(f"a genesis block has number 0, not {block.height}")
        receipts_rlp = encode_receipts(execute_transactions(block.transactions))
        block_id = block.id
        with self._store.write_batch() as batch:
            self._write_accepted(batch, block)
            rawdb.write_receipts(batch, self._schema, 0, block_id, receipts_rlp)
            rawdb.write_integrity(batch, self._schema, 0, block_id, rawdb.checksum(data),
                                  rawdb.checksum(receipts_rlp))
            rawdb.write_integrity_start(batch, self._schema, 0)
            rawdb.write_last_settled_hash(batch, self._schema, block_id)

    # --- properties ------------------------------------------------------------------------

    @property
    def flavour(self) -> Flavour:
        return self._flavour

    @property
    def chain_id(self) -> int:
        return self._chain_id

    @property
    def schema(self) -> rawdb.Schema:
        """The schema that builds every key of this VM's store."""
        return self._schema

    @property
    def store(self) -> KeyValueStore:
        return self._store

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
        raw = restored.raw
        return CChainBlock(self, block_id, raw, restored.block.header,
                           header_end=first_item_offset(raw) + restored.header_size,
                           body=restored.block.body, status=BlockStatus.ACCEPTED,
                           receipts=restored.receipts, senders=restored.senders)

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
        budget = AncestorBudget(max_blocks_num, max_blocks_size, max_retrieval_time,
                                clock=self._clock)
        # The processing blocks are looked at before the snapshot opens: a block accepted in
        # between is then in one or the other, never in neither.
        processing = dict(self._processing)
        with self._store.snapshot() as snap:
            walk = FastAncestorWalk(self._chain, snap, processing.get)
            return walk_ancestors(walk.fetch, block_id, budget).blocks

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[CChainBlock]:
        """Every element parsed as :meth:`parse_block` parses it, in input order; an invalid
        element raises ``InvalidBlock`` naming its index and nothing is kept."""
        return parse_each(self.parse_block, check_parse_batch(blocks))

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
            raise InvalidBlock(f"block {block_id.hex()}: bytes differ from the processing "
                               "block with this ID")
        decoded = self._flavour.decode_header(header)
        header_end = first_item_offset(raw) + len(header)
        spans = frame_body_fields(self._flavour, raw, header_end)
        return CChainBlock(self, block_id, raw, decoded, header_end=header_end, spans=spans)

    def add_transactions(self, transactions: Iterable[Transaction]) -> None:
        """Queue signed transactions for :meth:`build_block` (in order). ``ValueError`` for
        a transaction of another chain or whose gas limit exceeds a block's or does not
        cover its intrinsic gas (a block carrying it would be invalid)."""
        queued: list[Transaction] = []
        for tx in transactions:
            if not isinstance(tx, _TRANSACTION_TYPES):
                raise ValueError(f"not a transaction: {tx!r}")
            own = tx.chain_id
            if own is not None and own != self._chain_id:
                raise ValueError(f"transaction for chain {own}, this VM is chain "
                                 f"{self._chain_id}")
            if tx.gas > GAS_LIMIT:
                raise ValueError(f"transaction gas {tx.gas} exceeds the block gas limit "
                                 f"{GAS_LIMIT}")
            if tx.gas < intrinsic_gas(tx):
                raise ValueError(f"transaction gas {tx.gas} is below its intrinsic gas "
                                 f"{intrinsic_gas(tx)}")
            queued.append(tx)
        with self._lock:
            self._mempool.extend(queued)

    def add_ext_data(self, ext_data: bytes) -> None:
        """Queue extData (Avalanche atomic transactions) for a built block; each built block
        takes at most one. ``ValueError`` on an Ethereum VM."""
        if not self._avalanche:
            raise ValueError("extData is an Avalanche body field")
        if not isinstance(ext_data, bytes | bytearray):
            raise ValueError("extData must be bytes")
        with self._lock:
            self._ext_data.append(bytes(ext_data))

    def add_withdrawals(self, withdrawals: Iterable[Withdrawal]) -> None:
        """Queue a list of withdrawals for a built block (Ethereum); each built block takes
        at most one list. ``ValueError`` on an Avalanche VM."""
        if self._avalanche:
            raise ValueError("withdrawals are an Ethereum body field")
        items = tuple(withdrawals)
        if not all(isinstance(w, Withdrawal) for w in items):
            raise ValueError("withdrawals must be Withdrawal records")
        with self._lock:
            self._withdrawals.append(items)

    def pending_transactions(self) -> int:
        """How many transactions wait in the mempool."""
        return len(self._mempool)

    def take_transactions(self) -> list[Transaction]:
        """Remove every waiting transaction from the mempool and return them in order (a
        transition layer hands them to the VM that takes over)."""
        with self._lock:
            waiting = list(self._mempool)
            self._mempool.clear()
        return waiting

    def set_preference(self, block_id: bytes) -> None:
        """Build the next block on ``block_id`` (processing or accepted);
        ``BlockNotFound`` otherwise."""
        block_id = check_block_id(block_id)
        with self._lock:
            if block_id not in self._processing:
                with self._store.snapshot() as snap:
                    if self._chain.accepted_number(snap, block_id) is None:
                        raise BlockNotFound(f"block {block_id.hex()} is neither processing "
                                            "nor accepted")
            self._preferred = block_id

    def build_block(self) -> CChainBlock:
        """A new block on the preferred block (the last accepted one unless a processing
        block is preferred), from the mempool in order while the gas limit holds, with the
        next queued extData (Avalanche) or withdrawals (Ethereum). Its timestamp is the
        clock's, but never before its parent's. The block is not verified."""
        with self._lock:
            parent_id, parent = self._build_parent()
            timestamp = max(int(self._clock()), parent.time)
            txs: list[Transaction] = []
            gas = 0
            while self._mempool and gas + self._mempool[0].gas <= GAS_LIMIT:
                tx = self._mempool.popleft()
                txs.append(tx)
                gas += tx.gas
            ext_data = self._ext_data.popleft() if self._ext_data else b""
            withdrawals = self._withdrawals.popleft() if self._withdrawals else ()
        receipts = execute_transactions(txs)
        gas_used = receipts[-1].cumulative_gas_used if receipts else 0
        flavour = self._flavour
        body = flavour.body(txs, ext_data=ext_data, withdrawals=withdrawals)
        header = _commit(new_header(flavour, parent, parent_hash=parent_id,
                                    timestamp=timestamp, gas_used=gas_used, ext_data=ext_data),
                         body, receipts, [self._encoding(tx) for tx in txs])
        header = attrs.evolve(header, state_root=state_root(parent.state_root, header.tx_root,
                                                            header.receipt_root))
        header_rlp = flavour.encode_header(header)
        raw = block_bytes(header_rlp, flavour.encode_body(body))
        block_id = keccak256(header_rlp)
        self._chain.remember_header(block_id, header)
        return CChainBlock(self, block_id, raw, header,
                           header_end=first_item_offset(raw) + len(header_rlp), body=body,
                           receipts=receipts, built=True)

    def _encoding(self, tx: Transaction) -> bytes:
        """A transaction's canonical encoding, remembered for the transactions seen lately
        (as a node's transaction pool keeps each transaction's bytes)."""
        memo = self._encodings
        found = memo.get(tx)
        if found is None:
            found = memo[tx] = tx.encode()
            if len(memo) > _MEMO_SIZE:
                memo.popitem(last=False)
        return found

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
                parent = self._processing.get(block.parent_id)
                if parent is not None:
                    parent_number, parent_time = parent.height, parent.timestamp
                else:
                    last = self._chain.last_accepted(snap)
                    if block.parent_id != last:
                        raise InvalidBlock(f"block {block.id.hex()}: parent "
                                           f"{block.parent_id.hex()} is neither processing "
                                           "nor the last accepted block")
                    parent_header = self._chain.stored_header(
                        snap, self._chain.number_of(snap, last), last)
                    parent_number, parent_time = parent_header.number, parent_header.time
            check_header_rules(block.header, parent_number=parent_number,
                               parent_time=parent_time, now=self._clock(),
                               gas_limit=None if self._replay else GAS_LIMIT)
            self._check_body(block)
            block._status = BlockStatus.PROCESSING
            self._processing[block.id] = block
            self._chain.remember_header(block.id, block.header)

    def _is_accepted_copy(self, snap: ReadSnapshot, block: CChainBlock) -> bool:
        """Whether ``block`` is an accepted block (same ID, same bytes); ``InvalidBlock`` for
        other bytes under an accepted block's ID."""
        number = self._chain.accepted_number(snap, block.id)
        if number is None:
            return False
        header = rawdb.read_header_rlp(snap, self._schema, number, block.id)
        body = rawdb.read_body_rlp(snap, self._schema, number, block.id)
        if header is not None and body is not None and block_bytes(header, body) == block._raw:
            return True
        raise InvalidBlock(f"block {block.id.hex()}: bytes differ from the accepted block "
                           "with this ID")

    def _check_body(self, block: CChainBlock) -> None:
        """The body rules, cheapest first, so that hostile bytes cost little to refuse: the
        rules of the body as received (:func:`~vmstack.cchain.rules.check_received_body`:
        sizes, decode, transaction rules, the header's commitments to the body); then that
        the header commits to what executing the block produces: gas used, receipts root
        and bloom (:func:`check_receipts_commitments`; not when replaying); and last, that
        every sender recovers (:meth:`_check_senders`), the costly part."""
        spans = dict(zip((f.name for f in self._flavour.body_fields), block._body_spans(),
                         strict=False))
        where = f"block {block.id.hex()}"
        try:
            body, encodings = check_received_body(block.header, block._raw, spans,
                                                  lambda: block.body, chain_id=self._chain_id)
            if not self._replay:
                check_receipts_commitments(block.header,
                                           execute_transactions(body.transactions))
        except InvalidBlock as error:
            raise InvalidBlock(f"{where}: {error.reason}") from None
        self._check_senders(block, encodings, where)

    def _check_senders(self, block: CChainBlock, encodings: Sequence[bytes],
                       where: str) -> None:
        """Every transaction's sender recovers (what executing the block would need first),
        so an accepted block always restores. A sender recovered once is remembered by the
        transaction's encoding: a node sees most transactions twice (mempool, then block)."""
        recovered = self._recovered
        for index, (encoding, tx) in enumerate(zip(encodings, block.transactions,
                                                   strict=True)):
            if encoding in recovered:
                recovered.move_to_end(encoding)
                continue
            try:
                recovered[encoding] = tx.sender()
            except InvalidBlock as error:
                raise InvalidBlock(f"{where}: transaction {index}: {error.reason}") from None
            if len(recovered) > _MEMO_SIZE:
                recovered.popitem(last=False)

    def _accept(self, block: CChainBlock) -> None:
        with self._lock:
            if block._status is BlockStatus.ACCEPTED:
                return
            if block._status is not BlockStatus.PROCESSING:
                raise InvalidBlock(f"block {block.id.hex()} is {block._status.value}: only a "
                                   "verified block can be accepted")
            number = block.height
            with self._store.snapshot() as snap:
                if block.parent_id != self._chain.last_accepted(snap):
                    raise InvalidBlock(f"block {block.id.hex()}: its parent is not the last "
                                       "accepted block")
                settled_before = self._chain.settled_number(snap)
                integrity_start = self._chain.integrity_start(snap)
                # Heights that become settled with this block: those that lag behind it
                # (and, after a restart with a shorter lag, any left unsettled before).
                stop = number if self._settle_lag == 0 else number - self._settle_lag + 1
                settling = [self._chain.settlement(snap, height, integrity_start)
                            for height in range(settled_before + 1, stop)]
            receipts_rlp = None
            if self._settle_lag == 0:
                receipts = block._receipts
                if receipts is None:
                    receipts = execute_transactions(block.transactions)
                receipts_rlp = encode_receipts(receipts)
            schema = self._schema
            with self._store.write_batch() as batch:
                self._write_accepted(batch, block)
                rawdb.write_integrity(
                    batch, schema, number, block.id, rawdb.checksum(block._raw),
                    None if receipts_rlp is None else rawdb.checksum(receipts_rlp))
                if receipts_rlp is not None:
                    rawdb.write_receipts(batch, schema, number, block.id, receipts_rlp)
                if integrity_start is None:
                    rawdb.write_integrity_start(batch, schema, number)
                for settled in settling:
                    settled.write(batch, schema)
                if receipts_rlp is not None:
                    rawdb.write_last_settled_hash(batch, schema, block.id)
                elif settling:
                    rawdb.write_last_settled_hash(batch, schema, settling[-1].block_hash)
            block._status = BlockStatus.ACCEPTED
            self._processing.pop(block.id, None)
            if receipts_rlp is not None:
                self._chain.settle_cache(number)
            elif settling:
                self._chain.settle_cache(settling[-1].number)

    def _write_accepted(self, batch: KeyWriter, block: CChainBlock) -> None:
        """Header, body, number and canonical entries and the head pointers of an accepted
        block (the caller adds receipts and integrity entries to the same batch)."""
        schema, number, block_id = self._schema, block.height, block.id
        rawdb.write_block(batch, schema, number, block_id, block.header_rlp(), block.body_rlp())
        rawdb.write_canonical_hash(batch, schema, number, block_id)
        rawdb.write_last_accepted_hash(batch, schema, block_id)
        rawdb.write_head_header_hash(batch, schema, block_id)
        rawdb.write_head_fast_block_hash(batch, schema, block_id)

    def _reject(self, block: CChainBlock) -> None:
        with self._lock:
            if block._status is BlockStatus.ACCEPTED:
                raise InvalidBlock(f"block {block.id.hex()} is accepted and cannot be "
                                   "rejected")
            if block._status is BlockStatus.REJECTED:
                return
            block._status = BlockStatus.REJECTED
            self._processing.pop(block.id, None)
            if self._preferred == block.id:
                self._preferred = None
            if block._built:
                self._mempool.extendleft(reversed(block.transactions))
                body = block.body
                if body.ext_data:
                    self._ext_data.appendleft(body.ext_data)
                if body.withdrawals:
                    self._withdrawals.appendleft(body.withdrawals)

    def __repr__(self) -> str:
        return (f"CChainVM({self._flavour.name}, chain {self._chain_id}, "
                f"{len(self._processing)} processing, settle_lag={self._settle_lag})")
