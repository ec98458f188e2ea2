"""Two processes on one store: a live writer accepting blocks through the full stack, and
other openers of the same store.

A second opener never undoes the writer's in-flight write-ahead record (the proposer
layer's record of a block whose inner block is being accepted): only the store's writer
recovers, and a store has one writer at a time (the writer lock). A read-only opener never
writes and always opens, and everything it serves is the writer's accepted chain.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.reliability.stacks import (
    FORK_TIME,
    START,
    check_ancestors_agree,
    check_store,
    full_stack,
    grow,
)
from tests.reliability.stores import PausingStore
from tests.reliability.test_concurrency import check_linked
from tests.reliability.test_crash import CrashingStore
from vmstack import SimClock, get_ancestors
from vmstack.batching import serial_get_ancestors
from vmstack.store import (
    KeyValueStore,
    LMDBStore,
    StoreError,
    is_writer,
)
from vmstack.store.base import WriteOp
from vmstack.wrappers.proposer.state import STORE_PREFIX

#: These tests run a store from two processes.
pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parents[2]

WRITER = r"""
import sys
import time
from tests.reliability.stacks import START, full_stack
from vmstack import SimClock
from vmstack.cchain import generate_chain
from vmstack.store import LMDBStore

store = LMDBStore(sys.argv[1], map_size=1 << 20)
clock = SimClock(START)
vm = full_stack(store, clock)


def ready(count: int) -> None:
    if count == 14:
        print("ready", flush=True)
    time.sleep(0.01)


generate_chain(vm, blocks=10**6, txs_per_block=2, seed=3, clock=clock, progress=ready)
"""

#: The last pre-fork height of the chains the stacks grow (the fork is after block 10).
LAST_PRE_FORK = int((FORK_TIME - START) // 2)
OPENS = 25
REPEATS = 400
#: How far each reader walks down from the head (the writer's in-flight record is there).
WALK = 200


@pytest.fixture
def live_writer(tmp_path: Path) -> Iterator[Path]:
    """A writer process accepting blocks through the full stack into an LMDB store, past
    the fork; yields the store's path and SIGKILLs the writer afterwards."""
    path = tmp_path / "db"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert writer.stdout is not None
        line = writer.stdout.readline()
        assert line == b"ready\n", writer.stderr.read() if writer.stderr else line
        yield path
        if writer.poll() is not None:
            assert writer.stderr is not None
            raise AssertionError(
                "the writer died on its own: "
                + writer.stderr.read().decode(errors="replace")[-2000:]
            )
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()


def check_read_only_open(path: Path) -> int:
    """Open the full stack read-only over the live writer's store and check what it serves:
    the last accepted block is served as its envelope after the fork, and the batched and
    serial answers from it are full (no hole stops them), linked, and equal. Returns its
    height."""
    with LMDBStore(path, readonly=True) as store:
        assert not store.writer
        vm = full_stack(store, SimClock(START + 10**6))
        head = vm.last_accepted()
        block = vm.get_block(head)
        assert block.id == head
        if block.height > LAST_PRE_FORK:
            assert bytes(block)[:2] == b"\0\0", "the last accepted block lost its envelope"
        batched = get_ancestors(vm, head, max_blocks_num=WALK, max_retrieval_time=60.0)
        assert batched == serial_get_ancestors(
            vm, head, max_blocks_num=WALK, max_retrieval_time=60.0
        )
        assert len(batched) == min(WALK, block.height + 1)
        check_linked(batched, head)
        return block.height


@pytest.mark.slow
def test_read_only_openers_never_fail_nor_disturb_a_live_writer(live_writer: Path) -> None:
    """Opening the full stack read-only again and again while the writer accepts: every
    open succeeds and serves the accepted chain whole; the writer goes on, and afterwards
    its store is complete and its answers agree."""
    seen = [check_read_only_open(live_writer) for _ in range(OPENS)]
    assert seen == sorted(seen) and seen[-1] > seen[0] > LAST_PRE_FORK


