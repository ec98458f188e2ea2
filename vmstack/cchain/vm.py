"""``CChainVM``: the bottom of the stack, a C-chain VM whose blocks live in a key-value store.

Storage. Every accepted block is kept the way go-ethereum's rawdb keeps it (header RLP, body
RLP, number and canonical entries, head pointers, and receipts once settled; see
:mod:`vmstack.cchain.rawdb`), so a coreth database can be opened as it is. ALL persistent
state is in the store: two ``CChainVM`` objects over one store (a transition layer's pre and
post VMs) see each other's accepted blocks, because the last accepted block is read through
the store on each use, never kept in memory where it could go stale. Processing blocks
(verified, undecided) are the one thing an instance keeps to itself, in memory.

Two ways to serve a block:

- The slow path, :meth:`CChainVM.get_block`, is what a faithful VM does: find the number,
  check the block is canonical, read header and body, decode them, check the header hashes
  to its key, restore the execution artifacts of a settled block (read and decode its
  receipts, derive their derived fields, recover every sender with secp256k1 public-key
  recovery) and re-encode the block to produce its bytes. Nothing is skipped and nothing is
  slowed down on purpose: it is the honest serial baseline.
- The fast path, :meth:`CChainVM.get_ancestors`, reads within ONE store snapshot, per block:
  the header and body RLP (zero-copy views on LMDB), the block bytes stitched by
  :func:`~vmstack.cchain.block_bytes`, the parent hash read in place from the header bytes,
  and the canonical check, through the :class:`~vmstack.cchain.cache.CanonicalHashCache` for
  settled heights (immutable) and from the store for the others (a reorg can still change
  those, so they are never cached). The number of each parent is its child's minus one.
  The budget is :class:`~vmstack.batching.AncestorBudget` walked by
  :func:`~vmstack.batching.walk_ancestors`.

Corruption is never served as data, on either path: a stored value that fails its check
raises :class:`~vmstack.errors.StoreCorrupted` (a key that is simply missing raises
:class:`~vmstack.errors.BlockNotFound`). Each accept writes an integrity entry per block (a
crc32 of the block RLP, and of the receipts RLP once settled); both paths check the block
checksum, the slow path also the header hash and the receipts checksum. A canonical entry
that names a block the store does not have is corruption, not a reorg. Blocks written by
other software (a coreth database) have no integrity entry: they are served with the
structural checks only (framing of header and body, the canonical check, and on the slow
path the header hash and a strict decode); the ``vmstack-sum-from`` marker, written with
the first block this VM accepts, says from which height on an entry must exist; it carries
its own checksum and may not go missing while entries exist. The head pointers are checked
against the canonical entries (the last accepted block is the canonical one at its height,
with none above it). Each path
checks what it reads: the fast path
reads neither receipts nor (for a parent, whose number is its child's minus one) number
entries, so damage to those shows on the slow path only, while the fast path goes on
serving the right bytes. On an undamaged store both paths give the same answers.

Parsing and verifying. ``parse_block`` is strict but lazy: it hashes the header slice (the
ID), decodes the header, and checks the framing of the body fields; transactions are decoded
when ``verify`` needs them. ``batched_parse_block`` is ``parse_block`` per element (there is
no cheaper correct parse) with the batch rules of ARCHITECTURE.md, section 3. ``verify``
checks, cheapest first so that hostile bytes cost little to refuse: the parent (processing
here, or the last accepted block), the height, the timestamp (not before the parent's, at most
:data:`MAX_FUTURE_SECONDS` ahead of the clock), the chain's gas limit and the gas used within
it; the counts of transactions (at most ``gas_limit // TX_BASE_GAS``), uncles and withdrawals,
read from the framing before anything is decoded; each transaction's chain ID, signature
values and intrinsic gas (:func:`check_transaction_rules`); that the header commits to the
body as received: transactions, uncles and withdrawals roots, and on Avalanche the
ExtDataHash (the zero hash over empty extData before Apricot Phase 1), no uncles and body
version 0; that it commits to the receipts the block's execution produces: gas used,
receipts root and bloom (:func:`check_receipts_commitments`); and last, that every sender
recovers. Bytes that carry a known block's ID but other contents are refused. ``accept`` is
one atomic write batch.

Settling. A block is settled once its receipts are written. With ``settle_lag=0`` that
happens when it is accepted; with ``settle_lag=k`` a block's receipts are written when the
block ``k`` heights above it is accepted (asynchronous execution), in that block's accept
batch, and the last-settled pointer (geth's ``LastFinalized``) moves with them. A store
without that pointer (coreth's) counts every accepted block as settled, as coreth executes
each block when it accepts it.

Execution model. The VM does not run EVM code: :func:`execute_transactions` derives each
transaction's receipt deterministically from the transaction alone (intrinsic gas plus a
modelled execution cost, a failed status when the gas limit does not cover it, one log per
successful contract call), which gives receipts of realistic shape and cost to restore.
"""

from __future__ import annotations

