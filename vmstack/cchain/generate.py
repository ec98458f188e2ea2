"""``generate_chain``: a realistic synthetic chain built through a VM or a whole stack.

Blocks are built with ``build_block`` on the VM handed in (the top of a stack, so every
layer wraps and, for the proposer, signs its blocks), then verified, preferred and accepted
through it, as an engine would. Their transactions come from a
:class:`TransactionSequence` of pre-signed transactions (signing is the expensive part of
making a chain: a sequence signed once per process keeps 10,000 blocks of 10 transactions
well under a minute), handed to the mempool of the VM at the bottom of the stack, found by
following ``inner`` from the top (re-found for every block, since a transition layer's
``inner`` changes at the transition).

The pool mixes what a C-chain carries: legacy (EIP-155), EIP-2930 and EIP-1559
transactions from the funded development keys (:data:`~vmstack.cchain.genesis.DEV_KEYS`)
with consecutive nonces from each sender's nonce in the chain's state, plain transfers,
token-style calls, larger calls and contract creations, some with access lists.
Avalanche blocks carry extData (atomic transactions, as opaque bytes) now and then;
Ethereum blocks carry withdrawals now and then. The sequence is used in order and signed as
the chain needs it, so every transaction is valid where it is included: nonces follow on,
and the keys can pay. It is one sequence at every length: :func:`pool_transactions` hands
out the transactions ``generate_chain`` includes on a fresh chain, by position, so a
simulator's live blocks continue a generated chain however long it is.

Everything is deterministic for a seed: the same seed, VM configuration and clock start give
the same block IDs.
"""

from __future__ import annotations

import functools
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

import attrs

from vmstack.cchain.codec import Flavour
from vmstack.cchain.execution import TX_BASE_GAS
from vmstack.cchain.genesis import DEV_KEYS, dev_addresses
from vmstack.cchain.types import (
    AccessListTx,
    AccessTuple,
    AvalancheHeader,
    DynamicFeeTx,
    LegacyTx,
    Transaction,
    Withdrawal,
    sign_transaction,
)
from vmstack.clock import SimClock
from vmstack.interfaces import ChainVM, Mempool, iter_layers
from vmstack.submission import find_mempool

__all__ = [
    "DEFAULT_POOL_SIZE",
    "SEQUENCE_CHUNK",
    "TransactionPool",
    "TransactionSequence",
    "dev_transactions",
    "forget_signed_transactions",
    "generate_chain",
    "pool_transactions",
    "transaction_pool",
    "transaction_sequence",
]

#: Pre-signed transactions in a default pool.
DEFAULT_POOL_SIZE = 1024

_SENDERS = len(DEV_KEYS)
_GWEI = 10**9
_EXT_DATA_EVERY = 5
_WITHDRAWALS_EVERY = 4


@attrs.frozen
class TransactionPool:
    """Signed transactions for one chain id, used in order (see the module docstring)."""

    chain_id: int
    transactions: tuple[Transaction, ...]
    #: Each development key's nonce after the pool's last transaction.
    next_nonces: tuple[int, ...] = ()


def _address(rng: random.Random) -> bytes:
    return rng.randbytes(20)


def _payload(rng: random.Random) -> tuple[bytes | None, bytes, int]:
    """``(to, data, gas limit)`` of one transaction: a transfer, a token-style call, a
    larger call or a contract creation."""
    kind = rng.random()
    if kind < 0.45:
        return _address(rng), b"", 21_000
    if kind < 0.80:
        data = bytes.fromhex("a9059cbb") + bytes(12) + _address(rng) + rng.randbytes(32)
        return _address(rng), data, 80_000
    if kind < 0.95:
        return _address(rng), rng.randbytes(4) + rng.randbytes(rng.randrange(64, 600)), 200_000
    return None, rng.randbytes(rng.randrange(200, 1200)), 600_000


def _access_list(rng: random.Random, to: bytes | None) -> tuple[AccessTuple, ...]:
    if rng.random() < 0.5:
        return ()
    address = to if to is not None else _address(rng)
    return (
        AccessTuple(
            address=address, storage_keys=tuple(rng.randbytes(32) for _ in range(rng.randrange(3)))
        ),
    )


