"""Fuzzed block bytes against the C-chain codec, the byte-level helpers and the proposer decoder:
only ``InvalidBlock`` comes out, whatever still decodes re-encodes to the same bytes, and a
declared length of 2**60 allocates nothing."""

from __future__ import annotations

import hashlib
import tracemalloc
from collections.abc import Callable
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.mutations import (
    HUGE_LENGTHS,
    Overwrite,
    SetLength,
    byte_mutations,
    cchain_seeds,
    deeply_nested,
    huge_length_inputs,
    mutate,
    proposer_seeds,
    rlp_mutations,
    u32_mutations,
    vector_proposer_blocks,
    vector_seeds,
)
from vmstack.cchain import (
    AVALANCHE,
    ETHEREUM,
    Block,
    Flavour,
    Log,
    Receipt,
    block_bytes,
    block_hash,
    check_rlp,
    decode_receipts,
    decode_rlp,
    decode_transaction,
    encode_receipts,
    header_parent_hash,
    header_slice,
    keccak256,
    list_items,
    list_prefix,
    read_prefix,
    split_block,
)
from vmstack.errors import InvalidBlock
from vmstack.wrappers.proposer.envelope import (
    HEADER_LEN,
    Header,
    OptionBlock,
    decode_block,
    parse_block,
    peek_block,
)

#: Fuzzing: the full suite runs it.
pytestmark = pytest.mark.thorough

FLAVOURS = (ETHEREUM, AVALANCHE)
SEEDS = cchain_seeds() + vector_seeds()
BLOCK_SEEDS = [data for _, data in SEEDS]
PARTS = [split_block(data) for data in BLOCK_SEEDS]
HEADER_SEEDS = [header for header, _ in PARTS]
BODY_SEEDS = [body for _, body in PARTS]
TX_SEEDS = [
    tx.encode() for flavour, data in SEEDS[:10] for tx in flavour.decode_block(data).transactions
]
RECEIPT_SEEDS = [
    encode_receipts(
        [
            Receipt(status=1, cumulative_gas_used=21_000),
            Receipt(
                status=0,
                cumulative_gas_used=90_000,
                logs=(
                    Log(
                        address=b"\x11" * 20, topics=(b"\x22" * 32, b"\x33" * 32), data=b"\x01\x02"
                    ),
                ),
            ),
            Receipt(status=None, post_state=b"\x44" * 32, cumulative_gas_used=95_000),
        ]
    ),
    encode_receipts([]),
]
PROPOSER_CHAIN = bytes(32)
PROPOSER_SEEDS = proposer_seeds() + [
    cast(bytes, entry["data"])
    for entry in vector_proposer_blocks()
    if entry.get("kind") != "header"
    and entry["expect"].get(  # type: ignore[attr-defined]
        "parse_without_verification"
    )
    == "ok"
]

