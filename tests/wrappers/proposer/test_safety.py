"""Consensus safety of the proposer layer against what a peer can send.

Two post-fork blocks may wrap one inner block; whichever is decided first, and in either
order, the inner block is decided once, as the accepted one says, and the rejected envelope
is never served again. Nothing a peer sends moves ``last_accepted`` sideways or backwards
or gives an accepted height another block.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.reliability.stacks import START, full_stack, grow
from tests.reliability.test_concurrency import check_linked
from vmstack import BlockNotFound, InvalidBlock, SimClock, get_ancestors
from vmstack.batching import serial_get_ancestors
from vmstack.cchain.generate import dev_transactions
from vmstack.conformance import MemoryVM
from vmstack.interfaces import ChainVM
from vmstack.store import LMDBStore, MemoryStore, ReadSnapshot
from vmstack.submission import find_mempool
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.envelope import build_signed
from vmstack.wrappers.proposer.staking import StakingKey
from vmstack.wrappers.proposer.vm import ProposerVM

from . import CHAIN_ID, make_vm, node_key
from . import grow as grow_proposer

OTHER_PROPOSER = StakingKey.generate(seed=b"another proposer")


def rewrap(
    parent: ProposerBlock,
    inner: bytes,
    *,
    key: StakingKey = OTHER_PROPOSER,
    delay: int = 1,
    chain_id: bytes = CHAIN_ID,
) -> bytes:
    """A signed post-fork block on ``parent`` wrapping ``inner`` (as a second proposer would
    send it: another key, another timestamp, so another ID)."""
    return bytes(
        build_signed(parent.id, parent.timestamp + delay, 0, inner, key=key, chain_id=chain_id)
    )


def heights(vm: ChainVM, top: int) -> list[bytes]:
    return [vm.get_block_id_at_height(height) for height in range(top + 1)]


def ancestors(vm: ChainVM, block_id: bytes) -> list[bytes]:
    return vm.get_ancestors(block_id, 100, 10**7, 60.0)  # type: ignore[attr-defined]


def memory_chain() -> tuple[ProposerVM, MemoryVM, SimClock, ProposerBlock]:
    """A proposer layer over a memory VM, forked at genesis, with three accepted signed
    post-fork blocks; returns the head too."""
    vm, inner, clock = make_vm(fork_time=0)
    head = grow_proposer(vm, clock, 3)[-1]
    return vm, inner, clock, head


def two_wrappers(
    vm: ProposerVM, clock: SimClock, head: ProposerBlock
) -> tuple[ProposerBlock, ProposerBlock]:
    """A block built on ``head`` and a second post-fork block wrapping the same inner block,
    both verified."""
    clock.advance(2)
    built = vm.build_block()
    built.verify()
    other = vm.parse_block(rewrap(head, bytes(built.inner)))
    assert other.id != built.id and other.inner.id == built.inner.id
    other.verify()
    return built, other


@pytest.mark.parametrize("accept_first", [True, False], ids=["accept-first", "reject-first"])
@pytest.mark.parametrize("accepted_index", [0, 1], ids=["built-wins", "rewrap-wins"])
def test_two_wrappers_of_one_inner_block_decide_it_once(
    accept_first: bool, accepted_index: int
) -> None:
    """Deciding two envelopes of one inner block, in either order, accepts the inner block
    once and never rejects it; the rejected envelope is not served and cannot come back."""
    vm, inner, clock, head = memory_chain()
    pair = two_wrappers(vm, clock, head)
    winner, loser = pair[accepted_index], pair[1 - accepted_index]
    inner_id = winner.inner.id
    if accept_first:
        winner.accept()
        loser.reject()
    else:
        loser.reject()
        winner.accept()
    assert [call.args[0] for call in inner.calls_to("block.reject")] == []
    assert inner.last_accepted() == inner_id
    assert vm.last_accepted() == winner.id
    assert vm.get_block_id_at_height(winner.height) == winner.id
    assert vm.get_block(winner.id).id == winner.id
    with pytest.raises(BlockNotFound):
        vm.get_block(loser.id)
    assert ancestors(vm, loser.id) == []
    assert serial_get_ancestors(vm, loser.id, max_blocks_num=10, max_retrieval_time=60.0) == []
    again = vm.parse_block(bytes(loser))
    with pytest.raises(InvalidBlock):
        again.verify()
    with pytest.raises(InvalidBlock):
        loser.verify()
    with pytest.raises(InvalidBlock):
        loser.accept()
    assert vm.last_accepted() == winner.id
    assert ancestors(vm, winner.id)[0] == bytes(winner)


def test_both_wrappers_rejected_leave_the_inner_block_to_its_siblings() -> None:
    """Rejecting every envelope of an inner block rejects nothing below: a third envelope
    verifies without verifying it again, and an accepted sibling rejects it, once."""
    vm, inner, clock, head = memory_chain()
    first, second = two_wrappers(vm, clock, head)
    inner_id = first.inner.id
    first.reject()
    assert vm.get_block(second.id).id == second.id
    second.reject()
    assert inner.calls_to("block.reject") == []
    for block in (first, second):
        with pytest.raises(BlockNotFound):
            vm.get_block(block.id)
    with pytest.raises(BlockNotFound, match="inner block of a post-fork block"):
        vm.get_block(inner_id)
    inner.forget_records()
    third = vm.parse_block(rewrap(head, bytes(first.inner), delay=3))
    third.verify()
    assert inner.calls_to("block.verify") == []
    vm.set_preference(head.id)
    clock.advance(5)
    sibling = vm.build_block()
    sibling.verify()
    assert sibling.inner.id != inner_id and sibling.inner.parent_id == first.inner.parent_id
    sibling.accept()
    assert [call.args[0] for call in inner.calls_to("block.reject")] == [inner_id]
    third.reject()
    assert [call.args[0] for call in inner.calls_to("block.reject")] == [inner_id]
    assert vm.last_accepted() == sibling.id


def test_an_envelope_of_an_accepted_inner_block_fails_verify() -> None:
    """Re-wrapping an accepted inner block (same parent, another proposer) is invalid and
    renames nothing."""
    vm, _, _, head = memory_chain()
    parent = vm.get_block(head.parent_id)
    before = heights(vm, head.height)
    forged = vm.parse_block(rewrap(parent, bytes(head.inner)))
    with pytest.raises(InvalidBlock, match=r"conflicts with the accepted chain|already accepted"):
        forged.verify()
    with pytest.raises(InvalidBlock):
        forged.accept()
    assert heights(vm, head.height) == before and vm.last_accepted() == head.id
    with pytest.raises(BlockNotFound):
        vm.get_block(forged.id)


def test_a_child_of_an_old_accepted_block_fails_verify() -> None:
    """A new block on an accepted block that is not the last accepted one conflicts with
    the accepted chain, even when the inner VM alone would take it."""
    vm, inner, clock, head = memory_chain()
    grandparent = vm.get_block(vm.get_block_id_at_height(head.height - 1))
    inner.set_preference(grandparent.inner.id)
    clock.advance(2)
    stray_inner = inner.build_block()
    inner.set_preference(head.inner.id)
    forged = vm.parse_block(rewrap(grandparent, bytes(stray_inner), delay=3))
    with pytest.raises(InvalidBlock, match="conflicts with the accepted chain"):
        forged.verify()
    assert vm.last_accepted() == head.id


def test_a_sibling_of_the_accepted_block_cannot_be_accepted() -> None:
    """Two siblings verified while both were valid: once one is accepted, accepting the
    other is refused (it would move last_accepted sideways)."""
    vm, _, clock, head = memory_chain()
    clock.advance(2)
    first = vm.build_block()
    first.verify()
    clock.advance(2)
    second = vm.build_block()
    second.verify()
    assert first.parent_id == second.parent_id == head.id and first.id != second.id
    first.accept()
    with pytest.raises(InvalidBlock, match="not the last accepted block"):
        second.accept()
    assert vm.last_accepted() == first.id
    assert vm.get_block_id_at_height(first.height) == first.id
    second.reject()
    with pytest.raises(BlockNotFound):
        vm.get_block(second.id)


def test_before_the_fork_the_accepted_chain_holds_too() -> None:
    """Pre-fork blocks over an inner VM that would take them: a new child of an older
    accepted block fails verify, and a sibling of the accepted block cannot be accepted."""
    vm, inner, clock = make_vm()
    blocks = grow_proposer(vm, clock, 3)
    head = blocks[-1]
    inner.set_preference(blocks[0].id)
    clock.advance(2)
    stray = vm.parse_block(bytes(inner.build_block()))
    inner.set_preference(head.id)
    with pytest.raises(InvalidBlock, match="conflicts with the accepted chain"):
        stray.verify()
    clock.advance(2)
    first = vm.build_block()
    first.verify()
    clock.advance(2)
    second = vm.build_block()
    second.verify()
    first.accept()
    with pytest.raises(InvalidBlock, match="not the last accepted block"):
        second.accept()
    assert vm.last_accepted() == inner.last_accepted() == first.id
    blocks[1].verify()  # an accepted block verifies again as a no-op
    assert vm.last_accepted() == first.id


def test_an_accepted_block_cannot_be_rejected() -> None:
    vm, _, _, head = memory_chain()
    with pytest.raises(InvalidBlock, match="accepted"):
        vm.get_block(head.id).reject()
    assert vm.last_accepted() == head.id


def test_restarted_layer_keeps_the_accepted_wrapper() -> None:
    """After the shared inner block is decided, a layer restarted over the same store
    serves the accepted envelope at its height and nothing of the rejected one."""
    store = MemoryStore()
    vm, inner, clock = make_vm(fork_time=0, store=store)
    head = grow_proposer(vm, clock, 2)[-1]
    built, other = two_wrappers(vm, clock, head)
    other.accept()
    built.reject()
    again = ProposerVM(
        inner, fork_time=0, chain_id=CHAIN_ID, store=store, clock=clock, staking_key=node_key()
    )
    assert again.last_accepted() == other.id
    assert again.get_block_id_at_height(other.height) == other.id
    with pytest.raises(BlockNotFound):
        again.get_block(built.id)


# --- through the full stack, over the C-chain VM --------------------------------------------


@pytest.mark.parametrize("accept_first", [True, False], ids=["accept-first", "reject-first"])
def test_two_wrappers_through_the_full_stack(accept_first: bool) -> None:
    """Over the C-chain VM (which refuses to reject an accepted block), two envelopes of one
    inner block decide in either order; the built block's transactions stay spent (none go
    back to the mempool), the chain keeps growing and the answers agree."""
    store, clock = MemoryStore(), SimClock(START)
    vm = full_stack(store, clock)
    grow(vm, clock, 12)
    head = vm.get_block(vm.last_accepted())
    clock.advance(2)
    mempool = find_mempool(vm)
    mempool.add_transactions(dev_transactions(vm, 3, seed=8))
    built = vm.build_block()
    built.verify()
    assert mempool.pending_transactions() == 3  # pending until a block with them is accepted
    envelope = _proposer_block(built)
    other = vm.parse_block(
        rewrap(_proposer_block(head), bytes(envelope.inner), chain_id=_proposer_vm(vm).chain_id)
    )
    other.verify()
    if accept_first:
        built.accept()
        other.reject()
    else:
        other.reject()
        built.accept()
    assert vm.last_accepted() == built.id
    assert mempool.pending_transactions() == 0
    with pytest.raises(BlockNotFound):
        vm.get_block(other.id)
    vm.set_preference(built.id)
    grow(vm, clock, 2)
    top = vm.last_accepted()
    answer = ancestors(vm, top)
    assert answer == serial_get_ancestors(vm, top, max_blocks_num=100, max_retrieval_time=60.0)
    assert len(answer) == vm.get_block(top).height + 1
    assert bytes(other) not in answer


def _proposer_vm(vm: object) -> ProposerVM:
    """The proposer layer of a stack."""
    while not isinstance(vm, ProposerVM):
        vm = vm.inner  # type: ignore[attr-defined]
    return vm


def _proposer_block(block: object) -> ProposerBlock:
    """The proposer layer's block inside the wrappers above it."""
    while not isinstance(block, ProposerBlock):
        block = block._inner  # type: ignore[attr-defined]
    return block


