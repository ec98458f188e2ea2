"""The mempool against a flood (docs/chain-rules.md): pending and queued kept apart, a queued
transaction never evicts a pending one, an account's pooled transactions bounded by what it
can pay, and replace-by-fee at +10%. The flood test reports what it took to evict an
honest pending transaction: within the bounds it cannot be done."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.transactions import signed_transfer
from vmstack.cchain import address_of, keccak256
from vmstack.cchain.genesis import BASE_FEE, DEV_KEYS
from vmstack.cchain.mempool import MAX_PENDING, MAX_QUEUED, Mempool
from vmstack.cchain.state import Account
from vmstack.cchain.types import Transaction
from vmstack.errors import InvalidTransaction

TO = keccak256(b"flood recipient")[12:]
FEE = 2 * BASE_FEE
#: What one plain transfer may cost at FEE (value 1).
ONE_TRANSFER = 21_000 * FEE + 1


def _transfer(key: int, nonce: int, fee: int = FEE, tip: int = 0) -> Transaction:
    return signed_transfer(
        nonce, key=key, to=TO, value=1, max_fee_per_gas=fee, max_priority_fee_per_gas=tip
    )


def _keys(count: int, tag: bytes) -> list[int]:
    return [int.from_bytes(keccak256(tag + b"%d" % i), "big") for i in range(count)]


def _pool(**bounds: int) -> Mempool:
    return Mempool(
        chain_id=43114, gas_limit=15_000_000, avalanche=True, base_fee=BASE_FEE, **bounds
    )


def _reader(balances: dict[bytes, int]) -> Callable[[bytes], Account]:
    return lambda address: Account(0, balances.get(address, 0))


HONEST = DEV_KEYS[:8]


@pytest.mark.slow
def test_a_gapped_flood_from_barely_funded_accounts_evicts_no_honest_pending_transaction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """8,192 nonce-gapped transfers from 8,192 accounts each funded for one transfer: the
    queued part fills to its bound and refuses the rest; the 8 honest executable
    transactions stay pending, the next block takes them, and a new honest transaction is
    taken."""
    attackers = _keys(8192, b"flood ")
    balances = {address_of(key): 10**24 for key in HONEST}
    flood = [_transfer(key, 1) for key in attackers]
    for tx in flood:
        balances[tx.sender()] = ONE_TRANSFER
    read = _reader(balances)
    pool = _pool()
    honest = [_transfer(key, 0) for key in HONEST]
    pool.add_transactions(honest, read)
    refused = 0
    for tx in flood:
        try:
            pool.add_transactions([tx], read)
        except InvalidTransaction as error:
            assert "the pool is full" in str(error)
            refused += 1
    assert len(pool.queued()) == MAX_QUEUED and refused == len(flood) - MAX_QUEUED
    assert pool.pending() == honest
    assert pool.executable(read) == honest
    pool.add_transactions([_transfer(DEV_KEYS[9], 0)], lambda a: Account(0, 10**24))
    with capsys.disabled():
        print(
            f"\nflood: {len(flood):,} gapped transfers from {len(flood):,} accounts "
            f"({ONE_TRANSFER:,} wei each, {len(flood) * ONE_TRANSFER / 10**18:.2f} coins in "
            f"all): {MAX_QUEUED:,} queued, {refused:,} refused, 0 of {len(honest)} honest "
            "pending transactions evicted"
        )


def test_an_executable_flood_cannot_evict_a_sender_with_as_few_pending(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Executable transfers from funded accounts, one each, fill the pending bound: the
    next is refused, and no honest transaction leaves. A sender with more pending than
    the newcomer's would have gives up its highest nonce."""
    bound = 64
    pool = _pool(max_pending=bound)
    balances = {address_of(key): 10**24 for key in HONEST}
    read = _reader(balances)
    honest = [_transfer(key, 0) for key in HONEST]
    pool.add_transactions(honest, read)
    attackers = _keys(bound, b"pending flood ")
    flood = [_transfer(key, 0) for key in attackers]
    for tx in flood:
        balances[tx.sender()] = ONE_TRANSFER
    taken = 0
    for tx in flood:
        try:
            pool.add_transactions([tx], read)
            taken += 1
        except InvalidTransaction as error:
            assert "the pool is full" in str(error)
    assert taken == bound - len(honest)
    assert all(tx in pool.pending() for tx in honest)
    # A sender with many pending is the one that gives way.
    rich = DEV_KEYS[10]
    balances[address_of(rich)] = 10**24
    pool2 = _pool(max_pending=4)
    pool2.add_transactions([_transfer(rich, n) for n in range(3)], read)
    pool2.add_transactions([honest[0]], read)
    pool2.add_transactions([honest[1]], read)  # evicts the rich sender's nonce 2
    assert [tx.nonce for tx in pool2.pending() if tx.sender() == address_of(rich)] == [0, 1]
    with capsys.disabled():
        print(
            f"\npending flood: {bound - len(honest)} executable transfers fill a bound of "
            f"{bound} ({MAX_PENDING:,} by default), each one a real transfer a block will "
            f"include at {BASE_FEE * 21_000:,} wei of base fee; 0 honest pending evicted"
        )


def test_an_account_funded_for_one_transfer_pools_one() -> None:
    """Its pooled transactions together cost at most its balance, gapped or not."""
    key = _keys(1, b"poor ")[0]
    read = _reader({address_of(key): ONE_TRANSFER})
    pool = _pool()
    pool.add_transactions([_transfer(key, 1)], read)
    for nonce in range(2, 257):
        with pytest.raises(InvalidTransaction, match="would cost up to"):
            pool.add_transactions([_transfer(key, nonce)], read)
    assert len(pool.queued()) == 1 and pool.pending() == []


def test_replace_by_fee_needs_ten_percent_more_on_both_caps() -> None:
    key = HONEST[0]
    read = _reader({address_of(key): 10**24})
    pool = _pool()
    first = _transfer(key, 0, fee=100 * 10**9, tip=10 * 10**9)
    pool.add_transactions([first], read)
    for fee, tip in ((109 * 10**9, 11 * 10**9), (120 * 10**9, 10 * 10**9)):
        with pytest.raises(InvalidTransaction, match="underpriced replacement"):
            pool.add_transactions([_transfer(key, 0, fee=fee, tip=tip)], read)
    better = _transfer(key, 0, fee=110 * 10**9, tip=11 * 10**9)
    pool.add_transactions([better], read)
    assert pool.pending() == [better] and pool.count() == 1
    # A replacement the sender could not pay with the rest it pooled is refused.
    tight = _reader({address_of(key): 2 * (21_000 * 100 * 10**9 + 1)})
    pool = _pool()
    pool.add_transactions([first, _transfer(key, 1, fee=100 * 10**9, tip=10 * 10**9)], tight)
    with pytest.raises(InvalidTransaction, match="would cost up to"):
        pool.add_transactions([_transfer(key, 1, fee=110 * 10**9, tip=11 * 10**9)], tight)
    assert pool.count() == 2
