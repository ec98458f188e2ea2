"""Embed vmstack in a consensus simulator.

A toy consensus loop drives four nodes, each its own full C-chain stack, on simulated time.
Every round, transactions signed by funded development keys are gossiped to every node (a
node that hears one twice refuses it as a duplicate); the nodes take turns building, and
every node verifies, prefers and accepts the builder's block. Half way through, a second
node proposes a competing block on the same parent, carrying a transaction only it has
heard: the network accepts the first proposal, the rival is rejected everywhere, and its
transaction stays in its builder's pool until a later block includes it. At the end every
transaction was included exactly once and every node has the same state root. Then a new
node catches up: it asks for the ancestors of the tip, parses them in one batch and
executes them oldest first.

Run it::

    python examples/embed_in_simulator.py
"""

from __future__ import annotations

from vmstack import (
    InvalidTransaction,
    SimClock,
    batched_parse_block,
    find_layer,
    get_ancestors,
    submit_transactions,
)
from vmstack.cchain import DEV_KEYS, CChainVM, DynamicFeeTx, address_of, keccak256
from vmstack.interfaces import ChainVM
from vmstack.stack import build_stack
from vmstack.store import MemoryStore

START = 1_700_000_000.0
NODES = 4
ROUNDS = 12
TXS_PER_ROUND = 4


def transfer(key: int, nonce: int, value: int) -> DynamicFeeTx:
    """A signed transfer of ``value`` wei from ``key`` to an address of its own."""
    return DynamicFeeTx(
        chain_id=43114,
        nonce=nonce,
        max_fee_per_gas=50 * 10**9,
        gas=21_000,
        to=keccak256(b"recipient %d" % value)[12:],
        value=value,
    ).sign(key)


def gossip(nodes: list[ChainVM], transactions: list[DynamicFeeTx]) -> int:
    """Hand each transaction to every node, twice (gossip repeats); the duplicates refused."""
    refused = 0
    for node in nodes:
        for _ in range(2):
            for tx in transactions:
                try:
                    submit_transactions(node, [tx])
                except InvalidTransaction:
                    refused += 1
    return refused


def decide(nodes: list[ChainVM], winner: bytes, losers: tuple[bytes, ...] = ()) -> None:
    """Every node verifies the proposals, accepts the winner and rejects the losers."""
    for node in nodes:
        accepted = node.parse_block(winner)
        rejected = [node.parse_block(data) for data in losers]
        for block in (accepted, *rejected):
            block.verify()
        node.set_preference(accepted.id)
        accepted.accept()
        for block in rejected:
            block.reject()


def main() -> None:
    clock = SimClock(START)
    config = {"transition_time": START + 10.0, "fork_time": START + 30.0, "clock": clock}
    nodes = [build_stack(MemoryStore(), **config) for _ in range(NODES)]  # type: ignore[arg-type]
    nonces = [0] * len(DEV_KEYS)
    sent: list[bytes] = []
    duplicates = 0
    for round_number in range(ROUNDS):
        batch = []
        for i in range(TXS_PER_ROUND):
            key = (round_number * TXS_PER_ROUND + i) % 8
            batch.append(transfer(DEV_KEYS[key], nonces[key], len(sent) + 1))
            nonces[key] += 1
            sent.append(batch[-1].hash)
        duplicates += gossip(nodes, batch)
        clock.advance(2.0)
        builder = nodes[round_number % NODES]
        proposal = builder.build_block()
        if round_number == ROUNDS // 2:
            rival_node = nodes[(round_number + 1) % NODES]
            local = transfer(DEV_KEYS[9], nonces[9], 10**6)  # heard by the rival alone
            nonces[9] += 1
            sent.append(local.hash)
            submit_transactions(rival_node, [local])
            rival = rival_node.build_block()
            assert rival.id != proposal.id and rival.parent_id == proposal.parent_id
            decide(nodes, bytes(proposal), (bytes(rival),))
            print(
                f"round {round_number}: the rival proposal lost and was rejected; its "
                "local transaction waits in its builder's pool"
            )
        else:
            decide(nodes, bytes(proposal))
    bottoms = [find_layer(node, CChainVM) for node in nodes]
    while any(bottom.pending_transactions() for bottom in bottoms):
        clock.advance(2.0)
        builder = next(
            node
            for node, bottom in zip(nodes, bottoms, strict=True)
            if bottom.pending_transactions()
        )
        decide(nodes, bytes(builder.build_block()))
    tip = nodes[0].last_accepted()
    included = [
        tx.hash
        for height in range(1, bottoms[0].get_block(tip).height + 1)
        for tx in bottoms[0].get_block(bottoms[0].get_block_id_at_height(height)).transactions
    ]
    assert sorted(included) == sorted(sent), "every transaction exactly once"
    roots = {bottom.get_block(bottom.last_accepted()).header.state_root for bottom in bottoms}
    assert len(roots) == 1
    print(
        f"{len(sent)} transactions gossiped to {NODES} nodes ({duplicates} duplicates "
        f"refused), each included once; one state root {roots.pop().hex()[:16]}…"
    )
    print(f"key 0 sent {bottoms[0].account(address_of(DEV_KEYS[0])).nonce} transactions")

    peer = build_stack(MemoryStore(), **config)  # type: ignore[arg-type]
    # The time budget runs on the stack's own clock (here the simulated one), on every path.
    answer = get_ancestors(nodes[0], tip, max_blocks_num=2000)
    print(f"served {len(answer)} blocks ({sum(map(len, answer))} bytes) in one answer")
    blocks = batched_parse_block(peer, answer[:-1])  # the peer has genesis already
    for block in reversed(blocks):
        block.verify()
        block.accept()
    assert peer.last_accepted() == tip
    print(f"new node caught up: last accepted {peer.last_accepted().hex()[:16]}…")


if __name__ == "__main__":
    main()
