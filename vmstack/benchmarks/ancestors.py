"""Benchmark case: GetAncestors on an LMDB store, batched fast path against the serial walk.

A chain of 2000 blocks of 10 signed transactions (300 in quick mode) is generated on an
:class:`~vmstack.store.LMDBStore`, then the newest block and all its ancestors are asked for:

- fast: the batched ``get_ancestors`` (one call; per block two zero-copy reads, the stitch,
  the parent hash read in place, the canonical check and the integrity checksum);
- baseline: the fallback walk, one ``get_block`` per block, each restoring the block the
  honest way (decode, receipts, sender recovery, re-encode). It is timed on the newest
  ``SERIAL_BLOCKS`` blocks and scaled to the whole request (the row says so in its notes);
- floor: two LMDB gets and a join per block, written directly against the ``lmdb`` package
  in one read transaction with ``buffers=True``, on a separate LMDB environment holding the
  same header and body values, each block kept in the answer list: the least any
  implementation can do to produce the answer. (A loop that drops each block as soon as it
  is joined lets the allocator hand the same warm buffer back every time, 0.8-2 us per
  3 KB block cheaper than holding 2000 of them as every answer must; the notes give that
  loop's time too, as ``floor_dropping_us_per_block``, and the fast path's ratio to it.)

The VM under test is a parameter (``make_vm``, building it from a store and a clock), so
the same case runs through a whole stack; the chain is built through it. Notes give the cost
of the integrity check (the fast path timed again with checks off: the store's
integrity-start marker moved past every height for the run, then restored) and of a cold
canonical hash cache. The three sides are timed in alternating rounds.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import lmdb

from vmstack.batching import get_ancestors, serial_get_ancestors
from vmstack.benchmarks import Comparison, alternated_medians, median_seconds
from vmstack.cchain import rawdb
from vmstack.cchain.generate import generate_chain
from vmstack.cchain.vm import CChainVM
from vmstack.clock import Clock, SimClock
from vmstack.interfaces import ChainVM, find_layer
from vmstack.store import KeyValueStore, LMDBStore

__all__ = ["BLOCKS", "QUICK_BLOCKS", "SERIAL_BLOCKS", "TXS_PER_BLOCK", "VMFactory", "run"]

#: Blocks in the chain and in the request.
BLOCKS = 2000
#: Blocks in quick mode.
QUICK_BLOCKS = 300
#: Blocks the serial walk is timed on (a full serial walk of 2000 blocks takes many seconds).
SERIAL_BLOCKS = 150
#: Signed transactions per block.
TXS_PER_BLOCK = 10

VMFactory = Callable[[KeyValueStore, Clock], ChainVM]
"""Builds the VM under test over a store, on a clock."""

GROUP = "GetAncestors"
GOAL = ">= 50x serial walk, <= 3x raw floor"
_START = 1_700_000_000.0
_NO_LIMIT = 1 << 40
_TIME_BUDGET = 600.0


def bare_vm(store: KeyValueStore, clock: Clock) -> ChainVM:
    """The default VM under test: a bare :class:`~vmstack.cchain.CChainVM`."""
    return CChainVM(store, clock=clock)


def _bottom(vm: object) -> CChainVM | None:
    try:
        return find_layer(vm, CChainVM)
    except LookupError:
        return None


def _floor_env(
    path: Path, vm: CChainVM, tip: bytes, count: int
) -> tuple[lmdb.Environment, list[tuple[bytes, bytes]]]:
    """A separate LMDB environment holding the chain's header and body values under their
    rawdb keys, and the keys of the ``count`` blocks from ``tip`` down, newest first."""
    schema = vm.schema
    keys: list[tuple[bytes, bytes]] = []
    env = lmdb.open(str(path), map_size=1 << 30, sync=False, metasync=False)
    with vm.store.snapshot() as snap, env.begin(write=True) as txn:
        number = rawdb.read_header_number(snap, schema, tip)
        block_hash = tip
        while number is not None and number >= 0 and len(keys) < count:
            header_key, body_key = (
                schema.header_key(number, block_hash),
                schema.body_key(number, block_hash),
            )
            header = snap.get(header_key)
            txn.put(header_key, bytes(header))
            txn.put(body_key, bytes(snap.get(body_key)))
            keys.append((header_key, body_key))
            block_hash = bytes(header[4:36])
            number -= 1
    return env, keys


def _raw_floor(env: lmdb.Environment, keys: list[tuple[bytes, bytes]]) -> Callable[[], object]:
    """The floor: every block's two gets and join, kept in the answer list."""

    def operation() -> list[bytes]:
        answer: list[bytes] = []
        keep = answer.append
        with env.begin(buffers=True) as txn:
            get = txn.get
            join = b"".join
            for header_key, body_key in keys:
                keep(join((get(header_key, b""), get(body_key, b""))))
        return answer

    return operation


def _dropping_floor(env: lmdb.Environment, keys: list[tuple[bytes, bytes]]) -> Callable[[], object]:
    """The floor's loop with each block dropped as soon as it is joined (a note only: no
    answer can be produced that way)."""

    def operation() -> int:
        total = 0
        with env.begin(buffers=True) as txn:
            get = txn.get
            join = b"".join
            for header_key, body_key in keys:
                total += len(join((get(header_key, b""), get(body_key, b""))))
        return total

    return operation


