"""The C-chain's transactions as gossip between nodes joined by plain calls: what is
submitted at one node is pushed to another and built into its block; a node that missed
it pulls it; an accepted block's transactions are no longer held or pushed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vmstack.cchain import CChainVM
from vmstack.cchain.generate import dev_transactions
from vmstack.errors import InvalidTransaction
from vmstack.gossip import (
    CORETH_GOSSIP,
    BranchingFactor,
    GossipTransaction,
    SendConfig,
    TransactionGossip,
    TransactionMarshaller,
    parse_push_gossip,
)
from vmstack.gossip.pull import ResponseCallback
from vmstack.store import MemoryStore


class Network:
    """Nodes by ID; a push reaches the nodes its config names (here: its node IDs), a pull
    asks one peer and answers at once."""

    def __init__(self) -> None:
        self.nodes: dict[bytes, TransactionGossip] = {}
        self.pushes: list[tuple[bytes, SendConfig, bytes]] = []
        self.ask: dict[bytes, bytes] = {}

    def join(self, node_id: bytes, now: Callable[[], float]) -> TransactionGossip:
        def send_push(config: SendConfig, payload: bytes) -> None:
            self.pushes.append((node_id, config, payload))
            for peer in config.node_ids:
                if peer != node_id:
                    self.nodes[peer].app_gossip(payload)

        def send_request(payload: bytes, on_response: ResponseCallback) -> None:
            peer = self.ask[node_id]
            on_response(peer, self.nodes[peer].app_request(payload))

        gossip = TransactionGossip(
            CChainVM(MemoryStore()),
            validator_weights=lambda: {peer: 1 for peer in self.nodes},
            send_push=send_push,
            send_request=send_request,
            clock=now,
        )
        self.nodes[node_id] = gossip
        return gossip


def test_coreths_parameters_are_the_defaults() -> None:
    assert CORETH_GOSSIP.push_gossip == BranchingFactor(stake_percentage=0.9, validators=100)
    assert CORETH_GOSSIP.push_regossip == BranchingFactor(validators=10)
    assert CORETH_GOSSIP.target_message_size == 20 * 1024
    assert (CORETH_GOSSIP.bloom_min_target_elements, CORETH_GOSSIP.discarded_size) == (
        8_192,
        16_384,
    )
    assert (CORETH_GOSSIP.push_frequency, CORETH_GOSSIP.pull_frequency) == (0.1, 1.0)
    assert CORETH_GOSSIP.regossip_frequency == 30.0


def test_a_transaction_travels_in_its_typed_form_named_by_its_hash() -> None:
    vm = CChainVM(MemoryStore())
    for tx in dev_transactions(vm, 12, seed=3):
        item = GossipTransaction.of(tx)
        marshaller = TransactionMarshaller()
        assert marshaller.marshal(item) == tx.encode()
        assert marshaller.gossip_id(item) == tx.hash
        assert marshaller.unmarshal(tx.encode()) == item
    with pytest.raises(ValueError):
        marshaller.unmarshal(b"\x02\xc0")


def test_pushed_transactions_are_built_into_the_receivers_block() -> None:
    now = [100.0]
    network = Network()
    alice = network.join(b"a" * 20, lambda: now[0])
    bob = network.join(b"b" * 20, lambda: now[0])
    txs = dev_transactions(alice.vm, 3, seed=7)
    assert alice.submit(txs) == 3
    alice.push()
    ((sender, config, payload),) = network.pushes
    assert sender == b"a" * 20 and payload[0] == 0
    assert parse_push_gossip(payload[1:]) == [tx.encode() for tx in txs]
    assert set(config.node_ids) <= {b"a" * 20, b"b" * 20} and config.validators == 100
    assert bob.handler.statistics.added == 3
    assert bob.push_gossiper.unsent == 0  # only local submissions are pushed

    bob_vm = bob.vm
    assert isinstance(bob_vm, CChainVM)
    block = bob_vm.build_block()
    block.verify()
    block.accept()
    included = [tx.hash for tx in block.transactions]
    assert sorted(included) == sorted(tx.hash for tx in txs)
    assert alice.on_accepted(included) == 3 and bob.on_accepted(included) == 3
    now[0] += 31
    network.pushes.clear()
    alice.push()  # dropped from the pool's view: never regossiped
    assert network.pushes == [] and alice.push_gossiper.statistics.dropped == 3


def test_a_node_that_missed_a_push_pulls_what_it_lacks() -> None:
    now = [100.0]
    network = Network()
    alice = network.join(b"a" * 20, lambda: now[0])
    carol = network.join(b"c" * 20, lambda: now[0])
    network.ask[b"c" * 20] = b"a" * 20
    txs = dev_transactions(alice.vm, 4, seed=9)
    alice.submit(txs)
    carol.pull()
    assert carol.pull_gossiper.statistics.added == 4
    assert alice.handler.last_hit_rate == 0.0
    carol.pull()  # carol's filter now holds all four: nothing comes back
    assert carol.pull_gossiper.statistics.items == 4
    assert alice.handler.last_hit_rate == 100.0
    assert {item.gossip_id for item in carol.held.iterate()} == {tx.hash for tx in txs}


def test_a_refused_transaction_is_counted_and_not_held() -> None:
    now = [100.0]
    network = Network()
    alice = network.join(b"a" * 20, lambda: now[0])
    bob = network.join(b"b" * 20, lambda: now[0])
    (tx,) = dev_transactions(alice.vm, 1, seed=11)
    bob.submit([tx])
    alice.submit([tx])
    alice.push()  # bob has it already: a duplicate, refused
    assert bob.handler.statistics.refused == 1 and len(bob.held) == 1
    with pytest.raises(InvalidTransaction):
        alice.submit([tx])
