"""Concurrency: reader threads call ``get_ancestors``, the serial walk, ``batched_parse_block``
and ``get_block`` through the full stack over an ``LMDBStore`` while a writer accepts blocks
across the transition and the proposer fork. Every answer is a consistent chain prefix
(each block's parent is the next block) and nothing but a documented error comes out."""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from tests.reliability.stacks import START, TRANSITION_TIME, chain_of, full_stack, grow
from tests.reliability.stores import PausingStore
from vmstack import BlockNotFound, InvalidBlock, SimClock, batched_parse_block, get_ancestors
from vmstack.batching import serial_get_ancestors
from vmstack.cchain import header_parent_hash, header_slice, keccak256
from vmstack.interfaces import ChainVM
from vmstack.stack import build_stack
from vmstack.store import KeyValueStore, LMDBStore, MemoryStore
from vmstack.wrappers.proposer.envelope import decode_block

BLOCKS = 36


def id_and_parent(data: bytes) -> tuple[bytes, bytes]:
    """A served block's ID and parent ID from its bytes: a proposer envelope, or C-chain RLP."""
    if data[:2] == b"\0\0":
        envelope = decode_block(data)
        return envelope.id, envelope.parent_id
    header = header_slice(data)
    return keccak256(header), header_parent_hash(header)


def check_linked(answer: Sequence[bytes], first: bytes) -> None:
    """``answer`` starts at block ``first`` and each block's parent is the next block."""
    assert answer, "an accepted block's answer is never empty"
    links = [id_and_parent(data) for data in answer]
    assert links[0][0] == first
    for (_, parent), (child_of, _) in itertools.pairwise(links):
        assert parent == child_of


class Readers:
    """Reader threads running one kind of request in a loop until told to stop, keeping
    every unexpected error and counting their answers. ``heads`` holds the IDs the writer
    has accepted, in order (what an engine knows from its own decisions)."""

    def __init__(self, vm: ChainVM, heads: list[bytes]) -> None:
        self.vm = vm
        self.heads = heads
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.answers: dict[str, int] = {}
        self.lengths: set[int] = set()
        self.threads: list[threading.Thread] = []

    def start(self, name: str, request: Callable[[random.Random], int], seed: int) -> None:
        def run() -> None:
            rng = random.Random(seed)
            while not self.stop.is_set():
                try:
                    self.lengths.add(request(rng))
                except BaseException as error:
                    error.add_note(f"in reader {name!r}")
                    self.errors.append(error)
                    return
                self.answers[name] = self.answers.get(name, 0) + 1

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)
            assert not thread.is_alive()


def batched_request(vm: ChainVM, heads: list[bytes]) -> Callable[[random.Random], int]:
    def request(rng: random.Random) -> int:
        head = rng.choice(heads[-3:])
        answer = get_ancestors(
            vm, head, max_blocks_num=rng.randint(1, 64), max_retrieval_time=3600.0
        )
        check_linked(answer, head)
        return len(answer)

    return request


def serial_request(vm: ChainVM, heads: list[bytes]) -> Callable[[random.Random], int]:
    def request(rng: random.Random) -> int:
        head = rng.choice(heads[-3:])
        answer = serial_get_ancestors(
            vm, head, max_blocks_num=rng.randint(1, 24), max_retrieval_time=3600.0
        )
        check_linked(answer, head)
        return len(answer)

    return request


def parse_request(vm: ChainVM, heads: list[bytes]) -> Callable[[random.Random], int]:
    def request(rng: random.Random) -> int:
        head = rng.choice(heads[-3:])
        answer = get_ancestors(
            vm, head, max_blocks_num=rng.randint(1, 32), max_retrieval_time=3600.0
        )
        blocks = answer[::-1]
        try:
            parsed = batched_parse_block(vm, blocks)
        except InvalidBlock as error:
            raise AssertionError(f"accepted blocks failed to parse: {error}") from error
        assert [bytes(block) for block in parsed] == blocks
        assert [block.id for block in parsed] == [id_and_parent(b)[0] for b in blocks]
        return len(parsed)

    return request