# --- reads racing accepts -------------------------------------------------------------------


class SnapshotHookStore(MemoryStore):
    """A memory store that runs ``hook`` (once) right after a snapshot opens: the moment
    between a reader opening its snapshot and reading from it."""

    def __init__(self) -> None:
        super().__init__()
        self.hook: Callable[[], None] | None = None

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        inner = super().snapshot()
        store = self

        class Opening:
            def __enter__(self) -> ReadSnapshot:
                snapshot = inner.__enter__()
                hook, store.hook = store.hook, None
                if hook is not None:
                    hook()
                return snapshot

            def __exit__(self, *exc: object) -> None:
                inner.__exit__(None, None, None)

        return Opening()


def test_get_ancestors_of_a_block_accepted_mid_call_is_not_empty() -> None:
    """A processing block accepted after the reader's snapshot opens is still in the
    answer: the processing blocks were looked at before the snapshot."""
    store = SnapshotHookStore()
    vm, _, clock = make_vm(fork_time=0, store=store)
    grow_proposer(vm, clock, 3)
    clock.advance(2)
    block = vm.build_block()
    block.verify()
    store.hook = block.accept
    answer = ancestors(vm, block.id)
    assert store.hook is None and vm.last_accepted() == block.id
    assert answer[:1] == [bytes(block)] and len(answer) == block.height + 1


