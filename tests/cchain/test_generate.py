"""generate_chain: deterministic, realistic chains built through a bare VM or a whole stack."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest

from tests.cchain.chains import START, new_vm
from vmstack.batching import MAX_CONTAINERS_LEN, get_ancestors, serial_get_ancestors
from vmstack.cchain import (
    ETHEREUM,
    AccessListTx,
    CChainVM,
    DynamicFeeTx,
    LegacyTx,
    generate_chain,
    transaction_pool,
)
from vmstack.clock import SimClock
from vmstack.store import MemoryStore
from vmstack.submission import find_mempool
from vmstack.transition import SerialChainVM, TransitionVM


def _chain(seed: int, blocks: int = 6, **options: object) -> tuple[CChainVM, list[bytes]]:
    clock = SimClock(START)
    vm = CChainVM(MemoryStore(), clock=clock, **options)  # type: ignore[arg-type]
    return vm, generate_chain(vm, blocks=blocks, txs_per_block=4, seed=seed, clock=clock)


def test_the_same_seed_gives_the_same_chain() -> None:
    """Two runs with one seed and clock start build identical block IDs; another seed not."""
    _, first = _chain(3)
    _, again = _chain(3)
    _, other = _chain(4)
    assert first == again
    assert first != other
    assert len(set(first)) == len(first) == 6


def test_blocks_are_accepted_in_order_on_the_clock() -> None:
    """Each block is accepted on its parent, one block_interval after it on the clock."""
    clock = SimClock(START)
    vm = CChainVM(MemoryStore(), clock=clock)
    seen: list[int] = []
    ids = generate_chain(
        vm, blocks=4, txs_per_block=2, seed=1, clock=clock, block_interval=3.0, progress=seen.append
    )
    assert seen == [1, 2, 3, 4]
    assert vm.last_accepted() == ids[-1]
    blocks = [vm.get_block(block_id) for block_id in ids]
    assert [b.height for b in blocks] == [1, 2, 3, 4]
    assert [b.timestamp for b in blocks] == [int(START) + 3 * i for i in range(1, 5)]
    assert all(child.parent_id == parent.id for parent, child in itertools.pairwise(blocks))
    assert clock() == START + 12


def test_transactions_are_a_realistic_mix() -> None:
    """Legacy, 2930 and 1559 transactions, transfers, calls and creations, access lists,
    several senders; blocks hold the requested count."""
    vm, ids = _chain(5, blocks=30)
    txs = [tx for block_id in ids for tx in vm.get_block(block_id).transactions]
    assert len(txs) == 30 * 4
    kinds = Counter(type(tx) for tx in txs)
    assert {LegacyTx, AccessListTx, DynamicFeeTx} <= set(kinds)
    assert any(tx.to is None for tx in txs)
    assert any(tx.data and tx.to is not None for tx in txs)
    assert any(not tx.data for tx in txs)
    assert any(getattr(tx, "access_list", ()) for tx in txs)
    assert len({tx.sender() for tx in txs[:40]}) > 4


def test_avalanche_blocks_carry_ext_data_now_and_then() -> None:
    """Some, not all, Avalanche blocks have extData (and verify against their header)."""
    vm, ids = _chain(5, blocks=30)
    with_ext = [bool(vm.get_block(block_id).body.ext_data) for block_id in ids]
    assert any(with_ext) and not all(with_ext)


def test_ethereum_blocks_carry_withdrawals_now_and_then() -> None:
    """An Ethereum chain has withdrawals in some blocks and both paths agree on it."""
    vm, ids = _chain(5, blocks=16, flavour=ETHEREUM)
    counts = [len(vm.get_block(block_id).body.withdrawals or ()) for block_id in ids]
    assert any(counts) and not all(counts)
    assert vm.get_ancestors(ids[-1], 100, MAX_CONTAINERS_LEN, 60.0) == serial_get_ancestors(
        vm, ids[-1], max_blocks_num=100, max_retrieval_time=60.0
    )


def test_pool_is_signed_once_and_deterministic() -> None:
    """transaction_pool gives the same signed transactions for a seed, cached."""
    pool = transaction_pool(seed=11, chain_id=43114, size=32)
    assert transaction_pool(seed=11, chain_id=43114, size=32) is pool
    fresh = transaction_pool.__wrapped__(seed=11, chain_id=43114, size=32)
    assert fresh == pool
    assert all(tx.chain_id == 43114 for tx in pool.transactions)
    with pytest.raises(ValueError):
        transaction_pool(seed=1, chain_id=43114, size=0)


def test_empty_blocks_and_bad_arguments() -> None:
    """txs_per_block=0 builds empty blocks; negative counts are ValueErrors."""
    vm = new_vm(MemoryStore())
    ids = generate_chain(vm, blocks=2, txs_per_block=0, seed=1)
    assert [len(vm.get_block(block_id).transactions) for block_id in ids] == [0, 0]
    invalid: list[dict[str, Any]] = [
        {"blocks": -1, "txs_per_block": 1},
        {"blocks": 1, "txs_per_block": -1},
    ]
    for options in invalid:
        with pytest.raises(ValueError):
            generate_chain(vm, seed=1, **options)
    with pytest.raises(ValueError):
        generate_chain(vm, blocks=1, txs_per_block=1, seed=1, block_interval=-1.0)


def test_the_mempool_is_found_below_the_layers() -> None:
    """find_mempool follows inner to the bottom VM; an object without one is refused."""
    vm = CChainVM(MemoryStore())
    assert find_mempool(SerialChainVM(vm)) is vm
    with pytest.raises(ValueError):
        find_mempool(object())


def test_a_chain_through_a_transition_stack() -> None:
    """Through TransitionVM (pre serial-only, post batched, one store) the chain crosses the
    transition, and the post VM serves all of it as the fallback walk does."""
    store = MemoryStore()
    clock = SimClock(START)
    pre = CChainVM(store, clock=clock)
    post = CChainVM(store, clock=clock)
    stack = TransitionVM(SerialChainVM(pre), post, transition_time=START + 10)
    ids = generate_chain(stack, blocks=8, txs_per_block=3, seed=2, clock=clock)
    assert stack.transitioned
    assert post.last_accepted() == ids[-1]
    # Each block's transactions went to the mempool of the VM in charge at the time.
    assert [len(post.get_block(block_id).transactions) for block_id in ids] == [3] * 8
    answer = get_ancestors(stack, ids[-1], max_retrieval_time=60.0)
    assert len(answer) == 9
    assert answer == serial_get_ancestors(stack, ids[-1], max_retrieval_time=60.0)


def test_forgetting_the_signed_transactions_signs_the_same_ones_again() -> None:
    """After forget_signed_transactions a sequence is signed anew: the same transactions
    (deterministic signatures), other objects, as in a process's first build."""
    from vmstack.cchain.generate import forget_signed_transactions, transaction_sequence

    first = transaction_sequence(seed=11, chain_id=43114).slice(0, 5)
    assert transaction_sequence(seed=11, chain_id=43114).slice(0, 5)[0] is first[0]
    forget_signed_transactions()
    again = transaction_sequence(seed=11, chain_id=43114).slice(0, 5)
    assert again == first and all(a is not b for a, b in zip(again, first, strict=True))
