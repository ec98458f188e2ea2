"""LMDBStore specifics: reopening, read-only use, map growth, zero-copy reads, crash safety."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.processes import kill_once_ready
from vmstack.errors import StoreCorrupted
from vmstack.store import LMDBStore, StoreError

SMALL_MAP = 64 * 1024


def test_reopen_serves_the_same_data(tmp_path: Path) -> None:
    """A store closed and opened again returns the same pairs in the same order."""
    pairs = [(b"k%04d" % i, os.urandom(i % 300)) for i in range(1000)]
    with LMDBStore(tmp_path / "db") as store:
        with store.write_batch() as batch:
            for key, value in pairs:
                batch.put(key, value)
        store.delete(b"k0007")
    expected = [pair for pair in pairs if pair[0] != b"k0007"]
    with LMDBStore(tmp_path / "db") as again:
        assert list(again.iterate()) == expected
        assert len(again) == len(expected)
        with again.snapshot() as snap:
            assert bytes(snap.get(b"k0500")) == pairs[500][1]


def test_read_only_store_reads_but_refuses_writes(tmp_path: Path) -> None:
    """A read-only store serves reads and snapshots; every write raises StoreError."""
    with LMDBStore(tmp_path / "db") as store:
        store.put(b"k", b"v")
    with LMDBStore(tmp_path / "db", readonly=True) as reader:
        assert reader.readonly
        assert reader.get(b"k") == b"v"
        with reader.snapshot() as snap:
            assert bytes(snap.get(b"k")) == b"v"
        with pytest.raises(StoreError):
            reader.put(b"k", b"w")
        with pytest.raises(StoreError):
            reader.write_batch()
        with pytest.raises(StoreError, match="read-only"):
            reader.sync()
        assert reader.get(b"k") == b"v"


def test_an_unsynced_store_flushes_on_request_and_keeps_its_data(tmp_path: Path) -> None:
    """``sync=False`` skips the flush per commit; ``sync()`` flushes what was committed."""
    with LMDBStore(tmp_path / "db", sync=False) as store:
        store.put(b"k", b"v")
        store.sync()
    with LMDBStore(tmp_path / "db", readonly=True) as reader:
        assert reader.get(b"k") == b"v"


def test_read_only_open_of_a_missing_store_fails_clearly(tmp_path: Path) -> None:
    """Opening a store that does not exist read-only raises StoreError."""
    with pytest.raises(StoreError):
        LMDBStore(tmp_path / "absent", readonly=True)


def test_bad_arguments_are_value_errors(tmp_path: Path) -> None:
    """A non-positive map size or reader count is a ValueError."""
    with pytest.raises(ValueError):
        LMDBStore(tmp_path / "db", map_size=0)
    with pytest.raises(ValueError):
        LMDBStore(tmp_path / "db", max_readers=0)


def test_garbage_files_are_store_corrupted(tmp_path: Path) -> None:
    """A data file that is not an LMDB database raises StoreCorrupted on open."""
    folder = tmp_path / "db"
    folder.mkdir()
    (folder / "data.mdb").write_bytes(random.Random(3).randbytes(65536))
    with pytest.raises(StoreCorrupted):
        LMDBStore(folder)


def test_map_grows_instead_of_failing(tmp_path: Path) -> None:
    """Writes far beyond a tiny initial map succeed, singly and as one big batch."""
    store = LMDBStore(tmp_path / "db", map_size=SMALL_MAP)
    try:
        start = store.map_size
        for i in range(200):
            store.put(b"single%04d" % i, bytes([i % 256]) * 2000)
        with store.write_batch() as batch:
            for i in range(400):
                batch.put(b"batch%04d" % i, bytes([i % 256]) * 3000)
        assert store.map_size > start
        assert store.get(b"single0199") == bytes([199]) * 2000
        assert len(store) == 600
    finally:
        store.close()
    with LMDBStore(tmp_path / "db", map_size=SMALL_MAP) as again:
        assert again.get(b"batch0399") == bytes([399 % 256]) * 3000


def test_snapshot_values_are_zero_copy_memoryviews(tmp_path: Path) -> None:
    """Snapshot reads return memoryviews; store reads and store iteration return bytes."""
    with LMDBStore(tmp_path / "db") as store:
        store.put(b"k", b"value")
        with store.snapshot() as snap:
            value = snap.get(b"k")
            assert isinstance(value, memoryview)
            assert value.readonly
            assert value.tobytes() == b"value"
            ((key, listed),) = list(snap.iterate())
            assert isinstance(listed, memoryview)
            assert key == b"k"
            assert type(key) is bytes
        assert type(store.get(b"k")) is bytes
        assert all(type(v) is bytes for _, v in store.iterate())


def test_write_needing_growth_inside_own_snapshot_fails_cleanly(tmp_path: Path) -> None:
    """A thread holding a snapshot cannot grow the map: StoreError, nothing written."""
    with LMDBStore(tmp_path / "db", map_size=SMALL_MAP) as store:
        store.put(b"before", b"x")
        with store.snapshot() as snap:
            with pytest.raises(StoreError), store.write_batch() as batch:
                for i in range(100):
                    batch.put(b"big%03d" % i, b"y" * 4000)
            assert bytes(snap.get(b"before")) == b"x"
            store.put(b"small", b"fits")
        assert not store.has(b"big000")
        assert store.get(b"small") == b"fits"
        with store.write_batch() as batch:
            for i in range(100):
                batch.put(b"big%03d" % i, b"y" * 4000)
        assert store.has(b"big099")


def test_growth_waits_for_other_threads_snapshots(tmp_path: Path) -> None:
    """A write that must grow the map waits until snapshots held by other threads close."""
    with LMDBStore(tmp_path / "db", map_size=SMALL_MAP) as store:
        store.put(b"header", b"h" * 1000)
        done = threading.Event()

        def grow() -> None:
            with store.write_batch() as batch:
                for i in range(100):
                    batch.put(b"big%03d" % i, b"y" * 4000)
            done.set()

        with store.snapshot() as snap:
            view = snap.get(b"header")
            writer = threading.Thread(target=grow)
            writer.start()
            time.sleep(0.2)
            assert not done.is_set()
            assert bytes(view) == b"h" * 1000
        writer.join(timeout=30)
        assert done.is_set()
        assert store.has(b"big099")


def test_close_inside_own_snapshot_is_refused(tmp_path: Path) -> None:
    """close() from a thread that holds a snapshot raises StoreError and keeps the store."""
    with LMDBStore(tmp_path / "db") as store:
        store.put(b"k", b"v")
        with store.snapshot() as snap:
            with pytest.raises(StoreError):
                store.close()
            assert bytes(snap.get(b"k")) == b"v"
        assert not store.closed


def test_readers_stay_consistent_while_the_map_grows(tmp_path: Path) -> None:
    """Reader threads see whole batches while a writer keeps outgrowing a tiny map."""
    group = [b"g%02d" % i for i in range(8)]
    errors: list[BaseException] = []
    with LMDBStore(tmp_path / "db", map_size=SMALL_MAP) as store:
        with store.write_batch() as batch:
            for key in group:
                batch.put(key, b"0" * 64)
        finished = threading.Event()

        def write() -> None:
            try:
                for version in range(1, 60):
                    with store.write_batch() as batch:
                        for key in group:
                            batch.put(key, b"%d" % version * 64)
                        batch.put(b"fill%03d" % version, os.urandom(6000))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                finished.set()

        def read() -> None:
            try:
                while not finished.is_set():
                    with store.snapshot() as snap:
                        versions = {bytes(snap.get(key)) for key in group}
                        if len(versions) != 1:
                            raise AssertionError(f"torn read: {sorted(versions)}")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=write)] + [
            threading.Thread(target=read) for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not errors
        assert store.map_size > SMALL_MAP
        assert store.get(group[0]) == b"59" * 64


WRITER = r"""
import sys
from vmstack.store import LMDBStore

