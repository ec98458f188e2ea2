"""Four nodes fork at the transition height and at a post-fork height, and agree.

Each node is its own full C-chain stack (transition layer, proposer layer) on one simulated
clock; the transition time is the fork time, so the transition block is the last pre-fork
block and its child the first post-fork block. Every transaction is gossiped to every
node. The script drives the nodes as a Snowman engine does (docs/decisions.md):

1. Two nodes propose competing transition blocks, T1 and T2; every node verifies both and
   prefers T1, and a third node builds C1 on T1 while T1 is still processing.
2. The polls swing: every node switches its preference to T2 (the first switch), and a
   fourth node builds C2 on T2. T2 and C2 are accepted; T1 and C1 are rejected.
3. After the fork two nodes propose P1 and P2 on C2; every node prefers P1, then switches to
   P2 (the second switch), a node builds Q on P2, and P2 and Q are accepted while P1 is
   rejected.

The rejected branches' transactions never left the pools, so later blocks include what
the accepted chain lacks. At the end every transaction is included exactly once on the
accepted chain, and every node has the same blocks at every height and the same state root.

Run it::

    python examples/decisions_fork.py
"""

from __future__ import annotations

from typing import Any

from vmstack import SimClock, find_layer, submit_transactions
from vmstack.cchain import DEV_KEYS, CChainVM, DynamicFeeTx, keccak256
from vmstack.interfaces import Block, ChainVM
from vmstack.stack import build_stack
from vmstack.store import MemoryStore
from vmstack.transition import TransitionVM
from vmstack.wrappers.proposer import ProposerVM

START = 1_700_000_000.0
TRANSITION_TIME = START + 10.0
NODES = 4


class Network:
    """Four nodes, each with the blocks it has verified so far (by ID)."""

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        options: dict[str, Any] = {"transition_time": TRANSITION_TIME, "fork_time": TRANSITION_TIME}
        self.nodes: list[ChainVM] = [
            build_stack(MemoryStore(), clock=clock, **options) for _ in range(NODES)
        ]
        self.verified: list[dict[bytes, Block]] = [{} for _ in range(NODES)]
        self.nonces = [0] * len(DEV_KEYS)
        self.sent: list[bytes] = []

    def gossip(self, count: int) -> None:
        """Sign ``count`` transfers and hand each to every node."""
        batch = []
        for _ in range(count):
            key = len(self.sent) % 8
            tx = DynamicFeeTx(
                chain_id=43114,
                nonce=self.nonces[key],
                max_fee_per_gas=50 * 10**9,
                gas=21_000,
                to=keccak256(b"recipient %d" % len(self.sent))[12:],
                value=len(self.sent) + 1,
            ).sign(DEV_KEYS[key])
            self.nonces[key] += 1
            self.sent.append(tx.hash)
            batch.append(tx)
        for node in self.nodes:
            submit_transactions(node, batch)

    def propose(self, builder: int, parent: bytes) -> bytes:
        """Node ``builder`` builds on ``parent`` a second later; every node verifies the
        proposal. Returns its ID."""
        self.clock.advance(1.0)
        node = self.nodes[builder]
        node.set_preference(parent)
        data = bytes(node.build_block())
        for index, peer in enumerate(self.nodes):
            block = peer.parse_block(data)
            block.verify()
            self.verified[index][block.id] = block
        return block.id

    def carried(self, block_id: bytes) -> set[bytes]:
        """The hashes of the transactions the verified block ``block_id`` carries."""
        block = self.verified[0][block_id]
        while not hasattr(block, "transactions"):
            block = block.inner  # type: ignore[attr-defined]
        return {tx.hash for tx in block.transactions}

    def prefer(self, block_id: bytes) -> None:
        for node in self.nodes:
            node.set_preference(block_id)

    def accept(self, *accepted: bytes, rejected: tuple[bytes, ...] = ()) -> None:
        """Every node accepts ``accepted`` in order, then rejects ``rejected`` in order."""
        for node, verified in zip(self.nodes, self.verified, strict=True):
            for block_id in accepted:
                node.set_preference(block_id)
                verified.pop(block_id).accept()
            for block_id in rejected:
                verified.pop(block_id).reject()

    def drain(self) -> int:
        """Build and accept blocks until no node has a transaction pending; their number."""
        bottoms = [find_layer(node, CChainVM) for node in self.nodes]
        built = 0
        while any(bottom.pending_transactions() for bottom in bottoms):
            builder = next(i for i, b in enumerate(bottoms) if b.pending_transactions())
            self.accept(self.propose(builder, self.nodes[builder].last_accepted()))
            built += 1
        return built