def _cold(vm: CChainVM, operation: Callable[[], object], repeat: int) -> float:
    times: list[float] = []
    for _ in range(repeat):
        vm.cache.clear()
        start = time.perf_counter()
        operation()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(quick: bool, *, make_vm: VMFactory = bare_vm) -> list[Comparison]:
    """One row: the whole request on the fast path, the serial walk scaled to it, and the
    raw floor. ``make_vm`` builds the VM under test (default: a bare ``CChainVM``)."""
    blocks = QUICK_BLOCKS if quick else BLOCKS
    serial_blocks = 40 if quick else SERIAL_BLOCKS
    repeat = 5 if quick else 9
    with tempfile.TemporaryDirectory(prefix="vmstack-bench-") as directory:
        folder = Path(directory)
        with LMDBStore(folder / "chain", sync=False) as store:
            clock = SimClock(_START)
            vm = make_vm(store, clock)
            built = time.perf_counter()
            ids = generate_chain(
                vm, blocks=blocks, txs_per_block=TXS_PER_BLOCK, seed=1, clock=clock
            )
            build_seconds = time.perf_counter() - built
            tip = ids[-1]

            def fast() -> list[bytes]:
                return get_ancestors(
                    vm,
                    tip,
                    max_blocks_num=blocks,
                    max_blocks_size=_NO_LIMIT,
                    max_retrieval_time=_TIME_BUDGET,
                )

            def serial() -> list[bytes]:
                return serial_get_ancestors(
                    vm,
                    tip,
                    max_blocks_num=serial_blocks,
                    max_blocks_size=_NO_LIMIT,
                    max_retrieval_time=_TIME_BUDGET,
                )

            answer = fast()
            if len(answer) != blocks or serial() != answer[:serial_blocks]:
                raise ValueError("the fast path and the serial walk answer differently")
            scale = blocks / serial_blocks  # the serial walk is timed on fewer blocks
            notes: dict[str, float | int | str] = {
                "blocks": blocks,
                "txs_per_block": TXS_PER_BLOCK,
                "answer_bytes": sum(map(len, answer)),
                "serial_walk_timed_on_blocks": serial_blocks,
                "chain_build_seconds": round(build_seconds, 2),
            }
            bottom = _bottom(vm)
            floor_seconds = None
            if bottom is None:
                fast_seconds, serial_seconds = alternated_medians((fast, serial), repeat=repeat)
                serial_seconds *= scale
            else:
                env, keys = _floor_env(folder / "floor", bottom, bottom.last_accepted(), blocks)
                try:
                    fast_seconds, serial_seconds, floor_seconds = alternated_medians(
                        (fast, serial, _raw_floor(env, keys)), repeat=repeat
                    )
                    serial_seconds *= scale
                    floor_seconds *= blocks / len(keys)
                    dropping = median_seconds(_dropping_floor(env, keys), repeat=repeat)
                    notes["floor_dropping_us_per_block"] = round(dropping / len(keys) * 1e6, 3)
                    notes["fast_over_dropping_floor"] = round(
                        fast_seconds / (dropping * blocks / len(keys)), 2
                    )
                finally:
                    env.close()
                notes.update(_integrity_and_cache_notes(bottom, fast, fast_seconds, blocks, repeat))
    return [
        Comparison(
            group=GROUP,
            case=f"{blocks} blocks x {TXS_PER_BLOCK} txs, LMDB",
            fast_seconds=fast_seconds,
            baseline_seconds=serial_seconds,
            floor_seconds=floor_seconds,
            fast_label="batched get_ancestors",
            baseline_label="serial get_block walk",
            floor_label="2 lmdb gets + join",
            goal=GOAL,
            notes=notes,
        ).judged(min_speedup=50.0, max_over_floor=3.0)
    ]


def _integrity_and_cache_notes(
    vm: CChainVM, fast: Callable[[], object], fast_seconds: float, blocks: int, repeat: int
) -> dict[str, float | int | str]:
    """The fast path's cost per block with and without integrity checks, and with a cold
    canonical hash cache."""
    store, key = vm.store, vm.schema.integrity_start_key()
    marker = store.get(key)
    checked_times: list[float] = []
    unchecked_times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        fast()
        checked_times.append(time.perf_counter() - start)
        # A marker past every height turns the checks off (deleting it is corruption).
        rawdb.write_integrity_start(store, vm.schema, 2**64 - 1)
        try:
            start = time.perf_counter()
            fast()
            unchecked_times.append(time.perf_counter() - start)
        finally:
            store.put(key, marker)
    checked = statistics.median(checked_times)
    unchecked = statistics.median(unchecked_times)
    cold = _cold(vm, fast, 3)
    return {
        "fast_us_per_block": round(fast_seconds / blocks * 1e6, 3),
        "fast_with_integrity_us_per_block": round(checked / blocks * 1e6, 3),
        "fast_without_integrity_us_per_block": round(unchecked / blocks * 1e6, 3),
        "integrity_check_us_per_block": round((checked - unchecked) / blocks * 1e6, 3),
        "fast_cold_cache_us_per_block": round(cold / blocks * 1e6, 3),
    }