path, keys_per_batch, window, sync = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
store = LMDBStore(path, map_size=64 * 1024, sync=sync == "1")
try:
    number = int(store.get(b"meta/last")) + 1
except KeyError:
    number = 0
first = number
while True:
    with store.write_batch() as batch:
        for j in range(keys_per_batch):
            batch.put(b"batch/%08d/%03d" % (number, j), b"%d:%d:" % (number, j) * 40)
        if number >= window:
            for j in range(keys_per_batch):
                batch.delete(b"batch/%08d/%03d" % (number - window, j))
        batch.put(b"meta/last", b"%d" % number)
    if number == first:
        print("ready", flush=True)
    number += 1
"""
KEYS_PER_BATCH = 24
WINDOW = 6


def run_and_kill(path: Path, rng: random.Random, *, sync: bool) -> None:
    """Start the writer on ``path``, let it run a random while, then SIGKILL it."""
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(path),
            str(KEYS_PER_BATCH),
            str(WINDOW),
            "1" if sync else "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    kill_once_ready(writer, rng.uniform(0.02, 0.35))


def check_whole_batches(path: Path) -> int:
    """Open the store after a crash and check that only whole batches are visible."""
    with LMDBStore(path, map_size=64 * 1024) as store:
        last = int(store.get(b"meta/last"))
        batches: dict[int, list[tuple[bytes, bytes]]] = {}
        for key, value in store.iterate(b"batch/"):
            batches.setdefault(int(key.split(b"/")[1]), []).append((key, value))
        assert sorted(batches) == list(range(max(0, last - WINDOW + 1), last + 1))
        for number, pairs in batches.items():
            assert pairs == [
                (b"batch/%08d/%03d" % (number, j), b"%d:%d:" % (number, j) * 40)
                for j in range(KEYS_PER_BATCH)
            ]
        assert set(dict(store.iterate()).keys()) == {b"meta/last"} | {
            key for pairs in batches.values() for key, _ in pairs
        }
        return last


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "sync"), [(1, True), (2, True), (3, True), (4, False)])
def test_sigkilled_writer_leaves_only_whole_batches(tmp_path: Path, seed: int, sync: bool) -> None:
    """A writer SIGKILLed at random points (twice) leaves a store that opens with whole batches."""
    rng = random.Random(seed)
    path = tmp_path / "db"
    run_and_kill(path, rng, sync=sync)
    first = check_whole_batches(path)
    run_and_kill(path, rng, sync=sync)
    second = check_whole_batches(path)
    assert second >= first