def height_request(vm: ChainVM, heads: list[bytes]) -> Callable[[random.Random], int]:
    def request(rng: random.Random) -> int:
        height = rng.randint(0, len(heads) - 1)
        block_id = vm.get_block_id_at_height(height)
        block = vm.get_block(block_id)
        assert block.id == block_id == heads[height] and block.height == height
        try:
            above = vm.get_block(vm.get_block_id_at_height(height + 1))
        except BlockNotFound:
            return 1
        assert above.parent_id == block_id
        return 2

    return request


def last_accepted_request(vm: ChainVM, heads: list[bytes]) -> Callable[[random.Random], int]:
    def request(rng: random.Random) -> int:
        head = vm.last_accepted()
        block = vm.get_block(head)
        assert block.id == head
        answer = get_ancestors(
            vm, head, max_blocks_num=rng.randint(1, 16), max_retrieval_time=3600.0
        )
        check_linked(answer, head)
        return len(answer)

    return request


def stack_without_proposer(store: KeyValueStore, clock: SimClock) -> ChainVM:
    """Every layer but the proposer: transition, tracing and metering over the C-chain VM."""
    return build_stack(
        store,
        clock=clock,
        transition_time=TRANSITION_TIME,
        tracer=NoOpTracer(),
        registry=CollectorRegistry(),
    )


REQUESTS = {
    "batched": batched_request,
    "serial": serial_request,
    "parse": parse_request,
    "heights": height_request,
}


@pytest.mark.parametrize(
    ("backend", "name"),
    [
        ("lmdb", "full stack"),
        ("memory", "full stack"),
        ("lmdb", "stack without proposer"),
    ],
)
@pytest.mark.slow
def test_readers_see_consistent_prefixes_while_a_writer_accepts(
    tmp_path: Path, backend: str, name: str
) -> None:
    """Readers of every kind (and, without the proposer, of last_accepted) run alongside a
    writer accepting blocks across the transition and the fork, and every answer is a linked
    chain prefix, every batch parses back to the same blocks and no reader sees an error."""
    store: KeyValueStore = (
        LMDBStore(tmp_path / "db", map_size=256 * 1024) if backend == "lmdb" else MemoryStore()
    )
    clock = SimClock(START)
    vm = full_stack(store, clock) if name == "full stack" else stack_without_proposer(store, clock)
    heads = [vm.last_accepted()]
    readers = Readers(vm, heads)
    kinds = dict(REQUESTS)
    if name != "full stack":
        kinds["last accepted"] = last_accepted_request
    for seed, (kind, make) in enumerate(kinds.items()):
        readers.start(kind, make(vm, heads), seed)
    writer_errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(BLOCKS):
                heads.extend(grow(vm, clock, 1, seed=11))
        except BaseException as error:
            writer_errors.append(error)

    writer = threading.Thread(target=write, name="writer")
    writer.start()
    writer.join(timeout=120)
    readers.join()
    assert not writer.is_alive()
    assert writer_errors == []
    assert readers.errors == []
    assert set(readers.answers) == set(kinds)
    assert len(readers.lengths) > 3
    head = vm.last_accepted()
    assert head == heads[-1] and vm.get_block(head).height == BLOCKS
    final = get_ancestors(vm, head, max_blocks_num=10_000, max_retrieval_time=3600.0)
    assert (
        final
        == serial_get_ancestors(vm, head, max_blocks_num=10_000, max_retrieval_time=3600.0)
        == chain_of(vm, head)
    )
    check_linked(final, head)
    store.close()


def test_last_accepted_is_served_in_the_middle_of_an_accept() -> None:
    """A reader asking for the last accepted block while a post-fork block is being accepted
    (inner block accepted, the proposer's record not yet written) gets a served block."""
    from vmstack.wrappers.proposer.state import STORE_PREFIX

    # Paused just before the commit of a batch that writes a key of the proposer's.
    store = PausingStore(lambda ops: any(key.startswith(STORE_PREFIX) for key, _ in ops))
    clock = SimClock(START)
    vm = full_stack(store, clock)
    heads = [vm.last_accepted(), *grow(vm, clock, 11)]
    seen: list[bytes] = []

    def look() -> None:
        seen.append(vm.last_accepted())

    store.pause = look
    heads.extend(grow(vm, clock, 1))
    assert seen, "the accept wrote no proposer record"
    for head in seen:
        assert head in heads[-2:]
        assert vm.get_block(head).id == head
