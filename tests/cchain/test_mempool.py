"""The mempool (vmstack.cchain.mempool): what it refuses, what a built block takes from
it, what a rejected built block gives back, and the sender memo's refusals."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

from tests.support.transactions import signed_transfer
from vmstack.cchain import DynamicFeeTx, Withdrawal, address_of, keccak256
from vmstack.cchain.genesis import DEV_KEYS
from vmstack.cchain.mempool import Mempool
from vmstack.cchain.state import Account
from vmstack.errors import InvalidBlock, InvalidTransaction

KEY = DEV_KEYS[0]
TO = keccak256(b"mempool recipient")[12:]


def _tx(nonce: int, gas: int = 21_000) -> DynamicFeeTx:
    return signed_transfer(nonce, key=KEY, to=TO, gas=gas)


FUNDED = Account(balance=10**24)


def _funded(address: bytes) -> Account:
    return FUNDED


def _state(**nonces: int) -> Callable[[bytes], Account]:
    """Every sender funded, the dev key 0 at nonce ``nonces.get('key0', 0)``."""
    nonce = nonces.get("key0", 0)
    return lambda address: Account(nonce, 10**24)


def test_a_built_block_takes_executable_transactions_while_the_gas_limit_holds() -> None:
    """Executable transactions in nonce order while their gas fits; nothing is removed."""
    pool = Mempool(chain_id=43114, gas_limit=50_000, avalanche=False)
    txs = [_tx(0), _tx(1), _tx(2)]
    pool.add_transactions(reversed(txs), _funded)
    pool.add_withdrawals([Withdrawal(index=1, address=TO, amount=2)])
    assert pool.executable(_funded) == txs[:2]
    ext_data, withdrawals = pool.take_extras()
    assert ext_data == b"" and len(withdrawals) == 1
    assert pool.count() == 3
    assert pool.take_extras()[1] == ()


def test_future_nonces_wait_and_accepted_blocks_drop_included_and_stale() -> None:
    """A gap waits; after an accepted block, included and stale transactions leave."""
    pool = Mempool(chain_id=43114, gas_limit=1_000_000, avalanche=False)
    pool.add_transactions([_tx(0), _tx(2), _tx(3)], _funded)
    assert pool.executable(_funded) == [_tx(0)]
    pool.on_accepted([address_of(KEY)], _state(key0=1))
    assert pool.count() == 2
    assert pool.executable(_state(key0=1)) == []
    pool.on_accepted([address_of(KEY)], _state(key0=3))
    assert pool.count() == 1 and pool.executable(_state(key0=3)) == [_tx(3)]


def test_a_rejected_block_gives_back_its_extras_at_the_front() -> None:
    """give_back puts a body's extData back before what still waits."""
    from vmstack.cchain import AVALANCHE

    pool = Mempool(chain_id=43114, gas_limit=21_000, avalanche=True)
    pool.add_ext_data(b"atomic")
    pool.add_ext_data(b"later")
    ext_data, _ = pool.take_extras()
    pool.give_back(AVALANCHE.body([], ext_data=ext_data))
    assert pool.take_extras()[0] == b"atomic"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (attrs.evolve(_tx(0), chain_id=1), "chain"),
        (_tx(0, gas=30_001), "exceeds"),
        (_tx(0, gas=20_000), "intrinsic"),
        (attrs.evolve(_tx(0), r=0), "signature r"),
        (_tx(1), "duplicate"),
    ],
)
def test_what_no_block_could_carry_is_refused_with_its_reason(
    bad: DynamicFeeTx, reason: str
) -> None:
    """Another chain, gas above a block's or below intrinsic, a missing or bad signature,
    a duplicate: InvalidTransaction naming it, and nothing of the submission queued."""
    pool = Mempool(chain_id=43114, gas_limit=30_000, avalanche=False)
    pool.add_transactions([_tx(1)], _funded)
    with pytest.raises(InvalidTransaction, match=reason):
        pool.add_transactions([_tx(2), bad], _funded)
    assert pool.count() == 1


def test_replays_and_unaffordable_transactions_are_refused() -> None:
    """A nonce below the sender's, or a cost above its balance, is refused at once."""
    pool = Mempool(chain_id=43114, gas_limit=30_000, avalanche=False)
    with pytest.raises(InvalidTransaction, match="replay"):
        pool.add_transactions([_tx(0)], _state(key0=1))
    with pytest.raises(InvalidTransaction, match="balance"):
        pool.add_transactions([_tx(0)], lambda address: Account())
    with pytest.raises(ValueError):
        pool.add_transactions([b"not a transaction"], _funded)  # type: ignore[list-item]
    with pytest.raises(ValueError):
        pool.add_ext_data(b"x")
    assert pool.count() == 0


def test_each_part_is_bounded_per_sender_and_a_lower_queued_nonce_evicts_the_highest() -> None:
    """Over the per-sender queued bound, a lower nonce evicts the sender's highest queued
    one and a higher one is refused; the pending bound refuses at once."""
    pool = Mempool(
        chain_id=43114,
        gas_limit=30_000,
        avalanche=False,
        max_per_sender=2,
        max_queued_per_sender=1,
    )
    pool.add_transactions([_tx(0), _tx(5)], _funded)
    assert [tx.nonce for tx in pool.pending()] == [0]
    assert [tx.nonce for tx in pool.queued()] == [5]
    with pytest.raises(InvalidTransaction, match="queued transactions, the most"):
        pool.add_transactions([_tx(6)], _funded)
    pool.add_transactions([_tx(4)], _funded)
    assert [tx.nonce for tx in pool.queued()] == [4]
    pool.add_transactions([_tx(1)], _funded)
    with pytest.raises(InvalidTransaction, match="pending transactions, the most"):
        pool.add_transactions([_tx(2)], _funded)
    assert pool.count() == 3
    # Reading drains nothing.
    assert [tx.nonce for tx in pool.pending()] == [0, 1]
    assert [tx.nonce for tx in pool.take_transactions()] == [0, 4, 1]


def test_a_sender_that_does_not_recover_is_named() -> None:
    """check_senders names where and which transaction; a recovered sender is remembered."""
    pool = Mempool(chain_id=43114, gas_limit=30_000, avalanche=False)
    good = _tx(0)
    pool.check_senders([good], [pool.encoding(good)], "block x")
    bad = attrs.evolve(good, r=0)
    with pytest.raises(InvalidBlock, match="block x: transaction 1"):
        pool.check_senders([good, bad], [good.encode(), bad.encode()], "block x")