class _Signer:
    """Signs the transactions of one seed's stream in order: the random draws and each
    key's next nonce carry on from one transaction to the next, so the first ``n`` of a
    stream are the same however many are signed after them."""

    def __init__(self, seed: int, chain_id: int, start_nonces: tuple[int, ...]) -> None:
        self._rng = random.Random(seed)
        self._chain_id = chain_id
        given = start_nonces[:_SENDERS]
        self.nonces = [*given, *[0] * (_SENDERS - len(given))]

    def sign(self, count: int) -> list[Transaction]:
        """The stream's next ``count`` transactions."""
        return [self._next() for _ in range(count)]

    def _next(self) -> Transaction:
        rng, chain_id = self._rng, self._chain_id
        sender = rng.randrange(_SENDERS)
        nonce = self.nonces[sender]
        self.nonces[sender] += 1
        to, data, gas = _payload(rng)
        value = rng.randrange(10**18) if not data or rng.random() < 0.1 else 0
        kind = rng.random()
        tx: Transaction
        if kind < 0.3:
            tx = LegacyTx(
                nonce=nonce,
                gas_price=rng.randrange(25, 100) * _GWEI,
                gas=gas,
                to=to,
                value=value,
                data=data,
            )
        elif kind < 0.5:
            tx = AccessListTx(
                chain_id=chain_id,
                nonce=nonce,
                gas_price=rng.randrange(25, 100) * _GWEI,
                gas=gas + 10_000,
                to=to,
                value=value,
                data=data,
                access_list=_access_list(rng, to),
            )
        else:
            tip = rng.randrange(0, 3) * _GWEI
            tx = DynamicFeeTx(
                chain_id=chain_id,
                nonce=nonce,
                max_priority_fee_per_gas=tip,
                max_fee_per_gas=rng.randrange(30, 150) * _GWEI + tip,
                gas=gas + 10_000,
                to=to,
                value=value,
                data=data,
                access_list=_access_list(rng, to),
            )
        return sign_transaction(tx, DEV_KEYS[sender], chain_id)


@functools.lru_cache(maxsize=8)
def transaction_pool(
    *, seed: int, chain_id: int, size: int = DEFAULT_POOL_SIZE, start_nonces: tuple[int, ...] = ()
) -> TransactionPool:
    """A pool of ``size`` transactions signed for ``chain_id`` by the development keys,
    deterministic for ``seed`` (about 30% legacy, 20% EIP-2930, 50% EIP-1559), each key's
    nonces counting on from its entry of ``start_nonces`` (0 for keys past its end). A pool
    of ``n`` is the first ``n`` of any larger pool of the same arguments. Cached: a pool is
    signed once per process."""
    if size < 1:
        raise ValueError(f"a pool holds at least one transaction, got {size}")
    signer = _Signer(seed, chain_id, start_nonces)
    transactions = signer.sign(size)
    return TransactionPool(chain_id, tuple(transactions), tuple(signer.nonces))


#: Transactions per chunk of a :class:`TransactionSequence`: chunk ``i`` is one seed's
#: stream (the caller's seed for chunk 0), its nonces following on from chunk ``i - 1``.
SEQUENCE_CHUNK: Final = 8 * DEFAULT_POOL_SIZE
_SEQUENCES_KEPT = 4


