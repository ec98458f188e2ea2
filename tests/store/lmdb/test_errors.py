"""LMDB's errors in the project's terms: damage is StoreCorrupted, every other failure a
StoreError, each naming what was being done."""

from __future__ import annotations

import lmdb
import pytest

from vmstack.errors import StoreCorrupted
from vmstack.store import StoreError
from vmstack.store.lmdb.errors import CORRUPTION_ERRORS, translate_error


@pytest.mark.parametrize(
    "damage",
    [
        "CorruptedError",
        "PageNotFoundError",
        "InvalidError",
        "VersionMismatchError",
        "BadChecksumError",
    ],
)
def test_damaged_files_are_store_corrupted(damage: str) -> None:
    error = translate_error(getattr(lmdb, damage)("bad page"), "cannot read key 00")
    assert isinstance(error, StoreCorrupted)
    assert str(error) == "cannot read key 00: bad page"


@pytest.mark.parametrize(
    "failure", [lmdb.MapFullError, lmdb.ReadersFullError, lmdb.DiskError, lmdb.Error]
)
def test_other_failures_are_store_errors_not_corruption(failure: type[lmdb.Error]) -> None:
    assert not issubclass(failure, CORRUPTION_ERRORS)
    error = translate_error(failure("no room"), "cannot commit a write batch")
    assert isinstance(error, StoreError) and not isinstance(error, StoreCorrupted)
    assert str(error) == "cannot commit a write batch: no room"
