"""``generate_chain``: a realistic synthetic chain built through a VM or a whole stack.

Blocks are built with ``build_block`` on the VM handed in (the top of a stack, so every
layer wraps and, for the proposer, signs its blocks), then verified, preferred and accepted
through it, as an engine would. Their transactions come from a :class:`TransactionPool` of
pre-signed transactions (signing is the expensive part of making a chain: a pool keeps
10,000 blocks of 10 transactions well under a minute), handed to the mempool of the VM at
the bottom of the stack, found by following ``inner`` from the top (re-found for every
block, since a transition layer's ``inner`` changes at the transition).

The pool mixes what a C-chain carries: legacy (EIP-155), EIP-2930 and EIP-1559
transactions from the funded development keys (:data:`~vmstack.cchain.genesis.DEV_KEYS`)
with consecutive nonces from each sender's nonce in the chain's state, plain transfers,
token-style calls, larger calls and contract creations, some with access lists.
Avalanche blocks carry extData (atomic transactions, as opaque bytes) now and then;
Ethereum blocks carry withdrawals now and then. The pools are used in order and signed as
the chain needs them, so every transaction is valid where it is included: nonces follow
on, and the keys can pay.

Everything is deterministic for a seed: the same seed, VM configuration and clock start give
the same block IDs.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence

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
    "TransactionPool",
    "dev_transactions",
    "generate_chain",
    "pool_transactions",
    "transaction_pool",
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


@functools.lru_cache(maxsize=8)
def transaction_pool(
    *, seed: int, chain_id: int, size: int = DEFAULT_POOL_SIZE, start_nonces: tuple[int, ...] = ()
) -> TransactionPool:
    """A pool of ``size`` transactions signed for ``chain_id`` by the development keys,
    deterministic for ``seed`` (about 30% legacy, 20% EIP-2930, 50% EIP-1559), each key's
    nonces counting on from its entry of ``start_nonces`` (0 for keys past its end). Cached:
    a pool is signed once per process."""
    if size < 1:
        raise ValueError(f"a pool holds at least one transaction, got {size}")
    rng = random.Random(seed)
    keys = DEV_KEYS
    nonces = [*start_nonces[:_SENDERS], *[0] * (_SENDERS - len(start_nonces[:_SENDERS]))]
    transactions: list[Transaction] = []
    for _ in range(size):
        sender = rng.randrange(_SENDERS)
        nonce = nonces[sender]
        nonces[sender] += 1
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
        transactions.append(sign_transaction(tx, keys[sender], chain_id))
    return TransactionPool(chain_id, tuple(transactions), tuple(nonces))


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
    stream: _PoolStream | None = None
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
                stream = _PoolStream(
                    seed, mempool.chain_id, blocks * txs_per_block, _dev_nonces(mempool)
                )
            wanted = _top_up(mempool, txs_per_block)
            if wanted:
                mempool.add_transactions(stream.take(wanted))
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


_CHUNK = 8 * DEFAULT_POOL_SIZE


class _PoolStream:
    """The transactions of one ``generate_chain`` call: cached pools of at most
    ``_CHUNK`` transactions signed one after the other, each pool's nonces following on
    from the one before, so a long chain is signed as it is built."""

    def __init__(
        self, seed: int, chain_id: int, needed: int, start_nonces: tuple[int, ...]
    ) -> None:
        self.chain_id = chain_id
        self._seed = seed
        self._needed = needed
        self._chunk = 0
        self._pool = self._next(start_nonces)
        self._position = 0

    def _next(self, start_nonces: tuple[int, ...]) -> TransactionPool:
        # Sizes are multiples of the default so that chains of similar lengths share a
        # cached pool; the first chunk's seed is the caller's.
        size = max(1, -(-min(self._needed, _CHUNK) // DEFAULT_POOL_SIZE)) * DEFAULT_POOL_SIZE
        seed = self._seed if self._chunk == 0 else self._seed * 1_000_003 + self._chunk
        self._chunk += 1
        return transaction_pool(
            seed=seed, chain_id=self.chain_id, size=size, start_nonces=start_nonces
        )

    def take(self, count: int) -> list[Transaction]:
        taken: list[Transaction] = []
        while len(taken) < count:
            pool = self._pool.transactions
            if self._position == len(pool):
                self._pool = self._next(self._pool.next_nonces)
                self._position = 0
                continue
            end = min(len(pool), self._position + count - len(taken))
            taken.extend(pool[self._position : end])
            self._position = end
        return taken


def _chunk(seed: int, chain_id: int, index: int) -> TransactionPool:
    """The ``index``-th chunk of :func:`pool_transactions`' sequence for ``seed``."""
    start = () if index == 0 else _chunk(seed, chain_id, index - 1).next_nonces
    return transaction_pool(
        seed=seed if index == 0 else seed * 1_000_003 + index,
        chain_id=chain_id,
        size=DEFAULT_POOL_SIZE,
        start_nonces=start,
    )


def pool_transactions(*, seed: int, chain_id: int, start: int, count: int) -> list[Transaction]:
    """``count`` transactions from position ``start`` of an endless deterministic sequence
    for ``seed``, signed by the development keys with nonces counting from 0: on a fresh
    chain every prefix of it is valid in order (a simulator hands out consecutive
    slices)."""
    if start < 0 or count < 0:
        raise ValueError("start and count must be non-negative")
    taken: list[Transaction] = []
    position = start
    while len(taken) < count:
        chunk = _chunk(seed, chain_id, position // DEFAULT_POOL_SIZE).transactions
        offset = position % DEFAULT_POOL_SIZE
        end = min(DEFAULT_POOL_SIZE, offset + count - len(taken))
        taken.extend(chunk[offset:end])
        position += end - offset
    return taken


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
