"""The proposer layer's records: encodings with their checksums, the write-ahead accept,
its undo and the recovery of a write the inner VM never followed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vmstack.errors import StoreCorrupted
from vmstack.store import MemoryStore
from vmstack.store.format import FORMAT_KEY
from vmstack.wrappers.proposer.envelope import PostForkBlock, build_unsigned
from vmstack.wrappers.proposer.state import STORE_PREFIX, ProposerState, stored_block
from vmstack.wrappers.proposer.vm import ProposerVM

from . import CHAIN_ID, grow, make_vm

FORK = 10.0


def _envelope(parent_id: bytes, inner: bytes) -> PostForkBlock:
    return build_unsigned(parent_id, 100, 0, inner)


def _two_records(state: ProposerState) -> tuple[PostForkBlock, PostForkBlock]:
    """The first post-fork block (over pre-fork parent 0x01..) at height 5, and its child."""
    first = _envelope(b"\1" * 32, b"inner one")
    second = _envelope(first.id, b"inner two")
    state.write_accepted(first.id, b"\xa1" * 32, first, 5)
    state.write_accepted(second.id, b"\xa2" * 32, second, 6)
    return first, second


def test_written_records_read_back() -> None:
    """A record, its index entry, the newest pointer and the first height read back; the
    first height is the first block's, whatever is accepted after it."""
    state = ProposerState(MemoryStore())
    assert (state.newest_parent(), state.first_post_fork_height()) == (None, None)
    first, second = _two_records(state)
    assert state.record(first.id) == (b"\xa1" * 32, first)
    assert state.is_accepted(second.id) and not state.is_accepted(b"\xa3" * 32)
    assert state.accepted_envelope_of_inner(b"\xa2" * 32) == second.id
    assert state.accepted_envelope_of_inner(b"\xa3" * 32) is None
    assert state.accepted_envelope_of_inner(b"short") is None
    assert state.newest_parent() == first.id
    assert state.first_post_fork_height() == 5
    with state.snapshot() as snapshot:
        assert stored_block(snapshot, second.id) == (bytes(second), first.id)
        assert stored_block(snapshot, b"\xa3" * 32) is None


def test_undo_moves_the_newest_pointer_back_or_clears_it() -> None:
    """Undoing the newest record points back to its parent; undoing the first post-fork
    block leaves no pointer and no first height."""
    state = ProposerState(MemoryStore())
    first, second = _two_records(state)
    state.undo_record(second.id, b"\xa2" * 32, first.id)
    assert state.record(second.id) is None
    assert state.accepted_envelope_of_inner(b"\xa2" * 32) is None
    assert state.newest_parent() == b"\1" * 32
    state.undo_record(first.id, b"\xa1" * 32, b"\1" * 32)
    assert (state.newest_parent(), state.first_post_fork_height()) == (None, None)


def test_recover_undoes_only_a_record_the_inner_vm_never_accepted() -> None:
    """The newest record stays when its inner block is accepted, and is undone when not."""
    state = ProposerState(MemoryStore())
    first, second = _two_records(state)
    state.recover(lambda inner_id: True)
    assert state.is_accepted(second.id)
    state.recover(lambda inner_id: inner_id == b"\xa1" * 32)
    assert not state.is_accepted(second.id) and state.is_accepted(first.id)
    assert state.newest_parent() == b"\1" * 32


_INDEX_ONE = b"i" + b"\xa1" * 32
_INDEX_TWO = b"i" + b"\xa2" * 32
_READERS: dict[bytes, Callable[[ProposerState], object]] = {
    _INDEX_ONE: lambda state: state.accepted_envelope_of_inner(b"\xa1" * 32),
    b"last": ProposerState.newest_parent,
    b"first": ProposerState.first_post_fork_height,
}


@pytest.mark.parametrize(
    "key, damage",
    [
        (_INDEX_ONE, "flipped"),
        (_INDEX_ONE, "short"),
        (_INDEX_ONE, "misplaced"),
        (b"last", "flipped"),
        (b"last", "short"),
        (b"last", "misplaced"),
        (b"first", "flipped"),
        (b"first", "short"),
    ],
)
def test_damaged_pointers_are_store_corrupted(key: bytes, damage: str) -> None:
    """An index entry, newest pointer or first height that fails its checksum, has the
    wrong length or is another key's valid value is StoreCorrupted, never followed."""
    store = MemoryStore()
    state = ProposerState(store)
    _two_records(state)
    value = store.get(STORE_PREFIX + key)
    damaged = {
        "flipped": bytes([value[0] ^ 1]) + value[1:],
        "short": value[:-1],
        "misplaced": store.get(STORE_PREFIX + _INDEX_TWO),
    }[damage]
    store.put(STORE_PREFIX + key, damaged)
    with pytest.raises(StoreCorrupted):
        _READERS[key](state)


def test_accepted_blocks_survive_a_restart_over_the_same_store() -> None:
    """A new layer over the same store and inner VM serves the accepted post-fork blocks."""
    store = MemoryStore()
    vm, inner, clock = make_vm(fork_time=FORK, store=store)
    blocks = grow(vm, clock, 8)
    again = ProposerVM(inner, fork_time=FORK, chain_id=CHAIN_ID, store=store, clock=clock)
    assert again.last_accepted() == blocks[-1].id
    assert [bytes(again.get_block(block.id)) for block in blocks] == [
        bytes(block) for block in blocks
    ]
    assert all(key.startswith(STORE_PREFIX) or key == FORMAT_KEY for key, _ in store.iterate())


def test_corrupted_record_raises_store_corrupted() -> None:
    """A stored envelope that no longer hashes to its ID is never served as data."""
    store = MemoryStore()
    vm, _, clock = make_vm(fork_time=0, store=store)
    blocks = grow(vm, clock, 3)
    key = STORE_PREFIX + b"b" + blocks[1].id
    record = store.get(key)
    flipped = bytearray(record)
    flipped[32 + 50] ^= 1
    for corrupted in (bytes(flipped), record[:40]):
        store.put(key, corrupted)
        with pytest.raises(StoreCorrupted):
            vm.get_block(blocks[1].id)
        with pytest.raises(StoreCorrupted):
            vm.get_ancestors(blocks[1].id, 10, 10**6, 1.0)
        assert vm.get_ancestors(blocks[2].id, 10, 10**6, 1.0) == [bytes(blocks[2])]


def test_a_record_under_another_blocks_key_is_store_corrupted() -> None:
    """A sound record copied under another accepted block's key fails its checksum, which
    covers the key: record, stored_block and the newest pointer's parent all refuse it."""
    store = MemoryStore()
    state = ProposerState(store)
    first, second = _two_records(state)
    store.put(STORE_PREFIX + b"b" + second.id, store.get(STORE_PREFIX + b"b" + first.id))
    with pytest.raises(StoreCorrupted, match="value of another key"):
        state.record(second.id)
    with state.snapshot() as snapshot, pytest.raises(StoreCorrupted):
        stored_block(snapshot, second.id)
    with pytest.raises(StoreCorrupted):
        state.newest_parent()