import enum
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
from vmstack.cchain.cache import CanonicalHashCache
from vmstack.cchain.codec import (
    AVALANCHE,
    Flavour,
    decode_receipts,
    derive_receipts,
    encode_receipts,
    ext_data_hash,
    uncles_hash,
)
from vmstack.cchain.crypto import SECP256K1_HALF_N, SECP256K1_N, keccak256
from vmstack.cchain.genesis import GAS_LIMIT, genesis_block, new_header, state_root
from vmstack.cchain.rlpbytes import (
    block_bytes,
    header_parent_hash,
    header_slice,
    list_prefix,
    read_prefix,
)
from vmstack.cchain.tries import derive_root, receipts_root, withdrawals_root
from vmstack.cchain.types import (
    ZERO_HASH,
    AccessListTx,
    AnyHeader,
    AvalancheHeader,
    BlobTx,
    Block,
    Body,
    DynamicFeeTx,
    LegacyTx,
    Log,
    Receipt,
    SetCodeTx,
    Transaction,
    Withdrawal,
    logs_bloom,
)
from vmstack.clock import Clock
from vmstack.errors import BlockNotFound, InvalidBlock, StoreCorrupted
from vmstack.store.base import KeyReader, KeyValueStore, KeyWriter, ReadSnapshot

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
#: How far (seconds) a block's timestamp may run ahead of the VM's clock (coreth's
#: ``maxFutureBlockTime``).
MAX_FUTURE_SECONDS: Final = 10
#: The intrinsic gas of the cheapest transaction (a plain transfer). With the block's gas
#: limit it bounds how many transactions a valid block carries, and so how many senders
#: ``verify`` may have to recover: ``gas_limit // TX_BASE_GAS``.
TX_BASE_GAS: Final = 21_000
#: The most uncles an (Ethereum-flavour) block may carry, as geth allows.
MAX_UNCLES: Final = 2
#: The most withdrawals a block may carry (the consensus layer's
#: ``MAX_WITHDRAWALS_PER_PAYLOAD``).
MAX_WITHDRAWALS: Final = 16

_LIST_FIELDS = frozenset({"transactions", "uncles", "withdrawals"})
_TRANSACTION_TYPES = (LegacyTx, AccessListTx, DynamicFeeTx, BlobTx, SetCodeTx)
_MEMO_SIZE = 4096
_checksum = rawdb.checksum
_MAX_NUMBER = 2**64 - 1


class BlockStatus(enum.Enum):
    """Where a block stands: parsed or built but not verified, verified and undecided
    (processing), accepted, or rejected."""

    UNVERIFIED = "unverified"
    PROCESSING = "processing"
    ACCEPTED = "accepted"
    REJECTED = "rejected"


# --- the execution model ----------------------------------------------------------------


def intrinsic_gas(tx: Transaction) -> int:
    """The gas a transaction pays before execution (Istanbul / Berlin rules): 21,000, plus
    32,000 for a contract creation, 4 per zero and 16 per non-zero data byte, and 2,400 per
    access-list address and 1,900 per storage key."""
    data = tx.data
    zeros = data.count(0)
    gas = TX_BASE_GAS + 4 * zeros + 16 * (len(data) - zeros)
    if tx.to is None:
        gas += 32_000
    for entry in getattr(tx, "access_list", ()):
        gas += 2_400 + 1_900 * len(entry.storage_keys)
    return gas


def _execution_gas(tx: Transaction) -> int:
    """The modelled cost of running a transaction's code: code deposit for a creation, a
    call overhead plus a per-byte cost for a contract call, nothing for a plain transfer."""
    if tx.to is None:
        return 200 * len(tx.data)
    if tx.data:
        return 5_000 + 64 * len(tx.data)
    return 0


def execute_transactions(transactions: Sequence[Transaction]) -> tuple[Receipt, ...]:
    """The receipts of ``transactions`` under the execution model (a pure function).

    A transaction whose gas limit covers its intrinsic and modelled execution gas succeeds
    (status 1) and uses exactly that; one that does not fails (status 0) and uses its whole
    gas limit. A successful call with at least 4 bytes of data emits one log from the called
    contract: its topic is the 4-byte selector (left-padded to 32 bytes), its data the rest of
    the call data. Cumulative gas
    runs over the block, and ``tx_type`` is set so the receipts root can be computed.
    """
    receipts: list[Receipt] = []
    cumulative = 0
    for tx in transactions:
        needed = intrinsic_gas(tx) + _execution_gas(tx)
        logs: tuple[Log, ...] = ()
        if needed <= tx.gas:
            status, used = 1, needed
            if tx.to is not None and len(tx.data) >= 4:
                topic = bytes(28) + tx.data[:4]
                logs = (Log(address=tx.to, topics=(topic,), data=tx.data[4:]),)
        else:
            status, used = 0, tx.gas
        cumulative += used
        receipts.append(Receipt(status=status, cumulative_gas_used=cumulative, logs=logs,
                                tx_type=tx.TYPE, bloom=logs_bloom(logs)))
    return tuple(receipts)


# --- rules ------------------------------------------------------------------------------


def check_header_rules(
    header: AnyHeader, *, parent_number: int, parent_time: int, now: float,
    gas_limit: int | None = GAS_LIMIT,
) -> None:
    """The header rules a child must meet against its parent (``InvalidBlock`` naming the
    rule): height is the parent's plus one; timestamp is at or after the parent's and at
    most :data:`MAX_FUTURE_SECONDS` ahead of ``now``; the gas limit is the chain's fixed
    ``gas_limit`` (as on the C-chain since Cortina; ``None`` takes the header's as given);
    gas used is within the gas limit."""
    if header.number != parent_number + 1:
        raise InvalidBlock(f"block height {header.number} is not its parent's "
                           f"{parent_number} plus one")
    if header.time < parent_time:
        raise InvalidBlock(f"block timestamp {header.time} is before its parent's "
                           f"{parent_time}")
    if header.time > now + MAX_FUTURE_SECONDS:
        raise InvalidBlock(f"block timestamp {header.time} is more than "
                           f"{MAX_FUTURE_SECONDS} s ahead of the clock ({now:.0f})")
    if gas_limit is not None and header.gas_limit != gas_limit:
        raise InvalidBlock(f"block gas limit {header.gas_limit} is not the chain's "
                           f"{gas_limit}")
    if header.gas_used > header.gas_limit:
        raise InvalidBlock(f"block gas used {header.gas_used} exceeds its gas limit "
                           f"{header.gas_limit}")