def main() -> None:
    clock = SimClock(START)
    network = Network(clock)
    for round_number in range(3):
        network.gossip(2)
        clock.advance(1.0)
        network.accept(network.propose(round_number % NODES, network.nodes[0].last_accepted()))
    tip = network.nodes[0].last_accepted()

    # 1. A fork at the transition height, and a child on the processing transition block.
    network.gossip(4)
    clock.advance(TRANSITION_TIME - clock() - 1.0)
    t1 = network.propose(0, tip)
    t2 = network.propose(1, tip)
    network.prefer(t1)
    network.gossip(2)
    c1 = network.propose(2, t1)
    assert network.verified[0][t1].timestamp >= TRANSITION_TIME
    assert not any(find_layer(node, TransitionVM).transitioned for node in network.nodes)
    assert all(verified[c1].post_fork for verified in network.verified)  # type: ignore[attr-defined]
    print("fork at the transition height: T1 and T2 verified everywhere; C1 built on T1")

    # 2. The first switch: to T2; C2 built on it; the T2 branch wins.
    network.prefer(t2)
    c2 = network.propose(3, t2)
    lost = network.carried(t1) | network.carried(c1)
    network.accept(t2, c2, rejected=(t1, c1))
    assert all(find_layer(node, TransitionVM).transitioned for node in network.nodes)
    print("preference switched to T2: T2 and C2 accepted, T1 and C1 rejected")

    # 3. A fork after the fork; the second switch: to P2; Q built on it; the P2 branch wins.
    network.gossip(4)
    p1 = network.propose(0, c2)
    p2 = network.propose(1, c2)
    network.prefer(p1)
    network.prefer(p2)
    q = network.propose(2, p2)
    lost |= network.carried(p1)
    network.accept(p2, q, rejected=(p1,))
    assert all(find_layer(node, ProposerVM).last_accepted() == q for node in network.nodes)
    print("fork at a post-fork height: preference switched to P2; P2 and Q accepted, P1 rejected")

    drained = network.drain()
    bottoms = [find_layer(node, CChainVM) for node in network.nodes]
    heights = bottoms[0].get_block(bottoms[0].last_accepted()).height
    chains = {
        tuple(node.get_block_id_at_height(h) for h in range(heights + 1)) for node in network.nodes
    }
    assert len(chains) == 1, "every node has the same block at every height"
    included = [
        tx.hash
        for height in range(1, heights + 1)
        for tx in bottoms[0].get_block(bottoms[0].get_block_id_at_height(height)).transactions
    ]
    assert sorted(included) == sorted(network.sent), "every transaction exactly once"
    roots = {bottom.get_block(bottom.last_accepted()).header.state_root for bottom in bottoms}
    assert len(roots) == 1
    assert lost and lost <= set(included)
    print(f"the rejected branches carried {len(lost)} transactions; all are on the accepted chain")
    print(
        f"{len(network.sent)} transactions, each included once on the accepted chain of "
        f"{heights} blocks ({drained} more built to drain the pools); {NODES} nodes agree "
        f"on every height and on the state root {roots.pop().hex()[:16]}…"
    )


if __name__ == "__main__":
    main()
