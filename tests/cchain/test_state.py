"""Account state (vmstack.cchain.state and CChainVM): the state root is the trie package's,
verify refuses replays, gaps, double spends, unaffordable transfers and a wrong state root,
siblings verify on one parent, accept persists the state with the block, and a genesis
file allocates accounts."""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trie.hexary import HexaryTrie

from tests.cchain.chains import new_vm
from tests.support.transactions import signed_transfer
from vmstack.cchain import (
    DEV_BALANCE,
    DEV_KEYS,
    Account,
    AccountTrie,
    Block,
    CChainVM,
    DynamicFeeTx,
    Genesis,
    LegacyTx,
    Transaction,
    address_of,
    execute_transactions,
    keccak256,
)
from vmstack.cchain.accounts import state_of
from vmstack.cchain.generate import generate_chain
from vmstack.errors import InvalidBlock, InvalidTransaction
from vmstack.store import MemoryStore

TO = keccak256(b"state recipient")[12:]
POOR = keccak256(b"state: an unfunded key")


def _transfer(
    nonce: int, *, key: int | bytes = DEV_KEYS[0], value: int = 10**18, to: bytes = TO
) -> DynamicFeeTx:
    return signed_transfer(nonce, key=key, to=to, value=value)


def _crafted(vm: CChainVM, txs: Sequence[Transaction]) -> bytes:
    """A block on the preferred block carrying ``txs``, committing to its body and receipts
    (its state root is the parent's: the state rules are what refuse it)."""
    template = vm.build_block()
    body = vm.flavour.body(list(txs))
    receipts = execute_transactions(txs)
    header = attrs.evolve(template.header, gas_used=receipts[-1].cumulative_gas_used)
    header = vm.flavour.seal(header, body, receipts).header
    return vm.flavour.encode_block(Block(header, body))


def _accept_one(vm: CChainVM, txs: Sequence[Transaction]) -> None:
    vm.add_transactions(txs)
    block = vm.build_block()
    block.verify()
    block.accept()


# --- the state root is the trie package's ----------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 40), st.integers(0, 3), st.integers(0, 10**20)), max_size=12
        ),
        max_size=8,
    )
)
def test_the_state_root_equals_the_trie_packages(batches: list[list[tuple[int, int, int]]]) -> None:
    """Random account updates (an empty account removes one), batch by batch: the root of
    the persistent trie equals HexaryTrie's after every batch, and earlier tries keep
    theirs."""
    reference = HexaryTrie({})
    trie = AccountTrie()
    history: list[tuple[AccountTrie, bytes]] = []
    for batch in batches:
        updates = []
        for index, nonce, balance in batch:
            key = keccak256(index.to_bytes(20, "big"))
            account = Account(nonce, balance)
            updates.append((key, account))
            if account.empty:
                if reference.exists(key):
                    del reference[key]
            else:
                reference[key] = account.encode()
        trie = trie.updated(updates)
        assert trie.root_hash == reference.root_hash
        history.append((trie, reference.root_hash))
    for old, root in history:
        assert old.root_hash == root


def test_a_chain_s_state_root_is_the_trie_of_its_stored_accounts() -> None:
    """After a generated chain, the last header's state root is HexaryTrie's over every
    account the VM reports, and accounts move as the transactions say."""
    vm = new_vm(MemoryStore())
    generate_chain(vm, blocks=20, txs_per_block=6, seed=3, clock=vm.clock)  # type: ignore[arg-type]
    reference = HexaryTrie({})
    base = state_of(vm, None)
    for address, account in base.accounts.items():  # type: ignore[union-attr]
        reference[keccak256(address)] = account.encode()
    assert vm.get_block(vm.last_accepted()).header.state_root == reference.root_hash
    sender = vm.account(address_of(DEV_KEYS[0]))
    assert sender.nonce > 0 and sender.balance < DEV_BALANCE
    assert vm.account(keccak256(b"never touched")[12:]) == Account()


# --- verify refuses what the state does not allow --------------------------------------


def test_a_replayed_transaction_is_refused_naming_index_sender_and_nonces() -> None:
    vm = new_vm(MemoryStore())
    first = _transfer(0)
    _accept_one(vm, [first])
    block = vm.parse_block(_crafted(vm, [first]))
    sender = "0x" + address_of(DEV_KEYS[0]).hex()
    with pytest.raises(
        InvalidBlock,
        match=f"transaction 0 from {sender} has nonce 0, "
        r"expected 1 \(a replay\)",
    ):
        block.verify()
    assert vm.processing() == ()


def test_a_nonce_gap_is_refused() -> None:
    vm = new_vm(MemoryStore())
    block = vm.parse_block(_crafted(vm, [_transfer(0), _transfer(2)]))
    with pytest.raises(
        InvalidBlock,
        match=r"transaction 1 from 0x[0-9a-f]{40} has nonce 2, "
        r"expected 1 \(a nonce gap\)",
    ):
        block.verify()


def test_a_double_spend_within_one_block_is_refused() -> None:
    vm = new_vm(MemoryStore())
    tx = _transfer(0)
    block = vm.parse_block(_crafted(vm, [tx, tx]))
    with pytest.raises(
        InvalidBlock,
        match=r"transaction 1 .* nonce 0, expected 1 "
        r"\(a replay\)",
    ):
        block.verify()


def test_an_unaffordable_transfer_is_refused() -> None:
    vm = new_vm(MemoryStore())
    block = vm.parse_block(_crafted(vm, [_transfer(0), _transfer(0, key=POOR)]))
    poor = "0x" + address_of(POOR).hex()
    with pytest.raises(
        InvalidBlock,
        match=f"transaction 1 from {poor} \\(nonce 0, expected "
        r"0\) costs up to .* \(unaffordable\)",
    ):
        block.verify()