CODEC = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def attempt(call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)``, or ``None`` when it raises ``InvalidBlock`` (anything else escapes)."""
    try:
        return call(*args)
    except InvalidBlock as error:
        assert isinstance(error.reason, str) and error.reason
        return None


def check_decoded_block(flavour: Flavour, data: bytes, block: Block) -> None:
    """A block that decoded from ``data`` re-encodes to ``data`` and agrees with the helpers."""
    assert flavour.encode_block(block) == data
    header_rlp = bytes(header_slice(data))
    assert block.hash == keccak256(header_rlp) == block_hash(data)
    assert flavour.encode_header(block.header) == header_rlp
    assert header_parent_hash(header_rlp) == block.header.parent_hash
    header, body = split_block(data)
    assert header == header_rlp
    assert flavour.decode_body(body) == block.body
    assert block_bytes(header, body) == data
    for tx in block.transactions:
        attempt(tx.sender)


def exercise_block_bytes(data: bytes) -> None:
    """Every block-level entry point on ``data``: only ``InvalidBlock``, and consistent
    answers wherever something decodes."""
    for flavour in FLAVOURS:
        block = attempt(flavour.decode_block, data)
        if block is not None:
            check_decoded_block(flavour, data, block)
    parts = attempt(split_block, data)
    if parts is not None:
        assert block_bytes(*parts) == data
    view = attempt(header_slice, data)
    if view is not None:
        parent = attempt(header_parent_hash, view)
        assert parent is None or (len(parent) == 32 and parent in bytes(view))
        assert attempt(block_hash, data) == keccak256(view)
    items = attempt(list_items, data)
    assert items is None or b"".join(bytes(item) for item in items) in data
    assert (attempt(decode_rlp, data, "fuzz") is not None) == _framed(data)


def _framed(data: bytes) -> bool:
    try:
        check_rlp(data)
    except InvalidBlock:
        return False
    return True


@pytest.mark.parametrize("index", range(len(SEEDS)))
def test_seeds_are_valid_blocks(index: int) -> None:
    """Every seed decodes and re-encodes exactly, so the mutations start from valid bytes."""
    flavour, data = SEEDS[index]
    check_decoded_block(flavour, data, flavour.decode_block(data))


@pytest.mark.slow
@CODEC
@given(mutate(BLOCK_SEEDS, rlp_mutations))
def test_mutated_blocks_raise_only_invalid_block(data: bytes) -> None:
    """Mutated block bytes fail every decoder with InvalidBlock or decode to the same bytes."""
    exercise_block_bytes(data)


@pytest.mark.slow
@CODEC
@given(st.data())
def test_block_bytes_of_mutated_parts(data: st.DataObject) -> None:
    """block_bytes over a mutated header or body raises InvalidBlock or frames exactly them."""
    index = data.draw(st.integers(0, len(PARTS) - 1))
    header, body = PARTS[index]
    if data.draw(st.booleans()):
        header = data.draw(mutate([header], rlp_mutations))
    else:
        body = data.draw(mutate([body], rlp_mutations))
    stitched = attempt(block_bytes, header, body)
    if stitched is None:
        return
    payload = body[read_prefix(body, 0)[1] :]
    assert stitched == list_prefix(len(header) + len(payload)) + header + payload
    assert attempt(split_block, stitched) in (None, (header, body))


@pytest.mark.slow
@CODEC
@given(mutate(HEADER_SEEDS, rlp_mutations))
def test_mutated_headers(data: bytes) -> None:
    """A mutated header RLP gives InvalidBlock or the header's own first 32-byte field."""
    parent = attempt(header_parent_hash, data)
    for flavour in FLAVOURS:
        header = attempt(flavour.decode_header, data)
        if header is not None:
            assert flavour.encode_header(header) == data
            assert parent == header.parent_hash
    if parent is not None:
        start = read_prefix(data, 0)[1]
        assert parent == data[start + 1 : start + 33] and data[start] == 0xA0


@pytest.mark.slow
@CODEC
@given(mutate(BODY_SEEDS, rlp_mutations))
def test_mutated_bodies(data: bytes) -> None:
    """A mutated body RLP gives InvalidBlock or a body that re-encodes to the same bytes."""
    for flavour in FLAVOURS:
        body = attempt(flavour.decode_body, data)
        if body is not None:
            assert flavour.encode_body(body) == data


@pytest.mark.slow
@CODEC
@given(mutate(TX_SEEDS, rlp_mutations))
def test_mutated_transactions(data: bytes) -> None:
    """A mutated transaction gives InvalidBlock or re-encodes exactly; its sender is
    recovered or refused with InvalidBlock."""
    tx = attempt(decode_transaction, data)
    if tx is not None:
        assert tx.encode() == data
        attempt(tx.sender)


@pytest.mark.slow
@CODEC
@given(mutate(RECEIPT_SEEDS, rlp_mutations))
def test_mutated_receipts(data: bytes) -> None:
    """Mutated stored receipts give InvalidBlock or receipts that re-encode exactly."""
    receipts = attempt(decode_receipts, data)
    if receipts is not None:
        assert encode_receipts(receipts) == data


