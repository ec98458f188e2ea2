"""The mempool (vmstack.cchain.mempool): what it refuses, what a built block takes from
it, what a rejected built block gives back, and the sender memo's refusals."""

from __future__ import annotations

import attrs
import pytest

from vmstack.cchain import DynamicFeeTx, Withdrawal, keccak256
from vmstack.cchain.mempool import Mempool
from vmstack.errors import InvalidBlock

KEY = keccak256(b"mempool sender")
TO = keccak256(b"mempool recipient")[12:]


def _tx(nonce: int, gas: int = 21_000) -> DynamicFeeTx:
    return DynamicFeeTx(chain_id=43114, nonce=nonce, max_fee_per_gas=50 * 10**9, gas=gas,
                        to=TO).sign(KEY)


def test_a_built_block_takes_transactions_in_order_while_the_gas_limit_holds() -> None:
    """Transactions are taken from the front while their gas limits fit; the rest wait."""
    pool = Mempool(chain_id=43114, gas_limit=50_000, avalanche=False)
    txs = [_tx(0), _tx(1), _tx(2)]
    pool.add_transactions(txs)
    pool.add_withdrawals([Withdrawal(index=1, address=TO, amount=2)])
    taken, ext_data, withdrawals = pool.take_block()
    assert taken == txs[:2] and ext_data == b"" and len(withdrawals) == 1
    assert pool.pending() == 1
    assert pool.take_block()[2] == ()


def test_a_rejected_block_gives_back_what_it_took_at_the_front() -> None:
    """give_back puts a body's transactions and extData back before what still waits."""
    from vmstack.cchain import AVALANCHE

    pool = Mempool(chain_id=43114, gas_limit=21_000, avalanche=True)
    txs = [_tx(0), _tx(1)]
    pool.add_transactions(txs)
    pool.add_ext_data(b"atomic")
    taken, ext_data, _ = pool.take_block()
    pool.give_back(AVALANCHE.body(taken, ext_data=ext_data))
    assert pool.take_transactions() == txs
    assert pool.take_block()[1] == b"atomic"


def test_what_no_valid_block_could_carry_is_refused_and_nothing_is_queued() -> None:
    """Another chain's transaction, gas above a block's or below the intrinsic gas, a
    non-transaction, and the body field of the other flavour: ValueError, none queued."""
    pool = Mempool(chain_id=43114, gas_limit=30_000, avalanche=False)
    for bad in (attrs.evolve(_tx(0), chain_id=1), _tx(0, gas=30_001), _tx(0, gas=20_000)):
        with pytest.raises(ValueError):
            pool.add_transactions([_tx(1), bad])
    with pytest.raises(ValueError):
        pool.add_transactions([b"not a transaction"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        pool.add_ext_data(b"x")
    assert pool.pending() == 0


def test_a_sender_that_does_not_recover_is_named() -> None:
    """check_senders names where and which transaction; a recovered sender is remembered."""
    pool = Mempool(chain_id=43114, gas_limit=30_000, avalanche=False)
    good = _tx(0)
    pool.check_senders([good], [pool.encoding(good)], "block x")
    bad = attrs.evolve(good, r=0)
    with pytest.raises(InvalidBlock, match="block x: transaction 1"):
        pool.check_senders([good, bad], [good.encode(), bad.encode()], "block x")
