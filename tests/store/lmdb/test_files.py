"""The data file checked before LMDB maps it: a file cut short is StoreCorrupted naming it
and both sizes (never a SIGBUS), and a store that held data is never opened as a new one
when its data file is empty or gone."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from tests.support.processes import python_child_output
from vmstack.errors import StoreCorrupted
from vmstack.store import LMDBStore
from vmstack.store.lmdb.files import DATA_FILE, HELD_DATA_MARKER, check_data_file

#: Seconds a child opening a damaged store may take before the test fails.
DEADLINE = 60.0

_OPEN_IN_CHILD = """
import sys
from vmstack.errors import StoreCorrupted
from vmstack.store import LMDBStore
try:
    store = LMDBStore(sys.argv[1], readonly=sys.argv[2] == "readonly")
    print("opened", sum(len(value) for _, value in store.iterate(b"")))
except StoreCorrupted as error:
    print("StoreCorrupted:", error)
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of about 1.4 MB of values, committed in several transactions."""
    path = tmp_path_factory.mktemp("lmdb") / "db"
    rng = random.Random(5)
    with LMDBStore(path) as store:
        for round_ in range(14):
            with store.write_batch() as batch:
                for index in range(50):
                    batch.put(b"k%02d%03d" % (round_, index), rng.randbytes(2000))
    assert os.path.getsize(path / DATA_FILE) > 1_400_000
    return path


def copy_cut(written: Path, target: Path, size: int) -> Path:
    shutil.copytree(written, target)
    os.truncate(target / DATA_FILE, size)
    return target


def open_in_child(path: Path, mode: str) -> str:
    """What a child process opening ``path`` printed; the test fails if it died."""
    return python_child_output(_OPEN_IN_CHILD, str(path), mode, seconds=DEADLINE)


def cut_sizes(full: int) -> list[int]:
    """8 KiB, a few sizes between, and one byte short of the whole file."""
    return [8192, 8192 + 100, 65_536, full // 4, full // 2, full * 3 // 4, full - 4096, full - 1]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["writer", "readonly"])
def test_a_truncated_data_file_is_store_corrupted_never_a_signal(
    written: Path, tmp_path: Path, mode: str
) -> None:
    """Cut to any size from 8 KiB to one byte short, the data file is refused by the
    writer and a read-only opener alike, naming the file, its size and the size its meta
    page needs; the opening process lives."""
    full = os.path.getsize(written / DATA_FILE)
    for size in cut_sizes(full):
        path = copy_cut(written, tmp_path / f"cut{size}", size)
        said = open_in_child(path, mode)
        assert said.startswith("StoreCorrupted: "), said
        assert str(path / DATA_FILE) in said
        assert f"is {size} bytes" in said and f"at least {full} bytes" in said


def test_a_file_cut_below_its_meta_pages_is_store_corrupted(written: Path, tmp_path: Path) -> None:
    """A data file too short for its first or second meta page is refused as such."""
    for size, needed in ((100, "first meta page"), (5000, "at least")):
        path = copy_cut(written, tmp_path / f"cut{size}", size)
        with pytest.raises(StoreCorrupted, match=needed):
            LMDBStore(path)
    path = copy_cut(written, tmp_path / "cut4200", 4200)
    with pytest.raises(StoreCorrupted, match="too short to hold its two meta pages"):
        LMDBStore(path, readonly=True)


def test_a_whole_file_opens_and_reads_what_its_meta_names(written: Path) -> None:
    """The undamaged file passes, and its newest meta names exactly its pages."""
    meta = check_data_file(str(written))
    assert meta is not None and meta.txnid >= 14
    assert meta.required_size == os.path.getsize(written / DATA_FILE)
    with LMDBStore(written, readonly=True) as store:
        assert len(store) == 700


def test_the_marker_appears_with_the_first_commit(tmp_path: Path) -> None:
    """A store that was only opened has no marker; its first commit writes it."""
    path = tmp_path / "db"
    with LMDBStore(path) as store:
        assert not (path / HELD_DATA_MARKER).exists()
    with LMDBStore(path) as store:
        assert not (path / HELD_DATA_MARKER).exists()
        store.put(b"k", b"v")
        assert (path / HELD_DATA_MARKER).exists()


def test_a_writer_marks_a_store_written_before_the_marker(written: Path, tmp_path: Path) -> None:
    """A store with committed data but no marker (written before markers, or a crash
    right after its first commit) is marked by the next writer's open."""
    path = tmp_path / "db"
    shutil.copytree(written, path)
    (path / HELD_DATA_MARKER).unlink()
    with LMDBStore(path, readonly=True):
        assert not (path / HELD_DATA_MARKER).exists()
    with LMDBStore(path):
        assert (path / HELD_DATA_MARKER).exists()


@pytest.mark.parametrize("readonly", [False, True])
@pytest.mark.parametrize("damage", ["empty", "missing"])
def test_a_store_that_held_data_is_never_opened_as_new(
    written: Path, tmp_path: Path, readonly: bool, damage: str
) -> None:
    """An empty or missing data file beside the marker is StoreCorrupted naming both
    files, and nothing is written: the next opener is refused alike."""
    path = tmp_path / "db"
    shutil.copytree(written, path)
    if damage == "empty":
        os.truncate(path / DATA_FILE, 0)
    else:
        (path / DATA_FILE).unlink()
    state = "0 bytes" if damage == "empty" else "missing"
    for _ in range(2):
        with pytest.raises(StoreCorrupted) as caught:
            LMDBStore(path, readonly=readonly)
        assert str(path / DATA_FILE) in str(caught.value)
        assert f"is {state}" in str(caught.value)
        assert str(path / HELD_DATA_MARKER) in str(caught.value)
    assert not (path / DATA_FILE).exists() or os.path.getsize(path / DATA_FILE) == 0


def test_an_empty_data_file_of_a_new_store_opens_empty(tmp_path: Path) -> None:
    """Without the marker, an empty data file is a store that never committed."""
    path = tmp_path / "db"
    path.mkdir()
    (path / DATA_FILE).write_bytes(b"")
    with LMDBStore(path) as store:
        assert len(store) == 0
