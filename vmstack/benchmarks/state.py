"""Benchmark case: account state, what it costs a block and a chain.

Three rows:

- the state root update of a block of 10 transfers (21 accounts touched: 10 senders, 10
  recipients, the coinbase) over a trie of 6,000 accounts, as after the default chain:
  fast: :class:`~vmstack.cchain.state.AccountTrie` (persistent, node hashes cached);
  baseline: the ``trie`` package's ``HexaryTrie`` updated in place; floor: one keccak256
  per touched account's encoding, the least any root update hashes;
- verify + accept of a block of 10 transactions by a second node (the bytes parsed, the
  rules, sender recovery, the state transition and root, the atomic write), per block,
  against the slow path's ``get_block`` of the same block (decode, receipts, senders,
  re-encode), with the state transition and root alone as the floor;
- the default chain build (``generate_chain``, 600 blocks of 10 transactions, memory
  store, the default stack) against the build before the chain kept accounts, measured
  on this machine just before (:data:`BUILD_BEFORE_SECONDS`); goal: at most 1.5x it.
"""

from __future__ import annotations

import random
from typing import Final

from vmstack.benchmarks import Comparison, median_seconds
from vmstack.cchain import (
    DEV_KEYS,
    Account,
    AccountTrie,
    CChainVM,
    DynamicFeeTx,
    address_of,
    execute_transactions,
    keccak256,
)
from vmstack.cchain.generate import generate_chain
from vmstack.cchain.genesis import BASE_FEE, BLACKHOLE_ADDRESS
from vmstack.cchain.state import AcceptedState, apply_block
from vmstack.clock import SimClock
from vmstack.stack import build_stack
from vmstack.store import MemoryStore

__all__ = ["BUILD_BEFORE_SECONDS", "run"]

GROUP = "account state"
#: ``generate_chain(blocks=600, txs_per_block=10)`` on a memory store before the chain kept
#: accounts (median of runs on this 2-core machine, 0.56-0.79 s by load).
BUILD_BEFORE_SECONDS: Final = 0.62
_ACCOUNTS = 6000
_TOUCHED = 21
_START = 1_700_000_000.0


def _root_rows(repeat: int) -> Comparison:
    from trie.hexary import HexaryTrie

    rng = random.Random(1)
    keys = [keccak256(rng.randbytes(20)) for _ in range(_ACCOUNTS)]
    accounts = [Account(rng.randrange(100), rng.randrange(10**24)) for _ in keys]
    persistent = AccountTrie().updated(zip(keys, accounts, strict=True))
    reference = HexaryTrie({})
    for key, account in zip(keys, accounts, strict=True):
        reference[key] = account.encode()
    if persistent.root_hash != reference.root_hash:
        raise ValueError("the account trie and the trie package disagree")
    counter = [0]

    def touched() -> list[tuple[bytes, Account]]:
        counter[0] += 1
        return [
            (keys[(counter[0] * 7919 + i * 104729) % _ACCOUNTS], Account(counter[0], 10**18 + i))
            for i in range(_TOUCHED)
        ]

    state = [persistent]

    def ours() -> object:
        state[0] = state[0].updated(touched())
        return state[0].root_hash

    def theirs() -> object:
        for key, account in touched():
            reference[key] = account.encode()
        return reference.root_hash

    def floor() -> object:
        return [keccak256(account.encode()) for _, account in touched()]

    fast, baseline, cheapest = (
        median_seconds(operation, repeat=repeat, number=20) for operation in (ours, theirs, floor)
    )
    return Comparison(
        group=GROUP,
        case=f"state root, block of 10 txs ({_TOUCHED} accounts of {_ACCOUNTS})",
        fast_seconds=fast,
        baseline_seconds=baseline,
        floor_seconds=cheapest,
        fast_label="AccountTrie",
        baseline_label="trie.HexaryTrie",
        floor_label="keccak per account",
        goal=">= 1x trie package",
    ).judged(min_speedup=1.0)


def _transfers(block: int) -> list[DynamicFeeTx]:
    return [
        DynamicFeeTx(
            chain_id=43114,
            nonce=block,
            max_fee_per_gas=50 * 10**9,
            gas=21_000,
            to=keccak256(b"bench %d %d" % (block, i))[12:],
            value=1,
        ).sign(DEV_KEYS[i])
        for i in range(10)
    ]


def _verify_row(repeat: int) -> Comparison:
    blocks = 30
    clock = SimClock(_START)
    builder = CChainVM(MemoryStore(), clock=clock)
    built: list[bytes] = []
    signed = [_transfers(height) for height in range(blocks)]
    for height in range(blocks):
        clock.advance(2.0)
        builder.add_transactions(signed[height])
        block = builder.build_block()
        block.verify()
        block.accept()
        built.append(bytes(block))
    ids = [builder.get_block_id_at_height(height + 1) for height in range(blocks)]

    def verify_accept() -> object:
        node = CChainVM(MemoryStore(), clock=clock)
        for data in built:
            block = node.parse_block(data)
            block.verify()
            block.accept()
        return node.last_accepted()

    def restore() -> object:
        return [builder.get_block(block_id) for block_id in ids]

    def transition() -> object:
        node = CChainVM(MemoryStore(), clock=clock)
        base = node._state_of(None)
        assert isinstance(base, AcceptedState)
        roots = []
        for height in range(blocks):
            txs = signed[height]
            senders = [address_of(DEV_KEYS[i]) for i in range(10)]
            state = apply_block(
                None,
                base,
                txs,
                senders,
                execute_transactions(txs),
                coinbase=BLACKHOLE_ADDRESS,
                base_fee=BASE_FEE,
            )
            roots.append(state.root)
            base.advance(keccak256(b"%d" % height), state)
        return roots

    fast, baseline = (
        median_seconds(operation, repeat=repeat) / blocks for operation in (verify_accept, restore)
    )
    cheapest = median_seconds(transition, repeat=repeat) / blocks
    return Comparison(
        group=GROUP,
        case="verify + accept, block of 10 txs, second node",
        fast_seconds=fast,
        baseline_seconds=baseline,
        floor_seconds=cheapest,
        fast_label="parse+verify+accept",
        baseline_label="get_block (slow path)",
        floor_label="state transition + root",
        goal="<= 2x get_block",
        notes={"blocks": blocks},
    ).judged(min_speedup=0.5)


def _build_row(quick: bool) -> Comparison:
    blocks = 600

    def build() -> object:
        clock = SimClock(_START)
        vm = build_stack(MemoryStore(), clock=clock)
        return generate_chain(vm, blocks=blocks, txs_per_block=10, seed=1, clock=clock)

    seconds = median_seconds(build, repeat=1 if quick else 3)
    return Comparison(
        group=GROUP,
        case="default chain build, 600 x 10, memory store",
        fast_seconds=seconds,
        baseline_seconds=BUILD_BEFORE_SECONDS,
        fast_label="generate_chain with accounts",
        baseline_label="before accounts",
        goal="<= 1.5x before",
        notes={"ratio_to_before": round(seconds / BUILD_BEFORE_SECONDS, 2)},
    ).judged(also=seconds <= 1.5 * BUILD_BEFORE_SECONDS)


def run(quick: bool) -> list[Comparison]:
    """The three rows of the module docstring."""
    repeat = 3 if quick else 7
    return [_root_rows(repeat), _verify_row(repeat), _build_row(quick)]
