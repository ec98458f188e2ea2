"""ParsePool: results in item order, serial fallbacks, and never a leaked process."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from tests.processes import descendants, ended
from vmstack import build_stack, close_stack
from vmstack.batching import batched_parse_block, serial_parse_block
from vmstack.cchain.generate import generate_chain
from vmstack.cchain.vm import CChainVM
from vmstack.clock import SimClock
from vmstack.interfaces import find_layer, iter_layers
from vmstack.parsepool import _FRONT, _INDEX_MASK, MAX_FAILURES, ParsePool
from vmstack.stack import DEFAULT_CHAIN_ID
from vmstack.store import MemoryStore
from vmstack.wrappers.proposer.block import PostForkBlock, build_signed
from vmstack.wrappers.proposer.staking import StakingKey
from vmstack.wrappers.proposer.vm import ProposerVM
from vmstack.wrappers.rpc import spawn


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _started(pool: ParsePool) -> tuple[int, ...]:
    """Start ``pool``'s workers (in the background), wait until each has answered its
    warm-up batch (so that a pool with a short timeout does not count a slow start on a
    busy machine as a failure), and return their process IDs."""
    pool.start(abs)
    assert pool.wait_ready(60), "the workers never answered their warm-up batch"
    pids = pool.worker_pids
    assert len(pids) == pool.workers
    return pids


def _front(pool: ParsePool) -> int:
    """How far the workers have claimed the batch out, from the front."""
    return int(pool._claims[_FRONT] & _INDEX_MASK)


def _all_claimed(pool: ParsePool, count: int) -> None:
    """Wait until the workers have claimed the ``count`` items of the batch out, so the
    caller has none left to run itself."""
    deadline = time.monotonic() + 30
    while _front(pool) < count:
        assert time.monotonic() < deadline, "the workers never claimed the batch"
        time.sleep(0.01)


def _no_children(pids: tuple[int, ...]) -> None:
    assert not [child for child in multiprocessing.active_children() if child.pid in pids]
    assert all(_gone(pid) for pid in pids)


def test_results_come_in_item_order() -> None:
    with ParsePool(2, threshold=0) as pool:
        _started(pool)
        items = list(range(-20, 21))
        pending = pool.submit(abs, items)
        assert pending is not None
        assert pending.results() == [abs(item) for item in items]
        assert pending.results() == [abs(item) for item in items]  # read once, kept


def test_small_batches_and_a_closed_pool_stay_serial() -> None:
    pool = ParsePool(1, threshold=3)
    assert pool.submit(abs, [1, 2]) is None
    assert pool.worker_pids == ()  # nothing started for a batch below the threshold
    pids = _started(pool)
    pool.close()
    assert pool.closed and pool.submit(abs, [1, 2, 3]) is None
    pool.close()  # idempotent
    _no_children(pids)


@pytest.mark.parametrize("bad", [{"workers": 0}, {"workers": True}, {"threshold": -1},
                                 {"timeout": 0}])
def test_bad_settings_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ParsePool(**bad)  # type: ignore[arg-type]


def test_a_killed_worker_gives_none_and_a_fresh_pool_next(
        caplog: pytest.LogCaptureFixture) -> None:
    """A worker SIGKILLed mid-batch: the batch answers ``None`` (the caller's serial path)
    at once, with one log line; the next batch starts new workers."""
    with ParsePool(2, threshold=0) as pool:
        pids = _started(pool)
        pending = pool.submit(time.sleep, [60, 60])
        assert pending is not None
        _all_claimed(pool, 2)
        os.kill(pids[0], signal.SIGKILL)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="vmstack.parsepool"):
            assert pending.results() is None
        assert time.monotonic() - started < 30  # killed and reaped, not waited out
        assert [record.message for record in caplog.records if "died" in record.message]
        _no_children(pids)
        fresh = _started(pool)
        assert not set(fresh) & set(pids)
        again = pool.submit(abs, [-3, -4])
        assert again is not None and again.results() == [3, 4]


def test_no_answer_in_time_gives_none_and_no_leftover_worker() -> None:
    with ParsePool(1, threshold=0, timeout=0.5) as pool:
        pids = _started(pool)
        pending = pool.submit(time.sleep, [60])
        assert pending is not None
        _all_claimed(pool, 1)
        assert pending.results() is None
        _no_children(pids)


def test_repeated_failures_leave_the_pool_serial_for_good() -> None:
    with ParsePool(1, threshold=0, timeout=0.2) as pool:
        for _ in range(MAX_FAILURES):
            pids = _started(pool)
            pending = pool.submit(time.sleep, [60])
            assert pending is not None
            _all_claimed(pool, 1)
            assert pending.results() is None
            _no_children(pids)
        assert pool.disabled and not pool.closed
        assert pool.submit(abs, [1, 2]) is None and pool.worker_pids == ()


def test_a_cancelled_batch_does_not_hold_up_the_next() -> None:
    """The next batch is not sent to a worker still busy with a cancelled one (it stays
    serial instead of waiting behind it); once the worker is done, batches reach it."""
    with ParsePool(1, threshold=0) as pool:
        _started(pool)
        first = pool.submit(time.sleep, [0.5, 0])
        assert first is not None
        _all_claimed(pool, 1)
        first.cancel()
        assert first.results() is None
        assert pool.submit(abs, [-5, -6]) is None  # the worker still sleeps
        assert pool.wait_ready(30)
        second = pool.submit(abs, [-5, -6])
        assert second is not None and second.results() == [5, 6]


def test_a_batch_while_another_is_out_stays_serial() -> None:
    with ParsePool(1, threshold=0) as pool:
        _started(pool)
        first = pool.submit(abs, [-1, -2])
        assert first is not None
        assert pool.submit(abs, [-3, -4]) is None
        assert first.results() == [1, 2]
        assert pool.wait_ready(30)  # the worker has answered the first batch
        assert pool.submit(abs, [-3, -4]) is not None


def test_a_forgotten_pool_is_reaped_when_collected() -> None:
    pool = ParsePool(1, threshold=0)
    pids = _started(pool)
    del pool
    _no_children(pids)


def test_closing_the_stack_stops_its_workers_and_it_still_parses() -> None:
    """``build_stack(parse_workers=2)`` gives the proposer layer one pool; ``close_stack``
    stops its workers, and the closed stack parses the same blocks serially."""
    clock = SimClock(1_700_000_000.0)
    vm = build_stack(MemoryStore(), clock=clock, fork_time=0,
                     staking_key=StakingKey.generate(seed=b"pool stack"), parse_workers=2)
    ids = generate_chain(vm, blocks=9, txs_per_block=2, seed=3, clock=clock)
    blocks = [bytes(vm.get_block(block_id)) for block_id in ids[1:]]
    pool = find_layer(vm, ProposerVM).parse_pool
    assert pool is not None and pool.workers == 2
    expected = [block.id for block in serial_parse_block(vm, blocks)]
    assert [block.id for block in batched_parse_block(vm, blocks)] == expected
    assert pool.wait_ready(60)
    pids = pool.worker_pids
    assert len(pids) == 2
    assert [block.id for block in batched_parse_block(vm, blocks)] == expected
    close_stack(vm)
    assert pool.closed
    _no_children(pids)
    assert [block.id for block in batched_parse_block(vm, blocks)] == expected
    close_stack(vm)  # closing twice is harmless


def test_a_stack_without_workers_or_a_proposer_layer_has_no_pool() -> None:
    assert find_layer(build_stack(MemoryStore(), fork_time=0), ProposerVM).parse_pool is None
    stack = build_stack(MemoryStore(), parse_workers=2)
    assert not any(isinstance(layer, ProposerVM) for layer in iter_layers(stack))
    close_stack(stack)  # a stack with nothing to close closes quietly


def test_bad_parse_workers_are_refused() -> None:
    with pytest.raises(ValueError, match="parse_workers"):
        build_stack(MemoryStore(), fork_time=0, parse_workers=-1)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process tree from /proc")
def test_a_served_stack_stops_its_workers_with_the_server(tmp_path: Path) -> None:
    """`vmstack serve --parse-workers 1`: the served proposer layer checks a batch's
    signatures in a worker, and nothing the server started outlives it."""
    key = StakingKey.generate(seed=b"served pool")
    chain_id = DEFAULT_CHAIN_ID.to_bytes(32, "big")
    clock = SimClock(1_700_000_000.0)
    source = CChainVM(MemoryStore(), clock=clock)
    inner = [bytes(source.get_block(block_id))
             for block_id in generate_chain(source, blocks=6, txs_per_block=1, seed=4,
                                            clock=clock)]
    envelopes = [bytes(build_signed(bytes(32), 1_700_000_000 + index, 0, data, key=key,
                                    chain_id=chain_id)) for index, data in enumerate(inner)]
    with spawn(tmp_path / "chain", fork_time=0, parse_workers=1) as client:
        expected = [PostForkBlock.decode(data).id for data in envelopes]
        server = client.pid
        assert server is not None
        deadline = time.monotonic() + 60  # the worker starts as the served stack is built
        while not (started := descendants(server)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started, "the served stack started no worker"
        for _ in range(2):
            assert [block.id for block in client.batched_parse_block(envelopes)] == expected
    # multiprocessing's forkserver leaves when it sees its parent gone: give it a moment.
    deadline = time.monotonic() + 10
    while not all(ended(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(ended(pid) for pid in started)


def test_closing_while_a_batch_is_out_gives_that_batch_none() -> None:
    pool = ParsePool(1, threshold=0)
    pids = _started(pool)
    pending = pool.submit(time.sleep, [0.2, 0])
    assert pending is not None
    pool.close()
    assert pending.results() is None
    _no_children(pids)


def test_a_function_that_fails_gives_none_and_frees_the_pool() -> None:
    """``abs`` of a string fails where it runs, in the caller or in a worker: ``None`` (the
    caller's serial path meets the error itself); a failed worker is replaced."""
    with ParsePool(1, threshold=0) as pool:
        for batch in ([1, "x"], ["x", 1], ["x"]):
            _started(pool)
            failing = pool.submit(abs, batch)
            assert failing is not None and failing.results() is None
        _started(pool)
        after = pool.submit(abs, [-1, -2])
        assert after is not None and after.results() == [1, 2]
