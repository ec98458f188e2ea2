"""The proposer layer's batched parse with its signatures checked in worker processes: the
answers and errors are the serial parse's, element for element (ARCHITECTURE.md, section 3,
rule 7)."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable, Iterator, Sequence

import pytest

from tests.support.processes import ended, returns_within, wait_ended, wait_stopped
from vmstack.batching import batched_parse_block, serial_parse_block
from vmstack.cchain.generate import generate_chain
from vmstack.clock import SimClock
from vmstack.defaults import DEFAULT_CHAIN_ID
from vmstack.errors import InvalidBlock
from vmstack.interfaces import Block, ChainVM, find_layer
from vmstack.parsepool import ParsePool
from vmstack.stack import build_stack
from vmstack.store import MemoryStore
from vmstack.verifycache import clear_all
from vmstack.wrappers.proposer.envelope import PostForkBlock, build_signed
from vmstack.wrappers.proposer.staking import StakingKey
from vmstack.wrappers.proposer.verdicts import SignatureVerdicts, signature_verdict
from vmstack.wrappers.proposer.vm import ProposerVM

#: These tests start and stop parse-pool worker processes.
pytestmark = pytest.mark.processes

CHAIN_BLOCKS = 12
KEY = StakingKey.generate(seed=b"verdict tests")
CHAIN_ID = DEFAULT_CHAIN_ID.to_bytes(32, "big")


@pytest.fixture(autouse=True)
def _unverified() -> None:
    """Each test starts with no signature known verified, so its batches reach the pool
    (a signature this process verified is not handed out again)."""
    clear_all()


class Chain:
    """A signed chain through the full stack, and two parsers of it: the stack itself
    (no pool) and a proposer layer over the same VMs whose pool always takes a batch."""

    def __init__(self, pool: ParsePool) -> None:
        clock = SimClock(1_700_000_000.0)
        self.store = MemoryStore()
        self.reference: ChainVM = build_stack(self.store, clock=clock, fork_time=0, staking_key=KEY)
        ids = generate_chain(
            self.reference, blocks=CHAIN_BLOCKS + 1, txs_per_block=3, seed=5, clock=clock
        )
        self.blocks = [bytes(self.reference.get_block(block_id)) for block_id in ids[1:]]
        layer = find_layer(self.reference, ProposerVM)
        self.pooled = ProposerVM(
            layer.inner,
            fork_time=0,
            chain_id=DEFAULT_CHAIN_ID,
            store=self.store,
            clock=clock,
            parse_pool=pool,
        )


@pytest.fixture(scope="module")
def pool() -> Iterator[ParsePool]:
    with ParsePool(2, threshold=0) as forced:
        yield forced


@pytest.fixture(scope="module")
def chain(pool: ParsePool) -> Chain:
    made = Chain(pool)
    assert pool.wait_ready(60)  # the layer started the workers as it was built
    return made


def _packed(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _bad_signature(data: bytes, rng: random.Random) -> bytes:
    envelope = PostForkBlock.decode(data)
    signature = bytearray(envelope.signature)
    signature[rng.randrange(len(signature))] ^= 0x01
    return data[: envelope.unsigned_len] + _packed(bytes(signature))


def _bad_framing(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(2, len(data) - 1)]


def _bad_inner(data: bytes, rng: random.Random) -> bytes:
    envelope = PostForkBlock.decode(data)
    inner = bytes(envelope.inner)
    return bytes(
        build_signed(
            envelope.parent_id,
            envelope.timestamp,
            envelope.pchain_height,
            inner[: rng.randrange(1, len(inner))],
            key=KEY,
            chain_id=CHAIN_ID,
        )
    )


SPOIL: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "bad signature": _bad_signature,
    "bad framing": _bad_framing,
    "bad inner block": _bad_inner,
}


def _outcome(
    parse: Callable[[ChainVM, Sequence[bytes]], Sequence[Block]],
    vm: ChainVM,
    batch: Sequence[bytes],
) -> tuple[object, ...]:
    try:
        return ("parsed", [block.id for block in parse(vm, batch)])
    except InvalidBlock as error:
        return ("refused", error.reason, error.index)


def _submissions(pool: ParsePool, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the size of every batch handed to ``pool``."""
    sizes: list[int] = []
    submit = pool.submit

    def counting(function: Callable[[object], object], items: Sequence[object]) -> object:
        sizes.append(len(items))
        return submit(function, items)

    monkeypatch.setattr(pool, "submit", counting)
    return sizes


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", sorted(SPOIL))
def test_a_bad_element_anywhere_gives_the_serial_answer(
    chain: Chain, pool: ParsePool, kind: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A random batch with one bad element at a random position: the pooled parse refuses
    it with the serial parse's reason and index."""
    rng = random.Random(f"{kind} {seed}")
    batch = rng.sample(chain.blocks, rng.randrange(1, len(chain.blocks) + 1))
    where = rng.randrange(len(batch))
    batch[where] = SPOIL[kind](batch[where], rng)
    sizes = _submissions(pool, monkeypatch)
    pooled = _outcome(batched_parse_block, chain.pooled, batch)
    assert pooled == _outcome(batched_parse_block, chain.reference, batch)
    assert pooled == _outcome(serial_parse_block, chain.reference, batch)
    assert pooled[0] == "refused" and pooled[2] == where
    # A run ends at an element that fails to decode: one at the head leaves none to send.
    assert sizes or (kind == "bad framing" and where == 0), "the batch never reached the pool"


@pytest.mark.parametrize("seed", range(4))
def test_a_good_batch_gives_the_same_blocks_in_order(
    chain: Chain, pool: ParsePool, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    batch = rng.sample(chain.blocks, rng.randrange(1, len(chain.blocks) + 1))
    sizes = _submissions(pool, monkeypatch)
    pooled = _outcome(batched_parse_block, chain.pooled, batch)
    assert pooled == _outcome(serial_parse_block, chain.reference, batch)
    assert pooled == ("parsed", [PostForkBlock.decode(data).id for data in batch])
    assert sizes == [len(batch)]


@pytest.mark.slow
def test_a_batch_below_the_threshold_never_reaches_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ParsePool(1, threshold=5) as small:
        made = Chain(small)
        sizes = _submissions(small, monkeypatch)
        assert _outcome(batched_parse_block, made.pooled, made.blocks[:4]) == _outcome(
            serial_parse_block, made.reference, made.blocks[:4]
        )
        assert sizes == []


def test_the_verdict_is_the_signature_check_itself() -> None:
    envelope = build_signed(bytes(32), 1, 0, b"\xc0", key=KEY, chain_id=CHAIN_ID)
    message = bytes(envelope.header(CHAIN_ID))
    good = (KEY.certificate.raw, message, envelope.signature)
    bad = (KEY.certificate.raw, message[:-1] + b"\0", envelope.signature)
    assert signature_verdict(good) is None
    reason = signature_verdict(bad)
    assert isinstance(reason, str) and reason
    assert envelope.certificate_info is not None
    with pytest.raises(InvalidBlock, match="signature verification failed"):
        PostForkBlock.decode(bytes(envelope)).verify(
            bytes(31) + b"\1", check_signature=SignatureVerdicts((), None).check
        )


@pytest.mark.slow
def test_a_worker_killed_mid_batch_still_gives_the_serial_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The workers are SIGKILLed right after a batch's checks reach them: the batch gives
    the serial answer (the checks run in this process), and later ones have new workers."""
    with ParsePool(1, threshold=0) as own:
        made = Chain(own)
        assert own.wait_ready(60)
        rng = random.Random("killed")
        batch = list(made.blocks)
        where = rng.randrange(len(batch))
        batch[where] = _bad_signature(batch[where], rng)
        submit = own.submit
        killed: list[int] = []

        def submit_then_kill(
            function: Callable[[object], object], items: Sequence[object]
        ) -> object:
            pending = submit(function, items)
            for pid in own.worker_pids:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            return pending

        monkeypatch.setattr(own, "submit", submit_then_kill)
        assert _outcome(batched_parse_block, made.pooled, batch) == _outcome(
            serial_parse_block, made.reference, batch
        )
        assert killed
        monkeypatch.setattr(own, "submit", submit)
        good = made.blocks[:6]
        # The dead worker is found by this batch or the next (if this process claimed all
        # the checks itself), and new workers start in the background.
        for _ in range(3):
            assert _outcome(batched_parse_block, made.pooled, good) == _outcome(
                serial_parse_block, made.reference, good
            )
        assert own.wait_ready(60)
        assert own.worker_pids and not set(own.worker_pids) & set(killed)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads process states from /proc")
@pytest.mark.timeout(180)
def test_a_stopped_worker_leaves_1800_envelopes_to_the_serial_parse() -> None:
    """The worker is SIGSTOPped: a batch of 1,800 signed envelopes (their checks far more
    than its pipe holds) is parsed serially once the pool's timeout has passed, with the
    serial answer, and the stopped worker is killed."""
    with ParsePool(1, threshold=0, timeout=2.0) as own:
        made = Chain(own)
        assert own.wait_ready(60)
        (pid,) = own.worker_pids
        batch = made.blocks * 150
        expected = _outcome(serial_parse_block, made.reference, batch)
        os.kill(pid, signal.SIGSTOP)
        try:
            assert wait_stopped(pid)
            # The checks are sent as one message far larger than a pipe holds, so the first
            # batch finds the worker stuck; where a pipe held it all, a later batch finds it
            # owing an answer past the timeout. Every batch gives the serial answer.
            deadline = time.monotonic() + 60
            while not ended(pid) and time.monotonic() < deadline:
                clear_all()  # the serial parse verified them: hand them out again
                assert (
                    returns_within(120, lambda: _outcome(batched_parse_block, made.pooled, batch))
                    == expected
                )
                time.sleep(0.2)
            assert wait_ended(pid), "the stopped worker was left behind"
        finally:
            if not ended(pid):
                os.kill(pid, signal.SIGKILL)