class TransactionSequence:
    """The one endless, deterministic sequence of transactions for ``seed``, ``chain_id``
    and ``start_nonces`` (each development key's nonce where it starts): what
    :func:`generate_chain` includes, block after block, and what :func:`pool_transactions`
    hands out by position, so the two agree at every length. It is cut into chunks of
    :data:`SEQUENCE_CHUNK`: chunk 0 is the stream of ``seed``, chunk ``i`` the stream of
    ``seed * 1_000_003 + i`` with the nonces chunk ``i - 1`` ends with; each chunk is signed
    lazily, as far as it is read. Every prefix is valid in order on a chain whose
    development keys have ``start_nonces``. Use :func:`transaction_sequence` (shared and
    kept per process)."""

    def __init__(self, seed: int, chain_id: int, start_nonces: tuple[int, ...] = ()) -> None:
        self.seed = seed
        self.chain_id = chain_id
        self.start_nonces = start_nonces
        self._lock = threading.Lock()
        self._chunks: list[list[Transaction]] = []
        self._signer: _Signer | None = None

    def _chunk(self, index: int, needed: int) -> list[Transaction]:
        """Chunk ``index`` signed at least as far as ``needed`` transactions (the lock is
        held)."""
        while len(self._chunks) <= index:
            if self._signer is not None:  # finish the chunk in progress first
                last = self._chunks[-1]
                last.extend(self._signer.sign(SEQUENCE_CHUNK - len(last)))
            number = len(self._chunks)
            nonces = self.start_nonces if self._signer is None else tuple(self._signer.nonces)
            seed = self.seed if number == 0 else self.seed * 1_000_003 + number
            self._signer = _Signer(seed, self.chain_id, nonces)
            self._chunks.append([])
        chunk = self._chunks[index]
        if len(chunk) < needed:
            assert self._signer is not None and index == len(self._chunks) - 1
            chunk.extend(self._signer.sign(needed - len(chunk)))
        return chunk

    def slice(self, start: int, count: int) -> list[Transaction]:
        """``count`` transactions from position ``start``."""
        if start < 0 or count < 0:
            raise ValueError("start and count must be non-negative")
        taken: list[Transaction] = []
        position = start
        with self._lock:
            while len(taken) < count:
                index, offset = divmod(position, SEQUENCE_CHUNK)
                end = min(SEQUENCE_CHUNK, offset + count - len(taken))
                taken.extend(self._chunk(index, end)[offset:end])
                position += end - offset
        return taken


_sequences: OrderedDict[tuple[int, int, tuple[int, ...]], TransactionSequence] = OrderedDict()
_sequences_lock = threading.Lock()


def transaction_sequence(
    *, seed: int, chain_id: int, start_nonces: tuple[int, ...] = ()
) -> TransactionSequence:
    """The :class:`TransactionSequence` of these arguments, shared in the process (the
    last few used are kept, so a chain and the live blocks after it are signed once)."""
    key = (seed, chain_id, tuple(start_nonces))
    with _sequences_lock:
        found = _sequences.get(key)
        if found is None:
            found = _sequences[key] = TransactionSequence(seed, chain_id, key[2])
            if len(_sequences) > _SEQUENCES_KEPT:
                _sequences.popitem(last=False)
        else:
            _sequences.move_to_end(key)
        return found


def forget_signed_transactions() -> None:
    """Drop every pool and sequence signed in this process: the next chain is signed
    again, as in a process's first build (what a benchmark of a cold build starts from)."""
    transaction_pool.cache_clear()
    with _sequences_lock:
        _sequences.clear()


