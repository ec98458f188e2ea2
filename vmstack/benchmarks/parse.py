"""Benchmark case: BatchedParseBlock, batched against serial ``parse_block``, at 4, 10 and 100
blocks.

The blocks are the newest of a generated chain (10 signed transactions each), as they come
in an Ancestors answer, parsed again by the VM that built them (parsing reads nothing from
the store, so the cost is a fresh node's; through a transition layer the node must be past
the transition to parse blocks after it):

- fast: one ``batched_parse_block`` call for the whole batch;
- baseline: the fallback, one ``parse_block`` call per block through the same VM;
- floor: keccak256 of each block's header slice, the ID every parse has to compute (for
  bare C-chain blocks; a stack whose blocks are a layer's envelopes has no floor row).

Both paths parse lazily (hash the header slice, decode the header, check the body's
framing; transactions wait for ``verify``). The notes give what an eager parse costs per
block (the whole block decoded, transactions included), the work the lazy parse defers.
The VM is a parameter (``make_vm``), so the case runs through a whole stack too, where the
serial path pays every layer once per block.
"""

from __future__ import annotations

from collections.abc import Callable

from vmstack.batching import (
    MAX_CONTAINERS_LEN,
    batched_parse_block,
    get_ancestors,
    serial_parse_block,
)
from vmstack.benchmarks import Comparison, calls_filling, median_seconds
from vmstack.cchain.codec import AVALANCHE
from vmstack.cchain.crypto import keccak256
from vmstack.cchain.generate import generate_chain
from vmstack.cchain.rlpbytes import header_slice
from vmstack.cchain.vm import CChainVM
from vmstack.clock import Clock, SimClock
from vmstack.errors import InvalidBlock
from vmstack.interfaces import ChainVM
from vmstack.store import KeyValueStore, MemoryStore

__all__ = ["BATCH_SIZES", "TXS_PER_BLOCK", "run"]

#: Blocks per batch, one row each.
BATCH_SIZES = (4, 10, 100)
#: Signed transactions per block.
TXS_PER_BLOCK = 10

GROUP = "BatchedParseBlock"
GOAL = ">= 1x serial (bare VM); gains grow with the layers above"
_START = 1_700_000_000.0


def _bare_vm(store: KeyValueStore, clock: Clock) -> ChainVM:
    return CChainVM(store, clock=clock)


def _are_chain_blocks(blocks: list[bytes]) -> bool:
    """Whether the answer holds bare C-chain blocks (not a layer's envelopes), which the
    floor and the eager decode apply to."""
    try:
        for data in blocks:
            AVALANCHE.decode_header(header_slice(data))
    except InvalidBlock:
        return False
    return True


def run(quick: bool, *,
        make_vm: Callable[[KeyValueStore, Clock], ChainVM] = _bare_vm) -> list[Comparison]:
    """One row per batch size: batched vs serial parse, with the ID-hashing floor."""
    largest = max(BATCH_SIZES)
    clock = SimClock(_START)
    source = make_vm(MemoryStore(), clock)
    ids = generate_chain(source, blocks=largest, txs_per_block=TXS_PER_BLOCK, seed=2,
                         clock=clock)
    newest = get_ancestors(source, ids[-1], max_blocks_num=largest,
                           max_blocks_size=MAX_CONTAINERS_LEN * 64, max_retrieval_time=600.0)
    parser = source
    chain_blocks = _are_chain_blocks(newest)
    budget = 0.002 if quick else 0.02
    repeat = 5 if quick else 9
    rows: list[Comparison] = []
    for size in BATCH_SIZES:
        batch = newest[:size]

        def batched(blocks: list[bytes] = batch) -> object:
            return batched_parse_block(parser, blocks)

        def serial(blocks: list[bytes] = batch) -> object:
            return serial_parse_block(parser, blocks)

        def floor(blocks: list[bytes] = batch) -> object:
            return [keccak256(header_slice(data)) for data in blocks]

        def eager(blocks: list[bytes] = batch) -> object:
            return [AVALANCHE.decode_block(data) for data in blocks]

        fast_seconds, serial_seconds = (
            median_seconds(op, repeat=repeat, number=calls_filling(op, budget))
            for op in (batched, serial))
        notes: dict[str, float | int | str] = {
            "blocks": size,
            "batch_bytes": sum(map(len, batch)),
            "parse_us_per_block": round(fast_seconds / size * 1e6, 2),
        }
        floor_seconds = None
        if chain_blocks:
            floor_seconds = median_seconds(floor, repeat=repeat,
                                           number=calls_filling(floor, budget))
            eager_seconds = median_seconds(eager, repeat=3, number=1)
            notes["eager_decode_us_per_block"] = round(eager_seconds / size * 1e6, 2)
        rows.append(Comparison(
            group=GROUP,
            case=f"{size} blocks x {TXS_PER_BLOCK} txs",
            fast_seconds=fast_seconds,
            baseline_seconds=serial_seconds,
            floor_seconds=floor_seconds,
            fast_label="batched_parse_block",
            baseline_label="parse_block per block",
            floor_label="keccak of header slices",
            goal=GOAL,
            notes=notes,
        ).judged(min_speedup=1.0))
    return rows
