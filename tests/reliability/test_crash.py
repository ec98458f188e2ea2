"""Crash safety: a node killed while accepting blocks reopens with only complete blocks, heads
that name complete blocks, and ancestors answers equal to the serial walk.

Two ways to crash. A writer process accepting blocks into an ``LMDBStore`` is SIGKILLed at
random moments (several seeds), which tests the real store and the real process. And, in
process, a store that "dies" before its k-th write commits, for every k, which tests every
point between two writes deterministically: the stack is then reopened on what the store
holds, as a restarted node would be.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.reliability.stacks import (
    START,
    bare_vm,
    chain_of,
    check_ancestors_agree,
    check_store,
    full_stack,
)
from tests.reliability.stores import replay
from tests.support.processes import kill_once_ready
from vmstack import SimClock
from vmstack.cchain import CChainVM, rawdb
from vmstack.cchain.generate import dev_transactions
from vmstack.interfaces import ChainVM
from vmstack.stack import build_stack
from vmstack.store import (
    BufferedWriteBatch,
    BytesLike,
    KeyValueStore,
    LMDBStore,
    MemoryStore,
    ReadSnapshot,
    WriteBatch,
)
from vmstack.store.base import WriteOp
from vmstack.submission import find_mempool

#: These tests SIGKILL writer processes.
pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parents[2]

# --- SIGKILL of a real writer process ------------------------------------------------------

WRITER = r"""
import sys
from vmstack import SimClock
from vmstack.cchain import CChainVM, generate_chain
from vmstack.stack import build_stack
from vmstack.store import LMDBStore

CONFIGS = {
    "cchain": lambda store, clock: CChainVM(store, clock=clock),
    "cchain settle_lag=3": lambda store, clock: CChainVM(store, clock=clock, settle_lag=3),
    "stack without proposer": lambda store, clock: build_stack(
        store, clock=clock, transition_time=START + 10),
}
path, config, seed, START = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
store = LMDBStore(path, map_size=1 << 20)
clock = SimClock(0.0)
vm = CONFIGS[config](store, clock)
clock.advance(max(vm.get_block(vm.last_accepted()).timestamp, START) - clock())


def ready(count: int) -> None:
    if count == 1:
        print("ready", flush=True)


generate_chain(vm, blocks=10**6, txs_per_block=4, seed=seed, clock=clock, progress=ready)
"""

#: The stacks the writer runs, rebuilt here the same way to check what it left.
CONFIGS: dict[str, Callable[[KeyValueStore, SimClock], ChainVM]] = {
    "cchain": lambda store, clock: CChainVM(store, clock=clock),
    "cchain settle_lag=3": lambda store, clock: CChainVM(store, clock=clock, settle_lag=3),
    "stack without proposer": lambda store, clock: build_stack(
        store, clock=clock, transition_time=START + 10
    ),
}


def open_stack(config: str, store: KeyValueStore, clock: SimClock) -> ChainVM:
    """The stack named ``config`` over ``store``, as the writer process builds it."""
    assert f'"{config}": lambda store, clock:' in WRITER
    return CONFIGS[config](store, clock)


def run_and_kill(path: Path, config: str, seed: int, rng: random.Random) -> None:
    """Start a writer on ``path``, let it accept blocks for a random while, SIGKILL it."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), config, str(seed), str(START)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    kill_once_ready(writer, rng.uniform(0.01, 0.3))


def check_reopened(path: Path, config: str) -> int:
    """Reopen the store after a kill: complete blocks, sound heads, agreeing answers."""
    with LMDBStore(path, map_size=1 << 20) as store:
        height = check_store(store)
        vm = open_stack(config, store, SimClock(0.0))
        head = vm.last_accepted()
        assert vm.get_block(head).height == height
        answer = check_ancestors_agree(vm, head)
        assert len(answer) == height + 1
        return height


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "seed"),
    [
        ("cchain", 1),
        ("cchain settle_lag=3", 2),
        ("stack without proposer", 3),
    ],
)
def test_sigkilled_writer_leaves_complete_blocks(tmp_path: Path, config: str, seed: int) -> None:
    """A writer SIGKILLed twice at random moments leaves a store whose every visible block
    is complete and whose ancestors answers equal the serial walk; the chain only grows."""
    rng = random.Random(seed)
    path = tmp_path / "db"
    run_and_kill(path, config, seed, rng)
    first = check_reopened(path, config)
    run_and_kill(path, config, seed + 100, rng)
    second = check_reopened(path, config)
    assert first >= 1 and second >= first


# --- a crash before each write, in process -------------------------------------------------


class Crash(BaseException):
    """The process "dies" here: nothing catches it, nothing after it runs."""


