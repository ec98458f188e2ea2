"""Benchmark cases across the process boundary: what batching saves when every call is a
gRPC round trip to a VM in another process.

A chain of 2000 blocks of 10 signed transactions (300 in quick mode) is generated on an
:class:`~vmstack.store.LMDBStore`; then :func:`~vmstack.wrappers.rpc.spawn` serves its
C-chain VM from a child process (``vmstack serve``), and the engine's side calls it through
a :class:`~vmstack.wrappers.rpc.VMClient`:

- GetAncestors: fast is one batched ``get_ancestors`` of the whole chain (one round trip);
  the baseline is the fallback walk, one ``get_block`` round trip per block (each restoring
  the block the honest way on the served side), timed on the newest ``SERIAL_BLOCKS``
  blocks and scaled to the request;
- BatchedParseBlock at 4, 10 and 100 blocks: fast is one ``batched_parse_block`` round trip
  for the batch; the baseline is one ``parse_block`` round trip per block.

The floor of each row is the same call on the same chain in this process, with no
boundary at all (a VM over the same store, opened read-only), so ``vs floor`` is what
crossing costs on top of the work itself. The notes' ``round_trip_us`` is one small call
that always crosses (``get_block_id_at_height`` of the tip). Every row's sides are timed in
alternating rounds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from vmstack.batching import (
    batched_parse_block,
    get_ancestors,
    serial_get_ancestors,
    serial_parse_block,
)
from vmstack.benchmarks import Comparison, alternated_medians, calls_filling
from vmstack.benchmarks.parse import BATCH_SIZES
from vmstack.cchain.generate import generate_chain
from vmstack.cchain.vm import CChainVM
from vmstack.clock import SimClock
from vmstack.store import LMDBStore
from vmstack.wrappers.rpc import spawn

__all__ = ["ANCESTORS_GOAL", "BLOCKS", "PARSE_GOAL", "QUICK_BLOCKS", "SERIAL_BLOCKS", "run"]

#: Blocks in the chain and in the GetAncestors request.
BLOCKS = 2000
#: Blocks in quick mode.
QUICK_BLOCKS = 300
#: Blocks the serial walk is timed on.
SERIAL_BLOCKS = 150
#: Signed transactions per block.
TXS_PER_BLOCK = 10
ANCESTORS_GOAL = ">= 100x serial walk"
PARSE_GOAL = ">= 5x at 100 blocks, >= 1x from 4"

_START = 1_700_000_000.0
#: No byte budget to speak of: the largest one avalanchego's protocol carries (an int32).
_NO_LIMIT = (1 << 31) - 1
_TIME_BUDGET = 600.0


def run(quick: bool) -> list[Comparison]:
    """One GetAncestors row and one BatchedParseBlock row per batch size, over a served
    process."""
    blocks = QUICK_BLOCKS if quick else BLOCKS
    serial_blocks = 40 if quick else SERIAL_BLOCKS
    repeat = 5 if quick else 9
    budget = 0.01 if quick else 0.05
    with tempfile.TemporaryDirectory(prefix="vmstack-bench-rpc-") as directory:
        data_dir = Path(directory) / "chain"
        clock = SimClock(_START)
        with LMDBStore(data_dir, sync=False) as store:
            ids = generate_chain(
                CChainVM(store, clock=clock),
                blocks=blocks,
                txs_per_block=TXS_PER_BLOCK,
                seed=3,
                clock=clock,
            )
        tip = ids[-1]
        with (
            LMDBStore(data_dir, readonly=True) as store,
            spawn(data_dir, readonly=True, timeout=120.0) as client,
        ):
            local = CChainVM(store, clock=clock)

            def ancestors_over(vm: object, count: int) -> list[bytes]:
                return get_ancestors(
                    vm,  # type: ignore[arg-type]
                    tip,
                    max_blocks_num=count,
                    max_blocks_size=_NO_LIMIT,
                    max_retrieval_time=_TIME_BUDGET,
                )

            answer = ancestors_over(client, blocks)
            walked = serial_get_ancestors(
                client,
                tip,
                max_blocks_num=serial_blocks,
                max_blocks_size=_NO_LIMIT,
                max_retrieval_time=_TIME_BUDGET,
            )
            if answer != ancestors_over(local, blocks) or walked != answer[:serial_blocks]:
                raise ValueError("the answers across the boundary differ from in process")

            def serial_walk() -> object:
                return serial_get_ancestors(
                    client,
                    tip,
                    max_blocks_num=serial_blocks,
                    max_blocks_size=_NO_LIMIT,
                    max_retrieval_time=_TIME_BUDGET,
                )

            def round_trip_call() -> object:
                # GetBlockIDAtHeight always crosses (the client keeps no heights): a
                # small request, one store read, a small answer.
                return client.get_block_id_at_height(blocks)

            fast, serial_part, floor, round_trip = alternated_medians(
                (
                    lambda: ancestors_over(client, blocks),
                    serial_walk,
                    lambda: ancestors_over(local, blocks),
                    round_trip_call,
                ),
                repeat=repeat,
                number=(1, 1, 1, 20),
            )
            serial = serial_part * blocks / serial_blocks
            rows = [
                Comparison(
                    group="GetAncestors over gRPC",
                    case=f"{blocks} blocks x {TXS_PER_BLOCK} txs, served process",
                    fast_seconds=fast,
                    baseline_seconds=serial,
                    floor_seconds=floor,
                    fast_label="get_ancestors: one round trip",
                    baseline_label="get_block round trip per block (scaled)",
                    floor_label="get_ancestors in process, no boundary",
                    goal=ANCESTORS_GOAL,
                    notes={
                        "blocks": blocks,
                        "answer_bytes": sum(map(len, answer)),
                        "serial_walk_timed_on_blocks": serial_blocks,
                        "round_trip_us": round(round_trip * 1e6, 1),
                    },
                ).judged(min_speedup=100.0)
            ]
            for size in BATCH_SIZES:
                batch = answer[:size]

                def batched(data: list[bytes] = batch) -> object:
                    return batched_parse_block(client, data)

                def one_by_one(data: list[bytes] = batch) -> object:
                    return serial_parse_block(client, data)

                def in_process(data: list[bytes] = batch) -> object:
                    return batched_parse_block(local, data)

                operations = (batched, one_by_one, in_process)
                fast, serial, floor = alternated_medians(
                    operations,
                    repeat=repeat,
                    number=[calls_filling(operation, budget) for operation in operations],
                )
                rows.append(
                    Comparison(
                        group="BatchedParseBlock over gRPC",
                        case=f"{size} blocks x {TXS_PER_BLOCK} txs, served process",
                        fast_seconds=fast,
                        baseline_seconds=serial,
                        floor_seconds=floor,
                        fast_label="batched_parse_block: one round trip",
                        baseline_label="parse_block round trip per block",
                        floor_label="batched_parse_block in process, no boundary",
                        goal=PARSE_GOAL,
                        notes={
                            "blocks": size,
                            "batch_bytes": sum(map(len, batch)),
                            "round_trip_us": round(round_trip * 1e6, 1),
                        },
                    ).judged(min_speedup=5.0 if size >= 100 else 1.0)
                )
    return rows
