"""Bad input: garbage, truncated and tampered blocks raise InvalidBlock, from parse_block,
batched_parse_block and verify (damaged stores are tests/cchain/test_chain.py's)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cchain.chains import build_chain, new_vm
from vmstack.cchain import CChainVM, list_prefix
from vmstack.errors import BlockNotFound, InvalidBlock
from vmstack.store import MemoryStore

CHAIN = 8


@pytest.fixture(scope="module")
def sample() -> tuple[CChainVM, list[bytes]]:
    """A small chain on a MemoryStore (read-only use), and the blocks' bytes, oldest first."""
    vm = new_vm(MemoryStore())
    ids = build_chain(vm, CHAIN, txs=3)
    return vm, [bytes(vm.get_block(block_id)) for block_id in ids]


# --- parse_block and batched_parse_block -------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=600))
def test_garbage_is_an_invalid_block(data: bytes) -> None:
    """Random bytes never parse (a valid block is astronomically unlikely)."""
    vm = CChainVM(MemoryStore())
    with pytest.raises(InvalidBlock):
        vm.parse_block(data)


def test_truncated_blocks_are_invalid(sample: tuple[CChainVM, list[bytes]]) -> None:
    """Every truncation of a block (sampled) raises InvalidBlock."""
    vm, blocks = sample
    data = blocks[-1]
    for length in [*range(0, 40), *range(40, len(data), 37), len(data) - 1]:
        with pytest.raises(InvalidBlock):
            vm.parse_block(data[:length])


@pytest.mark.parametrize(
    "mutate",
    [
        lambda data: data + b"\x00",
        lambda data: b"\xf9\xff\xff" + data[3:],
        lambda data: data[:3] + b"\xf8" + data[4:],
        lambda data: list_prefix(len(data) + 10) + data,
        lambda data: b"\xbf" + b"\xff" * 8 + data,
    ],
    ids=["trailing byte", "long outer length", "header prefix", "wrapped", "2**64 length"],
)
def test_broken_framing_is_invalid(
    sample: tuple[CChainVM, list[bytes]], mutate: Callable[[bytes], bytes]
) -> None:
    """Trailing bytes, wrong or huge declared lengths: InvalidBlock, nothing allocated."""
    vm, blocks = sample
    with pytest.raises(InvalidBlock):
        vm.parse_block(mutate(blocks[-1]))


def test_wrong_body_shapes_are_invalid(sample: tuple[CChainVM, list[bytes]]) -> None:
    """A body with a missing or extra field, a string for a list, or a non-canonical
    version is refused at parse time."""
    vm, blocks = sample
    block = vm.parse_block(blocks[-1])
    header, body = block.header_rlp(), block.body_rlp()
    payload_start = 1 if body[0] < 0xF8 else 1 + body[0] - 0xF7
    fields = body[payload_start:]
    version_at = fields.rindex(b"\xc0\x80")  # empty uncles, then version 0
    variants = [
        fields + b"\x80",  # a fifth field
        fields[: version_at + 1],  # version and extData missing
        b"\x80" + fields[fields.index(b"\xc0", 1) :],  # a string for the transactions
        fields[: version_at + 1] + b"\x00" + fields[version_at + 2 :],  # non-canonical version
    ]
    for payload in variants:
        data = list_prefix(len(header) + len(payload)) + header + payload
        with pytest.raises(InvalidBlock):
            vm.parse_block(data)


def test_non_bytes_input_is_an_invalid_block() -> None:
    """Something that is not bytes is refused as InvalidBlock (a ValueError)."""
    vm = CChainVM(MemoryStore())
    for value in (None, 5, "f8", [b"\xc0"]):
        with pytest.raises(InvalidBlock):
            vm.parse_block(value)  # type: ignore[arg-type]


def test_a_bad_element_fails_the_whole_batch_naming_its_index(
    sample: tuple[CChainVM, list[bytes]],
) -> None:
    """batched_parse_block raises InvalidBlock with the index; nothing becomes processing."""
    vm, blocks = sample
    fresh = CChainVM(vm.store)
    batch = [*blocks[:3], blocks[3][:-1], *blocks[4:]]
    with pytest.raises(InvalidBlock) as caught:
        fresh.batched_parse_block(batch)
    assert caught.value.index == 3
    assert fresh.processing() == ()
    assert fresh.batched_parse_block([]) == []


