"""ParsePool: results in item order, serial fallbacks, and never a leaked process."""

from __future__ import annotations

import json
import logging
import multiprocessing
import multiprocessing.util
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests import slow_start
from tests.support.processes import descendants, ended, returns_within, wait_ended, wait_stopped
from vmstack import build_stack, close_stack
from vmstack.batching import batched_parse_block, serial_parse_block
from vmstack.cchain.generate import generate_chain
from vmstack.cchain.vm import CChainVM
from vmstack.clock import SimClock
from vmstack.defaults import DEFAULT_CHAIN_ID
from vmstack.interfaces import find_layer, iter_layers
from vmstack.parsepool import MAX_FAILURES, ParsePool
from vmstack.parsepool.claims import FRONT, INDEX_MASK
from vmstack.store import MemoryStore
from vmstack.wrappers.proposer.envelope import PostForkBlock, build_signed
from vmstack.wrappers.proposer.staking import StakingKey
from vmstack.wrappers.proposer.vm import ProposerVM
from vmstack.wrappers.rpc import spawn

#: These tests start, stop and kill worker processes.
pytestmark = pytest.mark.processes


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
    return int(pool._claims[FRONT] & INDEX_MASK)


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


@pytest.mark.slow
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


@pytest.mark.parametrize(
    "bad", [{"workers": 0}, {"workers": True}, {"threshold": -1}, {"timeout": 0}]
)
def test_bad_settings_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ParsePool(**bad)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_killed_worker_gives_none_and_a_fresh_pool_next(caplog: pytest.LogCaptureFixture) -> None:
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


@pytest.mark.slow
def test_no_answer_in_time_gives_none_and_no_leftover_worker() -> None:
    with ParsePool(1, threshold=0, timeout=0.5) as pool:
        pids = _started(pool)
        pending = pool.submit(time.sleep, [60])
        assert pending is not None
        _all_claimed(pool, 1)
        assert pending.results() is None
        _no_children(pids)


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_closing_the_stack_stops_its_workers_and_it_still_parses() -> None:
    """``build_stack(parse_workers=2)`` gives the proposer layer one pool; ``close_stack``
    stops its workers, and the closed stack parses the same blocks serially."""
    clock = SimClock(1_700_000_000.0)
    vm = build_stack(
        MemoryStore(),
        clock=clock,
        fork_time=0,
        staking_key=StakingKey.generate(seed=b"pool stack"),
        parse_workers=2,
    )
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


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process tree from /proc")
def test_a_served_stack_stops_its_workers_with_the_server(tmp_path: Path) -> None:
    """`vmstack serve --parse-workers 1`: the served proposer layer checks a batch's
    signatures in a worker, and nothing the server started outlives it."""
    key = StakingKey.generate(seed=b"served pool")
    chain_id = DEFAULT_CHAIN_ID.to_bytes(32, "big")
    clock = SimClock(1_700_000_000.0)
    source = CChainVM(MemoryStore(), clock=clock)
    inner = [
        bytes(source.get_block(block_id))
        for block_id in generate_chain(source, blocks=6, txs_per_block=1, seed=4, clock=clock)
    ]
    envelopes = [
        bytes(build_signed(bytes(32), 1_700_000_000 + index, 0, data, key=key, chain_id=chain_id))
        for index, data in enumerate(inner)
    ]
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
            failing = pool.submit(abs, batch)  # type: ignore[arg-type, var-annotated]  # a str
            assert failing is not None and failing.results() is None
        _started(pool)
        after = pool.submit(abs, [-1, -2])
        assert after is not None and after.results() == [1, 2]


