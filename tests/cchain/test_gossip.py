"""Four nodes in one process, each its own stack, every transaction gossiped to every node
and builders taking turns: each transaction is included exactly once, repeated gossip is
refused as a duplicate, and every node ends with the same state root; and the user's own
layers sit where ``extra_layers`` puts them."""

from __future__ import annotations

from collections.abc import Callable

from vmstack import SimClock, build_stack, describe_stack, find_layer, submit_transactions
from vmstack.cchain import DEV_KEYS, CChainVM, DynamicFeeTx, Genesis, address_of, keccak256
from vmstack.errors import InvalidTransaction
from vmstack.interfaces import ChainVM
from vmstack.store import MemoryStore

NODES = 4
ROUNDS = 9
PER_ROUND = 10
START = 1_700_000_000.0


def _transactions() -> list[DynamicFeeTx]:
    """90 transfers, ten keys, consecutive nonces per key."""
    return [
        DynamicFeeTx(
            chain_id=43114,
            nonce=i // 10,
            max_fee_per_gas=50 * 10**9,
            gas=21_000,
            to=keccak256(b"gossip %d" % i)[12:],
            value=i + 1,
        ).sign(DEV_KEYS[i % 10])
        for i in range(ROUNDS * PER_ROUND)
    ]


def test_gossip_to_every_node_includes_each_transaction_once() -> None:
    clock = SimClock(START)
    nodes = [build_stack(MemoryStore(), clock=clock, fork_time=START) for _ in range(NODES)]
    txs = _transactions()
    duplicates = 0
    included: list[bytes] = []
    for round_number in range(ROUNDS):
        batch = txs[round_number * PER_ROUND : (round_number + 1) * PER_ROUND]
        for node in nodes:
            for tx in batch:
                submit_transactions(node, [tx])
                try:
                    submit_transactions(node, [tx])  # the same gossip, heard twice
                except InvalidTransaction as error:
                    assert "duplicate" in error.reason
                    duplicates += 1
        clock.advance(2.0)
        builder = nodes[round_number % NODES]
        block = builder.build_block()
        for node in nodes:
            peer = node.parse_block(bytes(block))
            peer.verify()
            node.set_preference(peer.id)
            peer.accept()
        included += [
            tx.hash
            for tx in find_layer(builder, CChainVM)
            .get_block(find_layer(builder, CChainVM).last_accepted())
            .transactions
        ]
    assert duplicates == NODES * len(txs)
    assert sorted(included) == sorted(tx.hash for tx in txs)
    roots = {
        find_layer(node, CChainVM)
        .get_block(find_layer(node, CChainVM).last_accepted())
        .header.state_root
        for node in nodes
    }
    assert len(roots) == 1
    for node in nodes:
        assert find_layer(node, CChainVM).pending_transactions() == 0
        assert find_layer(node, CChainVM).account(address_of(DEV_KEYS[3])).nonce == ROUNDS


def test_extra_layers_sit_over_their_position_under_its_traced_and_metered_layers() -> None:
    from opentelemetry.trace import NoOpTracer
    from prometheus_client import CollectorRegistry

    from vmstack.wrappers import TracedVM

    def marker(name: str) -> Callable[[ChainVM], ChainVM]:
        """A user's layer: a traced layer named ``name``."""
        return lambda inner: TracedVM(inner, tracer=NoOpTracer(), name=name)

    vm = build_stack(
        MemoryStore(),
        clock=SimClock(START),
        fork_time=START,
        tracer=NoOpTracer(),
        registry=CollectorRegistry(),
        genesis=Genesis({address_of(DEV_KEYS[0]): 10**20}),
        extra_layers={"C": [marker("c1"), marker("c2")], "proposervm": [marker("p1")]},
    )
    labels = [layer.label for layer in describe_stack(vm)]
    assert labels == [
        "TracedVM(proposervm)",
        "MeteredVM(proposervm)",
        "TracedVM(p1)",
        "ProposerVM",
        "TracedVM(C)",
        "MeteredVM(C)",
        "TracedVM(c2)",
        "TracedVM(c1)",
        "CChainVM",
    ]
    assert find_layer(vm, CChainVM).account(address_of(DEV_KEYS[1])).balance == 0