@pytest.mark.slow
def test_a_reader_asking_for_the_head_again_and_again_is_never_refused(live_writer: Path) -> None:
    """last_accepted and the height index, asked in a loop while the writer accepts, always
    answer a served block: each check of the head runs within one snapshot, so a block
    accepted between two reads is not taken for damage."""
    with LMDBStore(live_writer, readonly=True) as store:
        vm = full_stack(store, SimClock(START + 10**6))
        previous = -1
        for _ in range(REPEATS):
            head = vm.last_accepted()
            height = vm.get_block(head).height
            assert height >= previous
            assert vm.get_block_id_at_height(height) == head
            previous = height
        assert previous > LAST_PRE_FORK


@pytest.mark.slow
def test_a_second_writer_is_refused_while_the_first_lives(live_writer: Path) -> None:
    """A second handle opened for writing raises StoreError and writes nothing."""
    with pytest.raises(StoreError, match="writer lock"):
        LMDBStore(live_writer)


@pytest.mark.slow
def test_the_writer_lock_is_released_when_the_writer_dies(tmp_path: Path) -> None:
    """After the writer is SIGKILLed the next writer opens, recovers and checks out."""
    path = tmp_path / "db"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == b"ready\n"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    with LMDBStore(path) as store:
        assert store.writer
        height = check_store(store)
        vm = full_stack(store, SimClock(START + 10**6))
        assert len(check_ancestors_agree(vm, vm.last_accepted())) == height + 1


def test_one_writer_per_store_in_one_process(tmp_path: Path) -> None:
    """The writer lock holds between handles of one process too, and closing releases it;
    a read-only handle is never the writer."""
    path = tmp_path / "db"
    with LMDBStore(path) as first:
        assert first.writer and is_writer(first)
        with pytest.raises(StoreError, match="writer lock"):
            LMDBStore(path)
    with LMDBStore(path) as second:
        assert second.writer
    assert not second.writer
    with LMDBStore(path, readonly=True) as reader:
        assert not reader.writer and not is_writer(reader)


# --- the in-flight record, deterministically -----------------------------------------------


class ReaderView(CrashingStore):
    """Another opener of ``store`` that is not its writer (as a read-only LMDB handle is);
    it forwards everything and counts the writes it is asked for (``writes``)."""

    writer = False

    def __init__(self, store: KeyValueStore) -> None:
        super().__init__(store, crash_at=None)

    def close(self) -> None:
        """The view does not own the store."""


def _writes_a_record(ops: Sequence[WriteOp]) -> bool:
    """Whether a batch puts a proposer block record: paused right after its commit, the
    proposer's write-ahead record is in the store and its inner block not yet accepted."""
    return any(key.startswith(STORE_PREFIX + b"b") and value is not None for key, value in ops)


def test_an_opener_that_is_not_the_writer_leaves_the_in_flight_record() -> None:
    """A stack opened, in the middle of the writer's accept, over a handle that is not the
    writer writes nothing; the writer's accept completes and the block keeps its envelope."""
    store = PausingStore(_writes_a_record, after=True)
    clock = SimClock(START)
    vm = full_stack(store, clock)
    grow(vm, clock, LAST_PRE_FORK + 2)
    views: list[ReaderView] = []

    def open_a_reader() -> None:
        view = ReaderView(store)
        reader = full_stack(view, SimClock(START + 10**6))
        views.append(view)
        reader.last_accepted()

    store.pause = open_a_reader
    head = grow(vm, clock, 1)[-1]
    store.pause = None
    assert views and all(view.writes == 0 for view in views)
    assert vm.last_accepted() == head
    assert bytes(vm.get_block(head))[:2] == b"\0\0"
    check_ancestors_agree(vm, head)
    assert len(check_ancestors_agree(full_stack(store, clock), head)) == LAST_PRE_FORK + 4


def test_a_writer_opener_undoes_a_record_left_by_a_crash() -> None:
    """The same record left behind with no live writer (the writer died mid-accept) is
    undone by the next writer: the store's writer still recovers."""
    store = PausingStore(_writes_a_record, after=True)
    clock = SimClock(START)
    vm = full_stack(store, clock)
    before = [vm.last_accepted(), *grow(vm, clock, LAST_PRE_FORK + 2)]

    class Died(BaseException):
        """The writer process ends here."""

    def die() -> None:
        raise Died

    store.pause = die
    with pytest.raises(Died):
        grow(vm, clock, 1)
    store.pause = None
    restarted = full_stack(store, clock)
    assert restarted.last_accepted() == before[-1]
    assert len(check_ancestors_agree(restarted, before[-1])) == len(before)
    grow(restarted, clock, 2)