def check_transaction_rules(transactions: Sequence[Transaction], *, chain_id: int,
                            gas_limit: int) -> None:
    """The rules every transaction of a block meets before any signature work is done
    (``InvalidBlock`` naming the transaction and the rule), transaction by transaction:

    - it is signed for ``chain_id``: a typed transaction carries it; a legacy one has
      ``v`` 27 or 28 (unprotected, which consensus still accepts) or
      ``chain_id * 2 + 35`` or ``+ 36`` (EIP-155), and any other ``v`` is refused;
    - its signature values are in range: y parity 0 or 1, ``0 < r < n`` and
      ``0 < s <= n / 2`` (low s, the Homestead rule) on secp256k1;
    - its gas limit covers its :func:`intrinsic_gas` and is within the block's
      ``gas_limit``;
    - the intrinsic gas of the transactions so far is within ``gas_limit``, so a block
      that could not pay for its own transactions is refused as soon as that shows.

    Each check is arithmetic on the decoded fields (the intrinsic gas reads the data
    once), so the whole is linear in the block's size.
    """
    total = 0
    for index, tx in enumerate(transactions):
        where = f"transaction {index}"
        if isinstance(tx, LegacyTx):
            v = tx.v
            if v not in (27, 28) and v not in (chain_id * 2 + 35, chain_id * 2 + 36):
                if v >= 35:
                    raise InvalidBlock(f"{where} is signed for chain {(v - 35) // 2}, not "
                                       f"{chain_id} (v = {v})")
                raise InvalidBlock(f"{where}: legacy v = {v} is neither 27/28 nor EIP-155")
        else:
            if tx.chain_id != chain_id:
                raise InvalidBlock(f"{where} is signed for chain {tx.chain_id}, not {chain_id}")
            if tx.y_parity not in (0, 1):
                raise InvalidBlock(f"{where}: signature y parity {tx.y_parity} is not 0 or 1")
        if not 0 < tx.r < SECP256K1_N:
            raise InvalidBlock(f"{where}: signature r is out of range")
        if not 0 < tx.s <= SECP256K1_HALF_N:
            raise InvalidBlock(f"{where}: signature s is out of range (zero or above n/2)")
        needed = intrinsic_gas(tx)
        if tx.gas < needed:
            raise InvalidBlock(f"{where}: gas limit {tx.gas} is below its intrinsic gas "
                               f"{needed}")
        if tx.gas > gas_limit:
            raise InvalidBlock(f"{where}: gas limit {tx.gas} exceeds the block's {gas_limit}")
        total += needed
        if total > gas_limit:
            raise InvalidBlock(f"the intrinsic gas of transactions 0..{index} ({total}) "
                               f"exceeds the block gas limit {gas_limit}")


def check_receipts_commitments(header: AnyHeader, receipts: Sequence[Receipt]) -> None:
    """The header commits to the receipts its block's execution produced: its gas used is
    their cumulative gas, its receipts root is theirs and its bloom is the union of theirs
    (``InvalidBlock`` naming the field that differs)."""
    gas_used = receipts[-1].cumulative_gas_used if receipts else 0
    if header.gas_used != gas_used:
        raise InvalidBlock(f"block gas used {header.gas_used} is not the {gas_used} its "
                           "transactions use")
    if header.receipt_root != receipts_root(receipts):
        raise InvalidBlock("receipts root does not match the receipts of the block's "
                           "execution")
    bloom = 0
    for receipt in receipts:
        if receipt.logs:
            bloom |= int.from_bytes(receipt.bloom or logs_bloom(receipt.logs), "big")
    if header.bloom != bloom.to_bytes(256, "big"):
        raise InvalidBlock("logs bloom does not match the receipts of the block's execution")


# --- blocks -----------------------------------------------------------------------------


@attrs.frozen(slots=True)
class _Span:
    """Where one first-level item of a block's RLP lies: ``raw[start:end]`` is its whole
    encoding, ``raw[payload:end]`` its payload."""

    start: int
    payload: int
    end: int
    is_list: bool


def _outer_start(raw: bytes) -> int:
    """Offset of the first item in an RLP list whose framing is already checked."""
    first = raw[0]
    return 1 if first < 0xF8 else 1 + first - 0xF7


def _frame_body(flavour: Flavour, raw: bytes, header_end: int) -> tuple[_Span, ...]:
    """Check the framing of a block's body fields (after the header) against ``flavour``:
    their count, which are lists and which strings, and the string fields' values (version
    and extData are cheap to decode). Transactions, uncles and withdrawals are left for a
    lazy decode. Returns where each field lies."""
    fields = flavour.body_fields
    spans: list[_Span] = []
    offset, end = header_end, len(raw)
    while offset < end:
        if len(spans) == len(fields):
            raise InvalidBlock(f"block has more than {len(fields)} body fields")
        field = fields[len(spans)]
        is_list, payload, length = read_prefix(raw, offset, end)
        if is_list != (field.name in _LIST_FIELDS):
            kind = "list" if field.name in _LIST_FIELDS else "string"
            raise InvalidBlock(f"block body field {field.name} must be an RLP {kind}")
        if not is_list:
            field.decode(flavour, raw[payload:payload + length])
        spans.append(_Span(offset, payload, payload + length, is_list))
        offset = payload + length
    required = sum(1 for field in fields if not field.optional)
    if len(spans) < required:
        raise InvalidBlock(f"block has {len(spans)} body fields, expected at least {required}")
    return tuple(spans)


def _item_encodings(raw: bytes, span: _Span, limit: int | None = None,
                    what: str = "items") -> list[bytes]:
    """The encodings of the items of the list at ``span``, as a trie stores them: a list
    item (a legacy transaction, a withdrawal) as it stands, a string item (a typed
    transaction) as its payload. With a ``limit``, a list of more items is
    ``InvalidBlock``, found after reading at most ``limit + 1`` prefixes."""
    encodings: list[bytes] = []
    offset = span.payload
    while offset < span.end:
        if limit is not None and len(encodings) == limit:
            raise InvalidBlock(f"block carries more than {limit} {what}")
        is_list, payload, length = read_prefix(raw, offset, span.end)
        encodings.append(raw[offset:payload + length] if is_list
                         else raw[payload:payload + length])
        offset = payload + length
    return encodings