def test_a_wrong_state_root_is_refused() -> None:
    """Today's rule: a header that states another root than the post-state's is invalid."""
    vm = new_vm(MemoryStore())
    vm.add_transactions([_transfer(0)])
    block = vm.build_block()
    header = attrs.evolve(block.header, state_root=keccak256(b"another root"))
    forged = vm.parse_block(vm.flavour.encode_block(Block(header, block.body)))
    with pytest.raises(InvalidBlock, match="state root"):
        forged.verify()
    block.verify()


# --- processing blocks, accept, reject, restart ----------------------------------------


def test_two_builders_on_one_parent_one_wins_and_the_loser_s_transactions_return() -> None:
    """Two nodes build different blocks on one parent; both verify on each node; the one
    accepted wins, the other is rejected and its builder includes its transactions next."""
    nodes = [new_vm(MemoryStore()) for _ in range(2)]
    nodes[0].add_transactions([_transfer(0, key=DEV_KEYS[1])])
    loser_txs = [_transfer(0, key=DEV_KEYS[2]), _transfer(1, key=DEV_KEYS[2])]
    nodes[1].add_transactions(loser_txs)
    winner, loser = nodes[0].build_block(), nodes[1].build_block()
    assert winner.id != loser.id and winner.parent_id == loser.parent_id
    for node in nodes:
        blocks = [node.parse_block(bytes(winner)), node.parse_block(bytes(loser))]
        for block in blocks:
            block.verify()
        assert {b.id for b in node.processing()} == {winner.id, loser.id}
        blocks[0].accept()
        blocks[1].reject()
        assert node.last_accepted() == winner.id
    assert nodes[1].pending_transactions() == 2
    nodes[1].clock.advance(2)  # type: ignore[attr-defined]
    again = nodes[1].build_block()
    assert list(again.transactions) == loser_txs
    again.verify()
    again.accept()
    assert nodes[1].pending_transactions() == 0
    assert nodes[1].account(address_of(DEV_KEYS[2])).nonce == 2


def test_a_processing_chain_verifies_over_its_parents_state() -> None:
    """A child of a processing block sees the parent's post-state: the next nonce is valid
    and ``account`` answers for either block."""
    vm = new_vm(MemoryStore())
    vm.add_transactions([_transfer(0)])
    parent = vm.build_block()
    parent.verify()
    vm.set_preference(parent.id)
    vm.add_transactions([_transfer(1)])
    child = vm.build_block()
    assert [tx.nonce for tx in child.transactions] == [1]
    child.verify()
    sender = address_of(DEV_KEYS[0])
    assert vm.account(sender, block_id=parent.id).nonce == 1
    assert vm.account(sender, block_id=child.id).nonce == 2
    assert vm.account(sender).nonce == 0
    parent.accept()
    child.accept()
    assert vm.account(sender).nonce == 2


def test_accept_persists_the_state_and_a_restart_resumes_from_it() -> None:
    store = MemoryStore()
    vm = new_vm(store)
    _accept_one(vm, [_transfer(0), _transfer(1)])
    again = CChainVM(store)
    sender = address_of(DEV_KEYS[0])
    assert again.account(sender) == vm.account(sender)
    assert again.account(TO).balance == 2 * 10**18
    again.add_transactions([_transfer(2)])
    with pytest.raises(InvalidTransaction, match="replay"):
        again.add_transactions([_transfer(1)])


def test_a_duplicate_submission_is_refused_as_a_duplicate() -> None:
    vm = new_vm(MemoryStore())
    vm.add_transactions([_transfer(0)])
    with pytest.raises(InvalidTransaction, match="duplicate"):
        vm.add_transactions([_transfer(0)])
    assert vm.pending_transactions() == 1


# --- genesis -------------------------------------------------------------------------


def test_a_geth_style_genesis_file_allocates_balances_code_and_nonces() -> None:
    funded, contract = address_of(DEV_KEYS[5]), keccak256(b"contract")[12:]
    text = json.dumps(
        {
            "config": {"chainId": 1337},
            "gasLimit": "0x1c9c380",
            "timestamp": "0x10",
            "extraData": "0x01",
            "alloc": {
                funded.hex(): {"balance": "1000000000000000000000"},
                "0x" + contract.hex(): {"balance": "0x0", "code": "0x6000", "nonce": "1"},
            },
        }
    )
    genesis = Genesis.from_json(text)
    vm = CChainVM(MemoryStore(), genesis=genesis)
    assert vm.chain_id == 1337 and vm.gas_limit == 30_000_000
    assert vm.account(funded).balance == 10**21
    assert vm.account(contract) == Account(1, 0, keccak256(b"\x60\x00"))
    head = vm.get_block(vm.last_accepted()).header
    assert head.state_root == genesis.state_root() and head.time == 16
    with pytest.raises(ValueError, match="chain_id"):
        CChainVM(MemoryStore(), genesis=genesis, chain_id=5)
    with pytest.raises(ValueError, match="alloc"):
        Genesis.from_json('{"alloc": {"0x12": {"balance": "1"}}}')


def test_an_unfunded_sender_is_refused_at_submission() -> None:
    vm = new_vm(MemoryStore())
    with pytest.raises(InvalidTransaction, match="balance"):
        vm.add_transactions([LegacyTx(nonce=0, gas_price=25 * 10**9, gas=21_000, to=TO).sign(POOR)])
