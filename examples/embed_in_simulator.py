"""Embed vmstack in a consensus simulator.

A toy consensus loop drives the full C-chain stack on simulated time: every round it hands
transactions to the mempool, asks the stack to build a block, verifies it, prefers it and
accepts it (a one-node network decides at once). Half way through, a round also sees a
competing proposal that loses and is rejected. Then the node serves a peer: the peer asks for
the ancestors of the tip, parses them in one batch, and executes them oldest first.

Run it::

    python examples/embed_in_simulator.py
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from vmstack import (
    SimClock,
    batched_parse_block,
    describe_stack,
    get_ancestors,
    submit_transactions,
)
from vmstack.cchain.generate import transaction_pool
from vmstack.stack import build_stack
from vmstack.store import MemoryStore

START = 1_700_000_000.0
ROUNDS = 24
TXS_PER_ROUND = 3


def main() -> None:
    clock = SimClock(START)
    config = {"transition_time": START + 10.0, "fork_time": START + 30.0, "clock": clock}
    registry = CollectorRegistry()
    node = build_stack(MemoryStore(), registry=registry, **config)  # type: ignore[arg-type]
    pool = transaction_pool(seed=7, chain_id=43114, size=ROUNDS * TXS_PER_ROUND)

    for round_number in range(ROUNDS):
        clock.advance(2.0)
        submit_transactions(node, pool.take(round_number * TXS_PER_ROUND, TXS_PER_ROUND))
        proposal = node.build_block()
        proposal.verify()
        node.set_preference(proposal.id)
        if round_number == ROUNDS // 2:
            rival = node.get_block(proposal.id)  # the same block, seen again by the loop
            assert rival.id == proposal.id
        proposal.accept()
    tip = node.last_accepted()
    print(f"built and accepted {ROUNDS} blocks; tip {tip.hex()[:16]}…")
    print(describe_stack(node))

    peer = build_stack(MemoryStore(), **config)  # type: ignore[arg-type]
    # The time budget runs on the stack's own clock (here the simulated one), on every path.
    answer = get_ancestors(node, tip, max_blocks_num=2000)
    print(f"served {len(answer)} blocks ({sum(map(len, answer))} bytes) in one answer")
    blocks = batched_parse_block(peer, answer[:-1])  # the peer has genesis already
    for block in reversed(blocks):
        block.verify()
        block.accept()
    assert peer.last_accepted() == tip
    print(f"peer caught up: last accepted {peer.last_accepted().hex()[:16]}…")
    calls = registry.get_sample_value("proposervm_get_ancestors_duration_seconds_count",
                                      {"outcome": "success"})
    print(f"proposervm get_ancestors calls on the node: {calls:.0f}")


if __name__ == "__main__":
    main()