class CChainBlock:
    """A block of :class:`CChainVM`: its bytes, its decoded header, and its body decoded on
    demand.

    ``verify``, ``accept`` and ``reject`` are decided by the VM. A block served by
    :meth:`CChainVM.get_block` from the store also carries its restored execution
    artifacts: ``senders`` always, ``receipts`` (with derived fields) once settled.
    """

    __slots__ = ("_body", "_built", "_header", "_header_end", "_id", "_raw", "_receipts",
                 "_senders", "_spans", "_status", "_vm")

    def __init__(
        self,
        vm: CChainVM,
        block_id: bytes,
        raw: bytes,
        header: AnyHeader,
        *,
        header_end: int,
        spans: tuple[_Span, ...] | None = None,
        body: Body | None = None,
        status: BlockStatus = BlockStatus.UNVERIFIED,
        receipts: tuple[Receipt, ...] | None = None,
        senders: tuple[bytes, ...] | None = None,
        built: bool = False,
    ) -> None:
        self._vm = vm
        self._id = block_id
        self._raw = raw
        self._header = header
        self._header_end = header_end
        self._spans = spans
        self._body = body
        self._status = status
        self._receipts = receipts
        self._senders = senders
        self._built = built

    @property
    def id(self) -> bytes:
        """The block hash: keccak256 of the header RLP."""
        return self._id

    @property
    def hash(self) -> bytes:
        """The block hash (the same 32 bytes as :attr:`id`), as a decoded block names it."""
        return self._id

    @property
    def parent_id(self) -> bytes:
        return self._header.parent_hash

    @property
    def height(self) -> int:
        return self._header.number

    @property
    def timestamp(self) -> int:
        return self._header.time

    def __bytes__(self) -> bytes:
        return self._raw

    @property
    def status(self) -> BlockStatus:
        return self._status

    @property
    def header(self) -> AnyHeader:
        return self._header

    @property
    def body(self) -> Body:
        """The decoded body (strict; decoded on first use, ``InvalidBlock`` if malformed)."""
        if self._body is None:
            self._body = self._vm.flavour.decode_body(self.body_rlp())
        return self._body

    @property
    def transactions(self) -> tuple[Transaction, ...]:
        return self.body.transactions

    @property
    def block(self) -> Block:
        """The block as a codec record."""
        return Block(self._header, self.body, hash=self._id)

    @property
    def receipts(self) -> tuple[Receipt, ...] | None:
        """Receipts with derived fields, for a settled block read by ``get_block``; the
        modelled receipts of a block built here; ``None`` otherwise."""
        return self._receipts

    @property
    def senders(self) -> tuple[bytes, ...] | None:
        """The recovered senders, for a block read from the store by ``get_block``."""
        return self._senders

    def header_rlp(self) -> bytes:
        """The header RLP, as rawdb stores it."""
        return self._raw[_outer_start(self._raw):self._header_end]

    def body_rlp(self) -> bytes:
        """The body RLP, as rawdb stores it: a list of the block's items after the header."""
        rest = self._raw[self._header_end:]
        return list_prefix(len(rest)) + rest

    def _body_spans(self) -> tuple[_Span, ...]:
        if self._spans is None:
            self._spans = _frame_body(self._vm.flavour, self._raw, self._header_end)
        return self._spans

    def verify(self) -> None:
        self._vm._verify(self)

    def accept(self) -> None:
        self._vm._accept(self)

    def reject(self) -> None:
        self._vm._reject(self)

    def __repr__(self) -> str:
        return (f"CChainBlock(height={self.height}, id={self._id.hex()[:16]}..., "
                f"{self._status.value})")


