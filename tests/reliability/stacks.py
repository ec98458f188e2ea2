"""Stacks and chains for the reliability suites: the full stack from ``build_stack``, a bare
``CChainVM``, and the checks every suite makes of a store and a chain."""

from __future__ import annotations

import functools
from collections.abc import Callable

from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from vmstack import BlockNotFound, SimClock, get_ancestors
from vmstack.batching import serial_get_ancestors
from vmstack.cchain import (
    AVALANCHE,
    CChainVM,
    Flavour,
    decode_receipts,
    generate_chain,
    keccak256,
    rawdb,
)
from vmstack.interfaces import ChainVM
from vmstack.stack import build_stack
from vmstack.store import KeyValueStore
from vmstack.wrappers.proposer import StakingKey

__all__ = [
    "FORK_TIME",
    "START",
    "TRANSITION_TIME",
    "StackFactory",
    "bare_vm",
    "check_ancestors_agree",
    "check_store",
    "chain_of",
    "full_stack",
    "grow",
    "staking_key",
    "store_items",
]

#: Where every suite's simulated clock starts; blocks follow every 2 seconds.
START = 1_000.0
#: The C-chain's transition from the serial pre VM to the batched VM (block 5).
TRANSITION_TIME = START + 10
#: The proposer fork (block 10 is the last pre-fork block).
FORK_TIME = START + 20

StackFactory = Callable[[KeyValueStore, SimClock], ChainVM]


@functools.cache
def staking_key() -> StakingKey:
    """The node's staking key (deterministic, so every run signs as the same node)."""
    return StakingKey.generate(seed=b"reliability")


def full_stack(store: KeyValueStore, clock: SimClock, *, flavour: Flavour = AVALANCHE) -> ChainVM:
    """Every layer ``build_stack`` knows: transition, tracing, metering and the proposer."""
    return build_stack(
        store,
        flavour=flavour,
        clock=clock,
        fork_time=FORK_TIME,
        transition_time=TRANSITION_TIME,
        tracer=NoOpTracer(),
        registry=CollectorRegistry(),
        staking_key=staking_key(),
    )


def bare_vm(store: KeyValueStore, clock: SimClock, *, flavour: Flavour = AVALANCHE) -> ChainVM:
    """The C-chain VM alone."""
    return CChainVM(store, flavour=flavour, clock=clock)


def grow(vm: ChainVM, clock: SimClock, blocks: int, *, seed: int = 7, txs: int = 3) -> list[bytes]:
    """Accept ``blocks`` generated blocks on ``vm``; their IDs, oldest first."""
    return generate_chain(vm, blocks=blocks, txs_per_block=txs, seed=seed, clock=clock)


def store_items(store: KeyValueStore) -> dict[bytes, bytes]:
    """Every key and value of ``store``, copied."""
    return {bytes(key): bytes(value) for key, value in store.iterate(b"")}


def chain_of(vm: ChainVM, head: bytes) -> list[bytes]:
    """The bytes of ``head`` and all its ancestors, newest first, by ``get_block``."""
    out: list[bytes] = []
    block_id = head
    while True:
        try:
            block = vm.get_block(block_id)
        except BlockNotFound:
            return out
        out.append(bytes(block))
        if block.height == 0:
            return out
        block_id = block.parent_id


def check_store(store: KeyValueStore, *, flavour: Flavour = AVALANCHE) -> int:
    """Check a C-chain store block by block and return its last accepted height.

    Every canonical height from 0 to the last accepted block has a complete block: header
    and body present and decoding, the header hashing to its key, the number entry agreeing,
    the parent being the canonical block one below, receipts present for settled heights
    and matching the transaction count; the head pointers name complete blocks.
    """
    schema = rawdb.Schema(b"")
    with store.snapshot() as snap:
        head = rawdb.read_last_accepted_hash(snap, schema)
        assert head is not None, "no last accepted pointer"
        height = rawdb.read_header_number(snap, schema, head)
        assert height is not None, "the head has no number entry"
        settled_hash = rawdb.read_last_settled_hash(snap, schema)
        settled = (
            height if settled_hash is None else rawdb.read_header_number(snap, schema, settled_hash)
        )
        assert settled is not None and settled <= height
        parent: bytes | None = None
        for number in range(height + 1):
            block_hash = rawdb.read_canonical_hash(snap, schema, number)
            assert block_hash is not None, f"no canonical block at {number}"
            assert rawdb.read_header_number(snap, schema, block_hash) == number
            header_rlp = rawdb.read_header_rlp(snap, schema, number, block_hash)
            body_rlp = rawdb.read_body_rlp(snap, schema, number, block_hash)
            assert header_rlp is not None and body_rlp is not None, f"block {number} is partial"
            assert keccak256(header_rlp) == block_hash
            block = flavour.block_from_parts(bytes(header_rlp), bytes(body_rlp), block_hash)
            assert block.number == number
            if parent is not None:
                assert block.parent_hash == parent
            receipts = rawdb.read_receipts_rlp(snap, schema, number, block_hash)
            if number <= settled:
                assert receipts is not None, f"settled block {number} has no receipts"
                assert len(decode_receipts(bytes(receipts))) == len(block.transactions)
            parent = block_hash
        assert rawdb.read_canonical_hash(snap, schema, height + 1) is None
        assert rawdb.read_head_header_hash(snap, schema) == head
    return height


def check_ancestors_agree(vm: ChainVM, head: bytes) -> list[bytes]:
    """``get_ancestors`` from ``head`` equals the serial walk and the chain by ``get_block``;
    returns the answer."""
    batched = get_ancestors(vm, head, max_blocks_num=10_000, max_retrieval_time=60.0)
    assert batched == serial_get_ancestors(vm, head, max_blocks_num=10_000, max_retrieval_time=60.0)
    assert batched == chain_of(vm, head)
    return batched
