"""The KeyValueStore contract (vmstack.conformance.StoreConformance) run against every store
vmstack ships, and through PrefixedStore views; and a store that breaks it fails it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store.broken_stores import NonAtomicStore
from vmstack.conformance import StoreConformance
from vmstack.store import KeyValueStore, LMDBStore, MemoryStore, PrefixedStore, StoreClosed


class TestMemoryStore(StoreConformance):
    """MemoryStore meets the store contract."""

    def make_store(self) -> KeyValueStore:
        return MemoryStore()


class TestLMDBStore(StoreConformance):
    """LMDBStore meets the store contract."""

    def make_store(self) -> KeyValueStore:
        return LMDBStore(self.new_directory() / "db", map_size=1 << 20)


class TestPrefixedLMDBStore(StoreConformance):
    """A PrefixedStore view over an LMDBStore meets the store contract."""

    def make_store(self) -> KeyValueStore:
        return PrefixedStore(LMDBStore(self.new_directory() / "db", map_size=1 << 20), b"\x00ns/")


class TestPrefixedMemoryStore(StoreConformance):
    """A PrefixedStore view over a MemoryStore meets the store contract."""

    def make_store(self) -> KeyValueStore:
        return PrefixedStore(MemoryStore(), b"view/")


@pytest.mark.parametrize(
    "test", ["test_batch_commits_at_exit", "test_batch_that_raises_writes_nothing"]
)
def test_a_store_with_non_atomic_batches_fails_the_kit(test: str) -> None:
    """The kit's batch tests fail a store whose batches are not all or nothing."""
    kit = StoreConformance()
    with pytest.raises(AssertionError):
        getattr(kit, test)(NonAtomicStore())
    getattr(kit, test)(MemoryStore())


def test_the_kit_needs_make_store() -> None:
    """A kit class that does not say how to make its store says so."""
    with pytest.raises(NotImplementedError, match="must override make_store"):
        StoreConformance().make_store()


def test_store_is_a_context_manager(tmp_path: Path) -> None:
    """Leaving the with-block of a store closes it."""
    with LMDBStore(tmp_path / "db") as lmdb_store, MemoryStore() as memory_store:
        lmdb_store.put(b"k", b"v")
        memory_store.put(b"k", b"v")
    for closed in (lmdb_store, memory_store):
        with pytest.raises(StoreClosed):
            closed.get(b"k")


def test_prefixed_view_rejects_bad_prefix() -> None:
    """A view needs a non-empty bytes prefix."""
    with pytest.raises(TypeError):
        PrefixedStore(MemoryStore(), "p")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PrefixedStore(MemoryStore(), b"")