def _commit(header: AnyHeader, body: Body, receipts: Sequence[Receipt],
            tx_encodings: Sequence[bytes]) -> AnyHeader:
    """``header`` committing to ``body`` and ``receipts``: what the flavour's ``seal`` sets
    (transactions, receipts and withdrawals roots, uncle hash, bloom, ExtDataHash), from the
    transactions' known encodings and with the blooms combined as integers, since building
    blocks is the generator's hot loop."""
    changes: dict[str, object] = {
        "tx_root": derive_root(tx_encodings),
        "receipt_root": receipts_root(receipts),
        "uncle_hash": uncles_hash(body.uncles),
    }
    bloom = 0
    for receipt in receipts:
        if receipt.logs:
            bloom |= int.from_bytes(receipt.bloom or logs_bloom(receipt.logs), "big")
    changes["bloom"] = bloom.to_bytes(256, "big")
    if body.withdrawals is not None:
        changes["withdrawals_hash"] = withdrawals_root(body.withdrawals)
    if isinstance(header, AvalancheHeader) and body.ext_data is not None:
        changes["ext_data_hash"] = ext_data_hash(body.ext_data)
    return attrs.evolve(header, **changes)  # type: ignore[arg-type]


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
        self._clock = clock
        self._chain_id = chain_id
        self._settle_lag = settle_lag
        self._replay = bool(replay)
        self._cache = CanonicalHashCache(cache_size)
        self._cache_lock = threading.Lock()
        self._lock = threading.RLock()
        self._processing: dict[bytes, CChainBlock] = {}
        self._preferred: bytes | None = None
        self._mempool: deque[Transaction] = deque()
        self._ext_data: deque[bytes] = deque()
        self._withdrawals: deque[tuple[Withdrawal, ...]] = deque()
        self._encodings: OrderedDict[Transaction, bytes] = OrderedDict()
        self._recovered: OrderedDict[bytes, bytes] = OrderedDict()
        self._headers: OrderedDict[bytes, AnyHeader] = OrderedDict()
        self._memo_lock = threading.Lock()
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
                self._last_accepted(snap)
        if last is None:
            self._write_genesis(self._genesis_bytes(genesis, genesis_timestamp))
        elif genesis is not None and existing != self.parse_block(genesis).id:
            raise ValueError("the store holds a chain with another genesis block")
        with self._store.snapshot() as snap:
            self._settle_cache(self._settled_number(snap))

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
        return self._cache

    @property
    def settle_lag(self) -> int:
        return self._settle_lag

    @property
    def clock(self) -> Clock:
        return self._clock

    def processing(self) -> tuple[CChainBlock, ...]:
        """The blocks this instance has verified and not yet seen decided."""
        return tuple(self._processing.values())

    # --- reading the store -----------------------------------------------------------------

    def _last_accepted(self, reader: KeyReader) -> bytes:
        """The last accepted block pointer, checked against the chain: it names the
        canonical block at its height, and no block is accepted above it."""
        found = rawdb.read_last_accepted_hash(reader, self._schema)
        if found is None:
            raise StoreCorrupted("the store has no last accepted block pointer")
        number = self._head_number(reader, found, "last accepted")
        if number < _MAX_NUMBER and rawdb.read_canonical_hash(reader, self._schema,
                                                              number + 1) is not None:
            raise StoreCorrupted(f"the last accepted pointer names block {found.hex()} at "
                                 f"{number}, but height {number + 1} is accepted too")
        return found

    def _number_of(self, reader: KeyReader, block_hash: bytes) -> int:
        number = rawdb.read_header_number(reader, self._schema, block_hash)
        if number is None:
            raise StoreCorrupted(f"a head pointer names block {block_hash.hex()}, which has "
                                 "no number entry")
        return number

    def _head_number(self, reader: KeyReader, block_hash: bytes, pointer: str) -> int:
        """The height of the block a head pointer names, checked: it has a number entry and
        is the canonical block there (else the pointer or those entries are damaged)."""
        number = self._number_of(reader, block_hash)
        if rawdb.read_canonical_hash(reader, self._schema, number) != block_hash:
            raise StoreCorrupted(f"the {pointer} pointer names block {block_hash.hex()}, "
                                 f"which is not the canonical block at {number}")
        return number

    def _settled_number(self, reader: KeyReader) -> int:
        """The height of the last settled block; without a last-settled pointer (a coreth
        database), the last accepted block's."""
        settled = rawdb.read_last_settled_hash(reader, self._schema)
        if settled is None:
            return self._number_of(reader, self._last_accepted(reader))
        return self._head_number(reader, settled, "last settled")

    def _integrity_start(self, reader: ReadSnapshot) -> int | None:
        """The first height written with integrity entries (``None`` for a store that has
        none, such as a coreth database). The marker carries its own checksum; a store
        with integrity entries but no marker is damaged (``StoreCorrupted``), as checks
        must never be turned off by losing one key."""
        start = rawdb.read_integrity_start(reader, self._schema)
        if start is None and rawdb.has_integrity_entries(reader, self._schema):
            raise StoreCorrupted("the store has integrity entries but no integrity-start "
                                 "marker")
        return start

    def _settle_cache(self, number: int) -> None:
        with self._cache_lock:
            if number > self._cache.settled_height:
                self._cache.settle(number)

    def _stored_header(self, reader: KeyReader, number: int, block_hash: bytes
                       ) -> AnyHeader:
        """The decoded header of a stored block, checked against its hash."""
        known = self._headers.get(block_hash)
        if known is not None and known.number == number:
            return known
        data = rawdb.read_header_rlp(reader, self._schema, number, block_hash)
        if data is None:
            raise StoreCorrupted(f"block {block_hash.hex()} at {number} has no header")
        if keccak256(data) != block_hash:
            raise StoreCorrupted(f"the stored header of block {block_hash.hex()} at {number} "
                                 "does not hash to its key")
        try:
            return self._flavour.decode_header(data)
        except InvalidBlock as error:
            raise StoreCorrupted(f"the stored header of block {block_hash.hex()} is "
                                 f"malformed: {error.reason}") from None

    def _not_canonical(self, reader: KeyReader, number: int, block_id: bytes,
                       canonical: bytes | memoryview | None) -> Exception:
        """The error for a block that the canonical entry at its height does not name: a
        block the store has is merely not canonical; a block it lacks means the entry is
        damaged."""
        if canonical is None:
            return BlockNotFound(f"block {block_id.hex()} at {number} is not accepted")
        if len(canonical) != rawdb.HASH_LENGTH:
            return StoreCorrupted(f"the canonical entry at {number} is {len(canonical)} "
                                  "bytes, not 32")
        other = bytes(canonical)
        if reader.has(self._schema.header_key(number, other)):
            return BlockNotFound(f"block {block_id.hex()} is not the accepted block at "
                                 f"{number}")
        return StoreCorrupted(f"the canonical entry at {number} names {other.hex()}, a block "
                              "the store does not have")

    def _accepted_number(self, reader: KeyReader, block_id: bytes) -> int | None:
        """The height of ``block_id`` if it is an accepted block, else ``None``."""
        number = rawdb.read_header_number(reader, self._schema, block_id)
        if number is None:
            return None
        canonical = rawdb.read_canonical_hash(reader, self._schema, number)
        return number if canonical == block_id else None

    # --- ChainVM: reading ------------------------------------------------------------------

    def last_accepted(self) -> bytes:
        """The last accepted block's ID, read from the store (another VM over the same store
        may have moved it), in one snapshot, as its checks against the chain need."""
        with self._store.snapshot() as snap:
            return self._last_accepted(snap)

    def last_settled(self) -> bytes:
        """The last settled block's ID (receipts written): the last accepted one's in a store
        without a last-settled pointer."""
        found = rawdb.read_last_settled_hash(self._store, self._schema)
        return self.last_accepted() if found is None else found

    def get_block_id_at_height(self, height: int) -> bytes:
        """The ID of the accepted block at ``height``; ``BlockNotFound`` above the last
        accepted height. Settled heights go through the canonical hash cache."""
        if isinstance(height, bool) or not isinstance(height, int) or height < 0:
            raise ValueError(f"a height is a non-negative int, got {height!r}")
        if height > _MAX_NUMBER:
            raise BlockNotFound(f"no block at height {height}")
        cache = self._cache
        if height <= cache.settled_height:
            cached = cache.lookup(height)
            if cached is not None:
                return cached
        with self._store.snapshot() as snap:
            found = rawdb.read_canonical_hash(snap, self._schema, height)
            if found is None:
                raise BlockNotFound(f"no accepted block at height {height}")
            if rawdb.read_header_number(snap, self._schema, found) != height:
                raise StoreCorrupted(f"the canonical entry at height {height} names block "
                                     f"{found.hex()}, which the store does not have there")
        self._remember(height, found)
        return found

    def _remember(self, number: int, block_hash: bytes | memoryview) -> None:
        try:
            self._cache.remember(number, block_hash)
        except ValueError as error:
            raise StoreCorrupted(f"the canonical entry at settled height {number} changed: "
                                 f"{error}") from None

    def get_block(self, block_id: bytes) -> CChainBlock:
        """A processing block from memory, or an accepted one restored from the store the
        way a faithful VM restores it (see the module docstring). ``BlockNotFound`` for
        anything else; ``StoreCorrupted`` for stored data that fails a check."""
        block_id = check_block_id(block_id)
        known = self._processing.get(block_id)
        if known is not None:
            return known
        schema = self._schema
        with self._store.snapshot() as snap:
            number = rawdb.read_header_number(snap, schema, block_id)
            if number is None:
                raise BlockNotFound(f"block {block_id.hex()} is not known")
            canonical = rawdb.read_canonical_hash(snap, schema, number)
            if canonical != block_id:
                raise self._not_canonical(snap, number, block_id, canonical)
            header_rlp = rawdb.read_header_rlp(snap, schema, number, block_id)
            body_rlp = rawdb.read_body_rlp(snap, schema, number, block_id)
            if header_rlp is None or body_rlp is None:
                raise BlockNotFound(f"block {block_id.hex()} at {number} is missing its "
                                    f"{'header' if header_rlp is None else 'body'}")
            header_rlp, body_rlp = bytes(header_rlp), bytes(body_rlp)
            receipts_rlp: bytes | None = None
            if number <= self._settled_number(snap):
                stored = rawdb.read_receipts_rlp(snap, schema, number, block_id)
                if stored is None:
                    raise BlockNotFound(f"settled block {block_id.hex()} at {number} is "
                                        "missing its receipts")
                receipts_rlp = bytes(stored)
            integrity = self._integrity(snap, number, block_id)
        return self._restore(block_id, number, header_rlp, body_rlp, receipts_rlp, integrity)

    def _integrity(self, reader: ReadSnapshot, number: int, block_id: bytes
                   ) -> rawdb.Integrity | None:
        """The block's integrity entry; ``None`` for a block from before this VM wrote
        them; ``StoreCorrupted`` if one should exist and does not."""
        start = self._integrity_start(reader)
        if start is None or number < start:
            return None
        found = rawdb.read_integrity(reader, self._schema, number, block_id)
        if found is None:
            raise StoreCorrupted(f"block {block_id.hex()} at {number} has no integrity entry")
        return found

    def _restore(self, block_id: bytes, number: int, header_rlp: bytes, body_rlp: bytes,
                 receipts_rlp: bytes | None, integrity: rawdb.Integrity | None
                 ) -> CChainBlock:
        """Decode, check and restore a stored block: the slow path's work."""
        where = f"block {block_id.hex()} at {number}"
        if keccak256(header_rlp) != block_id:
            raise StoreCorrupted(f"the stored header of {where} does not hash to its key")
        try:
            stitched = block_bytes(header_rlp, body_rlp)
        except InvalidBlock as error:
            raise StoreCorrupted(f"the stored {where} is malformed: {error.reason}") from None
        if integrity is not None:
            if rawdb.checksum(stitched) != integrity.block:
                raise StoreCorrupted(f"the stored {where} fails its checksum")
            if receipts_rlp is not None and (integrity.receipts is None or
                                             rawdb.checksum(receipts_rlp) != integrity.receipts):
                raise StoreCorrupted(f"the stored receipts of {where} fail their checksum")
        try:
            block = self._flavour.block_from_parts(header_rlp, body_rlp, block_id)
            if block.number != number:
                raise InvalidBlock(f"its header says number {block.number}")
            senders = tuple(tx.sender() for tx in block.transactions)
            receipts = None
            if receipts_rlp is not None:
                receipts = derive_receipts(decode_receipts(receipts_rlp), block, senders)
        except InvalidBlock as error:
            raise StoreCorrupted(f"the stored {where} is malformed: {error.reason}") from None
        raw = self._flavour.encode_block(block)
        return CChainBlock(self, block_id, raw, block.header, header_end=_outer_start(raw)
                           + len(header_rlp), body=block.body, status=BlockStatus.ACCEPTED,
                           receipts=receipts, senders=senders)

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
            walk = _AncestorWalk(self, snap, processing)
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
        header_end = _outer_start(raw) + len(header)
        spans = _frame_body(self._flavour, raw, header_end)
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
                    if self._accepted_number(snap, block_id) is None:
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
        self._remember_header(block_id, header)
        return CChainBlock(self, block_id, raw, header,
                           header_end=_outer_start(raw) + len(header_rlp), body=body,
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

    def _remember_header(self, block_id: bytes, header: AnyHeader) -> None:
        """Remember a header by its hash (an immutable fact), so building and verifying the
        next block need not read and decode its parent's."""
        with self._memo_lock:
            memo = self._headers
            memo[block_id] = header
            if len(memo) > _MEMO_SIZE:
                memo.popitem(last=False)

    def _build_parent(self) -> tuple[bytes, AnyHeader]:
        preferred = self._preferred
        if preferred is not None:
            block = self._processing.get(preferred)
            if block is not None:
                return preferred, block.header
        with self._store.snapshot() as snap:
            last = self._last_accepted(snap)
            return last, self._stored_header(snap, self._number_of(snap, last), last)

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
                    last = self._last_accepted(snap)
                    if block.parent_id != last:
                        raise InvalidBlock(f"block {block.id.hex()}: parent "
                                           f"{block.parent_id.hex()} is neither processing "
                                           "nor the last accepted block")
                    parent_header = self._stored_header(snap, self._number_of(snap, last), last)
                    parent_number, parent_time = parent_header.number, parent_header.time
            check_header_rules(block.header, parent_number=parent_number,
                               parent_time=parent_time, now=self._clock(),
                               gas_limit=None if self._replay else GAS_LIMIT)
            self._check_body(block)
            block._status = BlockStatus.PROCESSING
            self._processing[block.id] = block
            self._remember_header(block.id, block.header)

    def _is_accepted_copy(self, snap: ReadSnapshot, block: CChainBlock) -> bool:
        """Whether ``block`` is an accepted block (same ID, same bytes); ``InvalidBlock`` for
        other bytes under an accepted block's ID."""
        number = self._accepted_number(snap, block.id)
        if number is None:
            return False
        header = rawdb.read_header_rlp(snap, self._schema, number, block.id)
        body = rawdb.read_body_rlp(snap, self._schema, number, block.id)
        if header is not None and body is not None and block_bytes(header, body) == block._raw:
            return True
        raise InvalidBlock(f"block {block.id.hex()}: bytes differ from the accepted block "
                           "with this ID")

    def _check_body(self, block: CChainBlock) -> None:
        """The body rules, cheapest first, so that hostile bytes cost little to refuse:

        1. sizes and structure, before anything is decoded: at most
           ``gas_limit // TX_BASE_GAS`` transactions, at most :data:`MAX_UNCLES` uncles
           (none on Avalanche), at most :data:`MAX_WITHDRAWALS` withdrawals;
        2. the body decodes strictly;
        3. the transactions' own rules and the gas they need
           (:func:`check_transaction_rules`);
        4. the header commits to the body as received (transactions root, uncle hash,
           withdrawals root; Avalanche: ExtDataHash, body version 0), computed over the
           bytes received, not over a re-encoding;
        5. the header commits to what executing the block produces: gas used, receipts
           root and bloom (:func:`check_receipts_commitments`; not when replaying);
        6. every sender recovers (:meth:`_check_senders`), the costly part, last.
        """
        header = block.header
        raw = block._raw
        spans = dict(zip((f.name for f in self._flavour.body_fields), block._body_spans(),
                         strict=False))
        where = f"block {block.id.hex()}"
        avalanche = isinstance(header, AvalancheHeader)
        gas_limit = header.gas_limit
        try:
            encodings = _item_encodings(raw, spans["transactions"],
                                        limit=gas_limit // TX_BASE_GAS, what="transactions")
            uncles = spans["uncles"]
            if avalanche and uncles.payload < uncles.end:
                raise InvalidBlock("C-chain blocks have no uncles")
            _item_encodings(raw, uncles, limit=MAX_UNCLES, what="uncles")
            withdrawals = spans.get("withdrawals")
            withdrawal_encodings = None if withdrawals is None else _item_encodings(
                raw, withdrawals, limit=MAX_WITHDRAWALS, what="withdrawals")
            body = block.body
            check_transaction_rules(body.transactions, chain_id=self._chain_id,
                                    gas_limit=gas_limit)
        except InvalidBlock as error:
            raise InvalidBlock(f"{where}: {error.reason}") from None
        if derive_root(encodings) != header.tx_root:
            raise InvalidBlock(f"{where}: transactions root does not match the header")
        if keccak256(raw[uncles.start:uncles.end]) != header.uncle_hash:
            raise InvalidBlock(f"{where}: uncle hash does not match the header")
        if isinstance(header, AvalancheHeader):
            if body.version != 0:
                raise InvalidBlock(f"{where}: body version {body.version} is not 0")
            ext = spans["ext_data"]
            committed = header.ext_data_hash
            # Before Apricot Phase 1 a header carried the zero hash over empty extData.
            pre_ap1 = committed == ZERO_HASH and not body.ext_data
            if keccak256(raw[ext.start:ext.end]) != committed and not pre_ap1:
                raise InvalidBlock(f"{where}: ExtDataHash does not match the extData")
        else:
            if (header.withdrawals_hash is None) != (withdrawal_encodings is None):
                raise InvalidBlock(f"{where}: header and body disagree on having withdrawals")
            if withdrawal_encodings is not None and (derive_root(withdrawal_encodings)
                                                     != header.withdrawals_hash):
                raise InvalidBlock(f"{where}: withdrawals root does not match the header")
        if not self._replay:
            try:
                check_receipts_commitments(header, execute_transactions(body.transactions))
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
                if block.parent_id != self._last_accepted(snap):
                    raise InvalidBlock(f"block {block.id.hex()}: its parent is not the last "
                                       "accepted block")
                settled_before = self._settled_number(snap)
                integrity_start = self._integrity_start(snap)
                # Heights that become settled with this block: those that lag behind it
                # (and, after a restart with a shorter lag, any left unsettled before).
                stop = number if self._settle_lag == 0 else number - self._settle_lag + 1
                settling = [self._settlement(snap, height, integrity_start)
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
                self._settle_cache(number)
            elif settling:
                self._settle_cache(settling[-1].number)

    def _write_accepted(self, batch: KeyWriter, block: CChainBlock) -> None:
        """Header, body, number and canonical entries and the head pointers of an accepted
        block (the caller adds receipts and integrity entries to the same batch)."""
        schema, number, block_id = self._schema, block.height, block.id
        rawdb.write_block(batch, schema, number, block_id, block.header_rlp(), block.body_rlp())
        rawdb.write_canonical_hash(batch, schema, number, block_id)
        rawdb.write_last_accepted_hash(batch, schema, block_id)
        rawdb.write_head_header_hash(batch, schema, block_id)
        rawdb.write_head_fast_block_hash(batch, schema, block_id)

    def _settlement(self, snap: ReadSnapshot, number: int, integrity_start: int | None
                    ) -> _Settlement:
        """The receipts of the accepted block at ``number``, from its stored body."""
        schema = self._schema
        block_hash = rawdb.read_canonical_hash(snap, schema, number)
        if block_hash is None:
            raise StoreCorrupted(f"accepted height {number} has no canonical entry")
        header_rlp = rawdb.read_header_rlp(snap, schema, number, block_hash)
        body_rlp = rawdb.read_body_rlp(snap, schema, number, block_hash)
        if header_rlp is None or body_rlp is None:
            raise StoreCorrupted(f"accepted block {block_hash.hex()} at {number} is missing")
        block_checksum: int | None = None
        if integrity_start is not None and number >= integrity_start:
            integrity = rawdb.read_integrity(snap, schema, number, block_hash)
            try:
                stitched = block_bytes(header_rlp, body_rlp)
            except InvalidBlock as error:
                raise StoreCorrupted(f"accepted block {block_hash.hex()} is malformed: "
                                     f"{error.reason}") from None
            if integrity is None or rawdb.checksum(stitched) != integrity.block:
                raise StoreCorrupted(f"accepted block {block_hash.hex()} at {number} fails "
                                     "its checksum")
            block_checksum = integrity.block
        elif rawdb.read_receipts_rlp(snap, schema, number, block_hash) is not None:
            return _Settlement(number, block_hash, None, None)
        try:
            transactions = self._flavour.decode_body(body_rlp).transactions
        except InvalidBlock as error:
            raise StoreCorrupted(f"accepted block {block_hash.hex()} has a malformed body: "
                                 f"{error.reason}") from None
        return _Settlement(number, block_hash, encode_receipts(
            execute_transactions(transactions)), block_checksum)

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


@attrs.frozen(slots=True)
class _Settlement:
    """Receipts to write for a block that becomes settled, and its integrity entry's block
    checksum (``None`` for a block from before this VM wrote integrity entries)."""

    number: int
    block_hash: bytes
    receipts_rlp: bytes | None
    block_checksum: int | None

    def write(self, batch: KeyWriter, schema: rawdb.Schema) -> None:
        if self.receipts_rlp is None:
            return
        rawdb.write_receipts(batch, schema, self.number, self.block_hash, self.receipts_rlp)
        if self.block_checksum is not None:
            rawdb.write_integrity(batch, schema, self.number, self.block_hash,
                                  self.block_checksum, rawdb.checksum(self.receipts_rlp))


class _AncestorWalk:
    """The fast path's per-block fetch for :func:`~vmstack.batching.walk_ancestors`, over
    one snapshot. It remembers the height of the block it fetched last, so a parent's
    height is its child's minus one and needs no lookup. The methods it calls per block are
    bound once, up front: this is the hot loop of the batched protocol."""

    __slots__ = ("_check_from", "_get", "_keys", "_lookup", "_next_number", "_processing",
                 "_settled", "_snap", "_vm")

    def __init__(self, vm: CChainVM, snap: ReadSnapshot,
                 processing: dict[bytes, CChainBlock]) -> None:
        self._vm = vm
        self._snap = snap
        self._get = snap.get
        self._keys = vm._schema.serving_keys
        self._processing = processing.get
        self._lookup = vm._cache.lookup
        self._next_number: int | None = None
        settled = vm._settled_number(snap)
        vm._settle_cache(settled)
        self._settled = settled
        start = vm._integrity_start(snap)
        self._check_from = _MAX_NUMBER + 1 if start is None else start

    def fetch(self, block_id: bytes) -> tuple[bytes, bytes]:
        known = self._processing(block_id)
        if known is not None:
            self._next_number = known.height - 1
            return known._raw, known.parent_id
        number = self._next_number
        if number is None:
            number = rawdb.read_header_number(self._snap, self._vm._schema, block_id)
            if number is None:
                raise BlockNotFound(f"block {block_id.hex()} is not known")
        elif number < 0:
            raise BlockNotFound("the walk is past the genesis block")
        header_key, body_key, integrity_key, canonical_key = self._keys(number, block_id)
        get = self._get
        canonical: bytes | memoryview | None = None
        settled = number <= self._settled
        if settled:
            canonical = self._lookup(number)
        if canonical is None:
            try:
                canonical = get(canonical_key)
            except KeyError:
                canonical = None
            if settled and canonical == block_id:
                self._vm._remember(number, block_id)
        if canonical != block_id:
            raise self._vm._not_canonical(self._snap, number, block_id, canonical)
        try:
            header = get(header_key)
            body = get(body_key)
        except KeyError:
            raise BlockNotFound(f"block {block_id.hex()} at {number} is missing") from None
        try:
            data = block_bytes(header, body)
            parent_id = header_parent_hash(header)
        except InvalidBlock as error:
            raise StoreCorrupted(f"the stored block {block_id.hex()} at {number} is "
                                 f"malformed: {error.reason}") from None
        if number >= self._check_from:
            try:
                entry = get(integrity_key)
            except KeyError:
                raise StoreCorrupted(f"block {block_id.hex()} at {number} has no integrity "
                                     "entry") from None
            if rawdb.integrity_block_checksum(entry) != _checksum(data):
                raise StoreCorrupted(f"the stored block {block_id.hex()} at {number} fails "
                                     "its checksum")
        self._next_number = number - 1
        return data, parent_id
