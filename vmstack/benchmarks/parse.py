"""Benchmark case: BatchedParseBlock, batched against serial ``parse_block``, at 4, 10 and 100
blocks, on the bare C-chain VM and through the full stack on signed post-fork blocks.

The blocks are the newest of a generated chain (10 signed transactions each), as they come
in an Ancestors answer, parsed again by the VM that built them (parsing reads nothing from
the store, so the cost is a fresh node's; through a transition layer the node must be past
the transition to parse blocks after it):

- fast: one ``batched_parse_block`` call for the whole batch;
- baseline: the fallback, one ``parse_block`` call per block through the same VM (what an
  engine without batching does);
- floor: keccak256 of each block's header slice, the ID every parse has to compute (for
  bare C-chain blocks; a stack whose blocks are a layer's envelopes has no floor row).

The bare VM rows: both paths parse lazily (hash the header slice, decode the header, check
the body's framing; transactions wait for ``verify``), the same work, so the goal is at par
with serial (0.9x, within the noise) and within 5x the floor; the notes give what an eager
parse costs per block (the whole block decoded), the work the lazy parse defers, and the
strict header decode alone, most of what the parse costs beyond the floor. Every
signed row empties the process's caches of verified signatures before each call, on both
sides, so it times a node that has not seen the blocks.

The signed rows run the whole stack a live node runs (:func:`signed_stack`: C-chain VM,
transition, the layers named ``C``, the proposer layer from the first block, signing with
a P-256 staking key, the layers named ``proposervm``): every block is an envelope whose
signature a parse must check, the costly part, which the batched parse shares between
this process and the stack's :class:`~vmstack.parsepool.ParsePool` (its default size, one
worker fewer than the cores; below its threshold a batch stays serial), timed once its
workers are ready. The cold row times the first batch of a stack just built with the pool,
while its workers are still starting in the background (that batch is parsed serially,
and must be no slower than the serial parse), against the first serial parse of a stack
just built without one; the process's fork server, started by the rows before it, has
the workers' modules loaded, so a worker starts with a fork (the fork server's own start,
once a process, is the start-up rows' worker import). A second group gives the 100-block
ratio by worker count (1, 2, the cores; 0 is batched with every check in this process). In
every row fast and baseline are timed in alternating rounds, so load from other processes
on the machine falls on both alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from opentelemetry import trace
from prometheus_client import CollectorRegistry

from vmstack.batching import (
    MAX_CONTAINERS_LEN,
    batched_parse_block,
    get_ancestors,
    serial_parse_block,
)
from vmstack.benchmarks import Comparison, alternated_medians, calls_filling, median_seconds
from vmstack.cchain.codec import AVALANCHE
from vmstack.cchain.generate import generate_chain
from vmstack.cchain.rlpbytes import header_slice
from vmstack.cchain.vm import CChainVM
from vmstack.clock import Clock, SimClock
from vmstack.closing import close_stack
from vmstack.errors import InvalidBlock
from vmstack.interfaces import ChainVM, find_layer
from vmstack.keccak import keccak256
from vmstack.parsepool import available_cores
from vmstack.stack import build_stack
from vmstack.store import KeyValueStore, MemoryStore
from vmstack.verifycache import clear_all
from vmstack.wrappers.proposer import ProposerVM, StakingKey

__all__ = ["BATCH_SIZES", "COLD_GOAL", "SIGNED_GOALS", "TXS_PER_BLOCK", "run", "signed_stack"]

#: Blocks per batch, one row each.
BATCH_SIZES = (4, 10, 100)
#: Signed transactions per block.
TXS_PER_BLOCK = 10
#: The least speedup over the serial parse, by batch size, of signed blocks through the
#: full stack with the parse pool (never slower at 4, 1.5x at 100 on 2 cores).
SIGNED_GOALS = {4: 1.0, 10: 1.0, 100: 1.5}
#: The least speedup over the serial parse of the first batch right after the stack is
#: built, while the workers start: that batch is serial, so at par within the noise.
COLD_GOAL = 0.9

GROUP = "BatchedParseBlock"
WORKERS_GROUP = "BatchedParseBlock by workers"
GOAL = "at par with serial (>= 0.9x: the same lazy parse), <= 5x floor"
_START = 1_700_000_000.0


def _bare_vm(store: KeyValueStore, clock: Clock) -> ChainVM:
    return CChainVM(store, clock=clock)


def signed_stack(
    store: KeyValueStore, clock: Clock, *, key: StakingKey, parse_workers: int
) -> ChainVM:
    """The full stack over ``store`` past its fork from the start, signing with ``key``,
    with ``parse_workers`` worker processes (close it with :func:`close_stack`)."""
    return build_stack(
        store,
        clock=clock,
        fork_time=0,
        transition_time=_START + 2.0,
        staking_key=key,
        tracer=trace.get_tracer("vmstack.bench"),
        registry=CollectorRegistry(),
        parse_workers=parse_workers,
    )


def _are_chain_blocks(blocks: list[bytes]) -> bool:
    """Whether the answer holds bare C-chain blocks (not a layer's envelopes), which the
    floor and the eager decode apply to."""
    try:
        for data in blocks:
            AVALANCHE.decode_header(header_slice(data))
    except InvalidBlock:
        return False
    return True


def _newest(vm: ChainVM, clock: SimClock, count: int) -> list[bytes]:
    """Generate a chain on ``vm`` and return its newest ``count`` blocks, newest first."""
    ids = generate_chain(vm, blocks=count + 1, txs_per_block=TXS_PER_BLOCK, seed=2, clock=clock)
    return get_ancestors(
        vm,
        ids[-1],
        max_blocks_num=count,
        max_blocks_size=MAX_CONTAINERS_LEN * 64,
        max_retrieval_time=600.0,
    )


def _paired_medians(
    fast: Callable[[], object], baseline: Callable[[], object], *, repeat: int, budget: float
) -> tuple[float, float]:
    """Median seconds of one call of each, timed in alternating rounds (forward, then
    reversed) after a warm-up call of each (which also starts a pool's workers)."""
    number = calls_filling(fast, budget)
    calls_filling(baseline, budget)
    fast_seconds, baseline_seconds = alternated_medians(
        (fast, baseline), repeat=repeat, number=number
    )
    return fast_seconds, baseline_seconds


def _fresh(parse: Callable[[], object]) -> Callable[[], object]:
    """``parse`` as a node that never saw these blocks runs it: the process's caches of
    verified signatures emptied first (both sides of a row pay the same emptying)."""

    def fresh() -> object:
        clear_all()
        return parse()

    return fresh


def run(
    quick: bool, *, make_vm: Callable[[KeyValueStore, Clock], ChainVM] | None = None
) -> list[Comparison]:
    """The bare C-chain VM rows, the signed full-stack rows and the rows by worker count;
    with ``make_vm``, the plain rows for the VM it builds instead."""
    if make_vm is not None:
        return _plain_rows(quick, make_vm)
    return _plain_rows(quick, _bare_vm) + _signed_rows(quick)


def _plain_rows(
    quick: bool, make_vm: Callable[[KeyValueStore, Clock], ChainVM]
) -> list[Comparison]:
    """One row per batch size: batched vs serial parse, with the ID-hashing floor."""
    clock = SimClock(_START)
    parser = make_vm(MemoryStore(), clock)
    newest = _newest(parser, clock, max(BATCH_SIZES))
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

        def headers(blocks: list[bytes] = batch) -> object:
            return [AVALANCHE.decode_header(header_slice(data)) for data in blocks]

        fast_seconds, serial_seconds = _paired_medians(
            batched, serial, repeat=repeat, budget=budget
        )
        notes: dict[str, float | int | str] = {
            "blocks": size,
            "batch_bytes": sum(map(len, batch)),
            "parse_us_per_block": round(fast_seconds / size * 1e6, 2),
        }
        floor_seconds = None
        reason = ""
        if chain_blocks:
            floor_seconds, header_seconds = alternated_medians(
                (floor, headers), repeat=repeat, number=calls_filling(floor, budget)
            )
            eager_seconds = median_seconds(eager, repeat=3, number=1)
            notes["eager_decode_us_per_block"] = round(eager_seconds / size * 1e6, 2)
            notes["header_decode_us_per_block"] = round(header_seconds / size * 1e6, 2)
            if serial_seconds >= 0.9 * fast_seconds:  # at par: only the floor can miss
                reason = (
                    f"beyond the floor's {floor_seconds / size * 1e6:.1f} us a block, the "
                    f"strict decode of the header's fields alone takes "
                    f"{header_seconds / size * 1e6:.1f} us (each field read and "
                    "range-checked in Python), then the body's framing is checked"
                )
        rows.append(
            Comparison(
                group=GROUP,
                case=f"{size} blocks x {TXS_PER_BLOCK} txs",
                fast_seconds=fast_seconds,
                baseline_seconds=serial_seconds,
                floor_seconds=floor_seconds,
                fast_label="batched_parse_block",
                baseline_label="parse_block per block",
                floor_label="keccak of header slices",
                goal=GOAL if chain_blocks else ">= 1x serial",
                notes=notes,
            ).judged(
                min_speedup=0.9 if chain_blocks else 1.0,
                max_over_floor=5.0 if chain_blocks else None,
                unmet_reason=reason,
            )
        )
    return rows


def _signed_rows(quick: bool) -> list[Comparison]:
    """Signed post-fork blocks through the full stack: one row per batch size with one
    worker per core, then the 100-block batch with the other worker counts."""
    cores = available_cores()
    default = max(cores - 1, 1)  # ParsePool's default size
    key = StakingKey.generate(seed=b"vmstack bench proposer")
    clock = SimClock(_START)
    store = MemoryStore()
    builder = signed_stack(store, clock, key=key, parse_workers=0)
    newest = _newest(builder, clock, max(BATCH_SIZES))
    repeat = 7 if quick else 15
    rows = [
        _signed_row(
            store,
            clock,
            key,
            newest[:size],
            workers=default,
            repeat=repeat,
            case=f"{size} blocks x {TXS_PER_BLOCK} txs, full stack, signed, {_workers(default)}",
            group=GROUP,
            min_speedup=SIGNED_GOALS[size],
        )
        for size in BATCH_SIZES
    ]
    largest = max(BATCH_SIZES)
    rows.append(
        _cold_row(store, clock, key, newest[:largest], workers=default, rounds=5 if quick else 9)
    )
    for workers in sorted({0, 1, 2, cores} - {default}):
        rows.append(
            _signed_row(
                store,
                clock,
                key,
                newest,
                workers=workers,
                repeat=repeat,
                case=f"{largest} blocks, full stack, signed, {_cores(workers, cores)}",
                group=WORKERS_GROUP,
                min_speedup=SIGNED_GOALS[largest] if workers else 1.0,
            )
        )
    return rows


def _workers(count: int) -> str:
    return "1 worker" if count == 1 else f"{count} workers"


def _cores(count: int, cores: int) -> str:
    return f"{_workers(count)} (= cores)" if count == cores else _workers(count)


def _signed_row(
    store: KeyValueStore,
    clock: SimClock,
    key: StakingKey,
    batch: list[bytes],
    *,
    workers: int,
    repeat: int,
    case: str,
    group: str,
    min_speedup: float,
) -> Comparison:
    """Batched (with ``workers`` worker processes) against serial parse of ``batch`` by a
    stack over ``store``; the stack and its pool are closed before this returns."""
    parser = signed_stack(store, clock, key=key, parse_workers=workers)
    try:
        pool = find_layer(parser, ProposerVM).parse_pool
        if pool is not None:
            pool.wait_ready(60.0)  # the warm case: every worker has started
        fast_seconds, serial_seconds = _paired_medians(
            _fresh(lambda: batched_parse_block(parser, batch)),
            _fresh(lambda: serial_parse_block(parser, batch)),
            repeat=repeat,
            budget=0.02,
        )
    finally:
        close_stack(parser)
    goal = f">= {min_speedup:g}x serial" + (
        "" if workers else " (no pool: every check in this process)"
    )
    return Comparison(
        group=group,
        case=case,
        fast_seconds=fast_seconds,
        baseline_seconds=serial_seconds,
        fast_label=f"batched_parse_block, {_workers(workers)}",
        baseline_label="parse_block per block",
        goal=goal,
        notes={
            "blocks": len(batch),
            "workers": workers,
            "parse_us_per_block": round(fast_seconds / len(batch) * 1e6, 2),
            "serial_us_per_block": round(serial_seconds / len(batch) * 1e6, 2),
        },
    ).judged(min_speedup=min_speedup)


def _cold_row(
    store: KeyValueStore,
    clock: SimClock,
    key: StakingKey,
    batch: list[bytes],
    *,
    workers: int,
    rounds: int,
) -> Comparison:
    """The first batched parse of ``batch`` by a stack built just before it with
    ``workers`` worker processes (starting in the background meanwhile), against the first
    serial parse by a stack built just before it without a pool; ``rounds`` rounds of
    each in turn, every stack closed before the next is built."""
    cold: list[float] = []
    serial: list[float] = []
    for _ in range(rounds):
        for parse_workers, parse, times in (
            (workers, batched_parse_block, cold),
            (0, serial_parse_block, serial),
        ):
            parser = signed_stack(store, clock, key=key, parse_workers=parse_workers)
            clear_all()
            try:
                start = time.perf_counter()
                parse(parser, batch)
                times.append(time.perf_counter() - start)
            finally:
                close_stack(parser)
    fast_seconds, serial_seconds = statistics.median(cold), statistics.median(serial)
    return Comparison(
        group=GROUP,
        case=f"{len(batch)} blocks x {TXS_PER_BLOCK} txs, full stack, signed, "
        f"{_workers(workers)}, first batch after build (workers starting)",
        fast_seconds=fast_seconds,
        baseline_seconds=serial_seconds,
        fast_label=f"first batched_parse_block, {_workers(workers)} starting",
        baseline_label="first parse_block per block, no pool",
        goal=f">= {COLD_GOAL:g}x serial (no slower: the batch never waits for a worker)",
        notes={
            "blocks": len(batch),
            "workers": workers,
            "rounds": rounds,
            "parse_us_per_block": round(fast_seconds / len(batch) * 1e6, 2),
            "serial_us_per_block": round(serial_seconds / len(batch) * 1e6, 2),
            "slowest_cold_ms": round(max(cold) * 1e3, 2),
            "slowest_serial_ms": round(max(serial) * 1e3, 2),
        },
    ).judged(min_speedup=COLD_GOAL)
