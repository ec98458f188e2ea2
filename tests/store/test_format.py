"""The record format: a new store gets the format record, a store of another format (or of
format 1, records without a format record) is refused naming both versions, by every part
that keeps records in it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from vmstack import SimClock, build_stack
from vmstack.cchain import CChainVM, generate_chain
from vmstack.checksum import frame
from vmstack.errors import StoreCorrupted
from vmstack.interfaces import ChainVM
from vmstack.store import KeyValueStore, LMDBStore, MemoryStore
from vmstack.store.format import FORMAT_KEY, FORMAT_VERSION, check_format
from vmstack.wrappers.proposer import ProposerVM

START = 1_000.0


def record(version: int) -> bytes:
    return frame(FORMAT_KEY, version.to_bytes(4, "big"))


def test_a_new_store_gets_the_format_record() -> None:
    """No records and no format record: the record is written, and then holds."""
    store = MemoryStore()
    check_format(store, holds_records=False)
    assert store.get(FORMAT_KEY) == record(FORMAT_VERSION)
    check_format(store, holds_records=True)


def test_records_without_a_format_record_are_format_one() -> None:
    """A part's records and no format record: written before format records, refused."""
    with pytest.raises(
        StoreCorrupted,
        match=rf"format version 1, .* format version "
        rf"{FORMAT_VERSION} only",
    ):
        check_format(MemoryStore(), holds_records=True)


@pytest.mark.parametrize("version", [1, FORMAT_VERSION + 1, 2**32 - 1])
def test_another_version_is_refused_naming_both(version: int) -> None:
    store = MemoryStore()
    store.put(FORMAT_KEY, record(version))
    with pytest.raises(
        StoreCorrupted,
        match=rf"format version {version}, .* format version "
        rf"{FORMAT_VERSION} only",
    ):
        check_format(store, holds_records=True)


@pytest.mark.parametrize(
    "damaged", [record(FORMAT_VERSION)[:-1], b"", b"\0" + record(FORMAT_VERSION)[1:]]
)
def test_a_damaged_format_record_is_store_corrupted(damaged: bytes) -> None:
    store = MemoryStore()
    store.put(FORMAT_KEY, damaged)
    with pytest.raises(StoreCorrupted, match="format record"):
        check_format(store, holds_records=False)


def test_a_read_only_store_is_left_as_it_is(tmp_path: Path) -> None:
    """A store that cannot be written gets no record and no error."""
    LMDBStore(tmp_path / "db").close()
    with LMDBStore(tmp_path / "db", readonly=True) as store:
        check_format(store, holds_records=False)
        assert not store.has(FORMAT_KEY)


def _stack(store: KeyValueStore, clock: SimClock) -> ChainVM:
    return build_stack(store, clock=clock, fork_time=START)


def _chain_vm(store: KeyValueStore, clock: SimClock) -> ChainVM:
    return CChainVM(store, clock=clock)


def _proposer(store: KeyValueStore, clock: SimClock) -> ChainVM:
    return ProposerVM(
        CChainVM(MemoryStore(), clock=clock), fork_time=START, chain_id=1, store=store, clock=clock
    )


@pytest.mark.parametrize("opener", [_stack, _chain_vm, _proposer])
@pytest.mark.parametrize("found", ["older", "none"])
def test_every_part_refuses_a_store_of_another_format(
    opener: Callable[[KeyValueStore, SimClock], ChainVM], found: str
) -> None:
    """The stack, the C-chain VM and the proposer layer each refuse a store holding their
    records in format 1 (an older format record, or none at all)."""
    store, clock = MemoryStore(), SimClock(START)
    vm = opener(store, clock)
    generate_chain(vm, blocks=2, txs_per_block=1, seed=1, clock=clock)
    if found == "older":
        store.put(FORMAT_KEY, record(1))
    else:
        store.delete(FORMAT_KEY)
    before = dict(store.iterate(b""))
    with pytest.raises(StoreCorrupted, match=rf"format version 1, .* {FORMAT_VERSION} only"):
        opener(store, SimClock(START + 100))
    assert dict(store.iterate(b"")) == before