@pytest.mark.slow
def test_get_ancestors_never_empty_for_blocks_processing_or_accepted_under_threads(
    tmp_path: Path,
) -> None:
    """Readers ask for blocks that are processing (verified, published) or accepted while
    a writer accepts them through the full stack on LMDB: never an empty answer."""
    store = LMDBStore(tmp_path / "db")
    clock = SimClock(START)
    vm = full_stack(store, clock)
    grow(vm, clock, 11)
    published = [vm.last_accepted()]
    stop = threading.Event()
    failures: list[BaseException] = []
    counted = [0]

    def read(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            block_id = rng.choice(published[-2:])
            try:
                answer = get_ancestors(vm, block_id, max_blocks_num=4)
                assert answer, f"empty answer for {block_id.hex()}"
                check_linked(answer, block_id)
            except BaseException as error:
                failures.append(error)
                return
            counted[0] += 1

    readers = [threading.Thread(target=read, args=(seed,), daemon=True) for seed in range(2)]
    for reader in readers:
        reader.start()
    mempool = find_mempool(vm)
    try:
        for index in range(40):
            clock.advance(2)
            mempool.add_transactions(dev_transactions(vm, 2, seed=4 + index))
            block = vm.build_block()
            block.verify()
            vm.set_preference(block.id)
            published.append(block.id)
            block.accept()
    finally:
        stop.set()
        for reader in readers:
            reader.join(timeout=60)
        store.close()
    assert failures == []
    assert counted[0] > 0


# --- an engine deciding random trees of envelopes --------------------------------------------


class Engine:
    """Decides a random tree of post-fork blocks the way consensus does: accept a
    processing child of the last accepted block, then reject every processing block that
    does not descend from it, in random order. Some blocks are second envelopes of another
    processing block's inner block."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.vm, self.inner, self.clock, head = memory_chain()
        self.accepted: list[bytes] = [
            self.vm.get_block_id_at_height(h) for h in range(head.height + 1)
        ]
        self.processing: dict[bytes, ProposerBlock] = {}
        self.rejected: set[bytes] = set()
        self.accepted_inner: set[bytes] = {head.inner.id}

    def step(self) -> None:
        action = self.rng.choice(["build", "build", "rewrap", "decide"])
        if action == "rewrap" and self.processing:
            original = self.rng.choice(list(self.processing.values()))
            parent = self.vm.get_block(original.parent_id)
            block = self.vm.parse_block(
                rewrap(parent, bytes(original.inner), delay=self.rng.randint(1, 3))
            )
            if block.id in self.processing:
                return
            block.verify()
            self.processing[block.id] = block
        elif action == "decide":
            self.decide()
        else:
            parent_id = self.rng.choice([self.accepted[-1], *self.processing])
            self.vm.set_preference(parent_id)
            self.clock.advance(self.rng.randint(1, 3))
            block = self.vm.build_block()
            block.verify()
            self.processing[block.id] = block

    def decide(self) -> None:
        candidates = [b for b in self.processing.values() if b.parent_id == self.accepted[-1]]
        if not candidates:
            return
        winner = self.rng.choice(candidates)
        winner.accept()
        del self.processing[winner.id]
        self.accepted.append(winner.id)
        self.accepted_inner.add(winner.inner.id)
        keep: set[bytes] = {winner.id}
        changed = True
        while changed:
            changed = False
            for block in self.processing.values():
                if block.parent_id in keep and block.id not in keep:
                    keep.add(block.id)
                    changed = True
        losers = [b for b in self.processing.values() if b.id not in keep]
        self.rng.shuffle(losers)
        for block in losers:
            block.reject()
            del self.processing[block.id]
            self.rejected.add(block.id)

    def check(self) -> None:
        vm = self.vm
        assert vm.last_accepted() == self.accepted[-1]
        assert self.inner.last_accepted() == vm.get_block(self.accepted[-1]).inner.id
        for height, block_id in enumerate(self.accepted):
            assert vm.get_block_id_at_height(height) == block_id
        rejected_inner = {call.args[0] for call in self.inner.calls_to("block.reject")}
        assert not rejected_inner & self.accepted_inner
        decided = [
            call.args[0]
            for call in self.inner.calls
            if call.method in ("block.accept", "block.reject")
        ]
        assert len(decided) == len(set(decided)), "an inner block was decided twice"
        # An undecided inner block can still be accepted: it descends from the last
        # accepted inner block through undecided ones (its envelopes may all have lost,
        # but another may still wrap it; the accepted sibling of it or of an ancestor
        # rejects it).
        verified = {call.args[0] for call in self.inner.calls_to("block.verify")}
        last_inner = self.inner.last_accepted()
        undecided = verified - set(decided) - {last_inner}
        for block_id in undecided:
            below = self.inner.known_block(block_id)
            while below is not None and below.parent_id in undecided:
                below = self.inner.known_block(below.parent_id)
            assert below is not None and below.parent_id == last_inner, (
                "a verified inner block that can no longer be accepted was left undecided"
            )
        for block_id in self.processing:
            assert vm.get_block(block_id).id == block_id
        for block_id in self.rejected:
            with pytest.raises(BlockNotFound):
                vm.get_block(block_id)
            assert ancestors(vm, block_id) == []


@pytest.mark.parametrize("seed", range(10))
def test_random_trees_of_envelopes_keep_the_accepted_chain(seed: int) -> None:
    """Whatever tree peers build and in whatever order it is decided: the accepted chain is
    the one decided, heights keep their blocks, no accepted inner block is ever rejected,
    and rejected envelopes are never served."""
    engine = Engine(seed)
    for _ in range(50):
        engine.step()
        engine.check()
    engine.decide()
    engine.check()
    assert len(engine.accepted) > 4 and engine.rejected