def test_a_repeated_block_is_parsed_once(
    sample: tuple[CChainVM, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch repeating one block's bytes (as bytes and as views) answers one block per
    element, in order, and parses each distinct block once; a bad repeated element still
    fails the batch at its first index."""
    vm, blocks = sample
    fresh = CChainVM(vm.store)
    parses: list[bytes] = []
    parse = fresh.parse_block

    def counting(data: bytes) -> object:
        parses.append(bytes(data))
        return parse(data)

    monkeypatch.setattr(fresh, "parse_block", counting)
    batch = [blocks[0], memoryview(blocks[0]), blocks[1], bytearray(blocks[0]), blocks[1]]
    parsed = fresh.batched_parse_block(batch)  # type: ignore[arg-type]
    assert [block.id for block in parsed] == [parse(bytes(data)).id for data in batch]
    assert parsed[0] is parsed[1] is parsed[3]
    assert parses == [blocks[0], blocks[1]]
    bad = blocks[2][:-1]
    with pytest.raises(InvalidBlock) as caught:
        fresh.batched_parse_block([blocks[0], bad, bad])
    assert caught.value.index == 1


def test_tampered_bodies_fail_verify_and_never_replace_a_known_block() -> None:
    """A flipped byte inside a transaction keeps the ID: verify refuses it; against a
    processing block with that ID, parse refuses it; the real block is still served."""
    vm = new_vm(MemoryStore())
    build_chain(vm, 1)
    from vmstack.cchain import DEV_KEYS, DynamicFeeTx, address_of

    nonce = vm.account(address_of(DEV_KEYS[3])).nonce
    vm.add_transactions(
        [
            DynamicFeeTx(
                chain_id=43114, nonce=nonce, max_fee_per_gas=10**11, gas=21_000, to=b"\x11" * 20
            ).sign(DEV_KEYS[3])
        ]
    )
    block = vm.build_block()
    data = bytearray(bytes(block))
    data[-60] ^= 0x04
    forged = vm.parse_block(bytes(data))
    assert forged.id == block.id
    with pytest.raises(InvalidBlock):
        forged.verify()
    block.verify()
    with pytest.raises(InvalidBlock):
        vm.parse_block(bytes(data))
    assert vm.get_ancestors(block.id, 1, 0, 1.0) == [bytes(block)]
    block.accept()
    with pytest.raises(InvalidBlock):
        CChainVM(vm.store).parse_block(bytes(data)).verify()


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_mutated_blocks_raise_only_invalid_block(
    sample: tuple[CChainVM, list[bytes]], data: st.DataObject
) -> None:
    """Bit flips, cuts and insertions in a valid block: parse and verify either succeed or
    raise InvalidBlock, and a failed verify leaves nothing processing."""
    vm, blocks = sample
    fresh = CChainVM(vm.store, clock=vm.clock)
    raw = bytearray(blocks[-1])
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(raw) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip":
            raw[position] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "cut":
            del raw[position]
        else:
            raw.insert(position, data.draw(st.integers(0, 255)))
    try:
        block = fresh.parse_block(bytes(raw))
        block.verify()
    except InvalidBlock:
        assert fresh.processing() == ()


# --- verify ---------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["r=0", "y_parity=2", "high s"])
def test_a_transaction_whose_sender_cannot_be_recovered_fails_verify(damage: str) -> None:
    """The mempool refuses a transaction whose sender does not recover, and verify refuses
    a block carrying one, so an accepted block always restores on the slow path."""
    import attrs

    from vmstack import SimClock
    from vmstack.cchain import (
        DEV_KEYS,
        Block,
        CChainVM,
        DynamicFeeTx,
        execute_transactions,
        sign_transaction,
    )
    from vmstack.cchain.crypto import SECP256K1_N
    from vmstack.errors import InvalidTransaction
    from vmstack.store import MemoryStore

    good = sign_transaction(
        DynamicFeeTx(chain_id=43114, max_fee_per_gas=10**11, gas=21000, to=b"\x11" * 20),
        DEV_KEYS[0],
        43114,
    )
    bad = {
        "r=0": attrs.evolve(good, r=0),
        "y_parity=2": attrs.evolve(good, y_parity=2),
        "high s": attrs.evolve(good, s=SECP256K1_N - good.s, y_parity=1 - good.y_parity),
    }
    clock = SimClock(1.7e9)
    vm = CChainVM(MemoryStore(), clock=clock)
    with pytest.raises(InvalidTransaction):
        vm.add_transactions([bad[damage]])
    vm.add_transactions([good])
    clock.advance(2)
    built = vm.build_block()
    body = vm.flavour.body([bad[damage]])
    header = vm.flavour.seal(built.header, body, execute_transactions([bad[damage]])).header
    block = vm.parse_block(vm.flavour.encode_block(Block(header, body)))
    with pytest.raises(InvalidBlock, match="transaction 0"):
        block.verify()
    with pytest.raises(BlockNotFound):
        vm.get_block(block.id)