def generate_chain(
    vm: ChainVM,
    *,
    blocks: int,
    txs_per_block: int,
    seed: int,
    clock: SimClock | None = None,
    block_interval: float = 2.0,
    progress: Callable[[int], None] | None = None,
) -> list[bytes]:
    """Build, verify, prefer and accept ``blocks`` blocks on ``vm`` (a ``CChainVM`` or the
    top of a stack), each with ``txs_per_block`` transactions: before each block the bottom
    VM's mempool is topped up to ``txs_per_block`` pending ones, but never beyond what one
    block's gas limit could hold (``gas_limit // TX_BASE_GAS``), so a block holds fewer if
    the gas limit is reached, the rest wait for the next, and an absurd ``txs_per_block``
    never overfills the bounded mempool.
    ``clock`` (a :class:`~vmstack.clock.SimClock`, the one the stack runs on) is advanced by
    ``block_interval`` before each block; ``progress(n)`` is called after the ``n``-th block.
    Returns the new blocks' IDs, oldest first. Deterministic for a seed (given a
    ``SimClock``; on a wall clock the timestamps, and so the IDs, vary).
    """
    for name, number in (("blocks", blocks), ("txs_per_block", txs_per_block)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ValueError(f"{name} must be a non-negative int, got {number!r}")
    if not block_interval >= 0:
        raise ValueError(f"block_interval must be non-negative, got {block_interval!r}")
    rng = random.Random(seed)
    ids: list[bytes] = []
    stack: tuple[object, ...] = ()
    stream: TransactionSequence | None = None
    taken = 0
    for index in range(blocks):
        if clock is not None:
            clock.advance(block_interval)
        # The mempool is looked for again only when the stack's layers change (a
        # transition hands the chain to another VM): the protocol check is the slow part.
        layers = tuple(iter_layers(vm))
        if layers != stack:
            mempool = find_mempool(vm)
            stack = layers
        if txs_per_block:
            if stream is None or stream.chain_id != mempool.chain_id:
                stream = transaction_sequence(
                    seed=seed, chain_id=mempool.chain_id, start_nonces=_dev_nonces(mempool)
                )
                taken = 0
            wanted = _top_up(mempool, txs_per_block)
            if wanted:
                mempool.add_transactions(stream.slice(taken, wanted))
                taken += wanted
        _add_extras(mempool, rng)
        block = vm.build_block()
        block.verify()
        vm.set_preference(block.id)
        block.accept()
        ids.append(block.id)
        if progress is not None:
            progress(index + 1)
    return ids


def _top_up(mempool: Mempool, txs_per_block: int) -> int:
    """How many transactions to hand ``mempool`` before a block: up to ``txs_per_block``
    pending, at most what one block can hold."""
    target = min(txs_per_block, mempool.gas_limit // TX_BASE_GAS)
    return max(0, target - mempool.pending_transactions())


def pool_transactions(*, seed: int, chain_id: int, start: int, count: int) -> list[Transaction]:
    """``count`` transactions from position ``start`` of the deterministic sequence for
    ``seed`` (:class:`TransactionSequence`), signed by the development keys with nonces
    counting from 0: the transactions :func:`generate_chain` includes on a fresh chain, in
    the order it includes them, so a simulator that hands out consecutive slices after a
    generated chain continues it."""
    return transaction_sequence(seed=seed, chain_id=chain_id).slice(start, count)


def _dev_nonces(mempool: Mempool) -> tuple[int, ...]:
    """The development keys' nonces in the state of the VM under ``mempool`` (``()`` when
    all are 0)."""
    nonces = tuple(mempool.next_nonce(address) for address in dev_addresses())
    return nonces if any(nonces) else ()


def dev_transactions(vm: object, count: int, *, seed: int) -> list[Transaction]:
    """``count`` transactions of the generator's mix, signed by the development keys with
    the nonces that follow on in the mempool of ``vm``'s stack (its bottom VM's
    ``next_nonce``), so they can be submitted to it now; deterministic for a seed and the
    stack's state."""
    mempool = find_mempool(vm)
    return list(
        transaction_pool(
            seed=seed,
            chain_id=mempool.chain_id,
            size=max(count, 1),
            start_nonces=_dev_nonces(mempool),
        ).transactions[:count]
    )


def _add_extras(mempool: Mempool, rng: random.Random) -> None:
    """Now and then, extData (Avalanche) or withdrawals (Ethereum) for the next block, when
    ``mempool`` is a C-chain VM's (it has a :class:`~vmstack.cchain.codec.Flavour`; other
    mempools hold transactions only)."""
    flavour = getattr(mempool, "flavour", None)
    if not isinstance(flavour, Flavour):
        return
    if flavour.header_type is AvalancheHeader:
        add_ext_data = getattr(mempool, "add_ext_data", None)
        if add_ext_data is not None and rng.randrange(_EXT_DATA_EVERY) == 0:
            add_ext_data(rng.randbytes(rng.randrange(300, 700)))
        return
    add_withdrawals = getattr(mempool, "add_withdrawals", None)
    if add_withdrawals is not None and rng.randrange(_WITHDRAWALS_EVERY) == 0:
        add_withdrawals(_withdrawals(rng))


def _withdrawals(rng: random.Random) -> Sequence[Withdrawal]:
    start = rng.randrange(10**6)
    return [
        Withdrawal(
            index=start + i,
            validator_index=rng.randrange(10**6),
            address=rng.randbytes(20),
            amount=rng.randrange(1, 32 * _GWEI),
        )
        for i in range(rng.randrange(1, 17))
    ]
