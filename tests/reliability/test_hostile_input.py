"""What one hostile peer message can cost: each attack is refused (or handled) with bounded
work. The work is counted (calls to the expensive function, or a tracemalloc peak), never
timed; the times are rows of ``vmstack bench`` (``vmstack.benchmarks.hostile``)."""

from __future__ import annotations

import functools
import math
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reliability.stacks import FORK_TIME, full_stack, grow, staking_key
from vmstack import SimClock
from vmstack.batching import MAX_CONTAINERS_LEN, batched_parse_block, serial_parse_block
from vmstack.benchmarks.hostile import committed_block, recoverable_transfers
from vmstack.cchain import AVALANCHE, Block, CChainVM
from vmstack.cchain.execution import TX_BASE_GAS
from vmstack.cchain.genesis import GAS_LIMIT
from vmstack.cchain.tries import derive_root
from vmstack.conformance import doubles
from vmstack.errors import InvalidBlock, InvalidSignature
from vmstack.interfaces import ChainVM
from vmstack.store import MemoryStore
from vmstack.wrappers.proposer import certificate as certificate_module
from vmstack.wrappers.proposer import verify as proposer_verify
from vmstack.wrappers.proposer import vm as proposer_module
from vmstack.wrappers.proposer.certificate import MAX_ECDSA_SIGNATURE_LEN
from vmstack.wrappers.proposer.envelope import PostForkBlock, build_signed, build_unsigned
from vmstack.wrappers.proposer.staking import der_element

#: Hostile input through whole stacks: the full suite runs it.
pytestmark = pytest.mark.thorough

START = 1_000.0


class Counter:
    """Counts the calls of one function it replaces (the original still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> None:
        self.calls = 0
        original: Callable[..., Any] = getattr(owner, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)


@pytest.fixture
def stack() -> Iterator[tuple[ChainVM, SimClock]]:
    """The full stack past its fork, with a few blocks on each side of it."""
    clock = SimClock(START)
    vm = full_stack(MemoryStore(), clock)
    grow(vm, clock, 14)
    assert clock() > FORK_TIME
    yield vm, clock


def _chain_id(vm: ChainVM) -> bytes:
    layer: object = vm
    while not isinstance(layer, proposer_module.ProposerVM):
        layer = getattr(layer, "inner")  # noqa: B009
    return layer.chain_id


def _inner_bytes(vm: ChainVM) -> bytes:
    """Bytes of a valid C-chain block (the inner block of the last accepted envelope)."""
    envelope = PostForkBlock.decode(bytes(vm.get_block(vm.last_accepted())))
    return envelope.inner


def _with_signature(envelope: PostForkBlock, signature: bytes) -> bytes:
    raw = bytes(envelope)
    return raw[: envelope.unsigned_len] + len(signature).to_bytes(4, "big") + signature


def _signed(vm: ChainVM, index: int, inner: bytes) -> bytes:
    return bytes(
        build_signed(
            index.to_bytes(32, "big"),
            int(START),
            0,
            inner,
            key=staking_key(),
            chain_id=_chain_id(vm),
        )
    )


def _bad_signature(data: bytes) -> bytes:
    envelope = PostForkBlock.decode(data)
    return _with_signature(envelope, bytes(envelope.signature[:-1]) + b"\0")


# --- parse_block ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1_000, 128_000, 2_000_000])
def test_an_oversized_der_signature_is_refused_without_verification(
    stack: tuple[ChainVM, SimClock], monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """A signature longer than any P-256 DER signature never reaches the curve arithmetic
    (nor a general DER parser); the envelope is InvalidBlock."""
    vm, _ = stack
    checks = Counter(monkeypatch, certificate_module, "_check_ecdsa")
    unsigned = PostForkBlock(b"\1" * 32, int(START), 0, staking_key().certificate.raw, b"\xc0")
    signature = der_element(
        0x30, der_element(0x02, b"\x01" + bytes(size)) + der_element(0x02, b"\x01")
    )
    assert len(signature) > MAX_ECDSA_SIGNATURE_LEN
    with pytest.raises(InvalidBlock, match="signature verification failed"):
        vm.parse_block(_with_signature(unsigned, signature))
    assert checks.calls == 0


@pytest.mark.parametrize(
    "signature",
    [
        b"\x30\x06\x02\x01\x01\x02\x01\x01\x00",  # trailing byte
        b"\x30\x07\x02\x01\x01\x02\x02\x00\x01",  # non-minimal integer
        b"\x30\x06\x02\x01\x00\x02\x01\x01",  # r = 0
        b"\x30\x06\x02\x01\xff\x02\x01\x01",  # r negative
        b"\x30\x03\x02\x01\x01",  # one integer
    ],
    ids=["trailing", "non-minimal", "zero-r", "negative-r", "one-integer"],
)
def test_malformed_der_signatures_are_refused_before_the_curve(
    monkeypatch: pytest.MonkeyPatch, signature: bytes
) -> None:
    """The DER reader is strict: any shape but SEQUENCE { INTEGER r, INTEGER s } with r, s
    in [1, n - 1] is refused before any point is multiplied."""
    checks = Counter(monkeypatch, certificate_module, "_check_ecdsa")
    with pytest.raises(InvalidSignature):
        staking_key().certificate.check_signature(b"message", signature)
    assert checks.calls == 0


def test_a_valid_signature_still_verifies() -> None:
    """The bounded reader and the curve check accept what the key signs, and only that."""
    key = staking_key()
    signature = key.sign(b"message")
    key.certificate.check_signature(b"message", signature)
    with pytest.raises(InvalidSignature):
        key.certificate.check_signature(b"messagf", signature)


def test_an_oversized_certificate_is_refused_before_it_is_parsed(
    stack: tuple[ChainVM, SimClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate field of 1 MB is refused on its length: the certificate parser (and
    its cache, which would hash it) never sees it."""
    vm, _ = stack
    parses = Counter(monkeypatch, certificate_module, "_parse_certificate")
    certificate = der_element(0x30, bytes(1_000_000))
    fields = b"\0\0" + bytes(4) + b"\1" * 32 + int(START).to_bytes(8, "big") + bytes(8)
    data = b"".join(
        (
            fields,
            len(certificate).to_bytes(4, "big"),
            certificate,
            (1).to_bytes(4, "big"),
            b"\xc0",
            (72).to_bytes(4, "big"),
            bytes(72),
        )
    )
    with pytest.raises(InvalidBlock, match="invalid certificate"):
        vm.parse_block(data)
    assert parses.calls == 0


