"""Reading consecutive settled heights in LMDB: the reverse cursor scan of a snapshot, and
the cursor walk of the bench (same checks as the fast walk, same answer)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ERA1_SECOND as SECOND
from vmstack.benchmarks.history import cursor_walk, gets_walk
from vmstack.cchain import ETHEREUM, CChainVM
from vmstack.cchain.era1 import import_history
from vmstack.errors import StoreCorrupted
from vmstack.store import LMDBStore
from vmstack.store.history import EraArchive
from vmstack.store.lmdb.snapshot import LMDBSnapshot

#: Seconds each (walks imported from the real era1 files): the quick loop leaves them out.
pytestmark = pytest.mark.slow

COUNT = 300


def test_iterate_back_goes_down_from_start_within_the_prefix(tmp_path: Path) -> None:
    with LMDBStore(tmp_path / "db", sync=False) as store:
        for key in (b"a9", b"b1", b"b3", b"b5", b"c0"):
            store.put(key, key.upper())
        with store.snapshot() as snap:
            assert isinstance(snap, LMDBSnapshot)
            assert [(k, bytes(v)) for k, v in snap.iterate_back(b"b", start=b"b4")] == [
                (b"b3", b"B3"),
                (b"b1", b"B1"),
            ]
            assert [k for k, _ in snap.iterate_back(b"b", start=b"b5")] == [b"b5", b"b3", b"b1"]
            assert [k for k, _ in snap.iterate_back(b"b", start=b"zz")] == [b"b5", b"b3", b"b1"]
            assert list(snap.iterate_back(b"b", start=b"b0")) == []
            assert next(k for k, _ in snap.iterate_back(b"", start=b"\xff")) == b"c0"


@pytest.fixture
def imported(era_dir: Path, tmp_path: Path) -> Iterator[tuple[CChainVM, LMDBStore, int]]:
    """The last COUNT blocks of epoch 21 imported into LMDB, the file beneath."""
    folder = tmp_path / "era"
    folder.mkdir()
    (folder / SECOND).symlink_to(era_dir / SECOND)
    with (
        EraArchive(folder) as archive,
        LMDBStore(tmp_path / "db", sync=False, map_size=1 << 27) as store,
    ):
        import_history(archive, store, recent=COUNT, chain_id=11155111)
        yield (
            CChainVM(store, flavour=ETHEREUM, chain_id=11155111, history=archive),
            store,
            archive.last,
        )


def test_cursor_and_gets_walks_equal_get_ancestors(
    imported: tuple[CChainVM, LMDBStore, int],
) -> None:
    vm, store, top = imported
    tip = vm.last_accepted()
    expected = vm.get_ancestors(tip, COUNT, 2**40, 60.0)
    with store.snapshot() as snap:
        assert isinstance(snap, LMDBSnapshot)
        assert cursor_walk(snap, vm.schema, top, tip, COUNT) == expected
        assert gets_walk(snap, vm.schema, top, tip, COUNT) == expected


def test_walks_refuse_a_damaged_block(imported: tuple[CChainVM, LMDBStore, int]) -> None:
    """A body changed in place fails the integrity checksum on both walks."""
    vm, store, top = imported
    tip = vm.last_accepted()
    victim = vm.get_block_id_at_height(top - 10)
    key = vm.schema.body_key(top - 10, victim)
    body = bytearray(store.get(key))
    body[-1] ^= 0x01
    store.put(key, bytes(body))
    with store.snapshot() as snap:
        assert isinstance(snap, LMDBSnapshot)
        for walk in (cursor_walk, gets_walk):
            with pytest.raises(StoreCorrupted, match="fails its checksum"):
                walk(snap, vm.schema, top, tip, COUNT)