class CrashingStore:
    """A store that dies before its ``crash_at``-th write commits (counting from 0; every
    write batch and every single put or delete counts as one write). Reads pass through."""

    def __init__(self, inner: KeyValueStore, crash_at: int | None) -> None:
        self.inner = inner
        self.crash_at = crash_at
        self.writes = 0

    def _commit(self, ops: Sequence[WriteOp]) -> None:
        if self.writes == self.crash_at:
            raise Crash(f"crash before write {self.writes}")
        self.writes += 1
        with self.inner.write_batch() as batch:
            replay(ops, batch)

    def get(self, key: bytes) -> bytes:
        return self.inner.get(key)

    def has(self, key: bytes) -> bool:
        return self.inner.has(key)

    def put(self, key: bytes, value: BytesLike) -> None:
        self._commit([(key, bytes(value))])

    def delete(self, key: bytes) -> None:
        self._commit([(key, None)])

    def write_batch(self) -> WriteBatch:
        return BufferedWriteBatch(self._commit)

    def iterate(
        self, prefix: bytes = b"", *, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        return self.inner.iterate(prefix, start=start)

    def snapshot(self) -> AbstractContextManager[ReadSnapshot]:
        return self.inner.snapshot()

    def close(self) -> None:
        self.inner.close()


def accept_blocks(
    vm: ChainVM, clock: SimClock, count: int, accepted: list[bytes], in_flight: list[bytes]
) -> None:
    """Build, verify, prefer and accept ``count`` blocks on ``vm`` as an engine does,
    recording each block's ID in ``in_flight`` before its accept and in ``accepted`` after."""
    for _ in range(count):
        clock.advance(2.0)
        find_mempool(vm).add_transactions(dev_transactions(vm, 3, seed=5 + len(accepted)))
        block = vm.build_block()
        block.verify()
        vm.set_preference(block.id)
        in_flight[:] = [block.id]
        block.accept()
        accepted.append(block.id)
        in_flight.clear()


def ids_of(vm: ChainVM, head: bytes) -> list[bytes]:
    """IDs of ``head`` and its ancestors, oldest first, by ``get_block``."""
    out: list[bytes] = []
    block_id = head
    while True:
        block = vm.get_block(block_id)
        out.append(block.id)
        if block.height == 0:
            return out[::-1]
        block_id = block.parent_id


#: Each stack, and how many blocks take it past all its rules (settling with a lag, the
#: transition at block 5, the proposer fork after block 10).
STACKS: dict[str, tuple[Callable[[KeyValueStore, SimClock], ChainVM], int]] = {
    "cchain": (bare_vm, 5),
    "cchain settle_lag=2": (lambda store, clock: CChainVM(store, clock=clock, settle_lag=2), 6),
    "stack without proposer": (
        lambda store, clock: build_stack(store, clock=clock, transition_time=START + 10),
        7,
    ),
    "full stack": (full_stack, 12),
}


def crash_points(factory: Callable[[KeyValueStore, SimClock], ChainVM], blocks: int) -> int:
    """How many writes building the stack and accepting ``blocks`` blocks makes."""
    store = CrashingStore(MemoryStore(), None)
    clock = SimClock(START)
    accept_blocks(factory(store, clock), clock, blocks, [], [])
    return store.writes


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "cchain",
        "cchain settle_lag=2",
        "stack without proposer",
        "full stack",
    ],
)
def test_a_crash_before_any_write_reopens_consistently(name: str) -> None:
    """For every write the node makes, a crash just before it leaves a store that reopens
    with complete blocks, a head that is the last accepted block or the one being accepted,
    the accepted chain as the head's ancestry, agreeing ancestors answers, and a node that
    goes on accepting blocks."""
    factory, blocks = STACKS[name]
    total = crash_points(factory, blocks)
    assert total > blocks
    for crash_at in range(total):
        memory = MemoryStore()
        store = CrashingStore(memory, crash_at)
        clock = SimClock(START)
        accepted: list[bytes] = []
        in_flight: list[bytes] = []
        with pytest.raises(Crash):
            accept_blocks(factory(store, clock), clock, blocks, accepted, in_flight)
        check_reopened_after_crash(factory, memory, clock, accepted, in_flight, crash_at)


def check_reopened_after_crash(
    factory: Callable[[KeyValueStore, SimClock], ChainVM],
    memory: MemoryStore,
    clock: SimClock,
    accepted: list[bytes],
    in_flight: list[bytes],
    crash_at: int,
) -> None:
    """The checks of a node restarted on ``memory`` after a crash before write ``crash_at``."""
    where = f"crash before write {crash_at}"
    if not memory.has(rawdb.Schema(b"").last_accepted_key()):
        assert not accepted, where
        return
    check_store(memory)
    restarted = factory(memory, clock)
    head = restarted.last_accepted()
    chain = ids_of(restarted, head)
    assert chain[1:] in (accepted, accepted + in_flight), where
    check_ancestors_agree(restarted, head)
    assert [bytes(restarted.get_block(i)) for i in chain[::-1]] == chain_of(restarted, head)
    accept_blocks(restarted, clock, 2, chain[1:], [])


def test_crashing_store_really_crashes() -> None:
    """The crashing store stops the node at the chosen write and keeps what came before
    (the format record, the genesis block and two accepted blocks)."""
    memory = MemoryStore()
    store = CrashingStore(memory, 4)
    clock = SimClock(START)
    accepted: list[bytes] = []
    with pytest.raises(Crash):
        accept_blocks(bare_vm(store, clock), clock, 10, accepted, [])
    assert store.writes == 4
    assert len(accepted) == 2
    assert check_store(memory) == 2