# --- batched_parse_block ----------------------------------------------------------------


def test_a_batch_of_bogus_envelopes_stops_at_the_first(
    stack: tuple[ChainVM, SimClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """279,620 two-byte elements (one Ancestors message): one envelope decoded, the
    failure named at index 0."""
    vm, _ = stack
    decodes = Counter(monkeypatch, proposer_verify, "decode_block")
    batch = [b"\0\0"] * (MAX_CONTAINERS_LEN // 6)
    with pytest.raises(InvalidBlock) as caught:
        batched_parse_block(vm, batch)
    assert caught.value.index == 0
    assert decodes.calls == 1


@pytest.mark.slow
def test_a_batch_of_bogus_envelopes_holds_no_failure_per_element(
    stack: tuple[ChainVM, SimClock],
) -> None:
    """A quarter of that message peaks far below the 100 MB goal (about 100 MB when every
    element's failure was kept): bounded by the batch's own lists of references."""
    vm, _ = stack
    batch = [b"\0\0"] * (MAX_CONTAINERS_LEN // 24)
    tracemalloc.start()
    try:
        with pytest.raises(InvalidBlock):
            batched_parse_block(vm, batch)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000


def test_signatures_are_checked_only_up_to_the_first_bad_element(
    stack: tuple[ChainVM, SimClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signed envelopes whose third inner block is bad: the inner batch fails at index 2
    and only the signatures of elements 0..2 are checked."""
    vm, _ = stack
    inner = _inner_bytes(vm)
    batch = [_signed(vm, n, inner) for n in range(12)]
    batch[2] = _signed(vm, 2, b"\xc0")
    checks = Counter(monkeypatch, certificate_module, "_check_ecdsa")
    with pytest.raises(InvalidBlock) as caught:
        batched_parse_block(vm, batch)
    assert caught.value.index == 2
    assert checks.calls == 3


@pytest.mark.slow
def test_unsigned_envelopes_over_a_bad_inner_block_cost_one_inner_batch(
    stack: tuple[ChainVM, SimClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Minimal well-framed envelopes over empty inner blocks: one batched parse below,
    refused at index 0."""
    vm, _ = stack
    below = Counter(monkeypatch, CChainVM, "batched_parse_block")
    element = bytes(build_unsigned(b"\1" * 32, int(START), 0, b""))
    with pytest.raises(InvalidBlock) as caught:
        batched_parse_block(vm, [element] * 20_000)
    assert caught.value.index == 0
    assert below.calls == 1


@pytest.mark.parametrize(
    ("bad_signature", "bad_inner", "bad_frame"),
    [
        (3, 5, None),
        (5, 3, None),
        (4, None, 2),
        (None, 6, 1),
        (1, None, 7),
        (None, None, 0),
    ],
)
def test_a_batch_names_the_first_bad_element_as_the_fallback_does(
    stack: tuple[ChainVM, SimClock],
    bad_signature: int | None,
    bad_inner: int | None,
    bad_frame: int | None,
) -> None:
    """Whatever mix of bad signatures, bad inner blocks and bad framing, the batched path
    fails at the same index, with the same reason, as one parse_block per element."""
    vm, _ = stack
    inner = _inner_bytes(vm)
    batch = [_signed(vm, n, inner) for n in range(9)]
    if bad_signature is not None:
        batch[bad_signature] = _bad_signature(batch[bad_signature])
    if bad_inner is not None:
        batch[bad_inner] = _signed(vm, bad_inner, b"\xc1\x80")
    if bad_frame is not None:
        batch[bad_frame] = batch[bad_frame][:-1]
    with pytest.raises(InvalidBlock) as batched:
        batched_parse_block(vm, batch)
    with pytest.raises(InvalidBlock) as serial:
        serial_parse_block(vm, batch)
    assert batched.value.index == serial.value.index
    assert batched.value.reason == serial.value.reason


@functools.cache
def _element_pool() -> tuple[ChainVM, dict[str, list[bytes]]]:
    """A stack past its fork and, for each kind, four distinct elements: valid envelopes,
    envelopes with a bad signature, with an inner block the VM below refuses, cut short
    (bad framing), and bytes that are no envelope at all."""
    clock = SimClock(START)
    vm = full_stack(MemoryStore(), clock)
    grow(vm, clock, 14)
    inner = _inner_bytes(vm)
    good = [_signed(vm, n, inner) for n in range(4)]
    pool = {
        "good": good,
        "bad signature": [_bad_signature(_signed(vm, 10 + n, inner)) for n in range(4)],
        "bad inner": [_signed(vm, 20 + n, b"\xc1\x80") for n in range(4)],
        "bad framing": [data[: -1 - n] for n, data in enumerate(good)],
        "not an envelope": [bytes([0xF8 - n]) + b"\x01" for n in range(4)],
    }
    return vm, pool


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                ["good", "bad signature", "bad inner", "bad framing", "not an envelope"]
            ),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_any_mix_fails_where_the_fallback_fails(choices: list[tuple[str, int]]) -> None:
    """For any arrangement of good and bad elements, the batched path answers as one
    parse_block per element: the same blocks, or the same index and reason."""
    vm, pool = _element_pool()
    batch = [pool[kind][n] for kind, n in choices]
    try:
        serial = [bytes(block) for block in serial_parse_block(vm, batch)]
    except InvalidBlock as expected:
        with pytest.raises(InvalidBlock) as caught:
            batched_parse_block(vm, batch)
        assert (caught.value.index, caught.value.reason) == (expected.index, expected.reason)
    else:
        assert [bytes(block) for block in batched_parse_block(vm, batch)] == serial


def test_pre_fork_bytes_that_look_like_an_envelope_still_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An inner VM whose own blocks begin with two zero bytes (an envelope's codec
    version): each fails as an envelope, ends a run, and parses below as a pre-fork block,
    as one parse_block per element has it; the batch goes on past it."""
    monkeypatch.setattr(doubles, "_MAGIC", b"\0\0")
    inner = doubles.memory_vm(batching=True, blocks=4)
    vm = proposer_module.ProposerVM(inner, fork_time=math.inf, chain_id=1)
    batch = [bytes(inner.get_block(inner.get_block_id_at_height(h))) for h in (4, 3, 2)]
    assert all(data[:2] == b"\0\0" for data in batch)
    parsed = batched_parse_block(vm, batch)
    assert [block.id for block in parsed] == [b.id for b in serial_parse_block(vm, batch)]
    assert [bytes(block) for block in parsed] == batch
    assert all(not block.post_fork for block in parsed)  # type: ignore[attr-defined]


def test_a_valid_batch_still_parses_whole(stack: tuple[ChainVM, SimClock]) -> None:
    """Envelopes that all verify parse in one go, as the serial path parses them."""
    vm, _ = stack
    inner = _inner_bytes(vm)
    batch = [_signed(vm, n, inner) for n in range(6)]
    parsed = batched_parse_block(vm, batch)
    assert [bytes(block) for block in parsed] == batch
    assert [block.id for block in parsed] == [b.id for b in serial_parse_block(vm, batch)]


# --- verify -----------------------------------------------------------------------------


def _verifier() -> CChainVM:
    return CChainVM(MemoryStore(), clock=SimClock(START))


@pytest.mark.slow
def test_a_block_with_more_transactions_than_its_gas_pays_for_is_refused_unread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 1 MB block of 14,000 transfers (its transactions root consistent) is refused by
    counting: no transaction is decoded and no sender recovered."""
    import vmstack.cchain.types.transactions as types

    vm = _verifier()
    template = vm.build_block()
    txs = recoverable_transfers(14_000)
    header = attrs.evolve(template.header, tx_root=derive_root(tx.encode() for tx in txs))
    data = AVALANCHE.encode_block(Block(header, AVALANCHE.body(txs)))
    assert len(data) > 1_000_000
    recoveries = Counter(monkeypatch, types, "recover_address")
    decodes = Counter(monkeypatch, types.LegacyTx, "from_items")
    block = vm.parse_block(data)
    with pytest.raises(InvalidBlock, match="more than 714 transactions"):
        block.verify()
    assert recoveries.calls == 0
    assert decodes.calls == 0


@pytest.mark.slow
def test_verify_recovers_at_most_the_senders_the_gas_limit_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The most senders one valid block makes a node recover is gas_limit // 21000."""
    import vmstack.cchain.types.transactions as types

    data = committed_block(recoverable_transfers(GAS_LIMIT // TX_BASE_GAS + 50), _verifier())
    recoveries = Counter(monkeypatch, types, "recover_address")
    block = _verifier().parse_block(data)
    with pytest.raises(InvalidBlock, match="unaffordable"):  # keyless senders cannot pay
        block.verify()
    assert recoveries.calls == GAS_LIMIT // TX_BASE_GAS