def _peak_while(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("seed", [1, 6], ids=["ethereum", "avalanche"])
def test_huge_declared_lengths_allocate_nothing(seed: int) -> None:
    """Inputs declaring 2**60 or 2**64 - 1 bytes fail with InvalidBlock and stay under 64 KiB
    of allocation in every decoder (the inputs themselves are about 2 KB)."""
    inputs = huge_length_inputs(BLOCK_SEEDS[seed])
    assert len(inputs) == 10

    def run_all() -> None:
        for bad in inputs:
            for call in (
                ETHEREUM.decode_block,
                AVALANCHE.decode_block,
                split_block,
                header_slice,
                header_parent_hash,
                check_rlp,
                list_items,
                ETHEREUM.decode_body,
                AVALANCHE.decode_header,
                decode_receipts,
            ):
                with pytest.raises(InvalidBlock):
                    call(bad)
            with pytest.raises(InvalidBlock):
                block_bytes(bad, BODY_SEEDS[0])
            with pytest.raises(InvalidBlock):
                block_bytes(HEADER_SEEDS[0], bad)
            with pytest.raises(InvalidBlock):
                decode_rlp(bad, "huge")

    assert _peak_while(run_all) < 64 * 1024


def _u32_length_fields(envelope: bytes) -> list[int]:
    """Offsets of the u32 length fields of a generated envelope (certificate, inner block)."""
    if envelope[2:6] == b"\x00\x00\x00\x01":
        return [38]
    return [54, 58 + int.from_bytes(envelope[54:58], "big")]


@pytest.mark.parametrize("length", sorted({min(n, 2**32 - 1) for n in HUGE_LENGTHS}))
def test_huge_declared_length_in_a_proposer_envelope(length: int) -> None:
    """A proposer envelope whose u32 lengths claim up to 4 GiB is refused without allocating."""
    for seed in proposer_seeds():
        for position in _u32_length_fields(seed):
            bad = Overwrite(position, length).apply(seed)

            def run(bad: bytes = bad) -> None:
                with pytest.raises(InvalidBlock):
                    decode_block(bad)
                with pytest.raises(InvalidBlock):
                    peek_block(bad)

            assert bad != seed
            assert _peak_while(run) < 64 * 1024


@pytest.mark.parametrize("depth", [200, 1_000, 10_000])
def test_deeply_nested_lists_are_invalid_blocks(depth: int) -> None:
    """Lists nested thousands deep (valid RLP, never a block) fail with InvalidBlock, not a
    RecursionError, in every decoder."""
    data = deeply_nested(depth)
    for call in (
        ETHEREUM.decode_block,
        AVALANCHE.decode_block,
        ETHEREUM.decode_body,
        AVALANCHE.decode_body,
        ETHEREUM.decode_header,
        decode_receipts,
        decode_transaction,
    ):
        with pytest.raises(InvalidBlock):
            call(data)
    wrapped = SetLength(0, len(data)).apply(b"\xc0")  # a list whose payload is cut off
    with pytest.raises(InvalidBlock):
        ETHEREUM.decode_block(wrapped)


@CODEC
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_invalid_block(data: bytes) -> None:
    """Arbitrary bytes through every block entry point give only InvalidBlock."""
    exercise_block_bytes(data)


def exercise_envelope(data: bytes) -> None:
    """The proposer decoder on ``data``: only ``InvalidBlock``; whatever decodes keeps its
    bytes, its ID rule and its parent."""
    block = attempt(decode_block, data)
    peeked = attempt(peek_block, data)
    if block is None:
        return
    assert bytes(block) == data
    if isinstance(block, OptionBlock):
        assert block.id == hashlib.sha256(data).digest()
    else:
        assert block.id == hashlib.sha256(data[: block.unsigned_len]).digest()
        assert block.inner in data
    assert peeked == (block.id, block.parent_id)
    attempt(parse_block, data, PROPOSER_CHAIN)


@pytest.mark.slow
@CODEC
@given(mutate(PROPOSER_SEEDS, u32_mutations))
def test_mutated_proposer_envelopes(data: bytes) -> None:
    """Mutated proposer envelopes give InvalidBlock or decode to the very same bytes."""
    exercise_envelope(data)


@settings(max_examples=100, deadline=None)
@given(mutate([bytes(Header(b"\x01" * 32, b"\x02" * 32, b"\x03" * 32))], byte_mutations))
def test_mutated_proposer_headers(data: bytes) -> None:
    """A mutated 98-byte signed header decodes only when it is exactly a header."""
    header = attempt(Header.decode, data)
    if header is not None:
        assert len(data) == HEADER_LEN and bytes(header) == data
