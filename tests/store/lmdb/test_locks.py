"""One writer per store: the LMDB writer lock, and which handles count as a store's writer;
and the read gate: readers share it, re-enter it freely, and an exclusive holder waits for
the other threads' readers and holds new ones back."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from vmstack.errors import StoreCorrupted
from vmstack.store import LMDBStore, MemoryStore, PrefixedStore, StoreError, is_writer
from vmstack.store.lmdb.locks import WRITER_LOCK_FILE, ReadGate

HOLDER = r"""
import sys
from vmstack.store import LMDBStore

store = LMDBStore(sys.argv[1])
print("holding", flush=True)
sys.stdin.readline()
store.close()
print("released", flush=True)
sys.stdin.readline()
"""


def test_memory_and_prefixed_stores_are_their_own_writers() -> None:
    store = MemoryStore()
    assert is_writer(store)
    assert is_writer(PrefixedStore(store, b"p/"))


def test_an_object_that_says_it_is_not_the_writer_is_not() -> None:
    class Reader:
        writer = False

    assert not is_writer(Reader())
    assert not is_writer(PrefixedStore(Reader(), b"p/"))  # type: ignore[arg-type]


def test_a_writer_holds_the_lock_file_beside_the_data(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with LMDBStore(path) as store:
        assert store.writer and (path / WRITER_LOCK_FILE).exists()
        with pytest.raises(StoreError, match="readonly=True"):
            LMDBStore(path)
        store.put(b"k", b"v")
    with LMDBStore(path, readonly=True) as reader:
        assert not reader.writer and reader.get(b"k") == b"v"
        with pytest.raises(StoreError):
            reader.put(b"k", b"w")


def test_another_process_holding_the_lock_refuses_writers_until_it_closes(tmp_path: Path) -> None:
    """The lock is the operating system's: held by a live process, released by its close."""
    path = tmp_path / "db"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdin is not None and holder.stdout is not None
        assert holder.stdout.readline() == b"holding\n"
        with pytest.raises(StoreError, match="writer lock"):
            LMDBStore(path)
        holder.stdin.write(b"\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == b"released\n"
        with LMDBStore(path) as store:
            assert store.writer
    finally:
        holder.kill()
        holder.wait()


def test_a_failed_open_does_not_keep_the_lock(tmp_path: Path) -> None:
    """A writer whose LMDB open fails leaves the lock free for the next one."""
    path = tmp_path / "db"
    path.mkdir()
    (path / "data.mdb").write_bytes(b"not an lmdb file" * 512)
    with pytest.raises((StoreError, StoreCorrupted)):
        LMDBStore(path)
    (path / "data.mdb").unlink()
    with LMDBStore(path) as store:
        assert store.writer


def test_readers_share_the_gate_and_reenter_it() -> None:
    gate = ReadGate()
    gate.enter_shared()
    gate.enter_shared()
    assert gate.depth() == 2
    entered = threading.Event()

    def other_reader() -> None:
        gate.enter_shared()
        entered.set()
        gate.exit_shared()

    thread = threading.Thread(target=other_reader)
    thread.start()
    thread.join(timeout=30)
    assert entered.is_set()
    gate.exit_shared()
    gate.exit_shared()
    assert gate.depth() == 0


def test_an_exclusive_holder_waits_for_other_readers_and_holds_new_ones_back() -> None:
    gate = ReadGate()
    reading, release_reader = threading.Event(), threading.Event()
    order: list[str] = []

    def reader() -> None:
        gate.enter_shared()
        reading.set()
        release_reader.wait(timeout=30)
        order.append("reader leaves")
        gate.exit_shared()

    def exclusive() -> None:
        gate.enter_exclusive()
        order.append("exclusive in")
        late = threading.Thread(target=late_reader)
        late.start()
        late.join(timeout=0.2)  # the late reader waits behind the exclusive holder
        order.append("exclusive out")
        gate.exit_exclusive()
        late.join(timeout=30)

    def late_reader() -> None:
        gate.enter_shared()
        order.append("late reader in")
        gate.exit_shared()

    first = threading.Thread(target=reader)
    first.start()
    assert reading.wait(timeout=30)
    holder = threading.Thread(target=exclusive)
    holder.start()
    holder.join(timeout=0.2)
    assert order == []  # still waiting for the reader
    release_reader.set()
    for thread in (first, holder):
        thread.join(timeout=30)
    assert order == ["reader leaves", "exclusive in", "exclusive out", "late reader in"]


def test_an_exclusive_holder_does_not_wait_for_its_own_reads() -> None:
    gate = ReadGate()
    gate.enter_shared()
    gate.enter_exclusive()
    gate.exit_exclusive()
    gate.exit_shared()
    assert gate.depth() == 0