def _distinct_items(count: int, size: int) -> list[bytes]:
    """``count`` different byte strings of ``size`` bytes (pickled one by one: together
    far more than a pipe holds)."""
    return [index.to_bytes(4, "big") * (size // 4) for index in range(count)]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from /proc")
@pytest.mark.timeout(120)
def test_a_stopped_worker_makes_the_batch_serial_instead_of_hanging() -> None:
    """A SIGSTOPped worker never reads its pipe: a batch larger than the pipe holds is
    given up within the timeout (serial: ``None``), the stopped worker is killed, and new
    workers start."""
    with ParsePool(2, threshold=0, timeout=1.0) as pool:
        pids = _started(pool)
        os.kill(pids[0], signal.SIGSTOP)
        try:
            assert wait_stopped(pids[0])
            items = _distinct_items(2_000, 1_000)

            def batch() -> list[int] | None:
                pending = pool.submit(len, items)
                return None if pending is None else pending.results()

            # The first batch finds the worker stuck as it sends (far more than a pipe
            # holds); where a pipe held it all, a later batch finds it owing an answer for
            # longer than the timeout. Every batch answers meanwhile.
            deadline = time.monotonic() + 60
            while not ended(pids[0]) and time.monotonic() < deadline:
                assert returns_within(60, batch) in (None, [1_000] * 2_000)
                time.sleep(0.2)
            assert wait_ended(pids[0]), "the stopped worker was left behind"
            fresh = _started(pool)
            assert not set(fresh) & set(pids)
        finally:
            if not ended(pids[0]):
                os.kill(pids[0], signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_worker_killed_anywhere_in_its_claims_never_blocks_the_caller() -> None:
    """Workers and the caller claim items in shared memory: a worker SIGKILLed at any
    moment of a batch of tiny items (nearly all of its time spent claiming) leaves nothing
    the caller waits on. Each batch answers, within a deadline, its results or ``None``."""
    items = list(range(-20_000, 0))
    expected = [abs(item) for item in items]
    for _ in range(12):
        with ParsePool(1, threshold=0, timeout=10.0) as pool:
            (pid,) = _started(pool)
            pending = pool.submit(abs, items)
            assert pending is not None
            deadline = time.monotonic() + 30
            while _front(pool) == 0 and time.monotonic() < deadline:
                time.sleep(0.0005)
            os.kill(pid, signal.SIGKILL)
            assert returns_within(60, pending.results) in (None, expected)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_pool_in_a_forked_child_is_closed_there_and_the_parent_keeps_it() -> None:
    """After ``os.fork()`` the child's copy of a running pool parses serially (60 batches
    through a stack give the serial blocks, no pool batch is taken, closing and the exit
    handlers are quiet), and the parent's workers and pool are untouched."""
    clock = SimClock(1_700_000_000.0)
    vm = build_stack(
        MemoryStore(),
        clock=clock,
        fork_time=0,
        staking_key=StakingKey.generate(seed=b"forked pool"),
        parse_workers=1,
    )
    try:
        ids = generate_chain(vm, blocks=7, txs_per_block=1, seed=6, clock=clock)
        blocks = [bytes(vm.get_block(block_id)) for block_id in ids[1:]]
        expected = [block.id for block in serial_parse_block(vm, blocks)]
        pool = find_layer(vm, ProposerVM).parse_pool
        assert pool is not None
        pids = _started(pool)
        child = os.fork()
        if child == 0:  # the child: report by exit status, never return into pytest
            status = 1
            try:
                same = all(
                    [block.id for block in batched_parse_block(vm, blocks)] == expected
                    for _ in range(60)
                )
                taken = pool.submit(abs, [-1] * 10)
                pool.close()  # what the pool's finalizer does at the child's exit
                # multiprocessing's exit handler terminates and joins the children it knows
                # (not every exit handler runs here: some would stop the parent's services).
                multiprocessing.util._exit_function()  # type: ignore[attr-defined]
                status = (
                    0 if (same and taken is None and pool.closed and pool.worker_pids == ()) else 2
                )
            except BaseException:
                status = 3
            finally:
                os._exit(status)
        deadline = time.monotonic() + 90
        while (reaped := os.waitpid(child, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
                pytest.fail("the forked child did not finish its batches")
            time.sleep(0.05)
        assert os.waitstatus_to_exitcode(reaped[1]) == 0
        assert not any(ended(pid) for pid in pids), "the child stopped the parent's workers"
        assert pool.worker_pids == pids and not pool.closed
        pending = pool.submit(abs, [-1, -2, -3, -4])
        assert pending is not None and pending.results() == [1, 2, 3, 4]
        assert [block.id for block in batched_parse_block(vm, blocks)] == expected
    finally:
        close_stack(vm)


def test_the_workers_start_when_the_stack_is_built() -> None:
    """``build_stack(parse_workers=1)`` starts the worker in the background: it runs
    before any batch is parsed."""
    vm = build_stack(MemoryStore(), fork_time=0, parse_workers=1)
    try:
        pool = find_layer(vm, ProposerVM).parse_pool
        assert pool is not None
        deadline = time.monotonic() + 60
        while not pool.worker_pids and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(pool.worker_pids) == 1
    finally:
        close_stack(vm)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_no_batch_waits_for_a_starting_worker() -> None:
    """Workers whose start takes seconds (an import that sleeps): every batch submitted
    meanwhile is left serial at once, and the workers take batches once ready."""
    with ParsePool(1, threshold=0) as pool:
        pool.start(slow_start.negate)
        for _ in range(3):
            assert pool.submit(slow_start.negate, [1, 2, 3]) is None
        assert not pool.wait_ready(0), "a submit waited for the worker to start"
        assert pool.wait_ready(60 + slow_start.IMPORT_SECONDS)
        pending = pool.submit(slow_start.negate, [1, 2, 3])
        assert pending is not None and pending.results() == [-1, -2, -3]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_takes_now_says_whether_a_batch_would_go_to_the_workers() -> None:
    """While the worker starts, ``takes_now`` is false at once (a caller prepares nothing
    for the pool); once it is ready, true at or over the threshold; false for a closed
    pool."""
    with ParsePool(1, threshold=4) as pool:
        pool.start(slow_start.negate)
        started = time.monotonic()
        assert not pool.takes_now(10)
        assert time.monotonic() - started < 1.0, "takes_now waited for the worker"
        assert pool.wait_ready(60 + slow_start.IMPORT_SECONDS)
        assert pool.takes_now(4) and not pool.takes_now(3)
    assert not pool.takes_now(10)


def test_a_first_batch_prepares_no_checks_while_the_workers_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proposer layer asks the pool before it prepares the signature checks: with
    the worker still starting, the batch's checks are never prepared nor submitted."""
    key = StakingKey.generate(seed=b"first batch")
    clock = SimClock(1_700_000_000.0)
    store = MemoryStore()
    builder = build_stack(store, clock=clock, fork_time=0, staking_key=key)
    ids = generate_chain(builder, blocks=9, txs_per_block=1, seed=4, clock=clock)
    blocks = [bytes(builder.get_block(block_id)) for block_id in ids[1:]]
    expected = [block.id for block in serial_parse_block(builder, blocks)]
    vm = build_stack(store, clock=clock, fork_time=0, staking_key=key, parse_workers=1)
    try:
        pool = find_layer(vm, ProposerVM).parse_pool
        assert pool is not None
        headers: list[bytes] = []
        header = PostForkBlock.header

        def counted_header(self: PostForkBlock, *args: Any) -> Any:
            headers.append(b"")
            return header(self, *args)

        monkeypatch.setattr(PostForkBlock, "header", counted_header)
        monkeypatch.setattr(pool, "takes_now", lambda count: False)
        submitted: list[int] = []
        monkeypatch.setattr(pool, "submit", lambda *args: submitted.append(1))
        assert [block.id for block in batched_parse_block(vm, blocks)] == expected
        assert submitted == []
        # One header per envelope, for its own signature check; none for a pool's job list.
        assert len(headers) == len(blocks)
    finally:
        close_stack(vm)


def test_the_package_serves_its_names_from_their_modules() -> None:
    """``vmstack.parsepool``'s public names are the pool module's objects, and no module of
    the package is over 600 lines."""
    import vmstack.parsepool as package
    from vmstack.parsepool import pool

    for name in package.__all__:
        assert getattr(package, name) is getattr(pool, name), name
    assert ParsePool.__module__ == "vmstack.parsepool.pool"
    for path in Path(package.__file__).parent.glob("*.py"):
        assert len(path.read_text().splitlines()) <= 600, path.name


_PRELOAD_PROBE = """
import json, multiprocessing, multiprocessing.forkserver
from vmstack.parsepool import ParsePool
from vmstack.wrappers.proposer.verdicts import signature_verdict

if __name__ == "__main__":
    multiprocessing.set_forkserver_preload(["json"])  # a preload of the program's own
    pool = ParsePool(workers=1)
    pool.start(signature_verdict)
    assert pool.wait_ready(60)
    print(json.dumps(multiprocessing.forkserver._forkserver._preload_modules))
    pool.close()
"""


def test_the_fork_server_loads_the_workers_modules_once_and_keeps_the_programs_own(
    tmp_path: Path,
) -> None:
    """The first pool of a process asks the fork server (not running yet) to load the
    worker loop and the module of the function it runs, beside the preload the program
    set; a fork server already running keeps its own list."""
    import subprocess
    import sys

    from vmstack.parsepool.worker import start_context

    probe = tmp_path / "probe.py"
    probe.write_text(_PRELOAD_PROBE)
    done = subprocess.run(
        [sys.executable, str(probe)], capture_output=True, text=True, timeout=120, check=True
    )
    preload = json.loads(done.stdout.splitlines()[-1])
    assert preload[0] == "json"
    assert set(preload[1:]) == {"vmstack.parsepool.worker", "vmstack.wrappers.proposer.verdicts"}

    server = multiprocessing.forkserver._forkserver
    pool = ParsePool(workers=1)
    try:
        _started(pool)  # this process's fork server runs from here on
        before = list(getattr(server, "_preload_modules"))  # noqa: B009
        start_context(preload=("vmstack.some_module_not_loaded",))
        assert getattr(server, "_preload_modules") == before  # noqa: B009
    finally:
        pool.close()
